/* bench_render.c — render a 64-rank, V=4, M=1024 interleaved bigmac plan (vit + llm + dit,
 * ~1.58 M ops) in every format and print the time and the file size of each. Writes into a
 * temporary directory (kept when BM_BENCH_KEEP is set, e.g. to open the HTML in a browser).
 * Prints the figures; asserts nothing (docs/style.md).
 * Usage: build/bench/bench_render [P V M] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "report/report.h"
#include "util/util.h"
#include "bench_spec.h"

int main(int argc, char **argv)
{
    int P, V, M;
    struct bm_spec *s = bench_spec_load(argc, argv, &P, &V, &M);
    if (!s) return 1;
    struct bm_err err;
    struct bm_plan_opts o = {.pp = P, .vpp = V, .microbatches = M, .window = 3, .backbone = BM_BB_INTERLEAVED, .policy = BM_POL_BIGMAC};
    struct bm_table *t;
    struct bm_costs *t_c = NULL;
    struct bm_timeline *tl;
    double t0 = bm_now();
    if (bm_plan_build(s, &o, &t, &t_c, &err) || bm_simulate(t, t_c, NULL, &tl, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    double t1 = bm_now();
    char dir[] = "/tmp/bench_render.XXXXXX";
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    long ops = bm_table_n_ops(t);
    printf("render P=%d V=%d M=%d interleaved bigmac W=3, vit + llm + dit: %ld ops (plan + simulate %.2f s)\n",
           P, V, M, ops, t1 - t0);
    printf("%-8s %10s %12s %14s\n", "format", "seconds", "MiB", "bytes per op");
    static const char *const fmts[] = {"html", "trace", "svg", "csv", "ascii"};
    for (int k = 0; k < 5; k++) {
        char path[256];
        snprintf(path, sizeof path, "%s/out.%s", dir, fmts[k]);
        FILE *f = fopen(path, "w");
        if (!f) {
            perror(path);
            return 1;
        }
        double a = bm_now();
        int rc = k == 0   ? bm_render_html(t, t_c, tl, NULL, "bench", f)
                 : k == 1 ? bm_render_trace(t, t_c, tl, f)
                 : k == 2 ? bm_render_svg(t, tl, "bench", 0, f)
                 : k == 3 ? bm_csv_write(t, t_c, f)
                          : bm_render_ascii(t, tl, 120, f);
        fclose(f);
        double b = bm_now();
        struct stat st;
        long size = stat(path, &st) ? 0 : (long)st.st_size;
        printf("%-8s %10.3f %12.1f %14.1f%s\n", fmts[k], b - a, size / 1048576.0, (double)size / ops,
               rc ? "  WRITE FAILED" : "");
        if (k == 1) {
            /* reload the trace (what `render trace.json` does) */
            struct bm_table *t2;
            struct bm_costs *t2_c = NULL;
            struct bm_timeline *tl2;
            double c = bm_now();
            if (bm_trace_load(path, &t2, &t2_c, &tl2, &err) == BM_OK) {
                printf("%-8s %10.3f %12s %14s\n", "(reload)", bm_now() - c, "", "");
                bm_timeline_free(tl2);
                bm_table_free(t2), bm_costs_free(t2_c), t2_c = NULL;
            } else {
                printf("trace reload failed: %s\n", err.msg);
            }
        }
        if (!getenv("BM_BENCH_KEEP")) unlink(path);
    }
    if (!getenv("BM_BENCH_KEEP")) rmdir(dir);
    else printf("files kept in %s\n", dir);
    bm_timeline_free(tl);
    bm_table_free(t), bm_costs_free(t_c), t_c = NULL;
    bm_spec_free(s);
    return 0;
}
