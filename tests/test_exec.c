/* test_exec.c — the executor through the single-process transport (comm_local):
 * pipelined == reference (losses and parameters) for every policy and backbone at P = 2 and 4,
 * also with two encoders; measured peak activation bytes == the simulator's prediction given
 * the measured bytes (one and two encoders), cooperative deadlock detection, fault messages
 * naming rank and op, checkpoint + resume == uninterrupted, allocation failures reported
 * (never a crash), the comm_local mailbox. */
#include <math.h>
#include <unistd.h>

#include "calib/calib.h"
#include "exec/ckpt.h"
#include "exec/trace.h"
#include "exec/comm.h"
#include "exec/exec.h"
#include "test.h"
#include "train/train.h"
#include "util/util.h"

#define SPEC "tests/specs/exec-small.json"
#define SPEC_2ENC "tests/specs/exec-2enc.json" /* two encoders: chunk 0 takes both outputs */
#define SPEC_3GEN "tests/specs/exec-2gen.json" /* three generators, two with gradients to sum */
#define SPEC_RC "tests/specs/exec-recompute.json" /* exec-small, every module "recompute": "full" */

static char tmpdir[512];

static const char *tmp_path(const char *name)
{
    static char buf[8][1024];
    static int k;
    char *p = buf[k++ % 8];
    snprintf(p, 1024, "%s/%s", tmpdir, name);
    return p;
}

static struct bm_spec *load_spec_at(const char *path)
{
    struct bm_spec *s = NULL;
    struct bm_err err;
    if (bm_spec_load(path, &s, &err)) fprintf(stderr, "%s\n", err.msg);
    return s;
}

static struct bm_spec *load_spec(void) { return load_spec_at(SPEC); }

static struct bm_table *plan(const struct bm_spec *s, int P, int V, enum bm_backbone bb, enum bm_policy pol)
{
    struct bm_plan_opts o;
    struct bm_err err;
    struct bm_table *t = NULL;
    struct bm_costs *t_c = NULL;
    bm_plan_opts_from_spec(&o, s);
    o.pp = P, o.vpp = V, o.backbone = bb, o.policy = pol, o.unit = 0;
    if (bm_plan_build(s, &o, &t, &t_c, &err)) fprintf(stderr, "plan: %s\n", err.msg);
    else test_costs_adopt(t, t_c); /* the tests read it as test_costs(t) */
    return t;
}

