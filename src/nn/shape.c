/* Modules that change a tensor's shape or memory order but not its values:
 * Flatten and PreferredLayout (nn/modules.h). */
#include "nn/modules.h"

typedef struct rt_layout_module {
    rt_module base;
    bool enabled;
} rt_layout_module;

static rt_status rt_flatten_forward(rt_module *m, rt_tensor *x, rt_tensor **y) {
    (void)m;
    return rt_flatten(x, y);
}

static rt_status rt_layout_forward(rt_module *m, rt_tensor *x, rt_tensor **y) {
    if (!((rt_layout_module *)m)->enabled) {
        *y = rt_tensor_retain(x);
        return RT_OK;
    }
    return rt_to_preferred_layout(x, y);
}

static const rt_module_class rt_flatten_class = {"Flatten", rt_flatten_forward, NULL, NULL};
static const rt_module_class rt_layout_class = {"PreferredLayout", rt_layout_forward, NULL, NULL};

rt_status rt_flatten_create(rt_module **m) {
    if (!m) return rt_error_set(RT_ERR_INVALID_ARG, "rt_flatten_create: the output pointer m is NULL");
    *m = rt_module_alloc(sizeof(rt_module), &rt_flatten_class);
    return *m ? RT_OK : rt_error_last_status();
}

rt_status rt_preferred_layout_create(rt_module **m) {
    if (!m) return rt_error_set(RT_ERR_INVALID_ARG, "rt_preferred_layout_create: the output pointer m is NULL");
    rt_layout_module *l = (rt_layout_module *)rt_module_alloc(sizeof *l, &rt_layout_class);
    *m = l ? &l->base : NULL;
    if (!l) return rt_error_last_status();
    l->enabled = true;
    return RT_OK;
}

static rt_status rt_set_blocked_visit(rt_module *m, const char *path, void *user) {
    (void)path;
    if (rt_module_is(m, &rt_layout_class)) ((rt_layout_module *)m)->enabled = *(bool *)user;
    rt_conv_follow_blocked(m, *(bool *)user);
    return RT_OK;
}

void rt_module_set_blocked(rt_module *m, bool blocked) {
    if (m) rt_module_visit(m, rt_set_blocked_visit, &blocked);
}
