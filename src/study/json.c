/* json.c — the JSON objects of simulation results: one table's (`bigmac simulate --json`,
 * bigmac.simulate in Python) and a policy comparison's (`simulate --compare --json`). Sizes
 * are GiB (MiB / 1024) as the human output prints them. */
#include <string.h>

#include "sim/hosts.h"
#include "sim/step.h"
#include "util/util.h"
#include "study/study.h"

#define GIB(mib) ((mib) / 1024.0)

static json_t *roles_json(const double *mib)
{
    return json_pack("{s:f, s:f, s:f}", "encoder", GIB(mib[BM_ROLE_ENCODER]), "backbone",
                     GIB(mib[BM_ROLE_BACKBONE]), "generator", GIB(mib[BM_ROLE_GENERATOR]));
}

json_t *bm_study_hosts_json(const struct bm_table *t, const struct bm_costs *c)
{
    struct bm_host_traffic h;
    bm_cost_host_traffic(t, c, &h);
    return json_pack("{s:i, s:i, s:f, s:f, s:I, s:I, s:f, s:f, s:f}", "hosts", h.hosts, "ranks_per_host",
                     t->ranks_per_host, "inter_host_gbytes_per_s", c->device.inter_host_gbytes_per_s,
                     "inter_host_latency_us", c->device.inter_host_latency_us, "transfers", (json_int_t)h.sends,
                     "cross_host_transfers", (json_int_t)h.cross, "cross_host_mib", h.cross_mib,
                     "cross_host_ms", h.cross_ms, "cross_host_intra_link_ms", h.cross_intra_ms);
}

json_t *bm_study_sim_json(const struct bm_table *t, const struct bm_costs *c, const struct bm_timeline *tl)
{
    json_t *ranks = json_array();
    int split = bm_table_splits(t, -1);
    struct bm_step_mem *parts = bm_calloc((size_t)(tl->pp > 0 ? tl->pp : 1), sizeof *parts);
    if (parts) bm_step_state(t, c, parts);
    for (int r = 0; r < tl->pp; r++) {
        const struct bm_rank_timeline *rt = &tl->ranks[r];
        double idle = rt->idle_lead_ms + rt->idle_mid_ms + rt->idle_tail_ms;
        json_array_append_new(
            ranks, json_pack("{s:i, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:o, s:b}", "rank", r, "busy_ms",
                             rt->busy_ms, "idle_ms", idle, "idle_lead_ms", rt->idle_lead_ms,
                             "idle_mid_ms", rt->idle_mid_ms, "idle_tail_ms", rt->idle_tail_ms,
                             "state_gib", GIB(rt->state_mib), "peak_mem_gib", GIB(rt->peak_mib),
                             "peak_act_gib", roles_json(rt->peak_act_mib), "oom", rt->oom));
        if (split) /* the two-step free of a split backward (B, then W) */
            json_object_update_new(json_array_get(ranks, (size_t)r),
                                   json_pack("{s:f, s:f, s:f}", "freed_at_b_gib", GIB(rt->freed_b_mib),
                                             "freed_at_w_gib", GIB(rt->freed_w_mib), "peak_held_for_w_gib",
                                             GIB(rt->peak_held_w_mib)));
        if (parts) /* the state's parts (sim/step.h) */
            json_object_update_new(json_array_get(ranks, (size_t)r),
                                   json_pack("{s:f, s:f, s:f}", "weights_gib", GIB(parts[r].weights_mib),
                                             "grads_gib", GIB(parts[r].grads_mib), "optimizer_state_gib",
                                             GIB(parts[r].optim_mib)));
    }
    bm_free(parts);
    json_t *j = json_pack("{s:s, s:s, s:i, s:i, s:i, s:i, s:i, s:f, s:f, s:f, s:f, s:f, s:b, s:o}", "policy",
                     bm_policy_name(t->policy), "backbone", bm_backbone_name(t->backbone), "pp",
                     t->pp, "vpp", t->vpp, "microbatches", t->microbatches, "unit", t->unit,
                     "window", t->window, "makespan_ms", tl->makespan_ms, "bubble_ratio",
                     tl->bubble_ratio, "samples_per_s", tl->samples_per_s, "peak_mem_gib",
                     GIB(tl->peak_mib), "memory_gib", GIB(tl->memory_cap_mib), "oom", tl->oom,
                     "ranks", ranks);
    if (j && t->dp > 1) /* data-parallel replicas of this pipeline: its figures are one replica's */
        json_object_set_new(j, "dp", json_integer(t->dp));
    if (j) /* the whole step (sim/step.h): samples_per_s counts it */
        json_object_update_new(j, json_pack("{s:i, s:f, s:f, s:f, s:f}", "zero", t->zero, "step_ms", tl->step_ms,
                                            "sync_exposed_ms", tl->sync_exposed_ms, "sync_total_ms",
                                            tl->sync_total_ms, "optimizer_ms", tl->optimizer_ms));
    if (j && t->ranks_per_host > 0) json_object_set_new(j, "hosts", bm_study_hosts_json(t, c));
    return j;
}