/* Reference losses[steps] and flat parameters (spec order); caller frees params. */
static float *reference(const struct bm_spec *s, int steps, double *losses, size_t *n)
{
    struct bm_ref *r;
    struct bm_err err;
    if (bm_ref_new(s, &r, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return NULL;
    }
    for (int k = 0; k < steps; k++) {
        struct bm_step_stats st;
        if (bm_ref_step(r, k, &st, &err)) fprintf(stderr, "%s\n", err.msg);
        losses[k] = st.loss;
    }
    size_t total = 0, m;
    for (int i = 0; i < s->n_modules; i++) bm_ref_params(r, i, &m), total += m;
    float *p = bm_malloc(total * sizeof(float));
    size_t off = 0;
    for (int i = 0; i < s->n_modules; i++) {
        float *q = bm_ref_params(r, i, &m);
        memcpy(p + off, q, m * sizeof(float));
        off += m;
    }
    *n = total;
    bm_ref_free(r);
    return p;
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

static int train_local(const struct bm_spec *s, struct bm_table *t, struct bm_train_opts *o, struct bm_err *err)
{
    struct bm_comm *c = bm_comm_local_new(t->pp);
    int rc = bm_exec_train(s, t, NULL, c, o, err);
    c->ops->free(c);
    return rc;
}

struct pcfg {
    int P, V;
    enum bm_backbone bb;
};

/* Every (cfg, policy) run through comm_local matches the reference: per-step losses and final
 * parameters within 1e-4 relative. */
static void check_matches_reference(const char *path, const struct pcfg *cfg, size_t n_cfg,
                                    const enum bm_policy *pols, size_t n_pols)
{
    struct bm_spec *s = load_spec_at(path);
    CHECKF(s != NULL, "%s", path);
    if (!s) return;
    enum { STEPS = 3 };
    double ref_loss[STEPS];
    size_t nref = 0;
    float *ref = reference(s, STEPS, ref_loss, &nref);
    CHECK(ref != NULL);
    for (size_t ci = 0; ci < n_cfg; ci++)
        for (size_t pi = 0; pi < n_pols; pi++) {
            struct bm_table *t = plan(s, cfg[ci].P, cfg[ci].V, cfg[ci].bb, pols[pi]);
            CHECKF(t != NULL, "%s P=%d %s %s", path, cfg[ci].P, bm_backbone_name(cfg[ci].bb), bm_policy_name(pols[pi]));
            if (!t) continue;
            double loss[STEPS] = {0};
            struct bm_train_opts o = {.quiet = 1, .steps = STEPS, .dump_params = tmp_path("params.bin"), .loss_out = loss};
            struct bm_err err;
            int rc = train_local(s, t, &o, &err);
            CHECKF(rc == BM_OK, "%s", err.msg);
            for (int k = 0; k < STEPS; k++)
                CHECKF(fabs(loss[k] - ref_loss[k]) <= 1e-4 * fabs(ref_loss[k]), "%s P=%d %s %s step %d: %.7f vs %.7f",
                       path, cfg[ci].P, bm_backbone_name(cfg[ci].bb), bm_policy_name(pols[pi]), k, loss[k], ref_loss[k]);
            size_t n = 0;
            float *p = read_floats(tmp_path("params.bin"), &n);
            CHECK(p && n == nref);
            if (p && n == nref) {
                double md = 0, ma = 0;
                for (size_t i = 0; i < n; i++) {
                    double d = fabs((double)p[i] - ref[i]);
                    if (d > md) md = d;
                    if (fabs(ref[i]) > ma) ma = fabs(ref[i]);
                }
                CHECKF(md <= 1e-4 * ma, "%s P=%d %s %s: params differ by %g (max |p| %g)", path, cfg[ci].P,
                       bm_backbone_name(cfg[ci].bb), bm_policy_name(pols[pi]), md, ma);
            }
            bm_free(p);
            test_table_free(t);
        }
    bm_free(ref);
    bm_spec_free(s);
}

TEST(local_matches_reference_every_policy)
{
    struct pcfg cfg[] = {{2, 1, BM_BB_1F1B}, {4, 1, BM_BB_1F1B}, {2, 2, BM_BB_INTERLEAVED}, {2, 1, BM_BB_GPIPE}};
    enum bm_policy pols[] = {BM_POL_BIGMAC, BM_POL_OPTIMUS, BM_POL_UNIFIED, BM_POL_UNIFIED_BALANCED, BM_POL_IDEAL};
    check_matches_reference(SPEC, cfg, sizeof cfg / sizeof cfg[0], pols, sizeof pols / sizeof pols[0]);
}

/* Zero-bubble backbones: the backbone's backward split into B (input gradients, keeping what W
 * needs) and W (weight gradients) gives the reference's losses and parameters. */
TEST(zero_bubble_matches_reference)
{
    struct pcfg cfg[] = {{2, 1, BM_BB_ZB_H1}, {4, 1, BM_BB_ZB_H1}, {2, 2, BM_BB_ZB_INTERLEAVED}};
    enum bm_policy pols[] = {BM_POL_BIGMAC, BM_POL_OPTIMUS, BM_POL_UNIFIED};
    check_matches_reference(SPEC, cfg, sizeof cfg / sizeof cfg[0], pols, sizeof pols / sizeof pols[0]);
    /* P = 4, V = 2 needs 8 backbone chunks: the same model with 8 layers */
    struct bm_err err;
    size_t len = 0;
    char *text = bm_read_file(SPEC, &len, &err), *q;
    CHECK(text != NULL);
    if (!text) return;
    while ((q = strstr(text, "\"layers\": 4"))) q[10] = '8';
    FILE *f = fopen(tmp_path("exec-8l.json"), "w");
    CHECK(f && fputs(text, f) >= 0);
    if (f) fclose(f);
    bm_free(text);
    struct pcfg cfg8[] = {{4, 2, BM_BB_ZB_INTERLEAVED}};
    check_matches_reference(tmp_path("exec-8l.json"), cfg8, 1, pols, sizeof pols / sizeof pols[0]);
}

/* A table asking W of a module whose impl cannot split its backward (vit) is refused before
 * training, naming the module and op. */
TEST(w_of_a_module_that_cannot_split_is_refused)
{
    struct bm_spec *s = load_spec();
    if (!s) return;
    struct bm_table *t = plan(s, 2, 1, BM_BB_ZB_H1, BM_POL_BIGMAC);
    CHECK(t != NULL);
    if (!t) {
        bm_spec_free(s);
        return;
    }
    int vit = bm_table_find_module(t, "vit");
    for (int r = 0; r < 2; r++) /* a W right after every vit B */
        for (int i = 0; i < t->ranks[r].n_ops; i++) {
            struct bm_op op = t->ranks[r].ops[i];
            if (op.kind != BM_OP_COMPUTE || op.module != vit || op.pass != BM_PASS_B) continue;
            struct bm_err e;
            op.pass = BM_PASS_W;
            CHECK(bm_table_push(t, r, op, &e) == BM_OK);
            struct bm_rank_ops *ro = &t->ranks[r];
            memmove(&ro->ops[i + 2], &ro->ops[i + 1], (size_t)(ro->n_ops - i - 2) * sizeof *ro->ops);
            ro->ops[i + 1] = op;
            i++;
        }
    struct bm_err err;
    CHECK(bm_verify(t, &err) == BM_OK); /* a valid table; only the executor cannot run it */
    struct bm_train_opts o = {.quiet = 1, .steps = 1};
    CHECK(train_local(s, t, &o, &err) == BM_ERR);
    CHECK_STR_CONTAINS(err.msg, "module \"vit\" (impl \"vit\") cannot split its backward into B and W");
    CHECK_STR_CONTAINS(err.msg, "vit:B mb");
    test_table_free(t);
    bm_spec_free(s);
}

/* Two encoders: chunk 0's input is both towers' outputs concatenated in spec module order (the
 * spec lists them in the other order in the backbone's "consumes"), its input gradient split
 * back; every replica, every chunk and the losses equal the reference's. */
TEST(two_encoders_match_reference)
{
    struct pcfg cfg[] = {{2, 1, BM_BB_1F1B}, {4, 1, BM_BB_1F1B}, {2, 2, BM_BB_INTERLEAVED}};
    enum bm_policy pols[] = {BM_POL_BIGMAC, BM_POL_OPTIMUS, BM_POL_UNIFIED};
    check_matches_reference(SPEC_2ENC, cfg, sizeof cfg / sizeof cfg[0], pols, sizeof pols / sizeof pols[0]);
}

/* Several generators on the backbone's hidden states: the last chunk's backward sums one
 * gradient tensor per generator that sends one (grad:hidden@<generator>). */
TEST(three_generators_match_reference)
{
    struct pcfg cfg[] = {{2, 1, BM_BB_1F1B}, {2, 2, BM_BB_INTERLEAVED}};
    enum bm_policy pols[] = {BM_POL_BIGMAC, BM_POL_OPTIMUS, BM_POL_UNIFIED};
    check_matches_reference(SPEC_3GEN, cfg, sizeof cfg / sizeof cfg[0], pols, sizeof pols / sizeof pols[0]);
}

/* Build the P local ranks of t. */
static struct bm_exec **build(const struct bm_spec *s, struct bm_table *t, struct bm_comm *c, const struct bm_train_opts *o)
{
    struct bm_exec **x = bm_calloc((size_t)t->pp, sizeof *x);
    struct bm_err err;
    for (int r = 0; r < t->pp; r++)
        if (bm_exec_new(s, t, r, c, o, &x[r], &err)) fprintf(stderr, "%s\n", err.msg);
    return x;
}

static void unbuild(struct bm_exec **x, int P)
{
    for (int r = 0; r < P; r++) bm_exec_free(x[r]);
    bm_free(x);
}

/* The simulator, given the executor's measured ctx bytes per (module, chunk, mb), predicts the
 * executor's measured peak activation bytes per rank and role exactly (same byte model); with two
 * encoders both count as role "encoder". */
static void check_peaks_equal_simulated(const char *path)
{
    struct bm_spec *s = load_spec_at(path);
    CHECKF(s != NULL, "%s", path);
    if (!s) return;
    enum bm_policy pols[] = {BM_POL_BIGMAC, BM_POL_OPTIMUS, BM_POL_UNIFIED};
    for (int pi = 0; pi < 3; pi++)
        for (int bi = 0; bi < 4; bi++) { /* 1f1b, interleaved, zb-h1, zb-interleaved */
            static const enum bm_backbone bbs[4] = {BM_BB_1F1B, BM_BB_INTERLEAVED, BM_BB_ZB_H1, BM_BB_ZB_INTERLEAVED};
            int V = bi % 2 ? 2 : 1;
            struct bm_table *t = plan(s, 2, V, bbs[bi], pols[pi]);
            if (!t) continue;
            struct bm_comm *c = bm_comm_local_new(2);
            struct bm_train_opts o = {.quiet = 1};
            struct bm_exec **x = build(s, t, c, &o);
            struct bm_err err;
            int rc = bm_exec_run_step(x, c, 0, &err);
            CHECKF(rc == BM_OK, "%s", err.msg);
            int C = t->pp * t->vpp, M = t->microbatches;
            test_costs(t)->act_bytes = bm_calloc((size_t)t->n_modules * C * M, sizeof(double));
            test_costs(t)->in_bytes = bm_calloc((size_t)t->n_modules * C * M, sizeof(double));
            if (bi >= 2) test_costs(t)->act_w_bytes = bm_calloc((size_t)t->n_modules * C * M, sizeof(double));
            for (int r = 0; r < 2; r++) {
                const size_t *b = bm_exec_op_bytes(x[r]), *ib = bm_exec_op_in_bytes(x[r]);
                for (int k = 0; k < t->ranks[r].n_ops; k++) {
                    const struct bm_op *op = &t->ranks[r].ops[k];
                    size_t at = ((size_t)op->module * C + (op->chunk >= 0 ? op->chunk : 0)) * M + op->mb;
                    if (op->kind != BM_OP_COMPUTE) continue;
                    if (op->pass == BM_PASS_F) {
                        CHECK(b[k] > 0);
                        test_costs(t)->act_bytes[at] = (double)b[k];
                        test_costs(t)->in_bytes[at] = (double)ib[k];
                        /* a recomputed forward keeps exactly its input: in_count floats (encoders: none) */
                        if (!t->modules[op->module].recompute) CHECK(ib[k] == 0);
                        else if (t->modules[op->module].role == BM_ROLE_ENCODER) CHECK(ib[k] == 0);
                        else CHECK(ib[k] > 0 && ib[k] < b[k]);
                    } else if (op->pass == BM_PASS_B && bm_table_splits(t, op->module)) {
                        CHECK(b[k] > 0); /* what the split B kept for W */
                        test_costs(t)->act_w_bytes[at] = (double)b[k];
                    }
                }
            }
            struct bm_timeline *tl = NULL;
            rc = bm_simulate(t, test_costs(t), NULL, &tl, &err);
            CHECKF(rc == BM_OK, "%s", err.msg);
            for (int r = 0; tl && r < 2; r++) {
                struct bm_exec_rank_stats st;
                bm_exec_stats(x[r], &st);
                for (int role = 0; role < BM_N_ROLES; role++)
                    CHECKF(tl->ranks[r].peak_act_mib[role] * 1048576.0 == (double)st.peak_act[role],
                           "%s %s %s rank %d role %d: simulated %.0f bytes, measured %zu", path,
                           bm_policy_name(pols[pi]), bm_backbone_name(bbs[bi]), r, role,
                           tl->ranks[r].peak_act_mib[role] * 1048576.0, st.peak_act[role]);
            }
            bm_timeline_free(tl);
            unbuild(x, 2);
            c->ops->free(c);
            test_table_free(t);
        }
    bm_spec_free(s);
}

TEST(measured_peaks_equal_simulated_with_measured_bytes)
{
    check_peaks_equal_simulated(SPEC);
    check_peaks_equal_simulated(SPEC_2ENC);
    check_peaks_equal_simulated(SPEC_3GEN);
    check_peaks_equal_simulated(SPEC_RC);
}

/* Recomputation changes no number the model computes: every module recomputed trains equal to
 * the (non-recomputing) reference. */
TEST(recompute_matches_reference)
{
    struct pcfg cfg[] = {{2, 1, BM_BB_1F1B}, {2, 2, BM_BB_INTERLEAVED}};
    enum bm_policy pols[] = {BM_POL_BIGMAC, BM_POL_OPTIMUS, BM_POL_UNIFIED};
    check_matches_reference(SPEC_RC, cfg, sizeof cfg / sizeof cfg[0], pols, sizeof pols / sizeof pols[0]);
}

/* ... and holds less: at M = 8 (optimus keeps every encoder forward) the measured backbone and
 * encoder peaks of the recomputed spec are below the plain one's. */
TEST(recompute_measured_peaks_fall)
{
    double pk[2][2 * BM_N_ROLES];
    const char *paths[2] = {SPEC, SPEC_RC};
    for (int k = 0; k < 2; k++) {
        memset(pk[k], 0, sizeof pk[k]);
        struct bm_spec *s = load_spec_at(paths[k]);
        if (!s) return;
        s->microbatches = 8;
        struct bm_table *t = plan(s, 2, 1, BM_BB_1F1B, BM_POL_OPTIMUS);
        struct bm_train_opts o = {.quiet = 1, .steps = 1, .peak_out = pk[k]};
        struct bm_err err;
        CHECKF(t && train_local(s, t, &o, &err) == BM_OK, "%s", err.msg);
        test_table_free(t);
        bm_spec_free(s);
    }
    for (int role = 0; role < 2; role++) /* encoder, backbone on rank 0 */
        CHECKF(pk[1][role] < pk[0][role], "role %d: recomputed %g, plain %g", role, pk[1][role], pk[0][role]);
}

/* bigmac keeps encoder activations bounded as M grows; optimus holds every microbatch's. */
TEST(bigmac_encoder_peak_flat_in_M_optimus_grows)
{
    struct bm_spec *s = load_spec();
    if (!s) return;
    double peak[2][3];
    int Ms[3] = {4, 8, 16};
    for (int pi = 0; pi < 2; pi++)
        for (int mi = 0; mi < 3; mi++) {
            s->microbatches = Ms[mi];
            struct bm_table *t = plan(s, 2, 1, BM_BB_1F1B, pi ? BM_POL_OPTIMUS : BM_POL_BIGMAC);
            if (!t) continue;
            double pk[2 * BM_N_ROLES] = {0};
            struct bm_train_opts o = {.quiet = 1, .steps = 1, .peak_out = pk};
            struct bm_err err;
            CHECKF(train_local(s, t, &o, &err) == BM_OK, "%s", err.msg);
            peak[pi][mi] = BM_MAX(pk[BM_ROLE_ENCODER], pk[BM_N_ROLES + BM_ROLE_ENCODER]);
            test_table_free(t);
        }
    /* data differ per M (image counts vary), so "flat" = within the spread of one microbatch's size */
    CHECKF(peak[0][2] < 2 * peak[0][0], "bigmac encoder peak %g -> %g", peak[0][0], peak[0][2]);
    CHECKF(peak[1][2] > 2.5 * peak[1][0], "optimus encoder peak %g -> %g", peak[1][0], peak[1][2]);
    CHECKF(peak[1][2] > 2 * peak[0][2], "M=16: optimus %g vs bigmac %g", peak[1][2], peak[0][2]);
    bm_spec_free(s);
}

/* The test spec planned at P = 2 (1F1B, bigmac) and one step of it run over comm_local: the
 * measured times and memory traces of x[0..1] are the tests' input. 1 (nothing to free) when the
 * spec or the plan does not load. */
struct stepped {
    struct bm_spec *s;
    struct bm_table *t;
    struct bm_comm *c;
    struct bm_exec **x;
};

static int step_once(struct stepped *st)
{
    *st = (struct stepped){NULL, NULL, NULL, NULL};
    if (!(st->s = load_spec())) return 1;
    if (!(st->t = plan(st->s, 2, 1, BM_BB_1F1B, BM_POL_BIGMAC))) {
        bm_spec_free(st->s);
        return 1;
    }
    st->c = bm_comm_local_new(2);
    struct bm_train_opts o = {.quiet = 1};
    st->x = build(st->s, st->t, st->c, &o);
    struct bm_err err;
    CHECK(bm_exec_run_step(st->x, st->c, 0, &err) == BM_OK);
    return 0;
}

static void stepped_free(struct stepped *st)
{
    unbuild(st->x, 2);
    st->c->ops->free(st->c);
    test_table_free(st->t);
    bm_spec_free(st->s);
}

/* A measured step whose clock-offset estimate puts one rank's first events before rank 0's
 * origin (seen under load: -0.42 ms): the timeline starts at its earliest event instead, every
 * time moved by the same amount, so the trace is written (its loader refuses negative times). */
TEST(measured_times_before_the_origin_move_together)
{
    struct stepped st;
    if (step_once(&st)) return;
    struct bm_table *t = st.t;
    struct bm_exec **x = st.x;
    struct bm_err err;
    const double *times[2], *mem[2];
    double *early[2] = {NULL, NULL}, *mem_early[2] = {NULL, NULL};
    int n_mem[2], n;
    for (int r = 0; r < 2; r++) {
        const double *tm = bm_exec_op_times(x[r], &n), *mm = bm_exec_mem_trace(x[r], &n_mem[r]);
        early[r] = bm_malloc((size_t)(3 * n + 1) * sizeof(double));
        mem_early[r] = bm_malloc((size_t)(4 * n_mem[r] + 1) * sizeof(double));
        if (!early[r] || !mem_early[r]) goto out;
        /* rank 1's clock 2 ms behind: its times 2 ms earlier than measured */
        for (int k = 0; k < 3 * n; k++) early[r][k] = tm[k] - (r == 1 ? 2.0 : 0);
        for (int i = 0; i < 4 * n_mem[r]; i++) mem_early[r][i] = mm[i] - (r == 1 && i % 4 == 0 ? 2.0 : 0);
        times[r] = early[r], mem[r] = mem_early[r];
    }
    double lead = 0;
    for (int r = 0; r < 2; r++) {
        for (int k = 0; k < 3 * t->ranks[r].n_ops; k++) lead = times[r][k] < lead ? times[r][k] : lead;
        for (int i = 0; i < n_mem[r]; i++) lead = mem[r][4 * i] < lead ? mem[r][4 * i] : lead;
    }
    CHECK(lead < 0);
    struct bm_timeline *tl = NULL;
    CHECKF(bm_exec_timeline(t, test_costs(t), times, NULL, mem, n_mem, &tl, &err) == BM_OK, "%s", err.msg);
    if (tl) {
        double first = 1e30;
        int moved = 1;
        for (int r = 0; r < 2; r++)
            for (int k = 0; k < t->ranks[r].n_ops; k++) {
                const struct bm_op_time *ot = &tl->ranks[r].ops[k];
                first = ot->start_ms < first ? ot->start_ms : first;
                first = ot->ready_ms < first ? ot->ready_ms : first;
                moved &= fabs(ot->start_ms - (times[r][3 * k] - lead)) < 1e-12 &&
                         fabs(ot->end_ms - (times[r][3 * k + 1] - lead)) < 1e-12;
            }
        for (int r = 0; r < 2; r++)
            for (int i = 0; i < tl->ranks[r].n_mem; i++)
                first = tl->ranks[r].mem[i].t_ms < first ? tl->ranks[r].mem[i].t_ms : first;
        CHECK(moved);
        CHECK_NEAR(first, 0, 1e-12); /* the earliest event, op or memory point, at 0 */
        CHECK(tl->ranks[1].n_mem == 0 || tl->ranks[1].mem[0].t_ms >= 0);
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        CHECK(f && bm_render_trace(t, test_costs(t), tl, f) == BM_OK);
        if (f) fclose(f);
        free(buf);
    }
    bm_timeline_free(tl);
out:
    for (int r = 0; r < 2; r++) bm_free(early[r]), bm_free(mem_early[r]);
    stepped_free(&st);
}

/* Calibration produces a cost model and leaves the table alone (issue 26): a measured step of
 * the P = 2 plan written as a trace and calibrated (bm_calibration_build) gives the plan's
 * schedule back (its ops) with the plan's own costs (as the file writes them), and a cost
 * model (c.model) holding exactly the calibrated figures (module costs, encoder scales,
 * dispatch, link latency) with the plan's chunk weights and device, which simulates the plan. */
TEST(calibration_makes_a_cost_model_not_a_table)
{
    struct stepped st;
    if (step_once(&st)) return;
    struct bm_table *t = st.t;
    const struct bm_costs *k = test_costs(t);
    struct bm_err err;
    const double *times[2], *mem[2], *msg[2];
    int n_mem[2], n;
    for (int r = 0; r < 2; r++) {
        times[r] = bm_exec_op_times(st.x[r], &n);
        mem[r] = bm_exec_mem_trace(st.x[r], &n_mem[r]);
        msg[r] = bm_exec_msg_bytes(st.x[r]);
    }
    struct bm_timeline *tl = NULL;
    char path[] = "/tmp/bigmac_calib_model_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd >= 0) close(fd);
    CHECKF(bm_exec_timeline(t, k, times, msg, mem, n_mem, &tl, &err) == BM_OK, "%s", err.msg);
    CHECKF(tl && bm_exec_trace_write(t, k, tl, path, &err) == BM_OK, "%s", err.msg);
    struct bm_calibration c;
    const char *paths[1] = {path};
    CHECKF(bm_calibration_build(paths, 1, NULL, &c, &err) == BM_OK, "%s", err.msg);
    if (c.model) {
        const struct bm_table *u = c.t[0];
        CHECK(u->pp == t->pp && u->n_modules == t->n_modules && bm_table_n_ops(u) == bm_table_n_ops(t));
        for (int m = 0; m < t->n_modules; m++) { /* the trace carries the plan's costs, unpatched */
            const struct bm_cost *a = &c.k[0]->modules[m], *b = &k->modules[m];
            CHECK_NEAR(a->fwd_ms, b->fwd_ms, 1e-9 * b->fwd_ms);
            CHECK_NEAR(a->bwd_ms, b->bwd_ms, 1e-9 * b->bwd_ms);
            CHECK_NEAR(a->act_mib, b->act_mib, 1e-9 * b->act_mib);
            CHECK_NEAR(a->out_mib, b->out_mib, 1e-9 * b->out_mib);
            CHECK(!memcmp(&c.model->modules[m], &c.cal.costs[m], sizeof c.cal.costs[m]));
        }
        for (int ch = 0; ch < t->pp * t->vpp; ch++)
            CHECK_NEAR(c.model->chunk_weights[ch], k->chunk_weights[ch], 1e-12);
        for (int mb = 0; c.cal.mb_scale && mb < t->microbatches; mb++)
            CHECK(c.model->mb_scale[mb] == c.cal.mb_scale[mb]);
        CHECK(c.model->op_overhead_ms == c.cal.op_overhead_us / 1000.0);
        CHECK(c.model->recv_overhead_ms == c.cal.recv_overhead_us / 1000.0);
        CHECK(c.model->step_lead_ms == c.cal.step_lead_us / 1000.0);
        CHECK(c.model->device.link_latency_us ==
              (c.cal.have_link_latency ? c.cal.link_latency_us : k->device.link_latency_us));
        CHECK_NEAR(c.model->device.memory_gib, k->device.memory_gib, 1e-9);
        struct bm_timeline *sim = NULL;
        CHECKF(bm_simulate(u, c.model, NULL, &sim, &err) == BM_OK, "%s", err.msg);
        CHECK(sim && sim->makespan_ms > 0);
        bm_timeline_free(sim);
    } else {
        CHECK(c.model != NULL);
    }
    bm_calibration_free(&c);
    bm_timeline_free(tl);
    unlink(path);
    stepped_free(&st);
}

/* calibrate: medians of the op durations (backbone: summed over chunks), act_mib from the memory
 * trace's increases == the measured ctx bytes per microbatch. */
TEST(calibrate_from_measured_timeline)
{
    struct stepped st;
    if (step_once(&st)) return;
    struct bm_table *t = st.t;
    struct bm_exec **x = st.x;
    struct bm_err err;
    const double *times[2], *mem[2];
    int n_mem[2], n;
    double bytes[BM_N_ROLES] = {0};
    for (int r = 0; r < 2; r++) {
        times[r] = bm_exec_op_times(x[r], &n);
        mem[r] = bm_exec_mem_trace(x[r], &n_mem[r]);
        const size_t *b = bm_exec_op_bytes(x[r]);
        for (int k = 0; k < t->ranks[r].n_ops; k++) bytes[t->modules[t->ranks[r].ops[k].module < 0 ? 0 : t->ranks[r].ops[k].module].role] += b[k];
    }
    struct bm_timeline *tl = NULL;
    CHECKF(bm_exec_timeline(t, test_costs(t), times, NULL, mem, n_mem, &tl, &err) == BM_OK, "%s", err.msg);
    if (tl) {
        CHECK(tl->measured && tl->makespan_ms > 0);
        /* synthetic durations: encoder F = 1 + mb (median 2.5 for mbs 0..3; mean would be the
         * same, so make mb 3 an outlier: 100), backbone chunk c F = 0.5 + c, B = 2 */
        for (int r = 0; r < 2; r++)
            for (int k = 0; k < t->ranks[r].n_ops; k++) {
                const struct bm_op *op = &t->ranks[r].ops[k];
                struct bm_op_time *ot = &tl->ranks[r].ops[k];
                if (op->kind != BM_OP_COMPUTE) continue;
                double d = op->module == t->backbone_module ? (op->pass == BM_PASS_F ? 0.5 + op->chunk : 2)
                                                            : (op->pass == BM_PASS_F ? (op->mb == 3 ? 100 : 1 + op->mb) : 3);
                ot->end_ms = ot->start_ms + d;
            }
        struct bm_cost costs[3];
        CHECKF(bm_calibrate(t, test_costs(t), tl, 0, costs, &err) == BM_OK, "%s", err.msg);
        int enc = bm_table_find_module(t, "vit"), bb = t->backbone_module;
        CHECK_NEAR(costs[enc].fwd_ms, 2.5, 1e-9); /* median of 1, 2, 3, 100 */
        CHECK_NEAR(costs[enc].bwd_ms, 3, 1e-9);
        CHECK_NEAR(costs[bb].fwd_ms, 0.5 + 1.5, 1e-9); /* chunk 0 + chunk 1 */
        CHECK_NEAR(costs[bb].bwd_ms, 4, 1e-9);
        CHECKF(bm_calibrate(t, test_costs(t), tl, 1, costs, &err) == BM_OK, "%s", err.msg);
        CHECK_NEAR(costs[enc].fwd_ms, (1 + 2 + 3 + 100) / 4.0, 1e-9); /* the mean takes the outlier */
        CHECK_NEAR(costs[bb].fwd_ms, 2, 1e-9);
        for (int m = 0; m < 3; m++) {
            int role = t->modules[m].role;
            CHECK_NEAR(costs[m].act_mib * t->microbatches * 1048576.0, bytes[role], 0.5);
        }
        /* Two runs pooled: a copy of the timeline with every encoder F 10 ms longer. The median
         * of the 8 pooled durations 1 2 3 11 12 13 100 110 is (11 + 12) / 2, the mean 252 / 8;
         * the bytes stay (both runs hold the same). */
        struct bm_timeline *tl2 = NULL;
        CHECKF(bm_exec_timeline(t, test_costs(t), times, NULL, mem, n_mem, &tl2, &err) == BM_OK, "%s", err.msg);
        if (tl2) {
            for (int r = 0; r < 2; r++)
                for (int k = 0; k < t->ranks[r].n_ops; k++) {
                    tl2->ranks[r].ops[k] = tl->ranks[r].ops[k];
                    const struct bm_op *op = &t->ranks[r].ops[k];
                    if (op->kind == BM_OP_COMPUTE && op->module == enc && op->pass == BM_PASS_F)
                        tl2->ranks[r].ops[k].end_ms += 10;
                }
            const struct bm_timeline *runs[2] = {tl, tl2};
            CHECKF(bm_calibrate_runs(t, test_costs(t), runs, 2, 0, costs, &err) == BM_OK, "%s", err.msg);
            CHECK_NEAR(costs[enc].fwd_ms, 11.5, 1e-9);
            CHECK_NEAR(costs[bb].fwd_ms, 2, 1e-9);
            CHECKF(bm_calibrate_runs(t, test_costs(t), runs, 2, 1, costs, &err) == BM_OK, "%s", err.msg);
            CHECK_NEAR(costs[enc].fwd_ms, 252 / 8.0, 1e-9);
            for (int m = 0; m < 3; m++)
                CHECK_NEAR(costs[m].act_mib * t->microbatches * 1048576.0, bytes[t->modules[m].role], 0.5);
            CHECK(bm_calibrate_same_table(t, t));
        }
        bm_timeline_free(tl2);
    }
    bm_timeline_free(tl);
    stepped_free(&st);
}

/* Ranks that run at different speeds: a table planned with device.rank_time_scale [1, 2] and
 * simulated stands in for a measured run. Calibrating it gives module costs that are means over
 * both ranks, which alone mispredict (rank 1 is the slow one); with the calibrated per-rank
 * scale the same ops take exactly their "measured" durations again, so the makespan returns. */
TEST(calibrated_rank_scale_reproduces_uneven_ranks)
{
    static const char *text =
        "{\"format\": \"bigmac-spec\", \"version\": 1, \"name\": \"uneven\",\n"
        " \"device\": {\"link_latency_us\": 0, \"rank_time_scale\": [1, 2]},\n"
        " \"parallel\": {\"pp\": 2, \"vpp\": 2, \"microbatches\": 4},\n"
        " \"schedule\": {\"backbone\": \"interleaved\", \"policy\": \"bigmac\"},\n"
        " \"inputs\": [\"image\", \"text\"],\n"
        " \"modules\": [\n"
        "  {\"name\": \"vit\", \"consumes\": [\"image\"], \"produces\": [\"v\"],\n"
        "   \"cost\": {\"fwd_ms\": 1, \"bwd_ms\": 2, \"out_mib\": 0}},\n"
        "  {\"name\": \"llm\", \"consumes\": [\"text\", \"v\"], \"produces\": [\"h\"],\n"
        "   \"cost\": {\"fwd_ms\": 8, \"bwd_ms\": 16, \"out_mib\": 0}}]}\n";
    struct bm_spec *s = NULL;
    struct bm_err err;
    CHECKF(bm_spec_parse(text, "uneven.json", &s, &err) == BM_OK, "%s", err.msg);
    if (!s) return;
    struct bm_plan_opts o;
    bm_plan_opts_from_spec(&o, s);
    struct bm_table *t = NULL;
    struct bm_costs *t_c = NULL;
    struct bm_timeline *run = NULL, *mean_only = NULL, *scaled = NULL;
    CHECKF(bm_plan_build(s, &o, &t, &t_c, &err) == BM_OK, "%s", err.msg);
    if (t) CHECK(bm_simulate(t, t_c, NULL, &run, &err) == BM_OK);
    if (run) {
        struct bm_cost costs[2];
        double rs[2];
        const struct bm_timeline *runs[1] = {run};
        CHECKF(bm_calibrate_runs(t, t_c, runs, 1, 1, costs, &err) == BM_OK, "%s", err.msg);
        bm_calibrate_rank_scale(t, t_c, runs, 1, costs, rs);
        CHECK_NEAR(rs[1] / rs[0], 2, 1e-9);
        for (int m = 0; m < 2; m++) t_c->modules[m] = costs[m];
        double *keep = t_c->rank_time_scale;
        t_c->rank_time_scale = NULL; /* module means alone */
        CHECK(bm_simulate(t, t_c, NULL, &mean_only, &err) == BM_OK);
        t_c->rank_time_scale = rs;
        CHECK(bm_simulate(t, t_c, NULL, &scaled, &err) == BM_OK);
        t_c->rank_time_scale = keep;
        if (mean_only && scaled) {
            printf("  makespan %.3f ms; from mean costs %.3f, with the rank scale (%.3f, %.3f) %.3f\n",
                   run->makespan_ms, mean_only->makespan_ms, rs[0], rs[1], scaled->makespan_ms);
            CHECK_NEAR(scaled->makespan_ms, run->makespan_ms, 1e-9);
            CHECK(mean_only->makespan_ms < run->makespan_ms - 1);
            for (int r = 0; r < 2; r++) CHECK_NEAR(scaled->ranks[r].busy_ms, run->ranks[r].busy_ms, 1e-9);
        }
    }
    bm_timeline_free(run);
    bm_timeline_free(mean_only);
    bm_timeline_free(scaled);
    test_table_free(t), bm_costs_free(t_c), t_c = NULL;
    bm_spec_free(s);
}

TEST(malformed_table_is_an_error_not_a_crash)
{
    struct bm_spec *s = load_spec();
    if (!s) return;
    struct bm_table *t = plan(s, 2, 1, BM_BB_1F1B, BM_POL_BIGMAC);
    if (!t) return;
    struct bm_train_opts o = {.quiet = 1, .steps = 1};
    struct bm_err err;
    struct { int field, value; const char *want; } cases[] = {
        {0, 99, "its chunk must be -1 (got 99)"}, {0, -5, "its chunk must be -1 (got -5)"},
        {1, 77, "mb 77 is out of range 0..3"}, {2, 9, "peer 9 is not a rank 0..1"},
        {3, 9999, "tensor index 9999 is out of range"}}; /* the one validator's words (src/table/check.c) */
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct bm_rank_ops *ro = &t->ranks[1];
        int k = 0, want_comm = cases[i].field >= 2;
        while (k < ro->n_ops && (ro->ops[k].kind == BM_OP_COMPUTE) == want_comm) k++;
        if (k == ro->n_ops) continue;
        struct bm_op saved = ro->ops[k];
        if (cases[i].field == 0) ro->ops[k].chunk = cases[i].value;
        else if (cases[i].field == 1) ro->ops[k].mb = cases[i].value;
        else if (cases[i].field == 2) ro->ops[k].peer = cases[i].value;
        else ro->ops[k].tensor = cases[i].value;
        err.msg[0] = 0;
        CHECK(train_local(s, t, &o, &err) == BM_ERR);
        char want[64];
        snprintf(want, sizeof want, "rank 1: op #%d ", k);
        CHECK_STR_CONTAINS(err.msg, want);
        CHECK_STR_CONTAINS(err.msg, cases[i].want);
        ro->ops[k] = saved;
    }
    test_table_free(t);
    bm_spec_free(s);
}

TEST(deadlock_is_reported_not_hung)
{
    struct bm_spec *s = load_spec();
    if (!s) return;
    struct bm_table *t = plan(s, 2, 1, BM_BB_1F1B, BM_POL_BIGMAC);
    if (!t) return;
    /* drop rank 0's first send: its receiver can never finish */
    struct bm_rank_ops *ro = &t->ranks[0];
    for (int k = 0; k < ro->n_ops; k++)
        if (ro->ops[k].kind == BM_OP_SEND) {
            memmove(&ro->ops[k], &ro->ops[k + 1], (size_t)(ro->n_ops - k - 1) * sizeof *ro->ops);
            ro->n_ops--;
            break;
        }
    struct bm_train_opts o = {.quiet = 1, .steps = 1};
    struct bm_err err;
    err.msg[0] = 0;
    CHECK(train_local(s, t, &o, &err) == BM_ERR);
    CHECK_STR_CONTAINS(err.msg, "deadlock");
    test_table_free(t);
    bm_spec_free(s);
}

TEST(nan_fault_names_rank_and_op)
{
    struct bm_spec *s = load_spec();
    if (!s) return;
    struct bm_table *t = plan(s, 2, 1, BM_BB_1F1B, BM_POL_BIGMAC);
    if (!t) return;
    int k = 0; /* rank 1's first compute op */
    while (t->ranks[1].ops[k].kind != BM_OP_COMPUTE) k++;
    struct bm_train_opts o = {.quiet = 1, .steps = 2, .fault = BM_TRAIN_FAULT_NAN, .fault_rank = 1, .fault_op = k, .fault_step = 1};
    struct bm_err err;
    CHECK(train_local(s, t, &o, &err) == BM_ERR);
    char want[64];
    snprintf(want, sizeof want, "rank 1: op #%d ", k);
    CHECK_STR_CONTAINS(err.msg, want);
    CHECK_STR_CONTAINS(err.msg, "not finite");
    /* the last chunk's forward carries the LM loss: poisoning it is reported as a NaN loss when it
     * has no output of its own to poison; here every F has an output, so "not finite" it is */
    test_table_free(t);
    bm_spec_free(s);
}

TEST(checkpoint_resume_equals_uninterrupted)
{
    struct bm_spec *s = load_spec();
    if (!s) return;
    struct bm_table *t = plan(s, 2, 1, BM_BB_1F1B, BM_POL_BIGMAC);
    if (!t) return;
    double full[4] = {0}, part[4] = {0};
    struct bm_err err;
    struct bm_train_opts o = {.quiet = 1, .steps = 4, .loss_out = full};
    CHECK(train_local(s, t, &o, &err) == BM_OK);
    struct bm_train_opts a = {.quiet = 1, .steps = 2, .loss_out = part, .ckpt_dir = tmp_path("ckpt"), .ckpt_every = 1};
    CHECKF(train_local(s, t, &a, &err) == BM_OK, "%s", err.msg);
    struct bm_train_opts b = {.quiet = 1, .steps = 4, .loss_out = part, .resume_dir = tmp_path("ckpt")};
    CHECKF(train_local(s, t, &b, &err) == BM_OK, "%s", err.msg);
    for (int k = 0; k < 4; k++) CHECKF(part[k] == full[k], "step %d: %.9g vs %.9g", k + 1, part[k], full[k]);
    /* a corrupt checkpoint is refused */
    FILE *f = fopen(tmp_path("ckpt/step-00000002/rank-1.ckpt"), "r+b");
    CHECK(f != NULL);
    if (f) {
        fseek(f, 200, SEEK_SET);
        fputc(0x55, f);
        fclose(f);
    }
    CHECK(train_local(s, t, &b, &err) == BM_ERR);
    CHECK_STR_CONTAINS(err.msg, "corrupt");
    test_table_free(t);
    bm_spec_free(s);
}

/* Every allocation of a one-step run may fail: the run reports an error, never crashes, and
 * (under ASan) never leaks. */
static void check_allocation_failures_bb(const char *path, enum bm_backbone bb)
{
    struct bm_spec *s = load_spec_at(path);
    CHECKF(s != NULL, "%s", path);
    if (!s) return;
    struct bm_table *t = plan(s, 2, 1, bb, BM_POL_BIGMAC);
    if (!t) return;
    struct bm_train_opts o = {.quiet = 1, .steps = 1};
    struct bm_err err;
    bm_alloc_fail_at(0);
    CHECK(train_local(s, t, &o, &err) == BM_OK);
    long total = bm_alloc_count();
    CHECK(total > 10);
    long stride = total / 150 + 1;
    int failures = 0;
    for (long n = 2; n <= total; n += stride) { /* n = 1 is bm_comm_local_new itself */
        bm_alloc_fail_at(n);
        struct bm_comm *c = bm_comm_local_new(t->pp);
        if (!c) {
            bm_alloc_fail_at(0);
            continue;
        }
        err.msg[0] = 0;
        int rc = bm_exec_train(s, t, NULL, c, &o, &err);
        int fired = bm_alloc_failed();
        bm_alloc_fail_at(0);
        c->ops->free(c);
        if (fired) {
            failures++;
            CHECKF(rc == BM_ERR && err.msg[0], "%s: allocation %ld failed but the run said ok", path, n);
        }
    }
    CHECK(failures > 0);
    test_table_free(t);
    bm_spec_free(s);
}

static void check_allocation_failures(const char *path) { check_allocation_failures_bb(path, BM_BB_1F1B); }

TEST(allocation_failures_are_errors)
{
    check_allocation_failures(SPEC);
    check_allocation_failures_bb(SPEC, BM_BB_ZB_H1); /* the split backward's W contexts */
    check_allocation_failures(SPEC_2ENC); /* chunk 0's concatenated input and split gradient */
    check_allocation_failures(SPEC_3GEN); /* the summed generator gradients */
}

TEST(local_mailbox_matches_any_order)
{
    struct bm_comm *c = bm_comm_local_new(3);
    struct bm_err err;
    float a[4] = {1, 2, 3, 4}, b[4] = {0}, d[4] = {0};
    long r1, r2, r3;
    int done = 0;
    /* send before recv (buffered) */
    CHECK(c->ops->isend(c, 0, 2, 7, a, sizeof a, &r1, &err) == BM_OK);
    CHECK(c->ops->wait(c, r1, 0, &done, &err) == BM_OK && done);
    a[0] = 99; /* the send buffer may be reused once the send completed */
    CHECK(c->ops->irecv(c, 2, 0, 7, b, sizeof b, &r2, &err) == BM_OK);
    CHECK(c->ops->wait(c, r2, 0, &done, &err) == BM_OK && done);
    CHECK(b[0] == 1 && b[3] == 4);
    /* recv before send; a different tag does not match */
    CHECK(c->ops->irecv(c, 1, 2, 8, d, sizeof d, &r3, &err) == BM_OK);
    CHECK(c->ops->isend(c, 2, 1, 9, a, sizeof a, &r1, &err) == BM_OK);
    CHECK(c->ops->wait(c, r3, 0, &done, &err) == BM_OK && !done);
    CHECK(c->ops->isend(c, 2, 1, 8, a, sizeof a, &r2, &err) == BM_OK);
    CHECK(c->ops->wait(c, r3, 0, &done, &err) == BM_OK && done);
    CHECK(d[0] == 99);
    /* size mismatch is an error */
    CHECK(c->ops->irecv(c, 1, 2, 9, d, 8, &r3, &err) == BM_ERR);
    float x0[2] = {1, 2}, x1[2] = {10, 20}, x2[2] = {100, 200}, *bufs[3] = {x0, x1, x2};
    CHECK(c->ops->allreduce_sum(c, bufs, 2, BM_COMM_WORLD, &err) == BM_OK);
    CHECK(x0[0] == 111 && x2[1] == 222);
    c->ops->free(c);
}

int main(void)
{
    const char *tmp = getenv("TEST_TMP");
    snprintf(tmpdir, sizeof tmpdir, "%s/test_exec.%d", tmp ? tmp : "/tmp", (int)getpid());
    char cmd[600];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", tmpdir);
    if (system(cmd)) return 1;
    RUN(local_mailbox_matches_any_order);
    RUN(local_matches_reference_every_policy);
    RUN(zero_bubble_matches_reference);
    RUN(w_of_a_module_that_cannot_split_is_refused);
    RUN(two_encoders_match_reference);
    RUN(three_generators_match_reference);
    RUN(measured_peaks_equal_simulated_with_measured_bytes);
    RUN(recompute_matches_reference);
    RUN(recompute_measured_peaks_fall);
    RUN(bigmac_encoder_peak_flat_in_M_optimus_grows);
    RUN(measured_times_before_the_origin_move_together);
    RUN(calibrate_from_measured_timeline);
    RUN(calibration_makes_a_cost_model_not_a_table);
    RUN(calibrated_rank_scale_reproduces_uneven_ranks);
    RUN(malformed_table_is_an_error_not_a_crash);
    RUN(deadlock_is_reported_not_hung);
    RUN(nan_fault_names_rank_and_op);
    RUN(checkpoint_resume_equals_uninterrupted);
    RUN(allocation_failures_are_errors);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd)) return 1;
    return test_summary();
}
