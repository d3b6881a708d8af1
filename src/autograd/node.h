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
 * without including this header.
 *
 * Saved-tensor hooks (torch.autograd.graph.saved_tensors_hooks) let a user
 * decide how saved tensors are kept: see rt_saved_hooks below. */
#ifndef RT_AUTOGRAD_NODE_H
#define RT_AUTOGRAD_NODE_H

#include <stdbool.h>
#include <stddef.h>

#include "../core/tensor.h"

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
 * grad_inputs[i] is a new reference (or NULL for "no gradient"), shaped
 * like the forward input, on the same device, in its dtype as PyTorch does:
 * f32, or bf16 for a bf16 activation (a residual block's interior in a bf16
 * region, autograd/node.h rt_autocast_activation_dtype). grad_outputs[o]
 * has output o's dtype, except that a bf16 output may receive an f32
 * gradient from an op that computes f32 (ops convert what they cannot
 * read). The engine sums gradients that are not both f32 through f32. */
typedef rt_status (*rt_backward_fn)(rt_node *self, rt_tensor *const *grad_outputs,
                                    rt_tensor **grad_inputs);

/* One saved tensor; private to autograd/node.c. */
typedef struct rt_saved_slot rt_saved_slot;

struct rt_node {
    rt_autograd_meta meta; /* first member: refcount and destroy (core/tensor.h) */
    const char *name;      /* op name, a string literal, e.g. "conv2d" */
    /* The module path running when the node was created (rt_mem_module(),
     * interned, NULL outside modules): the engine names it in the memory
     * trace while it runs this node's backward. */
    const char *module;
    /* "backward:<name>", interned: the op of the trace events of this
     * node's backward and of the gradient buffers it fills (NULL when out of
     * memory; the engine then uses the name). */
    const char *backward_op;
    int n_inputs;
    rt_edge *edges;        /* n_inputs */
    int n_outputs;
    rt_backward_fn backward;
    void *ctx;             /* op parameters; freed with free() unless ctx_free is set */
    void (*ctx_free)(void *ctx);
    rt_saved_slot *saved;  /* n_saved slots, read through rt_node_saved */
    int n_saved, cap_saved;
    bool released;         /* saved tensors were freed by a backward without retain_graph */
    /* The precision region's dtype at creation (rt_autocast_dtype): when
     * not RT_F32 the engine rounds the gradients arriving at this node to it
     * before the node's backward, as if the activation gradients flowing
     * backward were stored in bf16/f16 (torch.autocast: a reduced op's
     * output, and so its gradient, has the reduced dtype). An op whose
     * backward rounds its gradient to that dtype itself sets RT_F32, so it
     * is not rounded twice: a convolution computing in bf16 (ops/conv.c)
     * and a bf16 region's ReLU and add_relu (ops/activation.c). */
    rt_dtype grad_dtype;
    /* engine scratch, valid only during rt_backward */
    int deps;
    bool visited;
    /* Set by the engine while it runs this node's backward without
     * retain_graph: the saved tensors are freed right after it returns, so
     * the backward may free them earlier (rt_node_drop_saved). */
    bool consuming;
    rt_tensor **grad_buf;  /* n_outputs */
};

/* Creates the node for an op whose forward inputs are inputs[0..n_inputs-1]
 * (entries may be NULL for non-tensor arguments). Sets *out to NULL, with
 * RT_OK, when grad mode is off or no input requires grad: the op then records
 * nothing. ctx_size bytes of zeroed context are allocated for the op.
 * Errors: RT_ERR_INVALID_ARG (out, name or backward NULL, inputs NULL with
 * n_inputs > 0, n_inputs < 0 or n_outputs < 1), RT_ERR_OOM. */
rt_status rt_node_create(const char *name, int n_inputs, rt_tensor *const *inputs, int n_outputs,
                         rt_backward_fn backward, size_t ctx_size, rt_node **out);
/* retain(NULL) returns NULL. */
rt_node *rt_node_retain(rt_node *n);
/* Drops a reference; the last one frees saved tensors, context and edges.
 * NULL is a no-op. */
void rt_node_release(rt_node *n);

/* Makes `output` the `output_nr`-th result of node (sets grad_fn and
 * requires_grad). No-op when node or output is NULL or output_nr is not in
 * [0, node->n_outputs). */
void rt_node_set_output(rt_node *node, rt_tensor *output, int output_nr);

/* True when input i's gradient is wanted; false for a NULL node or an i
 * outside [0, n_inputs). */
static inline bool rt_node_needs_grad(const rt_node *n, int i) {
    return n && i >= 0 && i < n->n_inputs && (n->edges[i].node != NULL || n->edges[i].leaf != NULL);
}

