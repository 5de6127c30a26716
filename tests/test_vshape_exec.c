/* test_vshape_exec.c — the C executor over the V-shaped backbones (issue 25): zb-v and
 * dualpipe-v x bigmac, optimus, unified at P = 2 and 4 through the single-process transport:
 * each step's loss equals the unpipelined reference within 1e-4 relative, and the measured peak
 * activation bytes per rank and role equal the simulator's given the measured bytes per op
 * (the same check tests/test_exec.c makes for the other backbones). */
#include <math.h>
#include <unistd.h>

#include "exec/comm.h"
#include "exec/exec.h"
#include "test.h"
#include "train/train.h"
#include "util/util.h"

#define SPEC "examples/tiny-mllm.json" /* 8 backbone layers: 2 per chunk at P = 2, 1 at P = 4 */

static struct bm_table *plan(const struct bm_spec *s, int P, int M, enum bm_backbone bb, enum bm_policy pol)
{
    struct bm_plan_opts o;
    struct bm_err err;
    struct bm_table *t = NULL;
    struct bm_costs *t_c = NULL;
    bm_plan_opts_from_spec(&o, s);
    o.pp = P, o.vpp = 2, o.microbatches = M, o.backbone = bb, o.policy = pol, o.unit = 0;
    if (bm_plan_build(s, &o, &t, &t_c, &err)) fprintf(stderr, "plan: %s\n", err.msg);
    else test_costs_adopt(t, t_c); /* the tests read it as test_costs(t) */
    return t;
}

