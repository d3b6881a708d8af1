/* SyncBatchNorm (dist/sync_bn.h). */
#include "dist/sync_bn.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/node.h"
#include "dist/dist_impl.h"
#include "nn/modules.h"
#include "ops/ops.h"

/* The op's shape: n samples of c channels of s values; in the blocked order
 * channel ch of sample i starts at ((i·c/B + ch/B)·s)·B + ch%B with stride B. */
typedef struct rt_sbn_ctx {
    rt_dist *d;
    int64_t n, c, s;
    bool blocked;
    double count; /* M: values per channel over all ranks */
} rt_sbn_ctx;

static void rt_sbn_place(const rt_sbn_ctx *c, int64_t i, int64_t ch, int64_t *off, int64_t *stride) {
    if (c->blocked) {
        const int64_t b = rt_layout_block();
        *off = ((i * (c->c / b) + ch / b) * c->s) * b + ch % b;
        *stride = b;
    } else {
        *off = (i * c->c + ch) * c->s;
        *stride = 1;
    }
}

#ifdef RT_HAVE_MPI
/* Sums v[0..n-1] over the ranks on the statistics' communicator. */
static rt_status rt_sbn_allreduce(rt_dist *d, double *v, int n, const char *what) {
    MPI_Request req;
    int rc = MPI_Iallreduce(MPI_IN_PLACE, v, n, MPI_DOUBLE, MPI_SUM, d->stat_comm, &req);
    if (rc != MPI_SUCCESS) return rt_dist_mpi_error(d, rc, what);
    return rt_dist_wait(d, 1, &req, NULL, what);
}
#else
static rt_status rt_sbn_allreduce(rt_dist *d, double *v, int n, const char *what) {
    (void)d, (void)v, (void)n;
    return rt_error_set(RT_ERR_UNSUPPORTED, "%s: built without MPI", what);
}
#endif

static rt_status rt_sbn_backward_with(rt_node *self, rt_tensor *x, rt_tensor *w, rt_tensor *mean, rt_tensor *invstd,
                                      rt_tensor *dy, rt_tensor **grad_in);

/* Backward; dy is first brought to x's memory order. */
static rt_status rt_sbn_backward(rt_node *self, rt_tensor *const *grad_out, rt_tensor **grad_in) {
    rt_tensor *x, *w, *mean, *invstd, *dy = grad_out[0];
    RT_TRY(rt_node_saved(self, 0, &x));
    RT_TRY(rt_node_saved(self, 1, &w));
    RT_TRY(rt_node_saved(self, 2, &mean));
    RT_TRY(rt_node_saved(self, 3, &invstd));
    if (dy->layout != x->layout) { /* the next op may hand back the other memory order */
        rt_tensor *conv = NULL;
        bool was = rt_grad_is_enabled();
        rt_grad_set_enabled(false);
        rt_status cs = rt_to_layout(dy, x->layout, &conv);
        rt_grad_set_enabled(was);
        RT_TRY(cs);
        rt_status st = rt_sbn_backward_with(self, x, w, mean, invstd, conv, grad_in);
        rt_tensor_release(conv);
        return st;
    }
    return rt_sbn_backward_with(self, x, w, mean, invstd, dy, grad_in);
}

