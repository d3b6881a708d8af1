/* kernels/norm_loops.h: the loops that were inline in ops/batchnorm.c,
 * unchanged. */
#include "kernels/norm_loops.h"

#include <math.h>
#include <stdlib.h>

#include "kernels/layout.h"

/* Channel of flat element `idx` in either memory order (core/layout.h). */
static inline int64_t bn_channel(const rt_bn_shape *s, int64_t idx) {
    if (s->layout == RT_LAYOUT_BLOCKED)
        return (idx / (s->spatial * rt_layout_block())) % (s->c / rt_layout_block()) * rt_layout_block() +
               idx % rt_layout_block();
    return (idx / s->spatial) % s->c;
}

rt_status rt_kernel_batchnorm_backward_eval(const rt_bn_shape *s, const float *x, const float *dy, const float *mean,
                                            const float *var, const float *weight, float *dx, float *dweight,
                                            float *dbias) {
    if (!s || (s->n * s->c * s->spatial > 0 && (!x || !dy || !dx)) ||
        (s->c > 0 && (!mean || !var || !weight || !dweight || !dbias)))
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_kernel_batchnorm_backward_eval: the shape or a buffer is NULL");
    const float *xp = x, *g = dy, *wp = weight;
    double *acc = calloc((size_t)(2 * s->c), sizeof *acc); /* Σ dy, Σ dy·x̂ per channel */
    if (!acc) return rt_error_set(RT_ERR_OOM, "out of memory in batch_norm backward");
    int64_t total = s->n * s->c * s->spatial;
    for (int64_t i = 0; i < total; i++) {
        int64_t ch = bn_channel(s, i);
        float inv = 1.0f / sqrtf(var[ch] + s->eps);
        acc[ch] += g[i];
        acc[s->c + ch] += (double)g[i] * (xp[i] - mean[ch]) * inv;
        dx[i] = g[i] * wp[ch] * inv;
    }
    for (int64_t ch = 0; ch < s->c; ch++) {
        dweight[ch] = (float)acc[s->c + ch];
        dbias[ch] = (float)acc[ch];
    }
    free(acc);
    return RT_OK;
}

void rt_kernel_batchnorm_update_running(const rt_bn_shape *s, float momentum, const float *mean, const float *var,
                                        float *running_mean, float *running_var) {
    if (!s || !mean || !var || !running_mean || !running_var) return;
    double count = (double)s->n * (double)s->spatial;
    double unbias = count > 1 ? count / (count - 1) : 1.0;
    float *rm = running_mean, *rv = running_var;
    for (int64_t ch = 0; ch < s->c; ch++) {
        rm[ch] = (1.0f - momentum) * rm[ch] + momentum * mean[ch];
        rv[ch] = (1.0f - momentum) * rv[ch] + momentum * (float)(var[ch] * unbias);
    }
}
