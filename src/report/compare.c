/* compare.c — the policy comparison of the HTML report: bm_compare (src/study/compare.c: every
 * policy, the zero-added-bubble bound of docs/design.md §6, the makespan lower bound, the
 * optimus+recompute baseline when optimus runs out of memory) plus the compute/memory frontier.
 * Tables and timelines are kept, within a budget, for the stacked timelines. */
#include <string.h>

#include "report/report.h"
#include "util/util.h"

const char *bm_report_row_name(const struct bm_report_policy_row *row)
{
    struct bm_compare_row r = {.policy = row->policy, .recompute = row->recompute};
    return bm_compare_row_name(&r);
}

/* bm_compare's keep callback: a row's table and timeline stay while their compute ops fit the
 * budget. The stacked timelines show every policy or none, so when bigmac's (the first row)
 * is too big to embed them all, none is kept. */
struct keep_budget {
    long left;
};

static int keep_row(void *ctx, const struct bm_compare_row *row, const struct bm_table *t,
                    const struct bm_timeline *tl)
{
    struct keep_budget *b = ctx;
    (void)tl;
    if (!t) return 0;
    long n = bm_report_compute_ops(t);
    if (!row->recompute && row->policy == BM_POL_BIGMAC && n * (BM_N_POLICIES + 1) > BM_REPORT_MINI_BUDGET) {
        b->left = 0;
        return 0;
    }
    if (n > b->left) return 0;
    b->left -= n;
    return 1;
}

/* The report's row of a comparison row (its table and timeline handed over). */
static void take_row(struct bm_compare_row *from, struct bm_report_policy_row *row)
{
    row->policy = from->policy;
    row->recompute = from->recompute;
    row->ok = from->ok;
    if (!from->ok) {
        snprintf(row->error, sizeof row->error, "%s", from->error);
        row->error[strcspn(row->error, "\n")] = 0;
        return;
    }
    row->makespan_ms = from->makespan_ms;
    row->bubble_ratio = from->bubble_ratio;
    memcpy(row->peak_act_mib, from->peak_act_mib, sizeof row->peak_act_mib);
    row->peak_mib = from->peak_mib;
    row->oom = from->oom;
    row->window = from->window;
    row->n_ops = from->n_ops;
    row->nested_max_ms = from->nested_max_ms;
    row->t = from->t, row->tl = from->tl;
    from->t = NULL, from->tl = NULL;
}

/* See report.h. The rows and both bounds are bm_compare's (src/study/); this adds which
 * timelines to embed and the frontier. */
int bm_report_compare_build(struct bm_spec *s, const struct bm_plan_opts *o, struct bm_report_compare *cmp)
{
    memset(cmp, 0, sizeof *cmp);
    struct keep_budget budget = {BM_REPORT_MINI_BUDGET};
    struct bm_compare_opts co = {.keep = keep_row, .ctx = &budget};
    struct bm_compare c;
    struct bm_err err;
    if (bm_compare(s, o, &co, &c, &err)) return BM_ERR;
    for (int i = 0; i < c.n_rows; i++) take_row(&c.rows[i], &cmp->rows[i]);
    cmp->n_rows = c.n_rows;
    cmp->bound_ms = c.bound_ms;
    cmp->lower_ms = c.lower_ms;
    bm_compare_free(&c);
    long bigmac_ops = cmp->rows[BM_POL_BIGMAC].ok ? cmp->rows[BM_POL_BIGMAC].n_ops : 0;
    if (bigmac_ops > BM_REPORT_FRONTIER_MAX_OPS) {
        cmp->frontier_skipped_ops = bigmac_ops;
        return BM_OK;
    }
    struct bm_frontier *fr = bm_calloc(1, sizeof *fr);
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
