/* trace.c — Chrome Trace Event JSON (Perfetto, chrome://tracing) of a timeline, and its loader.
 * The shape is documented in docs/trace.md: one process per rank with threads compute (tid 0),
 * send (1), recv (2); an "X" slice per op; a "C" counter event per memory change; an "s"/"f"
 * flow pair per send -> recv; the table embedded under "bigmac" so the trace re-renders. */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "report/critical.h"
#include "report/report.h"
#include "sim/expect.h"
#include "sim/step.h"
#include "spec/jpos.h"
#include "util/util.h"

#define MEM_COUNTER "activation MiB"
/* Bounds of a loaded trace's numbers, the spec's own (docs/spec.md): any time (ts, ts + dur)
 * at most 1e9 ms, a message at most 1e12 MiB, a memory counter at most 1e12 MiB. */
#define TRACE_MAX_MS 1e9
#define TRACE_MAX_MIB 1e12

/* Integer nanoseconds as microseconds ("12.345"). */
static void put_ns(FILE *f, long long ns)
{
    if (ns < 0) {
        fputc('-', f);
        ns = -ns;
    }
    long long us = ns / 1000, frac = ns % 1000;
    if (!frac) fprintf(f, "%lld", us);
    else if (frac % 100 == 0) fprintf(f, "%lld.%lld", us, frac / 100);
    else if (frac % 10 == 0) fprintf(f, "%lld.%02lld", us, frac / 10);
    else fprintf(f, "%lld.%03lld", us, frac);
}

static long long to_ns(double ms)
{
    return (long long)llround(ms * 1e6);
}

/* Microseconds with nanosecond resolution, trailing zeros trimmed. */
static void put_us(FILE *f, double ms)
{
    char b[48];
    snprintf(b, sizeof b, "%.3f", ms * 1000.0);
    char *e = b + strlen(b) - 1;
    while (*e == '0') *e-- = 0;
    if (*e == '.') *e = 0;
    if (!strcmp(b, "-0")) strcpy(b, "0");
    fputs(b, f);
}

static void put_ms(FILE *f, double ms)
{
    char b[48];
    snprintf(b, sizeof b, "%.9g", ms);
    fputs(b, f);
}

static void meta(FILE *f, int pid, int tid, const char *name, const char *key, const char *sval,
                 int ival)
{
    fprintf(f, "{\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"name\":\"%s\",\"args\":{\"%s\":", pid, tid,
            name, key);
    if (sval) bm_put_jstr(f, sval);
    else fprintf(f, "%d", ival);
    fprintf(f, "}},\n");
}

static const char *const trace_roles[BM_N_ROLES] = {"encoder", "backbone", "generator"};

/* What writing one trace needs besides the table and the timeline. */
struct trace_out {
    FILE *f;
    const struct bm_table *t;
    const struct bm_costs *c;  /* embedded with the table; the step's model (NULL: none) */
    const struct bm_timeline *tl;
    struct bm_match mt;        /* each recv's send: the flow arrows */
    struct bm_critical crit;   /* ops on the critical path */
    long long **ts, **te;      /* [rank][op] slice start / end, integer ns */
    long flow_id;
    int pid0;                  /* pid of the timeline's rank 0: d * pp for data-parallel replica d */
    int dp;                    /* replicas written (1: one pipeline, rows "rank N") */
};

/* otherData (the summary and the critical path), the embedded table, the rank/thread names. */
static void put_trace_header(const struct trace_out *o)
{
    FILE *f = o->f;
    const struct bm_table *t = o->t;
    const struct bm_timeline *tl = o->tl;
    static const char *const threads[3] = {"compute", "send", "recv"};
    fprintf(f, "{\"displayTimeUnit\": \"ms\",\n\"otherData\": {\"generator\": \"bigmac\", "
               "\"policy\": \"%s\", \"backbone\": \"%s\", \"pp\": %d, \"vpp\": %d, "
               "\"microbatches\": %d, \"makespan_ms\": %.9g, \"bubble_ratio\": %.6g, "
               "\"measured\": %s, \"critical_path\": {\"backbone_ms\": %.9g, \"nested_ms\": %.9g, "
               "\"transfer_ms\": %.9g, \"waiting_ms\": %.9g, \"ops\": %d}},\n",
            bm_policy_name(t->policy), bm_backbone_name(t->backbone), t->pp, t->vpp,
            t->microbatches, tl->makespan_ms, tl->bubble_ratio, tl->measured ? "true" : "false",
            o->crit.backbone_ms, o->crit.nested_ms, o->crit.transfer_ms, o->crit.waiting_ms, o->crit.n_ops);
    fprintf(f, "\"bigmac\": {\"format\": \"bigmac-trace\", \"version\": 1, \"measured\": %s, "
               "\"samples_per_microbatch\": %d, \"memory_counter\": \"" MEM_COUNTER "\",\n\"table\": ",
            tl->measured ? "true" : "false",
            tl->samples_per_microbatch > 0 ? tl->samples_per_microbatch : 1);
    bm_table_write_json(t, o->c, f);
    fprintf(f, "},\n\"traceEvents\": [\n");
    /* With D replicas, pipeline rank p of replica d is process d*P + p (so replica 0's are the
     * embedded table's ranks, what the loader reads), named "pp p / dp d" and sorted by its
     * global rank p*D + d. */
    int D = o->dp > 1 ? o->dp : 1;
    for (int d = 0; d < D; d++)
        for (int r = 0; r < t->pp; r++) {
            char name[48];
            int pid = d * t->pp + r;
            if (D > 1) snprintf(name, sizeof name, "pp %d / dp %d", r, d);
            else snprintf(name, sizeof name, "rank %d", r);
            meta(f, pid, 0, "process_name", "name", name, 0);
            meta(f, pid, 0, "process_sort_index", "sort_index", NULL, r * D + d);
            for (int k = 0; k < 3; k++) {
                meta(f, pid, k, "thread_name", "name", threads[k], 0);
                meta(f, pid, k, "thread_sort_index", "sort_index", NULL, k);
            }
        }
}

