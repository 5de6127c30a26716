/* nest.c — nesting policies (docs/design.md §6): where and when encoder/generator work runs.
 *
 * The backbone order of every rank is fixed (schedule.c). Nested work is placed by an
 * event-driven list scheduler over the nominal timeline: at each step the rank whose next op
 * can start earliest commits one op, chosen by the policy's rule:
 *
 *   bigmac / ideal  a nested op goes into the idle gap before the rank's next backbone op when
 *                   it fits entirely ("bubble filling"); otherwise it runs before the backbone op
 *                   only when waiting would delay its consumer more than it delays the backbone
 *                   op ("column" placement: at the earliest point its inputs are ready without
 *                   moving the backbone order). Encoder forwards are admitted W units at a time:
 *                   unit u+W may start on a rank once that rank's backwards of unit u are done,
 *                   and those become ready only when the chunk-0 backwards of the whole unit are
 *                   done. Generator work of a unit starts when the last chunk has produced the
 *                   whole unit, and each microbatch's generator F and B run back to back.
 *   optimus         encoder forwards first (consumption order), the backbone, then encoder
 *                   backwards (gradient order); generators as soon as their inputs allow; then
 *                   a refinement moves single encoder ops into idle gaps they fit entirely.
 *   unified(-balanced)  encoders fused around chunk 0 on rank 0, generators after the last
 *                   chunk on rank P-1 (built directly, no scheduling needed).
 *   none            the backbone alone.
 *
 * Because ops are committed only when their inputs are committed, every order produced here is
 * executable; a window too small for the backbone shows up as a stall, which is reported with
 * each rank's blocked op. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "plan/plan.h"
#include "util/util.h"

/* ---------------------------------------------------------------- small int vector */

struct ivec {
    int *v;
    int n, cap;
};

static int ivec_push(struct ivec *a, int x)
{
    if (bm_grow(&a->v, &a->cap, a->n + 1, sizeof *a->v)) return -1;
    a->v[a->n++] = x;
    return 0;
}

/* ---------------------------------------------------------------- scheduler state */

struct sched {
    const struct bm_graph *g;
    const struct bm_table *t;
    int P, M, U, W, n_units;
    int nested_rules;      /* bigmac/ideal: window, unit gates, generator work of a unit as a column */
    int gen_asap;          /* bigmac/ideal over a V shape: generator blocks as their inputs allow (the
                            * last chunk's backward follows its forward at once there, so a unit's
                            * column would wait on backwards that wait on it) */
    int optimus;

    int *unsched;          /* [task] preds not yet committed */
    double *ready;         /* [task] inputs' arrival once unsched == 0 (raised by each pred's
                            * commit, so making a task available reads none of its preds) */
    double *start, *finish;
    char *done;
    double *s0;            /* [task] backbone-only nominal start (backbone tasks) */

    double *t_free;        /* [rank] */
    double *delta;         /* [rank] lateness of its last backbone op vs s0 */
    int *bi;               /* [rank] next index into bbseq */
    int *tail_from;        /* [rank] first index of the trailing run of chunk-0 backwards */
    int *drain_from;       /* [rank] first index after the rank's last backbone forward */
    int drain_level;       /* the drain fill: 0 off, 1 the gap rule, 2 and the spread rule */
    int drain_used;        /* the highest of its rules that placed an op */
    double **drain_idle;   /* [rank][2 (i - drain_from)]: idle of the backbone-only timeline from
                            * bbseq[i]'s start to the rank's end (what the drain can absorb), and
                            * [.. + 1] its longest single gap there */
    int **bbseq, *bbn;     /* [rank] backbone task order */
    struct ivec *avail;    /* [rank] nested tasks with unsched == 0, not yet committed */
    struct ivec *held;     /* [k*P + r] encoder-k forwards on r with unsched == 0 whose window is
                            * still closed: kept out of avail (whose every proposal scans it) and
                            * released when the (k, r) frontier moves, so a proposal costs O(W·U/P),
                            * not O(M/P) */
    struct ivec *forced;   /* [rank] generator-block continuation, committed in order */
    int *forced_head;      /* [rank] index of next forced task */
    struct ivec *colq;     /* [rank] column blocks: EB(u) then EF(u+W), in order */
    int *col_head;         /* [rank] index of the next column task */
    double *col_t;         /* [task] the column's nominal time (not before) */
    char *col_managed;     /* [task] placed by a column, not by bubble filling */
    struct ivec *out;      /* [rank] committed order */

    /* proposals: a rank's next op is recomputed only when something it depends on changed
     * (its "dirty" flag); a min-heap of ranks by (start, rank) picks the earliest. */
    int *prop_task;        /* [rank] -1 = blocked */
    double *prop_start;
    char *prop_valid;
    int *dirty, n_dirty;   /* ranks whose proposal must be recomputed */
    int *heap, heap_n;     /* [P] ranks with a proposal */
    int *hpos;             /* [rank] index in heap, -1 = none */

    /* gates */
    int *c0_b_left;        /* [unit] chunk-0 backwards not yet committed */
    int *last_f_left;      /* [unit] last-chunk forwards not yet committed */
    int *frontier;         /* [k*P + r] leading units whose encoder-k backwards on r are done */
    /* The window counts a rank's OWN units (those with encoder work on it): with U < P a unit
     * covers only some ranks, and counting every unit would hold a rank to fewer than W. */
    int *own_idx;          /* [r*(n_units+1) + u] r's own units before unit u */
    int *own_list;         /* [r*n_units + j] r's j-th own unit */
    int *col_pair;         /* [r] scratch: the unit whose forwards a column pairs on r, -1 */
    int *eb_left;          /* [(k*P + r)*n_units + u] encoder-k backwards of unit u left on r */
    char *feeds_backbone;  /* [k] encoder slot k's output is consumed by the backbone */
    char *gen_head;        /* [k] generator slot k starts the per-microbatch generator block */
    int *topo;             /* nested slots in topological order (F order) */
    int n_topo;
    int n_enc_slots;
    long remaining;
};

static int is_bb(const struct sched *S, int id) { return S->g->task[id].chunk >= 0; }

static int slot_of(const struct sched *S, int id)
{
    return S->g->nested_slot[S->g->task[id].module];
}

static enum bm_role role_of(const struct sched *S, int id)
{
    return S->t->modules[S->g->task[id].module].role;
}

static int unit_of(const struct sched *S, int mb) { return mb / S->U; }

/* Rank r's own unit W own units after its unit u (u own or n_units), or -1 if none. */
static int own_ahead(const struct sched *S, int r, int u, int W)
{
    const int *idx = &S->own_idx[(size_t)r * (S->n_units + 1)];
    int j = idx[u] + W;
    return j < idx[S->n_units] ? S->own_list[(size_t)r * S->n_units + j] : -1;
}

