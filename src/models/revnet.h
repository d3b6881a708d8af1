/* RevNets (Gomez et al. 2017, "The Reversible Residual Network", Table 1) for
 * small images: a 3×3 stem, three stages, then BN-ReLU, global average pool
 * and fc. Each stage's reversible units are one reversible sequence
 * (memory/reversible.h) whose F and G are pre-activation residual functions
 * on half the channels (basic: BN-ReLU-conv3×3 twice; bottleneck: BN-ReLU-
 * conv1×1, 3×3, 1×1 with a quarter of the width inside). The first unit of a
 * stage that changes resolution or width is a non-reversible ResNet block
 * (models/resblock.h) and keeps its activations, as in the paper.
 *
 *   revnet38:  basic units [3,3,3], filters 32 / 32, 64, 112
 *   revnet110: basic units [9,9,9], filters 32 / 32, 64, 128
 *   revnet164: bottleneck units [9,9,9], filters 32 / 32, 64, 128 (×4 out)
 *   revnet_small: RevNet-38's units at ResNet-20's widths, 16 / 16, 32, 64
 *              (not in the paper: revtorch's quick default for Fashion-MNIST)
 *
 * Names: conv1, bn1, layerS.U.{conv1,bn1,...,downsample.*} for transition
 * units, layerS.U.{f,g}.{bnK,convK} for reversible ones, bn_out, fc. The same
 * parameters train with plain backpropagation when model->reversible is false. */
#ifndef RT_MODELS_REVNET_H
#define RT_MODELS_REVNET_H

#include "models/model.h"
#include "models/resnet.h"

typedef struct rt_revnet_config {
    rt_block_kind block;
    int units[3];
    int64_t stem;
    int64_t widths[3];
} rt_revnet_config;

rt_status rt_revnet_config_get(const char *name, rt_revnet_config *cfg);
rt_status rt_revnet_create(const char *name, const rt_revnet_config *cfg, int64_t in_channels,
                           int64_t num_classes, rt_device device, uint64_t seed, rt_model **out);

/* Reconstruction check of a RevNet on a batch x (N, C, H, W), in eval mode
 * without autograd: for every reversible block, the max relative error of
 * inverse(forward(h)) against its input h (error / max|h|), and for every
 * stage the error of rebuilding the stage's input from its output through
 * the whole chain of blocks. Returns the worst of each and the name of the
 * worst block (buffer of n bytes). RT_ERR_INVALID_ARG when m is not a RevNet. */
rt_status rt_revnet_reconstruction(rt_model *m, rt_tensor *x, double *block_err, double *chain_err,
                                   char *worst_block, size_t n);

#endif
