/* Precision regions (memory/precision.h) on zoo models: gradients under
 * bf16 and fp16 against f32, saved-activation memory, and memory
 * prediction equal to measurement.
 *
 * Gradients: the same model (same seed), the same batch, one training step
 * at lr 0 in f32 and in a region, then per parameter the relative error
 * ‖g_half − g_f32‖ / ‖g_f32‖ (printed for every tensor). fp16 runs with the
 * GradScaler at init scale 1024 (no skip may happen: the step must apply).
 * Storage-only bf16 (the AVX2 path, forced here by a test wrapper) and fp16
 * have the bound below; bf16 with this CPU's bf16 convolutions has its own
 * (check_grads_compute), and the kernels themselves are checked exactly
 * (conv_bf16_kernels).
 * The bound, per tensor: 32·u, u the unit roundoff of the half type
 * (bf16 2^-9, fp16 2^-12), i.e. 0.0625 for bf16 and 0.0078 for fp16. Why:
 * every saved activation and every activation gradient is rounded once
 * (relative error ≤ u each); a parameter's gradient depends on about 2
 * roundings per layer through ~20 layers, ~40 in all, which as
 * independent errors add in quadrature to about √40·u ≈ 6.3·u (measured:
 * 3–17·u); 32·u leaves a factor 5 for batch norm's backward, which
 * subtracts nearly cancelling means and amplifies relative error, while
 * still catching a missing unscale (error 1 or 1023), a wrong dtype (bf16
 * read as f16: error ≫ 1) or a dropped gradient (1).
 * The measured maxima are printed (see the README).
 *
 * Memory: SAVED peak with bf16 ≤ 0.55 × f32 for resnet20 at batch 128
 * (3×32×32, 10 classes), from the meta prediction; for RevNet-110 the same
 * bound on everything but the reversible sequences' outputs, which stay f32
 * by design (measured: whole SAVED peak 0.633 × f32); and the
 * prediction equals the measured peaks per category for a real bf16 step
 * of resnet20 and revnet_small (batch 16), as tests/test_predict.c does for f32. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
#include "core/mem.h"
#include "core/rng.h"
#include "core/tensor.h"
#include "kernels/conv.h"
#include "kernels/eltwise.h"
#include "kernels/layout.h"
#include "kernels/norm.h"
#include "kernels/norm_loops.h"
#include "autograd/engine.h"
#include "memory/precision.h"
#include "ops/ops.h"
#include "memory/predict.h"
#include "models/model.h"
#include "models/resblock.h"
#include "nn/state_dict.h"
#include "optim/optimizer.h"
#include "train/scaler.h"
#include "train/step.h"
#include "rt_test.h"

enum { CIN = 3, HW = 32, NCLS = 10 };
static const uint64_t k_seed = 7;

static rt_status make_batch(int64_t n, rt_tensor **x, rt_tensor **y) {
    int64_t xs[4] = {n, CIN, HW, HW};
    *x = rt_tensor_create(4, xs, RT_F32, RT_DEVICE_CPU, RT_MEM_DATA);
    *y = rt_tensor_create(1, &n, RT_I32, RT_DEVICE_CPU, RT_MEM_DATA);
    if (!*x || !*y) return RT_ERR_OOM;
    float *p = rt_tensor_f32(*x);
    rt_philox_uniform(11, 0, rt_tensor_numel(*x), p);
    for (int64_t i = 0; i < rt_tensor_numel(*x); i++) p[i] = 2.0f * p[i] - 1.0f;
    int32_t *t = rt_tensor_data(*y);
    for (int64_t i = 0; i < n; i++) t[i] = (int32_t)((3 * i + 1) % NCLS);
    return RT_OK;
}

/* A zoo model, its net wrapped in a region of precision p. */
static rt_status model_at(const char *name, rt_precision p, rt_device dev, int64_t cin, rt_model **m) {
    RT_TRY(rt_model_create(name, cin, NCLS, dev, k_seed, m));
    rt_module *w = NULL;
    rt_status st = rt_autocast_wrap((*m)->net, p, &w);
    (*m)->net = w; /* on failure the tree was destroyed: nothing left to free twice */
    return st;
}

/* The test's own storage-only bf16 region (what an AVX2 CPU runs): a
 * wrapper whose forward is rt_precision_region_forward(inner, BF16,
 * compute false), so this CPU's bf16 kernels stay out of it. */
static rt_status storage_only_forward(rt_module *m, rt_tensor *x, rt_tensor **y) {
    return rt_precision_region_forward(m->children[0].module, RT_BF16, false, x, y);
}
static const rt_module_class k_storage_only = {"StorageOnlyBf16", storage_only_forward, NULL, NULL};

typedef enum run_mode { RUN_F32, RUN_BF16_STORAGE, RUN_BF16, RUN_FP16 } run_mode;
static const char *const k_mode_name[] = {"fp32", "bf16 storage-only", "bf16 (compute where the CPU has it)",
                                          "fp16"};

static rt_status model_for(const char *name, run_mode mode, rt_model **m) {
    if (mode != RUN_BF16_STORAGE)
        return model_at(name, mode == RUN_F32 ? RT_PRECISION_FP32 : mode == RUN_BF16 ? RT_PRECISION_BF16
                                                                                      : RT_PRECISION_FP16,
                        RT_DEVICE_CPU, CIN, m);
    RT_TRY(rt_model_create(name, CIN, NCLS, RT_DEVICE_CPU, k_seed, m));
    rt_module *w = rt_module_alloc(sizeof(rt_module), &k_storage_only);
    if (!w) return rt_error_last_status();
    rt_status st = rt_module_add_child(w, "", (*m)->net);
    (*m)->net = st == RT_OK ? w : NULL;
    if (st != RT_OK) rt_module_destroy(w);
    return st;
}

/* One step at lr 0; *grads receives a copy of every parameter's gradient
 * (np entries, f32 host arrays, NULL for a parameter without one). */
static rt_status grads_of(const char *name, run_mode mode, rt_tensor *x, rt_tensor *y, int *np, float ***grads,
                          int64_t **sizes, char ***names) {
    rt_model *m = NULL;
    RT_TRY(model_for(name, mode, &m));
    int n = rt_state_dict_num_params(m->sd);
    rt_tensor **params = calloc((size_t)n, sizeof *params);
    rt_state_dict_params(m->sd, params, n);
    rt_sgd_opts o = rt_sgd_default_opts(0.0);
    rt_optimizer *opt = rt_sgd_create(params, n, &o);
    rt_grad_scaler_opts so = rt_grad_scaler_default_opts();
    so.init_scale = 1024.0f;
    rt_grad_scaler *s = mode == RUN_FP16 ? rt_grad_scaler_create(&so) : NULL;
    rt_train_config cfg = {.accum_steps = 1, .hooks = rt_grad_scaler_hooks(s)};
    rt_train_result r;
    rt_status st = opt ? rt_train_step(m->net, opt, &cfg, x, y, &r) : rt_error_last_status();
    if (st == RT_OK && !r.stepped) st = rt_error_set(RT_ERR_NONFINITE, "the fp16 step was skipped");
    *np = n;
    *grads = calloc((size_t)n, sizeof **grads);
    *sizes = calloc((size_t)n, sizeof **sizes);
    *names = calloc((size_t)n, sizeof **names);
    int k = 0;
    for (int i = 0; st == RT_OK && i < m->sd->n; i++) {
        const rt_state_entry *e = &m->sd->entries[i];
        if (e->kind != RT_ENTRY_PARAM || !e->tensor) continue;
        rt_tensor *g = e->tensor->grad;
        (*names)[k] = strdup(e->name);
        (*sizes)[k] = rt_tensor_numel(e->tensor);
        if (g) {
            (*grads)[k] = malloc((size_t)(*sizes)[k] * sizeof(float));
            memcpy((*grads)[k], rt_tensor_f32(g), (size_t)(*sizes)[k] * sizeof(float));
        }
        k++;
    }
    if (opt) rt_optimizer_zero_grad(opt);
    rt_optimizer_destroy(opt);
    rt_grad_scaler_destroy(s);
    free(params);
    rt_model_destroy(m);
    return st;
}

static void free_grads(int n, float **g, int64_t *sizes, char **names) {
    for (int i = 0; i < n; i++) {
        free(g ? g[i] : NULL);
        free(names ? names[i] : NULL);
    }
    free(g);
    free(sizes);
    free(names);
}

