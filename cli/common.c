#include "common.h"

#include <errno.h>
#include <math.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/engine.h"
#include "autograd/node.h"
#include "core/rng.h"
#include "memory/precision.h"
#include "memory/predict.h"
#include "memory/reversible.h"
#include "data/mnist.h"
#include "kernels/conv.h"
#include "kernels/cpu.h"
#include "kernels/threads.h"
#include "io/safetensors.h"
#include "io/weights.h"
#include "ops/ops.h"
#include "optim/optim.h"
#include "train/seg_loss.h"

int cli_fail(const char *what) {
    fprintf(stderr, "revtorch: %s: %s\n", what, rt_error_last());
    return 1;
}

static const char *cli_value(int argc, char **argv, int *i) {
    if (*i + 1 >= argc) {
        fprintf(stderr, "revtorch: option %s needs a value (see --help)\n", argv[*i]);
        return NULL;
    }
    return argv[++*i];
}

/* "an integer >= 1" or "an integer from 1 to 64". */
static const char *int_range(int64_t lo, int64_t hi, char *buf, size_t n) {
    if (lo == INT64_MIN && hi == INT64_MAX) snprintf(buf, n, "an integer");
    else if (hi == INT64_MAX) snprintf(buf, n, "an integer >= %lld", (long long)lo);
    else snprintf(buf, n, "an integer from %lld to %lld", (long long)lo, (long long)hi);
    return buf;
}

bool cli_int_in(int argc, char **argv, int *i, int64_t lo, int64_t hi, const char *note, int64_t *out) {
    const char *opt = argv[*i], *v = cli_value(argc, argv, i);
    if (!v) return false;
    char *end, range[96];
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (*end || end == v) {
        fprintf(stderr, "revtorch: option %s expects %s%s%s, got '%s'\n", opt, int_range(lo, hi, range, sizeof range),
                note ? " " : "", note ? note : "", v);
        return false;
    }
    if (errno == ERANGE || x < lo || x > hi) {
        fprintf(stderr, "revtorch: option %s must be %s%s%s, got %s%s\n", opt, int_range(lo, hi, range, sizeof range),
                note ? " " : "", note ? note : "", v, errno == ERANGE ? " (too large for any integer)" : "");
        return false;
    }
    *out = x;
    return true;
}

bool cli_int(int argc, char **argv, int *i, int64_t *out) {
    return cli_int_in(argc, argv, i, INT64_MIN, INT64_MAX, NULL, out);
}

bool cli_float_in(int argc, char **argv, int *i, float lo, float hi, bool hi_open, const char *note, float *out) {
    const char *opt = argv[*i], *v = cli_value(argc, argv, i);
    if (!v) return false;
    char *end, range[96];
    errno = 0;
    float x = strtof(v, &end);
    if (*end || end == v) {
        fprintf(stderr, "revtorch: option %s expects a number, got '%s'\n", opt, v);
        return false;
    }
    if (isinf(hi)) snprintf(range, sizeof range, "finite and >= %g", (double)lo);
    else snprintf(range, sizeof range, "in [%g, %g%c", (double)lo, (double)hi, hi_open ? ')' : ']');
    /* ERANGE with a finite result is an underflow to (nearly) 0: accepted */
    if (!(x >= lo && (hi_open ? x < hi : x <= hi)) || isinf(x)) {
        fprintf(stderr, "revtorch: option %s must be %s%s%s, got %s\n", opt, range, note ? " " : "",
                note ? note : "", v);
        return false;
    }
    *out = x;
    return true;
}

bool cli_float(int argc, char **argv, int *i, float *out) {
    const char *opt = argv[*i], *v = cli_value(argc, argv, i);
    if (!v) return false;
    char *end;
    float x = strtof(v, &end);
    if (*end || end == v) {
        fprintf(stderr, "revtorch: option %s expects a number, got '%s'\n", opt, v);
        return false;
    }
    *out = x;
    return true;
}

bool cli_str(int argc, char **argv, int *i, const char **out) {
    const char *v = cli_value(argc, argv, i);
    if (v) *out = v;
    return v != NULL;
}

