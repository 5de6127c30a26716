/* plan.c — bm_plan_build: spec + options -> lowered operator table.
 * Steps: resolve options, copy modules and costs into the table, split the backbone into
 * chunks, derive the dataflow and task graph, nest the encoder/generator work (nest.c), and
 * lower to send/recv (lower.c). */
#include <math.h>
#include <string.h>

#include "plan/plan.h"
#include "util/util.h"

void bm_plan_opts_unset(struct bm_plan_opts *o)
{
    o->pp = o->vpp = o->microbatches = o->unit = o->window = BM_UNSET;
    o->backbone = (enum bm_backbone)BM_UNSET;
    o->policy = (enum bm_policy)BM_UNSET;
    o->dp = o->ranks_per_host = o->zero = BM_UNSET;
}

void bm_plan_opts_from_spec(struct bm_plan_opts *o, const struct bm_spec *s)
{
    o->pp = s->pp;
    o->vpp = s->vpp;
    o->microbatches = s->microbatches;
    o->unit = s->unit;
    o->window = s->window;
    o->backbone = s->backbone;
    o->policy = s->policy;
    o->dp = s->dp;
    o->ranks_per_host = s->device.ranks_per_host;
    o->zero = s->train.zero;
}

void bm_plan_opts_merge(struct bm_plan_opts *o, const struct bm_plan_opts *v)
{
    /* a unit equal to pp (the default, written out) keeps following pp: a unit smaller than pp
     * covers only part of the pipeline */
    if (v->pp != BM_UNSET && v->unit == BM_UNSET && o->unit == o->pp) o->unit = 0;
    if (v->pp != BM_UNSET) o->pp = v->pp;
    if (v->vpp != BM_UNSET) o->vpp = v->vpp;
    if (v->microbatches != BM_UNSET) o->microbatches = v->microbatches;
    if (v->unit != BM_UNSET) o->unit = v->unit;
    if (v->window != BM_UNSET) o->window = v->window;
    if ((int)v->backbone != BM_UNSET) o->backbone = v->backbone;
    if ((int)v->policy != BM_UNSET) o->policy = v->policy;
    if (v->dp != BM_UNSET) o->dp = v->dp;
    if (v->ranks_per_host != BM_UNSET) o->ranks_per_host = v->ranks_per_host;
    if (v->zero != BM_UNSET) o->zero = v->zero;
}

void bm_plan_opts_to_spec(const struct bm_plan_opts *o, struct bm_spec *s)
{
    if (o->dp != BM_UNSET) s->dp = o->dp;
    if (o->ranks_per_host != BM_UNSET) s->device.ranks_per_host = o->ranks_per_host;
    if (o->zero != BM_UNSET) s->train.zero = o->zero;
}

