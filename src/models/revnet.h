/* RevNets (Gomez et al. 2017, "The Reversible Residual Network", Table 1) for
 * small images: a 3×3 stem, three stages, then BN-ReLU, global average pool
 * and fc. Each stage's reversible units are one ReversibleSequence
 * (memory/reversible.h) of ReversibleBlocks whose F and G are
 * pre-activation residual functions on half the channels (basic: BN-ReLU-
 * conv3×3 twice; bottleneck: BN-ReLU-conv1×1, 3×3, 1×1 with a quarter of the
 * width inside). The first unit of a stage that changes resolution or width
 * is a non-reversible ResNet block (models/resblock.h) and keeps its
 * activations, as in the paper.
 *
 *   revnet38:  basic units [3,3,3], filters 32 / 32, 64, 112
 *   revnet110: basic units [9,9,9], filters 32 / 32, 64, 128
 *   revnet164: bottleneck units [9,9,9], filters 32 / 32, 64, 128 (×4 out)
 *   revnet_small: RevNet-38's units at ResNet-20's widths, 16 / 16, 32, 64
 *              (not in the paper: revtorch's quick default for Fashion-MNIST)
 *
 * Module tree (names as tools/pytorch_revnet.py): conv1, bn1, layerS (a
 * Sequential: a PreferredLayout, the transition unit "0" when there is one,
 * and an inline ReversibleSequence holding units "U" with children f and g,
 * each a Sequential bn1, conv1, bn2, conv2[, bn3, conv3]), bn_out, avgpool,
 * flatten, fc. Parameter names: layerS.U.{conv1,bn1,...,downsample.*} for
 * transition units, layerS.U.{f,g}.{bnK,convK} for reversible ones. The
 * same parameters train with plain backpropagation after
 * rt_module_set_reversible(net, false). */
#ifndef RT_MODELS_REVNET_H
#define RT_MODELS_REVNET_H

#include "resblock.h"

typedef struct rt_revnet_config {
    rt_block_kind block;
    int units[3];
    int64_t stem;
    int64_t widths[3];
} rt_revnet_config;

/* Config of a named RevNet; RT_ERR_INVALID_ARG if unknown or when name or
 * cfg is NULL. */
rt_status rt_revnet_config_get(const char *name, rt_revnet_config *cfg);
/* Builds a RevNet as a module tree mapping (N, in_channels, H, W) f32 to
 * logits (N, num_classes); parameters on ctx->device from ctx's stream.
 * Errors: RT_ERR_INVALID_ARG (cfg, ctx or out NULL, an invalid config,
 * in_channels or num_classes < 1), RT_ERR_OOM. */
rt_status rt_revnet_build(const rt_revnet_config *cfg, rt_init_ctx *ctx, int64_t in_channels, int64_t num_classes,
                          rt_module **out);

#endif
