/* test_frozen.c — frozen modules ("trainable": false, docs/spec.md "Frozen modules") from the
 * spec to the executor: the key's parsing and messages, the table's round trip (JSON, CSV), the
 * derived backward of each combination, plans of every policy and backbone without B/W ops for
 * work that has none (verified, the encoder's simulated activation 0 at every M), and the
 * executor through comm_local: a frozen ViT's parameters bit-identical after training, a frozen
 * backbone's too while the ViT before it trains (gradients pass through), losses and the other
 * parameters equal to the reference trained with the same modules frozen, measured peak
 * activation bytes per rank and role equal to the simulator's. */
#include <unistd.h>

#include "calib/calib.h"
#include "spec/split.h"
#include "exec/trace.h"
#include "exec/comm.h"
#include "table/table.h"
#include "exec/exec.h"
#include "test.h"
#include "train/train.h"
#include "util/util.h"

#define SPEC "tests/specs/exec-small.json"

static char tmpdir[512];

static const char *tmp_path(const char *name)
{
    static char buf[8][1024];
    static int k;
    char *p = buf[k++ % 8];
    snprintf(p, 1024, "%s/%s", tmpdir, name);
    return p;
}

/* SPEC with "trainable": false added to each module named in frozen (comma-separated names,
 * e.g. "vit,gpt"), written to tmp file 'name'; returns its path. */
static const char *variant(const char *name, const char *frozen)
{
    struct bm_err err;
    size_t len;
    char *text = bm_read_file(SPEC, &len, &err);
    if (!text) return NULL;
    const char *path = tmp_path(name);
    FILE *f = fopen(path, "w");
    if (!f) {
        bm_free(text);
        return NULL;
    }
    for (const char *p = text; *p;) {
        const char *q = strstr(p, "{\"name\": \"");
        if (!q) {
            fputs(p, f);
            break;
        }
        const char *n0 = q + 10, *n1 = strchr(n0, '"');
        fwrite(p, 1, (size_t)(n1 + 2 - p), f); /* through the name and its comma */
        char mod[64];
        snprintf(mod, sizeof mod, "%.*s", (int)(n1 - n0), n0);
        char list[128];
        snprintf(list, sizeof list, ",%s,", frozen);
        char key[80];
        snprintf(key, sizeof key, ",%s,", mod);
        if (strstr(list, key)) fputs(" \"trainable\": false,", f);
        p = n1 + 2;
    }
    fclose(f);
    bm_free(text);
    return path;
}

static struct bm_spec *load(const char *path)
{
    struct bm_spec *s = NULL;
    struct bm_err err;
    if (!path || bm_spec_load(path, &s, &err)) fprintf(stderr, "%s\n", path ? err.msg : "no spec");
    return s;
}

static struct bm_table *plan(const struct bm_spec *s, int P, int V, int M, enum bm_backbone bb, enum bm_policy pol)
{
    struct bm_plan_opts o;
    struct bm_err err;
    struct bm_table *t = NULL;
    struct bm_costs *t_c = NULL;
    bm_plan_opts_from_spec(&o, s);
    o.pp = P, o.vpp = V, o.backbone = bb, o.policy = pol, o.unit = 0;
    if (M) o.microbatches = M;
    if (bm_plan_build(s, &o, &t, &t_c, &err)) fprintf(stderr, "plan: %s\n", err.msg);
    else test_costs_adopt(t, t_c); /* the tests read it as test_costs(t) */
    return t;
}

/* compute ops of (module, pass) in t */
static int count(const struct bm_table *t, int module, int pass)
{
    int n = 0;
    for (int r = 0; r < t->pp; r++)
        for (int i = 0; i < t->ranks[r].n_ops; i++) {
            const struct bm_op *op = &t->ranks[r].ops[i];
            n += op->kind == BM_OP_COMPUTE && op->module == module && op->pass == pass;
        }
    return n;
}