static rt_status rt_sbn_backward_with(rt_node *self, rt_tensor *x, rt_tensor *w, rt_tensor *mean, rt_tensor *invstd,
                                      rt_tensor *dy, rt_tensor **grad_in) {
    const rt_sbn_ctx *c = self->ctx;
    rt_tensor *dx = rt_tensor_empty_like(x, RT_MEM_TEMP), *dw = rt_tensor_empty_like(w, RT_MEM_TEMP),
              *db = rt_tensor_empty_like(w, RT_MEM_TEMP);
    double *acc = calloc((size_t)(2 * c->c), sizeof *acc); /* Σdy, Σdy·x̂ per channel */
    rt_status st = dx && dw && db && acc ? RT_OK : rt_error_set(RT_ERR_OOM, "out of memory in SyncBatchNorm backward");
    if (st == RT_OK && !rt_tensor_is_meta(x)) {
        const float *xp = rt_tensor_f32(x), *g = rt_tensor_f32(dy), *mu = rt_tensor_f32(mean),
                    *is = rt_tensor_f32(invstd), *wp = rt_tensor_f32(w);
        for (int64_t i = 0; i < c->n; i++)
            for (int64_t ch = 0; ch < c->c; ch++) {
                int64_t off, stride;
                rt_sbn_place(c, i, ch, &off, &stride);
                double s0 = 0, s1 = 0;
                for (int64_t k = 0; k < c->s; k++) {
                    double gv = g[off + k * stride];
                    s0 += gv;
                    s1 += gv * ((xp[off + k * stride] - mu[ch]) * is[ch]);
                }
                acc[ch] += s0;
                acc[c->c + ch] += s1;
            }
        for (int64_t ch = 0; ch < c->c; ch++) { /* this rank's: data parallelism averages them */
            rt_tensor_f32(db)[ch] = (float)acc[ch];
            rt_tensor_f32(dw)[ch] = (float)acc[c->c + ch];
        }
        if (rt_dist_size(c->d) > 1) st = rt_sbn_allreduce(c->d, acc, (int)(2 * c->c), "SyncBatchNorm's gradient sums");
        float *dxp = rt_tensor_f32(dx);
        for (int64_t i = 0; st == RT_OK && i < c->n; i++)
            for (int64_t ch = 0; ch < c->c; ch++) {
                int64_t off, stride;
                rt_sbn_place(c, i, ch, &off, &stride);
                const float m_dy = (float)(acc[ch] / c->count), m_dyx = (float)(acc[c->c + ch] / c->count);
                const float scale = wp[ch] * is[ch];
                for (int64_t k = 0; k < c->s; k++) {
                    int64_t e = off + k * stride;
                    float xhat = (xp[e] - mu[ch]) * is[ch];
                    dxp[e] = scale * (g[e] - m_dy - xhat * m_dyx);
                }
            }
    }
    free(acc);
    rt_tensor *grads[3] = {dx, dw, db};
    for (int i = 0; i < 3; i++) {
        if (st == RT_OK && rt_node_needs_grad(self, i)) grad_in[i] = rt_tensor_retain(grads[i]);
        rt_tensor_release(grads[i]);
    }
    return st;
}

