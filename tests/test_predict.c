/* Memory prediction (memory/predict.h) against measurement: for a real zoo
 * model trained with the library step (train/step.h), the peak bytes of the
 * second (steady-state) step, per category and in total, minus what was
 * live before the model existed, must equal to the byte what
 * rt_memory_predict reports for a meta copy of the same model with the
 * same optimizer spec and step configuration.
 *
 * Cases: resnet20 and revnet_small (1 input channel, 10 classes, 28×28
 * images, batch 16; the library's default strategy, i.e. revnet_small's
 * reversible sequences on with FULL grouping) × {SGD momentum 0.9 Nesterov,
 * plain SGD, AdamW, SGD momentum 0.9 Nesterov with accum_steps 3}.
 * Threads: whatever the process runs with (CTest sets OMP_NUM_THREADS=2);
 * the real and the meta step run in the same process, so oneDNN picks the
 * same primitives, scratchpads and reorders for both.
 *
 * The prediction runs while the real model, its gradients, its optimizer
 * state and its batch are still live, which also checks that
 * rt_memory_predict subtracts bytes that were live before it.
 *
 * Besides equality, the optimizer's state is checked against its analytic
 * size: 2 × (AdamW), 1 × (SGD with momentum) or 0 × (plain SGD) the f32
 * bytes of the trainable parameters (buffers have no optimizer state). */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/mem.h"
#include "core/rng.h"
#include "core/tensor.h"
#include "memory/predict.h"
#include "models/model.h"
#include "nn/state_dict.h"
#include "optim/optimizer.h"
#include "train/step.h"
#include "rt_test.h"

enum { N = 16, CIN = 1, HW = 28, NCLS = 10 };
static const uint64_t k_seed = 42;

typedef enum opt_case { OPT_SGD_NESTEROV, OPT_SGD_PLAIN, OPT_ADAMW } opt_case;

static rt_optimizer_spec make_spec(opt_case c) {
    rt_optimizer_spec s = {0};
    if (c == OPT_ADAMW) {
        s.kind = RT_OPTIM_ADAMW;
        s.adamw = rt_adamw_default_opts();
    } else {
        s.kind = RT_OPTIM_SGD;
        s.sgd = rt_sgd_default_opts(0.01);
        if (c == OPT_SGD_NESTEROV) {
            s.sgd.momentum = 0.9;
            s.sgd.nesterov = true;
        }
    }
    return s;
}

/* Optimizer state in units of the trainable parameters' bytes. */
static int64_t optim_state_factor(opt_case c) { return c == OPT_ADAMW ? 2 : c == OPT_SGD_NESTEROV ? 1 : 0; }

/* x (N, 1, 28, 28) f32 in [-1, 1) and labels y (N) i32, both DATA, on the cpu. */
static rt_status make_batch(rt_tensor **x, rt_tensor **y) {
    int64_t xs[4] = {N, CIN, HW, HW}, ys[1] = {N};
    *x = rt_tensor_create(4, xs, RT_F32, RT_DEVICE_CPU, RT_MEM_DATA);
    *y = rt_tensor_create(1, ys, RT_I32, RT_DEVICE_CPU, RT_MEM_DATA);
    if (!*x || !*y) return RT_ERR_OOM;
    float *p = rt_tensor_f32(*x);
    rt_philox_uniform(7, 0, rt_tensor_numel(*x), p);
    for (int64_t i = 0; i < rt_tensor_numel(*x); i++) p[i] = 2.0f * p[i] - 1.0f;
    int32_t *t = rt_tensor_data(*y);
    for (int i = 0; i < N; i++) t[i] = (int32_t)((5 * i + 3) % NCLS);
    return RT_OK;
}

typedef struct case_result {
    rt_memstats measured;  /* peaks of the real second step minus live before the model */
    rt_memstats predicted; /* rt_memory_predict on the meta copy */
    int64_t param_bytes;   /* f32 bytes of the trainable parameters (not buffers) */
    int64_t model_bytes;   /* bytes of every tensor of the state dict (parameters and buffers) */
    double loss[2];
} case_result;

