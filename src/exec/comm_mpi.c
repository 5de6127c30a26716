/* comm_mpi.c — the executor's transport over MPI: one pipeline rank per process. The ONLY file
 * of bigmac that includes mpi.h (CoMD style); comm_local.c is its single-process stand-in.
 *
 * Data parallel (comm.h): split() makes a pipeline communicator per replica (ranks = pipeline
 * ranks; every point-to-point message goes there) and a data-parallel communicator per pipeline
 * rank (its D replicas; the backbone chunks' all-reduce); replicated modules' all-reduce, the
 * gathers, broadcasts and the clock ping-pong use MPI_COMM_WORLD.
 *
 * Point to point: MPI_Isend / MPI_Irecv on the pipeline communicator (MPI_COMM_WORLD with
 * D = 1); a blocking wait polls MPI_Test (yielding the core between polls, so oversubscribed
 * runs stay fast) and fails after comm->timeout_s, so a peer that hangs turns into an error
 * instead of a hang. Collectives are the non-blocking MPI-3 ones (MPI_Iallreduce, MPI_Igatherv, MPI_Ibcast) waited the same way;
 * the gradients' all-reduces and reduce-scatters may also be started inside the walk (icoll) and
 * waited later (coll_wait), every MPI_Test of the walk letting them progress. Errors
 * abort the whole job with MPI_Abort (a dead peer makes mpirun end every process), under a
 * watchdog that ends this process when MPI_Abort hangs (a dead link between hosts). When the
 * launcher ends the job (SIGTERM, because another rank failed), a rank that is waiting says
 * which op it waited in before it goes, like a rank whose wait timed out. */
#include <mpi.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "bigmac.h"
#include "exec/comm.h"
#include "util/util.h"

/* A gradient collective started inside the walk (icoll): its requests (an all-reduce of more
 * than 2^30 floats runs in parts) and, for an in-place reduce-scatter, its counts (kept until it
 * completes, as MPI asks) and the move of the rank's sum to its own slice once done. */
struct icoll {
    MPI_Request *r;
    int nr;                 /* 0: the slot is free */
    int scatter;
    int *counts, *displs;
    float *buf;
    size_t move_to, move_n; /* reduce-scatter: move_n floats from buf[0] to buf[move_to] */
};

struct mpi {
    struct icoll *ic;   /* [cap_ic] started collectives (icoll), n_ic slots in use or free */
    int n_ic, cap_ic;
    MPI_Request *req;
    int *peer;          /* [cap_peer] the other rank of each point-to-point request */
    int n_req, cap_req, cap_peer;
    char (*host)[MPI_MAX_PROCESSOR_NAME]; /* [world] each global rank's host; NULL when all share one */
    char **hostp;       /* [world] pointers into host: bm_comm.hosts */
    MPI_Comm pipe;      /* this replica's pipeline: point to point (MPI_COMM_WORLD with D = 1) */
    MPI_Comm dpc;       /* this pipeline rank's replicas (MPI_COMM_SELF with D = 1) */
    int world_rank;     /* this process's global rank */
    /* Who waits for whom (a timeout's message): a rank whose wait times out asks the rank it
     * waited for what that rank is doing (a probe on probe_tag); a rank that is waiting itself
     * answers on reply_tag with the rank it waits for (-1: in a collective). One that answers
     * nothing within the grace period hung or died. */
    int probe_tag, reply_tag;
    int waiting_for;    /* the current blocking wait's peer (a global rank); -1: a collective */
    int probe_seq;      /* numbers this rank's probes: a late answer to an earlier one is dropped */
    int probe_buf;      /* the probe's payload (its number), kept while its send is in flight */
    int *reply_buf;     /* [2 * world] the answer sent to each prober (rank waited for, the probe's
                         * number), kept while in flight */
};

static long new_req(struct mpi *m, struct bm_err *err)
{
    for (int i = 0; i < m->n_req; i++)
        if (m->req[i] == MPI_REQUEST_NULL) return i;
    if (bm_grow(&m->req, &m->cap_req, m->n_req + 1, sizeof *m->req)) {
        bm_err_set(err, "out of memory for a message request");
        return -1;
    }
    if (m->cap_peer < m->cap_req) {
        int *p = bm_realloc(m->peer, (size_t)m->cap_req * sizeof *p);
        if (!p) {
            bm_err_set(err, "out of memory for a message request");
            return -1;
        }
        m->peer = p, m->cap_peer = m->cap_req;
    }
    m->req[m->n_req] = MPI_REQUEST_NULL;
    return m->n_req++;
}

static int check(int rc, const char *what, struct bm_err *err)
{
    if (rc == MPI_SUCCESS) return BM_OK;
    char s[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, s, &len);
    return bm_err_set(err, "%s failed: %s", what, s);
}

static int m_isend(struct bm_comm *c, int from, int to, int tag, const void *buf, size_t bytes, long *req,
                   struct bm_err *err)
{
    (void)from;
    struct mpi *m = c->impl;
    if (bytes > (size_t)0x7fffffff) return bm_err_set(err, "message of %zu bytes is too large", bytes);
    long id = new_req(m, err);
    if (id < 0) return BM_ERR;
    if (check(MPI_Isend(buf, (int)bytes, MPI_BYTE, to, tag, m->pipe, &m->req[id]), "MPI_Isend", err))
        return BM_ERR;
    m->peer[id] = to;
    *req = id;
    return BM_OK;
}

