/* Backends: one table of memory and compute entries per device.
 *
 * Ops, optimizers, memory strategies and the backward engine reach a
 * device's code only through the table of their tensors' device,
 * rt_backend_of(t) (or rt_backend_get(device)), and do not test for meta
 * to decide whether to compute: a meta entry computes nothing. Adding a
 * device is a new table here (and its memory table in core/device.h);
 * docs/design.md "Backends" lists what a CUDA backend fills in, entry by
 * entry. Two groups of entries:
 *   - the oneDNN / BLAS kernels (convolution, transposed convolution,
 *     pooling, batch norm, fused batch norm + ReLU, ReLU, layout reorders,
 *     sgemm), each split into plan and execute (kernels/plan.h);
 *   - revtorch's own loops (the block at the end of the struct): every
 *     elementwise map, reduction, loss, optimizer update, group norm,
 *     softmax, upsampling, pixel shuffle, coupling, dropout and strided copy of
 *     src/ops, src/optim, src/memory and src/autograd/engine.c, and the
 *     value checks of loaded weights (nn/state_dict.c).
 *
 *   cpu   (backend/cpu.c)  the oneDNN 2.6 primitives (each entry plans:
 *                          the primitive created or found in the cache;
 *                          then executes), OpenBLAS sgemm, and revtorch's
 *                          own OpenMP loops of src/kernels (the elementwise
 *                          ones dispatched at run time to their AVX-512 /
 *                          AVX2 / baseline copy, kernels/vec.h).
 *   meta  (backend/meta.c) an accounting backend: each oneDNN kernel is
 *                          planned and the plan's RT_MEM_TEMP blocks
 *                          (scratchpad, reorders) booked and released at
 *                          the moments the cpu entry allocates and frees
 *                          them; nothing executes. revtorch's loops do
 *                          nothing, except that those whose cpu kernel
 *                          holds a tracked scratch (group norm, the
 *                          voxel-wise cross-entropy, dropout) book and
 *                          release its bytes; reductions return 0, value
 *                          and label checks find nothing. A meta step's
 *                          per-category peaks and event timeline therefore
 *                          equal the real step's (tests/test_memory.c,
 *                          tests/test_predict.c; per kernel
 *                          tests/test_kernels.c).
 *
 * Each entry has the contract of the function of the same name
 * (rt_kernel_<entry>, or rt_<entry> for vec_* and dtype_round: kernels/vec.h,
 * core/dtype.h), where shapes, dtypes, layouts and errors are documented;
 * on meta every data pointer is NULL (rt_tensor_f32 of a meta tensor) and
 * only the shape arguments are read, so meta plans the variant the ops call
 * (listed in backend/meta.c: db when the shape has a bias, affine batch norm
 * with both parameter gradients, max pooling with its workspace). Scalars
 * that live in a tensor (a loss, its incoming gradient) are read and written
 * by the entries, never by their callers. Entries returning void cannot fail
 * for valid arguments. The tables are static constants: no state, usable
 * from any thread. */
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
/* revtorch's own loops */
#include "kernels/blas.h"
#include "kernels/copy.h"
#include "kernels/coupling.h"
#include "kernels/dropout.h"
#include "kernels/group_norm.h"
#include "kernels/loss.h"
#include "kernels/norm_loops.h"
#include "kernels/optim.h"
#include "kernels/pixel_shuffle.h"
#include "kernels/seg_loss.h"
#include "kernels/softmax.h"
#include "kernels/upsample.h"
#include "kernels/vec.h"

