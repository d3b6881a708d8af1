/* Precision regions (memory/precision.h). */
#include "memory/precision.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/node.h"
#include "backend/backend.h"

const char *rt_precision_str(rt_precision p) {
    switch (p) {
    case RT_PRECISION_FP32: return "fp32";
    case RT_PRECISION_BF16: return "bf16";
    case RT_PRECISION_FP16: return "fp16";
    }
    return "?";
}

rt_status rt_precision_parse(const char *name, rt_precision *out) {
    if (!name || !out)
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_precision_parse: %s is NULL", !name ? "the name" : "out");
    for (int p = RT_PRECISION_FP32; p <= RT_PRECISION_FP16; p++)
        if (strcmp(name, rt_precision_str((rt_precision)p)) == 0) {
            *out = (rt_precision)p;
            return RT_OK;
        }
    return rt_error_set(RT_ERR_INVALID_ARG, "unknown precision '%s' (use fp32, bf16 or fp16)", name);
}

rt_dtype rt_precision_dtype(rt_precision p) {
    return p == RT_PRECISION_BF16 ? RT_BF16 : p == RT_PRECISION_FP16 ? RT_F16 : RT_F32;
}

/* A saved tensor as the region keeps it: a half copy, or the tensor itself. */
typedef struct rt_packed {
    rt_tensor *t;
    bool kept; /* t is the saved tensor itself (marked saved), not a copy */
} rt_packed;

/* The half copies made during one forward of a region, by source storage:
 * several nodes often save the same activation (a ReLU's output kept by
 * the ReLU and by the next convolution), which f32 saving shares; one copy
 * per storage keeps that sharing. Entries hold a reference to the copy and
 * are dropped when the forward ends; the serial tells a storage from a
 * later one at the same address, the version its values from those a
 * consuming op wrote over them (rt_op_take_storage bumps it). */
typedef struct rt_pack_entry {
    const rt_storage *src;
    uint64_t serial;
    uint64_t version; /* a consuming op (rt_relu_inplace, …) rewrites a storage: a new value, a new copy */
    rt_tensor *half;
} rt_pack_entry;

typedef struct rt_pack_table {
    rt_pack_entry *e;
    int n, cap;
} rt_pack_table;

/* The region's half copy of t: a new reference to the one already made
 * from t's storage in this forward (viewed with t's shape), or a new copy
 * recorded in the table. NULL with the message set on failure. */
static rt_tensor *rt_autocast_half(rt_pack_table *a, rt_tensor *t, rt_dtype dt) {
    bool whole = rt_tensor_nbytes(t) == t->storage->nbytes;
    for (int i = 0; whole && i < a->n; i++) {
        rt_pack_entry *e = &a->e[i];
        if (e->src != t->storage || e->serial != t->storage->serial || e->version != t->storage->version ||
            e->half->layout != t->layout)
            continue;
        return rt_tensor_same_shape(e->half, t) ? rt_tensor_retain(e->half) : rt_tensor_view(e->half, t->ndim, t->shape);
    }
    rt_tensor *h = rt_tensor_to(t, dt, RT_MEM_SAVED);
    if (!h || !whole) return h;
    if (a->n == a->cap) {
        int cap = a->cap ? 2 * a->cap : 64;
        rt_pack_entry *grown = realloc(a->e, (size_t)cap * sizeof *grown);
        if (!grown) return h; /* only the sharing is lost */
        a->e = grown;
        a->cap = cap;
    }
    a->e[a->n++] = (rt_pack_entry){t->storage, t->storage->serial, t->storage->version, rt_tensor_retain(h)};
    return h;
}

static void rt_autocast_table_clear(rt_pack_table *a) {
    for (int i = 0; i < a->n; i++) rt_tensor_release(a->e[i].half);
    a->n = 0;
}

