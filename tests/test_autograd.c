/* Tests for the autograd engine (src/autograd): gradient accumulation,
 * summing where a tensor is used twice, graph release and retain_graph,
 * no-grad scope, error cases, freeing of dead intermediates, and a node
 * whose backward runs a nested forward+backward (the mechanism that
 * checkpointing and reversible blocks use), saved-tensor hooks (call counts,
 * nesting, errors, a bf16 copy, a drop-and-recompute hook) and the recompute
 * facility (autograd/recompute.h). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/engine.h"
#include "autograd/node.h"
#include "autograd/recompute.h"
#include "core/mem.h"
#include "core/rng.h"
#include "core/tensor.h"
#include "ops/batchnorm_relu.h"
#include "ops/ops.h"
#include "rt_test.h"

/* ---- helpers --------------------------------------------------------------- */

static int64_t live(rt_mem_category c) {
    rt_memstats s;
    rt_memstats_get(&s);
    return s.live[c];
}

/* A tensor with deterministic values in [-1, 1) (Philox, `seed`). */
static rt_tensor *rand_tensor(int ndim, const int64_t *shape, rt_mem_category cat, uint64_t seed) {
    rt_tensor *t = rt_tensor_create(ndim, shape, RT_F32, RT_DEVICE_CPU, cat);
    if (!t) return NULL;
    int64_t n = rt_tensor_numel(t);
    float *p = rt_tensor_f32(t);
    rt_philox_uniform(seed, 0, n, p);
    for (int64_t i = 0; i < n; i++) p[i] = 2.0f * p[i] - 1.0f;
    return t;
}

static rt_tensor *const_tensor(int ndim, const int64_t *shape, float v, rt_mem_category cat) {
    rt_tensor *t = rt_tensor_create(ndim, shape, RT_F32, RT_DEVICE_CPU, cat);
    if (t) rt_tensor_fill(t, v);
    return t;
}

static int64_t live_total_bytes(void) {
    rt_memstats s;
    rt_memstats_get(&s);
    return s.live_total;
}

static double max_abs_diff(const rt_tensor *a, const rt_tensor *b) {
    double m = 0;
    for (int64_t i = 0; i < rt_tensor_numel(a); i++) {
        double d = fabs((double)rt_tensor_f32(a)[i] - rt_tensor_f32(b)[i]);
        if (!(d <= m)) m = d; /* NaN propagates as "large" */
    }
    return m;
}

static double max_abs(const rt_tensor *a) {
    double m = 0;
    for (int64_t i = 0; i < rt_tensor_numel(a); i++) m = fmax(m, fabs(rt_tensor_f32(a)[i]));
    return m;
}

/* ---- accumulation and summing ---------------------------------------------- */

/* y = 3·x backpropagated twice into the same leaf: .grad = 3, then 6. */
static void test_grad_accumulates(void) {
    int64_t base_grad = live(RT_MEM_GRAD);
    int64_t shape[2] = {3, 5};
    rt_tensor *x = rand_tensor(2, shape, RT_MEM_DATA, 1);
    rt_tensor *g = rand_tensor(2, shape, RT_MEM_DATA, 2);
    CHECK(x && g);
    CHECK_OK(rt_tensor_set_requires_grad(x, true));
    for (int pass = 1; pass <= 2; pass++) {
        rt_tensor *y = NULL;
        CHECK_OK(rt_mul_scalar(x, 3.0f, &y));
        CHECK(y->grad_fn != NULL && y->requires_grad);
        CHECK_OK(rt_backward(y, g, false));
        rt_tensor_release(y);
        CHECK(x->grad != NULL);
        CHECK_EQ_INT(x->grad->dtype, RT_F32);
        CHECK(rt_tensor_same_shape(x->grad, x));
        for (int i = 0; i < 15; i++)
            CHECK(rt_tensor_f32(x->grad)[i] == (float)pass * (3.0f * rt_tensor_f32(g)[i]));
        /* the grad is allocated once, booked GRAD */
        CHECK_EQ_INT(live(RT_MEM_GRAD) - base_grad, 15 * 4);
    }
    /* zero_grad drops it */
    rt_tensor_zero_grad(x);
    CHECK(x->grad == NULL);
    CHECK_EQ_INT(live(RT_MEM_GRAD), base_grad);
    rt_tensor_release(x);
    rt_tensor_release(g);
}

/* y = x + x: both edges lead to the same leaf, the gradient is 2·g. */
static void test_used_twice_add(void) {
    int64_t shape[1] = {7};
    rt_tensor *x = rand_tensor(1, shape, RT_MEM_DATA, 3);
    rt_tensor *g = rand_tensor(1, shape, RT_MEM_DATA, 4);
    CHECK(x && g);
    CHECK_OK(rt_tensor_set_requires_grad(x, true));
    rt_tensor *y = NULL;
    CHECK_OK(rt_add(x, x, &y));
    CHECK_OK(rt_backward(y, g, false));
    for (int i = 0; i < 7; i++) CHECK(rt_tensor_f32(x->grad)[i] == 2.0f * rt_tensor_f32(g)[i]);
    /* the incoming gradient was not modified in place by the summing */
    rt_tensor *g2 = rand_tensor(1, shape, RT_MEM_DATA, 4);
    CHECK(g2 != NULL);
    CHECK(memcmp(rt_tensor_data(g), rt_tensor_data(g2), 28) == 0);
    rt_tensor_release(g2);
    rt_tensor_release(y);

    /* the same through an intermediate node: a = 2x, y = a + a → 4g */
    rt_tensor_zero_grad(x);
    rt_tensor *a = NULL;
    CHECK_OK(rt_mul_scalar(x, 2.0f, &a));
    CHECK_OK(rt_add(a, a, &y));
    CHECK_OK(rt_backward(y, g, false));
    for (int i = 0; i < 7; i++) CHECK(rt_tensor_f32(x->grad)[i] == 4.0f * rt_tensor_f32(g)[i]);
    rt_tensor_release(y);
    rt_tensor_release(a);
    rt_tensor_release(x);
    rt_tensor_release(g);
}

/* The end of an activation test: releases its leaf x and seed g (DATA)
 * and checks that every TEMP and SAVED byte the test made is gone. */
static void release_and_check_nothing_left(rt_tensor *x, rt_tensor *g, int64_t base_temp, int64_t base_saved) {
    rt_tensor_release(x);
    rt_tensor_release(g);
    CHECK_EQ_INT(live(RT_MEM_TEMP), base_temp);
    CHECK_EQ_INT(live(RT_MEM_SAVED), base_saved);
}

/* Diamond: a = 2x; b = relu(a); c = 5a; d = b + c.
 * dd/dx = 2·(1[a>0] + 5), summed at a before flowing into x. */
static void test_diamond(void) {
    int64_t base_temp = live(RT_MEM_TEMP), base_saved = live(RT_MEM_SAVED);
    int64_t shape[2] = {4, 6};
    rt_tensor *x = rand_tensor(2, shape, RT_MEM_DATA, 5);
    rt_tensor *g = rand_tensor(2, shape, RT_MEM_DATA, 6);
    CHECK(x && g);
    CHECK_OK(rt_tensor_set_requires_grad(x, true));
    rt_tensor *a = NULL, *b = NULL, *c = NULL, *d = NULL;
    CHECK_OK(rt_mul_scalar(x, 2.0f, &a));
    CHECK_OK(rt_relu(a, &b));
    CHECK_OK(rt_mul_scalar(a, 5.0f, &c));
    CHECK_OK(rt_add(b, c, &d));
    rt_tensor_release(a);
    rt_tensor_release(b);
    rt_tensor_release(c);
    CHECK_OK(rt_backward(d, g, false));
    int pos = 0, neg = 0;
    for (int i = 0; i < 24; i++) {
        float xv = rt_tensor_f32(x)[i], gv = rt_tensor_f32(g)[i];
        float want = 2.0f * ((xv > 0 ? 1.0f : 0.0f) * gv + 5.0f * gv);
        pos += xv > 0;
        neg += xv < 0;
        CHECK_NEAR(rt_tensor_f32(x->grad)[i], want, 1e-6 * (1 + fabs(want)));
    }
    CHECK(pos > 0 && neg > 0); /* both relu branches exercised */
    rt_tensor_release(d);
    release_and_check_nothing_left(x, g, base_temp, base_saved);
}

/* How far the relu's backward raised the live bytes above where they
 * stood when it began, in the last traced backward. (A saved tensor moving
 * back to TEMP as its node drops it is a -/+ pair, not growth.) */
static int64_t relu_backward_growth(void) {
    size_t n = 0;
    const rt_mem_event *e = rt_mem_trace_events(&n);
    int64_t start = -1, top = 0;
    for (size_t i = 0; i < n; i++) {
        if (!strstr(e[i].op, "leaky_relu")) continue;
        if (start < 0) start = e[i].live_total - e[i].delta_bytes, top = start;
        if (e[i].live_total > top) top = e[i].live_total;
    }
    return start < 0 ? -1 : top - start;
}

/* LeakyReLU in place, forward and backward: rt_leaky_relu_inplace writes
 * over an activation nobody else holds, keeps a saved one intact (falling
 * back to a new tensor), and the backward overwrites its incoming gradient
 * only when the engine holds the sole reference; gradients are PyTorch's,
 * d/dx lrelu(2x)·3 = 6·(x > 0 ? 1 : slope), in every case. */
static void test_relu_in_place(void) {
    const float slope = 0.1f;
    int64_t shape[2] = {4, 6}, base_temp = live(RT_MEM_TEMP), base_saved = live(RT_MEM_SAVED);
    rt_tensor *x = rand_tensor(2, shape, RT_MEM_DATA, 11), *g = rand_tensor(2, shape, RT_MEM_DATA, 12);
    CHECK(x && g);
    CHECK_OK(rt_tensor_set_requires_grad(x, true));
    /* 1: a is only ours: consumed, and 3·dy reaches the relu exclusively */
    rt_tensor *a = NULL, *b = NULL, *c = NULL, *p = NULL, *d = NULL;
    CHECK_OK(rt_mul_scalar(x, 2.0f, &a));
    const rt_storage *sa = a->storage;
    CHECK_OK(rt_leaky_relu_inplace(a, slope, &b));
    CHECK(b->storage == sa);
    rt_tensor_release(a);
    CHECK_OK(rt_mul_scalar(b, 3.0f, &c));
    rt_tensor_release(b);
    rt_mem_trace_enable(1);
    CHECK_OK(rt_backward(c, g, false));
    CHECK_EQ_INT(relu_backward_growth(), 0); /* dx written over dy */
    rt_mem_trace_enable(0);
    for (int i = 0; i < 24; i++) {
        float xv = rt_tensor_f32(x)[i], want = 6.0f * (xv > 0 ? 1.0f : slope) * rt_tensor_f32(g)[i];
        CHECK_NEAR(rt_tensor_f32(x->grad)[i], want, 1e-6 * (1 + fabs(want)));
    }
    rt_tensor_release(c);
    /* 2: a is saved by a·a: not consumed (a keeps its values for that
     * backward), and add hands one dy to both branches, so the relu must not
     * overwrite it: d = lrelu(2x) + (2x)², dd/dx = 2·lrelu'(2x) + 8x */
    rt_tensor_zero_grad(x);
    CHECK_OK(rt_mul_scalar(x, 2.0f, &a));
    CHECK_OK(rt_mul(a, a, &p));
    CHECK_OK(rt_leaky_relu_inplace(a, slope, &b));
    CHECK(b->storage != a->storage);
    for (int i = 0; i < 24; i++) CHECK(rt_tensor_f32(a)[i] == 2.0f * rt_tensor_f32(x)[i]);
    rt_tensor_release(a);
    CHECK_OK(rt_add(b, p, &d));
    rt_tensor_release(b);
    rt_tensor_release(p);
    rt_mem_trace_enable(1);
    CHECK_OK(rt_backward(d, g, false));
    CHECK_EQ_INT(relu_backward_growth(), (int64_t)(24 * sizeof(float))); /* a new dx */
    rt_mem_trace_enable(0);
    for (int i = 0; i < 24; i++) {
        float xv = rt_tensor_f32(x)[i], want = (2.0f * (xv > 0 ? 1.0f : slope) + 8.0f * xv) * rt_tensor_f32(g)[i];
        CHECK_NEAR(rt_tensor_f32(x->grad)[i], want, 1e-5 * (1 + fabs(want)));
    }
    rt_tensor_release(d);
    release_and_check_nothing_left(x, g, base_temp, base_saved);
}

