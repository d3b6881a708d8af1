/* Parity with PyTorch: every fixture in tests/fixtures (written by
 * tools/make_fixtures.py, see tests/fixtures/README.md) is replayed with the
 * revtorch op and the parameters from the file's metadata; the output and,
 * after rt_backward with the fixture's grad_y, every gradient (and batch
 * norm's running statistics) must match:
 *     max|a - b| / max(max|b|, 1e-6) <= 1e-4   per tensor (b = PyTorch).
 * Each comparison prints its error. convnet3 rebuilds the fixture's network
 * from nn/ modules (a Sequential whose children carry the fixture's names,
 * so the state dict has the same names), loads its parameters
 * and buffers, and checks a whole training step (loss, logits, every
 * parameter gradient, running statistics and counters).
 * The test all_fixtures_covered fails when a fixture file has no case here. */
#include <dirent.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/engine.h"
#include "autograd/node.h"
#include "core/tensor.h"
#include "io/safetensors.h"
#include "nn/module.h"
#include "nn/modules.h"
#include "nn/state_dict.h"
#include "ops/ops.h"
#include "rt_test.h"
#include "test_util.h"

#define FIXTURE_DIR RT_SOURCE_DIR "/tests/fixtures"

#include "parity_util.h"

/* ------------------------------------------------------------ cases */

static void parity_conv(const char *name) {
    rt_st_file *f = fx_open(name);
    CHECK(f);
    rt_conv_opts o = {0};
    int64_t k[2], groups, bias;
    CHECK(fx_ints(f, "kernel_size", 2, k) && fx_ints(f, "stride", 2, o.stride) &&
          fx_ints(f, "padding", 2, o.padding) && fx_ints(f, "dilation", 2, o.dilation) &&
          fx_ints(f, "groups", 1, &groups) && fx_ints(f, "bias", 1, &bias));
    o.groups = groups;
    rt_tensor *x = fx_tensor(f, "x", true), *w = fx_tensor(f, "weight", true);
    rt_tensor *b = bias ? fx_tensor(f, "bias", true) : NULL, *y = NULL;
    CHECK(x && w && (b || !bias));
    CHECK(w->shape[2] == k[0] && w->shape[3] == k[1]);
    CHECK_OK(rt_conv(x, w, b, &o, &y));
    tu_own(y);
    fx_forward_backward(f, y, "y", "grad_y");
    fx_compare_grad(f, "grad_x", x);
    fx_compare_grad(f, "grad_weight", w);
    fx_compare_grad(f, "grad_bias", b);
}

static void parity_linear(const char *name) {
    rt_st_file *f = fx_open(name);
    CHECK(f);
    int64_t bias;
    CHECK(fx_ints(f, "bias", 1, &bias));
    rt_tensor *x = fx_tensor(f, "x", true), *w = fx_tensor(f, "weight", true);
    rt_tensor *b = bias ? fx_tensor(f, "bias", true) : NULL, *y = NULL;
    CHECK(x && w && (b || !bias));
    CHECK_OK(rt_linear(x, w, b, &y));
    tu_own(y);
    fx_forward_backward(f, y, "y", "grad_y");
    fx_compare_grad(f, "grad_x", x);
    fx_compare_grad(f, "grad_weight", w);
    fx_compare_grad(f, "grad_bias", b);
}

static void parity_batch_norm(const char *name) {
    rt_st_file *f = fx_open(name);
    CHECK(f);
    int64_t training;
    CHECK(fx_ints(f, "training", 1, &training));
    float eps = (float)fx_double(f, "eps"), momentum = (float)fx_double(f, "momentum");
    CHECK(eps > 0 && momentum > 0);
    rt_tensor *x = fx_tensor(f, "x", true), *w = fx_tensor(f, "weight", true), *b = fx_tensor(f, "bias", true);
    rt_tensor *rm = fx_tensor(f, training ? "running_mean_in" : "running_mean", false);
    rt_tensor *rv = fx_tensor(f, training ? "running_var_in" : "running_var", false), *y = NULL;
    CHECK(x && w && b && rm && rv);
    int64_t tracked = 0;
    CHECK_OK(rt_batch_norm(x, w, b, rm, rv, &tracked, training, momentum, eps, &y));
    tu_own(y);
    if (training) {
        fx_compare(f, "running_mean_out", rm);
        fx_compare(f, "running_var_out", rv);
        int64_t want = fx_i64(f, "num_batches_tracked_out");
        printf("  parity %-24s num_batches_tracked %lld (PyTorch %lld)\n", name, (long long)tracked,
               (long long)want);
        CHECK_EQ_INT(tracked, want);
    } else {
        CHECK_EQ_INT(tracked, 0);
    }
    fx_forward_backward(f, y, "y", "grad_y");
    fx_compare_grad(f, "grad_x", x);
    fx_compare_grad(f, "grad_weight", w);
    fx_compare_grad(f, "grad_bias", b);
}

