/* test_sim.c — the simulator against hand-computed timelines (docs/design.md §5, §8): makespans of
 * the Megatron schedules, comm latency and bandwidth, memory peaks, jitter determinism,
 * deadlock reporting, idle accounting, allocation-failure injection. Tables are built here
 * with bm_table_new/push/tensor, independent of the planner. */
#include "test.h"
#include "sim/cost.h"
#include "sim/step.h"
#include "bigmac_report.h"
#include "report/critical.h"
#include "util/util.h"

/* ---------------------------------------------------------------- table builders */

static int add_module(struct bm_table *t, const char *name, enum bm_role role, double fwd,
                      double bwd, double act, double state, double out)
{
    int i = t->n_modules;
    struct bm_table_module *m = bm_realloc(t->modules, (size_t)(i + 1) * sizeof *m);
    if (!m) return -1;
    t->modules = m;
    memset(&m[i], 0, sizeof m[i]);
    m[i].name = bm_strdup(name);
    m[i].role = role;
    m[i].grad_to_backbone = 1;
    t->n_modules++;
    test_costs(t)->modules[i] = (struct bm_cost){fwd, bwd, act, state, out, 0, 0, 0};
    if (role == BM_ROLE_BACKBONE) t->backbone_module = i;
    return i;
}

/* Empty table with a backbone "llm" of whole-module costs fwd/bwd/act/state (uniform chunk
 * weights, no mb_scale, zero device: free comm, no memory cap). */
static struct bm_table *new_table(enum bm_backbone bb, int P, int V, int M, double fwd, double bwd,
                                  double act, double state)
{
    struct bm_table *t = bm_table_new(P);
    t->vpp = V;
    t->microbatches = M;
    t->unit = P;
    t->backbone = bb;
    t->policy = BM_POL_NONE;
    add_module(t, "llm", BM_ROLE_BACKBONE, fwd, bwd, act, state, 1);
    return t;
}

static void push(struct bm_table *t, int r, int kind, int pass, int module, int chunk, int mb,
                 int peer, int tensor)
{
    struct bm_err err;
    struct bm_op op = {(uint8_t)kind, (uint8_t)pass, (int16_t)module, chunk, mb, peer, tensor};
    if (bm_table_push(t, r, op, &err)) abort();
}

static int chunk_tensor(struct bm_table *t, int c, int grad)
{
    char name[64];
    snprintf(name, sizeof name, "%sllm.c%d.out", grad ? "grad:" : "", c);
    return bm_table_tensor(t, name, t->backbone_module, grad);
}

/* Lower the backbone schedule: recv right before the consumer, send right after the producer. */
static void add_backbone(struct bm_table *t, int extra)
{
    int P = t->pp, V = t->vpp, M = t->microbatches, C = P * V, bb = t->backbone_module;
    int n = bm_backbone_n_steps(t->backbone, V, M);
    struct bm_bb_step *steps = bm_malloc((size_t)n * sizeof *steps);
    struct bm_err err;
    for (int r = 0; r < P; r++) {
        if (bm_backbone_order(t->backbone, P, V, M, r, extra, steps, &err)) abort();
        for (int k = 0; k < n; k++) {
            int c = steps[k].chunk, mb = steps[k].mb;
            /* hand-offs between chunks on the same rank stay there (as the planner lowers) */
            int prev = c > 0 && (c - 1) % P != r, next = c < C - 1 && (c + 1) % P != r;
            if (steps[k].pass == BM_PASS_W) {
                push(t, r, BM_OP_COMPUTE, BM_PASS_W, bb, c, mb, -1, -1);
            } else if (steps[k].pass == BM_PASS_F) {
                if (prev) push(t, r, BM_OP_RECV, 0, bb, -1, mb, (c - 1) % P, chunk_tensor(t, c - 1, 0));
                push(t, r, BM_OP_COMPUTE, BM_PASS_F, bb, c, mb, -1, -1);
                if (next) push(t, r, BM_OP_SEND, 0, bb, -1, mb, (c + 1) % P, chunk_tensor(t, c, 0));
            } else {
                if (next) push(t, r, BM_OP_RECV, 0, bb, -1, mb, (c + 1) % P, chunk_tensor(t, c, 1));
                push(t, r, BM_OP_COMPUTE, BM_PASS_B, bb, c, mb, -1, -1);
                if (prev) push(t, r, BM_OP_SEND, 0, bb, -1, mb, (c - 1) % P, chunk_tensor(t, c - 1, 1));
            }
        }
    }
    bm_free(steps);
}

static struct bm_timeline *sim(const struct bm_table *t, const struct bm_costs *c, const struct bm_sim_opts *o)
{
    struct bm_timeline *tl = NULL;
    struct bm_err err;
    if (bm_simulate(t, c, o, &tl, &err)) {
        fprintf(stderr, "  simulate failed: %s\n", err.msg);
        return NULL;
    }
    return tl;
}

/* busy + lead + mid + tail == makespan on every rank, and idle >= 0. */
static void check_idle_sums(const struct bm_timeline *tl)
{
    for (int r = 0; r < tl->pp; r++) {
        const struct bm_rank_timeline *rt = &tl->ranks[r];
        CHECK(rt->idle_lead_ms >= 0 && rt->idle_mid_ms >= 0 && rt->idle_tail_ms >= 0);
        CHECK_NEAR(rt->busy_ms + rt->idle_lead_ms + rt->idle_mid_ms + rt->idle_tail_ms,
                   tl->makespan_ms, 1e-9);
    }
}

/* Per-op invariants of any simulated timeline (no jitter): ops run in program order, a compute
 * op lasts its cost and starts once its inputs are ready, a send takes no time, a recv ends at
 * max(reached, arrival) and arrival = its send's issue + transfer. */
static void check_ops(const struct bm_table *t, const struct bm_costs *c, const struct bm_timeline *tl)
{
    int split[64] = {0};
    for (int m = 0; m < t->n_modules && m < 64; m++) split[m] = bm_table_splits(t, m);
    for (int r = 0; r < t->pp; r++) {
        double prev = 0;
        for (int i = 0; i < t->ranks[r].n_ops; i++) {
            const struct bm_op *o = &t->ranks[r].ops[i];
            const struct bm_op_time *ot = &tl->ranks[r].ops[i];
            CHECKF(fabs(ot->start_ms - prev) < 1e-9, "rank %d op %d starts %g after %g", r, i,
                   ot->start_ms, prev);
            CHECK(ot->end_ms <= tl->makespan_ms + 1e-9);
            if (o->kind == BM_OP_COMPUTE) {
                CHECK_NEAR(ot->end_ms - ot->start_ms, bm_cost_compute_ms(t, c, o, o->module < 64 && split[o->module]), 1e-9);
                CHECK(ot->ready_ms <= ot->start_ms + 1e-9);
            } else if (o->kind == BM_OP_SEND) {
                CHECK(ot->end_ms == ot->start_ms);
            } else {
                CHECK(ot->wait_rank == o->peer && ot->wait_op >= 0);
                const struct bm_op *s = &t->ranks[o->peer].ops[ot->wait_op];
                CHECK(s->kind == BM_OP_SEND && s->peer == r && s->tensor == o->tensor && s->mb == o->mb);
                CHECK_NEAR(ot->ready_ms,
                           tl->ranks[o->peer].ops[ot->wait_op].start_ms + bm_cost_comm_ms(t, c, o->tensor), 1e-9);
                CHECK_NEAR(ot->end_ms, BM_MAX(ot->start_ms, ot->ready_ms), 1e-12);
            }
            prev = ot->end_ms;
        }
    }
}

/* ---------------------------------------------------------------- makespans */

