/* The ReversibleBlock module: coupling, inverse, checks (memory/reversible.h). */
#include <stdio.h>
#include <string.h>

#include "autograd/node.h"
#include "memory/reversible_impl.h"
#include "ops/coupling.h"
#include "ops/ops.h"

rt_status rt_rev_couple(const rt_rev_block *b, rt_tensor *x2, rt_tensor *gy, rt_tensor **y2) {
    return b->coupling == RT_COUPLING_ADDITIVE ? rt_add(x2, gy, y2) : rt_affine_coupling(x2, gy, y2);
}

rt_status rt_rev_uncouple(const rt_rev_block *b, rt_tensor *y2, rt_tensor *gy, rt_tensor **x2) {
    return b->coupling == RT_COUPLING_ADDITIVE ? rt_sub(y2, gy, x2) : rt_affine_coupling_inverse(y2, gy, x2);
}

rt_status rt_rev_halves(const rt_rev_block *b, rt_tensor *x, rt_tensor **h1, rt_tensor **h2) {
    *h1 = *h2 = NULL;
    if (x->ndim < 2 || x->ndim > 5 || x->shape[1] < 2) {
        char path[128], shape[64];
        return rt_error_set(RT_ERR_SHAPE, "reversible block '%s' needs inputs (N, C[, D, H, W]) with C >= 2 channels "
                            "to split in halves, got %s; for one channel, first move spatial positions into channels "
                            "(a squeeze / pixel-unshuffle or Haar downsampling, as invertible networks do)",
                            rt_module_path(&b->base, path, sizeof path), rt_tensor_shape_str(x, shape, sizeof shape));
    }
    const int64_t sizes[2] = {x->shape[1] / 2, x->shape[1] - x->shape[1] / 2};
    rt_tensor *outs[2];
    if (b->channels_last && b->coupling == RT_COUPLING_ADDITIVE && (x->ndim == 4 || x->ndim == 5) &&
        rt_layout_pads(sizes[0]) && rt_layout_pads(sizes[1]))
        RT_TRY(rt_split_channels_layout(x, 2, sizes, RT_LAYOUT_CHANNELS_LAST, outs));
    else
        RT_TRY(rt_split_channels(x, 2, sizes, outs));
    *h1 = outs[0];
    *h2 = outs[1];
    return RT_OK;
}

rt_status rt_rev_join(rt_tensor *a, rt_tensor *b, rt_tensor **out) {
    rt_tensor *parts[2] = {a, b};
    /* channels-last halves (rt_rev_halves) join into the plain order, the
     * one rt_split_channels gives halves the blocked order would pad */
    if (a->layout == RT_LAYOUT_CHANNELS_LAST && b->layout == RT_LAYOUT_CHANNELS_LAST)
        return rt_cat_channels_layout(2, parts, RT_LAYOUT_PLAIN, out);
    return rt_cat_channels(2, parts, out);
}

rt_status rt_rev_expect(const rt_rev_block *b, const char *which, const rt_tensor *in, const rt_tensor *out,
                        const rt_tensor *like, int64_t channels) {
    bool ok = out->ndim == like->ndim && out->shape[1] == channels;
    for (int i = 0; ok && i < out->ndim; i++) ok = i == 1 || out->shape[i] == like->shape[i];
    if (ok) return RT_OK;
    char path[128], a[64], want[64], got[64];
    rt_tensor_shape_str(like, want, sizeof want);
    char *c = strchr(want, ',');
    if (c) { /* the wanted shape has `channels` in place of like's channel count */
        char rest[64];
        char *r = strchr(c + 1, ',');
        snprintf(rest, sizeof rest, "%s", r ? r : "]");
        snprintf(c + 1, (size_t)(want + sizeof want - (c + 1)), " %lld%s", (long long)channels, rest);
    }
    return rt_error_set(RT_ERR_SHAPE, "reversible block '%s': %s must map %s to %s (same size, no stride), got %s",
                        rt_module_path(&b->base, path, sizeof path), which, rt_tensor_shape_str(in, a, sizeof a),
                        want, rt_tensor_shape_str(out, got, sizeof got));
}

