/* compare.c — bm_compare: one spec planned and simulated under every policy with the same
 * parallel settings, plus the two bounds every reader of a comparison wants (include/bigmac.h):
 *
 *   zero-added-bubble bound = none's makespan + bigmac's largest per-rank encoder+generator
 *       busy time (docs/design.md §6): what bigmac would take if every nested op it adds to a
 *       rank landed outside the backbone's bubbles;
 *   lower bound = the smallest of the policies' own makespan lower bounds (each places the
 *       work its own way, so only the smallest holds for all; none runs less work and is left
 *       out; docs/simulator.md "Lower bound"). Under jitter the durations are not the nominal
 *       ones the bound is computed from: no lower bound then.
 *
 * When optimus runs out of memory, one more row: optimus with every encoder and generator
 * recomputed, the memory-equal compute-first baseline. It runs more work on optimus's
 * placement, so the lower bound holds for it too. `bigmac simulate --compare`, the HTML report
 * (src/report/compare.c) and bench/bench_policies.c all read this. */
#include <string.h>

#include "spec/recompute.h"
#include "study/study.h"
#include "util/util.h"

const char *bm_compare_row_name(const struct bm_compare_row *row)
{
    return row->recompute ? "optimus+recompute" : bm_policy_name(row->policy);
}

double bm_study_nested_max_ms(const struct bm_timeline *tl)
{
    double m = 0;
    for (int r = 0; r < tl->pp; r++) {
        double v = tl->ranks[r].busy_role_ms[BM_ROLE_ENCODER] + tl->ranks[r].busy_role_ms[BM_ROLE_GENERATOR];
        if (v > m) m = v;
    }
    return m;
}

/* Plan + simulate row->policy (search: the placement search budget) into row, then hand the
 * table and timeline to the keep callback. */
static void fill_row(const struct bm_spec *s, const struct bm_plan_opts *o, const struct bm_compare_opts *co,
                     int search, struct bm_compare_row *row)
{
    struct bm_plan_opts po = *o;
    po.policy = row->policy;
    struct bm_table *t = NULL;
    struct bm_costs *c = NULL;
    struct bm_timeline *tl = NULL;
    struct bm_err err;
    double lb = -1;
    row->lower_ms = -1;
    if (bm_plan_build_search(s, &po, search, &t, &c, &lb, &err) || (co->keep ? bm_simulate : bm_simulate_summary)(t, c, co->sim, &tl, &err)) {
        snprintf(row->error, sizeof row->error, "%s", err.msg);
        bm_table_free(t);
        bm_costs_free(c);
        if (co->keep) co->keep(co->ctx, row, NULL, NULL, NULL);
        return;
    }
    row->ok = 1;
    if (!row->recompute) row->lower_ms = lb;
    row->makespan_ms = tl->makespan_ms;
    row->bubble_ratio = tl->bubble_ratio;
    row->samples_per_s = tl->samples_per_s;
    row->step_ms = tl->step_ms;
    row->sync_exposed_ms = tl->sync_exposed_ms;
    row->optimizer_ms = tl->optimizer_ms;
    memcpy(row->peak_act_mib, tl->peak_act_mib, sizeof row->peak_act_mib);
    row->peak_mib = tl->peak_mib;
    row->oom = tl->oom;
    row->window = t->window;
    row->n_ops = bm_table_n_ops(t);
    row->nested_max_ms = bm_study_nested_max_ms(tl);
    if (co->keep && co->keep(co->ctx, row, t, c, tl)) {
        row->t = t;
        row->c = c;
        row->tl = tl;
    } else {
        bm_timeline_free(tl);
        bm_table_free(t);
        bm_costs_free(c);
    }
}

/* The optimus+recompute row (rows[n_rows]). */
static int add_recompute_row(struct bm_spec *s, const struct bm_plan_opts *o, const struct bm_compare_opts *co,
                             struct bm_compare *c, struct bm_err *err)
{
    int *saved = bm_malloc((size_t)(s->n_modules > 0 ? s->n_modules : 1) * sizeof *saved);
    if (!saved) return bm_err_set(err, "out of memory");
    struct bm_compare_row *row = &c->rows[c->n_rows++];
    row->policy = BM_POL_OPTIMUS;
    row->recompute = 1;
    bm_spec_recompute_roles(s, BM_RECOMPUTE_NESTED, 1, saved);
    fill_row(s, o, co, 0, row);
    bm_spec_recompute_restore(s, saved);
    bm_free(saved);
    return BM_OK;
}

int bm_compare(struct bm_spec *s, const struct bm_plan_opts *o, const struct bm_compare_opts *opts,
               struct bm_compare *out, struct bm_err *err)
{
    static const struct bm_compare_opts defaults = {0};
    const struct bm_compare_opts *co = opts ? opts : &defaults;
    memset(out, 0, sizeof *out);
    out->bound_ms = -1;
    out->lower_ms = -1;
    if (!(out->rows = bm_calloc(BM_N_POLICIES + 1, sizeof *out->rows))) return bm_err_set(err, "out of memory");
    for (int p = 0; p < BM_N_POLICIES; p++) {
        struct bm_compare_row *row = &out->rows[out->n_rows++];
        row->policy = (enum bm_policy)p;
        fill_row(s, o, co, co->search, row);
        if (!row->ok) {
            out->n_failed++;
            continue;
        }
        if (p != BM_POL_NONE && (out->lower_ms < 0 || row->lower_ms < out->lower_ms)) out->lower_ms = row->lower_ms;
    }
    const struct bm_compare_row *none = &out->rows[BM_POL_NONE], *bigmac = &out->rows[BM_POL_BIGMAC];
    if (none->ok && bigmac->ok) out->bound_ms = none->makespan_ms + bigmac->nested_max_ms;
    if (co->sim && co->sim->jitter > 0) out->lower_ms = -1;
    if (out->rows[BM_POL_OPTIMUS].ok && out->rows[BM_POL_OPTIMUS].oom && add_recompute_row(s, o, co, out, err)) {
        bm_compare_free(out);
        memset(out, 0, sizeof *out);
        return BM_ERR;
    }
    return BM_OK;
}

void bm_compare_free(struct bm_compare *c)
{
    for (int i = 0; c->rows && i < c->n_rows; i++) {
        bm_table_free(c->rows[i].t);
        bm_costs_free(c->rows[i].c);
        bm_timeline_free(c->rows[i].tl);
    }
    bm_free(c->rows);
    c->rows = NULL;
    c->n_rows = 0;
}