/* Residual sums in place: rt_add_relu_inplace and rt_add_inplace write over
 * a when nobody else holds it and keep a saved a intact (falling back to a
 * new tensor); values and gradients are rt_add_relu's / rt_add's in both
 * cases: a = 2x, b = −3x, y = relu(a + b) = relu(−x) has dy/dx = −[x < 0]
 * (the sum's sign, never a's: a mask taken from a would be [x > 0]),
 * y = a + b has −1; with (2x)² added (a saved by the square), + 8x. */
static void test_add_in_place(void) {
    int64_t shape[2] = {4, 6}, base_temp = live(RT_MEM_TEMP), base_saved = live(RT_MEM_SAVED);
    rt_tensor *x = rand_tensor(2, shape, RT_MEM_DATA, 13), *g = rand_tensor(2, shape, RT_MEM_DATA, 14);
    CHECK(x && g);
    CHECK_OK(rt_tensor_set_requires_grad(x, true));
    for (int relu = 0; relu < 2; relu++)
        for (int saved = 0; saved < 2; saved++) {
            rt_tensor_zero_grad(x);
            rt_tensor *a = NULL, *b = NULL, *p = NULL, *y = NULL, *d = NULL;
            CHECK_OK(rt_mul_scalar(x, 2.0f, &a));
            CHECK_OK(rt_mul_scalar(x, -3.0f, &b));
            if (saved) CHECK_OK(rt_mul(a, a, &p));
            const rt_storage *sa = a->storage;
            CHECK_OK(relu ? rt_add_relu_inplace(a, b, &y) : rt_add_inplace(a, b, &y));
            CHECK(saved ? y->storage != sa : y->storage == sa);
            if (saved) /* a still holds 2x for the square's backward */
                for (int i = 0; i < 24; i++) CHECK(rt_tensor_f32(a)[i] == 2.0f * rt_tensor_f32(x)[i]);
            for (int i = 0; i < 24; i++) {
                float xv = rt_tensor_f32(x)[i], want = relu && xv >= 0 ? 0.0f : -xv;
                CHECK_NEAR(rt_tensor_f32(y)[i], want, 1e-6 * (1 + fabs(want)));
            }
            rt_tensor_release(a);
            rt_tensor_release(b);
            if (saved) {
                CHECK_OK(rt_add(y, p, &d));
                rt_tensor_release(y);
                rt_tensor_release(p);
            } else {
                d = y;
            }
            CHECK_OK(rt_backward(d, g, false));
            for (int i = 0; i < 24; i++) {
                float xv = rt_tensor_f32(x)[i];
                float want = ((relu && xv >= 0 ? 0.0f : -1.0f) + (saved ? 8.0f * xv : 0.0f)) * rt_tensor_f32(g)[i];
                CHECK_NEAR(rt_tensor_f32(x->grad)[i], want, 1e-5 * (1 + fabs(want)));
            }
            rt_tensor_release(d);
        }
    release_and_check_nothing_left(x, g, base_temp, base_saved);
}

/* The edges of consuming a sum: a leaf that requires grad is the user's and
 * is never written over (y gets its own storage, the leaf keeps its values
 * and receives its gradient); b in another memory order (blocked, a plain)
 * is converted first, and a is still written over, with the values of the
 * logical elements. y = relu(a + b), a the leaf, b = −2a in blocked order:
 * y = relu(−a), dy/da = −[a < 0]. */
static void test_add_in_place_edges(void) {
    int64_t shape[4] = {1, 16, 2, 2}, base_temp = live(RT_MEM_TEMP), base_saved = live(RT_MEM_SAVED);
    rt_tensor *x = rand_tensor(4, shape, RT_MEM_DATA, 15), *g = rand_tensor(4, shape, RT_MEM_DATA, 16);
    CHECK(x && g);
    CHECK_OK(rt_tensor_set_requires_grad(x, true));
    rt_tensor *m = NULL, *b = NULL, *y = NULL, *a = NULL, *y2 = NULL;
    CHECK_OK(rt_mul_scalar(x, -2.0f, &m));
    CHECK_OK(rt_to_layout(m, RT_LAYOUT_BLOCKED, &b));
    CHECK(b->layout == RT_LAYOUT_BLOCKED);
    /* 1: a leaf that requires grad: not consumed */
    const rt_storage *sx = x->storage;
    CHECK_OK(rt_add_relu_inplace(x, b, &y));
    CHECK(y->storage != sx && y->layout == RT_LAYOUT_PLAIN);
    CHECK_OK(rt_backward(y, g, false));
    for (int i = 0; i < 64; i++) {
        float xv = rt_tensor_f32(x)[i], gv = rt_tensor_f32(g)[i];
        CHECK_NEAR(rt_tensor_f32(y)[i], xv < 0 ? -xv : 0.0f, 1e-6 * (1 + fabs(xv)));
        CHECK_NEAR(rt_tensor_f32(x->grad)[i], xv < 0 ? -gv : 0.0f, 1e-6 * (1 + fabs(gv)));
    }
    /* 2: a an intermediate (x·1, ours alone), b blocked: consumed, same values */
    rt_tensor_zero_grad(x);
    CHECK_OK(rt_mul_scalar(x, 1.0f, &a));
    const rt_storage *sa = a->storage;
    CHECK_OK(rt_add_relu_inplace(a, b, &y2));
    CHECK(y2->storage == sa);
    rt_tensor_release(a);
    for (int i = 0; i < 64; i++) {
        float xv = rt_tensor_f32(x)[i];
        CHECK_NEAR(rt_tensor_f32(y2)[i], xv < 0 ? -xv : 0.0f, 1e-6 * (1 + fabs(xv)));
    }
    rt_tensor *all[] = {m, b, y, y2};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) rt_tensor_release(all[i]);
    release_and_check_nothing_left(x, g, base_temp, base_saved);
}

/* A leaf that is itself the root: backward seeds its .grad with ones. */
static void test_leaf_root(void) {
    rt_tensor *s = const_tensor(0, NULL, 2.0f, RT_MEM_DATA);
    CHECK(s != NULL);
    CHECK_OK(rt_tensor_set_requires_grad(s, true));
    CHECK_OK(rt_backward(s, NULL, false));
    CHECK(s->grad != NULL && rt_tensor_f32(s->grad)[0] == 1.0f);
    CHECK_OK(rt_backward(s, NULL, false));
    CHECK(rt_tensor_f32(s->grad)[0] == 2.0f);
    rt_tensor_release(s);
}

/* ---- release and retain ---------------------------------------------------- */

/* A small graph with saved tensors: y = relu(conv(x, w, b)). */
typedef struct small_graph {
    rt_tensor *x, *w, *b, *g;
} small_graph;

static int small_graph_init(small_graph *sg, bool x_requires_grad, rt_mem_category xcat) {
    int64_t xs[4] = {2, 3, 6, 6}, ws[4] = {4, 3, 3, 3}, bs[1] = {4}, ys[4] = {2, 4, 6, 6};
    sg->x = rand_tensor(4, xs, xcat, 11);
    sg->w = rand_tensor(4, ws, RT_MEM_PARAM, 12);
    sg->b = rand_tensor(1, bs, RT_MEM_PARAM, 13);
    sg->g = rand_tensor(4, ys, RT_MEM_DATA, 14);
    if (!sg->x || !sg->w || !sg->b || !sg->g) return 0;
    if (rt_tensor_set_requires_grad(sg->w, true) != RT_OK) return 0;
    if (rt_tensor_set_requires_grad(sg->b, true) != RT_OK) return 0;
    if (x_requires_grad && rt_tensor_set_requires_grad(sg->x, true) != RT_OK) return 0;
    return 1;
}

static void small_graph_free(small_graph *sg) {
    rt_tensor_release(sg->x);
    rt_tensor_release(sg->w);
    rt_tensor_release(sg->b);
    rt_tensor_release(sg->g);
}

static const rt_conv_opts k_pad1 = {.padding = {1, 1}};

static rt_status conv_relu(rt_tensor *x, rt_tensor *w, rt_tensor *b, rt_tensor **y) {
    rt_tensor *c = NULL;
    RT_TRY(rt_conv(x, w, b, &k_pad1, &c));
    rt_status st = rt_relu(c, y);
    rt_tensor_release(c);
    return st;
}

static void test_backward_twice_released(void) {
    small_graph sg;
    CHECK(small_graph_init(&sg, true, RT_MEM_DATA));
    rt_tensor *y = NULL;
    CHECK_OK(conv_relu(sg.x, sg.w, sg.b, &y));
    CHECK_OK(rt_backward(y, sg.g, false));
    CHECK(sg.x->grad && sg.w->grad && sg.b->grad);
    CHECK(max_abs(sg.w->grad) > 0);
    /* copies of the gradients to compare after the failed call */
    rt_tensor *gx = rt_tensor_to(sg.x->grad, RT_F32, RT_MEM_TEMP);
    rt_tensor *gw = rt_tensor_to(sg.w->grad, RT_F32, RT_MEM_TEMP);
    rt_tensor *gb = rt_tensor_to(sg.b->grad, RT_F32, RT_MEM_TEMP);
    CHECK(gx && gw && gb);
    rt_error_clear();
    rt_status s = rt_backward(y, sg.g, false);
    CHECK_EQ_INT(s, RT_ERR_GRAPH_RELEASED);
    CHECK(strstr(rt_error_last(), "retain_graph") != NULL);
    CHECK(memcmp(rt_tensor_data(gx), rt_tensor_data(sg.x->grad), rt_tensor_nbytes(gx)) == 0);
    CHECK(memcmp(rt_tensor_data(gw), rt_tensor_data(sg.w->grad), rt_tensor_nbytes(gw)) == 0);
    CHECK(memcmp(rt_tensor_data(gb), rt_tensor_data(sg.b->grad), rt_tensor_nbytes(gb)) == 0);
    /* and again with retain_graph=true: still released, still untouched */
    CHECK_EQ_INT(rt_backward(y, sg.g, true), RT_ERR_GRAPH_RELEASED);
    CHECK(memcmp(rt_tensor_data(gw), rt_tensor_data(sg.w->grad), rt_tensor_nbytes(gw)) == 0);
    rt_tensor_release(gx);
    rt_tensor_release(gw);
    rt_tensor_release(gb);
    rt_tensor_release(y);
    small_graph_free(&sg);
}

static void test_retain_graph_doubles(void) {
    int64_t base_saved = live(RT_MEM_SAVED);
    small_graph sg;
    CHECK(small_graph_init(&sg, true, RT_MEM_DATA));
    rt_tensor *y = NULL;
    CHECK_OK(conv_relu(sg.x, sg.w, sg.b, &y));
    int64_t saved = live(RT_MEM_SAVED) - base_saved;
    CHECK_EQ_INT(saved, (int64_t)rt_tensor_nbytes(y)); /* relu's output; x is DATA */
    CHECK_OK(rt_backward(y, sg.g, true));
    CHECK_EQ_INT(live(RT_MEM_SAVED) - base_saved, saved); /* kept */
    rt_tensor *gx = rt_tensor_to(sg.x->grad, RT_F32, RT_MEM_TEMP);
    rt_tensor *gw = rt_tensor_to(sg.w->grad, RT_F32, RT_MEM_TEMP);
    rt_tensor *gb = rt_tensor_to(sg.b->grad, RT_F32, RT_MEM_TEMP);
    CHECK(gx && gw && gb);
    CHECK_OK(rt_backward(y, sg.g, true));
    /* same graph, same numbers: exactly doubled (g + g is exact) */
    rt_tensor *pairs[3][2] = {{gx, sg.x->grad}, {gw, sg.w->grad}, {gb, sg.b->grad}};
    for (int k = 0; k < 3; k++)
        for (int64_t i = 0; i < rt_tensor_numel(pairs[k][0]); i++)
            CHECK(rt_tensor_f32(pairs[k][1])[i] == 2.0f * rt_tensor_f32(pairs[k][0])[i]);
    /* a final backward without retain frees the saved tensors */
    CHECK_OK(rt_backward(y, sg.g, false));
    CHECK_EQ_INT(live(RT_MEM_SAVED), base_saved);
    for (int64_t i = 0; i < rt_tensor_numel(gb); i++)
        CHECK(rt_tensor_f32(sg.b->grad)[i] == 3.0f * rt_tensor_f32(gb)[i]);
    rt_tensor_release(gx);
    rt_tensor_release(gw);
    rt_tensor_release(gb);
    rt_tensor_release(y);
    small_graph_free(&sg);
}

