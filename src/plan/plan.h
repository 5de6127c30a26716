/* plan.h — planner internals shared by its files (src/plan/). */
#ifndef BM_PLAN_H
#define BM_PLAN_H

#include "bigmac.h"
#include "bigmac_cost.h"
#include "table/flow.h"
#include "table/table.h"

/* One compute op of the iteration as the planner sees it. */
struct bm_task {
    int16_t module;
    int8_t pass;
    int32_t chunk;     /* backbone global chunk, else -1 */
    int32_t mb;
    int32_t rank;      /* where it runs */
    double dur;        /* nominal duration, ms */
    int32_t pred0, npred;  /* preds in graph->pred[pred0 .. pred0+npred) */
    int32_t succ0, nsucc;  /* succs in graph->succ[...] */
};

/* What timing an order reads of a task (bm_order_times), 16 B instead of the task's 40: a walk
 * over half a million tasks in their ranks' order misses the cache at nearly every task, and a
 * line then holds four of these. Kept equal to task[] by bm_graph_build and bm_graph_repair. */
struct bm_task_hot {
    double dur;
    int32_t pred0, npred;
};

struct bm_edge {
    int32_t task;     /* the other end */
    float comm_ms;    /* transfer time when the ends are on different ranks, else 0 */
};

/* The task graph of one iteration: every compute op with its data dependencies. */
struct bm_graph {
    const struct bm_table *t;
    const struct bm_costs *c; /* the durations' and transfers' cost model; NULL: every one 0 */
    const struct bm_flow *flow;
    int n_tasks;
    struct bm_task *task;
    struct bm_task_hot *hot; /* [n_tasks] task[i]'s dur, pred0, npred */
    struct bm_edge *pred, *succ;
    int C, M;
    int np;                /* backbone passes per (chunk, mb): 2 (F, B), 3 with a split backward (W) */
    int n_nested;          /* non-backbone modules */
    int *nested_module;    /* [n_nested] module index */
    int *nested_slot;      /* [n_modules] slot in nested_module or -1 */
    int pair_window;       /* the window the owners were paired for (0: they do not depend on it) */
};

/* Task ids: backbone (chunk c, pass p, mb m) and nested module slot k (nested backwards are
 * whole: F and B only). */
static inline int bm_task_bb(const struct bm_graph *g, int c, int p, int m)
{
    return (c * g->np + p) * g->M + m;
}
static inline int bm_task_nested(const struct bm_graph *g, int k, int p, int m)
{
    return g->C * g->np * g->M + (k * 2 + p) * g->M + m;
}

/* Build the task graph for the finished table t (modules, pp, vpp, M; its dataflow) under cost
 * model c (chunk weights, microbatch scales, device; NULL: no durations, every task 0 ms, owners
 * m % P) placing nested work per policy. Where bm_graph_pairs_by_window(t), which rank runs each
 * microbatch's encoder work depends on the window the order will use: pass it as pair_window
 * (0 = m % P). Caller frees with bm_graph_free. */
int bm_graph_build(const struct bm_table *t, const struct bm_costs *c, int pair_window, struct bm_graph **out,
                   struct bm_err *err);
/* 1 when the graph's encoder owners depend on the window (bigmac/ideal, U = P, microbatch costs
 * that differ): the planner rebuilds the graph for each window it tries. */
int bm_graph_pairs_by_window(const struct bm_table *t, const struct bm_costs *c);
void bm_graph_free(struct bm_graph *g);
/* Re-pair g's encoder owners for another window (what bm_graph_build(t, flow, pair_window)
 * would give, in place: nested tasks' ranks and durations, transfer times of their edges).
 * Cheaper than a rebuild: the edges themselves do not depend on ranks. */
int bm_graph_repair(struct bm_graph *g, int pair_window, struct bm_err *err);

/* Per-rank compute order (task ids), the policy's output. */
struct bm_order {
    int pp;
    int **seq;   /* [rank][i] task id */
    int *n;      /* [rank] */
};
void bm_order_free(struct bm_order *o);

/* Internal status next to BM_OK/BM_ERR: the order stalls (a window too small, a rank waiting
 * on a task that never runs first), as opposed to any other failure such as running out of
 * memory. The window search tries a larger window only after this one; bm_plan_build turns it
 * into BM_ERR for its callers. */
#define BM_PLAN_STALL 3

/* Nominal-time arithmetic of the list scheduler and the gap refinement: "never" and the
 * tolerance below which two times are the same. */
#define BM_T_INF 1e300
#define BM_T_EPS 1e-9

/* Nominal times of an order: start/finish per task (ms). Returns BM_PLAN_STALL (with a
 * message) if the order deadlocks, BM_ERR on allocation failure. */
