/* match.c — the one send/recv matcher (see table.h): every reader that needs to know which send
 * a recv receives (the simulator, the verifier, the trace loaders and renderers) asks this.
 * O(ops): one hash of the message keys, then the sends and recvs of each key are paired in
 * program order. */
#include <string.h>

#include "table/table.h"
#include "util/util.h"

static uint64_t key_hash(int32_t a, int32_t b, int32_t c, int32_t d)
{
    uint64_t h = ((uint64_t)(uint32_t)a << 32 | (uint32_t)b) * 0x9e3779b97f4a7c15ULL;
    h ^= ((uint64_t)(uint32_t)c << 32 | (uint32_t)d) + 0x632be59bd9b4e019ULL + (h << 6) + (h >> 2);
    h ^= h >> 31;
    h *= 0xbf58476d1ce4e5b9ULL;
    h ^= h >> 29;
    return h;
}

void bm_match_free(struct bm_match *m)
{
    bm_free(m->base);
    bm_free(m->peer_op);
    bm_free(m->msg_of);
    bm_free(m->msgs);
    memset(m, 0, sizeof *m);
}

/* An op that takes part in a message: a send or recv with a peer and tensor in range. */
static int carries(const struct bm_table *t, int r, const struct bm_op *op)
{
    return (op->kind == BM_OP_SEND || op->kind == BM_OP_RECV) && op->peer >= 0 && op->peer < t->pp &&
           op->peer != r && op->tensor >= 0 && op->tensor < t->n_tensors;
}

int bm_match_build(const struct bm_table *t, struct bm_match *m, struct bm_err *err)
{
    memset(m, 0, sizeof *m);
    int P = t->pp;
    m->pp = P;
    long n = 0, n_comm = 0;
    for (int r = 0; r < P; r++) n += t->ranks[r].n_ops;
    size_t nz = (size_t)(n > 0 ? n : 1);
    m->base = bm_malloc((size_t)(P + 1) * sizeof *m->base);
    m->peer_op = bm_malloc(nz * sizeof *m->peer_op);
    m->msg_of = bm_malloc(nz * sizeof *m->msg_of);
    if (!m->base || !m->peer_op || !m->msg_of) goto oom;
    m->base[0] = 0;
    for (int r = 0; r < P; r++) {
        m->base[r + 1] = m->base[r] + t->ranks[r].n_ops;
        for (int i = 0; i < t->ranks[r].n_ops; i++) n_comm += carries(t, r, &t->ranks[r].ops[i]);
    }
    /* keys: open addressing over message indices (+1; 0 = empty), at most half full */
    uint64_t cap = 16;
    while (cap < (uint64_t)n_comm * 2) cap <<= 1;
    int32_t *slot = bm_calloc((size_t)cap, sizeof *slot);
    m->msgs = bm_malloc((size_t)(n_comm ? n_comm : 1) * sizeof *m->msgs);
    if (!slot || !m->msgs) {
        bm_free(slot);
        goto oom;
    }
    for (int r = 0; r < P; r++)
        for (int i = 0; i < t->ranks[r].n_ops; i++) {
            const struct bm_op *op = &t->ranks[r].ops[i];
            long g = m->base[r] + i;
            m->peer_op[g] = -1;
            m->msg_of[g] = -1;
            if (!carries(t, r, op)) continue;
            int snd = op->kind == BM_OP_SEND;
            int32_t src = snd ? r : op->peer, dst = snd ? op->peer : r;
            uint64_t h = key_hash(src, dst, op->tensor, op->mb) & (cap - 1);
            struct bm_msg *e = NULL;
            for (; slot[h]; h = (h + 1) & (cap - 1)) {
                e = &m->msgs[slot[h] - 1];
                if (e->src == src && e->dst == dst && e->tensor == op->tensor && e->mb == op->mb) break;
                e = NULL;
            }
            if (!e) {
                slot[h] = ++m->n_msgs;
                e = &m->msgs[m->n_msgs - 1];
                *e = (struct bm_msg){src, dst, op->tensor, op->mb, 0, 0, -1, -1, -1, -1};
            }
            m->msg_of[g] = slot[h] - 1;
            int32_t *count = snd ? &e->n_send : &e->n_recv;
            int32_t *first = snd ? &e->send_op : &e->recv_op, *second = snd ? &e->send_op2 : &e->recv_op2;
            if (*count == 0) *first = i;
            else if (*count == 1) *second = i;
            (*count)++;
        }
    bm_free(slot);
    /* Pair the k-th recv of a key with its k-th send: chain each key's sends in program order
     * (they are all on its src rank), then let every recv, in program order, take the next. */
    int32_t *head = bm_malloc((size_t)(m->n_msgs ? m->n_msgs : 1) * sizeof *head);
    int32_t *next = bm_malloc(nz * sizeof *next);
    if (!head || !next) {
        bm_free(head);
        bm_free(next);
        goto oom;
    }
    for (int k = 0; k < m->n_msgs; k++) head[k] = -1;
    for (int r = P - 1; r >= 0; r--)
        for (int i = t->ranks[r].n_ops - 1; i >= 0; i--) {
            long g = m->base[r] + i;
            if (m->msg_of[g] < 0 || t->ranks[r].ops[i].kind != BM_OP_SEND) continue;
            next[g] = head[m->msg_of[g]];
            head[m->msg_of[g]] = (int32_t)i;
        }
    for (int r = 0; r < P; r++)
        for (int i = 0; i < t->ranks[r].n_ops; i++) {
            long g = m->base[r] + i;
            if (m->msg_of[g] < 0 || t->ranks[r].ops[i].kind != BM_OP_RECV) continue;
            struct bm_msg *e = &m->msgs[m->msg_of[g]];
            int32_t s = head[m->msg_of[g]];
            if (s < 0) continue; /* more recvs than sends: this one is unmatched */
            head[m->msg_of[g]] = next[m->base[e->src] + s];
            m->peer_op[g] = s;
            m->peer_op[m->base[e->src] + s] = (int32_t)i;
        }
    bm_free(head);
    bm_free(next);
    return BM_OK;
oom:
    bm_match_free(m);
    return bm_err_set(err, "out of memory matching sends to recvs (%ld ops)", n);
}

