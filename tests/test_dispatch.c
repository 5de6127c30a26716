/* test_dispatch.c — the executor's time outside the compute ops, as the simulator models it
 * (src/sim/cost.h): the step lead (device.step_lead_us), the recv overhead
 * (device.recv_overhead_us) and the dispatch spread (device.op_overhead_sd_us, drawn from a
 * gamma distribution by the expected makespan); `bigmac calibrate`'s fit of all of them
 * (bm_calibrate_dispatch); their spec and table keys. Timelines worked out by hand in the
 * comments. */
#include "calib/calib.h"
#include "sim/expect.h"
#include "test.h"
#include "util/util.h"

/* gpipe P = 2, M = 2, F 1 ms and B 2 ms per stage on rank 0, twice that on rank 1 (rank scale
 * 2), free links; dispatch 0.1 ms before every op, each rank's first op dispatched 1 ms after
 * the step's start, an arrived message takes 0.25 ms to receive:
 *   rank 0: F0 [1.1,2.1]  send 2.2  F1 [2.3,3.3]  send 3.4  recv g0 3.5 .. 10.95 (waits)
 *           B0 [11.05,13.05]  recv g1 13.15 .. 15.15 (waits)  B1 [15.25,17.25]
 *   rank 1: recv 1.1 .. 2.2 (waits)  F0 [2.3,4.3]  recv 4.4 .. 4.65 (sent at 3.4: there, so
 *           the recv overhead)  F1 [4.75,6.75]  B0 [6.85,10.85]  send 10.95  B1 [11.05,15.05]
 *           send 15.15
 * makespan 17.25. */
static const char *gpipe_fmt =
    "{\"format\": \"bigmac-spec\", \"version\": 1, \"parallel\": {\"pp\": 2, \"microbatches\": 2},\n"
    " \"schedule\": {\"backbone\": \"gpipe\", \"policy\": \"none\"},\n"
    " \"device\": {\"link_latency_us\": 0, \"rank_time_scale\": [1, 2], \"op_overhead_us\": 100,\n"
    "             \"step_lead_us\": %g, \"recv_overhead_us\": %g, \"op_overhead_sd_us\": %g},\n"
    " \"inputs\": [\"text\"],\n"
    " \"modules\": [{\"name\": \"llm\", \"consumes\": [\"text\"], \"produces\": [\"h\"],\n"
    "   \"cost\": {\"fwd_ms\": 2, \"bwd_ms\": 4}}]}";

/* The table the spec text (named 'name' in messages) plans to; NULL with err set. */
static struct bm_table *table_of(const char *text, const char *name, struct bm_err *err)
{
    struct bm_spec *s = NULL;
    if (bm_spec_parse(text, name, &s, err)) return NULL;
    struct bm_plan_opts o;
    bm_plan_opts_from_spec(&o, s);
    struct bm_table *t = NULL;
    struct bm_costs *t_c = NULL;
    if (bm_plan_build(s, &o, &t, &t_c, err)) t = NULL;
    else test_costs_adopt(t, t_c);
    bm_spec_free(s);
    return t;
}

static struct bm_table *gpipe_table(double lead_us, double recv_us, double sd_us, struct bm_err *err)
{
    char text[2048];
    snprintf(text, sizeof text, gpipe_fmt, lead_us, recv_us, sd_us);
    return table_of(text, "g.json", err);
}

