/* `revtorch`: train and evaluate networks in little memory. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
               "  check   measure how exactly a RevNet's reversible blocks rebuild their inputs\n"
               "  inspect show what a NIfTI, IDX or safetensors file holds, as revtorch reads it\n"
               "  segment train, predict or evaluate 3-D segmentation of a NIfTI volume (brain extraction)\n"
               "  superres train or evaluate x2 super-resolution of MRI slices (EDSR, reversible EDSR)\n"
               "  video   train or evaluate next-frame prediction on Moving Fashion-MNIST (ConvLSTM, BPTT\n"
               "          with checkpointed time steps)\n\n"
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
    if (!strcmp(argv[1], "inspect")) return cli_cmd_inspect(argc - 1, argv + 1);
    if (!strcmp(argv[1], "segment")) return cli_cmd_segment(argc - 1, argv + 1);
    if (!strcmp(argv[1], "superres")) return cli_cmd_superres(argc - 1, argv + 1);
    if (!strcmp(argv[1], "video")) return cli_cmd_video(argc - 1, argv + 1);
    fprintf(stderr, "revtorch: unknown command '%s'\n\n", argv[1]);
    usage(stderr);
    return 2;
}

/* Between parallel regions libgomp's idle threads spin (GOMP_SPINCOUNT,
 * 300000 polls by default) before they sleep. When other processes compete
 * for the cores, a spinning thread holds a core that the thread it waits for
 * needs: training steps became many times slower than with --threads 1
 * (bench/threads_under_load.sh: resnet20 5.46 s/step against 0.98 s with a
 * spin of 10000 and 1.32 s passive, two competing processes). Sleeping at
 * once (OMP_WAIT_POLICY=passive) costs 7-18% on an idle machine (resnet20
 * 0.124 against 0.105 s/step); a short spin of 10000 polls costs nothing
 * there (0.103 s) and does not collapse under load, so it is the default.
 * libgomp reads the variable when it is loaded, before main, so setenv alone
 * is too late for this process: unless the user set OMP_WAIT_POLICY or
 * GOMP_SPINCOUNT, set the short spin and execute this program again, once
 * (the variable is set then). If the exec fails, run on with libgomp's
 * default. */
static void cli_prefer_short_spin(char **argv) {
    if (getenv("OMP_WAIT_POLICY") || getenv("GOMP_SPINCOUNT")) return;
    if (setenv("GOMP_SPINCOUNT", "10000", 1) != 0) return;
    execv("/proc/self/exe", argv);
}

int main(int argc, char **argv) {
    cli_prefer_short_spin(argv);
    /* Past a file-size limit (ulimit -f) a write would kill the process with
     * SIGXFSZ and no word; ignored, the write fails with EFBIG and the
     * command reports which output was lost and exits 1. */
    signal(SIGXFSZ, SIG_IGN);
    /* The same for a closed pipe (`revtorch train ... | head`): printing
     * fails quietly and the run still saves and releases its locks. */
    signal(SIGPIPE, SIG_IGN);
    int rc = run(argc, argv);
    rt_kernels_release_cache();
    rt_mem_release_cache();
    return rc;
}
