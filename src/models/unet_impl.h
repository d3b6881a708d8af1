/* Internal to models/unet*.c and models/prunet.c: the root module both
 * U-Nets share (padding, skips, cropping) and the builders' helpers. */
#ifndef RT_MODELS_UNET_IMPL_H
#define RT_MODELS_UNET_IMPL_H

#include "models/unet.h"

/* The root: children in the order of the state dict; the pointers below
 * are borrowed from them. */
typedef struct rt_unet {
    rt_module base;
    bool reversible;
    int levels;
    rt_module *first;                  /* reversible: first_conv (then to_blocked); standard: NULL */
    rt_module *to_blocked;             /* reversible: after first_conv */
    rt_module *enc[RT_UNET_MAX_LEVELS]; /* encoder level l (pooling included) */
    rt_module *up[RT_UNET_MAX_LEVELS];  /* standard: level l+1 → l upsampling */
    rt_module *dec[RT_UNET_MAX_LEVELS]; /* decoder level l (reversible: upsampling included) */
    rt_module *last;                   /* last_conv */
    /* The forward as a chain of stages (rt_module.stages, for
     * memory/checkpoint.h): built once the levels exist. Skips are handed
     * from stage to stage by two small modules outside the tree (no
     * tensors, so names and state dicts are unchanged): `store[l]` after
     * encoder level l keeps its output in skip[l], `merge[l]` before
     * decoder level l's convolutions concatenates (standard) or adds
     * (reversible) it. */
    rt_module **stage;
    int *reads;
    int n_stages;
    rt_module *store[RT_UNET_MAX_LEVELS], *merge[RT_UNET_MAX_LEVELS];
    rt_tensor *skip[RT_UNET_MAX_LEVELS]; /* the forward's skips, between store[l] and merge[l] */
    /* The first and last stages: padding to a multiple of 2^(levels−1)
     * and the crop back (with the conversion to PLAIN logits); the crop
     * the pad stage recorded for the last forward. */
    rt_module *pad, *crop_stage;
    int64_t crop[6];
    bool padded;
    /* Recovered skips (reversible net, through its own forward with grad
     * on; models/unet.c rt_unet_arm_recovery): encoder level l's sequence
     * saves no output; decoder level l's backward gives it back as its
     * rebuilt input less upsample(conv(up_in[l])), where up_in[l] is the
     * input of decoder level l+1's 1×1×1 conv (the same tensor decoder
     * level l+1's sequence saves), kept from forward until then. */
    rt_tensor *up_in[RT_UNET_MAX_LEVELS];
    struct rt_unet_recovery {
        struct rt_unet *u;
        int level;
        rt_module *up_conv; /* decoder level l+1's conv when this forward armed level l, else NULL */
    } recovery[RT_UNET_MAX_LEVELS];
} rt_unet;

/* Builds u's stage list (after the fill): the glue modules and the order. */
rt_status rt_unet_stages_build(rt_unet *u);

/* A new empty root of the given kind (NULL + message on failure). */
rt_unet *rt_unet_alloc(bool reversible);
/* The norm of cfg on c channels (BatchNorm3d, InstanceNorm3d(affine) or GroupNorm(cfg->groups)). */
rt_status rt_unet_norm_create(rt_init_ctx *ctx, const rt_unet_config *cfg, int64_t c, rt_module **m);
/* widths[l] of cfg, base_width doubling when widths[0] is 0. */
int64_t rt_unet_width(const rt_unet_config *cfg, int l);
/* Fills the reversible net's levels into u (models/prunet.c). */
rt_status rt_prunet_fill(rt_unet *u, const rt_unet_config *cfg, rt_init_ctx *ctx, int64_t in_channels,
                         int64_t num_classes);

#endif
