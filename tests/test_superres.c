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
 * - meta tensors: shapes and the bytes of a real step;
 * - EDSR: PyTorch parity of a small EDSR (weights loaded under
 *   EDSR-PyTorch's paths), parameter counts against the formula of
 *   models/edsr.h and PyTorch's count, output shapes for ×2, ×3, ×4, the
 *   reversible EDSR's gradients against plain backpropagation through the
 *   same blocks (relative 1e-4, as tests/test_reversible.c), and activation
 *   memory on meta for the 16×64 baseline against an analytic bound. */
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
#include "memory/reversible.h"
#include "models/edsr.h"
#include "nn/state_dict.h"
#include "nn/module.h"
#include "nn/modules3d.h"
#include "ops/ops3d.h"
#include "rt_test.h"
#include "test_util.h"
#include "gradcheck_util.h"

#define FIXTURE_DIR RT_SOURCE_DIR "/tests/fixtures/superres"
#include "parity_util.h"

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
static void parity_shuffle(const char *n) { fx_parity_unary(n, run_shuffle); }
static void parity_bicubic(const char *n) { fx_parity_unary(n, run_bicubic); }

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
 * kernels read the blocked order directly; the shuffle whose output
 * channels do not fill a block reorders to plain first). tol 0: the same
 * float operations in the same order. */
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
    printf("  layout %-22s output (%s) rel diff %.3g, grad %.3g\n", name,
           yb->layout == RT_LAYOUT_BLOCKED ? "blocked" : "plain", e, eg);
    CHECK(e <= tol && eg <= tol);
}

TU_TEST(blocked_layout) {
    seed_inputs(1605);
    const int64_t B = rt_layout_block();
    int64_t r = 2;
    layout_check("pixel_shuffle", f_shuffle, &r, RANDN(0, 1, 2, 4 * B, 3, 2), 0.0); /* stays blocked */
    layout_check("pixel_shuffle_to_plain", f_shuffle, &r, RANDN(0, 1, 2, 2 * B, 3, 2), 0.0); /* B/2 out */
    layout_check("pixel_unshuffle", f_unshuffle, &r, RANDN(0, 1, 2, B, 4, 6), 0.0);
    r = 3;
    layout_check("pixel_shuffle_r3", f_shuffle, &r, RANDN(0, 1, 1, 9 * B, 2, 3), 0.0);
    r = 2;
    up_ctx odd = {(int64_t[]){11, 13}, NULL};
    layout_check("bicubic", f_bicubic, &odd, RANDN(0, 1, 2, B, 7, 5), 0.0);
}

