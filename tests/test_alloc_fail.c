/* test_alloc_fail.c — SQLite-style fault injection over whole pipelines: for every n from 1
 * until the operation succeeds, the n-th allocation fails (bm_alloc_fail_at) and the operation
 * must return a clean BM_ERR: a message saying "out of memory", no object handed out, no crash,
 * and (under `make asan`) no leak. A run in which the injected failure fired must not report
 * success: that would mean a failed allocation was silently ignored or masked (e.g. the window
 * search treating it as "window too small").
 *
 * Paths: spec load -> plan, for every policy (interleaved backbone, a generator sending
 * gradient into the backbone, window auto, fit and explicit, 1f1b/gpipe); the simulator on a
 * planned table; table load -> verify; the dataset (bm_dataset_new, bm_dataset_batch). */
#include "test.h"

#include "bigmac.h"
#include "bigmac_module.h"
#include "bigmac_cost.h"
#include "util/util.h"

#define SPEC "examples/tiny-mllm.json"

/* A step under test returns its rc, sets *made when it handed out an object, and leaves
 * injection as it found it unless it turns it off itself for an unguarded check afterwards
 * (then it stores bm_alloc_failed() in *fired first; otherwise *fired is left at -1). */
typedef int (*step_fn)(void *ctx, struct bm_err *err, int *made, int *fired);

/* Run step for n = 1, 2, ... until it succeeds without an injected failure. Returns the n at
 * which it succeeded (0 when it never did within max). */
static long sweep(const char *what, step_fn step, void *ctx, long max, int tolerant)
{
    for (long n = 1; n <= max; n++) {
        struct bm_err err;
        err.msg[0] = 0;
        int made = 0, fired = -1;
        bm_alloc_fail_at(n);
        int rc = step(ctx, &err, &made, &fired);
        if (fired < 0) fired = bm_alloc_failed();
        bm_alloc_fail_at(0);
        if (fired && tolerant && rc == BM_OK) continue; /* the failure only cost detail */
        if (!fired) {
            CHECKF(rc == BM_OK, "%s: n=%ld: fails without an injected failure: %s", what, n, err.msg);
            CHECKF(made, "%s: n=%ld: BM_OK without an object", what, n);
            return n;
        }
        CHECKF(rc == BM_ERR, "%s: n=%ld: allocation %ld failed but the call returned %d", what, n,
               n, rc);
        CHECKF(!made, "%s: n=%ld: an object was returned after a failure", what, n);
        CHECKF(strstr(err.msg, "out of memory") != NULL, "%s: n=%ld: message: \"%s\"", what, n,
               err.msg);
        if (t_checks_failed_now > 20) return 0; /* one broken path floods the log otherwise */
    }
    CHECKF(0, "%s: still failing after %ld allocations", what, max);
    return 0;
}

/* ---------------------------------------------------------------- spec -> plan */

struct plan_ctx {
    const char *spec_path;
    int got_window;         /* what the last successful plan chose */
    long got_ops;
    int set_policy, set_window, set_bb;
    enum bm_policy policy;
    int window, pp, vpp, mb, unit;
    enum bm_backbone bb;
};

