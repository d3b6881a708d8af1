/* kernels/vec.h: argument checks, then the loops of the ISA level this
 * process runs at (kernels/cpu.h). This file also compiles the baseline
 * (x86-64-v2) copy of the loops. */
#include "kernels/vec.h"

#include <math.h>

#include "kernels/cpu.h"

#define RT_VEC_TABLE_NAME rt_vec_table_baseline
#include "kernels/vec_loops.h"

static const rt_vec_table *vec_table(void) {
    switch (rt_cpu_level_get()) {
    case RT_CPU_AVX512: return &rt_vec_table_avx512;
    case RT_CPU_AVX2: return &rt_vec_table_avx2;
    case RT_CPU_BASELINE: break;
    }
    return &rt_vec_table_baseline;
}

void rt_vec_add(int64_t n, const float *a, const float *b, float *out) {
    if (a && b && out && n > 0) vec_table()->add(n, a, b, out);
}

void rt_vec_add_relu(int64_t n, const float *a, const float *b, float *out) {
    if (a && b && out && n > 0) vec_table()->add_relu(n, a, b, out);
}

void rt_vec_sub(int64_t n, const float *a, const float *b, float *out) {
    if (a && b && out && n > 0) vec_table()->sub(n, a, b, out);
}

void rt_vec_mul(int64_t n, const float *a, const float *b, float *out) {
    if (a && b && out && n > 0) vec_table()->mul(n, a, b, out);
}

void rt_vec_axpy(int64_t n, float alpha, const float *x, float *y) {
    if (x && y && n > 0) vec_table()->axpy(n, alpha, x, y);
}

void rt_vec_scale(int64_t n, float alpha, const float *x, float *out) {
    if (x && out && n > 0) vec_table()->scale(n, alpha, x, out);
}

double rt_vec_sum(int64_t n, const float *x) {
    return x && n > 0 ? vec_table()->sum(n, x) : 0.0;
}

double rt_vec_sumsq(int64_t n, const float *x) {
    return x && n > 0 ? vec_table()->sumsq(n, x) : 0.0;
}

int rt_vec_all_finite(int64_t n, const float *x) {
    if (n <= 0) return 1;
    return x ? vec_table()->all_finite(n, x) : 0;
}

void rt_vec_fill(int64_t n, float value, float *out) {
    if (out && n > 0) vec_table()->fill(n, value, out);
}

void rt_vec_pow(int64_t n, float p, const float *x, float *out) {
    if (!x || !out || n <= 0) return;
    if (p == 2.0f)
        vec_table()->square(n, x, out);
    else
        vec_table()->pow(n, p, x, out);
}

void rt_vec_pow_backward(int64_t n, float p, const float *x, const float *dy, float *dx) {
    if (!x || !dy || !dx || n <= 0) return;
    if (p == 0.0f)
        vec_table()->fill(n, 0.0f, dx);
    else if (p == 2.0f) /* x^1 is x itself */
        vec_table()->square_backward(n, x, dy, dx);
    else
        vec_table()->pow_backward(n, p, x, dy, dx);
}

void rt_vec_tanh(int64_t n, const float *x, float *out) {
    if (x && out && n > 0) vec_table()->tanh(n, x, out);
}

void rt_vec_tanh_backward(int64_t n, const float *y, const float *dy, float *dx) {
    if (y && dy && dx && n > 0) vec_table()->tanh_backward(n, y, dy, dx);
}

void rt_vec_sigmoid(int64_t n, const float *x, float *out) {
    if (x && out && n > 0) vec_table()->sigmoid(n, x, out);
}

void rt_vec_sigmoid_backward(int64_t n, const float *y, const float *dy, float *dx) {
    if (y && dy && dx && n > 0) vec_table()->sigmoid_backward(n, y, dy, dx);
}

void rt_vec_moments_plain(int64_t sp, const float *p, const double *mean, double *a) {
    if (p && a && sp > 0) vec_table()->moments_plain(sp, p, mean, a);
}

void rt_vec_center_bf16(int64_t n, int block, const float *x, const float *mean, uint16_t *out) {
    if (x && mean && out && n > 0 && block >= 1 && n % block == 0) vec_table()->center_bf16(n, block, x, mean, out);
}

void rt_vec_moments_blocked(int64_t sp, int block, const float *p, const double *mean, double *a) {
    if (p && a && sp > 0 && block >= 1) vec_table()->moments_blocked(sp, block, p, mean, a);
}

void rt_vec_moments_plain_bf16(int64_t sp, const uint16_t *p, const double *mean, double *a) {
    if (p && a && sp > 0) vec_table()->moments_plain_bf16(sp, p, mean, a);
}

void rt_vec_moments_blocked_bf16(int64_t sp, int block, const uint16_t *p, const double *mean, double *a) {
    if (p && a && sp > 0 && block >= 1) vec_table()->moments_blocked_bf16(sp, block, p, mean, a);
}

void rt_vec_add_relu_half(int64_t n, const void *a, int a_bf16, const void *b, int b_bf16, float *out) {
    if (a && b && out && n > 0) vec_table()->add_relu_half(n, a, a_bf16 != 0, b, b_bf16 != 0, out);
}

void rt_vec_fingerprint(int64_t n, const float *x, uint32_t base, double out[3]) {
    if (x && out && n > 0) vec_table()->fingerprint(n, x, base, out);
}

void rt_vec_sum_to(int64_t n, const float *x, double divisor, float *y) {
    if (y && (x || n <= 0)) y[0] = (float)(rt_vec_sum(n, x) / divisor);
}

void rt_vec_sumsq_to(int64_t n, const float *x, double divisor, float *y) {
    if (y && (x || n <= 0)) y[0] = (float)(rt_vec_sumsq(n, x) / divisor);
}

void rt_vec_fill_from(int64_t n, const float *s, double divisor, float *out) {
    if (s && out && n > 0) rt_vec_fill(n, (float)((double)s[0] / divisor), out);
}

/* Compiled for the baseline only, as it was inside the reversible sequence:
 * the simd reduction's order depends on the vector width. */
void rt_vec_diff_norms(int64_t n, const float *p, const float *q, double out[2]) {
    if (!out || (n > 0 && (!p || !q))) return;
    double e = 0.0, r = 0.0;
#pragma omp parallel for simd reduction(+ : e, r) if (n > 32768)
    for (int64_t i = 0; i < n; i++) {
        const double d = (double)p[i] - (double)q[i];
        e += d * d;
        r += (double)q[i] * (double)q[i];
    }
    out[0] = e;
    out[1] = r;
}

void rt_vec_max_abs_diff(int64_t n, const float *p, const float *q, double out[2]) {
    if (!out || (n > 0 && (!p || !q))) return;
    double m = 0.0, r = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)p[i] - q[i]);
        m = d > m || d != d ? (d != d ? INFINITY : d) : m;
        r = fmax(r, fabs(q[i]));
    }
    out[0] = m;
    out[1] = r;
}

int64_t rt_vec_first_negative(int64_t n, const float *x, float *value) {
    if (!x) return -1;
    for (int64_t i = 0; i < n; i++)
        if (x[i] < 0.0f) {
            if (value) *value = x[i];
            return i;
        }
    return -1;
}
