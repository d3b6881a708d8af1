/* The 3-D U-Net and the partially reversible U-Net (models/unet.h), the
 * pad/crop op (ops/ops3d.h rt_pad_constant) and the Dice + cross-entropy
 * loss they train with:
 * - reversible vs plain backpropagation through the partially reversible
 *   U-Net: every parameter gradient within 1e-4 relative (max |Δ| over
 *   max |g|), with GroupNorm, InstanceNorm and BatchNorm (whose running
 *   statistics must be updated exactly once per training forward in both);
 * - sizes that are not multiples of 2^(levels−1): the output has the
 *   input's size and equals running on the explicitly zero-padded input and
 *   cropping; rt_pad_constant's gradients against central differences
 *   (tests/gradcheck_util.h), padding, cropping and both at once;
 * - configuration errors name the problem;
 * - state-dict names as tools/pytorch_unet.py defines them;
 * - memory prediction on meta tensors equals the measured peaks of a real
 *   training step with Dice + CE, category by category (as test_predict).
 * `test_unet --export DIR` writes the PyTorch parity files instead
 * (tests/test_pytorch_unet.sh: weights, an input and revtorch's output per
 * configuration, checked by tools/pytorch_unet.py). */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/engine.h"
#include "core/mem.h"
#include "core/rng.h"
#include "core/tensor.h"
#include "io/weights.h"
#include "memory/predict.h"
#include "memory/reversible.h"
#include "models/model.h"
#include "models/unet.h"
#include "nn/modules.h"
#include "optim/optimizer.h"
#include "ops/ops3d.h"
#include "train/seg_loss.h"
#include "train/step.h"
#include "rt_test.h"
#include "test_util.h"
#include "seg_util.h"
#include "gradcheck_util.h"

/* 3 levels 4/8/16: the smallest net with a real bottom (8³ → 2³). */
static rt_unet_config small_config(bool reversible, rt_unet_norm norm) {
    rt_unet_config c = {.reversible = reversible, .levels = 3, .widths = {4, 8, 16}, .norm = norm, .groups = 2,
                        .upsample = RT_UNET_UP_TRANSPOSED, .enc_blocks = {1, 2, 1}, .dec_blocks = {1, 1, 2}};
    return c;
}

static rt_module *build(const rt_unet_config *c, int64_t cin, int64_t k, uint64_t seed) {
    rt_init_ctx ctx = rt_init_ctx_make(RT_DEVICE_CPU, seed);
    rt_module *m = NULL;
    if (rt_unet_build(c, &ctx, cin, k, &m) != RT_OK) fprintf(stderr, "  build: %s\n", rt_error_last());
    return m;
}

static void module_destroy_(void *p) { rt_module_destroy(p); }
static void sd_destroy_(void *p) { rt_state_dict_destroy(p); }


/* ------------------------------------------------------------ reversible vs plain */

static void check_config_vs_plain(rt_unet_config c, rt_unet_norm norm);

static void check_reversible_vs_plain(rt_unet_norm norm) { check_config_vs_plain(small_config(true, norm), norm); }

