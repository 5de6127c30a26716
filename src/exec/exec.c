/* exec.c — one pipeline rank's op walker: module instances, the tensor and activation stores,
 * the walk of the rank's op list with non-blocking sends and early-posted recvs, measured op
 * times and live bytes (see exec.h). */
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "data/data.h"
#include "exec/exec.h"
#include "nn/nn.h"
#include "table/flow.h"
#include "table/table.h"
#include "train/train.h"
#include "util/util.h"

/* A module instance: a replica of an encoder/generator or one backbone chunk. */
struct inst {
    int module, chunk;               /* chunk: global, -1 for non-backbone */
    const struct bm_module_ops *ops;
    void *self;
    float *opt;                      /* AdamW m then v of the shard [lo, hi): 2 * (hi - lo) floats
                                      * (NULL for a frozen module: no optimizer state at all) */
    size_t n;                        /* parameters */
    size_t lo, hi;                   /* the shard this rank updates: [0, n) unless ZeRO-1 */
    int parts;                       /* ZeRO-1: the ranks the state is sharded over (1: whole) */
};

/* A tensor of one microbatch on this rank: produced locally or received. */
struct entry {
    float *data;
    size_t count;
    int uses;      /* local consumers + sends still to come */
    int ready;     /* data valid (produced, or the recv completed) */
    long req;      /* pending recv request (-1 none) */
};

struct pending_send {
    long req;
    int key;       /* tensor * M + mb */
};

struct bm_exec {
    const struct bm_spec *s;
    const struct bm_table *t;
    const struct bm_flow *flow; /* the table's (bm_table_finish) */
    struct bm_flow_op c0[2];    /* backbone chunk 0's F and B with the encoder parts in spec
                                 * module order (flow->parts), as the module takes them */
    struct bm_comm *comm;
    struct bm_train_opts o;
    int rank, P, V, M, n_ops;
    int mb0;             /* this replica's first global microbatch: replica * M (docs/design.md §2) */
    float loss_scale;    /* 1 / (D * M): the step's loss is the mean over every replica's microbatches */
    char rname[64];      /* how messages name this rank (bm_comm_rank_name) */
    const struct bm_op *ops;
    struct bm_data_cfg dcfg;

    struct inst *inst;   /* replicas (spec module order, not the backbone), then local chunks */
    int n_inst;
    int *inst_of;        /* [n_modules + P*V]: module -> instance, n_modules + chunk -> instance */

    int *uses0;          /* [n_tensors * M] static use counts of (tensor, mb) on this rank */
    int *recv_consumer;  /* [n_ops] for recvs: index of the local compute op that consumes it */
    struct entry *store; /* [n_tensors * M] */
    void **ctx;          /* [n_inst * M] live contexts */
    void **wctx;         /* [n_inst * M] split backward: what W needs, kept from B to W */
    char *split;         /* [n_modules] the module's backward is split in the table (B, then W) */
    struct bm_data_batch **data; /* [M] this step's microbatches (the ones the rank touches) */
    struct pending_send *sends;
    int n_sends, cap_sends;

    long step;
    int pc;
    double origin, t_begin;
    double clock_offset; /* seconds to add to bm_now() to read rank 0's clock */
    double *lm, *gen;    /* [M] */
    double *mb_pend;     /* [M] latest recv end of the microbatch since its last compute op */
    double *mb_last;     /* [M] end of the microbatch's last compute op on this rank */
    size_t live[BM_N_ROLES], peak[BM_N_ROLES];
    double *times;       /* [n_ops * 3] */
    double *mem;         /* [cap_mem * 4] */
    int n_mem, cap_mem;
    size_t *op_bytes;    /* [n_ops] */
    size_t *op_in_bytes; /* [n_ops] a recomputed forward: the bytes of the input it keeps */
    double *msg_bytes;   /* [n_ops] a send's or recv's message bytes */
    float **rc_in;       /* [n_inst * M] recomputed modules: the kept input (NULL when empty) */
    size_t *rc_n;        /* [n_inst * M] its floats */
    uint8_t *rc_held;    /* [n_inst * M] 1 between a recomputed forward and its backward */
    double ms;
    double tail[3];      /* the step after the walk: sync start, sync end, optimizer ms (run.c) */
    struct bm_exec_coll *colls; /* [2 * n_inst] this step's collectives (run.c) */
    int n_colls;
    int *last_bwd;       /* [n_inst] the rank's op of the instance's last backward (B or W); -1: none */
    bm_exec_op_hook hook; /* called after each op of the walk (run.c: the overlapped collectives) */
    void *hook_arg;
};

static int role_of(const struct bm_exec *x, int module) { return (int)x->t->modules[module].role; }

static void op_name(const struct bm_table *t, const struct bm_op *op, char *buf, size_t n)
{
    if (op->kind == BM_OP_COMPUTE) {
        const char *mn = op->module >= 0 && op->module < t->n_modules ? t->modules[op->module].name : "?";
        if (op->chunk >= 0)
            snprintf(buf, n, "%s:%s chunk %d mb %d", mn, bm_pass_name((enum bm_pass)op->pass), op->chunk, op->mb);
        else
            snprintf(buf, n, "%s:%s mb %d", mn, bm_pass_name((enum bm_pass)op->pass), op->mb);
    } else {
        bm_op_format(t, op, buf, n);
    }
}

/* A failure of op k while walking a step: "rank R: op #K NAME, step N: <err's message>" (the
 * rank as bm_comm_rank_name says it; N 1-based, as the progress lines count), so a non-finite
 * number or a timeout says when as well as where. */
static int op_fail(const struct bm_exec *x, int k, struct bm_err *err)
{
    char name[BM_MAX_NAME + 64], msg[sizeof err->msg];
    op_name(x->t, &x->ops[k], name, sizeof name);
    snprintf(msg, sizeof msg, "%s", err->msg);
    return bm_err_set(err, "%s: op #%d %s, step %ld: %s", x->rname, k, name, x->step + 1, msg);
}

/* ---------------------------------------------------------------- build */

int bm_exec_n_inst(const struct bm_exec *x) { return x->n_inst; }

void bm_exec_inst(const struct bm_exec *x, int i, int *module, int *chunk, int *replicated)
{
    *module = x->inst[i].module;
    *chunk = x->inst[i].chunk;
    *replicated = x->inst[i].chunk < 0;
}

