#include "core/tensor.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Thread-local by design (rt_storage.serial): no lock, and a storage's
 * serial only needs to differ from earlier ones made by the same thread. */
static _Thread_local uint64_t rt_tls_storage_serial;

static rt_storage *rt_storage_create(size_t nbytes, rt_device device, rt_mem_category cat) {
    rt_storage *s = calloc(1, sizeof *s);
    if (!s) {
        rt_error_set(RT_ERR_OOM, "out of memory allocating a storage header");
        return NULL;
    }
    const rt_device_memory *mem = rt_device_memory_get(device);
    rt_status st = mem ? mem->alloc(nbytes, cat, &s->data)
                       : rt_error_set(RT_ERR_INVALID_ARG, "unknown device %d", (int)device);
    if (st != RT_OK) {
        free(s);
        return NULL;
    }
    s->refcount = 1;
    s->serial = ++rt_tls_storage_serial;
    s->nbytes = nbytes;
    s->device = device;
    s->category = cat;
    return s;
}

static rt_mem_category rt_storage_booked(const rt_storage *s) {
    return (s->saved_count > 0 && s->category == RT_MEM_TEMP) ? RT_MEM_SAVED : s->category;
}

rt_storage_derived *rt_storage_derived_find(rt_storage *s, uint64_t tag) {
    for (rt_storage_derived *d = s ? s->derived : NULL; d; d = d->next)
        if (d->tag == tag) return d;
    return NULL;
}

rt_status rt_storage_derived_add(rt_storage *s, uint64_t tag, size_t nbytes, rt_storage_derived **out) {
    if (!s || !out || nbytes == 0)
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_storage_derived_add: %s",
                            !s ? "the storage is NULL" : !out ? "out is NULL" : "nbytes is 0");
    *out = NULL;
    rt_storage_derived *d = calloc(1, sizeof *d);
    if (!d) return rt_error_set(RT_ERR_OOM, "out of memory allocating a derived-copy header");
    rt_status st = rt_device_memory_get(s->device)->alloc(nbytes, RT_MEM_TEMP, &d->data);
    if (st != RT_OK) {
        free(d);
        return st;
    }
    d->tag = tag;
    d->nbytes = nbytes;
    d->next = s->derived;
    s->derived = d;
    *out = d;
    return RT_OK;
}

static void rt_storage_derived_free(const rt_storage *s, rt_storage_derived *d) {
    rt_device_memory_get(s->device)->free(d->data, d->nbytes, RT_MEM_TEMP);
    free(d);
}

void rt_storage_derived_drop(rt_storage *s, uint64_t tag) {
    if (!s) return;
    for (rt_storage_derived **pp = &s->derived; *pp; pp = &(*pp)->next)
        if ((*pp)->tag == tag) {
            rt_storage_derived *d = *pp;
            *pp = d->next;
            rt_storage_derived_free(s, d);
            return;
        }
}

void rt_storage_derived_clear(rt_storage *s) {
    if (!s) return;
    while (s->derived) {
        rt_storage_derived *d = s->derived;
        s->derived = d->next;
        rt_storage_derived_free(s, d);
    }
}

void rt_tensor_bump_version(rt_tensor *t) {
    if (!t || !t->storage) return;
    t->storage->version++;
    rt_storage_derived_clear(t->storage);
}

uint64_t rt_tensor_version(const rt_tensor *t) { return t && t->storage ? t->storage->version : 0; }

static void rt_storage_release(rt_storage *s) {
    if (!s || --s->refcount > 0) return;
    rt_storage_derived_clear(s);
    rt_device_memory_get(s->device)->free(s->data, s->nbytes, rt_storage_booked(s));
    free(s);
}

void rt_storage_mark_saved(rt_storage *s, int delta) {
    if (!s) return;
    int before = s->saved_count;
    s->saved_count += delta;
    if (s->category != RT_MEM_TEMP) return;
    if (before == 0 && s->saved_count > 0) rt_mem_move((int64_t)s->nbytes, RT_MEM_TEMP, RT_MEM_SAVED);
    if (before > 0 && s->saved_count == 0) rt_mem_move((int64_t)s->nbytes, RT_MEM_SAVED, RT_MEM_TEMP);
}

static int64_t rt_shape_numel(int ndim, const int64_t *shape) {
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    return n;
}

