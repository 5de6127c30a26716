/* _capi.c — the flat C interface the Python package (python/bigmac/__init__.py, ctypes) calls,
 * on the library's public API only: it includes the headers of include/ and none of src/, calls
 * only functions the shared library exports (BM_API; tests/test_python_capi.sh checks both). It
 * is built into build/python/_bigmac.so together with the C library's objects, so Python never
 * re-implements the planner, verifier, simulator, renderers, dataset or initialisation: the JSON
 * of `simulate --json` and `--compare --json` is the library's own writer, the plan options are
 * merged by the library's bm_plan_opts_merge.
 *
 * Conventions: handles are opaque pointers owned by Python (freed with the matching *_free);
 * whole objects cross as JSON text (a spec's settings and modules, a table's shape, a rank's ops,
 * plan options), never as positional arrays. Functions returning int return BM_OK / BM_ERR and
 * on failure write the C library's message into err[0 .. errn-1]; strings returned as char * are
 * malloc'd (bmpy_free). Every index is range-checked here as well as in Python (which names the
 * argument): an accessor given one out of range returns NULL / 0, never reads outside the
 * object. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "bigmac.h"
#include "bigmac_cost.h"
#include "bigmac_module.h"
#include "bigmac_report.h"

static int fail(char *err, size_t n, const struct bm_err *e)
{
    if (err && n) snprintf(err, n, "%s", e->msg);
    return BM_ERR;
}

static int fail_msg(char *err, size_t n, const char *msg)
{
    if (err && n) snprintf(err, n, "%s", msg);
    return BM_ERR;
}

void bmpy_free(void *p) { free(p); }

/* ---------------------------------------------------------------- JSON text out */

/* A JSON text written into a memory stream: jw_open, then the put_* calls, then jw_close
 * returns the malloc'd text (NULL when memory ran out). */
struct jw {
    FILE *f;
    char *buf;
    size_t len;
};

static int jw_open(struct jw *w)
{
    w->buf = NULL;
    w->len = 0;
    w->f = open_memstream(&w->buf, &w->len);
    return w->f ? BM_OK : BM_ERR;
}

static char *jw_close(struct jw *w, int rc)
{
    if (fclose(w->f) || rc) {
        free(w->buf);
        return NULL;
    }
    return w->buf;
}

/* s as a JSON string (NULL: null). */
static void put_str(FILE *f, const char *s)
{
    if (!s) {
        fputs("null", f);
        return;
    }
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') fprintf(f, "\\%c", *p);
        else if (*p < 0x20) fprintf(f, "\\u%04x", *p);
        else fputc(*p, f);
    }
    fputc('"', f);
}

/* "key": first at the object's start, else ", key": */
static void put_key(FILE *f, const char *key, int first)
{
    if (!first) fputs(", ", f);
    put_str(f, key);
    fputs(": ", f);
}

static void put_int(FILE *f, const char *key, long v, int first)
{
    put_key(f, key, first);
    fprintf(f, "%ld", v);
}

/* Doubles with 17 significant digits and always a '.' or an exponent: Python reads back the
 * very same number, as a float. */
static void put_num(FILE *f, const char *key, double v, int first)
{
    put_key(f, key, first);
    if (!isfinite(v)) {
        fputs("null", f);
        return;
    }
    char buf[64];
    snprintf(buf, sizeof buf, "%.17g", v);
    fprintf(f, strpbrk(buf, ".e") ? "%s" : "%s.0", buf);
}

static void put_name(FILE *f, const char *key, const char *v, int first)
{
    put_key(f, key, first);
    put_str(f, v);
}

/* "key": [v[0], ...] (v NULL: null). */
static void put_ints(FILE *f, const char *key, const int *v, int n, int first)
{
    put_key(f, key, first);
    if (!v) {
        fputs("null", f);
        return;
    }
    fputc('[', f);
    for (int i = 0; i < n; i++) fprintf(f, i ? ", %d" : "%d", v[i]);
    fputc(']', f);
}

/* ---------------------------------------------------------------- spec */

void *bmpy_spec_load(const char *path, char *err, size_t n)
{
    struct bm_err e;
    struct bm_spec *s;
    if (bm_spec_load(path, &s, &e)) return fail(err, n, &e), NULL;
    return s;
}

