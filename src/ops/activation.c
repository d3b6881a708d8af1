/* ReLU and LeakyReLU through the backend's relu entries (oneDNN eltwise,
 * kernels/eltwise.h, on cpu), the fused residual add + ReLU, and tanh /
 * sigmoid (the backend's vec_* entries: kernels/vec.h on cpu). */
#include "backend/backend.h"
#include "ops/op_util.h"
#include "ops/ops.h"

typedef struct rt_relu_ctx {
    float negative_slope;
    /* a bf16 region's node: the backward rounds the arriving gradient to
     * bf16 itself, in its masking pass, and the node's grad_dtype is f32
     * so the engine does not round it first (autograd/node.h) */
    bool round_bf16;
    /* add_relu: input i was bf16 (a block's bf16 interior): its gradient is
     * handed on as bf16, the input's dtype (one conversion of the masked
     * gradient, shared by both inputs when both are bf16) */
    bool in_bf16[2];
} rt_relu_ctx;

static void rt_relu_ctx_init(rt_node *node, float negative_slope) {
    rt_relu_ctx *c = node->ctx;
    c->negative_slope = negative_slope;
    c->round_bf16 = node->grad_dtype == RT_BF16;
    if (c->round_bf16) node->grad_dtype = RT_F32;
}

/* dy masked by the saved output's sign, handed to every input that needs it
 * (relu has one input; add_relu two, which share the tensor). In a
 * precision region the sign is read from the region's half copy of y as
 * it is stored (rt_node_saved_stored): no f32 copy of y is made. */
static rt_status rt_relu_backward(rt_node *self, rt_tensor *const *grad_out, rt_tensor **grad_in) {
    const rt_relu_ctx *c = self->ctx;
    rt_tensor *y = NULL, *yh = NULL, *dy = grad_out[0];
    RT_TRY(rt_node_saved_stored(self, 0, &yh));
    if (yh && yh->dtype != RT_BF16 && yh->dtype != RT_F16) {
        rt_tensor_release(yh);
        yh = NULL;
    }
    if (!yh) RT_SAVED(self, 0, y);
    /* dy is read once, element by element: when nobody else holds it (no
     * hook, no retained gradient, not saved), the gradient overwrites it
     * (the kernels allow dx == dy), so the backward holds one tensor less */
    rt_tensor *g = rt_op_take_exclusive_grad(self, 0, dy); /* ours now, or NULL */
    if (!g && !(g = rt_tensor_empty_like(dy, RT_MEM_TEMP))) {
        rt_tensor_release(yh);
        return RT_ERR_OOM;
    }
    const rt_backend *be = rt_backend_of(dy);
    const int64_t n = rt_tensor_numel(dy);
    rt_status st;
    if (yh) {
        st = be->relu_backward_half(n, c->negative_slope, rt_tensor_data(yh), yh->dtype, rt_tensor_f32(dy),
                                    rt_tensor_f32(g), c->round_bf16 ? RT_BF16 : RT_F32);
    } else {
        /* an f32 y (kept as is by the region): round into g, then mask g */
        const float *src = rt_tensor_f32(dy);
        st = c->round_bf16 ? be->dtype_round_into(src, rt_tensor_f32(g), RT_BF16, (size_t)n) : RT_OK;
        if (c->round_bf16) src = rt_tensor_f32(g);
        if (st == RT_OK) st = be->relu_backward(n, c->negative_slope, rt_tensor_f32(y), src, rt_tensor_f32(g));
    }
    rt_tensor_release(yh);
    rt_tensor *g16 = NULL; /* g as bf16, for a bf16 input (g holds bf16 values then: round_bf16) */
    for (int i = 0; st == RT_OK && i < self->n_inputs; i++) {
        if (!rt_node_needs_grad(self, i)) continue;
        if (i < 2 && c->in_bf16[i] && !g16 && !(g16 = rt_tensor_to(g, RT_BF16, RT_MEM_TEMP)))
            st = rt_error_last_status();
        if (st == RT_OK) grad_in[i] = rt_tensor_retain(i < 2 && c->in_bf16[i] ? g16 : g);
    }
    rt_tensor_release(g16);
    rt_tensor_release(g);
    return st;
}

