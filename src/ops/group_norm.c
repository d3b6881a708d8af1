/* Group and instance normalisation: the backend's group_norm_* entries
 * (kernels/group_norm.h on cpu). Both are one computation: per (sample,
 * group) statistics, then a per-(sample, channel) affine map y = a·x + b;
 * instance norm is G = C, and instance norm with running statistics (eval)
 * is the same map with fixed statistics. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "ops/op_util.h"
#include "ops/ops3d.h"

typedef struct gn_ctx {
    rt_chan_shape s;
    int64_t groups;
    bool input_stats; /* statistics from x (their gradient flows) or fixed running ones */
    bool affine;      /* weight saved in slot 2 */
} gn_ctx;

/* stats: [0, N·G) mean, [N·G, 2·N·G) 1/std, per (sample, group). */
static rt_status gn_backward(rt_node *self, rt_tensor *const *grad_out, rt_tensor **grad_in) {
    const gn_ctx *c = self->ctx;
    rt_tensor *x, *stats, *gamma = NULL, *dy = grad_out[0];
    RT_SAVED(self, 0, x);
    RT_SAVED(self, 1, stats);
    if (c->affine) RT_SAVED(self, 2, gamma);
    const int64_t C = c->s.c;
    bool need_x = rt_node_needs_grad(self, 0), need_w = rt_node_needs_grad(self, 1),
         need_b = rt_node_needs_grad(self, 2);
    rt_tensor *dx = NULL, *dw = NULL, *db = NULL;
    int64_t cc = C;
    if (need_x && !(dx = rt_tensor_empty_like(x, RT_MEM_TEMP))) return RT_ERR_OOM;
    if (need_w && !(dw = rt_tensor_create(1, &cc, RT_F32, x->device, RT_MEM_TEMP))) goto oom;
    if (need_b && !(db = rt_tensor_create(1, &cc, RT_F32, x->device, RT_MEM_TEMP))) goto oom;
    /* meta books the kernel's scratch at the moment a real call holds it */
    rt_status st = rt_backend_of(x)->group_norm_backward(
        &c->s, c->groups, c->input_stats, rt_tensor_f32(x), rt_tensor_f32(stats), gamma ? rt_tensor_f32(gamma) : NULL,
        rt_tensor_f32(dy), dx ? rt_tensor_f32(dx) : NULL, dw ? rt_tensor_f32(dw) : NULL, db ? rt_tensor_f32(db) : NULL);
    if (st != RT_OK) goto fail;
    grad_in[0] = dx;
    grad_in[1] = dw;
    grad_in[2] = db;
    return RT_OK;
oom:
    st = RT_ERR_OOM;
fail:
    rt_tensor_release(dx);
    rt_tensor_release(dw);
    rt_tensor_release(db);
    return st;
}

/* Shared checks of weight/bias (C) or both NULL. */
static rt_status gn_check_affine(const char *op, const rt_tensor *x, const rt_tensor *w, const rt_tensor *b) {
    if (!w != !b)
        return rt_error_set(RT_ERR_INVALID_ARG, "%s: give both weight and bias (affine) or neither", op);
    const rt_tensor *t[2] = {w, b};
    for (int i = 0; i < 2 && w; i++) {
        RT_TRY(rt_op_check_f32(t[i], op, i ? "bias" : "weight"));
        RT_TRY(rt_op_check_device(x, t[i], op));
        if (t[i]->ndim != 1 || t[i]->shape[0] != x->shape[1]) {
            char a[64];
            return rt_error_set(RT_ERR_SHAPE, "%s: %s must be (%lld), the channel count, got %s", op,
                                i ? "bias" : "weight", (long long)x->shape[1], rt_tensor_shape_str(t[i], a, sizeof a));
        }
    }
    return RT_OK;
}

/* The common forward. mean_in/var_in: fixed per-channel statistics (eval
 * instance norm) or NULL (statistics from x); run_mean/run_var: running
 * statistics to update from x's (instance norm in training) or NULL. */
