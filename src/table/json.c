/* json.c — the operator table as JSON (docs/design.md §4): writer (streamed with fprintf, so a
 * million-op table stays proportionate) and loader (jansson for the header, the ops streamed
 * from the text so a 466 MB table loads in its text plus ~20 bytes per op; errors name
 * file:line:col). */
#include <errno.h>
#include <stdarg.h>
#include <jansson.h>
#include <math.h>
#include <stddef.h>
#include <string.h>
#include <sys/stat.h>

#include "bigmac_cost.h"
#include "spec/jfield.h"
#include "spec/jpos.h"
#include "spec/knobs.h"
#include "table/table.h"
#include "util/util.h"

/* ---------------------------------------------------------------- writer */

/* fields[0..n) as JSON members, comma-separated. */
static void put_fields(FILE *f, const struct bm_field *fields, int n)
{
    for (int j = 0; j < n; j++) {
        fprintf(f, "%s\"%s\": ", j ? ", " : "", fields[j].key);
        bm_put_num(f, fields[j].val);
    }
}

static void put_strv(FILE *f, char **v, int n)
{
    fputc('[', f);
    for (int i = 0; i < n; i++) {
        if (i) fputs(", ", f);
        bm_put_jstr(f, v[i]);
    }
    fputc(']', f);
}

int bm_table_write_json(const struct bm_table *t, const struct bm_costs *costs, FILE *f)
{
    struct bm_costs none = {0};
    const struct bm_costs *km = costs ? costs : &none; /* none: every cost 0 */
    fprintf(f, "{\"format\": \"%s\", \"version\": %d,\n", BM_TABLE_FORMAT, BM_TABLE_VERSION);
    fprintf(f, " \"pp\": %d, \"vpp\": %d, \"microbatches\": %d, \"unit\": %d, \"window\": %d,\n",
            t->pp, t->vpp, t->microbatches, t->unit, t->window);
    if (t->dp > 1) fprintf(f, " \"dp\": %d,\n", t->dp); /* data-parallel replicas: only when there are */
    if (t->zero) fprintf(f, " \"zero\": 1,\n");            /* ZeRO-1 (sim/step.h): only when asked */
    fprintf(f, " \"backbone\": \"%s\", \"policy\": \"%s\", \"warmup_extra\": %d,\n",
            bm_backbone_name(t->backbone), bm_policy_name(t->policy), t->warmup_extra);
    struct bm_field fields[64];
    fprintf(f, " \"device\": {");
    put_fields(f, fields, bm_table_device_fields(&km->device, t->ranks_per_host, 0, fields, 64));
    fprintf(f, "},\n \"modules\": [\n");
    int split = bm_table_splits(t, -1);
    for (int i = 0; i < t->n_modules; i++) {
        const struct bm_table_module *m = &t->modules[i];
        fprintf(f, "  {\"name\": ");
        bm_put_jstr(f, m->name);
        fprintf(f, ", \"role\": \"%s\", \"consumes\": ", bm_role_name(m->role));
        put_strv(f, m->consumes, m->n_consumes);
        fprintf(f, ", \"produces\": ");
        put_strv(f, m->produces, m->n_produces);
        if (m->role == BM_ROLE_GENERATOR)
            fprintf(f, ", \"grad_to_backbone\": %s", m->grad_to_backbone ? "true" : "false");
        if (m->recompute) fprintf(f, ", \"recompute\": \"full\""); /* absent = "none" */
        if (m->frozen) fprintf(f, ", \"trainable\": false");        /* absent = true */
        static const struct bm_cost zero_cost;
        const struct bm_cost *k = i < km->n_modules ? &km->modules[i] : &zero_cost;
        double spread = i < km->n_modules && km->spread ? km->spread[i] : 0;
        int nf = bm_table_cost_fields(k, spread, m->frozen, split, 0, fields, (int)(sizeof fields / sizeof fields[0]));
        fprintf(f, ",\n   \"cost\": {");
        put_fields(f, fields, nf);
        fprintf(f, "}}%s\n", i + 1 < t->n_modules ? "," : "");
    }
    int C = t->pp * t->vpp;
    fprintf(f, " ],\n \"chunk_weights\": [");
    for (int c = 0; c < C; c++) {
        if (c) fputs(", ", f);
        bm_put_num(f, km->chunk_weights ? km->chunk_weights[c] : 1.0 / C);
    }
    fprintf(f, "],\n");
    if (t->chunk_layers) {
        fprintf(f, " \"chunk_layers\": [");
        for (int c = 0; c < C; c++) fprintf(f, "%s%d", c ? ", " : "", t->chunk_layers[c]);
        fprintf(f, "],\n");
    }
    int moved = 0; /* the chunk -> rank map, only when some chunk is not on rank c mod P */
    for (int c = 0; c < C; c++) moved |= bm_table_chunk_rank(t, c) != c % t->pp;
    if (moved) {
        fprintf(f, " \"chunk_rank\": [");
        for (int c = 0; c < C; c++) fprintf(f, "%s%d", c ? ", " : "", bm_table_chunk_rank(t, c));
        fprintf(f, "],\n");
    }
    fprintf(f, " \"mb_scale\": [");
    for (int m = 0; m < t->microbatches; m++) {
        if (m) fputs(", ", f);
        bm_put_num(f, km->mb_scale ? km->mb_scale[m] : 1.0);
    }
    fprintf(f, "],\n");
    if (km->rank_time_scale) {
        fprintf(f, " \"rank_time_scale\": [");
        for (int r = 0; r < t->pp; r++) {
            if (r) fputs(", ", f);
            bm_put_num(f, km->rank_time_scale[r]);
        }
        fprintf(f, "],\n");
    }
    struct bm_field ovh[16]; /* the executor's time outside the ops (us; ms in the cost model) */
    for (int k = 0, n = bm_table_overhead_fields(km, 0, ovh, 16); k < n; k++) {
        fprintf(f, " \"%s\": ", ovh[k].key);
        bm_put_num(f, ovh[k].val);
        fprintf(f, ",\n");
    }
    fprintf(f, " \"ranks\": [\n");
    for (int r = 0; r < t->pp; r++) {
        const struct bm_rank_ops *ro = &t->ranks[r];
        fprintf(f, "  {\"rank\": %d, \"ops\": [\n", r);
        for (int i = 0; i < ro->n_ops; i++) {
            const struct bm_op *op = &ro->ops[i];
            const char *sep = i + 1 < ro->n_ops ? "," : "";
            if (op->kind == BM_OP_COMPUTE) {
                fprintf(f, "    {\"op\": \"compute\", \"module\": ");
                bm_put_jstr(f, t->modules[op->module].name);
                fprintf(f, ", \"pass\": \"%s\"", bm_pass_name((enum bm_pass)op->pass));
                if (op->chunk >= 0) fprintf(f, ", \"chunk\": %d", op->chunk);
                fprintf(f, ", \"mb\": %d}%s\n", op->mb, sep);
            } else {
                fprintf(f, "    {\"op\": \"%s\", \"peer\": %d, \"tensor\": ",
                        op->kind == BM_OP_SEND ? "send" : "recv", op->peer);
                bm_put_jstr(f, t->tensors[op->tensor].name);
                fprintf(f, ", \"mb\": %d}%s\n", op->mb, sep);
            }
        }
        fprintf(f, "  ]}%s\n", r + 1 < t->pp ? "," : "");
    }
    fprintf(f, " ]}\n");
    return ferror(f) ? BM_ERR : BM_OK;
}

