/* table.c — the operator table in memory: creation, ops, tensor interning, action strings. */
#include <stdio.h>
#include <string.h>

#include "spec/split.h"
#include "table/flow.h"
#include "table/priv.h"
#include "spec/knobs.h"
#include "table/table.h"
#include "util/util.h"

/* ---------------------------------------------------------------- tensor name hash */

static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ULL;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h;
}

static int tindex_rebuild(struct bm_table *t, int cap)
{
    struct bm_table_private *p = t->priv;
    int *slot = bm_calloc((size_t)cap, sizeof *slot);
    if (!slot) return -1;
    bm_free(p->index_slot);
    p->index_slot = slot;
    p->index_cap = cap;
    for (int i = 0; i < t->n_tensors; i++) {
        uint64_t h = hash_str(t->tensors[i].name) & (uint64_t)(cap - 1);
        while (slot[h]) h = (h + 1) & (uint64_t)(cap - 1);
        slot[h] = i + 1;
    }
    return 0;
}

int bm_table_find_tensor(const struct bm_table *t, const char *name)
{
    const struct bm_table_private *p = t->priv;
    if (!p->index_cap) return -1;
    uint64_t h = hash_str(name) & (uint64_t)(p->index_cap - 1);
    while (p->index_slot[h]) {
        int i = p->index_slot[h] - 1;
        if (!strcmp(t->tensors[i].name, name)) return i;
        h = (h + 1) & (uint64_t)(p->index_cap - 1);
    }
    return -1;
}

int bm_table_tensor(struct bm_table *t, const char *name, int module, int grad)
{
    int i = bm_table_find_tensor(t, name);
    if (i >= 0) return i;
    struct bm_table_private *p = t->priv;
    if ((t->n_tensors + 1) * 2 > p->index_cap)
        if (tindex_rebuild(t, p->index_cap ? p->index_cap * 2 : 64)) return -1;
    if (p->tensors_at != t->tensors) p->room_tensors = t->n_tensors; /* a list the program gave */
    if (bm_grow(&t->tensors, &p->room_tensors, t->n_tensors + 1, sizeof *t->tensors)) return -1;
    p->tensors_at = t->tensors;
    char *copy = bm_strdup(name);
    if (!copy) return -1;
    i = t->n_tensors++;
    t->tensors[i] = (struct bm_tensor){copy, module, grad};
    uint64_t h = hash_str(name) & (uint64_t)(p->index_cap - 1);
    while (p->index_slot[h]) h = (h + 1) & (uint64_t)(p->index_cap - 1);
    p->index_slot[h] = i + 1;
    return i;
}

/* ---------------------------------------------------------------- table */

struct bm_table *bm_table_new(int pp)
{
    struct bm_table *t = bm_calloc(1, sizeof *t);
    if (!t) return NULL;
    size_t n = (size_t)(pp > 0 ? pp : 1);
    t->pp = pp;
    t->ranks = bm_calloc(n, sizeof *t->ranks);
    t->priv = bm_calloc(1, sizeof *t->priv);
    if (!t->ranks || !t->priv || !(t->priv->rank = bm_calloc(n, sizeof *t->priv->rank))) {
        bm_free(t->ranks);
        bm_free(t->priv);
        bm_free(t);
        return NULL;
    }
    t->priv->n_ranks = (int)n;
    t->backbone_module = -1;
    t->dp = 1;
    return t;
}

static void free_strv(char **v, int n)
{
    for (int i = 0; i < n; i++) bm_free(v[i]);
    bm_free(v);
}

void bm_table_free(struct bm_table *t)
{
    if (!t) return;
    for (int r = 0; r < t->pp; r++) bm_free(t->ranks[r].ops);
    bm_free(t->ranks);
    for (int i = 0; i < t->n_modules; i++) {
        struct bm_table_module *m = &t->modules[i];
        bm_free(m->name);
        free_strv(m->consumes, m->n_consumes);
        free_strv(m->produces, m->n_produces);
    }
    bm_free(t->modules);
    for (int i = 0; i < t->n_tensors; i++) bm_free(t->tensors[i].name);
    bm_free(t->tensors);
    bm_free(t->chunk_layers);
    bm_free(t->chunk_rank);
    if (t->priv) {
        bm_free(t->priv->rank);
        bm_free(t->priv->index_slot);
        bm_flow_free(t->priv->flow);
        bm_free(t->priv);
    }
    bm_free(t);
}