/* ‖a − b‖ / ‖b‖ per tensor. */
static double rel_err(const float *a, const float *b, int64_t n) {
    double d = 0.0, r = 0.0;
    for (int64_t j = 0; j < n; j++) {
        double e = (double)a[j] - (double)b[j];
        d += e * e;
        r += (double)b[j] * b[j];
    }
    return r > 0 ? sqrt(d / r) : sqrt(d);
}

typedef struct grad_set {
    int n;
    float **g;
    int64_t *sz;
    char **nm;
} grad_set;

static void grad_set_free(grad_set *s) { free_grads(s->n, s->g, s->sz, s->nm); }

/* Compares `mode` with f32 tensor by tensor against bound[i] (printed),
 * returns the number of tensors over it (or -1 on error). */
static int compare(const char *model, const char *what, const grad_set *ref, const grad_set *got,
                   const double *bound) {
    if (got->n != ref->n) return -1;
    int over = 0;
    double worst = 0.0;
    const char *worst_name = "";
    printf("  %s %s: relative error per parameter gradient (bound)\n", model, what);
    for (int i = 0; i < ref->n; i++) {
        if (!ref->g[i] || !got->g[i]) {
            over += (!ref->g[i]) != (!got->g[i]);
            continue;
        }
        double e = rel_err(got->g[i], ref->g[i], ref->sz[i]);
        printf("    %-36s %.3e (%.3e)%s\n", ref->nm[i], e, bound[i], e <= bound[i] ? "" : "  OVER");
        over += !(e <= bound[i]);
        if (e > worst) {
            worst = e;
            worst_name = ref->nm[i];
        }
    }
    printf("  %s %s: largest %.3e (%s)\n", model, what, worst, worst_name);
    fflush(stdout);
    return over;
}

/* Storage-only bf16 and fp16 against f32, bound 32·u (see the top). */
static void check_grads(const char *model) {
    rt_tensor *x = NULL, *y = NULL;
    CHECK_OK(make_batch(16, &x, &y));
    grad_set ref = {0}, got = {0};
    rt_status st = grads_of(model, RUN_F32, x, y, &ref.n, &ref.g, &ref.sz, &ref.nm);
    int over = 0;
    double *bound = calloc((size_t)(ref.n > 0 ? ref.n : 1), sizeof *bound);
    const run_mode modes[2] = {RUN_BF16_STORAGE, RUN_FP16};
    for (int k = 0; st == RT_OK && k < 2; k++) {
        double u = modes[k] == RUN_FP16 ? ldexp(1.0, -12) : ldexp(1.0, -9);
        for (int i = 0; i < ref.n; i++) bound[i] = 32.0 * u;
        st = grads_of(model, modes[k], x, y, &got.n, &got.g, &got.sz, &got.nm);
        int o = st == RT_OK ? compare(model, k_mode_name[modes[k]], &ref, &got, bound) : 0;
        if (o < 0) st = rt_error_set(RT_ERR_STATE, "parameter counts differ");
        else over += o;
        grad_set_free(&got);
        got = (grad_set){0};
    }
    grad_set_free(&ref);
    free(bound);
    rt_tensor_release(x);
    rt_tensor_release(y);
    CHECK_OK(st);
    CHECK_EQ_INT(over, 0);
}

/* bf16 with this CPU's bf16 convolutions (storage-only where it has none).
 * Computing in bf16 rounds every convolution's inputs, so the forward
 * values move by ~u per layer, and activations within ~u of a ReLU's or
 * max-pool's decision flip: the gradient then moves by far more than u
 * (like √u per layer). The yardstick is the model's own sensitivity: e_in,
 * per tensor, how far f32 gradients move when only the input batch is
 * rounded to bf16 (one such perturbation). With L convolutions each adding
 * a perturbation of that size, independent effects add in quadrature:
 * bound √L·e_in + 32·u (the storage part). */
static void check_grads_compute(const char *model, int n_conv) {
    rt_tensor *x = NULL, *y = NULL, *xr = NULL;
    CHECK_OK(make_batch(16, &x, &y));
    xr = rt_tensor_to(x, RT_BF16, RT_MEM_DATA);
    rt_tensor *xr32 = xr ? rt_tensor_to(xr, RT_F32, RT_MEM_DATA) : NULL;
    CHECK(xr32);
    grad_set ref = {0}, pert = {0}, got = {0};
    rt_status st = grads_of(model, RUN_F32, x, y, &ref.n, &ref.g, &ref.sz, &ref.nm);
    if (st == RT_OK) st = grads_of(model, RUN_F32, xr32, y, &pert.n, &pert.g, &pert.sz, &pert.nm);
    if (st == RT_OK) st = grads_of(model, RUN_BF16, x, y, &got.n, &got.g, &got.sz, &got.nm);
    int over = 0;
    if (st == RT_OK && (pert.n != ref.n || got.n != ref.n)) st = rt_error_set(RT_ERR_STATE, "parameter counts differ");
    if (st == RT_OK) {
        double *bound = calloc((size_t)ref.n, sizeof *bound);
        for (int i = 0; i < ref.n; i++)
            bound[i] = ref.g[i] && pert.g[i] ? sqrt((double)n_conv) * rel_err(pert.g[i], ref.g[i], ref.sz[i]) +
                                                   32.0 * ldexp(1.0, -9)
                                             : 0.0;
        char what[96];
        snprintf(what, sizeof what, "%s, bound √%d·e_in + 32·2^-9", k_mode_name[RUN_BF16], n_conv);
        over = compare(model, what, &ref, &got, bound);
        free(bound);
    }
    grad_set_free(&ref);
    grad_set_free(&pert);
    grad_set_free(&got);
    rt_tensor_release(x);
    rt_tensor_release(xr);
    rt_tensor_release(xr32);
    rt_tensor_release(y);
    CHECK_OK(st);
    CHECK_EQ_INT(over, 0);
}

/* oneDNN's bf16 convolution is exactly an f32 convolution of the
 * bf16-rounded inputs (up to the order of the f32 accumulation): forward,
 * backward-data and backward-weights, 1e-5 relative. Passes trivially where
 * the CPU has no bf16 kernel (the kernels then run f32 on f32). */
static void test_conv_bf16_kernels(void) {
    int64_t n = 4, c = 32, h = 12;
    rt_conv_shape s = {.nsp = 2, .n = n, .c_in = c, .c_out = c, .groups = 1, .in = {h, h}, .k = {3, 3},
                       .stride = {1, 1}, .pad = {1, 1}, .dil = {1, 1}, .src_layout = RT_LAYOUT_BLOCKED,
                       .dst_layout = RT_LAYOUT_BLOCKED};
    size_t act = (size_t)(n * c * h * h), wn = (size_t)(c * c * 9);
    float *buf = calloc(6 * act + 3 * wn, sizeof *buf);
    CHECK(buf);
    float *x = buf, *dy = x + act, *y0 = dy + act, *y1 = y0 + act, *dx0 = y1 + act, *dx1 = dx0 + act;
    float *w = dx1 + act, *dw0 = w + wn, *dw1 = dw0 + wn;
    rt_philox_uniform(3, 0, (int64_t)act, x);
    rt_philox_uniform(4, 0, (int64_t)act, dy);
    rt_philox_uniform(5, 0, (int64_t)wn, w);
    for (size_t i = 0; i < wn; i++) w[i] = 0.1f * (2.0f * w[i] - 1.0f);
    s.compute_bf16 = 1;
    rt_status st = rt_kernel_conv_forward(&s, x, w, NULL, y1);
    if (st == RT_OK) st = rt_kernel_conv_backward_data(&s, w, dy, dx1);
    if (st == RT_OK) st = rt_kernel_conv_backward_weights(&s, x, dy, dw1, NULL);
    s.compute_bf16 = 0;
    rt_dtype_round(x, RT_BF16, act);
    rt_dtype_round(dy, RT_BF16, act);
    rt_dtype_round(w, RT_BF16, wn);
    if (st == RT_OK) st = rt_kernel_conv_forward(&s, x, w, NULL, y0);
    if (st == RT_OK) st = rt_kernel_conv_backward_data(&s, w, dy, dx0);
    if (st == RT_OK) st = rt_kernel_conv_backward_weights(&s, x, dy, dw0, NULL);
    double ef = rel_err(y1, y0, (int64_t)act), ed = rel_err(dx1, dx0, (int64_t)act),
           ew = rel_err(dw1, dw0, (int64_t)wn);
    printf("  bf16 kernels %s: vs f32 on bf16-rounded inputs: forward %.2e, backward-data %.2e, "
           "backward-weights %.2e\n", rt_conv_bf16_available() ? "available" : "absent (f32 ran)", ef, ed, ew);
    free(buf);
    CHECK_OK(st);
    if (rt_conv_bf16_available()) CHECK(ef < 1e-5 && ed < 1e-5 && ew < 1e-5);
}

