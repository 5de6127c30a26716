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
    return bb == BM_BB_ZB_H1 || bb == BM_BB_ZB_INTERLEAVED || bb == BM_BB_ZB_V || bb == BM_BB_DUALPIPE_V;
}

int bm_backbone_v_shaped(enum bm_backbone bb)
{
    return bb == BM_BB_ZB_V || bb == BM_BB_DUALPIPE_V;
}

int bm_backbone_chunk_rank(enum bm_backbone bb, int P, int c)
{
    if (P < 1) return 0;
    if (bm_backbone_v_shaped(bb)) return c < P ? c : 2 * P - 1 - c;
    return c % P;
}

/* ---------------------------------------------------------------- V-shaped backbones */

/* The order being built for one rank of a V-shaped backbone: rank r holds chunk s0 = r (on the
 * way down) and s1 = 2P-1-r (on the way back). */
struct vb {
    struct bm_bb_step *out;
    int n, cap, M;
    int next[2][3];   /* per local chunk (0: s0, 1: s1) and pass: the next microbatch */
    int s[2];
    int wq[4096][2];  /* dualpipe-v: pending W's (local chunk, mb), oldest first */
    int wq_head, wq_n;
};

static void vb_emit(struct vb *v, int lc, int pass, int mb, int flags)
{
    if (mb >= v->M) return; /* PyTorch's ZB-V plans max(2P-1, M) microbatches and drops the rest */
    if (v->n >= v->cap) {
        v->n++; /* counted, not written: the caller reports the wrong length */
        return;
    }
    v->out[v->n].pass = (uint8_t)pass;
    v->out[v->n].flags = (uint8_t)flags;
    v->out[v->n].chunk = v->s[lc];
    v->out[v->n].mb = mb;
    v->n++;
}

/* ZB-V (Qi et al., ICLR 2024, section 6; PyTorch's ScheduleZBVZeroBubble), rank r of P, with
 * n = max(2P-1, M) microbatches planned (those >= M dropped): 2(P-r)-1 forwards of s0; r times
 * F(s1) F(s0); P-r times F(s1) B(s1) W(s1); then while s1 has fewer forwards than s0 or s0 has
 * forwards left: [F(s0) if left] B(s0) W(s0) F(s1) B(s1) W(s1); then r times B(s0) B(s1); P-r
 * times B(s0) W(s0); the remaining W's of s1, then of s0 (each W in the order of its B). */
static void zbv_order(struct vb *v, int P, int r)
{
    int nm = v->M > 2 * P - 1 ? v->M : 2 * P - 1;
    int f0 = 0, f1 = 0, b0 = 0, b1 = 0;
    for (int k = 0; k < 2 * (P - r) - 1; k++) vb_emit(v, 0, BM_PASS_F, f0++, 0);
    for (int k = 0; k < r; k++) {
        vb_emit(v, 1, BM_PASS_F, f1++, 0);
        vb_emit(v, 0, BM_PASS_F, f0++, 0);
    }
    for (int k = 0; k < P - r; k++) {
        vb_emit(v, 1, BM_PASS_F, f1++, 0);
        vb_emit(v, 1, BM_PASS_B, b1, 0);
        vb_emit(v, 1, BM_PASS_W, b1++, 0);
    }
    while (f1 < f0 || f0 < nm) {
        if (f0 < nm) vb_emit(v, 0, BM_PASS_F, f0++, 0);
        vb_emit(v, 0, BM_PASS_B, b0, 0);
        vb_emit(v, 0, BM_PASS_W, b0++, 0);
        vb_emit(v, 1, BM_PASS_F, f1++, 0);
        vb_emit(v, 1, BM_PASS_B, b1, 0);
        vb_emit(v, 1, BM_PASS_W, b1++, 0);
    }
    int w0 = b0, w1 = b1;
    for (int k = 0; k < r; k++) {
        vb_emit(v, 0, BM_PASS_B, b0++, 0);
        vb_emit(v, 1, BM_PASS_B, b1++, 0);
    }
    for (int k = 0; k < P - r; k++) {
        vb_emit(v, 0, BM_PASS_B, b0++, 0);
        vb_emit(v, 0, BM_PASS_W, w0++, 0);
    }
    while (w1 < b1) vb_emit(v, 1, BM_PASS_W, w1++, 0);
    while (w0 < b0) vb_emit(v, 0, BM_PASS_W, w0++, 0);
}

/* DualPipeV's actions (DeepSeek's DualPipe in its V form, PyTorch's ScheduleDualPipeV): F, a
 * split backward's B (PyTorch's I; its W is queued), a whole backward (B then its W, flagged
 * BM_STEP_WHOLE), an overlapped pair (F then a whole B, the F flagged BM_STEP_OVERLAP), and the
 * oldest queued W. */