int bm_exec_inst_frozen(const struct bm_exec *x, int i) { return x->s->modules[x->inst[i].module].frozen; }
float *bm_exec_inst_params(struct bm_exec *x, int i, size_t *n) { return x->inst[i].ops->params(x->inst[i].self, n); }
float *bm_exec_inst_grads(struct bm_exec *x, int i, size_t *n) { return x->inst[i].ops->grads(x->inst[i].self, n); }
float *bm_exec_inst_moments(struct bm_exec *x, int i, size_t *n)
{
    *n = x->inst[i].hi - x->inst[i].lo;
    return x->inst[i].opt;
}

int bm_exec_inst_shard(const struct bm_exec *x, int i, size_t *lo, size_t *hi)
{
    *lo = x->inst[i].lo, *hi = x->inst[i].hi;
    return x->inst[i].parts;
}
const double *bm_exec_losses_lm(const struct bm_exec *x) { return x->lm; }
const double *bm_exec_losses_gen(const struct bm_exec *x) { return x->gen; }
const size_t *bm_exec_op_bytes(const struct bm_exec *x) { return x->op_bytes; }
const size_t *bm_exec_op_in_bytes(const struct bm_exec *x) { return x->op_in_bytes; }
const double *bm_exec_msg_bytes(const struct bm_exec *x) { return x->msg_bytes; }

void bm_exec_stats(const struct bm_exec *x, struct bm_exec_rank_stats *st)
{
    memcpy(st->peak_act, x->peak, sizeof x->peak);
    st->ms = x->ms;
    st->sync_start_ms = x->tail[0], st->sync_end_ms = x->tail[1], st->optimizer_ms = x->tail[2];
}

const double *bm_exec_op_times(const struct bm_exec *x, int *n_ops)
{
    *n_ops = x->n_ops;
    return x->times;
}

const double *bm_exec_mem_trace(const struct bm_exec *x, int *n_points)
{
    *n_points = x->n_mem;
    return x->mem;
}

/* Layers [a, b) of global chunk c. */
static int chunk_range(const struct bm_exec *x, int c, int *a, int *b, struct bm_err *err)
{
    const struct bm_module *m = &x->s->modules[x->s->backbone_module];
    int C = x->P * x->V, L = m->arch.layers, acc = 0;
    if (x->t->chunk_layers) {
        for (int i = 0; i < c; i++) acc += x->t->chunk_layers[i];
        *a = acc, *b = acc + x->t->chunk_layers[c];
        int total = 0;
        for (int i = 0; i < C; i++) total += x->t->chunk_layers[i];
        if (total != L)
            return bm_err_set(err, "the table splits %d backbone layers over its chunks, the model has %d", total, L);
    } else {
        *a = (int)((long)c * L / C), *b = (int)((long)(c + 1) * L / C);
    }
    if (*b <= *a)
        return bm_err_set(err, "backbone chunk %d gets no layer (%d layers over %d chunks)\n"
                               "hint: use fewer chunks (--pp/--vpp) or more layers", c, L, C);
    return BM_OK;
}

static int make_inst(struct bm_exec *x, int module, int chunk, struct bm_err *err)
{
    const struct bm_module *m = &x->s->modules[module];
    struct inst *in = &x->inst[x->n_inst];
    in->module = module, in->chunk = chunk;
    if (!m->impl)
        return bm_err_set(err, "module \"%s\" has no \"impl\": nothing to train\n"
                               "hint: add \"impl\": \"vit\" / \"gpt\" / \"dit\" (or a registered one) and an \"arch\"",
                          m->name);
    in->ops = bm_module_find(m->impl);
    if (!in->ops) return bm_err_set(err, "module \"%s\": unknown impl \"%s\"\nhint: built-in: vit, gpt, dit", m->name, m->impl);
    if (in->ops->role != m->role)
        return bm_err_set(err, "module \"%s\": impl \"%s\" is a %s, the module a %s", m->name, m->impl,
                          bm_role_name(in->ops->role), bm_role_name(m->role));
    int a = 0, b = 0;
    if (chunk >= 0 && chunk_range(x, chunk, &a, &b, err)) return BM_ERR;
    if (in->ops->create(m, x->s, a, b, bm_train_module_seed(x->s, module), &in->self, err)) return BM_ERR;
    x->n_inst++;
    in->ops->params(in->self, &in->n);
    /* The optimizer state this rank keeps (docs/simulator.md "The step"): none for a frozen
     * module; under ZeRO-1 the k-th of 'parts' slices [n*k/parts, n*(k+1)/parts) of the copies'
     * group (a replicated module: every rank of the job, k the global rank; a backbone chunk:
     * its D replicas, k the replica); else the whole. */
    in->parts = 1, in->lo = 0, in->hi = in->n;
    if (m->frozen) {
        in->hi = 0;
    } else if (x->t->zero) {
        int parts = chunk < 0 ? x->comm->world : x->comm->dp;
        int k = chunk < 0 ? bm_comm_global(x->comm, x->rank) : x->comm->replica;
        if (parts > 1) {
            in->parts = parts;
            in->lo = in->n * (size_t)k / (size_t)parts, in->hi = in->n * (size_t)(k + 1) / (size_t)parts;
        }
    }
    if (in->hi > in->lo) {
        in->opt = bm_calloc(2 * (in->hi - in->lo), sizeof(float));
        if (!in->opt) return bm_err_set(err, "out of memory for the optimizer state of \"%s\"", m->name);
    }
    return BM_OK;
}

