/* Pooling kernels (oneDNN): max and average, 2D and 3D, forward and backward.
 *
 * Mirror torch.nn.MaxPool2d/3d and AvgPool2d/3d with ceil_mode=False,
 * dilation=1, and for average pooling count_include_pad=True (PyTorch's
 * default; with floor mode every window lies inside the padded input, so the
 * divisor is always prod(k), exactly like PyTorch). As in PyTorch, padding
 * must be at most half the kernel size. Buffers are contiguous f32:
 *   x, dx [n, c, (in_d,) in_h, in_w]      y, dy [n, c, (out_d,) out_h, out_w]
 * with out from rt_pool_out_size, all four in layout s->layout (see
 * layout.h: RT_LAYOUT_PLAIN = NCHW/NCDHW, the default; RT_LAYOUT_BLOCKED =
 * nChw{B}c/nCdhw{B}c, needs c % rt_layout_block() == 0). The caller owns every buffer, including the
 * max-pool workspace (an opaque record, in whatever format the primitive of
 * that shape and layout chooses, of the argmax positions that the
 * forward writes and the backward reads; size from
 * rt_kernel_maxpool_workspace_bytes; keep it alive from forward to backward
 * and book it like a saved activation). Pooling primitives use the caller's
 * layout directly (pooling is memory-bound, so reorders would only add
 * traffic); they are cached per thread by shape and layout (see cache.h) and any
 * scratchpad is RT_MEM_TEMP freed before return. Ties in max pooling may pick
 * a different (equal) element than PyTorch.
 *
 * Plan and execute (plan.h): each kernel has a plan function that checks
 * the shape, creates or finds the cached primitive and reports its TEMP
 * blocks and workspace size without touching data; the kernels plan and
 * then execute, and need every data pointer (the max-pool forward's
 * workspace excepted, see there).
 *
 * Errors: RT_ERR_INVALID_ARG (NULL pointer, nsp not 2 or 3, k or stride < 1,
 * pad < 0 or pad > k/2, unknown layout, blocked with c % rt_layout_block() !=
 * 0), RT_ERR_SHAPE (output size <= 0), RT_ERR_OOM, RT_ERR_BACKEND (message
 * names the primitive and shape). */
#ifndef RT_KERNELS_POOL_H
#define RT_KERNELS_POOL_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "kernels/layout.h"
#include "kernels/plan.h"

typedef struct rt_pool_shape {
    int nsp; /* 2 or 3 */
    int64_t n, c;
    int64_t in[3], k[3], stride[3], pad[3]; /* spatial, outer to inner, as rt_conv_shape */
    rt_layout layout; /* of x, dx, y, dy (0 = plain); part of the cache key */
} rt_pool_shape;

/* Output sizes, floor mode: out = floor((in + 2*pad - k) / stride) + 1 for
 * the first s->nsp entries; unused entries are 1; invalid dims give 0. A NULL
 * s sets every entry to 1 (as an invalid nsp); a NULL out is a no-op. */
void rt_pool_out_size(const rt_pool_shape *s, int64_t out[3]);

/* Checks a pool shape (the rules above); stores the output size when out is
 * non-NULL. RT_ERR_INVALID_ARG for a NULL s. */
rt_status rt_pool_shape_check(const rt_pool_shape *s, int64_t out[3]);

/* Bytes of workspace rt_kernel_maxpool_forward needs for this shape (it may
 * create and cache the primitive to ask oneDNN). Returns 0 when the shape is
 * invalid (a NULL s included) or oneDNN fails (message set), and also for
 * the valid n == 0. */
size_t rt_kernel_maxpool_workspace_bytes(const rt_pool_shape *s);

/* y = max over each window of x (padding never wins). `workspace` receives
 * the argmax record for the backward; pass NULL for inference only (no
 * backward possible). */
rt_status rt_kernel_maxpool_forward(const rt_pool_shape *s, const float *x, float *y,
                                    void *workspace);

/* dx = scatter of dy to the argmax positions recorded in `workspace` by the
 * forward of the same shape; overwrites dx (zeros elsewhere). */
rt_status rt_kernel_maxpool_backward(const rt_pool_shape *s, const float *dy,
                                     const void *workspace, float *dx);

/* y = mean over each window, zero padding counted (count_include_pad=True). */
rt_status rt_kernel_avgpool_forward(const rt_pool_shape *s, const float *x, float *y);

/* dx = dy spread evenly (1/prod(k)) over each window; overwrites dx. */
rt_status rt_kernel_avgpool_backward(const rt_pool_shape *s, const float *dy, float *dx);

/* The plans of the four kernels above (plan.h): the shape rules and errors
 * of the kernels, RT_ERR_INVALID_ARG for a NULL plan, no primitive for
 * n == 0. with_workspace: plan the training forward that writes the
 * workspace (a forward call with a non-NULL workspace), else the inference
 * one; plan->workspace_bytes is its size (also reported by the backward
 * plan, which reads it). */
rt_status rt_kernel_maxpool_forward_plan(const rt_pool_shape *s, int with_workspace, rt_kernel_plan *plan);
rt_status rt_kernel_maxpool_backward_plan(const rt_pool_shape *s, rt_kernel_plan *plan);
rt_status rt_kernel_avgpool_forward_plan(const rt_pool_shape *s, rt_kernel_plan *plan);
rt_status rt_kernel_avgpool_backward_plan(const rt_pool_shape *s, rt_kernel_plan *plan);

#endif
