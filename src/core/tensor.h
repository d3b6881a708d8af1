/* Tensors: up to 5-D, contiguous, row-major (NCHW / NCDHW), refcounted
 * storage, on the cpu or the meta device.
 *
 * A meta tensor has shape and dtype but no data: its bytes are booked in the
 * tracked allocator (core/mem.h) exactly as a cpu tensor's would be, so a
 * forward+backward on meta tensors reports the same memory as the real run
 * without computing anything (like PyTorch's device="meta", plus accounting).
 *
 * Ownership: every function returning rt_tensor* returns a new reference that
 * the caller releases with rt_tensor_release(). Functions taking rt_tensor*
 * borrow unless documented otherwise.
 *
 * NULL: a function returning rt_tensor* returns NULL with the message set
 * (rt_error_last_status() gives the code, RT_ERR_INVALID_ARG for a NULL
 * tensor); one returning rt_status returns RT_ERR_INVALID_ARG for a NULL
 * tensor; release, zero_grad and rt_storage_mark_saved ignore NULL; the
 * queries (numel, nbytes, same_shape, is_meta, data, f32) answer 0 / false /
 * NULL for a NULL tensor. */
#ifndef RT_CORE_TENSOR_H
#define RT_CORE_TENSOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "device.h"
#include "dtype.h"
#include "mem.h"
#include "status.h"
#include "layout.h"

#define RT_MAX_DIMS 5

/* Memory order of a 4-D/5-D activation (rt_layout, core/layout.h and kernels/layout.h):
 * PLAIN is PyTorch's contiguous NCHW / NCDHW; BLOCKED is oneDNN's
 * nChw{B}c / nCdhw{B}c, the convolutions' preferred order, used only for
 * C % rt_layout_block() == 0 so both have the same byte size. The shape is
 * always the logical (N, C, H, W); parameters are always PLAIN. */

/* A refcounted byte buffer. `category` is where its bytes are booked; while
 * at least one autograd node keeps it for backward (saved_count > 0) a TEMP
 * storage is booked as SAVED instead (see rt_storage_mark_saved). */
typedef struct rt_storage {
    int refcount;
    size_t nbytes;
    void *data; /* NULL on the meta device */
    rt_device device;
    rt_mem_category category;
    int saved_count;
    /* Creation number on the creating thread (thread-local counter, from
     * 1): with the pointer it names one storage for its whole life, so a
     * strategy can recognise a storage it saw earlier without keeping it
     * alive (an address alone may be reused after a free): checkpointing
     * (memory/checkpoint.h) and the precision region's pack hook, which
     * packs a storage once however many nodes save it (memory/precision.h). */
    uint64_t serial;
    /* Version counter (PyTorch's torch.Tensor._version): 0 at creation,
     * +1 by rt_tensor_bump_version, which every library write that changes
     * the values of an existing storage calls (rt_tensor_fill, rt_tensor_copy
     * into it, the optimizers' updates, weight loading, initialisation, data
     * parallelism's parameter all-gather). Caches of values derived from the
     * data (the convolution weights in a kernel's layout, `derived` below)
     * are valid only for the version they were made at. */
    uint64_t version;
    /* Copies derived from the data at the current version, each tagged by
     * its maker (the convolution kernels keep a weight reordered into the
     * primitive's blocked format here: kernels/conv.h "Weight cache"). Owned
     * by the storage: freed by rt_tensor_bump_version (stale) and with the
     * storage. NULL when none. */
    struct rt_storage_derived *derived;
} rt_storage;

/* One derived copy of a storage's data (see rt_storage.derived): `nbytes`
 * booked in the tracker as RT_MEM_TEMP on the storage's device (data NULL
 * on meta), made for the storage's current version. `tag` says what the
 * copy is; only its maker interprets it (the convolution kernels: an
 * interned oneDNN memory format). */
typedef struct rt_storage_derived {
    struct rt_storage_derived *next;
    uint64_t tag;
    size_t nbytes;
    void *data;
} rt_storage_derived;

/* The autograd slot. core/ knows nothing of autograd (no include of
 * autograd/): a tensor's grad_fn points to a node defined in
 * autograd/node.h, opaque here, whose first member is this header. Releasing
 * a tensor drops its reference to the node through the header, and the last
 * reference calls the node's own `destroy`, so core frees a node without
 * knowing its type and without any global hook (every node carries its
 * destroy function). */
