/* Transposed convolution on oneDNN's deconvolution primitive; see deconv.h.
 * The structure follows conv.c: format_any primitives, cached reorders from
 * and to the caller's layouts, backward primitives hinted by the forward. */
#include "kernels/deconv.h"

#include <stdio.h>
#include <string.h>

#include "core/tensor.h"
#include "kernels/dnnl_common.h"

static void deconv_desc(const rt_deconv_shape *s, const char *what, char *buf, size_t n) {
    int d = s->nsp == 3 ? 3 : 2;
    char a[6][40]; /* dims as int: the message only names the shape */
    const int64_t *v[6] = {s->in, s->k, s->stride, s->pad, s->out_pad, s->dil};
    for (int j = 0; j < 6; j++) {
        if (d == 3)
            snprintf(a[j], 40, "[%d,%d,%d]", (int)v[j][0], (int)v[j][1], (int)v[j][2]);
        else
            snprintf(a[j], 40, "[%d,%d]", (int)v[j][0], (int)v[j][1]);
    }
    snprintf(buf, n,
             "conv_transpose%dd %.20s (n=%d c_in=%d c_out=%d groups=%d in=%s k=%s stride=%s pad=%s "
             "output_padding=%s dil=%s bias=%d)",
             d, what, (int)s->n, (int)s->c_in, (int)s->c_out, (int)s->groups, a[0], a[1],
             a[2], a[3], a[4], a[5], s->has_bias);
}

rt_status rt_deconv_shape_check(const rt_deconv_shape *s, int64_t out[3]) {
    if (!s) return rt_error_set(RT_ERR_INVALID_ARG, "conv_transpose: shape is NULL");
    if (s->nsp != 2 && s->nsp != 3)
        return rt_error_set(RT_ERR_INVALID_ARG, "conv_transpose: nsp=%d; only 2 or 3 spatial dims", s->nsp);
    char d[RT_DNNL_DESC_LEN];
    deconv_desc(s, "", d, sizeof d);
    if (s->n < 0 || s->c_in < 1 || s->c_out < 1 || s->groups < 1)
        return rt_error_set(RT_ERR_INVALID_ARG, "%s: n must be >= 0 and c_in, c_out, groups >= 1", d);
    if (s->c_in % s->groups || s->c_out % s->groups)
        return rt_error_set(RT_ERR_SHAPE, "%s: groups must divide both c_in and c_out", d);
    int64_t o[3] = {1, 1, 1};
    for (int i = 0; i < s->nsp; i++) {
        if (s->in[i] < 1 || s->k[i] < 1 || s->stride[i] < 1 || s->dil[i] < 1 || s->pad[i] < 0 || s->out_pad[i] < 0)
            return rt_error_set(RT_ERR_INVALID_ARG,
                                "%s: spatial dim %d needs in, k, stride, dilation >= 1 and padding, "
                                "output_padding >= 0",
                                d, i);
        if (s->out_pad[i] >= s->stride[i] && s->out_pad[i] >= s->dil[i])
            return rt_error_set(RT_ERR_INVALID_ARG,
                                "%s: output_padding (%lld) must be smaller than either stride or dilation "
                                "(PyTorch's rule)",
                                d, (long long)s->out_pad[i]);
        o[i] = (s->in[i] - 1) * s->stride[i] - 2 * s->pad[i] + s->dil[i] * (s->k[i] - 1) + s->out_pad[i] + 1;
        if (o[i] < 1)
            return rt_error_set(RT_ERR_SHAPE,
                                "%s: output size of spatial dim %d is %lld = (in-1)*stride - 2*padding + "
                                "dilation*(k-1) + output_padding + 1; reduce the padding",
                                d, i, (long long)o[i]);
    }
    RT_TRY(rt_dnnl_layout_check(s->src_layout, s->c_in, "x/dx (src_layout)", d));
    RT_TRY(rt_dnnl_layout_check(s->dst_layout, s->c_out, "y/dy (dst_layout)", d));
    if (out) memcpy(out, o, sizeof o);
    return RT_OK;
}

typedef struct deconv_geom {
    int nd, wnd;
    int64_t src[5], dst[5], wei[6], bias[1];
    dnnl_dims_t strides, dil, pad_l, pad_r;
    dnnl_memory_desc_t src_any, dst_any, wei_any, src_user, dst_user, wei_user, bias_md;
} deconv_geom;

