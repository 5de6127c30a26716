/* lower.c — turn each rank's compute order into an executable op list: a recv right before
 * the first op on the rank that needs a tensor made elsewhere, a send right after the op that
 * makes it, one per destination rank (docs/design.md §4: sends are non-blocking, recvs block). */
#include <string.h>

#include "plan/plan.h"
#include "util/util.h"

static int task_id_of(const struct bm_graph *g, int module, int chunk, int pass, int mb)
{
    if (chunk >= 0) return bm_task_bb(g, chunk, pass, mb);
    return bm_task_nested(g, g->nested_slot[module], pass, mb);
}

/* Rank r's list while lowering it: bm_table_push without the call in the common case, a store
 * into room reserved up front (room: the list's, bm_table_room). */
struct lw {
    struct bm_table *t;
    int r, room;
};

static inline int push(struct lw *w, struct bm_op op, struct bm_err *err)
{
    struct bm_rank_ops *ro = &w->t->ranks[w->r];
    if (ro->n_ops < w->room) {
        ro->ops[ro->n_ops++] = op;
        return BM_OK;
    }
    if (bm_table_push(w->t, w->r, op, err)) return BM_ERR;
    w->room = bm_table_room(w->t, w->r);
    return BM_OK;
}

static int push_compute(struct lw *w, const struct bm_task *x, struct bm_err *err)
{
    struct bm_op op = {BM_OP_COMPUTE, (uint8_t)x->pass, x->module, x->chunk, x->mb, -1, -1};
    return push(w, op, err);
}

int bm_lower(struct bm_table *t, const struct bm_graph *g, const struct bm_order *o,
             struct bm_err *err)
{
    const struct bm_flow *f = g->flow;
    long nbits = (long)t->n_tensors * t->microbatches;
    unsigned char *have = bm_malloc((size_t)(nbits / 8 + 1));
    int *dests = bm_malloc((size_t)(t->pp + 1) * sizeof(int));
    uint8_t *has = bm_malloc((size_t)(t->n_modules > 0 ? t->n_modules : 1) * 3); /* [module*3+pass] */
    if (!have || !dests || !has) {
        bm_free(have);
        bm_free(dests);
        bm_free(has);
        return bm_err_set(err, "out of memory lowering the plan");
    }
    for (int m = 0; m < t->n_modules; m++)
        for (int p = 0; p < 3; p++) has[m * 3 + p] = (uint8_t)bm_table_has_pass(t, m, p);
#define HAS(x) has[(x)->module * 3 + (x)->pass]
    int rc = BM_OK;
    for (int r = 0; r < t->pp && !rc; r++) {
        memset(have, 0, (size_t)(nbits / 8 + 1));
        /* room for its compute ops and, per op, a recv and a send (more grow as they come) */
        rc = bm_table_reserve(t, r, t->ranks[r].n_ops + 3L * o->n[r], err);
        struct lw w = {t, r, rc ? 0 : bm_table_room(t, r)};
        for (int i = 0; i < o->n[r] && !rc; i++) {
            const struct bm_task *x = &g->task[o->seq[r][i]];
            if (!HAS(x)) continue; /* frozen: no such op */
            if (x->pass == BM_PASS_W) { /* weight gradient: needs and makes nothing that travels */
                rc = push_compute(&w, x, err);
                continue;
            }
            const struct bm_flow_op *fo = bm_flow_get(f, x->module, x->chunk, x->pass);
            /* receive what this op needs from other ranks, unless already here */
            for (int k = 0; k < fo->n_needs && !rc; k++) {
                int tn = fo->needs[k];
                long bit = (long)tn * t->microbatches + x->mb;
                if (have[bit >> 3] & (1u << (bit & 7))) continue;
                int pm, pc, pp;
                if (bm_flow_producer(f, tn, &pm, &pc, &pp)) continue;
                int src = g->task[task_id_of(g, pm, pc, pp, x->mb)].rank;
                if (src == r) continue;
                struct bm_op op = {BM_OP_RECV, 0, (int16_t)pm, -1, x->mb, src, tn};
                rc = push(&w, op, err);
                have[bit >> 3] |= (unsigned char)(1u << (bit & 7));
            }
            if (rc) break;
            rc = push_compute(&w, x, err);
            /* send what it makes to every other rank that consumes it */
            for (int k = 0; k < fo->n_makes && !rc; k++) {
                int tn = fo->makes[k];
                int nd = 0;
                for (int e = 0; e < x->nsucc; e++) {
                    const struct bm_task *s = &g->task[g->succ[x->succ0 + e].task];
                    if (s->rank == r || !HAS(s)) continue;
                    const struct bm_flow_op *so = bm_flow_get(f, s->module, s->chunk, s->pass);
                    int needs = 0;
                    for (int q = 0; q < so->n_needs; q++) needs |= so->needs[q] == tn;
                    if (!needs) continue;
                    int dup = 0;
                    for (int q = 0; q < nd; q++) dup |= dests[q] == s->rank;
                    if (!dup) dests[nd++] = s->rank;
                }
                /* ascending destination order keeps tables stable across runs */
                for (int a = 1; a < nd; a++)
                    for (int b2 = a; b2 > 0 && dests[b2 - 1] > dests[b2]; b2--) {
                        int tmp = dests[b2];
                        dests[b2] = dests[b2 - 1];
                        dests[b2 - 1] = tmp;
                    }
                for (int q = 0; q < nd && !rc; q++) {
                    struct bm_op op = {BM_OP_SEND, 0, x->module, -1, x->mb, dests[q], tn};
                    rc = push(&w, op, err);
                }
                long bit = (long)tn * t->microbatches + x->mb;
                have[bit >> 3] |= (unsigned char)(1u << (bit & 7));
            }
        }
    }
#undef HAS
    bm_free(have);
    bm_free(dests);
    bm_free(has);
    return rc;
}

