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
            char msg[sizeof err->msg], name[64];
            snprintf(msg, sizeof msg, "%s", err->msg);
            bm_comm_rank_name(c, c->first_rank, name, sizeof name);
            bm_err_set(err, "%s: %s", name, msg);
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

/* Sum the gradients over the ranks that hold the same instance: a replicated encoder's or
 * generator's over every rank of the job, a backbone chunk's over its data-parallel group (the D
 * replicas of this pipeline rank; nothing to do with one pipeline). Instances are created in the
 * same order on every rank (replicas first, spec order, then the local chunks), so instance i
 * is the same module everywhere and the same chunk across a data-parallel group. */
static int allreduce_grads(struct bm_exec **x, struct bm_comm *c, struct bm_err *err)
{
    float **bufs = bm_calloc((size_t)c->nlocal, sizeof *bufs);
    if (!bufs) return bm_err_set(err, "out of memory");
    int rc = BM_OK;
    for (int i = 0; i < bm_exec_n_inst(x[0]) && rc == BM_OK; i++) {
        int module, chunk, rep;
        bm_exec_inst(x[0], i, &module, &chunk, &rep);
        if (!rep && c->dp <= 1) continue;
        size_t n = 0;
        for (int l = 0; l < c->nlocal; l++) bufs[l] = bm_exec_inst_grads(x[l], i, &n);
        rc = c->ops->allreduce_sum(c, bufs, n, rep ? BM_COMM_WORLD : BM_COMM_DP, err);
    }
    bm_free(bufs);
    return rc;
}

/* ZeRO-1 (table "zero": 1, docs/simulator.md "The step"): instance i's group (a replicated
 * module: every rank of the job; a backbone chunk: its D replicas), this rank's index in it and
 * its shard [lo, hi) of the n elements: the k-th of parts equal slices. */
static int zero_shard(const struct bm_comm *c, int l, int rep, size_t n, size_t *lo, size_t *hi)
{
    int parts = rep ? c->world : c->dp;
    int k = rep ? bm_comm_global(c, c->first_rank + l) : c->replica;
    *lo = n * (size_t)k / (size_t)parts, *hi = n * (size_t)(k + 1) / (size_t)parts;
    return parts;
}

/* The optimizer under ZeRO-1: each rank updates its shard of every instance (the gradients are
 * already summed over the group: the same numbers as a reduce-scatter's), then the updated
 * weights are gathered: each rank puts its shard into the (spent) gradient buffer, zero
 * elsewhere, and the group sums it, which is exact (x + 0 = x). The moments stay allocated
 * whole (checkpoints keep their format); a rank only updates its shard of them. */
