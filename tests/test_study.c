/* test_study.c — the study package (src/study/) called from C: bm_compare's rows and bounds and
 * bm_sweep's ranking on a spec small enough to work out by hand. The spec has free transfers
 * (no latency, an unbounded link), P = 2, M = 2, 1F1B, a backbone of F 20 / B 40 ms split into
 * two chunks of 10 / 20 ms, an encoder of 1 / 2 ms and a generator of 3 / 4 ms per microbatch:
 *
 *   none (the backbone alone):  1F1B's makespan is (M + P - 1)(f + b) = 3 * 30 = 90 ms;
 *   nested work over all ranks: M * (1 + 2 + 3 + 4) = 20 ms, so bigmac's largest per-rank share
 *                               is at least 10 ms, and the bound none + that share;
 *   sweep of none over pp 1, 2 x M 2, 4: pp 1 runs M * 60 ms (120, 240), pp 2 (M + 1) * 30 ms
 *                               (90, 150); samples/s = M / makespan, so the ranking is (2, 4),
 *                               (2, 2), then the pp 1 tie (16.67 samples/s each) by makespan. */
#include "test.h"

#include "bigmac.h"

static const char *SPEC =
    "{\n"
    "  \"format\": \"bigmac-spec\", \"version\": 1, \"name\": \"study-tiny\",\n"
    "  \"device\": {\"memory_gib\": 80, \"peak_tflops\": 100, \"efficiency\": 0.5, \"link_gbytes_per_s\": 1e9, \"link_latency_us\": 0},\n"
    "  \"parallel\": {\"pp\": 2, \"vpp\": 1, \"microbatches\": 2},\n"
    "  \"schedule\": {\"backbone\": \"1f1b\", \"policy\": \"bigmac\"},\n"
    "  \"inputs\": [\"image\", \"text\"],\n"
    "  \"modules\": [\n"
    "    {\"name\": \"enc\", \"role\": \"encoder\", \"consumes\": [\"image\"], \"produces\": [\"emb\"],\n"
    "     \"cost\": {\"fwd_ms\": 1, \"bwd_ms\": 2, \"act_mib\": 1, \"state_mib\": 1, \"out_mib\": 0}},\n"
    "    {\"name\": \"bb\", \"role\": \"backbone\", \"consumes\": [\"text\", \"emb\"], \"produces\": [\"hidden\"], \"layers\": 4,\n"
    "     \"cost\": {\"fwd_ms\": 20, \"bwd_ms\": 40, \"act_mib\": 1, \"state_mib\": 1, \"out_mib\": 0}},\n"
    "    {\"name\": \"gen\", \"role\": \"generator\", \"consumes\": [\"hidden\"], \"produces\": [\"loss\"], \"grad_to_backbone\": true,\n"
    "     \"cost\": {\"fwd_ms\": 3, \"bwd_ms\": 4, \"act_mib\": 1, \"state_mib\": 1, \"out_mib\": 0}}\n"
    "  ]\n"
    "}\n"
;

static struct bm_spec *load(void)
{
    struct bm_spec *s = NULL;
    struct bm_err err;
    int rc = bm_spec_parse(SPEC, "study-tiny.json", &s, &err);
    CHECKF(rc == BM_OK, "%s", err.msg);
    return s;
}

/* Counts the rows the keep callback saw and keeps bigmac's table and timeline. */
struct seen {
    int calls, kept;
};

static int keep_bigmac(void *ctx, const struct bm_compare_row *row, const struct bm_table *t,
                       const struct bm_costs *c, const struct bm_timeline *tl)
{
    struct seen *s = ctx;
    s->calls++;
    int keep = t && c && tl && row->policy == BM_POL_BIGMAC && !row->recompute;
    s->kept += keep;
    return keep;
}