typedef struct rt_backend {
    const char *name; /* "cpu", "meta" */
    rt_device device;
    /* allocate, free, copy: the device's memory table */
    const rt_device_memory *memory;

    /* ---- convolution (kernels/conv.h, kernels/deconv.h) ---- */
    /* w_cache: the storage holding w, whose reordered copies the entry
     * keeps and reuses while its version is unchanged (kernels/conv.h
     * "Weight cache"; meta books them), or NULL for no cache. conv's x and
     * dy are f32, or bf16 where s->src_bf16 / s->dy_bf16 say so; y is f32,
     * or bf16 where s->dst_bf16 says so. */
    rt_status (*conv_forward)(const rt_conv_shape *s, const void *x, const float *w, rt_storage *w_cache,
                              const float *b, void *y);
    rt_status (*conv_backward_data)(const rt_conv_shape *s, const float *w, rt_storage *w_cache, const void *dy,
                                    void *dx); /* dx bf16 where s->dx_bf16 says so */
    rt_status (*conv_backward_weights)(const rt_conv_shape *s, const void *x, const void *dy, float *dw,
                                       float *db);
    rt_status (*deconv_forward)(const rt_deconv_shape *s, const float *x, const float *w, rt_storage *w_cache,
                                const float *b, float *y);
    rt_status (*deconv_backward_data)(const rt_deconv_shape *s, const float *w, rt_storage *w_cache,
                                      const float *dy, float *dx);
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
    /* the forwards' x and y are f32, or bf16 where s->bf16 says so */
    rt_status (*batchnorm_forward_train)(const rt_bn_shape *s, const void *x, const float *weight,
                                         const float *bias, void *y, float *mean, float *var);
    rt_status (*batchnorm_forward_eval)(const rt_bn_shape *s, const void *x, const float *weight,
                                        const float *bias, const float *mean, const float *var, void *y);
    rt_status (*batchnorm_backward)(const rt_bn_shape *s, const void *x, const void *dy, const float *mean,
                                    const float *var, const float *weight, void *dx, float *dweight,
                                    float *dbias);
    /* bytes of the fused ReLU's mask; 0 with the message set on failure */
    size_t (*batchnorm_relu_workspace_bytes)(const rt_bn_shape *s);
    rt_status (*batchnorm_relu_forward_train)(const rt_bn_shape *s, const void *x, const float *weight,
                                              const float *bias, void *y, float *mean, float *var,
                                              void *workspace);
    rt_status (*batchnorm_relu_backward)(const rt_bn_shape *s, const void *x, const void *dy,
                                         const float *mean, const float *var, const float *weight,
                                         const void *workspace, void *dx, float *dweight, float *dbias);

    /* ---- elementwise and layout (kernels/eltwise.h, kernels/layout.h) ---- */
    rt_status (*relu_forward)(int64_t n, float negative_slope, const float *x, float *y);
    rt_status (*relu_backward)(int64_t n, float negative_slope, const float *y, const float *dy, float *dx);
    /* the same from a bf16/f16 y (kernels/eltwise.h); meta: nothing to book */
    rt_status (*relu_backward_half)(int64_t n, float negative_slope, const uint16_t *y, rt_dtype dt, const float *dy,
                                    float *dx, rt_dtype dy_round);
    rt_status (*reorder_layout)(int ndim, const int64_t *shape, rt_layout from, rt_layout to, const float *src,
                                float *dst);

    /* ---- GEMM (kernels/blas.h) ---- */
    void (*sgemm)(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float *a,
                  int64_t lda, const float *b, int64_t ldb, float beta, float *c, int64_t ldc);

    /* ==== revtorch's own loops (src/kernels: OpenMP, the ISA tables of
     * kernels/vec.h). None allocates unless its kernel says so; meta's
     * entries do nothing (the reductions return 0) unless noted. ==== */

    /* ---- elementwise, n contiguous f32 (kernels/vec.h) ---- */
    void (*vec_add)(int64_t n, const float *a, const float *b, float *out);
    void (*vec_sub)(int64_t n, const float *a, const float *b, float *out);
    void (*vec_mul)(int64_t n, const float *a, const float *b, float *out); /* out = a * b */
    void (*vec_add_relu)(int64_t n, const float *a, const float *b, float *out);
    /* a and b each f32 or bf16 (the flags), out f32 (rt_vec_add_relu_half) */
    void (*vec_add_relu_half)(int64_t n, const void *a, int a_bf16, const void *b, int b_bf16, float *out);
    void (*vec_axpy)(int64_t n, float alpha, const float *x, float *y);
    void (*vec_scale)(int64_t n, float alpha, const float *x, float *out);
    void (*vec_pow)(int64_t n, float p, const float *x, float *out);
    void (*vec_pow_backward)(int64_t n, float p, const float *x, const float *dy, float *dx);
    void (*vec_tanh)(int64_t n, const float *x, float *out);
    void (*vec_tanh_backward)(int64_t n, const float *y, const float *dy, float *dx);
    void (*vec_sigmoid)(int64_t n, const float *x, float *out);
    void (*vec_sigmoid_backward)(int64_t n, const float *y, const float *dy, float *dx);
    void (*vec_fill_from)(int64_t n, const float *s, double divisor, float *out);
    /* gradients rounded to a region's dtype, in place or into a copy
     * (core/dtype.h rt_dtype_round_into) */
    rt_status (*dtype_round_into)(const float *src, float *dst, rt_dtype dt, size_t n);

    /* ---- reductions (kernels/vec.h) ---- */
    double (*vec_sumsq)(int64_t n, const float *x);
    void (*vec_sum_to)(int64_t n, const float *x, double divisor, float *y);
    void (*vec_sumsq_to)(int64_t n, const float *x, double divisor, float *y);
    void (*vec_fingerprint)(int64_t n, const float *x, uint32_t base, double out[3]);
    void (*vec_diff_norms)(int64_t n, const float *p, const float *q, double out[2]);
    void (*vec_max_abs_diff)(int64_t n, const float *p, const float *q, double out[2]);
    /* value checks of loaded weights; meta: all finite (1), no negative (-1) */
    int (*vec_all_finite)(int64_t n, const float *x);
    int64_t (*vec_first_negative)(int64_t n, const float *x, float *value);

    /* ---- losses (kernels/loss.h) ---- */
    rt_status (*cross_entropy_forward)(int64_t n, int64_t k, float smoothing, const float *z, const int32_t *t,
                                       float *p, float *y);
    void (*cross_entropy_backward)(int64_t n, int64_t k, float smoothing, const float *p, const int32_t *t,
                                   const float *dy, float *dz);
    void (*mse_backward)(int64_t n, float sign, const float *diff, const float *dy, float *dx);
    void (*l1_forward)(int64_t n, const float *diff, float *y);
    void (*l1_backward)(int64_t n, float sign, const float *diff, const float *dy, float *dx);

    /* ---- a linear layer's bias, filled before and summed after sgemm (kernels/blas.h) ---- */
    void (*rows_fill)(int64_t rows, int64_t cols, const float *b, float *y);
    void (*rows_sum)(int64_t rows, int64_t cols, const float *dy, float *db);

    /* ---- affine coupling of reversible blocks (kernels/coupling.h); meta:
     * nothing checked (no values) ---- */
    rt_status (*affine_coupling_forward)(int64_t n, int64_t inner, float clamp, const float *x, const float *st,
                                         float *y);
    void (*affine_coupling_inverse)(int64_t n, int64_t inner, float clamp, const float *y, const float *st,
                                    float *x);
    void (*affine_coupling_backward)(int64_t n, int64_t inner, float clamp, const float *x, const float *st,
                                     const float *dy, float *dx, float *dst);
    void (*affine_coupling_logdet)(int64_t n, int64_t inner, float clamp, const float *st, float *ld);

    /* ---- strided copies: padding, channel slices (kernels/copy.h) ---- */
    void (*pad_copy)(int nd, const int64_t *sshape, const float *src, const int64_t *dshape, const int64_t *before,
                     float value, float *dst);
    void (*channel_slice_copy)(int64_t batch, int64_t cw, int64_t inner, int64_t off, int64_t size, float *piece,
                               float *whole, int to_whole);
    void (*channel_slice_copy_cl)(int64_t batch, int64_t cw, int64_t inner, int64_t off, int64_t size, float *piece,
                                  float *whole, rt_layout whole_layout, int to_whole);

    /* ---- dropout (kernels/dropout.h); meta: books and releases the
     * uniforms' TEMP bytes ---- */
    rt_status (*dropout)(uint64_t seed, uint64_t offset, float p, int64_t n, const float *in, float *out);

    /* ---- optimizer updates (kernels/optim.h) ---- */
    void (*sgd_update)(int64_t n, const rt_sgd_coef *c, int first, float *p, const float *g, float *buf);
    void (*adamw_update)(int64_t n, const rt_adamw_coef *c, float *p, const float *g, float *m, float *v);

    /* ---- channel softmax, upsampling (kernels/softmax.h, kernels/upsample.h) ---- */
    void (*softmax_channels_forward)(const rt_chan_shape *s, const float *x, float *y);
    void (*softmax_channels_backward)(const rt_chan_shape *s, const float *y, const float *dy, float *dx);
    void (*upsample_linear_forward)(const rt_upsample_shape *s, const float *x, float *y);
    void (*upsample_linear_backward)(const rt_upsample_shape *s, const float *dy, float *dx);
    void (*upsample_bicubic_forward)(const rt_upsample_shape *s, const float *x, float *y);
    void (*upsample_bicubic_backward)(const rt_upsample_shape *s, const float *dy, float *dx);

    /* ---- pixel shuffle / unshuffle, a permutation (kernels/pixel_shuffle.h) ---- */
    void (*pixel_shuffle)(int64_t n, int64_t c, int64_t h, int64_t w, int64_t r, int64_t block, int inverse,
                          const float *src, float *dst);

    /* ---- batch norm's own loops (kernels/norm_loops.h) ---- */
    rt_status (*batchnorm_backward_eval)(const rt_bn_shape *s, const float *x, const float *dy, const float *mean,
                                         const float *var, const float *weight, float *dx, float *dweight,
                                         float *dbias);
    void (*batchnorm_update_running)(const rt_bn_shape *s, float momentum, const float *mean, const float *var,
                                     float *running_mean, float *running_var);
    void (*batchnorm_center)(const rt_bn_shape *s, const float *x, const float *mean, void *out, rt_dtype dt);

    /* ---- group / instance normalisation (kernels/group_norm.h); meta:
     * books and releases the scratch's TEMP bytes ---- */
    rt_status (*group_norm_forward)(const rt_chan_shape *s, int64_t groups, float eps, const float *x,
                                    const float *weight, const float *bias, const float *mean_in,
                                    const float *var_in, float *run_mean, float *run_var, float momentum,
                                    float *y, float *stats);
    rt_status (*group_norm_backward)(const rt_chan_shape *s, int64_t groups, int input_stats, const float *x,
                                     const float *stats, const float *gamma, const float *dy, float *dx,
                                     float *dw, float *db);

    /* ---- segmentation losses (kernels/seg_loss.h) ---- */
    /* meta: -1 (no labels to check) */
    int64_t (*labels_first_invalid)(int64_t n, const int32_t *t, int64_t classes, int32_t *value);
    /* meta: books and releases the log-sum-exp buffer's TEMP bytes */
    rt_status (*cross_entropy_nd_forward)(const rt_chan_shape *s, const float *x, const int32_t *t,
                                          const float *w, double *weight_sum, float *y);
    void (*cross_entropy_nd_backward)(const rt_chan_shape *s, const float *x, const int32_t *t, const float *w,
                                      double weight_sum, const float *dy, float *dx);
    void (*soft_dice_forward)(const rt_chan_shape *s, const float *x, const int32_t *t, double smooth,
                              int batch_dice, int include_background, double terms, double *sums, float *y);
    void (*soft_dice_backward)(const rt_chan_shape *s, const int32_t *t, double smooth, int batch_dice,
                               int include_background, double terms, const double *sums, const float *dy,
                               float *dx);
} rt_backend;

/* The table of a device; NULL (message set, RT_ERR_INVALID_ARG) for a value
 * outside rt_device. */
const rt_backend *rt_backend_get(rt_device device);

/* The table of t's device; NULL (message set) for a NULL t. */
const rt_backend *rt_backend_of(const rt_tensor *t);

#endif
