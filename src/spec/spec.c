/* spec.c — load and check a model spec (docs/design.md §3; the reference is docs/spec.md).
 *
 * Parsing is jansson (routed through bm_malloc so fault injection reaches it); positions of
 * everything jansson does not locate come from bm_jpos_find on the raw text. Every failure is
 * one message "name:line:col: what\nhint: how to fix" and a clean unwind (goto-free: the
 * partially filled spec is released by bm_spec_free, which accepts any prefix of a fill). */
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <jansson.h>

#include "spec/jfield.h"
#include "spec/jpos.h"
#include "spec/knobs.h"
#include "util/util.h"

/* ---------------------------------------------------------------- limits against absurd input */

#define MAX_PP       4096
#define MAX_VPP      64
#define MAX_MB       1000000
#define MAX_MODULES  256
#define MAX_NAME     200       /* bytes in a module, tensor or spec name */
#define MAX_DEPTH    64        /* JSON nesting */
#define MAX_LIST     256       /* entries of "inputs", "consumes", "produces" */
#define MAX_COUNT    1000000   /* any other count (unit, window, layers, samples, ...) */
#define MAX_DIM      (1 << 30) /* arch integer dimensions */
#define MAX_STEPS    1000000000
#define MAX_TEXT     (8L << 20)  /* bytes of spec text */
#define MAX_MS       1e9       /* any duration in ms (11.6 days): sums over a plan stay finite */
#define MAX_MIB      1e12      /* any memory size in MiB (1 EiB) */
#define MAX_RATE     1e9       /* memory_gib, peak_tflops, link_gbytes_per_s */
#define MIN_LINK     1e-6      /* link_gbytes_per_s: slower links make transfer times overflow */
#define MAX_SCALE    1e6       /* encoder cost multipliers */
#define MAX_LR       10        /* train.lr: AdamW moves a parameter by about lr per step */
#define MAX_WEIGHT_DECAY 100   /* train.weight_decay */
#define MAX_EPS      1         /* train.eps */

#define PATH_N 1024

/* ---------------------------------------------------------------- key sets */

static const char *const top_keys[] = {"format", "version", "name", "doc", "device", "parallel",
                                       "schedule", "inputs", "modules", "data", "train", NULL};
static const char *const parallel_keys[] = {"pp", "vpp", "microbatches", "unit", "dp", NULL};
static const char *const schedule_keys[] = {"backbone", "policy", "window", NULL};
static const char *const module_keys[] = {"name", "role", "consumes", "produces", "layers", "cost",
                                          "grad_to_backbone", "impl", "arch", "doc", "recompute", "trainable", NULL};
static const char *const recompute_names[] = {"none", "full", NULL};
static const char *const arch_keys[] = {"params", "layers", "hidden", "heads", "ffn", "vocab", "seq",
                                        "tokens", "image", "patch", "channels", "cond", NULL};
static const char *const data_keys[] = {"encoder_cost_scale", "seed", "samples_per_microbatch",
                                        "max_images", NULL};
static const char *const scale_keys[] = {"dist", "min", "max", "sigma", "seed", "values", NULL};
static const char *const train_keys[] = {"steps", "lr", "weight_decay", "beta1", "beta2", "eps",
                                         "seed", "zero", NULL};
static const char *const role_names[] = {"encoder", "backbone", "generator", NULL};
static const char *const backbone_names[] = {"gpipe", "1f1b", "interleaved", "zb-h1", "zb-interleaved",
                                             "zb-v", "dualpipe-v", NULL};
static const char *const policy_names[] = {"bigmac", "optimus", "unified", "unified-balanced",
                                           "ideal", "none", NULL};
static const char *const dist_names[] = {"none", "uniform", "lognormal", NULL};

/* ---------------------------------------------------------------- context and messages */

struct ctx {
    struct bm_jfield f;   /* name, text, err, subject and strip of the messages (jfield.h) */
    struct bm_spec *s;
    json_t *modules;      /* the "modules" array (alive while checking the graph) */
};

/* "name:line:col: <message>" with the position of 'path'. Returns BM_ERR. */
static int fail(struct ctx *c, const char *path, const char *fmt, ...)
#ifdef __GNUC__
    __attribute__((format(printf, 3, 4)))
#endif
    ;
static int fail(struct ctx *c, const char *path, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = bm_jf_vfail(&c->f, path, fmt, ap);
    va_end(ap);
    return rc;
}

static int oom(struct ctx *c)
{
    return bm_err_set(c->f.err, "%s: out of memory while loading the spec", c->f.name);
}

/* How a field is named in messages: "parallel.pp", or "module \"vit\": cost.fwd_ms". */
static const char *field(struct ctx *c, const char *path, char *buf, size_t n)
{
    return bm_jf_field(&c->f, path, buf, n);
}

/* path + "." + key (or ["key"]) into out. */
static void join(char *out, const char *parent, const char *key)
{
    bm_jf_join(out, parent, key);
}

static void join_index(char *out, const char *parent, long i)
{
    snprintf(out, PATH_N, "%s", parent);
    (void)bm_jpos_index(out, PATH_N, i);
}

/* ---------------------------------------------------------------- suggestions */

/* Optimal-string-alignment distance, case-insensitive; large when lengths are far apart. */
static int edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 64 || lb > 64 || (la > lb ? la - lb : lb - la) > 3) return 99;
    int d[65][65];
    for (size_t i = 0; i <= la; i++) d[i][0] = (int)i;
    for (size_t j = 0; j <= lb; j++) d[0][j] = (int)j;
    for (size_t i = 1; i <= la; i++) {
        for (size_t j = 1; j <= lb; j++) {
            int ca = a[i - 1], cb = b[j - 1];
            if (ca >= 'A' && ca <= 'Z') ca += 'a' - 'A';
            if (cb >= 'A' && cb <= 'Z') cb += 'a' - 'A';
            int cost = ca != cb;
            int v = BM_MIN(d[i - 1][j] + 1, d[i][j - 1] + 1);
            v = BM_MIN(v, d[i - 1][j - 1] + cost);
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
                v = BM_MIN(v, d[i - 2][j - 2] + 1);
            d[i][j] = v;
        }
    }
    return d[la][lb];
}

/* The closest of names to 'got' when it is close enough to be a typo, else NULL. */
static const char *suggest(const char *got, const char *const *names)
{
    const char *best = NULL;
    int bd = 99;
    for (int i = 0; names[i]; i++) {
        int d = edit_distance(got, names[i]);
        size_t len = strlen(names[i]);
        int limit = len <= 4 ? 1 : len <= 8 ? 2 : 3;
        if (d <= limit && d < bd) {
            bd = d;
            best = names[i];
        }
    }
    return best;
}

/* '"a", "b", "c"' */
static const char *list_names(const char *const *names, char *buf, size_t n)
{
    size_t o = 0;
    buf[0] = 0;
    for (int i = 0; names[i] && o < n; i++)
        o += (size_t)snprintf(buf + o, n - o, "%s\"%s\"", i ? ", " : "", names[i]);
    return buf;
}

/* "\nhint: did you mean \"x\"?" or "\nhint: <what> is one of ..." */
static const char *hint_for(const char *got, const char *const *names, const char *what, char *buf,
                            size_t n)
{
    const char *s = suggest(got, names);
    char all[512];
    if (s)
        snprintf(buf, n, "\nhint: did you mean \"%s\"?", s);
    else
        snprintf(buf, n, "\nhint: %s: %s", what, list_names(names, all, sizeof all));
    return buf;
}

/* ---------------------------------------------------------------- typed getters */

static int check_keys(struct ctx *c, json_t *obj, const char *path, const char *where,
                      const char *const *allowed)
{
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v) {
        int ok = 0;
        for (int i = 0; allowed[i] && !ok; i++) ok = !strcmp(key, allowed[i]);
        if (ok) continue;
        char p[PATH_N], e[256], h[700];
        join(p, path, key);
        char what[300];
        snprintf(what, sizeof what, "%s accepts", where);
        return fail(c, p, "unknown key \"%s\" in %s%s", bm_jf_esc(key, e, sizeof e), where,
                    hint_for(key, allowed, what, h, sizeof h));
    }
    return BM_OK;
}