/* Keeps t (any shape and dtype, cpu or meta; borrowed) for backward.
 * Without a saved-tensor hook (the default): stores a detached alias sharing
 * t's storage and books a TEMP storage as SAVED (core/tensor.h,
 * rt_storage_mark_saved); no bytes are copied. With hooks pushed
 * (rt_saved_tensors_hooks_push): calls the innermost pack hook on a detached
 * alias of t and stores the packed object it returns, together with a copy
 * of the hooks, so popping them later does not change how this tensor is
 * unpacked or freed; the alias itself is not kept and nothing is booked
 * (the hook books what it keeps, see rt_saved_hooks). Returns the slot index
 * through *slot (may be NULL). No-op returning RT_OK for node NULL.
 * Errors: RT_ERR_INVALID_ARG (t NULL with a node), RT_ERR_OOM; whatever the
 * pack hook returns (nothing is saved then).
 * Source: torch.autograd.function.FunctionCtx.save_for_backward. */
rt_status rt_node_save(rt_node *node, rt_tensor *t, int *slot);
/* The tensor saved in `slot`: borrowed, with the shape, dtype, device and
 * layout of the tensor saved, no grad_fn. Without a hook it is the alias kept
 * since rt_node_save. With a hook, the first call unpacks (the unpack hook
 * captured at save time) and the node caches the result, so further calls
 * return the same tensor; the cache lives until rt_node_release_unpacked
 * (the engine calls it after the node's backward when retain_graph keeps the
 * graph) or rt_node_release_saved, and the pointer is valid until then, which
 * covers the node's backward. Errors: RT_ERR_GRAPH_RELEASED with a clear
 * message when a backward without retain_graph already freed the saved
 * tensors; RT_ERR_INVALID_ARG for node or out NULL or a slot never saved
 * (*out is NULL on every error, when out is not NULL); whatever the unpack
 * hook returns; RT_ERR_SHAPE / RT_ERR_DTYPE / RT_ERR_STATE when unpack
 * returned no tensor or one whose shape, dtype, device or layout differs
 * from the tensor packed. */
rt_status rt_node_saved(rt_node *node, int slot, rt_tensor **out);
/* Saved slot `slot` as its saved-tensor hooks store it, when they store it
 * in another form than the tensor saved (a precision region's bf16 copy of
 * an f32 activation): *out a new reference to that stored tensor (same
 * shape and layout, the stored dtype), with nothing converted — for an op
 * that can read it as it is (a bf16 convolution's forward, right after
 * saving its input, and its weight gradient; ReLU's backward reading the
 * sign of its output). *out is NULL when the slot was saved without hooks, its hooks
 * have no `stored` entry or keep the tensor itself, or it is already
 * unpacked; read it with rt_node_saved then. Errors as rt_node_saved. */
rt_status rt_node_saved_stored(rt_node *node, int slot, rt_tensor **out);
/* Inside the node's own backward: frees saved slot `slot` now instead of
 * after the backward returns, when the engine will free it anyway (a
 * backward without retain_graph, node->consuming); with retain_graph it is
 * a no-op, since the next backward needs the tensor. A pointer rt_node_saved
 * returned for the slot is invalid afterwards; reading the slot again is
 * RT_ERR_GRAPH_RELEASED. The bytes go only if nothing else references the
 * storage (the next layer may keep the same activation). For a backward
 * that has copied what it needs out of a large saved tensor: a reversible
 * sequence splits its saved output into channel halves and rebuilds from
 * those (memory/reversible_sequence.c). No-op for NULL or a slot out of
 * range. Source: PyTorch frees a node's saved variables once its backward
 * ran (release_variables); this lets the node do it sooner. */
void rt_node_drop_saved(rt_node *node, int slot);
/* Inside the node's own backward: takes the engine's reference to the
 * gradient of output `output` (grad_outputs[output] becomes NULL; the
 * caller releases the returned reference, which may be NULL). For a backward
 * that has copied its incoming gradient into other tensors and wants the
 * original freed before the rest of its work (the engine would hold it until
 * the backward returns). NULL for a NULL node or an output out of range. */
rt_tensor *rt_node_take_grad(rt_node *node, int output);
/* Frees every saved tensor of the node and marks it released: an alias is
 * unbooked (rt_storage_mark_saved -1) and released; a packed object goes to
 * its free_packed hook and a cached unpacked tensor is released. No-op for
 * NULL. */
void rt_node_release_saved(rt_node *node);
/* Releases the tensors unpack hooks returned for this node (the packed
 * objects stay; the next rt_node_saved unpacks again), so a retained graph
 * holds only the packed form between backward passes, as PyTorch unpacks on
 * every access. No-op for slots saved without a hook, and for NULL. */
