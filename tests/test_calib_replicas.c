/* test_calib_replicas.c — calibration of a data-parallel run's trace (src/calib/traces.c): the
 * trace holds every replica's ranks (bm_exec_trace_write_dp), and the fits take each trace's
 * slowest replica by default (the step ends with it), or the replica --replica names.
 *
 * Synthetic traces with known per-replica times: a P = 2, D = 2 plan of a spec whose modules
 * cost enc 1/2 ms, bb 8/16 ms (whole model, split 4 + 4 over the two ranks' chunks), gen 1/2 ms
 * (fwd/bwd per microbatch), no encoder scale; replica "fast" simulated under these costs,
 * replica "slow" under every cost x 1.5, both written as one measured trace. By hand, with
 * --mean (every op of a slot takes its cost):
 *   slowest (default):  enc 1.5/3, bb 12/24, gen 1.5/3      (the x 1.5 replica, whichever it is)
 *   --replica 0 of a trace with replica 0 fast:             enc 1/2, bb 8/16, gen 1/2
 *   two traces (replica 1 slow in the first, replica 0 slow in the second), pooled:
 *     slowest: 1.5 x in both -> enc 1.5/3, bb 12/24, gen 1.5/3
 *     --replica 0: the mean of 1 x and 1.5 x -> enc 1.25/2.5, bb 10/20, gen 1.25/2.5
 * And the cost model calibrated from the slowest replica simulates the slow replica's walk. */
#include <math.h>
#include <string.h>
#include <unistd.h>

#include "test.h"
#include "bigmac.h"
#include "bigmac_report.h"
#include "calib/calib.h"
#include "exec/trace.h"
#include "util/util.h"

static const char *tmp(const char *name)
{
    static char buf[8][512];
    static int k;
    const char *dir = getenv("TEST_TMP");
    char *b = buf[k++ % 8];
    snprintf(b, sizeof buf[0], "%s/calib_replicas_%d_%s", dir && *dir ? dir : "/tmp", (int)getpid(), name);
    return b;
}

static const char SPEC[] =
    "{\"format\": \"bigmac-spec\", \"version\": 1, \"name\": \"replicas\",\n"
    " \"device\": {\"memory_gib\": 1, \"link_gbytes_per_s\": 5, \"link_latency_us\": 20},\n"
    " \"parallel\": {\"pp\": 2, \"vpp\": 1, \"microbatches\": 4, \"dp\": 2},\n"
    " \"schedule\": {\"backbone\": \"1f1b\", \"policy\": \"bigmac\", \"window\": \"auto\"},\n"
    " \"inputs\": [\"image\", \"text\", \"target\"],\n"
    " \"modules\": [\n"
    "  {\"name\": \"enc\", \"role\": \"encoder\", \"consumes\": [\"image\"], \"produces\": [\"v\"],\n"
    "   \"cost\": {\"fwd_ms\": 1, \"bwd_ms\": 2, \"act_mib\": 1, \"state_mib\": 1, \"out_mib\": 0.1}},\n"
    "  {\"name\": \"bb\", \"role\": \"backbone\", \"consumes\": [\"text\", \"v\"], \"produces\": [\"h\"], \"layers\": 4,\n"
    "   \"cost\": {\"fwd_ms\": 8, \"bwd_ms\": 16, \"act_mib\": 4, \"state_mib\": 4, \"out_mib\": 0.1}},\n"
    "  {\"name\": \"gen\", \"role\": \"generator\", \"consumes\": [\"h\", \"target\"], \"produces\": [\"loss\"],\n"
    "   \"grad_to_backbone\": true,\n"
    "   \"cost\": {\"fwd_ms\": 1, \"bwd_ms\": 2, \"act_mib\": 1, \"state_mib\": 1, \"out_mib\": 0.1}}]}\n";

struct fixture {
    struct bm_spec *s;
    struct bm_table *t;
    struct bm_costs *k, *k15;           /* the spec's costs; every module's fwd/bwd x 1.5 */
    struct bm_timeline *fast, *slow;    /* simulated under k, k15; marked measured */
};

