/* kernels/seg_loss.h: the loops that were inline in ops/seg_loss.c,
 * unchanged (same OpenMP clauses and operation order). */
#include "kernels/seg_loss.h"

#include <stdbool.h>

#include "core/mem.h"
#include "kernels/softmax.h"

/* Float index of (n, c, s) in either memory order (kernels/chanwise.h). */
static inline int64_t seg_off(const rt_chan_shape *s, int64_t n, int64_t c, int64_t p) {
    const int64_t L = s->layout == RT_LAYOUT_BLOCKED ? rt_layout_block() : 1;
    return ((n * (s->c / L) + c / L) * s->spatial + p) * L + c % L;
}

int64_t rt_kernel_labels_first_invalid(int64_t n, const int32_t *t, int64_t classes, int32_t *value) {
    if (!t) return -1;
    for (int64_t i = 0; i < n; i++)
        if (t[i] < 0 || t[i] >= classes) {
            if (value) *value = t[i];
            return i;
        }
    return -1;
}

size_t rt_kernel_cross_entropy_nd_temp_bytes(const rt_chan_shape *s) {
    if (!s) return 0;
    const int64_t NS = s->n * s->spatial;
    return (size_t)(NS > 0 ? NS : 1) * sizeof(float);
}

rt_status rt_kernel_cross_entropy_nd_forward(const rt_chan_shape *s, const float *x, const int32_t *t,
                                             const float *w, double *weight_sum, float *y) {
    if (!s || !weight_sum || !y || (s->n * s->spatial > 0 && (!x || !t)))
        return rt_error_set(RT_ERR_INVALID_ARG,
                            "rt_kernel_cross_entropy_nd_forward: the shape or a buffer is NULL (x, t, weight_sum, y)");
    const int64_t NS = s->n * s->spatial;
    const size_t bytes = rt_kernel_cross_entropy_nd_temp_bytes(s);
    float *lse = NULL;
    RT_TRY(rt_mem_alloc(bytes, RT_MEM_TEMP, (void **)&lse));
    rt_kernel_logsumexp_channels(s, x, lse);
    double num = 0.0, den = 0.0;
#pragma omp parallel for reduction(+ : num, den) if (NS >= 32768) schedule(static)
    for (int64_t i = 0; i < NS; i++) {
        const double wi = w ? w[t[i]] : 1.0;
        num += wi * ((double)lse[i] - (double)x[seg_off(s, i / s->spatial, t[i], i % s->spatial)]);
        den += wi;
    }
    rt_mem_free(lse, bytes, RT_MEM_TEMP);
    *weight_sum = den;
    y[0] = (float)(num / den); /* 0/0 = NaN, as PyTorch */
    return RT_OK;
}

void rt_kernel_cross_entropy_nd_backward(const rt_chan_shape *s, const float *x, const int32_t *t,
                                         const float *w, double weight_sum, const float *dy, float *dx) {
    if (!s || !x || !t || !dy || !dx) return;
    float *d = dx;
    const double g = (double)dy[0] / weight_sum;
    rt_kernel_softmax_channels_forward(s, x, d);
#pragma omp parallel for if (s->n * s->c * s->spatial >= 32768) schedule(static)
    for (int64_t i = 0; i < s->n * s->spatial; i++) {
        const int64_t n = i / s->spatial, p = i % s->spatial;
        const float k = (float)(g * (w ? w[t[i]] : 1.0));
        for (int64_t ch = 0; ch < s->c; ch++) d[seg_off(s, n, ch, p)] *= k;
        d[seg_off(s, n, t[i], p)] -= k;
    }
}

void rt_kernel_soft_dice_forward(const rt_chan_shape *s, const float *x, const int32_t *t, double smooth,
                                 int batch_dice, int include_background, double terms, double *sums, float *y) {
    if (!s || !sums || !y || (s->n * s->c * s->spatial > 0 && (!x || !t))) return;
#pragma omp parallel for collapse(2) if (s->n * s->c * s->spatial >= 32768) schedule(static)
    for (int64_t n = 0; n < s->n; n++)
        for (int64_t ch = 0; ch < s->c; ch++) {
            double I = 0.0, P = 0.0, G = 0.0;
            for (int64_t p = 0; p < s->spatial; p++) {
                const double v = x[seg_off(s, n, ch, p)];
                const int hit = t[n * s->spatial + p] == ch;
                P += v;
                I += hit ? v : 0.0;
                G += hit;
            }
            double *o = sums + 3 * (n * s->c + ch);
            o[0] = I;
            o[1] = P;
            o[2] = G;
        }
    if (batch_dice) /* fold the samples into n = 0 */
        for (int64_t n = 1; n < s->n; n++)
            for (int64_t i = 0; i < 3 * s->c; i++) sums[i] += sums[3 * n * s->c + i];
    double total = 0.0;
    for (int64_t n = 0; n < (batch_dice ? 1 : s->n); n++)
        for (int64_t ch = include_background ? 0 : 1; ch < s->c; ch++) {
            const double *v = sums + 3 * (n * s->c + ch);
            total += (2.0 * v[0] + smooth) / (v[1] + v[2] + smooth);
        }
    y[0] = (float)(1.0 - total / terms);
}

void rt_kernel_soft_dice_backward(const rt_chan_shape *s, const int32_t *t, double smooth, int batch_dice,
                                  int include_background, double terms, const double *sums, const float *dy,
                                  float *dx) {
    if (!s || !t || !sums || !dy || !dx) return;
    float *d = dx;
    const double g = -(double)dy[0] / terms;
#pragma omp parallel for collapse(2) if (s->n * s->c * s->spatial >= 32768) schedule(static)
    for (int64_t n = 0; n < s->n; n++)
        for (int64_t ch = 0; ch < s->c; ch++) {
            const double *v = sums + 3 * ((batch_dice ? 0 : n) * s->c + ch);
            const double den = v[1] + v[2] + smooth, num = 2.0 * v[0] + smooth;
            const bool used = include_background || ch > 0;
            /* ∂dice/∂p = (2g·den − num)/den², g ∈ {0, 1} */
            const float k1 = used ? (float)(g * (2.0 * den - num) / (den * den)) : 0.0f;
            const float k0 = used ? (float)(g * -num / (den * den)) : 0.0f;
            for (int64_t p = 0; p < s->spatial; p++) d[seg_off(s, n, ch, p)] = t[n * s->spatial + p] == ch ? k1 : k0;
        }
}
