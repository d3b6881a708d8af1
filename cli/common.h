/* Pieces shared by the CLI subcommands: option parsing helpers, dataset
 * opening, evaluation, the memory report. */
#ifndef RT_CLI_COMMON_H
#define RT_CLI_COMMON_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "data/dataset.h"
#include "data/loader.h"
#include "models/model.h"

/* Prints "revtorch: <what>: <library message>" to stderr and returns 1. */
int rt_cli_fail(const char *what);

/* Parses argv[*i + 1] as the value of option argv[*i]; advances *i.
 * Returns false (message printed) when missing or malformed. */
bool rt_cli_int(int argc, char **argv, int *i, int64_t *out);
bool rt_cli_float(int argc, char **argv, int *i, float *out);
bool rt_cli_str(int argc, char **argv, int *i, const char **out);

/* Parses --conv-algo auto|direct|winograd (argv[*i + 1]; advances *i) and
 * sets this thread's convolution policy (rt_conv_algo_set). Prints a
 * message and returns false for an unknown name. */
bool rt_cli_conv_algo(int argc, char **argv, int *i);

/* Prints the --conv-algo lines of a subcommand's --help, its description
 * starting at column `col` like the other options of that command. */
void rt_cli_conv_algo_help(FILE *f, int col);

/* Options shared by the commands that load a model, maybe from saved
 * weights (eval, check). */
typedef struct rt_cli_model_args {
    const char *weights, *model, *data;
    int64_t batch, threads;
    char recorded[64]; /* the model name read from the weight file */
} rt_cli_model_args;

/* When argv[*i] is --weights, --model, --data, --batch-size, --threads or
 * --conv-algo, parses its value into a (advancing *i), sets *ok to whether
 * the value was valid (message printed otherwise) and returns true. */
bool rt_cli_model_arg(int argc, char **argv, int *i, rt_cli_model_args *a, bool *ok);

/* After parsing: takes the model name from the weight file's "model"
 * metadata when --model was not given, checks --threads and sets the thread
 * count. Returns 0, or an exit code with the message printed. */
int rt_cli_model_args_finish(rt_cli_model_args *a);

/* Checks a --threads value: 0 means all cores, 1..4×cores are allowed.
 * Prints a message and returns false otherwise. */
bool rt_cli_threads_ok(int64_t threads);

/* Opens Fashion-MNIST train or test split from dir (NULL = the Debian
 * package's directory), optionally keeping only the first `subset` samples
 * (0 = all), which are then the only ones read and decoded. */
rt_status rt_cli_open_dataset(const char *dir, bool train, int64_t subset, rt_dataset **out);

/* Loader options for Fashion-MNIST: normalisation, and for training shuffling
 * plus RandomCrop(28, padding=2) and horizontal flip when augment is set. */
rt_loader_options rt_cli_loader_options(int64_t batch_size, bool train, bool augment, uint64_t seed);

/* Samples whose arg-max logit (N, K) equals the i32 label (N). */
int64_t rt_cli_count_correct(const rt_tensor *logits, const rt_tensor *labels);

/* Mean cross-entropy and accuracy (in [0,1]) of `m` in eval mode, no grad. */
rt_status rt_cli_evaluate(rt_model *m, const rt_dataset *ds, int64_t batch_size, double *loss, double *acc);

/* Peak bytes per category of one training step (forward, cross-entropy,
 * backward, SGD-momentum step) of `model` at batch (n, c, h, w), predicted on meta tensors
 * without computing. reversible/grouping/k set the model's memory strategy.
 * Leaves the default generator and the real run's peaks as they were
 * (peaks are reset afterwards). */
rt_status rt_cli_predict_memory(const char *model, bool reversible, int grouping, int k, int64_t n, int64_t c,
                                int64_t h, int64_t w, rt_memstats *peaks);

/* Parses --memory (standard|reversible) and --grouping (full|auto|K). */
bool rt_cli_memory_mode(const char *memory, const char *grouping, bool *reversible, int *grouping_kind, int *k);

/* One line with the peak bytes per category of `s`, in MiB. */
void rt_cli_print_peaks(FILE *f, const char *indent, const rt_memstats *s);

#endif
