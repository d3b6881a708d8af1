/* Thread-local oneDNN engine, stream and primitive cache; see cache.h and
 * dnnl_common.h. */
#include "kernels/dnnl_common.h"

#include <oneapi/dnnl/dnnl_debug.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/mem.h"
#include "core/tensor.h"

/* Per-thread state: the documented exception to the no-global-state rule. */
typedef struct rt_dnnl_tls {
    dnnl_engine_t engine;
    dnnl_stream_t stream;
    rt_dnnl_entry **entries;
    size_t n, cap;
    uint64_t tick;
    int64_t created; /* primitives created, monotonic */
    int64_t weight_reorders; /* input weight reorders executed, monotonic */
} rt_dnnl_tls;

static _Thread_local rt_dnnl_tls rt_dnnl_state;

/* Process-wide pthread key whose destructor releases a thread's cache when
 * the thread exits. Written once under pthread_once, read-only afterwards. */
static pthread_once_t rt_dnnl_key_once = PTHREAD_ONCE_INIT;
static pthread_key_t rt_dnnl_exit_key;
static int rt_dnnl_exit_key_ok;

static void rt_dnnl_thread_exit(void *p) {
    (void)p;
    rt_kernels_release_cache();
}

static void rt_dnnl_make_exit_key(void) {
    rt_dnnl_exit_key_ok = pthread_key_create(&rt_dnnl_exit_key, rt_dnnl_thread_exit) == 0;
}

rt_status rt_dnnl_fail(dnnl_status_t st, const char *step, const char *desc) {
    return rt_error_set(RT_ERR_BACKEND, "oneDNN %s failed for %s: %s", step, desc,
                        dnnl_status2str(st));
}

rt_status rt_dnnl_engine(dnnl_engine_t *out) {
    rt_dnnl_tls *t = &rt_dnnl_state;
    if (!t->engine) {
        dnnl_status_t st = dnnl_engine_create(&t->engine, dnnl_cpu, 0);
        if (st != dnnl_success) {
            t->engine = NULL;
            return rt_dnnl_fail(st, "dnnl_engine_create", "the CPU engine");
        }
        st = dnnl_stream_create(&t->stream, t->engine, dnnl_stream_default_flags);
        if (st != dnnl_success) {
            dnnl_engine_destroy(t->engine);
            t->engine = NULL;
            t->stream = NULL;
            return rt_dnnl_fail(st, "dnnl_stream_create", "the CPU stream");
        }
        pthread_once(&rt_dnnl_key_once, rt_dnnl_make_exit_key);
        if (rt_dnnl_exit_key_ok) pthread_setspecific(rt_dnnl_exit_key, (void *)t);
    }
    *out = t->engine;
    return RT_OK;
}

void rt_dnnl_key_init(rt_dnnl_key *k, rt_dnnl_kind kind) {
    memset(k, 0, sizeof *k);
    k->v[0] = (int64_t)kind;
    k->len = 1;
}

void rt_dnnl_key_push(rt_dnnl_key *k, int64_t v) {
    /* Keys are built by this module's own code with fixed field counts. */
    if (k->len < RT_DNNL_KEY_LEN) k->v[k->len++] = v;
}

void rt_dnnl_key_push_f32(rt_dnnl_key *k, float v) {
    uint32_t bits;
    memcpy(&bits, &v, sizeof bits);
    rt_dnnl_key_push(k, (int64_t)bits);
}

static uint64_t rt_dnnl_key_hash(const rt_dnnl_key *k) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a over the words */
    for (int i = 0; i < k->len; i++) {
        uint64_t w = (uint64_t)k->v[i];
        for (int b = 0; b < 8; b++) {
            h ^= (w >> (8 * b)) & 0xffu;
            h *= 1099511628211ull;
        }
    }
    return h;
}

static int rt_dnnl_key_eq(const rt_dnnl_key *a, const rt_dnnl_key *b) {
    return a->len == b->len && memcmp(a->v, b->v, sizeof(int64_t) * (size_t)a->len) == 0;
}

