/* A small reversible network built from modules, RevTorch-style: a stem,
 * then a ReversibleSequence of blocks whose F and G are conv–norm–ReLU
 * stacks, trained for a few steps through the library training step, with
 * the per-category memory report of the same step run reversibly and with
 * plain backpropagation.
 *
 *   ./build/example_reversible_modules
 */
#include <revtorch.h>
#include <stdio.h>

enum { WIDTH = 32, BLOCKS = 6, BATCH = 64, SIZE = 32, CLASSES = 10 };

static int fail(const char *what) {
    fprintf(stderr, "%s: %s\n", what, rt_error_last());
    return 1;
}

/* F or G: BatchNorm2d → ReLU → Conv2d(3×3) on half the channels. */
static rt_status coupling_fn(rt_init_ctx *ctx, rt_module **out) {
    RT_TRY(rt_sequential_create(out));
    rt_module *f = *out;
    RT_ADD_CHILD(f, "0", rt_batchnorm_create(ctx, 2, WIDTH / 2, false, &m));
    RT_ADD_CHILD(f, "1", rt_relu_create(&m));
    RT_ADD_CHILD(f, "2", rt_conv_create(ctx, 2, WIDTH / 2, WIDTH / 2, 3, 1, 1, 1, false, RT_INIT_DEFAULT, &m));
    return RT_OK;
}

static rt_status build(rt_module *net, rt_init_ctx *ctx) {
    RT_ADD_CHILD(net, "stem", rt_conv_create(ctx, 2, 3, WIDTH, 3, 1, 1, 1, false, RT_INIT_DEFAULT, &m));
    rt_module *seq;
    RT_TRY(rt_rev_sequence_create(&seq));
    RT_TRY(rt_module_add_child(net, "body", seq));
    for (int i = 0; i < BLOCKS; i++) {
        rt_module *f = NULL, *g = NULL, *block;
        rt_status st = coupling_fn(ctx, &f);
        if (st == RT_OK) st = coupling_fn(ctx, &g);
        if (st != RT_OK) { /* a half-built F or G is not in the tree yet */
            rt_module_destroy(f);
            rt_module_destroy(g);
            return st;
        }
        RT_TRY(rt_rev_block_create(f, g, RT_COUPLING_ADDITIVE, &block));
        RT_TRY(rt_module_append(seq, block));
    }
    RT_ADD_CHILD(net, "pool", rt_adaptive_avg_pool_create(2, 1, &m));
    RT_ADD_CHILD(net, "flatten", rt_flatten_create(&m));
    RT_ADD_CHILD(net, "fc", rt_linear_create(ctx, WIDTH, CLASSES, true, &m));
    return RT_OK;
}

static void print_peaks(const char *label, const rt_memstats *s) {
    printf("%-26s", label);
    for (int c = 0; c < RT_MEM_NCAT; c++)
        printf(" %s %6.2f", rt_mem_category_str((rt_mem_category)c), (double)s->peak[c] / 1048576.0);
    printf(" | total %6.2f MiB\n", (double)s->peak_total / 1048576.0);
}

int main(void) {
    rt_init_ctx ctx = rt_init_ctx_make(RT_DEVICE_CPU, 1), meta_ctx = rt_init_ctx_make(RT_DEVICE_META, 1);
    rt_module *net = NULL, *meta = NULL;
    rt_state_dict *sd = NULL;
    if (rt_sequential_create(&net) || build(net, &ctx) || rt_module_state_dict(net, &sd)) return fail("build");
    if (rt_sequential_create(&meta) || build(meta, &meta_ctx)) return fail("build on meta");

    rt_tensor *params[64];
    int np = rt_state_dict_num_params(sd);
    rt_state_dict_params(sd, params, 64);
    rt_optimizer_spec spec = {.kind = RT_OPTIM_SGD, .sgd = rt_sgd_default_opts(0.05)};
    spec.sgd.momentum = 0.9;
    rt_optimizer *opt = rt_optimizer_create(&spec, params, np);
    int64_t xshape[4] = {BATCH, 3, SIZE, SIZE}, n = BATCH;
    rt_tensor *x = rt_tensor_create(4, xshape, RT_F32, RT_DEVICE_CPU, RT_MEM_DATA);
    rt_tensor *y = rt_tensor_create(1, &n, RT_I32, RT_DEVICE_CPU, RT_MEM_DATA);
    if (!opt || !x || !y) return fail("setup");
    rt_generator gen = {3, 0};
    rt_generator_normal(&gen, rt_tensor_numel(x), 0.0f, 1.0f, rt_tensor_f32(x));
    for (int i = 0; i < BATCH; i++) ((int32_t *)rt_tensor_data(y))[i] = i % CLASSES;

    /* what the step will need, reversible and plain, before it runs */
    const rt_train_config cfg = {.accum_steps = 1};
    rt_memstats rev, plain, measured;
    if (rt_memory_predict(meta, &spec, &cfg, 4, xshape, 1, &n, RT_I32, &rev)) return fail("predict");
    rt_module_set_reversible(meta, false);
    if (rt_memory_predict(meta, &spec, &cfg, 4, xshape, 1, &n, RT_I32, &plain)) return fail("predict");
    rt_module_destroy(meta); /* meta tensors are booked too: free them before measuring */

    for (int step = 0; step < 5; step++) {
        rt_train_result r;
        if (step == 1) rt_memstats_reset_peaks();
        if (rt_train_step(net, opt, &cfg, x, y, &r)) return fail("training step");
        printf("step %d  loss %.4f\n", step, r.loss);
    }
    rt_memstats_get(&measured);
    printf("\n%d reversible blocks of width %d, batch %d×3×%d×%d:\n", BLOCKS, WIDTH, BATCH, SIZE, SIZE);
    print_peaks("predicted, reversible", &rev);
    print_peaks("measured, reversible", &measured);
    print_peaks("predicted, plain backprop", &plain);
    printf("activations kept for backward: %.2f MiB reversible vs %.2f MiB plain (%.1fx less)\n",
           (double)rev.peak[RT_MEM_SAVED] / 1048576.0, (double)plain.peak[RT_MEM_SAVED] / 1048576.0,
           (double)plain.peak[RT_MEM_SAVED] / (double)rev.peak[RT_MEM_SAVED]);
    rt_tensor_release(x);
    rt_tensor_release(y);
    rt_optimizer_destroy(opt);
    rt_state_dict_destroy(sd);
    rt_module_destroy(net);
    return 0;
}
