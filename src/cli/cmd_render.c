/* cmd_render.c — `bigmac render INPUT --format ascii|svg|html|trace|csv [-o FILE]`: draw a
 * schedule. INPUT is a spec (planned with the plan flags, then simulated), an operator table
 * (simulated), a Chrome trace written by bigmac (its measured or simulated times are drawn as
 * they are) or a CSV schedule (docs/csv.md). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "report/report.h"
#include "spec/jpos.h"
#include "util/util.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: bigmac render TABLE.json|SPEC.json|TRACE.json|SCHEDULE.csv\n"
            "                     --format ascii|svg|html|trace|csv|torch-csv [-o FILE] [--width N]\n"
            "                     [--comms] [--title TEXT] [--span MS] [plan flags: --pp --vpp --microbatches\n"
            "                      --unit --backbone --policy --window --ranks-per-host --dp --zero] [--no-verify]\n"
            "       bigmac render RUN_TRACE.json --table TABLE.json --format html [-o FILE]\n"
            "\n"
            "Draws one training iteration's schedule:\n"
            "  ascii  one line per rank in the terminal (--width columns; default $COLUMNS or 120)\n"
            "  svg    standalone SVG timeline: lanes per rank, colours by module and pass, memory\n"
            "         (--span MS: time axis length, to draw several schedules on one scale)\n"
            "  html   self-contained report (no network): zoomable timeline, hover shows each op\n"
            "         and what it waited for, memory curves, metrics; from a SPEC also a comparison\n"
            "         of all six policies and the zero-added-bubble bound\n"
            "  trace  Chrome trace JSON for Perfetto / chrome://tracing (docs/trace.md); it embeds\n"
            "         the table, so `render trace.json --format html` works\n"
            "  csv    PyTorch-pipelining style rows (docs/csv.md); reload with `plan --from-csv`\n"
            "  torch-csv  the backbone in PyTorch's own grammar, loadable by its _load_csv\n"
            "         (compute only; --comms adds its SEND/RECV cells, format \"compute_comms\");\n"
            "         encoder/generator work has no cell there: one line on stderr says what was left out\n"
            "--table TABLE.json (with a measured trace, html): also the table simulated with the\n"
            "costs calibrated from the trace, under the measured timeline, and the per-op deviation.\n"
            "A SPEC is planned with the plan flags first; a table or CSV is simulated; a trace is\n"
            "drawn with the times it holds. -o - (the default) writes to stdout. A table, CSV or\n"
            "trace's table must pass `bigmac verify` (--no-verify: draw it anyway, with a warning).\n"
            "\n"
            "Exit status: 0 ok, 1 unreadable input or planning/simulation failure, 2 usage error.\n");
}

/* JSON nesting a render input may have: the spec and table loaders' limit. */
#define RENDER_MAX_DEPTH 64

enum fmt { F_NONE = -1, F_ASCII, F_SVG, F_HTML, F_TRACE, F_CSV, F_TORCH_CSV };

static int parse_format(const char *s)
{
    static const char *const names[] = {"ascii", "svg", "html", "trace", "csv", "torch-csv"};
    for (int i = 0; i < 6; i++)
        if (!strcmp(s, names[i])) return i;
    return F_NONE;
}

/* Width for ascii: $COLUMNS minus the "rank N |...|" decoration, or 120. */
static int default_width(void)
{
    const char *c = getenv("COLUMNS");
    int w = c ? atoi(c) : 0;
    if (w >= 20 && w <= 100000) return w - 12;
    return 120;
}

/* Render t/tl (cmp may be NULL) in format fm to path. */
static int write_out(int fm, const struct bm_table *t, const struct bm_costs *c, const struct bm_timeline *tl,
                     const struct bm_report_compare *cmp, const char *title, int width,
                     double span, int comms, const char *path)
{
    char note[512] = "";
    FILE *f = stdout;
    if (path && strcmp(path, "-")) {
        f = fopen(path, "w");
        if (!f) {
            fprintf(stderr, "bigmac: error: %s: cannot write: ", path);
            perror(NULL);
            return BM_ERR;
        }
    }
    int rc;
    switch (fm) {
    case F_ASCII: rc = bm_render_ascii(t, tl, width, f); break;
    case F_SVG: rc = bm_render_svg(t, tl, title, span, f); break;
    case F_HTML: rc = bm_render_html(t, c, tl, cmp, title, f); break;
    case F_TRACE: rc = bm_render_trace(t, c, tl, f); break;
    case F_TORCH_CSV: rc = bm_csv_write_torch(t, comms, f, note, sizeof note); break;
    default: rc = bm_csv_write(t, c, f); break;
    }
    if (note[0]) fprintf(stderr, "bigmac: note: torch-csv: %s\n", note);
    if (f != stdout) {
        if (fclose(f)) rc = BM_ERR;
    } else if (fflush(f)) {
        rc = BM_ERR;
    }
    if (rc) fprintf(stderr, "bigmac: error: %s: write error\n", path && strcmp(path, "-") ? path : "<stdout>");
    return rc;
}

