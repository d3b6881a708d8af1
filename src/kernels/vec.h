/* revtorch's own elementwise f32 loops (the parts oneDNN has no single
 * primitive for, or where a primitive call costs more than the loop).
 * Vectorised by the compiler, OpenMP-parallel above a size threshold, with
 * the thread count of rt_set_num_threads. All buffers: n contiguous f32,
 * owned by the caller; `out` may alias an input. n <= 0 does nothing. A
 * NULL buffer makes the call a no-op (nothing is written; the sums return
 * 0 and rt_vec_all_finite returns 0, as nothing can be vouched for, except
 * for n <= 0): one pointer test per call, none per element. */
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
void rt_vec_fill(int64_t n, float value, float *out); /* out[i] = value */

/* Powers, with C's powf semantics (NaN for a negative base and a non-integer
 * exponent, pow(x, 0) = 1 for every x, ±inf for 0 and a negative exponent).
 * p == 2 is computed as x·x (the same correctly rounded value). */
void rt_vec_pow(int64_t n, float p, const float *x, float *out); /* out = x^p */
/* dx = dy · (p · x^(p-1)), PyTorch's order of operations; p == 0 gives
 * dx = 0 everywhere (also where x is NaN or 0), as torch.pow's backward. */
void rt_vec_pow_backward(int64_t n, float p, const float *x, const float *dy, float *dx);

/* Logistic functions, and their gradients from the forward OUTPUT y (so the
 * input need not be kept): tanh' = 1 - y², sigmoid' = y·(1 - y). */
void rt_vec_tanh(int64_t n, const float *x, float *out);                         /* out = tanh(x) */
void rt_vec_tanh_backward(int64_t n, const float *y, const float *dy, float *dx);  /* dx = dy·(1 - y²) */
void rt_vec_sigmoid(int64_t n, const float *x, float *out);                       /* out = 1/(1+e^-x) */
void rt_vec_sigmoid_backward(int64_t n, const float *y, const float *dy, float *dx); /* dx = dy·(1-y)·y */

/* Per-channel moment sums of batch normalisation, serial (no OpenMP: the
 * caller shares channels and images out). Plain: a[0] += Σ_j p[j] (mean
 * NULL) or Σ_j (p[j] − mean[0])² over j < sp. Blocked (block = B channels
 * interleaved, nC(hw){B}c): a[k] += Σ_j p[j·B + k] or Σ_j (p[j·B + k] −
 * mean[k])² for k < B. Accumulated in double; a is owned by the caller.
 * Nothing happens for NULL p or a, sp <= 0 or block < 1. */
void rt_vec_moments_plain(int64_t sp, const float *p, const double *mean, double *a);
void rt_vec_moments_blocked(int64_t sp, int block, const float *p, const double *mean, double *a);
/* The same sums over bf16 values (p holds bf16 bits, each read as the f32
 * it stands for, exactly): a bf16 region's batch-norm input. */
void rt_vec_moments_plain_bf16(int64_t sp, const uint16_t *p, const double *mean, double *a);
void rt_vec_moments_blocked_bf16(int64_t sp, int block, const uint16_t *p, const double *mean, double *a);
/* out = max(a + b, 0), as rt_vec_add_relu, where a and b are each n f32 or
 * (flag set) n bf16 values read exactly; out is f32 and must not alias a
 * bf16 input. OpenMP above the size threshold. A residual sum whose
 * block interior ran in bf16 (models/resblock.c). */
void rt_vec_add_relu_half(int64_t n, const void *a, int a_bf16, const void *b, int b_bf16, float *out);

/* out[i] = bf16(x[i] − mean[i mod block]) for i < n, serial (the caller
 * shares channels and images out, as for the moments): the centring of
 * what batch norm saves in a bf16 region (kernels/norm_loops.h), the
 * difference formed in f32 and rounded to nearest even as rt_dtype_convert
 * rounds (NaN stays NaN), written as bf16 bits. block 1 is a plain
 * channel's run, 8 or 16 the interleaved channels of a blocked one
 * (n a multiple of block). One pass at the CPU's vector width, where
 * centring into f32 and then converting took two (3.5× faster on AVX-512
 * than that at x86-64-v2). Nothing happens for NULL x, mean or out, n <= 0,
 * block < 1 or n not a multiple of block (the loops step in whole blocks). */
void rt_vec_center_bf16(int64_t n, int block, const float *x, const float *mean, uint16_t *out);

/* out[0] += Σ x[i], out[1] += Σ x[i]², out[2] += Σ ±x[i] with the sign of
 * element i the top bit of (base + i)·2654435761 mod 2³² (a fixed ±1
 * projection), all in double: the 3-number fingerprint with which reversible
 * sequences check a rebuilt input (memory/reversible.h). base offsets the
 * signs so a tensor in two parts gets the projection of the whole. Nothing
 * happens for NULL x or out or n <= 0. */
void rt_vec_fingerprint(int64_t n, const float *x, uint32_t base, double out[3]);

/* Scalars kept on the device (a 0-d tensor's one float), so that no caller
 * reads or writes device memory itself:
 *   rt_vec_sum_to:    y[0] = (float)(Σ x / divisor)    (sum, mean)
 *   rt_vec_sumsq_to:  y[0] = (float)(Σ x² / divisor)   (MSE)
 *   rt_vec_fill_from: out[i] = (float)((double)s[0] / divisor), i < n
 *                     (the gradient of a sum or mean, broadcast)
 * Sums as rt_vec_sum / rt_vec_sumsq (f64). NULL y or out, or NULL x or s
 * with n > 0: no-op; n <= 0 writes y[0] = (float)(0 / divisor) (sum_to,
 * sumsq_to; NaN for a divisor of 0, as torch.mean of an empty tensor) or
 * nothing (fill_from). */
void rt_vec_sum_to(int64_t n, const float *x, double divisor, float *y);
void rt_vec_sumsq_to(int64_t n, const float *x, double divisor, float *y);
void rt_vec_fill_from(int64_t n, const float *s, double divisor, float *out);

/* out[0] = Σ (p[i] − q[i])², out[1] = Σ q[i]², in f64 (the true relative
 * error of a rebuilt reversible input, memory/reversible.h). OpenMP above
 * 32768 elements. NULL out, or NULL p or q with n > 0: no-op; n <= 0
 * writes zeros. */
void rt_vec_diff_norms(int64_t n, const float *p, const float *q, double out[2]);

/* out[0] = max_i |p[i] − q[i]| (+inf when a difference is NaN), out[1] =
 * max_i |q[i]|, in f64, serial (rt_compare's test helper). NULL out, or
 * NULL p or q with n > 0: no-op; n <= 0 writes zeros. */
void rt_vec_max_abs_diff(int64_t n, const float *p, const float *q, double out[2]);

/* The index of the first element < 0 (its value in *value), or -1 when
 * there is none (also for NULL x or n <= 0). Serial: a check of loaded
 * weights (a negative running variance). */
int64_t rt_vec_first_negative(int64_t n, const float *x, float *value);

#endif
