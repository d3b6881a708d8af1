/* The Linear module (nn/modules.h). */
#include <math.h>

#include "nn/modules.h"

typedef struct rt_linear_module {
    rt_module base;
    rt_tensor *weight, *bias; /* borrowed from the entries */
} rt_linear_module;

static rt_status rt_linear_module_forward(rt_module *m, rt_tensor *x, rt_tensor **y) {
    rt_linear_module *l = (rt_linear_module *)m;
    return rt_linear(x, l->weight, l->bias, y);
}

static const rt_module_class rt_linear_class = {"Linear", rt_linear_module_forward, NULL, NULL};

rt_status rt_linear_create(rt_init_ctx *ctx, int64_t in, int64_t out, bool bias, rt_module **m) {
    if (!m) return rt_error_set(RT_ERR_INVALID_ARG, "rt_linear_create: the output pointer m is NULL");
    *m = NULL;
    if (!ctx) return rt_error_set(RT_ERR_INVALID_ARG, "rt_linear_create: the init context ctx is NULL");
    if (in < 1 || out < 1)
        return rt_error_set(RT_ERR_INVALID_ARG, "Linear(%lld, %lld): in and out features must be >= 1",
                            (long long)in, (long long)out);
    rt_linear_module *l = (rt_linear_module *)rt_module_alloc(sizeof *l, &rt_linear_class);
    if (!l) return rt_error_last_status();
    int64_t shape[2] = {out, in};
    rt_status st = rt_module_register(&l->base, ctx, "weight", RT_ENTRY_PARAM, 2, shape, &l->weight);
    if (st == RT_OK && bias) st = rt_module_register(&l->base, ctx, "bias", RT_ENTRY_PARAM, 1, &out, &l->bias);
    if (st != RT_OK) {
        rt_module_destroy(&l->base);
        return st;
    }
    float bound = 1.0f / sqrtf((float)in);
    rt_init_uniform(ctx, l->weight, bound);
    if (l->bias) rt_init_uniform(ctx, l->bias, bound);
    *m = &l->base;
    return RT_OK;
}