static void dp_f(struct vb *v, int lc, int flags) { vb_emit(v, lc, BM_PASS_F, v->next[lc][0]++, flags); }
static void dp_whole(struct vb *v, int lc)
{
    int mb = v->next[lc][1]++;
    vb_emit(v, lc, BM_PASS_B, mb, BM_STEP_WHOLE);
    vb_emit(v, lc, BM_PASS_W, mb, 0);
}
static void dp_b(struct vb *v, int lc, int whole)
{
    if (whole) {
        dp_whole(v, lc);
        return;
    }
    int mb = v->next[lc][1]++;
    vb_emit(v, lc, BM_PASS_B, mb, 0);
    if (v->wq_head + v->wq_n < 4096) {
        v->wq[v->wq_head + v->wq_n][0] = lc;
        v->wq[v->wq_head + v->wq_n][1] = mb;
        v->wq_n++;
    }
}
static void dp_w(struct vb *v)
{
    if (!v->wq_n) return;
    vb_emit(v, v->wq[v->wq_head][0], BM_PASS_W, v->wq[v->wq_head][1], 0);
    v->wq_head++, v->wq_n--;
}
static void dp_overlap(struct vb *v, int f_lc, int b_lc)
{
    dp_f(v, f_lc, BM_STEP_OVERLAP);
    dp_whole(v, b_lc);
}

/* DualPipeV, rank r of P, M >= 2P microbatches, in eight steps: (1) 2(P-r-1) F(s0); (2) r+1
 * times F(s0) F(s1); (3) P-r-1 times B(s1) split, a queued W, F(s1); (4) M-2P+r+1 times
 * (F(s0);B(s1)) overlapped (on the last rank the first pair not overlapped: F(s0), then a whole
 * B(s1)) and (F(s1);B(s0)); (5) P-r-1 times a whole B(s1) and (F(s1);B(s0)); (6) r+1 times
 * B(s1), B(s0), whole until the middle one (i = (r+1)/2), where split backwards start: before
 * B(s1) on odd ranks, before B(s0) on even ones; (7) P-r-1 times a queued W and B(s0) (split
 * from (6) on); (8) r+1 queued W's. */
static void dualpipev_order(struct vb *v, int P, int r)
{
    int M = v->M;
    for (int k = 0; k < 2 * (P - r - 1); k++) dp_f(v, 0, 0);
    for (int k = 0; k < r + 1; k++) {
        dp_f(v, 0, 0);
        dp_f(v, 1, 0);
    }
    for (int k = 0; k < P - r - 1; k++) {
        dp_b(v, 1, 0);
        dp_w(v);
        dp_f(v, 1, 0);
    }
    for (int i = 0; i < M - 2 * P + r + 1; i++) {
        if (i == 0 && r == P - 1) {
            dp_f(v, 0, 0);
            dp_whole(v, 1);
        } else {
            dp_overlap(v, 0, 1);
        }
        dp_overlap(v, 1, 0);
    }
    for (int k = 0; k < P - r - 1; k++) {
        dp_whole(v, 1);
        dp_overlap(v, 1, 0);
    }
    int zb = 0, n6 = r + 1;
    for (int i = 0; i < n6; i++) {
        if (i == n6 / 2 && r % 2 == 1) zb = 1;
        dp_b(v, 1, !zb);
        if (i == n6 / 2 && r % 2 == 0) zb = 1;
        dp_b(v, 0, !zb);
    }
    for (int k = 0; k < P - r - 1; k++) {
        dp_w(v);
        dp_b(v, 0, !zb);
    }
    for (int k = 0; k < r + 1; k++) dp_w(v);
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
    case BM_BB_ZB_V:
    case BM_BB_DUALPIPE_V: /* 2P forwards before the first backward (no extension) */
        return (int)BM_MIN(2L * P, (long)V * M);
    }
    return 0;
}

int bm_backbone_order(enum bm_backbone bb, int P, int V, int M, int rank, int warmup_extra,
                      struct bm_bb_step *out, struct bm_err *err)
{
    if (P < 1 || V < 1 || M < 1 || rank < 0 || rank >= P || (unsigned)bb >= BM_N_BACKBONES)
        return bm_err_set(err, "backbone schedule: invalid P=%d V=%d M=%d rank=%d", P, V, M, rank);
    if (bm_backbone_v_shaped(bb)) {
        if (V != 2) return bm_err_set(err, "backbone schedule: %s takes vpp 2 (got %d)", bm_backbone_name(bb), V);
        if (bb == BM_BB_DUALPIPE_V && M < 2 * P)
            return bm_err_set(err, "backbone schedule: dualpipe-v needs at least 2*pp = %d microbatches (got %d)", 2 * P, M);
        if (M > 2048) return bm_err_set(err, "backbone schedule: %s takes at most 2048 microbatches (got %d)", bm_backbone_name(bb), M);
        struct vb *v = bm_calloc(1, sizeof *v);
        if (!v) return bm_err_set(err, "out of memory");
        v->out = out, v->M = M, v->s[0] = rank, v->s[1] = 2 * P - 1 - rank;
        v->cap = bm_backbone_n_steps(bb, V, M);
        if (bb == BM_BB_ZB_V) zbv_order(v, P, rank);
        else dualpipev_order(v, P, rank);
        int n = v->n;
        bm_free(v);
        if (n != bm_backbone_n_steps(bb, V, M))
            return bm_err_set(err, "backbone schedule: %s at P=%d M=%d gives rank %d %d steps, not %d", bm_backbone_name(bb),
                              P, M, rank, n, bm_backbone_n_steps(bb, V, M));
        return BM_OK;
    }
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
        out[n].flags = 0;                                                    \
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