/* The input's kind by its first bytes and "format": a CSV schedule, a trace (measured or
 * simulated; *is_trace), a spec (*spec, to be planned) or a table (*t, with its costs *c). The format is found by
 * a scan of the text (bm_json_sniff_format: no JSON tree, whatever the size); each loader then
 * guards its own nesting. An empty file and a JSON array (the other Chrome trace form) are
 * named as such, not read as a CSV. */
static int load_input(const char *text, size_t len, const char *in, struct bm_spec **spec, struct bm_table **t,
                      struct bm_costs **c, struct bm_timeline **tl, int *is_trace, struct bm_err *err)
{
    if (!strncmp(text, "\xef\xbb\xbf", 3)) text += 3, len -= 3; /* a UTF-8 byte-order mark (spreadsheets write one) */
    const char *p = text;
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') p++;
    if (strlen(text) != len) return bm_err_set(err, "%s: not a text file", in);
    if (!*p) return bm_err_set(err, "%s: the file is empty (render draws a table, spec, trace or CSV schedule)", in);
    if (*p == '[')
        return bm_err_set(err, "%s: a JSON array, not a bigmac file: a Chrome trace in the array form has no "
                               "\"bigmac\" object with the table, so it cannot be re-rendered\n"
                               "hint: render draws a table, a spec, a CSV schedule or a trace bigmac wrote "
                               "(render --format trace, train --trace; docs/trace.md)", in);
    if (*p != '{') {
        int lowered = 0;
        if (bm_csv_parse(text, in, NULL, NULL, t, c, err)) return BM_ERR;
        if (bm_plan_lower_loaded(*t, &lowered, err)) {
            char msg[sizeof err->msg];
            snprintf(msg, sizeof msg, "%s", err->msg);
            return bm_err_set(err, "%s: %s", in, msg);
        }
        if (lowered)
            fprintf(stderr, "%s: compute ops only: added the sends and receives bigmac's planner would (docs/csv.md)\n", in);
        return BM_OK;
    }
    int line, col;
    if (bm_jpos_depth(text, RENDER_MAX_DEPTH, &line, &col))
        return bm_err_set(err, "%s:%d:%d: JSON nested deeper than %d levels (a guard against absurd input)", in,
                          line, col, RENDER_MAX_DEPTH);
    if (bm_trace_sniff(text)) {
        *is_trace = 1;
        return bm_trace_parse(text, in, t, c, tl, err);
    }
    char format[64];
    if (bm_json_sniff_format(text, in, format, sizeof format, err)) return BM_ERR;
    if (!strcmp(format, "bigmac-spec")) return bm_spec_parse(text, in, spec, err);
    if (!strcmp(format, "bigmac-table")) return bm_table_parse(text, in, t, c, err);
    return bm_err_set(err, "%s: not a bigmac spec, table or trace (\"format\" is \"%s\"; a trace has \"traceEvents\")",
                      in, format);
}

/* `render RUN_TRACE --table TABLE --format html`: the measured run (t, tl) against its table
 * simulated from the run's own costs, written to out. BM_ERR with err set on failure. */
