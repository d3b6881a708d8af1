/* Gradient clipping and accumulation scaling (see grad.h). */
#include "optim/grad.h"

#include <math.h>

#include "backend/backend.h"

rt_status rt_clip_grad_norm(rt_tensor *const *params, int n, float max_norm, float *total_norm_out) {
    if (total_norm_out) *total_norm_out = 0.0f;
    if (n < 0 || (n > 0 && !params))
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_clip_grad_norm: invalid parameter list (params=%p, n=%d)",
                            (const void *)params, n);
    if (isnan(max_norm) || max_norm < 0.0f)
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_clip_grad_norm: max_norm %g must be >= 0 (+Inf only measures)",
                            (double)max_norm);
    for (int i = 0; i < n; i++) {
        if (!params[i]) return rt_error_set(RT_ERR_INVALID_ARG, "rt_clip_grad_norm: parameter %d is NULL", i);
        const rt_tensor *g = params[i]->grad;
        if (g && g->dtype != RT_F32)
            return rt_error_set(RT_ERR_DTYPE, "rt_clip_grad_norm: the grad of parameter %d is %s; f32 is required",
                                i, rt_dtype_str(g->dtype));
    }

    /* Σ_i ||g_i||² = (L2 norm of the per-grad L2 norms)², summed in double. */
    double sumsq = 0.0;
    int first_bad = -1;
    for (int i = 0; i < n; i++) {
        const rt_tensor *g = params[i]->grad;
        if (!g) continue;
        double s = rt_backend_of(g)->vec_sumsq(rt_tensor_numel(g), rt_tensor_f32(g)); /* 0 on meta */
        if (!isfinite(s) && first_bad < 0) first_bad = i;
        sumsq += s;
    }
    const float total = (float)sqrt(sumsq);
    if (total_norm_out) *total_norm_out = total;
    if (!isfinite(total)) {
        if (first_bad >= 0)
            return rt_error_set(RT_ERR_NONFINITE,
                                "rt_clip_grad_norm: the total L2 norm of the gradients is %s (the grad of "
                                "parameter %d holds NaN or Inf), so it cannot be clipped; no gradient was "
                                "changed. Skip this optimizer step, and lower the learning rate or the "
                                "loss scale if it recurs",
                                isnan(total) ? "nan" : "inf", first_bad);
        return rt_error_set(RT_ERR_NONFINITE,
                            "rt_clip_grad_norm: the total L2 norm of the gradients overflows float "
                            "(sum of squares %g), so it cannot be clipped; no gradient was changed. "
                            "Skip this optimizer step and lower the learning rate or the loss scale",
                            sumsq);
    }
    /* clip_coef = max_norm / (total_norm + 1e-6), clamped to 1 (f32 as in PyTorch). */
    const float coef = max_norm / (total + 1e-6f);
    if (coef < 1.0f)
        for (int i = 0; i < n; i++) {
            rt_tensor *g = params[i]->grad;
            if (g) rt_backend_of(g)->vec_scale(rt_tensor_numel(g), coef, rt_tensor_f32(g), rt_tensor_f32(g));
        }
    return RT_OK;
}

float rt_accum_loss_scale(int64_t micro_batch_size, int64_t full_batch_size) {
    if (micro_batch_size <= 0 || full_batch_size <= 0 || micro_batch_size > full_batch_size) return NAN;
    return (float)((double)micro_batch_size / (double)full_batch_size);
}

void rt_grad_accumulator_begin(rt_grad_accumulator *a, int64_t full_batch_size) {
    if (!a) return;
    a->full_batch_size = full_batch_size;
    a->samples = 0;
    a->micro_batches = 0;
}

float rt_grad_accumulator_scale(rt_grad_accumulator *a, int64_t micro_batch_size) {
    if (!a) return NAN;
    if (micro_batch_size <= 0 || micro_batch_size > a->full_batch_size - a->samples) return NAN;
    a->samples += micro_batch_size;
    a->micro_batches++;
    return rt_accum_loss_scale(micro_batch_size, a->full_batch_size);
}

rt_status rt_grad_accumulator_check(const rt_grad_accumulator *a) {
    if (!a) return rt_error_set(RT_ERR_INVALID_ARG, "rt_grad_accumulator_check: the accumulator is NULL");
    if (a->full_batch_size <= 0 || a->samples != a->full_batch_size)
        return rt_error_set(RT_ERR_STATE,
                            "gradient accumulation: %d micro-batches hold %lld samples but the full batch "
                            "is %lld; the accumulated gradient is not the full-batch mean (record every "
                            "micro-batch with rt_grad_accumulator_scale)",
                            a->micro_batches, (long long)a->samples, (long long)a->full_batch_size);
    return RT_OK;
}
