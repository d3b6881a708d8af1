/* `revtorch train`: trains a model on Fashion-MNIST with SGD or AdamW,
 * gradient accumulation, a cosine/step schedule, saved training state and resume. */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "train_state.h"
#include "cli.h"
#include "common.h"
#include "dist.h"
#include "kernels/threads.h"
#include "optim/optim.h"
#include "train/scaler.h"
#include "outputs.h"
#include "plot.h"
#include "progress.h"
#include "checkpointing.h"

typedef struct train_opts {
    const char *model, *data, *save, *resume, *log, *optimizer, *schedule, *memory, *grouping, *trace;
    int64_t epochs, batch_size, accum_steps, threads, seed, train_subset, test_subset, warmup_steps;
    int64_t stop_after; /* --stop-after-epoch; 0: run to --epochs */
    int64_t batch_asked; /* --batch-size when larger than the training set (then batch_size is the set's size) */
    int64_t warmup_asked; /* --warmup-steps when not shorter than the run (then scaled to 10% of it) */
    float lr, weight_decay, momentum, clip, label_smoothing;
    bool augment;
    cli_ckpt_args ckpt; /* --memory-mode, --memory-budget, --checkpoint-segments, --recompute */
    /* data parallelism (cli/dist.h): --distributed, --shard-optimizer, --bucket-mb, --dist-timeout */
    bool distributed, shard_optimizer, sync_bn;
    float bucket_mb, dist_timeout;
    bool no_loss_scale; /* --no-loss-scale: fp16 without the GradScaler */
    float loss_scale_init; /* --loss-scale-init: GradScaler(init_scale=...), 65536 */
} train_opts;

/* The zoo's image classifiers, comma-separated: what train accepts (the
 * segmentation models train with revtorch segment train). */
static const char *train_model_names(char *buf, size_t n) {
    int count = 0;
    const rt_zoo_entry *z = rt_zoo_entries(&count);
    buf[0] = '\0';
    for (int i = 0; i < count; i++)
        if (!z[i].segmentation) {
            size_t used = strlen(buf);
            snprintf(buf + used, n - used, "%s%s", used ? ", " : "", z[i].name);
        }
    return buf;
}

static void train_usage(FILE *f) {
    char models[512];
    fprintf(f,
            "usage: revtorch train [options]\n"
            "Trains a classifier on Fashion-MNIST and reports loss, accuracy, speed and memory.\n\n"
            "  --model NAME          %s\n"
            "                        (default revnet_small: a RevNet, reversible, 3 epochs ≈ 4.5 min on 2 cores;\n"
            "                        the segmentation models train with revtorch segment train)\n"
            "  --data DIR            Fashion-MNIST directory (default /usr/share/datasets/fashion-mnist)\n"
            "  --epochs N            epochs (default 3)\n"
            "  --batch-size N        samples per optimizer step (default 128)\n"
            "  --accum-steps K       split each batch into K micro-batches, same gradient (default 1)\n"
            "  --lr X                peak learning rate (default 0.1 for sgd, 0.001 for adamw)\n"
            "  --optimizer sgd|adamw (default sgd: momentum 0.9, Nesterov)\n"
            "  --momentum X          SGD momentum (default 0.9)\n"
            "  --weight-decay X      (default 5e-4 for sgd, 0.05 for adamw)\n"
            "  --schedule cosine|step|constant  per-step LR schedule (default cosine)\n"
            "  --warmup-steps N      linear warm-up steps (default 100)\n"
            "  --clip X              clip the gradient's global L2 norm to X (default off)\n"
            "  --label-smoothing X   cross-entropy label smoothing (default 0)\n"
            "  --no-augment          no random crop / horizontal flip\n"
            "  --memory MODE         reversible (RevNets rebuild activations in backward) or standard\n"
            "                        (plain backpropagation on the same parameters); default reversible\n"
            "  --grouping G          reversible sequences keep nothing (full, default), the exact\n"
            "                        input of every G-th block (an integer), or measure drift (auto)\n"
            "  --threads N           threads for oneDNN, OpenBLAS and revtorch (default: all cores)\n",
            train_model_names(models, sizeof models));
    cli_conv_algo_help(f, 24);
    cli_weight_cache_help(f, 24);
    cli_weight_layout_help(f, 24);
    cli_precision_help(f, 24);
    fprintf(f,
            "  --no-loss-scale       fp16 without dynamic loss scaling (on by default for fp16; bf16 and fp32\n"
            "                        have none, and refuse this option and the next; see GradScaler)\n"
            "  --loss-scale-init S   fp16: the loss scaler's first scale (GradScaler's init_scale, default 65536)\n"
            "  --seed N              initialisation, shuffling and augmentation seed (default 0)\n"
            "  --save FILE           write weights (safetensors, torchvision names) after every epoch;\n"
            "                        optimizer state goes to FILE with .optim before .safetensors; a symlink\n"
            "                        is followed; without --save (or --resume) the weights are not kept\n"
            "  --resume FILE         continue a run saved with --save (same options; a changed --batch-size,\n"
            "                        --seed, --lr, schedule, ... is refused) and keep saving to FILE unless\n"
            "                        --save names other files\n"
            "  --stop-after-epoch N  stop after epoch N of --epochs, as a time-limited job would; the\n"
            "                        schedule still spans --epochs, and --resume continues the run\n"
            "  --log FILE.csv        per-epoch results; per-step losses (and steps the loss scaler skipped,\n"
            "                        with the loss scale) go to FILE.steps.csv after each epoch, and up to\n"
            "                        the failing step when training fails; the curves go to FILE.png\n"
            "                        (a new run replaces them, --resume appends)\n"
            "  --memory-trace F.csv  record every allocation of the second training step (time, bytes,\n"
            "                        category, op) to F.csv and draw the timeline to F.png\n"
            "Outputs must be absent or regular files (symlinks are followed), all different, derived\n"
            "names included, and not in use by another run (FILE.lock is held while training).\n"
            "Ctrl-C stops after the current step, keeps the last saved epoch and prints the command\n"
            "that resumes (exit code 130).\n"
            "Data parallelism (run under MPI: mpirun -np N revtorch train ...; each rank takes 1/N of every\n"
            "batch, the gradients are averaged as in PyTorch's DistributedDataParallel; rank 0 prints and saves):\n"
            "  --distributed         use MPI even when no launcher is detected (mpirun is detected itself)\n"
            "  --shard-optimizer     ZeRO-1: each rank keeps the optimizer state of its 1/N of the parameters\n"
            "  --sync-batchnorm      batch norm statistics over the global batch (SyncBatchNorm; default per rank)\n"
            "  --bucket-mb X         gradient bucket size in MiB, all-reduced while backward goes on (default 25)\n"
            "  --dist-timeout S      stop when a collective waits longer than S seconds (default 60)\n"
            "  --train-subset N      use only the first N training images (quick runs, tests; 0: all)\n"
            "  --test-subset N       use only the first N test images (0: all)\n"
            "Exit status: 0 done, 1 runtime failure (files, data, training), 2 usage error (nothing was run).\n");
    fprintf(f, "Checkpointing (any model; see revtorch memory for the rows of each):\n");
    cli_ckpt_help(f);
}

/* True when option `name` appears on the command line. */
static bool strstr_arg(int argc, char **argv, const char *name) {
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], name)) return true;
    return false;
}

