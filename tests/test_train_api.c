/* test_train_api.c — bm_train (src/exec/train.c) called from C with typed options: the
 * pipelined executor with every rank in this process (BM_TRAIN_LOCAL, what `bigmac train
 * --local` runs) against the single-process reference trainer (BM_TRAIN_REFERENCE), step by
 * step through their logs; a given table; and the failures before the first step, reported once
 * through on_error. Linked through mpicc (bm_train references the MPI transport; nothing here
 * starts MPI). */
#include "test.h"

#include "bigmac.h"
#include "bigmac_cost.h"

#define SPEC "tests/specs/exec-small.json"
#define STEPS 2

/* The "loss" of each line of a train log into loss[]; returns the number of lines. */
static int read_losses(const char *path, double *loss, int max)
{
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char line[4096];
    int n = 0;
    while (n < max && fgets(line, sizeof line, f)) {
        const char *p = strstr(line, "\"loss\": ");
        if (p && sscanf(p + 8, "%lf", &loss[n]) == 1) n++;
    }
    fclose(f);
    return n;
}

struct errors {
    int calls, setup;
    char msg[4096];
};

static void on_error(void *ctx, const char *msg, int setup)
{
    struct errors *e = ctx;
    e->calls++;
    e->setup = setup;
    snprintf(e->msg, sizeof e->msg, "%s", msg);
}

static struct bm_spec *load(void)
{
    struct bm_spec *s = NULL;
    struct bm_err err;
    CHECKF(bm_spec_load(SPEC, &s, &err) == BM_OK, "%s", err.msg);
    return s;
}

static const char *tmp_path(const char *name)
{
    static char buf[4][512];
    static int k;
    const char *dir = getenv("TEST_TMP");
    char *b = buf[k++ % 4];
    snprintf(b, sizeof buf[0], "%s/train_api_%s", dir && *dir ? dir : "/tmp", name);
    return b;
}

TEST(local_matches_reference)
{
    struct bm_spec *s = load();
    if (!s) return;
    struct bm_err err;
    struct errors e = {0};
    const char *ref_log = tmp_path("ref.log"), *local_log = tmp_path("local.log");
    struct bm_train_opts o = {.mode = BM_TRAIN_REFERENCE, .steps = STEPS, .log_path = ref_log, .quiet = 1,
                              .on_error = on_error, .ctx = &e};
    CHECKF(bm_train(s, NULL, NULL, &o, NULL, NULL, &err) == BM_OK, "%s", err.msg);
    struct bm_plan_opts po;
    bm_plan_opts_from_spec(&po, s);
    for (int pol = 0; pol < 2; pol++) { /* bigmac and optimus place the nested ops differently */
        po.policy = pol ? BM_POL_OPTIMUS : BM_POL_BIGMAC;
        o = (struct bm_train_opts){.mode = BM_TRAIN_LOCAL, .plan = &po, .steps = STEPS, .log_path = local_log,
                                   .quiet = 1, .on_error = on_error, .ctx = &e};
        CHECKF(bm_train(s, NULL, NULL, &o, NULL, NULL, &err) == BM_OK, "%s", err.msg);
        double a[8], b[8];
        int na = read_losses(ref_log, a, 8), nb = read_losses(local_log, b, 8);
        CHECK(na == STEPS && nb == STEPS);
        for (int k = 0; k < STEPS && k < na && k < nb; k++) CHECK_NEAR(b[k], a[k], 1e-4 * fabs(a[k]));
    }
    CHECK(e.calls == 0);
    bm_spec_free(s);
}