static int m_irecv(struct bm_comm *c, int to, int from, int tag, void *buf, size_t bytes, long *req,
                   struct bm_err *err)
{
    (void)to;
    struct mpi *m = c->impl;
    if (bytes > (size_t)0x7fffffff) return bm_err_set(err, "message of %zu bytes is too large", bytes);
    long id = new_req(m, err);
    if (id < 0) return BM_ERR;
    if (check(MPI_Irecv(buf, (int)bytes, MPI_BYTE, from, tag, m->pipe, &m->req[id]), "MPI_Irecv", err))
        return BM_ERR;
    m->peer[id] = from;
    *req = id;
    return BM_OK;
}

/* Answer the probes of ranks whose wait for this one is about to time out: "I wait for rank
 * m->waiting_for" (sent without waiting for completion: the prober may be gone by then). Called
 * while this rank waits itself. */
static void answer_probes(struct bm_comm *c)
{
    struct mpi *m = c->impl;
    for (;;) {
        int flag = 0, seq;
        MPI_Status st;
        if (MPI_Iprobe(MPI_ANY_SOURCE, m->probe_tag, MPI_COMM_WORLD, &flag, &st) != MPI_SUCCESS || !flag) return;
        if (MPI_Recv(&seq, 1, MPI_INT, st.MPI_SOURCE, m->probe_tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE) != MPI_SUCCESS)
            return;
        MPI_Request r;
        int *ans = &m->reply_buf[2 * st.MPI_SOURCE];
        ans[0] = m->waiting_for, ans[1] = seq;
        if (MPI_Isend(ans, 2, MPI_INT, st.MPI_SOURCE, m->reply_tag, MPI_COMM_WORLD, &r) == MPI_SUCCESS)
            MPI_Request_free(&r);
    }
}

/* Ask ranks who[0..n-1] what they wait for, until 'deadline' (bm_now() seconds): ans[i] the rank
 * who[i] waits for (-1: a collective), -2 when it did not answer. Probes of others are answered
 * meanwhile (two ranks waiting for each other ask each other). */