/* ------------------------------------------------------------------ comparison */

/* Each row's object, built while its table and timeline exist (bm_compare's keep callback). */
static int row_json(void *ctx, const struct bm_compare_row *row, const struct bm_table *t,
                    const struct bm_costs *c, const struct bm_timeline *tl)
{
    json_t **slot = ctx;
    json_t *j;
    if (!row->ok) {
        j = json_pack("{s:s, s:s}", "policy", bm_compare_row_name(row), "error", row->error);
    } else {
        j = bm_study_sim_json(t, c, tl);
        if (j && row->recompute) json_object_set_new(j, "policy", json_string(bm_compare_row_name(row)));
    }
    slot[row->recompute ? BM_N_POLICIES : row->policy] = j;
    return 0;
}

int bm_study_compare_json(struct bm_spec *s, const struct bm_plan_opts *o, const struct bm_compare_opts *opts,
                          json_t **out, int *n_failed, struct bm_err *err)
{
    json_t *slot[BM_N_POLICIES + 1] = {0};
    struct bm_compare_opts co = opts ? *opts : (struct bm_compare_opts){0};
    co.keep = row_json;
    co.ctx = slot;
    struct bm_compare c;
    *out = NULL;
    if (bm_compare(s, o, &co, &c, err)) {
        for (int i = 0; i <= BM_N_POLICIES; i++) json_decref(slot[i]);
        return BM_ERR;
    }
    json_t *results = json_array();
    for (int p = 0; p < BM_N_POLICIES; p++) {
        json_array_append_new(results, slot[p]);
        if (p == BM_POL_OPTIMUS && slot[BM_N_POLICIES]) json_array_append_new(results, slot[BM_N_POLICIES]);
    }
    *out = json_pack("{s:o, s:o, s:o}", "results", results, "zero_bubble_bound_ms",
                     c.bound_ms >= 0 ? json_real(c.bound_ms) : json_null(), "lower_bound_ms",
                     c.lower_ms >= 0 ? json_real(c.lower_ms) : json_null());
    if (n_failed) *n_failed = c.n_failed;
    bm_compare_free(&c);
    if (!*out) return bm_err_set(err, "out of memory");
    return BM_OK;
}

/* ---------------------------------------------------------------- the public writers */

/* j (a new reference, NULL when memory ran out) to f as the CLI prints JSON: indented by 2,
 * 10 significant digits, then a newline. Takes j. */
static int write_json(json_t *j, FILE *f)
{
    if (!j) return BM_ERR;
    int rc = json_dumpf(j, f, JSON_INDENT(2) | JSON_REAL_PRECISION(10)) || fputc('\n', f) == EOF ? BM_ERR : BM_OK;
    json_decref(j);
    return rc;
}

int bm_timeline_write_json(const struct bm_table *t, const struct bm_costs *c, const struct bm_timeline *tl, FILE *f)
{
    return write_json(bm_study_sim_json(t, c, tl), f);
}

int bm_compare_write_json(struct bm_spec *s, const struct bm_plan_opts *o, const struct bm_compare_opts *opts,
                          FILE *f, int *n_failed, struct bm_err *err)
{
    json_t *j;
    if (bm_study_compare_json(s, o, opts, &j, n_failed, err)) return BM_ERR;
    if (write_json(j, f)) return bm_err_set(err, "simulate --compare: cannot write the JSON (out of memory or a write error)");
    return BM_OK;
}
