/* Layout reorders on oneDNN; see layout.h. */
#include "kernels/layout.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "kernels/dnnl_common.h"

static const char *layout_name(rt_layout l) {
    return l == RT_LAYOUT_PLAIN              ? "plain"
           : l == RT_LAYOUT_BLOCKED          ? "blocked"
           : l == RT_LAYOUT_WEIGHT_BLOCKED   ? "weight-blocked"
           : l == RT_LAYOUT_CHANNELS_LAST    ? "channels-last"
                                             : "unknown";
}

/* Checks a reorder's arguments and writes its description. */
static rt_status reorder_check(int ndim, const int64_t *shape, rt_layout from, rt_layout to, char *desc) {
    if (!shape || (ndim != 4 && ndim != 5))
        return rt_error_set(RT_ERR_INVALID_ARG,
                            "reorder_layout: need a 4-D or 5-D shape (got ndim=%d%s)", ndim,
                            shape ? "" : ", shape NULL");
    int n = snprintf(desc, RT_DNNL_DESC_LEN, "reorder_layout %s->%s [", layout_name(from), layout_name(to));
    for (int i = 0; i < ndim && n > 0 && n < RT_DNNL_DESC_LEN; i++)
        n += snprintf(desc + n, (size_t)(RT_DNNL_DESC_LEN - n), "%s%lld", i ? "," : "",
                      (long long)shape[i]);
    if (n > 0 && n < RT_DNNL_DESC_LEN) snprintf(desc + n, (size_t)(RT_DNNL_DESC_LEN - n), "]");
    bool weight = from == RT_LAYOUT_WEIGHT_BLOCKED || to == RT_LAYOUT_WEIGHT_BLOCKED;
    if ((unsigned)from > RT_LAYOUT_CHANNELS_LAST || (unsigned)to > RT_LAYOUT_CHANNELS_LAST)
        return rt_error_set(RT_ERR_INVALID_ARG, "%s: unknown layout value (%d -> %d)", desc,
                            (int)from, (int)to);
    if (weight && (from == RT_LAYOUT_BLOCKED || to == RT_LAYOUT_BLOCKED || from == RT_LAYOUT_CHANNELS_LAST ||
                   to == RT_LAYOUT_CHANNELS_LAST))
        return rt_error_set(RT_ERR_INVALID_ARG, "%s: a weight converts between plain and weight-blocked only", desc);
    if (shape[0] < 0)
        return rt_error_set(RT_ERR_INVALID_ARG, "%s: N must be >= 0", desc);
    for (int i = 1; i < ndim; i++)
        if (shape[i] < 1)
            return rt_error_set(RT_ERR_INVALID_ARG, "%s: C and spatial sizes must be >= 1",
                                desc);
    if ((from == RT_LAYOUT_BLOCKED || to == RT_LAYOUT_BLOCKED) && shape[1] % rt_layout_block())
        return rt_error_set(RT_ERR_INVALID_ARG,
                            "%s: the blocked layout needs C (%lld) to be a multiple of %d", desc,
                            (long long)shape[1], rt_layout_block());
    if (weight && !rt_layout_weight_blockable(shape[0], shape[1]))
        return rt_error_set(RT_ERR_INVALID_ARG,
                            "%s: the blocked weight layout needs O (%lld) and I (%lld) to be multiples of %d", desc,
                            (long long)shape[0], (long long)shape[1], rt_layout_block());
    return RT_OK;
}

