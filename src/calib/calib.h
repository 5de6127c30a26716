/* calib.h — calibration, the one package that turns measurements into a cost model
 * (`bigmac calibrate`, docs/executor.md "Calibration", docs/simulator.md "Predicting a run"):
 *
 *   fit.c       the estimators: measured op times, live bytes and message sizes of an executor
 *               trace -> module costs, per-rank and per-microbatch scales, spread, dispatch
 *               times and link latency (was src/sim/calibrate.c)
 *   step_log.c  the step after the walk from the executor's step log (`train --log`):
 *               device.optimizer_ms_per_gib (was src/sim/calibrate_step.c)
 *   traces.c    the whole calibration of n trace files: load, check they are runs of one plan,
 *               fit, and the cost model of that plan (was src/report/calibration.c)
 *   write.c     what is written: the spec rewritten with the measured figures, or the
 *               bigmac-costs fragment (was src/spec/calibrated.c)
 *
 * Calibration produces figures (struct bm_spec_calibration), the cost model they make for the
 * traced plan (struct bm_calibration.costs, include/bigmac_cost.h) and a calibrated spec; it
 * never patches a table.
 *
 * ---------------------------------------------------------------- the estimators (fit.c)
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
 *   out_mib               the mean bytes of the sends of the tensors the module produces, from the
 *                         trace's message sizes (both executors record them, "bytes" in a send's
 *                         or recv's args); left as it was without them.
 *   state_mib             not measured: left as it was (the trace's table modules' value).
 *   recomputed modules    ("recompute": "full" in the trace's table) bwd_ms = the B median minus
 *                         the F median (the measured B reran the forward first); their trace
 *                         shows only the kept input between F and B, so act_mib then measures
 *                         the input, not the activations (known limit).
 * Modules without compute ops in the trace keep their costs. */
#ifndef BM_CALIB_H
#define BM_CALIB_H

#include "bigmac.h"
#include "bigmac_cost.h"

/* costs[t->n_modules] filled (starting from t's module costs). mean = 1: means of the durations
 * instead of medians (for traces of undisturbed runs, where a makespan is a sum of durations and
 * the mean is the unbiased estimate of it). */
int bm_calibrate(const struct bm_table *t, const struct bm_costs *km, const struct bm_timeline *tl, int mean, struct bm_cost *costs,
                 struct bm_err *err);
/* The same over n_runs timelines of one table (several runs or steps of the same plan): the
 * durations of all of them pooled per slot before the median/mean, the bytes averaged. */
int bm_calibrate_runs(const struct bm_table *t, const struct bm_costs *km, const struct bm_timeline *const *tls, int n_runs, int mean,
                      struct bm_cost *costs, struct bm_err *err);
/* Compute-time multiplier of every rank (device.rank_time_scale, src/sim/cost.h): the rank's
 * measured compute time over what the calibrated per-module costs (costs[t->n_modules], e.g. from
 * bm_calibrate_runs; backbone split by t's chunk weights, no microbatch scale) give for its ops,
 * over all n_runs timelines. The module costs are means over every rank; ranks that run slower
 * (a busier core, a heavier chunk than its layer share) get > 1. out[t->pp]. */
void bm_calibrate_rank_scale(const struct bm_table *t, const struct bm_costs *km, const struct bm_timeline *const *tls, int n_runs,
                             const struct bm_cost *costs, double *out);
/* 1 when b has a's shape: ranks, chunks, microbatches, modules and every rank's op list. */
int bm_calibrate_same_table(const struct bm_table *a, const struct bm_table *b);

/* Measured encoder cost multiplier of every microbatch (data.encoder_cost_scale {"values"}):
 * out[mb] (t->microbatches values) = the measured durations of mb's encoder F and B ops over
 * what costs (and rank_scale, one per rank, NULL = 1) predict for them, pooled over the runs;
 * 1 for a microbatch without encoder ops. With median costs the values spread around 1: they
 * carry the real per-microbatch variation (image counts) the medians leave out. */
void bm_calibrate_mb_scale(const struct bm_table *t, const struct bm_timeline *const *tls, int n_runs,
                           const struct bm_cost *costs, const double *rank_scale, double *out);

/* Both at once, as the simulator combines them (an encoder op on rank r takes cost x
 * mb_scale[mb] x rank_scale[r]): alternately the rank scale given the microbatch scales and the
 * microbatch scales given the rank scale, until the rank scale moves less than 1e-12 (at most
 * 200 rounds; each round shrinks the error by the encoder share of a rank's time). rank_scale
 * NULL: the microbatch scales alone (ranks at 1). */
void bm_calibrate_scales(const struct bm_table *t, const struct bm_costs *km, const struct bm_timeline *const *tls, int n_runs,
                         const struct bm_cost *costs, double *rank_scale, double *mb_scale);

