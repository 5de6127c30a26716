/* graph.c — the iteration's task graph: every compute op, where it runs, how long it takes
 * nominally and which ops it waits for (from the dataflow in flow.c). */
#include <string.h>

#include "plan/plan.h"
#include "sim/cost.h"
#include "sim/hosts.h"
#include "util/util.h"

/* Microbatch costs differ (data.encoder_cost_scale)? */
static int costs_vary(const struct bm_table *t, const struct bm_costs *c)
{
    for (int m = 1; c && m < t->microbatches && c->mb_scale; m++)
        if (c->mb_scale[m] != c->mb_scale[0]) return 1;
    return 0;
}

int bm_graph_pairs_by_window(const struct bm_table *t, const struct bm_costs *c)
{
    int U = t->unit > 0 ? t->unit : t->pp;
    return (t->policy == BM_POL_BIGMAC || t->policy == BM_POL_IDEAL) && U == t->pp && t->pp > 1 &&
           costs_vary(t, c);
}

/* Sort idx[0..n) by key[idx[i]], ascending (dir > 0) or descending (dir < 0); stable. */
static void sort_by_key(int *idx, int n, const double *key, int dir)
{
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && dir * (key[idx[j]] - key[idx[j - 1]]) < 0; j--) {
            int x = idx[j];
            idx[j] = idx[j - 1], idx[j - 1] = x;
        }
}

/* Which rank runs microbatch m's encoder/generator work (bigmac, ideal, optimus): m % P, except
 * for bigmac and ideal when microbatch costs differ (data.encoder_cost_scale). A unit's encoder
 * work runs as one column on every rank, so the column lasts as long as its heaviest rank's
 * share; two ways to even the shares, each keeping ceil(U/P) microbatches of a unit per rank (so
 * the window's residency bound is unchanged):
 *  - U = qP, q >= 2: each unit's microbatches go heaviest first to the rank with the least of
 *    that unit's work so far, q each (LPT);
 *  - U = P with window W (pair_window): a column pairs rank r's encoder backward of unit u with
 *    its forward of unit u+W, so unit u+W's microbatches go lightest first to the ranks whose
 *    unit-u microbatch is heaviest (anti-sorted pairs: the sums even out). Units 0..W-1 keep
 *    m % P; a last partial unit too.
 * owner[M] is filled. */
static int nested_owners(const struct bm_table *t, const struct bm_costs *c, int pair_window, int *owner)
{
    int P = t->pp, M = t->microbatches, U = t->unit > 0 ? t->unit : P;
    for (int m = 0; m < M; m++) owner[m] = m % P;
    if (pair_window > 0) { /* bm_graph_build passes one only where bm_graph_pairs_by_window */
        int *mbs = bm_malloc((size_t)P * sizeof(int)), *ranks = bm_malloc((size_t)P * sizeof(int));
        double *prev = bm_malloc((size_t)P * sizeof(double));
        if (!mbs || !ranks || !prev) {
            bm_free(mbs), bm_free(ranks), bm_free(prev);
            return -1;
        }
        for (long v = pair_window; (v + 1) * U <= M; v++) {
            long p0 = (v - pair_window) * U; /* the paired unit: its microbatches' owners are set */
            for (int i = 0; i < P; i++) prev[owner[p0 + i]] = c->mb_scale[p0 + i];
            for (int i = 0; i < P; i++) mbs[i] = (int)(v * U + i), ranks[i] = i;
            sort_by_key(mbs, P, c->mb_scale, 1); /* lightest first */
            sort_by_key(ranks, P, prev, -1);      /* heaviest paired microbatch first */
            for (int i = 0; i < P; i++) owner[mbs[i]] = ranks[i];
        }
        bm_free(mbs), bm_free(ranks), bm_free(prev);
        return 0;
    }
    if ((t->policy != BM_POL_BIGMAC && t->policy != BM_POL_IDEAL) || U % P || U < 2 * P || !costs_vary(t, c)) return 0;
    int q = U / P;
    int *order = bm_malloc((size_t)U * sizeof(int));
    double *load = bm_malloc((size_t)P * sizeof(double));
    int *count = bm_malloc((size_t)P * sizeof(int));
    if (!order || !load || !count) {
        bm_free(order), bm_free(load), bm_free(count);
        return -1;
    }
    for (int u0 = 0; u0 < M; u0 += U) {
        int n = M - u0 < U ? M - u0 : U;
        for (int i = 0; i < n; i++) order[i] = u0 + i;
        sort_by_key(order, n, c->mb_scale, -1); /* heaviest first */
        for (int r = 0; r < P; r++) load[r] = 0, count[r] = 0;
        for (int i = 0; i < n; i++) {
            int best = -1;
            for (int r = 0; r < P; r++)
                if (count[r] < q && (best < 0 || load[r] < load[best])) best = r;
            owner[order[i]] = best;
            load[best] += c->mb_scale[order[i]];
            count[best]++;
        }
    }
    bm_free(order), bm_free(load), bm_free(count);
    return 0;
}

