/* The segmentation loss as a training-step loss (train/step.h rt_loss_fn),
 * so that `revtorch segment`, `revtorch memory` and the tests train U-Nets
 * with one definition: rt_train_config.loss = rt_loss_dice_ce. */
#ifndef RT_TRAIN_SEG_LOSS_H
#define RT_TRAIN_SEG_LOSS_H

#include "step.h"

/* *loss = rt_dice_ce_loss(output, target) (ops/ops3d.h: nnU-Net's Dice +
 * cross-entropy) for per-voxel logits output (N, K, D, H, W) and int32
 * labels target (N, D, H, W); `user` is unused (may be NULL). A mean over
 * the samples as rt_train_step expects, except that the Dice term is a
 * batch Dice (one ratio over the whole micro-batch, nnU-Net's batch_dice):
 * with gradient accumulation the micro-batches' Dice terms are averaged,
 * not pooled. Errors: those of rt_dice_ce_loss (RT_ERR_INVALID_ARG for a
 * NULL output, target or loss). */
rt_status rt_loss_dice_ce(rt_tensor *output, rt_tensor *target, void *user, rt_tensor **loss);

#endif
