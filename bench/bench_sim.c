/* bench_sim.c — simulation time of a large table: 64 ranks, interleaved V=4, M=1024, plus an
 * Optimus-style encoder on every rank (EF hoisted to the start of its owner rank m % P, EB at
 * the end), ~1.6M ops. Builds the table itself (no planner needed) and prints the figures;
 * nothing is asserted. Usage: build/bench/bench_sim [P V M reps] */
#include <stdio.h>
#include <stdlib.h>

#include "bigmac_cost.h"
#include "util/util.h"

static struct bm_table *T;
static struct bm_err E;

static void push(int r, int kind, int pass, int module, int chunk, int mb, int peer, int tensor)
{
    struct bm_op op = {(uint8_t)kind, (uint8_t)pass, (int16_t)module, chunk, mb, peer, tensor};
    if (bm_table_push(T, r, op, &E)) {
        fprintf(stderr, "%s\n", E.msg);
        exit(1);
    }
}

static int tensor(const char *fmt, int c, int grad)
{
    char name[64];
    snprintf(name, sizeof name, fmt, c);
    int i = bm_table_tensor(T, name, 0, grad); /* 16 MiB: module 0's out_mib */
    if (i < 0) exit(1);
    return i;
}

static struct bm_cost costs[2]; /* the modules' costs, the cost model's once both are added */

static void add_module(const char *name, enum bm_role role, double f, double b, double act, double st)
{
    costs[T->n_modules] = (struct bm_cost){f, b, act, st, 16, 0, 0, 0};
    T->modules = bm_realloc(T->modules, (size_t)(T->n_modules + 1) * sizeof *T->modules);
    struct bm_table_module *m = &T->modules[T->n_modules++];
    *m = (struct bm_table_module){0};
    m->name = bm_strdup(name);
    m->role = role;
}

int main(int argc, char **argv)
{
    int P = argc > 1 ? atoi(argv[1]) : 64, V = argc > 2 ? atoi(argv[2]) : 4;
    int M = argc > 3 ? atoi(argv[3]) : 1024, reps = argc > 4 ? atoi(argv[4]) : 5;
    int C = P * V;
    double t0 = bm_now();
    T = bm_table_new(P);
    T->vpp = V;
    T->microbatches = M;
    T->unit = P;
    T->backbone = BM_BB_INTERLEAVED;
    T->policy = BM_POL_OPTIMUS;
    add_module("vit", BM_ROLE_ENCODER, 4, 8, 300, 2600);
    add_module("llm", BM_ROLE_BACKBONE, 40, 80, 6000, 60000);
    T->backbone_module = 1;
    struct bm_costs *T_c = bm_costs_new(T);
    if (!T_c) return 1;
    T_c->modules[0] = costs[0], T_c->modules[1] = costs[1];
    T_c->device = (struct bm_device){.memory_gib = 80, .peak_tflops = 989, .efficiency = 0.4, .link_gbytes_per_s = 25,
                                     .link_latency_us = 10, .inter_host_gbytes_per_s = 12.5, .inter_host_latency_us = 20};
    int *fwd = bm_malloc((size_t)C * sizeof *fwd), *bwd = bm_malloc((size_t)C * sizeof *bwd);
    for (int c = 0; c < C; c++) {
        fwd[c] = tensor("llm.c%d.out", c, 0);
        bwd[c] = tensor("grad:llm.c%d.out", c, 1);
    }
    int emb = tensor("vis_emb", 0, 0), gemb = tensor("grad:vis_emb", 0, 1);
    struct bm_bb_step *steps = bm_malloc((size_t)(2 * V * M) * sizeof *steps);
    for (int r = 0; r < P; r++) {
        for (int m = r; m < M; m += P) { /* hoisted encoder forwards */
            push(r, BM_OP_COMPUTE, BM_PASS_F, 0, -1, m, -1, -1);
            push(r, BM_OP_SEND, 0, 0, -1, m, 0, emb);
        }
        if (bm_backbone_order(BM_BB_INTERLEAVED, P, V, M, r, 0, steps, &E)) {
            fprintf(stderr, "%s\n", E.msg);
            return 1;
        }
        for (int k = 0; k < 2 * V * M; k++) {
            int c = steps[k].chunk, mb = steps[k].mb;
            if (steps[k].pass == BM_PASS_F) {
                if (c == 0) push(r, BM_OP_RECV, 0, 0, -1, mb, mb % P, emb);
                else push(r, BM_OP_RECV, 0, 1, -1, mb, (c - 1) % P, fwd[c - 1]);
                push(r, BM_OP_COMPUTE, BM_PASS_F, 1, c, mb, -1, -1);
                if (c < C - 1) push(r, BM_OP_SEND, 0, 1, -1, mb, (c + 1) % P, fwd[c]);
            } else {
                if (c < C - 1) push(r, BM_OP_RECV, 0, 1, -1, mb, (c + 1) % P, bwd[c]);
                push(r, BM_OP_COMPUTE, BM_PASS_B, 1, c, mb, -1, -1);
                if (c > 0) push(r, BM_OP_SEND, 0, 1, -1, mb, (c - 1) % P, bwd[c - 1]);
                else push(r, BM_OP_SEND, 0, 0, -1, mb, mb % P, gemb);
            }
        }
    }
    for (int r = 0; r < P; r++)
        for (int m = r; m < M; m += P) { /* deferred encoder backwards */
            push(r, BM_OP_RECV, 0, 0, -1, m, 0, gemb);
            push(r, BM_OP_COMPUTE, BM_PASS_B, 0, -1, m, -1, -1);
        }
    double t1 = bm_now();
    long n = bm_table_n_ops(T);
    printf("table: P=%d V=%d M=%d interleaved + encoder, %ld ops, built in %.3f s\n", P, V, M, n,
           t1 - t0);
    double best = 1e30, sum = 0;
    struct bm_timeline *tl = NULL;
    for (int i = 0; i < reps; i++) {
        bm_timeline_free(tl);
        double a = bm_now();
        if (bm_simulate(T, T_c, NULL, &tl, &E)) {
            fprintf(stderr, "simulate: %s\n", E.msg);
            return 1;
        }
        double d = bm_now() - a;
        sum += d;
        if (d < best) best = d;
    }
    printf("simulate: min %.3f s, avg %.3f s over %d runs (%.1f M ops/s)\n", best, sum / reps, reps,
           n / best / 1e6);
    printf("result: makespan %.1f ms, bubble %.3f, peak %.1f GiB, oom %d\n", tl->makespan_ms,
           tl->bubble_ratio, tl->peak_mib / 1024, tl->oom);
    bm_timeline_free(tl);
    bm_free(steps);
    bm_free(fwd);
    bm_free(bwd);
    bm_table_free(T), bm_costs_free(T_c), T_c = NULL;
    return 0;
}
