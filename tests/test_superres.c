/* The super-resolution operators and models of issue 16: PixelShuffle /
 * PixelUnshuffle (ops/ops.h), bicubic resizing (ops/ops3d.h), EDSR and the
 * reversible EDSR (models/edsr.h).
 * - gradient checks against central finite differences (the harness and
 *   tolerances of test_gradcheck.c, tests/gradcheck_util.h);
 * - PyTorch 1.13 parity: every fixture in tests/fixtures/superres (written by
 *   tools/make_superres_fixtures.py) replayed, output and gradients within
 *   1e-4 relative (tests/parity_util.h); all_fixtures_covered fails on a
 *   fixture without a case;
 * - exact equivalences: unshuffle(shuffle(x)) == x, a blocked input gives
 *   the plain input's results, bicubic at an unchanged size is a copy;
 * - meta tensors: shapes and the bytes of a real step. */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/engine.h"
#include "autograd/node.h"
#include "core/mem.h"
#include "core/rng.h"
#include "core/tensor.h"
#include "io/safetensors.h"
#include "nn/module.h"
#include "nn/modules3d.h"
#include "ops/ops3d.h"
#include "rt_test.h"
#include "test_util.h"
#include "gradcheck_util.h"

#define FIXTURE_DIR RT_SOURCE_DIR "/tests/fixtures/superres"
#include "parity_util.h"

/* st is `want` with `needle` in the message. */
static bool refused(rt_status st, rt_status want, const char *needle) {
    const char *msg = rt_error_last();
    bool ok = st == want && msg && strstr(msg, needle);
    printf("  refused (%s): %s\n", rt_status_str(st), msg ? msg : "(no message)");
    if (!ok) fprintf(stderr, "  expected %s with \"%s\"\n", rt_status_str(want), needle);
    return ok;
}

static void destroy_module_(void *m) { rt_module_destroy(m); }

/* ------------------------------------------------------------ gradient checks */

static rt_status f_shuffle(void *ctx, rt_tensor *const *in, rt_tensor **out) {
    return rt_pixel_shuffle(in[0], *(int64_t *)ctx, out);
}
static rt_status f_unshuffle(void *ctx, rt_tensor *const *in, rt_tensor **out) {
    return rt_pixel_unshuffle(in[0], *(int64_t *)ctx, out);
}

TU_TEST(gc_pixel_shuffle) {
    seed_inputs(1601);
    int64_t r = 2;
    CHECK(GC("pixel_shuffle_r2", f_shuffle, &r, 1e-2f, RANDN(0, 1, 2, 8, 3, 2)));
    CHECK(GC("pixel_unshuffle_r2", f_unshuffle, &r, 1e-2f, RANDN(0, 1, 1, 3, 4, 6)));
    r = 3;
    CHECK(GC("pixel_shuffle_r3", f_shuffle, &r, 1e-2f, RANDN(0, 1, 1, 9, 2, 3)));
}

typedef struct up_ctx {
    const int64_t *size;
    const double *scale;
} up_ctx;
static rt_status f_bicubic(void *ctx, rt_tensor *const *in, rt_tensor **out) {
    up_ctx *u = ctx;
    return rt_upsample_bicubic(in[0], u->size, u->scale, out);
}

TU_TEST(gc_upsample_bicubic) {
    seed_inputs(1602);
    up_ctx x2 = {NULL, (double[]){2.0, 2.0}};
    CHECK(GC("bicubic_x2", f_bicubic, &x2, 1e-2f, RANDN(0, 1, 2, 2, 4, 5)));
    up_ctx half = {NULL, (double[]){0.5, 0.5}};
    CHECK(GC("bicubic_half", f_bicubic, &half, 1e-2f, RANDN(0, 1, 1, 2, 8, 6)));
    up_ctx odd = {(int64_t[]){11, 13}, NULL};
    CHECK(GC("bicubic_7x5_to_11x13", f_bicubic, &odd, 1e-2f, RANDN(0, 1, 1, 2, 7, 5)));
    up_ctx frac = {NULL, (double[]){1.7, 0.6}}; /* scale factor not equal to out/in */
    CHECK(GC("bicubic_frac", f_bicubic, &frac, 1e-2f, RANDN(0, 1, 1, 1, 5, 7)));
    up_ctx tiny = {(int64_t[]){5, 3}, NULL}; /* inputs of 1 and 2 pixels: every tap clamped */
    CHECK(GC("bicubic_1x2_to_5x3", f_bicubic, &tiny, 1e-2f, RANDN(0, 1, 1, 2, 1, 2)));
}

