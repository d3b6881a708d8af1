/* Convolution weights in the kernels' own order (RT_LAYOUT_WEIGHT_BLOCKED,
 * core/layout.h; rt_weight_set_layout, rt_module_set_weight_layout):
 * the element order is the documented OIhw{B}i{B}o formula and converts
 * back exactly; convolutions compute bit-identical outputs and gradients
 * with either order; the forward pass then reorders no weight; a training
 * step of a zoo model (blocked weights by default) gives bit-identical
 * losses and parameters to the same model with OIHW weights; weight files
 * hold OIHW whatever the memory order; and the refusals. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "autograd/engine.h"
#include "io/weights.h"
#include "kernels/cache.h"
#include "kernels/conv.h"
#include "models/model.h"
#include "nn/modules.h"
#include "ops/ops.h"
#include "ops/ops3d.h"
#include "optim/optimizer.h"
#include "train/step.h"
#include "rt_test.h"
#include "test_util.h"

/* A cpu tensor of N(0, 1) draws from stream `seed`, booked to `cat`. */
static rt_tensor *randn(int nd, const int64_t *shape, rt_mem_category cat, uint64_t seed) {
    return tu_randn_seeded(nd, shape, RT_DEVICE_CPU, cat, seed);
}

/* A plain copy of t's values in new storage (t unchanged). */
static rt_tensor *plain_copy(rt_tensor *t) {
    if (t->layout == RT_LAYOUT_PLAIN) return rt_tensor_to(t, RT_F32, RT_MEM_TEMP);
    rt_tensor *d = rt_tensor_detach(t), *p = NULL; /* detached: the reorder is not recorded */
    if (d && rt_to_layout(d, RT_LAYOUT_PLAIN, &p) != RT_OK) p = NULL;
    rt_tensor_release(d);
    return p;
}

/* Element (o, i, h, w) sits where core/layout.h says, and converting back
 * restores the OIHW bytes exactly; a gradient is converted with its weight. */
static void test_order_matches_formula_and_round_trips(void) {
    const int64_t B = rt_layout_block(), O = 2 * B, I = 3 * B, H = 3, W = 2;
    rt_tensor *w = randn(4, (const int64_t[]){O, I, H, W}, RT_MEM_PARAM, 5);
    rt_tensor *orig = rt_tensor_to(w, RT_F32, RT_MEM_TEMP);
    CHECK_OK(rt_tensor_set_requires_grad(w, true));
    w->grad = rt_tensor_to(w, RT_F32, RT_MEM_GRAD);
    uint64_t v0 = rt_tensor_version(w);
    CHECK_OK(rt_weight_set_layout(w, RT_LAYOUT_WEIGHT_BLOCKED));
    CHECK_EQ_INT(w->layout, RT_LAYOUT_WEIGHT_BLOCKED);
    CHECK_EQ_INT(w->grad->layout, RT_LAYOUT_WEIGHT_BLOCKED);
    CHECK(rt_tensor_version(w) > v0);
    const float *p = rt_tensor_f32(orig), *q = rt_tensor_f32(w);
    int64_t bad = 0;
    for (int64_t o = 0; o < O; o++)
        for (int64_t i = 0; i < I; i++)
            for (int64_t hw = 0; hw < H * W; hw++) {
                int64_t at = (((o / B) * (I / B) + i / B) * H * W + hw) * B * B + (i % B) * B + o % B;
                bad += q[at] != p[(o * I + i) * H * W + hw];
            }
    CHECK_EQ_INT(bad, 0);
    CHECK(memcmp(rt_tensor_data(w), rt_tensor_data(w->grad), rt_tensor_nbytes(w)) == 0);
    CHECK_OK(rt_weight_set_layout(w, RT_LAYOUT_WEIGHT_BLOCKED)); /* a no-op */
    CHECK_OK(rt_weight_set_layout(w, RT_LAYOUT_PLAIN));
    CHECK(tu_same_bytes(w, orig));
    CHECK(tu_same_bytes(w->grad, orig));
    rt_tensor_release(orig);
    rt_tensor_release(w);
}

