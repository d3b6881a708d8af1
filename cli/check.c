/* `revtorch check`: how exactly a model's reversible blocks invert (RevNets on real data, the
 * partially reversible U-Nets on random volumes). */
#include <string.h>

#include "cli.h"
#include "common.h"
#include "io/weights.h"
#include "memory/reversible.h"

static void check_usage(FILE *f) {
    fprintf(f, "usage: revtorch check (--model NAME | --weights FILE) [options]\n"
               "Measures how exactly the reversible blocks of a RevNet rebuild their inputs, on the first\n"
               "batch of the Fashion-MNIST test set, in eval mode. Prints the worst block's error\n"
               "max|inverse(forward(x)) - x| / max|x|, naming the block, and the\n"
               "worst stage's drift when its input is rebuilt through the whole chain of blocks. A partially\n"
               "reversible U-Net (prunet3d, prunet3d_brats) is checked on 2 volumes of N(0, 1) voxels, 32^3,\n"
               "1 channel, 2 classes (the inversion needs inputs, not data).\n\n"
               "  --model NAME       a model with reversible blocks: %s\n"
               "                     (default: the one recorded in --weights; give one of the two)\n"
               "  --weights FILE     trained weights (default: the untrained initialisation)\n"
               "  --data DIR         Fashion-MNIST directory\n"
               "  --batch-size N     images in the batch, >= 1 (default 64)\n"
               "  --threads N        (default: all cores)\n", cli_reversible_models());
    cli_conv_algo_help(f, 21);
    cli_precision_help(f, 21);
    fprintf(f, "Under --precision bf16/fp16 the blocks are checked as training runs them: the sequences'\n"
               "couplings and stored outputs are f32, F and G compute in f32 (storing half precision only\n"
               "for backward), so the rebuild is that of fp32 (the line names the precision). Where bf16\n"
               "convolutions compute in bf16 (an AVX512_BF16 CPU), the layers before the sequences hand\n"
               "the blocks other inputs, so the figures differ from fp32's in their digits, not their size.\n");
    fprintf(f, "Exit status: 0 done, 1 runtime failure (files, data), 2 usage error (nothing was run).\n");
}

int cli_cmd_check(int argc, char **argv) {
    cli_model_args a = {.cmd = "check", .batch = 64};
    for (int i = 1; i < argc; i++) {
        bool ok = true;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            check_usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--precision")) {
            ok = cli_precision_arg(argc, argv, &i);
        } else if (!cli_model_arg(argc, argv, &i, &a, &ok)) {
            fprintf(stderr, "revtorch check: unknown option '%s' (see revtorch check --help)\n", argv[i]);
            return 2;
        }
        if (!ok) return 2;
    }
    if (!a.model && !a.weights) {
        fprintf(stderr, "revtorch check: pass --model NAME (one of %s) or --weights FILE\n",
                cli_reversible_models());
        return 2;
    }
    bool model_given = a.model != NULL;
    int code = cli_model_args_finish(&a);
    if (code) return code;
    if (!rt_model_name_has_reversible(a.model)) {
        if (model_given)
            fprintf(stderr, "revtorch check: --model %s has no reversible blocks to check; pass one of %s\n", a.model,
                    cli_reversible_models());
        else
            fprintf(stderr, "revtorch check: --weights %s holds a %s, which has no reversible blocks to check; "
                            "pass the weights of one of %s\n", a.weights, a.model, cli_reversible_models());
        return model_given ? 2 : 1;
    }
    const char *model = a.model, *weights = a.weights;
    int64_t batch = a.batch;
    rt_dataset *test = NULL;
    rt_model *m = NULL;
    rt_loader *l = NULL;
    rt_tensor *x = NULL, *y = NULL;
    int rc = 1;
    bool end;
    double block_err, chain_err;
    char worst[64] = "-";
    rt_loader_options lo = cli_loader_options(batch, false, false, 0);
    const bool volumes = rt_model_name_is_segmentation(model);
    const int64_t vol_shape[5] = {2, 1, 32, 32, 32};
    bool created = false; /* the model exists, and for volumes their batch */
    if (volumes) { /* random volumes: the inversion's error needs inputs, not data */
        if (rt_model_create(model, 1, 2, RT_DEVICE_CPU, 0, &m) != RT_OK) cli_fail("cannot create the model");
        else if (!(x = rt_tensor_create(5, vol_shape, RT_F32, RT_DEVICE_CPU, RT_MEM_DATA))) cli_fail("out of memory");
        else {
            rt_generator_normal(&(rt_generator){.seed = 1}, rt_tensor_numel(x), 0.0f, 1.0f, rt_tensor_f32(x));
            created = true;
        }
    } else if (cli_open_dataset(a.data, false, batch, &test) != RT_OK) cli_fail("cannot load the test set");
    else if (rt_model_create(model, test->channels, test->num_classes, RT_DEVICE_CPU, 0, &m) != RT_OK)
        cli_fail("cannot create the model");
    else created = true;
    if (!created) (void)0; /* reported above */
    else if (weights && rt_weights_load(m->sd, NULL, 0, weights) != RT_OK) cli_fail("cannot load the weights");
    else if (rt_state_dict_check_values(m->sd) != RT_OK) cli_fail("unusable weights");
    else if (!cli_precision_apply(m)) cli_fail("cannot set the precision");
    else if (!volumes && (rt_loader_create(test, &lo, &l) != RT_OK || rt_loader_next(l, &x, &y, &end) != RT_OK || end))
        cli_fail("cannot read a batch");
    else if (rt_reversible_reconstruction(m->net, x, &block_err, &chain_err, worst, sizeof worst) != RT_OK)
        cli_fail("check failed");
    else {
        printf("%s%s, precision %s, on %lld %s: worst block reconstruction error %.3g (relative, block %s); "
               "worst stage chain drift %.3g\n", model, weights ? "" : " (untrained)",
               rt_precision_str(cli_precision()), (long long)x->shape[0],
               volumes ? "random 32^3 volumes" : "test images", block_err, worst, chain_err);
        rc = 0;
    }
    rt_tensor_release(x);
    rt_tensor_release(y);
    rt_loader_destroy(l);
    rt_model_destroy(m);
    rt_dataset_destroy(test);
    return rc;
}
