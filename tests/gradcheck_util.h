/* The gradient-check harness shared by test_gradcheck.c and test_ops3d.c:
 * gc_run / GC() compare rt_backward with central finite differences, and
 * the input generators (RANDN, randn_away_from_zero, distinct) draw from a
 * per-test stream (seed_inputs). The method and tolerances are described in
 * test_gradcheck.c's header comment. Include after rt_test.h and test_util.h
 * (one test program per include: the stream is a file-scope variable). */
#ifndef RT_GRADCHECK_UTIL_H
#define RT_GRADCHECK_UTIL_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "autograd/engine.h"
#include "autograd/node.h"
#include "core/rng.h"
#include "core/tensor.h"
#include "rt_test.h"
#include "test_util.h"

#define GC_ATOL 1e-3
#define GC_RTOL 1e-2
#define GC_MAX_IN 6

/* ------------------------------------------------------------ harness */

/* The function under test: one output from the inputs (borrowed leaves). */
typedef rt_status (*gc_fn)(void *ctx, rt_tensor *const *in, rt_tensor **out);

typedef struct gc_case {
    const char *name;
    gc_fn fn;
    void *ctx;
    int n_in;
    rt_tensor *in[GC_MAX_IN];
    bool check[GC_MAX_IN]; /* differentiate w.r.t. this input (sets requires_grad) */
    float h;
} gc_case;

/* L = sum(y * r) in double, with grad mode off; NAN on failure. */
static inline double gc_loss(const gc_case *c, const rt_tensor *r) {
    rt_tensor *y = NULL;
    rt_status st = c->fn(c->ctx, c->in, &y);
    if (st != RT_OK) {
        fprintf(stderr, "  %s: forward failed: %s: %s\n", c->name, rt_status_str(st), rt_error_last());
        return NAN;
    }
    double l = NAN;
    if (y->requires_grad || y->grad_fn) {
        fprintf(stderr, "  %s: output has autograd history under grad mode off\n", c->name);
    } else if (!rt_tensor_same_shape(y, r)) {
        fprintf(stderr, "  %s: output shape changed between forwards\n", c->name);
    } else {
        l = 0.0;
        const float *yp = rt_tensor_f32(y), *rp = rt_tensor_f32(r);
        for (int64_t i = 0; i < rt_tensor_numel(y); i++) l += (double)yp[i] * (double)rp[i];
    }
    rt_tensor_release(y);
    return l;
}

/* Runs the gradient check; false (with a message) on any mismatch or error. */
static inline bool gc_run(gc_case *c) {
    bool ok = true;
    for (int i = 0; i < c->n_in; i++) {
        if (c->check[i] && rt_tensor_set_requires_grad(c->in[i], true) != RT_OK) {
            fprintf(stderr, "  %s: input %d: %s\n", c->name, i, rt_error_last());
            return false;
        }
        rt_tensor_zero_grad(c->in[i]);
    }
    /* analytic: backward of sum(y * r) */
    rt_tensor *y = NULL;
    rt_status st = c->fn(c->ctx, c->in, &y);
    if (st != RT_OK) {
        fprintf(stderr, "  %s: forward failed: %s: %s\n", c->name, rt_status_str(st), rt_error_last());
        return false;
    }
    rt_generator gr = {0x5eedULL, 0};
    rt_tensor *r = tu_randn_like(&gr, y, 1.0f);
    st = rt_backward(y, r, false);
    rt_tensor_release(y);
    if (st != RT_OK) {
        fprintf(stderr, "  %s: backward failed: %s: %s\n", c->name, rt_status_str(st), rt_error_last());
        return false;
    }
    for (int i = 0; i < c->n_in; i++) {
        rt_tensor *x = c->in[i], *g = x->grad;
        if (!c->check[i]) {
            if (g) {
                fprintf(stderr, "  %s: input %d does not require grad but got one\n", c->name, i);
                ok = false;
            }
            continue;
        }
        if (!g || !rt_tensor_same_shape(g, x) || g->dtype != RT_F32) {
            fprintf(stderr, "  %s: input %d: no gradient of its shape after backward\n", c->name, i);
            ok = false;
        }
    }
    if (!ok) return false;

    /* numeric: central differences with grad mode off */
    bool prev = rt_grad_set_enabled(false);
    for (int i = 0; i < c->n_in; i++) {
        if (!c->check[i]) continue;
        rt_tensor *x = c->in[i];
        float *xp = rt_tensor_f32(x);
        const float *ga = rt_tensor_f32(x->grad);
        int64_t n = rt_tensor_numel(x), bad = 0;
        double max_err = 0.0, max_ratio = 0.0;
        for (int64_t j = 0; j < n; j++) {
            float orig = xp[j], plus = orig + c->h, minus = orig - c->h;
            /* raw writes: announced, so no convolution reuses a weight
             * layout cached for the old values (kernels/conv.h) */
            xp[j] = plus;
            rt_tensor_bump_version(x);
            double lp = gc_loss(c, r);
            xp[j] = minus;
            rt_tensor_bump_version(x);
            double lm = gc_loss(c, r);
            xp[j] = orig;
            rt_tensor_bump_version(x);
            double num = (lp - lm) / ((double)plus - (double)minus);
            double err = fabs((double)ga[j] - num), tol = GC_ATOL + GC_RTOL * fabs(num);
            if (!(err <= max_err)) max_err = err;
            if (!(err / tol <= max_ratio)) max_ratio = err / tol;
            if (!(err <= tol)) {
                if (bad++ < 5)
                    fprintf(stderr, "  %s: input %d element %lld: analytic %.7g numeric %.7g\n", c->name, i,
                            (long long)j, (double)ga[j], num);
                ok = false;
            }
        }
        printf("  gradcheck %-22s input %d (%4lld elems, h=%g): max |a-n| = %.3g, max err/tol = %.3f%s\n",
               c->name, i, (long long)n, (double)c->h, max_err, max_ratio, bad ? "  FAIL" : "");
        if (bad) fprintf(stderr, "  %s: input %d: %lld of %lld elements out of tolerance\n", c->name, i,
                         (long long)bad, (long long)n);
    }
    rt_grad_set_enabled(prev);
    return ok;
}

