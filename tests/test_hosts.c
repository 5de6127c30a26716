/* test_hosts.c — placement over hosts (src/sim/hosts.h, docs/multihost.md): a P = 8 pipeline
 * over two hosts with a slow inter-host link against hand-computed makespans (the extra cost
 * lands on exactly the transfers that cross hosts), the traffic figures reports print, and the
 * spec and table keys (device.ranks_per_host, inter_host_gbytes_per_s, inter_host_latency_us).
 * Tables are built here with bm_table_new/push/tensor, independent of the planner. */
#include "test.h"
#include "sim/cost.h"
#include "sim/hosts.h"
#include "util/util.h"

/* ---------------------------------------------------------------- table builders */

/* P-rank table with only a backbone "llm" and its cost model (*c): whole-module fwd/bwd ms
 * (uniform chunk weights), each chunk's output out_mib; intra-host link: latency lat_us,
 * unlimited bandwidth. */
static struct bm_table *new_table(enum bm_backbone bb, int P, int M, double fwd, double bwd, double out_mib,
                                  double lat_us, struct bm_costs **c)
{
    struct bm_table *t = bm_table_new(P);
    t->vpp = 1, t->microbatches = M, t->unit = P, t->backbone = bb, t->policy = BM_POL_NONE;
    t->modules = bm_calloc(1, sizeof *t->modules);
    t->modules[0].name = bm_strdup("llm");
    t->modules[0].role = BM_ROLE_BACKBONE;
    t->n_modules = 1, t->backbone_module = 0;
    if (!(*c = bm_costs_new(t))) abort();
    (*c)->modules[0] = (struct bm_cost){fwd, bwd, 0, 0, out_mib, 0, 0, 0};
    (*c)->device = (struct bm_device){.peak_tflops = 989, .efficiency = 0.4, .link_latency_us = lat_us,
                                      .inter_host_gbytes_per_s = 12.5, .inter_host_latency_us = 20};
    return t;
}

static void push(struct bm_table *t, int r, int kind, int pass, int chunk, int mb, int peer, int tensor)
{
    struct bm_err err;
    struct bm_op op = {(uint8_t)kind, (uint8_t)pass, 0, chunk, mb, peer, tensor};
    if (bm_table_push(t, r, op, &err)) abort();
}

static int chunk_tensor(struct bm_table *t, int c, int grad)
{
    char name[64];
    snprintf(name, sizeof name, "%sllm.c%d.out", grad ? "grad:" : "", c);
    return bm_table_tensor(t, name, 0, grad);
}

/* The backbone schedule lowered: recv right before the consumer, send right after the producer. */
static void add_backbone(struct bm_table *t)
{
    int P = t->pp, M = t->microbatches;
    struct bm_bb_step *steps = bm_malloc((size_t)(2 * M) * sizeof *steps);
    struct bm_err err;
    for (int r = 0; r < P; r++) {
        if (bm_backbone_order(t->backbone, P, 1, M, r, 0, steps, &err)) abort();
        for (int k = 0; k < 2 * M; k++) {
            int c = steps[k].chunk, mb = steps[k].mb;
            if (steps[k].pass == BM_PASS_F) {
                if (c > 0) push(t, r, BM_OP_RECV, 0, -1, mb, c - 1, chunk_tensor(t, c - 1, 0));
                push(t, r, BM_OP_COMPUTE, BM_PASS_F, c, mb, -1, -1);
                if (c < P - 1) push(t, r, BM_OP_SEND, 0, -1, mb, c + 1, chunk_tensor(t, c, 0));
            } else {
                if (c < P - 1) push(t, r, BM_OP_RECV, 0, -1, mb, c + 1, chunk_tensor(t, c, 1));
                push(t, r, BM_OP_COMPUTE, BM_PASS_B, c, mb, -1, -1);
                if (c > 0) push(t, r, BM_OP_SEND, 0, -1, mb, c - 1, chunk_tensor(t, c - 1, 1));
            }
        }
    }
    bm_free(steps);
}

static double makespan(const struct bm_table *t, const struct bm_costs *t_c)
{
    struct bm_timeline *tl = NULL;
    struct bm_err err;
    if (bm_simulate(t, t_c, NULL, &tl, &err)) {
        fprintf(stderr, "  simulate failed: %s\n", err.msg);
        return -1;
    }
    double ms = tl->makespan_ms;
    bm_timeline_free(tl);
    return ms;
}