int bm_plan_lower_loaded(struct bm_table *t, int *lowered, struct bm_err *err)
{
    *lowered = 0;
    long n_compute = 0;
    for (int r = 0; r < t->pp; r++)
        for (int i = 0; i < t->ranks[r].n_ops; i++) {
            if (t->ranks[r].ops[i].kind != BM_OP_COMPUTE) return BM_OK; /* taken as written */
            n_compute++;
        }
    if (bm_table_check_ops(t, "add sends and receives", err)) return BM_ERR;
    if (!bm_table_flow(t) && bm_table_finish(t, err)) return BM_ERR;
    struct bm_graph *g = NULL;
    if (bm_graph_build(t, NULL, 0, &g, err)) return BM_ERR; /* no costs: the file gave the places */
    struct bm_order o = {t->pp, bm_calloc((size_t)t->pp, sizeof(int *)), bm_calloc((size_t)t->pp, sizeof(int))};
    unsigned char *seen = bm_calloc((size_t)g->n_tasks + 1, 1);
    char a[BM_MAX_NAME + 64];
    int rc = BM_OK;
    if (!o.seq || !o.n || !seen) rc = bm_err_set(err, "out of memory adding sends and receives");
    for (int r = 0; r < t->pp && !rc; r++) {
        if (!(o.seq[r] = bm_malloc((size_t)(t->ranks[r].n_ops + 1) * sizeof(int)))) {
            rc = bm_err_set(err, "out of memory adding sends and receives");
            break;
        }
        for (int i = 0; i < t->ranks[r].n_ops && !rc; i++) {
            const struct bm_op *op = &t->ranks[r].ops[i];
            int id = -1;
            if (op->module == t->backbone_module) {
                if (op->pass < g->np) id = bm_task_bb(g, op->chunk, op->pass, op->mb);
            } else if (g->nested_slot[op->module] >= 0 && op->pass != BM_PASS_W) {
                id = bm_task_nested(g, g->nested_slot[op->module], op->pass, op->mb);
            }
            bm_op_format(t, op, a, sizeof a);
            if (id < 0)
                rc = bm_err_set(err, "cannot add sends and receives: rank %d op #%d %s is no op of this table's "
                                     "iteration (%s)", r, i, a,
                                op->module == t->backbone_module ? "a W, but the backbone schedule does not split backwards"
                                : op->pass == BM_PASS_W ? "bigmac keeps encoder and generator backwards whole"
                                                        : "the policy keeps no work of this module");
            else if (seen[id])
                rc = bm_err_set(err, "cannot add sends and receives: rank %d op #%d %s appears a second time", r, i, a);
            if (rc) break;
            seen[id] = 1;
            g->task[id].rank = r; /* where the file runs it */
            o.seq[r][o.n[r]++] = id;
        }
    }
    for (int id = 0; id < g->n_tasks && !rc; id++)
        if (!seen[id]) {
            const struct bm_task *x = &g->task[id];
            struct bm_op op = {BM_OP_COMPUTE, (uint8_t)x->pass, x->module, x->chunk, x->mb, -1, -1};
            bm_op_format(t, &op, a, sizeof a);
            rc = bm_err_set(err, "cannot add sends and receives: %s is in no row (every op of the iteration runs once)", a);
        }
    if (!rc) {
        for (int r = 0; r < t->pp; r++) t->ranks[r].n_ops = 0;
        rc = bm_lower(t, g, &o, err);
        *lowered = !rc && n_compute > 0;
    }
    for (int r = 0; o.seq && r < t->pp; r++) bm_free(o.seq[r]);
    bm_free(o.seq);
    bm_free(o.n);
    bm_free(seen);
    bm_graph_free(g);
    return rc;
}