/* ---- grad mode and errors -------------------------------------------------- */

static void test_no_grad_scope(void) {
    CHECK(rt_grad_is_enabled());
    int64_t base_saved = live(RT_MEM_SAVED), base_temp = live(RT_MEM_TEMP);
    small_graph sg;
    CHECK(small_graph_init(&sg, true, RT_MEM_TEMP));
    bool prev = rt_grad_set_enabled(false);
    CHECK(prev);
    CHECK(!rt_grad_is_enabled());
    rt_tensor *y = NULL, *p = NULL;
    CHECK_OK(conv_relu(sg.x, sg.w, sg.b, &y));
    rt_pool_opts po = {.kernel = {2, 2}};
    CHECK_OK(rt_max_pool(y, &po, &p));
    CHECK(y->grad_fn == NULL && !y->requires_grad);
    CHECK(p->grad_fn == NULL && !p->requires_grad);
    CHECK_EQ_INT(live(RT_MEM_SAVED), base_saved); /* nothing saved */
    /* only x, y and p are live TEMP: the conv output and the pool workspace are gone */
    CHECK_EQ_INT(live(RT_MEM_TEMP) - base_temp,
                 (int64_t)(rt_tensor_nbytes(sg.x) + rt_tensor_nbytes(y) + rt_tensor_nbytes(p)));
    CHECK_EQ_INT(rt_backward(p, NULL, false), RT_ERR_NO_GRAD);
    /* nested set/restore */
    CHECK(!rt_grad_set_enabled(false));
    CHECK(!rt_grad_set_enabled(prev));
    CHECK(rt_grad_is_enabled());
    rt_tensor_release(p);
    /* with grad mode back on, the same ops record */
    rt_tensor *y2 = NULL;
    CHECK_OK(conv_relu(sg.x, sg.w, sg.b, &y2));
    CHECK(y2->grad_fn != NULL);
    CHECK(live(RT_MEM_SAVED) > base_saved);
    rt_tensor_release(y2);
    rt_tensor_release(y);
    CHECK_EQ_INT(live(RT_MEM_SAVED), base_saved);
    small_graph_free(&sg);
    CHECK_EQ_INT(live(RT_MEM_TEMP), base_temp);
}

static void test_backward_errors(void) {
    int64_t shape[2] = {2, 3};
    rt_tensor *x = rand_tensor(2, shape, RT_MEM_DATA, 21);
    CHECK(x != NULL);
    /* nothing requires grad */
    rt_tensor *y = NULL;
    CHECK_OK(rt_mul_scalar(x, 2.0f, &y));
    CHECK(!y->requires_grad && y->grad_fn == NULL);
    rt_error_clear();
    CHECK_EQ_INT(rt_backward(y, NULL, false), RT_ERR_NO_GRAD);
    CHECK(rt_error_last()[0] != '\0');
    CHECK_EQ_INT(rt_backward(x, NULL, false), RT_ERR_NO_GRAD);
    rt_tensor_release(y);
    /* a non-scalar root needs an explicit gradient */
    CHECK_OK(rt_tensor_set_requires_grad(x, true));
    CHECK_OK(rt_mul_scalar(x, 2.0f, &y));
    rt_error_clear();
    CHECK_EQ_INT(rt_backward(y, NULL, false), RT_ERR_SHAPE);
    CHECK(strstr(rt_error_last(), "scalar") != NULL);
    CHECK(x->grad == NULL);
    /* a gradient of the wrong shape */
    int64_t wrong[2] = {3, 2};
    rt_tensor *g = const_tensor(2, wrong, 1.0f, RT_MEM_DATA);
    CHECK(g != NULL);
    CHECK_EQ_INT(rt_backward(y, g, false), RT_ERR_SHAPE);
    CHECK(x->grad == NULL);
    /* the graph is intact after those refusals */
    rt_tensor *g_ok = const_tensor(2, shape, 1.0f, RT_MEM_DATA);
    CHECK(g_ok != NULL);
    CHECK_OK(rt_backward(y, g_ok, false));
    for (int i = 0; i < 6; i++) CHECK(rt_tensor_f32(x->grad)[i] == 2.0f);
    rt_tensor_release(g_ok);
    rt_tensor_release(g);
    rt_tensor_release(y);
    rt_tensor_release(x);
}

/* ---- memory of the graph --------------------------------------------------- */

/* y = relu(conv(x)) with x a TEMP activation: after the user drops the conv
 * output and x, the graph keeps exactly conv's input x and relu's output y
 * (both SAVED); nothing else is live. */
static void test_dead_intermediate_freed(void) {
    int64_t base_temp = live(RT_MEM_TEMP), base_saved = live(RT_MEM_SAVED);
    small_graph sg;
    CHECK(small_graph_init(&sg, false, RT_MEM_TEMP));
    int64_t x_bytes = (int64_t)rt_tensor_nbytes(sg.x);
    rt_tensor *c = NULL, *y = NULL;
    CHECK_OK(rt_conv(sg.x, sg.w, sg.b, &k_pad1, &c));
    int64_t c_bytes = (int64_t)rt_tensor_nbytes(c);
    CHECK_OK(rt_relu(c, &y));
    int64_t y_bytes = (int64_t)rt_tensor_nbytes(y);
    CHECK_EQ_INT(c_bytes, 2 * 4 * 6 * 6 * 4);
    CHECK_EQ_INT(y_bytes, c_bytes);
    /* while the user holds c: x and y SAVED, c TEMP */
    CHECK_EQ_INT(live(RT_MEM_SAVED) - base_saved, x_bytes + y_bytes);
    CHECK_EQ_INT(live(RT_MEM_TEMP) - base_temp, c_bytes);
    rt_tensor_release(c); /* c is dead: nobody keeps conv's output */
    CHECK_EQ_INT(live(RT_MEM_TEMP) - base_temp, 0);
    CHECK_EQ_INT(live(RT_MEM_SAVED) - base_saved, x_bytes + y_bytes);
    rt_tensor_release(sg.x); /* the graph still keeps x */
    sg.x = NULL;
    CHECK_EQ_INT(live(RT_MEM_SAVED) - base_saved, x_bytes + y_bytes);
    CHECK_EQ_INT(live(RT_MEM_TEMP) - base_temp, 0);
    /* backward without retain frees everything the graph kept */
    CHECK_OK(rt_backward(y, sg.g, false));
    CHECK_EQ_INT(live(RT_MEM_SAVED) - base_saved, 0);
    CHECK_EQ_INT(live(RT_MEM_TEMP) - base_temp, y_bytes); /* only y, which the user holds */
    rt_tensor_release(y);
    CHECK_EQ_INT(live(RT_MEM_TEMP), base_temp);
    small_graph_free(&sg);
}

/* Dropping the root without backward frees the whole graph at once. */
static void test_graph_freed_with_root(void) {
    int64_t base_temp = live(RT_MEM_TEMP), base_saved = live(RT_MEM_SAVED);
    small_graph sg;
    CHECK(small_graph_init(&sg, true, RT_MEM_TEMP));
    rt_tensor *y = NULL;
    CHECK_OK(conv_relu(sg.x, sg.w, sg.b, &y));
    CHECK(live(RT_MEM_SAVED) > base_saved);
    rt_tensor_release(y);
    CHECK_EQ_INT(live(RT_MEM_SAVED), base_saved);
    CHECK_EQ_INT(live(RT_MEM_TEMP) - base_temp, (int64_t)rt_tensor_nbytes(sg.x));
    small_graph_free(&sg);
    CHECK_EQ_INT(live(RT_MEM_TEMP), base_temp);
}

/* ---- nested forward + backward inside a node's backward ------------------- */

/* A hand-written checkpointed block: forward computes relu(conv(x)) without
 * recording and keeps only x; backward recomputes on a detached copy with
 * grad mode on, back-propagates the incoming gradient through the sub-graph
 * (parameter gradients land directly in w.grad / b.grad) and returns x's. */
typedef struct ckpt_ctx {
    int backward_calls;
} ckpt_ctx;

static int g_ckpt_calls;

static rt_status ckpt_backward(rt_node *self, rt_tensor *const *grad_out, rt_tensor **grad_in) {
    rt_tensor *x_saved = NULL;
    RT_TRY(rt_node_saved(self, 0, &x_saved));
    rt_tensor *w = self->edges[1].leaf, *b = self->edges[2].leaf;
    if (!w || !b) return rt_error_set(RT_ERR_STATE, "ckpt: parameters must be leaves");
    g_ckpt_calls++;
    bool prev = rt_grad_set_enabled(true);
    rt_tensor *xd = rt_tensor_detach(x_saved);
    rt_status st = xd ? RT_OK : RT_ERR_OOM;
    if (st == RT_OK && rt_node_needs_grad(self, 0)) st = rt_tensor_set_requires_grad(xd, true);
    rt_tensor *y = NULL;
    if (st == RT_OK) st = conv_relu(xd, w, b, &y);
    if (st == RT_OK) st = rt_backward(y, grad_out[0], false);
    if (st == RT_OK && rt_node_needs_grad(self, 0)) {
        grad_in[0] = xd->grad ? rt_tensor_retain(xd->grad) : NULL;
        if (!grad_in[0]) st = rt_error_set(RT_ERR_STATE, "ckpt: no input gradient");
    }
    rt_tensor_release(y);
    rt_tensor_release(xd);
    rt_grad_set_enabled(prev);
    return st;
}

static rt_status ckpt_forward(rt_tensor *x, rt_tensor *w, rt_tensor *b, rt_tensor **out) {
    *out = NULL;
    bool prev = rt_grad_set_enabled(false);
    rt_tensor *y = NULL;
    rt_status st = conv_relu(x, w, b, &y);
    rt_grad_set_enabled(prev);
    RT_TRY(st);
    rt_node *node = NULL;
    rt_tensor *inputs[3] = {x, w, b};
    st = rt_node_create("ckpt_conv_relu", 3, inputs, 1, ckpt_backward, sizeof(ckpt_ctx), &node);
    if (st == RT_OK && node) st = rt_node_save(node, x, NULL);
    if (st == RT_OK) rt_node_set_output(node, y, 0);
    rt_node_release(node);
    if (st != RT_OK) {
        rt_tensor_release(y);
        return st;
    }
    *out = y;
    return RT_OK;
}

/* The block is followed by another op (×0.5 then mse against a target) so the
 * nested backward runs in the middle of an outer graph. */
static rt_status run_net(small_graph *sg, rt_tensor *target, bool ckpt, rt_tensor **loss) {
    rt_tensor *h = NULL, *s = NULL;
    RT_TRY(ckpt ? ckpt_forward(sg->x, sg->w, sg->b, &h) : conv_relu(sg->x, sg->w, sg->b, &h));
    rt_status st = rt_mul_scalar(h, 0.5f, &s);
    rt_tensor_release(h);
    if (st == RT_OK) st = rt_mse_loss(s, target, loss);
    rt_tensor_release(s);
    return st;
}

