/* Fully connected op: the backend's sgemm and bias entries (OpenBLAS and
 * kernels/blas.h on cpu). */
#include "backend/backend.h"
#include "ops/op_util.h"
#include "ops/ops.h"

static rt_status rt_linear_backward(rt_node *self, rt_tensor *const *grad_out, rt_tensor **grad_in) {
    rt_tensor *x, *w, *dy = grad_out[0];
    RT_SAVED(self, 0, x);
    RT_SAVED(self, 1, w);
    int64_t n = x->shape[0], in = x->shape[1], outf = w->shape[0];
    const rt_backend *be = rt_backend_of(dy);
    if (rt_node_needs_grad(self, 0)) { /* dx = dy · W */
        if (!(grad_in[0] = rt_tensor_empty_like(x, RT_MEM_TEMP))) return RT_ERR_OOM;
        be->sgemm(0, 0, n, in, outf, 1.0f, rt_tensor_f32(dy), outf, rt_tensor_f32(w), in, 0.0f,
                  rt_tensor_f32(grad_in[0]), in);
    }
    if (rt_node_needs_grad(self, 1)) { /* dW = dyᵀ · x */
        if (!(grad_in[1] = rt_tensor_empty_like(w, RT_MEM_TEMP))) return RT_ERR_OOM;
        be->sgemm(1, 0, outf, in, n, 1.0f, rt_tensor_f32(dy), outf, rt_tensor_f32(x), in, 0.0f,
                  rt_tensor_f32(grad_in[1]), in);
    }
    if (self->n_inputs > 2 && rt_node_needs_grad(self, 2)) { /* db = Σ_rows dy */
        if (!(grad_in[2] = rt_tensor_zeros(1, &outf, RT_F32, dy->device, RT_MEM_TEMP))) return RT_ERR_OOM;
        be->rows_sum(n, outf, rt_tensor_f32(dy), rt_tensor_f32(grad_in[2]));
    }
    return RT_OK;
}

rt_status rt_linear(rt_tensor *x, rt_tensor *weight, rt_tensor *bias, rt_tensor **out) {
    RT_TRY(rt_op_check_out(out, "linear"));
    *out = NULL;
    RT_TRY(rt_op_check_f32(x, "linear", "input"));
    RT_TRY(rt_op_check_f32(weight, "linear", "weight"));
    if (bias) RT_TRY(rt_op_check_f32(bias, "linear", "bias"));
    RT_TRY(rt_op_check_device(x, weight, "linear"));
    RT_TRY(rt_op_check_device(x, bias, "linear"));
    char a[64], b[64];
    if (x->ndim != 2 || weight->ndim != 2 || weight->shape[1] != x->shape[1] ||
        (bias && (bias->ndim != 1 || bias->shape[0] != weight->shape[0])))
        return rt_error_set(RT_ERR_SHAPE, "linear: expected input (N, in), weight (out, in) and bias (out), "
                            "got input %s and weight %s; flatten the input first (rt_flatten)",
                            rt_tensor_shape_str(x, a, sizeof a), rt_tensor_shape_str(weight, b, sizeof b));
    int64_t n = x->shape[0], in = x->shape[1], outf = weight->shape[0];
    int64_t yshape[2] = {n, outf};
    rt_tensor *y = rt_op_new(x, 2, yshape);
    if (!y) return RT_ERR_OOM;
    const rt_backend *be = rt_backend_of(x);
    if (bias) be->rows_fill(n, outf, rt_tensor_f32(bias), rt_tensor_f32(y));
    be->sgemm(0, 1, n, outf, in, 1.0f, rt_tensor_f32(x), in, rt_tensor_f32(weight), in, bias ? 1.0f : 0.0f,
              rt_tensor_f32(y), outf);
    rt_node *node = NULL;
    rt_tensor *inputs[3] = {x, weight, bias};
    rt_status st = rt_node_create("linear", bias ? 3 : 2, inputs, 1, rt_linear_backward, 0, &node);
    if (st == RT_OK && node) {
        st = rt_node_save(node, x, NULL);
        if (st == RT_OK) st = rt_node_save(node, weight, NULL);
    }
    return rt_op_return(st, node, y, out);
}
