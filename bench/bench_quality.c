/* bench_quality.c — schedule quality against an independent planner and a lower bound (issue 15),
 * and the planner's speed at scale, from one run:
 *
 *  1. examples/understanding-qwen3-30b-a3b.json at P = 8, 1F1B and interleaved V = 2, M = 16..128:
 *     bigmac at window cap 3 (placement search on, and off: the list scheduler alone), optimus,
 *     the lower bound (`simulate --compare`'s lower_bound_ms: the smallest of every policy's own
 *     bound), each as makespan and / bound, next to the independent planner's figures that
 *     issue 15 reports for the same cost model;
 *  2. the same for examples/generation-mmdit-20b.json (bigmac, search on and off, optimus);
 *  3. `simulate SPEC --pp 64 --vpp 4 --backbone interleaved --unit 64 --microbatches 1024
 *     --window 3` on bench_spec.h's spec: wall time (best of 3) with where it goes (shell, task
 *     graphs, nesting, search, lowering, the window search's simulations, the final simulation).
 *
 * Nothing is asserted: the figures are printed (bench/RESULTS.md records them).
 * Usage: build/bench/bench_quality [UNDERSTANDING_SPEC GENERATION_SPEC] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bigmac.h"
#include "bigmac_cost.h"
#include "bench_spec.h"
#include "plan/plan.h"
#include "util/util.h"

static const int MS[4] = {16, 32, 64, 128};

/* Issue 15's independent planner on the understanding example (same cost model, window cap 3). */
static const double INDEPENDENT[2][4] = {{987.9, 1689.1, 3176.3, 6150.8}, {867.6, 1558.2, 3021.4, 5947.8}};

