/* `revtorch superres train|eval|memory`: ×2 single-image super-resolution of
 * MRI slices with EDSR (Lim et al. 2017) and its reversible variant. The
 * default task is the 0.5 mm Colin27 brain of Debian's mricron-data: trained
 * on random patches of the lower axial slices, evaluated on held-out upper
 * slices against bicubic upsampling (data/superres.h, train/sr_metric.h). */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "common.h"
#include "data/nifti.h"
#include "autograd/node.h"
#include "data/superres.h"
#include "io/safetensors.h"
#include "io/weights.h"
#include "kernels/conv.h"
#include "kernels/threads.h"
#include "memory/predict.h"
#include "models/edsr.h"
#include "optim/schedule.h"
#include "ops/ops3d.h"
#include "outputs.h"
#include "progress.h"
#include "superres.h"
#include "train/sr_metric.h"

#define SR_DEFAULT_IMAGE "/usr/share/mricron/templates/ch2better.nii.gz"
#define SR_MAX_EVAL 64

typedef struct sr_opts {
    const char *cmd; /* "train", "eval", "memory" */
    const char *image, *model, *out, *weights;
    int64_t blocks, feats, scale, batch, patch, steps, seed, threads, eval_slices, gap, ref_batch, max_batch;
    float res_scale, lr, holdout, percentile, min_foreground, time_limit;
    bool cosine; /* --lr-schedule cosine: CosineAnnealingLR(t_max = steps) to 0 */
    const char *memory; /* --memory: reversible (default) or standard backpropagation through revedsr's body */
    bool model_given, blocks_given, feats_given, scale_given, res_scale_given; /* eval checks them */
} sr_opts;

static void sr_usage(FILE *f) {
    fprintf(f,
            "usage: revtorch superres train|eval|memory [options]\n"
            "x2 super-resolution of MRI slices with EDSR (Lim et al. 2017) or reversible EDSR. Default task\n"
            "(no options): the 0.5 mm Colin27 brain %s (mricron-data); the\n"
            "target is an axial slice, the input its 2x2 block mean (a voxel twice as large in-plane);\n"
            "intensities / the 99.9th percentile of the positive voxels, clipped to [0, 1]; trained on random\n"
            "patches of the axial slices below the held-out top slab, evaluated on slices of that slab.\n\n"
            "  train    train; writes OUT/weights.safetensors, OUT/train.csv (per step: loss, seconds), then\n"
            "           evaluates as eval does\n"
            "  eval     --weights FILE: PSNR and SSIM (border of `scale` pixels cut, data range 1) of the model\n"
            "           and of bicubic upsampling on the held-out slices; writes OUT/eval.csv, OUT/eval.json\n"
            "           and OUT/comparison.png (LR, bicubic, model, target on the middle evaluated slice).\n"
            "           The model's shape (--model, --blocks, --feats, --scale, --res-scale) comes from the\n"
            "           weights file; giving one that differs is a usage error\n"
            "  memory   predicted bytes of one training step (meta device: nothing runs) of edsr and revedsr\n"
            "           at --batch, and the largest revedsr batch that fits in edsr's step peak at --ref-batch\n\n"
            "  --image FILE          volume (NIfTI; default %s)\n"
            "  --model edsr|revedsr  EDSR, or EDSR whose residual body is reversible (default edsr)\n"
            "  --blocks N            residual blocks (default 16, EDSR's baseline)\n"
            "  --feats N             features (default 64)\n"
            "  --res-scale X         residual scaling (default 0.1, EDSR's)\n"
            "  --scale S             upscaling factor 2, 3 or 4 (default 2)\n"
            "  --batch N             patches per step (default 16, EDSR's)\n"
            "  --patch N             LR patch side (default 48, EDSR's; the target is N*scale)\n"
            "  --steps N             training steps (default 1000)\n"
            "  --time-limit S        also stop training after S seconds (default 0: no limit)\n"
            "  --lr X                Adam learning rate (default 1e-4, EDSR's)\n"
            "  --lr-schedule S       constant (default), or cosine: annealed to 0 over --steps (PyTorch's\n"
            "                        CosineAnnealingLR, T_max = steps), so a run ends at a settled point\n"
            "  --holdout F           top fraction of the axial slices held out (default 0.3)\n"
            "  --gap N               slices between the training and held-out parts (default 8)\n"
            "  --eval-slices N       held-out slices evaluated, evenly spaced among those with >= 10%% of\n"
            "                        voxels above 0.05 (default 8, at most %d)\n"
            "  --percentile P        robust maximum of the normalisation (default 99.9)\n"
            "  --min-foreground F    a training patch with a smaller fraction of voxels above 0.05 is drawn\n"
            "                        again (default 0.1; 0 keeps background patches)\n"
            "  --ref-batch N         memory: edsr's batch whose step peak is the budget (default 2)\n"
            "  --max-batch N         memory: largest batch tried (default 256)\n"
            "  --seed N              initialisation and sampling seed (default 0)\n"
            "  --out DIR             output directory (default superres-out; created)\n"
            "  --weights FILE        train: where to save (default OUT/weights.safetensors); eval: required\n"
            "  --threads N           threads (default: all cores)\n"
            "  --memory M            reversible (default): revedsr's body rebuilds its activations in backward;\n"
            "                        standard: the same network keeps them (ordinary backpropagation)\n",
            SR_DEFAULT_IMAGE, SR_DEFAULT_IMAGE, SR_MAX_EVAL);
    cli_conv_algo_help(f, 24);
    fprintf(f, "Exit status: 0 done, 1 runtime failure (files, data, training), 2 usage error (nothing was run).\n");
}

