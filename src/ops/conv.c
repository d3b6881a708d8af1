/* Convolution op (2-D and 3-D) over the oneDNN kernels in kernels/conv.h. */
#include <string.h>

#include "backend/backend.h"
#include "ops/op_util.h"
#include "ops/ops.h"

/* The weight and bias gradients come first: they are the last use of the
 * saved input, which is then freed before the input gradient, of the
 * input's size, is allocated. At the peak of a backward that is one
 * activation less: EDSR's tail convolution at batch 8, 48x48 LR patches,
 * holds 18 MiB less. The results are those of either order (the passes
 * are independent). */
rt_status rt_conv_like_backward(rt_node *self, rt_tensor *const *grad_out, rt_tensor **grad_in, const void *shape,
                                int64_t c_out, bool has_bias, const rt_conv_passes *passes) {
    rt_tensor *x = NULL, *xh = NULL, *w = NULL, *dy = grad_out[0], *dyh = NULL;
    bool in_bf16 = false; /* the input itself was bf16: so is its gradient */
    /* a bf16 pass reads a precision region's bf16 copy of x as it is */
    if (passes->x_bf16) {
        RT_TRY(rt_node_saved_stored(self, 0, &xh));
        if (xh && xh->dtype != RT_BF16) {
            rt_tensor_release(xh);
            xh = NULL;
        }
    }
    rt_status st = xh ? RT_OK : rt_node_saved(self, 0, &x);
    /* a bf16 input (a bf16 region's activation, ops.h rt_conv) is kept as
     * it is: read like the region's copy */
    if (st == RT_OK && !xh && x->dtype == RT_BF16) {
        in_bf16 = true;
        if (passes->x_bf16)
            xh = rt_tensor_retain(x);
        else
            st = rt_error_set(RT_ERR_DTYPE, "%s backward: a bf16 input needs the bf16 passes", self->name);
    }
    if (st == RT_OK) st = rt_node_saved(self, 1, &w);
    /* a bf16 dy (the gradient of a bf16 output) is read as it is (the
     * passes' shapes have compute_bf16: it exists only in a bf16 region);
     * else one conversion for both passes (rounds it as the engine would) */
    if (st == RT_OK && dy->dtype == RT_BF16 && !passes->x_bf16)
        st = rt_error_set(RT_ERR_DTYPE, "%s backward: a bf16 gradient needs the bf16 passes", self->name);
    if (st == RT_OK && dy->dtype == RT_BF16)
        dyh = rt_tensor_retain(dy);
    else if (st == RT_OK && passes->dy_bf16 && !(dyh = rt_tensor_to(dy, RT_BF16, RT_MEM_TEMP)))
        st = rt_error_last_status();
    if (st != RT_OK) {
        rt_tensor_release(xh);
        return st;
    }
    const rt_backend *be = rt_backend_of(xh ? xh : x);
    const void *dyp = dyh ? rt_tensor_data(dyh) : rt_tensor_data(dy);
    rt_tensor x_like = xh ? *xh : *x; /* shape, device and layout of dx, in the input's dtype */
    x_like.dtype = in_bf16 ? RT_BF16 : RT_F32;
    bool need_w = rt_node_needs_grad(self, 1), need_b = has_bias && rt_node_needs_grad(self, 2);
    if (need_w || need_b) {
        /* oneDNN computes both in one pass; an unwanted one is dropped */
        rt_tensor *dw = rt_tensor_empty_like(w, RT_MEM_TEMP);
        rt_tensor *db = has_bias ? rt_tensor_create(1, &c_out, RT_F32, w->device, RT_MEM_TEMP) : NULL;
        st = dw && (db || !has_bias) ? RT_OK : RT_ERR_OOM;
        if (st == RT_OK)
            st = passes->weights(be, shape, rt_tensor_data(xh ? xh : x), xh != NULL, dyp, dyh != NULL,
                                 rt_tensor_f32(dw), db ? rt_tensor_f32(db) : NULL);
        if (st == RT_OK && need_w) grad_in[1] = rt_tensor_retain(dw);
        if (st == RT_OK && need_b) grad_in[2] = rt_tensor_retain(db);
        rt_tensor_release(dw);
        rt_tensor_release(db);
    }
    rt_tensor_release(xh); /* x_like keeps only its shape, device and layout */
    if (st == RT_OK) rt_node_drop_saved(self, 0);
    if (st == RT_OK && rt_node_needs_grad(self, 0)) {
        grad_in[0] = rt_tensor_empty_like(&x_like, RT_MEM_TEMP);
        st = grad_in[0] ? passes->data(be, shape, rt_tensor_f32(w), rt_conv_weight_cache_of(w), dyp, dyh != NULL,
                                       in_bf16, rt_tensor_data(grad_in[0]))
                        : RT_ERR_OOM;
    }
    rt_tensor_release(dyh);
    return st;
}

