/* flow.c — per-op needs/makes tensors from the module graph (see flow.h). */
#include <stdio.h>
#include <string.h>

#include "table/flow.h"
#include "table/priv.h"
#include "util/util.h"

/* Name -> index of the extra tensors (bm_flow.extra_index). */
struct xindex {
    int cap;     /* power of two */
    int *slot;   /* extra index + 1; 0 = empty */
};

int bm_flow_grad_flows(const struct bm_table *t, int x, int y)
{
    const struct bm_table_module *my = &t->modules[y];
    if (my->role == BM_ROLE_GENERATOR && !my->grad_to_backbone &&
        t->modules[x].role != BM_ROLE_GENERATOR)
        return 0;
    return 1;
}

/* Index of the module producing 'name', or -1 (a spec input or unknown). */
static int producer_of(const struct bm_table *t, const char *name)
{
    for (int i = 0; i < t->n_modules; i++)
        for (int k = 0; k < t->modules[i].n_produces; k++)
            if (!strcmp(t->modules[i].produces[k], name)) return i;
    return -1;
}

static int slot(const struct bm_flow *f, int module, int chunk, int pass)
{
    /* backbone: n_modules*2 + chunk*2 + pass after the per-module slots */
    if (module == f->backbone) return f->n_modules * 2 + chunk * 2 + pass;
    return module * 2 + pass;
}

const struct bm_flow_op *bm_flow_get(const struct bm_flow *f, int module, int chunk, int pass)
{
    if (module < 0 || module >= f->n_modules || pass < 0 || pass > 1) return NULL;
    if (module == f->backbone && (chunk < 0 || chunk >= f->n_chunks)) return NULL;
    return &f->ops[slot(f, module, chunk, pass)];
}

void bm_flow_free(struct bm_flow *f)
{
    if (!f) return;
    int n = f->ops ? f->n_modules * 2 + f->n_chunks * 2 : 0;
    for (int i = 0; i < n; i++) {
        bm_free(f->ops[i].needs);
        bm_free(f->ops[i].makes);
    }
    bm_free(f->ops);
    bm_free(f->producer);
    for (int i = 0; i < f->n_tensors - f->n_table; i++) bm_free(f->extra[i].name);
    bm_free(f->extra);
    if (f->extra_index) bm_free(((struct xindex *)f->extra_index)->slot);
    bm_free(f->extra_index);
    bm_free(f->parts[0]);
    bm_free(f->parts[1]);
    bm_free(f);
}

static int add(int **v, int *n, int x)
{
    for (int i = 0; i < *n; i++)
        if ((*v)[i] == x) return 0;
    int *q = bm_realloc(*v, (size_t)(*n + 1) * sizeof **v);
    if (!q) return -1;
    q[(*n)++] = x;
    *v = q;
    return 0;
}

/* ---------------------------------------------------------------- tensors the table lacks */

static uint64_t hash_name(const char *s)
{
    uint64_t h = 1469598103934665603ULL;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h;
}

/* Slot of 'name' in the extra index (an empty one when absent). */
static int *xslot(struct bm_flow *f, const char *name)
{
    struct xindex *ix = f->extra_index;
    uint64_t h = hash_name(name) & (uint64_t)(ix->cap - 1);
    while (ix->slot[h] && strcmp(f->extra[ix->slot[h] - 1].name, name)) h = (h + 1) & (uint64_t)(ix->cap - 1);
    return &ix->slot[h];
}

static int xindex_grow(struct bm_flow *f)
{
    struct xindex *ix = f->extra_index;
    int n = f->n_tensors - f->n_table, cap = ix ? ix->cap : 0;
    if (ix && (n + 1) * 2 <= cap) return 0;
    int *slot = bm_calloc((size_t)(cap ? cap * 2 : 64), sizeof *slot);
    if (!slot) return -1;
    if (!ix && !(ix = f->extra_index = bm_calloc(1, sizeof *ix))) {
        bm_free(slot);
        return -1;
    }
    bm_free(ix->slot);
    ix->slot = slot;
    ix->cap = cap ? cap * 2 : 64;
    for (int i = 0; i < n; i++) *xslot(f, f->extra[i].name) = i + 1;
    return 0;
}