/* Is the policy's gate open for nested task id? */
static int gate_open(const struct sched *S, int id)
{
    if (!S->nested_rules) return 1;
    const struct bm_task *x = &S->g->task[id];
    int k = slot_of(S, id), u = unit_of(S, x->mb);
    if (role_of(S, id) == BM_ROLE_ENCODER) {
        if (x->pass == BM_PASS_F) {
            const int *idx = &S->own_idx[(size_t)x->rank * (S->n_units + 1)];
            return idx[u] < idx[S->frontier[k * S->P + x->rank]] + S->W;
        }
        if (S->feeds_backbone[k]) return S->c0_b_left[u] == 0;
        return 1;
    }
    return 1;
}

/* Estimated start of a backbone task not yet committed. */
static double est_bb(const struct sched *S, int id)
{
    const struct bm_task *x = &S->g->task[id];
    if (S->done[id]) return S->start[id];
    double d = S->delta[x->rank];
    int C = S->g->C;
    int q = x->rank;
    if (x->pass == BM_PASS_F && x->chunk > 0) q = (x->chunk - 1) % S->P;
    if (x->pass == BM_PASS_B && x->chunk < C - 1) q = (x->chunk + 1) % S->P;
    if (S->delta[q] > d) d = S->delta[q];
    return S->s0[id] + d;
}

/* Total duration of microbatch mb's generator block (every generator's F and B). */
static double gen_block_dur(const struct sched *S, int mb)
{
    double d = 0;
    for (int k = 0; k < S->g->n_nested; k++) {
        int mod = S->g->nested_module[k];
        if (S->t->modules[mod].role != BM_ROLE_GENERATOR) continue;
        d += S->g->task[bm_task_nested(S->g, k, BM_PASS_F, mb)].dur +
             S->g->task[bm_task_nested(S->g, k, BM_PASS_B, mb)].dur;
    }
    return d;
}

/* Latest start of nested task id that does not delay the backbone op consuming its result
 * (BM_T_INF when nothing in the backbone waits for it). depth bounds encoder chains. */
static double deadline(const struct sched *S, int id, int depth)
{
    const struct bm_graph *g = S->g;
    const struct bm_task *x = &g->task[id];
    if (depth > 64) return BM_T_INF;
    if (role_of(S, id) == BM_ROLE_ENCODER && x->pass == BM_PASS_F) {
        double d = BM_T_INF;
        for (int e = 0; e < x->nsucc; e++) {
            struct bm_edge se = g->succ[x->succ0 + e];
            const struct bm_task *s = &g->task[se.task];
            if (s->pass != BM_PASS_F) continue;
            double ls = is_bb(S, se.task) ? est_bb(S, se.task) : deadline(S, se.task, depth + 1);
            if (ls - se.comm_ms < d) d = ls - se.comm_ms;
        }
        return d >= BM_T_INF ? BM_T_INF : d - x->dur;
    }
    if (role_of(S, id) == BM_ROLE_ENCODER && x->pass == BM_PASS_B) {
        /* An encoder backward matters when the window holds back a forward on this rank. */
        if (!S->nested_rules) return BM_T_INF;
        int k = slot_of(S, id);
        int u = own_ahead(S, x->rank, S->frontier[k * S->P + x->rank], S->W);
        for (int m = u * S->U; u >= 0 && m < S->M && m < (u + 1) * S->U; m++) {
            int f = bm_task_nested(g, k, BM_PASS_F, m);
            if (g->task[f].rank == x->rank && !S->done[f]) {
                double d = deadline(S, f, depth + 1);
                return d >= BM_T_INF ? BM_T_INF : d - x->dur;
            }
        }
        return BM_T_INF;
    }
    if (role_of(S, id) == BM_ROLE_GENERATOR) {
        /* The block's result feeds the last chunk's backward (when gradient flows). */
        int bb_b = bm_task_bb(g, g->C - 1, BM_PASS_B, x->mb);
        const struct bm_task *b = &g->task[bb_b];
        double d = BM_T_INF;
        for (int e = 0; e < b->npred; e++) {
            struct bm_edge pe = g->pred[b->pred0 + e];
            if (g->task[pe.task].chunk < 0 && est_bb(S, bb_b) - pe.comm_ms < d)
                d = est_bb(S, bb_b) - pe.comm_ms;
        }
        return d >= BM_T_INF ? BM_T_INF : d - gen_block_dur(S, x->mb);
    }
    return BM_T_INF;
}

static void invalidate(struct sched *S, int r)
{
    if (!S->prop_valid[r]) return;
    S->prop_valid[r] = 0;
    S->dirty[S->n_dirty++] = r;
}

static void invalidate_all(struct sched *S)
{
    for (int r = 0; r < S->P; r++) invalidate(S, r);
}

/* The ranks with a proposal, a min-heap by (start, rank) indexed by rank (S->hpos): a rank's
 * new proposal moves its one entry, so the heap never holds more than P entries. */
static int heap_less(const struct sched *S, int a, int b)
{
    return S->prop_start[a] < S->prop_start[b] || (S->prop_start[a] == S->prop_start[b] && a < b);
}

static void heap_place(struct sched *S, int i, int r)
{
    S->heap[i] = r;
    S->hpos[r] = i;
}

static void heap_fix(struct sched *S, int i)
{
    int r = S->heap[i];
    while (i > 0 && heap_less(S, r, S->heap[(i - 1) / 2])) {
        heap_place(S, i, S->heap[(i - 1) / 2]);
        i = (i - 1) / 2;
    }
    for (;;) {
        int c = 2 * i + 1;
        if (c >= S->heap_n) break;
        if (c + 1 < S->heap_n && heap_less(S, S->heap[c + 1], S->heap[c])) c++;
        if (!heap_less(S, S->heap[c], r)) break;
        heap_place(S, i, S->heap[c]);
        i = c;
    }
    heap_place(S, i, r);
}

/* Rank r's proposal changed: (re)insert it, or take it out when it has none. */
static void heap_update(struct sched *S, int r)
{
    int i = S->hpos[r];
    if (S->prop_task[r] < 0) {
        if (i < 0) return;
        S->hpos[r] = -1;
        int last = S->heap[--S->heap_n];
        if (i < S->heap_n) {
            heap_place(S, i, last);
            heap_fix(S, i);
        }
        return;
    }
    if (i < 0) {
        i = S->heap_n++;
        heap_place(S, i, r);
    }
    heap_fix(S, i);
}

/* ---------------------------------------------------------------- proposals per policy */

struct pick {
    int task;
    double start;
};

#ifndef DRAIN_FILL
#define DRAIN_FILL 0.5
#endif
static struct pick propose_nested_rules(struct sched *S, int r)
{
    const struct bm_graph *g = S->g;
    double t = S->t_free[r];
    int b = S->bi[r] < S->bbn[r] ? S->bbseq[r][S->bi[r]] : -1;
    int b_known = b >= 0 && S->unsched[b] == 0;
    double rb = b < 0 ? BM_T_INF : b_known ? S->ready[b] : est_bb(S, b);
    double start_b = rb > t ? rb : t;
    if (!b_known && start_b < t + BM_T_EPS) start_b = t + BM_T_EPS; /* not ready now, whatever the estimate */

