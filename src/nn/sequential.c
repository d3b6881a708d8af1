/* The Sequential container (nn/modules.h). */
#include "nn/modules.h"

static rt_status rt_sequential_forward(rt_module *m, rt_tensor *x, rt_tensor **y) {
    rt_tensor *h = rt_tensor_retain(x);
    for (int i = 0; i < m->n_children; i++) RT_SEQ(h, next, rt_module_forward(m->children[i].module, h, &next));
    *y = h;
    return RT_OK;
}

static const rt_module_class rt_sequential_class = {"Sequential", rt_sequential_forward, NULL};

rt_status rt_sequential_create(rt_module **m) {
    if (!m) return rt_error_set(RT_ERR_INVALID_ARG, "rt_sequential_create: the output pointer m is NULL");
    *m = rt_module_alloc(sizeof(rt_module), &rt_sequential_class);
    return *m ? RT_OK : rt_error_last_status();
}
