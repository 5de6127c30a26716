/* verify.c — the verifier (docs/design.md §7): is an operator table safe to run?
 *
 * bm_verify checks, in order, and stops at the first invariant that fails:
 *   0. structure   every index in range, chunks on their rank, peers valid, passes F/B/W;
 *   1. counts      each compute op exactly once, each send matched by exactly one recv; a
 *                  module whose backward is split (the backbone under zb-h1/zb-interleaved,
 *                  any other module with a W op) has a W for every microbatch (and chunk);
 *   2. deadlock    symbolic execution (sends non-blocking, a recv waits for its send) finishes;
 *   3. order       each rank's backbone ops are exactly bm_backbone_order's sequence;
 *   4. deps        walking each rank in order, every tensor an op needs (or sends) is on the
 *                  rank already, every B follows its own F on the same rank, and every W
 *                  follows the B of the same (module, chunk, microbatch) on the same rank;
 *   5. residency   (policy bigmac, window > 0) live nested microbatches per rank are bounded
 *                  (a microbatch of a split module is live until its W; one of a frozen module
 *                  without backward until the rank's last op that uses its output).
 * A frozen module's passes that do not exist (bm_table_has_pass) are expected absent (1, 3).
 * Messages: first line "invariant N (name) violated: summary", then indented detail lines
 * that name ops by action string and position ("rank 2 op #17 1F3").
 *
 * The table stays const: the verifier reads the dataflow the table was finished with
 * (bm_table_finish), or builds one for an unfinished hand-made table (table/flow.h: the graph's
 * tensors the table lacks get indices after its own). Field rules are the one op validator's
 * (bm_op_check), send/recv pairs the one matcher's (bm_match_build).
 *
 * Cost: O(ops + P·V·M + tensors·M) time and memory; no quadratic scans outside error paths. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "table/flow.h"
#include "table/table.h"
#include "util/util.h"

/* ---------------------------------------------------------------- message builder */

/* Appends lines to err->msg; when the buffer is nearly full, further lines are counted and
 * summarised as "  ... N more lines" at the end, so the first lines always survive. */
struct msg {
    char *buf;
    size_t cap, len;
    long dropped;
};

#define MSG_RESERVE 128 /* room kept for the "... N more lines" trailer */

static void msg_init(struct msg *m, struct bm_err *err)
{
    m->buf = err->msg;
    m->cap = sizeof err->msg;
    m->len = 0;
    m->dropped = 0;
    m->buf[0] = 0;
}

/* Append one line (a newline is inserted before every line but the first). */
static void msg_line(struct msg *m, const char *fmt, ...)
#ifdef __GNUC__
    __attribute__((format(printf, 2, 3)))
#endif
    ;
static void msg_line(struct msg *m, const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    size_t need = strlen(line) + (m->len ? 1 : 0);
    if (m->dropped || m->len + need + MSG_RESERVE >= m->cap) {
        m->dropped++;
        return;
    }
    if (m->len) m->buf[m->len++] = '\n';
    memcpy(m->buf + m->len, line, strlen(line) + 1);
    m->len += strlen(line);
}

static int msg_done(struct msg *m)
{
    if (m->dropped)
        snprintf(m->buf + m->len, m->cap - m->len, "\n  ... %ld more line%s", m->dropped,
                 m->dropped == 1 ? "" : "s");
    return BM_ERR;
}

/* ---------------------------------------------------------------- context */

/* An op's position: rank in the high half, index in its rank's list in the low half. */
#define POS(r, i) (((long long)(r) << 32) | (unsigned)(i))
#define POS_RANK(p) ((int)((p) >> 32))
#define POS_IDX(p) ((int)((p) & 0xffffffffLL))

struct ctx {
    const struct bm_table *t;
    const struct bm_flow *flow; /* the table's, or own_flow */
    struct bm_flow *own_flow;   /* built here for a table that was never finished */
    int P, V, M, C, N, bb, T;
    int *active;               /* [N] module takes part (policy none: backbone only) */
    int *split;                /* [N] module's backward is split into B and W (bm_table_splits) */
    long long *cpos;           /* [(N+C)*3*M] first position of each compute op, -1 = none */
    long long *cpos2;          /* [(N+C)*3*M] a duplicate's position, -1 = none */
    struct bm_match mt;        /* messages: (sender, receiver, tensor, mb) and their ops */
    struct msg msg;
    struct bm_err *err;
    int deadlock_first;        /* the next deadlock report line is its headline */
};

/* Unit of a compute op: non-backbone module m -> m, backbone chunk c -> N + c. */
static long long ckey(const struct ctx *c, int module, int chunk, int pass, int mb)
{
    int u = module == c->bb ? c->N + chunk : module;
    return ((long long)u * 3 + pass) * c->M + mb;
}

static void act(const struct ctx *c, const struct bm_op *op, char *buf, size_t n)
{
    bm_op_format(c->t, op, buf, n);
}

static struct bm_op compute_op(int module, int chunk, int pass, int mb)
{
    struct bm_op o = {BM_OP_COMPUTE, (uint8_t)pass, (int16_t)module, chunk, mb, -1, -1};
    return o;
}

static const char *tname(const struct ctx *c, int x)
{
    if (x >= 0 && x < c->t->n_tensors) return c->t->tensors[x].name;
    const struct bm_tensor *e = bm_flow_tensor(c->flow, c->t, x);
    return e ? e->name : "?";
}

static int oom(struct ctx *c, const char *what)
{
    return bm_err_set(c->err, "verify: out of memory (%s)", what);
}

/* ---------------------------------------------------------------- 0. structure */

