/* Batch normalisation on oneDNN (dnnl_use_scale / dnnl_use_shift flags with
 * separate scale and shift memories); see norm.h. */
#include "kernels/norm.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/mem.h"
#include "kernels/dnnl_common.h"
#include "kernels/vec.h"

static void bn_desc(const rt_bn_shape *s, const char *what, char *buf, size_t n) {
    if (s->layout == RT_LAYOUT_BLOCKED)
        snprintf(buf, n,
                 "batchnorm %s (n=%lld c=%lld spatial=%lld eps=%g layout=blocked nsp=%d "
                 "sp=[%lld,%lld,%lld]%s)",
                 what, (long long)s->n, (long long)s->c, (long long)s->spatial, (double)s->eps,
                 s->nsp, (long long)s->sp[0], (long long)s->sp[1],
                 (long long)(s->nsp == 3 ? s->sp[2] : 1), s->bf16 ? " bf16" : "");
    else
        snprintf(buf, n, "batchnorm %s (n=%lld c=%lld spatial=%lld eps=%g%s)", what,
                 (long long)s->n, (long long)s->c, (long long)s->spatial, (double)s->eps, s->bf16 ? " bf16" : "");
}

static rt_status bn_check(const rt_bn_shape *s, int training, const char *what, char *desc) {
    if (!s) return rt_error_set(RT_ERR_INVALID_ARG, "batchnorm %s: shape is NULL", what);
    bn_desc(s, what, desc, RT_DNNL_DESC_LEN);
    if (s->n < 0 || s->c < 1 || s->spatial < 1)
        return rt_error_set(RT_ERR_INVALID_ARG, "%s: need n >= 0, c >= 1 and spatial >= 1", desc);
    if (!(s->eps >= 0.0f) || isinf(s->eps))
        return rt_error_set(RT_ERR_INVALID_ARG, "%s: eps must be finite and >= 0", desc);
    RT_TRY(rt_dnnl_layout_check(s->layout, s->c, "x, y, dx, dy", desc));
    if (s->layout == RT_LAYOUT_BLOCKED) {
        if (s->nsp != 2 && s->nsp != 3)
            return rt_error_set(RT_ERR_INVALID_ARG,
                                "%s: the blocked layout needs nsp = 2 or 3 spatial dims (got %d)",
                                desc, s->nsp);
        int64_t p = 1;
        for (int i = 0; i < s->nsp; i++) {
            if (s->sp[i] < 1)
                return rt_error_set(RT_ERR_INVALID_ARG, "%s: spatial dim %d must be >= 1", desc,
                                    i);
            p *= s->sp[i];
        }
        if (p != s->spatial)
            return rt_error_set(RT_ERR_INVALID_ARG,
                                "%s: spatial=%lld is not the product of sp (%lld)", desc,
                                (long long)s->spatial, (long long)p);
    }
    if (training && s->n * s->spatial <= 1)
        return rt_error_set(RT_ERR_SHAPE,
                            "%s: expected more than 1 value per channel when training (n*spatial "
                            "= %lld); use a larger batch or eval mode",
                            desc, (long long)(s->n * s->spatial));
    return RT_OK;
}

/* data: the caller's layout; prim: the primitive's (NHWC for plain data). */
typedef struct bn_geom {
    dnnl_memory_desc_t data, prim, stat;
} bn_geom;

static rt_status bn_geom_init(const rt_bn_shape *s, bn_geom *g, const char *desc) {
    int64_t d[5] = {s->n, s->c, s->spatial, 1, 1}, c[1] = {s->c};
    if (s->layout == RT_LAYOUT_BLOCKED) {
        for (int i = 0; i < s->nsp; i++) d[2 + i] = s->sp[i];
        RT_TRY(rt_dnnl_md_layout(&g->data, 2 + s->nsp, d, RT_LAYOUT_BLOCKED, desc));
        if (s->bf16) g->data.data_type = dnnl_bf16;
        g->prim = g->data;
    } else {
        RT_TRY(rt_dnnl_md(&g->data, 4, d, 0, desc));
        if (s->bf16) g->data.data_type = dnnl_bf16;
        /* oneDNN 2.6 runs batch norm on plain NCHW with a generic C++ kernel
         * (ncsp_bnorm) that took 55% of a revnet_small step. Its JIT kernels
         * want channels innermost, so the primitive works on NHWC (any
         * channel count) and cached reorders convert around it. */
        dnnl_dims_t dd = {d[0], d[1], d[2], d[3]};
        if (dnnl_memory_desc_init_by_tag(&g->prim, 4, dd, s->bf16 ? dnnl_bf16 : dnnl_f32, dnnl_acdb) !=
            dnnl_success)
            return rt_error_set(RT_ERR_BACKEND, "%s: cannot describe the NHWC batch-norm layout", desc);
    }
    RT_TRY(rt_dnnl_md(&g->stat, 1, c, 0, desc));
    return RT_OK;
}

