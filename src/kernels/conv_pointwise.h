/* A pointwise convolution (every kernel size 1, stride 1, no padding, one
 * group: torch.nn.Conv3d(c_in, c_out, 1)) as the matrix product it is, on
 * OpenBLAS (kernels/blas.h), on NCDHW / NCHW tensors (RT_LAYOUT_PLAIN), per
 * sample n, with S the spatial product:
 *   y[n] (c_out × S) = w (c_out × c_in) · x[n] (c_in × S) + b
 *   dx[n] = wᵀ · dy[n],   dw = Σ_n dy[n] · x[n]ᵀ,   db = Σ_n Σ_s dy[n]
 * oneDNN's primitives reorder plain tensors into their blocked order and, for
 * backward-weights, transpose the source into a scratchpad: 256 MiB of TEMP
 * for a U-Net's last Conv3d(16, 4, 1) on 128³ (twice its input), the step's
 * peak. The products read and write the caller's buffers and need no
 * temporary, and were faster on this shape (AVX-512 EPYC, 2 threads: forward
 * 22 → 12 ms, backward-data 36 → 9 ms, backward-weights 34 → 27 ms).
 * Channels-last tensors stay on oneDNN, which reads them without a reorder
 * and was faster there.
 *
 * Not a public header: kernels/conv.c routes a shape here when
 * rt_conv_pointwise_applies says so, and its plan functions then report no
 * TEMP block, which is what the meta backend books. */
#ifndef RT_KERNELS_CONV_POINTWISE_H
#define RT_KERNELS_CONV_POINTWISE_H

#include <stdbool.h>

#include "kernels/conv.h"

/* Whether s (already checked by rt_conv_shape_check) is a pointwise
 * convolution this file computes: kernel 1 and stride 1 in every spatial
 * dimension, padding 0, groups 1, f32 compute (compute_bf16 0), plain
 * weights, plain source and destination.
 * Dilation does not matter for a kernel of 1. */
bool rt_conv_pointwise_applies(const rt_conv_shape *s);

/* The three passes, with the contracts of rt_kernel_conv_forward,
 * rt_kernel_conv_backward_data and rt_kernel_conv_backward_weights
 * (conv.h): buffers as there, non-NULL (b and db only with has_bias /
 * when wanted), outputs overwritten. Cannot fail. */
void rt_conv_pointwise_forward(const rt_conv_shape *s, const float *x, const float *w, const float *b, float *y);
void rt_conv_pointwise_backward_data(const rt_conv_shape *s, const float *w, const float *dy, float *dx);
void rt_conv_pointwise_backward_weights(const rt_conv_shape *s, const float *x, const float *dy, float *dw,
                                        float *db);

#endif