void bm_exec_free(struct bm_exec *x)
{
    if (!x) return;
    if (x->store) {
        for (int i = 0; i < x->t->n_tensors * x->M; i++) bm_free(x->store[i].data);
        bm_free(x->store);
    }
    if (x->ctx)
        for (int i = 0; i < x->n_inst * x->M; i++)
            if (x->ctx[i]) x->inst[i / x->M].ops->ctx_free(x->ctx[i]);
    bm_free(x->ctx);
    if (x->rc_in)
        for (int i = 0; i < x->n_inst * x->M; i++) bm_free(x->rc_in[i]);
    bm_free(x->rc_in), bm_free(x->rc_n), bm_free(x->rc_held), bm_free(x->op_in_bytes), bm_free(x->msg_bytes);
    if (x->wctx)
        for (int i = 0; i < x->n_inst * x->M; i++)
            if (x->wctx[i]) x->inst[i / x->M].ops->wctx_free(x->wctx[i]);
    bm_free(x->wctx);
    bm_free(x->split);
    for (int i = 0; i < x->n_inst; i++) {
        x->inst[i].ops->free(x->inst[i].self);
        bm_free(x->inst[i].opt);
    }
    if (x->data)
        for (int m = 0; m < x->M; m++) bm_data_batch_free(x->data[m]);
    bm_free(x->data);
    bm_free(x->inst), bm_free(x->inst_of), bm_free(x->uses0), bm_free(x->recv_consumer);
    bm_free(x->sends), bm_free(x->lm), bm_free(x->gen), bm_free(x->times), bm_free(x->mem), bm_free(x->colls);
    bm_free(x->last_bwd);
    bm_free(x->op_bytes), bm_free(x->mb_pend), bm_free(x->mb_last);
    bm_free(x);
}

/* The instance running compute op op. */
static struct inst *inst_for(const struct bm_exec *x, const struct bm_op *op)
{
    int k = op->chunk >= 0 ? x->inst_of[x->t->n_modules + op->chunk] : x->inst_of[op->module];
    return k >= 0 ? &x->inst[k] : NULL;
}

static const struct bm_flow_op *flow_of(const struct bm_exec *x, const struct bm_op *op)
{
    int pass = op->pass == BM_PASS_F ? 0 : 1;
    if (op->module == x->t->backbone_module && op->chunk == 0) return &x->c0[pass];
    return bm_flow_get(x->flow, op->module, op->module == x->t->backbone_module ? op->chunk : -1, pass);
}

/* Backbone chunk 0 takes one tensor per encoder: its F needs every encoder's output, its B makes
 * every encoder's gradient. The module sees them as ONE tensor, the parts one after another in
 * spec module order (include/bigmac_module.h): the flow's parts lists (x->c0). Any other side
 * with several tensors is refused here. */
static int order_encoder_parts(struct bm_exec *x, struct bm_err *err)
{
    const struct bm_table *t = x->t;
    for (int pass = 0; pass < 2; pass++) {
        const struct bm_flow_op *f = bm_flow_get(x->flow, t->backbone_module, 0, pass);
        int n = pass ? f->n_makes : f->n_needs;
        const int *v = pass ? f->makes : f->needs;
        for (int i = 0; i < n && n > 1; i++) {
            const struct bm_tensor *ti = &t->tensors[v[i]];
            if (ti->module < 0 || ti->module >= t->n_modules || t->modules[ti->module].role != BM_ROLE_ENCODER ||
                ti->grad != pass)
                return bm_err_set(err, "backbone \"%s\": its first chunk takes several tensors, \"%s\" among "
                                       "them, which is no encoder's output (or its gradient)",
                                  t->modules[t->backbone_module].name, ti->name);
        }
        x->c0[pass] = *f;
        if (pass == 0) x->c0[0].needs = x->flow->parts[0];
        else x->c0[1].makes = x->flow->parts[1];
    }
    return BM_OK;
}

/* Elements of encoder tensor 'tensor' (an encoder's output or its gradient) for microbatch b:
 * the encoder replica's out_count (every rank holds a replica of every encoder). */
static size_t part_count(const struct bm_exec *x, int tensor, const struct bm_batch *b)
{
    const struct inst *in = &x->inst[x->inst_of[x->t->tensors[tensor].module]];
    return in->ops->out_count(in->self, b);
}

