/* cmd_sweep_cluster.c — `bigmac sweep SPEC --gpus N --global-batch B [--mem-cap-gib G]
 * [--frontier] [--json] [--top K]`: every layout of N GPUs for a global batch of B samples as a
 * whole step (walk, gradient synchronisation, optimizer; src/sim/step.h), ranked by samples/s,
 * the best named with why. Flag parsing and printing only: the work is bm_cluster_sweep
 * (src/study/cluster.c). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "study/cluster.h"
#include "study/study.h"

#define GIB(mib) ((mib) / 1024.0)

static void usage(FILE *f)
{
    fprintf(f,
            "usage: bigmac sweep SPEC --gpus N --global-batch B [--mem-cap-gib G] [--frontier] [--json]\n"
            "                    [--top K] [--backbone B] [--ranks-per-host H] [--search off|N]\n"
            "\n"
            "Every way to run SPEC on N GPUs with B samples per step: pp x dp = N (pp dividing the\n"
            "backbone's layers), vpp 1, 2, 4, M = B / (dp x samples_per_microbatch) microbatches per\n"
            "replica, policy (bigmac at window auto and fit, optimus, unified, unified-balanced) and\n"
            "ZeRO 0 and 1, each planned and simulated as a whole step: the pipeline walk, the gradient\n"
            "synchronisation (backbone chunks over their dp replicas, replicated encoders and\n"
            "generators over every rank that holds them) and the optimizer (docs/simulator.md \"The\n"
            "step\"). Configurations over min(device memory, G) are dropped; the rest are ranked by\n"
            "samples/s and the best is named with why. --top K prints K rows (default 15).\n"
            "--frontier marks with '*' the rows no other beats on both peak memory and samples/s.\n"
            "--json: {\"rows\": [{\"pp\", \"dp\", \"vpp\", \"microbatches\", \"policy\", \"window\", \"zero\",\n"
            "\"step_ms\", \"samples_per_s\", \"peak_mem_gib\", \"oom\", ...}], \"best\", ...}.\n"
            "Progress goes to stderr.\n");
}

static json_t *row_json(const struct bm_cluster_row *r, int rank)
{
    json_t *j = json_pack("{s:i, s:i, s:i, s:i, s:i, s:s, s:s, s:i, s:i, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, "
                          "s:b, s:b}",
                          "rank", rank, "pp", r->pp, "dp", r->dp, "vpp", r->vpp, "microbatches", r->microbatches,
                          "policy", bm_policy_name(r->policy), "backbone", bm_backbone_name(r->backbone), "window",
                          r->window, "zero", r->zero, "makespan_ms", r->makespan_ms, "step_ms", r->step_ms,
                          "sync_exposed_ms", r->sync_exposed_ms, "sync_total_ms", r->sync_total_ms, "optimizer_ms",
                          r->optimizer_ms, "samples_per_s", r->samples_per_s, "walk_samples_per_s",
                          r->walk_samples_per_s, "peak_mem_gib", GIB(r->peak_mib), "oom", r->oom, "pareto",
                          r->pareto);
    return j;
}

static void print_row(const struct bm_cluster_row *r, int rank, int frontier)
{
    printf("%4d %4d %4d %4d %5d %-12s %-17s %6d %4d %11.3f %11.3f %9.3f %9.3f %11.2f %9.3f%s\n", rank, r->pp, r->dp,
           r->vpp, r->microbatches, bm_backbone_name(r->backbone), bm_policy_name(r->policy), r->window, r->zero,
           r->step_ms, r->makespan_ms, r->sync_exposed_ms, r->optimizer_ms, r->samples_per_s, GIB(r->peak_mib),
           frontier && r->pareto ? "  *" : "");
}

/* Why the best wins: its step's parts and memory against the best row of each other policy
 * and of each other pp. */
static void print_why(const struct bm_cluster *c)
{
    const struct bm_cluster_row *b = &c->rows[0];
    printf("\nbest: pp %d x dp %d, vpp %d, %d microbatches per replica, %s %s", b->pp, b->dp, b->vpp, b->microbatches,
           bm_backbone_name(b->backbone), bm_policy_name(b->policy));
    if (b->policy == BM_POL_BIGMAC) printf(" window %d", b->window);
    printf(", ZeRO %d: %.2f samples/s\n", b->zero, b->samples_per_s);
    printf("  step %.3f ms = walk %.3f + exposed sync %.3f (of %.3f) + optimizer %.3f; peak %.3f of %.3f GiB\n",
           b->step_ms, b->makespan_ms, b->sync_exposed_ms, b->sync_total_ms, b->optimizer_ms, GIB(b->peak_mib),
           GIB(c->cap_mib));
    for (int k = 0; k < 2; k++) /* the best other policy, then the best other pp */
        for (int i = 1; i < c->n_rows; i++) {
            const struct bm_cluster_row *r = &c->rows[i];
            if (r->oom || (k == 0 ? r->policy == b->policy : r->pp == b->pp)) continue;
            printf("  vs the best %s (%s, pp %d x dp %d, vpp %d, ZeRO %d, %.2f samples/s): walk %+.3f ms, exposed sync "
                   "%+.3f ms, optimizer %+.3f ms, peak %+.3f GiB\n",
                   k == 0 ? "other policy" : "other pp", bm_policy_name(r->policy), r->pp, r->dp, r->vpp, r->zero,
                   r->samples_per_s, b->makespan_ms - r->makespan_ms, b->sync_exposed_ms - r->sync_exposed_ms,
                   b->optimizer_ms - r->optimizer_ms, GIB(b->peak_mib - r->peak_mib));
            break;
        }
}

