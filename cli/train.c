/* `revtorch train`: trains a model on Fashion-MNIST with SGD or AdamW,
 * gradient accumulation, a cosine/step schedule, saved training state and resume. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <string.h>
#include <unistd.h>

#include "train_state.h"
#include "cli.h"
#include "common.h"
#include "kernels/threads.h"
#include "optim/optim.h"
#include "plot.h"
#include "progress.h"

typedef struct train_opts {
    const char *model, *data, *save, *resume, *log, *optimizer, *schedule, *memory, *grouping, *trace;
    int64_t epochs, batch_size, accum_steps, threads, seed, train_subset, test_subset, warmup_steps;
    int64_t stop_after; /* --stop-after-epoch; 0: run to --epochs */
    int64_t batch_asked; /* --batch-size when larger than the training set (then batch_size is the set's size) */
    int64_t warmup_asked; /* --warmup-steps when not shorter than the run (then scaled to 10% of it) */
    float lr, weight_decay, momentum, clip, label_smoothing;
    bool augment;
} train_opts;

static void train_usage(FILE *f) {
    fprintf(f,
            "usage: revtorch train [options]\n"
            "Trains a classifier on Fashion-MNIST and reports loss, accuracy, speed and memory.\n\n"
            "  --model NAME          %s\n"
            "                        (default revnet_small: a RevNet, reversible, 3 epochs ≈ 4.5 min on 2 cores)\n"
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
            rt_model_names());
    cli_conv_algo_help(f, 24);
    fprintf(f,
            "  --seed N              initialisation, shuffling and augmentation seed (default 0)\n"
            "  --save FILE           write weights (safetensors, torchvision names) after every epoch;\n"
            "                        optimizer state goes to FILE with .optim before .safetensors\n"
            "  --resume FILE         continue a run saved with --save (same options; a changed --batch-size,\n"
            "                        --seed, --lr, schedule, ... is refused)\n"
            "  --stop-after-epoch N  stop after epoch N of --epochs, as a time-limited job would; the\n"
            "                        schedule still spans --epochs, and --resume continues the run\n"
            "  --log FILE.csv        per-epoch results; per-step losses go to FILE.steps.csv and the\n"
            "                        curves to FILE.png (a new run replaces them, --resume appends)\n"
            "  --memory-trace F.csv  record every allocation of the second training step (time, bytes,\n"
            "                        category, op) to F.csv and draw the timeline to F.png\n"
            "  --train-subset N      use only the first N training images (quick runs, tests; 0: all)\n"
            "  --test-subset N       use only the first N test images (0: all)\n"
            "Exit status: 0 done, 1 runtime failure (files, data, training), 2 usage error (nothing was run).\n");
}

/* True when option `name` appears on the command line. */
static bool strstr_arg(int argc, char **argv, const char *name) {
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], name)) return true;
    return false;
}

/* RT_ERR_IO unless a file can be created beside `path` (checked before
 * training so a bad --save or --memory-trace fails at once, not after an epoch). */
static rt_status check_writable(const char *path, const char *option) {
    struct stat sb;
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode))
        return rt_error_set(RT_ERR_IO, "%s %s is a directory; give a file name", option, path);
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp.check", path);
    FILE *f = fopen(tmp, "w");
    if (!f)
        return rt_error_set(RT_ERR_IO, "cannot write %s %s: %s", option, path, strerror(errno));
    fclose(f);
    remove(tmp);
    return RT_OK;
}

static int train_parse(int argc, char **argv, train_opts *o) {
    *o = (train_opts){.model = "revnet_small", .optimizer = "sgd", .schedule = "cosine", .epochs = 3,
                      .batch_size = 128, .accum_steps = 1, .lr = NAN, .weight_decay = NAN, .momentum = 0.9f,
                      .warmup_steps = 100, .augment = true,
                      .memory = "reversible", .grouping = "full"};
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
        else {
            fprintf(stderr, "revtorch train: unknown option '%s' (see revtorch train --help)\n", a);
            return 2;
        }
        if (!ok) return 2;
    }
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
    if (!cli_model_known("train", o->model)) return 2;
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

