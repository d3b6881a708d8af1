/* SGD and AdamW (see optimizer.h). The element loops are transcriptions of
 * PyTorch 1.13's _single_tensor_sgd and _single_tensor_adamw
 * (torch/optim/sgd.py, torch/optim/adamw.py), fused into one pass per
 * parameter: the same f32 operations in the same order, with the scalar
 * coefficients (1-τ, 1-γλ, bias corrections) computed in double as Python
 * does before they are handed to the f32 kernels. */
#include "optim/optimizer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "ops/ops.h"

/* PyTorch's optimizer.state[p] for one parameter. */
typedef struct rt_param_state {
    int64_t step;    /* updates applied to this parameter (state['step']) */
    rt_tensor *buf[2]; /* SGD: momentum_buffer; AdamW: exp_avg, exp_avg_sq; NULL until needed */
} rt_param_state;

struct rt_optimizer {
    rt_optim_kind kind;
    int n;
    rt_tensor **params; /* borrowed pointers */
    rt_param_state *state;
    bool *foreign;      /* rt_optimizer_set_shard: parameters another rank updates (NULL: none) */
    int nbuf;           /* state buffers per parameter: 0, 1 or 2 */
    double lr;
    int64_t step_count;
    rt_sgd_opts sgd;
    rt_adamw_opts adamw;
};

static const char *const rt_sgd_buf_names[] = {"momentum_buffer"};
static const char *const rt_adamw_buf_names[] = {"exp_avg", "exp_avg_sq"};

rt_sgd_opts rt_sgd_default_opts(double lr) {
    rt_sgd_opts o = {0};
    o.lr = lr;
    return o;
}

rt_adamw_opts rt_adamw_default_opts(void) {
    rt_adamw_opts o = {.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8,
                       .weight_decay = 1e-2, .amsgrad = false};
    return o;
}

/* A hyper-parameter that must be finite and >= 0. */
static bool rt_nonneg(double x) { return isfinite(x) && x >= 0.0; }

static rt_optimizer *rt_optimizer_new(const char *who, rt_optim_kind kind, rt_tensor *const *params,
                                      int n, double lr, int nbuf) {
    if (!params || n <= 0) {
        rt_error_set(RT_ERR_INVALID_ARG, "%s: optimizer got an empty parameter list (params=%p, n=%d)",
                     who, (const void *)params, n);
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        const rt_tensor *p = params[i];
        if (!p) {
            rt_error_set(RT_ERR_INVALID_ARG, "%s: parameter %d is NULL", who, i);
            return NULL;
        }
        if (p->dtype != RT_F32) {
            rt_error_set(RT_ERR_DTYPE,
                         "%s: parameter %d is %s; optimizers update f32 master weights only "
                         "(keep reduced-precision copies separately)",
                         who, i, rt_dtype_str(p->dtype));
            return NULL;
        }
        if (p->grad_fn) {
            rt_error_set(RT_ERR_INVALID_ARG,
                         "%s: parameter %d is not a leaf (it has a grad_fn); can't optimize a "
                         "non-leaf tensor",
                         who, i);
            return NULL;
        }
        for (int j = 0; j < i; j++)
            if (params[j] == p) {
                rt_error_set(RT_ERR_INVALID_ARG,
                             "%s: parameters %d and %d are the same tensor; each parameter may "
                             "appear once (it would be updated twice per step)",
                             who, j, i);
                return NULL;
            }
    }
    rt_optimizer *o = calloc(1, sizeof *o);
    if (o) {
        o->params = malloc((size_t)n * sizeof *o->params);
        o->state = calloc((size_t)n, sizeof *o->state);
    }
    if (!o || !o->params || !o->state) {
        rt_optimizer_destroy(o);
        rt_error_set(RT_ERR_OOM, "%s: out of memory allocating the optimizer for %d parameters", who, n);
        return NULL;
    }
    memcpy(o->params, params, (size_t)n * sizeof *o->params);
    o->kind = kind;
    o->n = n;
    o->lr = lr;
    o->nbuf = nbuf;
    return o;
}

