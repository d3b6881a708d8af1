/* Thread-local cache of oneDNN objects (engine, stream, primitives).
 *
 * Every oneDNN kernel in src/kernels looks up its primitive here, keyed by the
 * kernel kind plus every field of its shape struct, so a repeated call with
 * the same shape creates nothing new (a primitive is expensive to create: it
 * may JIT-compile code). The cache, the CPU engine and the stream belong to
 * the calling thread: this is the documented exception to the project's
 * no-global-mutable-state rule (like the allocator's per-thread tracker), and
 * it means no locking and no sharing of primitives between threads.
 *
 * The cache holds at most RT_KERNELS_CACHE_CAPACITY entries and evicts the
 * least recently used one beyond that. Its bookkeeping is plain malloc (it is
 * not tensor memory); every byte a kernel touches at run time (scratchpads,
 * reorder temporaries) goes through the tracked allocator as RT_MEM_TEMP and
 * is freed before the kernel returns, except the weight cache's copies
 * (conv.h "Weight cache", off by default), which the weight's storage owns.
 *
 * A thread that used kernels frees its cache automatically when it exits
 * (pthread key destructor); the main thread, or a long-lived thread that wants
 * the memory back, calls rt_kernels_release_cache(). */
#ifndef RT_KERNELS_CACHE_H
#define RT_KERNELS_CACHE_H

#include <stddef.h>
#include <stdint.h>

/* Maximum number of cached kernel entries per thread (LRU eviction beyond). */
#define RT_KERNELS_CACHE_CAPACITY 1024

/* Destroys every cached primitive, memory object, engine and stream of the
 * calling thread. Safe to call at any time and repeatedly; the next kernel
 * call simply rebuilds what it needs. Never fails. */
void rt_kernels_release_cache(void);

/* Number of kernel entries (one per kind+shape) cached on this thread. */
size_t rt_kernels_cache_size(void);

/* Total oneDNN primitives (main primitives and layout reorders) this thread
 * has created since it started; a cache hit creates none, so tests compare
 * this counter before and after a repeated call. Not reset by release. */
int64_t rt_kernels_primitives_created(void);

/* Weight reorders (a convolution's input weights from the caller's layout
 * into the primitive's) this thread has executed since it started, cached
 * (kernels/conv.h "Weight cache": one per weight version and format) or
 * not (one per call); tests compare it before and after calls. Not reset by
 * release. */
int64_t rt_kernels_weight_reorders(void);

#endif
