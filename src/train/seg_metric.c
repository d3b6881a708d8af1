/* Per-class Dice of label maps (train/seg_metric.h). */
#include "train/seg_metric.h"

#include <math.h>
#include <stdlib.h>

rt_status rt_dice_per_class(const rt_tensor *pred, const rt_tensor *target, int64_t num_classes, double *dice) {
    static const char *fn = "rt_dice_per_class";
    if (!pred || !target || !dice)
        return rt_error_set(RT_ERR_INVALID_ARG, "%s: %s is NULL", fn, !pred ? "pred" : !target ? "target" : "dice");
    if (rt_tensor_is_meta(pred) || rt_tensor_is_meta(target))
        return rt_error_set(RT_ERR_INVALID_ARG, "%s: meta tensors hold no labels", fn);
    if (num_classes < 1) return rt_error_set(RT_ERR_INVALID_ARG, "%s: num_classes %lld must be >= 1", fn,
                                             (long long)num_classes);
    if (pred->dtype != RT_I32 || target->dtype != RT_I32)
        return rt_error_set(RT_ERR_DTYPE, "%s: pred and target must be int32 label maps", fn);
    if (rt_tensor_numel(pred) != rt_tensor_numel(target) || pred->ndim != target->ndim ||
        !rt_tensor_same_shape(pred, target)) {
        char a[64], b[64];
        return rt_error_set(RT_ERR_SHAPE, "%s: pred %s and target %s differ in shape", fn,
                            rt_tensor_shape_str(pred, a, sizeof a), rt_tensor_shape_str(target, b, sizeof b));
    }
    int64_t *cnt = calloc((size_t)num_classes * 3, sizeof(int64_t)); /* |P|, |G|, |P ∧ G| per class */
    if (!cnt) return rt_error_set(RT_ERR_OOM, "%s: out of memory", fn);
    const int32_t *p = rt_tensor_data(pred), *g = rt_tensor_data(target);
    const int64_t n = rt_tensor_numel(pred);
    for (int64_t i = 0; i < n; i++) {
        int32_t a = p[i], b = g[i];
        if (a >= 0 && a < num_classes) cnt[3 * a]++;
        if (b >= 0 && b < num_classes) cnt[3 * b + 1]++;
        if (a == b && a >= 0 && a < num_classes) cnt[3 * a + 2]++;
    }
    for (int64_t c = 0; c < num_classes; c++) {
        int64_t den = cnt[3 * c] + cnt[3 * c + 1];
        dice[c] = den ? 2.0 * (double)cnt[3 * c + 2] / (double)den : NAN;
    }
    free(cnt);
    return RT_OK;
}

rt_status rt_dice_threshold_sweep(const rt_tensor *prob, const rt_tensor *target, int n, const float *thresholds,
                                  double *dice, int *best) {
    static const char *fn = "rt_dice_threshold_sweep";
    if (!prob || !target || !thresholds || !dice || !best)
        return rt_error_set(RT_ERR_INVALID_ARG, "%s: %s is NULL", fn,
                            !prob ? "prob" : !target ? "target" : !thresholds ? "thresholds" : !dice ? "dice" : "best");
    *best = -1;
    if (rt_tensor_is_meta(prob) || rt_tensor_is_meta(target))
        return rt_error_set(RT_ERR_INVALID_ARG, "%s: meta tensors hold no values", fn);
    if (n < 1) return rt_error_set(RT_ERR_INVALID_ARG, "%s: n = %d thresholds; give at least one", fn, n);
    for (int i = 0; i < n; i++)
        if (!(thresholds[i] > 0.0f && thresholds[i] < 1.0f))
            return rt_error_set(RT_ERR_INVALID_ARG, "%s: threshold %d is %g; thresholds lie in (0, 1)", fn, i,
                                (double)thresholds[i]);
    if (prob->dtype != RT_F32 || target->dtype != RT_I32)
        return rt_error_set(RT_ERR_DTYPE, "%s: prob must be float32 and target int32", fn);
    if (prob->ndim != target->ndim || !rt_tensor_same_shape(prob, target)) {
        char a[64], b[64];
        return rt_error_set(RT_ERR_SHAPE, "%s: prob %s and target %s differ in shape", fn,
                            rt_tensor_shape_str(prob, a, sizeof a), rt_tensor_shape_str(target, b, sizeof b));
    }
    const float *p = rt_tensor_f32(prob);
    const int32_t *g = rt_tensor_data(target);
    const int64_t m = rt_tensor_numel(prob);
    int64_t fg = 0;
    for (int64_t v = 0; v < m; v++) fg += g[v] == 1;
    for (int i = 0; i < n; i++) {
        const float t = thresholds[i];
        int64_t pos = 0, both = 0; /* |prob > t|, |prob > t ∧ target = 1| */
        for (int64_t v = 0; v < m; v++) {
            int hit = p[v] > t;
            pos += hit;
            both += hit & (g[v] == 1);
        }
        dice[i] = pos + fg ? 2.0 * (double)both / (double)(pos + fg) : NAN;
        if (isnan(dice[i])) continue;
        if (*best < 0 || dice[i] > dice[*best] ||
            (dice[i] == dice[*best] && fabsf(t - 0.5f) < fabsf(thresholds[*best] - 0.5f)))
            *best = i;
    }
    return RT_OK;
}