static void check_config_vs_plain(rt_unet_config c, rt_unet_norm norm) {
    rt_module *rev = build(&c, 2, 3, 11), *plain = build(&c, 2, 3, 11);
    tu_defer(module_destroy_, rev);
    tu_defer(module_destroy_, plain);
    CHECK(rev && plain);
    if (!rev || !plain) return;
    CHECK_EQ_INT(rt_module_count_reversible(rev), 6); /* one sequence per encoder and decoder level */
    rt_module_set_reversible(plain, false);
    seed_inputs(5);
    rt_tensor *x = RANDN(0, 1, 2, 2, 8, 8, 8), *y = tu_seg_labels(2, 8, 8, 8, 3);
    double lr = 0, lp = 0;
    CHECK_OK(tu_seg_step(rev, x, y, &lr));
    CHECK_OK(tu_seg_step(plain, x, y, &lp));
    CHECK_NEAR(lr, lp, 1e-5 * fabs(lp));
    rt_state_dict *a = NULL, *b = NULL;
    CHECK_OK(rt_module_state_dict(rev, &a));
    tu_defer(sd_destroy_, a);
    CHECK_OK(rt_module_state_dict(plain, &b));
    tu_defer(sd_destroy_, b);
    CHECK_EQ_INT(a->n, b->n);
    double worst = 0;
    int params = 0;
    for (int i = 0; i < a->n; i++) {
        rt_tensor *ta = a->entries[i].tensor, *tb = b->entries[i].tensor;
        CHECK(!strcmp(a->entries[i].name, b->entries[i].name));
        if (a->entries[i].counter) { /* num_batches_tracked: one training forward, one update */
            CHECK_EQ_INT(*a->entries[i].counter, 1);
            CHECK_EQ_INT(*b->entries[i].counter, 1);
            continue;
        }
        if (a->entries[i].kind == RT_ENTRY_BUFFER) { /* running statistics: the same single update */
            double d = rt_rel_difference(ta, tb);
            CHECK(d <= 1e-6);
            float init = strstr(a->entries[i].name, "running_var") ? 1.0f : 0.0f;
            CHECK(fabs(rt_tensor_f32(ta)[0] - init) > 1e-7); /* it moved */
            continue;
        }
        CHECK(ta->grad && tb->grad);
        double d = rt_rel_difference(ta->grad, tb->grad);
        if (d > worst) worst = d;
        params++;
        if (!(d <= 1e-4)) fprintf(stderr, "  %s: gradients differ by %.3g relative\n", a->entries[i].name, d);
        CHECK(d <= 1e-4);
    }
    printf("  %s norm: %d parameters, loss %.6f vs %.6f, worst gradient difference %.3g (relative)\n",
           norm == RT_UNET_NORM_BATCH ? "batch" : norm == RT_UNET_NORM_GROUP ? "group" : "instance", params, lr, lp,
           worst);
    for (int i = 0; i < a->n; i++)
        if (a->entries[i].tensor) rt_tensor_zero_grad(a->entries[i].tensor), rt_tensor_zero_grad(b->entries[i].tensor);
}

TU_TEST(reversible_grads_group) { check_reversible_vs_plain(RT_UNET_NORM_GROUP); }

/* Widths whose halves come in different memory orders on the encoder and
 * the decoder side: level 0's halves of one block each split a blocked
 * input into blocked halves, level 1's (a block and a half) go
 * channels-last and the decoder side stays plain from there, so the halves
 * recovered for encoder 0 arrive plain and are converted. */
TU_TEST(reversible_grads_mixed_orders) {
    rt_unet_config c = small_config(true, RT_UNET_NORM_GROUP);
    int64_t b = rt_layout_block();
    c.widths[0] = 2 * b;
    c.widths[1] = 3 * b;
    c.widths[2] = 4 * b;
    check_config_vs_plain(c, RT_UNET_NORM_GROUP);
}

/* The recovered skips (models/unet.c) under retain_graph: a backward that
 * keeps the graph and a second one through it accumulate the same
 * gradients as two through plain backpropagation; and an eval forward
 * between a training forward and its backward does not disturb it. */
TU_TEST(recovered_skips_retain_graph) {
    rt_unet_config c = small_config(true, RT_UNET_NORM_GROUP);
    rt_module *rev = build(&c, 2, 3, 11), *plain = build(&c, 2, 3, 11);
    tu_defer(module_destroy_, rev);
    tu_defer(module_destroy_, plain);
    CHECK(rev && plain);
    if (!rev || !plain) return;
    rt_module_set_reversible(plain, false);
    seed_inputs(6);
    rt_tensor *x = RANDN(0, 1, 2, 2, 8, 8, 8), *y = tu_seg_labels(2, 8, 8, 8, 3);
    rt_module *nets[2] = {rev, plain};
    for (int k = 0; k < 2; k++) {
        rt_tensor *out = NULL, *l = NULL, *other = NULL;
        CHECK_OK(rt_module_forward(nets[k], x, &out));
        bool grad = rt_grad_set_enabled(false); /* an unarmed forward in between */
        CHECK_OK(rt_module_forward(nets[k], x, &other));
        rt_grad_set_enabled(grad);
        rt_tensor_release(other);
        CHECK_OK(rt_dice_ce_loss(out, y, &l));
        rt_tensor_release(out);
        if (!l) return;
        CHECK_OK(rt_backward(l, NULL, true));
        CHECK_OK(rt_backward(l, NULL, false));
        rt_tensor_release(l);
    }
    rt_state_dict *a = NULL, *b = NULL;
    CHECK_OK(rt_module_state_dict(rev, &a));
    tu_defer(sd_destroy_, a);
    CHECK_OK(rt_module_state_dict(plain, &b));
    tu_defer(sd_destroy_, b);
    double worst = 0;
    for (int i = 0; i < a->n; i++) {
        if (a->entries[i].kind != RT_ENTRY_PARAM) continue;
        rt_tensor *ta = a->entries[i].tensor, *tb = b->entries[i].tensor;
        CHECK(ta->grad && tb->grad);
        if (ta->grad && tb->grad) worst = fmax(worst, rt_rel_difference(ta->grad, tb->grad));
    }
    printf("  two backwards through one graph: worst gradient difference %.3g (relative)\n", worst);
    CHECK(worst <= 1e-4);
}
TU_TEST(reversible_grads_instance) { check_reversible_vs_plain(RT_UNET_NORM_INSTANCE); }
TU_TEST(reversible_grads_batch) { check_reversible_vs_plain(RT_UNET_NORM_BATCH); }

