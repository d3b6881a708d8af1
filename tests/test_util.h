/* Helpers shared by the op tests (test_gradcheck.c, test_parity.c, test_ops3d.c,
 * test_superres.c, ...).
 *
 * Ownership scope: a test declared with TU_TEST(name) { ... } runs between
 * tu_begin() and tu_end(). Everything registered with tu_own / tu_defer in
 * between is released by tu_end even when a CHECK returned early, and tu_end
 * then asserts that the tracked allocator's live bytes are back where they
 * were when the test began (no tensor, gradient or saved activation leaked).
 *
 * Include after rt_test.h. */
#ifndef RT_TEST_UTIL_H
#define RT_TEST_UTIL_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/mem.h"
#include "core/rng.h"
#include "core/tensor.h"
#include "rt_test.h"

/* ------------------------------------------------------------ deferred cleanup */

#define TU_MAX_DEFER 512

typedef struct tu_deferred {
    void (*fn)(void *);
    void *p;
} tu_deferred;

static tu_deferred tu_defer_list_[TU_MAX_DEFER];
static int tu_n_defer_;
static int64_t tu_live_base_;

static inline int64_t tu_live_bytes(void) {
    rt_memstats m;
    rt_memstats_get(&m);
    return m.live_total;
}

/* Runs fn(p) at the end of the current test (in reverse registration order). */
static inline void tu_defer(void (*fn)(void *), void *p) {
    if (!p) return;
    if (tu_n_defer_ == TU_MAX_DEFER) {
        fprintf(stderr, "test_util: more than %d deferred releases; raise TU_MAX_DEFER\n", TU_MAX_DEFER);
        abort();
    }
    tu_defer_list_[tu_n_defer_++] = (tu_deferred){fn, p};
}

static inline void tu_release_tensor_(void *p) { rt_tensor_release((rt_tensor *)p); }

/* Registers t (may be NULL) for release at the end of the test; returns t. */
static inline rt_tensor *tu_own(rt_tensor *t) {
    tu_defer(tu_release_tensor_, t);
    return t;
}

static inline void tu_begin(void) {
    tu_n_defer_ = 0;
    tu_live_base_ = tu_live_bytes();
}

static inline void tu_end(void) {
    while (tu_n_defer_ > 0) {
        tu_deferred d = tu_defer_list_[--tu_n_defer_];
        d.fn(d.p);
    }
    int64_t live = tu_live_bytes();
    if (live != tu_live_base_) {
        fprintf(stderr, "  leak: %lld tracked bytes live after the test (%lld before)\n",
                (long long)live, (long long)tu_live_base_);
        rt_test_failed_ = 1;
    }
}

/* Defines test function `name` whose body runs inside a tu_begin/tu_end scope. */
#define TU_TEST(name)                                                                    \
    static void name##_body_(void);                                                      \
    static void name(void) {                                                             \
        tu_begin();                                                                      \
        name##_body_();                                                                  \
        tu_end();                                                                        \
    }                                                                                    \
    static void name##_body_(void)

/* ------------------------------------------------------------ tensors */

/* New owned f32 tensor with N(mean, std) entries drawn from g (booked DATA). */
static inline rt_tensor *tu_randn(rt_generator *g, int ndim, const int64_t *shape, float mean, float std) {
    rt_tensor *t = tu_own(rt_tensor_create(ndim, shape, RT_F32, RT_DEVICE_CPU, RT_MEM_DATA));
    if (t) rt_generator_normal(g, rt_tensor_numel(t), mean, std, rt_tensor_f32(t));
    return t;
}

/* New f32 tensor of `shape` on `dev`, booked to `cat`, with N(0, 1) draws
 * from Philox stream `seed` (cpu; a meta tensor has no data). Not owned:
 * the caller releases it. */
static inline rt_tensor *tu_randn_seeded(int ndim, const int64_t *shape, rt_device dev, rt_mem_category cat,
                                         uint64_t seed) {
    rt_tensor *t = rt_tensor_create(ndim, shape, RT_F32, dev, cat);
    if (t && dev == RT_DEVICE_CPU) {
        rt_generator g = {seed, 0};
        rt_generator_normal(&g, rt_tensor_numel(t), 0.0f, 1.0f, rt_tensor_f32(t));
    }
    return t;
}

/* Both non-NULL with the same byte size and bytes. */
static inline bool tu_same_bytes(const rt_tensor *a, const rt_tensor *b) {
    return a && b && rt_tensor_nbytes(a) == rt_tensor_nbytes(b) &&
           memcmp(rt_tensor_data(a), rt_tensor_data(b), rt_tensor_nbytes(a)) == 0;
}

/* New owned f32 tensor (DATA) filled with N(0, std) draws of the same shape as `like`. */
static inline rt_tensor *tu_randn_like(rt_generator *g, const rt_tensor *like, float std) {
    return tu_randn(g, like->ndim, like->shape, 0.0f, std);
}

/* max |a-b| over n floats. */
static inline double tu_max_abs_diff(int64_t n, const float *a, const float *b) {
    double m = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (!(d <= m)) m = d; /* NaN propagates as the maximum */
    }
    return m;
}

static inline double tu_max_abs(int64_t n, const float *a) {
    double m = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)a[i]);
        if (!(d <= m)) m = d;
    }
    return m;
}

/* ------------------------------------------------------------ checks */

/* st is `want` and the error message contains `needle`; prints the message
 * either way, and what was expected when not. */
static inline bool tu_refused(rt_status st, rt_status want, const char *needle) {
    const char *msg = rt_error_last();
    bool ok = st == want && msg && strstr(msg, needle);
    printf("  refused (%s): %s\n", rt_status_str(st), msg ? msg : "(no message)");
    if (!ok) fprintf(stderr, "  expected %s with \"%s\"\n", rt_status_str(want), needle);
    return ok;
}

/* Meta tensors predict the real run's peak to the byte: peak(dev) runs the
 * same step on `dev` and returns its tracked peak above the start (-1 on a
 * failure); the CPU run must allocate something and meta must book exactly
 * as much. `what` names the step in the printed line. */
static inline void tu_meta_peak_matches(const char *what, int64_t (*peak)(rt_device dev)) {
    int64_t cpu = peak(RT_DEVICE_CPU), meta = peak(RT_DEVICE_META);
    printf("  %s step peak above start: cpu %lld bytes, meta %lld bytes\n", what, (long long)cpu, (long long)meta);
    CHECK(cpu > 0);
    CHECK_EQ_INT(meta, cpu);
}

#endif