int bm_table_save(const struct bm_table *t, const struct bm_costs *c, const char *path, struct bm_err *err)
{
    if (!strcmp(path, "-")) {
        if (bm_table_write_json(t, c, stdout)) return bm_err_set(err, "<stdout>: write error");
        return BM_OK;
    }
    FILE *f = fopen(path, "w");
    if (!f) return bm_err_set(err, "%s: cannot write: %s", path, strerror(errno));
    int rc = bm_table_write_json(t, c, f);
    if (fclose(f) || rc) return bm_err_set(err, "%s: write error: %s", path, strerror(errno));
    return BM_OK;
}

/* ---------------------------------------------------------------- loader */

struct ld {
    struct bm_jfield f;   /* name, text and err of the messages, the table's wording (jfield.h) */
    const char *ranks_at; /* the "ranks" array in text when it is streamed (stream_ranks), else NULL */
    struct bm_costs *c;   /* the costs the table carries, filled beside it */
};

/* Report an error at JSON path 'path' ("ranks[1].ops[3].mb"). */
static int fail(struct ld *L, const char *path, const char *fmt, ...)
#ifdef __GNUC__
    __attribute__((format(printf, 3, 4)))
#endif
    ;
static int fail(struct ld *L, const char *path, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = bm_jf_vfail(&L->f, path, fmt, ap);
    va_end(ap);
    return rc;
}

/* Reject keys of object o (at 'path') that are not in the NULL-terminated list 'known'. */
static int check_keys(struct ld *L, json_t *o, const char *path, const char *const *known)
{
    const char *key;
    json_t *v;
    json_object_foreach(o, key, v) {
        int ok = 0;
        for (int i = 0; known[i]; i++)
            if (!strcmp(key, known[i])) ok = 1;
        if (!ok) {
            char p[512];
            snprintf(p, sizeof p, "%s%s%s", path, *path ? "." : "", key);
            return fail(L, p, "unknown key \"%s\" in %s", key, *path ? path : "the table");
        }
    }
    return BM_OK;
}

static int get_int(struct ld *L, json_t *o, const char *path, const char *key, int required,
                   int lo, int hi, int *out)
{
    return bm_jf_int(&L->f, o, path, key, lo, hi, required ? BM_JF_REQUIRED : 0, out, NULL);
}

/* A figure: finite, >= 0, at most BM_MAX_FIGURE. */
static int get_num(struct ld *L, json_t *o, const char *path, const char *key, double *out)
{
    return bm_jf_num(&L->f, o, path, key, 0, 0, BM_MAX_FIGURE, out, NULL);
}

static int get_str(struct ld *L, json_t *o, const char *path, const char *key, const char **out)
{
    return bm_jf_str(&L->f, o, path, key, 0, 1, out);
}

static int get_strv(struct ld *L, json_t *o, const char *path, const char *key, char ***out, int *n)
{
    char p[512];
    snprintf(p, sizeof p, "%s%s%s", path, *path ? "." : "", key);
    json_t *v = json_object_get(o, key);
    *out = NULL;
    *n = 0;
    if (!v) return BM_OK;
    if (!json_is_array(v)) return fail(L, p, "\"%s\" must be an array of strings", key);
    size_t k = json_array_size(v);
    if (k == 0) return BM_OK;
    *out = bm_calloc(k, sizeof **out);
    if (!*out) return bm_err_set(L->f.err, "%s: out of memory", L->f.name);
    for (size_t i = 0; i < k; i++) {
        json_t *s = json_array_get(v, i);
        if (!json_is_string(s) || json_string_length(s) > BM_MAX_NAME_LEN) {
            char q[560];
            snprintf(q, sizeof q, "%s[%zu]", p, i);
            if (json_is_string(s))
                return fail(L, q, "a name in \"%s\" is %zu bytes long; the limit is %d", key,
                            json_string_length(s), BM_MAX_NAME_LEN);
            return fail(L, q, "\"%s\" must be an array of strings", key);
        }
        (*out)[i] = bm_strdup(json_string_value(s));
        if (!(*out)[i]) return bm_err_set(L->f.err, "%s: out of memory", L->f.name);
        (*n)++;
    }
    return BM_OK;
}

