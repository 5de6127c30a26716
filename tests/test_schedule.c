/* test_schedule.c — backbone schedules against Megatron's published per-rank orders
 * (golden strings from docs/design.md §5), ZB-H1 against the zero-bubble paper's Figure 3 (golden file
 * tests/data/zb_h1_p4_m8.txt), zb-interleaved against PyTorch's ScheduleInterleavedZeroBubble
 * rule re-derived step by step below, and Megatron-style properties over grids of P, V, M. */
#include "test.h"
#include "util/util.h"

/* Render rank's order as "F0 F1 B0 ..." (interleaved: upper case = local chunk 0,
 * lower case = local chunk 1). */
static void render(enum bm_backbone bb, int P, int V, int M, int rank, int extra, char *buf, size_t n)
{
    struct bm_bb_step steps[4096];
    struct bm_err err;
    buf[0] = 0;
    if (bm_backbone_order(bb, P, V, M, rank, extra, steps, &err)) {
        snprintf(buf, n, "error: %s", err.msg);
        return;
    }
    size_t len = 0;
    for (int i = 0; i < bm_backbone_n_steps(bb, V, M); i++) {
        int local = steps[i].chunk / P;
        char c = steps[i].pass == BM_PASS_F ? 'F' : steps[i].pass == BM_PASS_B ? 'B' : 'W';
        if (local == 1) c = (char)(c - 'A' + 'a');
        len += (size_t)snprintf(buf + len, n - len, "%s%c%d", i ? " " : "", c, steps[i].mb);
    }
}

TEST(golden_1f1b_p4_m8)
{
    const char *want[4] = {
        "F0 F1 F2 F3 B0 F4 B1 F5 B2 F6 B3 F7 B4 B5 B6 B7",
        "F0 F1 F2 B0 F3 B1 F4 B2 F5 B3 F6 B4 F7 B5 B6 B7",
        "F0 F1 B0 F2 B1 F3 B2 F4 B3 F5 B4 F6 B5 F7 B6 B7",
        "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 F6 B6 F7 B7",
    };
    char buf[4096];
    for (int r = 0; r < 4; r++) {
        render(BM_BB_1F1B, 4, 1, 8, r, 0, buf, sizeof buf);
        CHECKF(!strcmp(buf, want[r]), "rank %d: got %s", r, buf);
    }
}

TEST(golden_interleaved_p4_v2_m8)
{
    const char *want0 = "F0 F1 F2 F3 f0 f1 f2 f3 F4 F5 F6 b0 F7 b1 f4 b2 f5 b3 f6 B0 f7 B1 B2 B3 "
                        "b4 b5 b6 b7 B4 B5 B6 B7";
    const char *want3 = "F0 F1 F2 F3 f0 b0 f1 b1 f2 b2 f3 b3 F4 B0 F5 B1 F6 B2 F7 B3 f4 b4 f5 b5 "
                        "f6 b6 f7 b7 B4 B5 B6 B7";
    char buf[4096];
    render(BM_BB_INTERLEAVED, 4, 2, 8, 0, 0, buf, sizeof buf);
    CHECKF(!strcmp(buf, want0), "rank 0: got %s", buf);
    render(BM_BB_INTERLEAVED, 4, 2, 8, 3, 0, buf, sizeof buf);
    CHECKF(!strcmp(buf, want3), "rank 3: got %s", buf);
}

TEST(gpipe_all_forwards_then_backwards)
{
    char buf[4096];
    render(BM_BB_GPIPE, 2, 1, 3, 1, 0, buf, sizeof buf);
    CHECKF(!strcmp(buf, "F0 F1 F2 B0 B1 B2"), "got %s", buf);
}

TEST(warmup_extension_for_generator_units)
{
    /* docs/design.md §6 step 2: with U=4 the last stage holds the unit's 4 forwards before B0. */
    char buf[4096];
    render(BM_BB_1F1B, 4, 1, 8, 3, 3, buf, sizeof buf);
    CHECKF(!strcmp(buf, "F0 F1 F2 F3 B0 F4 B1 F5 B2 F6 B3 F7 B4 B5 B6 B7"), "got %s", buf);
    CHECK(bm_backbone_warmup(BM_BB_1F1B, 4, 1, 8, 0, 3) == 6);
    CHECK(bm_backbone_warmup(BM_BB_1F1B, 4, 1, 4, 0, 3) == 4); /* capped at M */
}

TEST(interleaved_rejects_m_not_multiple_of_p)
{
    struct bm_bb_step steps[64];
    struct bm_err err;
    CHECK(bm_backbone_order(BM_BB_INTERLEAVED, 4, 2, 6, 0, 0, steps, &err) == BM_ERR);
    CHECK_STR_CONTAINS(err.msg, "divisible");
}

/* ---------------------------------------------------------------- zero bubble */

