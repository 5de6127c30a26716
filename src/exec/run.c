/* run.c — the training driver around the op walker (see exec.h): steps, the gradient
 * all-reduce of replicated modules, AdamW, the per-step log and progress, the measured trace,
 * checkpoints and the final parameter dump. The same code drives one MPI rank per process or all
 * P ranks in one process (comm_local, cooperative round-robin). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "exec/ckpt.h"
#include "exec/exec.h"
#include "exec/trace.h"
#include "util/util.h"

/* CPU seconds this process has used. */
static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

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
        if (strncmp(err->msg, "rank ", 5)) { /* every message says which rank failed */
            char msg[sizeof err->msg];
            snprintf(msg, sizeof msg, "%s", err->msg);
            bm_err_set(err, "rank %d: %s", c->first_rank, msg);
        }
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
                int r = bm_table_chunk_rank(t, cidx), j = 0; /* its rank, its place among the rank's chunks */
                for (int c2 = 0; c2 < cidx; c2++) j += bm_table_chunk_rank(t, c2) == r;
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

/* A collective of step 'step' (outside the op walk, whose messages name the op) failed:
 * err = "step N: <err's message>", so a rank that fails there still says where it was. */
static int step_fail(long step, struct bm_err *err)
{
    char msg[sizeof err->msg];
    snprintf(msg, sizeof msg, "%s", err->msg);
    return bm_err_set(err, "step %ld: %s", step + 1, msg);
}

int bm_exec_run_step(struct bm_exec **x, struct bm_comm *c, long step, struct bm_err *err)
{
    for (int l = 0; l < c->nlocal; l++)
        if (bm_exec_step_prepare(x[l], step, err)) return BM_ERR;
    double origin = bm_now(); /* rank 0's clock is everyone's origin (plus each rank's offset) */
    if (c->ops->bcast(c, &origin, sizeof origin, err)) return step_fail(step, err);
    for (int l = 0; l < c->nlocal; l++)
        if (bm_exec_step_begin(x[l], origin, err)) return BM_ERR;
    if (walk(x, c, err)) return BM_ERR;
    for (int l = 0; l < c->nlocal; l++)
        if (bm_exec_step_finish(x[l], err)) return BM_ERR;
    if (allreduce_grads(x, c, err)) return step_fail(step, err);
    for (int l = 0; l < c->nlocal; l++) bm_exec_optimizer(x[l], step);
    return BM_OK;
}

/* One traced step's records as rank 0 gathered them: every rank's op times then its live-byte
 * trace (rank r's ob[r] bytes after ranks 0..r-1's). Only rank 0's are filled. */
struct traced_step {
    long step;
    void *all;
    size_t *ob; /* [P] */
};

/* Gather the step's op times and live-byte traces of every rank to rank 0 (into *ts). */
static int gather_trace(struct bm_exec **x, const struct bm_table *t, struct bm_comm *c, long step,
                        struct traced_step *ts, struct bm_err *err)
{
    int n = c->nlocal, P = t->pp, rc = BM_OK;
    const void **items = bm_calloc((size_t)n, sizeof *items);
    size_t *bytes = bm_calloc((size_t)n, sizeof *bytes);
    double **packed = bm_calloc((size_t)n, sizeof *packed);
    ts->step = step, ts->all = NULL;
    ts->ob = bm_calloc((size_t)P, sizeof *ts->ob);
    if (!items || !bytes || !packed || !ts->ob) {
        rc = bm_err_set(err, "out of memory");
        goto out;
    }
    for (int l = 0; l < n; l++) {
        int no, nm;
        const double *tm = bm_exec_op_times(x[l], &no), *mm = bm_exec_mem_trace(x[l], &nm);
        const double *mb = bm_exec_msg_bytes(x[l]);
        /* [3 times per op][message bytes per op][4 numbers per memory point] */
        packed[l] = bm_malloc(((size_t)no * 4 + (size_t)nm * 4 + 1) * sizeof(double));
        if (!packed[l]) {
            rc = bm_err_set(err, "out of memory");
            goto out;
        }
        memcpy(packed[l], tm, (size_t)no * 3 * sizeof(double));
        memcpy(packed[l] + (size_t)no * 3, mb, (size_t)no * sizeof(double));
        memcpy(packed[l] + (size_t)no * 4, mm, (size_t)nm * 4 * sizeof(double));
        items[l] = packed[l];
        bytes[l] = ((size_t)no * 4 + (size_t)nm * 4) * sizeof(double);
    }
    rc = c->ops->gather(c, items, bytes, &ts->all, ts->ob, err);
out:
    if (packed)
        for (int l = 0; l < n; l++) bm_free(packed[l]);
    bm_free(packed), bm_free(items), bm_free(bytes);
    return rc;
}