TEST(spec_key_parses_and_errors_are_positioned)
{
    struct bm_spec *s = load(variant("vit.json", "vit"));
    CHECK(s && s->modules[0].frozen == 1 && s->modules[1].frozen == 0 && s->modules[2].frozen == 0);
    bm_spec_free(s);
    /* a non-boolean is a positioned error naming the field */
    const char *bad = tmp_path("bad.json");
    FILE *f = fopen(bad, "w");
    fputs("{\"format\": \"bigmac-spec\", \"version\": 1, \"modules\": [\n"
          "  {\"name\": \"llm\", \"role\": \"backbone\", \"trainable\": \"no\"}]}\n", f);
    fclose(f);
    struct bm_err err;
    s = NULL;
    CHECK(bm_spec_load(bad, &s, &err) == BM_ERR);
    CHECK_STR_CONTAINS(err.msg, "bad.json:2:");
    CHECK_STR_CONTAINS(err.msg, "module \"llm\": trainable must be true or false, got a string");
    /* a misspelt key gets the did-you-mean */
    f = fopen(bad, "w");
    fputs("{\"format\": \"bigmac-spec\", \"version\": 1, \"modules\": [\n"
          "  {\"name\": \"llm\", \"role\": \"backbone\", \"trainabel\": false}]}\n", f);
    fclose(f);
    CHECK(bm_spec_load(bad, &s, &err) == BM_ERR);
    CHECK_STR_CONTAINS(err.msg, "did you mean \"trainable\"");
}

/* Which passes exist: the table in docs/spec.md "Frozen modules", row by row. */
TEST(derived_backward_per_combination)
{
    static const struct {
        const char *frozen;
        int vit, gpt, dit; /* BM_BACKWARD_* */
    } rows[] = {
        {"", BM_BACKWARD_FULL, BM_BACKWARD_FULL, BM_BACKWARD_FULL},
        {"vit", BM_BACKWARD_NONE, BM_BACKWARD_FULL, BM_BACKWARD_FULL},
        {"gpt", BM_BACKWARD_FULL, BM_BACKWARD_INPUT, BM_BACKWARD_FULL},
        {"vit,gpt", BM_BACKWARD_NONE, BM_BACKWARD_NONE, BM_BACKWARD_FULL},
        {"dit", BM_BACKWARD_FULL, BM_BACKWARD_FULL, BM_BACKWARD_INPUT},
        {"gpt,dit", BM_BACKWARD_FULL, BM_BACKWARD_INPUT, BM_BACKWARD_INPUT},
        {"vit,gpt,dit", BM_BACKWARD_NONE, BM_BACKWARD_NONE, BM_BACKWARD_NONE},
    };
    for (size_t k = 0; k < sizeof rows / sizeof rows[0]; k++) {
        struct bm_spec *s = load(variant("row.json", rows[k].frozen));
        struct bm_table *t = s ? plan(s, 2, 1, 0, BM_BB_ZB_H1, BM_POL_BIGMAC) : NULL;
        CHECKF(t != NULL, "%s", rows[k].frozen);
        if (t) {
            int want[3] = {rows[k].vit, rows[k].gpt, rows[k].dit};
            for (int m = 0; m < 3; m++) {
                CHECKF(bm_table_backward(t, m) == want[m], "frozen {%s}: module %d backward %d, want %d",
                       rows[k].frozen, m, bm_table_backward(t, m), want[m]);
                int M = t->microbatches, per = m == 1 ? t->pp * t->vpp * M : M;
                CHECK(count(t, m, BM_PASS_F) == per);
                CHECK(count(t, m, BM_PASS_B) == (want[m] == BM_BACKWARD_NONE ? 0 : per));
                CHECK(count(t, m, BM_PASS_W) == (m == 1 && want[m] == BM_BACKWARD_FULL ? per : 0));
            }
            struct bm_err err;
            CHECKF(bm_verify(t, &err) == BM_OK, "%s", err.msg);
        }
        test_table_free(t);
        bm_spec_free(s);
    }
}

/* Every policy x backbone (V shapes included) plans a frozen ViT with no ViT B, verifies, and
 * simulates 0 encoder activation at every M; a frozen backbone keeps B but no W. */
