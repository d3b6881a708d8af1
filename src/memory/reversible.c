#include "memory/reversible.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/engine.h"
#include "core/rng.h"
#include "kernels/vec.h"
#include "ops/coupling.h"
#include "ops/ops.h"

/* ---- block --------------------------------------------------------------- */

/* What the sequence keeps per block besides tensors: where the generator was
 * before F and before G, and the input's fingerprint. */
typedef struct rt_block_record {
    uint64_t seed, off_f, off_g;
    double sum, sumsq, proj;
    int exact_slot; /* saved exact input, or -1 */
} rt_block_record;


/* y2 = couple(x2, G's output): add for additive, ops/coupling.h for affine. */
static rt_status rt_couple(const rt_rev_block *b, rt_tensor *x2, rt_tensor *gy, rt_tensor **y2) {
    return b->coupling == RT_COUPLING_ADDITIVE ? rt_add(x2, gy, y2) : rt_affine_coupling(x2, gy, y2);
}

static rt_status rt_uncouple(const rt_rev_block *b, rt_tensor *y2, rt_tensor *gy, rt_tensor **x2) {
    return b->coupling == RT_COUPLING_ADDITIVE ? rt_sub(y2, gy, x2) : rt_affine_coupling_inverse(y2, gy, x2);
}

static rt_status rt_halves(const rt_rev_block *b, rt_tensor *x, rt_tensor **h1, rt_tensor **h2) {
    const int64_t sizes[2] = {b->c1, b->c2};
    rt_tensor *outs[2];
    *h1 = *h2 = NULL;
    RT_TRY(rt_split_channels(x, 2, sizes, outs));
    *h1 = outs[0];
    *h2 = outs[1];
    return RT_OK;
}

static rt_status rt_join(rt_tensor *a, rt_tensor *b, rt_tensor **out) {
    rt_tensor *parts[2] = {a, b};
    return rt_cat_channels(2, parts, out);
}

static void rt_release4(rt_tensor *a, rt_tensor *b, rt_tensor *c, rt_tensor *d) {
    rt_tensor_release(a);
    rt_tensor_release(b);
    rt_tensor_release(c);
    rt_tensor_release(d);
}

/* Checks that sub-network `net` maps (1, cin, sp) to (1, cout, sp), running
 * it once without autograd in eval mode on zeros on the parameters' device. */
static rt_status rt_probe(const char *block, const char *which, rt_subnet net, rt_device device, int ndim,
                          const int64_t *shape, int64_t cin, int64_t cout) {
    int64_t in_shape[5];
    memcpy(in_shape, shape, (size_t)ndim * sizeof *shape);
    in_shape[0] = 1;
    in_shape[1] = cin;
    rt_tensor *x = rt_tensor_zeros(ndim, in_shape, RT_F32, device, RT_MEM_TEMP), *y = NULL;
    if (!x) return RT_ERR_OOM;
    bool grad = rt_grad_set_enabled(false);
    rt_status st = net.forward(net.self, x, false, &y);
    rt_grad_set_enabled(grad);
    if (st == RT_OK) {
        bool ok = y->ndim == ndim && y->shape[0] == 1 && y->shape[1] == cout;
        for (int i = 2; ok && i < ndim; i++) ok = y->shape[i] == shape[i];
        if (!ok) {
            char a[64], want[64], got[64];
            x->shape[1] = cout; /* the shape F or G should have produced, for the message */
            rt_tensor_shape_str(x, want, sizeof want);
            x->shape[1] = cin;
            st = rt_error_set(RT_ERR_SHAPE, "reversible block '%s': %s must map %s to %s (same size, no stride), "
                              "got %s", block, which, rt_tensor_shape_str(x, a, sizeof a), want,
                              rt_tensor_shape_str(y, got, sizeof got));
        }
    }
    rt_tensor_release(x);
    rt_tensor_release(y);
    return st;
}