/* Rank 0: the measured timeline of a gathered step, written as a Chrome trace to path. */
static int write_gathered(const struct bm_table *t, const struct traced_step *ts, const char *path,
                          struct bm_err *err)
{
    int P = t->pp, rc = BM_OK;
    const double **times = bm_calloc((size_t)P, sizeof *times), **mem = bm_calloc((size_t)P, sizeof *mem);
    const double **msg = bm_calloc((size_t)P, sizeof *msg);
    int *n_mem = bm_calloc((size_t)P, sizeof *n_mem);
    struct bm_timeline *tl = NULL;
    if (!times || !mem || !msg || !n_mem) {
        rc = bm_err_set(err, "out of memory");
        goto out;
    }
    size_t off = 0;
    for (int r = 0; r < P; r++) {
        const double *base = (const double *)(const void *)((const char *)ts->all + off);
        int no = t->ranks[r].n_ops;
        times[r] = base;
        msg[r] = base + (size_t)no * 3;
        mem[r] = base + (size_t)no * 4;
        n_mem[r] = (int)((ts->ob[r] / sizeof(double) - (size_t)no * 4) / 4);
        off += ts->ob[r];
    }
    if ((rc = bm_exec_timeline(t, times, msg, mem, n_mem, &tl, err))) goto out;
    rc = bm_exec_trace_write(t, tl, path, err);
out:
    bm_timeline_free(tl);
    bm_free(times), bm_free(msg), bm_free(mem), bm_free(n_mem);
    return rc;
}

/* Gather the traced step's op times and live-byte traces to rank 0 and write the trace. */
static int write_trace(struct bm_exec **x, const struct bm_table *t, struct bm_comm *c, const char *path,
                       struct bm_err *err)
{
    struct traced_step ts;
    int rc = gather_trace(x, t, c, 0, &ts, err);
    if (rc == BM_OK && c->first_rank == 0) rc = write_gathered(t, &ts, path, err);
    bm_free(ts.all), bm_free(ts.ob);
    return rc;
}

/* --trace-from: the steps gathered so far, written after the last step (writing a file
 * between steps slowed the steps after it by 10-15% on this project's VM). */
static int write_traced_steps(const struct bm_table *t, const char *trace_path, const struct traced_step *ts,
                              int n, struct bm_err *err)
{
    size_t len = strlen(trace_path);
    if (len >= 5 && !strcmp(trace_path + len - 5, ".json")) len -= 5;
    for (int i = 0; i < n; i++) {
        char path[4096];
        if (snprintf(path, sizeof path, "%.*s.step%ld.json", (int)len, trace_path, ts[i].step + 1) >= (int)sizeof path)
            return bm_err_set(err, "%s: the path is too long", trace_path);
        if (write_gathered(t, &ts[i], path, err)) return BM_ERR;
    }
    return BM_OK;
}

/* Rank 0: warn when the table's placement over hosts (device.ranks_per_host, sim/hosts.h) is
 * not where the ranks actually run, since then `bigmac simulate` prices other hops than this run
 * pays for (docs/multihost.md). Training itself does not depend on it. */
