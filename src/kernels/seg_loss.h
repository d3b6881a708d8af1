/* The segmentation losses' loops on (N, C, spatial...) activations (the
 * compute of ops/ops3d.h's rt_cross_entropy_nd and rt_soft_dice_loss):
 * voxel-wise cross-entropy with class weights, PyTorch's
 * F.cross_entropy(x, t, weight) with reduction='mean', and nnU-Net's soft
 * Dice (SoftDiceLoss with the sums over the batch or per sample).
 * Activations: contiguous f32 in layout s->layout (the plane view of
 * kernels/chanwise.h); labels t: int32 (N, spatial...) in [0, C) (the op
 * checks them with rt_kernel_labels_first_invalid); weights w: (C) f32 or
 * NULL (all 1). OpenMP above 32768 elements. A NULL shape or required buffer
 * makes a void call a no-op. */
#ifndef RT_KERNELS_SEG_LOSS_H
#define RT_KERNELS_SEG_LOSS_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "kernels/chanwise.h"

/* The index of the first label of t[0..n) outside [0, classes) (its value
 * in *value), or -1 when all are valid (also for NULL t or n <= 0). */
int64_t rt_kernel_labels_first_invalid(int64_t n, const int32_t *t, int64_t classes, int32_t *value);

/* The TEMP bytes cross_entropy_nd_forward holds while it runs (the
 * per-position log-sum-exp, N·spatial floats, at least one); 0 for NULL. */
size_t rt_kernel_cross_entropy_nd_temp_bytes(const rt_chan_shape *s);

/* y[0] = Σ_i w[t_i]·(lse_i − x[t_i, i]) / W and *weight_sum = W = Σ_i w[t_i]
 * over the N·spatial positions i (f64; 0/0 = NaN, as PyTorch).
 * RT_ERR_OOM when the log-sum-exp buffer cannot be had (tracked, TEMP);
 * RT_ERR_INVALID_ARG for a NULL shape, y or weight_sum, or a NULL x or t
 * with N·spatial > 0. */
rt_status rt_kernel_cross_entropy_nd_forward(const rt_chan_shape *s, const float *x, const int32_t *t,
                                             const float *w, double *weight_sum, float *y);
/* dx = g·w[t]/W·(softmax(x) − onehot(t)), g = dy[0] (one float). */
void rt_kernel_cross_entropy_nd_backward(const rt_chan_shape *s, const float *x, const int32_t *t,
                                         const float *w, double weight_sum, const float *dy, float *dx);

/* Soft Dice. sums (3·N·C doubles, caller's): per (n, c) I = Σ p·[t = c],
 * P = Σ p, G = Σ [t = c]; with batch_dice the sums over n end in n = 0.
 * y[0] = 1 − Σ_terms (2I + smooth)/(P + G + smooth) / terms, the classes
 * from 0 (include_background) or 1, per sample or once (batch_dice).
 * x and t may be NULL only when there are no elements. */
void rt_kernel_soft_dice_forward(const rt_chan_shape *s, const float *x, const int32_t *t, double smooth,
                                 int batch_dice, int include_background, double terms, double *sums, float *y);
/* dx = −dy[0]/terms · ∂dice/∂p, (2·[t = c]·den − num)/den² per element,
 * from the forward's sums; 0 for the background when it is excluded. */
void rt_kernel_soft_dice_backward(const rt_chan_shape *s, const int32_t *t, double smooth, int batch_dice,
                                  int include_background, double terms, const double *sums, const float *dy,
                                  float *dx);

#endif