TEST(every_policy_and_backbone_plans_frozen_work)
{
    const char *vit = variant("pv.json", "vit"), *gpt = variant("pg.json", "gpt");
    struct bm_spec *sv = load(vit), *sg = load(gpt);
    CHECK(sv && sg);
    if (!sv || !sg) return;
    static const struct {
        enum bm_backbone bb;
        int V;
    } bbs[] = {{BM_BB_GPIPE, 1}, {BM_BB_1F1B, 1}, {BM_BB_INTERLEAVED, 2}, {BM_BB_ZB_H1, 1},
               {BM_BB_ZB_INTERLEAVED, 2}, {BM_BB_ZB_V, 2}, {BM_BB_DUALPIPE_V, 2}};
    enum bm_policy pols[] = {BM_POL_BIGMAC, BM_POL_OPTIMUS, BM_POL_UNIFIED, BM_POL_UNIFIED_BALANCED, BM_POL_IDEAL};
    int planned = 0;
    for (size_t b = 0; b < sizeof bbs / sizeof bbs[0]; b++)
        for (size_t p = 0; p < sizeof pols / sizeof pols[0]; p++)
            for (int P = 2; P <= (bbs[b].V == 1 ? 4 : 2); P += 2) /* 4 layers: P*V <= 4 */
                for (int M = 2 * P; M <= 8 * P; M *= 2) {
                    struct bm_table *t = plan(sv, P, bbs[b].V, M, bbs[b].bb, pols[p]);
                    CHECKF(t != NULL, "%s %s P=%d M=%d", bm_backbone_name(bbs[b].bb), bm_policy_name(pols[p]), P, M);
                    if (!t) continue;
                    planned++;
                    struct bm_err err;
                    CHECKF(bm_verify(t, &err) == BM_OK, "%s", err.msg);
                    CHECK(count(t, 0, BM_PASS_F) == M && count(t, 0, BM_PASS_B) == 0 && count(t, 0, BM_PASS_W) == 0);
                    struct bm_timeline *tl = NULL;
                    CHECK(bm_simulate(t, test_costs(t), NULL, &tl, &err) == BM_OK);
                    if (tl) CHECKF(tl->peak_act_mib[BM_ROLE_ENCODER] == 0, "%s %s P=%d M=%d: encoder %g MiB",
                                   bm_backbone_name(bbs[b].bb), bm_policy_name(pols[p]), P, M,
                                   tl->peak_act_mib[BM_ROLE_ENCODER]);
                    bm_timeline_free(tl);
                    test_table_free(t);
                    t = plan(sg, P, bbs[b].V, M, bbs[b].bb, pols[p]);
                    CHECK(t != NULL);
                    if (!t) continue;
                    CHECKF(bm_verify(t, &err) == BM_OK, "%s", err.msg);
                    CHECK(count(t, 1, BM_PASS_B) == P * bbs[b].V * M && count(t, 1, BM_PASS_W) == 0);
                    CHECK(count(t, 0, BM_PASS_B) == M);
                    test_table_free(t);
                }
    CHECK(planned == 3 * 5 * 2 * 3 + 4 * 5 * 1 * 3);
    bm_spec_free(sv);
    bm_spec_free(sg);
}

/* The table keeps "trainable": false through JSON and CSV; tables without frozen modules do
 * not mention it. A table with a frozen ViT but ViT B ops is refused by invariant 1. */