static void ask(struct bm_comm *c, const int *who, int n, int *ans, double deadline)
{
    struct mpi *m = c->impl;
    MPI_Request *rr = bm_calloc((size_t)n + 1, sizeof *rr);
    int *got = bm_calloc(2 * (size_t)n + 1, sizeof *got);
    for (int i = 0; i < n; i++) ans[i] = -2;
    if (!rr || !got) {
        bm_free(rr), bm_free(got);
        return;
    }
    m->probe_buf = ++m->probe_seq;
    for (int i = 0; i < n; i++) {
        MPI_Request sr;
        rr[i] = MPI_REQUEST_NULL;
        if (MPI_Irecv(&got[2 * i], 2, MPI_INT, who[i], m->reply_tag, MPI_COMM_WORLD, &rr[i]) != MPI_SUCCESS) continue;
        if (MPI_Isend(&m->probe_buf, 1, MPI_INT, who[i], m->probe_tag, MPI_COMM_WORLD, &sr) == MPI_SUCCESS)
            MPI_Request_free(&sr);
    }
    for (int open = n; open > 0 && bm_now() < deadline;) {
        open = 0;
        for (int i = 0; i < n; i++) {
            int flag = 0;
            if (rr[i] == MPI_REQUEST_NULL) continue;
            if (MPI_Test(&rr[i], &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS) {
                rr[i] = MPI_REQUEST_NULL;
                continue;
            }
            if (flag && got[2 * i + 1] == m->probe_seq) {
                ans[i] = got[2 * i];
                continue;
            }
            if (flag && MPI_Irecv(&got[2 * i], 2, MPI_INT, who[i], m->reply_tag, MPI_COMM_WORLD, &rr[i]) != MPI_SUCCESS)
                rr[i] = MPI_REQUEST_NULL; /* a late answer to an earlier probe: wait for this one's */
            open += rr[i] != MPI_REQUEST_NULL;
        }
        answer_probes(c);
        struct timespec ts = {0, 100000};
        nanosleep(&ts, NULL);
    }
    for (int i = 0; i < n; i++)
        if (rr[i] != MPI_REQUEST_NULL) { /* no answer: it stays -2 */
            MPI_Cancel(&rr[i]);
            MPI_Request_free(&rr[i]);
        }
    bm_free(rr), bm_free(got);
}

/* Why a wait for 'peer' (-1: a collective) gets nothing, found out by asking until 'deadline',
 * into why[0..n-1]: for a point-to-point wait the chain of waits from the peer ("rank 1 is itself
 * waiting for rank 2, which does not answer: it hung or died"), for a collective (or a chain that
 * ends in one) the ranks that do not answer. So a rank that is itself waiting is never blamed. */
/* Global rank g as messages name ranks: "rank 3", or with replicas "rank 3 (pp 1 / dp 1)". */
static const char *gname(const struct bm_comm *c, int g, char *buf, size_t n)
{
    if (c->dp > 1) snprintf(buf, n, "rank %d (pp %d / dp %d)", g, g / c->dp, g % c->dp);
    else snprintf(buf, n, "rank %d", g);
    return buf;
}

static void explain(struct bm_comm *c, int peer, char *why, size_t n, double deadline)
{
    const struct mpi *m = c->impl;
    int P = c->world, me = m->world_rank;
    char g1[64], g2[64];
    size_t at = 0;
    why[0] = 0;
#define SAY(...) (at += (size_t)snprintf(why + at, at < n ? n - at : 0, __VA_ARGS__), at = at < n ? at : n - 1)
    if (peer >= 0 && peer < P) {
        int cur = peer, hops = 0;
        for (;;) {
            int ans;
            ask(c, &cur, 1, &ans, deadline);
            if (ans == -2) {
                if (hops) SAY(", which does not answer: it hung or died");
                else SAY("%s does not answer: it hung or died", gname(c, cur, g1, sizeof g1));
                break;
            }
            if (!hops) SAY("%s is itself waiting", gname(c, cur, g1, sizeof g1));
            if (ans < 0 || ans >= P) { /* then whoever keeps the collective from ending: below */
                SAY(hops ? ", which is waiting in a collective; " : " in a collective; ");
                peer = -1;
                break;
            }
            if (hops) SAY(", %s for %s", gname(c, cur, g1, sizeof g1), gname(c, ans, g2, sizeof g2));
            else SAY(" for %s", gname(c, ans, g1, sizeof g1));
            if (ans == me || ans == peer || ++hops >= P) {
                SAY(": a cycle of waits (a deadlock), no rank died");
                break;
            }
            cur = ans;
        }
    }
    if (peer < 0 || peer >= P) {
        int *who = bm_calloc((size_t)P + 1, sizeof *who), *ans = bm_calloc((size_t)P + 1, sizeof *ans), k = 0;
        if (who && ans) {
            for (int r = 0; r < P; r++)
                if (r != me) who[k++] = r;
            ask(c, who, k, ans, deadline);
            int silent = 0, j = 0;
            for (int i = 0; i < k; i++) silent += ans[i] == -2;
            for (int i = 0; i < k; i++)
                if (ans[i] == -2 && j++ < 8) SAY("%s%d", j > 1 ? ", " : silent > 1 ? "ranks " : "rank ", who[i]);
            if (silent > 8) SAY(", ...");
            if (silent) SAY(silent > 1 ? " do not answer: they hung or died" : " does not answer: it hung or died");
            else SAY("every other rank answers: they wait too");
        } else {
            SAY("a peer hung or died");
        }
        bm_free(who), bm_free(ans);
    }
#undef SAY
}

/* The timeout message: "WHAT after S s (WHY)", WHY from explain; when the ranks span several
 * hosts "...; P runs on HOST, this rank on HOST)" (peer >= 0: a pipeline rank of this replica,
 * named as everywhere: bm_comm_rank_name) or "...; this rank on HOST)". */
static int timed_out(struct bm_comm *c, const char *what, int peer, const char *why, struct bm_err *err)
{
    const struct mpi *m = c->impl;
    if (!why[0]) why = "a peer hung or died";
    if (!m->host) return bm_err_set(err, "%s after %.0f s (%s)", what, c->timeout_s, why);
    if (peer >= 0 && peer < c->size) {
        char pn[64];
        bm_comm_rank_name(c, peer, pn, sizeof pn);
        return bm_err_set(err, "%s after %.0f s (%s; %s runs on %s, this rank on %s)", what, c->timeout_s, why, pn,
                          m->host[bm_comm_global(c, peer)], m->host[m->world_rank]);
    }
    return bm_err_set(err, "%s after %.0f s (%s; this rank on %s)", what, c->timeout_s, why, m->host[m->world_rank]);
}

/* Poll *r until it completes (block) or once (!block); a blocking wait fails after timeout_s
 * (peer: the other pipeline rank of a point-to-point request, -1 for a collective). After the first
 * millisecond of a wait this rank answers the probes of ranks that wait for it; in the last
 * quarter of the timeout (at most 5 s) it asks the ranks it waits for (explain), so that the
 * message is ready when the timeout comes and a rank ends as soon as it did before. */
/* SIGTERM (mpirun ends the job when a rank failed, sending SIGTERM and SIGKILL a second later;
 * or a user's kill): the signal's number, so that a wait in progress (poll_req) fails at once
 * with a message naming its op instead of dying silently. A process that does not wait again
 * ends TERM_GRACE_S seconds later all the same (SIGALRM's default action, or the abort watchdog). */
static volatile sig_atomic_t ended_by;
enum { TERM_GRACE_S = 3 };

static void on_term(int sig)
{
    if (!ended_by) alarm(TERM_GRACE_S);
    ended_by = sig;
}

static void term_install(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_term;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
}

static int poll_req(struct bm_comm *c, MPI_Request *r, int block, int *done, const char *what, int peer,
                    struct bm_err *err)
{
    struct mpi *m = c->impl;
    double t0 = bm_now(), T = c->timeout_s, grace = T / 4 > 5 ? 5 : T / 4;
    int gpeer = peer >= 0 && peer < c->size ? bm_comm_global(c, peer) : -1; /* probes go over the world */
    char why[1024] = "";
    int asked = 0;
    for (;;) {
        int flag = 0;
        MPI_Status st;
        if (check(MPI_Test(r, &flag, &st), "MPI_Test", err)) return BM_ERR;
        if (flag) {
            *done = 1; /* MPI_Test set the request to MPI_REQUEST_NULL: the id is free again */
            return BM_OK;
        }
        if (!block) {
            *done = 0;
            return BM_OK;
        }
        /* The first millisecond: poll, yielding the core between polls (lowest latency, and a
         * peer sharing the core still runs). Then sleep 50 us between polls. */
        double waited = bm_now() - t0;
        if (waited < 1e-3) {
            sched_yield();
        } else {
            struct timespec ts = {0, 50000};
            nanosleep(&ts, NULL);
            m->waiting_for = gpeer;
            answer_probes(c);
            if (T > 0 && !asked && waited > T - grace) {
                explain(c, gpeer, why, sizeof why, t0 + T);
                asked = 1;
            }
            if (T > 0 && waited > T) return timed_out(c, what, peer, why, err);
        }
        if (ended_by)
            return bm_err_set(err, "%s after %.1f s: the job was ended (signal %d, from its launcher when another "
                                   "rank failed: that rank says why)", what, bm_now() - t0, (int)ended_by);
    }
}

static int m_wait(struct bm_comm *c, long req, int block, int *done, struct bm_err *err)
{
    struct mpi *m = c->impl;
    if (req < 0 || req >= m->n_req) return bm_err_set(err, "bad request id %ld", req);
    return poll_req(c, &m->req[req], block, done, "no message", m->peer[req], err);
}

/* Wait for a collective's request with the same timeout as point-to-point waits, so a peer that
 * hangs outside the op walk cannot hang everyone inside a collective. */
static int coll_wait(struct bm_comm *c, MPI_Request *r, const char *what, struct bm_err *err)
{
    int done = 0;
    return poll_req(c, r, 1, &done, what, -1, err);
}

static int m_allreduce_sum(struct bm_comm *c, float **bufs, size_t n, enum bm_comm_group group,
                           struct bm_err *err)
{
    const struct mpi *m = c->impl;
    MPI_Comm comm = group == BM_COMM_DP ? m->dpc : MPI_COMM_WORLD;
    if (group == BM_COMM_DP && c->dp <= 1) return BM_OK; /* one replica: nothing to sum */
    size_t done = 0;
    while (done < n) { /* MPI counts are ints */
        int k = n - done > (1u << 30) ? 1 << 30 : (int)(n - done);
        MPI_Request r;
        if (check(MPI_Iallreduce(MPI_IN_PLACE, bufs[0] + done, k, MPI_FLOAT, MPI_SUM, comm, &r),
                  "MPI_Iallreduce", err) ||
            coll_wait(c, &r, "no gradient all-reduce result", err))
            return BM_ERR;
        done += (size_t)k;
    }
    return BM_OK;
}

/* The slices of count floats over the n ranks of a group as MPI counts and displacements
 * (bm_malloc'ed, caller frees); BM_ERR beyond MPI's int counts. */
static int slices(size_t count, int n, int **counts, int **displs, struct bm_err *err)
{
    *counts = NULL, *displs = NULL;
    if (count > (size_t)0x7fffffff) return bm_err_set(err, "a ZeRO-1 collective of %zu floats is too large", count);
    *counts = bm_malloc((size_t)n * sizeof **counts), *displs = bm_malloc((size_t)n * sizeof **displs);
    if (!*counts || !*displs) {
        bm_free(*counts), bm_free(*displs);
        return bm_err_set(err, "out of memory");
    }
    for (int k = 0; k < n; k++) {
        size_t lo = count * (size_t)k / (size_t)n, hi = count * (size_t)(k + 1) / (size_t)n;
        (*displs)[k] = (int)lo, (*counts)[k] = (int)(hi - lo);
    }
    return BM_OK;
}

static int m_reduce_scatter_sum(struct bm_comm *c, float **bufs, size_t count, enum bm_comm_group group,
                                struct bm_err *err)
{
    const struct mpi *m = c->impl;
    MPI_Comm comm = group == BM_COMM_DP ? m->dpc : MPI_COMM_WORLD;
    int n = group == BM_COMM_DP ? c->dp : c->world, k = group == BM_COMM_DP ? c->replica : m->world_rank;
    if (n <= 1) return BM_OK;
    int *counts, *displs;
    if (slices(count, n, &counts, &displs, err)) return BM_ERR;
    MPI_Request r;
    /* in place: the input is the whole buffer, the rank's sum lands at its start; then moved to
     * the rank's own slice */
    int rc = check(MPI_Ireduce_scatter(MPI_IN_PLACE, bufs[0], counts, MPI_FLOAT, MPI_SUM, comm, &r),
                   "MPI_Ireduce_scatter", err) ||
             coll_wait(c, &r, "no gradient reduce-scatter result", err);
    if (!rc) memmove(bufs[0] + displs[k], bufs[0], (size_t)counts[k] * sizeof(float));
    bm_free(counts), bm_free(displs);
    return rc ? BM_ERR : BM_OK;
}

static int m_allgather(struct bm_comm *c, float **bufs, size_t count, enum bm_comm_group group, struct bm_err *err)
{
    const struct mpi *m = c->impl;
    MPI_Comm comm = group == BM_COMM_DP ? m->dpc : MPI_COMM_WORLD;
    int n = group == BM_COMM_DP ? c->dp : c->world;
    if (n <= 1) return BM_OK;
    int *counts, *displs;
    if (slices(count, n, &counts, &displs, err)) return BM_ERR;
    MPI_Request r;
    int rc = check(MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, bufs[0], counts, displs, MPI_FLOAT, comm, &r),
                   "MPI_Iallgatherv", err) ||
             coll_wait(c, &r, "no weight all-gather result", err);
    bm_free(counts), bm_free(displs);
    return rc ? BM_ERR : BM_OK;
}