/* Member 'key' of obj, which must be an object when present. *out NULL when absent. */
static int get_object(struct ctx *c, json_t *obj, const char *parent, const char *key, json_t **out)
{
    json_t *v = json_object_get(obj, key);
    *out = NULL;
    if (!v) return BM_OK;
    if (!json_is_object(v)) {
        char p[PATH_N], f[PATH_N], d[300];
        join(p, parent, key);
        return fail(c, p, "%s must be an object, got %s", field(c, p, f, sizeof f),
                    bm_jf_describe(v, d, sizeof d));
    }
    *out = v;
    return BM_OK;
}

static int get_int(struct ctx *c, json_t *obj, const char *parent, const char *key, long long lo,
                   long long hi, int allow_auto, int *out, int *given);

/* schedule.window: an integer >= 1, "auto" (0: the smallest deadlock-free window) or "fit"
 * (BM_WINDOW_FIT: the fastest window whose peak memory fits the device). */
static int get_window(struct ctx *c, json_t *obj, const char *parent, int *out)
{
    json_t *v = json_object_get(obj, "window");
    if (v && json_is_string(v) && !strcmp(json_string_value(v), "fit")) {
        *out = BM_WINDOW_FIT;
        return BM_OK;
    }
    return get_int(c, obj, parent, "window", 1, MAX_COUNT, 1, out, NULL);
}

/* Integer member in [lo, hi]; "auto" (-> 0) when allow_auto. Unchanged when absent. */
static int get_int(struct ctx *c, json_t *obj, const char *parent, const char *key, long long lo,
                   long long hi, int allow_auto, int *out, int *given)
{
    return bm_jf_int(&c->f, obj, parent, key, lo, hi, allow_auto ? BM_JF_AUTO : 0, out, given);
}

static int get_u64(struct ctx *c, json_t *obj, const char *parent, const char *key, uint64_t *out)
{
    json_t *v = json_object_get(obj, key);
    if (!v) return BM_OK;
    char p[PATH_N], f[PATH_N], d[300];
    join(p, parent, key);
    long long x;
    if (!bm_json_whole(v, &x) || x < 0)
        return fail(c, p, "%s must be an integer >= 0, got %s", field(c, p, f, sizeof f),
                    bm_jf_describe(v, d, sizeof d));
    *out = (uint64_t)x;
    return BM_OK;
}

enum { GT = 1, GE = 0 };  /* lower-bound kinds for get_num */

/* Finite number member with x > lo (GT) or x >= lo (GE), and x <= hi. Unchanged when absent. */
static int get_num(struct ctx *c, json_t *obj, const char *parent, const char *key, double lo,
                   int kind, double hi, double *out, int *given)
{
    return bm_jf_num(&c->f, obj, parent, key, lo, kind == GT, hi, out, given);
}

/* Knob k (knobs.h) of the object obj at parent, with its limits, into its field of base (the
 * struct its home names). Unchanged when absent. */
static int get_knob(struct ctx *c, json_t *obj, const char *parent, const struct bm_knob *k, void *base,
                    int *given)
{
    void *p = (char *)base + k->off;
    if (k->integer)
        return get_int(c, obj, parent, k->key, (long long)k->lo, (long long)k->hi, 0, (int *)p, given);
    return get_num(c, obj, parent, k->key, k->lo, k->lo_open ? GT : GE, k->hi, (double *)p, given);
}

static int get_bool(struct ctx *c, json_t *obj, const char *parent, const char *key, int *out)
{
    json_t *v = json_object_get(obj, key);
    if (!v) return BM_OK;
    if (!json_is_boolean(v)) {
        char p[PATH_N], f[PATH_N], d[300];
        join(p, parent, key);
        return fail(c, p, "%s must be true or false, got %s", field(c, p, f, sizeof f),
                    bm_jf_describe(v, d, sizeof d));
    }
    *out = json_is_true(v);
    return BM_OK;
}

/* String member; when maxlen > 0 it must be 1..maxlen bytes. *sv (borrowed) NULL when absent. */
static int get_str(struct ctx *c, json_t *obj, const char *parent, const char *key, size_t maxlen,
                   const char **sv)
{
    return bm_jf_str(&c->f, obj, parent, key, maxlen, 0, sv);
}

/* Same, copied (bm_strdup) into *out (left unchanged when absent). */
static int get_strdup(struct ctx *c, json_t *obj, const char *parent, const char *key,
                      size_t maxlen, char **out)
{
    const char *sv;
    if (get_str(c, obj, parent, key, maxlen, &sv)) return BM_ERR;
    if (!sv) return BM_OK;
    char *d = bm_strdup(sv);
    if (!d) return oom(c);
    bm_free(*out);
    *out = d;
    return BM_OK;
}

/* One of names (index into *out) with a did-you-mean hint. */
static int get_enum(struct ctx *c, json_t *obj, const char *parent, const char *key,
                    const char *const *names, int *out)
{
    const char *sv;
    if (get_str(c, obj, parent, key, 0, &sv)) return BM_ERR;
    if (!sv) return BM_OK;
    for (int i = 0; names[i]; i++)
        if (!strcmp(sv, names[i])) {
            *out = i;
            return BM_OK;
        }
    char p[PATH_N], f[PATH_N], e[256], h[700], all[512];
    join(p, parent, key);
    field(c, p, f, sizeof f);
    return fail(c, p, "%s must be one of %s, got \"%s\"%s", f, list_names(names, all, sizeof all),
                bm_jf_esc(sv, e, sizeof e), hint_for(sv, names, "valid values are", h, sizeof h));
}

/* Array of distinct names (1..MAX_NAME bytes, at most MAX_LIST). */
static int get_names(struct ctx *c, json_t *obj, const char *parent, const char *key, char ***out,
                     int *n)
{
    json_t *v = json_object_get(obj, key);
    if (!v) return BM_OK;
    char p[PATH_N], f[PATH_N], d[300], e[256];
    join(p, parent, key);
    field(c, p, f, sizeof f);
    if (!json_is_array(v))
        return fail(c, p, "%s must be an array of names, got %s", f, bm_jf_describe(v, d, sizeof d));
    size_t len = json_array_size(v);
    if (len > MAX_LIST) {
        char q[PATH_N];
        join_index(q, p, MAX_LIST);
        return fail(c, q, "%s has %zu entries; the limit is %d", f, len, MAX_LIST);
    }
    *out = bm_calloc(len ? len : 1, sizeof **out);
    if (!*out) return oom(c);
    for (size_t i = 0; i < len; i++) {
        json_t *x = json_array_get(v, i);
        char q[PATH_N], g[PATH_N];
        join_index(q, p, (long)i);
        field(c, q, g, sizeof g);
        if (!json_is_string(x))
            return fail(c, q, "%s must be a string, got %s", g, bm_jf_describe(x, d, sizeof d));
        const char *sv = json_string_value(x);
        size_t sl = json_string_length(x);
        if (sl == 0) return fail(c, q, "%s must not be empty", g);
        if (sl > MAX_NAME) return fail(c, q, "%s is %zu bytes long; the limit is %d", g, sl, MAX_NAME);
        for (int j = 0; j < *n; j++)
            if (!strcmp((*out)[j], sv))
                return fail(c, q, "%s lists \"%s\" twice", f, bm_jf_esc(sv, e, sizeof e));
        (*out)[*n] = bm_strdup(sv);
        if (!(*out)[*n]) return oom(c);
        (*n)++;
    }
    return BM_OK;
}

/* ---------------------------------------------------------------- sections */

/* A list of multipliers at key p (v): a non-empty array ("what" says of what) of at most limit
 * numbers, each in (0, max], into a new *out[*n]. Keys of parent listed in exclude (NULL-ended,
 * may be NULL) may not stand beside it. */