/* The pipeline of every test below: P = 8, GPipe, M = 4, F = 1 ms and B = 2 ms per stage, chunk
 * outputs of 1 MiB; intra-host link 100 us (d = 0.1 ms), inter-host link 1 MiB in 1 ms
 * (1.048576 GB/s) plus 500 us: x = 1.5 ms per transfer.
 *
 * By hand: rank r starts F_m at r + m + D_r, D_r the link delays of hops 0->1 .. r-1->r (a
 * rank's F_m arrives exactly when it finishes F_{m-1}); rank 7 starts B_0 when its F_3 ends,
 * at 11 + D_7; rank r's B_m starts 2 ms + the hop's delay after rank r+1's (its B_{m-1} ends
 * exactly then); rank 0's B_3 ends at 11 + D_7 + 6 + 7*2 + 2 + D_7 = 33 + 2 D_7. D_7 is
 * 7d on one host, 6d + x over two hosts of 4 ranks (hop 3->4 crosses), 4d + 3x over four hosts
 * of 2 (hops 1->2, 3->4, 5->6). */
#define D 0.1
#define X 1.5
static struct bm_table *pipeline8(int ranks_per_host, struct bm_costs **c)
{
    struct bm_table *t = new_table(BM_BB_GPIPE, 8, 4, 8, 16, 1, D * 1000, c);
    t->ranks_per_host = ranks_per_host;
    (*c)->device.inter_host_gbytes_per_s = 1.048576;
    (*c)->device.inter_host_latency_us = 500;
    add_backbone(t);
    return t;
}

/* ---------------------------------------------------------------- makespans */

TEST(p8_one_host_is_33_plus_14d)
{
    for (int h = 0; h <= 16; h += 8) { /* no placement; 8 and 16 ranks per host: one host */
        struct bm_costs *t_c = NULL;
        struct bm_table *t = pipeline8(h, &t_c);
        CHECK_NEAR(makespan(t, t_c), 33 + 2 * 7 * D, 1e-9);
        CHECK(bm_cost_n_hosts(t) == 1);
        bm_table_free(t), bm_costs_free(t_c);
    }
}

TEST(p8_two_hosts_slow_link_is_33_plus_2_6d_plus_x)
{
    struct bm_costs *t_c = NULL;
    struct bm_table *t = pipeline8(4, &t_c);
    CHECK_NEAR(makespan(t, t_c), 33 + 2 * (6 * D + X), 1e-9);
    CHECK(bm_cost_n_hosts(t) == 2);
    for (int r = 0; r < 8; r++) CHECK(bm_cost_host(t, r) == r / 4);
    CHECK_NEAR(bm_cost_inter_host_ms(t, t_c, 0), X, 1e-12);
    CHECK_NEAR(bm_cost_comm_ms(t, t_c, 0), D, 1e-12);
    CHECK_NEAR(bm_cost_transfer_ms(t, t_c, 0, 3, 4), X, 1e-12);
    CHECK_NEAR(bm_cost_transfer_ms(t, t_c, 0, 4, 3), X, 1e-12);
    CHECK_NEAR(bm_cost_transfer_ms(t, t_c, 0, 2, 3), D, 1e-12);
    CHECK_NEAR(bm_cost_transfer_ms(t, t_c, 0, 4, 5), D, 1e-12);
    bm_table_free(t), bm_costs_free(t_c);
}

TEST(p8_four_hosts_is_33_plus_2_4d_plus_3x)
{
    struct bm_costs *t_c = NULL;
    struct bm_table *t = pipeline8(2, &t_c);
    CHECK_NEAR(makespan(t, t_c), 33 + 2 * (4 * D + 3 * X), 1e-9);
    CHECK(bm_cost_n_hosts(t) == 4);
    bm_table_free(t), bm_costs_free(t_c);
}

/* Only the transfers that cross hosts pay: every recv on rank 4 (from rank 3) arrives X after
 * its send, every recv on rank 3 (from rank 4) too; the others D after theirs. */
