#include "models/revnet.h"

#include <stdio.h>
#include <string.h>

#include "memory/reversible.h"

rt_status rt_revnet_config_get(const char *name, rt_revnet_config *cfg) {
    if (!name || !cfg)
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_revnet_config_get: %s is NULL", !name ? "the name" : "cfg");
    static const struct {
        const char *name;
        rt_revnet_config cfg;
    } table[] = {
        {"revnet38", {RT_BLOCK_BASIC, {3, 3, 3}, 32, {32, 64, 112}}},
        {"revnet110", {RT_BLOCK_BASIC, {9, 9, 9}, 32, {32, 64, 128}}},
        {"revnet164", {RT_BLOCK_BOTTLENECK, {9, 9, 9}, 32, {32, 64, 128}}},
        {"revnet_small", {RT_BLOCK_BASIC, {3, 3, 3}, 16, {16, 32, 64}}},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (!strcmp(table[i].name, name)) {
            *cfg = table[i].cfg;
            return RT_OK;
        }
    return rt_error_set(RT_ERR_INVALID_ARG, "unknown RevNet '%s' (revnet38, revnet110, revnet164, revnet_small)", name);
}

/* F or G on `width` channels: (BN-ReLU-conv) × 2 (basic) or × 3 (bottleneck,
 * 1×1, 3×3, 1×1 with a quarter of the width inside), pre-activation. */
static rt_status rt_preact_fill(rt_module *p, rt_init_ctx *ctx, rt_block_kind kind, int64_t width) {
    int64_t inner = width / 4 > 0 ? width / 4 : 1;
    const int64_t basic[2][3] = {{width, width, 3}, {width, width, 3}}; /* in, out, kernel */
    const int64_t bottleneck[3][3] = {{width, inner, 1}, {inner, inner, 3}, {inner, width, 1}};
    int n = kind == RT_BLOCK_BOTTLENECK ? 3 : 2;
    for (int i = 0; i < n; i++) {
        const int64_t *spec = kind == RT_BLOCK_BOTTLENECK ? bottleneck[i] : basic[i];
        char name[16];
        snprintf(name, sizeof name, "bn%d", i + 1);
        RT_ADD_CHILD(p, name, rt_batchnorm_create(ctx, 2, spec[0], true, &m));
        snprintf(name, sizeof name, "conv%d", i + 1);
        RT_ADD_CHILD(p, name, rt_conv_create(ctx, 2, spec[0], spec[1], spec[2], 1, spec[2] / 2, 1, false,
                                             RT_INIT_KAIMING_FAN_OUT, &m));
    }
    return RT_OK;
}

static rt_status rt_preact_create(rt_init_ctx *ctx, rt_block_kind kind, int64_t width, rt_module **out) {
    RT_TRY(rt_sequential_create(out));
    rt_status st = rt_preact_fill(*out, ctx, kind, width);
    if (st != RT_OK) {
        rt_module_destroy(*out);
        *out = NULL;
    }
    return st;
}

/* layerS: PreferredLayout (back to the blocked order after a sequence whose
 * halves were not block-aligned), transition unit "0" when the stage changes
 * resolution or width, then the reversible units "u".. in an inline sequence. */
static rt_status rt_revnet_stage_fill(rt_module *layer, rt_init_ctx *ctx, const rt_revnet_config *cfg, int s,
                                      int64_t in, int64_t *out_channels) {
    int64_t out = cfg->widths[s] * (cfg->block == RT_BLOCK_BOTTLENECK ? 4 : 1), stride = s > 0 ? 2 : 1;
    int u = 0;
    RT_ADD_CHILD(layer, "to_blocked", rt_preferred_layout_create(&m));
    if (stride != 1 || in != out) {
        RT_ADD_CHILD(layer, "0", rt_resblock_create(ctx, cfg->block, in, cfg->widths[s], stride, &m));
        u = 1;
    }
    rt_module *seq;
    RT_TRY(rt_rev_sequence_create(&seq));
    RT_TRY(rt_module_add_child(layer, "", seq));
    for (; u < cfg->units[s]; u++) {
        int64_t half = out / 2;
        rt_module *f, *g, *block;
        char name[16];
        RT_TRY(rt_preact_create(ctx, cfg->block, out - half, &f));
        rt_status st = rt_preact_create(ctx, cfg->block, half, &g);
        if (st != RT_OK) rt_module_destroy(f);
        RT_TRY(st);
        RT_TRY(rt_rev_block_create(f, g, RT_COUPLING_ADDITIVE, &block));
        snprintf(name, sizeof name, "%d", u);
        RT_TRY(rt_module_add_child(seq, name, block));
    }
    *out_channels = out;
    return RT_OK;
}

static rt_status rt_revnet_fill(rt_module *net, const rt_revnet_config *cfg, rt_init_ctx *ctx, int64_t in_channels,
                                int64_t num_classes) {
    RT_ADD_CHILD(net, "conv1", rt_conv_create(ctx, 2, in_channels, cfg->stem, 3, 1, 1, 1, false,
                                              RT_INIT_KAIMING_FAN_OUT, &m));
    RT_ADD_CHILD(net, "bn1", rt_batchnorm_create(ctx, 2, cfg->stem, true, &m));
    int64_t ch = cfg->stem;
    for (int s = 0; s < 3; s++) {
        rt_module *layer;
        char name[16];
        snprintf(name, sizeof name, "layer%d", s + 1);
        RT_TRY(rt_sequential_create(&layer));
        RT_TRY(rt_module_add_child(net, name, layer));
        RT_TRY(rt_revnet_stage_fill(layer, ctx, cfg, s, ch, &ch));
    }
    RT_ADD_CHILD(net, "bn_out", rt_batchnorm_create(ctx, 2, ch, true, &m));
    RT_ADD_CHILD(net, "avgpool", rt_adaptive_avg_pool_create(2, 1, &m));
    RT_ADD_CHILD(net, "flatten", rt_flatten_create(&m));
    RT_ADD_CHILD(net, "fc", rt_linear_create(ctx, ch, num_classes, true, &m));
    return RT_OK;
}

rt_status rt_revnet_build(const rt_revnet_config *cfg, rt_init_ctx *ctx, int64_t in_channels, int64_t num_classes,
                          rt_module **out) {
    if (!out) return rt_error_set(RT_ERR_INVALID_ARG, "rt_revnet_build: out is NULL");
    *out = NULL;
    if (!cfg || !ctx) return rt_error_set(RT_ERR_INVALID_ARG, "rt_revnet_build: %s is NULL", !cfg ? "cfg" : "ctx");
    bool ok = (cfg->block == RT_BLOCK_BASIC || cfg->block == RT_BLOCK_BOTTLENECK) && cfg->stem >= 1;
    for (int s = 0; s < 3; s++) ok = ok && cfg->units[s] >= 0 && cfg->widths[s] >= 1;
    if (!ok)
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_revnet_build: invalid config (block kind %d, stem %lld; need a "
                            "known block kind, stem and widths >= 1, units >= 0)", (int)cfg->block,
                            (long long)cfg->stem);
    if (in_channels < 1 || num_classes < 1)
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_revnet_build: need >= 1 input channel and >= 1 class, got "
                            "%lld and %lld", (long long)in_channels, (long long)num_classes);
    rt_module *net;
    RT_TRY(rt_sequential_create(&net));
    rt_status st = rt_revnet_fill(net, cfg, ctx, in_channels, num_classes);
    if (st != RT_OK) {
        rt_module_destroy(net);
        return st;
    }
    *out = net;
    return RT_OK;
}
