/* Group and instance normalisation over kernels/chanwise.h. Both are one
 * computation: per (sample, group) statistics, then a per-(sample, channel)
 * affine map y = a·x + b; instance norm is G = C, and instance norm with
 * running statistics (eval) is the same map with fixed statistics. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/mem.h"
#include "kernels/chanwise.h"
#include "ops/op_util.h"
#include "ops/ops3d.h"

typedef struct gn_ctx {
    rt_chan_shape s;
    int64_t groups;
    bool input_stats; /* statistics from x (their gradient flows) or fixed running ones */
    bool affine;      /* weight saved in slot 2 */
} gn_ctx;

/* Tracked TEMP scratch for the per-(n, c) vectors (small: a few N·C values). */
typedef struct gn_scratch {
    void *p;
    size_t bytes;
} gn_scratch;

static rt_status gn_scratch_get(gn_scratch *g, size_t bytes) {
    g->bytes = bytes;
    g->p = NULL;
    return rt_mem_alloc(bytes ? bytes : 1, RT_MEM_TEMP, &g->p);
}
static void gn_scratch_put(gn_scratch *g) {
    if (g->p) rt_mem_free(g->p, g->bytes ? g->bytes : 1, RT_MEM_TEMP);
    g->p = NULL;
}
/* On meta: books and releases the scratch at the moment a real call holds
 * it, so predicted peaks match the real run's. */
static rt_status gn_scratch_dry(size_t bytes) {
    RT_TRY(rt_mem_account(bytes ? bytes : 1, RT_MEM_TEMP));
    rt_mem_unaccount(bytes ? bytes : 1, RT_MEM_TEMP);
    return RT_OK;
}