int bm_exec_new(const struct bm_spec *s, const struct bm_table *t, int rank, struct bm_comm *comm,
                const struct bm_train_opts *o, struct bm_exec **out, struct bm_err *err)
{
    *out = NULL;
    struct bm_exec *x = bm_calloc(1, sizeof *x);
    if (!x) return bm_err_set(err, "out of memory");
    x->s = s, x->t = t, x->comm = comm, x->o = *o, x->rank = rank;
    x->mb0 = comm->replica * t->microbatches;
    x->loss_scale = 1.0f / (float)((long)comm->dp * t->microbatches);
    bm_comm_rank_name(comm, rank, x->rname, sizeof x->rname);
    x->P = t->pp, x->V = t->vpp, x->M = t->microbatches;
    x->ops = t->ranks[rank].ops, x->n_ops = t->ranks[rank].n_ops;
    int nm = t->n_modules, C = x->P * x->V, M = x->M;
    if (nm != s->n_modules || t->backbone_module != s->backbone_module) {
        bm_err_set(err, "the table's modules do not match the spec's");
        goto fail;
    }
    for (int i = 0; i < nm; i++)
        if (strcmp(t->modules[i].name, s->modules[i].name)) {
            bm_err_set(err, "table module %d is \"%s\", the spec's \"%s\"", i, t->modules[i].name, s->modules[i].name);
            goto fail;
        }
    if (!(x->flow = bm_table_flow(t)) || x->flow->n_tensors != t->n_tensors) {
        bm_err_set(err, "the table's dataflow is not computed, or its tensors changed since\n"
                        "hint: call bm_table_finish(table) after setting its modules");
        goto fail;
    }
    if (order_encoder_parts(x, err)) goto fail;
    if (bm_train_data_cfg(s, &x->dcfg, err)) goto fail;
    long max_tag = (long)t->n_tensors * M - 1;
    if (max_tag >= comm->tag_ub) { /* tag_ub itself is the clock ping-pong's */
        bm_err_set(err, "%d tensors x %d microbatches need message tags up to %ld; the transport allows %d",
                   t->n_tensors, M, max_tag, comm->tag_ub);
        goto fail;
    }
    x->inst = bm_calloc((size_t)(nm + x->V), sizeof *x->inst);
    x->inst_of = bm_malloc((size_t)(nm + C) * sizeof *x->inst_of);
    x->uses0 = bm_calloc((size_t)t->n_tensors * M + 1, sizeof *x->uses0);
    x->recv_consumer = bm_malloc(((size_t)x->n_ops + 1) * sizeof *x->recv_consumer);
    x->store = bm_calloc((size_t)t->n_tensors * M + 1, sizeof *x->store);
    x->data = bm_calloc((size_t)M, sizeof *x->data);
    x->lm = bm_calloc((size_t)M, sizeof *x->lm);
    x->gen = bm_calloc((size_t)M, sizeof *x->gen);
    x->mb_pend = bm_calloc((size_t)M, sizeof *x->mb_pend);
    x->mb_last = bm_calloc((size_t)M, sizeof *x->mb_last);
    x->times = bm_calloc((size_t)x->n_ops * 3 + 1, sizeof *x->times);
    x->op_bytes = bm_calloc((size_t)x->n_ops + 1, sizeof *x->op_bytes);
    if (!x->inst || !x->inst_of || !x->uses0 || !x->recv_consumer || !x->store || !x->data || !x->lm || !x->gen ||
        !x->mb_pend || !x->mb_last || !x->times || !x->op_bytes) {
        bm_err_set(err, "out of memory");
        goto fail;
    }
    for (int i = 0; i < nm + C; i++) x->inst_of[i] = -1;
    for (int i = 0; i < nm; i++) {
        if (i == s->backbone_module) continue;
        x->inst_of[i] = x->n_inst;
        if (make_inst(x, i, -1, err)) goto fail;
    }
    for (int c = 0; c < x->P * x->V; c++) { /* the rank's chunks, in chunk order */
        if (bm_table_chunk_rank(t, c) != rank) continue;
        x->inst_of[nm + c] = x->n_inst;
        if (make_inst(x, s->backbone_module, c, err)) goto fail;
    }
    x->ctx = bm_calloc((size_t)x->n_inst * M + 1, sizeof *x->ctx);
    x->rc_in = bm_calloc((size_t)x->n_inst * M + 1, sizeof *x->rc_in);
    x->rc_n = bm_calloc((size_t)x->n_inst * M + 1, sizeof *x->rc_n);
    x->rc_held = bm_calloc((size_t)x->n_inst * M + 1, 1);
    x->op_in_bytes = bm_calloc((size_t)x->n_ops + 1, sizeof *x->op_in_bytes);
    x->msg_bytes = bm_calloc((size_t)x->n_ops + 1, sizeof *x->msg_bytes);
    x->wctx = bm_calloc((size_t)x->n_inst * M + 1, sizeof *x->wctx);
    x->split = bm_calloc((size_t)nm + 1, 1);
    x->colls = bm_calloc((size_t)x->n_inst * 2 + 1, sizeof *x->colls);
    x->last_bwd = bm_malloc(((size_t)x->n_inst + 1) * sizeof *x->last_bwd);
    if (!x->ctx || !x->rc_in || !x->rc_n || !x->rc_held || !x->op_in_bytes || !x->msg_bytes || !x->wctx || !x->split ||
        !x->colls || !x->last_bwd) {
        bm_err_set(err, "out of memory");
        goto fail;
    }
    bm_table_split_flags(t, x->split);
    for (int i = 0; i < x->n_inst; i++) x->last_bwd[i] = -1;
    /* Static use counts and checks of every op. */
    for (int k = 0; k < x->n_ops; k++) {
        const struct bm_op *op = &x->ops[k];
        x->recv_consumer[k] = -1;
        char why[512];
        if (bm_op_why(t, rank, op, why, sizeof why)) { /* the one validator (src/table/check.c) */
            bm_err_set(err, "%s", why);
            op_fail(x, k, err);
            goto fail;
        }
        if (op->kind == BM_OP_COMPUTE) {
            if (!inst_for(x, op)) {
                bm_err_set(err, "no instance of this module/chunk on rank %d", rank);
                op_fail(x, k, err);
                goto fail;
            }
            if (x->split[op->module] && op->pass != BM_PASS_F) { /* refused here, before any step runs */
                const struct bm_module_ops *mo = inst_for(x, op)->ops;
                if (!mo->backward_input || !mo->backward_weight || !mo->wctx_bytes || !mo->wctx_free) {
                    bm_err_set(err, "module \"%s\" (impl \"%s\") cannot split its backward into B and W, "
                                    "but the table asks it for a weight-gradient W\n"
                                    "hint: plan with --backbone 1f1b or interleaved (whole backwards), or give the "
                                    "impl backward_input/backward_weight/wctx_bytes/wctx_free (bigmac_module.h)",
                               t->modules[op->module].name, mo->name);
                    op_fail(x, k, err);
                    goto fail;
                }
            }
            if (op->pass != BM_PASS_F) x->last_bwd[inst_for(x, op) - x->inst] = k;
            if (op->pass == BM_PASS_W) continue; /* needs and makes no tensor */
            const struct bm_flow_op *f = flow_of(x, op);
            /* chunk 0 takes (F) and gives back (B) one tensor per encoder; a backward may get
             * several gradients of its output, one per consumer, which it sums */
            int chunk0 = op->chunk == 0;
            if (!f || (f->n_needs > 1 && !(chunk0 || op->pass == BM_PASS_B)) ||
                (f->n_makes > 1 && !(chunk0 && op->pass == BM_PASS_B))) {
                bm_err_set(err, "modules with more than one input or output tensor are not supported "
                                "(only the backbone's first chunk takes one per encoder)");
                op_fail(x, k, err);
                goto fail;
            }
            for (int i = 0; i < f->n_needs; i++) x->uses0[f->needs[i] * M + op->mb]++;
        } else {
            if (op->kind == BM_OP_SEND) x->uses0[op->tensor * M + op->mb]++;
        }
    }
    for (int k = 0; k < x->n_ops; k++) {
        const struct bm_op *op = &x->ops[k];
        if (op->kind != BM_OP_RECV) continue;
        for (int j = k + 1; j < x->n_ops && x->recv_consumer[k] < 0; j++) {
            const struct bm_op *c = &x->ops[j];
            if (c->kind != BM_OP_COMPUTE || c->mb != op->mb || c->pass == BM_PASS_W) continue;
            const struct bm_flow_op *f = flow_of(x, c);
            for (int i = 0; i < f->n_needs; i++)
                if (f->needs[i] == op->tensor) x->recv_consumer[k] = j;
        }
        if (x->recv_consumer[k] < 0) {
            bm_err_set(err, "no later compute op on rank %d consumes this tensor", rank);
            op_fail(x, k, err);
            goto fail;
        }
    }
    *out = x;
    return BM_OK;
fail:
    bm_exec_free(x);
    return BM_ERR;
}

/* ---------------------------------------------------------------- step */

