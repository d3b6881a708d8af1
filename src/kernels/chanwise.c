/* Per-(sample, channel) reductions and affine maps; see chanwise.h. */
#include "kernels/chanwise.h"

#include <string.h>

/* Parallelise only when the work pays for waking the team. */
#define CHAN_PAR_MIN 32768

static int64_t chan_inner(const rt_chan_shape *s) { return s->layout == RT_LAYOUT_BLOCKED ? rt_layout_block() : 1; }

void rt_kernel_chan_sums(const rt_chan_shape *s, const float *a, const float *b, double *s1, double *s2) {
    if (!s || !a || !s1 || s->n <= 0) return; /* NULL: a no-op (vec.h) */
    const int64_t L = chan_inner(s), S = s->spatial, P = s->n * s->c / L, cpp = s->c / L;
    const int par = P * S * L >= CHAN_PAR_MIN;
    if (L == 1) {
#pragma omp parallel for if (par) schedule(static)
        for (int64_t p = 0; p < P; p++) {
            const float *ap = a + p * S, *bp = b ? b + p * S : ap;
            double t1 = 0.0, t2 = 0.0;
#pragma omp simd reduction(+ : t1, t2)
            for (int64_t i = 0; i < S; i++) {
                t1 += (double)ap[i];
                t2 += (double)ap[i] * (double)bp[i];
            }
            s1[p] = t1;
            if (s2) s2[p] = t2;
        }
        return;
    }
#pragma omp parallel for if (par) schedule(static)
    for (int64_t p = 0; p < P; p++) {
        double t1[RT_LAYOUT_BLOCK_MAX] = {0}, t2[RT_LAYOUT_BLOCK_MAX] = {0};
        const float *ap = a + p * S * L, *bp = b ? b + p * S * L : ap;
        for (int64_t i = 0; i < S; i++) {
#pragma omp simd
            for (int64_t l = 0; l < L; l++) {
                t1[l] += (double)ap[i * L + l];
                t2[l] += (double)ap[i * L + l] * (double)bp[i * L + l];
            }
        }
        /* plane p holds channels (p % cpp)*B .. +B of sample p / cpp */
        int64_t base = (p / cpp) * s->c + (p % cpp) * L;
        memcpy(s1 + base, t1, sizeof(double) * (size_t)L);
        if (s2) memcpy(s2 + base, t2, sizeof(double) * (size_t)L);
    }
}

void rt_kernel_chan_affine(const rt_chan_shape *s, const float *a, const float *pa, const float *b,
                           const float *pb, const float *q, float *out) {
    if (!s || !a || !pa || !q || !out || !b != !pb || s->n <= 0) return;
    const int64_t L = chan_inner(s), S = s->spatial, P = s->n * s->c / L, cpp = s->c / L;
    const int par = P * S * L >= CHAN_PAR_MIN;
    if (L == 1) {
#pragma omp parallel for if (par) schedule(static)
        for (int64_t p = 0; p < P; p++) {
            const float *ap = a + p * S;
            float *op = out + p * S;
            const float ka = pa[p], kq = q[p];
            if (b) {
                const float *bp = b + p * S;
                const float kb = pb[p];
#pragma omp simd
                for (int64_t i = 0; i < S; i++) op[i] = ka * ap[i] + kb * bp[i] + kq;
            } else {
#pragma omp simd
                for (int64_t i = 0; i < S; i++) op[i] = ka * ap[i] + kq;
            }
        }
        return;
    }
#pragma omp parallel for if (par) schedule(static)
    for (int64_t p = 0; p < P; p++) {
        int64_t base = (p / cpp) * s->c + (p % cpp) * L;
        float ka[RT_LAYOUT_BLOCK_MAX], kb[RT_LAYOUT_BLOCK_MAX], kq[RT_LAYOUT_BLOCK_MAX];
        for (int64_t l = 0; l < L; l++) {
            ka[l] = pa[base + l];
            kb[l] = b ? pb[base + l] : 0.0f;
            kq[l] = q[base + l];
        }
        const float *ap = a + p * S * L, *bp = b ? b + p * S * L : NULL;
        float *op = out + p * S * L;
        for (int64_t i = 0; i < S; i++) {
            if (bp) {
#pragma omp simd
                for (int64_t l = 0; l < L; l++)
                    op[i * L + l] = ka[l] * ap[i * L + l] + kb[l] * bp[i * L + l] + kq[l];
            } else {
#pragma omp simd
                for (int64_t l = 0; l < L; l++) op[i * L + l] = ka[l] * ap[i * L + l] + kq[l];
            }
        }
    }
}