rt_optimizer *rt_sgd_create(rt_tensor *const *params, int n, const rt_sgd_opts *o) {
    if (!o) {
        rt_error_set(RT_ERR_INVALID_ARG, "rt_sgd_create: opts is NULL (use rt_sgd_default_opts(lr))");
        return NULL;
    }
    if (!rt_nonneg(o->lr)) {
        rt_error_set(RT_ERR_INVALID_ARG, "rt_sgd_create: invalid learning rate %g (must be finite and >= 0)",
                     o->lr);
        return NULL;
    }
    if (!rt_nonneg(o->momentum)) {
        rt_error_set(RT_ERR_INVALID_ARG, "rt_sgd_create: invalid momentum value %g (must be finite and >= 0)",
                     o->momentum);
        return NULL;
    }
    if (!rt_nonneg(o->weight_decay)) {
        rt_error_set(RT_ERR_INVALID_ARG,
                     "rt_sgd_create: invalid weight_decay value %g (must be finite and >= 0)",
                     o->weight_decay);
        return NULL;
    }
    if (!isfinite(o->dampening)) {
        rt_error_set(RT_ERR_INVALID_ARG, "rt_sgd_create: dampening %g is not finite", o->dampening);
        return NULL;
    }
    if (o->nesterov && (o->momentum <= 0.0 || o->dampening != 0.0)) {
        rt_error_set(RT_ERR_INVALID_ARG,
                     "rt_sgd_create: Nesterov momentum requires a momentum and zero dampening "
                     "(got momentum %g, dampening %g); set momentum > 0 and dampening = 0, or "
                     "nesterov = false",
                     o->momentum, o->dampening);
        return NULL;
    }
    rt_optimizer *opt = rt_optimizer_new("rt_sgd_create", RT_OPTIM_SGD, params, n, o->lr,
                                         o->momentum != 0.0 ? 1 : 0);
    if (opt) opt->sgd = *o;
    return opt;
}

rt_optimizer *rt_adamw_create(rt_tensor *const *params, int n, const rt_adamw_opts *o) {
    if (!o) {
        rt_error_set(RT_ERR_INVALID_ARG, "rt_adamw_create: opts is NULL (use rt_adamw_default_opts())");
        return NULL;
    }
    if (!rt_nonneg(o->lr)) {
        rt_error_set(RT_ERR_INVALID_ARG, "rt_adamw_create: invalid learning rate %g (must be finite and >= 0)",
                     o->lr);
        return NULL;
    }
    if (!rt_nonneg(o->eps)) {
        rt_error_set(RT_ERR_INVALID_ARG, "rt_adamw_create: invalid epsilon value %g (must be finite and >= 0)",
                     o->eps);
        return NULL;
    }
    if (!(o->beta1 >= 0.0 && o->beta1 < 1.0)) {
        rt_error_set(RT_ERR_INVALID_ARG, "rt_adamw_create: invalid beta parameter at index 0: %g (must be in [0, 1))",
                     o->beta1);
        return NULL;
    }
    if (!(o->beta2 >= 0.0 && o->beta2 < 1.0)) {
        rt_error_set(RT_ERR_INVALID_ARG, "rt_adamw_create: invalid beta parameter at index 1: %g (must be in [0, 1))",
                     o->beta2);
        return NULL;
    }
    if (!rt_nonneg(o->weight_decay)) {
        rt_error_set(RT_ERR_INVALID_ARG,
                     "rt_adamw_create: invalid weight_decay value %g (must be finite and >= 0)",
                     o->weight_decay);
        return NULL;
    }
    if (o->amsgrad) {
        rt_error_set(RT_ERR_UNSUPPORTED, "rt_adamw_create: amsgrad = true is not implemented; use amsgrad = false");
        return NULL;
    }
    rt_optimizer *opt = rt_optimizer_new("rt_adamw_create", RT_OPTIM_ADAMW, params, n, o->lr, 2);
    if (opt) opt->adamw = *o;
    return opt;
}

void rt_optimizer_destroy(rt_optimizer *opt) {
    if (!opt) return;
    if (opt->state)
        for (int i = 0; i < opt->n; i++)
            for (int b = 0; b < 2; b++) rt_tensor_release(opt->state[i].buf[b]);
    free(opt->state);
    free(opt->foreign);
    free(opt->params);
    free(opt);
}

const char *rt_optimizer_name(const rt_optimizer *opt) {
    if (!opt) {
        rt_error_set(RT_ERR_INVALID_ARG, "rt_optimizer_name: the optimizer is NULL");
        return NULL;
    }
    return opt->kind == RT_OPTIM_SGD ? "SGD" : "AdamW";
}

int rt_optimizer_param_count(const rt_optimizer *opt) { return opt ? opt->n : 0; }

rt_tensor *const *rt_optimizer_params(const rt_optimizer *opt) {
    if (!opt) {
        rt_error_set(RT_ERR_INVALID_ARG, "rt_optimizer_params: the optimizer is NULL");
        return NULL;
    }
    return opt->params;
}

/* True when parameter i belongs to another rank's shard (set_shard). */
static bool rt_optimizer_is_foreign(const rt_optimizer *opt, int i) { return opt->foreign && opt->foreign[i]; }

