/* jfield.c — the positioned JSON field reader of the spec and table loaders (jfield.h). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "spec/jfield.h"
#include "spec/jpos.h"

const char *bm_jf_esc(const char *s, char *buf, size_t n)
{
    size_t o = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (o + 8 >= n || o >= 200) {
            snprintf(buf + o, n - o, "...");
            return buf;
        }
        if (*p == '"' || *p == '\\') {
            buf[o++] = '\\';
            buf[o++] = (char)*p;
        } else if (*p < 0x20 || *p == 0x7f) {
            o += (size_t)snprintf(buf + o, n - o, "\\x%02x", *p);
        } else {
            buf[o++] = (char)*p;
        }
    }
    buf[o] = 0;
    return buf;
}

const char *bm_jf_describe(const json_t *v, char *buf, size_t n)
{
    char e[256];
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: snprintf(buf, n, "a string (\"%s\")", bm_jf_esc(json_string_value(v), e, sizeof e)); return buf;
    case JSON_INTEGER: snprintf(buf, n, "%lld", (long long)json_integer_value(v)); return buf;
    case JSON_REAL: snprintf(buf, n, "%g", json_real_value(v)); return buf;
    case JSON_TRUE: return "true";
    case JSON_FALSE: return "false";
    case JSON_NULL: return "null";
    }
    return "?";
}

int bm_jf_vfail(const struct bm_jfield *r, const char *path, const char *fmt, va_list ap)
{
    int line = 1, col = 1;
    char msg[3800];
    bm_jpos_find(r->text, path, &line, &col);
    vsnprintf(msg, sizeof msg, fmt, ap);
    return bm_err_set(r->err, "%s:%d:%d: %s", r->name, line, col, msg);
}

int bm_jf_fail(const struct bm_jfield *r, const char *path, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = bm_jf_vfail(r, path, fmt, ap);
    va_end(ap);
    return rc;
}

void bm_jf_join(char *out, const char *parent, const char *key)
{
    snprintf(out, BM_JF_PATH, "%s", parent);
    (void)bm_jpos_key(out, BM_JF_PATH, key);
}

const char *bm_jf_field(const struct bm_jfield *r, const char *path, char *buf, size_t n)
{
    snprintf(buf, n, "%s%s", r->subject ? r->subject : "", strlen(path) >= r->strip ? path + r->strip : path);
    return buf;
}

/* The name a message gives the field: the spec's path, or the table's quoted key. */
static const char *name_of(const struct bm_jfield *r, const char *path, const char *key, char *buf, size_t n)
{
    if (r->table) {
        snprintf(buf, n, "\"%s\"", key);
        return buf;
    }
    return bm_jf_field(r, path, buf, n);
}

int bm_jf_num(const struct bm_jfield *r, json_t *obj, const char *parent, const char *key, double lo, int lo_open,
              double hi, double *out, int *given)
{
    json_t *v = json_object_get(obj, key);
    if (given) *given = v != NULL;
    if (!v) return BM_OK;
    char p[BM_JF_PATH], f[BM_JF_PATH], d[300];
    bm_jf_join(p, parent, key);
    name_of(r, p, key, f, sizeof f);
    if (!json_is_number(v))
        return r->table ? bm_jf_fail(r, p, "%s must be a number", f)
                        : bm_jf_fail(r, p, "%s must be a number, got %s", f, bm_jf_describe(v, d, sizeof d));
    double x = json_number_value(v);
    int low = lo_open ? !(x > lo) : !(x >= lo);
    if (r->table && (!isfinite(x) || low))
        return bm_jf_fail(r, p, "%s must be a finite number %s %g", f, lo_open ? ">" : ">=", lo);
    if (!isfinite(x)) return bm_jf_fail(r, p, "%s must be finite", f);
    if (low) return bm_jf_fail(r, p, "%s must be %s %g, got %g", f, lo_open ? ">" : ">=", lo, x);
    if (x > hi)
        return r->table ? bm_jf_fail(r, p, "%s is %g, more than the limit %g (a guard against absurd input)", f, x, hi)
                        : bm_jf_fail(r, p, "%s must be <= %g, got %g", f, hi, x);
    *out = x;
    return BM_OK;
}

int bm_jf_int(const struct bm_jfield *r, json_t *obj, const char *parent, const char *key, long long lo,
              long long hi, int flags, int *out, int *given)
{
    json_t *v = json_object_get(obj, key);
    if (given) *given = v != NULL;
    if (!v) return flags & BM_JF_REQUIRED ? bm_jf_fail(r, parent, "missing required field \"%s\"", key) : BM_OK;
    char p[BM_JF_PATH], f[BM_JF_PATH], d[300];
    bm_jf_join(p, parent, key);
    name_of(r, p, key, f, sizeof f);
    const char *ora = flags & BM_JF_AUTO ? " or \"auto\"" : "";
    if ((flags & BM_JF_AUTO) && json_is_string(v) && !strcmp(json_string_value(v), "auto")) {
        *out = 0;
        return BM_OK;
    }
    long long x;
    if (!bm_json_whole(v, &x)) /* the one integer rule (jpos.h) */
        return r->table ? bm_jf_fail(r, p, "%s must be an integer", f)
                        : bm_jf_fail(r, p, "%s must be an integer%s, got %s", f, ora, bm_jf_describe(v, d, sizeof d));
    if (r->table && (x < lo || x > hi)) return bm_jf_fail(r, p, "%s is %lld, must be in %lld..%lld", f, x, lo, hi);
    if (x < lo) return bm_jf_fail(r, p, "%s must be an integer >= %lld%s, got %lld", f, lo, ora, x);
    if (x > hi)
        return bm_jf_fail(r, p, "%s is %lld, more than the limit %lld (a guard against absurd input)", f, x, hi);
    *out = (int)x;
    return BM_OK;
}

int bm_jf_str(const struct bm_jfield *r, json_t *obj, const char *parent, const char *key, size_t maxlen,
              int required, const char **out)
{
    json_t *v = json_object_get(obj, key);
    *out = NULL;
    if (!v) return required ? bm_jf_fail(r, parent, "missing required field \"%s\"", key) : BM_OK;
    char p[BM_JF_PATH], f[BM_JF_PATH], d[300];
    bm_jf_join(p, parent, key);
    name_of(r, p, key, f, sizeof f);
    if (!json_is_string(v))
        return r->table ? bm_jf_fail(r, p, "%s must be a string", f)
                        : bm_jf_fail(r, p, "%s must be a string, got %s", f, bm_jf_describe(v, d, sizeof d));
    size_t len = json_string_length(v);
    if (maxlen && len == 0) return bm_jf_fail(r, p, "%s must not be empty", f);
    if (maxlen && len > maxlen) return bm_jf_fail(r, p, "%s is %zu bytes long; the limit is %zu", f, len, maxlen);
    *out = json_string_value(v);
    return BM_OK;
}