rt_status rt_rev_block_apply(rt_rev_block *b, const rt_rev_rng *rng, rt_rev_rng *rec, rt_tensor *x1, rt_tensor *x2,
                             rt_tensor **y1, rt_tensor **y2) {
    *y1 = *y2 = NULL;
    rt_tensor *fx = NULL, *gy = NULL;
    rt_status st = rng ? rt_recompute_rewind(&(rt_rng_state){rng->seed, rng->off_f}) : RT_OK;
    rt_rng_state at = rt_rng_state_get();
    if (rec) {
        rec->seed = at.seed;
        rec->off_f = at.offset;
    }
    if (st == RT_OK) st = rt_module_forward(b->f, x2, &fx);
    if (st == RT_OK) st = rt_rev_expect(b, "F", x2, fx, x1, x1->shape[1]);
    if (st == RT_OK) st = rt_add(x1, fx, y1);
    if (st == RT_OK && rng) st = rt_recompute_rewind(&(rt_rng_state){rng->seed, rng->off_g});
    if (rec) rec->off_g = rt_rng_state_get().offset;
    int64_t gc = b->coupling == RT_COUPLING_AFFINE ? 2 * x2->shape[1] : x2->shape[1];
    if (st == RT_OK) st = rt_module_forward(b->g, *y1, &gy);
    if (st == RT_OK) st = rt_rev_expect(b, "G", *y1, gy, x2, gc);
    if (st == RT_OK) st = rt_rev_couple(b, x2, gy, y2);
    rt_tensor_release(fx);
    rt_tensor_release(gy);
    if (st != RT_OK) {
        rt_tensor_release(*y1);
        rt_tensor_release(*y2);
        *y1 = *y2 = NULL;
    }
    return st;
}

rt_status rt_rev_block_invert(rt_rev_block *b, const rt_rev_rng *rng, rt_tensor *y, rt_tensor **x) {
    *x = NULL;
    rt_tensor *y1, *y2, *gy = NULL, *x2 = NULL, *fx = NULL, *x1 = NULL;
    RT_TRY(rt_rev_halves(b, y, &y1, &y2));
    rt_status st = rng ? rt_recompute_rewind(&(rt_rng_state){rng->seed, rng->off_g}) : RT_OK;
    if (st == RT_OK) st = rt_module_forward(b->g, y1, &gy);
    if (st == RT_OK)
        st = rt_rev_expect(b, "G", y1, gy, y2, b->coupling == RT_COUPLING_AFFINE ? 2 * y2->shape[1] : y2->shape[1]);
    if (st == RT_OK) st = rt_rev_uncouple(b, y2, gy, &x2);
    if (st == RT_OK && rng) st = rt_recompute_rewind(&(rt_rng_state){rng->seed, rng->off_f});
    if (st == RT_OK) st = rt_module_forward(b->f, x2, &fx);
    if (st == RT_OK) st = rt_rev_expect(b, "F", x2, fx, y1, y1->shape[1]);
    if (st == RT_OK) st = rt_sub(y1, fx, &x1);
    if (st == RT_OK) st = rt_rev_join(x1, x2, x);
    rt_rev_release4(y1, y2, gy, x2);
    rt_tensor_release(fx);
    rt_tensor_release(x1);
    return st;
}

/* Plain forward through autograd; in training it records the generator
 * offsets so that rt_rev_block_inverse can replay dropout's masks. */
