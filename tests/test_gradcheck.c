/* Gradient checks of every differentiable op in ops/ops.h against central
 * finite differences.
 *
 * For an op f with inputs x_1..x_k (leaves), the scalar loss is
 *     L = sum(f(x) * r)
 * with a fixed random r of f's output shape; the analytic gradient comes from
 * rt_backward(y, r) (grad_root = r = dL/dy). Each element e of every checked
 * input is then perturbed in f32, e+ = fl(e + h), e- = fl(e - h), and
 *     numeric = (L(e+) - L(e-)) / (e+ - e-)
 * with grad mode off, the loss summed in double from the f32 outputs (the
 * denominator uses the perturbation actually applied, so rounding of e ± h
 * does not bias the estimate). Every element must satisfy
 *     |analytic - numeric| <= atol + rtol·|numeric|,  atol = 1e-3, rtol = 1e-2
 * (single-precision forward passes: the loss carries ~1e-7 relative rounding,
 * divided by 2h; h = 1e-2 for ops that are linear or smooth, 1e-3 for
 * max-pool, whose tie-free inputs are spaced > 2h apart). Inputs are kept
 * away from kinks (relu at 0, ties in max-pool) by more than h, so no
 * perturbation crosses one.
 *
 * Each check prints the largest |analytic - numeric| per input. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/engine.h"
#include "autograd/node.h"
#include "core/rng.h"
#include "core/mem.h"
#include "core/tensor.h"
#include "ops/coupling.h"
#include "ops/ops.h"
#include "rt_test.h"
#include "test_util.h"
#include "gradcheck_util.h"

/* ------------------------------------------------------------ conv / linear */

static rt_status f_conv(void *ctx, rt_tensor *const *in, rt_tensor **out) {
    return rt_conv(in[0], in[1], NULL, ctx, out);
}
static rt_status f_conv_bias(void *ctx, rt_tensor *const *in, rt_tensor **out) {
    return rt_conv(in[0], in[1], in[2], ctx, out);
}

TU_TEST(conv2d_basic) {
    seed_inputs(101);
    rt_conv_opts o = {.padding = {1, 1}};
    CHECK(GC("conv2d_basic", f_conv_bias, &o, 1e-2f, RANDN(0, 1, 2, 3, 6, 5), RANDN(0, 0.3f, 4, 3, 3, 3),
             RANDN(0, 0.3f, 4)));
}

TU_TEST(conv2d_stride2_pad_nobias) {
    seed_inputs(102);
    rt_conv_opts o = {.stride = {2, 2}, .padding = {1, 1}};
    CHECK(GC("conv2d_stride2_nobias", f_conv, &o, 1e-2f, RANDN(0, 1, 2, 3, 7, 6), RANDN(0, 0.3f, 4, 3, 3, 3)));
}

TU_TEST(conv2d_dilation2) {
    seed_inputs(103);
    rt_conv_opts o = {.padding = {2, 2}, .dilation = {2, 2}};
    CHECK(GC("conv2d_dilation2", f_conv_bias, &o, 1e-2f, RANDN(0, 1, 2, 3, 7, 6), RANDN(0, 0.3f, 4, 3, 3, 3),
             RANDN(0, 0.3f, 4)));
}

TU_TEST(conv2d_groups) {
    seed_inputs(104);
    rt_conv_opts o = {.padding = {1, 1}, .groups = 2};
    CHECK(GC("conv2d_groups2", f_conv_bias, &o, 1e-2f, RANDN(0, 1, 2, 4, 5, 5), RANDN(0, 0.3f, 6, 2, 3, 3),
             RANDN(0, 0.3f, 6)));
    o.groups = 4; /* depthwise */
    CHECK(GC("conv2d_depthwise", f_conv, &o, 1e-2f, RANDN(0, 1, 2, 4, 5, 5), RANDN(0, 0.3f, 4, 1, 3, 3)));
}

TU_TEST(conv2d_rect_mixed) {
    seed_inputs(105);
    /* kernel 2x3, stride (2,1), padding (0,1), dilation (1,2): every dim differs */
    rt_conv_opts o = {.stride = {2, 1}, .padding = {0, 1}, .dilation = {1, 2}};
    CHECK(GC("conv2d_rect_mixed", f_conv_bias, &o, 1e-2f, RANDN(0, 1, 2, 3, 7, 6), RANDN(0, 0.3f, 4, 3, 2, 3),
             RANDN(0, 0.3f, 4)));
}

TU_TEST(conv3d) {
    seed_inputs(106);
    rt_conv_opts o = {.stride = {1, 2, 1}, .padding = {1, 1, 0}};
    CHECK(GC("conv3d", f_conv_bias, &o, 1e-2f, RANDN(0, 1, 2, 2, 4, 5, 4), RANDN(0, 0.3f, 3, 2, 3, 3, 3),
             RANDN(0, 0.3f, 3)));
    rt_conv_opts g = {.padding = {1, 1, 1}, .groups = 2};
    CHECK(GC("conv3d_groups_nobias", f_conv, &g, 1e-2f, RANDN(0, 1, 1, 4, 3, 3, 3),
             RANDN(0, 0.3f, 2, 2, 3, 3, 3)));
}

static rt_status f_linear(void *ctx, rt_tensor *const *in, rt_tensor **out) {
    return rt_linear(in[0], in[1], ctx ? in[2] : NULL, out);
}

TU_TEST(linear) {
    seed_inputs(107);
    int with_bias = 1;
    CHECK(GC("linear", f_linear, &with_bias, 1e-2f, RANDN(0, 1, 4, 5), RANDN(0, 0.5f, 3, 5), RANDN(0, 0.5f, 3)));
    CHECK(GC("linear_nobias", f_linear, NULL, 1e-2f, RANDN(0, 1, 4, 5), RANDN(0, 0.5f, 3, 5)));
}

/* ------------------------------------------------------------ batch norm */

typedef struct bn_ctx {
    rt_tensor *running_mean, *running_var;
    int64_t num_batches_tracked;
    bool training;
} bn_ctx;

static rt_status f_bn(void *ctx, rt_tensor *const *in, rt_tensor **out) {
    bn_ctx *c = ctx;
    return rt_batch_norm(in[0], in[1], in[2], c->running_mean, c->running_var, &c->num_batches_tracked,
                         c->training, 0.1f, 1e-5f, out);
}

/* x of `shape`, per-channel weight/bias/running stats of shape[1]. */
static void check_bn(const char *name, bool training, int ndim, const int64_t *shape) {
    int64_t c = shape[1];
    bn_ctx ctx = {.running_mean = randn(1, &c, 0.0f, 0.5f), .running_var = randn(1, &c, 1.0f, 0.2f),
                  .training = training};
    CHECK(ctx.running_mean && ctx.running_var);
    float *rv = rt_tensor_f32(ctx.running_var);
    for (int64_t i = 0; i < c; i++) rv[i] = fabsf(rv[i]) + 0.3f;
    CHECK(GC(name, f_bn, &ctx, 1e-2f, randn(ndim, shape, 0.5f, 2.0f), randn(1, &c, 1.0f, 0.5f),
             randn(1, &c, 0.0f, 0.5f)));
    /* one update per training forward, none in eval */
    CHECK(training ? ctx.num_batches_tracked > 0 : ctx.num_batches_tracked == 0);
}

