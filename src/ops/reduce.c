/* Full reductions to a 0-d scalar: sum and mean of all elements. */
#include "backend/backend.h"
#include "ops/op_util.h"
#include "ops/ops.h"

/* What backward needs to rebuild the input's gradient: no data, only the
 * input's shape and memory order, and the divisor (1 for sum, numel for mean). */
typedef struct rt_reduce_ctx {
    int ndim;
    int64_t shape[RT_MAX_DIMS];
    rt_layout layout;
    double count;
} rt_reduce_ctx;

/* dx = dy / count, broadcast to the input's shape (and memory order). */
static rt_status rt_reduce_backward(rt_node *self, rt_tensor *const *grad_out, rt_tensor **grad_in) {
    const rt_reduce_ctx *c = self->ctx;
    rt_tensor *dy = grad_out[0];
    rt_tensor *g = rt_tensor_create(c->ndim, c->shape, RT_F32, dy->device, RT_MEM_TEMP);
    if (!g) return RT_ERR_OOM;
    g->layout = c->layout;
    rt_backend_of(dy)->vec_fill_from(rt_tensor_numel(g), rt_tensor_f32(dy), c->count, rt_tensor_f32(g));
    grad_in[0] = g;
    return RT_OK;
}

static rt_status rt_reduce(rt_tensor *x, bool mean, rt_tensor **out) {
    const char *op = mean ? "mean" : "sum";
    RT_TRY(rt_op_check_out(out, op));
    *out = NULL;
    RT_TRY(rt_op_check_f32(x, op, "input"));
    int64_t n = rt_tensor_numel(x);
    double count = mean ? (double)n : 1.0;
    rt_tensor *y = rt_op_new(x, 0, NULL);
    if (!y) return RT_ERR_OOM;
    /* the sum of all elements is the same in either memory order */
    rt_backend_of(x)->vec_sum_to(n, rt_tensor_f32(x), count, rt_tensor_f32(y));
    rt_node *node = NULL;
    rt_status st = rt_node_create(op, 1, &x, 1, rt_reduce_backward, sizeof(rt_reduce_ctx), &node);
    if (st == RT_OK && node) {
        rt_reduce_ctx *c = node->ctx;
        c->ndim = x->ndim;
        for (int i = 0; i < x->ndim; i++) c->shape[i] = x->shape[i];
        c->layout = x->layout;
        c->count = count;
    }
    return rt_op_return(st, node, y, out);
}

rt_status rt_sum(rt_tensor *x, rt_tensor **out) { return rt_reduce(x, false, out); }

rt_status rt_mean(rt_tensor *x, rt_tensor **out) { return rt_reduce(x, true, out); }
