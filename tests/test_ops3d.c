/* The 3-D operators of issue 13 (ops/ops3d.h, nn/modules3d.h and the 3-D
 * cases of ops/ops.h):
 * - gradient checks against central finite differences (the harness and
 *   tolerances of test_gradcheck.c, tests/gradcheck_util.h);
 * - PyTorch 1.13 parity: every fixture in tests/fixtures/ops3d (written by
 *   tools/make_fixtures.py) replayed, output and gradients within 1e-4
 *   relative (tests/parity_util.h); all_fixtures_covered fails on a fixture
 *   without a case;
 * - the blocked activation layout (nCdhw{B}c): each op on a blocked input
 *   gives the plain input's output and gradients;
 * - the refusals the issue asks for (bad sizes, a single spatial element,
 *   output_padding, labels out of range) and the modules' shapes and state. */
#include <dirent.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/engine.h"
#include "autograd/node.h"
#include "core/rng.h"
#include "core/tensor.h"
#include "io/safetensors.h"
#include "kernels/pool.h"
#include "nn/module.h"
#include "nn/modules3d.h"
#include "nn/state_dict.h"
#include "ops/ops3d.h"
#include "rt_test.h"
#include "test_util.h"
#include "gradcheck_util.h"

#define FIXTURE_DIR RT_SOURCE_DIR "/tests/fixtures/ops3d"
#include "parity_util.h"

/* Random int32 labels in [0, c) of `shape` (owned). */
static rt_tensor *labels(int ndim, const int64_t *shape, int64_t c) {
    rt_tensor *t = tu_own(rt_tensor_create(ndim, shape, RT_I32, RT_DEVICE_CPU, RT_MEM_DATA));
    if (!t) return NULL;
    int32_t *p = rt_tensor_data(t);
    for (int64_t i = 0; i < rt_tensor_numel(t); i++) {
        float u;
        rt_generator_uniform(&g_rng, 1, &u);
        p[i] = (int32_t)(u * (float)c);
        if (p[i] >= c) p[i] = (int32_t)c - 1;
    }
    return t;
}

/* ------------------------------------------------------------ gradient checks */

static rt_status f_conv(void *ctx, rt_tensor *const *in, rt_tensor **out) {
    return rt_conv(in[0], in[1], in[2], ctx, out);
}
static rt_status f_convt(void *ctx, rt_tensor *const *in, rt_tensor **out) {
    return rt_conv_transpose(in[0], in[1], in[2], ctx, out);
}
static rt_status f_convt_nobias(void *ctx, rt_tensor *const *in, rt_tensor **out) {
    return rt_conv_transpose(in[0], in[1], NULL, ctx, out);
}

TU_TEST(gc_conv3d_dilation_groups) {
    seed_inputs(301);
    rt_conv_opts o = {.stride = {1, 2, 1}, .padding = {2, 0, 1}, .dilation = {2, 1, 1}, .groups = 2};
    CHECK(GC("conv3d_dil_groups", f_conv, &o, 1e-2f, RANDN(0, 1, 2, 4, 5, 5, 4), RANDN(0, 0.3f, 6, 2, 3, 2, 3),
             RANDN(0, 0.3f, 6)));
}

TU_TEST(gc_conv_transpose3d) {
    seed_inputs(302);
    rt_conv_transpose_opts k2 = {.stride = {2, 2, 2}};
    CHECK(GC("conv_transpose3d_k2s2", f_convt, &k2, 1e-2f, RANDN(0, 1, 2, 3, 2, 3, 2), RANDN(0, 0.3f, 3, 4, 2, 2, 2),
             RANDN(0, 0.3f, 4)));
    rt_conv_transpose_opts m = {.stride = {2, 1, 2}, .padding = {1, 1, 0}, .output_padding = {1, 0, 1},
                                .dilation = {1, 2, 1}, .groups = 2};
    CHECK(GC("conv_transpose3d_mixed", f_convt_nobias, &m, 1e-2f, RANDN(0, 1, 1, 4, 2, 3, 2),
             RANDN(0, 0.3f, 4, 3, 3, 3, 3)));
}

typedef struct up_ctx {
    const int64_t *size;
    const double *scale;
} up_ctx;
static rt_status f_up(void *ctx, rt_tensor *const *in, rt_tensor **out) {
    up_ctx *u = ctx;
    return rt_upsample_linear(in[0], u->size, u->scale, out);
}

TU_TEST(gc_upsample_trilinear) {
    seed_inputs(303);
    up_ctx x2 = {NULL, (double[]){2.0, 2.0, 2.0}};
    CHECK(GC("upsample_trilinear_x2", f_up, &x2, 1e-2f, RANDN(0, 1, 1, 2, 2, 3, 2)));
    up_ctx sz = {(int64_t[]){5, 2, 3}, NULL}; /* up on D, down on H, non-integer ratio on W */
    CHECK(GC("upsample_trilinear_size", f_up, &sz, 1e-2f, RANDN(0, 1, 2, 1, 3, 4, 2)));
    up_ctx fr = {NULL, (double[]){1.7, 2.5, 1.3}};
    CHECK(GC("upsample_trilinear_frac", f_up, &fr, 1e-2f, RANDN(0, 1, 1, 2, 3, 2, 3)));
}

