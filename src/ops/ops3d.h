/* Differentiable ops of volumetric (3-D) networks that ops/ops.h lacks:
 * transposed convolution, trilinear and bicubic resampling, group and instance
 * normalisation, softmax over channels, and the segmentation losses (soft
 * Dice, voxel-wise weighted cross-entropy). The conventions of ops/ops.h
 * hold for every function here: inputs borrowed, *out a new reference
 * (booked TEMP, NULL on every error), float32 activations in the PLAIN
 * (NC[D]HW) or BLOCKED (nC[d]hw{B}c) memory order with the output in the
 * input's order, meta tensors compute only shapes and memory, grad_fn set
 * when grad mode is on and an input requires grad, and the errors
 * RT_ERR_INVALID_ARG / RT_ERR_DTYPE / RT_ERR_SHAPE / RT_ERR_OOM /
 * RT_ERR_BACKEND with a message naming the op, the argument and the fix.
 * Which kernel runs each op and what its backward keeps is listed per
 * function and in docs/design.md, "3-D operators". The other 3-D ops are in
 * ops/ops.h: rt_conv (Conv3d), rt_max_pool / rt_avg_pool (MaxPool3d with
 * oneDNN's compact workspace, AvgPool3d), rt_batch_norm (BatchNorm3d),
 * rt_leaky_relu, rt_sigmoid, rt_cat_channels. */
#ifndef RT_OPS_OPS3D_H
#define RT_OPS_OPS3D_H

#include <stdbool.h>
#include <stdint.h>

#include "ops.h"

/* Transposed-convolution options; zero fields take PyTorch's defaults
 * (stride 1, padding 0, output_padding 0, dilation 1, groups 1). Index 0 is
 * the outermost spatial dim (D for 3-D). */
typedef struct rt_conv_transpose_opts {
    int64_t stride[3];
    int64_t padding[3];
    int64_t output_padding[3];
    int64_t dilation[3];
    int64_t groups;
} rt_conv_transpose_opts;

/* torch.nn.functional.conv_transpose2d / conv_transpose3d: x (N, C_in,
 * [D,] H, W), weight (C_in, C_out/groups, [kD,] kH, kW) (PyTorch's order),
 * bias (C_out) or NULL → (N, C_out, [oD,] oH, oW) with
 *   o = (i − 1)·stride − 2·padding + dilation·(k − 1) + output_padding + 1,
 * output_padding smaller than stride or dilation (RT_ERR_INVALID_ARG
 * otherwise, as PyTorch). oneDNN deconvolution primitive (kernels/deconv.h);
 * the output is BLOCKED when x is and C_out fills whole blocks.
 * opts may be NULL (all defaults). Saves: x (and the weight, a parameter). */
rt_status rt_conv_transpose(rt_tensor *x, rt_tensor *weight, rt_tensor *bias, const rt_conv_transpose_opts *opts,
                            rt_tensor **out);

/* torch.nn.functional.interpolate(x, size=..., scale_factor=...,
 * mode="trilinear" (5-D x) / "bilinear" (4-D x), align_corners=False),
 * recompute_scale_factor=None. Give `size` (the output's spatial sizes, one
 * per spatial dim, each >= 1) or `scale_factor` (one per spatial dim, > 0;
 * output size ⌊in·scale⌋, which must be >= 1), not both (RT_ERR_INVALID_ARG,
 * as PyTorch); with a scale factor the source coordinates use 1/scale, as
 * PyTorch does, not in/out, and an axis whose size does not change is copied
 * (as PyTorch's CPU kernel). revtorch's own kernel (kernels/upsample.h);
 * backward scatters with the same weights. Saves nothing (only sizes). */
rt_status rt_upsample_linear(rt_tensor *x, const int64_t *size, const double *scale_factor, rt_tensor **out);