static void placement_check(const struct bm_table *t, const struct bm_comm *c)
{
    int P = t->pp, H = t->device.ranks_per_host;
    if (c->cooperative || c->first_rank != 0 || (!c->hosts && H <= 0)) return;
    /* the run's own grouping: hosts[r] == hosts[s]; consecutive blocks of 'run_h' ranks? */
    int run_h = 1, blocks = c->hosts != NULL;
    if (c->hosts) {
        while (run_h < P && !strcmp(c->hosts[run_h], c->hosts[0])) run_h++;
        for (int r = 0; r < P && blocks; r++)
            for (int q = 0; q < P && blocks; q++)
                blocks = (r / run_h == q / run_h) == !strcmp(c->hosts[r], c->hosts[q]);
    }
    if (H <= 0) {
        fprintf(stderr, "bigmac: warning: the %d ranks run on several hosts, but the plan has no device.ranks_per_host: "
                        "`bigmac simulate` prices every transfer on the intra-host link\n", P);
        if (blocks) fprintf(stderr, "bigmac: hint: --ranks-per-host %d (or device.ranks_per_host) matches this run\n", run_h);
        return;
    }
    for (int r = 0; r < P; r++)
        for (int q = r + 1; q < P; q++) {
            int same_plan = r / H == q / H, same_run = !c->hosts || !strcmp(c->hosts[r], c->hosts[q]);
            if (same_plan == same_run) continue;
            fprintf(stderr, "bigmac: warning: device.ranks_per_host is %d (rank r on host r / %d), but ranks %d and %d "
                            "run on %s: the simulated placement is not this run's\n",
                    H, H, r, q, same_run ? "the same host" : "different hosts");
            if (blocks) fprintf(stderr, "bigmac: hint: --ranks-per-host %d matches this run\n", run_h);
            else fprintf(stderr, "bigmac: hint: mpirun --map-by slot with %d slots per host\n", H);
            return;
        }
}

/* --resume: every local rank loads its checkpoint; all ranks must be at the same step, which
 * becomes *start. */
static int resume(struct bm_exec **x, const struct bm_table *t, struct bm_comm *c, const char *dir, long *start,
                  struct bm_err *err)
{
    int nl = c->nlocal, rc = BM_OK;
    int *hi = bm_calloc((size_t)nl, sizeof *hi), *neg = bm_calloc((size_t)nl, sizeof *neg), a = 0, b = 0;
    if (!hi || !neg) rc = bm_err_set(err, "out of memory");
    for (int l = 0; l < nl && rc == BM_OK; l++) {
        long sd = 0;
        rc = bm_ckpt_load(x[l], t, c->first_rank + l, dir, &sd, err);
        hi[l] = (int)sd, neg[l] = -(int)sd;
    }
    if (rc == BM_OK) rc = c->ops->allreduce_max(c, hi, &a, err);
    if (rc == BM_OK) rc = c->ops->allreduce_max(c, neg, &b, err);
    bm_free(hi), bm_free(neg);
    if (rc) return rc;
    int lo = -b;
    if (lo != a) return bm_err_set(err, "%s: the ranks' checkpoints are of different steps (%d and %d)", dir, lo, a);
    *start = lo;
    return BM_OK;
}

/* One step's figures of every rank, gathered to rank 0: per rank a record of nrec doubles,
 * peak activation bytes per role, wall ms, CPU ms, walk ms, then the M lm and M gen losses. */
struct step_records {
    int nrec;
    double *rec;          /* [nlocal * nrec]: this process's ranks */
    const void **items;   /* [nlocal] */
    size_t *bytes;        /* [nlocal] */
    size_t *ob;           /* [P] */
};

static int gather_step(struct bm_exec **x, struct bm_comm *c, int M, double ms, double cpu_ms,
                       struct step_records *sr, void **allv, struct bm_err *err)
{
    for (int l = 0; l < c->nlocal; l++) {
        double *q = &sr->rec[(size_t)l * sr->nrec];
        struct bm_exec_rank_stats st;
        bm_exec_stats(x[l], &st);
        for (int r = 0; r < BM_N_ROLES; r++) q[r] = (double)st.peak_act[r];
        q[3] = ms, q[4] = cpu_ms, q[5] = st.ms;
        memcpy(q + 6, bm_exec_losses_lm(x[l]), (size_t)M * sizeof(double));
        memcpy(q + 6 + M, bm_exec_losses_gen(x[l]), (size_t)M * sizeof(double));
        sr->items[l] = q, sr->bytes[l] = (size_t)sr->nrec * sizeof(double);
    }
    return c->ops->gather(c, sr->items, sr->bytes, allv, sr->ob, err);
}

/* Rank 0 after a step: the loss summed exactly as the reference trainer does (float loss / M in
 * microbatch order), the caller's outputs, the progress line and the log line. BM_ERR when the
 * loss is not finite. */
