/* EDSR and the reversible EDSR; see edsr.h. */
#include "models/edsr.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "memory/reversible.h"
#include "nn/modules.h"
#include "nn/modules3d.h"

/* ------------------------------------------------------------ modules */

/* EDSR-PyTorch's common.ResBlock without batch norm: child "body" (a
 * Sequential conv, ReLU, conv); y = res_scale·body(x) + x. */
typedef struct rt_edsr_resblock {
    rt_module base;
    rt_module *body; /* borrowed child */
    float res_scale;
} rt_edsr_resblock;

static rt_status rt_edsr_resblock_forward(rt_module *m, rt_tensor *x, rt_tensor **y) {
    rt_edsr_resblock *b = (rt_edsr_resblock *)m;
    *y = NULL;
    rt_tensor *h = NULL;
    RT_TRY(rt_module_forward(b->body, x, &h));
    RT_SEQ(h, s, rt_mul_scalar_inplace(h, b->res_scale, &s)); /* EDSR-PyTorch's body(x).mul(res_scale), in place */
    rt_status st = rt_add_inplace(h, x, y); /* h is ours alone: the sum goes over it */
    rt_tensor_release(h);
    return st;
}

static const rt_module_class rt_edsr_resblock_class = {"ResBlock", rt_edsr_resblock_forward, NULL, NULL};

/* y = res_scale·x: the scaling at the end of a reversible block's Fb and Gb
 * (a parameter-free module, so it adds no state-dict entry). */
typedef struct rt_res_scale {
    rt_module base;
    float scale;
} rt_res_scale;

static rt_status rt_res_scale_forward(rt_module *m, rt_tensor *x, rt_tensor **y) {
    return rt_mul_scalar_inplace(x, ((rt_res_scale *)m)->scale, y); /* x is the conv's fresh output */
}

static const rt_module_class rt_res_scale_class = {"ResScale", rt_res_scale_forward, NULL, NULL};

/* y = cat(x, x, …, x) along channels, `copies` times: how a reversible
 * stream wider than the head starts (a parameter-free module; backward sums
 * the copies' gradients). */
typedef struct rt_repeat_channels {
    rt_module base;
    int copies;
} rt_repeat_channels;

static rt_status rt_repeat_channels_forward(rt_module *m, rt_tensor *x, rt_tensor **y) {
    rt_tensor *xs[RT_EDSR_MAX_WIDTH_FACTOR];
    const int k = ((rt_repeat_channels *)m)->copies;
    for (int i = 0; i < k; i++) xs[i] = x;
    return rt_cat_channels(k, xs, y);
}

static const rt_module_class rt_repeat_channels_class = {"RepeatChannels", rt_repeat_channels_forward, NULL, NULL};

/* The whole network: children head, body, tail; y = tail(body(h) + h),
 * h = head(x). */
typedef struct rt_edsr {
    rt_module base;
    rt_module *head, *body, *tail; /* borrowed children */
} rt_edsr;

static rt_status rt_edsr_forward(rt_module *m, rt_tensor *x, rt_tensor **y) {
    rt_edsr *e = (rt_edsr *)m;
    *y = NULL;
    rt_tensor *h = NULL, *r = NULL;
    RT_TRY(rt_module_forward(e->head, x, &h));
    /* the convolutions' preferred memory order from here on (PixelShuffle
     * keeps it: F fills whole blocks when it is a multiple of 16) */
    RT_SEQ(h, p, rt_to_preferred_layout(h, &p));
    rt_status st = rt_module_forward(e->body, h, &r);
    rt_tensor *s = NULL;
    if (st == RT_OK) st = rt_add_inplace(r, h, &s); /* the global skip, over the body's output */
    rt_tensor_release(r);
    rt_tensor_release(h);
    if (st != RT_OK) return st;
    st = rt_module_forward(e->tail, s, y);
    rt_tensor_release(s);
    return st;
}

