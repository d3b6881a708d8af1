/* Transposed convolution op (2-D and 3-D) through the backend's deconv
 * entries (kernels/deconv.h on cpu). */
#include <string.h>

#include "backend/backend.h"
#include "ops/op_util.h"
#include "ops/ops3d.h"

/* f32 only: the table below asks for no bf16 operand */
static rt_status rt_deconv_weights_pass(const rt_backend *be, const void *shape, const void *x, bool x_bf16,
                                        const void *dy, bool dy_bf16, float *dw, float *db) {
    (void)x_bf16, (void)dy_bf16;
    return be->deconv_backward_weights(shape, x, dy, dw, db);
}

static rt_status rt_deconv_data_pass(const rt_backend *be, const void *shape, const float *w, rt_storage *w_cache,
                                     const void *dy, bool dy_bf16, bool dx_bf16, void *dx) {
    (void)dy_bf16, (void)dx_bf16; /* never set: a transposed convolution is f32 */
    return be->deconv_backward_data(shape, w, w_cache, dy, dx);
}

/* Weight and bias gradients first, then the saved input is freed before the
 * input gradient is allocated (rt_conv_like_backward, ops/conv.c). */
static rt_status rt_conv_transpose_backward(rt_node *self, rt_tensor *const *grad_out, rt_tensor **grad_in) {
    static const rt_conv_passes passes = {rt_deconv_weights_pass, rt_deconv_data_pass, false, false};
    const rt_deconv_shape *s = self->ctx;
    return rt_conv_like_backward(self, grad_out, grad_in, s, s->c_out, s->has_bias, &passes);
}

rt_status rt_conv_transpose(rt_tensor *x, rt_tensor *weight, rt_tensor *bias, const rt_conv_transpose_opts *opts,
                            rt_tensor **out) {
    const char *op = "conv_transpose";
    RT_TRY(rt_op_check_out(out, op));
    *out = NULL;
    RT_TRY(rt_op_check_f32(x, op, "input"));
    RT_TRY(rt_op_check_f32(weight, op, "weight"));
    if (bias) RT_TRY(rt_op_check_f32(bias, op, "bias"));
    RT_TRY(rt_op_check_device(x, weight, op));
    if (weight->layout != RT_LAYOUT_PLAIN)
        return rt_error_set(RT_ERR_INVALID_ARG, "%s: the weight must be in PyTorch's plain (C_in, C_out/groups, ...) "
                            "order; convert it with rt_weight_set_layout(weight, RT_LAYOUT_PLAIN)", op);
    RT_TRY(rt_op_check_device(x, bias, op));
    char a[64], b[64];
    if ((x->ndim != 4 && x->ndim != 5) || weight->ndim != x->ndim)
        return rt_error_set(RT_ERR_SHAPE,
                            "conv_transpose: expected input (N, C_in, [D,] H, W) and a weight (C_in, "
                            "C_out/groups, [kD,] kH, kW) of the same rank, got input %s and weight %s",
                            rt_tensor_shape_str(x, a, sizeof a), rt_tensor_shape_str(weight, b, sizeof b));
    rt_conv_transpose_opts o = opts ? *opts : (rt_conv_transpose_opts){0};
    rt_deconv_shape s = {0};
    s.nsp = x->ndim - 2;
    s.n = x->shape[0];
    s.c_in = x->shape[1];
    s.groups = o.groups > 0 ? o.groups : 1;
    s.c_out = weight->shape[1] * s.groups;
    s.has_bias = bias != NULL;
    for (int i = 0; i < s.nsp; i++) {
        s.in[i] = x->shape[2 + i];
        s.k[i] = weight->shape[2 + i];
        s.stride[i] = o.stride[i] > 0 ? o.stride[i] : 1;
        s.pad[i] = o.padding[i];
        s.out_pad[i] = o.output_padding[i];
        s.dil[i] = o.dilation[i] > 0 ? o.dilation[i] : 1;
    }
    if (weight->shape[0] != s.c_in || s.c_in % s.groups)
        return rt_error_set(RT_ERR_SHAPE,
                            "conv_transpose: input %s with groups=%lld needs weight (%lld, C_out/groups, ...) "
                            "(PyTorch's order: in_channels first), got weight %s",
                            rt_tensor_shape_str(x, a, sizeof a), (long long)s.groups, (long long)s.c_in,
                            rt_tensor_shape_str(weight, b, sizeof b));
    if (bias && (bias->ndim != 1 || bias->shape[0] != s.c_out))
        return rt_error_set(RT_ERR_SHAPE, "conv_transpose: bias must be (%lld), got %s", (long long)s.c_out,
                            rt_tensor_shape_str(bias, a, sizeof a));
    s.src_layout = x->layout;
    s.dst_layout = x->layout == RT_LAYOUT_BLOCKED && s.c_out % rt_layout_block() == 0 ? RT_LAYOUT_BLOCKED
                                                                                   : RT_LAYOUT_PLAIN;
    int64_t osp[3];
    RT_TRY(rt_deconv_shape_check(&s, osp));
    int64_t yshape[5] = {s.n, s.c_out};
    for (int i = 0; i < s.nsp; i++) yshape[2 + i] = osp[i];
    rt_tensor *y = rt_op_new(x, x->ndim, yshape);
    if (!y) return RT_ERR_OOM;
    y->layout = s.dst_layout;
    rt_status st = rt_backend_of(x)->deconv_forward(&s, rt_tensor_f32(x), rt_tensor_f32(weight),
                                                    rt_conv_weight_cache_of(weight),
                                                    bias ? rt_tensor_f32(bias) : NULL, rt_tensor_f32(y));
    rt_node *node = NULL;
    rt_tensor *inputs[3] = {x, weight, bias};
    if (st == RT_OK) st = rt_node_create(op, 3, inputs, 1, rt_conv_transpose_backward, sizeof s, &node);
    if (st == RT_OK && node) {
        memcpy(node->ctx, &s, sizeof s);
        st = rt_node_save(node, x, NULL);
        if (st == RT_OK) st = rt_node_save(node, weight, NULL);
    }
    return rt_op_return(st, node, y, out);
}