static int m_icoll(struct bm_comm *c, int scatter, float *buf, size_t n, enum bm_comm_group group, long *req,
                   struct bm_err *err)
{
    struct mpi *m = c->impl;
    MPI_Comm comm = group == BM_COMM_DP ? m->dpc : MPI_COMM_WORLD;
    int g = group == BM_COMM_DP ? c->dp : c->world, k = group == BM_COMM_DP ? c->replica : m->world_rank;
    *req = -1; /* a group of one: nothing to do, coll_wait(-1) is done at once */
    if (g <= 1) return BM_OK;
    long id = -1;
    for (int i = 0; i < m->n_ic && id < 0; i++)
        if (!m->ic[i].nr) id = i;
    if (id < 0) {
        if (bm_grow(&m->ic, &m->cap_ic, m->n_ic + 1, sizeof *m->ic))
            return bm_err_set(err, "out of memory for a collective request");
        id = m->n_ic++;
    }
    struct icoll *q = &m->ic[id];
    *q = (struct icoll){.scatter = scatter, .buf = buf};
    size_t part = (size_t)1 << 30; /* MPI counts are ints */
    int parts = scatter || n == 0 ? 1 : (int)((n + part - 1) / part);
    if (!(q->r = bm_malloc((size_t)parts * sizeof *q->r))) return bm_err_set(err, "out of memory for a collective request");
    if (scatter) {
        if (slices(n, g, &q->counts, &q->displs, err)) {
            bm_free(q->r), q->r = NULL;
            return BM_ERR;
        }
        q->move_to = (size_t)q->displs[k], q->move_n = (size_t)q->counts[k];
        q->r[0] = MPI_REQUEST_NULL, q->nr = 1;
        if (check(MPI_Ireduce_scatter(MPI_IN_PLACE, buf, q->counts, MPI_FLOAT, MPI_SUM, comm, &q->r[0]),
                  "MPI_Ireduce_scatter", err))
            return BM_ERR;
    } else {
        for (int i = 0; i < parts; i++) {
            size_t at = (size_t)i * part;
            int cnt = (int)(n - at > part ? part : n - at);
            q->r[i] = MPI_REQUEST_NULL, q->nr = i + 1;
            if (check(MPI_Iallreduce(MPI_IN_PLACE, buf + at, cnt, MPI_FLOAT, MPI_SUM, comm, &q->r[i]), "MPI_Iallreduce",
                      err))
                return BM_ERR;
        }
    }
    *req = id;
    return BM_OK;
}