static int check_opts(const struct bm_plan_opts *o, struct bm_err *err)
{
    const char *unset = o->pp == BM_UNSET ? "pp" : o->vpp == BM_UNSET ? "vpp" : o->microbatches == BM_UNSET ? "microbatches"
                        : o->unit == BM_UNSET ? "unit" : o->window == BM_UNSET ? "window"
                        : (int)o->backbone == BM_UNSET ? "backbone" : (int)o->policy == BM_UNSET ? "policy" : NULL;
    if (unset)
        return bm_err_set(err, "plan options: %s is not set (BM_UNSET)\nhint: lay the options given over the spec's: "
                               "bm_plan_opts_from_spec, then bm_plan_opts_merge", unset);
    if (o->pp < 1 || o->pp > 4096) return bm_err_set(err, "pp = %d: must be in 1..4096", o->pp);
    if (o->vpp < 1 || o->vpp > 64) return bm_err_set(err, "vpp = %d: must be in 1..64", o->vpp);
    if (o->microbatches < 1 || o->microbatches > 1000000)
        return bm_err_set(err, "microbatches = %d: must be in 1..1000000", o->microbatches);
    if (o->unit < 0 || o->unit > 1000000) return bm_err_set(err, "unit = %d: must be >= 1", o->unit);
    if (o->window < 0 && o->window != BM_WINDOW_FIT)
        return bm_err_set(err, "window = %d: must be >= 1, auto or fit", o->window);
    if ((unsigned)o->backbone >= BM_N_BACKBONES)
        return bm_err_set(err, "unknown backbone schedule %d", (int)o->backbone);
    int looped = o->backbone == BM_BB_INTERLEAVED || o->backbone == BM_BB_ZB_INTERLEAVED;
    if (bm_backbone_v_shaped(o->backbone) && o->vpp != 2)
        return bm_err_set(err, "%s places two chunks per rank in a V: vpp must be 2 (got %d)\nhint: add --vpp 2",
                          bm_backbone_name(o->backbone), o->vpp);
    if (o->backbone == BM_BB_DUALPIPE_V && o->microbatches < 2 * o->pp)
        return bm_err_set(err, "dualpipe-v needs at least 2*pp = %d microbatches (got %d)", 2 * o->pp, o->microbatches);
    if (!looped && o->vpp != 1 && !bm_backbone_v_shaped(o->backbone))
        return bm_err_set(err, "vpp = %d needs the interleaved backbone (got %s)\nhint: add --backbone %s, or use --vpp 1",
                          o->vpp, bm_backbone_name(o->backbone),
                          o->backbone == BM_BB_ZB_H1 ? "zb-interleaved" : "interleaved");
    if (o->backbone == BM_BB_ZB_INTERLEAVED && o->vpp < 2)
        return bm_err_set(err, "zb-interleaved needs vpp >= 2 (got %d)\nhint: add --vpp 2, or use --backbone zb-h1", o->vpp);
    if (looped && o->microbatches % o->pp)
        return bm_err_set(err, "%s needs microbatches divisible by pp (M = %d, P = %d)\nhint: use --microbatches %d or %d",
                          bm_backbone_name(o->backbone), o->microbatches, o->pp,
                          (o->microbatches / o->pp) > 0 ? (o->microbatches / o->pp) * o->pp : o->pp,
                          (o->microbatches / o->pp + 1) * o->pp);
    long ops = (long)o->pp * o->vpp * (long)o->microbatches;
    if (ops > BM_MAX_BACKBONE_OPS)
        return bm_err_set(err, "plan too large: pp*vpp*microbatches = %d*%d*%d = %ld backbone ops per pass (limit %ld)\nhint: fewer microbatches or ranks",
                          o->pp, o->vpp, o->microbatches, ops, BM_MAX_BACKBONE_OPS);
    return BM_OK;
}

struct bm_plan_prof *bm_plan_prof = NULL;

#define PROF_START(v) double v = bm_plan_prof ? bm_now() : 0
#define PROF_ADD(field, v) \
    do {                                                 \
        if (bm_plan_prof) bm_plan_prof->field += bm_now() - (v); \
    } while (0)

/* What the window search works on: the table being filled and the task graph (rebuilt for
 * each window when the encoder owners depend on it, bm_graph_pairs_by_window). */
/* The ops of every rank of t, kept aside (best_window's best plan so far). */
struct snapshot {
    struct bm_rank_ops *ranks; /* [pp], NULL when none is kept */
};

static void snapshot_free(struct snapshot *sn, int pp)
{
    for (int r = 0; sn->ranks && r < pp; r++) bm_free(sn->ranks[r].ops);
    bm_free(sn->ranks);
    sn->ranks = NULL;
}

static int snapshot_take(struct snapshot *sn, const struct bm_table *t, struct bm_err *err)
{
    snapshot_free(sn, t->pp);
    sn->ranks = bm_calloc((size_t)t->pp, sizeof *sn->ranks);
    if (!sn->ranks) return bm_err_set(err, "out of memory keeping the best plan");
    for (int r = 0; r < t->pp; r++) {
        int n = t->ranks[r].n_ops;
        sn->ranks[r].ops = bm_malloc((size_t)(n ? n : 1) * sizeof(struct bm_op));
        if (!sn->ranks[r].ops) return bm_err_set(err, "out of memory keeping the best plan");
        memcpy(sn->ranks[r].ops, t->ranks[r].ops, (size_t)n * sizeof(struct bm_op));
        sn->ranks[r].n_ops = n;
    }
    return BM_OK;
}

/* Put the kept ops back into t (the snapshot is consumed). */
static void snapshot_restore(struct snapshot *sn, struct bm_table *t)
{
    for (int r = 0; r < t->pp; r++) { /* each list was allocated with room for max(n_ops, 1) */
        int n = sn->ranks[r].n_ops;
        bm_table_set_ops(t, r, sn->ranks[r].ops, n, n ? n : 1);
    }
    bm_free(sn->ranks);
    sn->ranks = NULL;
}