static int sr_parse(int argc, char **argv, sr_opts *o) {
    *o = (sr_opts){.cmd = argv[0], .image = SR_DEFAULT_IMAGE, .model = "edsr", .out = "superres-out",
                   .blocks = 16, .feats = 64, .scale = 2, .batch = 16, .patch = 48, .steps = 1000, .eval_slices = 8,
                   .gap = 8, .ref_batch = 2, .max_batch = 256, .res_scale = 0.1f, .lr = 1e-4f, .holdout = 0.3f,
                   .percentile = 99.9f, .min_foreground = 0.1f, .memory = "reversible"};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool ok = true;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            sr_usage(stdout);
            return 0;
        } else if (!strcmp(a, "--image")) ok = cli_str(argc, argv, &i, &o->image);
        else if (!strcmp(a, "--model")) ok = cli_str(argc, argv, &i, &o->model), o->model_given = true;
        else if (!strcmp(a, "--out")) ok = cli_str(argc, argv, &i, &o->out);
        else if (!strcmp(a, "--weights")) ok = cli_str(argc, argv, &i, &o->weights);
        else if (!strcmp(a, "--blocks")) o->blocks_given = true, ok = cli_int_in(argc, argv, &i, 1, 1024, NULL, &o->blocks);
        else if (!strcmp(a, "--feats")) o->feats_given = true, ok = cli_int_in(argc, argv, &i, 1, 4096, NULL, &o->feats);
        else if (!strcmp(a, "--scale")) o->scale_given = true, ok = cli_int_in(argc, argv, &i, 2, 4, NULL, &o->scale);
        else if (!strcmp(a, "--batch")) ok = cli_int_in(argc, argv, &i, 1, 4096, NULL, &o->batch);
        else if (!strcmp(a, "--patch")) ok = cli_int_in(argc, argv, &i, 4, 4096, NULL, &o->patch);
        else if (!strcmp(a, "--steps")) ok = cli_int_in(argc, argv, &i, 1, INT32_MAX, NULL, &o->steps);
        else if (!strcmp(a, "--eval-slices")) ok = cli_int_in(argc, argv, &i, 1, SR_MAX_EVAL, NULL, &o->eval_slices);
        else if (!strcmp(a, "--gap")) ok = cli_int_in(argc, argv, &i, 0, 4096, NULL, &o->gap);
        else if (!strcmp(a, "--ref-batch")) ok = cli_int_in(argc, argv, &i, 1, 4096, NULL, &o->ref_batch);
        else if (!strcmp(a, "--max-batch")) ok = cli_int_in(argc, argv, &i, 1, 4096, NULL, &o->max_batch);
        else if (!strcmp(a, "--seed")) ok = cli_int(argc, argv, &i, &o->seed);
        else if (!strcmp(a, "--threads")) ok = cli_int(argc, argv, &i, &o->threads);
        else if (!strcmp(a, "--conv-algo")) ok = cli_conv_algo(argc, argv, &i);
        else if (!strcmp(a, "--memory")) {
            ok = cli_str(argc, argv, &i, &o->memory);
            if (ok && strcmp(o->memory, "reversible") && strcmp(o->memory, "standard")) {
                fprintf(stderr, "revtorch superres %s: --memory must be reversible or standard, got '%s'\n", o->cmd,
                        o->memory);
                ok = false;
            }
        }
        else if (!strcmp(a, "--res-scale")) o->res_scale_given = true, ok = cli_float_in(argc, argv, &i, 0, INFINITY, false, NULL, &o->res_scale);
        else if (!strcmp(a, "--lr")) ok = cli_float_in(argc, argv, &i, 0, INFINITY, false, NULL, &o->lr);
        else if (!strcmp(a, "--lr-schedule")) {
            const char *v = NULL;
            ok = cli_str(argc, argv, &i, &v);
            if (ok && strcmp(v, "constant") && strcmp(v, "cosine")) {
                fprintf(stderr, "revtorch superres %s: --lr-schedule must be constant or cosine, got '%s'\n", o->cmd, v);
                ok = false;
            }
            if (ok) o->cosine = !strcmp(v, "cosine");
        }
        else if (!strcmp(a, "--holdout")) {
            ok = cli_float(argc, argv, &i, &o->holdout);
            if (ok && !(o->holdout > 0.0f && o->holdout < 1.0f)) {
                fprintf(stderr, "revtorch: option --holdout must be in (0, 1) (fraction of the axial slices held out; "
                                "some must be), got %s\n", argv[i]);
                ok = false;
            }
        }
        else if (!strcmp(a, "--percentile")) ok = cli_float_in(argc, argv, &i, 1, 100, false, NULL, &o->percentile);
        else if (!strcmp(a, "--min-foreground"))
            ok = cli_float_in(argc, argv, &i, 0, 1, false, NULL, &o->min_foreground);
        else if (!strcmp(a, "--time-limit"))
            ok = cli_float_in(argc, argv, &i, 0, INFINITY, false, "(seconds; 0: none)", &o->time_limit);
        else {
            fprintf(stderr, "revtorch superres %s: unknown option '%s' (see revtorch superres --help)\n", o->cmd, a);
            return 2;
        }
        if (!ok) return 2;
    }
    if (strcmp(o->model, "edsr") && strcmp(o->model, "revedsr")) {
        fprintf(stderr, "revtorch superres %s: --model must be edsr or revedsr, got '%s'\n", o->cmd, o->model);
        return 2;
    }
    /* reversible EDSR's couplings split the features in halves; memory builds revedsr whatever --model */
    if (o->feats % 2 && (!strcmp(o->cmd, "memory") || (!strcmp(o->cmd, "train") && !strcmp(o->model, "revedsr")))) {
        fprintf(stderr, "revtorch superres %s: --feats must be even for --model revedsr (its couplings split the "
                        "features in halves), got %lld\n", o->cmd, (long long)o->feats);
        return 2;
    }
    if (!cli_threads_ok(o->threads)) return 2;
    if (!strcmp(o->cmd, "eval") && !o->weights) {
        fprintf(stderr, "revtorch superres eval: --weights FILE is required (the file `revtorch superres train` "
                        "saved)\n");
        return 2;
    }
    return -1;
}

/* The model of the options as an rt_model named edsr or revedsr (EDSR's
 * state-dict paths, models/edsr.h), parameters on `device`, initialised from
 * Philox stream `seed`. */
static rt_status sr_model_create(const sr_opts *o, rt_device device, uint64_t seed, rt_model **out) {
    *out = NULL;
    const bool rev = !strcmp(o->model, "revedsr");
    rt_edsr_config c;
    RT_TRY(rt_edsr_config_get(rev ? "edsr_rev" : "edsr", &c));
    c.n_resblocks = (int)o->blocks, c.n_feats = o->feats, c.res_scale = o->res_scale, c.scale = (int)o->scale;
    rt_model *m = calloc(1, sizeof *m);
    if (!m) return rt_error_set(RT_ERR_OOM, "out of memory");
    snprintf(m->name, sizeof m->name, "%s", rev ? "revedsr" : "edsr");
    m->in_channels = c.in_channels, m->num_classes = c.out_channels;
    rt_init_ctx ctx = rt_init_ctx_make(device, seed);
    rt_status st = rt_edsr_build(&c, &ctx, &m->net);
    if (st == RT_OK) st = rt_module_state_dict(m->net, &m->sd);
    if (st != RT_OK) {
        rt_model_destroy(m);
        return st;
    }
    *out = m;
    return RT_OK;
}

/* CPU seconds this process has used (all its threads). With one thread and
 * other jobs on the machine, a step's CPU time is the time it would take on
 * an idle core, where its wall time is not. */
static double sr_cpu_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* The L1 loss of EDSR's training (rt_loss_fn). */
static rt_status sr_l1(rt_tensor *output, rt_tensor *target, void *user, rt_tensor **loss) {
    (void)user;
    return rt_l1_loss(output, target, loss);
}

static void sr_adam(float lr, rt_optimizer_spec *spec) {
    cli_optimizer_spec("adamw", lr, 0.0f, 0.0f, spec); /* AdamW without weight decay is Adam */
}

