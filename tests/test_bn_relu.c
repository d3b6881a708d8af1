/* Fused batch norm + ReLU (src/ops/batchnorm_relu.h, kernels/norm.h):
 *   equal   forward, gradients (x, weight, bias) and running statistics
 *           equal rt_batch_norm followed by rt_relu, 4-D and 5-D, plain and
 *           blocked, with inputs whose normalised values are near zero;
 *   saved   SAVED bytes after forward = x + 2·C·4 + workspace, below the
 *           unfused pair (x + 2·C·4 + the relu output);
 *   meta    forward+backward on meta books the same peaks as the real run;
 *   gradcheck  central differences (h = 1e-2) away from the relu kink;
 *   kernel_errors  NULL workspace, mixed NULLs;
 *   eval    eval mode equals rt_batch_norm(eval) + rt_relu.
 * `bench` times 20 forward+backward steps of both on (32, 64, 56, 56)
 * blocked when RT_BNRELU_BENCH is set (skipped otherwise). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "autograd/engine.h"
#include "autograd/node.h"
#include "backend/backend.h"
#include "core/mem.h"
#include "core/rng.h"
#include "core/tensor.h"
#include "kernels/norm.h"
#include "ops/batchnorm_relu.h"
#include "ops/ops.h"
#include "rt_test.h"
#include "test_util.h"

static const float k_mom = 0.1f, k_eps = 1e-5f;

/* Per-channel parameters and buffers, booked PARAM. */
typedef struct bn_params {
    rt_tensor *w, *b, *rm, *rv;
    int64_t nbt;
} bn_params;

static rt_tensor *vec_param(int64_t c, rt_device dev, bool grad) {
    rt_tensor *t = tu_own(rt_tensor_create(1, &c, RT_F32, dev, RT_MEM_PARAM));
    if (t && grad) rt_tensor_set_requires_grad(t, true);
    return t;
}

static void params_init(bn_params *p, int64_t c, rt_device dev, uint64_t seed, float bias_scale) {
    p->w = vec_param(c, dev, true);
    p->b = vec_param(c, dev, true);
    p->rm = vec_param(c, dev, false);
    p->rv = vec_param(c, dev, false);
    p->nbt = 0;
    if (dev != RT_DEVICE_CPU || !p->w || !p->b || !p->rm || !p->rv) return;
    float *u = malloc(sizeof(float) * (size_t)(4 * c));
    rt_philox_uniform(seed, 0, 4 * c, u);
    for (int64_t i = 0; i < c; i++) {
        rt_tensor_f32(p->w)[i] = 0.5f + u[i];                     /* [0.5, 1.5) */
        rt_tensor_f32(p->b)[i] = bias_scale * (2.0f * u[c + i] - 1.0f);
        rt_tensor_f32(p->rm)[i] = 0.2f * u[2 * c + i];
        rt_tensor_f32(p->rv)[i] = 0.5f + u[3 * c + i];
    }
    /* some channels with bias exactly 0, so outputs near 0 stay near 0 */
    for (int64_t i = 0; i < c; i += 3) rt_tensor_f32(p->b)[i] = 0.0f;
    free(u);
}

static void params_copy(bn_params *dst, const bn_params *src, int64_t c) {
    params_init(dst, c, RT_DEVICE_CPU, 1, 0.0f);
    rt_tensor_copy(dst->w, src->w);
    rt_tensor_copy(dst->b, src->b);
    rt_tensor_copy(dst->rm, src->rm);
    rt_tensor_copy(dst->rv, src->rv);
    dst->nbt = src->nbt;
}

/* Plain input (TEMP, an activation) of `shape`: per channel, symmetric pairs
 * ±v (batch mean 0 up to rounding) including pairs ±1e-6, ±1e-4, ±1e-3 and a
 * few exact zeros so that normalised values near (and at) zero occur. */
