/* bench_zero_bubble.c — the zero-bubble backbones (zb-h1, zb-interleaved) against 1F1B and
 * interleaved, from one run:
 *
 *  1. the backbone alone (policy none) with T_F = T_B = T_W (fwd 1, bwd 2 of which W 1 per
 *     chunk, free links): bubble time (sum of idle over ranks) of zb-h1 / 1F1B and of
 *     zb-interleaved / interleaved at P = 4 and 8; the paper's ratio is
 *     (P-1)(T_F+T_B-T_W) / ((P-1)(T_F+T_B+T_W)) = 1/3 for ZB-H1;
 *  2. the two paper-shaped workloads (docs/workloads.md) at M = 4P..16P: bigmac over zb-h1 and
 *     zb-interleaved against bigmac, optimus and ideal over 1F1B and interleaved, bigmac at the
 *     same window cap everywhere, with each row's peak memory and nested (encoder + generator)
 *     activation beside its makespan, the fastest row marked; then, per zero-bubble row, whether
 *     the nested activation is flat in M from M = 8P on (at 4P the window is bounded by the
 *     4P / U units), and the target as measured (fastest at every M, flat per backbone).
 *
 * Nothing is asserted: the figures are what the planner and simulator on this branch produce.
 * Usage: build/bench/bench_zero_bubble [WINDOW_CAP]   (default 6, bench_policies' common cap) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bigmac.h"
#include "bigmac_cost.h"

#define GIB(mib) ((mib) / 1024.0)

/* ---------------------------------------------------------------- 1. uniform costs */

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
        fprintf(stderr, "bench_zero_bubble: %s\n", err.msg);
        return NULL;
    }
    return s;
}