bool cli_conv_algo(int argc, char **argv, int *i) {
    const char *v = cli_value(argc, argv, i);
    if (!v) return false;
    rt_conv_algo algo;
    if (rt_conv_algo_parse(v, &algo) != RT_OK) {
        fprintf(stderr, "revtorch: --conv-algo: %s\n", rt_error_last());
        return false;
    }
    rt_conv_algo_set(algo);
    return true;
}

bool cli_on_off(int argc, char **argv, int *i, const char *name, bool *out) {
    const char *v = cli_value(argc, argv, i);
    if (!v) return false;
    if (strcmp(v, "on") && strcmp(v, "off")) {
        fprintf(stderr, "revtorch: %s: '%s'; choose on or off\n", name, v);
        return false;
    }
    *out = !strcmp(v, "on");
    return true;
}

bool cli_weight_cache(int argc, char **argv, int *i) {
    bool on;
    if (!cli_on_off(argc, argv, i, "--weight-cache", &on)) return false;
    rt_conv_weight_cache_set(on);
    return true;
}

bool cli_weight_layout(int argc, char **argv, int *i) {
    const char *v = cli_value(argc, argv, i);
    if (!v) return false;
    if (strcmp(v, "blocked") && strcmp(v, "plain")) {
        fprintf(stderr, "revtorch: --weight-layout: '%s'; choose blocked or plain\n", v);
        return false;
    }
    rt_model_blocked_weights_set(!strcmp(v, "blocked"));
    return true;
}

void cli_weight_layout_help(FILE *f, int col) {
    fprintf(f, "  %-*sblocked (default): convolution weights kept in the order oneDNN's\n"
               "%*sdirect kernels use, so those reorder neither the weight in the forward nor\n"
               "%*sits gradient; plain: PyTorch's OIHW. Files hold OIHW either way\n",
            col - 2, "--weight-layout L", col, "", col, "");
}

void cli_weight_cache_help(FILE *f, int col) {
    fprintf(f, "  %-*son: keep convolution weights reordered for oneDNN until they change\n"
               "%*s(faster recompute and eval, more TEMP memory); off (default)\n",
            col - 2, "--weight-cache W", col, "");
}

void cli_conv_algo_help(FILE *f, int col) {
    fprintf(f, "  %-*sauto (default: Winograd where faster), direct (as PyTorch's CPU\n"
               "%*sconvolution) or winograd (wherever oneDNN has a kernel)\n",
            col - 2, "--conv-algo A", col, "");
}

bool cli_model_arg(int argc, char **argv, int *i, cli_model_args *a, bool *ok) {
    const char *o = argv[*i];
    if (!strcmp(o, "--weights")) *ok = cli_str(argc, argv, i, &a->weights);
    else if (!strcmp(o, "--model")) *ok = cli_str(argc, argv, i, &a->model);
    else if (!strcmp(o, "--data")) *ok = cli_str(argc, argv, i, &a->data);
    else if (!strcmp(o, "--batch-size")) *ok = cli_int_in(argc, argv, i, 1, INT64_MAX, NULL, &a->batch);
    else if (!strcmp(o, "--threads")) *ok = cli_int(argc, argv, i, &a->threads);
    else if (!strcmp(o, "--conv-algo")) *ok = cli_conv_algo(argc, argv, i);
    else if (!strcmp(o, "--weight-cache")) *ok = cli_weight_cache(argc, argv, i);
    else return false;
    return true;
}

const char *cli_reversible_models(void) {
    static char names[256];
    if (!names[0]) {
        int n;
        const rt_zoo_entry *z = rt_zoo_entries(&n);
        size_t used = 0;
        for (int k = 0; z && k < n; k++)
            if (z[k].has_reversible && used < sizeof names)
                used += (size_t)snprintf(names + used, sizeof names - used, "%s%s", used ? ", " : "", z[k].name);
    }
    return names;
}

bool cli_strategy_fits_model(const char *cmd, const char *model, bool memory_reversible, bool grouping_given) {
    if (rt_model_name_has_reversible(model) || (!memory_reversible && !grouping_given)) return true;
    fprintf(stderr, "revtorch %s: %s applies to reversible blocks, and %s has none; drop it or pick a model "
                    "that has them: %s\n", cmd, grouping_given ? "--grouping" : "--memory reversible", model,
            cli_reversible_models());
    return false;
}

bool cli_model_known(const char *cmd, const char *model) {
    if (rt_zoo_find(model)) return true;
    fprintf(stderr, "revtorch %s: --model %s is not a model revtorch knows; choose one of %s\n", cmd, model,
            rt_model_names());
    return false;
}