TU_TEST(batch_norm_train) {
    seed_inputs(108);
    check_bn("batch_norm_train_2d", true, 4, (int64_t[]){3, 4, 3, 3});
    if (rt_test_failed_) return;
    check_bn("batch_norm_train_3d", true, 5, (int64_t[]){2, 3, 2, 3, 2});
    if (rt_test_failed_) return;
    check_bn("batch_norm_train_nc", true, 2, (int64_t[]){6, 4});
}

TU_TEST(batch_norm_eval) {
    seed_inputs(109);
    check_bn("batch_norm_eval_2d", false, 4, (int64_t[]){3, 4, 3, 3});
    if (rt_test_failed_) return;
    check_bn("batch_norm_eval_3d", false, 5, (int64_t[]){2, 3, 2, 3, 2});
}

/* ------------------------------------------------------------ activations */

static rt_status f_relu(void *ctx, rt_tensor *const *in, rt_tensor **out) { return rt_relu(in[0], out); }
static rt_status f_leaky(void *ctx, rt_tensor *const *in, rt_tensor **out) {
    return rt_leaky_relu(in[0], *(float *)ctx, out);
}

TU_TEST(relu) {
    seed_inputs(110);
    CHECK(GC("relu", f_relu, NULL, 1e-2f, randn_away_from_zero(4, (int64_t[]){2, 3, 4, 4}, 0.1f)));
    CHECK(GC("relu_5d", f_relu, NULL, 1e-2f, randn_away_from_zero(5, (int64_t[]){2, 2, 2, 3, 3}, 0.1f)));
}

TU_TEST(leaky_relu) {
    seed_inputs(111);
    float slope = 0.2f;
    CHECK(GC("leaky_relu_0.2", f_leaky, &slope, 1e-2f, randn_away_from_zero(4, (int64_t[]){2, 3, 4, 4}, 0.1f)));
    slope = 0.01f;
    CHECK(GC("leaky_relu_0.01", f_leaky, &slope, 1e-2f, randn_away_from_zero(2, (int64_t[]){5, 7}, 0.1f)));
}

/* ------------------------------------------------------------ pooling */

static rt_status f_max_pool(void *ctx, rt_tensor *const *in, rt_tensor **out) {
    return rt_max_pool(in[0], ctx, out);
}
static rt_status f_avg_pool(void *ctx, rt_tensor *const *in, rt_tensor **out) {
    return rt_avg_pool(in[0], ctx, out);
}
static rt_status f_adaptive(void *ctx, rt_tensor *const *in, rt_tensor **out) {
    return rt_adaptive_avg_pool_1(in[0], out);
}

/* Spacing of `distinct` values: 4/numel; all shapes below keep it > 2h = 2e-3. */
TU_TEST(max_pool) {
    seed_inputs(112);
    rt_pool_opts k2 = {.kernel = {2, 2}};
    CHECK(GC("max_pool2d_k2s2", f_max_pool, &k2, 1e-3f, distinct(4, (int64_t[]){2, 2, 6, 6}, 4.0f)));
    rt_pool_opts k3 = {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}};
    CHECK(GC("max_pool2d_k3s2p1", f_max_pool, &k3, 1e-3f, distinct(4, (int64_t[]){2, 2, 7, 7}, 4.0f)));
    rt_pool_opts k3d = {.kernel = {2, 2, 2}};
    CHECK(GC("max_pool3d_k2s2", f_max_pool, &k3d, 1e-3f, distinct(5, (int64_t[]){1, 2, 4, 4, 4}, 4.0f)));
    rt_pool_opts m3d = {.kernel = {2, 3, 3}, .stride = {1, 2, 2}, .padding = {0, 1, 1}};
    CHECK(GC("max_pool3d_mixed", f_max_pool, &m3d, 1e-3f, distinct(5, (int64_t[]){1, 2, 3, 5, 5}, 4.0f)));
}

TU_TEST(avg_pool) {
    seed_inputs(113);
    rt_pool_opts k2 = {.kernel = {2, 2}};
    CHECK(GC("avg_pool2d_k2s2", f_avg_pool, &k2, 1e-2f, RANDN(0, 1, 2, 2, 6, 6)));
    rt_pool_opts k3 = {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}};
    CHECK(GC("avg_pool2d_k3s2p1", f_avg_pool, &k3, 1e-2f, RANDN(0, 1, 2, 2, 7, 7)));
    rt_pool_opts k3d = {.kernel = {2, 2, 2}};
    CHECK(GC("avg_pool3d_k2s2", f_avg_pool, &k3d, 1e-2f, RANDN(0, 1, 1, 2, 4, 4, 4)));
    rt_pool_opts m3d = {.kernel = {3, 3, 3}, .stride = {2, 1, 2}, .padding = {1, 1, 1}};
    CHECK(GC("avg_pool3d_k3p1", f_avg_pool, &m3d, 1e-2f, RANDN(0, 1, 1, 2, 5, 4, 5)));
}

TU_TEST(adaptive_avg_pool) {
    seed_inputs(114);
    CHECK(GC("adaptive_avg_pool2d", f_adaptive, NULL, 1e-2f, RANDN(0, 1, 2, 3, 4, 3)));
    CHECK(GC("adaptive_avg_pool3d", f_adaptive, NULL, 1e-2f, RANDN(0, 1, 2, 2, 3, 2, 4)));
}

/* ------------------------------------------------------------ elementwise */

static rt_status f_add(void *ctx, rt_tensor *const *in, rt_tensor **out) { return rt_add(in[0], in[1], out); }
static rt_status f_sub(void *ctx, rt_tensor *const *in, rt_tensor **out) { return rt_sub(in[0], in[1], out); }
static rt_status f_add_self(void *ctx, rt_tensor *const *in, rt_tensor **out) {
    return rt_add(in[0], in[0], out);
}
static rt_status f_mul(void *ctx, rt_tensor *const *in, rt_tensor **out) { return rt_mul(in[0], in[1], out); }
static rt_status f_mul_self(void *ctx, rt_tensor *const *in, rt_tensor **out) {
    return rt_mul(in[0], in[0], out);
}
/* a * b with a blocked (16 channels) and b plain: b is reordered, each
 * gradient comes back in its own input's order (the product, blocked like
 * a, is compared in the plain order) */
static rt_status f_mul_mixed(void *ctx, rt_tensor *const *in, rt_tensor **out) {
    rt_tensor *ab = NULL, *y = NULL;
    RT_TRY(rt_to_layout(in[0], RT_LAYOUT_BLOCKED, &ab));
    rt_status st = rt_mul(ab, in[1], &y);
    rt_tensor_release(ab);
    if (st == RT_OK && y->layout != RT_LAYOUT_BLOCKED)
        st = rt_error_set(RT_ERR_STATE, "mul_mixed_layout: the product should keep a's blocked order");
    if (st == RT_OK) st = rt_to_layout(y, RT_LAYOUT_PLAIN, out);
    rt_tensor_release(y);
    return st;
}

