/* A small conv net trained for a few steps on random data, printing the loss
 * and where the memory went, then saving its weights. The shortest complete
 * use of the library: modules in a Sequential, the library training step,
 * the memory report, a safetensors file PyTorch can load.
 *
 *   ./build/example_train_random [weights.safetensors]
 * against an installed revtorch (README, "Install and link"):
 *   cc train_random.c $(pkg-config --cflags --libs revtorch) -o train_random
 */
#include <revtorch.h>
#include <stdio.h>

static int fail(const char *what) {
    fprintf(stderr, "%s: %s\n", what, rt_error_last());
    return 1;
}

/* conv-bn-relu, conv(stride 2)-bn-relu, global average pool, flatten, linear. */
static rt_status convnet_fill(rt_module *net, rt_init_ctx *ctx) {
    RT_ADD_CHILD(net, "conv1", rt_conv_create(ctx, 2, 3, 16, 3, 1, 1, 1, false, RT_INIT_KAIMING_FAN_OUT, &m));
    RT_ADD_CHILD(net, "bn1", rt_batchnorm_create(ctx, 2, 16, false, &m));
    RT_ADD_CHILD(net, "relu1", rt_relu_create(&m));
    RT_ADD_CHILD(net, "conv2", rt_conv_create(ctx, 2, 16, 32, 3, 2, 1, 1, false, RT_INIT_KAIMING_FAN_OUT, &m));
    RT_ADD_CHILD(net, "bn2", rt_batchnorm_create(ctx, 2, 32, false, &m));
    RT_ADD_CHILD(net, "relu2", rt_relu_create(&m));
    RT_ADD_CHILD(net, "pool", rt_adaptive_avg_pool_create(2, 1, &m));
    RT_ADD_CHILD(net, "flatten", rt_flatten_create(&m));
    RT_ADD_CHILD(net, "fc", rt_linear_create(ctx, 32, 10, true, &m));
    return RT_OK;
}

int main(int argc, char **argv) {
    rt_init_ctx ctx = rt_init_ctx_make(RT_DEVICE_CPU, 42);
    rt_module *net = NULL;
    rt_state_dict *sd = NULL;
    if (rt_sequential_create(&net) || convnet_fill(net, &ctx) || rt_module_state_dict(net, &sd))
        return fail("modules");

    rt_tensor *params[16];
    int np = rt_state_dict_num_params(sd);
    rt_state_dict_params(sd, params, 16);
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

    const rt_train_config cfg = {.accum_steps = 1};
    for (int step = 0; step < 10; step++) {
        rt_train_result r;
        if (rt_train_step(net, opt, &cfg, x, y, &r)) return fail("training step");
        printf("step %2d  loss %.4f\n", step, r.loss);
    }
    printf("\n");
    rt_memstats_print(stdout);
    if (argc > 1) { /* the state dict, torchvision names: load_state_dict(load_file(path)) in PyTorch */
        if (rt_weights_save(sd, NULL, 0, NULL, 0, argv[1])) return fail("saving the weights");
        printf("weights saved to %s\n", argv[1]);
    }
    rt_tensor_release(x);
    rt_tensor_release(y);
    rt_optimizer_destroy(opt);
    rt_state_dict_destroy(sd);
    rt_module_destroy(net);
    return 0;
}