static rt_status deconv_geom_init(const rt_deconv_shape *s, const int64_t out[3], deconv_geom *g,
                                  const char *desc) {
    memset(g, 0, sizeof *g);
    int sp = s->nsp, wo = 0;
    g->nd = 2 + sp;
    g->src[0] = g->dst[0] = s->n;
    g->src[1] = s->c_in;
    g->dst[1] = s->c_out;
    if (s->groups > 1) g->wei[wo++] = s->groups;
    g->wei[wo++] = s->c_out / s->groups; /* oneDNN's logical order: (g,) o, i, spatial */
    g->wei[wo++] = s->c_in / s->groups;
    for (int i = 0; i < sp; i++) {
        g->src[2 + i] = s->in[i];
        g->dst[2 + i] = out[i];
        g->wei[wo + i] = s->k[i];
        g->strides[i] = s->stride[i];
        g->dil[i] = s->dil[i] - 1;
        g->pad_l[i] = s->pad[i];
        /* oneDNN checks (out − dil·(k−1) − 1 + pad_l + pad_r)/stride + 1 == in:
         * output_padding is a smaller right padding (possibly negative). */
        g->pad_r[i] = s->pad[i] - s->out_pad[i];
    }
    g->wnd = wo + sp;
    g->bias[0] = s->c_out;
    RT_TRY(rt_dnnl_md(&g->src_any, g->nd, g->src, 1, desc));
    RT_TRY(rt_dnnl_md(&g->dst_any, g->nd, g->dst, 1, desc));
    RT_TRY(rt_dnnl_md(&g->wei_any, g->wnd, g->wei, 1, desc));
    RT_TRY(rt_dnnl_md_layout(&g->src_user, g->nd, g->src, s->src_layout, desc));
    RT_TRY(rt_dnnl_md_layout(&g->dst_user, g->nd, g->dst, s->dst_layout, desc));
    RT_TRY(rt_dnnl_md(&g->bias_md, 1, g->bias, 0, desc));
    /* PyTorch stores (g·i, o, k...): in oneDNN's (g,) o, i order that is
     * iohw / iodhw, or giohw / giodhw with groups */
    dnnl_format_tag_t tag = s->groups > 1 ? (sp == 3 ? dnnl_giodhw : dnnl_giohw) : (sp == 3 ? dnnl_iodhw : dnnl_iohw);
    dnnl_dims_t wd;
    for (int i = 0; i < g->wnd; i++) wd[i] = g->wei[i];
    dnnl_status_t st = dnnl_memory_desc_init_by_tag(&g->wei_user, g->wnd, wd, dnnl_f32, tag);
    if (st != dnnl_success) return rt_dnnl_fail(st, "dnnl_memory_desc_init_by_tag (weights)", desc);
    return RT_OK;
}

static void deconv_key(rt_dnnl_key *k, rt_dnnl_kind kind, const rt_deconv_shape *s, int with_bias) {
    rt_dnnl_key_init(k, kind);
    rt_dnnl_key_push(k, s->nsp);
    rt_dnnl_key_push(k, s->n);
    rt_dnnl_key_push(k, s->c_in);
    rt_dnnl_key_push(k, s->c_out);
    rt_dnnl_key_push(k, s->groups);
    rt_dnnl_key_push(k, with_bias);
    rt_dnnl_key_push(k, s->src_layout);
    rt_dnnl_key_push(k, s->dst_layout);
    for (int i = 0; i < s->nsp; i++) {
        rt_dnnl_key_push(k, s->in[i]);
        rt_dnnl_key_push(k, s->k[i]);
        rt_dnnl_key_push(k, s->stride[i]);
        rt_dnnl_key_push(k, s->pad[i] * 64 + s->out_pad[i]); /* out_pad < stride, dil: both small */
        rt_dnnl_key_push(k, s->dil[i]);
    }
}

/* Creates the primitive descriptor of `kind` (the forward one also serves
 * as the backward passes' hint, returned through *hint when hint is not NULL). */
