/* Per-(sample, channel) reductions and affine maps; see chanwise.h. */
#include "kernels/chanwise.h"

#include <string.h>

/* Parallelise only when the work pays for waking the team. */
#define CHAN_PAR_MIN 32768

static int64_t chan_inner(const rt_chan_shape *s) { return s->layout == RT_LAYOUT_BLOCKED ? rt_layout_block() : 1; }

/* Channels-last sums: per sample, channels in groups of at most CL_CH, the
 * positions in CL_CHUNKS fixed ranges (one per parallel iteration, partial
 * sums on the stack), then the ranges added in order. */
#define CL_CH 32
#define CL_CHUNKS 32
static void chan_sums_cl(const rt_chan_shape *s, const float *a, const float *b, double *s1, double *s2) {
    const int64_t C = s->c, S = s->spatial;
    const int par = S * C >= CHAN_PAR_MIN;
    for (int64_t n = 0; n < s->n; n++)
        for (int64_t c0 = 0; c0 < C; c0 += CL_CH) {
            const int64_t cw = C - c0 < CL_CH ? C - c0 : CL_CH;
            double p1[CL_CHUNKS][CL_CH], p2[CL_CHUNKS][CL_CH];
#pragma omp parallel for if (par) schedule(static)
            for (int k = 0; k < CL_CHUNKS; k++) {
                double t1[CL_CH] = {0}, t2[CL_CH] = {0};
                const int64_t lo = S * k / CL_CHUNKS, hi = S * (k + 1) / CL_CHUNKS;
                for (int64_t i = lo; i < hi; i++) {
                    const float *ap = a + (n * S + i) * C + c0, *bp = b ? b + (n * S + i) * C + c0 : ap;
#pragma omp simd
                    for (int64_t l = 0; l < cw; l++) {
                        t1[l] += (double)ap[l];
                        t2[l] += (double)ap[l] * (double)bp[l];
                    }
                }
                memcpy(p1[k], t1, sizeof t1);
                memcpy(p2[k], t2, sizeof t2);
            }
            for (int64_t l = 0; l < cw; l++) {
                double t1 = 0.0, t2 = 0.0;
                for (int k = 0; k < CL_CHUNKS; k++) {
                    t1 += p1[k][l];
                    t2 += p2[k][l];
                }
                s1[n * C + c0 + l] = t1;
                if (s2) s2[n * C + c0 + l] = t2;
            }
        }
}

/* Channels-last affine map: parallel over positions, the sample's per-channel
 * factors read from the (n, c) vectors. */
static void chan_affine_cl(const rt_chan_shape *s, const float *a, const float *pa, const float *b,
                           const float *pb, const float *q, float *out) {
    const int64_t C = s->c, S = s->spatial;
    const int par = S * C >= CHAN_PAR_MIN;
    for (int64_t n = 0; n < s->n; n++) {
        const float *ka = pa + n * C, *kq = q + n * C, *kb = b ? pb + n * C : NULL;
#pragma omp parallel for if (par) schedule(static)
        for (int64_t i = 0; i < S; i++) {
            const float *ap = a + (n * S + i) * C;
            float *op = out + (n * S + i) * C;
            if (b) {
                const float *bp = b + (n * S + i) * C;
#pragma omp simd
                for (int64_t l = 0; l < C; l++) op[l] = ka[l] * ap[l] + kb[l] * bp[l] + kq[l];
            } else {
#pragma omp simd
                for (int64_t l = 0; l < C; l++) op[l] = ka[l] * ap[l] + kq[l];
            }
        }
    }
}

void rt_kernel_chan_sums(const rt_chan_shape *s, const float *a, const float *b, double *s1, double *s2) {
    if (!s || !a || !s1 || s->n <= 0) return; /* NULL: a no-op (vec.h) */
    if (s->layout == RT_LAYOUT_CHANNELS_LAST) {
        chan_sums_cl(s, a, b, s1, s2);
        return;
    }
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
    if (s->layout == RT_LAYOUT_CHANNELS_LAST) {
        chan_affine_cl(s, a, pa, b, pb, q, out);
        return;
    }
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
