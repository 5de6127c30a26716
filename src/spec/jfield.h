/* jfield.h — one positioned reader of JSON fields for the spec and the operator table loaders
 * (issue 26, item 4): every failure reads "file:line:col: <field> ..." with the position of the
 * field in the raw text (jpos.h), and the typed getters (number, integer, string) check type,
 * the one integer rule and limits once for both.
 *
 * The two documents word their messages as they always have (tests and users rely on them): a
 * spec names a field by its path ("parallel.pp", "module \"vit\": cost.fwd_ms") and says what
 * it got; a table names the key ("\"pp\"") and the accepted range. 'table' selects the wording;
 * the checks are the same code. */
#ifndef BM_JFIELD_H
#define BM_JFIELD_H

#include <stdarg.h>
#include <stddef.h>

#include <jansson.h>

#include "bigmac.h"

#define BM_JF_PATH 1024 /* bytes of a field's path */

struct bm_jfield {
    const char *name;    /* file name used in messages */
    const char *text;    /* raw JSON (for positions) */
    struct bm_err *err;
    int table;           /* the table loader's wording (else the spec loader's) */
    const char *subject; /* spec: "module \"vit\": " while inside a module, else "" (NULL = "") */
    size_t strip;        /* spec: bytes of the path prefix the subject replaces ("modules[3].") */
};

/* "name:line:col: <message>" with the position of 'path' into r->err. Returns BM_ERR. */
int bm_jf_vfail(const struct bm_jfield *r, const char *path, const char *fmt, va_list ap);
int bm_jf_fail(const struct bm_jfield *r, const char *path, const char *fmt, ...)
#ifdef __GNUC__
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* parent + "." + key (or ["key"] for a key a path cannot spell) into out[BM_JF_PATH]. */
void bm_jf_join(char *out, const char *parent, const char *key);
/* How the spec names the field at path in messages: "parallel.pp", or "module \"vit\": cost.fwd_ms". */
const char *bm_jf_field(const struct bm_jfield *r, const char *path, char *buf, size_t n);
/* A user string escaped for a message (quotes, backslashes, control bytes; ~200 bytes shown). */
const char *bm_jf_esc(const char *s, char *buf, size_t n);
/* What a JSON value is, for "got ...". */
const char *bm_jf_describe(const json_t *v, char *buf, size_t n);

enum { BM_JF_AUTO = 1, BM_JF_REQUIRED = 2 }; /* bm_jf_int flags */

/* Number member 'key' of obj (at path parent): finite, x > lo (lo_open) or x >= lo, x <= hi.
 * Unchanged when absent; *given (may be NULL) says whether it was there. */
int bm_jf_num(const struct bm_jfield *r, json_t *obj, const char *parent, const char *key, double lo, int lo_open,
              double hi, double *out, int *given);
/* Integer member in [lo, hi] (bm_json_whole: 4 and 4.0, not 4.5); BM_JF_AUTO: "auto" gives 0;
 * BM_JF_REQUIRED: absent is an error. */
int bm_jf_int(const struct bm_jfield *r, json_t *obj, const char *parent, const char *key, long long lo,
              long long hi, int flags, int *out, int *given);
/* String member; when maxlen > 0 it must be 1..maxlen bytes. *out (borrowed) NULL when absent;
 * required: absent is an error. */
int bm_jf_str(const struct bm_jfield *r, json_t *obj, const char *parent, const char *key, size_t maxlen,
              int required, const char **out);

#endif