/* torch.nn.functional.interpolate(x, size=..., scale_factor=...,
 * mode="bicubic", align_corners=False, antialias=False),
 * recompute_scale_factor=None, for x (N, C, H, W) f32 (PLAIN or BLOCKED; the
 * output has x's order). size / scale_factor: two values (H, W), exactly one
 * of the two given, as rt_upsample_linear (output ⌊in·scale_factor⌋ >= 1;
 * with a scale factor the source coordinate uses 1/scale_factor, as
 * PyTorch). Works for up- and downsampling (no antialiasing when
 * shrinking, as PyTorch's antialias=False). Per axis the source coordinate
 * scale·(o + 0.5) − 0.5 is NOT clamped at 0 (PyTorch's cubic path; linear
 * clamps), and the 4 taps ⌊src⌋−1 .. ⌊src⌋+2 are clamped to [0, in − 1]
 * (border replicated), weighted by Keys' cubic convolution kernel with
 * A = −0.75 (Keys 1981; PyTorch's get_cubic_upsample_coefficients), so
 * values may overshoot the input's range. Computed in float, as PyTorch's
 * CPU kernel (kernels/upsample.h). Backward scatters with the same weights.
 * Saves nothing (only sizes). Errors as rt_upsample_linear; a 5-D x is
 * RT_ERR_SHAPE (PyTorch has no tricubic mode). */
rt_status rt_upsample_bicubic(rt_tensor *x, const int64_t *size, const double *scale_factor, rt_tensor **out);

/* torch.nn.functional.group_norm(x, num_groups, weight, bias, eps): x
 * (N, C, spatial...) with C % num_groups == 0; per sample and group, over
 * the group's C/G channels and all positions,
 *   y = (x − mean)/√(var + eps)·weight[c] + bias[c]   (biased var),
 * weight and bias (C) or both NULL (affine=False). Statistics are computed in
 * double. revtorch's own kernels (kernels/chanwise.h: oneDNN 2.6 has no group
 * normalisation). A single spatial element (spatial size 1) is refused with
 * RT_ERR_SHAPE whatever N and C (PyTorch accepts it for GroupNorm and refuses
 * it for InstanceNorm; over one position a normaliser of a segmentation net
 * has lost its meaning, and instance norm — G = C — outputs only bias).
 * eps must be > 0. Saves: x and the per-(sample, group) mean and 1/std
 * (2·N·G floats, booked SAVED). */
rt_status rt_group_norm(rt_tensor *x, int64_t num_groups, rt_tensor *weight, rt_tensor *bias, float eps,
                        rt_tensor **out);

/* torch.nn.functional.instance_norm(x, running_mean, running_var, weight,
 * bias, use_input_stats, momentum, eps): x (N, C, spatial...), weight and
 * bias (C) or both NULL, running_mean and running_var (C) or both NULL.
 * use_input_stats (training, or track_running_stats=False): normalises each
 * (sample, channel) over its positions — group_norm with G = C, same single
 * spatial element refusal — and, when the running statistics are given,
 * updates running = (1 − momentum)·running + momentum·mean over the batch of
 * the per-instance mean and unbiased variance (PyTorch). Otherwise uses the
 * running statistics (both required, RT_ERR_INVALID_ARG), a per-channel
 * affine map. Saves: as group_norm; with running statistics, nothing. */
rt_status rt_instance_norm(rt_tensor *x, rt_tensor *running_mean, rt_tensor *running_var, rt_tensor *weight,
                           rt_tensor *bias, bool use_input_stats, float momentum, float eps, rt_tensor **out);

/* torch.softmax(x, dim=1) for x (N, C, spatial...) of rank >= 2 (own
 * kernel, kernels/softmax.h). Saves: the output y. */
rt_status rt_softmax_channels(rt_tensor *x, rt_tensor **out);

/* torch.nn.functional.cross_entropy(logits, target, weight), mean
 * reduction, for logits (N, C, d1, ..., dk) (k >= 0) and target (N, d1, ...,
 * dk) int32 class indices in [0, C) (else RT_ERR_INVALID_ARG naming the
 * element), weight (C) f32 or NULL:
 *   loss = Σ_i w[t_i]·(−log softmax(x_i)[t_i]) / Σ_i w[t_i]
 * (the weighted mean divides by the sum of the weights of the targets, as
 * PyTorch; w = 1 without weights). A zero weight sum gives NaN, as PyTorch.
 * PyTorch's ignore_index and label_smoothing are not implemented here (see
 * rt_cross_entropy for smoothing on (N, C)); the weight gets no gradient.
 * Output: 0-d. Softmax by log-sum-exp over channels (own kernel). Saves: the
 * logits and the target (the probabilities are recomputed in backward). */