/* Slice times in integer ns. On the send and recv threads, slices that would start at the same
 * nanosecond as the previous one (zero-length sends and recvs issued together) are nudged 1 ns
 * apart: viewers mis-nest zero-length slices with identical timestamps. BM_ERR when out of
 * memory (trace_out_free releases what was made). */
static int slice_times(struct trace_out *o)
{
    const struct bm_table *t = o->t;
    o->ts = bm_calloc((size_t)(t->pp > 0 ? t->pp : 1), sizeof *o->ts);
    o->te = bm_calloc((size_t)(t->pp > 0 ? t->pp : 1), sizeof *o->te);
    if (!o->ts || !o->te) return BM_ERR;
    for (int r = 0; r < t->pp; r++) {
        int n = t->ranks[r].n_ops;
        long long *ts = o->ts[r] = bm_malloc((size_t)(n ? n : 1) * sizeof **o->ts);
        long long *te = o->te[r] = bm_malloc((size_t)(n ? n : 1) * sizeof **o->te);
        if (!ts || !te) return BM_ERR;
        long long last[3] = {LLONG_MIN, LLONG_MIN, LLONG_MIN};
        for (int i = 0; i < n; i++) {
            const struct bm_op_time *ot = &o->tl->ranks[r].ops[i];
            int k = t->ranks[r].ops[i].kind;
            long long a = to_ns(ot->start_ms), b = to_ns(ot->end_ms);
            if (k != BM_OP_COMPUTE && last[k] != LLONG_MIN && a <= last[k]) a = last[k] + 1;
            if (b < a) b = a;
            last[k] = a;
            ts[i] = a;
            te[i] = b;
        }
    }
    return BM_OK;
}

static void trace_out_free(struct trace_out *o)
{
    for (int r = 0; o->ts && o->te && r < o->t->pp; r++) {
        bm_free(o->ts[r]);
        bm_free(o->te[r]);
    }
    bm_free(o->ts);
    bm_free(o->te);
    bm_match_free(&o->mt);
    bm_critical_free(o->t, &o->crit);
}

/* Rank r's op i as a complete ("X") event with its args, and for a recv the flow arrow from its
 * send. */
static void put_op_event(struct trace_out *o, int r, int i)
{
    FILE *f = o->f;
    const struct bm_table *t = o->t;
    const struct bm_op *op = &t->ranks[r].ops[i];
    const struct bm_op_time *ot = &o->tl->ranks[r].ops[i];
    char buf[BM_MAX_NAME + 64], wbuf[BM_MAX_NAME + 64];
    bm_op_format(t, op, buf, sizeof buf);
    int tid = op->kind == BM_OP_COMPUTE ? 0 : op->kind == BM_OP_SEND ? 1 : 2;
    const char *cat = op->kind == BM_OP_SEND ? "send" : op->kind == BM_OP_RECV ? "recv"
                      : op->module >= 0 && op->module < t->n_modules
                          ? trace_roles[t->modules[op->module].role] : "compute";
    fprintf(f, "{\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"ts\":", o->pid0 + r, tid);
    put_ns(f, o->ts[r][i]);
    fprintf(f, ",\"dur\":");
    put_ns(f, o->te[r][i] - o->ts[r][i]);
    fprintf(f, ",\"name\":");
    bm_put_jstr(f, buf);
    /* weight gradients in their own colour (a Chrome trace reserved colour name) */
    if (op->kind == BM_OP_COMPUTE && op->pass == BM_PASS_W) fprintf(f, ",\"cname\":\"olive\"");
    fprintf(f, ",\"cat\":\"%s\",\"args\":{\"op\":%d,\"mb\":%d", cat, i, op->mb);
    if (op->kind == BM_OP_COMPUTE) {
        fprintf(f, ",\"module\":");
        bm_put_jstr(f, op->module >= 0 && op->module < t->n_modules ? t->modules[op->module].name : "?");
        fprintf(f, ",\"pass\":\"%s\"", bm_pass_name((enum bm_pass)op->pass));
        if (op->chunk >= 0) fprintf(f, ",\"chunk\":%d", op->chunk);
    } else {
        fprintf(f, ",\"tensor\":");
        bm_put_jstr(f, op->tensor >= 0 && op->tensor < t->n_tensors ? t->tensors[op->tensor].name : "?");
        fprintf(f, ",\"peer\":%d", op->peer);
        if (ot->msg_bytes > 0) fprintf(f, ",\"bytes\":%.0f", ot->msg_bytes); /* measured message */
    }
    fprintf(f, ",\"ready_ms\":");
    put_ms(f, ot->ready_ms);
    if (ot->wait_rank >= 0 && ot->wait_rank < t->pp && ot->wait_op >= 0 &&
        ot->wait_op < t->ranks[ot->wait_rank].n_ops) {
        bm_op_format(t, &t->ranks[ot->wait_rank].ops[ot->wait_op], wbuf, sizeof wbuf);
        fprintf(f, ",\"wait_rank\":%d,\"wait_op\":%d,\"waited_for\":", ot->wait_rank, ot->wait_op);
        char w2[sizeof wbuf + 32];
        snprintf(w2, sizeof w2, "%s on rank %d", wbuf, ot->wait_rank);
        bm_put_jstr(f, w2);
    }
    if (o->crit.on[r][i]) fprintf(f, ",\"critical\":true");
    fprintf(f, "}},\n");
    /* flow: the matching send -> this recv */
    int si = op->kind == BM_OP_RECV ? bm_match_peer(&o->mt, r, i) : -1;
    if (si < 0) return;
    fprintf(f, "{\"ph\":\"s\",\"id\":%ld,\"pid\":%d,\"tid\":1,\"ts\":", o->flow_id, o->pid0 + op->peer);
    put_ns(f, o->ts[op->peer][si]);
    fprintf(f, ",\"name\":");
    bm_put_jstr(f, buf);
    fprintf(f, ",\"cat\":\"dep\"},\n{\"ph\":\"f\",\"bp\":\"e\",\"id\":%ld,\"pid\":%d,\"tid\":2,\"ts\":",
            o->flow_id, o->pid0 + r);
    put_ns(f, o->te[r][i]);
    fprintf(f, ",\"name\":");
    bm_put_jstr(f, buf);
    fprintf(f, ",\"cat\":\"dep\"},\n");
    o->flow_id++;
}