static int m_coll_wait(struct bm_comm *c, long req, int block, int *done, struct bm_err *err)
{
    struct mpi *m = c->impl;
    *done = 1;
    if (req == -1) return BM_OK;
    if (req < 0 || req >= m->n_ic || !m->ic[req].nr) return bm_err_set(err, "bad collective request id %ld", req);
    struct icoll *q = &m->ic[req];
    for (int i = 0; i < q->nr; i++) {
        int d = 0;
        if (q->r[i] == MPI_REQUEST_NULL) continue;
        if (poll_req(c, &q->r[i], block, &d, q->scatter ? "no gradient reduce-scatter result" : "no gradient all-reduce result",
                     -1, err))
            return BM_ERR;
        if (!d) {
            *done = 0;
            return BM_OK;
        }
    }
    if (q->move_n) memmove(q->buf + q->move_to, q->buf, q->move_n * sizeof(float));
    bm_free(q->r), bm_free(q->counts), bm_free(q->displs);
    *q = (struct icoll){0};
    return BM_OK;
}

static int m_allreduce_max(struct bm_comm *c, const int *vals, int *out, struct bm_err *err)
{
    MPI_Request r;
    if (check(MPI_Iallreduce(vals, out, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD, &r), "MPI_Iallreduce", err))
        return BM_ERR;
    return coll_wait(c, &r, "no all-reduce result", err);
}

static int m_gather(struct bm_comm *c, const void *const *items, const size_t *bytes, void **out,
                    size_t *out_bytes, struct bm_err *err)
{
    const struct mpi *m = c->impl;
    int P = c->world, me = m->world_rank, rc = BM_OK;
    *out = NULL;
    if (bytes[0] > (size_t)0x7fffffff) return bm_err_set(err, "gather of %zu bytes is too large", bytes[0]);
    int mine = (int)bytes[0];
    int *counts = NULL, *displs = NULL;
    char *buf = NULL;
    if (me == 0) {
        counts = bm_calloc((size_t)P, sizeof *counts);
        displs = bm_calloc((size_t)P, sizeof *displs);
        if (!counts || !displs) rc = bm_err_set(err, "out of memory");
    }
    MPI_Request r;
    if (check(MPI_Igather(&mine, 1, MPI_INT, counts, 1, MPI_INT, 0, MPI_COMM_WORLD, &r), "MPI_Igather", err) ||
        coll_wait(c, &r, "no gather result", err)) {
        rc = BM_ERR;
        goto out;
    }
    if (me == 0 && rc == BM_OK) {
        long total = 0;
        for (int r = 0; r < P; r++) displs[r] = (int)total, total += counts[r], out_bytes[r] = (size_t)counts[r];
        if (total > 0x7fffffff) rc = bm_err_set(err, "gather of %ld bytes is too large", total);
        else if (!(buf = bm_malloc((size_t)total + 1))) rc = bm_err_set(err, "out of memory gathering %ld bytes", total);
    }
    if (check(MPI_Igatherv(items[0], mine, MPI_BYTE, buf, counts, displs, MPI_BYTE, 0, MPI_COMM_WORLD, &r),
              "MPI_Igatherv", err) ||
        coll_wait(c, &r, "no gather result", err))
        rc = BM_ERR;
out:
    bm_free(counts), bm_free(displs);
    if (rc == BM_OK) *out = buf;
    else bm_free(buf);
    return rc;
}

