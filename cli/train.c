/* `revtorch train`: trains a model on Fashion-MNIST with SGD or AdamW,
 * gradient accumulation, a cosine/step schedule, checkpoints and resume. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <string.h>

#include "autograd/engine.h"
#include "checkpoint.h"
#include "cli.h"
#include "common.h"
#include "kernels/threads.h"
#include "memory/reversible.h"
#include "ops/ops.h"
#include "optim/optim.h"
#include "plot.h"
#include "progress.h"

typedef struct train_opts {
    const char *model, *data, *save, *resume, *log, *optimizer, *schedule, *memory, *grouping, *trace;
    int64_t epochs, batch_size, accum_steps, threads, seed, train_subset, test_subset, warmup_steps;
    int64_t stop_after; /* --stop-after-epoch; 0: run to --epochs */
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
    rt_cli_conv_algo_help(f, 24);
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
            "  --test-subset N       use only the first N test images (0: all)\n");
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
        } else if (!strcmp(a, "--model")) ok = rt_cli_str(argc, argv, &i, &o->model);
        else if (!strcmp(a, "--data")) ok = rt_cli_str(argc, argv, &i, &o->data);
        else if (!strcmp(a, "--save")) ok = rt_cli_str(argc, argv, &i, &o->save);
        else if (!strcmp(a, "--resume")) ok = rt_cli_str(argc, argv, &i, &o->resume);
        else if (!strcmp(a, "--log")) ok = rt_cli_str(argc, argv, &i, &o->log);
        else if (!strcmp(a, "--memory-trace")) ok = rt_cli_str(argc, argv, &i, &o->trace);
        else if (!strcmp(a, "--optimizer")) ok = rt_cli_str(argc, argv, &i, &o->optimizer);
        else if (!strcmp(a, "--schedule")) ok = rt_cli_str(argc, argv, &i, &o->schedule);
        else if (!strcmp(a, "--memory")) ok = rt_cli_str(argc, argv, &i, &o->memory);
        else if (!strcmp(a, "--grouping")) ok = rt_cli_str(argc, argv, &i, &o->grouping);
        else if (!strcmp(a, "--epochs")) ok = rt_cli_int(argc, argv, &i, &o->epochs);
        else if (!strcmp(a, "--batch-size")) ok = rt_cli_int(argc, argv, &i, &o->batch_size);
        else if (!strcmp(a, "--accum-steps")) ok = rt_cli_int(argc, argv, &i, &o->accum_steps);
        else if (!strcmp(a, "--conv-algo")) ok = rt_cli_conv_algo(argc, argv, &i);
        else if (!strcmp(a, "--threads")) ok = rt_cli_int(argc, argv, &i, &o->threads);
        else if (!strcmp(a, "--seed")) ok = rt_cli_int(argc, argv, &i, &o->seed);
        else if (!strcmp(a, "--warmup-steps")) ok = rt_cli_int(argc, argv, &i, &o->warmup_steps);
        else if (!strcmp(a, "--train-subset")) ok = rt_cli_int(argc, argv, &i, &o->train_subset);
        else if (!strcmp(a, "--stop-after-epoch")) ok = rt_cli_int(argc, argv, &i, &o->stop_after);
        else if (!strcmp(a, "--test-subset")) ok = rt_cli_int(argc, argv, &i, &o->test_subset);
        else if (!strcmp(a, "--lr")) ok = rt_cli_float(argc, argv, &i, &o->lr);
        else if (!strcmp(a, "--weight-decay")) ok = rt_cli_float(argc, argv, &i, &o->weight_decay);
        else if (!strcmp(a, "--momentum")) ok = rt_cli_float(argc, argv, &i, &o->momentum);
        else if (!strcmp(a, "--clip")) ok = rt_cli_float(argc, argv, &i, &o->clip);
        else if (!strcmp(a, "--label-smoothing")) ok = rt_cli_float(argc, argv, &i, &o->label_smoothing);
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
    bool rev;
    int kind, k;
    if (!rt_cli_memory_mode(o->memory, o->grouping, &rev, &kind, &k)) return 2;
    bool lr_given = !isnan(o->lr) || strstr_arg(argc, argv, "--lr");
    bool wd_given = !isnan(o->weight_decay) || strstr_arg(argc, argv, "--weight-decay");
    if (!lr_given) o->lr = adamw ? 1e-3f : 0.1f;
    if (!wd_given) o->weight_decay = adamw ? 0.05f : 5e-4f;
    if (!(o->lr >= 0 && isfinite(o->lr)) || !(o->weight_decay >= 0 && isfinite(o->weight_decay)) ||
        !(o->clip >= 0 && isfinite(o->clip)) || !(o->momentum >= 0 && isfinite(o->momentum)) ||
        !(o->label_smoothing >= 0 && o->label_smoothing <= 1) || o->warmup_steps < 0) {
        fprintf(stderr, "revtorch train: --lr, --weight-decay, --momentum and --clip must be finite and >= 0 "
                        "(--clip 0: off), --label-smoothing in [0, 1], --warmup-steps >= 0\n");
        return 2;
    }
    if (o->train_subset < 0 || o->test_subset < 0) {
        fprintf(stderr, "revtorch train: --train-subset and --test-subset must be >= 1\n");
        return 2;
    }
    if (o->epochs < 1 || o->batch_size < 1 || o->accum_steps < 1 || o->accum_steps > o->batch_size) {
        fprintf(stderr, "revtorch train: need --epochs >= 1, --batch-size >= 1 and 1 <= --accum-steps <= "
                        "--batch-size\n");
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

/* Writes the trace recorded since `start` as CSV and as a stacked timeline PNG. */
static void write_memory_trace(const char *path, const rt_memstats *start) {
    char png[4096];
    png_path(path, png, sizeof png);
    size_t n;
    const rt_mem_event *ev = rt_mem_trace_events(&n);
    if (rt_mem_trace_write_csv(path) != RT_OK ||
        rt_plot_memory_timeline(png, ev, n, start->live, "memory of one training step") != RT_OK)
        fprintf(stderr, "revtorch train: cannot write the memory trace: %s\n", rt_error_last());
    else
        printf("memory timeline of step 2: %s and %s (%zu events)\n", path, png, n);
}

/* Copies samples [first, first+count) of a batch into a new DATA tensor. */
static rt_tensor *batch_slice(const rt_tensor *t, int64_t first, int64_t count) {
    int64_t shape[5];
    memcpy(shape, t->shape, sizeof shape);
    size_t row = rt_tensor_nbytes(t) / (size_t)t->shape[0];
    shape[0] = count;
    rt_tensor *s = rt_tensor_create(t->ndim, shape, t->dtype, t->device, RT_MEM_DATA);
    if (s) memcpy(rt_tensor_data(s), (const char *)rt_tensor_data(t) + (size_t)first * row, (size_t)count * row);
    return s;
}

/* One optimizer step over a batch split into accum_steps micro-batches, each
 * loss weighted by its share of the batch (optim/accumulate.h). */
static rt_status train_step(const train_opts *o, rt_model *m, rt_optimizer *opt, rt_tensor **params, int np,
                            rt_tensor *x, rt_tensor *y, double *loss_out, int64_t *correct) {
    int64_t b = x->shape[0], k = o->accum_steps < b ? o->accum_steps : b, first = 0;
    double loss_sum = 0.0;
    rt_optimizer_zero_grad(opt);
    for (int64_t i = 0; i < k; i++) {
        int64_t n = b / k + (i < b % k ? 1 : 0);
        rt_tensor *xs = k > 1 ? batch_slice(x, first, n) : rt_tensor_retain(x);
        rt_tensor *ys = k > 1 ? batch_slice(y, first, n) : rt_tensor_retain(y);
        rt_tensor *logits = NULL, *loss = NULL, *scaled = NULL;
        rt_status st = (xs && ys) ? RT_OK : RT_ERR_OOM;
        if (st == RT_OK) st = rt_model_forward(m, xs, &logits);
        if (st == RT_OK) st = rt_cross_entropy(logits, ys, o->label_smoothing, &loss);
        float w = rt_accum_loss_scale(n, b);
        if (st == RT_OK) st = rt_mul_scalar(loss, w, &scaled);
        if (st == RT_OK) {
            float l = rt_tensor_f32(loss)[0];
            if (!(l == l) || l > 1e30f || l < -1e30f)
                st = rt_error_set(RT_ERR_NONFINITE, "loss is %g at this step: lower --lr or use --clip", l);
            loss_sum += (double)w * l;
            *correct += rt_cli_count_correct(logits, ys);
        }
        rt_tensor_release(logits);
        rt_tensor_release(loss);
        if (st == RT_OK) st = rt_backward(scaled, NULL, false);
        rt_tensor_release(scaled);
        rt_tensor_release(xs);
        rt_tensor_release(ys);
        if (st != RT_OK) return st;
        first += n;
    }
    if (o->clip > 0) {
        float norm;
        RT_TRY(rt_clip_grad_norm(params, np, o->clip, &norm));
    }
    *loss_out = loss_sum;
    return rt_optimizer_step(opt);
}

/* The shortest decimal form of v that reads back as v ("0.1", not
 * "0.100000001"), so that checkpoints compare exact values and print the
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
 * anneal over all epochs). --threads, --log, --save, --test-subset,
 * --conv-algo and --memory/--grouping may change (the same arithmetic,
 * rounded differently), and so may --stop-after-epoch. */
static void train_run_options(const train_opts *o, char *buf, size_t n) {
    char lr[32], mom[32], wd[32], clip[32], ls[32], epochs[48] = "";
    if (strcmp(o->schedule, "constant")) snprintf(epochs, sizeof epochs, " epochs=%lld", (long long)o->epochs);
    snprintf(buf, n,
             "batch_size=%lld accum_steps=%lld seed=%lld lr=%s momentum=%s weight_decay=%s schedule=%s "
             "warmup_steps=%lld clip=%s label_smoothing=%s no_augment=%s train_subset=%lld%s",
             (long long)o->batch_size, (long long)o->accum_steps, (long long)o->seed,
             float_str(o->lr, lr, sizeof lr), float_str(o->momentum, mom, sizeof mom),
             float_str(o->weight_decay, wd, sizeof wd), o->schedule, (long long)o->warmup_steps,
             float_str(o->clip, clip, sizeof clip), float_str(o->label_smoothing, ls, sizeof ls),
             o->augment ? "no" : "yes", (long long)o->train_subset, epochs);
}

int rt_cmd_train(int argc, char **argv) {
    train_opts o;
    int rc = train_parse(argc, argv, &o);
    if (rc >= 0) return rc;
    if (!rt_cli_threads_ok(o.threads)) return 2;
    rt_set_num_threads((int)o.threads);

    rt_dataset *train = NULL, *test = NULL;
    rt_model *m = NULL;
    rt_optimizer *opt = NULL;
    rt_loader *loader = NULL;
    rt_tensor **params = NULL;
    FILE *log = NULL, *steps_log = NULL;
    rc = 1;
    if (rt_cli_open_dataset(o.data, true, o.train_subset, &train) != RT_OK) {
        rt_cli_fail("cannot load the training set");
        goto out;
    }
    if (rt_cli_open_dataset(o.data, false, o.test_subset, &test) != RT_OK) {
        rt_cli_fail("cannot load the test set");
        goto out;
    }
    if ((o.save && check_writable(o.save, "--save") != RT_OK) ||
        (o.trace && check_writable(o.trace, "--memory-trace") != RT_OK)) {
        rt_cli_fail("bad output path");
        goto out;
    }
    if (rt_model_create(o.model, train->channels, train->num_classes, RT_DEVICE_CPU, (uint64_t)o.seed, &m)) {
        rt_cli_fail("cannot create the model");
        goto out;
    }
    int grouping, group_k;
    rt_cli_memory_mode(o.memory, o.grouping, &m->reversible, &grouping, &group_k);
    m->grouping = grouping;
    m->group_k = group_k;
    /* What one step would keep for backward with this strategy and with plain
     * backpropagation, predicted on meta tensors before anything runs. */
    rt_memstats pred, plain;
    int64_t batch = o.batch_size < train->n ? o.batch_size : train->n;
    int64_t micro = (batch + o.accum_steps - 1) / o.accum_steps;
    if (rt_cli_predict_memory(o.model, m->reversible, grouping, group_k, micro, train->channels, train->height,
                              train->width, &pred) != RT_OK ||
        rt_cli_predict_memory(o.model, false, RT_GROUPING_FULL, 0, micro, train->channels, train->height,
                              train->width, &plain) != RT_OK) {
        rt_cli_fail("cannot predict the memory of a step");
        goto out;
    }
    int np = rt_state_dict_num_params(m->sd);
    params = malloc((size_t)np * sizeof *params);
    if (!params) goto out;
    rt_state_dict_params(m->sd, params);
    if (!strcmp(o.optimizer, "adamw")) {
        rt_adamw_opts ao = rt_adamw_default_opts();
        ao.lr = o.lr;
        ao.weight_decay = o.weight_decay;
        opt = rt_adamw_create(params, np, &ao);
    } else {
        rt_sgd_opts so = rt_sgd_default_opts(o.lr);
        so.momentum = o.momentum;
        so.nesterov = o.momentum > 0;
        so.weight_decay = o.weight_decay;
        opt = rt_sgd_create(params, np, &so);
    }
    if (!opt) {
        rt_cli_fail("cannot create the optimizer");
        goto out;
    }
    rt_loader_options lo = rt_cli_loader_options(o.batch_size, true, o.augment, (uint64_t)o.seed);
    /* A last batch too small to give every micro-batch 2 samples would make
     * batch norm fail (one value per channel): drop it, as drop_last=True would. */
    int64_t rest = train->n % o.batch_size;
    lo.drop_last = rest > 0 && rest < 2 * o.accum_steps;
    if (rt_loader_create(train, &lo, &loader) != RT_OK) {
        rt_cli_fail("cannot create the data loader");
        goto out;
    }
    int64_t per_epoch = rt_loader_batches_per_epoch(loader), start_epoch = 0;
    rt_lr_schedule sched;
    if (make_schedule(o.schedule, o.lr, per_epoch * o.epochs, o.warmup_steps, &sched) != RT_OK) {
        rt_cli_fail("bad --schedule");
        goto out;
    }
    char run_options[512];
    train_run_options(&o, run_options, sizeof run_options);
    if (o.resume && rt_checkpoint_load(o.resume, o.optimizer, run_options, m, opt, &start_epoch) != RT_OK) {
        rt_cli_fail("cannot resume");
        goto out;
    }
    const int64_t last_epoch = o.stop_after ? o.stop_after : o.epochs;
    if (start_epoch >= last_epoch) {
        printf("revtorch train: checkpoint %s already holds %lld epoch%s; nothing left to train up to epoch %lld\n",
               o.resume, (long long)start_epoch, start_epoch == 1 ? "" : "s", (long long)last_epoch);
        rc = 0;
        goto out;
    }
    if (o.log) {
        char steps_path[4096];
        snprintf(steps_path, sizeof steps_path, "%.*s.steps.csv",
                 (int)(strlen(o.log) > 4 && !strcmp(o.log + strlen(o.log) - 4, ".csv") ? strlen(o.log) - 4
                                                                                         : strlen(o.log)),
                 o.log);
        log = fopen(o.log, start_epoch ? "a" : "w");
        steps_log = fopen(steps_path, start_epoch ? "a" : "w");
        if (!log || !steps_log) {
            fprintf(stderr, "revtorch train: cannot write --log %s: %s\n", o.log, strerror(errno));
            goto out;
        }
        fseek(log, 0, SEEK_END);
        if (ftell(log) == 0) { /* a new file, also when resuming into another log */
            fprintf(log, "epoch,train_loss,train_acc,test_loss,test_acc,images_per_s,epoch_s,peak_param_mib,"
                         "peak_grad_mib,peak_optim_mib,peak_saved_mib,peak_temp_mib,peak_data_mib,peak_total_mib\n");
            fprintf(steps_log, "epoch,step,lr,loss\n");
        }
    }
    printf("revtorch train: %s (%lld parameters) on %lld Fashion-MNIST images, batch %lld (%lld micro-batch%s), "
           "%s lr %g, %lld epoch%s, %d thread%s\n",
           m->name, (long long)rt_state_dict_num_param_elements(m->sd), (long long)train->n,
           (long long)o.batch_size, (long long)o.accum_steps, o.accum_steps == 1 ? "" : "es", o.optimizer, o.lr,
           (long long)o.epochs, o.epochs == 1 ? "" : "s", rt_get_num_threads(), rt_get_num_threads() == 1 ? "" : "s");
    const bool has_reversible = rt_model_name_has_reversible(m->name);
    if (has_reversible)
        printf("predicted per step (meta run): activations kept for backward %.2f MiB with --memory %s, %.2f MiB "
               "with plain backpropagation; step peak %.2f MiB vs %.2f MiB\n",
               (double)pred.peak[RT_MEM_SAVED] / 1048576.0, m->reversible ? "reversible" : "standard",
               (double)plain.peak[RT_MEM_SAVED] / 1048576.0, (double)pred.peak_total / 1048576.0,
               (double)plain.peak_total / 1048576.0);
    else
        printf("predicted per step (meta run): activations kept for backward %.2f MiB; step peak %.2f MiB\n",
               (double)pred.peak[RT_MEM_SAVED] / 1048576.0, (double)pred.peak_total / 1048576.0);
    for (int64_t epoch = start_epoch; epoch < last_epoch; epoch++) {
        if (rt_loader_reset(loader, epoch) != RT_OK) {
            rt_cli_fail("loader");
            goto out;
        }
        rt_memstats_reset_peaks();
        m->training = true;
        char label[32];
        snprintf(label, sizeof label, "epoch %lld/%lld", (long long)epoch + 1, (long long)o.epochs);
        rt_progress bar;
        rt_progress_start(&bar, stdout, label, per_epoch);
        double loss_sum = 0.0, t0 = rt_now_s();
        int64_t seen = 0, correct = 0;
        for (int64_t b = 0;; b++) {
            rt_tensor *x = NULL, *y = NULL;
            bool end = false;
            if (rt_loader_next(loader, &x, &y, &end) != RT_OK) {
                rt_cli_fail("loader");
                goto out;
            }
            if (end) break;
            int64_t step = rt_optimizer_step_count(opt);
            /* the second step (caches warm), or the first when there is only one */
            bool tracing = o.trace && step == (per_epoch * o.epochs > 1 ? 1 : 0);
            rt_memstats trace_start;
            if (tracing) {
                rt_memstats_get(&trace_start);
                rt_mem_trace_enable(1);
            }
            float lr = rt_lr_at(&sched, step);
            rt_optimizer_set_lr(opt, lr);
            double loss = 0.0;
            rt_status st = train_step(&o, m, opt, params, np, x, y, &loss, &correct);
            if (tracing) {
                write_memory_trace(o.trace, &trace_start);
                rt_mem_trace_enable(0);
            }
            int64_t n = x->shape[0];
            rt_tensor_release(x);
            rt_tensor_release(y);
            if (st != RT_OK) {
                rt_progress_finish(&bar);
                rt_cli_fail("training step failed");
                goto out;
            }
            loss_sum += loss * (double)n;
            seen += n;
            if (steps_log) fprintf(steps_log, "%lld,%lld,%.9g,%.9g\n", (long long)epoch, (long long)step, lr, loss);
            rt_progress_update(&bar, b + 1, loss, seen);
        }
        rt_progress_finish(&bar);
        double secs = rt_now_s() - t0, test_loss, test_acc;
        rt_memstats peaks;
        rt_memstats_get(&peaks);
        if (rt_cli_evaluate(m, test, 256, &test_loss, &test_acc) != RT_OK) {
            rt_cli_fail("evaluation failed");
            goto out;
        }
        printf("epoch %lld: train loss %.4f acc %.2f%% | test loss %.4f acc %.2f%% | %.0f img/s, %.1f s\n",
               (long long)epoch + 1, loss_sum / (double)seen, 100.0 * (double)correct / (double)seen, test_loss,
               100.0 * test_acc, (double)seen / secs, secs);
        rt_cli_print_peaks(stdout, "  ", &peaks);
        if (has_reversible)
            printf("  activation memory (SAVED peak): %.2f MiB measured; plain backpropagation would keep %.2f MiB "
                   "(%.1fx)\n", (double)peaks.peak[RT_MEM_SAVED] / 1048576.0,
                   (double)plain.peak[RT_MEM_SAVED] / 1048576.0,
                   peaks.peak[RT_MEM_SAVED] > 0 ? (double)plain.peak[RT_MEM_SAVED] / (double)peaks.peak[RT_MEM_SAVED]
                                                : 0.0);
        else
            printf("  activation memory (SAVED peak): %.2f MiB measured, %.2f MiB predicted\n",
                   (double)peaks.peak[RT_MEM_SAVED] / 1048576.0, (double)pred.peak[RT_MEM_SAVED] / 1048576.0);
        fflush(stdout);
        if (log) {
            fprintf(log, "%lld,%.6f,%.6f,%.6f,%.6f,%.1f,%.2f", (long long)epoch + 1, loss_sum / (double)seen,
                    (double)correct / (double)seen, test_loss, test_acc, (double)seen / secs, secs);
            for (int c = 0; c < RT_MEM_NCAT; c++) fprintf(log, ",%.3f", (double)peaks.peak[c] / 1048576.0);
            fprintf(log, ",%.3f\n", (double)peaks.peak_total / 1048576.0);
            fflush(log);
            fflush(steps_log);
            char png[4096];
            png_path(o.log, png, sizeof png);
            if (rt_plot_training_csv(o.log, png) != RT_OK)
                fprintf(stderr, "revtorch train: cannot draw %s: %s\n", png, rt_error_last());
        }
        if (o.save && rt_checkpoint_save(o.save, o.optimizer, run_options, m, opt, epoch + 1) != RT_OK) {
            rt_cli_fail("cannot save the checkpoint");
            goto out;
        }
    }
    rc = 0;
out:
    if (log) fclose(log);
    if (steps_log) fclose(steps_log);
    rt_loader_destroy(loader);
    rt_optimizer_destroy(opt);
    free(params);
    rt_model_destroy(m);
    rt_dataset_destroy(train);
    rt_dataset_destroy(test);
    return rc;
}