/* Count of elements of a and b (n floats) that differ in any bit. */
static int bits_differ(const float *a, const float *b, size_t n) {
    int d = 0;
    for (size_t i = 0; i < n; i++) d += memcmp(&a[i], &b[i], 4) != 0;
    return d;
}

/* The kernels of a bf16 block interior (models/resblock.c): a convolution
 * writing bf16 (dst_bf16) writes, bit for bit, the bf16 rounding of what
 * the same bf16 kernel writes as f32 (one rounding of the f32
 * accumulators, nothing else); a batch norm reading and writing bf16 takes
 * the batch statistics of the values the bits stand for, equal bit for bit
 * to the f32 kernel's on those values, and writes its output within one
 * bf16 rounding (half a spacing) of the f32 kernel's; the fused ReLU's mask has the f32
 * forward's size, and the f32 backward reading the bf16 forward's mask
 * gives the f32 forward's gradients bit for bit. Both activation layouts.
 * Skipped where the CPU has no bf16 convolution (no bf16 interior exists). */
static void test_block_interior_kernels(void) {
    if (!rt_conv_bf16_available()) {
        printf("  skipped: no bf16 convolution kernel on this CPU\n");
        return;
    }
    const int64_t n = 4, c = 32, h = 10, sp = h * h;
    const size_t act = (size_t)(n * c * sp), wn = (size_t)(c * c * 9);
    float *x = malloc(act * 4), *w = malloc(wn * 4), *y32 = malloc(act * 4), *yw = malloc(act * 4);
    float *b32 = malloc(act * 4), *dy = malloc(act * 4), *dx0 = malloc(act * 4), *dx1 = malloc(act * 4);
    uint16_t *y16 = malloc(act * 2), *b16 = malloc(act * 2);
    float gam[32], bet[32], m0[32], v0[32], m1[32], v1[32], dg0[32], dg1[32], db0[32], db1[32];
    CHECK(x && w && y32 && yw && b32 && dy && dx0 && dx1 && y16 && b16);
    for (int li = 0; li < 2; li++) {
        rt_layout lay = li ? RT_LAYOUT_BLOCKED : RT_LAYOUT_PLAIN;
        rt_philox_uniform(21, 0, (int64_t)act, x);
        rt_philox_uniform(22, 0, (int64_t)wn, w);
        rt_philox_uniform(23, 0, (int64_t)act, dy);
        for (size_t i = 0; i < wn; i++) w[i] = 0.1f * (2.0f * w[i] - 1.0f);
        for (int k = 0; k < c; k++) gam[k] = 0.5f + 0.03f * (float)k, bet[k] = 0.01f * (float)k - 0.1f;
        rt_conv_shape s = {.nsp = 2, .n = n, .c_in = c, .c_out = c, .groups = 1, .in = {h, h}, .k = {3, 3},
                           .stride = {1, 1}, .pad = {1, 1}, .dil = {1, 1}, .src_layout = lay, .dst_layout = lay,
                           .compute_bf16 = 1};
        CHECK(rt_conv_computes_bf16(&s));
        CHECK_OK(rt_kernel_conv_forward(&s, x, w, NULL, y32));
        s.dst_bf16 = 1;
        CHECK_OK(rt_kernel_conv_forward(&s, x, w, NULL, y16));
        CHECK_OK(rt_dtype_convert(y16, RT_BF16, yw, RT_F32, act));
        memcpy(b32, y32, act * 4);
        CHECK_OK(rt_dtype_round(b32, RT_BF16, act));
        int conv_diff = bits_differ(yw, b32, act);
        /* batch norm + ReLU on the bf16 output, against f32 on its values */
        rt_bn_shape bs = {.n = n, .c = c, .spatial = sp, .eps = 1e-5f, .layout = lay, .nsp = 2, .sp = {h, h},
                          .bf16 = true};
        rt_bn_shape fs = bs;
        fs.bf16 = false;
        size_t ws16 = rt_kernel_batchnorm_relu_workspace_bytes(&bs), ws32 = rt_kernel_batchnorm_relu_workspace_bytes(&fs);
        CHECK(ws16 > 0 && ws16 == ws32);
        unsigned char *wk0 = calloc(1, ws32), *wk1 = calloc(1, ws16);
        CHECK(wk0 && wk1);
        CHECK_OK(rt_kernel_batchnorm_relu_forward_train(&bs, y16, gam, bet, b16, m1, v1, wk1));
        CHECK_OK(rt_kernel_batchnorm_relu_forward_train(&fs, yw, gam, bet, b32, m0, v0, wk0));
        int stat_diff = bits_differ(m0, m1, (size_t)c) + bits_differ(v0, v1, (size_t)c);
        CHECK_OK(rt_dtype_convert(b16, RT_BF16, y32, RT_F32, act));
        double worst = 0.0; /* in units of bf16's spacing at the f32 value */
        for (size_t i = 0; i < act; i++) {
            double ulp = fmax(ldexp(1.0, ilogb(fabs(b32[i]) > 0x1p-100 ? b32[i] : 0x1p-100) - 7), 0x1p-126);
            worst = fmax(worst, fabs((double)y32[i] - b32[i]) / ulp);
        }
        CHECK_OK(rt_kernel_batchnorm_relu_backward(&fs, yw, dy, m0, v0, gam, wk0, dx0, dg0, db0));
        CHECK_OK(rt_kernel_batchnorm_relu_backward(&fs, yw, dy, m0, v0, gam, wk1, dx1, dg1, db1));
        int bwd_diff = bits_differ(dx0, dx1, act) + bits_differ(dg0, dg1, (size_t)c) + bits_differ(db0, db1, (size_t)c);
        printf("  %s: bf16 conv output vs the bf16 rounding of its f32 output: %d of %zu differ; batch norm "
               "statistics: %d of %d differ; output: at most %.2f bf16 spacings off; backward through the "
               "bf16 forward's mask: %d differ\n", li ? "blocked" : "plain", conv_diff, act, stat_diff, 2 * (int)c,
               worst, bwd_diff);
        CHECK_EQ_INT(conv_diff, 0);
        CHECK_EQ_INT(stat_diff, 0);
        CHECK(worst <= 0.5); /* one correct rounding of the f32 kernel's output */
        CHECK_EQ_INT(bwd_diff, 0);
        /* the backward in bf16 (x, dy, dx bf16: the gradients of a bf16
         * interior) against the f32 backward on the same values: dx within
         * one rounding, the f32 weight and bias gradients equal */
        CHECK_OK(rt_dtype_convert(dy, RT_F32, b16, RT_BF16, act)); /* dy as bf16 */
        CHECK_OK(rt_dtype_convert(b16, RT_BF16, dy, RT_F32, act)); /* and its values */
        CHECK_OK(rt_kernel_batchnorm_relu_backward(&fs, yw, dy, m0, v0, gam, wk0, dx0, dg0, db0));
        CHECK_OK(rt_kernel_batchnorm_relu_backward(&bs, y16, b16, m0, v0, gam, wk1, y16, dg1, db1));
        CHECK_OK(rt_dtype_convert(y16, RT_BF16, dx1, RT_F32, act));
        double bworst = 0.0;
        for (size_t i = 0; i < act; i++) {
            double ulp = fmax(ldexp(1.0, ilogb(fabs(dx0[i]) > 0x1p-100 ? dx0[i] : 0x1p-100) - 7), 0x1p-126);
            bworst = fmax(bworst, fabs((double)dx1[i] - dx0[i]) / ulp);
        }
        double eg = rel_err(dg1, dg0, c), eb = rel_err(db1, db0, c);
        /* backward-data writing bf16: the bf16 rounding of its f32 dx */
        s.dst_bf16 = 0;
        s.dy_bf16 = 1;
        CHECK_OK(rt_kernel_conv_backward_data(&s, w, b16, dx0));
        s.dx_bf16 = 1;
        CHECK_OK(rt_kernel_conv_backward_data(&s, w, b16, y16));
        s.dx_bf16 = s.dy_bf16 = 0;
        s.dst_bf16 = 1;
        CHECK_OK(rt_dtype_convert(y16, RT_BF16, dx1, RT_F32, act));
        CHECK_OK(rt_dtype_round(dx0, RT_BF16, act));
        int dx_diff = bits_differ(dx0, dx1, act);
        printf("  %s: batch norm + ReLU backward in bf16: dx at most %.2f bf16 spacings off the f32 kernel's, "
               "dweight %.1e, dbias %.1e relative; bf16 dx of backward-data: %d of %zu differ from the rounding "
               "of its f32 dx\n", li ? "blocked" : "plain", bworst, eg, eb, dx_diff, act);
        CHECK(bworst <= 0.5);
        CHECK(eg == 0.0 && eb == 0.0); /* f32 accumulation in both: measured equal */
        CHECK_EQ_INT(dx_diff, 0);
        /* a bf16 y needs compute_bf16, and only the forward writes one */
        s.compute_bf16 = 0;
        CHECK_EQ_INT(rt_kernel_conv_forward(&s, x, w, NULL, y16), RT_ERR_INVALID_ARG);
        s.compute_bf16 = 1;
        CHECK_EQ_INT(rt_kernel_conv_backward_data(&s, w, dy, dx0), RT_ERR_INVALID_ARG);
        s.dst_bf16 = 0;
        s.dx_bf16 = 1;
        CHECK_EQ_INT(rt_kernel_conv_forward(&s, x, w, NULL, y16), RT_ERR_INVALID_ARG);
        rt_error_clear();
        free(wk0);
        free(wk1);
    }
    free(x), free(w), free(y32), free(yw), free(b32), free(dy), free(dx0), free(dx1), free(y16), free(b16);
}

