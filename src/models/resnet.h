/* ResNets (He et al., "Deep Residual Learning for Image Recognition", CVPR
 * 2016) with torchvision's module structure and parameter names
 * (conv1, bn1, layerL.B.conv1, layerL.B.downsample.0/1, fc), so weights saved
 * by revtorch load into a torchvision-structured model unchanged.
 *
 * - ImageNet family (torchvision.models.resnet18/34/50): 7×7/2 stem + 3×3/2
 *   max pool, four stages of 64/128/256/512 (×4 for Bottleneck), BasicBlock
 *   [2,2,2,2] / [3,4,6,3], Bottleneck [3,4,6,3] with the stride on the 3×3
 *   conv (torchvision's "ResNet v1.5").
 * - CIFAR family (paper §4.2: resnet20/32/44/56/110): 3×3 stem with 16
 *   channels, three stages of n BasicBlocks with 16/32/64 channels, 6n+2
 *   layers. Shortcuts that change shape use a 1×1 conv + BN projection
 *   (option B) under torchvision's name `downsample`, not the paper's
 *   zero-padding option A, so the block matches torchvision's BasicBlock.
 * Initialisation as torchvision: convs kaiming_normal(fan_out, relu), BN
 * weight 1 / bias 0, fc nn.Linear's default. */
#ifndef RT_MODELS_RESNET_H
#define RT_MODELS_RESNET_H

#include "resblock.h"

typedef struct rt_resnet_config {
    rt_block_kind block;
    int stages;           /* 3 (CIFAR) or 4 (ImageNet) */
    int blocks[4];        /* blocks per stage */
    int64_t widths[4];    /* planes per stage (before bottleneck expansion) */
    bool imagenet_stem;   /* 7×7/2 conv + max pool instead of 3×3/1 conv */
} rt_resnet_config;

/* Config of a named ResNet ("resnet18", "resnet20", ...); RT_ERR_INVALID_ARG
 * if unknown or when name or cfg is NULL. */
rt_status rt_resnet_config_get(const char *name, rt_resnet_config *cfg);

/* Builds a ResNet as a module tree mapping (N, in_channels, H, W) f32 to
 * logits (N, num_classes): a Sequential with torchvision's children conv1,
 * bn1 (its ReLU fused), maxpool (ImageNet stem), layer1..layerS (Sequentials
 * of blocks "0".."B-1"), avgpool, flatten, fc, plus a PreferredLayout after
 * conv1 (no tensors). Parameters on ctx->device from ctx's stream.
 * Errors: RT_ERR_INVALID_ARG (cfg, ctx or out NULL, an invalid config,
 * in_channels or num_classes < 1), RT_ERR_OOM. */
rt_status rt_resnet_build(const rt_resnet_config *cfg, rt_init_ctx *ctx, int64_t in_channels, int64_t num_classes,
                          rt_module **out);

#endif