static rt_status rt_autocast_pack(void *user, rt_tensor *t, void **packed) {
    rt_packed *p = malloc(sizeof *p);
    if (!p) return rt_error_set(RT_ERR_OOM, "out of memory saving a tensor in a precision region");
    rt_dtype dt = rt_autocast_dtype();
    /* kept as is: outside a region (a reversible sequence's own saves),
     * non-f32 tensors, parameters and batches, and a storage another node
     * already keeps in f32 (a sequence's output that the next block's
     * convolution saves too): sharing it costs nothing, a copy would */
    p->kept = dt == RT_F32 || t->dtype != RT_F32 || !t->storage || t->storage->category != RT_MEM_TEMP ||
              t->storage->saved_count > 0;
    if (p->kept) {
        p->t = rt_tensor_retain(t);
        rt_storage_mark_saved(t->storage, +1);
    } else if (!(p->t = rt_autocast_half(user, t, dt))) {
        free(p);
        return rt_error_last_status();
    }
    *packed = p;
    return RT_OK;
}

static rt_status rt_autocast_unpack(void *user, void *packed, rt_tensor **out) {
    (void)user;
    rt_packed *p = packed;
    *out = p->kept ? rt_tensor_retain(p->t) : rt_tensor_to(p->t, RT_F32, RT_MEM_TEMP);
    return *out ? RT_OK : rt_error_last_status();
}

/* The half copy itself, for a backward that reads bf16 (rt_node_saved_stored);
 * NULL for a tensor kept as is. */
static rt_status rt_autocast_stored(void *user, void *packed, rt_tensor **out) {
    (void)user;
    rt_packed *p = packed;
    *out = p->kept ? NULL : rt_tensor_retain(p->t);
    return RT_OK;
}

static void rt_autocast_free(void *user, void *packed) {
    (void)user;
    rt_packed *p = packed;
    if (p->kept) rt_storage_mark_saved(p->t->storage, -1);
    rt_tensor_release(p->t);
    free(p);
}

/* Pushes region r's hooks (over its table) and sets the thread's autocast
 * dtypes to its own, remembering those it replaces. */
static rt_status rt_region_enter(rt_precision_region *r) {
    rt_saved_hooks h = {.pack = rt_autocast_pack, .unpack = rt_autocast_unpack, .free_packed = rt_autocast_free,
                        .user = r->table, .stored = rt_autocast_stored};
    RT_TRY(rt_saved_tensors_hooks_push(&h));
    r->prev = rt_autocast_set_dtype(r->dtype);
    r->prev_compute = rt_autocast_set_compute_dtype(r->compute ? r->dtype : RT_F32);
    return RT_OK;
}

/* Undoes rt_region_enter. */
static void rt_region_leave(rt_precision_region *r) {
    rt_autocast_set_compute_dtype(r->prev_compute);
    rt_autocast_set_dtype(r->prev);
    rt_saved_tensors_hooks_pop();
}

rt_status rt_precision_region_begin(rt_precision_region *r, rt_dtype dt, bool compute) {
    if (!r) return rt_error_set(RT_ERR_INVALID_ARG, "rt_precision_region_begin: the region is NULL");
    memset(r, 0, sizeof *r);
    if (dt != RT_BF16 && dt != RT_F16) return RT_OK; /* f32: nothing to enter */
    r->table = calloc(1, sizeof(rt_pack_table));
    if (!r->table) return rt_error_set(RT_ERR_OOM, "out of memory entering a precision region");
    /* the table lives for the region only; unpack and free_packed never read it */
    r->dtype = dt;
    r->compute = compute;
    rt_status st = rt_region_enter(r);
    if (st != RT_OK) {
        free(r->table);
        r->table = NULL;
        return st;
    }
    r->active = true;
    return RT_OK;
}

void rt_precision_region_suspend(rt_precision_region *r) {
    if (!r || !r->active || r->suspended) return;
    rt_region_leave(r);
    r->suspended = true;
}