TEST(golden_zb_h1_p4_m8_paper_figure_3)
{
    FILE *f = fopen("tests/data/zb_h1_p4_m8.txt", "r");
    CHECK(f != NULL);
    if (!f) return;
    char line[512], buf[4096];
    for (int r = 0; r < 4; r++) {
        CHECK(fgets(line, sizeof line, f) != NULL);
        line[strcspn(line, "\n")] = 0;
        render(BM_BB_ZB_H1, 4, 1, 8, r, 0, buf, sizeof buf);
        CHECKF(!strcmp(buf, line), "rank %d:\n  got  %s\n  want %s", r, buf, line);
    }
    fclose(f);
}

/* PyTorch's ScheduleInterleavedZeroBubble (_get_1f1b_rank_ops with enable_zero_bubble): warm-up
 * forwards (V-1)*P + (P-1-r) (capped at V*M), then for each remaining op one forward and one
 * input-gradient backward, then the remaining backwards; after the backward with op id
 * op - warmup >= r (r = num_1f1b_microbatches), the oldest backward's weight gradient; at the
 * end the weights left. Stage of step k: forward local chunk (k / P) % V, backward
 * V-1 - ((k - warmup) / P) % V; microbatch: the next one of that stage. */
static int pytorch_zb_interleaved(int P, int V, int M, int r, struct bm_bb_step *out)
{
    int warm = (V - 1) * P + (P - 1 - r);
    if (warm > V * M) warm = V * M;
    int total = V * M, n = 0, fmb[64] = {0}, bmb[64] = {0}, wmb[64] = {0};
    int bstage[4096], nb = 0, nw = 0;
    for (int op = 0; op < total + warm; op++) {
        if (op < total) { /* forward of step op (warm-up and steady) */
            int st = (op / P) % V * P + r;
            out[n++] = (struct bm_bb_step){.pass = BM_PASS_F, .chunk = st, .mb = fmb[st]++};
        }
        if (op >= warm) { /* backward of step op (steady and cool-down) */
            int st = (V - 1 - ((op - warm) / P) % V) * P + r;
            out[n++] = (struct bm_bb_step){.pass = BM_PASS_B, .chunk = st, .mb = bmb[st]++};
            bstage[nb++] = st;
            if (op - warm >= r) {
                int ws = bstage[nw++];
                out[n++] = (struct bm_bb_step){.pass = BM_PASS_W, .chunk = ws, .mb = wmb[ws]++};
            }
        }
    }
    while (nw < nb) {
        int ws = bstage[nw++];
        out[n++] = (struct bm_bb_step){.pass = BM_PASS_W, .chunk = ws, .mb = wmb[ws]++};
    }
    return n;
}

TEST(zb_interleaved_matches_pytorch_rule)
{
    static struct bm_bb_step got[4096], want[4096];
    struct bm_err err;
    int cases = 0;
    for (int P = 1; P <= 6; P++)
        for (int V = 2; V <= 4; V++)
            for (int M = P; M <= 4 * P; M += P)
                for (int r = 0; r < P; r++) {
                    CHECK(bm_backbone_order(BM_BB_ZB_INTERLEAVED, P, V, M, r, 0, got, &err) == BM_OK);
                    int n = pytorch_zb_interleaved(P, V, M, r, want);
                    CHECK(n == bm_backbone_n_steps(BM_BB_ZB_INTERLEAVED, V, M));
                    int same = 1;
                    for (int i = 0; i < n && same; i++)
                        same = got[i].pass == want[i].pass && got[i].chunk == want[i].chunk && got[i].mb == want[i].mb;
                    CHECKF(same, "P=%d V=%d M=%d rank %d differs from PyTorch's rule", P, V, M, r);
                    cases++;
                }
    CHECK(cases > 200);
    /* V = 1 of the same rule is ZB-H1 */
    for (int P = 1; P <= 6; P++)
        for (int M = 1; M <= 3 * P; M++)
            for (int r = 0; r < P; r++) {
                CHECK(bm_backbone_order(BM_BB_ZB_H1, P, 1, M, r, 0, got, &err) == BM_OK);
                int n = pytorch_zb_interleaved(P, 1, M, r, want);
                for (int i = 0; i < n; i++)
                    CHECKF(got[i].pass == want[i].pass && got[i].chunk == want[i].chunk && got[i].mb == want[i].mb,
                           "zb-h1 P=%d M=%d rank %d op %d", P, M, r, i);
            }
}

/* Megatron-style properties: every (chunk, pass, mb) exactly once on its rank, B after its F,
 * W after its B, and at most `bound` microbatches live between F and W per rank. */
