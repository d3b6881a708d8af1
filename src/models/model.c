#include "models/model.h"

#include <stdlib.h>

#include "models/resnet.h"
#include "models/revnet.h"

const char *rt_model_names(void) {
    return "revnet38, revnet110, revnet164, revnet_small, resnet20, resnet32, resnet44, resnet56, resnet110, resnet164, "
           "resnet18, resnet34, resnet50";
}

bool rt_model_name_has_reversible(const char *name) {
    rt_revnet_config cfg;
    return name && rt_revnet_config_get(name, &cfg) == RT_OK;
}

rt_status rt_model_create(const char *name, int64_t in_channels, int64_t num_classes, rt_device device,
                          uint64_t seed, rt_model **out) {
    *out = NULL;
    rt_resnet_config cfg;
    if (rt_resnet_config_get(name, &cfg) == RT_OK)
        return rt_resnet_create(name, &cfg, in_channels, num_classes, device, seed, out);
    rt_revnet_config rcfg;
    if (rt_revnet_config_get(name, &rcfg) == RT_OK)
        return rt_revnet_create(name, &rcfg, in_channels, num_classes, device, seed, out);
    return rt_error_set(RT_ERR_INVALID_ARG, "unknown model '%s'; choose one of: %s", name, rt_model_names());
}

void rt_model_destroy(rt_model *m) {
    if (!m) return;
    if (m->destroy_impl) m->destroy_impl(m->impl);
    rt_state_dict_destroy(m->sd);
    free(m);
}

rt_status rt_model_forward(rt_model *m, rt_tensor *x, rt_tensor **logits) {
    return m->forward(m, x, logits);
}