/* torch.mul: both gradients (da = dy·b, db = dy·a), x·x (one saved tensor,
 * the gradient accumulates to 2·x·r), and inputs in different orders. */
TU_TEST(mul) {
    seed_inputs(131);
    CHECK(GC("mul", f_mul, NULL, 1e-2f, RANDN(0, 1, 2, 3, 4, 4), RANDN(0, 1, 2, 3, 4, 4)));
    CHECK(GC("mul_same_input", f_mul_self, NULL, 1e-2f, RANDN(0, 1, 3, 5)));
    CHECK(GC("mul_mixed_layout", f_mul_mixed, NULL, 1e-2f, RANDN(0, 1, 1, 16, 3, 3), RANDN(0, 1, 1, 16, 3, 3)));
}

static rt_status f_mul_scalar(void *ctx, rt_tensor *const *in, rt_tensor **out) {
    return rt_mul_scalar(in[0], *(float *)ctx, out);
}

TU_TEST(add) {
    seed_inputs(115);
    CHECK(GC("add", f_add, NULL, 1e-2f, RANDN(0, 1, 2, 3, 4, 4), RANDN(0, 1, 2, 3, 4, 4)));
    /* x + x: two edges into one leaf, the gradient must accumulate to 2r */
    CHECK(GC("add_same_input", f_add_self, NULL, 1e-2f, RANDN(0, 1, 3, 5)));
}

static rt_status f_add_relu(void *ctx, rt_tensor *const *in, rt_tensor **out) {
    return rt_add_relu(in[0], in[1], out);
}
static rt_status f_add_relu_self(void *ctx, rt_tensor *const *in, rt_tensor **out) {
    return rt_add_relu(in[0], in[0], out);
}

/* relu(a + b): a is pushed 0.1 away from 0 and b ~ N(0, 0.01), so a + b stays
 * more than h from the kink; both inputs get the masked gradient. */
TU_TEST(add_relu) {
    seed_inputs(117);
    CHECK(GC("add_relu", f_add_relu, NULL, 1e-2f, randn_away_from_zero(4, (int64_t[]){2, 3, 4, 4}, 0.1f),
             RANDN(0, 0.01f, 2, 3, 4, 4)));
    CHECK(GC("add_relu_same_input", f_add_relu_self, NULL, 1e-2f,
             randn_away_from_zero(2, (int64_t[]){3, 5}, 0.1f)));
}

TU_TEST(sub) {
    seed_inputs(116);
    CHECK(GC("sub", f_sub, NULL, 1e-2f, RANDN(0, 1, 2, 3, 4, 4), RANDN(0, 1, 2, 3, 4, 4)));
}

TU_TEST(mul_scalar) {
    seed_inputs(117);
    float s = 2.5f;
    CHECK(GC("mul_scalar_2.5", f_mul_scalar, &s, 1e-2f, RANDN(0, 1, 2, 3, 4, 4)));
    s = -0.75f;
    CHECK(GC("mul_scalar_-0.75", f_mul_scalar, &s, 1e-2f, RANDN(0, 1, 4, 6)));
}

/* ------------------------------------------------------------ shape ops */

static rt_status f_cat(void *ctx, rt_tensor *const *in, rt_tensor **out) {
    return rt_cat_channels(*(int *)ctx, in, out);
}

/* split into sizes, then cat the pieces back in the order given by `order`. */
typedef struct split_ctx {
    int n;
    int64_t sizes[4];
    int n_used;
    int order[4]; /* pieces that reach the loss, in cat order */
} split_ctx;

static rt_status f_split(void *ctx, rt_tensor *const *in, rt_tensor **out) {
    split_ctx *c = ctx;
    rt_tensor *pieces[4] = {0}, *used[4];
    RT_TRY(rt_split_channels(in[0], c->n, c->sizes, pieces));
    for (int i = 0; i < c->n_used; i++) used[i] = pieces[c->order[i]];
    rt_status st = c->n_used == 1 ? (*out = rt_tensor_retain(used[0]), RT_OK)
                                  : rt_cat_channels(c->n_used, used, out);
    for (int i = 0; i < c->n; i++) rt_tensor_release(pieces[i]);
    return st;
}

TU_TEST(cat_channels) {
    seed_inputs(118);
    int n = 3;
    CHECK(GC("cat3", f_cat, &n, 1e-2f, RANDN(0, 1, 2, 1, 3, 3), RANDN(0, 1, 2, 3, 3, 3), RANDN(0, 1, 2, 2, 3, 3)));
    n = 2;
    CHECK(GC("cat2_5d", f_cat, &n, 1e-2f, RANDN(0, 1, 1, 2, 2, 2, 3), RANDN(0, 1, 1, 1, 2, 2, 3)));
    CHECK(GC("cat2_nc", f_cat, &n, 1e-2f, RANDN(0, 1, 3, 2), RANDN(0, 1, 3, 4)));
}

TU_TEST(split_channels) {
    seed_inputs(119);
    /* both outputs feed the loss: sum(y0·r0) + sum(y1·r1) via cat(y0, y1) */
    split_ctx both = {.n = 2, .sizes = {2, 3}, .n_used = 2, .order = {0, 1}};
    CHECK(GC("split_2_3", f_split, &both, 1e-2f, RANDN(0, 1, 2, 5, 3, 3)));
    /* three pieces, recombined out of order */
    split_ctx perm = {.n = 3, .sizes = {1, 3, 1}, .n_used = 3, .order = {2, 0, 1}};
    CHECK(GC("split_1_3_1_permuted", f_split, &perm, 1e-2f, RANDN(0, 1, 2, 5, 2, 3)));
    /* only the second piece is used: the first one's gradient is implicit zeros */
    split_ctx one = {.n = 2, .sizes = {2, 3}, .n_used = 1, .order = {1}};
    CHECK(GC("split_one_output_used", f_split, &one, 1e-2f, RANDN(0, 1, 2, 5, 3, 3)));
}

static rt_status f_reshape(void *ctx, rt_tensor *const *in, rt_tensor **out) {
    int64_t shape[3] = {4, 3, 2};
    return rt_reshape(in[0], 3, shape, out);
}
static rt_status f_flatten(void *ctx, rt_tensor *const *in, rt_tensor **out) {
    return rt_flatten(in[0], out);
}
/* reshape feeding a real op, so a gradient flows back through a view */
static rt_status f_flatten_linear(void *ctx, rt_tensor *const *in, rt_tensor **out) {
    rt_tensor *f = NULL;
    RT_TRY(rt_flatten(in[0], &f));
    rt_status st = rt_linear(f, in[1], NULL, out);
    rt_tensor_release(f);
    return st;
}

TU_TEST(reshape_flatten) {
    seed_inputs(120);
    CHECK(GC("reshape", f_reshape, NULL, 1e-2f, RANDN(0, 1, 2, 3, 4)));
    CHECK(GC("flatten", f_flatten, NULL, 1e-2f, RANDN(0, 1, 2, 3, 2, 2)));
    CHECK(GC("flatten_5d", f_flatten, NULL, 1e-2f, RANDN(0, 1, 2, 2, 2, 1, 3)));
    CHECK(GC("flatten_linear", f_flatten_linear, NULL, 1e-2f, RANDN(0, 1, 2, 3, 2, 2), RANDN(0, 0.5f, 5, 12)));
}

