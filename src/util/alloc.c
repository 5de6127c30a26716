/* alloc.c — the one allocation wrapper, with n-th-allocation failure injection. */
#include <stdlib.h>
#include <string.h>

#include "util/util.h"

static long fail_at = -1;   /* -1: not yet read from the environment */
static long counted;
static int fired;

static int should_fail(void)
{
    if (fail_at < 0) {
        const char *e = getenv("BM_ALLOC_FAIL_AT");
        fail_at = e ? atol(e) : 0;
        counted = 0;
    }
    counted++;
    if (fail_at > 0 && counted == fail_at) {
        fired = 1;
        return 1;
    }
    return 0;
}

void bm_alloc_fail_at(long n)
{
    fail_at = n < 0 ? 0 : n;
    counted = 0;
    fired = 0;
}

long bm_alloc_count(void) { return counted; }
int bm_alloc_failed(void) { return fired; }

void *bm_malloc(size_t n)
{
    if (should_fail()) return NULL;
    return malloc(n ? n : 1);
}

void *bm_calloc(size_t count, size_t size)
{
    if (should_fail()) return NULL;
    return calloc(count ? count : 1, size ? size : 1);
}

void *bm_realloc(void *p, size_t n)
{
    if (should_fail()) return NULL;
    return realloc(p, n ? n : 1);
}

char *bm_strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = bm_malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

void bm_free(void *p) { free(p); }

int bm_grow(void *pp, int *cap, int need, size_t elem)
{
    void **p = pp;
    if (need <= *cap) return 0;
    long c = *cap > 0 ? *cap : 8;
    while (c < need) c *= 2;
    if (c > 0x7fffffffL) c = 0x7fffffffL;
    if ((size_t)c > (size_t)-1 / elem) return -1;
    void *q = bm_realloc(*p, (size_t)c * elem);
    if (!q) return -1;
    *p = q;
    *cap = (int)c;
    return 0;
}
