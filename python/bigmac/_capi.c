/* _capi.c — the flat C interface the Python package (python/bigmac/__init__.py, ctypes) calls.
 * It is built into build/python/_bigmac.so together with the C library's objects (the JSON of
 * `simulate --json` and `--compare --json` comes from src/study/, the same builder the CLI
 * prints), so Python never re-implements the planner, verifier, simulator, renderers, dataset
 * or initialisation.
 *
 * Conventions: handles are opaque pointers owned by Python (freed with the matching *_free);
 * functions returning int return BM_OK / BM_ERR and on failure write the C library's message
 * into err[0 .. errn-1]; strings returned as char * are malloc'd (bmpy_free). Every index is
 * range-checked here as well as in Python (which names the argument): an accessor given one out
 * of range returns "" / -1 / zeros, never reads outside the object. */
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "bigmac.h"
#include "bigmac_module.h"
#include "cli/cli.h"
#include "data/data.h"
#include "exec/trace.h"
#include "table/flow.h"
#include "report/report.h"
#include "study/study.h"
#include "train/train.h"
#include "util/util.h"

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

/* A table handle as Python holds it: the schedule and its cost model (include/bigmac_cost.h),
 * which the C API keeps apart (every function that simulates, draws or writes takes both). */
struct bmpy_table {
    struct bm_table *t;
    struct bm_costs *c; /* NULL: none (every cost 0) */
};
#define TBL(h) (((const struct bmpy_table *)(h))->t)
#define CST(h) (((const struct bmpy_table *)(h))->c)

/* A new handle owning t and c (both freed on failure). NULL when out of memory. */
static void *table_handle(struct bm_table *t, struct bm_costs *c)
{
    struct bmpy_table *h = malloc(sizeof *h);
    if (!h) {
        bm_table_free(t), bm_costs_free(c);
        return NULL;
    }
    h->t = t, h->c = c;
    return h;
}

static const struct bm_module *spec_module(const void *sp, int i)
{
    const struct bm_spec *s = sp;
    return i >= 0 && i < s->n_modules ? &s->modules[i] : NULL;
}

static const struct bm_rank_ops *table_rank(const struct bm_table *t, int rank)
{
    return rank >= 0 && rank < t->pp ? &t->ranks[rank] : NULL;
}