/* ------------------------------------------------------------ dropout */

typedef struct dropout_ctx {
    uint64_t seed;
    float p;
} dropout_ctx;

/* Reseeds the default generator first, so every forward draws the same mask. */
static rt_status f_dropout(void *ctx, rt_tensor *const *in, rt_tensor **out) {
    dropout_ctx *c = ctx;
    rt_manual_seed(c->seed);
    return rt_dropout(in[0], c->p, true, out);
}

TU_TEST(dropout_gradcheck) {
    seed_inputs(121);
    dropout_ctx c = {.seed = 7, .p = 0.5f};
    CHECK(GC("dropout_p0.5", f_dropout, &c, 1e-2f, randn_away_from_zero(4, (int64_t[]){2, 3, 4, 4}, 0.1f)));
    c.p = 0.2f;
    CHECK(GC("dropout_p0.2", f_dropout, &c, 1e-2f, randn_away_from_zero(2, (int64_t[]){5, 9}, 0.1f)));
}

TU_TEST(dropout_mask) {
    seed_inputs(122);
    const float p = 0.5f;
    rt_tensor *x = randn_away_from_zero(4, (int64_t[]){2, 4, 8, 8}, 0.1f), *y1, *y2, *y3;
    CHECK(x);
    int64_t n = rt_tensor_numel(x);
    CHECK_OK(rt_tensor_set_requires_grad(x, true));
    rt_manual_seed(7);
    CHECK_OK(rt_dropout(x, p, true, &y1));
    tu_own(y1);
    /* the stream advanced by exactly the draw */
    CHECK_EQ_INT(rt_default_generator()->offset, rt_philox_blocks(n));
    rt_manual_seed(7);
    CHECK_OK(rt_dropout(x, p, true, &y2));
    tu_own(y2);
    rt_manual_seed(8);
    CHECK_OK(rt_dropout(x, p, true, &y3));
    tu_own(y3);
    const float *xp = rt_tensor_f32(x), *a = rt_tensor_f32(y1), *b = rt_tensor_f32(y2), *d = rt_tensor_f32(y3);
    int64_t kept = 0, differ = 0;
    for (int64_t i = 0; i < n; i++) {
        CHECK(a[i] == b[i]); /* same seed, same offset: same mask */
        CHECK(a[i] == 0.0f || a[i] == xp[i] / (1.0f - p));
        kept += a[i] != 0.0f;
        differ += (a[i] != 0.0f) != (d[i] != 0.0f);
    }
    printf("  dropout p=%.1f: kept %lld of %lld, masks of seeds 7 and 8 differ in %lld\n", (double)p,
           (long long)kept, (long long)n, (long long)differ);
    CHECK(kept > n * 4 / 10 && kept < n * 6 / 10);
    CHECK(differ > n / 4);
    /* backward after the generator moved on still uses the forward's mask */
    rt_manual_seed(12345);
    rt_generator gr = {99, 0};
    rt_tensor *r = tu_randn_like(&gr, y1, 1.0f);
    CHECK_OK(rt_backward(y1, r, false));
    CHECK(x->grad);
    const float *gx = rt_tensor_f32(x->grad), *rp = rt_tensor_f32(r);
    for (int64_t i = 0; i < n; i++) CHECK(gx[i] == (a[i] != 0.0f ? rp[i] / (1.0f - p) : 0.0f));
    /* eval mode and p = 0 return x itself */
    rt_tensor *e = NULL;
    CHECK_OK(rt_dropout(x, p, false, &e));
    tu_own(e);
    CHECK(e == x);
    CHECK_OK(rt_dropout(x, 0.0f, true, &e));
    tu_own(e);
    CHECK(e == x);
    /* p outside [0, 1) is an error */
    CHECK(rt_dropout(x, 1.0f, true, &e) == RT_ERR_INVALID_ARG);
    CHECK(rt_dropout(x, -0.1f, true, &e) == RT_ERR_INVALID_ARG);
}

/* ------------------------------------------------------------ losses */

typedef struct ce_ctx {
    rt_tensor *target;
    float smoothing;
} ce_ctx;

static rt_status f_ce(void *ctx, rt_tensor *const *in, rt_tensor **out) {
    ce_ctx *c = ctx;
    return rt_cross_entropy(in[0], c->target, c->smoothing, out);
}

static void check_ce(const char *name, int64_t n, int64_t k, float scale, float smoothing) {
    ce_ctx c = {.target = tu_own(rt_tensor_create(1, &n, RT_I32, RT_DEVICE_CPU, RT_MEM_DATA)),
                .smoothing = smoothing};
    CHECK(c.target);
    int32_t *t = rt_tensor_data(c.target);
    for (int64_t i = 0; i < n; i++) {
        float u;
        rt_generator_uniform(&g_rng, 1, &u);
        t[i] = (int32_t)(u * (float)k) % (int32_t)k;
    }
    /* the target is read through ctx: an integer tensor, not an autograd input */
    CHECK(GC(name, f_ce, &c, 1e-2f, randn(2, (int64_t[]){n, k}, 0.0f, scale)));
}

TU_TEST(cross_entropy) {
    seed_inputs(123);
    check_ce("cross_entropy", 6, 5, 2.0f, 0.0f);
    if (rt_test_failed_) return;
    check_ce("cross_entropy_smooth0.1", 6, 5, 2.0f, 0.1f);
    if (rt_test_failed_) return;
    check_ce("cross_entropy_smooth0.3", 4, 7, 1.0f, 0.3f);
    if (rt_test_failed_) return;
    /* large logits: the log-sum-exp must not overflow */
    check_ce("cross_entropy_large", 3, 4, 30.0f, 0.1f);
}

static rt_status f_mse(void *ctx, rt_tensor *const *in, rt_tensor **out) { return rt_mse_loss(in[0], in[1], out); }

TU_TEST(mse_loss) {
    seed_inputs(124);
    CHECK(GC("mse_loss", f_mse, NULL, 1e-2f, RANDN(0, 1, 3, 4), RANDN(0, 1, 3, 4)));
    CHECK(GC("mse_loss_4d", f_mse, NULL, 1e-2f, RANDN(0, 1, 2, 2, 3, 2), RANDN(0, 1, 2, 2, 3, 2)));
    /* gradient w.r.t. the input only (the target needs none) */
    gc_case gc = {.name = "mse_loss_x_only", .fn = f_mse, .n_in = 2, .h = 1e-2f,
                  .in = {RANDN(0, 1, 3, 4), RANDN(0, 1, 3, 4)}, .check = {true, false}};
    CHECK(gc.in[0] && gc.in[1]);
    CHECK(gc_run(&gc));
}

static rt_status f_l1(void *ctx, rt_tensor *const *in, rt_tensor **out) { return rt_l1_loss(in[0], in[1], out); }

/* |x - t| has a kink at x = t: the target is x shifted by ±(0.1 + |N(0,1)|)
 * so that no central difference of step h = 1e-2 crosses it. */