static int parse_scale_list(struct ctx *c, json_t *v, const char *p, const char *what, size_t limit,
                            const char *limit_note, double max, json_t *parent, const char *const *exclude,
                            double **out, int *n_out)
{
    char d[300];
    size_t n = json_array_size(v);
    if (!json_is_array(v) || n == 0)
        return fail(c, p, "%s must be a non-empty array of numbers (%s), got %s", p, what, bm_jf_describe(v, d, sizeof d));
    if (n > limit) return fail(c, p, "%s has %zu entries; the limit is %zu%s", p, n, limit, limit_note);
    for (int k = 0; exclude && exclude[k]; k++)
        if (json_object_get(parent, exclude[k]))
            return fail(c, p, "data.encoder_cost_scale: \"values\" and \"%s\" exclude each other"
                              "\nhint: give either the list of multipliers or a distribution to draw them from",
                        exclude[k]);
    if (!(*out = bm_malloc(n * sizeof(double)))) return oom(c);
    *n_out = (int)n;
    for (size_t i = 0; i < n; i++) {
        json_t *x = json_array_get(v, i);
        char q[PATH_N];
        join_index(q, p, (long)i);
        double xv = json_is_number(x) ? json_number_value(x) : NAN;
        if (!(xv > 0) || xv > max)
            return fail(c, q, "%s[%zu] must be a number in (0, %g], got %s", p, i, max, bm_jf_describe(x, d, sizeof d));
        (*out)[i] = xv;
    }
    return BM_OK;
}

/* data.encoder_cost_scale.values: explicit per-microbatch multipliers, each in (0, MAX_SCALE],
 * at most MAX_COUNT of them; excludes dist/min/max/sigma (those describe a drawn list). */
static int parse_scale_values(struct ctx *c, json_t *sc, struct bm_data *d)
{
    json_t *v = json_object_get(sc, "values");
    if (!v) return BM_OK;
    static const char *const other[] = {"dist", "min", "max", "sigma", NULL};
    return parse_scale_list(c, v, "data.encoder_cost_scale.values", "one per microbatch, cycled", MAX_COUNT, "",
                            MAX_SCALE, sc, other, &d->encoder_cost_values, &d->n_encoder_cost_values);
}

/* device.rank_time_scale: one multiplier per pipeline rank, each in (0, MAX_RANK_SCALE]. */
#define MAX_RANK_SCALE 1000
static int parse_rank_time_scale(struct ctx *c, json_t *o)
{
    json_t *v = json_object_get(o, "rank_time_scale");
    if (!v) return BM_OK;
    return parse_scale_list(c, v, "device.rank_time_scale", "one per pipeline rank", MAX_PP, " (pp)", MAX_RANK_SCALE,
                            o, NULL, &c->s->rank_time_scale, &c->s->n_rank_time_scale);
}

/* device.ranks_per_host and the link between hosts (docs/multihost.md). The inter-host keys
 * describe a link that only a placement over hosts uses: without ranks_per_host they are refused
 * rather than silently ignored. */
static int parse_hosts(struct ctx *c, json_t *o)
{
    struct bm_device *d = &c->s->device;
    const char *P = "device";
    int rph = 0, bw = 0, lat = 0;
    if (get_knob(c, o, P, bm_knob_find(P, "ranks_per_host"), d, &rph) ||
        get_knob(c, o, P, bm_knob_find(P, "inter_host_gbytes_per_s"), d, &bw) ||
        get_knob(c, o, P, bm_knob_find(P, "inter_host_latency_us"), d, &lat))
        return BM_ERR;
    if (!rph && (bw || lat)) {
        const char *k = bw ? "inter_host_gbytes_per_s" : "inter_host_latency_us";
        char q[PATH_N];
        join(q, P, k);
        return fail(c, q, "device.%s describes the link between hosts, but device.ranks_per_host is not "
                          "given (every rank on one host)\nhint: add \"ranks_per_host\": N, the pipeline ranks "
                          "that share a host", k);
    }
    return BM_OK;
}

static int parse_device(struct ctx *c, json_t *root)
{
    json_t *o;
    struct bm_device *d = &c->s->device;
    if (get_object(c, root, "", "device", &o)) return BM_ERR;
    if (!o) return BM_OK;
    const char *P = "device";
    const char *keys[64];
    bm_knob_keys("device", keys, 64);
    if (check_keys(c, o, P, "\"device\"", keys)) return BM_ERR;
    for (int i = 0; i < bm_n_knobs; i++) { /* the plain ones, in the list's order */
        const struct bm_knob *k = &bm_knobs[i];
        if (strcmp(k->section, "device") || k->parse != BM_KNOB_PLAIN) continue;
        if (get_knob(c, o, P, k, k->home == BM_KNOB_OVERHEAD ? (void *)c->s : (void *)d, NULL)) return BM_ERR;
    }
    if (d->link_gbytes_per_s < MIN_LINK)
        return fail(c, "device.link_gbytes_per_s",
                    "device.link_gbytes_per_s must be >= %g (transfer times would overflow), got %g",
                    MIN_LINK, d->link_gbytes_per_s);
    if (parse_rank_time_scale(c, o)) return BM_ERR;
    return parse_hosts(c, o);
}

static int parse_parallel_schedule(struct ctx *c, json_t *root)
{
    struct bm_spec *s = c->s;
    json_t *o;
    int mb_given = 0;
    if (get_object(c, root, "", "parallel", &o)) return BM_ERR;
    if (o) {
        const char *P = "parallel";
        if (check_keys(c, o, P, "\"parallel\"", parallel_keys) ||
            get_int(c, o, P, "pp", 1, MAX_PP, 0, &s->pp, NULL) ||
            get_int(c, o, P, "vpp", 1, MAX_VPP, 0, &s->vpp, NULL) ||
            get_int(c, o, P, "microbatches", 1, MAX_MB, 0, &s->microbatches, &mb_given) ||
            get_int(c, o, P, "unit", 1, MAX_COUNT, 1, &s->unit, NULL) ||
            get_int(c, o, P, "dp", 1, MAX_PP, 0, &s->dp, NULL))
            return BM_ERR;
    }
    if (!mb_given) s->microbatches = s->pp;

    if (get_object(c, root, "", "schedule", &o)) return BM_ERR;
    if (o) {
        const char *P = "schedule";
        int bb = (int)s->backbone, pol = (int)s->policy;
        if (check_keys(c, o, P, "\"schedule\"", schedule_keys) ||
            get_enum(c, o, P, "backbone", backbone_names, &bb) ||
            get_enum(c, o, P, "policy", policy_names, &pol) ||
            get_window(c, o, P, &s->window))
            return BM_ERR;
        /* the tables above mirror misc.c's; parse through it so the names stay one source */
        if (bm_backbone_parse(backbone_names[bb], &s->backbone) ||
            bm_policy_parse(policy_names[pol], &s->policy))
            return fail(c, P, "internal error: schedule name tables disagree");
    }

    int looped = s->backbone == BM_BB_INTERLEAVED || s->backbone == BM_BB_ZB_INTERLEAVED;
    if (looped && s->microbatches % s->pp != 0) {
        int lo = s->microbatches / s->pp * s->pp, hi = lo + s->pp;
        char alt[64];
        if (lo >= s->pp && hi <= MAX_MB) snprintf(alt, sizeof alt, "%d or %d", lo, hi);
        else snprintf(alt, sizeof alt, "%d", lo >= s->pp ? lo : hi);
        return fail(c, mb_given ? "parallel.microbatches" : "parallel.pp",
                    "parallel.microbatches (%d) must be a multiple of parallel.pp (%d) for the "
                    "\"%s\" backbone schedule\nhint: use %s microbatches, or the \"%s\" "
                    "schedule",
                    s->microbatches, s->pp, bm_backbone_name(s->backbone), alt,
                    s->backbone == BM_BB_INTERLEAVED ? "1f1b" : "zb-h1");
    }
    if (s->backbone == BM_BB_ZB_INTERLEAVED && s->vpp < 2)
        return fail(c, "parallel.vpp",
                    "schedule.backbone \"zb-interleaved\" needs parallel.vpp >= 2 virtual stages per "
                    "rank (got %d)\nhint: set \"vpp\": 2 in \"parallel\", or use \"backbone\": \"zb-h1\"",
                    s->vpp);
    if (bm_backbone_v_shaped(s->backbone) && s->vpp != 2)
        return fail(c, "parallel.vpp",
                    "schedule.backbone \"%s\" places two chunks per rank in a V: parallel.vpp must be 2 (got %d)",
                    bm_backbone_name(s->backbone), s->vpp);
    if (s->backbone == BM_BB_DUALPIPE_V && s->microbatches < 2 * s->pp)
        return fail(c, mb_given ? "parallel.microbatches" : "parallel.pp",
                    "schedule.backbone \"dualpipe-v\" needs at least 2*pp = %d microbatches (got %d)",
                    2 * s->pp, s->microbatches);
    if (s->vpp > 1 && !looped && !bm_backbone_v_shaped(s->backbone))
        return fail(c, "parallel.vpp",
                    "parallel.vpp is %d but schedule.backbone is \"%s\": virtual stages need the "
                    "\"interleaved\" schedule\nhint: set \"backbone\": \"interleaved\" in "
                    "\"schedule\", or \"vpp\": 1",
                    s->vpp, bm_backbone_name(s->backbone));
    return BM_OK;
}