static int train_parse(int argc, char **argv, train_opts *o) {
    *o = (train_opts){.model = "revnet_small", .optimizer = "sgd", .schedule = "cosine", .epochs = 3,
                      .batch_size = 128, .accum_steps = 1, .lr = NAN, .weight_decay = NAN, .momentum = 0.9f,
                      .warmup_steps = 100, .augment = true,
                      .memory = "reversible", .grouping = "full", .bucket_mb = 25, .dist_timeout = 60};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool ok = true;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            train_usage(stdout);
            return 0;
        } else if (!strcmp(a, "--model")) ok = cli_str(argc, argv, &i, &o->model);
        else if (!strcmp(a, "--data")) ok = cli_str(argc, argv, &i, &o->data);
        else if (!strcmp(a, "--save")) ok = cli_str(argc, argv, &i, &o->save);
        else if (!strcmp(a, "--resume")) ok = cli_str(argc, argv, &i, &o->resume);
        else if (!strcmp(a, "--log")) ok = cli_str(argc, argv, &i, &o->log);
        else if (!strcmp(a, "--memory-trace")) ok = cli_str(argc, argv, &i, &o->trace);
        else if (!strcmp(a, "--optimizer")) ok = cli_str(argc, argv, &i, &o->optimizer);
        else if (!strcmp(a, "--schedule")) ok = cli_str(argc, argv, &i, &o->schedule);
        else if (!strcmp(a, "--memory")) ok = cli_str(argc, argv, &i, &o->memory);
        else if (!strcmp(a, "--grouping")) ok = cli_str(argc, argv, &i, &o->grouping);
        else if (!strcmp(a, "--epochs")) ok = cli_int_in(argc, argv, &i, 1, INT32_MAX, NULL, &o->epochs);
        else if (!strcmp(a, "--batch-size")) ok = cli_int_in(argc, argv, &i, 1, INT32_MAX, NULL, &o->batch_size);
        else if (!strcmp(a, "--accum-steps")) ok = cli_int_in(argc, argv, &i, 1, INT32_MAX, NULL, &o->accum_steps);
        else if (!strcmp(a, "--conv-algo")) ok = cli_conv_algo(argc, argv, &i);
        else if (!strcmp(a, "--weight-cache")) ok = cli_weight_cache(argc, argv, &i);
        else if (!strcmp(a, "--weight-layout")) ok = cli_weight_layout(argc, argv, &i);
        else if (!strcmp(a, "--precision")) ok = cli_precision_arg(argc, argv, &i);
        else if (!strcmp(a, "--no-loss-scale")) o->no_loss_scale = true;
        else if (!strcmp(a, "--loss-scale-init"))
            ok = cli_float_in(argc, argv, &i, 1.0f, 3.0e38f, false, "(the first loss scale)", &o->loss_scale_init);
        else if (!strcmp(a, "--threads")) ok = cli_int(argc, argv, &i, &o->threads);
        else if (!strcmp(a, "--seed")) ok = cli_int(argc, argv, &i, &o->seed);
        else if (!strcmp(a, "--warmup-steps"))
            ok = cli_int_in(argc, argv, &i, 0, INT32_MAX, "(0: no warm-up)", &o->warmup_steps);
        else if (!strcmp(a, "--train-subset"))
            ok = cli_int_in(argc, argv, &i, 0, INT64_MAX, "(0: all)", &o->train_subset);
        else if (!strcmp(a, "--stop-after-epoch")) ok = cli_int(argc, argv, &i, &o->stop_after);
        else if (!strcmp(a, "--test-subset"))
            ok = cli_int_in(argc, argv, &i, 0, INT64_MAX, "(0: all)", &o->test_subset);
        else if (!strcmp(a, "--lr")) ok = cli_float_in(argc, argv, &i, 0, INFINITY, false, NULL, &o->lr);
        else if (!strcmp(a, "--weight-decay"))
            ok = cli_float_in(argc, argv, &i, 0, INFINITY, false, NULL, &o->weight_decay);
        else if (!strcmp(a, "--momentum"))
            ok = cli_float_in(argc, argv, &i, 0, 1, true,
                              "(SGD momentum, usually 0.9; at 1 or more the steps grow without bound)", &o->momentum);
        else if (!strcmp(a, "--clip")) ok = cli_float_in(argc, argv, &i, 0, INFINITY, false, "(0: off)", &o->clip);
        else if (!strcmp(a, "--label-smoothing"))
            ok = cli_float_in(argc, argv, &i, 0, 1, false, NULL, &o->label_smoothing);
        else if (!strcmp(a, "--no-augment")) o->augment = false;
        else if (cli_ckpt_option(argc, argv, &i, &o->ckpt, &ok)) (void)0;
        else if (!strcmp(a, "--distributed")) o->distributed = true;
        else if (!strcmp(a, "--shard-optimizer")) o->shard_optimizer = true;
        else if (!strcmp(a, "--sync-batchnorm")) o->sync_bn = true;
        else if (!strcmp(a, "--bucket-mb"))
            ok = cli_float_in(argc, argv, &i, 0, 1048576, true, "(MiB, DDP's bucket_cap_mb)", &o->bucket_mb);
        else if (!strcmp(a, "--dist-timeout"))
            ok = cli_float_in(argc, argv, &i, 0, 86400, true, "(seconds)", &o->dist_timeout);
        else {
            fprintf(stderr, "revtorch train: unknown option '%s' (see revtorch train --help)\n", a);
            return 2;
        }
        if (!ok) return 2;
    }
    rt_memory_config mc;
    if (cli_ckpt_given(&o->ckpt) && !cli_ckpt_config("train", &o->ckpt, &mc)) return 2;
    if (!cli_ckpt_memory_ok("train", &o->ckpt, strstr_arg(argc, argv, "--memory"))) return 2;
    bool adamw = !strcmp(o->optimizer, "adamw");
    if (!adamw && strcmp(o->optimizer, "sgd")) {
        fprintf(stderr, "revtorch train: --optimizer must be sgd or adamw, got '%s'\n", o->optimizer);
        return 2;
    }
    if (adamw && strstr_arg(argc, argv, "--momentum")) {
        fprintf(stderr, "revtorch train: --momentum is SGD's; AdamW keeps running averages with betas (0.9, "
                        "0.999), PyTorch's defaults. Drop --momentum or use --optimizer sgd\n");
        return 2;
    }
    if (strcmp(o->schedule, "cosine") && strcmp(o->schedule, "step") && strcmp(o->schedule, "constant")) {
        fprintf(stderr, "revtorch train: --schedule must be cosine, step or constant, got '%s'\n", o->schedule);
        return 2;
    }
    if (!cli_loss_scale_ok("train", o->no_loss_scale, o->loss_scale_init)) return 2;
    if (!rt_zoo_find(o->model)) { /* the classifiers only: the segmentation models are refused below */
        char models[512];
        fprintf(stderr, "revtorch train: --model %s is not a model revtorch knows; choose one of %s (segmentation "
                        "models: revtorch segment train)\n", o->model, train_model_names(models, sizeof models));
        return 2;
    }
    if (rt_model_name_is_segmentation(o->model)) {
        fprintf(stderr, "revtorch train: %s is a segmentation model (volumes in, a label per voxel out); "
                        "revtorch train trains image classifiers, train it with revtorch segment train\n", o->model);
        return 2;
    }
    cli_strategy strategy;
    if (!cli_memory_mode(o->memory, o->grouping, &strategy)) return 2;
    if (!cli_strategy_fits_model("train", o->model, strategy.reversible && strstr_arg(argc, argv, "--memory"),
                                 strstr_arg(argc, argv, "--grouping")))
        return 2;
    if (isnan(o->lr)) o->lr = adamw ? 1e-3f : 0.1f;
    if (isnan(o->weight_decay)) o->weight_decay = adamw ? 0.05f : 5e-4f;
    if (o->accum_steps > o->batch_size) {
        fprintf(stderr, "revtorch train: --accum-steps %lld is more than --batch-size %lld (each micro-batch needs "
                        "a sample); use 1 to %lld\n", (long long)o->accum_steps, (long long)o->batch_size,
                (long long)o->batch_size);
        return 2;
    }
    if (o->stop_after < 0 || o->stop_after > o->epochs || (o->stop_after == 0 && strstr_arg(argc, argv, "--stop-after-epoch"))) {
        fprintf(stderr, "revtorch train: --stop-after-epoch must be between 1 and --epochs (%lld), got %lld\n",
                (long long)o->epochs, (long long)o->stop_after);
        return 2;
    }
    return -1; /* parsed; go on */
}

/* The per-step schedule named by --schedule over total_steps optimizer steps:
 * linear warm-up from 0.1·lr, then cosine to 0, or ×0.1 at 50% and 75%. */
static rt_status make_schedule(const char *name, float lr, int64_t total_steps, int64_t warmup,
                               rt_lr_schedule *s) {
    *s = (rt_lr_schedule){.base_lr = lr, .warmup_steps = warmup, .warmup_start_factor = 0.1f, .gamma = 0.1f};
    int64_t main_steps = total_steps - warmup > 1 ? total_steps - warmup : 1;
    if (!strcmp(name, "cosine")) {
        s->kind = RT_LR_COSINE;
        s->t_max = main_steps;
    } else if (!strcmp(name, "step")) {
        s->kind = RT_LR_MULTISTEP;
        s->n_milestones = 2;
        s->milestones[0] = main_steps / 2;
        s->milestones[1] = main_steps * 3 / 4;
    } else if (!strcmp(name, "constant")) {
        s->kind = RT_LR_CONSTANT;
    } else {
        return rt_error_set(RT_ERR_INVALID_ARG, "unknown schedule '%s' (cosine, step, constant)", name);
    }
    return rt_lr_schedule_check(s);
}

/* The shortest decimal form of v that reads back as v ("0.1", not
 * "0.100000001"), so that saved runs compare exact values and print the
 * ones the user typed. */
static const char *float_str(float v, char *buf, size_t n) {
    for (int digits = 6; digits <= 9; digits++) {
        snprintf(buf, n, "%.*g", digits, (double)v);
        if (strtof(buf, NULL) == v) break;
    }
    return buf;
}

/* The options a resumed run must repeat to continue the same run: what
 * decides the data order, the batches and the learning rate at each step,
 * written "name=value" with the CLI option's name ("--no-augment yes").
 * --epochs counts too unless the schedule is constant (cosine and step
 * anneal over all epochs). --log, --save, --test-subset, --conv-algo and
 * --memory/--grouping may change (the same arithmetic, rounded
 * differently), and so may --stop-after-epoch. "threads" (the count used,
 * also for --threads 0) is informational: a resume with another count is
 * warned that it does not continue bit-identically. The batch size is the
 * one asked for (the same run whether or not it exceeds the set); the
 * warm-up is the one used (scaled when not shorter than the run). */
