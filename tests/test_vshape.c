/* test_vshape.c — V-shaped backbones (issue 25; docs/planner.md "V-shaped backbones"): the V
 * placement, zb-v and dualpipe-v against their definitions (DualPipeV against PyTorch's golden
 * order, dualpipev_4rank_10mb.csv, rows written here in PyTorch's notation), schedule properties
 * over P and M, every policy planning over both (every table verifies, bigmac within its window
 * bound, the planner's timeline equal to the simulator's), and the chunk -> rank map in JSON and
 * CSV (written only when it differs from c mod P). */
#include <math.h>

#include "test.h"
#include "plan/plan.h"
#include "table/table.h"
#include "util/util.h"

static struct bm_spec *make_spec(int generator)
{
    char text[4096];
    snprintf(text, sizeof text,
             "{\"format\": \"bigmac-spec\", \"version\": 1, \"name\": \"v\",\n"
             " \"inputs\": [\"image\", \"text\"],\n"
             " \"modules\": [\n"
             "  {\"name\": \"vit\", \"role\": \"encoder\", \"consumes\": [\"image\"], \"produces\": [\"vis\"],\n"
             "   \"cost\": {\"fwd_ms\": 1, \"bwd_ms\": 2, \"act_mib\": 100, \"state_mib\": 10, \"out_mib\": 1}},\n"
             "  {\"name\": \"llm\", \"role\": \"backbone\", \"consumes\": [\"text\", \"vis\"], \"produces\": [\"hidden\"],\n"
             "   \"cost\": {\"fwd_ms\": 16, \"bwd_ms\": 32, \"act_mib\": 800, \"state_mib\": 1000, \"out_mib\": 1}}\n"
             "  %s"
             " ],\n"
             " \"data\": {\"encoder_cost_scale\": {\"dist\": \"uniform\", \"min\": 0.5, \"max\": 1.5, \"seed\": 7}}}\n",
             generator ? ",{\"name\": \"dit\", \"consumes\": [\"hidden\"], \"produces\": [\"loss\"],\n"
                         "   \"cost\": {\"fwd_ms\": 1, \"bwd_ms\": 2, \"act_mib\": 100, \"state_mib\": 10, \"out_mib\": 1}}\n"
                       : "");
    struct bm_spec *s;
    struct bm_err err;
    if (bm_spec_parse(text, "v.json", &s, &err)) {
        fprintf(stderr, "spec: %s\n", err.msg);
        return NULL;
    }
    return s;
}

/* Rank r's order in PyTorch's notation: "0F0 7I0 7W0 (0F7;7B3)OVERLAP_F_B 7B6 ..." (a whole
 * backward is one B, its W not written). */
static int torch_row(enum bm_backbone bb, int P, int M, int r, char *buf, size_t n)
{
    struct bm_bb_step st[8192];
    struct bm_err err;
    buf[0] = 0;
    if (bm_backbone_order(bb, P, 2, M, r, 0, st, &err)) {
        snprintf(buf, n, "error: %s", err.msg);
        return BM_ERR;
    }
    size_t len = 0;
    int ns = bm_backbone_n_steps(bb, 2, M);
    for (int i = 0; i < ns && len < n; i++) {
        const char *sep = len ? " " : "";
        if (st[i].flags & BM_STEP_OVERLAP) {
            len += (size_t)snprintf(buf + len, n - len, "%s(%dF%d;%dB%d)OVERLAP_F_B", sep, st[i].chunk, st[i].mb,
                                    st[i + 1].chunk, st[i + 1].mb);
            i += 2; /* the B and its W */
        } else if (st[i].flags & BM_STEP_WHOLE) {
            len += (size_t)snprintf(buf + len, n - len, "%s%dB%d", sep, st[i].chunk, st[i].mb);
            i++;
        } else {
            len += (size_t)snprintf(buf + len, n - len, "%s%d%c%d", sep, st[i].chunk,
                                    "FIW"[st[i].pass], st[i].mb);
        }
    }
    return BM_OK;
}

TEST(v_placement)
{
    int want[8] = {0, 1, 2, 3, 3, 2, 1, 0};
    for (int c = 0; c < 8; c++) {
        CHECK(bm_backbone_chunk_rank(BM_BB_ZB_V, 4, c) == want[c]);
        CHECK(bm_backbone_chunk_rank(BM_BB_DUALPIPE_V, 4, c) == want[c]);
        CHECK(bm_backbone_chunk_rank(BM_BB_INTERLEAVED, 4, c) == c % 4);
    }
    CHECK(bm_backbone_chunk_rank(BM_BB_ZB_V, 1, 1) == 0);
}