static const struct bm_tensor *table_tensor(const struct bm_table *t, int i)
{
    return i >= 0 && i < t->n_tensors ? &t->tensors[i] : NULL;
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

void bmpy_spec_free(void *s) { bm_spec_free(s); }

const char *bmpy_spec_name(const void *sp)
{
    const struct bm_spec *s = sp;
    return s->name ? s->name : "";
}

/* out[0..]: pp vpp microbatches unit window backbone policy n_modules backbone_module steps
 * samples_per_microbatch max_images */
void bmpy_spec_info(const void *sp, int *out)
{
    const struct bm_spec *s = sp;
    struct bm_plan_opts o;
    bm_plan_opts_from_spec(&o, s);
    int v[] = {o.pp, o.vpp, o.microbatches, o.unit, o.window, (int)o.backbone, (int)o.policy, s->n_modules,
               s->backbone_module, s->train.steps, s->data.samples_per_microbatch > 0 ? s->data.samples_per_microbatch : 1,
               s->data.max_images > 0 ? s->data.max_images : 1};
    memcpy(out, v, sizeof v);
}

/* out: lr weight_decay beta1 beta2 eps */
void bmpy_spec_train(const void *sp, double *out)
{
    const struct bm_spec *s = sp;
    out[0] = s->train.lr, out[1] = s->train.weight_decay, out[2] = s->train.beta1, out[3] = s->train.beta2;
    out[4] = s->train.eps;
}

const char *bmpy_spec_module_name(const void *sp, int i)
{
    const struct bm_module *m = spec_module(sp, i);
    return m && m->name ? m->name : "";
}
const char *bmpy_spec_module_impl(const void *sp, int i)
{
    const struct bm_module *m = spec_module(sp, i);
    return m && m->impl ? m->impl : "";
}
int bmpy_spec_module_role(const void *sp, int i)
{
    const struct bm_module *m = spec_module(sp, i);
    return m ? (int)m->role : -1;
}
int bmpy_spec_module_grad_to_backbone(const void *sp, int i)
{
    const struct bm_module *m = spec_module(sp, i);
    return m ? m->grad_to_backbone : 0;
}
/* 1 unless the module is frozen ("trainable": false; docs/spec.md "Frozen modules"). */
int bmpy_spec_module_trainable(const void *sp, int i)
{
    const struct bm_module *m = spec_module(sp, i);
    return m ? !m->frozen : 1;
}
/* The module's layer count for the chunk split ("layers", else arch.layers; 0 = none). */
int bmpy_spec_module_layers(const void *sp, int i)
{
    const struct bm_module *m = spec_module(sp, i);
    if (!m) return 0;
    return m->layers > 0 ? m->layers : m->arch.layers;
}

/* arch: params layers hidden heads ffn vocab seq tokens image patch channels cond (as doubles) */
void bmpy_spec_module_arch(const void *sp, int i, double *out)
{
    const struct bm_module *m = spec_module(sp, i);
    if (!m) {
        memset(out, 0, 12 * sizeof *out);
        return;
    }
    const struct bm_arch *a = &m->arch;
    double v[] = {a->params, a->layers, a->hidden, a->heads, a->ffn, a->vocab, a->seq, a->tokens,
                  a->image, a->patch, a->channels, a->cond};
    memcpy(out, v, sizeof v);
}
/* cost: fwd_ms bwd_ms act_mib state_mib out_mib */
void bmpy_spec_module_cost(const void *sp, int i, double *out)
{
    const struct bm_module *m = spec_module(sp, i);
    if (!m) {
        memset(out, 0, 5 * sizeof *out);
        return;
    }
    const struct bm_cost *c = &m->cost;
    out[0] = c->fwd_ms, out[1] = c->bwd_ms, out[2] = c->act_mib, out[3] = c->state_mib, out[4] = c->out_mib;
}

/* ---------------------------------------------------------------- plan, table */

/* Plan s. Arguments of 0 take the spec's value (window: 0 = spec's, -1 auto, -2 fit; backbone
 * and policy: -1 = spec's), with the CLI's rule that a spec whose unit is its pp follows --pp. */
void *bmpy_plan(const void *sp, int pp, int vpp, int M, int unit, int window, int backbone, int policy,
                char *err, size_t n)
{
    const struct bm_spec *s = sp;
    struct bm_plan_opts o;
    bm_plan_opts_from_spec(&o, s);
    struct bm_cli_plan_flags f = {.pp = pp, .vpp = vpp, .microbatches = M, .unit = unit, .window = window,
                                  .backbone_set = backbone >= 0, .policy_set = policy >= 0,
                                  .backbone = backbone >= 0 ? (enum bm_backbone)backbone : BM_BB_1F1B,
                                  .policy = policy >= 0 ? (enum bm_policy)policy : BM_POL_BIGMAC};
    bm_cli_plan_apply(&f, &o);
    struct bm_err e;
    struct bm_table *t;
    struct bm_costs *c;
    if (bm_plan_build(s, &o, &t, &c, &e)) return fail(err, n, &e), NULL;
    void *h = table_handle(t, c);
    if (!h) fail_msg(err, n, "out of memory");
    return h;
}

void bmpy_table_free(void *h)
{
    if (!h) return;
    bm_table_free(((struct bmpy_table *)h)->t);
    bm_costs_free(((struct bmpy_table *)h)->c);
    free(h);
}

static char *table_text(const struct bm_table *t, const struct bm_costs *c)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) return NULL;
    int rc = bm_table_write_json(t, c, f);
    if (fclose(f) || rc) {
        free(buf);
        return NULL;
    }
    return buf;
}

char *bmpy_table_json(const void *h) { return table_text(TBL(h), CST(h)); }

/* The table's backbone in PyTorch's schedule grammar (bm_csv_write_torch; comms: with its
 * SEND/RECV cells); note (n bytes) says what was left out. NULL when out of memory. */
