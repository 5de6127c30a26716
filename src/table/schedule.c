/* schedule.c — backbone schedules (docs/design.md §5): per-rank F/B(/W) order of backbone chunk ops.
 * gpipe, Megatron's non-interleaved 1F1B, Megatron's interleaved 1F1B, and the two zero-bubble
 * schedules that split each backward into B (input gradient) and W (weight gradient):
 * zb-h1 (Qi et al., ICLR 2024, §2.1) and zb-interleaved (PyTorch's
 * ScheduleInterleavedZeroBubble). docs/planner.md states the rules. */
#include "util/util.h"

/* Interleaved: virtual op k (0..V*M-1) of rank r -> (local chunk, mb). Microbatches are taken
 * in groups of P; within a group, chunk 0 for all of them, then chunk 1, ... Backwards walk
 * the chunks in reverse. */
static void interleaved_step(int P, int V, int k, int forward, int *local_chunk, int *mb)
{
    int group = k / (P * V);
    int in_group = k % (P * V);
    int c = in_group / P;
    *local_chunk = forward ? c : V - 1 - c;
    *mb = group * P + in_group % P;
}

int bm_backbone_splits(enum bm_backbone bb)
{
    return bb == BM_BB_ZB_H1 || bb == BM_BB_ZB_INTERLEAVED;
}

int bm_backbone_n_steps(enum bm_backbone bb, int V, int M)
{
    return (bm_backbone_splits(bb) ? 3 : 2) * V * M;
}

int bm_backbone_warmup(enum bm_backbone bb, int P, int V, int M, int rank, int warmup_extra)
{
    long w;
    switch (bb) {
    case BM_BB_GPIPE: return V * M;
    case BM_BB_1F1B:
    case BM_BB_ZB_H1: w = (long)(P - rank - 1) + warmup_extra; return (int)BM_MIN(w, (long)M);
    case BM_BB_INTERLEAVED:
        w = 2L * (P - rank - 1) + (long)(V - 1) * P + warmup_extra;
        return (int)BM_MIN(w, (long)V * M);
    case BM_BB_ZB_INTERLEAVED: /* one hop per rank instead of two: B no longer waits for W */
        w = (long)(P - rank - 1) + (long)(V - 1) * P + warmup_extra;
        return (int)BM_MIN(w, (long)V * M);
    }
    return 0;
}

int bm_backbone_order(enum bm_backbone bb, int P, int V, int M, int rank, int warmup_extra,
                      struct bm_bb_step *out, struct bm_err *err)
{
    if (P < 1 || V < 1 || M < 1 || rank < 0 || rank >= P || (unsigned)bb > BM_BB_ZB_INTERLEAVED)
        return bm_err_set(err, "backbone schedule: invalid P=%d V=%d M=%d rank=%d", P, V, M, rank);
    int looped = bb == BM_BB_INTERLEAVED || bb == BM_BB_ZB_INTERLEAVED;
    if (!looped && V != 1)
        return bm_err_set(err, "backbone schedule: %s takes vpp 1 (got %d); use --backbone %s",
                          bm_backbone_name(bb), V, bb == BM_BB_ZB_H1 ? "zb-interleaved" : "interleaved");
    if (bb == BM_BB_ZB_INTERLEAVED && V < 2)
        return bm_err_set(err, "backbone schedule: zb-interleaved takes vpp >= 2 (got %d); use --backbone zb-h1", V);
    if (looped && M % P != 0)
        return bm_err_set(err,
                          "backbone schedule: %s needs microbatches divisible by pp "
                          "(M=%d, P=%d); use M=%d or M=%d",
                          bm_backbone_name(bb), M, P, M / P * P > 0 ? M / P * P : P, (M / P + 1) * P);
    int total = V * M;  /* forwards (and backwards) on this rank */
    int w = bm_backbone_warmup(bb, P, V, M, rank, warmup_extra);
    int split = bm_backbone_splits(bb);
    int n = 0, f = 0, b = 0, wg = 0;
#define EMIT(pass_, k_)                                                      \
    do {                                                                     \
        int lc_, mb_;                                                        \
        if (looped) interleaved_step(P, V, (k_), (pass_) == BM_PASS_F, &lc_, &mb_); \
        else { lc_ = 0; mb_ = (k_); }                                        \
        out[n].pass = (pass_);                                               \
        out[n].chunk = lc_ * P + rank;                                       \
        out[n].mb = mb_;                                                     \
        n++;                                                                 \
    } while (0)
    /* zero-bubble: the W of backward j runs right after backward j + rank (the rank's last
     * `rank` W's after its final B), so a rank holds at most P microbatches between F and W */
#define EMIT_B()                                                             \
    do {                                                                     \
        EMIT(BM_PASS_B, b);                                                  \
        b++;                                                                 \
        if (split && b - 1 >= rank) { EMIT(BM_PASS_W, wg); wg++; }           \
    } while (0)
    for (; f < w; f++) EMIT(BM_PASS_F, f);
    while (f < total) {
        EMIT(BM_PASS_F, f);
        f++;
        EMIT_B();
    }
    while (b < total) EMIT_B();
    for (; split && wg < total; wg++) EMIT(BM_PASS_W, wg);
#undef EMIT_B
#undef EMIT
    return BM_OK;
}