static rt_status gn_forward(const char *op, rt_tensor *x, int64_t G, rt_tensor *weight, rt_tensor *bias, float eps,
                            const rt_tensor *mean_in, const rt_tensor *var_in, rt_tensor *run_mean,
                            rt_tensor *run_var, float momentum, rt_tensor **out) {
    char a[64];
    const int64_t N = x->shape[0], C = x->shape[1];
    int64_t S = 1;
    for (int i = 2; i < x->ndim; i++) S *= x->shape[i];
    if (x->ndim < 3)
        return rt_error_set(RT_ERR_SHAPE, "%s: expected (N, C, spatial...) with at least one spatial dim, got %s",
                            op, rt_tensor_shape_str(x, a, sizeof a));
    if (!mean_in && S == 1)
        return rt_error_set(RT_ERR_SHAPE,
                            "%s: input %s has a single spatial element: normalising each group over one "
                            "position leaves only the bias (PyTorch's InstanceNorm refuses it too); "
                            "upsample or remove the norm at this resolution",
                            op, rt_tensor_shape_str(x, a, sizeof a));
    if (!(eps > 0.0f) || !isfinite(eps))
        return rt_error_set(RT_ERR_INVALID_ARG, "%s: eps must be finite and > 0, got %g", op, (double)eps);
    RT_TRY(gn_check_affine(op, x, weight, bias));
    gn_ctx c = {.s = {N, C, S, x->layout}, .groups = G, .input_stats = mean_in == NULL, .affine = weight != NULL};
    int64_t sshape[1] = {2 * N * G};
    rt_tensor *y = rt_tensor_empty_like(x, RT_MEM_TEMP);
    rt_tensor *stats = rt_tensor_create(1, sshape, RT_F32, x->device, RT_MEM_TEMP);
    rt_status st = y && stats ? RT_OK : RT_ERR_OOM;
    /* running statistics: not while recomputing a checkpointed forward
     * (autograd/node.h); meta books the kernel's scratch */
    const bool update = run_mean && !rt_recompute_is_active();
    if (st == RT_OK)
        st = rt_backend_of(x)->group_norm_forward(
            &c.s, G, eps, rt_tensor_f32(x), weight ? rt_tensor_f32(weight) : NULL, bias ? rt_tensor_f32(bias) : NULL,
            mean_in ? rt_tensor_f32(mean_in) : NULL, var_in ? rt_tensor_f32(var_in) : NULL,
            update ? rt_tensor_f32(run_mean) : NULL, update ? rt_tensor_f32(run_var) : NULL, momentum, rt_tensor_f32(y),
            rt_tensor_f32(stats));
    rt_node *node = NULL;
    rt_tensor *inputs[3] = {x, weight, bias};
    if (st == RT_OK) st = rt_node_create(op, 3, inputs, 1, gn_backward, sizeof c, &node);
    if (st == RT_OK && node) {
        memcpy(node->ctx, &c, sizeof c);
        st = rt_node_save(node, x, NULL);
        if (st == RT_OK) st = rt_node_save(node, stats, NULL);
        if (st == RT_OK && weight) st = rt_node_save(node, weight, NULL);
    }
    rt_tensor_release(stats);
    return rt_op_return(st, node, y, out);
}

rt_status rt_group_norm(rt_tensor *x, int64_t num_groups, rt_tensor *weight, rt_tensor *bias, float eps,
                        rt_tensor **out) {
    RT_TRY(rt_op_check_out(out, "group_norm"));
    *out = NULL;
    RT_TRY(rt_op_check_f32(x, "group_norm", "input"));
    if (x->ndim < 2 || num_groups < 1 || x->shape[1] % num_groups != 0) {
        char a[64];
        return rt_error_set(RT_ERR_SHAPE, "group_norm: num_groups=%lld must be >= 1 and divide the channel count "
                            "of input %s", (long long)num_groups, rt_tensor_shape_str(x, a, sizeof a));
    }
    return gn_forward("group_norm", x, num_groups, weight, bias, eps, NULL, NULL, NULL, NULL, 0.0f, out);
}

rt_status rt_instance_norm(rt_tensor *x, rt_tensor *running_mean, rt_tensor *running_var, rt_tensor *weight,
                           rt_tensor *bias, bool use_input_stats, float momentum, float eps, rt_tensor **out) {
    const char *op = "instance_norm";
    RT_TRY(rt_op_check_out(out, op));
    *out = NULL;
    RT_TRY(rt_op_check_f32(x, op, "input"));
    char a[64];
    if (x->ndim < 3)
        return rt_error_set(RT_ERR_SHAPE, "instance_norm: expected (N, C, spatial...), got %s",
                            rt_tensor_shape_str(x, a, sizeof a));
    if (!running_mean != !running_var)
        return rt_error_set(RT_ERR_INVALID_ARG, "instance_norm: give both running_mean and running_var or neither");
    if (!use_input_stats && !running_mean)
        return rt_error_set(RT_ERR_INVALID_ARG, "instance_norm: use_input_stats=false needs running_mean and "
                            "running_var (track_running_stats=True)");
    const rt_tensor *r[2] = {running_mean, running_var};
    for (int i = 0; i < 2 && running_mean; i++) {
        RT_TRY(rt_op_check_f32(r[i], op, i ? "running_var" : "running_mean"));
        RT_TRY(rt_op_check_device(x, r[i], op));
        if (r[i]->ndim != 1 || r[i]->shape[0] != x->shape[1])
            return rt_error_set(RT_ERR_SHAPE, "instance_norm: %s must be (%lld), got %s",
                                i ? "running_var" : "running_mean", (long long)x->shape[1],
                                rt_tensor_shape_str(r[i], a, sizeof a));
    }
    if (use_input_stats && !(momentum >= 0.0f && momentum <= 1.0f))
        return rt_error_set(RT_ERR_INVALID_ARG, "instance_norm: momentum must be in [0, 1], got %g", (double)momentum);
    if (use_input_stats)
        return gn_forward(op, x, x->shape[1], weight, bias, eps, NULL, NULL, running_mean, running_var, momentum,
                          out);
    return gn_forward(op, x, x->shape[1], weight, bias, eps, running_mean, running_var, NULL, NULL, 0.0f, out);
}
