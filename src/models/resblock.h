/* The residual block of ResNet (He et al. 2016) as a module, torchvision's
 * BasicBlock and Bottleneck: shared by the ResNets and by RevNet's
 * non-reversible downsampling units. Children: conv1, bn1, conv2, bn2
 * [, conv3, bn3] and, when the block changes the shape, downsample
 * (a Sequential of a 1×1 conv "0" and a batch norm "1") — torchvision's
 * parameter paths. */
#ifndef RT_MODELS_RESBLOCK_H
#define RT_MODELS_RESBLOCK_H

#include "../nn/modules.h"

typedef enum rt_block_kind { RT_BLOCK_BASIC = 0, RT_BLOCK_BOTTLENECK } rt_block_kind;

/* A block mapping (N, in, H, W) to (N, planes·expansion, H/stride, W/stride)
 * (expansion 1 basic, 4 bottleneck) with the stride on the 3×3 conv
 * (torchvision's "ResNet v1.5"); convs kaiming_normal(fan_out), no bias.
 * Forward: relu(residual(x) + shortcut(x)), the sum never stored
 * (ops/ops.h rt_add_relu). Errors: RT_ERR_INVALID_ARG (ctx or out NULL, an
 * unknown kind, in, planes or stride < 1), RT_ERR_OOM. */
rt_status rt_resblock_create(rt_init_ctx *ctx, rt_block_kind kind, int64_t in, int64_t planes, int64_t stride,
                             rt_module **out);

#endif