/* The passes of rt_conv: the shape says which operands are bf16. */
static rt_status rt_conv_weights_pass(const rt_backend *be, const void *shape, const void *x, bool x_bf16,
                                      const void *dy, bool dy_bf16, float *dw, float *db) {
    rt_conv_shape s = *(const rt_conv_shape *)shape;
    s.src_bf16 = x_bf16;
    s.dy_bf16 = dy_bf16;
    return be->conv_backward_weights(&s, x, dy, dw, db);
}

static rt_status rt_conv_data_pass(const rt_backend *be, const void *shape, const float *w, rt_storage *w_cache,
                                   const void *dy, bool dy_bf16, bool dx_bf16, void *dx) {
    rt_conv_shape s = *(const rt_conv_shape *)shape;
    s.dy_bf16 = dy_bf16;
    s.dx_bf16 = dx_bf16;
    return be->conv_backward_data(&s, w, w_cache, dy, dx);
}

static rt_status rt_conv_backward(rt_node *self, rt_tensor *const *grad_out, rt_tensor **grad_in) {
    /* f32: nothing is bf16. A bf16 region's convolution reads the region's
     * bf16 copy of x: a shape that computes in bf16 reads it and a bf16 dy
     * as they are; a Winograd shape, which computes in f32, has oneDNN
     * convert the x (the values an f32 read of the copy gives) and takes
     * the engine's rounded f32 dy */
    static const rt_conv_passes f32 = {rt_conv_weights_pass, rt_conv_data_pass, false, false};
    static const rt_conv_passes bf16_storage = {rt_conv_weights_pass, rt_conv_data_pass, true, false};
    static const rt_conv_passes bf16 = {rt_conv_weights_pass, rt_conv_data_pass, true, true};
    const rt_conv_shape *s = self->ctx;
    /* the forward's decision (its ctx dy_bf16), not the algorithm policy
     * now: a policy changed since would leave dy unrounded */
    const rt_conv_passes *p = !s->compute_bf16 ? &f32 : s->dy_bf16 ? &bf16 : &bf16_storage;
    return rt_conv_like_backward(self, grad_out, grad_in, s, s->c_out, s->has_bias, p);
}