static int m_bcast(struct bm_comm *c, void *buf, size_t bytes, struct bm_err *err)
{
    if (bytes > (size_t)0x7fffffff) return bm_err_set(err, "broadcast of %zu bytes is too large", bytes);
    MPI_Request r;
    if (check(MPI_Ibcast(buf, (int)bytes, MPI_BYTE, 0, MPI_COMM_WORLD, &r), "MPI_Ibcast", err)) return BM_ERR;
    return coll_wait(c, &r, "no broadcast", err);
}

/* One message of the clock ping-pong (send or receive n doubles with peer), waited with the
 * timeout like every other wait: a peer lost during the ping-pong is an error, not a hang. */
static int ping(struct bm_comm *c, int send, double *buf, int n, int peer, struct bm_err *err)
{
    MPI_Request r;
    int rc = send ? MPI_Isend(buf, n, MPI_DOUBLE, peer, c->tag_ub, MPI_COMM_WORLD, &r)
                  : MPI_Irecv(buf, n, MPI_DOUBLE, peer, c->tag_ub, MPI_COMM_WORLD, &r);
    if (check(rc, send ? "MPI_Isend" : "MPI_Irecv", err)) return BM_ERR;
    return coll_wait(c, &r, "no clock ping-pong reply", err);
}

static int m_clock_offset(struct bm_comm *c, double *offset, struct bm_err *err)
{
    enum { ROUNDS = 8 };
    const struct mpi *m = c->impl;
    int me = m->world_rank;
    *offset = 0;
    for (int r = 1; r < c->world; r++) {
        if (me != 0 && me != r) continue;
        double best_rtt = 1e30;
        for (int k = 0; k < ROUNDS; k++) {
            double t[2];
            if (me == r) {
                double t1 = bm_now();
                if (ping(c, 1, &t1, 1, 0, err) || ping(c, 0, t, 2, 0, err)) return BM_ERR;
                double t3 = bm_now(), rtt = t3 - t1;
                if (rtt < best_rtt) best_rtt = rtt, *offset = t[1] - 0.5 * (t1 + t3);
            } else {
                if (ping(c, 0, &t[0], 1, r, err)) return BM_ERR;
                t[1] = bm_now();
                if (ping(c, 1, t, 2, r, err)) return BM_ERR;
            }
        }
    }
    return BM_OK;
}

/* Exit status of a rank whose MPI_Abort does not return: set before the watchdog is armed. */
static volatile sig_atomic_t abort_code = 1;

static void abort_watchdog(int sig)
{
    (void)sig;
    _exit(abort_code);
}

/* MPI_Abort asks this host's launcher daemon to end the job. When that daemon cannot reach the
 * others (the link between hosts died) or is gone itself, MPI_Abort may never return: a
 * watchdog ends this process ABORT_WATCHDOG_S seconds later all the same, so a rank never
 * outlives its failure by more than that (docs/multihost.md). */
enum { ABORT_WATCHDOG_S = 10 };

static void m_abort(struct bm_comm *c, int code)
{
    (void)c;
    fflush(stdout);
    fflush(stderr);
    if (ended_by) _exit(code ? code : 1); /* the launcher is ending the job already */
    abort_code = code ? code : 1;
    signal(SIGALRM, abort_watchdog);
    alarm(ABORT_WATCHDOG_S);
    MPI_Abort(MPI_COMM_WORLD, code);
    exit(code);
}

/* Pipeline rank world_rank / D of replica world_rank % D: a communicator per replica (key p,
 * so its ranks are the pipeline ranks) and one per pipeline rank (key d). */
