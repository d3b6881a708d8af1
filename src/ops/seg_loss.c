/* Segmentation losses on (N, C, spatial...) activations: voxel-wise
 * cross-entropy with class weights and the soft Dice loss (ops/ops3d.h);
 * the loops are the backend's (kernels/seg_loss.h on cpu). */
#include <math.h>
#include <string.h>

#include "backend/backend.h"
#include "core/mem.h"
#include "ops/op_util.h"
#include "ops/ops3d.h"

/* Checks x (N, C, d...) f32 against target (N, d...) int32 with labels in
 * [0, C) and fills the view. */
static rt_status seg_check(const char *op, const char *xname, const rt_tensor *x, const rt_tensor *target,
                           rt_chan_shape *s) {
    RT_TRY(rt_op_check_f32(x, op, xname));
    if (!target) return rt_error_set(RT_ERR_INVALID_ARG, "%s: target is NULL", op);
    RT_TRY(rt_op_check_device(x, target, op));
    if (target->dtype != RT_I32)
        return rt_error_set(RT_ERR_DTYPE, "%s: target must be int32 class indices, got %s", op,
                            rt_dtype_str(target->dtype));
    char a[64], b[64];
    bool ok = x->ndim >= 2 && target->ndim == x->ndim - 1 && target->shape[0] == x->shape[0];
    for (int i = 2; ok && i < x->ndim; i++) ok = target->shape[i - 1] == x->shape[i];
    if (!ok)
        return rt_error_set(RT_ERR_SHAPE, "%s: expected %s (N, C, d1, ...) and target (N, d1, ...), got %s and %s",
                            op, xname, rt_tensor_shape_str(x, a, sizeof a), rt_tensor_shape_str(target, b, sizeof b));
    *s = (rt_chan_shape){x->shape[0], x->shape[1], 1, x->layout};
    for (int i = 2; i < x->ndim; i++) s->spatial *= x->shape[i];
    int32_t label = 0; /* meta: no labels to check, -1 */
    int64_t i = rt_backend_of(target)->labels_first_invalid(s->n * s->spatial, rt_tensor_data(target), s->c, &label);
    if (i >= 0)
        return rt_error_set(RT_ERR_INVALID_ARG, "%s: target element %lld (sample %lld) is %d, outside [0, %lld)",
                            op, (long long)i, (long long)(i / s->spatial), label, (long long)s->c);
    return RT_OK;
}

/* ------------------------------------------------------------ cross-entropy */

typedef struct ce_ctx {
    rt_chan_shape s;
    double weight_sum; /* Σ_i w[t_i] */
    bool weighted;     /* weight saved in slot 2 */
} ce_ctx;

/* dx = g·w[t]/W·(softmax(x) − onehot(t)) */
static rt_status ce_nd_backward(rt_node *self, rt_tensor *const *grad_out, rt_tensor **grad_in) {
    const ce_ctx *c = self->ctx;
    rt_tensor *x, *target, *w = NULL, *dy = grad_out[0];
    RT_SAVED(self, 0, x);
    RT_SAVED(self, 1, target);
    if (c->weighted) RT_SAVED(self, 2, w);
    rt_tensor *dx = rt_tensor_empty_like(x, RT_MEM_TEMP);
    if (!dx) return RT_ERR_OOM;
    rt_backend_of(x)->cross_entropy_nd_backward(&c->s, rt_tensor_f32(x), rt_tensor_data(target),
                                                 w ? rt_tensor_f32(w) : NULL, c->weight_sum, rt_tensor_f32(dy),
                                                 rt_tensor_f32(dx));
    grad_in[0] = dx;
    return RT_OK;
}

rt_status rt_cross_entropy_nd(rt_tensor *logits, rt_tensor *target, rt_tensor *weight, rt_tensor **out) {
    const char *op = "cross_entropy_nd";
    RT_TRY(rt_op_check_out(out, op));
    *out = NULL;
    ce_ctx c = {.weighted = weight != NULL};
    RT_TRY(seg_check(op, "logits", logits, target, &c.s));
    if (weight) {
        RT_TRY(rt_op_check_f32(weight, op, "weight"));
        RT_TRY(rt_op_check_device(logits, weight, op));
        if (weight->ndim != 1 || weight->shape[0] != c.s.c) {
            char a[64];
            return rt_error_set(RT_ERR_SHAPE, "%s: weight must be (%lld), one per class, got %s", op,
                                (long long)c.s.c, rt_tensor_shape_str(weight, a, sizeof a));
        }
    }
    rt_tensor *y = rt_tensor_create(0, NULL, RT_F32, logits->device, RT_MEM_TEMP);
    if (!y) return RT_ERR_OOM;
    /* meta books and releases the log-sum-exp buffer a real call holds */
    rt_status st = rt_backend_of(logits)->cross_entropy_nd_forward(&c.s, rt_tensor_f32(logits), rt_tensor_data(target),
                                                                   weight ? rt_tensor_f32(weight) : NULL,
                                                                   &c.weight_sum, rt_tensor_f32(y));
    rt_node *node = NULL;
    rt_tensor *inputs[1] = {logits};
    if (st == RT_OK) st = rt_node_create("cross_entropy_nd", 1, inputs, 1, ce_nd_backward, sizeof c, &node);
    if (st == RT_OK && node) {
        memcpy(node->ctx, &c, sizeof c);
        st = rt_node_save(node, logits, NULL);
        if (st == RT_OK) st = rt_node_save(node, target, NULL);
        if (st == RT_OK && weight) st = rt_node_save(node, weight, NULL);
    }
    return rt_op_return(st, node, y, out);
}

