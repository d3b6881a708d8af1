/* The U-Nets' configurations, their checks, the shared root (padding,
 * skips, cropping) and the standard 3-D U-Net (models/unet.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/node.h"
#include "memory/checkpoint.h"
#include "memory/reversible.h"
#include "models/unet_impl.h"
#include "nn/modules3d.h"
#include "ops/ops3d.h"

rt_status rt_unet_config_get(const char *name, rt_unet_config *cfg) {
    if (!name || !cfg)
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_unet_config_get: %s is NULL", !name ? "the name" : "cfg");
    static const struct {
        const char *name;
        bool reversible;
        int levels;
        int64_t widths[5], groups;
    } table[] = {
        {"unet3d", false, 4, {16, 32, 64, 128}, 8},
        {"prunet3d", true, 4, {16, 32, 64, 128}, 8},
        {"unet3d_brats", false, 5, {60, 120, 240, 360, 480}, 30},
        {"prunet3d_brats", true, 5, {60, 120, 240, 360, 480}, 30},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        if (strcmp(table[i].name, name)) continue;
        *cfg = (rt_unet_config){.reversible = table[i].reversible, .levels = table[i].levels,
                                .norm = RT_UNET_NORM_GROUP, .groups = table[i].groups,
                                .upsample = table[i].reversible ? RT_UNET_UP_TRILINEAR : RT_UNET_UP_TRANSPOSED};
        for (int l = 0; l < table[i].levels; l++) {
            cfg->widths[l] = table[i].widths[l];
            cfg->enc_blocks[l] = cfg->dec_blocks[l] = 1;
        }
        return RT_OK;
    }
    return rt_error_set(RT_ERR_INVALID_ARG, "unknown U-Net '%s' (unet3d, prunet3d, unet3d_brats, prunet3d_brats)",
                        name);
}

int64_t rt_unet_size_multiple(const rt_unet_config *cfg) {
    if (!cfg || cfg->levels < 1 || cfg->levels > RT_UNET_MAX_LEVELS) return 0;
    return (int64_t)1 << (cfg->levels - 1);
}

int64_t rt_unet_width(const rt_unet_config *cfg, int l) {
    return cfg->widths[0] ? cfg->widths[l] : cfg->base_width << l;
}

/* Every configuration error, with the fix. */
static rt_status rt_unet_check(const rt_unet_config *cfg) {
    const char *kind = cfg->reversible ? "partially reversible U-Net" : "3-D U-Net";
    if (cfg->levels < 1 || cfg->levels > RT_UNET_MAX_LEVELS)
        return rt_error_set(RT_ERR_INVALID_ARG, "%s: levels = %d; use 1..%d", kind, cfg->levels, RT_UNET_MAX_LEVELS);
    if (cfg->norm != RT_UNET_NORM_BATCH && cfg->norm != RT_UNET_NORM_INSTANCE && cfg->norm != RT_UNET_NORM_GROUP)
        return rt_error_set(RT_ERR_INVALID_ARG, "%s: unknown norm kind %d (batch, instance or group)", kind,
                            (int)cfg->norm);
    if (cfg->upsample != RT_UNET_UP_TRANSPOSED && cfg->upsample != RT_UNET_UP_TRILINEAR)
        return rt_error_set(RT_ERR_INVALID_ARG, "%s: unknown upsampling kind %d (transposed or trilinear)", kind,
                            (int)cfg->upsample);
    if (!cfg->widths[0] && (cfg->base_width < 1 || cfg->base_width > ((int64_t)1 << 40)))
        return rt_error_set(RT_ERR_INVALID_ARG, "%s: widths[0] is 0, so base_width (%lld) sets the widths; give "
                            "base_width >= 1 or every width", kind, (long long)cfg->base_width);
    if (cfg->norm == RT_UNET_NORM_GROUP && cfg->groups < 1)
        return rt_error_set(RT_ERR_INVALID_ARG, "%s: GroupNorm needs groups >= 1, got %lld", kind,
                            (long long)cfg->groups);
    for (int l = 0; l < cfg->levels; l++) {
        int64_t w = rt_unet_width(cfg, l), normed = cfg->reversible ? w / 2 : w;
        if (w < 1)
            return rt_error_set(RT_ERR_INVALID_ARG, "%s: widths[%d] = %lld; every level needs >= 1 channel", kind, l,
                                (long long)w);
        if (cfg->reversible && w % 2)
            return rt_error_set(RT_ERR_INVALID_ARG, "%s: widths[%d] = %lld is odd; the additive couplings split the "
                                "channels into two equal halves, so every width must be even", kind, l, (long long)w);
        if (cfg->norm == RT_UNET_NORM_GROUP && normed % cfg->groups)
            return rt_error_set(RT_ERR_INVALID_ARG, "%s: GroupNorm(%lld) does not divide the %lld channels it "
                                "normalises at level %d (%s); choose groups dividing every %s", kind,
                                (long long)cfg->groups, (long long)normed, l,
                                cfg->reversible ? "half the width, F and G see one half" : "the level's width",
                                cfg->reversible ? "half width" : "width");
        if (cfg->reversible && (cfg->enc_blocks[l] < 0 || cfg->dec_blocks[l] < 0))
            return rt_error_set(RT_ERR_INVALID_ARG, "%s: level %d has %d encoder and %d decoder blocks; counts must "
                                "be >= 0", kind, l, cfg->enc_blocks[l], cfg->dec_blocks[l]);
    }
    return RT_OK;
}