rt_status rt_cross_entropy_nd(rt_tensor *logits, rt_tensor *target, rt_tensor *weight, rt_tensor **out);

/* Soft Dice loss per class on probabilities (the output of
 * rt_softmax_channels or rt_sigmoid): probs (N, C, spatial...) f32, target
 * (N, spatial...) int32 labels in [0, C), one-hot encoded as g. For each
 * class c (c >= 1 unless include_background) and, unless batch_dice, each
 * sample n:
 *   I = Σ p·g,  P = Σ p,  G = Σ g   (over the positions, and the batch
 *                                    when batch_dice)
 *   dice = (2·I + smooth) / (P + G + smooth)
 *   loss = 1 − mean(dice)            (over the classes [and samples])
 * This is nnU-Net's SoftDiceLoss (Isensee et al., nnU-Net, Nature Methods
 * 2021; nnunet/training/loss_functions/dice_loss.py: tp = Σ p·g, fp + fn =
 * P + G − 2·tp, dc = (2tp + smooth)/(2tp + fp + fn + smooth), smooth = 1e-5
 * by default, batch_dice for 3-D full-resolution training) shifted by 1 so
 * a perfect prediction gives 0 (nnU-Net returns −mean(dice)): the gradient
 * is the same. smooth keeps an empty class (P = G = 0) at dice = 1 and
 * must be > 0 (RT_ERR_INVALID_ARG); without the background at least 2
 * classes are needed (RT_ERR_SHAPE). Output: 0-d. Saves: the target and the 3 sums per term (in
 * double); the probabilities are not needed by backward:
 *   ∂dice/∂p = (2g·(P + G + smooth) − (2I + smooth)) / (P + G + smooth)². */
rt_status rt_soft_dice_loss(rt_tensor *probs, rt_tensor *target, float smooth, bool batch_dice,
                            bool include_background, rt_tensor **out);

/* The segmentation loss of nnU-Net (DC_and_CE_loss with weights 1 and 1):
 *   loss = rt_soft_dice_loss(softmax(logits), target, smooth 1e-5,
 *                            batch_dice true, background excluded)
 *        + rt_cross_entropy_nd(logits, target, no class weights)
 * for logits (N, K, spatial...) f32 with K >= 2 (the Dice term skips the
 * background class 0 and needs another; RT_ERR_SHAPE) and target
 * (N, spatial...) int32 labels in [0, K). Output: 0-d, >= 0 (1 + CE for
 * a prediction that misses every foreground voxel, → 0 when perfect).
 * Errors: those of the three ops (they name the argument). Saves what
 * softmax, soft Dice and cross-entropy save (the probabilities, the target,
 * the logits). `revtorch memory` predicts segmentation models' steps with it
 * (train/seg_loss.h adapts it to a train-step loss). */
rt_status rt_dice_ce_loss(rt_tensor *logits, rt_tensor *target, rt_tensor **out);

/* torch.nn.functional.pad(x, pad, mode="constant", value): pad holds npad
 * (even, at most 2·ndim) sizes in pairs (before, after), the last dim's pair
 * first, then the one before it, and so on; dims without a pair keep their
 * size. A negative size removes that many elements (F.pad's cropping), so
 * rt_pad_constant also crops: the window [s, s + n) of a dim of size i is
 * the pair (−s, n + s − i). Every output size must be >= 1 (RT_ERR_SHAPE);
 * an odd npad or more pairs than dims is RT_ERR_INVALID_ARG. x of rank 1..5;
 * the output is PLAIN (a BLOCKED x is reordered first). Backward copies the
 * gradient's window back (the same op with the pads negated, value 0).
 * Saves nothing (only shapes). */
rt_status rt_pad_constant(rt_tensor *x, int npad, const int64_t *pad, float value, rt_tensor **out);

#endif