/* ------------------------------------------------------------ soft Dice */

typedef struct dice_ctx {
    rt_chan_shape s;
    double smooth;
    bool batch_dice, include_background;
    double terms;   /* number of dice values averaged */
    int ndim;       /* the probabilities' shape, for the gradient */
    int64_t shape[RT_MAX_DIMS];
    double sums[];  /* per (n, c): I, P, G (3·N·C; with batch_dice the sums over n are in n = 0) */
} dice_ctx;

static rt_status dice_backward(rt_node *self, rt_tensor *const *grad_out, rt_tensor **grad_in) {
    const dice_ctx *c = self->ctx;
    const rt_chan_shape *s = &c->s;
    rt_tensor *target, *dy = grad_out[0];
    RT_SAVED(self, 0, target);
    /* the gradient has the probabilities' shape and order */
    rt_tensor *dx = rt_tensor_create(c->ndim, c->shape, RT_F32, target->device, RT_MEM_TEMP);
    if (!dx) return RT_ERR_OOM;
    dx->layout = s->layout;
    rt_backend_of(target)->soft_dice_backward(s, rt_tensor_data(target), c->smooth, c->batch_dice,
                                              c->include_background, c->terms, c->sums, rt_tensor_f32(dy),
                                              rt_tensor_f32(dx));
    grad_in[0] = dx;
    return RT_OK;
}

rt_status rt_soft_dice_loss(rt_tensor *probs, rt_tensor *target, float smooth, bool batch_dice,
                            bool include_background, rt_tensor **out) {
    const char *op = "soft_dice_loss";
    RT_TRY(rt_op_check_out(out, op));
    *out = NULL;
    rt_chan_shape s;
    RT_TRY(seg_check(op, "probs", probs, target, &s));
    if (!(smooth > 0.0f) || !isfinite(smooth))
        return rt_error_set(RT_ERR_INVALID_ARG, "%s: smooth must be finite and > 0 (nnU-Net uses 1e-5), got %g", op,
                            (double)smooth);
    if (!include_background && s.c < 2)
        return rt_error_set(RT_ERR_SHAPE, "%s: without the background class there must be >= 2 classes, got C=%lld",
                            op, (long long)s.c);
    size_t csize = sizeof(dice_ctx) + sizeof(double) * 3 * (size_t)(s.n * s.c);
    dice_ctx *c = NULL;
    rt_status st = rt_mem_alloc(csize, RT_MEM_TEMP, (void **)&c);
    if (st != RT_OK) return st;
    memset(c, 0, csize);
    c->s = s;
    c->ndim = probs->ndim;
    memcpy(c->shape, probs->shape, sizeof c->shape);
    c->smooth = smooth;
    c->batch_dice = batch_dice;
    c->include_background = include_background;
    const int64_t classes = s.c - (include_background ? 0 : 1);
    c->terms = (double)(classes * (batch_dice ? 1 : s.n));
    rt_tensor *y = rt_tensor_create(0, NULL, RT_F32, probs->device, RT_MEM_TEMP);
    if (!y) st = RT_ERR_OOM;
    if (st == RT_OK)
        rt_backend_of(probs)->soft_dice_forward(&s, rt_tensor_f32(probs), rt_tensor_data(target), c->smooth, batch_dice,
                                                include_background, c->terms, c->sums, rt_tensor_f32(y));
    rt_node *node = NULL;
    if (st == RT_OK) st = rt_node_create(op, 1, &probs, 1, dice_backward, csize, &node);
    if (st == RT_OK && node) {
        memcpy(node->ctx, c, csize);
        st = rt_node_save(node, target, NULL);
    }
    rt_mem_free(c, csize, RT_MEM_TEMP);
    return rt_op_return(st, node, y, out);
}