/* ------------------------------------------------------------ padding */

/* net(x) for x of 10×12×9 (multiple 4: padded to 12×12×12) equals the
 * window of net(pad(x)), and has x's size. */
static void check_padding(bool reversible, rt_unet_upsample up) {
    rt_unet_config c = small_config(reversible, RT_UNET_NORM_GROUP);
    c.upsample = up;
    rt_module *net = build(&c, 1, 2, 3);
    tu_defer(module_destroy_, net);
    CHECK(net);
    CHECK_EQ_INT(rt_unet_size_multiple(&c), 4);
    seed_inputs(9);
    rt_tensor *x = RANDN(0, 1, 2, 1, 10, 12, 9), *y = NULL, *xp = NULL, *yp = NULL;
    bool prev = rt_grad_set_enabled(false);
    rt_status st = rt_module_forward(net, x, &y);
    int64_t pad[6] = {0, 3, 0, 0, 0, 2}; /* W 9 → 12, H 12, D 10 → 12 */
    if (st == RT_OK) st = rt_pad_constant(x, 6, pad, 0.0f, &xp);
    if (st == RT_OK) st = rt_module_forward(net, xp, &yp);
    rt_grad_set_enabled(prev);
    tu_own(y);
    tu_own(xp);
    tu_own(yp);
    CHECK_OK(st);
    CHECK_EQ_INT(y->ndim, 5);
    int64_t want[5] = {2, 2, 10, 12, 9};
    for (int d = 0; d < 5; d++) CHECK_EQ_INT(y->shape[d], want[d]);
    CHECK_EQ_INT(yp->shape[2], 12);
    CHECK(y->layout == RT_LAYOUT_PLAIN && yp->layout == RT_LAYOUT_PLAIN);
    const float *a = rt_tensor_f32(y), *b = rt_tensor_f32(yp);
    double worst = 0, scale = 0;
    for (int64_t n = 0; n < 2 * 2; n++)
        for (int64_t d = 0; d < 10; d++)
            for (int64_t h = 0; h < 12; h++)
                for (int64_t w = 0; w < 9; w++) {
                    double u = a[((n * 10 + d) * 12 + h) * 9 + w], v = b[((n * 12 + d) * 12 + h) * 12 + w];
                    if (fabs(u - v) > worst) worst = fabs(u - v);
                    if (fabs(v) > scale) scale = fabs(v);
                }
    printf("  %s, %s: max |net(x) − crop(net(pad(x)))| = %.3g (max |y| %.3g)\n",
           reversible ? "partially reversible" : "standard", up == RT_UNET_UP_TRANSPOSED ? "transposed" : "trilinear",
           worst, scale);
    CHECK(worst <= 1e-6 * scale);
}

TU_TEST(padding_standard) { check_padding(false, RT_UNET_UP_TRANSPOSED); }
TU_TEST(padding_standard_trilinear) { check_padding(false, RT_UNET_UP_TRILINEAR); }
TU_TEST(padding_reversible) { check_padding(true, RT_UNET_UP_TRILINEAR); }

/* The gradient flows through padding and cropping: a padded run trains
 * (finite loss, finite non-zero gradient on the input). */
