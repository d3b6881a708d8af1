/* Pooling kernels on oneDNN; see pool.h. The caller's layout (plain or
 * blocked) is used directly, no reorders. */
#include "kernels/pool.h"

#include <stdio.h>
#include <string.h>

#include "kernels/dnnl_common.h"

void rt_pool_out_size(const rt_pool_shape *s, int64_t out[3]) {
    if (!out) return;
    for (int i = 0; i < 3; i++) out[i] = 1;
    if (!s || (s->nsp != 2 && s->nsp != 3)) return;
    for (int i = 0; i < s->nsp; i++) {
        int64_t num = s->in[i] + 2 * s->pad[i] - s->k[i];
        out[i] = (s->stride[i] <= 0 || num < 0) ? 0 : num / s->stride[i] + 1;
    }
}

static const char *dims_str(char *buf, size_t n, const int64_t *v, int nsp) {
    if (nsp == 3)
        snprintf(buf, n, "[%lld,%lld,%lld]", (long long)v[0], (long long)v[1], (long long)v[2]);
    else
        snprintf(buf, n, "[%lld,%lld]", (long long)v[0], (long long)v[1]);
    return buf;
}

static void pool_desc(const rt_pool_shape *s, const char *name, const char *what, char *buf,
                      size_t n) {
    char a[4][72];
    int d = s->nsp;
    snprintf(buf, n, "%s%dd%s%s (n=%lld c=%lld in=%s k=%s stride=%s pad=%s)", name, d,
             *what ? " " : "", what,
             (long long)s->n, (long long)s->c, dims_str(a[0], 72, s->in, d),
             dims_str(a[1], 72, s->k, d), dims_str(a[2], 72, s->stride, d),
             dims_str(a[3], 72, s->pad, d));
    if (s->layout == RT_LAYOUT_BLOCKED) {
        size_t l = strlen(buf);
        if (l > 0 && l + 1 < n) snprintf(buf + l - 1, n - (l - 1), " layout=blocked)");
    }
}

rt_status rt_pool_shape_check(const rt_pool_shape *s, int64_t out[3]) {
    if (!s) return rt_error_set(RT_ERR_INVALID_ARG, "pool: shape is NULL");
    if (s->nsp != 2 && s->nsp != 3)
        return rt_error_set(RT_ERR_INVALID_ARG,
                            "pool: nsp=%d spatial dims; only 2 or 3 are supported", s->nsp);
    char d[RT_DNNL_DESC_LEN];
    pool_desc(s, "pool", "", d, sizeof d);
    if (s->n < 0 || s->c < 1)
        return rt_error_set(RT_ERR_INVALID_ARG, "%s: n must be >= 0 and c >= 1", d);
    for (int i = 0; i < s->nsp; i++) {
        if (s->in[i] < 1 || s->k[i] < 1 || s->stride[i] < 1 || s->pad[i] < 0)
            return rt_error_set(RT_ERR_INVALID_ARG,
                                "%s: spatial dim %d needs in, k, stride >= 1 and pad >= 0", d, i);
        if (s->pad[i] > s->k[i] / 2)
            return rt_error_set(RT_ERR_INVALID_ARG,
                                "%s: pad=%lld in spatial dim %d is more than half the kernel "
                                "size %lld (PyTorch rejects this too)",
                                d, (long long)s->pad[i], i, (long long)s->k[i]);
    }
    RT_TRY(rt_dnnl_layout_check(s->layout, s->c, "x, y, dx, dy", d));
    int64_t o[3];
    rt_pool_out_size(s, o);
    for (int i = 0; i < s->nsp; i++)
        if (o[i] <= 0)
            return rt_error_set(RT_ERR_SHAPE,
                                "%s: output size of spatial dim %d is %lld; the padded input "
                                "(%lld) is smaller than the kernel (%lld)",
                                d, i, (long long)o[i], (long long)(s->in[i] + 2 * s->pad[i]),
                                (long long)s->k[i]);
    if (out) memcpy(out, o, sizeof o);
    return RT_OK;
}

typedef struct pool_geom {
    dnnl_dims_t strides, kernel, pad_l, pad_r;
    dnnl_memory_desc_t src, dst;
} pool_geom;

static rt_status pool_geom_init(const rt_pool_shape *s, const int64_t out[3], pool_geom *g,
                                const char *desc) {
    memset(g, 0, sizeof *g);
    int64_t src[5] = {s->n, s->c}, dst[5] = {s->n, s->c};
    for (int i = 0; i < s->nsp; i++) {
        src[2 + i] = s->in[i];
        dst[2 + i] = out[i];
        g->strides[i] = s->stride[i];
        g->kernel[i] = s->k[i];
        g->pad_l[i] = s->pad[i];
        g->pad_r[i] = s->pad[i]; /* symmetric: oneDNN's size check is PyTorch's floor formula */
    }
    RT_TRY(rt_dnnl_md_layout(&g->src, 2 + s->nsp, src, s->layout, desc));
    RT_TRY(rt_dnnl_md_layout(&g->dst, 2 + s->nsp, dst, s->layout, desc));
    return RT_OK;
}

