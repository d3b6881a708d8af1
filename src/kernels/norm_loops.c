/* kernels/norm_loops.h: the loops that were inline in ops/batchnorm.c,
 * unchanged, and the centring of what batch norm saves in half precision. */
#include "kernels/norm_loops.h"

#include <math.h>
#include <stdlib.h>

#include "kernels/layout.h"
#include "kernels/vec.h"

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

void rt_kernel_batchnorm_center(const rt_bn_shape *s, const float *x, const float *mean, void *out, rt_dtype dt) {
    if (!s || !x || !mean || !out) return;
    const int64_t n = s->n, c = s->c, sp = s->spatial;
    const int64_t b = s->layout == RT_LAYOUT_BLOCKED ? rt_layout_block() : 1; /* channels innermost per block */
    const int64_t cb = c / b, run = sp * b;
    const size_t es = rt_dtype_size(dt);
    enum { CHUNK = 1024 }; /* a multiple of every block size: each chunk starts at channel 0 of a block */
#pragma omp parallel for collapse(2) schedule(static)
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < cb; j++) {
            const int64_t base = (i * cb + j) * run;
            const float *m = mean + j * b;
            if (dt == RT_BF16) { /* one vectorised pass at the CPU's width (kernels/vec.h) */
                rt_vec_center_bf16(run, (int)b, x + base, m, (uint16_t *)out + base);
                continue;
            }
            float d[CHUNK];
            for (int64_t p = 0; p < run; p += CHUNK) {
                const int64_t len = run - p < CHUNK ? run - p : CHUNK;
                if (b == 1) {
                    const float mj = m[0];
                    for (int64_t q = 0; q < len; q++) d[q] = x[base + p + q] - mj;
                } else {
                    for (int64_t q = 0; q < len; q += b)
                        for (int64_t k = 0; k < b; k++) d[q + k] = x[base + p + q + k] - m[k];
                }
                rt_dtype_store_f32_serial(d, (char *)out + (size_t)(base + p) * es, dt, (size_t)len);
            }
        }
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