rt_status rt_unet_norm_create(rt_init_ctx *ctx, const rt_unet_config *cfg, int64_t c, rt_module **m) {
    if (cfg->norm == RT_UNET_NORM_BATCH) return rt_batchnorm_create(ctx, 3, c, false, m);
    if (cfg->norm == RT_UNET_NORM_INSTANCE) return rt_instance_norm_create(ctx, 3, c, true, false, m);
    return rt_group_norm_create(ctx, cfg->groups, c, 1e-5f, true, m);
}

/* ------------------------------------------------------------ forward */

/* ------------------------------------------------------------ skips and stages */

/* The glue between levels: store[l] (identity; keeps its input as skip l)
 * and merge[l] (cat([skip, h], 1) for the standard net, h + skip for the
 * reversible one, then drops skip l). Outside the tree: no tensors. */
typedef enum { RT_GLUE_STORE, RT_GLUE_MERGE, RT_GLUE_PAD, RT_GLUE_CROP } rt_unet_glue_op;

typedef struct rt_unet_glue {
    rt_module base;
    rt_unet *u;
    int level;
    rt_unet_glue_op op;
    char name[24];
} rt_unet_glue;

/* The first stage: zero-pads each spatial axis at its end up to the next
 * multiple of 2^(levels−1) (F.pad pairs run from the last dim, W,
 * backwards) and records the crop for the last stage. */
static rt_status rt_unet_pad(rt_unet *u, rt_tensor *x, rt_tensor **y) {
    char a[64];
    if (x->ndim != 5)
        return rt_error_set(RT_ERR_SHAPE, "%s expects (N, C, D, H, W), got %s", u->base.cls->type,
                            rt_tensor_shape_str(x, a, sizeof a));
    int64_t mult = (int64_t)1 << (u->levels - 1), pad[6] = {0};
    u->padded = false;
    for (int d = 0; d < 3; d++) {
        int64_t size = x->shape[2 + d], extra = (mult - size % mult) % mult;
        pad[2 * (2 - d) + 1] = extra;
        u->crop[2 * (2 - d)] = 0;
        u->crop[2 * (2 - d) + 1] = -extra;
        u->padded = u->padded || extra;
    }
    if (!u->padded) {
        *y = rt_tensor_retain(x);
        return RT_OK;
    }
    return rt_pad_constant(x, 6, pad, 0.0f, y);
}

/* The last stage: the output's window over the input's voxels, PLAIN
 * logits as documented. */
static rt_status rt_unet_crop(rt_unet *u, rt_tensor *x, rt_tensor **y) {
    rt_tensor *o = NULL;
    if (u->padded) RT_TRY(rt_pad_constant(x, 6, u->crop, 0.0f, &o));
    else o = rt_tensor_retain(x);
    if (o->layout == RT_LAYOUT_PLAIN) {
        *y = o;
        return RT_OK;
    }
    rt_status st = rt_to_layout(o, RT_LAYOUT_PLAIN, y);
    rt_tensor_release(o);
    return st;
}

