/* Elementwise add, subtract, scalar multiply, square and power (the
 * backend's vec_* entries: kernels/vec.h on cpu). */
#include <math.h>

#include "backend/backend.h"
#include "ops/op_util.h"
#include "ops/ops.h"

typedef struct rt_scale_ctx {
    float scale_a, scale_b; /* gradient factor for each input (add: 1,1; sub: 1,-1) */
} rt_scale_ctx;

/* Gradient of a·x or a·x + b·y: each input gets its factor times dy; a
 * factor of 1 passes dy itself (the engine copies before summing into it). */
static rt_status rt_linear_combo_backward(rt_node *self, rt_tensor *const *grad_out, rt_tensor **grad_in) {
    const rt_scale_ctx *c = self->ctx;
    rt_tensor *dy = grad_out[0];
    const float f[2] = {c->scale_a, c->scale_b};
    for (int i = 0; i < self->n_inputs; i++) {
        if (!rt_node_needs_grad(self, i)) continue;
        if (f[i] == 1.0f) {
            grad_in[i] = rt_tensor_retain(dy);
            continue;
        }
        if (!(grad_in[i] = rt_tensor_empty_like(dy, RT_MEM_TEMP))) return RT_ERR_OOM;
        rt_backend_of(dy)->vec_scale(rt_tensor_numel(dy), f[i], rt_tensor_f32(dy), rt_tensor_f32(grad_in[i]));
    }
    return RT_OK;
}

static rt_status rt_binary(rt_tensor *a, rt_tensor *b, float sign_b, bool consume, const char *op,
                           rt_tensor **out) {
    RT_TRY(rt_op_check_out(out, op));
    *out = NULL;
    RT_TRY(rt_op_check_pair(a, b, op));
    rt_tensor *bl = NULL; /* b in a's memory order (b itself when they match) */
    RT_TRY(rt_to_layout(b, a->layout, &bl));
    rt_tensor *y = rt_op_output_over(a, consume, bl); /* over a when the caller handed it over */
    rt_status st = y ? RT_OK : RT_ERR_OOM;
    if (st == RT_OK) {
        const rt_backend *be = rt_backend_of(a);
        (sign_b > 0 ? be->vec_add : be->vec_sub)(rt_tensor_numel(a), rt_tensor_f32(a), rt_tensor_f32(bl),
                                                  rt_tensor_f32(y));
    }
    rt_node *node = NULL;
    rt_tensor *inputs[2] = {a, bl};
    if (st == RT_OK)
        st = rt_node_create(op, 2, inputs, 1, rt_linear_combo_backward, sizeof(rt_scale_ctx), &node);
    if (st == RT_OK && node) *(rt_scale_ctx *)node->ctx = (rt_scale_ctx){1.0f, sign_b};
    rt_tensor_release(bl);
    return rt_op_return(st, node, y, out);
}

rt_status rt_add(rt_tensor *a, rt_tensor *b, rt_tensor **out) { return rt_binary(a, b, 1.0f, false, "add", out); }

rt_status rt_sub(rt_tensor *a, rt_tensor *b, rt_tensor **out) { return rt_binary(a, b, -1.0f, false, "sub", out); }

rt_status rt_add_inplace(rt_tensor *a, rt_tensor *b, rt_tensor **out) {
    return rt_binary(a, b, 1.0f, true, "add", out);
}

rt_status rt_sub_inplace(rt_tensor *a, rt_tensor *b, rt_tensor **out) {
    return rt_binary(a, b, -1.0f, true, "sub", out);
}

static rt_status rt_scale(rt_tensor *x, float scale, bool consume, rt_tensor **out) {
    RT_TRY(rt_op_check_out(out, "mul_scalar"));
    *out = NULL;
    RT_TRY(rt_op_check_f32(x, "mul_scalar", "input"));
    rt_tensor *y = rt_op_output_over(x, consume, NULL);
    if (!y) return RT_ERR_OOM;
    rt_backend_of(x)->vec_scale(rt_tensor_numel(x), scale, rt_tensor_f32(x), rt_tensor_f32(y)); /* may alias */
    rt_node *node = NULL;
    rt_status st = rt_node_create("mul_scalar", 1, &x, 1, rt_linear_combo_backward, sizeof(rt_scale_ctx), &node);
    if (st == RT_OK && node) *(rt_scale_ctx *)node->ctx = (rt_scale_ctx){scale, 0.0f};
    return rt_op_return(st, node, y, out);
}

rt_status rt_mul_scalar(rt_tensor *x, float scale, rt_tensor **out) { return rt_scale(x, scale, false, out); }

rt_status rt_mul_scalar_inplace(rt_tensor *x, float scale, rt_tensor **out) { return rt_scale(x, scale, true, out); }

typedef struct rt_pow_ctx {
    float p;
} rt_pow_ctx;