/* Single-input ops (fx_parity_unary): run(f, x, &y) builds y from x and the metadata. */
static rt_status run_relu(rt_st_file *f, rt_tensor *x, rt_tensor **y) { return rt_relu(x, y); }
static rt_status run_leaky_relu(rt_st_file *f, rt_tensor *x, rt_tensor **y) {
    return rt_leaky_relu(x, (float)fx_double(f, "negative_slope"), y);
}
static rt_status run_mul_scalar(rt_st_file *f, rt_tensor *x, rt_tensor **y) {
    return rt_mul_scalar(x, (float)fx_double(f, "scale"), y);
}
static rt_status run_flatten(rt_st_file *f, rt_tensor *x, rt_tensor **y) {
    int64_t start, end;
    if (!fx_ints(f, "start_dim", 1, &start) || !fx_ints(f, "end_dim", 1, &end) || start != 1 || end != -1)
        return rt_error_set(RT_ERR_INVALID_ARG, "fixture flatten is not flatten(x, 1)");
    return rt_flatten(x, y);
}
static rt_status run_adaptive(rt_st_file *f, rt_tensor *x, rt_tensor **y) {
    int64_t size[2];
    if (!fx_ints(f, "output_size", 2, size) || size[0] != 1 || size[1] != 1)
        return rt_error_set(RT_ERR_INVALID_ARG, "fixture output_size is not 1,1");
    return rt_adaptive_avg_pool_1(x, y);
}
/* Pool options from metadata; rejects ceil_mode / dilation / count_include_pad
 * values rt_max_pool and rt_avg_pool do not implement. */
static rt_status pool_opts(rt_st_file *f, bool max, rt_pool_opts *o) {
    int64_t ceil, extra[2] = {1, 1};
    *o = (rt_pool_opts){0};
    if (!fx_ints(f, "kernel_size", 2, o->kernel) || !fx_ints(f, "stride", 2, o->stride) ||
        !fx_ints(f, "padding", 2, o->padding) || !fx_ints(f, "ceil_mode", 1, &ceil) ||
        !(max ? fx_ints(f, "dilation", 2, extra) : fx_ints(f, "count_include_pad", 1, extra)) || ceil != 0 ||
        extra[0] != 1 || (max && extra[1] != 1))
        return rt_error_set(RT_ERR_INVALID_ARG, "fixture pooling options not supported");
    return RT_OK;
}
static rt_status run_max_pool(rt_st_file *f, rt_tensor *x, rt_tensor **y) {
    rt_pool_opts o;
    RT_TRY(pool_opts(f, true, &o));
    return rt_max_pool(x, &o, y);
}
static rt_status run_avg_pool(rt_st_file *f, rt_tensor *x, rt_tensor **y) {
    rt_pool_opts o;
    RT_TRY(pool_opts(f, false, &o));
    return rt_avg_pool(x, &o, y);
}

static rt_status run_sum(rt_st_file *f, rt_tensor *x, rt_tensor **y) { return rt_sum(x, y); }
static rt_status run_mean(rt_st_file *f, rt_tensor *x, rt_tensor **y) { return rt_mean(x, y); }
static rt_status run_square(rt_st_file *f, rt_tensor *x, rt_tensor **y) { return rt_square(x, y); }
static rt_status run_pow(rt_st_file *f, rt_tensor *x, rt_tensor **y) {
    return rt_pow_scalar(x, (float)fx_double(f, "exponent"), y);
}
static rt_status run_tanh(rt_st_file *f, rt_tensor *x, rt_tensor **y) { return rt_tanh(x, y); }
static rt_status run_sigmoid(rt_st_file *f, rt_tensor *x, rt_tensor **y) { return rt_sigmoid(x, y); }

