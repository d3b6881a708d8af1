#include "models/resblock.h"

#include <stdio.h>
#include <string.h>

#include "autograd/node.h"

typedef struct rt_resblock {
    rt_module base;
    int nconv;
    rt_module *conv[3], *bn[3]; /* borrowed: children conv1.., bn1.. */
    rt_module *downsample;      /* borrowed child, or NULL */
    /* every interior width (planes, out) fills whole channel blocks of
     * rt_layout_block(), a constant of the process: set at build */
    bool widths_blocked;
} rt_resblock;

/* bn(conv(relu(bn(conv(x))))...): the residual branch, releasing each
 * intermediate as soon as the next op has consumed it (the batch norms
 * before the last carry a fused ReLU). */
static rt_status rt_residual_forward(rt_resblock *b, rt_tensor *x, rt_tensor **out) {
    *out = NULL;
    rt_tensor *h = rt_tensor_retain(x);
    for (int i = 0; i < b->nconv; i++) {
        RT_SEQ(h, c, rt_module_forward(b->conv[i], h, &c));
        RT_SEQ(h, n, rt_module_forward(b->bn[i], h, &n));
    }
    *out = h;
    return RT_OK;
}

/* Whether m and every module below it train. */
static bool rt_all_training(const rt_module *m) {
    if (!m->training) return false;
    for (int i = 0; i < m->n_children; i++)
        if (!rt_all_training(m->children[i].module)) return false;
    return true;
}

/* Whether the block's interior may hand bf16 on: every module trains (an
 * eval batch norm, frozen for fine-tuning, runs an unfused ReLU, which is
 * f32 only) and every interior width fills whole channel blocks, so the
 * residual sum's two inputs share a memory order (a bf16 operand is not
 * reordered; an 8-channel conv output from a blocked input is plain). */
static bool rt_resblock_half_ok(const rt_resblock *b) {
    return b->widths_blocked && rt_all_training(&b->base);
}

/* In a training forward inside a bf16 region, the block's interior hands
 * its activations on in bf16 (autograd/node.h,
 * rt_autocast_activation_dtype), as PyTorch's autocast does: each
 * convolution that computes in bf16 writes bf16, its batch norm reads and
 * writes bf16, and the next convolution and the residual sum read that.
 * The block's output, the sum, is f32 (it leaves the block: a stage's
 * next block, a pooling layer, a checkpoint boundary). An evaluation
 * forward, a block with a frozen batch norm or with widths that do not
 * fill whole channel blocks keeps f32 activations (rt_resblock_half_ok). */
static rt_status rt_resblock_forward(rt_module *m, rt_tensor *x, rt_tensor **out) {
    rt_resblock *b = (rt_resblock *)m;
    rt_tensor *h = NULL, *id = NULL;
    bool half = rt_autocast_compute_dtype() == RT_BF16 && rt_resblock_half_ok(b);
    rt_dtype prev = rt_autocast_set_activation_dtype(half ? RT_BF16 : RT_F32);
    rt_status st = rt_residual_forward(b, x, &h);
    if (st == RT_OK && b->downsample) st = rt_module_forward(b->downsample, x, &id);
    rt_autocast_set_activation_dtype(prev);
    if (st == RT_OK && !b->downsample) id = rt_tensor_retain(x);
    if (st == RT_OK) st = rt_add_relu_inplace(h, id, out); /* h is ours alone: the sum goes over it (f32) */
    rt_tensor_release(h);
    rt_tensor_release(id);
    return st;
}

static const rt_module_class rt_basic_block_class = {"BasicBlock", rt_resblock_forward, NULL, NULL};
static const rt_module_class rt_bottleneck_class = {"Bottleneck", rt_resblock_forward, NULL, NULL};

/* Adds conv`i` and bn`i` (with a fused ReLU unless it is the last). */
static rt_status rt_resblock_add_unit(rt_init_ctx *ctx, rt_resblock *b, int i, const int64_t spec[5]) {
    char name[16];
    snprintf(name, sizeof name, "conv%d", i + 1);
    RT_TRY(rt_conv_create(ctx, 2, spec[0], spec[1], spec[2], spec[3], spec[4], 1, false, RT_INIT_KAIMING_FAN_OUT,
                          &b->conv[i]));
    RT_TRY(rt_module_add_child(&b->base, name, b->conv[i]));
    snprintf(name, sizeof name, "bn%d", i + 1);
    RT_TRY(rt_batchnorm_create(ctx, 2, spec[1], i + 1 < b->nconv, &b->bn[i]));
    return rt_module_add_child(&b->base, name, b->bn[i]);
}

static rt_status rt_resblock_build(rt_init_ctx *ctx, rt_resblock *b, rt_block_kind kind, int64_t in, int64_t planes,
                                   int64_t stride) {
    int64_t out = planes * (kind == RT_BLOCK_BOTTLENECK ? 4 : 1);
    b->widths_blocked = planes % rt_layout_block() == 0 && out % rt_layout_block() == 0;
    /* (in, out, kernel, stride, padding) of each conv; the stride sits on the 3×3 conv */
    const int64_t basic[2][5] = {{in, planes, 3, stride, 1}, {planes, planes, 3, 1, 1}};
    const int64_t bottleneck[3][5] = {{in, planes, 1, 1, 0}, {planes, planes, 3, stride, 1}, {planes, out, 1, 1, 0}};
    for (int i = 0; i < b->nconv; i++)
        RT_TRY(rt_resblock_add_unit(ctx, b, i, kind == RT_BLOCK_BASIC ? basic[i] : bottleneck[i]));
    if (stride == 1 && in == out) return RT_OK;
    rt_module *conv, *bn;
    RT_TRY(rt_sequential_create(&b->downsample));
    RT_TRY(rt_module_add_child(&b->base, "downsample", b->downsample));
    RT_TRY(rt_conv_create(ctx, 2, in, out, 1, stride, 0, 1, false, RT_INIT_KAIMING_FAN_OUT, &conv));
    RT_TRY(rt_module_append(b->downsample, conv));
    RT_TRY(rt_batchnorm_create(ctx, 2, out, false, &bn));
    return rt_module_append(b->downsample, bn);
}

rt_status rt_resblock_create(rt_init_ctx *ctx, rt_block_kind kind, int64_t in, int64_t planes, int64_t stride,
                             rt_module **out) {
    if (!out) return rt_error_set(RT_ERR_INVALID_ARG, "rt_resblock_create: out is NULL");
    *out = NULL;
    if (!ctx) return rt_error_set(RT_ERR_INVALID_ARG, "rt_resblock_create: the init context ctx is NULL");
    if ((kind != RT_BLOCK_BASIC && kind != RT_BLOCK_BOTTLENECK) || in < 1 || planes < 1 || stride < 1)
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_resblock_create: need a known block kind (got %d) and in, planes, "
                            "stride >= 1 (got %lld, %lld, %lld)", (int)kind, (long long)in, (long long)planes,
                            (long long)stride);
    rt_resblock *b = (rt_resblock *)rt_module_alloc(
        sizeof *b, kind == RT_BLOCK_BOTTLENECK ? &rt_bottleneck_class : &rt_basic_block_class);
    if (!b) return rt_error_last_status();
    b->nconv = kind == RT_BLOCK_BOTTLENECK ? 3 : 2;
    rt_status st = rt_resblock_build(ctx, b, kind, in, planes, stride);
    if (st != RT_OK) {
        rt_module_destroy(&b->base);
        return st;
    }
    *out = &b->base;
    return RT_OK;
}