static int check_table_fields(struct ctx *c)
{
    const struct bm_table *t = c->t;
    struct msg *m = &c->msg;
    if (t->pp < 1 || t->pp > 65536)
        msg_line(m, "  pp is %d; a table needs 1..65536 ranks", t->pp);
    else if (!t->ranks)
        msg_line(m, "  the table has no rank list (pp %d)", t->pp);
    if (t->vpp < 1 || t->vpp > 4096) msg_line(m, "  vpp is %d; it must be 1..4096", t->vpp);
    if (t->microbatches < 1 || t->microbatches > (1 << 24))
        msg_line(m, "  microbatches is %d; it must be 1..16777216", t->microbatches);
    if (m->len) return BM_ERR;
    if ((long long)t->pp * t->vpp * t->microbatches > (1LL << 26))
        msg_line(m, "  pp*vpp*microbatches = %lld is too large to verify (limit 2^26)",
                 (long long)t->pp * t->vpp * t->microbatches);
    if ((long long)(t->n_modules + (long long)t->pp * t->vpp) * t->microbatches > (1LL << 27))
        msg_line(m, "  (modules + pp*vpp) * microbatches = %lld is too large to verify (limit 2^27)",
                 (long long)(t->n_modules + (long long)t->pp * t->vpp) * t->microbatches);
    if ((unsigned)t->backbone >= BM_N_BACKBONES)
        msg_line(m, "  unknown backbone schedule %d", (int)t->backbone);
    if ((unsigned)t->policy >= BM_N_POLICIES) msg_line(m, "  unknown policy %d", (int)t->policy);
    if (t->window < 0) msg_line(m, "  window is %d; it must be >= 0", t->window);
    if (t->warmup_extra < 0) msg_line(m, "  warmup_extra is %d; it must be >= 0", t->warmup_extra);
    if (t->n_modules < 1 || t->n_modules > 32767 || !t->modules) {
        msg_line(m, "  the table lists %d modules; it needs at least the backbone", t->n_modules);
        return BM_ERR;
    }
    if (t->backbone_module < 0 || t->backbone_module >= t->n_modules)
        msg_line(m, "  backbone_module is %d, not a module index 0..%d", t->backbone_module,
                 t->n_modules - 1);
    for (int i = 0; i < t->n_modules; i++) {
        const struct bm_table_module *md = &t->modules[i];
        if (!md->name) {
            msg_line(m, "  module #%d has no name", i);
            continue;
        }
        if ((unsigned)md->role > BM_ROLE_GENERATOR)
            msg_line(m, "  module %s has unknown role %d", md->name, (int)md->role);
        else if ((md->role == BM_ROLE_BACKBONE) != (i == t->backbone_module))
            msg_line(m, "  module %s has role %s but the backbone is module #%d", md->name,
                     bm_role_name(md->role), t->backbone_module);
        if ((md->n_consumes > 0 && !md->consumes) || (md->n_produces > 0 && !md->produces) ||
            md->n_consumes < 0 || md->n_produces < 0) {
            msg_line(m, "  module %s has a malformed consumes/produces list", md->name);
            continue;
        }
        for (int k = 0; k < md->n_consumes; k++)
            if (!md->consumes[k]) msg_line(m, "  module %s: consumes[%d] is null", md->name, k);
        for (int k = 0; k < md->n_produces; k++)
            if (!md->produces[k]) msg_line(m, "  module %s: produces[%d] is null", md->name, k);
        for (int j = 0; j < i; j++)
            if (t->modules[j].name && !strcmp(t->modules[j].name, md->name))
                msg_line(m, "  module name %s is used twice (#%d and #%d)", md->name, j, i);
    }
    if (t->n_tensors < 0 || (t->n_tensors > 0 && !t->tensors))
        msg_line(m, "  malformed tensor list (%d tensors)", t->n_tensors);
    else
        for (int i = 0; i < t->n_tensors; i++)
            if (!t->tensors[i].name || strlen(t->tensors[i].name) >= BM_MAX_NAME)
                msg_line(m, "  tensor #%d has no name or one longer than %d", i, BM_MAX_NAME - 1);
    for (int r = 0; r < t->pp; r++)
        if (t->ranks[r].n_ops < 0 || (t->ranks[r].n_ops > 0 && !t->ranks[r].ops))
            msg_line(m, "  rank %d has a malformed op list (%d ops)", r, t->ranks[r].n_ops);
    return m->len ? BM_ERR : BM_OK;
}

/* The table's dataflow, or one built here when the table was never finished. */
static int get_flow(struct ctx *c)
{
    const struct bm_table *t = c->t;
    for (int i = 0; i < t->n_tensors; i++) {
        int k = bm_table_find_tensor(t, t->tensors[i].name);
        if (k >= 0 && k != i) {
            msg_line(&c->msg, "  tensor name %s is used twice (#%d and #%d)", t->tensors[i].name, k, i);
            return BM_ERR;
        }
    }
    if (!(c->flow = bm_table_flow(t))) {
        struct bm_err ferr;
        if (bm_flow_build(t, &c->own_flow, &ferr)) return bm_err_set(c->err, "verify: %s", ferr.msg);
        c->flow = c->own_flow;
    }
    c->T = BM_MAX(c->flow->n_tensors, t->n_tensors);
    return BM_OK;
}

/* One structure problem of rank r op #i: "  rank r op #i <action>: <what>". The action string
 * is only formatted here, on the error path. */
static void bad_op(struct ctx *c, int r, int i, const char *fmt, ...)
#ifdef __GNUC__
    __attribute__((format(printf, 4, 5)))
#endif
    ;
static void bad_op(struct ctx *c, int r, int i, const char *fmt, ...)
{
    char a[BM_MAX_NAME + 64], what[512];
    const struct bm_op *op = &c->t->ranks[r].ops[i];
    if (op->kind == BM_OP_COMPUTE && (op->module < 0 || op->module >= c->N))
        snprintf(a, sizeof a, "compute");
    else
        act(c, op, a, sizeof a);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    msg_line(&c->msg, "  rank %d op #%d %s: %s", r, i, a, what);
}

struct op_at {
    struct ctx *c;
    int r, i;
};

/* bm_op_check's problems of one op, as structure lines. */
static void op_problem(void *p, const char *why)
{
    const struct op_at *o = p;
    if (o->c->t->ranks[o->r].ops[o->i].kind > BM_OP_RECV)
        msg_line(&o->c->msg, "  rank %d op #%d: %s", o->r, o->i, why);
    else
        bad_op(o->c, o->r, o->i, "%s", why);
}