/* bm_match_peers: each key's sends are one record, holding the key and its first and last
 * unmatched send (indices on the src rank, where all of a key's sends are); a key's later sends
 * are chained through peer_op, which holds -2 - (the next send's index) until the send is
 * matched. Then every recv, in program order, takes its key's first unmatched send: the same
 * k-th-with-k-th pairing as bm_match_build. The records are found by (tensor, mb) directly
 * when n_tensors * M is within a few times the op count (a plan's table: a rank's consecutive
 * ops touch nearby entries, where a hash would touch a random cache line each), by a hash of
 * the key otherwise. */
struct prec {
    int32_t src, dst, tensor, mb;
    int32_t head, tail; /* first and last unmatched send of the key on src; -1 */
    int32_t next;       /* direct addressing: the next record of the same (tensor, mb), -1 */
};

struct pindex {
    struct prec *rec;
    int32_t n_rec;
    int direct;
    int32_t *first;   /* direct: [n_tensors * M] first record of (tensor, mb); hash: [cap] record + 1 */
    uint64_t cap;     /* hash slots (a power of two) */
    int M;
};

/* The record of key (src, dst, tensor, mb), or NULL; with add, a new one is made when none is. */
static struct prec *pindex_get(struct pindex *x, int32_t src, int32_t dst, int32_t tensor, int32_t mb, int add)
{
    int32_t *link;
    if (x->direct) {
        link = &x->first[(size_t)tensor * (size_t)x->M + (size_t)mb];
        for (; *link >= 0; link = &x->rec[*link].next) {
            struct prec *e = &x->rec[*link];
            if (e->src == src && e->dst == dst) return e;
        }
        if (!add) return NULL;
        x->rec[x->n_rec] = (struct prec){src, dst, tensor, mb, -1, -1, -1};
        *link = x->n_rec;
        return &x->rec[x->n_rec++];
    }
    uint64_t h = key_hash(src, dst, tensor, mb) & (x->cap - 1);
    for (; x->first[h]; h = (h + 1) & (x->cap - 1)) {
        struct prec *e = &x->rec[x->first[h] - 1];
        if (e->src == src && e->dst == dst && e->tensor == tensor && e->mb == mb) return e;
    }
    if (!add) return NULL;
    x->rec[x->n_rec] = (struct prec){src, dst, tensor, mb, -1, -1, -1};
    x->first[h] = ++x->n_rec;
    return &x->rec[x->n_rec - 1];
}

