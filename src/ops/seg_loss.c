/* Segmentation losses on (N, C, spatial...) activations: voxel-wise
 * cross-entropy with class weights and the soft Dice loss (ops/ops3d.h). */
#include <math.h>
#include <string.h>

#include "core/mem.h"
#include "kernels/softmax.h"
#include "ops/op_util.h"
#include "ops/ops3d.h"

/* Float index of (n, c, s) in either memory order (kernels/chanwise.h). */
static inline int64_t seg_off(const rt_chan_shape *s, int64_t n, int64_t c, int64_t p) {
    const int64_t L = s->layout == RT_LAYOUT_BLOCKED ? rt_layout_block() : 1;
    return ((n * (s->c / L) + c / L) * s->spatial + p) * L + c % L;
}

/* Checks x (N, C, d...) f32 against target (N, d...) int32 with labels in
 * [0, C) and fills the view. */
static rt_status seg_check(const char *op, const char *xname, const rt_tensor *x, const rt_tensor *target,
                           rt_chan_shape *s) {
    RT_TRY(rt_op_check_f32(x, op, xname));
    if (!target) return rt_error_set(RT_ERR_INVALID_ARG, "%s: target is NULL", op);
    RT_TRY(rt_op_check_device(x, target, op));
    if (target->dtype != RT_I32)
        return rt_error_set(RT_ERR_DTYPE, "%s: target must be int32 class indices, got %s", op,
                            rt_dtype_str(target->dtype));
    char a[64], b[64];
    bool ok = x->ndim >= 2 && target->ndim == x->ndim - 1 && target->shape[0] == x->shape[0];
    for (int i = 2; ok && i < x->ndim; i++) ok = target->shape[i - 1] == x->shape[i];
    if (!ok)
        return rt_error_set(RT_ERR_SHAPE, "%s: expected %s (N, C, d1, ...) and target (N, d1, ...), got %s and %s",
                            op, xname, rt_tensor_shape_str(x, a, sizeof a), rt_tensor_shape_str(target, b, sizeof b));
    *s = (rt_chan_shape){x->shape[0], x->shape[1], 1, x->layout};
    for (int i = 2; i < x->ndim; i++) s->spatial *= x->shape[i];
    if (rt_op_compute(target)) {
        const int32_t *t = rt_tensor_data(target);
        for (int64_t i = 0; i < s->n * s->spatial; i++)
            if (t[i] < 0 || t[i] >= s->c)
                return rt_error_set(RT_ERR_INVALID_ARG, "%s: target element %lld (sample %lld) is %d, outside [0, %lld)",
                                    op, (long long)i, (long long)(i / s->spatial), t[i], (long long)s->c);
    }
    return RT_OK;
}

/* ------------------------------------------------------------ cross-entropy */

typedef struct ce_ctx {
    rt_chan_shape s;
    double weight_sum; /* Σ_i w[t_i] */
    bool weighted;     /* weight saved in slot 2 */
} ce_ctx;

/* dx = g·w[t]/W·(softmax(x) − onehot(t)) */
static rt_status ce_nd_backward(rt_node *self, rt_tensor *const *grad_out, rt_tensor **grad_in) {
    const ce_ctx *c = self->ctx;
    rt_tensor *x, *target, *w = NULL, *dy = grad_out[0];
    RT_SAVED(self, 0, x);
    RT_SAVED(self, 1, target);
    if (c->weighted) RT_SAVED(self, 2, w);
    rt_tensor *dx = rt_tensor_empty_like(x, RT_MEM_TEMP);
    if (!dx) return RT_ERR_OOM;
    if (rt_op_compute(x)) {
        const rt_chan_shape *s = &c->s;
        float *d = rt_tensor_f32(dx);
        const int32_t *t = rt_tensor_data(target);
        const float *wp = w ? rt_tensor_f32(w) : NULL;
        const double g = (double)rt_tensor_f32(dy)[0] / c->weight_sum;
        rt_kernel_softmax_channels_forward(s, rt_tensor_f32(x), d);
#pragma omp parallel for if (s->n * s->c * s->spatial >= 32768) schedule(static)
        for (int64_t i = 0; i < s->n * s->spatial; i++) {
            const int64_t n = i / s->spatial, p = i % s->spatial;
            const float k = (float)(g * (wp ? wp[t[i]] : 1.0));
            for (int64_t ch = 0; ch < s->c; ch++) d[seg_off(s, n, ch, p)] *= k;
            d[seg_off(s, n, t[i], p)] -= k;
        }
    }
    grad_in[0] = dx;
    return RT_OK;
}

