/* Resampling ops: bilinear / trilinear (the backend's upsample_linear_*
 * entries) and bicubic (upsample_bicubic_*), kernels/upsample.h on cpu. */
#include <math.h>
#include <string.h>

#include "backend/backend.h"
#include "ops/op_util.h"
#include "ops/ops3d.h"

static rt_status rt_upsample_backward(rt_node *self, rt_tensor *const *grad_out, rt_tensor **grad_in) {
    const rt_upsample_shape *s = self->ctx;
    rt_tensor *dy = grad_out[0];
    int64_t shape[5] = {s->n, s->c};
    for (int i = 0; i < s->nsp; i++) shape[2 + i] = s->in[i];
    rt_tensor *dx = rt_tensor_create(2 + s->nsp, shape, RT_F32, dy->device, RT_MEM_TEMP);
    if (!dx) return RT_ERR_OOM;
    dx->layout = s->layout;
    /* the gradient arrives in the output's order, which is x's */
    rt_backend_of(dy)->upsample_linear_backward(s, rt_tensor_f32(dy), rt_tensor_f32(dx));
    grad_in[0] = dx;
    return RT_OK;
}

static rt_status rt_upsample_bicubic_backward_node(rt_node *self, rt_tensor *const *grad_out, rt_tensor **grad_in) {
    const rt_upsample_shape *s = self->ctx;
    rt_tensor *dy = grad_out[0];
    int64_t shape[4] = {s->n, s->c, s->in[0], s->in[1]};
    rt_tensor *dx = rt_tensor_create(4, shape, RT_F32, dy->device, RT_MEM_TEMP);
    if (!dx) return RT_ERR_OOM;
    dx->layout = s->layout;
    rt_backend_of(dy)->upsample_bicubic_backward(s, rt_tensor_f32(dy), rt_tensor_f32(dx));
    grad_in[0] = dx;
    return RT_OK;
}

/* The checks shared by the resampling ops and the output's shape: x f32 of
 * rank 4 (or 5 when allow5), exactly one of size and scale_factor, every
 * size >= 1. Fills *s and yshape. */
static rt_status rt_upsample_plan(const char *op, const char *expect, rt_tensor *x, bool allow5, const int64_t *size,
                                  const double *scale_factor, rt_upsample_shape *s, int64_t *yshape) {
    RT_TRY(rt_op_check_f32(x, op, "input"));
    char a[64];
    if (x->ndim != 4 && !(allow5 && x->ndim == 5))
        return rt_error_set(RT_ERR_SHAPE, "%s: expected %s, got %s", op, expect, rt_tensor_shape_str(x, a, sizeof a));
    if (!size == !scale_factor)
        return rt_error_set(RT_ERR_INVALID_ARG, "%s: give either size or scale_factor, not %s", op,
                            size ? "both" : "neither");
    *s = (rt_upsample_shape){.nsp = x->ndim - 2, .n = x->shape[0], .c = x->shape[1], .layout = x->layout};
    yshape[0] = s->n;
    yshape[1] = s->c;
    for (int i = 0; i < s->nsp; i++) {
        s->in[i] = x->shape[2 + i];
        if (size) {
            s->out[i] = size[i];
            s->scale[i] = 0.0;
        } else {
            if (!(scale_factor[i] > 0.0) || !isfinite(scale_factor[i]))
                return rt_error_set(RT_ERR_INVALID_ARG, "%s: scale_factor[%d] = %g must be finite and > 0", op, i,
                                    scale_factor[i]);
            s->scale[i] = scale_factor[i];
            s->out[i] = (int64_t)floor((double)s->in[i] * scale_factor[i]);
        }
        if (s->out[i] < 1 || s->in[i] < 1)
            return rt_error_set(RT_ERR_SHAPE, "%s: input %s gives output size %lld on spatial dim %d; every input "
                                "and output size must be >= 1", op, rt_tensor_shape_str(x, a, sizeof a),
                                (long long)s->out[i], i);
        yshape[2 + i] = s->out[i];
    }
    return RT_OK;
}

rt_status rt_upsample_linear(rt_tensor *x, const int64_t *size, const double *scale_factor, rt_tensor **out) {
    const char *op = "upsample_linear";
    RT_TRY(rt_op_check_out(out, op));
    *out = NULL;
    rt_upsample_shape s;
    int64_t yshape[5];
    RT_TRY(rt_upsample_plan(op, "(N, C, H, W) for bilinear or (N, C, D, H, W) for trilinear", x, true, size,
                            scale_factor, &s, yshape));
    rt_tensor *y = rt_op_new(x, x->ndim, yshape);
    if (!y) return RT_ERR_OOM;
    y->layout = x->layout;
    rt_backend_of(x)->upsample_linear_forward(&s, rt_tensor_f32(x), rt_tensor_f32(y));
    rt_node *node = NULL;
    rt_status st = rt_node_create(x->ndim == 5 ? "upsample_trilinear" : "upsample_bilinear", 1, &x, 1,
                                  rt_upsample_backward, sizeof s, &node);
    if (st == RT_OK && node) memcpy(node->ctx, &s, sizeof s);
    return rt_op_return(st, node, y, out);
}

rt_status rt_upsample_bicubic(rt_tensor *x, const int64_t *size, const double *scale_factor, rt_tensor **out) {
    const char *op = "upsample_bicubic";
    RT_TRY(rt_op_check_out(out, op));
    *out = NULL;
    rt_upsample_shape s;
    int64_t yshape[4];
    RT_TRY(rt_upsample_plan(op, "(N, C, H, W) (bicubic is 2-D only, as PyTorch's)", x, false, size, scale_factor,
                            &s, yshape));
    rt_tensor *y = rt_op_new(x, 4, yshape);
    if (!y) return RT_ERR_OOM;
    y->layout = x->layout;
    rt_backend_of(x)->upsample_bicubic_forward(&s, rt_tensor_f32(x), rt_tensor_f32(y));
    rt_node *node = NULL;
    rt_status st = rt_node_create("upsample_bicubic2d", 1, &x, 1, rt_upsample_bicubic_backward_node, sizeof s, &node);
    if (st == RT_OK && node) memcpy(node->ctx, &s, sizeof s);
    return rt_op_return(st, node, y, out);
}