void rt_node_release_unpacked(rt_node *node);

/* Saved-tensor hooks: the counterpart of PyTorch's
 * torch.autograd.graph.saved_tensors_hooks(pack_hook, unpack_hook).
 *
 * pack(user, t, &packed): called by rt_node_save with t, a detached alias of
 *   the tensor being saved (borrowed: retain it to keep it, never keep the
 *   original, which may be the node's own output). Stores an opaque object
 *   in *packed (any value, NULL included) and returns RT_OK, or returns an
 *   error (with rt_error_set) that rt_node_save, and so the op, returns.
 * unpack(user, packed, &out): called by rt_node_saved at most once per slot
 *   and backward pass; sets *out to a new reference to a tensor with the
 *   saved tensor's shape, dtype, device and layout (a tensor with a grad_fn
 *   is detached), or returns an error; on error the node releases whatever
 *   *out holds.
 * free_packed(user, packed): may be NULL; called exactly once for every
 *   object pack returned, when the node releases its saved tensors (after a
 *   backward without retain_graph, or when the graph is dropped).
 * stored(user, packed, &out): may be NULL; sets *out to a new reference to
 *   the tensor the hook keeps when that is not the tensor saved (a half
 *   copy), else NULL, converting nothing (rt_node_saved_stored).
 * pack and unpack run with grad mode off, so ops inside them record nothing.
 *
 * Ownership: the node owns the packed object from pack's return until it
 * hands it to free_packed, and owns the unpacked tensor it caches (see
 * rt_node_saved). `user` is borrowed and must stay valid until every node
 * that saved through these hooks has released its saved tensors.
 *
 * Memory accounting: without hooks a saved activation is booked SAVED (see
 * rt_node_save). With hooks the node books nothing; bytes a hook keeps are
 * its to book, so the SAVED category still tells what the graph holds:
 * - a hook that stores a copy (a bf16 copy of an f32 activation:
 *   rt_tensor_to(t, RT_BF16, RT_MEM_SAVED)) creates it in category SAVED,
 *   so it is booked SAVED while held and freed from SAVED in free_packed;
 *   half the bytes of the f32 original, which is freed as soon as nobody
 *   else holds it;
 * - a hook that keeps t itself retains it and calls
 *   rt_storage_mark_saved(t->storage, +1) in pack and -1 in free_packed,
 *   exactly what rt_node_save does without hooks;
 * - a hook that drops the tensor to recompute it in unpack keeps no bytes
 *   and books nothing; the tensor unpack rebuilds (create it TEMP) is a
 *   backward transient, cached by the node only as long as said above.
 * The unpacked tensor is booked in whatever category unpack created it.
 *
 * State: a stack of at most RT_SAVED_HOOKS_MAX_DEPTH hooks per thread
 * (thread-local, like grad mode); empty at thread start. */
typedef struct rt_saved_hooks {
    rt_status (*pack)(void *user, rt_tensor *t, void **packed);
    rt_status (*unpack)(void *user, void *packed, rt_tensor **out);
    void (*free_packed)(void *user, void *packed);
    void *user;
    rt_status (*stored)(void *user, void *packed, rt_tensor **out); /* NULL: the hook stores tensors as saved */
    /* Both may be NULL; see rt_saved_memo_keep / rt_saved_memo_take. */
    rt_status (*memo_keep)(void *user, const rt_tensor *key, rt_tensor *const *ts, int n);
    rt_status (*memo_take)(void *user, const rt_tensor *key, rt_tensor **out, int n, bool *found);
} rt_saved_hooks;

#define RT_SAVED_HOOKS_MAX_DEPTH 16

/* Pushes a copy of *h: tensors saved from now on on this thread are packed by
 * h until it is popped (the innermost hooks win; outer ones are not called).
 * Errors: RT_ERR_INVALID_ARG when h, h->pack or h->unpack is NULL;
 * RT_ERR_STATE when RT_SAVED_HOOKS_MAX_DEPTH hooks are already pushed. */
rt_status rt_saved_tensors_hooks_push(const rt_saved_hooks *h);
/* Pops the innermost hooks (tensors they packed stay unpackable: each slot
 * keeps its own copy). RT_ERR_STATE when none is pushed. */
rt_status rt_saved_tensors_hooks_pop(void);
/* Number of hooks pushed on this thread (0 when saving is plain). */
int rt_saved_tensors_hooks_depth(void);
/* Copies the innermost hooks into *out and returns true; with none pushed
 * (or out NULL) returns false and zeroes *out (when not NULL). A hook that
 * pushes itself over another reads it first to chain to it: a checkpoint
 * region inside a precision region hands the tensors it keeps to the
 * precision hooks, which store them in half precision. */
