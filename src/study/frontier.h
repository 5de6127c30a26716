/* frontier.h — the compute/memory frontier of one spec's parallel setting: every policy x
 * window x recompute choice planned and simulated, each a point (peak memory per rank,
 * makespan, samples/s), the Pareto-optimal ones marked (`bigmac sweep --frontier`, the HTML
 * report's frontier chart; docs/simulator.md). */
#ifndef BM_STUDY_FRONTIER_H
#define BM_STUDY_FRONTIER_H

#include "bigmac.h"

/* What is recomputed (module "recompute": "full" set by role, src/spec/recompute.h). */
enum bm_frontier_rc {
    BM_FRC_NONE = 0,   /* "none": as the spec says with every module's recompute off */
    BM_FRC_NESTED,     /* "nested": encoders and generators */
    BM_FRC_ALL         /* "all": every module, the backbone included */
};
#define BM_FRC_N 3

struct bm_frontier_point {
    enum bm_policy policy;
    int window;             /* the table's window (0 = the policy has none) */
    enum bm_frontier_rc recompute;
    double peak_mib;        /* max over ranks of state + live activations */
    double makespan_ms;
    double samples_per_s;
    int oom;                /* peak_mib > the cap */
    int pareto;             /* no other point dominates it (bm_frontier_mark) */
};

struct bm_frontier {
    struct bm_frontier_point *pts;
    int n, cap;
    double cap_mib;         /* min(device memory, --mem-cap-gib); 0 = none */
    /* with keep: each point's table and timeline, parallel to pts (owned; bm_frontier_free) */
    struct bm_table **tables;
    struct bm_timeline **tls;
    int cap_keep;
};

/* "none", "nested", "all". */
const char *bm_frontier_rc_name(enum bm_frontier_rc r);

/* Plan and simulate every point of s at o's parallel setting (pp, vpp, microbatches, unit,
 * backbone): the policies bigmac, optimus, unified, unified-balanced and ideal (not none: it
 * trains the backbone alone, a different job) x the three recompute choices; bigmac at every
 * window from the smallest safe one up, stopping at the first window that is not faster than
 * the one before (a larger window stops paying). s's modules' recompute is changed while
 * planning and restored. Combinations that fail to plan are left out (and counted in
 * *n_failed, may be NULL). cap_mib as in struct bm_frontier. Marks the Pareto points.
 * BM_ERR when nothing plans (err: the first failure) or memory runs out. keep = 1 also keeps
 * every point's table and timeline (fr->tables, fr->tls), for drawing them. Caller frees fr
 * (bm_frontier_free). */
int bm_frontier_build(struct bm_spec *s, const struct bm_plan_opts *o, double cap_mib, int keep,
                      struct bm_frontier *fr, int *n_failed, struct bm_err *err);
void bm_frontier_free(struct bm_frontier *fr);

/* pareto = 1 exactly for the points no other point dominates: q dominates p when q's peak
 * memory and makespan are both <= p's and one of them is <. Identical points are all marked.
 * O(n^2). */
void bm_frontier_mark(struct bm_frontier_point *p, int n);

/* The spec with recompute set as r for one point (bm_spec_recompute_roles); saved receives
 * the previous values (s->n_modules ints) for bm_spec_recompute_restore. */
void bm_frontier_apply_rc(struct bm_spec *s, enum bm_frontier_rc r, int *saved);

#endif
