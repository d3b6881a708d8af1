/* The ReversibleSequence module: one autograd node that keeps only the
 * output and rebuilds every block's input in backward (memory/reversible.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/engine.h"
#include "backend/backend.h"
#include "memory/precision.h"
#include "memory/reversible_impl.h"
#include "nn/modules.h"
#include "ops/op_util.h"
#include "ops/ops.h"

/* What the sequence keeps per block besides tensors: where the generator was
 * before F and before G, and the input's fingerprint. */
typedef struct rt_block_record {
    rt_rev_rng rng;
    double sum, sumsq, proj;
    int exact_slot; /* saved exact input, or -1 */
    rt_dtype region; /* the precision region at forward (memory/precision.h): F and G's rebuild runs in it */
} rt_block_record;

typedef struct rt_seq_ctx {
    rt_rev_sequence *seq;
    int n;          /* blocks at forward */
    bool calibrating;
    int out_slot;   /* -1: the output is deferred (rt_rev_sequence_defer_output) */
    rt_layout half_layout;  /* deferred: the order the output's halves were in at forward */
    rt_rev_input_fn on_input; /* rt_rev_sequence_on_input_rebuilt when the graph was made */
    void *on_input_user;
    rt_block_record rec[];
} rt_seq_ctx;

static rt_rev_block *rt_seq_block(rt_rev_sequence *s, int i) {
    return (rt_rev_block *)s->base.children[i].module;
}

/* sum, sum of squares and a ±1 pseudo-random projection of the input held
 * as its two halves (x1 then x2, as flat arrays), in f64. The projection
 * moves by about ‖δ‖ for an error δ, so it sees small random drift that the
 * first two moments average away. A non-finite input gives a non-finite sum
 * of squares. Half-wise, because backward keeps inputs as halves. */
static void rt_fingerprint(const rt_tensor *x1, const rt_tensor *x2, double *sum, double *sumsq, double *proj) {
    double f[3] = {0.0, 0.0, 0.0}; /* stays 0 on meta */
    const rt_backend *be = rt_backend_of(x1);
    be->vec_fingerprint(rt_tensor_numel(x1), rt_tensor_f32(x1), 0, f);
    be->vec_fingerprint(rt_tensor_numel(x2), rt_tensor_f32(x2), (uint32_t)rt_tensor_numel(x1), f);
    *sum = f[0];
    *sumsq = f[1];
    *proj = f[2];
}

/* Relative drift of the rebuilt halves against the forward's fingerprint:
 * the one metric both the run's check and AUTO's calibration use. */
static double rt_drift(const rt_block_record *r, const rt_tensor *x1, const rt_tensor *x2) {
    double s, q, p;
    rt_fingerprint(x1, x2, &s, &q, &p);
    if (!isfinite(q)) return INFINITY;
    double norm = sqrt(r->sumsq) > 1e-30 ? sqrt(r->sumsq) : 1e-30;
    double d = fabs(s - r->sum) / norm;
    d = fmax(d, fabs(p - r->proj) / norm);
    d = fmax(d, fabs(q - r->sumsq) / (norm * norm));
    return d != d ? INFINITY : d;
}

/* The error for a rebuilt input of block b that drifted by d (infinite:
 * not finite), or RT_OK when d <= tol. */
static rt_status rt_drift_check(rt_rev_block *b, double d, double tol) {
    char path[128];
    if (d == INFINITY)
        return rt_error_set(RT_ERR_NONFINITE, "reversible block '%s': the rebuilt input is not finite (F or G "
                            "overflowed); keep exact activations with --grouping K or auto",
                            rt_module_path(&b->base, path, sizeof path));
    if (d > tol)
        return rt_error_set(RT_ERR_RECONSTRUCTION,
                            "reversible block '%s': the input rebuilt from the output drifted by %.3g (relative), "
                            "over the tolerance %.3g; keep exact activations with --grouping K (a smaller K) or auto, "
                            "or check F and G for exploding activations",
                            rt_module_path(&b->base, path, sizeof path), d, tol);
    return RT_OK;
}

/* Block i's backward from its exact input x: recompute (y1, y2) with a
 * graph and back-propagate (dy1, dy2); returns x's halves and their grads. */