static int mem_push(struct bm_exec *x, double t_ms)
{
    if (x->n_mem + 1 > x->cap_mem) {
        int cap = x->cap_mem ? 2 * x->cap_mem : 64;
        double *p = bm_realloc(x->mem, (size_t)cap * 4 * sizeof *p);
        if (!p) return BM_ERR;
        x->mem = p, x->cap_mem = cap;
    }
    double *q = &x->mem[x->n_mem++ * 4];
    q[0] = t_ms;
    for (int r = 0; r < BM_N_ROLES; r++) q[1 + r] = (double)x->live[r];
    return BM_OK;
}

/* Milliseconds since the step's origin, on rank 0's clock. */
static double now_ms(const struct bm_exec *x) { return (bm_now() + x->clock_offset - x->origin) * 1e3; }

void bm_exec_set_clock_offset(struct bm_exec *x, double offset) { x->clock_offset = offset; }

double bm_exec_now_ms(const struct bm_exec *x) { return now_ms(x); }

int bm_exec_note_coll(struct bm_exec *x, const struct bm_exec_coll *e)
{
    if (!x->colls || x->n_colls >= 2 * x->n_inst) return BM_ERR;
    x->colls[x->n_colls++] = *e;
    return BM_OK;
}

const struct bm_exec_coll *bm_exec_colls(const struct bm_exec *x, int *n)
{
    *n = x->n_colls;
    return x->colls;
}

void bm_exec_note_tail(struct bm_exec *x, double sync_start_ms, double sync_end_ms, double optimizer_ms)
{
    x->tail[0] = sync_start_ms, x->tail[1] = sync_end_ms, x->tail[2] = optimizer_ms;
}

/* Element count of the tensor recv op k brings, from its local consumer's interface (one
 * encoder's part of a consumer taking several: from that encoder's replica). */
static size_t recv_count(const struct bm_exec *x, int k)
{
    const struct bm_op *c = &x->ops[x->recv_consumer[k]];
    const struct inst *in = inst_for(x, c);
    const struct bm_batch *b = &x->data[c->mb]->b;
    if (c->pass == BM_PASS_F && flow_of(x, c)->n_needs > 1) return part_count(x, x->ops[k].tensor, b);
    return c->pass == BM_PASS_F ? in->ops->in_count(in->self, b) : in->ops->out_count(in->self, b);
}

int bm_exec_step_prepare(struct bm_exec *x, long step, struct bm_err *err)
{
    x->step = step;
    for (int k = 0; k < x->n_ops; k++) {
        int mb = x->ops[k].mb;
        if (x->data[mb]) continue;
        /* replica d's microbatch m is the step's global microbatch d*M + m */
        if (bm_data_batch(&x->dcfg, step, x->mb0 + mb, &x->data[mb], err)) return BM_ERR;
    }
    for (int i = 0; i < x->t->n_tensors * x->M; i++)
        x->store[i] = (struct entry){.uses = x->uses0[i], .req = -1};
    /* Post every recv of the step now, so a sender never waits for its receiver. */
    for (int k = 0; k < x->n_ops; k++) {
        const struct bm_op *op = &x->ops[k];
        if (op->kind != BM_OP_RECV) continue;
        int key = op->tensor * x->M + op->mb;
        struct entry *e = &x->store[key];
        if (e->data) {
            bm_err_set(err, "the same tensor is received twice");
            return op_fail(x, k, err);
        }
        e->count = recv_count(x, k);
        e->data = bm_malloc(e->count * sizeof(float) + 1);
        if (!e->data) {
            bm_err_set(err, "out of memory for a %zu-float receive buffer", e->count);
            return op_fail(x, k, err);
        }
        if (x->comm->ops->irecv(x->comm, x->rank, op->peer, key, e->data, e->count * sizeof(float), &e->req, err))
            return op_fail(x, k, err);
    }
    return BM_OK;
}

int bm_exec_step_begin(struct bm_exec *x, double origin, struct bm_err *err)
{
    x->pc = 0, x->origin = origin, x->t_begin = bm_now();
    x->n_mem = 0, x->n_colls = 0;
    memset(x->live, 0, sizeof x->live);
    memset(x->peak, 0, sizeof x->peak);
    memset(x->lm, 0, (size_t)x->M * sizeof *x->lm);
    memset(x->gen, 0, (size_t)x->M * sizeof *x->gen);
    memset(x->mb_pend, 0, (size_t)x->M * sizeof *x->mb_pend);
    memset(x->mb_last, 0, (size_t)x->M * sizeof *x->mb_last);
    memset(x->times, 0, (size_t)x->n_ops * 3 * sizeof *x->times);
    memset(x->op_bytes, 0, (size_t)x->n_ops * sizeof *x->op_bytes);
    memset(x->op_in_bytes, 0, (size_t)x->n_ops * sizeof *x->op_in_bytes);
    memset(x->msg_bytes, 0, (size_t)x->n_ops * sizeof *x->msg_bytes);
    if (mem_push(x, now_ms(x))) return bm_err_set(err, "%s: out of memory for the memory trace", x->rname);
    for (int i = 0; i < x->n_inst; i++) {
        size_t n;
        float *g = x->inst[i].ops->grads(x->inst[i].self, &n);
        memset(g, 0, n * sizeof(float));
    }
    return BM_OK;
}

static void entry_release(struct entry *e)
{
    if (--e->uses <= 0) {
        bm_free(e->data);
        e->data = NULL, e->ready = 0, e->count = 0;
    }
}

/* Complete finished sends (all of them when block). */
static int poll_sends(struct bm_exec *x, int block, struct bm_err *err)
{
    int w = 0;
    for (int i = 0; i < x->n_sends; i++) {
        int done = 0;
        if (x->comm->ops->wait(x->comm, x->sends[i].req, block, &done, err)) return BM_ERR;
        if (done) entry_release(&x->store[x->sends[i].key]);
        else x->sends[w++] = x->sends[i];
    }
    x->n_sends = w;
    return BM_OK;
}

static int all_finite(const float *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite(p[i])) return 0;
    return 1;
}