/* dx = dy·(p·x^(p-1)) from the saved input (zeros for p = 0). */
static rt_status rt_pow_backward(rt_node *self, rt_tensor *const *grad_out, rt_tensor **grad_in) {
    const rt_pow_ctx *c = self->ctx;
    rt_tensor *x, *dy = grad_out[0];
    RT_SAVED(self, 0, x);
    if (!(grad_in[0] = rt_tensor_empty_like(x, RT_MEM_TEMP))) return RT_ERR_OOM;
    rt_backend_of(dy)->vec_pow_backward(rt_tensor_numel(x), c->p, rt_tensor_f32(x), rt_tensor_f32(dy),
                                        rt_tensor_f32(grad_in[0]));
    return RT_OK;
}

/* x^p elementwise (any memory order); `op` names the node and messages. */
static rt_status rt_pow_op(rt_tensor *x, float p, const char *op, rt_tensor **out) {
    RT_TRY(rt_op_check_out(out, op));
    *out = NULL;
    RT_TRY(rt_op_check_f32(x, op, "input"));
    if (!isfinite(p))
        return rt_error_set(RT_ERR_INVALID_ARG, "%s: the exponent must be finite, got %g", op, (double)p);
    rt_tensor *y = rt_tensor_empty_like(x, RT_MEM_TEMP);
    if (!y) return RT_ERR_OOM;
    rt_backend_of(x)->vec_pow(rt_tensor_numel(x), p, rt_tensor_f32(x), rt_tensor_f32(y));
    rt_node *node = NULL;
    rt_status st = rt_node_create(op, 1, &x, 1, rt_pow_backward, sizeof(rt_pow_ctx), &node);
    if (st == RT_OK && node) {
        ((rt_pow_ctx *)node->ctx)->p = p;
        st = rt_node_save(node, x, NULL);
    }
    return rt_op_return(st, node, y, out);
}

rt_status rt_square(rt_tensor *x, rt_tensor **out) { return rt_pow_op(x, 2.0f, "square", out); }

rt_status rt_pow_scalar(rt_tensor *x, float p, rt_tensor **out) { return rt_pow_op(x, p, "pow_scalar", out); }

/* d(a·b): da = dy·b, db = dy·a, each from the other input saved at forward
 * (only the one whose partner needs a gradient is saved). */
static rt_status rt_mul_backward(rt_node *self, rt_tensor *const *grad_out, rt_tensor **grad_in) {
    rt_tensor *dy = grad_out[0];
    const int *slot = self->ctx; /* slot[i]: the saved partner of input i, -1 when input i needs none */
    for (int i = 0; i < 2; i++) {
        if (!rt_node_needs_grad(self, i)) continue;
        rt_tensor *other = NULL;
        RT_SAVED(self, slot[i], other);
        rt_tensor *dyl = NULL; /* dy in the partner's memory order */
        RT_TRY(rt_to_layout(dy, other->layout, &dyl));
        if (!(grad_in[i] = rt_tensor_empty_like(other, RT_MEM_TEMP))) {
            rt_tensor_release(dyl);
            return RT_ERR_OOM;
        }
        rt_backend_of(dy)->vec_mul(rt_tensor_numel(dy), rt_tensor_f32(dyl), rt_tensor_f32(other),
                                   rt_tensor_f32(grad_in[i]));
        rt_tensor_release(dyl);
    }
    return RT_OK;
}

rt_status rt_mul(rt_tensor *a, rt_tensor *b, rt_tensor **out) {
    RT_TRY(rt_op_check_out(out, "mul"));
    *out = NULL;
    RT_TRY(rt_op_check_pair(a, b, "mul"));
    rt_tensor *bl = NULL; /* b in a's memory order (b itself when they match) */
    RT_TRY(rt_to_layout(b, a->layout, &bl));
    rt_tensor *y = rt_tensor_empty_like(a, RT_MEM_TEMP);
    rt_status st = y ? RT_OK : RT_ERR_OOM;
    if (st == RT_OK) rt_backend_of(a)->vec_mul(rt_tensor_numel(a), rt_tensor_f32(a), rt_tensor_f32(bl), rt_tensor_f32(y));
    rt_node *node = NULL;
    rt_tensor *inputs[2] = {a, bl};
    if (st == RT_OK) st = rt_node_create("mul", 2, inputs, 1, rt_mul_backward, 2 * sizeof(int), &node);
    if (st == RT_OK && node) {
        int *slot = node->ctx;
        slot[0] = slot[1] = -1;
        /* a's gradient needs b, b's needs a; a tensor both need is saved once */
        if (rt_node_needs_grad(node, 0)) st = rt_node_save(node, bl, &slot[0]);
        if (st == RT_OK && rt_node_needs_grad(node, 1)) {
            if (a == bl && slot[0] >= 0) slot[1] = slot[0];
            else st = rt_node_save(node, a, &slot[1]);
        }
    }
    rt_tensor_release(bl);
    return rt_op_return(st, node, y, out);
}