rt_dnnl_entry *rt_dnnl_cache_find(const rt_dnnl_key *key) {
    rt_dnnl_tls *t = &rt_dnnl_state;
    uint64_t h = rt_dnnl_key_hash(key);
    for (size_t i = 0; i < t->n; i++) {
        rt_dnnl_entry *e = t->entries[i];
        if (e->hash == h && rt_dnnl_key_eq(&e->key, key)) {
            e->last_use = ++t->tick;
            return e;
        }
    }
    return NULL;
}

static void rt_dnnl_entry_destroy(rt_dnnl_entry *e) {
    if (!e) return;
    for (int i = 0; i < e->nargs; i++) {
        rt_dnnl_arg *a = &e->args[i];
        if (a->reorder) dnnl_primitive_destroy(a->reorder);
        if (a->reorder_scratch) dnnl_memory_destroy(a->reorder_scratch);
        if (a->prim) dnnl_memory_destroy(a->prim);
        if (a->user) dnnl_memory_destroy(a->user);
        if (a->user_spill) dnnl_memory_destroy(a->user_spill);
    }
    if (e->scratch) dnnl_memory_destroy(e->scratch);
    if (e->prim) dnnl_primitive_destroy(e->prim);
    if (e->hint) dnnl_primitive_desc_destroy(e->hint);
    free(e);
}

void rt_kernels_release_cache(void) {
    rt_dnnl_tls *t = &rt_dnnl_state;
    for (size_t i = 0; i < t->n; i++) rt_dnnl_entry_destroy(t->entries[i]);
    free(t->entries);
    t->entries = NULL;
    t->n = t->cap = 0;
    if (t->stream) dnnl_stream_destroy(t->stream);
    if (t->engine) dnnl_engine_destroy(t->engine);
    t->stream = NULL;
    t->engine = NULL;
    if (rt_dnnl_exit_key_ok) pthread_setspecific(rt_dnnl_exit_key, NULL);
}

size_t rt_kernels_cache_size(void) { return rt_dnnl_state.n; }

int64_t rt_kernels_primitives_created(void) { return rt_dnnl_state.created; }

int64_t rt_kernels_weight_reorders(void) { return rt_dnnl_state.weight_reorders; }

/* Interned (caller format, primitive format) pairs of reordered weights,
 * process-wide: a weight's storage is shared by every thread, so the tag of
 * its cached copy (rt_dnnl_arg.cache_tag) must mean the same format on all
 * of them. A documented exception to the no-global-state rule, like
 * rt_mem_intern's table: entries are only added (one per distinct format
 * pair of a process, a few dozen), under one mutex, at primitive creation. */
static pthread_mutex_t rt_dnnl_fmt_lock = PTHREAD_MUTEX_INITIALIZER;
static dnnl_memory_desc_t (*rt_dnnl_fmts)[2];
static size_t rt_dnnl_nfmt, rt_dnnl_capfmt;

/* The tag of the pair: "DNNL" in the high word, 1 + the pair's index in
 * the low one; 0 when the table cannot grow (the weights are then not
 * cached, which is only slower). */
static uint64_t rt_dnnl_format_tag(const dnnl_memory_desc_t *user, const dnnl_memory_desc_t *prim) {
    uint64_t tag = 0;
    pthread_mutex_lock(&rt_dnnl_fmt_lock);
    for (size_t i = 0; i < rt_dnnl_nfmt && !tag; i++)
        if (dnnl_memory_desc_equal(&rt_dnnl_fmts[i][0], user) && dnnl_memory_desc_equal(&rt_dnnl_fmts[i][1], prim))
            tag = i + 1;
    if (!tag) {
        if (rt_dnnl_nfmt == rt_dnnl_capfmt) {
            size_t cap = rt_dnnl_capfmt ? 2 * rt_dnnl_capfmt : 32;
            void *n = realloc(rt_dnnl_fmts, cap * sizeof *rt_dnnl_fmts);
            if (n) {
                rt_dnnl_fmts = n;
                rt_dnnl_capfmt = cap;
            }
        }
        if (rt_dnnl_nfmt < rt_dnnl_capfmt) {
            rt_dnnl_fmts[rt_dnnl_nfmt][0] = *user;
            rt_dnnl_fmts[rt_dnnl_nfmt][1] = *prim;
            tag = ++rt_dnnl_nfmt;
        }
    }
    pthread_mutex_unlock(&rt_dnnl_fmt_lock);
    return tag ? (UINT64_C(0x444e4e4c) << 32) | tag : 0;
}

