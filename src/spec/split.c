/* split.c — the split-backward defaults of a module's cost (see split.h). */
#include "spec/split.h"

double bm_cost_w_ms(const struct bm_cost *c)
{
    if (c->w_ms > 0 && c->w_ms <= c->bwd_ms) return c->w_ms;
    return c->bwd_ms * BM_COST_W_FRAC;
}

double bm_cost_act_w_frac(const struct bm_cost *c)
{
    if (c->act_mib <= 0) return BM_COST_ACT_W_FRAC;
    if (c->act_w_mib > 0 && c->act_w_mib <= c->act_mib) return c->act_w_mib / c->act_mib;
    return BM_COST_ACT_W_FRAC;
}
