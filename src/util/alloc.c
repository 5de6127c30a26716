/* alloc.c — the one allocation wrapper, with n-th-allocation failure injection.
 *
 * Large blocks (BIG_BLOCK and up: the planner's per-task arrays, the task graph, the simulator's
 * per-op arrays at hundreds of thousands of tasks) are marked for transparent huge pages where
 * the kernel offers them on request (Linux, /sys/kernel/mm/transparent_hugepage/enabled =
 * madvise): each such array is written once soon after it is allocated, and with 4 KiB pages
 * the first touches were 18% of plan + simulate's time at P = 64, V = 4, M = 1024 (page
 * faults), about 6 points of it with 2 MiB pages. A hint only: nothing depends on it. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "util/util.h"

#define BIG_BLOCK (4u << 20)
#define HUGE_PAGE ((uintptr_t)2 << 20)

/* The 2 MiB-aligned part of p[0 .. n) may use huge pages (no-op where unsupported). */
static void *big(void *p, size_t n)
{
#ifdef MADV_HUGEPAGE
    if (p && n >= BIG_BLOCK) {
        uintptr_t a = ((uintptr_t)p + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1), b = ((uintptr_t)p + n) & ~(HUGE_PAGE - 1);
        if (b > a) (void)madvise((void *)a, b - a, MADV_HUGEPAGE);
    }
#endif
    return p;
}

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
    return big(malloc(n ? n : 1), n);
}

void *bm_calloc(size_t count, size_t size)
{
    if (should_fail()) return NULL;
    return big(calloc(count ? count : 1, size ? size : 1), count && size && count <= SIZE_MAX / size ? count * size : 0);
}

void *bm_realloc(void *p, size_t n)
{
    if (should_fail()) return NULL;
    return big(realloc(p, n ? n : 1), n);
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
