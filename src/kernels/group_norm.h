/* Group and instance normalisation (torch.nn.functional.group_norm and
 * instance_norm), the whole computation over the per-(sample, channel)
 * loops of kernels/chanwise.h: per (sample, group) statistics in double,
 * then the per-(sample, channel) affine map y = a·x + b. Instance norm is
 * groups = C; with fixed statistics (eval instance norm) the same map.
 *
 * Shapes: s (N, C, spatial, layout) as in chanwise.h, C % groups == 0;
 * x, y, dy, dx: the activation; weight, bias, dw, db, running stats: (C) f32
 * (weight/bias NULL: no affine); stats: 2·N·G f32, [0, N·G) the mean,
 * [N·G, 2·N·G) 1/sqrt(var + eps) per (sample, group). Caller-owned; each call
 * holds a small tracked TEMP scratch (the *_temp_bytes below, booked the
 * same way on meta). Errors: RT_ERR_OOM (scratch), RT_ERR_INVALID_ARG for a
 * NULL shape or a NULL required buffer when there are elements. */
#ifndef RT_KERNELS_GROUP_NORM_H
#define RT_KERNELS_GROUP_NORM_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "kernels/chanwise.h"

/* TEMP bytes the forward / backward hold (at least 1); 0 for NULL. */
size_t rt_kernel_group_norm_forward_temp_bytes(const rt_chan_shape *s);
size_t rt_kernel_group_norm_backward_temp_bytes(const rt_chan_shape *s);

/* y and stats from x. mean_in/var_in (C), both or neither: fixed
 * statistics (then groups must be C), else statistics from x (biased
 * variance, clamped at 0). run_mean/run_var (C), both or neither, with
 * statistics from x and N > 0: running = (1 − m)·running + m·(batch mean of
 * the per-instance mean / unbiased variance), PyTorch's instance_norm
 * (groups = C). */
rt_status rt_kernel_group_norm_forward(const rt_chan_shape *s, int64_t groups, float eps, const float *x,
                                       const float *weight, const float *bias, const float *mean_in,
                                       const float *var_in, float *run_mean, float *run_var, float momentum,
                                       float *y, float *stats);

/* dx (NULL: not wanted), dw, db (NULL: not wanted) from dy, x and the
 * forward's stats; input_stats: the statistics came from x (their gradient
 * flows), else they were fixed. gamma: the weight or NULL. */
rt_status rt_kernel_group_norm_backward(const rt_chan_shape *s, int64_t groups, int input_stats, const float *x,
                                        const float *stats, const float *gamma, const float *dy, float *dx,
                                        float *dw, float *db);

#endif
