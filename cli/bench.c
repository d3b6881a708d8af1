/* `revtorch bench`: times training steps of a model on random data, for
 * side-by-side comparison with PyTorch (bench/). Reports the median step time. */
#include <stdlib.h>
#include <string.h>

#include "checkpointing.h"
#include "cli.h"
#include "common.h"
#include "core/rng.h"
#include "kernels/conv.h"
#include "kernels/threads.h"
#include "optim/optim.h"
#include "progress.h"
#include "train/seg_loss.h"

static void bench_usage(FILE *f) {
    fprintf(f, "usage: revtorch bench [options]\n"
               "Times full training steps (forward, loss, backward, SGD step) on random data.\n\n"
               "  --model NAME        (default resnet20)\n"
               "  --batch-size N      (default 128)\n"
               "  --size S|D,H,W      input height and width (default 28); segmentation models (unet3d,\n"
               "                      prunet3d, ...): S (a cube) or D,H,W (default 64), i32 labels per voxel\n"
               "                      and the Dice + cross-entropy loss of revtorch segment\n"
               "  --channels C        input channels (default 1; 4 for segmentation models)\n"
               "  --classes K         outputs (default 10; 4 for segmentation models)\n"
               "  --steps N           timed steps (default 10)\n"
               "  --warmup N          untimed steps first (default 3)\n"
               "  --threads N         (default: all cores)\n");
    cli_conv_algo_help(f, 22);
    cli_weight_cache_help(f, 22);
    cli_weight_layout_help(f, 22);
    cli_precision_help(f, 22);
    fprintf(f,
               "  --memory MODE       reversible or standard, for RevNets (default reversible)\n");
    cli_ckpt_help(f);
    fprintf(f,
               "Prints the CPU (cpu: model name; avx2, fma, f16c, avx512f, avx512_bf16, amx yes/no; oneDNN's\n"
               "ISA; threads), then one line: model, batch, median/min step seconds, images/s, the peak\n"
               "tracked MiB of the timed steps and the meta prediction of that peak (the plan's, with a\n"
               "checkpointing option), the checkpointing plan (plan=none without one) with its modelled\n"
               "recompute, and the system allocations per timed step (0 once the caching allocator holds every\n"
               "block).\n");
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int cli_cmd_bench(int argc, char **argv) {
    const char *model = "resnet20", *memory = "reversible", *size_arg = NULL;
    /* channels, classes 0: not given, the model kind's default (the options refuse 0) */
    int64_t batch = 128, channels = 0, classes = 0, steps = 10, warmup = 3, threads = 0;
    cli_ckpt_args ckpt = {0};
    bool memory_given = false;
    for (int i = 1; i < argc; i++) {
        bool ok = true;
        if (cli_ckpt_option(argc, argv, &i, &ckpt, &ok)) {
            if (!ok) return 2;
            continue;
        }
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            bench_usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--model")) ok = cli_str(argc, argv, &i, &model);
        else if (!strcmp(argv[i], "--batch-size")) ok = cli_int_in(argc, argv, &i, 1, 1000000, NULL, &batch);
        else if (!strcmp(argv[i], "--size")) ok = cli_str(argc, argv, &i, &size_arg);
        else if (!strcmp(argv[i], "--channels")) ok = cli_int_in(argc, argv, &i, 1, 100000, NULL, &channels);
        else if (!strcmp(argv[i], "--classes")) ok = cli_int_in(argc, argv, &i, 1, 1000000, NULL, &classes);
        else if (!strcmp(argv[i], "--steps")) ok = cli_int_in(argc, argv, &i, 1, 1000000, NULL, &steps);
        else if (!strcmp(argv[i], "--warmup")) ok = cli_int_in(argc, argv, &i, 0, 1000000, NULL, &warmup);
        else if (!strcmp(argv[i], "--conv-algo")) ok = cli_conv_algo(argc, argv, &i);
        else if (!strcmp(argv[i], "--weight-cache")) ok = cli_weight_cache(argc, argv, &i);
        else if (!strcmp(argv[i], "--weight-layout")) ok = cli_weight_layout(argc, argv, &i);
        else if (!strcmp(argv[i], "--precision")) ok = cli_precision_arg(argc, argv, &i);
        else if (!strcmp(argv[i], "--threads")) ok = cli_int(argc, argv, &i, &threads);
        else if (!strcmp(argv[i], "--memory")) ok = cli_str(argc, argv, &i, &memory), memory_given = true;
        else {
            fprintf(stderr, "revtorch bench: unknown option '%s' (see revtorch bench --help)\n", argv[i]);
            return 2;
        }
        if (!ok) return 2;
    }
    if (!cli_model_known("bench", model)) return 2;
    rt_memory_config mc;
    if (!cli_ckpt_config("bench", &ckpt, &mc) || !cli_ckpt_memory_ok("bench", &ckpt, memory_given)) return 2;
    /* segmentation models: volumes and per-voxel labels, BraTS-like defaults as revtorch memory */
    const bool seg = rt_model_name_is_segmentation(model);
    int64_t sz[3] = {seg ? 64 : 28, 0, 0};
    int nsz = 1;
    if (size_arg && (!cli_parse_dims(size_arg, sz, &nsz) || nsz == (seg ? 2 : 3))) {
        fprintf(stderr, "revtorch bench: --size '%s' is malformed; give %s, each 1..10^5\n", size_arg,
                seg ? "S (a cube) or D,H,W for a segmentation model" : "S (a square) or H,W for an image classifier");
        return 2;
    }
    const int64_t d = sz[0], h = nsz == 1 ? sz[0] : sz[nsz - 2], w = sz[nsz - 1];
    if (!channels) channels = seg ? 4 : 1;
    if (!classes) classes = seg ? 4 : 10;
    cli_strategy strategy;
    if (!cli_memory_mode(memory, "full", &strategy)) return 2;
    if (!cli_strategy_fits_model("bench", model, strategy.reversible && memory_given, false)) return 2;
    if (!cli_threads_ok(threads)) return 2;
    rt_set_num_threads((int)threads);
    rt_model *m = NULL;
    if (rt_model_create(model, channels, classes, RT_DEVICE_CPU, 0, &m) != RT_OK) return cli_fail("model");
    cli_strategy_apply(&strategy, m);
    /* the meta prediction of the same step, to print beside the measured peak */
    rt_optimizer_spec spec = {.kind = RT_OPTIM_SGD, .sgd = rt_sgd_default_opts(0.01f)};
    spec.sgd.momentum = 0.9f;
    const rt_train_config pcfg = {.accum_steps = 1};
    rt_memstats pred = {0};
    const int64_t vol[3] = {d, h, w};
    rt_status pst = seg ? cli_predict_memory_volume(model, channels, classes, &strategy, &spec, &pcfg, batch, vol, &pred)
                        : cli_predict_memory(model, channels, classes, &strategy, &spec, &pcfg, batch, h, w, &pred);
    if (pst != RT_OK) return cli_fail("memory prediction");
    /* a checkpointing option: planned on a meta copy as revtorch train plans
     * it (an impossible budget is refused here), applied, and a budget
     * enforced as the tracker's hard limit on the step's bytes */
    rt_train_config cfg = {.accum_steps = 1, .loss = seg ? rt_loss_dice_ce : NULL};
    rt_grad_scaler *scaler = NULL; /* fp16: the loss scaler train runs, timed with the step (attached below) */
    rt_memory_plan mplan = {0};
    char plan_name[48] = "none";
    /* the batch: images (N, C, H, W) and class indices (N), or volumes
     * (N, C, D, H, W) and voxel labels (N, D, H, W) */
    int64_t xs[5] = {batch, channels, d, h, w}, ys[4] = {batch, d, h, w};
    if (!seg) xs[2] = h, xs[3] = w;
    if (cli_ckpt_given(&ckpt)) {
        if (!cli_ckpt_segments_ok("bench", model, channels, classes, &strategy, mc.segments)) {
            rt_model_destroy(m);
            return 2;
        }
        if (cli_ckpt_plan_shape(model, channels, classes, &strategy, &spec, &cfg, seg ? 5 : 4, xs, seg ? 4 : 1, ys,
                                &mc, &mplan) != RT_OK) {
            fprintf(stderr, "revtorch bench: %s\n", rt_error_last());
            rt_model_destroy(m);
            return 1;
        }
        if (cli_ckpt_apply(m, &mplan.plan) != RT_OK) {
            rt_memory_plan_free(&mplan);
            rt_model_destroy(m);
            return cli_fail("cannot apply the memory plan");
        }
        pred = mplan.predicted;
        /* the segments planned (a reversible stage inside one splits it) */
        if (ckpt.segments) snprintf(plan_name, sizeof plan_name, "segments-%d", cli_ckpt_segments(&mplan.plan));
        else if (ckpt.budget) snprintf(plan_name, sizeof plan_name, "budget-%lldB", (long long)mc.budget);
        else snprintf(plan_name, sizeof plan_name, "%s", ckpt.mode ? ckpt.mode : "selective");
        rt_memstats now;
        rt_memstats_get(&now);
        if (mc.budget > 0) rt_mem_set_limit(now.live_total - now.live[RT_MEM_PARAM] + mc.budget);
    }
    if (!cli_loss_scaler_attach(&cfg, 0.0f, false, &scaler)) { /* after planning: its returns free no scaler */
        rt_mem_set_limit(0);
        rt_memory_plan_free(&mplan);
        rt_model_destroy(m);
        return 1;
    }
    int np = rt_state_dict_num_params(m->sd);
    rt_tensor **params = malloc((size_t)np * sizeof *params);
    rt_state_dict_params(m->sd, params, np);
    rt_sgd_opts so = rt_sgd_default_opts(0.01f);
    so.momentum = 0.9f;
    rt_optimizer *opt = rt_sgd_create(params, np, &so);
    rt_tensor *x = rt_tensor_create(seg ? 5 : 4, xs, RT_F32, RT_DEVICE_CPU, RT_MEM_DATA);
    rt_tensor *y = rt_tensor_create(seg ? 4 : 1, ys, RT_I32, RT_DEVICE_CPU, RT_MEM_DATA);
    double *times = malloc((size_t)steps * sizeof *times);
    int rc = 1;
    if (!opt || !x || !y || !times || !params) {
        cli_fail("setup");
        goto out;
    }
    rt_generator g = {1, 0};
    rt_generator_normal(&g, rt_tensor_numel(x), 0.0f, 1.0f, rt_tensor_f32(x));
    for (int64_t i = 0; i < rt_tensor_numel(y); i++) /* every class present, in a fixed pattern */
        ((int32_t *)rt_tensor_data(y))[i] = (int32_t)((i * 7 + i / 97) % classes);
    int64_t sys_allocs0 = 0;
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
    else if (cli_ckpt_given(&ckpt)) memory = "planned"; /* the plan says which reversible stages rebuild */
    /* which case this measured: compute or storage-only half precision on this CPU */
    const char *pcase = cli_precision() == RT_PRECISION_FP32 ? "f32"
                        : cli_precision() == RT_PRECISION_FP16 ? "fp16-storage-only(f32-compute)"
                        : rt_conv_bf16_available() ? "bf16-compute(conv)+bf16-storage"
                                                   : "bf16-storage-only(no-bf16-kernels,f32-compute)";
    char size_str[64];
    if (seg) snprintf(size_str, sizeof size_str, "%lldx%lldx%lld", (long long)d, (long long)h, (long long)w);
    else if (h == w) snprintf(size_str, sizeof size_str, "%lld", (long long)h);
    else snprintf(size_str, sizeof size_str, "%lldx%lld", (long long)h, (long long)w);
    /* the numbers depend on the CPU: its line first, the result line's format unchanged (bench/ parses it) */
    cli_print_cpu(stdout);
    printf("revtorch model=%s memory=%s precision=%s case=%s conv_algo=%s batch=%lld size=%s threads=%d median_step_s=%.4f "
           "min_step_s=%.4f images_per_s=%.1f peak_tracked_mib=%.1f predicted_peak_mib=%.1f plan=%s "
           "predicted_recompute_pct=%.1f sys_allocs_per_step=%.1f\n",
           model, memory, rt_precision_str(cli_precision()), pcase, rt_conv_algo_name(rt_conv_algo_get()), (long long)batch,
           size_str, rt_get_num_threads(), median, times[0], (double)batch / median, (double)ms.peak_total / 1048576.0,
           (double)pred.peak_total / 1048576.0, plan_name, 100.0 * mplan.recompute_fraction,
           (double)(ms.n_sys_alloc - sys_allocs0) / (double)steps);
    rc = 0;
out:
    rt_mem_set_limit(0);
    rt_memory_plan_free(&mplan);
    free(times);
    rt_tensor_release(x);
    rt_tensor_release(y);
    rt_optimizer_destroy(opt);
    rt_grad_scaler_destroy(scaler);
    free(params);
    rt_model_destroy(m);
    return rc;
}
