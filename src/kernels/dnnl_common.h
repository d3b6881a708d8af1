/* Internal helpers shared by the oneDNN-backed kernels (not a public header:
 * only the .c files of src/kernels include it). See cache.h for the caching policy.
 *
 * An entry bundles one main primitive with its execution arguments. Each
 * argument has a "user" memory object in the caller's layout (plain PyTorch,
 * or blocked nChw{B}c / nCdhw{B}c per the shape's layout fields, layout.h)
 * and, when the primitive prefers another layout (e.g. blocked nChw16c for a
 * convolution created with format_tag_any, called with plain data), a
 * "prim" memory object plus a
 * cached reorder primitive between the two. Memory objects are created
 * without a buffer (DNNL_MEMORY_NONE); every call points them at the caller's
 * buffers and at one RT_MEM_TEMP block that holds the reorder temporaries and
 * the (user-mode) scratchpad, freed before the call returns. */
#ifndef RT_KERNELS_DNNL_COMMON_H
#define RT_KERNELS_DNNL_COMMON_H

#include <oneapi/dnnl/dnnl.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "kernels/cache.h"
#include "kernels/layout.h"
#include "kernels/plan.h"

/* Kinds of cached kernels (first word of every key). */
typedef enum rt_dnnl_kind {
    RT_DNNL_CONV_FWD = 1,
    RT_DNNL_CONV_BWD_DATA,
    RT_DNNL_CONV_BWD_WEIGHTS,
    RT_DNNL_MAXPOOL_FWD_TRAIN,
    RT_DNNL_MAXPOOL_FWD_INFER,
    RT_DNNL_MAXPOOL_BWD,
    RT_DNNL_AVGPOOL_FWD,
    RT_DNNL_AVGPOOL_BWD,
    RT_DNNL_BN_FWD_TRAIN,
    RT_DNNL_BN_FWD_EVAL,
    RT_DNNL_BN_BWD,
    RT_DNNL_RELU_FWD,
    RT_DNNL_RELU_BWD,
    RT_DNNL_REORDER,
    RT_DNNL_DECONV_FWD,
    RT_DNNL_DECONV_BWD_DATA,
    RT_DNNL_DECONV_BWD_WEIGHTS,
} rt_dnnl_kind;

#define RT_DNNL_KEY_LEN 32
#define RT_DNNL_MAX_ARGS 10
#define RT_DNNL_DESC_LEN 512

/* A cache key: v[0] is the kind, the rest the shape's fields written out one
 * by one (never memcpy of a struct, whose padding bytes are undefined);
 * unused words stay zero. Start from rt_dnnl_key_init. */
typedef struct rt_dnnl_key {
    int64_t v[RT_DNNL_KEY_LEN];
    int len;
} rt_dnnl_key;

void rt_dnnl_key_init(rt_dnnl_key *k, rt_dnnl_kind kind);
void rt_dnnl_key_push(rt_dnnl_key *k, int64_t v);
void rt_dnnl_key_push_f32(rt_dnnl_key *k, float v); /* pushes the bit pattern */

/* What an entry's argument is: oneDNN arg id, direction and the caller's
 * memory descriptor (NULL: the caller's buffer already has the primitive's
 * own layout, e.g. an opaque workspace). */
typedef struct rt_dnnl_argspec {
    int id;
    int is_output;
    const dnnl_memory_desc_t *user_md;
} rt_dnnl_argspec;

typedef struct rt_dnnl_arg {
    int id;
    int is_output;
    dnnl_memory_t user;        /* caller layout, handle set per call */
    dnnl_memory_t prim;        /* primitive layout; NULL when equal to user */
    dnnl_primitive_t reorder;  /* user->prim (input) or prim->user (output) */
    dnnl_memory_t reorder_scratch; /* NULL when the reorder needs none */
    size_t prim_bytes;
    /* Input weights reordered into the primitive's format: the interned
     * (caller format, primitive format) pair, the tag of the copy the
     * weight cache keeps with the storage (rt_dnnl_entry_plan_cached);
     * 0 for every other argument, or when interning failed (no caching). */
    uint64_t cache_tag;
    /* An output whose primitive format fits in the caller's buffer (no
     * padding, same element type) is computed there, converted into the
     * reorder buffer of input argument `spill` (free once the primitive has
     * run) and copied back: the call's TEMP block then holds one activation
     * reorder buffer, not two (a channels-last convolution of plain tensors:
     * 3 → 2 copies alive at its peak). -1: the output has its own buffer.
     * user_spill: the caller's layout over that input buffer. */
    int spill;
    dnnl_memory_t user_spill;
    size_t user_bytes;
} rt_dnnl_arg;

typedef struct rt_dnnl_entry {
    rt_dnnl_key key;
    uint64_t hash;
    uint64_t last_use;
    char desc[RT_DNNL_DESC_LEN];               /* "conv2d forward n=.. c_in=.." for messages */
    dnnl_primitive_t prim;
    dnnl_primitive_desc_t hint;   /* owned forward pd used as hint, or NULL */
    dnnl_memory_t scratch;        /* main primitive's scratchpad, or NULL */
    size_t scratch_bytes;         /* max scratchpad over main + reorders */
    size_t workspace_bytes;       /* size of the DNNL_ARG_WORKSPACE md, if any */
    int nargs;
    rt_dnnl_arg args[RT_DNNL_MAX_ARGS];
} rt_dnnl_entry;

