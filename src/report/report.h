/* report.h — renderers of a table and its timeline (docs/design.md §10) and the loaders of their
 * reloadable forms (CSV, Chrome trace).
 *
 *   ascii  one line per rank, time scaled to a width          (ascii.c)
 *   trace  Chrome Trace Event JSON, table embedded             (trace.c, docs/trace.md)
 *   svg    standalone SVG timeline with memory curves          (svg.c)
 *   html   self-contained report: canvas timeline, hover, zoom (html.c)
 *   csv    PyTorch-pipelining style action rows                (csv.c, docs/csv.md)
 *
 * All writers take the table t and a timeline tl of t (simulated by bm_simulate or measured:
 * tl->measured), stream to FILE *f and return BM_OK, or BM_ERR on a write/allocation error.
 * None keeps state between calls. */
#ifndef BM_REPORT_H
#define BM_REPORT_H

#include "bigmac.h"
#include "study/frontier.h"
#include "table/table.h"

/* ---------------------------------------------------------------- shared helpers (common.c) */

/* "#rrggbb" for compute ops of 'module' with 'pass': a hue per module (backbone blue,
 * encoders greens, generators oranges/purples), F lighter, B darker; W (weight gradient of a
 * split backward) its own colour: the module's hue turned by 48 degrees and greyer. */
void bm_report_color(const struct bm_table *t, int module, int pass, char out[8]);

/* Compute ops of table t (what the report's embedded timelines are budgeted by). */
long bm_report_compute_ops(const struct bm_table *t);
/* Write s as a JSON string that is safe inside <script>: '<', '>' and '&' as \u escapes. */
void bm_report_js_str(FILE *f, const char *s);

/* Local chunk index (0..V-1) of a backbone op's global chunk. */
static inline int bm_report_local_chunk(const struct bm_table *t, int chunk)
{
    if (t->pp <= 0) return 0;
    if (!t->chunk_rank && !bm_backbone_v_shaped(t->backbone)) return chunk / t->pp;
    int r = bm_table_chunk_rank(t, chunk), j = 0; /* chunks of the same rank before it */
    for (int c = 0; c < chunk; c++) j += bm_table_chunk_rank(t, c) == r;
    return j;
}

/* One row of the policy comparison (HTML report from a spec). */
struct bm_report_policy_row {
    enum bm_policy policy;
    int ok;                          /* 0: planning or simulation failed (see error) */
    char error[256];
    double makespan_ms, bubble_ratio;
    double peak_act_mib[BM_N_ROLES]; /* max over ranks */
    double peak_mib;
    int oom;
    int window;
    int recompute;                   /* 1: the "optimus+recompute" row (encoders, generators) */
    long n_ops;                      /* the table's ops */
    double nested_max_ms;            /* largest per-rank encoder + generator busy time */
    struct bm_table *t;              /* the row's table and timeline when ok (owned by the */
    struct bm_timeline *tl;          /* comparison: bm_report_compare_free) */
};
struct bm_report_compare {
    struct bm_report_policy_row rows[BM_N_POLICIES + 1]; /* rows[p] is policy p; then optimus+recompute */
    int n_rows;
    double bound_ms;                 /* none's makespan + max per-rank nested busy of bigmac; <0 n/a */
    struct bm_frontier *frontier;    /* the compute/memory frontier with its timelines, or NULL */
    long frontier_skipped_ops;       /* > 0: no frontier, the table has this many ops (too big) */
    double lower_ms;                 /* makespan lower bound: the smallest of every policy's own
                                      * (docs/simulator.md "Lower bound"; none left out); <0 n/a */
};

/* Compute ops of all the timelines a report embeds besides its main one (policy rows first,
 * then frontier points), and the table size above which a report from a spec builds no
 * frontier (dozens of plans of it would take minutes; `bigmac sweep --frontier` still can). */
#define BM_REPORT_MINI_BUDGET 400000L
#define BM_REPORT_FRONTIER_MAX_OPS 200000L

/* "optimus+recompute" for that row, else the policy's name. */
const char *bm_report_row_name(const struct bm_report_policy_row *row);

/* Plan and simulate spec s under all six policies with o's parallel settings (o->policy is
 * ignored) and fill cmp; when optimus runs out of memory also optimus with every encoder and
 * generator recomputed (one more row); and the compute/memory frontier (src/study/frontier.h,
 * NULL when nothing of it plans, or when the bigmac table has more than
 * BM_REPORT_FRONTIER_MAX_OPS ops). Rows and points keep their tables and timelines only while
 * their compute ops fit BM_REPORT_MINI_BUDGET (in that order). A policy that fails to plan or simulate gets ok = 0 and its
 * error. s's modules' recompute is changed while building and restored. Returns BM_OK; the
 * caller releases cmp with bm_report_compare_free. */
int bm_report_compare_build(struct bm_spec *s, const struct bm_plan_opts *o,
                            struct bm_report_compare *cmp);
void bm_report_compare_free(struct bm_report_compare *cmp);

/* ---------------------------------------------------------------- writers */

/* ASCII timeline, 'width' columns of time (<= 0: 120). */
int bm_render_ascii(const struct bm_table *t, const struct bm_timeline *tl, int width, FILE *f);
/* Chrome Trace Event JSON (docs/trace.md). */
int bm_render_trace(const struct bm_table *t, const struct bm_timeline *tl, FILE *f);
/* Standalone SVG; title may be NULL. span_ms: the time axis' length (<= makespan or 0: the
 * makespan), so pictures of several policies can share one scale. */
int bm_render_svg(const struct bm_table *t, const struct bm_timeline *tl, const char *title,
                  double span_ms, FILE *f);
/* Self-contained HTML report; cmp (policy comparison) and title may be NULL. */
int bm_render_html(const struct bm_table *t, const struct bm_timeline *tl,
                   const struct bm_report_compare *cmp, const char *title, FILE *f);
/* The same report for a measured run (tl measured) with, under its timeline, the simulated
 * timeline sim of the same table and the per-op deviation between the two. */
int bm_render_html_vs(const struct bm_table *t, const struct bm_timeline *tl, const struct bm_timeline *sim,
                      const char *title, FILE *f);
/* Calibrate costs, rank scale and per-microbatch encoder scale from the measured timeline of
 * table mt (src/sim/calibrate.h: medians), write them into 'table' (the same plan: BM_ERR
 * otherwise) and simulate it into *out (caller frees). */
int bm_report_vs_simulate(const struct bm_table *mt, const struct bm_timeline *measured, struct bm_table *table,
                          struct bm_timeline **out, struct bm_err *err);
/* Load a Chrome trace written by bm_render_trace (or by the executor in that shape,
 * docs/trace.md): the embedded table and the op times/memory of its events. *t and *tl are new
 * (caller frees); tl->measured is the trace's "measured" flag. Streams over the text (no JSON
 * tree), so traces of hundreds of MB load in seconds. Errors name name:line:col. */
int bm_trace_parse(const char *text, const char *name, struct bm_table **t,
                   struct bm_timeline **tl, struct bm_err *err);
/* 1 when text is a JSON object with a top-level "traceEvents" member (a Chrome trace). */
int bm_trace_sniff(const char *text);
int bm_trace_load(const char *path, struct bm_table **t, struct bm_timeline **tl,
                  struct bm_err *err);

#endif