static void fire_fault(struct bm_exec *x, float *out, size_t n, float *loss)
{
    if (x->o.fault == BM_TRAIN_FAULT_NAN) {
        for (size_t i = 0; i < n; i++) out[i] = NAN;
        if (loss && !n) *loss = NAN; /* no output to poison: the loss */
    } else if (x->o.fault == BM_TRAIN_FAULT_CRASH) {
        fflush(stdout), fflush(stderr);
        raise(SIGSEGV);
    } else if (x->o.fault == BM_TRAIN_FAULT_EXIT) {
        fflush(stdout), fflush(stderr);
        _exit(3);
    } else if (x->o.fault == BM_TRAIN_FAULT_HANG) {
        for (;;) pause();
    }
}

static int faulty(const struct bm_exec *x, int k)
{
    return x->o.fault != BM_TRAIN_FAULT_NONE && x->o.fault_rank == bm_comm_global(x->comm, x->rank) && x->o.fault_op == k &&
           x->o.fault_step == x->step;
}

/* Chunk 0's input from its several parts (f->needs, already in spec module order), one after
 * another in a new buffer of n floats; NULL (err set) when they do not add up to n or memory
 * runs out. */
static float *gather_parts(const struct bm_exec *x, const struct bm_flow_op *f, int mb, size_t n, struct bm_err *err)
{
    size_t total = 0;
    for (int i = 0; i < f->n_needs; i++) total += x->store[f->needs[i] * x->M + mb].count;
    if (total != n) {
        bm_err_set(err, "the encoders' outputs have %zu floats together, the module expects %zu\n"
                        "hint: every encoder emits (image/patch)^2 tokens per image of the backbone width", total, n);
        return NULL;
    }
    float *cat = bm_malloc(n * sizeof(float) + 1);
    if (!cat) {
        bm_err_set(err, "out of memory for a %zu-float input", n);
        return NULL;
    }
    size_t at = 0;
    for (int i = 0; i < f->n_needs; i++) {
        const struct entry *e = &x->store[f->needs[i] * x->M + mb];
        memcpy(cat + at, e->data, e->count * sizeof(float));
        at += e->count;
    }
    return cat;
}

/* ---------------------------------------------------------------- recomputation
 * A module with "recompute": "full" (src/sim/cost.h): its forward runs as usual, then keeps a
 * copy of its input and drops the context; its backward first reruns the forward on that copy
 * (output discarded, loss already reported) and then runs as usual. Live bytes follow the
 * simulator: the context's bytes while the forward runs, the input's from then to the
 * backward, the rebuilt context's during the backward. */

/* After a recomputed forward: keep input[nin], drop the context. */
static int recompute_keep(struct bm_exec *x, int k, struct inst *in, int slot, int role, const float *input,
                          size_t nin, struct bm_err *err)
{
    void **ctxp = &x->ctx[slot];
    float *keep = NULL;
    if (nin && !(keep = bm_malloc(nin * sizeof(float)))) return bm_err_set(err, "out of memory keeping a %zu-float input", nin);
    if (nin) memcpy(keep, input, nin * sizeof(float));
    x->live[role] -= in->ops->ctx_bytes(*ctxp);
    in->ops->ctx_free(*ctxp);
    *ctxp = NULL;
    x->rc_in[slot] = keep, x->rc_n[slot] = nin, x->rc_held[slot] = 1;
    x->op_in_bytes[k] = nin * sizeof(float);
    x->live[role] += x->op_in_bytes[k];
    return BM_OK;
}

/* Before a recomputed backward: rerun the forward on the kept input, so *ctxp holds the
 * context again. */
static int recompute_rebuild(struct bm_exec *x, struct inst *in, int slot, int role, const struct bm_batch *b,
                             struct bm_err *err)
{
    if (!x->rc_held[slot]) return bm_err_set(err, "backward without its forward on this rank");
    size_t nout = in->ops->out_count(in->self, b);
    float *scratch = bm_malloc(nout * sizeof(float) + 1), loss = 0;
    if (!scratch) return bm_err_set(err, "out of memory for a %zu-float recomputed output", nout);
    x->live[role] -= x->rc_n[slot] * sizeof(float);
    int rc = in->ops->forward(in->self, b, x->rc_in[slot], nout ? scratch : NULL, &loss, &x->ctx[slot], err);
    bm_free(scratch);
    bm_free(x->rc_in[slot]);
    x->rc_in[slot] = NULL, x->rc_n[slot] = 0, x->rc_held[slot] = 0;
    if (rc) return BM_ERR;
    x->live[role] += in->ops->ctx_bytes(x->ctx[slot]);
    if (x->live[role] > x->peak[role]) x->peak[role] = x->live[role];
    return BM_OK;
}

/* W of a split backward: every parameter gradient of the microbatch from what its B kept. */
static int run_weight(struct bm_exec *x, const struct bm_op *op, struct bm_err *err)
{
    struct inst *in = inst_for(x, op);
    void **wp = &x->wctx[(in - x->inst) * x->M + op->mb];
    if (!*wp) return bm_err_set(err, "weight gradient (W) without its input gradient (B) on this rank");
    void *w = *wp;
    *wp = NULL;
    x->live[role_of(x, op->module)] -= in->ops->wctx_bytes(w);
    return in->ops->backward_weight(in->self, w, &x->data[op->mb]->b, err);
}