/* The per-op dispatch time (device.op_overhead_us, in ms here): the mean gap between an op's
 * start and the end of the rank's previous op, over every op but each rank's first, pooled
 * over the runs (negative gaps, overlapping measured ops, count 0). In the executor that is
 * the bookkeeping and MPI progress between ops (polling the pending sends, the memory trace,
 * posting and testing requests): ~2 us per op on this project's VM, 2-3% of a tiny-mllm step,
 * on every rank's critical chain. */
double bm_calibrate_op_overhead_ms(const struct bm_table *t, const struct bm_timeline *const *tls, int n_runs);

/* The executor's time outside the compute ops, as the simulator models it (src/sim/cost.h;
 * device.op_overhead_us, op_overhead_sd_us, recv_overhead_us and step_lead_us; ms here). */
struct bm_dispatch_fit {
    double op_ms;    /* bm_calibrate_op_overhead_ms: the mean gap before an op */
    double op_sd_ms; /* the standard deviation of those gaps (the same ops, negative gaps 0) */
    double recv_ms;  /* the mean duration of the recvs whose message was already there: whose
                      * send was issued at least the run's mean transfer time (send issue to the
                      * end of a recv that waited for it, over the recvs that did) before the
                      * recv started; 0 without such recvs */
    double lead_ms;  /* the mean over ranks of the first op's start (from the step's start),
                      * less op_ms, at least 0: the executor's step setup */
};
/* All four, pooled over the n_runs timelines. BM_ERR (err) only when out of memory. */
int bm_calibrate_dispatch(const struct bm_table *t, const struct bm_timeline *const *tls, int n_runs,
                          struct bm_dispatch_fit *out, struct bm_err *err);

/* Op-time spread per module (module cost.spread, src/sim/expect.h): the standard deviation of
 * log(measured duration / modelled duration) over the module's F and B ops, each (module or
 * backbone chunk, pass, rank, run) slot centred on its own mean so only the op-to-op variation
 * within a step is left (not the drift of the machine's speed from run to run); the model includes the chunk weight, mb_scale (encoders) and rank_scale (either may be
 * NULL = 1). out[t->n_modules]; 0 for modules with fewer than two ops. */
void bm_calibrate_spread(const struct bm_table *t, const struct bm_costs *km, const struct bm_timeline *const *tls, int n_runs,
                         const struct bm_cost *costs, const double *rank_scale, const double *mb_scale, double *out);

/* The link latency (device.link_latency_us, in ms here) the measured transfers imply: for every
 * recv whose rank reached it no later than the matching send was issued (it waited for the
 * whole transfer), the time from the send's issue to the recv's completion minus what the model
 * charges for the bytes (tensor mib over device.link_gbytes_per_s; 0 for an unlimited link).
 * Sends and recvs match by (sender, receiver, tensor, microbatch), the i-th send to the i-th
 * recv (bm_match_build). Per ordered pair of ranks the mean over its waiting recvs, pooled over the runs; the two
 * directions of a pair averaged (an error e in the ranks' clock offset adds e to one direction
 * and takes it from the other), a pair seen in one direction only counted as it is; the mean
 * over the pairs. Only ranks on one host (device.ranks_per_host) count. Returns the number of
 * waiting recvs used (0: no estimate, *latency_ms untouched) and stores the mean, which is
 * negative when the modelled bytes alone take longer than the measured transfers (out_mib
 * overstating the tensors): the caller decides what to write then. */
long bm_calibrate_link_latency_ms(const struct bm_table *t, const struct bm_costs *km, const struct bm_timeline *const *tls, int n_runs,
                                  double *latency_ms);

/* Every fitted number over several runs, robust to a disturbed run (docs/simulator.md
 * "Predicting a run"): each run is calibrated on its own (bm_calibrate_runs with one timeline,
 * means within the run when mean = 1, medians otherwise; its encoder and rank scales
 * (bm_calibrate_scales, the rank scale only when rank_scale is not NULL), its dispatch times
 * (bm_calibrate_dispatch), its spread when spread is not NULL), then every number (each module's
 * fwd_ms, bwd_ms, w_ms, act_mib; each microbatch's and each rank's scale; each dispatch number;
 * each module's spread) is
 * the median of its n_runs per-run values (the mean of the middle two for an even count). A run
 * that another process disturbed (one op preempted for milliseconds) moves the pooled mean of
 * every op slot it touched; it moves the median over runs only as one run of n_runs. Within a
 * run the mean stays the estimate (a makespan is a sum of that step's op times).
 * costs[t->n_modules]; mb_scale[t->microbatches] (1 without encoder ops); rank_scale[t->pp] or
 * NULL; spread[t->n_modules] or NULL; *dispatch. BM_ERR (err) on no run or out of memory. */