    int fit = -1, urgent = -1;
    double fit_d = BM_T_INF, urg_d = BM_T_INF, fit_s = 0, urg_s = 0, free_work = 0;
    const struct ivec *av = &S->avail[r];
    for (int i = 0; i < av->n; i++) {
        int n = av->v[i];
        if (S->col_managed[n] || !gate_open(S, n)) continue;
        double sn = S->ready[n] > t ? S->ready[n] : t;
        double d = deadline(S, n, 0);
        if (d >= BM_T_INF) free_work += g->task[n].dur;
        /* prefer backwards (they free memory and open the window) among equals */
        double key = d - (g->task[n].pass == BM_PASS_B ? 1e-6 : 0) + 1e-12 * g->task[n].mb;
        if (sn + g->task[n].dur <= start_b + BM_T_EPS && (fit < 0 || key < fit_d)) {
            fit = n;
            fit_d = key;
            fit_s = sn;
        }
        if (urgent < 0 || key < urg_d || (key == urg_d && sn < urg_s)) {
            urgent = n;
            urg_d = key;
            urg_s = sn;
        }
    }
    if (fit >= 0) return (struct pick){fit, fit_s};
    /* In the rank's tail (only chunk-0 backwards left, which no other rank waits for), idle
     * time is pure loss: start nested work that would otherwise run after the backbone even if
     * it does not fit the gap entirely. */
    if (urgent >= 0 && S->bi[r] >= S->tail_from[r] && urg_s < start_b - BM_T_EPS)
        return (struct pick){urgent, urg_s};
    if (urgent >= 0) {
        if (b < 0) return (struct pick){urgent, urg_s};
        double dn = deadline(S, urgent, 0);
        /* In the rank's drain (no backbone forward left), nested work nothing waits for (an
         * encoder backward past the window's last use) would otherwise run after the backbone,
         * adding its whole length on the ranks that finish last (rank 0 holds chunk 0); in an
         * idle gap that holds at least half of it, it delays the next backbone op by less. */
        if (dn >= BM_T_INF && S->bi[r] >= S->drain_from[r]) {
            const double *di = &S->drain_idle[r][2 * (S->bi[r] - S->drain_from[r])];
            double dur = g->task[urgent].dur;
            if (S->drain_level >= 1 && start_b - urg_s >= DRAIN_FILL * dur) {
                if (S->drain_used < 1) S->drain_used = 1;
                return (struct pick){urgent, urg_s};
            }
            if (S->drain_level >= 2 && di[0] >= free_work && di[1] < DRAIN_FILL * dur) {
                S->drain_used = 2;
                return (struct pick){urgent, urg_s};
            }
        }
        if (b_known) {
            double delay_b = urg_s + g->task[urgent].dur - start_b;
            double late_n = start_b + g->task[b].dur - dn;
            if (late_n > delay_b) return (struct pick){urgent, urg_s};
            return (struct pick){b, start_b};
        }
        if (dn < BM_T_INF) return (struct pick){urgent, dn > urg_s ? dn : urg_s};
        return (struct pick){-1, BM_T_INF};
    }
    if (b_known) return (struct pick){b, start_b};
    return (struct pick){-1, BM_T_INF};
}

static struct pick propose_optimus(struct sched *S, int r)
{
    const struct bm_graph *g = S->g;
    double t = S->t_free[r];
    int b = S->bi[r] < S->bbn[r] ? S->bbseq[r][S->bi[r]] : -1;
    int b_known = b >= 0 && S->unsched[b] == 0;
    double start_b = b_known ? (S->ready[b] > t ? S->ready[b] : t) : BM_T_INF;
    int ef = -1, gen = -1, eb = -1;
    const struct ivec *av = &S->avail[r];
    for (int i = 0; i < av->n; i++) {
        int n = av->v[i];
        const struct bm_task *x = &g->task[n];
        if (role_of(S, n) == BM_ROLE_ENCODER && x->pass == BM_PASS_F) {
            if (ef < 0 || x->mb < g->task[ef].mb) ef = n;
        } else if (role_of(S, n) == BM_ROLE_GENERATOR) {
            if (gen < 0 || S->ready[n] < S->ready[gen]) gen = n;
        } else if (eb < 0 || S->ready[n] < S->ready[eb] ||
                   (S->ready[n] == S->ready[eb] && x->mb < g->task[eb].mb)) {
            eb = n;
        }
    }
    double sg = gen >= 0 ? (S->ready[gen] > t ? S->ready[gen] : t) : BM_T_INF;
    if (gen >= 0 && sg <= start_b) return (struct pick){gen, sg};
    if (ef >= 0) return (struct pick){ef, S->ready[ef] > t ? S->ready[ef] : t};
    if (b_known) return (struct pick){b, start_b};
    if (b >= 0) {
        if (gen >= 0) return (struct pick){gen, sg};
        return (struct pick){-1, BM_T_INF};
    }
    if (gen >= 0) return (struct pick){gen, sg};
    if (eb >= 0) return (struct pick){eb, S->ready[eb] > t ? S->ready[eb] : t};
    return (struct pick){-1, BM_T_INF};
}

static struct pick propose(struct sched *S, int r)
{
    struct ivec *fq = &S->forced[r];
    double t = S->t_free[r];
    if (S->forced_head[r] < fq->n) {
        int x = fq->v[S->forced_head[r]];
        if (S->unsched[x]) return (struct pick){-1, BM_T_INF};
        return (struct pick){x, S->ready[x] > t ? S->ready[x] : t};
    }
    if (S->optimus) return propose_optimus(S, r);
    /* A pending column runs at its time on every rank: right away if the rank is already past
     * it, else when the rank's next op would not start before it. */
    int h = S->col_head[r] < S->colq[r].n ? S->colq[r].v[S->col_head[r]] : -1;
    struct pick col = {-1, BM_T_INF};
    if (h >= 0 && S->unsched[h] == 0) {
        double st = t > S->col_t[h] ? t : S->col_t[h];
        col = (struct pick){h, S->ready[h] > st ? S->ready[h] : st};
        if (t >= S->col_t[h] - BM_T_EPS) return col;
    }
    struct pick p = propose_nested_rules(S, r);
    if (col.task >= 0 && (p.task < 0 || p.start >= S->col_t[h] - BM_T_EPS)) return col;
    return p;
}

/* ---------------------------------------------------------------- committing */

/* Task id's last pred is committed (S->ready[id] holds its inputs' arrival): it becomes a
 * candidate of its rank. */
static int make_avail(struct sched *S, int id)
{
    const struct bm_task *x = &S->g->task[id];
    invalidate(S, x->rank);
    if (is_bb(S, id)) return 0;
    /* generator block members after the head are committed through the forced queue */
    if (S->nested_rules || S->optimus) {
        if (role_of(S, id) == BM_ROLE_GENERATOR && !(x->pass == BM_PASS_F && S->gen_head[slot_of(S, id)]))
            return 0;
        if (role_of(S, id) == BM_ROLE_GENERATOR && S->nested_rules && !S->gen_asap) return 0;
    }
    if (S->nested_rules && x->pass == BM_PASS_F && role_of(S, id) == BM_ROLE_ENCODER && !gate_open(S, id))
        return ivec_push(&S->held[slot_of(S, id) * S->P + x->rank], id);
    return ivec_push(&S->avail[x->rank], id);
}

