/* refine.c — gap refinement of a policy's order (see bm_refine_gaps in plan.h): single encoder
 * ops moved into nominal idle gaps they fit entirely, a round kept only when the nominal
 * makespan does not grow. Optimus's rule (docs/design.md §6); bigmac applies it anywhere.
 * One round: per rank, backwards earlier and forwards later (refine_rank), then the new order is
 * timed and kept or dropped. */
#include <string.h>

#include "plan/plan.h"
#include "util/util.h"

/* What one round works with: the current order's nominal times and, per task, the index in its
 * rank's sequence it moves before (-1: it stays). */
struct round {
    const struct bm_graph *g;
    const double *start, *finish;
    int *ins_before;
    double *cap;  /* [len+1] of the rank at hand: where free time starts in gap i (before seq[i]) */
};

/* The first index in [lo, hi] whose op starts at or after t (hi + 1 if none): a rank's start times
 * never decrease along its sequence, so the gaps before it cannot hold what needs t. */
static int first_starting_at(const struct round *R, const int *seq, int lo, int hi, double t)
{
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        if (R->start[seq[mid]] >= t) hi = mid - 1;
        else lo = mid + 1;
    }
    return lo;
}

/* The last index gi in [lo, hi] whose previous op finishes by t (lo - 1 if none). */
static int last_after_finish_by(const struct round *R, const int *seq, int lo, int hi, double t)
{
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        if (R->finish[seq[mid - 1]] <= t) lo = mid + 1;
        else hi = mid - 1;
    }
    return hi;
}

/* Encoder backwards after the first backbone op (optimus: of the trailing block) into the earliest
 * gap between backbone ops that opens after their inputs arrive and holds them entirely. */
static int move_backwards_earlier(struct round *R, int r, const int *seq, int len, int first_bb, int last_bb,
                                  int anywhere)
{
    const struct bm_graph *g = R->g;
    int moved = 0;
    for (int i = anywhere ? first_bb + 1 : last_bb + 1; i < len; i++) {
        int x = seq[i];
        const struct bm_task *tx = &g->task[x];
        if (g->t->modules[tx->module].role != BM_ROLE_ENCODER || tx->pass != BM_PASS_B) continue;
        double rd = 0;
        int pred_pos_ok = 1;
        for (int e = 0; e < tx->npred; e++) {
            struct bm_edge pe = g->pred[tx->pred0 + e];
            double a = R->finish[pe.task] + pe.comm_ms;
            if (a > rd) rd = a;
            if (g->task[pe.task].rank == r && g->task[pe.task].chunk < 0 && g->task[pe.task].pass == BM_PASS_B)
                pred_pos_ok = 0; /* chained encoder backwards stay put */
        }
        if (!pred_pos_ok) continue;
        int gi_end = last_bb < i - 1 ? last_bb : i - 1;
        /* a gap before an op that starts earlier than rd + dur cannot hold it: start past those */
        for (int gi = first_starting_at(R, seq, first_bb + 1, gi_end, rd + tx->dur - BM_T_EPS); gi <= gi_end; gi++) {
            double st = R->cap[gi] > rd ? R->cap[gi] : rd;
            if (st + tx->dur <= R->start[seq[gi]] + BM_T_EPS && g->task[seq[gi - 1]].chunk >= 0) {
                R->ins_before[x] = gi;
                R->cap[gi] = st + tx->dur;
                moved = 1;
                break;
            }
        }
    }
    return moved;
}

/* Encoder forwards before the last backbone op (optimus: of the leading block) into the latest
 * gap between backbone ops that still feeds their consumer in time. */
static int move_forwards_later(struct round *R, const int *seq, int first_bb, int last_bb, int anywhere)
{
    const struct bm_graph *g = R->g;
    int moved = 0;
    for (int i = anywhere ? last_bb - 1 : first_bb - 1; i >= 0; i--) {
        int x = seq[i];
        const struct bm_task *tx = &g->task[x];
        if (g->t->modules[tx->module].role != BM_ROLE_ENCODER || tx->pass != BM_PASS_F) continue;
        double need = BM_T_INF;
        int chain = 0;
        for (int e = 0; e < tx->nsucc; e++) {
            struct bm_edge se = g->succ[tx->succ0 + e];
            if (g->task[se.task].chunk < 0 && g->task[se.task].pass == BM_PASS_F) chain = 1;
            if (g->task[se.task].pass == BM_PASS_F && R->start[se.task] - se.comm_ms < need)
                need = R->start[se.task] - se.comm_ms;
        }
        if (chain || R->ins_before[x] >= 0) continue;
        int gi_begin = first_bb > i + 1 ? first_bb : i + 1;
        /* a gap after an op that finishes later than need cannot feed the consumer: start below */
        for (int gi = last_after_finish_by(R, seq, gi_begin + 1, last_bb, need); gi > gi_begin; gi--) {
            double end = R->start[seq[gi]] < need ? R->start[seq[gi]] : need;
            if (R->cap[gi] + tx->dur <= end + BM_T_EPS && g->task[seq[gi - 1]].chunk >= 0 &&
                R->finish[seq[gi - 1]] <= need) {
                R->ins_before[x] = gi;
                R->cap[gi] += tx->dur;
                moved = 1;
                break;
            }
        }
    }
    return moved;
}

/* The rank's new sequence into out: ops staying put, plus moved ops right before their target
 * index (bucketed, keeping their relative order). Returns its length, -1 when out of memory. */
