/* The meta backend: accounting only. Each oneDNN entry plans the call
 * (kernels/plan.h: the primitive is created or found in the cache, which
 * tells its TEMP blocks) and books the plan's blocks, executing nothing;
 * loops without temporaries do nothing.
 *
 * A meta tensor has no data, so every pointer an op passes here is NULL and
 * cannot say which optional outputs the op wants. Each entry plans the
 * variant the ops run: backward-weights with db exactly when the shape has
 * a bias (ops/conv.c, ops/conv_transpose.c); batch norm affine, its
 * backward with both parameter gradients (ops/batchnorm.c,
 * ops/batchnorm_relu.c); max pooling's training forward, which writes the
 * workspace (ops/pool.c). */
#include "backend/tables.h"
#include "kernels/eltwise.h"
#include "kernels/layout.h"

/* Books p's TEMP blocks as the cpu execute allocates them: in order, each
 * recorded under its op name, then released in the reverse order, all
 * through the meta memory table (the tracker, under its limit: the same
 * RT_ERR_OOM as the real allocation, with nothing left booked). */
static rt_status meta_book(const rt_kernel_plan *p) {
    rt_status rs = RT_OK;
    int i;
    for (i = 0; i < p->n_temp; i++) {
        const rt_kernel_temp *t = &p->temp[i];
        const char *prev = t->op ? rt_mem_set_op(t->op) : NULL;
        void *none;
        rs = rt_device_memory_meta.alloc(t->bytes, RT_MEM_TEMP, &none);
        if (t->op) rt_mem_set_op(prev);
        if (rs != RT_OK) break;
    }
    while (i-- > 0) rt_device_memory_meta.free(NULL, p->temp[i].bytes, RT_MEM_TEMP);
    return rs;
}

/* ---- convolution ---- */

static rt_status meta_conv_forward(const rt_conv_shape *s, const float *x, const float *w, const float *b,
                                   float *y) {
    (void)x, (void)w, (void)b, (void)y;
    rt_kernel_plan p;
    RT_TRY(rt_kernel_conv_forward_plan(s, &p));
    return meta_book(&p);
}

static rt_status meta_conv_backward_data(const rt_conv_shape *s, const float *w, const float *dy, float *dx) {
    (void)w, (void)dy, (void)dx;
    rt_kernel_plan p;
    RT_TRY(rt_kernel_conv_backward_data_plan(s, &p));
    return meta_book(&p);
}

static rt_status meta_conv_backward_weights(const rt_conv_shape *s, const float *x, const float *dy, float *dw,
                                            float *db) {
    (void)x, (void)dy, (void)dw, (void)db;
    rt_kernel_plan p;
    RT_TRY(rt_kernel_conv_backward_weights_plan(s, s && s->has_bias, &p));
    return meta_book(&p);
}

/* ---- transposed convolution ---- */

static rt_status meta_deconv_forward(const rt_deconv_shape *s, const float *x, const float *w, const float *b,
                                     float *y) {
    (void)x, (void)w, (void)b, (void)y;
    rt_kernel_plan p;
    RT_TRY(rt_kernel_deconv_forward_plan(s, &p));
    return meta_book(&p);
}

static rt_status meta_deconv_backward_data(const rt_deconv_shape *s, const float *w, const float *dy, float *dx) {
    (void)w, (void)dy, (void)dx;
    rt_kernel_plan p;
    RT_TRY(rt_kernel_deconv_backward_data_plan(s, &p));
    return meta_book(&p);
}

static rt_status meta_deconv_backward_weights(const rt_deconv_shape *s, const float *x, const float *dy,
                                              float *dw, float *db) {
    (void)x, (void)dy, (void)dw, (void)db;
    rt_kernel_plan p;
    RT_TRY(rt_kernel_deconv_backward_weights_plan(s, s && s->has_bias, &p));
    return meta_book(&p);
}

/* ---- pooling ---- */

static rt_status meta_maxpool_forward(const rt_pool_shape *s, const float *x, float *y, void *workspace) {
    (void)x, (void)y, (void)workspace;
    rt_kernel_plan p;
    RT_TRY(rt_kernel_maxpool_forward_plan(s, 1, &p));
    return meta_book(&p);
}

static rt_status meta_maxpool_backward(const rt_pool_shape *s, const float *dy, const void *workspace,
                                       float *dx) {
    (void)dy, (void)workspace, (void)dx;
    rt_kernel_plan p;
    RT_TRY(rt_kernel_maxpool_backward_plan(s, &p));
    return meta_book(&p);
}

static rt_status meta_avgpool_forward(const rt_pool_shape *s, const float *x, float *y) {
    (void)x, (void)y;
    rt_kernel_plan p;
    RT_TRY(rt_kernel_avgpool_forward_plan(s, &p));
    return meta_book(&p);
}

static rt_status meta_avgpool_backward(const rt_pool_shape *s, const float *dy, float *dx) {
    (void)dy, (void)dx;
    rt_kernel_plan p;
    RT_TRY(rt_kernel_avgpool_backward_plan(s, &p));
    return meta_book(&p);
}

