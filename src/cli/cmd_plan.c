/* cmd_plan.c — `bigmac plan SPEC [plan flags] [-o TABLE.json]`: spec -> operator table. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "report/report.h"
#include "util/util.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: bigmac plan SPEC [--pp N] [--vpp V] [--microbatches M] [--unit U]\n"
            "                        [--backbone gpipe|1f1b|interleaved|zb-h1|zb-interleaved|zb-v|dualpipe-v]\n"
            "                        [--policy bigmac|optimus|unified|unified-balanced|ideal|none]\n"
            "                        [--window W|auto|fit] [--ranks-per-host N] [--dp D] [--zero 0|1]\n"
            "                        [-o TABLE.json] [--csv FILE] [--ascii]\n"
            "       bigmac plan --from-csv SCHEDULE.csv [SPEC] [plan flags] [-o TABLE.json] [--no-verify]\n"
            "\n"
            "Plans one training iteration: every rank's ordered compute and send/recv ops.\n"
            "Flags override the spec's \"parallel\" and \"schedule\" settings (--ranks-per-host N:\n"
            "device.ranks_per_host, docs/multihost.md; --dp D: parallel.dp, D replicas of this\n"
            "pipeline, global rank p*D + d, which --ranks-per-host places on hosts). Prints a summary\n"
            "(ranks, ops, peak live microbatches per module and rank, nominal makespan);\n"
            "-o writes the operator table (docs/table.md; '-' = stdout), --csv the same as CSV\n"
            "(docs/csv.md), --ascii prints the simulated timeline (one line per rank; $COLUMNS).\n"
            "--from-csv loads a (hand-edited) CSV schedule instead of planning: the module graph\n"
            "and costs come from SPEC when given, else from the CSV's '#' lines; header values\n"
            "from its '# bigmac-table' line, overridden by the plan flags. The schedule must pass\n"
            "`bigmac verify`'s checks (--no-verify: take it anyway, with a warning).\n"
            "--window caps the encoder units a rank keeps alive (bigmac): W = at most W (the\n"
            "fastest plan under the cap, a larger window taken only when it gains more than\n"
            "0.05%%; the table records the window used), auto = the smallest safe one (least\n"
            "memory), fit = the same rule among the windows that fit device.memory_gib.\n");
}

/* Print the summary of table t planned from spec s. */
static int summary(const char *name, const struct bm_table *t, const struct bm_costs *c, int cap, FILE *f)
{
    long n = 0, nc = 0, ns = 0;
    for (int r = 0; r < t->pp; r++)
        for (int i = 0; i < t->ranks[r].n_ops; i++) {
            n++;
            nc += t->ranks[r].ops[i].kind == BM_OP_COMPUTE;
            ns += t->ranks[r].ops[i].kind == BM_OP_SEND;
        }
    fprintf(f, "%s: policy %s, backbone %s, P=%d V=%d M=%d U=%d", name,
            bm_policy_name(t->policy), bm_backbone_name(t->backbone), t->pp, t->vpp,
            t->microbatches, t->unit);
    if (t->window) fprintf(f, " W=%d", t->window);
    if (t->dp > 1) fprintf(f, " D=%d (%d ranks, rank = p*%d + d)", t->dp, t->pp * t->dp, t->dp);
    if (t->policy == BM_POL_BIGMAC && cap > t->window) fprintf(f, " (under the cap W=%d, none faster by more than %g%%)", cap, BM_WINDOW_GAIN * 100);
    fprintf(f, "\nops: %ld (%ld compute, %ld send, %ld recv)\n", n, nc, ns, ns);
    int *live = bm_calloc((size_t)t->pp * (size_t)t->n_modules, sizeof(int));
    if (!live) {
        bm_cli_error("out of memory printing the plan summary");
        return BM_ERR;
    }
    bm_table_peak_live(t, live);
    fprintf(f, "peak live microbatches per rank:\n  %-6s", "rank");
    for (int m = 0; m < t->n_modules; m++) {
        char h[80];
        snprintf(h, sizeof h, "%s (%s)", t->modules[m].name, bm_role_name(t->modules[m].role));
        fprintf(f, " %18s", h);
    }
    fprintf(f, "\n");
    for (int r = 0; r < t->pp && r < 64; r++) {
        fprintf(f, "  %-6d", r);
        for (int m = 0; m < t->n_modules; m++) fprintf(f, " %18d", live[r * t->n_modules + m]);
        fprintf(f, "\n");
    }
    if (t->pp > 64) fprintf(f, "  ... %d more ranks\n", t->pp - 64);
    bm_free(live);
    struct bm_timeline *tl;
    struct bm_err err;
    if (bm_simulate_summary(t, c, NULL, &tl, &err) != BM_OK) { /* figures only */
        /* a planned table always simulates; what is left is running out of memory */
        bm_cli_error(err.msg);
        return BM_ERR;
    }
    fprintf(f, "nominal makespan %.3f ms, bubble ratio %.3f, peak memory %.2f GiB%s\n",
            tl->makespan_ms, tl->bubble_ratio, tl->peak_mib / 1024.0,
            tl->oom ? " (OUT OF MEMORY on some rank)" : "");
    bm_timeline_free(tl);
    return BM_OK;
}

