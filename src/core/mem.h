/* Tracked allocator: every tensor byte passes through here, attributed to a
 * category, so "where did the memory go" always has an exact answer.
 *
 * State: one tracker per thread (thread-local, documented exception to the
 * no-global-state rule). Training runs on one thread; kernel worker threads
 * (OpenMP inside oneDNN/OpenBLAS) never allocate tensors.
 *
 * Accounting covers the meta device too: rt_mem_account() books bytes
 * without allocating, so a forward+backward on meta tensors reports the same
 * live/peak numbers as the real run (see tensor.h). */
#ifndef RT_CORE_MEM_H
#define RT_CORE_MEM_H

#include <stddef.h>
#include <stdint.h>

#include "status.h"

typedef enum rt_mem_category {
    RT_MEM_PARAM = 0, /* trainable parameters and buffers (running_mean, ...) */
    RT_MEM_GRAD,      /* .grad of leaves (parameter gradients) */
    RT_MEM_OPTIM,     /* optimizer state (momentum, Adam moments) */
    RT_MEM_SAVED,     /* activations kept alive for backward */
    RT_MEM_TEMP,      /* transient activations, activation gradients, scratchpads */
    RT_MEM_DATA,      /* input batches, labels, datasets */
    RT_MEM_NCAT
} rt_mem_category;

/* Upper-case category name, e.g. "SAVED" ("?" for an unknown value; never NULL). */
const char *rt_mem_category_str(rt_mem_category c);

/* Live and peak bytes per category and in total. The total peak is the peak
 * of the sum, not the sum of per-category peaks. */
typedef struct rt_memstats {
    int64_t live[RT_MEM_NCAT];
    int64_t peak[RT_MEM_NCAT];
    int64_t live_total;
    int64_t peak_total;
    int64_t n_alloc; /* number of tracked allocations (real + meta) since start */
    int64_t n_free;
    /* The caching allocator below the tracker (PyTorch's CUDACachingAllocator
     * idea, on the host): freed blocks are kept in size bins and reused, so a
     * training step in steady state calls the system allocator zero times. */
    int64_t n_sys_alloc;  /* aligned_alloc calls made for tensor storage */
    int64_t n_sys_free;   /* free calls (cache trims and releases) */
    int64_t cached_bytes; /* bytes held in the cache, not booked to any category */
} rt_memstats;

/* Copies this thread's counters into *out. No-op when out is NULL. */
void rt_memstats_get(rt_memstats *out);

/* Sets every peak to the current live value (like torch.cuda.reset_peak_memory_stats). */
void rt_memstats_reset_peaks(void);

/* Hard limit on total live bytes (0 = none). An allocation that would exceed
 * it fails with RT_ERR_OOM and a message naming the bytes, category, current
 * op and the limit. Meta accounting obeys the limit too. */
void rt_mem_set_limit(int64_t bytes);
int64_t rt_mem_get_limit(void);

/* Name of the op currently allocating, recorded in trace events and OOM
 * messages. Pass a string literal (not copied), or NULL for none. Returns the
 * previous name (NULL when none) so callers can restore it. */
const char *rt_mem_set_op(const char *op_name);

/* The module path running on this thread ("layer2.1.conv1"; the root
 * module's type name, e.g. "ResNet", for the root itself), recorded in
 * trace events and OOM messages. core/ knows nothing of modules: nn/module.c
 * sets this slot in rt_module_forward (saving and restoring the previous
 * value, so the slot always names the innermost module running — the top of
 * a stack kept on the C call stack), and the autograd engine sets the path
 * a node recorded at creation while it runs the node's backward. The string
 * must outlive every trace event and error message: pass a literal or an
 * rt_mem_intern'ed string. NULL: no module (events say "-"). Returns the
 * previous value. Thread-local, like the rest of the tracker. */
const char *rt_mem_set_module(const char *module_path);
/* The current module path (NULL when no module runs). */
const char *rt_mem_module(void);

/* A copy of s that lives until the process exits, the same pointer for
 * equal strings (interning: module paths and "backward:<op>" names are few
 * and recur every step). Process-wide and thread-safe (one mutex); the only
 * process-global state of core/ besides the cache's exit key. NULL for a
 * NULL s or when memory runs out. */
const char *rt_mem_intern(const char *s);

/* Moves `nbytes` of live accounting from category `from` to `to` (used when a
 * TEMP activation becomes SAVED for backward, and back). Updates peaks.
 * No-op when either category is unknown (not one of rt_mem_category). */
void rt_mem_move(int64_t nbytes, rt_mem_category from, rt_mem_category to);

/* Returns every cached block of this thread to the system (call before
 * exit, or to shrink after a large job; like torch.cuda.empty_cache). */
