/* Gradient accumulation: K micro-batches, each loss weighted by
 * rt_accum_loss_scale(n_k, N), give the full batch's gradient, also for
 * uneven splits (2+2+1). The network has no batch norm: with batch norm the
 * statistics of a micro-batch differ from the full batch's, in revtorch as in
 * PyTorch, so the gradients legitimately differ. */
#include <string.h>

#include "nn/modules.h"
#include "rt_test.h"
#include "train/step.h"

/* conv(bias) - relu - maxpool 2 - flatten - linear; no batch norm. */
static rt_status tiny_fill(rt_module *net, rt_init_ctx *ctx) {
    RT_ADD_CHILD(net, "conv", rt_conv_create(ctx, 2, 2, 4, 3, 1, 1, 1, true, RT_INIT_DEFAULT, &m));
    RT_ADD_CHILD(net, "relu", rt_relu_create(&m));
    RT_ADD_CHILD(net, "pool", rt_max_pool_create(2, 2, 0, 0, &m));
    RT_ADD_CHILD(net, "flatten", rt_flatten_create(&m));
    RT_ADD_CHILD(net, "fc", rt_linear_create(ctx, 4 * 4 * 4, 5, true, &m));
    return RT_OK;
}

/* One library training step in k micro-batches with learning rate 0, so
 * the parameters stay put and their .grad holds the accumulated gradient. */
static rt_status accumulate(rt_module *net, rt_optimizer *opt, rt_tensor *x, rt_tensor *y, int64_t k) {
    const rt_train_config cfg = {.accum_steps = k, .label_smoothing = 0.1f};
    rt_train_result r;
    return rt_train_step(net, opt, &cfg, x, y, &r);
}

/* The library step splits a batch of sum(sizes) samples into k micro-batches
 * of exactly these sizes (the first b % k get one more). */
static void check_split(const int64_t *sizes, int k) {
    rt_init_ctx ctx = rt_init_ctx_make(RT_DEVICE_CPU, 3);
    rt_module *net = NULL;
    rt_state_dict *sd = NULL;
    CHECK_OK(rt_sequential_create(&net));
    CHECK_OK(tiny_fill(net, &ctx));
    CHECK_OK(rt_module_state_dict(net, &sd));
    int64_t total = 0;
    for (int i = 0; i < k; i++) total += sizes[i];
    int64_t xs[4] = {total, 2, 8, 8};
    rt_tensor *x = rt_tensor_create(4, xs, RT_F32, RT_DEVICE_CPU, RT_MEM_DATA);
    rt_tensor *y = rt_tensor_create(1, &total, RT_I32, RT_DEVICE_CPU, RT_MEM_DATA);
    rt_generator g = {11, 0};
    rt_generator_normal(&g, rt_tensor_numel(x), 0.0f, 1.0f, rt_tensor_f32(x));
    for (int64_t i = 0; i < total; i++) ((int32_t *)rt_tensor_data(y))[i] = (int32_t)((i * 7) % 5);

    int np = rt_state_dict_num_params(sd);
    rt_tensor *params[8], *full[8];
    CHECK(rt_state_dict_params(sd, params, 8) == np);
    rt_sgd_opts so = rt_sgd_default_opts(0.0);
    rt_optimizer *opt = rt_sgd_create(params, np, &so);
    CHECK(opt != NULL);
    CHECK_OK(accumulate(net, opt, x, y, 1)); /* the full batch at once */
    for (int i = 0; i < np; i++) full[i] = rt_tensor_retain(params[i]->grad);
    CHECK_OK(accumulate(net, opt, x, y, k));
    double worst = 0.0;
    for (int i = 0; i < np; i++) {
        const float *a = rt_tensor_f32(params[i]->grad), *b = rt_tensor_f32(full[i]);
        double scale = 1e-12, err = 0.0;
        for (int64_t j = 0; j < rt_tensor_numel(full[i]); j++) {
            scale = fmax(scale, fabs(b[j]));
            err = fmax(err, fabs((double)a[j] - b[j]));
        }
        worst = fmax(worst, err / scale);
        rt_tensor_release(full[i]);
    }
    printf("  split into %d micro-batches: max relative gradient error %.2e\n", k, worst);
    rt_tensor_release(x);
    rt_tensor_release(y);
    rt_optimizer_destroy(opt);
    rt_state_dict_destroy(sd);
    rt_module_destroy(net);
    CHECK(worst <= 1e-5);
}

static void test_four_equal_micro_batches(void) {
    const int64_t sizes[4] = {3, 3, 3, 3};
    check_split(sizes, 4);
}

static void test_uneven_micro_batches(void) {
    const int64_t sizes[3] = {2, 2, 1};
    check_split(sizes, 3);
}

/* Without the n_k/N weights (plain 1/K), an uneven split is wrong: the test
 * above would catch a scale function that ignored the sizes. */
static void test_scale_weights_by_size(void) {
    CHECK_NEAR(rt_accum_loss_scale(2, 5), 0.4, 1e-7);
    CHECK_NEAR(rt_accum_loss_scale(1, 5), 0.2, 1e-7);
}

RT_TEST_MAIN({"four_equal_micro_batches", test_four_equal_micro_batches},
             {"uneven_micro_batches", test_uneven_micro_batches},
             {"scale_weights_by_size", test_scale_weights_by_size})
