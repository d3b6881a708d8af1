/* Transposed convolution kernels (oneDNN deconvolution primitive): forward,
 * backward-data, backward-weights.
 *
 * Mirrors torch.nn.ConvTranspose2d / ConvTranspose3d
 * (torch.nn.functional.conv_transpose2d/3d) with stride, padding,
 * output_padding, dilation, groups and optional bias:
 *   x  [n, c_in, (in_d,) in_h, in_w]            layout s->src_layout (also dx)
 *   w  [c_in, c_out/groups, (k_d,) k_h, k_w]     PyTorch's own weight order
 *                                                (oneDNN's iohw / giodhw)
 *   b  [c_out]
 *   y  [n, c_out, (out_d,) out_h, out_w]         layout s->dst_layout (also dy)
 *   out = (in − 1)·stride − 2·pad + dil·(k − 1) + output_padding + 1,
 * output_padding < stride or < dilation (PyTorch's rule). oneDNN's right
 * padding is pad − output_padding: the extra rows output_padding adds at the
 * high end are computed, not zero-filled.
 * Everything else (buffer ownership, format_any primitives with cached
 * reorders to the caller's layout, per-thread primitive cache, RT_MEM_TEMP
 * scratchpads, plan functions (plan.h) and execution that needs every data
 * pointer, the error codes) is as for the convolution kernels, conv.h. */
#ifndef RT_KERNELS_DECONV_H
#define RT_KERNELS_DECONV_H

#include <stdint.h>

#include "core/status.h"
#include "kernels/layout.h"
#include "kernels/plan.h"

typedef struct rt_deconv_shape {
    int nsp; /* 2 or 3 */
    int64_t n, c_in, c_out, groups;
    /* spatial, outer to inner (D, H, W); dil: 1 = dense, as PyTorch */
    int64_t in[3], k[3], stride[3], pad[3], out_pad[3], dil[3];
    int has_bias;
    rt_layout src_layout, dst_layout; /* x/dx and y/dy */
} rt_deconv_shape;

/* Checks the shape (RT_ERR_INVALID_ARG: nsp, sizes < 1, pad < 0,
 * output_padding < 0 or not below stride or dilation, layouts; RT_ERR_SHAPE:
 * groups not dividing c_in and c_out, output size < 1) and stores the output
 * size in out[0..nsp-1] when out is non-NULL (unused entries 1). */
rt_status rt_deconv_shape_check(const rt_deconv_shape *s, int64_t out[3]);

/* y = conv_transpose(x, w) + b; b NULL exactly when !s->has_bias. */
rt_status rt_kernel_deconv_forward(const rt_deconv_shape *s, const float *x, const float *w, const float *b,
                                   float *y);
/* dx = dL/dx from dy (a strided convolution of dy with w); overwrites dx. */
rt_status rt_kernel_deconv_backward_data(const rt_deconv_shape *s, const float *w, const float *dy, float *dx);
/* dw (w's shape) and, when db is non-NULL, db [c_out] = Σ dy over batch and
 * space; overwrites both (n == 0 gives zeros). */
rt_status rt_kernel_deconv_backward_weights(const rt_deconv_shape *s, const float *x, const float *dy, float *dw,
                                            float *db);

/* The plans of the three kernels (plan.h), as for the convolution
 * (conv.h): the shape rules and errors of the kernels, RT_ERR_INVALID_ARG
 * for a NULL plan, no primitive for n == 0; with_db plans the
 * backward-weights variant that writes db. */
rt_status rt_kernel_deconv_forward_plan(const rt_deconv_shape *s, rt_kernel_plan *plan);
rt_status rt_kernel_deconv_backward_data_plan(const rt_deconv_shape *s, rt_kernel_plan *plan);
rt_status rt_kernel_deconv_backward_weights_plan(const rt_deconv_shape *s, int with_db, rt_kernel_plan *plan);

/* Forward and backward-data with the weight cache of kernels/conv.h
 * ("Weight cache"): w_cache is the storage holding w (NULL: no cache, the
 * calls above). Same arguments and errors otherwise. */
rt_status rt_kernel_deconv_forward_cached(const rt_deconv_shape *s, const float *x, const float *w,
                                          struct rt_storage *w_cache, const float *b, float *y);
rt_status rt_kernel_deconv_backward_data_cached(const rt_deconv_shape *s, const float *w, struct rt_storage *w_cache,
                                                const float *dy, float *dx);
rt_status rt_kernel_deconv_forward_plan_cached(const rt_deconv_shape *s, struct rt_storage *w_cache,
                                               rt_kernel_plan *plan);
rt_status rt_kernel_deconv_backward_data_plan_cached(const rt_deconv_shape *s, struct rt_storage *w_cache,
                                                     rt_kernel_plan *plan);

#endif