/* The (k, r) frontier moved: held forwards whose window opened go to avail, in the order they
 * were held (a column may have committed some already). */
static int release_held(struct sched *S, int k, int r)
{
    struct ivec *h = &S->held[k * S->P + r];
    int keep = 0;
    for (int i = 0; i < h->n; i++) {
        int id = h->v[i];
        if (S->done[id]) continue;
        if (!gate_open(S, id)) h->v[keep++] = id;
        else if (ivec_push(&S->avail[r], id)) return -1;
    }
    h->n = keep;
    return 0;
}

static void remove_avail(struct sched *S, int r, int id)
{
    struct ivec *a = &S->avail[r];
    for (int i = 0; i < a->n; i++)
        if (a->v[i] == id) {
            a->v[i] = a->v[--a->n];
            return;
        }
}

/* Queue the rest of microbatch mb's generator block on rank r after its head. */
static int queue_gen_block(struct sched *S, int r, int head)
{
    const struct bm_graph *g = S->g;
    int mb = g->task[head].mb;
    for (int i = 0; i < S->n_topo; i++) {
        int k = S->topo[i];
        if (S->t->modules[g->nested_module[k]].role != BM_ROLE_GENERATOR) continue;
        int f = bm_task_nested(g, k, BM_PASS_F, mb);
        if (f != head && ivec_push(&S->forced[r], f)) return -1;
    }
    for (int i = S->n_topo - 1; i >= 0; i--) {
        int k = S->topo[i];
        if (S->t->modules[g->nested_module[k]].role != BM_ROLE_GENERATOR) continue;
        if (ivec_push(&S->forced[r], bm_task_nested(g, k, BM_PASS_B, mb))) return -1;
    }
    return 0;
}

/* Unit u's chunk-0 backwards are all committed: on each rank its encoder backwards, paired with
 * the forwards of the rank's own unit W own units later (u+W when units cover every rank), go
 * into the sequence at one nominal time (a "column"), so the whole pipeline shifts together
 * instead of each rank delaying the others in turn. A rank's last W own units have no forwards
 * to pair with; their backwards stay with bubble filling. */
static int make_column(struct sched *S, int u)
{
    const struct bm_graph *g = S->g;
    if (!S->nested_rules) return 0;
    int any = 0;
    for (int r = 0; r < S->P; r++) {
        const int *idx = &S->own_idx[(size_t)r * (S->n_units + 1)];
        S->col_pair[r] = idx[u + 1] > idx[u] ? own_ahead(S, r, u, S->W) : -1;
        any |= S->col_pair[r] >= 0;
    }
    if (!any) return 0;
    double T = 0;
    for (int k = 0; k < g->n_nested; k++) {
        if (S->t->modules[g->nested_module[k]].role != BM_ROLE_ENCODER || !S->feeds_backbone[k]) continue;
        for (int m = u * S->U; m < S->M && m < (u + 1) * S->U; m++) {
            int b = bm_task_nested(g, k, BM_PASS_B, m);
            if (S->unsched[b] == 0 && S->ready[b] > T) T = S->ready[b];
        }
    }
    /* backwards of unit u, then on each rank the forwards of its paired unit */
    for (int pass = 0; pass < 2; pass++)
        for (int r = 0; r < (pass == 0 ? 1 : S->P); r++) {
            int uu = pass == 0 ? u : S->col_pair[r];
            for (int m = uu * S->U; uu >= 0 && m < S->M && m < (uu + 1) * S->U; m++)
                for (int i = 0; i < S->n_topo; i++) {
                    int k = S->topo[pass == 0 ? S->n_topo - 1 - i : i];
                    if (S->t->modules[g->nested_module[k]].role != BM_ROLE_ENCODER) continue;
                    int id = bm_task_nested(g, k, pass == 0 ? BM_PASS_B : BM_PASS_F, m);
                    int rr = g->task[id].rank;
                    if (S->done[id] || S->col_pair[rr] < 0 || (pass == 1 && rr != r)) continue;
                    S->col_managed[id] = 1;
                    S->col_t[id] = T;
                    if (ivec_push(&S->colq[rr], id)) return -1;
                }
        }
    return 0;
}

/* Unit u's last-chunk forwards are all committed: every rank runs its generator work of the
 * unit (each microbatch's generator F and B back to back) at one nominal time, when the last
 * of the unit's hidden states has arrived. */
static int make_gen_column(struct sched *S, int u)
{
    const struct bm_graph *g = S->g;
    double T = 0;
    for (int m = u * S->U; m < S->M && m < (u + 1) * S->U; m++)
        for (int k = 0; k < g->n_nested; k++) {
            if (!S->gen_head[k]) continue;
            int f = bm_task_nested(g, k, BM_PASS_F, m);
            if (S->unsched[f] == 0 && S->ready[f] > T) T = S->ready[f];
        }
    for (int m = u * S->U; m < S->M && m < (u + 1) * S->U; m++) {
        for (int pass = 0; pass < 2; pass++)
            for (int i = 0; i < S->n_topo; i++) {
                int k = S->topo[pass == 0 ? i : S->n_topo - 1 - i];
                if (S->t->modules[g->nested_module[k]].role != BM_ROLE_GENERATOR) continue;
                int id = bm_task_nested(g, k, pass, m);
                S->col_managed[id] = 1;
                S->col_t[id] = T;
                if (ivec_push(&S->colq[g->task[id].rank], id)) return -1;
            }
    }
    return 0;
}

