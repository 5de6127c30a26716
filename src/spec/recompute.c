/* recompute.c — switch activation recomputation on for whole roles of a loaded spec (the
 * memory-equal baselines of `simulate --compare` and the frontier sweep), and back. */
#include "bigmac.h"
#include "spec/recompute.h"

void bm_spec_recompute_roles(struct bm_spec *s, unsigned role_mask, int on, int *saved)
{
    for (int i = 0; i < s->n_modules; i++) {
        if (saved) saved[i] = s->modules[i].recompute;
        if (role_mask & (1u << s->modules[i].role)) s->modules[i].recompute = on ? 1 : 0;
    }
}

void bm_spec_recompute_restore(struct bm_spec *s, const int *saved)
{
    for (int i = 0; i < s->n_modules; i++) s->modules[i].recompute = saved[i];
}