rt_status rt_optimizer_set_shard(rt_optimizer *opt, const bool *owned) {
    if (!opt) return rt_error_set(RT_ERR_INVALID_ARG, "rt_optimizer_set_shard: the optimizer is NULL");
    if (!owned) {
        free(opt->foreign);
        opt->foreign = NULL;
        return RT_OK;
    }
    if (!opt->foreign) {
        opt->foreign = calloc((size_t)opt->n, sizeof *opt->foreign);
        if (!opt->foreign) return rt_error_set(RT_ERR_OOM, "rt_optimizer_set_shard: out of memory");
    }
    for (int i = 0; i < opt->n; i++) {
        opt->foreign[i] = !owned[i];
        if (!opt->foreign[i]) continue;
        /* another rank keeps this state now: free ours (the OPTIM bytes ZeRO-1 saves) */
        for (int b = 0; b < 2; b++) {
            rt_tensor_release(opt->state[i].buf[b]);
            opt->state[i].buf[b] = NULL;
        }
        opt->state[i].step = 0;
    }
    return RT_OK;
}

bool rt_optimizer_owns(const rt_optimizer *opt, int i) {
    return opt && i >= 0 && i < opt->n && !rt_optimizer_is_foreign(opt, i);
}

/* Allocates parameter i's missing state buffers as zeros (OPTIM, on the
 * parameter's device). On failure the buffers made so far are kept (they are
 * valid zero state) and the allocator's message stands. */
static rt_status rt_optimizer_ensure_state(rt_optimizer *opt, int i) {
    rt_param_state *st = &opt->state[i];
    for (int b = 0; b < opt->nbuf; b++) {
        if (st->buf[b]) continue;
        st->buf[b] = rt_tensor_zeros_like(opt->params[i], RT_MEM_OPTIM);
        if (!st->buf[b]) return RT_ERR_OOM;
    }
    return RT_OK;
}

/* Checks parameter i's grad (when present) against the parameter. */
static rt_status rt_optimizer_check_grad(const rt_optimizer *opt, int i) {
    const rt_tensor *p = opt->params[i], *g = p->grad;
    if (!g) return RT_OK;
    if (g->dtype != RT_F32)
        return rt_error_set(RT_ERR_DTYPE, "%s.step: the grad of parameter %d is %s; f32 gradients are required",
                            rt_optimizer_name(opt), i, rt_dtype_str(g->dtype));
    if (g->device != p->device)
        return rt_error_set(RT_ERR_INVALID_ARG,
                            "%s.step: parameter %d is on the %s device but its grad is on the %s device",
                            rt_optimizer_name(opt), i, rt_device_name(p->device), rt_device_name(g->device));
    if (!rt_tensor_same_shape(p, g)) {
        char a[64], b[64];
        return rt_error_set(RT_ERR_SHAPE, "%s.step: parameter %d has shape %s but its grad has shape %s",
                            rt_optimizer_name(opt), i, rt_tensor_shape_str(p, a, sizeof a),
                            rt_tensor_shape_str(g, b, sizeof b));
    }
    if (g->layout != p->layout) /* the elementwise update would pair unrelated elements */
        return rt_error_set(RT_ERR_STATE, "%s.step: parameter %d and its grad are in different memory orders "
                            "(layouts %d and %d); convert the parameter with rt_weight_set_layout, which converts its "
                            "grad too", rt_optimizer_name(opt), i, (int)p->layout, (int)g->layout);
    return RT_OK;
}

/* Puts parameter i's state buffers in the parameter's memory order: a
 * weight converted (rt_weight_set_layout) after its state was made keeps
 * its moments meaning what they meant, as PyTorch's state follows a
 * parameter's memory format. */
static rt_status rt_optimizer_state_follow_layout(rt_optimizer *opt, int i) {
    rt_param_state *st = &opt->state[i];
    for (int b = 0; b < opt->nbuf; b++)
        if (st->buf[b] && st->buf[b]->layout != opt->params[i]->layout)
            RT_TRY(rt_weight_set_layout(st->buf[b], opt->params[i]->layout));
    return RT_OK;
}

/* torch.optim.SGD, one parameter (PyTorch 1.13 _single_tensor_sgd):
 *   d_p = grad; if wd: d_p = d_p + wd*param
 *   if momentum: buf = clone(d_p) at the first step, else buf = buf*momentum + (1-dampening)*d_p
 *                d_p = d_p + momentum*buf (nesterov) or d_p = buf
 *   param = param + (-lr)*d_p
 * The coefficients in f32, as the loop (the backend's sgd_update) uses them. */