static void nested_case(bool x_requires_grad) {
    int64_t base_temp = live(RT_MEM_TEMP), base_saved = live(RT_MEM_SAVED);
    small_graph sg;
    CHECK(small_graph_init(&sg, x_requires_grad, RT_MEM_DATA));
    rt_tensor *target = rand_tensor(4, sg.g->shape, RT_MEM_DATA, 31);
    CHECK(target != NULL);

    /* plain graph */
    rt_tensor *loss = NULL;
    CHECK_OK(run_net(&sg, target, false, &loss));
    float loss_plain = rt_tensor_f32(loss)[0];
    CHECK_OK(rt_backward(loss, NULL, false));
    rt_tensor_release(loss);
    rt_tensor *gx = x_requires_grad ? rt_tensor_to(sg.x->grad, RT_F32, RT_MEM_TEMP) : NULL;
    rt_tensor *gw = rt_tensor_to(sg.w->grad, RT_F32, RT_MEM_TEMP);
    rt_tensor *gb = rt_tensor_to(sg.b->grad, RT_F32, RT_MEM_TEMP);
    CHECK(gw && gb && (gx || !x_requires_grad));
    CHECK(max_abs(gw) > 0 && max_abs(gb) > 0);
    rt_tensor_zero_grad(sg.x);
    rt_tensor_zero_grad(sg.w);
    rt_tensor_zero_grad(sg.b);

    /* checkpointed: only x is kept (and x is DATA, so nothing is SAVED) */
    g_ckpt_calls = 0;
    CHECK_OK(run_net(&sg, target, true, &loss));
    CHECK(rt_tensor_f32(loss)[0] == loss_plain);
    CHECK(loss->grad_fn != NULL);
    /* SAVED: the mse diff only; the block itself keeps no activation */
    CHECK_EQ_INT(live(RT_MEM_SAVED) - base_saved, (int64_t)rt_tensor_nbytes(sg.g));
    CHECK_OK(rt_backward(loss, NULL, false));
    CHECK_EQ_INT(g_ckpt_calls, 1);
    rt_tensor_release(loss);
    CHECK(sg.w->grad != NULL && sg.b->grad != NULL); /* parameter grads arrive */
    CHECK_NEAR(max_abs_diff(sg.w->grad, gw), 0.0, 1e-6 * (1 + max_abs(gw)));
    CHECK_NEAR(max_abs_diff(sg.b->grad, gb), 0.0, 1e-6 * (1 + max_abs(gb)));
    if (x_requires_grad) {
        CHECK(sg.x->grad != NULL);
        CHECK_NEAR(max_abs_diff(sg.x->grad, gx), 0.0, 1e-6 * (1 + max_abs(gx)));
    } else {
        CHECK(sg.x->grad == NULL);
    }
    CHECK_EQ_INT(live(RT_MEM_SAVED), base_saved);
    rt_tensor_release(gx);
    rt_tensor_release(gw);
    rt_tensor_release(gb);
    rt_tensor_release(target);
    small_graph_free(&sg);
    CHECK_EQ_INT(live(RT_MEM_TEMP), base_temp);
}

static void test_nested_backward_input_requires_grad(void) { nested_case(true); }
static void test_nested_backward_params_only(void) { nested_case(false); }

/* The nested block used twice in one graph with shared parameters,
 * y = block(proj(block(x))): both recomputes run, and the parameter
 * gradients of both uses add up exactly as in the plain graph. */
static rt_status twice_net(small_graph *sg, rt_tensor *proj, bool ckpt, rt_tensor **y) {
    rt_tensor *h1 = NULL, *p = NULL;
    RT_TRY(ckpt ? ckpt_forward(sg->x, sg->w, sg->b, &h1) : conv_relu(sg->x, sg->w, sg->b, &h1));
    rt_status st = rt_conv(h1, proj, NULL, NULL, &p);
    rt_tensor_release(h1);
    if (st == RT_OK) st = ckpt ? ckpt_forward(p, sg->w, sg->b, y) : conv_relu(p, sg->w, sg->b, y);
    rt_tensor_release(p);
    return st;
}

static void test_nested_backward_shared_params(void) {
    small_graph sg;
    CHECK(small_graph_init(&sg, true, RT_MEM_DATA));
    int64_t ws[4] = {3, 4, 1, 1};
    rt_tensor *proj = rand_tensor(4, ws, RT_MEM_PARAM, 41); /* 4 → 3 channels, 1×1, frozen */
    CHECK(proj != NULL);
    rt_tensor *y = NULL;
    CHECK_OK(twice_net(&sg, proj, false, &y));
    CHECK_OK(rt_backward(y, sg.g, false));
    rt_tensor_release(y);
    rt_tensor *gw = rt_tensor_to(sg.w->grad, RT_F32, RT_MEM_TEMP);
    rt_tensor *gb = rt_tensor_to(sg.b->grad, RT_F32, RT_MEM_TEMP);
    rt_tensor *gx = rt_tensor_to(sg.x->grad, RT_F32, RT_MEM_TEMP);
    CHECK(gw && gb && gx);
    CHECK(proj->grad == NULL);
    rt_tensor_zero_grad(sg.w);
    rt_tensor_zero_grad(sg.b);
    rt_tensor_zero_grad(sg.x);

    g_ckpt_calls = 0;
    CHECK_OK(twice_net(&sg, proj, true, &y));
    CHECK_OK(rt_backward(y, sg.g, false));
    rt_tensor_release(y);
    CHECK_EQ_INT(g_ckpt_calls, 2);
    CHECK(sg.w->grad && sg.b->grad && sg.x->grad);
    CHECK_NEAR(max_abs_diff(sg.w->grad, gw), 0.0, 1e-5 * (1 + max_abs(gw)));
    CHECK_NEAR(max_abs_diff(sg.b->grad, gb), 0.0, 1e-5 * (1 + max_abs(gb)));
    CHECK_NEAR(max_abs_diff(sg.x->grad, gx), 0.0, 1e-5 * (1 + max_abs(gx)));
    CHECK(proj->grad == NULL);
    rt_tensor_release(gw);
    rt_tensor_release(gb);
    rt_tensor_release(gx);
    rt_tensor_release(proj);
    small_graph_free(&sg);
}

/* ---- saved-tensor hooks ---------------------------------------------------- */

/* Hooks that keep t itself, book it exactly as rt_node_save does without
 * hooks, and count their calls. fail_pack != RT_OK makes pack refuse. */
typedef struct hook_counts {
    int pack, unpack, free;
    rt_status fail_pack;
} hook_counts;

static rt_status count_pack(void *user, rt_tensor *t, void **packed) {
    hook_counts *c = user;
    if (c->fail_pack != RT_OK) return rt_error_set(c->fail_pack, "test hook refuses to pack");
    c->pack++;
    rt_storage_mark_saved(t->storage, +1);
    *packed = rt_tensor_retain(t);
    return RT_OK;
}

static rt_status count_unpack(void *user, void *packed, rt_tensor **out) {
    ((hook_counts *)user)->unpack++;
    *out = rt_tensor_retain(packed);
    return RT_OK;
}

static void count_free(void *user, void *packed) {
    ((hook_counts *)user)->free++;
    rt_storage_mark_saved(((rt_tensor *)packed)->storage, -1);
    rt_tensor_release(packed);
}

static rt_saved_hooks counting_hooks(hook_counts *c) {
    return (rt_saved_hooks){.pack = count_pack, .unpack = count_unpack, .free_packed = count_free, .user = c};
}

/* A probe op: y = x (a copy) whose node saves the given tensors and whose
 * backward reads every saved slot `reads` times, passes the gradient through,
 * and records whether repeated reads of a slot gave the same tensor and the
 * sum of the first saved tensor's values. */
typedef struct probe_ctx {
    int reads;
} probe_ctx;

static int g_probe_runs, g_probe_cache_misses;
static double g_probe_sum0;

static double tensor_sum(const rt_tensor *t) {
    double s = 0;
    for (int64_t i = 0; i < rt_tensor_numel(t); i++) s += rt_tensor_f32(t)[i];
    return s;
}

static rt_status probe_backward(rt_node *self, rt_tensor *const *grad_out, rt_tensor **grad_in) {
    const probe_ctx *c = self->ctx;
    g_probe_runs++;
    for (int i = 0; i < self->n_saved; i++) {
        rt_tensor *first = NULL;
        for (int r = 0; r < c->reads; r++) {
            rt_tensor *t = NULL;
            RT_TRY(rt_node_saved(self, i, &t));
            if (!first) first = t;
            else if (t != first) g_probe_cache_misses++;
            if (i == 0 && r == 0) g_probe_sum0 = tensor_sum(t);
        }
    }
    grad_in[0] = rt_tensor_retain(grad_out[0]);
    return RT_OK;
}

static rt_status probe_forward(rt_tensor *x, int n_save, rt_tensor *const *save, int reads, rt_tensor **out) {
    *out = NULL;
    rt_tensor *y = rt_tensor_to(x, RT_F32, RT_MEM_TEMP);
    if (!y) return RT_ERR_OOM;
    rt_node *node = NULL;
    rt_status st = rt_node_create("probe", 1, &x, 1, probe_backward, sizeof(probe_ctx), &node);
    if (st == RT_OK && node) ((probe_ctx *)node->ctx)->reads = reads;
    for (int i = 0; st == RT_OK && i < n_save; i++) st = rt_node_save(node, save[i], NULL);
    if (st == RT_OK) rt_node_set_output(node, y, 0);
    rt_node_release(node);
    if (st != RT_OK) {
        rt_tensor_release(y);
        return st;
    }
    *out = y;
    return RT_OK;
}

/* Exact call counts: pack once per save, unpack once per slot and backward
 * (repeated reads hit the node's cache), free once per pack when the saved
 * tensors go; a retained graph unpacks again on the next backward. SAVED is
 * booked as without hooks, since these hooks keep the tensors themselves. */
static void test_saved_hooks_counts(void) {
    int64_t base_saved = live(RT_MEM_SAVED), base_temp = live(RT_MEM_TEMP);
    int64_t shape[2] = {3, 4};
    rt_tensor *x = rand_tensor(2, shape, RT_MEM_DATA, 51);
    rt_tensor *a = rand_tensor(2, shape, RT_MEM_TEMP, 52), *b = rand_tensor(2, shape, RT_MEM_TEMP, 53);
    rt_tensor *g = const_tensor(2, shape, 1.0f, RT_MEM_DATA);
    CHECK(x && a && b && g);
    CHECK_OK(rt_tensor_set_requires_grad(x, true));
    const double sum_a = tensor_sum(a);

    hook_counts c = {0};
    rt_saved_hooks h = counting_hooks(&c);
    CHECK_OK(rt_saved_tensors_hooks_push(&h));
    CHECK_EQ_INT(rt_saved_tensors_hooks_depth(), 1);
    rt_tensor *y = NULL, *save[2] = {a, b};
    CHECK_OK(probe_forward(x, 2, save, 3, &y));
    CHECK_OK(rt_saved_tensors_hooks_pop());
    CHECK_EQ_INT(rt_saved_tensors_hooks_depth(), 0);
    CHECK_EQ_INT(c.pack, 2);
    CHECK_EQ_INT(c.unpack, 0);
    CHECK_EQ_INT(live(RT_MEM_SAVED) - base_saved, 2 * 12 * 4);
    rt_tensor_release(a); /* the hooks keep them */
    rt_tensor_release(b);
    CHECK_EQ_INT(live(RT_MEM_SAVED) - base_saved, 2 * 12 * 4);

    g_probe_runs = g_probe_cache_misses = 0;
    for (int pass = 1; pass <= 2; pass++) { /* retained: unpacked anew each time, popped hooks still used */
        CHECK_OK(rt_backward(y, g, true));
        CHECK_EQ_INT(c.unpack, 2 * pass);
        CHECK_EQ_INT(c.free, 0);
        CHECK_NEAR(g_probe_sum0, sum_a, 0.0);
    }
    CHECK_OK(rt_backward(y, g, false));
    CHECK_EQ_INT(g_probe_runs, 3);
    CHECK_EQ_INT(g_probe_cache_misses, 0);
    CHECK_EQ_INT(c.pack, 2);
    CHECK_EQ_INT(c.unpack, 6);
    CHECK_EQ_INT(c.free, 2);
    CHECK_EQ_INT(live(RT_MEM_SAVED), base_saved);
    CHECK_EQ_INT(live(RT_MEM_TEMP) - base_temp, (int64_t)rt_tensor_nbytes(y));
    for (int i = 0; i < 12; i++) CHECK(rt_tensor_f32(x->grad)[i] == 3.0f);
    /* a released graph refuses before unpacking anything */
    CHECK_EQ_INT(rt_backward(y, g, false), RT_ERR_GRAPH_RELEASED);
    CHECK_EQ_INT(c.unpack, 6);
    rt_tensor_release(y);
    CHECK_EQ_INT(c.free, 2);

    /* dropping a graph without backward frees every packed object once */
    hook_counts d = {0};
    h = counting_hooks(&d);
    CHECK_OK(rt_saved_tensors_hooks_push(&h));
    rt_tensor *r = NULL;
    CHECK_OK(rt_relu(x, &r)); /* saves its output only */
    CHECK_OK(rt_saved_tensors_hooks_pop());
    CHECK_EQ_INT(d.pack, 1);
    rt_tensor_release(r);
    CHECK_EQ_INT(d.unpack, 0);
    CHECK_EQ_INT(d.free, 1);
    CHECK_EQ_INT(live(RT_MEM_SAVED), base_saved);
    CHECK_EQ_INT(live(RT_MEM_TEMP), base_temp);
    rt_tensor_release(g);
    rt_tensor_release(x);
}