/* One convolution forward + backward; y, dx, dw and db returned (dw plain). */
static void conv_pass(int nsp, rt_layout wl, rt_layout xl, rt_tensor **y, rt_tensor **dx, rt_tensor **dw,
                      rt_tensor **db, int64_t *fwd_reorders) {
    const int64_t B = rt_layout_block();
    int64_t xs[5] = {2, B, 7, 6, 5}, ws[5] = {2 * B, B, 3, 3, 3}, bs = 2 * B;
    rt_tensor *x0 = randn(2 + nsp, xs, RT_MEM_DATA, 11), *x = NULL;
    rt_tensor *w = randn(2 + nsp, ws, RT_MEM_PARAM, 12), *b = randn(1, &bs, RT_MEM_PARAM, 13);
    CHECK_OK(rt_tensor_set_requires_grad(x0, true));
    CHECK_OK(rt_to_layout(x0, xl, &x)); /* differentiable: dx arrives in x0's plain order */
    CHECK_OK(rt_weight_set_layout(w, wl));
    CHECK_OK(rt_tensor_set_requires_grad(w, true));
    CHECK_OK(rt_tensor_set_requires_grad(b, true));
    rt_conv_opts o = {.padding = {1, 1, 1}};
    int64_t r0 = rt_kernels_weight_reorders();
    rt_tensor *out = NULL, *outp = NULL, *loss = NULL;
    CHECK_OK(rt_conv(x, w, b, &o, &out)); /* 2-D or 3-D by rank */
    *fwd_reorders = rt_kernels_weight_reorders() - r0;
    CHECK_OK(rt_to_layout(out, RT_LAYOUT_PLAIN, &outp));
    /* loss = sum(y * r) with a fixed r: dy = r */
    rt_tensor *r = randn(outp->ndim, outp->shape, RT_MEM_DATA, 14), *prod = NULL;
    CHECK_OK(rt_mul(outp, r, &prod));
    CHECK_OK(rt_sum(prod, &loss));
    CHECK_OK(rt_backward(loss, NULL, false));
    *y = rt_tensor_to(outp, RT_F32, RT_MEM_TEMP);
    *dx = rt_tensor_retain(x0->grad);
    *dw = plain_copy(w->grad);
    *db = rt_tensor_retain(b->grad);
    rt_tensor *ts[] = {x0, x, w, b, out, outp, loss, r, prod};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) rt_tensor_release(ts[i]);
}

static void check_conv_equal(int nsp, rt_layout xl) {
    rt_tensor *y[2], *dx[2], *dw[2], *db[2];
    int64_t fr[2];
    conv_pass(nsp, RT_LAYOUT_PLAIN, xl, &y[0], &dx[0], &dw[0], &db[0], &fr[0]);
    conv_pass(nsp, RT_LAYOUT_WEIGHT_BLOCKED, xl, &y[1], &dx[1], &dw[1], &db[1], &fr[1]);
    printf("  conv%dd, %s input: forward weight reorders plain %lld, blocked %lld\n", nsp,
           xl == RT_LAYOUT_BLOCKED ? "blocked" : "plain", (long long)fr[0], (long long)fr[1]);
    CHECK(tu_same_bytes(y[0], y[1]));
    CHECK(tu_same_bytes(dx[0], dx[1]));
    CHECK(tu_same_bytes(dw[0], dw[1]));
    CHECK(tu_same_bytes(db[0], db[1]));
    CHECK_EQ_INT(fr[0], 1); /* OIHW is reordered into the primitive's order */
    CHECK_EQ_INT(fr[1], 0); /* the primitive reads the weight as it is */
    for (int i = 0; i < 2; i++) {
        rt_tensor_release(y[i]);
        rt_tensor_release(dx[i]);
        rt_tensor_release(dw[i]);
        rt_tensor_release(db[i]);
    }
}