/* A training Bottleneck(in, planes, stride) and an input (n, in, 8, 8) of
 * uniform values from `seed` that requires grad (a leaf, so the identity
 * shortcut gets a gradient too). */
static void bottleneck_and_input(int64_t in, int64_t planes, int64_t stride, int64_t n, uint64_t seed,
                                 rt_module **blk, rt_tensor **x) {
    rt_init_ctx ctx = rt_init_ctx_make(RT_DEVICE_CPU, seed);
    CHECK_OK(rt_resblock_create(&ctx, RT_BLOCK_BOTTLENECK, in, planes, stride, blk));
    rt_module_train(*blk, true);
    const int64_t xs[4] = {n, in, 8, 8};
    *x = rt_tensor_create(4, xs, RT_F32, RT_DEVICE_CPU, RT_MEM_DATA);
    CHECK(*x != NULL);
    rt_philox_uniform(seed, 0, rt_tensor_numel(*x), rt_tensor_f32(*x));
    (*x)->requires_grad = true;
}

/* A Bottleneck's interior in a bf16 region hands bf16 on (models/resblock.c):
 * in training, bn3 saves its input as it is — the bf16 output of conv3 —
 * with the batch mean (not a centred copy and a zero mean, as batch norm
 * saves from an f32 input in a region), the block's output is f32, and the
 * gradients of the interior's activations are bf16 (the shortcut's too
 * when it is a downsample, whose output is interior). A
 * storage-only region (compute f32) keeps f32 activations and gradients: bn3
 * saves the centred copy. Both with and without a downsample shortcut. */
static void test_block_interior_bf16(void) {
    if (!rt_conv_bf16_available()) {
        printf("  skipped: no bf16 convolution kernel on this CPU\n");
        return;
    }
    for (int stride = 1; stride <= 2; stride++) {
        for (int compute = 0; compute < 2; compute++) {
            rt_module *blk = NULL;
            rt_tensor *x = NULL, *y = NULL;
            bottleneck_and_input(64, 16, stride, 4, 31, &blk, &x);
            CHECK_OK(rt_precision_region_forward(blk, RT_BF16, compute, x, &y));
            CHECK(y->dtype == RT_F32);
            rt_node *add = (rt_node *)y->grad_fn, *bn3 = add ? add->edges[0].node : NULL;
            CHECK(add && bn3 && !strcmp(add->name, "add_relu") && !strcmp(bn3->name, "batch_norm"));
            rt_tensor *sx = NULL, *smean = NULL;
            CHECK_OK(rt_node_saved(bn3, 0, &sx));
            CHECK_OK(rt_node_saved(bn3, 2, &smean));
            double msum = 0.0;
            for (int64_t k = 0; k < rt_tensor_numel(smean); k++) msum += fabs(rt_tensor_f32(smean)[k]);
            printf("  stride %d, %s region: bn3 saved a %s input, |batch mean| sum %.3g\n", stride,
                   compute ? "bf16" : "storage-only", rt_dtype_str(sx->dtype), msum);
            CHECK(sx->dtype == RT_BF16); /* the conv output, or the region's centred copy */
            CHECK(compute ? msum > 0.0 : msum == 0.0);
            /* backward, node by node (the engine hands on what these
             * return): a bf16 activation's gradient is bf16 — from the
             * residual sum to bn3, from bn3 to conv3, from conv3 to bn2 —
             * and the f32 shortcut's is f32 */
            rt_node *conv3 = bn3->edges[0].node;
            rt_tensor *gy = rt_tensor_empty_like(y, RT_MEM_TEMP), *g1[2] = {0}, *g2[3] = {0}, *g3[3] = {0};
            CHECK(gy && conv3 && !strcmp(conv3->name, "conv"));
            rt_tensor_fill(gy, 0.25f);
            CHECK_OK(add->backward(add, &gy, g1));
            CHECK_OK(bn3->backward(bn3, &g1[0], g2));
            CHECK_OK(conv3->backward(conv3, &g2[0], g3));
            rt_dtype want = compute ? RT_BF16 : RT_F32, want_short = compute && stride == 2 ? RT_BF16 : RT_F32;
            printf("    gradients: of bn3's output %s, of the shortcut %s, of conv3's output %s, of conv3's "
                   "input %s\n", rt_dtype_str(g1[0]->dtype), rt_dtype_str(g1[1]->dtype),
                   rt_dtype_str(g2[0]->dtype), rt_dtype_str(g3[0]->dtype));
            CHECK(g1[0]->dtype == want && g1[1]->dtype == want_short && g2[0]->dtype == want &&
                  g3[0]->dtype == want);
            rt_tensor *gs[] = {gy, g1[0], g1[1], g2[0], g2[1], g2[2], g3[0], g3[1], g3[2]};
            for (size_t k = 0; k < sizeof gs / sizeof gs[0]; k++) rt_tensor_release(gs[k]);
            rt_tensor_release(x);
            rt_tensor_release(y);
            rt_module_destroy(blk);
        }
    }
}

/* Blocks whose interior cannot hand bf16 on run f32 inside it, and train:
 * a frozen batch norm (eval mode inside a training block, for fine-tuning:
 * its ReLU is unfused and f32 only), and widths that do not fill whole
 * channel blocks (a 4-channel interior from a blocked input is plain while
 * the shortcut stays blocked; a bf16 operand is not reordered). Each runs
 * forward and backward in a bf16 region, stride 1 and 2; before this
 * check both were refused (relu: input must be float32; add_relu: both
 * inputs in one memory order). */
static void test_block_interior_falls_back(void) {
    if (!rt_conv_bf16_available()) {
        printf("  skipped: no bf16 convolution kernel on this CPU\n");
        return;
    }
    const int64_t blk_c = rt_layout_block();
    struct {
        const char *what;
        int64_t in, planes;
        const char *frozen;
    } cases[] = {{"frozen bn1", 64, 16, "bn1"}, {"interior of 4 channels", blk_c, 4, NULL}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        for (int stride = 1; stride <= 2; stride++) {
            rt_module *blk = NULL;
            rt_tensor *x0 = NULL, *x = NULL, *y = NULL;
            bottleneck_and_input(cases[k].in, cases[k].planes, stride, 2, 41, &blk, &x0);
            if (cases[k].frozen) rt_module_train(rt_module_find(blk, cases[k].frozen), false);
            x0->requires_grad = false; /* the blocked copy below is the leaf */
            CHECK_OK(rt_to_preferred_layout(x0, &x)); /* blocked: the order the zoo's stages hand on */
            x->requires_grad = true;
            rt_status st = rt_precision_region_forward(blk, RT_BF16, true, x, &y);
            printf("  %s, stride %d: forward %s\n", cases[k].what, stride, st == RT_OK ? "ok" : rt_error_last());
            CHECK_OK(st);
            if (st == RT_OK) {
                rt_tensor *gy = rt_tensor_empty_like(y, RT_MEM_TEMP);
                CHECK(gy != NULL);
                rt_tensor_fill(gy, 0.25f);
                CHECK(y->dtype == RT_F32);
                CHECK_OK(rt_backward(y, gy, false));
                CHECK(x->grad != NULL && x->grad->dtype == RT_F32);
                rt_tensor_release(gy);
            }
            rt_tensor_release(y);
            rt_tensor_release(x);
            rt_tensor_release(x0);
            rt_module_destroy(blk);
        }
    }
}

