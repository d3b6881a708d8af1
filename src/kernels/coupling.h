/* The affine coupling of reversible blocks (ops/coupling.h has the op and
 * its source, RealNVP with a soft-clamped log-scale):
 *     y = x ⊙ exp(s) + t,   s = c·tanh(s_raw / c)
 * per sample b of n, over `inner` = C·spatial floats: x, y, dx (n, inner),
 * st and dst (n, 2·inner) holding (s_raw, t) as the two halves of each
 * sample, ld (n). All f32, contiguous, caller-owned, nothing allocated;
 * serial loops (expf/tanhf). A NULL buffer that would be used, or n or
 * inner <= 0, makes a void call a no-op. */
#ifndef RT_KERNELS_COUPLING_H
#define RT_KERNELS_COUPLING_H

#include <stdint.h>

#include "core/status.h"

/* y from x and st; RT_ERR_NONFINITE when an output is NaN/Inf (y is
 * written), the message naming the first bad element with its x, s_raw and
 * t and the fix; RT_ERR_INVALID_ARG for a NULL buffer with n·inner > 0. */
rt_status rt_kernel_affine_coupling_forward(int64_t n, int64_t inner, float clamp, const float *x, const float *st,
                                            float *y);
/* x = (y − t) ⊙ exp(−s): the exact inverse. */
void rt_kernel_affine_coupling_inverse(int64_t n, int64_t inner, float clamp, const float *y, const float *st,
                                       float *x);
/* dx = dy ⊙ exp(s) (dx NULL: not wanted); dst = (dy ⊙ x ⊙ exp(s) ⊙ (1 − tanh²(s_raw/c)), dy)
 * (dst NULL: not wanted). */
void rt_kernel_affine_coupling_backward(int64_t n, int64_t inner, float clamp, const float *x, const float *st,
                                        const float *dy, float *dx, float *dst);
/* ld[b] = Σ_i s[b, i] (f64 sum), log|det ∂y/∂x| per sample. */
void rt_kernel_affine_coupling_logdet(int64_t n, int64_t inner, float clamp, const float *st, float *ld);

#endif