static rt_tensor *rt_tensor_header(const char *fn, int ndim, const int64_t *shape, rt_dtype dtype,
                                   rt_device device) {
    if (ndim < 0 || ndim > RT_MAX_DIMS) {
        rt_error_set(RT_ERR_SHAPE, "%s: tensors have 0 to %d dimensions, got %d", fn, RT_MAX_DIMS, ndim);
        return NULL;
    }
    if (!shape && ndim > 0) {
        rt_error_set(RT_ERR_INVALID_ARG, "%s: the shape is NULL for a %d-D tensor", fn, ndim);
        return NULL;
    }
    int64_t numel = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] > 0 && numel > ((int64_t)1 << 58) / shape[i]) {
            rt_error_set(RT_ERR_SHAPE, "%s: a tensor with dimension %d = %lld would hold more than 2^58 "
                         "elements; the shape is too large", fn, i, (long long)shape[i]);
            return NULL;
        }
        numel *= shape[i] > 0 ? shape[i] : 1;
    }
    for (int i = 0; i < ndim; i++)
        if (shape[i] < 0) {
            rt_error_set(RT_ERR_SHAPE, "%s: dimension %d of a new tensor is negative (%lld)", fn, i,
                         (long long)shape[i]);
            return NULL;
        }
    rt_tensor *t = calloc(1, sizeof *t);
    if (!t) {
        rt_error_set(RT_ERR_OOM, "out of memory allocating a tensor header");
        return NULL;
    }
    t->refcount = 1;
    t->ndim = ndim;
    for (int i = 0; i < ndim; i++) t->shape[i] = shape[i];
    t->dtype = dtype;
    t->device = device;
    return t;
}

/* rt_tensor_create, naming `fn` in its messages. */
static rt_tensor *rt_tensor_create_in(const char *fn, int ndim, const int64_t *shape, rt_dtype dtype,
                                      rt_device device, rt_mem_category category) {
    if (!rt_dtype_size(dtype)) {
        rt_error_set(RT_ERR_DTYPE, "%s: unknown dtype %d", fn, (int)dtype);
        return NULL;
    }
    if (device != RT_DEVICE_CPU && device != RT_DEVICE_META) {
        rt_error_set(RT_ERR_INVALID_ARG, "%s: unknown device %d (RT_DEVICE_CPU or RT_DEVICE_META)", fn,
                     (int)device);
        return NULL;
    }
    if ((int)category < 0 || category >= RT_MEM_NCAT) {
        rt_error_set(RT_ERR_INVALID_ARG, "%s: unknown memory category %d", fn, (int)category);
        return NULL;
    }
    rt_tensor *t = rt_tensor_header(fn, ndim, shape, dtype, device);
    if (!t) return NULL;
    size_t nbytes = (size_t)rt_shape_numel(ndim, shape) * rt_dtype_size(dtype);
    t->storage = rt_storage_create(nbytes, device, category);
    if (!t->storage) {
        free(t);
        return NULL;
    }
    return t;
}

rt_tensor *rt_tensor_create(int ndim, const int64_t *shape, rt_dtype dtype, rt_device device,
                            rt_mem_category category) {
    return rt_tensor_create_in("rt_tensor_create", ndim, shape, dtype, device, category);
}

static rt_tensor *rt_tensor_zeros_in(const char *fn, int ndim, const int64_t *shape, rt_dtype dtype,
                                     rt_device device, rt_mem_category category) {
    rt_tensor *t = rt_tensor_create_in(fn, ndim, shape, dtype, device, category);
    if (t && t->storage->data) memset(t->storage->data, 0, t->storage->nbytes);
    return t;
}

rt_tensor *rt_tensor_zeros(int ndim, const int64_t *shape, rt_dtype dtype, rt_device device,
                           rt_mem_category category) {
    return rt_tensor_zeros_in("rt_tensor_zeros", ndim, shape, dtype, device, category);
}

rt_tensor *rt_tensor_empty_like(const rt_tensor *like, rt_mem_category category) {
    if (!like) {
        rt_error_set(RT_ERR_INVALID_ARG, "rt_tensor_empty_like: the tensor `like` is NULL");
        return NULL;
    }
    rt_tensor *t = rt_tensor_create_in("rt_tensor_empty_like", like->ndim, like->shape, like->dtype,
                                       like->device, category);
    if (t) t->layout = like->layout;
    return t;
}

