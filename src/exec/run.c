/* run.c — the training driver around the op walker (see exec.h): steps, the gradient
 * all-reduce of replicated modules, AdamW, the per-step log and progress, the measured trace,
 * checkpoints and the final parameter dump. The same code drives one MPI rank per process or all
 * P ranks in one process (comm_local, cooperative round-robin). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

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

/* A failure every process knows about (agree): said by the rank that failed ("rank R: ..." under
 * MPI), returned without MPI_Abort, so every process finalizes MPI normally and exits non-zero.
 * An empty message: another rank failed and says so. */
static int agreed_fail(struct bm_comm *c, struct bm_err *err)
{
    if (!c->cooperative && err->msg[0] && strncmp(err->msg, "rank ", 5)) {
        char msg[sizeof err->msg], name[64];
        snprintf(msg, sizeof msg, "%s", err->msg);
        bm_comm_rank_name(c, c->first_rank, name, sizeof name);
        bm_err_set(err, "%s: %s", name, msg);
    }
    return BM_ERR;
}

/* Every process at the same point of the run agrees on whether some rank failed (rc != BM_OK on
 * this process, its message in err): an all-reduce of the status over every rank of the job,
 * which is also a barrier. BM_OK when no rank failed. BM_ERR when one did, with err left as it is
 * on a process that failed and emptied on the others; *hard = 1 when the agreement itself
 * failed (a peer hung or died: the caller aborts; err then says so, after 'what'). Failures that every rank meets at such a point
 * (a file that cannot be written, a checkpoint that does not match) end the job without
 * MPI_Abort: a rank aborting while the others finalize MPI made mpirun crash or hang now and
 * then (issue 27, case 6). */
