/* ConvTranspose, Upsample, GroupNorm, InstanceNorm, Softmax, Sigmoid
 * modules (nn/modules3d.h). */
#include <math.h>

#include "nn/modules3d.h"

/* ------------------------------------------------------------ ConvTranspose */

typedef struct rt_convt_module {
    rt_module base;
    rt_tensor *weight, *bias;
    rt_conv_transpose_opts opts;
} rt_convt_module;

static rt_status rt_convt_forward(rt_module *m, rt_tensor *x, rt_tensor **y) {
    rt_convt_module *c = (rt_convt_module *)m;
    return rt_conv_transpose(x, c->weight, c->bias, &c->opts, y);
}

static const rt_module_class rt_convt2d_class = {"ConvTranspose2d", rt_convt_forward, NULL, NULL};
static const rt_module_class rt_convt3d_class = {"ConvTranspose3d", rt_convt_forward, NULL, NULL};

rt_status rt_conv_transpose_create(rt_init_ctx *ctx, int nsp, int64_t in, int64_t out, int64_t k, int64_t stride,
                                   int64_t padding, int64_t output_padding, int64_t groups, bool bias,
                                   rt_module **m) {
    if (!m) return rt_error_set(RT_ERR_INVALID_ARG, "rt_conv_transpose_create: the output pointer m is NULL");
    *m = NULL;
    if (!ctx) return rt_error_set(RT_ERR_INVALID_ARG, "rt_conv_transpose_create: the init context ctx is NULL");
    if (nsp != 2 && nsp != 3)
        return rt_error_set(RT_ERR_INVALID_ARG, "transposed convolutions are 2-D or 3-D, got %d spatial dims", nsp);
    if (in < 1 || out < 1 || k < 1 || stride < 1 || padding < 0 || output_padding < 0 || output_padding >= stride ||
        groups < 1 || in % groups || out % groups)
        return rt_error_set(RT_ERR_INVALID_ARG,
                            "ConvTranspose%dd(%lld, %lld, kernel_size=%lld, stride=%lld, padding=%lld, "
                            "output_padding=%lld, groups=%lld): channels, kernel, stride >= 1, padding >= 0, "
                            "0 <= output_padding < stride, groups dividing both channel counts",
                            nsp, (long long)in, (long long)out, (long long)k, (long long)stride, (long long)padding,
                            (long long)output_padding, (long long)groups);
    rt_convt_module *c =
        (rt_convt_module *)rt_module_alloc(sizeof *c, nsp == 2 ? &rt_convt2d_class : &rt_convt3d_class);
    if (!c) return rt_error_last_status();
    int64_t shape[5] = {in, out / groups, k, k, k};
    rt_status st = rt_module_register(&c->base, ctx, "weight", RT_ENTRY_PARAM, 2 + nsp, shape, &c->weight);
    if (st == RT_OK && bias) st = rt_module_register(&c->base, ctx, "bias", RT_ENTRY_PARAM, 1, &out, &c->bias);
    if (st != RT_OK) {
        rt_module_destroy(&c->base);
        return st;
    }
    /* PyTorch's _ConvNd.reset_parameters: fan_in from weight.size(1) = out/groups */
    float bound = 1.0f / sqrtf((float)(out / groups * (nsp == 2 ? k * k : k * k * k)));
    rt_init_uniform(ctx, c->weight, bound);
    if (c->bias) rt_init_uniform(ctx, c->bias, bound);
    for (int i = 0; i < nsp; i++) {
        c->opts.stride[i] = stride;
        c->opts.padding[i] = padding;
        c->opts.output_padding[i] = output_padding;
        c->opts.dilation[i] = 1;
    }
    c->opts.groups = groups;
    *m = &c->base;
    return RT_OK;
}

/* ------------------------------------------------------------ Upsample */

typedef struct rt_upsample_module {
    rt_module base;
    int nsp;
    int64_t size[3];
    double scale[3];
} rt_upsample_module;

static rt_status rt_upsample_forward(rt_module *m, rt_tensor *x, rt_tensor **y) {
    rt_upsample_module *u = (rt_upsample_module *)m;
    if (x && x->ndim != 2 + u->nsp)
        return rt_error_set(RT_ERR_SHAPE, "Upsample(mode=%s) expects a %d-D input, got %d-D",
                            u->nsp == 3 ? "trilinear" : "bilinear", 2 + u->nsp, x->ndim);
    return rt_upsample_linear(x, u->size[0] ? u->size : NULL, u->size[0] ? NULL : u->scale, y);
}

static const rt_module_class rt_upsample_class = {"Upsample", rt_upsample_forward, NULL, NULL};

