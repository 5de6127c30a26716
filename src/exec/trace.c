/* trace.c — measured timeline and Chrome trace of an executor run (see trace.h). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "exec/trace.h"
#include "report/report.h"
#include "table/table.h"
#include "util/util.h"

int bm_exec_timeline(const struct bm_table *t, const struct bm_costs *c, const double *const *times,
                     const double *const *msg_bytes, const double *const *mem, const int *n_mem,
                     struct bm_timeline **out, struct bm_err *err)
{
    *out = NULL;
    struct bm_timeline *tl = bm_timeline_new(t, c); /* c unread here: the memory model's state */
    struct bm_match mt = {0};
    if (!tl) return bm_err_set(err, "out of memory");
    if (bm_match_build(t, &mt, err)) goto fail;
    tl->measured = 1;
    /* Every rank's times are from rank 0's clock at the step's start, through an estimated clock
     * offset; under load that estimate can put a rank's first event a fraction of a millisecond
     * before 0. A trace holds no negative time (the loader refuses one), so then every time of
     * the step moves by the same amount: the step starts at its earliest event, and no interval
     * or order changes. */
    double lead = 0;
    for (int r = 0; r < t->pp; r++) {
        for (int k = 0; k < t->ranks[r].n_ops * 3; k++)
            if (times[r][k] < lead) lead = times[r][k];
        for (int i = 0; i < n_mem[r]; i++)
            if (mem[r][i * 4] < lead) lead = mem[r][i * 4];
    }
    for (int r = 0; r < t->pp; r++) {
        const struct bm_rank_ops *ro = &t->ranks[r];
        struct bm_rank_timeline *rt = &tl->ranks[r];
        for (int k = 0; k < ro->n_ops; k++) {
            const struct bm_op *op = &ro->ops[k];
            struct bm_op_time *ot = &rt->ops[k];
            ot->start_ms = times[r][k * 3] - lead, ot->end_ms = times[r][k * 3 + 1] - lead;
            ot->ready_ms = times[r][k * 3 + 2] - lead;
            ot->wait_rank = ot->wait_op = -1;
            if (msg_bytes && op->kind != BM_OP_COMPUTE) ot->msg_bytes = msg_bytes[r][k];
            if (op->kind == BM_OP_RECV && bm_match_peer(&mt, r, k) >= 0) {
                ot->wait_rank = op->peer, ot->wait_op = bm_match_peer(&mt, r, k);
            } else if (op->kind == BM_OP_COMPUTE) {
                /* the input it waited for: the latest recv of its microbatch since the previous
                 * compute op of it, or that op */
                for (int j = k - 1; j >= 0; j--) {
                    const struct bm_op *p = &ro->ops[j];
                    if (p->mb != op->mb) continue;
                    if (p->kind == BM_OP_RECV && bm_match_peer(&mt, r, j) >= 0 && rt->ops[j].end_ms >= ot->ready_ms) {
                        ot->wait_rank = p->peer, ot->wait_op = bm_match_peer(&mt, r, j);
                        break;
                    }
                    if (p->kind == BM_OP_COMPUTE) {
                        ot->wait_rank = r, ot->wait_op = j;
                        break;
                    }
                }
            }
        }
        for (int i = 0; i < n_mem[r]; i++) {
            const double *q = &mem[r][i * 4];
            double mib[BM_N_ROLES];
            for (int role = 0; role < BM_N_ROLES; role++) mib[role] = q[1 + role] / 1048576.0;
            if (bm_timeline_mem_push(tl, r, q[0] - lead, mib)) {
                bm_err_set(err, "out of memory");
                goto fail;
            }
        }
    }
    bm_match_free(&mt);
    bm_timeline_summarize(tl, t);
    *out = tl;
    return BM_OK;
fail:
    bm_match_free(&mt);
    bm_timeline_free(tl);
    return BM_ERR;
}

int bm_exec_trace_write(const struct bm_table *t, const struct bm_costs *c, const struct bm_timeline *tl,
                        const char *path, struct bm_err *err)
{
    return bm_exec_trace_write_dp(t, c, &tl, 1, path, err);
}

int bm_exec_trace_write_dp(const struct bm_table *t, const struct bm_costs *c, const struct bm_timeline *const *tl,
                           int dp, const char *path, struct bm_err *err)
{
    for (int d = 0; d < (dp > 1 ? dp : 1); d++) /* NaN/inf times: refused, nothing written */
        if (bm_trace_check_times(t, tl[d], err)) return BM_ERR;
    FILE *f = fopen(path, "w");
    if (!f) return bm_err_set(err, "%s: cannot open for writing: %s", path, strerror(errno));
    int rc = bm_render_trace_dp(t, c, tl, dp, f);
    errno = 0;
    if (fclose(f) || rc)
        return bm_err_set(err, "%s: write failed%s%s", path, errno ? ": " : "", errno ? strerror(errno) : "");
    return BM_OK;
}