/* PyTorch's dualpipev_4rank_10mb.csv (its test artifact), ranks 0 and 3, cells joined by spaces */
TEST(dualpipe_v_golden_p4_m10)
{
    const char *want0 =
        "0F0 0F1 0F2 0F3 0F4 0F5 0F6 7F0 7I0 7W0 7F1 7I1 7W1 7F2 7I2 7W2 7F3 (0F7;7B3)OVERLAP_F_B "
        "(7F4;0B0)OVERLAP_F_B (0F8;7B4)OVERLAP_F_B (7F5;0B1)OVERLAP_F_B (0F9;7B5)OVERLAP_F_B "
        "(7F6;0B2)OVERLAP_F_B 7B6 (7F7;0B3)OVERLAP_F_B 7B7 (7F8;0B4)OVERLAP_F_B 7B8 "
        "(7F9;0B5)OVERLAP_F_B 7B9 0I6 0W6 0I7 0W7 0I8 0W8 0I9 0W9";
    const char *want3 =
        "3F0 4F0 3F1 4F1 3F2 4F2 3F3 4F3 3F4 4B0 (4F4;3B0)OVERLAP_F_B (3F5;4B1)OVERLAP_F_B "
        "(4F5;3B1)OVERLAP_F_B (3F6;4B2)OVERLAP_F_B (4F6;3B2)OVERLAP_F_B (3F7;4B3)OVERLAP_F_B "
        "(4F7;3B3)OVERLAP_F_B (3F8;4B4)OVERLAP_F_B (4F8;3B4)OVERLAP_F_B (3F9;4B5)OVERLAP_F_B "
        "(4F9;3B5)OVERLAP_F_B 4B6 3B6 4B7 3B7 4I8 3I8 4I9 3I9 4W8 3W8 4W9 3W9";
    char buf[16384];
    CHECK(torch_row(BM_BB_DUALPIPE_V, 4, 10, 0, buf, sizeof buf) == BM_OK);
    CHECKF(!strcmp(buf, want0), "rank 0: %s", buf);
    CHECK(torch_row(BM_BB_DUALPIPE_V, 4, 10, 3, buf, sizeof buf) == BM_OK);
    CHECKF(!strcmp(buf, want3), "rank 3: %s", buf);
}

/* ZB-V at P = 2, M = 4 by hand from its definition (section 6 of the paper, PyTorch's rule):
 * rank 1: warm-up 2(P-r)-1 = 1 F of chunk 1, r = 1 pair F(2) F(1), P-r = 1 triple F(2) I(2)
 * W(2); steady [F(1)] I(1) W(1) F(2) I(2) W(2) while chunk 2 trails or chunk 1 has forwards
 * (n = max(2P-1, M) = 4 planned); cool-down r = 1 pair I(1) I(2), P-r = 1 pair I(1) W(1), then
 * the W's left of chunk 2, then of chunk 1. */
TEST(zb_v_by_hand_p2_m4)
{
    const char *want1 = "1F0 2F0 1F1 2F1 2I0 2W0 1F2 1I0 1W0 2F2 2I1 2W1 1F3 1I1 1W1 2F3 2I2 2W2 "
                        "1I2 2I3 1I3 1W2 2W3 1W3";
    char buf[4096];
    CHECK(torch_row(BM_BB_ZB_V, 2, 4, 1, buf, sizeof buf) == BM_OK);
    CHECKF(!strcmp(buf, want1), "rank 1: %s", buf);
}

/* Every (chunk, pass, mb) once on its rank; each B after its F, each W after its B; a WHOLE B
 * is followed by its W, an OVERLAP F by a B; the backbone alone verifies (deadlock free). */