char *bmpy_table_torch_csv(const void *th, int comms, char *note, size_t n)
{
    const struct bm_table *t = TBL(th);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) return NULL;
    int rc = bm_csv_write_torch(t, comms, f, note, n);
    if (fclose(f) || rc) {
        free(buf);
        return NULL;
    }
    return buf;
}

void *bmpy_table_parse(const char *text, const char *name, char *err, size_t n)
{
    struct bm_err e;
    struct bm_table *t;
    struct bm_costs *c;
    if (bm_table_parse(text, name, &t, &c, &e)) return fail(err, n, &e), NULL;
    void *h = table_handle(t, c);
    if (!h) fail_msg(err, n, "out of memory");
    return h;
}

void *bmpy_table_load(const char *path, char *err, size_t n)
{
    struct bm_err e;
    struct bm_table *t;
    struct bm_costs *c;
    if (bm_table_load(path, &t, &c, &e)) return fail(err, n, &e), NULL;
    void *h = table_handle(t, c);
    if (!h) fail_msg(err, n, "out of memory");
    return h;
}

int bmpy_table_save(const void *th, const char *path, char *err, size_t n)
{
    const struct bm_table *t = TBL(th);
    struct bm_err e;
    if (bm_table_save(t, CST(th), path, &e)) return fail(err, n, &e);
    return BM_OK;
}

/* out: pp vpp microbatches unit window backbone policy n_modules backbone_module n_tensors */
void bmpy_table_info(const void *tp, int *out)
{
    const struct bm_table *t = TBL(tp);
    int v[] = {t->pp, t->vpp, t->microbatches, t->unit, t->window, (int)t->backbone, (int)t->policy,
               t->n_modules, t->backbone_module, t->n_tensors};
    memcpy(out, v, sizeof v);
}

int bmpy_table_n_ops(const void *tp, int rank)
{
    const struct bm_rank_ops *ro = table_rank(TBL(tp), rank);
    return ro ? ro->n_ops : 0;
}

/* 7 ints per op: kind pass module chunk mb peer tensor */
void bmpy_table_ops(const void *tp, int rank, int *out)
{
    const struct bm_rank_ops *ro = table_rank(TBL(tp), rank);
    if (!ro) return;
    for (int k = 0; k < ro->n_ops; k++) {
        const struct bm_op *op = &ro->ops[k];
        int *q = out + 7 * k;
        q[0] = op->kind, q[1] = op->pass, q[2] = op->module, q[3] = op->chunk, q[4] = op->mb, q[5] = op->peer;
        q[6] = op->tensor;
    }
}

/* Every op name of the rank (bm_op_format), each followed by a '\n', into buf (n bytes): the
 * bytes needed (with the final NUL); nothing is written unless they fit. One call per rank
 * instead of one per op (Table.ops). */
size_t bmpy_table_op_names(const void *tp, int rank, char *buf, size_t n)
{
    const struct bm_rank_ops *ro = table_rank(TBL(tp), rank);
    if (!ro) {
        if (n) buf[0] = 0;
        return 1;
    }
    char name[BM_MAX_NAME + 64];
    size_t need = 1;
    for (int k = 0; k < ro->n_ops; k++) {
        bm_op_format(TBL(tp), &ro->ops[k], name, sizeof name);
        size_t len = strlen(name);
        if (buf && need + len + 1 <= n) {
            memcpy(buf + need - 1, name, len);
            buf[need - 1 + len] = '\n';
        }
        need += len + 1;
    }
    if (buf && need <= n) buf[need - 1] = 0;
    else if (buf && n) buf[0] = 0;
    return need;
}

void bmpy_op_format(const void *th, int rank, int k, char *buf, size_t n)
{
    const struct bm_table *t = TBL(th);
    const struct bm_rank_ops *ro = table_rank(t, rank);
    if (!ro || k < 0 || k >= ro->n_ops) {
        if (n) buf[0] = 0;
        return;
    }
    bm_op_format(t, &ro->ops[k], buf, n);
}

