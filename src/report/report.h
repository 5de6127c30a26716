/* report.h — renderers of a table and its timeline (docs/design.md §10) and the loaders of their
 * reloadable forms (CSV, Chrome trace).
 *
 *   ascii  one line per rank, time scaled to a width          (ascii.c)
 *   trace  Chrome Trace Event JSON, table embedded             (trace.c, docs/trace.md)
 *   svg    standalone SVG timeline with memory curves          (svg.c)
 *   html   self-contained report: canvas timeline, hover, zoom (html.c)
 *   csv    PyTorch-pipelining style action rows                (csv.c, docs/csv.md)
 *
 * The writers and the trace loader that programs use are public (include/bigmac_report.h); this
 * header adds what the CLI and the report need beside them. */
#ifndef BM_REPORT_H
#define BM_REPORT_H

#include "bigmac.h"
#include "bigmac_report.h"
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
struct bm_report_compare {
    struct bm_compare c;             /* every policy's row and both bounds (bm_compare); the
                                      * rows keep their tables and timelines while their compute
                                      * ops fit BM_REPORT_MINI_BUDGET */
    struct bm_frontier *frontier;    /* the compute/memory frontier with its timelines, or NULL */
    long frontier_skipped_ops;       /* > 0: no frontier, the table has this many ops (too big) */
};

/* Compute ops of all the timelines a report embeds besides its main one (policy rows first,
 * then frontier points), and the table size above which a report from a spec builds no
 * frontier (dozens of plans of it would take minutes; `bigmac sweep --frontier` still can). */
#define BM_REPORT_MINI_BUDGET 400000L
#define BM_REPORT_FRONTIER_MAX_OPS 200000L

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

/* bm_render_trace for dp data-parallel replicas of the table's pipeline, tl[0 .. dp-1] one
 * timeline per replica: pipeline rank p of replica d is process d * pp + p, named "pp p / dp d"
 * and sorted by its global rank p * dp + d; the summary, the critical path and the loader's ranks
 * are replica 0's (processes 0 .. pp-1). dp = 1 is bm_render_trace. */
int bm_render_trace_dp(const struct bm_table *t, const struct bm_costs *c, const struct bm_timeline *const *tl, int dp,
                       FILE *f);
/* Whether every number of tl is one a trace may hold: op start/end/ready times and memory points'
 * times finite and in 0..1e9 ms, message bytes in 0..1e12 MiB, memory values in 0..1e12 MiB, the
 * makespan and bubble ratio finite. BM_ERR naming the first rank and op (or point) otherwise.
 * bm_render_trace writes nothing for a timeline that fails it. */
int bm_trace_check_times(const struct bm_table *t, const struct bm_timeline *tl, struct bm_err *err);
/* The same report for a measured run (tl measured) with, under its timeline, the simulated
 * timeline sim of the same table and the per-op deviation between the two. */
int bm_render_html_vs(const struct bm_table *t, const struct bm_costs *c, const struct bm_timeline *tl,
                      const struct bm_timeline *sim, const char *title, FILE *f);
/* Calibrate costs, rank scale and per-microbatch encoder scale from the measured timeline of
 * table mt with its cost model mc (src/calib/calib.h: medians) into a cost model of 'table' (the
 * same plan: BM_ERR otherwise; its chunk weights and device from tc, the table's own cost model),
 * stored in *costs, and simulate 'table' under it into *out (caller frees both). */
int bm_report_vs_simulate(const struct bm_table *mt, const struct bm_costs *mc, const struct bm_timeline *measured,
                          const struct bm_table *table, const struct bm_costs *tc, struct bm_costs **costs,
                          struct bm_timeline **out, struct bm_err *err);
/* bm_trace_parse of data-parallel replica `replica` of a trace written for dp replicas
 * (bm_render_trace_dp: processes replica * pp .. replica * pp + pp - 1; replica 0 is what
 * bm_trace_parse reads). A replica past the table's dp is an error; a replica > 0 of which the
 * trace has no op event at all (a trace of one replica) is BM_OK with *tl = NULL (and *t, *c
 * still set). */
int bm_trace_parse_replica(const char *text, const char *name, int replica, struct bm_table **t, struct bm_costs **c,
                           struct bm_timeline **tl, struct bm_err *err);
/* 1 when text is a JSON object with a top-level "traceEvents" member (a Chrome trace). */
int bm_trace_sniff(const char *text);
/* The top-level "format" string of the JSON object in text into fmt (n bytes; "" when there is
 * none), by the trace loader's scanner: no JSON tree, so a table or trace of hundreds of MB is
 * told apart in one pass over its text. BM_ERR with err naming name:line:col when the text is
 * not one JSON object. */
int bm_json_sniff_format(const char *text, const char *name, char *fmt, size_t n, struct bm_err *err);

#endif