static void train_run_options(const train_opts *o, char *buf, size_t n) {
    char lr[32], mom[32], wd[32], clip[32], ls[32], epochs[48] = "";
    if (strcmp(o->schedule, "constant")) snprintf(epochs, sizeof epochs, " epochs=%lld", (long long)o->epochs);
    snprintf(buf, n,
             "batch_size=%lld accum_steps=%lld seed=%lld lr=%s momentum=%s weight_decay=%s schedule=%s "
             "warmup_steps=%lld clip=%s label_smoothing=%s no_augment=%s train_subset=%lld%s threads=%d",
             (long long)(o->batch_asked ? o->batch_asked : o->batch_size), (long long)o->accum_steps,
             (long long)o->seed, float_str(o->lr, lr, sizeof lr), float_str(o->momentum, mom, sizeof mom),
             float_str(o->weight_decay, wd, sizeof wd), o->schedule, (long long)o->warmup_steps,
             float_str(o->clip, clip, sizeof clip), float_str(o->label_smoothing, ls, sizeof ls),
             o->augment ? "no" : "yes", (long long)o->train_subset, epochs, rt_get_num_threads());
}

/* Everything one `revtorch train` run holds, from set-up to the last epoch. */
typedef struct train_run {
    train_opts o;
    rt_dataset *train, *test;
    rt_model *m;
    rt_optimizer *opt;
    rt_loader *loader;
    rt_train_config cfg;
    cli_strategy strategy;
    rt_grad_scaler *scaler; /* fp16's dynamic loss scaling (NULL: none) */
    rt_lr_schedule sched;
    FILE *log, *steps_log;
    char run_options[512];
    int64_t per_epoch, start_epoch, last_epoch;
    rt_memstats pred, plain; /* predicted step peaks: this strategy, plain backpropagation */
    int argc;
    char **argv;
    /* outputs, resolved (symlinks followed) and locked before any work; "" when not written */
    cli_outputs outs;
    const char *keep; /* where the training state goes, as the user named it: --save, else --resume */
    char save_path[CLI_PATH_MAX], optim_path[CLI_PATH_MAX], log_path[CLI_PATH_MAX], steps_path[CLI_PATH_MAX],
        png_path[CLI_PATH_MAX], trace_path[CLI_PATH_MAX], trace_png[CLI_PATH_MAX];
    cli_training_curves curves; /* every epoch's and step's results, drawn after each epoch */
    /* this epoch's steps, for FILE.steps.csv: skipped by the loss scaler (Inf/NaN gradients, nothing
     * learnt) or applied, and the loss scale after the step (1 without a scaler) */
    struct train_step_row { int64_t step; double lr, loss; int skipped; double scale; } *epoch_steps;
    int64_t n_epoch_steps;
    int64_t saved_epoch;    /* epochs held by the saved state (0: nothing saved yet) */
    int64_t stopped_step;   /* steps done in the epoch Ctrl-C interrupted */
    bool lost;              /* an output could not be written: exit 1 at the end */
    bool log_lost;          /* the --log files failed: not written any more */
    rt_memory_plan mplan;   /* the checkpointing plan (mplan.plan.n == 0: none) */
    int64_t live_before;    /* bytes live before training that the step does not own (data sets) */
    cli_dist dist;          /* MPI rank and size; the library's data parallelism */
} train_run;

/* What one epoch of training measured. */
typedef struct train_epoch_stats {
    double loss_sum, secs;
    int64_t seen, correct;
    int64_t skipped; /* steps the loss scaler skipped (their samples are not in seen) */
    rt_memstats peaks;
} train_epoch_stats;

/* Set when SIGINT arrives; checked between training steps (cli/ only: the
 * library keeps no global mutable state). */
static volatile sig_atomic_t train_interrupted;
static struct timespec train_interrupted_at;

/* The first SIGINT asks the run to stop after its step. A second one a
 * second or more later ends the process at once (a user pressing Ctrl-C
 * again); one sooner is the same request delivered twice (timeout(1) and
 * shells send it to the process and to its group) and is ignored. Only
 * async-signal-safe calls. */
static void train_on_sigint(int sig) {
    (void)sig;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (!train_interrupted) {
        train_interrupted_at = now;
        train_interrupted = 1;
    } else if (now.tv_sec - train_interrupted_at.tv_sec >= 2 ||
               (now.tv_sec - train_interrupted_at.tv_sec == 1 && now.tv_nsec >= train_interrupted_at.tv_nsec)) {
        _exit(130);
    }
}

/* Adds an output (and when `of` is set, a name derived from it) and copies
 * its resolved path into `dst`. */
static bool add_output(train_run *r, const char *option, const char *path, const char *of, bool input,
                       char *dst) {
    const cli_output *o = cli_outputs_add(&r->outs, option, path, of, input);
    if (!o) return false;
    if (dst) snprintf(dst, CLI_PATH_MAX, "%s", o->path);
    return true;
}

/* Checks every file the run writes before any work: names, types, symlinks,
 * collisions (derived names included) and the locks. Returns -1 to go on,
 * else the exit code (message printed). */
static int train_outputs(train_run *r) {
    const train_opts *o = &r->o;
    cli_outputs_init(&r->outs, "revtorch train");
    if (r->dist.rank != 0) { /* rank 0 alone writes (and locks) the outputs; the others read --resume */
        r->keep = o->save ? o->save : o->resume;
        r->o.log = r->o.trace = NULL;
        return -1;
    }
    const char *csv_opts[2][2] = {{"--log", o->log}, {"--memory-trace", o->trace}};
    for (int i = 0; i < 2; i++)
        if (csv_opts[i][1] && !cli_csv_name_ok("revtorch train", csv_opts[i][0], csv_opts[i][1])) return 2;
    char derived[CLI_PATH_MAX];
    r->keep = o->save ? o->save : o->resume;
    if (o->resume) {
        /* without --save the resumed files are written again; else only read */
        bool keep_here = !o->save;
        cli_train_state_optim_path(o->resume, derived, sizeof derived);
        if (!add_output(r, "--resume", o->resume, NULL, !keep_here, keep_here ? r->save_path : NULL) ||
            !add_output(r, "--resume", derived, o->resume, !keep_here, keep_here ? r->optim_path : NULL))
            return 1;
    }
    if (o->save) {
        cli_train_state_optim_path(o->save, derived, sizeof derived);
        if (!add_output(r, "--save", o->save, NULL, false, r->save_path) ||
            !add_output(r, "--save", derived, o->save, false, r->optim_path))
            return 1;
    }
    if (o->log) {
        char png[CLI_PATH_MAX];
        cli_derived_path(o->log, ".csv", ".steps.csv", derived, sizeof derived);
        cli_derived_path(o->log, ".csv", ".png", png, sizeof png);
        if (!add_output(r, "--log", o->log, NULL, false, r->log_path) ||
            !add_output(r, "--log", derived, o->log, false, r->steps_path) ||
            !add_output(r, "--log", png, o->log, false, r->png_path))
            return 1;
    }
    if (o->trace) {
        cli_derived_path(o->trace, ".csv", ".png", derived, sizeof derived);
        if (!add_output(r, "--memory-trace", o->trace, NULL, false, r->trace_path) ||
            !add_output(r, "--memory-trace", derived, o->trace, false, r->trace_png))
            return 1;
    }
    int rc = cli_outputs_check_distinct(&r->outs);
    if (rc) return rc;
    if (cli_outputs_lock(&r->outs)) return 1;
    return -1;
}

/* Records that the --log files failed (once) and stops writing them. */
static void train_log_lost(train_run *r, const char *what, int err) {
    if (r->log_lost) return;
    fprintf(stderr, "revtorch train: cannot write --log %s (%s): %s; the log is lost from here on, training goes "
                    "on and the run will exit 1; free space or choose another --log\n",
            r->o.log, what, strerror(err ? err : EIO));
    r->log_lost = r->lost = true;
    if (r->log) fclose(r->log);
    if (r->steps_log) fclose(r->steps_log);
    r->log = r->steps_log = NULL;
}

/* Flushes a log and checks it held every write; false (errno set) when not. */
static bool flush_ok(FILE *f) {
    errno = 0;
    if (fflush(f) != 0 || ferror(f)) {
        if (!errno) errno = EIO;
        return false;
    }
    return true;
}

/* Opens the per-epoch log and the per-step log beside it (appending on
 * resume, after reading the rows already there once for the curves). */