/* Rank r's activation memory as counter ("C") events. */
static void put_mem_events(const struct trace_out *o, int r)
{
    const struct bm_rank_timeline *rt = &o->tl->ranks[r];
    for (int k = 0; k < rt->n_mem; k++) {
        const struct bm_mem_point *mp = &rt->mem[k];
        fprintf(o->f, "{\"ph\":\"C\",\"pid\":%d,\"tid\":0,\"ts\":", o->pid0 + r);
        put_us(o->f, mp->t_ms);
        fprintf(o->f, ",\"name\":\"" MEM_COUNTER "\",\"args\":{");
        for (int j = 0; j < BM_N_ROLES; j++) {
            fprintf(o->f, "%s\"%s\":", j ? "," : "", trace_roles[j]);
            put_ms(o->f, mp->act_mib[j]);
        }
        fprintf(o->f, "}},\n");
    }
}

/* One "X" slice of the step after the walk on rank r's "step" thread (tid 3; no args.op, so
 * the loader passes over it). */
static void put_step_slice(const struct trace_out *o, int r, const char *name, double a_ms, double b_ms,
                           double busy_ms)
{
    if (!(b_ms > a_ms)) return;
    fprintf(o->f, "{\"ph\":\"X\",\"pid\":%d,\"tid\":3,\"ts\":", o->pid0 + r);
    put_us(o->f, a_ms);
    fprintf(o->f, ",\"dur\":");
    put_us(o->f, b_ms - a_ms);
    fprintf(o->f, ",\"name\":\"%s\",\"cat\":\"step\"", name);
    if (busy_ms >= 0) { /* a span of several collectives: how much of it they took */
        fprintf(o->f, ",\"args\":{\"collectives_ms\":");
        put_ms(o->f, busy_ms);
        fprintf(o->f, "}");
    }
    fprintf(o->f, "},\n");
}

/* A simulated step longer than its walk (src/sim/step.h): each rank's gradient collectives, its
 * optimizer and (ZeRO-1) its weight gathers on a "step" thread. */
static int put_step_events(const struct trace_out *o)
{
    const struct bm_table *t = o->t;
    const struct bm_timeline *tl = o->tl;
    if (!o->c || tl->measured || !(tl->step_ms > 0) || (tl->step_ms <= tl->makespan_ms && t->dp <= 1 && !t->zero))
        return BM_OK;
    struct bm_step st;
    struct bm_err err;
    struct bm_step_rank *sr = bm_calloc((size_t)(t->pp > 0 ? t->pp : 1), sizeof *sr);
    if (!sr) return BM_ERR;
    if (bm_step_model_ranks(t, o->c, tl, &st, sr, &err)) {
        bm_free(sr);
        return BM_ERR;
    }
    for (int r = 0; r < t->pp; r++) {
        meta(o->f, o->pid0 + r, 3, "thread_name", "name", "step", 0);
        meta(o->f, o->pid0 + r, 3, "thread_sort_index", "sort_index", NULL, 3);
        if (sr[r].sync_start_ms >= 0)
            put_step_slice(o, r, t->zero ? "gradient reduce-scatters" : "gradient all-reduces", sr[r].sync_start_ms,
                           sr[r].sync_end_ms, t->zero ? sr[r].sync_busy_ms / 2 : sr[r].sync_busy_ms);
        put_step_slice(o, r, "optimizer", sr[r].optimizer_start_ms, sr[r].optimizer_end_ms, -1);
        if (t->zero)
            put_step_slice(o, r, "weight all-gathers", sr[r].optimizer_end_ms, sr[r].gather_end_ms, sr[r].sync_busy_ms / 2);
    }
    bm_free(sr);
    return BM_OK;
}

/* Every op and memory event of one timeline, its processes from pid0 on, then the step after the
 * walk. */
static int put_events(struct trace_out *o)
{
    for (int r = 0; r < o->t->pp; r++) {
        for (int i = 0; i < o->t->ranks[r].n_ops; i++) put_op_event(o, r, i);
        put_mem_events(o, r);
    }
    return put_step_events(o);
}

static int trace_out_init(struct trace_out *o, const struct bm_table *t, const struct bm_costs *c,
                          const struct bm_timeline *tl, FILE *f, int pid0, int dp, long flow_id)
{
    struct bm_err err;
    *o = (struct trace_out){f, t, c, tl, {0}, {0}, NULL, NULL, flow_id, pid0, dp};
    if (bm_match_build(t, &o->mt, &err) || bm_critical_path(t, tl, &o->crit, &err)) return BM_ERR;
    return slice_times(o); /* on failure the caller's trace_out_free releases what was made */
}

static int time_ok(double ms)
{
    return ms >= 0 && ms <= TRACE_MAX_MS; /* NaN fails both */
}