static rt_tensor *make_input(int ndim, const int64_t *shape, rt_device dev, uint64_t seed) {
    rt_tensor *x = tu_own(rt_tensor_create(ndim, shape, RT_F32, dev, RT_MEM_TEMP));
    if (!x || dev != RT_DEVICE_CPU) return x;
    int64_t n = shape[0], c = shape[1], sp = 1;
    for (int i = 2; i < ndim; i++) sp *= shape[i];
    int64_t m = n * sp;
    float *v = malloc(sizeof(float) * (size_t)m);
    float *p = rt_tensor_f32(x);
    for (int64_t ch = 0; ch < c; ch++) {
        rt_philox_uniform(seed, (uint64_t)ch * 4096, m, v);
        for (int64_t k = 0; k + 1 < m; k += 2) {
            float a = 0.3f + 1.7f * v[k];
            if (k % 16 == 2) a = 1e-6f;
            if (k % 16 == 4) a = 1e-4f;
            if (k % 16 == 6) a = 1e-3f;
            if (k % 16 == 8) a = 0.0f;
            v[k] = a;
            v[k + 1] = -a;
        }
        if (m % 2) v[m - 1] = 0.0f;
        /* scatter (deterministic permutation) so pairs are not adjacent */
        for (int64_t k = 0; k < m; k++) {
            int64_t j = (k * 7919) % m; /* 7919 prime; a permutation when m % 7919 != 0 */
            int64_t b = j / sp, s = j % sp;
            p[(b * c + ch) * sp + s] = 1.5f * v[k] + 0.25f * (float)(ch % 5);
        }
    }
    free(v);
    return x;
}

/* x converted to `layout` as a new leaf (no grad_fn) requiring grad. */
static rt_tensor *as_leaf(rt_tensor *xp, rt_layout layout) {
    bool prev = rt_grad_set_enabled(false);
    rt_tensor *xb = NULL;
    rt_status st = rt_to_layout(xp, layout, &xb);
    rt_grad_set_enabled(prev);
    if (st != RT_OK) return NULL;
    if (xb == xp) { /* same order: a fresh copy so the two leaves are distinct */
        rt_tensor_release(xb);
        xb = rt_tensor_empty_like(xp, RT_MEM_TEMP);
        if (xb && !rt_tensor_is_meta(xp)) rt_tensor_copy(xb, xp);
    }
    tu_own(xb);
    if (xb) rt_tensor_set_requires_grad(xb, true);
    return xb;
}

static rt_status run_unfused(rt_tensor *x, bn_params *p, bool training, rt_tensor **y) {
    rt_tensor *h = NULL;
    RT_TRY(rt_batch_norm(x, p->w, p->b, p->rm, p->rv, &p->nbt, training, k_mom, k_eps, &h));
    rt_status st = rt_relu(h, y);
    rt_tensor_release(h);
    return st;
}

static rt_status run_fused(rt_tensor *x, bn_params *p, bool training, rt_tensor **y) {
    return rt_batch_norm_relu(x, p->w, p->b, p->rm, p->rv, &p->nbt, training, k_mom, k_eps, y);
}

static int rel_ok(rt_tensor *a, rt_tensor *ref, double tol, const char *what) {
    double ma = 0, mr = 0;
    if (rt_compare(a, ref, &ma, &mr) != RT_OK) return 0;
    int ok = ma <= tol * (mr > 1e-30 ? mr : 1.0);
    if (!ok) fprintf(stderr, "  %s: max |diff| %.3g, max |ref| %.3g\n", what, ma, mr);
    return ok;
}

