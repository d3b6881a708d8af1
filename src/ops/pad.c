/* Constant padding and cropping (F.pad, mode="constant"): one op whose
 * negative pads crop, so cropping needs no op of its own and the backward of
 * either is the same copy with the pads negated. */
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "ops/op_util.h"
#include "ops/ops3d.h"

/* What backward needs: the input's shape and the per-dim leading pad. */
typedef struct rt_pad_ctx {
    int ndim;
    int64_t in[5], before[5];
} rt_pad_ctx;

static rt_status rt_pad_backward(rt_node *self, rt_tensor *const *grad_out, rt_tensor **grad_in) {
    const rt_pad_ctx *c = self->ctx;
    rt_tensor *dy = grad_out[0];
    rt_tensor *dx = rt_tensor_create(c->ndim, c->in, RT_F32, dy->device, RT_MEM_TEMP);
    if (!dx) return RT_ERR_OOM;
    int64_t neg[5];
    for (int d = 0; d < c->ndim; d++) neg[d] = -c->before[d];
    /* the gradient arrives in the output's (PLAIN) order */
    rt_backend_of(dy)->pad_copy(c->ndim, dy->shape, rt_tensor_f32(dy), c->in, neg, 0.0f, rt_tensor_f32(dx));
    grad_in[0] = dx;
    return RT_OK;
}

rt_status rt_pad_constant(rt_tensor *x, int npad, const int64_t *pad, float value, rt_tensor **out) {
    const char *op = "pad";
    RT_TRY(rt_op_check_out(out, op));
    *out = NULL;
    RT_TRY(rt_op_check_f32(x, op, "input"));
    if (!pad && npad > 0) return rt_error_set(RT_ERR_INVALID_ARG, "pad: pad is NULL with npad = %d", npad);
    char a[64];
    if (x->ndim < 1 || npad < 0 || npad % 2 || npad / 2 > x->ndim)
        return rt_error_set(RT_ERR_INVALID_ARG, "pad: npad = %d must be even and at most 2 × the rank of input %s "
                            "(pairs (before, after) from the last dim backwards, as F.pad)", npad,
                            rt_tensor_shape_str(x, a, sizeof a));
    if (x->layout == RT_LAYOUT_BLOCKED) { /* the copy works on the plain order; so does the output */
        rt_tensor *plain = NULL;
        RT_TRY(rt_to_layout(x, RT_LAYOUT_PLAIN, &plain));
        rt_status st = rt_pad_constant(plain, npad, pad, value, out);
        rt_tensor_release(plain);
        return st;
    }
    rt_pad_ctx c = {.ndim = x->ndim};
    int64_t shape[5];
    for (int d = 0; d < x->ndim; d++) {
        int k = x->ndim - 1 - d; /* pair index: the last dim is pair 0 */
        int64_t b = k < npad / 2 ? pad[2 * k] : 0, e = k < npad / 2 ? pad[2 * k + 1] : 0;
        c.in[d] = x->shape[d];
        c.before[d] = b;
        shape[d] = x->shape[d] + b + e;
        if (shape[d] < 1)
            return rt_error_set(RT_ERR_SHAPE, "pad: pads (%lld, %lld) on dim %d of input %s leave size %lld; every "
                                "output size must be >= 1", (long long)b, (long long)e, d,
                                rt_tensor_shape_str(x, a, sizeof a), (long long)shape[d]);
    }
    rt_tensor *y = rt_op_new(x, x->ndim, shape);
    if (!y) return RT_ERR_OOM;
    rt_backend_of(x)->pad_copy(x->ndim, x->shape, rt_tensor_f32(x), shape, c.before, value, rt_tensor_f32(y));
    rt_node *node = NULL;
    rt_status st = rt_node_create("pad", 1, &x, 1, rt_pad_backward, sizeof c, &node);
    if (st == RT_OK && node) memcpy(node->ctx, &c, sizeof c);
    return rt_op_return(st, node, y, out);
}