void *bmpy_spec_parse(const char *text, const char *name, char *err, size_t n)
{
    struct bm_err e;
    struct bm_spec *s;
    if (bm_spec_parse(text, name, &s, &e)) return fail(err, n, &e), NULL;
    return s;
}

/* What Python's Spec shows of spec sp, as one JSON object: its name, its plan options
 * (bm_plan_opts_from_spec: pp vpp microbatches unit window backbone policy dp), backbone_module,
 * steps, samples_per_microbatch and max_images (at least 1), "train" (lr weight_decay beta1
 * beta2 eps) and "modules" in spec order (name role impl grad_to_backbone trainable layers arch
 * cost). NULL when memory runs out. */
char *bmpy_spec_json(const void *sp)
{
    const struct bm_spec *s = sp;
    struct bm_plan_opts o;
    bm_plan_opts_from_spec(&o, s);
    struct jw w;
    if (jw_open(&w)) return NULL;
    FILE *f = w.f;
    fputc('{', f);
    put_name(f, "name", s->name ? s->name : "", 1);
    put_int(f, "pp", o.pp, 0);
    put_int(f, "vpp", o.vpp, 0);
    put_int(f, "microbatches", o.microbatches, 0);
    put_int(f, "unit", o.unit, 0);
    put_int(f, "window", o.window, 0);
    put_name(f, "backbone", bm_backbone_name(o.backbone), 0);
    put_name(f, "policy", bm_policy_name(o.policy), 0);
    put_int(f, "dp", o.dp, 0);
    put_int(f, "backbone_module", s->backbone_module, 0);
    put_int(f, "steps", s->train.steps, 0);
    put_int(f, "samples_per_microbatch", s->data.samples_per_microbatch > 0 ? s->data.samples_per_microbatch : 1, 0);
    put_int(f, "max_images", s->data.max_images > 0 ? s->data.max_images : 1, 0);
    put_key(f, "train", 0);
    fputc('{', f);
    put_num(f, "lr", s->train.lr, 1);
    put_num(f, "weight_decay", s->train.weight_decay, 0);
    put_num(f, "beta1", s->train.beta1, 0);
    put_num(f, "beta2", s->train.beta2, 0);
    put_num(f, "eps", s->train.eps, 0);
    fputc('}', f);
    put_key(f, "modules", 0);
    fputc('[', f);
    for (int i = 0; i < s->n_modules; i++) {
        const struct bm_module *m = &s->modules[i];
        const struct bm_arch *a = &m->arch;
        const struct bm_cost *c = &m->cost;
        fputs(i ? ", {" : "{", f);
        put_name(f, "name", m->name ? m->name : "", 1);
        put_name(f, "role", bm_role_name(m->role), 0);
        put_name(f, "impl", m->impl, 0);
        put_int(f, "grad_to_backbone", m->grad_to_backbone, 0);
        put_int(f, "trainable", !m->frozen, 0);
        /* the layer count for the chunk split: "layers", else arch.layers (0 = none) */
        put_int(f, "layers", m->layers > 0 ? m->layers : a->layers, 0);
        put_key(f, "arch", 0);
        fputc('{', f);
        put_num(f, "params", a->params, 1);
        put_int(f, "layers", a->layers, 0);
        put_int(f, "hidden", a->hidden, 0);
        put_int(f, "heads", a->heads, 0);
        put_int(f, "ffn", a->ffn, 0);
        put_int(f, "vocab", a->vocab, 0);
        put_int(f, "seq", a->seq, 0);
        put_int(f, "tokens", a->tokens, 0);
        put_int(f, "image", a->image, 0);
        put_int(f, "patch", a->patch, 0);
        put_int(f, "channels", a->channels, 0);
        put_int(f, "cond", a->cond, 0);
        fputc('}', f);
        put_key(f, "cost", 0);
        fputc('{', f);
        put_num(f, "fwd_ms", c->fwd_ms, 1);
        put_num(f, "bwd_ms", c->bwd_ms, 0);
        put_num(f, "act_mib", c->act_mib, 0);
        put_num(f, "state_mib", c->state_mib, 0);
        put_num(f, "out_mib", c->out_mib, 0);
        fputs("}}", f);
    }
    fputs("]}", f);
    return jw_close(&w, 0);
}

