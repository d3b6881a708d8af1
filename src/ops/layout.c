/* Conversion between the PLAIN and BLOCKED memory orders (core/tensor.h),
 * and of convolution weights between OIHW and WEIGHT_BLOCKED, through the
 * backend's reorder entry (kernels/layout.h on cpu). */
#include <string.h>
#include <math.h>

#include "backend/backend.h"
#include "ops/op_util.h"
#include "ops/ops.h"

typedef struct rt_layout_ctx {
    rt_layout from;
} rt_layout_ctx;

static rt_status rt_reorder(rt_tensor *x, rt_layout to, rt_tensor **out) {
    *out = rt_tensor_empty_like(x, RT_MEM_TEMP);
    if (!*out) return RT_ERR_OOM;
    (*out)->layout = to;
    rt_status st = rt_backend_of(x)->reorder_layout(x->ndim, x->shape, x->layout, to, rt_tensor_f32(x),
                                                    rt_tensor_f32(*out));
    if (st != RT_OK) {
        rt_tensor_release(*out);
        *out = NULL;
    }
    return st;
}

static rt_status rt_to_layout_backward(rt_node *self, rt_tensor *const *grad_out, rt_tensor **grad_in) {
    const rt_layout_ctx *c = self->ctx;
    return rt_reorder(grad_out[0], c->from, &grad_in[0]);
}

static bool rt_blockable(const rt_tensor *x) {
    return (x->ndim == 4 || x->ndim == 5) && x->shape[1] % rt_layout_block() == 0;
}

rt_status rt_to_layout(rt_tensor *x, rt_layout layout, rt_tensor **out) {
    RT_TRY(rt_op_check_out(out, "to_layout"));
    *out = NULL;
    RT_TRY(rt_op_check_f32(x, "to_layout", "input"));
    if (x->layout == layout) {
        *out = rt_tensor_retain(x);
        return RT_OK;
    }
    if (layout == RT_LAYOUT_BLOCKED && !rt_blockable(x)) {
        char a[64];
        return rt_error_set(RT_ERR_INVALID_ARG, "to_layout: the blocked layout needs (N, C, [D,] H, W) with C a "
                            "multiple of %d, got %s", rt_layout_block(), rt_tensor_shape_str(x, a, sizeof a));
    }
    rt_tensor *y;
    RT_TRY(rt_reorder(x, layout, &y));
    rt_node *node = NULL;
    rt_status st = rt_node_create("to_layout", 1, &x, 1, rt_to_layout_backward, sizeof(rt_layout_ctx), &node);
    if (st == RT_OK && node) ((rt_layout_ctx *)node->ctx)->from = x->layout;
    return rt_op_return(st, node, y, out);
}

rt_status rt_to_preferred_layout(rt_tensor *x, rt_tensor **out) {
    RT_TRY(rt_op_check_out(out, "to_preferred_layout"));
    *out = NULL;
    RT_TRY(rt_op_check_f32(x, "to_preferred_layout", "input"));
    return rt_to_layout(x, rt_blockable(x) ? RT_LAYOUT_BLOCKED : x->layout, out);
}

rt_status rt_compare(rt_tensor *a, rt_tensor *ref, double *max_abs, double *max_ref) {
    if (!max_abs || !max_ref)
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_compare: %s is NULL", !max_abs ? "max_abs" : "max_ref");
    *max_abs = *max_ref = 0.0;
    if (!a || !ref) return rt_error_set(RT_ERR_INVALID_ARG, "rt_compare: the tensor %s is NULL", !a ? "a" : "ref");
    if (!rt_tensor_same_shape(a, ref)) {
        char x[64], y[64];
        return rt_error_set(RT_ERR_SHAPE, "compare: shapes %s and %s differ", rt_tensor_shape_str(a, x, sizeof x),
                            rt_tensor_shape_str(ref, y, sizeof y));
    }
    if (rt_tensor_is_meta(a) || rt_tensor_is_meta(ref)) return RT_OK;
    bool grad = rt_grad_set_enabled(false);
    rt_tensor *ac = NULL;
    rt_status st = rt_to_layout(a, ref->layout, &ac);
    rt_grad_set_enabled(grad);
    if (st != RT_OK) return st;
    double mr[2] = {0.0, 0.0};
    rt_backend_of(ref)->vec_max_abs_diff(rt_tensor_numel(ref), rt_tensor_f32(ac), rt_tensor_f32(ref), mr);
    rt_tensor_release(ac);
    *max_abs = mr[0];
    *max_ref = mr[1];
    return RT_OK;
}