rt_status rt_dnnl_attr_user_scratchpad(dnnl_primitive_attr_t *out, const char *desc) {
    *out = NULL;
    dnnl_status_t st = dnnl_primitive_attr_create(out);
    if (st != dnnl_success) {
        *out = NULL;
        return rt_dnnl_fail(st, "dnnl_primitive_attr_create", desc);
    }
    st = dnnl_primitive_attr_set_scratchpad_mode(*out, dnnl_scratchpad_mode_user);
    if (st != dnnl_success) {
        dnnl_primitive_attr_destroy(*out);
        *out = NULL;
        return rt_dnnl_fail(st, "dnnl_primitive_attr_set_scratchpad_mode", desc);
    }
    return RT_OK;
}

dnnl_format_tag_t rt_dnnl_plain_tag(int ndims) {
    switch (ndims) {
    case 1: return dnnl_a;
    case 2: return dnnl_ab;
    case 3: return dnnl_abc;
    case 4: return dnnl_abcd;
    case 5: return dnnl_abcde;
    case 6: return dnnl_abcdef;
    default: return dnnl_format_tag_undef;
    }
}

rt_status rt_dnnl_md(dnnl_memory_desc_t *md, int ndims, const int64_t *dims, int any,
                     const char *desc) {
    dnnl_dims_t d;
    for (int i = 0; i < ndims; i++) d[i] = dims[i];
    dnnl_status_t st = dnnl_memory_desc_init_by_tag(md, ndims, d, dnnl_f32,
                                                    any ? dnnl_format_tag_any
                                                        : rt_dnnl_plain_tag(ndims));
    if (st != dnnl_success) return rt_dnnl_fail(st, "dnnl_memory_desc_init_by_tag", desc);
    return RT_OK;
}

rt_status rt_dnnl_md_tag(dnnl_memory_desc_t *md, int ndims, const int64_t *dims, dnnl_format_tag_t tag,
                         const char *desc) {
    dnnl_dims_t d;
    for (int i = 0; i < ndims; i++) d[i] = dims[i];
    dnnl_status_t st = dnnl_memory_desc_init_by_tag(md, ndims, d, dnnl_f32, tag);
    if (st != dnnl_success) return rt_dnnl_fail(st, "dnnl_memory_desc_init_by_tag", desc);
    return RT_OK;
}

rt_status rt_dnnl_layout_check(rt_layout layout, int64_t c, const char *what, const char *desc) {
    if (layout != RT_LAYOUT_PLAIN && layout != RT_LAYOUT_BLOCKED)
        return rt_error_set(RT_ERR_INVALID_ARG, "%s: unknown layout value %d for %s", desc,
                            (int)layout, what);
    if (layout == RT_LAYOUT_BLOCKED && c % rt_layout_block() != 0)
        return rt_error_set(RT_ERR_INVALID_ARG,
                            "%s: blocked layout for %s needs the channel count (%lld) to be a "
                            "multiple of %d",
                            desc, what, (long long)c, rt_layout_block());
    return RT_OK;
}

rt_status rt_dnnl_weight_layout_check(rt_layout layout, int64_t o, int64_t i, int64_t groups, const char *desc) {
    if (layout == RT_LAYOUT_PLAIN) return RT_OK;
    if (layout != RT_LAYOUT_WEIGHT_BLOCKED)
        return rt_error_set(RT_ERR_INVALID_ARG, "%s: unknown weight layout value %d (plain OIHW or "
                            "RT_LAYOUT_WEIGHT_BLOCKED)", desc, (int)layout);
    if (groups != 1 || !rt_layout_weight_blockable(o, i))
        return rt_error_set(RT_ERR_INVALID_ARG, "%s: the blocked weight layout needs groups 1 and output and input "
                            "channels (%lld, %lld) that are multiples of %d", desc, (long long)o, (long long)i,
                            rt_layout_block());
    return RT_OK;
}

