/* Segmentation objective and metric: nnU-Net's Dice + cross-entropy loss as
 * an rt_loss_fn for the training step, and per-class Dice on hard labels. */
#ifndef RT_TRAIN_SEG_LOSS_H
#define RT_TRAIN_SEG_LOSS_H

#include <stdbool.h>
#include <stdint.h>

#include "core/status.h"
#include "core/tensor.h"

/* Options of rt_dice_ce_loss; rt_dice_ce_defaults() gives nnU-Net's. */
typedef struct rt_dice_ce_options {
    float weight_ce, weight_dice; /* nnU-Net: 1, 1 */
    float smooth;                 /* soft Dice smoothing (nnU-Net 1e-5), > 0 */
    bool batch_dice;              /* sums over the batch too (nnU-Net's 3d_fullres plans, v1) */
    bool include_background;      /* nnU-Net: false (do_bg=False) */
} rt_dice_ce_options;

/* {1, 1, 1e-5, true, false}. */
rt_dice_ce_options rt_dice_ce_defaults(void);

/* nnU-Net's DC_and_CE_loss (nnunet/training/loss_functions/dice_loss.py;
 * v2 nnunetv2/training/loss/compound_losses.py) for logits (N, K, D, H, W)
 * (any rank ≥ 3) and target (N, D, H, W) int32 in [0, K):
 *   loss = weight_ce·CE(logits, target) + weight_dice·(1 − mean_c dice_c)
 * with CE = rt_cross_entropy_nd (mean over voxels) and dice_c the soft Dice
 * of softmax(logits) (rt_softmax_channels, rt_soft_dice_loss with
 * `smooth`, batch_dice, include_background). nnU-Net adds −mean dice; the
 * constant 1 only shifts the value (a perfect prediction scores 0 here),
 * the gradient is the same. K = 1 is refused without the background
 * (RT_ERR_SHAPE). `user` is a const rt_dice_ce_options * or NULL (the
 * defaults), so the function plugs into rt_train_config.loss / loss_user.
 * Output: a 0-d f32 tensor with autograd history. Errors: those of the
 * three ops (RT_ERR_INVALID_ARG for NULL logits, target or loss). */
rt_status rt_dice_ce_loss(rt_tensor *logits, rt_tensor *target, void *user, rt_tensor **loss);

/* Dice of hard label maps per class: pred and target int32 of the same
 * shape (any rank), classes c = 0..num_classes−1:
 *   dice[c] = 2·|pred = c ∧ target = c| / (|pred = c| + |target = c|)
 * NaN when the class is in neither map (nnU-Net's evaluation reports such a
 * class as NaN and leaves it out of the mean). Labels outside [0,
 * num_classes) count for no class. dice holds num_classes doubles.
 * Errors: RT_ERR_INVALID_ARG (NULL, meta, num_classes < 1), RT_ERR_SHAPE
 * (shapes differ), RT_ERR_DTYPE (not int32). */
rt_status rt_dice_per_class(const rt_tensor *pred, const rt_tensor *target, int64_t num_classes, double *dice);

#endif