TEST(table_round_trip_and_verifier_refuses_frozen_backward)
{
    struct bm_spec *s = load(variant("rt.json", "vit"));
    struct bm_table *t = s ? plan(s, 2, 1, 0, BM_BB_1F1B, BM_POL_BIGMAC) : NULL;
    CHECK(t != NULL);
    if (!t) return;
    struct bm_err err;
    const char *js = tmp_path("t.json"), *cs = tmp_path("t.csv");
    FILE *f = fopen(js, "w");
    bm_table_write_json(t, test_costs(t), f);
    fclose(f);
    size_t len;
    char *text = bm_read_file(js, &len, &err);
    CHECK(text && strstr(text, "\"trainable\": false") && !strstr(strstr(text, "\"trainable\": false") + 1, "\"trainable\""));
    bm_free(text);
    struct bm_table *u = NULL;
    struct bm_costs *u_c = NULL;
    CHECK(bm_table_load(js, &u, &u_c, &err) == BM_OK);
    CHECK(u && u->modules[0].frozen && !u->modules[1].frozen && bm_table_backward(u, 0) == BM_BACKWARD_NONE);
    CHECK(u && bm_verify(u, &err) == BM_OK);
    test_table_free(u), bm_costs_free(u_c), u_c = NULL;
    f = fopen(cs, "w");
    CHECK(bm_csv_write(t, test_costs(t), f) == BM_OK);
    fclose(f);
    u = NULL;
    struct bm_plan_opts co;
    bm_plan_opts_unset(&co);
    CHECKF(bm_csv_load(cs, NULL, &co, &u, &u_c, &err) == BM_OK, "%s", err.msg);
    CHECK(u && u->modules[0].frozen && bm_table_backward(u, 0) == BM_BACKWARD_NONE);
    test_table_free(u), bm_costs_free(u_c), u_c = NULL;
    /* the same graph, trainable: the verifier now wants the ViT's B; and the other way round */
    struct bm_spec *s2 = load(SPEC);
    struct bm_table *full = s2 ? plan(s2, 2, 1, 0, BM_BB_1F1B, BM_POL_BIGMAC) : NULL;
    CHECK(full != NULL);
    if (full) {
        f = fopen(js, "w");
        bm_table_write_json(full, test_costs(full), f);
        fclose(f);
        text = bm_read_file(js, &len, &err);
        CHECK(text && !strstr(text, "trainable"));
        bm_free(text);
        full->modules[0].frozen = 1; /* a frozen ViT with its B ops still in the table */
        CHECK(bm_table_finish(full, &err) == BM_OK);
        CHECK(bm_verify(full, &err) == BM_ERR);
        CHECK_STR_CONTAINS(err.msg, "invariant 1 (counts)");
        CHECK_STR_CONTAINS(err.msg, "module \"vit\" is frozen");
    }
    test_table_free(full);
    bm_spec_free(s2);
    test_table_free(t);
    bm_spec_free(s);
}

static float *read_floats(const char *path, size_t *n)
{
    struct bm_err err;
    size_t len = 0;
    char *b = bm_read_file(path, &len, &err);
    if (!b) return NULL;
    *n = len / sizeof(float);
    return (float *)(void *)b;
}

/* Train 'frozen' pipelined over comm_local for every policy at P = 2 (1f1b, zb-h1) and check:
 * losses == the reference (same modules frozen) within 1e-4, parameters too, the frozen
 * modules' parameters bit-identical to their initial values, a trainable module's changed. */
