/* The channels-last memory order (core/layout.h, RT_LAYOUT_CHANNELS_LAST)
 * gives the values of the plain order: the split into channels-last pieces
 * and the concatenation back (every element at its logical index, from and
 * to plain, blocked and channels-last wholes, gradients included), group
 * norm and a 3-D convolution on channels-last tensors against the same ops
 * on plain ones (forward and every gradient, relative error ≤ 1e-5: the
 * kernels sum in other orders), and a reversible block whose halves are
 * channels-last against the same block without it. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "autograd/engine.h"
#include "core/rng.h"
#include "kernels/layout.h"
#include "memory/reversible.h"
#include "nn/modules.h"
#include "nn/modules3d.h"
#include "ops/ops.h"
#include "ops/ops3d.h"
#include "rt_test.h"

/* A plain f32 tensor of N(0, 1) values from `seed`. */
static rt_tensor *randn(int ndim, const int64_t *shape, uint64_t seed, bool requires_grad) {
    rt_tensor *t = rt_tensor_create(ndim, shape, RT_F32, RT_DEVICE_CPU, RT_MEM_DATA);
    if (!t) return NULL;
    rt_generator g = {seed, 0};
    rt_generator_normal(&g, rt_tensor_numel(t), 0.0f, 1.0f, rt_tensor_f32(t));
    if (requires_grad && rt_tensor_set_requires_grad(t, true) != RT_OK) {
        rt_tensor_release(t);
        return NULL;
    }
    return t;
}

/* sum(y ⊙ w) for a plain weight w of y's logical shape (w converted to y's
 * order first), so backward sends w to y in y's own order. */
static rt_status weighted_sum(rt_tensor *y, rt_tensor *w, rt_tensor **loss) {
    rt_tensor *wl = NULL, *p = NULL;
    bool grad = rt_grad_set_enabled(false);
    rt_status st = rt_to_layout(w, y->layout, &wl);
    rt_grad_set_enabled(grad);
    if (st == RT_OK) st = rt_mul(y, wl, &p);
    if (st == RT_OK) st = rt_sum(p, loss);
    rt_tensor_release(wl);
    rt_tensor_release(p);
    return st;
}

/* Element (n, c, s) of x read through its order. */
static float at(const rt_tensor *x, int64_t n, int64_t c, int64_t s) {
    const int64_t C = x->shape[1], S = rt_tensor_numel(x) / (x->shape[0] * C), B = rt_layout_block();
    const float *p = rt_tensor_f32((rt_tensor *)x);
    switch (x->layout) {
    case RT_LAYOUT_CHANNELS_LAST: return p[(n * S + s) * C + c];
    case RT_LAYOUT_BLOCKED: return p[((n * (C / B) + c / B) * S + s) * B + c % B];
    default: return p[(n * C + c) * S + s];
    }
}

/* Splits a 16-channel whole in each order into channels-last pieces (8 + 8,
 * and 5 + 11: pieces that cross the blocks), checks every element, joins
 * them back into each order and checks the gradient reaching the whole. */