static rt_status rt_backward_exact(rt_rev_block *b, const rt_block_record *r, rt_tensor *x, rt_tensor *dy1,
                                   rt_tensor *dy2, rt_tensor **x1o, rt_tensor **x2o, rt_tensor **dx1,
                                   rt_tensor **dx2) {
    *x1o = *x2o = *dx1 = *dx2 = NULL;
    rt_tensor *h1, *h2, *x1 = NULL, *x2 = NULL, *y1 = NULL, *y2 = NULL;
    RT_TRY(rt_rev_halves(b, x, &h1, &h2));
    x1 = rt_detached_leaf(h1);
    x2 = rt_detached_leaf(h2);
    rt_status st = (x1 && x2) ? RT_OK : rt_error_last_status();
    bool grad = rt_grad_set_enabled(true);
    if (st == RT_OK) st = rt_rev_block_apply(b, &r->rng, NULL, x1, x2, &y1, &y2);
    rt_grad_set_enabled(false);
    /* y2 depends on y1 through G: its backward keeps y1's graph for the second pass */
    if (st == RT_OK) st = rt_backward(y2, dy2, true);
    if (st == RT_OK) st = rt_backward(y1, dy1, false);
    if (st == RT_OK && (!(*dx1 = rt_leaf_grad_or_zeros(x1)) || !(*dx2 = rt_leaf_grad_or_zeros(x2))))
        st = rt_error_last_status();
    rt_rev_release4(y1, y2, x1, x2);
    rt_grad_set_enabled(grad);
    if (st != RT_OK) {
        rt_rev_release4(h1, h2, *dx1, *dx2);
        *dx1 = *dx2 = NULL;
        return st;
    }
    *x1o = h1;
    *x2o = h2;
    return RT_OK;
}

/* Block i's backward from its output (y1, y2) only (RevNet Algorithm 1):
 * rebuild (x1, x2) while building the graphs of G(y1) and F(x2) once, then
 * back-propagate dy2 through G and the coupling, and dy1 + (G's
 * contribution) through F. Inputs and outputs stay as halves, so no
 * activation is concatenated and split again between blocks. */
static rt_status rt_backward_rebuild(rt_rev_block *b, const rt_block_record *r, rt_tensor *y1, rt_tensor *y2,
                                     rt_tensor *dy1, rt_tensor *dy2, rt_tensor **x1o, rt_tensor **x2o,
                                     rt_tensor **dx1, rt_tensor **dx2) {
    *x1o = *x2o = *dx1 = *dx2 = NULL;
    rt_tensor *y1l = rt_detached_leaf(y1), *gy = NULL, *x2 = NULL, *x2l = NULL, *y2r = NULL, *fx = NULL, *x1 = NULL;
    rt_tensor *g1 = NULL, *dy1t = NULL, *g2 = NULL;
    rt_status st = y1l ? RT_OK : rt_error_last_status();
    bool grad = rt_grad_set_enabled(true);
    if (st == RT_OK) st = rt_recompute_rewind(&(rt_rng_state){r->rng.seed, r->rng.off_g});
    if (st == RT_OK) st = rt_precision_region_forward(b->g, r->region, false, y1l, &gy);
    if (st == RT_OK)
        st = rt_rev_expect(b, "G", y1, gy, y2, b->coupling == RT_COUPLING_AFFINE ? 2 * y2->shape[1] : y2->shape[1]);
    rt_grad_set_enabled(false);
    if (st == RT_OK) st = rt_rev_uncouple(b, y2, gy, &x2);
    if (st == RT_OK && !(x2l = rt_detached_leaf(x2))) st = rt_error_last_status();
    rt_grad_set_enabled(true);
    if (st == RT_OK) st = rt_rev_couple(b, x2l, gy, &y2r);
    if (st == RT_OK) st = rt_recompute_rewind(&(rt_rng_state){r->rng.seed, r->rng.off_f});
    if (st == RT_OK) st = rt_precision_region_forward(b->f, r->region, false, x2l, &fx);
    rt_grad_set_enabled(false);
    if (st == RT_OK) st = rt_sub(y1, fx, &x1);
    if (st == RT_OK) st = rt_backward(y2r, dy2, false);
    if (st == RT_OK && !(g1 = rt_leaf_grad_or_zeros(y1l))) st = rt_error_last_status();
    if (st == RT_OK) st = rt_add(dy1, g1, &dy1t);
    if (st == RT_OK) st = rt_backward(fx, dy1t, false);
    if (st == RT_OK && !(g2 = rt_leaf_grad_or_zeros(x2l))) st = rt_error_last_status();
    rt_grad_set_enabled(grad);
    rt_rev_release4(y1l, gy, x2l, y2r);
    rt_rev_release4(fx, g1, NULL, NULL);
    if (st != RT_OK) {
        rt_rev_release4(x1, x2, dy1t, g2);
        return st;
    }
    *x1o = x1;
    *x2o = x2;
    *dx1 = dy1t;
    *dx2 = g2;
    return RT_OK;
}

/* x = y − f for the rebuild, grad mode off. f (a branch's output, the root
 * of the graph about to be back-propagated) is needed after this only for
 * its graph, not its values: when nothing else holds f's storage and no node
 * saved it, x is written over it (an alias of f's storage, no history), so
 * the rebuilt input and the branch output never take two buffers. Else a
 * new tensor (rt_sub). */