TEST(properties_over_p_and_m)
{
    struct bm_spec *s = make_spec(0);
    CHECK(s != NULL);
    long tables = 0;
    for (int k = 0; k < 2 && s; k++) {
        enum bm_backbone bb = k ? BM_BB_DUALPIPE_V : BM_BB_ZB_V;
        for (int P = 1; P <= 8; P++)
            for (int M = k ? 2 * P : 1; M <= 5 * P; M += (M < 2 * P + 2 ? 1 : P)) {
                int C = 2 * P, ns = bm_backbone_n_steps(bb, 2, M);
                struct bm_bb_step *st = bm_malloc((size_t)ns * sizeof *st);
                int *pos = bm_malloc((size_t)C * M * 3 * sizeof(int));
                for (int i = 0; i < C * M * 3; i++) pos[i] = -1;
                int bad = 0;
                for (int r = 0; r < P; r++) {
                    struct bm_err err;
                    if (bm_backbone_order(bb, P, 2, M, r, 0, st, &err)) {
                        CHECKF(0, "%s P=%d M=%d: %s", bm_backbone_name(bb), P, M, err.msg);
                        bad = 1;
                        break;
                    }
                    for (int i = 0; i < ns; i++) {
                        int c = st[i].chunk, m = st[i].mb, p = st[i].pass;
                        if (c < 0 || c >= C || m < 0 || m >= M || p > 2 || bm_backbone_chunk_rank(bb, P, c) != r ||
                            pos[(c * M + m) * 3 + p] >= 0) {
                            bad = 1;
                            break;
                        }
                        pos[(c * M + m) * 3 + p] = i;
                        if ((p == BM_PASS_B && pos[(c * M + m) * 3] < 0) ||
                            (p == BM_PASS_W && pos[(c * M + m) * 3 + 1] < 0))
                            bad = 1;
                        if ((st[i].flags & BM_STEP_WHOLE) &&
                            !(p == BM_PASS_B && i + 1 < ns && st[i + 1].pass == BM_PASS_W && st[i + 1].chunk == c &&
                              st[i + 1].mb == m))
                            bad = 1;
                        if ((st[i].flags & BM_STEP_OVERLAP) && !(p == BM_PASS_F && i + 1 < ns && st[i + 1].pass == BM_PASS_B))
                            bad = 1;
                    }
                }
                CHECKF(!bad, "%s P=%d M=%d: order breaks a property", bm_backbone_name(bb), P, M);
                struct bm_plan_opts o = {.pp = P, .vpp = 2, .microbatches = M, .backbone = bb, .policy = BM_POL_NONE};
                struct bm_table *t;
                struct bm_costs *t_c = NULL;
                struct bm_err err;
                if (bm_plan_build(s, &o, &t, &t_c, &err)) {
                    CHECKF(0, "%s P=%d M=%d: %s", bm_backbone_name(bb), P, M, err.msg);
                } else {
                    CHECKF(bm_verify(t, &err) == BM_OK, "%s P=%d M=%d: %s", bm_backbone_name(bb), P, M, err.msg);
                    bm_table_free(t), bm_costs_free(t_c), t_c = NULL;
                    tables++;
                }
                bm_free(st);
                bm_free(pos);
            }
    }
    printf("  %ld backbone-only V tables verified\n", tables);
    CHECK(tables > 100);
    bm_spec_free(s);
}

static int peak_live(const struct bm_table *t, const char *name)
{
    int *live = bm_calloc((size_t)t->pp * (size_t)t->n_modules, sizeof(int));
    bm_table_peak_live(t, live);
    int k = bm_table_find_module(t, name), best = 0;
    for (int r = 0; r < t->pp; r++)
        if (live[r * t->n_modules + k] > best) best = live[r * t->n_modules + k];
    bm_free(live);
    return best;
}

/* Every policy plans over both V shapes, with and without a generator, P 1..6, M = 2P..8P:
 * every table verifies (or the window is refused as too small), bigmac stays within its window
 * bound, and the planner's nominal makespan is the simulator's. */