int bm_cmd_sweep_cluster(int argc, char **argv)
{
    struct bm_plan_opts f; /* the plan flags (BM_UNSET: not given) */
    bm_plan_opts_unset(&f);
    struct bm_cluster_opts co = {0};
    double cap_gib = 0;
    int json = 0, frontier = 0, top = 15;
    const char *path = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        }
        int valued = !strcmp(a, "--gpus") || !strcmp(a, "--global-batch") || !strcmp(a, "--mem-cap-gib") ||
                     !strcmp(a, "--top") || !strcmp(a, "--search");
        if (valued && i + 1 >= argc) {
            fprintf(stderr, "bigmac: error: %s needs a value\n", a);
            return BM_USAGE;
        }
        if (!strcmp(a, "--gpus")) {
            if (bm_cli_int(a, argv[++i], &co.gpus)) return BM_USAGE;
        } else if (!strcmp(a, "--global-batch")) {
            if (bm_cli_int(a, argv[++i], &co.global_batch)) return BM_USAGE;
        } else if (!strcmp(a, "--top")) {
            if (bm_cli_int(a, argv[++i], &top)) return BM_USAGE;
        } else if (!strcmp(a, "--mem-cap-gib")) {
            if (bm_cli_double(a, argv[++i], &cap_gib)) return BM_USAGE;
        } else if (!strcmp(a, "--search")) {
            const char *v = argv[++i];
            if (!strcmp(v, "off")) co.search = BM_SEARCH_OFF;
            else if (bm_cli_int(a, v, &co.search)) return BM_USAGE;
        } else if (!strcmp(a, "--json")) {
            json = 1;
        } else if (!strcmp(a, "--frontier")) {
            frontier = 1;
        } else {
            int k = bm_cli_plan_flag(argc, argv, &i, &f);
            if (k < 0) return BM_USAGE;
            if (k > 0) {
                if (f.pp != BM_UNSET || f.vpp != BM_UNSET || f.microbatches != BM_UNSET || f.dp != BM_UNSET ||
                    f.zero != BM_UNSET || (int)f.policy != BM_UNSET || f.window != BM_UNSET || f.unit != BM_UNSET) {
                    fprintf(stderr, "bigmac: error: sweep --gpus: %s is not allowed: the sweep tries every pp x dp, "
                                    "vpp, microbatch count, policy, window and ZeRO stage\n", a);
                    return BM_USAGE;
                }
                continue;
            }
            if (a[0] == '-' && a[1]) {
                fprintf(stderr, "bigmac: error: sweep --gpus: unknown flag '%s'\n", a);
                usage(stderr);
                return BM_USAGE;
            }
            if (path) {
                fprintf(stderr, "bigmac: error: sweep: one SPEC only (got '%s' and '%s')\n", path, a);
                return BM_USAGE;
            }
            path = a;
        }
    }
    if (!co.gpus || !co.global_batch) {
        fprintf(stderr, "bigmac: error: sweep: --gpus and --global-batch go together (the cluster and the "
                        "samples per step)\n");
        return BM_USAGE;
    }
    struct bm_spec *s;
    struct bm_plan_opts base;
    int lrc = bm_cli_load_spec("sweep", path, &f, usage, &s, &base);
    if (lrc) return lrc;
    co.mem_cap_mib = cap_gib * 1024.0;
    co.progress = stderr;
    struct bm_cluster c;
    struct bm_err err;
    if (bm_cluster_sweep(s, &base, &co, &c, &err)) {
        bm_cli_error(err.msg);
        bm_spec_free(s);
        return 1;
    }
    if (json) {
        json_t *rows = json_array();
        for (int i = 0; i < c.n_rows; i++) json_array_append_new(rows, row_json(&c.rows[i], i + 1));
        json_t *j = json_pack("{s:s, s:i, s:i, s:f, s:i, s:i, s:i, s:i, s:o, s:o}", "spec", s->name ? s->name : path,
                              "gpus", co.gpus, "global_batch", co.global_batch, "mem_cap_gib", GIB(c.cap_mib),
                              "configs", c.configs, "skipped", c.skipped, "same_as_auto", c.same, "fit", c.n_fit, "rows", rows, "best",
                              c.n_fit ? row_json(&c.rows[0], 1) : json_null());
        bm_cli_json_print(j);
        json_decref(j);
    } else {
        printf("%s on %d GPUs, %d samples per step: %d configurations, %d fit in %.3f GiB, %d did not plan, "
               "%d were bigmac at window fit choosing auto's window\n", s->name ? s->name : path, co.gpus,
               co.global_batch, c.configs, c.n_fit, GIB(c.cap_mib), c.skipped, c.same);
        printf("layouts: %s\n", c.layouts);
        if (c.first_skip[0]) printf("first not planned: %s\n", c.first_skip);
        printf("\n%4s %4s %4s %4s %5s %-12s %-17s %6s %4s %11s %11s %9s %9s %11s %9s\n", "#", "pp", "dp", "vpp", "M",
               "backbone", "policy", "window", "zero", "step ms", "walk ms", "sync ms", "optim ms", "samples/s",
               "peak GiB");
        int shown = 0;
        for (int i = 0; i < c.n_fit && shown < top; i++, shown++) print_row(&c.rows[i], i + 1, frontier);
        if (frontier) /* every Pareto row, also below the top */
            for (int i = shown; i < c.n_fit; i++)
                if (c.rows[i].pareto) print_row(&c.rows[i], i + 1, 1);
        if (c.n_rows > c.n_fit) printf("(%d more over the memory cap, dropped)\n", c.n_rows - c.n_fit);
        if (c.n_fit) print_why(&c);
        else printf("\nbest: none (%s)\n", c.n_rows ? "every configuration is over the memory cap" : "none planned");
    }
    int rc = c.n_fit ? 0 : 1;
    bm_cluster_free(&c);
    bm_spec_free(s);
    return rc;
}