rt_status rt_dnnl_md_layout(dnnl_memory_desc_t *md, int ndims, const int64_t *dims,
                            rt_layout layout, const char *desc) {
    if (layout == RT_LAYOUT_PLAIN) return rt_dnnl_md(md, ndims, dims, 0, desc);
    if (layout == RT_LAYOUT_WEIGHT_BLOCKED) {
        if (ndims != 4 && ndims != 5)
            return rt_error_set(RT_ERR_INVALID_ARG, "%s: the blocked weight layout needs a 4-D or 5-D weight "
                                "(got %d-D)", desc, ndims);
        RT_TRY(rt_dnnl_weight_layout_check(layout, dims[0], dims[1], 1, desc));
        bool b16 = rt_layout_block() == 16;
        dnnl_format_tag_t tag = ndims == 4 ? (b16 ? dnnl_OIhw16i16o : dnnl_OIhw8i8o)
                                           : (b16 ? dnnl_OIdhw16i16o : dnnl_OIdhw8i8o);
        dnnl_dims_t d;
        for (int i = 0; i < ndims; i++) d[i] = dims[i];
        dnnl_status_t st = dnnl_memory_desc_init_by_tag(md, ndims, d, dnnl_f32, tag);
        if (st != dnnl_success) return rt_dnnl_fail(st, "dnnl_memory_desc_init_by_tag (blocked weight)", desc);
        return RT_OK;
    }
    /* channels-last: only where the caller's kernel reads it (convolution,
     * reorder); rt_dnnl_layout_check keeps refusing it for the others */
    if (layout != RT_LAYOUT_CHANNELS_LAST) RT_TRY(rt_dnnl_layout_check(layout, dims[1], "a tensor", desc));
    if (ndims != 4 && ndims != 5)
        return rt_error_set(RT_ERR_INVALID_ARG, "%s: the %s layout needs a 4-D or 5-D tensor (got %d-D)", desc,
                            layout == RT_LAYOUT_BLOCKED ? "blocked" : "channels-last", ndims);
    dnnl_format_tag_t tag = layout == RT_LAYOUT_CHANNELS_LAST ? (ndims == 4 ? dnnl_nhwc : dnnl_ndhwc)
                            : ndims == 4 ? (rt_layout_block() == 16 ? dnnl_nChw16c : dnnl_nChw8c)
                                         : (rt_layout_block() == 16 ? dnnl_nCdhw16c : dnnl_nCdhw8c);
    dnnl_dims_t d;
    for (int i = 0; i < ndims; i++) d[i] = dims[i];
    dnnl_status_t st = dnnl_memory_desc_init_by_tag(md, ndims, d, dnnl_f32, tag);
    if (st != dnnl_success) return rt_dnnl_fail(st, "dnnl_memory_desc_init_by_tag (blocked)", desc);
    return RT_OK;
}

/* Creates a primitive from `pd`, counting it. */
static dnnl_status_t rt_dnnl_primitive_create(dnnl_primitive_t *p, const_dnnl_primitive_desc_t pd) {
    dnnl_status_t st = dnnl_primitive_create(p, pd);
    if (st == dnnl_success) rt_dnnl_state.created++;
    else *p = NULL;
    return st;
}

/* Scratchpad memory (no buffer) for `pd`; *mem stays NULL when none is needed. */
static dnnl_status_t rt_dnnl_scratch_mem(const_dnnl_primitive_desc_t pd, dnnl_engine_t eng,
                                         dnnl_memory_t *mem, size_t *bytes) {
    *mem = NULL;
    *bytes = 0;
    const dnnl_memory_desc_t *md = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    if (!md) return dnnl_success;
    size_t sz = dnnl_memory_desc_get_size(md);
    if (sz == 0) return dnnl_success;
    dnnl_status_t st = dnnl_memory_create(mem, md, eng, DNNL_MEMORY_NONE);
    if (st != dnnl_success) {
        *mem = NULL;
        return st;
    }
    *bytes = sz;
    return dnnl_success;
}