TEST(every_policy_plans_over_v_shapes)
{
    static const enum bm_policy pols[] = {BM_POL_BIGMAC, BM_POL_OPTIMUS, BM_POL_UNIFIED,
                                          BM_POL_UNIFIED_BALANCED, BM_POL_IDEAL, BM_POL_NONE};
    long planned = 0, refused = 0, failed = 0;
    for (int gen = 0; gen <= 1; gen++) {
        struct bm_spec *s = make_spec(gen);
        CHECK(s != NULL);
        if (!s) continue;
        for (int k = 0; k < 2; k++)
            for (int P = 1; P <= 6; P++)
                for (int M = 2 * P; M <= 8 * P; M *= 2)
                    for (size_t pi = 0; pi < sizeof pols / sizeof pols[0]; pi++)
                        for (int W = 0; W <= (pols[pi] == BM_POL_BIGMAC ? 3 : 0); W += W ? 1 : 2) {
                            enum bm_backbone bb = k ? BM_BB_DUALPIPE_V : BM_BB_ZB_V;
                            struct bm_plan_opts o = {.pp = P, .vpp = 2, .microbatches = M, .window = W, .backbone = bb, .policy = pols[pi]};
                            struct bm_table *t;
                            struct bm_costs *t_c = NULL;
                            struct bm_err err;
                            if (bm_plan_build_search(s, &o, 32, &t, &t_c, NULL, &err)) {
                                if (strstr(err.msg, "too small") && strstr(err.msg, "blocked at")) refused++;
                                else {
                                    failed++;
                                    CHECKF(0, "%s P=%d M=%d %s W=%d: %s", bm_backbone_name(bb), P, M,
                                           bm_policy_name(pols[pi]), W, err.msg);
                                }
                                continue;
                            }
                            planned++;
                            if (bm_verify(t, &err)) {
                                failed++;
                                CHECKF(0, "%s P=%d M=%d %s W=%d gen=%d: %s", bm_backbone_name(bb), P, M,
                                       bm_policy_name(pols[pi]), W, gen, err.msg);
                            }
                            if (pols[pi] == BM_POL_BIGMAC) {
                                CHECK(peak_live(t, "vit") <= t->window * ((t->unit + P - 1) / P));
                                if (gen) CHECK(peak_live(t, "dit") <= (t->unit + P - 1) / P);
                            }
                            bm_table_free(t), bm_costs_free(t_c), t_c = NULL;
                            if (failed > 5) {
                                bm_spec_free(s);
                                goto out;
                            }
                        }
        bm_spec_free(s);
    }
out:
    printf("  V shapes: %ld tables planned and verified, %ld refused (window too small)\n", planned, refused);
    CHECK(planned > 300);
    CHECK(failed == 0);
}

TEST(planner_timeline_equals_simulator)
{
    struct bm_spec *s = make_spec(1);
    static const enum bm_policy pols[] = {BM_POL_BIGMAC, BM_POL_OPTIMUS, BM_POL_UNIFIED, BM_POL_NONE};
    for (int k = 0; k < 2 && s; k++)
        for (size_t pi = 0; pi < 4; pi++) {
            enum bm_backbone bb = k ? BM_BB_DUALPIPE_V : BM_BB_ZB_V;
            struct bm_plan_opts o = {.pp = 4, .vpp = 2, .microbatches = 16, .backbone = bb, .policy = pols[pi]};
            struct bm_table *t;
            struct bm_costs *t_c = NULL;
            struct bm_err err;
            if (bm_plan_build(s, &o, &t, &t_c, &err)) {
                CHECKF(0, "%s %s: %s", bm_backbone_name(bb), bm_policy_name(pols[pi]), err.msg);
                continue;
            }
            struct bm_graph *g;
            CHECK(bm_graph_build(t, t_c, 0, &g, &err) == BM_OK);
            struct bm_order ord = {t->pp, bm_calloc(4, sizeof(int *)), bm_calloc(4, sizeof(int))};
            for (int r = 0; r < t->pp; r++) {
                ord.seq[r] = bm_calloc((size_t)t->ranks[r].n_ops, sizeof(int));
                for (int i = 0; i < t->ranks[r].n_ops; i++) {
                    const struct bm_op *op = &t->ranks[r].ops[i];
                    if (op->kind != BM_OP_COMPUTE) continue;
                    ord.seq[r][ord.n[r]++] = op->chunk >= 0 ? bm_task_bb(g, op->chunk, op->pass, op->mb)
                                                            : bm_task_nested(g, g->nested_slot[op->module], op->pass, op->mb);
                }
            }
            double *st = bm_calloc((size_t)g->n_tasks, sizeof(double)), *fi = bm_calloc((size_t)g->n_tasks, sizeof(double));
            double ms = 0;
            CHECK(bm_order_times(g, &ord, st, fi, &ms, &err) == BM_OK);
            struct bm_timeline *tl;
            CHECK(bm_simulate(t, t_c, NULL, &tl, &err) == BM_OK);
            CHECKF(fabs(tl->makespan_ms - ms) < 1e-6 * ms, "%s %s: planner %.6f vs simulator %.6f", bm_backbone_name(bb),
                   bm_policy_name(pols[pi]), ms, tl->makespan_ms);
            bm_timeline_free(tl);
            bm_free(st), bm_free(fi);
            for (int r = 0; r < t->pp; r++) bm_free(ord.seq[r]);
            bm_free(ord.seq), bm_free(ord.n);
            bm_graph_free(g);
            bm_table_free(t), bm_costs_free(t_c), t_c = NULL;
        }
    bm_spec_free(s);
}