TU_TEST(padding_backward) {
    rt_unet_config c = small_config(true, RT_UNET_NORM_GROUP);
    rt_module *net = build(&c, 1, 2, 3);
    tu_defer(module_destroy_, net);
    CHECK(net);
    seed_inputs(4);
    rt_tensor *x = RANDN(0, 1, 1, 1, 6, 7, 5), *y = tu_seg_labels(1, 6, 7, 5, 2);
    CHECK_OK(rt_tensor_set_requires_grad(x, true));
    double loss = 0;
    CHECK_OK(tu_seg_step(net, x, y, &loss));
    CHECK(isfinite(loss) && x->grad);
    double g = tu_max_abs(rt_tensor_numel(x->grad), rt_tensor_f32(x->grad));
    CHECK(isfinite(g) && g > 0);
    rt_tensor_zero_grad(x);
    rt_state_dict *sd = NULL;
    CHECK_OK(rt_module_state_dict(net, &sd));
    for (int i = 0; i < sd->n; i++) rt_tensor_zero_grad(sd->entries[i].tensor);
    rt_state_dict_destroy(sd);
}

typedef struct pad_case {
    int n;
    int64_t pad[6];
    float value;
} pad_case;

static rt_status f_pad(void *ctx, rt_tensor *const *in, rt_tensor **out) {
    const pad_case *p = ctx;
    return rt_pad_constant(in[0], p->n, p->pad, p->value, out);
}

TU_TEST(gc_pad) {
    seed_inputs(21);
    pad_case grow = {6, {1, 2, 0, 1, 2, 0}, 0.5f}, crop = {6, {-1, 0, 0, -2, -1, -1}, 0.0f},
             mixed = {4, {2, -1, -1, 3}, -1.0f}, last = {2, {-2, 1}, 0.0f};
    CHECK(GC("pad_grow", f_pad, &grow, 1e-2f, RANDN(0, 1, 2, 2, 3, 2, 3)));
    CHECK(GC("pad_crop", f_pad, &crop, 1e-2f, RANDN(0, 1, 1, 2, 4, 5, 3)));
    CHECK(GC("pad_mixed_4d", f_pad, &mixed, 1e-2f, RANDN(0, 1, 2, 3, 3, 4)));
    CHECK(GC("pad_last_dim_2d", f_pad, &last, 1e-2f, RANDN(0, 1, 3, 5)));
}

/* Values: F.pad's layout of pairs (last dim first), cropping windows, and a
 * blocked input giving the plain one's result. */
TU_TEST(pad_values) {
    int64_t s[2] = {2, 3};
    rt_tensor *x = tu_own(rt_tensor_create(2, s, RT_F32, RT_DEVICE_CPU, RT_MEM_DATA)), *y = NULL, *z = NULL;
    CHECK(x);
    for (int i = 0; i < 6; i++) rt_tensor_f32(x)[i] = (float)(i + 1); /* [[1 2 3] [4 5 6]] */
    int64_t p[4] = {1, -1, 0, 1}; /* W: one in front, drop the last; H: one row after */
    CHECK_OK(rt_pad_constant(x, 4, p, 9.0f, &y));
    tu_own(y);
    CHECK_EQ_INT(y->shape[0], 3);
    CHECK_EQ_INT(y->shape[1], 3);
    const float want[9] = {9, 1, 2, 9, 4, 5, 9, 9, 9};
    for (int i = 0; i < 9; i++) CHECK_NEAR(rt_tensor_f32(y)[i], want[i], 0);
    int64_t bad[2] = {-2, -1};
    CHECK(rt_pad_constant(x, 2, bad, 0.0f, &z) == RT_ERR_SHAPE && !z);
    CHECK(strstr(rt_error_last(), ">= 1"));
    CHECK(rt_pad_constant(x, 3, p, 0.0f, &z) == RT_ERR_INVALID_ARG);
    /* blocked: the plain result */
    int64_t b = rt_layout_block(), s5[5] = {1, b, 2, 3, 2};
    seed_inputs(3);
    rt_tensor *v = RANDN(0, 1, 1, b, 2, 3, 2), *vb = NULL, *r1 = NULL, *r2 = NULL;
    (void)s5;
    int64_t q[6] = {1, 0, -1, 1, 0, 2};
    CHECK_OK(rt_to_layout(v, RT_LAYOUT_BLOCKED, &vb));
    tu_own(vb);
    CHECK_OK(rt_pad_constant(v, 6, q, 0.0f, &r1));
    tu_own(r1);
    CHECK_OK(rt_pad_constant(vb, 6, q, 0.0f, &r2));
    tu_own(r2);
    CHECK(r2->layout == RT_LAYOUT_PLAIN);
    CHECK(rt_rel_difference(r2, r1) == 0.0);
}

