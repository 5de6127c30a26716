/* jpos.c — JSON path -> line:column locator (see jpos.h for the path syntax and rules). */
#include <stdio.h>
#include <math.h>
#include <string.h>

#include "spec/jpos.h"
#include "util/util.h"

/* ---------------------------------------------------------------- scanner */

struct scan {
    const char *p;  /* current byte (never past the NUL) */
    int line, col;  /* position of *p */
};

/* Step over one byte; columns advance when the next byte starts a new code point. */
static void adv(struct scan *s)
{
    unsigned char ch = (unsigned char)*s->p;
    if (!ch) return;
    s->p++;
    if (ch == '\n') {
        s->line++;
        s->col = 1;
    } else if (((unsigned char)*s->p & 0xC0) != 0x80) {
        s->col++;
    }
}

static void skip_ws(struct scan *s)
{
    while (*s->p == ' ' || *s->p == '\t' || *s->p == '\n' || *s->p == '\r') adv(s);
}

/* At '"': step past the closing quote. -1 when the string is unterminated. */
static int skip_string(struct scan *s)
{
    adv(s);
    for (;;) {
        char ch = *s->p;
        if (!ch) return -1;
        if (ch == '\\') {
            adv(s);
            if (!*s->p) return -1;
        } else if (ch == '"') {
            adv(s);
            return 0;
        }
        adv(s);
    }
}

/* Step over one value (scalar, string, object or array, however deep: no recursion).
 * -1 on malformed text. */
static int skip_value(struct scan *s)
{
    long depth = 0;
    for (;;) {
        skip_ws(s);
        char ch = *s->p;
        if (!ch) return -1;
        if (ch == '"') {
            if (skip_string(s)) return -1;
        } else if (ch == '{' || ch == '[') {
            depth++;
            adv(s);
            continue;
        } else if (ch == '}' || ch == ']') {
            if (depth == 0) return -1;
            depth--;
            adv(s);
        } else if (ch == ',' || ch == ':') {
            if (depth == 0) return -1;
            adv(s);
            continue;
        } else {
            const char *start = s->p;
            while (*s->p && !strchr(" \t\r\n,:[]{}\"", *s->p)) adv(s);
            if (s->p == start) return -1;
        }
        if (depth == 0) return 0;
    }
}

/* ---------------------------------------------------------------- key comparison */

/* Bytes of a key taken from the path: raw (unquoted) or with \" and \\ escapes (quoted). */
struct kit {
    const char *p, *end;
    int quoted;
};

