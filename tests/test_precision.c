/* Precision regions (memory/precision.h) on zoo models: gradients under
 * bf16 and fp16 against f32, saved-activation memory, and memory
 * prediction equal to measurement.
 *
 * Gradients: the same model (same seed), the same batch, one training step
 * at lr 0 in f32 and in a region, then per parameter the relative error
 * ‖g_half − g_f32‖ / ‖g_f32‖ (printed for every tensor). fp16 runs with the
 * GradScaler at init scale 1024 (no skip may happen: the step must apply).
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
 * by design (measured: whole SAVED peak 0.62 × f32); and the
 * prediction equals the measured peaks per category for a real bf16 step
 * of resnet20 and revnet_small (batch 16), as tests/test_predict.c does for f32. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/mem.h"
#include "core/rng.h"
#include "core/tensor.h"
#include "kernels/conv.h"
#include "memory/precision.h"
#include "memory/predict.h"
#include "models/model.h"
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

/* One step at lr 0; *grads receives a copy of every parameter's gradient
 * (np entries, f32 host arrays, NULL for a parameter without one). */
static rt_status grads_of(const char *name, rt_precision p, rt_tensor *x, rt_tensor *y, int *np, float ***grads,
                          int64_t **sizes, char ***names) {
    rt_model *m = NULL;
    RT_TRY(model_at(name, p, RT_DEVICE_CPU, CIN, &m));
    int n = rt_state_dict_num_params(m->sd);
    rt_tensor **params = calloc((size_t)n, sizeof *params);
    rt_state_dict_params(m->sd, params, n);
    rt_sgd_opts o = rt_sgd_default_opts(0.0);
    rt_optimizer *opt = rt_sgd_create(params, n, &o);
    rt_grad_scaler_opts so = rt_grad_scaler_default_opts();
    so.init_scale = 1024.0f;
    rt_grad_scaler *s = p == RT_PRECISION_FP16 ? rt_grad_scaler_create(&so) : NULL;
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

static void check_grads(const char *model) {
    rt_tensor *x = NULL, *y = NULL;
    CHECK_OK(make_batch(16, &x, &y));
    int n0 = 0;
    float **g0 = NULL;
    int64_t *sz0 = NULL;
    char **nm0 = NULL;
    rt_status st = grads_of(model, RT_PRECISION_FP32, x, y, &n0, &g0, &sz0, &nm0);
    int fails = 0;
    for (int pi = 1; st == RT_OK && pi <= 2; pi++) {
        rt_precision p = (rt_precision)pi;
        double u = p == RT_PRECISION_BF16 ? ldexp(1.0, -9) : ldexp(1.0, -12), bound = 32.0 * u, worst = 0.0;
        const char *worst_name = "";
        int n = 0;
        float **g = NULL;
        int64_t *sz = NULL;
        char **nm = NULL;
        st = grads_of(model, p, x, y, &n, &g, &sz, &nm);
        if (st == RT_OK && n != n0) st = rt_error_set(RT_ERR_STATE, "parameter counts differ");
        printf("  %s %s: relative error per parameter gradient (bound %.4f = 32·2^-%d)\n", model,
               rt_precision_str(p), bound, p == RT_PRECISION_BF16 ? 9 : 12);
        for (int i = 0; st == RT_OK && i < n; i++) {
            if (!g0[i] || !g[i]) {
                fails += (!g0[i]) != (!g[i]);
                continue;
            }
            double d = 0.0, a = 0.0;
            for (int64_t j = 0; j < sz[i]; j++) {
                double e = (double)g[i][j] - (double)g0[i][j];
                d += e * e;
                a += (double)g0[i][j] * g0[i][j];
            }
            double rel = a > 0 ? sqrt(d / a) : sqrt(d);
            printf("    %-36s %.3e%s\n", nm[i], rel, rel <= bound ? "" : "  OVER");
            if (!(rel <= bound)) fails++;
            if (rel > worst) {
                worst = rel;
                worst_name = nm[i];
            }
        }
        printf("  %s %s: largest %.3e (%s)\n", model, rt_precision_str(p), worst, worst_name);
        fflush(stdout);
        free_grads(n, g, sz, nm);
    }
    free_grads(n0, g0, sz0, nm0);
    rt_tensor_release(x);
    rt_tensor_release(y);
    CHECK_OK(st);
    CHECK_EQ_INT(fails, 0);
}

static void test_grads_resnet20(void) { check_grads("resnet20"); }
static void test_grads_revnet_small(void) { check_grads("revnet_small"); }

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
static void test_describe(void) {
    char buf[512];
    for (int p = 0; p <= 2; p++) printf("  %s\n", rt_precision_describe((rt_precision)p, buf, sizeof buf));
    CHECK(strstr(rt_precision_describe(RT_PRECISION_BF16, buf, sizeof buf), "bf16 storage") != NULL);
    /* the CTest variant *_avx2 limits oneDNN to AVX2, which has no bf16 kernel */
    const char *isa = getenv("DNNL_MAX_CPU_ISA");
    if (isa && !strcmp(isa, "AVX2")) {
        CHECK(!rt_conv_bf16_available());
        CHECK(strstr(buf, "storage only") != NULL);
    }
}

RT_TEST_MAIN({"describe", test_describe}, {"grads_resnet20", test_grads_resnet20},
             {"grads_revnet_small", test_grads_revnet_small}, {"saved_resnet20", test_saved_resnet20},
             {"saved_revnet110", test_saved_revnet110}, {"predict_resnet20", test_predict_resnet20},
             {"predict_revnet_small", test_predict_revnet_small})
