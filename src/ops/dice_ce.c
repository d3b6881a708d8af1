/* Dice + cross-entropy, the segmentation loss of nnU-Net (ops/ops3d.h). */
#include "ops/op_util.h"
#include "ops/ops3d.h"

rt_status rt_dice_ce_loss(rt_tensor *logits, rt_tensor *target, rt_tensor **out) {
    RT_TRY(rt_op_check_out(out, "dice_ce_loss"));
    *out = NULL;
    RT_TRY(rt_op_check_f32(logits, "dice_ce_loss", "logits"));
    if (!target) return rt_error_set(RT_ERR_INVALID_ARG, "dice_ce_loss: target is NULL");
    rt_tensor *probs = NULL, *dice = NULL, *ce = NULL;
    rt_status st = rt_softmax_channels(logits, &probs);
    if (st == RT_OK) st = rt_soft_dice_loss(probs, target, 1e-5f, true, false, &dice);
    rt_tensor_release(probs); /* the Dice backward does not need the probabilities */
    if (st == RT_OK) st = rt_cross_entropy_nd(logits, target, NULL, &ce);
    if (st == RT_OK) st = rt_add(dice, ce, out);
    rt_tensor_release(dice);
    rt_tensor_release(ce);
    return st;
}