static int step_plan(void *vctx, struct bm_err *err, int *made, int *fired)
{
    struct plan_ctx *c = vctx;
    struct bm_spec *s = (struct bm_spec *)1;
    if (bm_spec_load(c->spec_path, &s, err) != BM_OK) {
        *made = s != NULL;
        return BM_ERR;
    }
    struct bm_plan_opts o;
    bm_plan_opts_from_spec(&o, s);
    if (c->set_policy) o.policy = c->policy;
    if (c->set_window) o.window = c->window;
    if (c->set_bb) o.backbone = c->bb;
    if (c->pp) o.pp = c->pp;
    if (c->vpp) o.vpp = c->vpp;
    if (c->mb) o.microbatches = c->mb;
    if (c->unit) o.unit = c->unit;
    struct bm_table *t = (struct bm_table *)1;
    struct bm_costs *t_c = NULL;
    int rc = bm_plan_build(s, &o, &t, &t_c, err);
    *made = t != NULL;
    *fired = bm_alloc_failed();
    bm_alloc_fail_at(0);
    if (rc == BM_OK && t) {
        /* the table must be the one planned without failures: same op count and window */
        struct bm_err e2;
        if (bm_verify(t, &e2) != BM_OK) {
            snprintf(err->msg, sizeof err->msg, "planned table fails verification: %.3000s", e2.msg);
            rc = BM_ERR + 10;
        }
        c->got_window = t->window;
        c->got_ops = bm_table_n_ops(t);
    }
    if (t != (struct bm_table *)1) bm_table_free(t), bm_costs_free(t_c), t_c = NULL;
    bm_spec_free(s);
    return rc;
}

/* Plan with and without failures; the successful result must equal the reference. */
static void plan_sweep(struct plan_ctx *c, const char *what)
{
    struct bm_err err;
    int made, fired;
    CHECKF(step_plan(c, &err, &made, &fired) == BM_OK, "%s: reference plan fails: %s", what, err.msg);
    int ref_window = c->got_window;
    long ref_ops = c->got_ops;
    long n = sweep(what, step_plan, c, 200000, 0);
    CHECKF(n > 10, "%s: succeeded at n=%ld", what, n);
    CHECKF(c->got_window == ref_window && c->got_ops == ref_ops,
           "%s: after the sweep: window %d ops %ld, reference window %d ops %ld", what,
           c->got_window, c->got_ops, ref_window, ref_ops);
    printf("# %s: %ld allocations\n", what, n - 1);
}

/* window auto tries W = 1, 2, ... and takes the first that does not deadlock: an allocation
 * failure inside a smaller window's attempt must end the search with "out of memory", not be
 * taken for "too small" (sweep() checks that no run with a fired failure succeeds). */
TEST(plan_bigmac_interleaved_window_auto)
{
    struct plan_ctx c = {.spec_path = SPEC};
    c.set_policy = 1, c.policy = BM_POL_BIGMAC;
    plan_sweep(&c, "bigmac interleaved auto");
}

/* window fit: auto's search, then larger windows simulated for makespan and memory */
TEST(plan_bigmac_window_fit)
{
    struct plan_ctx c = {.spec_path = SPEC};
    c.set_policy = 1, c.policy = BM_POL_BIGMAC;
    c.set_window = 1, c.window = BM_WINDOW_FIT;
    plan_sweep(&c, "bigmac interleaved fit");
}

TEST(plan_bigmac_1f1b_explicit_window)
{
    struct plan_ctx c = {.spec_path = SPEC};
    c.set_policy = 1, c.policy = BM_POL_BIGMAC;
    c.set_bb = 1, c.bb = BM_BB_1F1B, c.vpp = 1, c.mb = 16;
    c.set_window = 1, c.window = 3;
    plan_sweep(&c, "bigmac 1f1b W=3");
}

TEST(plan_optimus)
{
    struct plan_ctx c = {.spec_path = SPEC};
    c.set_policy = 1, c.policy = BM_POL_OPTIMUS;
    plan_sweep(&c, "optimus interleaved");
}

TEST(plan_unified)
{
    struct plan_ctx c = {.spec_path = SPEC};
    c.set_policy = 1, c.policy = BM_POL_UNIFIED;
    plan_sweep(&c, "unified interleaved");
}

TEST(plan_unified_balanced)
{
    struct plan_ctx c = {.spec_path = SPEC};
    c.set_policy = 1, c.policy = BM_POL_UNIFIED_BALANCED;
    plan_sweep(&c, "unified-balanced interleaved");
}

TEST(plan_unified_balanced_continuous)
{
    /* no "layers": the water-filling split */
    struct plan_ctx c = {.spec_path = "tests/specs/derive-roles.json"};
    c.set_policy = 1, c.policy = BM_POL_UNIFIED_BALANCED;
    plan_sweep(&c, "unified-balanced continuous");
}