static void parity_relu(const char *name) { fx_parity_unary(name, run_relu); }
static void parity_leaky_relu(const char *name) { fx_parity_unary(name, run_leaky_relu); }
static void parity_mul_scalar(const char *name) { fx_parity_unary(name, run_mul_scalar); }
static void parity_flatten(const char *name) { fx_parity_unary(name, run_flatten); }
static void parity_adaptive(const char *name) { fx_parity_unary(name, run_adaptive); }
static void parity_max_pool(const char *name) { fx_parity_unary(name, run_max_pool); }
static void parity_avg_pool(const char *name) { fx_parity_unary(name, run_avg_pool); }
static void parity_sum(const char *name) { fx_parity_unary(name, run_sum); }
static void parity_mean(const char *name) { fx_parity_unary(name, run_mean); }
static void parity_square(const char *name) { fx_parity_unary(name, run_square); }
static void parity_pow(const char *name) { fx_parity_unary(name, run_pow); }
static void parity_tanh(const char *name) { fx_parity_unary(name, run_tanh); }
static void parity_sigmoid(const char *name) { fx_parity_unary(name, run_sigmoid); }

/* x, x2 -> y (add, cat). */
static void parity_binary(const char *name, bool cat) {
    rt_st_file *f = fx_open(name);
    CHECK(f);
    rt_tensor *xs[2] = {fx_tensor(f, "x", true), fx_tensor(f, "x2", true)}, *y = NULL;
    CHECK(xs[0] && xs[1]);
    if (cat) {
        int64_t dim;
        CHECK(fx_ints(f, "dim", 1, &dim) && dim == 1);
        CHECK_OK(rt_cat_channels(2, xs, &y));
    } else {
        CHECK_OK(rt_add(xs[0], xs[1], &y));
    }
    tu_own(y);
    fx_forward_backward(f, y, "y", "grad_y");
    fx_compare_grad(f, "grad_x", xs[0]);
    fx_compare_grad(f, "grad_x2", xs[1]);
}
static void parity_add(const char *name) { parity_binary(name, false); }
static void parity_cat(const char *name) { parity_binary(name, true); }

/* split: backward of sum(y0·grad_y0) + sum(y1·grad_y1), as one backward
 * through cat(y0, y1) with grad cat(grad_y0, grad_y1). */
static void parity_split(const char *name) {
    rt_st_file *f = fx_open(name);
    CHECK(f);
    int64_t dim, sizes[2];
    CHECK(fx_ints(f, "dim", 1, &dim) && dim == 1 && fx_ints(f, "split_sizes", 2, sizes));
    rt_tensor *x = fx_tensor(f, "x", true), *ys[2] = {0}, *g[2] = {fx_tensor(f, "grad_y0", false),
                                                                  fx_tensor(f, "grad_y1", false)};
    rt_tensor *joined = NULL, *gjoined = NULL;
    CHECK(x && g[0] && g[1]);
    CHECK_OK(rt_split_channels(x, 2, sizes, ys));
    tu_own(ys[0]);
    tu_own(ys[1]);
    fx_compare(f, "y0", ys[0]);
    fx_compare(f, "y1", ys[1]);
    CHECK_OK(rt_cat_channels(2, ys, &joined));
    tu_own(joined);
    bool prev = rt_grad_set_enabled(false);
    rt_status st = rt_cat_channels(2, g, &gjoined);
    rt_grad_set_enabled(prev);
    CHECK_OK(st);
    tu_own(gjoined);
    CHECK_OK(rt_backward(joined, gjoined, false));
    fx_compare_grad(f, "grad_x", x);
}

/* Losses: y is 0-d and grad_y is 1.0. */
static void parity_loss_op(const char *name, bool ce, rt_status (*op)(rt_tensor *, rt_tensor *, rt_tensor **)) {
    rt_st_file *f = fx_open(name);
    CHECK(f);
    rt_tensor *x = fx_tensor(f, "x", true), *t = fx_tensor(f, "target", !ce), *y = NULL;
    CHECK(x && t);
    const char *red = rt_st_metadata(f, "reduction");
    CHECK(red && strcmp(red, "mean") == 0);
    if (ce) CHECK_OK(rt_cross_entropy(x, t, (float)fx_double(f, "label_smoothing"), &y));
    else CHECK_OK(op(x, t, &y));
    tu_own(y);
    fx_forward_backward(f, y, "y", "grad_y");
    fx_compare_grad(f, "grad_x", x);
    if (!ce) { /* the fixture's target needs no grad; d/dtarget = -d/dx */
        CHECK(t->grad);
        CHECK_OK(rt_mul_scalar(t->grad, -1.0f, &y));
        tu_own(y);
        fx_compare_ex(f, "grad_x", "-grad_target", y, 1e-6);
    }
}
static void parity_ce(const char *name) { parity_loss_op(name, true, NULL); }
static void parity_mse(const char *name) { parity_loss_op(name, false, rt_mse_loss); }
static void parity_l1(const char *name) { parity_loss_op(name, false, rt_l1_loss); }