static void pool_key(rt_dnnl_key *k, rt_dnnl_kind kind, const rt_pool_shape *s) {
    rt_dnnl_key_init(k, kind);
    rt_dnnl_key_push(k, s->nsp);
    rt_dnnl_key_push(k, s->n);
    rt_dnnl_key_push(k, s->c);
    rt_dnnl_key_push(k, s->layout);
    for (int i = 0; i < s->nsp; i++) {
        rt_dnnl_key_push(k, s->in[i]);
        rt_dnnl_key_push(k, s->k[i]);
        rt_dnnl_key_push(k, s->stride[i]);
        rt_dnnl_key_push(k, s->pad[i]);
    }
}

/* Forward or backward pool pd (backward when `hint` is non-NULL). */
static rt_status pool_pd(const pool_geom *g, dnnl_prop_kind_t prop, dnnl_alg_kind_t alg,
                         const_dnnl_primitive_desc_t hint, const char *desc,
                         dnnl_primitive_desc_t *pd) {
    *pd = NULL;
    dnnl_engine_t eng;
    RT_TRY(rt_dnnl_engine(&eng));
    dnnl_pooling_desc_t d;
    dnnl_status_t st =
        hint ? dnnl_pooling_backward_desc_init(&d, alg, &g->src, &g->dst, g->strides, g->kernel,
                                               g->pad_l, g->pad_r)
             : dnnl_pooling_forward_desc_init(&d, prop, alg, &g->src, &g->dst, g->strides,
                                              g->kernel, g->pad_l, g->pad_r);
    if (st != dnnl_success) return rt_dnnl_fail(st, "pooling descriptor initialisation", desc);
    dnnl_primitive_attr_t attr;
    RT_TRY(rt_dnnl_attr_user_scratchpad(&attr, desc));
    st = dnnl_primitive_desc_create(pd, &d, attr, eng, hint);
    dnnl_primitive_attr_destroy(attr);
    if (st != dnnl_success) {
        *pd = NULL;
        return rt_dnnl_fail(st, "pooling primitive descriptor creation", desc);
    }
    return RT_OK;
}

/* Finds or creates the forward entry of `kind` (max train/infer, avg). */
static rt_status pool_fwd_entry(const rt_pool_shape *s, const int64_t out[3], rt_dnnl_kind kind,
                                const char *desc, rt_dnnl_entry **e) {
    rt_dnnl_key key;
    pool_key(&key, kind, s);
    *e = rt_dnnl_cache_find(&key);
    if (*e) return RT_OK;
    pool_geom g;
    RT_TRY(pool_geom_init(s, out, &g, desc));
    dnnl_alg_kind_t alg = kind == RT_DNNL_AVGPOOL_FWD ? dnnl_pooling_avg_include_padding
                                                      : dnnl_pooling_max;
    dnnl_prop_kind_t prop =
        kind == RT_DNNL_MAXPOOL_FWD_INFER ? dnnl_forward_inference : dnnl_forward_training;
    dnnl_primitive_desc_t pd;
    RT_TRY(pool_pd(&g, prop, alg, NULL, desc, &pd));
    rt_dnnl_argspec specs[3] = {{DNNL_ARG_SRC, 0, &g.src},
                                {DNNL_ARG_DST, 1, &g.dst},
                                {DNNL_ARG_WORKSPACE, 1, NULL}};
    return rt_dnnl_entry_create(&key, desc, pd, NULL, kind == RT_DNNL_MAXPOOL_FWD_TRAIN ? 3 : 2,
                                specs, e);
}

static rt_status pool_bwd_entry(const rt_pool_shape *s, const int64_t out[3], rt_dnnl_kind kind,
                                const char *desc, rt_dnnl_entry **e) {
    rt_dnnl_key key;
    pool_key(&key, kind, s);
    *e = rt_dnnl_cache_find(&key);
    if (*e) return RT_OK;
    pool_geom g;
    RT_TRY(pool_geom_init(s, out, &g, desc));
    int is_max = kind == RT_DNNL_MAXPOOL_BWD;
    dnnl_alg_kind_t alg = is_max ? dnnl_pooling_max : dnnl_pooling_avg_include_padding;
    dnnl_primitive_desc_t hint, pd;
    RT_TRY(pool_pd(&g, dnnl_forward_training, alg, NULL, desc, &hint));
    rt_status rs = pool_pd(&g, dnnl_backward_data, alg, hint, desc, &pd);
    if (rs != RT_OK) {
        dnnl_primitive_desc_destroy(hint);
        return rs;
    }
    rt_dnnl_argspec specs[3] = {{DNNL_ARG_DIFF_DST, 0, &g.dst},
                                {DNNL_ARG_DIFF_SRC, 1, &g.src},
                                {DNNL_ARG_WORKSPACE, 0, NULL}};
    return rt_dnnl_entry_create(&key, desc, pd, hint, is_max ? 3 : 2, specs, e);
}

/* The plan of one pooling kernel: shape check, entry of `kind` found or
 * created, its block. */
