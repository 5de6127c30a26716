/* trace.c — Chrome Trace Event JSON (Perfetto, chrome://tracing) of a timeline, and its loader.
 * The shape is documented in docs/trace.md: one process per rank with threads compute (tid 0),
 * send (1), recv (2); an "X" slice per op; a "C" counter event per memory change; an "s"/"f"
 * flow pair per send -> recv; the table embedded under "bigmac" so the trace re-renders. */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "report/report.h"
#include "util/util.h"

#define MEM_COUNTER "activation MiB"

static void put_jstr(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c < 0x20) fprintf(f, "\\u%04x", c);
        else fputc(c, f);
    }
    fputc('"', f);
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
    if (sval) put_jstr(f, sval);
    else fprintf(f, "%d", ival);
    fprintf(f, "}},\n");
}

int bm_render_trace(const struct bm_table *t, const struct bm_timeline *tl, FILE *f)
{
    struct bm_err err;
    int **match;
    if (bm_report_match_sends(t, &match, &err)) return BM_ERR;
    static const char *const roles[BM_N_ROLES] = {"encoder", "backbone", "generator"};
    static const char *const threads[3] = {"compute", "send", "recv"};
    fprintf(f, "{\"displayTimeUnit\": \"ms\",\n\"otherData\": {\"generator\": \"bigmac\", "
               "\"policy\": \"%s\", \"backbone\": \"%s\", \"pp\": %d, \"vpp\": %d, "
               "\"microbatches\": %d, \"makespan_ms\": %.9g, \"bubble_ratio\": %.6g, "
               "\"measured\": %s},\n",
            bm_policy_name(t->policy), bm_backbone_name(t->backbone), t->pp, t->vpp,
            t->microbatches, tl->makespan_ms, tl->bubble_ratio, tl->measured ? "true" : "false");
    fprintf(f, "\"bigmac\": {\"format\": \"bigmac-trace\", \"version\": 1, \"measured\": %s, "
               "\"samples_per_microbatch\": %d, \"memory_counter\": \"" MEM_COUNTER "\",\n\"table\": ",
            tl->measured ? "true" : "false",
            tl->samples_per_microbatch > 0 ? tl->samples_per_microbatch : 1);
    bm_table_write_json(t, f);
    fprintf(f, "},\n\"traceEvents\": [\n");
    for (int r = 0; r < t->pp; r++) {
        char name[32];
        snprintf(name, sizeof name, "rank %d", r);
        meta(f, r, 0, "process_name", "name", name, 0);
        meta(f, r, 0, "process_sort_index", "sort_index", NULL, r);
        for (int k = 0; k < 3; k++) {
            meta(f, r, k, "thread_name", "name", threads[k], 0);
            meta(f, r, k, "thread_sort_index", "sort_index", NULL, k);
        }
    }
    char buf[BM_MAX_NAME + 64], wbuf[BM_MAX_NAME + 64];
    long flow_id = 0;
    for (int r = 0; r < t->pp; r++) {
        const struct bm_rank_ops *ro = &t->ranks[r];
        const struct bm_rank_timeline *rt = &tl->ranks[r];
        for (int i = 0; i < ro->n_ops; i++) {
            const struct bm_op *op = &ro->ops[i];
            const struct bm_op_time *ot = &rt->ops[i];
            bm_op_format(t, op, buf, sizeof buf);
            int tid = op->kind == BM_OP_COMPUTE ? 0 : op->kind == BM_OP_SEND ? 1 : 2;
            const char *cat = op->kind == BM_OP_SEND ? "send" : op->kind == BM_OP_RECV ? "recv"
                              : op->module >= 0 && op->module < t->n_modules
                                  ? roles[t->modules[op->module].role] : "compute";
            fprintf(f, "{\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"ts\":", r, tid);
            put_us(f, ot->start_ms);
            fprintf(f, ",\"dur\":");
            put_us(f, ot->end_ms > ot->start_ms ? ot->end_ms - ot->start_ms : 0);
            fprintf(f, ",\"name\":");
            put_jstr(f, buf);
            fprintf(f, ",\"cat\":\"%s\",\"args\":{\"op\":%d,\"mb\":%d", cat, i, op->mb);
            if (op->kind == BM_OP_COMPUTE) {
                fprintf(f, ",\"module\":");
                put_jstr(f, op->module >= 0 && op->module < t->n_modules ? t->modules[op->module].name : "?");
                fprintf(f, ",\"pass\":\"%s\"", bm_pass_name((enum bm_pass)op->pass));
                if (op->chunk >= 0) fprintf(f, ",\"chunk\":%d", op->chunk);
            } else {
                fprintf(f, ",\"tensor\":");
                put_jstr(f, op->tensor >= 0 && op->tensor < t->n_tensors ? t->tensors[op->tensor].name : "?");
                fprintf(f, ",\"peer\":%d", op->peer);
            }
            fprintf(f, ",\"ready_ms\":");
            put_ms(f, ot->ready_ms);
            if (ot->wait_rank >= 0 && ot->wait_rank < t->pp && ot->wait_op >= 0 &&
                ot->wait_op < t->ranks[ot->wait_rank].n_ops) {
                bm_op_format(t, &t->ranks[ot->wait_rank].ops[ot->wait_op], wbuf, sizeof wbuf);
                fprintf(f, ",\"wait_rank\":%d,\"wait_op\":%d,\"waited_for\":", ot->wait_rank, ot->wait_op);
                char w2[sizeof wbuf + 32];
                snprintf(w2, sizeof w2, "%s on rank %d", wbuf, ot->wait_rank);
                put_jstr(f, w2);
            }
            fprintf(f, "}},\n");
            /* flow: the matching send -> this recv */
            if (op->kind == BM_OP_RECV && match[r][i] >= 0) {
                int p = op->peer;
                const struct bm_op_time *st = &tl->ranks[p].ops[match[r][i]];
                fprintf(f, "{\"ph\":\"s\",\"id\":%ld,\"pid\":%d,\"tid\":1,\"ts\":", flow_id, p);
                put_us(f, st->start_ms);
                fprintf(f, ",\"name\":");
                put_jstr(f, buf);
                fprintf(f, ",\"cat\":\"dep\"},\n{\"ph\":\"f\",\"bp\":\"e\",\"id\":%ld,\"pid\":%d,\"tid\":2,\"ts\":",
                        flow_id, r);
                put_us(f, ot->end_ms);
                fprintf(f, ",\"name\":");
                put_jstr(f, buf);
                fprintf(f, ",\"cat\":\"dep\"},\n");
                flow_id++;
            }
        }
        for (int k = 0; k < rt->n_mem; k++) {
            const struct bm_mem_point *mp = &rt->mem[k];
            fprintf(f, "{\"ph\":\"C\",\"pid\":%d,\"tid\":0,\"ts\":", r);
            put_us(f, mp->t_ms);
            fprintf(f, ",\"name\":\"" MEM_COUNTER "\",\"args\":{");
            for (int j = 0; j < BM_N_ROLES; j++) {
                fprintf(f, "%s\"%s\":", j ? "," : "", roles[j]);
                put_ms(f, mp->act_mib[j]);
            }
            fprintf(f, "}},\n");
        }
    }
    /* a closing instant so the list ends without a trailing comma */
    fprintf(f, "{\"ph\":\"i\",\"s\":\"g\",\"pid\":0,\"tid\":0,\"ts\":");
    put_us(f, tl->makespan_ms);
    fprintf(f, ",\"name\":\"end of iteration\"}\n]}\n");
    bm_report_match_free(t, match);
    return ferror(f) ? BM_ERR : BM_OK;
}