static int kit_next(struct kit *k)
{
    if (k->p >= k->end) return -1;
    if (k->quoted && *k->p == '\\' && k->p + 1 < k->end) k->p++;
    return (unsigned char)*k->p++;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Read 4 hex digits at s (after "\u"). -1 when malformed. */
static long read_hex4(struct scan *s)
{
    long v = 0;
    for (int i = 0; i < 4; i++) {
        int h = hexval(*s->p);
        if (h < 0) return -1;
        v = v * 16 + h;
        adv(s);
    }
    return v;
}

/* Compare one decoded byte with the key's next byte; clears *eq on mismatch. */
static void cmp_byte(struct kit *k, int *eq, unsigned b)
{
    if (*eq && kit_next(k) != (int)b) *eq = 0;
}

static void cmp_cp(struct kit *k, int *eq, long cp)
{
    if (cp < 0x80) {
        cmp_byte(k, eq, (unsigned)cp);
    } else if (cp < 0x800) {
        cmp_byte(k, eq, 0xC0 | (unsigned)(cp >> 6));
        cmp_byte(k, eq, 0x80 | (unsigned)(cp & 0x3F));
    } else if (cp < 0x10000) {
        cmp_byte(k, eq, 0xE0 | (unsigned)(cp >> 12));
        cmp_byte(k, eq, 0x80 | (unsigned)((cp >> 6) & 0x3F));
        cmp_byte(k, eq, 0x80 | (unsigned)(cp & 0x3F));
    } else {
        cmp_byte(k, eq, 0xF0 | (unsigned)(cp >> 18));
        cmp_byte(k, eq, 0x80 | (unsigned)((cp >> 12) & 0x3F));
        cmp_byte(k, eq, 0x80 | (unsigned)((cp >> 6) & 0x3F));
        cmp_byte(k, eq, 0x80 | (unsigned)(cp & 0x3F));
    }
}

/* At '"': consume the string, decoding its escapes, and compare it with key k.
 * Returns 1 (equal), 0 (different) or -1 (malformed). */
static int match_string(struct scan *s, struct kit k)
{
    int eq = 1;
    adv(s);
    for (;;) {
        unsigned char ch = (unsigned char)*s->p;
        if (!ch) return -1;
        if (ch == '"') {
            adv(s);
            return eq && kit_next(&k) < 0;
        }
        if (ch != '\\') {
            cmp_byte(&k, &eq, ch);
            adv(s);
            continue;
        }
        adv(s);
        char e = *s->p;
        if (!e) return -1;
        adv(s);
        switch (e) {
        case 'b': cmp_byte(&k, &eq, '\b'); break;
        case 'f': cmp_byte(&k, &eq, '\f'); break;
        case 'n': cmp_byte(&k, &eq, '\n'); break;
        case 'r': cmp_byte(&k, &eq, '\r'); break;
        case 't': cmp_byte(&k, &eq, '\t'); break;
        case 'u': {
            long cp = read_hex4(s);
            if (cp < 0) return -1;
            if (cp >= 0xD800 && cp <= 0xDBFF && s->p[0] == '\\' && s->p[1] == 'u') {
                struct scan save = *s;
                adv(s);
                adv(s);
                long lo = read_hex4(s);
                if (lo >= 0xDC00 && lo <= 0xDFFF)
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                else
                    *s = save;  /* lone high surrogate: compare it as is */
            }
            cmp_cp(&k, &eq, cp);
            break;
        }
        default: cmp_byte(&k, &eq, (unsigned char)e); break; /* \" \\ \/ */
        }
    }
}

/* ---------------------------------------------------------------- navigation */

/* s at an object: find member k; on success s is at its value and *l, *c at its key. */
static int enter_key(struct scan *s, struct kit k, int *l, int *c)
{
    skip_ws(s);
    if (*s->p != '{') return -1;
    adv(s);
    skip_ws(s);
    if (*s->p == '}') return -1;
    for (;;) {
        skip_ws(s);
        if (*s->p != '"') return -1;
        int kl = s->line, kc = s->col;
        int m = match_string(s, k);
        if (m < 0) return -1;
        skip_ws(s);
        if (*s->p != ':') return -1;
        adv(s);
        skip_ws(s);
        if (m == 1) {
            *l = kl;
            *c = kc;
            return 0;
        }
        if (skip_value(s)) return -1;
        skip_ws(s);
        if (*s->p != ',') return -1;
        adv(s);
    }
}

/* s at an array: find element idx; on success s and *l, *c are at its first character. */
static int enter_index(struct scan *s, long idx, int *l, int *c)
{
    skip_ws(s);
    if (*s->p != '[') return -1;
    adv(s);
    skip_ws(s);
    if (*s->p == ']') return -1;
    for (long i = 0;; i++) {
        skip_ws(s);
        if (i == idx) {
            if (!*s->p) return -1;
            *l = s->line;
            *c = s->col;
            return 0;
        }
        if (skip_value(s)) return -1;
        skip_ws(s);
        if (*s->p != ',') return -1;
        adv(s);
    }
}

int bm_jpos_find(const char *text, const char *path, int *line, int *col)
{
    int dl, dc;
    if (!line) line = &dl;
    if (!col) col = &dc;
    *line = *col = 1;
    if (!text) return -1;
    struct scan s = {text, 1, 1};
    skip_ws(&s);
    if (!*s.p) return -1;
    *line = s.line;
    *col = s.col;
    const char *q = path ? path : "";
    int first = 1;
    while (*q) {
        int l = 0, c = 0, rc;
        if (*q == '[' && q[1] == '"') {
            struct kit k = {q + 2, q + 2, 1};
            while (*k.end && *k.end != '"') k.end += (*k.end == '\\' && k.end[1]) ? 2 : 1;
            if (k.end[0] != '"' || k.end[1] != ']') return -1;
            q = k.end + 2;
            rc = enter_key(&s, k, &l, &c);
        } else if (*q == '[') {
            long idx = 0;
            q++;
            if (*q < '0' || *q > '9') return -1;
            while (*q >= '0' && *q <= '9') {
                if (idx > 100000000000L) return -1;
                idx = idx * 10 + (*q++ - '0');
            }
            if (*q++ != ']') return -1;
            rc = enter_index(&s, idx, &l, &c);
        } else {
            if (*q == '.') q++;
            else if (!first) return -1;
            struct kit k = {q, q, 0};
            while (*k.end && *k.end != '.' && *k.end != '[') k.end++;
            if (k.end == q) return -1;
            q = k.end;
            rc = enter_key(&s, k, &l, &c);
        }
        if (rc) return -1;
        *line = l;
        *col = c;
        first = 0;
    }
    return 0;
}

/* ---------------------------------------------------------------- helpers */

int bm_jpos_key(char *buf, size_t n, const char *key)
{
    size_t len = strlen(buf), need = 0;
    int simple = key[0] != 0;
    for (const char *p = key; *p; p++) {
        char ch = *p;
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              ch == '_' || ch == '-'))
            simple = 0;
        need += (ch == '"' || ch == '\\') ? 2 : 1;
    }
    if (simple) {
        need = strlen(key) + (len ? 1 : 0);
        if (len + need + 1 > n) return -1;
        snprintf(buf + len, n - len, "%s%s", len ? "." : "", key);
        return 0;
    }
    if (len + need + 4 + 1 > n) return -1;
    char *o = buf + len;
    *o++ = '[';
    *o++ = '"';
    for (const char *p = key; *p; p++) {
        if (*p == '"' || *p == '\\') *o++ = '\\';
        *o++ = *p;
    }
    *o++ = '"';
    *o++ = ']';
    *o = 0;
    return 0;
}

