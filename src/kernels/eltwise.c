/* ReLU / LeakyReLU on oneDNN eltwise (1-D plain memory of n elements). */
#include "kernels/eltwise.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

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

/* Validates a call's scalars and writes its description. */
static rt_status relu_check(int64_t n, float slope, int backward, char *desc) {
    snprintf(desc, RT_DNNL_DESC_LEN, "%s %s (n=%lld negative_slope=%g)",
             slope == 0.0f ? "relu" : "leaky_relu", backward ? "backward" : "forward",
             (long long)n, (double)slope);
    if (n < 0) return rt_error_set(RT_ERR_INVALID_ARG, "%s: n must be >= 0", desc);
    if (!isfinite(slope))
        return rt_error_set(RT_ERR_INVALID_ARG, "%s: negative_slope must be finite", desc);
    if (backward && slope < 0.0f)
        return rt_error_set(RT_ERR_INVALID_ARG,
                            "%s: the backward from the output needs negative_slope >= 0", desc);
    return RT_OK;
}

static rt_status relu_plan(int64_t n, float slope, int backward, rt_kernel_plan *plan, const char *fn) {
    RT_TRY(rt_dnnl_plan_check(plan, fn));
    rt_dnnl_plan_init(plan);
    char desc[RT_DNNL_DESC_LEN];
    RT_TRY(relu_check(n, slope, backward, desc));
    if (n == 0) return RT_OK;
    rt_dnnl_key key;
    rt_dnnl_key_init(&key, backward ? RT_DNNL_RELU_BWD : RT_DNNL_RELU_FWD);
    rt_dnnl_key_push(&key, n);
    rt_dnnl_key_push_f32(&key, slope);
    rt_dnnl_entry *e = rt_dnnl_cache_find(&key);
    if (!e) {
        dnnl_primitive_desc_t pd, hint = NULL;
        dnnl_memory_desc_t md;
        RT_TRY(relu_pd(n, slope, backward, desc, &pd, backward ? &hint : NULL, &md));
        rt_dnnl_argspec fwd[2] = {{DNNL_ARG_SRC, 0, &md}, {DNNL_ARG_DST, 1, &md}};
        rt_dnnl_argspec bwd[3] = {{DNNL_ARG_DST, 0, &md}, {DNNL_ARG_DIFF_DST, 0, &md}, {DNNL_ARG_DIFF_SRC, 1, &md}};
        RT_TRY(rt_dnnl_entry_create(&key, desc, pd, hint, backward ? 3 : 2, backward ? bwd : fwd, &e));
    }
    rt_dnnl_entry_plan(e, plan);
    return RT_OK;
}

rt_status rt_kernel_relu_forward_plan(int64_t n, float negative_slope, rt_kernel_plan *plan) {
    return relu_plan(n, negative_slope, 0, plan, "rt_kernel_relu_forward_plan");
}

rt_status rt_kernel_relu_backward_plan(int64_t n, float negative_slope, rt_kernel_plan *plan) {
    return relu_plan(n, negative_slope, 1, plan, "rt_kernel_relu_backward_plan");
}

rt_status rt_kernel_relu_forward(int64_t n, float negative_slope, const float *x, float *y) {
    char desc[RT_DNNL_DESC_LEN];
    RT_TRY(relu_check(n, negative_slope, 0, desc));
    if (n > 0 && (!x || !y)) return rt_error_set(RT_ERR_INVALID_ARG, "%s: x and y must be non-NULL", desc);
    rt_kernel_plan p;
    RT_TRY(rt_kernel_relu_forward_plan(n, negative_slope, &p));
    if (!p.entry) return RT_OK; /* n == 0 */
    void *ptrs[2] = {(void *)x, y};
    return rt_dnnl_entry_exec(p.entry, ptrs);
}

/* The loops of rt_kernel_relu_backward_half over one chunk: branch-free in
 * 32-bit lanes, so they vectorise. oneDNN's use_dst backward masks where
 * y <= 0 and passes dy elsewhere, NaN included: so do these, to give the
 * f32 path's values. */
