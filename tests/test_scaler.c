/* Dynamic loss scaling (train/scaler.h) in the library training step, with
 * exact values.
 *
 * The network of the fp16 cases is Linear(1, 1, bias=False) with weight w
 * inside an fp16 precision region (memory/precision.h), on the input x = 1,
 * with the loss L = 2·sum(y) computed outside the region (f32, as the loss
 * always is). So dL/dy = 2·S arrives at the Linear node scaled by the loss
 * scale S and is rounded to f16 there (the activation gradient is "stored"
 * in f16), and dL/dw = x·dL/dy: the true gradient is exactly 2.0. f16's
 * largest finite value is 65504 and values from 65520 on round to Inf, so
 * with S = 65536 (2·S = 131072) and 32768 (2·S = 65536) the step must be
 * skipped, and with S = 16384 (2·S = 32768, exact in f16) the unscaled
 * gradient is exactly 2.0. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "core/dtype.h"
#include "core/mem.h"
#include "core/tensor.h"
#include "memory/precision.h"
#include "nn/modules.h"
#include "ops/ops.h"
#include "optim/optim.h"
#include "train/scaler.h"
#include "train/step.h"
#include "rt_test.h"

typedef struct lin1 {
    rt_module *net;  /* Autocast(Linear(1, 1, bias=False)) */
    rt_tensor *w;    /* borrowed from the Linear */
    rt_optimizer *opt;
} lin1;

static float k_loss_factor = 2.0f;

/* L = k·sum(y): the true gradient of w is k·sum(x). */
static rt_status loss_k_sum(rt_tensor *out, rt_tensor *target, void *user, rt_tensor **loss) {
    (void)target;
    float k = *(const float *)user;
    rt_tensor *s = NULL;
    RT_TRY(rt_sum(out, &s));
    rt_status st = rt_mul_scalar(s, k, loss);
    rt_tensor_release(s);
    return st;
}

static rt_status lin1_create(rt_precision p, float w0, double momentum, lin1 *l) {
    memset(l, 0, sizeof *l);
    rt_init_ctx ctx = {.device = RT_DEVICE_CPU};
    rt_module *lin = NULL;
    RT_TRY(rt_linear_create(&ctx, 1, 1, false, &lin));
    l->w = rt_module_tensor(lin, "weight");
    rt_tensor_f32(l->w)[0] = w0;
    RT_TRY(rt_autocast_wrap(lin, p, &l->net));
    rt_sgd_opts o = rt_sgd_default_opts(1.0);
    o.momentum = momentum;
    l->opt = rt_sgd_create(&l->w, 1, &o);
    return l->opt ? RT_OK : rt_error_last_status();
}

static void lin1_destroy(lin1 *l) {
    if (l->opt) rt_optimizer_zero_grad(l->opt);
    rt_optimizer_destroy(l->opt);
    rt_module_destroy(l->net);
}

/* A batch of n samples x_i (shape (n, 1)) and dummy targets. */
static void batch(int64_t n, const float *xv, rt_tensor **x, rt_tensor **y) {
    int64_t xs[2] = {n, 1};
    *x = rt_tensor_from_data(2, xs, RT_F32, xv, RT_MEM_DATA);
    *y = rt_tensor_zeros(1, &n, RT_I32, RT_DEVICE_CPU, RT_MEM_DATA);
}

/* The sequence: steps 1 and 2 skipped (2·S overflows f16), the scale
 * 65536 → 32768 → 16384, step 3 applies exactly 2.0; weights, momentum
 * state and step count untouched by the skips; the skips reported. */