rt_status rt_precision_region_resume(rt_precision_region *r) {
    if (!r || !r->active || !r->suspended) return RT_OK;
    RT_TRY(rt_region_enter(r));
    r->suspended = false;
    return RT_OK;
}

void rt_precision_region_end(rt_precision_region *r) {
    if (!r || !r->active) return;
    if (!r->suspended) rt_region_leave(r);
    rt_pack_table *tab = r->table;
    rt_autocast_table_clear(tab);
    free(tab->e);
    free(tab);
    r->table = NULL;
    r->active = false;
}

rt_status rt_precision_region_forward(rt_module *m, rt_dtype dt, bool compute, rt_tensor *x, rt_tensor **y) {
    if (!m || !x || !y)
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_precision_region_forward: %s is NULL",
                            !m ? "the module" : !x ? "x" : "y");
    rt_precision_region r;
    RT_TRY(rt_precision_region_begin(&r, dt, compute));
    rt_status st = rt_module_forward(m, x, y);
    rt_precision_region_end(&r);
    return st;
}

typedef struct rt_autocast {
    rt_module base;
    rt_precision precision;
} rt_autocast;

static rt_status rt_autocast_forward(rt_module *m, rt_tensor *x, rt_tensor **y) {
    rt_autocast *a = (rt_autocast *)m;
    return rt_precision_region_forward(m->children[0].module, rt_precision_dtype(a->precision), true, x, y);
}

static const rt_module_class rt_autocast_class = {"Autocast", rt_autocast_forward, NULL, NULL};

rt_status rt_autocast_wrap(rt_module *inner, rt_precision p, rt_module **out) {
    if (!inner || !out || p < RT_PRECISION_FP32 || p > RT_PRECISION_FP16) {
        rt_module_destroy(inner);
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_autocast_wrap: %s", !inner ? "the module is NULL"
                            : !out ? "out is NULL" : "the precision is not fp32, bf16 or fp16");
    }
    *out = NULL;
    rt_autocast *a = (rt_autocast *)rt_module_alloc(sizeof *a, &rt_autocast_class);
    if (!a) {
        rt_module_destroy(inner);
        return rt_error_last_status();
    }
    a->precision = p;
    a->base.training = inner->training;
    rt_status st = rt_module_add_child(&a->base, "", inner);
    if (st != RT_OK) {
        rt_module_destroy(&a->base);
        return st;
    }
    *out = &a->base;
    return RT_OK;
}

rt_precision rt_autocast_precision(const rt_module *m) {
    return m && rt_module_is(m, &rt_autocast_class) ? ((const rt_autocast *)m)->precision : RT_PRECISION_FP32;
}

char *rt_precision_describe(rt_precision p, char *buf, size_t n) {
    if (!buf || !n) return buf;
    if (p == RT_PRECISION_FP32) {
        snprintf(buf, n, "precision fp32: f32 compute and storage everywhere");
        return buf;
    }
    const char *d = rt_precision_str(p);
    /* the cpu backend's answer: this text describes the CPU build */
    bool bf16_conv = rt_backend_get(RT_DEVICE_CPU)->conv_bf16_available();
    const char *compute = p == RT_PRECISION_FP16 ? "f16 compute: none (oneDNN has no f16 kernel on CPUs; f32 compute)"
                          : bf16_conv ? "bf16 compute: conv, and batch norm inside residual blocks (oneDNN; "
                                        "bf16 activations and gradients there); f32 compute: linear, the rest"
                                      : "bf16 compute: none (oneDNN has no bf16 kernel on this CPU: "
                                        "storage only, f32 compute)";
    snprintf(buf, n, "precision %s: %s; %s storage: saved activations, activation gradients; f32: master weights, "
             ".grad, optimizer, losses, batch-norm statistics, reductions, the couplings, stored outputs and "
             "rebuild compute of reversible sequences", d, compute, d);
    return buf;
}