TEST(makespan_1f1b_p4_m8_is_33)
{
    struct bm_table *t = new_table(BM_BB_1F1B, 4, 1, 8, 4, 8, 0, 0); /* F=1, B=2 per stage */
    add_backbone(t, 0);
    struct bm_timeline *tl = sim(t, test_costs(t), NULL);
    CHECK(tl != NULL);
    if (tl) {
        CHECK_NEAR(tl->makespan_ms, 33, 1e-9);
        check_ops(t, test_costs(t), tl);
        for (int r = 0; r < 4; r++) CHECK_NEAR(tl->ranks[r].busy_ms, 24, 1e-9);
        CHECK_NEAR(tl->bubble_ratio, 4 * 9.0 / (4 * 33.0), 1e-12);
        CHECK_NEAR(tl->samples_per_s, 8 / 0.033, 1e-6);
        /* rank 3 starts at 3 (three forwards upstream), never idles in between; rank 0 ends at 33 */
        CHECK_NEAR(tl->ranks[3].idle_lead_ms, 3, 1e-9);
        CHECK_NEAR(tl->ranks[0].idle_tail_ms, 0, 1e-9);
        CHECK_NEAR(tl->ranks[3].idle_tail_ms, 6, 1e-9); /* B7 on rank 3 ends at 27 */
        CHECK_NEAR(tl->ranks[3].idle_mid_ms, 0, 1e-9);
        CHECK(!tl->oom);
        check_idle_sums(tl);
    }
    bm_timeline_free(tl);
    test_table_free(t);
}

/* Qi et al. §2.1: with T_F = T_B = T_W, ZB-H1's bubble is (P-1)(T_F+T_B-T_W), a third of
 * 1F1B's (P-1)(T_F+T_B+T_W); the makespan is M(T_F+T_B+T_W) plus the bubble. Peak activation
 * equals 1F1B's (P microbatches on rank 0; here each frees half at B and half at W). */
TEST(makespan_zb_h1_bubble_is_a_third_of_1f1b)
{
    for (int P = 2; P <= 8; P *= 2)
        for (int M = P; M <= 4 * P; M += P) {
            struct bm_table *z = new_table(BM_BB_ZB_H1, P, 1, M, P, 2.0 * P, 4.0 * P, 0); /* F=B=W=1 */
            struct bm_table *o = new_table(BM_BB_1F1B, P, 1, M, P, 2.0 * P, 4.0 * P, 0);
            add_backbone(z, 0);
            add_backbone(o, 0);
            struct bm_timeline *tz = sim(z, test_costs(z), NULL), *to = sim(o, test_costs(o), NULL);
            CHECK(tz && to);
            if (tz && to) {
                CHECKF(fabs(tz->makespan_ms - (3.0 * M + (P - 1))) < 1e-9, "P=%d M=%d zb-h1 %g", P, M, tz->makespan_ms);
                CHECKF(fabs(to->makespan_ms - 3.0 * (M + P - 1)) < 1e-9, "P=%d M=%d 1f1b %g", P, M, to->makespan_ms);
                CHECK_NEAR(tz->peak_mib, to->peak_mib, 1e-9);
                CHECK_NEAR(tz->ranks[0].peak_act_mib[BM_ROLE_BACKBONE], 4.0 * P / P * P, 1e-9);
                double fb = 0, fw = 0;
                for (int r = 0; r < P; r++) fb += tz->ranks[r].freed_b_mib, fw += tz->ranks[r].freed_w_mib;
                CHECK_NEAR(fb, 2.0 * P * M, 1e-6); /* half of 4P MiB per microbatch over the model */
                CHECK_NEAR(fw, 2.0 * P * M, 1e-6);
                check_ops(z, test_costs(z), tz);
                check_idle_sums(tz);
            }
            bm_timeline_free(tz);
            bm_timeline_free(to);
            test_table_free(z);
            test_table_free(o);
        }
}

TEST(makespan_interleaved_p4_v2_m8_is_28_5)
{
    struct bm_table *t = new_table(BM_BB_INTERLEAVED, 4, 2, 8, 4, 8, 0, 0); /* F=.5, B=1 per chunk */
    add_backbone(t, 0);
    struct bm_timeline *tl = sim(t, test_costs(t), NULL);
    CHECK(tl != NULL);
    if (tl) {
        CHECK_NEAR(tl->makespan_ms, 28.5, 1e-9);
        check_ops(t, test_costs(t), tl);
        for (int r = 0; r < 4; r++) CHECK_NEAR(tl->ranks[r].busy_ms, 24, 1e-9);
        check_idle_sums(tl);
    }
    bm_timeline_free(tl);
    test_table_free(t);
}

TEST(gpipe_p2_m2_by_hand)
{
    /* F=1, B=2 per stage.
     * rank 0: F0 [0,1] F1 [1,2]                 B0 [5,7] B1 [7,9]
     * rank 1:          F0 [1,2] F1 [2,3] B0 [3,5] B1 [5,7]            makespan 9 */
    struct bm_table *t = new_table(BM_BB_GPIPE, 2, 1, 2, 2, 4, 0, 0);
    add_backbone(t, 0);
    struct bm_timeline *tl = sim(t, test_costs(t), NULL);
    CHECK(tl != NULL);
    if (tl) {
        CHECK_NEAR(tl->makespan_ms, 9, 1e-9);
        const struct bm_rank_timeline *r0 = &tl->ranks[0], *r1 = &tl->ranks[1];
        CHECK_NEAR(r0->idle_lead_ms, 0, 1e-9);
        CHECK_NEAR(r0->idle_mid_ms, 3, 1e-9);
        CHECK_NEAR(r0->idle_tail_ms, 0, 1e-9);
        CHECK_NEAR(r1->idle_lead_ms, 1, 1e-9);
        CHECK_NEAR(r1->idle_mid_ms, 0, 1e-9);
        CHECK_NEAR(r1->idle_tail_ms, 2, 1e-9);
        CHECK_NEAR(tl->bubble_ratio, 6.0 / 18.0, 1e-12);
        /* rank 0's ops: F0 send F1 send recv(grad 0) B0 recv(grad 1) B1 */
        CHECK(t->ranks[0].n_ops == 8);
        const struct bm_op_time *o = r0->ops;
        CHECK_NEAR(o[0].start_ms, 0, 1e-9);
        CHECK_NEAR(o[0].end_ms, 1, 1e-9);
        CHECK_NEAR(o[1].start_ms, 1, 1e-9); /* send of F0 at its end */
        CHECK_NEAR(o[1].end_ms, 1, 1e-9);
        CHECK(o[1].wait_rank == 0 && o[1].wait_op == 0); /* produced by F0 */
        /* recv of grad 0: reached at 2, arrives at 5 when rank 1's B0 ends */
        CHECK(t->ranks[0].ops[4].kind == BM_OP_RECV);
        CHECK_NEAR(o[4].start_ms, 2, 1e-9);
        CHECK_NEAR(o[4].ready_ms, 5, 1e-9);
        CHECK_NEAR(o[4].end_ms, 5, 1e-9);
        CHECK(o[4].wait_rank == 1);
        CHECK(o[4].wait_op >= 0 && t->ranks[1].ops[o[4].wait_op].kind == BM_OP_SEND);
        /* B0 waited on that send (through the recv) */
        CHECK_NEAR(o[5].start_ms, 5, 1e-9);
        CHECK_NEAR(o[5].ready_ms, 5, 1e-9);
        CHECK(o[5].wait_rank == 1 && o[5].wait_op == o[4].wait_op);
        /* rank 1's F0 is ready at 1: data from rank 0's send at op 1 */
        CHECK_NEAR(r1->ops[1].start_ms, 1, 1e-9);
        CHECK(r1->ops[1].wait_rank == 0 && r1->ops[1].wait_op == 1);
        /* first op with no dependency: wait -1 */
        CHECK(o[0].wait_rank == -1 && o[0].wait_op == -1);
        check_idle_sums(tl);
    }
    bm_timeline_free(tl);
    test_table_free(t);
}