static int task_rank(const struct bm_table *t, const int *owner, int module, int chunk, int mb)
{
    if (module == t->backbone_module) return bm_table_chunk_rank(t, chunk);
    if (t->policy == BM_POL_UNIFIED || t->policy == BM_POL_UNIFIED_BALANCED) /* fused to the first / last chunk */
        return bm_table_chunk_rank(t, t->modules[module].role == BM_ROLE_ENCODER ? 0 : t->pp * t->vpp - 1);
    return owner[mb];
}

void bm_graph_free(struct bm_graph *g)
{
    if (!g) return;
    bm_free(g->task);
    bm_free(g->hot);
    bm_free(g->pred);
    bm_free(g->succ);
    bm_free(g->nested_module);
    bm_free(g->nested_slot);
    bm_free(g);
}

/* What a task's preds are, per (chunk, pass) of the backbone and (module, pass) of the others
 * (every microbatch of one has the same producers, microbatch mb's pred being the template's
 * id + mb): the flow is looked up once per template instead of once per task, and each need's
 * transfer time is kept for the last pair of ranks it was computed for (the same pair recurs
 * for every microbatch of a backbone chunk). */
struct tpl_need {
    int pid0;        /* the producer's task id for microbatch 0 */
    int tensor;
    int src, dst;    /* the ranks comm was computed for (-1: none yet) */
    float comm;
};
struct tpl {
    int phantom;     /* a pass the module does not have (bm_table_has_pass) */
    int n, first;    /* needs[first .. first + n) */
};
struct tpls {
    struct tpl *key;        /* [C*np + 2*n_nested] */
    struct tpl_need *need;
};

static int tpl_key(const struct bm_graph *g, const struct bm_task *x)
{
    return x->chunk >= 0 ? x->chunk * g->np + x->pass : g->C * g->np + g->nested_slot[x->module] * 2 + x->pass;
}

static void tpls_free(struct tpls *T)
{
    bm_free(T->key);
    bm_free(T->need);
}

/* g's templates, from its tasks of microbatch 0 (g->M >= 1). -1 when memory runs out. */
static int tpls_build(const struct bm_graph *g, struct tpls *T)
{
    const struct bm_table *t = g->t;
    int nk = g->C * g->np + 2 * g->n_nested, cap = 0, n = 0;
    T->need = NULL;
    T->key = bm_calloc((size_t)(nk > 0 ? nk : 1), sizeof *T->key);
    if (!T->key) return -1;
    for (int k = 0; k < nk; k++) {
        const struct bm_task *x = &g->task[k < g->C * g->np ? bm_task_bb(g, k / g->np, k % g->np, 0)
                                                             : bm_task_nested(g, (k - g->C * g->np) / 2, k % 2, 0)];
        struct tpl *tp = &T->key[tpl_key(g, x)];
        tp->first = n;
        if (x->pass == BM_PASS_W) continue; /* its own B only (for_preds) */
        const struct bm_flow_op *fo = bm_flow_get(g->flow, x->module, x->chunk, x->pass);
        tp->phantom = !bm_table_has_pass(t, x->module, x->pass);
        for (int i = 0; i < fo->n_needs; i++) {
            int pm, pc, pp;
            if (bm_flow_producer(g->flow, fo->needs[i], &pm, &pc, &pp)) continue;
            if (bm_grow(&T->need, &cap, n + 1, sizeof *T->need)) return -1;
            int pid0 = pm == t->backbone_module ? bm_task_bb(g, pc, pp, 0) : bm_task_nested(g, g->nested_slot[pm], pp, 0);
            T->need[n++] = (struct tpl_need){pid0, fo->needs[i], -1, -1, 0.0f};
            tp->n++;
        }
    }
    return 0;
}

/* Preds of task (module, chunk, pass, mb): producers of its needs, and its own F for a B.
 * Writes each (pred task, comm_ms) to out; returns the count. */