/* A bf16 region's convolution reads bf16 operands as the region keeps
 * them: the forward reads the saved bf16 copy of x, backward-weights reads
 * it too, and both backward passes read one bf16 conversion of dy (the
 * engine does not round it first: the node's grad_dtype is f32). Each
 * result must equal, bit for bit, the kernel's on f32 operands, which
 * converts them itself: y from f32 x; dw from the rounded x and dy; dx
 * from the rounded dy. Fails when a copy is read as f32 (wrong values),
 * when dy is not rounded, or when the forward reads something else.
 * Skipped where the CPU has no bf16 convolution (the region computes f32,
 * reading f32). */
static void test_conv_reads_bf16_copies(void) {
    if (!rt_conv_bf16_available()) {
        printf("  skipped: no bf16 convolution kernel on this CPU\n");
        return;
    }
    const int64_t n = 2, c = 32, h = 8, xs[4] = {n, c, h, h}, ws[4] = {c, c, 3, 3};
    const size_t act = (size_t)(n * c * h * h), wn = (size_t)(c * c * 9);
    rt_tensor *x0 = rt_tensor_create(4, xs, RT_F32, RT_DEVICE_CPU, RT_MEM_DATA);
    rt_tensor *w = rt_tensor_create(4, ws, RT_F32, RT_DEVICE_CPU, RT_MEM_PARAM);
    rt_tensor *g = rt_tensor_create(4, xs, RT_F32, RT_DEVICE_CPU, RT_MEM_TEMP);
    float *xr = malloc(act * sizeof *xr), *gr = malloc(act * sizeof *gr), *dw_ref = malloc(wn * sizeof *dw_ref);
    float *y_ref = malloc(act * sizeof *y_ref), *dx_ref = malloc(act * sizeof *dx_ref);
    CHECK(x0 && w && g && xr && gr && dw_ref && y_ref && dx_ref);
    rt_philox_uniform(11, 0, (int64_t)act, rt_tensor_f32(x0));
    rt_philox_uniform(12, 0, (int64_t)wn, rt_tensor_f32(w));
    rt_philox_uniform(13, 0, (int64_t)act, rt_tensor_f32(g));
    x0->requires_grad = w->requires_grad = true;
    rt_precision_region r;
    CHECK_OK(rt_precision_region_begin(&r, RT_BF16, true));
    rt_tensor *a = NULL, *y = NULL, *stored = NULL;
    CHECK_OK(rt_mul_scalar(x0, 1.5f, &a)); /* an activation: the region stores it as a bf16 copy */
    rt_conv_opts o = {.padding = {1, 1}};
    CHECK_OK(rt_conv(a, w, NULL, &o, &y));
    rt_precision_region_end(&r);
    rt_node *node = (rt_node *)y->grad_fn;
    CHECK_OK(rt_node_saved_stored(node, 0, &stored));
    CHECK(stored && stored->dtype == RT_BF16); /* the copy the passes read */
    rt_tensor_release(stored);
    const rt_conv_shape *s = node->ctx;
    CHECK(s->compute_bf16 && !s->src_bf16 && s->dy_bf16 && rt_conv_computes_bf16(s)); /* dy_bf16: the forward's decision */
    CHECK(node->grad_dtype == RT_F32);
    rt_conv_shape ref = *s;
    ref.dy_bf16 = 0; /* the reference passes take f32 operands */
    CHECK_OK(rt_kernel_conv_forward(&ref, rt_tensor_f32(a), rt_tensor_f32(w), NULL, y_ref));
    memcpy(xr, rt_tensor_f32(a), act * sizeof *xr);
    memcpy(gr, rt_tensor_f32(g), act * sizeof *gr);
    CHECK_OK(rt_dtype_round(xr, RT_BF16, act));
    CHECK_OK(rt_dtype_round(gr, RT_BF16, act));
    CHECK_OK(rt_kernel_conv_backward_weights(&ref, xr, gr, dw_ref, NULL));
    CHECK_OK(rt_kernel_conv_backward_data(&ref, rt_tensor_f32(w), gr, dx_ref));
    int dy_diff = bits_differ(rt_tensor_f32(g), gr, act); /* g has bits bf16 drops: rounding matters */
    CHECK_OK(rt_backward(y, g, false));
    CHECK(w->grad != NULL && a->grad == NULL && x0->grad != NULL);
    int dy_ = bits_differ(rt_tensor_f32(y), y_ref, act);
    int dw_ = w->grad ? bits_differ(rt_tensor_f32(w->grad), dw_ref, wn) : -1;
    /* x0's gradient is 1.5 · a's, which reaches the multiplication (a node
     * of the region) rounded to bf16 */
    CHECK_OK(rt_dtype_round(dx_ref, RT_BF16, act));
    for (size_t i = 0; i < act; i++) dx_ref[i] *= 1.5f;
    int dx_ = x0->grad ? bits_differ(rt_tensor_f32(x0->grad), dx_ref, act) : -1;
    printf("  bf16 convolution against the kernel on f32 operands (elements differing): y %d of %zu, dw %d of %zu, "
           "dx %d of %zu; dy has %d elements bf16 rounds\n", dy_, act, dw_, wn, dx_, act, dy_diff);
    CHECK(dy_diff > 0);
    CHECK_EQ_INT(dy_, 0);
    CHECK_EQ_INT(dw_, 0);
    CHECK_EQ_INT(dx_, 0);
    /* the kernels refuse bf16 operands without compute_bf16, and a bf16 dy in the forward */
    rt_conv_shape bad = ref;
    bad.compute_bf16 = 0;
    bad.src_bf16 = 1;
    CHECK_EQ_INT(rt_kernel_conv_forward(&bad, xr, rt_tensor_f32(w), NULL, y_ref), RT_ERR_INVALID_ARG);
    bad = ref;
    bad.dy_bf16 = 1;
    CHECK_EQ_INT(rt_kernel_conv_forward(&bad, xr, rt_tensor_f32(w), NULL, y_ref), RT_ERR_INVALID_ARG);
    bad.compute_bf16 = 0;
    CHECK_EQ_INT(rt_kernel_conv_backward_data(&bad, rt_tensor_f32(w), gr, dx_ref), RT_ERR_INVALID_ARG);
    rt_error_clear();
    /* a Winograd-sized 3x3 shape (ResNet-50's 56x56 stage, batch 8) computes
     * in bf16 under the auto policy, in f32 Winograd only when forced */
    rt_conv_shape big = ref;
    big.n = 8, big.c_in = big.c_out = 64, big.in[0] = big.in[1] = 56;
    CHECK(rt_conv_computes_bf16(&big));
    rt_conv_algo prev = rt_conv_algo_set(RT_CONV_ALGO_WINOGRAD);
    CHECK(!rt_conv_computes_bf16(&big));
    rt_conv_algo_set(prev);
    big.compute_bf16 = 0;
    CHECK(!rt_conv_computes_bf16(&big));
    rt_tensor *all[] = {x0, w, g, a, y};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) rt_tensor_release(all[i]);
    free(xr);
    free(gr);
    free(dw_ref);
    free(y_ref);
    free(dx_ref);
}

/* The centring pass batch norm saves in a region writes bf16/f16 directly:
 * every element equals the scalar conversion of the f32 difference, in the
 * plain and the blocked order (channel = block-inner index there), with
 * runs longer than the kernel's chunk. Fails on a wrong channel's mean, a
 * missed tail or another rounding. */