static rt_status rt_unet_glue_forward(rt_module *m, rt_tensor *x, rt_tensor **y) {
    rt_unet_glue *g = (rt_unet_glue *)m;
    rt_unet *u = g->u;
    int l = g->level;
    if (g->op == RT_GLUE_PAD) return rt_unet_pad(u, x, y);
    if (g->op == RT_GLUE_CROP) return rt_unet_crop(u, x, y);
    if (g->op == RT_GLUE_STORE) {
        bool stash = true;
        RT_TRY(rt_checkpoint_side_put(m, x, &stash)); /* a recompute holds it itself */
        if (stash) {
            rt_tensor_release(u->skip[l]);
            u->skip[l] = rt_tensor_retain(x);
        }
        *y = rt_tensor_retain(x);
        return RT_OK;
    }
    rt_tensor *s = NULL;
    rt_status st = rt_checkpoint_side_get(u->store[l], u->skip[l], &s);
    rt_tensor_release(u->skip[l]); /* the forward's last use of it */
    u->skip[l] = NULL;
    RT_TRY(st);
    if (u->reversible) {
        st = rt_add(x, s, y); /* skips added, not concatenated (the paper) */
    } else {
        rt_tensor *pair[2] = {s, x}; /* torch.cat([skip, up], 1) */
        st = rt_cat_channels(2, pair, y);
    }
    rt_tensor_release(s);
    return st;
}

static const rt_module_class rt_unet_store_class = {"UNetSkipStore", rt_unet_glue_forward, NULL, NULL};
static const rt_module_class rt_unet_cat_class = {"UNetSkipCat", rt_unet_glue_forward, NULL, NULL};
static const rt_module_class rt_unet_add_class = {"UNetSkipAdd", rt_unet_glue_forward, NULL, NULL};
static const rt_module_class rt_unet_pad_class = {"UNetPad", rt_unet_glue_forward, NULL, NULL};
static const rt_module_class rt_unet_crop_class = {"UNetCrop", rt_unet_glue_forward, NULL, NULL};

static rt_status rt_unet_glue_create(rt_unet *u, int level, rt_unet_glue_op op, rt_module **out) {
    const rt_module_class *cls = op == RT_GLUE_STORE ? &rt_unet_store_class
                                 : op == RT_GLUE_PAD ? &rt_unet_pad_class
                                 : op == RT_GLUE_CROP ? &rt_unet_crop_class
                                 : u->reversible ? &rt_unet_add_class : &rt_unet_cat_class;
    rt_unet_glue *g = (rt_unet_glue *)rt_module_alloc(sizeof *g, cls);
    if (!g) return rt_error_last_status();
    g->u = u;
    g->level = level;
    g->op = op;
    if (op == RT_GLUE_PAD || op == RT_GLUE_CROP) snprintf(g->name, sizeof g->name, "%s", op == RT_GLUE_PAD ? "pad" : "crop");
    else snprintf(g->name, sizeof g->name, "skip%d_%s", level, op == RT_GLUE_STORE ? "store" : "merge");
    g->base.parent = &u->base; /* for the memory trace's module paths; not a child */
    g->base.name = g->name;
    *out = &g->base;
    return RT_OK;
}

/* Appends stage m (reading stage `reads`, -1: none). */
static rt_status rt_unet_stage_add(rt_unet *u, rt_module *m, int reads, int *cap) {
    if (u->n_stages == *cap) {
        int c = *cap ? 2 * *cap : 32;
        rt_module **a = realloc(u->stage, (size_t)c * sizeof *a);
        if (a) u->stage = a;
        int *r = realloc(u->reads, (size_t)c * sizeof *r);
        if (r) u->reads = r;
        if (!a || !r) return rt_error_set(RT_ERR_OOM, "out of memory building a U-Net");
        *cap = c;
    }
    u->stage[u->n_stages] = m;
    u->reads[u->n_stages++] = reads;
    return RT_OK;
}

/* A reversible level's children are stages of their own, so that the
 * planner sees each ReversibleSequence (it may rebuild it). */
static rt_status rt_unet_stage_children(rt_unet *u, rt_module *level, int *cap) {
    for (int i = 0; i < level->n_children; i++) RT_TRY(rt_unet_stage_add(u, level->children[i].module, -1, cap));
    return RT_OK;
}

static int rt_unet_stages_list(rt_module *m, rt_module **stages, int *reads, int cap) {
    rt_unet *u = (rt_unet *)m;
    for (int i = 0; i < u->n_stages && i < cap; i++) {
        stages[i] = u->stage[i];
        reads[i] = u->reads[i];
    }
    return u->n_stages;
}

