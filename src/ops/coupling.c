#include "ops/coupling.h"

#include "backend/backend.h"
#include "ops/op_util.h"

/* Per-sample sizes of the (s_raw, t) layout: the channel halves of st are
 * each `inner` = C·spatial floats long within a sample of 2·inner floats. */
static rt_status rt_coupling_check(rt_tensor *x2, rt_tensor *st, const char *op, int64_t *n, int64_t *inner) {
    RT_TRY(rt_op_check_f32(x2, op, "x2"));
    RT_TRY(rt_op_check_f32(st, op, "scale/shift"));
    RT_TRY(rt_op_check_device(x2, st, op));
    if (x2->layout != st->layout)
        return rt_error_set(RT_ERR_INVALID_ARG, "%s: x2 and G's output are in different memory orders; convert "
                            "one with rt_to_layout", op);
    bool ok = x2->ndim == st->ndim && x2->ndim >= 2 && st->shape[1] == 2 * x2->shape[1];
    for (int i = 0; ok && i < x2->ndim; i++) ok = i == 1 || x2->shape[i] == st->shape[i];
    if (!ok) {
        char a[64], b[64];
        return rt_error_set(RT_ERR_SHAPE, "%s: G must output 2·C channels (log-scale, shift) for x2 %s, got %s", op,
                            rt_tensor_shape_str(x2, a, sizeof a), rt_tensor_shape_str(st, b, sizeof b));
    }
    *n = x2->shape[0];
    *inner = x2->shape[0] ? rt_tensor_numel(x2) / x2->shape[0] : 0;
    return RT_OK;
}

static rt_status rt_affine_backward(rt_node *self, rt_tensor *const *grad_out, rt_tensor **grad_in) {
    rt_tensor *x2, *st, *dy = grad_out[0];
    RT_SAVED(self, 0, x2);
    RT_SAVED(self, 1, st);
    int64_t n = x2->shape[0], inner = rt_tensor_numel(x2) / (n ? n : 1);
    rt_tensor *dx = rt_node_needs_grad(self, 0) ? rt_tensor_empty_like(x2, RT_MEM_TEMP) : NULL;
    rt_tensor *dst = rt_node_needs_grad(self, 1) ? rt_tensor_empty_like(st, RT_MEM_TEMP) : NULL;
    if ((rt_node_needs_grad(self, 0) && !dx) || (rt_node_needs_grad(self, 1) && !dst)) {
        rt_tensor_release(dx);
        rt_tensor_release(dst);
        return RT_ERR_OOM;
    }
    rt_backend_of(dy)->affine_coupling_backward(n, inner, RT_AFFINE_CLAMP, rt_tensor_f32(x2), rt_tensor_f32(st),
                                                rt_tensor_f32(dy), dx ? rt_tensor_f32(dx) : NULL,
                                                dst ? rt_tensor_f32(dst) : NULL);
    grad_in[0] = dx;
    grad_in[1] = dst;
    return RT_OK;
}

rt_status rt_affine_coupling(rt_tensor *x2, rt_tensor *st, rt_tensor **out) {
    RT_TRY(rt_op_check_out(out, "affine_coupling"));
    *out = NULL;
    int64_t n, inner;
    RT_TRY(rt_coupling_check(x2, st, "affine_coupling", &n, &inner));
    rt_tensor *y = rt_tensor_empty_like(x2, RT_MEM_TEMP);
    if (!y) return RT_ERR_OOM;
    /* RT_ERR_NONFINITE naming the first bad output (not checked on meta) */
    rt_status s = rt_backend_of(x2)->affine_coupling_forward(n, inner, RT_AFFINE_CLAMP, rt_tensor_f32(x2),
                                                             rt_tensor_f32(st), rt_tensor_f32(y));
    if (s != RT_OK) {
        rt_tensor_release(y);
        return s;
    }
    rt_node *node = NULL;
    rt_tensor *inputs[2] = {x2, st};
    s = rt_node_create("affine_coupling", 2, inputs, 1, rt_affine_backward, 0, &node);
    if (s == RT_OK && node) s = rt_node_save(node, x2, NULL);
    if (s == RT_OK && node) s = rt_node_save(node, st, NULL);
    return rt_op_return(s, node, y, out);
}

rt_status rt_affine_coupling_inverse(rt_tensor *y2, rt_tensor *st, rt_tensor **out) {
    RT_TRY(rt_op_check_out(out, "affine_coupling_inverse"));
    *out = NULL;
    int64_t n, inner;
    RT_TRY(rt_coupling_check(y2, st, "affine_coupling_inverse", &n, &inner));
    rt_tensor *x = rt_tensor_empty_like(y2, RT_MEM_TEMP);
    if (!x) return RT_ERR_OOM;
    rt_backend_of(y2)->affine_coupling_inverse(n, inner, RT_AFFINE_CLAMP, rt_tensor_f32(y2), rt_tensor_f32(st),
                                               rt_tensor_f32(x));
    *out = x;
    return RT_OK;
}

rt_status rt_affine_coupling_logdet(rt_tensor *st, rt_tensor **out) {
    RT_TRY(rt_op_check_out(out, "affine_coupling_logdet"));
    *out = NULL;
    RT_TRY(rt_op_check_f32(st, "affine_coupling_logdet", "scale/shift"));
    if (st->ndim < 2 || st->shape[1] % 2) {
        char a[64];
        return rt_error_set(RT_ERR_SHAPE, "affine_coupling_logdet: expected (N, 2C, ...), got %s",
                            rt_tensor_shape_str(st, a, sizeof a));
    }
    int64_t n = st->shape[0], inner = n ? rt_tensor_numel(st) / n / 2 : 0;
    rt_tensor *ld = rt_tensor_create(1, &n, RT_F32, st->device, RT_MEM_TEMP);
    if (!ld) return RT_ERR_OOM;
    rt_backend_of(st)->affine_coupling_logdet(n, inner, RT_AFFINE_CLAMP, rt_tensor_f32(st), rt_tensor_f32(ld));
    *out = ld;
    return RT_OK;
}