static int parse_inputs(struct ctx *c, json_t *root)
{
    return get_names(c, root, "", "inputs", &c->s->inputs, &c->s->n_inputs);
}

static int parse_data_train(struct ctx *c, json_t *root)
{
    struct bm_spec *s = c->s;
    json_t *o, *sc;
    if (get_object(c, root, "", "data", &o)) return BM_ERR;
    if (o) {
        const char *P = "data";
        if (check_keys(c, o, P, "\"data\"", data_keys) || get_u64(c, o, P, "seed", &s->data.seed) ||
            get_int(c, o, P, "samples_per_microbatch", 1, MAX_COUNT, 0,
                    &s->data.samples_per_microbatch, NULL) ||
            get_int(c, o, P, "max_images", 1, MAX_COUNT, 0, &s->data.max_images, NULL) ||
            get_object(c, o, P, "encoder_cost_scale", &sc))
            return BM_ERR;
        if (sc) {
            struct bm_scale_dist *d = &s->data.encoder_cost_scale;
            const char *Q = "data.encoder_cost_scale";
            int dist = 0, has_min = 0, has_max = 0, has_sigma = 0;
            if (check_keys(c, sc, Q, "\"data.encoder_cost_scale\"", scale_keys) ||
                get_enum(c, sc, Q, "dist", dist_names, &dist) ||
                get_num(c, sc, Q, "min", 0, GE, MAX_SCALE, &d->min, &has_min) ||
                get_num(c, sc, Q, "max", 0, GE, MAX_SCALE, &d->max, &has_max) ||
                get_num(c, sc, Q, "sigma", 0, GE, 10, &d->sigma, &has_sigma) ||
                get_u64(c, sc, Q, "seed", &d->seed) || parse_scale_values(c, sc, &s->data))
                return BM_ERR;
            d->dist = (enum bm_dist)dist;
            const char *at = json_object_get(sc, "dist") ? "data.encoder_cost_scale.dist" : Q;
            if (d->dist == BM_DIST_UNIFORM && (!has_min || !has_max))
                return fail(c, at, "data.encoder_cost_scale: \"uniform\" needs \"min\" and \"max\""
                                   "\nhint: e.g. \"min\": 0.5, \"max\": 2.0");
            if (d->dist == BM_DIST_LOGNORMAL && !has_sigma)
                return fail(c, at, "data.encoder_cost_scale: \"lognormal\" needs \"sigma\""
                                   "\nhint: e.g. \"sigma\": 0.5 (the multiplier's mean stays 1)");
            if (has_min && has_max && d->min > d->max)
                return fail(c, "data.encoder_cost_scale.min",
                            "data.encoder_cost_scale.min (%g) is larger than max (%g)", d->min,
                            d->max);
            if (d->dist == BM_DIST_UNIFORM && d->min <= 0)
                return fail(c, "data.encoder_cost_scale.min",
                            "data.encoder_cost_scale.min must be > 0 for \"uniform\", got %g",
                            d->min);
        }
    }
    if (get_object(c, root, "", "train", &o)) return BM_ERR;
    if (o) {
        const char *P = "train";
        struct bm_train *t = &s->train;
        if (check_keys(c, o, P, "\"train\"", train_keys) ||
            get_int(c, o, P, "steps", 1, MAX_STEPS, 0, &t->steps, NULL) ||
            get_num(c, o, P, "lr", 0, GT, MAX_LR, &t->lr, NULL) ||
            get_num(c, o, P, "weight_decay", 0, GE, MAX_WEIGHT_DECAY, &t->weight_decay, NULL) ||
            get_num(c, o, P, "beta1", 0, GE, 0.999999999, &t->beta1, NULL) ||
            get_num(c, o, P, "beta2", 0, GE, 0.999999999, &t->beta2, NULL) ||
            get_num(c, o, P, "eps", 0, GT, MAX_EPS, &t->eps, NULL) ||
            get_u64(c, o, P, "seed", &t->seed) ||
            get_int(c, o, P, "zero", 0, 1, 0, &t->zero, NULL))
            return BM_ERR;
    }
    return BM_OK;
}

/* ---------------------------------------------------------------- modules */

/* Costs from the architecture (docs/spec.md "Cost derivation"). */
static void derive_cost(const struct bm_device *dev, struct bm_module *m)
{
    const struct bm_arch *a = &m->arch;
    double flops = dev->peak_tflops * 1e12 * dev->efficiency;
    double layers = a->layers ? a->layers : m->layers ? m->layers : 1;
    m->cost.fwd_ms = 2.0 * a->params * a->tokens / flops * 1e3;
    m->cost.bwd_ms = 2.0 * m->cost.fwd_ms;
    m->cost.state_mib = 16.0 * a->params / 1048576.0;
    m->cost.out_mib = (double)a->tokens * a->hidden * 2.0 / 1048576.0;
    m->cost.act_mib = layers * a->tokens * a->hidden * 34.0 / 1048576.0;
}

/* Split-backward defaults from the architecture (docs/spec.md "Split backward"), per layer of
 * Qi et al., Table 1: B costs sbh(24h+8s) FLOPs and W sbh(24h), so W is 3h/(6h+s) of the
 * backward; after B a layer keeps 32sbh bytes until W against sb(34h+5as) from F to B. s is the
 * sequence length: arch.seq, else the tokens per image (image/patch)^2, else arch.tokens. Fields
 * the spec gave, or that the arch cannot give, stay as they are (0 = bm_cost_w_ms's and
 * bm_cost_act_w_frac's fixed fractions). */
static void derive_split(struct bm_module *m, int w_given, int aw_given)
{
    const struct bm_arch *a = &m->arch;
    if (!m->has_arch || a->hidden <= 0) return;
    double s = a->seq > 0 ? a->seq
               : a->image > 0 && a->patch > 0 ? (double)(a->image / a->patch) * (a->image / a->patch)
               : a->tokens;
    if (s <= 0) return;
    double h = a->hidden;
    if (!w_given) m->cost.w_ms = m->cost.bwd_ms * 3.0 * h / (6.0 * h + s);
    if (!aw_given && a->heads > 0) m->cost.act_w_mib = m->cost.act_mib * 32.0 * h / (34.0 * h + 5.0 * a->heads * s);
}