/* Index of tensor 'name': the table's when it lists it, else an extra one (added when new).
 * -1 on allocation failure. */
static int intern(struct bm_flow *f, const struct bm_table *t, const char *name, int module, int grad)
{
    int i = bm_table_find_tensor(t, name);
    if (i >= 0) return i;
    if (f->extra_index) {
        int k = *xslot(f, name);
        if (k) return f->n_table + k - 1;
    }
    int n = f->n_tensors - f->n_table;
    if (xindex_grow(f) || bm_grow(&f->extra, &f->cap_extra, n + 1, sizeof *f->extra)) return -1;
    char *copy = bm_strdup(name);
    if (!copy) return -1;
    f->extra[n] = (struct bm_tensor){copy, module, grad};
    *xslot(f, copy) = n + 1;
    return f->n_tensors++;
}

/* The tensor of module's 'name' (its gradient when grad; 'consumer' names the module a
 * gradient comes from when several consumers send one back, NULL otherwise). */
static int tensor(struct bm_flow *f, const struct bm_table *t, const char *name, int grad, int module,
                  const char *consumer)
{
    char buf[2 * BM_MAX_NAME + 8];
    snprintf(buf, sizeof buf, "%s%s%s%s", grad ? "grad:" : "", name, consumer ? "@" : "", consumer ? consumer : "");
    return intern(f, t, buf, module, grad);
}

/* How many modules consume tensor 'name' (made by x) and send a gradient back to x. */
static int grad_consumers(const struct bm_table *t, const char *name, int x)
{
    int n = 0;
    for (int y = 0; y < t->n_modules; y++)
        for (int k = 0; k < t->modules[y].n_consumes; k++)
            if (!strcmp(t->modules[y].consumes[k], name) && bm_flow_grad_flows(t, x, y)) n++;
    return n;
}

/* Chunk 0's encoder parts (its F's needs, its B's makes) in spec module order, into f->parts. */
static int order_parts(struct bm_flow *f, const struct bm_table *t)
{
    for (int pass = 0; pass < 2; pass++) {
        const struct bm_flow_op *o = &f->ops[slot(f, f->backbone, 0, pass)];
        int n = pass ? o->n_makes : o->n_needs;
        const int *v = pass ? o->makes : o->needs;
        if (!(f->parts[pass] = bm_malloc((size_t)(n ? n : 1) * sizeof(int)))) return -1;
        f->n_parts[pass] = n;
        for (int i = 0; i < n; i++) { /* insertion sort (stable): a handful of tensors */
            int j = i, x = v[i], mx = bm_flow_tensor(f, t, x)->module;
            for (; j > 0 && bm_flow_tensor(f, t, f->parts[pass][j - 1])->module > mx; j--)
                f->parts[pass][j] = f->parts[pass][j - 1];
            f->parts[pass][j] = x;
        }
    }
    return 0;
}

