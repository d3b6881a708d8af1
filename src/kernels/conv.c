/* Convolution kernels on oneDNN; see conv.h. Layout choice: primitives are
 * created with format_tag_any (oneDNN picks its preferred, usually blocked,
 * layout) and cached reorders convert from/to the caller's layout (plain, or
 * blocked per s->src_layout / s->dst_layout; when the caller's layout is the
 * one the primitive picked, no reorder is created or run). */
#include "kernels/conv.h"
#include "kernels/conv_pointwise.h"

#include <stdio.h>
#include <string.h>

#include "core/tensor.h"
#include "kernels/dnnl_common.h"

static _Thread_local rt_conv_algo rt_tls_conv_algo; /* zero: RT_CONV_ALGO_AUTO */

rt_conv_algo rt_conv_algo_set(rt_conv_algo algo) {
    rt_conv_algo prev = rt_tls_conv_algo;
    if (rt_conv_algo_name(algo)) rt_tls_conv_algo = algo;
    return prev;
}

rt_conv_algo rt_conv_algo_get(void) { return rt_tls_conv_algo; }

static _Thread_local bool rt_tls_weight_cache; /* zero: off, the default */

bool rt_conv_weight_cache_set(bool on) {
    bool prev = rt_tls_weight_cache;
    rt_tls_weight_cache = on;
    return prev;
}

bool rt_conv_weight_cache_enabled(void) { return rt_tls_weight_cache; }

const char *rt_conv_algo_name(rt_conv_algo algo) {
    switch (algo) {
    case RT_CONV_ALGO_AUTO: return "auto";
    case RT_CONV_ALGO_DIRECT: return "direct";
    case RT_CONV_ALGO_WINOGRAD: return "winograd";
    }
    return NULL;
}

rt_status rt_conv_algo_parse(const char *name, rt_conv_algo *out) {
    if (!out) return rt_error_set(RT_ERR_INVALID_ARG, "rt_conv_algo_parse: out is NULL");
    for (int a = RT_CONV_ALGO_AUTO; a <= RT_CONV_ALGO_WINOGRAD; a++)
        if (name && !strcmp(name, rt_conv_algo_name((rt_conv_algo)a))) {
            *out = (rt_conv_algo)a;
            return RT_OK;
        }
    return rt_error_set(RT_ERR_INVALID_ARG,
                        "unknown convolution algorithm '%s'; choose auto, direct or winograd",
                        name ? name : "(null)");
}

/* Whether this thread's policy asks for Winograd on shape s (output out).
 * oneDNN may still refuse the shape; then the kernels fall back to direct.
 * The AUTO thresholds come from timing both algorithms on oneDNN 2.6,
 * AVX-512, 2 threads (docs/design.md): below 32 channels or with few 4x4
 * output tiles, the transforms cost more than the multiplications saved;
 * and never for a shape that computes in bf16. */
static int conv_wants_winograd(const rt_conv_shape *s, const int64_t out[3]) {
    rt_conv_algo a = rt_tls_conv_algo;
    if (a == RT_CONV_ALGO_DIRECT) return 0;
    if (s->nsp != 2 || s->groups != 1) return 0;
    for (int i = 0; i < 2; i++)
        if (s->k[i] != 3 || s->stride[i] != 1 || s->dil[i] != 1) return 0;
    if (a == RT_CONV_ALGO_WINOGRAD) return 1;
    /* bf16 direct, which reads the region's bf16 copies of x and dy as they
     * are, beats f32 Winograd, which needs f32 operands (ResNet-50 224² b8
     * bf16 step: 0.511 against 0.541 s, docs/design.md) */
    if (s->compute_bf16) return 0;
    int64_t tiles = s->n * ((out[0] + 3) / 4) * ((out[1] + 3) / 4);
    return s->c_in >= 32 && s->c_out >= 32 && tiles >= 128;
}

void rt_conv_out_size(const rt_conv_shape *s, int64_t out[3]) {
    if (!out) return;
    for (int i = 0; i < 3; i++) out[i] = 1;
    if (!s || (s->nsp != 2 && s->nsp != 3)) return;
    for (int i = 0; i < s->nsp; i++) {
        int64_t num = s->in[i] + 2 * s->pad[i] - s->dil[i] * (s->k[i] - 1) - 1;
        out[i] = (s->stride[i] <= 0 || num < 0) ? 0 : num / s->stride[i] + 1;
    }
}

/* "[a,b]" or "[a,b,c]" */
static const char *dims_str(char *buf, size_t n, const int64_t *v, int nsp) {
    if (nsp == 3)
        snprintf(buf, n, "[%lld,%lld,%lld]", (long long)v[0], (long long)v[1], (long long)v[2]);
    else
        snprintf(buf, n, "[%lld,%lld]", (long long)v[0], (long long)v[1]);
    return buf;
}