static int agree(struct bm_comm *c, int rc, const char *what, int *hard, struct bm_err *err)
{
    int *mine = bm_calloc((size_t)c->nlocal, sizeof *mine), any = 0;
    struct bm_err e2;
    *hard = 0;
    if (!mine) {
        *hard = 1;
        return bm_err_set(err, "out of memory");
    }
    for (int l = 0; l < c->nlocal; l++) mine[l] = rc != BM_OK;
    int arc = c->ops->allreduce_max(c, mine, &any, &e2);
    bm_free(mine);
    if (arc) { /* what: where the run was ("the checkpoint of step 6") */
        *hard = 1;
        return rc != BM_OK ? BM_ERR : bm_err_set(err, "%s: %s", what, e2.msg); /* its own failure first */
    }
    if (!any) return BM_OK;
    if (rc == BM_OK) err->msg[0] = 0;
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

/* 1 when the ranks of group (BM_COMM_WORLD, or BM_COMM_DP of this process's pipeline rank
 * first_rank) run on more than one host (c->hosts; one host when unknown). */
static int group_inter(const struct bm_comm *c, int group)
{
    if (!c->hosts) return 0;
    int g0 = group == BM_COMM_WORLD ? 0 : c->first_rank * c->dp, n = group == BM_COMM_WORLD ? c->world : c->dp;
    for (int g = g0 + 1; g < g0 + n; g++)
        if (strcmp(c->hosts[g], c->hosts[g0])) return 1;
    return 0;
}

/* One collective (op: BM_COLL_*) of instance i over group on bufs[l] (n floats on each local
 * rank), its start and end noted on every local rank's step clock (the step log's
 * "collectives"). */
static int collective(struct bm_exec **x, struct bm_comm *c, int i, int op, int weights, float **bufs, size_t n,
                      int group, struct bm_err *err)
{
    double t0 = bm_exec_now_ms(x[0]);
    int rc = op == BM_COLL_REDUCE_SCATTER ? c->ops->reduce_scatter_sum(c, bufs, n, group, err)
           : op == BM_COLL_ALL_GATHER     ? c->ops->allgather(c, bufs, n, group, err)
                                          : c->ops->allreduce_sum(c, bufs, n, group, err);
    double t1 = bm_exec_now_ms(x[0]);
    struct bm_exec_coll e = {i, op, weights, group, group == BM_COMM_WORLD ? c->world : c->dp,
                             group_inter(c, group), (double)n * sizeof(float), t0, t1, 0};
    for (int l = 0; l < c->nlocal && rc == BM_OK; l++) bm_exec_note_coll(x[l], &e);
    return rc;
}

/* The data-parallel collectives over the ranks that hold the same instance: a replicated
 * encoder's or generator's over every rank of the job, a backbone chunk's over its data-parallel
 * group (the D replicas of this pipeline rank; nothing to do with one pipeline). Instances are
 * created in the same order on every rank (replicas first, spec order, then the local chunks), so
 * instance i is the same module everywhere and the same chunk across a data-parallel group.
 * Frozen instances have no optimizer step and take no part.
 * weights 0 (before the optimizer): the gradients are summed, by an all-reduce, or under ZeRO-1
 * (table "zero": 1) a reduce-scatter: each rank gets the sum of its own shard only
 * (bm_exec_inst_shard), all its optimizer step reads.
 * weights 1 (ZeRO-1, after the optimizer): each rank updated its shard of every sharded instance
 * (with the moments of that shard, all it holds: exec.c make_inst); the group all-gathers the
 * updated weights. */
static int sync_instances(struct bm_exec **x, struct bm_comm *c, int weights, struct bm_err *err)
{
    float **bufs = bm_calloc((size_t)c->nlocal, sizeof *bufs);
    if (!bufs) return bm_err_set(err, "out of memory");
    int rc = BM_OK;
    for (int i = 0; i < bm_exec_n_inst(x[0]) && rc == BM_OK; i++) {
        int module, chunk, rep;
        size_t n = 0, lo, hi;
        bm_exec_inst(x[0], i, &module, &chunk, &rep);
        if ((!rep && c->dp <= 1) || bm_exec_inst_frozen(x[0], i)) continue;
        int shard = bm_exec_inst_shard(x[0], i, &lo, &hi) > 1;
        if (weights && !shard) continue; /* all-reduced gradients: every copy stepped alike */
        for (int l = 0; l < c->nlocal; l++)
            bufs[l] = weights ? bm_exec_inst_params(x[l], i, &n) : bm_exec_inst_grads(x[l], i, &n);
        int op = weights ? BM_COLL_ALL_GATHER : shard ? BM_COLL_REDUCE_SCATTER : BM_COLL_ALL_REDUCE;
        rc = collective(x, c, i, op, weights, bufs, n, rep ? BM_COMM_WORLD : BM_COMM_DP, err);
    }
    bm_free(bufs);
    return rc;
}

/* ---------------------------------------------------------------- overlapped gradient sync */

/* Megatron's overlap (docs/simulator.md "The step", docs/executor.md "The step"): each
 * instance's gradient collective (all-reduce, or ZeRO-1's reduce-scatter) starts inside the walk,
 * right after the rank's last backward (B or W) of the instance (bm_exec_inst_last_bwd), and the
 * driver waits for them all before the optimizer. Each op of the walk tests the open ones, which
 * is what makes MPI progress them while the rank computes (no progress thread). A group's
 * collectives start in the same order on each of its ranks: a backbone chunk's data-parallel
 * group are replicas of one pipeline rank, walking the same op list; the replicated modules'
 * group is every rank, whose op lists differ, so these start in one fixed order (the generators'
 * first, whose backward comes first, then the encoders', each in spec order: docs/simulator.md
 * "The step"), each once its own backward and every earlier one's are done. A transport without
 * icoll (comm_local) runs them all after the walk (sync_instances). */
struct gsync {
    struct bm_exec *x;
    struct bm_comm *c;
    int n;           /* instances */
    char *state;     /* [n] 0: none (frozen, or a group of one), 1: to start, 2: started, 3: done */
    long *req;       /* [n] the transport's id once started */
    double *t0, *t1; /* [n] start and end (ms on the step's clock; the end as first seen) */
    char *in_walk;   /* [n] 1: started before the rank's last op (its end is only seen between ops) */
    int n_ops;       /* the rank's ops */
    int *order;      /* [n] instances in the order they started */
    int n_started;
};

static void gs_free(struct gsync *g)
{
    bm_free(g->state), bm_free(g->req), bm_free(g->t0), bm_free(g->t1), bm_free(g->order), bm_free(g->in_walk);
}

/* Set up the step's collectives (state 1 for each instance that has one). */
static int gs_init(struct gsync *g, struct bm_exec *x, struct bm_comm *c, struct bm_err *err)
{
    int n = bm_exec_n_inst(x);
    *g = (struct gsync){.x = x, .c = c, .n = n};
    g->state = bm_calloc((size_t)n + 1, 1), g->req = bm_calloc((size_t)n + 1, sizeof *g->req);
    g->t0 = bm_calloc((size_t)n + 1, sizeof *g->t0), g->t1 = bm_calloc((size_t)n + 1, sizeof *g->t1);
    g->order = bm_calloc((size_t)n + 1, sizeof *g->order);
    g->in_walk = bm_calloc((size_t)n + 1, 1);
    bm_exec_op_times(x, &g->n_ops);
    if (!g->state || !g->req || !g->t0 || !g->t1 || !g->order || !g->in_walk) {
        gs_free(g);
        return bm_err_set(err, "out of memory");
    }
    for (int i = 0; i < n; i++) {
        int module, chunk, rep;
        bm_exec_inst(x, i, &module, &chunk, &rep);
        g->state[i] = !((!rep && c->dp <= 1) || (rep && c->world <= 1) || bm_exec_inst_frozen(x, i));
    }
    return BM_OK;
}

/* Start every collective whose gradients are final after op k (k = INT_MAX: all that are left),
 * in the orders above; then test the open ones (their progress). */
static int gs_step(struct gsync *g, int k, struct bm_err *err)
{
    int world_wait = 0; /* a replicated instance not ready yet: the later ones wait for it */
    for (int j = 0; j < 2 * g->n; j++) { /* the generators' first (their backward runs first), then the rest */
        int i = j % g->n, module, chunk, rep;
        if (g->state[i] != 1) continue;
        bm_exec_inst(g->x, i, &module, &chunk, &rep);
        if (rep && (bm_exec_inst_role(g->x, i) == BM_ROLE_GENERATOR) != (j < g->n)) continue;
        if (!rep && j >= g->n) continue;
        int ready = bm_exec_inst_last_bwd(g->x, i) <= k;
        if (rep && (world_wait || !ready)) {
            world_wait = 1;
            continue;
        }
        if (!ready) continue;
        size_t n, lo, hi;
        float *buf = bm_exec_inst_grads(g->x, i, &n);
        int scatter = bm_exec_inst_shard(g->x, i, &lo, &hi) > 1;
        g->t0[i] = bm_exec_now_ms(g->x);
        if (g->c->ops->icoll(g->c, scatter, buf, n, rep ? BM_COMM_WORLD : BM_COMM_DP, &g->req[i], err)) return BM_ERR;
        g->state[i] = 2;
        g->in_walk[i] = k < g->n_ops - 1;
        g->order[g->n_started++] = i;
    }
    for (int j = 0; j < g->n_started; j++) {
        int i = g->order[j], done = 0;
        if (g->state[i] != 2) continue;
        if (g->c->ops->coll_wait(g->c, g->req[i], 0, &done, err)) return BM_ERR;
        if (done) g->state[i] = 3, g->t1[i] = bm_exec_now_ms(g->x);
    }
    return BM_OK;
}

static int gs_hook(void *arg, int k, struct bm_err *err) { return gs_step(arg, k, err); }

/* After the walk: start what is left, wait for every collective, note them (start order) in the
 * step log. *s0 / *s1: the first start and the last end (-1 / now when there were none). */
static int gs_finish(struct gsync *g, double *s0, double *s1, struct bm_err *err)
{
    if (gs_step(g, INT_MAX, err)) return BM_ERR;
    *s0 = -1, *s1 = bm_exec_now_ms(g->x);
    for (int j = 0; j < g->n_started; j++) {
        int i = g->order[j], done = 0;
        if (g->state[i] == 2) {
            if (g->c->ops->coll_wait(g->c, g->req[i], 1, &done, err)) return BM_ERR;
            g->state[i] = 3, g->t1[i] = bm_exec_now_ms(g->x);
        }
    }
    for (int j = 0; j < g->n_started; j++) {
        int i = g->order[j], module, chunk, rep;
        size_t n, lo, hi;
        bm_exec_inst(g->x, i, &module, &chunk, &rep);
        bm_exec_inst_grads(g->x, i, &n);
        int group = rep ? BM_COMM_WORLD : BM_COMM_DP;
        int op = bm_exec_inst_shard(g->x, i, &lo, &hi) > 1 ? BM_COLL_REDUCE_SCATTER : BM_COLL_ALL_REDUCE;
        struct bm_exec_coll e = {i, op, 0, group, group == BM_COMM_WORLD ? g->c->world : g->c->dp,
                                 group_inter(g->c, group), (double)n * sizeof(float), g->t0[i], g->t1[i],
                                 g->in_walk[i]};
        bm_exec_note_coll(g->x, &e);
        if (*s0 < 0 || g->t0[i] < *s0) *s0 = g->t0[i];
        if (g->t1[i] > *s1) *s1 = g->t1[i];
    }
    return BM_OK;
}

/* Final parameters in spec module order (replicas from rank 0, backbone chunks in global order)
 * to path as raw floats. Every rank takes part (gather). Each rank packs
 * [uint64 float count of each local chunk, V of them][chunk floats in local order][replica floats]. */
static int dump_params(struct bm_exec **x, const struct bm_table *t, struct bm_comm *c, const char *path,
                       int *local, struct bm_err *err)
{
    *local = 0; /* 1: the failure came after the gather, on rank 0 alone (writing the file) */
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
    *local = 1;
    if (!(f = fopen(path, "wb"))) {
        rc = bm_err_set(err, "--dump-params %s: cannot open for writing: %s", path, strerror(errno));
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
    if (f && fclose(f) && rc == BM_OK) rc = bm_err_set(err, "--dump-params %s: write failed: %s", path, strerror(errno));
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
    int overlap = c->nlocal == 1 && c->ops->icoll && c->ops->coll_wait;
    struct gsync g = {0};
    if (overlap) { /* the gradient collectives start inside the walk (gsync above) */
        if (gs_init(&g, x[0], c, err)) return BM_ERR;
        bm_exec_set_op_hook(x[0], gs_hook, &g);
        if (gs_step(&g, -1, err)) { /* a rank without a backward of an instance: at once */
            gs_free(&g);
            return step_fail(step, err);
        }
    }
    int rc = walk(x, c, err);
    if (overlap) bm_exec_set_op_hook(x[0], NULL, NULL);
    for (int l = 0; l < c->nlocal && rc == BM_OK; l++) rc = bm_exec_step_finish(x[l], err);
    if (rc) {
        gs_free(&g);
        return BM_ERR;
    }
    /* the step's tail, for the log (docs/simulator.md "The step"): the collectives' first start
     * (inside the walk when overlapped) and last end */
    double s0 = bm_exec_now_ms(x[0]), s1;
    if (overlap) {
        double a;
        rc = gs_finish(&g, &a, &s1, err);
        gs_free(&g);
        if (rc) return step_fail(step, err);
        if (a >= 0) s0 = a;
    } else {
        if (sync_instances(x, c, 0, err)) return step_fail(step, err);
        s1 = bm_exec_now_ms(x[0]);
    }
    for (int l = 0; l < c->nlocal; l++) {
        double o0 = bm_exec_now_ms(x[l]);
        bm_exec_optimizer(x[l], step); /* each instance's shard: the whole unless ZeRO-1 */
        bm_exec_note_tail(x[l], s0, s1, bm_exec_now_ms(x[l]) - o0);
    }
    if (bm_exec_zero(x[0]) && sync_instances(x, c, 1, err)) return step_fail(step, err);
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
static int write_gathered(const struct bm_table *t, const struct bm_costs *costs, int D, const struct traced_step *ts,
                          const char *path, struct bm_err *err)
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
        if ((rc = bm_exec_timeline(t, costs, times + k, msg + k, mem + k, n_mem + k, &tl[d], err))) goto out;
    }
    rc = bm_exec_trace_write_dp(t, costs, (const struct bm_timeline *const *)tl, D, path, err);
out:
    for (int d = 0; tl && d < D; d++) bm_timeline_free(tl[d]);
    bm_free(tl);
    bm_free(times), bm_free(msg), bm_free(mem), bm_free(n_mem);
    return rc;
}

/* Gather the traced step's op times and live-byte traces to rank 0 and write the trace. */
static int write_trace(struct bm_exec **x, const struct bm_table *t, const struct bm_costs *costs, struct bm_comm *c,
                       const char *path,
                       int *local, struct bm_err *err)
{
    struct traced_step ts;
    int rc = gather_trace(x, t, c, 0, &ts, err);
    *local = rc == BM_OK; /* a failure after the gather is rank 0's alone */
    if (rc == BM_OK && c->first_rank == 0 && c->replica == 0 && (rc = write_gathered(t, costs, c->dp, &ts, path, err))) {
        char msg[sizeof err->msg];
        snprintf(msg, sizeof msg, "%s", err->msg);
        bm_err_set(err, "--trace %s", msg); /* "--trace PATH: write failed: ..." */
    }
    bm_free(ts.all), bm_free(ts.ob);
    return rc;
}

/* --trace-from: the steps gathered so far, written after the last step (writing a file
 * between steps slowed the steps after it by 10-15% on this project's VM). */
static int write_traced_steps(const struct bm_table *t, const struct bm_costs *costs, int D, const char *trace_path,
                              const struct traced_step *ts,
                              int n, struct bm_err *err)
{
    size_t len = strlen(trace_path);
    if (len >= 5 && !strcmp(trace_path + len - 5, ".json")) len -= 5;
    for (int i = 0; i < n; i++) {
        char path[4096];
        if (snprintf(path, sizeof path, "%.*s.step%ld.json", (int)len, trace_path, ts[i].step + 1) >= (int)sizeof path)
            return bm_err_set(err, "%s: the path is too long", trace_path);
        if (write_gathered(t, costs, D, &ts[i], path, err)) return BM_ERR;
    }
    return BM_OK;
}

/* Rank 0: warn when the table's placement over hosts (ranks_per_host, sim/hosts.h) is
 * not where the ranks actually run, since then `bigmac simulate` prices other hops than this run
 * pays for (docs/multihost.md). Training itself does not depend on it. */
static void placement_check(const struct bm_table *t, const struct bm_comm *c)
{
    int P = c->world, H = t->ranks_per_host; /* ranks_per_host places global ranks */
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

/* Do paths a and b name the same directory? */
static int same_dir(const char *a, const char *b)
{
    struct stat sa, sb;
    if (stat(a, &sa) || stat(b, &sb)) return !strcmp(a, b);
    return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

/* --resume, rank 0's part: the newest complete set in dir, checked against this run (*step). */
static int resume_choose(const struct bm_spec *s, const struct bm_table *t, int dp, const struct bm_train_opts *o,
                         int steps, FILE *pr, long *step, int *sharded, struct bm_err *err)
{
    struct bm_ckpt_meta m, now;
    int found;
    char diff[2048];
    if (bm_ckpt_newest(o->resume_dir, 0, &m, &found, err)) return BM_ERR;
    bm_ckpt_meta_of(s, t, dp, m.step, &now);
    if (m.pp != t->pp || m.vpp != t->vpp || m.files != (m.zero && m.dp > 1 ? t->pp * m.dp : t->pp))
        return bm_err_set(err, "%s/step-%08ld: a checkpoint of pp %d vpp %d (%d rank files); this run has pp %d vpp %d",
                          o->resume_dir, m.step, m.pp, m.vpp, m.files, t->pp, t->vpp);
    /* a ZeRO-1 set holds each rank's shard of the optimizer state: only the same shards load (a
     * ZeRO-0 set holds every moment whole, so any run takes its shard from it) */
    if (m.zero && (!t->zero || m.dp != now.dp))
        return bm_err_set(err, "%s/step-%08ld: a ZeRO-1 checkpoint of pp %d x dp %d (each rank file holds its rank's "
                               "shard of the optimizer state); this run has %s pp %d x dp %d\n"
                               "hint: resume with --zero 1 --dp %d", o->resume_dir, m.step, m.pp, m.dp,
                          t->zero ? "ZeRO-1," : "ZeRO-0,", t->pp, now.dp, m.dp);
    *sharded = m.zero && m.dp > 1;
    if (bm_ckpt_meta_diff(&m, &now, diff, sizeof diff)) {
        if (!o->resume_force)
            return bm_err_set(err, "%s/step-%08ld: the checkpoint was trained with other settings: %s\n"
                                   "hint: resuming would not continue the same run; --resume-force resumes anyway",
                              o->resume_dir, m.step, diff);
        fprintf(stderr, "bigmac: warning: --resume-force: %s/step-%08ld was trained with other settings: %s\n",
                o->resume_dir, m.step, diff);
    }
    if (steps < m.step)
        return bm_err_set(err, "--steps %d is below the checkpoint's step %ld (%s/step-%08ld): there is nothing to "
                               "train, and the checkpoint is not the result of %d steps\nhint: --steps %ld or more",
                          steps, m.step, o->resume_dir, m.step, steps, m.step);
    if (pr && steps == m.step) fprintf(pr, "the checkpoint is at step %ld already: nothing to train\n", m.step);
    *step = m.step;
    return BM_OK;
}

/* --checkpoint DIR without resuming from it: DIR must not hold another run's complete set, which
 * this run's first commit would delete (rank 0). */
static int ckpt_dir_free(const struct bm_train_opts *o, struct bm_err *err)
{
    struct bm_ckpt_meta m;
    int found;
    if (o->resume_dir && same_dir(o->ckpt_dir, o->resume_dir)) return BM_OK;
    if (bm_ckpt_newest(o->ckpt_dir, 1, &m, &found, err)) return BM_ERR;
    if (found)
        return bm_err_set(err, "--checkpoint %s: holds a complete checkpoint of step %ld already (another run's), which "
                               "this run would replace\nhint: --resume %s to continue that run, or another directory",
                          o->ckpt_dir, m.step, o->ckpt_dir);
    return BM_OK;
}

/* Can path be written? Opened for writing without truncating it (an existing file is left as
 * it is; one created here is removed again), so a bad path fails before step 1, not after the
 * last step. */
static int check_output(const char *flag, const char *path, struct bm_err *err)
{
    struct stat st;
    int existed = stat(path, &st) == 0;
    if (existed && S_ISDIR(st.st_mode)) return bm_err_set(err, "%s %s: is a directory", flag, path);
    int fd = open(path, O_WRONLY | O_CREAT, 0666);
    if (fd < 0) {
        int e = errno;
        char parent[4096];
        snprintf(parent, sizeof parent, "%s", path);
        char *slash = strrchr(parent, '/');
        if (slash) *slash = 0;
        if (e == ENOENT && slash && parent[0] && stat(parent, &st))
            return bm_err_set(err, "%s %s: the directory %s does not exist", flag, path, parent);
        return bm_err_set(err, "%s %s: cannot write there: %s", flag, path, strerror(e));
    }
    close(fd);
    if (!existed) unlink(path);
    return BM_OK;
}

/* The log of a resumed run: the lines of steps up to 'start' kept, later ones (a crashed run's
 * steps after its last checkpoint, which this run trains again) and a torn last line dropped,
 * so that the log holds every step once. */
static FILE *open_resumed_log(const char *path, long start, struct bm_err *err)
{
    FILE *f = fopen(path, "r+");
    if (!f && errno == ENOENT) f = fopen(path, "w");
    if (!f) {
        bm_err_set(err, "--log %s: cannot open for writing: %s", path, strerror(errno));
        return NULL;
    }
    char *line = NULL; /* getline's buffer: a line per step, any length (it names every rank) */
    size_t cap = 0;
    long keep = 0;
    for (;;) {
        long at = ftell(f);
        ssize_t len = getline(&line, &cap, f);
        if (len <= 0) break;
        long step = 0;
        if (line[len - 1] != '\n' || sscanf(line, "{\"step\": %ld", &step) != 1 || step > start) {
            keep = at;
            break;
        }
        keep = ftell(f);
    }
    free(line); /* getline's, not bm_malloc's */
    if (fflush(f) || ftruncate(fileno(f), keep) || fseek(f, keep, SEEK_SET)) {
        bm_err_set(err, "--log %s: cannot truncate it after step %ld: %s", path, start, strerror(errno));
        fclose(f);
        return NULL;
    }
    return f;
}

/* --inject-fault RANK:checkpoint:KIND[:STEP]: this rank's file of the set is half written. */
struct ckpt_fault {
    const struct bm_train_opts *o;
    int rank;
    long step;
};

static void ckpt_midway(void *ctx)
{
    const struct ckpt_fault *f = ctx;
    const struct bm_train_opts *o = f->o;
    if (o->fault_op != BM_TRAIN_FAULT_AT_CHECKPOINT || o->fault_rank != f->rank || o->fault_step != f->step) return;
    fflush(stdout), fflush(stderr);
    if (o->fault == BM_TRAIN_FAULT_CRASH) raise(SIGSEGV);
    else if (o->fault == BM_TRAIN_FAULT_EXIT) _exit(3);
    else if (o->fault == BM_TRAIN_FAULT_HANG)
        for (;;) pause();
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
    size_t *ob;
    int ni;               /* instances per rank: the last ni numbers of a record are their weights' bytes */           /* [world] */
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
        for (int i = 0; i < bm_exec_n_inst(x[l]); i++) { /* what the rank holds, allocated */
            size_t n = 0;
            bm_exec_inst_moments(x[l], i, &n);
            ob += 2 * n * sizeof(float);
        }
        q[6 + 2 * M] = st.sync_start_ms, q[7 + 2 * M] = st.sync_end_ms, q[8 + 2 * M] = st.optimizer_ms;
        q[9 + 2 * M] = (double)ob;
        int nc; /* the collectives: a count, then 9 numbers each, then their starts (report_step) */
        const struct bm_exec_coll *cl = bm_exec_colls(x[l], &nc);
        double *e = q + 10 + 2 * M;
        e[0] = nc;
        for (int k = 0; k < nc; k++) {
            double *f = e + 1 + 9 * k;
            f[0] = cl[k].inst, f[1] = cl[k].op, f[2] = cl[k].weights, f[3] = cl[k].group, f[4] = cl[k].ranks;
            f[5] = cl[k].inter, f[6] = cl[k].bytes, f[7] = cl[k].end_ms - cl[k].start_ms, f[8] = cl[k].in_walk;
            e[1 + 9 * nc + k] = cl[k].start_ms;
        }
        double *pb = q + sr->nrec - sr->ni; /* each instance's weights (bytes), for calibrate */
        for (int i = 0; i < bm_exec_n_inst(x[l]) && i < sr->ni; i++) {
            size_t n = 0;
            bm_exec_inst_params(x[l], i, &n);
            pb[i] = (double)n * sizeof(float);
        }
        sr->items[l] = q, sr->bytes[l] = (size_t)sr->nrec * sizeof(double);
    }
    return c->ops->gather(c, sr->items, sr->bytes, allv, sr->ob, err);
}

/* Rank 0 after a step: the loss summed exactly as the reference trainer does over the step's
 * D*M microbatches (float loss / (D*M) in global microbatch order d*M + m), the caller's
 * outputs, the progress line and the log line. all: world = P*D records in global rank order.
 * BM_ERR when the loss is not finite. */
static int report_step(const struct bm_train_opts *o, FILE *pr, FILE *log, const double *all, int P, int D, int M,
                       int nrec, const struct bm_exec *x0, const struct bm_table *t, long step, int steps, double ms,
                       struct bm_err *err)
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
                         "\"optimizer_state_bytes\": %.0f, \"collectives\": [", q[5], q[6 + 2 * M], q[7 + 2 * M],
                    q[8 + 2 * M], q[9 + 2 * M]);
            const double *e = q + 10 + 2 * M;
            int nc = (int)e[0];
            for (int k = 0; k < nc; k++) { /* instance i is the same module on every rank (run.c) */
                static const char *const ops[] = {"all_reduce", "reduce_scatter", "all_gather"};
                const double *f = e + 1 + 9 * k;
                int module, chunk, rep, inst = (int)f[0];
                bm_exec_inst(x0, inst, &module, &chunk, &rep);
                fprintf(log, "%s{\"op\": \"%s\", \"of\": \"%s\", \"module\": ", k ? ", " : "", ops[(int)f[1]],
                        f[2] ? "weights" : "grads");
                bm_put_jstr(log, t->modules[module].name);
                if (!rep) { /* rank r's j-th chunk (instances: the replicas, then the chunks in order) */
                    int p = r / D, j = inst - (bm_exec_n_inst(x0) - t->vpp), c2 = -1, seen = 0;
                    for (int cc = 0; cc < P * t->vpp && c2 < 0; cc++)
                        if (bm_table_chunk_rank(t, cc) == p && seen++ == j) c2 = cc;
                    fprintf(log, ", \"chunk\": %d", c2);
                }
                fprintf(log, ", \"group\": \"%s\", \"ranks\": %d, \"link\": \"%s\", \"bytes\": %.0f, "
                             "\"start_ms\": %.3f, \"end_ms\": %.3f%s}",
                        (int)f[3] == BM_COMM_WORLD ? "world" : "dp", (int)f[4], f[5] ? "inter" : "intra", f[6],
                        e[1 + 9 * nc + k], e[1 + 9 * nc + k] + f[7], f[8] ? ", \"in_walk\": true" : "");
            }
            fprintf(log, "], \"params\": [");
            for (int i = 0; i < bm_exec_n_inst(x0); i++) { /* the weights of each instance the rank holds */
                int module, chunk, rep;
                bm_exec_inst(x0, i, &module, &chunk, &rep);
                fprintf(log, "%s{\"module\": ", i ? ", " : "");
                bm_put_jstr(log, t->modules[module].name);
                if (!rep) {
                    int p = r / D, j = i - (bm_exec_n_inst(x0) - t->vpp), c2 = -1, seen = 0;
                    for (int cc = 0; cc < P * t->vpp && c2 < 0; cc++)
                        if (bm_table_chunk_rank(t, cc) == p && seen++ == j) c2 = cc;
                    fprintf(log, ", \"chunk\": %d", c2);
                }
                fprintf(log, ", \"bytes\": %.0f}", q[nrec - bm_exec_n_inst(x0) + i]);
            }
            fprintf(log, "]}");
        }
        fprintf(log, "]}\n");
        fflush(log);
    }
    if (!isfinite(loss)) return bm_err_set(err, "step %ld: loss is not finite", step + 1);
    return BM_OK;
}