/* ------------------------------------------------------------ convnet3 */

static void sd_destroy_(void *sd) { rt_state_dict_destroy(sd); }
static void module_destroy_(void *m) { rt_module_destroy(m); }

/* tools/make_fixtures.py's ConvNet3 as a Sequential (train mode):
 * h1 = bn1(conv1(x)); h2 = bn2(conv2(relu(h1))); h3 = conv3(relu(h2));
 * logits = fc(flatten(adaptive_avg_pool(relu(h3)))). The children holding
 * tensors have the fixture's names; eps and momentum are the fixture's. */
static rt_status convnet3_build(rt_module *root, float eps, float momentum) {
    rt_init_ctx ctx = rt_init_ctx_make(RT_DEVICE_CPU, 1);
    RT_ADD_CHILD(root, "conv1", rt_conv_create(&ctx, 2, 1, 4, 3, 1, 1, 1, true, RT_INIT_DEFAULT, &m));
    RT_ADD_CHILD(root, "bn1", rt_batchnorm_create(&ctx, 2, 4, false, &m));
    RT_ADD_CHILD(root, "relu1", rt_relu_create(&m));
    RT_ADD_CHILD(root, "conv2", rt_conv_create(&ctx, 2, 4, 8, 3, 2, 1, 1, true, RT_INIT_DEFAULT, &m));
    RT_ADD_CHILD(root, "bn2", rt_batchnorm_create(&ctx, 2, 8, false, &m));
    RT_ADD_CHILD(root, "relu2", rt_relu_create(&m));
    RT_ADD_CHILD(root, "conv3", rt_conv_create(&ctx, 2, 8, 8, 3, 1, 1, 1, true, RT_INIT_DEFAULT, &m));
    RT_ADD_CHILD(root, "relu3", rt_relu_create(&m));
    RT_ADD_CHILD(root, "pool", rt_adaptive_avg_pool_create(2, 1, &m));
    RT_ADD_CHILD(root, "flatten", rt_flatten_create(&m));
    RT_ADD_CHILD(root, "fc", rt_linear_create(&ctx, 8, 10, true, &m));
    RT_TRY(rt_batchnorm_configure(rt_module_find(root, "bn1"), momentum, eps));
    RT_TRY(rt_batchnorm_configure(rt_module_find(root, "bn2"), momentum, eps));
    return RT_OK;
}

static void parity_convnet3(const char *name) {
    rt_st_file *f = fx_open(name);
    CHECK(f);
    const char *loss = rt_st_metadata(f, "loss");
    CHECK(loss && strcmp(loss, "cross_entropy") == 0);
    float eps = (float)fx_double(f, "bn_eps"), momentum = (float)fx_double(f, "bn_momentum");
    CHECK(eps > 0 && momentum > 0);
    rt_module *net = NULL;
    CHECK_OK(rt_sequential_create(&net));
    tu_defer(module_destroy_, net); /* deferred before sd: freed after it, as sd's counters point into net */
    CHECK_OK(convnet3_build(net, eps, momentum));
    CHECK(net->training);
    rt_state_dict *sd = NULL;
    CHECK_OK(rt_module_state_dict(net, &sd));
    tu_defer(sd_destroy_, sd);

    /* load: parameters by name, buffers and counters from their "_in" copies */
    int n_grads = 0;
    for (size_t i = 0; i < rt_st_count(f); i++) n_grads += strncmp(rt_st_entry_at(f, i)->name, "grad.", 5) == 0;
    CHECK_EQ_INT(rt_state_dict_num_params(sd), n_grads);
    for (int i = 0; i < sd->n; i++) {
        rt_state_entry *e = &sd->entries[i];
        char src[256];
        snprintf(src, sizeof src, "%s%s", e->name, e->kind == RT_ENTRY_PARAM ? "" : "_in");
        if (e->kind == RT_ENTRY_COUNTER) {
            *e->counter = fx_i64(f, src);
            CHECK(*e->counter >= 0);
            continue;
        }
        rt_tensor *v = fx_tensor(f, src, false);
        CHECK(v);
        CHECK_OK(rt_tensor_copy(e->tensor, v));
        CHECK(rt_tensor_same_shape(e->tensor, v));
    }

    rt_tensor *x = fx_tensor(f, "x", true), *target = fx_tensor(f, "target", false), *logits = NULL, *y = NULL;
    CHECK(x && target);
    CHECK_OK(rt_module_forward(net, x, &logits));
    tu_own(logits);
    fx_compare(f, "logits", logits);
    CHECK_OK(rt_cross_entropy(logits, target, 0.0f, &y));
    tu_own(y);
    fx_forward_backward(f, y, "y", "grad_y");
    fx_compare_grad(f, "grad_x", x);
    for (int i = 0; i < sd->n; i++) {
        rt_state_entry *e = &sd->entries[i];
        char ref[256];
        if (e->kind == RT_ENTRY_PARAM) {
            snprintf(ref, sizeof ref, "grad.%s", e->name);
            /* conv1/conv2 feed a batch norm, which cancels their bias: that
             * gradient is 0 in exact arithmetic and both sides hold rounding
             * noise (~1e-8), so it is measured at the scale of the same
             * layer's weight gradient instead of its own. */
            double floor = 1e-6;
            if (!strcmp(e->name, "conv1.bias") || !strcmp(e->name, "conv2.bias")) {
                const rt_st_entry *gw = fx_entry(f, !strcmp(e->name, "conv1.bias") ? "grad.conv1.weight"
                                                                                    : "grad.conv2.weight");
                CHECK(gw);
                float *tmp = malloc(gw->nbytes);
                if (!tmp) abort();
                memcpy(tmp, gw->data, gw->nbytes);
                floor = tu_max_abs((int64_t)(gw->nbytes / 4), tmp);
                free(tmp);
            }
            fx_compare_ex(f, ref, ref, e->tensor->grad, floor);
        } else if (e->kind == RT_ENTRY_BUFFER) {
            fx_compare(f, e->name, e->tensor); /* running stats after the step */
        } else {
            int64_t want = fx_i64(f, e->name);
            printf("  parity %-24s %-22s %lld (PyTorch %lld)\n", name, e->name, (long long)*e->counter,
                   (long long)want);
            if (*e->counter != want) rt_test_failed_ = 1;
        }
    }
}