/* ---------------------------------------------------------------- plan options */

/* Python's keyword arguments (a JSON object: pp vpp microbatches unit dp, integers >= 1; zero 0 or 1; window
 * >= 1, "auto" or "fit"; backbone and policy by name; a key left out is not given) as a layer
 * of plan options: BM_UNSET where not given. */
static int kwargs_opts(const char *text, struct bm_plan_opts *o, char *err, size_t n)
{
    bm_plan_opts_unset(o);
    json_error_t je;
    json_t *j = json_loads(text, 0, &je);
    if (!json_is_object(j)) {
        json_decref(j);
        return fail_msg(err, n, "plan options: expected a JSON object");
    }
    static const char *const ints[] = {"pp", "vpp", "microbatches", "unit", "dp"};
    int *slots[] = {&o->pp, &o->vpp, &o->microbatches, &o->unit, &o->dp};
    const char *key;
    json_t *v;
    char msg[512];
    int rc = BM_OK;
    json_object_foreach(j, key, v) {
        int k = -1;
        for (int i = 0; i < 5; i++)
            if (!strcmp(key, ints[i])) k = i;
        json_int_t x = json_is_integer(v) ? json_integer_value(v) : 0;
        if (k >= 0) {
            if (!json_is_integer(v) || x < 1 || x > INT_MAX) {
                snprintf(msg, sizeof msg, "plan options: %s: expected an integer in 1..%d", key, INT_MAX);
                rc = fail_msg(err, n, msg);
                break;
            }
            *slots[k] = (int)x;
        } else if (!strcmp(key, "zero")) {
            if (!json_is_integer(v) || (x != 0 && x != 1)) {
                rc = fail_msg(err, n, "plan options: zero: expected 0 or 1 (train.zero: 1 = ZeRO-1)");
                break;
            }
            o->zero = (int)x;
        } else if (!strcmp(key, "window")) {
            const char *w = json_string_value(v);
            if (w && !strcmp(w, "auto")) o->window = BM_WINDOW_AUTO;
            else if (w && !strcmp(w, "fit")) o->window = BM_WINDOW_FIT;
            else if (json_is_integer(v) && x >= 1 && x <= INT_MAX) o->window = (int)x;
            else {
                rc = fail_msg(err, n, "plan options: window: expected an integer >= 1, \"auto\" or \"fit\"");
                break;
            }
        } else if (!strcmp(key, "backbone") || !strcmp(key, "policy")) {
            const char *name = json_string_value(v);
            int bad = !name || (key[0] == 'b' ? bm_backbone_parse(name, &o->backbone)
                                               : bm_policy_parse(name, &o->policy));
            if (bad) {
                snprintf(msg, sizeof msg, "plan options: %s: unknown %s", key, key);
                rc = fail_msg(err, n, msg);
                break;
            }
        } else {
            snprintf(msg, sizeof msg, "plan options: unknown key \"%.200s\"", key);
            rc = fail_msg(err, n, msg);
            break;
        }
    }
    json_decref(j);
    return rc;
}

/* The plan options of s with the keyword arguments kw laid over them (bm_plan_opts_merge), and
 * *sc a shallow copy of s with kw's spec settings (dp) written in (bm_plan_opts_to_spec): what
 * the planner takes, s itself unchanged. */
static void resolve(const struct bm_spec *s, const struct bm_plan_opts *kw, struct bm_spec *sc,
                    struct bm_plan_opts *o)
{
    *sc = *s;
    bm_plan_opts_to_spec(kw, sc);
    bm_plan_opts_from_spec(o, sc);
    bm_plan_opts_merge(o, kw);
}

/* ---------------------------------------------------------------- plan, table */

/* A table handle as Python holds it: the schedule and its cost model (include/bigmac_cost.h),
 * which the C API keeps apart (every function that simulates, draws or writes takes both). */
struct bmpy_table {
    struct bm_table *t;
    struct bm_costs *c; /* NULL: none (every cost 0) */
};
#define TBL(h) (((const struct bmpy_table *)(h))->t)
#define CST(h) (((const struct bmpy_table *)(h))->c)