/* Forward + backward of fused and unfused on the same inputs; compares. */
static void check_equal(int ndim, const int64_t *shape, rt_layout layout, uint64_t seed) {
    int64_t c = shape[1];
    rt_tensor *xp = make_input(ndim, shape, RT_DEVICE_CPU, seed);
    CHECK(xp);
    rt_tensor *gp = tu_randn(&(rt_generator){seed + 7, 0}, ndim, shape, 0.0f, 1.0f);
    CHECK(gp);
    bn_params pf, pu;
    params_init(&pf, c, RT_DEVICE_CPU, seed + 1, 0.3f);
    CHECK(pf.w && pf.rv);
    params_copy(&pu, &pf, c);
    rt_tensor *xf = as_leaf(xp, layout), *xu = as_leaf(xp, layout);
    CHECK(xf && xu);
    rt_tensor *g = NULL;
    bool prev = rt_grad_set_enabled(false);
    rt_status gs = rt_to_layout(gp, layout, &g);
    rt_grad_set_enabled(prev);
    CHECK_OK(gs);
    tu_own(g);

    rt_tensor *yf = NULL, *yu = NULL;
    CHECK_OK(run_fused(xf, &pf, true, &yf));
    tu_own(yf);
    CHECK_OK(run_unfused(xu, &pu, true, &yu));
    tu_own(yu);
    CHECK_EQ_INT(yf->layout, layout);
    CHECK(yf->grad_fn != NULL);
    CHECK(rel_ok(yf, yu, 1e-5, "forward y"));
    /* running statistics identical */
    CHECK_EQ_INT(pf.nbt, 1);
    CHECK_EQ_INT(pu.nbt, 1);
    CHECK(memcmp(rt_tensor_f32(pf.rm), rt_tensor_f32(pu.rm), sizeof(float) * (size_t)c) == 0);
    CHECK(memcmp(rt_tensor_f32(pf.rv), rt_tensor_f32(pu.rv), sizeof(float) * (size_t)c) == 0);

    CHECK_OK(rt_backward(yf, g, false));
    CHECK_OK(rt_backward(yu, g, false));
    CHECK(xf->grad && xu->grad && pf.w->grad && pf.b->grad);
    CHECK_EQ_INT(xf->grad->layout, layout);
    CHECK(rel_ok(xf->grad, xu->grad, 1e-5, "dx"));
    CHECK(rel_ok(pf.w->grad, pu.w->grad, 1e-5, "dweight"));
    CHECK(rel_ok(pf.b->grad, pu.b->grad, 1e-5, "dbias"));
    /* the gradient is not trivially zero */
    CHECK(tu_max_abs(rt_tensor_numel(xf->grad), rt_tensor_f32(xf->grad)) > 1e-3);

    /* a second step (running stats blend again) still agrees */
    rt_tensor *yf2 = NULL, *yu2 = NULL;
    CHECK_OK(run_fused(xf, &pf, true, &yf2));
    tu_own(yf2);
    CHECK_OK(run_unfused(xu, &pu, true, &yu2));
    tu_own(yu2);
    CHECK_EQ_INT(pf.nbt, 2);
    CHECK(memcmp(rt_tensor_f32(pf.rm), rt_tensor_f32(pu.rm), sizeof(float) * (size_t)c) == 0);
    CHECK(memcmp(rt_tensor_f32(pf.rv), rt_tensor_f32(pu.rv), sizeof(float) * (size_t)c) == 0);
}

TU_TEST(equal_plain_4d) { check_equal(4, (int64_t[]){4, 5, 6, 7}, RT_LAYOUT_PLAIN, 11); }
TU_TEST(equal_plain_5d) { check_equal(5, (int64_t[]){2, 3, 3, 4, 5}, RT_LAYOUT_PLAIN, 12); }
TU_TEST(equal_blocked_4d) {
    check_equal(4, (int64_t[]){4, 2 * rt_layout_block(), 5, 6}, RT_LAYOUT_BLOCKED, 13);
}
TU_TEST(equal_blocked_5d) {
    check_equal(5, (int64_t[]){2, rt_layout_block(), 3, 4, 5}, RT_LAYOUT_BLOCKED, 14);
}
TU_TEST(equal_plain_2d) { check_equal(2, (int64_t[]){16, 6}, RT_LAYOUT_PLAIN, 15); }

/* Recompute mode: no running-statistics update, no num_batches_tracked. */
TU_TEST(recompute_skips_running) {
    int64_t shape[4] = {2, 4, 3, 3};
    rt_tensor *x = make_input(4, shape, RT_DEVICE_CPU, 21);
    bn_params p;
    params_init(&p, 4, RT_DEVICE_CPU, 22, 0.1f);
    CHECK(x && p.rv);
    float rm0[4], rv0[4];
    memcpy(rm0, rt_tensor_f32(p.rm), sizeof rm0);
    memcpy(rv0, rt_tensor_f32(p.rv), sizeof rv0);
    bool prev = rt_recompute_set_active(true);
    rt_tensor *y = NULL;
    rt_status st = run_fused(x, &p, true, &y);
    rt_recompute_set_active(prev);
    tu_own(y);
    CHECK_OK(st);
    CHECK_EQ_INT(p.nbt, 0);
    CHECK(memcmp(rm0, rt_tensor_f32(p.rm), sizeof rm0) == 0);
    CHECK(memcmp(rv0, rt_tensor_f32(p.rv), sizeof rv0) == 0);
}