/* ------------------------------------------------------------ inputs */

/* Per-test input stream, so a test's numbers do not depend on the others. */
static rt_generator g_rng;
static void seed_inputs(uint64_t seed) { g_rng = (rt_generator){seed, 0}; }

static inline rt_tensor *randn(int ndim, const int64_t *shape, float mean, float std) {
    return tu_randn(&g_rng, ndim, shape, mean, std);
}
#define RANDN(mean, std, ...) \
    randn((int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (int64_t[]){__VA_ARGS__}, mean, std)

/* N(0,1) values pushed to |x| >= margin (sign kept): no relu kink within reach. */
static inline rt_tensor *randn_away_from_zero(int ndim, const int64_t *shape, float margin) {
    rt_tensor *t = randn(ndim, shape, 0.0f, 1.0f);
    if (!t) return NULL;
    float *p = rt_tensor_f32(t);
    for (int64_t i = 0; i < rt_tensor_numel(t); i++)
        if (fabsf(p[i]) < margin) p[i] += p[i] >= 0.0f ? margin : -margin;
    return t;
}

/* A random permutation of {0..n-1}, scaled to span [-scale/2, scale/2):
 * distinct values spaced scale/n apart (no max-pool ties). */
static inline rt_tensor *distinct(int ndim, const int64_t *shape, float scale) {
    rt_tensor *t = tu_own(rt_tensor_create(ndim, shape, RT_F32, RT_DEVICE_CPU, RT_MEM_DATA));
    if (!t) return NULL;
    int64_t n = rt_tensor_numel(t);
    float *p = rt_tensor_f32(t), u;
    for (int64_t i = 0; i < n; i++) p[i] = (float)i;
    for (int64_t i = n - 1; i > 0; i--) { /* Fisher-Yates */
        rt_generator_uniform(&g_rng, 1, &u);
        int64_t j = (int64_t)(u * (float)(i + 1));
        if (j > i) j = i;
        float tmp = p[i];
        p[i] = p[j];
        p[j] = tmp;
    }
    for (int64_t i = 0; i < n; i++) p[i] = (p[i] / (float)n - 0.5f) * scale;
    return t;
}

/* Checks a case whose inputs are all differentiated. */
static inline bool gc_all(const char *name, gc_fn fn, void *ctx, float h, int n, rt_tensor *const *in) {
    gc_case c = {.name = name, .fn = fn, .ctx = ctx, .n_in = n, .h = h};
    if (n > GC_MAX_IN) {
        fprintf(stderr, "  %s: %d inputs, raise GC_MAX_IN\n", name, n);
        return false;
    }
    for (int i = 0; i < n; i++) {
        if (!in[i]) return false;
        c.in[i] = in[i];
        c.check[i] = true;
    }
    return gc_run(&c);
}
#define GC(name, fn, ctx, h, ...) \
    gc_all(name, fn, ctx, h, (int)(sizeof((rt_tensor *[]){__VA_ARGS__}) / sizeof(rt_tensor *)), \
           (rt_tensor *[]){__VA_ARGS__})

#endif
