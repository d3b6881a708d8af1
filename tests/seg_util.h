/* Helpers shared by the segmentation-model tests (test_unet, test_unet_plan):
 * fixed voxel labels and one forward + Dice/CE + backward. Include after
 * test_util.h. */
#ifndef RT_TEST_SEG_UTIL_H
#define RT_TEST_SEG_UTIL_H

#include "autograd/engine.h"
#include "core/tensor.h"
#include "ops/ops3d.h"
#include "test_util.h"

/* Labels (N, D, H, W) int32 in [0, k), a fixed pattern that uses every
 * class; owned by the test (tu_own). NULL if the allocation failed. */
static inline rt_tensor *tu_seg_labels(int64_t n, int64_t d, int64_t h, int64_t w, int k) {
    int64_t s[4] = {n, d, h, w};
    rt_tensor *t = tu_own(rt_tensor_create(4, s, RT_I32, RT_DEVICE_CPU, RT_MEM_DATA));
    if (!t) return NULL;
    int32_t *p = rt_tensor_data(t);
    for (int64_t i = 0; i < rt_tensor_numel(t); i++) p[i] = (int32_t)((i * 7 / 5 + i / 13) % k);
    return t;
}

/* Forward of net on x, nnU-Net's Dice + CE against y, backward; the loss
 * in *loss. Gradients accumulate into the parameters' .grad. */
static inline rt_status tu_seg_step(rt_module *net, rt_tensor *x, rt_tensor *y, double *loss) {
    rt_tensor *out = NULL, *l = NULL;
    RT_TRY(rt_module_forward(net, x, &out));
    rt_status st = rt_dice_ce_loss(out, y, &l);
    rt_tensor_release(out);
    if (st == RT_OK) {
        *loss = rt_tensor_f32(l)[0];
        st = rt_backward(l, NULL, false);
    }
    rt_tensor_release(l);
    return st;
}

#endif