rt_status rt_unet_stages_build(rt_unet *u) {
    int cap = 0, stored[RT_UNET_MAX_LEVELS] = {0};
    for (int l = 0; l + 1 < u->levels; l++) {
        RT_TRY(rt_unet_glue_create(u, l, RT_GLUE_STORE, &u->store[l]));
        RT_TRY(rt_unet_glue_create(u, l, RT_GLUE_MERGE, &u->merge[l]));
    }
    RT_TRY(rt_unet_glue_create(u, 0, RT_GLUE_PAD, &u->pad));
    RT_TRY(rt_unet_glue_create(u, 0, RT_GLUE_CROP, &u->crop_stage));
    RT_TRY(rt_unet_stage_add(u, u->pad, -1, &cap));
    if (u->first) RT_TRY(rt_unet_stage_add(u, u->first, -1, &cap));
    if (u->to_blocked) RT_TRY(rt_unet_stage_add(u, u->to_blocked, -1, &cap));
    for (int l = 0; l < u->levels; l++) {
        if (u->reversible) RT_TRY(rt_unet_stage_children(u, u->enc[l], &cap));
        else RT_TRY(rt_unet_stage_add(u, u->enc[l], -1, &cap));
        if (l + 1 == u->levels) continue;
        stored[l] = u->n_stages;
        RT_TRY(rt_unet_stage_add(u, u->store[l], -1, &cap));
    }
    if (u->reversible) {
        for (int l = u->levels - 1; l >= 0; l--) {
            RT_TRY(rt_unet_stage_children(u, u->dec[l], &cap));
            if (l > 0) RT_TRY(rt_unet_stage_add(u, u->merge[l - 1], stored[l - 1], &cap));
        }
    } else {
        for (int l = u->levels - 2; l >= 0; l--) {
            RT_TRY(rt_unet_stage_add(u, u->up[l], -1, &cap));
            RT_TRY(rt_unet_stage_add(u, u->merge[l], stored[l], &cap));
            RT_TRY(rt_unet_stage_add(u, u->dec[l], -1, &cap));
        }
    }
    RT_TRY(rt_unet_stage_add(u, u->last, -1, &cap));
    RT_TRY(rt_unet_stage_add(u, u->crop_stage, -1, &cap));
    u->base.stages = rt_unet_stages_list;
    return RT_OK;
}

/* ------------------------------------------------------------ recovered skips */

/* Child `name` of a level (NULL when the level or the child is absent). */
static rt_module *rt_unet_part(rt_module *level, const char *name) {
    return level ? rt_module_find(level, name) : NULL;
}

/* Decoder level l's backward rebuilt its input x = upsample(conv(d)) + s,
 * where s is encoder level l's output (the skip, added: the paper) and d
 * the input of decoder level l+1's 1×1×1 conv, kept as up_in[l]. So s = x −
 * upsample(conv(d)), given to encoder level l's sequence, which saved no
 * output. The conv runs at the lower resolution; its output is split into
 * the halves x comes in and each is upsampled (per channel) and subtracted
 * over x's own half in turn, so no full-width tensor is added to the ones
 * the decoder's backward held. The recovered s differs from the forward's
 * by the rebuild's rounding (relative ~1e-6), which the encoder's rebuild
 * checks like its own drift. Only graphs of an armed forward call this
 * (a graph keeps the hook it was made with); without up_in[l] it only
 * frees x, and the encoder then refuses its backward with a message. */