/* This thread's CPU engine (created on first use). */
rt_status rt_dnnl_engine(dnnl_engine_t *out);

/* Returns the cached entry for `key` (and marks it used) or NULL. */
rt_dnnl_entry *rt_dnnl_cache_find(const rt_dnnl_key *key);

/* Creates an attr with dnnl_scratchpad_mode_user (caller destroys it). */
rt_status rt_dnnl_attr_user_scratchpad(dnnl_primitive_attr_t *out, const char *desc);

/* Builds an entry from a primitive descriptor `pd` and inserts it into the
 * cache. Takes ownership of `pd` (always destroyed) and of `hint` (kept in
 * the entry, or destroyed on failure); both may be NULL on the error path of
 * the caller. On failure returns RT_ERR_BACKEND naming `desc`. */
rt_status rt_dnnl_entry_create(const rt_dnnl_key *key, const char *desc, dnnl_primitive_desc_t pd,
                               dnnl_primitive_desc_t hint, int nargs,
                               const rt_dnnl_argspec *specs, rt_dnnl_entry **out);

/* Runs an entry: ptrs[i] is the caller's buffer for e->args[i] (inputs are
 * only read; the const is cast away because oneDNN handles are void*). */
rt_status rt_dnnl_entry_exec(rt_dnnl_entry *e, void *const *ptrs);

/* Adds the entry to a plan (plan.h): sets p->entry, the block's parts
 * (reorder buffers by argument side, scratchpad) and appends the one TEMP
 * block rt_dnnl_entry_exec allocates (none when it needs no bytes) after
 * the blocks already in p->temp. The caller zeroed *p first
 * (rt_dnnl_plan_init) and added any block allocated before it. */
void rt_dnnl_entry_plan(rt_dnnl_entry *e, rt_kernel_plan *p);

/* The same with the weight cache (plan.h weights_cached): when w_cache is
 * non-NULL and the entry reorders its input weights, the weights come from
 * the copy w_cache keeps for the entry's format (made by execute when
 * absent: p->weights_cache_bytes) and the TEMP block holds no weights
 * buffer. A NULL w_cache is rt_dnnl_entry_plan. */
void rt_dnnl_entry_plan_cached(rt_dnnl_entry *e, struct rt_storage *w_cache, rt_kernel_plan *p);

/* rt_dnnl_entry_exec with the weight cache of w_cache (NULL: none), as
 * planned by rt_dnnl_entry_plan_cached: a missing copy is added and filled
 * by the weights' reorder before the TEMP block is allocated, a present one
 * is used as it is. On failure the copy added by this call is dropped. */
rt_status rt_dnnl_entry_exec_cached(rt_dnnl_entry *e, void *const *ptrs, struct rt_storage *w_cache);

/* Zeroes *p (no entry, no blocks). */
void rt_dnnl_plan_init(rt_kernel_plan *p);

/* Appends a TEMP block of `bytes` (recorded under `op`, NULL: the caller's)
 * to p->temp; nothing when bytes is 0. */
void rt_dnnl_plan_add(rt_kernel_plan *p, size_t bytes, const char *op);

/* RT_ERR_INVALID_ARG naming `what` when p is NULL. */
rt_status rt_dnnl_plan_check(const rt_kernel_plan *p, const char *what);

/* Records "oneDNN <step> failed for <desc>: <status>" and returns RT_ERR_BACKEND. */
rt_status rt_dnnl_fail(dnnl_status_t st, const char *step, const char *desc);

/* Plain row-major tag for `ndims` dimensions (a, ab, abc, ... abcdef). */
dnnl_format_tag_t rt_dnnl_plain_tag(int ndims);

/* Initialises an f32 md with the given oneDNN format tag (e.g. dnnl_ndhwc). */
rt_status rt_dnnl_md_tag(dnnl_memory_desc_t *md, int ndims, const int64_t *dims, dnnl_format_tag_t tag,
                         const char *desc);
/* Initialises a plain f32 md, or a format_any one when `any` is set. */
rt_status rt_dnnl_md(dnnl_memory_desc_t *md, int ndims, const int64_t *dims, int any,
                     const char *desc);

/* Initialises an f32 md of `layout` (see layout.h): plain is
 * rt_dnnl_md(..., any=0); blocked needs ndims 4 or 5 and dims[1] % B == 0;
 * channels-last (nhwc / ndhwc) needs ndims 4 or 5;
 * weight-blocked (OIhw{B}i{B}o / OIdhw{B}i{B}o) needs ndims 4 or 5 and
 * dims[0] % B == dims[1] % B == 0 (RT_ERR_INVALID_ARG otherwise, message
 * naming `desc`). */
rt_status rt_dnnl_md_layout(dnnl_memory_desc_t *md, int ndims, const int64_t *dims,
                            rt_layout layout, const char *desc);

/* Checks a layout field: a known value and, for blocked, `c` a multiple of
 * rt_layout_block(). `what` names the tensor(s) in the message. Returns
 * RT_OK or RT_ERR_INVALID_ARG with the message set. */
rt_status rt_dnnl_layout_check(rt_layout layout, int64_t c, const char *what, const char *desc);
/* Checks a convolution weight's layout field: plain, or weight-blocked with
 * groups 1 and o, i multiples of rt_layout_block(). RT_OK or
 * RT_ERR_INVALID_ARG with the message set. */
rt_status rt_dnnl_weight_layout_check(rt_layout layout, int64_t o, int64_t i, int64_t groups, const char *desc);

#endif