static rt_status deconv_pd(rt_dnnl_kind kind, const deconv_geom *g, int with_bias, const char *desc,
                           dnnl_primitive_desc_t *pd, dnnl_primitive_desc_t *hint) {
    *pd = NULL;
    dnnl_engine_t eng;
    RT_TRY(rt_dnnl_engine(&eng));
    dnnl_primitive_attr_t attr;
    RT_TRY(rt_dnnl_attr_user_scratchpad(&attr, desc));
    dnnl_deconvolution_desc_t fd, bd;
    dnnl_primitive_desc_t fwd = NULL;
    dnnl_status_t st = dnnl_dilated_deconvolution_forward_desc_init(
        &fd, dnnl_forward_training, dnnl_deconvolution_direct, &g->src_any, &g->wei_any,
        with_bias ? &g->bias_md : NULL, &g->dst_any, g->strides, g->dil, g->pad_l, g->pad_r);
    if (st == dnnl_success) st = dnnl_primitive_desc_create(&fwd, &fd, attr, eng, NULL);
    const char *step = "deconvolution forward primitive descriptor creation";
    if (st == dnnl_success && kind != RT_DNNL_DECONV_FWD) {
        if (kind == RT_DNNL_DECONV_BWD_DATA) {
            st = dnnl_dilated_deconvolution_backward_data_desc_init(&bd, dnnl_deconvolution_direct, &g->src_any,
                                                                    &g->wei_any, &g->dst_any, g->strides, g->dil,
                                                                    g->pad_l, g->pad_r);
            step = "deconvolution backward-data primitive descriptor creation";
        } else {
            st = dnnl_dilated_deconvolution_backward_weights_desc_init(
                &bd, dnnl_deconvolution_direct, &g->src_any, &g->wei_any, with_bias ? &g->bias_md : NULL,
                &g->dst_any, g->strides, g->dil, g->pad_l, g->pad_r);
            step = "deconvolution backward-weights primitive descriptor creation";
        }
        if (st == dnnl_success) st = dnnl_primitive_desc_create(pd, &bd, attr, eng, fwd);
    } else if (st == dnnl_success) {
        *pd = fwd;
        fwd = NULL;
    }
    dnnl_primitive_attr_destroy(attr);
    if (st != dnnl_success) {
        if (fwd) dnnl_primitive_desc_destroy(fwd);
        *pd = NULL;
        return rt_dnnl_fail(st, step, desc);
    }
    if (hint) *hint = fwd;
    else if (fwd) dnnl_primitive_desc_destroy(fwd);
    return RT_OK;
}

/* Looks up or builds the entry of `kind`; the argspecs are in the order the
 * callers pass their pointers. */
static rt_status deconv_entry(rt_dnnl_kind kind, const rt_deconv_shape *s, const int64_t out[3], int with_bias,
                              const char *desc, rt_dnnl_entry **e) {
    rt_dnnl_key key;
    deconv_key(&key, kind, s, with_bias);
    *e = rt_dnnl_cache_find(&key);
    if (*e) return RT_OK;
    deconv_geom g;
    RT_TRY(deconv_geom_init(s, out, &g, desc));
    dnnl_primitive_desc_t pd, hint = NULL;
    RT_TRY(deconv_pd(kind, &g, with_bias, desc, &pd, kind == RT_DNNL_DECONV_FWD ? NULL : &hint));
    if (kind == RT_DNNL_DECONV_FWD) {
        rt_dnnl_argspec sp[4] = {{DNNL_ARG_SRC, 0, &g.src_user},
                                 {DNNL_ARG_WEIGHTS, 0, &g.wei_user},
                                 {DNNL_ARG_DST, 1, &g.dst_user},
                                 {DNNL_ARG_BIAS, 0, &g.bias_md}};
        return rt_dnnl_entry_create(&key, desc, pd, NULL, with_bias ? 4 : 3, sp, e);
    }
    if (kind == RT_DNNL_DECONV_BWD_DATA) {
        rt_dnnl_argspec sp[3] = {{DNNL_ARG_DIFF_DST, 0, &g.dst_user},
                                 {DNNL_ARG_WEIGHTS, 0, &g.wei_user},
                                 {DNNL_ARG_DIFF_SRC, 1, &g.src_user}};
        return rt_dnnl_entry_create(&key, desc, pd, hint, 3, sp, e);
    }
    rt_dnnl_argspec sp[4] = {{DNNL_ARG_SRC, 0, &g.src_user},
                             {DNNL_ARG_DIFF_DST, 0, &g.dst_user},
                             {DNNL_ARG_DIFF_WEIGHTS, 1, &g.wei_user},
                             {DNNL_ARG_DIFF_BIAS, 1, &g.bias_md}};
    return rt_dnnl_entry_create(&key, desc, pd, hint, with_bias ? 4 : 3, sp, e);
}

/* The plan of one pass: shape check, entry found or created, its block. */
static rt_status deconv_plan(rt_dnnl_kind kind, const char *what, const rt_deconv_shape *s, int with_bias,
                             rt_storage *w_cache, rt_kernel_plan *plan, const char *fn) {
    int64_t out[3];
    RT_TRY(rt_dnnl_plan_check(plan, fn));
    rt_dnnl_plan_init(plan);
    RT_TRY(rt_deconv_shape_check(s, out));
    if (s->n == 0) return RT_OK;
    char desc[RT_DNNL_DESC_LEN];
    deconv_desc(s, what, desc, sizeof desc);
    rt_dnnl_entry *e;
    RT_TRY(deconv_entry(kind, s, out, with_bias != 0, desc, &e));
    rt_dnnl_entry_plan_cached(e, w_cache, plan);
    return RT_OK;
}

rt_status rt_kernel_deconv_forward_plan(const rt_deconv_shape *s, rt_kernel_plan *plan) {
    return rt_kernel_deconv_forward_plan_cached(s, NULL, plan);
}