int bm_calibrate_median_runs(const struct bm_table *t, const struct bm_costs *km, const struct bm_timeline *const *tls, int n_runs, int mean,
                             struct bm_cost *costs, double *mb_scale, double *rank_scale, double *spread,
                             struct bm_dispatch_fit *dispatch, struct bm_err *err);
/* bm_calibrate_link_latency_ms of each run, the median over the runs that have an estimate
 * (returns how many; 0: *latency_ms untouched). */
int bm_calibrate_median_link_latency_ms(const struct bm_table *t, const struct bm_costs *km, const struct bm_timeline *const *tls, int n_runs,
                                        double *latency_ms);

/* ---------------------------------------------------------------- the optimizer from a step log (step_log.c)
 *
 * the step after the walk from the executor's step log (`train --log`):
 * device.optimizer_ms_per_gib (src/sim/step.h) fitted from each rank's measured optimizer time
 * and the optimizer state it updated. */

/* The median over the log's steps (the first left out when there are more) and ranks of
 * optimizer_ms / (optimizer_state_bytes / 2^30), into *ms_per_gib; *n: the values it is the
 * median of. BM_ERR (err names path:line and the key) for an unreadable log, a line that is not
 * a step object, or a log without those keys (written by an older bigmac). */
int bm_calibrate_optimizer(const char *path, double *ms_per_gib, int *n, struct bm_err *err);

/* The collectives' ring fitted from a step log's "collectives" (each rank's: op, group, ranks,
 * bytes, start_ms, end_ms, link): a collective of one step is the members' records of the same
 * (group, module, chunk, of, op) (a log of several runs appended one after another: each run's
 * own, a step number not above the previous line's starting the next run); its time is that of
 * the member that started last (it waited for no one), from the later of the end of that rank's
 * walk and of its previous collective (its work to issue it; ZeRO-1's all-gathers from its
 * optimizer's end) to the collective's end: the span alone when the rank's record has no
 * walk_ms; each collective's median over the steps (the first of each run left out when there
 * are more) is one point, left out when that member started it inside its walk ("in_walk": its
 * end only seen after an op) and the link class has points that are not; per link class (intra, inter host) a least-squares fit through the
 * origin of  t = f(n-1)/n * bytes / bw + f(n-1) * latency  (f = 2 for an all-reduce, 1 for a
 * reduce-scatter or an all-gather: src/sim/step.h). When the points cannot tell bandwidth from
 * latency (one size) or the fit is unphysical, latency alone is fitted (have_bw = 0). */
struct bm_coll_link {
    int n;                 /* collectives (points) of this class; 0: none, nothing fitted */
    int have_bw;           /* 1: gbytes_per_s fitted */
    double gbytes_per_s, latency_us;
};
struct bm_coll_fit {
    struct bm_coll_link intra, inter;
};
int bm_calibrate_collectives(const char *path, struct bm_coll_fit *out, struct bm_err *err);

/* The model's real weights from a step log's first step: param_mib[m] for the module names[m]
 * (0 .. n_modules-1) = the bytes of the weights of every copy's "params" entry (a replicated
 * module once, each backbone chunk once) / 2^20; -1 where the log has none of it. BM_ERR when the
 * log cannot be read or has no "params". */
int bm_calibrate_param_sizes(const char *path, int n_modules, const char *const *names, double *param_mib,
                             struct bm_err *err);

/* ---------------------------------------------------------------- what is written (write.c)
 *
 * what `bigmac calibrate` writes, in the spec's own schema: the spec rewritten
 * with measured costs (every traced module's "cost", data.encoder_cost_scale.values,
 * device.op_overhead_us, device.link_latency_us and device.rank_time_scale), or the cost fragment
 * {"format": "bigmac-costs", ...} whose "cost" objects paste into a spec (docs/executor.md
 * "Calibration"). The measurements come from fit.c; write.c only knows where they go in a
 * spec. */

/* A calibration's figures, per module of the traced table (names[k], costs[k]). */
struct bm_spec_calibration {
    int n_modules;
    const char *const *names;     /* [n_modules] module names */
    const struct bm_cost *costs;  /* [n_modules] measured costs (w_ms kept when 0 < w_ms < bwd_ms) */
    const double *spread;         /* [n_modules] cost.spread, or NULL (none written) */
    const double *rank_scale;     /* [pp] device.rank_time_scale, or NULL */
    int pp;
    const double *mb_scale;       /* [microbatches] data.encoder_cost_scale.values, or NULL */
    int microbatches;
    double op_overhead_us;        /* device.op_overhead_us */
    double op_overhead_sd_us;     /* device.op_overhead_sd_us, written only with spread (both feed
                                   * the expected makespan) */
    double recv_overhead_us;      /* device.recv_overhead_us */
    double step_lead_us;          /* device.step_lead_us */
    int have_link_latency;        /* 1: device.link_latency_us = link_latency_us is written */
    double link_latency_us;
    int have_optimizer;           /* 1: device.optimizer_ms_per_gib is written (calibrate --step-log) */
    double optimizer_ms_per_gib;
    /* calibrate --step-log: the collectives' ring (device.coll_*, inter_host_coll_*); [0] within
     * a host, [1] across hosts; have_coll_bw / have_coll_lat: written */
    int have_coll_bw[2], have_coll_lat[2];
    double coll_gbytes_per_s[2], coll_latency_us[2];
};

