/* Naive reference kernels; see reference.h. 2D shapes run as 3D with a
 * depth of 1. */
#include "kernels/reference.h"

#include <math.h>
#include <string.h>

/* A conv or pool geometry canonicalised to 3 spatial dims. */
typedef struct geo3 {
    int64_t in[3], out[3], k[3], st[3], pad[3], dil[3];
} geo3;

static void geo3_init(geo3 *g, int nsp, const int64_t *in, const int64_t *out, const int64_t *k,
                      const int64_t *st, const int64_t *pad, const int64_t *dil) {
    int o = 3 - nsp;
    for (int i = 0; i < 3; i++) {
        g->in[i] = g->out[i] = g->k[i] = g->st[i] = g->dil[i] = 1;
        g->pad[i] = 0;
    }
    for (int i = 0; i < nsp; i++) {
        g->in[o + i] = in[i];
        g->out[o + i] = out[i];
        g->k[o + i] = k[i];
        g->st[o + i] = st[i];
        g->pad[o + i] = pad[i];
        g->dil[o + i] = dil ? dil[i] : 1;
    }
}

static int64_t vol(const int64_t v[3]) { return v[0] * v[1] * v[2]; }

/* Input coordinate of output o, tap t in dim i (may be out of range). */
static int64_t tap(const geo3 *g, int i, int64_t o, int64_t t) {
    return o * g->st[i] - g->pad[i] + t * g->dil[i];
}

static int in_range(const geo3 *g, int i, int64_t v) { return v >= 0 && v < g->in[i]; }

/* The references index plain NCHW / NCDHW only. */
static rt_status ref_plain_only(const char *what, int nonplain) {
    if (nonplain)
        return rt_error_set(RT_ERR_INVALID_ARG,
                            "reference %s: only RT_LAYOUT_PLAIN is supported (reorder first)",
                            what);
    return RT_OK;
}