/* "dir/run.csv" + ".png" → "dir/run.png" (the extension replaced when it is .csv). */
static void png_path(const char *csv, char *buf, size_t n) {
    size_t len = strlen(csv);
    if (len > 4 && !strcmp(csv + len - 4, ".csv")) len -= 4;
    snprintf(buf, n, "%.*s.png", (int)len, csv);
}

/* Writes the trace recorded since `start` as CSV and as a stacked timeline
 * PNG titled `title`, and prints the peak the picture marks. */
static void write_memory_trace(const char *path, const rt_memstats *start, const char *title) {
    char png[4096];
    png_path(path, png, sizeof png);
    size_t n;
    const rt_mem_event *ev = rt_mem_trace_events(&n);
    if (rt_mem_trace_write_csv(path) != RT_OK || cli_plot_memory_timeline(png, ev, n, start->live, title) != RT_OK) {
        fprintf(stderr, "revtorch train: cannot write the memory trace: %s\n", rt_error_last());
        return;
    }
    /* the picture's peak: the live total when tracing began plus the highest running sum */
    int64_t total = start->live_total, peak = total;
    for (size_t i = 0; i < n; i++)
        if ((total += ev[i].delta_bytes) > peak) peak = total;
    double p = (double)peak / 1048576.0;
    printf("memory timeline of step 2: %s and %s (%zu events), peak %.*f MiB as marked (DATA there: the decoded "
           "data sets and the batch, %.1f MiB when tracing began)\n", path, png, n,
           p >= 100.0 ? 0 : p >= 10.0 ? 1 : 2, p, (double)start->live[RT_MEM_DATA] / 1048576.0);
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
    rt_lr_schedule sched;
    FILE *log, *steps_log;
    char run_options[512];
    int64_t per_epoch, start_epoch, last_epoch;
    rt_memstats pred, plain; /* predicted step peaks: this strategy, plain backpropagation */
} train_run;

/* What one epoch of training measured. */
typedef struct train_epoch_stats {
    double loss_sum, secs;
    int64_t seen, correct;
    rt_memstats peaks;
} train_epoch_stats;

/* Opens the per-epoch log and the per-step log beside it (appending on resume). */
static int train_open_logs(train_run *r) {
    const char *path = r->o.log;
    char steps_path[4096];
    size_t len = strlen(path);
    snprintf(steps_path, sizeof steps_path, "%.*s.steps.csv",
             (int)(len > 4 && !strcmp(path + len - 4, ".csv") ? len - 4 : len), path);
    r->log = fopen(path, r->start_epoch ? "a" : "w");
    r->steps_log = fopen(steps_path, r->start_epoch ? "a" : "w");
    if (!r->log || !r->steps_log) {
        fprintf(stderr, "revtorch train: cannot write --log %s: %s\n", path, strerror(errno));
        return 1;
    }
    fseek(r->log, 0, SEEK_END);
    if (ftell(r->log) == 0) { /* a new file, also when resuming into another log */
        fprintf(r->log, "epoch,train_loss,train_acc,test_loss,test_acc,images_per_s,epoch_s,peak_param_mib,"
                        "peak_grad_mib,peak_optim_mib,peak_saved_mib,peak_temp_mib,peak_data_mib,peak_total_mib\n");
        fprintf(r->steps_log, "epoch,step,lr,loss\n");
    }
    return 0;
}

/* Predicts the step's memory with the chosen strategy and with plain
 * backpropagation (the same training step on meta tensors). */
