/* run.c — the training driver around the op walker (see exec.h): steps, the gradient
 * all-reduce of replicated modules, AdamW, the per-step log and progress, the measured trace,
 * checkpoints and the final parameter dump. The same code drives one MPI rank per process or all
 * P ranks in one process (comm_local, cooperative round-robin). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "exec/ckpt.h"
#include "exec/exec.h"
#include "exec/trace.h"
#include "util/util.h"

/* Print a (multi-line) error the way the CLI does. */
static void print_error(const char *msg)
{
    const char *p = msg;
    while (*p) {
        const char *nl = strchr(p, '\n');
        int len = nl ? (int)(nl - p) : (int)strlen(p);
        if (len >= 5 && !strncmp(p, "hint:", 5)) fprintf(stderr, "bigmac: hint:%.*s\n", len - 5, p + 5);
        else if (len >= 2 && p[0] == ' ' && p[1] == ' ') fprintf(stderr, "%.*s\n", len, p);
        else fprintf(stderr, "bigmac: error: %.*s\n", len, p);
        p += len;
        if (*p == '\n') p++;
    }
    fflush(stderr);
}

/* A failure on this process: under MPI, say so and end the whole job (no peer may hang waiting
 * for us); in-process, hand the message back. */
static int fail(struct bm_comm *c, struct bm_err *err)
{
    if (!c->cooperative) {
        print_error(err->msg);
        c->ops->abort(c, 1);
    }
    return BM_ERR;
}

/* Cooperative walk of every local rank until all are done; a full round without progress is a
 * deadlock (the table's fault: bm_verify would have said so). */
static int walk(struct bm_exec **x, struct bm_comm *c, struct bm_err *err)
{
    int n = c->nlocal;
    if (!c->cooperative) {
        int done, prog;
        return bm_exec_advance(x[0], 1, &done, &prog, err);
    }
    int *done = bm_calloc((size_t)n, sizeof *done);
    if (!done) return bm_err_set(err, "out of memory");
    int rc = BM_OK;
    for (;;) {
        int all = 1, any = 0;
        for (int i = 0; i < n; i++) {
            if (done[i]) continue;
            int prog = 0;
            if ((rc = bm_exec_advance(x[i], 0, &done[i], &prog, err))) goto out;
            any |= prog > 0;
            all &= done[i];
        }
        if (all) break;
        if (!any) {
            rc = bm_err_set(err, "deadlock: no rank can make progress (run `bigmac verify` on the table)");
            goto out;
        }
    }
out:
    bm_free(done);
    return rc;
}

/* Sum the gradients of replicated instances over ranks. Instances are created in the same
 * order on every rank (replicas first, spec order), so instance i is the same module everywhere. */
static int allreduce_grads(struct bm_exec **x, struct bm_comm *c, struct bm_err *err)
{
    float **bufs = bm_calloc((size_t)c->nlocal, sizeof *bufs);
    if (!bufs) return bm_err_set(err, "out of memory");
    int rc = BM_OK;
    for (int i = 0; i < bm_exec_n_inst(x[0]) && rc == BM_OK; i++) {
        int module, chunk, rep;
        bm_exec_inst(x[0], i, &module, &chunk, &rep);
        if (!rep) continue;
        size_t n = 0;
        for (int l = 0; l < c->nlocal; l++) bufs[l] = bm_exec_inst_grads(x[l], i, &n);
        rc = c->ops->allreduce_sum(c, bufs, n, err);
    }
    bm_free(bufs);
    return rc;
}

/* Final parameters in spec module order (replicas from rank 0, backbone chunks in global order)
 * to path as raw floats. Every rank takes part (gather). Each rank packs
 * [uint64 float count of each local chunk, V of them][chunk floats in local order][replica floats]. */