static int run_compute(struct bm_exec *x, int k, struct bm_err *err)
{
    const struct bm_op *op = &x->ops[k];
    if (op->pass == BM_PASS_W) return run_weight(x, op, err);
    struct inst *in = inst_for(x, op);
    const struct bm_flow_op *f = flow_of(x, op);
    const struct bm_batch *b = &x->data[op->mb]->b;
    void **ctxp = &x->ctx[(in - x->inst) * x->M + op->mb];
    int role = role_of(x, op->module), rc = BM_OK;
    float *cat_in = NULL, *cat_out = NULL; /* chunk 0's encoder parts joined; a backward's gradients summed */
    for (int i = 0; i < f->n_needs; i++)
        if (!x->store[f->needs[i] * x->M + op->mb].ready)
            return bm_err_set(err, "input %s of microbatch %d is not here (no earlier recv or producer on this rank)",
                              x->t->tensors[f->needs[i]].name, op->mb);
    struct entry *ein = f->n_needs ? &x->store[f->needs[0] * x->M + op->mb] : NULL;
    /* The module writes nout floats: F its output, B its input gradient, split over f->makes
     * (several only for chunk 0's B: one gradient per encoder, each sized by the encoder). */
    size_t nout = 0, parts = 0;
    float *out = NULL;
    if (f->n_makes) nout = op->pass == BM_PASS_F ? in->ops->out_count(in->self, b) : in->ops->in_count(in->self, b);
    for (int i = 0; i < f->n_makes; i++) {
        struct entry *e = &x->store[f->makes[i] * x->M + op->mb];
        if (e->data) return bm_err_set(err, "%s of microbatch %d made twice", x->t->tensors[f->makes[i]].name, op->mb);
        e->count = f->n_makes == 1 ? nout : part_count(x, f->makes[i], b);
        e->data = bm_malloc(e->count * sizeof(float) + 1);
        if (!e->data) return bm_err_set(err, "out of memory for a %zu-float output", e->count);
        parts += e->count;
        out = e->data;
    }
    if (f->n_makes > 1) {
        if (parts != nout)
            return bm_err_set(err, "the module's input gradient has %zu floats, the encoders' outputs %zu together",
                              nout, parts);
        if (!(out = cat_out = bm_malloc(nout * sizeof(float) + 1)))
            return bm_err_set(err, "out of memory for a %zu-float output", nout);
    }
    if (op->pass == BM_PASS_F) {
        if (*ctxp) {
            rc = bm_err_set(err, "forward run twice");
            goto done;
        }
        size_t nin = in->ops->in_count(in->self, b);
        const float *input = ein ? ein->data : NULL;
        if (f->n_needs > 1) {
            if (!(input = cat_in = gather_parts(x, f, op->mb, nin, err))) {
                rc = BM_ERR;
                goto done;
            }
        } else if (nin && (!ein || ein->count != nin)) {
            rc = bm_err_set(err, "input has %zu floats, the module expects %zu", ein ? ein->count : 0, nin);
            goto done;
        }
        float loss = 0;
        if ((rc = in->ops->forward(in->self, b, input, out, &loss, ctxp, err))) goto done;
        if (faulty(x, k)) fire_fault(x, out, nout, &loss);
        int keeps = x->t->modules[op->module].backward != BM_BACKWARD_NONE;
        if (!keeps && *ctxp) { /* frozen, nothing upstream trains: no backward, nothing kept */
            in->ops->ctx_free(*ctxp);
            *ctxp = NULL;
        }
        size_t bytes = keeps ? in->ops->ctx_bytes(*ctxp) : 0;
        x->op_bytes[k] = bytes;
        x->live[role] += bytes;
        if (x->live[role] > x->peak[role]) x->peak[role] = x->live[role];
        if (!isfinite(loss)) {
            rc = bm_err_set(err, "loss is %s", isnan(loss) ? "NaN" : "Inf");
            goto done;
        }
        if (out && !all_finite(out, nout)) {
            rc = bm_err_set(err, "output is not finite (NaN or Inf)");
            goto done;
        }
        if (role == BM_ROLE_BACKBONE) x->lm[op->mb] = loss;
        else if (role == BM_ROLE_GENERATOR) x->gen[op->mb] += loss;
        if (keeps && x->t->modules[op->module].recompute &&
            (rc = recompute_keep(x, k, in, (int)(ctxp - x->ctx), role, input, input ? nin : 0, err)))
            goto done;
    } else {
        if (x->t->modules[op->module].recompute &&
            (rc = recompute_rebuild(x, in, (int)(ctxp - x->ctx), role, b, err)))
            goto done;
        if (!*ctxp) {
            rc = bm_err_set(err, "backward without its forward on this rank");
            goto done;
        }
        size_t bytes = in->ops->ctx_bytes(*ctxp);
        x->live[role] -= bytes;
        void *c = *ctxp;
        *ctxp = NULL;
        const float *dout = ein ? ein->data : NULL;
        size_t n_dout = in->ops->out_count(in->self, b);
        for (int i = 0; i < f->n_needs; i++) {
            const struct entry *e = &x->store[f->needs[i] * x->M + op->mb];
            if (e->count != n_dout) {
                in->ops->ctx_free(c);
                rc = bm_err_set(err, "gradient %s has %zu floats, the module's output %zu",
                                x->t->tensors[f->needs[i]].name, e->count, n_dout);
                goto done;
            }
        }
        if (f->n_needs > 1) { /* one gradient per consumer of the output: their sum */
            if (!(cat_in = bm_malloc(n_dout * sizeof(float) + 1))) {
                in->ops->ctx_free(c);
                rc = bm_err_set(err, "out of memory for a %zu-float gradient", n_dout);
                goto done;
            }
            memcpy(cat_in, ein->data, n_dout * sizeof(float));
            for (int i = 1; i < f->n_needs; i++) {
                const float *g = x->store[f->needs[i] * x->M + op->mb].data;
                for (size_t j = 0; j < n_dout; j++) cat_in[j] += g[j];
            }
            dout = cat_in;
        }
        if (x->split[op->module]) { /* B of a split backward: keep what W needs */
            void **wp = &x->wctx[(in - x->inst) * x->M + op->mb];
            if (*wp) {
                in->ops->ctx_free(c);
                rc = bm_err_set(err, "input gradient (B) run twice before its W");
                goto done;
            }
            if ((rc = in->ops->backward_input(in->self, c, b, dout, x->loss_scale, out, wp, err))) goto done;
            size_t kept = in->ops->wctx_bytes(*wp);
            x->op_bytes[k] = kept;
            x->live[role] += kept;
            if (x->live[role] > x->peak[role]) x->peak[role] = x->live[role];
        } else if (x->t->modules[op->module].backward == BM_BACKWARD_INPUT && in->ops->backward_input &&
                   in->ops->wctx_free) { /* frozen: the input gradient only, no weight gradient */
            void *w = NULL;
            if ((rc = in->ops->backward_input(in->self, c, b, dout, x->loss_scale, out, &w, err))) goto done;
            if (w) in->ops->wctx_free(w);
        } else if ((rc = in->ops->backward(in->self, c, b, dout, x->loss_scale, out, err))) {
            goto done; /* (a frozen module without backward_input: its weight gradient is dropped) */
        }
        if (faulty(x, k)) fire_fault(x, out, nout, NULL);
        if (out && !all_finite(out, nout)) {
            rc = bm_err_set(err, "gradient is not finite (NaN or Inf)");
            goto done;
        }
    }
    size_t at = 0;
    for (int i = 0; i < f->n_makes; i++) {
        struct entry *e = &x->store[f->makes[i] * x->M + op->mb];
        if (cat_out) memcpy(e->data, cat_out + at, e->count * sizeof(float)); /* split per encoder */
        at += e->count;
        e->ready = 1;
        if (e->uses == 0) { /* nobody here or downstream needs it (e.g. a loss-only module) */
            e->uses = 1;
            entry_release(e);
        }
    }
    for (int i = 0; i < f->n_needs; i++) entry_release(&x->store[f->needs[i] * x->M + op->mb]);
done:
    bm_free(cat_in), bm_free(cat_out);
    return rc;
}