int bm_cmd_plan(int argc, char **argv)
{
    struct bm_plan_opts flags; /* the plan flags given (the others BM_UNSET) */
    bm_plan_opts_unset(&flags);
    const char *spec_path = NULL, *out_path = NULL, *csv_out = NULL, *csv_in = NULL;
    int ascii = 0, no_verify = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        }
        int k = bm_cli_plan_flag(argc, argv, &i, &flags);
        if (k < 0) return BM_USAGE;
        if (k > 0) continue;
        if (!strcmp(a, "-o") || !strcmp(a, "--csv") || !strcmp(a, "--from-csv")) {
            if (i + 1 >= argc) {
                fprintf(stderr, "bigmac: error: %s needs a file name\n", a);
                return BM_USAGE;
            }
            if (a[1] == 'o') out_path = argv[++i];
            else if (!strcmp(a, "--csv")) csv_out = argv[++i];
            else csv_in = argv[++i];
        } else if (!strcmp(a, "--no-verify")) {
            no_verify = 1;
        } else if (!strcmp(a, "--ascii")) {
            ascii = 1;
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "bigmac: error: plan: unknown flag '%s'\n", a);
            usage(stderr);
            return BM_USAGE;
        } else if (!spec_path) {
            spec_path = a;
        } else {
            fprintf(stderr, "bigmac: error: plan takes one SPEC (got '%s' and '%s')\n", spec_path, a);
            return BM_USAGE;
        }
    }
    if (no_verify && !csv_in) {
        fprintf(stderr, "bigmac: error: plan: --no-verify is for --from-csv (a planned table is valid)\n");
        return BM_USAGE;
    }
    if (!spec_path && !csv_in) {
        usage(stderr);
        return BM_USAGE;
    }
    struct bm_err err;
    struct bm_spec *spec = NULL;
    if (spec_path && bm_spec_load(spec_path, &spec, &err)) {
        bm_cli_error(err.msg);
        return BM_ERR;
    }
    struct bm_plan_opts o;
    struct bm_table *t;
    struct bm_costs *c = NULL;
    if (csv_in) {
        int lowered = 0;
        if (bm_csv_load(csv_in, spec, &flags, &t, &c, &err) || bm_plan_lower_loaded(t, &lowered, &err)) {
            char msg[sizeof err.msg + 300];
            snprintf(msg, sizeof msg, "%s%s%s", strncmp(err.msg, csv_in, strlen(csv_in)) ? csv_in : "",
                     strncmp(err.msg, csv_in, strlen(csv_in)) ? ": " : "", err.msg);
            bm_cli_error(msg);
            bm_table_free(t);
            bm_costs_free(c);
            bm_spec_free(spec);
            return BM_ERR;
        }
        if (bm_cli_verify_table(t, csv_in, no_verify, &err)) { /* lowered or as written: verified */
            bm_cli_error(err.msg);
            bm_table_free(t);
            bm_costs_free(c);
            bm_spec_free(spec);
            return BM_ERR;
        }
        if (lowered)
            fprintf(out_path && !strcmp(out_path, "-") ? stderr : stdout,
                    "%s: compute ops only: added the sends and receives bigmac's planner would (docs/csv.md)\n", csv_in);
    } else {
        bm_plan_opts_to_spec(&flags, spec);
        bm_plan_opts_from_spec(&o, spec);
        bm_plan_opts_merge(&o, &flags);
        if (bm_plan_build(spec, &o, &t, &c, &err)) {
            char msg[sizeof err.msg + 300];
            snprintf(msg, sizeof msg, "%s: cannot plan: %s", spec_path, err.msg);
            bm_cli_error(msg);
            bm_spec_free(spec);
            return BM_ERR;
        }
    }
    int rc = BM_OK;
    FILE *info = out_path && !strcmp(out_path, "-") ? stderr : stdout;
    const char *name = csv_in ? csv_in : spec->name ? spec->name : spec->path;
    if (summary(name, t, c, csv_in ? 0 : o.window, info)) rc = BM_ERR;
    if (!rc && ascii) {
        struct bm_timeline *tl;
        if (bm_simulate(t, c, NULL, &tl, &err)) {
            bm_cli_error(err.msg);
            rc = BM_ERR;
        } else {
            const char *cols = getenv("COLUMNS");
            int w = cols && atoi(cols) >= 20 && atoi(cols) <= 100000 ? atoi(cols) - 12 : 120;
            if (bm_render_ascii(t, tl, w, info)) rc = BM_ERR;
            bm_timeline_free(tl);
        }
    }
    if (!rc && csv_out && bm_csv_check_names(t, &err)) {
        bm_cli_error(err.msg);
        rc = BM_ERR;
    }
    if (!rc && csv_out) {
        FILE *cf = strcmp(csv_out, "-") ? fopen(csv_out, "w") : stdout;
        int bad = !cf || bm_csv_write(t, c, cf);
        if (cf && cf != stdout && fclose(cf)) bad = 1;
        if (bad) {
            fprintf(stderr, "bigmac: error: %s: cannot write the CSV\n", csv_out);
            rc = BM_ERR;
        } else if (cf != stdout) {
            fprintf(info, "wrote %s\n", csv_out);
        }
    }
    if (!rc && out_path) {
        if (bm_table_save(t, c, out_path, &err)) {
            bm_cli_error(err.msg);
            rc = BM_ERR;
        } else if (strcmp(out_path, "-")) {
            fprintf(info, "wrote %s\n", out_path);
        }
    }
    bm_table_free(t);
    bm_costs_free(c);
    bm_spec_free(spec);
    return rc;
}