TEST(comm_latency_and_bandwidth_add_exactly)
{
    /* gpipe P=2 M=1, F=1 B=2 per stage: without comm 0-1 | 1-2, 2-4 | 4-6 -> 6.
     * Two transfers (activation, gradient) on the critical path. */
    struct bm_table *t = new_table(BM_BB_GPIPE, 2, 1, 1, 2, 4, 0, 0);
    add_backbone(t, 0);
    struct bm_timeline *tl = sim(t, test_costs(t), NULL);
    CHECK(tl && fabs(tl->makespan_ms - 6) < 1e-9);
    bm_timeline_free(tl);

    test_costs(t)->device.link_latency_us = 1000; /* 1 ms, unlimited bandwidth */
    tl = sim(t, test_costs(t), NULL);
    CHECK(tl != NULL);
    if (tl) {
        CHECK_NEAR(tl->makespan_ms, 8, 1e-9);
        CHECK_NEAR(tl->ranks[1].ops[0].ready_ms, 2, 1e-9); /* recv arrives 1 ms after the send at 1 */
        CHECK_NEAR(tl->ranks[1].idle_lead_ms, 2, 1e-9);
    }
    bm_timeline_free(tl);

    /* 1 MiB per microbatch over 1 GB/s: 1.048576 ms more per transfer */
    test_costs(t)->device.link_gbytes_per_s = 1;
    test_costs(t)->modules[t->backbone_module].out_mib = 1; /* every tensor is the backbone's */
    CHECK_NEAR(bm_cost_comm_ms(t, test_costs(t), 0), 1 + 1.048576, 1e-12);
    tl = sim(t, test_costs(t), NULL);
    CHECK(tl && fabs(tl->makespan_ms - (6 + 2 * 2.048576)) < 1e-9);
    if (tl) check_idle_sums(tl);
    if (tl) check_ops(t, test_costs(t), tl);
    bm_timeline_free(tl);
    test_table_free(t);
}

TEST(cost_model_chunk_weights_and_mb_scale)
{
    struct bm_table *t = new_table(BM_BB_1F1B, 2, 1, 2, 10, 20, 100, 1000);
    int vit = add_module(t, "vit", BM_ROLE_ENCODER, 3, 6, 10, 50, 1);
    int dit = add_module(t, "dit", BM_ROLE_GENERATOR, 5, 7, 0, 70, 1);
    test_costs(t)->chunk_weights = bm_malloc(2 * sizeof(double));
    test_costs(t)->chunk_weights[0] = 0.25;
    test_costs(t)->chunk_weights[1] = 0.75;
    test_costs(t)->mb_scale = bm_malloc(2 * sizeof(double));
    test_costs(t)->mb_scale[0] = 2;
    test_costs(t)->mb_scale[1] = 0.5;
    struct bm_op f1 = {BM_OP_COMPUTE, BM_PASS_F, (int16_t)t->backbone_module, 1, 0, -1, -1};
    struct bm_op b0 = {BM_OP_COMPUTE, BM_PASS_B, (int16_t)t->backbone_module, 0, 1, -1, -1};
    struct bm_op ef1 = {BM_OP_COMPUTE, BM_PASS_F, (int16_t)vit, -1, 1, -1, -1};
    struct bm_op eb0 = {BM_OP_COMPUTE, BM_PASS_B, (int16_t)vit, -1, 0, -1, -1};
    struct bm_op gf1 = {BM_OP_COMPUTE, BM_PASS_F, (int16_t)dit, -1, 1, -1, -1};
    CHECK_NEAR(bm_cost_compute_ms(t, test_costs(t), &f1, 0), 7.5, 1e-12);
    CHECK_NEAR(bm_cost_compute_ms(t, test_costs(t), &b0, 0), 5, 1e-12);
    CHECK_NEAR(bm_cost_compute_ms(t, test_costs(t), &ef1, 0), 1.5, 1e-12);
    CHECK_NEAR(bm_cost_compute_ms(t, test_costs(t), &eb0, 0), 12, 1e-12);
    CHECK_NEAR(bm_cost_compute_ms(t, test_costs(t), &gf1, 0), 5, 1e-12); /* generators unscaled */
    CHECK_NEAR(bm_cost_act_mib(t, test_costs(t), &f1), 75, 1e-12);
    CHECK_NEAR(bm_cost_act_mib(t, test_costs(t), &ef1), 10, 1e-12);
    /* state: backbone split by chunk weight; vit replica only where it computes (rank 1) */
    push(t, 1, BM_OP_COMPUTE, BM_PASS_F, vit, -1, 0, -1, -1);
    double st[2];
    bm_cost_state_mib(t, test_costs(t), st);
    CHECK_NEAR(st[0], 250, 1e-9);
    CHECK_NEAR(st[1], 750 + 50, 1e-9);
    test_table_free(t);
}

/* ---------------------------------------------------------------- memory */

TEST(memory_1f1b_rank0_holds_p_microbatches)
{
    /* act 40 MiB for the whole backbone -> 10 per chunk; state 400 -> 100 per rank. */
    struct bm_table *t = new_table(BM_BB_1F1B, 4, 1, 8, 4, 8, 40, 400);
    test_costs(t)->device.memory_gib = 1; /* 1024 MiB: no OOM */
    add_backbone(t, 0);
    struct bm_timeline *tl = sim(t, test_costs(t), NULL);
    CHECK(tl != NULL);
    if (tl) {
        for (int r = 0; r < 4; r++) {
            CHECK_NEAR(tl->ranks[r].peak_act_mib[BM_ROLE_BACKBONE], 10.0 * (4 - r), 1e-9);
            CHECK_NEAR(tl->ranks[r].peak_act_mib[BM_ROLE_ENCODER], 0, 1e-12);
            CHECK_NEAR(tl->ranks[r].state_mib, 100, 1e-9);
            CHECK_NEAR(tl->ranks[r].peak_mib, 100 + 10.0 * (4 - r), 1e-9);
            CHECK(!tl->ranks[r].oom);
            /* everything freed at the end; trace in non-decreasing time */
            const struct bm_rank_timeline *rt = &tl->ranks[r];
            CHECK(rt->n_mem > 0);
            if (rt->n_mem) CHECK_NEAR(rt->mem[rt->n_mem - 1].act_mib[BM_ROLE_BACKBONE], 0, 1e-9);
            for (int j = 1; j < rt->n_mem; j++) CHECK(rt->mem[j].t_ms >= rt->mem[j - 1].t_ms);
        }
        CHECK_NEAR(tl->peak_mib, 140, 1e-9);
        CHECK_NEAR(tl->peak_act_mib[BM_ROLE_BACKBONE], 40, 1e-9);
        /* rank 0's first points: +10 at 0, 1, 2, 3 (F0..F3 start) */
        CHECK(tl->ranks[0].mem[0].t_ms == 0 && tl->ranks[0].mem[3].t_ms == 3);
        CHECK_NEAR(tl->ranks[0].mem[3].act_mib[BM_ROLE_BACKBONE], 40, 1e-9);
    }
    bm_timeline_free(tl);

    test_costs(t)->device.memory_gib = 130.0 / 1024; /* 130 MiB: ranks 0 (140) and 1 (130 is not >) */
    tl = sim(t, test_costs(t), NULL);
    CHECK(tl && tl->oom && tl->ranks[0].oom && !tl->ranks[1].oom && !tl->ranks[3].oom);
    bm_timeline_free(tl);
    test_table_free(t);
}

