/* kernels/optim.h: the loops that were inline in optim/optimizer.c,
 * unchanged (same operations, same OpenMP clauses). */
#include "kernels/optim.h"

#include <math.h>

void rt_kernel_sgd_update(int64_t n, const rt_sgd_coef *c, int first, float *p, const float *g, float *buf) {
    if (!c || !p || !g || n <= 0 || (c->momentum != 0.0f && !buf)) return;
    /* locals, so the loops see loop-invariant scalars (p may not alias c) */
    const float wd = c->weight_decay, mu = c->momentum, damp1 = c->damp1, nlr = c->neg_lr;
    const int nesterov = c->nesterov, decay = wd != 0.0f, fresh = first;
    /* Two loops without data-dependent branches or conditional stores, so
     * they vectorise; the selects keep PyTorch's rule that wd = 0 adds
     * nothing (not 0·p, which would turn an infinite p into NaN). */
    if (mu == 0.0f) {
#pragma omp parallel for simd if (n > RT_OPTIM_PAR_MIN)
        for (int64_t i = 0; i < n; i++) {
            const float d = decay ? g[i] + wd * p[i] : g[i];
            p[i] = p[i] + nlr * d;
        }
        return;
    }
#pragma omp parallel for simd if (n > RT_OPTIM_PAR_MIN)
    for (int64_t i = 0; i < n; i++) {
        const float d = decay ? g[i] + wd * p[i] : g[i];
        const float b = fresh ? d : buf[i] * mu + damp1 * d;
        buf[i] = b;
        p[i] = p[i] + nlr * (nesterov ? d + mu * b : b);
    }
}

void rt_kernel_adamw_update(int64_t n, const rt_adamw_coef *c, float *p, const float *g, float *m, float *v) {
    if (!c || !p || !g || !m || !v || n <= 0) return;
    const float decay = c->decay, beta1 = c->beta1, beta2 = c->beta2;
    const float ob1 = c->one_minus_beta1, ob2 = c->one_minus_beta2;
    const float nstep = c->neg_step, bc2s = c->bc2_sqrt, eps = c->eps;
#pragma omp parallel for simd if (n > RT_OPTIM_PAR_MIN)
    for (int64_t i = 0; i < n; i++) {
        const float gi = g[i];
        const float mi = m[i] * beta1 + ob1 * gi;
        const float vi = v[i] * beta2 + ob2 * gi * gi;
        m[i] = mi;
        v[i] = vi;
        const float denom = sqrtf(vi) / bc2s + eps;
        const float pd = p[i] * decay; /* param.mul_(1 - lr*wd) happens first */
        p[i] = pd + nstep * mi / denom;
    }
}