int bm_flow_build(const struct bm_table *t, struct bm_flow **out, struct bm_err *err)
{
    *out = NULL;
    int bb = t->backbone_module;
    if (bb < 0 || bb >= t->n_modules) return bm_err_set(err, "table has no backbone module");
    int C = t->pp * t->vpp;
    struct bm_flow *f = bm_calloc(1, sizeof *f);
    if (!f) goto oom;
    f->n_modules = t->n_modules;
    f->n_chunks = C;
    f->backbone = bb;
    f->n_table = f->n_tensors = t->n_tensors;
    f->ops = bm_calloc((size_t)(t->n_modules * 2 + C * 2), sizeof *f->ops);
    if (!f->ops) goto oom;
    const char *bbname = t->modules[bb].name;
    char name[BM_MAX_NAME + 32];

    /* Backbone chunk hand-offs. */
    for (int c = 0; c + 1 < C; c++) {
        snprintf(name, sizeof name, "%s.c%d.out", bbname, c);
        int a = tensor(f, t, name, 0, bb, NULL), g = tensor(f, t, name, 1, bb, NULL);
        if (a < 0 || g < 0) goto oom;
        if (add(&f->ops[slot(f, bb, c, 0)].makes, &f->ops[slot(f, bb, c, 0)].n_makes, a) ||
            add(&f->ops[slot(f, bb, c + 1, 0)].needs, &f->ops[slot(f, bb, c + 1, 0)].n_needs, a) ||
            add(&f->ops[slot(f, bb, c + 1, 1)].makes, &f->ops[slot(f, bb, c + 1, 1)].n_makes, g) ||
            add(&f->ops[slot(f, bb, c, 1)].needs, &f->ops[slot(f, bb, c, 1)].n_needs, g))
            goto oom;
    }

    /* Module-to-module edges through named tensors. */
    for (int y = 0; y < t->n_modules; y++) {
        const struct bm_table_module *my = &t->modules[y];
        for (int k = 0; k < my->n_consumes; k++) {
            int x = producer_of(t, my->consumes[k]);
            if (x < 0) continue; /* a data input */
            int a = tensor(f, t, my->consumes[k], 0, x, NULL);
            if (a < 0) goto oom;
            int xf = x == bb ? slot(f, bb, C - 1, 0) : slot(f, x, -1, 0);
            int xb = x == bb ? slot(f, bb, C - 1, 1) : slot(f, x, -1, 1);
            int yf = y == bb ? slot(f, bb, 0, 0) : slot(f, y, -1, 0);
            int yb = y == bb ? slot(f, bb, 0, 1) : slot(f, y, -1, 1);
            if (add(&f->ops[xf].makes, &f->ops[xf].n_makes, a) ||
                add(&f->ops[yf].needs, &f->ops[yf].n_needs, a))
                goto oom;
            if (bm_flow_grad_flows(t, x, y)) {
                /* one gradient tensor per consumer when several send one back (each has one
                 * producer; the producer's backward sums them) */
                int shared = grad_consumers(t, my->consumes[k], x) > 1;
                int g = tensor(f, t, my->consumes[k], 1, x, shared ? my->name : NULL);
                if (g < 0) goto oom;
                if (add(&f->ops[yb].makes, &f->ops[yb].n_makes, g) ||
                    add(&f->ops[xb].needs, &f->ops[xb].n_needs, g))
                    goto oom;
            }
        }
    }

    /* Reverse map: tensor -> producing op. */
    f->producer = bm_malloc((size_t)(f->n_tensors > 0 ? f->n_tensors : 1) * 3 * sizeof(int));
    if (!f->producer) goto oom;
    for (int i = 0; i < f->n_tensors * 3; i++) f->producer[i] = -1;
    for (int m = 0; m < t->n_modules; m++)
        for (int c = 0; c < (m == bb ? C : 1); c++)
            for (int p = 0; p < 2; p++) {
                const struct bm_flow_op *o = &f->ops[slot(f, m, m == bb ? c : -1, p)];
                for (int i = 0; i < o->n_makes; i++) {
                    int *pr = &f->producer[o->makes[i] * 3];
                    pr[0] = m;
                    pr[1] = m == bb ? c : -1;
                    pr[2] = p;
                }
            }
    if (order_parts(f, t)) goto oom;
    *out = f;
    return BM_OK;
oom:
    bm_flow_free(f);
    return bm_err_set(err, "out of memory building the dataflow");
}

const struct bm_tensor *bm_flow_tensor(const struct bm_flow *f, const struct bm_table *t, int i)
{
    if (i < 0 || i >= f->n_tensors) return NULL;
    return i < f->n_table ? &t->tensors[i] : &f->extra[i - f->n_table];
}

int bm_flow_producer(const struct bm_flow *f, int tensor_i, int *module, int *chunk, int *pass)
{
    if (tensor_i < 0 || tensor_i >= f->n_tensors || f->producer[tensor_i * 3] < 0) return -1;
    *module = f->producer[tensor_i * 3];
    *chunk = f->producer[tensor_i * 3 + 1];
    *pass = f->producer[tensor_i * 3 + 2];
    return 0;
}

const struct bm_flow *bm_table_flow(const struct bm_table *t) { return t->priv->flow; }