TU_TEST(l1_loss) {
    seed_inputs(125);
    rt_tensor *x = RANDN(0, 1, 2, 3, 4, 3), *shift = RANDN(0, 1, 2, 3, 4, 3);
    CHECK(x && shift);
    rt_tensor *t = tu_own(rt_tensor_empty_like(x, RT_MEM_DATA));
    CHECK(t);
    const float *xp = rt_tensor_f32(x), *sp = rt_tensor_f32(shift);
    float *tp = rt_tensor_f32(t);
    for (int64_t i = 0; i < rt_tensor_numel(x); i++)
        tp[i] = xp[i] + (i % 2 ? 1.0f : -1.0f) * (0.1f + fabsf(sp[i]));
    CHECK(GC("l1_loss", f_l1, NULL, 1e-2f, x, t));
    /* an exact tie gives sgn(0) = 0 as torch: no gradient through that element */
    rt_tensor *a = RANDN(0, 1, 4), *b = a ? tu_own(rt_tensor_empty_like(a, RT_MEM_DATA)) : NULL, *y = NULL;
    CHECK(a && b);
    memcpy(rt_tensor_f32(b), rt_tensor_f32(a), 4 * sizeof(float));
    rt_tensor_f32(b)[1] += 1.0f;
    CHECK_OK(rt_tensor_set_requires_grad(a, true));
    CHECK_OK(rt_l1_loss(a, b, &y));
    tu_own(y);
    CHECK(fabsf(rt_tensor_f32(y)[0] - 0.25f) < 1e-7f);
    CHECK_OK(rt_backward(y, NULL, false));
    CHECK(a->grad);
    const float *g = rt_tensor_f32(a->grad);
    CHECK(g[0] == 0.0f && g[1] == -0.25f && g[2] == 0.0f && g[3] == 0.0f);
}

/* ------------------------------------------------------------ reductions and pointwise math */

static rt_status f_sum(void *ctx, rt_tensor *const *in, rt_tensor **out) { return rt_sum(in[0], out); }
static rt_status f_mean(void *ctx, rt_tensor *const *in, rt_tensor **out) { return rt_mean(in[0], out); }
static rt_status f_square(void *ctx, rt_tensor *const *in, rt_tensor **out) { return rt_square(in[0], out); }
static rt_status f_pow(void *ctx, rt_tensor *const *in, rt_tensor **out) {
    return rt_pow_scalar(in[0], *(float *)ctx, out);
}
static rt_status f_tanh(void *ctx, rt_tensor *const *in, rt_tensor **out) { return rt_tanh(in[0], out); }
static rt_status f_sigmoid(void *ctx, rt_tensor *const *in, rt_tensor **out) { return rt_sigmoid(in[0], out); }

/* |N(0,1)| + lo: positive values at least lo (> h) from 0, for non-integer powers. */
static rt_tensor *randn_positive(int ndim, const int64_t *shape, float lo) {
    rt_tensor *t = randn(ndim, shape, 0.0f, 1.0f);
    if (!t) return NULL;
    float *p = rt_tensor_f32(t);
    for (int64_t i = 0; i < rt_tensor_numel(t); i++) p[i] = fabsf(p[i]) + lo;
    return t;
}

TU_TEST(sum_mean) {
    seed_inputs(126);
    CHECK(GC("sum", f_sum, NULL, 1e-2f, RANDN(0, 1, 2, 3, 4, 4)));
    CHECK(GC("sum_0d", f_sum, NULL, 1e-2f, randn(0, NULL, 0.0f, 1.0f)));
    CHECK(GC("mean", f_mean, NULL, 1e-2f, RANDN(0, 1, 3, 5)));
    CHECK(GC("mean_5d", f_mean, NULL, 1e-2f, RANDN(0, 1, 1, 2, 2, 3, 2)));
}

TU_TEST(square_pow) {
    seed_inputs(127);
    CHECK(GC("square", f_square, NULL, 1e-2f, RANDN(0, 1, 2, 3, 4, 4)));
    float p = 3.0f; /* integer exponent: negative bases are fine */
    CHECK(GC("pow_3", f_pow, &p, 1e-2f, RANDN(0, 1, 3, 5)));
    p = 2.5f;
    CHECK(GC("pow_2.5", f_pow, &p, 1e-2f, randn_positive(4, (int64_t[]){2, 2, 3, 3}, 0.5f)));
    p = 0.5f;
    CHECK(GC("pow_0.5", f_pow, &p, 1e-2f, randn_positive(2, (int64_t[]){4, 6}, 0.5f)));
    p = -1.5f;
    CHECK(GC("pow_-1.5", f_pow, &p, 1e-2f, randn_positive(2, (int64_t[]){4, 6}, 0.5f)));
    p = 1.0f;
    CHECK(GC("pow_1", f_pow, &p, 1e-2f, RANDN(0, 1, 2, 7)));
    p = 0.0f; /* constant 1: the gradient is exactly zero */
    CHECK(GC("pow_0", f_pow, &p, 1e-2f, RANDN(0, 1, 2, 7)));
}

TU_TEST(tanh_sigmoid) {
    seed_inputs(128);
    CHECK(GC("tanh", f_tanh, NULL, 1e-2f, RANDN(0, 2, 2, 3, 4, 4)));
    CHECK(GC("tanh_5d", f_tanh, NULL, 1e-2f, RANDN(0, 1, 1, 2, 2, 3, 2)));
    CHECK(GC("sigmoid", f_sigmoid, NULL, 1e-2f, RANDN(0, 2, 2, 3, 4, 4)));
    CHECK(GC("sigmoid_2d", f_sigmoid, NULL, 1e-2f, RANDN(0, 4, 5, 7)));
}

/* A custom loss from the new ops: mean((tanh(a) - sigmoid(b))²) + 0.1·sum(c^3). */
static rt_status f_custom_loss(void *ctx, rt_tensor *const *in, rt_tensor **out) {
    rt_tensor *t[7] = {0};
    rt_status st = rt_tanh(in[0], &t[0]);
    if (st == RT_OK) st = rt_sigmoid(in[1], &t[1]);
    if (st == RT_OK) st = rt_sub(t[0], t[1], &t[2]);
    if (st == RT_OK) st = rt_square(t[2], &t[3]);
    if (st == RT_OK) st = rt_mean(t[3], &t[4]);
    if (st == RT_OK) st = rt_pow_scalar(in[2], 3.0f, &t[5]);
    if (st == RT_OK) st = rt_sum(t[5], &t[6]);
    if (st == RT_OK) {
        rt_tensor *scaled = NULL;
        st = rt_mul_scalar(t[6], 0.1f, &scaled);
        if (st == RT_OK) st = rt_add(t[4], scaled, out);
        rt_tensor_release(scaled);
    }
    for (int i = 0; i < 7; i++) rt_tensor_release(t[i]);
    return st;
}

TU_TEST(custom_loss) {
    seed_inputs(129);
    CHECK(GC("custom_loss", f_custom_loss, NULL, 1e-2f, RANDN(0, 1, 2, 3, 2, 2), RANDN(0, 1, 2, 3, 2, 2),
             RANDN(0, 1, 4, 3)));
}