/* ------------------------------------------------------------ errors and names */

static void expect_error(const rt_unet_config *c, const char *needle) {
    rt_init_ctx ctx = rt_init_ctx_make(RT_DEVICE_META, 1);
    rt_module *m = (rt_module *)&ctx;
    rt_status st = rt_unet_build(c, &ctx, 1, 2, &m);
    if (st != RT_ERR_INVALID_ARG || m || !strstr(rt_error_last(), needle))
        fprintf(stderr, "  want '%s', got %s: %s\n", needle, rt_status_str(st), rt_error_last());
    CHECK(st == RT_ERR_INVALID_ARG && !m && strstr(rt_error_last(), needle));
    printf("  refused: %s\n", rt_error_last());
}

TU_TEST(config_errors) {
    rt_unet_config c = small_config(false, RT_UNET_NORM_GROUP);
    c.levels = 0;
    expect_error(&c, "levels = 0");
    c.levels = 9;
    expect_error(&c, "levels = 9");
    c = small_config(false, RT_UNET_NORM_GROUP);
    c.groups = 3;
    expect_error(&c, "GroupNorm(3) does not divide the 4 channels");
    c = small_config(true, RT_UNET_NORM_GROUP);
    c.groups = 4; /* divides the widths 4/8/16, not the half width 2 */
    expect_error(&c, "half the width");
    c = small_config(true, RT_UNET_NORM_BATCH);
    c.widths[1] = 6;
    c.widths[2] = 9;
    expect_error(&c, "widths[2] = 9 is odd");
    c = small_config(true, RT_UNET_NORM_BATCH);
    c.dec_blocks[1] = -1;
    expect_error(&c, "counts must be >= 0");
    c = small_config(false, (rt_unet_norm)7);
    expect_error(&c, "unknown norm kind 7");
    c = small_config(false, RT_UNET_NORM_GROUP);
    c.upsample = (rt_unet_upsample)5;
    expect_error(&c, "unknown upsampling kind 5");
    c = small_config(false, RT_UNET_NORM_GROUP);
    c.widths[0] = 0;
    expect_error(&c, "base_width");
    c = small_config(false, RT_UNET_NORM_GROUP);
    c.widths[1] = 0;
    expect_error(&c, "widths[1] = 0");
    /* base-width doubling */
    c = (rt_unet_config){.levels = 3, .base_width = 4, .norm = RT_UNET_NORM_INSTANCE};
    rt_init_ctx ctx = rt_init_ctx_make(RT_DEVICE_META, 1);
    rt_module *m = NULL;
    CHECK_OK(rt_unet_build(&c, &ctx, 1, 2, &m));
    tu_defer(module_destroy_, m);
    CHECK(rt_module_find(m, "encoders.2.conv2") && rt_module_tensor(rt_module_find(m, "encoders.2.conv2"), "weight")
                                                        ->shape[0] == 16);
    /* a 4-D input */
    seed_inputs(1);
    rt_tensor *x4 = RANDN(0, 1, 1, 1, 8, 8), *y = NULL;
    rt_module *net = build(&(rt_unet_config){.levels = 2, .base_width = 2, .norm = RT_UNET_NORM_INSTANCE}, 1, 2, 1);
    tu_defer(module_destroy_, net);
    CHECK(rt_module_forward(net, x4, &y) == RT_ERR_SHAPE && strstr(rt_error_last(), "(N, C, D, H, W)"));
    printf("  refused: %s\n", rt_error_last());
}

static bool has_name(const rt_state_dict *sd, const char *name) {
    for (int i = 0; i < sd->n; i++)
        if (!strcmp(sd->entries[i].name, name)) return true;
    return false;
}

