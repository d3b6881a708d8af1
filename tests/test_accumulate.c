/* Gradient accumulation: K micro-batches, each loss weighted by
 * rt_accum_loss_scale(n_k, N), give the full batch's gradient, also for
 * uneven splits (2+2+1). The network has no batch norm: with batch norm the
 * statistics of a micro-batch differ from the full batch's, in revtorch as in
 * PyTorch, so the gradients legitimately differ. */
#include <string.h>

#include "autograd/engine.h"
#include "nn/layers.h"
#include "optim/optim.h"
#include "rt_test.h"

typedef struct tiny_net {
    rt_state_dict *sd;
    rt_conv_layer conv;
    rt_linear_layer fc;
} tiny_net;

static rt_status tiny_forward(tiny_net *n, rt_tensor *x, rt_tensor **logits) {
    rt_tensor *h = rt_tensor_retain(x);
    RT_SEQ(h, c, rt_conv_layer_forward(&n->conv, h, &c));
    RT_SEQ(h, r, rt_relu(h, &r));
    rt_pool_opts p = {.kernel = {2, 2}};
    RT_SEQ(h, m, rt_max_pool(h, &p, &m));
    RT_SEQ(h, f, rt_flatten(h, &f));
    RT_SEQ(h, z, rt_linear_layer_forward(&n->fc, h, &z));
    *logits = h;
    return RT_OK;
}

/* Copies rows [first, first+count) of a batch tensor. */
static rt_tensor *rows(const rt_tensor *t, int64_t first, int64_t count) {
    int64_t shape[5];
    memcpy(shape, t->shape, sizeof shape);
    shape[0] = count;
    size_t row = rt_tensor_nbytes(t) / (size_t)t->shape[0];
    rt_tensor *s = rt_tensor_create(t->ndim, shape, t->dtype, RT_DEVICE_CPU, RT_MEM_DATA);
    memcpy(rt_tensor_data(s), (const char *)rt_tensor_data(t) + (size_t)first * row, (size_t)count * row);
    return s;
}

/* Accumulates gradients over micro-batches of the given sizes into .grad. */
static rt_status accumulate(tiny_net *n, rt_tensor *x, rt_tensor *y, const int64_t *sizes, int k) {
    int64_t first = 0, total = x->shape[0];
    for (int i = 0; i < k; i++) {
        rt_tensor *xs = rows(x, first, sizes[i]), *ys = rows(y, first, sizes[i]);
        rt_tensor *logits = NULL, *loss = NULL, *scaled = NULL;
        rt_status st = tiny_forward(n, xs, &logits);
        if (st == RT_OK) st = rt_cross_entropy(logits, ys, 0.1f, &loss);
        if (st == RT_OK) st = rt_mul_scalar(loss, rt_accum_loss_scale(sizes[i], total), &scaled);
        if (st == RT_OK) st = rt_backward(scaled, NULL, false);
        rt_tensor_release(xs);
        rt_tensor_release(ys);
        rt_tensor_release(logits);
        rt_tensor_release(loss);
        rt_tensor_release(scaled);
        if (st != RT_OK) return st;
        first += sizes[i];
    }
    return RT_OK;
}

static void check_split(const int64_t *sizes, int k) {
    tiny_net n = {.sd = rt_state_dict_create(RT_DEVICE_CPU, 3)};
    CHECK_OK(rt_conv_layer_init(&n.conv, n.sd, "conv", 2, 2, 4, 3, 1, 1, 1, true, RT_INIT_DEFAULT));
    CHECK_OK(rt_linear_layer_init(&n.fc, n.sd, "fc", 4 * 4 * 4, 5, true));
    int64_t total = 0;
    for (int i = 0; i < k; i++) total += sizes[i];
    int64_t xs[4] = {total, 2, 8, 8};
    rt_tensor *x = rt_tensor_create(4, xs, RT_F32, RT_DEVICE_CPU, RT_MEM_DATA);
    rt_tensor *y = rt_tensor_create(1, &total, RT_I32, RT_DEVICE_CPU, RT_MEM_DATA);
    rt_generator g = {11, 0};
    rt_generator_normal(&g, rt_tensor_numel(x), 0.0f, 1.0f, rt_tensor_f32(x));
    for (int64_t i = 0; i < total; i++) ((int32_t *)rt_tensor_data(y))[i] = (int32_t)((i * 7) % 5);

    int np = rt_state_dict_num_params(n.sd);
    rt_tensor *params[8], *full[8];
    rt_state_dict_params(n.sd, params);
    CHECK_OK(accumulate(&n, x, y, &total, 1)); /* the full batch at once */
    for (int i = 0; i < np; i++) {
        full[i] = params[i]->grad;
        params[i]->grad = NULL;
    }
    CHECK_OK(accumulate(&n, x, y, sizes, k));
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
    rt_state_dict_destroy(n.sd);
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