static const char *conv_layout_name(rt_layout l) {
    return l == RT_LAYOUT_BLOCKED ? "blocked" : l == RT_LAYOUT_CHANNELS_LAST ? "channels_last" : "plain";
}

static void conv_desc(const rt_conv_shape *s, const char *what, char *buf, size_t n) {
    char a[5][72];
    int d = s->nsp;
    snprintf(buf, n,
             "conv%dd%s%s (n=%lld c_in=%lld c_out=%lld groups=%lld in=%s k=%s stride=%s pad=%s "
             "dil=%s bias=%d)",
             d, *what ? " " : "", what, (long long)s->n, (long long)s->c_in, (long long)s->c_out,
             (long long)s->groups, dims_str(a[0], 72, s->in, d), dims_str(a[1], 72, s->k, d),
             dims_str(a[2], 72, s->stride, d), dims_str(a[3], 72, s->pad, d),
             dims_str(a[4], 72, s->dil, d), s->has_bias);
    if (s->src_layout != RT_LAYOUT_PLAIN || s->dst_layout != RT_LAYOUT_PLAIN) {
        size_t l = strlen(buf);
        if (l > 0 && l + 1 < n)
            snprintf(buf + l - 1, n - (l - 1), " src_layout=%s dst_layout=%s)", conv_layout_name(s->src_layout),
                     conv_layout_name(s->dst_layout));
    }
    if (s->wei_layout != RT_LAYOUT_PLAIN) {
        size_t l = strlen(buf);
        if (l > 0 && l + 1 < n)
            snprintf(buf + l - 1, n - (l - 1), " wei_layout=%s)",
                     s->wei_layout == RT_LAYOUT_WEIGHT_BLOCKED ? "blocked" : "invalid");
    }
}

rt_status rt_conv_shape_check(const rt_conv_shape *s, int64_t out[3]) {
    if (!s) return rt_error_set(RT_ERR_INVALID_ARG, "conv: shape is NULL");
    if (s->nsp != 2 && s->nsp != 3)
        return rt_error_set(RT_ERR_INVALID_ARG,
                            "conv: nsp=%d spatial dims; only 2 (Conv2d) or 3 (Conv3d) are supported",
                            s->nsp);
    char d[RT_DNNL_DESC_LEN];
    conv_desc(s, "", d, sizeof d);
    if (s->n < 0 || s->c_in < 1 || s->c_out < 1 || s->groups < 1)
        return rt_error_set(RT_ERR_INVALID_ARG,
                            "%s: n must be >= 0 and c_in, c_out, groups >= 1", d);
    if (s->c_in % s->groups != 0 || s->c_out % s->groups != 0)
        return rt_error_set(RT_ERR_SHAPE,
                            "%s: groups=%lld must divide both c_in=%lld and c_out=%lld", d,
                            (long long)s->groups, (long long)s->c_in, (long long)s->c_out);
    for (int i = 0; i < s->nsp; i++) {
        if (s->in[i] < 1 || s->k[i] < 1 || s->stride[i] < 1 || s->dil[i] < 1 || s->pad[i] < 0)
            return rt_error_set(RT_ERR_INVALID_ARG,
                                "%s: spatial dim %d needs in, k, stride, dil >= 1 and pad >= 0", d,
                                i);
    }
    if (s->src_layout != RT_LAYOUT_CHANNELS_LAST)
        RT_TRY(rt_dnnl_layout_check(s->src_layout, s->c_in, "x/dx (src_layout)", d));
    if (s->dst_layout != RT_LAYOUT_CHANNELS_LAST)
        RT_TRY(rt_dnnl_layout_check(s->dst_layout, s->c_out, "y/dy (dst_layout)", d));
    if ((s->src_layout == RT_LAYOUT_CHANNELS_LAST || s->dst_layout == RT_LAYOUT_CHANNELS_LAST) && s->nsp < 2)
        return rt_error_set(RT_ERR_INVALID_ARG, "%s: the channels-last layout needs a 2-D or 3-D convolution", d);
    RT_TRY(rt_dnnl_weight_layout_check(s->wei_layout, s->c_out, s->c_in, s->groups, d));
    int64_t o[3];
    rt_conv_out_size(s, o);
    for (int i = 0; i < s->nsp; i++)
        if (o[i] <= 0)
            return rt_error_set(RT_ERR_SHAPE,
                                "%s: output size of spatial dim %d is %lld; the padded input "
                                "(%lld) is smaller than the dilated kernel (%lld)",
                                d, i, (long long)o[i], (long long)(s->in[i] + 2 * s->pad[i]),
                                (long long)(s->dil[i] * (s->k[i] - 1) + 1));
    if (out) memcpy(out, o, sizeof o);
    return RT_OK;
}