TEST(p8_two_hosts_extra_cost_on_crossing_transfers_only)
{
    struct bm_costs *t_c = NULL;
    struct bm_table *t = pipeline8(4, &t_c);
    struct bm_timeline *tl = NULL;
    struct bm_err err;
    CHECK(bm_simulate(t, t_c, NULL, &tl, &err) == BM_OK);
    int crossing = 0, other = 0;
    for (int r = 0; tl && r < 8; r++)
        for (int i = 0; i < t->ranks[r].n_ops; i++) {
            const struct bm_op *op = &t->ranks[r].ops[i];
            const struct bm_op_time *ot = &tl->ranks[r].ops[i];
            if (op->kind != BM_OP_RECV) continue;
            double sent = tl->ranks[ot->wait_rank].ops[ot->wait_op].start_ms;
            CHECK(ot->wait_rank == op->peer);
            int cross = r / 4 != op->peer / 4;
            CHECK_NEAR(ot->ready_ms - sent, cross ? X : D, 1e-9);
            crossing += cross, other += !cross;
        }
    CHECK(crossing == 8 && other == 48); /* M forward + M backward over the 3|4 boundary */
    /* rank 4's first forward waits for rank 3's F0 (ends at 4 + 3d) plus the slow link */
    if (tl) CHECK_NEAR(tl->ranks[4].idle_lead_ms, 4 + 3 * D + X, 1e-9);
    bm_timeline_free(tl);
    bm_table_free(t), bm_costs_free(t_c), t_c = NULL;
}

TEST(host_traffic_counts_crossing_sends)
{
    struct bm_costs *t_c = NULL;
    struct bm_table *t = pipeline8(4, &t_c);
    struct bm_host_traffic h;
    bm_cost_host_traffic(t, t_c, &h);
    CHECK(h.hosts == 2 && h.sends == 2 * 7 * 4 && h.cross == 2 * 4);
    CHECK_NEAR(h.cross_mib, 8, 1e-12);
    CHECK_NEAR(h.cross_ms, 8 * X, 1e-9);
    CHECK_NEAR(h.cross_intra_ms, 8 * D, 1e-9);
    t->ranks_per_host = 0;
    bm_cost_host_traffic(t, t_c, &h);
    CHECK(h.hosts == 1 && h.cross == 0 && h.cross_ms == 0);
    bm_table_free(t), bm_costs_free(t_c);
}

/* ---------------------------------------------------------------- spec and table keys */

static const char *spec_text(const char *device)
{
    static char buf[2048];
    snprintf(buf, sizeof buf,
             "{\"format\": \"bigmac-spec\", \"version\": 1, \"device\": {%s},\n"
             " \"parallel\": {\"pp\": 8, \"microbatches\": 8},\n"
             " \"schedule\": {\"backbone\": \"1f1b\", \"policy\": \"none\"},\n"
             " \"inputs\": [\"tokens\"],\n"
             " \"modules\": [{\"name\": \"llm\", \"role\": \"backbone\", \"consumes\": [\"tokens\"],\n"
             "   \"produces\": [\"loss\"], \"layers\": 16,\n"
             "   \"cost\": {\"fwd_ms\": 8, \"bwd_ms\": 16, \"act_mib\": 64, \"state_mib\": 512, \"out_mib\": 32}}]}\n",
             device);
    return buf;
}

TEST(spec_keys_parse_and_default)
{
    struct bm_spec *s = NULL;
    struct bm_err err;
    CHECK(bm_spec_parse(spec_text("\"link_gbytes_per_s\": 100"), "h.json", &s, &err) == BM_OK);
    if (s) CHECK(s->device.ranks_per_host == 0 && s->device.inter_host_gbytes_per_s == 12.5 &&
                 s->device.inter_host_latency_us == 20);
    bm_spec_free(s);
    s = NULL;
    CHECK(bm_spec_parse(spec_text("\"ranks_per_host\": 4, \"inter_host_gbytes_per_s\": 2, "
                                  "\"inter_host_latency_us\": 50"), "h.json", &s, &err) == BM_OK);
    if (s) CHECK(s->device.ranks_per_host == 4 && s->device.inter_host_gbytes_per_s == 2 &&
                 s->device.inter_host_latency_us == 50);
    bm_spec_free(s);
}