static int train_open_logs(train_run *r) {
    const char *path = r->o.log;
    if (r->start_epoch) {
        cli_training_curves old;
        if (cli_training_curves_read(r->log_path, r->steps_path, &old) == RT_OK) {
            /* only what the resumed state holds: not the epochs of a longer run saved elsewhere */
            for (size_t i = 0; i < old.n_epochs; i++)
                if (old.epochs[i].epoch <= (double)r->start_epoch)
                    cli_training_curves_add_epoch(&r->curves, &old.epochs[i]);
            for (size_t i = 0; i < old.n_steps; i++)
                if (old.steps[i].epoch < r->start_epoch)
                    cli_training_curves_add_step(&r->curves, old.steps[i].epoch, old.steps[i].loss);
            cli_training_curves_free(&old);
        } else if (access(r->log_path, F_OK) == 0) {
            fprintf(stderr, "revtorch train: warning: the curves in %s show this run's epochs only: %s\n",
                    r->png_path, rt_error_last());
        }
        rt_error_clear();
    }
    const char *mode = r->start_epoch ? "a" : "w";
    r->log = fopen(r->log_path, mode);
    if (!r->log) {
        fprintf(stderr, "revtorch train: cannot write --log %s: %s\n", path, strerror(errno));
        return 1;
    }
    r->steps_log = fopen(r->steps_path, mode);
    if (!r->steps_log) {
        fprintf(stderr, "revtorch train: cannot write --log %s (its steps file %s): %s\n", path, r->steps_path,
                strerror(errno));
        return 1;
    }
    fseek(r->log, 0, SEEK_END);
    if (ftell(r->log) == 0) { /* a new file, also when resuming into another log */
        fprintf(r->log, "epoch,train_loss,train_acc,test_loss,test_acc,images_per_s,epoch_s,peak_param_mib,"
                        "peak_grad_mib,peak_optim_mib,peak_saved_mib,peak_temp_mib,peak_data_mib,peak_total_mib\n");
    }
    fseek(r->steps_log, 0, SEEK_END);
    if (ftell(r->steps_log) == 0) fprintf(r->steps_log, "epoch,step,lr,loss,skipped,loss_scale\n");
    if (!flush_ok(r->log) || !flush_ok(r->steps_log)) {
        fprintf(stderr, "revtorch train: cannot write --log %s: %s; nothing was trained: free space or choose "
                        "another --log\n", path, strerror(errno));
        fclose(r->log);
        fclose(r->steps_log);
        r->log = r->steps_log = NULL;
        return 1;
    }
    return 0;
}

/* The batch one step of this process computes: the global batch (or the
 * whole set, if smaller), and under MPI this rank's share of it (the largest
 * share, ⌈B/N⌉) — what every prediction and plan is for. */
static int64_t train_rank_batch(const train_run *r) {
    const int64_t b = r->o.batch_size < r->train->n ? r->o.batch_size : r->train->n;
    return (b + r->dist.size - 1) / r->dist.size;
}

/* Predicts the step's memory with the chosen strategy and with plain
 * backpropagation (the same training step on meta tensors). */
static rt_status train_predict(train_run *r, const rt_optimizer_spec *spec) {
    const train_opts *o = &r->o;
    const rt_dataset *d = r->train;
    int64_t batch = train_rank_batch(r);
    cli_strategy plain = {.reversible = false, .grouping = RT_GROUPING_FULL};
    RT_TRY(cli_predict_memory(o->model, d->channels, d->num_classes, &r->strategy, spec, &r->cfg, batch, d->height,
                                 d->width, &r->pred));
    return cli_predict_memory(o->model, d->channels, d->num_classes, &plain, spec, &r->cfg, batch, d->height,
                                 d->width, &r->plain);
}

/* The first number in file `path` (e.g. /sys/fs/cgroup/memory.max), or -1
 * when it cannot be read or says "max". */
static int64_t read_number_file(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    long long v = -1;
    if (fscanf(f, "%lld", &v) != 1) v = -1;
    fclose(f);
    return v;
}

/* The bytes this process may still take: the least of the system's
 * MemAvailable, the address space left under RLIMIT_AS (the limit less the
 * current VmSize) and the cgroup's memory.max less memory.current. -1 when
 * none is known. *what names the tightest. */
static int64_t memory_available(const char **what) {
    int64_t best = -1;
    *what = "unknown";
    FILE *f = fopen("/proc/meminfo", "r");
    if (f) {
        char line[256];
        long long kb;
        while (fgets(line, sizeof line, f))
            if (sscanf(line, "MemAvailable: %lld kB", &kb) == 1) {
                best = (int64_t)kb * 1024;
                *what = "MemAvailable in /proc/meminfo";
            }
        fclose(f);
    }
    struct rlimit rl;
    if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
        long long pages = 0;
        FILE *sf = fopen("/proc/self/statm", "r");
        if (sf) {
            if (fscanf(sf, "%lld", &pages) != 1) pages = 0;
            fclose(sf);
        }
        int64_t left = (int64_t)rl.rlim_cur - (int64_t)pages * (int64_t)sysconf(_SC_PAGESIZE);
        if (left < 0) left = 0;
        if (best < 0 || left < best) best = left, *what = "the address-space limit (ulimit -v, RLIMIT_AS)";
    }
    int64_t max = read_number_file("/sys/fs/cgroup/memory.max"), cur = read_number_file("/sys/fs/cgroup/memory.current");
    if (max > 0 && cur >= 0) {
        int64_t left = max > cur ? max - cur : 0;
        if (best < 0 || left < best) best = left, *what = "the cgroup's memory.max";
    }
    return best;
}

/* What the process needs for a step whose tracked peak is `peak` bytes:
 * the peak itself, as much again for the freed blocks the caching allocator
 * keeps for the next step (its cap follows the high-water mark), and 256 MiB
 * for what libraries allocate on their own (OpenBLAS's GEMM buffers of up to
 * 128 MiB, oneDNN's JIT code, thread stacks). Measured on the main job:
 * 503.6 MiB peak RSS for a 138.7 MiB tracked peak; this gives 533 MiB. */
static int64_t process_need(int64_t peak) { return 2 * peak + ((int64_t)256 << 20); }

/* Refuses a run whose predicted step does not fit in the memory available,
 * naming the options that would fit (each checked by a meta run). Returns
 * -1 to go on, else the exit code. */
static int train_check_memory(train_run *r, const rt_optimizer_spec *spec) {
    const train_opts *o = &r->o;
    const char *what;
    int64_t avail = memory_available(&what);
    int64_t need = process_need(r->pred.peak_total);
    if (avail < 0 || need <= avail) return -1;
    const double mib = 1048576.0;
    const rt_dataset *d = r->train;
    rt_memstats held;
    rt_memstats_get(&held);
    int64_t batch = o->batch_size < d->n ? o->batch_size : d->n;
    fprintf(stderr,
            "revtorch train: one training step of %s at batch %lld is predicted to need %.1f MiB (meta run: "
            "parameters, gradients, optimizer state, the batch and the activations: %.1f MiB; as much again for "
            "the allocator's cached blocks; 256 MiB for the libraries' own buffers), but only %.1f MiB are "
            "available (%s); the data sets already loaded hold %.1f MiB more. Training would be killed.\n",
            o->model, (long long)batch, (double)need / mib, (double)r->pred.peak_total / mib, (double)avail / mib,
            what, (double)held.live[RT_MEM_DATA] / mib);
    int found = 0;
    rt_memstats p;
    /* suggestions must fit by the same measure, with a tenth to spare */
    int64_t room = avail - avail / 10;
    /* gradient accumulation: the same step in K micro-batches */
    for (int64_t k = 2 * o->accum_steps; k <= batch && k <= 4096; k *= 2) {
        rt_train_config c = r->cfg;
        c.accum_steps = k;
        if (cli_predict_memory(o->model, d->channels, d->num_classes, &r->strategy, spec, &c, batch, d->height,
                               d->width, &p) != RT_OK)
            break;
        if (process_need(p.peak_total) <= room) {
            fprintf(stderr, "  fits: --accum-steps %lld (same batch and gradient; needs %.1f MiB)\n", (long long)k,
                    (double)process_need(p.peak_total) / mib);
            found++;
            break;
        }
    }
    /* a smaller batch */
    for (int64_t b = batch / 2; b >= 2 * o->accum_steps && b >= 1; b /= 2) {
        if (cli_predict_memory(o->model, d->channels, d->num_classes, &r->strategy, spec, &r->cfg, b, d->height,
                               d->width, &p) != RT_OK)
            break;
        if (process_need(p.peak_total) <= room) {
            fprintf(stderr, "  fits: --batch-size %lld (needs %.1f MiB)\n", (long long)b,
                    (double)process_need(p.peak_total) / mib);
            found++;
            break;
        }
    }
    /* the reversible memory mode, for models that have one */
    if (rt_model_name_has_reversible(o->model) && !r->strategy.reversible) {
        cli_strategy rev = {.reversible = true, .grouping = RT_GROUPING_FULL};
        if (cli_predict_memory(o->model, d->channels, d->num_classes, &rev, spec, &r->cfg, batch, d->height,
                               d->width, &p) == RT_OK && process_need(p.peak_total) <= room) {
            fprintf(stderr, "  fits: --memory reversible (needs %.1f MiB)\n", (double)process_need(p.peak_total) / mib);
            found++;
        }
    }
    if (!found)
        fprintf(stderr, "  no smaller batch, --accum-steps or memory mode fits; free memory or use a smaller model\n");
    fprintf(stderr, "  (revtorch memory --model %s --batch-size %lld shows the prediction per category)\n", o->model,
            (long long)batch);
    return 1;
}

/* What decides which activations the step keeps, for the lines that
 * compare it with plain backpropagation: the checkpointing plan when one is
 * in force (it decides per stage, reversible stages included, whatever
 * --memory says), else --memory. */
