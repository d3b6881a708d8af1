/* The segmentation loss as a training-step loss (train/step.h rt_loss_fn):
 * rt_train_config.loss = rt_loss_dice_ce. Interim definition until the
 * U-Net branch's (same name and contract) is merged. */
#ifndef RT_TRAIN_SEG_LOSS_H
#define RT_TRAIN_SEG_LOSS_H

#include "train/step.h"

/* nnU-Net's DC_and_CE_loss (nnunet/training/loss_functions/dice_loss.py,
 * weights 1 and 1) for logits output (N, K, D, H, W) and int32 labels
 * target (N, D, H, W):
 *   loss = CE(output, target) + (1 − mean_{c ≥ 1} dice_c)
 * CE = rt_cross_entropy_nd (mean over voxels); dice_c the soft Dice of
 * softmax(output) with smooth 1e-5, batch Dice, background excluded
 * (rt_soft_dice_loss). nnU-Net adds −mean dice; the constant 1 only shifts
 * the value. `user` is unused (may be NULL). Output 0-d with autograd
 * history. Errors: those of the three ops (RT_ERR_INVALID_ARG for a NULL
 * output, target or loss; RT_ERR_SHAPE for K < 2). */
rt_status rt_loss_dice_ce(rt_tensor *output, rt_tensor *target, void *user, rt_tensor **loss);

#endif