/* A 1-element tensor holding v (DATA). */
static rt_tensor *scalar1(float v) {
    int64_t one = 1;
    return tu_own(rt_tensor_from_data(1, &one, RT_F32, &v, RT_MEM_DATA));
}

/* y = op(x) and dx for dy = 1 on a single value, grad mode on. */
static void unary_at(gc_fn fn, void *ctx, float x, float *y, float *dx) {
    rt_tensor *xt = scalar1(x), *yt = NULL;
    *y = *dx = -12345.0f;
    CHECK(xt);
    CHECK_OK(rt_tensor_set_requires_grad(xt, true));
    CHECK_OK(fn(ctx, &xt, &yt));
    tu_own(yt);
    rt_tensor *one = scalar1(1.0f);
    CHECK_OK(rt_backward(yt, one, false));
    CHECK(xt->grad);
    *y = rt_tensor_f32(yt)[0];
    *dx = rt_tensor_f32(xt->grad)[0];
}

/* PyTorch's values at the edges (torch.pow / tanh / sigmoid and their backward). */
TU_TEST(pow_tanh_sigmoid_edge_values) {
    float y, dx, p;
    p = 1.0f / 3.0f; /* negative base, non-integer exponent: NaN, both ways */
    unary_at(f_pow, &p, -8.0f, &y, &dx);
    CHECK(isnan(y) && isnan(dx));
    p = 3.0f; /* negative base, integer exponent: exact */
    unary_at(f_pow, &p, -2.0f, &y, &dx);
    CHECK(y == -8.0f && dx == 12.0f);
    p = -1.0f; /* 0^-1 = inf, gradient -1·0^-2 = -inf */
    unary_at(f_pow, &p, 0.0f, &y, &dx);
    CHECK(isinf(y) && y > 0 && isinf(dx) && dx < 0);
    p = 0.5f; /* sqrt: 0 at 0 with an infinite slope */
    unary_at(f_pow, &p, 0.0f, &y, &dx);
    CHECK(y == 0.0f && isinf(dx) && dx > 0);
    p = 2.0f;
    unary_at(f_pow, &p, 0.0f, &y, &dx);
    CHECK(y == 0.0f && dx == 0.0f);
    p = 0.0f; /* x^0 = 1 even for NaN, gradient zero even for NaN */
    unary_at(f_pow, &p, NAN, &y, &dx);
    CHECK(y == 1.0f && dx == 0.0f);
    unary_at(f_pow, &p, 0.0f, &y, &dx);
    CHECK(y == 1.0f && dx == 0.0f);
    unary_at(f_square, NULL, -3.0f, &y, &dx);
    CHECK(y == 9.0f && dx == -6.0f);
    /* saturation: exact limits, zero gradients, never NaN */
    unary_at(f_sigmoid, NULL, -100.0f, &y, &dx);
    CHECK(y == 0.0f && dx == 0.0f);
    unary_at(f_sigmoid, NULL, 100.0f, &y, &dx);
    CHECK(y == 1.0f && dx == 0.0f);
    unary_at(f_sigmoid, NULL, 0.0f, &y, &dx);
    CHECK(y == 0.5f && dx == 0.25f);
    unary_at(f_tanh, NULL, -100.0f, &y, &dx);
    CHECK(y == -1.0f && dx == 0.0f);
    unary_at(f_tanh, NULL, 0.0f, &y, &dx);
    CHECK(y == 0.0f && dx == 1.0f);
    /* sum / mean of an empty tensor: 0 and NaN, as PyTorch */
    int64_t zero = 0;
    rt_tensor *e = tu_own(rt_tensor_create(1, &zero, RT_F32, RT_DEVICE_CPU, RT_MEM_DATA)), *r = NULL;
    CHECK(e);
    CHECK_OK(rt_sum(e, &r));
    tu_own(r);
    CHECK(r->ndim == 0 && rt_tensor_f32(r)[0] == 0.0f);
    CHECK_OK(rt_mean(e, &r));
    tu_own(r);
    CHECK(r->ndim == 0 && isnan(rt_tensor_f32(r)[0]));
}

/* Errors are values: NULL → INVALID_ARG, int32 → DTYPE, bad exponent → INVALID_ARG. */
TU_TEST(new_ops_errors) {
    typedef rt_status (*unary)(rt_tensor *, rt_tensor **);
    const unary ops[] = {rt_sum, rt_mean, rt_square, rt_tanh, rt_sigmoid};
    const char *names[] = {"sum", "mean", "square", "tanh", "sigmoid"};
    int64_t shape[2] = {2, 3};
    rt_tensor *xi = tu_own(rt_tensor_zeros(2, shape, RT_I32, RT_DEVICE_CPU, RT_MEM_DATA));
    rt_tensor *x = tu_own(rt_tensor_zeros(2, shape, RT_F32, RT_DEVICE_CPU, RT_MEM_DATA)), *y = x;
    CHECK(xi && x);
    for (int i = 0; i < 5; i++) {
        y = x;
        CHECK(ops[i](NULL, &y) == RT_ERR_INVALID_ARG);
        CHECK(y == NULL);
        CHECK(strstr(rt_error_last(), names[i]) && strstr(rt_error_last(), "NULL"));
        CHECK(ops[i](x, NULL) == RT_ERR_INVALID_ARG);
        CHECK(strstr(rt_error_last(), names[i]) && strstr(rt_error_last(), "NULL"));
        CHECK(ops[i](xi, &y) == RT_ERR_DTYPE);
        CHECK(strstr(rt_error_last(), "float32"));
    }
    CHECK(rt_pow_scalar(NULL, 2.0f, &y) == RT_ERR_INVALID_ARG);
    CHECK(rt_pow_scalar(x, 2.0f, NULL) == RT_ERR_INVALID_ARG);
    CHECK(rt_pow_scalar(xi, 2.0f, &y) == RT_ERR_DTYPE);
    CHECK(rt_pow_scalar(x, INFINITY, &y) == RT_ERR_INVALID_ARG);
    CHECK(rt_pow_scalar(x, NAN, &y) == RT_ERR_INVALID_ARG);
    CHECK(strstr(rt_error_last(), "exponent"));
    printf("  pow_scalar(x, NaN): %s\n", rt_error_last());
}

/* What backward keeps, as documented in ops.h: sum/mean nothing, square/pow
 * their input, tanh/sigmoid their output. */
enum { KEEPS_NOTHING, KEEPS_INPUT, KEEPS_OUTPUT };

typedef struct unary_case {
    const char *name;
    gc_fn fn;
    void *ctx;
    int keeps;
} unary_case;

static float g_pow_p = 2.5f;
static const unary_case g_unary[] = {
    {"sum", f_sum, NULL, KEEPS_NOTHING},     {"mean", f_mean, NULL, KEEPS_NOTHING},
    {"square", f_square, NULL, KEEPS_INPUT}, {"pow_scalar", f_pow, &g_pow_p, KEEPS_INPUT},
    {"tanh", f_tanh, NULL, KEEPS_OUTPUT},    {"sigmoid", f_sigmoid, NULL, KEEPS_OUTPUT},
};
#define N_UNARY ((int)(sizeof g_unary / sizeof g_unary[0]))