static int parse_module(struct ctx *c, int i, json_t *mo)
{
    struct bm_module *m = &c->s->modules[i];
    char P[PATH_N], p[PATH_N], d[300], e[256], subj[300];
    join_index(P, "modules", i);
    c->f.subject = "";
    c->f.strip = 0;
    if (!json_is_object(mo))
        return fail(c, P, "%s must be an object, got %s", P, bm_jf_describe(mo, d, sizeof d));
    m->grad_to_backbone = 1;

    const char *name;
    char where[300];
    if (get_str(c, mo, P, "name", MAX_NAME, &name)) return BM_ERR;
    if (!name) {
        /* a misspelt "name" gets its did-you-mean first */
        if (check_keys(c, mo, P, P, module_keys)) return BM_ERR;
        return fail(c, P, "%s has no \"name\"\nhint: add \"name\": \"...\" (unique per spec)", P);
    }
    for (int j = 0; j < i; j++)
        if (!strcmp(c->s->modules[j].name, name)) {
            char q[PATH_N];
            int l, col;
            join_index(q, "modules", j);
            (void)bm_jpos_key(q, sizeof q, "name");
            bm_jpos_find(c->f.text, q, &l, &col);
            join(p, P, "name");
            return fail(c, p, "duplicate module name \"%s\"\nhint: the first \"%s\" is at %s:%d:%d; "
                              "module names must be unique",
                        bm_jf_esc(name, e, sizeof e), e, c->f.name, l, col);
        }
    if (!(m->name = bm_strdup(name))) return oom(c);
    snprintf(subj, sizeof subj, "module \"%s\": ", bm_jf_esc(name, e, sizeof e));
    snprintf(where, sizeof where, "module \"%s\"", e);
    if (check_keys(c, mo, P, where, module_keys)) return BM_ERR;
    c->f.subject = subj;
    c->f.strip = strlen(P) + 1;

    int role = 0;
    m->role_given = json_object_get(mo, "role") != NULL;
    if (get_enum(c, mo, P, "role", role_names, &role)) return BM_ERR;
    m->role = (enum bm_role)role;
    if (get_names(c, mo, P, "consumes", &m->consumes, &m->n_consumes) ||
        get_names(c, mo, P, "produces", &m->produces, &m->n_produces) ||
        get_int(c, mo, P, "layers", 1, MAX_COUNT, 0, &m->layers, NULL) ||
        get_bool(c, mo, P, "grad_to_backbone", &m->grad_to_backbone) ||
        get_strdup(c, mo, P, "impl", MAX_NAME, &m->impl) ||
        get_enum(c, mo, P, "recompute", recompute_names, &m->recompute))
        return BM_ERR;
    int trainable = 1;
    if (get_bool(c, mo, P, "trainable", &trainable)) return BM_ERR;
    m->frozen = !trainable;
    const char *doc;
    if (get_str(c, mo, P, "doc", 0, &doc)) return BM_ERR;

    json_t *ao, *co;
    if (get_object(c, mo, P, "arch", &ao) || get_object(c, mo, P, "cost", &co)) return BM_ERR;
    if (ao) {
        struct bm_arch *a = &m->arch;
        join(p, P, "arch");
        snprintf(where, sizeof where, "\"arch\" of module \"%s\"", e);
        if (check_keys(c, ao, p, where, arch_keys) ||
            get_num(c, ao, p, "params", 0, GT, HUGE_VAL, &a->params, NULL) ||
            get_int(c, ao, p, "layers", 1, MAX_DIM, 0, &a->layers, NULL) ||
            get_int(c, ao, p, "hidden", 1, MAX_DIM, 0, &a->hidden, NULL) ||
            get_int(c, ao, p, "heads", 1, MAX_DIM, 0, &a->heads, NULL) ||
            get_int(c, ao, p, "ffn", 1, MAX_DIM, 0, &a->ffn, NULL) ||
            get_int(c, ao, p, "vocab", 1, MAX_DIM, 0, &a->vocab, NULL) ||
            get_int(c, ao, p, "seq", 1, MAX_DIM, 0, &a->seq, NULL) ||
            get_int(c, ao, p, "tokens", 1, MAX_DIM, 0, &a->tokens, NULL) ||
            get_int(c, ao, p, "image", 1, MAX_DIM, 0, &a->image, NULL) ||
            get_int(c, ao, p, "patch", 1, MAX_DIM, 0, &a->patch, NULL) ||
            get_int(c, ao, p, "channels", 1, MAX_DIM, 0, &a->channels, NULL) ||
            get_int(c, ao, p, "cond", 1, MAX_DIM, 0, &a->cond, NULL))
            return BM_ERR;
        m->has_arch = 1;
        if (!m->layers && a->layers) m->layers = a->layers > MAX_COUNT ? MAX_COUNT : a->layers;
    }
    bm_knob_cost_defaults(&m->cost);
    int w_given = 0, aw_given = 0, pm_given = 0;
    if (co) {
        struct bm_cost *k = &m->cost;
        join(p, P, "cost");
        snprintf(where, sizeof where, "\"cost\" of module \"%s\"", e);
        const char *keys[64];
        bm_knob_keys("cost", keys, 64);
        if (check_keys(c, co, p, where, keys)) return BM_ERR;
        for (int i = 0; i < bm_n_knobs; i++) { /* in the list's order */
            const struct bm_knob *kn = &bm_knobs[i];
            if (strcmp(kn->section, "cost")) continue;
            if (kn->home == BM_KNOB_SPREAD ? get_num(c, co, p, kn->key, kn->lo, GE, kn->hi, &m->spread, NULL)
                                           : get_knob(c, co, p, kn, k, NULL))
                return BM_ERR;
        }
        w_given = json_object_get(co, "w_ms") != NULL;
        aw_given = json_object_get(co, "act_w_mib") != NULL;
        pm_given = json_object_get(co, "param_mib") != NULL;
        char q[PATH_N];
        if (w_given && !(k->w_ms < k->bwd_ms)) {
            join(q, p, "w_ms");
            return fail(c, q, "\"w_ms\" (%g) must be less than \"bwd_ms\" (%g): it is the "
                        "weight-gradient part of the backward\nhint: omit it for the default "
                        "(docs/spec.md \"Split backward\")", k->w_ms, k->bwd_ms);
        }
        if (aw_given && !(k->act_w_mib <= k->act_mib)) {
            join(q, p, "act_w_mib");
            return fail(c, q, "\"act_w_mib\" (%g) must be at most \"act_mib\" (%g): it is the "
                        "part of the activation kept from B to W\nhint: omit it for the default "
                        "(docs/spec.md \"Split backward\")", k->act_w_mib, k->act_mib);
        }
        m->cost_given = 1;
    } else if (m->has_arch && m->arch.params > 0 && m->arch.tokens > 0) {
        derive_cost(&c->s->device, m);
        const struct bm_cost *k = &m->cost;
        if (!(k->bwd_ms <= MAX_MS) || !(k->act_mib <= MAX_MIB) || !(k->state_mib <= MAX_MIB) ||
            !(k->out_mib <= MAX_MIB)) {
            join(p, P, "arch");
            return fail(c, p, "the costs derived from \"arch\" of module \"%s\" are out of range "
                        "(bwd_ms %g, act_mib %g, state_mib %g, out_mib %g; limits %g ms, %g MiB)"
                        "\nhint: check \"params\", \"tokens\" and the device's peak_tflops and "
                        "efficiency, or give \"cost\" explicitly", e, k->bwd_ms, k->act_mib,
                        k->state_mib, k->out_mib, MAX_MS, MAX_MIB);
        }
    }
    derive_split(m, w_given, aw_given);
    if (!pm_given) /* the weights (and gradients): arch.params at 4 bytes, else a quarter of the
                    * state (weights, gradients and AdamW's two moments, 4 bytes each) */
        m->cost.param_mib = m->has_arch && m->arch.params > 0 ? 4.0 * m->arch.params / 1048576.0
                                                              : m->cost.state_mib / 4;
    c->f.subject = "";
    c->f.strip = 0;
    return BM_OK;
}

/* ---------------------------------------------------------------- the module graph */

struct prod {
    const char *name;
    int m, k;  /* module, index in its produces */
};