double rt_rel_difference(rt_tensor *a, rt_tensor *ref) {
    double m, scale;
    if (rt_compare(a, ref, &m, &scale) != RT_OK) return INFINITY;
    return m / fmax(scale, 1e-30);
}

/* Reorders t's data in place to `layout` through a TEMP copy. */
static rt_status rt_relayout_in_place(rt_tensor *t, rt_layout layout) {
    rt_tensor *tmp = NULL;
    RT_TRY(rt_reorder(t, layout, &tmp));
    if (!rt_tensor_is_meta(t)) memcpy(rt_tensor_data(t), rt_tensor_data(tmp), rt_tensor_nbytes(t));
    rt_tensor_release(tmp);
    t->layout = layout;
    rt_tensor_bump_version(t);
    return RT_OK;
}

rt_status rt_weight_set_layout(rt_tensor *w, rt_layout layout) {
    if (!w) return rt_error_set(RT_ERR_INVALID_ARG, "rt_weight_set_layout: the weight is NULL");
    if (layout != RT_LAYOUT_PLAIN && layout != RT_LAYOUT_WEIGHT_BLOCKED)
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_weight_set_layout: layout %d is not RT_LAYOUT_PLAIN or "
                            "RT_LAYOUT_WEIGHT_BLOCKED", (int)layout);
    RT_TRY(rt_op_check_f32(w, "weight_set_layout", "weight"));
    char a[64];
    if (w->grad_fn)
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_weight_set_layout: the weight %s is not a leaf (it has a "
                            "grad_fn); convert the parameter itself", rt_tensor_shape_str(w, a, sizeof a));
    if (w->ndim != 4 && w->ndim != 5)
        return rt_error_set(RT_ERR_SHAPE, "rt_weight_set_layout: a convolution weight is (O, I, [D,] H, W), got %s",
                            rt_tensor_shape_str(w, a, sizeof a));
    if (w->layout == layout) return RT_OK;
    if (layout == RT_LAYOUT_WEIGHT_BLOCKED && !rt_layout_weight_blockable(w->shape[0], w->shape[1]))
        return rt_error_set(RT_ERR_SHAPE, "rt_weight_set_layout: the blocked weight layout needs output and input "
                            "channels that are multiples of %d, got weight %s; keep this one plain",
                            rt_layout_block(), rt_tensor_shape_str(w, a, sizeof a));
    if (w->layout != RT_LAYOUT_PLAIN && w->layout != RT_LAYOUT_WEIGHT_BLOCKED)
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_weight_set_layout: the weight %s is in an activation layout",
                            rt_tensor_shape_str(w, a, sizeof a));
    if (w->grad) { /* converted with the weight: check it first, so nothing changes on a refusal */
        char g[64];
        if (w->grad->dtype != RT_F32)
            return rt_error_set(RT_ERR_DTYPE, "rt_weight_set_layout: the grad of weight %s is %s; it must be float32",
                                rt_tensor_shape_str(w, a, sizeof a), rt_dtype_str(w->grad->dtype));
        if (!rt_tensor_same_shape(w, w->grad) || w->grad->layout != w->layout)
            return rt_error_set(RT_ERR_SHAPE, "rt_weight_set_layout: the grad %s of weight %s has another shape or "
                                "memory order; drop it (rt_tensor_zero_grad) first",
                                rt_tensor_shape_str(w->grad, g, sizeof g), rt_tensor_shape_str(w, a, sizeof a));
        RT_TRY(rt_relayout_in_place(w->grad, layout));
    }
    return rt_relayout_in_place(w, layout);
}

rt_status rt_copy_in_layout(rt_tensor *dst, rt_tensor *src) {
    if (!dst || !src) return rt_error_set(RT_ERR_INVALID_ARG, "rt_copy_in_layout: %s is NULL", !dst ? "dst" : "src");
    RT_TRY(rt_op_check_f32(dst, "copy_in_layout", "dst"));
    RT_TRY(rt_op_check_f32(src, "copy_in_layout", "src"));
    if (!rt_tensor_same_shape(dst, src)) {
        char a[64], b[64];
        return rt_error_set(RT_ERR_SHAPE, "rt_copy_in_layout: dst %s and src %s differ in shape",
                            rt_tensor_shape_str(dst, a, sizeof a), rt_tensor_shape_str(src, b, sizeof b));
    }
    if (dst->layout == src->layout) return rt_tensor_copy(dst, src);
    rt_tensor *ordered = NULL;
    RT_TRY(rt_reorder(src, dst->layout, &ordered));
    rt_status st = rt_tensor_copy(dst, ordered);
    rt_tensor_release(ordered);
    return st;
}
