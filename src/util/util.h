/* util.h — allocation wrapper (with failure injection), seeded RNG, small helpers.
 * Everything in bigmac allocates through bm_malloc & co so that tests can make the n-th
 * allocation fail (SQLite-style fault injection). */
#ifndef BM_UTIL_H
#define BM_UTIL_H

#include <stddef.h>
#include <stdio.h>
#include <stdint.h>

#include "bigmac.h"

/* ---------------------------------------------------------------- allocation */

/* Like malloc/calloc/realloc/strdup/free. Return NULL on failure (real or injected). */
void *bm_malloc(size_t n);
void *bm_calloc(size_t count, size_t size);
void *bm_realloc(void *p, size_t n);
char *bm_strdup(const char *s);
void bm_free(void *p);

/* Fault injection: make the n-th allocation from now fail (1-based); 0 turns it off.
 * Also read once from the environment variable BM_ALLOC_FAIL_AT. */
void bm_alloc_fail_at(long n);
/* Allocations counted since the last bm_alloc_fail_at call. */
long bm_alloc_count(void);
/* 1 when an injected failure has fired since the last bm_alloc_fail_at call. */
int bm_alloc_failed(void);

/* Grow *p (an array of elem-sized items with capacity *cap) to hold at least 'need' items.
 * Returns 0 on success, -1 on allocation failure (then *p is unchanged). */
int bm_grow(void *p, int *cap, int need, size_t elem);

/* ---------------------------------------------------------------- limits against absurd input */

/* pp*vpp*microbatches of a plan or a loaded table. At the limit the planner takes about ten
 * seconds and 0.8 GB (P=64, M=16384; docs/hardening.md); real runs are far below it (P=16,
 * V=4, M=1024 is 65536). */
#define BM_MAX_BACKBONE_OPS (1L << 20)
/* Bytes of an operator table file (JSON or CSV). The largest plan the planner makes (2^20
 * backbone ops, e.g. P=128 V=4 M=2048) writes about 470 MB; the JSON loader streams the ops, so
 * loading costs the text plus about 30 bytes per op (docs/hardening.md, "What the readers
 * guarantee"). */
#define BM_MAX_TABLE_TEXT (1L << 30)
/* Bytes of a Chrome trace (docs/trace.md; a 1.6M-op trace is a few hundred MB). Also the cap for
 * `bigmac render`, which reads any kind of input before it knows which it is. */
#define BM_MAX_TRACE_TEXT (1L << 30)
/* Bytes of a module or tensor name in a table (as in the spec). */
#define BM_MAX_NAME_LEN 200
/* Any number in a table's device, costs and per-chunk/per-microbatch figures (ms, MiB, ...). */
#define BM_MAX_FIGURE 1e12

/* ---------------------------------------------------------------- RNG */

/* xoshiro256** seeded through splitmix64: a value passed by pointer, never the clock. */
struct bm_rng { uint64_t s[4]; };
void bm_rng_seed(struct bm_rng *r, uint64_t seed);
uint64_t bm_rng_next(struct bm_rng *r);
double bm_rng_uniform(struct bm_rng *r);      /* [0, 1) */
double bm_rng_normal(struct bm_rng *r);       /* standard normal (Box-Muller) */

/* ---------------------------------------------------------------- misc */

/* Read a whole file into a new NUL-terminated buffer (caller frees with bm_free).
 * Returns NULL and fills err ("path: No such file ...") on failure. */
char *bm_read_file(const char *path, size_t *len, struct bm_err *err);
/* The same, failing ("path: more than N bytes") as soon as more than max bytes were read, so a
 * huge file or an endless device (/dev/zero) costs at most max bytes of memory. */
char *bm_read_file_max(const char *path, size_t max, size_t *len, struct bm_err *err);

/* Write x as the shortest of %.15g / %.17g that reads back to the same double (table JSON and
 * CSV writers share it so both round-trip exactly). */
void bm_put_num(FILE *f, double x);
/* Write s as a JSON string literal (quotes, backslashes and control characters escaped). */
void bm_put_jstr(FILE *f, const char *s);

/* Monotonic clock in seconds. */
double bm_now(void);

#define BM_MIN(a, b) ((a) < (b) ? (a) : (b))
#define BM_MAX(a, b) ((a) > (b) ? (a) : (b))

#endif