static rt_status rt_rev_block_forward(rt_module *m, rt_tensor *x, rt_tensor **y) {
    rt_rev_block *b = (rt_rev_block *)m;
    rt_tensor *x1, *x2, *y1 = NULL, *y2 = NULL;
    RT_TRY(rt_rev_halves(b, x, &x1, &x2));
    rt_rev_rng rec;
    rt_status st = rt_rev_block_apply(b, NULL, &rec, x1, x2, &y1, &y2);
    if (st == RT_OK) st = rt_rev_join(y1, y2, y);
    if (st == RT_OK && m->training && !rt_recompute_is_active()) {
        b->has_record = true;
        b->seed = rec.seed;
        b->off_f = rec.off_f;
        b->off_g = rec.off_g;
    }
    rt_rev_release4(x1, x2, y1, y2);
    return st;
}

static const rt_module_class rt_rev_block_class = {"ReversibleBlock", rt_rev_block_forward, NULL, NULL};

rt_status rt_rev_block_create(rt_module *f, rt_module *g, rt_coupling coupling, rt_module **out) {
    if (out) *out = NULL;
    rt_rev_block *b = NULL;
    rt_status st = RT_OK;
    if (!out) st = rt_error_set(RT_ERR_INVALID_ARG, "rt_rev_block_create: the output pointer is NULL");
    else if (!f || !g) st = rt_error_set(RT_ERR_INVALID_ARG, "rt_rev_block_create: ReversibleBlock needs both F and G "
                                         "(got NULL)");
    else if (coupling != RT_COUPLING_ADDITIVE && coupling != RT_COUPLING_AFFINE)
        st = rt_error_set(RT_ERR_INVALID_ARG, "ReversibleBlock: unknown coupling %d", (int)coupling);
    else if (!(b = (rt_rev_block *)rt_module_alloc(sizeof *b, &rt_rev_block_class))) st = RT_ERR_OOM;
    if (st != RT_OK) {
        rt_module_destroy(f);
        rt_module_destroy(g);
        return st;
    }
    b->coupling = coupling;
    b->f = f;
    b->g = g;
    st = rt_module_add_child(&b->base, "f", f);
    if (st != RT_OK) {
        rt_module_destroy(g);
        rt_module_destroy(&b->base);
        return st;
    }
    st = rt_module_add_child(&b->base, "g", g);
    if (st != RT_OK) {
        rt_module_destroy(&b->base);
        return st;
    }
    *out = &b->base;
    return RT_OK;
}

rt_rev_block *rt_rev_block_of(rt_module *m) {
    return rt_module_is(m, &rt_rev_block_class) ? (rt_rev_block *)m : NULL;
}

rt_status rt_rev_block_set_channels_last(rt_module *m, bool on) {
    rt_rev_block *b = rt_rev_block_of(m);
    if (!b)
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_rev_block_set_channels_last: the module is %s, not a "
                            "ReversibleBlock", m ? m->cls->type : "NULL");
    b->channels_last = on;
    return RT_OK;
}

/* The block behind m, checking that the tensor argument `t` (named `what`)
 * and the output pointer `out` are not NULL. */
static rt_status rt_rev_block_arg(rt_module *m, const char *fn, rt_rev_block **b, const rt_tensor *t,
                                  const char *what, const void *out) {
    *b = rt_rev_block_of(m);
    if (!*b) return rt_error_set(RT_ERR_INVALID_ARG, "%s: the module is %s, not a ReversibleBlock", fn,
                                 m ? m->cls->type : "NULL");
    if (!t) return rt_error_set(RT_ERR_INVALID_ARG, "%s: %s is NULL", fn, what);
    if (!out) return rt_error_set(RT_ERR_INVALID_ARG, "%s: the output pointer is NULL", fn);
    return RT_OK;
}

rt_status rt_rev_block_inverse(rt_module *block, rt_tensor *y, rt_tensor **x) {
    rt_rev_block *b;
    RT_TRY(rt_rev_block_arg(block, "rt_rev_block_inverse", &b, y, "y", x));
    *x = NULL;
    rt_rev_rng rng = {b->seed, b->off_f, b->off_g};
    bool replay = block->training && b->has_record;
    rt_recompute_scope scope;
    rt_recompute_begin(&scope);
    bool grad = rt_grad_set_enabled(false);
    rt_status st = rt_rev_block_invert(b, replay ? &rng : NULL, y, x);
    rt_grad_set_enabled(grad);
    rt_recompute_end(&scope);
    return st;
}

