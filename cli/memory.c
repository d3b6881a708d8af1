/* `revtorch memory`: predicts the memory of one training step on meta
 * tensors (nothing is computed), for a model, batch and strategy. */
#include <string.h>

#include "cli.h"
#include "common.h"
#include "kernels/threads.h"

static void memory_usage(FILE *f) {
    fprintf(f, "usage: revtorch memory [options]\n"
               "Predicts the bytes of one training step (forward, cross-entropy, backward) per category\n"
               "by running it on meta tensors, which have shapes but no data: instant, and exact.\n\n"
               "  --model NAME       (default revnet_small, as revtorch train)\n"
               "  --batch-size N     (default 128)\n"
               "  --size S           input height and width (default 28, Fashion-MNIST)\n"
               "  --channels C       input channels (default 1)\n"
               "  --memory MODE      reversible or standard (default: both, side by side)\n"
               "  --grouping G       full, auto or K (default full)\n"
               "  --optimizer sgd|adamw  as revtorch train (default sgd; its state is part of the step)\n"
               "  --momentum X       SGD momentum (default 0.9; 0: plain SGD, no state)\n"
               "  --accum-steps K    micro-batches per step, as revtorch train (default 1)\n"
               "  --classes K        outputs of the model (default 10, Fashion-MNIST)\n"
               "  --threads N        (default: all cores; oneDNN's scratchpads depend on it)\n");
    cli_conv_algo_help(f, 21);
    fprintf(f,
               "Models without reversible parts show the standard row only.\n");
}

static void print_row(const char *model, const char *mode, int64_t params, const rt_memstats *p) {
    printf("%-12s %-11s %10lld", model, mode, (long long)params);
    for (int c = 0; c < RT_MEM_NCAT; c++) printf(" %9.1f", (double)p->peak[c] / 1048576.0);
    printf(" %9.1f\n", (double)p->peak_total / 1048576.0);
}

int cli_cmd_memory(int argc, char **argv) {
    const char *model = "revnet_small", *memory = NULL, *grouping = "full";
    const char *optimizer = "sgd";
    int64_t batch = 128, size = 28, channels = 1, threads = 0, accum = 1, classes = 10;
    float momentum = 0.9f;
    for (int i = 1; i < argc; i++) {
        bool ok = true;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            memory_usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--model")) ok = cli_str(argc, argv, &i, &model);
        else if (!strcmp(argv[i], "--memory")) ok = cli_str(argc, argv, &i, &memory);
        else if (!strcmp(argv[i], "--grouping")) ok = cli_str(argc, argv, &i, &grouping);
        else if (!strcmp(argv[i], "--batch-size")) ok = cli_int(argc, argv, &i, &batch);
        else if (!strcmp(argv[i], "--size")) ok = cli_int(argc, argv, &i, &size);
        else if (!strcmp(argv[i], "--channels")) ok = cli_int(argc, argv, &i, &channels);
        else if (!strcmp(argv[i], "--threads")) ok = cli_int(argc, argv, &i, &threads);
        else if (!strcmp(argv[i], "--optimizer")) ok = cli_str(argc, argv, &i, &optimizer);
        else if (!strcmp(argv[i], "--momentum"))
            ok = cli_float_in(argc, argv, &i, 0, 1, true, "(SGD momentum; at 1 or more the steps grow without bound)",
                              &momentum);
        else if (!strcmp(argv[i], "--accum-steps")) ok = cli_int(argc, argv, &i, &accum);
        else if (!strcmp(argv[i], "--classes")) ok = cli_int(argc, argv, &i, &classes);
        else if (!strcmp(argv[i], "--conv-algo")) ok = cli_conv_algo(argc, argv, &i);
        else {
            fprintf(stderr, "revtorch memory: unknown option '%s' (see revtorch memory --help)\n", argv[i]);
            return 2;
        }
        if (!ok) return 2;
    }
    cli_strategy strategy;
    if (!cli_memory_mode(memory ? memory : "reversible", grouping, &strategy)) return 2;
    bool grouping_given = false;
    for (int i = 1; i < argc; i++) grouping_given |= !strcmp(argv[i], "--grouping");
    if (!cli_model_known("memory", model) ||
        !cli_strategy_fits_model("memory", model, memory && strategy.reversible, grouping_given))
        return 2;
    rt_optimizer_spec spec;
    if (!cli_optimizer_spec(optimizer, 0.1f, momentum, 5e-4f, &spec)) return 2;
    if (accum < 1 || accum > batch || classes < 1 || classes > 1000000) {
        fprintf(stderr, "revtorch memory: need 1 <= --accum-steps <= --batch-size and --classes in 1..10^6\n");
        return 2;
    }
    const rt_train_config cfg = {.accum_steps = accum};
    if (batch < 1 || size < 1 || channels < 1 || batch > 1000000 || size > 100000 || channels > 100000) {
        fprintf(stderr, "revtorch memory: --batch-size (1..10^6), --size and --channels (1..10^5) out of range\n");
        return 2;
    }
    if (!cli_threads_ok(threads)) return 2;
    rt_set_num_threads((int)threads);
    rt_model *m = NULL;
    if (rt_model_create(model, channels, classes, RT_DEVICE_META, 0, &m) != RT_OK) return cli_fail("model");
    int64_t params = rt_state_dict_num_param_elements(m->sd);
    rt_model_destroy(m);
    printf("one training step of %s, batch %lld×%lld×%lld×%lld in %lld micro-batch%s, %s, peak MiB per category "
           "(meta run):\n", model, (long long)batch, (long long)channels, (long long)size, (long long)size,
           (long long)accum, accum == 1 ? "" : "es", cli_optimizer_label(&spec));
    printf("%-12s %-11s %10s", "model", "memory", "params");
    for (int c = 0; c < RT_MEM_NCAT; c++) printf(" %9s", rt_mem_category_str((rt_mem_category)c));
    printf(" %9s\n", "total");
    bool has_reversible = rt_model_name_has_reversible(model);
    for (int pass = 0; pass < 2; pass++) {
        bool r = pass == 0;
        /* --memory reversible on a model without reversible parts: its
         * standard row is what a reversible run would do */
        if ((memory && has_reversible && r != strategy.reversible) || (r && !has_reversible)) continue;
        rt_memstats p;
        cli_strategy row = strategy;
        row.reversible = r;
        if (cli_predict_memory(model, channels, classes, &row, &spec, &cfg, batch, size, size, &p) != RT_OK)
            return cli_fail("prediction");
        print_row(model, r ? "reversible" : "standard", params, &p);
    }
    return 0;
}
