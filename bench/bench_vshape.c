/* bench_vshape.c — the V-shaped backbones (zb-v, dualpipe-v; issue 25) against the zero-bubble
 * ones (zb-h1, zb-interleaved), from one run:
 *
 *  1. the backbone alone (policy none) with T_F = T_B = T_W (fwd 1, bwd 2 of which W 1 per
 *     chunk, free links) at P = 4 and 8: makespan and bubble (idle summed over ranks);
 *  2. the two paper-shaped workloads (docs/workloads.md) at M = 4P..16P: bigmac over zb-v and
 *     dualpipe-v against bigmac over zb-h1 and zb-interleaved, and optimus over each of the four,
 *     bigmac at the same window cap everywhere, each cell with its peak memory and nested
 *     (encoder + generator) activation; the fastest row marked.
 *
 * Nothing is asserted: the figures are what the planner and simulator on this branch produce.
 * Usage: build/bench/bench_vshape [WINDOW_CAP]   (default 6, bench_policies' common cap) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bigmac.h"
#include "bigmac_cost.h"

#define GIB(mib) ((mib) / 1024.0)

static struct bm_spec *uniform_spec(int P)
{
    char text[1024];
    snprintf(text, sizeof text,
             "{\"format\": \"bigmac-spec\", \"version\": 1, \"name\": \"uniform\",\n"
             " \"device\": {\"link_latency_us\": 0},\n"
             " \"inputs\": [\"text\"],\n"
             " \"modules\": [{\"name\": \"llm\", \"role\": \"backbone\", \"consumes\": [\"text\"], \"produces\": [\"h\"],\n"
             "   \"cost\": {\"fwd_ms\": %d, \"bwd_ms\": %d, \"w_ms\": %d, \"act_mib\": %d, \"out_mib\": 0}}]}\n",
             2 * P, 4 * P, 2 * P, 2 * P);
    struct bm_spec *s;
    struct bm_err err;
    if (bm_spec_parse(text, "uniform.json", &s, &err)) {
        fprintf(stderr, "bench_vshape: %s\n", err.msg);
        return NULL;
    }
    return s;
}

static int run(const struct bm_spec *s, int P, int V, int M, enum bm_backbone bb, enum bm_policy pol, int W,
               double *ms, double *bubble, double *peak, double *nested, int *window, int *oom)
{
    struct bm_plan_opts o;
    struct bm_err err;
    struct bm_table *t = NULL;
    struct bm_costs *t_c = NULL;
    struct bm_timeline *tl = NULL;
    bm_plan_opts_from_spec(&o, s);
    o.pp = P, o.vpp = V, o.microbatches = M, o.backbone = bb, o.policy = pol, o.window = W;
    struct bm_sim_opts so = {0, 1, s->data.samples_per_microbatch};
    if (bm_plan_build(s, &o, &t, &t_c, &err) || bm_simulate(t, t_c, &so, &tl, &err)) {
        fprintf(stderr, "bench_vshape: %s %s P=%d M=%d: %s\n", bm_backbone_name(bb), bm_policy_name(pol), P, M,
                strtok(err.msg, "\n"));
        bm_table_free(t), bm_costs_free(t_c), t_c = NULL;
        return -1;
    }
    *ms = tl->makespan_ms;
    *bubble = tl->bubble_ratio * tl->pp * tl->makespan_ms;
    *peak = GIB(tl->peak_mib);
    *nested = GIB(tl->peak_act_mib[BM_ROLE_ENCODER] + tl->peak_act_mib[BM_ROLE_GENERATOR]);
    *window = t->window;
    *oom = tl->oom;
    bm_timeline_free(tl);
    bm_table_free(t), bm_costs_free(t_c), t_c = NULL;
    return 0;
}

static const enum bm_backbone BBS[4] = {BM_BB_ZB_H1, BM_BB_ZB_INTERLEAVED, BM_BB_ZB_V, BM_BB_DUALPIPE_V};

static void uniform_costs(void)
{
    printf("## V-shaped backbones (build/bench/bench_vshape)\n\n"
           "### The backbone alone, T_F = T_B = T_W (policy none, free links)\n\n"
           "Each cell: makespan ms / bubble ms (idle summed over ranks) / peak GiB.\n\n"
           "| P | M | zb-h1 | zb-interleaved | zb-v | dualpipe-v |\n|---|---|---|---|---|---|\n");
    for (int P = 4; P <= 8; P *= 2) {
        struct bm_spec *s = uniform_spec(P);
        if (!s) return;
        for (int k = 2; k <= 8; k *= 2) {
            int M = k * P, w, oom;
            printf("| %d | %d |", P, M);
            for (int b = 0; b < 4; b++) {
                double ms, bub, pk, nest;
                if (run(s, P, b ? 2 : 1, M, BBS[b], BM_POL_NONE, 0, &ms, &bub, &pk, &nest, &w, &oom)) printf(" error |");
                else printf(" %.0f / %.0f / %.3f |", ms, bub, pk);
            }
            printf("\n");
        }
        bm_spec_free(s);
    }
}

static const int MULT[] = {4, 8, 12, 16};
#define N_MULT 4
#define N_ROWS 8

static void workload(const char *path, int cap)
{
    struct bm_spec *s;
    struct bm_err err;
    if (bm_spec_load(path, &s, &err)) {
        fprintf(stderr, "bench_vshape: %s\n", err.msg);
        return;
    }
    int P = s->pp;
    printf("\n### %s, P = %d, bigmac window cap %d\n\nEach cell: makespan ms (ratio to the column's fastest), "
           "peak GiB / nested act GiB, window used; ** = fastest, * = over the device.\n\n| row |",
           s->name, P, cap);
    for (int i = 0; i < N_MULT; i++) printf(" M = %d |", MULT[i] * P);
    printf("\n|---|");
    for (int i = 0; i < N_MULT; i++) printf("---|");
    printf("\n");
    double ms[N_ROWS][N_MULT], pk[N_ROWS][N_MULT], nest[N_ROWS][N_MULT];
    int win[N_ROWS][N_MULT], oom[N_ROWS][N_MULT], ok[N_ROWS][N_MULT];
    for (int r = 0; r < N_ROWS; r++)
        for (int i = 0; i < N_MULT; i++) {
            double bub;
            enum bm_policy pol = r < 4 ? BM_POL_BIGMAC : BM_POL_OPTIMUS;
            enum bm_backbone bb = BBS[(r + 2) % 4]; /* V shapes first */
            ok[r][i] = !run(s, P, bb == BM_BB_ZB_H1 ? 1 : 2, MULT[i] * P, bb, pol, pol == BM_POL_BIGMAC ? cap : 0,
                            &ms[r][i], &bub, &pk[r][i], &nest[r][i], &win[r][i], &oom[r][i]);
        }
    for (int r = 0; r < N_ROWS; r++) {
        printf("| %s %s |", r < 4 ? "bigmac" : "optimus", bm_backbone_name(BBS[(r + 2) % 4]));
        for (int i = 0; i < N_MULT; i++) {
            if (!ok[r][i]) {
                printf(" error |");
                continue;
            }
            double best = 1e300;
            for (int q = 0; q < N_ROWS; q++)
                if (ok[q][i] && ms[q][i] < best) best = ms[q][i];
            printf(" %.0f%s (%.3f), %.1f%s / %.2f, W %d |", ms[r][i], ms[r][i] <= best * (1 + 1e-12) ? "**" : "",
                   ms[r][i] / best, pk[r][i], oom[r][i] ? "*" : "", nest[r][i], win[r][i]);
        }
        printf("\n");
    }
    bm_spec_free(s);
}

int main(int argc, char **argv)
{
    int cap = argc > 1 ? atoi(argv[1]) : 6;
    if (cap < 1) cap = 6;
    uniform_costs();
    workload("examples/understanding-qwen3-30b-a3b.json", cap);
    workload("examples/generation-mmdit-20b.json", cap);
    return 0;
}