rt_status rt_rev_block_check(rt_module *block, rt_tensor *x, float *err_inv_fwd, float *err_fwd_inv) {
    rt_rev_block *b;
    RT_TRY(rt_rev_block_arg(block, "rt_rev_block_check", &b, x, "x", err_inv_fwd));
    if (!err_fwd_inv) return rt_error_set(RT_ERR_INVALID_ARG, "rt_rev_block_check: err_fwd_inv is NULL");
    rt_recompute_scope scope;
    rt_recompute_begin(&scope);
    bool grad = rt_grad_set_enabled(false);
    rt_tensor *x1 = NULL, *x2 = NULL, *y1 = NULL, *y2 = NULL, *y = NULL, *xr = NULL, *xi = NULL, *yr = NULL;
    rt_rev_rng at;
    /* the same generator offsets for every F and G call, so dropout agrees */
    rt_status st = rt_rev_halves(b, x, &x1, &x2);
    if (st == RT_OK) st = rt_rev_block_apply(b, NULL, &at, x1, x2, &y1, &y2);
    if (st == RT_OK) st = rt_rev_join(y1, y2, &y);
    rt_rev_release4(x1, x2, y1, y2);
    x1 = x2 = y1 = y2 = NULL;
    if (st == RT_OK) st = rt_rev_block_invert(b, &at, y, &xr);
    if (st == RT_OK) st = rt_rev_block_invert(b, &at, x, &xi);
    if (st == RT_OK) st = rt_rev_halves(b, xi, &x1, &x2);
    if (st == RT_OK) st = rt_rev_block_apply(b, &at, NULL, x1, x2, &y1, &y2);
    if (st == RT_OK) st = rt_rev_join(y1, y2, &yr);
    double e1 = 0, e2 = 0, scale;
    if (st == RT_OK) st = rt_compare(xr, x, &e1, &scale);
    if (st == RT_OK) st = rt_compare(yr, x, &e2, &scale);
    if (st == RT_OK) {
        *err_inv_fwd = (float)e1;
        *err_fwd_inv = (float)e2;
    }
    rt_rev_release4(y, xr, xi, yr);
    rt_rev_release4(x1, x2, y1, y2);
    rt_grad_set_enabled(grad);
    rt_recompute_end(&scope);
    return st;
}

rt_status rt_rev_block_logdet(rt_module *block, rt_tensor *x, rt_tensor **out) {
    rt_rev_block *b;
    RT_TRY(rt_rev_block_arg(block, "rt_rev_block_logdet", &b, x, "x", out));
    *out = NULL;
    int64_t n = x->shape[0];
    if (b->coupling == RT_COUPLING_ADDITIVE) {
        *out = rt_tensor_zeros(1, &n, RT_F32, x->device, RT_MEM_TEMP);
        return *out ? RT_OK : RT_ERR_OOM;
    }
    bool grad = rt_grad_set_enabled(false), rec = rt_recompute_set_active(true);
    rt_tensor *x1, *x2, *fx = NULL, *y1 = NULL, *gy = NULL;
    rt_status st = rt_rev_halves(b, x, &x1, &x2);
    if (st == RT_OK) st = rt_module_forward(b->f, x2, &fx);
    if (st == RT_OK) st = rt_add(x1, fx, &y1);
    if (st == RT_OK) st = rt_module_forward(b->g, y1, &gy);
    if (st == RT_OK) st = rt_affine_coupling_logdet(gy, out);
    rt_rev_release4(x1, x2, fx, y1);
    rt_tensor_release(gy);
    rt_recompute_set_active(rec);
    rt_grad_set_enabled(grad);
    return st;
}