TU_TEST(eval_matches) {
    int64_t shape[4] = {3, rt_layout_block(), 4, 4};
    rt_tensor *xp = make_input(4, shape, RT_DEVICE_CPU, 31);
    bn_params pf, pu;
    params_init(&pf, shape[1], RT_DEVICE_CPU, 32, 0.3f);
    CHECK(xp && pf.rv);
    params_copy(&pu, &pf, shape[1]);
    for (int l = 0; l < 2; l++) {
        rt_tensor *xf = as_leaf(xp, (rt_layout)l), *xu = as_leaf(xp, (rt_layout)l);
        CHECK(xf && xu);
        rt_tensor *yf = NULL, *yu = NULL;
        CHECK_OK(run_fused(xf, &pf, false, &yf));
        tu_own(yf);
        CHECK_OK(run_unfused(xu, &pu, false, &yu));
        tu_own(yu);
        CHECK_EQ_INT(yf->layout, l);
        CHECK(rel_ok(yf, yu, 1e-6, "eval y"));
        rt_tensor *g = tu_own(rt_tensor_empty_like(yf, RT_MEM_TEMP));
        CHECK(g);
        CHECK_OK(rt_tensor_fill(g, 1.0f));
        CHECK_OK(rt_backward(yf, g, false));
        CHECK_OK(rt_backward(yu, g, false));
        CHECK(rel_ok(xf->grad, xu->grad, 1e-6, "eval dx"));
        CHECK(rel_ok(pf.w->grad, pu.w->grad, 1e-6, "eval dweight"));
        CHECK(rel_ok(pf.b->grad, pu.b->grad, 1e-6, "eval dbias"));
        CHECK_EQ_INT(pf.nbt, 0);
    }
}

/* SAVED bytes after one forward, relative to before. */
static int64_t saved_after_forward(rt_tensor *x, bn_params *p, int fused, rt_tensor **y) {
    rt_memstats a, b;
    rt_memstats_get(&a);
    rt_status st = fused ? run_fused(x, p, true, y) : run_unfused(x, p, true, y);
    if (st != RT_OK) return -1;
    rt_memstats_get(&b);
    return b.live[RT_MEM_SAVED] - a.live[RT_MEM_SAVED];
}

static void check_saved(int ndim, const int64_t *shape, rt_layout layout) {
    int64_t c = shape[1];
    rt_tensor *xp = make_input(ndim, shape, RT_DEVICE_CPU, 41);
    bn_params p;
    params_init(&p, c, RT_DEVICE_CPU, 42, 0.1f);
    CHECK(xp && p.rv);
    rt_tensor *x = as_leaf(xp, layout);
    CHECK(x);
    rt_bn_shape s = {.n = shape[0], .c = c, .spatial = 1, .eps = k_eps, .layout = layout,
                     .nsp = ndim - 2};
    for (int i = 2; i < ndim; i++) {
        s.spatial *= shape[i];
        s.sp[i - 2] = shape[i];
    }
    int64_t ws = (int64_t)rt_kernel_batchnorm_relu_workspace_bytes(&s);
    CHECK(ws > 0);
    int64_t xbytes = (int64_t)rt_tensor_nbytes(x);
    CHECK(ws < xbytes); /* about a bit per element */
    rt_tensor *yf = NULL, *yu = NULL;
    int64_t fused = saved_after_forward(x, &p, 1, &yf);
    tu_own(yf);
    int64_t unfused = saved_after_forward(x, &p, 0, &yu);
    tu_own(yu);
    /* x is saved by both graphs but counted once: measure the unfused pair alone */
    rt_tensor *x2 = as_leaf(xp, layout);
    rt_tensor *yu2 = NULL;
    CHECK(x2);
    int64_t unfused_alone = saved_after_forward(x2, &p, 0, &yu2);
    tu_own(yu2);
    printf("  saved: fused %lld (x %lld + stats %lld + workspace %lld), unfused %lld\n",
           (long long)fused, (long long)xbytes, (long long)(2 * c * 4), (long long)ws,
           (long long)unfused_alone);
    CHECK_EQ_INT(fused, xbytes + 2 * c * 4 + ws);
    CHECK_EQ_INT(unfused_alone, xbytes + 2 * c * 4 + xbytes);
    CHECK_EQ_INT(unfused, 2 * c * 4 + xbytes); /* x already SAVED by the fused node */
    CHECK(fused < unfused_alone);
    /* backward lets everything go: SAVED back to where it was */
    rt_memstats a, b;
    rt_memstats_get(&a);
    CHECK_OK(rt_backward(yf, yf, false));
    CHECK_OK(rt_backward(yu, yu, false));
    CHECK_OK(rt_backward(yu2, yu2, false));
    rt_memstats_get(&b);
    CHECK_EQ_INT(a.live[RT_MEM_SAVED] - b.live[RT_MEM_SAVED], fused + unfused + unfused_alone);
}