rt_status rt_cross_entropy_nd(rt_tensor *logits, rt_tensor *target, rt_tensor *weight, rt_tensor **out) {
    const char *op = "cross_entropy_nd";
    RT_TRY(rt_op_check_out(out, op));
    *out = NULL;
    ce_ctx c = {.weighted = weight != NULL};
    RT_TRY(seg_check(op, "logits", logits, target, &c.s));
    if (weight) {
        RT_TRY(rt_op_check_f32(weight, op, "weight"));
        RT_TRY(rt_op_check_device(logits, weight, op));
        if (weight->ndim != 1 || weight->shape[0] != c.s.c) {
            char a[64];
            return rt_error_set(RT_ERR_SHAPE, "%s: weight must be (%lld), one per class, got %s", op,
                                (long long)c.s.c, rt_tensor_shape_str(weight, a, sizeof a));
        }
    }
    rt_tensor *y = rt_tensor_create(0, NULL, RT_F32, logits->device, RT_MEM_TEMP);
    if (!y) return RT_ERR_OOM;
    rt_status st = RT_OK;
    if (rt_op_compute(logits)) {
        const int64_t NS = c.s.n * c.s.spatial;
        float *lse = NULL;
        st = rt_mem_alloc((size_t)(NS ? NS : 1) * sizeof(float), RT_MEM_TEMP, (void **)&lse);
        if (st == RT_OK) {
            rt_kernel_logsumexp_channels(&c.s, rt_tensor_f32(logits), lse);
            const float *x = rt_tensor_f32(logits), *wp = weight ? rt_tensor_f32(weight) : NULL;
            const int32_t *t = rt_tensor_data(target);
            double num = 0.0, den = 0.0;
#pragma omp parallel for reduction(+ : num, den) if (NS >= 32768) schedule(static)
            for (int64_t i = 0; i < NS; i++) {
                const double wi = wp ? wp[t[i]] : 1.0;
                num += wi * ((double)lse[i] - (double)x[seg_off(&c.s, i / c.s.spatial, t[i], i % c.s.spatial)]);
                den += wi;
            }
            rt_mem_free(lse, (size_t)(NS ? NS : 1) * sizeof(float), RT_MEM_TEMP);
            c.weight_sum = den;
            rt_tensor_f32(y)[0] = (float)(num / den); /* 0/0 = NaN, as PyTorch */
        }
    } else { /* meta: the log-sum-exp buffer a real call holds, booked and released */
        const int64_t NS = c.s.n * c.s.spatial;
        size_t b = (size_t)(NS > 0 ? NS : 1) * sizeof(float);
        st = rt_mem_account(b, RT_MEM_TEMP);
        if (st == RT_OK) rt_mem_unaccount(b, RT_MEM_TEMP);
    }
    rt_node *node = NULL;
    rt_tensor *inputs[1] = {logits};
    if (st == RT_OK) st = rt_node_create("cross_entropy_nd", 1, inputs, 1, ce_nd_backward, sizeof c, &node);
    if (st == RT_OK && node) {
        memcpy(node->ctx, &c, sizeof c);
        st = rt_node_save(node, logits, NULL);
        if (st == RT_OK) st = rt_node_save(node, target, NULL);
        if (st == RT_OK && weight) st = rt_node_save(node, weight, NULL);
    }
    return rt_op_return(st, node, y, out);
}

/* ------------------------------------------------------------ soft Dice */

typedef struct dice_ctx {
    rt_chan_shape s;
    double smooth;
    bool batch_dice, include_background;
    double terms;   /* number of dice values averaged */
    int ndim;       /* the probabilities' shape, for the gradient */
    int64_t shape[RT_MAX_DIMS];
    double sums[];  /* per (n, c): I, P, G (3·N·C; with batch_dice the sums over n are in n = 0) */
} dice_ctx;

