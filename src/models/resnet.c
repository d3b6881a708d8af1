#include "models/resnet.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/resblock.h"
#include "nn/layers.h"

typedef struct rt_resnet {
    rt_resnet_config cfg;
    rt_conv_layer conv1;
    rt_batchnorm_layer bn1;
    int nblocks;
    rt_resblock *blocks;
    rt_linear_layer fc;
} rt_resnet;

rt_status rt_resnet_config_get(const char *name, rt_resnet_config *cfg) {
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

static rt_status rt_resnet_forward(rt_model *m, rt_tensor *x, rt_tensor **logits) {
    rt_resnet *r = m->impl;
    *logits = NULL;
    rt_tensor *h = rt_tensor_retain(x);
    RT_SEQ(h, c, rt_conv_layer_forward(&r->conv1, h, &c));
    if (m->blocked) RT_SEQ(h, b, rt_to_preferred_layout(h, &b));
    RT_SEQ(h, a, rt_batchnorm_relu_layer_forward(&r->bn1, h, m->training, &a));
    if (r->cfg.imagenet_stem) {
        rt_pool_opts p = {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}};
        RT_SEQ(h, pooled, rt_max_pool(h, &p, &pooled));
    }
    for (int i = 0; i < r->nblocks; i++) RT_SEQ(h, y, rt_resblock_forward(&r->blocks[i], h, m->training, &y));
    RT_SEQ(h, g, rt_adaptive_avg_pool_1(h, &g));
    RT_SEQ(h, f, rt_flatten(h, &f));
    RT_SEQ(h, z, rt_linear_layer_forward(&r->fc, h, &z));
    *logits = h;
    return RT_OK;
}

static void rt_resnet_destroy(void *impl) {
    rt_resnet *r = impl;
    if (r) free(r->blocks);
    free(r);
}

rt_status rt_resnet_create(const char *name, const rt_resnet_config *cfg, int64_t in_channels,
                           int64_t num_classes, rt_device device, uint64_t seed, rt_model **out) {
    *out = NULL;
    rt_model *m = calloc(1, sizeof *m);
    rt_resnet *r = calloc(1, sizeof *r);
    int nblocks = 0;
    for (int s = 0; s < cfg->stages; s++) nblocks += cfg->blocks[s];
    if (r) r->blocks = calloc((size_t)nblocks, sizeof *r->blocks);
    if (m) m->sd = rt_state_dict_create(device, seed);
    if (!m || !r || !r->blocks || !m->sd) {
        if (m) rt_state_dict_destroy(m->sd);
        free(m);
        rt_resnet_destroy(r);
        return rt_error_set(RT_ERR_OOM, "out of memory creating %s", name);
    }
    snprintf(m->name, sizeof m->name, "%s", name);
    m->impl = r;
    m->forward = rt_resnet_forward;
    m->destroy_impl = rt_resnet_destroy;
    m->training = true;
    m->blocked = true;
    r->cfg = *cfg;
    r->nblocks = nblocks;

    rt_state_dict *sd = m->sd;
    int64_t stem = cfg->widths[0];
    rt_status st = cfg->imagenet_stem
                       ? rt_conv_layer_init(&r->conv1, sd, "conv1", 2, in_channels, stem, 7, 2, 3, 1, false,
                                            RT_INIT_KAIMING_FAN_OUT)
                       : rt_conv_layer_init(&r->conv1, sd, "conv1", 2, in_channels, stem, 3, 1, 1, 1, false,
                                            RT_INIT_KAIMING_FAN_OUT);
    if (st == RT_OK) st = rt_batchnorm_layer_init(&r->bn1, sd, "bn1", stem);
    int64_t in = stem, expansion = cfg->block == RT_BLOCK_BOTTLENECK ? 4 : 1;
    int k = 0;
    for (int s = 0; s < cfg->stages && st == RT_OK; s++)
        for (int b = 0; b < cfg->blocks[s] && st == RT_OK; b++) {
            char prefix[64];
            snprintf(prefix, sizeof prefix, "layer%d.%d", s + 1, b);
            int64_t stride = (b == 0 && s > 0) ? 2 : 1;
            st = rt_resblock_init(&r->blocks[k++], sd, prefix, cfg->block, in, cfg->widths[s], stride);
            in = cfg->widths[s] * expansion;
        }
    if (st == RT_OK) st = rt_linear_layer_init(&r->fc, sd, "fc", in, num_classes, true);
    if (st != RT_OK) {
        rt_model_destroy(m);
        return st;
    }
    *out = m;
    return RT_OK;
}
