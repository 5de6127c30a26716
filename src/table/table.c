/* table.c — the operator table in memory: creation, ops, tensor interning, action strings. */
#include <stdio.h>
#include <string.h>

#include "spec/split.h"
#include "table/flow.h"
#include "spec/knobs.h"
#include "table/table.h"
#include "util/util.h"

/* ---------------------------------------------------------------- tensor name hash */

struct tindex {
    int cap;     /* power of two */
    int *slot;   /* tensor index + 1; 0 = empty */
};

static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ULL;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h;
}

static int tindex_rebuild(struct bm_table *t, int cap)
{
    int *slot = bm_calloc((size_t)cap, sizeof *slot);
    if (!slot) return -1;
    struct tindex *ix = t->tensor_index;
    if (!ix) {
        ix = bm_calloc(1, sizeof *ix);
        if (!ix) {
            bm_free(slot);
            return -1;
        }
        t->tensor_index = ix;
    }
    bm_free(ix->slot);
    ix->slot = slot;
    ix->cap = cap;
    for (int i = 0; i < t->n_tensors; i++) {
        uint64_t h = hash_str(t->tensors[i].name) & (uint64_t)(cap - 1);
        while (slot[h]) h = (h + 1) & (uint64_t)(cap - 1);
        slot[h] = i + 1;
    }
    return 0;
}

int bm_table_find_tensor(const struct bm_table *t, const char *name)
{
    const struct tindex *ix = t->tensor_index;
    if (!ix) return -1;
    uint64_t h = hash_str(name) & (uint64_t)(ix->cap - 1);
    while (ix->slot[h]) {
        int i = ix->slot[h] - 1;
        if (!strcmp(t->tensors[i].name, name)) return i;
        h = (h + 1) & (uint64_t)(ix->cap - 1);
    }
    return -1;
}

int bm_table_tensor(struct bm_table *t, const char *name, int module, int grad)
{
    int i = bm_table_find_tensor(t, name);
    if (i >= 0) return i;
    struct tindex *ix = t->tensor_index;
    if (!ix || (t->n_tensors + 1) * 2 > ix->cap)
        if (tindex_rebuild(t, ix ? ix->cap * 2 : 64)) return -1;
    if (bm_grow(&t->tensors, &t->cap_tensors, t->n_tensors + 1, sizeof *t->tensors)) return -1;
    char *copy = bm_strdup(name);
    if (!copy) return -1;
    i = t->n_tensors++;
    t->tensors[i] = (struct bm_tensor){copy, module, grad};
    ix = t->tensor_index;
    uint64_t h = hash_str(name) & (uint64_t)(ix->cap - 1);
    while (ix->slot[h]) h = (h + 1) & (uint64_t)(ix->cap - 1);
    ix->slot[h] = i + 1;
    return i;
}

/* ---------------------------------------------------------------- table */

struct bm_table *bm_table_new(int pp)
{
    struct bm_table *t = bm_calloc(1, sizeof *t);
    if (!t) return NULL;
    t->pp = pp;
    t->ranks = bm_calloc((size_t)(pp > 0 ? pp : 1), sizeof *t->ranks);
    if (!t->ranks) {
        bm_free(t);
        return NULL;
    }
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
    if (t->tensor_index) bm_free(((struct tindex *)t->tensor_index)->slot);
    bm_free(t->tensor_index);
    bm_free(t->chunk_layers);
    bm_free(t->chunk_rank);
    bm_flow_free(t->flow);
    bm_free(t);
}

int bm_table_push(struct bm_table *t, int rank, struct bm_op op, struct bm_err *err)
{
    struct bm_rank_ops *r = &t->ranks[rank];
    if (bm_grow(&r->ops, &r->cap, r->n_ops + 1, sizeof *r->ops))
        return bm_err_set(err, "out of memory growing rank %d's op list (%d ops)", rank, r->n_ops);
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

int bm_table_cost_fields(const struct bm_cost *k, int frozen, int split, struct bm_field out[7])
{
    int n = 0;
    out[n++] = (struct bm_field){"fwd_ms", k->fwd_ms};
    out[n++] = (struct bm_field){"bwd_ms", k->bwd_ms};
    out[n++] = (struct bm_field){"act_mib", k->act_mib};
    out[n++] = (struct bm_field){"state_mib", k->state_mib};
    out[n++] = (struct bm_field){"out_mib", k->out_mib};
    if (split || frozen) { /* only tables with a split backward (or a frozen module, whose
                            * input-gradient-only backward costs bwd_ms - w_ms) carry them */
        out[n++] = (struct bm_field){"w_ms", bm_cost_w_ms(k)};
        out[n++] = (struct bm_field){"act_w_mib", bm_cost_act_w_frac(k) * k->act_mib};
    }
    return n;
}

int bm_table_chunk_rank(const struct bm_table *t, int c)
{
    if (t->chunk_rank && c >= 0 && c < t->pp * t->vpp) return t->chunk_rank[c];
    return bm_backbone_chunk_rank(t->backbone, t->pp, c);
}