static void test_fp16_overflow_skips_then_exact(void) {
    lin1 l;
    CHECK_OK(lin1_create(RT_PRECISION_FP16, 0.0f, 0.9, &l));
    rt_grad_scaler *s = rt_grad_scaler_create(NULL);
    CHECK(s);
    rt_train_config cfg = {.accum_steps = 1, .loss = loss_k_sum, .loss_user = &k_loss_factor,
                           .hooks = rt_grad_scaler_hooks(s)};
    rt_tensor *x, *y;
    const float one = 1.0f;
    batch(1, &one, &x, &y);
    const float scale_before[3] = {65536.0f, 32768.0f, 16384.0f};
    const bool applied[3] = {false, false, true};
    for (int i = 0; i < 3; i++) {
        CHECK(rt_grad_scaler_get_scale(s) == scale_before[i]);
        rt_train_result r;
        CHECK_OK(rt_train_step(l.net, l.opt, &cfg, x, y, &r));
        CHECK(r.stepped == applied[i]);
        CHECK(r.loss == 0.0); /* w = 0 until the step applies */
        if (!applied[i]) {
            CHECK(rt_tensor_f32(l.w)[0] == 0.0f);
            CHECK(l.w->grad == NULL);                       /* the skipped step's gradients are dropped */
            CHECK_EQ_INT(rt_optimizer_step_count(l.opt), 0); /* so an LR schedule does not advance */
            rt_memstats m;
            rt_memstats_get(&m);
            CHECK_EQ_INT(m.live[RT_MEM_OPTIM], 0); /* no momentum buffer was made (it is lazy) */
        }
    }
    CHECK(l.w->grad && rt_tensor_f32(l.w->grad)[0] == 2.0f); /* exactly, after unscaling */
    CHECK(rt_tensor_f32(l.w)[0] == -2.0f);                   /* lr 1, first momentum step: w − g */
    CHECK_EQ_INT(rt_optimizer_step_count(l.opt), 1);
    CHECK(rt_grad_scaler_get_scale(s) == 16384.0f);
    CHECK_EQ_INT(rt_grad_scaler_skipped(s), 2);
    CHECK_EQ_INT(rt_grad_scaler_skipped_in_row(s), 0);
    rt_tensor_release(x);
    rt_tensor_release(y);
    rt_grad_scaler_destroy(s);
    lin1_destroy(&l);
}

/* A true gradient of 1e-8 is below f16's smallest subnormal (2^-24 ≈ 6e-8)
 * and flushes to 0 unscaled; scaled by 65536 it is 6.6e-4, a normal f16
 * number, and unscales to 1e-8 within f16's rounding (2^-11 relative). */
static void test_tiny_gradient_survives(void) {
    float k = 1e-8f;
    for (int scaled = 0; scaled < 2; scaled++) {
        lin1 l;
        CHECK_OK(lin1_create(RT_PRECISION_FP16, 0.5f, 0.0, &l));
        rt_grad_scaler_opts o = rt_grad_scaler_default_opts();
        if (!scaled) o.init_scale = 1.0f;
        rt_grad_scaler *s = rt_grad_scaler_create(&o);
        CHECK(s);
        rt_train_config cfg = {.accum_steps = 1, .loss = loss_k_sum, .loss_user = &k,
                               .hooks = rt_grad_scaler_hooks(s)};
        rt_tensor *x, *y;
        const float one = 1.0f;
        batch(1, &one, &x, &y);
        rt_train_result r;
        CHECK_OK(rt_train_step(l.net, l.opt, &cfg, x, y, &r));
        CHECK(r.stepped);
        float g = rt_tensor_f32(l.w->grad)[0];
        printf("  true gradient 1e-8, fp16 activation gradient, scale %g: unscaled gradient %.9g\n",
               scaled ? 65536.0 : 1.0, (double)g);
        if (scaled) CHECK_NEAR(g, 1e-8, 1e-8 * ldexp(1.0, -11));
        else CHECK(g == 0.0f);
        rt_tensor_release(x);
        rt_tensor_release(y);
        rt_grad_scaler_destroy(s);
        lin1_destroy(&l);
    }
}

/* Accumulation over 2 micro-batches: an Inf in the second one (x = 1e36:
 * its scaled weight gradient overflows f32) skips the whole step and clears the
 * accumulated gradients; an all-finite step unscales once and equals the
 * full-batch gradient. */