static void test_split_and_cat(void) {
    int64_t shape[5] = {2, 16, 3, 4, 5};
    const int64_t S = 60, B = rt_layout_block();
    const int64_t splits[2][2] = {{8, 8}, {5, 11}};
    const rt_layout orders[3] = {RT_LAYOUT_PLAIN, RT_LAYOUT_BLOCKED, RT_LAYOUT_CHANNELS_LAST};
    CHECK(16 % B == 0);
    for (int oi = 0; oi < 3; oi++)
        for (int si = 0; si < 2; si++) {
            rt_tensor *x0 = randn(5, shape, 3, true), *w = randn(5, shape, 4, false), *x = NULL;
            CHECK_OK(rt_to_layout(x0, orders[oi], &x));
            rt_tensor *pieces[2] = {0}, *back = NULL, *loss = NULL;
            CHECK_OK(rt_split_channels_layout(x, 2, splits[si], RT_LAYOUT_CHANNELS_LAST, pieces));
            int bad = 0;
            for (int k = 0; k < 2; k++) {
                CHECK(pieces[k]->layout == RT_LAYOUT_CHANNELS_LAST && pieces[k]->shape[1] == splits[si][k]);
                for (int64_t n = 0; n < 2; n++)
                    for (int64_t c = 0; c < splits[si][k]; c++)
                        for (int64_t s = 0; s < S; s++)
                            bad += at(pieces[k], n, c, s) != at(x0, n, (k ? splits[si][0] : 0) + c, s);
            }
            CHECK_EQ_INT(bad, 0);
            for (int to = 0; to < 3; to++) {
                rt_tensor_zero_grad(x0);
                CHECK_OK(rt_cat_channels_layout(2, pieces, orders[to], &back));
                CHECK(back->layout == orders[to]);
                double m = 0, ref = 0;
                CHECK_OK(rt_compare(back, x0, &m, &ref));
                CHECK(m == 0.0 && ref > 0.0);
                CHECK_OK(weighted_sum(back, w, &loss));
                CHECK_OK(rt_backward(loss, NULL, true));
                CHECK_OK(rt_compare(x0->grad, w, &m, &ref)); /* d sum(cat(split(x)) ⊙ w)/dx = w */
                CHECK(m == 0.0);
                rt_tensor_release(back);
                rt_tensor_release(loss);
            }
            rt_tensor_release(pieces[0]);
            rt_tensor_release(pieces[1]);
            rt_tensor_release(x);
            rt_tensor_release(x0);
            rt_tensor_release(w);
        }
    rt_tensor *x = randn(5, shape, 5, false), *pieces[2];
    CHECK(rt_split_channels_layout(x, 2, splits[0], RT_LAYOUT_BLOCKED, pieces) == RT_ERR_INVALID_ARG);
    rt_tensor_release(x);
    /* a piece's gradient arriving in another order (here the plain seed of
     * backward) is converted before it is copied into the whole's */
    int64_t half[5] = {2, 8, 3, 4, 5};
    rt_tensor *x0 = randn(5, shape, 6, true), *g = randn(5, half, 7, false);
    CHECK_OK(rt_split_channels_layout(x0, 2, splits[0], RT_LAYOUT_CHANNELS_LAST, pieces));
    CHECK_OK(rt_backward(pieces[0], g, false));
    int bad = 0;
    for (int64_t n = 0; n < 2; n++)
        for (int64_t c = 0; c < 16; c++)
            for (int64_t s = 0; s < S; s++) bad += at(x0->grad, n, c, s) != (c < 8 ? at(g, n, c, s) : 0.0f);
    CHECK_EQ_INT(bad, 0);
    rt_tensor_release(pieces[0]);
    rt_tensor_release(pieces[1]);
    rt_tensor_release(x0);
    rt_tensor_release(g);
}

/* Output and gradients of f on x in the plain order and in channels-last;
 * *rel receives the worst relative difference over y, dx and the
 * parameters' gradients. */
typedef rt_status (*op_fn)(rt_tensor *x, void *user, rt_tensor **y);
static void plain_vs_channels_last(op_fn f, void *user, rt_tensor *const *params, int np, const int64_t *shape,
                                   double *rel) {
    rt_tensor *grads[2][4] = {{0}}, *ys[2] = {0}, *dxs[2] = {0};
    double worst = 0.0;
    *rel = INFINITY;
    for (int k = 0; k < 2; k++) {
        rt_tensor *x0 = randn(5, shape, 7, true), *x = NULL, *y = NULL, *loss = NULL, *w = NULL;
        for (int i = 0; i < np; i++) rt_tensor_zero_grad(params[i]);
        CHECK_OK(rt_to_layout(x0, k ? RT_LAYOUT_CHANNELS_LAST : RT_LAYOUT_PLAIN, &x));
        CHECK_OK(f(x, user, &y));
        CHECK(y->layout == (k ? RT_LAYOUT_CHANNELS_LAST : RT_LAYOUT_PLAIN));
        w = randn(y->ndim, y->shape, 8, false);
        CHECK_OK(weighted_sum(y, w, &loss));
        CHECK_OK(rt_backward(loss, NULL, false));
        ys[k] = y;
        dxs[k] = rt_tensor_retain(x0->grad);
        for (int i = 0; i < np; i++) grads[k][i] = rt_tensor_retain(params[i]->grad);
        rt_tensor_release(loss);
        rt_tensor_release(w);
        rt_tensor_release(x);
        rt_tensor_release(x0);
    }
    worst = fmax(rt_rel_difference(ys[1], ys[0]), rt_rel_difference(dxs[1], dxs[0]));
    for (int i = 0; i < np; i++) worst = fmax(worst, rt_rel_difference(grads[1][i], grads[0][i]));
    for (int k = 0; k < 2; k++) {
        rt_tensor_release(ys[k]);
        rt_tensor_release(dxs[k]);
        for (int i = 0; i < np; i++) rt_tensor_release(grads[k][i]);
    }
    *rel = worst;
}

