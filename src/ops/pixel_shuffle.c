/* Pixel shuffle and unshuffle (torch.nn.functional.pixel_shuffle /
 * pixel_unshuffle): the backend's pixel_shuffle entry
 * (kernels/pixel_shuffle.h), each op's backward the other's permutation. */
#include <string.h>

#include "backend/backend.h"
#include "ops/op_util.h"
#include "ops/ops.h"

/* What backward needs: the high-res channels, the low-res size, r, the
 * memory order's channel block (1: plain) and the direction of the forward. */
typedef struct rt_shuffle_ctx {
    int64_t n, c, h, w, r, block;
    int inverse;
    rt_layout layout;
} rt_shuffle_ctx;

static rt_status rt_shuffle_backward(rt_node *self, rt_tensor *const *grad_out, rt_tensor **grad_in) {
    const rt_shuffle_ctx *c = self->ctx;
    rt_tensor *dy = grad_out[0];
    const int64_t lo[4] = {c->n, c->c * c->r * c->r, c->h, c->w}, hi[4] = {c->n, c->c, c->h * c->r, c->w * c->r};
    /* dx has the input's shape: lo for the shuffle, hi for the unshuffle */
    rt_tensor *dx = rt_tensor_create(4, c->inverse ? hi : lo, RT_F32, dy->device, RT_MEM_TEMP);
    if (!dx) return RT_ERR_OOM;
    dx->layout = c->layout; /* dy arrives in the output's order, which is x's */
    rt_backend_of(dy)->pixel_shuffle(c->n, c->c, c->h, c->w, c->r, c->block, !c->inverse, rt_tensor_f32(dy),
                                     rt_tensor_f32(dx));
    grad_in[0] = dx;
    return RT_OK;
}

static rt_status rt_shuffle(const char *op, rt_tensor *x, int64_t r, int inverse, rt_tensor **out) {
    RT_TRY(rt_op_check_out(out, op));
    *out = NULL;
    RT_TRY(rt_op_check_f32(x, op, "input"));
    char a[64];
    if (x->ndim != 4)
        return rt_error_set(RT_ERR_SHAPE, "%s: expected a 4-D input (N, C, H, W), got %s", op,
                            rt_tensor_shape_str(x, a, sizeof a));
    if (r < 1)
        return rt_error_set(RT_ERR_INVALID_ARG, "%s: %s = %lld must be >= 1", op,
                            inverse ? "downscale_factor" : "upscale_factor", (long long)r);
    if (!inverse && x->shape[1] % (r * r) != 0)
        return rt_error_set(RT_ERR_SHAPE, "%s: input %s has %lld channels, not a multiple of upscale_factor² = %lld "
                            "(give the convolution before it C·r² outputs)", op, rt_tensor_shape_str(x, a, sizeof a),
                            (long long)x->shape[1], (long long)(r * r));
    if (inverse && (x->shape[2] % r != 0 || x->shape[3] % r != 0))
        return rt_error_set(RT_ERR_SHAPE, "%s: input %s: height and width must be multiples of downscale_factor = "
                            "%lld (crop or pad first)", op, rt_tensor_shape_str(x, a, sizeof a), (long long)r);
    /* a blocked x stays blocked when the high-res channels fill whole
     * blocks (the low-res ones then do too); otherwise both sides go plain */
    if (x->layout == RT_LAYOUT_BLOCKED && (inverse ? x->shape[1] : x->shape[1] / (r * r)) % rt_layout_block() != 0) {
        rt_tensor *plain = NULL;
        RT_TRY(rt_to_layout(x, RT_LAYOUT_PLAIN, &plain));
        rt_status st = rt_shuffle(op, plain, r, inverse, out);
        rt_tensor_release(plain);
        return st;
    }
    rt_shuffle_ctx c = {.n = x->shape[0], .r = r, .inverse = inverse, .layout = x->layout,
                        .block = x->layout == RT_LAYOUT_BLOCKED ? rt_layout_block() : 1};
    if (!inverse) {
        c.c = x->shape[1] / (r * r);
        c.h = x->shape[2];
        c.w = x->shape[3];
    } else {
        c.c = x->shape[1];
        c.h = x->shape[2] / r;
        c.w = x->shape[3] / r;
    }
    const int64_t lo[4] = {c.n, c.c * r * r, c.h, c.w}, hi[4] = {c.n, c.c, c.h * r, c.w * r};
    rt_tensor *y = rt_op_new(x, 4, inverse ? lo : hi);
    if (!y) return RT_ERR_OOM;
    y->layout = x->layout;
    rt_backend_of(x)->pixel_shuffle(c.n, c.c, c.h, c.w, r, c.block, inverse, rt_tensor_f32(x), rt_tensor_f32(y));
    rt_node *node = NULL;
    rt_status st = rt_node_create(op, 1, &x, 1, rt_shuffle_backward, sizeof c, &node);
    if (st == RT_OK && node) memcpy(node->ctx, &c, sizeof c);
    return rt_op_return(st, node, y, out);
}

rt_status rt_pixel_shuffle(rt_tensor *x, int64_t upscale_factor, rt_tensor **out) {
    return rt_shuffle("pixel_shuffle", x, upscale_factor, 0, out);
}

rt_status rt_pixel_unshuffle(rt_tensor *x, int64_t downscale_factor, rt_tensor **out) {
    return rt_shuffle("pixel_unshuffle", x, downscale_factor, 1, out);
}