static rt_status rt_rev_sub_into_branch(rt_tensor *y, rt_tensor *f, rt_tensor **x) {
    if (rt_op_can_consume(f) && f->dtype == RT_F32 && y->dtype == RT_F32 && f->layout == y->layout &&
        rt_tensor_same_shape(f, y)) {
        float *fd = rt_tensor_f32(f);
        if (fd) rt_backend_of(f)->vec_sub(rt_tensor_numel(f), rt_tensor_f32(y), fd, fd); /* NULL on meta */
        *x = rt_op_take_storage(f);
        return *x ? RT_OK : rt_error_last_status();
    }
    return rt_sub(y, f, x);
}

/* The additive block's backward in the order that holds the fewest
 * activations at once (MemCNN's order): rebuild x2 = y2 − G(y1) and
 * back-propagate dy2 through G at once, freeing G's graph and y2 before F
 * is recomputed; then x1 = y1 − F(x2), freeing y1, and dy1 + G'ᵀdy2 through
 * F. The coupling itself needs no graph: ∂y2/∂x2 = 1, so dx2 = dy2 + F'ᵀ(dx1)
 * with dx1 = dy1 + G'ᵀdy2. x2 and x1 take the buffers of G's and F's outputs
 * (rt_rev_sub_into_branch). Consumes y1, y2, dy1 and dy2 (releases them, also
 * on error), where rt_backward_rebuild leaves them to the caller: at the
 * widest level of a partially reversible U-Net this held 16 half-width
 * activations at once, this order about 10. */
static rt_status rt_backward_rebuild_additive(rt_rev_block *b, const rt_block_record *r, rt_tensor *y1,
                                              rt_tensor *y2, rt_tensor *dy1, rt_tensor *dy2, rt_tensor **x1o,
                                              rt_tensor **x2o, rt_tensor **dx1, rt_tensor **dx2) {
    *x1o = *x2o = *dx1 = *dx2 = NULL;
    rt_tensor *y1l = rt_detached_leaf(y1), *gy = NULL, *x2 = NULL, *x2l = NULL, *fx = NULL, *x1 = NULL;
    rt_tensor *g1 = NULL, *dx1t = NULL, *g2 = NULL, *dx2t = NULL;
    rt_status st = y1l ? RT_OK : rt_error_last_status();
    bool grad = rt_grad_set_enabled(true);
    if (st == RT_OK) st = rt_recompute_rewind(&(rt_rng_state){r->rng.seed, r->rng.off_g});
    if (st == RT_OK) st = rt_precision_region_forward(b->g, r->region, false, y1l, &gy);
    if (st == RT_OK) st = rt_rev_expect(b, "G", y1, gy, y2, y2->shape[1]);
    rt_grad_set_enabled(false);
    if (st == RT_OK) st = rt_rev_sub_into_branch(y2, gy, &x2);
    rt_tensor_release(y2);
    y2 = NULL;
    if (st == RT_OK) st = rt_backward(gy, dy2, false); /* G's graph is freed here */
    rt_tensor_release(gy);
    if (st == RT_OK && !(g1 = rt_leaf_grad_or_zeros(y1l))) st = rt_error_last_status();
    if (st == RT_OK) st = rt_add(dy1, g1, &dx1t);
    rt_tensor_release(g1);
    rt_tensor_release(dy1);
    dy1 = NULL;
    if (st == RT_OK && !(x2l = rt_detached_leaf(x2))) st = rt_error_last_status();
    rt_grad_set_enabled(true);
    if (st == RT_OK) st = rt_recompute_rewind(&(rt_rng_state){r->rng.seed, r->rng.off_f});
    if (st == RT_OK) st = rt_precision_region_forward(b->f, r->region, false, x2l, &fx);
    if (st == RT_OK) st = rt_rev_expect(b, "F", x2, fx, y1, y1->shape[1]);
    rt_grad_set_enabled(false);
    if (st == RT_OK) st = rt_rev_sub_into_branch(y1, fx, &x1);
    rt_rev_release4(y1l, y1, NULL, NULL);
    if (st == RT_OK) st = rt_backward(fx, dx1t, false);
    if (st == RT_OK && !(g2 = rt_leaf_grad_or_zeros(x2l))) st = rt_error_last_status();
    if (st == RT_OK) st = rt_add(dy2, g2, &dx2t);
    rt_grad_set_enabled(grad);
    rt_rev_release4(fx, g2, x2l, dy2);
    if (st != RT_OK) {
        rt_rev_release4(x1, x2, dx1t, dx2t);
        return st;
    }
    *x1o = x1;
    *x2o = x2;
    *dx1 = dx1t;
    *dx2 = dx2t;
    return RT_OK;
}

/* AUTO's safety factor: calibration accepts a chain whose rebuilt inputs
 * stay within tol / RT_AUTO_MARGIN. One batch's drift is only a sample:
 * across batches the same chains drift up to ~4× more or less, and the
 * fingerprint reads a random projection of the error, so a 2× margin let
 * about 6% of later steps fail their check (48 Linear blocks at spectral
 * norm 0.9-1.0, 100 weight seeds × 49 batches); 8×, with the true error
 * below, let none of 9,800 fail. It costs a k about 17% smaller. */
