/* compare.c — the policy comparison of the HTML report: plan and simulate one spec under all
 * six policies with the same parallel settings, plus the zero-added-bubble bound (docs/design.md §6),
 * the makespan lower bound (docs/simulator.md), the memory-equal optimus+recompute baseline when
 * optimus runs out of memory, and the compute/memory frontier. Tables and timelines are kept for
 * the stacked timelines. */
#include <string.h>

#include "report/report.h"
#include "spec/recompute.h"
#include "util/util.h"

const char *bm_report_row_name(const struct bm_report_policy_row *row)
{
    return row->recompute ? "optimus+recompute" : bm_policy_name(row->policy);
}

/* Plan + simulate row->policy into row; its table and timeline are kept while they fit
 * *budget (compute ops), else freed. */
static void fill_row(const struct bm_spec *s, const struct bm_plan_opts *o, struct bm_report_policy_row *row,
                     long *budget, double *lower_ms)
{
    struct bm_plan_opts po = *o;
    po.policy = row->policy;
    struct bm_table *t = NULL;
    struct bm_timeline *tl = NULL;
    struct bm_err err;
    double lb = -1;
    if (bm_plan_build_search(s, &po, 0, &t, &lb, &err) || bm_simulate(t, NULL, &tl, &err)) {
        char *nl = strchr(err.msg, '\n');
        if (nl) *nl = 0;
        snprintf(row->error, sizeof row->error, "%s", err.msg);
        bm_table_free(t);
        return;
    }
    if (lower_ms) *lower_ms = lb;
    row->ok = 1;
    row->makespan_ms = tl->makespan_ms;
    row->bubble_ratio = tl->bubble_ratio;
    memcpy(row->peak_act_mib, tl->peak_act_mib, sizeof row->peak_act_mib);
    row->peak_mib = tl->peak_mib;
    row->oom = tl->oom;
    row->window = t->window;
    row->n_ops = bm_table_n_ops(t);
    for (int r = 0; r < tl->pp; r++) {
        double nb = tl->ranks[r].busy_role_ms[BM_ROLE_ENCODER] + tl->ranks[r].busy_role_ms[BM_ROLE_GENERATOR];
        if (nb > row->nested_max_ms) row->nested_max_ms = nb;
    }
    long n = bm_report_compute_ops(t);
    if (n <= *budget) {
        *budget -= n;
        row->t = t;
        row->tl = tl;
    } else {
        bm_timeline_free(tl);
        bm_table_free(t);
    }
}

/* See report.h. Each policy is planned and simulated on its own, so one failing (out of
 * memory included) only marks its row. */
int bm_report_compare_build(struct bm_spec *s, const struct bm_plan_opts *o, struct bm_report_compare *cmp)
{
    memset(cmp, 0, sizeof *cmp);
    cmp->bound_ms = -1;
    cmp->lower_ms = -1;
    double none_ms = -1, nested_max = -1;
    long budget = BM_REPORT_MINI_BUDGET, bigmac_ops = 0;
    for (int p = 0; p < BM_N_POLICIES; p++) {
        struct bm_report_policy_row *row = &cmp->rows[cmp->n_rows++];
        row->policy = (enum bm_policy)p;
        double lb = -1;
        fill_row(s, o, row, &budget, &lb);
        if (p == BM_POL_BIGMAC && row->t && bm_report_compute_ops(row->t) * (BM_N_POLICIES + 1) > BM_REPORT_MINI_BUDGET) {
            /* the stacked timelines show every policy or none: too big to embed them all */
            bm_timeline_free(row->tl), bm_table_free(row->t);
            row->t = NULL, row->tl = NULL;
            budget = 0;
        }
        if (!row->ok) continue;
        if (p == BM_POL_NONE) none_ms = row->makespan_ms;
        else if (cmp->lower_ms < 0 || lb < cmp->lower_ms) cmp->lower_ms = lb;
        if (p == BM_POL_BIGMAC) nested_max = row->nested_max_ms;
    }
    if (none_ms >= 0 && nested_max >= 0) cmp->bound_ms = none_ms + nested_max;
    int *saved = bm_malloc((size_t)(s->n_modules > 0 ? s->n_modules : 1) * sizeof *saved);
    if (saved && cmp->rows[BM_POL_OPTIMUS].ok && cmp->rows[BM_POL_OPTIMUS].oom) {
        struct bm_report_policy_row *row = &cmp->rows[cmp->n_rows++];
        row->policy = BM_POL_OPTIMUS;
        row->recompute = 1;
        bm_spec_recompute_roles(s, BM_RECOMPUTE_NESTED, 1, saved);
        fill_row(s, o, row, &budget, NULL);
        bm_spec_recompute_restore(s, saved);
    }
    bm_free(saved);
    bigmac_ops = cmp->rows[BM_POL_BIGMAC].ok ? cmp->rows[BM_POL_BIGMAC].n_ops : 0;
    if (bigmac_ops > BM_REPORT_FRONTIER_MAX_OPS) {
        cmp->frontier_skipped_ops = bigmac_ops;
        return BM_OK;
    }
    struct bm_frontier *fr = bm_calloc(1, sizeof *fr);
    struct bm_err err;
    /* keep the points' timelines only when all of them could be drawn */
    int keep = bigmac_ops > 0 && bigmac_ops * 24 <= BM_REPORT_MINI_BUDGET;
    if (fr && bm_frontier_build(s, o, s->device.memory_gib > 0 ? s->device.memory_gib * 1024.0 : 0, keep, fr, NULL,
                                &err) == BM_OK)
        cmp->frontier = fr;
    else
        bm_free(fr);
    return BM_OK;
}

void bm_report_compare_free(struct bm_report_compare *cmp)
{
    for (int i = 0; i < cmp->n_rows; i++) {
        bm_table_free(cmp->rows[i].t);
        bm_timeline_free(cmp->rows[i].tl);
        cmp->rows[i].t = NULL, cmp->rows[i].tl = NULL;
    }
    if (cmp->frontier) bm_frontier_free(cmp->frontier);
    bm_free(cmp->frontier);
    cmp->frontier = NULL;
}