static int report_step(const struct bm_exec_opts *o, FILE *pr, FILE *log, const double *all, int P, int M, int nrec,
                       long step, int steps, double ms, struct bm_err *err)
{
    double lm = 0, gen = 0;
    for (int m = 0; m < M; m++) {
        float a = 0, g = 0;
        for (int r = 0; r < P; r++) a += (float)all[(size_t)r * nrec + 6 + m], g += (float)all[(size_t)r * nrec + 6 + M + m];
        lm += a / M, gen += g / M;
    }
    double loss = lm + gen;
    if (o->loss_out) o->loss_out[step] = loss;
    if (o->ms_out) o->ms_out[step] = ms;
    if (o->peak_out)
        for (int r = 0; r < P; r++)
            for (int k = 0; k < BM_N_ROLES; k++) o->peak_out[r * BM_N_ROLES + k] = all[(size_t)r * nrec + k];
    if (pr) {
        double mn = all[3], mx = all[3], avg = 0, cpu = 0, walk = 0;
        for (int r = 0; r < P; r++) {
            double v = all[(size_t)r * nrec + 3];
            walk = BM_MAX(walk, all[(size_t)r * nrec + 5]);
            mn = v < mn ? v : mn, mx = v > mx ? v : mx, avg += v / P;
            cpu += all[(size_t)r * nrec + 4] / (v > 0 ? v : 1) / P * 100; /* process CPU / wall, mean over ranks */
        }
        fprintf(pr, "step %4ld/%d  loss %.4f  (lm %.4f  gen %.4f)  ms min/avg/max %.1f/%.1f/%.1f  walk %.1f ms"
                    "  cpu %.0f%%  peak act KiB enc/bb/gen:",
                step + 1, steps, loss, lm, gen, mn, avg, mx, walk, cpu);
        for (int r = 0; r < P; r++) {
            const double *q = &all[(size_t)r * nrec];
            fprintf(pr, "  r%d %.0f/%.0f/%.0f", r, q[0] / 1024, q[1] / 1024, q[2] / 1024);
        }
        fprintf(pr, "\n");
        fflush(pr);
    }
    if (log) {
        fprintf(log, "{\"step\": %ld, \"loss\": %.6f, \"lm\": %.6f, \"gen\": %.6f, \"ms\": %.3f, \"ranks\": [",
                step + 1, loss, lm, gen, ms);
        for (int r = 0; r < P; r++) {
            const double *q = &all[(size_t)r * nrec];
            fprintf(log, "%s{\"rank\": %d, \"peak_act_bytes\": {\"encoder\": %.0f, \"backbone\": %.0f, "
                         "\"generator\": %.0f}}", r ? ", " : "", r, q[0], q[1], q[2]);
        }
        fprintf(log, "]}\n");
        fflush(log);
    }
    if (!isfinite(loss)) return bm_err_set(err, "step %ld: loss is not finite", step + 1);
    return BM_OK;
}

