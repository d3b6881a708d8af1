/* The model zoo: one table of names used by the CLI, tests and help text. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/model.h"
#include "models/resnet.h"
#include "models/revnet.h"
#include "models/unet.h"

static const rt_zoo_entry rt_zoo[] = {
    {"revnet38", "RevNet-38 (Gomez et al. 2017), reversible, 32/32-64-112 filters", true, false},
    {"revnet110", "RevNet-110, reversible, 32/32-64-128 filters", true, false},
    {"revnet164", "RevNet-164, reversible bottleneck units", true, false},
    {"revnet_small", "RevNet-38's units at ResNet-20's widths (revtorch's quick default)", true, false},
    {"resnet20", "CIFAR ResNet-20 (He et al. 2016, section 4.2)", false, false},
    {"resnet32", "CIFAR ResNet-32", false, false},
    {"resnet44", "CIFAR ResNet-44", false, false},
    {"resnet56", "CIFAR ResNet-56", false, false},
    {"resnet110", "CIFAR ResNet-110", false, false},
    {"resnet164", "CIFAR ResNet-164 (bottleneck)", false, false},
    {"resnet18", "torchvision resnet18", false, false},
    {"resnet34", "torchvision resnet34", false, false},
    {"resnet50", "torchvision resnet50 (v1.5)", false, false},
    {"unet3d", "3-D U-Net, 4 levels 16/32/64/128, GroupNorm, concatenated skips (segmentation)", false, true},
    {"prunet3d", "partially reversible U-Net (Bruegger et al. 2019) at unet3d's depth and widths", true, true},
    {"unet3d_brats", "3-D U-Net at the paper's 5 levels 60/120/240/360/480", false, true},
    {"prunet3d_brats", "partially reversible U-Net, the paper's 5 levels 60/120/240/360/480", true, true},
};
enum { RT_ZOO_N = sizeof rt_zoo / sizeof rt_zoo[0] };

const rt_zoo_entry *rt_zoo_entries(int *n) {
    if (!n) {
        rt_error_set(RT_ERR_INVALID_ARG, "rt_zoo_entries: n is NULL (it receives the number of entries)");
        return NULL;
    }
    *n = RT_ZOO_N;
    return rt_zoo;
}

const rt_zoo_entry *rt_zoo_find(const char *name) {
    if (!name) {
        rt_error_set(RT_ERR_INVALID_ARG, "rt_zoo_find: the name is NULL");
        return NULL;
    }
    for (int i = 0; i < RT_ZOO_N; i++)
        if (!strcmp(rt_zoo[i].name, name)) return &rt_zoo[i];
    return NULL;
}

const char *rt_model_names(void) {
    /* built from the table, so help text and the table cannot disagree */
    static _Thread_local char names[512];
    if (!names[0]) {
        size_t len = 0;
        for (int i = 0; i < RT_ZOO_N && len < sizeof names; i++)
            len += (size_t)snprintf(names + len, sizeof names - len, "%s%s", i ? ", " : "", rt_zoo[i].name);
    }
    return names;
}

bool rt_model_name_has_reversible(const char *name) {
    const rt_zoo_entry *e = name ? rt_zoo_find(name) : NULL;
    return e && e->has_reversible;
}

bool rt_model_name_is_segmentation(const char *name) {
    const rt_zoo_entry *e = name ? rt_zoo_find(name) : NULL;
    return e && e->segmentation;
}

static _Thread_local bool rt_tls_plain_weights; /* zero: blocked weights, the default */

bool rt_model_blocked_weights_set(bool on) {
    bool prev = !rt_tls_plain_weights;
    rt_tls_plain_weights = !on;
    return prev;
}

static rt_status rt_zoo_build(const char *name, rt_init_ctx *ctx, int64_t in_channels, int64_t num_classes,
                              rt_module **net) {
    rt_resnet_config cfg;
    rt_revnet_config rcfg;
    rt_unet_config ucfg;
    if (rt_resnet_config_get(name, &cfg) == RT_OK) return rt_resnet_build(&cfg, ctx, in_channels, num_classes, net);
    if (rt_revnet_config_get(name, &rcfg) == RT_OK) return rt_revnet_build(&rcfg, ctx, in_channels, num_classes, net);
    if (rt_unet_config_get(name, &ucfg) == RT_OK) return rt_unet_build(&ucfg, ctx, in_channels, num_classes, net);
    return rt_error_set(RT_ERR_INVALID_ARG, "unknown model '%s'; choose one of: %s", name, rt_model_names());
}

rt_status rt_model_create(const char *name, int64_t in_channels, int64_t num_classes, rt_device device,
                          uint64_t seed, rt_model **out) {
    if (!out) return rt_error_set(RT_ERR_INVALID_ARG, "rt_model_create: the output pointer is NULL");
    *out = NULL;
    if (!name || !rt_zoo_find(name))
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_model_create: unknown model '%s'; choose one of: %s",
                            name ? name : "(NULL)", rt_model_names());
    if (in_channels < 1 || num_classes < 1)
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_model_create: %s needs >= 1 input channel and >= 1 class, got "
                            "%lld and %lld", name, (long long)in_channels, (long long)num_classes);
    if (device != RT_DEVICE_CPU && device != RT_DEVICE_META)
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_model_create: unknown device %d (RT_DEVICE_CPU or RT_DEVICE_META)",
                            (int)device);
    rt_model *m = calloc(1, sizeof *m);
    if (!m) return rt_error_set(RT_ERR_OOM, "out of memory creating %s", name);
    snprintf(m->name, sizeof m->name, "%s", name);
    m->in_channels = in_channels;
    m->num_classes = num_classes;
    rt_init_ctx ctx = rt_init_ctx_make(device, seed);
    rt_status st = rt_zoo_build(name, &ctx, in_channels, num_classes, &m->net);
    /* weights in the convolutions' own order: no reorder in the forward
     * and none of the weight gradient (nn/modules.h) */
    if (st == RT_OK && !rt_tls_plain_weights) st = rt_module_set_weight_layout(m->net, RT_LAYOUT_WEIGHT_BLOCKED, NULL);
    if (st == RT_OK) st = rt_module_state_dict(m->net, &m->sd);
    if (st != RT_OK) {
        rt_model_destroy(m);
        return st;
    }
    *out = m;
    return RT_OK;
}

void rt_model_destroy(rt_model *m) {
    if (!m) return;
    rt_state_dict_destroy(m->sd);
    rt_module_destroy(m->net);
    free(m);
}

rt_status rt_model_forward(rt_model *m, rt_tensor *x, rt_tensor **logits) {
    if (!logits) return rt_error_set(RT_ERR_INVALID_ARG, "rt_model_forward: the output pointer is NULL");
    *logits = NULL;
    if (!m) return rt_error_set(RT_ERR_INVALID_ARG, "rt_model_forward: the model is NULL");
    return rt_module_forward(m->net, x, logits);
}