static const rt_module_class rt_edsr_class = {"EDSR", rt_edsr_forward, NULL, NULL};

/* ------------------------------------------------------------ builders */

/* 3×3 conv a → b, padding 1, bias, PyTorch's default initialisation. */
static rt_status rt_edsr_conv(rt_init_ctx *ctx, int64_t a, int64_t b, rt_module **m) {
    return rt_conv_create(ctx, 2, a, b, 3, 1, 1, 1, true, RT_INIT_DEFAULT, m);
}

/* conv(a → hidden), ReLU, conv(hidden → b) appended to Sequential s, then
 * the scaling when scale is not NULL. */
static rt_status rt_edsr_branch_fill(rt_module *s, rt_init_ctx *ctx, int64_t a, int64_t hidden, int64_t b,
                                     const float *scale) {
    rt_module *m;
    RT_TRY(rt_edsr_conv(ctx, a, hidden, &m));
    RT_TRY(rt_module_append(s, m));
    RT_TRY(rt_relu_create(&m));
    RT_TRY(rt_module_append(s, m));
    RT_TRY(rt_edsr_conv(ctx, hidden, b, &m));
    RT_TRY(rt_module_append(s, m));
    if (!scale) return RT_OK;
    rt_res_scale *r = (rt_res_scale *)rt_module_alloc(sizeof *r, &rt_res_scale_class);
    if (!r) return rt_error_last_status();
    r->scale = *scale;
    return rt_module_append(s, &r->base);
}

static rt_status rt_edsr_branch(rt_init_ctx *ctx, int64_t a, int64_t hidden, int64_t b, const float *scale,
                                rt_module **out) {
    RT_TRY(rt_sequential_create(out));
    rt_status st = rt_edsr_branch_fill(*out, ctx, a, hidden, b, scale);
    if (st != RT_OK) {
        rt_module_destroy(*out);
        *out = NULL;
    }
    return st;
}

static rt_status rt_edsr_resblock_create(rt_init_ctx *ctx, int64_t f, float res_scale, rt_module **out) {
    rt_edsr_resblock *b = (rt_edsr_resblock *)rt_module_alloc(sizeof *b, &rt_edsr_resblock_class);
    if (!b) return rt_error_last_status();
    b->res_scale = res_scale;
    rt_status st = rt_edsr_branch(ctx, f, f, f, NULL, &b->body);
    if (st == RT_OK) st = rt_module_add_child(&b->base, "body", b->body);
    if (st != RT_OK) {
        rt_module_destroy(&b->base);
        return st;
    }
    *out = &b->base;
    return RT_OK;
}

/* body: B residual blocks "0".."B-1" (or, reversible, the stream's
 * widening when W > F and an inline ReversibleSequence of B blocks), then
 * conv "B" (W → F). */
static rt_status rt_edsr_body_fill(rt_module *body, const rt_edsr_config *cfg, rt_init_ctx *ctx) {
    const int64_t f = cfg->n_feats;
    char name[16];
    if (!cfg->reversible) {
        for (int i = 0; i < cfg->n_resblocks; i++) {
            snprintf(name, sizeof name, "%d", i);
            RT_ADD_CHILD(body, name, rt_edsr_resblock_create(ctx, f, cfg->res_scale, &m));
        }
    } else {
        const int64_t w = rt_edsr_rev_width(cfg), half = w / 2, hidden = cfg->rev_hidden > 0 ? cfg->rev_hidden : f;
        if (w > f) {
            rt_repeat_channels *r = (rt_repeat_channels *)rt_module_alloc(sizeof *r, &rt_repeat_channels_class);
            if (!r) return rt_error_last_status();
            r->copies = (int)(w / f);
            RT_TRY(rt_module_add_child(body, "", &r->base));
        }
        rt_module *seq;
        RT_TRY(rt_rev_sequence_create(&seq));
        RT_TRY(rt_module_add_child(body, "", seq));
        for (int i = 0; i < cfg->n_resblocks; i++) {
            rt_module *fb, *gb, *block;
            RT_TRY(rt_edsr_branch(ctx, half, hidden, half, &cfg->res_scale, &fb));
            rt_status st = rt_edsr_branch(ctx, half, hidden, half, &cfg->res_scale, &gb);
            if (st != RT_OK) rt_module_destroy(fb);
            RT_TRY(st);
            RT_TRY(rt_rev_block_create(fb, gb, RT_COUPLING_ADDITIVE, &block));
            snprintf(name, sizeof name, "%d", i);
            RT_TRY(rt_module_add_child(seq, name, block));
        }
    }
    snprintf(name, sizeof name, "%d", cfg->n_resblocks);
    RT_ADD_CHILD(body, name, rt_edsr_conv(ctx, cfg->reversible ? rt_edsr_rev_width(cfg) : f, f, &m));
    return RT_OK;
}