#define RT_AUTO_MARGIN 8.0

/* The true relative error ‖x - exact‖ / ‖exact‖ of a rebuilt input (f64;
 * +inf when not finite or not comparable). */
static double rt_true_error(rt_tensor *x, rt_tensor *exact) {
    rt_tensor *xc = NULL;
    if (rt_tensor_numel(x) != rt_tensor_numel(exact) || rt_to_layout(x, exact->layout, &xc) != RT_OK)
        return INFINITY;
    double er[2] = {0.0, 0.0}; /* Σ (x − exact)², Σ exact² */
    rt_backend_of(exact)->vec_diff_norms(rt_tensor_numel(exact), rt_tensor_f32(xc), rt_tensor_f32(exact), er);
    rt_tensor_release(xc);
    double rel = sqrt(er[0]) / fmax(sqrt(er[1]), 1e-30);
    return isfinite(rel) ? rel : INFINITY;
}

/* Rebuilds, without autograd, the chain of blocks from..to (from >= to,
 * walking down) starting at block `from`'s output `y`, exactly as backward
 * with grouping would. A rebuilt input's error is the larger of its
 * fingerprint drift (what later steps check) and its true error against
 * the exact input, which the calibration step keeps for every block (the
 * drift alone can read low by chance). *len_fail = inversions until the
 * first error over `limit` (0 if none), *worst = the largest error within
 * the limit, *over = the error that failed. */
static rt_status rt_calibrate_chain(rt_node *node, rt_seq_ctx *c, int from, int to, rt_tensor *y, double limit,
                                    int *len_fail, double *worst, double *over) {
    rt_rev_sequence *s = c->seq;
    rt_tensor *h = rt_tensor_retain(y);
    rt_status st = RT_OK;
    *len_fail = 0;
    for (int i = from, len = 1; i >= to && st == RT_OK; i--, len++) {
        rt_rev_block *b = rt_seq_block(s, i);
        rt_tensor *x = NULL, *x1 = NULL, *x2 = NULL, *exact = NULL;
        st = rt_rev_block_invert(b, &c->rec[i].rng, h, &x);
        if (st == RT_OK) st = rt_rev_halves(b, x, &x1, &x2);
        if (st == RT_OK && c->rec[i].exact_slot >= 0) st = rt_node_saved(node, c->rec[i].exact_slot, &exact);
        if (st == RT_OK) {
            double d = rt_drift(&c->rec[i], x1, x2);
            if (exact) d = fmax(d, rt_true_error(x, exact));
            if (!(d <= limit)) {
                *len_fail = len;
                *over = d;
                rt_rev_release4(x, x1, x2, NULL);
                break;
            }
            *worst = fmax(*worst, d);
        }
        rt_rev_release4(h, x1, x2, NULL);
        h = x;
    }
    rt_tensor_release(h);
    return st;
}

/* AUTO's choice of k (see memory/reversible.h): for k = n, n-1, …, rebuild
 * the chains that grouping every k rebuilds — from the output down to the
 * last exact block, and from each exact input (blocks m ≡ 0 mod k) down to
 * the block after the previous one — and keep the largest k whose chains
 * all stay within tol / RT_AUTO_MARGIN. A chain failing after L inversions
 * rules out every k > L, so the search skips to k = L. */
static rt_status rt_calibrate(rt_node *node, rt_seq_ctx *c, rt_tensor *out, double tol) {
    rt_rev_sequence *s = c->seq;
    int n = c->n, k = n;
    double limit = tol / RT_AUTO_MARGIN, worst = 0.0, over = 0.0;
    bool grad = rt_grad_set_enabled(false);
    rt_status st = RT_OK;
    while (k > 1 && st == RT_OK) {
        int fail = 0;
        worst = 0.0;
        int top = ((n - 1) / k) * k; /* the last block with an exact input */
        st = rt_calibrate_chain(node, c, n - 1, top + 1, out, limit, &fail, &worst, &over);
        for (int m = top; m >= k && st == RT_OK && !fail; m -= k) {
            rt_tensor *exact;
            st = rt_node_saved(node, c->rec[m].exact_slot, &exact);
            if (st == RT_OK) st = rt_calibrate_chain(node, c, m - 1, m - k + 1, exact, limit, &fail, &worst, &over);
        }
        if (st != RT_OK || !fail) break;
        k = fail < k - 1 ? fail : k - 1;
    }
    rt_grad_set_enabled(grad);
    if (st != RT_OK) return st;
    s->k = k;
    s->calib_error[0] = worst;
    s->calib_error[1] = k < n ? over : 0.0;
    return RT_OK;
}

