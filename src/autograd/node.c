#include "autograd/node.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* core releases a tensor's grad_fn through its first member */
_Static_assert(offsetof(struct rt_node, meta) == 0, "rt_node must begin with its rt_autograd_meta");

/* One saved tensor. Without a hook, `tensor` is the detached alias kept since
 * rt_node_save (its storage booked with rt_storage_mark_saved). With a hook,
 * `packed` is what pack returned, `hooks` the hooks pushed at save time, and
 * `tensor` the cached result of unpack (NULL until the first access); the
 * header fields describe the tensor packed, to check what unpack returns. */
struct rt_saved_slot {
    rt_tensor *tensor;
    bool hooked;
    void *packed;
    rt_saved_hooks hooks;
    int ndim;
    int64_t shape[RT_MAX_DIMS];
    rt_dtype dtype;
    rt_device device;
    rt_layout layout;
    bool dropped; /* freed early by its node's backward (rt_node_drop_saved) */
};

/* This thread's saved-tensor hooks, innermost last. */
static _Thread_local rt_saved_hooks rt_tls_hooks[RT_SAVED_HOOKS_MAX_DEPTH];
static _Thread_local int rt_tls_n_hooks;

rt_status rt_saved_tensors_hooks_push(const rt_saved_hooks *h) {
    if (!h || !h->pack || !h->unpack)
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_saved_tensors_hooks_push: %s is NULL; saved-tensor hooks "
                            "need a pack and an unpack function", !h ? "the hooks" : !h->pack ? "pack" : "unpack");
    if (rt_tls_n_hooks == RT_SAVED_HOOKS_MAX_DEPTH)
        return rt_error_set(RT_ERR_STATE, "saved-tensor hooks nest at most %d deep on one thread; pop some "
                            "(rt_saved_tensors_hooks_pop) before pushing more", RT_SAVED_HOOKS_MAX_DEPTH);
    rt_tls_hooks[rt_tls_n_hooks++] = *h;
    return RT_OK;
}

rt_status rt_saved_tensors_hooks_pop(void) {
    if (rt_tls_n_hooks == 0)
        return rt_error_set(RT_ERR_STATE, "rt_saved_tensors_hooks_pop: no saved-tensor hooks are pushed "
                            "on this thread");
    rt_tls_n_hooks--;
    return RT_OK;
}

int rt_saved_tensors_hooks_depth(void) { return rt_tls_n_hooks; }

bool rt_saved_tensors_hooks_top(rt_saved_hooks *out) {
    if (!out) return false;
    if (rt_tls_n_hooks == 0) {
        *out = (rt_saved_hooks){0};
        return false;
    }
    *out = rt_tls_hooks[rt_tls_n_hooks - 1];
    return true;
}

rt_status rt_saved_memo_keep(const rt_tensor *key, rt_tensor *const *ts, int n) {
    if (rt_tls_n_hooks == 0 || !key || !ts || n <= 0) return RT_OK;
    const rt_saved_hooks *h = &rt_tls_hooks[rt_tls_n_hooks - 1];
    return h->memo_keep ? h->memo_keep(h->user, key, ts, n) : RT_OK;
}

rt_status rt_saved_memo_take(const rt_tensor *key, rt_tensor **out, int n, bool *found) {
    if (!found || !out || !key)
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_saved_memo_take: %s is NULL",
                            !found ? "found" : !out ? "out" : "key");
    *found = false;
    for (int i = 0; i < n; i++) out[i] = NULL;
    if (rt_tls_n_hooks == 0 || n <= 0) return RT_OK;
    const rt_saved_hooks *h = &rt_tls_hooks[rt_tls_n_hooks - 1];
    return h->memo_take ? h->memo_take(h->user, key, out, n, found) : RT_OK;
}

static _Thread_local bool rt_tls_grad_disabled; /* zero-initialised: grad mode on */

static _Thread_local bool rt_tls_recompute;

static _Thread_local rt_dtype rt_tls_autocast = RT_F32;
static _Thread_local rt_dtype rt_tls_autocast_compute = RT_F32;
static _Thread_local rt_dtype rt_tls_autocast_activation = RT_F32;

rt_dtype rt_autocast_activation_dtype(void) { return rt_tls_autocast_activation; }

rt_dtype rt_autocast_set_activation_dtype(rt_dtype dt) {
    rt_dtype prev = rt_tls_autocast_activation;
    rt_tls_autocast_activation = dt == RT_BF16 ? RT_BF16 : RT_F32;
    return prev;
}

rt_dtype rt_autocast_compute_dtype(void) { return rt_tls_autocast_compute; }