static rt_status f_gn(void *ctx, rt_tensor *const *in, rt_tensor **out) {
    return rt_group_norm(in[0], *(int64_t *)ctx, in[1], in[2], 1e-5f, out);
}
static rt_status f_gn_noaffine(void *ctx, rt_tensor *const *in, rt_tensor **out) {
    return rt_group_norm(in[0], *(int64_t *)ctx, NULL, NULL, 1e-5f, out);
}

TU_TEST(gc_group_norm) {
    seed_inputs(304);
    int64_t g = 2;
    CHECK(GC("group_norm_affine", f_gn, &g, 1e-2f, RANDN(0.5f, 2, 2, 4, 2, 3, 2), RANDN(1, 0.5f, 4),
             RANDN(0, 0.5f, 4)));
    g = 3;
    CHECK(GC("group_norm_noaffine", f_gn_noaffine, &g, 1e-2f, RANDN(0, 1, 1, 3, 2, 2, 3)));
}

typedef struct in_ctx {
    rt_tensor *rm, *rv;
    bool input_stats;
} in_ctx;
static rt_status f_in(void *ctx, rt_tensor *const *in, rt_tensor **out) {
    in_ctx *c = ctx;
    return rt_instance_norm(in[0], c->rm, c->rv, in[1], in[2], c->input_stats, 0.1f, 1e-5f, out);
}

TU_TEST(gc_instance_norm) {
    seed_inputs(305);
    in_ctx train = {NULL, NULL, true};
    CHECK(GC("instance_norm3d", f_in, &train, 1e-2f, RANDN(0.5f, 2, 2, 3, 2, 3, 2), RANDN(1, 0.5f, 3),
             RANDN(0, 0.5f, 3)));
    in_ctx eval = {RANDN(0, 0.5f, 3), RANDN(1.0f, 0.1f, 3), false};
    CHECK(GC("instance_norm3d_eval", f_in, &eval, 1e-2f, RANDN(0.5f, 2, 2, 3, 2, 3, 2), RANDN(1, 0.5f, 3),
             RANDN(0, 0.5f, 3)));
}

static rt_status f_softmax(void *ctx, rt_tensor *const *in, rt_tensor **out) {
    return rt_softmax_channels(in[0], out);
}
static rt_status f_sigmoid(void *ctx, rt_tensor *const *in, rt_tensor **out) { return rt_sigmoid(in[0], out); }
static rt_status f_leaky(void *ctx, rt_tensor *const *in, rt_tensor **out) {
    return rt_leaky_relu(in[0], 0.01f, out);
}
static rt_status f_cat(void *ctx, rt_tensor *const *in, rt_tensor **out) { return rt_cat_channels(2, in, out); }

TU_TEST(gc_pointwise_and_channels) {
    seed_inputs(306);
    CHECK(GC("softmax_channels", f_softmax, NULL, 1e-2f, RANDN(0, 2, 2, 4, 2, 3, 2)));
    CHECK(GC("sigmoid3d", f_sigmoid, NULL, 1e-2f, RANDN(0, 2, 1, 2, 2, 3, 2)));
    CHECK(GC("leaky_relu3d", f_leaky, NULL, 1e-3f, randn_away_from_zero(5, (int64_t[]){1, 2, 2, 3, 2}, 0.05f)));
    CHECK(GC("cat_channels3d", f_cat, NULL, 1e-2f, RANDN(0, 1, 2, 2, 2, 2, 3), RANDN(0, 1, 2, 3, 2, 2, 3)));
}

typedef struct loss_ctx {
    rt_tensor *target, *weight;
    bool batch_dice, include_background;
} loss_ctx;
static rt_status f_ce(void *ctx, rt_tensor *const *in, rt_tensor **out) {
    loss_ctx *c = ctx;
    return rt_cross_entropy_nd(in[0], c->target, c->weight, out);
}
static rt_status f_dice(void *ctx, rt_tensor *const *in, rt_tensor **out) {
    loss_ctx *c = ctx;
    return rt_soft_dice_loss(in[0], c->target, 1e-5f, c->batch_dice, c->include_background, out);
}

/* Positive "probabilities" (the loss is defined for any positive values). */
static rt_tensor *positive(int ndim, const int64_t *shape) {
    rt_tensor *t = randn(ndim, shape, 0.0f, 1.0f);
    if (!t) return NULL;
    float *p = rt_tensor_f32(t);
    for (int64_t i = 0; i < rt_tensor_numel(t); i++) p[i] = 0.1f + 0.5f * fabsf(p[i]);
    return t;
}

TU_TEST(gc_losses) {
    seed_inputs(307);
    loss_ctx ce = {labels(4, (int64_t[]){2, 3, 2, 2}, 4), NULL, false, false};
    CHECK(GC("cross_entropy3d", f_ce, &ce, 1e-2f, RANDN(0, 2, 2, 4, 3, 2, 2)));
    ce.weight = RANDN(1, 0.3f, 4);
    CHECK(GC("cross_entropy3d_weighted", f_ce, &ce, 1e-2f, RANDN(0, 2, 2, 4, 3, 2, 2)));
    loss_ctx d = {labels(4, (int64_t[]){2, 3, 2, 2}, 3), NULL, true, false};
    CHECK(GC("soft_dice_batch_nobg", f_dice, &d, 1e-3f, positive(5, (int64_t[]){2, 3, 3, 2, 2})));
    d.batch_dice = false;
    d.include_background = true;
    CHECK(GC("soft_dice_sample_bg", f_dice, &d, 1e-3f, positive(5, (int64_t[]){2, 3, 3, 2, 2})));
}

