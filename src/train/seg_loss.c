/* Dice + cross-entropy as a training-step loss (train/seg_loss.h). */
#include "train/seg_loss.h"

#include "ops/ops3d.h"

rt_status rt_loss_dice_ce(rt_tensor *output, rt_tensor *target, void *user, rt_tensor **loss) {
    (void)user;
    if (loss) *loss = NULL;
    if (!loss) return rt_error_set(RT_ERR_INVALID_ARG, "rt_loss_dice_ce: loss is NULL");
    if (!output || !target)
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_loss_dice_ce: %s is NULL", output ? "target" : "logits output");
    rt_tensor *ce = NULL, *probs = NULL, *dice = NULL;
    rt_status st = rt_cross_entropy_nd(output, target, NULL, &ce);
    if (st == RT_OK) st = rt_softmax_channels(output, &probs);
    if (st == RT_OK) st = rt_soft_dice_loss(probs, target, 1e-5f, true, false, &dice);
    if (st == RT_OK) st = rt_add(ce, dice, loss);
    rt_tensor_release(ce);
    rt_tensor_release(probs);
    rt_tensor_release(dice);
    return st;
}