TEST(compare_bound_by_hand)
{
    struct bm_spec *s = load();
    if (!s) return;
    struct bm_plan_opts o;
    bm_plan_opts_from_spec(&o, s);
    struct seen seen = {0};
    struct bm_compare_opts co = {.keep = keep_bigmac, .ctx = &seen};
    struct bm_compare c;
    struct bm_err err;
    CHECKF(bm_compare(s, &o, &co, &c, &err) == BM_OK, "%s", err.msg);
    CHECK(c.n_rows == BM_N_POLICIES); /* optimus fits 80 GiB: no recompute row */
    CHECK(c.n_failed == 0);
    CHECK(seen.calls == BM_N_POLICIES && seen.kept == 1);
    for (int p = 0; p < BM_N_POLICIES; p++) {
        CHECK(c.rows[p].policy == (enum bm_policy)p && c.rows[p].ok && !c.rows[p].recompute);
        CHECK((c.rows[p].t != NULL) == (p == BM_POL_BIGMAC));
    }
    const struct bm_compare_row *none = &c.rows[BM_POL_NONE], *bm = &c.rows[BM_POL_BIGMAC];
    CHECK_NEAR(none->makespan_ms, 90.0, 1e-9);
    CHECK_NEAR(none->nested_max_ms, 0.0, 1e-12);
    /* bigmac's nested work, from its own kept timeline: 20 ms in all, the largest share >= 10 */
    double total = 0, most = 0;
    for (int r = 0; r < bm->tl->pp; r++) {
        double v = bm->tl->ranks[r].busy_role_ms[BM_ROLE_ENCODER] + bm->tl->ranks[r].busy_role_ms[BM_ROLE_GENERATOR];
        total += v;
        if (v > most) most = v;
    }
    CHECK_NEAR(total, 20.0, 1e-9);
    CHECK_NEAR(bm->nested_max_ms, most, 1e-12);
    CHECK(most >= 10.0 - 1e-9);
    CHECK_NEAR(c.bound_ms, 90.0 + most, 1e-9);
    /* the lower bound is the smallest policy's own and holds for each of them (none left out) */
    CHECK(c.lower_ms > 0);
    for (int p = 0; p < BM_N_POLICIES; p++) {
        if (p == BM_POL_NONE) continue;
        CHECK(c.rows[p].lower_ms >= c.lower_ms - 1e-12);
        CHECK(c.rows[p].makespan_ms >= c.lower_ms - 1e-9);
    }
    CHECK(!strcmp(bm_compare_row_name(&c.rows[BM_POL_OPTIMUS]), "optimus"));
    bm_compare_free(&c);
    CHECK(c.rows == NULL && c.n_rows == 0);
    bm_compare_free(&c); /* twice is safe */
    /* under jitter the durations are not the nominal ones: no lower bound */
    struct bm_sim_opts jit = {0.2, 3, 1};
    co = (struct bm_compare_opts){.sim = &jit};
    CHECKF(bm_compare(s, &o, &co, &c, &err) == BM_OK, "%s", err.msg);
    CHECK(c.lower_ms < 0);
    CHECK(c.bound_ms > 0);
    bm_compare_free(&c);
    bm_spec_free(s);
}

/* A setting no policy can plan fails every row, each with its whole message; no bounds. */
TEST(compare_failure_marks_its_row)
{
    struct bm_spec *s = load();
    if (!s) return;
    struct bm_plan_opts o;
    bm_plan_opts_from_spec(&o, s);
    o.pp = 8; /* 4 layers: too few for 8 chunks, whatever the policy */
    struct bm_compare c;
    struct bm_err err;
    CHECKF(bm_compare(s, &o, NULL, &c, &err) == BM_OK, "%s", err.msg);
    CHECK(c.n_failed == BM_N_POLICIES);
    CHECK(c.bound_ms < 0 && c.lower_ms < 0);
    for (int p = 0; p < BM_N_POLICIES; p++) {
        CHECK(!c.rows[p].ok);
        CHECK_STR_CONTAINS(c.rows[p].error, "too few for pp*vpp = 8 chunks");
    }
    bm_compare_free(&c);
    bm_spec_free(s);
}

/* the sweeps' policy lists (struct bm_sweep_opts points at the caller's) */
static const enum bm_policy only_none[] = {BM_POL_NONE};