static rt_status rt_unet_recover_skip(rt_module *seq, rt_tensor *x1, rt_tensor *x2, bool retain_graph, void *user) {
    (void)seq;
    struct rt_unet_recovery *r = user;
    rt_unet *u = r->u;
    int l = r->level;
    rt_tensor *d = u->up_in[l], *x[2] = {x1, x2}, *c = NULL, *cs[2] = {NULL, NULL}, *s[2] = {NULL, NULL};
    if (retain_graph) d = d ? rt_tensor_retain(d) : NULL; /* the next backward recovers again */
    else u->up_in[l] = NULL;
    rt_status st = RT_OK;
    if (d) {
        /* the ops, not the modules: a checkpoint region counts module runs
         * to match what its recompute saves, and this is no module run */
        rt_module *conv = rt_unet_part(u->dec[l + 1], "conv");
        const rt_conv_opts pointwise = {.stride = {1, 1, 1}, .dilation = {1, 1, 1}, .groups = 1};
        const int64_t sizes[2] = {x1->shape[1], x2->shape[1]};
        const double twice[3] = {2.0, 2.0, 2.0};
        st = rt_conv(d, rt_module_tensor(conv, "weight"), rt_module_tensor(conv, "bias"), &pointwise, &c);
        if (st == RT_OK) st = rt_split_channels(c, 2, sizes, cs);
        rt_tensor_release(c);
        for (int k = 0; k < 2 && st == RT_OK; k++) {
            rt_tensor *up = NULL;
            st = rt_upsample_linear(cs[k], NULL, twice, &up); /* the level's Upsample(scale_factor=2) */
            rt_tensor_release(cs[k]);
            cs[k] = NULL;
            if (st == RT_OK) st = rt_sub_inplace(x[k], up, &s[k]); /* over x's half */
            rt_tensor_release(up);
            rt_tensor_release(x[k]);
            x[k] = NULL;
        }
        if (st == RT_OK) st = rt_rev_sequence_give_output(rt_unet_part(u->enc[l], "blocks"), s[0], s[1]);
        if (st == RT_OK) s[0] = s[1] = NULL; /* given */
    }
    rt_tensor_release(d);
    for (int k = 0; k < 2; k++) {
        rt_tensor_release(x[k]);
        rt_tensor_release(cs[k]);
        rt_tensor_release(s[k]);
    }
    return st;
}

/* Whether a memory strategy intercepts module calls on this thread now
 * (a checkpointing plan's regions, nn/module.h). */
static bool rt_unet_intercepted(void) {
    rt_module_interceptor ic = rt_module_set_interceptor((rt_module_interceptor){0});
    rt_module_set_interceptor(ic);
    return ic.before || ic.after;
}

/* Before the U-Net's own forward: recover the skips (rt_unet_recover_skip)
 * at every level whose encoder and decoder sequences will run reversibly
 * in this forward (reversible net, grad mode on, both sequences
 * reversible, and level l+1's conv and upsampling to recompute the path),
 * and only for a forward that is the step's own: not a recompute, not
 * under saved-tensor hooks (reduced-precision storage) and not inside a
 * checkpointing plan's regions (an interceptor), whose replays match saved
 * tensors and module calls by order. A level armed now replaces the up_in
 * an earlier forward kept; the decoder sequences of a forward not armed
 * make graphs without the hook. One armed graph at a time: a second armed
 * forward before the first one's backward takes over the kept tensors, and
 * the first one's backward then fails its rebuild check. */
static void rt_unet_arm_recovery(rt_unet *u) {
    bool on = u->reversible && rt_grad_is_enabled() && !rt_recompute_is_active() &&
              rt_saved_tensors_hooks_depth() == 0 && !rt_unet_intercepted();
    for (int l = 0; l + 1 < u->levels; l++) {
        rt_module *enc = rt_unet_part(u->enc[l], "blocks"), *dec = rt_unet_part(u->dec[l], "blocks");
        rt_rev_sequence *es = rt_rev_sequence_of(enc), *ds = rt_rev_sequence_of(dec);
        rt_module *up_conv = rt_unet_part(u->dec[l + 1], "conv");
        bool armed = on && es && ds && es->reversible && ds->reversible && up_conv &&
                     rt_unet_part(u->dec[l + 1], "upsample");
        u->recovery[l] = (struct rt_unet_recovery){u, l, armed ? up_conv : NULL};
        if (armed) {
            rt_tensor_release(u->up_in[l]);
            u->up_in[l] = NULL;
            rt_rev_sequence_defer_output(enc, true);
        }
        if (ds) rt_rev_sequence_on_input_rebuilt(dec, armed ? rt_unet_recover_skip : NULL, &u->recovery[l]);
    }
}

/* After the forward: encoder sequences save their outputs again unless the
 * next forward is the U-Net's own (a checkpointing plan runs the stages
 * itself, with no up_in kept). */
static void rt_unet_disarm_outputs(rt_unet *u) {
    for (int l = 0; l + 1 < u->levels; l++)
        if (u->recovery[l].up_conv) rt_rev_sequence_defer_output(rt_unet_part(u->enc[l], "blocks"), false);
}

/* Stage i is decoder level l+1's 1×1×1 conv with level l's recovery armed:
 * the level whose up_in its input is, else -1. */