TU_TEST(saved_bytes) {
    check_saved(4, (int64_t[]){4, 6, 5, 7}, RT_LAYOUT_PLAIN);
    check_saved(4, (int64_t[]){4, 2 * rt_layout_block(), 5, 7}, RT_LAYOUT_BLOCKED);
    check_saved(5, (int64_t[]){2, rt_layout_block(), 3, 4, 5}, RT_LAYOUT_BLOCKED);
}

/* One forward+backward of the fused op on `dev`; peaks relative to before. */
static rt_status step_peaks(rt_device dev, int ndim, const int64_t *shape, rt_layout layout,
                            rt_memstats *rel) {
    rt_memstats base, s;
    rt_memstats_get(&base);
    rt_memstats_reset_peaks();
    rt_status st = RT_OK;
    bn_params p;
    params_init(&p, shape[1], dev, 51, 0.1f);
    rt_tensor *xp = make_input(ndim, shape, dev, 52);
    rt_tensor *x = xp ? as_leaf(xp, layout) : NULL;
    rt_tensor *y = NULL;
    if (!x || !p.rv) return RT_ERR_OOM;
    st = run_fused(x, &p, true, &y);
    if (st == RT_OK) {
        tu_own(y);
        rt_tensor *g = tu_own(rt_tensor_empty_like(y, RT_MEM_TEMP));
        if (g && dev == RT_DEVICE_CPU) rt_tensor_fill(g, 0.5f);
        st = g ? rt_backward(y, g, false) : RT_ERR_OOM;
    }
    rt_memstats_get(&s);
    for (int c = 0; c < RT_MEM_NCAT; c++) rel->peak[c] = s.peak[c] - base.live[c];
    rel->peak_total = s.peak_total - base.live_total;
    return st;
}

static void check_meta(int ndim, const int64_t *shape, rt_layout layout) {
    rt_memstats real = {0}, meta = {0};
    CHECK_OK(step_peaks(RT_DEVICE_CPU, ndim, shape, layout, &real));
    CHECK_OK(step_peaks(RT_DEVICE_META, ndim, shape, layout, &meta));
    for (int c = 0; c < RT_MEM_NCAT; c++) {
        if (real.peak[c] != meta.peak[c])
            fprintf(stderr, "  %s peak real %lld meta %lld\n", rt_mem_category_str(c),
                    (long long)real.peak[c], (long long)meta.peak[c]);
        CHECK_EQ_INT(meta.peak[c], real.peak[c]);
    }
    CHECK_EQ_INT(meta.peak_total, real.peak_total);
    CHECK(real.peak[RT_MEM_SAVED] > 0);
}

TU_TEST(meta_matches_real) {
    check_meta(4, (int64_t[]){4, 6, 5, 7}, RT_LAYOUT_PLAIN);
    check_meta(4, (int64_t[]){4, 2 * rt_layout_block(), 5, 7}, RT_LAYOUT_BLOCKED);
    check_meta(5, (int64_t[]){2, rt_layout_block(), 3, 4, 5}, RT_LAYOUT_BLOCKED);
    check_meta(5, (int64_t[]){2, 3, 3, 4, 5}, RT_LAYOUT_PLAIN);
}

/* L = Σ g·y over memory order, in double. */
static double loss_of(rt_tensor *x, bn_params *p, rt_tensor *g) {
    rt_tensor *y = NULL;
    bool prev = rt_grad_set_enabled(false);
    rt_status st = run_fused(x, p, true, &y);
    rt_grad_set_enabled(prev);
    if (st != RT_OK) return NAN;
    double L = 0;
    for (int64_t i = 0; i < rt_tensor_numel(y); i++) L += (double)rt_tensor_f32(g)[i] * rt_tensor_f32(y)[i];
    rt_tensor_release(y);
    return L;
}