static rt_status dice_backward(rt_node *self, rt_tensor *const *grad_out, rt_tensor **grad_in) {
    const dice_ctx *c = self->ctx;
    const rt_chan_shape *s = &c->s;
    rt_tensor *target, *dy = grad_out[0];
    RT_SAVED(self, 0, target);
    /* the gradient has the probabilities' shape and order */
    rt_tensor *dx = rt_tensor_create(c->ndim, c->shape, RT_F32, target->device, RT_MEM_TEMP);
    if (!dx) return RT_ERR_OOM;
    dx->layout = s->layout;
    if (rt_op_compute(target)) {
        float *d = rt_tensor_f32(dx);
        const int32_t *t = rt_tensor_data(target);
        const double g = -(double)rt_tensor_f32(dy)[0] / c->terms;
#pragma omp parallel for collapse(2) if (s->n * s->c * s->spatial >= 32768) schedule(static)
        for (int64_t n = 0; n < s->n; n++)
            for (int64_t ch = 0; ch < s->c; ch++) {
                const double *v = c->sums + 3 * ((c->batch_dice ? 0 : n) * s->c + ch);
                const double den = v[1] + v[2] + c->smooth, num = 2.0 * v[0] + c->smooth;
                const bool used = c->include_background || ch > 0;
                /* ∂dice/∂p = (2g·den − num)/den², g ∈ {0, 1} */
                const float k1 = used ? (float)(g * (2.0 * den - num) / (den * den)) : 0.0f;
                const float k0 = used ? (float)(g * -num / (den * den)) : 0.0f;
                for (int64_t p = 0; p < s->spatial; p++) d[seg_off(s, n, ch, p)] = t[n * s->spatial + p] == ch ? k1 : k0;
            }
    }
    grad_in[0] = dx;
    return RT_OK;
}

rt_status rt_soft_dice_loss(rt_tensor *probs, rt_tensor *target, float smooth, bool batch_dice,
                            bool include_background, rt_tensor **out) {
    const char *op = "soft_dice_loss";
    RT_TRY(rt_op_check_out(out, op));
    *out = NULL;
    rt_chan_shape s;
    RT_TRY(seg_check(op, "probs", probs, target, &s));
    if (!(smooth > 0.0f) || !isfinite(smooth))
        return rt_error_set(RT_ERR_INVALID_ARG, "%s: smooth must be finite and > 0 (nnU-Net uses 1e-5), got %g", op,
                            (double)smooth);
    if (!include_background && s.c < 2)
        return rt_error_set(RT_ERR_SHAPE, "%s: without the background class there must be >= 2 classes, got C=%lld",
                            op, (long long)s.c);
    size_t csize = sizeof(dice_ctx) + sizeof(double) * 3 * (size_t)(s.n * s.c);
    dice_ctx *c = NULL;
    rt_status st = rt_mem_alloc(csize, RT_MEM_TEMP, (void **)&c);
    if (st != RT_OK) return st;
    memset(c, 0, csize);
    c->s = s;
    c->ndim = probs->ndim;
    memcpy(c->shape, probs->shape, sizeof c->shape);
    c->smooth = smooth;
    c->batch_dice = batch_dice;
    c->include_background = include_background;
    const int64_t classes = s.c - (include_background ? 0 : 1);
    c->terms = (double)(classes * (batch_dice ? 1 : s.n));
    rt_tensor *y = rt_tensor_create(0, NULL, RT_F32, probs->device, RT_MEM_TEMP);
    if (!y) st = RT_ERR_OOM;
    if (st == RT_OK && rt_op_compute(probs)) {
        const float *x = rt_tensor_f32(probs);
        const int32_t *t = rt_tensor_data(target);
#pragma omp parallel for collapse(2) if (s.n * s.c * s.spatial >= 32768) schedule(static)
        for (int64_t n = 0; n < s.n; n++)
            for (int64_t ch = 0; ch < s.c; ch++) {
                double I = 0.0, P = 0.0, G = 0.0;
                for (int64_t p = 0; p < s.spatial; p++) {
                    const double v = x[seg_off(&s, n, ch, p)];
                    const int hit = t[n * s.spatial + p] == ch;
                    P += v;
                    I += hit ? v : 0.0;
                    G += hit;
                }
                double *o = c->sums + 3 * (n * s.c + ch);
                o[0] = I;
                o[1] = P;
                o[2] = G;
            }
        if (batch_dice) /* fold the samples into n = 0 */
            for (int64_t n = 1; n < s.n; n++)
                for (int64_t i = 0; i < 3 * s.c; i++) c->sums[i] += c->sums[3 * n * s.c + i];
        double total = 0.0;
        for (int64_t n = 0; n < (batch_dice ? 1 : s.n); n++)
            for (int64_t ch = include_background ? 0 : 1; ch < s.c; ch++) {
                const double *v = c->sums + 3 * (n * s.c + ch);
                total += (2.0 * v[0] + c->smooth) / (v[1] + v[2] + c->smooth);
            }
        rt_tensor_f32(y)[0] = (float)(1.0 - total / c->terms);
    }
    rt_node *node = NULL;
    if (st == RT_OK) st = rt_node_create(op, 1, &probs, 1, dice_backward, csize, &node);
    if (st == RT_OK && node) {
        memcpy(node->ctx, c, csize);
        st = rt_node_save(node, target, NULL);
    }
    rt_mem_free(c, csize, RT_MEM_TEMP);
    return rt_op_return(st, node, y, out);
}
