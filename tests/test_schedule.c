/* test_schedule.c — backbone schedules against Megatron's published per-rank orders
 * (golden strings from DESIGN §5). */
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
    for (int i = 0; i < 2 * V * M; i++) {
        int local = steps[i].chunk / P;
        char c = steps[i].pass == BM_PASS_F ? 'F' : 'B';
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
    /* DESIGN §6 step 2: with U=4 the last stage holds the unit's 4 forwards before B0. */
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

int main(void)
{
    RUN(golden_1f1b_p4_m8);
    RUN(golden_interleaved_p4_v2_m8);
    RUN(gpipe_all_forwards_then_backwards);
    RUN(warmup_extension_for_generator_units);
    RUN(interleaved_rejects_m_not_multiple_of_p);
    return test_summary();
}