/* stats: [0, N·G) mean, [N·G, 2·N·G) 1/std, per (sample, group). */
static rt_status gn_backward(rt_node *self, rt_tensor *const *grad_out, rt_tensor **grad_in) {
    const gn_ctx *c = self->ctx;
    rt_tensor *x, *stats, *dy = grad_out[0];
    RT_SAVED(self, 0, x);
    RT_SAVED(self, 1, stats);
    const int64_t N = c->s.n, C = c->s.c, G = c->groups, cg = C / G, NC = N * C;
    const double M = (double)cg * (double)c->s.spatial;
    bool need_x = rt_node_needs_grad(self, 0), need_w = rt_node_needs_grad(self, 1),
         need_b = rt_node_needs_grad(self, 2);
    rt_tensor *dx = NULL, *dw = NULL, *db = NULL;
    int64_t cc = C;
    if (need_x && !(dx = rt_tensor_empty_like(x, RT_MEM_TEMP))) return RT_ERR_OOM;
    if (need_w && !(dw = rt_tensor_create(1, &cc, RT_F32, x->device, RT_MEM_TEMP))) goto oom;
    if (need_b && !(db = rt_tensor_create(1, &cc, RT_F32, x->device, RT_MEM_TEMP))) goto oom;
    if (rt_op_compute(x)) {
        const float *gp = NULL;
        if (c->affine) {
            rt_tensor *gamma;
            RT_SAVED(self, 2, gamma);
            gp = rt_tensor_f32(gamma);
        }
        gn_scratch sc;
        if (gn_scratch_get(&sc, (size_t)NC * (2 * sizeof(double) + 3 * sizeof(float))) != RT_OK) goto oom;
        double *A = sc.p, *B = A + NC;
        float *pa = (float *)(B + NC), *pb = pa + NC, *q = pb + NC;
        const float *mean = rt_tensor_f32(stats), *rstd = mean + N * G;
        rt_kernel_chan_sums(&c->s, rt_tensor_f32(dy), rt_tensor_f32(x), A, B);
        for (int64_t n = 0; n < N; n++)
            for (int64_t g = 0; g < G; g++) {
                const double mu = mean[n * G + g], rs = rstd[n * G + g];
                double sA = 0.0, sB = 0.0;
                for (int64_t k = g * cg; k < (g + 1) * cg; k++) {
                    double gk = gp ? gp[k] : 1.0;
                    sA += gk * A[n * C + k];
                    sB += gk * B[n * C + k];
                }
                /* dx = rs·(γ·dy − m1 − x̂·m2), m1 = mean of γ·dy, m2 = mean of γ·dy·x̂ */
                double m1 = c->input_stats ? sA / M : 0.0;
                double m2 = c->input_stats ? (sB - mu * sA) * rs / M : 0.0;
                for (int64_t k = g * cg; k < (g + 1) * cg; k++) {
                    double gk = gp ? gp[k] : 1.0;
                    pa[n * C + k] = (float)(gk * rs);
                    pb[n * C + k] = (float)(-rs * rs * m2);
                    q[n * C + k] = (float)(rs * (mu * rs * m2 - m1));
                }
            }
        if (dx) rt_kernel_chan_affine(&c->s, rt_tensor_f32(dy), pa, rt_tensor_f32(x), pb, q, rt_tensor_f32(dx));
        for (int64_t k = 0; k < C && (dw || db); k++) {
            double sw = 0.0, sb = 0.0;
            for (int64_t n = 0; n < N; n++) {
                const int64_t g = k / cg;
                sw += (B[n * C + k] - mean[n * G + g] * A[n * C + k]) * rstd[n * G + g];
                sb += A[n * C + k];
            }
            if (dw) rt_tensor_f32(dw)[k] = (float)sw;
            if (db) rt_tensor_f32(db)[k] = (float)sb;
        }
        gn_scratch_put(&sc);
    } else if (gn_scratch_dry((size_t)NC * (2 * sizeof(double) + 3 * sizeof(float))) != RT_OK) {
        goto oom;
    }
    grad_in[0] = dx;
    grad_in[1] = dw;
    grad_in[2] = db;
    return RT_OK;
oom:
    rt_tensor_release(dx);
    rt_tensor_release(dw);
    rt_tensor_release(db);
    return RT_ERR_OOM;
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
    if (st == RT_OK && rt_op_compute(x)) {
        const int64_t NC = N * C, cg = C / G;
        const double M = (double)cg * (double)S;
        gn_scratch sc;
        st = gn_scratch_get(&sc, (size_t)NC * (2 * sizeof(double) + 2 * sizeof(float)) + (size_t)C * 2 * sizeof(double));
        if (st == RT_OK) {
            double *s1 = sc.p, *s2 = s1 + NC, *acc_mu = s2 + NC, *acc_var = acc_mu + C;
            float *pa = (float *)(acc_var + C), *q = pa + NC;
            for (int64_t k = 0; k < C; k++) acc_mu[k] = acc_var[k] = 0.0;
            float *mean = rt_tensor_f32(stats), *rstd = mean + N * G;
            if (mean_in) {
                for (int64_t n = 0; n < N; n++)
                    for (int64_t k = 0; k < C; k++) {
                        mean[n * C + k] = rt_tensor_f32(mean_in)[k];
                        rstd[n * C + k] = (float)(1.0 / sqrt((double)rt_tensor_f32(var_in)[k] + (double)eps));
                    }
            } else {
                rt_kernel_chan_sums(&c.s, rt_tensor_f32(x), NULL, s1, s2);
                for (int64_t n = 0; n < N; n++)
                    for (int64_t g = 0; g < G; g++) {
                        double t1 = 0.0, t2 = 0.0;
                        for (int64_t k = g * cg; k < (g + 1) * cg; k++) {
                            t1 += s1[n * C + k];
                            t2 += s2[n * C + k];
                        }
                        double mu = t1 / M, var = t2 / M - mu * mu;
                        if (var < 0.0) var = 0.0;
                        mean[n * G + g] = (float)mu;
                        rstd[n * G + g] = (float)(1.0 / sqrt(var + (double)eps));
                        if (run_mean) { /* instance norm: G == C, g is the channel */
                            acc_mu[g] += mu / (double)N;
                            acc_var[g] += var * (double)S / (double)(S - 1) / (double)N;
                        }
                    }
            }
            for (int64_t n = 0; n < N; n++)
                for (int64_t k = 0; k < C; k++) {
                    const int64_t g = k / cg;
                    double gk = weight ? rt_tensor_f32(weight)[k] : 1.0, bk = bias ? rt_tensor_f32(bias)[k] : 0.0;
                    pa[n * C + k] = (float)(gk * rstd[n * G + g]);
                    q[n * C + k] = (float)(bk - gk * rstd[n * G + g] * mean[n * G + g]);
                }
            rt_kernel_chan_affine(&c.s, rt_tensor_f32(x), pa, NULL, NULL, q, rt_tensor_f32(y));
            /* running = (1 − m)·running + m·(batch mean of the instance statistics), PyTorch's
             * instance_norm; not while recomputing a checkpointed forward (autograd/node.h) */
            if (run_mean && !mean_in && N > 0 && !rt_recompute_is_active()) {
                float *rm = rt_tensor_f32(run_mean), *rv = rt_tensor_f32(run_var);
                for (int64_t k = 0; k < C; k++) {
                    rm[k] = (float)((1.0 - momentum) * rm[k] + momentum * acc_mu[k]);
                    rv[k] = (float)((1.0 - momentum) * rv[k] + momentum * acc_var[k]);
                }
            }
            gn_scratch_put(&sc);
        }
    } else if (st == RT_OK) {
        st = gn_scratch_dry((size_t)(N * C) * (2 * sizeof(double) + 2 * sizeof(float)) + (size_t)C * 2 * sizeof(double));
    }
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
