#include "autograd/recompute.h"

#include "autograd/node.h"

rt_rng_state rt_rng_state_get(void) { return *rt_default_generator(); }

void rt_recompute_begin(rt_recompute_scope *s) {
    if (!s) return;
    s->gen = *rt_default_generator();
    s->recompute = rt_recompute_set_active(true);
    s->open = true;
}

rt_status rt_recompute_rewind(const rt_rng_state *at) {
    if (!at) return RT_OK;
    if (!rt_recompute_is_active())
        return rt_error_set(RT_ERR_STATE, "rt_recompute_rewind outside a recompute: open one with "
                            "rt_recompute_begin, which restores the generator at rt_recompute_end");
    *rt_default_generator() = *at;
    return RT_OK;
}

void rt_recompute_end(rt_recompute_scope *s) {
    if (!s || !s->open) return;
    *rt_default_generator() = s->gen;
    rt_recompute_set_active(s->recompute);
    s->open = false;
}

rt_tensor *rt_detached_leaf(rt_tensor *t) {
    if (!t) {
        rt_error_set(RT_ERR_INVALID_ARG, "rt_detached_leaf: the tensor is NULL");
        return NULL;
    }
    rt_tensor *l = rt_tensor_detach(t);
    if (l && rt_tensor_set_requires_grad(l, true) != RT_OK) {
        rt_tensor_release(l);
        return NULL;
    }
    return l;
}

rt_tensor *rt_leaf_grad_or_zeros(rt_tensor *leaf) {
    if (!leaf) {
        rt_error_set(RT_ERR_INVALID_ARG, "rt_leaf_grad_or_zeros: the leaf is NULL");
        return NULL;
    }
    if (leaf->grad) { /* handed over: the leaf no longer keeps it alive */
        rt_tensor *g = leaf->grad;
        leaf->grad = NULL;
        return g;
    }
    rt_tensor *z = rt_tensor_zeros(leaf->ndim, leaf->shape, RT_F32, leaf->device, RT_MEM_TEMP);
    if (z) z->layout = leaf->layout;
    return z;
}