struct planner {
    struct bm_table *t;
    struct bm_costs *c;     /* the spec's costs of t (bm_table_skeleton) */
    struct bm_graph *g;
    int pairs;
    int search;             /* placement search budget (bm_plan_build_search) */
    struct snapshot cap_plan; /* the plan of window cap_w, kept so it is not searched twice */
    int cap_w;
};

/* Default budget of the placement search: order timings, each O(tasks), bounded by work too
 * so that a large plan (P = 64, V = 4, M = 1024: half a million tasks) spends little in it. */
#define SEARCH_TIMINGS 5000L
#define SEARCH_WORK 12000000L

/* The list scheduler's order for window W with the drain fill up to 'level' (*used: what it
 * placed, may be NULL), then for bigmac and ideal the placement search within W's residency
 * bound. */
static int search_order(struct planner *pl, int W, struct bm_order *o, struct bm_err *err);

static int nest_and_search(struct planner *pl, int W, int level, int *used, int search, struct bm_order **out,
                           struct bm_err *err)
{
    struct bm_order *o;
    PROF_START(t1);
    int rc = bm_nest_fill(pl->g, W, level, used, &o, err);
    PROF_ADD(nest_s, t1);
    if (bm_plan_prof) bm_plan_prof->plans++;
    *out = NULL;
    if (rc) return rc;
    if (search && search_order(pl, W, o, err)) {
        bm_order_free(o);
        return BM_ERR;
    }
    *out = o;
    return BM_OK;
}

/* For bigmac and ideal: the placement search on o within W's residency bound. */
static int search_order(struct planner *pl, int W, struct bm_order *o, struct bm_err *err)
{
    struct bm_table *t = pl->t;
    PROF_START(t2);
    if ((t->policy == BM_POL_BIGMAC || t->policy == BM_POL_IDEAL) && pl->search >= 0) {
        long budget = pl->search > 0 ? pl->search : SEARCH_TIMINGS;
        long by_work = SEARCH_WORK / (pl->g->n_tasks > 0 ? pl->g->n_tasks : 1);
        long nested = pl->g->n_tasks - (long)bm_task_nested(pl->g, 0, 0, 0); /* after np passes per chunk */
        /* by default only where it pays: a budget that cannot try every nested op once is skipped */
        if (pl->search == 0) budget = by_work < nested ? 0 : BM_MIN(budget, by_work);
        int moved;
        if (budget > 0 && bm_search_order(pl->g, o, W, budget, &moved, err)) return BM_ERR;
        if (bm_plan_prof && budget > 0) bm_plan_prof->searched++;
    }
    PROF_ADD(search_s, t2);
    return BM_OK;
}

/* Plans up to this many tasks get the drain fill's comparison (plan_with_window). */
#define NEST_BOTH_TASKS 300000

/* Plan with window W; the table's ops are (re)filled. For bigmac and ideal the nested order is
 * improved by the placement search (search.c) within W's residency bound first, so every
 * window the window search compares is a searched plan and a larger cap stays never slower.
 * BM_PLAN_STALL when W is too small (t is then left as it was), BM_ERR on any other failure
 * (out of memory). */
