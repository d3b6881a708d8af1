/* Batch normalisation op (torch.nn.functional.batch_norm) through the
 * backend's batch-norm entries (the oneDNN kernels of kernels/norm.h on
 * cpu); eval-mode backward is a plain loop. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "ops/op_util.h"
#include "ops/ops.h"

typedef struct rt_bn_ctx {
    rt_bn_shape s;
    bool training;
} rt_bn_ctx;

/* Eval mode is an affine map per channel: y = (x - rm)·w/σ + b, σ = sqrt(rv + eps);
 * its backward is the backend's batchnorm_backward_eval. */
static rt_status rt_bn_backward_eval(const rt_bn_ctx *c, rt_tensor *x, rt_tensor *w, rt_tensor *rm,
                                     rt_tensor *rv, rt_tensor *dy, rt_tensor *dx, rt_tensor *dw,
                                     rt_tensor *db) {
    return rt_backend_of(dy)->batchnorm_backward_eval(&c->s, rt_tensor_f32(x), rt_tensor_f32(dy), rt_tensor_f32(rm),
                                                      rt_tensor_f32(rv), rt_tensor_f32(w), rt_tensor_f32(dx),
                                                      rt_tensor_f32(dw), rt_tensor_f32(db));
}

static rt_status rt_bn_backward(rt_node *self, rt_tensor *const *grad_out, rt_tensor **grad_in) {
    const rt_bn_ctx *c = self->ctx;
    rt_tensor *x, *w, *a, *b, *dy = NULL;
    RT_SAVED(self, 1, w);
    RT_SAVED(self, 2, a); /* training: batch mean; eval: running_mean */
    RT_SAVED(self, 3, b); /* training: batch variance; eval: running_var */
    rt_bn_shape s = c->s;
    /* ours: released below; bf16 x, dy and dx when both are bf16 */
    RT_TRY(rt_bn_backward_operands(self, &s, c->training, grad_out[0], &x, &dy));
    rt_tensor *dx = rt_tensor_empty_like(x, RT_MEM_TEMP);
    rt_tensor *dw = rt_tensor_empty_like(w, RT_MEM_TEMP);
    rt_tensor *db = rt_tensor_empty_like(w, RT_MEM_TEMP);
    rt_status st = (dx && dw && db) ? RT_OK : RT_ERR_OOM;
    if (st == RT_OK) {
        /* training: oneDNN's backward (on meta it books the kernel's
         * TEMP); eval: revtorch's loop (nothing on meta) */
        if (c->training)
            st = rt_backend_of(x)->batchnorm_backward(&s, rt_tensor_data(x), rt_tensor_data(dy), rt_tensor_f32(a),
                                                      rt_tensor_f32(b), rt_tensor_f32(w), rt_tensor_data(dx),
                                                      rt_tensor_f32(dw), rt_tensor_f32(db));
        else
            st = rt_bn_backward_eval(c, x, w, a, b, dy, dx, dw, db);
    }
    rt_tensor_release(x);
    rt_tensor_release(dy);
    rt_tensor *grads[3] = {dx, dw, db};
    return rt_op_hand_grads(st, self, 3, grads, grad_in);
}

/* running = (1-m)·running + m·batch, with the unbiased variance (PyTorch). */
void rt_bn_update_running(const rt_bn_shape *s, float momentum, const float *mean, const float *var,
                          rt_tensor *running_mean, rt_tensor *running_var) {
    rt_backend_of(running_mean)->batchnorm_update_running(s, momentum, mean, var, rt_tensor_f32(running_mean),
                                                          rt_tensor_f32(running_var));
}

rt_status rt_bn_stats_tensors(rt_bn_shape *s, const rt_tensor *running_mean, rt_tensor **mean,
                              rt_tensor **var) {
    *mean = *var = NULL;
    rt_tensor *kept[2];
    bool found = false;
    RT_TRY(rt_saved_memo_take(running_mean, kept, 2, &found));
    s->given_stats = found;
    if (found) {
        *mean = kept[0];
        *var = kept[1];
        return RT_OK;
    }
    *mean = rt_tensor_empty_like(running_mean, RT_MEM_TEMP);
    *var = rt_tensor_empty_like(running_mean, RT_MEM_TEMP);
    if (*mean && *var) return RT_OK;
    rt_tensor_release(*mean);
    rt_tensor_release(*var);
    *mean = *var = NULL;
    return rt_error_set(RT_ERR_OOM, "batch_norm: out of memory for the batch statistics");
}