rt_status rt_sync_batch_norm(rt_dist *d, rt_tensor *x, rt_tensor *weight, rt_tensor *bias, rt_tensor *running_mean,
                             rt_tensor *running_var, int64_t *num_batches_tracked, bool training, float momentum,
                             float eps, rt_tensor **out) {
    if (!d || !x || !weight || !bias || !running_mean || !running_var || !out)
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_sync_batch_norm: %s is NULL",
                            !d ? "d" : !x ? "x" : !weight ? "weight" : !bias ? "bias" : !running_mean ? "running_mean"
                                                                          : !running_var ? "running_var" : "out");
    *out = NULL;
    if (!training)
        return rt_batch_norm(x, weight, bias, running_mean, running_var, num_batches_tracked, training, momentum, eps,
                             out);
    if (x->ndim < 2 || x->dtype != RT_F32 || weight->ndim != 1 || weight->shape[0] != x->shape[1] ||
        bias->ndim != 1 || bias->shape[0] != x->shape[1] || running_mean->ndim != 1 ||
        running_mean->shape[0] != x->shape[1] || running_var->ndim != 1 || running_var->shape[0] != x->shape[1])
        return rt_error_set(x->dtype != RT_F32 ? RT_ERR_DTYPE : RT_ERR_SHAPE, "SyncBatchNorm: expected f32 input "
                            "(N, C, ...) and (C) weight, bias and running statistics");
    rt_sbn_ctx c = {.d = d, .n = x->shape[0], .c = x->shape[1], .s = 1, .blocked = x->layout == RT_LAYOUT_BLOCKED};
    for (int i = 2; i < x->ndim; i++) c.s *= x->shape[i];
    rt_tensor *y = rt_tensor_empty_like(x, RT_MEM_TEMP);
    rt_tensor *mean = rt_tensor_empty_like(running_mean, RT_MEM_TEMP),
              *invstd = rt_tensor_empty_like(running_mean, RT_MEM_TEMP);
    double *acc = calloc((size_t)(2 * c.c + 1), sizeof *acc); /* Σx, Σx² per channel, then the count */
    rt_status st = y && mean && invstd && acc ? RT_OK : rt_error_set(RT_ERR_OOM, "out of memory in SyncBatchNorm");
    if (st == RT_OK && !rt_tensor_is_meta(x)) {
        const float *xp = rt_tensor_f32(x);
        for (int64_t i = 0; i < c.n; i++)
            for (int64_t ch = 0; ch < c.c; ch++) {
                int64_t off, stride;
                rt_sbn_place(&c, i, ch, &off, &stride);
                double s0 = 0, s1 = 0;
                for (int64_t k = 0; k < c.s; k++) {
                    double v = xp[off + k * stride];
                    s0 += v;
                    s1 += v * v;
                }
                acc[ch] += s0;
                acc[c.c + ch] += s1;
            }
        acc[2 * c.c] = (double)(c.n * c.s);
        st = rt_sbn_allreduce(d, acc, (int)(2 * c.c + 1), "SyncBatchNorm's statistics");
        c.count = acc[2 * c.c];
        if (st == RT_OK && c.count <= 1)
            st = rt_error_set(RT_ERR_SHAPE, "SyncBatchNorm: expected more than 1 value per channel over the ranks");
        float *mu = rt_tensor_f32(mean), *is = rt_tensor_f32(invstd), *yp = rt_tensor_f32(y);
        const float *wp = rt_tensor_f32(weight), *bp = rt_tensor_f32(bias);
        for (int64_t ch = 0; st == RT_OK && ch < c.c; ch++) {
            double m = acc[ch] / c.count, var = acc[c.c + ch] / c.count - m * m;
            if (var < 0) var = 0;
            mu[ch] = (float)m;
            is[ch] = (float)(1.0 / sqrt(var + (double)eps));
            if (!rt_recompute_is_active()) { /* a replayed forward leaves the running statistics alone */
                float *rm = rt_tensor_f32(running_mean), *rv = rt_tensor_f32(running_var);
                rm[ch] = (1.0f - momentum) * rm[ch] + momentum * (float)m;
                rv[ch] = (1.0f - momentum) * rv[ch] + momentum * (float)(var * c.count / (c.count - 1));
            }
        }
        for (int64_t i = 0; st == RT_OK && i < c.n; i++)
            for (int64_t ch = 0; ch < c.c; ch++) {
                int64_t off, stride;
                rt_sbn_place(&c, i, ch, &off, &stride);
                const float scale = wp[ch] * is[ch];
                for (int64_t k = 0; k < c.s; k++) {
                    int64_t e = off + k * stride;
                    yp[e] = (xp[e] - mu[ch]) * scale + bp[ch];
                }
            }
    }
    free(acc);
    if (st == RT_OK && num_batches_tracked && !rt_recompute_is_active() && !rt_tensor_is_meta(x))
        (*num_batches_tracked)++;
    rt_node *node = NULL;
    rt_tensor *inputs[3] = {x, weight, bias};
    if (st == RT_OK) st = rt_node_create("sync_batch_norm", 3, inputs, 1, rt_sbn_backward, sizeof c, &node);
    if (st == RT_OK && node) {
        memcpy(node->ctx, &c, sizeof c);
        rt_tensor *keep[4] = {x, weight, mean, invstd};
        for (int i = 0; i < 4 && st == RT_OK; i++) st = rt_node_save(node, keep[i], NULL);
        if (st == RT_OK) rt_node_set_output(node, y, 0);
    }
    rt_node_release(node);
    rt_tensor_release(mean);
    rt_tensor_release(invstd);
    if (st != RT_OK) {
        rt_tensor_release(y);
        return st;
    }
    *out = y;
    return RT_OK;
}

/* A converted batch norm's forward: the synchronised op, then its fused ReLU. */
static rt_status rt_sbn_module_forward(void *user, rt_module *m, rt_tensor *x, rt_tensor **y) {
    rt_batchnorm_view v;
    RT_TRY(rt_batchnorm_view_get(m, &v));
    rt_tensor *z = NULL;
    RT_TRY(rt_sync_batch_norm(user, x, v.weight, v.bias, v.running_mean, v.running_var, v.num_batches_tracked,
                              m->training, v.momentum, v.eps, &z));
    if (!v.fuse_relu) {
        *y = z;
        return RT_OK;
    }
    rt_status st = rt_relu(z, y);
    rt_tensor_release(z);
    return st;
}

static rt_status rt_sbn_convert(rt_module *m, const char *path, void *user) {
    (void)path;
    rt_batchnorm_view v;
    if (rt_batchnorm_view_get(m, &v) != RT_OK) {
        rt_error_clear();
        return RT_OK;
    }
    return rt_batchnorm_set_function(m, rt_sbn_module_forward, user);
}

rt_status rt_dist_convert_sync_batchnorm(rt_dist *d, rt_module *net) {
    if (!d || !net)
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_dist_convert_sync_batchnorm: %s is NULL", !d ? "d" : "net");
    return rt_module_visit(net, rt_sbn_convert, d);
}
