/* sgemm via OpenBLAS; see blas.h. */
#include "kernels/blas.h"

#include <cblas.h>
#include <limits.h>
#include <string.h>

/* Largest block handed to one cblas call (fits the 32-bit blasint). */
#define RT_GEMM_MAX ((int64_t)INT_MAX)

void rt_kernel_sgemm(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                     const float *a, int64_t lda, const float *b, int64_t ldb, float beta,
                     float *c, int64_t ldc) {
    if (m <= 0 || n <= 0 || !c) return;
    if ((!a || !b) && k > 0 && alpha != 0.0f) return; /* nothing to multiply: leave C alone */
    if (k <= 0 || alpha == 0.0f) { /* C = beta * C, BLAS semantics for beta == 0 */
        for (int64_t i = 0; i < m; i++) {
            float *row = c + i * ldc;
            if (beta == 0.0f) memset(row, 0, sizeof(float) * (size_t)n);
            else if (beta != 1.0f)
                for (int64_t j = 0; j < n; j++) row[j] *= beta;
        }
        return;
    }
    if (lda > RT_GEMM_MAX || ldb > RT_GEMM_MAX || ldc > RT_GEMM_MAX) {
        /* Rows over 8 GiB: beyond cblas; plain loops (never taken in practice). */
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++) {
                double acc = 0.0;
                for (int64_t p = 0; p < k; p++)
                    acc += (double)(trans_a ? a[p * lda + i] : a[i * lda + p]) *
                           (double)(trans_b ? b[j * ldb + p] : b[p * ldb + j]);
                float *cij = c + i * ldc + j;
                *cij = alpha * (float)acc + (beta == 0.0f ? 0.0f : beta * *cij);
            }
        return;
    }
    /* Split along m, n and k so every call fits the 32-bit interface. */
    for (int64_t i0 = 0; i0 < m; i0 += RT_GEMM_MAX) {
        int64_t mb = m - i0 < RT_GEMM_MAX ? m - i0 : RT_GEMM_MAX;
        for (int64_t j0 = 0; j0 < n; j0 += RT_GEMM_MAX) {
            int64_t nb = n - j0 < RT_GEMM_MAX ? n - j0 : RT_GEMM_MAX;
            for (int64_t p0 = 0; p0 < k; p0 += RT_GEMM_MAX) {
                int64_t kb = k - p0 < RT_GEMM_MAX ? k - p0 : RT_GEMM_MAX;
                /* element (i,p) of op(A) lives at a[i*lda+p] or a[p*lda+i] */
                const float *ab = trans_a ? a + p0 * lda + i0 : a + i0 * lda + p0;
                const float *bb = trans_b ? b + j0 * ldb + p0 : b + p0 * ldb + j0;
                cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                            trans_b ? CblasTrans : CblasNoTrans, (int)mb, (int)nb, (int)kb, alpha,
                            ab, (int)lda, bb, (int)ldb, p0 == 0 ? beta : 1.0f,
                            c + i0 * ldc + j0, (int)ldc);
            }
        }
    }
}

void rt_kernel_rows_fill(int64_t rows, int64_t cols, const float *b, float *y) {
    if (!b || !y || rows <= 0 || cols <= 0) return;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j < cols; j++) y[r * cols + j] = b[j];
}

void rt_kernel_rows_sum(int64_t rows, int64_t cols, const float *dy, float *db) {
    if (!dy || !db || rows <= 0 || cols <= 0) return;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j < cols; j++) db[j] += dy[r * cols + j];
}