/* When `path` names an optimizer-state file (`revtorch train --save W`
 * writes W's optimizer state, "step_count" and per-parameter buffers, to
 * W with .optim before .safetensors), the weights file beside it. */
static void weights_beside(const char *path, char *buf, size_t n) {
    const char *suffix = ".optim.safetensors";
    size_t len = strlen(path), sl = strlen(suffix);
    if (len <= sl || strcmp(path + len - sl, suffix)) {
        snprintf(buf, n, "saved beside it by --save");
        return;
    }
    snprintf(buf, n, "%.*s.safetensors", (int)(len - sl), path);
    if (access(buf, F_OK) != 0) { /* --save FILE without the extension */
        snprintf(buf, n, "%.*s", (int)(len - sl), path);
        if (access(buf, F_OK) != 0) snprintf(buf, n, "%.*s.safetensors", (int)(len - sl), path);
    }
}

/* Opens --weights and checks it holds weights; takes the model name from
 * it when --model was not given. Returns 0 or 1 (message printed). */
static int inspect_weights(cli_model_args *a) {
    rt_st_file *f;
    if (rt_st_open(a->weights, &f) != RT_OK) {
        fprintf(stderr, "revtorch: cannot read --weights %s: %s\n", a->weights, rt_error_last());
        return 1;
    }
    int rc = 0;
    const char *model = rt_st_metadata(f, "model");
    if (rt_st_find(f, "step_count")) {
        char w[4096];
        weights_beside(a->weights, w, sizeof w);
        fprintf(stderr, "revtorch: --weights %s is the optimizer state of a saved run, not weights; pass the "
                        "weights file %s instead\n", a->weights, w);
        rc = 1;
    } else if (!a->model && !model) {
        fprintf(stderr, "revtorch: --weights %s does not record which model it holds (no \"model\" metadata: "
                        "not saved by revtorch train); pass --model NAME, one of %s\n", a->weights,
                rt_model_names());
        rc = 1;
    } else if (!a->model) {
        snprintf(a->recorded, sizeof a->recorded, "%s", model);
        a->model = a->recorded;
    }
    rt_st_close(f);
    return rc;
}

int cli_model_args_finish(cli_model_args *a) {
    if (!cli_threads_ok(a->threads)) return 2;
    if (a->model && !cli_model_known(a->cmd, a->model)) return 2;
    if (a->weights) {
        int rc = inspect_weights(a);
        if (rc) return rc;
    }
    rt_set_num_threads((int)a->threads);
    return 0;
}

bool cli_threads_ok(int64_t threads) {
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (cores < 1) cores = 1;
    if (threads >= 0 && threads <= 4 * cores) return true;
    fprintf(stderr, "revtorch: --threads must be 0 (all %ld cores) or 1..%ld, got %lld\n", cores, 4 * cores,
            (long long)threads);
    return false;
}

rt_status cli_open_dataset(const char *dir, bool train, int64_t subset, rt_dataset **out) {
    if (subset < 0)
        return rt_error_set(RT_ERR_INVALID_ARG, "a subset size must be >= 0 (0: the whole set), got %lld",
                            (long long)subset);
    /* a subset is cut before decoding: only its samples are read */
    rt_dataset *ds;
    RT_TRY(rt_mnist_load_first(dir ? dir : rt_mnist_default_dir(), train, subset > 0 ? subset : INT64_MAX, &ds));
    if (ds->n == 0) {
        rt_dataset_destroy(ds);
        return rt_error_set(RT_ERR_FORMAT, "the %s set is empty; check --data", train ? "training" : "test");
    }
    *out = ds;
    return RT_OK;
}

rt_loader_options cli_loader_options(int64_t batch_size, bool train, bool augment, uint64_t seed) {
    rt_loader_options o = rt_loader_options_default();
    o.batch_size = batch_size;
    o.mean[0] = RT_FASHION_MNIST_MEAN;
    o.std[0] = RT_FASHION_MNIST_STD;
    o.seed = seed;
    o.shuffle = train;
    if (train && augment) {
        o.crop_padding = 2;
        o.hflip = true;
    }
    return o;
}

