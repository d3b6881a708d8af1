/* The loops of kernels/vec.h, written once and compiled once per ISA level:
 * a translation unit defines RT_VEC_TABLE_NAME (the table it exports) and
 * includes this file; its -march (CMakeLists.txt, by file name) decides the
 * vector width. Every function here is static, so no out-of-line copy built
 * for AVX-512 can be linked into a baseline caller. */
#include "kernels/vec_table.h"

#include <math.h>
#include <string.h>

#include "core/dtype.h"

#ifndef RT_VEC_TABLE_NAME
#error "define RT_VEC_TABLE_NAME before including kernels/vec_loops.h"
#endif

/* The f32 a bf16 value (its bits) stands for, exactly (core/dtype.h's
 * rt_bf16_to_f32, inline here so the loops over it vectorise). */
static inline float bf16_bits_to_f32(uint16_t x) {
    const uint32_t u = (uint32_t)x << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

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

/* Sums of x, of x² and of ±x with signs from a 32-bit multiplicative hash
 * of (base + i): the reversible sequences' rebuild fingerprint. A 32-bit
 * hash vectorises where a 64-bit multiply would not on AVX2. */
static void loop_fingerprint(int64_t n, const float *x, uint32_t base, double *out) {
    double s = 0.0, q = 0.0, r = 0.0;
#pragma omp parallel for simd reduction(+ : s, q, r) if (n > RT_VEC_PAR_MIN)
    for (int64_t i = 0; i < n; i++) {
        const double v = x[i];
        const uint32_t h = (base + (uint32_t)i) * 2654435761u;
        s += v;
        q += v * v;
        r += (h >> 31) ? -v : v;
    }
    out[0] += s;
    out[1] += q;
    out[2] += r;
}

/* Batch-norm moments (kernels/norm.c), serial: the caller parallelises over
 * channels and images. Plain: a[0] += sum of p[j] (mean NULL) or of
 * (p[j] - mean[0])^2 over j < sp. Blocked: sp positions of B interleaved
 * channels; a[k] += the sums of channel k. Inlined with B = 8 and B = 16 so
 * the inner loop has a constant trip count; doubles accumulate, so with
 * AVX-512 a block of 16 is two registers, where x86-64-v2 spills (this loop
 * alone took 9% of a resnet20 step at the baseline). */
static void loop_moments_plain(int64_t sp, const float *p, const double *mean, double *a) {
    const double mu = mean ? mean[0] : 0.0;
    double t = 0.0;
    if (mean) {
#pragma omp simd reduction(+ : t)
        for (int64_t j = 0; j < sp; j++) t += ((double)p[j] - mu) * ((double)p[j] - mu);
    } else {
#pragma omp simd reduction(+ : t)
        for (int64_t j = 0; j < sp; j++) t += p[j];
    }
    a[0] += t;
}

/* Eight channels of a block, as GCC/Clang vector types so the accumulators
 * stay in registers (written as arrays, GCC kept them on the stack and the
 * loop ran at store-forwarding speed); each ISA level splits them into its
 * own register width. */
typedef float rt_v8f __attribute__((vector_size(32), aligned(4)));
typedef double rt_v8d __attribute__((vector_size(64)));

/* Eight bf16 values (their bits) as eight floats: each the f32 word with
 * the bf16 bits on top, exact. */
typedef uint16_t rt_v8h __attribute__((vector_size(16), aligned(2)));
typedef uint32_t rt_v8u __attribute__((vector_size(32)));

/* Eight values of a block into *f, f32 or (bf16, a constant at each
 * inlined call) widened from bf16. Through a pointer: a 32-byte vector
 * returned by value changes the ABI at x86-64-v2. */
static inline __attribute__((always_inline)) void moments_load8(rt_v8f *f, const void *p, int64_t at, int bf16) {
    if (bf16) {
        const rt_v8u u = __builtin_convertvector(*(const rt_v8h *)((const uint16_t *)p + at), rt_v8u) << 16;
        memcpy(f, &u, sizeof *f);
    } else {
        *f = *(const rt_v8f *)((const float *)p + at);
    }
}

static inline __attribute__((always_inline)) void moments_block(int64_t sp, int B, const void *p, int bf16,
                                                                const double *mk, double *a) {
    const int h = B / 8; /* 1 or 2 vectors of 8 channels */
    rt_v8d t[2] = {{0}, {0}}, m[2] = {{0}, {0}};
    if (mk)
        for (int v = 0; v < h; v++)
            for (int k = 0; k < 8; k++) m[v][k] = mk[8 * v + k];
    if (mk) {
        for (int64_t j = 0; j < sp; j++)
            for (int v = 0; v < h; v++) {
                rt_v8f f;
                moments_load8(&f, p, j * B + 8 * v, bf16);
                const rt_v8d d = __builtin_convertvector(f, rt_v8d) - m[v];
                t[v] += d * d;
            }
    } else {
        for (int64_t j = 0; j < sp; j++)
            for (int v = 0; v < h; v++) {
                rt_v8f f;
                moments_load8(&f, p, j * B + 8 * v, bf16);
                t[v] += __builtin_convertvector(f, rt_v8d);
            }
    }
    for (int v = 0; v < h; v++)
        for (int k = 0; k < 8; k++) a[8 * v + k] += t[v][k];
}

/* Blocked moments of f32 or (bf16, a constant at each inlined call) bf16
 * values: B = 8 and 16 through moments_block, any other B one channel at a
 * time. */
static inline __attribute__((always_inline)) void moments_blocked_typed(int64_t sp, int B, const void *p, int bf16,
                                                                        const double *mean, double *a) {
    if (B == 16)
        moments_block(sp, 16, p, bf16, mean, a);
    else if (B == 8)
        moments_block(sp, 8, p, bf16, mean, a);
    else
        for (int k = 0; k < B; k++) {
            double t = 0.0;
            for (int64_t j = 0; j < sp; j++) {
                const double v = bf16 ? bf16_bits_to_f32(((const uint16_t *)p)[j * B + k]) : ((const float *)p)[j * B + k];
                t += mean ? (v - mean[k]) * (v - mean[k]) : v;
            }
            a[k] += t;
        }
}

static void loop_moments_blocked(int64_t sp, int B, const float *p, const double *mean, double *a) {
    moments_blocked_typed(sp, B, p, 0, mean, a);
}

/* The moments of bf16 values (a bf16 region's batch-norm input), as the f32
 * loops above compute them from the values the bits stand for. */
static void loop_moments_plain_bf16(int64_t sp, const uint16_t *p, const double *mean, double *a) {
    const double mu = mean ? mean[0] : 0.0;
    double t = 0.0;
    if (mean) {
#pragma omp simd reduction(+ : t)
        for (int64_t j = 0; j < sp; j++) {
            const double v = (double)bf16_bits_to_f32(p[j]) - mu;
            t += v * v;
        }
    } else {
#pragma omp simd reduction(+ : t)
        for (int64_t j = 0; j < sp; j++) t += bf16_bits_to_f32(p[j]);
    }
    a[0] += t;
}

static void loop_moments_blocked_bf16(int64_t sp, int B, const uint16_t *p, const double *mean, double *a) {
    moments_blocked_typed(sp, B, p, 1, mean, a);
}

/* out = max(a + b, 0) in f32 where a and b are each f32 or bf16: a
 * residual sum of a bf16 block interior and an f32 (or bf16) shortcut. One
 * loop per combination, each with its loads spelled out: OpenMP outlines
 * the loop body before inlining could fold a type flag into it, and a
 * flag tested per element kept the loop scalar (3× slower). */
#define RT_ADD_RELU_LOOP(LOAD_A, LOAD_B)                                                                          \
    _Pragma("omp parallel for simd if (n > RT_VEC_PAR_MIN)") for (int64_t i = 0; i < n; i++) {                  \
        const float v = (LOAD_A) + (LOAD_B);                                                                    \
        out[i] = v > 0.0f ? v : 0.0f;                                                                           \
    }

static void loop_add_relu_half(int64_t n, const void *a, int a_bf16, const void *b, int b_bf16, float *out) {
    const uint16_t *ah = a, *bh = b;
    const float *af = a, *bf = b;
    if (a_bf16 && b_bf16) {
        RT_ADD_RELU_LOOP(bf16_bits_to_f32(ah[i]), bf16_bits_to_f32(bh[i]))
    } else if (a_bf16) {
        RT_ADD_RELU_LOOP(bf16_bits_to_f32(ah[i]), bf[i])
    } else if (b_bf16) {
        RT_ADD_RELU_LOOP(af[i], bf16_bits_to_f32(bh[i]))
    } else {
        RT_ADD_RELU_LOOP(af[i], bf[i])
    }
}
#undef RT_ADD_RELU_LOOP

/* The bf16 bits of x − m, rounded as rt_dtype_convert rounds. */
static inline uint16_t center_bf16_one(float x, float m) {
    const float d = x - m;
    uint32_t u;
    memcpy(&u, &d, 4);
    return (uint16_t)(rt_bf16_round_bits(u) >> 16);
}

/* One block of B interleaved channels per step; B a constant, so the inner
 * loop is one vector (16 lanes at AVX-512) against the means in a register. */
static inline void center_bf16_block(int64_t n, int B, const float *x, const float *m, uint16_t *out) {
    for (int64_t q = 0; q < n; q += B) {
#pragma omp simd
        for (int k = 0; k < B; k++) out[q + k] = center_bf16_one(x[q + k], m[k]);
    }
}

static void loop_center_bf16(int64_t n, int B, const float *x, const float *m, uint16_t *out) {
    if (B == 16) {
        center_bf16_block(n, 16, x, m, out);
    } else if (B == 8) {
        center_bf16_block(n, 8, x, m, out);
    } else if (B == 1) {
        const float m0 = m[0];
#pragma omp simd
        for (int64_t i = 0; i < n; i++) out[i] = center_bf16_one(x[i], m0);
    } else {
        for (int64_t i = 0; i < n; i++) out[i] = center_bf16_one(x[i], m[i % B]);
    }
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
    .moments_plain = loop_moments_plain,
    .moments_blocked = loop_moments_blocked,
    .fingerprint = loop_fingerprint,
    .center_bf16 = loop_center_bf16,
    .moments_plain_bf16 = loop_moments_plain_bf16,
    .moments_blocked_bf16 = loop_moments_blocked_bf16,
    .add_relu_half = loop_add_relu_half,
};