/* Nested hooks: the innermost one packs; each slot is unpacked and freed by
 * the hooks that packed it, after both were popped; a tensor saved with no
 * hook pushed is kept as before. Misuse gives errors, not crashes. */
static void test_saved_hooks_nested(void) {
    int64_t base_saved = live(RT_MEM_SAVED);
    int64_t shape[1] = {5};
    rt_tensor *x = rand_tensor(1, shape, RT_MEM_DATA, 61), *g = const_tensor(1, shape, 1.0f, RT_MEM_DATA);
    rt_tensor *s[4];
    for (int i = 0; i < 4; i++) s[i] = rand_tensor(1, shape, RT_MEM_TEMP, 62 + (uint64_t)i);
    CHECK(x && g && s[0] && s[1] && s[2] && s[3]);
    CHECK_OK(rt_tensor_set_requires_grad(x, true));

    hook_counts ca = {0}, cb = {0};
    rt_saved_hooks ha = counting_hooks(&ca), hb = counting_hooks(&cb);
    rt_tensor *y[4] = {0}, *in = x;
    CHECK_OK(rt_saved_tensors_hooks_push(&ha));
    CHECK_OK(probe_forward(in, 1, &s[0], 1, &y[0])); /* A */
    CHECK_OK(rt_saved_tensors_hooks_push(&hb));
    CHECK_EQ_INT(rt_saved_tensors_hooks_depth(), 2);
    CHECK_OK(probe_forward(y[0], 1, &s[1], 1, &y[1])); /* B */
    CHECK_OK(rt_saved_tensors_hooks_pop());
    CHECK_OK(probe_forward(y[1], 1, &s[2], 1, &y[2])); /* A again */
    CHECK_OK(rt_saved_tensors_hooks_pop());
    CHECK_OK(probe_forward(y[2], 1, &s[3], 1, &y[3])); /* no hook */
    CHECK_EQ_INT(ca.pack, 2);
    CHECK_EQ_INT(cb.pack, 1);
    CHECK_EQ_INT(live(RT_MEM_SAVED) - base_saved, 4 * 5 * 4);

    /* misuse */
    rt_error_clear();
    CHECK_EQ_INT(rt_saved_tensors_hooks_pop(), RT_ERR_STATE);
    CHECK(strstr(rt_error_last(), "no saved-tensor hooks") != NULL);
    CHECK_EQ_INT(rt_saved_tensors_hooks_push(NULL), RT_ERR_INVALID_ARG);
    rt_saved_hooks half = {.pack = count_pack, .user = &ca};
    CHECK_EQ_INT(rt_saved_tensors_hooks_push(&half), RT_ERR_INVALID_ARG);
    for (int i = 0; i < RT_SAVED_HOOKS_MAX_DEPTH; i++) CHECK_OK(rt_saved_tensors_hooks_push(&ha));
    CHECK_EQ_INT(rt_saved_tensors_hooks_push(&ha), RT_ERR_STATE);
    for (int i = 0; i < RT_SAVED_HOOKS_MAX_DEPTH; i++) CHECK_OK(rt_saved_tensors_hooks_pop());
    CHECK_EQ_INT(rt_saved_tensors_hooks_depth(), 0);
    CHECK_EQ_INT(ca.pack, 2); /* pushing packs nothing */

    for (int i = 0; i < 3; i++) rt_tensor_release(y[i]);
    CHECK_OK(rt_backward(y[3], g, false));
    CHECK_EQ_INT(ca.unpack, 2);
    CHECK_EQ_INT(cb.unpack, 1);
    CHECK_EQ_INT(ca.free, 2);
    CHECK_EQ_INT(cb.free, 1);
    for (int i = 0; i < 5; i++) CHECK(rt_tensor_f32(x->grad)[i] == 1.0f);
    rt_tensor_release(y[3]);
    for (int i = 0; i < 4; i++) rt_tensor_release(s[i]);
    CHECK_EQ_INT(live(RT_MEM_SAVED), base_saved);
    rt_tensor_release(x);
    rt_tensor_release(g);
}

/* A pack hook's error is the op's error: no output, nothing kept, the
 * message is the hook's. Unpack errors and unpacked tensors unlike the ones
 * packed fail backward with a clear status. */
static void test_saved_hooks_errors(void) {
    int64_t base_saved = live(RT_MEM_SAVED), base_temp = live(RT_MEM_TEMP);
    int64_t shape[2] = {2, 3};
    rt_tensor *x = rand_tensor(2, shape, RT_MEM_TEMP, 71);
    CHECK(x != NULL);
    CHECK_OK(rt_tensor_set_requires_grad(x, true));
    hook_counts c = {.fail_pack = RT_ERR_OOM};
    rt_saved_hooks h = counting_hooks(&c);
    CHECK_OK(rt_saved_tensors_hooks_push(&h));
    rt_tensor *y = NULL;
    rt_error_clear();
    CHECK_EQ_INT(rt_relu(x, &y), RT_ERR_OOM);
    CHECK(y == NULL);
    CHECK(strstr(rt_error_last(), "refuses to pack") != NULL);
    CHECK_OK(rt_saved_tensors_hooks_pop());
    CHECK_EQ_INT(c.free, 0);
    CHECK_EQ_INT(live(RT_MEM_SAVED), base_saved);
    CHECK_EQ_INT(live(RT_MEM_TEMP) - base_temp, (int64_t)rt_tensor_nbytes(x));
    CHECK_EQ_INT(x->refcount, 1); /* the failed op's node is gone */
    rt_tensor_release(x);
    CHECK_EQ_INT(live(RT_MEM_TEMP), base_temp);
}

/* Unpack hooks that fail or return the wrong tensor. `user` picks the fault. */
typedef enum unpack_fault { FAULT_ERROR, FAULT_NULL, FAULT_SHAPE, FAULT_DTYPE } unpack_fault;

static rt_status fault_pack(void *user, rt_tensor *t, void **packed) {
    *packed = rt_tensor_retain(t);
    return RT_OK;
}

static rt_status fault_unpack(void *user, void *packed, rt_tensor **out) {
    rt_tensor *t = packed;
    int64_t flat = rt_tensor_numel(t);
    switch (*(unpack_fault *)user) {
    case FAULT_ERROR: return rt_error_set(RT_ERR_IO, "test hook lost the tensor");
    case FAULT_NULL: *out = NULL; return RT_OK;
    case FAULT_SHAPE: *out = rt_tensor_view(t, 1, &flat); return RT_OK;
    case FAULT_DTYPE: *out = rt_tensor_to(t, RT_BF16, RT_MEM_TEMP); return RT_OK;
    }
    return RT_OK;
}

static void fault_free(void *user, void *packed) { rt_tensor_release(packed); }

static void test_saved_hooks_unpack_errors(void) {
    int64_t base_total = live_total_bytes();
    int64_t shape[2] = {2, 3};
    const rt_status want[4] = {RT_ERR_IO, RT_ERR_STATE, RT_ERR_SHAPE, RT_ERR_DTYPE};
    const char *msg[4] = {"lost the tensor", "no tensor", "[6]", "bfloat16"};
    for (int f = FAULT_ERROR; f <= FAULT_DTYPE; f++) {
        unpack_fault fault = (unpack_fault)f;
        rt_tensor *x = rand_tensor(2, shape, RT_MEM_DATA, 81), *y = NULL;
        CHECK(x != NULL);
        CHECK_OK(rt_tensor_set_requires_grad(x, true));
        rt_saved_hooks h = {.pack = fault_pack, .unpack = fault_unpack, .free_packed = fault_free, .user = &fault};
        CHECK_OK(rt_saved_tensors_hooks_push(&h));
        CHECK_OK(rt_relu(x, &y));
        CHECK_OK(rt_saved_tensors_hooks_pop());
        rt_tensor *g = const_tensor(2, shape, 1.0f, RT_MEM_DATA);
        CHECK(g != NULL);
        rt_error_clear();
        CHECK_EQ_INT(rt_backward(y, g, false), want[f]);
        CHECK(strstr(rt_error_last(), msg[f]) != NULL);
        CHECK(x->grad == NULL);
        rt_tensor_release(g);
        rt_tensor_release(y);
        rt_tensor_release(x);
        CHECK_EQ_INT(live_total_bytes(), base_total); /* wrong results were released */
    }
}

/* A hook that stores a bf16 copy of every f32 activation (TEMP) and unpacks
 * it to f32; parameters and inputs are kept as they are. */
static rt_status bf16_pack(void *user, rt_tensor *t, void **packed) {
    rt_tensor *p;
    if (t->dtype == RT_F32 && t->storage->category == RT_MEM_TEMP) {
        if (!(p = rt_tensor_to(t, RT_BF16, RT_MEM_SAVED))) return RT_ERR_OOM; /* SAVED while held */
    } else {
        p = rt_tensor_retain(t);
        rt_storage_mark_saved(p->storage, +1);
    }
    *packed = p;
    return RT_OK;
}

static rt_status bf16_unpack(void *user, void *packed, rt_tensor **out) {
    rt_tensor *p = packed;
    *out = p->dtype == RT_BF16 ? rt_tensor_to(p, RT_F32, RT_MEM_TEMP) : rt_tensor_retain(p);
    return *out ? RT_OK : RT_ERR_OOM;
}

static void bf16_free(void *user, void *packed) {
    rt_tensor *p = packed;
    if (p->dtype != RT_BF16) rt_storage_mark_saved(p->storage, -1);
    rt_tensor_release(p);
}

/* relu(conv(x)) with x a TEMP activation: the graph saves x and y (f32) and
 * the weight (PARAM). Under the bf16 hook SAVED holds half the bytes, and
 * the gradients stay within bf16 rounding of the plain ones. */
static void test_saved_hooks_bf16(void) {
    int64_t base_saved = live(RT_MEM_SAVED), base_total = live_total_bytes();
    small_graph sg;
    CHECK(small_graph_init(&sg, true, RT_MEM_TEMP));
    rt_tensor *plain[3] = {0}, *y = NULL;
    int64_t saved_plain = 0;
    for (int pass = 0; pass < 2; pass++) {
        rt_saved_hooks h = {.pack = bf16_pack, .unpack = bf16_unpack, .free_packed = bf16_free};
        if (pass == 1) CHECK_OK(rt_saved_tensors_hooks_push(&h));
        CHECK_OK(conv_relu(sg.x, sg.w, sg.b, &y));
        if (pass == 1) CHECK_OK(rt_saved_tensors_hooks_pop());
        int64_t saved = live(RT_MEM_SAVED) - base_saved;
        if (pass == 0) {
            saved_plain = saved;
            CHECK_EQ_INT(saved_plain, (int64_t)(rt_tensor_nbytes(sg.x) + rt_tensor_nbytes(y)));
        } else {
            CHECK_EQ_INT(2 * saved, saved_plain);
        }
        CHECK_OK(rt_backward(y, sg.g, false));
        rt_tensor_release(y);
        CHECK_EQ_INT(live(RT_MEM_SAVED), base_saved);
        if (pass == 0) {
            rt_tensor *grads[3] = {sg.x->grad, sg.w->grad, sg.b->grad};
            for (int k = 0; k < 3; k++) CHECK((plain[k] = rt_tensor_to(grads[k], RT_F32, RT_MEM_TEMP)) != NULL);
            rt_tensor_zero_grad(sg.x);
            rt_tensor_zero_grad(sg.w);
            rt_tensor_zero_grad(sg.b);
        }
    }
    rt_tensor *grads[3] = {sg.x->grad, sg.w->grad, sg.b->grad};
    for (int k = 0; k < 3; k++) {
        CHECK(grads[k] != NULL);
        /* bf16 keeps 8 significant bits: relative rounding 2^-9 per value */
        CHECK_NEAR(max_abs_diff(grads[k], plain[k]), 0.0, 1e-2 * max_abs(plain[k]));
    }
    CHECK(max_abs_diff(sg.w->grad, plain[1]) > 0); /* the weight gradient really saw bf16 inputs */
    for (int k = 0; k < 3; k++) rt_tensor_release(plain[k]);
    small_graph_free(&sg);
    CHECK_EQ_INT(live_total_bytes(), base_total);
}