int bm_table_room(const struct bm_table *t, int rank)
{
    const struct bm_table_private *p = t->priv;
    const struct bm_rank_ops *r = &t->ranks[rank];
    if (rank < p->n_ranks && p->rank[rank].ops == r->ops && p->rank[rank].room >= r->n_ops) return p->rank[rank].room;
    return r->n_ops; /* a list the program gave the rank: as long as it is */
}

int bm_table_reserve(struct bm_table *t, int rank, long n, struct bm_err *err)
{
    struct bm_rank_ops *r = &t->ranks[rank];
    if (n > 0x7fffffffL) n = 0x7fffffffL;
    int room = bm_table_room(t, rank);
    if (n <= room) return BM_OK;
    struct bm_op *q = bm_realloc(r->ops, (size_t)n * sizeof *q);
    if (!q) return bm_err_set(err, "out of memory growing rank %d's op list (%ld ops)", rank, n);
    r->ops = q;
    if (rank < t->priv->n_ranks) t->priv->rank[rank] = (struct bm_table_room){q, (int)n};
    return BM_OK;
}

void bm_table_set_ops(struct bm_table *t, int rank, struct bm_op *ops, int n_ops, int room)
{
    bm_free(t->ranks[rank].ops);
    t->ranks[rank] = (struct bm_rank_ops){ops, n_ops};
    if (rank < t->priv->n_ranks) t->priv->rank[rank] = (struct bm_table_room){ops, room};
}

int bm_table_push(struct bm_table *t, int rank, struct bm_op op, struct bm_err *err)
{
    struct bm_rank_ops *r = &t->ranks[rank];
    int room = bm_table_room(t, rank);
    if (r->n_ops >= room) {
        int grown = room;
        if (bm_grow(&r->ops, &grown, r->n_ops + 1, sizeof *r->ops))
            return bm_err_set(err, "out of memory growing rank %d's op list (%d ops)", rank, r->n_ops);
        if (rank < t->priv->n_ranks) t->priv->rank[rank] = (struct bm_table_room){r->ops, grown};
    }
    r->ops[r->n_ops++] = op;
    return BM_OK;
}

long bm_table_n_ops(const struct bm_table *t)
{
    long n = 0;
    for (int r = 0; r < t->pp; r++) n += t->ranks[r].n_ops;
    return n;
}

int bm_table_find_module(const struct bm_table *t, const char *name)
{
    for (int i = 0; i < t->n_modules; i++)
        if (!strcmp(t->modules[i].name, name)) return i;
    return -1;
}

int bm_table_splits(const struct bm_table *t, int module)
{
    if (bm_backbone_splits(t->backbone) && (module < 0 || module == t->backbone_module) &&
        bm_table_has_pass(t, t->backbone_module, BM_PASS_W)) /* a frozen backbone has no W */
        return 1;
    for (int r = 0; r < t->pp; r++)
        for (int i = 0; i < t->ranks[r].n_ops; i++) {
            const struct bm_op *op = &t->ranks[r].ops[i];
            if (op->kind == BM_OP_COMPUTE && op->pass == BM_PASS_W && (module < 0 || op->module == module))
                return 1;
        }
    return 0;
}

void bm_table_split_flags(const struct bm_table *t, char *out)
{
    for (int m = 0; m < t->n_modules; m++)
        out[m] = m == t->backbone_module && bm_backbone_splits(t->backbone) && bm_table_has_pass(t, m, BM_PASS_W);
    for (int r = 0; r < t->pp; r++)
        for (int i = 0; i < t->ranks[r].n_ops; i++) {
            const struct bm_op *op = &t->ranks[r].ops[i];
            if (op->kind == BM_OP_COMPUTE && op->pass == BM_PASS_W && op->module >= 0 && op->module < t->n_modules)
                out[op->module] = 1;
        }
}