rt_status cli_evaluate(rt_model *m, const rt_dataset *ds, int64_t batch_size, double *loss, double *acc) {
    rt_loader_options o = cli_loader_options(batch_size, false, false, 0);
    rt_loader *l;
    RT_TRY(rt_loader_create(ds, &o, &l));
    bool was_training = m->net->training, grad = rt_grad_set_enabled(false);
    rt_module_train(m->net, false);
    double total_loss = 0.0;
    int64_t correct = 0, seen = 0;
    rt_status st = RT_OK;
    for (;;) {
        rt_tensor *x = NULL, *y = NULL, *logits = NULL, *l_ = NULL;
        bool end = false;
        st = rt_loader_next(l, &x, &y, &end);
        if (st != RT_OK || end) break;
        st = rt_model_forward(m, x, &logits);
        if (st == RT_OK) st = rt_cross_entropy(logits, y, 0.0f, &l_);
        if (st == RT_OK) {
            int64_t n = logits->shape[0];
            correct += rt_count_correct(logits, y);
            total_loss += (double)rt_tensor_f32(l_)[0] * (double)n;
            seen += n;
        }
        rt_tensor_release(x);
        rt_tensor_release(y);
        rt_tensor_release(logits);
        rt_tensor_release(l_);
        if (st != RT_OK) break;
    }
    rt_module_train(m->net, was_training);
    rt_grad_set_enabled(grad);
    rt_loader_destroy(l);
    *loss = seen ? total_loss / (double)seen : 0.0;
    *acc = seen ? (double)correct / (double)seen : 0.0;
    return st;
}

void cli_print_peaks(FILE *f, const char *indent, const rt_memstats *s) {
    fprintf(f, "%speak memory MiB:", indent);
    for (int c = 0; c < RT_MEM_NCAT; c++)
        fprintf(f, " %s %.2f", rt_mem_category_str((rt_mem_category)c), (double)s->peak[c] / 1048576.0);
    fprintf(f, " | total %.2f\n", (double)s->peak_total / 1048576.0);
}

/* The process's --precision (CLI state: one command per process). */
static rt_precision cli_precision_v = RT_PRECISION_FP32;

bool cli_precision_arg(int argc, char **argv, int *i) {
    const char *v = cli_value(argc, argv, i);
    if (!v) return false;
    if (rt_precision_parse(v, &cli_precision_v) != RT_OK) {
        fprintf(stderr, "revtorch: --precision: %s\n", rt_error_last());
        return false;
    }
    return true;
}

rt_precision cli_precision(void) { return cli_precision_v; }

bool cli_loss_scale_ok(const char *cmd, bool no_loss_scale, float init_scale) {
    const bool init_given = init_scale > 0;
    if (!no_loss_scale && !init_given) return true;
    if (cli_precision_v != RT_PRECISION_FP16) {
        /* bf16 keeps fp32's exponent range, so its gradients do not underflow
         * and it runs no scaler; an option for one would silently do nothing */
        char opt[64];
        if (init_given) snprintf(opt, sizeof opt, "--loss-scale-init %g", (double)init_scale);
        else snprintf(opt, sizeof opt, "--no-loss-scale");
        fprintf(stderr, "revtorch %s: %s applies to --precision fp16 (dynamic loss scaling, on by default there); "
                        "--precision %s trains without loss scaling (bf16 and fp32 have fp32's exponent range). "
                        "Drop %s or use --precision fp16\n", cmd, opt, rt_precision_str(cli_precision_v),
                init_given ? "--loss-scale-init" : "--no-loss-scale");
        return false;
    }
    if (no_loss_scale && init_given) {
        fprintf(stderr, "revtorch %s: --no-loss-scale turns fp16's loss scaler off, so --loss-scale-init %g would "
                        "set the first scale of a scaler that never runs; give one of them\n", cmd,
                (double)init_scale);
        return false;
    }
    return true;
}

bool cli_loss_scaler_attach(rt_train_config *cfg, float init_scale, bool off, rt_grad_scaler **out) {
    *out = NULL;
    if (cli_precision_v != RT_PRECISION_FP16 || off) return true;
    rt_grad_scaler_opts so = rt_grad_scaler_default_opts();
    if (init_scale > 0) so.init_scale = init_scale;
    if (!(*out = rt_grad_scaler_create(&so))) {
        fprintf(stderr, "revtorch: cannot create the loss scaler: %s\n", rt_error_last());
        return false;
    }
    cfg->hooks = rt_grad_scaler_hooks(*out);
    return true;
}