typedef struct rt_autograd_meta {
    int refcount;
    void (*destroy)(struct rt_autograd_meta *self); /* frees the whole node; called once, at refcount 0 */
} rt_autograd_meta;

/* Drops one reference to an autograd object; the last one calls
 * m->destroy(m) (when set). release(NULL) is a no-op. */
void rt_autograd_meta_release(rt_autograd_meta *m);

struct rt_node; /* autograd/node.h; begins with an rt_autograd_meta */

typedef struct rt_tensor {
    int refcount;
    int ndim;
    int64_t shape[RT_MAX_DIMS];
    rt_dtype dtype;
    rt_device device;
    rt_layout layout;         /* PLAIN unless an op chose BLOCKED (see rt_layout) */
    rt_storage *storage;
    bool requires_grad;
    struct rt_tensor *grad;   /* accumulated gradient of a leaf (category GRAD), or NULL */
    struct rt_node *grad_fn;  /* node that produced this tensor, NULL for leaves (opaque: see rt_autograd_meta) */
    int output_nr;            /* which output of grad_fn this is */
} rt_tensor;

/* New uninitialised tensor of `shape` (ndim 0..5; ndim 0 is a scalar, and
 * then shape may be NULL), booked to `category`. Returns NULL with the
 * message set: RT_ERR_SHAPE (ndim outside 0..5, a negative or too large
 * dimension), RT_ERR_INVALID_ARG (shape NULL with ndim > 0, an unknown
 * device or category), RT_ERR_DTYPE (an unknown dtype), RT_ERR_OOM. */
rt_tensor *rt_tensor_create(int ndim, const int64_t *shape, rt_dtype dtype, rt_device device,
                            rt_mem_category category);
/* As rt_tensor_create, filled with zeros (no-op fill on meta). */
rt_tensor *rt_tensor_zeros(int ndim, const int64_t *shape, rt_dtype dtype, rt_device device,
                           rt_mem_category category);
/* Same shape/dtype/device/layout as `like`, new storage booked to `category`.
 * NULL + RT_ERR_INVALID_ARG when like is NULL; else the errors of create. */
rt_tensor *rt_tensor_empty_like(const rt_tensor *like, rt_mem_category category);
rt_tensor *rt_tensor_zeros_like(const rt_tensor *like, rt_mem_category category);
/* New cpu tensor holding a copy of numel elements of `data` (host dtype
 * layout). NULL + RT_ERR_INVALID_ARG when data is NULL and numel > 0; else
 * the errors of create. */
rt_tensor *rt_tensor_from_data(int ndim, const int64_t *shape, rt_dtype dtype, const void *data,
                               rt_mem_category category);

/* Reference counting. retain(NULL) returns NULL and release(NULL) is a
 * no-op; the last release frees the storage (if no other tensor shares it),
 * the grad and the reference to grad_fn. */
rt_tensor *rt_tensor_retain(rt_tensor *t);
void rt_tensor_release(rt_tensor *t);

/* A new tensor sharing t's storage with no autograd history (torch.Tensor.detach).
 * NULL + RT_ERR_INVALID_ARG when t is NULL, RT_ERR_OOM. */
rt_tensor *rt_tensor_detach(rt_tensor *t);
/* A new tensor sharing t's storage with a different shape of the same numel,
 * no autograd history (use rt_reshape in ops/ for the differentiable version).
 * Keeps t's layout when the shape is unchanged; a BLOCKED tensor can only be
 * viewed with its own shape. NULL + RT_ERR_SHAPE when numel differs or t is
 * BLOCKED and the shape changes (convert with rt_to_layout first), or ndim
 * outside 0..5; NULL + RT_ERR_INVALID_ARG when t is NULL or shape is NULL
 * with ndim > 0. */
rt_tensor *rt_tensor_view(rt_tensor *t, int ndim, const int64_t *shape);
/* A deep copy into new storage booked to `category`, converting to `dtype`
 * (elementwise, so the layout is kept). NULL + RT_ERR_INVALID_ARG when t is
 * NULL; else the errors of create. */
rt_tensor *rt_tensor_to(const rt_tensor *t, rt_dtype dtype, rt_mem_category category);

