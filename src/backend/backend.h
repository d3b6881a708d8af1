/* Backends: one table of memory and compute entries per device.
 *
 * Every op, optimizer and memory strategy reaches a device's code only
 * through the table of its tensors' device, rt_backend_of(t) (or
 * rt_backend_get(device)); nothing above this layer tests for meta or
 * calls a kernel directly. Adding a device is a new table here (and its
 * memory table in core/device.h); docs/design.md "Backends" lists what a
 * CUDA backend fills in, entry by entry.
 *
 *   cpu   (backend/cpu.c)  the oneDNN 2.6 primitives, OpenBLAS sgemm and
 *                          revtorch's own OpenMP loops of src/kernels. Each
 *                          oneDNN entry plans (kernels/plan.h: the primitive
 *                          created or found in the cache) and executes.
 *   meta  (backend/meta.c) an accounting backend: each oneDNN kernel is
 *                          *planned* (its primitive created or found in the
 *                          cache, which tells its scratchpad, workspace and
 *                          reorder bytes) and the plan's RT_MEM_TEMP bytes
 *                          booked and released at the moments the cpu
 *                          entry allocates and frees them; nothing executes.
 *                          Loops that allocate no temporaries do nothing.
 *                          A meta step's per-category peaks therefore equal
 *                          the real step's (tests/test_predict.c,
 *                          tests/test_memory.c; per kernel
 *                          tests/test_kernels.c).
 *
 * Each entry has the contract of the src/kernels function of the same name
 * (shapes, dtypes, layouts, errors are documented there); on meta every data
 * pointer is NULL (rt_tensor_f32 of a meta tensor) and only the shape
 * arguments are read, so meta plans the variant the ops call (listed in
 * backend/meta.c: db when the shape has a bias, affine batch norm with both
 * parameter gradients, max pooling with its workspace). Entries returning
 * void cannot fail for valid arguments. The tables are static constants:
 * no state, usable from any thread. */
#ifndef RT_BACKEND_BACKEND_H
#define RT_BACKEND_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/device.h"
#include "core/tensor.h"
#include "kernels/conv.h"
#include "kernels/deconv.h"
#include "kernels/norm.h"
#include "kernels/pool.h"

typedef struct rt_backend {
    const char *name; /* "cpu", "meta" */
    rt_device device;
    /* allocate, free, copy: the device's memory table */
    const rt_device_memory *memory;

    /* ---- convolution (kernels/conv.h, kernels/deconv.h) ---- */
    rt_status (*conv_forward)(const rt_conv_shape *s, const float *x, const float *w, const float *b,
                              float *y);
    rt_status (*conv_backward_data)(const rt_conv_shape *s, const float *w, const float *dy, float *dx);
    rt_status (*conv_backward_weights)(const rt_conv_shape *s, const float *x, const float *dy, float *dw,
                                       float *db);
    rt_status (*deconv_forward)(const rt_deconv_shape *s, const float *x, const float *w, const float *b,
                                float *y);
    rt_status (*deconv_backward_data)(const rt_deconv_shape *s, const float *w, const float *dy, float *dx);
    rt_status (*deconv_backward_weights)(const rt_deconv_shape *s, const float *x, const float *dy,
                                         float *dw, float *db);

    /* 1 when the device computes convolutions in bf16 (kernels/conv.h
     * rt_conv_bf16_available); meta answers for the cpu it predicts. */
    bool (*conv_bf16_available)(void);

    /* ---- pooling (kernels/pool.h) ---- */
    /* bytes of the argmax workspace a max-pool forward writes; 0 with the
     * message set when the shape is invalid or oneDNN refuses */
    size_t (*maxpool_workspace_bytes)(const rt_pool_shape *s);
    rt_status (*maxpool_forward)(const rt_pool_shape *s, const float *x, float *y, void *workspace);
    rt_status (*maxpool_backward)(const rt_pool_shape *s, const float *dy, const void *workspace,
                                  float *dx);
    rt_status (*avgpool_forward)(const rt_pool_shape *s, const float *x, float *y);
    rt_status (*avgpool_backward)(const rt_pool_shape *s, const float *dy, float *dx);

    /* ---- normalisation (kernels/norm.h) ---- */
    rt_status (*batchnorm_forward_train)(const rt_bn_shape *s, const float *x, const float *weight,
                                         const float *bias, float *y, float *mean, float *var);
    rt_status (*batchnorm_forward_eval)(const rt_bn_shape *s, const float *x, const float *weight,
                                        const float *bias, const float *mean, const float *var, float *y);
    rt_status (*batchnorm_backward)(const rt_bn_shape *s, const float *x, const float *dy, const float *mean,
                                    const float *var, const float *weight, float *dx, float *dweight,
                                    float *dbias);
    /* bytes of the fused ReLU's mask; 0 with the message set on failure */
    size_t (*batchnorm_relu_workspace_bytes)(const rt_bn_shape *s);
    rt_status (*batchnorm_relu_forward_train)(const rt_bn_shape *s, const float *x, const float *weight,
                                              const float *bias, float *y, float *mean, float *var,
                                              void *workspace);
    rt_status (*batchnorm_relu_backward)(const rt_bn_shape *s, const float *x, const float *dy,
                                         const float *mean, const float *var, const float *weight,
                                         const void *workspace, float *dx, float *dweight, float *dbias);

    /* ---- elementwise and layout (kernels/eltwise.h, kernels/layout.h) ---- */
    rt_status (*relu_forward)(int64_t n, float negative_slope, const float *x, float *y);
    rt_status (*relu_backward)(int64_t n, float negative_slope, const float *y, const float *dy, float *dx);
    rt_status (*reorder_layout)(int ndim, const int64_t *shape, rt_layout from, rt_layout to, const float *src,
                                float *dst);

    /* ---- GEMM (kernels/blas.h) ---- */
    void (*sgemm)(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float *a,
                  int64_t lda, const float *b, int64_t ldb, float beta, float *c, int64_t ldc);
} rt_backend;

/* The table of a device; NULL (message set, RT_ERR_INVALID_ARG) for a value
 * outside rt_device. */
const rt_backend *rt_backend_get(rt_device device);

/* The table of t's device; NULL (message set) for a NULL t. */
const rt_backend *rt_backend_of(const rt_tensor *t);

#endif