/* The op validator's field rules (bm_op_check), then the verifier's own: a backbone chunk on
 * its rank, the policy's modules, a tensor the graph makes. */
static int check_ops(struct ctx *c)
{
    const struct bm_table *t = c->t;
    struct msg *m = &c->msg;
    for (int r = 0; r < c->P; r++) {
        const struct bm_rank_ops *ro = &t->ranks[r];
        for (int i = 0; i < ro->n_ops; i++) {
            const struct bm_op *op = &ro->ops[i];
            if (m->dropped) return BM_ERR;
            struct op_at at = {c, r, i};
            bm_op_check(t, r, op, op_problem, &at);
            if (op->kind > BM_OP_RECV) continue;
            if (op->kind == BM_OP_COMPUTE) {
                if (op->module < 0 || op->module >= c->N) continue;
                if (op->module == c->bb && op->chunk >= 0 && op->chunk < c->C && bm_table_chunk_rank(c->t, op->chunk) != r)
                    bad_op(c, r, i, "backbone chunk %d lives on rank %d (%s), not rank %d", op->chunk,
                           bm_table_chunk_rank(c->t, op->chunk),
                           c->t->chunk_rank ? "the table's chunk_rank" : bm_backbone_v_shaped(c->t->backbone) ? "the V placement" : "chunk % pp",
                           r);
                if (op->pass <= BM_PASS_B && !c->active[op->module])
                    bad_op(c, r, i, "policy none runs the backbone only");
                continue;
            }
            int pm, pc, pp;
            if (op->tensor >= 0 && op->tensor < t->n_tensors && bm_flow_producer(c->flow, op->tensor, &pm, &pc, &pp))
                bad_op(c, r, i, "no module of the graph makes tensor %s", t->tensors[op->tensor].name);
        }
    }
    return m->len ? BM_ERR : BM_OK;
}

/* ---------------------------------------------------------------- 1. counts */

static void describe_compute(const struct ctx *c, long long key, char *buf, size_t n)
{
    int mb = (int)(key % c->M);
    int pass = (int)(key / c->M % 3);
    int u = (int)(key / c->M / 3);
    int module = u < c->N ? u : c->bb, chunk = u < c->N ? -1 : u - c->N;
    struct bm_op o = compute_op(module, chunk, pass, mb);
    char a[BM_MAX_NAME + 64];
    act(c, &o, a, sizeof a);
    if (chunk >= 0)
        snprintf(buf, n, "%s (%s chunk %d, rank %d)", a, c->t->modules[module].name, chunk,
                 bm_table_chunk_rank(c->t, chunk));
    else
        snprintf(buf, n, "%s", a);
}

