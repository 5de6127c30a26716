/* expect.h — the expected makespan under op-time spread: a pipeline's makespan is a max-plus
 * sum of op times, so under varying op times it is longer than under their means. Each module
 * may carry a spread (module cost.spread = sigma of log op time, fitted by `bigmac calibrate`);
 * bm_simulate_expected draws every compute op's duration factor from a lognormal of mean 1,
 * exp(sigma z - sigma^2/2), z ~ N(0, 1) (xoshiro256** seeded by 'seed', one draw per op in
 * rank-major program order), simulates the table 'samples' times and averages the makespans.
 * With every spread 0 it is the plain simulation's makespan. docs/simulator.md. */
#ifndef BM_SIM_EXPECT_H
#define BM_SIM_EXPECT_H

#include "bigmac.h"

#define BM_EXPECT_SAMPLES 32 /* what `bigmac simulate` draws */

/* 1 when some module of t has spread > 0. */
int bm_table_has_spread(const struct bm_table *t);
/* Mean (and standard deviation over the samples, sd may be NULL) of the makespan; BM_ERR when
 * a simulation fails (err) or memory runs out. */
int bm_simulate_expected(const struct bm_table *t, const struct bm_sim_opts *o, int samples, uint64_t seed,
                         double *mean_ms, double *sd_ms, struct bm_err *err);
/* bm_simulate with every compute op's duration multiplied by op_scale[global op id] (rank r's
 * op i has id = sum of the earlier ranks' op counts + i); op_scale NULL = bm_simulate. */
int bm_simulate_op_scaled(const struct bm_table *t, const struct bm_sim_opts *o, const double *op_scale,
                          struct bm_timeline **out, struct bm_err *err);

#endif