rt_status rt_conv(rt_tensor *x, rt_tensor *weight, rt_tensor *bias, const rt_conv_opts *opts,
                  rt_tensor **out) {
    RT_TRY(rt_op_check_out(out, "conv"));
    *out = NULL;
    bool x_bf16 = false; /* a bf16 activation: only inside a bf16-compute region */
    RT_TRY(rt_op_check_activation(x, "conv", &x_bf16));
    RT_TRY(rt_op_check_f32(weight, "conv", "weight"));
    if (bias) RT_TRY(rt_op_check_f32(bias, "conv", "bias"));
    RT_TRY(rt_op_check_device(x, weight, "conv"));
    RT_TRY(rt_op_check_device(x, bias, "conv"));
    char a[64], b[64];
    if ((x->ndim != 4 && x->ndim != 5) || weight->ndim != x->ndim)
        return rt_error_set(RT_ERR_SHAPE, "conv: expected input (N, C, H, W) or (N, C, D, H, W) and a weight "
                            "of the same rank, got input %s and weight %s",
                            rt_tensor_shape_str(x, a, sizeof a), rt_tensor_shape_str(weight, b, sizeof b));
    rt_conv_opts o = opts ? *opts : (rt_conv_opts){0};
    rt_conv_shape s = {0};
    s.nsp = x->ndim - 2;
    s.n = x->shape[0];
    s.c_in = x->shape[1];
    s.c_out = weight->shape[0];
    s.groups = o.groups > 0 ? o.groups : 1;
    s.has_bias = bias != NULL;
    for (int i = 0; i < s.nsp; i++) {
        s.in[i] = x->shape[2 + i];
        s.k[i] = weight->shape[2 + i];
        s.stride[i] = o.stride[i] > 0 ? o.stride[i] : 1;
        s.pad[i] = o.padding[i];
        s.dil[i] = o.dilation[i] > 0 ? o.dilation[i] : 1;
    }
    if (s.c_in % s.groups || s.c_out % s.groups || weight->shape[1] * s.groups != s.c_in)
        return rt_error_set(RT_ERR_SHAPE, "conv: input %s with groups=%lld needs weight (OC, %lld, ...) "
                            "with OC divisible by groups, got weight %s",
                            rt_tensor_shape_str(x, a, sizeof a), (long long)s.groups,
                            (long long)(s.c_in / s.groups), rt_tensor_shape_str(weight, b, sizeof b));
    if (bias && (bias->ndim != 1 || bias->shape[0] != s.c_out))
        return rt_error_set(RT_ERR_SHAPE, "conv: bias must be (%lld), got %s", (long long)s.c_out,
                            rt_tensor_shape_str(bias, a, sizeof a));
    int64_t osp[3];
    rt_conv_out_size(&s, osp);
    int64_t yshape[5] = {s.n, s.c_out};
    for (int i = 0; i < s.nsp; i++) {
        if (osp[i] <= 0)
            return rt_error_set(RT_ERR_SHAPE, "conv: input %s is too small for kernel %s with this "
                                "padding/dilation (output size %lld)", rt_tensor_shape_str(x, a, sizeof a),
                                rt_tensor_shape_str(weight, b, sizeof b), (long long)osp[i]);
        yshape[2 + i] = osp[i];
    }
    /* The output stays in the blocked order when the input is in it and the
     * output channels fill whole blocks: no reorder around the primitive.
     * A channels-last input keeps its order too (core/layout.h). */
    s.src_layout = x->layout;
    bool blocked_out = x->layout == RT_LAYOUT_BLOCKED || o.preferred_output;
    s.dst_layout = blocked_out && s.c_out % rt_layout_block() == 0 ? RT_LAYOUT_BLOCKED : RT_LAYOUT_PLAIN;
    if (x->layout == RT_LAYOUT_CHANNELS_LAST && !o.preferred_output) s.dst_layout = RT_LAYOUT_CHANNELS_LAST;
    s.wei_layout = weight->layout; /* rt_weight_set_layout; dw is made like the weight, in its order */
    /* a bf16 precision region computes in bf16 where oneDNN has the kernel
     * (memory/precision.h); backward reuses s, so its passes match */
    s.compute_bf16 = rt_autocast_compute_dtype() == RT_BF16 && rt_backend_of(x)->conv_bf16_available();
    /* the output is bf16 where the region hands activations on in bf16 and
     * this shape computes in bf16 (a Winograd shape writes f32) */
    bool y_bf16 = rt_autocast_activation_dtype() == RT_BF16 && rt_conv_computes_bf16(&s);
    rt_tensor *y = y_bf16 ? rt_tensor_create(x->ndim, yshape, RT_BF16, x->device, RT_MEM_TEMP)
                          : rt_op_new(x, x->ndim, yshape);
    if (!y) return RT_ERR_OOM;
    y->layout = s.dst_layout;
    /* The node saves x before the forward runs: in a bf16 region that makes
     * the bf16 copy backward keeps, and a shape that computes in bf16 reads
     * that copy instead of converting x a second time (the same values). */
    rt_node *node = NULL;
    rt_tensor *inputs[3] = {x, weight, bias}, *xh = NULL;
    rt_status st = rt_node_create("conv", 3, inputs, 1, rt_conv_backward, sizeof s, &node);
    if (st == RT_OK && node) {
        /* the backward converts dy to bf16 (ctx dy_bf16), which rounds it
         * as a bf16 region's engine would: that rounding is skipped */
        rt_conv_shape *ctx = node->ctx;
        *ctx = s;
        ctx->dy_bf16 = rt_conv_computes_bf16(&s);
        if (ctx->dy_bf16 && node->grad_dtype == RT_BF16) node->grad_dtype = RT_F32;
        st = rt_node_save(node, x, NULL);
        if (st == RT_OK) st = rt_node_save(node, weight, NULL);
        if (st == RT_OK && ctx->dy_bf16) {
            st = rt_node_saved_stored(node, 0, &xh);
            if (xh && xh->dtype != RT_BF16) {
                rt_tensor_release(xh);
                xh = NULL;
            }
        }
    }
    /* a bf16 x (the region's copy, or a bf16 activation) is read as it is:
     * a bf16 kernel directly, a Winograd one through the entry's reorder */
    rt_conv_shape fs = s;
    fs.src_bf16 = xh != NULL || x_bf16;
    fs.dst_bf16 = y_bf16;
    if (st == RT_OK)
        st = rt_backend_of(x)->conv_forward(&fs, rt_tensor_data(xh ? xh : x), rt_tensor_f32(weight),
                                            rt_conv_weight_cache_of(weight), bias ? rt_tensor_f32(bias) : NULL,
                                            rt_tensor_data(y));
    rt_tensor_release(xh);
    return rt_op_return(st, node, y, out);
}