static int commit(struct sched *S, int r, struct pick p)
{
    const struct bm_graph *g = S->g;
    int id = p.task;
    const struct bm_task *x = &g->task[id];
    int column_unit = -1, gen_column_unit = -1;
    S->start[id] = p.start;
    S->finish[id] = p.start + x->dur;
    S->done[id] = 1;
    S->t_free[r] = S->finish[id];
    S->remaining--;
    if (ivec_push(&S->out[r], id)) return -1;
    invalidate(S, r);
    if (is_bb(S, id)) {
        S->bi[r]++;
        S->delta[r] = p.start - S->s0[id];
        int u = unit_of(S, x->mb);
        if (x->chunk == 0 && x->pass == BM_PASS_B && --S->c0_b_left[u] == 0) {
            column_unit = u; /* made below, once this op's successors know their ready times */
            invalidate_all(S);
        }
        if (x->chunk == g->C - 1 && x->pass == BM_PASS_F && --S->last_f_left[u] == 0) {
            gen_column_unit = u;
            invalidate_all(S);
        }
    } else if (S->forced_head[r] < S->forced[r].n && S->forced[r].v[S->forced_head[r]] == id) {
        S->forced_head[r]++;
    } else {
        if (S->col_head[r] < S->colq[r].n && S->colq[r].v[S->col_head[r]] == id) S->col_head[r]++;
        remove_avail(S, r, id);
        if (role_of(S, id) == BM_ROLE_GENERATOR && x->pass == BM_PASS_F &&
            S->gen_head[slot_of(S, id)] && (!S->nested_rules || S->gen_asap))
            if (queue_gen_block(S, r, id)) return -1;
        if (S->nested_rules && role_of(S, id) == BM_ROLE_ENCODER && x->pass == BM_PASS_B) {
            int k = slot_of(S, id), u = unit_of(S, x->mb);
            int *fr = &S->frontier[k * S->P + r];
            int *left = &S->eb_left[(size_t)(k * S->P + r) * S->n_units];
            left[u]--;
            int was = *fr;
            while (*fr < S->n_units && left[*fr] == 0) (*fr)++;
            if (*fr != was && release_held(S, k, r)) return -1;
        }
    }
    for (int e = 0; e < x->nsucc; e++) {
        struct bm_edge se = g->succ[x->succ0 + e];
        double a = S->finish[id] + se.comm_ms; /* the max over preds, whatever their order */
        if (a > S->ready[se.task]) S->ready[se.task] = a;
        if (--S->unsched[se.task] == 0 && make_avail(S, se.task)) return -1;
    }
    if (column_unit >= 0 && make_column(S, column_unit)) return -1;
    if (gen_column_unit >= 0 && S->nested_rules && !S->gen_asap && make_gen_column(S, gen_column_unit)) return -1;
    /* a changed delay moves other ranks' estimates; cheap to refresh lazily */
    return 0;
}

/* ---------------------------------------------------------------- setup */

static void sched_free(struct sched *S)
{
    bm_free(S->unsched);
    bm_free(S->ready);
    bm_free(S->start);
    bm_free(S->finish);
    bm_free(S->done);
    bm_free(S->s0);
    bm_free(S->t_free);
    bm_free(S->delta);
    bm_free(S->bi);
    bm_free(S->tail_from);
    for (int r = 0; S->drain_idle && r < S->P; r++) bm_free(S->drain_idle[r]);
    bm_free(S->drain_idle);
    bm_free(S->drain_from);
    if (S->bbseq)
        for (int r = 0; r < S->P; r++) bm_free(S->bbseq[r]);
    bm_free(S->bbseq);
    bm_free(S->bbn);
    for (int r = 0; S->avail && r < S->P; r++) bm_free(S->avail[r].v);
    for (int r = 0; S->forced && r < S->P; r++) bm_free(S->forced[r].v);
    for (int r = 0; S->out && r < S->P; r++) bm_free(S->out[r].v);
    bm_free(S->avail);
    for (int i = 0; S->held && i < S->g->n_nested * S->P; i++) bm_free(S->held[i].v);
    bm_free(S->held);
    bm_free(S->forced);
    bm_free(S->forced_head);
    for (int r = 0; S->colq && r < S->P; r++) bm_free(S->colq[r].v);
    bm_free(S->colq);
    bm_free(S->col_head);
    bm_free(S->col_t);
    bm_free(S->col_managed);
    bm_free(S->out);
    bm_free(S->prop_task);
    bm_free(S->prop_start);
    bm_free(S->prop_valid);
    bm_free(S->dirty);
    bm_free(S->heap);
    bm_free(S->hpos);
    bm_free(S->c0_b_left);
    bm_free(S->last_f_left);
    bm_free(S->frontier);
    bm_free(S->eb_left);
    bm_free(S->own_idx);
    bm_free(S->own_list);
    bm_free(S->col_pair);
    bm_free(S->feeds_backbone);
    bm_free(S->gen_head);
    bm_free(S->topo);
}

/* Backbone order per rank as task ids. */
static int backbone_seqs(const struct bm_graph *g, int ***seq, int **n, struct bm_err *err)
{
    const struct bm_table *t = g->t;
    int P = t->pp, len = bm_backbone_n_steps(t->backbone, t->vpp, t->microbatches);
    *seq = bm_calloc((size_t)P, sizeof **seq);
    *n = bm_calloc((size_t)P, sizeof **n);
    struct bm_bb_step *steps = bm_malloc((size_t)len * sizeof *steps);
    if (!*seq || !*n || !steps) {
        bm_free(steps);
        return bm_err_set(err, "out of memory building backbone orders");
    }
    for (int r = 0; r < P; r++) {
        if (bm_backbone_order(t->backbone, P, t->vpp, t->microbatches, r, t->warmup_extra, steps, err)) {
            bm_free(steps);
            return BM_ERR;
        }
        (*seq)[r] = bm_malloc((size_t)len * sizeof(int));
        if (!(*seq)[r]) {
            bm_free(steps);
            return bm_err_set(err, "out of memory building backbone orders");
        }
        for (int i = 0; i < len; i++)
            (*seq)[r][i] = bm_task_bb(g, steps[i].chunk, steps[i].pass, steps[i].mb);
        (*n)[r] = len;
    }
    bm_free(steps);
    return BM_OK;
}

/* Nested slots in dependency order (producers first). */
static int topo_slots(struct sched *S)
{
    const struct bm_graph *g = S->g;
    int K = g->n_nested;
    S->topo = bm_malloc((size_t)(K ? K : 1) * sizeof(int));
    char *placed = bm_calloc((size_t)(K ? K : 1), 1);
    if (!S->topo || !placed) {
        bm_free(placed);
        return -1;
    }
    S->n_topo = 0;
    for (int round = 0; round < K && S->n_topo < K; round++)
        for (int k = 0; k < K; k++) {
            if (placed[k]) continue;
            const struct bm_task *x = &g->task[bm_task_nested(g, k, BM_PASS_F, 0)];
            int ok = 1;
            for (int e = 0; e < x->npred; e++) {
                int p = g->pred[x->pred0 + e].task;
                if (g->task[p].chunk < 0 && !placed[g->nested_slot[g->task[p].module]]) ok = 0;
            }
            if (ok) {
                placed[k] = 1;
                S->topo[S->n_topo++] = k;
            }
        }
    bm_free(placed);
    return S->n_topo == K ? 0 : -1;
}