static int load_modules(struct ld *L, json_t *root, struct bm_table *t)
{
    static const char *const mkeys[] = {"name", "role", "consumes", "produces", "grad_to_backbone",
                                        "cost", "recompute", "trainable", NULL};
    const char *ckeys[64]; /* a module's cost: the knobs a table carries */
    int nc = 0;
    for (int i = 0; i < bm_n_knobs && nc < 63; i++)
        if (!strcmp(bm_knobs[i].section, "cost") && bm_knobs[i].json != BM_KNOB_NEVER) ckeys[nc++] = bm_knobs[i].key;
    ckeys[nc] = NULL;
    json_t *mods = json_object_get(root, "modules");
    if (!mods) return fail(L, "", "missing required field \"modules\"");
    if (!json_is_array(mods) || json_array_size(mods) == 0)
        return fail(L, "modules", "\"modules\" must be a non-empty array");
    if (json_array_size(mods) > 256) return fail(L, "modules", "more than 256 modules");
    int n = (int)json_array_size(mods);
    t->modules = bm_calloc((size_t)n, sizeof *t->modules);
    struct bm_costs *k = L->c;
    k->modules = bm_calloc((size_t)n, sizeof *k->modules);
    k->spread = bm_calloc((size_t)n, sizeof *k->spread);
    if (!t->modules || !k->modules || !k->spread) return bm_err_set(L->f.err, "%s: out of memory", L->f.name);
    for (int i = 0; i < n; i++) {
        char p[64];
        snprintf(p, sizeof p, "modules[%d]", i);
        json_t *mo = json_array_get(mods, (size_t)i);
        if (!json_is_object(mo)) return fail(L, p, "a module must be an object");
        if (check_keys(L, mo, p, mkeys)) return BM_ERR;
        struct bm_table_module *m = &t->modules[i];
        t->n_modules = k->n_modules = i + 1;
        struct bm_cost *mc = &k->modules[i];
        bm_knob_cost_defaults(mc); /* the spec's (knobs.h) */
        m->grad_to_backbone = 1;
        const char *name, *role;
        if (get_str(L, mo, p, "name", &name) || get_str(L, mo, p, "role", &role)) return BM_ERR;
        if (strlen(name) > BM_MAX_NAME_LEN) {
            char q[80];
            snprintf(q, sizeof q, "%s.name", p);
            return fail(L, q, "a module name is %zu bytes long; the limit is %d", strlen(name),
                        BM_MAX_NAME_LEN);
        }
        if (!(m->name = bm_strdup(name))) return bm_err_set(L->f.err, "%s: out of memory", L->f.name);
        for (int j = 0; j < i; j++)
            if (!strcmp(t->modules[j].name, name))
                return fail(L, p, "duplicate module name \"%s\"", name);
        if (bm_role_parse(role, &m->role)) {
            char q[80];
            snprintf(q, sizeof q, "%s.role", p);
            return fail(L, q, "unknown role \"%s\" (encoder, backbone, generator)", role);
        }
        if (m->role == BM_ROLE_BACKBONE) {
            if (t->backbone_module >= 0) return fail(L, p, "a second backbone module \"%s\"", name);
            t->backbone_module = i;
        }
        if (get_strv(L, mo, p, "consumes", &m->consumes, &m->n_consumes) ||
            get_strv(L, mo, p, "produces", &m->produces, &m->n_produces))
            return BM_ERR;
        json_t *g = json_object_get(mo, "grad_to_backbone");
        if (g) {
            if (!json_is_boolean(g)) {
                char q[80];
                snprintf(q, sizeof q, "%s.grad_to_backbone", p);
                return fail(L, q, "\"grad_to_backbone\" must be true or false");
            }
            m->grad_to_backbone = json_is_true(g);
        }
        json_t *tr = json_object_get(mo, "trainable");
        if (tr) {
            if (!json_is_boolean(tr)) {
                char q[80];
                snprintf(q, sizeof q, "%s.trainable", p);
                return fail(L, q, "\"trainable\" must be true or false");
            }
            m->frozen = !json_is_true(tr);
        }
        json_t *rc = json_object_get(mo, "recompute");
        if (rc) {
            const char *v = json_is_string(rc) ? json_string_value(rc) : "";
            if (strcmp(v, "none") && strcmp(v, "full")) {
                char q[80];
                snprintf(q, sizeof q, "%s.recompute", p);
                return fail(L, q, "\"recompute\" must be \"none\" or \"full\"");
            }
            m->recompute = !strcmp(v, "full");
        }
        json_t *c = json_object_get(mo, "cost");
        if (c) {
            char q[80];
            snprintf(q, sizeof q, "%s.cost", p);
            if (!json_is_object(c)) return fail(L, q, "\"cost\" must be an object");
            if (check_keys(L, c, q, ckeys)) return BM_ERR;
            for (int j = 0; j < bm_n_knobs; j++) { /* the figures, in the list's order */
                const struct bm_knob *kn = &bm_knobs[j];
                if (kn->home != BM_KNOB_COST || kn->json == BM_KNOB_NEVER || kn->json == BM_KNOB_BY_OWN_CODE) continue;
                if (get_num(L, c, q, kn->key, (double *)(void *)((char *)mc + kn->off))) return BM_ERR;
            }
            mc->param_mib = mc->state_mib / 4; /* absent: a quarter of the state */
            if (get_num(L, c, q, "param_mib", &mc->param_mib)) return BM_ERR;
            if (json_object_get(c, "spread")) {
                if (get_num(L, c, q, "spread", &k->spread[i])) return BM_ERR;
                if (!(k->spread[i] >= 0 && k->spread[i] <= 10)) {
                    char q2[96];
                    snprintf(q2, sizeof q2, "%s.spread", q);
                    return fail(L, q2, "\"spread\" must be a number in [0, 10]");
                }
            }
            if (mc->w_ms > 0 && mc->w_ms >= mc->bwd_ms) /* the spec's rule: a part of bwd_ms */
                return fail(L, q, "\"w_ms\" (%g) must be less than \"bwd_ms\" (%g): it is the weight-gradient part of the backward",
                            mc->w_ms, mc->bwd_ms);
            if (mc->act_w_mib > mc->act_mib)
                return fail(L, q, "\"act_w_mib\" (%g) is more than \"act_mib\" (%g): it is the part of the activation kept from B to W",
                            mc->act_w_mib, mc->act_mib);
        }
    }
    if (t->backbone_module < 0) return fail(L, "modules", "no module has role \"backbone\"");
    return BM_OK;
}

/* Array 'key' of n numbers in [0, BM_MAX_FIGURE] (integers when 'integral'), default dflt. */
static int load_doubles(struct ld *L, json_t *root, const char *key, int n, double dflt,
                        int integral, double **out)
{
    *out = bm_malloc((size_t)n * sizeof **out);
    if (!*out) return bm_err_set(L->f.err, "%s: out of memory", L->f.name);
    json_t *v = json_object_get(root, key);
    for (int i = 0; i < n; i++) (*out)[i] = dflt;
    if (!v) return BM_OK;
    if (!json_is_array(v) || (int)json_array_size(v) != n)
        return fail(L, key, "\"%s\" must be an array of %d numbers", key, n);
    for (int i = 0; i < n; i++) {
        json_t *x = json_array_get(v, (size_t)i);
        double xv = json_is_number(x) ? json_number_value(x) : -1;
        if (!(xv >= 0) || xv > BM_MAX_FIGURE || (integral && (xv != (double)(long long)xv || xv > 1e6))) {
            char p[64];
            snprintf(p, sizeof p, "%s[%d]", key, i);
            if (integral)
                return fail(L, p, "\"%s\" entries must be integers in 0..1000000", key);
            return fail(L, p, "\"%s\" entries must be numbers in 0..%g", key, BM_MAX_FIGURE);
        }
        (*out)[i] = json_number_value(x);
    }
    return BM_OK;
}

