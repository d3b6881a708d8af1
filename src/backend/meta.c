/* The meta backend: accounting only. The oneDNN kernels book their planned
 * temporaries and execute nothing; loops without temporaries do nothing. */
#include "backend/tables.h"
#include "kernels/eltwise.h"
#include "kernels/layout.h"

static void rt_meta_sgemm(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                          const float *a, int64_t lda, const float *b, int64_t ldb, float beta, float *c,
                          int64_t ldc) {
    (void)trans_a, (void)trans_b, (void)m, (void)n, (void)k, (void)alpha, (void)a, (void)lda, (void)b;
    (void)ldb, (void)beta, (void)c, (void)ldc;
}

const rt_backend rt_backend_meta = {
    .name = "meta",
    .device = RT_DEVICE_META,
    .memory = &rt_device_memory_meta,
    .conv_forward = rt_kernel_conv_forward,
    .conv_backward_data = rt_kernel_conv_backward_data,
    .conv_backward_weights = rt_kernel_conv_backward_weights,
    .deconv_forward = rt_kernel_deconv_forward,
    .deconv_backward_data = rt_kernel_deconv_backward_data,
    .deconv_backward_weights = rt_kernel_deconv_backward_weights,
    .maxpool_forward = rt_kernel_maxpool_forward,
    .maxpool_backward = rt_kernel_maxpool_backward,
    .avgpool_forward = rt_kernel_avgpool_forward,
    .avgpool_backward = rt_kernel_avgpool_backward,
    .batchnorm_forward_train = rt_kernel_batchnorm_forward_train,
    .batchnorm_forward_eval = rt_kernel_batchnorm_forward_eval,
    .batchnorm_backward = rt_kernel_batchnorm_backward,
    .batchnorm_relu_forward_train = rt_kernel_batchnorm_relu_forward_train,
    .batchnorm_relu_backward = rt_kernel_batchnorm_relu_backward,
    .relu_forward = rt_kernel_relu_forward,
    .relu_backward = rt_kernel_relu_backward,
    .reorder_layout = rt_kernel_reorder_layout,
    .sgemm = rt_meta_sgemm,
};