/* ------------------------------------------------------------ case table */

#define PARITY_CASES(X)                                                                  \
    X(conv2d_basic, parity_conv)                                                         \
    X(conv2d_stride_pad, parity_conv)                                                    \
    X(conv2d_dilation, parity_conv)                                                      \
    X(conv2d_groups, parity_conv)                                                        \
    X(conv2d_depthwise, parity_conv)                                                     \
    X(conv2d_rect, parity_conv)                                                          \
    X(linear, parity_linear)                                                             \
    X(linear_nobias, parity_linear)                                                      \
    X(batch_norm_train, parity_batch_norm)                                               \
    X(batch_norm_eval, parity_batch_norm)                                                \
    X(relu, parity_relu)                                                                 \
    X(leaky_relu, parity_leaky_relu)                                                     \
    X(max_pool2d_k2s2, parity_max_pool)                                                  \
    X(max_pool2d_k3s2p1, parity_max_pool)                                                \
    X(avg_pool2d_k2s2, parity_avg_pool)                                                  \
    X(avg_pool2d_k3s2p1, parity_avg_pool)                                                \
    X(adaptive_avg_pool2d_1x1, parity_adaptive)                                          \
    X(add, parity_add)                                                                   \
    X(mul_scalar, parity_mul_scalar)                                                     \
    X(cat_channels, parity_cat)                                                          \
    X(split_channels, parity_split)                                                      \
    X(flatten, parity_flatten)                                                           \
    X(cross_entropy, parity_ce)                                                          \
    X(cross_entropy_smooth, parity_ce)                                                   \
    X(mse_loss, parity_mse)                                                              \
    X(l1_loss, parity_l1)                                                                \
    X(sum, parity_sum)                                                                   \
    X(mean, parity_mean)                                                                 \
    X(square, parity_square)                                                             \
    X(pow_scalar, parity_pow)                                                            \
    X(pow_scalar_int, parity_pow)                                                        \
    X(tanh, parity_tanh)                                                                 \
    X(sigmoid, parity_sigmoid)                                                           \
    X(convnet3, parity_convnet3)

#define DEFINE_CASE(name, runner) \
    TU_TEST(test_##name) { runner(#name); }
PARITY_CASES(DEFINE_CASE)

#define CASE_NAME(name, runner) #name,
static const char *const g_case_names[] = {PARITY_CASES(CASE_NAME)};

static void all_fixtures_covered(void) {
    fx_all_covered(g_case_names, (int)(sizeof g_case_names / sizeof g_case_names[0]));
}

#define CASE_ENTRY(name, runner) {#name, test_##name},
RT_TEST_MAIN(PARITY_CASES(CASE_ENTRY){"all_fixtures_covered", all_fixtures_covered})