/* Both forwards: consume writes y over x's storage when rt_op_output_over
 * allows it (the kernel allows y == x; the node saves y, never x). */
static rt_status rt_leaky_relu_op(rt_tensor *x, float negative_slope, bool consume, rt_tensor **out) {
    RT_TRY(rt_op_check_out(out, negative_slope > 0 ? "leaky_relu" : "relu"));
    *out = NULL;
    RT_TRY(rt_op_check_f32(x, negative_slope > 0 ? "leaky_relu" : "relu", "input"));
    if (!(negative_slope >= 0.0f))
        return rt_error_set(RT_ERR_INVALID_ARG, "leaky_relu: negative_slope must be >= 0 (got %g): "
                            "backward recovers the input's sign from the output", negative_slope);
    rt_tensor *y = rt_op_output_over(x, consume, NULL);
    if (!y) return RT_ERR_OOM;
    rt_status st =
        rt_backend_of(x)->relu_forward(rt_tensor_numel(x), negative_slope, rt_tensor_f32(x), rt_tensor_f32(y));
    rt_node *node = NULL;
    if (st == RT_OK)
        st = rt_node_create(negative_slope > 0 ? "leaky_relu" : "relu", 1, &x, 1, rt_relu_backward,
                            sizeof(rt_relu_ctx), &node);
    if (st == RT_OK && node) {
        rt_relu_ctx_init(node, negative_slope);
        st = rt_node_save(node, y, NULL);
    }
    return rt_op_return(st, node, y, out);
}

rt_status rt_leaky_relu(rt_tensor *x, float negative_slope, rt_tensor **out) {
    return rt_leaky_relu_op(x, negative_slope, false, out);
}

rt_status rt_leaky_relu_inplace(rt_tensor *x, float negative_slope, rt_tensor **out) {
    return rt_leaky_relu_op(x, negative_slope, true, out);
}

rt_status rt_relu(rt_tensor *x, rt_tensor **out) { return rt_leaky_relu_op(x, 0.0f, false, out); }

rt_status rt_relu_inplace(rt_tensor *x, rt_tensor **out) { return rt_leaky_relu_op(x, 0.0f, true, out); }

/* Both add_relu forwards: consume writes y over a's storage when
 * rt_op_output_over allows it (the kernel reads a[i] and b[i] before
 * writing y[i]; the node saves y only). */
static rt_status rt_add_relu_op(rt_tensor *a, rt_tensor *b, bool consume, rt_tensor **out) {
    RT_TRY(rt_op_check_out(out, "add_relu"));
    *out = NULL;
    /* a bf16 input (a residual block's bf16 interior, models/resblock.c)
     * is read as it is; the sum is f32, in a new tensor (a bf16 a cannot
     * hold it) */
    bool a16 = a && b && a->dtype == RT_BF16, b16 = a && b && b->dtype == RT_BF16; /* NULLs: checked below */
    if (a16 || b16) {
        if ((!a16 && a->dtype != RT_F32) || (!b16 && b->dtype != RT_F32))
            return rt_error_set(RT_ERR_DTYPE, "add_relu: inputs must be float32 or bfloat16");
        if (a->layout != b->layout)
            return rt_error_set(RT_ERR_INVALID_ARG, "add_relu: a bfloat16 input needs both inputs in one "
                                "memory order (convert with rt_tensor_to)");
    }
    rt_tensor a32 = a16 ? *a : (rt_tensor){0}, b32 = b16 ? *b : (rt_tensor){0};
    a32.dtype = b32.dtype = RT_F32; /* headers for the checks and y's shape only */
    RT_TRY(rt_op_check_pair(a16 ? &a32 : a, b16 ? &b32 : b, "add_relu"));
    rt_tensor *bl = NULL; /* b in a's memory order (b itself when they match) */
    if (a16 || b16)
        bl = rt_tensor_retain(b);
    else
        RT_TRY(rt_to_layout(b, a->layout, &bl));
    rt_tensor *y = a16 || b16 ? rt_tensor_empty_like(a16 ? &a32 : a, RT_MEM_TEMP)
                              : rt_op_output_over(a, consume, bl);
    rt_status st = y ? RT_OK : RT_ERR_OOM;
    if (st == RT_OK && (a16 || b16))
        rt_backend_of(a)->vec_add_relu_half(rt_tensor_numel(a), rt_tensor_data(a), a16, rt_tensor_data(bl), b16,
                                            rt_tensor_f32(y));
    else if (st == RT_OK)
        rt_backend_of(a)->vec_add_relu(rt_tensor_numel(a), rt_tensor_f32(a), rt_tensor_f32(bl), rt_tensor_f32(y));
    rt_node *node = NULL;
    rt_tensor *inputs[2] = {a, bl};
    if (st == RT_OK)
        st = rt_node_create("add_relu", 2, inputs, 1, rt_relu_backward, sizeof(rt_relu_ctx), &node);
    if (st == RT_OK && node) {
        rt_relu_ctx_init(node, 0.0f);
        ((rt_relu_ctx *)node->ctx)->in_bf16[0] = a16;
        ((rt_relu_ctx *)node->ctx)->in_bf16[1] = b16;
        st = rt_node_save(node, y, NULL);
    }
    rt_tensor_release(bl);
    return rt_op_return(st, node, y, out);
}