TU_TEST(state_dict_names) {
    rt_model *a = NULL, *b = NULL;
    CHECK_OK(rt_model_create("unet3d", 4, 3, RT_DEVICE_META, 0, &a));
    rt_status st = rt_model_create("prunet3d_brats", 4, 3, RT_DEVICE_META, 0, &b);
    const char *std_names[] = {"encoders.0.conv1.weight", "encoders.0.norm1.weight", "encoders.3.conv2.weight",
                               "ups.0.weight", "ups.2.bias", "decoders.0.conv1.weight", "decoders.2.norm2.bias",
                               "last_conv.weight", "last_conv.bias"};
    const char *rev_names[] = {"first_conv.weight", "encoders.0.blocks.0.f.norm.weight", "encoders.1.conv.weight",
                               "encoders.4.blocks.0.g.conv.weight", "decoders.4.blocks.0.f.conv.weight",
                               "decoders.4.conv.bias", "decoders.1.conv.weight", "decoders.0.blocks.0.g.norm.bias",
                               "last_conv.bias"};
    bool ok = st == RT_OK;
    for (size_t i = 0; ok && i < sizeof std_names / sizeof *std_names; i++) ok = has_name(a->sd, std_names[i]);
    for (size_t i = 0; ok && i < sizeof rev_names / sizeof *rev_names; i++) ok = has_name(b->sd, rev_names[i]);
    bool no_first = ok && !has_name(b->sd, "encoders.0.conv.weight") && !has_name(b->sd, "decoders.0.conv.weight");
    int64_t pa = rt_state_dict_num_param_elements(a->sd), pb = rt_state_dict_num_param_elements(b->sd);
    rt_model_destroy(a);
    rt_model_destroy(b);
    CHECK_OK(st);
    CHECK(ok && no_first);
    printf("  unet3d (4 → 3): %lld parameters; prunet3d_brats: %lld\n", (long long)pa, (long long)pb);
    CHECK(rt_model_name_is_segmentation("prunet3d") && !rt_model_name_is_segmentation("resnet20"));
    CHECK(rt_model_name_has_reversible("prunet3d_brats") && !rt_model_name_has_reversible("unet3d_brats"));
}

/* ------------------------------------------------------------ prediction */

/* rt_memory_predict of one training step (SGD momentum, Dice + CE) equals
 * the measured peaks of the real second step, category by category. */
static void check_predict(const char *name, int64_t n, int64_t d, int64_t h, int64_t w) {
    enum { CIN = 2, K = 3 };
    rt_memstats base;
    rt_memstats_get(&base);
    rt_optimizer_spec spec = {.kind = RT_OPTIM_SGD, .sgd = rt_sgd_default_opts(0.01)};
    spec.sgd.momentum = 0.9;
    rt_train_config cfg = {.accum_steps = 1, .loss = rt_loss_dice_ce};
    rt_model *m = NULL, *meta = NULL;
    CHECK_OK(rt_model_create(name, CIN, K, RT_DEVICE_CPU, 1, &m));
    int np = rt_state_dict_num_params(m->sd);
    rt_tensor **params = malloc((size_t)np * sizeof *params);
    rt_state_dict_params(m->sd, params, np);
    rt_optimizer *opt = rt_optimizer_create(&spec, params, np);
    free(params);
    int64_t xs[5] = {n, CIN, d, h, w}, ys[4] = {n, d, h, w};
    rt_tensor *x = rt_tensor_create(5, xs, RT_F32, RT_DEVICE_CPU, RT_MEM_DATA);
    rt_tensor *y = rt_tensor_create(4, ys, RT_I32, RT_DEVICE_CPU, RT_MEM_DATA);
    rt_status st = opt && x && y ? RT_OK : RT_ERR_OOM;
    if (st == RT_OK) {
        rt_philox_uniform(3, 0, rt_tensor_numel(x), rt_tensor_f32(x));
        int32_t *t = rt_tensor_data(y);
        for (int64_t i = 0; i < rt_tensor_numel(y); i++) t[i] = (int32_t)((i / 3 + i / 17) % K);
    }
    rt_train_result r1, r2;
    rt_memstats measured = {0}, predicted = {0};
    if (st == RT_OK) st = rt_train_step(m->net, opt, &cfg, x, y, &r1);
    if (st == RT_OK) {
        rt_memstats_reset_peaks();
        st = rt_train_step(m->net, opt, &cfg, x, y, &r2);
    }
    if (st == RT_OK) {
        rt_memstats_get(&measured);
        for (int c = 0; c < RT_MEM_NCAT; c++) measured.peak[c] -= base.live[c];
        measured.peak_total -= base.live_total;
        st = rt_model_create(name, CIN, K, RT_DEVICE_META, 1, &meta);
    }
    if (st == RT_OK) st = rt_memory_predict(meta->net, &spec, &cfg, 5, xs, 4, ys, RT_I32, &predicted);
    if (opt) rt_optimizer_zero_grad(opt);
    rt_optimizer_destroy(opt);
    rt_tensor_release(x);
    rt_tensor_release(y);
    rt_model_destroy(meta);
    rt_model_destroy(m);
    CHECK_OK(st);
    printf("  %s, batch %lld × %lld×%lld×%lld: loss %.4f then %.4f\n", name, (long long)n, (long long)d,
           (long long)h, (long long)w, r1.loss, r2.loss);
    int bad = 0;
    for (int c = 0; c < RT_MEM_NCAT; c++) {
        printf("    %-6s measured %12lld predicted %12lld%s\n", rt_mem_category_str((rt_mem_category)c),
               (long long)measured.peak[c], (long long)predicted.peak[c],
               measured.peak[c] == predicted.peak[c] ? "" : "  MISMATCH");
        bad += measured.peak[c] != predicted.peak[c];
    }
    printf("    total  measured %12lld predicted %12lld\n", (long long)measured.peak_total,
           (long long)predicted.peak_total);
    CHECK(isfinite(r1.loss) && isfinite(r2.loss));
    CHECK_EQ_INT(bad, 0);
    CHECK_EQ_INT(measured.peak_total, predicted.peak_total);
    rt_memstats after;
    rt_memstats_get(&after);
    for (int c = 0; c < RT_MEM_NCAT; c++) CHECK_EQ_INT(after.live[c], base.live[c]);
}

