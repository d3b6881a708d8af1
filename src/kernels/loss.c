/* kernels/loss.h: the loops that were inline in ops/loss.c, unchanged. */
#include "kernels/loss.h"

#include <math.h>

#include "kernels/vec.h"

rt_status rt_kernel_cross_entropy_forward(int64_t n, int64_t k, float smoothing, const float *z, const int32_t *t,
                                          float *p, float *y) {
    if (!y || (n * k > 0 && (!z || !t || !p)))
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_kernel_cross_entropy_forward: a buffer is NULL (z, t, p, y)");
    double total = 0.0;
    for (int64_t i = 0; i < n; i++) {
        if (t[i] < 0 || t[i] >= k)
            return rt_error_set(RT_ERR_INVALID_ARG, "cross_entropy: target[%lld] = %d is outside [0, %lld)",
                                (long long)i, t[i], (long long)k);
        const float *zi = z + i * k;
        float m = zi[0];
        for (int64_t j = 1; j < k; j++) m = zi[j] > m ? zi[j] : m;
        double sum = 0.0;
        for (int64_t j = 0; j < k; j++) sum += exp((double)(zi[j] - m));
        double lse = m + log(sum), sum_logp = 0.0;
        for (int64_t j = 0; j < k; j++) {
            p[i * k + j] = (float)exp(zi[j] - lse);
            sum_logp += zi[j] - lse;
        }
        double nll = lse - zi[t[i]];
        total += (1.0 - smoothing) * nll - smoothing * sum_logp / (double)k;
    }
    y[0] = (float)(total / (double)n);
    return RT_OK;
}

void rt_kernel_cross_entropy_backward(int64_t n, int64_t k, float smoothing, const float *p, const int32_t *t,
                                      const float *dy, float *dz) {
    if (n * k <= 0 || !p || !t || !dy || !dz) return;
    float g = dy[0] / (float)n, eps_k = smoothing / (float)k;
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < k; j++) {
            float q = eps_k + (j == t[i] ? 1.0f - smoothing : 0.0f);
            dz[i * k + j] = g * (p[i * k + j] - q);
        }
}

void rt_kernel_mse_backward(int64_t n, float sign, const float *diff, const float *dy, float *dx) {
    if (n <= 0 || !diff || !dy || !dx) return;
    float scale = 2.0f * dy[0] / (float)n;
    rt_vec_scale(n, sign < 0 ? -scale : scale, diff, dx);
}

void rt_kernel_l1_forward(int64_t n, const float *diff, float *y) {
    if (!y || (n > 0 && !diff)) return;
    double s = 0.0;
    for (int64_t i = 0; i < n; i++) s += fabs((double)diff[i]);
    y[0] = n > 0 ? (float)(s / (double)n) : NAN;
}

void rt_kernel_l1_backward(int64_t n, float sign, const float *diff, const float *dy, float *dx) {
    if (n <= 0 || !diff || !dy || !dx) return;
    const float g = (sign < 0 ? -dy[0] : dy[0]) / (float)n;
    for (int64_t i = 0; i < n; i++) dx[i] = diff[i] > 0.0f ? g : diff[i] < 0.0f ? -g : 0.0f;
}
