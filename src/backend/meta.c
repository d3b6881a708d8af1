/* The meta backend: accounting only. Each oneDNN entry plans the call
 * (kernels/plan.h: the primitive is created or found in the cache, which
 * tells its TEMP blocks) and books the plan's blocks, executing nothing.
 * revtorch's own loops do nothing, except that those whose cpu kernel holds
 * a tracked scratch (group norm, the voxel-wise cross-entropy, dropout) book
 * and release its bytes; reductions return 0 and value checks find nothing.
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

/* meta_book after the weight cache's copy when the plan makes one: added
 * to the (meta) storage first, as the cpu execute does, and dropped again
 * when the TEMP blocks do not fit (the cpu call drops it on failure too). */
static rt_status meta_book_cached(const rt_kernel_plan *p, rt_storage *w_cache) {
    if (!p->weights_cache_bytes) return meta_book(p);
    rt_storage_derived *d;
    const char *prev = rt_mem_set_op(p->weights_cache_op);
    rt_status rs = rt_storage_derived_add(w_cache, p->weights_cache_tag, p->weights_cache_bytes, &d);
    rt_mem_set_op(prev);
    if (rs != RT_OK) return rs;
    rs = meta_book(p);
    if (rs != RT_OK) rt_storage_derived_drop(w_cache, p->weights_cache_tag);
    return rs;
}

/* ---- convolution ---- */

static rt_status meta_conv_forward(const rt_conv_shape *s, const void *x, const float *w, rt_storage *w_cache,
                                   const float *b, void *y) {
    (void)x, (void)w, (void)b, (void)y;
    rt_kernel_plan p;
    RT_TRY(rt_kernel_conv_forward_plan_cached(s, w_cache, &p));
    return meta_book_cached(&p, w_cache);
}

static rt_status meta_conv_backward_data(const rt_conv_shape *s, const float *w, rt_storage *w_cache,
                                         const void *dy, void *dx) {
    (void)w, (void)dy, (void)dx;
    rt_kernel_plan p;
    RT_TRY(rt_kernel_conv_backward_data_plan_cached(s, w_cache, &p));
    return meta_book_cached(&p, w_cache);
}

static rt_status meta_conv_backward_weights(const rt_conv_shape *s, const void *x, const void *dy, float *dw,
                                            float *db) {
    (void)x, (void)dy, (void)dw, (void)db;
    rt_kernel_plan p;
    RT_TRY(rt_kernel_conv_backward_weights_plan(s, s && s->has_bias, &p));
    return meta_book(&p);
}

/* ---- transposed convolution ---- */

static rt_status meta_deconv_forward(const rt_deconv_shape *s, const float *x, const float *w,
                                     rt_storage *w_cache, const float *b, float *y) {
    (void)x, (void)w, (void)b, (void)y;
    rt_kernel_plan p;
    RT_TRY(rt_kernel_deconv_forward_plan_cached(s, w_cache, &p));
    return meta_book_cached(&p, w_cache);
}