static int m_split(struct bm_comm *c, int dp, struct bm_err *err)
{
    struct mpi *m = c->impl;
    if (dp < 1 || c->world % dp)
        return bm_err_set(err, "%d ranks cannot run %d data-parallel replicas of one pipeline (not a multiple)",
                          c->world, dp);
    if (c->dp != 1 || dp == 1) return c->dp == dp ? BM_OK : bm_err_set(err, "the job is already split");
    int p = m->world_rank / dp, d = m->world_rank % dp;
    if (check(MPI_Comm_split(MPI_COMM_WORLD, d, p, &m->pipe), "MPI_Comm_split", err) ||
        check(MPI_Comm_split(MPI_COMM_WORLD, p, d, &m->dpc), "MPI_Comm_split", err))
        return BM_ERR;
    MPI_Comm_set_errhandler(m->pipe, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(m->dpc, MPI_ERRORS_RETURN);
    c->dp = dp, c->replica = d, c->first_rank = p, c->size = c->world / dp;
    return BM_OK;
}

static void m_free(struct bm_comm *c)
{
    if (!c) return;
    struct mpi *m = c->impl;
    if (m) {
        for (int i = 0; i < m->n_req; i++)
            if (m->req[i] != MPI_REQUEST_NULL) MPI_Cancel(&m->req[i]), MPI_Request_free(&m->req[i]);
        if (m->pipe != MPI_COMM_WORLD) MPI_Comm_free(&m->pipe);
        if (m->dpc != MPI_COMM_SELF) MPI_Comm_free(&m->dpc);
        for (int i = 0; i < m->n_ic; i++) /* collectives a failed step left open: their memory */
            bm_free(m->ic[i].r), bm_free(m->ic[i].counts), bm_free(m->ic[i].displs);
        bm_free(m->ic);
        bm_free(m->req), bm_free(m->peer), bm_free(m->host), bm_free(m->hostp), bm_free(m->reply_buf);
        bm_free(m);
    }
    bm_free(c);
    MPI_Finalize();
}

static const struct bm_comm_ops mpi_ops = {
    .isend = m_isend, .irecv = m_irecv, .wait = m_wait, .allreduce_sum = m_allreduce_sum,
    .reduce_scatter_sum = m_reduce_scatter_sum, .allgather = m_allgather,
    .icoll = m_icoll, .coll_wait = m_coll_wait, .allreduce_max = m_allreduce_max, .gather = m_gather, .bcast = m_bcast, .clock_offset = m_clock_offset, .split = m_split, .abort = m_abort,
    .free = m_free,
};

/* ------------------------------------------------------------------ start-up */

/* The start-up watchdog: MPI_Init cannot be polled, so a timer (SIGALRM) ends the process when it
 * has not returned after the timeout, with a message prepared beforehand (a signal handler may
 * only write and _exit). mpirun then ends the rest of the job. */
static char startup_msg[512];
static volatile sig_atomic_t startup_len;

static void startup_watchdog(int sig)
{
    (void)sig;
    if (startup_len > 0 && write(2, startup_msg, (size_t)startup_len) < 0) _exit(1);
    _exit(1);
}

static void startup_arm(double seconds)
{
    struct itimerval it = {{0, 0}, {(time_t)seconds, (suseconds_t)((seconds - (double)(time_t)seconds) * 1e6)}};
    if (seconds > 0 && it.it_value.tv_sec == 0 && it.it_value.tv_usec == 0) it.it_value.tv_usec = 1;
    signal(SIGALRM, startup_watchdog);
    setitimer(ITIMER_REAL, &it, NULL);
}

static void startup_disarm(void)
{
    struct itimerval it = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &it, NULL);
    signal(SIGALRM, SIG_DFL);
}

/* This process's rank before MPI_Init, from the launcher's environment; -1 when unknown. */
static int launcher_rank(void)
{
    static const char *const vars[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"};
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++) {
        const char *v = getenv(vars[i]);
        char *end;
        long r = v ? strtol(v, &end, 10) : -1;
        if (v && *v && !*end && r >= 0 && r < 1 << 30) return (int)r;
    }
    return -1;
}

/* --inject-fault RANK:init|hosts:KIND: this process misbehaves here. */
static void startup_fault(const struct bm_comm_mpi_start *st, int at, int rank)
{
    if (!st || st->fault_at != at || st->fault_rank != rank) return;
    fflush(stdout), fflush(stderr);
    if (st->fault_kind == BM_TRAIN_FAULT_CRASH) raise(SIGSEGV);
    else if (st->fault_kind == BM_TRAIN_FAULT_EXIT) _exit(3);
    else if (st->fault_kind == BM_TRAIN_FAULT_HANG)
        for (;;) pause();
}

/* Every rank's host name (MPI_Get_processor_name), kept only when the ranks span several hosts:
 * a timeout then says where the peer it waited for runs (docs/multihost.md). Point to point to
 * rank 0, then a broadcast, all polled under the timeout: a rank that hangs or dies during
 * start-up is named by rank 0 ("no host name from rank 2"), instead of every rank waiting in a
 * blocking MPI_Allgather for ever. The others wait for rank 0's list a little longer than rank 0
 * waits for them, so that rank 0's message, which names the rank, is the one the job ends with. */
