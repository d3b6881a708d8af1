/* The loops of kernels/vec.h, written once and compiled once per ISA level:
 * a translation unit defines RT_VEC_TABLE_NAME (the table it exports) and
 * includes this file; its -march (CMakeLists.txt, by file name) decides the
 * vector width. Every function here is static, so no out-of-line copy built
 * for AVX-512 can be linked into a baseline caller. */
#include "kernels/vec_table.h"

#include <math.h>

#ifndef RT_VEC_TABLE_NAME
#error "define RT_VEC_TABLE_NAME before including kernels/vec_loops.h"
#endif

/* Below this many elements a parallel region costs more than it saves. */
#define RT_VEC_PAR_MIN 32768

static void loop_add(int64_t n, const float *a, const float *b, float *out) {
#pragma omp parallel for simd if (n > RT_VEC_PAR_MIN)
    for (int64_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}

static void loop_add_relu(int64_t n, const float *a, const float *b, float *out) {
#pragma omp parallel for simd if (n > RT_VEC_PAR_MIN)
    for (int64_t i = 0; i < n; i++) {
        float v = a[i] + b[i];
        out[i] = v > 0.0f ? v : 0.0f;
    }
}

static void loop_sub(int64_t n, const float *a, const float *b, float *out) {
#pragma omp parallel for simd if (n > RT_VEC_PAR_MIN)
    for (int64_t i = 0; i < n; i++) out[i] = a[i] - b[i];
}

static void loop_mul(int64_t n, const float *a, const float *b, float *out) {
#pragma omp parallel for simd if (n > RT_VEC_PAR_MIN)
    for (int64_t i = 0; i < n; i++) out[i] = a[i] * b[i];
}

static void loop_axpy(int64_t n, float alpha, const float *x, float *y) {
#pragma omp parallel for simd if (n > RT_VEC_PAR_MIN)
    for (int64_t i = 0; i < n; i++) y[i] += alpha * x[i];
}

static void loop_scale(int64_t n, float alpha, const float *x, float *out) {
#pragma omp parallel for simd if (n > RT_VEC_PAR_MIN)
    for (int64_t i = 0; i < n; i++) out[i] = alpha * x[i];
}

static double loop_sum(int64_t n, const float *x) {
    double s = 0.0;
#pragma omp parallel for reduction(+ : s) if (n > RT_VEC_PAR_MIN)
    for (int64_t i = 0; i < n; i++) s += x[i];
    return s;
}

static double loop_sumsq(int64_t n, const float *x) {
    double s = 0.0;
#pragma omp parallel for reduction(+ : s) if (n > RT_VEC_PAR_MIN)
    for (int64_t i = 0; i < n; i++) s += (double)x[i] * x[i];
    return s;
}

static int loop_all_finite(int64_t n, const float *x) {
    int ok = 1;
#pragma omp parallel for reduction(&& : ok) if (n > RT_VEC_PAR_MIN)
    for (int64_t i = 0; i < n; i++) ok = ok && isfinite(x[i]);
    return ok;
}

static void loop_fill(int64_t n, float value, float *out) {
#pragma omp parallel for simd if (n > RT_VEC_PAR_MIN)
    for (int64_t i = 0; i < n; i++) out[i] = value;
}

static void loop_square(int64_t n, const float *x, float *out) {
#pragma omp parallel for simd if (n > RT_VEC_PAR_MIN)
    for (int64_t i = 0; i < n; i++) out[i] = x[i] * x[i];
}

static void loop_pow(int64_t n, float p, const float *x, float *out) {
#pragma omp parallel for if (n > RT_VEC_PAR_MIN)
    for (int64_t i = 0; i < n; i++) out[i] = powf(x[i], p);
}

static void loop_square_backward(int64_t n, const float *x, const float *dy, float *dx) {
#pragma omp parallel for simd if (n > RT_VEC_PAR_MIN)
    for (int64_t i = 0; i < n; i++) dx[i] = dy[i] * (2.0f * x[i]);
}

static void loop_pow_backward(int64_t n, float p, const float *x, const float *dy, float *dx) {
    const float pm1 = p - 1.0f;
#pragma omp parallel for if (n > RT_VEC_PAR_MIN)
    for (int64_t i = 0; i < n; i++) dx[i] = dy[i] * (p * powf(x[i], pm1));
}

static void loop_tanh(int64_t n, const float *x, float *out) {
#pragma omp parallel for if (n > RT_VEC_PAR_MIN)
    for (int64_t i = 0; i < n; i++) out[i] = tanhf(x[i]);
}

static void loop_tanh_backward(int64_t n, const float *y, const float *dy, float *dx) {
#pragma omp parallel for simd if (n > RT_VEC_PAR_MIN)
    for (int64_t i = 0; i < n; i++) dx[i] = dy[i] * (1.0f - y[i] * y[i]);
}

/* 1/(1 + e^-x) needs no branch: e^-x overflows to +inf for x < -88.7 and the
 * quotient is then exactly 0, as the limit; NaN stays NaN. */
static void loop_sigmoid(int64_t n, const float *x, float *out) {
#pragma omp parallel for if (n > RT_VEC_PAR_MIN)
    for (int64_t i = 0; i < n; i++) out[i] = 1.0f / (1.0f + expf(-x[i]));
}

static void loop_sigmoid_backward(int64_t n, const float *y, const float *dy, float *dx) {
#pragma omp parallel for simd if (n > RT_VEC_PAR_MIN)
    for (int64_t i = 0; i < n; i++) dx[i] = dy[i] * (1.0f - y[i]) * y[i];
}

const rt_vec_table RT_VEC_TABLE_NAME = {
    .add = loop_add,
    .sub = loop_sub,
    .add_relu = loop_add_relu,
    .mul = loop_mul,
    .axpy = loop_axpy,
    .scale = loop_scale,
    .sum = loop_sum,
    .sumsq = loop_sumsq,
    .all_finite = loop_all_finite,
    .fill = loop_fill,
    .square = loop_square,
    .pow = loop_pow,
    .square_backward = loop_square_backward,
    .pow_backward = loop_pow_backward,
    .tanh = loop_tanh,
    .tanh_backward = loop_tanh_backward,
    .sigmoid = loop_sigmoid,
    .sigmoid_backward = loop_sigmoid_backward,
};
