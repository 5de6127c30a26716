/* test_predict.c — the median over runs (bm_calibrate_median_runs, `calibrate --run-median`):
 * a simulated table stands in for a measured run (its op times are the cost model's, exactly,
 * so a calibration of it must give back the spec's numbers); copies of it are the repeated
 * runs, one of them disturbed by hand (one backbone op 50 ms longer, as a preempted op on a
 * shared machine). Expected values are worked out by hand in the comments. */
#include "calib/calib.h"
#include "table/table.h"
#include "test.h"
#include "util/util.h"

/* P = 2, V = 2 (4 backbone chunks, uniform weights), M = 4; ranks at speeds 1 and 2; every op
 * 4 us of dispatch; free links. Per op: vit F 1 ms, B 2 ms (x the rank's speed); llm F of a
 * chunk 8 / 4 = 2 ms, B 16 / 4 = 4 ms. */
static const char *spec_text =
    "{\"format\": \"bigmac-spec\", \"version\": 1, \"name\": \"runs\",\n"
    " \"device\": {\"link_latency_us\": 0, \"rank_time_scale\": [1, 2], \"op_overhead_us\": 4},\n"
    " \"parallel\": {\"pp\": 2, \"vpp\": 2, \"microbatches\": 4},\n"
    " \"schedule\": {\"backbone\": \"interleaved\", \"policy\": \"bigmac\"},\n"
    " \"inputs\": [\"image\", \"text\"],\n"
    " \"modules\": [\n"
    "  {\"name\": \"vit\", \"consumes\": [\"image\"], \"produces\": [\"v\"],\n"
    "   \"cost\": {\"fwd_ms\": 1, \"bwd_ms\": 2, \"out_mib\": 0}},\n"
    "  {\"name\": \"llm\", \"consumes\": [\"text\", \"v\"], \"produces\": [\"h\"],\n"
    "   \"cost\": {\"fwd_ms\": 8, \"bwd_ms\": 16, \"out_mib\": 0}}]}\n";

/* A copy of tl (same op times). */
static struct bm_timeline *copy_of(const struct bm_table *t, const struct bm_timeline *tl)
{
    struct bm_timeline *c = bm_timeline_new(t, test_costs(t));
    if (!c) return NULL;
    for (int r = 0; r < t->pp; r++)
        for (int k = 0; k < t->ranks[r].n_ops; k++) c->ranks[r].ops[k] = tl->ranks[r].ops[k];
    c->makespan_ms = tl->makespan_ms;
    c->measured = 1;
    return c;
}

/* Rank 0's first backbone F op of global chunk 0 (mb 0): its index, -1 if none. */
static int first_chunk0_forward(const struct bm_table *t)
{
    for (int k = 0; k < t->ranks[0].n_ops; k++) {
        const struct bm_op *op = &t->ranks[0].ops[k];
        if (op->kind == BM_OP_COMPUTE && op->module == t->backbone_module && op->pass == BM_PASS_F && op->chunk == 0)
            return k;
    }
    return -1;
}

