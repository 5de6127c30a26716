/* step.h — the whole training step after the pipeline walk: the gradient synchronisation over
 * the data-parallel replicas and the replicated modules, then the optimizer, and the state
 * memory split into weights, gradients and optimizer state (docs/simulator.md "The step").
 * Pure functions of (table, cost model, walk timeline); the table carries dp, zero and the
 * placement over hosts, the cost model the state sizes, links and optimizer time.
 *
 * Parts of a module's state per copy (MiB): weights = param_mib, gradients = param_mib,
 * optimizer state = max(0, state_mib - 2 * param_mib) (so the three add up to state_mib when
 * state_mib >= 2 * param_mib); a backbone chunk holds its chunk weight's share of each.
 *
 * Groups: a copy of a module is held by every global rank that hosts it. Backbone chunk c on
 * pipeline rank p = bm_table_chunk_rank(t, c) (c mod P but for the V shapes, whose second half
 * runs back down the ranks): its D replicas (global ranks p*D + d). Any other module: every pipeline rank
 * with a compute op of it, in every replica (k*D ranks; unified's encoder on rank 0 only: D).
 * ZeRO-1 (t->zero) shards each copy's optimizer state over its group: a rank keeps 1/n.
 *
 * Collectives: a ring over the group's n ranks, with the link class of its slowest hop (inter-host
 * when the group spans hosts, src/sim/hosts.h; else the intra-host link; device.coll_* and
 * inter_host_coll_* when set, else the point-to-point link figures):
 *   all-reduce                  2(n-1)/n * bytes / bw + 2(n-1) * latency
 *   reduce-scatter, all-gather   (n-1)/n * bytes / bw +  (n-1) * latency
 * n = 1 or 0 bytes: none. ZeRO 0 all-reduces the gradients; ZeRO 1 reduce-scatters them and,
 * after the optimizer, all-gathers the updated weights.
 *
 * Order (Megatron's overlap, as both executors run it): a backbone chunk's collective may start
 * when its rank's last backward (B or W) of the chunk ends; another module's when every rank of
 * its group has ended its last backward of it and the module before it has (the executors issue
 * the replicated modules' collectives in one fixed order, the same on every rank: generators
 * first, whose backward runs first, then the others, each in spec order). Each rank has one communication stream: a collective starts when it
 * may and every member's stream is free; collectives are issued in the order they may start
 * (ties: backbone chunks by global chunk, then modules by index). Every replica walks the same
 * table, so the D replicas of a pipeline rank have the same times and one stream per pipeline
 * rank stands for theirs.
 * Optimizer: rank p starts when its walk and its gradient collectives are done and takes
 * device.optimizer_ms_per_gib x the optimizer state it holds (GiB; its shard under ZeRO-1)
 * x rank_time_scale[p]. ZeRO-1's all-gathers then start when every member's optimizer is done.
 * step_ms = the latest end over ranks (and never less than the walk's makespan). */
#ifndef BM_SIM_STEP_H
#define BM_SIM_STEP_H

#include "bigmac.h"
#include "bigmac_cost.h"

/* A module's state parts per copy (MiB), before chunk weights and sharding. */
double bm_step_param_mib(const struct bm_cost *m);
double bm_step_optim_mib(const struct bm_cost *m);

/* One rank's resident state (MiB), by part; optim is what the rank keeps (its shard). */
struct bm_step_mem {
    double weights_mib, grads_mib, optim_mib;
};

/* out[0 .. pp-1]: the parts of each pipeline rank's state (every replica alike). */
void bm_step_state(const struct bm_table *t, const struct bm_costs *c, struct bm_step_mem *out);

/* Ring collective time (ms) over n ranks of 'mib' MiB on a link of gbps GB/s and lat_us us:
 * all-reduce when allreduce, else a reduce-scatter or an all-gather (half). 0 when n <= 1. */
double bm_step_ring_ms(int n, double mib, double gbps, double lat_us, int allreduce);

/* The step of one walk. */
struct bm_step {
    double walk_ms;          /* the walk's makespan */
    double step_ms;          /* the latest end of any rank's step */
    double sync_exposed_ms;  /* step_ms - walk_ms - optimizer_ms */
    double sync_total_ms;    /* most collective time on one rank's stream */
    double optimizer_ms;     /* the optimizer time of the rank that ends last, after the walk */
    int critical_rank;       /* the pipeline rank that ends last */
    int n_collectives;       /* collectives over groups of more than one rank */
};

/* The step of walk tl of table t (jitter-free model above). BM_ERR only when memory runs out. */
int bm_step_model(const struct bm_table *t, const struct bm_costs *c, const struct bm_timeline *tl,
                  struct bm_step *out, struct bm_err *err);

/* One pipeline rank's step after its walk (ms from the step's start; every replica alike). */
struct bm_step_rank {
    double sync_start_ms;    /* its first gradient collective's start; < 0: none */
    double sync_end_ms;      /* its last gradient collective's end (ZeRO-1: the reduce-scatters) */
    double sync_busy_ms;     /* the time its stream spent in them (the rest of the span: waiting) */
    double optimizer_start_ms, optimizer_end_ms;
    double gather_end_ms;    /* ZeRO-1: its last weight all-gather's end (else optimizer_end_ms) */
};

/* bm_step_model, and when ranks is not NULL each rank's times into ranks[0 .. pp-1]. */
int bm_step_model_ranks(const struct bm_table *t, const struct bm_costs *c, const struct bm_timeline *tl,
                        struct bm_step *out, struct bm_step_rank *ranks, struct bm_err *err);

/* What the step needs of a walk, gathered while simulating (sim.c) or from a timeline's ops:
 * each rank's latest op end, each backbone chunk's and each other module's latest compute end,
 * and which pipeline ranks run a compute op of each module. */
struct bm_step_ends {
    double *walk_end;   /* [pp] latest end_ms of any op of the rank (0 if none) */
    double *last_chunk; /* [pp * vpp] latest end of a backbone compute op of the global chunk */
    double *last_mod;   /* [n_modules] latest end of a compute op of the (non-backbone) module */
    char *hosted;       /* [pp * n_modules] 1 when rank r has a compute op of module m */
};
/* Zeroed arrays for t (bm_step_ends_free releases them). BM_ERR when memory runs out. */
int bm_step_ends_alloc(const struct bm_table *t, struct bm_step_ends *e);
void bm_step_ends_free(struct bm_step_ends *e);
/* bm_step_model_ranks from the walk's makespan and ends (the same figures, bit for bit). */
int bm_step_model_ends(const struct bm_table *t, const struct bm_costs *c, double walk_ms,
                       const struct bm_step_ends *e, struct bm_step *out, struct bm_step_rank *ranks,
                       struct bm_err *err);

#endif