static rt_status rt_dnnl_cache_insert(rt_dnnl_entry *e) {
    rt_dnnl_tls *t = &rt_dnnl_state;
    if (t->n >= RT_KERNELS_CACHE_CAPACITY) { /* evict the least recently used */
        size_t victim = 0;
        for (size_t i = 1; i < t->n; i++)
            if (t->entries[i]->last_use < t->entries[victim]->last_use) victim = i;
        rt_dnnl_entry_destroy(t->entries[victim]);
        t->entries[victim] = t->entries[--t->n];
    }
    if (t->n == t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 64;
        rt_dnnl_entry **ne = realloc(t->entries, cap * sizeof *ne);
        if (!ne)
            return rt_error_set(RT_ERR_OOM, "out of memory growing the kernel cache for %s",
                                e->desc);
        t->entries = ne;
        t->cap = cap;
    }
    e->last_use = ++t->tick;
    t->entries[t->n++] = e;
    return RT_OK;
}

/* Chooses rt_dnnl_arg.spill for each reordered activation output (never
 * weights: their reorder buffer may be the weight cache's): the largest
 * reordered activation input whose buffer holds the output in the caller's
 * layout, when the primitive's layout of the output fits in the caller's
 * buffer. */
static rt_status rt_dnnl_plan_spills(rt_dnnl_entry *e, dnnl_engine_t eng, const char *desc) {
    for (int o = 0; o < e->nargs; o++) {
        rt_dnnl_arg *a = &e->args[o];
        if (!a->is_output || !a->prim || a->id == DNNL_ARG_DIFF_WEIGHTS || a->id == DNNL_ARG_DIFF_BIAS ||
            a->prim_bytes > a->user_bytes)
            continue;
        int best = -1;
        for (int i = 0; i < e->nargs; i++) {
            const rt_dnnl_arg *b = &e->args[i];
            if (b->is_output || !b->prim || b->id == DNNL_ARG_WEIGHTS || b->prim_bytes < a->user_bytes) continue;
            if (best < 0 || b->prim_bytes > e->args[best].prim_bytes) best = i;
        }
        if (best < 0) continue;
        const dnnl_memory_desc_t *umd = NULL;
        dnnl_status_t st = dnnl_memory_get_memory_desc(a->user, &umd);
        if (st == dnnl_success) st = dnnl_memory_create(&a->user_spill, umd, eng, DNNL_MEMORY_NONE);
        if (st != dnnl_success) {
            a->user_spill = NULL;
            return rt_dnnl_fail(st, "dnnl_memory_create (spill buffer)", desc);
        }
        a->spill = best;
    }
    return RT_OK;
}