/* tail: "0" the upsampler (a Sequential of conv + PixelShuffle pairs), "1"
 * the last conv. */
static rt_status rt_edsr_tail_fill(rt_module *tail, const rt_edsr_config *cfg, rt_init_ctx *ctx) {
    const int64_t f = cfg->n_feats;
    rt_module *up;
    RT_TRY(rt_sequential_create(&up));
    RT_TRY(rt_module_add_child(tail, "0", up));
    const int r = cfg->scale == 3 ? 3 : 2, steps = cfg->scale == 4 ? 2 : 1;
    for (int s = 0; s < steps; s++) {
        rt_module *m;
        RT_TRY(rt_edsr_conv(ctx, f, (int64_t)r * r * f, &m));
        RT_TRY(rt_module_append(up, m));
        RT_TRY(rt_pixel_shuffle_inplace_create(r, &m)); /* the conv's output is dead after it */
        RT_TRY(rt_module_append(up, m));
    }
    RT_ADD_CHILD(tail, "1", rt_edsr_conv(ctx, f, cfg->out_channels, &m));
    return RT_OK;
}

static rt_status rt_edsr_fill(rt_edsr *e, const rt_edsr_config *cfg, rt_init_ctx *ctx) {
    RT_TRY(rt_sequential_create(&e->head));
    RT_TRY(rt_module_add_child(&e->base, "head", e->head));
    RT_ADD_CHILD(e->head, "0", rt_edsr_conv(ctx, cfg->in_channels, cfg->n_feats, &m));
    RT_TRY(rt_sequential_create(&e->body));
    RT_TRY(rt_module_add_child(&e->base, "body", e->body));
    RT_TRY(rt_edsr_body_fill(e->body, cfg, ctx));
    RT_TRY(rt_sequential_create(&e->tail));
    RT_TRY(rt_module_add_child(&e->base, "tail", e->tail));
    return rt_edsr_tail_fill(e->tail, cfg, ctx);
}

/* ------------------------------------------------------------ API */

static rt_status rt_edsr_check(const char *fn, const rt_edsr_config *cfg) {
    if (!cfg) return rt_error_set(RT_ERR_INVALID_ARG, "%s: cfg is NULL", fn);
    const char *bad = NULL;
    if (cfg->in_channels < 1) bad = "in_channels must be >= 1";
    else if (cfg->out_channels < 1) bad = "out_channels must be >= 1";
    else if (cfg->n_resblocks < 1) bad = "n_resblocks must be >= 1";
    else if (cfg->n_feats < 1) bad = "n_feats must be >= 1";
    else if (!isfinite(cfg->res_scale)) bad = "res_scale must be finite";
    else if (cfg->scale != 2 && cfg->scale != 3 && cfg->scale != 4) bad = "scale must be 2, 3 or 4";
    else if (cfg->reversible && cfg->n_feats % 2) bad = "n_feats must be even for the reversible body (halves)";
    else if (cfg->reversible && cfg->rev_hidden < 0) bad = "rev_hidden must be >= 0 (0: n_feats)";
    else if (cfg->reversible && (cfg->rev_width < 0 || cfg->rev_width % cfg->n_feats ||
                                 cfg->rev_width > RT_EDSR_MAX_WIDTH_FACTOR * cfg->n_feats))
        bad = "rev_width must be 0 (n_feats) or n_feats times 1.." RT_EDSR_MAX_WIDTH_FACTOR_STR;
    if (bad)
        return rt_error_set(RT_ERR_INVALID_ARG, "%s: %s (got in %lld, out %lld, B %d, F %lld, res_scale %g, scale "
                            "%d, rev_hidden %lld, rev_width %lld)", fn, bad, (long long)cfg->in_channels,
                            (long long)cfg->out_channels, cfg->n_resblocks, (long long)cfg->n_feats,
                            (double)cfg->res_scale, cfg->scale, (long long)cfg->rev_hidden,
                            (long long)cfg->rev_width);
    return RT_OK;
}