int bm_exec_train(const struct bm_spec *s, const struct bm_table *t, struct bm_comm *c,
                  const struct bm_exec_opts *o, struct bm_err *err)
{
    int P = t->pp, M = t->microbatches, nl = c->nlocal, rc = BM_OK;
    int rank0 = c->first_rank == 0;
    FILE *log = NULL, *pr = rank0 ? o->progress : NULL;
    if (c->size != P) {
        bm_err_set(err, "the table has pp %d but %d ranks run it\nhint: mpirun -np %d (or plan with --pp %d)", P,
                   c->size, P, c->size);
        return fail(c, err);
    }
    struct bm_exec **x = bm_calloc((size_t)nl, sizeof *x);
    struct traced_step *traced = NULL; /* --trace-from: the gathered steps, n_traced of them */
    int n_traced = 0;
    struct step_records sr = {.nrec = 6 + 2 * M}; /* peak[3], ms, cpu_ms, walk_ms, lm[M], gen[M] */
    sr.rec = bm_calloc((size_t)nl * sr.nrec, sizeof *sr.rec);
    sr.items = bm_calloc((size_t)nl, sizeof *sr.items);
    sr.bytes = bm_calloc((size_t)nl, sizeof *sr.bytes), sr.ob = bm_calloc((size_t)P, sizeof *sr.ob);
    if (!x || !sr.rec || !sr.items || !sr.bytes || !sr.ob) {
        rc = bm_err_set(err, "out of memory");
        goto out;
    }
    for (int l = 0; l < nl; l++)
        if ((rc = bm_exec_new(s, t, c->first_rank + l, c, o, &x[l], err))) goto out;
    placement_check(t, c);
    double offset = 0;
    if ((rc = c->ops->clock_offset(c, &offset, err))) goto out;
    for (int l = 0; l < nl; l++) bm_exec_set_clock_offset(x[l], offset);
    int steps = o->steps > 0 ? o->steps : s->train.steps;
    long start = 0;
    if (o->resume_dir) {
        if ((rc = resume(x, t, c, o->resume_dir, &start, err))) goto out;
        if (pr) fprintf(pr, "resumed from %s after step %ld\n", o->resume_dir, start);
    }
    if (rank0 && o->log_path && !(log = fopen(o->log_path, start ? "a" : "w"))) {
        rc = bm_err_set(err, "%s: cannot open for writing", o->log_path);
        goto out;
    }
    if (pr)
        fprintf(pr, "%s: %d ranks, %s backbone, policy %s, %d microbatches/step, %d steps\n",
                s->name ? s->name : "model", P, bm_backbone_name(t->backbone), bm_policy_name(t->policy), M, steps);
    if (o->trace_path && o->trace_from > steps) {
        rc = bm_err_set(err, "--trace-from %d is after the last step (%d)", o->trace_from, steps);
        goto out;
    }
    if (o->trace_path && o->trace_from > 0 && steps - start > 0 &&
        !(traced = bm_calloc((size_t)(steps - start), sizeof *traced))) {
        rc = bm_err_set(err, "out of memory");
        goto out;
    }
    for (long step = start; step < steps; step++) {
        /* Traced: the last step (to trace_path) and, with trace_from, every step from it (to
         * STEM.step<K>.json, K 1-based); so the last one then goes to both files. */
        int last = o->trace_path && step == steps - 1;
        int each = o->trace_path && o->trace_from > 0 && step + 1 >= o->trace_from;
        /* A traced step's clocks: estimated again right before it, so that two hosts' clocks
         * drifting apart over a long run do not skew the trace (docs/multihost.md). */
        if ((last || each) && step > start) {
            if ((rc = c->ops->clock_offset(c, &offset, err))) {
                step_fail(step, err);
                goto out;
            }
            for (int l = 0; l < nl; l++) bm_exec_set_clock_offset(x[l], offset);
        }
        double t0 = bm_now(), c0 = cpu_now();
        if ((rc = bm_exec_run_step(x, c, step, err))) goto out;
        double ms = (bm_now() - t0) * 1e3, cpu_ms = (cpu_now() - c0) * 1e3;
        void *allv = NULL;
        if ((rc = gather_step(x, c, M, ms, cpu_ms, &sr, &allv, err))) {
            step_fail(step, err);
            goto out;
        }
        if (rank0) {
            rc = report_step(o, pr, log, allv, P, M, sr.nrec, step, steps, ms, err);
            bm_free(allv);
            if (rc) goto out;
        }
        if (each) { /* kept in memory on rank 0, written after the last step */
            rc = gather_trace(x, t, c, step, &traced[n_traced++], err);
            if (rc) goto out;
        }
        if (last && (rc = write_trace(x, t, c, o->trace_path, err))) goto out;
        if (o->ckpt_dir && ((o->ckpt_every > 0 && (step + 1) % o->ckpt_every == 0) || step == steps - 1)) {
            for (int l = 0; l < nl; l++)
                if ((rc = bm_ckpt_save(x[l], t, c->first_rank + l, o->ckpt_dir, step + 1, err))) goto out;
        }
    }
    if (rank0 && n_traced && (rc = write_traced_steps(t, o->trace_path, traced, n_traced, err))) goto out;
    if (o->dump_params && (rc = dump_params(x, t, c, o->dump_params, err))) goto out;
    if (pr && o->trace_path) fprintf(pr, "trace: %s\n", o->trace_path);
out:
    if (log) fclose(log);
    if (x)
        for (int l = 0; l < nl; l++) bm_exec_free(x[l]);
    bm_free(x), bm_free(sr.rec), bm_free(sr.items), bm_free(sr.bytes), bm_free(sr.ob);
    for (int i = 0; i < n_traced; i++) bm_free(traced[i].all), bm_free(traced[i].ob);
    bm_free(traced);
    return rc ? fail(c, err) : BM_OK;
}