static void test_predict_unet3d(void) { check_predict("unet3d", 2, 16, 16, 16); }
static void test_predict_prunet3d(void) { check_predict("prunet3d", 2, 16, 16, 16); }
static void test_predict_prunet3d_padded(void) { check_predict("prunet3d", 1, 18, 16, 20); }

/* ------------------------------------------------------------ PyTorch export */

/* One configuration for tools/pytorch_unet.py: weights perturbed away from
 * their initial values (so norms' affine parameters matter), an input and
 * revtorch's training-mode output, with the configuration as metadata. */
static rt_status export_case(const char *dir, const char *name, const rt_unet_config *c, int64_t cin, int64_t k,
                             const int64_t *xs) {
    rt_init_ctx ctx = rt_init_ctx_make(RT_DEVICE_CPU, 7);
    rt_module *net = NULL;
    RT_TRY(rt_unet_build(c, &ctx, cin, k, &net));
    rt_state_dict *sd = NULL;
    rt_tensor *x = rt_tensor_create(5, xs, RT_F32, RT_DEVICE_CPU, RT_MEM_DATA), *y = NULL;
    rt_status st = x ? rt_module_state_dict(net, &sd) : RT_ERR_OOM;
    rt_generator g = {99, 0};
    for (int i = 0; st == RT_OK && i < sd->n; i++) {
        rt_tensor *t = sd->entries[i].tensor;
        if (!t || sd->entries[i].kind != RT_ENTRY_PARAM) continue;
        float noise[4096];
        for (int64_t j = 0; j < rt_tensor_numel(t); j += 4096) {
            int64_t len = rt_tensor_numel(t) - j < 4096 ? rt_tensor_numel(t) - j : 4096;
            rt_generator_normal(&g, len, 0.0f, 0.05f, noise);
            for (int64_t e = 0; e < len; e++) rt_tensor_f32(t)[j + e] += noise[e];
        }
    }
    if (st == RT_OK) {
        rt_generator_normal(&g, rt_tensor_numel(x), 0.0f, 1.0f, rt_tensor_f32(x));
        bool prev = rt_grad_set_enabled(false);
        st = rt_module_forward(net, x, &y);
        rt_grad_set_enabled(prev);
    }
    char path[4096], widths[128] = "", enc[64] = "", dec[64] = "", levels[8], cin_s[16], k_s[16], groups[16];
    for (int l = 0; l < c->levels; l++) {
        size_t n = strlen(widths), e = strlen(enc), d = strlen(dec);
        snprintf(widths + n, sizeof widths - n, "%s%lld", l ? "," : "", (long long)c->widths[l]);
        snprintf(enc + e, sizeof enc - e, "%s%d", l ? "," : "", c->enc_blocks[l]);
        snprintf(dec + d, sizeof dec - d, "%s%d", l ? "," : "", c->dec_blocks[l]);
    }
    snprintf(levels, sizeof levels, "%d", c->levels);
    snprintf(cin_s, sizeof cin_s, "%lld", (long long)cin);
    snprintf(k_s, sizeof k_s, "%lld", (long long)k);
    snprintf(groups, sizeof groups, "%lld", (long long)c->groups);
    const char *norms[] = {"batch", "instance", "group"};
    const char *meta[] = {"kind", c->reversible ? "prunet" : "unet", "levels", levels, "widths", widths, "norm",
                          norms[c->norm], "groups", groups, "upsample",
                          c->upsample == RT_UNET_UP_TRANSPOSED ? "transposed" : "trilinear", "enc_blocks", enc,
                          "dec_blocks", dec, "in_channels", cin_s, "num_classes", k_s};
    rt_named_tensor extra[2] = {{"input", x}, {"output", y}};
    snprintf(path, sizeof path, "%s/%s.safetensors", dir, name);
    if (st == RT_OK) st = rt_weights_save(sd, extra, 2, meta, 10, path);
    if (st == RT_OK) printf("wrote %s\n", path);
    rt_tensor_release(x);
    rt_tensor_release(y);
    rt_state_dict_destroy(sd);
    rt_module_destroy(net);
    return st;
}