static int dump_params(struct bm_exec **x, const struct bm_table *t, struct bm_comm *c, const char *path,
                       struct bm_err *err)
{
    int n = c->nlocal, V = t->vpp, P = t->pp, rc = BM_OK;
    const void **items = bm_calloc((size_t)n, sizeof *items);
    size_t *bytes = bm_calloc((size_t)n, sizeof *bytes), *out_bytes = bm_calloc((size_t)c->size, sizeof *out_bytes);
    char **packed = bm_calloc((size_t)n, sizeof *packed);
    char *all = NULL;
    FILE *f = NULL;
    if (!items || !bytes || !out_bytes || !packed) {
        rc = bm_err_set(err, "out of memory");
        goto out;
    }
    for (int l = 0; l < n; l++) {
        size_t total = 0, k;
        for (int i = 0; i < bm_exec_n_inst(x[l]); i++) bm_exec_inst_params(x[l], i, &k), total += k;
        size_t hdr = (size_t)V * sizeof(uint64_t);
        packed[l] = bm_malloc(hdr + total * sizeof(float) + 1);
        if (!packed[l]) {
            rc = bm_err_set(err, "out of memory");
            goto out;
        }
        uint64_t *h = (uint64_t *)(void *)packed[l];
        float *fl = (float *)(void *)(packed[l] + hdr);
        size_t off = 0;
        int j = 0;
        for (int pass = 0; pass < 2; pass++)
            for (int i = 0; i < bm_exec_n_inst(x[l]); i++) {
                int module, chunk, rep;
                bm_exec_inst(x[l], i, &module, &chunk, &rep);
                if (rep != pass) continue;
                float *p = bm_exec_inst_params(x[l], i, &k);
                if (!rep) h[j++] = k;
                memcpy(fl + off, p, k * sizeof(float));
                off += k;
            }
        items[l] = packed[l];
        bytes[l] = hdr + off * sizeof(float);
    }
    void *allv = NULL;
    if ((rc = c->ops->gather(c, items, bytes, &allv, out_bytes, err))) goto out;
    all = allv;
    if (c->first_rank != 0) goto out;
    if (!(f = fopen(path, "wb"))) {
        rc = bm_err_set(err, "%s: cannot open for writing", path);
        goto out;
    }
    size_t start[4096];
    if (P > 4096) {
        rc = bm_err_set(err, "too many ranks to dump");
        goto out;
    }
    start[0] = 0;
    for (int r = 1; r < P; r++) start[r] = start[r - 1] + out_bytes[r - 1];
    size_t hdr = (size_t)V * sizeof(uint64_t);
    for (int mod = 0; mod < t->n_modules; mod++) {
        if (mod == t->backbone_module) {
            for (int cidx = 0; cidx < P * V; cidx++) {
                int r = cidx % P, j = cidx / P;
                const uint64_t *h = (const uint64_t *)(const void *)(all + start[r]);
                size_t off = 0;
                for (int jj = 0; jj < j; jj++) off += h[jj];
                fwrite(all + start[r] + hdr + off * sizeof(float), sizeof(float), h[j], f);
            }
        } else {
            const uint64_t *h = (const uint64_t *)(const void *)all;
            size_t off = 0;
            for (int jj = 0; jj < V; jj++) off += h[jj];
            for (int i = 0; i < bm_exec_n_inst(x[0]); i++) {
                int module, chunk, rep;
                size_t k;
                bm_exec_inst(x[0], i, &module, &chunk, &rep);
                if (!rep) continue;
                bm_exec_inst_params(x[0], i, &k);
                if (module == mod) fwrite(all + hdr + off * sizeof(float), sizeof(float), k, f);
                off += k;
            }
        }
    }
out:
    if (f && fclose(f) && rc == BM_OK) rc = bm_err_set(err, "%s: write failed", path);
    if (packed)
        for (int l = 0; l < n; l++) bm_free(packed[l]);
    bm_free(packed), bm_free(items), bm_free(bytes), bm_free(out_bytes), bm_free(all);
    return rc;
}