rt_status rt_rev_block_init(rt_rev_block *b, const char *name, rt_coupling coupling, rt_subnet f, rt_subnet g,
                            rt_tensor *const *params, int n_params, int ndim, const int64_t *shape) {
    memset(b, 0, sizeof *b);
    snprintf(b->name, sizeof b->name, "%s", name);
    if (ndim < 3 || ndim > 5 || shape[1] < 2)
        return rt_error_set(RT_ERR_SHAPE, "reversible block '%s' needs inputs (N, C, ...) with C >= 2 channels to "
                            "split in halves, got %d-D input with %lld channels", name, ndim,
                            ndim >= 2 ? (long long)shape[1] : 0LL);
    b->coupling = coupling;
    b->f = f;
    b->g = g;
    b->c1 = shape[1] / 2;
    b->c2 = shape[1] - b->c1;
    rt_device device = n_params > 0 ? params[0]->device : RT_DEVICE_CPU;
    RT_TRY(rt_probe(name, "F", f, device, ndim, shape, b->c2, b->c1));
    RT_TRY(rt_probe(name, "G", g, device, ndim, shape, b->c1, coupling == RT_COUPLING_AFFINE ? 2 * b->c2 : b->c2));
    b->params = malloc((size_t)(n_params ? n_params : 1) * sizeof *b->params);
    if (!b->params) return rt_error_set(RT_ERR_OOM, "out of memory creating block '%s'", name);
    memcpy(b->params, params, (size_t)n_params * sizeof *params);
    b->n_params = n_params;
    return RT_OK;
}

void rt_rev_block_destroy(rt_rev_block *b) {
    if (!b) return;
    free(b->params);
    b->params = NULL;
}

rt_status rt_rev_block_forward(rt_rev_block *b, rt_tensor *x, bool training, rt_tensor **y) {
    *y = NULL;
    rt_tensor *x1, *x2, *fx = NULL, *y1 = NULL, *gy = NULL, *y2 = NULL;
    RT_TRY(rt_halves(b, x, &x1, &x2));
    rt_status st = b->f.forward(b->f.self, x2, training, &fx);
    if (st == RT_OK) st = rt_add(x1, fx, &y1);
    if (st == RT_OK) st = b->g.forward(b->g.self, y1, training, &gy);
    if (st == RT_OK) st = rt_couple(b, x2, gy, &y2);
    if (st == RT_OK) st = rt_join(y1, y2, y);
    rt_release4(x1, x2, fx, y1);
    rt_tensor_release(gy);
    rt_tensor_release(y2);
    return st;
}

/* The inverse's body; caller has switched autograd off. With a record, the
 * generator is rewound to the forward's offsets so dropout replays its masks. */
static rt_status rt_block_invert_at(rt_rev_block *b, const rt_block_record *r, bool training, rt_tensor *y,
                                    rt_tensor **x);

static rt_status rt_block_invert(rt_rev_block *b, rt_tensor *y, bool training, rt_tensor **x) {
    return rt_block_invert_at(b, NULL, training, y, x);
}

rt_status rt_rev_block_inverse(rt_rev_block *b, rt_tensor *y, bool training, rt_tensor **x) {
    bool grad = rt_grad_set_enabled(false), rec = rt_recompute_set_active(true);
    rt_status st = rt_block_invert(b, y, training, x);
    rt_recompute_set_active(rec);
    rt_grad_set_enabled(grad);
    return st;
}

rt_status rt_rev_block_check(rt_rev_block *b, rt_tensor *x, bool training, float *err_inv_fwd, float *err_fwd_inv) {
    bool grad = rt_grad_set_enabled(false), rec = rt_recompute_set_active(true);
    rt_tensor *y = NULL, *xr = NULL, *xi = NULL, *yr = NULL;
    rt_status st = rt_rev_block_forward(b, x, training, &y);
    if (st == RT_OK) st = rt_block_invert(b, y, training, &xr);
    if (st == RT_OK) st = rt_block_invert(b, x, training, &xi);
    if (st == RT_OK) st = rt_rev_block_forward(b, xi, training, &yr);
    double e1 = 0, e2 = 0, scale;
    if (st == RT_OK) st = rt_compare(xr, x, &e1, &scale);
    if (st == RT_OK) st = rt_compare(yr, x, &e2, &scale);
    if (st == RT_OK) {
        *err_inv_fwd = (float)e1;
        *err_fwd_inv = (float)e2;
    }
    rt_release4(y, xr, xi, yr);
    rt_recompute_set_active(rec);
    rt_grad_set_enabled(grad);
    return st;
}