/* Memory descriptors and geometry of one convolution. */
typedef struct conv_geom {
    int nd, wnd;
    int64_t src[5], dst[5], wei[6], bias[1];
    dnnl_dims_t strides, dil, pad_l, pad_r;
    /* src_user/dst_user/wei_user: the caller's x/dx, y/dy and w/dw layouts */
    dnnl_memory_desc_t src_any, dst_any, wei_any, src_user, dst_user, wei_user, bias_md;
    dnnl_alg_kind_t alg; /* winograd when wanted and oneDNN has it (conv_fwd_pd decides) */
} conv_geom;

/* Whether the blocked format would pad both sides of a plain-layout
 * convolution by more than a quarter: each channel count rounded up to the
 * block is over 1.25× itself (e.g. the 8-channel halves of a 16-channel
 * reversible coupling under AVX-512's 16-channel blocks: 2×). Such a
 * convolution computes in channels-last (NHWC / NDHWC) instead, which
 * oneDNN 2.6 runs with its jit kernels (brgconv / jit:avx512_core) and which
 * pads nothing: the blocked format held each activation at up to twice its
 * size in the reorders around the primitive. prunet3d at 128³, batch 1: step
 * peak 987 → 923 MiB, and the training step about 25% faster at 64³
 * (alternating runs, revtorch bench). A slight padding is cheaper blocked:
 * the BraTS U-Net's 60/120/360 channels (1.07×) ran 4–10% slower in
 * channels-last for 1% less memory (rt_layout_pads_much draws the line).
 * Channels-last tensors (core/layout.h) are this case's own order: the
 * primitive then reads and writes the caller's buffers without a reorder,
 * so between two of them any padding at all tips the balance
 * (rt_layout_pads): the BraTS partially reversible U-Net's 30-channel
 * halves took 512 MiB of reorder buffers per convolution at 128³ in the
 * blocked order, and its step at 64³ took the same time without them. */
static bool conv_unblocked(rt_layout l) { return l == RT_LAYOUT_PLAIN || l == RT_LAYOUT_CHANNELS_LAST; }

static bool conv_pads_both(const rt_conv_shape *s) {
    if (s->groups != 1) return false;
    if (s->src_layout == RT_LAYOUT_CHANNELS_LAST && s->dst_layout == RT_LAYOUT_CHANNELS_LAST)
        return rt_layout_pads(s->c_in) && rt_layout_pads(s->c_out);
    return conv_unblocked(s->src_layout) && conv_unblocked(s->dst_layout) && rt_layout_pads_much(s->c_in) &&
           rt_layout_pads_much(s->c_out);
}

static rt_status conv_geom_init(const rt_conv_shape *s, const int64_t out[3], conv_geom *g,
                                const char *desc) {
    memset(g, 0, sizeof *g);
    int sp = s->nsp;
    g->nd = 2 + sp;
    g->src[0] = g->dst[0] = s->n;
    g->src[1] = s->c_in;
    g->dst[1] = s->c_out;
    int wo = 0;
    if (s->groups > 1) g->wei[wo++] = s->groups;
    g->wei[wo++] = s->c_out / s->groups;
    g->wei[wo++] = s->c_in / s->groups;
    for (int i = 0; i < sp; i++) {
        g->src[2 + i] = s->in[i];
        g->dst[2 + i] = out[i];
        g->wei[wo + i] = s->k[i];
        g->strides[i] = s->stride[i];
        g->dil[i] = s->dil[i] - 1; /* oneDNN: 0 = dense */
        g->pad_l[i] = s->pad[i];
        /* Symmetric padding is valid for oneDNN: it checks
         * (in - kr + pl + pr) / stride + 1 == out with C division, which is
         * PyTorch's floor formula. The padding only changes which outputs exist. */
        g->pad_r[i] = s->pad[i];
    }
    g->wnd = wo + sp;
    g->bias[0] = s->c_out;
    g->alg = conv_wants_winograd(s, out) ? dnnl_convolution_winograd : dnnl_convolution_direct;
    RT_TRY(rt_dnnl_md(&g->src_any, g->nd, g->src, 1, desc));
    RT_TRY(rt_dnnl_md(&g->dst_any, g->nd, g->dst, 1, desc));
    RT_TRY(rt_dnnl_md(&g->wei_any, g->wnd, g->wei, 1, desc));
    if (conv_pads_both(s)) {
        RT_TRY(rt_dnnl_md_tag(&g->src_any, g->nd, g->src, g->nd == 5 ? dnnl_ndhwc : dnnl_nhwc, desc));
        RT_TRY(rt_dnnl_md_tag(&g->dst_any, g->nd, g->dst, g->nd == 5 ? dnnl_ndhwc : dnnl_nhwc, desc));
    }
    RT_TRY(rt_dnnl_md_layout(&g->src_user, g->nd, g->src, s->src_layout, desc));
    if (s->src_bf16) g->src_user.data_type = dnnl_bf16; /* a saved half copy, same order */
    RT_TRY(rt_dnnl_md_layout(&g->dst_user, g->nd, g->dst, s->dst_layout, desc));
    if (s->dst_bf16) g->dst_user.data_type = dnnl_bf16; /* the forward's bf16 y, same order */
    RT_TRY(rt_dnnl_md_layout(&g->wei_user, g->wnd, g->wei, s->wei_layout, desc));
    RT_TRY(rt_dnnl_md(&g->bias_md, 1, g->bias, 0, desc));
    return RT_OK;
}

