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

#endif