static int for_preds(const struct bm_graph *g, struct tpls *T, int id, struct bm_edge *out)
{
    const struct bm_table *t = g->t;
    const struct bm_task *x = &g->task[id];
    if (x->pass == BM_PASS_W) { /* a weight gradient needs only its own B, on the same rank */
        out[0] = (struct bm_edge){bm_task_bb(g, x->chunk, BM_PASS_B, x->mb), 0.0f};
        return 1;
    }
    const struct tpl *tp = &T->key[tpl_key(g, x)];
    /* a pass a frozen module does not have (bm_table_has_pass) stays in the graph as a task of
     * no time whose edges carry nothing, so the policies' rules keep their shape; bm_lower
     * leaves it out of the table */
    int phantom = tp->phantom;
    int n = 0;
    for (int i = 0; i < tp->n; i++) {
        struct tpl_need *nd = &T->need[tp->first + i];
        int pid = nd->pid0 + x->mb;
        int src = g->task[pid].rank;
        if (src != x->rank && !phantom && g->c && (nd->src != src || nd->dst != x->rank)) {
            nd->src = src, nd->dst = x->rank;
            nd->comm = (float)bm_cost_transfer_ms(t, g->c, nd->tensor, src, x->rank);
        }
        float comm = src != x->rank && !phantom && g->c ? nd->comm : 0.0f;
        int dup = 0;
        for (int j = 0; j < n; j++)
            if (out[j].task == pid) {
                if (comm > out[j].comm_ms) out[j].comm_ms = comm;
                dup = 1;
            }
        if (!dup) out[n++] = (struct bm_edge){pid, comm};
    }
    if (x->pass == BM_PASS_B) {
        int fid = x->chunk >= 0 ? bm_task_bb(g, x->chunk, BM_PASS_F, x->mb)
                                : bm_task_nested(g, g->nested_slot[x->module], BM_PASS_F, x->mb);
        int dup = 0;
        for (int j = 0; j < n; j++) dup |= out[j].task == fid;
        if (!dup) out[n++] = (struct bm_edge){fid, 0.0f};
    }
    return n;
}