static int export_all(const char *dir) {
    rt_unet_config a = small_config(false, RT_UNET_NORM_BATCH), b = small_config(false, RT_UNET_NORM_INSTANCE),
                   c = small_config(true, RT_UNET_NORM_GROUP), d = small_config(true, RT_UNET_NORM_BATCH);
    b.upsample = RT_UNET_UP_TRILINEAR;
    int64_t even[5] = {2, 2, 8, 8, 8}, odd[5] = {2, 2, 10, 12, 9};
    rt_unet_config zoo_cfg;
    rt_status st = rt_unet_config_get("prunet3d", &zoo_cfg);
    if (st == RT_OK) st = export_case(dir, "unet_batch_transposed", &a, 2, 3, odd);
    if (st == RT_OK) st = export_case(dir, "unet_instance_trilinear", &b, 2, 3, even);
    if (st == RT_OK) st = export_case(dir, "prunet_group", &c, 2, 3, odd);
    if (st == RT_OK) st = export_case(dir, "prunet_batch", &d, 2, 4, even);
    int64_t zoo[5] = {1, 4, 16, 16, 16};
    if (st == RT_OK) st = export_case(dir, "prunet3d", &zoo_cfg, 4, 3, zoo);
    if (st == RT_OK && (st = rt_unet_config_get("unet3d", &zoo_cfg)) == RT_OK)
        st = export_case(dir, "unet3d", &zoo_cfg, 4, 3, zoo);
    if (st != RT_OK) fprintf(stderr, "test_unet --export: %s\n", rt_error_last());
    return st == RT_OK ? 0 : 1;
}

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "--export")) return export_all(argv[2]);
    static const rt_test_case cases[] = {
        {"reversible_grads_group", reversible_grads_group},
        {"reversible_grads_instance", reversible_grads_instance},
        {"reversible_grads_batch", reversible_grads_batch},
        {"recovered_skips_retain_graph", recovered_skips_retain_graph},
        {"reversible_grads_mixed_orders", reversible_grads_mixed_orders},
        {"padding_standard", padding_standard},
        {"padding_standard_trilinear", padding_standard_trilinear},
        {"padding_reversible", padding_reversible},
        {"padding_backward", padding_backward},
        {"gc_pad", gc_pad},
        {"pad_values", pad_values},
        {"config_errors", config_errors},
        {"state_dict_names", state_dict_names},
        {"predict_unet3d", test_predict_unet3d},
        {"predict_prunet3d", test_predict_prunet3d},
        {"predict_prunet3d_padded", test_predict_prunet3d_padded},
    };
    return rt_test_main(argc, argv, cases, (int)(sizeof cases / sizeof cases[0]));
}
