/* Loss functions: cross-entropy with logits (optional label smoothing), MSE
 * and L1; the loops are the backend's (kernels/loss.h, kernels/vec.h on cpu). */
#include "backend/backend.h"
#include "ops/op_util.h"
#include "ops/ops.h"

typedef struct rt_ce_ctx {
    float smoothing;
} rt_ce_ctx;

/* dlogits = g/N · (softmax - q), q = (1-ε)·onehot(target) + ε/C. */
static rt_status rt_ce_backward(rt_node *self, rt_tensor *const *grad_out, rt_tensor **grad_in) {
    const rt_ce_ctx *c = self->ctx;
    rt_tensor *prob, *target, *dy = grad_out[0];
    RT_SAVED(self, 0, prob);
    RT_SAVED(self, 1, target);
    if (!(grad_in[0] = rt_tensor_empty_like(prob, RT_MEM_TEMP))) return RT_ERR_OOM;
    rt_backend_of(dy)->cross_entropy_backward(prob->shape[0], prob->shape[1], c->smoothing, rt_tensor_f32(prob),
                                              rt_tensor_data(target), rt_tensor_f32(dy), rt_tensor_f32(grad_in[0]));
    return RT_OK;
}

rt_status rt_cross_entropy(rt_tensor *logits, rt_tensor *target, float label_smoothing, rt_tensor **out) {
    RT_TRY(rt_op_check_out(out, "cross_entropy"));
    *out = NULL;
    RT_TRY(rt_op_check_f32(logits, "cross_entropy", "logits"));
    if (!target) return rt_error_set(RT_ERR_INVALID_ARG, "cross_entropy: target is NULL");
    RT_TRY(rt_op_check_device(logits, target, "cross_entropy"));
    char a[64], b[64];
    if (!target || target->dtype != RT_I32)
        return rt_error_set(RT_ERR_DTYPE, "cross_entropy: target must be int32 class indices");
    if (logits->ndim != 2 || target->ndim != 1 || target->shape[0] != logits->shape[0])
        return rt_error_set(RT_ERR_SHAPE, "cross_entropy: expected logits (N, C) and target (N), got %s and %s",
                            rt_tensor_shape_str(logits, a, sizeof a), rt_tensor_shape_str(target, b, sizeof b));
    if (!(label_smoothing >= 0.0f && label_smoothing <= 1.0f))
        return rt_error_set(RT_ERR_INVALID_ARG, "cross_entropy: label_smoothing must be in [0, 1], got %g",
                            label_smoothing);
    int64_t n = logits->shape[0], k = logits->shape[1];
    rt_tensor *prob = rt_tensor_empty_like(logits, RT_MEM_TEMP);
    rt_tensor *y = rt_op_new(logits, 0, NULL);
    rt_status st = (prob && y) ? RT_OK : RT_ERR_OOM;
    /* checks the targets on cpu (meta has no values to check) */
    if (st == RT_OK)
        st = rt_backend_of(logits)->cross_entropy_forward(n, k, label_smoothing, rt_tensor_f32(logits),
                                                          rt_tensor_data(target), rt_tensor_f32(prob),
                                                          rt_tensor_f32(y));
    rt_node *node = NULL;
    if (st == RT_OK) st = rt_node_create("cross_entropy", 1, &logits, 1, rt_ce_backward, sizeof(rt_ce_ctx), &node);
    if (st == RT_OK && node) {
        ((rt_ce_ctx *)node->ctx)->smoothing = label_smoothing;
        st = rt_node_save(node, prob, NULL);
        if (st == RT_OK) st = rt_node_save(node, target, NULL);
    }
    rt_tensor_release(prob);
    return rt_op_return(st, node, y, out);
}

/* The mean losses over the elementwise difference d = x - t: both save d
 * only, and their backward is one backend loop with a sign for t. */
typedef enum rt_diff_loss { RT_DIFF_LOSS_MSE, RT_DIFF_LOSS_L1 } rt_diff_loss;

/* MSE: d/dx = 2·(x - t)·g/n; L1: d/dx = sgn(x - t)·g/n; d/dt = -d/dx. */
static rt_status rt_diff_loss_backward(rt_node *self, rt_tensor *const *grad_out, rt_tensor **grad_in) {
    rt_tensor *diff, *dy = grad_out[0];
    RT_SAVED(self, 0, diff);
    const rt_backend *be = rt_backend_of(dy);
    bool l1 = *(const rt_diff_loss *)self->ctx == RT_DIFF_LOSS_L1;
    for (int i = 0; i < 2; i++) {
        if (!rt_node_needs_grad(self, i)) continue;
        if (!(grad_in[i] = rt_tensor_empty_like(diff, RT_MEM_TEMP))) return RT_ERR_OOM;
        (l1 ? be->l1_backward : be->mse_backward)(rt_tensor_numel(diff), i ? -1.0f : 1.0f, rt_tensor_f32(diff),
                                                  rt_tensor_f32(dy), rt_tensor_f32(grad_in[i]));
    }
    return RT_OK;
}

static rt_status rt_diff_loss_run(rt_diff_loss kind, const char *op, rt_tensor *x, rt_tensor *target,
                                  rt_tensor **out) {
    RT_TRY(rt_op_check_out(out, op));
    *out = NULL;
    RT_TRY(rt_op_check_f32(x, op, "input"));
    RT_TRY(rt_op_check_f32(target, op, "target"));
    RT_TRY(rt_op_check_device(x, target, op));
    if (!rt_tensor_same_shape(x, target)) {
        char a[64], b[64];
        return rt_error_set(RT_ERR_SHAPE, "%s: input %s and target %s differ in shape", op,
                            rt_tensor_shape_str(x, a, sizeof a), rt_tensor_shape_str(target, b, sizeof b));
    }
    rt_tensor *tl = NULL; /* target in x's memory order (target itself when they match) */
    RT_TRY(rt_to_layout(target, x->layout, &tl));
    rt_tensor *diff = rt_tensor_empty_like(x, RT_MEM_TEMP);
    rt_tensor *y = rt_op_new(x, 0, NULL);
    rt_status st = (diff && y) ? RT_OK : RT_ERR_OOM;
    if (st == RT_OK) {
        const rt_backend *be = rt_backend_of(x);
        int64_t n = rt_tensor_numel(x);
        be->vec_sub(n, rt_tensor_f32(x), rt_tensor_f32(tl), rt_tensor_f32(diff));
        if (kind == RT_DIFF_LOSS_L1) be->l1_forward(n, rt_tensor_f32(diff), rt_tensor_f32(y));
        else be->vec_sumsq_to(n, rt_tensor_f32(diff), (double)n, rt_tensor_f32(y));
    }
    rt_node *node = NULL;
    rt_tensor *inputs[2] = {x, tl};
    if (st == RT_OK) st = rt_node_create(op, 2, inputs, 1, rt_diff_loss_backward, sizeof kind, &node);
    if (st == RT_OK && node) {
        *(rt_diff_loss *)node->ctx = kind;
        st = rt_node_save(node, diff, NULL);
    }
    rt_tensor_release(diff);
    rt_tensor_release(tl);
    return rt_op_return(st, node, y, out);
}

rt_status rt_mse_loss(rt_tensor *x, rt_tensor *target, rt_tensor **out) {
    return rt_diff_loss_run(RT_DIFF_LOSS_MSE, "mse_loss", x, target, out);
}

rt_status rt_l1_loss(rt_tensor *x, rt_tensor *target, rt_tensor **out) {
    return rt_diff_loss_run(RT_DIFF_LOSS_L1, "l1_loss", x, target, out);
}
