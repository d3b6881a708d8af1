/* Pieces shared by the CLI subcommands: option parsing helpers, dataset
 * opening, evaluation, the memory report. */
#ifndef CLI_COMMON_H
#define CLI_COMMON_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "data/dataset.h"
#include "data/loader.h"
#include "memory/precision.h"
#include "memory/reversible.h"
#include "models/model.h"
#include "optim/optim.h"
#include "train/scaler.h"
#include "train/step.h"

/* Prints "revtorch: <what>: <library message>" to stderr and returns 1. */
int cli_fail(const char *what);

/* Parses argv[*i + 1] as the value of option argv[*i]; advances *i.
 * Returns false (message printed) when missing or malformed. */
bool cli_int(int argc, char **argv, int *i, int64_t *out);
bool cli_float(int argc, char **argv, int *i, float *out);
/* The same, also refusing values outside [lo, hi] (floats: [lo, hi), when
 * hi_open; hi = INFINITY: finite and >= lo), with a message naming the
 * option, the value, the range and `note` (NULL or what the range means,
 * "(0: all)"); integers too large for int64 get the same message. */
bool cli_int_in(int argc, char **argv, int *i, int64_t lo, int64_t hi, const char *note, int64_t *out);
bool cli_float_in(int argc, char **argv, int *i, float lo, float hi, bool hi_open, const char *note, float *out);

/* The zoo's models with reversible blocks, "revnet38, revnet110, ...". */
const char *cli_reversible_models(void);

/* False, with a usage message naming the models that have reversible
 * blocks, when `model` has none but --memory reversible (memory_reversible)
 * or --grouping (grouping_given) was asked for: those options would change
 * nothing. `cmd` names the command in the message ("train"). */
bool cli_strategy_fits_model(const char *cmd, const char *model, bool memory_reversible, bool grouping_given);

/* False, with a usage message listing the zoo, when `model` is not in it. */
bool cli_model_known(const char *cmd, const char *model);
bool cli_str(int argc, char **argv, int *i, const char **out);

/* Parses --conv-algo auto|direct|winograd (argv[*i + 1]; advances *i) and
 * sets this thread's convolution policy (rt_conv_algo_set). Prints a
 * message and returns false for an unknown name. */
bool cli_conv_algo(int argc, char **argv, int *i);
/* An option's on|off value (argv[*i + 1]; advances *i) into *out; prints
 * a message naming the option `name` and returns false on another value. */
bool cli_on_off(int argc, char **argv, int *i, const char *name, bool *out);
/* --weight-cache on|off: rt_conv_weight_cache_set (kernels/conv.h); message
 * and false on another value. */
bool cli_weight_cache(int argc, char **argv, int *i);
/* --weight-layout blocked|plain: rt_model_blocked_weights_set
 * (models/model.h); message and false on another value. */
bool cli_weight_layout(int argc, char **argv, int *i);

/* Prints the --conv-algo lines of a subcommand's --help, its description
 * starting at column `col` like the other options of that command. */
void cli_conv_algo_help(FILE *f, int col);
void cli_weight_cache_help(FILE *f, int col);
void cli_weight_layout_help(FILE *f, int col);

/* Options shared by the commands that load a model, maybe from saved
 * weights (eval, check). */
typedef struct cli_model_args {
    const char *cmd; /* "eval", "check": for messages */
    const char *weights, *model, *data;
    int64_t batch, threads;
    char recorded[64]; /* the model name read from the weight file */
} cli_model_args;

/* When argv[*i] is --weights, --model, --data, --batch-size, --threads or
 * --conv-algo, parses its value into a (advancing *i), sets *ok to whether
 * the value was valid (message printed otherwise) and returns true. */
bool cli_model_arg(int argc, char **argv, int *i, cli_model_args *a, bool *ok);

/* After parsing: checks --threads and --model (usage errors, exit code 2)
 * before reading anything, then opens --weights: a missing or unreadable
 * file, an optimizer-state file of `revtorch train --save` given in place
 * of the weights, or no --model with a file lacking the "model" metadata is
 * a runtime error (1) naming the file and the fix. Takes the model name
 * from the file when --model was not given and sets the thread count.
 * Returns 0, or the exit code with the message printed. */
int cli_model_args_finish(cli_model_args *a);

/* Checks a --threads value: 0 means all cores, 1..4×cores are allowed.
 * Prints a message and returns false otherwise. */
bool cli_threads_ok(int64_t threads);

/* Opens Fashion-MNIST train or test split from dir (NULL = the Debian
 * package's directory), optionally keeping only the first `subset` samples
 * (0 = all), which are then the only ones read and decoded. */
rt_status cli_open_dataset(const char *dir, bool train, int64_t subset, rt_dataset **out);

/* Loader options for Fashion-MNIST: normalisation, and for training shuffling
 * plus RandomCrop(28, padding=2) and horizontal flip when augment is set. */
rt_loader_options cli_loader_options(int64_t batch_size, bool train, bool augment, uint64_t seed);

/* Mean cross-entropy and accuracy (in [0,1]) of `m` in eval mode, no grad. */
rt_status cli_evaluate(rt_model *m, const rt_dataset *ds, int64_t batch_size, double *loss, double *acc);

