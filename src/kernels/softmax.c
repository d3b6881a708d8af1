/* Softmax / log-sum-exp over channels; see softmax.h. */
#include "kernels/softmax.h"

#include <math.h>
#include <stddef.h>

#define SM_TILE 256
#define SM_PAR_MIN 16384

/* Float index of (n, c, s): ((n*C/L + c/L)*S + s)*L + c%L (chanwise.h). */
static inline int64_t sm_off(int64_t n, int64_t c, int64_t s, int64_t C, int64_t S, int64_t L) {
    return ((n * (C / L) + c / L) * S + s) * L + c % L;
}

/* m = max over channels, sum = Σ exp(x - m), optionally storing exp(x - m) in y. */
static void sm_tile_stats(const rt_chan_shape *s, const float *x, float *y, int64_t n, int64_t s0, int64_t len,
                          float *m, float *sum) {
    const int64_t C = s->c, S = s->spatial, L = s->layout == RT_LAYOUT_BLOCKED ? rt_layout_block() : 1;
    for (int64_t i = 0; i < len; i++) {
        m[i] = -INFINITY;
        sum[i] = 0.0f;
    }
    for (int64_t c = 0; c < C; c++) {
        const float *xc = x + sm_off(n, c, s0, C, S, L);
#pragma omp simd
        for (int64_t i = 0; i < len; i++) m[i] = xc[i * L] > m[i] ? xc[i * L] : m[i];
    }
    for (int64_t c = 0; c < C; c++) {
        const int64_t o = sm_off(n, c, s0, C, S, L);
        const float *xc = x + o;
        if (y) {
            float *yc = y + o;
#pragma omp simd
            for (int64_t i = 0; i < len; i++) {
                float e = expf(xc[i * L] - m[i]);
                yc[i * L] = e;
                sum[i] += e;
            }
        } else {
#pragma omp simd
            for (int64_t i = 0; i < len; i++) sum[i] += expf(xc[i * L] - m[i]);
        }
    }
}

typedef enum sm_mode { SM_FORWARD, SM_LSE, SM_BACKWARD } sm_mode;

/* One tile of positions [s0, s0 + len) of sample n. */
static void sm_tile(const rt_chan_shape *s, sm_mode mode, const float *a, const float *b, float *o, int64_t n,
                    int64_t s0, int64_t len) {
    const int64_t C = s->c, S = s->spatial, L = s->layout == RT_LAYOUT_BLOCKED ? rt_layout_block() : 1;
    float m[SM_TILE], sum[SM_TILE];
    if (mode == SM_LSE) {
        sm_tile_stats(s, a, NULL, n, s0, len, m, sum);
        for (int64_t i = 0; i < len; i++) o[n * S + s0 + i] = m[i] + logf(sum[i]);
        return;
    }
    if (mode == SM_FORWARD) {
        sm_tile_stats(s, a, o, n, s0, len, m, sum);
        for (int64_t i = 0; i < len; i++) sum[i] = 1.0f / sum[i];
        for (int64_t c = 0; c < C; c++) {
            float *yc = o + sm_off(n, c, s0, C, S, L);
#pragma omp simd
            for (int64_t i = 0; i < len; i++) yc[i * L] *= sum[i];
        }
        return;
    }
    /* backward: a = y, b = dy, o = dx; sum holds Σ_c y·dy */
    for (int64_t i = 0; i < len; i++) sum[i] = 0.0f;
    for (int64_t c = 0; c < C; c++) {
        const int64_t off = sm_off(n, c, s0, C, S, L);
#pragma omp simd
        for (int64_t i = 0; i < len; i++) sum[i] += a[off + i * L] * b[off + i * L];
    }
    for (int64_t c = 0; c < C; c++) {
        const int64_t off = sm_off(n, c, s0, C, S, L);
#pragma omp simd
        for (int64_t i = 0; i < len; i++) o[off + i * L] = a[off + i * L] * (b[off + i * L] - sum[i]);
    }
}

/* Every (sample, tile) in parallel. */
static void sm_run(const rt_chan_shape *s, sm_mode mode, const float *a, const float *b, float *o) {
    const int64_t S = s->spatial, T = (S + SM_TILE - 1) / SM_TILE;
#pragma omp parallel for collapse(2) if (s->n * s->c * S >= SM_PAR_MIN) schedule(static)
    for (int64_t n = 0; n < s->n; n++)
        for (int64_t t = 0; t < T; t++) {
            const int64_t s0 = t * SM_TILE;
            sm_tile(s, mode, a, b, o, n, s0, S - s0 < SM_TILE ? S - s0 : SM_TILE);
        }
}

void rt_kernel_softmax_channels_forward(const rt_chan_shape *s, const float *x, float *y) {
    if (!s || !x || !y) return; /* NULL: a no-op */
    sm_run(s, SM_FORWARD, x, NULL, y);
}

void rt_kernel_logsumexp_channels(const rt_chan_shape *s, const float *x, float *lse) {
    if (!s || !x || !lse) return;
    sm_run(s, SM_LSE, x, NULL, lse);
}

void rt_kernel_softmax_channels_backward(const rt_chan_shape *s, const float *y, const float *dy, float *dx) {
    if (!s || !y || !dy || !dx) return;
    sm_run(s, SM_BACKWARD, y, dy, dx);
}