TEST(median_over_runs_ignores_a_disturbed_run)
{
    struct bm_spec *s = NULL;
    struct bm_err err;
    CHECKF(bm_spec_parse(spec_text, "runs.json", &s, &err) == BM_OK, "%s", err.msg);
    if (!s) return;
    struct bm_plan_opts o;
    bm_plan_opts_from_spec(&o, s);
    struct bm_table *t = NULL;
    struct bm_costs *t_c = NULL;
    struct bm_timeline *a = NULL, *b = NULL, *c = NULL, *again = NULL;
    CHECKF(bm_plan_build(s, &o, &t, &t_c, &err) == BM_OK, "%s", err.msg);
    if (t) CHECKF(bm_simulate(t, t_c, NULL, &a, &err) == BM_OK, "%s", err.msg);
    if (!a) goto out;
    b = copy_of(t, a), c = copy_of(t, a);
    int k = first_chunk0_forward(t), vit = bm_table_find_module(t, "vit"), llm = t->backbone_module;
    CHECK(b && c && k >= 0 && vit >= 0);
    if (!b || !c || k < 0 || vit < 0) goto out;
    /* run c disturbed: that op 50 ms longer (the later ops keep their times: durations and the
     * gap after it are what calibration reads; the negative gap counts 0) */
    c->ranks[0].ops[k].end_ms += 50;
    struct bm_cost costs[2];
    double ms[4], rs[2], sp[2];
    struct bm_dispatch_fit oh = {-1, -1, -1, -1};
    /* 1. three runs, one disturbed: every number is the undisturbed runs' (two of three) */
    const struct bm_timeline *three[3] = {a, c, b};
    CHECKF(bm_calibrate_median_runs(t, t_c, three, 3, 1, costs, ms, rs, sp, &oh, &err) == BM_OK, "%s", err.msg);
    /* per run (means over the run's ops; module costs are means over both ranks): vit F ops on
     * rank 0 take 1 ms, on rank 1 2 ms; the rank scale then puts each rank at its own speed.
     * The median of {A, A, C} is A's value for every number. */
    struct bm_cost ca[2];
    double msa[4], rsa[2];
    const struct bm_timeline *one[1] = {a};
    CHECK(bm_calibrate_runs(t, t_c, one, 1, 1, ca, &err) == BM_OK);
    bm_calibrate_scales(t, t_c, one, 1, ca, rsa, msa);
    for (int m = 0; m < 2; m++) {
        CHECK_NEAR(costs[m].fwd_ms, ca[m].fwd_ms, 1e-12);
        CHECK_NEAR(costs[m].bwd_ms, ca[m].bwd_ms, 1e-12);
    }
    for (int r = 0; r < 2; r++) CHECK_NEAR(rs[r], rsa[r], 1e-12);
    CHECK_NEAR(rs[1] / rs[0], 2, 1e-9); /* the speeds the run was made with */
    for (int m = 0; m < 4; m++) CHECK_NEAR(ms[m], 1, 1e-9); /* no per-microbatch variation */
    CHECK_NEAR(oh.op_ms, 0.004, 1e-12);                     /* 4 us before every op */
    CHECK_NEAR(oh.op_sd_ms, 0, 1e-12);                      /* the same 4 us before every op */
    CHECK_NEAR(sp[0], 0, 1e-9);                             /* no op-to-op variation in A */
    CHECK_NEAR(sp[1], 0, 1e-9);
    /* 2. the pooled mean takes the disturbance: chunk 0's F ops are 4 mbs x 3 runs = 12
     * durations, one of them 50 ms longer, so the llm's fwd_ms (sum of the chunk means) is
     * 50 / 12 above the undisturbed value */
    struct bm_cost pooled[2];
    CHECK(bm_calibrate_runs(t, t_c, three, 3, 1, pooled, &err) == BM_OK);
    CHECK_NEAR(pooled[llm].fwd_ms, ca[llm].fwd_ms + 50.0 / 12, 1e-9);
    /* 3. two runs, one disturbed: the mean of the two per-run values. Run C's chunk 0 has 4 F
     * ops, one 50 ms longer: its llm fwd_ms is A's + 50 / 4; the median of two is the mean */
    const struct bm_timeline *two[2] = {a, c};
    CHECKF(bm_calibrate_median_runs(t, t_c, two, 2, 1, costs, ms, NULL, NULL, &oh, &err) == BM_OK, "%s", err.msg);
    CHECK_NEAR(costs[llm].fwd_ms, ca[llm].fwd_ms + 0.5 * 50.0 / 4, 1e-9);
    CHECK_NEAR(costs[vit].fwd_ms, ca[vit].fwd_ms, 1e-12);
    /* 4. the prediction from the three-run median reproduces run A exactly (its table, its
     * costs, speeds, dispatch), so a disturbed run costs the prediction nothing */
    CHECKF(bm_calibrate_median_runs(t, t_c, three, 3, 1, costs, ms, rs, NULL, &oh, &err) == BM_OK, "%s", err.msg);
    for (int m = 0; m < 2; m++) t_c->modules[m] = costs[m];
    for (int r = 0; r < 2; r++) t_c->rank_time_scale[r] = rs[r];
    for (int m = 0; m < 4; m++) t_c->mb_scale[m] = ms[m];
    t_c->op_overhead_ms = oh.op_ms;
    CHECKF(bm_simulate(t, t_c, NULL, &again, &err) == BM_OK, "%s", err.msg);
    if (again) CHECK_NEAR(again->makespan_ms, a->makespan_ms, 1e-9);
    /* 5. no run: an error, not a crash */
    CHECK(bm_calibrate_median_runs(t, t_c, three, 0, 1, costs, ms, rs, sp, &oh, &err) == BM_ERR);
out:
    bm_timeline_free(a), bm_timeline_free(b), bm_timeline_free(c), bm_timeline_free(again);
    test_table_free(t), bm_costs_free(t_c), t_c = NULL;
    bm_spec_free(s);
}