/* Direct convolutions (2-D and 3-D, plain and blocked activations): the
 * same bytes either way, and no weight reorder in the forward. */
static void test_conv_same_results_no_forward_reorder(void) {
    rt_conv_algo prev = rt_conv_algo_set(RT_CONV_ALGO_DIRECT);
    check_conv_equal(2, RT_LAYOUT_PLAIN);
    check_conv_equal(2, RT_LAYOUT_BLOCKED);
    check_conv_equal(3, RT_LAYOUT_BLOCKED);
    rt_conv_algo_set(prev);
}

/* Two SGD-with-momentum steps of a zoo model, weights blocked (the zoo's
 * default) or OIHW: the same losses and, in OIHW, the same parameters. The
 * stem (3 input channels) stays plain; every other convolution converts. */
static void run_steps(const char *name, bool blocked, double loss[2], rt_tensor **params_out, int *np_out) {
    rt_model *m = NULL;
    CHECK_OK(rt_model_create(name, 3, 10, RT_DEVICE_CPU, 4, &m));
    if (!m) return;
    if (!blocked) {
        int n = 0;
        CHECK_OK(rt_module_set_weight_layout(m->net, RT_LAYOUT_PLAIN, &n));
        CHECK(n > 0);
    }
    int np = rt_state_dict_num_params(m->sd);
    rt_tensor *params[512];
    rt_state_dict_params(m->sd, params, 512);
    rt_sgd_opts so = rt_sgd_default_opts(0.05f);
    so.momentum = 0.9f;
    so.weight_decay = 5e-4f;
    rt_optimizer *opt = rt_sgd_create(params, np, &so);
    int64_t xs[4] = {4, 3, 16, 16}, n = 4;
    rt_tensor *x = randn(4, xs, RT_MEM_DATA, 31);
    rt_tensor *y = rt_tensor_create(1, &n, RT_I32, RT_DEVICE_CPU, RT_MEM_DATA);
    for (int i = 0; i < n; i++) ((int32_t *)rt_tensor_data(y))[i] = (i * 7) % 10;
    rt_train_config cfg = {.accum_steps = 1};
    for (int s = 0; s < 2 && opt; s++) {
        rt_train_result r;
        CHECK_OK(rt_train_step(m->net, opt, &cfg, x, y, &r));
        loss[s] = r.loss;
    }
    *np_out = np;
    for (int i = 0; i < np; i++) params_out[i] = plain_copy(params[i]);
    rt_optimizer_destroy(opt);
    rt_tensor_release(x);
    rt_tensor_release(y);
    rt_model_destroy(m);
}

static void check_training_equal(const char *name) {
    static rt_tensor *pa[512], *pb[512];
    double la[2] = {0}, lb[2] = {0};
    int na = 0, nb = 0;
    run_steps(name, false, la, pa, &na);
    run_steps(name, true, lb, pb, &nb);
    CHECK(na > 0 && na == nb);
    int differ = 0;
    for (int i = 0; i < na; i++) {
        differ += !tu_same_bytes(pa[i], pb[i]);
        rt_tensor_release(pa[i]);
        rt_tensor_release(pb[i]);
    }
    printf("  %s: losses OIHW %.9g %.9g, blocked %.9g %.9g; %d of %d parameters differ\n", name, la[0], la[1], lb[0],
           lb[1], differ, na);
    CHECK(la[0] == lb[0] && la[1] == lb[1]);
    CHECK_EQ_INT(differ, 0);
}

static void test_resnet20_training_bit_identical(void) { check_training_equal("resnet20"); }
static void test_revnet_small_training_bit_identical(void) { check_training_equal("revnet_small"); }

/* Converting the weights after the optimizer has state: the state follows
 * at the next step, so training continues exactly as without the
 * conversion (two resnet20 models, one converted to OIHW after a step). */
