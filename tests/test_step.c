/* test_step.c — the step after the walk (src/sim/step.h, docs/simulator.md "The step") against
 * hand-computed figures: ring all-reduce / reduce-scatter times over 2, 4 and 8 ranks on one and
 * on two hosts, Megatron's overlap (a chunk's reduction hidden under the rank's cooldown, the
 * last one fully exposed), ZeRO-1's sharded optimizer state on a 2x2 layout, and D = 1 without
 * replicated modules (step = walk + optimizer). Tables are built here (or planned from a spec
 * string for the layouts), independent of the step model. */
#include "test.h"
#include "sim/step.h"
#include "util/util.h"

static void push(struct bm_table *t, int r, int kind, int pass, int module, int chunk, int mb, int peer,
                 int tensor)
{
    struct bm_err err;
    struct bm_op op = {(uint8_t)kind, (uint8_t)pass, (int16_t)module, chunk, mb, peer, tensor};
    if (bm_table_push(t, r, op, &err)) abort();
}

/* A backbone-only table lowered from bm_backbone_order and its cost model (*c): fwd/bwd for the
 * whole backbone, out_mib 0 (free pipeline transfers), param_mib and state_mib as given, link
 * gbps / lat_us. */
static struct bm_table *backbone_table(enum bm_backbone bb, int P, int V, int M, double param_mib, double state_mib,
                                       double gbps, double lat_us, struct bm_costs **c)
{
    struct bm_table *t = bm_table_new(P);
    t->vpp = V, t->microbatches = M, t->unit = P, t->backbone = bb, t->policy = BM_POL_NONE;
    t->modules = bm_calloc(1, sizeof *t->modules);
    t->modules[0].name = bm_strdup("llm");
    t->modules[0].role = BM_ROLE_BACKBONE;
    t->n_modules = 1;
    t->backbone_module = 0;
    struct bm_costs *k = *c = bm_costs_new(t);
    if (!k) abort();
    k->modules[0] = (struct bm_cost){1, 2, 0, state_mib, 0, 0, 0, param_mib};
    k->device.link_gbytes_per_s = gbps;
    k->device.link_latency_us = lat_us;
    k->device.inter_host_gbytes_per_s = 12.5;
    k->device.inter_host_latency_us = 20;
    int C = P * V, n = bm_backbone_n_steps(bb, V, M);
    struct bm_bb_step *st = bm_malloc((size_t)n * sizeof *st);
    struct bm_err err;
    for (int r = 0; r < P; r++) {
        if (bm_backbone_order(bb, P, V, M, r, 0, st, &err)) abort();
        for (int k = 0; k < n; k++) {
            int c = st[k].chunk, mb = st[k].mb; /* neighbours' ranks: the backbone's placement */
            int rp = c > 0 ? bm_backbone_chunk_rank(bb, P, c - 1) : -1, rn = c < C - 1 ? bm_backbone_chunk_rank(bb, P, c + 1) : -1;
            int prev = rp >= 0 && rp != r, next = rn >= 0 && rn != r;
            char name[64];
            if (st[k].pass == BM_PASS_F) {
                snprintf(name, sizeof name, "llm.c%d.out", c - 1);
                if (prev) push(t, r, BM_OP_RECV, 0, 0, -1, mb, rp, bm_table_tensor(t, name, 0, 0));
                push(t, r, BM_OP_COMPUTE, BM_PASS_F, 0, c, mb, -1, -1);
                snprintf(name, sizeof name, "llm.c%d.out", c);
                if (next) push(t, r, BM_OP_SEND, 0, 0, -1, mb, rn, bm_table_tensor(t, name, 0, 0));
            } else if (st[k].pass == BM_PASS_W) { /* a zero-bubble weight gradient: no message */
                push(t, r, BM_OP_COMPUTE, BM_PASS_W, 0, c, mb, -1, -1);
            } else {
                snprintf(name, sizeof name, "grad:llm.c%d.out", c);
                if (next) push(t, r, BM_OP_RECV, 0, 0, -1, mb, rn, bm_table_tensor(t, name, 0, 1));
                push(t, r, BM_OP_COMPUTE, BM_PASS_B, 0, c, mb, -1, -1);
                snprintf(name, sizeof name, "grad:llm.c%d.out", c - 1);
                if (prev) push(t, r, BM_OP_SEND, 0, 0, -1, mb, rp, bm_table_tensor(t, name, 0, 1));
            }
        }
    }
    bm_free(st);
    return t;
}