static int rt_unet_up_in_level(rt_unet *u, int i) {
    for (int l = 0; l + 1 < u->levels; l++)
        if (u->recovery[l].up_conv && u->stage[i] == u->recovery[l].up_conv) return l;
    return -1;
}

/* ------------------------------------------------------------ forward */

/* The network: the stages in order, each on the previous one's output
 * (the skips travel through skip[], from store[l] to merge[l]). */
static rt_status rt_unet_body(rt_unet *u, rt_tensor *x, rt_tensor **out) {
    rt_tensor *h = rt_tensor_retain(x);
    rt_status st = RT_OK;
    rt_unet_arm_recovery(u);
    for (int i = 0; i < u->n_stages && st == RT_OK; i++) {
        rt_tensor *y = NULL;
        int l = rt_unet_up_in_level(u, i);
        if (l >= 0) u->up_in[l] = rt_tensor_retain(h); /* the same tensor level l+1's sequence saves */
        st = rt_module_forward_consume(u->stage[i], h, &y); /* releases h: a stage may free it early */
        h = y;
    }
    rt_unet_disarm_outputs(u);
    for (int l = 0; l < RT_UNET_MAX_LEVELS; l++) { /* none left unless a stage failed */
        rt_tensor_release(u->skip[l]);
        u->skip[l] = NULL;
    }
    if (st != RT_OK) {
        rt_tensor_release(h);
        return st;
    }
    *out = h;
    return RT_OK;
}

/* The stages, padding first and cropping last (rt_unet_pad/crop): output
 * voxel i is input voxel i. */
static rt_status rt_unet_forward(rt_module *m, rt_tensor *x, rt_tensor **y) {
    *y = NULL;
    return rt_unet_body((rt_unet *)m, x, y);
}

static void rt_unet_destroy(rt_module *m) {
    rt_unet *u = (rt_unet *)m;
    for (int l = 0; l < RT_UNET_MAX_LEVELS; l++) {
        rt_module_destroy(u->store[l]);
        rt_module_destroy(u->merge[l]);
        rt_tensor_release(u->skip[l]);
        rt_tensor_release(u->up_in[l]);
    }
    rt_module_destroy(u->pad);
    rt_module_destroy(u->crop_stage);
    free(u->stage);
    free(u->reads);
}

static const rt_module_class rt_unet_class = {"UNet3d", rt_unet_forward, rt_unet_destroy, NULL};
static const rt_module_class rt_prunet_class = {"PartiallyReversibleUNet3d", rt_unet_forward, rt_unet_destroy, NULL};

rt_unet *rt_unet_alloc(bool reversible) {
    rt_unet *u = (rt_unet *)rt_module_alloc(sizeof *u, reversible ? &rt_prunet_class : &rt_unet_class);
    if (u) u->reversible = reversible;
    return u;
}

/* ------------------------------------------------------------ standard U-Net */

/* Two units Conv3d(3×3×3, no bias) → norm → LeakyReLU(0.01) into `level`,
 * in → w → w channels (after a MaxPool3d(2) "pool" when `pool`; the first
 * level turns the activations into the convolutions' blocked order after
 * its first conv). */
static rt_status rt_unet_level_fill(rt_module *level, rt_init_ctx *ctx, const rt_unet_config *cfg, int64_t in,
                                    int64_t w, bool pool, bool to_blocked) {
    if (pool) RT_ADD_CHILD(level, "pool", rt_max_pool_create(3, 2, 2, 0, &m));
    for (int i = 0; i < 2; i++) {
        char name[16];
        snprintf(name, sizeof name, "conv%d", i + 1);
        rt_module *conv;
        RT_TRY(rt_conv_create(ctx, 3, i ? w : in, w, 3, 1, 1, 1, false, RT_INIT_DEFAULT, &conv));
        RT_TRY(rt_module_add_child(level, name, conv));
        if (i == 0 && to_blocked) {
            RT_TRY(rt_conv_set_preferred_output(conv, true)); /* to_blocked then has nothing to convert */
            RT_ADD_CHILD(level, "to_blocked", rt_preferred_layout_create(&m));
        }
        snprintf(name, sizeof name, "norm%d", i + 1);
        RT_ADD_CHILD(level, name, rt_unet_norm_create(ctx, cfg, w, &m));
        snprintf(name, sizeof name, "act%d", i + 1);
        RT_ADD_CHILD(level, name, rt_leaky_relu_create(0.01f, &m));
    }
    return RT_OK;
}

