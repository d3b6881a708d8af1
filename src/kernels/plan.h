/* The plan of one oneDNN kernel call: which primitive runs and which
 * temporary bytes it needs, known before any data exists.
 *
 * Every oneDNN kernel of src/kernels is split in two. Its *plan* function
 * (rt_kernel_<name>_plan, declared next to the kernel) checks the shape,
 * creates or finds the primitive in the thread's cache (cache.h) and
 * fills an rt_kernel_plan; it touches no data and books nothing. Its
 * *execute* part (inside the one-shot rt_kernel_<name>, which plans and
 * then executes) needs every data pointer, allocates exactly the plan's
 * temp blocks through the tracked allocator (core/mem.h, RT_MEM_TEMP), runs
 * the primitive and frees them before returning. The meta backend
 * (backend/meta.c) calls only the plan and books the same blocks at the
 * same moments, which is why a meta step's peaks equal a real step's.
 *
 * The plan refers to a cache entry of the calling thread: it is valid until
 * that thread's next kernel call (which may evict the entry) or
 * rt_kernels_release_cache. Not a public header. */
#ifndef RT_KERNELS_PLAN_H
#define RT_KERNELS_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "kernels/layout.h"

#define RT_KERNEL_PLAN_MAX_TEMP 2

/* One RT_MEM_TEMP block of a kernel call. */
typedef struct rt_kernel_temp {
    size_t bytes; /* > 0 */
    /* The op name the allocation is recorded under (core/mem.h
     * rt_mem_set_op, set only around the allocation, so the free is
     * recorded under the caller's op); NULL keeps the caller's op. Points
     * into the cache entry (the primitive's description). */
    const char *op;
} rt_kernel_temp;

struct rt_dnnl_entry;
struct rt_storage; /* core/tensor.h: the weight cache's owner */

typedef struct rt_kernel_plan {
    /* The primitive (with its cached reorders) that execute runs; NULL when
     * the call computes nothing or needs no primitive (n == 0, a reorder
     * between equal layouts, which is a copy, a pointwise convolution of
     * plain tensors, which is a GEMM: kernels/conv_pointwise.h). */
    struct rt_dnnl_entry *entry;
    /* What the primitive's TEMP block holds, each part rounded up to 64
     * bytes as laid out in the block: reorder buffers of the activation
     * read or written on the source side (x, dx), of the weights (w, dw), of
     * the destination side (y, dy), and the scratchpad (the main
     * primitive's or the largest reorder's, shared). An output the
     * primitive computes in the caller's buffer and converts through a
     * spent input's reorder buffer (rt_dnnl_arg.spill) has no part. */
    size_t src_reorder_bytes, weights_reorder_bytes, dst_reorder_bytes, scratchpad_bytes;
    /* Bytes of helper vectors the kernel allocates around the primitive's
     * block (batch-norm backward: an unwanted weight gradient and the
     * shift input oneDNN demands); 0 for the others. */
    size_t helper_bytes;
    /* Bytes of the caller-owned workspace the primitive writes or reads
     * (max-pool argmax, fused batch-norm + ReLU mask): not TEMP, the caller
     * allocates it like an activation; 0 when there is none. */
    size_t workspace_bytes;
    /* The weight cache (kernels/conv.h "Weight cache"), for a plan made
     * with the weight's storage: weights_cached is 1 when the primitive
     * reads the weights from a copy in its own format kept with the
     * storage (rt_storage.derived, core/tensor.h) instead of reordering
     * them into the TEMP block (weights_reorder_bytes is then 0). When that
     * copy does not exist yet for the storage's version,
     * weights_cache_bytes > 0: execute first adds it (RT_MEM_TEMP, owned by
     * the storage until its next version or its end, recorded under
     * weights_cache_op), tagged weights_cache_tag, and reorders the weights
     * into it; then it allocates the temp blocks below. 0 when the copy is
     * there (nothing is reordered) or nothing is cached. */
    int weights_cached;
    size_t weights_cache_bytes;
    uint64_t weights_cache_tag;
    const char *weights_cache_op;
    /* The TEMP blocks in the order execute allocates them; execute frees
     * them in the reverse order before it returns, and nothing else is
     * allocated or freed through the tracker in between. */
    int n_temp;
    rt_kernel_temp temp[RT_KERNEL_PLAN_MAX_TEMP];
} rt_kernel_plan;

/* The layout reorder's plan (the kernel is in the public layout.h, the plan
 * is internal): the arguments and errors of rt_kernel_reorder_layout. from
 * == to or N == 0 plan no primitive (a copy, or nothing). RT_ERR_INVALID_ARG
 * also for a NULL plan. */
rt_status rt_kernel_reorder_layout_plan(int ndim, const int64_t *shape, rt_layout from, rt_layout to,
                                        rt_kernel_plan *plan);

#endif
