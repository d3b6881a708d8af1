/* Plain C reference kernels, used only by tests to check the fast oneDNN
 * kernels (and usable as the spec of their maths). Same shapes, layouts,
 * ownership and PyTorch semantics as conv.h, pool.h and norm.h; they
 * accumulate in double, allocate nothing, and are slow (naive loops).
 * Plain layout only: a shape with a blocked layout field is
 * RT_ERR_INVALID_ARG (convert with rt_kernel_reorder_layout first).
 * Errors: the same shape checks as the fast kernels (RT_ERR_INVALID_ARG /
 * RT_ERR_SHAPE, a NULL shape included); RT_ERR_INVALID_ARG for a NULL
 * required buffer (as for the oneDNN kernels; the optional ones are conv's b and db
 * and batch norm's weight, bias, dweight and dbias). */
#ifndef RT_KERNELS_REFERENCE_H
#define RT_KERNELS_REFERENCE_H

#include "kernels/conv.h"
#include "kernels/norm.h"
#include "kernels/pool.h"

rt_status rt_ref_conv_forward(const rt_conv_shape *s, const float *x, const float *w,
                              const float *b, float *y);
rt_status rt_ref_conv_backward_data(const rt_conv_shape *s, const float *w, const float *dy,
                                    float *dx);
rt_status rt_ref_conv_backward_weights(const rt_conv_shape *s, const float *x, const float *dy,
                                       float *dw, float *db);

/* Max pooling; ties and NaN resolved like PyTorch's CPU kernel (first
 * maximum in window scan order, NaN wins). The backward re-finds the argmax
 * from the forward input x instead of a workspace. */
rt_status rt_ref_maxpool_forward(const rt_pool_shape *s, const float *x, float *y);
rt_status rt_ref_maxpool_backward(const rt_pool_shape *s, const float *x, const float *dy,
                                  float *dx);
rt_status rt_ref_avgpool_forward(const rt_pool_shape *s, const float *x, float *y);
rt_status rt_ref_avgpool_backward(const rt_pool_shape *s, const float *dy, float *dx);

rt_status rt_ref_batchnorm_forward_train(const rt_bn_shape *s, const float *x, const float *weight,
                                         const float *bias, float *y, float *mean, float *var);
rt_status rt_ref_batchnorm_forward_eval(const rt_bn_shape *s, const float *x, const float *weight,
                                        const float *bias, const float *mean, const float *var,
                                        float *y);
rt_status rt_ref_batchnorm_backward(const rt_bn_shape *s, const float *x, const float *dy,
                                    const float *mean, const float *var, const float *weight,
                                    float *dx, float *dweight, float *dbias);

#endif