TEST(memory_encoder_alive_for_three_microbatches)
{
    /* P=1: vit F0 F1 F2 B0 F3 B1 B2 B3 with act 10 MiB -> 30 MiB peak; state 50 on the rank. */
    struct bm_table *t = new_table(BM_BB_1F1B, 1, 1, 4, 1, 2, 0, 0);
    int vit = add_module(t, "vit", BM_ROLE_ENCODER, 1, 2, 10, 50, 1);
    int seq[][2] = {{BM_PASS_F, 0}, {BM_PASS_F, 1}, {BM_PASS_F, 2}, {BM_PASS_B, 0},
                    {BM_PASS_F, 3}, {BM_PASS_B, 1}, {BM_PASS_B, 2}, {BM_PASS_B, 3}};
    for (int k = 0; k < 8; k++) push(t, 0, BM_OP_COMPUTE, seq[k][0], vit, -1, seq[k][1], -1, -1);
    struct bm_timeline *tl = sim(t, test_costs(t), NULL);
    CHECK(tl != NULL);
    if (tl) {
        CHECK_NEAR(tl->ranks[0].peak_act_mib[BM_ROLE_ENCODER], 30, 1e-9);
        CHECK_NEAR(tl->ranks[0].state_mib, 50, 1e-9);
        CHECK_NEAR(tl->ranks[0].peak_mib, 80, 1e-9);
        CHECK_NEAR(tl->makespan_ms, 12, 1e-9);
        CHECK_NEAR(tl->bubble_ratio, 0, 1e-12);
        /* B0 ends at 5 (free), F3 starts at 5 (alloc): two points at t=5 */
        int at5 = 0;
        for (int j = 0; j < tl->ranks[0].n_mem; j++) at5 += tl->ranks[0].mem[j].t_ms == 5;
        CHECK(at5 == 2);
        check_idle_sums(tl);
    }
    bm_timeline_free(tl);
    test_table_free(t);
}

TEST(split_backward_frees_at_w)
{
    /* vit F0 B0 W0 with bwd 4: B and W take 2 each (the default w_ms is half of bwd_ms); the
     * activation (10 MiB) is freed in two steps: half at B's end (3), the rest at W's (5). */
    struct bm_table *t = new_table(BM_BB_1F1B, 1, 1, 1, 1, 2, 0, 0);
    int vit = add_module(t, "vit", BM_ROLE_ENCODER, 1, 4, 10, 0, 1);
    push(t, 0, BM_OP_COMPUTE, BM_PASS_F, vit, -1, 0, -1, -1);
    push(t, 0, BM_OP_COMPUTE, BM_PASS_B, vit, -1, 0, -1, -1);
    push(t, 0, BM_OP_COMPUTE, BM_PASS_W, vit, -1, 0, -1, -1);
    struct bm_timeline *tl = sim(t, test_costs(t), NULL);
    CHECK(tl != NULL);
    if (tl) {
        CHECK_NEAR(tl->makespan_ms, 5, 1e-9);
        CHECK_NEAR(tl->ranks[0].ops[1].end_ms, 3, 1e-9);
        CHECK(tl->ranks[0].n_mem == 3);
        if (tl->ranks[0].n_mem == 3) {
            CHECK_NEAR(tl->ranks[0].mem[1].t_ms, 3, 1e-9);
            CHECK_NEAR(tl->ranks[0].mem[1].act_mib[BM_ROLE_ENCODER], 5, 1e-9);
            CHECK_NEAR(tl->ranks[0].mem[2].t_ms, 5, 1e-9);
            CHECK_NEAR(tl->ranks[0].mem[2].act_mib[BM_ROLE_ENCODER], 0, 1e-9);
        }
        CHECK_NEAR(tl->ranks[0].freed_b_mib, 5, 1e-9);
        CHECK_NEAR(tl->ranks[0].freed_w_mib, 5, 1e-9);
        CHECK_NEAR(tl->ranks[0].peak_held_w_mib, 5, 1e-9);
    }
    bm_timeline_free(tl);
    test_table_free(t);
}

TEST(split_backward_costs_given)
{
    /* explicit w_ms 1 of bwd 4 and act_w_mib 2 of 10: B takes 3, W 1; B frees 8, W 2 */
    struct bm_table *t = new_table(BM_BB_1F1B, 1, 1, 1, 1, 2, 0, 0);
    int vit = add_module(t, "vit", BM_ROLE_ENCODER, 1, 4, 10, 0, 1);
    test_costs(t)->modules[vit].w_ms = 1;
    test_costs(t)->modules[vit].act_w_mib = 2;
    push(t, 0, BM_OP_COMPUTE, BM_PASS_F, vit, -1, 0, -1, -1);
    push(t, 0, BM_OP_COMPUTE, BM_PASS_B, vit, -1, 0, -1, -1);
    push(t, 0, BM_OP_COMPUTE, BM_PASS_W, vit, -1, 0, -1, -1);
    struct bm_timeline *tl = sim(t, test_costs(t), NULL);
    CHECK(tl != NULL);
    if (tl) {
        CHECK_NEAR(tl->ranks[0].ops[1].end_ms, 4, 1e-9);
        CHECK_NEAR(tl->makespan_ms, 5, 1e-9);
        CHECK_NEAR(tl->ranks[0].freed_b_mib, 8, 1e-9);
        CHECK_NEAR(tl->ranks[0].freed_w_mib, 2, 1e-9);
        CHECK(tl->ranks[0].n_mem == 3);
        if (tl->ranks[0].n_mem == 3) CHECK_NEAR(tl->ranks[0].mem[1].act_mib[BM_ROLE_ENCODER], 2, 1e-9);
    }
    bm_timeline_free(tl);
    test_table_free(t);
}

/* ---------------------------------------------------------------- jitter */

/* P=2 1F1B M=4 with an encoder F before each backbone F(chunk 0) on rank 0 and its B after
 * B(chunk 0) (unified-style), so encoder durations are on the critical path. */
static struct bm_table *unified_table(void)
{
    struct bm_table *t = new_table(BM_BB_1F1B, 2, 1, 4, 2, 4, 0, 0);
    int vit = add_module(t, "vit", BM_ROLE_ENCODER, 1, 2, 10, 0, 1);
    add_backbone(t, 0);
    /* Rebuild rank 0 with the encoder ops fused around chunk 0. */
    struct bm_rank_ops old = t->ranks[0];
    t->ranks[0] = (struct bm_rank_ops){0};
    for (int i = 0; i < old.n_ops; i++) {
        struct bm_op o = old.ops[i];
        if (o.kind == BM_OP_COMPUTE && o.pass == BM_PASS_F)
            push(t, 0, BM_OP_COMPUTE, BM_PASS_F, vit, -1, o.mb, -1, -1);
        push(t, 0, o.kind, o.pass, o.module, o.chunk, o.mb, o.peer, o.tensor);
        if (o.kind == BM_OP_COMPUTE && o.pass == BM_PASS_B)
            push(t, 0, BM_OP_COMPUTE, BM_PASS_B, vit, -1, o.mb, -1, -1);
    }
    bm_free(old.ops);
    return t;
}