static void check_training(const char *frozen)
{
    struct bm_spec *s = load(variant("tr.json", frozen));
    CHECK(s != NULL);
    if (!s) return;
    enum { STEPS = 3 };
    struct bm_err err;
    struct bm_ref *r = NULL;
    CHECK(bm_ref_new(s, &r, &err) == BM_OK);
    if (!r) return;
    size_t off[4] = {0}, m;
    for (int i = 0; i < 3; i++) bm_ref_params(r, i, &m), off[i + 1] = off[i] + m;
    float *init = bm_malloc(off[3] * sizeof(float)), *ref = bm_malloc(off[3] * sizeof(float));
    for (int i = 0; i < 3; i++) {
        const float *q = bm_ref_params(r, i, &m);
        memcpy(init + off[i], q, m * sizeof(float));
    }
    double ref_loss[STEPS];
    for (int k = 0; k < STEPS; k++) {
        struct bm_step_stats st;
        CHECKF(bm_ref_step(r, k, &st, &err) == BM_OK, "%s", err.msg);
        ref_loss[k] = st.loss;
    }
    for (int i = 0; i < 3; i++) {
        const float *q = bm_ref_params(r, i, &m);
        memcpy(ref + off[i], q, m * sizeof(float));
    }
    bm_ref_free(r);
    for (int i = 0; i < 3; i++) /* the reference itself: frozen stays, trainable moves */
        CHECKF((memcmp(init + off[i], ref + off[i], (off[i + 1] - off[i]) * sizeof(float)) == 0) ==
                   (s->modules[i].frozen != 0), "{%s} reference module %d", frozen, i);
    enum bm_policy pols[] = {BM_POL_BIGMAC, BM_POL_OPTIMUS, BM_POL_UNIFIED, BM_POL_IDEAL};
    enum bm_backbone bbs[] = {BM_BB_1F1B, BM_BB_ZB_H1, BM_BB_INTERLEAVED};
    for (int b = 0; b < 3; b++)
        for (int p = 0; p < 4; p++) {
            struct bm_table *t = plan(s, 2, b == 2 ? 2 : 1, 0, bbs[b], pols[p]);
            CHECK(t != NULL);
            if (!t) continue;
            double loss[STEPS] = {0};
            struct bm_train_opts o = {.quiet = 1, .steps = STEPS, .dump_params = tmp_path("params.bin"), .loss_out = loss};
            struct bm_comm *c = bm_comm_local_new(t->pp);
            int rc = bm_exec_train(s, t, NULL, c, &o, &err);
            c->ops->free(c);
            CHECKF(rc == BM_OK, "%s", err.msg);
            for (int k = 0; k < STEPS; k++)
                CHECKF(fabs(loss[k] - ref_loss[k]) <= 1e-4 * fabs(ref_loss[k]), "{%s} %s %s step %d: %.7f vs %.7f",
                       frozen, bm_backbone_name(bbs[b]), bm_policy_name(pols[p]), k, loss[k], ref_loss[k]);
            size_t n = 0;
            float *q = read_floats(tmp_path("params.bin"), &n);
            CHECK(q && n == off[3]);
            if (q && n == off[3]) {
                double md = 0, ma = 0;
                for (size_t i = 0; i < n; i++) {
                    if (fabs((double)q[i] - ref[i]) > md) md = fabs((double)q[i] - ref[i]);
                    if (fabs(ref[i]) > ma) ma = fabs(ref[i]);
                }
                CHECKF(md <= 1e-4 * ma, "{%s} %s %s: params differ by %g", frozen, bm_backbone_name(bbs[b]),
                       bm_policy_name(pols[p]), md);
                for (int i = 0; i < 3; i++) {
                    int same = memcmp(init + off[i], q + off[i], (off[i + 1] - off[i]) * sizeof(float)) == 0;
                    CHECKF(same == (s->modules[i].frozen != 0), "{%s} %s %s module %s: %s", frozen,
                           bm_backbone_name(bbs[b]), bm_policy_name(pols[p]), s->modules[i].name,
                           same ? "unchanged but trainable" : "changed but frozen");
                }
            }
            bm_free(q);
            test_table_free(t);
        }
    bm_free(init);
    bm_free(ref);
    bm_spec_free(s);
}

TEST(frozen_vit_trains_like_the_reference)
{
    check_training("vit");
}

/* the ViT before a frozen backbone trains: its gradient goes through the backbone's B */
TEST(frozen_backbone_passes_gradients_to_the_encoder)
{
    check_training("gpt");
}

TEST(frozen_vit_and_backbone_generator_trains)
{
    check_training("vit,gpt");
}

/* The simulator, given the executor's measured bytes, predicts its measured peaks per rank and
 * role exactly; a frozen ViT's forwards keep 0 bytes. */
