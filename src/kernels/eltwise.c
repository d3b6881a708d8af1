/* ReLU / LeakyReLU on oneDNN eltwise (1-D plain memory of n elements). */
#include "kernels/eltwise.h"

#include <math.h>
#include <stdio.h>

#include "kernels/dnnl_common.h"

static rt_status relu_pd(int64_t n, float slope, int backward, const char *desc,
                         dnnl_primitive_desc_t *pd, dnnl_primitive_desc_t *hint,
                         dnnl_memory_desc_t *md) {
    *pd = NULL;
    if (hint) *hint = NULL;
    dnnl_engine_t eng;
    RT_TRY(rt_dnnl_engine(&eng));
    RT_TRY(rt_dnnl_md(md, 1, &n, 0, desc));
    /* The plain relu algorithm for the forward (any slope); the backward's
     * hint is a use_dst_for_bwd forward (same output, needs slope >= 0). */
    dnnl_alg_kind_t alg = backward ? dnnl_eltwise_relu_use_dst_for_bwd : dnnl_eltwise_relu;
    dnnl_eltwise_desc_t fd, bd;
    dnnl_status_t st = dnnl_eltwise_forward_desc_init(&fd, dnnl_forward_training, alg, md, slope, 0);
    if (st != dnnl_success) return rt_dnnl_fail(st, "dnnl_eltwise_forward_desc_init", desc);
    dnnl_primitive_attr_t attr;
    RT_TRY(rt_dnnl_attr_user_scratchpad(&attr, desc));
    dnnl_primitive_desc_t fpd = NULL;
    st = dnnl_primitive_desc_create(&fpd, &fd, attr, eng, NULL);
    if (st != dnnl_success) {
        dnnl_primitive_attr_destroy(attr);
        return rt_dnnl_fail(st, "eltwise forward primitive descriptor creation", desc);
    }
    if (!backward) {
        dnnl_primitive_attr_destroy(attr);
        *pd = fpd;
        return RT_OK;
    }
    st = dnnl_eltwise_backward_desc_init(&bd, alg, md, md, slope, 0);
    if (st == dnnl_success) st = dnnl_primitive_desc_create(pd, &bd, attr, eng, fpd);
    dnnl_primitive_attr_destroy(attr);
    if (st != dnnl_success) {
        *pd = NULL;
        dnnl_primitive_desc_destroy(fpd);
        return rt_dnnl_fail(st, "eltwise backward primitive descriptor creation", desc);
    }
    *hint = fpd;
    return RT_OK;
}

/* Validates a call; *dry is set when every buffer is NULL (dry run). */
static rt_status relu_check(int64_t n, float slope, int backward, const void *a, const void *b,
                            const void *c, char *desc, int *dry) {
    snprintf(desc, RT_DNNL_DESC_LEN, "%s %s (n=%lld negative_slope=%g)",
             slope == 0.0f ? "relu" : "leaky_relu", backward ? "backward" : "forward",
             (long long)n, (double)slope);
    if (n < 0) return rt_error_set(RT_ERR_INVALID_ARG, "%s: n must be >= 0", desc);
    if (!isfinite(slope))
        return rt_error_set(RT_ERR_INVALID_ARG, "%s: negative_slope must be finite", desc);
    if (backward && slope < 0.0f)
        return rt_error_set(RT_ERR_INVALID_ARG,
                            "%s: the backward from the output needs negative_slope >= 0", desc);
    *dry = !a && !b && !c;
    if (n > 0 && !*dry && (!a || !b || (backward && !c)))
        return rt_error_set(RT_ERR_INVALID_ARG,
                            "%s: buffers must be non-NULL (or all NULL for a dry run)", desc);
    return RT_OK;
}

rt_status rt_kernel_relu_forward(int64_t n, float negative_slope, const float *x, float *y) {
    char desc[RT_DNNL_DESC_LEN];
    int dry;
    RT_TRY(relu_check(n, negative_slope, 0, x, y, NULL, desc, &dry));
    if (n == 0) return RT_OK;
    rt_dnnl_key key;
    rt_dnnl_key_init(&key, RT_DNNL_RELU_FWD);
    rt_dnnl_key_push(&key, n);
    rt_dnnl_key_push_f32(&key, negative_slope);
    rt_dnnl_entry *e = rt_dnnl_cache_find(&key);
    if (!e) {
        dnnl_primitive_desc_t pd;
        dnnl_memory_desc_t md;
        RT_TRY(relu_pd(n, negative_slope, 0, desc, &pd, NULL, &md));
        rt_dnnl_argspec specs[2] = {{DNNL_ARG_SRC, 0, &md}, {DNNL_ARG_DST, 1, &md}};
        RT_TRY(rt_dnnl_entry_create(&key, desc, pd, NULL, 2, specs, &e));
    }
    if (dry) return rt_dnnl_entry_dry_run(e);
    void *ptrs[2] = {(void *)x, y};
    return rt_dnnl_entry_exec(e, ptrs);
}

rt_status rt_kernel_relu_backward(int64_t n, float negative_slope, const float *y,
                                  const float *dy, float *dx) {
    char desc[RT_DNNL_DESC_LEN];
    int dry;
    RT_TRY(relu_check(n, negative_slope, 1, y, dy, dx, desc, &dry));
    if (n == 0) return RT_OK;
    rt_dnnl_key key;
    rt_dnnl_key_init(&key, RT_DNNL_RELU_BWD);
    rt_dnnl_key_push(&key, n);
    rt_dnnl_key_push_f32(&key, negative_slope);
    rt_dnnl_entry *e = rt_dnnl_cache_find(&key);
    if (!e) {
        dnnl_primitive_desc_t pd, hint;
        dnnl_memory_desc_t md;
        RT_TRY(relu_pd(n, negative_slope, 1, desc, &pd, &hint, &md));
        rt_dnnl_argspec specs[3] = {
            {DNNL_ARG_DST, 0, &md}, {DNNL_ARG_DIFF_DST, 0, &md}, {DNNL_ARG_DIFF_SRC, 1, &md}};
        RT_TRY(rt_dnnl_entry_create(&key, desc, pd, hint, 3, specs, &e));
    }
    if (dry) return rt_dnnl_entry_dry_run(e);
    void *ptrs[3] = {(void *)y, (void *)dy, dx};
    return rt_dnnl_entry_exec(e, ptrs);
}