/* ---------------------------------------------------------------- loader */

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

static int get_int_field(json_t *o, const char *k, long lo, long hi, long *out)
{
    json_t *v = json_object_get(o, k);
    if (!json_is_integer(v)) return -1;
    long x = (long)json_integer_value(v);
    if (x < lo || x > hi) return -1;
    *out = x;
    return 0;
}

int bm_trace_load_json(const void *rootv, const char *name, struct bm_table **tp,
                       struct bm_timeline **tlp, struct bm_err *err)
{
    json_t *root = (json_t *)rootv;
    *tp = NULL;
    *tlp = NULL;
    json_t *bm = json_object_get(root, "bigmac");
    json_t *evs = json_object_get(root, "traceEvents");
    if (!json_is_object(bm))
        return bm_err_set(err, "%s: a Chrome trace without a \"bigmac\" object: only traces written by bigmac (render --format trace, or the executor) can be re-rendered\nhint: see docs/trace.md", name);
    json_t *fmt = json_object_get(bm, "format");
    if (!json_is_string(fmt) || strcmp(json_string_value(fmt), "bigmac-trace"))
        return bm_err_set(err, "%s: \"bigmac.format\" must be \"bigmac-trace\"", name);
    json_t *tab = json_object_get(bm, "table");
    if (!json_is_object(tab)) return bm_err_set(err, "%s: \"bigmac.table\" (the operator table) is missing", name);
    if (!json_is_array(evs)) return bm_err_set(err, "%s: \"traceEvents\" must be an array", name);
    char *text = json_dumps(tab, JSON_COMPACT);
    if (!text) return bm_err_set(err, "%s: out of memory", name);
    char tname[600];
    snprintf(tname, sizeof tname, "%s (embedded table)", name);
    struct bm_table *t;
    int rc = bm_table_parse(text, tname, &t, err);
    json_malloc_t jm;
    json_free_t jf;
    json_get_alloc_funcs(&jm, &jf);  /* jansson's allocator may be bm_malloc (see jpos.h) */
    jf(text);
    if (rc) return BM_ERR;
    struct bm_timeline *tl = bm_timeline_new(t);
    char **seen = bm_calloc((size_t)t->pp, sizeof *seen);
    struct mem_ev **mem = bm_calloc((size_t)t->pp, sizeof *mem);
    int *n_mem = bm_calloc((size_t)t->pp, sizeof *n_mem), *cap_mem = bm_calloc((size_t)t->pp, sizeof *cap_mem);
    if (!tl || !seen || !mem || !n_mem || !cap_mem) goto oom;
    for (int r = 0; r < t->pp; r++)
        if (!(seen[r] = bm_calloc((size_t)t->ranks[r].n_ops + 1, 1))) goto oom;
    tl->measured = json_is_true(json_object_get(bm, "measured"));
    long spm;
    if (!get_int_field(bm, "samples_per_microbatch", 1, 1000000000L, &spm)) tl->samples_per_microbatch = (int)spm;
    const char *counter = MEM_COUNTER;
    if (json_is_string(json_object_get(bm, "memory_counter")))
        counter = json_string_value(json_object_get(bm, "memory_counter"));
    size_t n = json_array_size(evs);
    for (size_t k = 0; k < n; k++) {
        json_t *e = json_array_get(evs, k);
        json_t *ph = json_object_get(e, "ph");
        if (!json_is_string(ph)) continue;
        const char *p = json_string_value(ph);
        long pid;
        if (get_int_field(e, "pid", 0, t->pp - 1, &pid)) continue;
        json_t *ts = json_object_get(e, "ts");
        if (!json_is_number(ts)) continue;
        double t0 = json_number_value(ts) / 1000.0;
        json_t *args = json_object_get(e, "args");
        if (!strcmp(p, "X")) {
            long op, wr, wo;
            if (!json_is_object(args) || get_int_field(args, "op", 0, t->ranks[pid].n_ops - 1, &op))
                continue;
            json_t *dur = json_object_get(e, "dur");
            double d = json_is_number(dur) ? json_number_value(dur) / 1000.0 : 0;
            if (!isfinite(t0) || !isfinite(d) || d < 0) {
                bm_err_set(err, "%s: traceEvents[%zu]: \"ts\"/\"dur\" must be finite and \"dur\" >= 0", name, k);
                goto fail;
            }
            struct bm_op_time *ot = &tl->ranks[pid].ops[op];
            ot->start_ms = t0;
            ot->end_ms = t0 + d;
            json_t *ready = json_object_get(args, "ready_ms");
            ot->ready_ms = json_is_number(ready) ? json_number_value(ready) : t0;
            if (!get_int_field(args, "wait_rank", 0, t->pp - 1, &wr) &&
                !get_int_field(args, "wait_op", 0, t->ranks[wr].n_ops - 1, &wo)) {
                ot->wait_rank = (int)wr;
                ot->wait_op = (int)wo;
            }
            seen[pid][op] = 1;
        } else if (!strcmp(p, "C")) {
            json_t *nm = json_object_get(e, "name");
            if (!json_is_string(nm) || strcmp(json_string_value(nm), counter) || !json_is_object(args))
                continue;
            if (bm_grow(&mem[pid], &cap_mem[pid], n_mem[pid] + 1, sizeof **mem)) goto oom;
            struct mem_ev *me = &mem[pid][n_mem[pid]++];
            me->t = t0;
            me->seq = (long)k;
            static const char *const roles[BM_N_ROLES] = {"encoder", "backbone", "generator"};
            for (int j = 0; j < BM_N_ROLES; j++) {
                json_t *v = json_object_get(args, roles[j]);
                me->act[j] = json_is_number(v) ? json_number_value(v) : 0;
            }
        }
    }
    for (int r = 0; r < t->pp; r++) {
        for (int i = 0; i < t->ranks[r].n_ops; i++)
            if (!seen[r][i]) {
                char b[BM_MAX_NAME + 64];
                bm_op_format(t, &t->ranks[r].ops[i], b, sizeof b);
                bm_err_set(err, "%s: rank %d op #%d (%s) has no \"X\" event (pid %d, args.op %d): the trace does not cover the embedded table",
                           name, r, i, b, r, i);
                goto fail;
            }
        qsort(mem[r], (size_t)n_mem[r], sizeof **mem, mem_cmp);
        for (int k = 0; k < n_mem[r]; k++)
            if (bm_timeline_mem_push(tl, r, mem[r][k].t, mem[r][k].act)) goto oom;
    }
    bm_timeline_summarize(tl, t);
    for (int r = 0; r < t->pp; r++) {
        bm_free(seen[r]);
        bm_free(mem[r]);
    }
    bm_free(seen);
    bm_free(mem);
    bm_free(n_mem);
    bm_free(cap_mem);
    *tp = t;
    *tlp = tl;
    return BM_OK;
oom:
    bm_err_set(err, "%s: out of memory loading the trace", name);
fail:
    for (int r = 0; r < t->pp; r++) {
        if (seen) bm_free(seen[r]);
        if (mem) bm_free(mem[r]);
    }
    bm_free(seen);
    bm_free(mem);
    bm_free(n_mem);
    bm_free(cap_mem);
    bm_timeline_free(tl);
    bm_table_free(t);
    return BM_ERR;
}

int bm_trace_load(const char *path, struct bm_table **t, struct bm_timeline **tl, struct bm_err *err)
{
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je);
    if (!root) return bm_err_set(err, "%s:%d:%d: %s", path, je.line, je.column, je.text);
    int rc = bm_trace_load_json(root, path, t, tl, err);
    json_decref(root);
    return rc;
}