static rt_status pool_plan(const rt_pool_shape *s, rt_dnnl_kind kind, rt_kernel_plan *plan, const char *fn) {
    int64_t out[3];
    RT_TRY(rt_dnnl_plan_check(plan, fn));
    rt_dnnl_plan_init(plan);
    RT_TRY(rt_pool_shape_check(s, out));
    if (s->n == 0) return RT_OK;
    int avg = kind == RT_DNNL_AVGPOOL_FWD || kind == RT_DNNL_AVGPOOL_BWD;
    int bwd = kind == RT_DNNL_MAXPOOL_BWD || kind == RT_DNNL_AVGPOOL_BWD;
    char desc[RT_DNNL_DESC_LEN];
    pool_desc(s, avg ? "avgpool" : "maxpool", bwd ? "backward" : "forward", desc, sizeof desc);
    rt_dnnl_entry *e;
    RT_TRY(bwd ? pool_bwd_entry(s, out, kind, desc, &e) : pool_fwd_entry(s, out, kind, desc, &e));
    rt_dnnl_entry_plan(e, plan);
    return RT_OK;
}

rt_status rt_kernel_maxpool_forward_plan(const rt_pool_shape *s, int with_workspace, rt_kernel_plan *plan) {
    return pool_plan(s, with_workspace ? RT_DNNL_MAXPOOL_FWD_TRAIN : RT_DNNL_MAXPOOL_FWD_INFER, plan,
                     "rt_kernel_maxpool_forward_plan");
}

rt_status rt_kernel_maxpool_backward_plan(const rt_pool_shape *s, rt_kernel_plan *plan) {
    return pool_plan(s, RT_DNNL_MAXPOOL_BWD, plan, "rt_kernel_maxpool_backward_plan");
}

rt_status rt_kernel_avgpool_forward_plan(const rt_pool_shape *s, rt_kernel_plan *plan) {
    return pool_plan(s, RT_DNNL_AVGPOOL_FWD, plan, "rt_kernel_avgpool_forward_plan");
}

rt_status rt_kernel_avgpool_backward_plan(const rt_pool_shape *s, rt_kernel_plan *plan) {
    return pool_plan(s, RT_DNNL_AVGPOOL_BWD, plan, "rt_kernel_avgpool_backward_plan");
}

size_t rt_kernel_maxpool_workspace_bytes(const rt_pool_shape *s) {
    rt_kernel_plan p;
    if (rt_kernel_maxpool_forward_plan(s, 1, &p) != RT_OK) return 0;
    return p.workspace_bytes;
}

/* Checks a call's buffers (shape first, for the message). */
static rt_status pool_need(const rt_pool_shape *s, const char *name, const char *what, int ok,
                           const char *which) {
    RT_TRY(rt_pool_shape_check(s, NULL));
    if (ok) return RT_OK;
    char desc[RT_DNNL_DESC_LEN];
    pool_desc(s, name, what, desc, sizeof desc);
    return rt_error_set(RT_ERR_INVALID_ARG, "%s: %s must be non-NULL", desc, which);
}

rt_status rt_kernel_maxpool_forward(const rt_pool_shape *s, const float *x, float *y,
                                    void *workspace) {
    RT_TRY(pool_need(s, "maxpool", "forward", x && y, "x and y"));
    rt_kernel_plan p;
    RT_TRY(rt_kernel_maxpool_forward_plan(s, workspace != NULL, &p));
    if (!p.entry) return RT_OK; /* n == 0 */
    void *ptrs[3] = {(void *)x, y, workspace};
    return rt_dnnl_entry_exec(p.entry, ptrs);
}

rt_status rt_kernel_maxpool_backward(const rt_pool_shape *s, const float *dy,
                                     const void *workspace, float *dx) {
    RT_TRY(pool_need(s, "maxpool", "backward", dy && workspace && dx,
                     "dy, workspace and dx (the workspace comes from rt_kernel_maxpool_forward)"));
    rt_kernel_plan p;
    RT_TRY(rt_kernel_maxpool_backward_plan(s, &p));
    if (!p.entry) return RT_OK;
    void *ptrs[3] = {(void *)dy, dx, (void *)workspace};
    return rt_dnnl_entry_exec(p.entry, ptrs);
}

rt_status rt_kernel_avgpool_forward(const rt_pool_shape *s, const float *x, float *y) {
    RT_TRY(pool_need(s, "avgpool", "forward", x && y, "x and y"));
    rt_kernel_plan p;
    RT_TRY(rt_kernel_avgpool_forward_plan(s, &p));
    if (!p.entry) return RT_OK;
    void *ptrs[2] = {(void *)x, y};
    return rt_dnnl_entry_exec(p.entry, ptrs);
}

rt_status rt_kernel_avgpool_backward(const rt_pool_shape *s, const float *dy, float *dx) {
    RT_TRY(pool_need(s, "avgpool", "backward", dy && dx, "dy and dx"));
    rt_kernel_plan p;
    RT_TRY(rt_kernel_avgpool_backward_plan(s, &p));
    if (!p.entry) return RT_OK;
    void *ptrs[2] = {(void *)dy, dx};
    return rt_dnnl_entry_exec(p.entry, ptrs);
}