/* Write the spec at spec_path with c's figures in place to out ("-" = stdout, then a newline):
 * each module of c found by name gets its "cost" replaced, data.encoder_cost_scale becomes
 * {"values": mb_scale} (removed when mb_scale is NULL), device.op_overhead_us,
 * recv_overhead_us, step_lead_us, op_overhead_sd_us (with spread; removed without),
 * device.link_latency_us (when measured) and device.rank_time_scale are set; every other key stays where it was. The spec is read through
 * the guarded JSON parser (bm_json_parse); it is not checked as a spec. */
int bm_spec_write_calibrated(const char *spec_path, const struct bm_spec_calibration *c, const char *out,
                             struct bm_err *err);

/* Write the cost fragment of c to out ("-" = stdout): {"format": "bigmac-costs", "version": 1,
 * "trace": traces[0], "traces": [...], "modules": [{"name", "cost"}], "op_overhead_us",
 * "recv_overhead_us", "step_lead_us", "op_overhead_sd_us" (with spread), "link_latency_us" and "rank_time_scale" (when measured), "encoder_cost_scale": {"values"} (when measured)}. */
int bm_spec_write_costs(const struct bm_spec_calibration *c, const char *const *traces, int n_traces,
                        const char *out, struct bm_err *err);

/* ---------------------------------------------------------------- a calibration of trace files (traces.c)
 *
 * `bigmac calibrate` as a library call: measured executor traces (one plan,
 * possibly several runs) loaded and turned into the figures a calibrated spec carries (module
 * costs, per-rank time scale, per-microbatch encoder scale, cost spread, per-op dispatch time
 * and link latency) by the estimators of fit.c, and the cost model they make for the traced
 * plan; write.c writes them out as a spec. */

struct bm_calibration_opts {
    int mean;        /* means instead of medians (--mean) */
    int rank_scale;  /* also the per-rank time scale (--rank-scale) */
    int spread;      /* also each module's cost spread (--spread) */
    int run_median;  /* every trace fitted on its own, then the median over the traces of every
                      * number (--run-median, bm_calibrate_median_runs) */
    int replica;     /* of a data-parallel run's trace (every replica's ranks): -1 the replica
                      * with the longest walk in each trace (what ends the step: --replica
                      * slowest, the default), d >= 0 replica d in every trace (--replica d).
                      * A zeroed struct takes replica 0; bm_calibration_build(o = NULL) -1. */
};

/* The figures (cal, pointing into the arrays here) and what they came from. */
struct bm_calibration {
    struct bm_spec_calibration cal;
    struct bm_table **t;             /* [n] the traces' tables (t[0] names the modules) */
    struct bm_costs **k;             /* [n] the cost models the traces carry */
    struct bm_timeline **tl;         /* [n] their measured timelines */
    struct bm_costs *model;          /* t[0]'s cost model with the calibrated figures in place:
                                      * what the calibrated spec gives this plan */
    int n;
    int *replica;                    /* [n] the data-parallel replica each trace's fits took */
    struct bm_cost *costs;           /* [n_modules] */
    double *rank_scale, *mb_scale, *spread; /* NULL when not measured */
    const char **names;              /* [n_modules], into t[0] */
    double link_latency_short_us;    /* > 0: the transfers were this much shorter than their
                                      * bytes' modelled time, so the latency written is 0 (the
                                      * caller warns: out_mib overstate the tensors) */
};

/* Load the n traces (each measured by `bigmac train --trace`, all of one plan: another plan's
 * or a simulated trace is refused by name) and calibrate them into *out. The microbatch
 * encoder scale is measured when the plan has an encoder (together with the rank scale when
 * asked for). BM_ERR with err set on failure (out then holds nothing). Release with
 * bm_calibration_free (safe on a failed or zeroed one). */
int bm_calibration_build(const char *const *traces, int n, const struct bm_calibration_opts *o,
                         struct bm_calibration *out, struct bm_err *err);
void bm_calibration_free(struct bm_calibration *c);

#endif