/* A new handle owning t and c (both freed on failure); NULL with the message when out of memory. */
static void *table_handle(struct bm_table *t, struct bm_costs *c, char *err, size_t n)
{
    struct bmpy_table *h = malloc(sizeof *h);
    if (!h) {
        bm_table_free(t), bm_costs_free(c);
        fail_msg(err, n, "out of memory");
        return NULL;
    }
    h->t = t, h->c = c;
    return h;
}

void bmpy_table_free(void *h)
{
    if (!h) return;
    bm_table_free(((struct bmpy_table *)h)->t);
    bm_costs_free(((struct bmpy_table *)h)->c);
    free(h);
}

/* Plan s with the keyword arguments kwargs (JSON, see kwargs_opts). */
void *bmpy_plan(const void *sp, const char *kwargs, char *err, size_t n)
{
    struct bm_plan_opts kw, o;
    struct bm_spec sc;
    if (kwargs_opts(kwargs, &kw, err, n)) return NULL;
    resolve(sp, &kw, &sc, &o);
    struct bm_err e;
    struct bm_table *t;
    struct bm_costs *c;
    if (bm_plan_build(&sc, &o, &t, &c, &e)) return fail(err, n, &e), NULL;
    return table_handle(t, c, err, n);
}

/* What a writer (f) writes, as a malloc'd string; NULL when the writer fails. */
#define WRITE_TEXT(call)                         \
    do {                                         \
        struct jw w_;                            \
        if (jw_open(&w_)) return NULL;           \
        FILE *f = w_.f;                          \
        int rc_ = (call);                        \
        return jw_close(&w_, rc_);               \
    } while (0)

char *bmpy_table_json(const void *h) { WRITE_TEXT(bm_table_write_json(TBL(h), CST(h), f)); }

/* The table's backbone in PyTorch's schedule grammar (bm_csv_write_torch; comms: with its
 * SEND/RECV cells); note (n bytes) says what was left out. NULL when out of memory. */
char *bmpy_table_torch_csv(const void *h, int comms, char *note, size_t n)
{
    WRITE_TEXT(bm_csv_write_torch(TBL(h), comms, f, note, n));
}

void *bmpy_table_parse(const char *text, const char *name, char *err, size_t n)
{
    struct bm_err e;
    struct bm_table *t;
    struct bm_costs *c;
    if (bm_table_parse(text, name, &t, &c, &e)) return fail(err, n, &e), NULL;
    return table_handle(t, c, err, n);
}

void *bmpy_table_load(const char *path, char *err, size_t n)
{
    struct bm_err e;
    struct bm_table *t;
    struct bm_costs *c;
    if (bm_table_load(path, &t, &c, &e)) return fail(err, n, &e), NULL;
    return table_handle(t, c, err, n);
}

int bmpy_table_save(const void *h, const char *path, char *err, size_t n)
{
    struct bm_err e;
    if (bm_table_save(TBL(h), CST(h), path, &e)) return fail(err, n, &e);
    return BM_OK;
}

/* What Python's Table shows of table tp, as one JSON object: pp vpp microbatches unit window
 * backbone policy backbone_module dp, "modules" (name, role), "tensors" (name, module, grad),
 * "chunk_ranks" (the rank of each global backbone chunk, bm_table_chunk_rank) and
 * "chunk_layers" (null when the table has none). NULL when memory runs out. */
char *bmpy_table_info(const void *tp)
{
    const struct bm_table *t = TBL(tp);
    struct jw w;
    if (jw_open(&w)) return NULL;
    FILE *f = w.f;
    fputc('{', f);
    put_int(f, "pp", t->pp, 1);
    put_int(f, "vpp", t->vpp, 0);
    put_int(f, "microbatches", t->microbatches, 0);
    put_int(f, "unit", t->unit, 0);
    put_int(f, "window", t->window, 0);
    put_name(f, "backbone", bm_backbone_name(t->backbone), 0);
    put_name(f, "policy", bm_policy_name(t->policy), 0);
    put_int(f, "backbone_module", t->backbone_module, 0);
    put_int(f, "dp", t->dp > 1 ? t->dp : 1, 0);
    put_key(f, "modules", 0);
    fputc('[', f);
    for (int i = 0; i < t->n_modules; i++) {
        fputs(i ? ", {" : "{", f);
        put_name(f, "name", t->modules[i].name ? t->modules[i].name : "", 1);
        put_name(f, "role", bm_role_name(t->modules[i].role), 0);
        fputc('}', f);
    }
    fputc(']', f);
    put_key(f, "tensors", 0);
    fputc('[', f);
    for (int i = 0; i < t->n_tensors; i++) {
        fputs(i ? ", {" : "{", f);
        put_name(f, "name", t->tensors[i].name ? t->tensors[i].name : "", 1);
        put_int(f, "module", t->tensors[i].module, 0);
        put_int(f, "grad", t->tensors[i].grad, 0);
        fputc('}', f);
    }
    fputc(']', f);
    int C = t->pp * t->vpp;
    put_key(f, "chunk_ranks", 0);
    fputc('[', f);
    for (int c = 0; c < C; c++) fprintf(f, c ? ", %d" : "%d", bm_table_chunk_rank(t, c));
    fputc(']', f);
    put_ints(f, "chunk_layers", t->chunk_layers, C, 0);
    fputc('}', f);
    return jw_close(&w, 0);
}