/* Whether this shape computes in bf16: asked for, and not a shape where the
 * convolution algorithm picks Winograd (only RT_CONV_ALGO_WINOGRAD does
 * under compute_bf16), which oneDNN has only in f32: those stay f32
 * Winograd (all three passes, so they agree). */
static bool conv_bf16(const rt_conv_shape *s, const int64_t out[3]) {
    return s->compute_bf16 && !conv_wants_winograd(s, out);
}

bool rt_conv_computes_bf16(const rt_conv_shape *s) {
    if (!s || !s->compute_bf16) return false;
    int64_t out[3];
    rt_conv_out_size(s, out);
    return conv_bf16(s, out);
}

/* The bf16 operands need compute_bf16 (a bf16 buffer is only ever the copy
 * a bf16 region made for a bf16 kernel); the forward has no dy. */
static rt_status conv_check_bf16_args(const rt_conv_shape *s, bool forward, const char *desc) {
    if ((s->src_bf16 || s->dy_bf16) && !s->compute_bf16)
        return rt_error_set(RT_ERR_INVALID_ARG, "%s: a bf16 %s (%s) needs compute_bf16", desc,
                            s->src_bf16 ? "x" : "dy", s->src_bf16 ? "src_bf16" : "dy_bf16");
    if (forward && s->dy_bf16)
        return rt_error_set(RT_ERR_INVALID_ARG, "%s: dy_bf16 is for the backward passes (y is f32)", desc);
    if (s->dst_bf16 && (!s->compute_bf16 || !forward))
        return rt_error_set(RT_ERR_INVALID_ARG, "%s: a bf16 y (dst_bf16) is for the forward with compute_bf16",
                            desc);
    if (s->dx_bf16 && (!s->compute_bf16 || forward))
        return rt_error_set(RT_ERR_INVALID_ARG, "%s: a bf16 dx (dx_bf16) is for backward-data with compute_bf16",
                            desc);
    return RT_OK;
}

/* The element types the primitive computes with (format_any descriptors
 * carry no strides yet, so only the type changes): the caller's buffers keep
 * their f32 descriptors and the cached entry reorders (converts) between
 * them (dnnl_common.h). */
static void conv_geom_types(conv_geom *g, dnnl_data_type_t src, dnnl_data_type_t wei, dnnl_data_type_t dst) {
    g->src_any.data_type = src;
    g->wei_any.data_type = wei;
    g->dst_any.data_type = dst;
}

static void conv_key(rt_dnnl_key *k, rt_dnnl_kind kind, const rt_conv_shape *s, int with_bias) {
    rt_dnnl_key_init(k, kind);
    rt_dnnl_key_push(k, s->nsp);
    rt_dnnl_key_push(k, s->n);
    rt_dnnl_key_push(k, s->c_in);
    rt_dnnl_key_push(k, s->c_out);
    rt_dnnl_key_push(k, s->groups);
    rt_dnnl_key_push(k, with_bias);
    rt_dnnl_key_push(k, s->src_layout);
    rt_dnnl_key_push(k, s->dst_layout);
    rt_dnnl_key_push(k, s->compute_bf16);
    rt_dnnl_key_push(k, s->wei_layout);
    rt_dnnl_key_push(k, s->src_bf16);
    rt_dnnl_key_push(k, s->dy_bf16);
    rt_dnnl_key_push(k, s->dst_bf16);
    rt_dnnl_key_push(k, s->dx_bf16);
    int64_t out[3];
    rt_conv_out_size(s, out);
    rt_dnnl_key_push(k, conv_wants_winograd(s, out));
    for (int i = 0; i < s->nsp; i++) {
        rt_dnnl_key_push(k, s->in[i]);
        rt_dnnl_key_push(k, s->k[i]);
        rt_dnnl_key_push(k, s->stride[i]);
        rt_dnnl_key_push(k, s->pad[i]);
        rt_dnnl_key_push(k, s->dil[i]);
    }
}

