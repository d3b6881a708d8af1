/* Devices and their memory: the first part of a backend's table.
 *
 * A tensor's storage lives on a device. Each device has one
 * rt_device_memory table; core/tensor.c allocates, frees and copies storage
 * only through it, never by testing the device itself. The compute half of
 * a backend (kernels, optimizer updates, reductions) sits two layers up in
 * backend/backend.h, whose rt_backend points back at this table.
 *
 *   RT_DEVICE_CPU   host memory from the tracked allocator (core/mem.h).
 *   RT_DEVICE_META  an accounting device (PyTorch's "meta" device, with
 *                   revtorch's exact byte accounting): allocation books the
 *                   bytes in the tracker, under the same limit, and returns
 *                   no memory; copies do nothing.
 * A new device (the planned CUDA backend, docs/design.md "Backends") adds an
 * enum value and a table here, and a compute table in src/backend. */
#ifndef RT_CORE_DEVICE_H
#define RT_CORE_DEVICE_H

#include <stddef.h>

#include "mem.h"
#include "status.h"

typedef enum rt_device { RT_DEVICE_CPU = 0, RT_DEVICE_META = 1 } rt_device;

typedef struct rt_device_memory {
    const char *name; /* "cpu", "meta": the name PyTorch gives the device */
    rt_device device;
    /* Books nbytes under category cat (core/mem.h) and stores the buffer
     * in *out (NULL on meta, and for nbytes == 0 wherever the allocator
     * returns NULL). RT_ERR_OOM with the tracker's message when the limit
     * or the system refuses. */
    rt_status (*alloc)(size_t nbytes, rt_mem_category cat, void **out);
    /* Releases what alloc booked: the same nbytes and the category the bytes
     * are booked under now (a storage may have moved TEMP -> SAVED). */
    void (*free)(void *p, size_t nbytes, rt_mem_category cat);
    /* Copies nbytes between two buffers of this device (no-op on meta). */
    void (*copy)(void *dst, const void *src, size_t nbytes);
} rt_device_memory;

/* The two tables (also reachable through rt_device_memory_get). */
extern const rt_device_memory rt_device_memory_cpu;
extern const rt_device_memory rt_device_memory_meta;

/* The memory table of a device; NULL for a value outside rt_device. The
 * tables are static constants (no state). */
const rt_device_memory *rt_device_memory_get(rt_device device);

/* "cpu" / "meta"; "unknown" outside rt_device. */
const char *rt_device_name(rt_device device);

#endif