TEST(v_shapes_train_like_the_reference_and_peaks_match_the_simulator)
{
    struct bm_spec *s = NULL;
    struct bm_err err;
    CHECKF(bm_spec_load(SPEC, &s, &err) == BM_OK, "%s", err.msg);
    if (!s) return;
    enum { STEPS = 2 };
    double ref[STEPS];
    size_t nref = 0;
    float *refp = NULL;
    struct bm_ref *rf;
    CHECK(bm_ref_new(s, &rf, &err) == BM_OK);
    for (int k = 0; k < STEPS; k++) {
        struct bm_step_stats st;
        CHECK(bm_ref_step(rf, k, &st, &err) == BM_OK);
        ref[k] = st.loss;
    }
    for (int i = 0; i < s->n_modules; i++) { /* the reference's parameters, spec module order */
        size_t m;
        const float *q = bm_ref_params(rf, i, &m);
        refp = bm_realloc(refp, (nref + m) * sizeof(float));
        memcpy(refp + nref, q, m * sizeof(float));
        nref += m;
    }
    bm_ref_free(rf);
    char params[256];
    snprintf(params, sizeof params, "/tmp/bm_vshape_exec_%d.bin", (int)getpid());
    static const enum bm_policy pols[] = {BM_POL_BIGMAC, BM_POL_OPTIMUS, BM_POL_UNIFIED};
    static const enum bm_backbone bbs[] = {BM_BB_ZB_V, BM_BB_DUALPIPE_V};
    int runs = 0;
    for (int P = 2; P <= 4; P += 2)
        for (int bi = 0; bi < 2; bi++)
            for (int pi = 0; pi < 3; pi++) {
                int M = s->microbatches; /* the reference's batch; dualpipe-v needs M >= 2P */
                struct bm_table *t = plan(s, P, M, bbs[bi], pols[pi]);
                CHECKF(t != NULL, "P=%d %s %s", P, bm_backbone_name(bbs[bi]), bm_policy_name(pols[pi]));
                if (!t) continue;
                const char *what = bm_backbone_name(bbs[bi]), *pol = bm_policy_name(pols[pi]);
                /* training: every step's loss and the final parameters */
                double loss[STEPS] = {0};
                struct bm_train_opts to = {.quiet = 1, .steps = STEPS, .dump_params = params, .loss_out = loss};
                struct bm_comm *c = bm_comm_local_new(P);
                int ok = bm_exec_train(s, t, NULL, c, &to, &err) == BM_OK;
                c->ops->free(c);
                CHECKF(ok, "P=%d %s %s: %s", P, what, pol, err.msg);
                for (int k = 0; ok && k < STEPS; k++)
                    CHECKF(fabs(loss[k] - ref[k]) <= 1e-4 * fabs(ref[k]), "P=%d %s %s step %d: loss %.7f, reference %.7f",
                           P, what, pol, k, loss[k], ref[k]);
                size_t np = 0;
                char *pb = ok ? bm_read_file(params, &np, &err) : NULL;
                const float *pp = (const float *)(const void *)pb;
                CHECK(!ok || (pb && np == nref * sizeof(float)));
                if (pb && np == nref * sizeof(float)) {
                    double md = 0, ma = 0;
                    for (size_t i = 0; i < nref; i++) {
                        if (fabs((double)pp[i] - refp[i]) > md) md = fabs((double)pp[i] - refp[i]);
                        if (fabs(refp[i]) > ma) ma = fabs(refp[i]);
                    }
                    CHECKF(md <= 1e-4 * ma, "P=%d %s %s: parameters differ by %g (max |p| %g)", P, what, pol, md, ma);
                }
                bm_free(pb);
                /* one step more, ranks built here, to read each op's measured bytes */
                c = bm_comm_local_new(P);
                struct bm_train_opts o = {.quiet = 1};
                struct bm_exec **x = bm_calloc((size_t)P, sizeof *x);
                for (int r = 0; r < P && ok; r++)
                    if (bm_exec_new(s, t, r, c, &o, &x[r], &err)) {
                        CHECKF(0, "rank %d: %s", r, err.msg);
                        ok = 0;
                    }
                if (ok && bm_exec_run_step(x, c, 0, &err)) {
                    CHECKF(0, "P=%d %s %s: %s", P, what, pol, err.msg);
                    ok = 0;
                }
                if (ok) { /* the last step's measured bytes into the simulator */
                    int C = t->pp * t->vpp;
                    test_costs(t)->act_bytes = bm_calloc((size_t)t->n_modules * C * M, sizeof(double));
                    test_costs(t)->in_bytes = bm_calloc((size_t)t->n_modules * C * M, sizeof(double));
                    test_costs(t)->act_w_bytes = bm_calloc((size_t)t->n_modules * C * M, sizeof(double));
                    for (int r = 0; r < P; r++) {
                        const size_t *b = bm_exec_op_bytes(x[r]), *ib = bm_exec_op_in_bytes(x[r]);
                        for (int k = 0; k < t->ranks[r].n_ops; k++) {
                            const struct bm_op *op = &t->ranks[r].ops[k];
                            size_t at = ((size_t)op->module * C + (op->chunk >= 0 ? op->chunk : 0)) * M + op->mb;
                            if (op->kind != BM_OP_COMPUTE) continue;
                            if (op->pass == BM_PASS_F) test_costs(t)->act_bytes[at] = (double)b[k], test_costs(t)->in_bytes[at] = (double)ib[k];
                            else if (op->pass == BM_PASS_B && bm_table_splits(t, op->module)) test_costs(t)->act_w_bytes[at] = (double)b[k];
                        }
                    }
                    struct bm_timeline *tl = NULL;
                    CHECKF(bm_simulate(t, test_costs(t), NULL, &tl, &err) == BM_OK, "%s", err.msg);
                    for (int r = 0; tl && r < P; r++) {
                        struct bm_exec_rank_stats st;
                        bm_exec_stats(x[r], &st);
                        for (int role = 0; role < BM_N_ROLES; role++)
                            CHECKF(tl->ranks[r].peak_act_mib[role] * 1048576.0 == (double)st.peak_act[role],
                                   "P=%d %s %s rank %d role %d: simulated %.0f bytes, measured %zu", P,
                                   bm_backbone_name(bbs[bi]), bm_policy_name(pols[pi]), r, role,
                                   tl->ranks[r].peak_act_mib[role] * 1048576.0, st.peak_act[role]);
                    }
                    bm_timeline_free(tl);
                    runs++;
                }
                for (int r = 0; r < P; r++)
                    if (x[r]) bm_exec_free(x[r]);
                bm_free(x);
                c->ops->free(c);
                test_table_free(t);
            }
    CHECK(runs == 12);
    unlink(params);
    bm_free(refp);
    bm_spec_free(s);
}

int main(void)
{
    RUN(v_shapes_train_like_the_reference_and_peaks_match_the_simulator);
    return test_summary();
}