static const char *train_memory_label(const train_run *r, char *buf, size_t n) {
    const cli_ckpt_args *a = &r->o.ckpt;
    if (r->mplan.plan.n > 0) {
        if (a->mode) snprintf(buf, n, "the memory plan of --memory-mode %s", a->mode);
        else if (a->budget) snprintf(buf, n, "the memory plan of --memory-budget %s", a->budget);
        else if (a->segments) snprintf(buf, n, "the memory plan of --checkpoint-segments %lld", (long long)a->segments);
        else snprintf(buf, n, "the memory plan of --recompute %s", a->recompute ? a->recompute : "selective");
    } else {
        snprintf(buf, n, "--memory %s",
                 r->strategy.reversible && rt_model_name_has_reversible(r->o.model) ? "reversible" : "standard");
    }
    return buf;
}

static void train_print_header(const train_run *r) {
    const train_opts *o = &r->o;
    const rt_model *m = r->m;
    char asked[96] = "";
    if (o->batch_asked)
        snprintf(asked, sizeof asked, ": the whole set, --batch-size %lld is more", (long long)o->batch_asked);
    printf("revtorch train: %s (%lld parameters) on %lld Fashion-MNIST images, batch %lld (%lld micro-batch%s%s), "
           "%s lr %g, %lld epoch%s, %d thread%s\n",
           m->name, (long long)rt_state_dict_num_param_elements(m->sd), (long long)r->train->n,
           (long long)o->batch_size, (long long)o->accum_steps, o->accum_steps == 1 ? "" : "es", asked, o->optimizer,
           o->lr, (long long)o->epochs, o->epochs == 1 ? "" : "s", rt_get_num_threads(),
           rt_get_num_threads() == 1 ? "" : "s");
    char prec[512];
    printf("%s", rt_precision_describe(cli_precision(), prec, sizeof prec));
    if (r->scaler) printf("; dynamic loss scaling from %g", (double)rt_grad_scaler_get_scale(r->scaler));
    printf("\n");
    const double mib = 1048576.0;
    char label[96];
    if (rt_model_name_has_reversible(m->name))
        printf("predicted per step (meta run): activations kept for backward %.2f MiB with %s, %.2f MiB "
               "with plain backpropagation; step peak %.2f MiB vs %.2f MiB\n",
               (double)r->pred.peak[RT_MEM_SAVED] / mib, train_memory_label(r, label, sizeof label),
               (double)r->plain.peak[RT_MEM_SAVED] / mib, (double)r->pred.peak_total / mib,
               (double)r->plain.peak_total / mib);
    else
        printf("predicted per step (meta run): activations kept for backward %.2f MiB; step peak %.2f MiB\n",
               (double)r->pred.peak[RT_MEM_SAVED] / mib, (double)r->pred.peak_total / mib);
}

/* Writes the trace of step `step` (0-based) recorded since `start` as CSV
 * and as a stacked timeline PNG; a failure makes the run exit 1. */
static void write_memory_trace(train_run *r, int64_t step, const rt_memstats *start) {
    const train_opts *o = &r->o;
    char title[256], label[96];
    snprintf(title, sizeof title, "memory of one training step — %s, %s, batch %lld", o->model,
             train_memory_label(r, label, sizeof label), (long long)o->batch_size);
    size_t n;
    const rt_mem_event *ev = rt_mem_trace_events(&n);
    if (rt_mem_trace_write_csv(r->trace_path) != RT_OK ||
        cli_plot_memory_timeline(r->trace_png, ev, n, start->live, title) != RT_OK) {
        fprintf(stderr, "revtorch train: cannot write --memory-trace %s: %s; the run will exit 1\n", r->o.trace,
                rt_error_last());
        r->lost = true;
    } else {
        char png[CLI_PATH_MAX];
        cli_derived_path(r->o.trace, ".csv", ".png", png, sizeof png);
        /* the picture's peak: the live total when tracing began plus the highest running sum */
        int64_t total = start->live_total, peak = total;
        for (size_t i = 0; i < n; i++)
            if ((total += ev[i].delta_bytes) > peak) peak = total;
        double p = (double)peak / 1048576.0;
        printf("memory timeline of step %lld: %s and %s (%zu events), peak %.*f MiB as marked (DATA there: the "
               "decoded data sets and the batch, %.1f MiB when tracing began)\n", (long long)step + 1, r->o.trace,
               png, n, p >= 100.0 ? 0 : p >= 10.0 ? 1 : 2, p, (double)start->live[RT_MEM_DATA] / 1048576.0);
    }
}

/* Data, model, optimizer, loader, schedule, resume and logs. Returns -1 to
 * go on training, else the exit code (0: nothing left to train). */
/* --memory-mode / --memory-budget / --checkpoint-segments / --recompute:
 * plans on a meta copy (an impossible budget is refused here, before any
 * work), wraps the model in a Checkpoint with the plan, and enforces a
 * budget as the tracker's hard limit on the step's bytes. Returns -1 to go
 * on, else the exit code. */
static int train_plan_memory(train_run *r, const rt_optimizer_spec *spec) {
    const train_opts *o = &r->o;
    const rt_dataset *d = r->train;
    rt_memory_config mc;
    cli_ckpt_config("train", &o->ckpt, &mc);
    if (!cli_ckpt_segments_ok("train", o->model, d->channels, d->num_classes, &r->strategy, mc.segments)) return 2;
    int64_t batch = train_rank_batch(r); /* the planner plans per rank */
    if (cli_ckpt_plan(o->model, d->channels, d->num_classes, &r->strategy, spec, &r->cfg, batch, d->height, d->width,
                      &mc, &r->mplan) != RT_OK) {
        fprintf(stderr, "revtorch train: %s\n", rt_error_last());
        return 1;
    }
    if (cli_ckpt_apply(r->m, &r->mplan.plan) != RT_OK) return cli_fail("cannot apply the memory plan");
    char desc[160];
    cli_ckpt_describe(&r->mplan.plan, desc, sizeof desc);
    const double mib = 1048576.0;
    printf("memory plan (%s): %s; predicted step peak %.1f MiB (plain %.1f MiB), recompute %.1f%% of a step\n",
           o->ckpt.mode ? o->ckpt.mode : o->ckpt.budget ? o->ckpt.budget : o->ckpt.segments ? "segments" : "selective",
           desc, (double)r->mplan.predicted.peak_total / mib, (double)r->mplan.predicted_plain.peak_total / mib,
           100.0 * r->mplan.recompute_fraction);
    char note[256];
    if (cli_ckpt_mode_short(&mc, &r->mplan, note, sizeof note)) printf("note: %s\n", note);
    r->pred = r->mplan.predicted;
    rt_memstats now;
    rt_memstats_get(&now);
    r->live_before = now.live_total - now.live[RT_MEM_PARAM];
    if (mc.budget > 0) rt_mem_set_limit(r->live_before + mc.budget);
    return -1;
}

/* Data parallelism once the optimizer exists: the library's hooks, the
 * start-up comparison of the command line and the data set across ranks.
 * Returns -1 to go on, else the exit code. */
static int train_dist_setup(train_run *r) {
    const train_opts *o = &r->o;
    if (!r->dist.active) {
        if (o->shard_optimizer || o->sync_bn) {
            fprintf(stderr, "revtorch train: %s works across MPI ranks: run under mpirun -np N (or pass "
                            "--distributed)\n", o->shard_optimizer ? "--shard-optimizer" : "--sync-batchnorm");
            return 2;
        }
        return -1;
    }
    int64_t per_rank = o->batch_size / r->dist.size;
    if (per_rank < 2 * o->accum_steps) {
        fprintf(stderr, "revtorch train: --batch-size %lld over %d ranks gives each rank %lld samples, fewer than 2 "
                        "per micro-batch (--accum-steps %lld); use a batch of at least %lld\n", (long long)o->batch_size,
                r->dist.size, (long long)per_rank, (long long)o->accum_steps,
                (long long)(2 * o->accum_steps * r->dist.size));
        return 2;
    }
    rt_dist_options dopt = {.bucket_mb = o->bucket_mb, .shard_optimizer = o->shard_optimizer,
                            .timeout_s = o->dist_timeout};
    if (rt_dist_create(cli_dist_world(), r->opt, &dopt, &r->dist.d) != RT_OK) return cli_fail("data parallelism");
    /* every rank must run the same command on the same data */
    char cmd[4096] = "";
    for (int i = 1; i < r->argc; i++) {
        strncat(cmd, r->argv[i], sizeof cmd - strlen(cmd) - 2);
        strncat(cmd, " ", sizeof cmd - strlen(cmd) - 1);
    }
    size_t used = strlen(cmd);
    snprintf(cmd + used, sizeof cmd - used, "| %lld training images", (long long)r->train->n);
    if (rt_dist_check_same(r->dist.d, "the command-line options or the training set", cmd, strlen(cmd)) != RT_OK)
        return cli_fail("the ranks disagree");
    if (rt_dist_attach(r->dist.d, &r->cfg) != RT_OK) return cli_fail("data parallelism");
    if (o->sync_bn && rt_dist_convert_sync_batchnorm(r->dist.d, r->m->net) != RT_OK)
        return cli_fail("--sync-batchnorm");
    /* the meta prediction ran one process: add the gradient buckets (GRAD,
     * held for the whole run) that data parallelism allocated since */
    rt_dist_stats ds;
    rt_dist_stats_get(r->dist.d, &ds);
    rt_memstats *preds[2] = {&r->pred, r->mplan.plan.n > 0 ? &r->mplan.predicted : NULL};
    for (int k = 0; k < 2; k++)
        if (preds[k]) {
            preds[k]->peak[RT_MEM_GRAD] += ds.buffer_bytes;
            preds[k]->peak_total += ds.buffer_bytes;
        }
    if (r->dist.rank == 0)
        printf("data parallel: %.2f MiB of gradient buckets per rank, added to the predicted step peak\n",
               (double)ds.buffer_bytes / 1048576.0);
    return -1;
}