/* Pre-relu values z = w·(x-mean)/sqrt(var+eps) + b in x's memory order. */
static void prerelu(const rt_tensor *x, const bn_params *p, double *z) {
    int64_t n = x->shape[0], c = x->shape[1], sp = rt_tensor_numel(x) / (n * c);
    const float *xp = rt_tensor_f32(x);
    for (int64_t ch = 0; ch < c; ch++) {
        double s = 0, ss = 0;
        for (int64_t i = 0; i < rt_tensor_numel(x); i++) {
            int64_t cc = x->layout == RT_LAYOUT_BLOCKED
                             ? (i / (sp * rt_layout_block())) % (c / rt_layout_block()) * rt_layout_block() +
                                   i % rt_layout_block()
                             : (i / sp) % c;
            if (cc == ch) s += xp[i], ss += (double)xp[i] * xp[i];
        }
        double m = s / (double)(n * sp), v = ss / (double)(n * sp) - m * m;
        for (int64_t i = 0; i < rt_tensor_numel(x); i++) {
            int64_t cc = x->layout == RT_LAYOUT_BLOCKED
                             ? (i / (sp * rt_layout_block())) % (c / rt_layout_block()) * rt_layout_block() +
                                   i % rt_layout_block()
                             : (i / sp) % c;
            if (cc == ch)
                z[i] = rt_tensor_f32(p->w)[ch] * (xp[i] - m) / sqrt(v + k_eps) + rt_tensor_f32(p->b)[ch];
        }
    }
}

static int64_t channel_of(const rt_tensor *x, int64_t i) {
    int64_t n = x->shape[0], c = x->shape[1], sp = rt_tensor_numel(x) / (n * c);
    return x->layout == RT_LAYOUT_BLOCKED
               ? (i / (sp * rt_layout_block())) % (c / rt_layout_block()) * rt_layout_block() + i % rt_layout_block()
               : (i / sp) % c;
}

static int grad_close(double a, double n) { return fabs(a - n) <= 1e-3 + 1e-2 * fabs(n); }

/* Kink-free input: per channel pairs ±v with |v| in [0.3, 2] (exact mean 0
 * before the offset), biases |b| <= 0.02, so |z| >= ~0.08; elements (or, for
 * weight/bias, channels) with |z| < 0.05 are skipped anyway. */
static void check_gradcheck(int ndim, const int64_t *shape, rt_layout layout) {
    int64_t c = shape[1], numel = 1;
    for (int i = 0; i < ndim; i++) numel *= shape[i];
    rt_tensor *xp = tu_own(rt_tensor_create(ndim, shape, RT_F32, RT_DEVICE_CPU, RT_MEM_TEMP));
    CHECK(xp);
    {
        int64_t m = numel / c, sp = m / shape[0];
        float *v = malloc(sizeof(float) * (size_t)m);
        for (int64_t ch = 0; ch < c; ch++) {
            rt_philox_uniform(61, (uint64_t)ch * 1024, m, v);
            for (int64_t k = 0; k + 1 < m; k += 2) {
                v[k] = 0.3f + 1.7f * v[k];
                v[k + 1] = -v[k] * (0.9f + 0.2f * v[k + 1]);
            }
            if (m % 2) v[m - 1] = 0.5f;
            for (int64_t k = 0; k < m; k++) {
                int64_t j = (k * 7919) % m, b = j / sp, s = j % sp;
                rt_tensor_f32(xp)[(b * c + ch) * sp + s] = v[k] + 0.3f * (float)ch;
            }
        }
        free(v);
    }
    bn_params p;
    params_init(&p, c, RT_DEVICE_CPU, 62, 0.02f);
    CHECK(p.rv);
    rt_tensor *x = as_leaf(xp, layout);
    CHECK(x);
    rt_tensor *g = tu_randn(&(rt_generator){63, 0}, ndim, shape, 0.0f, 1.0f);
    CHECK(g);
    g->layout = layout; /* random values: any order will do */
    double *z = malloc(sizeof(double) * (size_t)numel);
    prerelu(x, &p, z);
    int *near = calloc((size_t)c, sizeof(int));
    int64_t nskip = 0;
    for (int64_t i = 0; i < numel; i++)
        if (fabs(z[i]) < 0.05) near[channel_of(x, i)] = 1, nskip++;

    rt_tensor *y = NULL;
    rt_status st = run_fused(x, &p, true, &y);
    tu_own(y);
    if (st == RT_OK) st = rt_backward(y, g, false);
    if (st != RT_OK) free(z), free(near);
    CHECK_OK(st);
    const double h = 1e-2;
    int64_t checked = 0, bad = 0;
    for (int64_t i = 0; i < numel; i++) {
        if (fabs(z[i]) < 0.05) continue;
        float *xv = rt_tensor_f32(x) + i, x0 = *xv;
        *xv = x0 + (float)h;
        double lp = loss_of(x, &p, g);
        *xv = x0 - (float)h;
        double lm = loss_of(x, &p, g);
        *xv = x0;
        double num = (lp - lm) / (2 * h), an = rt_tensor_f32(x->grad)[i];
        checked++;
        if (!grad_close(an, num)) {
            if (bad++ < 5) fprintf(stderr, "  dx[%lld]: analytic %.6g numeric %.6g\n", (long long)i, an, num);
        }
    }
    for (int which = 0; which < 2; which++) {
        rt_tensor *t = which ? p.b : p.w;
        for (int64_t ch = 0; ch < c; ch++) {
            if (near[ch]) continue;
            float *pv = rt_tensor_f32(t) + ch, p0 = *pv;
            *pv = p0 + (float)h;
            double lp = loss_of(x, &p, g);
            *pv = p0 - (float)h;
            double lm = loss_of(x, &p, g);
            *pv = p0;
            double num = (lp - lm) / (2 * h), an = rt_tensor_f32(t->grad)[ch];
            checked++;
            if (!grad_close(an, num)) {
                if (bad++ < 10)
                    fprintf(stderr, "  d%s[%lld]: analytic %.6g numeric %.6g\n", which ? "bias" : "weight",
                            (long long)ch, an, num);
            }
        }
    }
    free(z);
    free(near);
    printf("  gradcheck %s %dd: %lld checked, %lld skipped near the kink, %lld bad\n",
           layout ? "blocked" : "plain", ndim, (long long)checked, (long long)nskip, (long long)bad);
    CHECK_EQ_INT(bad, 0);
    CHECK(checked >= numel);
}