static rt_status rt_seq_backward(rt_node *self, rt_tensor *const *grad_out, rt_tensor **grad_in) {
    rt_seq_ctx *c = self->ctx;
    rt_rev_sequence *s = c->seq;
    double tol = s->tol > 0 ? s->tol : 1e-3;
    rt_tensor *out = NULL, *y1 = NULL, *y2 = NULL, *dy1 = NULL, *dy2 = NULL;
    if (c->out_slot >= 0) RT_TRY(rt_node_saved(self, c->out_slot, &out));
    if (c->n != s->base.n_children)
        return rt_error_set(RT_ERR_STATE, "reversible sequence: blocks were added or removed between forward and "
                            "backward");
    rt_rev_block *last = rt_seq_block(s, c->n - 1);
    rt_status st = RT_OK;
    if (out) {
        /* every block of a sequence splits the same channel count, so one
         * block's input halves are the previous block's output halves */
        st = rt_rev_halves(last, out, &y1, &y2);
    } else if (!s->given[0]) {
        char path[128];
        return rt_error_set(RT_ERR_STATE, "reversible sequence '%s' saved no output (rt_rev_sequence_defer_output) "
                            "and none was given back before its backward (rt_rev_sequence_give_output): run the "
                            "whole network's backward, or turn the deferral off",
                            rt_module_path(&s->base, path, sizeof path));
    } else {
        /* in the order the blocks split into (the giver's may differ), a
         * new reference each; the given ones stay for a retained graph */
        bool grad = rt_grad_set_enabled(false);
        st = rt_to_layout(s->given[0], c->half_layout, &y1);
        if (st == RT_OK) st = rt_to_layout(s->given[1], c->half_layout, &y2);
        rt_grad_set_enabled(grad);
        const rt_tensor *g = grad_out[0];
        bool fits = st == RT_OK && y1->ndim == g->ndim && y2->ndim == g->ndim &&
                    y1->shape[1] + y2->shape[1] == g->shape[1] && y1->shape[1] == g->shape[1] / 2;
        for (int d = 0; fits && d < g->ndim; d++)
            fits = d == 1 || (y1->shape[d] == g->shape[d] && y2->shape[d] == g->shape[d]);
        if (st == RT_OK && !fits) {
            char path[128];
            st = rt_error_set(RT_ERR_STATE, "reversible sequence '%s': the output halves given back "
                              "(rt_rev_sequence_give_output) are not the halves of its output",
                              rt_module_path(&s->base, path, sizeof path));
        }
        if (self->consuming) { /* the wait ends with this backward */
            rt_rev_release4(s->given[0], s->given[1], NULL, NULL);
            s->given[0] = s->given[1] = NULL;
            s->awaiting = false;
        }
    }
    rt_recompute_scope scope;
    rt_recompute_begin(&scope);
    s->last_drift = 0.0;
    /* on meta nothing can be measured: k stays 0, so a meta run predicts
     * the calibration step, the one that keeps every exact input */
    if (st == RT_OK && c->calibrating && !rt_tensor_is_meta(out)) st = rt_calibrate(self, c, out, tol);
    /* The rebuild works on the halves only: free the whole output once it
     * is split, then split and free the whole incoming gradient, rather
     * than holding both until this backward returns (at the widest level
     * of a partially reversible U-Net they are two full-width activations
     * of the step's peak; split one after the other, the two whole tensors
     * and four halves are never live at once). */
    out = NULL;
    if (c->out_slot >= 0) rt_node_drop_saved(self, c->out_slot);
    if (st == RT_OK) st = rt_rev_halves(last, grad_out[0], &dy1, &dy2);
    rt_tensor_release(rt_node_take_grad(self, 0));
    for (int i = c->n - 1; i >= 0 && st == RT_OK; i--) {
        rt_rev_block *b = rt_seq_block(s, i);
        const rt_block_record *r = &c->rec[i];
        rt_tensor *x1 = NULL, *x2 = NULL, *dx1 = NULL, *dx2 = NULL, *exact = NULL;
        if (r->exact_slot >= 0) st = rt_node_saved(self, r->exact_slot, &exact);
        if (st != RT_OK) break;
        if (exact) {
            st = rt_backward_exact(b, r, exact, dy1, dy2, &x1, &x2, &dx1, &dx2);
        } else if (b->coupling == RT_COUPLING_ADDITIVE) {
            st = rt_backward_rebuild_additive(b, r, y1, y2, dy1, dy2, &x1, &x2, &dx1, &dx2);
            y1 = y2 = dy1 = dy2 = NULL; /* consumed */
            if (st == RT_OK && !rt_tensor_is_meta(x1)) {
                double d = rt_drift(r, x1, x2);
                s->last_drift = fmax(s->last_drift, d);
                st = rt_drift_check(b, d, tol);
            }
        } else {
            st = rt_backward_rebuild(b, r, y1, y2, dy1, dy2, &x1, &x2, &dx1, &dx2);
            if (st == RT_OK && !rt_tensor_is_meta(x1)) {
                double d = rt_drift(r, x1, x2);
                s->last_drift = fmax(s->last_drift, d);
                st = rt_drift_check(b, d, tol);
            }
        }
        rt_rev_release4(y1, y2, dy1, dy2);
        y1 = x1;
        y2 = x2;
        dy1 = dx1;
        dy2 = dx2;
    }
    rt_recompute_end(&scope);
    if (st == RT_OK && c->on_input) { /* the rebuilt input, handed over */
        bool grad = rt_grad_set_enabled(false);
        st = c->on_input(&s->base, y1, y2, !self->consuming, c->on_input_user);
        rt_grad_set_enabled(grad);
        y1 = y2 = NULL;
    }
    /* the rebuilt input is no longer needed; free it before the join */
    rt_rev_release4(y1, y2, NULL, NULL);
    y1 = y2 = NULL;
    if (st == RT_OK && rt_node_needs_grad(self, 0)) {
        bool grad = rt_grad_set_enabled(false);
        st = rt_rev_join(dy1, dy2, &grad_in[0]);
        rt_grad_set_enabled(grad);
    }
    rt_rev_release4(y1, y2, dy1, dy2);
    return st;
}