bool rt_saved_tensors_hooks_top(rt_saved_hooks *out);

/* Forward results a recompute may reuse instead of computing them again:
 * batch norm's batch statistics. A recompute re-runs a region on the same
 * input, so the statistics it would compute are those of the forward
 * (inside a precision region a selective recompute starts from half
 * copies, and then normalises with the forward's exact statistics), and
 * computing them is two of the three passes batch norm makes over its
 * input (the third normalises). The innermost saved-tensor hooks decide: a
 * checkpoint region's forward hooks keep what the ops hand them, its
 * recompute hooks hand it back in the same order; any other hooks, or
 * none, keep nothing and hand nothing back, and the op computes as usual.
 *
 * key: a tensor that names the op call and outlives the step (batch
 * norm: its running_mean; borrowed, read only for its storage, shape and
 * dtype): what was kept with a key is handed back only to that key, so
 * two batch norms of one width cannot swap statistics.
 * rt_saved_memo_keep: an op that has computed ts[0..n) (borrowed; small
 * per-channel tensors of key's shape and dtype) offers them; the hooks may
 * retain them (booked SAVED while held). RT_OK when nothing keeps them;
 * the hooks' error otherwise (RT_ERR_OOM).
 * rt_saved_memo_take: the same op in recompute asks for them: *found true
 * and out[0..n) new references to what the forward kept, or *found false
 * and out[0..n) NULL when the hooks hand nothing back. RT_ERR_STATE when
 * what comes next was not kept with this key, or is not n tensors of key's
 * shape and dtype (the region ran other ops than at forward);
 * RT_ERR_INVALID_ARG for NULL found, out or key. */
rt_status rt_saved_memo_keep(const rt_tensor *key, rt_tensor *const *ts, int n);
rt_status rt_saved_memo_take(const rt_tensor *key, rt_tensor **out, int n, bool *found);

/* Grad mode (torch.set_grad_enabled / torch.no_grad), thread-local by design.
 * rt_grad_set_enabled returns the previous state for restoring. */
bool rt_grad_is_enabled(void);
bool rt_grad_set_enabled(bool enabled);

/* The precision region (memory/precision.h), thread-local by design like
 * grad mode: RT_F32 outside (the default), RT_BF16 or RT_F16 inside. Nodes
 * record it (rt_node.grad_dtype). rt_autocast_set_dtype returns the
 * previous value for restoring; a value other than F32/BF16/F16 is taken as
 * RT_F32. */
rt_dtype rt_autocast_dtype(void);
rt_dtype rt_autocast_set_dtype(rt_dtype dt);
/* The region's compute dtype, thread-local likewise: RT_BF16 lets
 * convolutions compute in bf16 where oneDNN can (ops/ops.h rt_conv);
 * RT_F32 otherwise (the default, and a region that only stores half, such
 * as a reversible rebuild that must match its f32 forward). Returns the
 * previous value; a value other than RT_BF16 is taken as RT_F32. */
rt_dtype rt_autocast_compute_dtype(void);
rt_dtype rt_autocast_set_compute_dtype(rt_dtype dt);
/* The dtype in which convolutions and batch norms hand their outputs to the
 * next op, thread-local likewise: RT_BF16 asks a convolution that computes
 * in bf16 (compute dtype RT_BF16, a kernel on this CPU) to write a bf16
 * output, and a batch norm given a bf16 input writes bf16 (the input's
 * dtype, as PyTorch's batch norm under autocast). RT_F32 (the default)
 * keeps every output f32. Set only around code whose every consumer reads
 * bf16 — a residual block's interior, models/resblock.c — as a PyTorch
 * autocast region keeps a ResNet's activations bf16 from convolution to
 * convolution. Returns the previous value; a value other than RT_BF16 is
 * taken as RT_F32. */
rt_dtype rt_autocast_activation_dtype(void);
rt_dtype rt_autocast_set_activation_dtype(rt_dtype dt);

/* Recompute mode, thread-local by design: set by memory strategies (checkpoint,
 * reversible rebuild) while they re-run a forward whose effects already
 * happened once. Ops with side effects consult it: batch_norm does not update
 * running statistics again. Dropout needs no flag: the strategy rewinds the
 * default generator to the offset it saved at forward, so the replay draws
 * the same mask, and then restores the generator (autograd/recompute.h does
 * both in one scope). Returns the previous state for restoring. */
bool rt_recompute_is_active(void);
bool rt_recompute_set_active(bool active);

#endif
