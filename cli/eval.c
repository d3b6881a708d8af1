/* `revtorch eval --weights FILE`: test-set loss and accuracy of saved weights. */
#include <string.h>

#include "cli.h"
#include "common.h"
#include "io/weights.h"

static void eval_usage(FILE *f) {
    fprintf(f, "usage: revtorch eval --weights FILE [options]\n"
               "Evaluates weights saved by `revtorch train --save` on the Fashion-MNIST test set.\n\n"
               "  --weights FILE     safetensors weights (required; the file --save named, not its .optim one)\n"
               "  --model NAME       architecture (default: the one recorded in FILE)\n"
               "  --data DIR         Fashion-MNIST directory (default /usr/share/datasets/fashion-mnist)\n"
               "  --batch-size N     evaluation batch, >= 1 (default 256)\n"
               "  --threads N        (default: all cores)\n");
    cli_conv_algo_help(f, 21);
    fprintf(f,
               "  --test-subset N    only the first N test images (0: all)\n"
               "Exit status: 0 done, 1 runtime failure (files, data), 2 usage error (nothing was run).\n");
}

int cli_cmd_eval(int argc, char **argv) {
    cli_model_args a = {.cmd = "eval", .batch = 256};
    int64_t subset = 0;
    for (int i = 1; i < argc; i++) {
        bool ok = true;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            eval_usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--test-subset")) {
            ok = cli_int_in(argc, argv, &i, 0, INT64_MAX, "(0: all)", &subset);
        } else if (!cli_model_arg(argc, argv, &i, &a, &ok)) {
            fprintf(stderr, "revtorch eval: unknown option '%s' (see revtorch eval --help)\n", argv[i]);
            return 2;
        }
        if (!ok) return 2;
    }
    if (!a.weights) {
        fprintf(stderr, "revtorch eval: --weights FILE is required\n");
        return 2;
    }
    int code = cli_model_args_finish(&a);
    if (code) return code;
    const char *model = a.model, *weights = a.weights;
    rt_dataset *test = NULL;
    rt_model *m = NULL;
    int rc = 1;
    double loss, acc;
    if (cli_open_dataset(a.data, false, subset, &test) != RT_OK) cli_fail("cannot load the test set");
    else if (rt_model_create(model, test->channels, test->num_classes, RT_DEVICE_CPU, 0, &m) != RT_OK)
        cli_fail("cannot create the model");
    else if (rt_weights_load(m->sd, NULL, 0, weights) != RT_OK) cli_fail("cannot load the weights");
    else if (rt_state_dict_check_values(m->sd) != RT_OK) cli_fail("unusable weights");
    else if (cli_evaluate(m, test, a.batch, &loss, &acc) != RT_OK) cli_fail("evaluation failed");
    else {
        printf("%s on %lld test images: loss %.4f accuracy %.2f%%\n", model, (long long)test->n, loss, 100.0 * acc);
        rc = 0;
    }
    rt_model_destroy(m);
    rt_dataset_destroy(test);
    return rc;
}