const char *bmpy_table_module_name(const void *tp, int i)
{
    const struct bm_table *t = TBL(tp);
    return i >= 0 && i < t->n_modules && t->modules[i].name ? t->modules[i].name : "";
}
int bmpy_table_module_role(const void *tp, int i)
{
    const struct bm_table *t = TBL(tp);
    return i >= 0 && i < t->n_modules ? (int)t->modules[i].role : -1;
}
const char *bmpy_table_tensor_name(const void *th, int i)
{
    const struct bm_table *t = TBL(th);
    const struct bm_tensor *x = table_tensor(t, i);
    return x && x->name ? x->name : "";
}
int bmpy_table_tensor_module(const void *th, int i)
{
    const struct bm_table *t = TBL(th);
    const struct bm_tensor *x = table_tensor(t, i);
    return x ? x->module : -1;
}
int bmpy_table_tensor_grad(const void *th, int i)
{
    const struct bm_table *t = TBL(th);
    const struct bm_tensor *x = table_tensor(t, i);
    return x ? x->grad : 0;
}

/* Layers per global chunk (pp*vpp ints); 0 when the table carries none. */
int bmpy_table_chunk_layers(const void *tp, int *out)
{
    const struct bm_table *t = TBL(tp);
    if (!t->chunk_layers) return 0;
    memcpy(out, t->chunk_layers, (size_t)t->pp * t->vpp * sizeof(int));
    return 1;
}

/* out[c] = the rank of global backbone chunk c (pp*vpp entries; c mod P, or the V shapes'). */
void bmpy_table_chunk_ranks(const void *tp, int *out)
{
    const struct bm_table *t = TBL(tp);
    for (int c = 0; c < t->pp * t->vpp; c++) out[c] = bm_table_chunk_rank(t, c);
}

int bmpy_verify(const void *th, char *err, size_t n)
{
    const struct bm_table *t = TBL(th);
    struct bm_err e;
    if (bm_verify(t, &e)) return fail(err, n, &e);
    return BM_OK;
}

/* ---------------------------------------------------------------- dataflow */

/* needs/makes of op (module, chunk, pass) in the table's dataflow (bm_table_finish; every table
 * the library plans or loads has one): counts into n_needs/n_makes, indices into the arrays (at
 * most cap each). Chunk 0's encoder parts come in spec module order, as the C executor takes
 * them (include/bigmac_module.h). 0 when there is no such op; -1 when the table has no flow. */
int bmpy_flow_get(const void *tp, int module, int chunk, int pass, int *needs, int *n_needs, int *makes,
                  int *n_makes, int cap)
{
    const struct bm_table *t = TBL(tp);
    const struct bm_flow *f = bm_table_flow(t);
    if (!f) return -1;
    const struct bm_flow_op *o = bm_flow_get(f, module, chunk, pass);
    if (!o) return 0;
    const int *nv = o->needs, *mv = o->makes;
    if (module == t->backbone_module && chunk == 0) {
        if (pass == BM_PASS_F) nv = f->parts[0];
        else mv = f->parts[1];
    }
    *n_needs = o->n_needs, *n_makes = o->n_makes;
    for (int i = 0; i < o->n_needs && i < cap; i++) needs[i] = nv[i];
    for (int i = 0; i < o->n_makes && i < cap; i++) makes[i] = mv[i];
    return 1;
}

/* ---------------------------------------------------------------- simulate, render */

static char *json_text(json_t *j)
{
    char *s = json_dumps(j, JSON_INDENT(2) | JSON_REAL_PRECISION(10));
    json_decref(j);
    if (!s) return NULL;
    char *c = strdup(s); /* jansson's allocator may differ from free() */
    free(s);
    return c;
}

/* `simulate --json` of table t (one policy). */
char *bmpy_simulate_json(const void *th, double jitter, unsigned long long seed, int spm, char *err, size_t n)
{
    const struct bm_table *t = TBL(th);
    if (!(jitter >= 0) || jitter > 1e300) return fail_msg(err, n, "jitter: expected a number >= 0"), NULL;
    struct bm_sim_opts so = {jitter, seed, spm};
    struct bm_timeline *tl;
    struct bm_err e;
    if (bm_simulate(t, CST(th), &so, &tl, &e)) return fail(err, n, &e), NULL;
    char *s = json_text(bm_study_sim_json(t, CST(th), tl));
    bm_timeline_free(tl);
    if (!s) fail_msg(err, n, "out of memory");
    return s;
}