rt_status rt_edsr_config_get(const char *name, rt_edsr_config *cfg) {
    if (!name || !cfg)
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_edsr_config_get: %s is NULL", !name ? "the name" : "cfg");
    bool rev = !strcmp(name, "edsr_rev");
    if (!rev && strcmp(name, "edsr") != 0)
        return rt_error_set(RT_ERR_INVALID_ARG, "unknown EDSR configuration '%s' (edsr, edsr_rev)", name);
    *cfg = (rt_edsr_config){.in_channels = 1, .out_channels = 1, .n_resblocks = 16, .n_feats = 64,
                            .res_scale = 0.1f, .scale = 2, .reversible = rev, .rev_hidden = 0, .rev_width = 0};
    return RT_OK;
}

rt_status rt_edsr_build(const rt_edsr_config *cfg, rt_init_ctx *ctx, rt_module **out) {
    if (!out) return rt_error_set(RT_ERR_INVALID_ARG, "rt_edsr_build: out is NULL");
    *out = NULL;
    if (!ctx) return rt_error_set(RT_ERR_INVALID_ARG, "rt_edsr_build: the init context ctx is NULL");
    RT_TRY(rt_edsr_check("rt_edsr_build", cfg));
    rt_edsr *e = (rt_edsr *)rt_module_alloc(sizeof *e, &rt_edsr_class);
    if (!e) return rt_error_last_status();
    rt_status st = rt_edsr_fill(e, cfg, ctx);
    if (st != RT_OK) {
        rt_module_destroy(&e->base);
        return st;
    }
    *out = &e->base;
    return RT_OK;
}

static int64_t rt_conv3_params(int64_t a, int64_t b) { return 9 * a * b + b; }

int64_t rt_edsr_rev_width(const rt_edsr_config *cfg) {
    if (!cfg) {
        rt_error_set(RT_ERR_INVALID_ARG, "rt_edsr_rev_width: cfg is NULL");
        return -1;
    }
    return cfg->rev_width > 0 ? cfg->rev_width : cfg->n_feats;
}

int64_t rt_edsr_num_params(const rt_edsr_config *cfg) {
    if (rt_edsr_check("rt_edsr_num_params", cfg) != RT_OK) return -1;
    const int64_t f = cfg->n_feats, h = cfg->rev_hidden > 0 ? cfg->rev_hidden : f;
    const int64_t w = cfg->reversible ? rt_edsr_rev_width(cfg) : f;
    const int64_t block = cfg->reversible ? 2 * (rt_conv3_params(w / 2, h) + rt_conv3_params(h, w / 2))
                                          : 2 * rt_conv3_params(f, f);
    const int64_t up = cfg->scale == 3 ? rt_conv3_params(f, 9 * f)
                                       : (cfg->scale == 4 ? 2 : 1) * rt_conv3_params(f, 4 * f);
    return rt_conv3_params(cfg->in_channels, f) + cfg->n_resblocks * block + rt_conv3_params(w, f) + up +
           rt_conv3_params(f, cfg->out_channels);
}
