/* Max, average and global-average pooling (2-D and 3-D) through the
 * backend's pooling entries (kernels/pool.h on cpu). */
#include <string.h>

#include "backend/backend.h"
#include "ops/op_util.h"
#include "ops/ops.h"

typedef struct rt_pool_ctx {
    rt_pool_shape s;
    int64_t x_shape[5];
    int ndim;
} rt_pool_ctx;

static rt_status rt_pool_setup(rt_tensor *x, const rt_pool_opts *o, const char *op, rt_pool_ctx *c,
                               int64_t yshape[5]) {
    RT_TRY(rt_op_check_f32(x, op, "input"));
    if (!o) return rt_error_set(RT_ERR_INVALID_ARG, "%s: opts is NULL (the kernel size has no default)", op);
    char a[64];
    if (x->ndim != 4 && x->ndim != 5)
        return rt_error_set(RT_ERR_SHAPE, "%s: expected input (N, C, H, W) or (N, C, D, H, W), got %s",
                            op, rt_tensor_shape_str(x, a, sizeof a));
    memset(c, 0, sizeof *c);
    c->ndim = x->ndim;
    memcpy(c->x_shape, x->shape, sizeof c->x_shape);
    rt_pool_shape *s = &c->s;
    s->layout = x->layout;
    s->nsp = x->ndim - 2;
    s->n = x->shape[0];
    s->c = x->shape[1];
    for (int i = 0; i < s->nsp; i++) {
        s->in[i] = x->shape[2 + i];
        s->k[i] = o->kernel[i];
        s->stride[i] = o->stride[i] > 0 ? o->stride[i] : o->kernel[i];
        s->pad[i] = o->padding[i];
        if (s->k[i] <= 0 || s->pad[i] < 0 || 2 * s->pad[i] > s->k[i])
            return rt_error_set(RT_ERR_INVALID_ARG, "%s: kernel must be > 0 and padding at most half "
                                "the kernel (got kernel %lld, padding %lld)", op, (long long)s->k[i],
                                (long long)s->pad[i]);
    }
    int64_t osp[3];
    rt_pool_out_size(s, osp);
    yshape[0] = s->n;
    yshape[1] = s->c;
    for (int i = 0; i < s->nsp; i++) {
        if (osp[i] <= 0)
            return rt_error_set(RT_ERR_SHAPE, "%s: input %s is smaller than the pooling window", op,
                                rt_tensor_shape_str(x, a, sizeof a));
        yshape[2 + i] = osp[i];
    }
    return RT_OK;
}

static rt_status rt_max_pool_backward(rt_node *self, rt_tensor *const *grad_out, rt_tensor **grad_in) {
    const rt_pool_ctx *c = self->ctx;
    rt_tensor *ws, *dy = grad_out[0];
    RT_SAVED(self, 0, ws);
    if (!(grad_in[0] = rt_tensor_create(c->ndim, c->x_shape, RT_F32, dy->device, RT_MEM_TEMP)))
        return RT_ERR_OOM;
    grad_in[0]->layout = c->s.layout;
    return rt_backend_of(dy)->maxpool_backward(&c->s, rt_tensor_f32(dy), rt_tensor_data(ws),
                                               rt_tensor_f32(grad_in[0]));
}

rt_status rt_max_pool(rt_tensor *x, const rt_pool_opts *opts, rt_tensor **out) {
    RT_TRY(rt_op_check_out(out, "max_pool"));
    *out = NULL;
    rt_pool_ctx c;
    int64_t yshape[5];
    RT_TRY(rt_pool_setup(x, opts, "max_pool", &c, yshape));
    rt_tensor *y = rt_op_new(x, x->ndim, yshape);
    if (y) y->layout = x->layout;
    const rt_backend *be = rt_backend_of(x);
    int64_t ws_bytes = (int64_t)be->maxpool_workspace_bytes(&c.s);
    /* The workspace outlives the call only when backward will need it. */
    bool keep = rt_grad_is_enabled() && x->requires_grad;
    rt_tensor *ws = rt_tensor_create(1, &ws_bytes, RT_U8, x->device, RT_MEM_TEMP);
    rt_status st = (y && ws) ? RT_OK : RT_ERR_OOM;
    if (st == RT_OK) st = be->maxpool_forward(&c.s, rt_tensor_f32(x), rt_tensor_f32(y), rt_tensor_data(ws));
    rt_node *node = NULL;
    if (st == RT_OK && keep) st = rt_node_create("max_pool", 1, &x, 1, rt_max_pool_backward, sizeof c, &node);
    if (st == RT_OK && node) {
        memcpy(node->ctx, &c, sizeof c);
        st = rt_node_save(node, ws, NULL);
    }
    rt_tensor_release(ws);
    return rt_op_return(st, node, y, out);
}

static rt_status rt_avg_pool_backward(rt_node *self, rt_tensor *const *grad_out, rt_tensor **grad_in) {
    const rt_pool_ctx *c = self->ctx;
    rt_tensor *dy = grad_out[0];
    if (!(grad_in[0] = rt_tensor_create(c->ndim, c->x_shape, RT_F32, dy->device, RT_MEM_TEMP)))
        return RT_ERR_OOM;
    grad_in[0]->layout = c->s.layout;
    return rt_backend_of(dy)->avgpool_backward(&c->s, rt_tensor_f32(dy), rt_tensor_f32(grad_in[0]));
}

rt_status rt_avg_pool(rt_tensor *x, const rt_pool_opts *opts, rt_tensor **out) {
    RT_TRY(rt_op_check_out(out, "avg_pool"));
    *out = NULL;
    rt_pool_ctx c;
    int64_t yshape[5];
    RT_TRY(rt_pool_setup(x, opts, "avg_pool", &c, yshape));
    rt_tensor *y = rt_op_new(x, x->ndim, yshape);
    if (!y) return RT_ERR_OOM;
    y->layout = x->layout;
    rt_status st = rt_backend_of(x)->avgpool_forward(&c.s, rt_tensor_f32(x), rt_tensor_f32(y));
    rt_node *node = NULL;
    if (st == RT_OK) st = rt_node_create("avg_pool", 1, &x, 1, rt_avg_pool_backward, sizeof c, &node);
    if (st == RT_OK && node) memcpy(node->ctx, &c, sizeof c);
    return rt_op_return(st, node, y, out);
}

rt_status rt_adaptive_avg_pool_1(rt_tensor *x, rt_tensor **out) {
    RT_TRY(rt_op_check_out(out, "adaptive_avg_pool"));
    *out = NULL;
    RT_TRY(rt_op_check_f32(x, "adaptive_avg_pool", "input"));
    if (x->ndim != 4 && x->ndim != 5) {
        char a[64];
        return rt_error_set(RT_ERR_SHAPE, "adaptive_avg_pool: expected (N, C, H, W) or (N, C, D, H, W), got %s",
                            rt_tensor_shape_str(x, a, sizeof a));
    }
    rt_pool_opts o = {0}; /* a window covering the whole input is the global average */
    for (int i = 0; i < x->ndim - 2; i++) o.kernel[i] = o.stride[i] = x->shape[2 + i];
    RT_TRY(rt_avg_pool(x, &o, out));
    /* With a 1×1 output the blocked order is the plain one (offset n·C + c). */
    (*out)->layout = RT_LAYOUT_PLAIN;
    return RT_OK;
}