/* `simulate SPEC --compare --json` of spec sp with the plan arguments of bmpy_plan (policy:
 * every one): the object bm_study_compare_json builds, as the command prints it. NULL with the
 * message when no policy plans. */
char *bmpy_simulate_compare(void *sp, int pp, int vpp, int M, int unit, int window, int backbone, double jitter,
                            unsigned long long seed, char *err, size_t n)
{
    struct bm_spec *s = sp; /* its recompute settings change while one row plans, then return */
    if (!(jitter >= 0) || jitter > 1e300) return fail_msg(err, n, "jitter: expected a number >= 0"), NULL;
    struct bm_plan_opts o;
    bm_plan_opts_from_spec(&o, s);
    struct bm_cli_plan_flags f = {.pp = pp, .vpp = vpp, .microbatches = M, .unit = unit, .window = window,
                                  .backbone_set = backbone >= 0,
                                  .backbone = backbone >= 0 ? (enum bm_backbone)backbone : BM_BB_1F1B};
    bm_cli_plan_apply(&f, &o);
    struct bm_sim_opts so = {jitter, seed, s->data.samples_per_microbatch};
    struct bm_compare_opts co = {.sim = &so};
    struct bm_err e;
    json_t *j;
    int n_failed = 0;
    if (bm_study_compare_json(s, &o, &co, &j, &n_failed, &e)) return fail(err, n, &e), NULL;
    if (n_failed == BM_N_POLICIES) {
        const char *first = json_string_value(json_object_get(json_array_get(json_object_get(j, "results"), 0), "error"));
        snprintf(err, n, "simulate --compare: no policy planned (bigmac: %s)", first ? first : "?");
        json_decref(j);
        return NULL;
    }
    char *text = json_text(j);
    if (!text) fail_msg(err, n, "out of memory");
    return text;
}

/* Simulate t and draw it: format ascii|svg|html|trace|csv to path ("-" = stdout); title (svg,
 * html) may be NULL. */