/* Plan and simulate; makespan in *ms and the plan's own lower bound in *lb. -1 on failure. */
static int run(const struct bm_spec *s, struct bm_plan_opts o, int search, double *ms, double *lb)
{
    struct bm_table *t;
    struct bm_costs *t_c = NULL;
    struct bm_timeline *tl;
    struct bm_err err;
    *ms = *lb = -1;
    if (bm_plan_build_search(s, &o, search, &t, &t_c, lb, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return -1;
    }
    int rc = bm_simulate(t, t_c, NULL, &tl, &err);
    if (!rc) {
        *ms = tl->makespan_ms;
        bm_timeline_free(tl);
    }
    bm_table_free(t), bm_costs_free(t_c), t_c = NULL;
    return rc ? -1 : 0;
}

/* The lower bound --compare reports: the smallest over the policies that run all the work. */
static double lower_bound(const struct bm_spec *s, struct bm_plan_opts o)
{
    static const enum bm_policy pols[] = {BM_POL_BIGMAC, BM_POL_OPTIMUS, BM_POL_UNIFIED,
                                          BM_POL_UNIFIED_BALANCED, BM_POL_IDEAL};
    double best = -1, ms, lb;
    for (size_t i = 0; i < sizeof pols / sizeof pols[0]; i++) {
        o.policy = pols[i];
        if (run(s, o, 0, &ms, &lb) == 0 && (best < 0 || lb < best)) best = lb;
    }
    return best;
}

static void quality(const char *path, int with_independent)
{
    struct bm_spec *s;
    struct bm_err err;
    if (bm_spec_load(path, &s, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return;
    }
    printf("\n#### %s, P = 8, window cap 3\n\n", s->name ? s->name : path);
    printf("| backbone | M | bigmac ms | / bound | search off ms | optimus ms | / bound | lower bound ms |%s\n",
           with_independent ? " independent ms | bigmac - independent |" : "");
    printf("|---|---|---|---|---|---|---|---|%s\n", with_independent ? "---|---|" : "");
    for (int b = 0; b < 2; b++)
        for (int i = 0; i < 4; i++) {
            struct bm_plan_opts o;
            bm_plan_opts_from_spec(&o, s);
            o.pp = 8, o.vpp = b ? 2 : 1, o.unit = 0, o.microbatches = MS[i];
            o.backbone = b ? BM_BB_INTERLEAVED : BM_BB_1F1B;
            o.policy = BM_POL_BIGMAC, o.window = 3;
            double big, off, opt, lb, own;
            run(s, o, 0, &big, &own);
            run(s, o, BM_SEARCH_OFF, &off, &own);
            double bound = lower_bound(s, o);
            o.policy = BM_POL_OPTIMUS, o.window = 0;
            run(s, o, 0, &opt, &lb);
            printf("| %s | %d | %.1f | %.3f | %.1f | %.1f | %.3f | %.1f |", b ? "interleaved V=2" : "1f1b", MS[i], big,
                   big / bound, off, opt, opt / bound, bound);
            if (with_independent) printf(" %.1f | %+.1f |", INDEPENDENT[b][i], big - INDEPENDENT[b][i]);
            printf("\n");
        }
    bm_spec_free(s);
}

static void speed(void)
{
    int P = 64, V = 4, M = 1024;
    char *argv0[] = {NULL};
    struct bm_spec *s = bench_spec_load(0, argv0, &P, &V, &M);
    if (!s) return;
    struct bm_plan_opts o = {.pp = P, .vpp = V, .microbatches = M, .unit = 64, .window = 3, .backbone = BM_BB_INTERLEAVED, .policy = BM_POL_BIGMAC};
    struct bm_plan_prof best = {0};
    double best_total = -1, best_sim = 0, ms = 0;
    int window = 0;
    for (int rep = 0; rep < 3; rep++) {
        struct bm_plan_prof prof;
        memset(&prof, 0, sizeof prof);
        bm_plan_prof = &prof;
        double t0 = bm_now();
        struct bm_table *t;
        struct bm_costs *t_c = NULL;
        struct bm_timeline *tl;
        struct bm_err err;
        if (bm_plan_build(s, &o, &t, &t_c, &err)) {
            fprintf(stderr, "%s\n", err.msg);
            bm_plan_prof = NULL;
            break;
        }
        bm_plan_prof = NULL;
        double t1 = bm_now();
        if (bm_simulate(t, t_c, NULL, &tl, &err)) {
            fprintf(stderr, "%s\n", err.msg);
            bm_table_free(t), bm_costs_free(t_c), t_c = NULL;
            break;
        }
        double t2 = bm_now();
        if (best_total < 0 || t2 - t0 < best_total) {
            best_total = t2 - t0, best_sim = t2 - t1, best = prof;
            ms = tl->makespan_ms, window = t->window;
        }
        bm_timeline_free(tl);
        bm_table_free(t), bm_costs_free(t_c), t_c = NULL;
    }
    bm_spec_free(s);
    if (best_total < 0) return;
    printf("\n#### plan + simulate, P = 64, V = 4, M = 1024, U = 64, interleaved, window cap 3 (best of 3)\n\n");
    printf("makespan %.1f ms, window used %d, %d windows planned, %d searched\n\n", ms, window, best.plans,
           best.searched);
    printf("| phase | s |\n|---|---|\n");
    printf("| shell (modules, chunks, dataflow, first task graph) | %.3f |\n", best.shell_s);
    printf("| task graphs rebuilt per window | %.3f |\n", best.graph_s);
    printf("| nesting (list scheduler + gap refinement), every window | %.3f |\n", best.nest_s);
    printf("| placement search, every window | %.3f |\n", best.search_s);
    printf("| lowering, every window | %.3f |\n", best.lower_s);
    printf("| window search: simulating candidates | %.3f |\n", best.measure_s);
    printf("| final simulation | %.3f |\n", best_sim);
    printf("| **total (plan + simulate)** | **%.3f** |\n", best_total);
}

int main(int argc, char **argv)
{
    const char *und = argc > 2 ? argv[1] : "examples/understanding-qwen3-30b-a3b.json";
    const char *gen = argc > 2 ? argv[2] : "examples/generation-mmdit-20b.json";
    quality(und, 1);
    quality(gen, 0);
    speed();
    return 0;
}