static int sched_init(struct sched *S, const struct bm_graph *g, int window, struct bm_err *err)
{
    const struct bm_table *t = g->t;
    memset(S, 0, sizeof *S);
    S->g = g;
    S->t = t;
    S->P = t->pp;
    S->M = t->microbatches;
    S->U = t->unit > 0 ? t->unit : t->pp;
    S->n_units = (S->M + S->U - 1) / S->U;
    S->W = window;
    S->nested_rules = t->policy == BM_POL_BIGMAC || t->policy == BM_POL_IDEAL;
    S->gen_asap = S->nested_rules && bm_backbone_v_shaped(t->backbone);
    S->optimus = t->policy == BM_POL_OPTIMUS;
    int N = g->n_tasks, P = S->P, K = g->n_nested;
    S->unsched = bm_malloc((size_t)N * sizeof(int));
    S->ready = bm_calloc((size_t)N, sizeof(double));
    S->start = bm_calloc((size_t)N, sizeof(double));
    S->finish = bm_calloc((size_t)N, sizeof(double));
    S->done = bm_calloc((size_t)N, 1);
    S->s0 = bm_calloc((size_t)N, sizeof(double));
    S->t_free = bm_calloc((size_t)P, sizeof(double));
    S->delta = bm_calloc((size_t)P, sizeof(double));
    S->bi = bm_calloc((size_t)P, sizeof(int));
    S->tail_from = bm_calloc((size_t)P, sizeof(int));
    S->drain_from = bm_calloc((size_t)P, sizeof(int));
    S->drain_idle = bm_calloc((size_t)P, sizeof(double *));
    S->avail = bm_calloc((size_t)P, sizeof *S->avail);
    S->held = bm_calloc((size_t)(K ? K : 1) * (size_t)P, sizeof *S->held);
    S->forced = bm_calloc((size_t)P, sizeof *S->forced);
    S->forced_head = bm_calloc((size_t)P, sizeof(int));
    S->colq = bm_calloc((size_t)P, sizeof *S->colq);
    S->col_head = bm_calloc((size_t)P, sizeof(int));
    S->col_t = bm_calloc((size_t)N, sizeof(double));
    S->col_managed = bm_calloc((size_t)N, 1);
    S->out = bm_calloc((size_t)P, sizeof *S->out);
    S->prop_task = bm_calloc((size_t)P, sizeof(int));
    S->prop_start = bm_calloc((size_t)P, sizeof(double));
    S->prop_valid = bm_calloc((size_t)P, 1);
    S->dirty = bm_calloc((size_t)P, sizeof(int));
    S->heap = bm_calloc((size_t)P, sizeof(int));
    S->hpos = bm_malloc((size_t)P * sizeof(int));
    S->c0_b_left = bm_calloc((size_t)S->n_units, sizeof(int));
    S->last_f_left = bm_calloc((size_t)S->n_units, sizeof(int));
    S->frontier = bm_calloc((size_t)(K ? K : 1) * (size_t)P, sizeof(int));
    S->eb_left = bm_calloc((size_t)(K ? K : 1) * (size_t)P * (size_t)S->n_units, sizeof(int));
    S->own_idx = bm_calloc((size_t)P * (size_t)(S->n_units + 1), sizeof(int));
    S->own_list = bm_calloc((size_t)P * (size_t)S->n_units, sizeof(int));
    S->col_pair = bm_calloc((size_t)P, sizeof(int));
    S->feeds_backbone = bm_calloc((size_t)(K ? K : 1), 1);
    S->gen_head = bm_calloc((size_t)(K ? K : 1), 1);
    if (!S->unsched || !S->ready || !S->start || !S->finish || !S->done || !S->s0 ||
        !S->t_free || !S->delta || !S->bi || !S->tail_from || !S->drain_from || !S->drain_idle || !S->avail || !S->held || !S->forced || !S->forced_head ||
        !S->colq || !S->col_head || !S->col_t || !S->col_managed ||
        !S->out || !S->prop_task || !S->prop_start || !S->prop_valid || !S->dirty ||
        !S->heap || !S->hpos || !S->c0_b_left ||
        !S->last_f_left || !S->frontier || !S->eb_left || !S->own_idx || !S->own_list || !S->col_pair ||
        !S->feeds_backbone || !S->gen_head)
        return bm_err_set(err, "out of memory planning");
    for (int r = 0; r < P; r++) S->hpos[r] = -1;
    if (topo_slots(S)) return bm_err_set(err, "out of memory planning (or a module cycle)");
    if (backbone_seqs(g, &S->bbseq, &S->bbn, err)) return BM_ERR;
    for (int r = 0; r < P; r++) {
        int i = S->bbn[r];
        /* weight gradients feed nothing either, so they belong to the tail */
        while (i > 0 && (g->task[S->bbseq[r][i - 1]].pass == BM_PASS_W ||
                         (g->task[S->bbseq[r][i - 1]].chunk == 0 && g->task[S->bbseq[r][i - 1]].pass == BM_PASS_B)))
            i--;
        S->tail_from[r] = i;
        for (i = S->bbn[r]; i > 0 && g->task[S->bbseq[r][i - 1]].pass != BM_PASS_F; i--) {}
        S->drain_from[r] = i;
    }

    /* Backbone-only nominal timeline: the reference the nested ops are fitted around. */
    {
        struct bm_order o = {P, S->bbseq, S->bbn};
        if (bm_order_times_backbone(g, &o, S->s0, S->finish, err)) return BM_ERR;
        for (int r = 0; r < P; r++) {
            int d0 = S->drain_from[r], n = S->bbn[r] - d0;
            if (n <= 0) continue;
            if (!(S->drain_idle[r] = bm_malloc((size_t)n * 2 * sizeof(double))))
                return bm_err_set(err, "out of memory planning");
            double end = S->finish[S->bbseq[r][S->bbn[r] - 1]], busy = 0, longest = 0;
            for (int i = S->bbn[r] - 1; i >= d0; i--) {
                int id = S->bbseq[r][i];
                busy += g->task[id].dur;
                if (i + 1 < S->bbn[r]) {
                    double gap = S->s0[S->bbseq[r][i + 1]] - S->finish[id];
                    if (gap > longest) longest = gap;
                }
                S->drain_idle[r][2 * (i - d0)] = end - S->s0[id] - busy;
                S->drain_idle[r][2 * (i - d0) + 1] = longest;
            }
        }
        memset(S->finish, 0, (size_t)N * sizeof(double));
    }
    for (int m = 0; m < S->M; m++) {
        S->c0_b_left[unit_of(S, m)]++;
        S->last_f_left[unit_of(S, m)]++;
    }
    for (int k = 0; k < K; k++) {
        int mod = g->nested_module[k];
        enum bm_role role = t->modules[mod].role;
        const struct bm_task *f0 = &g->task[bm_task_nested(g, k, BM_PASS_F, 0)];
        for (int e = 0; e < f0->nsucc; e++)
            if (g->task[g->succ[f0->succ0 + e].task].chunk >= 0) S->feeds_backbone[k] = 1;
        if (role == BM_ROLE_GENERATOR) {
            /* the head is the first generator in dependency order */
            int first = -1;
            for (int i = 0; i < S->n_topo && first < 0; i++)
                if (t->modules[g->nested_module[S->topo[i]]].role == BM_ROLE_GENERATOR)
                    first = S->topo[i];
            S->gen_head[k] = first == k;
        }
        if (role == BM_ROLE_ENCODER)
            for (int m = 0; m < S->M; m++) {
                int r = g->task[bm_task_nested(g, k, BM_PASS_F, m)].rank;
                S->eb_left[(size_t)(k * P + r) * S->n_units + unit_of(S, m)]++;
            }
    }
    /* each rank's own units: those with encoder work on it (any encoder) */
    for (int r = 0; r < P; r++) {
        int *idx = &S->own_idx[(size_t)r * (S->n_units + 1)], n = 0;
        for (int u = 0; u < S->n_units; u++) {
            idx[u] = n;
            int own = 0;
            for (int k = 0; k < K && !own; k++) own = S->eb_left[(size_t)(k * P + r) * S->n_units + u] > 0;
            if (own) S->own_list[(size_t)r * S->n_units + n++] = u;
        }
        idx[S->n_units] = n;
    }
    /* frontier: leading units with nothing to do on the rank are already "done" */
    for (int k = 0; k < K; k++)
        for (int r = 0; r < P; r++) {
            int *fr = &S->frontier[k * P + r];
            const int *left = &S->eb_left[(size_t)(k * P + r) * S->n_units];
            while (*fr < S->n_units && left[*fr] == 0) (*fr)++;
        }
    S->remaining = 0;
    for (int r = 0; r < P; r++) S->remaining += S->bbn[r];
    for (int i = 0; i < N; i++) {
        S->unsched[i] = g->task[i].npred;
        if (!is_bb(S, i)) S->remaining++;
    }
    for (int i = 0; i < N; i++)
        if (S->unsched[i] == 0 && make_avail(S, i)) return bm_err_set(err, "out of memory planning");
    return BM_OK;
}

