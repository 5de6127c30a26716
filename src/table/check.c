/* check.c — the one op validator (see table.h): the field rules every reader of a table relies
 * on before it indexes anything with an op's fields. The verifier adds the semantic rules
 * (a chunk on its rank, the policy's modules, the dataflow) on top. */
#include <stdarg.h>
#include <stdio.h>

#include "table/table.h"
#include "util/util.h"

struct sink {
    void (*bad)(void *ctx, const char *why);
    void *ctx;
    int n;
};

static void say(struct sink *k, const char *fmt, ...)
#ifdef __GNUC__
    __attribute__((format(printf, 2, 3)))
#endif
    ;
static void say(struct sink *k, const char *fmt, ...)
{
    k->n++;
    if (!k->bad) return;
    char why[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    k->bad(k->ctx, why);
}

int bm_op_check(const struct bm_table *t, int r, const struct bm_op *op,
                void (*bad)(void *ctx, const char *why), void *ctx)
{
    struct sink k = {bad, ctx, 0};
    int P = t->pp, M = t->microbatches, N = t->n_modules, C = t->pp * (t->vpp > 0 ? t->vpp : 1);
    if (op->kind > BM_OP_RECV) {
        say(&k, "unknown op kind %d", op->kind);
        return k.n;
    }
    if (op->mb < 0 || op->mb >= M) say(&k, "mb %d is out of range 0..%d", op->mb, M - 1);
    if (op->kind == BM_OP_COMPUTE) {
        if (op->module < 0 || op->module >= N) {
            say(&k, "module index %d is out of range (the table has %d modules)", op->module, N);
            return k.n;
        }
        if (op->pass > BM_PASS_W) say(&k, "unknown pass %d", op->pass);
        if (op->module == t->backbone_module) {
            if (op->chunk < 0 || op->chunk >= C)
                say(&k, "backbone chunk %d is out of range 0..%d", op->chunk, C - 1);
        } else if (op->chunk != -1) {
            say(&k, "module %s is not the backbone, so its chunk must be -1 (got %d)", t->modules[op->module].name,
                op->chunk);
        }
        return k.n;
    }
    if (op->peer < 0 || op->peer >= P) say(&k, "peer %d is not a rank 0..%d", op->peer, P - 1);
    else if (op->peer == r) say(&k, "a rank cannot %s itself", op->kind == BM_OP_SEND ? "send to" : "receive from");
    if (op->tensor < 0 || op->tensor >= t->n_tensors)
        say(&k, "tensor index %d is out of range 0..%d", op->tensor, t->n_tensors - 1);
    if (op->module < -1 || op->module >= N) say(&k, "module index %d is out of range", op->module);
    return k.n;
}

struct first {
    char *buf;
    size_t n;
};

static void first_why(void *ctx, const char *why)
{
    struct first *f = ctx;
    if (!f->buf[0]) snprintf(f->buf, f->n, "%s", why);
}

int bm_op_why(const struct bm_table *t, int r, const struct bm_op *op, char *why, size_t n)
{
    struct first f = {why, n};
    if (n) why[0] = 0;
    return bm_op_check(t, r, op, n ? first_why : NULL, &f);
}

/* The common case of bm_op_check, inline: true only for an op it would find nothing wrong with
 * (anything else goes through bm_op_check for the message). */
static inline int plainly_valid(int r, const struct bm_op *op, int P, int M, int N, int C, int T, int bb)
{
    if (op->mb < 0 || op->mb >= M) return 0;
    if (op->kind == BM_OP_COMPUTE)
        return op->module >= 0 && op->module < N && op->pass <= BM_PASS_W &&
               (op->module == bb ? op->chunk >= 0 && op->chunk < C : op->chunk == -1);
    return op->kind <= BM_OP_RECV && op->peer >= 0 && op->peer < P && op->peer != r && op->tensor >= 0 &&
           op->tensor < T && op->module >= -1 && op->module < N;
}

int bm_table_check_ops(const struct bm_table *t, const char *what, struct bm_err *err)
{
    int P = t->pp, M = t->microbatches, N = t->n_modules, C = t->pp * (t->vpp > 0 ? t->vpp : 1);
    if (t->pp < 1 || t->microbatches < 1 || !t->ranks)
        return bm_err_set(err, "%s: table has pp=%d microbatches=%d", what, t->pp, t->microbatches);
    for (int r = 0; r < t->pp; r++) {
        const struct bm_rank_ops *ro = &t->ranks[r];
        if (ro->n_ops < 0 || (ro->n_ops > 0 && !ro->ops))
            return bm_err_set(err, "%s: rank %d has a malformed op list (%d ops)", what, r, ro->n_ops);
        for (int i = 0; i < ro->n_ops; i++) {
            if (plainly_valid(r, &ro->ops[i], P, M, N, C, t->n_tensors, t->backbone_module)) continue;
            char why[512];
            if (!bm_op_why(t, r, &ro->ops[i], why, sizeof why)) continue;
            char a[BM_MAX_NAME + 64] = "";
            const struct bm_op *op = &ro->ops[i];
            if (op->kind == BM_OP_COMPUTE && (op->module < 0 || op->module >= t->n_modules))
                snprintf(a, sizeof a, " compute");
            else if (op->kind <= BM_OP_RECV) {
                a[0] = ' ';
                bm_op_format(t, op, a + 1, sizeof a - 1);
            }
            return bm_err_set(err, "%s: rank %d op #%d%s: %s", what, r, i, a, why);
        }
    }
    return BM_OK;
}