static void test_optimizer_state_follows_conversion(void) {
    rt_model *m[2] = {NULL, NULL};
    rt_optimizer *opt[2] = {NULL, NULL};
    int64_t xs[4] = {4, 3, 16, 16}, n = 4;
    rt_tensor *x = randn(4, xs, RT_MEM_DATA, 41);
    rt_tensor *y = rt_tensor_create(1, &n, RT_I32, RT_DEVICE_CPU, RT_MEM_DATA);
    for (int i = 0; i < n; i++) ((int32_t *)rt_tensor_data(y))[i] = (i * 3) % 10;
    rt_train_config cfg = {.accum_steps = 1};
    double loss[2][3] = {{0}};
    for (int k = 0; k < 2; k++) {
        CHECK_OK(rt_model_create("resnet20", 3, 10, RT_DEVICE_CPU, 8, &m[k]));
        if (!m[k]) return;
        rt_tensor *params[512];
        int np = rt_state_dict_num_params(m[k]->sd);
        rt_state_dict_params(m[k]->sd, params, 512);
        rt_sgd_opts so = rt_sgd_default_opts(0.05f);
        so.momentum = 0.9f;
        opt[k] = rt_sgd_create(params, np, &so);
        for (int s = 0; s < 3 && opt[k]; s++) {
            if (k == 1 && s == 1) CHECK_OK(rt_module_set_weight_layout(m[k]->net, RT_LAYOUT_PLAIN, NULL));
            rt_train_result r;
            CHECK_OK(rt_train_step(m[k]->net, opt[k], &cfg, x, y, &r));
            loss[k][s] = r.loss;
        }
    }
    int differ = 0;
    for (int i = 0; i < m[0]->sd->n; i++) {
        if (!m[0]->sd->entries[i].tensor) continue; /* a counter (num_batches_tracked) */
        rt_tensor *a = plain_copy(m[0]->sd->entries[i].tensor), *b = plain_copy(m[1]->sd->entries[i].tensor);
        differ += !tu_same_bytes(a, b);
        rt_tensor_release(a);
        rt_tensor_release(b);
    }
    printf("  losses blocked %.9g %.9g %.9g, converted after step 1 %.9g %.9g %.9g; %d tensors differ\n", loss[0][0],
           loss[0][1], loss[0][2], loss[1][0], loss[1][1], loss[1][2], differ);
    CHECK(loss[0][2] == loss[1][2]);
    CHECK_EQ_INT(differ, 0);
    for (int k = 0; k < 2; k++) {
        rt_optimizer_destroy(opt[k]);
        rt_model_destroy(m[k]);
    }
    rt_tensor_release(x);
    rt_tensor_release(y);
}

/* The zoo converts every convolution it can: all but resnet20's stem. */
static void test_zoo_converts_all_but_the_stem(void) {
    rt_model *m = NULL;
    CHECK_OK(rt_model_create("resnet20", 3, 10, RT_DEVICE_CPU, 1, &m));
    if (!m) return;
    int convs = 0, blocked = 0;
    for (int i = 0; i < m->sd->n; i++) {
        const rt_tensor *t = m->sd->entries[i].tensor;
        if (!t || t->ndim != 4) continue;
        convs++;
        blocked += t->layout == RT_LAYOUT_WEIGHT_BLOCKED;
    }
    int back = 0;
    CHECK_OK(rt_module_set_weight_layout(m->net, RT_LAYOUT_PLAIN, &back));
    printf("  resnet20: %d of %d convolution weights blocked\n", blocked, convs);
    CHECK_EQ_INT(convs, 21); /* 19 3×3 and two 1×1 downsampling convolutions */
    CHECK_EQ_INT(blocked, 20);
    CHECK_EQ_INT(back, 20);
    rt_tensor *stem = rt_module_tensor(rt_module_find(m->net, "conv1"), "weight");
    CHECK(stem && stem->layout == RT_LAYOUT_PLAIN);
    rt_model_destroy(m);
}