static int gather_hosts(struct bm_comm *c, struct bm_err *err)
{
    struct mpi *m = c->impl;
    char me[MPI_MAX_PROCESSOR_NAME] = "";
    int len = 0, P = c->world, rank = m->world_rank, rc = BM_OK;
    if (check(MPI_Get_processor_name(me, &len), "MPI_Get_processor_name", err)) return BM_ERR;
    m->host = bm_calloc((size_t)P, sizeof *m->host);
    MPI_Request *req = bm_calloc((size_t)P, sizeof *req);
    if (!m->host || !req) {
        bm_free(req);
        return bm_err_set(err, "out of memory for %d host names", P);
    }
    for (int r = 0; r < P; r++) req[r] = MPI_REQUEST_NULL;
    double t0 = bm_now(), limit = c->timeout_s;
    if (rank == 0) {
        memcpy(m->host[0], me, sizeof me);
        for (int r = 1; r < P && rc == BM_OK; r++)
            rc = check(MPI_Irecv(m->host[r], MPI_MAX_PROCESSOR_NAME, MPI_CHAR, r, 0, MPI_COMM_WORLD, &req[r]),
                       "MPI_Irecv", err);
    } else {
        rc = check(MPI_Isend(me, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, 0, 0, MPI_COMM_WORLD, &req[0]), "MPI_Isend", err);
        if (limit > 0) limit = limit * 1.5 + 1;
    }
    for (int pending = 1; rc == BM_OK && pending;) { /* rank 0: every name; the others: their send */
        pending = 0;
        for (int r = 0; r < P && rc == BM_OK; r++) {
            int flag = 1;
            if (req[r] != MPI_REQUEST_NULL) rc = check(MPI_Test(&req[r], &flag, MPI_STATUS_IGNORE), "MPI_Test", err);
            pending |= !flag;
        }
        if (!pending || rc) break;
        struct timespec ts = {0, 200000};
        nanosleep(&ts, NULL);
        if (limit > 0 && bm_now() - t0 > limit) {
            if (rank != 0) {
                rc = bm_err_set(err, "start-up: rank 0 took no host name from this rank within %.0f s (rank 0 hung "
                                     "or died during start-up)", limit);
                break;
            }
            char who[256] = "";
            int n = 0, at = 0;
            for (int r = 1; r < P; r++)
                if (req[r] != MPI_REQUEST_NULL && n++ < 8)
                    at += snprintf(who + at, sizeof who - (size_t)at, "%s%d", n > 1 ? ", " : "", r);
            rc = bm_err_set(err, "start-up: no host name from rank%s %s%s within %.0f s: %s hung or died during "
                                 "start-up (after MPI_Init)", n > 1 ? "s" : "", who, n > 8 ? ", ..." : "", limit,
                            n > 1 ? "they" : "it");
        }
    }
    if (rc == BM_OK) { /* the list, from rank 0 to everyone */
        MPI_Request b;
        rc = check(MPI_Ibcast(m->host, P * MPI_MAX_PROCESSOR_NAME, MPI_CHAR, 0, MPI_COMM_WORLD, &b), "MPI_Ibcast", err);
        for (int flag = 0; rc == BM_OK && !flag;) {
            if ((rc = check(MPI_Test(&b, &flag, MPI_STATUS_IGNORE), "MPI_Test", err)) || flag) break;
            struct timespec ts = {0, 200000};
            nanosleep(&ts, NULL);
            if (limit > 0 && bm_now() - t0 > limit)
                rc = bm_err_set(err, "start-up: no list of host names from rank 0 within %.0f s (rank 0 hung or died "
                                     "during start-up)", limit);
        }
    }
    bm_free(req); /* on a failure the job is aborted: requests still pending do not matter */
    if (rc) return BM_ERR;
    int several = 0;
    for (int r = 0; r < P; r++) {
        m->host[r][MPI_MAX_PROCESSOR_NAME - 1] = 0;
        several |= strcmp(m->host[r], m->host[0]) != 0;
    }
    if (!several) {
        bm_free(m->host), m->host = NULL;
        return BM_OK;
    }
    if (!(m->hostp = bm_calloc((size_t)P, sizeof *m->hostp)))
        return bm_err_set(err, "out of memory for %d host names", P);
    for (int r = 0; r < P; r++) m->hostp[r] = m->host[r];
    c->hosts = m->hostp;
    return BM_OK;
}

struct bm_comm *bm_comm_mpi_new(int *argc, char ***argv, const struct bm_comm_mpi_start *start,
                                struct bm_err *err)
{
    int inited = 0, lrank = launcher_rank();
    double timeout = start ? start->timeout_s : 60;
    MPI_Initialized(&inited);
    if (!inited) {
        startup_fault(start, BM_TRAIN_FAULT_AT_INIT, lrank); /* a rank that never reaches MPI_Init */
        char who[32] = "this process";
        if (lrank >= 0) snprintf(who, sizeof who, "rank %d", lrank);
        int n = snprintf(startup_msg, sizeof startup_msg,
                         "bigmac: error: %s: start-up: MPI_Init did not return within %.0f s (a rank of the job did "
                         "not reach it: it hung or died before it)\nbigmac: hint: --timeout S sets the limit\n",
                         who, timeout);
        startup_len = n > 0 && n < (int)sizeof startup_msg ? n : 0;
        if (timeout > 0) startup_arm(timeout);
        int irc = MPI_Init(argc, argv);
        if (timeout > 0) startup_disarm();
        if (irc != MPI_SUCCESS) {
            bm_err_set(err, "MPI_Init failed");
            return NULL;
        }
    }
    /* Errors come back as codes; the executor turns them into messages and MPI_Abort. */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    term_install();
    struct bm_comm *c = bm_calloc(1, sizeof *c);
    struct mpi *m = bm_calloc(1, sizeof *m);
    if (!c || !m) {
        bm_free(c), bm_free(m);
        bm_err_set(err, "out of memory");
        return NULL;
    }
    int rank, size, *ub = NULL, flag = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag);
    /* the two largest tags are the wait probes' (timed_out); the next one the clock's */
    int top = flag && ub ? *ub : 32767;
    m->probe_tag = top, m->reply_tag = top - 1, m->waiting_for = -1;
    *c = (struct bm_comm){.ops = &mpi_ops, .size = size, .first_rank = rank, .nlocal = 1,
                          .tag_ub = top - 2, .cooperative = 0, .timeout_s = timeout, .impl = m,
                          .dp = 1, .replica = 0, .world = size};
    m->pipe = MPI_COMM_WORLD, m->dpc = MPI_COMM_SELF, m->world_rank = rank;
    if (!(m->reply_buf = bm_calloc(2 * (size_t)size, sizeof *m->reply_buf))) {
        m_free(c);
        bm_err_set(err, "out of memory");
        return NULL;
    }
    startup_fault(start, BM_TRAIN_FAULT_AT_HOSTS, rank); /* a rank that hangs after MPI_Init */
    if (gather_hosts(c, err)) {
        char msg[sizeof err->msg];
        snprintf(msg, sizeof msg, "rank %d: %s", rank, err->msg);
        snprintf(err->msg, sizeof err->msg, "%s", msg);
        fprintf(stderr, "bigmac: error: %s\n", err->msg);
        m_abort(c, 1); /* the others may be waiting for this rank: end the job */
    }
    return c;
}