TEST(lead_and_recv_overhead_by_hand)
{
    struct bm_err err;
    struct bm_table *t = gpipe_table(1000, 250, 0, &err);
    CHECKF(t != NULL, "%s", err.msg);
    if (!t) return;
    CHECK_NEAR(test_costs(t)->step_lead_ms, 1.0, 1e-15);
    CHECK_NEAR(test_costs(t)->recv_overhead_ms, 0.25, 1e-15);
    CHECK(!bm_costs_have_spread(test_costs(t))); /* no spread: the expected makespan is the plain one */
    struct bm_timeline *tl = NULL;
    CHECKF(bm_simulate(t, test_costs(t), NULL, &tl, &err) == BM_OK, "%s", err.msg);
    if (tl) {
        static const double r0[8][2] = {{1.1, 2.1},   {2.2, 2.2},     {2.3, 3.3},     {3.4, 3.4},
                                         {3.5, 10.95}, {11.05, 13.05}, {13.15, 15.15}, {15.25, 17.25}};
        static const double r1[8][2] = {{1.1, 2.2},   {2.3, 4.3},     {4.4, 4.65},    {4.75, 6.75},
                                         {6.85, 10.85}, {10.95, 10.95}, {11.05, 15.05}, {15.15, 15.15}};
        CHECK(t->ranks[0].n_ops == 8 && t->ranks[1].n_ops == 8);
        for (int k = 0; k < 8 && k < t->ranks[0].n_ops && k < t->ranks[1].n_ops; k++) {
            CHECKF(fabs(tl->ranks[0].ops[k].start_ms - r0[k][0]) < 1e-9 && fabs(tl->ranks[0].ops[k].end_ms - r0[k][1]) < 1e-9,
                   "rank 0 op %d: [%g, %g], by hand [%g, %g]", k, tl->ranks[0].ops[k].start_ms,
                   tl->ranks[0].ops[k].end_ms, r0[k][0], r0[k][1]);
            CHECKF(fabs(tl->ranks[1].ops[k].start_ms - r1[k][0]) < 1e-9 && fabs(tl->ranks[1].ops[k].end_ms - r1[k][1]) < 1e-9,
                   "rank 1 op %d: [%g, %g], by hand [%g, %g]", k, tl->ranks[1].ops[k].start_ms,
                   tl->ranks[1].ops[k].end_ms, r1[k][0], r1[k][1]);
        }
        CHECK_NEAR(tl->makespan_ms, 17.25, 1e-9);
        /* the calibration gives every number back: every gap is 0.1 (sd 0), the first ops start
         * at 1.1 = lead + one dispatch, the one recv whose message was there took 0.25; the
         * recvs that waited end when their send is issued (free links: transfer time 0) */
        struct bm_dispatch_fit d;
        const struct bm_timeline *runs[1] = {tl};
        CHECK(bm_calibrate_dispatch(t, runs, 1, &d, &err) == BM_OK);
        CHECK_NEAR(d.op_ms, 0.1, 1e-12);
        CHECK_NEAR(d.op_sd_ms, 0, 1e-12);
        CHECK_NEAR(d.lead_ms, 1.0, 1e-12);
        CHECK_NEAR(d.recv_ms, 0.25, 1e-12);
        CHECK_NEAR(bm_calibrate_op_overhead_ms(t, runs, 1), 0.1, 1e-12);
    }
    bm_timeline_free(tl);
    /* without lead and recv overhead: everything 1 ms earlier, and rank 1's recv of mb 1 ends
     * when it is reached (3.4 .. 3.4), so from there rank 1 and then rank 0 are 1.25 ms
     * earlier: makespan 16.0 */
    test_costs(t)->step_lead_ms = 0, test_costs(t)->recv_overhead_ms = 0;
    tl = NULL;
    CHECKF(bm_simulate(t, test_costs(t), NULL, &tl, &err) == BM_OK, "%s", err.msg);
    if (tl) CHECK_NEAR(tl->makespan_ms, 16.0, 1e-9);
    bm_timeline_free(tl);
    test_table_free(t);
}

/* Gamma draws of a given mean and standard deviation, for shape < 1 (the executor's gaps: many
 * short, a few long) and > 1; sd 0 gives the mean. 200000 draws: the sample mean's standard
 * error is sd / 447 (3.4% of the mean for sd = 15, mean 5 ... checked within 4 errors). */
TEST(gamma_draws_have_the_mean_and_sd)
{
    static const double cases[][2] = {{5, 15}, {5, 2}, {0.01, 0.03}};
    for (int c = 0; c < 3; c++) {
        double m = cases[c][0], sd = cases[c][1], s = 0, q = 0, lo = 1e300;
        int n = 200000;
        struct bm_rng rng;
        bm_rng_seed(&rng, 7 + (uint64_t)c);
        for (int i = 0; i < n; i++) {
            double x = bm_rng_gamma_mean_sd(&rng, m, sd);
            s += x, q += x * x;
            if (x < lo) lo = x;
        }
        double mean = s / n, v = q / n - mean * mean;
        CHECKF(fabs(mean - m) < 4 * sd / sqrt(n), "mean %g of draws with mean %g sd %g", mean, m, sd);
        CHECKF(fabs(sqrt(v) - sd) < 0.05 * sd, "sd %g of draws with mean %g sd %g", sqrt(v), m, sd);
        CHECK(lo >= 0);
    }
    struct bm_rng rng;
    bm_rng_seed(&rng, 1);
    CHECK(bm_rng_gamma_mean_sd(&rng, 3, 0) == 3);
    CHECK(bm_rng_gamma_mean_sd(&rng, 0, 1) == 0);
}

