/* trace.h — the executor's profiler output: a measured struct bm_timeline built from the op
 * times and live-byte traces every rank recorded (gathered to rank 0), written as a Chrome trace
 * through the renderer's writer (src/report/trace.c), so `bigmac render` reads it back. */
#ifndef BM_EXEC_TRACE_H
#define BM_EXEC_TRACE_H

#include "bigmac.h"

/* times[r]: 3 doubles per op of rank r (start_ms, end_ms, ready_ms); msg_bytes[r]: one per op,
 * a send's or recv's message bytes (msg_bytes NULL: not measured, 0 everywhere); mem[r]:
 * n_mem[r] points of 4 doubles (t_ms, encoder, backbone, generator live bytes). Recvs wait on
 * their matching send; compute ops on the latest input they got. Caller owns *out
 * (bm_timeline_free). */
int bm_exec_timeline(const struct bm_table *t, const double *const *times, const double *const *msg_bytes,
                     const double *const *mem, const int *n_mem, struct bm_timeline **out, struct bm_err *err);
/* Write tl as a Chrome trace to path. */
int bm_exec_trace_write(const struct bm_table *t, const struct bm_timeline *tl, const char *path,
                        struct bm_err *err);
/* The same for dp data-parallel replicas, tl[d] replica d's timeline: every global rank one
 * process, named "pp p / dp d" (bm_render_trace_dp). */
int bm_exec_trace_write_dp(const struct bm_table *t, const struct bm_timeline *const *tl, int dp, const char *path,
                           struct bm_err *err);

#endif