static rt_sgd_coef rt_sgd_coef_of(const rt_optimizer *opt) {
    return (rt_sgd_coef){.weight_decay = (float)opt->sgd.weight_decay,
                         .momentum = (float)opt->sgd.momentum,
                         .damp1 = (float)(1.0 - opt->sgd.dampening),
                         .neg_lr = (float)-opt->lr,
                         .nesterov = opt->sgd.nesterov};
}

/* torch.optim.AdamW, one parameter, amsgrad = false (PyTorch 1.13
 * _single_tensor_adamw), `step` already incremented:
 *   param *= 1 - lr*wd
 *   exp_avg = exp_avg*beta1 + (1-beta1)*grad
 *   exp_avg_sq = exp_avg_sq*beta2 + (1-beta2)*grad*grad
 *   step_size = lr / (1 - beta1^step);  bc2_sqrt = sqrt(1 - beta2^step)   (double)
 *   denom = sqrt(exp_avg_sq)/bc2_sqrt + eps
 *   param += -step_size * exp_avg/denom
 * The coefficients of the backend's adamw_update, computed in double. */
static rt_adamw_coef rt_adamw_coef_of(const rt_optimizer *opt, int64_t step) {
    const double lr = opt->lr, b1 = opt->adamw.beta1, b2 = opt->adamw.beta2;
    const double bc1 = 1.0 - pow(b1, (double)step), bc2 = 1.0 - pow(b2, (double)step);
    return (rt_adamw_coef){.decay = (float)(1.0 - lr * opt->adamw.weight_decay),
                           .beta1 = (float)b1,
                           .beta2 = (float)b2,
                           .one_minus_beta1 = (float)(1.0 - b1),
                           .one_minus_beta2 = (float)(1.0 - b2),
                           .neg_step = (float)(-(lr / bc1)),
                           .bc2_sqrt = (float)sqrt(bc2),
                           .eps = (float)opt->adamw.eps};
}

rt_status rt_optimizer_step(rt_optimizer *opt) {
    if (!opt) return rt_error_set(RT_ERR_INVALID_ARG, "rt_optimizer_step: optimizer is NULL");
    const char *who = rt_optimizer_name(opt);
    if (!rt_nonneg(opt->lr))
        return rt_error_set(RT_ERR_INVALID_ARG,
                            "%s.step: the learning rate is %g; it must be finite and >= 0 (check the "
                            "value given to rt_optimizer_set_lr / the LR schedule)",
                            who, opt->lr);
    for (int i = 0; i < opt->n; i++) RT_TRY(rt_optimizer_check_grad(opt, i));

    /* Allocate every missing state buffer before touching any parameter. */
    const char *prev_op = rt_mem_set_op(opt->kind == RT_OPTIM_SGD ? "SGD.step" : "AdamW.step");
    for (int i = 0; i < opt->n; i++) {
        if (!opt->params[i]->grad || rt_optimizer_is_foreign(opt, i)) continue;
        rt_status s = rt_optimizer_ensure_state(opt, i);
        if (s == RT_OK) s = rt_optimizer_state_follow_layout(opt, i);
        if (s != RT_OK) {
            rt_mem_set_op(prev_op);
            return s;
        }
    }
    rt_mem_set_op(prev_op);

    for (int i = 0; i < opt->n; i++) {
        rt_tensor *p = opt->params[i];
        if (!p->grad || rt_optimizer_is_foreign(opt, i)) continue;
        rt_param_state *st = &opt->state[i];
        bool first = st->step == 0;
        st->step++;
        const rt_backend *be = rt_backend_of(p); /* meta: accounted, nothing to compute */
        int64_t n = rt_tensor_numel(p);
        float *buf0 = st->buf[0] ? rt_tensor_f32(st->buf[0]) : NULL;
        if (opt->kind == RT_OPTIM_SGD) {
            const rt_sgd_coef c = rt_sgd_coef_of(opt);
            be->sgd_update(n, &c, first, rt_tensor_f32(p), rt_tensor_f32(p->grad), buf0);
        } else {
            const rt_adamw_coef c = rt_adamw_coef_of(opt, st->step);
            be->adamw_update(n, &c, rt_tensor_f32(p), rt_tensor_f32(p->grad), buf0, rt_tensor_f32(st->buf[1]));
        }
        rt_tensor_bump_version(p); /* new values: cached weight layouts are stale (kernels/conv.h) */
    }
    opt->step_count++;
    return RT_OK;
}

void rt_optimizer_zero_grad(rt_optimizer *opt) {
    if (!opt) return;
    const char *prev_op = rt_mem_set_op("zero_grad"); /* the .grad tensors freed show under this op */
    for (int i = 0; i < opt->n; i++) rt_tensor_zero_grad(opt->params[i]);
    rt_mem_set_op(prev_op);
}

