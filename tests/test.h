/* test.h — a tiny test harness. Each test binary defines TEST functions and calls RUN on each
 * from main(), then returns test_summary(). Output: one "PASS name" / "FAIL name" line per test
 * (tests/run.sh counts them), failed checks print file:line and the expression. */
#ifndef BM_TEST_H
#define BM_TEST_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int t_checks_failed_now;
static int t_passed, t_failed;

/* TEST_SANITIZED is 1 in a sanitizer build (make asan). The exhaustive grids of the property
 * tests (every P, V, M, policy, window ...) then run a deterministic sample of their cases,
 * every TEST_SAMPLE_STRIDE-th in loop order (a stride coprime to the small inner loops, so the
 * sample still meets every inner combination): make test runs every case, and what the
 * sanitizers add is a check of each code path, which the sample exercises at a third of the
 * cost (the suite's time budget, README "Tests"). */
#if defined(__SANITIZE_ADDRESS__)
#define TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TEST_SANITIZED 1
#endif
#endif
#ifndef TEST_SANITIZED
#define TEST_SANITIZED 0
#endif
#define TEST_SAMPLE_STRIDE 3
/* Whether case number *i (counted by the caller from 0, incremented here) runs. */
static inline int test_sample(long *i)
{
    return !TEST_SANITIZED || (*i)++ % TEST_SAMPLE_STRIDE == 0;
}

#define CHECK(cond)                                                                 \
    do {                                                                            \
        if (!(cond)) {                                                              \
            fprintf(stderr, "  %s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #cond); \
            t_checks_failed_now++;                                                  \
        }                                                                           \
    } while (0)

#define CHECKF(cond, ...)                                                           \
    do {                                                                            \
        if (!(cond)) {                                                              \
            fprintf(stderr, "  %s:%d: CHECK(%s) failed: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                           \
            fprintf(stderr, "\n");                                                  \
            t_checks_failed_now++;                                                  \
        }                                                                           \
    } while (0)

#define CHECK_NEAR(a, b, tol)                                                       \
    do {                                                                            \
        double t_a_ = (double)(a), t_b_ = (double)(b);                              \
        if (!(fabs(t_a_ - t_b_) <= (tol))) {                                        \
            fprintf(stderr, "  %s:%d: %s = %.9g, %s = %.9g, differ by more than %g\n", \
                    __FILE__, __LINE__, #a, t_a_, #b, t_b_, (double)(tol));         \
            t_checks_failed_now++;                                                  \
        }                                                                           \
    } while (0)

#define CHECK_STR_CONTAINS(hay, needle)                                             \
    do {                                                                            \
        const char *t_h_ = (hay), *t_n_ = (needle);                                 \
        if (!t_h_ || !strstr(t_h_, t_n_)) {                                         \
            fprintf(stderr, "  %s:%d: \"%s\" does not contain \"%s\"\n", __FILE__,  \
                    __LINE__, t_h_ ? t_h_ : "(null)", t_n_);                        \
            t_checks_failed_now++;                                                  \
        }                                                                           \
    } while (0)

#define TEST(name) static void name(void)

#define RUN(name)                                                                   \
    do {                                                                            \
        t_checks_failed_now = 0;                                                    \
        name();                                                                     \
        if (t_checks_failed_now) {                                                  \
            printf("FAIL %s\n", #name);                                             \
            t_failed++;                                                             \
        } else {                                                                    \
            printf("PASS %s\n", #name);                                             \
            t_passed++;                                                             \
        }                                                                           \
        fflush(stdout);                                                             \
    } while (0)

static inline int test_summary(void) { return t_failed ? 1 : 0; }

/* ---------------------------------------------------------------- hand-built tables' costs */

/* The library keeps a table's cost model (include/bigmac_cost.h) apart from the schedule; a test
 * that builds a table by hand sets its costs in test_costs(t): t's cost model, made on first use
 * and grown to t's modules (new ones zeroed). test_costs_adopt(t, c) makes a planned or loaded
 * table's own cost model t's (a helper that returns only the table keeps it so). test_table_free(t)
 * frees t and its cost model. */
#include "bigmac.h"
#include "bigmac_cost.h"

#define TEST_MAX_COSTS 64
static inline struct bm_costs *test_costs_slot(const struct bm_table *t, int drop, struct bm_costs *adopt)
{
    static struct {
        const struct bm_table *t;
        struct bm_costs *c;
    } reg[TEST_MAX_COSTS];
    int free_at = -1;
    for (int i = 0; i < TEST_MAX_COSTS; i++) {
        if (reg[i].t == t) {
            if (drop) {
                bm_costs_free(reg[i].c);
                reg[i].t = NULL, reg[i].c = NULL;
                return NULL;
            }
            return reg[i].c;
        }
        if (!reg[i].t && free_at < 0) free_at = i;
    }
    if (drop) return NULL;
    if (free_at < 0) abort(); /* a test holds more hand-built tables at once than this */
    struct bm_costs *c = adopt ? adopt : calloc(1, sizeof *c);
    if (!c) abort();
    reg[free_at].t = t, reg[free_at].c = c;
    return c;
}

static inline struct bm_costs *test_costs(const struct bm_table *t)
{
    struct bm_costs *c = test_costs_slot(t, 0, NULL);
    if (c->n_modules < t->n_modules || !c->modules) {
        int n = t->n_modules > 0 ? t->n_modules : 1;
        struct bm_cost *m = calloc((size_t)n, sizeof *m);
        double *sp = calloc((size_t)n, sizeof *sp);
        if (!m || !sp) abort();
        if (c->modules) memcpy(m, c->modules, (size_t)c->n_modules * sizeof *m);
        if (c->spread) memcpy(sp, c->spread, (size_t)c->n_modules * sizeof *sp);
        free(c->modules), free(c->spread);
        c->modules = m, c->spread = sp, c->n_modules = t->n_modules;
    }
    return c;
}

static inline void test_costs_adopt(const struct bm_table *t, struct bm_costs *c)
{
    test_costs_slot(t, 1, NULL); /* a stale entry of a freed table at the same address */
    test_costs_slot(t, 0, c);
}

static inline void test_table_free(struct bm_table *t)
{
    test_costs_slot(t, 1, NULL);
    bm_table_free(t);
}

#endif
