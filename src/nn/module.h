/* Modules: the C counterpart of torch.nn.Module.
 *
 * A module has a class (its PyTorch type name and a forward function), a
 * train/eval flag, its own named tensors (parameters, buffers and counters,
 * e.g. a BatchNorm2d's weight, running_mean and num_batches_tracked) and
 * named children. State-dict names follow from the tree exactly as in
 * PyTorch: the child path joined by dots, then the tensor's own name
 * (`layer1.0.conv1.weight`).
 *
 * Concrete modules embed `rt_module` as their first member (C's form of
 * inheritance) and are allocated with rt_module_alloc. Memory strategies
 * (memory/reversible.h, and checkpointing next) are modules that wrap other
 * modules, so a strategy is chosen by building or configuring the tree, not
 * by fields of a model.
 *
 * Ownership: a parent owns its children (rt_module_add_child transfers the
 * child, also on failure) and a module owns one reference to each of its
 * tensors; rt_module_destroy frees the whole subtree. Tensors handed out
 * (rt_module_tensor, state dicts) are borrowed unless stated otherwise. */
#ifndef RT_NN_MODULE_H
#define RT_NN_MODULE_H

#include <stdbool.h>
#include <stddef.h>

#include "../core/rng.h"
#include "state_dict.h"

typedef struct rt_module rt_module;

/* What every module of one kind shares (a C vtable). */
typedef struct rt_module_class {
    const char *type; /* PyTorch's class name, e.g. "Conv2d", "Sequential" */
    /* y = module(x), in the mode of m->training. x is borrowed, *y a new
     * reference (NULL on error). */
    rt_status (*forward)(rt_module *m, rt_tensor *x, rt_tensor **y);
    /* Frees what the concrete module holds beyond the base (NULL: nothing).
     * Children and registered tensors are freed by rt_module_destroy. */
    void (*destroy)(rt_module *m);
    /* Optional: forward that takes over the caller's reference to x and
     * releases it as soon as x is no longer needed, so that x's memory is
     * freed inside the forward when nothing else holds it (a reversible
     * sequence after splitting x into halves: MemCNN's keep_input=False,
     * without its resize of a storage someone else may read). NULL: the
     * module runs `forward`, then x is released. Called through
     * rt_module_forward_consume. */
    rt_status (*forward_consume)(rt_module *m, rt_tensor *x, rt_tensor **y);
} rt_module_class;

typedef struct rt_module_child {
    char *name;         /* "" for an inline child, see rt_module_add_child */
    rt_module *module;
} rt_module_child;

/* Called after a module's forward (torch's register_forward_hook): x is the
 * input, y the output, both borrowed. An error fails the forward. */
typedef rt_status (*rt_forward_hook)(rt_module *m, rt_tensor *x, rt_tensor *y, void *user);

struct rt_module {
    const rt_module_class *cls;
    bool training;                 /* train() / eval(); new modules are in training mode */
    rt_state_entry *entries;       /* own tensors, short names ("weight") */
    int n_entries, cap_entries;
    rt_module_child *children;
    int n_children, cap_children;
    rt_forward_hook hook;          /* optional, see rt_module_set_forward_hook */
    void *hook_user;
    /* Set by rt_module_add_child (NULL / "" for a root), so that errors can
     * name the module's path (rt_module_path); not part of PyTorch's API. */
    rt_module *parent;
    const char *name;              /* borrowed from the parent's child entry */
    /* Optional, set by a module whose forward is a fixed sequence of module
     * calls (stages), each taking the previous call's output (a U-Net's
     * levels): lists them in execution order for checkpointing
     * (memory/checkpoint.h; a Sequential's children are its stages without
     * this). reads[i] is the index of an earlier stage whose output stage i
     * also reads (a skip, fetched with rt_checkpoint_side_get), -1 for
     * none. Fills at most cap entries of both arrays and returns the count
     * (call again with a larger cap when it exceeds cap). */
    int (*stages)(rt_module *m, rt_module **stages, int *reads, int cap);
};