static int load_op(struct ld *L, json_t *o, const char *p, struct bm_table *t, struct bm_op *op)
{
    static const char *const ckeys[] = {"op", "module", "pass", "chunk", "mb", NULL};
    static const char *const mkeys[] = {"op", "peer", "tensor", "mb", NULL};
    const char *kind;
    if (!json_is_object(o)) return fail(L, p, "an op must be an object");
    if (get_str(L, o, p, "op", &kind)) return BM_ERR;
    *op = (struct bm_op){0, 0, -1, -1, 0, -1, -1};
    if (get_int(L, o, p, "mb", 1, 0, t->microbatches - 1, &op->mb)) return BM_ERR;
    char q[600];
    if (!strcmp(kind, "compute")) {
        const char *mod, *pass;
        if (check_keys(L, o, p, ckeys) || get_str(L, o, p, "module", &mod) ||
            get_str(L, o, p, "pass", &pass))
            return BM_ERR;
        op->kind = BM_OP_COMPUTE;
        op->module = (int16_t)bm_table_find_module(t, mod);
        snprintf(q, sizeof q, "%s.module", p);
        if (op->module < 0) return fail(L, q, "unknown module \"%s\"", mod);
        snprintf(q, sizeof q, "%s.pass", p);
        if (!strcmp(pass, "F")) op->pass = BM_PASS_F;
        else if (!strcmp(pass, "B")) op->pass = BM_PASS_B;
        else if (!strcmp(pass, "W")) op->pass = BM_PASS_W;
        else return fail(L, q, "unknown pass \"%s\" (F, B, W)", pass);
        int is_bb = op->module == t->backbone_module;
        if (is_bb) {
            if (get_int(L, o, p, "chunk", 1, 0, t->pp * t->vpp - 1, &op->chunk)) return BM_ERR;
        } else if (json_object_get(o, "chunk")) {
            snprintf(q, sizeof q, "%s.chunk", p);
            return fail(L, q, "\"chunk\" is only for backbone ops (module \"%s\" is not the backbone)", mod);
        }
        return BM_OK;
    }
    if (!strcmp(kind, "send") || !strcmp(kind, "recv")) {
        const char *tensor;
        if (check_keys(L, o, p, mkeys) || get_str(L, o, p, "tensor", &tensor) ||
            get_int(L, o, p, "peer", 1, 0, t->pp - 1, &op->peer))
            return BM_ERR;
        op->kind = kind[0] == 's' ? BM_OP_SEND : BM_OP_RECV;
        op->tensor = bm_table_find_tensor(t, tensor);
        snprintf(q, sizeof q, "%s.tensor", p);
        if (op->tensor < 0)
            return fail(L, q, "unknown tensor \"%s\" (no module produces it; tensors are module outputs, \"<backbone>.c<N>.out\" and \"grad:<tensor>\")", tensor);
        op->module = (int16_t)t->tensors[op->tensor].module;
        return BM_OK;
    }
    snprintf(q, sizeof q, "%s.op", p);
    return fail(L, q, "unknown op \"%s\" (compute, send, recv)", kind);
}

/* device.ranks_per_host and the inter-host link (see put_hosts); absent = one host. */
static int load_hosts(struct ld *L, json_t *d, struct bm_device *dev)
{
    for (int i = 0; i < bm_n_knobs; i++) {
        const struct bm_knob *kn = &bm_knobs[i];
        if (kn->home != BM_KNOB_DEVICE || kn->parse != BM_KNOB_HOSTS) continue;
        void *p = bm_knob_device_field(kn, dev);
        if (kn->integer ? get_int(L, d, "device", kn->key, 0, 0, (int)kn->hi, (int *)p)
                        : get_num(L, d, "device", kn->key, (double *)p))
            return BM_ERR;
    }
    if (dev->inter_host_gbytes_per_s > 0 && dev->inter_host_gbytes_per_s < 1e-6)
        return fail(L, "device.inter_host_gbytes_per_s",
                    "\"inter_host_gbytes_per_s\" must be 0 (no transfer cost) or >= 1e-06, got %g",
                    dev->inter_host_gbytes_per_s);
    return BM_OK;
}

/* ---------------------------------------------------------------- "ranks", streamed
 *
 * A big plan's table is hundreds of MB, nearly all of it ops, and as a jansson tree each op
 * costs about 900 bytes. So bm_table_parse gives jansson the table with its "ranks" array
 * emptied (the header: kilobytes) and reads the ranks here, from the text: an op in the
 * writer's form (plain strings, integers, each key once, any order) directly; any other op,
 * and every op the direct reading would refuse, through jansson one op at a time and load_op,
 * so the messages are those of the tree loader. Memory: the text, the header's tree and the
 * ops (20 bytes each, lists grown by doubling). */

enum { STREAM_SYNTAX = 2 }; /* stream_ranks: the text is not valid JSON (err says where) */

/* Bytes of a table text up to which a table that fails to load is read again as a tree, so its
 * message is exactly the tree loader's (jansson's words for a syntax error, reported before any
 * bad op); above it the streaming reader's own message stands. */
#define TREE_TEXT_MAX (64L << 20)