rt_dtype rt_autocast_set_compute_dtype(rt_dtype dt) {
    rt_dtype prev = rt_tls_autocast_compute;
    rt_tls_autocast_compute = dt == RT_BF16 ? RT_BF16 : RT_F32;
    return prev;
}

rt_dtype rt_autocast_dtype(void) { return rt_tls_autocast; }

rt_dtype rt_autocast_set_dtype(rt_dtype dt) {
    rt_dtype prev = rt_tls_autocast;
    rt_tls_autocast = dt == RT_BF16 || dt == RT_F16 ? dt : RT_F32;
    return prev;
}

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
    if (!out) return rt_error_set(RT_ERR_INVALID_ARG, "rt_node_create: out is NULL");
    *out = NULL;
    if (!name || !backward || (!inputs && n_inputs > 0))
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_node_create: %s is NULL",
                            !name ? "the name" : !backward ? "the backward function" : "the inputs array");
    if (n_inputs < 0 || n_outputs < 1)
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_node_create (%s): need n_inputs >= 0 and n_outputs >= 1, "
                            "got %d and %d", name, n_inputs, n_outputs);
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
    n->module = rt_mem_module();
    n->grad_dtype = rt_tls_autocast;
    char bop[96];
    snprintf(bop, sizeof bop, "backward:%s", name);
    n->backward_op = rt_mem_intern(bop);
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

void rt_node_release_unpacked(rt_node *n) {
    if (!n) return;
    for (int i = 0; i < n->n_saved; i++) {
        rt_saved_slot *s = &n->saved[i];
        if (!s->hooked) continue;
        rt_tensor_release(s->tensor);
        s->tensor = NULL;
    }
}

/* Frees one slot: the unpacked tensor and the packed object of a hooked
 * slot, or the alias (unbooked from SAVED) of a plain one. */
static void rt_slot_free(rt_saved_slot *s) {
    if (s->hooked) {
        rt_tensor_release(s->tensor);
        if (s->hooks.free_packed) s->hooks.free_packed(s->hooks.user, s->packed);
        s->hooked = false;
    } else if (s->tensor) {
        rt_storage_mark_saved(s->tensor->storage, -1);
        rt_tensor_release(s->tensor);
    }
    s->tensor = NULL;
    s->packed = NULL;
}

void rt_node_release_saved(rt_node *n) {
    if (!n) return;
    for (int i = 0; i < n->n_saved; i++) rt_slot_free(&n->saved[i]);
    n->released = true;
}

void rt_node_drop_saved(rt_node *n, int slot) {
    if (!n || !n->consuming || slot < 0 || slot >= n->n_saved) return;
    rt_slot_free(&n->saved[slot]);
    n->saved[slot].dropped = true;
}

rt_tensor *rt_node_take_grad(rt_node *n, int output) {
    if (!n || output < 0 || output >= n->n_outputs) return NULL;
    rt_tensor *g = n->grad_buf[output];
    n->grad_buf[output] = NULL;
    return g;
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
    if (!node || !output || output_nr < 0 || output_nr >= node->n_outputs) return;
    rt_node_release(output->grad_fn);
    output->grad_fn = rt_node_retain(node);
    output->output_nr = output_nr;
    output->requires_grad = true;
}

rt_status rt_node_save(rt_node *node, rt_tensor *t, int *slot) {
    if (!node) return RT_OK;
    if (!t) return rt_error_set(RT_ERR_INVALID_ARG, "rt_node_save (%s): the tensor to save is NULL", node->name);
    if (node->n_saved == node->cap_saved) {
        int cap = node->cap_saved ? 2 * node->cap_saved : 4;
        rt_saved_slot *s = realloc(node->saved, (size_t)cap * sizeof *s);
        if (!s) return rt_error_set(RT_ERR_OOM, "out of memory saving a tensor for %s", node->name);
        node->saved = s;
        node->cap_saved = cap;
    }
    rt_saved_slot *s = &node->saved[node->n_saved];
    memset(s, 0, sizeof *s);
    rt_tensor *alias = rt_tensor_detach(t);
    if (!alias) return RT_ERR_OOM;
    if (rt_tls_n_hooks == 0) {
        rt_storage_mark_saved(alias->storage, +1);
        s->tensor = alias;
    } else {
        s->ndim = t->ndim;
        memcpy(s->shape, t->shape, sizeof s->shape);
        s->dtype = t->dtype;
        s->device = t->device;
        s->layout = t->layout;
        s->hooks = rt_tls_hooks[rt_tls_n_hooks - 1];
        bool grad = rt_grad_set_enabled(false);
        rt_status st = s->hooks.pack(s->hooks.user, alias, &s->packed);
        rt_grad_set_enabled(grad);
        rt_tensor_release(alias);
        if (st != RT_OK) return st;
        s->hooked = true;
    }
    if (slot) *slot = node->n_saved;
    node->n_saved++;
    return RT_OK;
}

