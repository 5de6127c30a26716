/* bench_plan.c — planning, verifying and writing a 64-rank, V=4, M=1024 interleaved plan
 * (one encoder, one grad_to_backbone generator; policy bigmac with window auto and with the
 * window given). Prints the figures; asserts nothing (docs/style.md).
 * Usage: build/bench/bench_plan [P V M] */
#include <stdio.h>
#include <stdlib.h>

#include "util/util.h"
#include "bench_spec.h"

int main(int argc, char **argv)
{
    int P, V, M;
    struct bm_spec *s = bench_spec_load(argc, argv, &P, &V, &M);
    if (!s) return 1;
    struct bm_err err;
    printf("plan P=%d V=%d M=%d interleaved, vit + llm + dit\n", P, V, M);
    printf("%-22s %10s %10s %10s %12s %12s %8s\n", "policy", "plan s", "verify s", "write s",
           "ops", "JSON MiB", "window");
    for (int variant = 0; variant < 4; variant++) {
        struct bm_plan_opts o = {P, V, M, 0, 0, BM_BB_INTERLEAVED, BM_POL_BIGMAC};
        const char *label = "bigmac (window auto)";
        if (variant == 1) o.window = 3, label = "bigmac (window 3)";
        if (variant == 2) o.policy = BM_POL_OPTIMUS, label = "optimus";
        if (variant == 3) o.policy = BM_POL_NONE, label = "none";
        struct bm_table *t;
        double t0 = bm_now();
        if (bm_plan_build(s, &o, &t, &err)) {
            fprintf(stderr, "%s\n", err.msg);
            return 1;
        }
        double t1 = bm_now();
        int ok = bm_verify(t, &err) == BM_OK;
        double t2 = bm_now();
        FILE *f = fopen("/dev/null", "w");
        long bytes = 0;
        if (f) {
            bm_table_write_json(t, f);
            bytes = ftell(f);
            fclose(f);
        }
        double t3 = bm_now();
        char *buf = NULL;
        size_t n = 0;
        FILE *mf = open_memstream(&buf, &n);
        if (mf) {
            bm_table_write_json(t, mf);
            fclose(mf);
        }
        free(buf);
        (void)bytes;
        printf("%-22s %10.3f %10.3f %10.3f %12ld %12.1f %8d%s\n", label, t1 - t0, t2 - t1, t3 - t2,
               bm_table_n_ops(t), (double)n / 1048576.0, t->window, ok ? "" : "  VERIFY FAILED");
        bm_table_free(t);
    }
    bm_spec_free(s);
    return 0;
}
