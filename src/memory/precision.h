/* Mixed precision: a precision region around a module's forward, the
 * counterpart of PyTorch's `with torch.autocast("cpu", dtype=...)` plus the
 * storage decisions of this library.
 *
 * Inside a region of dtype D (bf16 or f16):
 *   - tensors autograd saves for backward (rt_node_save) are stored as D,
 *     booked SAVED at half the f32 bytes, and read back as f32 in backward
 *     (a saved-tensor pack hook, autograd/node.h);
 *   - the activation gradients arriving at the region's nodes are rounded to
 *     D before each node's backward, i.e. take exactly the values they would
 *     have if stored as D (the engine, autograd/node.h grad_dtype) — in fp16
 *     a gradient above 65504 becomes Inf and the loss scaler
 *     (train/scaler.h) skips the step;
 *   - a half copy is made once per source storage in one forward (f32
 *     saving shares a tensor several nodes save; so does this);
 *   - bf16: convolutions compute in bf16 where oneDNN has the kernel on this
 *     CPU (found at run time by creating the primitive: AVX512_BF16/AMX;
 *     on AVX2 there is none and the region only stores): the kernel reads
 *     the region's bf16 copy of its input and one bf16 conversion of its
 *     output gradient (ops/conv.c), converts the weights on the way in,
 *     accumulates in f32 and writes f32. The weights' bf16 copy is made from the f32
 *     master in each call (oneDNN's weight reorder, which f32 runs too),
 *     not kept between steps. Linear layers (OpenBLAS sgemm) compute in
 *     f32. fp16 computes in f32 everywhere (oneDNN has no f16 kernel on
 *     CPUs). rt_precision_describe states what this CPU got.
 * Always f32 (PyTorch's CPU autocast fp32 list, and more): losses and
 * softmax (the loss runs outside the region, in the training step),
 * normalisation statistics (batch norm computes them in double), the
 * optimizer, its state and the master weights, reductions, parameter
 * gradients (.grad), and the coupling arithmetic, stored outputs and exact
 * inputs of reversible sequences (a sequence leaves the region for its
 * forward, which keeps nothing but those; F and G rebuilt in backward run
 * inside a region of the precision the sequence was called with, so their
 * saved activations are half; the rebuild's forward values are f32 compute
 * either way, so reconstruction is as exact as in f32).
 * What is saved as-is: non-f32 tensors (masks, labels), parameters and input
 * batches (PARAM/DATA storages: they are not activations and stay alive
 * anyway), and a tensor whose storage another node already keeps in f32
 * (a reversible sequence's output, saved again by the next convolution). */
#ifndef RT_MEMORY_PRECISION_H
#define RT_MEMORY_PRECISION_H

#include <stddef.h>

#include "../nn/module.h"

typedef enum rt_precision { RT_PRECISION_FP32 = 0, RT_PRECISION_BF16, RT_PRECISION_FP16 } rt_precision;

/* "fp32", "bf16", "fp16" ("?" for another value; never NULL). */
const char *rt_precision_str(rt_precision p);
/* Inverse of rt_precision_str. Errors: RT_ERR_INVALID_ARG (NULL, or a name
 * that is not one of the three: the message lists them). */
rt_status rt_precision_parse(const char *name, rt_precision *out);
/* RT_F32, RT_BF16, RT_F16 (RT_F32 for another value). */
rt_dtype rt_precision_dtype(rt_precision p);

/* Wraps `inner` in an "Autocast" module whose forward runs inner's inside a
 * region of precision p (see above); inner becomes its inline child, so
 * state-dict names do not change. p = FP32 gives a wrapper that changes
 * nothing. On success *out owns inner; on failure inner is destroyed (as
 * rt_module_add_child does). Errors: RT_ERR_INVALID_ARG (inner or out NULL,
 * p not an rt_precision), RT_ERR_OOM. */
rt_status rt_autocast_wrap(rt_module *inner, rt_precision p, rt_module **out);
/* y = m(x) inside a region of dtype dt (RT_BF16 or RT_F16; any other
 * value: a plain rt_module_forward): the region's saved-tensor hooks are
 * pushed and the thread's autocast dtypes set for the call (storage dt;
 * compute dt when `compute`, else f32), all restored after. What the
 * Autocast module runs (compute true), and what a reversible sequence runs
 * for F and G when it rebuilds them in backward under the precision it was
 * called with (compute false: the rebuild must compute what the f32
 * forward computed). Errors: RT_ERR_INVALID_ARG for NULLs; RT_ERR_STATE
 * when the saved-tensor hook stack is full; those of the forward. */
rt_status rt_precision_region_forward(rt_module *m, rt_dtype dt, bool compute, rt_tensor *x, rt_tensor **y);

/* A precision region entered and left around code that is not one module
 * call (a Checkpoint runs stages of the model inside its Autocast's region
 * one by one): begin pushes the region's saved-tensor hooks and sets the
 * thread's autocast dtypes as rt_precision_region_forward does; end
 * restores both. Regions nest like the hooks (end them in reverse order,
 * on the thread that began them). dt other than RT_BF16/RT_F16: begin does
 * nothing and end has nothing to undo. begin errors: RT_ERR_INVALID_ARG for
 * a NULL r, RT_ERR_STATE when the hook stack is full, RT_ERR_OOM; after an
 * error end is a no-op. end accepts NULL. */
typedef struct rt_precision_region {
    bool active, suspended, compute;
    rt_dtype dtype, prev, prev_compute;
    void *table; /* the region's half copies, by source storage (internal) */
} rt_precision_region;
rt_status rt_precision_region_begin(rt_precision_region *r, rt_dtype dt, bool compute);
void rt_precision_region_end(rt_precision_region *r);

/* Steps out of region r for a while and back in: suspend restores the
 * thread's hooks and autocast dtypes as end does but keeps the region's
 * half copies, resume enters it again, so code run in between (a stage
 * profiled alone, in its own region) shares none of them while what runs
 * inside before and after does (the profile's chain: memory/budget.c).
 * Suspend only the innermost region, on its thread. Both accept NULL and
 * an inactive region (nothing to do); suspend of a suspended region and
 * resume of one that is not are no-ops; end ends a suspended region too.
 * resume errors: RT_ERR_STATE when the hook stack is full (the region
 * stays suspended). */
void rt_precision_region_suspend(rt_precision_region *r);
rt_status rt_precision_region_resume(rt_precision_region *r);

/* The region's precision of an Autocast module, FP32 for any other module or NULL. */
rt_precision rt_autocast_precision(const rt_module *m);

/* One line for the start-up report, e.g. "precision bf16: compute f32
 * (oneDNN bf16 conv available on this CPU, not used); bf16 storage: saved
 * activations, activation gradients; f32: ...". Probes oneDNN once (creates
 * a small bf16 convolution primitive). Writes at most n bytes (NUL
 * included) and returns buf; NULL buf or n 0: returns buf unchanged. */
char *rt_precision_describe(rt_precision p, char *buf, size_t n);

#endif
