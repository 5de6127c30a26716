/* search.c — placement search (bm_search_order in plan.h): local moves of nested ops with the
 * nominal timeline as the objective.
 *
 * A move takes one encoder/generator op of a rank and re-inserts it elsewhere in the same rank's
 * sequence: before an op that starts after idle time on the rank (a gap), or at the end. Only
 * nested ops move, so every rank's backbone order is kept (verifier invariant 3). A move is
 * tried only inside the range its same-rank producers and consumers allow (a B after its F, an
 * encoder forward before the chunk-0 forward that reads it); cross-rank dependencies are checked
 * by timing the order: a move that deadlocks it is rejected. With a residency limit (bigmac), a
 * move that lets a rank hold more live nested microbatches than the limit is rejected (the
 * verifier's invariant 5, the window's bound).
 *
 * A second kind of move swaps two nested ops of a rank (both within their ranges), which a single
 * move cannot do when each alone breaks the residency limit or gains nothing.
 *
 * Per round, every nested op in rank order tries its candidates and the best one is kept when it
 * lowers (makespan, sum of every op's finish time) lexicographically: the makespan first, the
 * second key only to walk plateaus where ops must move earlier off the critical path before the
 * makespan can gain (tried: the sum of the ranks' end times instead ends 1.7 ms higher on the
 * understanding example, 1F1B M = 64, and above optimus). Strict decrease of that pair means no move is ever undone and a descent
 * ends. Two descents run from the same start (every op; only ops on or right before the critical
 * path) and the better result is kept. Each is bounded by a number of order timings
 * (deterministic: no clock), so the same inputs always give the same table. */
#include <string.h>

#include "plan/plan.h"
#include "util/util.h"

#define GAPS_EACH_WAY 8
#define GAPS_WIDE 16 /* the third descent's reach (issue 28) */

struct srch {
    const struct bm_graph *g;
    struct bm_order *o;     /* the order being improved, edited in place */
    int P, N;
    double *start, *finish; /* times of the accepted order */
    double *tstart, *tfinish; /* trial times */
    double ms, sec;         /* accepted objective */
    /* timing scratch */
    int *pc;                /* [rank] next index */
    double *free_at;        /* [rank] */
    char *done;             /* [task] */
    int *wait_head;         /* [task] first rank parked on it, -1 */
    int *wait_next;         /* [rank] next rank parked on the same task */
    int *stack;             /* [rank] runnable ranks */
    int *lpos;              /* [task] index in its rank's sequence */
    /* residency */
    int lim_enc, lim_gen;   /* live nested microbatches per module per rank; 0 = no limit */
    int *live;              /* [n_modules] scratch */
    long evals, budget;
    int gaps;               /* gaps tried each way: GAPS_EACH_WAY, or GAPS_WIDE */
    char *look;             /* [rank] worth another round */
    double *late;           /* [task] latest start keeping the makespan */
    int *byst;              /* [task] scratch: tasks by start, latest first */
};

/* Time the current order into (st, fi). Returns the makespan, or BM_T_INF when it deadlocks;
 * *sec gets the sum of every task's finish time. Each task is visited once (ranks park on the first
 * predecessor not yet done and are woken when it finishes), so O(tasks + edges). */
