/* The per-ISA implementations behind kernels/vec.h (internal to kernels/).
 * vec_loops.h holds each loop once; vec.c (baseline), vec_avx2.c and
 * vec_avx512.c compile it at their level and each defines one table; vec.c
 * picks the table of rt_cpu_level_get() on every call. Arguments are checked
 * by the vec.h wrappers, so the loops assume valid pointers. */
#ifndef RT_KERNELS_VEC_TABLE_H
#define RT_KERNELS_VEC_TABLE_H

#include <stdint.h>

typedef struct rt_vec_table {
    void (*add)(int64_t n, const float *a, const float *b, float *out);
    void (*sub)(int64_t n, const float *a, const float *b, float *out);
    void (*add_relu)(int64_t n, const float *a, const float *b, float *out);
    void (*mul)(int64_t n, const float *a, const float *b, float *out);
    void (*axpy)(int64_t n, float alpha, const float *x, float *y);
    void (*scale)(int64_t n, float alpha, const float *x, float *out);
    double (*sum)(int64_t n, const float *x);
    double (*sumsq)(int64_t n, const float *x);
    int (*all_finite)(int64_t n, const float *x);
    void (*fill)(int64_t n, float value, float *out);
    void (*square)(int64_t n, const float *x, float *out);
    void (*pow)(int64_t n, float p, const float *x, float *out);
    void (*square_backward)(int64_t n, const float *x, const float *dy, float *dx);
    void (*pow_backward)(int64_t n, float p, const float *x, const float *dy, float *dx);
    void (*tanh)(int64_t n, const float *x, float *out);
    void (*tanh_backward)(int64_t n, const float *y, const float *dy, float *dx);
    void (*sigmoid)(int64_t n, const float *x, float *out);
    void (*sigmoid_backward)(int64_t n, const float *y, const float *dy, float *dx);
    void (*moments_plain)(int64_t sp, const float *p, const double *mean, double *a);
    void (*moments_blocked)(int64_t sp, int block, const float *p, const double *mean, double *a);
    void (*fingerprint)(int64_t n, const float *x, uint32_t base, double *out);
    void (*center_bf16)(int64_t n, int block, const float *x, const float *mean, uint16_t *out);
    void (*moments_plain_bf16)(int64_t sp, const uint16_t *p, const double *mean, double *a);
    void (*moments_blocked_bf16)(int64_t sp, int block, const uint16_t *p, const double *mean, double *a);
    void (*add_relu_half)(int64_t n, const void *a, int a_bf16, const void *b, int b_bf16, float *out);
} rt_vec_table;

extern const rt_vec_table rt_vec_table_baseline; /* vec.c, x86-64-v2 */
extern const rt_vec_table rt_vec_table_avx2;     /* vec_avx2.c, x86-64-v3 */
extern const rt_vec_table rt_vec_table_avx512;   /* vec_avx512.c, x86-64-v4 */

#endif