rt_status rt_rev_block_logdet(rt_rev_block *b, rt_tensor *x, bool training, rt_tensor **out) {
    *out = NULL;
    int64_t n = x->shape[0];
    if (b->coupling == RT_COUPLING_ADDITIVE) {
        *out = rt_tensor_zeros(1, &n, RT_F32, x->device, RT_MEM_TEMP);
        return *out ? RT_OK : RT_ERR_OOM;
    }
    bool grad = rt_grad_set_enabled(false), rec = rt_recompute_set_active(true);
    rt_tensor *x1, *x2, *fx = NULL, *y1 = NULL, *gy = NULL;
    rt_status st = rt_halves(b, x, &x1, &x2);
    if (st == RT_OK) st = b->f.forward(b->f.self, x2, training, &fx);
    if (st == RT_OK) st = rt_add(x1, fx, &y1);
    if (st == RT_OK) st = b->g.forward(b->g.self, y1, training, &gy);
    if (st == RT_OK) st = rt_affine_coupling_logdet(gy, out);
    rt_release4(x1, x2, fx, y1);
    rt_tensor_release(gy);
    rt_recompute_set_active(rec);
    rt_grad_set_enabled(grad);
    return st;
}

/* ---- sequence ------------------------------------------------------------ */


typedef struct rt_seq_ctx {
    rt_rev_sequence *seq;
    bool training, calibrating;
    int out_slot;
    rt_block_record rec[];
} rt_seq_ctx;

/* sum, sum of squares and a ±1 pseudo-random projection of the input held
 * as its two halves (x1 then x2, as flat arrays), in f64. The projection
 * moves by about ‖δ‖ for an error δ, so it sees small random drift that the
 * first two moments average away. A non-finite input gives a non-finite sum
 * of squares. Half-wise, because backward keeps inputs as halves. */
static void rt_fingerprint_part(const rt_tensor *x, int64_t base, double *sum, double *sumsq, double *proj) {
    const float *p = rt_tensor_f32(x);
    int64_t n = rt_tensor_numel(x);
    double s = 0.0, q = 0.0, r = 0.0;
    const uint32_t b0 = (uint32_t)base;
    /* A 32-bit multiplicative hash gives the signs: it vectorises, where a
     * 64-bit multiply would not on AVX2. */
#pragma omp parallel for simd reduction(+ : s, q, r) if (n > 32768)
    for (int64_t i = 0; i < n; i++) {
        const double v = p[i];
        const uint32_t h = (b0 + (uint32_t)i) * 2654435761u;
        s += v;
        q += v * v;
        r += (h >> 31) ? -v : v;
    }
    *sum += s;
    *sumsq += q;
    *proj += r;
}

static void rt_fingerprint(const rt_tensor *x1, const rt_tensor *x2, double *sum, double *sumsq, double *proj) {
    *sum = *sumsq = *proj = 0.0;
    rt_fingerprint_part(x1, 0, sum, sumsq, proj);
    rt_fingerprint_part(x2, rt_tensor_numel(x1), sum, sumsq, proj);
}

/* Relative drift of the rebuilt halves against the forward's fingerprint. */
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

static void rt_rng_goto(uint64_t seed, uint64_t offset) {
    rt_generator *g = rt_default_generator();
    g->seed = seed;
    g->offset = offset;
}