typedef struct rt_param_list {
    rt_tensor **items;
    int n, cap;
} rt_param_list;

static rt_status rt_param_list_push(rt_param_list *l, rt_tensor *t) {
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 32;
        rt_tensor **p = realloc(l->items, (size_t)cap * sizeof *p);
        if (!p) return rt_error_set(RT_ERR_OOM, "out of memory in a reversible sequence");
        l->items = p;
        l->cap = cap;
    }
    l->items[l->n++] = t;
    return RT_OK;
}

static rt_status rt_collect_params(rt_module *m, const char *path, void *user) {
    (void)path;
    for (int i = 0; i < m->n_entries; i++)
        if (m->entries[i].kind == RT_ENTRY_PARAM) RT_TRY(rt_param_list_push(user, m->entries[i].tensor));
    return RT_OK;
}

/* Reversible forward: no graph inside, one node outside whose edges include
 * every parameter of the blocks, so it exists (and parameter gradients
 * arrive) even when x needs no gradient. */
static rt_status rt_seq_forward_reversible_f32(rt_rev_sequence *s, rt_tensor *x, bool training, rt_dtype region,
                                               rt_tensor **out);

/* A sequence leaves any precision region (memory/precision.h): its coupling
 * arithmetic, stored output and exact inputs stay f32 so the rebuild in
 * backward stays exact enough; its node records f32 too. F and G rebuilt
 * in backward run in the region recorded here (rt_block_record.region).
 * Takes over the reference to x (released once split, also on error). */
static rt_status rt_seq_forward_reversible(rt_rev_sequence *s, rt_tensor *x, bool training, rt_tensor **out) {
    rt_dtype prev = rt_autocast_set_dtype(RT_F32), prev_compute = rt_autocast_set_compute_dtype(RT_F32);
    rt_status st = rt_seq_forward_reversible_f32(s, x, training, prev, out);
    rt_autocast_set_compute_dtype(prev_compute);
    rt_autocast_set_dtype(prev);
    return st;
}