static void test_bn_center_stores_half(void) {
    const int64_t n = 2, c = 2 * rt_layout_block(), sp = 37 * 41; /* sp·block > 1024: several chunks a run */
    const size_t total = (size_t)(n * c * sp);
    float *x = malloc(total * sizeof *x), *mean = malloc((size_t)c * sizeof *mean), *f = malloc(total * sizeof *f);
    uint16_t *h = malloc(total * sizeof *h);
    CHECK(x && mean && f && h);
    rt_philox_uniform(21, 0, (int64_t)total, x);
    rt_philox_uniform(22, 0, c, mean);
    int bad = 0;
    for (int blocked = 0; blocked < 2; blocked++) {
        rt_bn_shape s = {.n = n, .c = c, .spatial = sp, .eps = 1e-5f,
                         .layout = blocked ? RT_LAYOUT_BLOCKED : RT_LAYOUT_PLAIN};
        const int64_t b = blocked ? rt_layout_block() : 1;
        rt_kernel_batchnorm_center(&s, x, mean, f, RT_F32);
        for (int dt = 0; dt < 2; dt++) {
            rt_kernel_batchnorm_center(&s, x, mean, h, dt ? RT_F16 : RT_BF16);
            for (size_t i = 0; i < total; i++) {
                /* element i's channel: plain (n, c, sp); blocked (n, c/b, sp, b) */
                int64_t ch = blocked ? (int64_t)((i / (size_t)(sp * b)) % (size_t)(c / b)) * b + (int64_t)(i % (size_t)b)
                                     : (int64_t)((i / (size_t)sp) % (size_t)c);
                float d = x[i] - mean[ch];
                bad += memcmp(&f[i], &d, 4) != 0;
                bad += h[i] != (dt ? rt_f32_to_f16(d) : rt_f32_to_bf16(d));
            }
        }
    }
    printf("  batch-norm centring into f32/bf16/f16, plain and blocked: %d of %zu elements wrong\n", bad, 6 * total);
    CHECK_EQ_INT(bad, 0);
    free(x);
    free(mean);
    free(f);
    free(h);
}

/* BatchNorm's per-channel tensors for c channels as nn.BatchNorm2d starts
 * them: weight 1, bias 0, running_mean 0, running_var 1 (PARAM). */
static void bn_params(int64_t c, rt_tensor **w, rt_tensor **b, rt_tensor **rm, rt_tensor **rv) {
    *w = rt_tensor_create(1, &c, RT_F32, RT_DEVICE_CPU, RT_MEM_PARAM);
    *b = rt_tensor_zeros(1, &c, RT_F32, RT_DEVICE_CPU, RT_MEM_PARAM);
    *rm = rt_tensor_zeros(1, &c, RT_F32, RT_DEVICE_CPU, RT_MEM_PARAM);
    *rv = rt_tensor_create(1, &c, RT_F32, RT_DEVICE_CPU, RT_MEM_PARAM);
    CHECK(*w && *b && *rm && *rv);
    CHECK_OK(rt_tensor_fill(*w, 1.0f));
    CHECK_OK(rt_tensor_fill(*rv, 1.0f));
}

/* Through the op: a training batch norm in a bf16 region saves x − mean
 * as a bf16 SAVED tensor (no f32 copy), centred per channel; a copy of x
 * itself would have channel means near 100. */
static void test_bn_saves_centred_half(void) {
    const int64_t xs[4] = {2, 3, 5, 7};
    rt_tensor *xt = rt_tensor_create(4, xs, RT_F32, RT_DEVICE_CPU, RT_MEM_DATA), *wt, *bt, *rm, *rv;
    CHECK(xt);
    bn_params(3, &wt, &bt, &rm, &rv);
    rt_philox_uniform(23, 0, 210, rt_tensor_f32(xt));
    for (int i = 0; i < 210; i++) rt_tensor_f32(xt)[i] += 100.0f; /* a mean far above the spread */
    xt->requires_grad = true;
    rt_precision_region r;
    CHECK_OK(rt_precision_region_begin(&r, RT_BF16, false));
    rt_tensor *yt = NULL, *sx = NULL;
    CHECK_OK(rt_batch_norm(xt, wt, bt, rm, rv, NULL, true, 0.1f, 1e-5f, &yt));
    rt_precision_region_end(&r);
    CHECK_OK(rt_node_saved((rt_node *)yt->grad_fn, 0, &sx));
    CHECK(sx->dtype == RT_BF16 && sx->storage->category == RT_MEM_SAVED);
    double worst = 0;
    for (int ch = 0; ch < 3; ch++) {
        double sum = 0;
        for (int i = 0; i < 2; i++)
            for (int p = 0; p < 35; p++) sum += rt_bf16_to_f32(((uint16_t *)rt_tensor_data(sx))[(i * 3 + ch) * 35 + p]);
        worst = fabs(sum / 70) > worst ? fabs(sum / 70) : worst;
    }
    printf("  batch norm in a bf16 region saves bf16 x - mean: largest channel mean of it %.2e\n", worst);
    CHECK(worst < 1e-2); /* x's own mean is ~100.5 */
    rt_tensor *own[] = {xt, wt, bt, rm, rv, yt};
    for (size_t i = 0; i < sizeof own / sizeof own[0]; i++) rt_tensor_release(own[i]);
}

/* ReLU's backward from a half y reads the sign from the bits: for every
 * special value (±0, subnormals, ±Inf, NaN, the smallest and largest
 * normals) and random ones, bf16 and f16, slopes 0 and 0.25, dx equals
 * oneDNN's f32 backward on the f32 conversion of y, bit for bit, also in
 * place (dx == dy). Then through the op: a region's ReLU backward (which
 * takes this path) equals the mask of the region's copy of y. */
static void test_relu_backward_half(void) {
    enum { N = 4096 };
    static uint16_t h[N];
    static float yf[N], dy[N], dx[N], ref[N];
    rt_philox_uniform(31, 0, N, dy);
    for (int dt = 0; dt < 2; dt++) {
        const rt_dtype t = dt ? RT_F16 : RT_BF16;
        const uint16_t special[] = {0x0000, 0x8000, 0x0001, 0x8001, 0x0080, 0x0400, 0x7f7f, 0x7bff,
                                    0x7f80, 0x7c00, 0xff80, 0xfc00, 0x7fc0, 0x7e00, 0xffc1, 0x3f80};
        for (int i = 0; i < N; i++) h[i] = i < 16 ? special[i] : (uint16_t)(((uint32_t)i * 2654435761u) >> 13);
        CHECK_OK(rt_dtype_convert(h, t, yf, RT_F32, N));
        for (int k = 0; k < 2; k++) {
            const float slope = k ? 0.25f : 0.0f;
            CHECK_OK(rt_kernel_relu_backward(N, slope, yf, dy, ref));
            CHECK_OK(rt_kernel_relu_backward_half(N, slope, h, t, dy, dx, RT_F32));
            int bad = bits_differ(dx, ref, N);
            memcpy(dx, dy, sizeof dx);
            CHECK_OK(rt_kernel_relu_backward_half(N, slope, h, t, dx, dx, RT_F32));
            bad += bits_differ(dx, ref, N);
            /* rounding dy in the same pass = rounding it first */
            memcpy(dx, dy, sizeof dx);
            CHECK_OK(rt_dtype_round(dx, RT_BF16, N));
            CHECK_OK(rt_kernel_relu_backward(N, slope, yf, dx, ref));
            CHECK_OK(rt_kernel_relu_backward_half(N, slope, h, t, dy, dx, RT_BF16));
            bad += bits_differ(dx, ref, N);
            printf("  relu backward from %s y, slope %.2f: %d of %d elements differ from the f32 kernel's "
                   "(dy as is, in place, rounded to bf16)\n", dt ? "f16" : "bf16", slope, bad, 3 * N);
            CHECK_EQ_INT(bad, 0);
        }
    }
    /* through the op, in a region */
    const int64_t shape[2] = {4, 1000};
    rt_tensor *x = rt_tensor_create(2, shape, RT_F32, RT_DEVICE_CPU, RT_MEM_DATA);
    rt_tensor *g = rt_tensor_create(2, shape, RT_F32, RT_DEVICE_CPU, RT_MEM_TEMP);
    CHECK(x && g);
    rt_philox_uniform(32, 0, 4000, rt_tensor_f32(x));
    rt_philox_uniform(33, 0, 4000, rt_tensor_f32(g));
    for (int i = 0; i < 4000; i++) rt_tensor_f32(x)[i] = (rt_tensor_f32(x)[i] - 0.5f) * 1e-38f; /* near underflow */
    x->requires_grad = true;
    rt_precision_region r;
    CHECK_OK(rt_precision_region_begin(&r, RT_BF16, false));
    rt_tensor *a = NULL, *y = NULL, *stored = NULL;
    CHECK_OK(rt_mul_scalar(x, 1.0f, &a)); /* an activation the region copies */
    CHECK_OK(rt_relu(a, &y));
    rt_precision_region_end(&r);
    CHECK_OK(rt_node_saved_stored((rt_node *)y->grad_fn, 0, &stored));
    CHECK(stored && stored->dtype == RT_BF16);
    float *gr = malloc(4000 * sizeof *gr), *want = malloc(4000 * sizeof *want);
    CHECK(gr && want);
    memcpy(gr, rt_tensor_f32(g), 4000 * sizeof *gr);
    CHECK_OK(rt_dtype_round(gr, RT_BF16, 4000)); /* the region rounds the gradient arriving at relu */
    CHECK(((rt_node *)y->grad_fn)->grad_dtype == RT_F32); /* the relu rounds dy itself */
    CHECK_OK(rt_kernel_relu_backward_half(4000, 0.0f, rt_tensor_data(stored), RT_BF16, gr, want, RT_F32));
    CHECK_OK(rt_dtype_round(want, RT_BF16, 4000)); /* and again at the multiplication */
    CHECK_OK(rt_backward(y, g, false));
    int bad = x->grad ? bits_differ(rt_tensor_f32(x->grad), want, 4000) : -1, zeros = 0;
    for (int i = 0; i < 4000; i++) zeros += want[i] == 0.0f;
    printf("  relu in a bf16 region: %d of 4000 gradient elements differ from the mask of the stored copy (%d masked)\n",
           bad, zeros);
    CHECK_EQ_INT(bad, 0);
    CHECK(zeros > 1000 && zeros < 3000);
    rt_tensor *all[] = {x, g, a, y, stored};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) rt_tensor_release(all[i]);
    free(gr);
    free(want);
}

