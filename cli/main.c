/* `revtorch`: train and evaluate networks in little memory. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "core/mem.h"
#include "kernels/cache.h"

static void usage(FILE *f) {
    fprintf(f, "usage: revtorch <command> [options]\n\n"
               "commands:\n"
               "  train   train a model on Fashion-MNIST (default: revnet_small, reversible, 3 epochs)\n"
               "  eval    evaluate saved weights on the Fashion-MNIST test set\n"
               "  bench   time training steps on random data (see bench/)\n"
               "  memory  predict a training step's memory per category without running it\n"
               "  check   measure how exactly a RevNet's reversible blocks rebuild their inputs\n\n"
               "`revtorch <command> --help` lists a command's options.\n\n"
               "exit status: 0 success, 1 runtime failure (files, data, training), 2 usage error\n"
               "(a bad option or value, found before any work).\n");
}

static int run(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("revtorch 0.1.0\n");
        return 0;
    }
    if (!strcmp(argv[1], "train")) return cli_cmd_train(argc - 1, argv + 1);
    if (!strcmp(argv[1], "eval")) return cli_cmd_eval(argc - 1, argv + 1);
    if (!strcmp(argv[1], "bench")) return cli_cmd_bench(argc - 1, argv + 1);
    if (!strcmp(argv[1], "memory")) return cli_cmd_memory(argc - 1, argv + 1);
    if (!strcmp(argv[1], "check")) return cli_cmd_check(argc - 1, argv + 1);
    fprintf(stderr, "revtorch: unknown command '%s'\n\n", argv[1]);
    usage(stderr);
    return 2;
}

int main(int argc, char **argv) {
    int rc = run(argc, argv);
    rt_kernels_release_cache();
    rt_mem_release_cache();
    return rc;
}
