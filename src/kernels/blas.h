/* BLAS matrix multiply (OpenBLAS cblas_sgemm), row-major like C arrays and
 * torch.matmul on contiguous tensors. */
#ifndef RT_KERNELS_BLAS_H
#define RT_KERNELS_BLAS_H

#include <stdint.h>

/* C = alpha * op(A) * op(B) + beta * C, all f32 row-major, op(X) = X or X^T
 * (trans_a / trans_b non-zero). op(A) is m x k, op(B) is k x n, C is m x n;
 * lda/ldb/ldc are row strides in elements of the matrices as stored (A is
 * m x k, or k x m when transposed). The caller owns all buffers; C may not
 * alias A or B. As in BLAS, beta == 0 overwrites C without reading it (NaNs
 * in C do not propagate). m, n or k of 0 are valid (k == 0 scales C by
 * beta). Sizes beyond the 32-bit BLAS interface are split into several calls.
 * Cannot fail for valid arguments (no status: callers check shapes first);
 * leading dimensions must be >= the stored row length. No status either
 * for NULL: a NULL c, or a NULL a or b when A·B is needed (k > 0, alpha !=
 * 0), makes the call a no-op that leaves C untouched. */
void rt_kernel_sgemm(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                     const float *a, int64_t lda, const float *b, int64_t ldb, float beta,
                     float *c, int64_t ldc);

/* A linear layer's bias, both ways (f32, row-major rows × cols, serial):
 *   rt_kernel_rows_fill: y[r, j] = b[j]  (y = b before y += x·Wᵀ)
 *   rt_kernel_rows_sum:  db[j] += Σ_r dy[r, j], summed in row order
 * NULL buffers or rows, cols <= 0: no-op. */
void rt_kernel_rows_fill(int64_t rows, int64_t cols, const float *b, float *y);
void rt_kernel_rows_sum(int64_t rows, int64_t cols, const float *dy, float *db);

#endif