static void check_zb_properties(enum bm_backbone bb, int P, int V, int M, int extra, int bound)
{
    static struct bm_bb_step st[8192];
    static int pos[3][8][1024];
    struct bm_err err;
    for (int r = 0; r < P; r++) {
        CHECK(bm_backbone_order(bb, P, V, M, r, extra, st, &err) == BM_OK);
        int n = bm_backbone_n_steps(bb, V, M);
        for (int p = 0; p < 3; p++)
            for (int j = 0; j < V; j++)
                for (int m = 0; m < M; m++) pos[p][j][m] = -1;
        int live = 0, peak = 0, ok = 1;
        for (int i = 0; i < n; i++) {
            int j = st[i].chunk / P;
            ok &= st[i].chunk % P == r && st[i].mb >= 0 && st[i].mb < M && j < V;
            if (!ok) break;
            ok &= pos[st[i].pass][j][st[i].mb] < 0;
            pos[st[i].pass][j][st[i].mb] = i;
            if (st[i].pass == BM_PASS_F) live++;
            if (st[i].pass == BM_PASS_B) ok &= pos[BM_PASS_F][j][st[i].mb] >= 0;
            if (st[i].pass == BM_PASS_W) ok &= pos[BM_PASS_B][j][st[i].mb] >= 0, live--;
            if (live > peak) peak = live;
        }
        for (int p = 0; p < 3 && ok; p++)
            for (int j = 0; j < V; j++)
                for (int m = 0; m < M; m++) ok &= pos[p][j][m] >= 0;
        CHECKF(ok, "%s P=%d V=%d M=%d rank %d: an op is missing, repeated, misplaced or out of order",
               bm_backbone_name(bb), P, V, M, r);
        CHECKF(peak <= bound, "%s P=%d V=%d M=%d rank %d: %d microbatches live between F and W (bound %d)",
               bm_backbone_name(bb), P, V, M, r, peak, bound);
        if (M >= P && extra == 0 && r == 0)
            CHECKF(peak == (bound < V * M ? bound : V * M), "%s P=%d V=%d M=%d: rank 0 peak %d, want %d",
                   bm_backbone_name(bb), P, V, M, peak, bound);
    }
}

TEST(zb_properties_over_p_v_m)
{
    for (int P = 1; P <= 8; P++)
        for (int M = 1; M <= 24; M++) {
            check_zb_properties(BM_BB_ZB_H1, P, 1, M, 0, P);  /* the same memory as 1F1B */
            check_zb_properties(BM_BB_ZB_H1, P, 1, M, 2, P + 2); /* warm-up extension e: P + e */
        }
    for (int P = 1; P <= 6; P++)
        for (int V = 2; V <= 4; V++)
            for (int M = P; M <= 4 * P; M += P) check_zb_properties(BM_BB_ZB_INTERLEAVED, P, V, M, 0, V * P);
}

TEST(zb_rejects_bad_vpp_and_m)
{
    struct bm_bb_step steps[256];
    struct bm_err err;
    CHECK(bm_backbone_order(BM_BB_ZB_H1, 4, 2, 8, 0, 0, steps, &err) == BM_ERR);
    CHECK_STR_CONTAINS(err.msg, "use --backbone zb-interleaved");
    CHECK(bm_backbone_order(BM_BB_ZB_INTERLEAVED, 4, 1, 8, 0, 0, steps, &err) == BM_ERR);
    CHECK_STR_CONTAINS(err.msg, "vpp >= 2");
    CHECK(bm_backbone_order(BM_BB_ZB_INTERLEAVED, 4, 2, 6, 0, 0, steps, &err) == BM_ERR);
    CHECK_STR_CONTAINS(err.msg, "zb-interleaved needs microbatches divisible by pp");
    CHECK(bm_backbone_splits(BM_BB_ZB_H1) && bm_backbone_splits(BM_BB_ZB_INTERLEAVED));
    CHECK(!bm_backbone_splits(BM_BB_1F1B) && !bm_backbone_splits(BM_BB_INTERLEAVED) && !bm_backbone_splits(BM_BB_GPIPE));
    enum bm_backbone b;
    CHECK(bm_backbone_parse("zb-h1", &b) == BM_OK && b == BM_BB_ZB_H1);
    CHECK(bm_backbone_parse("zb-interleaved", &b) == BM_OK && b == BM_BB_ZB_INTERLEAVED);
    CHECK(!strcmp(bm_backbone_name(BM_BB_ZB_INTERLEAVED), "zb-interleaved"));
}

int main(void)
{
    RUN(golden_1f1b_p4_m8);
    RUN(golden_interleaved_p4_v2_m8);
    RUN(gpipe_all_forwards_then_backwards);
    RUN(warmup_extension_for_generator_units);
    RUN(interleaved_rejects_m_not_multiple_of_p);
    RUN(golden_zb_h1_p4_m8_paper_figure_3);
    RUN(zb_interleaved_matches_pytorch_rule);
    RUN(zb_properties_over_p_v_m);
    RUN(zb_rejects_bad_vpp_and_m);
    return test_summary();
}
