/* Element-wise activation kernels (oneDNN eltwise): ReLU and LeakyReLU.
 *
 * Buffers are contiguous f32 arrays of n elements, any logical shape and any
 * layout (layout.h): the kernels are layout-agnostic, y keeps x's element
 * order, so a blocked x gives a blocked y (likewise dy/dx). The caller owns
 * them. In-place use is allowed (y == x, dx == dy). Primitives
 * are cached per thread by (n, slope) (see cache.h).
 * Plan and execute (plan.h): rt_kernel_relu_*_plan checks the arguments,
 * creates or finds the cached primitive and reports its TEMP blocks (an
 * eltwise primitive on plain 1-D memory normally has none), touching no
 * data; the kernels plan and then execute, and need every pointer when
 * n > 0.
 * Errors: RT_ERR_INVALID_ARG (NULL pointer with n > 0, n < 0, slope not
 * finite, backward with slope < 0), RT_ERR_OOM, RT_ERR_BACKEND. */
#ifndef RT_KERNELS_ELTWISE_H
#define RT_KERNELS_ELTWISE_H

#include <stdint.h>

#include "core/dtype.h"
#include "core/status.h"
#include "kernels/plan.h"

/* y = x > 0 ? x : negative_slope * x. negative_slope 0 is torch.relu,
 * > 0 is F.leaky_relu(x, negative_slope). */
rt_status rt_kernel_relu_forward(int64_t n, float negative_slope, const float *x, float *y);

/* dx = y > 0 ? dy : negative_slope * dy, computed from the forward OUTPUT y
 * (oneDNN relu_use_dst_for_bwd), so the forward input need not be saved.
 * Equals PyTorch's ReLU/LeakyReLU gradient for negative_slope >= 0 (sign of
 * y = sign of x); negative slopes are rejected. */
rt_status rt_kernel_relu_backward(int64_t n, float negative_slope, const float *y,
                                  const float *dy, float *dx);

/* The same gradient from y stored as RT_BF16 or RT_F16 (a precision
 * region's half copy of the saved output, memory/precision.h): y <= 0 is
 * read from the bits, so the copy is not converted to f32 first; dy and
 * dx f32, dx == dy allowed. Values as rt_kernel_relu_backward on the f32
 * conversion of y (which, like oneDNN's kernel, passes dy where y is NaN;
 * PyTorch's masks it). dy_round RT_BF16 rounds dy to bf16 first, in the
 * same pass (what a precision region does to the gradient arriving at the
 * node: autograd/node.h grad_dtype); RT_F32 reads it as it is. Errors:
 * RT_ERR_INVALID_ARG (n < 0, a negative slope, NULL buffers while n > 0),
 * RT_ERR_DTYPE (another dt, or a dy_round other than those two). OpenMP over chunks; no oneDNN primitive,
 * nothing booked. */
rt_status rt_kernel_relu_backward_half(int64_t n, float negative_slope, const uint16_t *y, rt_dtype dt,
                                       const float *dy, float *dx, rt_dtype dy_round);
/* The argument rules of rt_kernel_relu_backward_half but the buffers (its
 * errors, NULL buffers aside): what the meta backend checks, which has no
 * data to run it on. */
rt_status rt_kernel_relu_backward_half_check(int64_t n, float negative_slope, rt_dtype dt, rt_dtype dy_round);

/* The plans of the two kernels (plan.h): the argument rules and errors of
 * the kernels, RT_ERR_INVALID_ARG for a NULL plan; no primitive for n == 0. */
rt_status rt_kernel_relu_forward_plan(int64_t n, float negative_slope, rt_kernel_plan *plan);
rt_status rt_kernel_relu_backward_plan(int64_t n, float negative_slope, rt_kernel_plan *plan);

#endif