static int plan_with_window(struct planner *pl, int W, struct bm_err *err)
{
    struct bm_table *t = pl->t;
    if (W == pl->cap_w && pl->cap_plan.ranks) {
        snapshot_restore(&pl->cap_plan, t);
        return BM_OK;
    }
    if (pl->pairs && pl->g->pair_window != W) {
        PROF_START(t0);
        if (bm_graph_repair(pl->g, W, err)) return BM_ERR;
        PROF_ADD(graph_s, t0);
    }
    struct bm_order *o = NULL, *alt[2] = {NULL, NULL};
    /* The drain fill (nest.c): plans up to NEST_BOTH_TASKS tasks are made with both of its rules
     * and, when they placed anything, again without the fill (and with the gap rule alone when
     * the spread rule placed something), each searched; the shortest nominal makespan is kept,
     * ties going to fewer rules, so such a plan is never slower than without the fill and is the
     * same table when the fill gains nothing. Larger plans take the gap rule alone. */
    int both = (t->policy == BM_POL_BIGMAC || t->policy == BM_POL_IDEAL) && pl->g->n_tasks <= NEST_BOTH_TASKS;
    int used = 0;
    int rc = nest_and_search(pl, W, both ? 2 : 1, &used, !both, &o, err);
    if (both && rc == BM_OK && !used && search_order(pl, W, o, err)) rc = BM_ERR;
    if (rc == BM_ERR || !both || !used) {
        if (rc) {
            bm_order_free(o);
            return rc;
        }
    } else {
        int arc[2] = {BM_PLAN_STALL, BM_PLAN_STALL}, best = -1, res = BM_OK;
        double ms[3] = {0, 0, 0};
        for (int k = 0; k < used && res == BM_OK; k++) {
            struct bm_err e2;
            arc[k] = nest_and_search(pl, W, k, NULL, 0, &alt[k], &e2);
            if (arc[k] == BM_ERR) res = bm_err_set(err, "%s", e2.msg);
        }
        double *st = res ? NULL : bm_malloc((size_t)pl->g->n_tasks * sizeof(double) + 1);
        double *fi = res ? NULL : bm_malloc((size_t)pl->g->n_tasks * sizeof(double) + 1);
        if (!res && (!st || !fi)) res = bm_err_set(err, "out of memory planning");
        struct bm_order *cand[3] = {alt[0], alt[1], o};
        int crc[3] = {arc[0], arc[1], rc};
        for (int k = 0; k < 3 && res == BM_OK; k++) { /* fewer rules first: they keep ties */
            if (crc[k] != BM_OK) continue;
            if (bm_order_times(pl->g, cand[k], st, fi, &ms[k], err)) res = BM_ERR;
            else if (best < 0 || ms[k] < ms[best] - BM_T_EPS) best = k;
        }
        bm_free(st);
        bm_free(fi);
        if (res == BM_OK && best < 0) res = rc; /* every one stalled: the first's report is in err */
        struct bm_order *keep = res == BM_OK ? cand[best] : NULL;
        for (int k = 0; k < 3; k++)
            if (cand[k] != keep) bm_order_free(cand[k]);
        o = keep;
        if (res == BM_OK && search_order(pl, W, o, err)) res = BM_ERR; /* the kept order alone is searched */
        if (res) {
            bm_order_free(o);
            return res;
        }
    }
    PROF_START(t3);
    for (int r = 0; r < t->pp; r++) t->ranks[r].n_ops = 0;
    rc = bm_lower(t, pl->g, o, err);
    bm_order_free(o);
    PROF_ADD(lower_s, t3);
    return rc;
}

/* Nominal makespan and whether every rank's simulated peak memory fits the device. */
static int measure(struct bm_table *t, const struct bm_costs *c, double *ms, int *fits, struct bm_err *err)
{
    struct bm_timeline *tl;
    PROF_START(t0);
    int rc = bm_simulate_summary(t, c, NULL, &tl, err);
    PROF_ADD(measure_s, t0);
    if (rc) return BM_ERR;
    *ms = tl->makespan_ms;
    *fits = !tl->oom;
    bm_timeline_free(tl);
    return BM_OK;
}

/* Windows the search tries after w: every one up to GRID_DENSE above the smallest, then a
 * geometric grid (x1.5), always ending on hi. Large unit counts (M = 1024, U = 8: 128 units) would
 * otherwise cost one plan per window. */
#define GRID_DENSE 8
static int next_window(int w, int w0, int hi)
{
    int n = w - w0 < GRID_DENSE ? w + 1 : w + w / 2;
    return w < hi && n > hi ? hi : n;
}

/* Search the windows w0..hi (w0 is the smallest safe one and already planned into t) for the
 * smallest nominal makespan. A window is a cap ("how many units MAY hold activations", docs/design.md
 * §2): any plan with a smaller window honours it too, so an explicit W, `ideal` (W = the
 * number of units) and `fit` all take the best plan under their cap. A larger window must be
 * shorter than the best so far by more than min_gain (relative: BM_WINDOW_GAIN for a cap and
 * fit, 1e-9 for ideal) to be preferred, so ties and noise-level gains keep the smaller window;
 * the choice is then within min_gain of the fastest window tried. The list scheduler alone is
 * not monotone in W; since the windows tried under cap hi are a prefix of those under hi + 1
 * and each is compared with the best so far, a larger cap is still never slower (exact while
 * hi is within GRID_DENSE of w0, on the grid beyond). With must_fit, the search stops at the
 * first window whose simulated peak exceeds the device. Leaves t planned with the choice in
 * t->window. */