/* Describe why the scheduler cannot go on: each rank's next op and what it waits for. Ranks
 * that only wait for the previous stage's backbone op are summarised after the first few. */
static void describe_stall(struct sched *S, char *buf, size_t n)
{
    const struct bm_graph *g = S->g;
    size_t len = 0;
    int chained = 0, chained_shown = 0;
    for (int r = 0; r < S->P; r++) {
        int b = S->bi[r] < S->bbn[r] ? S->bbseq[r][S->bi[r]] : -1;
        if (b < 0) continue;
        char what[64];
        struct bm_op op = {BM_OP_COMPUTE, (uint8_t)g->task[b].pass, g->task[b].module,
                           g->task[b].chunk, g->task[b].mb, -1, -1};
        bm_op_format(S->t, &op, what, sizeof what);
        const struct bm_task *x = &g->task[b];
        int p = -1;
        for (int e = 0; e < x->npred && p < 0; e++)
            if (!S->done[g->pred[x->pred0 + e].task]) p = g->pred[x->pred0 + e].task;
        if (p < 0) continue;
        char pw[64];
        struct bm_op po = {BM_OP_COMPUTE, (uint8_t)g->task[p].pass, g->task[p].module,
                           g->task[p].chunk, g->task[p].mb, -1, -1};
        bm_op_format(S->t, &po, pw, sizeof pw);
        int chain = is_bb(S, p);
        if (chain && ++chained > 3) continue;
        if (chain) chained_shown++;
        const char *why = "";
        if (!is_bb(S, p) && S->unsched[p] == 0 && !gate_open(S, p))
            why = role_of(S, p) == BM_ROLE_ENCODER && g->task[p].pass == BM_PASS_F
                      ? " (held back by the window: the encoder backwards of an earlier unit "
                        "need chunk-0 backwards that come later on rank 0)"
                      : " (held back until its unit is complete)";
        if (len + 300 < n)
            len += (size_t)snprintf(buf + len, n - len, "\n  rank %d blocked at %s, waiting for %s on rank %d%s",
                                    r, what, pw, g->task[p].rank, why);
    }
    if (chained > chained_shown && len + 100 < n)
        snprintf(buf + len, n - len, "\n  ... and %d more ranks waiting for the stage before them",
                 chained - chained_shown);
}

static int run(struct sched *S, struct bm_err *err)
{
    int P = S->P;
    S->n_dirty = 0;
    for (int r = 0; r < P; r++) S->dirty[S->n_dirty++] = r;
    while (S->remaining > 0) {
        while (S->n_dirty > 0) {
            int r = S->dirty[--S->n_dirty];
            struct pick p = propose(S, r);
            /* the heap orders by (start, rank) only: the same start keeps the rank's place */
            int same = S->hpos[r] >= 0 && p.task >= 0 && p.start == S->prop_start[r];
            S->prop_task[r] = p.task;
            S->prop_start[r] = p.start;
            S->prop_valid[r] = 1;
            if (!same) heap_update(S, r);
        }
        int best = S->heap_n > 0 ? S->heap[0] : -1;
        if (best < 0) {
            char why[3000];
            describe_stall(S, why, sizeof why);
            bm_err_set(err,
                              "%s with %s backbone at P=%d, V=%d, M=%d, U=%d: window W=%d is too "
                              "small (deadlock):%s",
                              bm_policy_name(S->t->policy), bm_backbone_name(S->t->backbone), P,
                              S->t->vpp, S->M, S->U, S->W, why);
            return BM_PLAN_STALL;
        }
        struct pick p = {S->prop_task[best], S->prop_start[best]};
        if (commit(S, best, p)) return bm_err_set(err, "out of memory planning");
    }
    return BM_OK;
}

static int take_order(struct sched *S, struct bm_order **out, struct bm_err *err)
{
    struct bm_order *o = bm_calloc(1, sizeof *o);
    if (!o) return bm_err_set(err, "out of memory planning");
    o->pp = S->P;
    o->seq = bm_calloc((size_t)S->P, sizeof *o->seq);
    o->n = bm_calloc((size_t)S->P, sizeof *o->n);
    if (!o->seq || !o->n) {
        bm_order_free(o);
        return bm_err_set(err, "out of memory planning");
    }
    for (int r = 0; r < S->P; r++) {
        o->seq[r] = S->out[r].v;
        o->n[r] = S->out[r].n;
        S->out[r].v = NULL;
    }
    *out = o;
    return BM_OK;
}

/* ---------------------------------------------------------------- unified / none */

static int build_fused(const struct bm_graph *g, struct bm_order **out, struct bm_err *err)
{
    struct sched S;
    int rc = sched_init(&S, g, 0, err);
    if (rc) {
        sched_free(&S);
        return rc;
    }
    int P = S.P;
    for (int r = 0; r < P && rc == 0; r++) {
        for (int i = 0; i < S.bbn[r] && rc == 0; i++) {
            int b = S.bbseq[r][i];
            const struct bm_task *x = &g->task[b];
            int first = x->chunk == 0, last = x->chunk == g->C - 1;
            if (x->pass == BM_PASS_F && first)
                for (int j = 0; j < S.n_topo && !rc; j++) {
                    int k = S.topo[j];
                    if (g->t->modules[g->nested_module[k]].role == BM_ROLE_ENCODER)
                        rc = ivec_push(&S.out[r], bm_task_nested(g, k, BM_PASS_F, x->mb));
                }
            rc = rc || ivec_push(&S.out[r], b);
            if (x->pass == BM_PASS_F && last) {
                for (int j = 0; j < S.n_topo && !rc; j++) {
                    int k = S.topo[j];
                    if (g->t->modules[g->nested_module[k]].role == BM_ROLE_GENERATOR)
                        rc = ivec_push(&S.out[r], bm_task_nested(g, k, BM_PASS_F, x->mb));
                }
                for (int j = S.n_topo - 1; j >= 0 && !rc; j--) {
                    int k = S.topo[j];
                    if (g->t->modules[g->nested_module[k]].role == BM_ROLE_GENERATOR)
                        rc = ivec_push(&S.out[r], bm_task_nested(g, k, BM_PASS_B, x->mb));
                }
            }
            if (x->pass == BM_PASS_B && first)
                for (int j = S.n_topo - 1; j >= 0 && !rc; j--) {
                    int k = S.topo[j];
                    if (g->t->modules[g->nested_module[k]].role == BM_ROLE_ENCODER)
                        rc = ivec_push(&S.out[r], bm_task_nested(g, k, BM_PASS_B, x->mb));
                }
        }
    }
    if (rc) rc = bm_err_set(err, "out of memory planning");
    if (!rc) rc = take_order(&S, out, err);
    sched_free(&S);
    return rc;
}