/* Rank 'rank's ops as one JSON object of columns, each a list in op order: "kind", "pass"
 * (compute: "F"/"B"/"W", else null), "module", "chunk", "mb", "peer", "tensor" (struct bm_op) and
 * "name" (bm_op_format): one foreign call per rank (Table.ops), and columns, which Python reads
 * several times faster than one object per op. NULL for a rank out of range or when memory runs
 * out. */
char *bmpy_table_rank_ops(const void *tp, int rank)
{
    const struct bm_table *t = TBL(tp);
    if (rank < 0 || rank >= t->pp) return NULL;
    const struct bm_rank_ops *ro = &t->ranks[rank];
    struct jw w;
    if (jw_open(&w)) return NULL;
    FILE *f = w.f;
    static const char *const cols[] = {"kind", "module", "chunk", "mb", "peer", "tensor"};
    fputc('{', f);
    for (int c = 0; c < 6; c++) {
        put_key(f, cols[c], c == 0);
        fputc('[', f);
        for (int k = 0; k < ro->n_ops; k++) {
            const struct bm_op *op = &ro->ops[k];
            long v = c == 0 ? op->kind : c == 1 ? op->module : c == 2 ? op->chunk : c == 3 ? op->mb
                     : c == 4 ? op->peer : op->tensor;
            fprintf(f, k ? ",%ld" : "%ld", v);
        }
        fputc(']', f);
    }
    put_key(f, "pass", 0);
    fputc('[', f);
    for (int k = 0; k < ro->n_ops; k++) {
        const struct bm_op *op = &ro->ops[k];
        if (k) fputc(',', f);
        put_str(f, op->kind == BM_OP_COMPUTE ? bm_pass_name((enum bm_pass)op->pass) : NULL);
    }
    fputc(']', f);
    put_key(f, "name", 0);
    fputc('[', f);
    char name[BM_MAX_NAME + 64];
    for (int k = 0; k < ro->n_ops; k++) {
        bm_op_format(t, &ro->ops[k], name, sizeof name);
        if (k) fputc(',', f);
        put_str(f, name);
    }
    fputs("]}", f);
    return jw_close(&w, 0);
}

int bmpy_verify(const void *h, char *err, size_t n)
{
    const struct bm_table *t = TBL(h);
    struct bm_err e;
    if (bm_verify(t, &e)) return fail(err, n, &e);
    return BM_OK;
}

/* ---------------------------------------------------------------- dataflow */

/* The dataflow of compute op (module, chunk, pass) of table tp (bm_table_op_flow) as a JSON
 * object: {"found": 1, "needs": [tensor indices], "makes": [...]}; {"found": 0} when there is
 * no such op, {"found": -1} when the table has no dataflow. NULL when memory runs out. */
char *bmpy_table_op_flow(const void *tp, int module, int chunk, int pass)
{
    const int *needs = NULL, *makes = NULL;
    int nn = 0, nk = 0;
    int found = bm_table_op_flow(TBL(tp), module, chunk, pass, &needs, &nn, &makes, &nk);
    struct jw w;
    if (jw_open(&w)) return NULL;
    FILE *f = w.f;
    fputc('{', f);
    put_int(f, "found", found, 1);
    if (found == 1) {
        static const int none[1];
        put_ints(f, "needs", needs ? needs : none, nn, 0); /* an op without inputs: [] */
        put_ints(f, "makes", makes ? makes : none, nk, 0);
    }
    fputc('}', f);
    return jw_close(&w, 0);
}