/* A weight file holds OIHW whatever the memory order: the blocked model's
 * file equals the OIHW model's byte for byte, and loads back into blocked
 * weights with the same values. Optimizer state (saved as extras) too. */
static void test_files_hold_oihw(void) {
    char pa[] = "/tmp/rt_wl_a_XXXXXX", pb[] = "/tmp/rt_wl_b_XXXXXX";
    int fa = mkstemp(pa), fb = mkstemp(pb);
    CHECK(fa >= 0 && fb >= 0);
    close(fa);
    close(fb);
    rt_model *a = NULL, *b = NULL, *c = NULL;
    CHECK_OK(rt_model_create("resnet20", 3, 10, RT_DEVICE_CPU, 6, &a));
    CHECK_OK(rt_model_create("resnet20", 3, 10, RT_DEVICE_CPU, 6, &b));
    CHECK_OK(rt_model_create("resnet20", 3, 10, RT_DEVICE_CPU, 7, &c)); /* other values */
    if (!a || !b || !c) return;
    CHECK_OK(rt_module_set_weight_layout(a->net, RT_LAYOUT_PLAIN, NULL));
    rt_tensor *wa = rt_module_tensor(rt_module_find(a->net, "layer1.0.conv1"), "weight");
    rt_tensor *wb = rt_module_tensor(rt_module_find(b->net, "layer1.0.conv1"), "weight");
    rt_tensor *wc = rt_module_tensor(rt_module_find(c->net, "layer1.0.conv1"), "weight");
    CHECK(wa && wb && wc);
    if (!wa || !wb || !wc) return;
    rt_named_tensor ea = {"state.layer1.0.conv1.weight", wa}, eb = {"state.layer1.0.conv1.weight", wb};
    CHECK_OK(rt_weights_save(a->sd, &ea, 1, NULL, 0, pa));
    CHECK_OK(rt_weights_save(b->sd, &eb, 1, NULL, 0, pb));
    FILE *f = fopen(pa, "rb"), *g = fopen(pb, "rb");
    int same = f && g;
    for (int ca = 0, cb = 0; same && ca != EOF;) {
        ca = fgetc(f);
        cb = fgetc(g);
        same = ca == cb;
    }
    if (f) fclose(f);
    if (g) fclose(g);
    CHECK(same);
    /* load the file into c (blocked, other values), and an extra into a plain copy */
    rt_tensor *extra = rt_tensor_zeros_like(wc, RT_MEM_TEMP);
    rt_named_tensor ec = {"state.layer1.0.conv1.weight", extra};
    CHECK_OK(rt_weights_load(c->sd, &ec, 1, pb));
    CHECK_EQ_INT(wc->layout, RT_LAYOUT_WEIGHT_BLOCKED);
    CHECK(tu_same_bytes(wc, wb));
    CHECK(tu_same_bytes(extra, wb));
    rt_tensor_release(extra);
    rt_model_destroy(a);
    rt_model_destroy(b);
    rt_model_destroy(c);
    unlink(pa);
    unlink(pb);
}

/* What refuses: a copy between memory orders, a transposed convolution
 * with a blocked weight, a blocked weight with groups, a non-leaf. */
