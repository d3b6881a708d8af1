/* A small conv net trained for a few steps on random data, printing the loss
 * and where the memory went. The shortest complete use of the library:
 * layers in a state dict, forward with ops, rt_backward, an optimizer step.
 *
 *   ./build/example_train_random
 */
#include <stdio.h>

#include "autograd/engine.h"
#include "core/rng.h"
#include "nn/layers.h"
#include "optim/optim.h"

typedef struct convnet {
    rt_state_dict *sd;
    rt_conv_layer conv1, conv2;
    rt_batchnorm_layer bn1, bn2;
    rt_linear_layer fc;
} convnet;

/* conv-bn-relu, conv(stride 2)-bn-relu, global average pool, linear. */
static rt_status convnet_forward(convnet *n, rt_tensor *x, rt_tensor **logits) {
    rt_tensor *h = rt_tensor_retain(x);
    RT_SEQ(h, a, rt_conv_layer_forward(&n->conv1, h, &a));
    RT_SEQ(h, b, rt_batchnorm_layer_forward(&n->bn1, h, true, &b));
    RT_SEQ(h, c, rt_relu(h, &c));
    RT_SEQ(h, d, rt_conv_layer_forward(&n->conv2, h, &d));
    RT_SEQ(h, e, rt_batchnorm_layer_forward(&n->bn2, h, true, &e));
    RT_SEQ(h, f, rt_relu(h, &f));
    RT_SEQ(h, g, rt_adaptive_avg_pool_1(h, &g));
    RT_SEQ(h, i, rt_flatten(h, &i));
    RT_SEQ(h, j, rt_linear_layer_forward(&n->fc, h, &j));
    *logits = h;
    return RT_OK;
}

static int fail(const char *what) {
    fprintf(stderr, "%s: %s\n", what, rt_error_last());
    return 1;
}

int main(void) {
    convnet net = {.sd = rt_state_dict_create(RT_DEVICE_CPU, 42)};
    if (!net.sd) return fail("state dict");
    if (rt_conv_layer_init(&net.conv1, net.sd, "conv1", 2, 3, 16, 3, 1, 1, 1, false, RT_INIT_KAIMING_FAN_OUT) ||
        rt_batchnorm_layer_init(&net.bn1, net.sd, "bn1", 16) ||
        rt_conv_layer_init(&net.conv2, net.sd, "conv2", 2, 16, 32, 3, 2, 1, 1, false, RT_INIT_KAIMING_FAN_OUT) ||
        rt_batchnorm_layer_init(&net.bn2, net.sd, "bn2", 32) ||
        rt_linear_layer_init(&net.fc, net.sd, "fc", 32, 10, true))
        return fail("layers");

    rt_tensor *params[16];
    int np = rt_state_dict_num_params(net.sd);
    rt_state_dict_params(net.sd, params);
    rt_sgd_opts so = rt_sgd_default_opts(0.05f);
    so.momentum = 0.9f;
    rt_optimizer *opt = rt_sgd_create(params, np, &so);

    /* a fixed random batch: 32 RGB images of 32×32, labels 0..9 */
    int64_t xshape[4] = {32, 3, 32, 32}, n = 32;
    rt_tensor *x = rt_tensor_create(4, xshape, RT_F32, RT_DEVICE_CPU, RT_MEM_DATA);
    rt_tensor *y = rt_tensor_create(1, &n, RT_I32, RT_DEVICE_CPU, RT_MEM_DATA);
    if (!opt || !x || !y) return fail("setup");
    rt_generator g = {7, 0};
    rt_generator_normal(&g, rt_tensor_numel(x), 0.0f, 1.0f, rt_tensor_f32(x));
    for (int i = 0; i < n; i++) ((int32_t *)rt_tensor_data(y))[i] = i % 10;

    for (int step = 0; step < 10; step++) {
        rt_tensor *logits = NULL, *loss = NULL;
        rt_optimizer_zero_grad(opt);
        if (convnet_forward(&net, x, &logits) || rt_cross_entropy(logits, y, 0.0f, &loss))
            return fail("forward");
        if (step == 0) {
            rt_memstats s;
            rt_memstats_get(&s);
            printf("after the first forward: %.2f MiB of activations kept for backward\n",
                   (double)s.live[RT_MEM_SAVED] / 1048576.0);
        }
        if (rt_backward(loss, NULL, false) || rt_optimizer_step(opt)) return fail("backward/step");
        printf("step %2d  loss %.4f\n", step, rt_tensor_f32(loss)[0]);
        rt_tensor_release(logits);
        rt_tensor_release(loss);
    }
    printf("\n");
    rt_memstats_print(stdout);
    rt_tensor_release(x);
    rt_tensor_release(y);
    rt_optimizer_destroy(opt);
    rt_state_dict_destroy(net.sd);
    return 0;
}