static int setup(struct fixture *f)
{
    memset(f, 0, sizeof *f);
    struct bm_err err;
    const char *path = tmp("spec.json");
    FILE *fp = fopen(path, "w");
    if (!fp) return -1;
    fputs(SPEC, fp);
    fclose(fp);
    CHECKF(bm_spec_load(path, &f->s, &err) == BM_OK, "%s", err.msg);
    unlink(path);
    if (!f->s) return -1;
    struct bm_plan_opts o;
    bm_plan_opts_from_spec(&o, f->s);
    CHECKF(bm_plan_build(f->s, &o, &f->t, &f->k, &err) == BM_OK, "%s", err.msg);
    if (!f->t) return -1;
    CHECK(f->t->pp == 2 && f->t->dp == 2);
    f->k15 = bm_costs_copy(f->k, f->t);
    if (!f->k15) return -1;
    for (int m = 0; m < f->t->n_modules; m++) f->k15->modules[m].fwd_ms *= 1.5, f->k15->modules[m].bwd_ms *= 1.5;
    CHECKF(bm_simulate(f->t, f->k, NULL, &f->fast, &err) == BM_OK, "%s", err.msg);
    CHECKF(bm_simulate(f->t, f->k15, NULL, &f->slow, &err) == BM_OK, "%s", err.msg);
    if (!f->fast || !f->slow) return -1;
    f->fast->measured = f->slow->measured = 1;
    CHECK(f->slow->makespan_ms > f->fast->makespan_ms);
    return 0;
}

static void teardown(struct fixture *f)
{
    bm_timeline_free(f->fast), bm_timeline_free(f->slow);
    bm_costs_free(f->k), bm_costs_free(f->k15);
    bm_table_free(f->t);
    bm_spec_free(f->s);
}

/* A trace of replicas tl[0..n-1] at path. */
static int write_trace(const struct fixture *f, const char *path, const struct bm_timeline *a, const struct bm_timeline *b,
                 int n)
{
    const struct bm_timeline *tl[2] = {a, b};
    struct bm_err err;
    int rc = bm_exec_trace_write_dp(f->t, f->k, tl, n, path, &err);
    CHECKF(rc == BM_OK, "%s", err.msg);
    return rc;
}

/* c's fitted fwd/bwd of module name == want_f / want_b (1e-9 relative). */
static void check_cost(const struct bm_calibration *c, const char *name, double want_f, double want_b)
{
    for (int m = 0; m < c->cal.n_modules; m++)
        if (!strcmp(c->cal.names[m], name)) {
            CHECKF(fabs(c->cal.costs[m].fwd_ms - want_f) <= 1e-9 * want_f, "%s fwd %.12g, want %g", name,
                   c->cal.costs[m].fwd_ms, want_f);
            CHECKF(fabs(c->cal.costs[m].bwd_ms - want_b) <= 1e-9 * want_b, "%s bwd %.12g, want %g", name,
                   c->cal.costs[m].bwd_ms, want_b);
            return;
        }
    CHECKF(0, "no module %s", name);
}

static void check_all(const struct bm_calibration *c, double x)
{
    check_cost(c, "enc", 1 * x, 2 * x);
    check_cost(c, "bb", 8 * x, 16 * x);
    check_cost(c, "gen", 1 * x, 2 * x);
}

