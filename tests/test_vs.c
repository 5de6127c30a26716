/* test_vs.c — per-microbatch encoder costs and the model against a run: data.encoder_cost_scale
 * {"values": [...]} (cycled over microbatches, positioned errors), bm_calibrate_mb_scale
 * recovering the multipliers a timeline was made with, and bm_report_vs_simulate reproducing a
 * timeline exactly from its own calibrated costs (so every deviation the report shows for a
 * real run is the run's, not the method's). */
#include "calib/calib.h"
#include "report/report.h"
#include "sim/expect.h"
#include "test.h"
#include "util/util.h"

static const char *spec_fmt =
    "{\"format\": \"bigmac-spec\", \"version\": 1, \"parallel\": {\"pp\": 2, \"microbatches\": 8},\n"
    " \"schedule\": {\"policy\": \"%s\"}, \"inputs\": [\"image\", \"text\"],\n"
    " \"modules\": [\n"
    "  {\"name\": \"vit\", \"consumes\": [\"image\"], \"produces\": [\"v\"],\n"
    "   \"cost\": {\"fwd_ms\": 2, \"bwd_ms\": 4, \"act_mib\": 10, \"out_mib\": 1}},\n"
    "  {\"name\": \"llm\", \"consumes\": [\"text\", \"v\"], \"produces\": [\"h\"],\n"
    "   \"cost\": {\"fwd_ms\": 8, \"bwd_ms\": 16, \"act_mib\": 40}}],\n"
    " \"data\": {\"encoder_cost_scale\": %s}}\n";

static struct bm_spec *spec_with(const char *policy, const char *scale, struct bm_err *err)
{
    char text[2048];
    snprintf(text, sizeof text, spec_fmt, policy, scale);
    struct bm_spec *s = NULL;
    if (bm_spec_parse(text, "v.json", &s, err)) return NULL;
    return s;
}

