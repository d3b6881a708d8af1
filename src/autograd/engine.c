#include "autograd/engine.h"

#include <stdlib.h>

#include "backend/backend.h"

typedef struct rt_node_list {
    rt_node **items;
    size_t n, cap;
} rt_node_list;

static rt_status rt_list_push(rt_node_list *l, rt_node *node) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 64;
        rt_node **items = realloc(l->items, cap * sizeof *items);
        if (!items) return rt_error_set(RT_ERR_OOM, "out of memory in the backward engine");
        l->items = items;
        l->cap = cap;
    }
    l->items[l->n++] = node;
    return RT_OK;
}

/* engine.h: the thread's gradient notification (documented thread-local) */
static _Thread_local rt_grad_accumulated_fn rt_grad_hook_fn;
static _Thread_local void *rt_grad_hook_user;

void rt_autograd_set_grad_hook(rt_grad_accumulated_fn fn, void *user, rt_grad_accumulated_fn *prev_fn,
                               void **prev_user) {
    if (prev_fn) *prev_fn = rt_grad_hook_fn;
    if (prev_user) *prev_user = rt_grad_hook_user;
    rt_grad_hook_fn = fn;
    rt_grad_hook_user = fn ? user : NULL;
}

static rt_status rt_accumulate_into(rt_tensor *leaf, rt_tensor *grad);

rt_status rt_accumulate_grad(rt_tensor *leaf, rt_tensor *grad) {
    rt_status st = rt_accumulate_into(leaf, grad);
    if (st == RT_OK && rt_grad_hook_fn) st = rt_grad_hook_fn(rt_grad_hook_user, leaf);
    return st;
}

static rt_status rt_accumulate_into(rt_tensor *leaf, rt_tensor *grad) {
    if (!leaf || !grad)
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_accumulate_grad: the %s is NULL", !leaf ? "leaf" : "gradient");
    if (rt_tensor_numel(grad) != rt_tensor_numel(leaf) || grad->dtype != RT_F32) {
        char a[64], b[64];
        return rt_error_set(grad->dtype != RT_F32 ? RT_ERR_DTYPE : RT_ERR_SHAPE,
                            "rt_accumulate_grad: the gradient %s (%s) does not fit the leaf %s; it must be "
                            "float32 with the leaf's number of elements", rt_tensor_shape_str(grad, a, sizeof a),
                            rt_dtype_str(grad->dtype), rt_tensor_shape_str(leaf, b, sizeof b));
    }
    if (!leaf->grad) {
        /* A leaf over an activation (TEMP storage: the detached leaves of a
         * recompute) gets a transient gradient; parameters and user inputs GRAD. */
        rt_mem_category cat = leaf->storage->category == RT_MEM_TEMP ? RT_MEM_TEMP : RT_MEM_GRAD;
        leaf->grad = rt_tensor_empty_like(leaf, cat);
        if (!leaf->grad) return RT_ERR_OOM;
        return rt_tensor_copy(leaf->grad, grad);
    }
    rt_backend_of(leaf->grad)->vec_axpy(rt_tensor_numel(grad), 1.0f, rt_tensor_f32(grad), rt_tensor_f32(leaf->grad));
    return RT_OK;
}

/* acc + g for gradients that are not both f32 (a bf16 activation's, which
 * has its tensor's dtype): summed in f32 and stored in acc's dtype, in a
 * new tensor. Never taken by the zoo's models, whose bf16 activations each
 * feed one op; kept simple rather than fast. */
static rt_status rt_buffer_add_half(rt_tensor **slot, rt_tensor *g) {
    rt_tensor *acc = *slot;
    if ((acc->dtype != RT_F32 && acc->dtype != RT_BF16) || (g->dtype != RT_F32 && g->dtype != RT_BF16))
        return rt_error_set(RT_ERR_DTYPE, "backward: cannot sum gradients of dtypes %s and %s",
                            rt_dtype_str(acc->dtype), rt_dtype_str(g->dtype));
    rt_tensor *a32 = rt_tensor_to(acc, RT_F32, RT_MEM_TEMP), *g32 = rt_tensor_to(g, RT_F32, RT_MEM_TEMP);
    rt_tensor *sum = a32 && g32 ? rt_tensor_empty_like(a32, RT_MEM_TEMP) : NULL;
    if (sum) rt_backend_of(sum)->vec_add(rt_tensor_numel(sum), rt_tensor_f32(a32), rt_tensor_f32(g32), rt_tensor_f32(sum));
    rt_tensor *out = sum ? rt_tensor_to(sum, acc->dtype, RT_MEM_TEMP) : NULL;
    rt_tensor_release(a32);
    rt_tensor_release(g32);
    rt_tensor_release(sum);
    if (!out) return rt_error_last_status();
    rt_tensor_release(acc);
    *slot = out;
    return RT_OK;
}