/* Forward pd (format_any, user scratchpad); also the hint for backward, so
 * it settles g->alg: when oneDNN has no Winograd kernel for the shape, the
 * forward and both backward passes use direct. */
static rt_status conv_fwd_pd(conv_geom *g, int with_bias, const char *desc,
                             dnnl_primitive_desc_t *pd) {
    *pd = NULL;
    dnnl_engine_t eng;
    RT_TRY(rt_dnnl_engine(&eng));
    dnnl_primitive_attr_t attr;
    RT_TRY(rt_dnnl_attr_user_scratchpad(&attr, desc));
    dnnl_status_t st;
    for (;;) {
        dnnl_convolution_desc_t cd;
        st = dnnl_dilated_convolution_forward_desc_init(
            &cd, dnnl_forward_training, g->alg, &g->src_any, &g->wei_any,
            with_bias ? &g->bias_md : NULL, &g->dst_any, g->strides, g->dil, g->pad_l, g->pad_r);
        if (st == dnnl_success) st = dnnl_primitive_desc_create(pd, &cd, attr, eng, NULL);
        if (st == dnnl_success || g->alg == dnnl_convolution_direct) break;
        g->alg = dnnl_convolution_direct;
    }
    dnnl_primitive_attr_destroy(attr);
    if (st != dnnl_success) {
        *pd = NULL;
        return rt_dnnl_fail(st, "convolution forward primitive descriptor creation", desc);
    }
    return RT_OK;
}

rt_status rt_kernel_conv_forward_plan(const rt_conv_shape *s, rt_kernel_plan *plan) {
    return rt_kernel_conv_forward_plan_cached(s, NULL, plan);
}

rt_status rt_kernel_conv_forward_plan_cached(const rt_conv_shape *s, rt_storage *w_cache, rt_kernel_plan *plan) {
    int64_t out[3];
    RT_TRY(rt_dnnl_plan_check(plan, "rt_kernel_conv_forward_plan"));
    rt_dnnl_plan_init(plan);
    RT_TRY(rt_conv_shape_check(s, out));
    RT_TRY(conv_check_bf16_args(s, true, "rt_kernel_conv_forward_plan"));
    if (s->n == 0 || rt_conv_pointwise_applies(s)) return RT_OK; /* nothing, or no primitive */
    rt_dnnl_key key;
    conv_key(&key, RT_DNNL_CONV_FWD, s, s->has_bias);
    rt_dnnl_entry *e = rt_dnnl_cache_find(&key);
    if (!e) {
        char desc[RT_DNNL_DESC_LEN];
        conv_desc(s, "forward", desc, sizeof desc);
        conv_geom g;
        RT_TRY(conv_geom_init(s, out, &g, desc));
        dnnl_primitive_desc_t pd = NULL;
        if (conv_bf16(s, out)) { /* bf16 in, f32 (or bf16) out; f32 where oneDNN has no bf16 kernel */
            conv_geom_types(&g, dnnl_bf16, dnnl_bf16, s->dst_bf16 ? dnnl_bf16 : dnnl_f32);
            if (conv_fwd_pd(&g, s->has_bias, desc, &pd) != RT_OK) {
                rt_error_clear();
                conv_geom_types(&g, dnnl_f32, dnnl_f32, dnnl_f32);
                pd = NULL;
            }
        }
        if (!pd) RT_TRY(conv_fwd_pd(&g, s->has_bias, desc, &pd));
        rt_dnnl_argspec specs[4] = {{DNNL_ARG_SRC, 0, &g.src_user},
                                    {DNNL_ARG_WEIGHTS, 0, &g.wei_user},
                                    {DNNL_ARG_DST, 1, &g.dst_user},
                                    {DNNL_ARG_BIAS, 0, &g.bias_md}};
        RT_TRY(rt_dnnl_entry_create(&key, desc, pd, NULL, s->has_bias ? 4 : 3, specs, &e));
    }
    rt_dnnl_entry_plan_cached(e, w_cache, plan);
    return RT_OK;
}

rt_status rt_kernel_conv_forward(const rt_conv_shape *s, const void *x, const float *w,
                                 const float *b, void *y) {
    return rt_kernel_conv_forward_cached(s, x, w, NULL, b, y);
}