TEST(plan_ideal)
{
    struct plan_ctx c = {.spec_path = SPEC};
    c.set_policy = 1, c.policy = BM_POL_IDEAL;
    plan_sweep(&c, "ideal interleaved");
}

TEST(plan_none)
{
    struct plan_ctx c = {.spec_path = SPEC};
    c.set_policy = 1, c.policy = BM_POL_NONE;
    plan_sweep(&c, "none interleaved");
}

TEST(plan_bigmac_gpipe_chained_encoders)
{
    struct plan_ctx c = {.spec_path = "tests/specs/derive-roles.json"};
    c.set_policy = 1, c.policy = BM_POL_BIGMAC;
    c.set_bb = 1, c.bb = BM_BB_GPIPE;
    plan_sweep(&c, "bigmac gpipe, encoder chain, generator chain");
}

/* zero-bubble backbones: the task graph's W passes, the verifier's W checks */
TEST(plan_bigmac_zero_bubble)
{
    struct plan_ctx c = {.spec_path = SPEC};
    c.set_policy = 1, c.policy = BM_POL_BIGMAC;
    c.set_bb = 1, c.bb = BM_BB_ZB_INTERLEAVED;
    plan_sweep(&c, "bigmac zb-interleaved");
    c.bb = BM_BB_ZB_H1, c.vpp = 1;
    c.policy = BM_POL_OPTIMUS;
    plan_sweep(&c, "optimus zb-h1");
}

/* ---------------------------------------------------------------- simulator */

struct sim_ctx {
    const struct bm_table *t;
    const struct bm_costs *c;
    struct bm_sim_opts so;
};

static int step_sim(void *vctx, struct bm_err *err, int *made, int *fired)
{
    struct sim_ctx *c = vctx;
    struct bm_timeline *tl = (struct bm_timeline *)1;
    (void)fired;
    int rc = bm_simulate(c->t, c->c, &c->so, &tl, err);
    *made = tl != NULL;
    if (tl != (struct bm_timeline *)1) bm_timeline_free(tl);
    return rc;
}

TEST(simulate_planned_tables)
{
    struct bm_spec *s;
    struct bm_err err;
    CHECK(bm_spec_load(SPEC, &s, &err) == BM_OK);
    if (!s) return;
    for (int p = 0; p < BM_N_POLICIES; p++) {
        struct bm_plan_opts o;
        bm_plan_opts_from_spec(&o, s);
        o.policy = (enum bm_policy)p;
        struct bm_table *t;
        struct bm_costs *t_c = NULL;
        CHECKF(bm_plan_build(s, &o, &t, &t_c, &err) == BM_OK, "%s: %s", bm_policy_name(o.policy), err.msg);
        if (!t) continue;
        struct sim_ctx c = {t, t_c, {0.2, 5, 2}};
        char what[64];
        snprintf(what, sizeof what, "simulate %s", bm_policy_name(o.policy));
        long n = sweep(what, step_sim, &c, 100000, 0);
        CHECKF(n > 5, "%s: n=%ld", what, n);
        bm_table_free(t), bm_costs_free(t_c), t_c = NULL;
    }
    bm_spec_free(s);
}

/* ---------------------------------------------------------------- table load -> verify */

struct load_ctx {
    const char *path;
    long ops;
};

static int step_load_verify(void *vctx, struct bm_err *err, int *made, int *fired)
{
    struct load_ctx *c = vctx;
    struct bm_table *t = (struct bm_table *)1;
    struct bm_costs *t_c = NULL;
    (void)fired;
    int rc = bm_table_load(c->path, &t, &t_c, err);
    *made = t != NULL;
    if (rc != BM_OK) {
        if (t != (struct bm_table *)1) bm_table_free(t), bm_costs_free(t_c), t_c = NULL;
        return rc;
    }
    rc = bm_verify(t, err);
    c->ops = bm_table_n_ops(t);
    bm_table_free(t), bm_costs_free(t_c), t_c = NULL;
    *made = rc == BM_OK;
    return rc;
}