static const char *skip_ws(const char *p)
{
    while (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t') p++;
    return p;
}

/* The end of the JSON value at p (its depth is checked beforehand), or NULL when it ends early.
 * Finds the end only: the value's content is checked by whoever parses it. */
static const char *skip_value(const char *p)
{
    if (*p != '{' && *p != '[' && *p != '"') { /* a number or literal: up to a delimiter */
        const char *q = p;
        while (*q && !strchr(",]} \t\r\n", *q)) q++;
        return q > p ? q : NULL;
    }
    long depth = 0;
    do {
        char c = *p++;
        if (!c) return NULL;
        if (c == '"') {
            for (; *p != '"'; p++) {
                if (!*p) return NULL;
                if (*p == '\\' && p[1]) p++;
            }
            p++;
        } else if (c == '{' || c == '[') {
            depth++;
        } else if (c == '}' || c == ']') {
            depth--;
        }
    } while (depth > 0);
    return p;
}

static int syntax_at(struct ld *L, const char *at, const char *what)
{
    int line, col;
    bm_jpos_offset(L->f.text, (size_t)(at - L->f.text), &line, &col);
    bm_err_set(L->f.err, "%s:%d:%d: invalid JSON: %s", L->f.name, line, col, what);
    return STREAM_SYNTAX;
}

/* The value [a, b) of the text as a jansson value (*out, caller's), duplicate keys refused. */
static int parse_span(struct ld *L, const char *a, const char *b, json_t **out)
{
    size_t n = (size_t)(b - a);
    char *buf = bm_malloc(n + 1);
    if (!buf) return bm_err_set(L->f.err, "%s: out of memory", L->f.name);
    memcpy(buf, a, n);
    buf[n] = 0;
    struct bm_err e;
    *out = bm_json_parse(buf, L->f.name, 0, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &e);
    bm_free(buf);
    if (*out) return BM_OK;
    if (strstr(e.msg, "out of memory")) return bm_err_set(L->f.err, "%s", e.msg);
    const char *why = strstr(e.msg, "invalid JSON: ");
    return syntax_at(L, a, why ? why + 14 : e.msg);
}

/* A string without escapes or control characters at p (at its opening quote): [*s, *s + *n),
 * returns the byte after it, or NULL when it is not one. */
static const char *plain_str(const char *p, const char **s, size_t *n)
{
    const char *q = ++p;
    while (*q != '"') {
        if ((unsigned char)*q < 0x20 || *q == '\\') return NULL;
        q++;
    }
    *s = p;
    *n = (size_t)(q - p);
    return q + 1;
}

/* A decimal integer of at most 9 digits, no sign, fraction or exponent, ending at a delimiter. */
static const char *plain_int(const char *p, long *v)
{
    const char *q = p;
    long x = 0;
    while (*q >= '0' && *q <= '9' && q - p < 10) x = x * 10 + (*q++ - '0');
    if (q == p || q - p > 9 || (*p == '0' && q - p > 1) || !strchr(",} \t\r\n", *q) || !*q) return NULL;
    *v = x;
    return q;
}

static int span_is(const char *s, size_t n, const char *lit)
{
    return strlen(lit) == n && !memcmp(s, lit, n);
}

/* Rank r's op in the writer's form at *pp ('{'), read directly: 1 with *op set and *pp past
 * its '}', or 0 (nothing consumed) when the op must go through jansson and load_op: another
 * form, or anything load_op would refuse. */
static int fast_op(const struct bm_table *t, int r, const char **pp, struct bm_op *op)
{
    enum { K_OP = 1, K_MODULE = 2, K_PASS = 4, K_CHUNK = 8, K_MB = 16, K_PEER = 32, K_TENSOR = 64 };
    static const char *const names[] = {"op", "module", "pass", "chunk", "mb", "peer", "tensor"};
    const char *sv[7] = {0};
    size_t sn[7] = {0};
    long iv[7] = {0};
    int have = 0;
    const char *p = skip_ws(*pp + 1);
    for (;;) {
        const char *k;
        size_t kn;
        if (*p != '"' || !(p = plain_str(p, &k, &kn))) return 0;
        int j = 0;
        while (j < 7 && !span_is(k, kn, names[j])) j++;
        if (j == 7 || (have & (1 << j))) return 0;
        have |= 1 << j;
        p = skip_ws(p);
        if (*p != ':') return 0;
        p = skip_ws(p + 1);
        int is_str = j == 0 || j == 1 || j == 2 || j == 6;
        if (is_str ? *p != '"' || !(p = plain_str(p, &sv[j], &sn[j])) : !(p = plain_int(p, &iv[j]))) return 0;
        p = skip_ws(p);
        if (*p == '}') break;
        if (*p != ',') return 0;
        p = skip_ws(p + 1);
    }
    if (!(have & K_MB) || iv[4] >= t->microbatches || !(have & K_OP)) return 0;
    *op = (struct bm_op){0, 0, -1, -1, (int32_t)iv[4], -1, -1};
    char name[BM_MAX_NAME_LEN + 1];
    if (span_is(sv[0], sn[0], "compute")) {
        if ((have & (K_PEER | K_TENSOR)) || (have & (K_MODULE | K_PASS)) != (K_MODULE | K_PASS) ||
            sn[1] > BM_MAX_NAME_LEN || sn[2] != 1)
            return 0;
        memcpy(name, sv[1], sn[1]);
        name[sn[1]] = 0;
        int m = bm_table_find_module(t, name);
        const char *pass = strchr("FBW", sv[2][0]);
        if (m < 0 || !pass) return 0;
        op->kind = BM_OP_COMPUTE;
        op->module = (int16_t)m;
        op->pass = (uint8_t)(pass - "FBW"); /* BM_PASS_F, _B, _W */
        if (m == t->backbone_module) {
            if (!(have & K_CHUNK) || iv[3] >= (long)t->pp * t->vpp) return 0;
            op->chunk = (int32_t)iv[3];
        } else if (have & K_CHUNK) {
            return 0;
        }
    } else if (span_is(sv[0], sn[0], "send") || span_is(sv[0], sn[0], "recv")) {
        if ((have & (K_MODULE | K_PASS | K_CHUNK)) || (have & (K_PEER | K_TENSOR)) != (K_PEER | K_TENSOR) ||
            iv[5] >= t->pp || iv[5] == r || sn[6] > BM_MAX_NAME_LEN)
            return 0;
        memcpy(name, sv[6], sn[6]);
        name[sn[6]] = 0;
        int x = bm_table_find_tensor(t, name);
        if (x < 0) return 0;
        op->kind = sv[0][0] == 's' ? BM_OP_SEND : BM_OP_RECV;
        op->peer = (int32_t)iv[5];
        op->tensor = x;
        op->module = (int16_t)t->tensors[x].module;
    } else {
        return 0;
    }
    *pp = p + 1;
    return 1;
}

/* Rank r's "ops" array at *pp: every op pushed onto t. */
static int stream_ops(struct ld *L, struct bm_table *t, int r, const char **pp)
{
    const char *p = skip_ws(*pp + 1);
    if (*p == ']') {
        *pp = p + 1;
        return BM_OK;
    }
    for (size_t i = 0;; i++) {
        struct bm_op op;
        char op_path[96];
        snprintf(op_path, sizeof op_path, "ranks[%d].ops[%zu]", r, i);
        if (!(*p == '{' && fast_op(t, r, &p, &op))) {
            const char *e = skip_value(p);
            if (!e) return syntax_at(L, p, "an op ends early");
            json_t *v;
            int rc = parse_span(L, p, e, &v);
            if (rc) return rc;
            rc = load_op(L, v, op_path, t, &op);
            json_decref(v);
            if (rc) return BM_ERR;
            if (op.kind != BM_OP_COMPUTE && op.peer == r)
                return fail(L, op_path, "rank %d %ss to itself", r, op.kind == BM_OP_SEND ? "send" : "recv");
            p = e;
        }
        if (bm_table_push(t, r, op, L->f.err)) return BM_ERR;
        p = skip_ws(p);
        if (*p == ']') break;
        if (*p != ',') return syntax_at(L, p, "expected ',' or ']' after an op");
        p = skip_ws(p + 1);
    }
    *pp = p + 1;
    return BM_OK;
}

/* Rank r's object at *pp: {"rank": r, "ops": [...]} (keys in any order). */
static int stream_rank(struct ld *L, struct bm_table *t, int r, const char **pp)
{
    char p[64], q[80];
    snprintf(p, sizeof p, "ranks[%d]", r);
    snprintf(q, sizeof q, "%s.ops", p);
    const char *s = skip_ws(*pp + 1);
    int have_rank = 0, have_ops = 0;
    while (*s != '}') {
        const char *k, *e;
        size_t kn;
        if (*s != '"' || !(e = plain_str(s, &k, &kn))) return syntax_at(L, s, "expected a key (without escapes)");
        e = skip_ws(e);
        if (*e != ':') return syntax_at(L, e, "expected ':'");
        e = skip_ws(e + 1);
        if (span_is(k, kn, "ops") && !have_ops) {
            have_ops = 1;
            if (*e != '[') return fail(L, q, "\"ops\" must be an array");
            int rc = stream_ops(L, t, r, &e);
            if (rc) return rc;
        } else if (span_is(k, kn, "rank") && !have_rank) {
            have_rank = 1;
            const char *end = skip_value(e);
            if (!end) return syntax_at(L, e, "a value ends early");
            json_t *v, *o = json_object();
            if (!o) return bm_err_set(L->f.err, "%s: out of memory", L->f.name);
            int rc = parse_span(L, e, end, &v), rank = -1;
            if (!rc && json_object_set_new(o, "rank", v)) rc = bm_err_set(L->f.err, "%s: out of memory", L->f.name);
            if (!rc && get_int(L, o, p, "rank", 1, 0, t->pp - 1, &rank)) rc = BM_ERR;
            json_decref(o);
            if (rc) return rc;
            if (rank != r) {
                char q2[80];
                snprintf(q2, sizeof q2, "%s.rank", p);
                return fail(L, q2, "ranks must be listed in order: expected rank %d here, found %d", r, rank);
            }
            e = end;
        } else if (span_is(k, kn, "rank") || span_is(k, kn, "ops")) {
            return syntax_at(L, s, "duplicate object key");
        } else {
            char kp[600];
            snprintf(kp, sizeof kp, "%s.%.*s", p, (int)(kn < 500 ? kn : 500), k);
            return fail(L, kp, "unknown key \"%.*s\" in %s", (int)(kn < 500 ? kn : 500), k, p);
        }
        s = skip_ws(e);
        if (*s == '}') break;
        if (*s != ',') return syntax_at(L, s, "expected ',' or '}'");
        s = skip_ws(s + 1);
    }
    if (!have_rank) return fail(L, p, "missing required field \"rank\"");
    if (!have_ops) return fail(L, p, "\"ops\" must be an array");
    *pp = s + 1;
    return BM_OK;
}

/* The "ranks" array at L->ranks_at: t->pp rank objects, in order. */
static int stream_ranks(struct ld *L, struct bm_table *t)
{
    const char *p = skip_ws(L->ranks_at + 1);
    int r = 0;
    while (*p != ']') {
        if (r == t->pp) return fail(L, "ranks", "\"ranks\" must be an array of %d rank objects (pp = %d)", t->pp, t->pp);
        if (*p != '{') {
            char q[64];
            snprintf(q, sizeof q, "ranks[%d]", r);
            if (!skip_value(p)) return syntax_at(L, p, "a value ends early");
            return fail(L, q, "a rank must be an object");
        }
        int rc = stream_rank(L, t, r, &p);
        if (rc) return rc;
        r++;
        p = skip_ws(p);
        if (*p == ',') p = skip_ws(p + 1);
        else if (*p != ']') return syntax_at(L, p, "expected ',' or ']' after a rank");
        else break;
        if (*p == ']') return syntax_at(L, p, "expected a rank after ','");
    }
    if (r != t->pp) return fail(L, "ranks", "\"ranks\" must be an array of %d rank objects (pp = %d)", t->pp, t->pp);
    return BM_OK;
}

/* Where the top-level member "ranks" holds an array: [*a, *b) of text. 0 when found once; -1
 * when the text is not shaped so (no such member, not an array, the key twice, malformed: the
 * tree loader then says what is wrong). */
static int find_ranks(const char *text, const char **a, const char **b)
{
    const char *p = skip_ws(text);
    *a = *b = NULL;
    if (*p != '{') return -1;
    p = skip_ws(p + 1);
    while (*p == '"') {
        const char *k = p, *ke = skip_value(p), *e;
        if (!ke) return -1;
        p = skip_ws(ke);
        if (*p != ':') return -1;
        p = skip_ws(p + 1);
        e = skip_value(p);
        if (!e) return -1;
        if (ke - k == 7 && !memcmp(k, "\"ranks\"", 7)) {
            if (*a || *p != '[') return -1;
            *a = p;
            *b = e;
        }
        p = skip_ws(e);
        if (*p == '}') return *a ? 0 : -1;
        if (*p != ',') return -1;
        p = skip_ws(p + 1);
    }
    return -1;
}

/* text with the ranks array [a, b) emptied: "[" and "]" around its newlines (and the blanks of
 * its last line), so every line and (in ASCII) column of the rest stays where it was. */
static char *header_text(const char *text, const char *a, const char *b)
{
    size_t head = (size_t)(a - text), nl = 0, tail = 0;
    for (const char *q = a; q < b; q++) nl += *q == '\n';
    for (const char *q = b - 1; q > a && q[-1] != '\n'; q--) tail++;
    size_t rest = strlen(b);
    char *h = bm_malloc(head + 1 + nl + tail + 1 + rest + 1);
    if (!h) return NULL;
    char *o = h;
    memcpy(o, text, head), o += head;
    *o++ = '[';
    memset(o, '\n', nl), o += nl;
    if (nl) memset(o, ' ', tail), o += tail;
    memcpy(o, b - 1, rest + 2); /* "]", the rest and its NUL */
    return h;
}

static int load_root(struct ld *L, json_t *root, struct bm_table **out)
{
    static const char *const fixed[] = {"format", "version", "pp", "vpp", "microbatches", "unit",
                                        "window", "dp", "zero", "backbone", "policy", "warmup_extra", "device",
                                        "modules", "chunk_weights", "chunk_layers", "chunk_rank", "mb_scale",
                                        "rank_time_scale", "ranks", NULL};
    const char *keys[96], *dkeys[64]; /* the top level's and the device's: the knobs a table carries */
    int nk = 0, nd = 0;
    for (int i = 0; fixed[i]; i++) keys[nk++] = fixed[i];
    for (int i = 0; i < bm_n_knobs; i++) {
        const struct bm_knob *kn = &bm_knobs[i];
        if (strcmp(kn->section, "device") || kn->json == BM_KNOB_NEVER) continue;
        if (kn->home == BM_KNOB_OVERHEAD && nk < 95) keys[nk++] = kn->key;
        if (kn->home == BM_KNOB_DEVICE && nd < 63) dkeys[nd++] = kn->key;
    }
    keys[nk] = dkeys[nd] = NULL;
    if (!json_is_object(root)) return fail(L, "", "a table must be a JSON object");
    if (check_keys(L, root, "", keys)) return BM_ERR;
    const char *fmt, *bbs, *pols;
    int version = 0, pp = 0;
    if (get_str(L, root, "", "format", &fmt)) return BM_ERR;
    if (strcmp(fmt, BM_TABLE_FORMAT))
        return fail(L, "format", "\"format\" is \"%s\", expected \"" BM_TABLE_FORMAT "\"", fmt);
    if (get_int(L, root, "", "version", 1, BM_TABLE_VERSION, BM_TABLE_VERSION, &version) ||
        get_int(L, root, "", "pp", 1, 1, 4096, &pp))
        return BM_ERR;
    struct bm_table *t = bm_table_new(pp);
    if (!t) return bm_err_set(L->f.err, "%s: out of memory", L->f.name);
    *out = t;
    struct bm_costs *k = L->c;
    t->vpp = 1;
    if (get_int(L, root, "", "vpp", 0, 1, 64, &t->vpp) ||
        get_int(L, root, "", "microbatches", 1, 1, 1000000, &t->microbatches))
        return BM_ERR;
    if ((long)pp * t->vpp * t->microbatches > BM_MAX_BACKBONE_OPS)
        return fail(L, "microbatches",
                    "pp*vpp*microbatches = %d*%d*%d is more than the limit of %ld backbone ops "
                    "per pass (a guard against absurd input)",
                    pp, t->vpp, t->microbatches, BM_MAX_BACKBONE_OPS);
    t->unit = pp;
    if (get_int(L, root, "", "dp", 0, 1, 4096, &t->dp) || get_int(L, root, "", "zero", 0, 0, 1, &t->zero) ||
        get_int(L, root, "", "unit", 0, 1, 1000000, &t->unit) ||
        get_int(L, root, "", "window", 0, 0, 1000000, &t->window) ||
        get_str(L, root, "", "backbone", &bbs) || get_str(L, root, "", "policy", &pols))
        return BM_ERR;
    if ((long)t->window * ((t->unit + pp - 1) / pp) > 1000000L)
        return fail(L, "window", "window*ceil(unit/pp) = %d*%d is more than 1000000, the limit "
                    "on live microbatches per rank (a guard against absurd input)",
                    t->window, (t->unit + pp - 1) / pp);
    if (bm_backbone_parse(bbs, &t->backbone))
        return fail(L, "backbone", "unknown backbone schedule \"%s\" (gpipe, 1f1b, interleaved, zb-h1, zb-interleaved, zb-v, dualpipe-v)", bbs);
    if (bm_policy_parse(pols, &t->policy))
        return fail(L, "policy", "unknown policy \"%s\"", pols);
    bm_knob_device_defaults(&k->device);
    json_t *d = json_object_get(root, "device");
    if (d) {
        if (!json_is_object(d)) return fail(L, "device", "\"device\" must be an object");
        if (check_keys(L, d, "device", dkeys)) return BM_ERR;
        int hosts_read = 0;
        for (int i = 0; i < bm_n_knobs; i++) { /* in the list's order; the hosts' together */
            const struct bm_knob *kn = &bm_knobs[i];
            if (kn->home != BM_KNOB_DEVICE || kn->json == BM_KNOB_NEVER || strcmp(kn->section, "device")) continue;
            if (kn->parse == BM_KNOB_HOSTS) {
                if (!hosts_read++ && load_hosts(L, d, &k->device)) return BM_ERR;
                continue;
            }
            if (get_num(L, d, "device", kn->key, (double *)bm_knob_device_field(kn, &k->device))) return BM_ERR;
        }
        if (k->device.link_gbytes_per_s > 0 && k->device.link_gbytes_per_s < 1e-6)
            return fail(L, "device.link_gbytes_per_s",
                        "\"link_gbytes_per_s\" must be 0 (no transfer cost) or >= 1e-06, got %g",
                        k->device.link_gbytes_per_s);
    }
    t->ranks_per_host = k->device.ranks_per_host; /* the placement is the table's */
    if (load_modules(L, root, t)) return BM_ERR;
    if (json_object_get(root, "warmup_extra")) {
        if (get_int(L, root, "", "warmup_extra", 0, 0, 1000000, &t->warmup_extra)) return BM_ERR;
    } else if ((t->warmup_extra = bm_table_default_warmup(t)) < 0) {
        return bm_err_set(L->f.err, "%s: out of memory", L->f.name);
    }
    int C = t->pp * t->vpp;
    if (load_doubles(L, root, "chunk_weights", C, 1.0 / C, 0, &k->chunk_weights) ||
        load_doubles(L, root, "mb_scale", t->microbatches, 1.0, 0, &k->mb_scale))
        return BM_ERR;
    for (int n = 0; n < bm_n_knobs; n++) {
        if (bm_knobs[n].home != BM_KNOB_OVERHEAD || bm_knobs[n].json == BM_KNOB_NEVER) continue;
        const char *key = bm_knobs[n].key;
        json_t *j = json_object_get(root, key);
        if (!j) continue;
        double v = json_is_number(j) ? json_number_value(j) : -1;
        if (!(v >= 0) || v > 1e12) return fail(L, key, "\"%s\" must be a number >= 0", key);
        *(double *)(void *)((char *)L->c + bm_knobs[n].costs_off) = v / 1000.0;
    }
    if (json_object_get(root, "rank_time_scale")) {
        if (load_doubles(L, root, "rank_time_scale", t->pp, 1.0, 0, &k->rank_time_scale)) return BM_ERR;
        for (int r = 0; r < t->pp; r++)
            if (!(k->rank_time_scale[r] > 0)) {
                char p[64];
                snprintf(p, sizeof p, "rank_time_scale[%d]", r);
                return fail(L, p, "\"rank_time_scale\" entries must be > 0");
            }
    }
    json_t *cl = json_object_get(root, "chunk_layers");
    if (cl) {
        double *tmp;
        if (load_doubles(L, root, "chunk_layers", C, 0, 1, &tmp)) {
            bm_free(tmp);
            return BM_ERR;
        }
        t->chunk_layers = bm_malloc((size_t)C * sizeof(int));
        if (!t->chunk_layers) {
            bm_free(tmp);
            return bm_err_set(L->f.err, "%s: out of memory", L->f.name);
        }
        for (int c = 0; c < C; c++) t->chunk_layers[c] = (int)tmp[c];
        bm_free(tmp);
    }
    if (json_object_get(root, "chunk_rank")) {
        double *tmp;
        if (load_doubles(L, root, "chunk_rank", C, 0, 1, &tmp)) {
            bm_free(tmp);
            return BM_ERR;
        }
        if (!(t->chunk_rank = bm_malloc((size_t)C * sizeof(int)))) {
            bm_free(tmp);
            return bm_err_set(L->f.err, "%s: out of memory", L->f.name);
        }
        for (int c = 0; c < C; c++) {
            if (tmp[c] >= pp) {
                char p[64];
                snprintf(p, sizeof p, "chunk_rank[%d]", c);
                bm_free(tmp);
                return fail(L, p, "\"chunk_rank\" entries are ranks 0..%d", pp - 1);
            }
            t->chunk_rank[c] = (int)tmp[c];
        }
        bm_free(tmp);
    }
    if (bm_table_finish(t, L->f.err)) return BM_ERR;
    if (L->ranks_at) return stream_ranks(L, t);

    json_t *ranks = json_object_get(root, "ranks");
    if (!ranks) return fail(L, "", "missing required field \"ranks\"");
    if (!json_is_array(ranks) || (int)json_array_size(ranks) != pp)
        return fail(L, "ranks", "\"ranks\" must be an array of %d rank objects (pp = %d)", pp, pp);
    for (int r = 0; r < pp; r++) {
        static const char *const rkeys[] = {"rank", "ops", NULL};
        char p[64];
        snprintf(p, sizeof p, "ranks[%d]", r);
        json_t *ro = json_array_get(ranks, (size_t)r);
        if (!json_is_object(ro)) return fail(L, p, "a rank must be an object");
        int rank = -1;
        if (check_keys(L, ro, p, rkeys) || get_int(L, ro, p, "rank", 1, 0, pp - 1, &rank))
            return BM_ERR;
        if (rank != r) {
            char q[80];
            snprintf(q, sizeof q, "%s.rank", p);
            return fail(L, q, "ranks must be listed in order: expected rank %d here, found %d", r, rank);
        }
        json_t *ops = json_object_get(ro, "ops");
        char q[80];
        snprintf(q, sizeof q, "%s.ops", p);
        if (!ops || !json_is_array(ops)) return fail(L, ops ? q : p, "\"ops\" must be an array");
        size_t n = json_array_size(ops);
        for (size_t i = 0; i < n; i++) {
            char op_path[96];
            snprintf(op_path, sizeof op_path, "%s.ops[%zu]", p, i);
            struct bm_op op;
            if (load_op(L, json_array_get(ops, i), op_path, t, &op)) return BM_ERR;
            if (op.kind != BM_OP_COMPUTE && op.peer == r)
                return fail(L, op_path, "rank %d %ss to itself", r, op.kind == BM_OP_SEND ? "send" : "recv");
            if (bm_table_push(t, r, op, L->f.err)) return BM_ERR;
        }
    }
    return BM_OK;
}

int bm_table_parse(const char *text, const char *name, struct bm_table **out, struct bm_costs **costs,
                   struct bm_err *err)
{
    *out = NULL;
    if (costs) *costs = NULL;
    size_t len = strlen(text);
    if (len > (size_t)BM_MAX_TABLE_TEXT)
        return bm_err_set(err, "%s: the table is %zu bytes; a table may be at most %ld MiB", name,
                          len, BM_MAX_TABLE_TEXT >> 20);
    struct ld L = {.f = {.name = name, .text = text, .err = err, .table = 1}};
    const char *a, *b;
    int line, col;
    if (bm_jpos_depth(text, 64, &line, &col))
        return bm_err_set(err, "%s:%d:%d: JSON nested deeper than 64 levels (a guard against absurd input)",
                          name, line, col);
    char *head = NULL;
    if (!find_ranks(text, &a, &b)) { /* the usual shape: stream the ranks */
        if (!(head = header_text(text, a, b))) return bm_err_set(err, "%s: out of memory", name);
        L.ranks_at = a;
    }
    if (!(L.c = bm_calloc(1, sizeof(struct bm_costs)))) { /* the costs the file carries */
        bm_free(head);
        return bm_err_set(err, "%s: out of memory", name);
    }
    json_t *root = bm_json_parse(head ? head : text, name, 64, JSON_REJECT_DUPLICATES, err);
    bm_free(head);
    struct bm_table *t = NULL;
    int rc = BM_ERR;
    if (root) {
        rc = load_root(&L, root, &t);
        json_decref(root);
    }
    if (rc && L.ranks_at && len <= (size_t)TREE_TEXT_MAX && err && !strstr(err->msg, "out of memory")) {
        /* a table of usual size that fails: the tree loader's verdict, so its message is the one
         * it always was (a syntax error after the first bad op is named first, in jansson's words) */
        bm_table_free(t);
        t = NULL;
        bm_costs_free(L.c);
        L.ranks_at = NULL;
        if (!(L.c = bm_calloc(1, sizeof(struct bm_costs)))) return bm_err_set(err, "%s: out of memory", name);
        if (!(root = bm_json_parse(text, name, 64, JSON_REJECT_DUPLICATES, err))) {
            bm_costs_free(L.c);
            return BM_ERR;
        }
        rc = load_root(&L, root, &t);
        json_decref(root);
    }
    if (rc) {
        bm_table_free(t);
        bm_costs_free(L.c);
        return BM_ERR;
    }
    *out = t;
    if (costs) *costs = L.c;
    else bm_costs_free(L.c);
    return BM_OK;
}

int bm_table_load(const char *path, struct bm_table **out, struct bm_costs **costs, struct bm_err *err)
{
    *out = NULL;
    if (costs) *costs = NULL;
    struct stat st;
    if (stat(path, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > BM_MAX_TABLE_TEXT)
        return bm_err_set(err, "%s: the file is %lld bytes; a table may be at most %ld MiB", path,
                          (long long)st.st_size, BM_MAX_TABLE_TEXT >> 20);
    char *text = bm_read_file_max(path, (size_t)BM_MAX_TABLE_TEXT, NULL, err);
    if (!text) return BM_ERR;
    int rc = bm_table_parse(text, path, out, costs, err);
    bm_free(text);
    return rc;
}