/* --resume under a sharded optimizer: the file holds the unsharded state
 * (whatever the rank count that wrote it); each rank keeps its shard. */
static rt_status train_dist_resume(train_run *r, const rt_optimizer_spec *spec) {
    const train_opts *o = &r->o;
    if (!o->shard_optimizer)
        return cli_train_state_load(o->resume, o->optimizer, r->run_options, r->m, r->opt, r->scaler,
                                    &r->start_epoch);
    rt_optimizer *full = rt_optimizer_create(spec, rt_optimizer_params(r->opt), rt_optimizer_param_count(r->opt));
    if (!full) return rt_error_last_status();
    rt_status st = cli_train_state_load(o->resume, o->optimizer, r->run_options, r->m, full, r->scaler,
                                                &r->start_epoch);
    if (st == RT_OK) st = rt_dist_scatter_state(r->dist.d, full);
    rt_optimizer_destroy(full);
    return st;
}

/* Saves the training state from rank 0; a sharded optimizer's state is
 * first gathered there into the unsharded format. */
static rt_status train_save(train_run *r, int64_t epochs) {
    const train_opts *o = &r->o;
    rt_optimizer *full = NULL, *save = r->opt;
    if (o->shard_optimizer) {
        if (r->dist.rank == 0) {
            rt_optimizer_spec spec;
            cli_optimizer_spec(o->optimizer, o->lr, o->momentum, o->weight_decay, &spec);
            full = rt_optimizer_create(&spec, rt_optimizer_params(r->opt), rt_optimizer_param_count(r->opt));
            if (!full) return rt_error_last_status();
        }
        rt_status st = rt_dist_gather_state(r->dist.d, full);
        if (st != RT_OK) {
            rt_optimizer_destroy(full);
            return st;
        }
        save = full;
    }
    rt_status st = RT_OK;
    if (r->dist.rank == 0)
        st = cli_train_state_save(r->save_path, r->optim_path, o->optimizer, r->run_options, r->m, save, r->scaler,
                                  epochs);
    rt_optimizer_destroy(full);
    return st;
}

static int train_setup(train_run *r) {
    const train_opts *o = &r->o;
    int rc = train_outputs(r);
    if (rc >= 0) return rc;
    if (cli_open_dataset(o->data, true, o->train_subset, &r->train) != RT_OK)
        return cli_fail("cannot load the training set");
    if (cli_open_dataset(o->data, false, o->test_subset, &r->test) != RT_OK)
        return cli_fail("cannot load the test set");
    if (o->batch_size > r->train->n) { /* one batch of the whole set, as the header says */
        if (o->accum_steps > r->train->n) {
            fprintf(stderr, "revtorch train: --accum-steps %lld is more than the %lld training images (each "
                            "micro-batch needs a sample); use 1 to %lld\n", (long long)o->accum_steps,
                    (long long)r->train->n, (long long)r->train->n);
            return 1;
        }
        r->o.batch_asked = o->batch_size;
        r->o.batch_size = r->train->n;
    }
    if (rt_model_create(o->model, r->train->channels, r->train->num_classes, RT_DEVICE_CPU, (uint64_t)o->seed, &r->m))
        return cli_fail("cannot create the model");
    cli_memory_mode(o->memory, o->grouping, &r->strategy);
    cli_strategy_apply(&r->strategy, r->m);
    r->cfg = (rt_train_config){.accum_steps = o->accum_steps, .clip = o->clip, .label_smoothing = o->label_smoothing};
    if (!cli_loss_scaler_attach(&r->cfg, o->loss_scale_init, o->no_loss_scale, &r->scaler)) return 1;
    rt_optimizer_spec spec;
    cli_optimizer_spec(o->optimizer, o->lr, o->momentum, o->weight_decay, &spec);
    if (train_predict(r, &spec) != RT_OK) {
        if (rt_error_last_status() == RT_ERR_SHAPE && o->accum_steps > 1) { /* e.g. batch norm on 1 sample */
            int64_t batch = train_rank_batch(r);
            fprintf(stderr, "revtorch train: cannot run a step: %s — here the step's samples are micro-batches "
                            "of %lld: --accum-steps %lld splits each batch of %lld; give a smaller --accum-steps "
                            "or a larger --batch-size\n", rt_error_last(), (long long)(batch / o->accum_steps),
                    (long long)o->accum_steps, (long long)batch);
            return 1; /* found once the data set was read: a runtime failure (README, exit status) */
        }
        return cli_fail("cannot predict the memory of a step");
    }
    if (cli_ckpt_given(&o->ckpt)) {
        int rc = train_plan_memory(r, &spec);
        if (rc >= 0) return rc;
    }
    int fits = train_check_memory(r, &spec);
    if (fits >= 0) return fits;
    if (!(r->opt = cli_optimizer_for(&spec, r->m->sd))) return cli_fail("cannot create the optimizer");
    rc = train_dist_setup(r);
    if (rc >= 0) return rc;
    rt_loader_options lo = cli_loader_options(o->batch_size, true, o->augment, (uint64_t)o->seed);
    /* A last batch too small to give every micro-batch 2 samples would make
     * batch norm fail (one value per channel): drop it, as drop_last=True would. */
    int64_t rest = r->train->n % o->batch_size;
    lo.drop_last = rest > 0 && rest < 2 * o->accum_steps * r->dist.size; /* every rank's share */
    if (r->dist.size > 1) { /* each rank reads only its share of every global batch */
        lo.shard_rank = r->dist.rank;
        lo.shard_count = r->dist.size;
    }
    rt_memstats before_loader, after_loader;
    rt_memstats_get(&before_loader);
    if (rt_loader_create(r->train, &lo, &r->loader) != RT_OK) return cli_fail("cannot create the data loader");
    rt_memstats_get(&after_loader);
    /* The loader's own bytes (its shuffled order of the data set, 8 per
     * image, and any staging buffer; DATA) live outside the step like the
     * data sets: a --memory-budget limit set before it (train_plan_memory)
     * is raised by them, or the smallest feasible budget failed on the
     * first step by exactly those bytes. */
    int64_t loader_bytes = after_loader.live_total - before_loader.live_total;
    if (rt_mem_get_limit() > 0 && loader_bytes > 0) {
        r->live_before += loader_bytes;
        rt_mem_set_limit(rt_mem_get_limit() + loader_bytes);
    }
    r->per_epoch = rt_loader_batches_per_epoch(r->loader);
    if (o->warmup_steps > 0 && o->warmup_steps >= r->per_epoch * o->epochs) {
        /* the learning rate would never reach --lr */
        r->o.warmup_asked = o->warmup_steps;
        r->o.warmup_steps = r->per_epoch * o->epochs / 10;
        char instead[64];
        if (o->warmup_steps > 0)
            snprintf(instead, sizeof instead, "warming up over %lld step%s (10%% of the run)",
                     (long long)o->warmup_steps, o->warmup_steps == 1 ? "" : "s");
        else
            snprintf(instead, sizeof instead, "training without warm-up (10%% of the run is under one step)");
        if (r->dist.rank == 0) /* warnings, like progress, from one rank; errors from every rank */
            fprintf(stderr,
                    "revtorch train: warning: --warmup-steps %lld is not shorter than the run's %lld step%s, so "
                    "the learning rate would never reach --lr %g; %s instead (pass a smaller --warmup-steps to "
                    "choose)\n",
                    (long long)o->warmup_asked, (long long)(r->per_epoch * o->epochs),
                    r->per_epoch * o->epochs == 1 ? "" : "s", o->lr, instead);
    }
    if (make_schedule(o->schedule, o->lr, r->per_epoch * o->epochs, o->warmup_steps, &r->sched) != RT_OK)
        return cli_fail("bad --schedule");
    train_run_options(o, r->run_options, sizeof r->run_options);
    if (o->resume && train_dist_resume(r, &spec) != RT_OK) return cli_fail("cannot resume");
    r->saved_epoch = r->start_epoch;
    r->last_epoch = o->stop_after ? o->stop_after : o->epochs;
    if (r->start_epoch >= r->last_epoch) {
        printf("revtorch train: %s already holds %lld epoch%s; nothing left to train up to epoch %lld\n",
               o->resume, (long long)r->start_epoch, r->start_epoch == 1 ? "" : "s", (long long)r->last_epoch);
        return 0;
    }
    if (o->log && train_open_logs(r)) return 1;
    r->epoch_steps = malloc((size_t)(r->per_epoch > 0 ? r->per_epoch : 1) * sizeof *r->epoch_steps);
    if (!r->epoch_steps) return cli_fail("out of memory");
    train_print_header(r);
    if (o->resume)
        printf("resuming %s at epoch %lld (%lld epoch%s done)\n", o->resume, (long long)r->start_epoch + 1,
               (long long)r->start_epoch, r->start_epoch == 1 ? "" : "s");
    if (r->keep) {
        char opath[CLI_PATH_MAX];
        cli_train_state_optim_path(r->keep, opath, sizeof opath);
        printf("saving after every epoch: weights to %s, optimizer state to %s%s\n", r->keep, opath,
               o->save ? "" : " (the resumed files)");
    } else {
        printf("weights are not kept: pass --save FILE to keep them\n");
    }
    fflush(stdout);
    return -1;
}