static int check_counts(struct ctx *c)
{
    const struct bm_table *t = c->t;
    struct msg *m = &c->msg;
    size_t nkeys = (size_t)(c->N + c->C) * 3 * (size_t)c->M;
    c->cpos = bm_malloc(nkeys * sizeof *c->cpos);
    c->cpos2 = bm_malloc(nkeys * sizeof *c->cpos2);
    if (!c->cpos || !c->cpos2) return oom(c, "op index");
    for (size_t k = 0; k < nkeys; k++) c->cpos[k] = c->cpos2[k] = -1;
    if (bm_match_build(t, &c->mt, c->err)) return BM_ERR;

    int cn = 0, missing = 0, dup = 0, unmatched = 0, unexpected = 0, frozen = 0;
    for (int r = 0; r < c->P; r++) {
        const struct bm_rank_ops *ro = &t->ranks[r];
        for (int i = 0; i < ro->n_ops; i++) {
            const struct bm_op *op = &ro->ops[i];
            if (op->kind != BM_OP_COMPUTE) continue;
            long long k = ckey(c, op->module, op->chunk, op->pass, op->mb);
            if (c->cpos[k] < 0) c->cpos[k] = POS(r, i);
            else if (c->cpos2[k] < 0) c->cpos2[k] = POS(r, i);
        }
    }
    /* Compute ops: which should exist? Backbone (chunk, F/B, mb); active modules (F/B, mb);
     * W of every (chunk,) mb of a module whose backward is split, and of no other. */
    for (size_t k = 0; k < nkeys; k++) {
        int u = (int)(k / (size_t)c->M / 3), pass = (int)(k / (size_t)c->M % 3);
        if (u < c->N && (u == c->bb || !c->active[u])) continue;
        if (pass != BM_PASS_F && !bm_table_has_pass(t, u < c->N ? u : c->bb, pass)) {
            if (c->cpos[k] >= 0) frozen++; /* a frozen module's pass that does not exist */
            continue;
        }
        if (pass == BM_PASS_W && !c->split[u < c->N ? u : c->bb]) {
            if (c->cpos[k] >= 0) unexpected++;
            continue;
        }
        if (c->cpos[k] < 0) missing++;
        else if (c->cpos2[k] >= 0) dup++;
    }
    for (int k = 0; k < c->mt.n_msgs; k++) {
        const struct bm_msg *e = &c->mt.msgs[k];
        if (e->n_send != 1 || e->n_recv != 1) unmatched++;
    }
    if (!missing && !dup && !unmatched && !unexpected && !frozen) return BM_OK;

    msg_line(m, "invariant 1 (counts) violated: %d compute op%s missing, %d duplicated, %d "
             "unmatched send/recv", missing, missing == 1 ? "" : "s", dup, unmatched);
    if (frozen)
        msg_line(m, "  %d backward op%s of frozen modules that have none", frozen, frozen == 1 ? "" : "s");
    if (unexpected)
        msg_line(m, "  %d weight-gradient W op%s of the backbone, whose backward the %s schedule "
                 "does not split", unexpected, unexpected == 1 ? "" : "s", bm_backbone_name(t->backbone));
    char d[BM_MAX_NAME + 128], a[BM_MAX_NAME + 64];
    for (size_t k = 0; k < nkeys && cn < 64; k++) {
        int u = (int)(k / (size_t)c->M / 3), pass = (int)(k / (size_t)c->M % 3);
        if (u < c->N && (u == c->bb || !c->active[u])) continue;
        if (pass != BM_PASS_F && !bm_table_has_pass(t, u < c->N ? u : c->bb, pass)) {
            if (c->cpos[k] < 0) continue;
            describe_compute(c, (long long)k, d, sizeof d);
            msg_line(m, "  unexpected: %s at rank %d op #%d (module \"%s\" is frozen and %s; "
                     "docs/spec.md \"Frozen modules\")", d, POS_RANK(c->cpos[k]), POS_IDX(c->cpos[k]),
                     t->modules[u < c->N ? u : c->bb].name,
                     pass == BM_PASS_W ? "has no weight gradient" : "nothing upstream of it trains");
            cn++;
            continue;
        }
        if (pass == BM_PASS_W && !c->split[u < c->N ? u : c->bb]) {
            if (c->cpos[k] < 0) continue;
            describe_compute(c, (long long)k, d, sizeof d);
            msg_line(m, "  unexpected: %s at rank %d op #%d (hint: use --backbone zb-h1 or "
                     "zb-interleaved for a split backward, or drop the W)", d,
                     POS_RANK(c->cpos[k]), POS_IDX(c->cpos[k]));
            cn++;
            continue;
        }
        if (c->cpos[k] < 0) {
            describe_compute(c, (long long)k, d, sizeof d);
            if (pass == BM_PASS_W)
                msg_line(m, "  missing: %s (the weight-gradient W of a split backward: every B "
                         "needs its W on the same rank)", d);
            else
                msg_line(m, "  missing: %s", d);
            cn++;
        } else if (c->cpos2[k] >= 0) {
            describe_compute(c, (long long)k, d, sizeof d);
            msg_line(m, "  duplicated: %s at rank %d op #%d and rank %d op #%d", d,
                     POS_RANK(c->cpos[k]), POS_IDX(c->cpos[k]), POS_RANK(c->cpos2[k]),
                     POS_IDX(c->cpos2[k]));
            cn++;
        }
    }
    for (int k = 0; k < c->mt.n_msgs && cn < 64; k++) {
        const struct bm_msg *e = &c->mt.msgs[k];
        if (e->n_send == 1 && e->n_recv == 1) continue;
        cn++;
        struct bm_op so = {BM_OP_SEND, 0, -1, -1, e->mb, e->dst, e->tensor};
        struct bm_op ro = {BM_OP_RECV, 0, -1, -1, e->mb, e->src, e->tensor};
        char sa[BM_MAX_NAME + 64];
        act(c, &so, sa, sizeof sa);
        act(c, &ro, a, sizeof a);
        if (e->n_send == 0)
            msg_line(m, "  unmatched: %s at rank %d op #%d has no matching %s on rank %d", a,
                     e->dst, e->recv_op, sa, e->src);
        else if (e->n_recv == 0)
            msg_line(m, "  unmatched: %s at rank %d op #%d has no matching %s on rank %d", sa,
                     e->src, e->send_op, a, e->dst);
        if (e->n_send > 1)
            msg_line(m, "  duplicated: %s %d times (rank %d op #%d and op #%d ...)", sa,
                     e->n_send, e->src, e->send_op, e->send_op2);
        if (e->n_recv > 1)
            msg_line(m, "  duplicated: %s %d times (rank %d op #%d and op #%d ...)", a,
                     e->n_recv, e->dst, e->recv_op, e->recv_op2);
    }
    if (cn >= 64) msg_line(m, "  ... (only the first 64 problems are listed)");
    return msg_done(m);
}

/* ---------------------------------------------------------------- 2. deadlock freedom */

/* bm_match_deadlock_report's lines, its headline under the invariant's name */
static void deadlock_line(void *ctx, const char *text)
{
    struct ctx *c = ctx;
    if (c->deadlock_first) msg_line(&c->msg, "invariant 2 (deadlock freedom) violated: %s", text);
    else msg_line(&c->msg, "%s", text);
    c->deadlock_first = 0;
}

static int check_deadlock(struct ctx *c)
{
    const struct bm_table *t = c->t;
    int P = c->P, rc = BM_ERR;
    int *pc = bm_calloc((size_t)P, sizeof *pc);
    int *work = bm_malloc((size_t)P * sizeof *work);
    int n_msgs = c->mt.n_msgs;
    int *waiter = bm_malloc((size_t)(n_msgs > 0 ? n_msgs : 1) * sizeof *waiter);
    uint8_t *sent = bm_calloc((size_t)(n_msgs > 0 ? n_msgs : 1), 1); /* the message's send has run */
    if (!pc || !work || !waiter || !sent) {
        oom(c, "deadlock check");
        goto out;
    }
    for (int k = 0; k < n_msgs; k++) waiter[k] = -1;
    int n_work = 0;
    for (int r = P - 1; r >= 0; r--) work[n_work++] = r;
    /* Each rank is on the worklist at most once at a time: it is pushed initially and then
     * only by the single send its current recv waits for. */
    while (n_work) {
        int r = work[--n_work];
        const struct bm_rank_ops *ro = &t->ranks[r];
        while (pc[r] < ro->n_ops) {
            const struct bm_op *op = &ro->ops[pc[r]];
            if (op->kind == BM_OP_SEND) {
                int k = c->mt.msg_of[c->mt.base[r] + pc[r]];
                sent[k] = 1;
                if (waiter[k] >= 0) {
                    work[n_work++] = waiter[k];
                    waiter[k] = -1;
                }
            } else if (op->kind == BM_OP_RECV) {
                int k = c->mt.msg_of[c->mt.base[r] + pc[r]];
                if (!sent[k]) {
                    waiter[k] = r;
                    break;
                }
            }
            pc[r]++;
        }
    }
    int blocked = 0;
    for (int r = 0; r < P; r++) blocked += pc[r] < t->ranks[r].n_ops;
    if (!blocked) {
        rc = BM_OK;
        goto out;
    }

    struct msg *m = &c->msg;
    c->deadlock_first = 1;
    bm_match_deadlock_report(t, &c->mt, pc, deadlock_line, c);
    msg_line(m, "hint: a recv must come after the point where its sender can reach the "
             "matching send; move the recv later or the send earlier");
    msg_done(m);
out:
    bm_free(pc);
    bm_free(work);
    bm_free(waiter);
    bm_free(sent);
    return rc;
}