static double time_order(struct srch *S, double *st, double *fi, double *sec)
{
    const struct bm_graph *g = S->g;
    const struct bm_order *o = S->o;
    int P = S->P, sp = 0;
    memset(S->done, 0, (size_t)S->N);
    for (int r = 0; r < P; r++) {
        S->pc[r] = 0;
        S->free_at[r] = 0;
        S->stack[sp++] = P - 1 - r;
    }
    long left = 0;
    for (int r = 0; r < P; r++) left += o->n[r];
    double end = 0;
    while (sp > 0) {
        int r = S->stack[--sp];
        double tf = S->free_at[r];
        while (S->pc[r] < o->n[r]) {
            int id = o->seq[r][S->pc[r]];
            const struct bm_task *x = &g->task[id];
            double ready = tf;
            int blocked = -1;
            for (int e = 0; e < x->npred; e++) {
                struct bm_edge pe = g->pred[x->pred0 + e];
                if (!S->done[pe.task]) {
                    blocked = pe.task;
                    break;
                }
                double a = fi[pe.task] + pe.comm_ms;
                if (a > ready) ready = a;
            }
            if (blocked >= 0) {
                S->wait_next[r] = S->wait_head[blocked];
                S->wait_head[blocked] = r;
                break;
            }
            st[id] = ready;
            fi[id] = tf = ready + x->dur;
            S->done[id] = 1;
            S->pc[r]++;
            left--;
            for (int q = S->wait_head[id]; q >= 0; q = S->wait_next[q]) S->stack[sp++] = q;
            S->wait_head[id] = -1;
        }
        S->free_at[r] = tf;
    }
    /* ranks parked on a task that never ran leave their wait_head entries set: clear them */
    for (int r = 0; r < P; r++)
        if (S->pc[r] < o->n[r]) {
            const struct bm_task *x = &g->task[o->seq[r][S->pc[r]]];
            for (int e = 0; e < x->npred; e++) S->wait_head[g->pred[x->pred0 + e].task] = -1;
        }
    S->evals++;
    if (left > 0) return BM_T_INF;
    double s = 0;
    for (int r = 0; r < P; r++)
        if (S->free_at[r] > end) end = S->free_at[r];
    for (int i = 0; i < S->N; i++) s += fi[i];
    *sec = s;
    return end;
}

static int is_nested(const struct srch *S, int id) { return S->g->task[id].chunk < 0; }

/* Latest start of every task that keeps the accepted order's makespan (S->late), from its rank
 * successor and its data successors, tasks taken latest start first. (Only the critical-path
 * descent reads it, to choose which ops to try: an op misjudged there is merely not tried.) */
static void compute_slack(struct srch *S)
{
    const struct bm_graph *g = S->g;
    int k = 0;
    for (int r = 0; r < S->P; r++)
        for (int i = 0; i < S->o->n[r]; i++) S->byst[k++] = S->o->seq[r][i];
    bm_sort_ids_by_key(S->byst, k, S->start);
    for (int q = k - 1; q >= 0; q--) {
        int x = S->byst[q];
        const struct bm_task *tx = &g->task[x];
        int r = tx->rank, i = S->lpos[x];
        double lf = S->ms;
        if (i + 1 < S->o->n[r] && S->late[S->o->seq[r][i + 1]] < lf) lf = S->late[S->o->seq[r][i + 1]];
        for (int e = 0; e < tx->nsucc; e++) {
            struct bm_edge se = g->succ[tx->succ0 + e];
            if (S->late[se.task] - se.comm_ms < lf) lf = S->late[se.task] - se.comm_ms;
        }
        S->late[x] = lf - tx->dur;
    }
}

static int critical(const struct srch *S, int x) { return S->late[x] - S->start[x] < 1e-6 * (1 + S->ms); }

/* Does rank r's sequence keep every nested module within the residency limit? */
static int residency_ok(struct srch *S, int r)
{
    if (S->lim_enc <= 0) return 1;
    const struct bm_graph *g = S->g;
    const struct bm_table *t = g->t;
    memset(S->live, 0, (size_t)t->n_modules * sizeof *S->live);
    for (int i = 0; i < S->o->n[r]; i++) {
        const struct bm_task *x = &g->task[S->o->seq[r][i]];
        if (x->chunk >= 0) continue;
        if (x->pass == BM_PASS_B) {
            S->live[x->module]--;
            continue;
        }
        if (x->pass != BM_PASS_F) continue; /* only a forward makes an activation live */
        int lim = t->modules[x->module].role == BM_ROLE_ENCODER ? S->lim_enc : S->lim_gen;
        if (++S->live[x->module] > lim) return 0;
    }
    return 1;
}

/* Move rank r's op at index i to index j of the sequence without it (0 <= j < n). */
static void move_op(struct srch *S, int r, int i, int j)
{
    int *seq = S->o->seq[r], x = seq[i];
    if (j > i) memmove(seq + i, seq + i + 1, (size_t)(j - i) * sizeof *seq);
    else if (j < i) memmove(seq + j + 1, seq + j, (size_t)(i - j) * sizeof *seq);
    seq[j] = x;
}