/* The dispatch spread in the expected makespan: on one rank (P = 1, a chain) the expected
 * length is the mean length (mean-preserving draws); in a pipeline it is longer (a max of
 * noisy chains); without it the plain makespan. Calibrating a timeline drawn with it finds the
 * mean and sd back. */
TEST(dispatch_spread_in_expected_makespan_and_fitted)
{
    static const char *fmt =
        "{\"format\": \"bigmac-spec\", \"version\": 1, \"parallel\": {\"pp\": %d, \"microbatches\": 100},\n"
        " \"schedule\": {\"policy\": \"none\"}, \"device\": {\"link_latency_us\": 0, \"op_overhead_us\": 500,\n"
        "  \"op_overhead_sd_us\": %g}, \"inputs\": [\"text\"],\n"
        " \"modules\": [{\"name\": \"llm\", \"consumes\": [\"text\"], \"produces\": [\"h\"],\n"
        " \"cost\": {\"fwd_ms\": 1, \"bwd_ms\": 1}}]}";
    struct bm_err err;
    for (int P = 1; P <= 2; P++) {
        char text[1024];
        snprintf(text, sizeof text, fmt, P, 1000.0);
        struct bm_table *t = table_of(text, "d.json", &err);
        struct bm_timeline *tl = NULL;
        CHECKF(t != NULL, "%s", err.msg);
        if (!t || bm_simulate(t, test_costs(t), NULL, &tl, &err)) goto next;
        CHECK_NEAR(test_costs(t)->op_overhead_sd_ms, 1.0, 1e-15);
        CHECK(bm_costs_have_spread(test_costs(t)));
        double ex = 0, sd = 0;
        CHECK(bm_simulate_expected(t, test_costs(t), NULL, 32, 3, &ex, &sd, &err) == BM_OK);
        if (P == 1) { /* 200 ops: 200 ms compute + 200 x 0.5 dispatch; sd of a sum 200^0.5 x 1 = 14, of 32 sums' mean 2.5 */
            CHECK_NEAR(tl->makespan_ms, 300, 1e-9);
            CHECKF(fabs(ex - 300) < 10, "one rank: expected %g, want ~300", ex);
            /* a timeline drawn with it: the fit gives the draws' own mean and sd (and so, roughly,
             * what they were drawn with: 200 gaps of a shape-1/4 gamma) */
            long n = bm_table_n_ops(t);
            double *disp = bm_malloc((size_t)n * sizeof *disp);
            struct bm_rng rng;
            bm_rng_seed(&rng, 5);
            for (long g = 0; g < n; g++) disp[g] = bm_rng_gamma_mean_sd(&rng, 0.5, 1.0);
            struct bm_timeline *drawn = NULL;
            CHECK(bm_simulate_drawn(t, test_costs(t), NULL, NULL, disp, &drawn, &err) == BM_OK);
            if (drawn) {
                struct bm_dispatch_fit d;
                const struct bm_timeline *runs[1] = {drawn};
                CHECK(bm_calibrate_dispatch(t, runs, 1, &d, &err) == BM_OK);
                /* the gaps are the draws of ops 1..n-1: their own mean and sd exactly */
                double m = 0, q = 0;
                for (long g = 1; g < n; g++) m += disp[g];
                m /= (double)(n - 1);
                for (long g = 1; g < n; g++) q += (disp[g] - m) * (disp[g] - m);
                CHECK_NEAR(d.op_ms, m, 1e-9);
                CHECK_NEAR(d.op_sd_ms, sqrt(q / (double)(n - 1)), 1e-9);
                CHECKF(fabs(d.op_ms - 0.5) < 0.15 && fabs(d.op_sd_ms - 1) < 0.5, "fit %g sd %g, drawn 0.5 sd 1", d.op_ms,
                       d.op_sd_ms);
                /* the first op starts at its own draw: lead = that minus the mean, at least 0 */
                CHECK_NEAR(d.lead_ms, disp[0] > d.op_ms ? disp[0] - d.op_ms : 0, 1e-9);
            }
            bm_timeline_free(drawn);
            bm_free(disp);
        } else {
            CHECKF(ex > tl->makespan_ms + 1, "pipeline: expected %g vs plain %g", ex, tl->makespan_ms);
        }
        /* without the spread: the plain makespan */
        test_costs(t)->op_overhead_sd_ms = 0;
        CHECK(!bm_costs_have_spread(test_costs(t)));
        CHECK(bm_simulate_expected(t, test_costs(t), NULL, 32, 3, &ex, &sd, &err) == BM_OK);
        CHECK(ex == tl->makespan_ms && sd == 0);
    next:
        bm_timeline_free(tl);
        test_table_free(t);
    }
}

