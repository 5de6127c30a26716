/* trace.h — the executor's profiler output: a measured struct bm_timeline built from the op
 * times and live-byte traces every rank recorded (gathered to rank 0), written as a Chrome trace
 * through the renderer's writer (src/report/trace.c), so `bigmac render` reads it back. */
#ifndef BM_EXEC_TRACE_H
#define BM_EXEC_TRACE_H

#include "bigmac.h"
#include "bigmac_report.h"

/* bm_exec_timeline and bm_exec_trace_write are public: include/bigmac_report.h. */
/* bm_exec_trace_write for dp data-parallel replicas, tl[d] replica d's timeline: every global
 * rank one process, named "pp p / dp d" (bm_render_trace_dp). */
int bm_exec_trace_write_dp(const struct bm_table *t, const struct bm_costs *c, const struct bm_timeline *const *tl,
                           int dp, const char *path, struct bm_err *err);

#endif
