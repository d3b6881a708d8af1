/* The modules of volumetric networks that nn/modules.h lacks, named and
 * initialised as torch.nn's: ConvTranspose2d/3d, Upsample (bilinear /
 * trilinear), PixelShuffle, GroupNorm, InstanceNorm2d/3d, Softmax(dim=1), Sigmoid. Conv3d,
 * BatchNorm3d, MaxPool3d, AvgPool3d and LeakyReLU are in nn/modules.h.
 * Forwards are thin wrappers over ops/ops3d.h (same shapes, errors, saved
 * tensors). Constructors follow nn/modules.h: a new module in *m (freed by
 * rt_module_destroy or its parent), RT_ERR_INVALID_ARG when m or (where
 * taken) ctx is NULL or an argument is out of range (*m is then NULL),
 * RT_ERR_OOM. */
#ifndef RT_NN_MODULES3D_H
#define RT_NN_MODULES3D_H

#include "modules.h"
#include "../ops/ops3d.h"

/* torch.nn.ConvTranspose2d (nsp 2) / ConvTranspose3d (nsp 3)(in, out, k,
 * stride, padding, output_padding, groups, bias): weight (in, out/groups,
 * k, k[, k]) and bias (out), both U(-1/√fan_in, 1/√fan_in) with PyTorch's
 * fan_in = out/groups·k^nsp (its reset_parameters reads weight.size(1));
 * dilation 1. Output size (i − 1)·stride − 2·padding + k + output_padding. */
rt_status rt_conv_transpose_create(rt_init_ctx *ctx, int nsp, int64_t in, int64_t out, int64_t k, int64_t stride,
                                   int64_t padding, int64_t output_padding, int64_t groups, bool bias,
                                   rt_module **m);

/* Sets the dilation of a Conv2d/Conv3d (rt_conv_create) on every spatial
 * axis, as torch.nn.Conv3d(..., dilation=d). RT_ERR_INVALID_ARG when m is
 * not a convolution (NULL included) or dilation < 1. */
rt_status rt_conv_set_dilation(rt_module *m, int64_t dilation);

/* torch.nn.Upsample(size=..., scale_factor=..., mode="bilinear" (nsp 2) /
 * "trilinear" (nsp 3), align_corners=False): one size (> 0) or one scale
 * factor (> 0) for every spatial axis; the other argument must be 0. */
rt_status rt_upsample_create(int nsp, int64_t size, double scale_factor, rt_module **m);

/* torch.nn.PixelShuffle(upscale_factor): (N, C·r², H, W) → (N, C, H·r,
 * W·r), rt_pixel_shuffle; no parameters. r >= 1 (RT_ERR_INVALID_ARG). */
rt_status rt_pixel_shuffle_create(int64_t upscale_factor, rt_module **m);
/* The same module consuming its input (rt_pixel_shuffle_inplace), as
 * torch.nn.ReLU(inplace=True) does: for a Sequential whose previous child's
 * output nothing else keeps (EDSR's upsampler: conv, then shuffle). The
 * state dict and values are rt_pixel_shuffle_create's. */
rt_status rt_pixel_shuffle_inplace_create(int64_t upscale_factor, rt_module **m);

/* torch.nn.GroupNorm(num_groups, num_channels, eps, affine): weight 1, bias 0
 * (C) when affine. num_groups must divide num_channels; eps > 0. */
rt_status rt_group_norm_create(rt_init_ctx *ctx, int64_t num_groups, int64_t num_channels, float eps, bool affine,
                               rt_module **m);

/* torch.nn.InstanceNorm2d/3d(num_features, eps=1e-5, momentum=0.1, affine,
 * track_running_stats): weight 1 / bias 0 when affine; running_mean 0,
 * running_var 1 and num_batches_tracked when track_running_stats, which are
 * then updated in training and used in eval (else instance statistics in
 * both modes, nnU-Net's setting with affine=True). */
rt_status rt_instance_norm_create(rt_init_ctx *ctx, int nsp, int64_t num_features, bool affine,
                                  bool track_running_stats, rt_module **m);

/* torch.nn.Softmax(dim=1) and torch.nn.Sigmoid. */
rt_status rt_softmax_create(rt_module **m);
rt_status rt_sigmoid_create(rt_module **m);

#endif
