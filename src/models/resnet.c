#include "models/resnet.h"

#include <stdio.h>
#include <string.h>

rt_status rt_resnet_config_get(const char *name, rt_resnet_config *cfg) {
    if (!name || !cfg)
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_resnet_config_get: %s is NULL", !name ? "the name" : "cfg");
    static const struct {
        const char *name;
        rt_resnet_config cfg;
    } table[] = {
        {"resnet18", {RT_BLOCK_BASIC, 4, {2, 2, 2, 2}, {64, 128, 256, 512}, true}},
        {"resnet34", {RT_BLOCK_BASIC, 4, {3, 4, 6, 3}, {64, 128, 256, 512}, true}},
        {"resnet50", {RT_BLOCK_BOTTLENECK, 4, {3, 4, 6, 3}, {64, 128, 256, 512}, true}},
        {"resnet20", {RT_BLOCK_BASIC, 3, {3, 3, 3}, {16, 32, 64}, false}},
        {"resnet32", {RT_BLOCK_BASIC, 3, {5, 5, 5}, {16, 32, 64}, false}},
        {"resnet44", {RT_BLOCK_BASIC, 3, {7, 7, 7}, {16, 32, 64}, false}},
        {"resnet56", {RT_BLOCK_BASIC, 3, {9, 9, 9}, {16, 32, 64}, false}},
        {"resnet110", {RT_BLOCK_BASIC, 3, {18, 18, 18}, {16, 32, 64}, false}},
        {"resnet164", {RT_BLOCK_BOTTLENECK, 3, {18, 18, 18}, {16, 32, 64}, false}},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (strcmp(table[i].name, name) == 0) {
            *cfg = table[i].cfg;
            return RT_OK;
        }
    return rt_error_set(RT_ERR_INVALID_ARG, "unknown ResNet '%s' (resnet18/34/50, resnet20/32/44/56/110/164)", name);
}

static rt_status rt_resnet_fill(rt_module *net, const rt_resnet_config *cfg, rt_init_ctx *ctx, int64_t in_channels,
                                int64_t num_classes) {
    int64_t stem = cfg->widths[0];
    bool big = cfg->imagenet_stem; /* 7×7/2 conv + 3×3/2 max pool instead of 3×3/1 conv */
    rt_module *conv1;
    RT_TRY(rt_conv_create(ctx, 2, in_channels, stem, big ? 7 : 3, big ? 2 : 1, big ? 3 : 1, 1, false,
                          RT_INIT_KAIMING_FAN_OUT, &conv1));
    RT_TRY(rt_module_add_child(net, "conv1", conv1));
    RT_TRY(rt_conv_set_preferred_output(conv1, true)); /* to_blocked then has nothing to convert */
    RT_ADD_CHILD(net, "to_blocked", rt_preferred_layout_create(&m));
    RT_ADD_CHILD(net, "bn1", rt_batchnorm_create(ctx, 2, stem, true, &m));
    if (big) RT_ADD_CHILD(net, "maxpool", rt_max_pool_create(2, 3, 2, 1, &m));
    int64_t in = stem, expansion = cfg->block == RT_BLOCK_BOTTLENECK ? 4 : 1;
    for (int s = 0; s < cfg->stages; s++) {
        rt_module *layer;
        char name[16];
        snprintf(name, sizeof name, "layer%d", s + 1);
        RT_TRY(rt_sequential_create(&layer));
        RT_TRY(rt_module_add_child(net, name, layer));
        for (int b = 0; b < cfg->blocks[s]; b++) {
            rt_module *block;
            RT_TRY(rt_resblock_create(ctx, cfg->block, in, cfg->widths[s], (b == 0 && s > 0) ? 2 : 1, &block));
            RT_TRY(rt_module_append(layer, block));
            in = cfg->widths[s] * expansion;
        }
    }
    RT_ADD_CHILD(net, "avgpool", rt_adaptive_avg_pool_create(2, 1, &m));
    RT_ADD_CHILD(net, "flatten", rt_flatten_create(&m));
    RT_ADD_CHILD(net, "fc", rt_linear_create(ctx, in, num_classes, true, &m));
    return RT_OK;
}

rt_status rt_resnet_build(const rt_resnet_config *cfg, rt_init_ctx *ctx, int64_t in_channels, int64_t num_classes,
                          rt_module **out) {
    if (!out) return rt_error_set(RT_ERR_INVALID_ARG, "rt_resnet_build: out is NULL");
    *out = NULL;
    if (!cfg || !ctx) return rt_error_set(RT_ERR_INVALID_ARG, "rt_resnet_build: %s is NULL", !cfg ? "cfg" : "ctx");
    bool ok = (cfg->block == RT_BLOCK_BASIC || cfg->block == RT_BLOCK_BOTTLENECK) && cfg->stages >= 1 &&
              cfg->stages <= 4;
    for (int s = 0; ok && s < cfg->stages; s++) ok = cfg->blocks[s] >= 0 && cfg->widths[s] >= 1;
    if (!ok)
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_resnet_build: invalid config (block kind %d, %d stages; need a "
                            "known block kind, 1..4 stages, blocks >= 0 and widths >= 1)", (int)cfg->block,
                            cfg->stages);
    if (in_channels < 1 || num_classes < 1)
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_resnet_build: need >= 1 input channel and >= 1 class, got "
                            "%lld and %lld", (long long)in_channels, (long long)num_classes);
    rt_module *net;
    RT_TRY(rt_sequential_create(&net));
    rt_status st = rt_resnet_fill(net, cfg, ctx, in_channels, num_classes);
    if (st != RT_OK) {
        rt_module_destroy(net);
        return st;
    }
    *out = net;
    return RT_OK;
}