int bm_graph_build(const struct bm_table *t, const struct bm_costs *c, int pair_window, struct bm_graph **out,
                   struct bm_err *err)
{
    *out = NULL;
    const struct bm_flow *flow = bm_table_flow(t);
    if (!flow) return bm_err_set(err, "plan: the table has no dataflow (bm_table_finish)");
    int *owner = NULL; /* [M] rank of each microbatch's encoder/generator work */
    struct bm_graph *g = bm_calloc(1, sizeof *g);
    if (!g) goto oom;
    g->t = t;
    g->c = c;
    g->flow = flow;
    g->C = t->pp * t->vpp;
    g->M = t->microbatches;
    g->nested_module = bm_calloc((size_t)t->n_modules, sizeof(int));
    g->nested_slot = bm_calloc((size_t)t->n_modules, sizeof(int));
    if (!g->nested_module || !g->nested_slot) goto oom;
    for (int i = 0; i < t->n_modules; i++) {
        g->nested_slot[i] = -1;
        if (i != t->backbone_module) {
            g->nested_slot[i] = g->n_nested;
            g->nested_module[g->n_nested++] = i;
        }
    }
    g->np = bm_backbone_splits(t->backbone) ? 3 : 2;
    long n = (long)g->M * ((long)g->np * g->C + 2L * g->n_nested);
    if (n > 200000000L) {
        bm_graph_free(g);
        return bm_err_set(err, "plan too large: %ld compute ops (limit 200 million)", n);
    }
    g->n_tasks = (int)n;
    g->task = bm_calloc((size_t)n, sizeof *g->task);
    owner = bm_malloc((size_t)(g->M > 0 ? g->M : 1) * sizeof *owner);
    g->pair_window = pair_window > 0 && bm_graph_pairs_by_window(t, c) ? pair_window : 0;
    if (!g->task || !owner || nested_owners(t, c, g->pair_window, owner)) goto oom;
    for (int c = 0; c < g->C; c++)
        for (int p = 0; p < g->np; p++)
            for (int m = 0; m < g->M; m++) {
                struct bm_task *x = &g->task[bm_task_bb(g, c, p, m)];
                x->module = (int16_t)t->backbone_module;
                x->pass = (int8_t)p;
                x->chunk = c;
                x->mb = m;
                x->rank = task_rank(t, owner, t->backbone_module, c, m);
                struct bm_op op = {BM_OP_COMPUTE, (uint8_t)p, x->module, c, m, -1, -1};
                x->dur = g->c ? bm_cost_compute_ms(t, g->c, &op, g->np == 3) * bm_cost_rank_scale(t, g->c, x->rank) : 0;
            }
    for (int k = 0; k < g->n_nested; k++) {
        int mod = g->nested_module[k];
        for (int p = 0; p < 2; p++)
            for (int m = 0; m < g->M; m++) {
                struct bm_task *x = &g->task[bm_task_nested(g, k, p, m)];
                x->module = (int16_t)mod;
                x->pass = (int8_t)p;
                x->chunk = -1;
                x->mb = m;
                x->rank = task_rank(t, owner, mod, -1, m);
                struct bm_op op = {BM_OP_COMPUTE, (uint8_t)p, (int16_t)mod, -1, m, -1, -1};
                x->dur = g->c ? bm_cost_compute_ms(t, g->c, &op, 0) * bm_cost_rank_scale(t, g->c, x->rank) : 0;
            }
    }
    /* Edges in CSR form: the predecessors in one pass (into one block sized for every task's
     * most: its template's needs and its own F), then the successors from them. */
    long np = 0, most = 0;
    struct tpls T = {NULL, NULL};
    if (g->M > 0 && tpls_build(g, &T)) {
        tpls_free(&T);
        goto oom;
    }
    for (int i = 0; i < g->n_tasks; i++) most += T.key[tpl_key(g, &g->task[i])].n + 1;
    if (!(g->pred = bm_malloc((size_t)(most > 0 ? most : 1) * sizeof *g->pred))) {
        tpls_free(&T);
        goto oom;
    }
    for (int i = 0; i < g->n_tasks; i++) {
        int k = for_preds(g, &T, i, g->pred + np);
        g->task[i].pred0 = (int32_t)np;
        g->task[i].npred = k;
        np += k;
    }
    tpls_free(&T);
    g->succ = bm_malloc((size_t)(np ? np : 1) * sizeof *g->succ);
    if (!g->succ) goto oom;
    for (int i = 0; i < g->n_tasks; i++) g->task[i].nsucc = 0;
    for (long e = 0; e < np; e++) g->task[g->pred[e].task].nsucc++;
    long s = 0;
    for (int i = 0; i < g->n_tasks; i++) {
        g->task[i].succ0 = (int32_t)s;
        s += g->task[i].nsucc;
        g->task[i].nsucc = 0;
    }
    for (int i = 0; i < g->n_tasks; i++)
        for (int e = 0; e < g->task[i].npred; e++) {
            struct bm_edge pe = g->pred[g->task[i].pred0 + e];
            struct bm_task *p = &g->task[pe.task];
            g->succ[p->succ0 + p->nsucc++] = (struct bm_edge){i, pe.comm_ms};
        }
    if (!(g->hot = bm_malloc((size_t)(g->n_tasks > 0 ? g->n_tasks : 1) * sizeof *g->hot))) goto oom;
    for (int i = 0; i < g->n_tasks; i++)
        g->hot[i] = (struct bm_task_hot){g->task[i].dur, g->task[i].pred0, g->task[i].npred};
    bm_free(owner);
    *out = g;
    return BM_OK;
oom:
    bm_free(owner);
    bm_graph_free(g);
    return bm_err_set(err, "out of memory building the task graph");
}

int bm_graph_repair(struct bm_graph *g, int pair_window, struct bm_err *err)
{
    const struct bm_table *t = g->t;
    pair_window = pair_window > 0 && bm_graph_pairs_by_window(t, g->c) ? pair_window : 0;
    if (pair_window == g->pair_window) return BM_OK;
    int *owner = bm_malloc((size_t)(g->M > 0 ? g->M : 1) * sizeof *owner);
    struct tpls T = {NULL, NULL}; /* (they do not depend on ranks) */
    if (!owner || nested_owners(t, g->c, pair_window, owner) || (g->M > 0 && tpls_build(g, &T))) {
        bm_free(owner);
        tpls_free(&T);
        return bm_err_set(err, "out of memory re-pairing the task graph");
    }
    g->pair_window = pair_window;
    int first_nested = bm_task_nested(g, 0, 0, 0); /* after every backbone task (np passes each) */
    for (int i = first_nested; i < g->n_tasks; i++) { /* nested tasks: new rank, its speed */
        struct bm_task *x = &g->task[i];
        x->rank = task_rank(t, owner, x->module, -1, x->mb);
        struct bm_op op = {BM_OP_COMPUTE, (uint8_t)x->pass, x->module, -1, x->mb, -1, -1};
        x->dur = g->c ? bm_cost_compute_ms(t, g->c, &op, 0) * bm_cost_rank_scale(t, g->c, x->rank) : 0;
        g->hot[i].dur = x->dur;
    }
    bm_free(owner);
    /* Edge counts do not depend on ranks, only transfer times do: redo the pred lists of the
     * tasks that touch a nested task (same slots), then the succ lists' copies. */
    for (int i = 0; i < g->n_tasks; i++) {
        const struct bm_task *x = &g->task[i];
        int touch = i >= first_nested;
        for (int e = 0; e < x->npred && !touch; e++) touch = g->pred[x->pred0 + e].task >= first_nested;
        if (touch) for_preds(g, &T, i, g->pred + x->pred0);
    }
    tpls_free(&T);
    for (int i = 0; i < g->n_tasks; i++) g->task[i].nsucc = 0;
    for (int i = 0; i < g->n_tasks; i++)
        for (int e = 0; e < g->task[i].npred; e++) {
            struct bm_edge pe = g->pred[g->task[i].pred0 + e];
            struct bm_task *p = &g->task[pe.task];
            g->succ[p->succ0 + p->nsucc++] = (struct bm_edge){i, pe.comm_ms};
        }
    return BM_OK;
}