rt_status rt_kernel_reorder_layout_plan(int ndim, const int64_t *shape, rt_layout from, rt_layout to,
                                        rt_kernel_plan *plan) {
    RT_TRY(rt_dnnl_plan_check(plan, "rt_kernel_reorder_layout_plan"));
    rt_dnnl_plan_init(plan);
    char desc[RT_DNNL_DESC_LEN];
    RT_TRY(reorder_check(ndim, shape, from, to, desc));
    if (shape[0] == 0 || from == to) return RT_OK; /* nothing, or a copy: no primitive, no TEMP */
    rt_dnnl_key key;
    rt_dnnl_key_init(&key, RT_DNNL_REORDER);
    rt_dnnl_key_push(&key, ndim);
    for (int i = 0; i < ndim; i++) rt_dnnl_key_push(&key, shape[i]);
    rt_dnnl_key_push(&key, from);
    rt_dnnl_key_push(&key, to);
    rt_dnnl_entry *e = rt_dnnl_cache_find(&key);
    if (!e) {
        dnnl_memory_desc_t smd, dmd;
        RT_TRY(rt_dnnl_md_layout(&smd, ndim, shape, from, desc));
        RT_TRY(rt_dnnl_md_layout(&dmd, ndim, shape, to, desc));
        dnnl_engine_t eng;
        RT_TRY(rt_dnnl_engine(&eng));
        dnnl_primitive_attr_t attr;
        RT_TRY(rt_dnnl_attr_user_scratchpad(&attr, desc));
        dnnl_primitive_desc_t pd;
        dnnl_status_t st = dnnl_reorder_primitive_desc_create(&pd, &smd, eng, &dmd, eng, attr);
        dnnl_primitive_attr_destroy(attr);
        if (st != dnnl_success)
            return rt_dnnl_fail(st, "reorder primitive descriptor creation", desc);
        rt_dnnl_argspec specs[2] = {{DNNL_ARG_FROM, 0, &smd}, {DNNL_ARG_TO, 1, &dmd}};
        RT_TRY(rt_dnnl_entry_create(&key, desc, pd, NULL, 2, specs, &e));
    }
    rt_dnnl_entry_plan(e, plan);
    return RT_OK;
}

rt_status rt_kernel_reorder_layout(int ndim, const int64_t *shape, rt_layout from, rt_layout to,
                                   const float *src, float *dst) {
    char desc[RT_DNNL_DESC_LEN];
    RT_TRY(reorder_check(ndim, shape, from, to, desc));
    if (!src || !dst)
        return rt_error_set(RT_ERR_INVALID_ARG, "%s: src and dst must both be non-NULL", desc);
    rt_kernel_plan p;
    RT_TRY(rt_kernel_reorder_layout_plan(ndim, shape, from, to, &p));
    if (!p.entry) { /* N == 0, or no layout change: a copy */
        size_t cnt = 1;
        for (int i = 0; i < ndim; i++) cnt *= (size_t)shape[i];
        if (cnt) memcpy(dst, src, cnt * sizeof(float));
        return RT_OK;
    }
    void *ptrs[2] = {(void *)src, dst};
    return rt_dnnl_entry_exec(p.entry, ptrs);
}

bool rt_layout_pads_much(int64_t c) {
    const int64_t b = rt_layout_block();
    return c >= 1 && 4 * ((c + b - 1) / b * b) > 5 * c;
}

bool rt_layout_pads(int64_t c) { return c >= 1 && c % rt_layout_block() != 0; }

bool rt_layout_weight_blockable(int64_t o, int64_t i) {
    const int64_t b = rt_layout_block();
    return o >= 1 && i >= 1 && o % b == 0 && i % b == 0;
}

int rt_layout_block(void) {
    /* Asked once: index arithmetic calls this per element in places, and
     * oneDNN's query is a call into another library. 0 until the first call;
     * every thread computes the same value, so a race only repeats it. */
    static _Atomic int block = 0;
    int b = atomic_load_explicit(&block, memory_order_relaxed);
    if (b == 0) {
        /* The same test kernels/cpu.c makes for AVX-512; a bit-mask test,
         * since every later ISA value (avx512_core_vnni, _bf16, _amx) contains it. */
        const unsigned avx512_core = (unsigned)dnnl_cpu_isa_avx512_core;
        b = ((unsigned)dnnl_get_effective_cpu_isa() & avx512_core) == avx512_core ? 16 : 8;
        atomic_store_explicit(&block, b, memory_order_relaxed);
    }
    return b;
}