static void test_accumulation_inf_in_one_micro_batch(void) {
    lin1 l;
    CHECK_OK(lin1_create(RT_PRECISION_FP16, 0.0f, 0.0, &l));
    rt_grad_scaler_opts o = rt_grad_scaler_default_opts();
    o.init_scale = 1024.0f;
    rt_grad_scaler *s = rt_grad_scaler_create(&o);
    CHECK(s);
    rt_train_config cfg = {.accum_steps = 2, .loss = loss_k_sum, .loss_user = &k_loss_factor,
                           .hooks = rt_grad_scaler_hooks(s)};
    rt_tensor *x, *y;
    const float bad[2] = {1.0f, 1e36f}, good[2] = {1.0f, 3.0f};
    batch(2, bad, &x, &y);
    rt_train_result r;
    CHECK_OK(rt_train_step(l.net, l.opt, &cfg, x, y, &r));
    CHECK(!r.stepped);
    CHECK(l.w->grad == NULL);
    CHECK(rt_tensor_f32(l.w)[0] == 0.0f);
    CHECK(rt_grad_scaler_get_scale(s) == 512.0f);
    rt_tensor_release(x);
    rt_tensor_release(y);
    batch(2, good, &x, &y);
    CHECK_OK(rt_train_step(l.net, l.opt, &cfg, x, y, &r));
    CHECK(r.stepped);
    /* micro-batch weights 1/2: dL/dw = 2·(1/2)·1 + 2·(1/2)·3 = 4 */
    CHECK(rt_tensor_f32(l.w->grad)[0] == 4.0f);
    CHECK(rt_tensor_f32(l.w)[0] == -4.0f);
    rt_tensor_release(x);
    rt_tensor_release(y);
    rt_grad_scaler_destroy(s);
    lin1_destroy(&l);
}

/* Clipping sees unscaled gradients: grad_norm is the true 2.0, not 2·S. */
static void test_clip_on_unscaled(void) {
    lin1 l;
    CHECK_OK(lin1_create(RT_PRECISION_FP16, 0.0f, 0.0, &l));
    rt_grad_scaler_opts o = rt_grad_scaler_default_opts();
    o.init_scale = 4096.0f;
    rt_grad_scaler *s = rt_grad_scaler_create(&o);
    rt_train_config cfg = {.accum_steps = 1, .clip = 1.0f, .loss = loss_k_sum, .loss_user = &k_loss_factor,
                           .hooks = rt_grad_scaler_hooks(s)};
    rt_tensor *x, *y;
    const float one = 1.0f;
    batch(1, &one, &x, &y);
    rt_train_result r;
    CHECK_OK(rt_train_step(l.net, l.opt, &cfg, x, y, &r));
    CHECK(r.stepped);
    CHECK(r.grad_norm == 2.0f);
    CHECK_NEAR(rt_tensor_f32(l.w)[0], -1.0, 1e-6); /* clipped to norm 1 */
    rt_tensor_release(x);
    rt_tensor_release(y);
    rt_grad_scaler_destroy(s);
    lin1_destroy(&l);
}

/* Direct API: unscale once per step (a second is RT_ERR_STATE), growth
 * after growth_interval finite steps, backoff floored at min_scale, and
 * max_skipped_in_row skipped steps stop with RT_ERR_NONFINITE. */
static void test_unscale_growth_floor_stop(void) {
    rt_grad_scaler_opts o = rt_grad_scaler_default_opts();
    o.init_scale = 4.0f;
    o.growth_interval = 3;
    o.max_skipped_in_row = 4;
    rt_grad_scaler *s = rt_grad_scaler_create(&o);
    CHECK(s);
    int64_t n = 2;
    rt_tensor *p = rt_tensor_zeros(1, &n, RT_F32, RT_DEVICE_CPU, RT_MEM_PARAM);
    p->grad = rt_tensor_zeros(1, &n, RT_F32, RT_DEVICE_CPU, RT_MEM_GRAD);
    float *g = rt_tensor_f32(p->grad);
    bool inf = true;
    for (int i = 0; i < 3; i++) { /* finite: 4 → 8 after the third */
        g[0] = 8.0f;
        g[1] = -2.0f;
        CHECK_OK(rt_grad_scaler_unscale(s, &p, 1, &inf));
        CHECK(!inf);
        CHECK(g[0] == 8.0f / rt_grad_scaler_get_scale(s) && g[1] == -2.0f / rt_grad_scaler_get_scale(s));
        CHECK_EQ_INT(rt_grad_scaler_unscale(s, &p, 1, &inf), RT_ERR_STATE);
        CHECK(strstr(rt_error_last(), "already unscaled") != NULL);
        CHECK_OK(rt_grad_scaler_update(s));
    }
    CHECK(rt_grad_scaler_get_scale(s) == 8.0f);
    const float expect[4] = {4.0f, 2.0f, 1.0f, 1.0f}; /* backoff, floored at min_scale 1 */
    for (int i = 0; i < 4; i++) {
        g[0] = NAN;
        CHECK_OK(rt_grad_scaler_unscale(s, &p, 1, &inf));
        CHECK(inf);
        rt_status st = rt_grad_scaler_update(s);
        CHECK(rt_grad_scaler_get_scale(s) == expect[i]);
        if (i < 3) CHECK_OK(st);
        else {
            CHECK_EQ_INT(st, RT_ERR_NONFINITE);
            CHECK(strstr(rt_error_last(), "4 optimizer steps in a row") != NULL);
            /* the initial scale is among the fixes, with its value */
            CHECK(strstr(rt_error_last(), "--loss-scale-init; this scaler's was 4, the default 65536") != NULL);
        }
    }
    CHECK_EQ_INT(rt_grad_scaler_skipped(s), 4);
    /* state round trip */
    float sc;
    int64_t tr, sk;
    CHECK_OK(rt_grad_scaler_state_get(s, &sc, &tr, &sk));
    CHECK(sc == 1.0f && tr == 0 && sk == 4);
    CHECK_OK(rt_grad_scaler_state_set(s, 256.0f, 2, 7));
    CHECK(rt_grad_scaler_get_scale(s) == 256.0f && rt_grad_scaler_skipped(s) == 7);
    CHECK_EQ_INT(rt_grad_scaler_state_set(s, INFINITY, 0, 0), RT_ERR_INVALID_ARG);
    o.growth_factor = 1.0f;
    CHECK(rt_grad_scaler_create(&o) == NULL);
    CHECK(strstr(rt_error_last(), "growth_factor") != NULL);
    rt_tensor_release(p);
    rt_grad_scaler_destroy(s);
}