static int rebuild_sequence(const int *ins_before, const int *seq, int len, int *out)
{
    int *head = bm_malloc((size_t)(len + 1) * sizeof(int));
    int *next = bm_malloc((size_t)(len ? len : 1) * sizeof(int));
    int *tail = bm_malloc((size_t)(len + 1) * sizeof(int));
    int k = -1;
    if (head && next && tail) {
        for (int i = 0; i <= len; i++) head[i] = tail[i] = -1;
        for (int j = 0; j < len; j++) {
            int gi = ins_before[seq[j]];
            next[j] = -1;
            if (gi < 0 || gi == j) continue;
            if (tail[gi] < 0) head[gi] = j;
            else next[tail[gi]] = j;
            tail[gi] = j;
        }
        k = 0;
        for (int i = 0; i <= len; i++) {
            for (int j = head[i]; j >= 0; j = next[j]) out[k++] = seq[j];
            if (i < len && (ins_before[seq[i]] < 0 || ins_before[seq[i]] == i)) out[k++] = seq[i];
        }
    }
    bm_free(head);
    bm_free(next);
    bm_free(tail);
    return k;
}

/* One rank's moves of a round, its new sequence into n->seq[r]. Returns 1 when an op moved, 0
 * when none did, -1 when out of memory. */
static int refine_rank(struct round *R, const struct bm_order *o, struct bm_order *n, int r, int anywhere)
{
    const struct bm_graph *g = R->g;
    int len = o->n[r];
    const int *seq = o->seq[r];
    bm_free(R->cap);
    R->cap = bm_malloc((size_t)(len + 1) * sizeof(double));
    n->seq[r] = bm_malloc((size_t)(len ? len : 1) * sizeof(int));
    if (!R->cap || !n->seq[r]) return -1;
    for (int i = 0; i < len; i++) R->ins_before[seq[i]] = -1;
    /* gap i lies between seq[i-1] and seq[i]; cap[i] = where free time starts */
    for (int i = 1; i < len; i++) R->cap[i] = R->finish[seq[i - 1]];
    R->cap[0] = 0;
    int first_bb = -1, last_bb = -1;
    for (int i = 0; i < len; i++)
        if (g->task[seq[i]].chunk >= 0) {
            if (first_bb < 0) first_bb = i;
            last_bb = i;
        }
    if (first_bb < 0) {
        memcpy(n->seq[r], seq, (size_t)len * sizeof(int));
        n->n[r] = len;
        return 0;
    }
    int moved = move_backwards_earlier(R, r, seq, len, first_bb, last_bb, anywhere);
    moved |= move_forwards_later(R, seq, first_bb, last_bb, anywhere);
    if ((n->n[r] = rebuild_sequence(R->ins_before, seq, len, n->seq[r])) < 0) return -1;
    return moved;
}

int bm_refine_gaps(const struct bm_graph *g, struct bm_order *o, int anywhere, struct bm_err *err)
{
    int N = g->n_tasks, P = o->pp;
    double *start = bm_malloc((size_t)N * sizeof(double));
    double *finish = bm_malloc((size_t)N * sizeof(double));
    struct round R = {g, start, finish, bm_malloc((size_t)N * sizeof(int)), NULL};
    const char *pol = bm_policy_name(g->t->policy);
    int rc = BM_OK;
    double best;
    if (!start || !finish || !R.ins_before) {
        rc = bm_err_set(err, "out of memory refining the %s plan", pol);
        goto done;
    }
    if (bm_order_times(g, o, start, finish, &best, err)) {
        rc = BM_ERR; /* a stall of the order just scheduled cannot happen: internal error */
        goto done;
    }
    for (int round = 0; round < 8; round++) {
        int moved = 0;
        struct bm_order *n = bm_calloc(1, sizeof *n);
        if (n) {
            n->pp = P;
            n->seq = bm_calloc((size_t)P, sizeof *n->seq);
            n->n = bm_calloc((size_t)P, sizeof *n->n);
        }
        for (int r = 0; n && n->seq && n->n && r < P && moved >= 0; r++) {
            int m = refine_rank(&R, o, n, r, anywhere);
            moved = m < 0 ? -1 : moved | m;
        }
        if (!n || !n->seq || !n->n || moved < 0) {
            bm_order_free(n);
            rc = bm_err_set(err, "out of memory refining the %s plan", pol);
            goto done;
        }
        if (!moved) {
            bm_order_free(n);
            break;
        }
        /* keep the round only when the nominal makespan does not grow */
        double ms;
        struct bm_err e2;
        int trc = bm_order_times(g, n, start, finish, &ms, &e2);
        if (trc == BM_ERR) { /* out of memory: not "no better", which would mask it */
            bm_order_free(n);
            rc = bm_err_set(err, "%s", e2.msg);
            goto done;
        }
        if (trc == BM_PLAN_STALL || ms > best + BM_T_EPS) {
            bm_order_free(n);
            break;
        }
        best = ms;
        for (int r = 0; r < P; r++) {
            bm_free(o->seq[r]);
            o->seq[r] = n->seq[r];
            o->n[r] = n->n[r];
            n->seq[r] = NULL;
        }
        bm_order_free(n);
    }
done:
    bm_free(start);
    bm_free(finish);
    bm_free(R.ins_before);
    bm_free(R.cap);
    return rc;
}