static void index_rank(struct srch *S, int r)
{
    for (int i = 0; i < S->o->n[r]; i++) S->lpos[S->o->seq[r][i]] = i;
}

static int better(double ms, double sec, double bms, double bsec)
{
    if (ms < bms - BM_T_EPS * (1 + bms)) return 1;
    return ms <= bms + BM_T_EPS * (1 + bms) && sec < bsec - BM_T_EPS * (1 + bsec);
}

/* Range of indices rank r's op x may take (same-rank producers before, consumers after). */
static void op_range(const struct srch *S, int r, int x, int *lo, int *hi)
{
    const struct bm_graph *g = S->g;
    const struct bm_task *tx = &g->task[x];
    *lo = 0;
    *hi = S->o->n[r] - 1;
    for (int e = 0; e < tx->npred; e++) {
        int p = g->pred[tx->pred0 + e].task;
        if (g->task[p].rank == r && S->lpos[p] + 1 > *lo) *lo = S->lpos[p] + 1;
    }
    for (int e = 0; e < tx->nsucc; e++) {
        int s = g->succ[tx->succ0 + e].task;
        if (g->task[s].rank == r && S->lpos[s] - 1 < *hi) *hi = S->lpos[s] - 1;
    }
}

/* Try rank r's op at index i before each of the nearest S->gaps gaps on either side (and
 * at the end); keep the best improving position. Returns 1 when the order changed. */
static int improve_op(struct srch *S, int r, int i)
{
    int n = S->o->n[r];
    int x = S->o->seq[r][i];
    int lo, hi; /* same-rank producers and consumers bound the range */
    op_range(S, r, x, &lo, &hi);
    /* the sequence without x: target j means "x ends up at index j"; a gap before seq[k]
     * (k != i) becomes index k (k < i) or k-1 (k > i) */
    int best_j = -1;
    double bms = S->ms, bsec = S->sec, sec;
    const int *seq = S->o->seq[r];
    /* candidates: the nearest S->gaps gaps before and after the op */
    int cand[2 * GAPS_WIDE], nc = 0;
    for (int dir = -1; dir <= 1; dir += 2) {
        int found = 0;
        for (int k = dir < 0 ? i - 1 : i + 2; k >= lo && k <= hi + 1 && k <= n && found < S->gaps; k += dir) {
            int gap = k == n || S->start[seq[k]] > (k > 0 ? S->finish[seq[k - 1]] : 0) + BM_T_EPS;
            if (gap) cand[nc++] = k, found++;
        }
    }
    for (int c = 0; c < nc; c++) {
        int k = cand[c];
        int j = k < i ? k : k - 1;
        if (j < lo || j > hi) continue;
        if (S->evals >= S->budget) break;
        move_op(S, r, i, j);
        if (residency_ok(S, r)) {
            double ms = time_order(S, S->tstart, S->tfinish, &sec);
            if (ms < BM_T_INF && better(ms, sec, bms, bsec)) {
                bms = ms;
                bsec = sec;
                best_j = j;
            }
        }
        move_op(S, r, j, i);
        seq = S->o->seq[r];
    }
    if (best_j < 0) return 0;
    move_op(S, r, i, best_j);
    S->ms = time_order(S, S->start, S->finish, &S->sec);
    index_rank(S, r);
    compute_slack(S);
    return 1;
}

/* Swap rank r's nested op at i with each later nested op it may trade places with; keep the
 * best improving swap. A swap moves two ops at once, which single moves cannot do when each
 * alone breaks the residency limit (a forward earlier needs a backward earlier too) or gains
 * nothing alone. Returns 1 when the order changed. */
