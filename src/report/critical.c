/* critical.c — the critical path of a timeline (see critical.h). */
#include <string.h>

#include "report/critical.h"
#include "sim/expect.h"
#include "util/util.h"

void bm_critical_free(const struct bm_table *t, struct bm_critical *c)
{
    if (c->on)
        for (int r = 0; r < t->pp; r++) bm_free(c->on[r]);
    bm_free(c->on);
    memset(c, 0, sizeof *c);
}

/* The remote send whose data op (r, i) waited for, or -1: a recv's matching send, or for a
 * compute op the send seen through its recv (wait_rank != r). */
static int remote_wait(const struct bm_table *t, const struct bm_timeline *tl, int r, int i)
{
    const struct bm_op_time *ot = &tl->ranks[r].ops[i];
    int wr = ot->wait_rank, wo = ot->wait_op;
    if (wr < 0 || wr == r || wr >= t->pp || wo < 0 || wo >= t->ranks[wr].n_ops) return -1;
    if (t->ranks[wr].ops[wo].kind != BM_OP_SEND) return -1;
    return wr;
}

int bm_critical_path(const struct bm_table *t, const struct bm_timeline *tl, struct bm_critical *c,
                     struct bm_err *err)
{
    memset(c, 0, sizeof *c);
    if (!bm_timeline_per_op(t, tl))
        return bm_err_set(err, "critical path: the timeline has no op times (bm_simulate_summary's): simulate with "
                               "bm_simulate");
    c->on = bm_calloc((size_t)(t->pp > 0 ? t->pp : 1), sizeof *c->on);
    if (!c->on) return bm_err_set(err, "critical path: out of memory");
    for (int r = 0; r < t->pp; r++)
        if (!(c->on[r] = bm_calloc((size_t)t->ranks[r].n_ops + 1, 1))) {
            bm_critical_free(t, c);
            return bm_err_set(err, "critical path: out of memory");
        }
    int r = -1, i = -1;
    double best = -1;
    for (int q = 0; q < t->pp; q++)
        for (int k = 0; k < t->ranks[q].n_ops; k++) {
            double e = tl->ranks[q].ops[k].end_ms;
            int better = e > best || (e == best && r >= 0 && t->ranks[q].ops[k].kind == BM_OP_COMPUTE &&
                                      t->ranks[r].ops[i].kind != BM_OP_COMPUTE);
            if (better) best = e, r = q, i = k;
        }
    if (r < 0) return BM_OK;
    c->makespan_ms = best;
    /* measured traces round times to nanoseconds (and ready_ms to 9 digits): an input that
     * came "later" than the rank became free by less than this was there when it did */
    double eps = 1e-7 * best + 1e-9;
    /* a measured recv whose data was already there still "waits" for the one test call that
     * finds it (a fraction of a microsecond): only a recv blocked longer waited for a transfer */
    double eps_block = tl->measured ? 1e-3 : eps;
    long guard = bm_table_n_ops(t) + 1; /* every step moves to an earlier op: at most all of them */
    while (r >= 0 && i >= 0 && guard-- > 0) {
        const struct bm_op *op = &t->ranks[r].ops[i];
        const struct bm_op_time *ot = &tl->ranks[r].ops[i];
        if (!c->on[r][i]) c->on[r][i] = 1, c->n_ops++;
        double free_at = i > 0 ? tl->ranks[r].ops[i - 1].end_ms : 0;
        double end = op->kind == BM_OP_SEND ? ot->start_ms : ot->end_ms;
        if (op->kind == BM_OP_COMPUTE) {
            double d = ot->end_ms - ot->start_ms;
            int mod = op->module;
            if (mod == t->backbone_module) c->backbone_ms += d;
            else c->nested_ms += d;
        }
        int wr = op->kind == BM_OP_SEND ? -1 : remote_wait(t, tl, r, i);
        /* a recv that did not block, or a compute op whose input came before the rank was
         * free, was set by its rank */
        if (wr >= 0 && ot->ready_ms > free_at + eps && (op->kind == BM_OP_COMPUTE || ot->ready_ms > ot->start_ms + eps_block)) {
            int wo = ot->wait_op;
            double issue = tl->ranks[wr].ops[wo].start_ms;
            double busy = op->kind == BM_OP_COMPUTE ? ot->end_ms - ot->start_ms : 0;
            c->transfer_ms += ot->ready_ms - issue;
            c->waiting_ms += end - busy - ot->ready_ms;
            c->n_transfers++;
            r = wr, i = wo;
            continue;
        }
        double busy = op->kind == BM_OP_COMPUTE ? ot->end_ms - ot->start_ms : 0;
        c->waiting_ms += end - busy - free_at;
        i--;
    }
    return BM_OK;
}
