/* comm_local.c — the single-process stand-in for comm_mpi.c: all P pipeline ranks live in this
 * process; messages go through in-memory mailboxes (see comm.h). Sends are buffered (the data
 * is copied at isend, so a send completes at once); a recv completes when a matching message
 * has been sent. Collectives are plain loops over the local buffers. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/comm.h"
#include "util/util.h"

struct lreq {
    int used, done, is_recv;
    int from, to, tag;
    void *buf;       /* recv: destination */
    size_t bytes;
};

struct lmsg {
    int from, to, tag;
    void *data;      /* owned copy */
    size_t bytes;
    struct lmsg *next;
};

struct local {
    struct lreq *req;
    int n_req, cap_req;
    struct lmsg *msgs; /* unmatched sends, oldest first */
};

static long new_req(struct local *l, struct bm_err *err)
{
    for (int i = 0; i < l->n_req; i++)
        if (!l->req[i].used) return i;
    if (bm_grow(&l->req, &l->cap_req, l->n_req + 1, sizeof *l->req)) {
        bm_err_set(err, "out of memory for a message request");
        return -1;
    }
    return l->n_req++;
}

static int l_isend(struct bm_comm *c, int from, int to, int tag, const void *buf, size_t bytes, long *req,
                   struct bm_err *err)
{
    struct local *l = c->impl;
    /* A posted recv that matches takes the data directly. */
    for (int i = 0; i < l->n_req; i++) {
        struct lreq *q = &l->req[i];
        if (q->used && q->is_recv && !q->done && q->from == from && q->to == to && q->tag == tag) {
            if (q->bytes != bytes)
                return bm_err_set(err, "message %d>%d tag %d: %zu bytes sent, %zu expected", from, to, tag,
                                  bytes, q->bytes);
            if (bytes) memcpy(q->buf, buf, bytes);
            q->done = 1;
            goto sent;
        }
    }
    struct lmsg *m = bm_calloc(1, sizeof *m);
    void *data = bm_malloc(bytes ? bytes : 1);
    if (!m || !data) {
        bm_free(m), bm_free(data);
        return bm_err_set(err, "out of memory buffering a message (%zu bytes)", bytes);
    }
    if (bytes) memcpy(data, buf, bytes);
    *m = (struct lmsg){from, to, tag, data, bytes, NULL};
    struct lmsg **tail = &l->msgs;
    while (*tail) tail = &(*tail)->next;
    *tail = m;
sent:;
    long id = new_req(l, err);
    if (id < 0) return BM_ERR;
    l->req[id] = (struct lreq){.used = 1, .done = 1};
    *req = id;
    return BM_OK;
}

static int l_irecv(struct bm_comm *c, int to, int from, int tag, void *buf, size_t bytes, long *req,
                   struct bm_err *err)
{
    struct local *l = c->impl;
    long id = new_req(l, err);
    if (id < 0) return BM_ERR;
    l->req[id] = (struct lreq){.used = 1, .is_recv = 1, .from = from, .to = to, .tag = tag, .buf = buf,
                               .bytes = bytes};
    for (struct lmsg **p = &l->msgs; *p; p = &(*p)->next) {
        struct lmsg *m = *p;
        if (m->from == from && m->to == to && m->tag == tag) {
            if (m->bytes != bytes) {
                l->req[id].used = 0;
                return bm_err_set(err, "message %d>%d tag %d: %zu bytes sent, %zu expected", from, to, tag,
                                  m->bytes, bytes);
            }
            if (bytes) memcpy(buf, m->data, bytes);
            l->req[id].done = 1;
            *p = m->next;
            bm_free(m->data), bm_free(m);
            break;
        }
    }
    *req = id;
    return BM_OK;
}

static int l_wait(struct bm_comm *c, long req, int block, int *done, struct bm_err *err)
{
    (void)block;
    struct local *l = c->impl;
    if (req < 0 || req >= l->n_req || !l->req[req].used) return bm_err_set(err, "bad request id %ld", req);
    *done = l->req[req].done;
    if (*done) l->req[req].used = 0;
    return BM_OK;
}

static int l_allreduce_sum(struct bm_comm *c, float **bufs, size_t n, enum bm_comm_group group,
                           struct bm_err *err)
{
    (void)err;
    if (group == BM_COMM_DP) return BM_OK; /* one replica: each rank is its own group */
    for (int r = 1; r < c->nlocal; r++)
        for (size_t i = 0; i < n; i++) bufs[0][i] += bufs[r][i];
    for (int r = 1; r < c->nlocal; r++) memcpy(bufs[r], bufs[0], n * sizeof(float));
    return BM_OK;
}