/* Batch mean and biased variance per channel, two passes with double
 * accumulators (PyTorch's CPU kernel is two-pass too), for plain
 * (n, c, spatial) and blocked (n, c/B, spatial, B) data. oneDNN's own
 * statistics are float and, on NHWC, much less exact: the inputs reversible
 * blocks rebuild drifted up to 2e-3 relative instead of 1e-5 on
 * revnet_small, enough to fail the drift check. So oneDNN only normalises,
 * with these (dnnl_use_global_stats); its backward takes them as inputs. */
/* Adds image i's part of channel group g (one channel plain, B =
 * rt_layout_block() channels blocked) to a: sums of x, or of (x - mean)^2
 * when mean is given. The loops are kernels/vec.h's, built per ISA. */
static void bn_partial_sums(const rt_bn_shape *s, const void *x, int64_t i, int64_t g, const double *mean,
                            double *a) {
    const int64_t sp = s->spatial;
    const int B = s->layout == RT_LAYOUT_BLOCKED ? rt_layout_block() : 1;
    /* the first element of image i's channel group g, in either layout */
    const int64_t at = (i * (s->c / B) + g) * sp * B;
    const double *m = mean ? mean + g * B : NULL;
    if (s->bf16) {
        const uint16_t *p = (const uint16_t *)x + at;
        if (B == 1) rt_vec_moments_plain_bf16(sp, p, m, a);
        else rt_vec_moments_blocked_bf16(sp, B, p, m, a);
        return;
    }
    const float *p = (const float *)x + at;
    if (B == 1) rt_vec_moments_plain(sp, p, m, a);
    else rt_vec_moments_blocked(sp, B, p, m, a);
}

/* acc[c] = per-channel sums over images and space (see bn_partial_sums). */
static void bn_channel_sums(const rt_bn_shape *s, const void *x, const double *mean, double *acc) {
    const int64_t n = s->n, c = s->c;
    const int blocked = s->layout == RT_LAYOUT_BLOCKED;
    const int64_t groups = blocked ? c / rt_layout_block() : c, inner = blocked ? rt_layout_block() : 1;
    const int par = n * c * s->spatial > 32768;
    for (int64_t ch = 0; ch < c; ch++) acc[ch] = 0.0;
    if (groups >= 8 || c > 1024) {
        /* enough channel groups to share out: each thread owns whole groups */
#pragma omp parallel for schedule(static) if (par)
        for (int64_t g = 0; g < groups; g++)
            for (int64_t i = 0; i < n; i++) bn_partial_sums(s, x, i, g, mean, acc + g * inner);
        return;
    }
    /* few channels (at most 1024, so each thread's private copy of acc is at
     * most 8 KiB of stack): share out the images too */
#pragma omp parallel for collapse(2) schedule(static) reduction(+ : acc[:c]) if (par)
    for (int64_t i = 0; i < n; i++)
        for (int64_t g = 0; g < groups; g++) bn_partial_sums(s, x, i, g, mean, acc + g * inner);
}

static rt_status bn_batch_stats(const rt_bn_shape *s, const void *x, float *mean, float *var) {
    /* 16 KiB of stack up to 1024 channels; wider layers (ResNet-50's last
     * stage has 2048) take 16 bytes per channel from malloc: bookkeeping of
     * the kernel, like oneDNN's own, not a tensor the tracker accounts. */
    double stack[2 * 1024], *buf = s->c <= 1024 ? stack : malloc(2 * sizeof(double) * (size_t)s->c);
    if (!buf) return rt_error_set(RT_ERR_OOM, "batch norm: out of memory for %lld channel statistics",
                                  (long long)s->c);
    double *mu = buf, *acc = buf + s->c;
    const double count = (double)(s->n * s->spatial);
    bn_channel_sums(s, x, NULL, acc);
    for (int64_t ch = 0; ch < s->c; ch++) mu[ch] = acc[ch] / count;
    bn_channel_sums(s, x, mu, acc);
    for (int64_t ch = 0; ch < s->c; ch++) {
        mean[ch] = (float)mu[ch];
        var[ch] = (float)(acc[ch] / count);
    }
    if (buf != stack) free(buf);
    return RT_OK;
}

