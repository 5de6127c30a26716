/* expect.h — the expected makespan under op-time spread: a pipeline's makespan is a max-plus
 * sum of op times, so under varying op times it is longer than under their means. Each module
 * may carry a spread (module cost.spread = sigma of log op time, fitted by `bigmac calibrate`);
 * bm_simulate_expected draws every compute op's duration factor from a lognormal of mean 1,
 * exp(sigma z - sigma^2/2), z ~ N(0, 1) (xoshiro256** seeded by 'seed', one draw per op in
 * rank-major program order), simulates the table 'samples' times and averages the makespans.
 * When the cost model has a dispatch spread (op_overhead_sd_ms > 0, device.op_overhead_sd_us) each
 * op's dispatch is drawn too, from a gamma distribution of mean op_overhead_ms and that
 * standard deviation (the executor's gaps between ops: mostly short, rarely long; a gamma of
 * shape < 1 has that form), one draw per op after its duration factor.
 * With every spread 0 it is the plain simulation's makespan. docs/simulator.md. */
#ifndef BM_SIM_EXPECT_H
#define BM_SIM_EXPECT_H

#include "bigmac.h"
#include "bigmac_cost.h"
#include "util/util.h"

#define BM_EXPECT_SAMPLES 32 /* what `bigmac simulate` draws */

/* 1 when some module of c has spread > 0 or the dispatch has (op_overhead_sd_ms > 0). */
int bm_costs_have_spread(const struct bm_costs *c);
/* Mean (and standard deviation over the samples, sd may be NULL) of the makespan; BM_ERR when
 * a simulation fails (err) or memory runs out. */
int bm_simulate_expected(const struct bm_table *t, const struct bm_costs *c, const struct bm_sim_opts *o,
                         int samples, uint64_t seed, double *mean_ms, double *sd_ms, struct bm_err *err);
/* bm_simulate with every compute op's duration multiplied by op_scale[global op id] (rank r's
 * op i has id = sum of the earlier ranks' op counts + i); op_scale NULL = bm_simulate. */
int bm_simulate_op_scaled(const struct bm_table *t, const struct bm_costs *c, const struct bm_sim_opts *o,
                          const double *op_scale, struct bm_timeline **out, struct bm_err *err);
/* The same with every op's dispatch time given: dispatch_ms[global op id] instead of
 * c->op_overhead_ms (NULL = c->op_overhead_ms for every op). */
int bm_simulate_drawn(const struct bm_table *t, const struct bm_costs *c, const struct bm_sim_opts *o,
                      const double *op_scale, const double *dispatch_ms, struct bm_timeline **out,
                      struct bm_err *err);
/* The simulator's one entry: bm_simulate_drawn, and with 'summary' bm_simulate_summary's timeline
 * (no op times, no memory trace; every figure the same). */
int bm_simulate_run(const struct bm_table *t, const struct bm_costs *c, const struct bm_sim_opts *o,
                    const double *op_scale, const double *dispatch_ms, int summary, struct bm_timeline **out,
                    struct bm_err *err);
/* 1 when tl holds every op's time of t (ranks and op counts match, ops present): not a
 * bm_simulate_summary timeline. Renderers and trace writers refuse one without. */
int bm_timeline_per_op(const struct bm_table *t, const struct bm_timeline *tl);
/* A gamma-distributed draw of mean 'mean' and standard deviation 'sd' (> 0 both; sd 0 gives
 * the mean). */
double bm_rng_gamma_mean_sd(struct bm_rng *rng, double mean, double sd);

#endif
