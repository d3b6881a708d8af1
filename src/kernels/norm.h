/* Batch normalisation kernels (oneDNN), for BatchNorm1d/2d/3d alike.
 *
 * All buffers are contiguous f32: x, y, dx, dy [n, c, spatial] (NCHW or NCDHW
 * flattened over space, spatial = product of the spatial dims, 1 for
 * BatchNorm1d on [n, c]); weight (gamma), bias (beta), mean, var, dweight,
 * dbias [c]. The caller owns every buffer. weight and bias may each be NULL
 * (affine=False: gamma = 1, beta = 0). Running statistics are NOT updated
 * here: the caller (the op layer) blends `mean` and the unbiased variance
 * var * m/(m-1), m = n*spatial, into running_mean/running_var exactly once
 * per training forward, as torch.nn.BatchNorm does.
 * Layouts (see layout.h): with s->layout == RT_LAYOUT_PLAIN (0, the
 * default) x, y, dx, dy are plain and viewed as [n, c, spatial, 1] nchw
 * (s->nsp and s->sp are ignored). With RT_LAYOUT_BLOCKED they are
 * nChw{B}c (s->nsp == 2, sp = {H, W}) or nCdhw{B}c (s->nsp == 3, sp =
 * {D, H, W}); then c must be a multiple of rt_layout_block() and spatial must
 * equal the product of sp[0..nsp-1]. The [c] vectors are always plain.
 * Blocked data go to the primitives directly; plain data are reordered to
 * and from NHWC around them (oneDNN's NCHW kernel is generic C++, its NHWC
 * ones are JIT), through cached reorders and RT_MEM_TEMP buffers.
 * Primitives are cached per thread by shape, layout, eps and flags (see
 * cache.h); scratchpads are RT_MEM_TEMP and freed before return.
 * Training statistics (mean, biased var) are computed by revtorch in two
 * passes with double accumulators, as PyTorch's CPU kernel does, and
 * oneDNN normalises with them: its float statistics drift by ~1e-5
 * relative when |mean| >> std, which reversible blocks amplify. The fused
 * ReLU's workspace is oneDNN's 1-bit mask.
 *
 * Plan and execute (plan.h): each kernel has a plan function that checks
 * the shape, creates or finds the cached primitive and reports the TEMP
 * blocks of the call (scratchpad, the NCHW <-> NHWC reorder buffers of
 * plain data, the backward's helper vectors) and the fused ReLU's
 * workspace size, touching no data; since it sees no pointers it is told
 * which optional buffers the call passes. The kernels plan and then
 * execute, and need every required pointer.
 *
 * Errors: RT_ERR_INVALID_ARG (NULL required pointer, c < 1, spatial < 1,
 * n < 0, eps negative or not finite, dweight without weight, unknown
 * layout; for blocked: c % rt_layout_block() != 0, nsp not 2 or 3, an sp < 1
 * or their product != spatial), RT_ERR_SHAPE
 * (training with only one value per channel, n*spatial <= 1, which PyTorch
 * rejects too), RT_ERR_OOM, RT_ERR_BACKEND (message names the primitive). */
#ifndef RT_KERNELS_NORM_H
#define RT_KERNELS_NORM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "kernels/layout.h"
#include "kernels/plan.h"

typedef struct rt_bn_shape {
    int64_t n, c, spatial; /* spatial = product of spatial dims */
    float eps;
    /* Layout of x, y, dx, dy (0 = plain, so {n, c, spatial, eps}
     * initialisers stay plain). For RT_LAYOUT_BLOCKED the real spatial dims,
     * outer to inner: nsp = 2 (sp = {H, W}) or 3 (sp = {D, H, W}); ignored
     * when plain. Part of the cache key. */
    rt_layout layout;
    int nsp;
    int64_t sp[3];
    /* Training forwards only: mean and var already hold this batch's
     * statistics (a recompute reusing its forward's, autograd/node.h
     * rt_saved_memo_take), so they are read, not computed and written: one
     * pass over x instead of three. Not part of the cache key (the
     * primitive normalises with given statistics either way). */
    bool given_stats;
    /* x and y (forwards: training, fused ReLU, eval) or x, dy and dx
     * (backward passes) are bf16, in the same layout: a bf16 region's
     * activations and their gradients (autograd/node.h
     * rt_autocast_activation_dtype); statistics, weight, bias, mean/var and
     * the weight and bias gradients stay f32, and the statistics are still
     * summed in double from the bf16 values. oneDNN's bf16 kernels need
     * AVX-512 (the bf16 convolutions that make such inputs need more). A
     * fused ReLU's workspace has the same size and meaning in either type.
     * Part of the cache key. */
    bool bf16;
} rt_bn_shape;