rt_status rt_bn_stats_offer(const rt_bn_shape *s, const rt_tensor *running_mean, rt_tensor *mean,
                            rt_tensor *var) {
    if (s->given_stats) return RT_OK;
    rt_tensor *stats[2] = {mean, var};
    return rt_saved_memo_keep(running_mean, stats, 2);
}

rt_status rt_bn_saved_input(const rt_bn_shape *s, rt_tensor *x, rt_tensor *mean, rt_tensor **saved_x,
                            rt_tensor **saved_mean) {
    *saved_x = *saved_mean = NULL;
    /* a bf16 x is what the forward normalised: kept as it is (the region
     * keeps a tensor that is not f32), no centring pass */
    if (rt_autocast_dtype() == RT_F32 || x->dtype != RT_F32) {
        *saved_x = rt_tensor_retain(x);
        *saved_mean = rt_tensor_retain(mean);
        return RT_OK;
    }
    /* the half copy itself, made in the centring pass: the region keeps a
     * tensor that is not f32 as it is (memory/precision.c), booked SAVED
     * as the copy it would have made */
    rt_dtype dt = rt_autocast_dtype();
    rt_tensor *xc = rt_tensor_create(x->ndim, x->shape, dt, x->device, RT_MEM_SAVED);
    rt_tensor *zero = rt_tensor_zeros_like(mean, RT_MEM_TEMP);
    if (!xc || !zero) {
        rt_tensor_release(xc);
        rt_tensor_release(zero);
        return rt_error_set(RT_ERR_OOM, "batch_norm: out of memory for the centred input it saves");
    }
    xc->layout = x->layout;
    rt_backend_of(x)->batchnorm_center(s, rt_tensor_f32(x), rt_tensor_f32(mean), rt_tensor_data(xc), dt);
    *saved_x = xc;
    *saved_mean = zero;
    return RT_OK;
}

rt_status rt_bn_backward_operands(rt_node *node, rt_bn_shape *s, bool training, rt_tensor *dy_in, rt_tensor **x,
                                  rt_tensor **dy) {
    *x = *dy = NULL;
    if (s->bf16 && training && dy_in->dtype == RT_BF16) {
        RT_TRY(rt_node_saved(node, 0, x));
        rt_tensor_retain(*x);
        *dy = rt_tensor_retain(dy_in);
        return RT_OK;
    }
    s->bf16 = false;
    RT_TRY(rt_bn_saved_x(node, x));
    *dy = dy_in->dtype == RT_F32 ? rt_tensor_retain(dy_in) : rt_tensor_to(dy_in, RT_F32, RT_MEM_TEMP);
    if (*dy) return RT_OK;
    rt_tensor_release(*x);
    *x = NULL;
    return rt_error_last_status();
}

rt_status rt_bn_saved_x(rt_node *node, rt_tensor **x) {
    *x = NULL;
    rt_tensor *saved = NULL;
    RT_TRY(rt_node_saved(node, 0, &saved));
    *x = saved->dtype == RT_F32 ? rt_tensor_retain(saved) : rt_tensor_to(saved, RT_F32, RT_MEM_TEMP);
    return *x ? RT_OK : rt_error_last_status();
}

