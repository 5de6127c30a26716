/* test_critical.c — the critical path against hand-walked timelines (gpipe P = 2 with and
 * without link latency) and, on every policy's planned table, the identity backbone + nested +
 * transfers + waiting = makespan, the last op on the path, nothing negative. */
#include "report/critical.h"
#include "test.h"
#include "util/util.h"

static struct bm_table *plan_text(const char *text, enum bm_policy pol, struct bm_timeline **tl)
{
    struct bm_spec *s = NULL;
    struct bm_err err;
    struct bm_table *t = NULL;
    struct bm_costs *t_c = NULL;
    *tl = NULL;
    if (bm_spec_parse(text, "c.json", &s, &err)) {
        fprintf(stderr, "  %s\n", err.msg);
        return NULL;
    }
    struct bm_plan_opts o;
    bm_plan_opts_from_spec(&o, s);
    o.policy = pol;
    if (bm_plan_build(s, &o, &t, &t_c, &err) || bm_simulate(t, t_c, NULL, tl, &err)) {
        fprintf(stderr, "  %s\n", err.msg);
        bm_table_free(t), bm_costs_free(t_c), t_c = NULL;
        t = NULL;
    }
    bm_costs_free(t_c); /* the critical path reads the table and its timeline only */
    bm_spec_free(s);
    return t;
}

/* gpipe P = 2, M = 2, one backbone of fwd 2, bwd 4 (1 and 2 per stage), ideal links:
 *   rank 0: F0 [0,1] F1 [1,2]                 B0 [5,7] B1 [7,9]
 *   rank 1:          F0 [1,2] F1 [2,3] B0 [3,5] B1 [5,7]
 * Walked back from rank 0's B1: B1 <- B0 (rank free at 7 when the gradient arrived) <- the
 * recv of grad 0 (blocked 2..5) -> rank 1's send at 5 <- B0 <- F1 <- F0 <- the recv blocked
 * 0..1 -> rank 0's send at 1 <- F0: 2 + 2 + 2 + 1 + 1 + 1 = 9 ms of backbone, nothing else.
 * With 1 ms latency (M = 1): F0 [0,1] -> 1 ms -> rank 1 F0 [2,3] B0 [3,5] -> 1 ms -> rank 0
 * B0 [6,8]: 6 ms backbone + 2 ms transfers = 8. */
TEST(gpipe_by_hand)
{
    static const char *fmt =
        "{\"format\": \"bigmac-spec\", \"version\": 1, \"parallel\": {\"pp\": 2, \"microbatches\": %d},\n"
        " \"schedule\": {\"backbone\": \"gpipe\", \"policy\": \"none\"}, \"device\": {\"link_latency_us\": %d},\n"
        " \"inputs\": [\"text\"], \"modules\": [{\"name\": \"llm\", \"consumes\": [\"text\"], \"produces\": [\"h\"],\n"
        " \"cost\": {\"fwd_ms\": 2, \"bwd_ms\": 4}}]}";
    char text[1024];
    for (int lat = 0; lat < 2; lat++) {
        snprintf(text, sizeof text, fmt, lat ? 1 : 2, lat ? 1000 : 0);
        struct bm_timeline *tl;
        struct bm_table *t = plan_text(text, BM_POL_NONE, &tl);
        CHECK(t && tl);
        if (!t || !tl) continue;
        struct bm_critical c;
        struct bm_err err;
        CHECK(bm_critical_path(t, tl, &c, &err) == BM_OK);
        CHECK_NEAR(c.makespan_ms, lat ? 8 : 9, 1e-9);
        CHECK_NEAR(c.backbone_ms, lat ? 6 : 9, 1e-9);
        CHECK_NEAR(c.transfer_ms, lat ? 2 : 0, 1e-9);
        CHECK_NEAR(c.nested_ms, 0, 1e-12);
        CHECK_NEAR(c.waiting_ms, 0, 1e-9);
        CHECK(c.n_transfers == 2);
        /* which compute ops: lat 0: rank 0 F0 B0 B1, rank 1 F0 F1 B0 (not B1: it ended at 7
         * while rank 0 was still busy until 7 with B0: a tie, broken toward the rank) */
        int n_compute[2] = {0, 0};
        for (int r = 0; r < 2; r++)
            for (int i = 0; i < t->ranks[r].n_ops; i++)
                if (c.on[r][i] && t->ranks[r].ops[i].kind == BM_OP_COMPUTE) n_compute[r]++;
        CHECK(n_compute[0] == (lat ? 2 : 3) && n_compute[1] == (lat ? 2 : 3));
        bm_critical_free(t, &c);
        bm_timeline_free(tl);
        bm_table_free(t);
    }
}

/* Every policy on the tiny example: the split adds up to the makespan, the path ends at the
 * last op, no part is negative, nested work shows up for the policies that have it. */
TEST(split_adds_up_every_policy)
{
    struct bm_err err;
    char *text = bm_read_file("examples/tiny-mllm.json", NULL, &err);
    CHECKF(text != NULL, "%s", err.msg);
    if (!text) return;
    for (int p = 0; p < BM_N_POLICIES; p++) {
        struct bm_timeline *tl;
        struct bm_table *t = plan_text(text, (enum bm_policy)p, &tl);
        CHECK(t && tl);
        if (!t || !tl) continue;
        struct bm_critical c;
        CHECK(bm_critical_path(t, tl, &c, &err) == BM_OK);
        CHECK_NEAR(c.makespan_ms, tl->makespan_ms, 1e-12);
        CHECK_NEAR(c.backbone_ms + c.nested_ms + c.transfer_ms + c.waiting_ms, tl->makespan_ms, 1e-6);
        CHECK(c.backbone_ms > 0 && c.transfer_ms >= 0 && c.waiting_ms > -1e-9 && c.nested_ms >= 0);
        if (p != BM_POL_NONE) CHECKF(c.nested_ms > 0, "policy %s: no nested work on the path", bm_policy_name((enum bm_policy)p));
        int last = 0;
        for (int r = 0; r < t->pp; r++)
            for (int i = 0; i < t->ranks[r].n_ops; i++)
                if (c.on[r][i] && tl->ranks[r].ops[i].end_ms == tl->makespan_ms) last = 1;
        CHECK(last);
        bm_critical_free(t, &c);
        bm_timeline_free(tl);
        bm_table_free(t);
    }
    bm_free(text);
}

int main(void)
{
    RUN(gpipe_by_hand);
    RUN(split_adds_up_every_policy);
    return test_summary();
}