TEST(jitter_reproducible_by_seed)
{
    struct bm_table *t = unified_table();
    struct bm_sim_opts none = {0, 0, 0}, zero = {0, 99, 0}, a = {0.5, 7, 0}, b = {0.5, 8, 0};
    struct bm_timeline *tn = sim(t, test_costs(t), NULL), *t0 = sim(t, test_costs(t), &zero), *ta = sim(t, test_costs(t), &a), *ta2 = sim(t, test_costs(t), &a),
                       *tb = sim(t, test_costs(t), &b), *tz = sim(t, test_costs(t), &none);
    CHECK(tn && t0 && ta && ta2 && tb && tz);
    if (tn && t0 && ta && ta2 && tb && tz) {
        /* no jitter: F=1 B=2 per stage plus encoder 1 + 2 per microbatch on rank 0 */
        CHECK(tn->makespan_ms == t0->makespan_ms && tn->makespan_ms == tz->makespan_ms);
        for (int r = 0; r < 2; r++)
            CHECK(!memcmp(tn->ranks[r].ops, t0->ranks[r].ops,
                          (size_t)tn->ranks[r].n_ops * sizeof *tn->ranks[r].ops));
        CHECK(ta->makespan_ms == ta2->makespan_ms);
        for (int r = 0; r < 2; r++)
            CHECK(!memcmp(ta->ranks[r].ops, ta2->ranks[r].ops,
                          (size_t)ta->ranks[r].n_ops * sizeof *ta->ranks[r].ops));
        CHECK(ta->makespan_ms != tn->makespan_ms);
        CHECK(ta->makespan_ms != tb->makespan_ms);
        /* jitter stays within [1-j, 1+j] per encoder op and never touches the backbone */
        for (int i = 0; i < t->ranks[0].n_ops; i++) {
            const struct bm_op *o = &t->ranks[0].ops[i];
            if (o->kind != BM_OP_COMPUTE) continue;
            double d = ta->ranks[0].ops[i].end_ms - ta->ranks[0].ops[i].start_ms;
            double d0 = tn->ranks[0].ops[i].end_ms - tn->ranks[0].ops[i].start_ms;
            if (o->module == t->backbone_module) CHECK_NEAR(d, d0, 1e-12);
            else CHECK(d >= 0.5 * d0 - 1e-12 && d <= 1.5 * d0 + 1e-12);
        }
        check_idle_sums(ta);
        check_idle_sums(tb);
    }
    bm_timeline_free(tn);
    bm_timeline_free(t0);
    bm_timeline_free(ta);
    bm_timeline_free(ta2);
    bm_timeline_free(tb);
    bm_timeline_free(tz);
    test_table_free(t);
}

TEST(unified_encoder_on_critical_path)
{
    /* Rank 0: EF0 F0 EF1 F1 ... the encoder's 1 ms per forward delays rank 1 by the same. */
    struct bm_table *t = unified_table();
    struct bm_timeline *tl = sim(t, test_costs(t), NULL);
    CHECK(tl != NULL);
    if (tl) {
        CHECK_NEAR(tl->ranks[0].busy_ms, 4 * (1 + 2 + 1 + 2), 1e-9);
        CHECK_NEAR(tl->ranks[0].busy_role_ms[BM_ROLE_ENCODER], 4 * (1 + 2), 1e-9);
        check_ops(t, test_costs(t), tl);
        CHECK_NEAR(tl->ranks[0].busy_role_ms[BM_ROLE_BACKBONE], 4 * (1 + 2), 1e-9);
        CHECK_NEAR(tl->ranks[1].busy_role_ms[BM_ROLE_ENCODER], 0, 1e-12);
        CHECK_NEAR(tl->ranks[1].idle_lead_ms, 2, 1e-9); /* EF0 [0,1] F0 [1,2] */
        CHECK(tl->makespan_ms > 16);
        /* encoder activations: rank 0 holds EF of mb 0 and 1 before EB0 (warm-up 1 + 1) */
        CHECK_NEAR(tl->ranks[0].peak_act_mib[BM_ROLE_ENCODER], 20, 1e-9);
        check_idle_sums(tl);
    }
    bm_timeline_free(tl);
    test_table_free(t);
}

/* ---------------------------------------------------------------- errors */

TEST(deadlock_is_an_error_not_a_hang)
{
    struct bm_table *t = new_table(BM_BB_1F1B, 2, 1, 1, 2, 4, 0, 0);
    int x = chunk_tensor(t, 0, 0), g = chunk_tensor(t, 0, 1);
    int bb = t->backbone_module;
    /* each rank receives before it sends: a cycle */
    push(t, 0, BM_OP_RECV, 0, bb, -1, 0, 1, g);
    push(t, 0, BM_OP_SEND, 0, bb, -1, 0, 1, x);
    push(t, 1, BM_OP_RECV, 0, bb, -1, 0, 0, x);
    push(t, 1, BM_OP_SEND, 0, bb, -1, 0, 0, g);
    struct bm_timeline *tl = (struct bm_timeline *)1;
    struct bm_err err;
    CHECK(bm_simulate(t, test_costs(t), NULL, &tl, &err) == BM_ERR);
    CHECK(tl == NULL);
    /* the verifier's words (one report, src/table/match.c): headline, cycle, each rank's op */
    CHECK_STR_CONTAINS(err.msg, "simulate: deadlock: 2 of 2 ranks cannot finish (each waits for a send that never happens)");
    CHECK_STR_CONTAINS(err.msg, "  cycle: rank 0 -> rank 1 -> rank 0 (each waits for the next)");
    CHECK_STR_CONTAINS(err.msg, "  rank 0 blocked at op #0 RECV_B:grad:llm.c0.out:0<1: waits for rank 1's op #1 "
                                "SEND_B:grad:llm.c0.out:0>0; rank 1 is itself blocked at op #0 RECV_F:llm.c0.out:0<0");
    CHECK_STR_CONTAINS(err.msg, "  rank 1 blocked at op #0 RECV_F:llm.c0.out:0<0");
    test_table_free(t);
}

TEST(recv_without_send_is_an_error)
{
    struct bm_table *t = new_table(BM_BB_1F1B, 2, 1, 1, 2, 4, 0, 0);
    push(t, 1, BM_OP_RECV, 0, t->backbone_module, -1, 0, 0, chunk_tensor(t, 0, 0));
    struct bm_timeline *tl;
    struct bm_err err;
    CHECK(bm_simulate(t, test_costs(t), NULL, &tl, &err) == BM_ERR);
    CHECK_STR_CONTAINS(err.msg, "rank 1 op 0 RECV_F:llm.c0.out:0<0 has no matching send");
    test_table_free(t);
}

TEST(malformed_ops_are_errors)
{
    struct bm_table *t = new_table(BM_BB_1F1B, 2, 1, 2, 2, 4, 0, 0);
    push(t, 0, BM_OP_SEND, 0, 0, -1, 0, 5, chunk_tensor(t, 0, 0));
    struct bm_timeline *tl;
    struct bm_err err;
    CHECK(bm_simulate(t, test_costs(t), NULL, &tl, &err) == BM_ERR);
    CHECK_STR_CONTAINS(err.msg, "peer 5 is not a rank 0..1");
    t->ranks[0].ops[0] = (struct bm_op){BM_OP_COMPUTE, BM_PASS_F, 0, 7, 0, -1, -1};
    CHECK(bm_simulate(t, test_costs(t), NULL, &tl, &err) == BM_ERR);
    CHECK_STR_CONTAINS(err.msg, "backbone chunk 7 is out of range 0..1");
    t->ranks[0].ops[0] = (struct bm_op){BM_OP_COMPUTE, BM_PASS_F, 0, 0, 2, -1, -1};
    CHECK(bm_simulate(t, test_costs(t), NULL, &tl, &err) == BM_ERR);
    CHECK_STR_CONTAINS(err.msg, "mb 2 is out of range 0..1");
    test_table_free(t);
}

TEST(duplicate_sends_match_in_order)
{
    /* Two sends and two recvs of the same key pair up FIFO. */
    struct bm_table *t = new_table(BM_BB_1F1B, 2, 1, 1, 2, 4, 0, 0);
    int x = chunk_tensor(t, 0, 0), bb = t->backbone_module;
    push(t, 0, BM_OP_SEND, 0, bb, -1, 0, 1, x);
    push(t, 0, BM_OP_COMPUTE, BM_PASS_F, bb, 0, 0, -1, -1);
    push(t, 0, BM_OP_SEND, 0, bb, -1, 0, 1, x);
    push(t, 1, BM_OP_RECV, 0, bb, -1, 0, 0, x);
    push(t, 1, BM_OP_RECV, 0, bb, -1, 0, 0, x);
    struct bm_timeline *tl = sim(t, test_costs(t), NULL);
    CHECK(tl != NULL);
    if (tl) {
        CHECK(tl->ranks[1].ops[0].wait_op == 0 && tl->ranks[1].ops[1].wait_op == 2);
        CHECK_NEAR(tl->ranks[1].ops[1].end_ms, 1, 1e-12);
    }
    bm_timeline_free(tl);
    test_table_free(t);
}