rt_tensor *rt_tensor_zeros_like(const rt_tensor *like, rt_mem_category category) {
    if (!like) {
        rt_error_set(RT_ERR_INVALID_ARG, "rt_tensor_zeros_like: the tensor `like` is NULL");
        return NULL;
    }
    rt_tensor *t = rt_tensor_zeros_in("rt_tensor_zeros_like", like->ndim, like->shape, like->dtype,
                                      like->device, category);
    if (t) t->layout = like->layout;
    return t;
}

rt_tensor *rt_tensor_from_data(int ndim, const int64_t *shape, rt_dtype dtype, const void *data,
                               rt_mem_category category) {
    rt_tensor *t = rt_tensor_create_in("rt_tensor_from_data", ndim, shape, dtype, RT_DEVICE_CPU, category);
    if (t && !data && t->storage->nbytes) {
        rt_tensor_release(t);
        rt_error_set(RT_ERR_INVALID_ARG, "rt_tensor_from_data: data is NULL");
        return NULL;
    }
    if (t && t->storage->nbytes) memcpy(t->storage->data, data, t->storage->nbytes);
    return t;
}

void rt_autograd_meta_release(rt_autograd_meta *m) {
    if (!m || --m->refcount > 0) return;
    if (m->destroy) m->destroy(m);
}

rt_tensor *rt_tensor_retain(rt_tensor *t) {
    if (t) t->refcount++;
    return t;
}

void rt_tensor_release(rt_tensor *t) {
    if (!t || --t->refcount > 0) return;
    rt_storage_release(t->storage);
    rt_tensor_release(t->grad);
    /* a node's first member is its rt_autograd_meta (C11 6.7.2.1p15) */
    rt_autograd_meta_release((rt_autograd_meta *)t->grad_fn);
    free(t);
}

rt_tensor *rt_tensor_view(rt_tensor *t, int ndim, const int64_t *shape) {
    if (!t) {
        rt_error_set(RT_ERR_INVALID_ARG, "rt_tensor_view: the tensor is NULL");
        return NULL;
    }
    if (ndim < 0 || ndim > RT_MAX_DIMS) {
        rt_error_set(RT_ERR_SHAPE, "rt_tensor_view: tensors have 0 to %d dimensions, got %d", RT_MAX_DIMS, ndim);
        return NULL;
    }
    if (!shape && ndim > 0) {
        rt_error_set(RT_ERR_INVALID_ARG, "rt_tensor_view: the shape is NULL for a %d-D view", ndim);
        return NULL;
    }
    bool same = ndim == t->ndim;
    for (int i = 0; same && i < ndim; i++) same = shape[i] == t->shape[i];
    if (t->layout != RT_LAYOUT_PLAIN && !same) {
        char a[64];
        rt_error_set(RT_ERR_SHAPE, "cannot reshape the blocked-layout tensor %s; convert it with "
                     "rt_to_layout(x, RT_LAYOUT_PLAIN) first", rt_tensor_shape_str(t, a, sizeof a));
        return NULL;
    }
    if (rt_shape_numel(ndim, shape) != rt_tensor_numel(t)) {
        char a[64];
        rt_error_set(RT_ERR_SHAPE, "cannot view a tensor of shape %s (%lld elements) as %d-D with %lld elements",
                     rt_tensor_shape_str(t, a, sizeof a), (long long)rt_tensor_numel(t), ndim,
                     (long long)rt_shape_numel(ndim, shape));
        return NULL;
    }
    rt_tensor *v = rt_tensor_header("rt_tensor_view", ndim, shape, t->dtype, t->device);
    if (!v) return NULL;
    v->storage = t->storage;
    v->storage->refcount++;
    v->layout = t->layout;
    return v;
}

rt_tensor *rt_tensor_detach(rt_tensor *t) {
    if (!t) {
        rt_error_set(RT_ERR_INVALID_ARG, "rt_tensor_detach: the tensor is NULL");
        return NULL;
    }
    return rt_tensor_view(t, t->ndim, t->shape);
}