static void test_grads_resnet20(void) { check_grads("resnet20"); }
static void test_grads_revnet_small(void) { check_grads("revnet_small"); }
/* L, the convolutions that compute bf16. resnet20: stem + 18 in the blocks
 * + 2 downsampling. revnet_small: stem + the 2 downsampling BasicBlocks' 3
 * each = 7; the reversible blocks' F and G compute f32 (their forward runs
 * outside the region, their rebuild is storage-only). */
static void test_grads_resnet20_compute(void) { check_grads_compute("resnet20", 21); }
static void test_grads_revnet_small_compute(void) { check_grads_compute("revnet_small", 7); }

/* Predicted (meta) peaks of one steady-state step at batch n. */
static rt_status predict(const char *model, rt_precision p, int64_t n, rt_memstats *peaks) {
    rt_model *m = NULL;
    RT_TRY(model_at(model, p, RT_DEVICE_META, CIN, &m));
    rt_optimizer_spec spec = {.kind = RT_OPTIM_SGD, .sgd = rt_sgd_default_opts(0.1)};
    spec.sgd.momentum = 0.9;
    rt_train_config cfg = {.accum_steps = 1};
    int64_t xs[4] = {n, CIN, HW, HW};
    rt_status st = rt_memory_predict(m->net, &spec, &cfg, 4, xs, 1, &n, RT_I32, peaks);
    rt_model_destroy(m);
    return st;
}

/* seq_out: bytes of the reversible sequences' outputs, which stay f32 by
 * design (0 for a model without sequences). The target is
 * bf16 ≤ 0.55 × f32 for the whole SAVED peak; with the sequence outputs
 * kept f32 that holds for what may be halved: (bf16 − seq_out) ≤ 0.55 ×
 * (f32 − seq_out). */
static void check_saved_ratio(const char *model, int64_t seq_out) {
    rt_memstats f32, bf16, f16;
    CHECK_OK(predict(model, RT_PRECISION_FP32, 128, &f32));
    CHECK_OK(predict(model, RT_PRECISION_BF16, 128, &bf16));
    CHECK_OK(predict(model, RT_PRECISION_FP16, 128, &f16));
    double r = (double)bf16.peak[RT_MEM_SAVED] / (double)f32.peak[RT_MEM_SAVED];
    printf("  %s batch 128: SAVED peak f32 %.1f MiB, bf16 %.1f MiB (%.3f), fp16 %.1f MiB; total peak f32 %.1f MiB, "
           "bf16 %.1f MiB\n", model, f32.peak[RT_MEM_SAVED] / 1048576.0, bf16.peak[RT_MEM_SAVED] / 1048576.0, r,
           f16.peak[RT_MEM_SAVED] / 1048576.0, f32.peak_total / 1048576.0, bf16.peak_total / 1048576.0);
    double rest = (double)(bf16.peak[RT_MEM_SAVED] - seq_out) / (double)(f32.peak[RT_MEM_SAVED] - seq_out);
    if (seq_out)
        printf("  %s: reversible sequence outputs (f32 by design) %.1f MiB; the rest bf16/f32 %.3f\n", model,
               seq_out / 1048576.0, rest);
    CHECK(rest <= 0.55);
    CHECK_EQ_INT(bf16.peak[RT_MEM_SAVED], f16.peak[RT_MEM_SAVED]); /* both halves are 2 bytes */
}

static void test_saved_resnet20(void) { check_saved_ratio("resnet20", 0); }
/* RevNet-110's stages: 32 channels at 32², 64 at 16², 128 at 8², batch 128, f32. */
static void test_saved_revnet110(void) {
    check_saved_ratio("revnet110", 128 * 4 * (32 * 32 * 32 + 64 * 16 * 16 + 128 * 8 * 8));
}

/* The meta prediction of a bf16 step equals the measured peaks (second step). */
static void check_predict_equals_measured(const char *model) {
    rt_memstats base, s, pred;
    rt_memstats_get(&base);
    rt_model *m = NULL, *meta = NULL;
    CHECK_OK(model_at(model, RT_PRECISION_BF16, RT_DEVICE_CPU, CIN, &m));
    int n = rt_state_dict_num_params(m->sd);
    rt_tensor **params = calloc((size_t)n, sizeof *params);
    rt_state_dict_params(m->sd, params, n);
    rt_optimizer_spec spec = {.kind = RT_OPTIM_SGD, .sgd = rt_sgd_default_opts(0.01)};
    spec.sgd.momentum = 0.9;
    rt_optimizer *opt = rt_optimizer_create(&spec, params, n);
    free(params);
    rt_tensor *x = NULL, *y = NULL;
    rt_train_config cfg = {.accum_steps = 1};
    rt_train_result r;
    rt_status st = opt ? make_batch(16, &x, &y) : RT_ERR_OOM;
    if (st == RT_OK) st = rt_train_step(m->net, opt, &cfg, x, y, &r);
    rt_memstats_reset_peaks();
    if (st == RT_OK) st = rt_train_step(m->net, opt, &cfg, x, y, &r);
    rt_memstats_get(&s);
    int64_t xs[4] = {16, CIN, HW, HW}, ns = 16;
    if (st == RT_OK) st = model_at(model, RT_PRECISION_BF16, RT_DEVICE_META, CIN, &meta);
    if (st == RT_OK) st = rt_memory_predict(meta->net, &spec, &cfg, 4, xs, 1, &ns, RT_I32, &pred);
    if (opt) rt_optimizer_zero_grad(opt);
    rt_optimizer_destroy(opt);
    rt_tensor_release(x);
    rt_tensor_release(y);
    rt_model_destroy(meta);
    rt_model_destroy(m);
    CHECK_OK(st);
    int mism = 0;
    for (int c = 0; c < RT_MEM_NCAT; c++) {
        int64_t meas = s.peak[c] - base.live[c];
        printf("  %s bf16 %-6s measured %12lld predicted %12lld%s\n", model, rt_mem_category_str((rt_mem_category)c),
               (long long)meas, (long long)pred.peak[c], meas == pred.peak[c] ? "" : "  MISMATCH");
        mism += meas != pred.peak[c];
    }
    CHECK_EQ_INT(mism, 0);
    CHECK_EQ_INT(s.peak_total - base.live_total, pred.peak_total);
}

