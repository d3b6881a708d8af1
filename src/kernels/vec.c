#include "kernels/vec.h"

#include <math.h>

/* Below this many elements a parallel region costs more than it saves. */
#define RT_VEC_PAR_MIN 32768

void rt_vec_add(int64_t n, const float *a, const float *b, float *out) {
#pragma omp parallel for simd if (n > RT_VEC_PAR_MIN)
    for (int64_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}

void rt_vec_add_relu(int64_t n, const float *a, const float *b, float *out) {
#pragma omp parallel for simd if (n > RT_VEC_PAR_MIN)
    for (int64_t i = 0; i < n; i++) {
        float v = a[i] + b[i];
        out[i] = v > 0.0f ? v : 0.0f;
    }
}

void rt_vec_sub(int64_t n, const float *a, const float *b, float *out) {
#pragma omp parallel for simd if (n > RT_VEC_PAR_MIN)
    for (int64_t i = 0; i < n; i++) out[i] = a[i] - b[i];
}

void rt_vec_mul(int64_t n, const float *a, const float *b, float *out) {
#pragma omp parallel for simd if (n > RT_VEC_PAR_MIN)
    for (int64_t i = 0; i < n; i++) out[i] = a[i] * b[i];
}

void rt_vec_axpy(int64_t n, float alpha, const float *x, float *y) {
#pragma omp parallel for simd if (n > RT_VEC_PAR_MIN)
    for (int64_t i = 0; i < n; i++) y[i] += alpha * x[i];
}

void rt_vec_scale(int64_t n, float alpha, const float *x, float *out) {
#pragma omp parallel for simd if (n > RT_VEC_PAR_MIN)
    for (int64_t i = 0; i < n; i++) out[i] = alpha * x[i];
}

double rt_vec_sum(int64_t n, const float *x) {
    double s = 0.0;
#pragma omp parallel for reduction(+ : s) if (n > RT_VEC_PAR_MIN)
    for (int64_t i = 0; i < n; i++) s += x[i];
    return s;
}

double rt_vec_sumsq(int64_t n, const float *x) {
    double s = 0.0;
#pragma omp parallel for reduction(+ : s) if (n > RT_VEC_PAR_MIN)
    for (int64_t i = 0; i < n; i++) s += (double)x[i] * x[i];
    return s;
}

int rt_vec_all_finite(int64_t n, const float *x) {
    int ok = 1;
#pragma omp parallel for reduction(&& : ok) if (n > RT_VEC_PAR_MIN)
    for (int64_t i = 0; i < n; i++) ok = ok && isfinite(x[i]);
    return ok;
}