rt_status rt_dnnl_entry_create(const rt_dnnl_key *key, const char *desc, dnnl_primitive_desc_t pd,
                               dnnl_primitive_desc_t hint, int nargs,
                               const rt_dnnl_argspec *specs, rt_dnnl_entry **out) {
    *out = NULL;
    rt_status rs = RT_OK;
    dnnl_status_t st = dnnl_success;
    dnnl_primitive_attr_t rattr = NULL;
    dnnl_primitive_desc_t rpd = NULL;
    dnnl_engine_t eng = NULL;
    rt_dnnl_entry *e = calloc(1, sizeof *e);
    if (!e) {
        rs = rt_error_set(RT_ERR_OOM, "out of memory creating a kernel cache entry for %s", desc);
        goto fail;
    }
    e->hint = hint;
    hint = NULL;
    e->key = *key;
    e->hash = rt_dnnl_key_hash(key);
    snprintf(e->desc, sizeof e->desc, "%s", desc);
    if (nargs > RT_DNNL_MAX_ARGS) {
        rs = rt_error_set(RT_ERR_INVALID_ARG, "internal: too many arguments for %s", desc);
        goto fail;
    }
    if ((rs = rt_dnnl_engine(&eng)) != RT_OK) goto fail;
    if ((st = rt_dnnl_primitive_create(&e->prim, pd)) != dnnl_success) {
        rs = rt_dnnl_fail(st, "dnnl_primitive_create", desc);
        goto fail;
    }
    if ((st = rt_dnnl_scratch_mem(pd, eng, &e->scratch, &e->scratch_bytes)) != dnnl_success) {
        rs = rt_dnnl_fail(st, "scratchpad memory creation", desc);
        goto fail;
    }
    e->nargs = nargs;
    for (int i = 0; i < nargs; i++) {
        rt_dnnl_arg *a = &e->args[i];
        a->id = specs[i].id;
        a->is_output = specs[i].is_output;
        a->spill = -1;
        const dnnl_memory_desc_t *pmd = dnnl_primitive_desc_query_md(pd, dnnl_query_exec_arg_md,
                                                                     a->id);
        if (!pmd || pmd->ndims == 0) {
            rs = rt_error_set(RT_ERR_BACKEND,
                              "oneDNN primitive for %s does not take argument %d (internal error)",
                              desc, a->id);
            goto fail;
        }
        if (a->id == DNNL_ARG_WORKSPACE) e->workspace_bytes = dnnl_memory_desc_get_size(pmd);
        const dnnl_memory_desc_t *umd = specs[i].user_md ? specs[i].user_md : pmd;
        a->user_bytes = dnnl_memory_desc_get_size(umd);
        if ((st = dnnl_memory_create(&a->user, umd, eng, DNNL_MEMORY_NONE)) != dnnl_success) {
            a->user = NULL;
            rs = rt_dnnl_fail(st, "dnnl_memory_create", desc);
            goto fail;
        }
        if (dnnl_memory_desc_equal(umd, pmd)) continue;
        /* The primitive chose another layout: cache a reorder to/from it. */
        a->prim_bytes = dnnl_memory_desc_get_size(pmd);
        if ((st = dnnl_memory_create(&a->prim, pmd, eng, DNNL_MEMORY_NONE)) != dnnl_success) {
            a->prim = NULL;
            rs = rt_dnnl_fail(st, "dnnl_memory_create (reorder buffer)", desc);
            goto fail;
        }
        if ((rs = rt_dnnl_attr_user_scratchpad(&rattr, desc)) != RT_OK) goto fail;
        st = a->is_output ? dnnl_reorder_primitive_desc_create(&rpd, pmd, eng, umd, eng, rattr)
                          : dnnl_reorder_primitive_desc_create(&rpd, umd, eng, pmd, eng, rattr);
        dnnl_primitive_attr_destroy(rattr);
        rattr = NULL;
        if (st != dnnl_success) {
            rpd = NULL;
            rs = rt_dnnl_fail(st, "reorder primitive descriptor creation", desc);
            goto fail;
        }
        if ((st = rt_dnnl_primitive_create(&a->reorder, rpd)) != dnnl_success) {
            rs = rt_dnnl_fail(st, "reorder primitive creation", desc);
            goto fail;
        }
        size_t rbytes = 0;
        if ((st = rt_dnnl_scratch_mem(rpd, eng, &a->reorder_scratch, &rbytes)) != dnnl_success) {
            rs = rt_dnnl_fail(st, "reorder scratchpad memory creation", desc);
            goto fail;
        }
        if (rbytes > e->scratch_bytes) e->scratch_bytes = rbytes;
        if (a->id == DNNL_ARG_WEIGHTS && !a->is_output) a->cache_tag = rt_dnnl_format_tag(umd, pmd);
        dnnl_primitive_desc_destroy(rpd);
        rpd = NULL;
    }
    if ((rs = rt_dnnl_plan_spills(e, eng, desc)) != RT_OK) goto fail;
    if ((rs = rt_dnnl_cache_insert(e)) != RT_OK) goto fail;
    if (pd) dnnl_primitive_desc_destroy(pd);
    *out = e;
    return RT_OK;
fail:
    if (rpd) dnnl_primitive_desc_destroy(rpd);
    if (hint) dnnl_primitive_desc_destroy(hint);
    if (pd) dnnl_primitive_desc_destroy(pd);
    rt_dnnl_entry_destroy(e);
    return rs;
}

static size_t rt_round64(size_t n) { return (n + 63) / 64 * 64; }

/* Layout of an entry's per-call TEMP block: the reorder buffers (off[i] for
 * argument i), then the shared scratchpad at *scratch_off. Returns the total. */
static size_t rt_dnnl_block_layout(const rt_dnnl_entry *e, int skip, size_t *off, size_t *scratch_off) {
    size_t total = 0;
    for (int i = 0; i < e->nargs; i++) {
        off[i] = total;
        if (e->args[i].prim && i != skip && e->args[i].spill < 0) total += rt_round64(e->args[i].prim_bytes);
    }
    *scratch_off = total;
    return total + rt_round64(e->scratch_bytes);
}