/* ---------------------------------------------------------------- 3. backbone order */

static int check_order(struct ctx *c)
{
    const struct bm_table *t = c->t;
    size_t n = (size_t)bm_backbone_n_steps(t->backbone, c->V, c->M);
    struct bm_bb_step *want = bm_malloc(n * sizeof *want);
    if (!want) return oom(c, "backbone order");
    int rc = BM_OK;
    for (int r = 0; r < c->P && rc == BM_OK; r++) {
        struct bm_err e;
        if (bm_backbone_order(t->backbone, c->P, c->V, c->M, r, t->warmup_extra, want, &e)) {
            msg_line(&c->msg, "invariant 3 (backbone order) violated: the table's schedule "
                     "cannot be rebuilt");
            msg_line(&c->msg, "  %s", e.msg);
            rc = msg_done(&c->msg);
            break;
        }
        /* a frozen backbone keeps only the passes it has (docs/spec.md "Frozen modules") */
        size_t nw = 0;
        for (size_t j = 0; j < n; j++)
            if (want[j].pass == BM_PASS_F || bm_table_has_pass(t, c->bb, want[j].pass)) want[nw++] = want[j];
        const struct bm_rank_ops *ro = &t->ranks[r];
        size_t k = 0;
        for (int i = 0; i < ro->n_ops; i++) {
            const struct bm_op *op = &ro->ops[i];
            if (op->kind != BM_OP_COMPUTE || op->module != c->bb) continue;
            /* counts passed: exactly 2·V·M (3·V·M split) backbone ops on this rank */
            if (k < nw && op->pass == want[k].pass && op->chunk == want[k].chunk &&
                op->mb == want[k].mb) {
                k++;
                continue;
            }
            char a[BM_MAX_NAME + 64], b[BM_MAX_NAME + 64];
            act(c, op, a, sizeof a);
            if (k < nw) {
                struct bm_op w = compute_op(c->bb, want[k].chunk, want[k].pass, want[k].mb);
                act(c, &w, b, sizeof b);
            } else {
                snprintf(b, sizeof b, "nothing");
            }
            msg_line(&c->msg, "invariant 3 (backbone order) violated: rank %d's backbone ops "
                     "differ from %s (P=%d V=%d M=%d, warm-up %d)", r,
                     bm_backbone_name(t->backbone), c->P, c->V, c->M,
                     bm_backbone_warmup(t->backbone, c->P, c->V, c->M, r, t->warmup_extra));
            msg_line(&c->msg, "  rank %d backbone position %zu (op #%d): expected %s, found %s",
                     r, k, i, b, a);
            /* a few expected ops for context */
            char ctxs[512];
            size_t len = 0;
            ctxs[0] = 0;
            for (size_t j = k; j < nw && j < k + 8; j++) {
                struct bm_op w = compute_op(c->bb, want[j].chunk, want[j].pass, want[j].mb);
                act(c, &w, b, sizeof b);
                len += (size_t)snprintf(ctxs + len, sizeof ctxs - len, " %s", b);
                if (len >= sizeof ctxs) break;
            }
            msg_line(&c->msg, "  expected from there:%s%s", ctxs, k + 8 < nw ? " ..." : "");
            rc = msg_done(&c->msg);
            break;
        }
    }
    bm_free(want);
    return rc;
}

/* ---------------------------------------------------------------- 4. dependencies */

/* Explain where tensor x (mb) comes from, relative to rank r op #i which lacks it. */
static void explain_source(struct ctx *c, int x, int mb, int r, int i, char *buf, size_t n)
{
    int pm, pch, pp;
    if (bm_flow_producer(c->flow, x, &pm, &pch, &pp)) {
        snprintf(buf, n, "no module of the graph makes it");
        return;
    }
    char a[BM_MAX_NAME + 64];
    struct bm_op po = compute_op(pm, pch, pp, mb);
    act(c, &po, a, sizeof a);
    if (!c->active[pm]) {
        snprintf(buf, n, "made by %s, which policy none does not run", a);
        return;
    }
    long long pos = c->cpos[ckey(c, pm, pch, pp, mb)];
    int prank = POS_RANK(pos), pidx = POS_IDX(pos);
    if (prank == r) {
        snprintf(buf, n, "made by %s at rank %d op #%d, after this op", a, r, pidx);
        return;
    }
    const struct bm_rank_ops *ro = &c->t->ranks[r];
    int j;
    for (j = i + 1; j < ro->n_ops; j++)
        if (ro->ops[j].kind == BM_OP_RECV && ro->ops[j].tensor == x && ro->ops[j].mb == mb) break;
    if (j < ro->n_ops)
        snprintf(buf, n, "produced by %s on rank %d, received by op #%d, after this op", a,
                 prank, j);
    else
        snprintf(buf, n, "produced by %s on rank %d, no recv before this op", a, prank);
}