int bm_exec_train(const struct bm_spec *s, const struct bm_table *t, const struct bm_costs *costs,
                  struct bm_comm *c, const struct bm_train_opts *o, struct bm_err *err)
{
    int P = t->pp, M = t->microbatches, nl = c->nlocal, D = c->dp, rc = BM_OK;
    int rank0 = c->first_rank == 0 && c->replica == 0, agreed = 0; /* global rank 0; agreed: every process knows of the failure */
    /* replica 0 writes the checkpoints (every replica holds the same state), except under ZeRO-1
     * with dp > 1, where every replica holds its own shard of the optimizer state and writes it
     * (ckpt.h); file_replica: the replica its file is named by (-1: rank-R.ckpt) */
    int writer = c->replica == 0 || (t->zero && D > 1), file_replica = t->zero && D > 1 ? c->replica : -1;
    FILE *log = NULL, *pr = rank0 && !o->quiet ? stdout : NULL;
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
    /* peak[3], ms, cpu_ms, walk_ms, lm[M], gen[M], sync start, sync end, optimizer ms, optimizer
     * state bytes, then the collectives: a count, 8 numbers and a start each, at most 2 per
     * instance (the replicas of every module but the backbone, and vpp chunks), then each
     * instance's weights in bytes (the log's "params") */
    int ni = t->n_modules - 1 + t->vpp; /* instances per rank: the replicas and vpp chunks */
    struct step_records sr = {.nrec = 10 + 2 * M + 1 + 10 * 2 * ni + ni, .ni = ni};
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
    int steps = o->steps > 0 ? o->steps : s->train.steps, hard = 0;
    long start = 0;
    /* Before step 1, every check whose failure would otherwise lose the run's work at its end:
     * the checkpoint to resume from, every output path. Each rank checks its part; then they
     * agree (agree), so a failure ends every process the same way. */
    int st = BM_OK;
    int sharded = 0; /* the set to resume has a file per replica (ZeRO-1, dp > 1) */
    if (rank0 && o->resume_dir) st = resume_choose(s, t, D, o, steps, pr, &start, &sharded, err);
    if (rank0 && st == BM_OK && o->ckpt_dir) st = ckpt_dir_free(o, err);
    if (st == BM_OK && o->trace_path && o->trace_from > steps)
        st = bm_err_set(err, "--trace-from %d is after the last step (%d)", o->trace_from, steps);
    if (rank0 && st == BM_OK && o->log_path && !o->resume_dir) st = check_output("--log", o->log_path, err);
    if (rank0 && st == BM_OK && o->trace_path) st = check_output("--trace", o->trace_path, err);
    if (rank0 && st == BM_OK && o->trace_path && o->trace_from > 0) { /* the per-step files' directory */
        size_t len = strlen(o->trace_path);
        char path[4096];
        if (len >= 5 && !strcmp(o->trace_path + len - 5, ".json")) len -= 5;
        if (snprintf(path, sizeof path, "%.*s.step%d.json", (int)len, o->trace_path, steps) >= (int)sizeof path)
            st = bm_err_set(err, "--trace %s: the path is too long", o->trace_path);
        else st = check_output("--trace-from (--trace)", path, err);
    }
    if (rank0 && st == BM_OK && o->dump_params) st = check_output("--dump-params", o->dump_params, err);
    for (int l = 0; l < nl && st == BM_OK && o->ckpt_dir && writer; l++)
        st = bm_ckpt_check_dir(o->ckpt_dir, c->first_rank + l, err);
    if ((rc = agree(c, st, "start: checking the outputs", &hard, err))) goto agreed_out;
    if (o->resume_dir) {
        long long s64[2] = {start, sharded}; /* rank 0's choice, to every rank */
        if ((rc = c->ops->bcast(c, s64, sizeof s64, err))) goto out;
        start = (long)s64[0], sharded = (int)s64[1];
        st = BM_OK;
        for (int l = 0; l < nl && st == BM_OK; l++)
            st = bm_ckpt_load(x[l], t, c->first_rank + l, sharded ? c->replica : -1, o->resume_dir, start, err);
        if ((rc = agree(c, st, "start: loading the checkpoint", &hard, err))) goto agreed_out;
        if (pr) fprintf(pr, "resumed from %s/step-%08ld after step %ld\n", o->resume_dir, start, start);
    }
    if (rank0 && o->log_path) {
        log = start ? open_resumed_log(o->log_path, start, err) : fopen(o->log_path, "w");
        if (!log && !start) bm_err_set(err, "--log %s: cannot open for writing: %s", o->log_path, strerror(errno));
    }
    if ((rc = agree(c, rank0 && o->log_path && !log, "start: opening the log", &hard, err))) goto agreed_out;
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
    if (o->trace_path && o->trace_from > 0 && steps - start > 0 &&
        !(traced = bm_calloc((size_t)(steps - start), sizeof *traced))) {
        rc = bm_err_set(err, "out of memory");
        goto out;
    }
    /* A failure of rank 0 alone writing an output at the end (the trace, the parameters): kept
     * here while every rank finishes the run's collectives and the final checkpoint, then agreed. */
    int soft = BM_OK, local = 0;
    struct bm_err soft_err = {{0}};
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
            rc = report_step(o, pr, log, allv, P, D, M, sr.nrec, x[0], t, step, steps, ms, err);
            bm_free(allv);
            if (rc) goto out;
        }
        if (each) { /* kept in memory on rank 0, written after the last step */
            rc = gather_trace(x, t, c, step, &traced[n_traced++], err);
            if (rc) goto out;
        }
        if (last && write_trace(x, t, costs, c, o->trace_path, &local, &soft_err)) {
            if (!local) {
                *err = soft_err, rc = BM_ERR;
                goto out;
            }
            soft = BM_ERR;
        }
        if (o->ckpt_dir && ((o->ckpt_every > 0 && (step + 1) % o->ckpt_every == 0) || step == steps - 1)) {
            /* The set of step + 1: every pipeline rank's file (written by replica 0: every replica
             * holds the same state), a barrier over the whole job, global rank 0's commit marker, a
             * second agreement, then the older sets go (ckpt.h). */
            struct bm_ckpt_meta meta;
            st = BM_OK;
            for (int l = 0; l < nl && st == BM_OK && writer; l++) {
                struct ckpt_fault cf = {o, c->first_rank + l, step};
                st = bm_ckpt_save(x[l], t, c->first_rank + l, file_replica, o->ckpt_dir, step + 1, ckpt_midway, &cf, err);
            }
            char what[64];
            snprintf(what, sizeof what, "the checkpoint of step %ld", step + 1);
            if ((rc = agree(c, st, what, &hard, err))) goto agreed_out;
            bm_ckpt_meta_of(s, t, D, step + 1, &meta);
            if ((rc = agree(c, rank0 ? bm_ckpt_commit(o->ckpt_dir, &meta, err) : BM_OK, what, &hard, err))) goto agreed_out;
            for (int l = 0; l < nl && writer; l++) bm_ckpt_prune(o->ckpt_dir, c->first_rank + l, file_replica, step + 1);
        }
    }
    if (rank0 && n_traced && soft == BM_OK && write_traced_steps(t, costs, c->dp, o->trace_path, traced, n_traced, &soft_err))
        soft = BM_ERR;
    if (o->dump_params && dump_params(x, t, c, o->dump_params, &local, soft == BM_OK ? &soft_err : err)) {
        if (!local) {
            if (soft == BM_OK) *err = soft_err;
            rc = BM_ERR;
            goto out;
        }
        soft = BM_ERR;
    }
    if (soft == BM_OK && pr && o->trace_path) fprintf(pr, "trace: %s\n", o->trace_path);
    /* Every process ends here together: no rank finalizes MPI while another may still fail. */
    if (soft) *err = soft_err;
    if ((rc = agree(c, soft, "the end of the run", &hard, err))) goto agreed_out;
    goto out;
agreed_out:
    agreed = !hard;
out:
    if (log) fclose(log);
    if (x)
        for (int l = 0; l < nl; l++) bm_exec_free(x[l]);
    bm_free(x), bm_free(sr.rec), bm_free(sr.items), bm_free(sr.bytes), bm_free(sr.ob);
    for (int i = 0; i < n_traced; i++) bm_free(traced[i].all), bm_free(traced[i].ob);
    bm_free(traced);
    if (rc == BM_OK) return BM_OK;
    return agreed ? agreed_fail(c, err) : fail(c, err);
}