/* The memory strategy chosen on the command line (--memory, --grouping). */
typedef struct cli_strategy {
    bool reversible;
    rt_grouping grouping;
    int k;
} cli_strategy;

/* Sets the strategy on every reversible sequence of the model (no-op for
 * models without any), and wraps its net in the --precision region
 * (cli_precision_set; once: a net already wrapped stays as it is). */
void cli_strategy_apply(const cli_strategy *s, rt_model *m);

/* --precision fp32|bf16|fp16 (memory/precision.h) for every model this
 * process builds through cli_strategy_apply: parses argv[*i + 1] like
 * cli_conv_algo (message and false on a bad value). */
bool cli_precision_arg(int argc, char **argv, int *i);
rt_precision cli_precision(void);
/* --no-loss-scale and --loss-scale-init S (init_scale 0: not given) of
 * command `cmd` against --precision (parse it first): loss scaling is
 * fp16's, so either option under bf16 or fp32, or both together, prints a
 * message naming the option and the fix and returns false (exit 2). */
bool cli_loss_scale_ok(const char *cmd, bool no_loss_scale, float init_scale);
/* The dynamic loss scaler every training command runs under --precision
 * fp16 (PyTorch's GradScaler defaults; init_scale > 0 overrides the first
 * scale), attached to cfg's hooks (train/step.h), so that the library step
 * scales, unscales, skips and backs off: *out the scaler (destroy it after
 * the run), NULL under bf16/fp32 or when `off` (--no-loss-scale). False
 * with a message when it cannot be created. */
bool cli_loss_scaler_attach(rt_train_config *cfg, float init_scale, bool off, rt_grad_scaler **out);
/* The epoch line of a loss scaler (nothing for NULL): its scale and the
 * steps it skipped this epoch and in all. */
void cli_print_loss_scale(FILE *f, const rt_grad_scaler *s, int64_t skipped_epoch);
/* Wraps m's net in the --precision region (once; nothing for fp32). False
 * when out of memory: then the net is destroyed and m->net is NULL. */
bool cli_precision_apply(rt_model *m);
/* The help line of --precision, its text starting at column col. */
void cli_precision_help(FILE *f, int col);

/* Peak bytes per category of one steady-state training step of zoo model
 * `model` (in_channels → num_classes) under `strategy`, optimizer `opt`
 * and step config `cfg` (accumulation, loss) at batch (n, in_channels, h, w)
 * with i32 labels: memory/predict.h on a meta copy of the model. */
rt_status cli_predict_memory(const char *model, int64_t in_channels, int64_t num_classes,
                                const cli_strategy *strategy, const rt_optimizer_spec *opt,
                                const rt_train_config *cfg, int64_t n, int64_t h, int64_t w, rt_memstats *peaks);

/* The same for a segmentation model (rt_model_name_is_segmentation): a
 * batch (n, in_channels, D, H, W) = size[0..2] with i32 labels
 * (n, D, H, W) and the Dice + cross-entropy loss (train/seg_loss.h) in
 * place of cfg's loss. */
rt_status cli_predict_memory_volume(const char *model, int64_t in_channels, int64_t num_classes,
                                    const cli_strategy *strategy, const rt_optimizer_spec *opt,
                                    const rt_train_config *cfg, int64_t n, const int64_t size[3], rt_memstats *peaks);

/* Parses --memory (standard|reversible) and --grouping (full|auto|K). */
bool cli_memory_mode(const char *memory, const char *grouping, cli_strategy *s);

/* The optimizer --optimizer names (sgd: momentum as given, Nesterov when
 * momentum > 0; adamw: PyTorch's defaults) with lr and weight decay.
 * Prints a message and returns false for an unknown name. */
/* Parses "S", "H,W" or "D,H,W" (1 to 3 integers in 1..10^5, comma
 * separated) into v[0..*n-1]; false for anything else. */
bool cli_parse_dims(const char *s, int64_t v[3], int *n);

bool cli_optimizer_spec(const char *name, float lr, float momentum, float weight_decay, rt_optimizer_spec *out);
/* "SGD (momentum 0.9, Nesterov)", "SGD (no momentum)" or "AdamW". */
const char *cli_optimizer_label(const rt_optimizer_spec *s);

/* An optimizer of `spec` over every trainable parameter of sd, in the state
 * dict's order (the model's parameters()). NULL with the message set when
 * memory runs out or the optimizer refuses the spec. */
rt_optimizer *cli_optimizer_for(const rt_optimizer_spec *spec, const rt_state_dict *sd);

/* The line every benchmark prints next to its numbers (project rule:
 * machines differ): "cpu: NAME; avx2 yes, fma yes, f16c yes, avx512f yes,
 * avx512_bf16 no, amx no; oneDNN isa avx512_core; 2 threads", from
 * /proc/cpuinfo ("unknown" and "no" where it cannot be read). */
void cli_print_cpu(FILE *f);

/* One line with the peak bytes per category of `s`, in MiB. */
void cli_print_peaks(FILE *f, const char *indent, const rt_memstats *s);

#endif