static int check_deps(struct ctx *c)
{
    const struct bm_table *t = c->t;
    int M = c->M;
    /* have[x*M + mb] == r + 1: tensor x of mb is on rank r (stamps avoid clearing per rank) */
    int *have = bm_calloc((size_t)(c->T > 0 ? c->T : 1) * (size_t)M, sizeof *have);
    int *fdone = bm_calloc((size_t)(c->N + c->C) * (size_t)M, sizeof *fdone);
    int *bdone = bm_calloc((size_t)(c->N + c->C) * (size_t)M, sizeof *bdone);
    if (!have || !fdone || !bdone) {
        bm_free(have);
        bm_free(fdone);
        bm_free(bdone);
        return oom(c, "dependency check");
    }
    int rc = BM_OK;
    char a[BM_MAX_NAME + 64], why[BM_MAX_NAME * 2 + 128];
    for (int r = 0; r < c->P && rc == BM_OK; r++) {
        const struct bm_rank_ops *ro = &t->ranks[r];
        int stamp = r + 1;
        for (int i = 0; i < ro->n_ops && rc == BM_OK; i++) {
            const struct bm_op *op = &ro->ops[i];
            if (op->kind == BM_OP_RECV) {
                have[(size_t)op->tensor * M + op->mb] = stamp;
                continue;
            }
            if (op->kind == BM_OP_SEND) {
                if (have[(size_t)op->tensor * M + op->mb] == stamp) continue;
                act(c, op, a, sizeof a);
                explain_source(c, op->tensor, op->mb, r, i, why, sizeof why);
                msg_line(&c->msg, "invariant 4 (dependencies) violated: rank %d op #%d %s sends "
                         "a tensor the rank does not have yet", r, i, a);
                msg_line(&c->msg, "  rank %d op #%d %s sends %s (mb %d), which is not on rank %d "
                         "yet: %s", r, i, a, tname(c, op->tensor), op->mb, r, why);
                rc = msg_done(&c->msg);
                break;
            }
            int u = op->module == c->bb ? c->N + op->chunk : op->module;
            const char *mname = t->modules[op->module].name;
            char desc[BM_MAX_NAME + 64];
            if (op->module == c->bb)
                snprintf(desc, sizeof desc, "%s %s chunk %d mb %d", mname,
                         bm_pass_name((enum bm_pass)op->pass), op->chunk, op->mb);
            else
                snprintf(desc, sizeof desc, "%s %s mb %d", mname,
                         bm_pass_name((enum bm_pass)op->pass), op->mb);
            act(c, op, a, sizeof a);
            if (op->pass == BM_PASS_B && fdone[(size_t)u * M + op->mb] != stamp) {
                struct bm_op fo = compute_op(op->module, op->chunk, BM_PASS_F, op->mb);
                char fa[BM_MAX_NAME + 64];
                act(c, &fo, fa, sizeof fa);
                long long fp = c->cpos[ckey(c, op->module, op->chunk, BM_PASS_F, op->mb)];
                msg_line(&c->msg, "invariant 4 (dependencies) violated: rank %d op #%d %s runs "
                         "a backward before its own forward on that rank", r, i, a);
                msg_line(&c->msg, "  rank %d op #%d %s (%s) needs its forward %s earlier on rank "
                         "%d (activations are local), but %s is at rank %d op #%d", r, i, a,
                         desc, fa, r, fa, POS_RANK(fp), POS_IDX(fp));
                rc = msg_done(&c->msg);
                break;
            }
            if (op->pass == BM_PASS_W && bdone[(size_t)u * M + op->mb] != stamp) {
                struct bm_op bo = compute_op(op->module, op->chunk, BM_PASS_B, op->mb);
                char ba[BM_MAX_NAME + 64];
                act(c, &bo, ba, sizeof ba);
                long long bp = c->cpos[ckey(c, op->module, op->chunk, BM_PASS_B, op->mb)];
                if (POS_RANK(bp) == r) {
                    msg_line(&c->msg, "invariant 4 (dependencies) violated: rank %d op #%d %s runs "
                             "a weight-gradient W before its B", r, i, a);
                    msg_line(&c->msg, "  rank %d op #%d %s (%s) needs %s earlier on rank %d (W uses "
                             "what B kept), but %s is at op #%d, after it", r, i, a, desc, ba, r, ba,
                             POS_IDX(bp));
                } else {
                    msg_line(&c->msg, "invariant 4 (dependencies) violated: rank %d op #%d %s runs "
                             "a weight-gradient W on a rank other than its B's", r, i, a);
                    msg_line(&c->msg, "  rank %d op #%d %s (%s) needs %s on rank %d (W uses what B "
                             "kept, which stays on B's rank), but %s is at rank %d op #%d", r, i, a,
                             desc, ba, r, ba, POS_RANK(bp), POS_IDX(bp));
                    msg_line(&c->msg, "hint: move %s to rank %d, after %s", a, POS_RANK(bp), ba);
                }
                rc = msg_done(&c->msg);
                break;
            }
            if (op->pass == BM_PASS_W) continue; /* needs and makes no tensor */
            const struct bm_flow_op *fo = bm_flow_get(c->flow, op->module, op->chunk, op->pass);
            for (int k = 0; fo && k < fo->n_needs; k++) {
                int x = fo->needs[k], pm, pch, pp;
                if (have[(size_t)x * M + op->mb] == stamp) continue;
                if (!bm_flow_producer(c->flow, x, &pm, &pch, &pp) && !c->active[pm])
                    continue; /* policy none: modules other than the backbone are ignored */
                explain_source(c, x, op->mb, r, i, why, sizeof why);
                msg_line(&c->msg, "invariant 4 (dependencies) violated: rank %d op #%d %s runs "
                         "before one of its inputs is on the rank", r, i, a);
                msg_line(&c->msg, "  rank %d op #%d %s (%s) needs %s (mb %d), which is not on "
                         "rank %d yet: %s", r, i, a, desc, tname(c, x), op->mb, r, why);
                rc = msg_done(&c->msg);
                break;
            }
            if (rc != BM_OK) break;
            if (op->pass == BM_PASS_F) fdone[(size_t)u * M + op->mb] = stamp;
            if (op->pass == BM_PASS_B) bdone[(size_t)u * M + op->mb] = stamp;
            for (int k = 0; fo && k < fo->n_makes; k++)
                have[(size_t)fo->makes[k] * M + op->mb] = stamp;
        }
    }
    bm_free(have);
    bm_free(fdone);
    bm_free(bdone);
    return rc;
}

/* ---------------------------------------------------------------- 5. residency */

