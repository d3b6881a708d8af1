/* revtorch's own elementwise f32 loops (the parts oneDNN has no single
 * primitive for, or where a primitive call costs more than the loop).
 * Vectorised by the compiler, OpenMP-parallel above a size threshold, with
 * the thread count of rt_set_num_threads. All buffers: n contiguous f32,
 * owned by the caller; `out` may alias an input. */
#ifndef RT_KERNELS_VEC_H
#define RT_KERNELS_VEC_H

#include <stdint.h>

void rt_vec_add(int64_t n, const float *a, const float *b, float *out); /* out = a + b */
void rt_vec_sub(int64_t n, const float *a, const float *b, float *out); /* out = a - b */
/* out = max(a + b, 0), one pass (a residual sum and its ReLU) */
void rt_vec_add_relu(int64_t n, const float *a, const float *b, float *out);
void rt_vec_mul(int64_t n, const float *a, const float *b, float *out); /* out = a * b */
void rt_vec_axpy(int64_t n, float alpha, const float *x, float *y);     /* y += alpha * x */
void rt_vec_scale(int64_t n, float alpha, const float *x, float *out);  /* out = alpha * x */
double rt_vec_sum(int64_t n, const float *x);                          /* f64 accumulation */
double rt_vec_sumsq(int64_t n, const float *x);                        /* sum of squares, f64 */
/* 1 when every element is finite, else 0. */
int rt_vec_all_finite(int64_t n, const float *x);

#endif