/* ---------------------------------------------------------------- entry */

static int nest_order(const struct bm_graph *g, int window, int drain_level, int *drain_used,
                      struct bm_order **out, struct bm_err *err)
{
    *out = NULL;
    enum bm_policy pol = g->t->policy;
    struct sched S;
    int rc = sched_init(&S, g, window, err);
    S.drain_level = drain_level;
    S.drain_used = 0;
    if (!rc) rc = run(&S, err);
    if (drain_used) *drain_used = S.drain_used;
    if (!rc) rc = take_order(&S, out, err);
    sched_free(&S);
    if (!rc) { /* gap refinement: optimus within its blocks, bigmac and ideal anywhere */
        rc = bm_refine_gaps(g, *out, pol != BM_POL_OPTIMUS, err);
        if (rc) {
            bm_order_free(*out);
            *out = NULL;
        }
    }
    return rc;
}

int bm_nest_fill(const struct bm_graph *g, int window, int drain_level, int *drain_used, struct bm_order **out,
                 struct bm_err *err)
{
    *out = NULL;
    if (drain_used) *drain_used = 0;
    enum bm_policy pol = g->t->policy;
    if (pol == BM_POL_UNIFIED || pol == BM_POL_UNIFIED_BALANCED || pol == BM_POL_NONE)
        return build_fused(g, out, err);
    return nest_order(g, window, drain_level, drain_used, out, err);
}

int bm_nest(const struct bm_graph *g, int window, struct bm_order **out, struct bm_err *err)
{
    return bm_nest_fill(g, window, 2, NULL, out, err);
}

/* ---------------------------------------------------------------- windows that cannot plan */

/* A cycle the window closes on rank 0 (docs/planner.md "Placement search", window search): every
 * chunk-0 op runs on rank 0 in its fixed backbone order. The chunk-0 forward of microbatch m (unit
 * u) needs the encoder forward of m on its owner r, which the window (gate or column alike) holds
 * back until r's encoder backwards of its own unit u' (W own units before u) are done, and those
 * wait for every chunk-0 backward of u'. When one of those backwards comes after that forward in
 * rank 0's order, no schedule of the policy exists and the list scheduler would stall: answered
 * here in O(V·M + P·units) instead of scheduling up to the stall. Only a sure cycle answers 1;
 * anything else answers 0 and the window is planned as before; -1 (err set) when memory runs
 * out, which the planner reports like any allocation failure (never a silent fallback). */
int bm_nest_window_stalls(const struct bm_graph *g, int window, struct bm_err *err)
{
    const struct bm_table *t = g->t;
    if (t->policy != BM_POL_BIGMAC && t->policy != BM_POL_IDEAL) return 0;
    int P = t->pp, M = t->microbatches, U = t->unit > 0 ? t->unit : t->pp, K = g->n_nested;
    int n_units = (M + U - 1) / U, len = bm_backbone_n_steps(t->backbone, t->vpp, M);
    if (window < 1 || K == 0 || len <= 0) return 0;
    struct bm_bb_step *steps = bm_malloc((size_t)len * sizeof *steps);
    int *last_b = bm_malloc((size_t)n_units * sizeof(int));
    int *idx = bm_calloc((size_t)P * (size_t)(n_units + 1), sizeof(int));
    int *list = bm_malloc((size_t)P * (size_t)n_units * sizeof(int));
    char *work = bm_calloc((size_t)K * (size_t)P * (size_t)n_units, 1); /* [(k*P + r)*units + u] */
    int stalls = 0;
    struct bm_err e2;
    if (!steps || !last_b || !idx || !list || !work) {
        stalls = -1;
        bm_err_set(err, "out of memory checking window %d", window);
        goto done;
    }
    if (bm_backbone_order(t->backbone, P, t->vpp, M, 0, t->warmup_extra, steps, &e2)) {
        stalls = -1;
        bm_err_set(err, "%s", e2.msg);
        goto done;
    }
    for (int k = 0; k < K; k++) {
        if (t->modules[g->nested_module[k]].role != BM_ROLE_ENCODER) continue;
        for (int m = 0; m < M; m++)
            work[((size_t)k * P + (size_t)g->task[bm_task_nested(g, k, BM_PASS_F, m)].rank) * n_units + m / U] = 1;
    }
    for (int r = 0; r < P; r++) { /* r's own units, as the scheduler counts them */
        int n = 0;
        for (int u = 0; u < n_units; u++) {
            idx[(size_t)r * (n_units + 1) + u] = n;
            int own = 0;
            for (int k = 0; k < K && !own; k++) own = work[((size_t)k * P + r) * n_units + u];
            if (own) list[(size_t)r * n_units + n++] = u;
        }
        idx[(size_t)r * (n_units + 1) + n_units] = n;
    }
    for (int u = 0; u < n_units; u++) last_b[u] = -1;
    for (int i = 0; i < len; i++)
        if (steps[i].chunk == 0 && steps[i].pass == BM_PASS_B) last_b[steps[i].mb / U] = i;
    for (int i = 0; i < len && !stalls; i++) {
        if (steps[i].chunk != 0 || steps[i].pass != BM_PASS_F) continue;
        int m = steps[i].mb, u = m / U;
        const struct bm_task *x = &g->task[bm_task_bb(g, 0, BM_PASS_F, m)];
        for (int e = 0; e < x->npred && !stalls; e++) {
            const struct bm_task *p = &g->task[g->pred[x->pred0 + e].task];
            if (p->chunk >= 0 || p->pass != BM_PASS_F) continue;
            int k = g->nested_slot[p->module], r = p->rank;
            if (t->modules[p->module].role != BM_ROLE_ENCODER) continue;
            int j = idx[(size_t)r * (n_units + 1) + u] - window;
            if (j < 0) continue;
            int up = list[(size_t)r * n_units + j];
            stalls = work[((size_t)k * P + r) * n_units + up] && last_b[up] > i;
        }
    }
done:
    bm_free(steps);
    bm_free(last_b);
    bm_free(idx);
    bm_free(list);
    bm_free(work);
    return stalls;
}