void rt_mem_release_cache(void);
/* Caps the bytes this thread's cache may hold; a freed block that would
 * exceed the cap goes back to the system. bytes >= 0: a fixed cap (0: no
 * caching). bytes < 0 (the default): automatic, the larger of 1 GiB and
 * twice the most bytes ever live on this thread, so a repeated step of any
 * size finds its blocks again (the cache keeps whole size classes, and the
 * classes free at one moment are not always those asked for next). */
void rt_mem_set_cache_limit(int64_t bytes);

/* The ceiling on live plus cached bytes of this thread: an allocation that
 * misses the cache and would take the two past it first returns every cached
 * block to the system (rt_mem_release_cache), so the process does not grow
 * beyond what the step itself needs when the cache holds blocks of sizes the
 * step no longer asks for. bytes > 0: that ceiling; 0 (the default): 3/4 of
 * the machine's physical memory, or of the cgroup v2 memory.max when lower,
 * read at the first miss. Live bytes alone are never refused by it (that is
 * rt_mem_set_limit's job). Source: PyTorch's caching allocator frees its
 * cached blocks and retries when a device allocation fails. */
void rt_mem_set_ceiling(int64_t bytes);

/* Allocates `nbytes` (64-byte aligned, uninitialised) booked to `cat`.
 * Returns RT_ERR_OOM (message set) when over the limit or malloc fails,
 * RT_ERR_INVALID_ARG when out is NULL or cat is unknown.
 * *out owns the block; release with rt_mem_free(p, nbytes, cat). nbytes 0
 * gives a valid unique pointer. rt_mem_free(NULL, ...) is a no-op; with an
 * unknown cat it returns the block but books nothing. */
rt_status rt_mem_alloc(size_t nbytes, rt_mem_category cat, void **out);
void rt_mem_free(void *p, size_t nbytes, rt_mem_category cat);

/* Books `nbytes` to `cat` without allocating (meta device). Same limit and
 * trace rules as rt_mem_alloc; RT_ERR_INVALID_ARG for an unknown cat. Undo
 * with rt_mem_unaccount (a no-op for an unknown cat). */
rt_status rt_mem_account(size_t nbytes, rt_mem_category cat);
void rt_mem_unaccount(size_t nbytes, rt_mem_category cat);

/* Event trace: when enabled every allocation/free/move appends an event. */
typedef struct rt_mem_event {
    double time_s;        /* seconds since the trace was enabled (monotonic clock) */
    int64_t delta_bytes;  /* + allocate, - free */
    rt_mem_category category;
    const char *op;       /* op name at the time ("" when unknown) */
    const char *module;   /* module path at the time ("-" when outside every module) */
    int64_t live_total;   /* total live bytes after the event */
} rt_mem_event;

/* Starts (clearing any previous events) or stops recording. */
void rt_mem_trace_enable(int on);
/* 1 while recording, else 0. */
int rt_mem_trace_enabled(void);
/* Drops the events recorded after the first n (n at least their number:
 * nothing), recording on as before: what a caller does to keep a span of
 * work and not the clean-up after it (memory/predict.c keeps the
 * steady-state step, not the tear-down of its meta optimizer). */
void rt_mem_trace_truncate(size_t n);
/* Borrowed view of the recorded events; valid until the next trace call.
 * *count receives their number (count may be NULL). */
const rt_mem_event *rt_mem_trace_events(size_t *count);
/* Writes the trace as RFC 4180 CSV: header
 * time_s,delta_bytes,category,op,module,live_total, CRLF-free ("\n") lines,
 * and a field that holds a comma, a double quote or a line break written
 * in double quotes with each quote doubled (oneDNN's op descriptions hold
 * commas). Errors: RT_ERR_INVALID_ARG (path NULL), RT_ERR_IO. */
rt_status rt_mem_trace_write_csv(const char *path);
/* The CSV rt_mem_trace_write_csv writes, of any n events (a copy of a
 * trace), to f (a FILE*, open for writing; the caller closes it and checks
 * ferror): the header, then one line per event, time_s with 9 decimals.
 * No-op when f is NULL. */
void rt_mem_events_write_csv(void *f, const rt_mem_event *ev, size_t n);

/* Writes s to f (a FILE*) as one RFC 4180 field: as is, or in double
 * quotes with quotes doubled when it holds ',', '"', '\r' or '\n'. NULL
 * writes an empty field. No-op when f is NULL. */
void rt_csv_write_field(void *f, const char *s);

/* Human-readable table of live/peak per category to `f` (a FILE*). No-op
 * when file is NULL. */
void rt_memstats_print(void *file);

#endif