/* A hook that drops relu's output and recomputes it from the input in
 * unpack (the pattern of a recompute policy): nothing is SAVED, unpack's
 * tensor is a backward transient, and the gradients are exact. */
static rt_status drop_pack(void *user, rt_tensor *t, void **packed) {
    *packed = user; /* the input to recompute from, kept by the test */
    return RT_OK;
}

static rt_status drop_unpack(void *user, void *packed, rt_tensor **out) {
    return rt_relu((rt_tensor *)packed, out); /* grad mode is off inside hooks */
}

static void test_saved_hooks_drop_recompute(void) {
    int64_t base_saved = live(RT_MEM_SAVED), base_temp = live(RT_MEM_TEMP);
    int64_t shape[2] = {4, 6};
    rt_tensor *x = rand_tensor(2, shape, RT_MEM_DATA, 91), *g = rand_tensor(2, shape, RT_MEM_DATA, 92);
    CHECK(x && g);
    CHECK_OK(rt_tensor_set_requires_grad(x, true));
    rt_tensor *a = NULL, *y = NULL;
    CHECK_OK(rt_mul_scalar(x, 1.0f, &a)); /* a TEMP activation */
    rt_saved_hooks h = {.pack = drop_pack, .unpack = drop_unpack, .user = a};
    CHECK_OK(rt_saved_tensors_hooks_push(&h));
    CHECK_OK(rt_relu(a, &y));
    CHECK_OK(rt_saved_tensors_hooks_pop());
    CHECK_EQ_INT(live(RT_MEM_SAVED), base_saved);
    CHECK_OK(rt_backward(y, g, false));
    for (int i = 0; i < 24; i++) {
        float want = rt_tensor_f32(x)[i] > 0 ? rt_tensor_f32(g)[i] : 0.0f;
        CHECK(rt_tensor_f32(x->grad)[i] == want);
    }
    rt_tensor_release(y);
    rt_tensor_release(a);
    CHECK_EQ_INT(live(RT_MEM_TEMP), base_temp);
    rt_tensor_release(x);
    rt_tensor_release(g);
}

/* The statistics memo (rt_saved_memo_keep / take) through batch norm: a
 * training forward under hooks with memo_keep offers its batch mean and
 * biased variance; in recompute, under hooks whose memo_take hands back
 * statistics, batch norm (plain, and fused with ReLU) normalises with those
 * instead of its input's and updates no running statistics; hooks without
 * the memo fields change nothing. */
typedef struct memo_hooks {
    hook_counts counts; /* first: count_pack & co. read the user as hook_counts */
    rt_tensor *kept[2];
    int n_kept, offers;
    rt_tensor *give[2]; /* what take hands back */
    int takes;
    const rt_storage *key; /* the key keep got (running_mean's storage) */
} memo_hooks;

static rt_status memo_keep(void *user, const rt_tensor *key, rt_tensor *const *ts, int n) {
    memo_hooks *m = user;
    m->key = key->storage;
    m->offers++;
    for (int i = 0; i < n && m->n_kept < 2; i++) m->kept[m->n_kept++] = rt_tensor_retain(ts[i]);
    return RT_OK;
}

static rt_status memo_take(void *user, const rt_tensor *key, rt_tensor **out, int n, bool *found) {
    memo_hooks *m = user;
    if (n != 2 || key->storage != m->key) return rt_error_set(RT_ERR_STATE, "test memo: another key");
    out[0] = rt_tensor_retain(m->give[0]);
    out[1] = rt_tensor_retain(m->give[1]);
    m->takes++;
    *found = true;
    return RT_OK;
}

/* y[n, c, i] = relu?((x − mean[c]) / sqrt(var[c] + eps) · w[c] + b[c]) to 1e-5 */
static bool bn_output_is(const rt_tensor *y, const rt_tensor *x, const float *mean, const float *var,
                         const rt_tensor *w, const rt_tensor *b, float eps, bool relu) {
    const int64_t n = x->shape[0], c = x->shape[1], sp = x->shape[2];
    for (int64_t i = 0; i < n; i++)
        for (int64_t ch = 0; ch < c; ch++)
            for (int64_t k = 0; k < sp; k++) {
                int64_t at = (i * c + ch) * sp + k;
                double want = (rt_tensor_f32(x)[at] - (double)mean[ch]) / sqrt((double)var[ch] + eps) *
                              rt_tensor_f32(w)[ch] + rt_tensor_f32(b)[ch];
                if (relu && want < 0) want = 0;
                if (fabs(rt_tensor_f32(y)[at] - want) > 1e-5 * (1 + fabs(want))) {
                    fprintf(stderr, "  bn output [%lld]: %g, want %g\n", (long long)at, rt_tensor_f32(y)[at], want);
                    return false;
                }
            }
    return true;
}

static void test_saved_memo_batch_norm(void) {
    enum { N = 4, C = 3, S = 5 };
    const float eps = 1e-5f;
    int64_t xs[3] = {N, C, S}, cs[1] = {C};
    rt_tensor *x = rand_tensor(3, xs, RT_MEM_DATA, 93), *w = rand_tensor(1, cs, RT_MEM_PARAM, 94),
              *b = rand_tensor(1, cs, RT_MEM_PARAM, 95);
    rt_tensor *rm = rt_tensor_zeros(1, cs, RT_F32, RT_DEVICE_CPU, RT_MEM_PARAM),
              *rv = rt_tensor_zeros(1, cs, RT_F32, RT_DEVICE_CPU, RT_MEM_PARAM);
    CHECK(x && w && b && rm && rv);
    CHECK_OK(rt_tensor_set_requires_grad(w, true));
    float mean[C], var[C];
    for (int ch = 0; ch < C; ch++) { /* the batch's statistics, in double */
        double s = 0, q = 0;
        for (int i = 0; i < N; i++)
            for (int k = 0; k < S; k++) s += rt_tensor_f32(x)[(i * C + ch) * S + k];
        s /= N * S;
        for (int i = 0; i < N; i++)
            for (int k = 0; k < S; k++) {
                double d = rt_tensor_f32(x)[(i * C + ch) * S + k] - s;
                q += d * d;
            }
        mean[ch] = (float)s;
        var[ch] = (float)(q / (N * S));
    }

    /* forward: the statistics offered are the batch's */
    memo_hooks mh = {0};
    rt_saved_hooks fw = {.pack = count_pack, .unpack = count_unpack, .free_packed = count_free, .user = &mh,
                         .memo_keep = memo_keep};
    rt_tensor *y = NULL;
    CHECK_OK(rt_saved_tensors_hooks_push(&fw));
    CHECK_OK(rt_batch_norm(x, w, b, rm, rv, NULL, true, 0.1f, eps, &y));
    CHECK_OK(rt_saved_tensors_hooks_pop());
    CHECK_EQ_INT(mh.offers, 1);
    CHECK_EQ_INT(mh.n_kept, 2);
    CHECK(mh.key == rm->storage); /* kept by the batch norm's running_mean */
    for (int ch = 0; ch < C && mh.n_kept == 2; ch++) {
        CHECK(fabsf(rt_tensor_f32(mh.kept[0])[ch] - mean[ch]) <= 1e-6f * (1 + fabsf(mean[ch])));
        CHECK(fabsf(rt_tensor_f32(mh.kept[1])[ch] - var[ch]) <= 1e-5f * var[ch]);
    }
    CHECK(bn_output_is(y, x, mean, var, w, b, eps, false));
    rt_tensor_release(y);
    y = NULL;

    /* recompute: statistics handed back are used as given */
    float gm[C] = {0.25f, -1.0f, 2.0f}, gv[C] = {3.0f, 0.5f, 9.0f};
    mh.give[0] = rt_tensor_from_data(1, cs, RT_F32, gm, RT_MEM_TEMP);
    mh.give[1] = rt_tensor_from_data(1, cs, RT_F32, gv, RT_MEM_TEMP);
    CHECK(mh.give[0] && mh.give[1]);
    float rm0[C], rv0[C];
    memcpy(rm0, rt_tensor_f32(rm), sizeof rm0);
    memcpy(rv0, rt_tensor_f32(rv), sizeof rv0);
    rt_saved_hooks rc = {.pack = count_pack, .unpack = count_unpack, .free_packed = count_free, .user = &mh,
                         .memo_take = memo_take};
    bool was = rt_recompute_set_active(true);
    CHECK_OK(rt_saved_tensors_hooks_push(&rc));
    CHECK_OK(rt_batch_norm(x, w, b, rm, rv, NULL, true, 0.1f, eps, &y));
    CHECK(bn_output_is(y, x, gm, gv, w, b, eps, false));
    rt_tensor_release(y);
    y = NULL;
    CHECK_OK(rt_batch_norm_relu(x, w, b, rm, rv, NULL, true, 0.1f, eps, &y));
    CHECK(bn_output_is(y, x, gm, gv, w, b, eps, true));
    rt_tensor_release(y);
    y = NULL;
    CHECK_OK(rt_saved_tensors_hooks_pop());
    rt_recompute_set_active(was);
    CHECK_EQ_INT(mh.takes, 2);
    CHECK_EQ_INT(mh.offers, 1); /* statistics handed back are not offered again */
    CHECK(memcmp(rm0, rt_tensor_f32(rm), sizeof rm0) == 0 && memcmp(rv0, rt_tensor_f32(rv), sizeof rv0) == 0);

    /* hooks without the memo fields: the batch's statistics again */
    hook_counts hc = {0};
    rt_saved_hooks plain = counting_hooks(&hc);
    CHECK_OK(rt_saved_tensors_hooks_push(&plain));
    CHECK_OK(rt_batch_norm_relu(x, w, b, rm, rv, NULL, true, 0.1f, eps, &y));
    CHECK_OK(rt_saved_tensors_hooks_pop());
    CHECK(bn_output_is(y, x, mean, var, w, b, eps, true));
    rt_tensor_release(y);

    for (int i = 0; i < mh.n_kept; i++) rt_tensor_release(mh.kept[i]);
    for (int i = 0; i < 2; i++) rt_tensor_release(mh.give[i]);
    rt_tensor *all[5] = {x, w, b, rm, rv};
    for (int i = 0; i < 5; i++) rt_tensor_release(all[i]);
}

/* ---- the recompute facility (autograd/recompute.h) ------------------------- */

static bool gen_at(rt_rng_state want) {
    const rt_generator *g = rt_default_generator();
    return g->seed == want.seed && g->offset == want.offset;
}

/* begin/rewind/end: the replay draws the forward's numbers, recompute mode
 * is on inside, and everything is put back at the end, also when nested. */
static void test_recompute_scope_rng(void) {
    rt_manual_seed(7);
    float a[10], b[10], c[6];
    rt_generator_uniform(rt_default_generator(), 6, c); /* somewhere mid-stream */
    rt_rng_state at = rt_rng_state_get();
    CHECK(gen_at(at) && at.seed == 7 && at.offset == rt_philox_blocks(6));
    rt_generator_uniform(rt_default_generator(), 10, a);
    const rt_rng_state after = rt_rng_state_get();

    /* outside a scope a rewind is refused and moves nothing */
    CHECK(!rt_recompute_is_active());
    rt_error_clear();
    CHECK_EQ_INT(rt_recompute_rewind(&at), RT_ERR_STATE);
    CHECK(strstr(rt_error_last(), "rt_recompute_begin") != NULL);
    CHECK(gen_at(after));

    rt_recompute_scope outer, inner;
    rt_recompute_begin(&outer);
    CHECK(rt_recompute_is_active());
    CHECK(gen_at(after)); /* begin itself moves nothing */
    CHECK_OK(rt_recompute_rewind(&at));
    CHECK(gen_at(at));
    rt_generator_uniform(rt_default_generator(), 10, b);
    CHECK(memcmp(a, b, sizeof a) == 0); /* the same numbers as the forward */
    const rt_rng_state mid = rt_rng_state_get();
    CHECK_OK(rt_recompute_rewind(NULL)); /* no record: no-op */
    CHECK(gen_at(mid));

    /* a nested scope restores the outer's position, and leaves recompute on */
    rt_recompute_begin(&inner);
    rt_rng_state elsewhere = {.seed = 99, .offset = 1234};
    CHECK_OK(rt_recompute_rewind(&elsewhere));
    rt_generator_uniform(rt_default_generator(), 3, c);
    rt_recompute_end(&inner);
    CHECK(gen_at(mid));
    CHECK(rt_recompute_is_active());

    rt_recompute_end(&outer);
    CHECK(gen_at(after)); /* the stream continues as if nothing was recomputed */
    CHECK(!rt_recompute_is_active());
    rt_generator_uniform(rt_default_generator(), 3, c);
    const rt_rng_state later = rt_rng_state_get();
    rt_recompute_end(&outer); /* a second end does nothing */
    CHECK(gen_at(later));
    CHECK(!rt_recompute_is_active());

    /* a scope opened while recompute mode is already on leaves it on */
    bool prev = rt_recompute_set_active(true);
    rt_recompute_begin(&outer);
    rt_recompute_end(&outer);
    CHECK(rt_recompute_is_active());
    rt_recompute_set_active(prev);
}