static int best_window(struct planner *pl, int w0, int hi, int must_fit, double min_gain, struct bm_err *err)
{
    struct bm_table *t = pl->t;
    struct snapshot sn = {NULL};
    double best_ms, ms;
    int fits, best = w0, planned = w0, rc = BM_OK;
    if (measure(t, pl->c, &best_ms, &fits, err)) return BM_ERR;
    if (must_fit && !fits) { /* not even the smallest window fits: report it as planned */
        t->window = w0;
        return BM_OK;
    }
    for (int w = next_window(w0, w0, hi); w <= hi; w = next_window(w, w0, hi)) {
        int sure = bm_nest_window_stalls(pl->g, w, err);
        if (sure < 0) {
            rc = BM_ERR;
            goto done;
        }
        if (sure) continue; /* a sure stall: not scheduled */
        if (planned == best && snapshot_take(&sn, t, err)) { /* about to be overwritten */
            rc = BM_ERR;
            goto done;
        }
        rc = plan_with_window(pl, w, err);
        if (rc == BM_PLAN_STALL) { /* safe windows need not be contiguous */
            rc = BM_OK;
            continue;
        }
        if (rc || measure(t, pl->c, &ms, &fits, err)) {
            rc = BM_ERR;
            goto done;
        }
        planned = w;
        if (must_fit && !fits) break;
        if (ms < best_ms * (1 - min_gain)) {
            best_ms = ms;
            best = w;
        }
    }
    t->window = best;
    /* the best plan was kept before a later window overwrote t: put it back instead of
     * planning (and searching) it again */
    if (planned != best) snapshot_restore(&sn, t);
done:
    snapshot_free(&sn, t->pp);
    return rc;
}

/* The smallest window in 1..hi that plans (left planned in t), or 0 when none does. */
static int smallest_window(struct planner *pl, int hi, struct bm_err *err)
{
    for (int w = 1; w <= hi; w++) {
        int sure = bm_nest_window_stalls(pl->g, w, err);
        if (sure < 0) return -1;
        if (sure) continue; /* a sure stall: not scheduled */
        int rc = plan_with_window(pl, w, err);
        if (rc == BM_OK) return w;
        if (rc != BM_PLAN_STALL) return -1; /* out of memory is not "too small" */
    }
    return 0;
}

int bm_plan_build(const struct bm_spec *s, const struct bm_plan_opts *opts, struct bm_table **out,
                  struct bm_costs **costs, struct bm_err *err)
{
    return bm_plan_build_search(s, opts, 0, out, costs, NULL, err);
}

/* The table shell (options, modules, costs, chunks, warm-up) and its dataflow: what every plan
 * starts from. On failure *tp is NULL (everything released). */
static int plan_shell(const struct bm_spec *s, const struct bm_plan_opts *opts, struct bm_table **tp,
                      struct bm_costs **cp, struct bm_err *err)
{
    *tp = NULL;
    *cp = NULL;
    return check_opts(opts, err) || bm_table_skeleton(s, opts, tp, cp, err);
}

int bm_plan_graph(const struct bm_spec *s, const struct bm_plan_opts *opts, struct bm_table **t,
                  struct bm_costs **c, struct bm_graph **g, struct bm_err *err)
{
    *g = NULL;
    if (plan_shell(s, opts, t, c, err)) return BM_ERR;
    if (bm_graph_build(*t, *c, 0, g, err)) {
        bm_table_free(*t);
        bm_costs_free(*c);
        *t = NULL;
        *c = NULL;
        return BM_ERR;
    }
    return BM_OK;
}

int bm_plan_build_search(const struct bm_spec *s, const struct bm_plan_opts *opts, int search,
                         struct bm_table **out, struct bm_costs **costs, double *lower_bound_ms,
                         struct bm_err *err)
{
    *out = NULL;
    if (costs) *costs = NULL;
    struct bm_table *t;
    struct bm_costs *c;
    PROF_START(t0);
    if (plan_shell(s, opts, &t, &c, err)) return BM_ERR;
    struct planner planner = {t, c, NULL, 0, search, {NULL}, 0}, *pl = &planner;
    int rc = BM_ERR;
    int n_units = (t->microbatches + t->unit - 1) / t->unit;
    pl->pairs = bm_graph_pairs_by_window(t, c);
    /* pairing for the smallest window there can be; plan_with_window rebuilds for others */
    if (bm_graph_build(t, c, pl->pairs ? 1 : 0, &pl->g, err)) goto done;
    PROF_ADD(shell_s, t0);