static void bn_key(rt_dnnl_key *k, rt_dnnl_kind kind, const rt_bn_shape *s, unsigned flags,
                   int prop) {
    rt_dnnl_key_init(k, kind);
    rt_dnnl_key_push(k, s->n);
    rt_dnnl_key_push(k, s->c);
    rt_dnnl_key_push(k, s->spatial);
    rt_dnnl_key_push(k, s->layout);
    if (s->layout == RT_LAYOUT_BLOCKED) {
        rt_dnnl_key_push(k, s->nsp);
        for (int i = 0; i < s->nsp; i++) rt_dnnl_key_push(k, s->sp[i]);
    }
    rt_dnnl_key_push_f32(k, s->eps);
    rt_dnnl_key_push(k, s->bf16);
    rt_dnnl_key_push(k, (int64_t)flags);
    rt_dnnl_key_push(k, prop);
}

/* Forward (hint == NULL) or backward pd. */
static rt_status bn_pd(const rt_bn_shape *s, const bn_geom *g, dnnl_prop_kind_t prop,
                       unsigned flags, const_dnnl_primitive_desc_t hint, const char *desc,
                       dnnl_primitive_desc_t *pd) {
    *pd = NULL;
    dnnl_engine_t eng;
    RT_TRY(rt_dnnl_engine(&eng));
    dnnl_batch_normalization_desc_t d;
    dnnl_status_t st =
        hint ? dnnl_batch_normalization_backward_desc_init(&d, prop, &g->prim, &g->prim, s->eps,
                                                           flags)
             : dnnl_batch_normalization_forward_desc_init(&d, prop, &g->prim, s->eps, flags);
    if (st != dnnl_success)
        return rt_dnnl_fail(st, "batch normalization descriptor initialisation", desc);
    dnnl_primitive_attr_t attr;
    RT_TRY(rt_dnnl_attr_user_scratchpad(&attr, desc));
    st = dnnl_primitive_desc_create(pd, &d, attr, eng, hint);
    dnnl_primitive_attr_destroy(attr);
    if (st != dnnl_success) {
        *pd = NULL;
        return rt_dnnl_fail(st, "batch normalization primitive descriptor creation", desc);
    }
    return RT_OK;
}

/* A forward entry that normalises with given statistics (always
 * dnnl_use_global_stats: training statistics come from bn_batch_stats).
 * kind/prop: RT_DNNL_BN_FWD_TRAIN with dnnl_forward_training (which the
 * fused ReLU needs for its workspace) or RT_DNNL_BN_FWD_EVAL with
 * dnnl_forward_inference. flags: use_scale / use_shift / fuse_norm_relu;
 * with relu the entry's last argument is the workspace (DNNL_ARG_WORKSPACE,
 * in the primitive's own format, size in e->workspace_bytes). */
static rt_status bn_fwd_entry(const rt_bn_shape *s, rt_dnnl_kind kind, dnnl_prop_kind_t prop,
                              unsigned flags, const char *desc, rt_dnnl_entry **out) {
    flags |= dnnl_use_global_stats;
    rt_dnnl_key key;
    bn_key(&key, kind, s, flags, prop);
    *out = rt_dnnl_cache_find(&key);
    if (*out) return RT_OK;
    bn_geom g;
    RT_TRY(bn_geom_init(s, &g, desc));
    dnnl_primitive_desc_t pd;
    RT_TRY(bn_pd(s, &g, prop, flags, NULL, desc, &pd));
    rt_dnnl_argspec specs[7];
    int na = 0;
    specs[na++] = (rt_dnnl_argspec){DNNL_ARG_SRC, 0, &g.data};
    specs[na++] = (rt_dnnl_argspec){DNNL_ARG_DST, 1, &g.data};
    specs[na++] = (rt_dnnl_argspec){DNNL_ARG_MEAN, 0, &g.stat};
    specs[na++] = (rt_dnnl_argspec){DNNL_ARG_VARIANCE, 0, &g.stat};
    if (flags & dnnl_use_scale) specs[na++] = (rt_dnnl_argspec){DNNL_ARG_SCALE, 0, &g.stat};
    if (flags & dnnl_use_shift) specs[na++] = (rt_dnnl_argspec){DNNL_ARG_SHIFT, 0, &g.stat};
    if (flags & dnnl_fuse_norm_relu) specs[na++] = (rt_dnnl_argspec){DNNL_ARG_WORKSPACE, 1, NULL};
    return rt_dnnl_entry_create(&key, desc, pd, NULL, na, specs, out);
}

