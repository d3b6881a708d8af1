/* ReLU and LeakyReLU over oneDNN eltwise (kernels/eltwise.h). */
#include "kernels/eltwise.h"
#include "ops/op_util.h"
#include "ops/ops.h"

typedef struct rt_relu_ctx {
    float negative_slope;
} rt_relu_ctx;

static rt_status rt_relu_backward(rt_node *self, rt_tensor *const *grad_out, rt_tensor **grad_in) {
    const rt_relu_ctx *c = self->ctx;
    rt_tensor *y, *dy = grad_out[0];
    RT_SAVED(self, 0, y);
    if (!(grad_in[0] = rt_tensor_empty_like(y, RT_MEM_TEMP))) return RT_ERR_OOM;
    /* on meta every pointer is NULL: a dry run that books the kernel's TEMP */
    return rt_kernel_relu_backward(rt_tensor_numel(y), c->negative_slope, rt_tensor_f32(y),
                                   rt_tensor_f32(dy), rt_tensor_f32(grad_in[0]));
}

rt_status rt_leaky_relu(rt_tensor *x, float negative_slope, rt_tensor **out) {
    *out = NULL;
    RT_TRY(rt_op_check_f32(x, "relu", "input"));
    if (!(negative_slope >= 0.0f))
        return rt_error_set(RT_ERR_INVALID_ARG, "leaky_relu: negative_slope must be >= 0 (got %g): "
                            "backward recovers the input's sign from the output", negative_slope);
    rt_tensor *y = rt_tensor_empty_like(x, RT_MEM_TEMP);
    if (!y) return RT_ERR_OOM;
    /* on meta every pointer is NULL: a dry run that books the kernel's TEMP */
    rt_status st = rt_kernel_relu_forward(rt_tensor_numel(x), negative_slope, rt_tensor_f32(x), rt_tensor_f32(y));
    rt_node *node = NULL;
    if (st == RT_OK)
        st = rt_node_create(negative_slope > 0 ? "leaky_relu" : "relu", 1, &x, 1, rt_relu_backward,
                            sizeof(rt_relu_ctx), &node);
    if (st == RT_OK && node) {
        ((rt_relu_ctx *)node->ctx)->negative_slope = negative_slope;
        st = rt_node_save(node, y, NULL);
    }
    return rt_op_return(st, node, y, out);
}

rt_status rt_relu(rt_tensor *x, rt_tensor **out) { return rt_leaky_relu(x, 0.0f, out); }