TU_TEST(gradcheck_plain) {
    check_gradcheck(4, (int64_t[]){2, 3, 3, 4}, RT_LAYOUT_PLAIN);
    check_gradcheck(5, (int64_t[]){2, 2, 2, 3, 2}, RT_LAYOUT_PLAIN);
}
TU_TEST(gradcheck_blocked) {
    check_gradcheck(4, (int64_t[]){2, rt_layout_block(), 3, 3}, RT_LAYOUT_BLOCKED);
    check_gradcheck(5, (int64_t[]){2, rt_layout_block(), 2, 2, 2}, RT_LAYOUT_BLOCKED);
}

TU_TEST(kernel_errors) {
    rt_bn_shape s = {.n = 2, .c = 3, .spatial = 4, .eps = 1e-5f};
    float x[24] = {0}, y[24], m[3], v[3], w[3] = {1, 1, 1}, b[3] = {0};
    unsigned char ws[64];
    CHECK(rt_kernel_batchnorm_relu_workspace_bytes(&s) > 0);
    CHECK(rt_kernel_batchnorm_relu_workspace_bytes(&s) <= sizeof ws);
    CHECK(rt_kernel_batchnorm_relu_forward_train(&s, x, w, b, y, m, v, NULL) == RT_ERR_INVALID_ARG);
    CHECK(strstr(rt_error_last(), "workspace") != NULL);
    CHECK_OK(rt_kernel_batchnorm_relu_forward_train(&s, x, w, b, y, m, v, ws));
    float dx[24], dw[3], db[3];
    CHECK(rt_kernel_batchnorm_relu_backward(&s, x, y, m, v, w, NULL, dx, dw, db) == RT_ERR_INVALID_ARG);
    CHECK_OK(rt_kernel_batchnorm_relu_backward(&s, x, y, m, v, w, ws, dx, dw, db));
    /* the meta entries plan and book, computing nothing */
    const rt_backend *meta = rt_backend_get(RT_DEVICE_META);
    CHECK_OK(meta->batchnorm_relu_forward_train(&s, NULL, NULL, NULL, NULL, NULL, NULL, NULL));
    CHECK_OK(meta->batchnorm_relu_backward(&s, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL));
    CHECK(rt_kernel_batchnorm_relu_forward_train(&s, NULL, NULL, NULL, NULL, NULL, NULL, NULL) ==
          RT_ERR_INVALID_ARG);
    /* one value per channel in training; blocked with c not a multiple */
    rt_bn_shape one = {.n = 1, .c = 3, .spatial = 1, .eps = 1e-5f};
    CHECK(rt_kernel_batchnorm_relu_workspace_bytes(&one) == 0);
    CHECK(rt_kernel_batchnorm_relu_forward_train(&one, x, w, b, y, m, v, ws) == RT_ERR_SHAPE);
    rt_bn_shape bad = {.n = 2, .c = 3, .spatial = 4, .eps = 1e-5f, .layout = RT_LAYOUT_BLOCKED,
                       .nsp = 2, .sp = {2, 2}};
    CHECK(rt_kernel_batchnorm_relu_forward_train(&bad, x, w, b, y, m, v, ws) == RT_ERR_INVALID_ARG);
    /* op: the same shape errors as batch_norm */
    int64_t one_shape[4] = {1, 3, 1, 1};
    rt_tensor *x1 = tu_own(rt_tensor_zeros(4, one_shape, RT_F32, RT_DEVICE_CPU, RT_MEM_TEMP));
    bn_params p;
    params_init(&p, 3, RT_DEVICE_CPU, 71, 0.0f);
    rt_tensor *y1 = NULL;
    CHECK(run_fused(x1, &p, true, &y1) == RT_ERR_SHAPE);
    CHECK(y1 == NULL);
}

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