int bmpy_render(const void *tp, const char *format, const char *path, int width, const char *title, char *err,
                size_t n)
{
    const struct bm_table *t = TBL(tp);
    struct bm_timeline *tl = NULL;
    struct bm_err e;
    const struct bm_costs *c = CST(tp);
    if (bm_simulate(t, c, NULL, &tl, &e)) return fail(err, n, &e);
    FILE *f = strcmp(path, "-") ? fopen(path, "w") : stdout;
    int rc;
    if (!f) {
        bm_timeline_free(tl);
        bm_err_set(&e, "%s: cannot open for writing", path);
        return fail(err, n, &e);
    }
    if (!strcmp(format, "ascii")) rc = bm_render_ascii(t, tl, width, f);
    else if (!strcmp(format, "svg")) rc = bm_render_svg(t, tl, title, 0, f);
    else if (!strcmp(format, "html")) rc = bm_render_html(t, c, tl, NULL, title, f);
    else if (!strcmp(format, "trace")) rc = bm_render_trace(t, c, tl, f);
    else if (!strcmp(format, "csv")) {
        rc = bm_csv_check_names(t, &e);
        if (rc == BM_OK) rc = bm_csv_write(t, c, f);
        else {
            if (f != stdout) fclose(f);
            bm_timeline_free(tl);
            return fail(err, n, &e);
        }
    } else {
        rc = BM_ERR;
        bm_err_set(&e, "render: unknown format '%s' (ascii, svg, html, trace, csv)", format);
        if (f != stdout) fclose(f);
        bm_timeline_free(tl);
        return fail(err, n, &e);
    }
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
 * doubles (t_ms, encoder, backbone, generator live bytes), as the C executor records them. */
int bmpy_trace_write(const void *th, const double *const *times, const double *const *msg_bytes,
                     const double *const *mem, const int *n_mem, const char *path, char *err, size_t n)
{
    const struct bm_table *t = TBL(th), *tt = t;
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
    if (bm_exec_timeline(t, CST(th), times, msg_bytes, mem, n_mem, &tl, &e)) return fail(err, n, &e);
    int rc = bm_exec_trace_write(t, CST(th), tl, path, &e);
    bm_timeline_free(tl);
    return rc ? fail(err, n, &e) : BM_OK;
}

/* ---------------------------------------------------------------- data, models */

void *bmpy_data_cfg(const void *s, char *err, size_t n)
{
    struct bm_err e;
    struct bm_data_cfg *c = malloc(sizeof *c);
    if (!c) return fail_msg(err, n, "out of memory"), NULL;
    if (bm_train_data_cfg(s, c, &e)) {
        free(c);
        return fail(err, n, &e), NULL;
    }
    return c;
}

void bmpy_data_cfg_free(void *c) { free(c); }

void *bmpy_data_batch(const void *cfg, long step, int mb, char *err, size_t n)
{
    struct bm_err e;
    struct bm_data_batch *d;
    if (bm_data_batch(cfg, step, mb, &d, &e)) return fail(err, n, &e), NULL;
    return d;
}

void bmpy_data_batch_free(void *d) { bm_data_batch_free(d); }

/* out: n_samples n_images_total channels image seq */
void bmpy_batch_info(const void *dp, int *out)
{
    const struct bm_batch *b = &((const struct bm_data_batch *)dp)->b;
    out[0] = b->n_samples, out[1] = b->n_images_total, out[2] = b->channels, out[3] = b->image, out[4] = b->seq;
}

/* The batch's arrays (see struct bm_batch): sizes from bmpy_batch_info. */
void bmpy_batch_copy(const void *dp, int *n_images, float *images, int *text, float *target, float *noise,
                     float *timestep)
{
    const struct bm_batch *b = &((const struct bm_data_batch *)dp)->b;
    size_t img = (size_t)b->channels * b->image * b->image;
    memcpy(n_images, b->n_images, (size_t)b->n_samples * sizeof(int));
    memcpy(images, b->images, img * b->n_images_total * sizeof(float));
    memcpy(text, b->text, (size_t)b->n_samples * b->seq * sizeof(int));
    memcpy(target, b->target, img * b->n_samples * sizeof(float));
    memcpy(noise, b->noise, img * b->n_samples * sizeof(float));
    memcpy(timestep, b->timestep, (size_t)b->n_samples * sizeof(float));
}

/* The initial flat parameters of module i of s (layers [a, b) for the backbone; 0, 0 else),
 * created by its registered implementation with the trainers' seed: *n floats into a new
 * buffer (bmpy_free). NULL with err on failure. */
float *bmpy_module_init(const void *sp, int i, int a, int b, size_t *n, char *err, size_t errn)
{
    const struct bm_spec *s = sp;
    struct bm_err e;
    const struct bm_module *m = spec_module(sp, i);
    if (!m) {
        bm_err_set(&e, "module index %d: the spec has %d modules (0..%d)", i, s->n_modules, s->n_modules - 1);
        return fail(err, errn, &e), NULL;
    }
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

const char *bmpy_vocab_word(int id) { return bm_vocab_word(id); }

/* ---------------------------------------------------------------- data parallel (issue 23) */

/* bmpy_plan and bmpy_simulate_compare with D = dp data-parallel replicas (0: the spec's
 * parallel.dp), as `--dp D` on the command line: the spec's dp is set for the call (the planner
 * places global ranks p*D + d on hosts) and put back. */
void *bmpy_plan_dp(void *sp, int dp, int pp, int vpp, int M, int unit, int window, int backbone, int policy, char *err,
                   size_t n)
{
    struct bm_spec *s = sp;
    int keep = s->dp;
    if (dp > 0) s->dp = dp;
    void *t = bmpy_plan(s, pp, vpp, M, unit, window, backbone, policy, err, n);
    s->dp = keep;
    return t;
}

char *bmpy_simulate_compare_dp(void *sp, int dp, int pp, int vpp, int M, int unit, int window, int backbone,
                               double jitter, unsigned long long seed, char *err, size_t n)
{
    struct bm_spec *s = sp;
    int keep = s->dp;
    if (dp > 0) s->dp = dp;
    char *j = bmpy_simulate_compare(s, pp, vpp, M, unit, window, backbone, jitter, seed, err, n);
    s->dp = keep;
    return j;
}