/* The real model's two steps, then the prediction on a meta copy (*meta)
 * while all of the real run is still live. */
static rt_status run_case_inner(rt_model *m, rt_model **meta, const rt_optimizer_spec *spec,
                                const rt_train_config *cfg, const rt_memstats *base, rt_optimizer **opt,
                                rt_tensor **x, rt_tensor **y, case_result *r) {
    int np = rt_state_dict_num_params(m->sd);
    rt_tensor **params = malloc((size_t)np * sizeof *params);
    if (!params) return RT_ERR_OOM;
    rt_state_dict_params(m->sd, params, np);
    *opt = rt_optimizer_create(spec, params, np);
    free(params); /* the optimizer copies the pointers */
    if (!*opt) return rt_error_last_status();
    r->param_bytes = rt_state_dict_num_param_elements(m->sd) * 4;
    for (int i = 0; i < m->sd->n; i++)
        if (m->sd->entries[i].tensor) r->model_bytes += (int64_t)rt_tensor_nbytes(m->sd->entries[i].tensor);
    RT_TRY(make_batch(x, y));
    rt_train_result tr;
    RT_TRY(rt_train_step(m->net, *opt, cfg, *x, *y, &tr));
    r->loss[0] = tr.loss;
    rt_memstats_reset_peaks();
    RT_TRY(rt_train_step(m->net, *opt, cfg, *x, *y, &tr));
    r->loss[1] = tr.loss;
    rt_memstats s;
    rt_memstats_get(&s);
    for (int c = 0; c < RT_MEM_NCAT; c++) r->measured.peak[c] = s.peak[c] - base->live[c];
    r->measured.peak_total = s.peak_total - base->live_total;
    /* the meta copy only now: its parameters are booked (PARAM) too */
    RT_TRY(rt_model_create(m->name, CIN, NCLS, RT_DEVICE_META, k_seed, meta));
    int64_t xs[4] = {N, CIN, HW, HW}, ys[1] = {N};
    return rt_memory_predict((*meta)->net, spec, cfg, 4, xs, 1, ys, RT_I32, &r->predicted);
}

static rt_status run_case(const char *model, opt_case oc, int64_t accum, case_result *r) {
    memset(r, 0, sizeof *r);
    rt_optimizer_spec spec = make_spec(oc);
    rt_train_config cfg = {.accum_steps = accum};
    rt_memstats base;
    rt_memstats_get(&base);
    rt_model *m = NULL, *meta = NULL;
    rt_optimizer *opt = NULL;
    rt_tensor *x = NULL, *y = NULL;
    rt_status st = rt_model_create(model, CIN, NCLS, RT_DEVICE_CPU, k_seed, &m);
    if (st == RT_OK) st = run_case_inner(m, &meta, &spec, &cfg, &base, &opt, &x, &y, r);
    if (opt) rt_optimizer_zero_grad(opt);
    rt_optimizer_destroy(opt);
    rt_tensor_release(x);
    rt_tensor_release(y);
    rt_model_destroy(meta);
    rt_model_destroy(m);
    return st;
}

static const rt_mem_category k_cats[] = {RT_MEM_PARAM, RT_MEM_GRAD, RT_MEM_OPTIM,
                                         RT_MEM_SAVED, RT_MEM_TEMP, RT_MEM_DATA};