void bm_order_free(struct bm_order *o)
{
    if (!o) return;
    for (int r = 0; r < o->pp; r++) bm_free(o->seq ? o->seq[r] : NULL);
    bm_free(o->seq);
    bm_free(o->n);
    bm_free(o);
}

/* Each rank runs its sequence until an op's input is not done yet, then parks on that input and
 * is woken when it finishes: every task and edge is visited once, O(tasks + edges). Reads the
 * tasks' hot part only (struct bm_task_hot); nested tasks are the ids from first_nested on. A
 * task not done yet has finish -1 (times are >= 0), so no separate "done" array is read. */
static int order_times(const struct bm_graph *g, const struct bm_order *o, double *start,
                       double *finish, double *makespan, int backbone_only, struct bm_err *err)
{
    int P = o->pp, N = g->n_tasks, sp = 0;
    int *pos = bm_calloc((size_t)P, sizeof *pos);
    int *stack = bm_malloc((size_t)P * sizeof *stack);
    int *wait_next = bm_malloc((size_t)P * sizeof *wait_next);
    double *free_at = bm_calloc((size_t)P, sizeof *free_at);
    int *wait_head = bm_malloc((size_t)(N > 0 ? N : 1) * sizeof *wait_head);
    if (!pos || !stack || !wait_next || !free_at || !wait_head) {
        bm_free(pos);
        bm_free(stack);
        bm_free(wait_next);
        bm_free(free_at);
        bm_free(wait_head);
        return bm_err_set(err, "out of memory timing the plan");
    }
    for (int i = 0; i < N; i++) wait_head[i] = -1, finish[i] = -1;
    long remaining = 0;
    const int first_nested = bm_task_nested(g, 0, 0, 0);
    for (int r = 0; r < P; r++) {
        remaining += o->n[r];
        stack[sp++] = P - 1 - r;
    }
    double end = 0;
    while (sp > 0) {
        int r = stack[--sp];
        double tf = free_at[r];
        while (pos[r] < o->n[r]) {
            int id = o->seq[r][pos[r]];
            const struct bm_task_hot *x = &g->hot[id];
            double ready = tf;
            int blocked = -1;
            for (int e = 0; e < x->npred; e++) {
                struct bm_edge pe = g->pred[x->pred0 + e];
                if (backbone_only && pe.task >= first_nested) continue;
                if (finish[pe.task] < 0) { /* not done */
                    blocked = pe.task;
                    break;
                }
                if (finish[pe.task] + pe.comm_ms > ready) ready = finish[pe.task] + pe.comm_ms;
            }
            if (blocked >= 0) {
                wait_next[r] = wait_head[blocked];
                wait_head[blocked] = r;
                break;
            }
            start[id] = ready;
            finish[id] = tf = ready + x->dur;
            if (tf > end) end = tf;
            pos[r]++;
            remaining--;
            for (int q = wait_head[id]; q >= 0; q = wait_next[q]) stack[sp++] = q;
            wait_head[id] = -1;
        }
        free_at[r] = tf;
    }
    bm_free(pos);
    bm_free(stack);
    bm_free(wait_next);
    bm_free(free_at);
    bm_free(wait_head);
    if (remaining > 0) {
        bm_err_set(err, "internal: the planned order deadlocks");
        return BM_PLAN_STALL;
    }
    if (makespan) *makespan = end;
    return BM_OK;
}

int bm_order_times(const struct bm_graph *g, const struct bm_order *o, double *start,
                   double *finish, double *makespan, struct bm_err *err)
{
    return order_times(g, o, start, finish, makespan, 0, err);
}

int bm_order_times_backbone(const struct bm_graph *g, const struct bm_order *o, double *start,
                            double *finish, struct bm_err *err)
{
    return order_times(g, o, start, finish, NULL, 1, err);
}
