/* The coupling arithmetic of reversible blocks as differentiable ops, and
 * their exact inverses (no autograd). All f32, shapes as rt_add.
 *
 * Affine coupling (RealNVP, Dinh et al. 2017, eq. 4–5, with a bounded scale
 * as in Glow-style implementations):
 *     y2 = x2 ⊙ exp(s) + t,   s = c·tanh(s_raw / c),  c = RT_AFFINE_CLAMP
 * so the scale stays in [e^-c, e^c] and the inverse never divides by ~0.
 * G's output holds (s_raw, t) as its first and second channel halves.
 * Every argument is required: NULL is RT_ERR_INVALID_ARG (ops/ops.h
 * conventions), and *out is NULL on every error when out is not NULL. */
#ifndef RT_OPS_COUPLING_H
#define RT_OPS_COUPLING_H

#include "core/tensor.h"

/* Bound c of the soft-clamped log-scale: scales lie in [e^-2, e^2] ≈ [0.135, 7.39]. */
#define RT_AFFINE_CLAMP 2.0f

/* y2 = x2 ⊙ exp(c·tanh(s_raw/c)) + t with st = (s_raw, t) stacked on dim 1:
 * x2 (N, C, ...), st (N, 2C, ...) → (N, C, ...). Differentiable in x2 and st.
 * Saves: x2 and st. Errors: RT_ERR_SHAPE, RT_ERR_DTYPE, RT_ERR_OOM, and
 * RT_ERR_NONFINITE when any output is NaN or Inf (no output, nothing
 * recorded): the scale is bounded, so that means x2 or t is non-finite or
 * the sum overflowed float32, i.e. training diverged; the message names the
 * first bad element with its x2, s_raw and t and suggests the fix (lower
 * learning rate, gradient clipping, check the input). Not checked on meta. */
rt_status rt_affine_coupling(rt_tensor *x2, rt_tensor *st, rt_tensor **out);

/* Inverse without autograd: x2 = (y2 - t) ⊙ exp(-s). New TEMP tensor. */
rt_status rt_affine_coupling_inverse(rt_tensor *y2, rt_tensor *st, rt_tensor **out);

/* log|det ∂y2/∂x2| per sample: Σ s over C·spatial → (N) f32, no autograd. */
rt_status rt_affine_coupling_logdet(rt_tensor *st, rt_tensor **out);

#endif