rt_status rt_kernel_conv_forward_cached(const rt_conv_shape *s, const void *x, const float *w,
                                        rt_storage *w_cache, const float *b, void *y) {
    RT_TRY(rt_conv_shape_check(s, NULL));
    char desc[RT_DNNL_DESC_LEN];
    conv_desc(s, "forward", desc, sizeof desc);
    if (!x || !w || !y || (s->has_bias && !b))
        return rt_error_set(RT_ERR_INVALID_ARG, "%s: x, w, y%s must be non-NULL", desc,
                            s->has_bias ? " and b" : "");
    if (!s->has_bias && b)
        return rt_error_set(RT_ERR_INVALID_ARG, "%s: b given but has_bias is 0", desc);
    RT_TRY(conv_check_bf16_args(s, true, desc));
    if (s->n > 0 && rt_conv_pointwise_applies(s)) { /* never with compute_bf16, so x is f32 */
        rt_conv_pointwise_forward(s, x, w, b, y);
        return RT_OK;
    }
    rt_kernel_plan p;
    RT_TRY(rt_kernel_conv_forward_plan_cached(s, w_cache, &p));
    if (!p.entry) return RT_OK; /* n == 0 */
    void *ptrs[4] = {(void *)x, (void *)w, y, (void *)b};
    return rt_dnnl_entry_exec_cached(p.entry, ptrs, w_cache);
}

/* The end of both backward primitives' creation: from the status of the
 * descriptor's init, the primitive descriptor (user scratchpad, forward
 * hint *hint); on failure the hint is destroyed and both are NULL. */
static rt_status conv_bwd_pd_create(dnnl_status_t st, const dnnl_convolution_desc_t *cd, const char *pass,
                                    const char *desc, dnnl_primitive_desc_t *hint, dnnl_primitive_desc_t *pd) {
    char what[96];
    rt_status rs = RT_OK;
    dnnl_primitive_attr_t attr = NULL;
    if (st != dnnl_success) {
        snprintf(what, sizeof what, "convolution %s descriptor init", pass);
        rs = rt_dnnl_fail(st, what, desc);
    }
    if (rs == RT_OK) rs = rt_dnnl_attr_user_scratchpad(&attr, desc);
    if (rs == RT_OK) {
        dnnl_engine_t eng;
        rs = rt_dnnl_engine(&eng);
        if (rs == RT_OK && (st = dnnl_primitive_desc_create(pd, cd, attr, eng, *hint)) != dnnl_success) {
            *pd = NULL;
            snprintf(what, sizeof what, "convolution %s primitive descriptor creation", pass);
            rs = rt_dnnl_fail(st, what, desc);
        }
    }
    if (attr) dnnl_primitive_attr_destroy(attr);
    if (rs != RT_OK) {
        dnnl_primitive_desc_destroy(*hint);
        *hint = NULL;
    }
    return rs;
}

/* Backward-data primitive and its forward hint; bf16: dy and w in bf16, dx
 * f32 or (dx_bf16) bf16 (fails where oneDNN has no such kernel; the caller
 * then asks f32). */
static rt_status conv_bwd_data_pd(conv_geom *g, bool bf16, bool dx_bf16, const char *desc,
                                  dnnl_primitive_desc_t *hint, dnnl_primitive_desc_t *pd) {
    *hint = *pd = NULL;
    dnnl_data_type_t h = bf16 ? dnnl_bf16 : dnnl_f32;
    conv_geom_types(g, h, h, h);
    RT_TRY(conv_fwd_pd(g, 0, desc, hint));
    dnnl_memory_desc_t dsrc = g->src_any;
    dsrc.data_type = bf16 && dx_bf16 ? dnnl_bf16 : dnnl_f32;
    dnnl_convolution_desc_t cd;
    dnnl_status_t st = dnnl_dilated_convolution_backward_data_desc_init(
        &cd, g->alg, &dsrc, &g->wei_any, &g->dst_any, g->strides, g->dil,
        g->pad_l, g->pad_r);
    return conv_bwd_pd_create(st, &cd, "backward-data", desc, hint, pd);
}

rt_status rt_kernel_conv_backward_data_plan(const rt_conv_shape *s, rt_kernel_plan *plan) {
    return rt_kernel_conv_backward_data_plan_cached(s, NULL, plan);
}

