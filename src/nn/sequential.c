/* The Sequential container (nn/modules.h). */
#include "nn/modules.h"

/* Each child gets the activation's only reference the container holds, so a
 * child may free it inside its forward (rt_module_forward_consume). */
static rt_status rt_sequential_forward_consume(rt_module *m, rt_tensor *x, rt_tensor **y) {
    rt_tensor *h = x;
    for (int i = 0; i < m->n_children; i++) {
        rt_tensor *next = NULL;
        rt_status st = rt_module_forward_consume(m->children[i].module, h, &next); /* releases h */
        h = next;
        if (st != RT_OK) return st;
    }
    *y = h;
    return RT_OK;
}

static rt_status rt_sequential_forward(rt_module *m, rt_tensor *x, rt_tensor **y) {
    return rt_sequential_forward_consume(m, rt_tensor_retain(x), y);
}

static const rt_module_class rt_sequential_class = {"Sequential", rt_sequential_forward, NULL,
                                                    rt_sequential_forward_consume};

rt_status rt_sequential_create(rt_module **m) {
    if (!m) return rt_error_set(RT_ERR_INVALID_ARG, "rt_sequential_create: the output pointer m is NULL");
    *m = rt_module_alloc(sizeof(rt_module), &rt_sequential_class);
    return *m ? RT_OK : rt_error_last_status();
}