int bm_match_peers(const struct bm_table *t, struct bm_match *m, struct bm_err *err)
{
    memset(m, 0, sizeof *m);
    int P = t->pp;
    m->pp = P;
    long n = 0, n_send = 0, n_matched = 0;
    struct pindex x = {NULL, 0, 0, NULL, 16, t->microbatches};
    for (int r = 0; r < P; r++) n += t->ranks[r].n_ops;
    m->base = bm_malloc((size_t)(P + 1) * sizeof *m->base);
    m->peer_op = bm_malloc((size_t)(n > 0 ? n : 1) * sizeof *m->peer_op);
    if (!m->base || !m->peer_op) goto oom;
    m->base[0] = 0;
    for (int r = 0; r < P; r++) {
        m->base[r + 1] = m->base[r] + t->ranks[r].n_ops;
        for (int i = 0; i < t->ranks[r].n_ops; i++)
            n_send += t->ranks[r].ops[i].kind == BM_OP_SEND && carries(t, r, &t->ranks[r].ops[i]);
    }
    long keys = (long)(t->n_tensors > 0 ? t->n_tensors : 0) * (t->microbatches > 0 ? t->microbatches : 0);
    x.direct = x.M > 0 && keys <= 4 * n + 4096;
    if (!x.direct)
        while (x.cap < (uint64_t)n_send * 2) x.cap <<= 1;
    x.rec = bm_malloc((size_t)(n_send > 0 ? n_send : 1) * sizeof *x.rec);
    x.first = x.direct ? bm_malloc((size_t)(keys > 0 ? keys : 1) * sizeof *x.first)
                       : bm_calloc((size_t)x.cap, sizeof *x.first);
    if (!x.rec || !x.first) goto oom;
    if (x.direct) memset(x.first, 0xff, (size_t)keys * sizeof *x.first); /* -1: no record */
    for (int r = 0; r < P; r++) { /* sends, in program order per rank */
        int32_t *peer = m->peer_op + m->base[r];
        for (int i = 0; i < t->ranks[r].n_ops; i++) {
            const struct bm_op *op = &t->ranks[r].ops[i];
            peer[i] = -1;
            if (op->kind != BM_OP_SEND || !carries(t, r, op)) continue;
            struct prec *e = pindex_get(&x, r, op->peer, op->tensor, op->mb, 1);
            if (e->head < 0) e->head = i;
            else peer[e->tail] = -2 - i;
            e->tail = i;
        }
    }
    for (int r = 0; r < P; r++) /* recvs, in program order per rank, take the first unmatched send */
        for (int i = 0; i < t->ranks[r].n_ops; i++) {
            const struct bm_op *op = &t->ranks[r].ops[i];
            if (op->kind != BM_OP_RECV || !carries(t, r, op)) continue;
            struct prec *e = pindex_get(&x, op->peer, r, op->tensor, op->mb, 0);
            if (!e || e->head < 0) continue; /* more recvs than sends: unmatched */
            int32_t *sp = &m->peer_op[m->base[op->peer] + e->head];
            m->peer_op[m->base[r] + i] = e->head;
            e->head = *sp <= -2 ? -2 - *sp : -1;
            *sp = i;
            n_matched++;
        }
    bm_free(x.rec);
    bm_free(x.first);
    if (n_matched < n_send) /* sends no recv took keep their chain links: -1 as bm_match_build */
        for (long g = 0; g < n; g++)
            if (m->peer_op[g] < -1) m->peer_op[g] = -1;
    return BM_OK;
oom:
    bm_free(x.rec);
    bm_free(x.first);
    bm_match_free(m);
    return bm_err_set(err, "out of memory matching sends to recvs (%ld ops)", n);
}