/* f32 master weights: SGD on w = 1.0 with gradient 1.0 for 100 steps at lr
 * 6e-4 leaves the f32 master at 0.9400020 (f32 arithmetic) and its bf16
 * working copy at 0.94140625; a bf16 weight updated in place never moves
 * (1 − 6e-4 rounds back to 1.0: bf16's spacing below 1 is 2^-8). */
static void test_master_weights_f32(void) {
    int64_t n = 1;
    rt_tensor *w = rt_tensor_zeros(1, &n, RT_F32, RT_DEVICE_CPU, RT_MEM_PARAM);
    rt_tensor_f32(w)[0] = 1.0f;
    rt_sgd_opts o = rt_sgd_default_opts(6e-4);
    rt_optimizer *opt = rt_sgd_create(&w, 1, &o);
    CHECK(opt);
    uint16_t in_place = rt_f32_to_bf16(1.0f);
    for (int i = 0; i < 100; i++) {
        rt_tensor_release(w->grad);
        w->grad = rt_tensor_zeros(1, &n, RT_F32, RT_DEVICE_CPU, RT_MEM_GRAD);
        rt_tensor_f32(w->grad)[0] = 1.0f;
        CHECK_OK(rt_optimizer_step(opt));
        in_place = rt_f32_to_bf16(rt_bf16_to_f32(in_place) - (float)6e-4);
    }
    rt_tensor *copy = rt_tensor_to(w, RT_BF16, RT_MEM_TEMP); /* the working copy, refreshed after the step */
    float master = rt_tensor_f32(w)[0], half = rt_bf16_to_f32(((const uint16_t *)rt_tensor_data(copy))[0]);
    printf("  f32 master %.7f, bf16 copy %.8f, bf16 updated in place %.1f\n", (double)master, (double)half,
           (double)rt_bf16_to_f32(in_place));
    CHECK_NEAR(master, 0.9400020, 5e-8);
    CHECK(half == 0.94140625f);
    CHECK(rt_bf16_to_f32(in_place) == 1.0f);
    rt_tensor_release(copy);
    rt_optimizer_zero_grad(opt);
    rt_optimizer_destroy(opt);
    rt_tensor_release(w);
}

RT_TEST_MAIN({"fp16_overflow_skips_then_exact", test_fp16_overflow_skips_then_exact},
             {"tiny_gradient_survives", test_tiny_gradient_survives},
             {"accumulation_inf_in_one_micro_batch", test_accumulation_inf_in_one_micro_batch},
             {"clip_on_unscaled", test_clip_on_unscaled},
             {"unscale_growth_floor_stop", test_unscale_growth_floor_stop},
             {"master_weights_f32", test_master_weights_f32})