/* Runs the slot's unpack hook and checks that it gave back the tensor saved. */
static rt_status rt_saved_unpack(const rt_node *node, rt_saved_slot *s) {
    rt_tensor *t = NULL;
    bool grad = rt_grad_set_enabled(false);
    rt_status st = s->hooks.unpack(s->hooks.user, s->packed, &t);
    rt_grad_set_enabled(grad);
    if (st == RT_OK && !t)
        st = rt_error_set(RT_ERR_STATE, "the unpack hook of a tensor saved by %s returned no tensor", node->name);
    bool same_shape = st == RT_OK && t->ndim == s->ndim;
    for (int i = 0; same_shape && i < s->ndim; i++) same_shape = t->shape[i] == s->shape[i];
    if (st == RT_OK && !same_shape) {
        rt_tensor packed = {.ndim = s->ndim};
        memcpy(packed.shape, s->shape, sizeof packed.shape);
        char got[64], want[64];
        st = rt_error_set(RT_ERR_SHAPE, "the unpack hook of a tensor saved by %s returned shape %s, but %s "
                          "was packed", node->name, rt_tensor_shape_str(t, got, sizeof got),
                          rt_tensor_shape_str(&packed, want, sizeof want));
    }
    if (st == RT_OK && t->dtype != s->dtype)
        st = rt_error_set(RT_ERR_DTYPE, "the unpack hook of a tensor saved by %s returned %s, but %s was "
                          "packed; unpack must restore the dtype", node->name, rt_dtype_str(t->dtype),
                          rt_dtype_str(s->dtype));
    if (st == RT_OK && (t->device != s->device || t->layout != s->layout))
        st = rt_error_set(RT_ERR_STATE, "the unpack hook of a tensor saved by %s returned a tensor on another "
                          "device or in another memory layout than the one packed", node->name);
    if (st == RT_OK && (t->grad_fn || t->requires_grad)) { /* backward reads data, never history */
        rt_tensor *d = rt_tensor_detach(t);
        if (!d) st = RT_ERR_OOM;
        rt_tensor_release(t);
        t = d;
    }
    if (st != RT_OK) {
        rt_tensor_release(t);
        return st;
    }
    s->tensor = t;
    return RT_OK;
}

rt_status rt_node_saved_stored(rt_node *node, int slot, rt_tensor **out) {
    if (!out) return rt_error_set(RT_ERR_INVALID_ARG, "rt_node_saved_stored: out is NULL");
    *out = NULL;
    if (!node) return rt_error_set(RT_ERR_INVALID_ARG, "rt_node_saved_stored: the node is NULL");
    rt_tensor *unused = NULL;
    if (node->released || slot < 0 || slot >= node->n_saved || node->saved[slot].dropped)
        return rt_node_saved(node, slot, &unused); /* its error */
    rt_saved_slot *s = &node->saved[slot];
    if (!s->hooked || s->tensor || !s->hooks.stored) return RT_OK;
    bool grad = rt_grad_set_enabled(false);
    rt_status st = s->hooks.stored(s->hooks.user, s->packed, out);
    rt_grad_set_enabled(grad);
    if (st != RT_OK) {
        rt_tensor_release(*out);
        *out = NULL;
    }
    return st;
}

rt_status rt_node_saved(rt_node *node, int slot, rt_tensor **out) {
    if (!out) return rt_error_set(RT_ERR_INVALID_ARG, "rt_node_saved: out is NULL");
    *out = NULL;
    if (!node) return rt_error_set(RT_ERR_INVALID_ARG, "rt_node_saved: the node is NULL");
    if (node->released)
        return rt_error_set(RT_ERR_GRAPH_RELEASED,
                            "trying to backward through the graph a second time (node %s): its "
                            "saved tensors were freed by the first backward; pass retain_graph=true "
                            "to the first rt_backward if you need to backward twice",
                            node->name);
    if (slot < 0 || slot >= node->n_saved)
        return rt_error_set(RT_ERR_INVALID_ARG, "node %s has no saved tensor %d", node->name, slot);
    rt_saved_slot *s = &node->saved[slot];
    if (s->dropped)
        return rt_error_set(RT_ERR_GRAPH_RELEASED, "node %s: saved tensor %d was already freed by this node's "
                            "backward (rt_node_drop_saved); read it before dropping it", node->name, slot);
    if (s->hooked && !s->tensor) RT_TRY(rt_saved_unpack(node, s));
    *out = s->tensor;
    return RT_OK;
}