int bm_trace_check_times(const struct bm_table *t, const struct bm_timeline *tl, struct bm_err *err)
{
    if (!bm_timeline_per_op(t, tl))
        return bm_err_set(err, "trace: the timeline has no op times (bm_simulate_summary's): simulate with bm_simulate");
    static const char *const bounds = "a trace's times must be finite and in 0..1e9 ms, its message sizes and "
                                      "memory in 0..1e12 MiB";
    for (int r = 0; r < t->pp; r++) {
        const struct bm_rank_timeline *rt = &tl->ranks[r];
        for (int i = 0; i < t->ranks[r].n_ops; i++) {
            const struct bm_op_time *ot = &rt->ops[i];
            const char *bad = !time_ok(ot->start_ms) ? "start" : !time_ok(ot->end_ms) ? "end"
                              : !time_ok(ot->ready_ms) ? "ready"
                              : !(ot->msg_bytes >= 0 && ot->msg_bytes <= TRACE_MAX_MIB * 1048576.0) ? "message bytes" : NULL;
            if (bad) {
                char b[BM_MAX_NAME + 64];
                bm_op_format(t, &t->ranks[r].ops[i], b, sizeof b);
                double v = bad[0] == 's' ? ot->start_ms : bad[0] == 'e' ? ot->end_ms : bad[0] == 'r' ? ot->ready_ms : ot->msg_bytes;
                return bm_err_set(err, "trace: rank %d op #%d %s: its %s %s %g; %s", r, i, b, bad,
                                  bad[0] == 'm' ? "are" : "time is", v, bounds);
            }
        }
        for (int k = 0; k < rt->n_mem; k++) {
            int ok = time_ok(rt->mem[k].t_ms);
            for (int j = 0; j < BM_N_ROLES; j++) ok &= rt->mem[k].act_mib[j] >= 0 && rt->mem[k].act_mib[j] <= TRACE_MAX_MIB;
            if (!ok) return bm_err_set(err, "trace: rank %d memory point %d (at %g ms) is out of range; %s", r, k,
                                       rt->mem[k].t_ms, bounds);
        }
    }
    if (!time_ok(tl->makespan_ms) || !isfinite(tl->bubble_ratio))
        return bm_err_set(err, "trace: the makespan (%g ms) or the bubble ratio (%g) is not finite; %s", tl->makespan_ms,
                          tl->bubble_ratio, bounds);
    return BM_OK;
}

int bm_render_trace_dp(const struct bm_table *t, const struct bm_costs *c, const struct bm_timeline *const *tl, int dp,
                       FILE *f)
{
    int D = dp > 1 ? dp : 1, rc = BM_OK;
    long flow_id = 0;
    struct bm_err err;
    for (int d = 0; d < D; d++) /* a number JSON cannot hold, or the loader would refuse: nothing written */
        if (bm_trace_check_times(t, tl[d], &err)) return BM_ERR;
    for (int d = 0; d < D && rc == BM_OK; d++) {
        struct trace_out o;
        if (trace_out_init(&o, t, c, tl[d], f, d * t->pp, D, flow_id)) {
            trace_out_free(&o);
            return BM_ERR;
        }
        if (d == 0) put_trace_header(&o); /* the summary and the critical path: replica 0's */
        rc = put_events(&o);
        flow_id = o.flow_id;
        trace_out_free(&o);
    }
    if (rc == BM_OK) {
        /* a closing instant so the list ends without a trailing comma */
        fprintf(f, "{\"ph\":\"i\",\"s\":\"g\",\"pid\":0,\"tid\":0,\"ts\":");
        put_us(f, tl[0]->makespan_ms);
        fprintf(f, ",\"name\":\"end of iteration\"}\n]}\n");
    }
    return rc || ferror(f) ? BM_ERR : BM_OK;
}

int bm_render_trace(const struct bm_table *t, const struct bm_costs *c, const struct bm_timeline *tl, FILE *f)
{
    return bm_render_trace_dp(t, c, &tl, 1, f);
}

/* ---------------------------------------------------------------- loader
 *
 * A trace of a big run is hundreds of MB, so the loader does not build a JSON tree: a small
 * pull scanner walks the text, finds the "bigmac" object and the "traceEvents" array (in either
 * order), hands the embedded table's text to bm_table_parse and reads each event's few fields
 * in place. Any valid JSON is accepted (key order, whitespace, unknown keys and events of other
 * tools are free); malformed JSON is an error naming line:col. */

struct scan {
    const char *text, *p, *end;
    const char *name;
    struct bm_err *err;
};

static int sc_fail(struct scan *S, const char *what)
{
    int line, col;
    bm_jpos_offset(S->text, (size_t)(S->p - S->text), &line, &col);
    return bm_err_set(S->err, "%s:%d:%d: %s", S->name, line, col, what);
}

static void sc_ws(struct scan *S)
{
    while (S->p < S->end && (*S->p == ' ' || *S->p == '\n' || *S->p == '\r' || *S->p == '\t')) S->p++;
}

static int sc_lit(struct scan *S, char c)
{
    sc_ws(S);
    if (S->p >= S->end || *S->p != c) {
        char m[64];
        snprintf(m, sizeof m, "invalid JSON: expected '%c'", c);
        return sc_fail(S, m);
    }
    S->p++;
    return BM_OK;
}

/* A string into buf (truncated to n-1 bytes; \uXXXX outside ASCII becomes '?'). */
static int sc_str(struct scan *S, char *buf, size_t n)
{
    sc_ws(S);
    if (S->p >= S->end || *S->p != '"') return sc_fail(S, "invalid JSON: expected a string");
    S->p++;
    size_t k = 0;
    while (S->p < S->end && *S->p != '"') {
        char c = *S->p++;
        if ((unsigned char)c < 0x20) return sc_fail(S, "invalid JSON: control character in a string");
        if (c == '\\') {
            if (S->p >= S->end) break;
            char e = *S->p++;
            switch (e) {
            case 'n': c = '\n'; break;
            case 't': c = '\t'; break;
            case 'r': c = '\r'; break;
            case 'b': c = '\b'; break;
            case 'f': c = '\f'; break;
            case 'u': {
                unsigned v = 0;
                for (int i = 0; i < 4; i++) {
                    if (S->p >= S->end) return sc_fail(S, "invalid JSON: bad \\u escape");
                    char h = *S->p++;
                    v = v * 16 + (unsigned)(h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10
                                          : h >= 'A' && h <= 'F' ? h - 'A' + 10 : 99);
                    if (v > 0xffff) return sc_fail(S, "invalid JSON: bad \\u escape");
                }
                c = v < 0x80 ? (char)v : '?';
                break;
            }
            case '"': case '\\': case '/': c = e; break;
            default: return sc_fail(S, "invalid JSON: bad escape in a string");
            }
        }
        if (buf && k + 1 < n) buf[k++] = c;
    }
    if (S->p >= S->end) return sc_fail(S, "invalid JSON: unterminated string");
    S->p++;
    if (buf && n) buf[k] = 0;
    return BM_OK;
}