static struct bm_timeline *sim(const struct bm_table *t, const struct bm_costs *t_c)
{
    struct bm_timeline *tl;
    struct bm_err err;
    if (bm_simulate(t, t_c, NULL, &tl, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        abort();
    }
    return tl;
}

/* 1 GiB over 25 GB/s: 2^30 / 25e9 s = 42.94967296 ms; over 12.5 GB/s 85.89934592 ms. */
#define GIB_25 42.94967296
#define GIB_12 85.89934592

TEST(ring_formulas_by_hand)
{
    /* all-reduce 2(n-1)/n * bytes/bw + 2(n-1) * latency, 10 us */
    CHECK_NEAR(bm_step_ring_ms(2, 1024, 25, 10, 1), GIB_25 + 0.02, 1e-9);
    CHECK_NEAR(bm_step_ring_ms(4, 1024, 25, 10, 1), 1.5 * GIB_25 + 0.06, 1e-9);
    CHECK_NEAR(bm_step_ring_ms(8, 1024, 25, 10, 1), 1.75 * GIB_25 + 0.14, 1e-9);
    /* reduce-scatter / all-gather: half */
    CHECK_NEAR(bm_step_ring_ms(2, 1024, 25, 10, 0), 0.5 * GIB_25 + 0.01, 1e-9);
    CHECK_NEAR(bm_step_ring_ms(4, 1024, 25, 10, 0), 0.75 * GIB_25 + 0.03, 1e-9);
    CHECK_NEAR(bm_step_ring_ms(8, 1024, 25, 10, 0), 0.875 * GIB_25 + 0.07, 1e-9);
    CHECK(bm_step_ring_ms(1, 1024, 25, 10, 1) == 0);
    CHECK(bm_step_ring_ms(4, 0, 25, 10, 1) == 0);
}

/* P = 1, one chunk, M = 1: the walk is F (1 ms) + B (2 ms) = 3 ms; the backbone's 1 GiB of
 * gradients all-reduced over its D replicas right after, fully exposed. One host (H = D) takes
 * the 25 GB/s, 10 us link; two hosts (H = D/2) the 12.5 GB/s, 20 us one. */
TEST(ring_in_the_step_one_and_two_hosts)
{
    static const int ns[] = {2, 4, 8};
    static const double one_host[] = {GIB_25 + 0.02, 1.5 * GIB_25 + 0.06, 1.75 * GIB_25 + 0.14};
    static const double two_hosts[] = {GIB_12 + 0.04, 1.5 * GIB_12 + 0.12, 1.75 * GIB_12 + 0.28};
    for (int k = 0; k < 3; k++)
        for (int hosts = 1; hosts <= 2; hosts++) {
            struct bm_costs *t_c = NULL;
            struct bm_table *t = backbone_table(BM_BB_1F1B, 1, 1, 1, 1024, 4096, 25, 10, &t_c);
            t->dp = ns[k];
            t->ranks_per_host = ns[k] / hosts;
            struct bm_timeline *tl = sim(t, t_c);
            double ar = hosts == 1 ? one_host[k] : two_hosts[k];
            CHECK_NEAR(tl->makespan_ms, 3, 1e-12);
            CHECKF(fabs(tl->step_ms - (3 + ar)) < 1e-9, "n %d hosts %d: step %.9f want %.9f", ns[k], hosts,
                   tl->step_ms, 3 + ar);
            CHECK_NEAR(tl->sync_exposed_ms, ar, 1e-9);
            CHECK_NEAR(tl->sync_total_ms, ar, 1e-9);
            CHECK_NEAR(tl->samples_per_s, ns[k] * 1 / ((3 + ar) / 1000), 1e-6);
            /* ZeRO-1: a reduce-scatter before the optimizer, an all-gather after: the same time */
            t->zero = 1;
            bm_timeline_free(tl);
            tl = sim(t, t_c);
            CHECK_NEAR(tl->step_ms, 3 + ar, 1e-9);
            bm_timeline_free(tl);
            bm_table_free(t), bm_costs_free(t_c), t_c = NULL;
        }
}

/* End of the last backward of global chunk c in tl, and of rank r's walk. */
static double last_b(const struct bm_table *t, const struct bm_timeline *tl, int c)
{
    double e = 0;
    for (int r = 0; r < t->pp; r++)
        for (int i = 0; i < t->ranks[r].n_ops; i++) {
            const struct bm_op *op = &t->ranks[r].ops[i];
            if (op->kind == BM_OP_COMPUTE && op->chunk == c && tl->ranks[r].ops[i].end_ms > e)
                e = tl->ranks[r].ops[i].end_ms;
        }
    return e;
}

static double walk_end(const struct bm_table *t, const struct bm_timeline *tl, int r)
{
    double e = 0;
    for (int i = 0; i < t->ranks[r].n_ops; i++)
        if (tl->ranks[r].ops[i].end_ms > e) e = tl->ranks[r].ops[i].end_ms;
    return e;
}

/* Interleaved P = 2, V = 2, M = 2, D = 2 on one host, 1 GB/s, no latency: each of the 4 chunks
 * holds a quarter of the weights. Rank r holds chunks r and r + 2; chunk r + 2's last backward
 * ends before chunk r's (the cooldown runs chunk r's last backwards), so its all-reduce starts
 * there and, when short, is hidden under the cooldown; chunk r's starts when the rank's walk
 * ends and is fully exposed. */
TEST(overlap_hidden_and_exposed)
{
    /* per chunk 0.2e6 bytes: all-reduce over 2 = 2 * 1/2 * 0.2e6 / 1e9 s = 0.2 ms */
    double param = 4 * 0.2e6 / 1048576.0;
    struct bm_costs *t_c = NULL;
    struct bm_table *t = backbone_table(BM_BB_INTERLEAVED, 2, 2, 2, param, 4 * param, 1, 0, &t_c);
    t->dp = 2;
    struct bm_timeline *tl = sim(t, t_c);
    double ar = 0.2;
    for (int r = 0; r < 2; r++)
        CHECKF(last_b(t, tl, r + 2) + ar <= walk_end(t, tl, r), "rank %d: chunk %d ends %.3f, walk %.3f", r, r + 2,
               last_b(t, tl, r + 2), walk_end(t, tl, r));
    CHECK_NEAR(last_b(t, tl, 0), tl->makespan_ms, 1e-12); /* rank 0's cooldown after chunk 0: empty */
    CHECK_NEAR(tl->step_ms, tl->makespan_ms + ar, 1e-9);  /* one reduction exposed, one hidden */
    CHECK_NEAR(tl->sync_exposed_ms, ar, 1e-9);
    CHECK_NEAR(tl->sync_total_ms, 2 * ar, 1e-9);
    CHECK_NEAR(tl->optimizer_ms, 0, 1e-12);
    bm_timeline_free(tl);
    bm_table_free(t), bm_costs_free(t_c), t_c = NULL;

    /* 100x the bytes (20 ms per chunk): chunk r + 2's all-reduce outlasts the cooldown and chunk
     * r's waits for it on the rank's one comm stream: rank r ends at max(its walk, chunk r+2's
     * last B + 20) + 20 */
    t = backbone_table(BM_BB_INTERLEAVED, 2, 2, 2, 100 * param, 400 * param, 1, 0, &t_c);
    t->dp = 2;
    tl = sim(t, t_c);
    double big = 20, want = 0;
    for (int r = 0; r < 2; r++) {
        double a = last_b(t, tl, r + 2) + big, w = walk_end(t, tl, r);
        double e = (a > w ? a : w) + big;
        if (e > want) want = e;
    }
    CHECK_NEAR(tl->step_ms, want, 1e-9);
    CHECK(tl->step_ms > tl->makespan_ms + big + 1e-9); /* the first one was not all hidden */
    CHECK_NEAR(tl->sync_total_ms, 2 * big, 1e-9);
    bm_timeline_free(tl);
    bm_table_free(t), bm_costs_free(t_c), t_c = NULL;
}

/* A V-shaped backbone (zb-v, P = 2, V = 2, M = 4, D = 2): chunk c runs on rank c for c < 2 and on
 * rank 3 - c for the second half (rank 0 holds chunks 0 and 3, rank 1 chunks 1 and 2), not on
 * c mod P. Each chunk's all-reduce (20 ms, far longer than any cooldown) runs on its own rank's
 * stream from its last backward (W) there: rank r ends at max(its walk, first + 20) + 20, first
 * the earlier of its two chunks' last backwards; the step at the later of the two ranks. Placed
 * by c mod P, rank 0's stream would take chunk 2's reduction, whose backward ends on rank 1. */
TEST(v_shape_chunks_on_their_ranks)
{
    double param = 4 * 0.2e6 / 1048576.0 * 100; /* 20 ms per chunk's all-reduce over 2 at 1 GB/s */
    struct bm_costs *t_c = NULL;
    struct bm_table *t = backbone_table(BM_BB_ZB_V, 2, 2, 4, param, 4 * param, 1, 0, &t_c);
    t->dp = 2;
    CHECK(bm_table_chunk_rank(t, 2) == 1 && bm_table_chunk_rank(t, 3) == 0);
    struct bm_timeline *tl = sim(t, t_c);
    struct bm_step st;
    struct bm_step_rank sr[2];
    struct bm_err err;
    CHECK(bm_step_model_ranks(t, t_c, tl, &st, sr, &err) == BM_OK);
    static const int chunks[2][2] = {{0, 3}, {1, 2}};
    double big = 20, want = 0;
    for (int r = 0; r < 2; r++) {
        double a = last_b(t, tl, chunks[r][0]), b = last_b(t, tl, chunks[r][1]);
        double first = a < b ? a : b, w = walk_end(t, tl, r);
        double e = (first + big > w ? first + big : w) + big;
        CHECKF(fabs(sr[r].sync_start_ms - first) < 1e-9, "rank %d: sync starts %.6f, want %.6f", r, sr[r].sync_start_ms,
               first);
        CHECKF(fabs(sr[r].sync_end_ms - e) < 1e-9, "rank %d: sync ends %.6f, want %.6f", r, sr[r].sync_end_ms, e);
        CHECK_NEAR(sr[r].sync_busy_ms, 2 * big, 1e-9);
        if (e > want) want = e;
    }
    CHECK(fabs(last_b(t, tl, 2) - last_b(t, tl, 3)) > 1e-6); /* the misplacement would show */
    CHECK_NEAR(st.step_ms, want, 1e-9);
    CHECK_NEAR(tl->step_ms, want, 1e-9);
    bm_timeline_free(tl);
    bm_table_free(t), bm_costs_free(t_c), t_c = NULL;
}

/* D = 1, no replicated module: no collective, step = walk + optimizer. 1F1B P = 2, M = 4;
 * state 4096 MiB = 1024 weights + 1024 gradients + 2048 optimizer state, half per rank: each
 * rank updates 1 GiB of optimizer state at 3 ms/GiB. Rank 0's walk ends last. */
TEST(dp1_step_is_walk_plus_optimizer)
{
    struct bm_costs *t_c = NULL;
    struct bm_table *t = backbone_table(BM_BB_1F1B, 2, 1, 4, 1024, 4096, 25, 10, &t_c);
    t_c->device.optimizer_ms_per_gib = 3;
    struct bm_timeline *tl = sim(t, t_c);
    CHECK_NEAR(walk_end(t, tl, 0), tl->makespan_ms, 1e-12);
    CHECK_NEAR(tl->step_ms, tl->makespan_ms + 3, 1e-9);
    CHECK_NEAR(tl->optimizer_ms, 3, 1e-9);
    CHECK_NEAR(tl->sync_exposed_ms, 0, 1e-12);
    CHECK_NEAR(tl->sync_total_ms, 0, 1e-12);
    CHECK_NEAR(tl->samples_per_s, 4 / (tl->step_ms / 1000), 1e-6);
    /* without the optimizer's time the step is the walk, and samples/s is the walk's */
    t_c->device.optimizer_ms_per_gib = 0;
    bm_timeline_free(tl);
    tl = sim(t, t_c);
    CHECK(tl->step_ms == tl->makespan_ms);
    CHECK_NEAR(tl->samples_per_s, 4 / (tl->makespan_ms / 1000), 1e-9);
    bm_timeline_free(tl);
    bm_table_free(t), bm_costs_free(t_c), t_c = NULL;
}

static const char *spec_2x2 =
    "{\"format\": \"bigmac-spec\", \"version\": 1, \"name\": \"zero\",\n"
    " \"device\": {\"memory_gib\": 80, \"link_gbytes_per_s\": 25, \"link_latency_us\": 10},\n"
    " \"parallel\": {\"pp\": 2, \"vpp\": 1, \"microbatches\": 4, \"dp\": 2},\n"
    " \"schedule\": {\"backbone\": \"1f1b\", \"policy\": \"optimus\"},\n"
    " \"inputs\": [\"image\", \"text\"],\n"
    " \"modules\": [\n"
    "  {\"name\": \"vit\", \"consumes\": [\"image\"], \"produces\": [\"emb\"],\n"
    "   \"cost\": {\"fwd_ms\": 1, \"bwd_ms\": 2, \"act_mib\": 0, \"state_mib\": 16, \"out_mib\": 1}},\n"
    "  {\"name\": \"llm\", \"consumes\": [\"text\", \"emb\"], \"produces\": [\"loss\"], \"layers\": 4,\n"
    "   \"cost\": {\"fwd_ms\": 4, \"bwd_ms\": 8, \"act_mib\": 0, \"state_mib\": 64, \"out_mib\": 1}}],\n"
    " \"train\": {\"zero\": %d}}\n";

/* pp 2 x dp 2, backbone state 64 MiB (param 16: weights 16, gradients 16, optimizer 32), the
 * ViT 16 MiB (4, 4, 8), no activations. Per rank, ZeRO 0: half the backbone (8, 8, 16) + the
 * ViT where it runs (4, 4, 8). ZeRO-1: the backbone's optimizer state over its 2 replicas, the
 * ViT's over every rank that holds it: optimus, on both pipeline ranks, 2 x 2 = 4 ranks; unified,
 * on pipeline rank 0 only, its 2 replicas. */
TEST(zero1_memory_by_hand_2x2)
{
    static const struct {
        enum bm_policy pol;
        int zero;
        double w[2], o[2];
    } cases[] = {
        {BM_POL_OPTIMUS, 0, {12, 12}, {24, 24}},
        {BM_POL_OPTIMUS, 1, {12, 12}, {16 / 2.0 + 8 / 4.0, 16 / 2.0 + 8 / 4.0}},
        {BM_POL_UNIFIED, 0, {12, 8}, {24, 16}},
        {BM_POL_UNIFIED, 1, {12, 8}, {16 / 2.0 + 8 / 2.0, 16 / 2.0}},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        char text[2048];
        snprintf(text, sizeof text, spec_2x2, cases[k].zero);
        struct bm_spec *s;
        struct bm_table *t;
        struct bm_costs *t_c = NULL;
        struct bm_err err;
        if (bm_spec_parse(text, "zero.json", &s, &err)) {
            fprintf(stderr, "%s\n", err.msg);
            abort();
        }
        struct bm_plan_opts o;
        bm_plan_opts_from_spec(&o, s);
        o.policy = cases[k].pol;
        if (bm_plan_build(s, &o, &t, &t_c, &err)) {
            fprintf(stderr, "%s\n", err.msg);
            abort();
        }
        CHECK(t->zero == cases[k].zero && t->dp == 2);
        struct bm_step_mem parts[2];
        bm_step_state(t, t_c, parts);
        struct bm_timeline *tl = sim(t, t_c);
        for (int r = 0; r < 2; r++) {
            CHECK_NEAR(parts[r].weights_mib, cases[k].w[r], 1e-9);
            CHECK_NEAR(parts[r].grads_mib, cases[k].w[r], 1e-9);
            CHECKF(fabs(parts[r].optim_mib - cases[k].o[r]) < 1e-9, "case %zu rank %d: optimizer %.6f want %.6f", k,
                   r, parts[r].optim_mib, cases[k].o[r]);
            CHECK_NEAR(tl->ranks[r].state_mib, 2 * cases[k].w[r] + cases[k].o[r], 1e-9);
            CHECK_NEAR(tl->ranks[r].peak_mib, tl->ranks[r].state_mib, 1e-9); /* no activations */
        }
        bm_timeline_free(tl);
        bm_table_free(t), bm_costs_free(t_c), t_c = NULL;
        bm_spec_free(s);
    }
}

int main(void)
{
    RUN(ring_formulas_by_hand);
    RUN(ring_in_the_step_one_and_two_hosts);
    RUN(overlap_hidden_and_exposed);
    RUN(v_shape_chunks_on_their_ranks);
    RUN(dp1_step_is_walk_plus_optimizer);
    RUN(zero1_memory_by_hand_2x2);
    return test_summary();
}