TEST(values_cycle_over_microbatches)
{
    struct bm_err err;
    struct bm_spec *s = spec_with("bigmac", "{\"values\": [0.5, 2, 1.25]}", &err);
    CHECKF(s != NULL, "%s", err.msg);
    if (!s) return;
    double v[8];
    bm_spec_encoder_scales(s, 8, v);
    static const double want[8] = {0.5, 2, 1.25, 0.5, 2, 1.25, 0.5, 2};
    for (int m = 0; m < 8; m++) CHECK(v[m] == want[m]);
    bm_spec_free(s);
    /* errors: positioned, name the field */
    struct {
        const char *scale, *msg;
    } bad[] = {
        {"{\"values\": []}", "data.encoder_cost_scale.values must be a non-empty array"},
        {"{\"values\": [1, 0]}", "data.encoder_cost_scale.values[1] must be a number in (0"},
        {"{\"values\": [1, \"2\"]}", "values[1] must be a number"},
        {"{\"values\": [1], \"dist\": \"uniform\", \"min\": 1, \"max\": 2}", "\"values\" and \"dist\" exclude each other"},
        {"{\"value\": [1]}", "did you mean \"values\"?"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        s = spec_with("bigmac", bad[i].scale, &err);
        CHECK(s == NULL);
        if (!s) {
            CHECK_STR_CONTAINS(err.msg, bad[i].msg);
            CHECK_STR_CONTAINS(err.msg, "v.json:8:");
        }
        bm_spec_free(s);
    }
}

/* A planned table simulated with per-microbatch multipliers; calibrating its own timeline. */
TEST(calibrate_recovers_mb_scale_and_vs_reproduces)
{
    static const char *pols[] = {"bigmac", "optimus", "unified"};
    for (int p = 0; p < 3; p++) {
        struct bm_err err;
        struct bm_spec *s = spec_with(pols[p], "{\"values\": [0.5, 2, 1.25, 1, 3, 0.75, 1.5, 1]}", &err);
        CHECKF(s != NULL, "%s", err.msg);
        if (!s) return;
        struct bm_plan_opts o;
        bm_plan_opts_from_spec(&o, s);
        struct bm_table *t = NULL, *u = NULL;
        struct bm_costs *t_c = NULL, *u_c = NULL, *vs_c = NULL;
        struct bm_timeline *tl = NULL, *vs = NULL;
        CHECKF(bm_plan_build(s, &o, &t, &t_c, &err) == BM_OK, "%s", err.msg);
        CHECKF(bm_plan_build(s, &o, &u, &u_c, &err) == BM_OK, "%s", err.msg);
        if (t) CHECK(bm_simulate(t, t_c, NULL, &tl, &err) == BM_OK);
        if (!tl || !u) goto next;
        /* with the true costs: exactly the multipliers */
        double ms[8];
        struct bm_cost costs[2] = {t_c->modules[0], t_c->modules[1]};
        const struct bm_timeline *runs[1] = {tl};
        bm_calibrate_mb_scale(t, runs, 1, costs, NULL, ms);
        for (int m = 0; m < 8; m++) CHECK_NEAR(ms[m], t_c->mb_scale[m], 1e-9);
        /* the same table from calibrated medians, rank and microbatch scales: the same timeline */
        for (int m = 0; m < u->n_modules; m++) u_c->modules[m].fwd_ms *= 3; /* whatever it held */
        CHECKF(bm_report_vs_simulate(t, t_c, tl, u, u_c, &vs_c, &vs, &err) == BM_OK, "%s", err.msg);
        CHECK(vs_c && vs_c != u_c && u_c->modules[0].fwd_ms != vs_c->modules[0].fwd_ms); /* u's own costs untouched */
        if (vs) {
            CHECK_NEAR(vs->makespan_ms, tl->makespan_ms, 1e-6 * tl->makespan_ms);
            double worst = 0;
            for (int r = 0; r < t->pp; r++)
                for (int i = 0; i < t->ranks[r].n_ops; i++) {
                    double d = fabs(vs->ranks[r].ops[i].end_ms - tl->ranks[r].ops[i].end_ms);
                    if (d > worst) worst = d;
                }
            CHECKF(worst < 1e-6 * tl->makespan_ms, "%s: an op ends %g ms off", pols[p], worst);
        }
        /* another plan is refused */
        bm_timeline_free(vs);
        bm_costs_free(vs_c);
        vs = NULL, vs_c = NULL;
        struct bm_table *w = NULL;
        struct bm_costs *w_c = NULL;
        o.microbatches = 4;
        CHECK(bm_plan_build(s, &o, &w, &w_c, &err) == BM_OK);
        if (w) {
            CHECK(bm_report_vs_simulate(t, t_c, tl, w, w_c, &vs_c, &vs, &err) == BM_ERR && !vs && !vs_c);
            CHECK_STR_CONTAINS(err.msg, "not the plan the trace ran");
        }
        test_table_free(w), bm_costs_free(w_c), w_c = NULL;
    next:
        bm_timeline_free(vs);
        bm_timeline_free(tl);
        test_table_free(t), bm_costs_free(t_c), t_c = NULL;
        test_table_free(u), bm_costs_free(u_c), u_c = NULL;
        bm_spec_free(s);
    }
}

/* Per-op dispatch (device.op_overhead_us): every op occupies its rank that long before it
 * starts. gpipe P = 2, M = 1, F 1 B 2 per stage, ideal links, overhead 0.5 ms:
 *   rank 0: F0 [0.5,1.5], send issued at 2.0, recv reached 2.5 ... arrives 6.5, B0 [7,9]
 *   rank 1: recv reached 0.5, arrives 2.0, F0 [2.5,3.5], B0 [4,6], send issued 6.5
 * makespan 9 (6 without). Calibrating the timeline gives the overhead back (every gap is it),
 * and the table JSON carries it (only when set). */
TEST(op_overhead_by_hand_and_fitted)
{
    static const char *text =
        "{\"format\": \"bigmac-spec\", \"version\": 1, \"parallel\": {\"pp\": 2, \"microbatches\": 1},\n"
        " \"schedule\": {\"backbone\": \"gpipe\", \"policy\": \"none\"},\n"
        " \"device\": {\"link_latency_us\": 0, \"op_overhead_us\": 500}, \"inputs\": [\"text\"],\n"
        " \"modules\": [{\"name\": \"llm\", \"consumes\": [\"text\"], \"produces\": [\"h\"],\n"
        " \"cost\": {\"fwd_ms\": 2, \"bwd_ms\": 4}}]}";
    struct bm_spec *s = NULL;
    struct bm_err err;
    CHECKF(bm_spec_parse(text, "o.json", &s, &err) == BM_OK, "%s", err.msg);
    if (!s) return;
    CHECK(s->op_overhead_us == 500);
    struct bm_plan_opts o;
    bm_plan_opts_from_spec(&o, s);
    struct bm_table *t = NULL;
    struct bm_costs *t_c = NULL;
    struct bm_timeline *tl = NULL;
    CHECKF(bm_plan_build(s, &o, &t, &t_c, &err) == BM_OK, "%s", err.msg);
    if (t) CHECK(bm_simulate(t, t_c, NULL, &tl, &err) == BM_OK);
    if (tl) {
        CHECK_NEAR(tl->makespan_ms, 9, 1e-9);
        CHECK(t->ranks[0].n_ops == 4 && t->ranks[0].ops[0].kind == BM_OP_COMPUTE);
        CHECK_NEAR(tl->ranks[0].ops[0].start_ms, 0.5, 1e-12);
        CHECK_NEAR(tl->ranks[0].ops[1].start_ms, 2.0, 1e-12);  /* send issue */
        CHECK_NEAR(tl->ranks[0].ops[2].start_ms, 2.5, 1e-12);  /* recv reached */
        CHECK_NEAR(tl->ranks[0].ops[2].end_ms, 6.5, 1e-12);    /* ... arrived */
        CHECK_NEAR(tl->ranks[0].ops[3].start_ms, 7.0, 1e-12);
        CHECK_NEAR(tl->ranks[1].ops[1].start_ms, 2.5, 1e-12);
        const struct bm_timeline *runs[1] = {tl};
        CHECK_NEAR(bm_calibrate_op_overhead_ms(t, runs, 1), 0.5, 1e-12);
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        bm_table_write_json(t, t_c, f);
        fclose(f);
        CHECK_STR_CONTAINS(buf, "\"op_overhead_us\": 500");
        struct bm_table *u = NULL;
        struct bm_costs *u_c = NULL;
        CHECKF(bm_table_parse(buf, "t.json", &u, &u_c, &err) == BM_OK, "%s", err.msg);
        if (u) CHECK_NEAR(u_c->op_overhead_ms, 0.5, 1e-15);
        test_table_free(u), bm_costs_free(u_c), u_c = NULL;
        free(buf);
        /* without it: no key, and the timeline of the same ops without the gaps */
        t_c->op_overhead_ms = 0;
        buf = NULL;
        f = open_memstream(&buf, &len);
        bm_table_write_json(t, t_c, f);
        fclose(f);
        CHECK(strstr(buf, "op_overhead") == NULL);
        free(buf);
        struct bm_timeline *t0 = NULL;
        CHECK(bm_simulate(t, t_c, NULL, &t0, &err) == BM_OK);
        if (t0) CHECK_NEAR(t0->makespan_ms, 6, 1e-12);
        bm_timeline_free(t0);
    }
    bm_timeline_free(tl);
    test_table_free(t), bm_costs_free(t_c), t_c = NULL;
    bm_spec_free(s);
}

/* Op-time spread: cost.spread in spec and table; the expected makespan equals the plain one
 * without spread, equals the sum of the means on one rank (mean-1 factors: a chain's expected
 * length is its mean length), exceeds it in a pipeline (a max of noisy chains); calibrating a
 * timeline drawn with a known spread finds it. */
TEST(spread_expected_and_fitted)
{
    static const char *fmt =
        "{\"format\": \"bigmac-spec\", \"version\": 1, \"parallel\": {\"pp\": %d, \"microbatches\": %d},\n"
        " \"schedule\": {\"policy\": \"none\"}, \"device\": {\"link_latency_us\": 0}, \"inputs\": [\"text\"],\n"
        " \"modules\": [{\"name\": \"llm\", \"consumes\": [\"text\"], \"produces\": [\"h\"],\n"
        " \"cost\": {\"fwd_ms\": 1, \"bwd_ms\": 1, \"spread\": %g}}]}";
    char text[1024];
    struct bm_err err;
    for (int P = 1; P <= 2; P++) {
        snprintf(text, sizeof text, fmt, P, 200, 0.25);
        struct bm_spec *s = NULL;
        CHECKF(bm_spec_parse(text, "s.json", &s, &err) == BM_OK, "%s", err.msg);
        if (!s) return;
        CHECK(s->modules[0].spread == 0.25);
        struct bm_plan_opts o;
        bm_plan_opts_from_spec(&o, s);
        struct bm_table *t = NULL;
        struct bm_costs *t_c = NULL;
        struct bm_timeline *tl = NULL;
        CHECKF(bm_plan_build(s, &o, &t, &t_c, &err) == BM_OK, "%s", err.msg);
        if (!t || bm_simulate(t, t_c, NULL, &tl, &err)) goto next;
        CHECK(bm_costs_have_spread(t_c) && t_c->spread[0] == 0.25);
        double ex = 0, sd = 0, ex2 = 0;
        CHECK(bm_simulate_expected(t, t_c, NULL, 32, 5, &ex, &sd, &err) == BM_OK);
        CHECK(bm_simulate_expected(t, t_c, NULL, 32, 5, &ex2, NULL, &err) == BM_OK);
        CHECK(ex == ex2); /* seeded */
        if (P == 1) /* 400 ops of mean 1: sum 400, sd of one sum ~ 400^0.5 * 0.25 = 5, of the mean of 32 ~ 0.9 */
            CHECKF(fabs(ex - 400) < 4, "one rank: expected %g, want ~400", ex);
        else
            CHECKF(ex > tl->makespan_ms + 1, "pipeline: expected %g vs plain %g", ex, tl->makespan_ms);
        /* a timeline drawn with the spread: calibrating it finds sigma (true costs, no scales) */
        if (P == 1) {
            long n = bm_table_n_ops(t);
            double *f = bm_malloc((size_t)n * sizeof *f);
            struct bm_rng rng;
            bm_rng_seed(&rng, 11);
            for (long g = 0; g < n; g++) f[g] = exp(0.25 * bm_rng_normal(&rng) - 0.5 * 0.25 * 0.25);
            struct bm_timeline *drawn = NULL;
            CHECK(bm_simulate_op_scaled(t, t_c, NULL, f, &drawn, &err) == BM_OK);
            if (drawn) {
                double sp[1];
                const struct bm_timeline *runs[1] = {drawn};
                bm_calibrate_spread(t, t_c, runs, 1, &t_c->modules[0], NULL, NULL, sp);
                CHECKF(fabs(sp[0] - 0.25) < 0.03, "fitted spread %g, drawn with 0.25", sp[0]);
            }
            bm_timeline_free(drawn);
            bm_free(f);
            /* the table JSON carries it, only when set */
            char *buf = NULL;
            size_t len = 0;
            FILE *fp = open_memstream(&buf, &len);
            bm_table_write_json(t, t_c, fp);
            fclose(fp);
            CHECK_STR_CONTAINS(buf, "\"spread\": 0.25");
            struct bm_table *u = NULL;
            struct bm_costs *u_c = NULL;
            CHECKF(bm_table_parse(buf, "t.json", &u, &u_c, &err) == BM_OK, "%s", err.msg);
            if (u) CHECK(u_c->spread[0] == 0.25);
            test_table_free(u), bm_costs_free(u_c), u_c = NULL;
            free(buf);
            t_c->spread[0] = 0;
            buf = NULL;
            fp = open_memstream(&buf, &len);
            bm_table_write_json(t, t_c, fp);
            fclose(fp);
            CHECK(strstr(buf, "spread") == NULL);
            free(buf);
            CHECK(bm_simulate_expected(t, t_c, NULL, 32, 5, &ex, &sd, &err) == BM_OK);
            CHECK(ex == tl->makespan_ms && sd == 0);
        }
    next:
        bm_timeline_free(tl);
        test_table_free(t), bm_costs_free(t_c), t_c = NULL;
        bm_spec_free(s);
    }
    /* a bad spread is a positioned error */
    snprintf(text, sizeof text, fmt, 1, 4, 11.0);
    struct bm_spec *s = NULL;
    CHECK(bm_spec_parse(text, "s.json", &s, &err) == BM_ERR && !s);
    CHECK_STR_CONTAINS(err.msg, "cost.spread must be <= 10");
}

int main(void)
{
    RUN(spread_expected_and_fitted);
    RUN(op_overhead_by_hand_and_fitted);
    RUN(values_cycle_over_microbatches);
    RUN(calibrate_recovers_mb_scale_and_vs_reproduces);
    return test_summary();
}