/* ------------------------------------------------------------ PyTorch parity */

typedef rt_status (*parity_fn)(rt_st_file *f, rt_tensor *x, rt_tensor **y);

static void parity_run(const char *name, parity_fn run) {
    rt_st_file *f = fx_open(name);
    CHECK(f);
    rt_tensor *x = fx_tensor(f, "x", true), *y = NULL;
    CHECK(x);
    CHECK_OK(run(f, x, &y));
    tu_own(y);
    fx_forward_backward(f, y, "y", "grad_y");
    fx_compare_grad(f, "grad_x", x);
}

static rt_status run_shuffle(rt_st_file *f, rt_tensor *x, rt_tensor **y) {
    int64_t r;
    const char *op = rt_st_metadata(f, "op");
    if (!op || !fx_ints(f, "r", 1, &r)) return rt_error_set(RT_ERR_INVALID_ARG, "fixture metadata");
    return strcmp(op, "pixel_unshuffle") == 0 ? rt_pixel_unshuffle(x, r, y) : rt_pixel_shuffle(x, r, y);
}
static rt_status run_bicubic(rt_st_file *f, rt_tensor *x, rt_tensor **y) {
    int64_t size[2];
    const char *sc = rt_st_metadata(f, "scale_factor");
    if (!fx_ints(f, "size", 2, size) || !sc) return rt_error_set(RT_ERR_INVALID_ARG, "fixture metadata");
    double scale[2];
    char *end;
    scale[0] = strtod(sc, &end);
    scale[1] = strtod(end + 1, &end);
    return rt_upsample_bicubic(x, size[0] ? size : NULL, size[0] ? NULL : scale, y);
}
static void parity_shuffle(const char *n) { parity_run(n, run_shuffle); }
static void parity_bicubic(const char *n) { parity_run(n, run_bicubic); }

#define OP_CASES(X)                         \
    X(pixel_shuffle_r2, parity_shuffle)     \
    X(pixel_shuffle_r3, parity_shuffle)     \
    X(pixel_unshuffle_r2, parity_shuffle)   \
    X(bicubic_x2, parity_bicubic)           \
    X(bicubic_down_half, parity_bicubic)    \
    X(bicubic_size_odd, parity_bicubic)     \
    X(bicubic_frac, parity_bicubic)         \
    X(bicubic_scale_same_size, parity_bicubic)