void rt_dnnl_plan_init(rt_kernel_plan *p) { memset(p, 0, sizeof *p); }

void rt_dnnl_plan_add(rt_kernel_plan *p, size_t bytes, const char *op) {
    /* the kernels add at most RT_KERNEL_PLAN_MAX_TEMP blocks (fixed code) */
    if (bytes == 0 || p->n_temp >= RT_KERNEL_PLAN_MAX_TEMP) return;
    p->temp[p->n_temp++] = (rt_kernel_temp){bytes, op};
}

rt_status rt_dnnl_plan_check(const rt_kernel_plan *p, const char *what) {
    if (!p) return rt_error_set(RT_ERR_INVALID_ARG, "%s: plan is NULL (pass the address of an rt_kernel_plan)", what);
    return RT_OK;
}

/* The argument served by the weight cache of w_cache: the input weights
 * when they are reordered and have a tag; -1 when none (or no w_cache). */
static int rt_dnnl_cached_arg(const rt_dnnl_entry *e, const rt_storage *w_cache) {
    if (!w_cache) return -1;
    for (int i = 0; i < e->nargs; i++)
        if (e->args[i].prim && e->args[i].cache_tag) return i;
    return -1;
}

void rt_dnnl_entry_plan_cached(rt_dnnl_entry *e, rt_storage *w_cache, rt_kernel_plan *p) {
    int ci = rt_dnnl_cached_arg(e, w_cache);
    size_t off[RT_DNNL_MAX_ARGS], scratch_off;
    size_t total = rt_dnnl_block_layout(e, ci, off, &scratch_off);
    p->entry = e;
    for (int i = 0; i < e->nargs; i++) {
        const rt_dnnl_arg *a = &e->args[i];
        if (!a->prim || i == ci || a->spill >= 0) continue;
        size_t b = rt_round64(a->prim_bytes);
        switch (a->id) {
        case DNNL_ARG_SRC:
        case DNNL_ARG_DIFF_SRC: p->src_reorder_bytes += b; break;
        case DNNL_ARG_WEIGHTS:
        case DNNL_ARG_DIFF_WEIGHTS: p->weights_reorder_bytes += b; break;
        default: p->dst_reorder_bytes += b; break; /* DST, DIFF_DST (others are never reordered) */
        }
    }
    if (ci >= 0) {
        p->weights_cached = 1;
        p->weights_cache_tag = e->args[ci].cache_tag;
        p->weights_cache_op = e->desc;
        if (!rt_storage_derived_find(w_cache, e->args[ci].cache_tag)) p->weights_cache_bytes = e->args[ci].prim_bytes;
    }
    p->scratchpad_bytes = rt_round64(e->scratch_bytes);
    if (e->workspace_bytes) p->workspace_bytes = e->workspace_bytes;
    /* Same bytes and op name as rt_dnnl_entry_exec's block. */
    rt_dnnl_plan_add(p, total, e->desc);
}

void rt_dnnl_entry_plan(rt_dnnl_entry *e, rt_kernel_plan *p) { rt_dnnl_entry_plan_cached(e, NULL, p); }

rt_status rt_dnnl_entry_exec(rt_dnnl_entry *e, void *const *ptrs) { return rt_dnnl_entry_exec_cached(e, ptrs, NULL); }

