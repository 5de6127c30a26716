/* critical.h — the critical path of a timeline: the chain of ops (compute and transfers) that
 * sets the makespan, walked back from the op that ends last (docs/render.md).
 *
 * The walk, from the op with the latest end (a compute op when ends tie): an op started either
 * when its rank became free (the previous op's end) or when its input arrived from another rank
 * (wait_rank/wait_op: a send, seen through a recv; ready_ms later than the rank became free).
 * The chain follows the later of the two: to the rank's previous op, or across the transfer to
 * the send. Each step accounts the interval from its predecessor's end (a send's issue) to the
 * op's end as
 *   compute   the op's own duration (backbone or nested: encoder/generator);
 *   transfer  send issue .. arrival, when the chain crosses to another rank;
 *   waiting   the rest: a rank idle with its input there (dispatch in measured runs), blocked
 *             recv time not explained by a transfer, lead time before a rank's first op.
 * so backbone + nested + transfer + waiting = makespan exactly (up to float addition).
 * Measured traces: a recv counts as having waited for its transfer only when it blocked for
 * more than 1 us (one that found its data there still takes the test call's fraction of a us),
 * and "later" means later by more than 1e-7 of the makespan (times are rounded to ns). */
#ifndef BM_REPORT_CRITICAL_H
#define BM_REPORT_CRITICAL_H

#include "bigmac.h"

struct bm_critical {
    uint8_t **on;        /* [pp][n_ops]: 1 when the op is on the path (recvs and sends crossed included) */
    int n_ops;           /* ops on the path */
    int n_transfers;     /* rank crossings */
    double backbone_ms, nested_ms, transfer_ms, waiting_ms;
    double makespan_ms;  /* the end the walk started from */
};

/* Walk tl (a timeline of t, simulated or measured). BM_ERR on allocation failure or when tl has
 * no op times (bm_simulate_summary's). The
 * caller frees c with bm_critical_free. */
int bm_critical_path(const struct bm_table *t, const struct bm_timeline *tl, struct bm_critical *c,
                     struct bm_err *err);
void bm_critical_free(const struct bm_table *t, struct bm_critical *c);

#endif