#define DEFINE_CASE(name, runner) \
    TU_TEST(parity_##name) { runner(#name); }
OP_CASES(DEFINE_CASE)

/* ------------------------------------------------------------ exact equivalences */

TU_TEST(shuffle_roundtrip) {
    seed_inputs(1603);
    rt_tensor *x = RANDN(0, 1, 2, 18, 3, 4), *y = NULL, *z = NULL;
    CHECK(x);
    CHECK_OK(rt_pixel_shuffle(x, 3, &y));
    tu_own(y);
    CHECK(y->ndim == 4 && y->shape[0] == 2 && y->shape[1] == 2 && y->shape[2] == 9 && y->shape[3] == 12);
    /* out[n, c, h·r + i, w·r + j] = in[n, c·r² + i·r + j, h, w], element by element */
    const float *xp = rt_tensor_f32(x), *yp = rt_tensor_f32(y);
    int bad = 0;
    for (int n = 0; n < 2; n++)
        for (int c = 0; c < 2; c++)
            for (int h = 0; h < 3; h++)
                for (int w = 0; w < 4; w++)
                    for (int i = 0; i < 3; i++)
                        for (int j = 0; j < 3; j++)
                            bad += yp[((n * 2 + c) * 9 + h * 3 + i) * 12 + w * 3 + j] !=
                                   xp[((n * 18 + c * 9 + i * 3 + j) * 3 + h) * 4 + w];
    CHECK_EQ_INT(bad, 0);
    CHECK_OK(rt_pixel_unshuffle(y, 3, &z));
    tu_own(z);
    CHECK(rt_tensor_same_shape(z, x));
    CHECK(rt_rel_difference(z, x) == 0.0);
}

TU_TEST(bicubic_same_size_is_copy) {
    seed_inputs(1604);
    rt_tensor *x = RANDN(0, 1, 1, 3, 5, 7), *y = NULL;
    CHECK(x);
    CHECK_OK(rt_upsample_bicubic(x, (int64_t[]){5, 7}, NULL, &y));
    tu_own(y);
    CHECK(rt_rel_difference(y, x) == 0.0);
}

/* An op on a blocked copy of x gives the plain result and gradient (the
 * bicubic kernel reads the blocked order directly: relative 1e-6 for the
 * summation order; the shuffle reorders to plain first: exact). */
static void layout_check(const char *name, gc_fn fn, void *ctx, rt_tensor *x, double tol) {
    CHECK(x);
    rt_tensor *a = tu_own(rt_tensor_empty_like(x, RT_MEM_DATA)), *b = tu_own(rt_tensor_empty_like(x, RT_MEM_DATA));
    CHECK(a && b);
    CHECK_OK(rt_tensor_copy(a, x));
    CHECK_OK(rt_tensor_copy(b, x));
    CHECK_OK(rt_tensor_set_requires_grad(a, true));
    CHECK_OK(rt_tensor_set_requires_grad(b, true));
    rt_tensor *ya = NULL, *yb = NULL, *xb = NULL, *rb = NULL;
    CHECK_OK(fn(ctx, &a, &ya));
    tu_own(ya);
    CHECK_OK(rt_to_layout(b, RT_LAYOUT_BLOCKED, &xb));
    tu_own(xb);
    CHECK_OK(fn(ctx, &xb, &yb));
    tu_own(yb);
    rt_generator g = {77, 0};
    rt_tensor *r = tu_randn_like(&g, ya, 1.0f);
    CHECK(r);
    bool prev = rt_grad_set_enabled(false);
    rt_status st = rt_to_layout(r, yb->layout, &rb);
    rt_grad_set_enabled(prev);
    CHECK_OK(st);
    tu_own(rb);
    CHECK_OK(rt_backward(ya, r, false));
    CHECK_OK(rt_backward(yb, rb, false));
    double e = rt_rel_difference(yb, ya), eg = rt_rel_difference(b->grad, a->grad);
    printf("  layout %-16s output (%s) rel diff %.3g, grad %.3g\n", name,
           yb->layout == RT_LAYOUT_BLOCKED ? "blocked" : "plain", e, eg);
    CHECK(e <= tol && eg <= tol);
}

TU_TEST(blocked_layout) {
    seed_inputs(1605);
    const int64_t B = rt_layout_block();
    int64_t r = 2;
    layout_check("pixel_shuffle", f_shuffle, &r, RANDN(0, 1, 2, 4 * B, 3, 2), 0.0);
    up_ctx odd = {(int64_t[]){11, 13}, NULL};
    layout_check("bicubic", f_bicubic, &odd, RANDN(0, 1, 2, B, 7, 5), 1e-6);
}

TU_TEST(refusals) {
    seed_inputs(1606);
    rt_tensor *y = NULL;
    CHECK(refused(rt_pixel_shuffle(RANDN(0, 1, 1, 6, 2, 2), 2, &y), RT_ERR_SHAPE, "multiple of upscale_factor"));
    CHECK(refused(rt_pixel_shuffle(RANDN(0, 1, 1, 4, 2, 2), 0, &y), RT_ERR_INVALID_ARG, "upscale_factor"));
    CHECK(refused(rt_pixel_shuffle(RANDN(0, 1, 4, 2, 2), 2, &y), RT_ERR_SHAPE, "4-D"));
    CHECK(refused(rt_pixel_unshuffle(RANDN(0, 1, 1, 1, 3, 4), 2, &y), RT_ERR_SHAPE, "multiples"));
    CHECK(refused(rt_upsample_bicubic(RANDN(0, 1, 1, 1, 2, 2, 2), NULL, (double[]){2, 2, 2}, &y), RT_ERR_SHAPE,
                  "bicubic"));
    CHECK(refused(rt_upsample_bicubic(RANDN(0, 1, 1, 1, 2, 2), (int64_t[]){4, 4}, (double[]){2, 2}, &y),
                  RT_ERR_INVALID_ARG, "both"));
    CHECK(refused(rt_upsample_bicubic(RANDN(0, 1, 1, 1, 2, 2), NULL, (double[]){0.2, 2}, &y), RT_ERR_SHAPE,
                  ">= 1"));
    CHECK(y == NULL);
}

/* ------------------------------------------------------------ meta device */

TU_TEST(meta_shapes) {
    rt_tensor *x = tu_own(rt_tensor_create(4, (int64_t[]){2, 36, 7, 5}, RT_F32, RT_DEVICE_META, RT_MEM_DATA));
    rt_tensor *y = NULL;
    CHECK_OK(rt_pixel_shuffle(x, 3, &y));
    tu_own(y);
    CHECK(y->shape[1] == 4 && y->shape[2] == 21 && y->shape[3] == 15);
    CHECK_OK(rt_pixel_unshuffle(y, 3, &y));
    tu_own(y);
    CHECK(rt_tensor_same_shape(x, y));
    CHECK_OK(rt_upsample_bicubic(x, NULL, (double[]){0.5, 2.0}, &y));
    tu_own(y);
    CHECK(y->shape[2] == 3 && y->shape[3] == 10);
    CHECK_OK(rt_upsample_bicubic(x, (int64_t[]){11, 13}, NULL, &y));
    tu_own(y);
    CHECK(y->shape[2] == 11 && y->shape[3] == 13);
}

/* shuffle -> bicubic ×2 -> unshuffle, forward and backward, on `dev`: the
 * peak tracked bytes above the start. */
static int64_t sr_ops_peak(rt_device dev) {
    rt_tensor *x = tu_own(rt_tensor_zeros(4, (int64_t[]){2, 8, 6, 5}, RT_F32, dev, RT_MEM_DATA));
    if (!x || rt_tensor_set_requires_grad(x, true) != RT_OK) return -1;
    rt_memstats_reset_peaks();
    int64_t base = tu_live_bytes();
    rt_tensor *a = NULL, *b = NULL, *c = NULL;
    rt_status st = rt_pixel_shuffle(x, 2, &a);
    if (st == RT_OK) st = rt_upsample_bicubic(a, NULL, (double[]){2.0, 2.0}, &b);
    if (st == RT_OK) st = rt_pixel_unshuffle(b, 2, &c);
    rt_tensor_release(a);
    rt_tensor_release(b);
    if (st == RT_OK) st = rt_backward(c, c, false);
    rt_tensor_release(c);
    if (st != RT_OK) {
        fprintf(stderr, "  sr ops on %s: %s\n", dev == RT_DEVICE_META ? "meta" : "cpu", rt_error_last());
        return -1;
    }
    rt_memstats m;
    rt_memstats_get(&m);
    return m.peak_total - base;
}

/* Meta tensors predict the real run's peak to the byte. */
TU_TEST(meta_memory_matches_real) {
    int64_t cpu = sr_ops_peak(RT_DEVICE_CPU), meta = sr_ops_peak(RT_DEVICE_META);
    printf("  shuffle/bicubic/unshuffle step peak above start: cpu %lld bytes, meta %lld bytes\n", (long long)cpu,
           (long long)meta);
    CHECK(cpu > 0);
    CHECK_EQ_INT(meta, cpu);
}

/* ------------------------------------------------------------ modules */

TU_TEST(pixel_shuffle_module) {
    seed_inputs(1607);
    rt_module *m = NULL;
    CHECK(refused(rt_pixel_shuffle_create(0, &m), RT_ERR_INVALID_ARG, "upscale_factor"));
    CHECK_OK(rt_pixel_shuffle_create(2, &m));
    tu_defer(destroy_module_, m);
    rt_tensor *x = RANDN(0, 1, 1, 8, 3, 3), *y = NULL, *z = NULL;
    CHECK_OK(rt_module_forward(m, x, &y));
    tu_own(y);
    CHECK_OK(rt_pixel_shuffle(x, 2, &z));
    tu_own(z);
    CHECK(rt_rel_difference(y, z) == 0.0);
}

/* ------------------------------------------------------------ fixtures */

#define CASE_NAME(name, runner) #name,
static const char *const g_case_names[] = {OP_CASES(CASE_NAME)};

static void all_fixtures_covered(void) {
    fx_all_covered(g_case_names, (int)(sizeof g_case_names / sizeof g_case_names[0]));
}

#define CASE_ENTRY(name, runner) {"parity_" #name, parity_##name},
RT_TEST_MAIN({"gc_pixel_shuffle", gc_pixel_shuffle}, {"gc_upsample_bicubic", gc_upsample_bicubic},
             OP_CASES(CASE_ENTRY){"shuffle_roundtrip", shuffle_roundtrip},
             {"bicubic_same_size_is_copy", bicubic_same_size_is_copy}, {"blocked_layout", blocked_layout},
             {"refusals", refusals}, {"meta_shapes", meta_shapes}, {"meta_memory_matches_real", meta_memory_matches_real},
             {"pixel_shuffle_module", pixel_shuffle_module}, {"all_fixtures_covered", all_fixtures_covered})
