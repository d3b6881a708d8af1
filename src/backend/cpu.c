/* The cpu backend: src/kernels as they are. Each oneDNN kernel named here
 * plans (kernels/plan.h: its primitive found in or added to the thread's
 * cache, its TEMP blocks sized) and executes: it allocates the plan's
 * blocks, runs the primitive and frees them before it returns. */
#include "backend/tables.h"
#include "kernels/blas.h"
#include "kernels/eltwise.h"
#include "kernels/layout.h"

const rt_backend rt_backend_cpu = {
    .name = "cpu",
    .device = RT_DEVICE_CPU,
    .memory = &rt_device_memory_cpu,
    .conv_forward = rt_kernel_conv_forward,
    .conv_backward_data = rt_kernel_conv_backward_data,
    .conv_backward_weights = rt_kernel_conv_backward_weights,
    .conv_bf16_available = rt_conv_bf16_available,
    .deconv_forward = rt_kernel_deconv_forward,
    .deconv_backward_data = rt_kernel_deconv_backward_data,
    .deconv_backward_weights = rt_kernel_deconv_backward_weights,
    .maxpool_workspace_bytes = rt_kernel_maxpool_workspace_bytes,
    .maxpool_forward = rt_kernel_maxpool_forward,
    .maxpool_backward = rt_kernel_maxpool_backward,
    .avgpool_forward = rt_kernel_avgpool_forward,
    .avgpool_backward = rt_kernel_avgpool_backward,
    .batchnorm_forward_train = rt_kernel_batchnorm_forward_train,
    .batchnorm_forward_eval = rt_kernel_batchnorm_forward_eval,
    .batchnorm_backward = rt_kernel_batchnorm_backward,
    .batchnorm_relu_workspace_bytes = rt_kernel_batchnorm_relu_workspace_bytes,
    .batchnorm_relu_forward_train = rt_kernel_batchnorm_relu_forward_train,
    .batchnorm_relu_backward = rt_kernel_batchnorm_relu_backward,
    .relu_forward = rt_kernel_relu_forward,
    .relu_backward = rt_kernel_relu_backward,
    .reorder_layout = rt_kernel_reorder_layout,
    .sgemm = rt_kernel_sgemm,
};