static int zero_optimizer(struct bm_exec **x, struct bm_comm *c, long step, struct bm_err *err)
{
    float **bufs = bm_calloc((size_t)c->nlocal, sizeof *bufs);
    if (!bufs) return bm_err_set(err, "out of memory");
    int rc = BM_OK;
    for (int i = 0; i < bm_exec_n_inst(x[0]) && rc == BM_OK; i++) {
        int module, chunk, rep;
        bm_exec_inst(x[0], i, &module, &chunk, &rep);
        int parts = 1;
        for (int l = 0; l < c->nlocal; l++) {
            size_t n = 0, lo, hi;
            bm_exec_inst_params(x[l], i, &n);
            parts = zero_shard(c, l, rep, n, &lo, &hi);
            bm_exec_optimizer_range(x[l], i, parts > 1 ? lo : 0, parts > 1 ? hi : n, step);
            if (parts <= 1) continue;
            float *p = bm_exec_inst_params(x[l], i, &n), *g = bm_exec_inst_grads(x[l], i, &n);
            memset(g, 0, n * sizeof *g);
            memcpy(g + lo, p + lo, (hi - lo) * sizeof *g);
            bufs[l] = g;
        }
        if (parts <= 1) continue;
        size_t n = 0;
        bm_exec_inst_params(x[0], i, &n);
        rc = c->ops->allreduce_sum(c, bufs, n, rep ? BM_COMM_WORLD : BM_COMM_DP, err);
        for (int l = 0; l < c->nlocal && rc == BM_OK; l++) {
            float *p = bm_exec_inst_params(x[l], i, &n);
            memcpy(p, bufs[l], n * sizeof *p);
        }
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
    int n = c->nlocal, V = t->vpp, P = t->pp, D = c->dp, rc = BM_OK;
    const void **items = bm_calloc((size_t)n, sizeof *items);
    size_t *bytes = bm_calloc((size_t)n, sizeof *bytes), *out_bytes = bm_calloc((size_t)c->world, sizeof *out_bytes);
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
    if (c->first_rank != 0 || c->replica != 0) goto out; /* global rank 0 writes */
    if (!(f = fopen(path, "wb"))) {
        rc = bm_err_set(err, "%s: cannot open for writing", path);
        goto out;
    }
    /* every rank's part in global rank order; pipeline rank r of replica 0 is global rank r*D
     * (the replicas hold the same parameters) */
    size_t start[4096], at = 0;
    if (P > 4096) {
        rc = bm_err_set(err, "too many ranks to dump");
        goto out;
    }
    for (int g = 0; g < c->world; g++) {
        if (g % D == 0) start[g / D] = at;
        at += out_bytes[g];
    }
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
    double s0 = bm_exec_now_ms(x[0]); /* the step's tail, for the log (docs/simulator.md "The step") */
    if (allreduce_grads(x, c, err)) return step_fail(step, err);
    double s1 = bm_exec_now_ms(x[0]);
    if (bm_exec_zero(x[0])) { /* ZeRO-1: shards and the weights' gather (the optimizer's time then
                               * includes the gather) */
        if (zero_optimizer(x, c, step, err)) return step_fail(step, err);
        for (int l = 0; l < c->nlocal; l++) bm_exec_note_tail(x[l], s0, s1, bm_exec_now_ms(x[l]) - s1);
        return BM_OK;
    }
    for (int l = 0; l < c->nlocal; l++) {
        double o0 = bm_exec_now_ms(x[l]);
        bm_exec_optimizer(x[l], step);
        bm_exec_note_tail(x[l], s0, s1, bm_exec_now_ms(x[l]) - o0);
    }
    return BM_OK;
}

/* One traced step's records as rank 0 gathered them: every rank's op times then its live-byte
 * trace (rank r's ob[r] bytes after ranks 0..r-1's). Only rank 0's are filled. */
struct traced_step {
    long step;
    void *all;
    size_t *ob; /* [world]: every global rank's bytes */
};

/* Gather the step's op times and live-byte traces of every rank to rank 0 (into *ts). */
static int gather_trace(struct bm_exec **x, const struct bm_table *t, struct bm_comm *c, long step,
                        struct traced_step *ts, struct bm_err *err)
{
    int n = c->nlocal, rc = BM_OK;
    (void)t;
    const void **items = bm_calloc((size_t)n, sizeof *items);
    size_t *bytes = bm_calloc((size_t)n, sizeof *bytes);
    double **packed = bm_calloc((size_t)n, sizeof *packed);
    ts->step = step, ts->all = NULL;
    ts->ob = bm_calloc((size_t)c->world, sizeof *ts->ob);
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

/* Rank 0: the measured timelines of a gathered step (one per data-parallel replica, D = dp),
 * written as one Chrome trace to path (every global rank a process; bm_exec_trace_write_dp). */
static int write_gathered(const struct bm_table *t, int D, const struct traced_step *ts, const char *path,
                          struct bm_err *err)
{
    int P = t->pp, W = P * D, rc = BM_OK;
    const double **times = bm_calloc((size_t)W, sizeof *times), **mem = bm_calloc((size_t)W, sizeof *mem);
    const double **msg = bm_calloc((size_t)W, sizeof *msg);
    int *n_mem = bm_calloc((size_t)W, sizeof *n_mem);
    struct bm_timeline **tl = bm_calloc((size_t)D, sizeof *tl);
    if (!times || !mem || !msg || !n_mem || !tl) {
        rc = bm_err_set(err, "out of memory");
        goto out;
    }
    /* gathered in global rank order g = p*D + d; regrouped replica by replica, k = d*P + p */
    size_t off = 0;
    for (int g = 0; g < W; g++) {
        const double *base = (const double *)(const void *)((const char *)ts->all + off);
        int p = g / D, d = g % D, k = d * P + p, no = t->ranks[p].n_ops;
        times[k] = base;
        msg[k] = base + (size_t)no * 3;
        mem[k] = base + (size_t)no * 4;
        n_mem[k] = (int)((ts->ob[g] / sizeof(double) - (size_t)no * 4) / 4);
        off += ts->ob[g];
    }
    for (int d = 0; d < D; d++) {
        size_t k = (size_t)d * P;
        if ((rc = bm_exec_timeline(t, times + k, msg + k, mem + k, n_mem + k, &tl[d], err))) goto out;
    }
    rc = bm_exec_trace_write_dp(t, (const struct bm_timeline *const *)tl, D, path, err);
out:
    for (int d = 0; tl && d < D; d++) bm_timeline_free(tl[d]);
    bm_free(tl);
    bm_free(times), bm_free(msg), bm_free(mem), bm_free(n_mem);
    return rc;
}

/* Gather the traced step's op times and live-byte traces to rank 0 and write the trace. */
static int write_trace(struct bm_exec **x, const struct bm_table *t, struct bm_comm *c, const char *path,
                       struct bm_err *err)
{
    struct traced_step ts;
    int rc = gather_trace(x, t, c, 0, &ts, err);
    if (rc == BM_OK && c->first_rank == 0 && c->replica == 0) rc = write_gathered(t, c->dp, &ts, path, err);
    bm_free(ts.all), bm_free(ts.ob);
    return rc;
}

/* --trace-from: the steps gathered so far, written after the last step (writing a file
 * between steps slowed the steps after it by 10-15% on this project's VM). */
static int write_traced_steps(const struct bm_table *t, int D, const char *trace_path, const struct traced_step *ts,
                              int n, struct bm_err *err)
{
    size_t len = strlen(trace_path);
    if (len >= 5 && !strcmp(trace_path + len - 5, ".json")) len -= 5;
    for (int i = 0; i < n; i++) {
        char path[4096];
        if (snprintf(path, sizeof path, "%.*s.step%ld.json", (int)len, trace_path, ts[i].step + 1) >= (int)sizeof path)
            return bm_err_set(err, "%s: the path is too long", trace_path);
        if (write_gathered(t, D, &ts[i], path, err)) return BM_ERR;
    }
    return BM_OK;
}

/* Rank 0: warn when the table's placement over hosts (device.ranks_per_host, sim/hosts.h) is
 * not where the ranks actually run, since then `bigmac simulate` prices other hops than this run
 * pays for (docs/multihost.md). Training itself does not depend on it. */
static void placement_check(const struct bm_table *t, const struct bm_comm *c)
{
    int P = c->world, H = t->device.ranks_per_host; /* ranks_per_host places global ranks */
    if (c->cooperative || c->first_rank != 0 || c->replica != 0 || (!c->hosts && H <= 0)) return;
    /* the run's own grouping: hosts[r] == hosts[s]; consecutive blocks of 'run_h' ranks? */
    int run_h = 1, blocks = c->hosts != NULL;
    if (c->hosts) {
        while (run_h < P && !strcmp(c->hosts[run_h], c->hosts[0])) run_h++;
        for (int r = 0; r < P && blocks; r++)
            for (int q = 0; q < P && blocks; q++)
                blocks = (r / run_h == q / run_h) == !strcmp(c->hosts[r], c->hosts[q]);
    }
    if (H <= 0) {
        /* the table's transfers are within a replica: only a pipeline spanning hosts is priced
         * wrong (with D > 1 the replicas may sit on different hosts, each pipeline on one) */
        int span = 0, D = c->dp;
        for (int g = 0; g < P && !span; g++) span = strcmp(c->hosts[g], c->hosts[g % D]) != 0;
        if (!span) return;
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

/* Under MPI after every rank tried to load its checkpoint (*rc its result): when some failed,
 * the lowest global rank that failed reports why (returns BM_ERR with its message: the caller
 * prints it and ends the job) and every other rank waits silently to be ended by it, so a
 * checkpoint of another layout gives one clear line (rank 0's, when its own file is wrong) and
 * not a race of every rank's. A rank not ended within the timeout says so itself. BM_OK when
 * every rank loaded its file. */
static int agree_load(struct bm_comm *c, const char *dir, int *rc, struct bm_err *err)
{
    int g = bm_comm_global(c, c->first_rank), flag = *rc ? c->world - g : 0, worst = 0;
    struct bm_err e2;
    if (c->ops->allreduce_max(c, &flag, &worst, *rc ? &e2 : err)) return *rc ? BM_ERR : (*rc = BM_ERR);
    if (!worst) return BM_OK;
    int first = c->world - worst;
    if (first == g) return BM_ERR; /* err holds this rank's reason */
    double t0 = bm_now(), wait = (c->timeout_s > 0 ? c->timeout_s : 60) + 15;
    while (bm_now() - t0 < wait) {
        struct timespec ts = {0, 50000000};
        nanosleep(&ts, NULL);
    }
    *rc = BM_ERR;
    bm_err_set(err, "%s: rank %d could not load its checkpoint (it said why), and the job did not end", dir, first);
    return BM_ERR;
}

/* --resume: every local rank loads its pipeline rank's checkpoint (every data-parallel replica
 * the same file: the state does not depend on D); all ranks must be at the same step, which
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
    if (!c->cooperative && agree_load(c, dir, &rc, err)) {
        bm_free(hi), bm_free(neg);
        return BM_ERR;
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

/* One step's figures of every rank of the job, gathered to global rank 0 in global rank order
 * (pipeline rank p of replica d at p*D + d): per rank a record of nrec doubles, peak activation
 * bytes per role, wall ms, CPU ms, walk ms, then the M lm and M gen losses of its replica's
 * microbatches. */
struct step_records {
    int nrec;
    double *rec;          /* [nlocal * nrec]: this process's ranks */
    const void **items;   /* [nlocal] */
    size_t *bytes;        /* [nlocal] */
    size_t *ob;           /* [world] */
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
        size_t ob = 0; /* the step's tail and the optimizer state this rank updates (AdamW's m and v;
                        * its shard under ZeRO-1) */
        for (int i = 0; i < bm_exec_n_inst(x[l]); i++) {
            size_t n = 0, lo = 0, hi;
            int module, chunk, rep;
            bm_exec_inst_moments(x[l], i, &n);
            bm_exec_inst(x[l], i, &module, &chunk, &rep);
            hi = n;
            if (bm_exec_zero(x[l])) zero_shard(c, l, rep, n, &lo, &hi);
            ob += 2 * (hi - lo) * sizeof(float);
        }
        q[6 + 2 * M] = st.sync_start_ms, q[7 + 2 * M] = st.sync_end_ms, q[8 + 2 * M] = st.optimizer_ms;
        q[9 + 2 * M] = (double)ob;
        sr->items[l] = q, sr->bytes[l] = (size_t)sr->nrec * sizeof(double);
    }
    return c->ops->gather(c, sr->items, sr->bytes, allv, sr->ob, err);
}

/* Rank 0 after a step: the loss summed exactly as the reference trainer does over the step's
 * D*M microbatches (float loss / (D*M) in global microbatch order d*M + m), the caller's
 * outputs, the progress line and the log line. all: world = P*D records in global rank order.
 * BM_ERR when the loss is not finite. */
static int report_step(const struct bm_exec_opts *o, FILE *pr, FILE *log, const double *all, int P, int D, int M,
                       int nrec, long step, int steps, double ms, struct bm_err *err)
{
    double lm = 0, gen = 0;
    int W = P * D, DM = D * M;
    for (int d = 0; d < D; d++)
        for (int m = 0; m < M; m++) {
            float a = 0, g = 0;
            for (int r = 0; r < P; r++) {
                const double *q = &all[(size_t)(r * D + d) * nrec];
                a += (float)q[6 + m], g += (float)q[6 + M + m];
            }
            lm += a / DM, gen += g / DM;
        }
    double loss = lm + gen;
    if (o->loss_out) o->loss_out[step] = loss;
    if (o->ms_out) o->ms_out[step] = ms;
    if (o->peak_out) /* replica 0's pipeline ranks (every replica walks the same table) */
        for (int r = 0; r < P; r++)
            for (int k = 0; k < BM_N_ROLES; k++) o->peak_out[r * BM_N_ROLES + k] = all[(size_t)r * D * nrec + k];
    if (pr) {
        double mn = all[3], mx = all[3], avg = 0, cpu = 0, walk = 0;
        for (int r = 0; r < W; r++) {
            double v = all[(size_t)r * nrec + 3];
            walk = BM_MAX(walk, all[(size_t)r * nrec + 5]);
            mn = v < mn ? v : mn, mx = v > mx ? v : mx, avg += v / W;
            cpu += all[(size_t)r * nrec + 4] / (v > 0 ? v : 1) / W * 100; /* process CPU / wall, mean over ranks */
        }
        fprintf(pr, "step %4ld/%d  loss %.4f  (lm %.4f  gen %.4f)  ms min/avg/max %.1f/%.1f/%.1f  walk %.1f ms"
                    "  cpu %.0f%%  peak act KiB enc/bb/gen:",
                step + 1, steps, loss, lm, gen, mn, avg, mx, walk, cpu);
        for (int r = 0; r < W; r++) { /* global rank order: "r3" is global rank 3 */
            const double *q = &all[(size_t)r * nrec];
            fprintf(pr, "  r%d %.0f/%.0f/%.0f", r, q[0] / 1024, q[1] / 1024, q[2] / 1024);
        }
        fprintf(pr, "\n");
        fflush(pr);
    }
    if (log) {
        fprintf(log, "{\"step\": %ld, \"loss\": %.6f, \"lm\": %.6f, \"gen\": %.6f, \"ms\": %.3f, ",
                step + 1, loss, lm, gen, ms);
        if (D > 1) fprintf(log, "\"layout\": {\"pp\": %d, \"dp\": %d}, ", P, D); /* rank = pp*D + dp */
        fprintf(log, "\"ranks\": [");
        for (int r = 0; r < W; r++) {
            const double *q = &all[(size_t)r * nrec];
            fprintf(log, "%s{\"rank\": %d, ", r ? ", " : "", r);
            if (D > 1) fprintf(log, "\"pp\": %d, \"dp\": %d, ", r / D, r % D);
            fprintf(log, "\"peak_act_bytes\": {\"encoder\": %.0f, \"backbone\": %.0f, \"generator\": %.0f}, ", q[0],
                    q[1], q[2]);
            fprintf(log, "\"walk_ms\": %.3f, \"sync_start_ms\": %.3f, \"sync_end_ms\": %.3f, \"optimizer_ms\": %.3f, "
                         "\"optimizer_state_bytes\": %.0f}", q[5], q[6 + 2 * M], q[7 + 2 * M], q[8 + 2 * M], q[9 + 2 * M]);
        }
        fprintf(log, "]}\n");
        fflush(log);
    }
    if (!isfinite(loss)) return bm_err_set(err, "step %ld: loss is not finite", step + 1);
    return BM_OK;
}

/* The checkpoint after step 'step' (0-based): one copy per pipeline rank, written by replica 0
 * (every replica holds the same state, docs/executor.md "Checkpoints"), then every rank of the
 * job waits until all of them are written, so no rank starts the next step (and no failure in
 * it can end the job) while a checkpoint of this step is half on disk. */
static int save_checkpoint(struct bm_exec **x, const struct bm_table *t, struct bm_comm *c, const char *dir,
                           long step, struct bm_err *err)
{
    if (c->replica == 0)
        for (int l = 0; l < c->nlocal; l++)
            if (bm_ckpt_save(x[l], t, c->first_rank + l, dir, step + 1, err)) return BM_ERR;
    int *zero = bm_calloc((size_t)c->nlocal, sizeof *zero), any = 0;
    if (!zero) return bm_err_set(err, "out of memory");
    int rc = c->ops->allreduce_max(c, zero, &any, err);
    bm_free(zero);
    return rc ? step_fail(step, err) : BM_OK;
}

int bm_exec_train(const struct bm_spec *s, const struct bm_table *t, struct bm_comm *c,
                  const struct bm_exec_opts *o, struct bm_err *err)
{
    int P = t->pp, M = t->microbatches, nl = c->nlocal, D = c->dp, rc = BM_OK;
    int rank0 = c->first_rank == 0 && c->replica == 0; /* global rank 0 */
    FILE *log = NULL, *pr = rank0 ? o->progress : NULL;
    if (c->size != P) {
        if (D > 1)
            bm_err_set(err, "the table has pp %d but the layout pp %d x dp %d has %d ranks per pipeline\nhint: mpirun -np %d",
                       P, c->size, D, c->size, P * D);
        else
            bm_err_set(err, "the table has pp %d but %d ranks run it\nhint: mpirun -np %d (or plan with --pp %d)", P,
                       c->size, P, c->size);
        return fail(c, err);
    }
    struct bm_exec **x = bm_calloc((size_t)nl, sizeof *x);
    struct traced_step *traced = NULL; /* --trace-from: the gathered steps, n_traced of them */
    int n_traced = 0;
    struct step_records sr = {.nrec = 10 + 2 * M}; /* peak[3], ms, cpu_ms, walk_ms, lm[M], gen[M], sync start,
                                                  * sync end, optimizer ms, optimizer state bytes */
    sr.rec = bm_calloc((size_t)nl * sr.nrec, sizeof *sr.rec);
    sr.items = bm_calloc((size_t)nl, sizeof *sr.items);
    sr.bytes = bm_calloc((size_t)nl, sizeof *sr.bytes), sr.ob = bm_calloc((size_t)c->world, sizeof *sr.ob);
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
    if (pr && D > 1) /* the rule once, before anything else of the run (docs/design.md §2) */
        fprintf(pr, "layout: pp %d \u00d7 dp %d, rank = p*%d + d\n", P, D, D);
    if (pr && D > 1)
        fprintf(pr, "%s: %d ranks (%d replicas of a %d-rank pipeline), %s backbone, policy %s, %d microbatches/step "
                    "(%d per replica), %d steps\n",
                s->name ? s->name : "model", P * D, D, P, bm_backbone_name(t->backbone), bm_policy_name(t->policy),
                D * M, M, steps);
    else if (pr)
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
            rc = report_step(o, pr, log, allv, P, D, M, sr.nrec, step, steps, ms, err);
            bm_free(allv);
            if (rc) goto out;
        }
        if (each) { /* kept in memory on rank 0, written after the last step */
            rc = gather_trace(x, t, c, step, &traced[n_traced++], err);
            if (rc) goto out;
        }
        if (last && (rc = write_trace(x, t, c, o->trace_path, err))) goto out;
        if (o->ckpt_dir && ((o->ckpt_every > 0 && (step + 1) % o->ckpt_every == 0) || step == steps - 1) &&
            (rc = save_checkpoint(x, t, c, o->ckpt_dir, step, err)))
            goto out;
    }
    if (rank0 && n_traced && (rc = write_traced_steps(t, c->dp, o->trace_path, traced, n_traced, err))) goto out;
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
