/* kernels/coupling.h: the loops that were inline in ops/coupling.c,
 * unchanged. */
#include "kernels/coupling.h"

#include <math.h>

#include "kernels/vec.h"

static inline float soft_clamp(float s_raw, float c) { return c * tanhf(s_raw / c); }

/* RT_ERR_NONFINITE naming the first NaN/Inf of y and the inputs it came
 * from; RT_OK when every value is finite. */
static rt_status check_finite(const float *xp, const float *sp, const float *yp, int64_t n, int64_t inner,
                              float clamp) {
    if (rt_vec_all_finite(n * inner, yp)) return RT_OK;
    int64_t bad = 0, first = -1;
    for (int64_t k = 0; k < n * inner; k++)
        if (!isfinite(yp[k]) && bad++ == 0) first = k;
    int64_t b = first / inner, i = first % inner;
    float x = xp[first], s_raw = sp[b * 2 * inner + i], t = sp[b * 2 * inner + inner + i];
    const char *cause = !isfinite(x) || !isfinite(s_raw) || !isfinite(t)
                            ? "an input is already NaN/Inf (x2 or G's output)"
                            : "x2·scale + t overflowed float32";
    return rt_error_set(RT_ERR_NONFINITE,
                        "affine_coupling: %lld of %lld outputs are NaN/Inf, first at sample %lld, element %lld "
                        "(x2 = %g, s_raw = %g, t = %g): %s. The log-scale is soft-clamped to [-%g, %g] "
                        "(scale <= %.2f), so the scale alone cannot overflow: x2 or G's output (s_raw, t) has "
                        "blown up and training is diverging. Lower the learning rate, clip gradients "
                        "(rt_clip_grad_norm), and check the input batch for NaN/Inf",
                        (long long)bad, (long long)(n * inner), (long long)b, (long long)i, (double)x,
                        (double)s_raw, (double)t, cause, (double)clamp, (double)clamp, exp((double)clamp));
}

rt_status rt_kernel_affine_coupling_forward(int64_t n, int64_t inner, float clamp, const float *x, const float *st,
                                            float *y) {
    if (n <= 0 || inner <= 0) return RT_OK;
    if (!x || !st || !y)
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_kernel_affine_coupling_forward: x, st or y is NULL");
    for (int64_t b = 0; b < n; b++)
        for (int64_t i = 0; i < inner; i++)
            y[b * inner + i] = x[b * inner + i] * expf(soft_clamp(st[b * 2 * inner + i], clamp)) +
                               st[b * 2 * inner + inner + i];
    return check_finite(x, st, y, n, inner, clamp);
}

void rt_kernel_affine_coupling_inverse(int64_t n, int64_t inner, float clamp, const float *y, const float *st,
                                       float *x) {
    if (n <= 0 || inner <= 0 || !y || !st || !x) return;
    for (int64_t b = 0; b < n; b++)
        for (int64_t i = 0; i < inner; i++)
            x[b * inner + i] = (y[b * inner + i] - st[b * 2 * inner + inner + i]) *
                               expf(-soft_clamp(st[b * 2 * inner + i], clamp));
}

void rt_kernel_affine_coupling_backward(int64_t n, int64_t inner, float clamp, const float *x, const float *st,
                                        const float *dy, float *dx, float *dst) {
    if (n <= 0 || inner <= 0 || !st || !dy || (dst && !x)) return;
    for (int64_t b = 0; b < n; b++)
        for (int64_t i = 0; i < inner; i++) {
            float s_raw = st[b * 2 * inner + i], th = tanhf(s_raw / clamp);
            float scale = expf(clamp * th), gy = dy[b * inner + i];
            if (dx) dx[b * inner + i] = gy * scale;
            if (dst) {
                /* ∂y/∂s_raw = x·scale·(1 - tanh²), ∂y/∂t = 1 */
                dst[b * 2 * inner + i] = gy * x[b * inner + i] * scale * (1.0f - th * th);
                dst[b * 2 * inner + inner + i] = gy;
            }
        }
}

void rt_kernel_affine_coupling_logdet(int64_t n, int64_t inner, float clamp, const float *st, float *ld) {
    if (n <= 0 || !ld || (inner > 0 && !st)) return;
    for (int64_t b = 0; b < n; b++) {
        double sum = 0.0;
        for (int64_t i = 0; i < inner; i++) sum += soft_clamp(st[b * 2 * inner + i], clamp);
        ld[b] = (float)sum;
    }
}