static rt_status rt_seq_forward_reversible_f32(rt_rev_sequence *s, rt_tensor *x, bool training, rt_dtype region,
                                               rt_tensor **out) {
    int n = s->base.n_children;
    rt_param_list inputs = {0};
    rt_status st = rt_param_list_push(&inputs, x);
    if (st == RT_OK) st = rt_module_visit(&s->base, rt_collect_params, &inputs);
    rt_node *node = NULL;
    if (st == RT_OK) st = rt_node_create("reversible_sequence", inputs.n, inputs.items, 1, rt_seq_backward, 0, &node);
    free(inputs.items);
    if (st != RT_OK) {
        rt_tensor_release(x);
        return st;
    }
    rt_seq_ctx *c = NULL;
    if (node) {
        c = calloc(1, sizeof *c + (size_t)n * sizeof(rt_block_record));
        if (!c) {
            rt_node_release(node);
            rt_tensor_release(x);
            return rt_error_set(RT_ERR_OOM, "out of memory in a reversible sequence");
        }
        node->ctx = c;
        c->seq = s;
        c->n = n;
        c->calibrating = s->grouping == RT_GROUPING_AUTO && s->k == 0 && training;
    }
    int k = s->grouping == RT_GROUPING_FULL ? 0 : (s->k > 0 ? s->k : 1);
    bool grad = rt_grad_set_enabled(false);
    /* Every block of a sequence splits the same channel count, so a block's
     * output halves are the next block's input halves: split once, join once. */
    rt_tensor *x1 = NULL, *x2 = NULL, *h = NULL;
    st = rt_rev_halves(rt_seq_block(s, 0), x, &x1, &x2);
    for (int i = 0; i < n && st == RT_OK; i++) {
        rt_rev_block *b = rt_seq_block(s, i);
        rt_block_record *r = c ? &c->rec[i] : NULL;
        if (r) {
            r->exact_slot = -1;
            r->region = region;
            if (c->calibrating || (k > 0 && i % k == 0)) { /* keep this block's exact input */
                rt_tensor *in = i == 0 ? rt_tensor_retain(x) : NULL;
                if (i > 0) st = rt_rev_join(x1, x2, &in);
                if (st == RT_OK) st = rt_node_save(node, in, &r->exact_slot);
                rt_tensor_release(in);
            }
            if (st == RT_OK) rt_fingerprint(x1, x2, &r->sum, &r->sumsq, &r->proj);
        }
        if (i == 0) { /* split (and saved when exact): the whole input is no longer needed */
            rt_tensor_release(x);
            x = NULL;
        }
        rt_tensor *y1 = NULL, *y2 = NULL;
        rt_rev_rng at;
        if (st == RT_OK) st = rt_rev_block_apply(b, NULL, &at, x1, x2, &y1, &y2);
        if (r) r->rng = at;
        if (st == RT_OK && training) {
            b->has_record = true;
            b->seed = at.seed;
            b->off_f = at.off_f;
            b->off_g = at.off_g;
        }
        rt_rev_release4(x1, x2, NULL, NULL);
        x1 = y1;
        x2 = y2;
    }
    rt_tensor_release(x); /* NULL unless the split failed */
    rt_layout half_layout = x1 ? x1->layout : RT_LAYOUT_PLAIN;
    if (st == RT_OK) st = rt_rev_join(x1, x2, &h);
    rt_rev_release4(x1, x2, NULL, NULL);
    rt_grad_set_enabled(grad);
    if (st == RT_OK) { /* one deferred graph at a time: this one's */
        rt_rev_release4(s->given[0], s->given[1], NULL, NULL); /* from a graph that never ran backward */
        s->given[0] = s->given[1] = NULL;
        s->awaiting = node && s->defer_output && !c->calibrating;
    }
    if (st == RT_OK && node) {
        c->on_input = s->on_input;
        c->on_input_user = s->on_input_user;
    }
    if (st == RT_OK && node && s->awaiting) {
        c->out_slot = -1; /* given back before the backward (rt_rev_sequence_give_output) */
        c->half_layout = half_layout;
    } else if (st == RT_OK && node) {
        st = rt_node_save(node, h, &c->out_slot);
    }
    if (st == RT_OK) rt_node_set_output(node, h, 0);
    rt_node_release(node);
    if (st != RT_OK) {
        rt_tensor_release(h);
        return st;
    }
    *out = h;
    return RT_OK;
}

/* The sequence's forward on an owned reference to x (released here, also on
 * error): the reversible path drops it once x is split into halves, so a
 * caller that handed its only reference over (rt_module_forward_consume)
 * does not keep a full-width input alive through every block. */
static rt_status rt_seq_forward_consume(rt_module *m, rt_tensor *x, rt_tensor **y) {
    rt_rev_sequence *s = (rt_rev_sequence *)m;
    *y = NULL;
    rt_status st = RT_OK;
    for (int i = 0; i < m->n_children && st == RT_OK; i++)
        if (!rt_rev_block_of(m->children[i].module)) {
            char path[128];
            st = rt_error_set(RT_ERR_INVALID_ARG, "reversible sequence '%s': child '%s' is a %s, not a "
                              "ReversibleBlock", rt_module_path(m, path, sizeof path), m->children[i].name,
                              m->children[i].module->cls->type);
        }
    if (st == RT_OK && s->grouping == RT_GROUPING_EVERY && s->k < 1)
        st = rt_error_set(RT_ERR_INVALID_ARG, "reversible sequence: grouping every k needs k >= 1 (got %d)", s->k);
    if (st != RT_OK || m->n_children == 0) {
        if (st == RT_OK) *y = x;
        else rt_tensor_release(x);
        return st;
    }
    if (x->ndim >= 2 && x->layout == RT_LAYOUT_BLOCKED &&
        ((x->shape[1] / 2) % rt_layout_block() || (x->shape[1] - x->shape[1] / 2) % rt_layout_block())) {
        /* The halves are not block-aligned, so every block works in the PLAIN
         * order; convert once here so inputs and rebuilt inputs share one order. */
        rt_tensor *plain = NULL;
        st = rt_to_layout(x, RT_LAYOUT_PLAIN, &plain);
        rt_tensor_release(x);
        return st == RT_OK ? rt_seq_forward_consume(m, plain, y) : st;
    }
    if (s->reversible && rt_grad_is_enabled()) return rt_seq_forward_reversible(s, x, m->training, y);
    rt_tensor *h = x;
    for (int i = 0; i < m->n_children; i++) {
        rt_tensor *next = NULL;
        st = rt_module_forward_consume(m->children[i].module, h, &next); /* releases h */
        h = next;
        if (st != RT_OK) return st;
    }
    *y = h;
    return RT_OK;
}

static rt_status rt_seq_forward(rt_module *m, rt_tensor *x, rt_tensor **y) {
    return rt_seq_forward_consume(m, rt_tensor_retain(x), y);
}

