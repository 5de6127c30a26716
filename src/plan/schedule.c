/* schedule.c — backbone schedules (DESIGN §5): per-rank F/B order of backbone chunk ops.
 * gpipe, Megatron's non-interleaved 1F1B, and Megatron's interleaved 1F1B. */
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

int bm_backbone_warmup(enum bm_backbone bb, int P, int V, int M, int rank, int warmup_extra)
{
    long w;
    switch (bb) {
    case BM_BB_GPIPE: return V * M;
    case BM_BB_1F1B: w = (long)(P - rank - 1) + warmup_extra; return (int)BM_MIN(w, (long)M);
    case BM_BB_INTERLEAVED:
        w = 2L * (P - rank - 1) + (long)(V - 1) * P + warmup_extra;
        return (int)BM_MIN(w, (long)V * M);
    }
    return 0;
}

int bm_backbone_order(enum bm_backbone bb, int P, int V, int M, int rank, int warmup_extra,
                      struct bm_bb_step *out, struct bm_err *err)
{
    if (P < 1 || V < 1 || M < 1 || rank < 0 || rank >= P)
        return bm_err_set(err, "backbone schedule: invalid P=%d V=%d M=%d rank=%d", P, V, M, rank);
    if (bb != BM_BB_INTERLEAVED && V != 1)
        return bm_err_set(err, "backbone schedule: %s takes vpp 1 (got %d); use --backbone interleaved",
                          bm_backbone_name(bb), V);
    if (bb == BM_BB_INTERLEAVED && M % P != 0)
        return bm_err_set(err,
                          "backbone schedule: interleaved needs microbatches divisible by pp "
                          "(M=%d, P=%d); use M=%d or M=%d",
                          M, P, M / P * P > 0 ? M / P * P : P, (M / P + 1) * P);
    int total = V * M;  /* forwards (and backwards) on this rank */
    int w = bm_backbone_warmup(bb, P, V, M, rank, warmup_extra);
    int n = 0, f = 0, b = 0;
#define EMIT(pass_, k_)                                                      \
    do {                                                                     \
        int lc_, mb_;                                                        \
        if (bb == BM_BB_INTERLEAVED) interleaved_step(P, V, (k_), (pass_) == BM_PASS_F, &lc_, &mb_); \
        else { lc_ = 0; mb_ = (k_); }                                        \
        out[n].pass = (pass_);                                               \
        out[n].chunk = lc_ * P + rank;                                       \
        out[n].mb = mb_;                                                     \
        n++;                                                                 \
    } while (0)
    for (; f < w; f++) EMIT(BM_PASS_F, f);
    while (f < total) {
        EMIT(BM_PASS_F, f);
        f++;
        EMIT(BM_PASS_B, b);
        b++;
    }
    for (; b < total; b++) EMIT(BM_PASS_B, b);
#undef EMIT
    return BM_OK;
}