/* rt_detached_leaf: shares the storage (no bytes), requires grad, has no
 * history, so a sub-graph built on it stops there; its gradient is TEMP for
 * an activation. Errors are values. */
static void test_detached_leaf(void) {
    int64_t base_total = live_total_bytes(), base_grad = live(RT_MEM_GRAD);
    int64_t shape[2] = {3, 4};
    rt_tensor *x = rand_tensor(2, shape, RT_MEM_DATA, 101), *g = rand_tensor(2, shape, RT_MEM_DATA, 102);
    CHECK(x && g);
    CHECK_OK(rt_tensor_set_requires_grad(x, true));
    rt_tensor *h = NULL, *y = NULL;
    CHECK_OK(rt_mul_scalar(x, 2.0f, &h)); /* an activation with history */
    CHECK(h->grad_fn != NULL);
    int64_t before = live_total_bytes();
    int refs = h->storage->refcount;
    rt_tensor *l = rt_detached_leaf(h);
    CHECK(l != NULL);
    CHECK(l->storage == h->storage && rt_tensor_data(l) == rt_tensor_data(h));
    CHECK_EQ_INT(h->storage->refcount, refs + 1);
    CHECK(l->requires_grad && l->grad_fn == NULL && l->grad == NULL);
    CHECK(rt_tensor_same_shape(l, h) && l->dtype == RT_F32 && l->layout == h->layout);
    CHECK_EQ_INT(live_total_bytes(), before);

    CHECK_OK(rt_mul_scalar(l, 3.0f, &y));
    CHECK_OK(rt_backward(y, g, false));
    CHECK(l->grad != NULL && x->grad == NULL); /* the graph was cut at the leaf */
    for (int i = 0; i < 12; i++) CHECK(rt_tensor_f32(l->grad)[i] == 3.0f * rt_tensor_f32(g)[i]);
    CHECK_EQ_INT(live(RT_MEM_GRAD), base_grad); /* an activation's gradient is TEMP */
    rt_tensor_release(y);
    rt_tensor_release(l);
    rt_tensor_release(h);

    rt_error_clear();
    CHECK(rt_detached_leaf(NULL) == NULL);
    CHECK(strstr(rt_error_last(), "NULL") != NULL);
    rt_tensor *i32 = rt_tensor_zeros(2, shape, RT_I32, RT_DEVICE_CPU, RT_MEM_TEMP);
    CHECK(i32 != NULL);
    rt_error_clear();
    CHECK(rt_detached_leaf(i32) == NULL);
    CHECK(strstr(rt_error_last(), "int32") != NULL);
    CHECK_EQ_INT(i32->storage->refcount, 1);
    rt_tensor_release(i32);
    rt_tensor_release(x);
    rt_tensor_release(g);
    CHECK_EQ_INT(live_total_bytes(), base_total);
}

/* rt_leaf_grad_or_zeros: the leaf's .grad itself, or fresh TEMP zeros of the
 * leaf's shape and layout (also on meta); NULL with a status on errors. */
static void test_leaf_grad_or_zeros(void) {
    int64_t base_total = live_total_bytes(), base_temp = live(RT_MEM_TEMP);
    int64_t shape[4] = {1, rt_layout_block(), 2, 2};
    rt_tensor *t = rand_tensor(4, shape, RT_MEM_TEMP, 111);
    CHECK(t != NULL);
    t->layout = RT_LAYOUT_BLOCKED;
    rt_tensor *l = rt_detached_leaf(t);
    CHECK(l != NULL);
    rt_tensor *z = rt_leaf_grad_or_zeros(l);
    CHECK(z != NULL && z != l && z->storage != l->storage);
    CHECK(rt_tensor_same_shape(z, l) && z->dtype == RT_F32 && z->layout == RT_LAYOUT_BLOCKED);
    CHECK(z->storage->category == RT_MEM_TEMP && !z->requires_grad && z->grad_fn == NULL);
    CHECK(max_abs(z) == 0.0);
    CHECK_EQ_INT(live(RT_MEM_TEMP) - base_temp, 2 * (int64_t)rt_tensor_nbytes(t));
    CHECK(l->grad == NULL); /* the zeros are not stored in the leaf */
    rt_tensor_release(z);

    /* with a gradient: that very tensor, handed over (the leaf lets go of it,
     * so it is freed with the caller's reference, not with the leaf) */
    rt_tensor *stored = rt_tensor_zeros_like(l, RT_MEM_TEMP);
    CHECK(stored != NULL);
    l->grad = stored;
    rt_tensor *gr = rt_leaf_grad_or_zeros(l);
    CHECK(gr == stored);
    CHECK(l->grad == NULL);
    CHECK_EQ_INT(gr->refcount, 1);
    int64_t held = live(RT_MEM_TEMP);
    rt_tensor_release(gr);
    CHECK_EQ_INT(held - live(RT_MEM_TEMP), (int64_t)rt_tensor_nbytes(t));

    /* errors: NULL leaf; out of memory for the zeros */
    rt_error_clear();
    CHECK(rt_leaf_grad_or_zeros(NULL) == NULL);
    CHECK(strstr(rt_error_last(), "NULL") != NULL);
    rt_tensor_zero_grad(l);
    rt_mem_set_limit(live_total_bytes());
    rt_error_clear();
    z = rt_leaf_grad_or_zeros(l);
    rt_mem_set_limit(0);
    CHECK(z == NULL);
    CHECK(strstr(rt_error_last(), "limit") != NULL);

    /* meta: zeros are booked, nothing is computed */
    rt_tensor *m = rt_tensor_create(4, shape, RT_F32, RT_DEVICE_META, RT_MEM_TEMP);
    CHECK(m != NULL);
    rt_tensor *ml = rt_detached_leaf(m);
    CHECK(ml != NULL);
    int64_t before = live(RT_MEM_TEMP);
    rt_tensor *mz = rt_leaf_grad_or_zeros(ml);
    CHECK(mz != NULL && rt_tensor_is_meta(mz));
    CHECK_EQ_INT(live(RT_MEM_TEMP) - before, (int64_t)rt_tensor_nbytes(m));
    rt_tensor_release(mz);
    rt_tensor_release(ml);
    rt_tensor_release(m);
    rt_tensor_release(l);
    rt_tensor_release(t);
    CHECK_EQ_INT(live_total_bytes(), base_total);
}

/* A non-reentrant checkpoint (torch.utils.checkpoint, use_reentrant=False)
 * written with the facility: block(x) = dropout(relu(batch_norm(conv(x)))),
 * followed by another dropout and an mse loss.
 * Forward runs without recording and keeps x and the generator position;
 * backward recomputes in a scope. Against the plain graph: the same loss,
 * the same gradients (dropout replayed its mask), running statistics updated
 * once (batch norm skipped the update in recompute), and the generator ends
 * where the plain run left it. */
typedef struct bn_params {
    rt_tensor *gamma, *beta, *mean, *var;
    int64_t tracked;
} bn_params;

typedef struct rc_block {
    small_graph *sg;
    bn_params *bn;
} rc_block;

static rt_status rc_block_run(const rc_block *b, rt_tensor *x, rt_tensor **y) {
    rt_tensor *c = NULL, *n = NULL, *r = NULL;
    RT_TRY(rt_conv(x, b->sg->w, b->sg->b, &k_pad1, &c));
    rt_status st = rt_batch_norm(c, b->bn->gamma, b->bn->beta, b->bn->mean, b->bn->var, &b->bn->tracked, true,
                                 0.1f, 1e-5f, &n);
    if (st == RT_OK) st = rt_relu(n, &r);
    if (st == RT_OK) st = rt_dropout(r, 0.3f, true, y);
    rt_tensor_release(c);
    rt_tensor_release(n);
    rt_tensor_release(r);
    return st;
}

typedef struct rc_ctx {
    rc_block block;
    rt_rng_state at;
} rc_ctx;

static rt_status rc_backward(rt_node *self, rt_tensor *const *grad_out, rt_tensor **grad_in) {
    rc_ctx *c = self->ctx;
    rt_tensor *x = NULL, *y = NULL;
    RT_TRY(rt_node_saved(self, 0, &x));
    bool need_x = rt_node_needs_grad(self, 0);
    rt_recompute_scope sc;
    rt_recompute_begin(&sc);
    rt_status st = rt_recompute_rewind(&c->at);
    rt_tensor *xl = need_x ? rt_detached_leaf(x) : rt_tensor_detach(x);
    if (st == RT_OK && !xl) st = RT_ERR_OOM;
    bool grad = rt_grad_set_enabled(true);
    if (st == RT_OK) st = rc_block_run(&c->block, xl, &y);
    if (st == RT_OK) st = rt_backward(y, grad_out[0], false);
    if (st == RT_OK && need_x && !(grad_in[0] = rt_leaf_grad_or_zeros(xl))) st = RT_ERR_OOM;
    rt_grad_set_enabled(grad);
    rt_tensor_release(y);
    rt_tensor_release(xl);
    rt_recompute_end(&sc);
    return st;
}

static rt_status rc_checkpoint(const rc_block *b, rt_tensor *x, rt_tensor **out) {
    *out = NULL;
    rt_rng_state at = rt_rng_state_get();
    bool grad = rt_grad_set_enabled(false);
    rt_tensor *y = NULL;
    rt_status st = rc_block_run(b, x, &y);
    rt_grad_set_enabled(grad);
    RT_TRY(st);
    rt_tensor *inputs[5] = {x, b->sg->w, b->sg->b, b->bn->gamma, b->bn->beta};
    rt_node *node = NULL;
    st = rt_node_create("checkpoint", 5, inputs, 1, rc_backward, sizeof(rc_ctx), &node);
    if (st == RT_OK && node) {
        *(rc_ctx *)node->ctx = (rc_ctx){*b, at};
        st = rt_node_save(node, x, NULL);
    }
    if (st == RT_OK) rt_node_set_output(node, y, 0);
    rt_node_release(node);
    if (st != RT_OK) {
        rt_tensor_release(y);
        return st;
    }
    *out = y;
    return RT_OK;
}