static void check_case(const char *model, opt_case oc, int64_t accum) {
    rt_memstats before;
    rt_memstats_get(&before);
    case_result r;
    rt_status st = run_case(model, oc, accum, &r);
    CHECK_OK(st);
    printf("  %s, %s, accum %lld: loss %.4f then %.4f; trainable parameters %lld bytes, state dict %lld bytes\n",
           model, oc == OPT_ADAMW ? "AdamW" : oc == OPT_SGD_NESTEROV ? "SGD momentum 0.9 Nesterov" : "SGD",
           (long long)accum, r.loss[0], r.loss[1], (long long)r.param_bytes, (long long)r.model_bytes);
    printf("    %-6s %14s %14s %10s\n", "", "measured", "predicted", "diff");
    int mismatches = 0;
    for (size_t i = 0; i < sizeof k_cats / sizeof k_cats[0]; i++) {
        rt_mem_category c = k_cats[i];
        int64_t a = r.measured.peak[c], b = r.predicted.peak[c];
        printf("    %-6s %14lld %14lld %10lld%s\n", rt_mem_category_str(c), (long long)a, (long long)b,
               (long long)(b - a), a == b ? "" : "  MISMATCH");
        mismatches += a != b;
    }
    printf("    %-6s %14lld %14lld %10lld%s\n", "total", (long long)r.measured.peak_total,
           (long long)r.predicted.peak_total, (long long)(r.predicted.peak_total - r.measured.peak_total),
           r.measured.peak_total == r.predicted.peak_total ? "" : "  MISMATCH");
    fflush(stdout);
    CHECK(r.loss[0] > 0.0 && r.loss[0] < 100.0 && r.loss[1] > 0.0 && r.loss[1] < 100.0);
    /* the optimizer's state, analytically: predicted and measured */
    CHECK_EQ_INT(r.predicted.peak[RT_MEM_OPTIM], optim_state_factor(oc) * r.param_bytes);
    CHECK_EQ_INT(r.measured.peak[RT_MEM_OPTIM], optim_state_factor(oc) * r.param_bytes);
    /* the model itself (parameters and buffers), one gradient per
     * parameter element, and the batch plus the largest micro-batch copy */
    CHECK_EQ_INT(r.measured.peak[RT_MEM_PARAM], r.model_bytes);
    CHECK_EQ_INT(r.measured.peak[RT_MEM_GRAD], r.param_bytes);
    int64_t sample = CIN * HW * HW * 4 + 4, micro = accum > 1 ? (N + accum - 1) / accum : 0;
    CHECK_EQ_INT(r.measured.peak[RT_MEM_DATA], (N + micro) * sample);
    /* exact, category by category, and the peak of the total */
    CHECK_EQ_INT(r.predicted.peak[RT_MEM_PARAM], r.measured.peak[RT_MEM_PARAM]);
    CHECK_EQ_INT(r.predicted.peak[RT_MEM_GRAD], r.measured.peak[RT_MEM_GRAD]);
    CHECK_EQ_INT(r.predicted.peak[RT_MEM_OPTIM], r.measured.peak[RT_MEM_OPTIM]);
    CHECK_EQ_INT(r.predicted.peak[RT_MEM_SAVED], r.measured.peak[RT_MEM_SAVED]);
    CHECK_EQ_INT(r.predicted.peak[RT_MEM_TEMP], r.measured.peak[RT_MEM_TEMP]);
    CHECK_EQ_INT(r.predicted.peak[RT_MEM_DATA], r.measured.peak[RT_MEM_DATA]);
    CHECK_EQ_INT(r.predicted.peak_total, r.measured.peak_total);
    CHECK_EQ_INT(mismatches, 0);
    /* nothing of the case is left live */
    rt_memstats after;
    rt_memstats_get(&after);
    for (int c = 0; c < RT_MEM_NCAT; c++) CHECK_EQ_INT(after.live[c], before.live[c]);
}

/* A model on the cpu is refused (a prediction must not compute), and the
 * refusal leaves nothing live. */
static void test_cpu_model_refused(void) {
    rt_memstats before;
    rt_memstats_get(&before);
    rt_model *m = NULL;
    CHECK_OK(rt_model_create("resnet20", CIN, NCLS, RT_DEVICE_CPU, k_seed, &m));
    rt_optimizer_spec spec = make_spec(OPT_SGD_PLAIN);
    rt_train_config cfg = {.accum_steps = 1};
    int64_t xs[4] = {N, CIN, HW, HW}, ys[1] = {N};
    rt_memstats p;
    rt_status st = rt_memory_predict(m->net, &spec, &cfg, 4, xs, 1, ys, RT_I32, &p);
    rt_model_destroy(m);
    CHECK_EQ_INT(st, RT_ERR_INVALID_ARG);
    CHECK(strstr(rt_error_last(), "meta") != NULL);
    rt_memstats after;
    rt_memstats_get(&after);
    for (int c = 0; c < RT_MEM_NCAT; c++) CHECK_EQ_INT(after.live[c], before.live[c]);
}