TU_TEST(refusals) {
    seed_inputs(1606);
    rt_tensor *y = NULL;
    CHECK(tu_refused(rt_pixel_shuffle(RANDN(0, 1, 1, 6, 2, 2), 2, &y), RT_ERR_SHAPE, "multiple of upscale_factor"));
    CHECK(tu_refused(rt_pixel_shuffle(RANDN(0, 1, 1, 4, 2, 2), 0, &y), RT_ERR_INVALID_ARG, "upscale_factor"));
    CHECK(tu_refused(rt_pixel_shuffle(RANDN(0, 1, 4, 2, 2), 2, &y), RT_ERR_SHAPE, "4-D"));
    CHECK(tu_refused(rt_pixel_unshuffle(RANDN(0, 1, 1, 1, 3, 4), 2, &y), RT_ERR_SHAPE, "multiples"));
    CHECK(tu_refused(rt_upsample_bicubic(RANDN(0, 1, 1, 1, 2, 2, 2), NULL, (double[]){2, 2, 2}, &y), RT_ERR_SHAPE,
                     "bicubic"));
    CHECK(tu_refused(rt_upsample_bicubic(RANDN(0, 1, 1, 1, 2, 2), (int64_t[]){4, 4}, (double[]){2, 2}, &y),
                     RT_ERR_INVALID_ARG, "both"));
    CHECK(tu_refused(rt_upsample_bicubic(RANDN(0, 1, 1, 1, 2, 2), NULL, (double[]){0.2, 2}, &y), RT_ERR_SHAPE,
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
TU_TEST(meta_memory_matches_real) { tu_meta_peak_matches("shuffle/bicubic/unshuffle", sr_ops_peak); }

/* ------------------------------------------------------------ modules */

TU_TEST(pixel_shuffle_module) {
    seed_inputs(1607);
    rt_module *m = NULL;
    CHECK(tu_refused(rt_pixel_shuffle_create(0, &m), RT_ERR_INVALID_ARG, "upscale_factor"));
    CHECK_OK(rt_pixel_shuffle_create(2, &m));
    tu_defer(destroy_module_, m);
    rt_tensor *x = RANDN(0, 1, 1, 8, 3, 3), *y = NULL, *z = NULL;
    CHECK_OK(rt_module_forward(m, x, &y));
    tu_own(y);
    CHECK_OK(rt_pixel_shuffle(x, 2, &z));
    tu_own(z);
    CHECK(rt_rel_difference(y, z) == 0.0);
}

/* rt_pixel_shuffle_inplace (and the module that calls it): the values and
 * gradients of rt_pixel_shuffle, plain and blocked. A fresh intermediate is
 * consumed (the output is its storage, its version moves); one with a
 * second reference, and a leaf that requires grad, are copied and keep
 * their values. */
TU_TEST(pixel_shuffle_inplace) {
    seed_inputs(1609);
    const int64_t B = rt_layout_block();
    for (int blocked = 0; blocked <= 1; blocked++)
        for (int shared = 0; shared <= 1; shared++) {
            rt_tensor *x = RANDN(0, 1, 2, blocked ? 4 * B : 8, 3, 2), *r = RANDN(0, 1, 2, blocked ? B : 2, 6, 4);
            CHECK(x && r);
            CHECK_OK(rt_tensor_set_requires_grad(x, true));
            rt_tensor *ys[2] = {NULL, NULL}, *gs[2] = {NULL, NULL};
            for (int inplace = 0; inplace <= 1; inplace++) {
                rt_tensor *a = NULL, *y = NULL;
                CHECK_OK(rt_mul_scalar(x, 2.0f, &a)); /* a fresh intermediate, as a convolution's output */
                if (blocked) {
                    rt_tensor *b = NULL;
                    CHECK_OK(rt_to_layout(a, RT_LAYOUT_BLOCKED, &b));
                    rt_tensor_release(a);
                    a = b;
                }
                rt_tensor *keep = shared ? tu_own(rt_tensor_empty_like(a, RT_MEM_DATA)) : NULL;
                if (keep) CHECK_OK(rt_tensor_copy(keep, a));
                rt_tensor *extra = shared ? rt_tensor_retain(a) : NULL;
                const rt_storage *before = a->storage;
                CHECK_OK(inplace ? rt_pixel_shuffle_inplace(a, 2, &y) : rt_pixel_shuffle(a, 2, &y));
                tu_own(y);
                CHECK(y->layout == a->layout);
                CHECK((y->storage == before) == (inplace && !shared));
                if (keep) CHECK(rt_rel_difference(a, keep) == 0.0); /* a copy left the shared tensor alone */
                rt_tensor_release(extra);
                rt_tensor_release(a);
                rt_tensor *yp = NULL;
                CHECK_OK(rt_to_layout(y, RT_LAYOUT_PLAIN, &yp));
                ys[inplace] = tu_own(yp);
                rt_tensor_zero_grad(x);
                CHECK_OK(rt_backward(y, r, false));
                gs[inplace] = tu_own(rt_tensor_to(x->grad, RT_F32, RT_MEM_DATA));
            }
            CHECK(rt_rel_difference(ys[1], ys[0]) == 0.0);
            CHECK(rt_rel_difference(gs[1], gs[0]) == 0.0);
        }
    /* a leaf that requires grad is never overwritten */
    rt_tensor *x = RANDN(0, 1, 1, 8, 2, 2), *copy = tu_own(rt_tensor_to(x, RT_F32, RT_MEM_DATA)), *y = NULL;
    CHECK(x && copy);
    CHECK_OK(rt_tensor_set_requires_grad(x, true));
    CHECK_OK(rt_pixel_shuffle_inplace(x, 2, &y));
    tu_own(y);
    CHECK(y->storage != x->storage && rt_rel_difference(x, copy) == 0.0);
    rt_module *m = NULL;
    CHECK(tu_refused(rt_pixel_shuffle_inplace_create(0, &m), RT_ERR_INVALID_ARG, "upscale_factor"));
}

/* rt_mul_scalar_inplace (EDSR's residual scaling): a fresh intermediate is
 * scaled in its own storage, a shared one or a leaf is copied; values and
 * gradients equal rt_mul_scalar's exactly. */
TU_TEST(mul_scalar_inplace) {
    seed_inputs(1610);
    rt_tensor *x = RANDN(0, 1, 2, 3, 4, 5), *r = RANDN(0, 1, 2, 3, 4, 5);
    CHECK(x && r);
    CHECK_OK(rt_tensor_set_requires_grad(x, true));
    for (int shared = 0; shared <= 1; shared++) {
        rt_tensor *ys[2], *gs[2];
        for (int inplace = 0; inplace <= 1; inplace++) {
            rt_tensor *a = NULL, *y = NULL;
            CHECK_OK(rt_mul_scalar(x, 2.0f, &a));
            rt_tensor *extra = shared ? rt_tensor_retain(a) : NULL;
            const rt_storage *before = a->storage;
            CHECK_OK(inplace ? rt_mul_scalar_inplace(a, 0.1f, &y) : rt_mul_scalar(a, 0.1f, &y));
            tu_own(y);
            CHECK((y->storage == before) == (inplace && !shared));
            rt_tensor_release(extra);
            rt_tensor_release(a);
            ys[inplace] = tu_own(rt_tensor_to(y, RT_F32, RT_MEM_DATA));
            rt_tensor_zero_grad(x);
            CHECK_OK(rt_backward(y, r, false));
            gs[inplace] = tu_own(rt_tensor_to(x->grad, RT_F32, RT_MEM_DATA));
        }
        CHECK(rt_rel_difference(ys[1], ys[0]) == 0.0);
        CHECK(rt_rel_difference(gs[1], gs[0]) == 0.0);
    }
    rt_tensor *copy = tu_own(rt_tensor_to(x, RT_F32, RT_MEM_DATA)), *y = NULL;
    CHECK_OK(rt_mul_scalar_inplace(x, 3.0f, &y)); /* a leaf that requires grad: never overwritten */
    tu_own(y);
    CHECK(y->storage != x->storage && rt_rel_difference(x, copy) == 0.0);
}

/* The backward of a pixel shuffle permutes a gradient nothing else holds in
 * place: x (leaf, T bytes) -> ·2 -> shuffle -> ·3, backward: while the shuffle's
 * backward runs (its trace events), the live bytes above the start are the
 * gradient 3·dz (T) and a one-image scratch (T/N), never the T of a second
 * gradient (the ·2 keeps the leaf's .grad, booked when the gradient
 * reaches it, out of the shuffle's events); the meta device books the same. */
static int64_t shuffle_backward_peak(rt_device dev) {
    rt_tensor *x = tu_own(rt_tensor_zeros(4, (int64_t[]){4, 16, 6, 5}, RT_F32, dev, RT_MEM_DATA)), *a = NULL,
              *y = NULL, *z = NULL;
    if (!x || rt_tensor_set_requires_grad(x, true) != RT_OK) return -1;
    rt_status st = rt_mul_scalar(x, 2.0f, &a);
    if (st == RT_OK) st = rt_pixel_shuffle(a, 2, &y);
    rt_tensor_release(a);
    if (st == RT_OK) st = rt_mul_scalar(y, 3.0f, &z);
    rt_tensor_release(y);
    if (st != RT_OK) return -1;
    tu_own(z);
    rt_memstats m;
    rt_memstats_get(&m);
    rt_mem_trace_enable(1);
    rt_status st2 = rt_backward(z, z, false);
    size_t n = 0;
    const rt_mem_event *e = rt_mem_trace_events(&n);
    int64_t most = -1;
    for (size_t i = 0; i < n; i++)
        if (strcmp(e[i].op, "backward:pixel_shuffle") == 0 && e[i].live_total - m.live_total > most)
            most = e[i].live_total - m.live_total;
    rt_mem_trace_enable(0);
    return st2 == RT_OK ? most : -1;
}

TU_TEST(pixel_shuffle_backward_in_place) {
    const int64_t T = 4 * 16 * 6 * 5 * 4;
    const int64_t cpu = shuffle_backward_peak(RT_DEVICE_CPU), meta = shuffle_backward_peak(RT_DEVICE_META);
    printf("  most live above the start during the shuffle's backward: cpu %lld, meta %lld bytes; one gradient "
           "T = %lld, one image T/4\n", (long long)cpu, (long long)meta, (long long)T);
    CHECK_EQ_INT(meta, cpu);
    CHECK_EQ_INT(cpu, T + T / 4);
}

/* ------------------------------------------------------------ EDSR */

static void destroy_sd_(void *sd) { rt_state_dict_destroy(sd); }

/* EDSR of cfg on dev from Philox stream seed, its state dict in *sd (both
 * freed at the end of the test). */
static rt_module *edsr(const rt_edsr_config *cfg, rt_device dev, uint64_t seed, rt_state_dict **sd) {
    rt_init_ctx ctx = rt_init_ctx_make(dev, seed);
    rt_module *net = NULL;
    if (rt_edsr_build(cfg, &ctx, &net) != RT_OK) {
        fprintf(stderr, "  rt_edsr_build: %s\n", rt_error_last());
        return NULL;
    }
    tu_defer(destroy_module_, net);
    if (sd) {
        if (rt_module_state_dict(net, sd) != RT_OK) return NULL;
        tu_defer(destroy_sd_, *sd);
    }
    return net;
}

static rt_edsr_config small_cfg(void) {
    return (rt_edsr_config){.in_channels = 1, .out_channels = 1, .n_resblocks = 2, .n_feats = 8, .res_scale = 0.1f,
                            .scale = 2};
}

/* The fixture's EDSR (EDSR-PyTorch's tree): weights copied in by state-dict
 * path, forward, backward of sum(y·grad_y); y, the input gradient and every
 * parameter gradient compared; then the counts PyTorch reported for the
 * RGB baselines against rt_edsr_num_params and a built tree. */
static void parity_edsr(const char *name) {
    rt_st_file *f = fx_open(name);
    CHECK(f);
    int64_t in, blocks, feats, scale;
    CHECK(fx_ints(f, "in_channels", 1, &in) && fx_ints(f, "n_resblocks", 1, &blocks) &&
          fx_ints(f, "n_feats", 1, &feats) && fx_ints(f, "scale", 1, &scale));
    rt_edsr_config cfg = {.in_channels = in, .out_channels = in, .n_resblocks = (int)blocks, .n_feats = feats,
                          .res_scale = (float)fx_double(f, "res_scale"), .scale = (int)scale};
    rt_state_dict *sd = NULL;
    rt_module *net = edsr(&cfg, RT_DEVICE_CPU, 1, &sd);
    CHECK(net);
    int n_params = 0;
    for (int i = 0; i < sd->n; i++) {
        rt_state_entry *e = &sd->entries[i];
        CHECK(e->kind == RT_ENTRY_PARAM);
        rt_tensor *t = fx_tensor(f, e->name, false);
        CHECK(t && rt_tensor_same_shape(t, e->tensor));
        CHECK_OK(rt_tensor_copy(e->tensor, t));
        n_params++;
    }
    int fixture_params = 0;
    for (size_t i = 0; i < rt_st_count(f); i++) { /* every tensor but x, y and grad* is a parameter */
        const char *en = rt_st_entry_at(f, i)->name;
        fixture_params += strncmp(en, "grad", 4) != 0 && strcmp(en, "x") != 0 && strcmp(en, "y") != 0;
    }
    printf("  %d parameters loaded by path (the fixture has %d), %lld elements\n", n_params, fixture_params,
           (long long)rt_state_dict_num_param_elements(sd));
    CHECK_EQ_INT(n_params, fixture_params);
    int64_t want;
    CHECK(fx_ints(f, "params", 1, &want));
    CHECK_EQ_INT(rt_state_dict_num_param_elements(sd), want);
    rt_tensor *x = fx_tensor(f, "x", true), *y = NULL;
    CHECK(x);
    CHECK_OK(rt_module_forward(net, x, &y));
    tu_own(y);
    fx_forward_backward(f, y, "y", "grad_y");
    fx_compare_grad(f, "grad_x", x);
    char gname[160];
    for (int i = 0; i < sd->n; i++) {
        snprintf(gname, sizeof gname, "grad.%s", sd->entries[i].name);
        fx_compare(f, gname, sd->entries[i].tensor->grad);
    }
    /* PyTorch's counts of the RGB baseline (16 × 64) at ×2, ×3, ×4 */
    const char *keys[3] = {"baseline_params_x2_rgb", "baseline_params_x3_rgb", "baseline_params_x4_rgb"};
    for (int s = 2; s <= 4; s++) {
        rt_edsr_config b = {.in_channels = 3, .out_channels = 3, .n_resblocks = 16, .n_feats = 64,
                            .res_scale = 0.1f, .scale = s};
        CHECK(fx_ints(f, keys[s - 2], 1, &want));
        rt_state_dict *bsd = NULL;
        CHECK(edsr(&b, RT_DEVICE_META, 1, &bsd));
        printf("  EDSR baseline RGB x%d: PyTorch %lld parameters, formula %lld, built %lld\n", s, (long long)want,
               (long long)rt_edsr_num_params(&b), (long long)rt_state_dict_num_param_elements(bsd));
        CHECK_EQ_INT(rt_edsr_num_params(&b), want);
        CHECK_EQ_INT(rt_state_dict_num_param_elements(bsd), want);
    }
}

#define EDSR_CASES(X) X(edsr_small, parity_edsr)
EDSR_CASES(DEFINE_CASE)

/* Output shapes at ×2, ×3, ×4, plain and reversible; parameter counts of
 * built trees equal the formula (rt_edsr_num_params), including the
 * 1-channel baselines quoted in models/edsr.h. */
TU_TEST(edsr_shapes_and_counts) {
    rt_tensor *x = tu_own(rt_tensor_create(4, (int64_t[]){2, 1, 10, 7}, RT_F32, RT_DEVICE_META, RT_MEM_DATA));
    CHECK(x);
    for (int rev = 0; rev <= 2; rev++) /* plain, reversible, reversible with a 2F stream */
        for (int s = 2; s <= 4; s++) {
            rt_edsr_config c = small_cfg();
            c.scale = s;
            c.reversible = rev > 0;
            c.rev_width = rev == 2 ? 2 * c.n_feats : 0;
            c.out_channels = 2;
            rt_state_dict *sd = NULL;
            rt_module *net = edsr(&c, RT_DEVICE_META, 3, &sd);
            CHECK(net);
            rt_tensor *y = NULL;
            CHECK_OK(rt_module_forward(net, x, &y));
            tu_own(y);
            CHECK(y->ndim == 4 && y->shape[0] == 2 && y->shape[1] == 2 && y->shape[2] == 10 * s &&
                  y->shape[3] == 7 * s);
            CHECK_EQ_INT(rt_state_dict_num_param_elements(sd), rt_edsr_num_params(&c));
            CHECK_EQ_INT(rt_module_count_reversible(net), rev > 0);
        }
    /* the baselines of models/edsr.h's comment: 1 channel ×2 */
    rt_edsr_config c;
    CHECK_OK(rt_edsr_config_get("edsr", &c));
    CHECK_EQ_INT(rt_edsr_num_params(&c), 1367553);
    CHECK_OK(rt_edsr_config_get("edsr_rev", &c));
    CHECK_EQ_INT(rt_edsr_num_params(&c), 1368577);
    rt_state_dict *sd = NULL;
    CHECK(edsr(&c, RT_DEVICE_META, 3, &sd));
    CHECK_EQ_INT(rt_state_dict_num_param_elements(sd), 1368577);
    CHECK(rt_state_dict_find(sd, "body.15.g.2.weight") && rt_state_dict_find(sd, "body.16.weight") &&
          rt_state_dict_find(sd, "tail.0.0.weight") && rt_state_dict_find(sd, "tail.1.bias"));
    c.rev_hidden = 32;
    CHECK_EQ_INT(rt_edsr_num_params(&c), 777729);
    c.rev_hidden = 0;
    c.n_resblocks = 8;
    c.rev_width = 128; /* each F and G one of EDSR's residual bodies */
    CHECK_EQ_INT(rt_edsr_num_params(&c), 1404417);
    CHECK(edsr(&c, RT_DEVICE_META, 3, &sd));
    CHECK_EQ_INT(rt_state_dict_num_param_elements(sd), 1404417);
    CHECK(rt_state_dict_find(sd, "body.7.f.0.weight")->tensor->shape[1] == 64 &&
          rt_state_dict_find(sd, "body.8.weight")->tensor->shape[1] == 128);
    printf("  EDSR 16x64, 1 channel, x2: plain 1367553, reversible (hidden 64) 1368577, (hidden 32) 777729, "
           "(8 blocks, stream 128) 1404417\n");
    c.rev_width = 96;
    CHECK(tu_refused(rt_edsr_build(&c, &(rt_init_ctx){0}, &(rt_module *){NULL}), RT_ERR_INVALID_ARG, "rev_width"));
    c.rev_width = 5 * 64;
    CHECK(tu_refused(rt_edsr_build(&c, &(rt_init_ctx){0}, &(rt_module *){NULL}), RT_ERR_INVALID_ARG, "rev_width"));
    c.rev_width = 0;
    c.n_resblocks = 16;
    c.n_feats = 63;
    CHECK(tu_refused(rt_edsr_build(&c, &(rt_init_ctx){0}, &(rt_module *){NULL}), RT_ERR_INVALID_ARG, "even"));
    c.n_feats = 64;
    c.scale = 5;
    CHECK(tu_refused(rt_edsr_build(&c, &(rt_init_ctx){0}, &(rt_module *){NULL}), RT_ERR_INVALID_ARG, "scale"));
}

/* The reversible EDSR's gradients equal plain backpropagation through the
 * same blocks (rt_module_set_reversible(net, false)): same seed, same
 * parameters, same input and upstream gradient; every parameter gradient
 * and the input gradient within 1e-4 relative (tests/test_reversible.c's
 * tolerance), outputs within 1e-6; for the F-wide stream and the 2F one. */
static void edsr_reversible_gradients_width(int64_t width_factor) {
    rt_edsr_config c = small_cfg();
    c.n_resblocks = 4;
    c.n_feats = 16;
    c.reversible = true;
    c.rev_width = width_factor * c.n_feats;
    rt_state_dict *sa = NULL, *sb = NULL;
    rt_module *a = edsr(&c, RT_DEVICE_CPU, 9, &sa), *b = edsr(&c, RT_DEVICE_CPU, 9, &sb);
    CHECK(a && b);
    rt_module_set_reversible(a, false);
    rt_tensor *x = RANDN(0, 1, 2, 1, 12, 10), *xa = NULL, *xb = NULL, *ya = NULL, *yb = NULL;
    CHECK(x);
    xa = tu_own(rt_tensor_empty_like(x, RT_MEM_DATA));
    xb = tu_own(rt_tensor_empty_like(x, RT_MEM_DATA));
    CHECK_OK(rt_tensor_copy(xa, x));
    CHECK_OK(rt_tensor_copy(xb, x));
    CHECK_OK(rt_tensor_set_requires_grad(xa, true));
    CHECK_OK(rt_tensor_set_requires_grad(xb, true));
    CHECK_OK(rt_module_forward(a, xa, &ya));
    tu_own(ya);
    CHECK_OK(rt_module_forward(b, xb, &yb));
    tu_own(yb);
    rt_generator g = {5, 0};
    rt_tensor *r = tu_randn_like(&g, ya, 1.0f);
    CHECK(r);
    CHECK_OK(rt_backward(ya, r, false));
    CHECK_OK(rt_backward(yb, r, false));
    double ey = rt_rel_difference(yb, ya), ex = rt_rel_difference(xb->grad, xa->grad), worst = 0.0;
    const char *worst_name = "";
    CHECK_EQ_INT(sa->n, sb->n);
    for (int i = 0; i < sa->n; i++) {
        rt_tensor *ga = sa->entries[i].tensor->grad, *gb = sb->entries[i].tensor->grad;
        CHECK(ga && gb);
        double e = rt_rel_difference(gb, ga);
        if (!(e <= worst)) {
            worst = e;
            worst_name = sa->entries[i].name;
        }
    }
    printf("  stream %lldF, reversible vs plain: output rel %.3g, input grad rel %.3g, worst parameter grad rel %.3g (%s), "
           "%d parameters\n", (long long)width_factor, ey, ex, worst, worst_name, sa->n);
    CHECK(ey <= 1e-6);
    CHECK(ex <= 1e-4);
    CHECK(worst <= 1e-4);
}
TU_TEST(edsr_reversible_gradients) {
    seed_inputs(1608);
    edsr_reversible_gradients_width(1);
    edsr_reversible_gradients_width(2); /* the stream starts as two copies of the head's output */
}

/* One training step's memory on meta: forward, backward of sum(y·r).
 * saved: SAVED bytes live at the end of the forward (what backward keeps);
 * peak: the step's peak of all bytes above those live before it (the
 * parameters), gradients and temporaries included. */
typedef struct edsr_mem {
    int64_t saved, peak, grads;
} edsr_mem;

static bool edsr_step_memory_on(rt_device dev, const rt_edsr_config *c, int64_t n, int64_t h, int64_t w,
                                edsr_mem *out) {
    rt_module *net = edsr(c, dev, 1, NULL);
    rt_tensor *x = tu_own(rt_tensor_zeros(4, (int64_t[]){n, c->in_channels, h, w}, RT_F32, dev, RT_MEM_DATA));
    if (!net || !x) return false;
    rt_memstats m0, m1, m2;
    rt_memstats_get(&m0);
    rt_memstats_reset_peaks();
    rt_tensor *y = NULL;
    rt_status st = rt_module_forward(net, x, &y);
    rt_memstats_get(&m1);
    if (st == RT_OK) st = rt_backward(y, y, false); /* the upstream gradient's values do not matter */
    rt_tensor_release(y);
    rt_memstats_get(&m2);
    if (st != RT_OK) {
        fprintf(stderr, "  EDSR step on meta: %s\n", rt_error_last());
        return false;
    }
    out->saved = m1.live[RT_MEM_SAVED] - m0.live[RT_MEM_SAVED];
    out->peak = m2.peak_total - m0.live_total;
    out->grads = m2.live[RT_MEM_GRAD] - m0.live[RT_MEM_GRAD];
    return true;
}

static bool edsr_step_memory(const rt_edsr_config *c, int64_t n, int64_t h, int64_t w, edsr_mem *out) {
    return edsr_step_memory_on(RT_DEVICE_META, c, n, h, w, out);
}

/* The meta device books exactly the bytes of a real EDSR step (plain and
 * reversible, F = 16 so the blocked order and the blocked pixel shuffle
 * run), so the baseline's numbers below are those of a real step. */
TU_TEST(edsr_meta_matches_real) {
    for (int rev = 0; rev <= 2; rev++) { /* plain, reversible, reversible with a 2F stream */
        rt_edsr_config c = small_cfg();
        c.n_feats = 16;
        c.reversible = rev > 0;
        c.rev_width = rev == 2 ? 32 : 0;
        edsr_mem cpu, meta;
        CHECK(edsr_step_memory_on(RT_DEVICE_CPU, &c, 2, 10, 12, &cpu));
        CHECK(edsr_step_memory_on(RT_DEVICE_META, &c, 2, 10, 12, &meta));
        printf("  %s EDSR step: saved cpu %lld / meta %lld bytes, peak cpu %lld / meta %lld bytes\n",
               rev == 2 ? "reversible 2F-stream" : rev ? "reversible" : "plain", (long long)cpu.saved, (long long)meta.saved, (long long)cpu.peak,
               (long long)meta.peak);
        CHECK(cpu.peak > 0);
        CHECK_EQ_INT(meta.saved, cpu.saved);
        CHECK_EQ_INT(meta.peak, cpu.peak);
    }
}

/* The 16 × 64 baseline (1 channel, ×2) at batch 4 of 48 × 48 low-resolution
 * patches (EDSR's training patch, 96 × 96 at the output). With a = N·H·W·4
 * bytes (one channel of the low-resolution batch) and s the scale:
 *   plain EDSR keeps, per residual block, its input (for conv 1) and the
 *   ReLU's output (for ReLU's backward and conv 2): at least 2·B·F·a bytes
 *   (32 F·a at B = 16);
 *   the reversible EDSR keeps, whatever B, the sequence's output (which is
 *   also the body conv's input, F·a), the skip sum (the upsampler conv's
 *   input, F·a) and the last conv's input after the pixel shuffle
 *   (s²·F·a), plus the input x (c·a, when it is not DATA): at most
 *   (c + (2 + s²)·F)·a — 6 F·a at ×2, 16% of plain's bound.
 * Asserted: both bounds; the reversible saved bytes equal at B = 4 and 16;
 * the reversible step's peak grows from B = 4 to 16 by at most the 12 extra
 * blocks' parameter gradients (nothing else in it depends on depth); and
 * it stays below plain's peak (printed: the ratio depends on where the
 * convolution algorithm's scratch puts the peak, see the report). */
TU_TEST(edsr_memory_meta) {
    rt_edsr_config c;
    CHECK_OK(rt_edsr_config_get("edsr", &c));
    const int64_t n = 4, h = 48, w = 48, a = n * h * w * 4, F = c.n_feats, s = c.scale;
    edsr_mem plain, rev, rev4;
    CHECK(edsr_step_memory(&c, n, h, w, &plain));
    c.reversible = true;
    CHECK(edsr_step_memory(&c, n, h, w, &rev));
    c.n_resblocks = 4;
    CHECK(edsr_step_memory(&c, n, h, w, &rev4));
    printf("  EDSR 16x64 x2, batch %lld of %lldx%lld, one channel of it a = %lld bytes:\n", (long long)n,
           (long long)h, (long long)w, (long long)a);
    printf("    plain       saved %10lld bytes (%5.1f F·a), step peak %10lld bytes (grads %lld)\n",
           (long long)plain.saved, (double)plain.saved / (double)(F * a), (long long)plain.peak,
           (long long)plain.grads);
    printf("    reversible  saved %10lld bytes (%5.1f F·a), step peak %10lld bytes (grads %lld)\n",
           (long long)rev.saved, (double)rev.saved / (double)(F * a), (long long)rev.peak, (long long)rev.grads);
    printf("    reversible with 4 blocks: saved %lld bytes, step peak %lld bytes\n", (long long)rev4.saved,
           (long long)rev4.peak);
    printf("    saved ratio %.3f, step peak ratio %.3f\n", (double)rev.saved / (double)plain.saved,
           (double)rev.peak / (double)plain.peak);
    CHECK(plain.saved >= 2 * 16 * F * a);
    CHECK(rev.saved <= (c.in_channels + (2 + s * s) * F) * a);
    CHECK_EQ_INT(rev4.saved, rev.saved);
    rt_edsr_config c16 = c;
    c16.n_resblocks = 16;
    const int64_t extra_grads = (rt_edsr_num_params(&c16) - rt_edsr_num_params(&c)) * 4;
    CHECK(rev.peak >= rev4.peak && rev.peak - rev4.peak <= extra_grads);
    CHECK(rev.peak < plain.peak);
}

/* ------------------------------------------------------------ fixtures */

#define CASE_NAME(name, runner) #name,
static const char *const g_case_names[] = {OP_CASES(CASE_NAME) EDSR_CASES(CASE_NAME)};

static void all_fixtures_covered(void) {
    fx_all_covered(g_case_names, (int)(sizeof g_case_names / sizeof g_case_names[0]));
}

#define CASE_ENTRY(name, runner) {"parity_" #name, parity_##name},
RT_TEST_MAIN({"gc_pixel_shuffle", gc_pixel_shuffle}, {"gc_upsample_bicubic", gc_upsample_bicubic},
             OP_CASES(CASE_ENTRY){"shuffle_roundtrip", shuffle_roundtrip},
             {"bicubic_same_size_is_copy", bicubic_same_size_is_copy}, {"blocked_layout", blocked_layout},
             {"refusals", refusals}, {"meta_shapes", meta_shapes}, {"meta_memory_matches_real", meta_memory_matches_real},
             {"pixel_shuffle_module", pixel_shuffle_module}, {"pixel_shuffle_inplace", pixel_shuffle_inplace},
             {"mul_scalar_inplace", mul_scalar_inplace},
             {"pixel_shuffle_backward_in_place", pixel_shuffle_backward_in_place}, EDSR_CASES(CASE_ENTRY){"edsr_shapes_and_counts",
             edsr_shapes_and_counts}, {"edsr_reversible_gradients", edsr_reversible_gradients},
             {"edsr_meta_matches_real", edsr_meta_matches_real}, {"edsr_memory_meta", edsr_memory_meta},
             {"all_fixtures_covered", all_fixtures_covered})