static char *capture_json(const struct bm_table *t, const struct bm_costs *t_c, int csv)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (csv) bm_csv_write(t, t_c, f);
    else bm_table_write_json(t, t_c, f);
    fclose(f);
    return buf;
}

/* chunk_rank is written only when some chunk is off rank c mod P, and reads back */
TEST(chunk_rank_in_json_and_csv)
{
    struct bm_spec *s = make_spec(1);
    struct bm_plan_opts o = {.pp = 4, .vpp = 2, .microbatches = 8, .backbone = BM_BB_ZB_V, .policy = BM_POL_OPTIMUS};
    struct bm_table *t, *t2;
    struct bm_costs *t_c = NULL, *t2_c = NULL;
    struct bm_err err;
    CHECK(s && bm_plan_build(s, &o, &t, &t_c, &err) == BM_OK);
    char *js = capture_json(t, t_c, 0);
    CHECK(strstr(js, "\"chunk_rank\": [0, 1, 2, 3, 3, 2, 1, 0]") != NULL);
    CHECK(bm_table_parse(js, "v.json", &t2, &t2_c, &err) == BM_OK);
    char *js2 = capture_json(t2, t2_c, 0);
    CHECK(!strcmp(js, js2));
    CHECK(bm_verify(t2, &err) == BM_OK);
    char *csv = capture_json(t, t_c, 1);
    CHECK(strstr(csv, "\n# chunk_rank 0 1 2 3 3 2 1 0\n") != NULL);
    struct bm_table *t3;
    struct bm_costs *t3_c = NULL;
    CHECKF(bm_csv_parse(csv, "v.csv", NULL, NULL, &t3, &t3_c, &err) == BM_OK, "%s", err.msg);
    char *js3 = capture_json(t3, t3_c, 0);
    CHECK(!strcmp(js, js3));
    bm_table_free(t3), bm_costs_free(t3_c), t3_c = NULL;
    free(js3);
    free(csv);
    free(js2);
    free(js);
    bm_table_free(t2), bm_costs_free(t2_c), t2_c = NULL;
    bm_table_free(t), bm_costs_free(t_c), t_c = NULL;
    /* a table on c mod P writes no chunk_rank (outputs of before stay byte-identical) */
    struct bm_plan_opts q = {.pp = 4, .vpp = 2, .microbatches = 8, .backbone = BM_BB_INTERLEAVED, .policy = BM_POL_OPTIMUS};
    CHECK(bm_plan_build(s, &q, &t, &t_c, &err) == BM_OK);
    js = capture_json(t, t_c, 0);
    csv = capture_json(t, t_c, 1);
    CHECK(!strstr(js, "chunk_rank") && !strstr(csv, "chunk_rank"));
    free(js), free(csv);
    bm_table_free(t), bm_costs_free(t_c), t_c = NULL;
    /* a chunk on a rank out of range is refused with its position */
    o.backbone = BM_BB_ZB_V;
    CHECK(bm_plan_build(s, &o, &t, &t_c, &err) == BM_OK);
    js = capture_json(t, t_c, 0);
    char *at = strstr(js, "[0, 1, 2, 3, 3, 2, 1, 0]");
    CHECK(at != NULL);
    if (at) at[22] = '9';
    CHECK(bm_table_parse(js, "bad.json", &t2, &t2_c, &err) == BM_ERR);
    CHECK_STR_CONTAINS(err.msg, "\"chunk_rank\" entries are ranks 0..3");
    CHECK(!strncmp(err.msg, "bad.json:", 9));
    free(js);
    bm_table_free(t), bm_costs_free(t_c), t_c = NULL;
    bm_spec_free(s);
}

int main(void)
{
    RUN(v_placement);
    RUN(dualpipe_v_golden_p4_m10);
    RUN(zb_v_by_hand_p2_m4);
    RUN(properties_over_p_and_m);
    RUN(every_policy_plans_over_v_shapes);
    RUN(planner_timeline_equals_simulator);
    RUN(chunk_rank_in_json_and_csv);
    return test_summary();
}