static rt_status meta_deconv_backward_data(const rt_deconv_shape *s, const float *w, rt_storage *w_cache,
                                           const float *dy, float *dx) {
    (void)w, (void)dy, (void)dx;
    rt_kernel_plan p;
    RT_TRY(rt_kernel_deconv_backward_data_plan_cached(s, w_cache, &p));
    return meta_book_cached(&p, w_cache);
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

static rt_status meta_batchnorm_forward_train(const rt_bn_shape *s, const void *x, const float *weight,
                                              const float *bias, void *y, float *mean, float *var) {
    (void)x, (void)weight, (void)bias, (void)y, (void)mean, (void)var;
    rt_kernel_plan p;
    RT_TRY(rt_kernel_batchnorm_forward_train_plan(s, 1, 1, &p));
    return meta_book(&p);
}

static rt_status meta_batchnorm_forward_eval(const rt_bn_shape *s, const void *x, const float *weight,
                                             const float *bias, const float *mean, const float *var, void *y) {
    (void)x, (void)weight, (void)bias, (void)mean, (void)var, (void)y;
    rt_kernel_plan p;
    RT_TRY(rt_kernel_batchnorm_forward_eval_plan(s, 1, 1, &p));
    return meta_book(&p);
}

static rt_status meta_batchnorm_backward(const rt_bn_shape *s, const void *x, const void *dy, const float *mean,
                                         const float *var, const float *weight, void *dx, float *dweight,
                                         float *dbias) {
    (void)x, (void)dy, (void)mean, (void)var, (void)weight, (void)dx, (void)dweight, (void)dbias;
    rt_kernel_plan p;
    RT_TRY(rt_kernel_batchnorm_backward_plan(s, 1, 1, 1, &p));
    return meta_book(&p);
}

static rt_status meta_batchnorm_relu_forward_train(const rt_bn_shape *s, const void *x, const float *weight,
                                                   const float *bias, void *y, float *mean, float *var,
                                                   void *workspace) {
    (void)x, (void)weight, (void)bias, (void)y, (void)mean, (void)var, (void)workspace;
    rt_kernel_plan p;
    RT_TRY(rt_kernel_batchnorm_relu_forward_train_plan(s, 1, 1, &p));
    return meta_book(&p);
}

static rt_status meta_batchnorm_relu_backward(const rt_bn_shape *s, const void *x, const void *dy,
                                              const float *mean, const float *var, const float *weight,
                                              const void *workspace, void *dx, float *dweight, float *dbias) {
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

static rt_status meta_relu_backward_half(int64_t n, float negative_slope, const uint16_t *y, rt_dtype dt,
                                       const float *dy, float *dx, rt_dtype dy_round) {
    (void)y, (void)dy, (void)dx;
    return rt_kernel_relu_backward_half_check(n, negative_slope, dt, dy_round);
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

/* revtorch's own loops: nothing to compute. Where the cpu kernel holds a
 * tracked scratch, its bytes are booked and released as the real call
 * does (meta_book_temp). */
static rt_status meta_book_temp(size_t bytes) {
    RT_TRY(rt_mem_account(bytes, RT_MEM_TEMP));
    rt_mem_unaccount(bytes, RT_MEM_TEMP);
    return RT_OK;
}
static void meta_binary(int64_t n, const float *a, const float *b, float *out) {
    (void)n, (void)a, (void)b, (void)out;
}
static void meta_binary_half(int64_t n, const void *a, int a_bf16, const void *b, int b_bf16, float *out) {
    (void)n, (void)a, (void)a_bf16, (void)b, (void)b_bf16, (void)out;
}
static void meta_scalar_map(int64_t n, float alpha, const float *x, float *out) {
    (void)n, (void)alpha, (void)x, (void)out;
}
static void meta_scalar_grad(int64_t n, float p, const float *x, const float *dy, float *dx) {
    (void)n, (void)p, (void)x, (void)dy, (void)dx;
}
static void meta_map(int64_t n, const float *x, float *out) { (void)n, (void)x, (void)out; }
static void meta_grad(int64_t n, const float *y, const float *dy, float *dx) {
    (void)n, (void)y, (void)dy, (void)dx;
}
static void meta_fill_from(int64_t n, const float *s, double divisor, float *out) {
    (void)n, (void)s, (void)divisor, (void)out;
}
static rt_status meta_dtype_round_into(const float *src, float *dst, rt_dtype dt, size_t n) {
    (void)src, (void)dst, (void)dt, (void)n;
    return RT_OK;
}
static double meta_sumsq(int64_t n, const float *x) {
    (void)n, (void)x;
    return 0.0;
}
static void meta_sum_to(int64_t n, const float *x, double divisor, float *y) {
    (void)n, (void)x, (void)divisor, (void)y;
}
static void meta_fingerprint(int64_t n, const float *x, uint32_t base, double out[3]) {
    (void)n, (void)x, (void)base, (void)out;
}
static int meta_all_finite(int64_t n, const float *x) {
    (void)n, (void)x;
    return 1; /* no values, nothing non-finite */
}
static int64_t meta_first_negative(int64_t n, const float *x, float *value) {
    (void)n, (void)x, (void)value;
    return -1;
}
static void meta_diff_norms(int64_t n, const float *p, const float *q, double out[2]) {
    (void)n, (void)p, (void)q, (void)out;
}

static rt_status meta_cross_entropy_forward(int64_t n, int64_t k, float smoothing, const float *z,
                                            const int32_t *t, float *p, float *y) {
    (void)n, (void)k, (void)smoothing, (void)z, (void)t, (void)p, (void)y;
    return RT_OK;
}
static void meta_cross_entropy_backward(int64_t n, int64_t k, float smoothing, const float *p, const int32_t *t,
                                        const float *dy, float *dz) {
    (void)n, (void)k, (void)smoothing, (void)p, (void)t, (void)dy, (void)dz;
}
static void meta_mse_backward(int64_t n, float sign, const float *diff, const float *dy, float *dx) {
    (void)n, (void)sign, (void)diff, (void)dy, (void)dx;
}

static void meta_l1_forward(int64_t n, const float *diff, float *y) { (void)n, (void)diff, (void)y; }
static void meta_l1_backward(int64_t n, float sign, const float *diff, const float *dy, float *dx) {
    (void)n, (void)sign, (void)diff, (void)dy, (void)dx;
}

static void meta_rows(int64_t rows, int64_t cols, const float *src, float *dst) {
    (void)rows, (void)cols, (void)src, (void)dst;
}
static rt_status meta_coupling_forward(int64_t n, int64_t inner, float clamp, const float *x, const float *st,
                                       float *y) {
    (void)n, (void)inner, (void)clamp, (void)x, (void)st, (void)y;
    return RT_OK;
}
static void meta_coupling_inverse(int64_t n, int64_t inner, float clamp, const float *y, const float *st,
                                  float *x) {
    (void)n, (void)inner, (void)clamp, (void)y, (void)st, (void)x;
}
static void meta_coupling_backward(int64_t n, int64_t inner, float clamp, const float *x, const float *st,
                                   const float *dy, float *dx, float *dst) {
    (void)n, (void)inner, (void)clamp, (void)x, (void)st, (void)dy, (void)dx, (void)dst;
}
static void meta_coupling_logdet(int64_t n, int64_t inner, float clamp, const float *st, float *ld) {
    (void)n, (void)inner, (void)clamp, (void)st, (void)ld;
}
static void meta_pad_copy(int nd, const int64_t *sshape, const float *src, const int64_t *dshape,
                          const int64_t *before, float value, float *dst) {
    (void)nd, (void)sshape, (void)src, (void)dshape, (void)before, (void)value, (void)dst;
}
static void meta_channel_slice_copy_cl(int64_t batch, int64_t cw, int64_t inner, int64_t off, int64_t size,
                                       float *piece, float *whole, rt_layout whole_layout, int to_whole) {
    (void)batch, (void)cw, (void)inner, (void)off, (void)size, (void)piece, (void)whole, (void)whole_layout,
        (void)to_whole;
}
static void meta_channel_slice_copy(int64_t batch, int64_t cw, int64_t inner, int64_t off, int64_t size,
                                    float *piece, float *whole, int to_whole) {
    (void)batch, (void)cw, (void)inner, (void)off, (void)size, (void)piece, (void)whole, (void)to_whole;
}
static rt_status meta_dropout(uint64_t seed, uint64_t offset, float p, int64_t n, const float *in, float *out) {
    (void)seed, (void)offset, (void)p, (void)in, (void)out;
    return n > 0 ? meta_book_temp(rt_kernel_dropout_temp_bytes(n)) : RT_OK;
}
static void meta_sgd_update(int64_t n, const rt_sgd_coef *c, int first, float *p, const float *g, float *buf) {
    (void)n, (void)c, (void)first, (void)p, (void)g, (void)buf;
}
static void meta_adamw_update(int64_t n, const rt_adamw_coef *c, float *p, const float *g, float *m, float *v) {
    (void)n, (void)c, (void)p, (void)g, (void)m, (void)v;
}

static void meta_softmax_forward(const rt_chan_shape *s, const float *x, float *y) { (void)s, (void)x, (void)y; }
static void meta_softmax_backward(const rt_chan_shape *s, const float *y, const float *dy, float *dx) {
    (void)s, (void)y, (void)dy, (void)dx;
}
static void meta_upsample(const rt_upsample_shape *s, const float *x, float *y) { (void)s, (void)x, (void)y; }
static void meta_pixel_shuffle(int64_t n, int64_t c, int64_t h, int64_t w, int64_t r, int64_t block, int inverse,
                               const float *src, float *dst) {
    (void)n, (void)c, (void)h, (void)w, (void)r, (void)block, (void)inverse, (void)src, (void)dst;
}
static rt_status meta_bn_backward_eval(const rt_bn_shape *s, const float *x, const float *dy, const float *mean,
                                       const float *var, const float *weight, float *dx, float *dweight,
                                       float *dbias) {
    (void)s, (void)x, (void)dy, (void)mean, (void)var, (void)weight, (void)dx, (void)dweight, (void)dbias;
    return RT_OK; /* the cpu kernel's accumulator is untracked: nothing to book */
}
static void meta_bn_update_running(const rt_bn_shape *s, float momentum, const float *mean, const float *var,
                                   float *running_mean, float *running_var) {
    (void)s, (void)momentum, (void)mean, (void)var, (void)running_mean, (void)running_var;
}
static void meta_bn_center(const rt_bn_shape *s, const float *x, const float *mean, void *out, rt_dtype dt) {
    (void)s, (void)x, (void)mean, (void)out, (void)dt;
}
static rt_status meta_group_norm_forward(const rt_chan_shape *s, int64_t groups, float eps, const float *x,
                                         const float *weight, const float *bias, const float *mean_in,
                                         const float *var_in, float *run_mean, float *run_var, float momentum,
                                         float *y, float *stats) {
    (void)groups, (void)eps, (void)x, (void)weight, (void)bias, (void)mean_in, (void)var_in, (void)run_mean;
    (void)run_var, (void)momentum, (void)y, (void)stats;
    return meta_book_temp(rt_kernel_group_norm_forward_temp_bytes(s));
}
static rt_status meta_group_norm_backward(const rt_chan_shape *s, int64_t groups, int input_stats, const float *x,
                                          const float *stats, const float *gamma, const float *dy, float *dx,
                                          float *dw, float *db) {
    (void)groups, (void)input_stats, (void)x, (void)stats, (void)gamma, (void)dy, (void)dx, (void)dw, (void)db;
    return meta_book_temp(rt_kernel_group_norm_backward_temp_bytes(s));
}
static int64_t meta_labels_first_invalid(int64_t n, const int32_t *t, int64_t classes, int32_t *value) {
    (void)n, (void)t, (void)classes, (void)value;
    return -1;
}
/* the log-sum-exp buffer the cpu kernel holds, booked and released */
static rt_status meta_cross_entropy_nd_forward(const rt_chan_shape *s, const float *x, const int32_t *t,
                                               const float *w, double *weight_sum, float *y) {
    (void)x, (void)t, (void)w, (void)weight_sum, (void)y;
    return meta_book_temp(rt_kernel_cross_entropy_nd_temp_bytes(s));
}
static void meta_cross_entropy_nd_backward(const rt_chan_shape *s, const float *x, const int32_t *t,
                                           const float *w, double weight_sum, const float *dy, float *dx) {
    (void)s, (void)x, (void)t, (void)w, (void)weight_sum, (void)dy, (void)dx;
}
static void meta_soft_dice_forward(const rt_chan_shape *s, const float *x, const int32_t *t, double smooth,
                                   int batch_dice, int include_background, double terms, double *sums, float *y) {
    (void)s, (void)x, (void)t, (void)smooth, (void)batch_dice, (void)include_background, (void)terms;
    (void)sums, (void)y;
}
static void meta_soft_dice_backward(const rt_chan_shape *s, const int32_t *t, double smooth, int batch_dice,
                                    int include_background, double terms, const double *sums, const float *dy,
                                    float *dx) {
    (void)s, (void)t, (void)smooth, (void)batch_dice, (void)include_background, (void)terms, (void)sums;
    (void)dy, (void)dx;
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
    .relu_backward_half = meta_relu_backward_half,
    .reorder_layout = meta_reorder_layout,
    .sgemm = rt_meta_sgemm,

    /* revtorch's own loops */
    .vec_add = meta_binary,
    .vec_sub = meta_binary,
    .vec_mul = meta_binary,
    .vec_add_relu = meta_binary,
    .vec_add_relu_half = meta_binary_half,
    .vec_axpy = meta_scalar_map,
    .vec_scale = meta_scalar_map,
    .vec_pow = meta_scalar_map,
    .vec_pow_backward = meta_scalar_grad,
    .vec_tanh = meta_map,
    .vec_tanh_backward = meta_grad,
    .vec_sigmoid = meta_map,
    .vec_sigmoid_backward = meta_grad,
    .vec_fill_from = meta_fill_from,
    .dtype_round_into = meta_dtype_round_into,
    .vec_sumsq = meta_sumsq,
    .vec_sum_to = meta_sum_to,
    .vec_sumsq_to = meta_sum_to,
    .vec_fingerprint = meta_fingerprint,
    .vec_diff_norms = meta_diff_norms,
    .vec_max_abs_diff = meta_diff_norms,
    .vec_all_finite = meta_all_finite,
    .vec_first_negative = meta_first_negative,
    .cross_entropy_forward = meta_cross_entropy_forward,
    .cross_entropy_backward = meta_cross_entropy_backward,
    .mse_backward = meta_mse_backward,
    .l1_forward = meta_l1_forward,
    .l1_backward = meta_l1_backward,
    .rows_fill = meta_rows,
    .rows_sum = meta_rows,
    .affine_coupling_forward = meta_coupling_forward,
    .affine_coupling_inverse = meta_coupling_inverse,
    .affine_coupling_backward = meta_coupling_backward,
    .affine_coupling_logdet = meta_coupling_logdet,
    .pad_copy = meta_pad_copy,
    .channel_slice_copy = meta_channel_slice_copy,
    .channel_slice_copy_cl = meta_channel_slice_copy_cl,
    .dropout = meta_dropout,
    .sgd_update = meta_sgd_update,
    .adamw_update = meta_adamw_update,
    .softmax_channels_forward = meta_softmax_forward,
    .softmax_channels_backward = meta_softmax_backward,
    .upsample_linear_forward = meta_upsample,
    .upsample_linear_backward = meta_upsample,
    .upsample_bicubic_forward = meta_upsample,
    .upsample_bicubic_backward = meta_upsample,
    .pixel_shuffle = meta_pixel_shuffle,
    .batchnorm_backward_eval = meta_bn_backward_eval,
    .batchnorm_update_running = meta_bn_update_running,
    .batchnorm_center = meta_bn_center,
    .group_norm_forward = meta_group_norm_forward,
    .group_norm_backward = meta_group_norm_backward,
    .labels_first_invalid = meta_labels_first_invalid,
    .cross_entropy_nd_forward = meta_cross_entropy_nd_forward,
    .cross_entropy_nd_backward = meta_cross_entropy_nd_backward,
    .soft_dice_forward = meta_soft_dice_forward,
    .soft_dice_backward = meta_soft_dice_backward,
};