static int cmp_prod(const void *a, const void *b)
{
    const struct prod *x = a, *y = b;
    int r = strcmp(x->name, y->name);
    if (r) return r;
    if (x->m != y->m) return x->m < y->m ? -1 : 1;
    return x->k < y->k ? -1 : x->k > y->k;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

struct graph {
    int n;
    struct prod *prods;  /* sorted by name */
    int n_prods;
    const char **inputs; /* sorted */
    unsigned char *adj;  /* adj[u*n+v]: v consumes something u produces */
    unsigned char *reach;/* reach[u*n+v]: a path u -> ... -> v of length >= 1 exists */
    int *color, *stack;
};

static void graph_free(struct graph *g)
{
    bm_free(g->prods);
    bm_free(g->inputs);
    bm_free(g->adj);
    bm_free(g->reach);
    bm_free(g->color);
    bm_free(g->stack);
}

/* First producer of 'name' (lowest module, then index), or NULL. */
static const struct prod *find_prod(const struct graph *g, const char *name)
{
    int lo = 0, hi = g->n_prods;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (strcmp(g->prods[mid].name, name) < 0) lo = mid + 1;
        else hi = mid;
    }
    return lo < g->n_prods && !strcmp(g->prods[lo].name, name) ? &g->prods[lo] : NULL;
}

static int is_input(const struct graph *g, int n_inputs, const char *name)
{
    return bsearch(&name, g->inputs, (size_t)n_inputs, sizeof *g->inputs, cmp_str) != NULL;
}

static void consumes_path(char *out, int m, int k)
{
    join_index(out, "modules", m);
    (void)bm_jpos_key(out, PATH_N, "consumes");
    (void)bm_jpos_index(out, PATH_N, k);
}

static void member_path(char *out, int m, const char *key)
{
    join_index(out, "modules", m);
    (void)bm_jpos_key(out, PATH_N, key);
}

/* Index in v's consumes of the first tensor that u produces. */
static int edge_k(const struct bm_spec *s, const struct graph *g, int u, int v)
{
    for (int k = 0; k < s->modules[v].n_consumes; k++) {
        const struct prod *p = find_prod(g, s->modules[v].consumes[k]);
        if (p && p->m == u) return k;
    }
    return 0;
}

/* DFS for a cycle; on finding one, reports it. */
static int dfs_cycle(struct ctx *c, struct graph *g, int u, int depth)
{
    const struct bm_spec *s = c->s;
    g->color[u] = 1;
    g->stack[depth] = u;
    for (int v = 0; v < g->n; v++) {
        if (!g->adj[u * g->n + v]) continue;
        if (g->color[v] == 1) {
            char msg[3000], p[PATH_N], e[256];
            size_t o = 0;
            int start = depth;
            while (g->stack[start] != v) start--;
            for (int i = start; i <= depth && o < sizeof msg; i++)
                o += (size_t)snprintf(msg + o, sizeof msg - o, "%s -> ",
                                      bm_jf_esc(s->modules[g->stack[i]].name, e, sizeof e));
            if (o < sizeof msg) snprintf(msg + o, sizeof msg - o, "%s", bm_jf_esc(s->modules[v].name, e, sizeof e));
            int k = edge_k(s, g, u, v);
            consumes_path(p, v, k);
            char e2[256];
            return fail(c, p, "cycle in the module graph: %s\nhint: module \"%s\" consumes \"%s\", "
                              "which depends on its own output; a module's inputs must come from "
                              "\"inputs\" or from modules upstream of it",
                        msg, bm_jf_esc(s->modules[v].name, e, sizeof e),
                        bm_jf_esc(s->modules[v].consumes[k], e2, sizeof e2));
        }
        if (g->color[v] == 0 && dfs_cycle(c, g, v, depth + 1)) return BM_ERR;
    }
    g->color[u] = 2;
    return BM_OK;
}

static void fill_reach(struct graph *g, int src)
{
    int top = 0;
    unsigned char *r = g->reach + (size_t)src * g->n;
    g->stack[top++] = src;
    while (top) {
        int u = g->stack[--top];
        for (int v = 0; v < g->n; v++)
            if (g->adj[u * g->n + v] && !r[v]) {
                r[v] = 1;
                g->stack[top++] = v;
            }
    }
}

/* A hint for a consumed tensor nobody produces. */
static void missing_hint(const struct bm_spec *s, const struct graph *g, const char *t, char *buf,
                         size_t n)
{
    char e[256], e2[256];
    /* a near-miss spelling of a produced name or an input */
    int best = 99;
    const char *bname = NULL, *bmod = NULL;
    for (int i = 0; i < g->n_prods; i++) {
        int d = edit_distance(t, g->prods[i].name);
        if (d < best) {
            best = d;
            bname = g->prods[i].name;
            bmod = s->modules[g->prods[i].m].name;
        }
    }
    for (int i = 0; i < s->n_inputs; i++) {
        int d = edit_distance(t, s->inputs[i]);
        if (d < best) {
            best = d;
            bname = s->inputs[i];
            bmod = NULL;
        }
    }
    size_t tl = strlen(t);
    if (bname && best <= (tl <= 4 ? 1 : tl <= 8 ? 2 : 3)) {
        if (bmod)
            snprintf(buf, n, "\nhint: did you mean \"%s\" (produced by module \"%s\")?",
                     bm_jf_esc(bname, e, sizeof e), bm_jf_esc(bmod, e2, sizeof e2));
        else
            snprintf(buf, n, "\nhint: did you mean the input \"%s\"?", bm_jf_esc(bname, e, sizeof e));
        return;
    }
    /* a module whose name prefixes the tensor ("vit.patches" -> "vit") */
    for (int m = 0; m < s->n_modules; m++) {
        size_t l = strlen(s->modules[m].name);
        if (l < tl && !strncmp(t, s->modules[m].name, l) && (t[l] == '.' || t[l] == '_' || t[l] == ':')) {
            snprintf(buf, n, "\nhint: add \"produces\": [\"%s\"] to module \"%s\", or add \"%s\" to "
                             "\"inputs\" if it is data",
                     bm_jf_esc(t, e, sizeof e), bm_jf_esc(s->modules[m].name, e2, sizeof e2), e);
            return;
        }
    }
    snprintf(buf, n, "\nhint: add \"%s\" to \"inputs\" if it is data, or to the \"produces\" of the "
                     "module that computes it",
             bm_jf_esc(t, e, sizeof e));
}

static const char *role_reason(enum bm_role r)
{
    return r == BM_ROLE_ENCODER ? "its outputs feed the backbone"
                                : "it consumes the backbone's outputs";
}

/* The graph's sorted producer and input lists and its n x n matrices. */
static int graph_init(struct ctx *c, struct graph *g)
{
    struct bm_spec *s = c->s;
    int n = s->n_modules, total = 0;
    g->n = n;
    for (int m = 0; m < n; m++) total += s->modules[m].n_produces;
    g->prods = bm_calloc((size_t)(total ? total : 1), sizeof *g->prods);
    g->inputs = bm_calloc((size_t)(s->n_inputs ? s->n_inputs : 1), sizeof *g->inputs);
    g->adj = bm_calloc((size_t)n * (size_t)n, 1);
    g->reach = bm_calloc((size_t)n * (size_t)n, 1);
    g->color = bm_calloc((size_t)n, sizeof *g->color);
    g->stack = bm_calloc((size_t)n + 1, sizeof *g->stack);
    if (!g->prods || !g->inputs || !g->adj || !g->reach || !g->color || !g->stack) return oom(c);
    for (int m = 0; m < n; m++)
        for (int k = 0; k < s->modules[m].n_produces; k++)
            g->prods[g->n_prods++] = (struct prod){s->modules[m].produces[k], m, k};
    qsort(g->prods, (size_t)g->n_prods, sizeof *g->prods, cmp_prod);
    for (int i = 0; i < s->n_inputs; i++) g->inputs[i] = s->inputs[i];
    qsort(g->inputs, (size_t)s->n_inputs, sizeof *g->inputs, cmp_str);
    return BM_OK;
}