/* One pipeline (D = 1): the world group is the local ranks 0 .. P-1, rank r owning slice r. */
static int l_reduce_scatter_sum(struct bm_comm *c, float **bufs, size_t count, enum bm_comm_group group,
                                struct bm_err *err)
{
    (void)err;
    int n = c->nlocal;
    if (group == BM_COMM_DP || n <= 1) return BM_OK;
    for (int k = 0; k < n; k++) { /* slice k summed in rank order, as the all-reduce above sums */
        size_t lo = count * (size_t)k / (size_t)n, hi = count * (size_t)(k + 1) / (size_t)n;
        for (size_t i = lo; i < hi; i++) {
            float s = bufs[0][i];
            for (int r = 1; r < n; r++) s += bufs[r][i];
            bufs[k][i] = s;
        }
    }
    return BM_OK;
}

static int l_allgather(struct bm_comm *c, float **bufs, size_t count, enum bm_comm_group group, struct bm_err *err)
{
    (void)err;
    int n = c->nlocal;
    if (group == BM_COMM_DP || n <= 1) return BM_OK;
    for (int k = 0; k < n; k++) {
        size_t lo = count * (size_t)k / (size_t)n, hi = count * (size_t)(k + 1) / (size_t)n;
        for (int r = 0; r < n; r++)
            if (r != k) memcpy(bufs[r] + lo, bufs[k] + lo, (hi - lo) * sizeof(float));
    }
    return BM_OK;
}

static int l_allreduce_max(struct bm_comm *c, const int *vals, int *out, struct bm_err *err)
{
    (void)err;
    *out = vals[0];
    for (int r = 1; r < c->nlocal; r++)
        if (vals[r] > *out) *out = vals[r];
    return BM_OK;
}

static int l_gather(struct bm_comm *c, const void *const *items, const size_t *bytes, void **out,
                    size_t *out_bytes, struct bm_err *err)
{
    size_t total = 0;
    for (int r = 0; r < c->nlocal; r++) total += bytes[r];
    char *o = bm_malloc(total ? total : 1);
    if (!o) return bm_err_set(err, "out of memory gathering %zu bytes", total);
    size_t off = 0;
    for (int r = 0; r < c->nlocal; r++) {
        if (bytes[r]) memcpy(o + off, items[r], bytes[r]);
        off += bytes[r];
        out_bytes[r] = bytes[r];
    }
    *out = o;
    return BM_OK;
}

static int l_bcast(struct bm_comm *c, void *buf, size_t bytes, struct bm_err *err)
{
    (void)c, (void)buf, (void)bytes, (void)err; /* one process: everyone already has rank 0's */
    return BM_OK;
}

static int l_clock_offset(struct bm_comm *c, double *offset, struct bm_err *err)
{
    (void)c, (void)err;
    *offset = 0; /* one process, one clock */
    return BM_OK;
}

static int l_split(struct bm_comm *c, int dp, struct bm_err *err)
{
    (void)c;
    if (dp > 1)
        return bm_err_set(err, "dp %d: every rank in this process runs one pipeline\nhint: data parallel runs under "
                               "mpirun (mpirun -np P*D bigmac train SPEC --dp D)", dp);
    return BM_OK;
}

static void l_abort(struct bm_comm *c, int code)
{
    (void)c;
    fflush(stdout);
    fflush(stderr);
    exit(code);
}

static void l_free(struct bm_comm *c)
{
    if (!c) return;
    struct local *l = c->impl;
    if (l) {
        while (l->msgs) {
            struct lmsg *m = l->msgs;
            l->msgs = m->next;
            bm_free(m->data), bm_free(m);
        }
        bm_free(l->req);
        bm_free(l);
    }
    bm_free(c);
}

static const struct bm_comm_ops local_ops = {
    .isend = l_isend, .irecv = l_irecv, .wait = l_wait, .allreduce_sum = l_allreduce_sum,
    .reduce_scatter_sum = l_reduce_scatter_sum, .allgather = l_allgather,
    .allreduce_max = l_allreduce_max, .gather = l_gather, .bcast = l_bcast, .clock_offset = l_clock_offset, .split = l_split, .abort = l_abort,
    .free = l_free,
};

struct bm_comm *bm_comm_local_new(int P)
{
    struct bm_comm *c = bm_calloc(1, sizeof *c);
    struct local *l = bm_calloc(1, sizeof *l);
    if (!c || !l) {
        bm_free(c), bm_free(l);
        return NULL;
    }
    *c = (struct bm_comm){.ops = &local_ops, .size = P, .first_rank = 0, .nlocal = P, .tag_ub = 1 << 30,
                          .cooperative = 1, .impl = l, .dp = 1, .replica = 0, .world = P};
    return c;
}