static void test_predict_resnet20(void) { check_predict_equals_measured("resnet20"); }
static void test_predict_revnet_small(void) { check_predict_equals_measured("revnet_small"); }

/* Which path this process is on: the probe and the start-up line. */
/* Batch norm's gradients in a bf16 storage region on a nearly constant
 * channel (mean 100, σ 0.01) next to an ordinary one: a bf16 copy of x
 * rounds at 100·2⁻⁸ ≈ 0.4 and erases that channel's deviations (saving
 * that copy, the weight's gradient came out 36% off), so batch norm saves
 * x − mean instead, whose copy keeps them to bf16's relative precision
 * (measured 5.6e-4). Bound 0.05: the centred copy (2⁻⁹) and the incoming
 * gradient's rounding (2⁻⁹) per element, with room. */
static void bn_grads(bool bf16, rt_tensor **dx, rt_tensor **dw) {
    const int64_t xs[4] = {8, 2, 4, 4};
    rt_tensor *x = rt_tensor_create(4, xs, RT_F32, RT_DEVICE_CPU, RT_MEM_DATA), *w, *b, *rm, *rv;
    CHECK(x);
    bn_params(2, &w, &b, &rm, &rv); /* the running statistics enter no gradient */
    rt_generator g = {k_seed, 0};
    float *px = rt_tensor_f32(x);
    rt_generator_normal(&g, rt_tensor_numel(x), 0.0f, 1.0f, px);
    for (int64_t n = 0; n < 8; n++)
        for (int64_t i = 0; i < 16; i++) px[n * 32 + i] = 100.0f + 0.01f * px[n * 32 + i]; /* channel 0 */
    rt_tensor_f32(w)[0] = 1.0f;
    rt_tensor_f32(w)[1] = 0.5f;
    x->requires_grad = w->requires_grad = b->requires_grad = true;
    rt_precision_region r;
    CHECK_OK(rt_precision_region_begin(&r, bf16 ? RT_BF16 : RT_F32, false));
    rt_tensor *y = NULL, *y3 = NULL, *loss = NULL;
    CHECK_OK(rt_batch_norm(x, w, b, rm, rv, NULL, true, 0.1f, 1e-5f, &y));
    rt_precision_region_end(&r);
    CHECK_OK(rt_pow_scalar(y, 3.0f, &y3));
    CHECK_OK(rt_sum(y3, &loss));
    CHECK_OK(rt_backward(loss, NULL, false));
    *dx = rt_tensor_retain(x->grad);
    *dw = rt_tensor_retain(w->grad);
    rt_tensor *all[] = {x, w, b, rm, rv, y, y3, loss};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) rt_tensor_release(all[i]);
}

/* ‖a − b‖ / ‖b‖ over channel 0 of an (8, 2, 4, 4) plain tensor. */
static double rel_err_channel0(const float *a, const float *b) {
    double num = 0, den = 0;
    for (int64_t n = 0; n < 8; n++)
        for (int64_t i = 0; i < 16; i++) {
            double d = a[n * 32 + i] - b[n * 32 + i];
            num += d * d;
            den += (double)b[n * 32 + i] * b[n * 32 + i];
        }
    return sqrt(num / den);
}

static void test_bn_near_constant_channel(void) {
    rt_tensor *dx32 = NULL, *dw32 = NULL, *dx16 = NULL, *dw16 = NULL;
    bn_grads(false, &dx32, &dw32);
    bn_grads(true, &dx16, &dw16);
    CHECK(dx32 && dw32 && dx16 && dw16);
    double ex = rel_err_channel0(rt_tensor_f32(dx16), rt_tensor_f32(dx32));
    double ew = fabs(rt_tensor_f32(dw16)[0] - rt_tensor_f32(dw32)[0]) / fabs(rt_tensor_f32(dw32)[0]);
    printf("  batch norm, channel of mean 100 and σ 0.01, bf16 storage: dx relative error %.2e, dweight %.2e "
           "(bound 0.05)\n", ex, ew);
    CHECK(ex < 0.05);
    CHECK(ew < 0.05);
    rt_tensor *all[] = {dx32, dw32, dx16, dw16};
    for (size_t i = 0; i < 4; i++) rt_tensor_release(all[i]);
}

/* A storage written over by a consuming op is a new value for the region's
 * half copies: in a bf16 region, p = a·a saves a (a bf16 copy, keyed by a's
 * storage), then y = relu(a + b) is written over a (a is consumed: the
 * region's hooks, not a node, hold what was saved), and add_relu saves y —
 * which must be copied anew, not served a's copy. Values exact in bf16:
 * a = 2x, b = −3x, d = y + p: dd/dx = −[x < 0] + 8x; a's copy would give
 * the ReLU mask [x > 0] instead. */
static void test_consumed_storage_copied_anew(void) {
    const float xs[6] = {-1.0f, -0.5f, -0.25f, 0.25f, 0.5f, 1.0f};
    int64_t n = 6;
    rt_tensor *x = rt_tensor_create(1, &n, RT_F32, RT_DEVICE_CPU, RT_MEM_DATA);
    CHECK(x);
    memcpy(rt_tensor_f32(x), xs, sizeof xs);
    x->requires_grad = true;
    rt_precision_region r;
    CHECK_OK(rt_precision_region_begin(&r, RT_BF16, false));
    rt_tensor *a = NULL, *b = NULL, *p = NULL, *y = NULL, *d = NULL, *loss = NULL;
    CHECK_OK(rt_mul_scalar(x, 2.0f, &a));
    CHECK_OK(rt_mul_scalar(x, -3.0f, &b));
    CHECK_OK(rt_mul(a, a, &p));
    const rt_storage *sa = a->storage;
    CHECK_OK(rt_add_relu_inplace(a, b, &y));
    CHECK(y->storage == sa); /* consumed: the case under test */
    rt_precision_region_end(&r);
    CHECK_OK(rt_add(y, p, &d));
    CHECK_OK(rt_sum(d, &loss));
    CHECK_OK(rt_backward(loss, NULL, false));
    for (int i = 0; i < 6; i++) {
        float v = xs[i], want = (v < 0 ? -1.0f : 0.0f) + 8.0f * v;
        CHECK_NEAR(rt_tensor_f32(x->grad)[i], want, 1e-6f);
    }
    rt_tensor *all[] = {x, a, b, p, y, d, loss};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) rt_tensor_release(all[i]);
}

static void test_describe(void) {
    char buf[512];
    for (int p = 0; p <= 2; p++) printf("  %s\n", rt_precision_describe((rt_precision)p, buf, sizeof buf));
    CHECK(strstr(rt_precision_describe(RT_PRECISION_BF16, buf, sizeof buf), "bf16 storage") != NULL);
    /* the CTest variant *_avx2 limits oneDNN to AVX2, which has no bf16 kernel */
    const char *isa = getenv("DNNL_MAX_CPU_ISA");
    if (isa && !strcmp(isa, "AVX2")) {
        CHECK(!rt_conv_bf16_available());
        CHECK(strstr(buf, "storage only") != NULL);
    } else if (rt_conv_bf16_available()) {
        CHECK(strstr(buf, "bf16 compute: conv") != NULL);
    }
}

RT_TEST_MAIN({"describe", test_describe}, {"conv_bf16_kernels", test_conv_bf16_kernels},
             {"grads_resnet20", test_grads_resnet20}, {"grads_revnet_small", test_grads_revnet_small},
             {"grads_resnet20_compute", test_grads_resnet20_compute},
             {"conv_reads_bf16_copies", test_conv_reads_bf16_copies}, {"block_interior_kernels", test_block_interior_kernels}, {"block_interior_bf16", test_block_interior_bf16}, {"block_interior_falls_back", test_block_interior_falls_back}, {"bn_center_stores_half", test_bn_center_stores_half}, {"bn_saves_centred_half", test_bn_saves_centred_half}, {"relu_backward_half", test_relu_backward_half},
             {"grads_revnet_small_compute", test_grads_revnet_small_compute}, {"saved_resnet20", test_saved_resnet20},
             {"saved_revnet110", test_saved_revnet110}, {"predict_resnet20", test_predict_resnet20},
             {"predict_revnet_small", test_predict_revnet_small},
             {"bn_near_constant_channel", test_bn_near_constant_channel},
             {"consumed_storage_copied_anew", test_consumed_storage_copied_anew})