TEST(allocation_failures_are_reported)
{
    struct bm_table *t = new_table(BM_BB_INTERLEAVED, 4, 2, 8, 4, 8, 40, 400);
    add_backbone(t, 0);
    int failures = 0;
    for (long n = 1; n < 10000; n++) {
        struct bm_timeline *tl = NULL;
        struct bm_err err;
        bm_alloc_fail_at(n);
        int rc = bm_simulate(t, test_costs(t), NULL, &tl, &err);
        int fired = bm_alloc_failed();
        bm_alloc_fail_at(0);
        if (!fired) {
            CHECK(rc == BM_OK);
            bm_timeline_free(tl);
            break;
        }
        failures++;
        CHECK(rc == BM_ERR && tl == NULL);
        CHECK_STR_CONTAINS(err.msg, "out of memory");
    }
    CHECK(failures > 5);
    test_table_free(t);
}

/* ---------------------------------------------------------------- measured traces, grids */

TEST(summarize_a_measured_trace)
{
    struct bm_table *t = new_table(BM_BB_GPIPE, 1, 1, 1, 2, 4, 10, 100);
    test_costs(t)->device.memory_gib = 1;
    add_backbone(t, 0);
    struct bm_timeline *tl = bm_timeline_new(t, test_costs(t));
    CHECK(tl && tl->ranks[0].n_ops == 2 && tl->ranks[0].ops[0].wait_rank == -1);
    if (tl) {
        tl->measured = 1;
        tl->ranks[0].ops[0] = (struct bm_op_time){0.5, 2.5, 0, -1, -1, 0};
        tl->ranks[0].ops[1] = (struct bm_op_time){3, 7, 2.5, 0, 0, 0};
        double a[BM_N_ROLES] = {0, 10, 0}, z[BM_N_ROLES] = {0, 0, 0};
        CHECK(bm_timeline_mem_push(tl, 0, 0.5, a) == BM_OK);
        CHECK(bm_timeline_mem_push(tl, 0, 1.0, a) == BM_OK); /* unchanged: skipped */
        CHECK(bm_timeline_mem_push(tl, 0, 7, z) == BM_OK);
        CHECK(tl->ranks[0].n_mem == 2);
        bm_timeline_summarize(tl, t);
        CHECK_NEAR(tl->makespan_ms, 7, 1e-12);
        CHECK_NEAR(tl->ranks[0].busy_ms, 6, 1e-12);
        CHECK_NEAR(tl->ranks[0].idle_lead_ms, 0.5, 1e-12);
        CHECK_NEAR(tl->ranks[0].idle_mid_ms, 0.5, 1e-12);
        CHECK_NEAR(tl->ranks[0].idle_tail_ms, 0, 1e-12);
        CHECK_NEAR(tl->ranks[0].peak_mib, 110, 1e-12);
        CHECK_NEAR(tl->bubble_ratio, 1.0 / 7, 1e-12);
    }
    bm_timeline_free(tl);
    test_table_free(t);
}

TEST(grid_idle_sums_and_makespan_bounds)
{
    /* Over a grid: busy+idle == makespan on every rank; makespan >= the busiest rank; 1f1b's
     * closed form (M + P - 1)(F + B) with uniform stages and free comm. */
    enum bm_backbone bbs[3] = {BM_BB_GPIPE, BM_BB_1F1B, BM_BB_INTERLEAVED};
    for (int bi = 0; bi < 3; bi++)
        for (int P = 1; P <= 8; P *= 2)
            for (int M = P; M <= 4 * P; M += P)
                for (int V = 1; V <= (bbs[bi] == BM_BB_INTERLEAVED ? 3 : 1); V++) {
                    struct bm_table *t = new_table(bbs[bi], P, V, M, 3, 6, 8, 16);
                    test_costs(t)->device.link_latency_us = bi == 2 ? 100 : 0;
                    add_backbone(t, 0);
                    struct bm_timeline *tl = sim(t, test_costs(t), NULL);
                    CHECKF(tl != NULL, "%s P=%d V=%d M=%d", bm_backbone_name(bbs[bi]), P, V, M);
                    if (!tl) {
                        test_table_free(t);
                        continue;
                    }
                    check_idle_sums(tl);
                    check_ops(t, test_costs(t), tl);
                    for (int r = 0; r < P; r++) CHECK(tl->makespan_ms >= tl->ranks[r].busy_ms - 1e-9);
                    double per = 3.0 / P + 6.0 / P;
                    if (bbs[bi] != BM_BB_INTERLEAVED)
                        CHECKF(fabs(tl->makespan_ms - (M + P - 1) * per) < 1e-9,
                               "%s P=%d M=%d: %g", bm_backbone_name(bbs[bi]), P, M, tl->makespan_ms);
                    bm_timeline_free(tl);
                    test_table_free(t);
                }
}

/* ---------------------------------------------------------------- differential */

/* Naive reference: sweep every rank in program order again and again, advancing an op only when
 * its matching send (the k-th send of the same key for the k-th recv, found by linear scan) has
 * a time, until nothing changes. Fills start/end per op; returns the makespan, or -1 when stuck. */
static double reference_sim(const struct bm_table *t, const struct bm_costs *c, double **start, double **end)
{
    int P = t->pp;
    int *pc = calloc((size_t)P, sizeof *pc);
    double *tf = calloc((size_t)P, sizeof *tf);
    for (int progress = 1; progress;) {
        progress = 0;
        for (int r = 0; r < P; r++)
            for (; pc[r] < t->ranks[r].n_ops; pc[r]++) {
                int i = pc[r];
                const struct bm_op *o = &t->ranks[r].ops[i];
                if (o->kind == BM_OP_COMPUTE) {
                    start[r][i] = tf[r];
                    tf[r] += bm_cost_compute_ms(t, c, o, 0);
                } else if (o->kind == BM_OP_SEND) {
                    start[r][i] = tf[r];
                } else {
                    int k = 0; /* this is the k-th recv of its key on r */
                    for (int j = 0; j < i; j++) {
                        const struct bm_op *q = &t->ranks[r].ops[j];
                        k += q->kind == BM_OP_RECV && q->peer == o->peer && q->tensor == o->tensor && q->mb == o->mb;
                    }
                    int p = o->peer, found = -1;
                    for (int j = 0; j < t->ranks[p].n_ops && found < 0; j++) {
                        const struct bm_op *q = &t->ranks[p].ops[j];
                        if (q->kind == BM_OP_SEND && q->peer == r && q->tensor == o->tensor && q->mb == o->mb && k-- == 0)
                            found = j;
                    }
                    if (found < 0 || found >= pc[p]) break; /* not issued yet */
                    start[r][i] = tf[r];
                    double arrive = start[p][found] + bm_cost_comm_ms(t, c, o->tensor);
                    if (arrive > tf[r]) tf[r] = arrive;
                }
                end[r][i] = tf[r];
                progress = 1;
            }
    }
    double ms = 0;
    int stuck = 0;
    for (int r = 0; r < P; r++) {
        stuck |= pc[r] < t->ranks[r].n_ops;
        if (tf[r] > ms) ms = tf[r];
    }
    free(pc);
    free(tf);
    return stuck ? -1 : ms;
}

/* Backbone schedule + Optimus-style encoder on owner rank m % P (EF hoisted, EB deferred) with
 * random costs, chunk weights, mb scales, latency and bandwidth. */