rt_status rt_kernel_conv_backward_data_plan_cached(const rt_conv_shape *s, rt_storage *w_cache,
                                                   rt_kernel_plan *plan) {
    int64_t out[3];
    RT_TRY(rt_dnnl_plan_check(plan, "rt_kernel_conv_backward_data_plan"));
    rt_dnnl_plan_init(plan);
    RT_TRY(rt_conv_shape_check(s, out));
    RT_TRY(conv_check_bf16_args(s, false, "rt_kernel_conv_backward_data_plan"));
    if (s->n == 0 || rt_conv_pointwise_applies(s)) return RT_OK; /* nothing, or no primitive */
    rt_conv_shape d = *s;
    d.src_bf16 = 0; /* this pass has no x: one entry whatever the forward read */
    rt_dnnl_key key;
    conv_key(&key, RT_DNNL_CONV_BWD_DATA, &d, 0);
    rt_dnnl_entry *e = rt_dnnl_cache_find(&key);
    if (!e) {
        char desc[RT_DNNL_DESC_LEN];
        conv_desc(&d, "backward_data", desc, sizeof desc);
        conv_geom g;
        RT_TRY(conv_geom_init(&d, out, &g, desc));
        if (d.dy_bf16) g.dst_user.data_type = dnnl_bf16; /* the caller's bf16 dy, same order */
        if (d.dx_bf16) g.src_user.data_type = dnnl_bf16; /* the caller's bf16 dx, same order */
        dnnl_primitive_desc_t hint = NULL, pd = NULL;
        if (conv_bf16(&d, out) && conv_bwd_data_pd(&g, true, d.dx_bf16, desc, &hint, &pd) != RT_OK)
            rt_error_clear();
        if (!pd) RT_TRY(conv_bwd_data_pd(&g, false, false, desc, &hint, &pd));
        rt_dnnl_argspec specs[3] = {{DNNL_ARG_DIFF_DST, 0, &g.dst_user},
                                    {DNNL_ARG_WEIGHTS, 0, &g.wei_user},
                                    {DNNL_ARG_DIFF_SRC, 1, &g.src_user}};
        RT_TRY(rt_dnnl_entry_create(&key, desc, pd, hint, 3, specs, &e));
    }
    rt_dnnl_entry_plan_cached(e, w_cache, plan);
    return RT_OK;
}

rt_status rt_kernel_conv_backward_data(const rt_conv_shape *s, const float *w, const void *dy,
                                       void *dx) {
    return rt_kernel_conv_backward_data_cached(s, w, NULL, dy, dx);
}

rt_status rt_kernel_conv_backward_data_cached(const rt_conv_shape *s, const float *w, rt_storage *w_cache,
                                              const void *dy, void *dx) {
    RT_TRY(rt_conv_shape_check(s, NULL));
    char desc[RT_DNNL_DESC_LEN];
    conv_desc(s, "backward_data", desc, sizeof desc);
    if (!w || !dy || !dx)
        return rt_error_set(RT_ERR_INVALID_ARG, "%s: w, dy, dx must be non-NULL", desc);
    RT_TRY(conv_check_bf16_args(s, false, desc));
    if (s->n > 0 && rt_conv_pointwise_applies(s)) { /* never with compute_bf16, so dy is f32 */
        rt_conv_pointwise_backward_data(s, w, dy, dx);
        return RT_OK;
    }
    rt_kernel_plan p;
    RT_TRY(rt_kernel_conv_backward_data_plan_cached(s, w_cache, &p));
    if (!p.entry) return RT_OK;
    void *ptrs[3] = {(void *)dy, (void *)w, dx};
    return rt_dnnl_entry_exec_cached(p.entry, ptrs, w_cache);
}

/* Backward-weights primitive and its forward hint; bf16: x and dy in bf16,
 * dw and db f32 (fails where oneDNN has no such kernel). */
static rt_status conv_bwd_weights_pd(conv_geom *g, int with_db, bool bf16, const char *desc,
                                     dnnl_primitive_desc_t *hint, dnnl_primitive_desc_t *pd) {
    *hint = *pd = NULL;
    dnnl_data_type_t h = bf16 ? dnnl_bf16 : dnnl_f32;
    conv_geom_types(g, h, h, h);
    RT_TRY(conv_fwd_pd(g, with_db, desc, hint));
    dnnl_memory_desc_t dwei = g->wei_any;
    dwei.data_type = dnnl_f32;
    dnnl_convolution_desc_t cd;
    dnnl_status_t st = dnnl_dilated_convolution_backward_weights_desc_init(
        &cd, g->alg, &g->src_any, &dwei, with_db ? &g->bias_md : NULL,
        &g->dst_any, g->strides, g->dil, g->pad_l, g->pad_r);
    return conv_bwd_pd_create(st, &cd, "backward-weights", desc, hint, pd);
}