static void check_peaks(const char *frozen)
{
    struct bm_spec *s = load(variant("pk.json", frozen));
    CHECK(s != NULL);
    if (!s) return;
    enum bm_policy pols[] = {BM_POL_BIGMAC, BM_POL_OPTIMUS, BM_POL_UNIFIED};
    enum bm_backbone bbs[] = {BM_BB_1F1B, BM_BB_INTERLEAVED, BM_BB_ZB_H1, BM_BB_ZB_INTERLEAVED};
    for (int pi = 0; pi < 3; pi++)
        for (int bi = 0; bi < 4; bi++) {
            struct bm_table *t = plan(s, 2, bi % 2 ? 2 : 1, 0, bbs[bi], pols[pi]);
            if (!t) continue;
            struct bm_comm *c = bm_comm_local_new(2);
            struct bm_train_opts o = {.quiet = 1};
            struct bm_exec *x[2] = {NULL, NULL};
            struct bm_err err;
            for (int r = 0; r < 2; r++) CHECK(bm_exec_new(s, t, r, c, &o, &x[r], &err) == BM_OK);
            CHECKF(x[0] && x[1] && bm_exec_run_step(x, c, 0, &err) == BM_OK, "%s", err.msg);
            int C = t->pp * t->vpp, M = t->microbatches;
            test_costs(t)->act_bytes = bm_calloc((size_t)t->n_modules * C * M, sizeof(double));
            test_costs(t)->in_bytes = bm_calloc((size_t)t->n_modules * C * M, sizeof(double));
            test_costs(t)->act_w_bytes = bm_calloc((size_t)t->n_modules * C * M, sizeof(double));
            for (int r = 0; r < 2 && x[r]; r++) {
                const size_t *b = bm_exec_op_bytes(x[r]);
                for (int k = 0; k < t->ranks[r].n_ops; k++) {
                    const struct bm_op *op = &t->ranks[r].ops[k];
                    if (op->kind != BM_OP_COMPUTE) continue;
                    size_t at = ((size_t)op->module * C + (op->chunk >= 0 ? op->chunk : 0)) * M + op->mb;
                    if (op->pass == BM_PASS_F) {
                        CHECK((b[k] == 0) == (bm_table_backward(t, op->module) == BM_BACKWARD_NONE));
                        test_costs(t)->act_bytes[at] = (double)b[k];
                    } else if (op->pass == BM_PASS_B && bm_table_has_pass(t, op->module, BM_PASS_W) &&
                               bm_table_splits(t, op->module)) {
                        test_costs(t)->act_w_bytes[at] = (double)b[k];
                    }
                }
            }
            struct bm_timeline *tl = NULL;
            CHECKF(bm_simulate(t, test_costs(t), NULL, &tl, &err) == BM_OK, "%s", err.msg);
            for (int r = 0; tl && r < 2 && x[r]; r++) {
                struct bm_exec_rank_stats st;
                bm_exec_stats(x[r], &st);
                for (int role = 0; role < BM_N_ROLES; role++)
                    CHECKF(tl->ranks[r].peak_act_mib[role] * 1048576.0 == (double)st.peak_act[role],
                           "{%s} %s %s rank %d role %d: simulated %.0f bytes, measured %zu", frozen,
                           bm_policy_name(pols[pi]), bm_backbone_name(bbs[bi]), r, role,
                           tl->ranks[r].peak_act_mib[role] * 1048576.0, st.peak_act[role]);
                if (!strcmp(frozen, "vit")) CHECK(st.peak_act[BM_ROLE_ENCODER] == 0);
            }
            bm_timeline_free(tl);
            for (int r = 0; r < 2; r++) bm_exec_free(x[r]);
            c->ops->free(c);
            test_table_free(t);
        }
    bm_spec_free(s);
}

TEST(measured_peaks_equal_simulated)
{
    check_peaks("vit");
    check_peaks("gpt");
    check_peaks("vit,gpt");
}

/* Invariant 5 for a frozen encoder without backward: its outputs waiting on a rank for chunk 0
 * are bounded by W*ceil(U/P). Rank 0's ViT forwards all moved to the front of its list (still
 * executable: they need only the image) leave M/P outputs waiting: refused, naming the ViT. */
TEST(verifier_bounds_frozen_outputs_waiting)
{
    struct bm_spec *s = load(variant("res.json", "vit"));
    if (!s) return;
    struct bm_plan_opts o;
    struct bm_err err;
    struct bm_table *t = NULL;
    struct bm_costs *t_c = NULL;
    bm_plan_opts_from_spec(&o, s);
    o.pp = 2, o.vpp = 1, o.microbatches = 16, o.backbone = BM_BB_1F1B, o.policy = BM_POL_BIGMAC, o.window = 3;
    o.unit = 0;
    CHECKF(bm_plan_build(s, &o, &t, &t_c, &err) == BM_OK, "%s", err.msg);
    if (!t) return;
    CHECK(t->window <= 3);
    CHECKF(bm_verify(t, &err) == BM_OK, "%s", err.msg);
    struct bm_rank_ops *ro = &t->ranks[0];
    int front = 0;
    for (int i = 0; i < ro->n_ops; i++)
        if (ro->ops[i].kind == BM_OP_COMPUTE && ro->ops[i].module == 0) {
            struct bm_op op = ro->ops[i];
            memmove(&ro->ops[front + 1], &ro->ops[front], (size_t)(i - front) * sizeof op);
            ro->ops[front++] = op;
        }
    CHECK(front == 8);
    CHECK(bm_verify(t, &err) == BM_ERR);
    CHECK_STR_CONTAINS(err.msg, "invariant 5 (residency)");
    CHECK_STR_CONTAINS(err.msg, "rank 0: frozen encoder vit (no backward) has 4 outputs waiting for their consumer");
    test_table_free(t), bm_costs_free(t_c), t_c = NULL;
    bm_spec_free(s);
}

