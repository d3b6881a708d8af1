/* Pooling modules: MaxPool, AvgPool, AdaptiveAvgPool(1) (nn/modules.h). */
#include "nn/modules.h"

typedef struct rt_pool_module {
    rt_module base;
    rt_pool_opts opts;
} rt_pool_module;

static rt_status rt_max_pool_forward(rt_module *m, rt_tensor *x, rt_tensor **y) {
    return rt_max_pool(x, &((rt_pool_module *)m)->opts, y);
}

static rt_status rt_avg_pool_forward(rt_module *m, rt_tensor *x, rt_tensor **y) {
    return rt_avg_pool(x, &((rt_pool_module *)m)->opts, y);
}

static rt_status rt_adaptive_avg_pool_forward(rt_module *m, rt_tensor *x, rt_tensor **y) {
    (void)m;
    return rt_adaptive_avg_pool_1(x, y);
}

static const rt_module_class rt_pool_classes[3][2] = {
    {{"MaxPool2d", rt_max_pool_forward, NULL, NULL}, {"MaxPool3d", rt_max_pool_forward, NULL, NULL}},
    {{"AvgPool2d", rt_avg_pool_forward, NULL, NULL}, {"AvgPool3d", rt_avg_pool_forward, NULL, NULL}},
    {{"AdaptiveAvgPool2d", rt_adaptive_avg_pool_forward, NULL, NULL},
     {"AdaptiveAvgPool3d", rt_adaptive_avg_pool_forward, NULL, NULL}},
};

static rt_status rt_pool_create(int kind, int nsp, int64_t kernel, int64_t stride, int64_t padding, rt_module **m) {
    if (!m)
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_%s_create: the output pointer m is NULL",
                            kind == 0 ? "max_pool" : kind == 1 ? "avg_pool" : "adaptive_avg_pool");
    *m = NULL;
    if (nsp != 2 && nsp != 3)
        return rt_error_set(RT_ERR_INVALID_ARG, "%s: pooling is 2-D or 3-D, got %d spatial dims",
                            rt_pool_classes[kind][0].type, nsp);
    if (kind < 2 && (kernel < 1 || stride < 0 || padding < 0 || 2 * padding > kernel))
        return rt_error_set(RT_ERR_INVALID_ARG, "%s(kernel_size=%lld, stride=%lld, padding=%lld): need kernel >= 1, "
                            "stride >= 0 (0: = kernel) and 0 <= padding <= kernel/2 (as PyTorch)",
                            rt_pool_classes[kind][nsp - 2].type, (long long)kernel, (long long)stride,
                            (long long)padding);
    rt_pool_module *p = (rt_pool_module *)rt_module_alloc(sizeof *p, &rt_pool_classes[kind][nsp - 2]);
    if (!p) return rt_error_last_status();
    for (int i = 0; i < nsp; i++) {
        p->opts.kernel[i] = kernel;
        p->opts.stride[i] = stride;
        p->opts.padding[i] = padding;
    }
    *m = &p->base;
    return RT_OK;
}

rt_status rt_max_pool_create(int nsp, int64_t kernel, int64_t stride, int64_t padding, rt_module **m) {
    return rt_pool_create(0, nsp, kernel, stride, padding, m);
}

rt_status rt_avg_pool_create(int nsp, int64_t kernel, int64_t stride, int64_t padding, rt_module **m) {
    return rt_pool_create(1, nsp, kernel, stride, padding, m);
}

rt_status rt_adaptive_avg_pool_create(int nsp, int64_t output_size, rt_module **m) {
    if (!m) return rt_error_set(RT_ERR_INVALID_ARG, "rt_adaptive_avg_pool_create: the output pointer m is NULL");
    *m = NULL;
    if (output_size != 1)
        return rt_error_set(RT_ERR_INVALID_ARG, "AdaptiveAvgPool: only output_size 1 is implemented, got %lld",
                            (long long)output_size);
    return rt_pool_create(2, nsp, 1, 1, 0, m);
}