rt_status rt_upsample_create(int nsp, int64_t size, double scale_factor, rt_module **m) {
    if (!m) return rt_error_set(RT_ERR_INVALID_ARG, "rt_upsample_create: the output pointer m is NULL");
    *m = NULL;
    if ((nsp != 2 && nsp != 3) || (size > 0) == (scale_factor > 0.0) || size < 0 || scale_factor < 0.0 ||
        !isfinite(scale_factor))
        return rt_error_set(RT_ERR_INVALID_ARG,
                            "Upsample: nsp must be 2 or 3 and exactly one of size (%lld) and scale_factor (%g) "
                            "positive", (long long)size, scale_factor);
    rt_upsample_module *u = (rt_upsample_module *)rt_module_alloc(sizeof *u, &rt_upsample_class);
    if (!u) return rt_error_last_status();
    u->nsp = nsp;
    for (int i = 0; i < 3; i++) {
        u->size[i] = size;
        u->scale[i] = scale_factor;
    }
    *m = &u->base;
    return RT_OK;
}

/* ------------------------------------------------------------ PixelShuffle */

typedef struct rt_pixel_shuffle_module {
    rt_module base;
    int64_t r;
    bool inplace; /* rt_pixel_shuffle_inplace_create */
} rt_pixel_shuffle_module;

static rt_status rt_pixel_shuffle_forward(rt_module *m, rt_tensor *x, rt_tensor **y) {
    const rt_pixel_shuffle_module *p = (const rt_pixel_shuffle_module *)m;
    return p->inplace ? rt_pixel_shuffle_inplace(x, p->r, y) : rt_pixel_shuffle(x, p->r, y);
}

static const rt_module_class rt_pixel_shuffle_class = {"PixelShuffle", rt_pixel_shuffle_forward, NULL, NULL};

static rt_status rt_pixel_shuffle_make(const char *fn, int64_t upscale_factor, bool inplace, rt_module **m) {
    if (!m) return rt_error_set(RT_ERR_INVALID_ARG, "%s: the output pointer m is NULL", fn);
    *m = NULL;
    if (upscale_factor < 1)
        return rt_error_set(RT_ERR_INVALID_ARG, "PixelShuffle: upscale_factor = %lld must be >= 1",
                            (long long)upscale_factor);
    rt_pixel_shuffle_module *p = (rt_pixel_shuffle_module *)rt_module_alloc(sizeof *p, &rt_pixel_shuffle_class);
    if (!p) return rt_error_last_status();
    p->r = upscale_factor;
    p->inplace = inplace;
    *m = &p->base;
    return RT_OK;
}

rt_status rt_pixel_shuffle_create(int64_t upscale_factor, rt_module **m) {
    return rt_pixel_shuffle_make("rt_pixel_shuffle_create", upscale_factor, false, m);
}

rt_status rt_pixel_shuffle_inplace_create(int64_t upscale_factor, rt_module **m) {
    return rt_pixel_shuffle_make("rt_pixel_shuffle_inplace_create", upscale_factor, true, m);
}

/* ------------------------------------------------------------ GroupNorm / InstanceNorm */

typedef struct rt_gnorm_module {
    rt_module base;
    rt_tensor *weight, *bias, *running_mean, *running_var; /* NULL when absent */
    int64_t num_batches_tracked, groups;
    float eps, momentum;
    bool instance;
} rt_gnorm_module;

static rt_status rt_gnorm_forward(rt_module *m, rt_tensor *x, rt_tensor **y) {
    rt_gnorm_module *g = (rt_gnorm_module *)m;
    if (!g->instance) return rt_group_norm(x, g->groups, g->weight, g->bias, g->eps, y);
    bool input_stats = m->training || !g->running_mean;
    /* num_batches_tracked stays 0, as PyTorch's _InstanceNorm never counts */
    return rt_instance_norm(x, g->running_mean, g->running_var, g->weight, g->bias, input_stats, g->momentum, g->eps,
                            y);
}

static const rt_module_class rt_group_norm_class = {"GroupNorm", rt_gnorm_forward, NULL, NULL};
static const rt_module_class rt_instance_norm2d_class = {"InstanceNorm2d", rt_gnorm_forward, NULL, NULL};
static const rt_module_class rt_instance_norm3d_class = {"InstanceNorm3d", rt_gnorm_forward, NULL, NULL};

/* Registers weight = 1, bias = 0 (C) on g. */
static rt_status rt_gnorm_affine(rt_gnorm_module *g, rt_init_ctx *ctx, int64_t c) {
    RT_TRY(rt_module_register(&g->base, ctx, "weight", RT_ENTRY_PARAM, 1, &c, &g->weight));
    RT_TRY(rt_module_register(&g->base, ctx, "bias", RT_ENTRY_PARAM, 1, &c, &g->bias));
    rt_tensor_fill(g->weight, 1.0f);
    return RT_OK;
}