TEST(table_load_and_verify)
{
    static const char *const files[] = {
        "tests/corpus/table/valid-tiny-bigmac-p2-v2-m4.json",
        "tests/corpus/table/valid-tiny-optimus-p2-v2-m4.json",
        "tests/corpus/table/valid-derive-optimus-gpipe.json",
        "tests/data/table_p2_m2.json",
    };
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        struct load_ctx c = {files[i], 0};
        long n = sweep(files[i], step_load_verify, &c, 100000, 0);
        CHECKF(n > 10 && c.ops > 0, "%s: n=%ld ops=%ld", files[i], n, c.ops);
    }
}

static int step_parse_fail_in_verify(void *vctx, struct bm_err *err, int *made, int *fired)
{
    /* a table that loads but fails verification: the verifier's error path under failures */
    struct load_ctx *c = vctx;
    struct bm_table *t = (struct bm_table *)1;
    struct bm_costs *t_c = NULL;
    (void)fired;
    int rc = bm_table_load(c->path, &t, &t_c, err);
    *made = t != NULL;
    if (rc != BM_OK) {
        if (t != (struct bm_table *)1) bm_table_free(t), bm_costs_free(t_c), t_c = NULL;
        return rc;
    }
    rc = bm_verify(t, err);
    bm_table_free(t), bm_costs_free(t_c), t_c = NULL;
    *made = 0;
    /* the deadlock is expected: report it as success of this step */
    if (rc == BM_ERR && strstr(err->msg, "invariant 2")) {
        *made = 1;
        return BM_OK;
    }
    return BM_ERR;
}

TEST(table_load_and_verify_deadlocked)
{
    struct load_ctx c = {"tests/corpus/table/invalid-deadlock.json", 0};
    /* tolerant: the deadlock report's "cycle:" line is optional (skipped when its scratch
     * array cannot be allocated); the verdict is the same */
    long n = sweep("deadlocked table", step_parse_fail_in_verify, &c, 100000, 1);
    CHECK(n > 10);
}

/* ---------------------------------------------------------------- the public dataset */

/* bm_dataset_new then one bm_dataset_batch (the Python binding's data_batch): every failure a
 * clean BM_ERR, nothing handed out, nothing leaked. */
static int step_dataset(void *ctx, struct bm_err *err, int *made, int *fired)
{
    (void)fired;
    struct bm_dataset *d;
    struct bm_batch *b = NULL;
    if (bm_dataset_new(ctx, &d, err)) return BM_ERR;
    int rc = bm_dataset_batch(d, 3, 1, &b, err);
    *made = rc == BM_OK && b != NULL;
    bm_batch_free(b);
    bm_dataset_free(d);
    return rc;
}

TEST(dataset_batch)
{
    struct bm_spec *s;
    struct bm_err err;
    CHECKF(bm_spec_load(SPEC, &s, &err) == BM_OK, "%s", err.msg);
    if (!s) return;
    CHECK(sweep("dataset batch", step_dataset, s, 100000, 0) > 1);
    bm_spec_free(s);
}

int main(void)
{
    RUN(plan_bigmac_interleaved_window_auto);
    RUN(plan_bigmac_window_fit);
    RUN(plan_bigmac_1f1b_explicit_window);
    RUN(plan_optimus);
    RUN(plan_unified);
    RUN(plan_unified_balanced);
    RUN(plan_unified_balanced_continuous);
    RUN(plan_ideal);
    RUN(plan_none);
    RUN(plan_bigmac_gpipe_chained_encoders);
    RUN(plan_bigmac_zero_bubble);
    RUN(simulate_planned_tables);
    RUN(table_load_and_verify);
    RUN(table_load_and_verify_deadlocked);
    RUN(dataset_batch);
    return test_summary();
}
