/* Fused batch normalisation + ReLU: relu(batch_norm(x)) as one op (oneDNN's
 * dnnl_fuse_norm_relu, kernels/norm.h). Conventions as in ops/ops.h. */
#ifndef RT_OPS_BATCHNORM_RELU_H
#define RT_OPS_BATCHNORM_RELU_H

#include <stdbool.h>
#include <stdint.h>

#include "core/tensor.h"

/* rt_relu(rt_batch_norm(x, ...)) with the same arguments, semantics and
 * errors as rt_batch_norm (ops.h): x (N, C, ...), weight, bias, running_mean,
 * running_var all (C). Training: one fused oneDNN pass forward and one
 * backward (the relu mask comes from a bit-mask workspace, so no relu output
 * is kept); the running statistics are updated exactly as rt_batch_norm
 * does (not in recompute mode, not on meta) and *num_batches_tracked (may be
 * NULL) incremented. Eval: composes rt_batch_norm and rt_relu (two nodes,
 * saving what those save). The output and the gradients have x's layout;
 * a bf16 x (training, as rt_batch_norm allows it) gives a bf16 output and
 * f32 gradients (the mask of the bf16 forward is read by the f32 backward:
 * oneDNN lays it out alike for both).
 * Saves (training): x, batch mean and variance (2·C floats) and oneDNN's
 * workspace (a u8 tensor of rt_kernel_batchnorm_relu_workspace_bytes bytes,
 * booked SAVED: with oneDNN 2.6 one bit per element for the blocked layout,
 * one byte per element for the plain one); the weight is kept too but is a
 * parameter (not booked SAVED). The unfused pair saves x, 2·C floats and the
 * relu output (a full f32 activation) instead. */
rt_status rt_batch_norm_relu(rt_tensor *x, rt_tensor *weight, rt_tensor *bias,
                             rt_tensor *running_mean, rt_tensor *running_var,
                             int64_t *num_batches_tracked, bool training, float momentum,
                             float eps, rt_tensor **out);

#endif