/* The flags of a forward entry from the affine inputs given. */
static unsigned bn_fwd_flags(int has_w, int has_b, int relu) {
    return (has_w ? dnnl_use_scale : 0u) | (has_b ? dnnl_use_shift : 0u) | (relu ? dnnl_fuse_norm_relu : 0u);
}

static rt_status bn_forward_train_plan(const rt_bn_shape *s, int relu, int has_w, int has_b,
                                       rt_kernel_plan *plan, const char *fn) {
    RT_TRY(rt_dnnl_plan_check(plan, fn));
    rt_dnnl_plan_init(plan);
    char desc[RT_DNNL_DESC_LEN];
    RT_TRY(bn_check(s, 1, relu ? "relu forward_train" : "forward_train", desc));
    rt_dnnl_entry *e;
    RT_TRY(bn_fwd_entry(s, RT_DNNL_BN_FWD_TRAIN, dnnl_forward_training, bn_fwd_flags(has_w, has_b, relu), desc,
                        &e));
    rt_dnnl_entry_plan(e, plan);
    return RT_OK;
}

rt_status rt_kernel_batchnorm_forward_train_plan(const rt_bn_shape *s, int has_weight, int has_bias,
                                                 rt_kernel_plan *plan) {
    return bn_forward_train_plan(s, 0, has_weight, has_bias, plan, "rt_kernel_batchnorm_forward_train_plan");
}

rt_status rt_kernel_batchnorm_relu_forward_train_plan(const rt_bn_shape *s, int has_weight, int has_bias,
                                                      rt_kernel_plan *plan) {
    return bn_forward_train_plan(s, 1, has_weight, has_bias, plan, "rt_kernel_batchnorm_relu_forward_train_plan");
}

static rt_status bn_forward_train(const rt_bn_shape *s, int relu, const void *x,
                                  const float *weight, const float *bias, void *y, float *mean,
                                  float *var, void *workspace) {
    char desc[RT_DNNL_DESC_LEN];
    RT_TRY(bn_check(s, 1, relu ? "relu forward_train" : "forward_train", desc));
    if (!x || !y || !mean || !var || (relu && !workspace))
        return rt_error_set(RT_ERR_INVALID_ARG,
                            relu ? "%s: x, y, mean, var and workspace must be non-NULL"
                                 : "%s: x, y, mean and var must be non-NULL",
                            desc);
    rt_kernel_plan p;
    RT_TRY(bn_forward_train_plan(s, relu, weight != NULL, bias != NULL, &p, "batchnorm forward_train"));
    if (!s->given_stats) RT_TRY(bn_batch_stats(s, x, mean, var));
    void *ptrs[7] = {(void *)x, y, mean, var};
    int na = 4;
    if (weight) ptrs[na++] = (void *)weight;
    if (bias) ptrs[na++] = (void *)bias;
    if (relu) ptrs[na++] = workspace;
    return rt_dnnl_entry_exec(p.entry, ptrs);
}

rt_status rt_kernel_batchnorm_forward_train(const rt_bn_shape *s, const void *x,
                                            const float *weight, const float *bias, void *y,
                                            float *mean, float *var) {
    return bn_forward_train(s, 0, x, weight, bias, y, mean, var, NULL);
}

rt_status rt_kernel_batchnorm_relu_forward_train(const rt_bn_shape *s, const void *x,
                                                 const float *weight, const float *bias, void *y,
                                                 float *mean, float *var, void *workspace) {
    return bn_forward_train(s, 1, x, weight, bias, y, mean, var, workspace);
}

size_t rt_kernel_batchnorm_relu_workspace_bytes(const rt_bn_shape *s) {
    /* The workspace does not depend on the affine flags; ask the entry the op runs. */
    rt_kernel_plan p;
    if (rt_kernel_batchnorm_relu_forward_train_plan(s, 1, 1, &p) != RT_OK) return 0;
    return p.workspace_bytes;
}