static int render_vs(const char *in, const char *vs_table, int is_trace, const struct bm_table *t,
                     const struct bm_costs *c, const struct bm_timeline *tl, const char *title, const char *out,
                     int no_verify, struct bm_err *err)
{
    if (!is_trace || !tl->measured) {
        bm_err_set(err, "%s: --table needs a measured trace (`bigmac train ... --trace`), got %s", in,
                   is_trace ? "a simulated trace" : "no trace");
        return BM_ERR;
    }
    struct bm_table *vt = NULL;
    struct bm_costs *vc = NULL, *fit = NULL; /* the table's own costs; the run's, calibrated */
    struct bm_timeline *vtl = NULL;
    if (bm_table_load(vs_table, &vt, &vc, err)) return BM_ERR;
    if (bm_cli_verify_table(vt, vs_table, no_verify, err)) {
        bm_table_free(vt), bm_costs_free(vc);
        return BM_ERR;
    }
    if (bm_report_vs_simulate(t, c, tl, vt, vc, &fit, &vtl, err)) {
        char msg[sizeof err->msg + 300];
        snprintf(msg, sizeof msg, "%s: %s", vs_table, err->msg);
        snprintf(err->msg, sizeof err->msg, "%s", msg);
        bm_table_free(vt), bm_costs_free(vc);
        return BM_ERR;
    }
    FILE *f = strcmp(out, "-") ? fopen(out, "w") : stdout;
    if (!f) {
        bm_err_set(err, "%s: cannot open for writing", out);
        bm_timeline_free(vtl), bm_table_free(vt), bm_costs_free(vc), bm_costs_free(fit);
        return BM_ERR;
    }
    int rc = bm_render_html_vs(t, c, tl, vtl, title, f);
    if (f != stdout ? fclose(f) != 0 : fflush(f) != 0) rc = BM_ERR;
    bm_timeline_free(vtl), bm_table_free(vt), bm_costs_free(vc), bm_costs_free(fit);
    if (rc) return bm_err_set(err, "%s: write error", out);
    if (strcmp(out, "-")) fprintf(stderr, "wrote %s\n", out);
    return BM_OK;
}

/* What the command line says. */
struct args {
    struct bm_plan_opts flags;  /* the plan flags (BM_UNSET: not given) */
    const char *in, *out, *title, *vs_table;
    int fm, width, any_plan_flag, no_verify, comms;
    double span;
};

/* The command line into *g. Returns -1 to go on, else the exit status (--help: 0; a usage
 * error: BM_USAGE, printed). */
static int parse_args(int argc, char **argv, struct args *g)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        }
        int k = bm_cli_plan_flag(argc, argv, &i, &g->flags);
        if (k < 0) return BM_USAGE;
        if (k > 0) {
            g->any_plan_flag = 1;
            continue;
        }
        if (!strcmp(a, "--no-verify")) {
            g->no_verify = 1;
            continue;
        }
        if (!strcmp(a, "-o") || !strcmp(a, "--format") || !strcmp(a, "--width") ||
            !strcmp(a, "--title") || !strcmp(a, "--span") || !strcmp(a, "--table")) {
            if (i + 1 >= argc) {
                fprintf(stderr, "bigmac: error: %s needs a value\n", a);
                return BM_USAGE;
            }
            const char *v = argv[++i];
            if (a[1] == 'o') g->out = v;
            else if (!strcmp(a, "--title")) g->title = v;
            else if (!strcmp(a, "--table")) g->vs_table = v;
            else if (!strcmp(a, "--span")) {
                if (bm_cli_double(a, v, &g->span)) return BM_USAGE;
            }
            else if (!strcmp(a, "--width")) {
                if (bm_cli_int(a, v, &g->width)) return BM_USAGE;
            } else if ((g->fm = parse_format(v)) == F_NONE) {
                fprintf(stderr, "bigmac: error: --format: unknown format '%s' (ascii, svg, html, trace, csv, torch-csv)\n", v);
                return BM_USAGE;
            }
        } else if (!strcmp(a, "--comms")) {
            g->comms = 1;
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "bigmac: error: render: unknown flag '%s'\n", a);
            fprintf(stderr, "usage: bigmac render INPUT --format ascii|svg|html|trace|csv [-o FILE]   (--help for more)\n");
            return BM_USAGE;
        } else if (!g->in) {
            g->in = a;
        } else {
            fprintf(stderr, "bigmac: error: render takes one input (got '%s' and '%s')\n", g->in, a);
            return BM_USAGE;
        }
    }
    if (!g->in) {
        fprintf(stderr, "bigmac: error: render: what to draw? (a TABLE.json, SPEC.json, trace or CSV)\n");
        fprintf(stderr, "usage: bigmac render INPUT --format ascii|svg|html|trace|csv [-o FILE]   (--help for more)\n");
        return BM_USAGE;
    }
    if (g->fm == F_NONE) {
        fprintf(stderr, "bigmac: error: render: --format is required (ascii, svg, html, trace, csv)\n");
        return BM_USAGE;
    }
    if (!g->width) g->width = default_width();
    if (g->comms && g->fm != F_TORCH_CSV) {
        fprintf(stderr, "bigmac: error: render: --comms adds PyTorch's SEND/RECV cells: --format torch-csv only\n");
        return BM_USAGE;
    }
    if (g->vs_table && g->fm != F_HTML) {
        fprintf(stderr, "bigmac: error: render: --table draws the simulated timeline under a measured one: "
                        "--format html only\n");
        return BM_USAGE;
    }
    return -1;
}

