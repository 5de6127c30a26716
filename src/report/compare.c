/* compare.c — the policy comparison of the HTML report: plan and simulate one spec under all
 * six policies with the same parallel settings, plus the zero-added-bubble bound (DESIGN §6) and
 * the makespan lower bound (docs/simulator.md). */
#include <string.h>

#include "report/report.h"
#include "util/util.h"

/* See report.h. Each policy is planned and simulated on its own, so one failing (out of
 * memory included) only marks its row. */
int bm_report_compare_build(const struct bm_spec *s, const struct bm_plan_opts *o,
                            struct bm_report_compare *cmp)
{
    memset(cmp, 0, sizeof *cmp);
    cmp->bound_ms = -1;
    cmp->lower_ms = -1;
    double none_ms = -1, nested_max = -1;
    for (int p = 0; p < BM_N_POLICIES; p++) {
        struct bm_report_policy_row *row = &cmp->rows[cmp->n_rows++];
        row->policy = (enum bm_policy)p;
        struct bm_plan_opts po = *o;
        po.policy = (enum bm_policy)p;
        struct bm_table *t = NULL;
        struct bm_timeline *tl = NULL;
        struct bm_err err;
        double lb = -1;
        if (bm_plan_build_search(s, &po, 0, &t, &lb, &err) || bm_simulate(t, NULL, &tl, &err)) {
            char *nl = strchr(err.msg, '\n');
            if (nl) *nl = 0;
            snprintf(row->error, sizeof row->error, "%s", err.msg);
            bm_table_free(t);
            continue;
        }
        row->ok = 1;
        row->makespan_ms = tl->makespan_ms;
        row->bubble_ratio = tl->bubble_ratio;
        memcpy(row->peak_act_mib, tl->peak_act_mib, sizeof row->peak_act_mib);
        row->peak_mib = tl->peak_mib;
        row->oom = tl->oom;
        row->window = t->window;
        if (p == BM_POL_NONE) none_ms = tl->makespan_ms;
        else if (cmp->lower_ms < 0 || lb < cmp->lower_ms) cmp->lower_ms = lb;
        if (p == BM_POL_BIGMAC)
            for (int r = 0; r < tl->pp; r++) {
                double n = tl->ranks[r].busy_role_ms[BM_ROLE_ENCODER] +
                           tl->ranks[r].busy_role_ms[BM_ROLE_GENERATOR];
                if (n > nested_max) nested_max = n;
            }
        bm_timeline_free(tl);
        bm_table_free(t);
    }
    if (none_ms >= 0 && nested_max >= 0) cmp->bound_ms = none_ms + nested_max;
    return BM_OK;
}