/* The link latency from the transfers: a table simulated with latency 30 us and 0.1 MiB
 * tensors over 5 GB/s (each transfer 30 us + 0.1 * 2^20 / 5e9 s = 30 + 20.97152 us) gives back
 * 30 us exactly; with rank 1's clock 5 us off the two directions' errors cancel; a link the
 * model thinks 10x slower than the one the run had gives a negative latency, by hand. */
TEST(link_latency_from_waiting_recvs)
{
    static const char *text =
        "{\"format\": \"bigmac-spec\", \"version\": 1, \"name\": \"links\",\n"
        " \"device\": {\"link_latency_us\": 30, \"link_gbytes_per_s\": 5},\n"
        " \"parallel\": {\"pp\": 2, \"vpp\": 2, \"microbatches\": 4},\n"
        " \"schedule\": {\"backbone\": \"interleaved\", \"policy\": \"bigmac\"},\n"
        " \"inputs\": [\"image\", \"text\"],\n"
        " \"modules\": [\n"
        "  {\"name\": \"vit\", \"consumes\": [\"image\"], \"produces\": [\"v\"],\n"
        "   \"cost\": {\"fwd_ms\": 1, \"bwd_ms\": 2, \"out_mib\": 0.1}},\n"
        "  {\"name\": \"llm\", \"consumes\": [\"text\", \"v\"], \"produces\": [\"h\"],\n"
        "   \"cost\": {\"fwd_ms\": 8, \"bwd_ms\": 16, \"out_mib\": 0.1}}]}\n";
    struct bm_spec *s = NULL;
    struct bm_err err;
    CHECKF(bm_spec_parse(text, "links.json", &s, &err) == BM_OK, "%s", err.msg);
    if (!s) return;
    struct bm_plan_opts o;
    bm_plan_opts_from_spec(&o, s);
    struct bm_table *t = NULL;
    struct bm_costs *t_c = NULL;
    struct bm_timeline *a = NULL, *b = NULL, *fast = NULL;
    CHECKF(bm_plan_build(s, &o, &t, &t_c, &err) == BM_OK, "%s", err.msg);
    if (t) CHECKF(bm_simulate(t, t_c, NULL, &a, &err) == BM_OK, "%s", err.msg);
    if (!a) goto out;
    double lat = -1;
    const struct bm_timeline *one[1] = {a};
    CHECK(bm_calibrate_link_latency_ms(t, t_c, one, 1, &lat) > 0);
    CHECK_NEAR(lat, 0.030, 1e-12);
    /* rank 1's clock 5 us ahead: every 0->1 transfer reads 5 us longer, every 1->0 one shorter */
    b = copy_of(t, a);
    if (!b) goto out;
    for (int k = 0; k < t->ranks[1].n_ops; k++) b->ranks[1].ops[k].start_ms += 0.005, b->ranks[1].ops[k].end_ms += 0.005;
    const struct bm_timeline *off[1] = {b};
    CHECK(bm_calibrate_link_latency_ms(t, t_c, off, 1, &lat) > 0);
    CHECK_NEAR(lat, 0.030, 1e-12);
    /* a run on a 50 GB/s link, calibrated against a table that says 5 GB/s: 10 us + 0.1 MiB at
     * 50 GB/s measured, 0.1 MiB at 5 GB/s charged: 10 + 2.097152 - 20.97152 us */
    t_c->device.link_latency_us = 10, t_c->device.link_gbytes_per_s = 50;
    CHECKF(bm_simulate(t, t_c, NULL, &fast, &err) == BM_OK, "%s", err.msg);
    t_c->device.link_gbytes_per_s = 5;
    if (fast) {
        const struct bm_timeline *f1[1] = {fast};
        CHECK(bm_calibrate_link_latency_ms(t, t_c, f1, 1, &lat) > 0);
        CHECK_NEAR(lat, (10 + 2.097152 - 20.97152) / 1000, 1e-12);
        /* the median over runs: {a, b, fast} -> 30, 30, -8.87 us: 30 */
        const struct bm_timeline *three[3] = {fast, a, b};
        CHECK(bm_calibrate_median_link_latency_ms(t, t_c, three, 3, &lat) == 3);
        CHECK_NEAR(lat, 0.030, 1e-12);
        /* the same fast run whose trace records its messages as 0.025 MiB: charged are those
         * bytes, not the tensors' 0.1 MiB: 10 + 2.097152 - 0.025 * 2^20 / 5e9 s = 12.097152 -
         * 5.24288 us */
        for (int r = 0; r < 2; r++)
            for (int k = 0; k < t->ranks[r].n_ops; k++)
                if (t->ranks[r].ops[k].kind != BM_OP_COMPUTE) fast->ranks[r].ops[k].msg_bytes = 0.025 * 1048576;
        CHECK(bm_calibrate_link_latency_ms(t, t_c, f1, 1, &lat) > 0);
        CHECK_NEAR(lat, (10 + 2.097152 - 5.24288) / 1000, 1e-12);
        /* and calibrate's out_mib is the messages' size for every module that sends its
         * outputs (here the backbone's chunk outputs; the vit runs where its output is used) */
        struct bm_cost c[2];
        int vit = bm_table_find_module(t, "vit"), llm = t->backbone_module;
        CHECK(bm_calibrate_runs(t, t_c, f1, 1, 1, c, &err) == BM_OK);
        CHECK_NEAR(c[llm].out_mib, 0.025, 1e-15);
        long vit_sends = 0;
        for (int r = 0; r < 2; r++)
            for (int k = 0; k < t->ranks[r].n_ops; k++) {
                const struct bm_op *op = &t->ranks[r].ops[k];
                vit_sends += op->kind == BM_OP_SEND && t->tensors[op->tensor].module == vit;
            }
        CHECK_NEAR(c[vit].out_mib, vit_sends ? 0.025 : 0.1, 1e-15);
    }
out:
    bm_timeline_free(a), bm_timeline_free(b), bm_timeline_free(fast);
    test_table_free(t), bm_costs_free(t_c), t_c = NULL;
    bm_spec_free(s);
}