static int sc_num(struct scan *S, double *out)
{
    sc_ws(S);
    const char *q = S->p;
    if (q < S->end && (*q == '-' || *q == '+')) q++;
    int digits = 0;
    while (q < S->end && ((*q >= '0' && *q <= '9') || *q == '.' || *q == 'e' || *q == 'E' ||
                          ((*q == '-' || *q == '+') && (q[-1] == 'e' || q[-1] == 'E'))))
        q++, digits++;
    if (!digits) return sc_fail(S, "invalid JSON: expected a number");
    char buf[64];
    size_t n = (size_t)(q - S->p) < sizeof buf - 1 ? (size_t)(q - S->p) : sizeof buf - 1;
    memcpy(buf, S->p, n);
    buf[n] = 0;
    char *e;
    *out = strtod(buf, &e);
    if (*e) return sc_fail(S, "invalid JSON: bad number");
    S->p = q;
    return BM_OK;
}

/* Skip any value (iteratively: nesting depth is not limited by the C stack). */
static int sc_skip(struct scan *S)
{
    long depth = 0;
    do {
        sc_ws(S);
        if (S->p >= S->end) return sc_fail(S, "invalid JSON: unexpected end");
        char c = *S->p;
        if (c == '"') {
            if (sc_str(S, NULL, 0)) return BM_ERR;
        } else if (c == '{' || c == '[') {
            S->p++;
            depth++;
            sc_ws(S);
            if (S->p < S->end && (*S->p == '}' || *S->p == ']')) {
                S->p++;
                depth--;
            } else if (c == '{') {
                if (sc_str(S, NULL, 0) || sc_lit(S, ':')) return BM_ERR;
                continue;
            } else {
                continue;
            }
        } else if (c == 't' || c == 'f' || c == 'n') {
            const char *w = c == 't' ? "true" : c == 'f' ? "false" : "null";
            size_t n = strlen(w);
            if ((size_t)(S->end - S->p) < n || strncmp(S->p, w, n)) return sc_fail(S, "invalid JSON: bad literal");
            S->p += n;
        } else {
            double d;
            if (sc_num(S, &d)) return BM_ERR;
        }
        /* after a value: ',' continues the container, '}'/']' closes it */
        for (;;) {
            if (!depth) return BM_OK;
            sc_ws(S);
            if (S->p >= S->end) return sc_fail(S, "invalid JSON: unexpected end");
            if (*S->p == ',') {
                S->p++;
                break;
            }
            if (*S->p == '}' || *S->p == ']') {
                S->p++;
                depth--;
                continue;
            }
            return sc_fail(S, "invalid JSON: expected ',' or a closing bracket");
        }
        /* inside an object the next member starts with its key: peek back for '{' context */
        sc_ws(S);
        if (S->p < S->end && *S->p == '"') {
            /* could be an object key or an array element string: look past it for ':' */
            const char *save = S->p;
            if (sc_str(S, NULL, 0)) return BM_ERR;
            sc_ws(S);
            if (S->p < S->end && *S->p == ':') S->p++;
            else S->p = save;
        }
    } while (depth > 0);
    return BM_OK;
}

/* Iterate an object's members: call with *first = 1; returns 1 with the key in key[], 0 at the
 * closing '}', -1 on error. */
static int sc_member(struct scan *S, int *first, char *key, size_t n)
{
    sc_ws(S);
    if (*first) {
        if (sc_lit(S, '{')) return -1;
        *first = 0;
        sc_ws(S);
        if (S->p < S->end && *S->p == '}') {
            S->p++;
            return 0;
        }
    } else {
        if (S->p < S->end && *S->p == '}') {
            S->p++;
            return 0;
        }
        if (sc_lit(S, ',')) return -1;
    }
    if (sc_str(S, key, n) || sc_lit(S, ':')) return -1;
    return 1;
}

/* The same for array elements: 1 = an element follows, 0 = ']' consumed, -1 = error. */
static int sc_elem(struct scan *S, int *first)
{
    sc_ws(S);
    if (*first) {
        if (sc_lit(S, '[')) return -1;
        *first = 0;
        sc_ws(S);
        if (S->p < S->end && *S->p == ']') {
            S->p++;
            return 0;
        }
        return 1;
    }
    if (S->p < S->end && *S->p == ']') {
        S->p++;
        return 0;
    }
    if (S->p < S->end && *S->p == ',') {
        S->p++;
        return 1;
    }
    sc_fail(S, "invalid JSON: expected ',' or ']'");
    return -1;
}

/* One trace event's fields that matter here. */
struct event {
    char ph[8], name[BM_MAX_NAME];
    double pid, ts, dur, op, ready, wait_rank, wait_op, bytes, act[BM_N_ROLES];
    int has_pid, has_ts, has_dur, has_op, has_ready, has_wr, has_wo, has_bytes;
    const char *not_num; /* the first of ts, dur, bytes, a memory role given as a non-number */
};