rt_status rt_kernel_deconv_forward_plan_cached(const rt_deconv_shape *s, rt_storage *w_cache, rt_kernel_plan *plan) {
    return deconv_plan(RT_DNNL_DECONV_FWD, "forward", s, s && s->has_bias, w_cache, plan,
                       "rt_kernel_deconv_forward_plan");
}

rt_status rt_kernel_deconv_backward_data_plan(const rt_deconv_shape *s, rt_kernel_plan *plan) {
    return rt_kernel_deconv_backward_data_plan_cached(s, NULL, plan);
}

rt_status rt_kernel_deconv_backward_data_plan_cached(const rt_deconv_shape *s, rt_storage *w_cache,
                                                     rt_kernel_plan *plan) {
    return deconv_plan(RT_DNNL_DECONV_BWD_DATA, "backward_data", s, 0, w_cache, plan,
                       "rt_kernel_deconv_backward_data_plan");
}

rt_status rt_kernel_deconv_backward_weights_plan(const rt_deconv_shape *s, int with_db, rt_kernel_plan *plan) {
    return deconv_plan(RT_DNNL_DECONV_BWD_WEIGHTS, "backward_weights", s, with_db, NULL, plan,
                       "rt_kernel_deconv_backward_weights_plan");
}

rt_status rt_kernel_deconv_forward(const rt_deconv_shape *s, const float *x, const float *w, const float *b,
                                   float *y) {
    return rt_kernel_deconv_forward_cached(s, x, w, NULL, b, y);
}

rt_status rt_kernel_deconv_forward_cached(const rt_deconv_shape *s, const float *x, const float *w,
                                          rt_storage *w_cache, const float *b, float *y) {
    RT_TRY(rt_deconv_shape_check(s, NULL));
    char desc[RT_DNNL_DESC_LEN];
    deconv_desc(s, "forward", desc, sizeof desc);
    if (!x || !w || !y || (s->has_bias && !b))
        return rt_error_set(RT_ERR_INVALID_ARG, "%s: x, w, y%s must be non-NULL", desc, s->has_bias ? " and b" : "");
    if (!s->has_bias && b) return rt_error_set(RT_ERR_INVALID_ARG, "%s: b given but has_bias is 0", desc);
    rt_kernel_plan p;
    RT_TRY(rt_kernel_deconv_forward_plan_cached(s, w_cache, &p));
    if (!p.entry) return RT_OK; /* n == 0 */
    void *ptrs[4] = {(void *)x, (void *)w, y, (void *)b};
    return rt_dnnl_entry_exec_cached(p.entry, ptrs, w_cache);
}

rt_status rt_kernel_deconv_backward_data(const rt_deconv_shape *s, const float *w, const float *dy, float *dx) {
    return rt_kernel_deconv_backward_data_cached(s, w, NULL, dy, dx);
}

rt_status rt_kernel_deconv_backward_data_cached(const rt_deconv_shape *s, const float *w, rt_storage *w_cache,
                                                const float *dy, float *dx) {
    RT_TRY(rt_deconv_shape_check(s, NULL));
    char desc[RT_DNNL_DESC_LEN];
    deconv_desc(s, "backward_data", desc, sizeof desc);
    if (!w || !dy || !dx) return rt_error_set(RT_ERR_INVALID_ARG, "%s: w, dy, dx must be non-NULL", desc);
    rt_kernel_plan p;
    RT_TRY(rt_kernel_deconv_backward_data_plan_cached(s, w_cache, &p));
    if (!p.entry) return RT_OK;
    void *ptrs[3] = {(void *)dy, (void *)w, dx};
    return rt_dnnl_entry_exec_cached(p.entry, ptrs, w_cache);
}

rt_status rt_kernel_deconv_backward_weights(const rt_deconv_shape *s, const float *x, const float *dy, float *dw,
                                            float *db) {
    RT_TRY(rt_deconv_shape_check(s, NULL));
    char desc[RT_DNNL_DESC_LEN];
    deconv_desc(s, "backward_weights", desc, sizeof desc);
    if (!x || !dy || !dw) return rt_error_set(RT_ERR_INVALID_ARG, "%s: x, dy, dw must be non-NULL", desc);
    if (s->n == 0) { /* empty batch: zero gradients */
        int64_t nw = s->c_in * (s->c_out / s->groups);
        for (int i = 0; i < s->nsp; i++) nw *= s->k[i];
        memset(dw, 0, sizeof(float) * (size_t)nw);
        if (db) memset(db, 0, sizeof(float) * (size_t)s->c_out);
        return RT_OK;
    }
    rt_kernel_plan p;
    RT_TRY(rt_kernel_deconv_backward_weights_plan(s, db != NULL, &p));
    void *ptrs[4] = {(void *)x, (void *)dy, dw, db};
    return rt_dnnl_entry_exec(p.entry, ptrs);
}