rt_status rt_group_norm_create(rt_init_ctx *ctx, int64_t num_groups, int64_t num_channels, float eps, bool affine,
                               rt_module **m) {
    if (!m) return rt_error_set(RT_ERR_INVALID_ARG, "rt_group_norm_create: the output pointer m is NULL");
    *m = NULL;
    if (!ctx) return rt_error_set(RT_ERR_INVALID_ARG, "rt_group_norm_create: the init context ctx is NULL");
    if (num_groups < 1 || num_channels < 1 || num_channels % num_groups || !(eps > 0.0f) || !isfinite(eps))
        return rt_error_set(RT_ERR_INVALID_ARG,
                            "GroupNorm(%lld, %lld, eps=%g): num_groups must divide num_channels (both >= 1) "
                            "and eps be > 0",
                            (long long)num_groups, (long long)num_channels, (double)eps);
    rt_gnorm_module *g = (rt_gnorm_module *)rt_module_alloc(sizeof *g, &rt_group_norm_class);
    if (!g) return rt_error_last_status();
    g->groups = num_groups;
    g->eps = eps;
    rt_status st = affine ? rt_gnorm_affine(g, ctx, num_channels) : RT_OK;
    if (st != RT_OK) {
        rt_module_destroy(&g->base);
        return st;
    }
    *m = &g->base;
    return RT_OK;
}

rt_status rt_instance_norm_create(rt_init_ctx *ctx, int nsp, int64_t num_features, bool affine,
                                  bool track_running_stats, rt_module **m) {
    if (!m) return rt_error_set(RT_ERR_INVALID_ARG, "rt_instance_norm_create: the output pointer m is NULL");
    *m = NULL;
    if (!ctx) return rt_error_set(RT_ERR_INVALID_ARG, "rt_instance_norm_create: the init context ctx is NULL");
    if ((nsp != 2 && nsp != 3) || num_features < 1)
        return rt_error_set(RT_ERR_INVALID_ARG, "InstanceNorm needs 2 or 3 spatial dims and >= 1 feature, got %d and %lld",
                            nsp, (long long)num_features);
    rt_gnorm_module *g = (rt_gnorm_module *)rt_module_alloc(
        sizeof *g, nsp == 2 ? &rt_instance_norm2d_class : &rt_instance_norm3d_class);
    if (!g) return rt_error_last_status();
    g->instance = true;
    g->groups = num_features;
    g->eps = 1e-5f;
    g->momentum = 0.1f;
    rt_module *base = &g->base;
    rt_status st = affine ? rt_gnorm_affine(g, ctx, num_features) : RT_OK;
    if (st == RT_OK && track_running_stats) {
        st = rt_module_register(base, ctx, "running_mean", RT_ENTRY_BUFFER, 1, &num_features, &g->running_mean);
        if (st == RT_OK)
            st = rt_module_register(base, ctx, "running_var", RT_ENTRY_BUFFER, 1, &num_features, &g->running_var);
        if (st == RT_OK) st = rt_module_register_counter(base, "num_batches_tracked", &g->num_batches_tracked);
        if (st == RT_OK) st = rt_tensor_fill(g->running_var, 1.0f);
    }
    if (st != RT_OK) {
        rt_module_destroy(base);
        return st;
    }
    *m = base;
    return RT_OK;
}

/* ------------------------------------------------------------ Softmax / Sigmoid */

static rt_status rt_softmax_forward(rt_module *m, rt_tensor *x, rt_tensor **y) {
    (void)m;
    return rt_softmax_channels(x, y);
}
static rt_status rt_sigmoid_forward(rt_module *m, rt_tensor *x, rt_tensor **y) {
    (void)m;
    return rt_sigmoid(x, y);
}

static const rt_module_class rt_softmax_class = {"Softmax", rt_softmax_forward, NULL, NULL};
static const rt_module_class rt_sigmoid_class = {"Sigmoid", rt_sigmoid_forward, NULL, NULL};

rt_status rt_softmax_create(rt_module **m) {
    if (!m) return rt_error_set(RT_ERR_INVALID_ARG, "rt_softmax_create: the output pointer m is NULL");
    *m = rt_module_alloc(sizeof(rt_module), &rt_softmax_class);
    return *m ? RT_OK : rt_error_last_status();
}

rt_status rt_sigmoid_create(rt_module **m) {
    if (!m) return rt_error_set(RT_ERR_INVALID_ARG, "rt_sigmoid_create: the output pointer m is NULL");
    *m = rt_module_alloc(sizeof(rt_module), &rt_sigmoid_class);
    return *m ? RT_OK : rt_error_last_status();
}