/* simulate --table: the given table takes the spec's costs, and with them its tensors' sizes
 * (each tensor is its producer's out_mib): a table planned with out_mib 0.1 given a spec with
 * 0.025 charges 0.025 MiB per transfer. */
TEST(spec_costs_set_the_tensor_sizes)
{
    static const char *fmt =
        "{\"format\": \"bigmac-spec\", \"version\": 1, \"parallel\": {\"pp\": 2, \"microbatches\": 2},\n"
        " \"schedule\": {\"backbone\": \"gpipe\", \"policy\": \"none\"}, \"inputs\": [\"text\"],\n"
        " \"modules\": [{\"name\": \"llm\", \"consumes\": [\"text\"], \"produces\": [\"h\"],\n"
        "   \"cost\": {\"fwd_ms\": 2, \"bwd_ms\": 4, \"out_mib\": %g}}]}\n";
    char a[1024], b[1024];
    snprintf(a, sizeof a, fmt, 0.1);
    snprintf(b, sizeof b, fmt, 0.025);
    struct bm_spec *sa = NULL, *sb = NULL;
    struct bm_err err;
    struct bm_table *t = NULL;
    struct bm_costs *t_c = NULL;
    CHECKF(bm_spec_parse(a, "a.json", &sa, &err) == BM_OK, "%s", err.msg);
    CHECKF(bm_spec_parse(b, "b.json", &sb, &err) == BM_OK, "%s", err.msg);
    if (!sa || !sb) goto out;
    struct bm_plan_opts o;
    bm_plan_opts_from_spec(&o, sa);
    CHECKF(bm_plan_build(sa, &o, &t, &t_c, &err) == BM_OK, "%s", err.msg);
    if (!t) goto out;
    CHECK(t->n_tensors > 0);
    for (int i = 0; i < t->n_tensors; i++) CHECK_NEAR(bm_costs_tensor_mib(t_c, t, i), 0.1, 1e-15);
    CHECKF(bm_table_use_spec_costs(t, t_c, sb, "t.json", &err) == BM_OK, "%s", err.msg);
    for (int i = 0; i < t->n_tensors; i++) CHECK_NEAR(bm_costs_tensor_mib(t_c, t, i), 0.025, 1e-15);
out:
    test_table_free(t), bm_costs_free(t_c), t_c = NULL;
    bm_spec_free(sa), bm_spec_free(sb);
}

int main(void)
{
    RUN(median_over_runs_ignores_a_disturbed_run);
    RUN(link_latency_from_waiting_recvs);
    RUN(spec_costs_set_the_tensor_sizes);
    return test_summary();
}
