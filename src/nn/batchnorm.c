/* BatchNorm2d / BatchNorm3d modules, optionally with a fused ReLU (nn/modules.h). */
#include "nn/modules.h"
#include "ops/batchnorm_relu.h"

typedef struct rt_batchnorm_module {
    rt_module base;
    rt_tensor *weight, *bias, *running_mean, *running_var; /* borrowed from the entries */
    int64_t num_batches_tracked;
    float momentum, eps;
    bool fuse_relu;
    rt_batchnorm_fn fn; /* rt_batchnorm_set_function: a replacement (SyncBatchNorm), NULL: built-in */
    void *fn_user;
} rt_batchnorm_module;

static rt_status rt_batchnorm_module_forward(rt_module *m, rt_tensor *x, rt_tensor **y) {
    rt_batchnorm_module *b = (rt_batchnorm_module *)m;
    if (b->fn) return b->fn(b->fn_user, m, x, y);
    return (b->fuse_relu ? rt_batch_norm_relu : rt_batch_norm)(x, b->weight, b->bias, b->running_mean,
                                                               b->running_var, &b->num_batches_tracked,
                                                               m->training, b->momentum, b->eps, y);
}

static const rt_module_class rt_batchnorm2d_class = {"BatchNorm2d", rt_batchnorm_module_forward, NULL, NULL};
static const rt_module_class rt_batchnorm3d_class = {"BatchNorm3d", rt_batchnorm_module_forward, NULL, NULL};

rt_status rt_batchnorm_create(rt_init_ctx *ctx, int nsp, int64_t channels, bool fuse_relu, rt_module **m) {
    if (!m) return rt_error_set(RT_ERR_INVALID_ARG, "rt_batchnorm_create: the output pointer m is NULL");
    *m = NULL;
    if (!ctx) return rt_error_set(RT_ERR_INVALID_ARG, "rt_batchnorm_create: the init context ctx is NULL");
    if ((nsp != 2 && nsp != 3) || channels < 1)
        return rt_error_set(RT_ERR_INVALID_ARG, "BatchNorm needs 2 or 3 spatial dims and >= 1 channel, got %d and %lld",
                            nsp, (long long)channels);
    rt_batchnorm_module *b =
        (rt_batchnorm_module *)rt_module_alloc(sizeof *b, nsp == 2 ? &rt_batchnorm2d_class : &rt_batchnorm3d_class);
    if (!b) return rt_error_last_status();
    b->momentum = 0.1f;
    b->eps = 1e-5f;
    b->fuse_relu = fuse_relu;
    rt_module *base = &b->base;
    rt_status st = rt_module_register(base, ctx, "weight", RT_ENTRY_PARAM, 1, &channels, &b->weight);
    if (st == RT_OK) st = rt_module_register(base, ctx, "bias", RT_ENTRY_PARAM, 1, &channels, &b->bias);
    if (st == RT_OK)
        st = rt_module_register(base, ctx, "running_mean", RT_ENTRY_BUFFER, 1, &channels, &b->running_mean);
    if (st == RT_OK)
        st = rt_module_register(base, ctx, "running_var", RT_ENTRY_BUFFER, 1, &channels, &b->running_var);
    if (st == RT_OK) st = rt_module_register_counter(base, "num_batches_tracked", &b->num_batches_tracked);
    if (st != RT_OK) {
        rt_module_destroy(base);
        return st;
    }
    rt_tensor_fill(b->weight, 1.0f);
    rt_tensor_fill(b->running_var, 1.0f);
    *m = base;
    return RT_OK;
}

rt_status rt_batchnorm_configure(rt_module *m, float momentum, float eps) {
    if (!rt_module_is(m, &rt_batchnorm2d_class) && !rt_module_is(m, &rt_batchnorm3d_class))
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_batchnorm_configure: the module is %s, not a batch norm",
                            m ? m->cls->type : "NULL");
    if (!(momentum >= 0.0f && momentum <= 1.0f) || !(eps > 0.0f))
        return rt_error_set(RT_ERR_INVALID_ARG, "batch norm: momentum must be in [0, 1] and eps > 0, got %g and %g",
                            (double)momentum, (double)eps);
    rt_batchnorm_module *b = (rt_batchnorm_module *)m;
    b->momentum = momentum;
    b->eps = eps;
    return RT_OK;
}

static bool rt_is_batchnorm(const rt_module *m) {
    return rt_module_is(m, &rt_batchnorm2d_class) || rt_module_is(m, &rt_batchnorm3d_class);
}

rt_status rt_batchnorm_view_get(rt_module *m, rt_batchnorm_view *out) {
    if (!rt_is_batchnorm(m) || !out)
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_batchnorm_view_get: %s", !out ? "out is NULL"
                                                                             : "the module is not a batch norm");
    rt_batchnorm_module *b = (rt_batchnorm_module *)m;
    *out = (rt_batchnorm_view){b->weight, b->bias, b->running_mean, b->running_var, &b->num_batches_tracked,
                               b->momentum, b->eps, b->fuse_relu};
    return RT_OK;
}

rt_status rt_batchnorm_set_function(rt_module *m, rt_batchnorm_fn fn, void *user) {
    if (!rt_is_batchnorm(m))
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_batchnorm_set_function: the module is not a batch norm");
    rt_batchnorm_module *b = (rt_batchnorm_module *)m;
    b->fn = fn;
    b->fn_user = fn ? user : NULL;
    return RT_OK;
}
