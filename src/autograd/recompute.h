/* The recompute facility: what a memory strategy needs to re-run a forward
 * honestly inside a node's backward (checkpointing, reversible blocks).
 *
 * A strategy that drops activations at forward and rebuilds them in backward
 * follows three steps, shared by PyTorch's non-reentrant checkpoint
 * (torch.utils.checkpoint, use_reentrant=False: stash the RNG state at
 * forward, fork_rng and set it in recompute, restore on exit) and RevNet's
 * backward (Gomez et al. 2017, Algorithm 1: rebuild a block's input from its
 * output, re-run F and G on a sub-graph, back-propagate, move on):
 *
 *   forward:   rt_rng_state at = rt_rng_state_get();  // before the region draws
 *              ... run the region without recording, keep what backward needs
 *   backward:  rt_recompute_scope sc;
 *              rt_recompute_begin(&sc);               // recompute mode on
 *              rt_recompute_rewind(&at);              // dropout replays its masks
 *              rt_tensor *xl = rt_detached_leaf(x);   // cut the sub-graph at x
 *              ... re-run the region with grad mode on, rt_backward through it
 *              rt_tensor *dx = rt_leaf_grad_or_zeros(xl);
 *              rt_recompute_end(&sc);                 // generator and mode restored
 *
 * Recompute mode (autograd/node.h) keeps batch norm from updating running
 * statistics a second time; rewinding the counter-based generator
 * (core/rng.h) makes the replay draw exactly the numbers of the forward; and
 * restoring it at the end leaves the global stream where it would be without
 * recompute. Scopes nest (a checkpoint inside a reversible block's F): each
 * keeps what it found and puts it back. No global state beyond the
 * thread-local recompute mode and default generator these functions set. */
#ifndef RT_AUTOGRAD_RECOMPUTE_H
#define RT_AUTOGRAD_RECOMPUTE_H

#include <stdbool.h>

#include "core/rng.h"
#include "core/tensor.h"

/* A position of the default generator: (seed, offset) fixes every later draw
 * of a counter-based generator, so this pair is its whole state. */
typedef rt_generator rt_rng_state;

/* The default generator's state now (a copy). Record it at forward before a
 * region that may draw random numbers (dropout), to rewind to it in
 * recompute. Source: torch.get_rng_state, as checkpoint stashes it. */
rt_rng_state rt_rng_state_get(void);

/* What a recompute changed, to put back. Fill with rt_recompute_begin only. */
typedef struct rt_recompute_scope {
    rt_generator gen; /* the default generator at begin */
    bool recompute;   /* recompute mode at begin */
    bool open;        /* between begin and end */
} rt_recompute_scope;

/* Opens a recompute on this thread: records the default generator and the
 * recompute mode in *s and switches recompute mode on. Grad mode is left as
 * it is (a rebuild may run without recording, a recompute with). Pair every
 * begin with one rt_recompute_end on the same scope; scopes nest (end them
 * in reverse order). Source: torch.random.fork_rng around checkpoint's
 * recompute; RevNet Algorithm 1's reconstruction. No-op for NULL (nothing
 * is switched on, so nothing needs ending). */
void rt_recompute_begin(rt_recompute_scope *s);

/* Moves the default generator to `at` (recorded with rt_rng_state_get at
 * forward), so the ops re-run next draw the same numbers as at forward;
 * rewind again before each region that drew from a recorded position.
 * NULL: no-op (RT_OK), for callers that replay without a record.
 * RT_ERR_STATE, generator untouched, when recompute mode is off: outside a
 * scope the generator would be moved for good. Source: torch.set_rng_state
 * in checkpoint's recompute. */
rt_status rt_recompute_rewind(const rt_rng_state *at);

/* Closes the scope: the default generator and the recompute mode become
 * what they were at rt_recompute_begin, whatever was rewound or drawn in
 * between. A second end on the same scope does nothing, nor does NULL. */
void rt_recompute_end(rt_recompute_scope *s);

/* A new leaf requiring grad that shares t's storage (t: any shape, float32;
 * borrowed; may have a grad_fn, which the leaf does not keep). Building a
 * sub-graph on it and back-propagating leaves dL/dt in the leaf's .grad:
 * TEMP when t's storage is a TEMP activation, GRAD otherwise
 * (rt_accumulate_grad). No bytes are allocated besides the header. Returns a
 * new reference, or NULL with the message set: RT_ERR_INVALID_ARG (t NULL),
 * RT_ERR_DTYPE (t not float32), RT_ERR_OOM. Source: checkpoint's
 * `x.detach().requires_grad_(x.requires_grad)` on its inputs. */
rt_tensor *rt_detached_leaf(rt_tensor *t);

/* The gradient a backward left in `leaf` (leaf is borrowed), handed over:
 * the caller gets leaf->grad's reference, owns it and releases it, and
 * leaf->grad is cleared, so the gradient is freed as soon as the caller is
 * done with it, not when the leaf goes (a reversible rebuild keeps its
 * leaves alive through the next branch's recompute: one activation-sized
 * buffer at the peak). Or, when no gradient reached it (the sub-graph did
 * not depend on it), a new float32 tensor of zeros with leaf's shape, device and layout
 * booked TEMP. NULL with the message set: RT_ERR_INVALID_ARG (leaf NULL),
 * RT_ERR_OOM. Source: a strategy's node must return a gradient for every
 * input it was asked about (torch.autograd.grad's materialize_grads). */
rt_tensor *rt_leaf_grad_or_zeros(rt_tensor *leaf);

#endif
