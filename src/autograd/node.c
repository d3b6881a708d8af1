#include "autograd/node.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* core releases a tensor's grad_fn through its first member */
_Static_assert(offsetof(struct rt_node, meta) == 0, "rt_node must begin with its rt_autograd_meta");

static _Thread_local bool rt_tls_grad_disabled; /* zero-initialised: grad mode on */

static _Thread_local bool rt_tls_recompute;

bool rt_recompute_is_active(void) { return rt_tls_recompute; }

bool rt_recompute_set_active(bool active) {
    bool prev = rt_tls_recompute;
    rt_tls_recompute = active;
    return prev;
}

bool rt_grad_is_enabled(void) { return !rt_tls_grad_disabled; }

bool rt_grad_set_enabled(bool enabled) {
    bool prev = !rt_tls_grad_disabled;
    rt_tls_grad_disabled = !enabled;
    return prev;
}

static void rt_node_destroy(rt_autograd_meta *m);

rt_status rt_node_create(const char *name, int n_inputs, rt_tensor *const *inputs, int n_outputs,
                         rt_backward_fn backward, size_t ctx_size, rt_node **out) {
    *out = NULL;
    if (!rt_grad_is_enabled()) return RT_OK;
    bool any = false;
    for (int i = 0; i < n_inputs; i++)
        if (inputs[i] && inputs[i]->requires_grad) any = true;
    if (!any) return RT_OK;

    rt_node *n = calloc(1, sizeof *n);
    if (!n) return rt_error_set(RT_ERR_OOM, "out of memory creating autograd node %s", name);
    n->edges = calloc((size_t)n_inputs, sizeof *n->edges);
    n->grad_buf = calloc((size_t)n_outputs, sizeof *n->grad_buf);
    n->ctx = ctx_size ? calloc(1, ctx_size) : NULL;
    if (!n->edges || !n->grad_buf || (ctx_size && !n->ctx)) {
        free(n->edges);
        free(n->grad_buf);
        free(n->ctx);
        free(n);
        return rt_error_set(RT_ERR_OOM, "out of memory creating autograd node %s", name);
    }
    n->meta.refcount = 1;
    n->meta.destroy = rt_node_destroy;
    n->name = name;
    n->n_inputs = n_inputs;
    n->n_outputs = n_outputs;
    n->backward = backward;
    for (int i = 0; i < n_inputs; i++) {
        rt_tensor *t = inputs[i];
        if (!t || !t->requires_grad) continue;
        if (t->grad_fn) {
            n->edges[i].node = rt_node_retain(t->grad_fn);
            n->edges[i].input_nr = t->output_nr;
        } else {
            n->edges[i].leaf = rt_tensor_retain(t);
        }
    }
    *out = n;
    return RT_OK;
}

rt_node *rt_node_retain(rt_node *n) {
    if (n) n->meta.refcount++;
    return n;
}

void rt_node_release_saved(rt_node *n) {
    for (int i = 0; i < n->n_saved; i++) {
        if (!n->saved[i]) continue;
        rt_storage_mark_saved(n->saved[i]->storage, -1);
        rt_tensor_release(n->saved[i]);
        n->saved[i] = NULL;
    }
    n->released = true;
}

/* The last reference's release (rt_autograd_meta.destroy). */
static void rt_node_destroy(rt_autograd_meta *m) {
    rt_node *n = (rt_node *)m;
    rt_node_release_saved(n);
    free(n->saved);
    for (int i = 0; i < n->n_inputs; i++) {
        rt_node_release(n->edges[i].node);
        rt_tensor_release(n->edges[i].leaf);
    }
    for (int i = 0; i < n->n_outputs; i++) rt_tensor_release(n->grad_buf[i]);
    if (n->ctx_free) n->ctx_free(n->ctx); else free(n->ctx);
    free(n->edges);
    free(n->grad_buf);
    free(n);
}

void rt_node_release(rt_node *n) { rt_autograd_meta_release(n ? &n->meta : NULL); }

void rt_node_set_output(rt_node *node, rt_tensor *output, int output_nr) {
    if (!node) return;
    rt_node_release(output->grad_fn);
    output->grad_fn = rt_node_retain(node);
    output->output_nr = output_nr;
    output->requires_grad = true;
}

rt_status rt_node_save(rt_node *node, rt_tensor *t, int *slot) {
    if (!node) return RT_OK;
    if (node->n_saved == node->cap_saved) {
        int cap = node->cap_saved ? 2 * node->cap_saved : 4;
        rt_tensor **s = realloc(node->saved, (size_t)cap * sizeof *s);
        if (!s) return rt_error_set(RT_ERR_OOM, "out of memory saving a tensor for %s", node->name);
        node->saved = s;
        node->cap_saved = cap;
    }
    rt_tensor *alias = rt_tensor_detach(t);
    if (!alias) return RT_ERR_OOM;
    rt_storage_mark_saved(alias->storage, +1);
    if (slot) *slot = node->n_saved;
    node->saved[node->n_saved++] = alias;
    return RT_OK;
}

rt_status rt_node_saved(rt_node *node, int slot, rt_tensor **out) {
    *out = NULL;
    if (node->released)
        return rt_error_set(RT_ERR_GRAPH_RELEASED,
                            "trying to backward through the graph a second time (node %s): its "
                            "saved tensors were freed by the first backward; pass retain_graph=true "
                            "to the first rt_backward if you need to backward twice",
                            node->name);
    if (slot < 0 || slot >= node->n_saved)
        return rt_error_set(RT_ERR_INVALID_ARG, "node %s has no saved tensor %d", node->name, slot);
    *out = node->saved[slot];
    return RT_OK;
}
