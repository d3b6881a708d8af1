/* kernels/group_norm.h: the loops that were inline in ops/group_norm.c,
 * unchanged. */
#include "kernels/group_norm.h"

#include <math.h>

#include "core/mem.h"

size_t rt_kernel_group_norm_forward_temp_bytes(const rt_chan_shape *s) {
    if (!s) return 0;
    size_t b = (size_t)(s->n * s->c) * (2 * sizeof(double) + 2 * sizeof(float)) + (size_t)s->c * 2 * sizeof(double);
    return b ? b : 1;
}

size_t rt_kernel_group_norm_backward_temp_bytes(const rt_chan_shape *s) {
    if (!s) return 0;
    size_t b = (size_t)(s->n * s->c) * (2 * sizeof(double) + 3 * sizeof(float));
    return b ? b : 1;
}

rt_status rt_kernel_group_norm_forward(const rt_chan_shape *s, int64_t groups, float eps, const float *x,
                                       const float *weight, const float *bias, const float *mean_in,
                                       const float *var_in, float *run_mean, float *run_var, float momentum,
                                       float *y, float *stats) {
    const int64_t elems = s ? s->n * s->c * s->spatial : 0;
    if (!s || groups < 1 || (elems > 0 && (!x || !y || !stats)) || (s->n * s->c > 0 && !stats))
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_kernel_group_norm_forward: the shape, x, y or stats is NULL "
                            "(or groups < 1)");
    const int64_t N = s->n, C = s->c, S = s->spatial, G = groups;
    const int64_t NC = N * C, cg = C / G;
    const double M = (double)cg * (double)S;
    const size_t bytes = rt_kernel_group_norm_forward_temp_bytes(s);
    void *scratch = NULL;
    RT_TRY(rt_mem_alloc(bytes, RT_MEM_TEMP, &scratch));
    double *s1 = scratch, *s2 = s1 + NC, *acc_mu = s2 + NC, *acc_var = acc_mu + C;
    float *pa = (float *)(acc_var + C), *q = pa + NC;
    for (int64_t k = 0; k < C; k++) acc_mu[k] = acc_var[k] = 0.0;
    float *mean = stats, *rstd = mean + N * G;
    if (mean_in) {
        for (int64_t n = 0; n < N; n++)
            for (int64_t k = 0; k < C; k++) {
                mean[n * C + k] = mean_in[k];
                rstd[n * C + k] = (float)(1.0 / sqrt((double)var_in[k] + (double)eps));
            }
    } else {
        rt_kernel_chan_sums(s, x, NULL, s1, s2);
        for (int64_t n = 0; n < N; n++)
            for (int64_t g = 0; g < G; g++) {
                double t1 = 0.0, t2 = 0.0;
                for (int64_t k = g * cg; k < (g + 1) * cg; k++) {
                    t1 += s1[n * C + k];
                    t2 += s2[n * C + k];
                }
                double mu = t1 / M, var = t2 / M - mu * mu;
                if (var < 0.0) var = 0.0;
                mean[n * G + g] = (float)mu;
                rstd[n * G + g] = (float)(1.0 / sqrt(var + (double)eps));
                if (run_mean) { /* instance norm: G == C, g is the channel */
                    acc_mu[g] += mu / (double)N;
                    acc_var[g] += var * (double)S / (double)(S - 1) / (double)N;
                }
            }
    }
    for (int64_t n = 0; n < N; n++)
        for (int64_t k = 0; k < C; k++) {
            const int64_t g = k / cg;
            double gk = weight ? weight[k] : 1.0, bk = bias ? bias[k] : 0.0;
            pa[n * C + k] = (float)(gk * rstd[n * G + g]);
            q[n * C + k] = (float)(bk - gk * rstd[n * G + g] * mean[n * G + g]);
        }
    rt_kernel_chan_affine(s, x, pa, NULL, NULL, q, y);
    /* running = (1 − m)·running + m·(batch mean of the instance statistics), PyTorch's instance_norm */
    if (run_mean && run_var && !mean_in && N > 0) {
        for (int64_t k = 0; k < C; k++) {
            run_mean[k] = (float)((1.0 - momentum) * run_mean[k] + momentum * acc_mu[k]);
            run_var[k] = (float)((1.0 - momentum) * run_var[k] + momentum * acc_var[k]);
        }
    }
    rt_mem_free(scratch, bytes, RT_MEM_TEMP);
    return RT_OK;
}

rt_status rt_kernel_group_norm_backward(const rt_chan_shape *s, int64_t groups, int input_stats, const float *x,
                                        const float *stats, const float *gamma, const float *dy, float *dx,
                                        float *dw, float *db) {
    const int64_t elems = s ? s->n * s->c * s->spatial : 0;
    if (!s || groups < 1 || (elems > 0 && (!x || !dy)) || (s->n * s->c > 0 && !stats))
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_kernel_group_norm_backward: the shape, x, dy or stats is NULL "
                            "(or groups < 1)");
    const int64_t N = s->n, C = s->c, G = groups, cg = C / G, NC = N * C;
    const double M = (double)cg * (double)s->spatial;
    const float *gp = gamma;
    const size_t bytes = rt_kernel_group_norm_backward_temp_bytes(s);
    void *scratch = NULL;
    RT_TRY(rt_mem_alloc(bytes, RT_MEM_TEMP, &scratch));
    double *A = scratch, *B = A + NC;
    float *pa = (float *)(B + NC), *pb = pa + NC, *q = pb + NC;
    const float *mean = stats, *rstd = mean + N * G;
    rt_kernel_chan_sums(s, dy, x, A, B);
    for (int64_t n = 0; n < N; n++)
        for (int64_t g = 0; g < G; g++) {
            const double mu = mean[n * G + g], rs = rstd[n * G + g];
            double sA = 0.0, sB = 0.0;
            for (int64_t k = g * cg; k < (g + 1) * cg; k++) {
                double gk = gp ? gp[k] : 1.0;
                sA += gk * A[n * C + k];
                sB += gk * B[n * C + k];
            }
            /* dx = rs·(γ·dy − m1 − x̂·m2), m1 = mean of γ·dy, m2 = mean of γ·dy·x̂ */
            double m1 = input_stats ? sA / M : 0.0;
            double m2 = input_stats ? (sB - mu * sA) * rs / M : 0.0;
            for (int64_t k = g * cg; k < (g + 1) * cg; k++) {
                double gk = gp ? gp[k] : 1.0;
                pa[n * C + k] = (float)(gk * rs);
                pb[n * C + k] = (float)(-rs * rs * m2);
                q[n * C + k] = (float)(rs * (mu * rs * m2 - m1));
            }
        }
    if (dx) rt_kernel_chan_affine(s, dy, pa, x, pb, q, dx);
    for (int64_t k = 0; k < C && (dw || db); k++) {
        double sw = 0.0, sb = 0.0;
        for (int64_t n = 0; n < N; n++) {
            const int64_t g = k / cg;
            sw += (B[n * C + k] - mean[n * G + g] * A[n * C + k]) * rstd[n * G + g];
            sb += A[n * C + k];
        }
        if (dw) dw[k] = (float)sw;
        if (db) db[k] = (float)sb;
    }
    rt_mem_free(scratch, bytes, RT_MEM_TEMP);
    return RT_OK;
}