int bm_jpos_index(char *buf, size_t n, long i)
{
    size_t len = strlen(buf);
    char tmp[32];
    int k = snprintf(tmp, sizeof tmp, "[%ld]", i);
    if (k < 0 || len + (size_t)k + 1 > n) return -1;
    memcpy(buf + len, tmp, (size_t)k + 1);
    return 0;
}

int bm_jpos_depth(const char *text, int max_depth, int *line, int *col)
{
    int dl, dc;
    if (!line) line = &dl;
    if (!col) col = &dc;
    *line = *col = 1;
    if (!text) return 0;
    struct scan s = {text, 1, 1};
    long depth = 0;
    while (*s.p) {
        char ch = *s.p;
        if (ch == '"') {
            if (skip_string(&s)) return 0;
            continue;
        }
        if (ch == '{' || ch == '[') {
            if (++depth > max_depth) {
                *line = s.line;
                *col = s.col;
                return -1;
            }
        } else if ((ch == '}' || ch == ']') && depth > 0) {
            depth--;
        }
        adv(&s);
    }
    return 0;
}

void bm_jpos_offset(const char *text, size_t off, int *line, int *col)
{
    struct scan s = {text, 1, 1};
    while (*s.p && (size_t)(s.p - text) < off) adv(&s);
    if (line) *line = s.line;
    if (col) *col = s.col;
}

/* ---------------------------------------------------------------- parsing */

static int json_oom;

static void *json_malloc(size_t n)
{
    void *p = bm_malloc(n);
    if (!p) json_oom = 1;
    return p;
}

json_t *bm_json_parse(const char *text, const char *name, int max_depth, size_t flags,
                      struct bm_err *err)
{
    int line, col;
    if (!name) name = "<json>";
    if (!text) {
        bm_err_set(err, "%s: no text", name);
        return NULL;
    }
    if (max_depth > 0 && bm_jpos_depth(text, max_depth, &line, &col)) {
        bm_err_set(err, "%s:%d:%d: JSON nested deeper than %d levels (a guard against absurd "
                        "input)", name, line, col, max_depth);
        return NULL;
    }
    json_set_alloc_funcs(json_malloc, bm_free);
    json_oom = 0;
    json_error_t je;
    json_t *root = json_loads(text, flags, &je);
    if (root && json_oom) {
        json_decref(root);
        root = NULL;
    }
    if (!root) {
        if (json_oom || json_error_code(&je) == json_error_out_of_memory)
            bm_err_set(err, "%s: out of memory while parsing JSON", name);
        else
            bm_err_set(err, "%s:%d:%d: invalid JSON: %s", name, je.line > 0 ? je.line : 1,
                       je.column > 0 ? je.column : 1, je.text);
    }
    return root;
}

int bm_json_whole(const json_t *v, long long *out)
{
    if (json_is_integer(v)) {
        *out = json_integer_value(v);
        return 1;
    }
    if (!json_is_real(v)) return 0;
    double x = json_real_value(v);
    if (!(fabs(x) < 9e18) || floor(x) != x) return 0;
    *out = (long long)x;
    return 1;
}
