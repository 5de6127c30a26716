/* compare.c — the policy comparison of the HTML report: bm_compare (src/study/compare.c: every
 * policy, the zero-added-bubble bound of docs/design.md §6, the makespan lower bound, the
 * optimus+recompute baseline when optimus runs out of memory) plus the compute/memory frontier.
 * Tables and timelines are kept, within a budget, for the stacked timelines. */
#include <string.h>

#include "report/report.h"
#include "util/util.h"

/* bm_compare's keep callback: a row's table and timeline stay while their compute ops fit the
 * budget. The stacked timelines show every policy or none, so when bigmac's (the first row)
 * is too big to embed them all, none is kept. */
struct keep_budget {
    long left;
};

static int keep_row(void *ctx, const struct bm_compare_row *row, const struct bm_table *t,
                    const struct bm_costs *c, const struct bm_timeline *tl)
{
    struct keep_budget *b = ctx;
    (void)c, (void)tl;
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

/* See report.h. The rows and both bounds are bm_compare's (src/study/), kept as they are; this
 * adds which timelines to embed and the frontier. */
int bm_report_compare_build(struct bm_spec *s, const struct bm_plan_opts *o, struct bm_report_compare *cmp)
{
    memset(cmp, 0, sizeof *cmp);
    struct keep_budget budget = {BM_REPORT_MINI_BUDGET};
    struct bm_compare_opts co = {.keep = keep_row, .ctx = &budget};
    struct bm_err err;
    if (bm_compare(s, o, &co, &cmp->c, &err)) return BM_ERR;
    long bigmac_ops = cmp->c.rows[BM_POL_BIGMAC].ok ? cmp->c.rows[BM_POL_BIGMAC].n_ops : 0;
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
    bm_compare_free(&cmp->c);
    if (cmp->frontier) bm_frontier_free(cmp->frontier);
    bm_free(cmp->frontier);
    cmp->frontier = NULL;
}
