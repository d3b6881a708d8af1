/* Fused batch norm + ReLU op (see batchnorm_relu.h) through the backend's
 * fused entries (the oneDNN kernels of kernels/norm.h on cpu); eval mode
 * composes rt_batch_norm and rt_relu. */
#include "ops/batchnorm_relu.h"

#include <string.h>

#include "backend/backend.h"
#include "ops/op_util.h"
#include "ops/ops.h"

typedef struct rt_bnr_ctx {
    rt_bn_shape s;
} rt_bnr_ctx;

/* Saved slots: 0 x, 1 weight, 2 batch mean, 3 batch variance, 4 workspace (u8). */
static rt_status rt_bnr_backward(rt_node *self, rt_tensor *const *grad_out, rt_tensor **grad_in) {
    const rt_bnr_ctx *c = self->ctx;
    rt_tensor *x, *w, *mean, *var, *ws, *dy = NULL;
    RT_SAVED(self, 1, w);
    RT_SAVED(self, 2, mean);
    RT_SAVED(self, 3, var);
    RT_SAVED(self, 4, ws);
    rt_bn_shape s = c->s;
    /* ours: released below; bf16 x, dy and dx when both are bf16 */
    RT_TRY(rt_bn_backward_operands(self, &s, true, grad_out[0], &x, &dy));
    rt_tensor *dx = rt_tensor_empty_like(x, RT_MEM_TEMP);
    rt_tensor *dw = rt_tensor_empty_like(w, RT_MEM_TEMP);
    rt_tensor *db = rt_tensor_empty_like(w, RT_MEM_TEMP);
    rt_status st = (dx && dw && db) ? RT_OK : RT_ERR_OOM;
    if (st == RT_OK)
        st = rt_backend_of(x)->batchnorm_relu_backward(&s, rt_tensor_data(x), rt_tensor_data(dy),
                                                       rt_tensor_f32(mean), rt_tensor_f32(var),
                                                       rt_tensor_f32(w), rt_tensor_data(ws),
                                                       rt_tensor_data(dx), rt_tensor_f32(dw),
                                                       rt_tensor_f32(db));
    rt_tensor_release(x);
    rt_tensor_release(dy);
    rt_tensor *grads[3] = {dx, dw, db};
    return rt_op_hand_grads(st, self, 3, grads, grad_in);
}


static rt_status rt_bnr_eval(rt_tensor *x, rt_tensor *weight, rt_tensor *bias,
                             rt_tensor *running_mean, rt_tensor *running_var,
                             int64_t *num_batches_tracked, float momentum, float eps,
                             rt_tensor **out) {
    rt_tensor *h = NULL;
    RT_TRY(rt_batch_norm(x, weight, bias, running_mean, running_var, num_batches_tracked, false,
                         momentum, eps, &h));
    rt_status st = rt_relu(h, out);
    rt_tensor_release(h);
    return st;
}

rt_status rt_batch_norm_relu(rt_tensor *x, rt_tensor *weight, rt_tensor *bias,
                             rt_tensor *running_mean, rt_tensor *running_var,
                             int64_t *num_batches_tracked, bool training, float momentum,
                             float eps, rt_tensor **out) {
    if (!out) return rt_error_set(RT_ERR_INVALID_ARG, "batch_norm_relu: out is NULL");
    *out = NULL;
    if (!training)
        return rt_bnr_eval(x, weight, bias, running_mean, running_var, num_batches_tracked,
                           momentum, eps, out);
    rt_bnr_ctx c;
    memset(&c, 0, sizeof c);
    RT_TRY(rt_bn_op_shape("batch_norm_relu", x, weight, bias, running_mean, running_var, true, eps, &c.s));
    char a[64];
    /* Plans (creates or finds) the forward primitive; 0 means the shape or
     * oneDNN refused, with the reason in the message. */
    const rt_backend *be = rt_backend_of(x);
    rt_error_clear();
    int64_t ws_bytes = (int64_t)be->batchnorm_relu_workspace_bytes(&c.s);
    if (ws_bytes <= 0) {
        if (rt_error_last_status() != RT_OK) return rt_error_last_status();
        return rt_error_set(RT_ERR_BACKEND, "batch_norm_relu: oneDNN gave no workspace for input %s",
                            rt_tensor_shape_str(x, a, sizeof a));
    }

    rt_tensor *mean = NULL, *var = NULL;
    RT_TRY(rt_bn_stats_tensors(&c.s, running_mean, &mean, &var));
    rt_tensor *y = rt_tensor_empty_like(x, RT_MEM_TEMP);
    rt_tensor *ws = rt_tensor_create(1, &ws_bytes, RT_U8, x->device, RT_MEM_TEMP);
    rt_status st = (y && ws) ? RT_OK : RT_ERR_OOM;
    if (st == RT_OK)
        st = be->batchnorm_relu_forward_train(
            &c.s, rt_tensor_data(x), rt_tensor_f32(weight), rt_tensor_f32(bias), rt_tensor_data(y),
            rt_tensor_f32(mean), rt_tensor_f32(var), rt_tensor_data(ws));
    if (st == RT_OK && !rt_recompute_is_active()) {
        rt_bn_update_running(&c.s, momentum, rt_tensor_f32(mean), rt_tensor_f32(var),
                              running_mean, running_var);
        /* a meta model counts no batches: it trains on none */
        if (num_batches_tracked && rt_op_compute(x)) (*num_batches_tracked)++;
    }
    if (st == RT_OK) st = rt_bn_stats_offer(&c.s, running_mean, mean, var);
    rt_node *node = NULL;
    rt_tensor *inputs[3] = {x, weight, bias};
    if (st == RT_OK)
        st = rt_node_create("batch_norm_relu", 3, inputs, 1, rt_bnr_backward, sizeof c, &node);
    if (st == RT_OK && node) {
        /* s.bf16: x was bf16 (rt_bn_backward_operands); the forward's mask
         * has the same format in either type (one bit or byte an element
         * in the data's order; test_precision checks the gradients) */
        memcpy(node->ctx, &c, sizeof c);
        rt_tensor *sx = NULL, *smean = NULL;
        st = rt_bn_saved_input(&c.s, x, mean, &sx, &smean);
        rt_tensor *keep[5] = {sx, weight, smean, var, ws};
        for (int i = 0; i < 5 && st == RT_OK; i++) st = rt_node_save(node, keep[i], NULL);
        rt_tensor_release(sx);
        rt_tensor_release(smean);
    }
    rt_tensor_release(mean);
    rt_tensor_release(var);
    rt_tensor_release(ws);
    return rt_op_return(st, node, y, out);
}