/* ---- batch normalisation ---- */

static rt_status meta_batchnorm_forward_train(const rt_bn_shape *s, const float *x, const float *weight,
                                              const float *bias, float *y, float *mean, float *var) {
    (void)x, (void)weight, (void)bias, (void)y, (void)mean, (void)var;
    rt_kernel_plan p;
    RT_TRY(rt_kernel_batchnorm_forward_train_plan(s, 1, 1, &p));
    return meta_book(&p);
}

static rt_status meta_batchnorm_forward_eval(const rt_bn_shape *s, const float *x, const float *weight,
                                             const float *bias, const float *mean, const float *var, float *y) {
    (void)x, (void)weight, (void)bias, (void)mean, (void)var, (void)y;
    rt_kernel_plan p;
    RT_TRY(rt_kernel_batchnorm_forward_eval_plan(s, 1, 1, &p));
    return meta_book(&p);
}

static rt_status meta_batchnorm_backward(const rt_bn_shape *s, const float *x, const float *dy, const float *mean,
                                         const float *var, const float *weight, float *dx, float *dweight,
                                         float *dbias) {
    (void)x, (void)dy, (void)mean, (void)var, (void)weight, (void)dx, (void)dweight, (void)dbias;
    rt_kernel_plan p;
    RT_TRY(rt_kernel_batchnorm_backward_plan(s, 1, 1, 1, &p));
    return meta_book(&p);
}

static rt_status meta_batchnorm_relu_forward_train(const rt_bn_shape *s, const float *x, const float *weight,
                                                   const float *bias, float *y, float *mean, float *var,
                                                   void *workspace) {
    (void)x, (void)weight, (void)bias, (void)y, (void)mean, (void)var, (void)workspace;
    rt_kernel_plan p;
    RT_TRY(rt_kernel_batchnorm_relu_forward_train_plan(s, 1, 1, &p));
    return meta_book(&p);
}

static rt_status meta_batchnorm_relu_backward(const rt_bn_shape *s, const float *x, const float *dy,
                                              const float *mean, const float *var, const float *weight,
                                              const void *workspace, float *dx, float *dweight, float *dbias) {
    (void)x, (void)dy, (void)mean, (void)var, (void)weight, (void)workspace, (void)dx, (void)dweight;
    (void)dbias;
    rt_kernel_plan p;
    RT_TRY(rt_kernel_batchnorm_relu_backward_plan(s, 1, 1, 1, &p));
    return meta_book(&p);
}

/* ---- elementwise and layout ---- */

static rt_status meta_relu_forward(int64_t n, float negative_slope, const float *x, float *y) {
    (void)x, (void)y;
    rt_kernel_plan p;
    RT_TRY(rt_kernel_relu_forward_plan(n, negative_slope, &p));
    return meta_book(&p);
}

static rt_status meta_relu_backward(int64_t n, float negative_slope, const float *y, const float *dy, float *dx) {
    (void)y, (void)dy, (void)dx;
    rt_kernel_plan p;
    RT_TRY(rt_kernel_relu_backward_plan(n, negative_slope, &p));
    return meta_book(&p);
}

static rt_status meta_reorder_layout(int ndim, const int64_t *shape, rt_layout from, rt_layout to,
                                     const float *src, float *dst) {
    (void)src, (void)dst;
    rt_kernel_plan p;
    RT_TRY(rt_kernel_reorder_layout_plan(ndim, shape, from, to, &p));
    return meta_book(&p);
}

/* ---- GEMM ---- */

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
    .conv_forward = meta_conv_forward,
    .conv_backward_data = meta_conv_backward_data,
    .conv_backward_weights = meta_conv_backward_weights,
    /* a meta step predicts the cpu one, so it takes the cpu's answer */
    .conv_bf16_available = rt_conv_bf16_available,
    .deconv_forward = meta_deconv_forward,
    .deconv_backward_data = meta_deconv_backward_data,
    .deconv_backward_weights = meta_deconv_backward_weights,
    /* the workspace sizes are the plans' (ops allocate the workspace as a tensor) */
    .maxpool_workspace_bytes = rt_kernel_maxpool_workspace_bytes,
    .maxpool_forward = meta_maxpool_forward,
    .maxpool_backward = meta_maxpool_backward,
    .avgpool_forward = meta_avgpool_forward,
    .avgpool_backward = meta_avgpool_backward,
    .batchnorm_forward_train = meta_batchnorm_forward_train,
    .batchnorm_forward_eval = meta_batchnorm_forward_eval,
    .batchnorm_backward = meta_batchnorm_backward,
    .batchnorm_relu_workspace_bytes = rt_kernel_batchnorm_relu_workspace_bytes,
    .batchnorm_relu_forward_train = meta_batchnorm_relu_forward_train,
    .batchnorm_relu_backward = meta_batchnorm_relu_backward,
    .relu_forward = meta_relu_forward,
    .relu_backward = meta_relu_backward,
    .reorder_layout = meta_reorder_layout,
    .sgemm = rt_meta_sgemm,
};