TEST(slowest_replica_is_fitted_by_default)
{
    struct fixture f;
    if (setup(&f) == 0) {
        const char *p = tmp("a.json");
        if (write_trace(&f, p, f.fast, f.slow, 2) == BM_OK) {
            struct bm_calibration c;
            struct bm_err err;
            struct bm_calibration_opts o = {.mean = 1, .replica = -1};
            CHECKF(bm_calibration_build(&p, 1, &o, &c, &err) == BM_OK, "%s", err.msg);
            if (c.n == 1) {
                CHECK(c.replica[0] == 1);
                check_all(&c, 1.5);
                /* the cost model made of them simulates the slow replica's walk */
                struct bm_timeline *sim = NULL;
                CHECKF(bm_simulate(c.t[0], c.model, NULL, &sim, &err) == BM_OK, "%s", err.msg);
                if (sim) CHECK_NEAR(sim->makespan_ms, f.slow->makespan_ms, 1e-6 * f.slow->makespan_ms);
                bm_timeline_free(sim);
            }
            bm_calibration_free(&c);
            o.replica = 0; /* replica 0 named: the fast one */
            CHECKF(bm_calibration_build(&p, 1, &o, &c, &err) == BM_OK, "%s", err.msg);
            if (c.n == 1) {
                CHECK(c.replica[0] == 0);
                check_all(&c, 1.0);
            }
            bm_calibration_free(&c);
            /* bm_calibration_build(o = NULL): the slowest too (medians) */
            CHECKF(bm_calibration_build(&p, 1, NULL, &c, &err) == BM_OK, "%s", err.msg);
            if (c.n == 1) {
                CHECK(c.replica[0] == 1);
                check_all(&c, 1.5);
            }
            bm_calibration_free(&c);
            o.replica = 2; /* past dp: an error naming the replicas */
            CHECK(bm_calibration_build(&p, 1, &o, &c, &err) == BM_ERR);
            CHECK_STR_CONTAINS(err.msg, "--replica 2: the run had 2 data-parallel replicas (0..1)");
            CHECK(c.n == 0);
        }
        unlink(p);
    }
    teardown(&f);
}

/* Two traces (steps): the slowest replica of each, whichever it is, pooled. */
TEST(slowest_replica_per_trace_pooled)
{
    struct fixture f;
    if (setup(&f) == 0) {
        const char *p[2] = {tmp("s1.json"), tmp("s2.json")};
        if (write_trace(&f, p[0], f.fast, f.slow, 2) == BM_OK && write_trace(&f, p[1], f.slow, f.fast, 2) == BM_OK) {
            struct bm_calibration c;
            struct bm_err err;
            struct bm_calibration_opts o = {.mean = 1, .replica = -1};
            CHECKF(bm_calibration_build(p, 2, &o, &c, &err) == BM_OK, "%s", err.msg);
            if (c.n == 2) {
                CHECK(c.replica[0] == 1 && c.replica[1] == 0);
                check_all(&c, 1.5);
            }
            bm_calibration_free(&c);
            o.replica = 0; /* replica 0 of both: 1 x and 1.5 x pooled */
            CHECKF(bm_calibration_build(p, 2, &o, &c, &err) == BM_OK, "%s", err.msg);
            if (c.n == 2) {
                CHECK(c.replica[0] == 0 && c.replica[1] == 0);
                check_all(&c, 1.25);
            }
            bm_calibration_free(&c);
            o.replica = -1, o.run_median = 1; /* per trace, then the median of two: the same 1.5 x */
            CHECKF(bm_calibration_build(p, 2, &o, &c, &err) == BM_OK, "%s", err.msg);
            if (c.n == 2) check_all(&c, 1.5);
            bm_calibration_free(&c);
        }
        unlink(p[0]), unlink(p[1]);
    }
    teardown(&f);
}

/* A trace of the dp-2 plan holding replica 0 only (written for one replica): the slowest is
 * replica 0; --replica 1 is an error saying so. */
TEST(trace_of_one_replica)
{
    struct fixture f;
    if (setup(&f) == 0) {
        const char *p = tmp("one.json");
        if (write_trace(&f, p, f.slow, NULL, 1) == BM_OK) {
            struct bm_calibration c;
            struct bm_err err;
            struct bm_calibration_opts o = {.mean = 1, .replica = -1};
            CHECKF(bm_calibration_build(&p, 1, &o, &c, &err) == BM_OK, "%s", err.msg);
            if (c.n == 1) {
                CHECK(c.replica[0] == 0);
                check_all(&c, 1.5);
            }
            bm_calibration_free(&c);
            o.replica = 1;
            CHECK(bm_calibration_build(&p, 1, &o, &c, &err) == BM_ERR);
            CHECK_STR_CONTAINS(err.msg, "--replica 1: the trace holds replica 0 only");
        }
        unlink(p);
    }
    teardown(&f);
}

int main(void)
{
    RUN(slowest_replica_is_fitted_by_default);
    RUN(slowest_replica_per_trace_pooled);
    RUN(trace_of_one_replica);
    return test_summary();
}