static int64_t live_bytes(rt_mem_category c) {
    rt_memstats m;
    rt_memstats_get(&m);
    return m.live[c];
}

/* On `device`: h = 1·x (a TEMP activation), y = op(h), backward with ones;
 * checks the output's shape and device, the SAVED bytes while the graph is
 * alive, the gradient's shape and device, and reports the step's peak. */
static void run_device(const unary_case *u, rt_device device, int64_t *peak) {
    int64_t shape[4] = {2, 3, 4, 5};
    rt_tensor *x = tu_own(rt_tensor_create(4, shape, RT_F32, device, RT_MEM_DATA)), *h = NULL, *y = NULL;
    CHECK(x);
    if (device == RT_DEVICE_CPU) rt_generator_uniform(&g_rng, rt_tensor_numel(x), rt_tensor_f32(x));
    CHECK_OK(rt_tensor_set_requires_grad(x, true));
    rt_memstats_reset_peaks();
    rt_memstats m0;
    rt_memstats_get(&m0);
    CHECK_OK(rt_mul_scalar(x, 1.0f, &h));
    tu_own(h);
    int64_t saved0 = live_bytes(RT_MEM_SAVED);
    CHECK_OK(u->fn(u->ctx, &h, &y));
    tu_own(y);
    CHECK_EQ_INT(y->device, device);
    CHECK(y->grad_fn != NULL);
    if (u->keeps == KEEPS_NOTHING) CHECK_EQ_INT(y->ndim, 0);
    else CHECK(rt_tensor_same_shape(y, x));
    int64_t want = u->keeps == KEEPS_NOTHING ? 0 : (int64_t)rt_tensor_nbytes(u->keeps == KEEPS_INPUT ? h : y);
    CHECK_EQ_INT(live_bytes(RT_MEM_SAVED) - saved0, want);
    rt_tensor *g = tu_own(rt_tensor_create(y->ndim, y->shape, RT_F32, device, RT_MEM_DATA));
    CHECK(g);
    CHECK_OK(rt_tensor_fill(g, 1.0f));
    CHECK_OK(rt_backward(y, g, false));
    CHECK_EQ_INT(live_bytes(RT_MEM_SAVED), saved0); /* released by the backward */
    CHECK(x->grad && rt_tensor_same_shape(x->grad, x));
    CHECK_EQ_INT(x->grad->device, device);
    rt_memstats m1;
    rt_memstats_get(&m1);
    *peak = m1.peak_total - m0.live_total;
}

/* Meta tensors: outputs and gradients get their shapes and the same memory
 * as on the cpu, nothing is computed, nothing crashes. */
TU_TEST(new_ops_meta) {
    seed_inputs(130);
    for (int i = 0; i < N_UNARY; i++) {
        int64_t peak_cpu = -1, peak_meta = -2;
        run_device(&g_unary[i], RT_DEVICE_CPU, &peak_cpu);
        if (rt_test_failed_) return;
        run_device(&g_unary[i], RT_DEVICE_META, &peak_meta);
        if (rt_test_failed_) return;
        printf("  %-10s step peak: cpu %lld B, meta %lld B\n", g_unary[i].name, (long long)peak_cpu,
               (long long)peak_meta);
        CHECK_EQ_INT(peak_meta, peak_cpu);
    }
}

/* x converted to `layout` as a new leaf requiring grad (a copy even when x
 * already has that order). */
static rt_tensor *leaf_in(rt_tensor *x, rt_layout layout) {
    bool prev = rt_grad_set_enabled(false);
    rt_tensor *t = NULL;
    rt_status st = rt_to_layout(x, layout, &t);
    rt_grad_set_enabled(prev);
    if (st != RT_OK) return NULL;
    if (t == x) {
        rt_tensor_release(t);
        t = rt_tensor_empty_like(x, RT_MEM_DATA);
        if (t) rt_tensor_copy(t, x);
    }
    tu_own(t);
    if (t && rt_tensor_set_requires_grad(t, true) != RT_OK) return NULL;
    return t;
}

/* Every op on a BLOCKED input gives, element by element, what it gives on the
 * PLAIN one; the output (unless 0-d) and the gradient are BLOCKED. */
TU_TEST(new_ops_blocked_layout) {
    seed_inputs(131);
    const int64_t shapes[2][5] = {{2, 2 * rt_layout_block(), 3, 3}, {1, rt_layout_block(), 2, 3, 2}};
    for (int s = 0; s < 2; s++) {
        int nd = s ? 5 : 4;
        rt_tensor *xp = randn_positive(nd, shapes[s], 0.25f), *gp = randn(nd, shapes[s], 0.0f, 1.0f);
        CHECK(xp && gp);
        for (int i = 0; i < N_UNARY; i++) {
            const unary_case *u = &g_unary[i];
            rt_tensor *xa = leaf_in(xp, RT_LAYOUT_PLAIN), *xb = leaf_in(xp, RT_LAYOUT_BLOCKED);
            CHECK(xa && xb && xb->layout == RT_LAYOUT_BLOCKED);
            rt_tensor *ya = NULL, *yb = NULL, *gb = NULL;
            CHECK_OK(u->fn(u->ctx, &xa, &ya));
            tu_own(ya);
            CHECK_OK(u->fn(u->ctx, &xb, &yb));
            tu_own(yb);
            double err = 0, ref = 0, gerr = 0, gref = 0;
            CHECK_OK(rt_compare(yb, ya, &err, &ref));
            bool reduced = u->keeps == KEEPS_NOTHING;
            CHECK_EQ_INT(yb->layout, reduced ? RT_LAYOUT_PLAIN : RT_LAYOUT_BLOCKED);
            /* pointwise: bit-identical; sum/mean: another summation order */
            CHECK(reduced ? err <= 1e-6 * ref : err == 0.0);
            if (reduced) {
                CHECK_OK(rt_backward(ya, NULL, false));
                CHECK_OK(rt_backward(yb, NULL, false));
            } else {
                bool prev = rt_grad_set_enabled(false);
                rt_status st = rt_to_layout(gp, RT_LAYOUT_BLOCKED, &gb);
                rt_grad_set_enabled(prev);
                CHECK_OK(st);
                tu_own(gb);
                CHECK_OK(rt_backward(ya, gp, false));
                CHECK_OK(rt_backward(yb, gb, false));
            }
            CHECK(xa->grad && xb->grad);
            CHECK_EQ_INT(xb->grad->layout, RT_LAYOUT_BLOCKED);
            CHECK_OK(rt_compare(xb->grad, xa->grad, &gerr, &gref));
            printf("  %-10s %dd blocked vs plain: output %.3g, gradient %.3g\n", u->name, nd, err, gerr);
            CHECK(gerr == 0.0 && gref > 0.0);
        }
    }
}

/* ------------------------------------------------------------ affine coupling */

static rt_status f_affine(void *ctx, rt_tensor *const *in, rt_tensor **out) {
    return rt_affine_coupling(in[0], in[1], out);
}