static int read_event(struct scan *S, struct event *e)
{
    static const char *const roles[BM_N_ROLES] = {"encoder", "backbone", "generator"};
    memset(e, 0, sizeof *e);
    char key[64];
    int first = 1, k;
    while ((k = sc_member(S, &first, key, sizeof key)) == 1) {
        sc_ws(S);
        int is_num = S->p < S->end && (*S->p == '-' || (*S->p >= '0' && *S->p <= '9'));
        if (!strcmp(key, "ph") && S->p < S->end && *S->p == '"') {
            if (sc_str(S, e->ph, sizeof e->ph)) return BM_ERR;
        } else if (!strcmp(key, "name") && S->p < S->end && *S->p == '"') {
            if (sc_str(S, e->name, sizeof e->name)) return BM_ERR;
        } else if (!is_num && (!strcmp(key, "ts") || !strcmp(key, "dur"))) {
            if (!e->not_num) e->not_num = key[0] == 't' ? "ts" : "dur";
            if (sc_skip(S)) return BM_ERR;
        } else if (is_num && (!strcmp(key, "pid") || !strcmp(key, "ts") || !strcmp(key, "dur"))) {
            double *d = key[0] == 'p' ? &e->pid : key[0] == 't' ? &e->ts : &e->dur;
            if (sc_num(S, d)) return BM_ERR;
            if (key[0] == 'p') e->has_pid = 1;
            else if (key[0] == 't') e->has_ts = 1;
            else e->has_dur = 1;
        } else if (!strcmp(key, "args") && S->p < S->end && *S->p == '{') {
            int f2 = 1, k2;
            char ak[64];
            while ((k2 = sc_member(S, &f2, ak, sizeof ak)) == 1) {
                sc_ws(S);
                int num = S->p < S->end && (*S->p == '-' || (*S->p >= '0' && *S->p <= '9'));
                double *d = NULL;
                int *has = NULL;
                if (!strcmp(ak, "op")) d = &e->op, has = &e->has_op;
                else if (!strcmp(ak, "ready_ms")) d = &e->ready, has = &e->has_ready;
                else if (!strcmp(ak, "wait_rank")) d = &e->wait_rank, has = &e->has_wr;
                else if (!strcmp(ak, "wait_op")) d = &e->wait_op, has = &e->has_wo;
                else if (!strcmp(ak, "bytes")) d = &e->bytes, has = &e->has_bytes;
                for (int j = 0; j < BM_N_ROLES && !d; j++)
                    if (!strcmp(ak, roles[j])) d = &e->act[j];
                /* a size or memory figure that is not a number is an error if the event is used */
                if (d && !num && !e->not_num && (d == &e->bytes || !has)) e->not_num = d == &e->bytes ? "bytes" : "args";
                if (d && num) {
                    if (sc_num(S, d)) return BM_ERR;
                    if (has) *has = 1;
                } else if (sc_skip(S)) {
                    return BM_ERR;
                }
            }
            if (k2 < 0) return BM_ERR;
        } else if (sc_skip(S)) {
            return BM_ERR;
        }
    }
    return k < 0 ? BM_ERR : BM_OK;
}

struct mem_ev {
    double t;
    long seq;
    double act[BM_N_ROLES];
};

static int mem_cmp(const void *a, const void *b)
{
    const struct mem_ev *x = a, *y = b;
    if (x->t != y->t) return x->t < y->t ? -1 : 1;
    return (x->seq > y->seq) - (x->seq < y->seq);
}

/* Where pass 1 found the top-level members, and what the "bigmac" object says. */
struct trace_top {
    const char *bm_at, *ev_at, *table_at, *table_end;
    char counter[BM_MAX_NAME];
    char fmt[64];
    int measured;
    double spm;
};

/* The members of the "bigmac" object S is at. */
static int scan_bigmac(struct scan *S, struct trace_top *T)
{
    int first = 1, k;
    char key[64];
    T->bm_at = S->p;
    while ((k = sc_member(S, &first, key, sizeof key)) == 1) {
        sc_ws(S);
        if (!strcmp(key, "format") && *S->p == '"') {
            if (sc_str(S, T->fmt, sizeof T->fmt)) return BM_ERR;
        } else if (!strcmp(key, "memory_counter") && *S->p == '"') {
            if (sc_str(S, T->counter, sizeof T->counter)) return BM_ERR;
        } else if (!strcmp(key, "measured") && *S->p == 't') {
            T->measured = 1;
            if (sc_skip(S)) return BM_ERR;
        } else if (!strcmp(key, "samples_per_microbatch") && *S->p >= '0' && *S->p <= '9') {
            if (sc_num(S, &T->spm)) return BM_ERR;
        } else if (!strcmp(key, "table")) {
            T->table_at = S->p;
            if (sc_skip(S)) return BM_ERR;
            T->table_end = S->p;
        } else if (sc_skip(S)) {
            return BM_ERR;
        }
    }
    return k < 0 ? BM_ERR : BM_OK;
}

/* Pass 1: the top-level members we need ("bigmac", "traceEvents"), everything else skipped. */
static int scan_top(struct scan *S, struct trace_top *T)
{
    int first = 1, k;
    char key[64];
    while ((k = sc_member(S, &first, key, sizeof key)) == 1) {
        sc_ws(S);
        if (!strcmp(key, "bigmac") && S->p < S->end && *S->p == '{') {
            if (scan_bigmac(S, T)) return BM_ERR;
        } else if (!strcmp(key, "traceEvents") && S->p < S->end && *S->p == '[') {
            T->ev_at = S->p;
            if (sc_skip(S)) return BM_ERR;
        } else if (sc_skip(S)) {
            return BM_ERR;
        }
    }
    if (k < 0) return BM_ERR;
    sc_ws(S);
    if (S->p < S->end) return sc_fail(S, "invalid JSON: text after the top-level object");
    if (!T->bm_at)
        return bm_err_set(S->err, "%s: a Chrome trace without a \"bigmac\" object: only traces written by bigmac (render --format trace, or the executor) can be re-rendered\nhint: see docs/trace.md", S->name);
    if (strcmp(T->fmt, "bigmac-trace")) {
        S->p = T->bm_at;
        return sc_fail(S, "\"bigmac.format\" must be \"bigmac-trace\"");
    }
    if (!T->table_at) {
        S->p = T->bm_at;
        return sc_fail(S, "\"bigmac.table\" (the operator table) is missing");
    }
    if (!T->ev_at) return bm_err_set(S->err, "%s: \"traceEvents\" (an array) is missing", S->name);
    return BM_OK;
}