/* calibrate: a frozen backbone's measured B is its input-gradient pass, bwd_ms - w_ms; the
 * calibrated cost is a whole backward whose B part is the measured median, with the table's
 * weight-gradient share. */
TEST(calibrate_frozen_backbone_input_gradient)
{
    struct bm_spec *s = load(variant("cal.json", "gpt"));
    struct bm_table *t = s ? plan(s, 2, 1, 0, BM_BB_1F1B, BM_POL_BIGMAC) : NULL;
    CHECK(t != NULL);
    if (!t) return;
    struct bm_comm *c = bm_comm_local_new(2);
    struct bm_train_opts o = {.quiet = 1};
    struct bm_exec *x[2] = {NULL, NULL};
    struct bm_err err;
    for (int r = 0; r < 2; r++) CHECK(bm_exec_new(s, t, r, c, &o, &x[r], &err) == BM_OK);
    CHECK(x[0] && x[1] && bm_exec_run_step(x, c, 0, &err) == BM_OK);
    const double *times[2], *mem[2];
    int n_mem[2], n;
    for (int r = 0; r < 2; r++) {
        times[r] = bm_exec_op_times(x[r], &n);
        mem[r] = bm_exec_mem_trace(x[r], &n_mem[r]);
    }
    struct bm_timeline *tl = NULL;
    CHECKF(bm_exec_timeline(t, test_costs(t), times, NULL, mem, n_mem, &tl, &err) == BM_OK, "%s", err.msg);
    if (tl) { /* synthetic: backbone chunk F = 1, B = 3 (each chunk; summed over the 2 chunks) */
        for (int r = 0; r < 2; r++)
            for (int k = 0; k < t->ranks[r].n_ops; k++) {
                const struct bm_op *op = &t->ranks[r].ops[k];
                if (op->kind != BM_OP_COMPUTE) continue;
                tl->ranks[r].ops[k].end_ms = tl->ranks[r].ops[k].start_ms + (op->pass == BM_PASS_F ? 1 : 3);
            }
        struct bm_cost costs[3];
        CHECKF(bm_calibrate(t, test_costs(t), tl, 0, costs, &err) == BM_OK, "%s", err.msg);
        int bb = t->backbone_module;
        double wf = bm_cost_w_ms(&test_costs(t)->modules[bb]) / test_costs(t)->modules[bb].bwd_ms;
        CHECK(wf > 0 && wf < 1);
        CHECK_NEAR(costs[bb].bwd_ms - costs[bb].w_ms, 6, 1e-9); /* 3 + 3 over the chunks */
        CHECK_NEAR(costs[bb].w_ms / costs[bb].bwd_ms, wf, 1e-9);
    }
    bm_timeline_free(tl);
    for (int r = 0; r < 2; r++) bm_exec_free(x[r]);
    c->ops->free(c);
    test_table_free(t);
    bm_spec_free(s);
}

int main(void)
{
    const char *tmp = getenv("TEST_TMP");
    snprintf(tmpdir, sizeof tmpdir, "%s/test_frozen.%d", tmp ? tmp : "/tmp", (int)getpid());
    char cmd[600];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", tmpdir);
    if (system(cmd)) return 1;
    RUN(spec_key_parses_and_errors_are_positioned);
    RUN(derived_backward_per_combination);
    RUN(every_policy_and_backbone_plans_frozen_work);
    RUN(table_round_trip_and_verifier_refuses_frozen_backward);
    RUN(frozen_vit_trains_like_the_reference);
    RUN(frozen_backbone_passes_gradients_to_the_encoder);
    RUN(frozen_vit_and_backbone_generator_trains);
    RUN(measured_peaks_equal_simulated);
    RUN(calibrate_frozen_backbone_input_gradient);
    RUN(verifier_bounds_frozen_outputs_waiting);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd)) return 1;
    return test_summary();
}