/* Where new parameters live and the stream that initialises them, threaded
 * through the constructors of a model so that parameters are initialised in
 * construction order from one Philox stream (seeded like torch.manual_seed). */
typedef struct rt_init_ctx {
    rt_device device;  /* cpu, or meta for memory prediction (nothing is computed) */
    rt_generator gen;  /* initialisation stream; advanced by every init */
} rt_init_ctx;

/* An initialisation context for `device`, Philox stream `seed`, offset 0. */
rt_init_ctx rt_init_ctx_make(rt_device device, uint64_t seed);

/* For module implementations: a zeroed object of `size` bytes (>= sizeof
 * rt_module, the rt_module first) of class `cls`, in training mode. NULL
 * with the message set: RT_ERR_INVALID_ARG when cls, cls->type or
 * cls->forward is NULL, RT_ERR_OOM when memory runs out. Free with
 * rt_module_destroy. */
rt_module *rt_module_alloc(size_t size, const rt_module_class *cls);

/* Frees m, its children (recursively) and its references to its tensors.
 * NULL is a no-op. */
void rt_module_destroy(rt_module *m);

/* y = m(x): the class's forward, then the forward hook if one is set.
 * Thread-local state: while it runs, m's path (rt_module_path, interned) is
 * the memory tracker's module slot and m's type its default op name
 * (core/mem.h, rt_mem_set_module), both restored on return, so every
 * allocation and trace event says which module it ran in; nested calls
 * form a per-thread stack of running modules.
 * RT_ERR_INVALID_ARG for NULL arguments (*y is NULL on every error when y
 * is not NULL) or a module without a class. */
rt_status rt_module_forward(rt_module *m, rt_tensor *x, rt_tensor **y);

/* rt_module_forward for a caller that hands over its reference to x (and
 * never reads x again): x is released by the time this returns, also on
 * error. Through the class's forward_consume when it has one and nothing
 * may look at x after the forward — no forward hook on m, and no
 * interceptor installed (checkpointing, planning) unless m has children —
 * else rt_module_forward, then the release. Containers (Sequential, the
 * U-Nets) pass activations on this way, so a module deep inside can free
 * its input early; under an interceptor a container still does (its
 * children, which the interceptor sees one by one, are then called
 * without consuming), so its input is not held for its whole forward — a
 * U-Net level's input under checkpointing was, 128 MiB at 128³. Same
 * errors as rt_module_forward; x NULL is RT_ERR_INVALID_ARG. */
rt_status rt_module_forward_consume(rt_module *m, rt_tensor *x, rt_tensor **y);

/* Makes `child` m's child named `name` (torch's add_module). The parent
 * owns the child from this call on; on failure the child is destroyed.
 * Names are unique among a module's children and tensors (RT_ERR_INVALID_ARG).
 * An empty name adds an *inline* child: its tensors and children are named
 * as if they were m's own (no path component), which lets a wrapper such as
 * a reversible sequence run some of a module's numbered children without
 * renaming them (a RevNet stage's `layer1.1 … layer1.n`).
 * RT_ERR_INVALID_ARG also for m, name or child NULL (a non-NULL child is
 * destroyed then too) or a name containing '.'; RT_ERR_OOM. */
rt_status rt_module_add_child(rt_module *m, const char *name, rt_module *child);

/* Appends `child` named by its position among m's named children ("0",
 * "1", … as torch.nn.Sequential numbers them). Ownership as rt_module_add_child. */
rt_status rt_module_append(rt_module *m, rt_module *child);

/* Creates a zeroed f32 tensor of `shape` booked PARAM on ctx->device and
 * registers it as m's tensor `name` of `kind` (PARAM: a trainable leaf that
 * requires grad, torch's register_parameter; BUFFER: running statistics,
 * register_buffer). *out receives it, borrowed (owned by m). Errors:
 * RT_ERR_INVALID_ARG for a duplicate name, m, ctx, name or out NULL, shape
 * NULL with ndim > 0, or a kind other than PARAM and BUFFER; the shape
 * errors of rt_tensor_create; RT_ERR_OOM. */