typedef struct gn_args {
    rt_tensor *weight, *bias;
} gn_args;

static rt_status gn(rt_tensor *x, void *user, rt_tensor **y) {
    gn_args *a = user;
    return rt_group_norm(x, 4, a->weight, a->bias, 1e-5f, y);
}

static void test_group_norm(void) {
    int64_t shape[5] = {2, 8, 6, 7, 9}, c = 8;
    gn_args a = {randn(1, &c, 11, true), randn(1, &c, 12, true)};
    rt_tensor *params[2] = {a.weight, a.bias};
    double worst;
    plain_vs_channels_last(gn, &a, params, 2, shape, &worst);
    printf("  group norm: max relative difference %.2e\n", worst);
    CHECK(worst <= 1e-5);
    rt_tensor_release(a.weight);
    rt_tensor_release(a.bias);
}

static rt_status conv(rt_tensor *x, void *user, rt_tensor **y) {
    rt_conv_opts o = {.stride = {1, 1, 1}, .padding = {1, 1, 1}, .dilation = {1, 1, 1}, .groups = 1};
    return rt_conv(x, (rt_tensor *)user, NULL, &o, y);
}

/* 8 channels (padded to twice under 16-channel blocks: the case the
 * channels-last order is for) and 14 (padded a little, which channels-last
 * tensors also compute in their own order); under 8-channel blocks the plain
 * 8-channel call computes blocked. */
static void test_conv3d(void) {
    for (int64_t c = 8; c <= 14; c += 6) {
        int64_t shape[5] = {1, c, 6, 7, 9}, ws[5] = {c, c, 3, 3, 3};
        rt_tensor *w = randn(5, ws, 13, true);
        double worst;
        plain_vs_channels_last(conv, w, &w, 1, shape, &worst);
        printf("  conv3d %lld -> %lld: max relative difference %.2e\n", (long long)c, (long long)c, worst);
        CHECK(worst <= 1e-5);
        rt_tensor_release(w);
    }
}

/* GroupNorm → LeakyReLU → Conv3d on c channels, the partially reversible
 * U-Net's F and G. */
static rt_module *branch(rt_init_ctx *ctx, int64_t c) {
    rt_module *seq = NULL, *m = NULL;
    if (rt_sequential_create(&seq) != RT_OK) return NULL;
    bool ok = rt_group_norm_create(ctx, 2, c, 1e-5f, true, &m) == RT_OK && rt_module_add_child(seq, "norm", m) == RT_OK;
    ok = ok && rt_leaky_relu_create(0.01f, &m) == RT_OK && rt_module_add_child(seq, "act", m) == RT_OK;
    ok = ok && rt_conv_create(ctx, 3, c, c, 3, 1, 1, 1, false, RT_INIT_DEFAULT, &m) == RT_OK && rt_module_add_child(seq, "conv", m) == RT_OK;
    if (!ok) {
        rt_module_destroy(seq);
        return NULL;
    }
    return seq;
}

