/* The library training step (train/step.h). */
#include "train/step.h"

#include <math.h>
#include <string.h>

#include "autograd/engine.h"
#include "ops/ops.h"

int64_t rt_count_correct(const rt_tensor *logits, const rt_tensor *labels) {
    if (!logits || !labels || rt_tensor_is_meta(logits) || rt_tensor_is_meta(labels) || logits->ndim != 2 ||
        logits->dtype != RT_F32 || labels->dtype != RT_I32 || labels->ndim != 1 || labels->shape[0] != logits->shape[0])
        return 0;
    int64_t n = logits->shape[0], k = logits->shape[1], correct = 0;
    const float *z = rt_tensor_f32(logits);
    const int32_t *t = rt_tensor_data(labels);
    for (int64_t i = 0; i < n; i++) {
        int64_t best = 0;
        for (int64_t j = 1; j < k; j++)
            if (z[i * k + j] > z[i * k + best]) best = j;
        correct += best == t[i];
    }
    return correct;
}

rt_tensor *rt_batch_slice(const rt_tensor *t, int64_t first, int64_t count) {
    if (!t) {
        rt_error_set(RT_ERR_INVALID_ARG, "rt_batch_slice: the batch tensor is NULL");
        return NULL;
    }
    if (t->ndim < 1 || first < 0 || count < 1 || first + count > t->shape[0]) {
        rt_error_set(RT_ERR_INVALID_ARG, "rt_batch_slice: [%lld, %lld) outside a batch of %lld", (long long)first,
                     (long long)(first + count), (long long)(t->ndim ? t->shape[0] : 0));
        return NULL;
    }
    int64_t shape[RT_MAX_DIMS];
    memcpy(shape, t->shape, sizeof shape);
    size_t row = rt_tensor_nbytes(t) / (size_t)t->shape[0];
    shape[0] = count;
    rt_tensor *s = rt_tensor_create(t->ndim, shape, t->dtype, t->device, RT_MEM_DATA);
    if (s && !rt_tensor_is_meta(t))
        memcpy(rt_tensor_data(s), (const char *)rt_tensor_data(t) + (size_t)first * row, (size_t)count * row);
    return s;
}

/* Forward, loss and backward of one micro-batch, its loss weighted by w
 * (and the loss scale) before backward. */
static rt_status rt_micro_step(rt_module *net, const rt_train_config *cfg, rt_tensor *x, rt_tensor *y, float w,
                               float scale, rt_train_result *out) {
    rt_tensor *logits = NULL, *loss = NULL, *scaled = NULL;
    rt_status st = rt_module_forward(net, x, &logits);
    /* the loss runs outside the model: its bytes are booked to op "loss" */
    const char *prev_op = rt_mem_set_op(cfg->loss ? "loss" : "cross_entropy");
    if (st == RT_OK)
        st = cfg->loss ? cfg->loss(logits, y, cfg->loss_user, &loss)
                       : rt_cross_entropy(logits, y, cfg->label_smoothing, &loss);
    if (st == RT_OK) st = rt_mul_scalar(loss, w * scale, &scaled);
    if (st == RT_OK && !rt_tensor_is_meta(loss)) {
        float l = rt_tensor_f32(loss)[0];
        if (!isfinite(l) && !cfg->hooks.nonfinite_loss_skips)
            st = rt_error_set(RT_ERR_NONFINITE, "the loss is %g at this step: lower the learning rate (--lr), clip "
                              "gradients (--clip) or check the data", (double)l);
        out->loss += (double)w * l;
        if (!cfg->loss) out->correct += rt_count_correct(logits, y);
    }
    rt_tensor_release(logits);
    rt_tensor_release(loss);
    rt_mem_set_op("backward");
    if (st == RT_OK) st = rt_backward(scaled, NULL, false);
    rt_tensor_release(scaled);
    rt_mem_set_op(prev_op);
    return st;
}

rt_status rt_train_step(rt_module *net, rt_optimizer *opt, const rt_train_config *cfg, rt_tensor *x, rt_tensor *y,
                        rt_train_result *out) {
    if (!net || !opt || !cfg || !x || !y || !out)
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_train_step: %s is NULL",
                            !net ? "the module" : !opt ? "the optimizer" : !cfg ? "the config" : !x ? "x" : !y ? "y"
                                                                                                          : "out");
    *out = (rt_train_result){0};
    if (x->ndim < 1 || y->ndim < 1 || x->shape[0] != y->shape[0] || x->shape[0] < 1)
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_train_step: x and y must hold the same number (>= 1) of samples "
                            "along dim 0, got %lld and %lld", (long long)(x->ndim ? x->shape[0] : 0),
                            (long long)(y->ndim ? y->shape[0] : 0));
    if (cfg->accum_steps < 1)
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_train_step: accum_steps must be >= 1, got %lld",
                            (long long)cfg->accum_steps);
    const rt_train_hooks *h = &cfg->hooks;
    int64_t b = x->shape[0], k = cfg->accum_steps < b ? cfg->accum_steps : b, first = 0;
    float scale = h->loss_scale ? h->loss_scale(h->user) : 1.0f;
    rt_optimizer_zero_grad(opt);
    for (int64_t i = 0; i < k; i++) {
        int64_t n = b / k + (i < b % k ? 1 : 0);
        if (h->before_micro_batch) RT_TRY(h->before_micro_batch(h->user, i, k));
        const char *prev_op = rt_mem_set_op("micro_batch");
        rt_tensor *xs = k > 1 ? rt_batch_slice(x, first, n) : rt_tensor_retain(x);
        rt_tensor *ys = k > 1 ? rt_batch_slice(y, first, n) : rt_tensor_retain(y);
        rt_mem_set_op(prev_op);
        rt_status st = (xs && ys) ? rt_micro_step(net, cfg, xs, ys, rt_accum_loss_scale(n, b), scale, out)
                                  : RT_ERR_OOM;
        prev_op = rt_mem_set_op("micro_batch");
        rt_tensor_release(xs);
        rt_tensor_release(ys);
        rt_mem_set_op(prev_op);
        if (st != RT_OK) return st;
        first += n;
    }
    rt_tensor *const *params = rt_optimizer_params(opt);
    int np = rt_optimizer_param_count(opt);
    bool skip = false;
    if (h->after_backward) RT_TRY(h->after_backward(h->user, params, np));
    if (h->before_step) RT_TRY(h->before_step(h->user, params, np, &skip));
    if (!skip && cfg->clip > 0) RT_TRY(rt_clip_grad_norm(params, np, cfg->clip, &out->grad_norm));
    if (!skip) RT_TRY(rt_optimizer_step(opt));
    else rt_optimizer_zero_grad(opt); /* an Inf in any micro-batch drops the whole accumulated step */
    out->stepped = !skip;
    if (h->after_step) RT_TRY(h->after_step(h->user, out->stepped));
    return RT_OK;
}