rt_status rt_module_register(rt_module *m, rt_init_ctx *ctx, const char *name, rt_entry_kind kind, int ndim,
                             const int64_t *shape, rt_tensor **out);
/* Registers an int64 counter that lives inside the module (a BatchNorm's
 * num_batches_tracked); exported as a 0-d I64 tensor by io/weights.h.
 * RT_ERR_INVALID_ARG for m, name or counter NULL or a duplicate name. */
rt_status rt_module_register_counter(rt_module *m, const char *name, int64_t *counter);

/* m's own tensor named `name` (borrowed), or NULL (with the message set
 * when m or name is NULL). */
rt_tensor *rt_module_tensor(const rt_module *m, const char *name);
/* The child named `name`, or the descendant at a dotted path ("layer1.0"),
 * as torch's get_submodule; inline children are looked through. NULL when
 * there is none (with the message set when m or path is NULL). */
rt_module *rt_module_find(rt_module *m, const char *path);

/* Sets training mode on m and every descendant (torch's train()/eval()).
 * No-op for NULL. */
void rt_module_train(rt_module *m, bool training);

/* Visits m and every descendant in pre-order (a module before its children,
 * children in insertion order), passing the dotted path (root: "") —
 * torch's named_modules(). Stops at and returns the first non-OK status.
 * RT_ERR_INVALID_ARG when m or fn is NULL. */
typedef rt_status (*rt_module_visit_fn)(rt_module *m, const char *path, void *user);
rt_status rt_module_visit(rt_module *m, rt_module_visit_fn fn, void *user);

/* True when m is of class `cls` (instead of comparing function pointers);
 * false for a NULL m. */
static inline bool rt_module_is(const rt_module *m, const rt_module_class *cls) {
    return m && m->cls == cls;
}

/* A new state dict (nn/state_dict.h) naming every tensor of the tree with
 * its full path, in pre-order: torch's state_dict(). The dict holds its own
 * references to the tensors (counters point into their modules), so it
 * must not outlive the modules for its counters. RT_ERR_OOM, or
 * RT_ERR_INVALID_ARG when m or out is NULL or two tensors end up with the
 * same name (an inline child clashing with its parent's names). */
rt_status rt_module_state_dict(rt_module *m, rt_state_dict **out);

/* Writes m's dotted path from its root ("layer1.0.conv1"; the type name for
 * a root, e.g. "Sequential") into buf (always NUL-terminated; "" for a
 * NULL m); returns buf. Does nothing when buf is NULL or n is 0. */
char *rt_module_path(const rt_module *m, char *buf, size_t n);

/* Installs (fn) or removes (NULL) m's forward hook. No-op for a NULL m. */
void rt_module_set_forward_hook(rt_module *m, rt_forward_hook fn, void *user);

/* Forward interceptor: memory strategies that act per module call
 * (checkpoint regions that begin and end at given modules, selective
 * recompute that keeps or replays a leaf module's output; memory/
 * checkpoint.h) install one for the duration of a forward or a recompute.
 * before(user, m, x, y, &handled) runs before m's class forward: it may set
 * *y (a new reference) and *handled = true, and m's forward and hook are
 * then skipped (after is not called). after(user, m, x, y, st) runs after
 * the forward and its hook, also on failure (st the status so far, y NULL
 * then), with x NULL when m is a container that consumed it
 * (rt_module_forward_consume); an error it returns fails the call. Both
 * may be NULL. The torch
 * counterpart is a TorchDispatchMode / module pre- and post-hooks around
 * every call. Thread-local by design (one per thread, like grad mode). */
typedef struct rt_module_interceptor {
    rt_status (*before)(void *user, rt_module *m, rt_tensor *x, rt_tensor **y, bool *handled);
    rt_status (*after)(void *user, rt_module *m, rt_tensor *x, rt_tensor *y, rt_status st);
    void *user;
} rt_module_interceptor;

/* Installs `ic` on this thread (all-NULL: none) and returns the previous
 * one, which the caller restores when done. */
rt_module_interceptor rt_module_set_interceptor(rt_module_interceptor ic);

#endif