/* Plan and simulate; returns makespan (ms), bubble time (ms, idle summed over ranks), peak GiB. */
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
        fprintf(stderr, "bench_zero_bubble: %s %s P=%d M=%d: %s\n", bm_backbone_name(bb), bm_policy_name(pol), P, M,
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

static void uniform_costs(void)
{
    printf("## Zero-bubble backbones (build/bench/bench_zero_bubble)\n\n"
           "### The backbone alone, T_F = T_B = T_W (policy none, free links)\n\n"
           "bubble = idle time summed over ranks; the paper's ZB-H1 ratio is 1/3 (at most 0.40 asked).\n\n"
           "| P | M | 1f1b ms | 1f1b bubble ms | zb-h1 ms | zb-h1 bubble ms | zb-h1 / 1f1b bubble | "
           "interleaved bubble ms | zb-interleaved bubble ms | zb-int / int bubble | peak GiB 1f1b | zb-h1 | "
           "interleaved | zb-interleaved |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (int P = 4; P <= 8; P *= 2) {
        struct bm_spec *s = uniform_spec(P);
        if (!s) return;
        for (int k = 1; k <= 8; k *= 2) {
            int M = k * P, w, oom;
            double ms[4], bub[4], pk[4], nest;
            static const enum bm_backbone bbs[4] = {BM_BB_1F1B, BM_BB_ZB_H1, BM_BB_INTERLEAVED, BM_BB_ZB_INTERLEAVED};
            int bad = 0;
            for (int b = 0; b < 4; b++)
                bad |= run(s, P, b >= 2 ? 2 : 1, M, bbs[b], BM_POL_NONE, 0, &ms[b], &bub[b], &pk[b], &nest, &w, &oom);
            if (bad) continue;
            printf("| %d | %d | %.0f | %.0f | %.0f | %.0f | %.3f | %.0f | %.0f | %.3f | %.3f | %.3f | %.3f | %.3f |\n", P, M,
                   ms[0], bub[0], ms[1], bub[1], bub[1] / bub[0], bub[2], bub[3], bub[3] / bub[2], pk[0], pk[1], pk[2],
                   pk[3]);
        }
        bm_spec_free(s);
    }
}

/* ---------------------------------------------------------------- 2. workloads */

struct row {
    const char *label;
    enum bm_backbone bb;
    int V;
    enum bm_policy pol;
    int zb;     /* 1: a zero-bubble backbone at the common cap; 2: the same with --window fit */
};

static const struct row ROWS[] = {
    {"bigmac zb-h1", BM_BB_ZB_H1, 1, BM_POL_BIGMAC, 1},
    {"bigmac zb-interleaved", BM_BB_ZB_INTERLEAVED, 2, BM_POL_BIGMAC, 1},
    {"bigmac 1f1b", BM_BB_1F1B, 1, BM_POL_BIGMAC, 0},
    {"optimus 1f1b", BM_BB_1F1B, 1, BM_POL_OPTIMUS, 0},
    {"ideal 1f1b", BM_BB_1F1B, 1, BM_POL_IDEAL, 0},
    {"bigmac interleaved", BM_BB_INTERLEAVED, 2, BM_POL_BIGMAC, 0},
    {"optimus interleaved", BM_BB_INTERLEAVED, 2, BM_POL_OPTIMUS, 0},
    {"ideal interleaved", BM_BB_INTERLEAVED, 2, BM_POL_IDEAL, 0},
    {"bigmac zb-h1, window fit", BM_BB_ZB_H1, 1, BM_POL_BIGMAC, 2},
    {"bigmac zb-interleaved, window fit", BM_BB_ZB_INTERLEAVED, 2, BM_POL_BIGMAC, 2},
};
#define N_ROWS (int)(sizeof ROWS / sizeof ROWS[0])
static const int MULT[] = {4, 8, 12, 16};
#define N_MULT 4

static void workload(const char *path, int cap)
{
    struct bm_spec *s;
    struct bm_err err;
    if (bm_spec_load(path, &s, &err)) {
        fprintf(stderr, "bench_zero_bubble: %s\n", err.msg);
        return;
    }
    const struct bm_cost *bc = &s->modules[s->backbone_module].cost;
    int P = s->pp;
    printf("\n### %s, P = %d, bigmac window cap %d\n\nbackbone split (%s): w_ms / bwd_ms = %.3f, "
           "act_w_mib / act_mib = %.3f (docs/spec.md \"Split backward\"). Each cell: makespan ms "
           "(ratio to the column's fastest at the cap), peak GiB / nested act GiB, window used; ** = fastest, * = OOM; "
           "the last two rows search the window that fits the device instead (not part of the ranking).\n\n| row |",
           s->name, P, cap, bc->w_ms > 0 ? "from its arch" : "the fixed defaults", bc->w_ms > 0 ? bc->w_ms / bc->bwd_ms : 0.5,
           bc->act_w_mib > 0 && bc->act_mib > 0 ? bc->act_w_mib / bc->act_mib : 0.5);
    for (int i = 0; i < N_MULT; i++) printf(" M = %d |", MULT[i] * P);
    printf("\n|---|");
    for (int i = 0; i < N_MULT; i++) printf("---|");
    printf("\n");
    double ms[N_ROWS][N_MULT], pk[N_ROWS][N_MULT], nest[N_ROWS][N_MULT];
    int win[N_ROWS][N_MULT], oom[N_ROWS][N_MULT], ok[N_ROWS][N_MULT];
    for (int r = 0; r < N_ROWS; r++)
        for (int i = 0; i < N_MULT; i++) {
            double bub;
            int W = ROWS[r].zb == 2 ? BM_WINDOW_FIT : ROWS[r].pol == BM_POL_BIGMAC ? cap : 0;
            ok[r][i] = !run(s, P, ROWS[r].V, MULT[i] * P, ROWS[r].bb, ROWS[r].pol, W, &ms[r][i], &bub, &pk[r][i],
                            &nest[r][i], &win[r][i], &oom[r][i]);
        }
    for (int r = 0; r < N_ROWS; r++) {
        printf("| %s |", ROWS[r].label);
        for (int i = 0; i < N_MULT; i++) {
            if (!ok[r][i]) {
                printf(" error |");
                continue;
            }
            double best = 1e300; /* over the rows at the common cap */
            for (int q = 0; q < N_ROWS; q++)
                if (ok[q][i] && ROWS[q].zb < 2 && ms[q][i] < best) best = ms[q][i];
            printf(" %.0f%s (%.3f), %.1f%s / %.2f, W %d |", ms[r][i], ROWS[r].zb < 2 && ms[r][i] <= best * (1 + 1e-12) ? "**" : "",
                   ms[r][i] / best, pk[r][i], oom[r][i] ? "*" : "", nest[r][i], win[r][i]);
        }
        printf("\n");
    }
    /* claims: the target as measured */
    double ratio[N_MULT];
    int zb_fastest = 0;
    for (int i = 0; i < N_MULT; i++) {
        double bz = 1e300, bo = 1e300;
        for (int r = 0; r < N_ROWS; r++) {
            if (!ok[r][i]) continue;
            if (ROWS[r].zb == 1) bz = fmin(bz, ms[r][i]);
            else if (!ROWS[r].zb) bo = fmin(bo, ms[r][i]);
        }
        ratio[i] = bo / bz;
        zb_fastest += bz < bo;
    }
    /* flat: the same window and the same nested activation at every M from 8P on; at 4P there
     * are only 4P / U units, a bound on the window by construction */
    int unit = s->unit > 0 ? s->unit : P, units4 = (MULT[0] * P + unit - 1) / unit;
    int flat[N_ROWS];
    printf("\nModality (encoder + generator) activation in M. Flat = the same window and nested GiB at every "
           "M from 8P = %d on; at M = 4P = %d there are only %d units (U = %d), so W <= %d there by construction.\n\n",
           MULT[1] * P, MULT[0] * P, units4, unit, units4);
    for (int r = 0; r < N_ROWS; r++) {
        if (!ROWS[r].zb) continue;
        int wlo = 1 << 30, whi = 0, any_oom = 0, all_ok = 1;
        double lo = 1e300, hi = -1;
        for (int i = 1; i < N_MULT; i++) {
            if (!ok[r][i]) {
                all_ok = 0;
                continue;
            }
            wlo = win[r][i] < wlo ? win[r][i] : wlo;
            whi = win[r][i] > whi ? win[r][i] : whi;
            lo = fmin(lo, nest[r][i]), hi = fmax(hi, nest[r][i]);
            any_oom |= oom[r][i];
        }
        flat[r] = all_ok && wlo == whi && hi - lo < 1e-9;
        printf("* %s: flat from M = %d on: %s (W %d", ROWS[r].label, MULT[1] * P, flat[r] ? "yes" : "no", wlo);
        if (whi != wlo) printf(" .. %d", whi);
        printf(", nested %.2f", lo);
        if (hi - lo >= 1e-9) printf(" .. %.2f", hi);
        printf(" GiB%s", all_ok ? "" : ", some M failed to plan");
        if (any_oom) printf(", peak over the device");
        if (ok[r][0])
            printf("); at M = %d: W %d, nested %.2f GiB (%d units: W <= %d)\n", MULT[0] * P, win[r][0], nest[r][0],
                   units4, units4);
        else
            printf("); at M = %d: did not plan\n", MULT[0] * P);
    }
    printf("* optimus 1f1b for comparison: nested %.2f .. %.2f GiB from M = %d to %d\n", nest[3][0],
           nest[3][N_MULT - 1], MULT[0] * P, MULT[N_MULT - 1] * P);
    printf("\ntarget (issue 14), %s at cap %d: bigmac over a zero-bubble backbone is the fastest row at every M: %s "
           "(%d of %d; best other / best zero-bubble:", s->name, cap, zb_fastest == N_MULT ? "yes" : "no", zb_fastest,
           N_MULT);
    for (int i = 0; i < N_MULT; i++) printf("%s M = %d: %.3f", i ? "," : "", MULT[i] * P, ratio[i]);
    printf("); modality activation flat from M = 8P:");
    for (int r = 0; r < N_ROWS; r++)
        if (ROWS[r].zb == 1) printf("%s %s %s", r ? "," : "", bm_backbone_name(ROWS[r].bb), flat[r] ? "yes" : "no");
    printf("\n");
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