int bm_table_op_flow(const struct bm_table *t, int module, int chunk, int pass, const int **needs, int *n_needs,
                     const int **makes, int *n_makes)
{
    const struct bm_flow *f = t->priv->flow;
    if (!f) return -1;
    const struct bm_flow_op *o = bm_flow_get(f, module, chunk, pass);
    if (!o) return 0;
    *needs = o->needs, *n_needs = o->n_needs;
    *makes = o->makes, *n_makes = o->n_makes;
    if (module == f->backbone && chunk == 0) { /* the encoder parts in spec module order */
        if (pass == BM_PASS_F) *needs = f->parts[0], *n_needs = f->n_parts[0];
        else *makes = f->parts[1], *n_makes = f->n_parts[1];
    }
    return 1;
}

/* Each module's backward from the frozen flags (docs/spec.md "Frozen modules"): a trainable
 * module has a full backward; a frozen one an input-gradient-only backward when a module it
 * passes gradients to (a producer of what it consumes, bm_flow_grad_flows) has a backward, so
 * that module's gradient goes through it; otherwise none. A fixed point over at most
 * n_modules rounds (the graph is acyclic). */
static void derive_backward(struct bm_table *t)
{
    int N = t->n_modules;
    for (int i = 0; i < N; i++)
        t->modules[i].backward = t->modules[i].frozen ? BM_BACKWARD_NONE : BM_BACKWARD_FULL;
    /* policy none keeps only the backbone: the modules it leaves out may train, so a frozen
     * backbone keeps its input-gradient backward there (a baseline never faster than the real
     * pipeline) */
    if (t->policy == BM_POL_NONE && t->backbone_module >= 0 && t->backbone_module < N &&
        t->modules[t->backbone_module].frozen)
        t->modules[t->backbone_module].backward = BM_BACKWARD_INPUT;
    for (int changed = 1, round = 0; changed && round <= N; round++) {
        changed = 0;
        for (int y = 0; y < N; y++) {
            struct bm_table_module *my = &t->modules[y];
            if (my->backward != BM_BACKWARD_NONE) continue;
            for (int k = 0; k < my->n_consumes && my->backward == BM_BACKWARD_NONE; k++) {
                int x = producer_of(t, my->consumes[k]);
                if (x < 0 || x == y || t->modules[x].backward == BM_BACKWARD_NONE ||
                    !bm_flow_grad_flows(t, x, y))
                    continue;
                my->backward = BM_BACKWARD_INPUT;
                changed = 1;
            }
        }
    }
}

int bm_table_backward(const struct bm_table *t, int module)
{
    if (module < 0 || module >= t->n_modules) return BM_BACKWARD_FULL;
    return t->modules[module].backward;
}

int bm_table_has_pass(const struct bm_table *t, int module, int pass)
{
    int b = bm_table_backward(t, module);
    if (pass == BM_PASS_F) return 1;
    if (pass == BM_PASS_B) return b != BM_BACKWARD_NONE;
    return b == BM_BACKWARD_FULL;
}

int bm_table_finish(struct bm_table *t, struct bm_err *err)
{
    struct bm_flow *f;
    derive_backward(t);
    if (bm_flow_build(t, &f, err)) return BM_ERR;
    /* the graph's tensors the table lacks join it in their flow order, so their indices stay */
    for (int i = f->n_table; i < f->n_tensors; i++) {
        const struct bm_tensor *x = &f->extra[i - f->n_table];
        if (bm_table_tensor(t, x->name, x->module, x->grad) != i) {
            bm_flow_free(f);
            return bm_err_set(err, "out of memory adding the dataflow's tensors to the table");
        }
    }
    for (int i = 0; i < f->n_tensors - f->n_table; i++) bm_free(f->extra[i].name);
    bm_free(f->extra);
    if (f->extra_index) bm_free(((struct xindex *)f->extra_index)->slot);
    bm_free(f->extra_index);
    f->extra = NULL;
    f->extra_index = NULL;
    f->cap_extra = 0;
    f->n_table = f->n_tensors;
    bm_flow_free(t->priv->flow);
    t->priv->flow = f;
    return BM_OK;
}