/* Predicted peaks of one steady-state step of the options' model at `batch`. */
static rt_status sr_predict(const sr_opts *o, int64_t batch, rt_memstats *p) {
    rt_model *m = NULL;
    RT_TRY(sr_model_create(o, RT_DEVICE_META, 0, &m));
    cli_strategy strategy;
    cli_memory_mode(o->memory, "full", &strategy);
    cli_strategy_apply(&strategy, m);
    rt_status st = m->net ? RT_OK : rt_error_set(RT_ERR_OOM, "out of memory");
    rt_optimizer_spec spec;
    sr_adam(o->lr, &spec);
    rt_train_config cfg = {.accum_steps = 1, .loss = sr_l1};
    const int64_t P = o->patch * o->scale;
    const int64_t xs[4] = {batch, 1, o->patch, o->patch}, ys[4] = {batch, 1, P, P};
    if (st == RT_OK) st = rt_memory_predict(m->net, &spec, &cfg, 4, xs, 4, ys, RT_F32, p);
    rt_model_destroy(m);
    return st;
}

/* The volume, normalised, and its split. */
typedef struct sr_data {
    rt_tensor *volume;
    double q; /* the robust maximum */
    rt_sr_split split;
    int64_t ks[SR_MAX_EVAL], n_eval;
} sr_data;

static int sr_load(const sr_opts *o, sr_data *d) {
    if (access(o->image, R_OK) != 0) {
        fprintf(stderr, "revtorch superres %s: cannot read --image %s: %s%s\n", o->cmd, o->image, strerror(errno),
                strcmp(o->image, SR_DEFAULT_IMAGE) ? "" : " (the default task needs Debian's mricron-data "
                                                          "package: apt-get install mricron-data)");
        return 1;
    }
    /* the shape from the header first: a volume that is not 3-D is refused before its data are read */
    rt_nifti_info info;
    if (rt_nifti_read_info(o->image, &info) != RT_OK) {
        fprintf(stderr, "revtorch superres %s: --image %s: %s\n", o->cmd, o->image, rt_error_last());
        return 1;
    }
    int nd = info.ndim; /* trailing axes of size 1 do not count */
    while (nd > 1 && info.dim[nd] == 1) nd--;
    char dims[160] = "";
    for (int a = 1; a <= info.ndim && a <= 7; a++) {
        size_t l = strlen(dims);
        snprintf(dims + l, sizeof dims - l, "%s%lld", a > 1 ? "x" : "", (long long)info.dim[a]);
    }
    if (nd > 3) {
        fprintf(stderr, "revtorch superres %s: --image %s is %d-D (%s); give a single 3-D volume\n", o->cmd,
                o->image, nd, dims);
        return 1;
    }
    if (nd < 3 || info.dim[3] < 3) {
        fprintf(stderr, "revtorch superres %s: --image %s is %d-D (%s); superres needs a 3-D volume with >= 3 axial "
                        "slices\n", o->cmd, o->image, nd, dims);
        return 1;
    }
    if (rt_nifti_read(o->image, NULL, &d->volume) != RT_OK) {
        fprintf(stderr, "revtorch superres %s: --image %s: %s\n", o->cmd, o->image, rt_error_last());
        return 1;
    }
    if (rt_sr_normalize(d->volume, o->percentile, &d->q) != RT_OK ||
        rt_sr_split_slices(d->volume->shape[1], o->holdout, o->gap, &d->split) != RT_OK) {
        fprintf(stderr, "revtorch superres %s: --image %s: %s\n", o->cmd, o->image, rt_error_last());
        return 1;
    }
    const int64_t H = d->volume->shape[2], W = d->volume->shape[3];
    if (!strcmp(o->cmd, "train") && (o->patch * o->scale > H || o->patch * o->scale > W)) { /* eval draws no patches */
        fprintf(stderr, "revtorch superres %s: --patch %lld at scale %lld needs %lld-pixel targets; the slices are "
                        "%lldx%lld: use --patch <= %lld\n", o->cmd, (long long)o->patch, (long long)o->scale,
                (long long)(o->patch * o->scale), (long long)H, (long long)W, (long long)((H < W ? H : W) / o->scale));
        return 2;
    }
    if (rt_sr_eval_slices(d->volume, &d->split, o->eval_slices, 0.05f, 0.1, d->ks, &d->n_eval) != RT_OK) {
        fprintf(stderr, "revtorch superres %s: %s\n", o->cmd, rt_error_last());
        return 1;
    }
    if (d->n_eval == 0) {
        fprintf(stderr, "revtorch superres %s: no held-out slice has 10%% of its voxels above 0.05; hold out more "
                        "(--holdout)\n", o->cmd);
        return 1; /* a property of the volume: a data problem */
    }
    return -1;
}

/* Creates --out and its missing parents (mkdir -p) unless it exists as a
 * directory. *created (optional) receives how many path levels were made, for
 * sr_unmake_out. */
