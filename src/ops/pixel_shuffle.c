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

/* The shuffle (or, inverse, the unshuffle) of t written over t itself: the
 * permutation keeps each image's elements inside that image's byte range
 * (the same C·r²·H·W floats on both sides, image-major in both memory
 * orders), so one image at a time goes through a one-image scratch and
 * back. Used when nothing else holds t: in backward when the engine has the
 * only reference to the gradient (the convolution after a pixel shuffle
 * hands its fresh input gradient on), in forward for rt_pixel_shuffle_inplace.
 * The high- and low-res tensors then never coexist, which is where EDSR's
 * step peaked (a 64 × 96² tensor and its 256 × 48² permutation at once).
 * The caller changes t's shape. */
static rt_status rt_shuffle_in_place(const rt_shuffle_ctx *c, int inverse, rt_tensor *dy) {
    const int64_t image = rt_tensor_numel(dy) / c->n;
    rt_tensor *scratch = rt_tensor_create(1, &image, RT_F32, dy->device, RT_MEM_TEMP);
    if (!scratch) return RT_ERR_OOM;
    const rt_backend *be = rt_backend_of(dy);
    float *g = rt_tensor_f32(dy), *t = rt_tensor_f32(scratch);
    for (int64_t i = 0; g && i < c->n; i++) { /* g is NULL on meta: only the scratch is booked */
        be->pixel_shuffle(1, c->c, c->h, c->w, c->r, c->block, inverse, g + i * image, t);
        be->memory->copy(g + i * image, t, (size_t)image * sizeof(float));
    }
    rt_tensor_release(scratch);
    return RT_OK;
}

static rt_status rt_shuffle_backward(rt_node *self, rt_tensor *const *grad_out, rt_tensor **grad_in) {
    const rt_shuffle_ctx *c = self->ctx;
    const int64_t lo[4] = {c->n, c->c * c->r * c->r, c->h, c->w}, hi[4] = {c->n, c->c, c->h * c->r, c->w * c->r};
    const int64_t *dx_shape = c->inverse ? hi : lo; /* dx has the input's shape */
    rt_tensor *dy = rt_op_take_exclusive_grad(self, 0, grad_out[0]);
    if (dy) { /* ours alone: permute it in place into dx */
        rt_status st = rt_shuffle_in_place(c, !c->inverse, dy);
        if (st != RT_OK) {
            rt_tensor_release(dy);
            return st;
        }
        memcpy(dy->shape, dx_shape, 4 * sizeof *dx_shape);
        dy->layout = c->layout;
        grad_in[0] = dy;
        return RT_OK;
    }
    /* dy is also held elsewhere (a hook, a retained gradient): permute into a new tensor */
    dy = grad_out[0];
    rt_tensor *dx = rt_tensor_create(4, dx_shape, RT_F32, dy->device, RT_MEM_TEMP);
    if (!dx) return RT_ERR_OOM;
    dx->layout = c->layout; /* dy arrives in the output's order, which is x's */
    rt_backend_of(dy)->pixel_shuffle(c->n, c->c, c->h, c->w, c->r, c->block, !c->inverse, rt_tensor_f32(dy),
                                     rt_tensor_f32(dx));
    grad_in[0] = dx;
    return RT_OK;
}

static rt_status rt_shuffle(const char *op, rt_tensor *x, int64_t r, int inverse, bool consume, rt_tensor **out) {
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
        rt_status st = rt_shuffle(op, plain, r, inverse, true, out); /* plain is ours alone */
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
    rt_tensor *y = NULL;
    if (consume && rt_op_can_consume(x)) {
        RT_TRY(rt_shuffle_in_place(&c, inverse, x));
        if (!(y = rt_op_take_storage(x))) return RT_ERR_OOM;
        memcpy(y->shape, inverse ? lo : hi, sizeof lo); /* the same storage under the output's shape */
    } else {
        y = rt_op_new(x, 4, inverse ? lo : hi);
        if (!y) return RT_ERR_OOM;
        rt_backend_of(x)->pixel_shuffle(c.n, c.c, c.h, c.w, r, c.block, inverse, rt_tensor_f32(x), rt_tensor_f32(y));
    }
    y->layout = x->layout;
    rt_node *node = NULL;
    rt_status st = rt_node_create(op, 1, &x, 1, rt_shuffle_backward, sizeof c, &node);
    if (st == RT_OK && node) memcpy(node->ctx, &c, sizeof c);
    return rt_op_return(st, node, y, out);
}

rt_status rt_pixel_shuffle(rt_tensor *x, int64_t upscale_factor, rt_tensor **out) {
    return rt_shuffle("pixel_shuffle", x, upscale_factor, 0, false, out);
}

rt_status rt_pixel_shuffle_inplace(rt_tensor *x, int64_t upscale_factor, rt_tensor **out) {
    return rt_shuffle("pixel_shuffle", x, upscale_factor, 0, true, out);
}

rt_status rt_pixel_unshuffle(rt_tensor *x, int64_t downscale_factor, rt_tensor **out) {
    return rt_shuffle("pixel_unshuffle", x, downscale_factor, 1, false, out);
}