void cli_print_loss_scale(FILE *f, const rt_grad_scaler *s, int64_t skipped_epoch) {
    if (!s) return;
    fprintf(f, "  loss scale %g; %lld step%s skipped for Inf/NaN gradients this epoch, %lld in all\n",
            (double)rt_grad_scaler_get_scale(s), (long long)skipped_epoch, skipped_epoch == 1 ? "" : "s",
            (long long)rt_grad_scaler_skipped(s));
}

void cli_precision_help(FILE *f, int col) {
    fprintf(f, "  %-*sfp32 (default), bf16 or fp16: saved activations and activation gradients\n"
               "%*sstored in half precision, master weights and optimizer f32 (fp16: loss scaling)\n",
            col - 2, "--precision P", col, "");
}

void cli_strategy_apply(const cli_strategy *s, rt_model *m) {
    rt_module_set_reversible(m->net, s->reversible);
    rt_module_set_grouping(m->net, s->grouping, s->k);
    if (!cli_precision_apply(m)) { /* only out of memory; the tree is gone */
        fprintf(stderr, "revtorch: %s\n", rt_error_last());
        exit(1);
    }
}

bool cli_precision_apply(rt_model *m) {
    rt_module *w = NULL;
    if (cli_precision_v == RT_PRECISION_FP32 || !strcmp(m->net->cls->type, "Autocast")) return true;
    rt_status st = rt_autocast_wrap(m->net, cli_precision_v, &w);
    m->net = w;
    return st == RT_OK;
}

rt_status cli_predict_memory(const char *model, int64_t in_channels, int64_t num_classes,
                                const cli_strategy *strategy, const rt_optimizer_spec *opt,
                                const rt_train_config *cfg, int64_t n, int64_t h, int64_t w, rt_memstats *peaks) {
    rt_model *m = NULL;
    RT_TRY(rt_model_create(model, in_channels, num_classes, RT_DEVICE_META, 0, &m));
    cli_strategy_apply(strategy, m);
    int64_t xs[4] = {n, in_channels, h, w};
    rt_status st = rt_memory_predict(m->net, opt, cfg, 4, xs, 1, &n, RT_I32, peaks);
    rt_model_destroy(m);
    return st;
}

rt_status cli_predict_memory_volume(const char *model, int64_t in_channels, int64_t num_classes,
                                    const cli_strategy *strategy, const rt_optimizer_spec *opt,
                                    const rt_train_config *cfg, int64_t n, const int64_t size[3], rt_memstats *peaks) {
    rt_model *m = NULL;
    RT_TRY(rt_model_create(model, in_channels, num_classes, RT_DEVICE_META, 0, &m));
    cli_strategy_apply(strategy, m);
    rt_train_config c = *cfg;
    c.loss = rt_loss_dice_ce; /* the loss `revtorch segment` trains with */
    int64_t xs[5] = {n, in_channels, size[0], size[1], size[2]}, ys[4] = {n, size[0], size[1], size[2]};
    rt_status st = rt_memory_predict(m->net, opt, &c, 5, xs, 4, ys, RT_I32, peaks);
    rt_model_destroy(m);
    return st;
}

bool cli_optimizer_spec(const char *name, float lr, float momentum, float weight_decay, rt_optimizer_spec *out) {
    *out = (rt_optimizer_spec){0};
    if (!strcmp(name, "adamw")) {
        out->kind = RT_OPTIM_ADAMW;
        out->adamw = rt_adamw_default_opts();
        out->adamw.lr = lr;
        out->adamw.weight_decay = weight_decay;
    } else if (!strcmp(name, "sgd")) {
        out->kind = RT_OPTIM_SGD;
        out->sgd = rt_sgd_default_opts(lr);
        out->sgd.momentum = momentum;
        out->sgd.nesterov = momentum > 0;
        out->sgd.weight_decay = weight_decay;
    } else {
        fprintf(stderr, "revtorch: --optimizer must be sgd or adamw, got '%s'\n", name);
        return false;
    }
    return true;
}

const char *cli_optimizer_label(const rt_optimizer_spec *s) {
    if (s->kind == RT_OPTIM_ADAMW) return "AdamW";
    return s->sgd.momentum > 0 ? "SGD with momentum" : "SGD without momentum";
}