rt_status rt_kernel_batchnorm_forward_eval_plan(const rt_bn_shape *s, int has_weight, int has_bias,
                                                rt_kernel_plan *plan) {
    RT_TRY(rt_dnnl_plan_check(plan, "rt_kernel_batchnorm_forward_eval_plan"));
    rt_dnnl_plan_init(plan);
    char desc[RT_DNNL_DESC_LEN];
    RT_TRY(bn_check(s, 0, "forward_eval", desc));
    if (s->n == 0) return RT_OK;
    rt_dnnl_entry *e;
    RT_TRY(bn_fwd_entry(s, RT_DNNL_BN_FWD_EVAL, dnnl_forward_inference, bn_fwd_flags(has_weight, has_bias, 0),
                        desc, &e));
    rt_dnnl_entry_plan(e, plan);
    return RT_OK;
}

rt_status rt_kernel_batchnorm_forward_eval(const rt_bn_shape *s, const void *x,
                                           const float *weight, const float *bias,
                                           const float *mean, const float *var, void *y) {
    char desc[RT_DNNL_DESC_LEN];
    RT_TRY(bn_check(s, 0, "forward_eval", desc));
    if (!x || !y || !mean || !var)
        return rt_error_set(RT_ERR_INVALID_ARG, "%s: x, y, mean and var must be non-NULL", desc);
    rt_kernel_plan p;
    RT_TRY(rt_kernel_batchnorm_forward_eval_plan(s, weight != NULL, bias != NULL, &p));
    if (!p.entry) return RT_OK; /* n == 0 */
    void *ptrs[6] = {(void *)x, y, (void *)mean, (void *)var};
    int na = 4;
    if (weight) ptrs[na++] = (void *)weight;
    if (bias) ptrs[na++] = (void *)bias;
    return rt_dnnl_entry_exec(p.entry, ptrs);
}

/* oneDNN 2.6 implements backward_data with dnnl_use_scale only for some
 * layouts, so any affine backward runs dnnl_backward (diff_scale always
 * computed; a weight gradient the caller does not want goes to a TEMP
 * vector). diff_shift needs dnnl_use_shift, whose shift (beta) input
 * oneDNN demands although its value enters no gradient: a second TEMP
 * vector. The plan's first block holds those vectors (allocated before the
 * primitive's block and freed after it). */
static rt_status bn_backward_plan(const rt_bn_shape *s, int relu, int has_w, int has_dw, int has_db,
                                  rt_kernel_plan *plan, const char *fn) {
    RT_TRY(rt_dnnl_plan_check(plan, fn));
    rt_dnnl_plan_init(plan);
    char desc[RT_DNNL_DESC_LEN];
    RT_TRY(bn_check(s, 1, relu ? "relu backward" : "backward", desc));
    if (has_dw && !has_w)
        return rt_error_set(RT_ERR_INVALID_ARG,
                            "%s: dweight requested but weight is NULL (affine=False has no "
                            "weight gradient)",
                            desc);
    int full = has_w || has_db;
    dnnl_prop_kind_t prop = full ? dnnl_backward : dnnl_backward_data;
    unsigned flags = (has_w ? dnnl_use_scale : 0u) | (has_db ? dnnl_use_shift : 0u) |
                     (relu ? dnnl_fuse_norm_relu : 0u);
    rt_dnnl_key key;
    bn_key(&key, RT_DNNL_BN_BWD, s, flags, prop);
    rt_dnnl_entry *e = rt_dnnl_cache_find(&key);
    if (!e) {
        bn_geom g;
        RT_TRY(bn_geom_init(s, &g, desc));
        dnnl_primitive_desc_t hint, pd;
        RT_TRY(bn_pd(s, &g, dnnl_forward_training, flags, NULL, desc, &hint));
        rt_status rs = bn_pd(s, &g, prop, flags, hint, desc, &pd);
        if (rs != RT_OK) {
            dnnl_primitive_desc_destroy(hint);
            return rs;
        }
        rt_dnnl_argspec specs[RT_DNNL_MAX_ARGS];
        int na = 0;
        specs[na++] = (rt_dnnl_argspec){DNNL_ARG_SRC, 0, &g.data};
        specs[na++] = (rt_dnnl_argspec){DNNL_ARG_DIFF_DST, 0, &g.data};
        specs[na++] = (rt_dnnl_argspec){DNNL_ARG_MEAN, 0, &g.stat};
        specs[na++] = (rt_dnnl_argspec){DNNL_ARG_VARIANCE, 0, &g.stat};
        specs[na++] = (rt_dnnl_argspec){DNNL_ARG_DIFF_SRC, 1, &g.data};
        if (has_w) specs[na++] = (rt_dnnl_argspec){DNNL_ARG_SCALE, 0, &g.stat};
        if (has_w && full) specs[na++] = (rt_dnnl_argspec){DNNL_ARG_DIFF_SCALE, 1, &g.stat};
        if (has_db) specs[na++] = (rt_dnnl_argspec){DNNL_ARG_SHIFT, 0, &g.stat};
        if (has_db) specs[na++] = (rt_dnnl_argspec){DNNL_ARG_DIFF_SHIFT, 1, &g.stat};
        if (relu) specs[na++] = (rt_dnnl_argspec){DNNL_ARG_WORKSPACE, 0, NULL};
        RT_TRY(rt_dnnl_entry_create(&key, desc, pd, hint, na, specs, &e));
    }
    size_t vec = sizeof(float) * (size_t)s->c;
    int need_dw = has_w && full && !has_dw, need_shift = has_db;
    plan->helper_bytes = vec * (size_t)(need_dw + need_shift);
    rt_dnnl_plan_add(plan, plan->helper_bytes, NULL); /* under the caller's op, as allocated */
    rt_dnnl_entry_plan(e, plan);
    return RT_OK;
}