/* ------------------------------------------------------------ parity */

/* Runs y = op(x, the fixture's parameters) and compares y and every gradient. */
typedef rt_status (*fx_op)(rt_st_file *f, rt_tensor *const *in, rt_tensor **y);

/* Inputs, in order: x, weight, bias, x2 (absent ones NULL); extra: running
 * stats for the norms. */
static void parity_run(const char *name, fx_op run) {
    rt_st_file *f = fx_open(name);
    CHECK(f);
    const char *names[4] = {"x", "weight", "bias", "x2"};
    const char *grads[4] = {"grad_x", "grad_weight", "grad_bias", "grad_x2"};
    rt_tensor *in[4] = {0}, *y = NULL;
    for (int i = 0; i < 4; i++)
        if (rt_st_find(f, names[i])) CHECK((in[i] = fx_tensor(f, names[i], rt_st_find(f, grads[i]) != NULL)));
    CHECK_OK(run(f, in, &y));
    tu_own(y);
    fx_forward_backward(f, y, "y", "grad_y");
    for (int i = 0; i < 4; i++)
        if (rt_st_find(f, grads[i])) fx_compare_grad(f, grads[i], in[i]);
}

static rt_status run_conv3d(rt_st_file *f, rt_tensor *const *in, rt_tensor **y) {
    rt_conv_opts o = {0};
    if (!fx_ints(f, "stride", 3, o.stride) || !fx_ints(f, "padding", 3, o.padding) ||
        !fx_ints(f, "dilation", 3, o.dilation) || !fx_ints(f, "groups", 1, &o.groups))
        return rt_error_set(RT_ERR_INVALID_ARG, "fixture metadata");
    return rt_conv(in[0], in[1], in[2], &o, y);
}
static rt_status run_convt3d(rt_st_file *f, rt_tensor *const *in, rt_tensor **y) {
    rt_conv_transpose_opts o = {0};
    if (!fx_ints(f, "stride", 3, o.stride) || !fx_ints(f, "padding", 3, o.padding) ||
        !fx_ints(f, "output_padding", 3, o.output_padding) || !fx_ints(f, "dilation", 3, o.dilation) ||
        !fx_ints(f, "groups", 1, &o.groups))
        return rt_error_set(RT_ERR_INVALID_ARG, "fixture metadata");
    return rt_conv_transpose(in[0], in[1], in[2], &o, y);
}
static rt_status run_upsample(rt_st_file *f, rt_tensor *const *in, rt_tensor **y) {
    int64_t size[3];
    const char *sc = rt_st_metadata(f, "scale_factor");
    if (!fx_ints(f, "size", 3, size) || !sc) return rt_error_set(RT_ERR_INVALID_ARG, "fixture metadata");
    double scale[3];
    char *end;
    scale[0] = strtod(sc, &end);
    scale[1] = strtod(end + 1, &end);
    scale[2] = strtod(end + 1, &end);
    return rt_upsample_linear(in[0], size[0] ? size : NULL, size[0] ? NULL : scale, y);
}
static rt_status run_pool3d(rt_st_file *f, rt_tensor *const *in, rt_tensor **y) {
    rt_pool_opts o = {0};
    const char *op = rt_st_metadata(f, "op");
    if (!op || !fx_ints(f, "kernel_size", 3, o.kernel) || !fx_ints(f, "stride", 3, o.stride) ||
        !fx_ints(f, "padding", 3, o.padding))
        return rt_error_set(RT_ERR_INVALID_ARG, "fixture metadata");
    return (strcmp(op, "max_pool3d") == 0 ? rt_max_pool : rt_avg_pool)(in[0], &o, y);
}
static rt_status run_leaky(rt_st_file *f, rt_tensor *const *in, rt_tensor **y) {
    return rt_leaky_relu(in[0], (float)fx_double(f, "negative_slope"), y);
}
static rt_status run_sigmoid(rt_st_file *f, rt_tensor *const *in, rt_tensor **y) { return rt_sigmoid(in[0], y); }
static rt_status run_softmax(rt_st_file *f, rt_tensor *const *in, rt_tensor **y) {
    return rt_softmax_channels(in[0], y);
}
static rt_status run_cat(rt_st_file *f, rt_tensor *const *in, rt_tensor **y) {
    rt_tensor *xs[2] = {in[0], in[3]};
    return rt_cat_channels(2, xs, y);
}
static rt_status run_ce(rt_st_file *f, rt_tensor *const *in, rt_tensor **y) {
    rt_tensor *t = fx_tensor(f, "target", false);
    if (!t) return rt_error_set(RT_ERR_INVALID_ARG, "fixture target");
    return rt_cross_entropy_nd(in[0], t, in[1], y); /* in[1]: the class weights, when given */
}
static rt_status run_dice(rt_st_file *f, rt_tensor *const *in, rt_tensor **y) {
    int64_t bd, bg;
    rt_tensor *t = fx_tensor(f, "target", false);
    if (!t || !fx_ints(f, "batch_dice", 1, &bd) || !fx_ints(f, "include_background", 1, &bg))
        return rt_error_set(RT_ERR_INVALID_ARG, "fixture metadata");
    return rt_soft_dice_loss(in[0], t, (float)fx_double(f, "smooth"), bd, bg, y);
}