/* For a frozen module without backward (docs/planner.md "Frozen encoders"), calls visit(k, mb)
 * for each (module k, microbatch) whose output op i of rank r uses: its own F, a compute op
 * needing one of k's tensors, a send of one. */
static void none_uses(struct ctx *c, const struct bm_op *op, void (*visit)(void *, int, int), void *arg)
{
    int pm, pc, pp;
    if (op->kind == BM_OP_SEND) {
        if (op->tensor >= 0 && !bm_flow_producer(c->flow, op->tensor, &pm, &pc, &pp) && pm != c->bb &&
            bm_table_backward(c->t, pm) == BM_BACKWARD_NONE)
            visit(arg, pm, op->mb);
        return;
    }
    if (op->kind != BM_OP_COMPUTE || op->pass == BM_PASS_W) return;
    if (op->pass == BM_PASS_F && op->module != c->bb && bm_table_backward(c->t, op->module) == BM_BACKWARD_NONE)
        visit(arg, op->module, op->mb);
    const struct bm_flow_op *fo = bm_flow_get(c->flow, op->module, op->chunk, op->pass);
    for (int k = 0; fo && k < fo->n_needs; k++)
        if (!bm_flow_producer(c->flow, fo->needs[k], &pm, &pc, &pp) && pm != c->bb && pm != op->module &&
            bm_table_backward(c->t, pm) == BM_BACKWARD_NONE)
            visit(arg, pm, op->mb);
}

struct lastuse { int *last; int M, i; int *live; };
static void mark_last(void *a, int k, int mb)
{
    struct lastuse *u = a;
    u->last[(size_t)k * u->M + mb] = u->i;
}
static void drop_last(void *a, int k, int mb)
{
    struct lastuse *u = a;
    if (u->last[(size_t)k * u->M + mb] == u->i) {
        u->live[k]--;
        u->last[(size_t)k * u->M + mb] = -1; /* once, even when op i uses it twice */
    }
}

static int check_residency(struct ctx *c)
{
    const struct bm_table *t = c->t;
    if (t->policy != BM_POL_BIGMAC || t->window <= 0) return BM_OK;
    int U = t->unit > 0 ? t->unit : c->P;
    int per = (U + c->P - 1) / c->P;
    int *live = bm_calloc((size_t)c->N, sizeof *live);
    int *peak = bm_calloc((size_t)c->N, sizeof *peak);
    int *first = bm_malloc((size_t)c->N * sizeof *first);
    if (!live || !peak || !first) {
        bm_free(live);
        bm_free(peak);
        bm_free(first);
        return oom(c, "residency check");
    }
    /* a frozen module without backward: a microbatch is live on a rank from its F until the
     * rank's last op that uses its output (the send right after it, or its consumer's F) */
    int any_none = 0;
    for (int k = 0; k < c->N; k++) any_none |= k != c->bb && bm_table_backward(t, k) == BM_BACKWARD_NONE;
    struct lastuse lu = {NULL, c->M, 0, live};
    if (any_none && !(lu.last = bm_malloc((size_t)c->N * (size_t)c->M * sizeof *lu.last))) {
        bm_free(live);
        bm_free(peak);
        bm_free(first);
        return oom(c, "residency check");
    }
    int bad = 0;
    for (int r = 0; r < c->P; r++) {
        const struct bm_rank_ops *ro = &t->ranks[r];
        for (int k = 0; k < c->N; k++) live[k] = peak[k] = 0, first[k] = -1;
        if (any_none) {
            for (size_t q = 0; q < (size_t)c->N * (size_t)c->M; q++) lu.last[q] = -1;
            for (lu.i = 0; lu.i < ro->n_ops; lu.i++) none_uses(c, &ro->ops[lu.i], mark_last, &lu);
        }
        for (int i = 0; i < ro->n_ops; i++) {
            const struct bm_op *op = &ro->ops[i];
            if (any_none && op->kind != BM_OP_COMPUTE) { /* a send may be a last use */
                lu.i = i;
                none_uses(c, op, drop_last, &lu);
            }
            if (op->kind != BM_OP_COMPUTE || op->module == c->bb) {
                if (any_none && op->kind == BM_OP_COMPUTE) {
                    lu.i = i;
                    none_uses(c, op, drop_last, &lu);
                }
                continue;
            }
            int k = op->module;
            if (bm_table_backward(t, k) == BM_BACKWARD_NONE) {
                int lim = t->modules[k].role == BM_ROLE_ENCODER ? t->window * per : per;
                if (op->pass == BM_PASS_F && ++live[k] > peak[k]) peak[k] = live[k];
                if (live[k] > lim && first[k] < 0) first[k] = i;
                lu.i = i;
                none_uses(c, op, drop_last, &lu);
                continue;
            }
            if (any_none) {
                lu.i = i;
                none_uses(c, op, drop_last, &lu);
            }
            if (op->pass == (c->split[k] ? BM_PASS_W : BM_PASS_B)) {
                live[k]--;
                continue;
            }
            if (op->pass != BM_PASS_F) continue;
            int lim = t->modules[k].role == BM_ROLE_ENCODER ? t->window * per : per;
            if (++live[k] > peak[k]) peak[k] = live[k];
            if (live[k] > lim && first[k] < 0) first[k] = i;
        }
        for (int k = 0; k < c->N; k++) {
            if (first[k] < 0) continue;
            const struct bm_table_module *md = &t->modules[k];
            int enc = md->role == BM_ROLE_ENCODER;
            int lim = enc ? t->window * per : per;
            if (!bad++)
                msg_line(&c->msg, "invariant 5 (residency) violated: live nested microbatches "
                         "exceed the bigmac bound (window %d, unit %d, pp %d)", t->window, U,
                         c->P);
            char a[BM_MAX_NAME + 64];
            act(c, &ro->ops[first[k]], a, sizeof a);
            if (enc && bm_table_backward(t, k) == BM_BACKWARD_NONE)
                msg_line(&c->msg, "  rank %d: frozen encoder %s (no backward) has %d outputs waiting "
                         "for their consumer at op #%d %s (peak %d), limit window*ceil(unit/pp) = "
                         "%d*%d = %d", r, md->name, lim + 1, first[k], a, peak[k], t->window, per, lim);
            else if (enc)
                msg_line(&c->msg, "  rank %d: encoder %s has %d live microbatches at op #%d %s "
                         "(peak %d), limit window*ceil(unit/pp) = %d*%d = %d", r, md->name,
                         lim + 1, first[k], a, peak[k], t->window, per, lim);
            else
                msg_line(&c->msg, "  rank %d: generator %s has %d live microbatches at op #%d "
                         "%s (peak %d), limit ceil(unit/pp) = %d", r, md->name, lim + 1,
                         first[k], a, peak[k], lim);
        }
    }
    if (bad)
        msg_line(&c->msg, "hint: a unit's encoder forwards may start only when the backward of "
                 "the unit W earlier has run (docs/design.md §6); or raise --window");
    bm_free(lu.last);
    bm_free(live);
    bm_free(peak);
    bm_free(first);
    return bad ? msg_done(&c->msg) : BM_OK;
}

