/* split.h — the split-backward defaults of a module's cost (docs/spec.md "Split backward"):
 * what w_ms and act_w_mib mean when the spec gives neither the numbers nor an "arch" to derive
 * them from. The simulator's cost model (src/sim/cost.h) and the table writers share them. */
#ifndef BM_SPEC_SPLIT_H
#define BM_SPEC_SPLIT_H

#include "bigmac.h"

/* W is half of the backward (the paper's T_B = T_W), and half of the activation stays alive
 * from B to W. */
#define BM_COST_W_FRAC 0.5
#define BM_COST_ACT_W_FRAC 0.5
/* The weight-gradient part of c's bwd_ms: c->w_ms when given (0 < w_ms <= bwd_ms), else
 * bwd_ms * BM_COST_W_FRAC. */
double bm_cost_w_ms(const struct bm_cost *c);
/* Fraction of c's act_mib held from B to W: act_w_mib / act_mib when given, else
 * BM_COST_ACT_W_FRAC. */
double bm_cost_act_w_frac(const struct bm_cost *c);

#endif