/* Training forward (F.batch_norm(training=True)): per channel
 *   mean = E[x], var = E[(x-mean)^2] (biased, as used for normalising),
 *   y = (x - mean) / sqrt(var + eps) * weight + bias.
 * Writes y, mean and var (with s->given_stats: writes y from the mean and
 * var given). x and y are f32, or bf16 both when s->bf16; mean and var f32,
 * summed in double either way. */
rt_status rt_kernel_batchnorm_forward_train(const rt_bn_shape *s, const void *x,
                                            const float *weight, const float *bias, void *y,
                                            float *mean, float *var);

/* Evaluation forward (F.batch_norm(training=False)) with given statistics
 * (the running ones): y = (x - mean) / sqrt(var + eps) * weight + bias.
 * n == 0 is a valid empty call. */
rt_status rt_kernel_batchnorm_forward_eval(const rt_bn_shape *s, const void *x,
                                           const float *weight, const float *bias,
                                           const float *mean, const float *var, void *y);

/* Training-mode backward through the batch statistics (mean, var from the
 * training forward; x its input): with xhat = (x-mean)/sqrt(var+eps), m =
 * n*spatial,
 *   dbias   = sum(dy), dweight = sum(dy * xhat),
 *   dx      = weight/sqrt(var+eps) * (dy - dbias/m - xhat * dweight/m).
 * Overwrites dx and, when non-NULL, dweight and dbias (either may be NULL;
 * dweight needs weight). x, dy and dx are f32, or bf16 all three when
 * s->bf16 (oneDNN's bf16 backward, accumulating in f32); dweight and dbias
 * are f32 either way. */
rt_status rt_kernel_batchnorm_backward(const rt_bn_shape *s, const void *x, const void *dy,
                                       const float *mean, const float *var, const float *weight,
                                       void *dx, float *dweight, float *dbias);

/* Fused batch norm + ReLU (oneDNN's dnnl_fuse_norm_relu), training only.
 * Forward: as rt_kernel_batchnorm_forward_train, but writes
 *   y = max(0, (x - mean) / sqrt(var + eps) * weight + bias)
 * and `workspace`, an opaque mask of the positive outputs (in the
 * primitive's own format) of rt_kernel_batchnorm_relu_workspace_bytes(s)
 * bytes (oneDNN 2.6: one bit per element blocked, one byte plain); mean
 * and var are the same batch statistics as unfused. Backward: as
 * rt_kernel_batchnorm_backward with dy replaced by dy masked with the
 * forward's workspace (dy where the fused output was positive, else 0), i.e.
 * the gradient through relu(bn(x)); keep the workspace alive from forward to
 * backward. Same shapes, layouts, errors and plans as the unfused kernels;
 * a NULL workspace is RT_ERR_INVALID_ARG. Cached separately from the
 * unfused primitives (the fuse flag is part of the key). */
/* 0, message set, on a bad or NULL shape. */
size_t rt_kernel_batchnorm_relu_workspace_bytes(const rt_bn_shape *s);

rt_status rt_kernel_batchnorm_relu_forward_train(const rt_bn_shape *s, const void *x,
                                                 const float *weight, const float *bias, void *y,
                                                 float *mean, float *var, void *workspace);

rt_status rt_kernel_batchnorm_relu_backward(const rt_bn_shape *s, const void *x, const void *dy,
                                            const float *mean, const float *var,
                                            const float *weight, const void *workspace, void *dx,
                                            float *dweight, float *dbias);

/* The plans of the kernels above (plan.h): the shape rules and errors of
 * the kernels, RT_ERR_INVALID_ARG for a NULL plan. has_weight / has_bias:
 * the call passes weight / bias; want_dweight / want_dbias: it passes
 * dweight / dbias (want_dweight needs has_weight, RT_ERR_INVALID_ARG
 * otherwise). The eval plan has no primitive for n == 0. The backward
 * plans report the helper vectors (plan->helper_bytes) as their first TEMP
 * block, the primitive's block second; the fused forward's
 * plan->workspace_bytes is rt_kernel_batchnorm_relu_workspace_bytes. */
rt_status rt_kernel_batchnorm_forward_train_plan(const rt_bn_shape *s, int has_weight, int has_bias,
                                                 rt_kernel_plan *plan);
rt_status rt_kernel_batchnorm_forward_eval_plan(const rt_bn_shape *s, int has_weight, int has_bias,
                                                rt_kernel_plan *plan);
rt_status rt_kernel_batchnorm_backward_plan(const rt_bn_shape *s, int has_weight, int want_dweight,
                                            int want_dbias, rt_kernel_plan *plan);
rt_status rt_kernel_batchnorm_relu_forward_train_plan(const rt_bn_shape *s, int has_weight, int has_bias,
                                                      rt_kernel_plan *plan);
rt_status rt_kernel_batchnorm_relu_backward_plan(const rt_bn_shape *s, int has_weight, int want_dweight,
                                                 int want_dbias, rt_kernel_plan *plan);

#endif
