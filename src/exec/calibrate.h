/* calibrate.h — measured op times and live bytes of an executor trace -> spec costs the
 * simulator can use (`bigmac calibrate`, docs/executor.md).
 *
 * Per module (fwd_ms, bwd_ms are per microbatch for the whole module, as in the spec):
 *   encoder / generator   median duration of its F (B) ops over the microbatches (the median,
 *                         not the mean: one op preempted by another process must not skew it);
 *   backbone              sum over chunks of the chunk's median F (B) duration: the whole model's
 *                         per-microbatch cost (the planner divides it over chunks again);
 *   act_mib               sum of the role's activation increases in the memory traces / M
 *                         (each forward's ctx bytes appear as one increase), i.e. the mean bytes
 *                         one microbatch keeps alive, whole module; with several modules of one
 *                         role the role's bytes are split in proportion to their forward times.
 *   state_mib, out_mib    not measured: left as they were (the trace's table modules' values).
 * Modules without compute ops in the trace keep their costs. */
#ifndef BM_EXEC_CALIBRATE_H
#define BM_EXEC_CALIBRATE_H

#include "bigmac.h"

/* costs[t->n_modules] filled (starting from t's module costs). mean = 1: means of the durations
 * instead of medians (for traces of undisturbed runs, where a makespan is a sum of durations and
 * the mean is the unbiased estimate of it). */
int bm_calibrate(const struct bm_table *t, const struct bm_timeline *tl, int mean, struct bm_cost *costs,
                 struct bm_err *err);

#endif
