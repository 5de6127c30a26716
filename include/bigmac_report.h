/* bigmac_report.h — drawing a schedule and reading and writing traces: the renderers behind
 * `bigmac render` and the Chrome-trace loader and writer (docs/render.md, docs/trace.md).
 *
 *   bm_render_ascii   one line per rank, time scaled to a width
 *   bm_render_svg     standalone SVG timeline with memory curves
 *   bm_render_html    self-contained HTML report: canvas timeline, hover, zoom
 *   bm_render_trace   Chrome Trace Event JSON with the table embedded (Perfetto, chrome://tracing)
 *   bm_csv_write      the table as CSV (docs/csv.md), bm_csv_write_torch in PyTorch's grammar
 *   bm_trace_load     such a trace (or one a run of the executors wrote) back into a table and a
 *                     timeline, so it can be drawn, compared or calibrated from
 *   bm_exec_timeline  a measured timeline from per-op times a program recorded itself (what the
 *                     executors and the torch binding do), for bm_exec_trace_write
 *
 * Every writer takes a table t and a timeline tl of t (from bm_simulate, bm_trace_load or
 * bm_exec_timeline: tl->measured), and those that show costs, the step or hosts (trace, HTML) the
 * table's cost model c (bigmac_cost.h; NULL: none, every cost 0); each streams to f, keeps no
 * state between calls and returns BM_OK, or BM_ERR on a write or allocation error.
 *
 *     struct bm_timeline *tl;
 *     if (bm_simulate(table, costs, &(struct bm_sim_opts){0}, &tl, &err) == BM_OK) {
 *         bm_render_ascii(table, tl, 100, stdout);
 *         bm_timeline_free(tl);
 *     }
 */
#ifndef BIGMAC_REPORT_H
#define BIGMAC_REPORT_H

#include <stdio.h>

#include "bigmac.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The policy comparison the CLI embeds in a report from a spec; programs pass NULL. */
struct bm_report_compare;

/* ASCII timeline, 'width' columns of time (<= 0: 120). */
BM_API int bm_render_ascii(const struct bm_table *t, const struct bm_timeline *tl, int width, FILE *f);
/* Chrome Trace Event JSON (docs/trace.md). BM_ERR, writing nothing, when a number of tl is one
 * JSON cannot hold or the loader would refuse (a non-finite or negative time, say). */
BM_API int bm_render_trace(const struct bm_table *t, const struct bm_costs *c, const struct bm_timeline *tl, FILE *f);
/* Standalone SVG; title may be NULL. span_ms: the time axis' length (<= makespan or 0: the
 * makespan), so pictures of several policies can share one scale. */
BM_API int bm_render_svg(const struct bm_table *t, const struct bm_timeline *tl, const char *title,
                         double span_ms, FILE *f);
/* Self-contained HTML report; cmp (the CLI's policy comparison; NULL from programs) and title
 * may be NULL. */
BM_API int bm_render_html(const struct bm_table *t, const struct bm_costs *c, const struct bm_timeline *tl,
                          const struct bm_report_compare *cmp, const char *title, FILE *f);

/* The table as CSV (docs/csv.md): '#' header lines, then one row per rank. BM_ERR (nothing
 * written) when a name cannot be written as CSV (a character CSV uses, or a name or tensor list
 * longer than a CSV field); bm_csv_check_names says which. */
BM_API int bm_csv_write(const struct bm_table *t, const struct bm_costs *costs, FILE *f);
BM_API int bm_csv_check_names(const struct bm_table *t, struct bm_err *err);
/* The table in PyTorch's grammar (docs/csv.md "Writing PyTorch's files"): one row per rank,
 * backbone cells only ("0F3", "0I3" for a split backward's B, "0W3", "0B3" for a whole one),
 * no '#' lines; with comms also its SEND_F/RECV_F/SEND_B/RECV_B cells (an I right before its
 * own W merged into B, as PyTorch's lowering does). Encoder and generator ops and their
 * transfers have no cell: note (note_n bytes) gets one line saying what was left out ("" when
 * nothing was). Rows end in "\n" (PyTorch's csv.reader takes "\n" and "\r\n"). */
BM_API int bm_csv_write_torch(const struct bm_table *t, int comms, FILE *f, char *note, size_t note_n);

/* Load a Chrome trace written by bm_render_trace (or by an executor in that shape,
 * docs/trace.md): the embedded table, the costs it carries (*c; NULL when not wanted) and the
 * op times/memory of its events. *t, *c and *tl are new (caller frees with bm_table_free,
 * bm_costs_free, bm_timeline_free); tl->measured is the trace's "measured" flag. Streams over the text (no JSON tree), so traces of hundreds of MB load in seconds.
 * Errors name name:line:col (bm_trace_load: the path). */
BM_API int bm_trace_parse(const char *text, const char *name, struct bm_table **t, struct bm_costs **c,
                          struct bm_timeline **tl, struct bm_err *err);
BM_API int bm_trace_load(const char *path, struct bm_table **t, struct bm_costs **c, struct bm_timeline **tl,
                         struct bm_err *err);

/* A measured timeline of table t (state and memory cap from c, which may be NULL). times[r]: 3 doubles per op of rank r (start_ms, end_ms,
 * ready_ms); msg_bytes[r]: one per op, a send's or recv's message bytes (msg_bytes NULL: not
 * measured, 0 everywhere); mem[r]: n_mem[r] points of 4 doubles (t_ms, encoder, backbone,
 * generator live bytes). Recvs wait on their matching send; compute ops on the latest input they
 * got. When some time is negative (a clock-offset estimate putting a rank's first event before
 * the origin), every time moves by the same amount so that the earliest is 0. Caller owns *out
 * (bm_timeline_free). */
BM_API int bm_exec_timeline(const struct bm_table *t, const struct bm_costs *c, const double *const *times,
                            const double *const *msg_bytes, const double *const *mem, const int *n_mem,
                            struct bm_timeline **out, struct bm_err *err);
/* Write tl as a Chrome trace to path (through bm_render_trace; c may be NULL). */
BM_API int bm_exec_trace_write(const struct bm_table *t, const struct bm_costs *c, const struct bm_timeline *tl,
                               const char *path, struct bm_err *err);

#ifdef __cplusplus
}
#endif

#endif