static rt_status rt_block_invert_at(rt_rev_block *b, const rt_block_record *r, bool training, rt_tensor *y,
                                    rt_tensor **x) {
    *x = NULL;
    rt_tensor *y1, *y2, *gy = NULL, *x2 = NULL, *fx = NULL, *x1 = NULL;
    RT_TRY(rt_halves(b, y, &y1, &y2));
    if (r) rt_rng_goto(r->seed, r->off_g);
    rt_status st = b->g.forward(b->g.self, y1, training, &gy);
    if (st == RT_OK) st = rt_uncouple(b, y2, gy, &x2);
    if (r) rt_rng_goto(r->seed, r->off_f);
    if (st == RT_OK) st = b->f.forward(b->f.self, x2, training, &fx);
    if (st == RT_OK) st = rt_sub(y1, fx, &x1);
    if (st == RT_OK) st = rt_join(x1, x2, x);
    rt_release4(y1, y2, gy, x2);
    rt_tensor_release(fx);
    rt_tensor_release(x1);
    return st;
}

/* A leaf requiring grad that shares t's storage. */
static rt_tensor *rt_leaf(rt_tensor *t) {
    rt_tensor *l = rt_tensor_detach(t);
    if (l) l->requires_grad = true;
    return l;
}

/* Gradient of x held by leaf l, or zeros when nothing reached it. */
static rt_tensor *rt_leaf_grad(rt_tensor *l) {
    return l->grad ? rt_tensor_retain(l->grad) : rt_tensor_zeros_like(l, RT_MEM_TEMP);
}

/* Block i's backward from its exact input x: recompute (y1, y2) with a
 * graph and back-propagate (dy1, dy2); returns x's halves and their grads. */