    if (t->policy == BM_POL_BIGMAC && opts->window > 0) {
        /* W >= the number of units is no limit at all; clamping keeps unit arithmetic
         * (frontier + W, (u + W) * U) far from int overflow for --window 2147483647 */
        int cap = BM_MIN(opts->window, n_units);
        int wrc = plan_with_window(pl, cap, err);
        if (wrc == BM_PLAN_STALL) {
            /* say which window would work (a search that runs out of memory just ends) */
            struct bm_err e2;
            for (int w = cap + 1; w <= n_units; w++) {
                int hrc = plan_with_window(pl, w, &e2);
                if (hrc == BM_OK) {
                    size_t len = strlen(err->msg);
                    snprintf(err->msg + len, sizeof err->msg - len,
                             "\nhint: the smallest safe window here is %d (--window %d, or --window auto)", w, w);
                }
                if (hrc != BM_PLAN_STALL) break;
            }
        }
        /* the cap's plan is kept aside only when a smaller window may plan over it */
        int below = 0;
        for (int w = 1; w < cap && !below && !wrc; w++) {
            int sure = bm_nest_window_stalls(pl->g, w, err);
            if (sure < 0) wrc = BM_ERR;
            below = !sure;
        }
        if (wrc || (below && snapshot_take(&pl->cap_plan, t, err))) goto done;
        pl->cap_w = cap;
        /* a stalled window leaves t as it was, so when nothing below the cap plans, t still
         * holds the cap's plan */
        t->window = cap;
        int w0 = smallest_window(pl, cap - 1, err);
        if (w0 < 0 || (w0 > 0 && best_window(pl, w0, cap, 0, BM_WINDOW_GAIN, err))) goto done;
    } else if (t->policy == BM_POL_BIGMAC || t->policy == BM_POL_IDEAL) {
        int w0 = smallest_window(pl, n_units, err);
        if (w0 <= 0) goto done; /* no window plans: err says why */
        t->window = w0;
        /* ideal is the unlimited-memory reference ("the fastest bigmac plan at any window"), so
         * it keeps the strictly fastest window (1e-9 only steps over float ties): memory is no
         * concern of it, and a smaller window's saving means nothing there. Measured with
         * BM_WINDOW_GAIN instead (bench_zero_bubble, cap 6): 3 of 16 ideal cells moved, all at
         * M = 16P, 1-3 ms slower (understanding 1F1B 6045 -> 6048 ms at W 7 instead of 16);
         * bench_policies unchanged. */
        if (t->policy == BM_POL_IDEAL && best_window(pl, w0, n_units, 0, 1e-9, err)) goto done;
        /* every encoder frozen without backward (docs/planner.md "Frozen modules"): a window
         * bounds outputs waiting for chunk 0, which hold no activation, so auto takes the
         * fastest window that fits, as fit does */
        int outputs_only = 0;
        for (int m = 0; m < t->n_modules; m++)
            if (t->modules[m].role == BM_ROLE_ENCODER) {
                if (t->modules[m].backward != BM_BACKWARD_NONE) {
                    outputs_only = 0;
                    break;
                }
                outputs_only = 1;
            }
        if (t->policy == BM_POL_BIGMAC && (opts->window == BM_WINDOW_FIT || (opts->window == BM_WINDOW_AUTO && outputs_only)) &&
            best_window(pl, w0, n_units, 1, BM_WINDOW_GAIN, err)) goto done;
    } else {
        t->window = 0;
        if (plan_with_window(pl, 0, err)) goto done;
    }
    if (lower_bound_ms) {
        PROF_START(t4);
        /* the bound of the work as this table places it: the owners of the window it uses */
        if (pl->pairs && pl->g->pair_window != t->window && bm_graph_repair(pl->g, t->window, err)) goto done;
        if (bm_graph_lower_bound(pl->g, lower_bound_ms, err)) goto done;
        PROF_ADD(bound_s, t4);
    }
    rc = BM_OK;
done:
    snapshot_free(&pl->cap_plan, t->pp);
    bm_graph_free(pl->g);
    if (rc) {
        bm_table_free(t);
        bm_costs_free(c);
    } else {
        *out = t;
        if (costs) *costs = c;
        else bm_costs_free(c);
    }
    return rc;
}
