/* util.h — allocation wrapper (with failure injection), seeded RNG, small helpers.
 * Everything in bigmac allocates through bm_malloc & co so that tests can make the n-th
 * allocation fail (SQLite-style fault injection). */
#ifndef BM_UTIL_H
#define BM_UTIL_H

#include <stddef.h>
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

/* Monotonic clock in seconds. */
double bm_now(void);

#define BM_MIN(a, b) ((a) < (b) ? (a) : (b))
#define BM_MAX(a, b) ((a) > (b) ? (a) : (b))

#endif