/* Producers: no spec input, no tensor twice. */
static int check_producers(struct ctx *c, struct graph *g)
{
    struct bm_spec *s = c->s;
    char p[PATH_N], e[256], e2[256], e3[256];
    for (int m = 0; m < s->n_modules; m++) {
        const struct bm_module *mod = &s->modules[m];
        for (int k = 0; k < mod->n_produces; k++) {
            const char *t = mod->produces[k];
            member_path(p, m, "produces");
            (void)bm_jpos_index(p, PATH_N, k);
            if (is_input(g, s->n_inputs, t))
                return fail(c, p, "module \"%s\" produces \"%s\", which is a spec input\nhint: rename the "
                                  "output, or remove \"%s\" from \"inputs\"",
                            bm_jf_esc(mod->name, e, sizeof e), bm_jf_esc(t, e2, sizeof e2), e2);
            const struct prod *first = find_prod(g, t);
            if (first->m != m || first->k != k)
                return fail(c, p, "tensor \"%s\" is produced by two modules: \"%s\" and \"%s\"\nhint: "
                                  "every tensor has exactly one producer; rename one of them",
                            bm_jf_esc(t, e2, sizeof e2), bm_jf_esc(s->modules[first->m].name, e3, sizeof e3),
                            bm_jf_esc(mod->name, e, sizeof e));
        }
    }
    return BM_OK;
}

/* Consumers: every name is an input or produced; the edges producer -> consumer. */
static int check_consumers(struct ctx *c, struct graph *g)
{
    struct bm_spec *s = c->s;
    int n = s->n_modules;
    char p[PATH_N], e[256], e2[256], h[1200];
    for (int m = 0; m < n; m++) {
        const struct bm_module *mod = &s->modules[m];
        for (int k = 0; k < mod->n_consumes; k++) {
            const char *t = mod->consumes[k];
            if (is_input(g, s->n_inputs, t)) continue;
            const struct prod *pr = find_prod(g, t);
            if (!pr) {
                consumes_path(p, m, k);
                missing_hint(s, g, t, h, sizeof h);
                return fail(c, p, "module \"%s\" consumes \"%s\", but it is not in \"inputs\" and no module "
                                  "produces it%s",
                            bm_jf_esc(mod->name, e, sizeof e), bm_jf_esc(t, e2, sizeof e2), h);
            }
            g->adj[pr->m * n + m] = 1;
        }
    }
    return BM_OK;
}

/* The backbone: the one marked "role": "backbone", else the costliest unmarked module connected
 * to all others. Sets s->backbone_module. */
static int find_backbone(struct ctx *c, const struct graph *g)
{
    struct bm_spec *s = c->s;
    int n = s->n_modules, bb = -1;
    char p[PATH_N], e[256], e2[256];
    for (int m = 0; m < n; m++) {
        if (!s->modules[m].role_given || s->modules[m].role != BM_ROLE_BACKBONE) continue;
        if (bb >= 0) {
            member_path(p, m, "role");
            return fail(c, p, "several backbones: modules \"%s\" and \"%s\" are both marked \"role\": "
                              "\"backbone\"\nhint: a spec has exactly one backbone; mark the other one "
                              "\"encoder\" or \"generator\", or drop its \"role\" to derive it",
                        bm_jf_esc(s->modules[bb].name, e, sizeof e), bm_jf_esc(s->modules[m].name, e2, sizeof e2));
        }
        bb = m;
    }
    if (bb < 0) {
        int tie = -1;
        double best = -1;
        for (int m = 0; m < n; m++) {
            if (s->modules[m].role_given) continue; /* marked encoder/generator: not a candidate */
            int all = 1;
            for (int x = 0; x < n && all; x++)
                if (x != m && !g->reach[m * n + x] && !g->reach[x * n + m]) all = 0;
            if (!all) continue;
            double cost = s->modules[m].cost.fwd_ms + s->modules[m].cost.bwd_ms;
            if (cost > best) {
                best = cost;
                bb = m;
                tie = -1;
            } else if (cost == best) {
                tie = m;
            }
        }
        if (bb < 0)
            return fail(c, "modules", "no backbone: no module is marked \"role\": \"backbone\", and no unmarked "
                                      "module lies upstream or downstream of every other module\nhint: add "
                                      "\"role\": \"backbone\" to the backbone module");
        if (tie >= 0)
            return fail(c, "modules", "no unique backbone: modules \"%s\" and \"%s\" both qualify with the same "
                                      "cost (%g ms per microbatch)\nhint: add \"role\": \"backbone\" to one of them",
                        bm_jf_esc(s->modules[bb].name, e, sizeof e), bm_jf_esc(s->modules[tie].name, e2, sizeof e2), best);
    }
    s->backbone_module = bb;
    return BM_OK;
}

/* Roles from the graph (upstream of the backbone: encoder, downstream: generator), checked
 * against given ones; grad_to_backbone only on generators. */
static int derive_roles(struct ctx *c, const struct graph *g)
{
    struct bm_spec *s = c->s;
    int n = s->n_modules, bb = s->backbone_module;
    char p[PATH_N], e[256], e2[256];
    for (int m = 0; m < n; m++) {
        struct bm_module *mod = &s->modules[m];
        enum bm_role r;
        if (m == bb) r = BM_ROLE_BACKBONE;
        else if (g->reach[m * n + bb]) r = BM_ROLE_ENCODER;
        else if (g->reach[bb * n + m]) r = BM_ROLE_GENERATOR;
        else {
            member_path(p, m, "name");
            return fail(c, p, "module \"%s\" is neither upstream nor downstream of the backbone \"%s\"\n"
                              "hint: an encoder's outputs must (transitively) feed the backbone; a "
                              "generator must (transitively) consume the backbone's outputs",
                        bm_jf_esc(mod->name, e, sizeof e), bm_jf_esc(s->modules[bb].name, e2, sizeof e2));
        }
        if (mod->role_given && mod->role != r) {
            member_path(p, m, "role");
            return fail(c, p, "module \"%s\" is marked \"role\": \"%s\" but the graph makes it %s %s (%s)\n"
                              "hint: fix its \"consumes\"/\"produces\", or drop \"role\" to use the derived one",
                        bm_jf_esc(mod->name, e, sizeof e), bm_role_name(mod->role),
                        r == BM_ROLE_ENCODER ? "an" : "a", bm_role_name(r), role_reason(r));
        }
        mod->role = r;
        json_t *mo = json_array_get(c->modules, (size_t)m);
        if (r != BM_ROLE_GENERATOR && json_object_get(mo, "grad_to_backbone")) {
            member_path(p, m, "grad_to_backbone");
            return fail(c, p, "\"grad_to_backbone\" is only for generators, but module \"%s\" is %s %s\n"
                              "hint: remove it",
                        bm_jf_esc(mod->name, e, sizeof e), r == BM_ROLE_ENCODER ? "an" : "a", bm_role_name(r));
        }
    }
    return BM_OK;
}

/* The module graph: producers and consumers consistent, no cycle, one backbone, every other
 * module an encoder or a generator of it. */
static int check_graph(struct ctx *c)
{
    struct graph g = {0};
    int n = c->s->n_modules, rc = BM_ERR;
    if (graph_init(c, &g) || check_producers(c, &g) || check_consumers(c, &g)) goto out;
    /* cycles (a self-loop included), in module order so the report is deterministic */
    for (int m = 0; m < n; m++)
        if (!g.color[m] && dfs_cycle(c, &g, m, 0)) goto out;
    for (int m = 0; m < n; m++) fill_reach(&g, m);
    rc = find_backbone(c, &g) || derive_roles(c, &g) ? BM_ERR : BM_OK;
out:
    graph_free(&g);
    return rc;
}

static int parse_modules(struct ctx *c, json_t *root)
{
    struct bm_spec *s = c->s;
    json_t *ms = json_object_get(root, "modules");
    char d[300];
    if (!ms)
        return fail(c, "", "the spec has no \"modules\"\nhint: add \"modules\": [{\"name\": ..., "
                           "\"role\": \"backbone\", ...}]");
    if (!json_is_array(ms))
        return fail(c, "modules", "modules must be an array, got %s", bm_jf_describe(ms, d, sizeof d));
    size_t n = json_array_size(ms);
    if (n == 0)
        return fail(c, "modules", "\"modules\" is empty: a spec needs one backbone module");
    if (n > MAX_MODULES)
        return fail(c, "modules[256]", "the spec has %zu modules; the limit is %d", n, MAX_MODULES);
    c->modules = ms;
    s->modules = bm_calloc(n, sizeof *s->modules);
    if (!s->modules) return oom(c);
    s->n_modules = (int)n;
    for (size_t i = 0; i < n; i++)
        if (parse_module(c, (int)i, json_array_get(ms, i))) return BM_ERR;
    return BM_OK;
}