static int sr_make_out(const sr_opts *o, int *created) {
    if (created) *created = 0;
    struct stat sb;
    if (stat(o->out, &sb) == 0) {
        if (S_ISDIR(sb.st_mode)) return -1;
        fprintf(stderr, "revtorch superres %s: --out %s exists and is not a directory\n", o->cmd, o->out);
        return 1;
    }
    char path[CLI_PATH_MAX];
    if (snprintf(path, sizeof path, "%s", o->out) >= (int)sizeof path) {
        fprintf(stderr, "revtorch superres %s: --out %s: path too long\n", o->cmd, o->out);
        return 1;
    }
    int made = 0;
    for (char *p = path + 1;; p++) { /* each prefix ending before a '/', then the whole path */
        const bool end = *p == '\0';
        if (*p != '/' && !end) continue;
        *p = '\0';
        if (mkdir(path, 0777) == 0) made++;
        else if (errno != EEXIST || stat(path, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
            fprintf(stderr, "revtorch superres %s: cannot create --out %s (at %s): %s\n", o->cmd, o->out, path,
                    strerror(errno == EEXIST ? ENOTDIR : errno));
            return 1;
        }
        if (end) break;
        *p = '/';
    }
    if (created) *created = made;
    return -1;
}

/* Removes the `created` innermost levels of --out that sr_make_out made, if
 * still empty (rmdir fails on a non-empty directory). */
static void sr_unmake_out(const sr_opts *o, int created) {
    char path[CLI_PATH_MAX];
    snprintf(path, sizeof path, "%s", o->out);
    for (int i = 0; i < created; i++) {
        size_t l = strlen(path);
        while (l > 1 && path[l - 1] == '/') path[--l] = '\0';
        if (rmdir(path) != 0) return;
        char *slash = strrchr(path, '/');
        if (!slash) return;
        *slash = '\0';
    }
}

static void out_path(const sr_opts *o, const char *name, char *buf, size_t n) {
    snprintf(buf, n, "%s/%s", o->out, name);
}

/* Opens PATH.tmp.PID for writing; sr_commit renames it over PATH. */
static FILE *sr_open_tmp(const char *path, char *tmp, size_t n) {
    snprintf(tmp, n, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f) rt_error_set(RT_ERR_IO, "cannot write %s: %s", tmp, strerror(errno));
    return f;
}

static rt_status sr_commit(FILE *f, const char *tmp, const char *path) {
    bool bad = ferror(f) != 0;
    if (fclose(f) != 0) bad = true;
    if (bad || rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        return rt_error_set(RT_ERR_IO, "cannot write %s: %s", path, strerror(e ? e : EIO));
    }
    return RT_OK;
}

/* Model output for LR input x [1, 1, h, w], plain order, clamped to [0, 1]
 * (EDSR's evaluation quantises to the image range). */
static rt_status sr_infer(rt_model *m, rt_tensor *x, rt_tensor **out) {
    rt_tensor *y = NULL, *p = NULL;
    RT_TRY(rt_model_forward(m, x, &y));
    rt_status st = rt_to_layout(y, RT_LAYOUT_PLAIN, &p);
    rt_tensor_release(y);
    if (st != RT_OK) return st;
    float *v = rt_tensor_f32(p);
    for (int64_t i = 0; i < rt_tensor_numel(p); i++) v[i] = v[i] < 0.0f ? 0.0f : v[i] > 1.0f ? 1.0f : v[i];
    *out = p;
    return RT_OK;
}

/* Bicubic upsampling of x to the target's size (interpolate, align_corners=False), clamped to [0, 1]. */
static rt_status sr_bicubic(rt_tensor *x, const rt_tensor *hr, rt_tensor **out) {
    const int64_t size[2] = {hr->shape[2], hr->shape[3]};
    RT_TRY(rt_upsample_bicubic(x, size, NULL, out));
    float *v = rt_tensor_f32(*out);
    for (int64_t i = 0; i < rt_tensor_numel(*out); i++) v[i] = v[i] < 0.0f ? 0.0f : v[i] > 1.0f ? 1.0f : v[i];
    return RT_OK;
}

/* The L1 loss bicubic upsampling of the batch would have (unclamped, as the
 * model's output in training), for train.csv. */
static rt_status sr_bicubic_l1(rt_tensor *lr, rt_tensor *hr, double *out) {
    bool grad = rt_grad_set_enabled(false);
    const int64_t size[2] = {hr->shape[2], hr->shape[3]};
    rt_tensor *b = NULL, *l = NULL;
    rt_status st = rt_upsample_bicubic(lr, size, NULL, &b);
    if (st == RT_OK) st = rt_l1_loss(b, hr, &l);
    if (st == RT_OK) *out = rt_tensor_f32(l)[0];
    rt_tensor_release(b);
    rt_tensor_release(l);
    rt_grad_set_enabled(grad);
    return st;
}

/* Nearest-neighbour enlargement of x by s (for display). */
static rt_tensor *sr_nearest(const rt_tensor *x, int64_t s) {
    const int64_t h = x->shape[2], w = x->shape[3], shape[4] = {1, 1, h * s, w * s};
    rt_tensor *t = rt_tensor_create(4, shape, RT_F32, RT_DEVICE_CPU, RT_MEM_DATA);
    if (!t) return NULL;
    const float *a = rt_tensor_f32(x);
    float *b = rt_tensor_f32(t);
    for (int64_t i = 0; i < h * s; i++)
        for (int64_t j = 0; j < w * s; j++) b[i * w * s + j] = a[(i / s) * w + j / s];
    return t;
}

typedef struct sr_scores {
    double psnr[2][SR_MAX_EVAL], ssim[2][SR_MAX_EVAL]; /* [0] bicubic, [1] model */
    double mean_psnr[2], mean_ssim[2];
} sr_scores;

/* PSNR/SSIM of bicubic and the model on every evaluation slice; the PNG of
 * the middle one. */
static int sr_evaluate(const sr_opts *o, rt_model *m, const sr_data *d, const char *label, double train_s) {
    sr_scores sc = {0};
    rt_module_train(m->net, false);
    bool grad = rt_grad_set_enabled(false);
    const int64_t mid = d->n_eval / 2;
    rt_tensor *keep[4] = {NULL, NULL, NULL, NULL}; /* the middle slice's LR, bicubic, model, HR */
    cli_progress bar;
    cli_progress_start(&bar, stdout, "evaluate", d->n_eval);
    bar.unit = "slices";
    rt_status st = RT_OK;
    for (int64_t e = 0; e < d->n_eval && st == RT_OK; e++) {
        rt_tensor *hr = NULL, *lr = NULL, *bic = NULL, *sr = NULL;
        st = rt_sr_slice(d->volume, d->ks[e], o->scale, &hr);
        if (st == RT_OK) st = rt_sr_downsample(hr, o->scale, &lr);
        if (st == RT_OK) st = sr_bicubic(lr, hr, &bic);
        if (st == RT_OK) st = sr_infer(m, lr, &sr);
        if (st == RT_OK && !rt_tensor_same_shape(sr, hr)) {
            char a[64], b[64];
            st = rt_error_set(RT_ERR_SHAPE, "the model's output %s differs from the target %s",
                              rt_tensor_shape_str(sr, a, sizeof a), rt_tensor_shape_str(hr, b, sizeof b));
        }
        const rt_tensor *cand[2] = {bic, sr};
        for (int k = 0; k < 2 && st == RT_OK; k++) {
            st = rt_psnr(cand[k], hr, o->scale, 1.0, &sc.psnr[k][e]);
            if (st == RT_OK) st = rt_ssim(cand[k], hr, o->scale, 1.0, &sc.ssim[k][e]);
            sc.mean_psnr[k] += sc.psnr[k][e] / (double)d->n_eval;
            sc.mean_ssim[k] += sc.ssim[k][e] / (double)d->n_eval;
        }
        if (st == RT_OK && e == mid) {
            keep[0] = rt_tensor_retain(lr), keep[1] = rt_tensor_retain(bic), keep[2] = rt_tensor_retain(sr);
            keep[3] = rt_tensor_retain(hr);
        }
        rt_tensor_release(hr), rt_tensor_release(lr), rt_tensor_release(bic), rt_tensor_release(sr);
        cli_progress_update(&bar, e + 1, NAN, e + 1);
    }
    cli_progress_finish(&bar);
    rt_grad_set_enabled(grad);
    rt_module_train(m->net, true);
    int rc = 1;
    if (st != RT_OK) {
        cli_fail("evaluation failed");
        goto done;
    }
    printf("held-out slices (k in [%lld, %lld), %lld evaluated), border %lld, data range 1:\n",
           (long long)d->split.heldout_lo, (long long)d->split.heldout_hi, (long long)d->n_eval, (long long)o->scale);
    printf("  bicubic  PSNR %.3f dB  SSIM %.4f\n", sc.mean_psnr[0], sc.mean_ssim[0]);
    printf("  %-7s  PSNR %.3f dB  SSIM %.4f\n", m->name, sc.mean_psnr[1], sc.mean_ssim[1]);
    char path[CLI_PATH_MAX], tmp[CLI_PATH_MAX + 32];
    out_path(o, "eval.csv", path, sizeof path);
    FILE *f = sr_open_tmp(path, tmp, sizeof tmp);
    if (!f) {
        cli_fail("cannot write the outputs");
        goto done;
    }
    fprintf(f, "slice,bicubic_psnr,bicubic_ssim,model_psnr,model_ssim\n");
    for (int64_t e = 0; e < d->n_eval; e++)
        fprintf(f, "%lld,%.6f,%.6f,%.6f,%.6f\n", (long long)d->ks[e], sc.psnr[0][e], sc.ssim[0][e], sc.psnr[1][e],
                sc.ssim[1][e]);
    fprintf(f, "mean,%.6f,%.6f,%.6f,%.6f\n", sc.mean_psnr[0], sc.mean_ssim[0], sc.mean_psnr[1], sc.mean_ssim[1]);
    if (sr_commit(f, tmp, path) != RT_OK) {
        cli_fail("cannot write the outputs");
        goto done;
    }
    out_path(o, "eval.json", path, sizeof path);
    if (!(f = sr_open_tmp(path, tmp, sizeof tmp))) {
        cli_fail("cannot write the outputs");
        goto done;
    }
    fprintf(f, "{\n  \"image\": \"%s\",\n  \"model\": \"%s\",\n  \"scale\": %lld,\n  \"robust_max\": %.6g,\n"
               "  \"heldout_slices\": [%lld, %lld],\n  \"evaluated_slices\": %lld,\n  \"border\": %lld,\n"
               "  \"bicubic\": {\"psnr\": %.6f, \"ssim\": %.6f},\n  \"model_scores\": {\"psnr\": %.6f, \"ssim\": %.6f},\n"
               "  \"train_seconds\": %.1f\n}\n", o->image, m->name, (long long)o->scale, d->q,
            (long long)d->split.heldout_lo, (long long)d->split.heldout_hi, (long long)d->n_eval,
            (long long)o->scale, sc.mean_psnr[0], sc.mean_ssim[0], sc.mean_psnr[1], sc.mean_ssim[1], train_s);
    if (sr_commit(f, tmp, path) != RT_OK) {
        cli_fail("cannot write the outputs");
        goto done;
    }
    /* the picture: LR shown by nearest neighbour, bicubic, model, target; a
     * detail box at the slice's centre */
    rt_tensor *near = sr_nearest(keep[0], o->scale);
    if (!near) {
        cli_fail("out of memory");
        goto done;
    }
    char cap[4][96], title[256];
    snprintf(cap[0], sizeof cap[0], "LR %lldx%lld (nearest x%lld)", (long long)keep[0]->shape[3],
             (long long)keep[0]->shape[2], (long long)o->scale);
    snprintf(cap[1], sizeof cap[1], "bicubic  %.2f dB", sc.psnr[0][mid]);
    snprintf(cap[2], sizeof cap[2], "%s  %.2f dB", m->name, sc.psnr[1][mid]);
    snprintf(cap[3], sizeof cap[3], "target %lldx%lld", (long long)keep[3]->shape[3], (long long)keep[3]->shape[2]);
    snprintf(title, sizeof title, "held-out axial slice k = %lld, x%lld (PSNR on this slice; mean over %lld slice%s: "
             "bicubic %.2f dB, %s %.2f dB)%s%s", (long long)d->ks[mid], (long long)o->scale, (long long)d->n_eval,
             d->n_eval == 1 ? "" : "s",
             sc.mean_psnr[0], m->name, sc.mean_psnr[1], label ? ", " : "", label ? label : "");
    const cli_sr_panel panels[4] = {{near, cap[0]}, {keep[1], cap[1]}, {keep[2], cap[2]}, {keep[3], cap[3]}};
    const int64_t H = keep[3]->shape[2], W = keep[3]->shape[3], box = H < 64 || W < 64 ? (H < W ? H : W) : 64;
    out_path(o, "comparison.png", path, sizeof path);
    st = cli_superres_png(path, panels, 4, (H - box) / 2, (W - box) / 2, box, 4, title);
    rt_tensor_release(near);
    if (st != RT_OK) {
        cli_fail("cannot write the picture");
        goto done;
    }
    printf("wrote %s/eval.csv, %s/eval.json, %s/comparison.png\n", o->out, o->out, o->out);
    rc = 0;
done:
    for (int i = 0; i < 4; i++) rt_tensor_release(keep[i]);
    return rc;
}

/* Metadata written with the weights, read back by eval. */
static rt_status sr_save_weights(const sr_opts *o, const rt_model *m, const sr_data *d, const char *path,
                                 int64_t steps) {
    char v[12][32];
    snprintf(v[0], 32, "%lld", (long long)o->blocks);
    snprintf(v[1], 32, "%lld", (long long)o->feats);
    snprintf(v[2], 32, "%.9g", (double)o->res_scale);
    snprintf(v[3], 32, "%lld", (long long)o->scale);
    snprintf(v[4], 32, "%.9g", (double)o->holdout);
    snprintf(v[5], 32, "%lld", (long long)o->gap);
    snprintf(v[6], 32, "%.9g", (double)o->percentile);
    snprintf(v[7], 32, "%.9g", d->q);
    snprintf(v[8], 32, "%lld", (long long)steps);
    snprintf(v[9], 32, "%lld", (long long)o->batch);
    snprintf(v[10], 32, "%lld", (long long)o->patch);
    snprintf(v[11], 32, "%lld", (long long)o->seed);
    const char *meta[] = {"model", m->name, "task", "superres", "blocks", v[0], "feats", v[1], "res_scale", v[2],
                          "scale", v[3], "holdout", v[4], "gap", v[5], "percentile", v[6], "robust_max", v[7],
                          "steps", v[8], "batch", v[9], "patch", v[10], "seed", v[11]};
    return rt_weights_save(m->sd, NULL, 0, meta, (int)(sizeof meta / sizeof meta[0]) / 2, path);
}

static int sr_train(const sr_opts *o) {
    sr_data d = {0};
    int rc = sr_load(o, &d);
    if (rc >= 0) goto out_data;
    rc = sr_make_out(o, NULL);
    if (rc >= 0) goto out_data;
    char weights[CLI_PATH_MAX], csv[CLI_PATH_MAX], csv_tmp[CLI_PATH_MAX + 32];
    if (o->weights) snprintf(weights, sizeof weights, "%s", o->weights);
    else out_path(o, "weights.safetensors", weights, sizeof weights);
    { /* the weights are saved after training: find an unwritable path now (a file created and removed beside it) */
        struct stat sb;
        char probe[CLI_PATH_MAX + 32];
        snprintf(probe, sizeof probe, "%s.tmp.%ld", weights, (long)getpid());
        FILE *pf = NULL;
        int e = stat(weights, &sb) == 0 && S_ISDIR(sb.st_mode) ? EISDIR : 0;
        if (!e && !(pf = fopen(probe, "wx"))) e = errno;
        if (pf) {
            fclose(pf);
            unlink(probe);
        }
        if (e) {
            fprintf(stderr, "revtorch superres train: cannot write --weights %s: %s (found before training; give "
                            "a writable file path)\n", weights, strerror(e));
            rc = 1;
            goto out_data;
        }
    }
    out_path(o, "train.csv", csv, sizeof csv);
    rt_model *m = NULL;
    rt_sr_sampler *sampler = NULL;
    rt_optimizer *opt = NULL;
    FILE *log = NULL;
    rc = 1;
    const int64_t D = d.volume->shape[1], H = d.volume->shape[2], W = d.volume->shape[3];
    printf("revtorch superres train: %s %lldx%lldx%lld (i, j, k), robust max (%.1fth percentile of the positive "
           "voxels) %.6g\n", o->image, (long long)W, (long long)H, (long long)D, (double)o->percentile, d.q);
    printf("training slices k < %lld, gap %lld, held-out k >= %lld (%lld slices, %lld evaluated)\n",
           (long long)d.split.train_hi, (long long)o->gap, (long long)d.split.heldout_lo,
           (long long)(D - d.split.heldout_lo), (long long)d.n_eval);
    if (sr_model_create(o, RT_DEVICE_CPU, (uint64_t)o->seed, &m) != RT_OK) {
        cli_fail("cannot create the model");
        goto done;
    }
    cli_strategy strategy;
    cli_memory_mode(o->memory, "full", &strategy);
    cli_strategy_apply(&strategy, m);
    if (!m->net) {
        cli_fail("out of memory");
        goto done;
    }
    rt_memstats predicted;
    if (sr_predict(o, o->batch, &predicted) != RT_OK) {
        cli_fail("cannot predict the step's memory");
        goto done;
    }
    rt_optimizer_spec spec;
    sr_adam(o->lr, &spec);
    rt_train_config cfg = {.accum_steps = 1, .loss = sr_l1};
    const int np = rt_state_dict_num_params(m->sd);
    rt_tensor **params = malloc((size_t)np * sizeof *params);
    if (!params) {
        cli_fail("out of memory");
        goto done;
    }
    rt_state_dict_params(m->sd, params, np);
    opt = rt_optimizer_create(&spec, params, np);
    free(params);
    if (!opt) {
        cli_fail("cannot create the optimizer");
        goto done;
    }
    rt_sr_patch_options po = {.scale = o->scale, .patch = o->patch, .slice_lo = d.split.train_lo,
                              .slice_hi = d.split.train_hi, .augment = true, .threshold = 0.05f,
                              .min_foreground = o->min_foreground, .seed = (uint64_t)o->seed};
    if (rt_sr_sampler_create(d.volume, &po, &sampler) != RT_OK) {
        cli_fail("cannot create the patch sampler");
        goto done;
    }
    if (!(log = sr_open_tmp(csv, csv_tmp, sizeof csv_tmp))) {
        cli_fail("cannot write the training log");
        goto done;
    }
    fprintf(log, "step,loss,bicubic_loss,lr,seconds,step_seconds,step_cpu_seconds\n");
    const rt_lr_schedule sched = {.kind = o->cosine ? RT_LR_COSINE : RT_LR_CONSTANT, .base_lr = o->lr,
                                  .t_max = o->steps};
    printf("%s (%lld parameters: %lld blocks x %lld features, res_scale %g, x%lld), batch %lld of %lldx%lld LR "
           "patches, Adam lr %g%s, L1 loss, %lld steps, %d thread%s\n",
           m->name, (long long)rt_state_dict_num_param_elements(m->sd), (long long)o->blocks, (long long)o->feats,
           (double)o->res_scale, (long long)o->scale, (long long)o->batch, (long long)o->patch, (long long)o->patch,
           (double)o->lr, o->cosine ? " cosine-annealed to 0" : "", (long long)o->steps, rt_get_num_threads(), rt_get_num_threads() == 1 ? "" : "s");
    printf("predicted step (meta device): activations (SAVED peak) %.1f MiB, step peak %.1f MiB\n",
           (double)predicted.peak[RT_MEM_SAVED] / 1048576.0, (double)predicted.peak_total / 1048576.0);
    fflush(stdout);
    cli_progress bar;
    cli_progress_start(&bar, stdout, "train", o->steps);
    const double t0 = cli_now_s();
    double steady_s = 0, steady_cpu = 0; /* seconds of steps 2.. (the first allocates the optimizer state) */
    int64_t done_steps = 0, outside = 0;
    rt_memstats peaks = {0};
    for (int64_t s = 0; s < o->steps; s++) {
        if (s == 1) { /* steady state from here: what lives outside the step is the volume */
            rt_memstats now;
            rt_memstats_get(&now);
            outside = now.live_total - now.live[RT_MEM_PARAM] - now.live[RT_MEM_GRAD] - now.live[RT_MEM_OPTIM];
            rt_memstats_reset_peaks();
        }
        const double ts = cli_now_s(), cs = sr_cpu_s();
        rt_tensor *lr = NULL, *hr = NULL;
        rt_train_result res;
        double bic_loss = NAN;
        const float lr_now = rt_lr_at(&sched, s);
        rt_optimizer_set_lr(opt, lr_now);
        rt_status st = rt_sr_sampler_next(sampler, o->batch, &lr, &hr, NULL);
        if (st == RT_OK) st = rt_train_step(m->net, opt, &cfg, lr, hr, &res);
        const double dt = cli_now_s() - ts, dc = sr_cpu_s() - cs;
        if (st == RT_OK) st = sr_bicubic_l1(lr, hr, &bic_loss); /* the reference, outside the step's time */
        rt_tensor_release(lr);
        rt_tensor_release(hr);
        if (st != RT_OK) {
            cli_progress_finish(&bar);
            cli_fail("training step failed");
            goto done;
        }
        const double now = cli_now_s();
        if (s >= 1) steady_s += dt, steady_cpu += dc;
        done_steps = s + 1;
        fprintf(log, "%lld,%.6f,%.6f,%g,%.3f,%.4f,%.4f\n", (long long)done_steps, res.loss, bic_loss, (double)lr_now,
                now - t0, dt, dc);
        cli_progress_update(&bar, done_steps, res.loss, done_steps * o->batch);
        if (o->time_limit > 0 && now - t0 >= o->time_limit) break;
    }
    cli_progress_finish(&bar);
    rt_memstats_get(&peaks);
    const double train_s = cli_now_s() - t0;
    rt_status st = sr_commit(log, csv_tmp, csv);
    log = NULL;
    if (st != RT_OK) {
        cli_fail("cannot write the training log");
        goto done;
    }
    printf("trained %lld steps in %.1f s", (long long)done_steps, train_s);
    if (done_steps > 1) {
        printf("; steps 2..%lld: %.3f s/step wall, %.3f s/step CPU (%d thread%s; the CPU time is the step time of an "
               "idle machine at one thread, the wall time depends on the other jobs)\n", (long long)done_steps,
               steady_s / (double)(done_steps - 1), steady_cpu / (double)(done_steps - 1), rt_get_num_threads(),
               rt_get_num_threads() == 1 ? "" : "s");
        printf("measured step (steps 2..%lld): activations (SAVED peak) %.1f MiB, step peak %.1f MiB (tracked, above "
               "the volume); predicted %.1f and %.1f MiB\n", (long long)done_steps,
               (double)peaks.peak[RT_MEM_SAVED] / 1048576.0, (double)(peaks.peak_total - outside) / 1048576.0,
               (double)predicted.peak[RT_MEM_SAVED] / 1048576.0, (double)predicted.peak_total / 1048576.0);
        cli_print_peaks(stdout, "  ", &peaks);
    } else {
        printf("\n");
    }
    if (sr_save_weights(o, m, &d, weights, done_steps) != RT_OK) {
        cli_fail("cannot save the weights");
        goto done;
    }
    printf("wrote %s, %s\n", weights, csv);
    fflush(stdout);
    char label[96];
    snprintf(label, sizeof label, "%lld steps of batch %lld", (long long)done_steps, (long long)o->batch);
    rc = sr_evaluate(o, m, &d, label, train_s);
done:
    if (log) {
        fclose(log);
        unlink(csv_tmp);
    }
    rt_sr_sampler_destroy(sampler);
    rt_optimizer_destroy(opt);
    rt_model_destroy(m);
out_data:
    rt_tensor_release(d.volume);
    return rc;
}

/* One metadata value of the weights as an integer in [lo, hi] (false with a
 * message otherwise); absent keys leave *out alone. */
static bool sr_meta_int(const rt_st_file *f, const char *path, const char *key, int64_t lo, int64_t hi,
                        int64_t *out) {
    const char *v = rt_st_metadata(f, key);
    if (!v) return true;
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (end == v || *end || errno || x < lo || x > hi) {
        fprintf(stderr, "revtorch superres eval: --weights %s: weights metadata %s=%s is out of range [%lld, %lld]: "
                        "the file is damaged or not from superres train\n", path, key, v, (long long)lo,
                (long long)hi);
        return false;
    }
    *out = x;
    return true;
}

/* As sr_meta_int for a float in [lo, hi] (lo excluded when lo_open). */
static bool sr_meta_float(const rt_st_file *f, const char *path, const char *key, float lo, float hi, bool lo_open,
                          bool hi_open, float *out) {
    const char *v = rt_st_metadata(f, key);
    if (!v) return true;
    char *end;
    float x = strtof(v, &end);
    if (end == v || *end || !isfinite(x) || (lo_open ? !(x > lo) : !(x >= lo)) || (hi_open ? !(x < hi) : !(x <= hi))) {
        fprintf(stderr, "revtorch superres eval: --weights %s: weights metadata %s=%s is out of range %c%g, %g%c: the "
                        "file is damaged or not from superres train\n", path, key, v, lo_open ? '(' : '[', (double)lo,
                (double)hi, hi_open ? ')' : ']');
        return false;
    }
    *out = x;
    return true;
}

/* eval: the configuration from the weights file's metadata, each value
 * checked against the options' own limits; an option the user gave that
 * disagrees with the weights is a usage error (exit 2). The file is read and
 * validated whole (rt_st_open) first, so a damaged file is reported as such. */
static int sr_eval(const sr_opts *o_in) {
    rt_st_file *f = NULL;
    if (rt_st_open(o_in->weights, &f) != RT_OK) {
        fprintf(stderr, "revtorch superres eval: cannot read --weights %s: %s\n", o_in->weights, rt_error_last());
        return 1;
    }
    sr_opts oo = *o_in;
    char model[32];
    const char *task = rt_st_metadata(f, "task"), *mv = rt_st_metadata(f, "model");
    rt_error_clear();
    if (!task || strcmp(task, "superres") || !mv) {
        fprintf(stderr, "revtorch superres eval: --weights %s was not saved by `revtorch superres train` (no "
                        "task=superres metadata)\n", o_in->weights);
        rt_st_close(f);
        return 1;
    }
    snprintf(model, sizeof model, "%s", mv);
    oo.model = model;
    bool ok = strcmp(model, "edsr") == 0 || strcmp(model, "revedsr") == 0;
    if (!ok)
        fprintf(stderr, "revtorch superres eval: --weights %s: weights metadata model=%s is not edsr or revedsr: the "
                        "file is damaged or not from superres train\n", o_in->weights, mv);
    ok = ok && sr_meta_int(f, o_in->weights, "blocks", 1, 1024, &oo.blocks) &&
         sr_meta_int(f, o_in->weights, "feats", 1, 4096, &oo.feats) &&
         sr_meta_int(f, o_in->weights, "scale", 2, 4, &oo.scale) &&
         sr_meta_int(f, o_in->weights, "gap", 0, 4096, &oo.gap) &&
         sr_meta_float(f, o_in->weights, "res_scale", 0, INFINITY, false, true, &oo.res_scale) &&
         sr_meta_float(f, o_in->weights, "holdout", 0, 1, true, true, &oo.holdout) &&
         sr_meta_float(f, o_in->weights, "percentile", 1, 100, false, false, &oo.percentile);
    rt_st_close(f);
    rt_error_clear();
    if (!ok) return 1;
    if (!strcmp(model, "revedsr") && oo.feats % 2) {
        fprintf(stderr, "revtorch superres eval: --weights %s: weights metadata feats=%lld is odd for revedsr: the "
                        "file is damaged or not from superres train\n", o_in->weights, (long long)oo.feats);
        return 1;
    }
    const char *opt = NULL;
    char given[64];
    if (o_in->model_given && strcmp(o_in->model, model))
        opt = "--model", snprintf(given, sizeof given, "%s", o_in->model);
    else if (o_in->blocks_given && o_in->blocks != oo.blocks)
        opt = "--blocks", snprintf(given, sizeof given, "%lld", (long long)o_in->blocks);
    else if (o_in->feats_given && o_in->feats != oo.feats)
        opt = "--feats", snprintf(given, sizeof given, "%lld", (long long)o_in->feats);
    else if (o_in->scale_given && o_in->scale != oo.scale)
        opt = "--scale", snprintf(given, sizeof given, "%lld", (long long)o_in->scale);
    else if (o_in->res_scale_given && o_in->res_scale != oo.res_scale)
        opt = "--res-scale", snprintf(given, sizeof given, "%g", (double)o_in->res_scale);
    if (opt) {
        fprintf(stderr, "revtorch superres eval: %s %s disagrees with the weights (%s, %lld blocks x %lld feats, x%lld, "
                        "res_scale %g); eval takes the model from the weights: drop "
                        "--model/--blocks/--feats/--scale/--res-scale\n", opt, given, model, (long long)oo.blocks,
                (long long)oo.feats, (long long)oo.scale, (double)oo.res_scale);
        return 2;
    }
    sr_data d = {0};
    rt_model *m = NULL;
    int created = 0;
    int rc = sr_load(&oo, &d);
    if (rc < 0) rc = sr_make_out(&oo, &created);
    if (rc < 0) {
        rc = 1;
        if (sr_model_create(&oo, RT_DEVICE_CPU, 0, &m) != RT_OK) cli_fail("cannot create the model");
        else if (rt_weights_load(m->sd, NULL, 0, oo.weights) != RT_OK) cli_fail("cannot load the weights");
        else if (cli_strategy_apply(&(cli_strategy){.reversible = true}, m), !m->net) cli_fail("out of memory");
        else rc = sr_evaluate(&oo, m, &d, NULL, 0.0);
        if (rc != 0) sr_unmake_out(&oo, created); /* only what is still empty goes */
    }
    rt_model_destroy(m);
    rt_tensor_release(d.volume);
    return rc;
}

/* memory: predicted peaks of edsr and revedsr, and the largest revedsr batch
 * within edsr's step peak at --ref-batch. */
/* The largest batch of r (at most r->max_batch; 0 when even 1 does not fit)
 * whose predicted step peak (saved: its SAVED peak) is within budget bytes,
 * with that batch's peaks in *p. Both peaks grow with the batch: doubling,
 * then bisection. */
static rt_status sr_largest_batch(const sr_opts *r, int64_t budget, bool saved, int64_t *best, rt_memstats *p) {
    int64_t lo = 0, hi = 1;
    *p = (rt_memstats){0};
    while (hi <= r->max_batch) {
        RT_TRY(sr_predict(r, hi, p));
        if ((saved ? p->peak[RT_MEM_SAVED] : p->peak_total) > budget) break;
        lo = hi, hi *= 2;
    }
    if (hi > r->max_batch) hi = r->max_batch + 1;
    while (hi - lo > 1) {
        int64_t mid = (lo + hi) / 2;
        RT_TRY(sr_predict(r, mid, p));
        if ((saved ? p->peak[RT_MEM_SAVED] : p->peak_total) <= budget) lo = mid;
        else hi = mid;
    }
    *best = lo;
    return lo > 0 ? sr_predict(r, lo, p) : RT_OK;
}

static int sr_memory(const sr_opts *o) {
    sr_opts e = *o, r = *o;
    e.model = "edsr", r.model = "revedsr";
    rt_memstats pe, pr, ref;
    if (sr_predict(&e, o->batch, &pe) != RT_OK || sr_predict(&r, o->batch, &pr) != RT_OK ||
        sr_predict(&e, o->ref_batch, &ref) != RT_OK)
        return cli_fail("memory prediction failed");
    int64_t params[2];
    const sr_opts *which[2] = {&e, &r};
    for (int i = 0; i < 2; i++) {
        rt_model *m = NULL;
        if (sr_model_create(which[i], RT_DEVICE_META, 0, &m) != RT_OK) return cli_fail("cannot create the model");
        params[i] = rt_state_dict_num_param_elements(m->sd);
        rt_model_destroy(m);
    }
    printf("one training step (Adam, L1), %lld blocks x %lld features, x%lld, %lldx%lld LR patches, predicted on the "
           "meta device:\n", (long long)o->blocks, (long long)o->feats, (long long)o->scale, (long long)o->patch,
           (long long)o->patch);
    printf("%-8s %10s %6s %20s %14s %14s\n", "model", "params", "batch", "activations (SAVED)", "TEMP peak",
           "step peak");
    const rt_memstats *rows[2] = {&pe, &pr};
    const char *names[2] = {"edsr", "revedsr"};
    for (int i = 0; i < 2; i++)
        printf("%-8s %10lld %6lld %16.1f MiB %10.1f MiB %10.1f MiB\n", names[i], (long long)params[i],
               (long long)o->batch, (double)rows[i]->peak[RT_MEM_SAVED] / 1048576.0,
               (double)rows[i]->peak[RT_MEM_TEMP] / 1048576.0, (double)rows[i]->peak_total / 1048576.0);
    /* the largest batch by step peak (all categories), by activations (SAVED)
     * alone, and by step peak with revedsr's convolutions direct: Winograd's
     * backward scratch (oneDNN's transformed tensors, ~6 MiB per 48x48
     * patch for the upsampler's 64->256 convolution) outgrows revedsr's
     * activations, so in a tight budget trading its speed buys batch */
    const rt_conv_algo algo = rt_conv_algo_get();
    for (int crit = 0; crit < 3; crit++) {
        if (crit == 2 && algo == RT_CONV_ALGO_DIRECT) break;
        const bool saved = crit == 1;
        const int64_t budget = saved ? ref.peak[RT_MEM_SAVED] : ref.peak_total;
        if (crit == 2) rt_conv_algo_set(RT_CONV_ALGO_DIRECT);
        int64_t lo;
        rt_memstats p;
        rt_status st = sr_largest_batch(&r, budget, saved, &lo, &p);
        rt_conv_algo_set(algo);
        if (st != RT_OK) return cli_fail("memory prediction failed");
        const char *what = saved ? "activations (SAVED)" : "step peak";
        printf("edsr at batch %lld: %s %.1f MiB; the largest revedsr batch within it%s: %lld", (long long)o->ref_batch,
               what, (double)budget / 1048576.0, crit == 2 ? " with --conv-algo direct" : "", (long long)lo);
        if (lo > 0)
            printf(" (%s %.1f MiB, %.2fx the batch%s)", what,
                   (double)(saved ? p.peak[RT_MEM_SAVED] : p.peak_total) / 1048576.0,
                   (double)lo / (double)o->ref_batch, lo >= o->max_batch ? "; --max-batch reached" : "");
        printf("\n");
    }
    return 0;
}

int cli_cmd_superres(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        sr_usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    const char *sub = argv[1];
    if (strcmp(sub, "train") && strcmp(sub, "eval") && strcmp(sub, "memory")) {
        fprintf(stderr, "revtorch superres: unknown subcommand '%s' (train, eval or memory)\n", sub);
        return 2;
    }
    sr_opts o;
    int rc = sr_parse(argc - 1, argv + 1, &o);
    if (rc >= 0) return rc;
    rt_set_num_threads((int)o.threads);
    if (!strcmp(sub, "train")) return sr_train(&o);
    if (!strcmp(sub, "eval")) return sr_eval(&o);
    return sr_memory(&o);
}
