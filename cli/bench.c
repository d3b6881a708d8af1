/* `revtorch bench`: times training steps of a model on random data, for
 * side-by-side comparison with PyTorch (bench/). Reports the median step time. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "common.h"
#include "core/rng.h"
#include "kernels/conv.h"
#include "kernels/threads.h"
#include "optim/optim.h"
#include "progress.h"

static void bench_usage(FILE *f) {
    fprintf(f, "usage: revtorch bench [options]\n"
               "Times full training steps (forward, cross-entropy, backward, SGD step) on random data.\n\n"
               "  --model NAME        (default resnet20)\n"
               "  --batch-size N      (default 128)\n"
               "  --size S            input height and width (default 28)\n"
               "  --channels C        input channels (default 1)\n"
               "  --steps N           timed steps (default 10)\n"
               "  --warmup N          untimed steps first (default 3)\n"
               "  --threads N         (default: all cores)\n");
    cli_conv_algo_help(f, 22);
    cli_precision_help(f, 22);
    fprintf(f,
               "  --memory MODE       reversible or standard, for RevNets (default reversible)\n"
               "Prints one line: model, batch, median/min step seconds, images/s, peak tracked MiB and the\n"
               "system allocations per timed step (0 once the caching allocator holds every block).\n");
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int cli_cmd_bench(int argc, char **argv) {
    const char *model = "resnet20", *memory = "reversible";
    int64_t batch = 128, size = 28, channels = 1, steps = 10, warmup = 3, threads = 0;
    for (int i = 1; i < argc; i++) {
        bool ok = true;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            bench_usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--model")) ok = cli_str(argc, argv, &i, &model);
        else if (!strcmp(argv[i], "--batch-size")) ok = cli_int(argc, argv, &i, &batch);
        else if (!strcmp(argv[i], "--size")) ok = cli_int(argc, argv, &i, &size);
        else if (!strcmp(argv[i], "--channels")) ok = cli_int(argc, argv, &i, &channels);
        else if (!strcmp(argv[i], "--steps")) ok = cli_int(argc, argv, &i, &steps);
        else if (!strcmp(argv[i], "--warmup")) ok = cli_int(argc, argv, &i, &warmup);
        else if (!strcmp(argv[i], "--conv-algo")) ok = cli_conv_algo(argc, argv, &i);
        else if (!strcmp(argv[i], "--precision")) ok = cli_precision_arg(argc, argv, &i);
        else if (!strcmp(argv[i], "--threads")) ok = cli_int(argc, argv, &i, &threads);
        else if (!strcmp(argv[i], "--memory")) ok = cli_str(argc, argv, &i, &memory);
        else {
            fprintf(stderr, "revtorch bench: unknown option '%s' (see revtorch bench --help)\n", argv[i]);
            return 2;
        }
        if (!ok) return 2;
    }
    if (steps < 1 || warmup < 0 || batch < 1 || size < 1 || channels < 1) {
        fprintf(stderr, "revtorch bench: --steps, --batch-size, --size and --channels must be >= 1, --warmup >= 0\n");
        return 2;
    }
    cli_strategy strategy;
    if (!cli_memory_mode(memory, "full", &strategy)) return 2;
    if (!cli_threads_ok(threads)) return 2;
    rt_set_num_threads((int)threads);
    rt_model *m = NULL;
    if (rt_model_create(model, channels, 10, RT_DEVICE_CPU, 0, &m) != RT_OK) return cli_fail("model");
    cli_strategy_apply(&strategy, m);
    int np = rt_state_dict_num_params(m->sd);
    rt_tensor **params = malloc((size_t)np * sizeof *params);
    rt_state_dict_params(m->sd, params, np);
    rt_sgd_opts so = rt_sgd_default_opts(0.01f);
    so.momentum = 0.9f;
    rt_optimizer *opt = rt_sgd_create(params, np, &so);
    int64_t xs[4] = {batch, channels, size, size};
    rt_tensor *x = rt_tensor_create(4, xs, RT_F32, RT_DEVICE_CPU, RT_MEM_DATA);
    rt_tensor *y = rt_tensor_create(1, &batch, RT_I32, RT_DEVICE_CPU, RT_MEM_DATA);
    double *times = malloc((size_t)steps * sizeof *times);
    int rc = 1;
    if (!opt || !x || !y || !times || !params) {
        cli_fail("setup");
        goto out;
    }
    rt_generator g = {1, 0};
    rt_generator_normal(&g, rt_tensor_numel(x), 0.0f, 1.0f, rt_tensor_f32(x));
    for (int64_t i = 0; i < batch; i++) ((int32_t *)rt_tensor_data(y))[i] = (int32_t)(i % 10);
    int64_t sys_allocs0 = 0;
    const rt_train_config cfg = {.accum_steps = 1};
    for (int64_t s = 0; s < warmup + steps; s++) {
        if (s == warmup) {
            rt_memstats_reset_peaks();
            rt_memstats ms0;
            rt_memstats_get(&ms0);
            sys_allocs0 = ms0.n_sys_alloc;
        }
        double t0 = cli_now_s();
        rt_train_result r;
        rt_status st = rt_train_step(m->net, opt, &cfg, x, y, &r);
        if (st != RT_OK) {
            cli_fail("step");
            goto out;
        }
        if (s >= warmup) times[s - warmup] = cli_now_s() - t0;
    }
    qsort(times, (size_t)steps, sizeof *times, cmp_double);
    rt_memstats ms;
    rt_memstats_get(&ms);
    double median = steps % 2 ? times[steps / 2] : 0.5 * (times[steps / 2 - 1] + times[steps / 2]);
    if (!rt_model_name_has_reversible(model)) memory = "standard";
    /* which case this measured: compute or storage-only half precision on this CPU */
    const char *pcase = cli_precision() == RT_PRECISION_FP32 ? "f32"
                        : cli_precision() == RT_PRECISION_FP16 ? "fp16-storage-only(f32-compute)"
                        : rt_conv_bf16_available() ? "bf16-compute(conv)+bf16-storage"
                                                   : "bf16-storage-only(no-bf16-kernels,f32-compute)";
    printf("revtorch model=%s memory=%s precision=%s case=%s conv_algo=%s batch=%lld size=%lld threads=%d median_step_s=%.4f "
           "min_step_s=%.4f images_per_s=%.1f peak_tracked_mib=%.1f sys_allocs_per_step=%.1f\n",
           model, memory, rt_precision_str(cli_precision()), pcase, rt_conv_algo_name(rt_conv_algo_get()), (long long)batch, (long long)size,
           rt_get_num_threads(), median, times[0],
           (double)batch / median, (double)ms.peak_total / 1048576.0,
           (double)(ms.n_sys_alloc - sys_allocs0) / (double)steps);
    rc = 0;
out:
    free(times);
    rt_tensor_release(x);
    rt_tensor_release(y);
    rt_optimizer_destroy(opt);
    free(params);
    rt_model_destroy(m);
    return rc;
}
