/* bench_jitter.c — how each nesting policy's makespan degrades when encoder/generator op
 * durations jitter at run time (the simulator's --jitter: every encoder and generator op's
 * duration x max(0, 1 + j*u), u uniform in [-1, 1], one draw per (module, pass, microbatch),
 * seeded, so every policy meets the same perturbed work). Each policy is planned once on the
 * nominal costs (a static plan, as a real run would use) and simulated for jitter 0, 10%, 30%
 * over seeds 1..N_SEEDS. Prints, per policy and jitter, the makespan as a ratio to the same
 * policy's jitter-free makespan and to bigmac's makespan under the same seed (mean and max over
 * seeds). Nothing is asserted.
 *
 * Usage: build/bench/bench_jitter [M_PER_P [SPEC...]]   (default 8, the two examples/ workloads) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bigmac.h"
#include "bigmac_cost.h"

#define N_SEEDS 8
#define N_JIT 3

static const enum bm_policy ORDER[BM_N_POLICIES] = {BM_POL_BIGMAC, BM_POL_OPTIMUS, BM_POL_UNIFIED,
                                                    BM_POL_UNIFIED_BALANCED, BM_POL_IDEAL, BM_POL_NONE};
static const double JIT[N_JIT] = {0.0, 0.1, 0.3};

/* makespan[p][j][seed]; < 0 when the policy failed to plan or simulate. */
static double span[BM_N_POLICIES][N_JIT][N_SEEDS];

static void bench(const struct bm_spec *s, enum bm_backbone bb, int mult)
{
    int M = mult * s->pp;
    printf("\n### %s, %s, P = %d%s, M = %d\n\n", s->name, bm_backbone_name(bb), s->pp,
           bb == BM_BB_INTERLEAVED ? ", V = 2" : "", M);
    for (int p = 0; p < BM_N_POLICIES; p++) {
        struct bm_plan_opts o;
        struct bm_err err;
        struct bm_table *t;
        struct bm_costs *t_c = NULL;
        bm_plan_opts_from_spec(&o, s);
        o.backbone = bb;
        o.vpp = bb == BM_BB_INTERLEAVED ? (s->vpp > 1 ? s->vpp : 2) : 1;
        o.microbatches = M;
        o.policy = ORDER[p];
        for (int j = 0; j < N_JIT; j++)
            for (int k = 0; k < N_SEEDS; k++) span[p][j][k] = -1;
        if (bm_plan_build(s, &o, &t, &t_c, &err)) {
            printf("  (%s: %s)\n", bm_policy_name(ORDER[p]), strtok(err.msg, "\n"));
            continue;
        }
        for (int j = 0; j < N_JIT; j++)
            for (int k = 0; k < N_SEEDS; k++) {
                struct bm_sim_opts so = {JIT[j], (uint64_t)(k + 1), s->data.samples_per_microbatch};
                struct bm_timeline *tl;
                if (bm_simulate(t, t_c, &so, &tl, &err)) {
                    printf("  (%s: %s)\n", bm_policy_name(ORDER[p]), strtok(err.msg, "\n"));
                    break;
                }
                span[p][j][k] = tl->makespan_ms;
                bm_timeline_free(tl);
            }
        bm_table_free(t), bm_costs_free(t_c), t_c = NULL;
    }
    printf("jitter-free makespan (ms); then per jitter: makespan / own jitter-free (mean, max over %d "
           "seeds) and / bigmac's under the same seed (mean, max)\n\n", N_SEEDS);
    printf("| policy | jitter 0 ms |");
    for (int j = 1; j < N_JIT; j++)
        printf(" %.0f%%: /own mean | max | /bigmac mean | max |", 100 * JIT[j]);
    printf("\n|---|---|");
    for (int j = 1; j < N_JIT; j++) printf("---|---|---|---|");
    printf("\n");
    for (int p = 0; p < BM_N_POLICIES; p++) {
        if (span[p][0][0] < 0) continue;
        printf("| %s | %.0f |", bm_policy_name(ORDER[p]), span[p][0][0]);
        for (int j = 1; j < N_JIT; j++) {
            double so = 0, mo = 0, sb = 0, mb = 0;
            int nb = 0;
            for (int k = 0; k < N_SEEDS; k++) {
                double r = span[p][j][k] / span[p][0][k];
                so += r;
                if (r > mo) mo = r;
                if (span[0][j][k] > 0) {
                    double b = span[p][j][k] / span[0][j][k];
                    sb += b;
                    nb++;
                    if (b > mb) mb = b;
                }
            }
            printf(" %.3f | %.3f |", so / N_SEEDS, mo);
            if (nb) printf(" %.3f | %.3f |", sb / nb, mb); else printf(" - | - |");
        }
        printf("\n");
    }
}

int main(int argc, char **argv)
{
    static const char *dflt[] = {"examples/understanding-qwen3-30b-a3b.json", "examples/generation-mmdit-20b.json"};
    int mult = argc > 1 ? atoi(argv[1]) : 8;
    int n = argc > 2 ? argc - 2 : 2;
    const char **paths = argc > 2 ? (const char **)argv + 2 : dflt;
    if (mult < 1) {
        fprintf(stderr, "usage: bench_jitter [M_PER_P [SPEC...]]\n");
        return 2;
    }
    printf("## Encoder/generator jitter (build/bench/bench_jitter %d), seeds 1..%d\n", mult, N_SEEDS);
    for (int i = 0; i < n; i++) {
        struct bm_spec *s;
        struct bm_err err;
        if (bm_spec_load(paths[i], &s, &err)) {
            fprintf(stderr, "bench_jitter: %s\n", err.msg);
            return 1;
        }
        bench(s, BM_BB_1F1B, mult);
        bench(s, BM_BB_INTERLEAVED, mult);
        bm_spec_free(s);
    }
    return 0;
}
