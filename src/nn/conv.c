/* Conv2d / Conv3d modules (nn/modules.h). */
#include <math.h>

#include "nn/modules.h"
#include "nn/modules3d.h"

typedef struct rt_conv_module {
    rt_module base;
    rt_tensor *weight, *bias; /* borrowed from the module's entries */
    rt_conv_opts opts;
    bool preferred_output; /* asked by rt_conv_set_preferred_output; opts follow rt_module_set_blocked */
} rt_conv_module;

static rt_status rt_conv_module_forward(rt_module *m, rt_tensor *x, rt_tensor **y) {
    rt_conv_module *c = (rt_conv_module *)m;
    return rt_conv(x, c->weight, c->bias, &c->opts, y);
}

static const rt_module_class rt_conv2d_class = {"Conv2d", rt_conv_module_forward, NULL, NULL};
static const rt_module_class rt_conv3d_class = {"Conv3d", rt_conv_module_forward, NULL, NULL};

rt_status rt_conv_create(rt_init_ctx *ctx, int nsp, int64_t in, int64_t out, int64_t k, int64_t stride,
                         int64_t padding, int64_t groups, bool bias, rt_conv_init init, rt_module **m) {
    if (!m) return rt_error_set(RT_ERR_INVALID_ARG, "rt_conv_create: the output pointer m is NULL");
    *m = NULL;
    if (!ctx) return rt_error_set(RT_ERR_INVALID_ARG, "rt_conv_create: the init context ctx is NULL");
    if (nsp != 2 && nsp != 3)
        return rt_error_set(RT_ERR_INVALID_ARG, "convolutions are 2-D or 3-D, got %d spatial dims", nsp);
    if (in < 1 || out < 1 || k < 1 || stride < 1 || padding < 0)
        return rt_error_set(RT_ERR_INVALID_ARG, "Conv%dd(%lld, %lld, kernel_size=%lld, stride=%lld, padding=%lld): "
                            "channels, kernel and stride must be >= 1 and padding >= 0", nsp, (long long)in,
                            (long long)out, (long long)k, (long long)stride, (long long)padding);
    if (groups < 1 || in % groups || out % groups)
        return rt_error_set(RT_ERR_INVALID_ARG, "Conv%dd: groups=%lld must divide in=%lld and out=%lld", nsp,
                            (long long)groups, (long long)in, (long long)out);
    rt_conv_module *c = (rt_conv_module *)rt_module_alloc(sizeof *c, nsp == 2 ? &rt_conv2d_class : &rt_conv3d_class);
    if (!c) return rt_error_last_status();
    int64_t shape[5] = {out, in / groups, k, k, k};
    rt_status st = rt_module_register(&c->base, ctx, "weight", RT_ENTRY_PARAM, 2 + nsp, shape, &c->weight);
    if (st == RT_OK && bias) st = rt_module_register(&c->base, ctx, "bias", RT_ENTRY_PARAM, 1, &out, &c->bias);
    if (st != RT_OK) {
        rt_module_destroy(&c->base);
        return st;
    }
    int64_t receptive = nsp == 2 ? k * k : k * k * k;
    if (init == RT_INIT_KAIMING_FAN_OUT) {
        rt_init_normal(ctx, c->weight, sqrtf(2.0f / (float)(out * receptive)));
    } else {
        float bound = 1.0f / sqrtf((float)(in / groups * receptive));
        rt_init_uniform(ctx, c->weight, bound);
        if (c->bias) rt_init_uniform(ctx, c->bias, bound);
    }
    for (int i = 0; i < nsp; i++) {
        c->opts.stride[i] = stride;
        c->opts.padding[i] = padding;
        c->opts.dilation[i] = 1;
    }
    c->opts.groups = groups;
    *m = &c->base;
    return RT_OK;
}

rt_status rt_conv_set_dilation(rt_module *m, int64_t dilation) {
    if (!rt_module_is(m, &rt_conv2d_class) && !rt_module_is(m, &rt_conv3d_class))
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_conv_set_dilation: the module is %s, not a Conv2d/Conv3d",
                            m ? m->cls->type : "NULL");
    if (dilation < 1)
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_conv_set_dilation: dilation must be >= 1, got %lld",
                            (long long)dilation);
    rt_conv_module *c = (rt_conv_module *)m;
    for (int i = 0; i < 3; i++) c->opts.dilation[i] = dilation;
    return RT_OK;
}

static bool rt_is_conv(const rt_module *m) { return rt_module_is(m, &rt_conv2d_class) || rt_module_is(m, &rt_conv3d_class); }

rt_status rt_conv_set_preferred_output(rt_module *m, bool on) {
    if (!rt_is_conv(m))
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_conv_set_preferred_output: the module is %s, not a Conv2d/Conv3d",
                            m ? m->cls->type : "NULL");
    rt_conv_module *c = (rt_conv_module *)m;
    c->preferred_output = c->opts.preferred_output = on;
    return RT_OK;
}

typedef struct rt_weight_layout_walk {
    rt_layout layout;
    int converted;
} rt_weight_layout_walk;

static rt_status rt_conv_weight_layout_visit(rt_module *m, const char *path, void *user) {
    (void)path;
    rt_weight_layout_walk *walk = user;
    if (!rt_is_conv(m)) return RT_OK;
    rt_conv_module *c = (rt_conv_module *)m;
    rt_tensor *w = c->weight;
    if (walk->layout == RT_LAYOUT_WEIGHT_BLOCKED &&
        (c->opts.groups != 1 || !rt_layout_weight_blockable(w->shape[0], w->shape[1])))
        return RT_OK; /* stays OIHW: oneDNN computes these in another order */
    if (w->layout == walk->layout) return RT_OK;
    RT_TRY(rt_weight_set_layout(w, walk->layout));
    walk->converted++;
    return RT_OK;
}

rt_status rt_module_set_weight_layout(rt_module *m, rt_layout layout, int *converted) {
    if (converted) *converted = 0;
    if (!m) return rt_error_set(RT_ERR_INVALID_ARG, "rt_module_set_weight_layout: the module is NULL");
    if (layout != RT_LAYOUT_PLAIN && layout != RT_LAYOUT_WEIGHT_BLOCKED)
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_module_set_weight_layout: layout %d is not RT_LAYOUT_PLAIN or "
                            "RT_LAYOUT_WEIGHT_BLOCKED", (int)layout);
    rt_weight_layout_walk walk = {layout, 0};
    rt_status st = rt_module_visit(m, rt_conv_weight_layout_visit, &walk);
    if (converted) *converted = walk.converted;
    return st;
}

void rt_conv_follow_blocked(rt_module *m, bool blocked) {
    if (!rt_is_conv(m)) return;
    rt_conv_module *c = (rt_conv_module *)m;
    c->opts.preferred_output = c->preferred_output && blocked;
}