/* ---------------------------------------------------------------- top level */

static void set_defaults(struct bm_spec *s)
{
    bm_knob_device_defaults(&s->device);
    s->pp = 1;
    s->vpp = 1;
    s->dp = 1;
    s->microbatches = 1;
    s->unit = 0;
    s->backbone = BM_BB_1F1B;
    s->policy = BM_POL_BIGMAC;
    s->window = 0;
    s->backbone_module = -1;
    s->data.encoder_cost_scale = (struct bm_scale_dist){BM_DIST_NONE, 0, 0, 0, 1};
    s->data.seed = 1;
    s->data.samples_per_microbatch = 1;
    s->data.max_images = 1;
    s->train = (struct bm_train){20, 1e-3, 0, 0.9, 0.999, 1e-8, 1, 0};
}

/* "dir/tiny-mllm.json" -> "tiny-mllm" */
static char *default_name(const char *path)
{
    const char *b = strrchr(path, '/');
    b = b ? b + 1 : path;
    size_t len = strlen(b);
    if (len > 5 && !strcmp(b + len - 5, ".json")) len -= 5;
    if (len > MAX_NAME) len = MAX_NAME;
    char *s = bm_malloc(len + 1);
    if (s) {
        memcpy(s, b, len);
        s[len] = 0;
    }
    return s;
}

static int parse_root(struct ctx *c, json_t *root)
{
    struct bm_spec *s = c->s;
    char d[300];
    if (!json_is_object(root))
        return fail(c, "", "a spec must be a JSON object, got %s", bm_jf_describe(root, d, sizeof d));
    json_t *f = json_object_get(root, "format"), *v = json_object_get(root, "version");
    /* a misspelt "format"/"version" gets its did-you-mean rather than "missing" */
    if ((!f || !v) && check_keys(c, root, "", "the spec", top_keys)) return BM_ERR;
    if (!f)
        return fail(c, "", "missing \"format\": \"bigmac-spec\"\nhint: a spec starts with "
                           "{\"format\": \"bigmac-spec\", \"version\": 1, ...}");
    if (!json_is_string(f) || strcmp(json_string_value(f), "bigmac-spec"))
        return fail(c, "format", "\"format\" must be \"bigmac-spec\", got %s%s",
                    bm_jf_describe(f, d, sizeof d),
                    json_is_string(f) && !strcmp(json_string_value(f), "bigmac-table")
                        ? "\nhint: this is an operator table; commands that take a spec want the "
                          "model description"
                        : "");
    if (!v)
        return fail(c, "", "missing \"version\": 1\nhint: add \"version\": 1 next to \"format\"");
    long long version;
    if (!bm_json_whole(v, &version) || version != BM_SPEC_VERSION)
        return fail(c, "version", "unsupported spec version %s; this bigmac reads version %d",
                    bm_jf_describe(v, d, sizeof d), BM_SPEC_VERSION);
    if (check_keys(c, root, "", "the spec", top_keys)) return BM_ERR;
    if (get_strdup(c, root, "", "name", MAX_NAME, &s->name) ||
        get_strdup(c, root, "", "doc", 0, &s->doc))
        return BM_ERR;
    if (!s->name && !(s->name = default_name(c->f.name))) return oom(c);
    if (parse_device(c, root) || parse_parallel_schedule(c, root) || parse_inputs(c, root) ||
        parse_data_train(c, root) || parse_modules(c, root) || check_graph(c))
        return BM_ERR;
    return BM_OK;
}

int bm_spec_parse(const char *text, const char *name, struct bm_spec **out, struct bm_err *err)
{
    if (out) *out = NULL;
    if (!name) name = "<spec>";
    if (!text || !out) return bm_err_set(err, "%s: no spec text", name);
    size_t len = strlen(text);
    if (len > (size_t)MAX_TEXT)
        return bm_err_set(err, "%s: the spec is %zu bytes; a spec may be at most %ld MiB", name,
                          len, MAX_TEXT >> 20);
    json_t *root = bm_json_parse(text, name, MAX_DEPTH, JSON_REJECT_DUPLICATES, err);
    if (!root) return BM_ERR;
    struct bm_spec *s = bm_calloc(1, sizeof *s);
    struct ctx c = {.f = {.name = name, .text = text, .err = err, .subject = ""}, .s = s};
    int rc = BM_ERR;
    if (!s || !(s->path = bm_strdup(name))) {
        oom(&c);
    } else {
        set_defaults(s);
        rc = parse_root(&c, root);
    }
    json_decref(root);
    if (rc) {
        bm_spec_free(s);
        return BM_ERR;
    }
    *out = s;
    return BM_OK;
}

int bm_spec_load(const char *path, struct bm_spec **out, struct bm_err *err)
{
    if (out) *out = NULL;
    struct stat st;
    if (stat(path, &st) == 0 && st.st_size > MAX_TEXT)
        return bm_err_set(err, "%s: the file is %lld bytes; a spec may be at most %ld MiB", path,
                          (long long)st.st_size, MAX_TEXT >> 20);
    size_t len;
    char *text = bm_read_file_max(path, (size_t)MAX_TEXT, &len, err);
    if (!text) return BM_ERR;
    size_t sl = strlen(text);
    if (sl != len) {
        int line, col;
        bm_jpos_offset(text, sl, &line, &col);
        bm_free(text);
        return bm_err_set(err, "%s:%d:%d: the file contains a NUL byte (not a JSON text)", path,
                          line, col);
    }
    int rc = bm_spec_parse(text, path, out, err);
    bm_free(text);
    return rc;
}

static void free_names(char **v, int n)
{
    if (!v) return;
    for (int i = 0; i < n; i++) bm_free(v[i]);
    bm_free(v);
}

void bm_spec_free(struct bm_spec *s)
{
    if (!s) return;
    for (int i = 0; i < s->n_modules; i++) {
        struct bm_module *m = &s->modules[i];
        bm_free(m->name);
        free_names(m->consumes, m->n_consumes);
        free_names(m->produces, m->n_produces);
        bm_free(m->impl);
    }
    bm_free(s->modules);
    free_names(s->inputs, s->n_inputs);
    bm_free(s->rank_time_scale);
    bm_free(s->data.encoder_cost_values);
    bm_free(s->path);
    bm_free(s->name);
    bm_free(s->doc);
    bm_free(s);
}

int bm_spec_find_module(const struct bm_spec *s, const char *name)
{
    for (int i = 0; s && name && i < s->n_modules; i++)
        if (s->modules[i].name && !strcmp(s->modules[i].name, name)) return i;
    return -1;
}

void bm_spec_encoder_scales(const struct bm_spec *s, int M, double *out)
{
    const struct bm_scale_dist *d = &s->data.encoder_cost_scale;
    struct bm_rng r;
    bm_rng_seed(&r, d->seed);
    for (int m = 0; m < M; m++) {
        double x = 1.0;
        if (s->data.n_encoder_cost_values > 0 && s->data.encoder_cost_values) {
            x = s->data.encoder_cost_values[m % s->data.n_encoder_cost_values];
        } else if (d->dist == BM_DIST_UNIFORM) {
            x = d->min + (d->max - d->min) * bm_rng_uniform(&r);
        } else if (d->dist == BM_DIST_LOGNORMAL) {
            x = exp(d->sigma * bm_rng_normal(&r) - 0.5 * d->sigma * d->sigma);
            if (d->min > 0 && x < d->min) x = d->min;
            if (d->max > 0 && x > d->max) x = d->max;
        }
        out[m] = x;
    }
}