/* Norms: running statistics copied from *_in, compared with *_out after. */
static rt_tensor *g_rm, *g_rv;
static rt_status run_norm(rt_st_file *f, rt_tensor *const *in, rt_tensor **y) {
    const char *op = rt_st_metadata(f, "op");
    int64_t training = 1, groups = 0;
    g_rm = rt_st_find(f, "running_mean_in") ? fx_tensor(f, "running_mean_in", false) : NULL;
    g_rv = rt_st_find(f, "running_var_in") ? fx_tensor(f, "running_var_in", false) : NULL;
    if (!op || (strcmp(op, "batch_norm3d") != 0 && !fx_ints(f, "training", 1, &training)))
        return rt_error_set(RT_ERR_INVALID_ARG, "fixture metadata");
    float eps = (float)fx_double(f, "eps"), momentum = (float)fx_double(f, "momentum");
    if (strcmp(op, "group_norm") == 0) {
        if (!fx_ints(f, "num_groups", 1, &groups)) return rt_error_set(RT_ERR_INVALID_ARG, "fixture metadata");
        return rt_group_norm(in[0], groups, in[1], in[2], eps, y);
    }
    if (strcmp(op, "batch_norm3d") == 0) {
        int64_t tracked = 0;
        return rt_batch_norm(in[0], in[1], in[2], g_rm, g_rv, &tracked, true, momentum, eps, y);
    }
    return rt_instance_norm(in[0], g_rm, g_rv, in[1], in[2], training != 0, momentum, eps, y);
}
static void parity_norm(const char *name) {
    g_rm = g_rv = NULL;
    parity_run(name, run_norm);
    if (rt_test_failed_ || !g_rm) return;
    rt_st_file *f = fx_open(name);
    CHECK(f);
    fx_compare(f, "running_mean_out", g_rm);
    fx_compare(f, "running_var_out", g_rv);
}

static void parity_conv3d(const char *n) { parity_run(n, run_conv3d); }
static void parity_convt3d(const char *n) { parity_run(n, run_convt3d); }
static void parity_upsample(const char *n) { parity_run(n, run_upsample); }
static void parity_pool3d(const char *n) { parity_run(n, run_pool3d); }
static void parity_leaky(const char *n) { parity_run(n, run_leaky); }
static void parity_sigmoid(const char *n) { parity_run(n, run_sigmoid); }
static void parity_softmax(const char *n) { parity_run(n, run_softmax); }
static void parity_cat(const char *n) { parity_run(n, run_cat); }
static void parity_ce(const char *n) { parity_run(n, run_ce); }
static void parity_dice(const char *n) { parity_run(n, run_dice); }

#define PARITY3D_CASES(X)                                                                \
    X(conv3d_mixed, parity_conv3d)                                                       \
    X(conv3d_s2_nobias, parity_conv3d)                                                   \
    X(conv_transpose3d_k2s2, parity_convt3d)                                             \
    X(conv_transpose3d_mixed, parity_convt3d)                                            \
    X(upsample_trilinear_x2, parity_upsample)                                            \
    X(upsample_trilinear_size, parity_upsample)                                          \
    X(upsample_trilinear_frac, parity_upsample)                                          \
    X(max_pool3d_k2s2, parity_pool3d)                                                    \
    X(max_pool3d_k3s2p1, parity_pool3d)                                                  \
    X(avg_pool3d_k2s2, parity_pool3d)                                                    \
    X(avg_pool3d_k3s2p1, parity_pool3d)                                                  \
    X(batch_norm3d_train, parity_norm)                                                   \
    X(instance_norm3d_affine, parity_norm)                                               \
    X(instance_norm3d_running_train, parity_norm)                                        \
    X(instance_norm3d_running_eval, parity_norm)                                         \
    X(group_norm_affine, parity_norm)                                                    \
    X(group_norm_noaffine, parity_norm)                                                  \
    X(leaky_relu3d, parity_leaky)                                                        \
    X(sigmoid3d, parity_sigmoid)                                                         \
    X(softmax_channels, parity_softmax)                                                  \
    X(cat_channels3d, parity_cat)                                                        \
    X(cross_entropy3d, parity_ce)                                                        \
    X(cross_entropy3d_weighted, parity_ce)                                               \
    X(soft_dice_batch_nobg, parity_dice)                                                 \
    X(soft_dice_sample_bg, parity_dice)