/* A table the caller planned runs as given (and stays the caller's). */
TEST(given_table_runs)
{
    struct bm_spec *s = load();
    if (!s) return;
    struct bm_plan_opts po;
    bm_plan_opts_from_spec(&po, s);
    po.policy = BM_POL_UNIFIED;
    struct bm_table *t = NULL;
    struct bm_costs *t_c = NULL;
    struct bm_err err;
    CHECKF(bm_plan_build(s, &po, &t, &t_c, &err) == BM_OK, "%s", err.msg);
    if (!t) {
        bm_spec_free(s);
        return;
    }
    const char *log = tmp_path("table.log");
    struct bm_train_opts o = {.mode = BM_TRAIN_LOCAL, .steps = 1, .log_path = log, .quiet = 1};
    CHECKF(bm_train(s, t, NULL, &o, NULL, NULL, &err) == BM_OK, "%s", err.msg);
    double l[2];
    CHECK(read_losses(log, l, 2) == 1);
    CHECK(t->pp == 2 && t->policy == BM_POL_UNIFIED); /* still there: not freed by bm_train */
    bm_table_free(t), bm_costs_free(t_c), t_c = NULL;
    bm_spec_free(s);
}

TEST(failures_before_the_first_step)
{
    struct bm_spec *s = load();
    if (!s) return;
    struct bm_err err;
    struct errors e = {0};
    /* a plan the spec cannot take: 4 layers over 8 chunks */
    struct bm_plan_opts po;
    bm_plan_opts_from_spec(&po, s);
    po.pp = 8;
    struct bm_train_opts o = {.mode = BM_TRAIN_LOCAL, .plan = &po, .steps = 1, .quiet = 1, .on_error = on_error,
                              .ctx = &e};
    CHECK(bm_train(s, NULL, NULL, &o, NULL, NULL, &err) == BM_ERR);
    CHECK(e.calls == 1 && e.setup == 1);
    CHECK_STR_CONTAINS(err.msg, "too few for pp*vpp = 8 chunks");
    CHECK(!strcmp(e.msg, err.msg));
    /* the reference trainer has no pipeline to trace or checkpoint */
    e = (struct errors){0};
    o = (struct bm_train_opts){.mode = BM_TRAIN_REFERENCE, .trace_path = tmp_path("x.trace"), .on_error = on_error,
                               .ctx = &e};
    CHECK(bm_train(s, NULL, NULL, &o, NULL, NULL, &err) == BM_ERR);
    CHECK_STR_CONTAINS(err.msg, "the reference trainer takes only");
    CHECK(e.calls == 1);
    o = (struct bm_train_opts){.mode = BM_TRAIN_LOCAL, .ckpt_every = 2};
    CHECK(bm_train(s, NULL, NULL, &o, NULL, NULL, &err) == BM_ERR);
    CHECK_STR_CONTAINS(err.msg, "needs a checkpoint directory");
    o = (struct bm_train_opts){.mode = (enum bm_train_mode)7};
    CHECK(bm_train(s, NULL, NULL, &o, NULL, NULL, &err) == BM_ERR);
    CHECK_STR_CONTAINS(err.msg, "unknown train mode 7");
    /* what the program could not load is reported the same way (bm_train_fail) */
    e = (struct errors){0};
    o = (struct bm_train_opts){.mode = BM_TRAIN_LOCAL, .on_error = on_error, .ctx = &e};
    CHECK(bm_train_fail(&o, NULL, NULL, "x.json: cannot open") == BM_ERR);
    CHECK(e.calls == 1 && e.setup == 1 && !strcmp(e.msg, "x.json: cannot open"));
    bm_spec_free(s);
}

/* A fault injected through the options fails that step, reported with setup = 0. */
TEST(injected_fault_fails_the_step)
{
    struct bm_spec *s = load();
    if (!s) return;
    struct bm_err err;
    struct errors e = {0};
    struct bm_train_opts o = {.mode = BM_TRAIN_LOCAL, .steps = 1, .quiet = 1, .fault = BM_TRAIN_FAULT_NAN,
                              .fault_rank = 1, .fault_op = 0, .on_error = on_error, .ctx = &e};
    CHECK(bm_train(s, NULL, NULL, &o, NULL, NULL, &err) == BM_ERR);
    CHECK(e.calls == 1 && e.setup == 0);
    CHECK_STR_CONTAINS(err.msg, "not finite");
    bm_spec_free(s);
}

int main(void)
{
    RUN(local_matches_reference);
    RUN(given_table_runs);
    RUN(failures_before_the_first_step);
    RUN(injected_fault_fails_the_step);
    return test_summary();
}
