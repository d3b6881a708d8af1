/* revtorch's own loss loops for (N, K) logits and elementwise losses: the
 * compute halves of ops/ops.h's rt_cross_entropy, rt_mse_loss and rt_l1_loss. Serial
 * (N·K is a classifier head's size). Buffers are caller-owned contiguous f32
 * (targets int32), nothing is allocated; scalars such as the loss and its
 * incoming gradient stay in the caller's (device) buffers. */
#ifndef RT_KERNELS_LOSS_H
#define RT_KERNELS_LOSS_H

#include <stdint.h>

#include "core/status.h"

/* torch.nn.functional.cross_entropy(z, t, label_smoothing=ε), mean over N:
 * per row i, lse = max_j z + log Σ_j exp(z − max) (f64),
 * p[i, j] = exp(z[i, j] − lse) (the softmax kept for backward), and
 * loss_i = (1 − ε)·(lse − z[i, t_i]) − ε/K · Σ_j (z[i, j] − lse);
 * y[0] = (float)(Σ_i loss_i / N) (NaN for N = 0).
 * z, p: (N, K) f32; t: (N) int32 in [0, K) (RT_ERR_INVALID_ARG naming the
 * first one outside, and y is not written); y: one float. NULL y, or a NULL
 * z, t or p with N·K > 0: RT_ERR_INVALID_ARG. */
rt_status rt_kernel_cross_entropy_forward(int64_t n, int64_t k, float smoothing, const float *z, const int32_t *t,
                                          float *p, float *y);
/* dz = g/N · (p − q), q = (1 − ε)·onehot(t) + ε/K, g = dy[0] (f32 as
 * PyTorch). dy: one float; p, dz (N, K); t as above (trusted, forward
 * checked it). A NULL buffer with N·K > 0: no-op. */
void rt_kernel_cross_entropy_backward(int64_t n, int64_t k, float smoothing, const float *p, const int32_t *t,
                                      const float *dy, float *dz);

/* MSE's gradient for one input: dx = sign · (2·dy[0]/n) · diff (f32, the
 * order of torch's mse_loss_backward), diff = x − target, sign ±1 (input or
 * target). n contiguous floats; dy one float. NULL buffer or n <= 0: no-op. */
void rt_kernel_mse_backward(int64_t n, float sign, const float *diff, const float *dy, float *dx);

/* L1 loss forward: y[0] = (float)(Σ|diff| / n), the sum in f64, serial in
 * index order (so the loss does not depend on the thread count); diff =
 * x − target, n contiguous floats; y one float (NaN for n = 0, as
 * torch.nn.functional.l1_loss of an empty tensor). NULL y, or NULL diff with
 * n > 0: no-op. */
void rt_kernel_l1_forward(int64_t n, const float *diff, float *y);
/* L1's gradient for one input: dx = sign · sgn(diff) · dy[0]/n (f32; sgn(0)
 * = 0, torch's l1_loss backward: sign(input − target) · grad / numel), sign
 * ±1 (input or target). NULL buffer or n <= 0: no-op. */
void rt_kernel_l1_backward(int64_t n, float sign, const float *diff, const float *dy, float *dx);

#endif