rt_status rt_dnnl_entry_exec_cached(rt_dnnl_entry *e, void *const *ptrs, rt_storage *w_cache) {
    rt_dnnl_tls *t = &rt_dnnl_state;
    /* The cached weights: found, or added here (before the TEMP block, as
     * the plan says) and filled by the weights' reorder below. */
    int ci = rt_dnnl_cached_arg(e, w_cache);
    rt_storage_derived *wd = NULL;
    int fresh = 0;
    if (ci >= 0 && !(wd = rt_storage_derived_find(w_cache, e->args[ci].cache_tag))) {
        const char *prev = rt_mem_set_op(e->desc);
        rt_status rs = rt_storage_derived_add(w_cache, e->args[ci].cache_tag, e->args[ci].prim_bytes, &wd);
        rt_mem_set_op(prev);
        if (rs != RT_OK) return rs;
        fresh = 1;
    }
    /* One TEMP block: the reorder buffers, then the shared scratchpad. */
    size_t off[RT_DNNL_MAX_ARGS], scratch_off;
    size_t total = rt_dnnl_block_layout(e, ci, off, &scratch_off);
    char *block = NULL;
    if (total > 0) {
        const char *prev = rt_mem_set_op(e->desc);
        rt_status rs = rt_mem_alloc(total, RT_MEM_TEMP, (void **)&block);
        rt_mem_set_op(prev);
        if (rs != RT_OK) {
            if (fresh) rt_storage_derived_drop(w_cache, e->args[ci].cache_tag);
            return rs;
        }
    }
    rt_status rs = RT_OK;
    dnnl_status_t st = dnnl_success;
    void *scratch = e->scratch_bytes ? block + scratch_off : NULL;
    dnnl_exec_arg_t margs[RT_DNNL_MAX_ARGS + 1];
    int nm = 0;
    for (int i = 0; i < e->nargs; i++) {
        rt_dnnl_arg *a = &e->args[i];
        if ((st = dnnl_memory_set_data_handle(a->user, ptrs[i])) != dnnl_success) goto dnnl_fail;
        if (a->prim) {
            void *buf = i == ci ? wd->data : a->spill >= 0 ? ptrs[i] : block + off[i];
            if ((st = dnnl_memory_set_data_handle(a->prim, buf)) != dnnl_success) goto dnnl_fail;
            if (a->spill >= 0 &&
                (st = dnnl_memory_set_data_handle(a->user_spill, block + off[a->spill])) != dnnl_success)
                goto dnnl_fail;
            if (a->reorder_scratch &&
                (st = dnnl_memory_set_data_handle(a->reorder_scratch, scratch)) != dnnl_success)
                goto dnnl_fail;
        }
        margs[nm++] = (dnnl_exec_arg_t){a->id, a->prim ? a->prim : a->user};
    }
    if (e->scratch) {
        if ((st = dnnl_memory_set_data_handle(e->scratch, scratch)) != dnnl_success) goto dnnl_fail;
        margs[nm++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, e->scratch};
    }
    for (int pass = 0; pass < 3; pass++) {
        /* pass 0: input reorders, 1: the primitive, 2: output reorders */
        if (pass == 1) {
            if ((st = dnnl_primitive_execute(e->prim, t->stream, nm, margs)) != dnnl_success)
                goto dnnl_fail;
            continue;
        }
        for (int i = 0; i < e->nargs; i++) {
            rt_dnnl_arg *a = &e->args[i];
            if (!a->reorder || a->is_output != (pass == 2) || (i == ci && !fresh)) continue;
            dnnl_exec_arg_t rargs[3];
            int nr = 0;
            rargs[nr++] = (dnnl_exec_arg_t){DNNL_ARG_FROM, a->is_output ? a->prim : a->user};
            rargs[nr++] = (dnnl_exec_arg_t){DNNL_ARG_TO, !a->is_output ? a->prim : a->spill >= 0 ? a->user_spill : a->user};
            if (a->reorder_scratch)
                rargs[nr++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, a->reorder_scratch};
            if ((st = dnnl_primitive_execute(a->reorder, t->stream, nr, rargs)) != dnnl_success)
                goto dnnl_fail;
            if (a->spill >= 0) { /* the converted output is in the spent input's buffer: back to the caller's */
                if ((st = dnnl_stream_wait(t->stream)) != dnnl_success) goto dnnl_fail;
                memcpy(ptrs[i], block + off[a->spill], a->user_bytes);
            }
            if (a->id == DNNL_ARG_WEIGHTS) t->weight_reorders++;
        }
    }
    if ((st = dnnl_stream_wait(t->stream)) != dnnl_success) goto dnnl_fail;
    goto done;
dnnl_fail:
    rs = rt_dnnl_fail(st, "execution", e->desc);
    if (fresh) rt_storage_derived_drop(w_cache, e->args[ci].cache_tag);
done:
    if (block) rt_mem_free(block, total, RT_MEM_TEMP);
    return rs;
}