/* One data-parallel step on this rank's share x, y of the global batch (the
 * loader reads only it), then the global batch's loss, correct count and size
 * summed over the ranks (*n_global); a Ctrl-C on any rank stops every rank
 * after this step (they must run the same steps). */
static rt_status train_dist_step(train_run *r, rt_tensor *x, rt_tensor *y, rt_train_result *res, int64_t *n_global) {
    RT_TRY(rt_train_step(r->m->net, r->opt, &r->cfg, x, y, res));
    double n = (double)x->shape[0];
    double v[4] = {res->loss * n, (double)res->correct, train_interrupted ? 1.0 : 0.0, n};
    RT_TRY(rt_dist_sum(r->dist.d, v, 4));
    res->loss = v[0] / v[3];
    res->correct = (int64_t)v[1];
    *n_global = (int64_t)v[3];
    if (v[2] > 0) train_interrupted = 1;
    return RT_OK;
}

/* Appends the step rows of epoch `epoch` (0-based) to FILE.steps.csv,
 * whole rows and one flush, so that the file ends with the last complete
 * row; a failed write loses the log (train_log_lost). Called at the end of
 * an epoch and when a step fails, so that the steps before the failure (the
 * loss scaler's skipped steps when it gives up) are kept. The file counts
 * epochs from 1, as FILE.csv and the progress lines do. */
static void train_write_steps(train_run *r, int64_t epoch) {
    if (!r->steps_log) return;
    for (int64_t i = 0; i < r->n_epoch_steps; i++)
        fprintf(r->steps_log, "%lld,%lld,%.9g,%.9g,%d,%.9g\n", (long long)epoch + 1,
                (long long)r->epoch_steps[i].step,
                r->epoch_steps[i].lr, r->epoch_steps[i].loss, r->epoch_steps[i].skipped, r->epoch_steps[i].scale);
    r->n_epoch_steps = 0;
    if (!flush_ok(r->steps_log)) train_log_lost(r, r->steps_path, errno);
}

/* One epoch of library training steps over the loader. Returns 0 or 1. */
static int train_epoch(train_run *r, int64_t epoch, train_epoch_stats *e) {
    const train_opts *o = &r->o;
    *e = (train_epoch_stats){0};
    if (rt_loader_reset(r->loader, epoch) != RT_OK) return cli_fail("loader");
    rt_memstats_reset_peaks();
    rt_module_train(r->m->net, true);
    char label[32];
    snprintf(label, sizeof label, "epoch %lld/%lld", (long long)epoch + 1, (long long)o->epochs);
    cli_progress bar;
    cli_progress_start(&bar, stdout, label, r->per_epoch);
    double t0 = cli_now_s();
    r->n_epoch_steps = 0;
    size_t first_step = r->curves.n_steps;
    for (int64_t b = 0;; b++) {
        if (train_interrupted) { /* Ctrl-C: the unfinished epoch is dropped, its steps too */
            cli_progress_finish(&bar);
            r->curves.n_steps = first_step;
            r->stopped_step = b;
            return 130;
        }
        rt_tensor *x = NULL, *y = NULL;
        bool end = false;
        if (rt_loader_next(r->loader, &x, &y, &end) != RT_OK) {
            cli_progress_finish(&bar);
            train_write_steps(r, epoch);
            return cli_fail("loader");
        }
        if (end) break;
        int64_t step = rt_optimizer_step_count(r->opt);
        /* the second step (caches warm), or the first when there is only one */
        bool tracing = o->trace && step == (r->per_epoch * o->epochs > 1 ? 1 : 0);
        rt_memstats trace_start;
        if (tracing) {
            rt_memstats_get(&trace_start);
            rt_mem_trace_enable(1);
        }
        float lr = rt_lr_at(&r->sched, step);
        rt_optimizer_set_lr(r->opt, lr);
        rt_train_result res;
        int64_t n = x->shape[0];
        rt_status st = r->dist.d ? train_dist_step(r, x, y, &res, &n) : rt_train_step(r->m->net, r->opt, &r->cfg, x, y, &res);
        if (tracing) {
            write_memory_trace(r, step, &trace_start);
            rt_mem_trace_enable(0);
        }
        rt_tensor_release(x);
        rt_tensor_release(y);
        const double scale = r->scaler ? (double)rt_grad_scaler_get_scale(r->scaler) : 1.0;
        /* RT_ERR_NONFINITE with a scaler: the step ran and was skipped, and
         * it was the one that made the scaler give up; it is recorded too */
        bool ran = st == RT_OK || (r->scaler && st == RT_ERR_NONFINITE && !res.stepped);
        if (ran && b < r->per_epoch)
            r->epoch_steps[r->n_epoch_steps++] = (struct train_step_row){step, lr, res.loss, !res.stepped, scale};
        if (st != RT_OK) {
            cli_progress_finish(&bar);
            train_write_steps(r, epoch);
            return cli_fail("training step failed");
        }
        if (!res.stepped) { /* the loss scaler skipped it (Inf/NaN gradients): nothing was learnt */
            e->skipped++;
            continue;
        }
        e->loss_sum += res.loss * (double)n;
        e->correct += res.correct;
        e->seen += n;
        if (cli_training_curves_add_step(&r->curves, epoch, res.loss) != RT_OK) {
            cli_progress_finish(&bar);
            return cli_fail("cannot keep the training curves");
        }
        cli_progress_update(&bar, b + 1, res.loss, e->seen);
    }
    cli_progress_finish(&bar);
    e->secs = cli_now_s() - t0;
    rt_memstats_get(&e->peaks);
    train_write_steps(r, epoch);
    return 0;
}

/* Evaluates, prints the epoch's line and memory, appends to the logs,
 * redraws the curves and saves the weights. Returns 0 or 1. */