int bm_cmd_render(int argc, char **argv)
{
    struct args g = {.out = "-", .fm = F_NONE};
    bm_plan_opts_unset(&g.flags);
    int prc = parse_args(argc, argv, &g);
    if (prc >= 0) return prc;
    const char *in = g.in, *out = g.out, *title = g.title, *vs_table = g.vs_table;
    int fm = g.fm, width = g.width;
    double span = g.span;
    struct bm_err err;
    size_t len;
    char *text = bm_read_file_max(in, (size_t)BM_MAX_TRACE_TEXT, &len, &err);
    if (!text) {
        bm_cli_error(err.msg);
        return BM_ERR;
    }
    struct bm_spec *spec = NULL;
    struct bm_table *t = NULL;
    struct bm_costs *c = NULL;
    struct bm_timeline *tl = NULL;
    struct bm_report_compare *cmp = NULL;
    int rc = BM_ERR, is_trace = 0;
    if (load_input(text, len, in, &spec, &t, &c, &tl, &is_trace, &err)) goto fail;
    if (!spec && bm_cli_verify_table(t, in, g.no_verify, &err)) goto fail; /* a spec's plan is valid */
    if (!spec && g.any_plan_flag)
        fprintf(stderr, "bigmac: warning: plan flags apply to a SPEC only; %s is already planned\n", in);
    if (spec) {
        struct bm_plan_opts o;
        bm_plan_opts_to_spec(&g.flags, spec);
        bm_plan_opts_from_spec(&o, spec);
        bm_plan_opts_merge(&o, &g.flags);
        if (bm_plan_build(spec, &o, &t, &c, &err)) {
            char msg[sizeof err.msg + 300];
            snprintf(msg, sizeof msg, "%s: cannot plan: %s", in, err.msg);
            snprintf(err.msg, sizeof err.msg, "%s", msg);
            goto fail;
        }
        if (fm == F_HTML) {
            cmp = bm_malloc(sizeof *cmp);
            if (!cmp) {
                bm_err_set(&err, "out of memory");
                goto fail;
            }
            bm_report_compare_build(spec, &o, cmp); /* rows start zeroed: freeing is safe */
        }
    }
    if (!is_trace && fm != F_CSV && fm != F_TORCH_CSV && bm_simulate(t, c, NULL, &tl, &err)) {
        char msg[sizeof err.msg + 300];
        snprintf(msg, sizeof msg, "%s: cannot simulate: %s", in, err.msg);
        snprintf(err.msg, sizeof err.msg, "%s", msg);
        goto fail;
    }
    if (fm == F_CSV && bm_csv_check_names(t, &err)) goto fail;
    if (!title) title = spec && spec->name ? spec->name : in;
    if (vs_table) { /* the measured run against its table simulated from the run's own costs */
        if (render_vs(in, vs_table, is_trace, t, c, tl, title, out, g.no_verify, &err)) goto fail;
        rc = BM_OK;
        goto done;
    }
    rc = write_out(fm, t, c, tl, cmp, title, width, span, g.comms, out);
    if (!rc && strcmp(out, "-")) fprintf(stderr, "wrote %s\n", out);
    goto done;
fail:
    bm_cli_error(err.msg);
    rc = BM_ERR;
done:
    if (cmp) bm_report_compare_free(cmp);
    bm_free(cmp);
    bm_timeline_free(tl);
    bm_table_free(t);
    bm_costs_free(c);
    bm_spec_free(spec);
    bm_free(text);
    return rc;
}
