/* The residual block of ResNet (He et al. 2016), torchvision's BasicBlock
 * and Bottleneck: shared by the ResNets and by RevNet's non-reversible
 * downsampling units. Names under `prefix`: conv1, bn1, conv2, bn2[, conv3,
 * bn3], downsample.0 (1×1 conv) and downsample.1 (BN) when the block changes
 * the shape. */
#ifndef RT_MODELS_RESBLOCK_H
#define RT_MODELS_RESBLOCK_H

#include "models/resnet.h"
#include "nn/layers.h"

/* One residual block: 2 convs (BasicBlock) or 3 (Bottleneck), each followed
 * by batch norm, ReLU between them, optional projection shortcut. */
typedef struct rt_resblock {
    int nconv;
    rt_conv_layer conv[3];
    rt_batchnorm_layer bn[3];
    bool has_downsample;
    rt_conv_layer down_conv;
    rt_batchnorm_layer down_bn;
} rt_resblock;

/* Registers a block mapping `in` channels to planes·expansion (1 basic, 4
 * bottleneck) with the stride on the 3×3 conv; kaiming_normal(fan_out) convs. */
rt_status rt_resblock_init(rt_resblock *b, rt_state_dict *sd, const char *prefix, rt_block_kind kind,
                           int64_t in, int64_t planes, int64_t stride);
/* relu(residual(x) + shortcut(x)): (N, in, H, W) → (N, out, H/stride, W/stride). */
rt_status rt_resblock_forward(rt_resblock *b, rt_tensor *x, bool training, rt_tensor **out);

#endif