static struct bm_table *random_table(struct bm_rng *g)
{
    int P = 1 + (int)(bm_rng_next(g) % 5), bbk = (int)(bm_rng_next(g) % 3), V = 1;
    enum bm_backbone bb = (enum bm_backbone)bbk;
    if (bb == BM_BB_INTERLEAVED) V = 1 + (int)(bm_rng_next(g) % 3);
    int M = P * (1 + (int)(bm_rng_next(g) % 3)) + (bb == BM_BB_INTERLEAVED ? 0 : (int)(bm_rng_next(g) % 3));
    struct bm_table *t = new_table(bb, P, V, M, 1 + 9 * bm_rng_uniform(g), 2 + 18 * bm_rng_uniform(g), 0, 0);
    int vit = add_module(t, "vit", BM_ROLE_ENCODER, bm_rng_uniform(g), 2 * bm_rng_uniform(g), 1, 1, 1);
    int C = P * V;
    test_costs(t)->chunk_weights = bm_malloc((size_t)C * sizeof(double));
    double sum = 0;
    for (int c = 0; c < C; c++) sum += test_costs(t)->chunk_weights[c] = 0.2 + bm_rng_uniform(g);
    for (int c = 0; c < C; c++) test_costs(t)->chunk_weights[c] /= sum;
    test_costs(t)->mb_scale = bm_malloc((size_t)M * sizeof(double));
    for (int m = 0; m < M; m++) test_costs(t)->mb_scale[m] = 0.5 + 1.5 * bm_rng_uniform(g);
    test_costs(t)->device.link_latency_us = 1000 * bm_rng_uniform(g);
    test_costs(t)->device.link_gbytes_per_s = bm_rng_uniform(g) < 0.5 ? 0 : 1 + 10 * bm_rng_uniform(g);
    int emb = bm_table_tensor(t, "vis_emb", vit, 0), gemb = bm_table_tensor(t, "grad:vis_emb", vit, 1);
    /* backbone first (into a scratch table), then splice encoder ops around it */
    add_backbone(t, 0);
    for (int r = 0; r < P; r++) {
        struct bm_rank_ops old = t->ranks[r];
        t->ranks[r] = (struct bm_rank_ops){0};
        /* a tensor made on the rank that needs it does not travel (no rank sends to itself) */
        for (int m = r; m < M; m += P) {
            push(t, r, BM_OP_COMPUTE, BM_PASS_F, vit, -1, m, -1, -1);
            if (r != 0) push(t, r, BM_OP_SEND, 0, vit, -1, m, 0, emb);
        }
        for (int i = 0; i < old.n_ops; i++) {
            struct bm_op o = old.ops[i];
            if (o.kind == BM_OP_COMPUTE && o.chunk == 0 && o.pass == BM_PASS_F && o.mb % P != r)
                push(t, r, BM_OP_RECV, 0, vit, -1, o.mb, o.mb % P, emb);
            push(t, r, o.kind, o.pass, o.module, o.chunk, o.mb, o.peer, o.tensor);
            if (o.kind == BM_OP_COMPUTE && o.chunk == 0 && o.pass == BM_PASS_B && o.mb % P != r)
                push(t, r, BM_OP_SEND, 0, vit, -1, o.mb, o.mb % P, gemb);
        }
        bm_free(old.ops);
    }
    for (int r = 0; r < P; r++)
        for (int m = r; m < M; m += P) {
            if (r != 0) push(t, r, BM_OP_RECV, 0, vit, -1, m, 0, gemb);
            push(t, r, BM_OP_COMPUTE, BM_PASS_B, vit, -1, m, -1, -1);
        }
    return t;
}

TEST(differential_against_naive_reference)
{
    struct bm_rng g;
    bm_rng_seed(&g, 2026);
    for (int iter = 0; iter < 200; iter++) {
        struct bm_table *t = random_table(&g);
        double **st = calloc((size_t)t->pp, sizeof *st), **en = calloc((size_t)t->pp, sizeof *en);
        for (int r = 0; r < t->pp; r++) {
            st[r] = calloc((size_t)t->ranks[r].n_ops + 1, sizeof **st);
            en[r] = calloc((size_t)t->ranks[r].n_ops + 1, sizeof **en);
        }
        double ref = reference_sim(t, test_costs(t), st, en);
        struct bm_timeline *tl = sim(t, test_costs(t), NULL);
        CHECKF(ref >= 0 && tl, "iter %d: reference %g, simulate %p", iter, ref, (void *)tl);
        if (tl && ref >= 0) {
            CHECKF(fabs(tl->makespan_ms - ref) < 1e-9, "iter %d P=%d V=%d M=%d %s: %g vs reference %g",
                   iter, t->pp, t->vpp, t->microbatches, bm_backbone_name(t->backbone), tl->makespan_ms, ref);
            int bad = 0;
            for (int r = 0; r < t->pp; r++)
                for (int i = 0; i < t->ranks[r].n_ops; i++)
                    bad += fabs(tl->ranks[r].ops[i].start_ms - st[r][i]) > 1e-9 ||
                           fabs(tl->ranks[r].ops[i].end_ms - en[r][i]) > 1e-9;
            CHECKF(bad == 0, "iter %d: %d ops differ from the reference", iter, bad);
            check_ops(t, test_costs(t), tl);
            check_idle_sums(tl);
            /* encoder activations: optimus holds every owned microbatch until the end */
            for (int r = 0; r < t->pp; r++)
                CHECK_NEAR(tl->ranks[r].peak_act_mib[BM_ROLE_ENCODER], (t->microbatches - r + t->pp - 1) / t->pp, 1e-9);
        }
        for (int r = 0; r < t->pp; r++) {
            free(st[r]);
            free(en[r]);
        }
        free(st);
        free(en);
        bm_timeline_free(tl);
        test_table_free(t);
    }
}

/* ---------------------------------------------------------------- planner tables */

TEST(planned_tables_simulate_for_every_policy)
{
    struct bm_spec *spec;
    struct bm_err err;
    if (bm_spec_load("examples/tiny-mllm.json", &spec, &err)) {
        CHECKF(0, "%s", err.msg);
        return;
    }
    enum bm_backbone bbs[3] = {BM_BB_GPIPE, BM_BB_1F1B, BM_BB_INTERLEAVED};
    for (int bi = 0; bi < 3; bi++)
        for (int pol = 0; pol < BM_N_POLICIES; pol++)
            for (int M = 4; M <= 16; M *= 2) {
                struct bm_plan_opts o;
                bm_plan_opts_from_spec(&o, spec);
                o.backbone = bbs[bi];
                o.vpp = bbs[bi] == BM_BB_INTERLEAVED ? 2 : 1;
                o.microbatches = M;
                o.policy = (enum bm_policy)pol;
                struct bm_table *t;
                struct bm_costs *t_c = NULL;
                if (bm_plan_build(spec, &o, &t, &t_c, &err)) {
                    CHECKF(0, "%s %s M=%d: plan: %s", bm_backbone_name(o.backbone),
                           bm_policy_name(o.policy), M, err.msg);
                    continue;
                }
                struct bm_timeline *tl = NULL;
                CHECKF(bm_simulate(t, t_c, NULL, &tl, &err) == BM_OK, "%s %s M=%d: %s",
                       bm_backbone_name(o.backbone), bm_policy_name(o.policy), M, err.msg);
                if (tl) {
                    check_ops(t, t_c, tl);
                    check_idle_sums(tl);
                    /* every activation is freed by the end of the iteration */
                    for (int r = 0; r < t->pp; r++) {
                        const struct bm_rank_timeline *rt = &tl->ranks[r];
                        if (rt->n_mem)
                            for (int k = 0; k < BM_N_ROLES; k++)
                                CHECK(fabs(rt->mem[rt->n_mem - 1].act_mib[k]) < 1e-9);
                    }
                    /* P ranks cannot do more than P x makespan of work */
                    double busy = 0;
                    for (int r = 0; r < t->pp; r++) busy += tl->ranks[r].busy_ms;
                    CHECK(tl->makespan_ms * t->pp >= busy - 1e-6);
                }
                bm_timeline_free(tl);
                test_table_free(t), bm_costs_free(t_c), t_c = NULL;
            }
    bm_spec_free(spec);
}

/* bm_simulate_summary against bm_simulate, and the figures bm_simulate gathers while running
 * against bm_timeline_summarize + the step model run afterwards on its own op times (the
 * reference: how every figure was computed before): equal bit for bit, on planned tables of
 * every policy and backbone kind, split backwards, recomputation, replicas with ZeRO-1, hosts. */