#define DEFINE_CASE(name, runner) \
    TU_TEST(parity_##name) { runner(#name); }
PARITY3D_CASES(DEFINE_CASE)

#define CASE_NAME(name, runner) #name,
static const char *const g_case_names[] = {PARITY3D_CASES(CASE_NAME)};

static void all_fixtures_covered(void) {
    fx_all_covered(g_case_names, (int)(sizeof g_case_names / sizeof g_case_names[0]));
}

/* ------------------------------------------------------------ blocked layout */

/* One op on x (and optional parameters in[1..]); x is (N, B, ...) so that it
 * can be blocked. The op's result on the blocked copy must equal the plain
 * result, and so must every gradient (relative 1e-5: the two orders sum in
 * different orders). */
typedef rt_status (*lay_fn)(void *ctx, rt_tensor *const *in, rt_tensor **out);

static void layout_check(const char *name, lay_fn fn, void *ctx, int n_in, rt_tensor *const *in) {
    rt_tensor *a[4] = {0}, *b[4] = {0}, *ya = NULL, *yb = NULL, *xb = NULL, *r = NULL, *rb = NULL;
    for (int i = 0; i < n_in; i++) {
        CHECK(in[i]);
        a[i] = tu_own(rt_tensor_empty_like(in[i], RT_MEM_DATA));
        b[i] = tu_own(rt_tensor_empty_like(in[i], RT_MEM_DATA));
        CHECK(a[i] && b[i]);
        CHECK_OK(rt_tensor_copy(a[i], in[i]));
        CHECK_OK(rt_tensor_copy(b[i], in[i]));
        CHECK_OK(rt_tensor_set_requires_grad(a[i], true));
        CHECK_OK(rt_tensor_set_requires_grad(b[i], true));
    }
    CHECK_OK(fn(ctx, a, &ya));
    tu_own(ya);
    CHECK_OK(rt_to_layout(b[0], RT_LAYOUT_BLOCKED, &xb));
    tu_own(xb);
    rt_tensor *bin[4] = {xb, b[1], b[2], b[3]};
    CHECK_OK(fn(ctx, bin, &yb));
    tu_own(yb);
    rt_generator g = {77, 0};
    r = tu_randn_like(&g, ya, 1.0f);
    CHECK(r);
    bool prev = rt_grad_set_enabled(false);
    rt_status st = rt_to_layout(r, yb->layout, &rb);
    rt_grad_set_enabled(prev);
    CHECK_OK(st);
    tu_own(rb);
    CHECK_OK(rt_backward(ya, r, false));
    CHECK_OK(rt_backward(yb, rb, false));
    double e = rt_rel_difference(yb, ya);
    printf("  layout %-24s output (%s) rel diff %.3g", name, yb->layout == RT_LAYOUT_BLOCKED ? "blocked" : "plain",
           e);
    CHECK(e <= 1e-5);
    CHECK(ya->ndim == 0 || yb->layout == RT_LAYOUT_BLOCKED); /* activations keep the blocked order */
    for (int i = 0; i < n_in; i++) {
        double eg = rt_rel_difference(b[i]->grad, a[i]->grad);
        printf(", grad %d %.3g", i, eg);
        CHECK(eg <= 1e-5);
    }
    printf("\n");
}
#define LAYOUT(name, fn, ctx, ...) \
    layout_check(name, fn, ctx, (int)(sizeof((rt_tensor *[]){__VA_ARGS__}) / sizeof(rt_tensor *)), \
                 (rt_tensor *[]){__VA_ARGS__})

TU_TEST(blocked_layout) {
    seed_inputs(308);
    const int64_t B = rt_layout_block();
    rt_conv_transpose_opts k2 = {.stride = {2, 2, 2}};
    LAYOUT("conv_transpose3d", f_convt, &k2, RANDN(0, 1, 1, B, 2, 3, 2), RANDN(0, 0.2f, B, B, 2, 2, 2),
           RANDN(0, 0.2f, B));
    if (rt_test_failed_) return;
    up_ctx fr = {NULL, (double[]){1.7, 2.0, 1.3}};
    LAYOUT("upsample_trilinear", f_up, &fr, RANDN(0, 1, 2, B, 3, 2, 3));
    if (rt_test_failed_) return;
    int64_t g = 4;
    LAYOUT("group_norm", f_gn, &g, RANDN(0.5f, 2, 2, B, 2, 3, 2), RANDN(1, 0.5f, B), RANDN(0, 0.5f, B));
    if (rt_test_failed_) return;
    in_ctx train = {NULL, NULL, true};
    LAYOUT("instance_norm3d", f_in, &train, RANDN(0.5f, 2, 2, B, 2, 3, 2), RANDN(1, 0.5f, B), RANDN(0, 0.5f, B));
    if (rt_test_failed_) return;
    LAYOUT("softmax_channels", f_softmax, NULL, RANDN(0, 2, 2, B, 3, 2, 3));
    if (rt_test_failed_) return;
    loss_ctx ce = {labels(4, (int64_t[]){2, 3, 2, 3}, B), RANDN(1, 0.3f, B), false, false};
    LAYOUT("cross_entropy3d_weighted", f_ce, &ce, RANDN(0, 2, 2, B, 3, 2, 3));
    if (rt_test_failed_) return;
    loss_ctx d = {labels(4, (int64_t[]){2, 3, 2, 3}, B), NULL, false, false};
    LAYOUT("soft_dice", f_dice, &d, positive(5, (int64_t[]){2, B, 3, 2, 3}));
}

/* ------------------------------------------------------------ refusals */

TU_TEST(refusals) {
    seed_inputs(309);
    rt_tensor *y = NULL;
    /* Conv3d whose padded input is smaller than the dilated kernel on D */
    rt_conv_opts o = {.dilation = {2, 1, 1}};
    CHECK(tu_refused(rt_conv(RANDN(0, 1, 1, 2, 4, 5, 5), RANDN(0, 1, 3, 2, 3, 3, 3), NULL, &o, &y), RT_ERR_SHAPE,
                     "too small"));
    CHECK(!y);
    /* a single spatial element, whatever the batch size */
    for (int64_t n = 1; n <= 8; n *= 8) {
        CHECK(tu_refused(rt_group_norm(RANDN(0, 1, n, 4, 1, 1, 1), 2, NULL, NULL, 1e-5f, &y), RT_ERR_SHAPE,
                         "single spatial element"));
        CHECK(tu_refused(rt_instance_norm(RANDN(0, 1, n, 4, 1, 1, 1), NULL, NULL, NULL, NULL, true, 0.1f, 1e-5f, &y),
                         RT_ERR_SHAPE, "single spatial element"));
    }
    CHECK(tu_refused(rt_group_norm(RANDN(0, 1, 1, 6, 2, 2, 2), 4, NULL, NULL, 1e-5f, &y), RT_ERR_SHAPE, "divide"));
    /* ConvTranspose3d: output_padding must stay below stride or dilation */
    rt_conv_transpose_opts t = {.stride = {2, 2, 2}, .output_padding = {0, 2, 0}};
    CHECK(tu_refused(rt_conv_transpose(RANDN(0, 1, 1, 2, 2, 2, 2), RANDN(0, 1, 2, 3, 2, 2, 2), NULL, &t, &y),
                     RT_ERR_INVALID_ARG, "output_padding"));
    /* weight in Conv3d's order (out, in) instead of (in, out) */
    CHECK(tu_refused(rt_conv_transpose(RANDN(0, 1, 1, 2, 2, 2, 2), RANDN(0, 1, 3, 2, 2, 2, 2), NULL, NULL, &y),
                     RT_ERR_SHAPE, "in_channels first"));
    int64_t size[3] = {4, 4, 4};
    double scale[3] = {2, 2, 2};
    CHECK(tu_refused(rt_upsample_linear(RANDN(0, 1, 1, 1, 2, 2, 2), size, scale, &y), RT_ERR_INVALID_ARG, "both"));
    CHECK(tu_refused(rt_upsample_linear(RANDN(0, 1, 1, 1, 2, 2, 2), NULL, NULL, &y), RT_ERR_INVALID_ARG, "neither"));
    rt_tensor *bad = labels(4, (int64_t[]){1, 2, 2, 2}, 3);
    CHECK(bad);
    ((int32_t *)rt_tensor_data(bad))[5] = 3;
    CHECK(tu_refused(rt_cross_entropy_nd(RANDN(0, 1, 1, 3, 2, 2, 2), bad, NULL, &y), RT_ERR_INVALID_ARG,
                     "target element 5"));
    CHECK(tu_refused(rt_soft_dice_loss(positive(5, (int64_t[]){1, 3, 2, 2, 2}), bad, 1e-5f, true, true, &y),
                     RT_ERR_INVALID_ARG, "outside [0, 3)"));
    ((int32_t *)rt_tensor_data(bad))[5] = 0;
    CHECK(tu_refused(rt_soft_dice_loss(positive(5, (int64_t[]){1, 3, 2, 2, 2}), bad, 0.0f, true, true, &y),
                     RT_ERR_INVALID_ARG, "smooth"));
    CHECK(!y);
}

/* ------------------------------------------------------------ MaxPool3d indices */

/* What MaxPool3d keeps for backward is oneDNN's workspace: one byte per output
 * element while the window has fewer than 256 elements, four (int32) beyond,
 * against PyTorch's eight (int64 indices). */
TU_TEST(maxpool3d_compact_indices) {
    rt_pool_shape s = {.nsp = 3, .n = 2, .c = 16, .in = {8, 8, 8}, .k = {2, 2, 2}, .stride = {2, 2, 2}};
    size_t out = 2 * 16 * 4 * 4 * 4;
    CHECK_EQ_INT(rt_kernel_maxpool_workspace_bytes(&s), out);
    s.layout = RT_LAYOUT_BLOCKED;
    CHECK_EQ_INT(rt_kernel_maxpool_workspace_bytes(&s), out);
    rt_pool_shape big = {.nsp = 3, .n = 1, .c = 2, .in = {9, 9, 9}, .k = {7, 7, 7}, .stride = {1, 1, 1}};
    CHECK_EQ_INT(rt_kernel_maxpool_workspace_bytes(&big), 4 * (1 * 2 * 3 * 3 * 3));
    printf("  MaxPool3d 2x2x2 on 2x16x8^3 keeps %zu bytes for %zu outputs (PyTorch: %zu)\n", out, out, 8 * out);
}

/* ------------------------------------------------------------ meta tensors */

TU_TEST(meta_shapes) {
    rt_tensor *x = tu_own(rt_tensor_create(5, (int64_t[]){2, 4, 8, 6, 4}, RT_F32, RT_DEVICE_META, RT_MEM_DATA));
    rt_tensor *w = tu_own(rt_tensor_create(5, (int64_t[]){4, 2, 2, 2, 2}, RT_F32, RT_DEVICE_META, RT_MEM_DATA));
    rt_tensor *t = tu_own(rt_tensor_create(4, (int64_t[]){2, 8, 6, 4}, RT_I32, RT_DEVICE_META, RT_MEM_DATA));
    rt_tensor *y = NULL;
    rt_conv_transpose_opts k2 = {.stride = {2, 2, 2}};
    CHECK_OK(rt_conv_transpose(x, w, NULL, &k2, &y));
    tu_own(y);
    CHECK(y->shape[1] == 2 && y->shape[2] == 16 && y->shape[3] == 12 && y->shape[4] == 8);
    CHECK_OK(rt_upsample_linear(x, NULL, (double[]){2, 1.5, 0.5}, &y));
    tu_own(y);
    CHECK(y->shape[2] == 16 && y->shape[3] == 9 && y->shape[4] == 2);
    CHECK_OK(rt_group_norm(x, 2, NULL, NULL, 1e-5f, &y));
    tu_own(y);
    CHECK_OK(rt_softmax_channels(x, &y));
    tu_own(y);
    CHECK_OK(rt_cross_entropy_nd(x, t, NULL, &y));
    tu_own(y);
    CHECK(y->ndim == 0);
    CHECK_OK(rt_soft_dice_loss(x, t, 1e-5f, true, false, &y));
    tu_own(y);
    CHECK(y->ndim == 0);
}

/* ------------------------------------------------------------ memory on meta */

/* A decoder step on `dev`: ConvTranspose3d -> GroupNorm -> LeakyReLU ->
 * InstanceNorm -> upsample -> softmax -> Dice + cross-entropy, forward and
 * backward. Returns the peak tracked bytes above the start. */
static int64_t decoder_peak(rt_device dev) {
    rt_tensor *x = tu_own(rt_tensor_zeros(5, (int64_t[]){2, 16, 3, 4, 3}, RT_F32, dev, RT_MEM_DATA));
    rt_tensor *w = tu_own(rt_tensor_zeros(5, (int64_t[]){16, 8, 2, 2, 2}, RT_F32, dev, RT_MEM_DATA));
    rt_tensor *t = tu_own(rt_tensor_zeros(4, (int64_t[]){2, 12, 16, 12}, RT_I32, dev, RT_MEM_DATA));
    if (!x || !w || !t) return -1;
    rt_tensor_set_requires_grad(x, true);
    rt_tensor_set_requires_grad(w, true);
    rt_memstats_reset_peaks();
    int64_t base = tu_live_bytes();
    rt_conv_transpose_opts k2 = {.stride = {2, 2, 2}};
    rt_tensor *h = NULL, *l1 = NULL, *l2 = NULL, *y = NULL;
    rt_status st = rt_conv_transpose(x, w, NULL, &k2, &h);
/* h = expr(h), releasing the old h; skipped after a failure */
#define DEC_STEP(expr)                                  \
    do {                                                \
        rt_tensor *n_ = NULL;                           \
        if (st == RT_OK) st = (expr);                   \
        rt_tensor_release(h);                           \
        h = n_;                                         \
    } while (0)
    DEC_STEP(rt_group_norm(h, 4, NULL, NULL, 1e-5f, &n_));
    DEC_STEP(rt_leaky_relu(h, 0.01f, &n_));
    DEC_STEP(rt_instance_norm(h, NULL, NULL, NULL, NULL, true, 0.1f, 1e-5f, &n_));
    DEC_STEP(rt_upsample_linear(h, (int64_t[]){12, 16, 12}, NULL, &n_));
#undef DEC_STEP
    rt_tensor *p = NULL;
    if (st == RT_OK) st = rt_softmax_channels(h, &p);
    if (st == RT_OK) st = rt_soft_dice_loss(p, t, 1e-5f, true, false, &l1);
    if (st == RT_OK) st = rt_cross_entropy_nd(h, t, NULL, &l2);
    if (st == RT_OK) st = rt_add(l1, l2, &y);
    rt_tensor_release(h);
    rt_tensor_release(p);
    rt_tensor_release(l1);
    rt_tensor_release(l2);
    if (st == RT_OK) st = rt_backward(y, NULL, false);
    rt_tensor_release(y);
    if (st != RT_OK) {
        fprintf(stderr, "  decoder on %s: %s\n", dev == RT_DEVICE_META ? "meta" : "cpu", rt_error_last());
        return -1;
    }
    rt_memstats m;
    rt_memstats_get(&m);
    return m.peak_total - base;
}

/* Meta tensors predict the real run's peak to the byte, own kernels included. */
TU_TEST(meta_memory_matches_real) { tu_meta_peak_matches("decoder", decoder_peak); }

/* ------------------------------------------------------------ modules */

static void destroy_module_(void *m) { rt_module_destroy(m); }
static void destroy_sd_(void *sd) { rt_state_dict_destroy(sd); }

TU_TEST(modules) {
    seed_inputs(310);
    rt_init_ctx ctx = rt_init_ctx_make(RT_DEVICE_CPU, 5);
    rt_module *net = NULL;
    CHECK_OK(rt_sequential_create(&net));
    tu_defer(destroy_module_, net);
    /* a small U-Net-like path: conv (dilated) – GroupNorm – LeakyReLU – down – InstanceNorm
     * – up (ConvTranspose3d) – Upsample – Softmax */
    rt_module *m = NULL;
    CHECK_OK(rt_conv_create(&ctx, 3, 2, 4, 3, 1, 2, 1, true, RT_INIT_DEFAULT, &m));
    CHECK_OK(rt_conv_set_dilation(m, 2));
    CHECK_OK(rt_module_add_child(net, "conv", m));
    CHECK_OK(rt_group_norm_create(&ctx, 2, 4, 1e-5f, true, &m));
    CHECK_OK(rt_module_add_child(net, "gn", m));
    CHECK_OK(rt_leaky_relu_create(0.01f, &m));
    CHECK_OK(rt_module_add_child(net, "act", m));
    CHECK_OK(rt_max_pool_create(3, 2, 2, 0, &m));
    CHECK_OK(rt_module_add_child(net, "pool", m));
    CHECK_OK(rt_instance_norm_create(&ctx, 3, 4, true, true, &m));
    CHECK_OK(rt_module_add_child(net, "inorm", m));
    CHECK_OK(rt_conv_transpose_create(&ctx, 3, 4, 3, 2, 2, 0, 0, 1, true, &m));
    CHECK_OK(rt_module_add_child(net, "up", m));
    CHECK_OK(rt_upsample_create(3, 0, 2.0, &m));
    CHECK_OK(rt_module_add_child(net, "upsample", m));
    CHECK_OK(rt_softmax_create(&m));
    CHECK_OK(rt_module_add_child(net, "softmax", m));
    rt_state_dict *sd = NULL;
    CHECK_OK(rt_module_state_dict(net, &sd));
    tu_defer(destroy_sd_, sd);
    const char *want[] = {"conv.weight", "conv.bias", "gn.weight", "gn.bias", "inorm.weight", "inorm.bias",
                          "inorm.running_mean", "inorm.running_var", "inorm.num_batches_tracked", "up.weight",
                          "up.bias"};
    CHECK_EQ_INT(sd->n, (int)(sizeof want / sizeof want[0]));
    for (int i = 0; i < sd->n; i++) CHECK(strcmp(sd->entries[i].name, want[i]) == 0);
    CHECK(rt_module_find(net, "up")->cls->type && strcmp(rt_module_find(net, "up")->cls->type, "ConvTranspose3d") == 0);
    rt_tensor *uw = rt_module_tensor(rt_module_find(net, "up"), "weight");
    CHECK(uw && uw->shape[0] == 4 && uw->shape[1] == 3); /* (in, out/groups, k, k, k) */
    rt_tensor *x = RANDN(0, 1, 2, 2, 6, 6, 4), *y = NULL;
    CHECK_OK(rt_module_forward(net, x, &y));
    tu_own(y);
    CHECK(y->ndim == 5 && y->shape[0] == 2 && y->shape[1] == 3 && y->shape[2] == 12 && y->shape[3] == 12 &&
          y->shape[4] == 8);
    /* softmax output: channels sum to 1 everywhere */
    const float *p = rt_tensor_f32(y);
    int64_t S = 12 * 12 * 8;
    for (int64_t i = 0; i < 2 * S; i++) {
        double s = 0.0;
        for (int c = 0; c < 3; c++) s += p[((i / S) * 3 + c) * S + i % S];
        CHECK_NEAR(s, 1.0, 1e-5);
    }
    /* InstanceNorm3d with track_running_stats: training moved the running mean off 0;
     * eval normalises with it (the same as the functional call) */
    rt_module *in = rt_module_find(net, "inorm");
    rt_tensor *rm = rt_module_tensor(in, "running_mean"), *rv = rt_module_tensor(in, "running_var");
    CHECK(rm && rv && tu_max_abs(4, rt_tensor_f32(rm)) > 0.0);
    rt_module_train(in, false);
    rt_tensor *h = RANDN(0, 1, 1, 4, 3, 3, 2), *ye = NULL, *yf = NULL;
    CHECK_OK(rt_module_forward(in, h, &ye));
    tu_own(ye);
    CHECK_OK(rt_instance_norm(h, rm, rv, rt_module_tensor(in, "weight"), rt_module_tensor(in, "bias"), false, 0.1f,
                              1e-5f, &yf));
    tu_own(yf);
    CHECK(rt_rel_difference(ye, yf) == 0.0);
}

#define CASE_ENTRY(name, runner) {"parity_" #name, parity_##name},
RT_TEST_MAIN({"gc_conv3d_dilation_groups", gc_conv3d_dilation_groups}, {"gc_conv_transpose3d", gc_conv_transpose3d},
             {"gc_upsample_trilinear", gc_upsample_trilinear}, {"gc_group_norm", gc_group_norm},
             {"gc_instance_norm", gc_instance_norm}, {"gc_pointwise_and_channels", gc_pointwise_and_channels},
             {"gc_losses", gc_losses}, PARITY3D_CASES(CASE_ENTRY){"all_fixtures_covered", all_fixtures_covered},
             {"blocked_layout", blocked_layout}, {"refusals", refusals}, {"maxpool3d_compact_indices", maxpool3d_compact_indices}, {"meta_shapes", meta_shapes}, {"meta_memory_matches_real", meta_memory_matches_real},
             {"modules", modules})