void rt_optimizer_set_lr(rt_optimizer *opt, float lr) {
    if (opt) opt->lr = lr;
}
float rt_optimizer_get_lr(const rt_optimizer *opt) { return opt ? (float)opt->lr : NAN; }

int64_t rt_optimizer_step_count(const rt_optimizer *opt) { return opt ? opt->step_count : 0; }
void rt_optimizer_set_step_count(rt_optimizer *opt, int64_t steps) {
    if (opt) opt->step_count = steps < 0 ? 0 : steps;
}

int64_t rt_optimizer_state_nbytes(const rt_optimizer *opt) {
    if (!opt) return 0;
    int64_t total = 0;
    for (int i = 0; i < opt->n; i++)
        if (!rt_optimizer_is_foreign(opt, i)) total += (int64_t)rt_tensor_nbytes(opt->params[i]);
    return total * opt->nbuf;
}

int rt_optimizer_state_count(const rt_optimizer *opt) {
    if (!opt) return 0;
    int owned = 0;
    for (int i = 0; i < opt->n; i++) owned += !rt_optimizer_is_foreign(opt, i);
    return 1 + (opt->nbuf ? owned * (opt->nbuf + 1) : 0);
}

/* Visits an int64 counter as a temporary 0-d int32 tensor and reads back what
 * fn left in it. */
static rt_status rt_visit_counter(rt_optimizer_state_fn fn, void *ud, const char *name, int64_t *value) {
    if (*value > INT32_MAX)
        return rt_error_set(RT_ERR_UNSUPPORTED,
                            "optimizer state %s = %lld does not fit the int32 checkpoint scalar", name,
                            (long long)*value);
    rt_tensor *t = rt_tensor_create(0, NULL, RT_I32, RT_DEVICE_CPU, RT_MEM_OPTIM);
    if (!t) return RT_ERR_OOM;
    *(int32_t *)rt_tensor_data(t) = (int32_t)*value;
    rt_status s = fn(ud, name, t);
    int32_t back = *(const int32_t *)rt_tensor_data(t);
    rt_tensor_release(t);
    if (s != RT_OK) return s;
    if (back < 0)
        return rt_error_set(RT_ERR_FORMAT, "optimizer state %s was set to %d; step counts are >= 0",
                            name, (int)back);
    *value = back;
    return RT_OK;
}

rt_status rt_optimizer_state_visit(rt_optimizer *opt, rt_optimizer_state_fn fn, void *ud) {
    if (!opt || !fn)
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_optimizer_state_visit: %s is NULL",
                            !opt ? "optimizer" : "callback");
    const char *prev_op = rt_mem_set_op(opt->kind == RT_OPTIM_SGD ? "SGD.state" : "AdamW.state");
    rt_status s = RT_OK;
    for (int i = 0; i < opt->n && s == RT_OK; i++)
        if (!rt_optimizer_is_foreign(opt, i)) s = rt_optimizer_ensure_state(opt, i);
    rt_mem_set_op(prev_op);
    RT_TRY(s);

    RT_TRY(rt_visit_counter(fn, ud, "step_count", &opt->step_count));
    if (opt->nbuf == 0) return RT_OK;
    const char *const *names = opt->kind == RT_OPTIM_SGD ? rt_sgd_buf_names : rt_adamw_buf_names;
    char name[64];
    for (int i = 0; i < opt->n; i++) {
        if (rt_optimizer_is_foreign(opt, i)) continue;
        snprintf(name, sizeof name, "state.%d.step", i);
        RT_TRY(rt_visit_counter(fn, ud, name, &opt->state[i].step));
        for (int b = 0; b < opt->nbuf; b++) {
            snprintf(name, sizeof name, "state.%d.%s", i, names[b]);
            RT_TRY(fn(ud, name, opt->state[i].buf[b]));
        }
    }
    return RT_OK;
}

rt_optimizer *rt_optimizer_create(const rt_optimizer_spec *spec, rt_tensor *const *params, int n) {
    if (!spec) {
        rt_error_set(RT_ERR_INVALID_ARG, "rt_optimizer_create: the spec is NULL");
        return NULL;
    }
    if (spec->kind == RT_OPTIM_SGD) return rt_sgd_create(params, n, &spec->sgd);
    if (spec->kind == RT_OPTIM_ADAMW) return rt_adamw_create(params, n, &spec->adamw);
    rt_error_set(RT_ERR_INVALID_ARG, "rt_optimizer_create: unknown optimizer kind %d", (int)spec->kind);
    return NULL;
}