rt_optimizer *cli_optimizer_for(const rt_optimizer_spec *spec, const rt_state_dict *sd) {
    const int np = rt_state_dict_num_params(sd);
    rt_tensor **params = malloc((size_t)(np > 0 ? np : 1) * sizeof *params);
    if (!params) {
        rt_error_set(RT_ERR_OOM, "out of memory listing the parameters");
        return NULL;
    }
    rt_state_dict_params(sd, params, np);
    rt_optimizer *opt = rt_optimizer_create(spec, params, np);
    free(params);
    return opt;
}

bool cli_memory_mode(const char *memory, const char *grouping, cli_strategy *s) {
    bool *reversible = &s->reversible;
    rt_grouping *grouping_kind = &s->grouping;
    int *k = &s->k;
    if (!strcmp(memory, "reversible")) *reversible = true;
    else if (!strcmp(memory, "standard")) *reversible = false;
    else {
        fprintf(stderr, "revtorch: --memory must be standard or reversible, got '%s'\n", memory);
        return false;
    }
    *k = 0;
    if (!strcmp(grouping, "full")) *grouping_kind = RT_GROUPING_FULL;
    else if (!strcmp(grouping, "auto")) *grouping_kind = RT_GROUPING_AUTO;
    else {
        char *end;
        long v = strtol(grouping, &end, 10);
        if (*end || v < 1) {
            fprintf(stderr, "revtorch: --grouping must be full, auto or a block count >= 1, got '%s'\n", grouping);
            return false;
        }
        *grouping_kind = RT_GROUPING_EVERY;
        *k = (int)v;
    }
    return true;
}

bool cli_parse_dims(const char *s, int64_t v[3], int *n) {
    *n = 0;
    const char *p = s;
    while (s && *n < 3) {
        char *end;
        long long x = strtoll(p, &end, 10);
        if (end == p || x < 1 || x > 100000) return false;
        v[(*n)++] = x;
        if (*end == '\0') return true;
        if (*end != ',') return false;
        p = end + 1;
    }
    return false;
}

/* True when the "flags" line of /proc/cpuinfo lists `flag` as a whole word
 * ("avx512f" is not "avx512fp16"). */
static bool cpu_flag(const char *flags, const char *flag) {
    size_t n = strlen(flag);
    for (const char *p = strstr(flags, flag); p; p = strstr(p + 1, flag))
        if ((p == flags || p[-1] == ' ' || p[-1] == '\t') && (p[n] == ' ' || p[n] == '\n' || p[n] == '\0'))
            return true;
    return false;
}

void cli_print_cpu(FILE *f) {
    FILE *in = fopen("/proc/cpuinfo", "r");
    char line[8192], name[256] = "unknown", flags[8192] = "";
    while (in && fgets(line, sizeof line, in)) { /* the first CPU's lines; the others repeat them */
        if (!strncmp(line, "model name", 10) && !strcmp(name, "unknown")) {
            const char *c = strchr(line, ':');
            if (c) snprintf(name, sizeof name, "%s", c + 1 + (c[1] == ' '));
            name[strcspn(name, "\n")] = '\0';
        }
        if (!strncmp(line, "flags", 5) && !flags[0]) snprintf(flags, sizeof flags, "%s", line);
    }
    if (in) fclose(in);
    /* avx512_bf16 decides whether bf16 computes natively, amx (amx_tile) the
     * tile kernels; oneDNN's effective ISA shows a DNNL_MAX_CPU_ISA cap */
    const char *isa[][2] = {{"avx2", "avx2"},       {"fma", "fma"},
                            {"f16c", "f16c"},       {"avx512f", "avx512f"},
                            {"avx512_bf16", "avx512_bf16"}, {"amx", "amx_tile"}};
    fprintf(f, "cpu: %s;", name);
    for (size_t k = 0; k < sizeof isa / sizeof isa[0]; k++)
        fprintf(f, "%s %s %s", k ? "," : "", isa[k][0], cpu_flag(flags, isa[k][1]) ? "yes" : "no");
    int threads = rt_get_num_threads();
    fprintf(f, "; oneDNN isa %s; %d thread%s\n", rt_cpu_dnnl_isa_name(), threads, threads == 1 ? "" : "s");
}
