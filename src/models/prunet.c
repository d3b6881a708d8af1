/* The partially reversible U-Net's levels (models/unet.h; Brügger et al.,
 * MICCAI 2019, and their experiments/noNewReversible.py for the order of
 * the 1×1×1 convs and the bottom level). */
#include <stdio.h>

#include "memory/reversible.h"
#include "models/unet_impl.h"
#include "nn/modules3d.h"

/* F or G of a coupling on c channels: norm → LeakyReLU(0.01) → Conv3d(3×3×3,
 * no bias), the paper's ResidualInner. */
static rt_status rt_prunet_inner(rt_init_ctx *ctx, const rt_unet_config *cfg, int64_t c, rt_module **out) {
    RT_TRY(rt_sequential_create(out));
    rt_module *f = *out;
    rt_status st = RT_OK;
    do {
        rt_module *m = NULL;
        if ((st = rt_unet_norm_create(ctx, cfg, c, &m)) != RT_OK || (st = rt_module_add_child(f, "norm", m)) != RT_OK)
            break;
        if ((st = rt_leaky_relu_create(0.01f, &m)) != RT_OK || (st = rt_module_add_child(f, "act", m)) != RT_OK)
            break;
        if ((st = rt_conv_create(ctx, 3, c, c, 3, 1, 1, 1, false, RT_INIT_DEFAULT, &m)) != RT_OK)
            break;
        st = rt_module_add_child(f, "conv", m);
    } while (0);
    if (st != RT_OK) {
        rt_module_destroy(f);
        *out = NULL;
    }
    return st;
}

/* Child "blocks" of level: a ReversibleSequence of n additive couplings on
 * w channels (nothing when n is 0). */
static rt_status rt_prunet_blocks(rt_module *level, rt_init_ctx *ctx, const rt_unet_config *cfg, int64_t w, int n) {
    if (n == 0) return RT_OK;
    rt_module *seq;
    RT_TRY(rt_rev_sequence_create(&seq));
    RT_TRY(rt_module_add_child(level, "blocks", seq));
    for (int b = 0; b < n; b++) {
        rt_module *f, *g, *block;
        char name[16];
        RT_TRY(rt_prunet_inner(ctx, cfg, w / 2, &f));
        rt_status st = rt_prunet_inner(ctx, cfg, w / 2, &g);
        if (st != RT_OK) rt_module_destroy(f);
        RT_TRY(st);
        RT_TRY(rt_rev_block_create(f, g, RT_COUPLING_ADDITIVE, &block));
        /* F and G (group or instance norm, LeakyReLU, Conv3d) read
         * channels-last: halves the blocked order would pad stay in it from
         * split to join (batch norm's kernels read plain or blocked only) */
        rt_rev_block_set_channels_last(block, cfg->norm != RT_UNET_NORM_BATCH);
        snprintf(name, sizeof name, "%d", b);
        RT_TRY(rt_module_add_child(seq, name, block));
    }
    return RT_OK;
}

/* A new Sequential child `index` of holder; *out borrowed. */
static rt_status rt_prunet_level(rt_module *holder, int index, rt_module **out) {
    char name[16];
    snprintf(name, sizeof name, "%d", index);
    RT_TRY(rt_sequential_create(out));
    return rt_module_add_child(holder, name, *out);
}

rt_status rt_prunet_fill(rt_unet *u, const rt_unet_config *cfg, rt_init_ctx *ctx, int64_t in_channels,
                         int64_t num_classes) {
    int64_t w0 = rt_unet_width(cfg, 0);
    RT_TRY(rt_conv_create(ctx, 3, in_channels, w0, 3, 1, 1, 1, false, RT_INIT_DEFAULT, &u->first));
    RT_TRY(rt_module_add_child(&u->base, "first_conv", u->first));
    RT_TRY(rt_conv_set_preferred_output(u->first, true)); /* to_blocked then has nothing to convert */
    RT_TRY(rt_preferred_layout_create(&u->to_blocked));
    RT_TRY(rt_module_add_child(&u->base, "to_blocked", u->to_blocked));
    rt_module *encoders, *decoders;
    RT_TRY(rt_sequential_create(&encoders));
    RT_TRY(rt_module_add_child(&u->base, "encoders", encoders));
    for (int l = 0; l < cfg->levels; l++) {
        int64_t w = rt_unet_width(cfg, l);
        RT_TRY(rt_prunet_level(encoders, l, &u->enc[l]));
        if (l > 0) { /* max-pool, then the 1×1×1 conv to the level's width */
            RT_ADD_CHILD(u->enc[l], "pool", rt_max_pool_create(3, 2, 2, 0, &m));
            RT_ADD_CHILD(u->enc[l], "conv", rt_conv_create(ctx, 3, rt_unet_width(cfg, l - 1), w, 1, 1, 0, 1, true,
                                                           RT_INIT_DEFAULT, &m));
        }
        RT_TRY(rt_prunet_blocks(u->enc[l], ctx, cfg, w, cfg->enc_blocks[l]));
    }
    /* decoders numbered by level (the paper's code numbers them from the bottom) */
    RT_TRY(rt_sequential_create(&decoders));
    RT_TRY(rt_module_add_child(&u->base, "decoders", decoders));
    for (int l = 0; l < cfg->levels; l++) {
        int64_t w = rt_unet_width(cfg, l);
        RT_TRY(rt_prunet_level(decoders, l, &u->dec[l]));
        RT_TRY(rt_prunet_blocks(u->dec[l], ctx, cfg, w, cfg->dec_blocks[l]));
        if (l > 0) { /* the 1×1×1 conv to the next level's width, then trilinear ×2 */
            RT_ADD_CHILD(u->dec[l], "conv", rt_conv_create(ctx, 3, w, rt_unet_width(cfg, l - 1), 1, 1, 0, 1, true,
                                                           RT_INIT_DEFAULT, &m));
            RT_ADD_CHILD(u->dec[l], "upsample", rt_upsample_create(3, 0, 2.0, &m));
        }
    }
    RT_TRY(rt_conv_create(ctx, 3, w0, num_classes, 1, 1, 0, 1, true, RT_INIT_DEFAULT, &u->last));
    return rt_module_add_child(&u->base, "last_conv", u->last);
}