rt_status rt_kernel_batchnorm_backward_plan(const rt_bn_shape *s, int has_weight, int want_dweight,
                                            int want_dbias, rt_kernel_plan *plan) {
    return bn_backward_plan(s, 0, has_weight, want_dweight, want_dbias, plan, "rt_kernel_batchnorm_backward_plan");
}

rt_status rt_kernel_batchnorm_relu_backward_plan(const rt_bn_shape *s, int has_weight, int want_dweight,
                                                 int want_dbias, rt_kernel_plan *plan) {
    return bn_backward_plan(s, 1, has_weight, want_dweight, want_dbias, plan,
                            "rt_kernel_batchnorm_relu_backward_plan");
}

static rt_status bn_backward(const rt_bn_shape *s, int relu, const void *x, const void *dy,
                             const float *mean, const float *var, const float *weight,
                             const void *workspace, void *dx, float *dweight, float *dbias) {
    char desc[RT_DNNL_DESC_LEN];
    RT_TRY(bn_check(s, 1, relu ? "relu backward" : "backward", desc));
    if (!x || !dy || !mean || !var || !dx || (relu && !workspace))
        return rt_error_set(RT_ERR_INVALID_ARG,
                            relu ? "%s: x, dy, mean, var, workspace and dx must be non-NULL (the "
                                   "workspace comes from rt_kernel_batchnorm_relu_forward_train)"
                                 : "%s: x, dy, mean, var and dx must be non-NULL",
                            desc);
    rt_kernel_plan p;
    RT_TRY(bn_backward_plan(s, relu, weight != NULL, dweight != NULL, dbias != NULL, &p, "batchnorm backward"));
    int full = weight || dbias, need_dw = weight && full && !dweight;
    float *tmp = NULL;
    if (p.helper_bytes) {
        RT_TRY(rt_mem_alloc(p.helper_bytes, RT_MEM_TEMP, (void **)&tmp));
        memset(tmp, 0, p.helper_bytes);
    }
    void *ptrs[RT_DNNL_MAX_ARGS] = {(void *)x, (void *)dy, (void *)mean, (void *)var, dx};
    int na = 5;
    if (weight) ptrs[na++] = (void *)weight;
    if (weight && full) ptrs[na++] = dweight ? dweight : tmp;
    if (dbias) ptrs[na++] = tmp + (need_dw ? s->c : 0);
    if (dbias) ptrs[na++] = dbias;
    if (relu) ptrs[na++] = (void *)workspace;
    rt_status rs = rt_dnnl_entry_exec(p.entry, ptrs);
    if (tmp) rt_mem_free(tmp, p.helper_bytes, RT_MEM_TEMP);
    return rs;
}

rt_status rt_kernel_batchnorm_backward(const rt_bn_shape *s, const void *x, const void *dy,
                                       const float *mean, const float *var, const float *weight,
                                       void *dx, float *dweight, float *dbias) {
    return bn_backward(s, 0, x, dy, mean, var, weight, NULL, dx, dweight, dbias);
}

rt_status rt_kernel_batchnorm_relu_backward(const rt_bn_shape *s, const void *x, const void *dy,
                                            const float *mean, const float *var,
                                            const float *weight, const void *workspace, void *dx,
                                            float *dweight, float *dbias) {
    return bn_backward(s, 1, x, dy, mean, var, weight, workspace, dx, dweight, dbias);
}