TU_TEST(bench) {
    if (!getenv("RT_BNRELU_BENCH")) {
        printf("  (set RT_BNRELU_BENCH=1 to time)\n");
        return;
    }
    int64_t shape[4] = {32, 64, 56, 56};
    rt_tensor *xp = tu_own(rt_tensor_create(4, shape, RT_F32, RT_DEVICE_CPU, RT_MEM_TEMP));
    CHECK(xp);
    rt_generator gen = {81, 0};
    rt_generator_normal(&gen, rt_tensor_numel(xp), 0.0f, 1.0f, rt_tensor_f32(xp));
    rt_tensor *x = as_leaf(xp, RT_LAYOUT_BLOCKED);
    bn_params p;
    params_init(&p, shape[1], RT_DEVICE_CPU, 82, 0.1f);
    CHECK(x && p.rv);
    rt_tensor *g = tu_own(rt_tensor_empty_like(x, RT_MEM_TEMP));
    CHECK(g);
    CHECK_OK(rt_tensor_fill(g, 0.01f));
    const int iters = 20;
    double ms[2] = {0, 0};
    for (int rep = 0; rep < 2; rep++) /* rep 0 warms up (primitive creation) */
        for (int fused = 0; fused < 2; fused++) {
            double t0 = now_ms();
            for (int it = 0; it < (rep ? iters : 2); it++) {
                rt_tensor *y = NULL;
                CHECK_OK(fused ? run_fused(x, &p, true, &y) : run_unfused(x, &p, true, &y));
                rt_status st = rt_backward(y, g, false);
                rt_tensor_release(y);
                CHECK_OK(st);
                rt_tensor_zero_grad(x);
                rt_tensor_zero_grad(p.w);
                rt_tensor_zero_grad(p.b);
            }
            if (rep) ms[fused] = (now_ms() - t0) / iters;
        }
    printf("  (32, 64, 56, 56) blocked, forward+backward: batch_norm+relu %.1f ms, fused %.1f ms "
           "(%.2fx)\n",
           ms[0], ms[1], ms[0] / ms[1]);
}

int main(int argc, char **argv) {
    static const rt_test_case cases[] = {
        {"equal_plain_4d", equal_plain_4d},
        {"equal_plain_5d", equal_plain_5d},
        {"equal_blocked_4d", equal_blocked_4d},
        {"equal_blocked_5d", equal_blocked_5d},
        {"equal_plain_2d", equal_plain_2d},
        {"recompute_skips_running", recompute_skips_running},
        {"eval_matches", eval_matches},
        {"saved_bytes", saved_bytes},
        {"meta_matches_real", meta_matches_real},
        {"gradcheck_plain", gradcheck_plain},
        {"gradcheck_blocked", gradcheck_blocked},
        {"kernel_errors", kernel_errors},
        {"bench", bench},
    };
    return rt_test_main(argc, argv, cases, (int)(sizeof cases / sizeof cases[0]));
}