/* RT_ERR_INVALID_ARG naming buffer `p` of function `fn` when it is NULL. */
#define REF_NEED(fn, p)                                                                  \
    do {                                                                                 \
        if (!(p)) return rt_error_set(RT_ERR_INVALID_ARG, "%s: the buffer %s is NULL", fn, #p); \
    } while (0)

rt_status rt_ref_conv_forward(const rt_conv_shape *s, const float *x, const float *w,
                              const float *b, float *y) {
    int64_t out[3];
    RT_TRY(rt_conv_shape_check(s, out));
    RT_TRY(ref_plain_only("conv",
                          s->src_layout != RT_LAYOUT_PLAIN || s->dst_layout != RT_LAYOUT_PLAIN));
    REF_NEED("rt_ref_conv_forward", x);
    REF_NEED("rt_ref_conv_forward", w);
    REF_NEED("rt_ref_conv_forward", y);
    geo3 g;
    geo3_init(&g, s->nsp, s->in, out, s->k, s->stride, s->pad, s->dil);
    int64_t cig = s->c_in / s->groups, cog = s->c_out / s->groups;
    int64_t iv = vol(g.in), ov = vol(g.out), kv = vol(g.k);
    for (int64_t n = 0; n < s->n; n++)
        for (int64_t oc = 0; oc < s->c_out; oc++) {
            int64_t grp = oc / cog;
            for (int64_t od = 0; od < g.out[0]; od++)
                for (int64_t oh = 0; oh < g.out[1]; oh++)
                    for (int64_t ow = 0; ow < g.out[2]; ow++) {
                        double acc = (s->has_bias && b) ? b[oc] : 0.0;
                        for (int64_t ic = 0; ic < cig; ic++) {
                            const float *xc = x + (n * s->c_in + grp * cig + ic) * iv;
                            const float *wc = w + (oc * cig + ic) * kv;
                            for (int64_t kd = 0; kd < g.k[0]; kd++) {
                                int64_t id = tap(&g, 0, od, kd);
                                if (!in_range(&g, 0, id)) continue;
                                for (int64_t kh = 0; kh < g.k[1]; kh++) {
                                    int64_t ih = tap(&g, 1, oh, kh);
                                    if (!in_range(&g, 1, ih)) continue;
                                    for (int64_t kw = 0; kw < g.k[2]; kw++) {
                                        int64_t iw = tap(&g, 2, ow, kw);
                                        if (!in_range(&g, 2, iw)) continue;
                                        acc += (double)xc[(id * g.in[1] + ih) * g.in[2] + iw] *
                                               (double)wc[(kd * g.k[1] + kh) * g.k[2] + kw];
                                    }
                                }
                            }
                        }
                        y[(n * s->c_out + oc) * ov + (od * g.out[1] + oh) * g.out[2] + ow] =
                            (float)acc;
                    }
        }
    return RT_OK;
}

/* Output index o in dim i whose tap t reads input v, or -1. */
static int64_t out_of_tap(const geo3 *g, int i, int64_t v, int64_t t) {
    int64_t num = v + g->pad[i] - t * g->dil[i];
    if (num < 0 || num % g->st[i] != 0) return -1;
    int64_t o = num / g->st[i];
    return o < g->out[i] ? o : -1;
}

rt_status rt_ref_conv_backward_data(const rt_conv_shape *s, const float *w, const float *dy,
                                    float *dx) {
    int64_t out[3];
    RT_TRY(rt_conv_shape_check(s, out));
    RT_TRY(ref_plain_only("conv",
                          s->src_layout != RT_LAYOUT_PLAIN || s->dst_layout != RT_LAYOUT_PLAIN));
    REF_NEED("rt_ref_conv_backward_data", w);
    REF_NEED("rt_ref_conv_backward_data", dy);
    REF_NEED("rt_ref_conv_backward_data", dx);
    geo3 g;
    geo3_init(&g, s->nsp, s->in, out, s->k, s->stride, s->pad, s->dil);
    int64_t cig = s->c_in / s->groups, cog = s->c_out / s->groups;
    int64_t iv = vol(g.in), ov = vol(g.out), kv = vol(g.k);
    for (int64_t n = 0; n < s->n; n++)
        for (int64_t ci = 0; ci < s->c_in; ci++) {
            int64_t grp = ci / cig, ic = ci % cig;
            for (int64_t id = 0; id < g.in[0]; id++)
                for (int64_t ih = 0; ih < g.in[1]; ih++)
                    for (int64_t iw = 0; iw < g.in[2]; iw++) {
                        double acc = 0.0;
                        for (int64_t j = 0; j < cog; j++) {
                            int64_t oc = grp * cog + j;
                            const float *dyc = dy + (n * s->c_out + oc) * ov;
                            const float *wc = w + (oc * cig + ic) * kv;
                            for (int64_t kd = 0; kd < g.k[0]; kd++) {
                                int64_t od = out_of_tap(&g, 0, id, kd);
                                if (od < 0) continue;
                                for (int64_t kh = 0; kh < g.k[1]; kh++) {
                                    int64_t oh = out_of_tap(&g, 1, ih, kh);
                                    if (oh < 0) continue;
                                    for (int64_t kw = 0; kw < g.k[2]; kw++) {
                                        int64_t ow = out_of_tap(&g, 2, iw, kw);
                                        if (ow < 0) continue;
                                        acc += (double)dyc[(od * g.out[1] + oh) * g.out[2] + ow] *
                                               (double)wc[(kd * g.k[1] + kh) * g.k[2] + kw];
                                    }
                                }
                            }
                        }
                        dx[(n * s->c_in + ci) * iv + (id * g.in[1] + ih) * g.in[2] + iw] =
                            (float)acc;
                    }
        }
    return RT_OK;
}

rt_status rt_ref_conv_backward_weights(const rt_conv_shape *s, const float *x, const float *dy,
                                       float *dw, float *db) {
    int64_t out[3];
    RT_TRY(rt_conv_shape_check(s, out));
    RT_TRY(ref_plain_only("conv",
                          s->src_layout != RT_LAYOUT_PLAIN || s->dst_layout != RT_LAYOUT_PLAIN));
    REF_NEED("rt_ref_conv_backward_weights", x);
    REF_NEED("rt_ref_conv_backward_weights", dy);
    REF_NEED("rt_ref_conv_backward_weights", dw);
    geo3 g;
    geo3_init(&g, s->nsp, s->in, out, s->k, s->stride, s->pad, s->dil);
    int64_t cig = s->c_in / s->groups, cog = s->c_out / s->groups;
    int64_t iv = vol(g.in), ov = vol(g.out), kv = vol(g.k);
    for (int64_t oc = 0; oc < s->c_out; oc++) {
        int64_t grp = oc / cog;
        for (int64_t ic = 0; ic < cig; ic++)
            for (int64_t kd = 0; kd < g.k[0]; kd++)
                for (int64_t kh = 0; kh < g.k[1]; kh++)
                    for (int64_t kw = 0; kw < g.k[2]; kw++) {
                        double acc = 0.0;
                        for (int64_t n = 0; n < s->n; n++) {
                            const float *xc = x + (n * s->c_in + grp * cig + ic) * iv;
                            const float *dyc = dy + (n * s->c_out + oc) * ov;
                            for (int64_t od = 0; od < g.out[0]; od++) {
                                int64_t id = tap(&g, 0, od, kd);
                                if (!in_range(&g, 0, id)) continue;
                                for (int64_t oh = 0; oh < g.out[1]; oh++) {
                                    int64_t ih = tap(&g, 1, oh, kh);
                                    if (!in_range(&g, 1, ih)) continue;
                                    for (int64_t ow = 0; ow < g.out[2]; ow++) {
                                        int64_t iw = tap(&g, 2, ow, kw);
                                        if (!in_range(&g, 2, iw)) continue;
                                        acc += (double)xc[(id * g.in[1] + ih) * g.in[2] + iw] *
                                               (double)dyc[(od * g.out[1] + oh) * g.out[2] + ow];
                                    }
                                }
                            }
                        }
                        dw[(oc * cig + ic) * kv + (kd * g.k[1] + kh) * g.k[2] + kw] = (float)acc;
                    }
        if (db) {
            double acc = 0.0;
            for (int64_t n = 0; n < s->n; n++)
                for (int64_t o = 0; o < ov; o++) acc += dy[(n * s->c_out + oc) * ov + o];
            db[oc] = (float)acc;
        }
    }
    return RT_OK;
}

/* Flat input index of the max of window o (first max, NaN wins), or -1 if
 * the window holds no input element (cannot happen with pad <= k/2). */
static int64_t window_argmax(const geo3 *g, const float *xc, int64_t od, int64_t oh, int64_t ow) {
    int64_t best = -1;
    float bv = 0.0f;
    for (int64_t kd = 0; kd < g->k[0]; kd++) {
        int64_t id = tap(g, 0, od, kd);
        if (!in_range(g, 0, id)) continue;
        for (int64_t kh = 0; kh < g->k[1]; kh++) {
            int64_t ih = tap(g, 1, oh, kh);
            if (!in_range(g, 1, ih)) continue;
            for (int64_t kw = 0; kw < g->k[2]; kw++) {
                int64_t iw = tap(g, 2, ow, kw);
                if (!in_range(g, 2, iw)) continue;
                int64_t idx = (id * g->in[1] + ih) * g->in[2] + iw;
                float v = xc[idx];
                if (best < 0 || v > bv || isnan(v)) {
                    best = idx;
                    bv = v;
                    if (isnan(v)) return best;
                }
            }
        }
    }
    return best;
}

#define POOL_LOOP(g, body)                                                              \
    for (int64_t od = 0; od < (g).out[0]; od++)                                          \
        for (int64_t oh = 0; oh < (g).out[1]; oh++)                                      \
            for (int64_t ow = 0; ow < (g).out[2]; ow++) {                                \
                int64_t oidx = (od * (g).out[1] + oh) * (g).out[2] + ow;                 \
                body                                                                     \
            }

rt_status rt_ref_maxpool_forward(const rt_pool_shape *s, const float *x, float *y) {
    int64_t out[3];
    RT_TRY(rt_pool_shape_check(s, out));
    RT_TRY(ref_plain_only("pool", s->layout != RT_LAYOUT_PLAIN));
    REF_NEED("rt_ref_maxpool_forward", x);
    REF_NEED("rt_ref_maxpool_forward", y);
    geo3 g;
    geo3_init(&g, s->nsp, s->in, out, s->k, s->stride, s->pad, NULL);
    int64_t iv = vol(g.in), ov = vol(g.out);
    for (int64_t nc = 0; nc < s->n * s->c; nc++) {
        const float *xc = x + nc * iv;
        POOL_LOOP(g, {
            int64_t a = window_argmax(&g, xc, od, oh, ow);
            y[nc * ov + oidx] = a >= 0 ? xc[a] : -INFINITY;
        })
    }
    return RT_OK;
}

rt_status rt_ref_maxpool_backward(const rt_pool_shape *s, const float *x, const float *dy,
                                  float *dx) {
    int64_t out[3];
    RT_TRY(rt_pool_shape_check(s, out));
    RT_TRY(ref_plain_only("pool", s->layout != RT_LAYOUT_PLAIN));
    REF_NEED("rt_ref_maxpool_backward", x);
    REF_NEED("rt_ref_maxpool_backward", dy);
    REF_NEED("rt_ref_maxpool_backward", dx);
    geo3 g;
    geo3_init(&g, s->nsp, s->in, out, s->k, s->stride, s->pad, NULL);
    int64_t iv = vol(g.in), ov = vol(g.out);
    memset(dx, 0, sizeof(float) * (size_t)(s->n * s->c * iv));
    for (int64_t nc = 0; nc < s->n * s->c; nc++) {
        const float *xc = x + nc * iv;
        POOL_LOOP(g, {
            int64_t a = window_argmax(&g, xc, od, oh, ow);
            if (a >= 0) dx[nc * iv + a] += dy[nc * ov + oidx];
        })
    }
    return RT_OK;
}

rt_status rt_ref_avgpool_forward(const rt_pool_shape *s, const float *x, float *y) {
    int64_t out[3];
    RT_TRY(rt_pool_shape_check(s, out));
    RT_TRY(ref_plain_only("pool", s->layout != RT_LAYOUT_PLAIN));
    REF_NEED("rt_ref_avgpool_forward", x);
    REF_NEED("rt_ref_avgpool_forward", y);
    geo3 g;
    geo3_init(&g, s->nsp, s->in, out, s->k, s->stride, s->pad, NULL);
    int64_t iv = vol(g.in), ov = vol(g.out);
    for (int64_t nc = 0; nc < s->n * s->c; nc++) {
        const float *xc = x + nc * iv;
        POOL_LOOP(g, {
            /* count_include_pad=True: divisor = window clipped to the padded
             * input (always prod(k) in floor mode) */
            double acc = 0.0;
            int64_t cnt = 1;
            for (int i = 0; i < 3; i++) {
                int64_t o = i == 0 ? od : i == 1 ? oh : ow;
                int64_t lo = o * g.st[i] - g.pad[i];
                int64_t hi = lo + g.k[i];
                if (hi > g.in[i] + g.pad[i]) hi = g.in[i] + g.pad[i];
                cnt *= hi - lo;
            }
            for (int64_t kd = 0; kd < g.k[0]; kd++) {
                int64_t id = tap(&g, 0, od, kd);
                if (!in_range(&g, 0, id)) continue;
                for (int64_t kh = 0; kh < g.k[1]; kh++) {
                    int64_t ih = tap(&g, 1, oh, kh);
                    if (!in_range(&g, 1, ih)) continue;
                    for (int64_t kw = 0; kw < g.k[2]; kw++) {
                        int64_t iw = tap(&g, 2, ow, kw);
                        if (in_range(&g, 2, iw)) acc += xc[(id * g.in[1] + ih) * g.in[2] + iw];
                    }
                }
            }
            y[nc * ov + oidx] = (float)(acc / (double)cnt);
        })
    }
    return RT_OK;
}

rt_status rt_ref_avgpool_backward(const rt_pool_shape *s, const float *dy, float *dx) {
    int64_t out[3];
    RT_TRY(rt_pool_shape_check(s, out));
    RT_TRY(ref_plain_only("pool", s->layout != RT_LAYOUT_PLAIN));
    REF_NEED("rt_ref_avgpool_backward", dy);
    REF_NEED("rt_ref_avgpool_backward", dx);
    geo3 g;
    geo3_init(&g, s->nsp, s->in, out, s->k, s->stride, s->pad, NULL);
    int64_t iv = vol(g.in), ov = vol(g.out);
    memset(dx, 0, sizeof(float) * (size_t)(s->n * s->c * iv));
    for (int64_t nc = 0; nc < s->n * s->c; nc++) {
        POOL_LOOP(g, {
            int64_t cnt = 1;
            for (int i = 0; i < 3; i++) {
                int64_t o = i == 0 ? od : i == 1 ? oh : ow;
                int64_t lo = o * g.st[i] - g.pad[i];
                int64_t hi = lo + g.k[i];
                if (hi > g.in[i] + g.pad[i]) hi = g.in[i] + g.pad[i];
                cnt *= hi - lo;
            }
            float gv = (float)((double)dy[nc * ov + oidx] / (double)cnt);
            for (int64_t kd = 0; kd < g.k[0]; kd++) {
                int64_t id = tap(&g, 0, od, kd);
                if (!in_range(&g, 0, id)) continue;
                for (int64_t kh = 0; kh < g.k[1]; kh++) {
                    int64_t ih = tap(&g, 1, oh, kh);
                    if (!in_range(&g, 1, ih)) continue;
                    for (int64_t kw = 0; kw < g.k[2]; kw++) {
                        int64_t iw = tap(&g, 2, ow, kw);
                        if (in_range(&g, 2, iw)) dx[nc * iv + (id * g.in[1] + ih) * g.in[2] + iw] += gv;
                    }
                }
            }
        })
    }
    return RT_OK;
}

static rt_status ref_bn_check(const rt_bn_shape *s, int training) {
    if (!s || s->n < 0 || s->c < 1 || s->spatial < 1 || !(s->eps >= 0.0f))
        return rt_error_set(RT_ERR_INVALID_ARG, "reference batchnorm: %s", !s ? "the shape s is NULL" : "bad shape");
    if (training && s->n * s->spatial <= 1)
        return rt_error_set(RT_ERR_SHAPE, "reference batchnorm: need more than 1 value per channel");
    return RT_OK;
}

#define BN_AT(s, n, c, i) (((n) * (s)->c + (c)) * (s)->spatial + (i))

rt_status rt_ref_batchnorm_forward_train(const rt_bn_shape *s, const float *x, const float *weight,
                                         const float *bias, float *y, float *mean, float *var) {
    RT_TRY(ref_bn_check(s, 1));
    RT_TRY(ref_plain_only("batchnorm", s->layout != RT_LAYOUT_PLAIN));
    REF_NEED("rt_ref_batchnorm_forward_train", x);
    REF_NEED("rt_ref_batchnorm_forward_train", y);
    REF_NEED("rt_ref_batchnorm_forward_train", mean);
    REF_NEED("rt_ref_batchnorm_forward_train", var);
    double m = (double)(s->n * s->spatial);
    for (int64_t c = 0; c < s->c; c++) {
        double mu = mean[c], v = var[c]; /* given (s->given_stats): read, not written */
        if (!s->given_stats) {
            double sum = 0.0, sq = 0.0;
            for (int64_t n = 0; n < s->n; n++)
                for (int64_t i = 0; i < s->spatial; i++) sum += x[BN_AT(s, n, c, i)];
            mu = sum / m;
            for (int64_t n = 0; n < s->n; n++)
                for (int64_t i = 0; i < s->spatial; i++) {
                    double d = x[BN_AT(s, n, c, i)] - mu;
                    sq += d * d;
                }
            v = sq / m;
            mean[c] = (float)mu;
            var[c] = (float)v;
        }
        double inv = 1.0 / sqrt(v + (double)s->eps);
        double gm = weight ? weight[c] : 1.0, bt = bias ? bias[c] : 0.0;
        for (int64_t n = 0; n < s->n; n++)
            for (int64_t i = 0; i < s->spatial; i++)
                y[BN_AT(s, n, c, i)] = (float)((x[BN_AT(s, n, c, i)] - mu) * inv * gm + bt);
    }
    return RT_OK;
}

rt_status rt_ref_batchnorm_forward_eval(const rt_bn_shape *s, const float *x, const float *weight,
                                        const float *bias, const float *mean, const float *var,
                                        float *y) {
    RT_TRY(ref_bn_check(s, 0));
    RT_TRY(ref_plain_only("batchnorm", s->layout != RT_LAYOUT_PLAIN));
    REF_NEED("rt_ref_batchnorm_forward_eval", x);
    REF_NEED("rt_ref_batchnorm_forward_eval", mean);
    REF_NEED("rt_ref_batchnorm_forward_eval", var);
    REF_NEED("rt_ref_batchnorm_forward_eval", y);
    for (int64_t c = 0; c < s->c; c++) {
        double inv = 1.0 / sqrt((double)var[c] + (double)s->eps);
        double gm = weight ? weight[c] : 1.0, bt = bias ? bias[c] : 0.0;
        for (int64_t n = 0; n < s->n; n++)
            for (int64_t i = 0; i < s->spatial; i++)
                y[BN_AT(s, n, c, i)] = (float)((x[BN_AT(s, n, c, i)] - mean[c]) * inv * gm + bt);
    }
    return RT_OK;
}

rt_status rt_ref_batchnorm_backward(const rt_bn_shape *s, const float *x, const float *dy,
                                    const float *mean, const float *var, const float *weight,
                                    float *dx, float *dweight, float *dbias) {
    RT_TRY(ref_bn_check(s, 1));
    RT_TRY(ref_plain_only("batchnorm", s->layout != RT_LAYOUT_PLAIN));
    REF_NEED("rt_ref_batchnorm_backward", x);
    REF_NEED("rt_ref_batchnorm_backward", dy);
    REF_NEED("rt_ref_batchnorm_backward", mean);
    REF_NEED("rt_ref_batchnorm_backward", var);
    REF_NEED("rt_ref_batchnorm_backward", dx);
    double m = (double)(s->n * s->spatial);
    for (int64_t c = 0; c < s->c; c++) {
        double inv = 1.0 / sqrt((double)var[c] + (double)s->eps), mu = mean[c];
        double sdy = 0.0, sdyx = 0.0;
        for (int64_t n = 0; n < s->n; n++)
            for (int64_t i = 0; i < s->spatial; i++) {
                double g = dy[BN_AT(s, n, c, i)];
                sdy += g;
                sdyx += g * (x[BN_AT(s, n, c, i)] - mu) * inv;
            }
        double gm = weight ? weight[c] : 1.0;
        for (int64_t n = 0; n < s->n; n++)
            for (int64_t i = 0; i < s->spatial; i++) {
                double xh = (x[BN_AT(s, n, c, i)] - mu) * inv;
                dx[BN_AT(s, n, c, i)] =
                    (float)(gm * inv * (dy[BN_AT(s, n, c, i)] - sdy / m - xh * sdyx / m));
            }
        if (dweight) dweight[c] = (float)sdyx;
        if (dbias) dbias[c] = (float)sdy;
    }
    return RT_OK;
}