rt_status rt_kernel_conv_backward_weights_plan(const rt_conv_shape *s, int with_db, rt_kernel_plan *plan) {
    int64_t out[3];
    RT_TRY(rt_dnnl_plan_check(plan, "rt_kernel_conv_backward_weights_plan"));
    rt_dnnl_plan_init(plan);
    RT_TRY(rt_conv_shape_check(s, out));
    RT_TRY(conv_check_bf16_args(s, false, "rt_kernel_conv_backward_weights_plan"));
    if (s->n == 0 || rt_conv_pointwise_applies(s)) return RT_OK; /* nothing, or no primitive */
    with_db = with_db != 0;
    rt_conv_shape ws = *s;
    ws.dx_bf16 = 0; /* this pass writes no dx: one entry either way */
    s = &ws;
    rt_dnnl_key key;
    conv_key(&key, RT_DNNL_CONV_BWD_WEIGHTS, s, with_db);
    rt_dnnl_entry *e = rt_dnnl_cache_find(&key);
    if (!e) {
        char desc[RT_DNNL_DESC_LEN];
        conv_desc(s, "backward_weights", desc, sizeof desc);
        conv_geom g;
        RT_TRY(conv_geom_init(s, out, &g, desc));
        if (s->dy_bf16) g.dst_user.data_type = dnnl_bf16; /* the caller's bf16 dy, same order */
        dnnl_primitive_desc_t hint = NULL, pd = NULL;
        if (conv_bf16(s, out) && conv_bwd_weights_pd(&g, with_db, true, desc, &hint, &pd) != RT_OK) rt_error_clear();
        if (!pd) RT_TRY(conv_bwd_weights_pd(&g, with_db, false, desc, &hint, &pd));
        rt_dnnl_argspec specs[4] = {{DNNL_ARG_SRC, 0, &g.src_user},
                                    {DNNL_ARG_DIFF_DST, 0, &g.dst_user},
                                    {DNNL_ARG_DIFF_WEIGHTS, 1, &g.wei_user},
                                    {DNNL_ARG_DIFF_BIAS, 1, &g.bias_md}};
        RT_TRY(rt_dnnl_entry_create(&key, desc, pd, hint, with_db ? 4 : 3, specs, &e));
    }
    rt_dnnl_entry_plan(e, plan);
    return RT_OK;
}

rt_status rt_kernel_conv_backward_weights(const rt_conv_shape *s, const void *x,
                                          const void *dy, float *dw, float *db) {
    RT_TRY(rt_conv_shape_check(s, NULL));
    char desc[RT_DNNL_DESC_LEN];
    conv_desc(s, "backward_weights", desc, sizeof desc);
    if (!x || !dy || !dw)
        return rt_error_set(RT_ERR_INVALID_ARG, "%s: x, dy, dw must be non-NULL", desc);
    RT_TRY(conv_check_bf16_args(s, false, desc));
    if (s->n == 0) { /* empty batch: the gradient of an empty sum is zero */
        int64_t nw = s->c_out * (s->c_in / s->groups);
        for (int i = 0; i < s->nsp; i++) nw *= s->k[i];
        memset(dw, 0, sizeof(float) * (size_t)nw);
        if (db) memset(db, 0, sizeof(float) * (size_t)s->c_out);
        return RT_OK;
    }
    if (rt_conv_pointwise_applies(s)) { /* never with compute_bf16, so x and dy are f32 */
        rt_conv_pointwise_backward_weights(s, (const float *)x, (const float *)dy, dw, db);
        return RT_OK;
    }
    rt_kernel_plan p;
    RT_TRY(rt_kernel_conv_backward_weights_plan(s, db != NULL, &p));
    void *ptrs[4] = {(void *)x, (void *)dy, dw, db};
    return rt_dnnl_entry_exec(p.entry, ptrs);
}

static _Thread_local int rt_tls_bf16_conv; /* 0 unknown, 1 yes, 2 no */

static bool rt_conv_bf16_probe(void) {
    dnnl_engine_t eng;
    if (rt_dnnl_engine(&eng) != RT_OK) return false;
    dnnl_memory_desc_t src, wei, dst;
    dnnl_dims_t ds = {8, 16, 8, 8}, dw = {16, 16, 3, 3}, dd = {8, 16, 8, 8}, one = {1, 1}, pad = {1, 1};
    if (dnnl_memory_desc_init_by_tag(&src, 4, ds, dnnl_bf16, dnnl_format_tag_any) != dnnl_success ||
        dnnl_memory_desc_init_by_tag(&wei, 4, dw, dnnl_bf16, dnnl_format_tag_any) != dnnl_success ||
        dnnl_memory_desc_init_by_tag(&dst, 4, dd, dnnl_bf16, dnnl_format_tag_any) != dnnl_success)
        return false;
    dnnl_convolution_desc_t cd;
    if (dnnl_convolution_forward_desc_init(&cd, dnnl_forward_training, dnnl_convolution_direct, &src, &wei, NULL,
                                           &dst, one, pad, pad) != dnnl_success)
        return false;
    dnnl_primitive_desc_t pd = NULL;
    bool ok = dnnl_primitive_desc_create(&pd, &cd, NULL, eng, NULL) == dnnl_success;
    if (pd) dnnl_primitive_desc_destroy(pd);
    return ok;
}

bool rt_conv_bf16_available(void) {
    if (!rt_tls_bf16_conv) rt_tls_bf16_conv = rt_conv_bf16_probe() ? 1 : 2;
    return rt_tls_bf16_conv == 1;
}