/* Element and byte counts; 0 for a NULL tensor. */
int64_t rt_tensor_numel(const rt_tensor *t);
size_t rt_tensor_nbytes(const rt_tensor *t);
/* False for a NULL tensor. */
static inline bool rt_tensor_is_meta(const rt_tensor *t) { return t && t->device == RT_DEVICE_META; }
/* Raw data pointer; NULL on meta and for a NULL tensor. */
static inline void *rt_tensor_data(const rt_tensor *t) { return t && t->storage ? t->storage->data : NULL; }
static inline float *rt_tensor_f32(const rt_tensor *t) { return (float *)rt_tensor_data(t); }
/* False when either tensor is NULL. */
bool rt_tensor_same_shape(const rt_tensor *a, const rt_tensor *b);
/* Writes "[2, 3, 4]" into buf (always NUL-terminated; "(NULL tensor)" for a
 * NULL t); returns buf. Does nothing when buf is NULL or n is 0. */
char *rt_tensor_shape_str(const rt_tensor *t, char *buf, size_t n);

/* Marks a leaf as requiring grad (torch.Tensor.requires_grad_). RT_ERR_STATE
 * when t is not a leaf; RT_ERR_DTYPE when t is not float32 (compute is f32;
 * bf16/f16 are storage formats only, see dtype.h); RT_ERR_INVALID_ARG when t
 * is NULL. */
rt_status rt_tensor_set_requires_grad(rt_tensor *t, bool requires_grad);
/* Fills every element with `value` (f32, bf16, f16, i32, u8) and bumps t's
 * version (rt_tensor_bump_version; on meta too, which fills nothing).
 * RT_ERR_INVALID_ARG when t is NULL. */
rt_status rt_tensor_fill(rt_tensor *t, float value);
/* Copies src's elements into dst (same shape, converting dtype) and bumps
 * dst's version (rt_tensor_bump_version). Copies nothing on meta.
 * Errors: RT_ERR_INVALID_ARG (dst or src NULL, or their layouts differ: a
 * byte copy between memory orders would scramble the values), RT_ERR_SHAPE
 * (sizes differ). */
rt_status rt_tensor_copy(rt_tensor *dst, const rt_tensor *src);
/* Drops the leaf's .grad (set_to_none=True, PyTorch's default for zero_grad).
 * No-op for NULL. */
void rt_tensor_zero_grad(rt_tensor *t);

/* Marks t's data as changed (torch.Tensor._version += 1, what PyTorch's
 * in-place ops do): increments t->storage->version and frees every derived
 * copy of the storage (they describe the old values). The library calls it
 * wherever it writes an existing storage; a caller that writes a tensor's
 * data through rt_tensor_f32 / rt_tensor_data after the tensor has been
 * used as a convolution weight must call it too, or the next convolution
 * may compute with the weight's cached old values (kernels/conv.h "Weight
 * cache"). No-op for NULL. */
void rt_tensor_bump_version(rt_tensor *t);
/* t->storage->version; 0 for NULL. */
uint64_t rt_tensor_version(const rt_tensor *t);

/* Derived copies of a storage (rt_storage.derived), for the kernels that
 * keep them. find: the copy tagged `tag`, or NULL. add: a new copy of
 * nbytes (> 0) booked as RT_MEM_TEMP on s's device under the tracker's
 * current op, put first in the list; its data is uninitialised (the maker
 * fills it). Errors: RT_ERR_INVALID_ARG (s or out NULL, nbytes 0),
 * RT_ERR_OOM (the tracker's limit or the system refused; nothing added).
 * drop: frees the copy tagged `tag` if there is one (a maker that could
 * not fill it). clear: frees every copy. NULL s: find returns NULL, drop
 * and clear do nothing. */
rt_storage_derived *rt_storage_derived_find(rt_storage *s, uint64_t tag);
rt_status rt_storage_derived_add(rt_storage *s, uint64_t tag, size_t nbytes, rt_storage_derived **out);
void rt_storage_derived_drop(rt_storage *s, uint64_t tag);
void rt_storage_derived_clear(rt_storage *s);

/* Books a storage as kept for backward (+1) or no longer kept (-1). The first
 * keeper moves a TEMP storage's bytes to SAVED, the last one moves them back;
 * PARAM and DATA storages stay in their category (weights and input batches
 * are not activations). No-op for NULL. */
void rt_storage_mark_saved(rt_storage *s, int delta);

#endif