/* Adds g into *slot (taking a reference). Sums in place only when the engine
 * holds the sole reference, since a backward may pass one tensor to several
 * inputs (add's gradient is its incoming gradient). */
static rt_status rt_buffer_add(rt_tensor **slot, rt_tensor *g) {
    if (!*slot) {
        *slot = rt_tensor_retain(g);
        return RT_OK;
    }
    rt_tensor *acc = *slot;
    if (acc->dtype != RT_F32 || g->dtype != RT_F32) return rt_buffer_add_half(slot, g);
    if (acc->refcount > 1 || acc->storage->refcount > 1) {
        rt_tensor *sum = rt_tensor_empty_like(acc, RT_MEM_TEMP);
        if (!sum) return RT_ERR_OOM;
        rt_backend_of(sum)->vec_add(rt_tensor_numel(sum), rt_tensor_f32(acc), rt_tensor_f32(g), rt_tensor_f32(sum));
        rt_tensor_release(acc);
        *slot = sum;
        return RT_OK;
    }
    rt_backend_of(acc)->vec_axpy(rt_tensor_numel(acc), 1.0f, rt_tensor_f32(g), rt_tensor_f32(acc));
    return RT_OK;
}

/* Collects every node reachable from root (iteratively: graphs of deep
 * networks are thousands of nodes long) and counts incoming edges. */
static rt_status rt_collect(rt_node *root, rt_node_list *all) {
    rt_node_list stack = {0};
    rt_status st = rt_list_push(&stack, root);
    root->visited = true;
    root->deps = 0;
    while (st == RT_OK && stack.n) {
        rt_node *n = stack.items[--stack.n];
        st = rt_list_push(all, n);
        for (int i = 0; st == RT_OK && i < n->n_inputs; i++) {
            rt_node *next = n->edges[i].node;
            if (!next) continue;
            if (!next->visited) {
                next->visited = true;
                next->deps = 0;
                st = rt_list_push(&stack, next);
            }
            next->deps++;
        }
    }
    free(stack.items);
    return st;
}

/* Rounds the gradients arriving at a node of a precision region to its
 * dtype (autograd/node.h, grad_dtype): in place when the engine holds the
 * only reference, else into a copy, so a gradient also handed elsewhere (a
 * leaf's .grad, an f32 node, the other input of a residual sum) keeps its
 * f32 value. The copy is rounded as it is written, one pass over memory. */
static rt_status rt_round_grads(rt_node *n) {
    for (int o = 0; o < n->n_outputs; o++) {
        rt_tensor *g = n->grad_buf[o];
        if (!g || g->dtype != RT_F32) continue;
        rt_tensor *dst = g;
        if (g->refcount > 1 || g->storage->refcount > 1) { /* also on meta: the copy's bytes are booked alike */
            dst = rt_tensor_empty_like(g, RT_MEM_TEMP);
            if (!dst) return RT_ERR_OOM;
        }
        rt_status st = rt_backend_of(g)->dtype_round_into(rt_tensor_f32(g), rt_tensor_f32(dst), n->grad_dtype,
                                                          (size_t)rt_tensor_numel(g));
        if (dst != g) {
            if (st != RT_OK) {
                rt_tensor_release(dst);
                return st;
            }
            rt_tensor_release(g);
            n->grad_buf[o] = dst;
        }
        RT_TRY(st);
    }
    return RT_OK;
}

