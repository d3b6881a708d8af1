/* Minimal test harness: each test file defines a table of named tests.
 * `./test_x` runs all, `./test_x NAME` runs one, `./test_x --list` lists them.
 * A failed CHECK prints file:line and the values, marks the test failed and
 * returns from the test function. The closing line is "N passed, N failed". */
#ifndef RT_TEST_H
#define RT_TEST_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/mem.h"
#include "core/status.h"
#include "kernels/cache.h"

typedef struct rt_test_case {
    const char *name;
    void (*fn)(void);
} rt_test_case;

static int rt_test_failed_;

#define CHECK(cond)                                                                      \
    do {                                                                                 \
        if (!(cond)) {                                                                   \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);     \
            rt_test_failed_ = 1;                                                         \
            return;                                                                      \
        }                                                                                \
    } while (0)

/* Asserts a call returned RT_OK, printing the library's message otherwise. */
#define CHECK_OK(expr)                                                                   \
    do {                                                                                 \
        rt_status s_ = (expr);                                                           \
        if (s_ != RT_OK) {                                                               \
            fprintf(stderr, "%s:%d: %s returned %s: %s\n", __FILE__, __LINE__, #expr,    \
                    rt_status_str(s_), rt_error_last());                                 \
            rt_test_failed_ = 1;                                                         \
            return;                                                                      \
        }                                                                                \
    } while (0)

/* Asserts |a-b| <= tol. */
#define CHECK_NEAR(a, b, tol)                                                            \
    do {                                                                                 \
        double a_ = (double)(a), b_ = (double)(b);                                       \
        if (!(fabs(a_ - b_) <= (tol))) {                                                 \
            fprintf(stderr, "%s:%d: CHECK_NEAR failed: %s=%.9g %s=%.9g tol=%g\n",        \
                    __FILE__, __LINE__, #a, a_, #b, b_, (double)(tol));                  \
            rt_test_failed_ = 1;                                                         \
            return;                                                                      \
        }                                                                                \
    } while (0)

#define CHECK_EQ_INT(a, b)                                                               \
    do {                                                                                 \
        long long a_ = (long long)(a), b_ = (long long)(b);                              \
        if (a_ != b_) {                                                                  \
            fprintf(stderr, "%s:%d: CHECK_EQ failed: %s=%lld %s=%lld\n", __FILE__,       \
                    __LINE__, #a, a_, #b, b_);                                           \
            rt_test_failed_ = 1;                                                         \
            return;                                                                      \
        }                                                                                \
    } while (0)

static inline int rt_test_main(int argc, char **argv, const rt_test_case *cases, int n) {
    if (argc > 1 && strcmp(argv[1], "--list") == 0) {
        for (int i = 0; i < n; i++) printf("%s\n", cases[i].name);
        return 0;
    }
    int passed = 0, failed = 0;
    for (int i = 0; i < n; i++) {
        if (argc > 1 && strcmp(argv[1], cases[i].name) != 0) continue;
        rt_test_failed_ = 0;
        cases[i].fn();
        printf("%s %s\n", rt_test_failed_ ? "FAIL" : "ok  ", cases[i].name);
        fflush(stdout);
        if (rt_test_failed_) failed++; else passed++;
    }
    rt_kernels_release_cache();
    rt_mem_release_cache();
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : (passed ? 0 : 1);
}

#define RT_TEST_MAIN(...)                                                                \
    int main(int argc, char **argv) {                                                    \
        static const rt_test_case cases_[] = {__VA_ARGS__};                              \
        return rt_test_main(argc, argv, cases_, (int)(sizeof cases_ / sizeof cases_[0]));\
    }

#endif