/* ---------------------------------------------------------------- entry points */

int bm_verify(const struct bm_table *t, struct bm_err *err)
{
    struct bm_err local;
    if (!err) err = &local;
    if (!t) return bm_err_set(err, "verify: no table");
    struct ctx c;
    memset(&c, 0, sizeof c);
    c.t = t;
    c.err = err;
    msg_init(&c.msg, err);
    int rc = BM_ERR;
    char *sf = NULL; /* bm_table_split_flags */

    if (check_table_fields(&c)) goto structure;
    c.P = t->pp;
    c.V = t->vpp;
    c.M = t->microbatches;
    c.C = c.P * c.V;
    c.N = t->n_modules;
    c.bb = t->backbone_module;
    c.active = bm_malloc((size_t)c.N * sizeof *c.active);
    if (!c.active) {
        oom(&c, "module flags");
        goto out;
    }
    for (int k = 0; k < c.N; k++) c.active[k] = t->policy != BM_POL_NONE || k == c.bb;
    c.split = bm_calloc((size_t)c.N, sizeof *c.split);
    sf = bm_calloc((size_t)c.N, 1);
    if (!sf) {
        oom(&c, "module flags");
        goto out;
    }
    if (!c.split) {
        oom(&c, "module flags");
        goto out;
    }
    if (get_flow(&c)) {
        if (c.msg.len) goto structure;
        goto out;
    }
    if (check_ops(&c)) goto structure;
    /* after the structure check: every op's module index is in range */
    /* the backbone's split is the schedule's; another module's, whether the table has a W */
    bm_table_split_flags(t, sf);
    for (int k = 0; k < c.N; k++) c.split[k] = k == c.bb ? bm_backbone_splits(t->backbone) : sf[k];
    if (check_counts(&c)) goto out;
    if (check_deadlock(&c)) goto out;
    if (check_order(&c)) goto out;
    if (check_deps(&c)) goto out;
    if (check_residency(&c)) goto out;
    rc = BM_OK;
    goto out;

structure: {
    /* err->msg holds the detail lines; put the headline first */
    long n = c.msg.dropped + (c.msg.len > 0);
    for (const char *p = err->msg; *p; p++) n += *p == '\n';
    int more = c.msg.dropped > 0;
    msg_done(&c.msg);
    char details[sizeof err->msg];
    snprintf(details, sizeof details, "%s", err->msg);
    bm_err_set(err, "invariant 0 (structure) violated: %s%ld problem%s\n%s", more ? "at least " : "",
               n, n == 1 ? "" : "s", details);
}
out:
    bm_flow_free(c.own_flow);
    bm_free(c.active);
    bm_free(c.split);
    bm_free(sf);
    bm_free(c.cpos);
    bm_free(c.cpos2);
    bm_match_free(&c.mt);
    return rc;
}

void bm_table_peak_live(const struct bm_table *t, int *out)
{
    int N = t->n_modules;
    /* a microbatch of a module with a split backward stays live until its W */
    char split_stack[64], *split = N <= 64 ? split_stack : bm_calloc((size_t)N, 1);
    if (!split) {
        for (long k = 0; k < (long)t->pp * N; k++) out[k] = 0;
        return;
    }
    for (int k = 0; k < N; k++) split[k] = k == t->backbone_module && bm_backbone_splits(t->backbone);
    for (int r = 0; r < t->pp; r++)
        for (int i = 0; i < t->ranks[r].n_ops; i++) {
            const struct bm_op *op = &t->ranks[r].ops[i];
            if (op->kind == BM_OP_COMPUTE && op->pass == BM_PASS_W && op->module >= 0 && op->module < N)
                split[op->module] = 1;
        }
    for (int r = 0; r < t->pp; r++) {
        int *peak = out + (size_t)r * N;
        for (int k = 0; k < N; k++) peak[k] = 0;
        int live_stack[64], *live = N <= 64 ? live_stack : bm_calloc((size_t)N, sizeof *live);
        if (!live) continue;
        for (int k = 0; k < N; k++) live[k] = 0;
        const struct bm_rank_ops *ro = &t->ranks[r];
        for (int i = 0; i < ro->n_ops; i++) {
            const struct bm_op *op = &ro->ops[i];
            if (op->kind != BM_OP_COMPUTE || op->module < 0 || op->module >= N) continue;
            if (op->module != t->backbone_module && t->modules[op->module].backward == BM_BACKWARD_NONE)
                continue; /* frozen without backward: keeps nothing after its forward */
            if (op->pass == BM_PASS_F) {
                if (++live[op->module] > peak[op->module]) peak[op->module] = live[op->module];
            } else if (op->pass == (split[op->module] ? BM_PASS_W : BM_PASS_B) && live[op->module] > 0) {
                live[op->module]--;
            }
        }
        if (live != live_stack) bm_free(live);
    }
    if (split != split_stack) bm_free(split);
}
