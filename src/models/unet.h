/* Volumetric segmentation networks: the 3-D U-Net and the partially
 * reversible U-Net, as module trees mapping an image (N, C_in, D, H, W) f32
 * to per-voxel logits (N, num_classes, D, H, W) f32 in the PLAIN order.
 *
 * Standard 3-D U-Net (Çiçek et al., MICCAI 2016, "3D U-Net"; the layout of
 * nnU-Net, Isensee et al. 2021): per level two units
 * Conv3d(3×3×3, no bias) → norm → LeakyReLU(0.01); MaxPool3d(2) before
 * every level but the first; the decoder upsamples ×2 (ConvTranspose3d(2,
 * stride 2), or a 1×1×1 conv then trilinear ×2: the two commute, and the
 * conv first runs on 8× fewer voxels), concatenates the encoder's output of
 * that level in front (torch.cat([skip, up], 1)) and runs the level's two
 * units again; a 1×1×1 conv with bias gives the logits.
 *
 * Partially reversible U-Net (Brügger, Baumgartner, Konukoglu, MICCAI 2019,
 * "A Partially Reversible U-Net for Memory-Efficient Volumetric Image
 * Segmentation", and their public PartiallyReversibleUnet code,
 * experiments/noNewReversible.py, which this follows where the paper is
 * silent): a 3×3×3 conv (no bias) from C_in to widths[0]; encoder level l:
 * (l > 0) MaxPool3d(2) then a 1×1×1 conv (bias) to widths[l], then a
 * ReversibleSequence (memory/reversible.h) of enc_blocks[l] additive
 * couplings; decoder level l, from the bottom up: a ReversibleSequence of
 * dec_blocks[l] couplings, then (l > 0) a 1×1×1 conv (bias) to
 * widths[l−1] and trilinear ×2 upsampling, whose output is ADDED to the
 * encoder's output of level l−1. The bottom level thus runs its encoder and
 * its decoder sequence back to back, as the paper's code does. F and G of a
 * coupling = norm → LeakyReLU(0.01) → Conv3d(3×3×3, no bias) on half the
 * channels. A final 1×1×1 conv (bias) gives the logits (the paper applies a
 * sigmoid for its 3 overlapping BraTS regions; here the loss takes logits).
 *
 * Sizes: every spatial size that is not a multiple of 2^(levels−1) is
 * zero-padded at the END of its axis up to the next multiple
 * (ops3d.h rt_pad_constant), and the logits are cropped back to the input's
 * size, so an output voxel always belongs to the input voxel of the same
 * index (never misaligned). Padding is part of the graph (meta tensors
 * predict its memory); inputs that already fit are not copied.
 *
 * State-dict names (as tools/pytorch_unet.py defines both models):
 *   standard:  encoders.L.{conv1,norm1,conv2,norm2}.*, ups.L.{weight,bias}
 *              (transposed) or ups.L.conv.{weight,bias} (trilinear),
 *              decoders.L.{conv1,norm1,conv2,norm2}.*, last_conv.*
 *   reversible: first_conv.weight, encoders.L.conv.* (L > 0),
 *              encoders.L.blocks.B.{f,g}.{norm,conv}.*, decoders.L.blocks.B.*,
 *              decoders.L.conv.* (L > 0), last_conv.*
 * with L the level (0 = full resolution) and B the block. The paper's
 * checkpoints name the same tensors firstConv, encoders.L.conv,
 * encoders.L.reversibleBlocks.reversible_blocks.B.{f,g}_block.{gn,conv},
 * decoders.(levels−1−L).…, lastConv: a rename, not a new layout.
 * Norm parameters: BatchNorm3d (weight, bias, running_mean, running_var,
 * num_batches_tracked), InstanceNorm3d(affine=True,
 * track_running_stats=False) (weight, bias), GroupNorm (weight, bias).
 * Initialisation: PyTorch's defaults for every layer. */
#ifndef RT_MODELS_UNET_H
#define RT_MODELS_UNET_H

#include <stdbool.h>

#include "../nn/module.h"

#define RT_UNET_MAX_LEVELS 8

typedef enum rt_unet_norm {
    RT_UNET_NORM_BATCH = 0, /* BatchNorm3d */
    RT_UNET_NORM_INSTANCE,  /* InstanceNorm3d(affine=True), nnU-Net's */
    RT_UNET_NORM_GROUP,     /* GroupNorm(groups, C), the paper's */
} rt_unet_norm;

typedef enum rt_unet_upsample {
    RT_UNET_UP_TRANSPOSED = 0, /* ConvTranspose3d(k 2, stride 2) with bias */
    RT_UNET_UP_TRILINEAR,      /* Conv3d 1×1×1 with bias, then trilinear ×2 */
} rt_unet_upsample;

typedef struct rt_unet_config {
    bool reversible;      /* false: standard 3-D U-Net; true: partially reversible */
    int levels;           /* resolution levels, 1..RT_UNET_MAX_LEVELS (1: no pooling) */
    /* channels of each level; when widths[0] is 0, widths[l] = base_width·2^l */
    int64_t widths[RT_UNET_MAX_LEVELS];
    int64_t base_width;
    rt_unet_norm norm;
    /* GroupNorm's num_groups: it must divide every width (standard) or every
     * half width (reversible: F and G see half the channels); unused otherwise */
    int64_t groups;
    rt_unet_upsample upsample; /* standard only: the reversible net is always trilinear */
    /* reversible only: couplings per level in the encoder and the decoder
     * sequence (>= 0; the paper: 1 and 1, its "fat" variant 2 and 1) */
    int enc_blocks[RT_UNET_MAX_LEVELS], dec_blocks[RT_UNET_MAX_LEVELS];
} rt_unet_config;

/* The configuration of zoo model `name` (RT_ERR_INVALID_ARG when unknown or
 * when name or cfg is NULL):
 *   unet3d:         standard, 4 levels 16/32/64/128, GroupNorm(8), transposed
 *   prunet3d:       reversible, 4 levels 16/32/64/128, GroupNorm(8), 1+1 blocks
 *   unet3d_brats:   standard, 5 levels 60/120/240/360/480, GroupNorm(30), transposed
 *   prunet3d_brats: reversible, the paper's 5 levels 60/120/240/360/480,
 *                   GroupNorm(30) (paper: groups = widths[0]/2), 1+1 blocks
 * The small pair trains on a 2-core CPU and has equal depth and widths, so
 * the two differ only in the architecture; the _brats pair is the paper's. */
rt_status rt_unet_config_get(const char *name, rt_unet_config *cfg);

/* The spatial multiple the network needs internally, 2^(levels−1) (other
 * sizes are padded up to it); 0 for a NULL cfg or levels outside
 * 1..RT_UNET_MAX_LEVELS. */
int64_t rt_unet_size_multiple(const rt_unet_config *cfg);

/* Builds the network of cfg (see the header comment) with parameters on
 * ctx->device drawn from ctx's stream, in training mode. Errors:
 * RT_ERR_INVALID_ARG for cfg, ctx or out NULL, in_channels or num_classes
 * < 1, and every invalid configuration with the fix in the message: levels
 * outside 1..8, a width < 1, a group count that does not divide a (half)
 * width, an odd width in the reversible net (the couplings split channels
 * in half), a negative block count, an unknown norm or upsampling kind;
 * RT_ERR_OOM. *out is NULL on error (when out is not NULL). */
rt_status rt_unet_build(const rt_unet_config *cfg, rt_init_ctx *ctx, int64_t in_channels, int64_t num_classes,
                        rt_module **out);

#endif