TEST(sweep_ranks_by_throughput_then_makespan)
{
    struct bm_spec *s = load();
    if (!s) return;
    struct bm_plan_opts base;
    bm_plan_opts_from_spec(&base, s);
    base.unit = 0; /* follows pp */
    struct bm_sweep_opts so = {.pp = {1, 2, 8}, .n_pp = 3, .microbatches = {2, 4}, .n_microbatches = 2,
                               .policies = only_none, .n_policies = 1};
    struct bm_sweep sw;
    struct bm_err err;
    CHECKF(bm_sweep(s, &base, &so, &sw, &err) == BM_OK, "%s", err.msg);
    CHECK(sw.configs == 6);
    CHECK(sw.n_rows == 4 && sw.n_skipped == 2);
    CHECK_NEAR(sw.cap_mib, 80 * 1024.0, 1e-9);
    static const int want_pp[4] = {2, 2, 1, 1}, want_m[4] = {4, 2, 2, 4};
    static const double want_ms[4] = {150, 90, 120, 240};
    for (int i = 0; i < 4 && i < sw.n_rows; i++) {
        const struct bm_sweep_row *r = &sw.rows[i];
        CHECKF(r->pp == want_pp[i] && r->microbatches == want_m[i], "row %d: pp %d M %d", i, r->pp, r->microbatches);
        CHECK_NEAR(r->makespan_ms, want_ms[i], 1e-9);
        CHECK_NEAR(r->samples_per_s, r->microbatches / (want_ms[i] / 1e3), 1e-6);
        CHECK(r->policy == BM_POL_NONE && r->backbone == BM_BB_1F1B && !r->oom);
    }
    CHECK(sw.best == 0);
    for (int i = 0; i < sw.n_skipped; i++) {
        CHECK(sw.skipped[i].pp == 8);
        CHECK_STR_CONTAINS(sw.skipped[i].reason, "too few for pp*vpp = 8 chunks");
        CHECK(!strchr(sw.skipped[i].reason, '\n'));
    }
    bm_sweep_free(&sw);
    /* a cap below every peak: all OOM, ranked after nothing, so no best */
    static const enum bm_policy none_bigmac[] = {BM_POL_NONE, BM_POL_BIGMAC};
    so = (struct bm_sweep_opts){.pp = {2}, .n_pp = 1, .policies = none_bigmac, .n_policies = 2,
                                .windows = {1, 2}, .n_windows = 2, .mem_cap_mib = 1e-3};
    CHECKF(bm_sweep(s, &base, &so, &sw, &err) == BM_OK, "%s", err.msg);
    CHECK(sw.configs == 3); /* none once, bigmac at each window */
    CHECK(sw.n_rows + sw.n_skipped == 3);
    CHECK(sw.best == -1);
    for (int i = 0; i < sw.n_rows; i++) CHECK(sw.rows[i].oom);
    bm_sweep_free(&sw);
    bm_sweep_free(&sw); /* twice is safe */
    bm_spec_free(s);
}

/* vpp > 1 runs interleaved; a zero-bubble schedule stays zero-bubble at either vpp. */
TEST(sweep_backbone_follows_vpp)
{
    struct bm_spec *s = load();
    if (!s) return;
    struct bm_plan_opts base;
    bm_plan_opts_from_spec(&base, s);
    base.unit = 0;
    struct bm_sweep_opts so = {.vpp = {1, 2}, .n_vpp = 2, .policies = only_none, .n_policies = 1};
    struct bm_sweep sw;
    struct bm_err err;
    CHECKF(bm_sweep(s, &base, &so, &sw, &err) == BM_OK, "%s", err.msg);
    CHECK(sw.n_rows == 2);
    for (int i = 0; i < sw.n_rows; i++)
        CHECK(sw.rows[i].backbone == (sw.rows[i].vpp > 1 ? BM_BB_INTERLEAVED : BM_BB_1F1B));
    bm_sweep_free(&sw);
    base.backbone = BM_BB_ZB_H1;
    CHECKF(bm_sweep(s, &base, &so, &sw, &err) == BM_OK, "%s", err.msg);
    for (int i = 0; i < sw.n_rows; i++)
        CHECK(sw.rows[i].backbone == (sw.rows[i].vpp > 1 ? BM_BB_ZB_INTERLEAVED : BM_BB_ZB_H1));
    bm_sweep_free(&sw);
    bm_spec_free(s);
}

int main(void)
{
    RUN(compare_bound_by_hand);
    RUN(compare_failure_marks_its_row);
    RUN(sweep_ranks_by_throughput_then_makespan);
    RUN(sweep_backbone_follows_vpp);
    return test_summary();
}
