/* The backward engine: rt_backward runs every node reachable from a tensor in
 * dependency order (a node runs once all gradients flowing into it have
 * arrived), sums gradients that meet, and accumulates leaf gradients into
 * .grad (category GRAD), as torch.autograd.backward does.
 *
 * Re-entrant: a node's backward may itself build a sub-graph and call
 * rt_backward on it (checkpointing, reversible blocks). The engine keeps its
 * bookkeeping on the nodes it visits and on its own stack, no global state. */
#ifndef RT_AUTOGRAD_ENGINE_H
#define RT_AUTOGRAD_ENGINE_H

#include <stdbool.h>

#include "node.h"

/* Back-propagates from `root`. grad_root is dL/droot (borrowed, same shape);
 * NULL means ones and requires root to be a scalar (numel 1). Without
 * retain_graph every visited node frees its saved tensors as soon as it has
 * run, so activation memory drops during backward; a later backward through
 * the same nodes returns RT_ERR_GRAPH_RELEASED before touching any gradient.
 * With retain_graph, tensors that saved-tensor hooks unpacked for a node are
 * released once it has run (the packed forms stay; node.h,
 * rt_node_release_unpacked), so the next backward unpacks again.
 * Errors: RT_ERR_INVALID_ARG (root NULL), RT_ERR_NO_GRAD (root does not
 * require grad), RT_ERR_SHAPE (grad_root
 * shape or non-scalar root), RT_ERR_GRAPH_RELEASED, RT_ERR_OOM, and whatever a
 * node's backward returns (gradients may then be partially accumulated). */
rt_status rt_backward(rt_tensor *root, rt_tensor *grad_root, bool retain_graph);

/* Adds `grad` into leaf->grad, allocating it on first use: category TEMP for
 * a leaf over an activation (TEMP storage, e.g. a recompute's detached leaf),
 * GRAD otherwise (parameters, user inputs). Errors: RT_ERR_INVALID_ARG (leaf
 * or grad NULL), RT_ERR_SHAPE (grad's element count differs from leaf's),
 * RT_ERR_DTYPE (grad not float32), RT_ERR_OOM. */
rt_status rt_accumulate_grad(rt_tensor *leaf, rt_tensor *grad);

/* Gradient notification (PyTorch's Tensor.register_post_accumulate_grad_hook,
 * for every leaf at once): after rt_accumulate_grad has added a gradient into
 * leaf->grad it calls fn(user, leaf) on the same thread, inside the backward
 * that produced the gradient (nested backwards of recomputing strategies
 * included). Data parallelism uses it to start a bucket's all-reduce as soon
 * as the bucket's last gradient is final, while backward goes on. fn may
 * return an error, which ends the backward as a node's error would.
 * The hook is THREAD-LOCAL (the library's only kind of mutable global state,
 * core/status.h): it applies to backwards run on the calling thread. NULL fn
 * removes it. *prev_fn / *prev_user (each may be NULL) receive the hook it
 * replaces, so a caller can restore it. */
typedef rt_status (*rt_grad_accumulated_fn)(void *user, rt_tensor *leaf);
void rt_autograd_set_grad_hook(rt_grad_accumulated_fn fn, void *user, rt_grad_accumulated_fn *prev_fn,
                               void **prev_user);

#endif