/* A new Sequential holder child `name` of parent (torch's ModuleList). */
static rt_status rt_unet_holder(rt_module *parent, const char *name, rt_module **out) {
    RT_TRY(rt_sequential_create(out));
    return rt_module_add_child(parent, name, *out);
}

/* A new Sequential as child `name` of holder; *out borrowed. */
static rt_status rt_unet_child_seq(rt_module *holder, int index, rt_module **out) {
    char name[16];
    snprintf(name, sizeof name, "%d", index);
    RT_TRY(rt_sequential_create(out));
    return rt_module_add_child(holder, name, *out);
}

static rt_status rt_unet_fill(rt_unet *u, const rt_unet_config *cfg, rt_init_ctx *ctx, int64_t in_channels,
                              int64_t num_classes) {
    rt_module *encoders, *ups = NULL, *decoders = NULL;
    RT_TRY(rt_unet_holder(&u->base, "encoders", &encoders));
    for (int l = 0; l < cfg->levels; l++) {
        RT_TRY(rt_unet_child_seq(encoders, l, &u->enc[l]));
        RT_TRY(rt_unet_level_fill(u->enc[l], ctx, cfg, l ? rt_unet_width(cfg, l - 1) : in_channels,
                                  rt_unet_width(cfg, l), l > 0, l == 0));
    }
    if (cfg->levels > 1) {
        RT_TRY(rt_unet_holder(&u->base, "ups", &ups));
        RT_TRY(rt_unet_holder(&u->base, "decoders", &decoders));
    }
    for (int l = 0; l < cfg->levels - 1; l++) {
        int64_t w = rt_unet_width(cfg, l), below = rt_unet_width(cfg, l + 1);
        char name[16];
        snprintf(name, sizeof name, "%d", l);
        if (cfg->upsample == RT_UNET_UP_TRANSPOSED) {
            RT_TRY(rt_conv_transpose_create(ctx, 3, below, w, 2, 2, 0, 0, 1, true, &u->up[l]));
            RT_TRY(rt_module_add_child(ups, name, u->up[l]));
        } else {
            RT_TRY(rt_unet_child_seq(ups, l, &u->up[l]));
            RT_ADD_CHILD(u->up[l], "conv", rt_conv_create(ctx, 3, below, w, 1, 1, 0, 1, true, RT_INIT_DEFAULT, &m));
            RT_ADD_CHILD(u->up[l], "upsample", rt_upsample_create(3, 0, 2.0, &m));
        }
        RT_TRY(rt_unet_child_seq(decoders, l, &u->dec[l]));
        RT_TRY(rt_unet_level_fill(u->dec[l], ctx, cfg, 2 * w, w, false, false));
    }
    RT_TRY(rt_conv_create(ctx, 3, rt_unet_width(cfg, 0), num_classes, 1, 1, 0, 1, true, RT_INIT_DEFAULT, &u->last));
    return rt_module_add_child(&u->base, "last_conv", u->last);
}

rt_status rt_unet_build(const rt_unet_config *cfg, rt_init_ctx *ctx, int64_t in_channels, int64_t num_classes,
                        rt_module **out) {
    if (!out) return rt_error_set(RT_ERR_INVALID_ARG, "rt_unet_build: out is NULL");
    *out = NULL;
    if (!cfg || !ctx) return rt_error_set(RT_ERR_INVALID_ARG, "rt_unet_build: %s is NULL", !cfg ? "cfg" : "ctx");
    if (in_channels < 1 || num_classes < 1)
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_unet_build: need >= 1 input channel and >= 1 class, got "
                            "%lld and %lld", (long long)in_channels, (long long)num_classes);
    RT_TRY(rt_unet_check(cfg));
    rt_unet *u = rt_unet_alloc(cfg->reversible);
    if (!u) return rt_error_last_status();
    u->levels = cfg->levels;
    rt_status st = cfg->reversible ? rt_prunet_fill(u, cfg, ctx, in_channels, num_classes)
                                   : rt_unet_fill(u, cfg, ctx, in_channels, num_classes);
    if (st == RT_OK) st = rt_unet_stages_build(u);
    if (st != RT_OK) {
        rt_module_destroy(&u->base);
        return st;
    }
    *out = &u->base;
    return RT_OK;
}