/* The embedded table, parsed from its own text so that its errors point into the trace. */
static int embedded_table(const char *text, const char *name, const struct trace_top *T, struct bm_table **t,
                          struct bm_costs **c, struct bm_err *err)
{
    size_t tlen = (size_t)(T->table_end - T->table_at);
    char *ttext = bm_malloc(tlen + 1);
    if (!ttext) return bm_err_set(err, "%s: out of memory", name);
    memcpy(ttext, T->table_at, tlen);
    ttext[tlen] = 0;
    char tname[600];
    int tline, tcol;
    bm_jpos_offset(text, (size_t)(T->table_at - text), &tline, &tcol);
    snprintf(tname, sizeof tname, "%s (table at line %d)", name, tline);
    int rc = bm_table_parse(ttext, tname, t, c, err);
    bm_free(ttext);
    return rc;
}

/* What pass 2 collects per rank: which ops had an event, and the memory counter's points. */
struct trace_events {
    char **seen;          /* [pp][n_ops] */
    struct mem_ev **mem;  /* [pp][n_mem] */
    int *n_mem, *cap_mem;
};

/* One "X" event: op e.op of rank pid ran from t0 for its dur. BM_ERR on a bad time. */
static int take_op_event(struct scan *S, const char *at, const struct event *e, const struct bm_table *t,
                         struct bm_timeline *tl, struct trace_events *E)
{
    int pid = (int)e->pid;
    double t0 = e->ts / 1000.0;
    if (e->op < 0 || e->op >= t->ranks[pid].n_ops || e->op != (long)e->op) return BM_OK;
    double d = e->has_dur ? e->dur / 1000.0 : 0;
    if (!(t0 >= 0 && d >= 0 && t0 + d <= TRACE_MAX_MS)) { /* NaN fails every comparison */
        char m[200];
        snprintf(m, sizeof m, "\"ts\" (%g us) and \"dur\" (%g us) must be finite and >= 0, and end by 1e9 ms "
                 "(a guard against absurd input)", e->ts, e->has_dur ? e->dur : 0.0);
        S->p = at;
        return sc_fail(S, m);
    }
    int op = (int)e->op;
    struct bm_op_time *ot = &tl->ranks[pid].ops[op];
    ot->start_ms = t0;
    ot->end_ms = t0 + d;
    ot->ready_ms = e->has_ready && isfinite(e->ready) ? e->ready : t0;
    if (e->has_wr && e->has_wo && e->wait_rank >= 0 && e->wait_rank < t->pp && e->wait_rank == (int)e->wait_rank &&
        e->wait_op >= 0 && e->wait_op < t->ranks[(int)e->wait_rank].n_ops && e->wait_op == (long)e->wait_op) {
        ot->wait_rank = (int)e->wait_rank;
        ot->wait_op = (int)e->wait_op;
    }
    if (e->has_bytes) {
        if (!(e->bytes >= 0 && e->bytes <= TRACE_MAX_MIB * 1048576.0) || t->ranks[pid].ops[op].kind == BM_OP_COMPUTE) {
            S->p = at;
            return sc_fail(S, "\"bytes\" (a message's size) must be a number >= 0 on a send or recv, at most 1e12 MiB");
        }
        ot->msg_bytes = e->bytes;
    }
    E->seen[pid][op] = 1;
    return BM_OK;
}

/* Pass 2: the events of "traceEvents" into tl and E. BM_ERR with err set; -1 out of memory. */
static int read_events(struct scan *S, const struct trace_top *T, const struct bm_table *t, struct bm_timeline *tl,
                       struct trace_events *E, int pid0)
{
    S->p = T->ev_at;
    int first = 1, k;
    long seq = 0;
    struct event e;
    while ((k = sc_elem(S, &first)) == 1) {
        sc_ws(S);
        if (S->p >= S->end || *S->p != '{') {
            if (sc_skip(S)) return BM_ERR;
            continue;
        }
        const char *at = S->p;
        if (read_event(S, &e)) return BM_ERR;
        seq++;
        if (!e.has_pid || e.pid < pid0 || e.pid >= pid0 + t->pp || e.pid != (int)e.pid) continue;
        e.pid -= pid0; /* replica d's pipeline rank p is process d * pp + p (bm_render_trace_dp) */
        int used = (!strcmp(e.ph, "X") && e.has_op) || (!strcmp(e.ph, "C") && !strcmp(e.name, T->counter));
        if (used && e.not_num) { /* a string "dur" is an error, not 0 */
            char m[160];
            snprintf(m, sizeof m, "\"%s\" must be a number%s", e.not_num,
                     !strcmp(e.not_num, "args") ? " (a memory counter's values, MiB)" : "");
            S->p = at;
            return sc_fail(S, m);
        }
        if (!e.has_ts) continue;
        int pid = (int)e.pid;
        double t0 = e.ts / 1000.0;
        if (!strcmp(e.ph, "X") && e.has_op) {
            if (take_op_event(S, at, &e, t, tl, E)) return BM_ERR;
        } else if (!strcmp(e.ph, "C") && !strcmp(e.name, T->counter)) {
            int ok = t0 >= 0 && t0 <= TRACE_MAX_MS;
            for (int j = 0; j < BM_N_ROLES; j++) ok &= e.act[j] >= 0 && e.act[j] <= TRACE_MAX_MIB;
            if (!ok) {
                S->p = at;
                return sc_fail(S, "a memory counter's \"ts\" must be in 0..1e9 ms and its values in 0..1e12 MiB");
            }
            if (bm_grow(&E->mem[pid], &E->cap_mem[pid], E->n_mem[pid] + 1, sizeof **E->mem)) return -1;
            struct mem_ev *me = &E->mem[pid][E->n_mem[pid]++];
            me->t = t0;
            me->seq = seq;
            for (int j = 0; j < BM_N_ROLES; j++) me->act[j] = e.act[j];
        }
    }
    return k < 0 ? BM_ERR : BM_OK;
}