TU_TEST(affine_coupling) {
    seed_inputs(132);
    /* s_raw ~ N(0, 2) reaches the soft clamp's curved part */
    CHECK(GC("affine_coupling", f_affine, NULL, 1e-2f, RANDN(0, 1, 2, 3, 2, 2), RANDN(0, 2, 2, 6, 2, 2)));
    CHECK(GC("affine_coupling_nc", f_affine, NULL, 1e-2f, RANDN(0, 1, 3, 2), RANDN(0, 1, 3, 4)));
}

/* Extreme inputs: a NaN/Inf output is RT_ERR_NONFINITE with a message naming
 * the element and the fix, no output and no graph; an extreme log-scale alone
 * stays finite (it is soft-clamped). */
TU_TEST(affine_coupling_nonfinite) {
    seed_inputs(133);
    rt_tensor *x2 = RANDN(0, 1, 2, 2, 3), *st = RANDN(0, 1, 2, 4, 3), *y = NULL;
    CHECK(x2 && st);
    CHECK_OK(rt_tensor_set_requires_grad(x2, true));
    CHECK_OK(rt_tensor_set_requires_grad(st, true));
    float *xp = rt_tensor_f32(x2), *sp = rt_tensor_f32(st);
    /* s_raw = ±1e30 and ±inf: the scale stays in [e^-2, e^2], y finite */
    sp[0] = 1e30f, sp[1] = -INFINITY, sp[12 + 2] = INFINITY;
    CHECK_OK(rt_affine_coupling(x2, st, &y));
    tu_own(y);
    CHECK(isfinite(tu_max_abs(rt_tensor_numel(y), rt_tensor_f32(y))));
    /* x2 near FLT_MAX times a scale > 1 overflows: sample 1, element 4 */
    xp[6 + 4] = 3e38f;
    sp[12 + 4] = 2.0f;
    y = x2;
    rt_status s = rt_affine_coupling(x2, st, &y);
    printf("  overflow: %s: %s\n", rt_status_str(s), rt_error_last());
    CHECK_EQ_INT(s, RT_ERR_NONFINITE);
    CHECK(y == NULL);
    CHECK(strstr(rt_error_last(), "sample 1, element 4") && strstr(rt_error_last(), "overflowed"));
    CHECK(strstr(rt_error_last(), "learning rate"));
    xp[6 + 4] = 1.0f;
    /* a NaN shift t (sample 0, element 1): named as a non-finite input */
    sp[6 + 1] = NAN;
    s = rt_affine_coupling(x2, st, &y);
    printf("  NaN shift: %s: %s\n", rt_status_str(s), rt_error_last());
    CHECK_EQ_INT(s, RT_ERR_NONFINITE);
    CHECK(strstr(rt_error_last(), "sample 0, element 1") && strstr(rt_error_last(), "already NaN/Inf"));
    /* an infinite input under grad mode: nothing recorded, no gradient */
    sp[6 + 1] = 0.0f;
    xp[0] = INFINITY;
    CHECK_EQ_INT(rt_affine_coupling(x2, st, &y), RT_ERR_NONFINITE);
    CHECK(y == NULL && x2->grad == NULL && st->grad == NULL);
}

/* ------------------------------------------------------------ a composite graph */

/* conv -> batch_norm(train) -> h + 0.5·h (fan-out) -> avg_pool -> flatten
 * -> linear -> cross_entropy: gradients meet and accumulate in the engine. */
typedef struct chain_ctx {
    rt_tensor *rm, *rv, *target;
} chain_ctx;

static rt_status f_chain(void *ctx, rt_tensor *const *in, rt_tensor **out) {
    chain_ctx *c = ctx;
    rt_conv_opts co = {.padding = {1, 1}};
    rt_pool_opts po = {.kernel = {2, 2}};
    rt_tensor *t[7] = {0};
    rt_status st = rt_conv(in[0], in[1], NULL, &co, &t[0]);
    if (st == RT_OK) st = rt_batch_norm(t[0], in[2], in[3], c->rm, c->rv, NULL, true, 0.1f, 1e-5f, &t[1]);
    if (st == RT_OK) st = rt_mul_scalar(t[1], 0.5f, &t[2]);
    if (st == RT_OK) st = rt_add(t[1], t[2], &t[3]);
    if (st == RT_OK) st = rt_avg_pool(t[3], &po, &t[4]);
    if (st == RT_OK) st = rt_flatten(t[4], &t[5]);
    if (st == RT_OK) st = rt_linear(t[5], in[4], NULL, &t[6]);
    if (st == RT_OK) st = rt_cross_entropy(t[6], c->target, 0.0f, out);
    for (int i = 0; i < 7; i++) rt_tensor_release(t[i]);
    return st;
}

TU_TEST(composite_chain) {
    seed_inputs(125);
    int64_t n = 3, c2 = 2;
    chain_ctx c = {.rm = randn(1, &c2, 0, 1), .rv = randn(1, &c2, 1, 0),
                   .target = tu_own(rt_tensor_create(1, &n, RT_I32, RT_DEVICE_CPU, RT_MEM_DATA))};
    CHECK(c.rm && c.rv && c.target);
    int32_t *t = rt_tensor_data(c.target);
    t[0] = 2, t[1] = 0, t[2] = 3;
    CHECK(GC("composite_chain", f_chain, &c, 1e-2f, RANDN(0, 1, 3, 1, 4, 4), RANDN(0, 0.5f, 2, 1, 3, 3),
             RANDN(1, 0.3f, 2), RANDN(0, 0.3f, 2), RANDN(0, 1, 4, 8)));
}

RT_TEST_MAIN({"conv2d_basic", conv2d_basic}, {"conv2d_stride2_pad_nobias", conv2d_stride2_pad_nobias},
             {"conv2d_dilation2", conv2d_dilation2}, {"conv2d_groups", conv2d_groups},
             {"conv2d_rect_mixed", conv2d_rect_mixed}, {"conv3d", conv3d}, {"linear", linear},
             {"batch_norm_train", batch_norm_train}, {"batch_norm_eval", batch_norm_eval}, {"relu", relu},
             {"leaky_relu", leaky_relu}, {"max_pool", max_pool}, {"avg_pool", avg_pool},
             {"adaptive_avg_pool", adaptive_avg_pool}, {"add", add}, {"add_relu", add_relu}, {"sub", sub}, {"mul", mul}, {"mul_scalar", mul_scalar},
             {"cat_channels", cat_channels}, {"split_channels", split_channels},
             {"reshape_flatten", reshape_flatten}, {"dropout_gradcheck", dropout_gradcheck},
             {"dropout_mask", dropout_mask}, {"cross_entropy", cross_entropy}, {"mse_loss", mse_loss}, {"l1_loss", l1_loss},
             {"sum_mean", sum_mean}, {"square_pow", square_pow}, {"tanh_sigmoid", tanh_sigmoid},
             {"custom_loss", custom_loss}, {"pow_tanh_sigmoid_edge_values", pow_tanh_sigmoid_edge_values},
             {"new_ops_errors", new_ops_errors}, {"new_ops_meta", new_ops_meta},
             {"new_ops_blocked_layout", new_ops_blocked_layout}, {"affine_coupling", affine_coupling},
             {"affine_coupling_nonfinite", affine_coupling_nonfinite}, {"composite_chain", composite_chain})
