/* Batch normalisation's own loops beside the oneDNN kernels of
 * kernels/norm.h: the eval-mode backward (an affine map per channel, which
 * oneDNN's backward cannot take with fixed statistics) and the
 * running-statistics update of training. Shapes, layouts and buffers as in
 * kernels/norm.h (x, dy, dx: (N, C, spatial...) f32 in s->layout; the rest
 * (C) f32); serial except the centring. */
#ifndef RT_KERNELS_NORM_LOOPS_H
#define RT_KERNELS_NORM_LOOPS_H

#include "core/dtype.h"
#include "core/status.h"
#include "kernels/norm.h"

/* Eval mode, y = (x − mean)·w/σ + b with σ = sqrt(var + eps) in f32:
 * dx = dy·w/σ, dw = Σ dy·(x − mean)/σ, db = Σ dy (sums in double). mean
 * and var are the running statistics. Holds a 2·C double accumulator from
 * malloc (untracked, like PyTorch's small CPU temporaries). RT_ERR_OOM when
 * it cannot be had; RT_ERR_INVALID_ARG for a NULL shape or buffer when
 * there are elements. */
rt_status rt_kernel_batchnorm_backward_eval(const rt_bn_shape *s, const float *x, const float *dy, const float *mean,
                                            const float *var, const float *weight, float *dx, float *dweight,
                                            float *dbias);

/* running = (1 − m)·running + m·batch per channel, the batch variance
 * (biased, as the training kernels return it) made unbiased by
 * count/(count − 1), count = N·spatial (PyTorch). NULL buffers: no-op. */
void rt_kernel_batchnorm_update_running(const rt_bn_shape *s, float momentum, const float *mean, const float *var,
                                        float *running_mean, float *running_var);

/* out = x − mean[channel], elementwise (x: (N, C, spatial...) f32 in
 * s->layout; out: the same shape and layout, stored as dt: RT_F32, or
 * RT_BF16 / RT_F16 rounded as rt_dtype_convert rounds; mean: (C)). The
 * difference is formed in f32 and converted as it is written: one pass,
 * where centring and then converting take two. Another dt writes nothing. What batch norm saves for backward inside a
 * half-precision region: a bf16/f16 copy of x − mean keeps each channel's
 * deviations to the half type's relative precision, where a copy of x
 * rounds them at |mean|·2⁻⁸ (bf16) and loses a nearly constant channel's
 * variation; the backward, given x − mean and a zero mean, computes exactly
 * what it computes from x and mean. NULL buffers: no-op. OpenMP over
 * (N, channel blocks). */
void rt_kernel_batchnorm_center(const rt_bn_shape *s, const float *x, const float *mean, void *out, rt_dtype dt);

#endif