/* ---------------------------------------------------------------- simulate, render */

static int bad_jitter(double jitter, char *err, size_t n)
{
    if (!(jitter >= 0) || jitter > 1e300) return fail_msg(err, n, "jitter: expected a number >= 0");
    return BM_OK;
}

/* `simulate --json` of table t (one policy): bm_timeline_write_json's object. */
char *bmpy_simulate_json(const void *h, double jitter, unsigned long long seed, int spm, char *err, size_t n)
{
    const struct bm_table *t = TBL(h);
    if (bad_jitter(jitter, err, n)) return NULL;
    struct bm_sim_opts so = {jitter, seed, spm};
    struct bm_timeline *tl;
    struct bm_err e;
    if (bm_simulate(t, CST(h), &so, &tl, &e)) return fail(err, n, &e), NULL;
    struct jw w;
    char *s = NULL;
    if (!jw_open(&w)) s = jw_close(&w, bm_timeline_write_json(t, CST(h), tl, w.f));
    bm_timeline_free(tl);
    if (!s) fail_msg(err, n, "out of memory");
    return s;
}

/* `simulate --json` of table t with an executor's measured bytes (bigmac.simulate(act_bytes=),
 * docs/python.md "Measured activation bytes"): act (what each forward keeps until its backward),
 * act_w (what a split backward keeps from B to W) and in_b (what a recomputed forward keeps), each
 * NULL or [(module * pp*vpp + chunk) * M + mb] bytes (chunk 0 for modules other than the
 * backbone), replace the modelled sizes for this one simulation, as the C tests set the table's
 * act_bytes / act_w_bytes / in_bytes. The table is left as it was (the caller keeps the arrays).
 * peaks[r * BM_N_ROLES + role] gets rank r's peak activation bytes of each role, exactly (the
 * JSON's GiB are rounded to 10 digits). This is the one place the binding sets measured bytes: on
 * a copy of the handle's cost model, so the table's own stays as it was. */
char *bmpy_simulate_measured(const void *h, const double *act, const double *act_w, const double *in_b, double jitter,
                             unsigned long long seed, int spm, double *peaks, char *err, size_t n)
{
    const struct bm_table *t = TBL(h);
    if (bad_jitter(jitter, err, n)) return NULL;
    struct bm_costs *c = CST(h) ? bm_costs_copy(CST(h), t) : bm_costs_new(t);
    if (!c) return fail_msg(err, n, "out of memory"), NULL;
    /* the caller's arrays, lent for this one simulation (bm_costs_free would free them) */
    double *act0 = c->act_bytes, *w0 = c->act_w_bytes, *in0 = c->in_bytes;
    c->act_bytes = (double *)act, c->act_w_bytes = (double *)act_w, c->in_bytes = (double *)in_b;
    struct bm_sim_opts so = {jitter, seed, spm};
    struct bm_timeline *tl = NULL;
    struct bm_err e;
    char *s = NULL;
    if (bm_simulate(t, c, &so, &tl, &e)) fail(err, n, &e);
    else {
        for (int r = 0; r < t->pp; r++)
            for (int k = 0; k < BM_N_ROLES; k++) peaks[r * BM_N_ROLES + k] = tl->ranks[r].peak_act_mib[k] * 1048576.0;
        struct jw w;
        if (!jw_open(&w)) s = jw_close(&w, bm_timeline_write_json(t, c, tl, w.f));
        if (!s) fail_msg(err, n, "out of memory");
    }
    bm_timeline_free(tl);
    c->act_bytes = act0, c->act_w_bytes = w0, c->in_bytes = in0;
    bm_costs_free(c);
    return s;
}

/* `simulate SPEC --compare --json` of spec sp with the keyword arguments kwargs (JSON, see
 * kwargs_opts; the policy is every one): bm_compare_write_json's object, and in *n_failed the
 * policy rows that did not plan (Python raises when none did). */
