/* recompute.h — set a spec's per-module "recompute" by role (see src/sim/cost.h for what
 * recomputation costs and saves). */
#ifndef BM_SPEC_RECOMPUTE_H
#define BM_SPEC_RECOMPUTE_H

#include "bigmac.h"

#define BM_RECOMPUTE_NESTED ((1u << BM_ROLE_ENCODER) | (1u << BM_ROLE_GENERATOR))
#define BM_RECOMPUTE_ALL (BM_RECOMPUTE_NESTED | (1u << BM_ROLE_BACKBONE))

/* Set recompute = on for every module whose role bit (1 << role) is in role_mask; the other
 * modules keep theirs. When saved is not NULL it receives every module's previous value
 * (s->n_modules ints) for bm_spec_recompute_restore. */
void bm_spec_recompute_roles(struct bm_spec *s, unsigned role_mask, int on, int *saved);
/* Put back the values bm_spec_recompute_roles saved. */
void bm_spec_recompute_restore(struct bm_spec *s, const int *saved);

#endif