static int figures_equal(const struct bm_timeline *a, const struct bm_timeline *b)
{
    int same = a->pp == b->pp && a->makespan_ms == b->makespan_ms && a->bubble_ratio == b->bubble_ratio &&
               a->samples_per_s == b->samples_per_s && a->peak_mib == b->peak_mib && a->oom == b->oom &&
               a->step_ms == b->step_ms && a->sync_exposed_ms == b->sync_exposed_ms &&
               a->sync_total_ms == b->sync_total_ms && a->optimizer_ms == b->optimizer_ms &&
               a->memory_cap_mib == b->memory_cap_mib &&
               !memcmp(a->peak_act_mib, b->peak_act_mib, sizeof a->peak_act_mib);
    for (int r = 0; same && r < a->pp; r++) {
        const struct bm_rank_timeline *x = &a->ranks[r], *y = &b->ranks[r];
        same = x->state_mib == y->state_mib && x->peak_mib == y->peak_mib && x->busy_ms == y->busy_ms &&
               x->idle_lead_ms == y->idle_lead_ms && x->idle_mid_ms == y->idle_mid_ms &&
               x->idle_tail_ms == y->idle_tail_ms && x->oom == y->oom && x->freed_b_mib == y->freed_b_mib &&
               x->freed_w_mib == y->freed_w_mib && x->peak_held_w_mib == y->peak_held_w_mib &&
               !memcmp(x->peak_act_mib, y->peak_act_mib, sizeof x->peak_act_mib) &&
               !memcmp(x->busy_role_ms, y->busy_role_ms, sizeof x->busy_role_ms);
    }
    return same;
}

TEST(summary_equals_the_full_timeline_and_summarize)
{
    const char *specs[] = {"examples/tiny-mllm.json", "examples/tiny-mllm-2enc.json", "tests/specs/exec-recompute.json",
                           "tests/specs/hosts-p8.json", "tests/specs/recompute-oom.json", "tests/specs/exec-2gen.json"};
    enum bm_backbone bbs[4] = {BM_BB_1F1B, BM_BB_INTERLEAVED, BM_BB_ZB_H1, BM_BB_GPIPE};
    int cases = 0;
    for (int si = 0; si < 6; si++) {
        struct bm_spec *spec;
        struct bm_err err;
        if (bm_spec_load(specs[si], &spec, &err)) {
            CHECKF(0, "%s", err.msg);
            continue;
        }
        for (int bi = 0; bi < 4; bi++)
            for (int pol = 0; pol < BM_N_POLICIES; pol++)
                for (int dp = 1; dp <= 2; dp++) {
                    struct bm_plan_opts o;
                    bm_plan_opts_from_spec(&o, spec);
                    o.backbone = bbs[bi];
                    o.vpp = bbs[bi] == BM_BB_INTERLEAVED ? 2 : 1;
                    o.microbatches = 4 * o.pp;
                    o.policy = (enum bm_policy)pol;
                    o.dp = dp;
                    o.zero = dp - 1;
                    struct bm_table *t;
                    struct bm_costs *t_c = NULL;
                    if (bm_plan_build(spec, &o, &t, &t_c, &err)) continue; /* e.g. a window too small */
                    struct bm_sim_opts so = {0.2, 7, 3}; /* jitter: the encoders' times differ */
                    struct bm_timeline *full = NULL, *sum = NULL;
                    CHECKF(bm_simulate(t, t_c, &so, &full, &err) == BM_OK, "%s: %s", specs[si], err.msg);
                    CHECKF(bm_simulate_summary(t, t_c, &so, &sum, &err) == BM_OK, "%s: %s", specs[si], err.msg);
                    if (full && sum) {
                        cases++;
                        CHECKF(figures_equal(full, sum), "%s %s %s dp %d: summary differs", specs[si],
                               bm_backbone_name(o.backbone), bm_policy_name(o.policy), dp);
                        for (int r = 0; r < sum->pp; r++) CHECK(!sum->ranks[r].ops && !sum->ranks[r].mem);
                        bm_timeline_summarize(sum, t); /* nothing to recompute from: the figures stay */
                        CHECKF(figures_equal(full, sum), "%s %s %s dp %d: summarize changed a summary", specs[si],
                               bm_backbone_name(o.backbone), bm_policy_name(o.policy), dp);
                        if (cases == 1) { /* no op times to draw: refused, never read */
                            FILE *nul = fopen("/dev/null", "w");
                            struct bm_critical cp;
                            CHECK(nul && bm_render_svg(t, sum, NULL, 0, nul) == BM_ERR);
                            CHECK(nul && bm_render_ascii(t, sum, 80, nul) == BM_ERR);
                            CHECK(nul && bm_render_trace(t, t_c, sum, nul) == BM_ERR);
                            CHECK(nul && bm_render_html(t, t_c, sum, NULL, NULL, nul) == BM_ERR);
                            CHECK(bm_critical_path(t, sum, &cp, &err) == BM_ERR);
                            bm_critical_free(t, &cp);
                            CHECK(nul && bm_render_svg(t, full, NULL, 0, nul) == BM_OK);
                            CHECK(nul && bm_render_trace(t, t_c, full, nul) == BM_OK);
                            if (nul) fclose(nul);
                        }
                        /* the reference: summarize the full timeline's own op times, then the step */
                        struct bm_timeline ref = *full;
                        struct bm_rank_timeline *rr = calloc((size_t)full->pp, sizeof *rr);
                        if (!rr) continue;
                        memcpy(rr, full->ranks, (size_t)full->pp * sizeof *rr);
                        ref.ranks = rr;
                        bm_timeline_summarize(&ref, t);
                        struct bm_step st;
                        CHECK(bm_step_model(t, t_c, &ref, &st, &err) == BM_OK);
                        ref.step_ms = st.step_ms, ref.sync_exposed_ms = st.sync_exposed_ms;
                        ref.sync_total_ms = st.sync_total_ms, ref.optimizer_ms = st.optimizer_ms;
                        bm_timeline_summarize(&ref, t); /* samples/s of the step */
                        CHECKF(figures_equal(full, &ref), "%s %s %s dp %d: gathered figures differ from summarize",
                               specs[si], bm_backbone_name(o.backbone), bm_policy_name(o.policy), dp);
                        free(rr);
                    }
                    bm_timeline_free(full);
                    bm_timeline_free(sum);
                    test_table_free(t), bm_costs_free(t_c);
                }
        bm_spec_free(spec);
    }
    CHECKF(cases > 100, "%d cases", cases);
}

int main(void)
{
    RUN(makespan_1f1b_p4_m8_is_33);
    RUN(makespan_interleaved_p4_v2_m8_is_28_5);
    RUN(gpipe_p2_m2_by_hand);
    RUN(comm_latency_and_bandwidth_add_exactly);
    RUN(cost_model_chunk_weights_and_mb_scale);
    RUN(memory_1f1b_rank0_holds_p_microbatches);
    RUN(memory_encoder_alive_for_three_microbatches);
    RUN(makespan_zb_h1_bubble_is_a_third_of_1f1b);
    RUN(split_backward_frees_at_w);
    RUN(split_backward_costs_given);
    RUN(jitter_reproducible_by_seed);
    RUN(unified_encoder_on_critical_path);
    RUN(deadlock_is_an_error_not_a_hang);
    RUN(recv_without_send_is_an_error);
    RUN(malformed_ops_are_errors);
    RUN(duplicate_sends_match_in_order);
    RUN(allocation_failures_are_reported);
    RUN(summarize_a_measured_trace);
    RUN(grid_idle_sums_and_makespan_bounds);
    RUN(differential_against_naive_reference);
    RUN(planned_tables_simulate_for_every_policy);
    RUN(summary_equals_the_full_timeline_and_summarize);
    return test_summary();
}