static void recompute_checkpoint_case(bool x_requires_grad) {
    int64_t base_total = live_total_bytes();
    small_graph sg;
    CHECK(small_graph_init(&sg, x_requires_grad, RT_MEM_DATA));
    int64_t cs[1] = {4};
    bn_params bn = {rand_tensor(1, cs, RT_MEM_PARAM, 121), rand_tensor(1, cs, RT_MEM_PARAM, 122),
                    const_tensor(1, cs, 0.0f, RT_MEM_PARAM), const_tensor(1, cs, 1.0f, RT_MEM_PARAM), 0};
    CHECK(bn.gamma && bn.beta && bn.mean && bn.var);
    CHECK_OK(rt_tensor_set_requires_grad(bn.gamma, true));
    CHECK_OK(rt_tensor_set_requires_grad(bn.beta, true));
    const rc_block blk = {&sg, &bn};
    rt_tensor *leaves[5] = {sg.x, sg.w, sg.b, bn.gamma, bn.beta};
    rt_tensor *plain[5] = {0}, *stats[2] = {0};
    float loss_plain = 0;
    rt_rng_state end_plain = {0};
    for (int pass = 0; pass < 2; pass++) {
        rt_manual_seed(5);
        CHECK_OK(rt_tensor_fill(bn.mean, 0.0f));
        CHECK_OK(rt_tensor_fill(bn.var, 1.0f));
        bn.tracked = 0;
        rt_tensor *y = NULL, *yd = NULL, *loss = NULL;
        CHECK_OK(pass == 0 ? rc_block_run(&blk, sg.x, &y) : rc_checkpoint(&blk, sg.x, &y));
        /* a later layer draws too: the recompute must not leave the stream at the block's end */
        rt_status st = rt_dropout(y, 0.2f, true, &yd);
        if (st == RT_OK) st = rt_mse_loss(yd, sg.g, &loss);
        rt_tensor_release(y);
        rt_tensor_release(yd);
        CHECK_OK(st);
        if (pass == 1) CHECK(loss->grad_fn != NULL && rt_tensor_f32(loss)[0] == loss_plain);
        loss_plain = rt_tensor_f32(loss)[0];
        CHECK_OK(rt_backward(loss, NULL, false));
        rt_tensor_release(loss);
        CHECK_EQ_INT(bn.tracked, 1); /* one update per training forward */
        if (pass == 0) {
            end_plain = rt_rng_state_get();
            CHECK(end_plain.offset > 0); /* dropout drew */
            for (int k = 0; k < 5; k++) {
                if (!leaves[k]->grad) continue;
                CHECK((plain[k] = rt_tensor_to(leaves[k]->grad, RT_F32, RT_MEM_TEMP)) != NULL);
                rt_tensor_zero_grad(leaves[k]);
            }
            CHECK((stats[0] = rt_tensor_to(bn.mean, RT_F32, RT_MEM_TEMP)) != NULL);
            CHECK((stats[1] = rt_tensor_to(bn.var, RT_F32, RT_MEM_TEMP)) != NULL);
        }
    }
    CHECK(gen_at(end_plain));
    CHECK(!rt_recompute_is_active());
    CHECK(max_abs_diff(bn.mean, stats[0]) == 0.0 && max_abs_diff(bn.var, stats[1]) == 0.0);
    for (int k = 0; k < 5; k++) {
        CHECK((plain[k] != NULL) == (leaves[k]->grad != NULL));
        if (!plain[k]) continue;
        CHECK(max_abs(plain[k]) > 0);
        CHECK_NEAR(max_abs_diff(leaves[k]->grad, plain[k]), 0.0, 1e-5 * (1 + max_abs(plain[k])));
    }
    CHECK((sg.x->grad != NULL) == x_requires_grad);
    for (int k = 0; k < 5; k++) rt_tensor_release(plain[k]);
    rt_tensor_release(stats[0]);
    rt_tensor_release(stats[1]);
    rt_tensor_release(bn.gamma);
    rt_tensor_release(bn.beta);
    rt_tensor_release(bn.mean);
    rt_tensor_release(bn.var);
    small_graph_free(&sg);
    CHECK_EQ_INT(live_total_bytes(), base_total);
}

static void test_recompute_checkpoint_input_requires_grad(void) { recompute_checkpoint_case(true); }
static void test_recompute_checkpoint_params_only(void) { recompute_checkpoint_case(false); }

/* ---- early release inside a backward (rt_node_drop_saved, rt_node_take_grad) ---- */

/* An identity op whose backward copies its saved input and its incoming
 * gradient, then frees both early, recording the SAVED and live bytes. */
typedef struct early_probe {
    int slot;
    int64_t saved_before, saved_after, live_before, live_after;
    rt_status reread;
} early_probe;

static early_probe g_probe;

static rt_status early_backward(rt_node *self, rt_tensor *const *grad_out, rt_tensor **grad_in) {
    rt_tensor *x = NULL;
    RT_TRY(rt_node_saved(self, g_probe.slot, &x));
    rt_tensor *g = rt_tensor_to(grad_out[0], RT_F32, RT_MEM_TEMP);
    if (!g) return RT_ERR_OOM;
    g_probe.saved_before = live(RT_MEM_SAVED);
    g_probe.live_before = live_total_bytes();
    rt_node_drop_saved(self, g_probe.slot);
    rt_tensor_release(rt_node_take_grad(self, 0));
    g_probe.saved_after = live(RT_MEM_SAVED);
    g_probe.live_after = live_total_bytes();
    rt_tensor *again = NULL;
    rt_error_clear();
    g_probe.reread = rt_node_saved(self, g_probe.slot, &again);
    grad_in[0] = g;
    return RT_OK;
}

/* y = early(x): a fresh TEMP tensor with x's values, its node saving y's
 * input copy `keep` (so the saved bytes belong to this node alone). */
static rt_status early_op(rt_tensor *x, rt_tensor **y) {
    *y = rt_tensor_to(x, RT_F32, RT_MEM_TEMP);
    rt_tensor *keep = rt_tensor_to(x, RT_F32, RT_MEM_TEMP);
    if (!*y || !keep) return RT_ERR_OOM;
    rt_node *n = NULL;
    rt_status st = rt_node_create("early", 1, &x, 1, early_backward, 0, &n);
    if (st == RT_OK && n) st = rt_node_save(n, keep, &g_probe.slot);
    rt_tensor_release(keep);
    if (n) rt_node_set_output(n, *y, 0);
    rt_node_release(n);
    return st;
}

static void test_backward_frees_early(void) {
    const int64_t shape[2] = {64, 256}; /* 64 KiB per tensor */
    const int64_t bytes = 64 * 256 * 4;
    for (int retain = 0; retain <= 1; retain++) {
        rt_tensor *x = rand_tensor(2, shape, RT_MEM_DATA, 7);
        rt_tensor *dy = rand_tensor(2, shape, RT_MEM_DATA, 8);
        CHECK(x && dy);
        x->requires_grad = true;
        /* root = 2·early(x): the gradient reaching early's backward is the
         * one mul_scalar's backward made, held by the engine alone */
        rt_tensor *y = NULL, *root = NULL;
        CHECK_OK(early_op(x, &y));
        CHECK_OK(rt_mul_scalar(y, 2.0f, &root));
        memset(&g_probe, 0, sizeof g_probe);
        CHECK_OK(rt_backward(root, dy, retain));
        /* the incoming gradient is freed either way; the saved tensor only
         * without retain_graph */
        CHECK_EQ_INT(g_probe.live_before - g_probe.live_after, retain ? bytes : 2 * bytes);
        CHECK_EQ_INT(g_probe.saved_before - g_probe.saved_after, retain ? 0 : bytes);
        CHECK_EQ_INT(g_probe.reread, retain ? RT_OK : RT_ERR_GRAPH_RELEASED);
        if (retain) CHECK_OK(rt_backward(root, dy, false)); /* the kept tensor serves a second backward */
        /* x.grad = 2·dy per backward */
        rt_tensor *want = NULL;
        CHECK_OK(rt_mul_scalar(dy, retain ? 4.0f : 2.0f, &want));
        CHECK(x->grad && max_abs_diff(x->grad, want) == 0.0);
        rt_tensor_release(want);
        rt_tensor_release(root);
        rt_tensor_release(y);
        rt_tensor_release(x);
        rt_tensor_release(dy);
    }
}

/* A convolution's backward computes the weight gradient first and frees
 * its saved input before it allocates the input gradient (ops/conv.c), so
 * the two never coexist: one activation less at the peak of a backward.
 * Traced: without retain_graph the saved input's bytes go (a SAVED free of
 * its size) before the input gradient's allocation; with retain_graph
 * nothing saved is freed. The gradients are the same either way. */
static void test_conv_backward_frees_input_first(void) {
    const int64_t xs[4] = {2, 16, 32, 32}, ws[4] = {16, 16, 3, 3};
    const int64_t xbytes = 2 * 16 * 32 * 32 * 4;
    const rt_conv_opts opts = {.stride = {1, 1}, .padding = {1, 1}, .dilation = {1, 1}, .groups = 1};
    rt_tensor *grads[2][2] = {{NULL}};
    for (int retain = 0; retain <= 1; retain++) {
        rt_tensor *x0 = rand_tensor(4, xs, RT_MEM_DATA, 11), *w = rand_tensor(4, ws, RT_MEM_PARAM, 12);
        CHECK(x0 && w);
        x0->requires_grad = w->requires_grad = true;
        /* x is an intermediate the convolution alone keeps (mul_scalar saves nothing) */
        rt_tensor *x = NULL, *y = NULL;
        CHECK_OK(rt_mul_scalar(x0, 0.5f, &x));
        CHECK_OK(rt_conv(x, w, NULL, &opts, &y));
        rt_tensor_release(x);
        rt_tensor *dy = rand_tensor(y->ndim, y->shape, RT_MEM_DATA, 13);
        CHECK(dy);
        rt_mem_trace_enable(1);
        CHECK_OK(rt_backward(y, dy, retain));
        size_t n = 0;
        const rt_mem_event *ev = rt_mem_trace_events(&n);
        int64_t freed_at = -1, dx_at = -1;
        for (size_t i = 0; i < n; i++) {
            if (ev[i].category == RT_MEM_SAVED && ev[i].delta_bytes == -xbytes && freed_at < 0) freed_at = (int64_t)i;
            if (ev[i].category == RT_MEM_TEMP && ev[i].delta_bytes == xbytes && !strcmp(ev[i].op, "backward:conv") &&
                dx_at < 0)
                dx_at = (int64_t)i; /* the first: later ones move the finished gradient */
        }
        rt_mem_trace_enable(0);
        CHECK(dx_at >= 0);
        if (retain) CHECK(freed_at < 0);
        else CHECK(freed_at >= 0 && freed_at < dx_at);
        grads[retain][0] = rt_tensor_retain(x0->grad);
        grads[retain][1] = rt_tensor_retain(w->grad);
        rt_tensor_release(dy);
        rt_tensor_release(y);
        rt_tensor_release(x0);
        rt_tensor_release(w);
    }
    for (int k = 0; k < 2; k++) {
        CHECK(grads[0][k] && grads[1][k] && max_abs_diff(grads[0][k], grads[1][k]) == 0.0);
        rt_tensor_release(grads[0][k]);
        rt_tensor_release(grads[1][k]);
    }
}

RT_TEST_MAIN({"grad_accumulates", test_grad_accumulates}, {"used_twice_add", test_used_twice_add},
             {"diamond", test_diamond}, {"relu_in_place", test_relu_in_place}, {"add_in_place", test_add_in_place}, {"add_in_place_edges", test_add_in_place_edges},
             {"leaf_root", test_leaf_root},
             {"backward_twice_released", test_backward_twice_released},
             {"retain_graph_doubles", test_retain_graph_doubles},
             {"no_grad_scope", test_no_grad_scope}, {"backward_errors", test_backward_errors},
             {"dead_intermediate_freed", test_dead_intermediate_freed},
             {"graph_freed_with_root", test_graph_freed_with_root},
             {"nested_backward_input_requires_grad", test_nested_backward_input_requires_grad},
             {"nested_backward_params_only", test_nested_backward_params_only},
             {"nested_backward_shared_params", test_nested_backward_shared_params},
             {"saved_hooks_counts", test_saved_hooks_counts}, {"saved_hooks_nested", test_saved_hooks_nested},
             {"saved_hooks_errors", test_saved_hooks_errors},
             {"saved_hooks_unpack_errors", test_saved_hooks_unpack_errors},
             {"saved_hooks_bf16", test_saved_hooks_bf16},
             {"saved_hooks_drop_recompute", test_saved_hooks_drop_recompute},
             {"saved_memo_batch_norm", test_saved_memo_batch_norm},
             {"recompute_scope_rng", test_recompute_scope_rng}, {"detached_leaf", test_detached_leaf},
             {"leaf_grad_or_zeros", test_leaf_grad_or_zeros},
             {"recompute_checkpoint_input_requires_grad", test_recompute_checkpoint_input_requires_grad},
             {"recompute_checkpoint_params_only", test_recompute_checkpoint_params_only},
             {"backward_frees_early", test_backward_frees_early},
             {"conv_backward_frees_input_first", test_conv_backward_frees_input_first})
