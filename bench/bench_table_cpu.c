/* bench_table_cpu.c — CPU seconds of the table's hot paths, best of 5 (issue 26: the table's
 * private fields moved behind struct bm_table's priv; this shows the internals kept their speed):
 * bm_plan_build of bench_spec.h's spec at P V M (interleaved, window 3) under four policies, then
 * bm_verify of the plan, and bm_table_push of the plan's ops one by one into a new table. Public
 * API only, so the same file builds against an older tree for a side-by-side figure (bench/
 * RESULTS.md "Private fields out of the public structs"). Prints; asserts nothing.
 *
 * Usage: build/bench/bench_table_cpu [P V M] */
#include <stdio.h>
#include <time.h>

#include "bench_spec.h"
#include "bigmac_cost.h"

static double cpu(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(int argc, char **argv)
{
    int P, V, M;
    struct bm_spec *s = bench_spec_load(argc, argv, &P, &V, &M);
    if (!s) return 1;
    static const enum bm_policy pols[4] = {BM_POL_BIGMAC, BM_POL_OPTIMUS, BM_POL_UNIFIED, BM_POL_NONE};
    printf("P=%d V=%d M=%d interleaved, window 3: CPU s, best of 5\n", P, V, M);
    printf("%-10s %10s %10s %10s %12s\n", "policy", "plan", "verify", "push", "ops");
    for (int k = 0; k < 4; k++) {
        double plan = 1e30, verify = 1e30, push = 1e30;
        long n = 0;
        for (int rep = 0; rep < 5; rep++) {
            struct bm_plan_opts o;
            bm_plan_opts_from_spec(&o, s);
            o.pp = P, o.vpp = V, o.microbatches = M, o.unit = P, o.window = 3;
            o.backbone = BM_BB_INTERLEAVED, o.policy = pols[k];
            struct bm_table *t = NULL, *u = bm_table_new(P);
            struct bm_costs *c = NULL;
            struct bm_err err;
            double t0 = cpu();
            if (!u || bm_plan_build(s, &o, &t, &c, &err)) {
                fprintf(stderr, "%s\n", u ? err.msg : "out of memory");
                return 1;
            }
            double t1 = cpu();
            int bad = bm_verify(t, &err);
            double t2 = cpu();
            for (int r = 0; r < P && !bad; r++)
                for (int i = 0; i < t->ranks[r].n_ops && !bad; i++)
                    bad = bm_table_push(u, r, t->ranks[r].ops[i], &err);
            double t3 = cpu();
            if (bad) {
                fprintf(stderr, "%s\n", err.msg);
                return 1;
            }
            if (t1 - t0 < plan) plan = t1 - t0;
            if (t2 - t1 < verify) verify = t2 - t1;
            if (t3 - t2 < push) push = t3 - t2;
            n = bm_table_n_ops(u);
            bm_table_free(t);
            bm_table_free(u);
            bm_costs_free(c);
        }
        printf("%-10s %10.3f %10.3f %10.3f %12ld\n", bm_policy_name(pols[k]), plan, verify, push, n);
    }
    bm_spec_free(s);
    return 0;
}