/* Forward hook: the memory order of the input F's convolution saw. */
static rt_status record_layout(rt_module *m, rt_tensor *x, rt_tensor *y, void *user) {
    (void)m, (void)y;
    *(rt_layout *)user = x->layout;
    return RT_OK;
}

/* The same block (same weights) with and without channels-last halves of c
 * channels: equal outputs and gradients; F's convolution reads
 * channels-last halves when the blocked order would pad them at all (8 or
 * 14 channels under 16-channel blocks) and the input's order otherwise. A
 * 16-channel input comes blocked, a 28-channel one (not a whole number of
 * blocks) plain. */
static void reversible_block_case(int64_t c) {
    rt_init_ctx ctx = rt_init_ctx_make(RT_DEVICE_CPU, 17);
    rt_module *f = branch(&ctx, c), *g = branch(&ctx, c), *block = NULL;
    CHECK(f && g);
    CHECK_OK(rt_rev_block_create(f, g, RT_COUPLING_ADDITIVE, &block));
    rt_tensor *params[16];
    rt_state_dict *sd = NULL;
    CHECK_OK(rt_module_state_dict(block, &sd));
    int np = rt_state_dict_num_params(sd);
    CHECK(np <= 16);
    rt_state_dict_params(sd, params, 16);
    int64_t shape[5] = {1, 2 * c, 6, 7, 9};
    rt_layout in_layout = (2 * c) % rt_layout_block() ? RT_LAYOUT_PLAIN : RT_LAYOUT_BLOCKED;
    rt_tensor *ga[16] = {0}, *gb[16] = {0}, *ya = NULL, *yb = NULL;
    rt_layout seen = RT_LAYOUT_WEIGHT_BLOCKED;
    rt_module_set_forward_hook(f->children[2].module, record_layout, &seen);
    for (int k = 0; k < 2; k++) {
        CHECK_OK(rt_rev_block_set_channels_last(block, k == 1));
        rt_tensor *x0 = randn(5, shape, 19, false), *x = NULL, *loss = NULL, *w = randn(5, shape, 20, false);
        bool grad = rt_grad_set_enabled(false);
        CHECK_OK(rt_to_layout(x0, in_layout, &x));
        rt_grad_set_enabled(grad);
        for (int i = 0; i < np; i++) rt_tensor_zero_grad(params[i]);
        rt_tensor *y = NULL;
        CHECK_OK(rt_module_forward(block, x, &y));
        CHECK_OK(weighted_sum(y, w, &loss));
        CHECK_OK(rt_backward(loss, NULL, false));
        for (int i = 0; i < np; i++) (k ? gb : ga)[i] = rt_tensor_retain(params[i]->grad);
        bool pads = c % rt_layout_block() != 0;
        CHECK(seen == (k && pads ? RT_LAYOUT_CHANNELS_LAST : pads ? RT_LAYOUT_PLAIN : RT_LAYOUT_BLOCKED));
        *(k ? &yb : &ya) = y;
        rt_tensor_release(loss);
        rt_tensor_release(w);
        rt_tensor_release(x);
        rt_tensor_release(x0);
    }
    double worst = rt_rel_difference(yb, ya);
    for (int i = 0; i < np; i++) worst = fmax(worst, rt_rel_difference(gb[i], ga[i]));
    printf("  reversible block, channels-last halves of %lld: max relative difference %.2e\n", (long long)c, worst);
    CHECK(worst <= 1e-5);
    CHECK(rt_rev_block_set_channels_last(f, true) == RT_ERR_INVALID_ARG);
    for (int i = 0; i < np; i++) {
        rt_tensor_release(ga[i]);
        rt_tensor_release(gb[i]);
    }
    rt_tensor_release(ya);
    rt_tensor_release(yb);
    rt_state_dict_destroy(sd);
    rt_module_destroy(block);
}

static void test_reversible_block(void) {
    reversible_block_case(8);
    reversible_block_case(14);
}

RT_TEST_MAIN({"split_and_cat", test_split_and_cat}, {"group_norm", test_group_norm}, {"conv3d", test_conv3d},
             {"reversible_block", test_reversible_block})