int bm_trace_parse(const char *text, const char *name, struct bm_table **tp, struct bm_costs **cp,
                   struct bm_timeline **tlp, struct bm_err *err)
{
    return bm_trace_parse_replica(text, name, 0, tp, cp, tlp, err);
}

int bm_trace_parse_replica(const char *text, const char *name, int replica, struct bm_table **tp, struct bm_costs **cp,
                           struct bm_timeline **tlp, struct bm_err *err)
{
    *tp = NULL;
    if (cp) *cp = NULL;
    *tlp = NULL;
    struct scan S = {text, text, text + strlen(text), name, err};
    struct trace_top T = {NULL, NULL, NULL, NULL, MEM_COUNTER, "", 0, 1};
    struct bm_table *t;
    struct bm_costs *c;
    if (scan_top(&S, &T) || embedded_table(text, name, &T, &t, &c, err)) return BM_ERR;
    struct bm_timeline *tl = bm_timeline_new(t, c);
    struct trace_events E = {bm_calloc((size_t)t->pp, sizeof *E.seen), bm_calloc((size_t)t->pp, sizeof *E.mem),
                             bm_calloc((size_t)t->pp, sizeof *E.n_mem), bm_calloc((size_t)t->pp, sizeof *E.cap_mem)};
    int rc;
    if (!tl || !E.seen || !E.mem || !E.n_mem || !E.cap_mem) goto oom;
    for (int r = 0; r < t->pp; r++)
        if (!(E.seen[r] = bm_calloc((size_t)t->ranks[r].n_ops + 1, 1))) goto oom;
    tl->measured = T.measured;
    if (T.spm >= 1 && T.spm <= 1e9) tl->samples_per_microbatch = (int)T.spm;
    if (replica < 0 || (replica > 0 && replica >= t->dp)) {
        bm_err_set(err, "%s: no data-parallel replica %d (the trace's table has dp %d)", name, replica, t->dp > 1 ? t->dp : 1);
        goto fail;
    }
    if ((rc = read_events(&S, &T, t, tl, &E, replica * t->pp)) < 0) goto oom;
    if (rc) goto fail;
    if (replica > 0) { /* a replica without a single op event: not written (one replica's trace) */
        int any = 0;
        for (int r = 0; r < t->pp && !any; r++)
            for (int i = 0; i < t->ranks[r].n_ops && !any; i++) any = E.seen[r][i];
        if (!any) {
            bm_timeline_free(tl);
            tl = NULL;
            rc = BM_OK;
            goto done;
        }
    }
    for (int r = 0; r < t->pp; r++) {
        for (int i = 0; i < t->ranks[r].n_ops; i++)
            if (!E.seen[r][i]) {
                char b[BM_MAX_NAME + 64];
                bm_op_format(t, &t->ranks[r].ops[i], b, sizeof b);
                bm_err_set(err, "%s: rank %d op #%d (%s) has no \"X\" event (pid %d, args.op %d): the trace does not cover the embedded table",
                           name, r, i, b, replica * t->pp + r, i);
                goto fail;
            }
        if (E.n_mem[r] > 1) /* mem[r] is NULL when the rank has no counter events */
            qsort(E.mem[r], (size_t)E.n_mem[r], sizeof **E.mem, mem_cmp);
        for (int j = 0; j < E.n_mem[r]; j++)
            if (bm_timeline_mem_push(tl, r, E.mem[r][j].t, E.mem[r][j].act)) goto oom;
    }
    bm_timeline_summarize(tl, t);
    rc = BM_OK;
    goto done;
oom:
    bm_err_set(err, "%s: out of memory loading the trace", name);
fail:
    rc = BM_ERR;
done:
    for (int r = 0; r < t->pp; r++) {
        if (E.seen) bm_free(E.seen[r]);
        if (E.mem) bm_free(E.mem[r]);
    }
    bm_free(E.seen);
    bm_free(E.mem);
    bm_free(E.n_mem);
    bm_free(E.cap_mem);
    if (rc) {
        bm_timeline_free(tl);
        bm_table_free(t);
        bm_costs_free(c);
        return BM_ERR;
    }
    *tp = t;
    if (cp) *cp = c;
    else bm_costs_free(c);
    *tlp = tl;
    return BM_OK;
}

int bm_trace_sniff(const char *text)
{
    struct bm_err err;
    struct scan S = {text, text, text + strlen(text), "", &err};
    char key[64];
    int first = 1, k;
    while ((k = sc_member(&S, &first, key, sizeof key)) == 1) {
        if (!strcmp(key, "traceEvents")) return 1;
        if (sc_skip(&S)) return 0;
    }
    return 0;
}

int bm_json_sniff_format(const char *text, const char *name, char *fmt, size_t n, struct bm_err *err)
{
    struct scan S = {text, text, text + strlen(text), name, err};
    char key[64];
    int first = 1, k;
    if (n) fmt[0] = 0;
    while ((k = sc_member(&S, &first, key, sizeof key)) == 1) {
        sc_ws(&S);
        if (!strcmp(key, "format") && S.p < S.end && *S.p == '"') {
            if (sc_str(&S, fmt, n)) return BM_ERR;
        } else if (sc_skip(&S)) {
            return BM_ERR;
        }
    }
    if (k < 0) return BM_ERR;
    sc_ws(&S);
    if (S.p < S.end) return sc_fail(&S, "invalid JSON: text after the top-level object");
    return BM_OK;
}

int bm_trace_load(const char *path, struct bm_table **t, struct bm_costs **c, struct bm_timeline **tl,
                  struct bm_err *err)
{
    *t = NULL;
    if (c) *c = NULL;
    *tl = NULL;
    size_t len;
    char *text = bm_read_file_max(path, (size_t)BM_MAX_TRACE_TEXT, &len, err);
    if (!text) return BM_ERR;
    int rc = strlen(text) != len ? bm_err_set(err, "%s: not a text file", path)
                                 : bm_trace_parse(text, path, t, c, tl, err);
    bm_free(text);
    return rc;
}