enum { RELU_CHUNK = 4096 };

static inline float relu_half_scale(uint16_t y, uint32_t inf, float slope) {
    const uint32_t b = y, mag = b & 0x7fffu;
    const uint32_t le0 = (mag == 0) | ((b >> 15) & (mag <= inf));
    return le0 ? slope : 1.0f;
}

static void relu_half_chunk(const uint16_t *y, const float *dy, float *dx, int64_t m, uint32_t inf, float slope) {
#pragma omp simd
    for (int64_t i = 0; i < m; i++) dx[i] = relu_half_scale(y[i], inf, slope) * dy[i];
}

static void relu_half_chunk_rounded(const uint16_t *y, const float *dy, float *dx, int64_t m, uint32_t inf,
                                    float slope) {
#pragma omp simd
    for (int64_t i = 0; i < m; i++) {
        uint32_t u;
        memcpy(&u, &dy[i], 4);
        u = rt_bf16_round_bits(u);
        float g;
        memcpy(&g, &u, 4);
        dx[i] = relu_half_scale(y[i], inf, slope) * g;
    }
}

rt_status rt_kernel_relu_backward_half_check(int64_t n, float negative_slope, rt_dtype dt, rt_dtype dy_round) {
    if (n < 0 || !(negative_slope >= 0.0f))
        return rt_error_set(RT_ERR_INVALID_ARG, "relu backward (half y): need n >= 0 (got %lld) and "
                            "negative_slope >= 0 (got %g)", (long long)n, negative_slope);
    if (dt != RT_BF16 && dt != RT_F16)
        return rt_error_set(RT_ERR_DTYPE, "relu backward (half y): y must be bf16 or f16, got %s", rt_dtype_str(dt));
    if (dy_round != RT_F32 && dy_round != RT_BF16)
        return rt_error_set(RT_ERR_DTYPE, "relu backward (half y): dy is rounded to bf16 or read as f32, not %s",
                            rt_dtype_str(dy_round));
    return RT_OK;
}

rt_status rt_kernel_relu_backward_half(int64_t n, float negative_slope, const uint16_t *y, rt_dtype dt,
                                       const float *dy, float *dx, rt_dtype dy_round) {
    RT_TRY(rt_kernel_relu_backward_half_check(n, negative_slope, dt, dy_round));
    if (n > 0 && (!y || !dy || !dx))
        return rt_error_set(RT_ERR_INVALID_ARG, "relu backward (half y): y, dy and dx must be non-NULL");
    const uint32_t inf = dt == RT_BF16 ? 0x7f80 : 0x7c00; /* |bits| above it: NaN; sign bit 0x8000 */
    const int round = dy_round == RT_BF16;
    const int64_t chunks = (n + RELU_CHUNK - 1) / RELU_CHUNK;
#pragma omp parallel for schedule(static) if (n > 65536)
    for (int64_t c = 0; c < chunks; c++) {
        const int64_t a = c * RELU_CHUNK, m = n - a < RELU_CHUNK ? n - a : RELU_CHUNK;
        if (round) relu_half_chunk_rounded(y + a, dy + a, dx + a, m, inf, negative_slope);
        else relu_half_chunk(y + a, dy + a, dx + a, m, inf, negative_slope);
    }
    return RT_OK;
}

rt_status rt_kernel_relu_backward(int64_t n, float negative_slope, const float *y,
                                  const float *dy, float *dx) {
    char desc[RT_DNNL_DESC_LEN];
    RT_TRY(relu_check(n, negative_slope, 1, desc));
    if (n > 0 && (!y || !dy || !dx))
        return rt_error_set(RT_ERR_INVALID_ARG, "%s: y, dy and dx must be non-NULL", desc);
    rt_kernel_plan p;
    RT_TRY(rt_kernel_relu_backward_plan(n, negative_slope, &p));
    if (!p.entry) return RT_OK;
    void *ptrs[3] = {(void *)y, (void *)dy, dx};
    return rt_dnnl_entry_exec(p.entry, ptrs);
}