/* ---------------------------------------------------------------- the deadlock report */

int bm_match_deadlock_report(const struct bm_table *t, const struct bm_match *m, const int *pc,
                             void (*line)(void *ctx, const char *text), void *ctx)
{
    int P = t->pp, blocked = 0;
    for (int r = 0; r < P; r++) blocked += pc[r] < t->ranks[r].n_ops;
    if (!blocked) return 0;
    char text[1024], a[BM_MAX_NAME + 64], b[BM_MAX_NAME + 64], c[BM_MAX_NAME + 64];
    snprintf(text, sizeof text, "%d of %d ranks cannot finish (each waits for a send that never happens)",
             blocked, P);
    line(ctx, text);
    /* the rank a stopped rank waits for: its recv's peer, when that rank has stopped too */
#define WAITS_ON(r) (t->ranks[r].ops[pc[r]].peer)
#define STOPPED(r) ((r) >= 0 && (r) < P && pc[r] < t->ranks[r].n_ops)
    /* follow the waits from the first stopped rank: the second visit of a rank closes a cycle
     * (no cycle when the walk reaches a rank that finished, possible only in a table whose
     * counts are wrong, which the verifier reports first) */
    int *step = bm_calloc((size_t)P, sizeof *step);
    if (step) {
        int r = 0, k = 1;
        while (!STOPPED(r)) r++;
        while (STOPPED(r) && !step[r]) {
            step[r] = k++;
            r = WAITS_ON(r);
        }
        if (STOPPED(r)) {
            size_t len = (size_t)snprintf(text, sizeof text, "  cycle: rank %d", r);
            for (int q = WAITS_ON(r);; q = WAITS_ON(q)) {
                if (len < sizeof text) len += (size_t)snprintf(text + len, sizeof text - len, " -> rank %d", q);
                if (q == r) break;
            }
            if (len < sizeof text) snprintf(text + len, sizeof text - len, " (each waits for the next)");
            line(ctx, text);
        }
        bm_free(step);
    }
    for (int r = 0; r < P; r++) {
        if (!STOPPED(r)) continue;
        const struct bm_op *op = &t->ranks[r].ops[pc[r]];
        int s = op->peer;
        int32_t si = bm_match_peer(m, r, pc[r]);
        bm_op_format(t, op, a, sizeof a);
        if (s < 0 || s >= P || si < 0) {
            snprintf(text, sizeof text, "  rank %d blocked at op #%d %s: no send matches it", r, pc[r], a);
        } else {
            bm_op_format(t, &t->ranks[s].ops[si], b, sizeof b);
            if (STOPPED(s)) {
                bm_op_format(t, &t->ranks[s].ops[pc[s]], c, sizeof c);
                snprintf(text, sizeof text, "  rank %d blocked at op #%d %s: waits for rank %d's op #%d %s; "
                         "rank %d is itself blocked at op #%d %s", r, pc[r], a, s, si, b, s, pc[s], c);
            } else {
                snprintf(text, sizeof text, "  rank %d blocked at op #%d %s: waits for rank %d's op #%d %s; "
                         "rank %d has finished", r, pc[r], a, s, si, b, s);
            }
        }
        line(ctx, text);
    }
#undef WAITS_ON
#undef STOPPED
    return blocked;
}