static void rt_seq_destroy(rt_module *m) {
    rt_rev_sequence *s = (rt_rev_sequence *)m;
    rt_rev_release4(s->given[0], s->given[1], NULL, NULL);
}

static const rt_module_class rt_rev_sequence_class = {"ReversibleSequence", rt_seq_forward, rt_seq_destroy,
                                                      rt_seq_forward_consume};

rt_status rt_rev_sequence_create(rt_module **out) {
    if (!out) return rt_error_set(RT_ERR_INVALID_ARG, "rt_rev_sequence_create: the output pointer is NULL");
    rt_rev_sequence *s = (rt_rev_sequence *)rt_module_alloc(sizeof *s, &rt_rev_sequence_class);
    *out = s ? &s->base : NULL;
    if (!s) return RT_ERR_OOM;
    s->reversible = true;
    s->grouping = RT_GROUPING_FULL;
    return RT_OK;
}

rt_rev_sequence *rt_rev_sequence_of(rt_module *m) {
    return rt_module_is(m, &rt_rev_sequence_class) ? (rt_rev_sequence *)m : NULL;
}

static rt_status rt_seq_arg(rt_module *m, const char *fn, rt_rev_sequence **s) {
    *s = rt_rev_sequence_of(m);
    if (*s) return RT_OK;
    return rt_error_set(RT_ERR_INVALID_ARG, "%s: the module is %s, not a ReversibleSequence", fn,
                        m ? m->cls->type : "NULL");
}

rt_status rt_rev_sequence_defer_output(rt_module *seq, bool on) {
    rt_rev_sequence *s;
    RT_TRY(rt_seq_arg(seq, "rt_rev_sequence_defer_output", &s));
    s->defer_output = on;
    return RT_OK;
}

rt_status rt_rev_sequence_give_output(rt_module *seq, rt_tensor *y1, rt_tensor *y2) {
    rt_rev_sequence *s;
    RT_TRY(rt_seq_arg(seq, "rt_rev_sequence_give_output", &s));
    if (!y1 || !y2) return rt_error_set(RT_ERR_INVALID_ARG, "rt_rev_sequence_give_output: y1 and y2 must be non-NULL");
    rt_rev_release4(s->given[0], s->given[1], NULL, NULL);
    s->given[0] = s->given[1] = NULL;
    if (!s->awaiting) { /* nothing would take them */
        rt_rev_release4(y1, y2, NULL, NULL);
        return RT_OK;
    }
    s->given[0] = y1;
    s->given[1] = y2;
    return RT_OK;
}

rt_status rt_rev_sequence_on_input_rebuilt(rt_module *seq, rt_rev_input_fn fn, void *user) {
    rt_rev_sequence *s;
    RT_TRY(rt_seq_arg(seq, "rt_rev_sequence_on_input_rebuilt", &s));
    s->on_input = fn;
    s->on_input_user = user;
    return RT_OK;
}

typedef struct rt_seq_setting {
    bool set_reversible, reversible, set_grouping;
    rt_grouping grouping;
    int k, count;
} rt_seq_setting;

static rt_status rt_seq_apply(rt_module *m, const char *path, void *user) {
    (void)path;
    rt_seq_setting *set = user;
    rt_rev_sequence *s = rt_rev_sequence_of(m);
    if (!s) return RT_OK;
    set->count++;
    if (set->set_reversible) s->reversible = set->reversible;
    if (set->set_grouping) {
        if (s->grouping != set->grouping || set->grouping != RT_GROUPING_AUTO) s->k = 0;
        s->grouping = set->grouping;
        if (set->grouping == RT_GROUPING_EVERY) s->k = set->k;
    }
    return RT_OK;
}

void rt_module_set_reversible(rt_module *m, bool reversible) {
    rt_seq_setting set = {.set_reversible = true, .reversible = reversible};
    if (m) rt_module_visit(m, rt_seq_apply, &set);
}

rt_status rt_module_set_grouping(rt_module *m, rt_grouping grouping, int k) {
    if (!m) return rt_error_set(RT_ERR_INVALID_ARG, "rt_module_set_grouping: the module is NULL");
    if (grouping == RT_GROUPING_EVERY && k < 1)
        return rt_error_set(RT_ERR_INVALID_ARG, "grouping every k needs k >= 1 (got %d)", k);
    if (grouping != RT_GROUPING_FULL && grouping != RT_GROUPING_EVERY && grouping != RT_GROUPING_AUTO)
        return rt_error_set(RT_ERR_INVALID_ARG, "unknown grouping %d", (int)grouping);
    rt_seq_setting set = {.set_grouping = true, .grouping = grouping, .k = k};
    return rt_module_visit(m, rt_seq_apply, &set);
}

int rt_module_count_reversible(rt_module *m) {
    rt_seq_setting set = {0};
    if (m) rt_module_visit(m, rt_seq_apply, &set);
    return set.count;
}
