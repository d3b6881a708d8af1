/* Autograd graph nodes and the saved-tensor API (define-by-run, as PyTorch).
 *
 * An op that runs while grad mode is on and has an input requiring grad
 * creates one node: it records, per forward input, the edge along which that
 * input's gradient flows (to the producing node, or to a leaf whose .grad
 * accumulates it), the op's backward function, a small context (the op's
 * parameters), and the tensors backward needs, stored through rt_node_save so
 * that their bytes are booked as SAVED and strategies can intercept them.
 *
 * Ownership: a tensor holds a reference to its grad_fn; a node holds
 * references to the nodes and leaves its edges point at and to its saved
 * tensors, which are detached aliases (no grad_fn) so there are no cycles.
 * A node begins with an rt_autograd_meta (core/tensor.h): its refcount and
 * its destroy function, through which core releases a tensor's grad_fn
 * without including this header. */
#ifndef RT_AUTOGRAD_NODE_H
#define RT_AUTOGRAD_NODE_H

#include <stdbool.h>
#include <stddef.h>

#include "core/tensor.h"

typedef struct rt_node rt_node;

/* Where one forward input's gradient goes: a node's output `input_nr`, or a
 * leaf tensor's .grad, or nowhere (both NULL: the input needs no gradient). */
typedef struct rt_edge {
    rt_node *node;
    int input_nr;
    rt_tensor *leaf;
} rt_edge;

/* Computes grad_inputs[i] for every input i with rt_node_needs_grad(self, i)
 * from grad_outputs. A node with one output always gets its gradient; for a
 * node with several outputs, grad_outputs[o] is NULL when output o received
 * no gradient (it was unused) and means zeros. Each
 * grad_inputs[i] is a new reference (or NULL for "no gradient"), f32, shaped
 * like the forward input, on the same device. */
typedef rt_status (*rt_backward_fn)(rt_node *self, rt_tensor *const *grad_outputs,
                                    rt_tensor **grad_inputs);

struct rt_node {
    rt_autograd_meta meta; /* first member: refcount and destroy (core/tensor.h) */
    const char *name;      /* op name, a string literal, e.g. "conv2d" */
    int n_inputs;
    rt_edge *edges;        /* n_inputs */
    int n_outputs;
    rt_backward_fn backward;
    void *ctx;             /* op parameters; freed with free() unless ctx_free is set */
    void (*ctx_free)(void *ctx);
    rt_tensor **saved;
    int n_saved, cap_saved;
    bool released;         /* saved tensors were freed by a backward without retain_graph */
    /* engine scratch, valid only during rt_backward */
    int deps;
    bool visited;
    rt_tensor **grad_buf;  /* n_outputs */
};

/* Creates the node for an op whose forward inputs are inputs[0..n_inputs-1]
 * (entries may be NULL for non-tensor arguments). Sets *out to NULL, with
 * RT_OK, when grad mode is off or no input requires grad: the op then records
 * nothing. ctx_size bytes of zeroed context are allocated for the op. */
rt_status rt_node_create(const char *name, int n_inputs, rt_tensor *const *inputs, int n_outputs,
                         rt_backward_fn backward, size_t ctx_size, rt_node **out);
rt_node *rt_node_retain(rt_node *n);
/* Drops a reference; the last one frees saved tensors, context and edges. */
void rt_node_release(rt_node *n);

/* Makes `output` the `output_nr`-th result of node (sets grad_fn and
 * requires_grad). No-op when node is NULL. */
void rt_node_set_output(rt_node *node, rt_tensor *output, int output_nr);

/* True when input i's gradient is wanted. */
static inline bool rt_node_needs_grad(const rt_node *n, int i) {
    return n->edges[i].node != NULL || n->edges[i].leaf != NULL;
}

/* Keeps t for backward: stores a detached alias sharing t's storage and books
 * a TEMP storage as SAVED (core/tensor.h, rt_storage_mark_saved). Returns the
 * slot index through *slot (may be NULL). No-op returning RT_OK for node NULL. */
rt_status rt_node_save(rt_node *node, rt_tensor *t, int *slot);
/* The tensor saved in `slot` (borrowed). RT_ERR_GRAPH_RELEASED with a clear
 * message when a backward without retain_graph already freed it. */
rt_status rt_node_saved(rt_node *node, int slot, rt_tensor **out);
/* Frees every saved tensor of the node and marks it released. */
void rt_node_release_saved(rt_node *node);

/* Grad mode (torch.set_grad_enabled / torch.no_grad), thread-local by design.
 * rt_grad_set_enabled returns the previous state for restoring. */
bool rt_grad_is_enabled(void);
bool rt_grad_set_enabled(bool enabled);

/* Recompute mode, thread-local by design: set by memory strategies (checkpoint,
 * reversible rebuild) while they re-run a forward whose effects already
 * happened once. Ops with side effects consult it: batch_norm does not update
 * running statistics again. Dropout needs no flag: the strategy rewinds the
 * default generator to the offset it saved at forward, so the replay draws
 * the same mask, and then restores the generator. Returns the previous state for restoring. */
bool rt_recompute_is_active(void);
bool rt_recompute_set_active(bool active);

#endif