char *bmpy_simulate_compare(const void *sp, const char *kwargs, double jitter, unsigned long long seed, int *n_failed,
                            char *err, size_t n)
{
    if (bad_jitter(jitter, err, n)) return NULL;
    struct bm_plan_opts kw, o;
    struct bm_spec sc; /* its modules' recompute settings change while one row plans, then return */
    if (kwargs_opts(kwargs, &kw, err, n)) return NULL;
    resolve(sp, &kw, &sc, &o);
    struct bm_sim_opts so = {jitter, seed, sc.data.samples_per_microbatch};
    struct bm_compare_opts co = {.sim = &so};
    struct bm_err e;
    struct jw w;
    if (jw_open(&w)) return fail_msg(err, n, "out of memory"), NULL;
    int rc = bm_compare_write_json(&sc, &o, &co, w.f, n_failed, &e);
    char *text = jw_close(&w, rc);
    if (rc) fail(err, n, &e);
    else if (!text) fail_msg(err, n, "out of memory");
    return text;
}

/* Simulate t and draw it: format ascii|svg|html|trace|csv to path ("-" = stdout); title (svg,
 * html) may be NULL. */
int bmpy_render(const void *tp, const char *format, const char *path, int width, const char *title, char *err,
                size_t n)
{
    const struct bm_table *t = TBL(tp);
    struct bm_err e;
    static const char *const formats[] = {"ascii", "svg", "html", "trace", "csv"};
    int fm = -1;
    for (int i = 0; i < 5; i++)
        if (!strcmp(format, formats[i])) fm = i;
    if (fm < 0) {
        bm_err_set(&e, "render: unknown format '%s' (ascii, svg, html, trace, csv)", format);
        return fail(err, n, &e);
    }
    if (fm == 4 && bm_csv_check_names(t, &e)) return fail(err, n, &e);
    struct bm_timeline *tl = NULL;
    if (bm_simulate(t, CST(tp), NULL, &tl, &e)) return fail(err, n, &e);
    FILE *f = strcmp(path, "-") ? fopen(path, "w") : stdout;
    if (!f) {
        bm_timeline_free(tl);
        bm_err_set(&e, "%s: cannot open for writing", path);
        return fail(err, n, &e);
    }
    int rc = fm == 0 ? bm_render_ascii(t, tl, width, f)
             : fm == 1 ? bm_render_svg(t, tl, title, 0, f)
             : fm == 2 ? bm_render_html(t, CST(tp), tl, NULL, title, f)
             : fm == 3 ? bm_render_trace(t, CST(tp), tl, f)
                       : bm_csv_write(t, CST(tp), f);
    if (f != stdout ? fclose(f) : fflush(f)) rc = BM_ERR;
    bm_timeline_free(tl);
    if (rc) {
        bm_err_set(&e, "%s: write failed", path);
        return fail(err, n, &e);
    }
    return BM_OK;
}

/* A measured Chrome trace: times[r] 3 doubles per op of rank r, msg_bytes[r] one per op (a
 * send's or recv's message bytes; msg_bytes NULL: not measured), mem[r] n_mem[r] points of 4
 * doubles (t_ms, encoder, backbone, generator live bytes), as the C executor records them
 * (bm_exec_timeline, bm_exec_trace_write). */
int bmpy_trace_write(const void *h, const double *const *times, const double *const *msg_bytes,
                     const double *const *mem, const int *n_mem, const char *path, char *err, size_t n)
{
    const struct bm_table *tt = TBL(h);
    struct bm_timeline *tl;
    struct bm_err e;
    for (int r = 0; r < tt->pp; r++) { /* Python checked the shapes; a non-finite figure is refused here too */
        for (int k = 0; k < tt->ranks[r].n_ops; k++)
            for (int j = 0; j < 3; j++)
                if (!isfinite(times[r][3 * k + j]) || fabs(times[r][3 * k + j]) > 1e12) {
                    bm_err_set(&e, "trace: rank %d op %d: time %g is not a finite number of ms", r, k,
                               times[r][3 * k + j]);
                    return fail(err, n, &e);
                }
        for (int k = 0; msg_bytes && k < tt->ranks[r].n_ops; k++)
            if (!(msg_bytes[r][k] >= 0) || msg_bytes[r][k] > 1e18) {
                bm_err_set(&e, "trace: rank %d op %d: message size %g is not a number >= 0", r, k, msg_bytes[r][k]);
                return fail(err, n, &e);
            }
        for (int i = 0; i < 4 * n_mem[r]; i++)
            if (!isfinite(mem[r][i]) || fabs(mem[r][i]) > 1e18) {
                bm_err_set(&e, "trace: rank %d memory point %d: %g is not a finite number", r, i / 4, mem[r][i]);
                return fail(err, n, &e);
            }
    }
    if (bm_exec_timeline(tt, CST(h), times, msg_bytes, mem, n_mem, &tl, &e)) return fail(err, n, &e);
    int rc = bm_exec_trace_write(tt, CST(h), tl, path, &e);
    bm_timeline_free(tl);
    return rc ? fail(err, n, &e) : BM_OK;
}