static int improve_swap(struct srch *S, int r, int i)
{
    int *seq = S->o->seq[r], n = S->o->n[r], x = seq[i];
    int lox, hix;
    op_range(S, r, x, &lox, &hix);
    int best_k = -1;
    double bms = S->ms, bsec = S->sec, sec;
    for (int k = i + 1; k <= hix && k < n; k++) {
        int y = seq[k];
        if (!is_nested(S, y)) continue;
        int loy, hiy;
        op_range(S, r, y, &loy, &hiy);
        if (i < loy) continue;
        if (S->evals >= S->budget) break;
        seq[i] = y, seq[k] = x;
        if (residency_ok(S, r)) {
            double ms = time_order(S, S->tstart, S->tfinish, &sec);
            if (ms < BM_T_INF && better(ms, sec, bms, bsec)) {
                bms = ms;
                bsec = sec;
                best_k = k;
            }
        }
        seq[i] = x, seq[k] = y;
    }
    if (best_k < 0) return 0;
    seq[i] = seq[best_k], seq[best_k] = x;
    S->ms = time_order(S, S->start, S->finish, &S->sec);
    index_rank(S, r);
    compute_slack(S);
    return 1;
}

/* Hill-climb from the accepted order until no kept move or the budget. critical_only tries
 * just the nested ops whose latest start equals their start, or that sit right before such an
 * op on their rank. "Don't look" flags: a rank none of whose ops could move in a round is
 * skipped until a move is kept on it or on a neighbouring stage (the ranks whose timing a move
 * shifts most directly); without them the last round, which finds nothing, costs as much as
 * every round before it. Returns 1 when the order changed. */
static int descend(struct srch *S, int critical_only)
{
    struct bm_order *o = S->o;
    int moved = 0;
    for (int r = 0; r < S->P; r++) S->look[r] = 1;
    for (int changed = 1; changed && S->evals < S->budget;) {
        changed = 0;
        for (int r = 0; r < S->P && S->evals < S->budget; r++) {
            if (!S->look[r]) continue;
            S->look[r] = 0;
            for (int i = 0; i < o->n[r] && S->evals < S->budget; i++) {
                int x = o->seq[r][i], got = 0;
                if (!is_nested(S, x)) continue;
                if (critical_only && !critical(S, x) && !(i + 1 < o->n[r] && critical(S, o->seq[r][i + 1])))
                    continue;
                if (improve_op(S, r, i)) {
                    got = 1;
                    if (S->lpos[x] > i) i--; /* moved later: the op shifted into i is next */
                } else if (improve_swap(S, r, i)) {
                    got = 1;
                    i--; /* another op is at i now */
                }
                if (got) {
                    changed = moved = 1;
                    S->look[r] = 1;
                    S->look[(r + 1) % S->P] = S->look[(r + S->P - 1) % S->P] = 1;
                }
            }
        }
    }
    return moved;
}