/* t as the JSON `bigmac plan -o` writes (malloc'd; free it). */
static char *table_json(const struct bm_table *t)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (f) bm_table_write_json(t, test_costs(t), f), fclose(f);
    return buf;
}

/* The table JSON carries each key only when > 0 and reads it back; bad values are positioned
 * errors in spec and table. */
TEST(keys_in_spec_and_table)
{
    struct bm_err err;
    struct bm_table *t = gpipe_table(1000, 250, 40, &err);
    CHECKF(t != NULL, "%s", err.msg);
    if (!t) return;
    CHECK_NEAR(test_costs(t)->op_overhead_sd_ms, 0.04, 1e-15);
    char *buf = table_json(t);
    CHECK_STR_CONTAINS(buf, "\"op_overhead_sd_us\": 40,\n");
    CHECK_STR_CONTAINS(buf, "\"recv_overhead_us\": 250,\n");
    CHECK_STR_CONTAINS(buf, "\"step_lead_us\": 1000,\n");
    struct bm_table *u = NULL;
    struct bm_costs *u_c = NULL;
    CHECKF(bm_table_parse(buf, "t.json", &u, &u_c, &err) == BM_OK, "%s", err.msg);
    if (u) {
        CHECK_NEAR(u_c->op_overhead_sd_ms, 0.04, 1e-15);
        CHECK_NEAR(u_c->recv_overhead_ms, 0.25, 1e-15);
        CHECK_NEAR(u_c->step_lead_ms, 1.0, 1e-15);
    }
    test_table_free(u), bm_costs_free(u_c), u_c = NULL;
    /* a negative value in the table: named */
    char *bad = strstr(buf, "\"recv_overhead_us\": 250");
    if (bad) {
        memcpy(bad + strlen("\"recv_overhead_us\": "), "-25", 3);
        u = NULL;
        CHECK(bm_table_parse(buf, "t.json", &u, &u_c, &err) == BM_ERR && !u);
        CHECK_STR_CONTAINS(err.msg, "t.json");
        CHECK_STR_CONTAINS(err.msg, "\"recv_overhead_us\" must be a number >= 0");
    }
    free(buf);
    test_costs(t)->op_overhead_sd_ms = test_costs(t)->recv_overhead_ms = test_costs(t)->step_lead_ms = 0;
    buf = table_json(t);
    CHECK(!strstr(buf, "op_overhead_sd_us") && !strstr(buf, "recv_overhead_us") && !strstr(buf, "step_lead_us"));
    free(buf);
    test_table_free(t);
    /* a negative value in the spec: positioned, named */
    CHECK(gpipe_table(-1, 0, 0, &err) == NULL);
    CHECK_STR_CONTAINS(err.msg, "g.json:");
    CHECK_STR_CONTAINS(err.msg, "step_lead_us");
    CHECK(gpipe_table(0, 0, -5, &err) == NULL);
    CHECK_STR_CONTAINS(err.msg, "op_overhead_sd_us");
}

int main(void)
{
    RUN(lead_and_recv_overhead_by_hand);
    RUN(gamma_draws_have_the_mean_and_sd);
    RUN(dispatch_spread_in_expected_makespan_and_fitted);
    RUN(keys_in_spec_and_table);
    return test_summary();
}