static void test_refusals(void) {
    const int64_t B = rt_layout_block();
    rt_tensor *w = randn(4, (const int64_t[]){B, B, 3, 3}, RT_MEM_PARAM, 1);
    rt_tensor *plain = rt_tensor_to(w, RT_F32, RT_MEM_TEMP);
    CHECK_OK(rt_weight_set_layout(w, RT_LAYOUT_WEIGHT_BLOCKED));
    CHECK_EQ_INT(rt_tensor_copy(w, plain), RT_ERR_INVALID_ARG);
    CHECK(strstr(rt_error_last(), "rt_to_layout") != NULL);
    rt_tensor *x = randn(4, (const int64_t[]){1, B, 5, 5}, RT_MEM_DATA, 2), *y = NULL;
    CHECK_EQ_INT(rt_conv_transpose(x, w, NULL, NULL, &y), RT_ERR_INVALID_ARG);
    CHECK(strstr(rt_error_last(), "rt_weight_set_layout") != NULL);
    rt_tensor *x2 = randn(4, (const int64_t[]){1, 2 * B, 5, 5}, RT_MEM_DATA, 3);
    rt_conv_opts grouped = {.groups = 2};
    rt_tensor *w2 = randn(4, (const int64_t[]){2 * B, B, 3, 3}, RT_MEM_PARAM, 4);
    CHECK_OK(rt_weight_set_layout(w2, RT_LAYOUT_WEIGHT_BLOCKED));
    CHECK_EQ_INT(rt_conv(x2, w2, NULL, &grouped, &y), RT_ERR_INVALID_ARG);
    CHECK(strstr(rt_error_last(), "groups 1") != NULL);
    /* a grad that cannot follow the weight: refused, nothing converted */
    rt_tensor *w3 = randn(4, (const int64_t[]){B, B, 3, 3}, RT_MEM_PARAM, 5);
    rt_tensor *w3_before = rt_tensor_to(w3, RT_F32, RT_MEM_TEMP);
    CHECK_OK(rt_tensor_set_requires_grad(w3, true));
    w3->grad = rt_tensor_zeros(4, w3->shape, RT_BF16, RT_DEVICE_CPU, RT_MEM_GRAD);
    CHECK_EQ_INT(rt_weight_set_layout(w3, RT_LAYOUT_WEIGHT_BLOCKED), RT_ERR_DTYPE);
    CHECK(w3->layout == RT_LAYOUT_PLAIN && tu_same_bytes(w3, w3_before));
    /* a grad in another order than its parameter: the optimizer refuses */
    rt_tensor_release(w3->grad);
    w3->grad = rt_tensor_zeros(4, w3->shape, RT_F32, RT_DEVICE_CPU, RT_MEM_GRAD);
    w3->grad->layout = RT_LAYOUT_WEIGHT_BLOCKED;
    rt_sgd_opts so = rt_sgd_default_opts(0.1f);
    rt_optimizer *opt = rt_sgd_create(&w3, 1, &so);
    CHECK_EQ_INT(rt_optimizer_step(opt), RT_ERR_STATE);
    CHECK(strstr(rt_error_last(), "memory orders") != NULL && tu_same_bytes(w3, w3_before));
    rt_optimizer_destroy(opt);
    rt_tensor_release(w3);
    rt_tensor_release(w3_before);
    rt_tensor *doubled = NULL;
    CHECK_OK(rt_tensor_set_requires_grad(plain, true));
    CHECK_OK(rt_mul_scalar(plain, 2.0f, &doubled));
    CHECK_EQ_INT(rt_weight_set_layout(doubled, RT_LAYOUT_WEIGHT_BLOCKED), RT_ERR_INVALID_ARG);
    rt_tensor *ts[] = {w, plain, x, x2, w2, doubled, y};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) rt_tensor_release(ts[i]);
}

RT_TEST_MAIN({"order_matches_formula_and_round_trips", test_order_matches_formula_and_round_trips},
             {"conv_same_results_no_forward_reorder", test_conv_same_results_no_forward_reorder},
             {"resnet20_training_bit_identical", test_resnet20_training_bit_identical},
             {"revnet_small_training_bit_identical", test_revnet_small_training_bit_identical},
             {"optimizer_state_follows_conversion", test_optimizer_state_follows_conversion},
             {"zoo_converts_all_but_the_stem", test_zoo_converts_all_but_the_stem},
             {"files_hold_oihw", test_files_hold_oihw},
             {"refusals", test_refusals})