rt_status rt_bn_op_shape(const char *op, const rt_tensor *x, const rt_tensor *weight, const rt_tensor *bias,
                         const rt_tensor *running_mean, const rt_tensor *running_var, bool training, float eps,
                         rt_bn_shape *s) {
    bool bf16 = false; /* a convolution's bf16 output inside a bf16 region */
    RT_TRY(rt_op_check_activation(x, op, &bf16));
    RT_TRY(rt_op_check_f32(weight, op, "weight"));
    RT_TRY(rt_op_check_f32(bias, op, "bias"));
    RT_TRY(rt_op_check_f32(running_mean, op, "running_mean"));
    RT_TRY(rt_op_check_f32(running_var, op, "running_var"));
    char a[64];
    if (x->ndim < 2)
        return rt_error_set(RT_ERR_SHAPE, "%s: expected input (N, C, ...), got %s", op,
                            rt_tensor_shape_str(x, a, sizeof a));
    *s = (rt_bn_shape){.n = x->shape[0], .c = x->shape[1], .spatial = 1, .eps = eps, .layout = x->layout,
                       .nsp = x->ndim - 2, .bf16 = bf16};
    for (int i = 2; i < x->ndim; i++) {
        s->spatial *= x->shape[i];
        if (i - 2 < 3) s->sp[i - 2] = x->shape[i];
    }
    const rt_tensor *per_channel[4] = {weight, bias, running_mean, running_var};
    for (int i = 0; i < 4; i++)
        if (per_channel[i]->ndim != 1 || per_channel[i]->shape[0] != s->c)
            return rt_error_set(RT_ERR_SHAPE, "%s: weight, bias, running_mean and running_var "
                                "must be (%lld) for input %s", op, (long long)s->c,
                                rt_tensor_shape_str(x, a, sizeof a));
    if (training && s->n * s->spatial <= 1)
        return rt_error_set(RT_ERR_SHAPE, "%s: expected more than 1 value per channel when "
                            "training, got input %s; use a larger batch or eval mode", op,
                            rt_tensor_shape_str(x, a, sizeof a));
    return RT_OK;
}

rt_status rt_batch_norm(rt_tensor *x, rt_tensor *weight, rt_tensor *bias, rt_tensor *running_mean,
                        rt_tensor *running_var, int64_t *num_batches_tracked, bool training,
                        float momentum, float eps, rt_tensor **out) {
    RT_TRY(rt_op_check_out(out, "batch_norm"));
    *out = NULL;
    rt_bn_ctx c = {.training = training};
    RT_TRY(rt_bn_op_shape("batch_norm", x, weight, bias, running_mean, running_var, training, eps, &c.s));
    rt_tensor *mean = NULL, *var = NULL;
    if (training) RT_TRY(rt_bn_stats_tensors(&c.s, running_mean, &mean, &var));
    rt_tensor *y = rt_tensor_empty_like(x, RT_MEM_TEMP);
    rt_status st = y ? RT_OK : RT_ERR_OOM;
    if (st == RT_OK) { /* on meta the entries book the kernels' TEMP and compute nothing */
        if (training) {
            st = rt_backend_of(x)->batchnorm_forward_train(&c.s, rt_tensor_data(x), rt_tensor_f32(weight),
                                                           rt_tensor_f32(bias), rt_tensor_data(y),
                                                           rt_tensor_f32(mean), rt_tensor_f32(var));
            if (st == RT_OK && !rt_recompute_is_active())
                rt_bn_update_running(&c.s, momentum, rt_tensor_f32(mean), rt_tensor_f32(var),
                                     running_mean, running_var);
            if (st == RT_OK) st = rt_bn_stats_offer(&c.s, running_mean, mean, var);
        } else {
            st = rt_backend_of(x)->batchnorm_forward_eval(&c.s, rt_tensor_data(x), rt_tensor_f32(weight),
                                                          rt_tensor_f32(bias), rt_tensor_f32(running_mean),
                                                          rt_tensor_f32(running_var), rt_tensor_data(y));
        }
    }
    if (st == RT_OK && training && num_batches_tracked && !rt_recompute_is_active() && rt_op_compute(x))
        (*num_batches_tracked)++;
    rt_node *node = NULL;
    rt_tensor *inputs[3] = {x, weight, bias};
    if (st == RT_OK) st = rt_node_create("batch_norm", 3, inputs, 1, rt_bn_backward, sizeof c, &node);
    if (st == RT_OK && node) {
        memcpy(node->ctx, &c, sizeof c); /* s.bf16: x was bf16 (rt_bn_backward_operands) */
        rt_tensor *sx = NULL, *smean = NULL;
        if (training) st = rt_bn_saved_input(&c.s, x, mean, &sx, &smean);
        rt_tensor *keep[4] = {training ? sx : x, weight, training ? smean : running_mean,
                              training ? var : running_var};
        for (int i = 0; i < 4 && st == RT_OK; i++) st = rt_node_save(node, keep[i], NULL);
        rt_tensor_release(sx);
        rt_tensor_release(smean);
    }
    rt_tensor_release(mean);
    rt_tensor_release(var);
    return rt_op_return(st, node, y, out);
}