static rt_status rt_backward_exact(rt_rev_block *b, const rt_block_record *r, bool training, rt_tensor *x,
                                   rt_tensor *dy1, rt_tensor *dy2, rt_tensor **x1o, rt_tensor **x2o,
                                   rt_tensor **dx1, rt_tensor **dx2) {
    *x1o = *x2o = *dx1 = *dx2 = NULL;
    rt_tensor *h1, *h2, *x1 = NULL, *x2 = NULL, *fx = NULL, *y1 = NULL, *gy = NULL, *y2 = NULL;
    RT_TRY(rt_halves(b, x, &h1, &h2));
    x1 = rt_leaf(h1);
    x2 = rt_leaf(h2);
    rt_status st = (x1 && x2) ? RT_OK : RT_ERR_OOM;
    bool grad = rt_grad_set_enabled(true);
    rt_rng_goto(r->seed, r->off_f);
    if (st == RT_OK) st = b->f.forward(b->f.self, x2, training, &fx);
    if (st == RT_OK) st = rt_add(x1, fx, &y1);
    rt_rng_goto(r->seed, r->off_g);
    if (st == RT_OK) st = b->g.forward(b->g.self, y1, training, &gy);
    if (st == RT_OK) st = rt_couple(b, x2, gy, &y2);
    rt_grad_set_enabled(false);
    /* y2 depends on y1 through G: its backward keeps y1's graph for the second pass */
    if (st == RT_OK) st = rt_backward(y2, dy2, true);
    if (st == RT_OK) st = rt_backward(y1, dy1, false);
    if (st == RT_OK && (!(*dx1 = rt_leaf_grad(x1)) || !(*dx2 = rt_leaf_grad(x2)))) st = RT_ERR_OOM;
    rt_release4(fx, y1, gy, y2);
    rt_tensor_release(x1);
    rt_tensor_release(x2);
    rt_grad_set_enabled(grad);
    if (st != RT_OK) {
        rt_release4(h1, h2, *dx1, *dx2);
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
static rt_status rt_backward_rebuild(rt_rev_block *b, const rt_block_record *r, bool training, rt_tensor *y1,
                                     rt_tensor *y2, rt_tensor *dy1, rt_tensor *dy2, rt_tensor **x1o,
                                     rt_tensor **x2o, rt_tensor **dx1, rt_tensor **dx2) {
    *x1o = *x2o = *dx1 = *dx2 = NULL;
    rt_tensor *y1l = rt_leaf(y1), *gy = NULL, *x2 = NULL, *x2l = NULL, *y2r = NULL, *fx = NULL, *x1 = NULL;
    rt_tensor *g1 = NULL, *dy1t = NULL, *g2 = NULL;
    rt_status st = y1l ? RT_OK : RT_ERR_OOM;
    bool grad = rt_grad_set_enabled(true);
    rt_rng_goto(r->seed, r->off_g);
    if (st == RT_OK) st = b->g.forward(b->g.self, y1l, training, &gy);
    rt_grad_set_enabled(false);
    if (st == RT_OK) st = rt_uncouple(b, y2, gy, &x2);
    if (st == RT_OK && !(x2l = rt_leaf(x2))) st = RT_ERR_OOM;
    rt_grad_set_enabled(true);
    if (st == RT_OK) st = rt_couple(b, x2l, gy, &y2r);
    rt_rng_goto(r->seed, r->off_f);
    if (st == RT_OK) st = b->f.forward(b->f.self, x2l, training, &fx);
    rt_grad_set_enabled(false);
    if (st == RT_OK) st = rt_sub(y1, fx, &x1);
    if (st == RT_OK) st = rt_backward(y2r, dy2, false);
    if (st == RT_OK && !(g1 = rt_leaf_grad(y1l))) st = RT_ERR_OOM;
    if (st == RT_OK) st = rt_add(dy1, g1, &dy1t);
    if (st == RT_OK) st = rt_backward(fx, dy1t, false);
    if (st == RT_OK && !(g2 = rt_leaf_grad(x2l))) st = RT_ERR_OOM;
    rt_grad_set_enabled(grad);
    rt_release4(y1l, gy, x2l, y2r);
    rt_release4(fx, g1, NULL, NULL);
    if (st != RT_OK) {
        rt_release4(x1, x2, dy1t, g2);
        return st;
    }
    *x1o = x1;
    *x2o = x2;
    *dx1 = dy1t;
    *dx2 = g2;
    return RT_OK;
}

static rt_status rt_seq_backward(rt_node *self, rt_tensor *const *grad_out, rt_tensor **grad_in) {
    rt_seq_ctx *c = self->ctx;
    rt_rev_sequence *s = c->seq;
    double tol = s->tol > 0 ? s->tol : 1e-3;
    rt_tensor *out, *y1 = NULL, *y2 = NULL, *dy1 = NULL, *dy2 = NULL;
    RT_TRY(rt_node_saved(self, c->out_slot, &out));
    /* every block of a sequence splits the same channel count, so one block's
     * input halves are the previous block's output halves */
    rt_status st = rt_halves(&s->blocks[s->n - 1], out, &y1, &y2);
    if (st == RT_OK) st = rt_halves(&s->blocks[s->n - 1], grad_out[0], &dy1, &dy2);
    rt_generator saved_gen = *rt_default_generator();
    bool rec = rt_recompute_set_active(true);
    s->last_drift = 0.0;
    int chain = 0, fail_chain = s->n + 1; /* calibration: inversions since the last exact input */
    double worst_within = 0.0;
    for (int i = s->n - 1; i >= 0 && st == RT_OK; i--) {
        rt_rev_block *b = &s->blocks[i];
        const rt_block_record *r = &c->rec[i];
        rt_tensor *x1 = NULL, *x2 = NULL, *dx1 = NULL, *dx2 = NULL, *exact = NULL;
        if (r->exact_slot >= 0) st = rt_node_saved(self, r->exact_slot, &exact);
        if (st != RT_OK) break;
        if (exact && c->calibrating) {
            /* Measure how far the chain of rebuilds has drifted, then take this
             * block's gradients from its exact input, so a calibration step is
             * never built on a rebuild that a FULL sequence would refuse. */
            rt_tensor *y = NULL, *x = NULL;
            bool grad = rt_grad_set_enabled(false);
            st = rt_join(y1, y2, &y);
            if (st == RT_OK) st = rt_block_invert_at(b, r, c->training, y, &x);
            rt_grad_set_enabled(grad);
            if (st == RT_OK) st = rt_backward_exact(b, r, c->training, exact, dy1, dy2, &x1, &x2, &dx1, &dx2);
            if (st == RT_OK && !rt_tensor_is_meta(x)) {
                double e = rt_rel_difference(x, exact);
                chain++;
                if (e > tol) { /* a chain this long drifts too far: restart from the exact input */
                    if (chain < fail_chain) {
                        fail_chain = chain;
                        s->calib_error[1] = e;
                    }
                    chain = 0;
                } else { /* continue the chain from the rebuilt input */
                    worst_within = fmax(worst_within, e);
                    rt_release4(x1, x2, NULL, NULL);
                    st = rt_halves(b, x, &x1, &x2);
                }
            }
            rt_release4(y, x, NULL, NULL);
        } else if (exact) {
            st = rt_backward_exact(b, r, c->training, exact, dy1, dy2, &x1, &x2, &dx1, &dx2);
        } else {
            st = rt_backward_rebuild(b, r, c->training, y1, y2, dy1, dy2, &x1, &x2, &dx1, &dx2);
            if (st == RT_OK && !rt_tensor_is_meta(x1)) {
                double d = rt_drift(r, x1, x2);
                s->last_drift = fmax(s->last_drift, d);
                if (d == INFINITY)
                    st = rt_error_set(RT_ERR_NONFINITE, "reversible block '%s': the rebuilt input is not finite "
                                      "(F or G overflowed); keep exact activations with grouping every k or auto",
                                      b->name);
                else if (d > tol)
                    st = rt_error_set(RT_ERR_RECONSTRUCTION,
                                      "reversible block '%s': the input rebuilt from the output drifted by %.3g "
                                      "(relative), over the tolerance %.3g; keep exact activations with grouping "
                                      "every k or auto, or check F and G for exploding activations",
                                      b->name, d, tol);
            }
        }
        rt_release4(y1, y2, dy1, dy2);
        y1 = x1;
        y2 = x2;
        dy1 = dx1;
        dy2 = dx2;
    }
    if (st == RT_OK && c->calibrating) {
        s->k = fail_chain - 1 >= 1 ? (fail_chain - 1 < s->n ? fail_chain - 1 : s->n) : 1;
        s->calib_error[0] = worst_within;
        if (fail_chain > s->n) s->calib_error[1] = 0.0;
    }
    rt_recompute_set_active(rec);
    *rt_default_generator() = saved_gen;
    if (st == RT_OK && rt_node_needs_grad(self, 0)) {
        bool grad = rt_grad_set_enabled(false);
        st = rt_join(dy1, dy2, &grad_in[0]);
        rt_grad_set_enabled(grad);
    }
    rt_release4(y1, y2, dy1, dy2);
    return st;
}

/* Reversible forward: no graph inside, one node outside. */
static rt_status rt_seq_forward_reversible(rt_rev_sequence *s, rt_tensor *x, bool training, rt_tensor **out) {
    int n_in = 1;
    for (int i = 0; i < s->n; i++) n_in += s->blocks[i].n_params;
    rt_tensor **inputs = malloc((size_t)n_in * sizeof *inputs);
    if (!inputs) return rt_error_set(RT_ERR_OOM, "out of memory in a reversible sequence");
    inputs[0] = x;
    for (int i = 0, k = 1; i < s->n; i++)
        for (int j = 0; j < s->blocks[i].n_params; j++) inputs[k++] = s->blocks[i].params[j];
    rt_node *node = NULL;
    rt_status st = rt_node_create("reversible_sequence", n_in, inputs, 1, rt_seq_backward, 0, &node);
    free(inputs);
    if (st != RT_OK) return st;
    rt_seq_ctx *c = NULL;
    if (node) {
        c = calloc(1, sizeof *c + (size_t)s->n * sizeof(rt_block_record));
        if (!c) {
            rt_node_release(node);
            return rt_error_set(RT_ERR_OOM, "out of memory in a reversible sequence");
        }
        node->ctx = c;
        c->seq = s;
        c->training = training;
        c->calibrating = s->grouping == RT_GROUPING_AUTO && s->k == 0 && training;
    }
    int k = s->grouping == RT_GROUPING_FULL ? 0 : (s->k > 0 ? s->k : 1);
    bool grad = rt_grad_set_enabled(false);
    rt_generator *gen = rt_default_generator();
    /* Every block of a sequence splits the same channel count, so a block's
     * output halves are the next block's input halves: split once, join once. */
    rt_tensor *x1 = NULL, *x2 = NULL, *h = NULL;
    if (s->n > 0) st = rt_halves(&s->blocks[0], x, &x1, &x2);
    for (int i = 0; i < s->n && st == RT_OK; i++) {
        rt_rev_block *b = &s->blocks[i];
        if (c) {
            rt_block_record *r = &c->rec[i];
            r->exact_slot = -1;
            if (c->calibrating || (k > 0 && i % k == 0)) { /* keep this block's exact input */
                rt_tensor *in = i == 0 ? rt_tensor_retain(x) : NULL;
                if (i > 0) st = rt_join(x1, x2, &in);
                if (st == RT_OK) st = rt_node_save(node, in, &r->exact_slot);
                rt_tensor_release(in);
            }
            r->seed = gen->seed;
            r->off_f = gen->offset;
        }
        rt_tensor *fx = NULL, *y1 = NULL, *gy = NULL, *y2 = NULL;
        if (st == RT_OK && c && !rt_tensor_is_meta(x1))
            rt_fingerprint(x1, x2, &c->rec[i].sum, &c->rec[i].sumsq, &c->rec[i].proj);
        if (st == RT_OK) st = b->f.forward(b->f.self, x2, training, &fx);
        if (st == RT_OK) st = rt_add(x1, fx, &y1);
        if (c) c->rec[i].off_g = gen->offset;
        if (st == RT_OK) st = b->g.forward(b->g.self, y1, training, &gy);
        if (st == RT_OK) st = rt_couple(b, x2, gy, &y2);
        rt_release4(x1, x2, fx, gy);
        x1 = y1;
        x2 = y2;
    }
    if (s->n == 0) h = rt_tensor_retain(x);
    else if (st == RT_OK) st = rt_join(x1, x2, &h);
    rt_release4(x1, x2, NULL, NULL);
    rt_grad_set_enabled(grad);
    if (st == RT_OK && node) st = rt_node_save(node, h, &c->out_slot);
    if (st == RT_OK) rt_node_set_output(node, h, 0);
    rt_node_release(node);
    if (st != RT_OK) {
        rt_tensor_release(h);
        return st;
    }
    *out = h;
    return RT_OK;
}

rt_status rt_rev_sequence_forward(rt_rev_sequence *s, rt_tensor *x, bool training, rt_tensor **y) {
    *y = NULL;
    if (s->grouping == RT_GROUPING_EVERY && s->k < 1)
        return rt_error_set(RT_ERR_INVALID_ARG, "reversible sequence: grouping every k needs k >= 1 (got %d)", s->k);
    if (s->n > 0 && x->layout == RT_LAYOUT_BLOCKED &&
        (s->blocks[0].c1 % RT_LAYOUT_BLOCK || s->blocks[0].c2 % RT_LAYOUT_BLOCK)) {
        /* The halves are not block-aligned, so every block works in the PLAIN
         * order; convert once here so inputs and rebuilt inputs share one order. */
        rt_tensor *plain = NULL;
        RT_TRY(rt_to_layout(x, RT_LAYOUT_PLAIN, &plain));
        rt_status st = rt_rev_sequence_forward(s, plain, training, y);
        rt_tensor_release(plain);
        return st;
    }
    if (s->reversible && rt_grad_is_enabled()) return rt_seq_forward_reversible(s, x, training, y);
    rt_tensor *h = rt_tensor_retain(x);
    for (int i = 0; i < s->n; i++) {
        rt_tensor *next = NULL;
        rt_status st = rt_rev_block_forward(&s->blocks[i], h, training, &next);
        rt_tensor_release(h);
        if (st != RT_OK) return st;
        h = next;
    }
    *y = h;
    return RT_OK;
}
