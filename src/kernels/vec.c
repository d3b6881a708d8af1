#include "kernels/vec.h"

#include <math.h>

/* Below this many elements a parallel region costs more than it saves. */
#define RT_VEC_PAR_MIN 32768

void rt_vec_add(int64_t n, const float *a, const float *b, float *out) {
    if (!a || !b || !out) return;
#pragma omp parallel for simd if (n > RT_VEC_PAR_MIN)
    for (int64_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}

void rt_vec_add_relu(int64_t n, const float *a, const float *b, float *out) {
    if (!a || !b || !out) return;
#pragma omp parallel for simd if (n > RT_VEC_PAR_MIN)
    for (int64_t i = 0; i < n; i++) {
        float v = a[i] + b[i];
        out[i] = v > 0.0f ? v : 0.0f;
    }
}

void rt_vec_sub(int64_t n, const float *a, const float *b, float *out) {
    if (!a || !b || !out) return;
#pragma omp parallel for simd if (n > RT_VEC_PAR_MIN)
    for (int64_t i = 0; i < n; i++) out[i] = a[i] - b[i];
}

void rt_vec_mul(int64_t n, const float *a, const float *b, float *out) {
    if (!a || !b || !out) return;
#pragma omp parallel for simd if (n > RT_VEC_PAR_MIN)
    for (int64_t i = 0; i < n; i++) out[i] = a[i] * b[i];
}

void rt_vec_axpy(int64_t n, float alpha, const float *x, float *y) {
    if (!x || !y) return;
#pragma omp parallel for simd if (n > RT_VEC_PAR_MIN)
    for (int64_t i = 0; i < n; i++) y[i] += alpha * x[i];
}

void rt_vec_scale(int64_t n, float alpha, const float *x, float *out) {
    if (!x || !out) return;
#pragma omp parallel for simd if (n > RT_VEC_PAR_MIN)
    for (int64_t i = 0; i < n; i++) out[i] = alpha * x[i];
}

double rt_vec_sum(int64_t n, const float *x) {
    if (!x) return 0.0;
    double s = 0.0;
#pragma omp parallel for reduction(+ : s) if (n > RT_VEC_PAR_MIN)
    for (int64_t i = 0; i < n; i++) s += x[i];
    return s;
}

double rt_vec_sumsq(int64_t n, const float *x) {
    if (!x) return 0.0;
    double s = 0.0;
#pragma omp parallel for reduction(+ : s) if (n > RT_VEC_PAR_MIN)
    for (int64_t i = 0; i < n; i++) s += (double)x[i] * x[i];
    return s;
}

int rt_vec_all_finite(int64_t n, const float *x) {
    if (!x) return n <= 0;
    int ok = 1;
#pragma omp parallel for reduction(&& : ok) if (n > RT_VEC_PAR_MIN)
    for (int64_t i = 0; i < n; i++) ok = ok && isfinite(x[i]);
    return ok;
}

void rt_vec_fill(int64_t n, float value, float *out) {
    if (!out) return;
#pragma omp parallel for simd if (n > RT_VEC_PAR_MIN)
    for (int64_t i = 0; i < n; i++) out[i] = value;
}

void rt_vec_pow(int64_t n, float p, const float *x, float *out) {
    if (!x || !out) return;
    if (p == 2.0f) {
#pragma omp parallel for simd if (n > RT_VEC_PAR_MIN)
        for (int64_t i = 0; i < n; i++) out[i] = x[i] * x[i];
        return;
    }
#pragma omp parallel for if (n > RT_VEC_PAR_MIN)
    for (int64_t i = 0; i < n; i++) out[i] = powf(x[i], p);
}

void rt_vec_pow_backward(int64_t n, float p, const float *x, const float *dy, float *dx) {
    if (!x || !dy || !dx) return;
    if (p == 0.0f) {
        rt_vec_fill(n, 0.0f, dx);
        return;
    }
    if (p == 2.0f) { /* x^1 is x itself */
#pragma omp parallel for simd if (n > RT_VEC_PAR_MIN)
        for (int64_t i = 0; i < n; i++) dx[i] = dy[i] * (2.0f * x[i]);
        return;
    }
    const float pm1 = p - 1.0f;
#pragma omp parallel for if (n > RT_VEC_PAR_MIN)
    for (int64_t i = 0; i < n; i++) dx[i] = dy[i] * (p * powf(x[i], pm1));
}

void rt_vec_tanh(int64_t n, const float *x, float *out) {
    if (!x || !out) return;
#pragma omp parallel for if (n > RT_VEC_PAR_MIN)
    for (int64_t i = 0; i < n; i++) out[i] = tanhf(x[i]);
}

void rt_vec_tanh_backward(int64_t n, const float *y, const float *dy, float *dx) {
    if (!y || !dy || !dx) return;
#pragma omp parallel for simd if (n > RT_VEC_PAR_MIN)
    for (int64_t i = 0; i < n; i++) dx[i] = dy[i] * (1.0f - y[i] * y[i]);
}

/* 1/(1 + e^-x) needs no branch: e^-x overflows to +inf for x < -88.7 and the
 * quotient is then exactly 0, as the limit; NaN stays NaN. */
void rt_vec_sigmoid(int64_t n, const float *x, float *out) {
    if (!x || !out) return;
#pragma omp parallel for if (n > RT_VEC_PAR_MIN)
    for (int64_t i = 0; i < n; i++) out[i] = 1.0f / (1.0f + expf(-x[i]));
}

void rt_vec_sigmoid_backward(int64_t n, const float *y, const float *dy, float *dx) {
    if (!y || !dy || !dx) return;
#pragma omp parallel for simd if (n > RT_VEC_PAR_MIN)
    for (int64_t i = 0; i < n; i++) dx[i] = dy[i] * (1.0f - y[i]) * y[i];
}
