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