rt_status rt_add_relu(rt_tensor *a, rt_tensor *b, rt_tensor **out) { return rt_add_relu_op(a, b, false, out); }

rt_status rt_add_relu_inplace(rt_tensor *a, rt_tensor *b, rt_tensor **out) {
    return rt_add_relu_op(a, b, true, out);
}

typedef struct rt_logistic_ctx {
    bool sigmoid; /* else tanh */
} rt_logistic_ctx;

/* dx from the saved OUTPUT y: dy·(1 - y²) for tanh, dy·(1 - y)·y for sigmoid. */
static rt_status rt_logistic_backward(rt_node *self, rt_tensor *const *grad_out, rt_tensor **grad_in) {
    const rt_logistic_ctx *c = self->ctx;
    rt_tensor *y, *dy = grad_out[0];
    RT_SAVED(self, 0, y);
    if (!(grad_in[0] = rt_tensor_empty_like(y, RT_MEM_TEMP))) return RT_ERR_OOM;
    const rt_backend *be = rt_backend_of(dy);
    (c->sigmoid ? be->vec_sigmoid_backward : be->vec_tanh_backward)(rt_tensor_numel(y), rt_tensor_f32(y),
                                                                   rt_tensor_f32(dy), rt_tensor_f32(grad_in[0]));
    return RT_OK;
}

static rt_status rt_logistic(rt_tensor *x, bool sigmoid, rt_tensor **out) {
    const char *op = sigmoid ? "sigmoid" : "tanh";
    RT_TRY(rt_op_check_out(out, op));
    *out = NULL;
    RT_TRY(rt_op_check_f32(x, op, "input"));
    rt_tensor *y = rt_tensor_empty_like(x, RT_MEM_TEMP);
    if (!y) return RT_ERR_OOM;
    const rt_backend *be = rt_backend_of(x);
    (sigmoid ? be->vec_sigmoid : be->vec_tanh)(rt_tensor_numel(x), rt_tensor_f32(x), rt_tensor_f32(y));
    rt_node *node = NULL;
    rt_status st = rt_node_create(op, 1, &x, 1, rt_logistic_backward, sizeof(rt_logistic_ctx), &node);
    if (st == RT_OK && node) {
        ((rt_logistic_ctx *)node->ctx)->sigmoid = sigmoid;
        st = rt_node_save(node, y, NULL);
    }
    return rt_op_return(st, node, y, out);
}

rt_status rt_tanh(rt_tensor *x, rt_tensor **out) { return rt_logistic(x, false, out); }

rt_status rt_sigmoid(rt_tensor *x, rt_tensor **out) { return rt_logistic(x, true, out); }