int bm_search_order(const struct bm_graph *g, struct bm_order *o, int residency, long budget,
                    int *moved, struct bm_err *err)
{
    *moved = 0;
    struct srch S;
    memset(&S, 0, sizeof S);
    S.g = g;
    S.o = o;
    S.P = o->pp;
    S.N = g->n_tasks;
    S.budget = budget;
    S.gaps = GAPS_EACH_WAY;
    const struct bm_table *t = g->t;
    if (residency > 0) {
        int U = t->unit > 0 ? t->unit : t->pp, per = (U + t->pp - 1) / t->pp;
        S.lim_enc = residency * per;
        S.lim_gen = per;
    }
    size_t N = (size_t)(S.N > 0 ? S.N : 1), P = (size_t)S.P;
    S.start = bm_malloc(N * sizeof(double));
    S.finish = bm_malloc(N * sizeof(double));
    S.tstart = bm_malloc(N * sizeof(double));
    S.tfinish = bm_malloc(N * sizeof(double));
    S.done = bm_malloc(N);
    S.wait_head = bm_malloc(N * sizeof(int));
    S.lpos = bm_malloc(N * sizeof(int));
    S.pc = bm_malloc(P * sizeof(int));
    S.free_at = bm_malloc(P * sizeof(double));
    S.wait_next = bm_malloc(P * sizeof(int));
    S.stack = bm_malloc(P * sizeof(int));
    S.live = bm_malloc((size_t)(t->n_modules > 0 ? t->n_modules : 1) * sizeof(int));
    S.look = bm_malloc(P);
    S.late = bm_malloc(N * sizeof(double));
    S.byst = bm_malloc(N * sizeof(int));
    int rc = BM_OK, **save = NULL;
    if (!S.start || !S.finish || !S.tstart || !S.tfinish || !S.done || !S.wait_head || !S.lpos ||
        !S.pc || !S.free_at || !S.wait_next || !S.stack || !S.live || !S.look || !S.late || !S.byst) {
        rc = bm_err_set(err, "out of memory searching the placement");
        goto done;
    }
    for (size_t i = 0; i < N; i++) S.wait_head[i] = -1;
    S.ms = time_order(&S, S.start, S.finish, &S.sec);
    if (S.ms >= BM_T_INF) goto done; /* cannot happen for a scheduled order; leave it alone */
    for (int r = 0; r < S.P; r++) index_rank(&S, r);
    compute_slack(&S);
    /* Two descents from the same start, the better kept: one that tries every nested op, one
     * that tries only ops on the critical path or right before a critical op. They end in
     * different local optima and neither is better everywhere (understanding, P = 8, W = 3:
     * the first wins on interleaved, the second on 1F1B). */
    save = bm_malloc((size_t)S.P * sizeof *save);
    if (!save) goto oom;
    for (int r = 0; r < S.P; r++) save[r] = NULL;
    for (int r = 0; r < S.P; r++) {
        save[r] = bm_malloc((size_t)(o->n[r] ? o->n[r] : 1) * sizeof(int));
        if (!save[r]) goto oom;
        memcpy(save[r], o->seq[r], (size_t)o->n[r] * sizeof(int));
    }
    int got_a = descend(&S, 0);
    double ms_a = S.ms, sec_a = S.sec;
    for (int r = 0; r < S.P; r++) { /* swap: save holds A, o the start again */
        int *tmp = save[r];
        save[r] = o->seq[r];
        o->seq[r] = tmp;
    }
    S.ms = time_order(&S, S.start, S.finish, &S.sec);
    for (int r = 0; r < S.P; r++) index_rank(&S, r);
    compute_slack(&S);
    S.evals = 0;
    int got_b = descend(&S, 1);
    if (!got_b || better(ms_a, sec_a, S.ms, S.sec)) {
        for (int r = 0; r < S.P; r++) {
            int *tmp = save[r];
            save[r] = o->seq[r];
            o->seq[r] = tmp;
        }
        *moved = got_a;
        S.ms = ms_a, S.sec = sec_a;
    } else {
        *moved = 1;
    }
    /* A third descent from the better of the two, every op, each tried before the nearest
     * GAPS_WIDE gaps each way: it starts at their local optimum and keeps only improving moves, so
     * it can only gain. Measured (issue 28, window cap 3, layers removed): understanding P = 16,
     * V = 2, M = 128 3068.0 -> 3038.6 ms; generation the same shape 4036.1 -> 4007.6 ms; the
     * wider reach alone instead of this third descent ended 0.01-0.02% worse in two cells. */
    S.ms = time_order(&S, S.start, S.finish, &S.sec);
    for (int r = 0; r < S.P; r++) index_rank(&S, r);
    compute_slack(&S);
    S.evals = 0;
    S.gaps = GAPS_WIDE;
    if (descend(&S, 0)) *moved = 1;
    goto done;
oom:
    rc = bm_err_set(err, "out of memory searching the placement");
done:
    bm_free(S.start);
    bm_free(S.finish);
    bm_free(S.tstart);
    bm_free(S.tfinish);
    bm_free(S.done);
    bm_free(S.wait_head);
    bm_free(S.lpos);
    bm_free(S.pc);
    bm_free(S.free_at);
    bm_free(S.wait_next);
    bm_free(S.stack);
    bm_free(S.live);
    bm_free(S.look);
    bm_free(S.late);
    bm_free(S.byst);
    for (int r = 0; save && r < S.P; r++) bm_free(save[r]);
    bm_free(save);
    return rc;
}