int bm_order_times(const struct bm_graph *g, const struct bm_order *o, double *start,
                   double *finish, double *makespan, struct bm_err *err);
/* The same, ignoring dependencies on non-backbone tasks (the backbone-only timeline). */
int bm_order_times_backbone(const struct bm_graph *g, const struct bm_order *o, double *start,
                            double *finish, struct bm_err *err);

/* Run t's policy over the graph and produce the per-rank order. BM_PLAN_STALL when the
 * window is too small (the message names each rank's blocked op), BM_ERR otherwise. */
int bm_nest(const struct bm_graph *g, int window, struct bm_order **out, struct bm_err *err);
/* bm_nest with the drain fill's rules up to drain_level (0 off, 1 the gap rule, 2 and the
 * spread rule; planner.md "Drain fill"; bm_nest uses 2); *drain_used (may be NULL) gets the
 * highest rule that placed an op, 0 when the order is the same as without the fill. */
int bm_nest_fill(const struct bm_graph *g, int window, int drain_level, int *drain_used, struct bm_order **out,
                 struct bm_err *err);
/* 1 when bigmac/ideal with this window certainly stall (a cycle the window closes through rank
 * 0's chunk-0 ops), so the window search need not schedule it; 0 when it may plan. */
int bm_nest_window_stalls(const struct bm_graph *g, int window, struct bm_err *err);

/* Move single encoder ops into nominal idle gaps they fit entirely: forwards to later gaps
 * (before their consumer needs them), backwards to earlier gaps (after their gradient
 * arrived). Optimus moves only ops of its leading (forwards) and trailing (backwards) blocks;
 * bigmac (anywhere) moves any, e.g. out of a column into a bubble. A forward moved later and a
 * backward moved earlier both shorten an activation's life, so no rank ever holds more than
 * before: the window's residency bound is kept. Keeps a round only when the nominal makespan
 * does not grow. */
int bm_refine_gaps(const struct bm_graph *g, struct bm_order *o, int anywhere, struct bm_err *err);

/* Placement search (search.c): move single nested ops within their rank's sequence (the
 * backbone order stays) to positions after idle time, or swap two, keeping a move when the
 * nominal (makespan, sum of op finish times) drops. residency > 0 keeps every rank's live encoder
 * microbatches within residency*ceil(U/P) and generator ones within ceil(U/P) (verifier
 * invariant 5); 0 = no limit. At most 'budget' order timings; *moved = 1 when o changed.
 * BM_ERR only when out of memory. */
int bm_search_order(const struct bm_graph *g, struct bm_order *o, int residency, long budget,
                    int *moved, struct bm_err *err);

/* A lower bound (ms) on the makespan of any schedule of g's work (every task on its rank, the
 * backbone in each rank's fixed order; docs/simulator.md "Lower bound"). */
int bm_graph_lower_bound(const struct bm_graph *g, double *lb, struct bm_err *err);
/* The shell of a plan of spec s under opts (bm_table_skeleton: modules, chunks, warm-up,
 * dataflow; no ops), its cost model and its task graph (encoder owners m % P where they depend
 * on a window), as bm_plan_build starts from them; for tests and tools that study orders of that
 * work. The caller frees all three (bm_graph_free, bm_table_free, bm_costs_free). */
int bm_plan_graph(const struct bm_spec *s, const struct bm_plan_opts *opts, struct bm_table **t,
                  struct bm_costs **c, struct bm_graph **g, struct bm_err *err);
/* Where bm_plan_build's time goes (bench/bench_quality.c): when bm_plan_prof is set, every plan
 * adds its seconds per phase (wall clock, measured only, never read by the planner). */
struct bm_plan_prof {
    double shell_s;       /* options, modules, chunks, dataflow, first task graph */
    double graph_s;       /* task graphs rebuilt per window (encoder owners paired to it) */
    double nest_s;        /* list scheduling + gap refinement, every window tried */
    double search_s;      /* placement search, every window tried */
    double lower_s;       /* lowering to send/recv, every window tried */
    double measure_s;     /* the window search's simulations of candidate plans */
    double bound_s;       /* the lower bound (when asked for) */
    int plans, searched;  /* windows planned, searches run */
};
extern struct bm_plan_prof *bm_plan_prof;

/* Sort task ids[0..n) by key[id] ascending (heap sort, in place; not stable). */
void bm_sort_ids_by_key(int *ids, int n, const double *key);

/* Turn the order into the table's ops (compute + send/recv). */
int bm_lower(struct bm_table *t, const struct bm_graph *g, const struct bm_order *o,
             struct bm_err *err);

#endif