TEST(spec_bad_keys_are_refused_by_name)
{
    static const struct { const char *device, *says; } bad[] = {
        {"\"ranks_per_host\": 0", "device.ranks_per_host"},
        {"\"ranks_per_host\": 2.5", "device.ranks_per_host"},
        {"\"ranks_per_host\": \"two\"", "device.ranks_per_host"},
        {"\"ranks_per_host\": 2, \"inter_host_gbytes_per_s\": 0", "device.inter_host_gbytes_per_s"},
        {"\"ranks_per_host\": 2, \"inter_host_latency_us\": -1", "device.inter_host_latency_us"},
        {"\"inter_host_gbytes_per_s\": 3", "device.ranks_per_host is not given"},
        {"\"inter_host_latency_us\": 3", "device.inter_host_latency_us describes the link between hosts"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct bm_spec *s = NULL;
        struct bm_err err;
        CHECKF(bm_spec_parse(spec_text(bad[i].device), "h.json", &s, &err) != BM_OK, "%s", bad[i].device);
        CHECK(s == NULL);
        CHECK_STR_CONTAINS(err.msg, bad[i].says);
        CHECK_STR_CONTAINS(err.msg, "h.json:");
    }
}

/* The planner carries the placement into the table, the simulator prices it, and the table's
 * JSON keeps it (and a table on one host is written without the keys). */
TEST(planned_spec_over_two_hosts_costs_more_and_round_trips)
{
    struct bm_spec *s1 = NULL, *s2 = NULL;
    struct bm_err err;
    CHECK(bm_spec_parse(spec_text("\"link_latency_us\": 10"), "one.json", &s1, &err) == BM_OK);
    CHECK(bm_spec_parse(spec_text("\"link_latency_us\": 10, \"ranks_per_host\": 4, "
                                  "\"inter_host_gbytes_per_s\": 1, \"inter_host_latency_us\": 100"),
                        "two.json", &s2, &err) == BM_OK);
    if (!s1 || !s2) goto out;
    struct bm_plan_opts o1, o2;
    bm_plan_opts_from_spec(&o1, s1);
    bm_plan_opts_from_spec(&o2, s2);
    struct bm_table *t1 = NULL, *t2 = NULL, *back = NULL;
    struct bm_costs *t1_c = NULL, *t2_c = NULL, *back_c = NULL;
    CHECK(bm_plan_build(s1, &o1, &t1, &t1_c, &err) == BM_OK);
    CHECK(bm_plan_build(s2, &o2, &t2, &t2_c, &err) == BM_OK);
    if (t1 && t2) {
        CHECK(t2->ranks_per_host == 4 && t2_c->device.inter_host_gbytes_per_s == 1);
        double m1 = makespan(t1, t1_c), m2 = makespan(t2, t2_c);
        /* 32 MiB at 1 GB/s = 33.55 ms per crossing transfer: the pipeline is much slower */
        CHECKF(m2 > m1 + 2 * 33, "one host %.3f ms, two hosts %.3f ms", m1, m2);
        char *j1 = NULL, *j2 = NULL;
        size_t n1 = 0, n2 = 0;
        FILE *f1 = open_memstream(&j1, &n1), *f2 = open_memstream(&j2, &n2);
        CHECK(bm_table_write_json(t1, t1_c, f1) == BM_OK && bm_table_write_json(t2, t2_c, f2) == BM_OK);
        fclose(f1), fclose(f2);
        CHECK(j1 && !strstr(j1, "ranks_per_host") && !strstr(j1, "inter_host"));
        CHECK_STR_CONTAINS(j2, "\"link_latency_us\": 10, \"ranks_per_host\": 4, \"inter_host_gbytes_per_s\": 1, "
                               "\"inter_host_latency_us\": 100}");
        CHECK(j2 && bm_table_parse(j2, "t2.json", &back, &back_c, &err) == BM_OK);
        if (back) {
            CHECK(back->ranks_per_host == 4 && back_c->device.inter_host_gbytes_per_s == 1 &&
                  back_c->device.inter_host_latency_us == 100);
            CHECK_NEAR(makespan(back, back_c), m2, 1e-9);
        }
        free(j1), free(j2);
    }
    bm_table_free(back), bm_table_free(t1), bm_table_free(t2);
    bm_costs_free(back_c), bm_costs_free(t1_c), bm_costs_free(t2_c);
out:
    bm_spec_free(s1), bm_spec_free(s2);
}

int main(void)
{
    RUN(p8_one_host_is_33_plus_14d);
    RUN(p8_two_hosts_slow_link_is_33_plus_2_6d_plus_x);
    RUN(p8_four_hosts_is_33_plus_2_4d_plus_3x);
    RUN(p8_two_hosts_extra_cost_on_crossing_transfers_only);
    RUN(host_traffic_counts_crossing_sends);
    RUN(spec_keys_parse_and_default);
    RUN(spec_bad_keys_are_refused_by_name);
    RUN(planned_spec_over_two_hosts_costs_more_and_round_trips);
    return test_summary();
}
