/* Dice + cross-entropy as an rt_loss_fn (train/seg_loss.h). */
#include "train/seg_loss.h"

#include "ops/ops3d.h"

rt_status rt_loss_dice_ce(rt_tensor *output, rt_tensor *target, void *user, rt_tensor **loss) {
    (void)user;
    return rt_dice_ce_loss(output, target, loss);
}
