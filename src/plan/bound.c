/* bound.c — a makespan lower bound for the work of a task graph (bm_graph_lower_bound in
 * plan.h; the proof is in docs/simulator.md "Lower bound").
 *
 * Relaxation: every rank keeps its backbone order (verifier invariant 3), nested ops have no
 * rank to wait for. heads (earliest start) and tails (longest chain after the op ends) in that
 * relaxation bound every real schedule's start times and what must follow each op. Then each
 * rank alone is a one-machine problem with release times (heads) and delivery times (tails);
 * its preemptive optimum (Jackson's rule: run the released op with the longest tail, preempt at
 * every release) is a lower bound on the makespan of any schedule, and the bound is the largest
 * over ranks. O(tasks log tasks). */
#include <math.h>
#include <string.h>

#include "plan/plan.h"
#include "util/util.h"

/* Max-heap of task ids by key. */
struct kheap {
    int *v, n;
    const double *key;
};

static void kh_push(struct kheap *h, int x)
{
    int i = h->n++;
    while (i > 0 && h->key[h->v[(i - 1) / 2]] < h->key[x]) {
        h->v[i] = h->v[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h->v[i] = x;
}

static int kh_pop(struct kheap *h)
{
    int top = h->v[0], last = h->v[--h->n], i = 0;
    for (;;) {
        int c = 2 * i + 1;
        if (c >= h->n) break;
        if (c + 1 < h->n && h->key[h->v[c + 1]] > h->key[h->v[c]]) c++;
        if (h->key[h->v[c]] <= h->key[last]) break;
        h->v[i] = h->v[c];
        i = c;
    }
    if (h->n > 0) h->v[i] = last;
    return top;
}

static void sift(int *ids, int i, int n, const double *key)
{
    for (;;) {
        int c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && key[ids[c + 1]] > key[ids[c]]) c++;
        if (key[ids[c]] <= key[ids[i]]) break;
        int tmp = ids[i];
        ids[i] = ids[c], ids[c] = tmp;
        i = c;
    }
}

void bm_sort_ids_by_key(int *ids, int n, const double *key)
{
    for (int s = n / 2 - 1; s >= 0; s--) sift(ids, s, n, key);
    for (int end = n - 1; end > 0; end--) {
        int tmp = ids[0];
        ids[0] = ids[end], ids[end] = tmp;
        sift(ids, 0, end, key);
    }
}

/* An edge's transfer time, never above the simulator's: the graph keeps it as a float rounded to
 * nearest from the cost model's double, so one float step down is at or under the double. */
static double comm_down(float c) { return c > 0 ? (double)nextafterf(c, 0.0f) : 0; }

/* Preemptive one-machine optimum of max(C + tail) with releases head: Jackson's rule. */
static double jackson(int *ids, int n, const double *head, const double *tail, const double *dur,
                      double *rem, struct kheap *h)
{
    bm_sort_ids_by_key(ids, n, head);
    double t = 0, best = 0;
    int i = 0;
    h->n = 0;
    h->key = tail;
    for (int k = 0; k < n; k++) rem[ids[k]] = dur[ids[k]];
    while (i < n || h->n > 0) {
        if (h->n == 0 && head[ids[i]] > t) t = head[ids[i]];
        while (i < n && head[ids[i]] <= t) kh_push(h, ids[i++]);
        int j = kh_pop(h);
        double next = i < n ? head[ids[i]] : BM_T_INF;
        if (t + rem[j] <= next) {
            t += rem[j];
            if (t + tail[j] > best) best = t + tail[j];
        } else {
            rem[j] -= next - t;
            t = next;
            kh_push(h, j);
        }
    }
    return best;
}

int bm_graph_lower_bound(const struct bm_graph *g, double *lb, struct bm_err *err)
{
    const struct bm_table *t = g->t;
    int N = g->n_tasks, P = t->pp, len = bm_backbone_n_steps(t->backbone, t->vpp, t->microbatches);
    size_t nz = (size_t)(N > 0 ? N : 1);
    double *head = bm_calloc(nz, sizeof(double)), *tail = bm_calloc(nz, sizeof(double));
    double *dur = bm_malloc(nz * sizeof(double)), *rem = bm_malloc(nz * sizeof(double));
    int *bb_prev = bm_malloc(nz * sizeof(int)), *bb_next = bm_malloc(nz * sizeof(int));
    int *indeg = bm_calloc(nz, sizeof(int)), *topo = bm_malloc(nz * sizeof(int));
    int *ids = bm_malloc(nz * sizeof(int)), *heapv = bm_malloc(nz * sizeof(int));
    int *rank_n = bm_calloc((size_t)P + 1, sizeof(int));
    struct bm_bb_step *steps = bm_malloc((size_t)(len > 0 ? len : 1) * sizeof *steps);
    int rc = BM_OK;
    *lb = 0;
    if (!head || !tail || !dur || !rem || !bb_prev || !bb_next || !indeg || !topo || !ids || !heapv ||
        !rank_n || !steps) {
        rc = bm_err_set(err, "out of memory computing the lower bound");
        goto done;
    }
    for (int i = 0; i < N; i++) {
        bb_prev[i] = bb_next[i] = -1;
        dur[i] = g->task[i].dur;
    }
    /* the fixed backbone order of every rank: an edge between consecutive backbone ops */
    for (int r = 0; r < P; r++) {
        if (bm_backbone_order(t->backbone, P, t->vpp, t->microbatches, r, t->warmup_extra, steps, err)) {
            rc = BM_ERR;
            goto done;
        }
        for (int i = 1; i < len; i++) {
            int a = bm_task_bb(g, steps[i - 1].chunk, steps[i - 1].pass, steps[i - 1].mb);
            int b = bm_task_bb(g, steps[i].chunk, steps[i].pass, steps[i].mb);
            bb_next[a] = b;
            bb_prev[b] = a;
        }
    }
    /* topological order of data edges + backbone-order edges (Kahn) */
    for (int i = 0; i < N; i++) indeg[i] = g->task[i].npred + (bb_prev[i] >= 0);
    int nt = 0;
    for (int i = 0; i < N; i++)
        if (indeg[i] == 0) topo[nt++] = i;
    for (int k = 0; k < nt; k++) {
        int x = topo[k];
        const struct bm_task *tx = &g->task[x];
        for (int e = 0; e < tx->nsucc; e++)
            if (--indeg[g->succ[tx->succ0 + e].task] == 0) topo[nt++] = g->succ[tx->succ0 + e].task;
        if (bb_next[x] >= 0 && --indeg[bb_next[x]] == 0) topo[nt++] = bb_next[x];
    }
    if (nt != N) { /* the planner's graphs are acyclic; a cycle would be an internal error */
        rc = bm_err_set(err, "internal: the task graph with the backbone order has a cycle");
        goto done;
    }
    for (int k = 0; k < N; k++) { /* heads: the least start times the constraints allow */
        int x = topo[k];
        const struct bm_task *tx = &g->task[x];
        double h = 0;
        for (int e = 0; e < tx->npred; e++) {
            struct bm_edge pe = g->pred[tx->pred0 + e];
            double a = head[pe.task] + dur[pe.task] + comm_down(pe.comm_ms);
            if (a > h) h = a;
        }
        if (bb_prev[x] >= 0 && head[bb_prev[x]] + dur[bb_prev[x]] > h) h = head[bb_prev[x]] + dur[bb_prev[x]];
        head[x] = h;
    }
    for (int k = N - 1; k >= 0; k--) { /* tails: the longest chain that must follow x's end */
        int x = topo[k];
        const struct bm_task *tx = &g->task[x];
        double q = 0;
        for (int e = 0; e < tx->nsucc; e++) {
            struct bm_edge se = g->succ[tx->succ0 + e];
            double a = comm_down(se.comm_ms) + dur[se.task] + tail[se.task];
            if (a > q) q = a;
        }
        if (bb_next[x] >= 0 && dur[bb_next[x]] + tail[bb_next[x]] > q) q = dur[bb_next[x]] + tail[bb_next[x]];
        tail[x] = q;
    }
    /* per rank: Jackson's preemptive schedule */
    for (int i = 0; i < N; i++) rank_n[g->task[i].rank + 1]++;
    for (int r = 0; r < P; r++) rank_n[r + 1] += rank_n[r];
    for (int i = 0; i < N; i++) ids[rank_n[g->task[i].rank]++] = i;
    struct kheap h = {heapv, 0, tail};
    for (int r = 0, from = 0; r < P; r++) {
        int to = rank_n[r];
        if (to > from) {
            double v = jackson(ids + from, to - from, head, tail, dur, rem, &h);
            if (v > *lb) *lb = v;
        }
        from = to;
    }
done:
    bm_free(head);
    bm_free(tail);
    bm_free(dur);
    bm_free(rem);
    bm_free(bb_prev);
    bm_free(bb_next);
    bm_free(indeg);
    bm_free(topo);
    bm_free(ids);
    bm_free(heapv);
    bm_free(rank_n);
    bm_free(steps);
    return rc;
}