void bm_op_format(const struct bm_table *t, const struct bm_op *op, char *buf, size_t n)
{
    if (op->kind == BM_OP_COMPUTE) {
        const char *pass = bm_pass_name((enum bm_pass)op->pass);
        /* PyTorch's grammar: a zero-bubble backbone's B is the input-gradient half, "I" */
        if (op->chunk >= 0 && op->pass == BM_PASS_B && bm_backbone_splits(t->backbone)) pass = "I";
        if (op->chunk >= 0)
            snprintf(buf, n, "%d%s%d", op->chunk, pass, op->mb);
        else
            snprintf(buf, n, "%s:%s%d",
                     op->module >= 0 && op->module < t->n_modules ? t->modules[op->module].name : "?",
                     pass, op->mb);
        return;
    }
    const char *tn = op->tensor >= 0 && op->tensor < t->n_tensors ? t->tensors[op->tensor].name : "?";
    int grad = op->tensor >= 0 && op->tensor < t->n_tensors && t->tensors[op->tensor].grad;
    if (op->kind == BM_OP_SEND)
        snprintf(buf, n, "SEND_%c:%s:%d>%d", grad ? 'B' : 'F', tn, op->mb, op->peer);
    else
        snprintf(buf, n, "RECV_%c:%s:%d<%d", grad ? 'B' : 'F', tn, op->mb, op->peer);
}

/* ---------------------------------------------------------------- field lists of the writers */

int bm_table_device_fields(const struct bm_device *d, int ranks_per_host, int csv, struct bm_field *out, int n)
{
    struct bm_device dev = *d;
    dev.ranks_per_host = ranks_per_host; /* the placement is the table's */
    int k = 0;
    for (int i = 0; i < bm_n_knobs && k < n; i++) {
        const struct bm_knob *kn = &bm_knobs[i];
        if (kn->home == BM_KNOB_DEVICE && !strcmp(kn->section, "device") &&
            bm_knob_written(csv ? kn->csv : kn->json, kn, &dev))
            out[k++] = (struct bm_field){kn->key, bm_knob_device_value(kn, &dev)};
    }
    return k;
}

int bm_table_overhead_fields(const struct bm_costs *c, int csv, struct bm_field *out, int n)
{
    int k = 0;
    for (int i = 0; i < bm_n_knobs && k < n; i++) {
        const struct bm_knob *kn = &bm_knobs[i];
        if (kn->home != BM_KNOB_OVERHEAD || (csv ? kn->csv : kn->json) != BM_KNOB_IF_POSITIVE) continue;
        double ms = *(const double *)(const void *)((const char *)c + kn->costs_off);
        if (ms > 0) out[k++] = (struct bm_field){kn->key, ms * 1000.0};
    }
    return k;
}

int bm_table_cost_fields(const struct bm_cost *k, double spread, int frozen, int split, int csv, struct bm_field *out,
                         int n)
{
    int m = 0;
    for (int i = 0; i < bm_n_knobs && m < n; i++) {
        const struct bm_knob *kn = &bm_knobs[i];
        if (strcmp(kn->section, "cost")) continue;
        double v = kn->home == BM_KNOB_SPREAD ? spread : *(const double *)(const void *)((const char *)k + kn->off);
        switch (csv ? kn->csv : kn->json) {
        case BM_KNOB_ALWAYS: break;
        case BM_KNOB_IF_SPLIT:
            /* only tables with a split backward (or a frozen module, whose input-gradient-only
             * backward costs bwd_ms - w_ms) carry them, resolved (0 = the default, spec/split.h) */
            if (!split && !frozen) continue;
            if (kn->off == offsetof(struct bm_cost, w_ms)) v = bm_cost_w_ms(k);
            else if (kn->off == offsetof(struct bm_cost, act_w_mib)) v = bm_cost_act_w_frac(k) * k->act_mib;
            break;
        case BM_KNOB_BY_OWN_CODE: /* cost.spread: absent = 0; cost.param_mib: absent = state_mib / 4 (sim/step.h) */
            if (kn->home == BM_KNOB_SPREAD ? !(v > 0) : v == k->state_mib / 4) continue;
            break;
        default: continue;
        }
        out[m++] = (struct bm_field){kn->key, v};
    }
    return m;
}

int bm_table_chunk_rank(const struct bm_table *t, int c)
{
    if (t->chunk_rank && c >= 0 && c < t->pp * t->vpp) return t->chunk_rank[c];
    return bm_backbone_chunk_rank(t->backbone, t->pp, c);
}