/* The trace a prediction leaves is the steady-state step alone: it ends as
 * a training step ends, with the parameters, their gradients and the
 * momentum buffers live (3 × the parameter bytes under SGD with momentum)
 * and the batch, not after the meta optimizer's tear-down, which freed
 * gradients, momentum and batch and drew every timeline ending in a fall
 * (revtorch memory --memory-timeline). */
static void test_trace_is_the_step(void) {
    rt_model *m = NULL;
    CHECK_OK(rt_model_create("resnet20", CIN, NCLS, RT_DEVICE_META, k_seed, &m));
    rt_optimizer_spec spec = make_spec(OPT_SGD_NESTEROV);
    rt_train_config cfg = {.accum_steps = 1};
    int64_t xs[4] = {N, CIN, HW, HW}, ys[1] = {N};
    rt_memstats before, p;
    rt_memstats_get(&before);
    int64_t param_bytes = 0;
    for (int i = 0; i < m->sd->n; i++)
        if (m->sd->entries[i].kind == RT_ENTRY_PARAM) param_bytes += (int64_t)rt_tensor_nbytes(m->sd->entries[i].tensor);
    rt_mem_trace_enable(1);
    CHECK_OK(rt_memory_predict(m->net, &spec, &cfg, 4, xs, 1, ys, RT_I32, &p));
    size_t n = 0;
    const rt_mem_event *ev = rt_mem_trace_events(&n);
    CHECK(n > 0);
    int64_t batch = N * CIN * HW * HW * 4 + N * 4, end = n ? ev[n - 1].live_total - before.live_total : 0;
    printf("  %zu events; live at the end of the step %.3f MiB above the model (parameters %.3f MiB, batch %.3f MiB)\n",
           n, (double)end / 1048576.0, (double)param_bytes / 1048576.0, (double)batch / 1048576.0);
    CHECK(end >= 2 * param_bytes + batch); /* gradients and momentum, beside the model's parameters */
    rt_mem_trace_enable(0);
    rt_model_destroy(m);
}

static void test_resnet20_sgd_nesterov(void) { check_case("resnet20", OPT_SGD_NESTEROV, 1); }
static void test_resnet20_sgd_plain(void) { check_case("resnet20", OPT_SGD_PLAIN, 1); }
static void test_resnet20_adamw(void) { check_case("resnet20", OPT_ADAMW, 1); }
static void test_resnet20_sgd_nesterov_accum3(void) { check_case("resnet20", OPT_SGD_NESTEROV, 3); }
static void test_revnet_small_sgd_nesterov(void) { check_case("revnet_small", OPT_SGD_NESTEROV, 1); }
static void test_revnet_small_sgd_plain(void) { check_case("revnet_small", OPT_SGD_PLAIN, 1); }
static void test_revnet_small_adamw(void) { check_case("revnet_small", OPT_ADAMW, 1); }
static void test_revnet_small_sgd_nesterov_accum3(void) { check_case("revnet_small", OPT_SGD_NESTEROV, 3); }

RT_TEST_MAIN({"resnet20_sgd_nesterov", test_resnet20_sgd_nesterov},
             {"resnet20_sgd_plain", test_resnet20_sgd_plain},
             {"resnet20_adamw", test_resnet20_adamw},
             {"resnet20_sgd_nesterov_accum3", test_resnet20_sgd_nesterov_accum3},
             {"revnet_small_sgd_nesterov", test_revnet_small_sgd_nesterov},
             {"revnet_small_sgd_plain", test_revnet_small_sgd_plain},
             {"revnet_small_adamw", test_revnet_small_adamw},
             {"revnet_small_sgd_nesterov_accum3", test_revnet_small_sgd_nesterov_accum3},
             {"cpu_model_refused", test_cpu_model_refused}, {"trace_is_the_step", test_trace_is_the_step})