int bm_exec_advance(struct bm_exec *x, int block, int *done, int *progress, struct bm_err *err)
{
    *progress = 0;
    while (x->pc < x->n_ops) {
        int k = x->pc;
        const struct bm_op *op = &x->ops[k];
        double *tm = &x->times[k * 3];
        int key = op->tensor * x->M + op->mb;
        if (op->kind == BM_OP_RECV) {
            struct entry *e = &x->store[key];
            if (tm[0] == 0) tm[0] = now_ms(x);
            int ok = 0;
            if (x->comm->ops->wait(x->comm, e->req, block, &ok, err)) return op_fail(x, k, err);
            if (!ok) {
                *done = 0;
                return BM_OK;
            }
            if (faulty(x, k)) fire_fault(x, e->data, e->count, NULL);
            e->req = -1, e->ready = 1;
            x->msg_bytes[k] = (double)(e->count * sizeof(float));
            tm[1] = now_ms(x);
            tm[2] = tm[1];
            if (tm[1] > x->mb_pend[op->mb]) x->mb_pend[op->mb] = tm[1];
        } else if (op->kind == BM_OP_SEND) {
            struct entry *e = &x->store[key];
            tm[0] = tm[1] = tm[2] = now_ms(x);
            if (!e->ready) {
                bm_err_set(err, "sends %s of microbatch %d before it is made or received here",
                           x->t->tensors[op->tensor].name, op->mb);
                return op_fail(x, k, err);
            }
            if (faulty(x, k)) fire_fault(x, e->data, e->count, NULL);
            if (bm_grow(&x->sends, &x->cap_sends, x->n_sends + 1, sizeof *x->sends)) {
                bm_err_set(err, "out of memory");
                return op_fail(x, k, err);
            }
            long req;
            if (x->comm->ops->isend(x->comm, x->rank, op->peer, key, e->data, e->count * sizeof(float), &req, err))
                return op_fail(x, k, err);
            x->sends[x->n_sends++] = (struct pending_send){req, key};
            x->msg_bytes[k] = (double)(e->count * sizeof(float));
        } else {
            tm[0] = now_ms(x);
            /* ready: the latest input arrival (recvs of this microbatch since the previous
             * compute op of it) or that op's end */
            double ready = BM_MAX(x->mb_pend[op->mb], x->mb_last[op->mb]);
            if (run_compute(x, k, err)) return op_fail(x, k, err);
            tm[1] = now_ms(x);
            tm[2] = ready;
            x->mb_last[op->mb] = tm[1], x->mb_pend[op->mb] = 0;
            if (mem_push(x, op->pass == BM_PASS_F ? tm[1] : tm[0])) {
                bm_err_set(err, "out of memory for the memory trace");
                return op_fail(x, k, err);
            }
        }
        x->pc++;
        ++*progress;
        if (x->n_sends && poll_sends(x, 0, err)) return op_fail(x, k, err);
        if (x->hook && x->hook(x->hook_arg, k, err)) return op_fail(x, k, err);
    }
    *done = 1;
    return BM_OK;
}

int bm_exec_step_finish(struct bm_exec *x, struct bm_err *err)
{
    if (poll_sends(x, 1, err)) return bm_err_set(err, "%s: completing sends: %s", x->rname, err->msg);
    for (int i = 0; i < x->n_inst * x->M; i++) {
        if (x->ctx[i] || x->rc_held[i])
            return bm_err_set(err, "%s: %s microbatch %d: forward without a backward in the table", x->rname,
                              x->t->modules[x->inst[i / x->M].module].name, i % x->M);
        if (x->wctx[i])
            return bm_err_set(err, "%s: %s microbatch %d: input gradient (B) without its weight gradient (W) "
                                   "in the table", x->rname, x->t->modules[x->inst[i / x->M].module].name, i % x->M);
    }
    for (int i = 0; i < x->t->n_tensors * x->M; i++) {
        struct entry *e = &x->store[i];
        if (e->data) {
            bm_err_set(err, "%s: tensor %s of microbatch %d was never used up", x->rname,
                       x->t->tensors[i / x->M].name, i % x->M);
            return BM_ERR;
        }
    }
    for (int m = 0; m < x->M; m++) {
        bm_data_batch_free(x->data[m]);
        x->data[m] = NULL;
    }
    x->ms = (bm_now() - x->t_begin) * 1e3;
    return BM_OK;
}

int bm_exec_zero(const struct bm_exec *x) { return x->t->zero; }

int bm_exec_inst_last_bwd(const struct bm_exec *x, int i) { return x->last_bwd[i]; }

int bm_exec_inst_role(const struct bm_exec *x, int i) { return role_of(x, x->inst[i].module); }

void bm_exec_set_op_hook(struct bm_exec *x, bm_exec_op_hook hook, void *arg)
{
    x->hook = hook, x->hook_arg = arg;
}

void bm_exec_optimizer_inst(struct bm_exec *x, int i, long step)
{
    const struct bm_train *tr = &x->s->train;
    struct inst *in = &x->inst[i];
    if (x->s->modules[in->module].frozen || in->hi <= in->lo) return; /* "trainable": false: no update */
    size_t n, k = in->hi - in->lo;
    float *p = in->ops->params(in->self, &n), *g = in->ops->grads(in->self, &n);
    bm_adamw_update(p + in->lo, g + in->lo, in->opt, in->opt + k, k, (float)tr->lr, (float)tr->beta1,
                    (float)tr->beta2, (float)tr->eps, (float)tr->weight_decay, (int)step + 1);
}

void bm_exec_optimizer(struct bm_exec *x, long step)
{
    for (int i = 0; i < x->n_inst; i++) bm_exec_optimizer_inst(x, i, step);
}