static int train_report(train_run *r, int64_t epoch, const train_epoch_stats *e) {
    const train_opts *o = &r->o;
    double test_loss, test_acc, seen = (double)e->seen;
    /* A hard limit (--memory-budget) was set for the training step the
     * planner planned; evaluation was not planned, and a forward of 256
     * images can exceed a budget sized for a small training batch. A no-grad
     * forward of B images needs less than a training step of B (nothing is
     * saved for backward, no activation gradients), so under a limit
     * evaluate in batches no larger than this rank's training micro-batch
     * (--accum-steps K runs the step K micro-batches at a time, and the plan
     * holds one micro-batch's activations). In eval mode batch norm uses
     * its running statistics: only the summation order of the loss changes. */
    int64_t eval_batch = 256;
    const int64_t k = r->cfg.accum_steps > 1 ? r->cfg.accum_steps : 1;
    const int64_t micro = (train_rank_batch(r) + k - 1) / k;
    if (rt_mem_get_limit() > 0 && micro < eval_batch) eval_batch = micro;
    if (cli_evaluate(r->m, r->test, eval_batch, &test_loss, &test_acc) != RT_OK) return cli_fail("evaluation failed");
    if (e->seen == 0) /* every step skipped by the loss scaler: no training loss to average */
        printf("epoch %lld: no optimizer step taken (all %lld steps skipped for Inf/NaN gradients) | test loss %.4f "
               "acc %.2f%% | %.1f s\n", (long long)epoch + 1, (long long)e->skipped, test_loss, 100.0 * test_acc,
               e->secs);
    else
        printf("epoch %lld: train loss %.4f acc %.2f%% | test loss %.4f acc %.2f%% | %.0f img/s, %.1f s\n",
               (long long)epoch + 1, e->loss_sum / seen, 100.0 * (double)e->correct / seen, test_loss,
               100.0 * test_acc, seen / e->secs, e->secs);
    cli_print_peaks(stdout, "  ", &e->peaks);
    if (r->mplan.plan.n > 0)
        printf("  memory plan: step peak %.2f MiB measured (tracked peak less the %.2f MiB of data sets), %.2f MiB "
               "predicted\n", (double)(e->peaks.peak_total - r->live_before) / 1048576.0,
               (double)r->live_before / 1048576.0, (double)r->mplan.predicted.peak_total / 1048576.0);
    if (r->dist.d) {
        rt_dist_stats ds;
        rt_dist_stats_get(r->dist.d, &ds);
        double steps = ds.steps > 0 ? (double)ds.steps : 1.0;
        printf("  data parallel, %d ranks (these are rank 0's figures): %s of %.1f MiB per step in %d bucket%s, "
               "in flight %.1f ms per step (first bucket started to last done), %.1f ms of it after backward (%.0f%% "
               "overlapped with backward)%s\n",
               r->dist.size, o->shard_optimizer ? "gradient reduce-scatter" : "gradient all-reduce",
               (double)ds.grad_bytes / 1048576.0, ds.buckets, ds.buckets == 1 ? "" : "s", 1e3 * ds.comm_s / steps,
               1e3 * ds.exposed_s / steps, ds.comm_s > 0 ? 100.0 * (1.0 - ds.exposed_s / ds.comm_s) : 0.0,
               o->shard_optimizer ? "; optimizer state sharded (OPTIM above is this rank's share)" : "");
    }
    cli_print_loss_scale(stdout, r->scaler, e->skipped);
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) == 0) /* ru_maxrss: KiB on Linux */
        printf("  process peak RSS %.1f MiB vs tracked peak %.2f MiB; outside tracking: the program and its "
               "libraries (oneDNN and its JIT-compiled kernels, OpenBLAS), thread stacks, malloc's overhead, and "
               "the freed blocks the allocator caches for the next step (%.1f MiB now)\n",
               (double)ru.ru_maxrss / 1024.0, (double)e->peaks.peak_total / 1048576.0,
               (double)e->peaks.cached_bytes / 1048576.0);
    const double mib = 1048576.0, saved = (double)e->peaks.peak[RT_MEM_SAVED];
    char label[96];
    if (rt_model_name_has_reversible(r->m->name))
        printf("  activation memory (SAVED peak): %.2f MiB measured with %s; plain backpropagation would keep "
               "%.2f MiB (%.1fx)\n", saved / mib, train_memory_label(r, label, sizeof label),
               (double)r->plain.peak[RT_MEM_SAVED] / mib,
               saved > 0 ? (double)r->plain.peak[RT_MEM_SAVED] / saved : 0.0);
    else
        printf("  activation memory (SAVED peak): %.2f MiB measured, %.2f MiB predicted\n", saved / mib,
               (double)r->pred.peak[RT_MEM_SAVED] / mib);
    fflush(stdout);
    if (r->log) {
        fprintf(r->log, "%lld,%.6f,%.6f,%.6f,%.6f,%.1f,%.2f", (long long)epoch + 1, e->loss_sum / seen,
                (double)e->correct / seen, test_loss, test_acc, seen / e->secs, e->secs);
        for (int c = 0; c < RT_MEM_NCAT; c++) fprintf(r->log, ",%.3f", (double)e->peaks.peak[c] / mib);
        fprintf(r->log, ",%.3f\n", (double)e->peaks.peak_total / mib);
        if (!flush_ok(r->log)) train_log_lost(r, r->o.log, errno);
    }
    if (o->log) {
        cli_epoch_row row = {.epoch = (double)(epoch + 1), .train_loss = e->loss_sum / seen,
                             .train_acc = (double)e->correct / seen, .test_loss = test_loss, .test_acc = test_acc};
        if (cli_training_curves_add_epoch(&r->curves, &row) != RT_OK ||
            cli_plot_training(r->png_path, &r->curves, o->log) != RT_OK) {
            fprintf(stderr, "revtorch train: cannot draw the curves of --log %s to %s: %s; the run will exit 1\n",
                    o->log, r->png_path, rt_error_last());
            r->lost = true;
        }
    }
    if (r->keep) {
        if (train_save(r, epoch + 1) != RT_OK) return cli_fail("cannot save the training state");
        char opath[CLI_PATH_MAX];
        cli_train_state_optim_path(r->keep, opath, sizeof opath);
        printf("saved epoch %lld to %s and %s\n", (long long)epoch + 1, r->keep, opath);
        fflush(stdout);
        r->saved_epoch = epoch + 1;
    }
    return 0;
}

/* Closes the logs (a failed close loses them: returns false) and frees the run. */
static bool train_teardown(train_run *r) {
    bool ok = true;
    if (r->log && fclose(r->log) != 0) {
        fprintf(stderr, "revtorch train: cannot write --log %s: %s\n", r->o.log, strerror(errno));
        ok = false;
    }
    if (r->steps_log && fclose(r->steps_log) != 0) {
        fprintf(stderr, "revtorch train: cannot write --log %s (its steps file %s): %s\n", r->o.log, r->steps_path,
                strerror(errno));
        ok = false;
    }
    r->log = r->steps_log = NULL;
    cli_outputs_release(&r->outs);
    cli_training_curves_free(&r->curves);
    rt_memory_plan_free(&r->mplan);
    free(r->epoch_steps);
    rt_loader_destroy(r->loader);
    rt_optimizer_destroy(r->opt);
    rt_grad_scaler_destroy(r->scaler);
    rt_model_destroy(r->m);
    rt_dataset_destroy(r->train);
    rt_dataset_destroy(r->test);
    return ok;
}

/* Appends `arg` to buf as one shell word (single-quoted unless plain). */
static void append_word(char *buf, size_t n, const char *arg) {
    size_t used = strlen(buf);
    bool plain = *arg != '\0';
    for (const char *c = arg; *c; c++)
        if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./=:,+-@%", *c)) plain = false;
    if (plain) {
        snprintf(buf + used, n - used, " %s", arg);
        return;
    }
    snprintf(buf + used, n - used, " '");
    for (const char *c = arg; *c; c++) {
        used = strlen(buf);
        if (*c == '\'')
            snprintf(buf + used, n - used, "'\\''");
        else
            snprintf(buf + used, n - used, "%c", *c);
    }
    used = strlen(buf);
    snprintf(buf + used, n - used, "'");
}

/* After Ctrl-C: where the run stopped, what is kept and the command that continues it. */
static void train_report_interrupt(const train_run *r, int64_t epoch) {
    fprintf(stderr, "revtorch train: interrupted at epoch %lld step %lld of %lld; ", (long long)epoch + 1,
            (long long)r->stopped_step, (long long)r->per_epoch);
    if (!r->keep) {
        fprintf(stderr, "nothing is kept (no --save); run again with --save FILE to keep the weights\n");
        return;
    }
    if (!r->saved_epoch) {
        fprintf(stderr, "no epoch finished, so nothing was saved to %s; run the same command again\n", r->keep);
        return;
    }
    char cmd[8192] = "revtorch train";
    for (int i = 1; i < r->argc; i++) {
        if (!strcmp(r->argv[i], "--resume")) {
            i++;
            continue;
        }
        append_word(cmd, sizeof cmd, r->argv[i]);
    }
    strncat(cmd, " --resume", sizeof cmd - strlen(cmd) - 1);
    append_word(cmd, sizeof cmd, r->keep);
    fprintf(stderr, "%s holds epoch %lld (the unfinished epoch is dropped); resume with: %s\n", r->keep,
            (long long)r->saved_epoch, cmd);
}

int cli_cmd_train(int argc, char **argv) {
    train_run r = {.argc = argc, .argv = argv};
    int rc = train_parse(argc, argv, &r.o);
    if (rc >= 0) return rc;
    if (!cli_threads_ok(r.o.threads)) return 2;
    rc = cli_dist_start(&r.dist, r.o.distributed);
    if (rc) return rc;
    if (r.dist.size > 1 && r.o.threads == 0) { /* the cores are shared by the ranks on this machine */
        const char *local = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
        long ranks_here = local ? atol(local) : r.dist.size, cores = sysconf(_SC_NPROCESSORS_ONLN);
        r.o.threads = ranks_here > 0 && cores / ranks_here > 1 ? cores / ranks_here : 1;
    }
    rt_set_num_threads((int)r.o.threads);
    /* Ctrl-C finishes the current step; another one a second later ends the process at once */
    struct sigaction sa = {0}, old_sa;
    sa.sa_handler = train_on_sigint;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    train_interrupted = 0;
    sigaction(SIGINT, &sa, &old_sa);
    rc = train_setup(&r);
    for (int64_t epoch = r.start_epoch; rc < 0 && epoch < r.last_epoch; epoch++) {
        train_epoch_stats e;
        int erc = train_epoch(&r, epoch, &e);
        if (erc == 130) {
            train_report_interrupt(&r, epoch);
            rc = 130;
        } else if (erc || train_report(&r, epoch, &e)) {
            rc = 1;
        }
    }
    /* a failure, or a refusal that only rank 0 can see (its outputs): stop every rank now */
    if (rc > 0 && rc != 130) rc = cli_dist_fail(&r.dist, rc);
    if (!train_teardown(&r)) r.lost = true;
    cli_dist_end(&r.dist);
    sigaction(SIGINT, &old_sa, NULL);
    if (rc < 0 && r.lost) {
        fprintf(stderr, "revtorch train: training finished, but an output was lost (see above)\n");
        rc = 1;
    }
    return rc < 0 ? 0 : rc;
}