static rt_status train_predict(train_run *r, const rt_optimizer_spec *spec) {
    const train_opts *o = &r->o;
    const rt_dataset *d = r->train;
    int64_t batch = o->batch_size < d->n ? o->batch_size : d->n;
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

/* Refuses a run whose predicted step does not fit in the memory available,
 * naming the options that would fit (each checked by a meta run). Returns
 * -1 to go on, else the exit code. */
static int train_check_memory(train_run *r, const rt_optimizer_spec *spec) {
    const train_opts *o = &r->o;
    const char *what;
    int64_t avail = memory_available(&what);
    int64_t need = r->pred.peak_total;
    if (avail < 0 || need <= avail) return -1;
    const double mib = 1048576.0;
    const rt_dataset *d = r->train;
    rt_memstats held;
    rt_memstats_get(&held);
    int64_t batch = o->batch_size < d->n ? o->batch_size : d->n;
    fprintf(stderr,
            "revtorch train: one training step of %s at batch %lld is predicted to need %.1f MiB (meta run: "
            "parameters, gradients, optimizer state, the batch and the activations), but only %.1f MiB are "
            "available (%s); the data sets already loaded hold %.1f MiB more. Training would be killed.\n",
            o->model, (long long)batch, (double)need / mib, (double)avail / mib, what,
            (double)held.live[RT_MEM_DATA] / mib);
    int found = 0;
    rt_memstats p;
    /* suggestions leave a tenth of the memory to what lies outside tracking
     * (libraries, thread stacks, the allocator's cache) */
    int64_t room = avail - avail / 10;
    /* gradient accumulation: the same step in K micro-batches */
    for (int64_t k = 2 * o->accum_steps; k <= batch && k <= 4096; k *= 2) {
        rt_train_config c = r->cfg;
        c.accum_steps = k;
        if (cli_predict_memory(o->model, d->channels, d->num_classes, &r->strategy, spec, &c, batch, d->height,
                               d->width, &p) != RT_OK)
            break;
        if (p.peak_total <= room) {
            fprintf(stderr, "  fits: --accum-steps %lld (same batch and gradient, %.1f MiB)\n", (long long)k,
                    (double)p.peak_total / mib);
            found++;
            break;
        }
    }
    /* a smaller batch */
    for (int64_t b = batch / 2; b >= 2 * o->accum_steps && b >= 1; b /= 2) {
        if (cli_predict_memory(o->model, d->channels, d->num_classes, &r->strategy, spec, &r->cfg, b, d->height,
                               d->width, &p) != RT_OK)
            break;
        if (p.peak_total <= room) {
            fprintf(stderr, "  fits: --batch-size %lld (%.1f MiB)\n", (long long)b, (double)p.peak_total / mib);
            found++;
            break;
        }
    }
    /* the reversible memory mode, for models that have one */
    if (rt_model_name_has_reversible(o->model) && !r->strategy.reversible) {
        cli_strategy rev = {.reversible = true, .grouping = RT_GROUPING_FULL};
        if (cli_predict_memory(o->model, d->channels, d->num_classes, &rev, spec, &r->cfg, batch, d->height,
                               d->width, &p) == RT_OK && p.peak_total <= room) {
            fprintf(stderr, "  fits: --memory reversible (%.1f MiB)\n", (double)p.peak_total / mib);
            found++;
        }
    }
    if (!found)
        fprintf(stderr, "  no smaller batch, --accum-steps or memory mode fits; free memory or use a smaller model\n");
    fprintf(stderr, "  (revtorch memory --model %s --batch-size %lld shows the prediction per category)\n", o->model,
            (long long)batch);
    return 1;
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
    const double mib = 1048576.0;
    if (rt_model_name_has_reversible(m->name))
        printf("predicted per step (meta run): activations kept for backward %.2f MiB with --memory %s, %.2f MiB "
               "with plain backpropagation; step peak %.2f MiB vs %.2f MiB\n",
               (double)r->pred.peak[RT_MEM_SAVED] / mib, r->strategy.reversible ? "reversible" : "standard",
               (double)r->plain.peak[RT_MEM_SAVED] / mib, (double)r->pred.peak_total / mib,
               (double)r->plain.peak_total / mib);
    else
        printf("predicted per step (meta run): activations kept for backward %.2f MiB; step peak %.2f MiB\n",
               (double)r->pred.peak[RT_MEM_SAVED] / mib, (double)r->pred.peak_total / mib);
}

/* Data, model, optimizer, loader, schedule, resume and logs. Returns -1 to
 * go on training, else the exit code (0: nothing left to train). */
static int train_setup(train_run *r) {
    const train_opts *o = &r->o;
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
    if ((o->save && check_writable(o->save, "--save") != RT_OK) ||
        (o->trace && check_writable(o->trace, "--memory-trace") != RT_OK))
        return cli_fail("bad output path");
    if (rt_model_create(o->model, r->train->channels, r->train->num_classes, RT_DEVICE_CPU, (uint64_t)o->seed, &r->m))
        return cli_fail("cannot create the model");
    cli_memory_mode(o->memory, o->grouping, &r->strategy);
    cli_strategy_apply(&r->strategy, r->m);
    r->cfg = (rt_train_config){.accum_steps = o->accum_steps, .clip = o->clip, .label_smoothing = o->label_smoothing};
    rt_optimizer_spec spec;
    cli_optimizer_spec(o->optimizer, o->lr, o->momentum, o->weight_decay, &spec);
    if (train_predict(r, &spec) != RT_OK) return cli_fail("cannot predict the memory of a step");
    int fits = train_check_memory(r, &spec);
    if (fits >= 0) return fits;
    int np = rt_state_dict_num_params(r->m->sd);
    rt_tensor **params = malloc((size_t)np * sizeof *params);
    if (!params) return cli_fail("out of memory");
    rt_state_dict_params(r->m->sd, params, np);
    r->opt = rt_optimizer_create(&spec, params, np);
    free(params);
    if (!r->opt) return cli_fail("cannot create the optimizer");
    rt_loader_options lo = cli_loader_options(o->batch_size, true, o->augment, (uint64_t)o->seed);
    /* A last batch too small to give every micro-batch 2 samples would make
     * batch norm fail (one value per channel): drop it, as drop_last=True would. */
    int64_t rest = r->train->n % o->batch_size;
    lo.drop_last = rest > 0 && rest < 2 * o->accum_steps;
    if (rt_loader_create(r->train, &lo, &r->loader) != RT_OK) return cli_fail("cannot create the data loader");
    r->per_epoch = rt_loader_batches_per_epoch(r->loader);
    if (o->warmup_steps > 0 && o->warmup_steps >= r->per_epoch * o->epochs) {
        /* the learning rate would never reach --lr */
        r->o.warmup_asked = o->warmup_steps;
        r->o.warmup_steps = r->per_epoch * o->epochs / 10;
        fprintf(stderr, "revtorch train: warning: --warmup-steps %lld is not shorter than the run's %lld steps, so "
                        "the learning rate would never reach --lr %g; warming up over %lld step%s (10%% of the run) "
                        "instead (pass a smaller --warmup-steps to choose)\n", (long long)o->warmup_asked,
                (long long)(r->per_epoch * o->epochs), o->lr, (long long)o->warmup_steps,
                o->warmup_steps == 1 ? "" : "s");
    }
    if (make_schedule(o->schedule, o->lr, r->per_epoch * o->epochs, o->warmup_steps, &r->sched) != RT_OK)
        return cli_fail("bad --schedule");
    train_run_options(o, r->run_options, sizeof r->run_options);
    if (o->resume && cli_train_state_load(o->resume, o->optimizer, r->run_options, r->m, r->opt, &r->start_epoch) != RT_OK)
        return cli_fail("cannot resume");
    r->last_epoch = o->stop_after ? o->stop_after : o->epochs;
    if (r->start_epoch >= r->last_epoch) {
        printf("revtorch train: %s already holds %lld epoch%s; nothing left to train up to epoch %lld\n",
               o->resume, (long long)r->start_epoch, r->start_epoch == 1 ? "" : "s", (long long)r->last_epoch);
        return 0;
    }
    if (o->log && train_open_logs(r)) return 1;
    train_print_header(r);
    return -1;
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
    for (int64_t b = 0;; b++) {
        rt_tensor *x = NULL, *y = NULL;
        bool end = false;
        if (rt_loader_next(r->loader, &x, &y, &end) != RT_OK) {
            cli_progress_finish(&bar);
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
        rt_status st = rt_train_step(r->m->net, r->opt, &r->cfg, x, y, &res);
        if (tracing) {
            char title[256];
            snprintf(title, sizeof title, "memory of one training step — %s, memory %s, batch %lld", o->model,
                     r->strategy.reversible && rt_model_name_has_reversible(o->model) ? "reversible" : "standard",
                     (long long)o->batch_size);
            write_memory_trace(o->trace, &trace_start, title);
            rt_mem_trace_enable(0);
        }
        int64_t n = x->shape[0];
        rt_tensor_release(x);
        rt_tensor_release(y);
        if (st != RT_OK) {
            cli_progress_finish(&bar);
            return cli_fail("training step failed");
        }
        e->loss_sum += res.loss * (double)n;
        e->correct += res.correct;
        e->seen += n;
        if (r->steps_log)
            fprintf(r->steps_log, "%lld,%lld,%.9g,%.9g\n", (long long)epoch, (long long)step, lr, res.loss);
        cli_progress_update(&bar, b + 1, res.loss, e->seen);
    }
    cli_progress_finish(&bar);
    e->secs = cli_now_s() - t0;
    rt_memstats_get(&e->peaks);
    return 0;
}

/* Evaluates, prints the epoch's line and memory, appends to the logs,
 * redraws the curves and saves the weights. Returns 0 or 1. */
static int train_report(train_run *r, int64_t epoch, const train_epoch_stats *e) {
    const train_opts *o = &r->o;
    double test_loss, test_acc, seen = (double)e->seen;
    if (cli_evaluate(r->m, r->test, 256, &test_loss, &test_acc) != RT_OK) return cli_fail("evaluation failed");
    printf("epoch %lld: train loss %.4f acc %.2f%% | test loss %.4f acc %.2f%% | %.0f img/s, %.1f s\n",
           (long long)epoch + 1, e->loss_sum / seen, 100.0 * (double)e->correct / seen, test_loss, 100.0 * test_acc,
           seen / e->secs, e->secs);
    cli_print_peaks(stdout, "  ", &e->peaks);
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) == 0) /* ru_maxrss: KiB on Linux */
        printf("  process peak RSS %.1f MiB vs tracked peak %.2f MiB; outside tracking: the program and its "
               "libraries (oneDNN and its JIT-compiled kernels, OpenBLAS), thread stacks, malloc's overhead, and "
               "the freed blocks the allocator caches for the next step (%.1f MiB now)\n",
               (double)ru.ru_maxrss / 1024.0, (double)e->peaks.peak_total / 1048576.0,
               (double)e->peaks.cached_bytes / 1048576.0);
    const double mib = 1048576.0, saved = (double)e->peaks.peak[RT_MEM_SAVED];
    if (rt_model_name_has_reversible(r->m->name))
        printf("  activation memory (SAVED peak): %.2f MiB measured; plain backpropagation would keep %.2f MiB "
               "(%.1fx)\n", saved / mib, (double)r->plain.peak[RT_MEM_SAVED] / mib,
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
        fflush(r->log);
        fflush(r->steps_log);
        char png[4096];
        png_path(o->log, png, sizeof png);
        if (cli_plot_training_csv(o->log, png) != RT_OK)
            fprintf(stderr, "revtorch train: cannot draw %s: %s\n", png, rt_error_last());
    }
    if (o->save && cli_train_state_save(o->save, o->optimizer, r->run_options, r->m, r->opt, epoch + 1) != RT_OK)
        return cli_fail("cannot save the training state");
    return 0;
}

static void train_teardown(train_run *r) {
    if (r->log) fclose(r->log);
    if (r->steps_log) fclose(r->steps_log);
    rt_loader_destroy(r->loader);
    rt_optimizer_destroy(r->opt);
    rt_model_destroy(r->m);
    rt_dataset_destroy(r->train);
    rt_dataset_destroy(r->test);
}

int cli_cmd_train(int argc, char **argv) {
    train_run r = {0};
    int rc = train_parse(argc, argv, &r.o);
    if (rc >= 0) return rc;
    if (!cli_threads_ok(r.o.threads)) return 2;
    rt_set_num_threads((int)r.o.threads);
    rc = train_setup(&r);
    for (int64_t epoch = r.start_epoch; rc < 0 && epoch < r.last_epoch; epoch++) {
        train_epoch_stats e;
        if (train_epoch(&r, epoch, &e) || train_report(&r, epoch, &e)) rc = 1;
    }
    train_teardown(&r);
    return rc < 0 ? 0 : rc;
}