/* Runs one node: its backward, then hands each input gradient on. */
static rt_status rt_run_node(rt_node *n, bool retain_graph, rt_node_list *ready) {
    rt_status st = RT_OK;
    rt_tensor *stack_grads[8] = {0};
    rt_tensor **grad_in = n->n_inputs <= 8 ? stack_grads : calloc((size_t)n->n_inputs, sizeof *grad_in);
    if (!grad_in) return rt_error_set(RT_ERR_OOM, "out of memory in the backward engine");

    bool any = false;
    for (int o = 0; o < n->n_outputs; o++) any = any || n->grad_buf[o];
    /* the node's backward, its gradient buffers and its freed saved tensors
     * are booked to "backward:<op>" in the module that created the node */
    const char *prev_op = rt_mem_set_op(n->backward_op ? n->backward_op : n->name);
    const char *prev_module = rt_mem_set_module(n->module ? n->module : "backward");
    if (any && n->grad_dtype != RT_F32) st = rt_round_grads(n);
    n->consuming = !retain_graph;
    if (any && st == RT_OK) st = n->backward(n, n->grad_buf, grad_in);
    n->consuming = false;
    for (int o = 0; o < n->n_outputs; o++) {
        rt_tensor_release(n->grad_buf[o]);
        n->grad_buf[o] = NULL;
    }
    if (!retain_graph) rt_node_release_saved(n);
    else rt_node_release_unpacked(n); /* a retained graph keeps saved tensors in packed form */

    for (int i = 0; i < n->n_inputs; i++) {
        rt_edge *e = &n->edges[i];
        if (st == RT_OK && grad_in[i]) {
            if (e->leaf) st = rt_accumulate_grad(e->leaf, grad_in[i]);
            else if (e->node) st = rt_buffer_add(&e->node->grad_buf[e->input_nr], grad_in[i]);
        }
        rt_tensor_release(grad_in[i]);
        if (e->node && --e->node->deps == 0 && st == RT_OK) st = rt_list_push(ready, e->node);
    }
    if (grad_in != stack_grads) free(grad_in);
    rt_mem_set_op(prev_op);
    rt_mem_set_module(prev_module);
    return st;
}

rt_status rt_backward(rt_tensor *root, rt_tensor *grad_root, bool retain_graph) {
    if (!root) return rt_error_set(RT_ERR_INVALID_ARG, "rt_backward: the root tensor is NULL");
    if (!root->requires_grad)
        return rt_error_set(RT_ERR_NO_GRAD, "backward: the tensor does not require grad (no input of "
                            "the computation requires grad, or it ran under no-grad)");
    rt_tensor *seed = NULL;
    if (grad_root) {
        if (!rt_tensor_same_shape(grad_root, root)) {
            char a[64], b[64];
            return rt_error_set(RT_ERR_SHAPE, "backward: gradient shape %s does not match output %s",
                                rt_tensor_shape_str(grad_root, a, sizeof a),
                                rt_tensor_shape_str(root, b, sizeof b));
        }
        seed = rt_tensor_retain(grad_root);
    } else {
        if (rt_tensor_numel(root) != 1)
            return rt_error_set(RT_ERR_SHAPE, "backward: grad can be implicitly created only for "
                                "scalar outputs; pass grad_root for a tensor with %lld elements",
                                (long long)rt_tensor_numel(root));
        seed = rt_tensor_empty_like(root, RT_MEM_TEMP);
        if (!seed) return RT_ERR_OOM;
        rt_tensor_fill(seed, 1.0f);
    }
    if (!root->grad_fn) { /* the root is a leaf */
        rt_status st = rt_accumulate_grad(root, seed);
        rt_tensor_release(seed);
        return st;
    }

    rt_node_list all = {0}, ready = {0};
    rt_status st = rt_collect(root->grad_fn, &all);
    for (size_t i = 0; st == RT_OK && i < all.n; i++)
        if (all.items[i]->released)
            st = rt_error_set(RT_ERR_GRAPH_RELEASED,
                              "trying to backward through the graph a second time (node %s): its "
                              "saved tensors were freed by the first backward; pass retain_graph=true "
                              "to the first rt_backward if you need to backward twice",
                              all.items[i]->name);
    if (st == RT_OK) {
        root->grad_fn->grad_buf[root->output_nr] = rt_tensor_retain(seed);
        st = rt_list_push(&ready, root->grad_fn);
    }
    while (st == RT_OK && ready.n) {
        rt_node *n = ready.items[--ready.n];
        st = rt_run_node(n, retain_graph, &ready);
    }
    for (size_t i = 0; i < all.n; i++) { /* leave no scratch behind, also on error */
        rt_node *n = all.items[i];
        n->visited = false;
        n->deps = 0;
        for (int o = 0; o < n->n_outputs; o++) {
            rt_tensor_release(n->grad_buf[o]);
            n->grad_buf[o] = NULL;
        }
    }
    free(all.items);
    free(ready.items);
    rt_tensor_release(seed);
    return st;
}
