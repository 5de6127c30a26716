/* frontier.c — the compute/memory frontier (see frontier.h). */
#include <string.h>

#include "study/frontier.h"
#include "spec/recompute.h"
#include "util/util.h"

#define MAX_WINDOW_STEPS 256 /* bigmac windows tried past the smallest safe one */

static const enum bm_policy frontier_policies[] = {BM_POL_BIGMAC, BM_POL_OPTIMUS, BM_POL_UNIFIED,
                                                   BM_POL_UNIFIED_BALANCED, BM_POL_IDEAL};

const char *bm_frontier_rc_name(enum bm_frontier_rc r)
{
    return r == BM_FRC_NESTED ? "nested" : r == BM_FRC_ALL ? "all" : "none";
}

void bm_frontier_apply_rc(struct bm_spec *s, enum bm_frontier_rc r, int *saved)
{
    bm_spec_recompute_roles(s, BM_RECOMPUTE_ALL, 0, saved);
    if (r == BM_FRC_NESTED) bm_spec_recompute_roles(s, BM_RECOMPUTE_NESTED, 1, NULL);
    if (r == BM_FRC_ALL) bm_spec_recompute_roles(s, BM_RECOMPUTE_ALL, 1, NULL);
}

void bm_frontier_mark(struct bm_frontier_point *p, int n)
{
    for (int i = 0; i < n; i++) {
        p[i].pareto = 1;
        for (int j = 0; j < n && p[i].pareto; j++) {
            if (j == i) continue;
            int le = p[j].peak_mib <= p[i].peak_mib && p[j].makespan_ms <= p[i].makespan_ms;
            int lt = p[j].peak_mib < p[i].peak_mib || p[j].makespan_ms < p[i].makespan_ms;
            if (le && lt) p[i].pareto = 0;
        }
    }
}

void bm_frontier_free(struct bm_frontier *fr)
{
    for (int i = 0; fr->tables && i < fr->n; i++) bm_table_free(fr->tables[i]);
    for (int i = 0; fr->tls && i < fr->n; i++) bm_timeline_free(fr->tls[i]);
    bm_free(fr->tables);
    bm_free(fr->tls);
    bm_free(fr->pts);
    memset(fr, 0, sizeof *fr);
}

/* Plan + simulate one point; BM_OK with *pt filled, BM_ERR with err set. */
struct kept {
    struct bm_table *t;      /* the last point's, when keeping; NULL otherwise */
    struct bm_timeline *tl;
};

static int one_point(const struct bm_spec *s, const struct bm_plan_opts *o, double cap_mib,
                     enum bm_frontier_rc rc, struct bm_frontier_point *pt, struct kept *kp, struct bm_err *err)
{
    struct bm_table *t = NULL;
    struct bm_costs *c = NULL;
    struct bm_timeline *tl = NULL;
    struct bm_sim_opts so = {0, 1, s->data.samples_per_microbatch};
    if (bm_plan_build(s, o, &t, &c, err)) return BM_ERR;
    int src = (kp ? bm_simulate : bm_simulate_summary)(t, c, &so, &tl, err); /* kept points are drawn */
    bm_costs_free(c); /* the points keep their schedule and timeline only */
    if (src) {
        bm_table_free(t);
        return BM_ERR;
    }
    *pt = (struct bm_frontier_point){t->policy, t->window, rc, tl->peak_mib, tl->makespan_ms, tl->samples_per_s,
                                     cap_mib > 0 && tl->peak_mib > cap_mib, 0};
    if (kp) {
        kp->t = t, kp->tl = tl;
        return BM_OK;
    }
    bm_timeline_free(tl);
    bm_table_free(t);
    return BM_OK;
}

/* Append pt (and, when keeping, kp's table and timeline, which fr then owns). */
static int add(struct bm_frontier *fr, const struct bm_frontier_point *pt, struct kept *kp, struct bm_err *err)
{
    if (bm_grow(&fr->pts, &fr->cap, fr->n + 1, sizeof *fr->pts)) goto oom;
    if (kp) {
        int c = fr->cap_keep;
        if (bm_grow(&fr->tables, &c, fr->n + 1, sizeof *fr->tables)) goto oom;
        c = fr->cap_keep;
        if (bm_grow(&fr->tls, &c, fr->n + 1, sizeof *fr->tls)) goto oom;
        fr->cap_keep = c;
        fr->tables[fr->n] = kp->t, fr->tls[fr->n] = kp->tl;
        kp->t = NULL, kp->tl = NULL;
    }
    fr->pts[fr->n++] = *pt;
    return BM_OK;
oom:
    if (kp) {
        bm_table_free(kp->t), bm_timeline_free(kp->tl);
        kp->t = NULL, kp->tl = NULL;
    }
    return bm_err_set(err, "frontier: out of memory");
}

/* Drop a kept point that is not added. */
static void drop(struct kept *kp)
{
    if (!kp) return;
    bm_table_free(kp->t), bm_timeline_free(kp->tl);
    kp->t = NULL, kp->tl = NULL;
}

int bm_frontier_build(struct bm_spec *s, const struct bm_plan_opts *o, double cap_mib, int keep,
                      struct bm_frontier *fr, int *n_failed, struct bm_err *err)
{
    struct kept kv = {NULL, NULL}, *kp = keep ? &kv : NULL;
    memset(fr, 0, sizeof *fr);
    fr->cap_mib = cap_mib;
    int failed = 0, rc = BM_OK;
    struct bm_err first;
    first.msg[0] = 0;
    int *saved = bm_malloc((size_t)(s->n_modules > 0 ? s->n_modules : 1) * sizeof *saved);
    if (!saved) return bm_err_set(err, "frontier: out of memory");
    for (int r = 0; r < BM_FRC_N && rc == BM_OK; r++) {
        bm_frontier_apply_rc(s, (enum bm_frontier_rc)r, saved);
        for (size_t k = 0; k < sizeof frontier_policies / sizeof frontier_policies[0] && rc == BM_OK; k++) {
            struct bm_plan_opts po = *o;
            po.policy = frontier_policies[k];
            po.window = BM_WINDOW_AUTO;
            struct bm_frontier_point pt;
            struct bm_err e;
            if (one_point(s, &po, cap_mib, (enum bm_frontier_rc)r, &pt, kp, &e)) {
                if (!failed++) first = e;
                continue;
            }
            rc = add(fr, &pt, kp, err);
            if (po.policy != BM_POL_BIGMAC) continue;
            /* larger windows while they pay: the window is a cap, so a table that records a
             * smaller window than asked means the larger one was no faster */
            double prev = pt.makespan_ms;
            for (int w = pt.window + 1, steps = 0; rc == BM_OK && steps < MAX_WINDOW_STEPS; w++, steps++) {
                po.window = w;
                struct bm_frontier_point q;
                if (one_point(s, &po, cap_mib, (enum bm_frontier_rc)r, &q, kp, &e)) break;
                if (q.window != w || !(q.makespan_ms < prev)) {
                    drop(kp);
                    break;
                }
                rc = add(fr, &q, kp, err);
                prev = q.makespan_ms;
            }
        }
        bm_spec_recompute_restore(s, saved);
    }
    bm_free(saved);
    if (n_failed) *n_failed = failed;
    if (rc == BM_OK && fr->n == 0) rc = bm_err_set(err, "%s", first.msg);
    if (rc) {
        bm_frontier_free(fr);
        return BM_ERR;
    }
    bm_frontier_mark(fr->pts, fr->n);
    return BM_OK;
}