/* ---------------------------------------------------------------- data, models */

void *bmpy_dataset_new(const void *s, char *err, size_t n)
{
    struct bm_err e;
    struct bm_dataset *d;
    if (bm_dataset_new(s, &d, &e)) return fail(err, n, &e), NULL;
    return d;
}

void *bmpy_dataset_batch(const void *d, long step, int mb, char *err, size_t n)
{
    struct bm_err e;
    struct bm_batch *b;
    if (bm_dataset_batch(d, step, mb, &b, &e)) return fail(err, n, &e), NULL;
    return b;
}

/* The shape of batch bp as one JSON object: n_samples n_images_total channels image seq. */
char *bmpy_batch_info(const void *bp)
{
    const struct bm_batch *b = bp;
    struct jw w;
    if (jw_open(&w)) return NULL;
    FILE *f = w.f;
    fputc('{', f);
    put_int(f, "n_samples", b->n_samples, 1);
    put_int(f, "n_images_total", b->n_images_total, 0);
    put_int(f, "channels", b->channels, 0);
    put_int(f, "image", b->image, 0);
    put_int(f, "seq", b->seq, 0);
    fputc('}', f);
    return jw_close(&w, 0);
}

/* The batch's arrays (struct bm_batch) into buffers of the sizes bmpy_batch_info gives. */
void bmpy_batch_copy(const void *bp, int *n_images, float *images, int *text, float *target, float *noise,
                     float *timestep)
{
    const struct bm_batch *b = bp;
    size_t img = (size_t)b->channels * b->image * b->image;
    memcpy(n_images, b->n_images, (size_t)b->n_samples * sizeof(int));
    memcpy(images, b->images, img * b->n_images_total * sizeof(float));
    memcpy(text, b->text, (size_t)b->n_samples * b->seq * sizeof(int));
    memcpy(target, b->target, img * b->n_samples * sizeof(float));
    memcpy(noise, b->noise, img * b->n_samples * sizeof(float));
    memcpy(timestep, b->timestep, (size_t)b->n_samples * sizeof(float));
}

/* The initial flat parameters of module i of s (layers [a, b) for the backbone; 0, 0 else),
 * created by its registered implementation (bm_module_find) with the trainers' seed
 * (bm_train_module_seed): *n floats into a new buffer (bmpy_free). NULL with err on failure. */
float *bmpy_module_init(const void *sp, int i, int a, int b, size_t *n, char *err, size_t errn)
{
    const struct bm_spec *s = sp;
    struct bm_err e;
    if (i < 0 || i >= s->n_modules) {
        bm_err_set(&e, "module index %d: the spec has %d modules (0..%d)", i, s->n_modules, s->n_modules - 1);
        return fail(err, errn, &e), NULL;
    }
    const struct bm_module *m = &s->modules[i];
    if (!m->impl) {
        bm_err_set(&e, "module \"%s\" has no \"impl\"", m->name);
        return fail(err, errn, &e), NULL;
    }
    const struct bm_module_ops *ops = bm_module_find(m->impl);
    if (!ops) {
        bm_err_set(&e, "module \"%s\": unknown impl \"%s\"\nhint: built-in: vit, gpt, dit", m->name, m->impl);
        return fail(err, errn, &e), NULL;
    }
    void *self;
    if (ops->create(m, s, a, b, bm_train_module_seed(s, i), &self, &e)) return fail(err, errn, &e), NULL;
    float *p = ops->params(self, n);
    float *c = malloc(*n * sizeof(float) + 1);
    if (c) memcpy(c, p, *n * sizeof(float));
    ops->free(self);
    if (!c) fail_msg(err, errn, "out of memory");
    return c;
}