rt_tensor *rt_tensor_to(const rt_tensor *t, rt_dtype dtype, rt_mem_category category) {
    if (!t) {
        rt_error_set(RT_ERR_INVALID_ARG, "rt_tensor_to: the tensor is NULL");
        return NULL;
    }
    rt_tensor *c = rt_tensor_create_in("rt_tensor_to", t->ndim, t->shape, dtype, t->device, category);
    if (c) c->layout = t->layout;
    if (c && t->device == RT_DEVICE_CPU)
        rt_dtype_convert(t->storage->data, t->dtype, c->storage->data, dtype, (size_t)rt_tensor_numel(t));
    return c;
}

int64_t rt_tensor_numel(const rt_tensor *t) { return t ? rt_shape_numel(t->ndim, t->shape) : 0; }

size_t rt_tensor_nbytes(const rt_tensor *t) {
    return t ? (size_t)rt_tensor_numel(t) * rt_dtype_size(t->dtype) : 0;
}

bool rt_tensor_same_shape(const rt_tensor *a, const rt_tensor *b) {
    if (!a || !b) return false;
    if (a->ndim != b->ndim) return false;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i]) return false;
    return true;
}

char *rt_tensor_shape_str(const rt_tensor *t, char *buf, size_t n) {
    if (!buf || n == 0) return buf;
    if (!t) {
        snprintf(buf, n, "(NULL tensor)");
        return buf;
    }
    size_t used = (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < t->ndim && used < n; i++)
        used += (size_t)snprintf(buf + used, n - used, "%s%lld", i ? ", " : "", (long long)t->shape[i]);
    if (used < n) snprintf(buf + used, n - used, "]");
    return buf;
}

rt_status rt_tensor_set_requires_grad(rt_tensor *t, bool requires_grad) {
    if (!t) return rt_error_set(RT_ERR_INVALID_ARG, "rt_tensor_set_requires_grad: the tensor is NULL");
    if (t->grad_fn)
        return rt_error_set(RT_ERR_STATE, "requires_grad can only be set on leaf tensors; "
                                          "detach the tensor first");
    if (requires_grad && t->dtype != RT_F32)
        return rt_error_set(RT_ERR_DTYPE, "only float32 tensors can require gradients (got %s)",
                            rt_dtype_str(t->dtype));
    t->requires_grad = requires_grad;
    return RT_OK;
}

rt_status rt_tensor_fill(rt_tensor *t, float value) {
    if (!t) return rt_error_set(RT_ERR_INVALID_ARG, "rt_tensor_fill: the tensor is NULL");
    rt_tensor_bump_version(t);
    if (rt_tensor_is_meta(t)) return RT_OK;
    size_t n = (size_t)rt_tensor_numel(t);
    if (t->dtype == RT_F32) {
        float *p = rt_tensor_f32(t);
        for (size_t i = 0; i < n; i++) p[i] = value;
        return RT_OK;
    }
    for (size_t i = 0; i < n; i++)
        rt_dtype_convert(&value, RT_F32, (char *)t->storage->data + i * rt_dtype_size(t->dtype),
                         t->dtype, 1);
    return RT_OK;
}

rt_status rt_tensor_copy(rt_tensor *dst, const rt_tensor *src) {
    if (!dst || !src)
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_tensor_copy: the %s tensor is NULL",
                            !dst ? "destination" : "source");
    if (rt_tensor_numel(dst) != rt_tensor_numel(src)) {
        char a[64], b[64];
        return rt_error_set(RT_ERR_SHAPE, "copy: destination %s and source %s differ in size",
                            rt_tensor_shape_str(dst, a, sizeof a), rt_tensor_shape_str(src, b, sizeof b));
    }
    if (dst->layout != src->layout) {
        char a[64], b[64];
        return rt_error_set(RT_ERR_INVALID_ARG, "copy: destination %s and source %s are in different memory orders "
                            "(layouts %d and %d); convert one with rt_to_layout first",
                            rt_tensor_shape_str(dst, a, sizeof a), rt_tensor_shape_str(src, b, sizeof b),
                            (int)dst->layout, (int)src->layout);
    }
    rt_tensor_bump_version(dst);
    if (rt_tensor_is_meta(dst) || rt_tensor_is_meta(src)) return RT_OK;
    return rt_dtype_convert(src->storage->data, src->dtype, dst->storage->data, dst->dtype,
                            (size_t)rt_tensor_numel(src));
}

void rt_tensor_zero_grad(rt_tensor *t) {
    if (!t) return;
    rt_tensor_release(t->grad);
    t->grad = NULL;
}
