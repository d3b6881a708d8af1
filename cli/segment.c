/* `revtorch segment train|predict|eval`: 3-D segmentation of a NIfTI volume
 * with the library's patch sampler, Dice + cross-entropy loss and
 * sliding-window inference (data/patches.h, train/seg_loss.h,
 * train/sliding_window.h). The default task is brain extraction on the
 * Colin27 template of the mricron-data package: trained on patches of the
 * lower axial slabs, evaluated on the held-out upper slab. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "common.h"
#include "checkpointing.h"
#include "data/nifti.h"
#include "data/patches.h"
#include "io/weights.h"
#include "kernels/threads.h"
#include "outputs.h"
#include "nn/modules.h"
#include "progress.h"
#include "segment.h"
#include "train/seg_loss.h"
#include "train/seg_metric.h"
#include "train/sliding_window.h"

#define SEG_TEMPLATES "/usr/share/mricron/templates"
#define SEG_MAX_CLASSES 1024

typedef struct seg_opts {
    const char *cmd; /* "train", "predict", "eval" */
    const char *image, *labels, *model, *optimizer, *out, *weights;
    bool binary;           /* labels > 0 → 1 (default task); else every label value is a class */
    bool labels_given, patch_given, holdout_given;
    bool augment, norm_nonzero;
    bool transpose; /* --transpose on|off: rt_patch_options.transpose */
    bool mirror;    /* --tta on|off: rt_sliding_window_options.mirror */
    bool save_probs; /* --save-probabilities: OUT/probabilities.nii.gz */
    float threshold; /* --threshold X: two-class decision threshold; NAN: auto (train), recorded (predict, eval) */
    bool threshold_auto; /* --threshold auto given (train only) */
    float holdout, lr, momentum, weight_decay, overlap, fg_fraction;
    int64_t patch[3], batch, epochs, steps, seed, threads, eval_batch, eval_every;
    cli_ckpt_args ckpt;
} seg_opts;

/* A volume and its labels as the pipeline uses them. */
typedef struct seg_data {
    rt_tensor *image;  /* [C, D, H, W] f32, z-scored */
    rt_tensor *labels; /* [D, H, W] i32 classes 0..K-1, or NULL */
    rt_nifti_info info;
    int64_t K;                         /* classes */
    int32_t values[SEG_MAX_CLASSES];   /* class k's value in the label file (binary: 0, 1) */
    int64_t split;                     /* first held-out axial index (D axis) */
} seg_data;

/* How a two-class prediction turned probabilities into labels. */
typedef struct seg_decision {
    float threshold;    /* foreground when the averaged probability exceeds it; 0.5: argmax */
    const char *source; /* "argmax", "auto (training slab)", "--threshold", "recorded in the weights" */
    double heldout_argmax;          /* held-out Dice of the argmax labels (NaN: not scored or the same) */
    double train_dice, train_argmax; /* auto: training-slab Dice at the threshold and at argmax */
} seg_decision;

static seg_decision seg_argmax(void) { return (seg_decision){0.5f, "argmax", NAN, NAN, NAN}; }

static void seg_usage(FILE *f) {
    fprintf(f,
            "usage: revtorch segment train|predict|eval [options]\n"
            "3-D segmentation of a NIfTI volume. Default task (no options): brain extraction on the Colin27\n"
            "template (mricron-data): input %s/ch2.nii.gz, target ch2bet.nii.gz > 0, trained on patches of the\n"
            "axial slabs below the held-out top slab and evaluated there by sliding-window inference.\n\n"
            "  train    train, then predict the whole volume; writes OUT/weights.safetensors (or --weights),\n"
            "           OUT/prediction.nii.gz, OUT/overlay.png, OUT/dice.csv and OUT/dice.json\n"
            "  predict  --weights FILE: predict --image; writes OUT/prediction.nii.gz and OUT/overlay.png\n"
            "  eval     --weights FILE: predict and score against --labels on the held-out slab (dice.csv/json)\n\n"
            "  --image FILE          input volume (default %s/ch2.nii.gz)\n"
            "  --labels FILE         label map in the image's grid; every value is a class, remapped to 0..K-1\n"
            "                        (default: %s/ch2bet.nii.gz with --binary)\n"
            "  --binary              classes: label > 0 (1) and 0 (background)\n"
            "  --holdout F           the top fraction F of the axial slices (k) is held out (default 0.3;\n"
            "                        eval: the training run's, recorded in the weights)\n"
            "  --model NAME          unet3d (default), prunet3d, unet3d_brats, prunet3d_brats, or standin\n"
            "                        (3 convolutions, for trying the pipeline in seconds)\n"
            "  --patch D,H,W         patch and window size in voxels (default 48,48,48; predict and eval:\n"
            "                        the training patch, recorded in the weights)\n"
            "  --batch N             patches per step (default 3)\n"
            "  --epochs N            epochs (default 6)\n"
            "  --steps N             steps per epoch (default 150)\n"
            "  --optimizer sgd|adamw (default adamw; sgd: Nesterov momentum --momentum)\n"
            "  --lr X                peak learning rate, cosine schedule (default 3e-3 adamw, 1e-2 sgd)\n"
            "  --momentum X          SGD momentum (default 0.99, nnU-Net's)\n"
            "  --weight-decay X      (default 3e-5, nnU-Net's)\n"
            "  --foreground X        fraction of patches centred on a foreground voxel (default 0.33)\n"
            "  --no-augment          no flips, axis permutations or intensity augmentation\n"
            "  --transpose on|off    random permutation of the patch's axes after the flips (cubic patches;\n"
            "                        batchgenerators' TransposeAxesTransform; default on)\n"
            "  --norm nonzero|volume z-score over the non-zero voxels, the rest set to 0 (default: then the\n"
            "                        background equals the zero padding of patches and convolutions), or\n"
            "                        over the whole volume\n"
            "  --overlap X           sliding-window overlap in [0, 1) (default 0.5)\n"
            "  --eval-batch N        windows per forward in inference (default 2)\n"
            "  --tta on|off          test-time mirroring: each window's softmax averaged over its 8\n"
            "                        flipped copies, 8x the inference time (nnU-Net's default; default on)\n"
            "  --threshold auto|X    two-class tasks: label a voxel foreground when its averaged probability\n"
            "                        exceeds X (0.5 = argmax); train's default auto picks, from 0.05 to 0.95,\n"
            "                        the X with the best Dice on the training slab (never the held-out one)\n"
            "                        and records it in the weights; predict and eval use the recorded one\n"
            "  --save-probabilities  also write OUT/probabilities.nii.gz: the softmax averaged over windows\n"
            "                        (and mirrors), float32, one volume per class (5th NIfTI dimension),\n"
            "                        the input's grid (nnU-Net's --save_probabilities)\n"
            "  --eval-every N        also score the held-out slab every N epochs (default 0: only at the end)\n"
            "  --seed N              initialisation and sampling seed (default 0)\n"
            "  --out DIR             output directory (default segment-out; created)\n"
            "  --weights FILE        train: where to save (default OUT/weights.safetensors);\n"
            "                        predict/eval: the weights to load (required)\n"
            "  --threads N           threads (default: all cores)\n",
            SEG_TEMPLATES, SEG_TEMPLATES, SEG_TEMPLATES);
    cli_precision_help(f, 24);
    fprintf(f, "Checkpointing (zoo models):\n");
    cli_ckpt_help(f);
    fprintf(f, "Exit status: 0 done, 1 runtime failure (files, data, training), 2 usage error (nothing was run).\n");
}

/* "D,H,W" → three integers ≥ 1. */
static bool parse_triple(const char *s, int64_t out[3]) {
    long long a, b, c;
    char end;
    if (sscanf(s, "%lld,%lld,%lld%c", &a, &b, &c, &end) != 3 || a < 1 || b < 1 || c < 1 || a > 4096 || b > 4096 ||
        c > 4096)
        return false;
    out[0] = a, out[1] = b, out[2] = c;
    return true;
}

static const char *default_model(void) { return "unet3d"; }

static int seg_parse(int argc, char **argv, seg_opts *o) {
    *o = (seg_opts){.cmd = argv[0], .image = SEG_TEMPLATES "/ch2.nii.gz", .model = NULL, .optimizer = "adamw",
                    .out = "segment-out", .augment = true, .transpose = true, .mirror = true, .holdout = 0.3f,
                    .lr = NAN, .momentum = 0.99f, .weight_decay = 3e-5f, .overlap = 0.5f, .fg_fraction = 0.33f, .patch = {48, 48, 48},
                    .batch = 3, .epochs = 6, .steps = 150, .eval_batch = 2, .eval_every = 0, .threshold = NAN};
    const char *norm = "nonzero";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool ok = true;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            seg_usage(stdout);
            return 0;
        } else if (!strcmp(a, "--image")) ok = cli_str(argc, argv, &i, &o->image);
        else if (!strcmp(a, "--labels")) ok = cli_str(argc, argv, &i, &o->labels), o->labels_given = true;
        else if (!strcmp(a, "--binary")) o->binary = true;
        else if (!strcmp(a, "--model")) ok = cli_str(argc, argv, &i, &o->model);
        else if (!strcmp(a, "--optimizer")) ok = cli_str(argc, argv, &i, &o->optimizer);
        else if (!strcmp(a, "--out")) ok = cli_str(argc, argv, &i, &o->out);
        else if (!strcmp(a, "--weights")) ok = cli_str(argc, argv, &i, &o->weights);
        else if (!strcmp(a, "--norm")) ok = cli_str(argc, argv, &i, &norm);
        else if (!strcmp(a, "--no-augment")) o->augment = false;
        else if (!strcmp(a, "--transpose")) ok = cli_on_off(argc, argv, &i, "--transpose", &o->transpose);
        else if (!strcmp(a, "--tta")) ok = cli_on_off(argc, argv, &i, "--tta", &o->mirror);
        else if (!strcmp(a, "--save-probabilities")) o->save_probs = true;
        else if (!strcmp(a, "--threshold")) {
            if (i + 1 < argc && !strcmp(argv[i + 1], "auto")) o->threshold = NAN, o->threshold_auto = true, i++;
            else ok = cli_float_in(argc, argv, &i, 0, 1, true, "(a probability, or auto)", &o->threshold);
        }
        else if (!strcmp(a, "--holdout")) {
            o->holdout_given = true;
            ok = cli_float_in(argc, argv, &i, 0, 1, true, "(fraction of the axial slices held out)", &o->holdout);
        }
        else if (!strcmp(a, "--lr")) ok = cli_float_in(argc, argv, &i, 0, INFINITY, false, NULL, &o->lr);
        else if (!strcmp(a, "--momentum")) ok = cli_float_in(argc, argv, &i, 0, 1, true, NULL, &o->momentum);
        else if (!strcmp(a, "--weight-decay"))
            ok = cli_float_in(argc, argv, &i, 0, INFINITY, false, NULL, &o->weight_decay);
        else if (!strcmp(a, "--overlap")) ok = cli_float_in(argc, argv, &i, 0, 1, true, NULL, &o->overlap);
        else if (!strcmp(a, "--foreground")) ok = cli_float_in(argc, argv, &i, 0, 1, false, NULL, &o->fg_fraction);
        else if (!strcmp(a, "--batch")) ok = cli_int_in(argc, argv, &i, 1, 4096, NULL, &o->batch);
        else if (!strcmp(a, "--epochs")) ok = cli_int_in(argc, argv, &i, 1, INT32_MAX, NULL, &o->epochs);
        else if (!strcmp(a, "--steps")) ok = cli_int_in(argc, argv, &i, 1, INT32_MAX, NULL, &o->steps);
        else if (!strcmp(a, "--eval-batch")) ok = cli_int_in(argc, argv, &i, 1, 4096, NULL, &o->eval_batch);
        else if (!strcmp(a, "--eval-every"))
            ok = cli_int_in(argc, argv, &i, 0, INT32_MAX, "(0: only at the end)", &o->eval_every);
        else if (!strcmp(a, "--seed")) ok = cli_int(argc, argv, &i, &o->seed);
        else if (!strcmp(a, "--threads")) ok = cli_int(argc, argv, &i, &o->threads);
        else if (!strcmp(a, "--precision")) ok = cli_precision_arg(argc, argv, &i);
        else if (!strcmp(a, "--patch")) {
            const char *v = NULL;
            ok = cli_str(argc, argv, &i, &v);
            o->patch_given = true;
            if (ok && !parse_triple(v, o->patch)) {
                fprintf(stderr, "revtorch segment %s: --patch wants D,H,W (three integers 1..4096), got '%s'\n",
                        o->cmd, v);
                return 2;
            }
        } else if (cli_ckpt_option(argc, argv, &i, &o->ckpt, &ok)) (void)0;
        else {
            fprintf(stderr, "revtorch segment %s: unknown option '%s' (see revtorch segment --help)\n", o->cmd, a);
            return 2;
        }
        if (!ok) return 2;
    }
    if (!strcmp(norm, "nonzero")) o->norm_nonzero = true;
    else if (strcmp(norm, "volume")) {
        fprintf(stderr, "revtorch segment %s: --norm must be volume or nonzero, got '%s'\n", o->cmd, norm);
        return 2;
    }
    if (strcmp(o->optimizer, "sgd") && strcmp(o->optimizer, "adamw")) {
        fprintf(stderr, "revtorch segment %s: --optimizer must be sgd or adamw, got '%s'\n", o->cmd, o->optimizer);
        return 2;
    }
    if (!o->labels) {
        o->labels = SEG_TEMPLATES "/ch2bet.nii.gz";
        o->binary = true;
    }
    if (o->model && strcmp(o->model, "standin")) {
        if (!cli_model_known("segment", o->model)) return 2;
        if (!rt_model_name_is_segmentation(o->model)) {
            fprintf(stderr, "revtorch segment %s: --model %s is an image classifier; segmentation needs per-voxel "
                            "logits: unet3d, prunet3d, unet3d_brats, prunet3d_brats or standin\n", o->cmd, o->model);
            return 2;
        }
    }
    if (!cli_threads_ok(o->threads)) return 2;
    if (!strcmp(o->cmd, "train") && o->augment && o->transpose &&
        (o->patch[0] != o->patch[1] || o->patch[1] != o->patch[2])) {
        fprintf(stderr, "revtorch segment train: permuting the patch's axes (--transpose on, the default) needs a "
                        "cubic patch, got --patch %lld,%lld,%lld; give three equal sizes or --transpose off\n",
                (long long)o->patch[0], (long long)o->patch[1], (long long)o->patch[2]);
        return 2;
    }
    if (strcmp(o->cmd, "train") && !o->weights) {
        fprintf(stderr, "revtorch segment %s: --weights FILE is required (the file `revtorch segment train` "
                        "saved)\n", o->cmd);
        return 2;
    }
    if (!isnan(o->threshold) && !(o->threshold > 0.0f)) {
        fprintf(stderr, "revtorch segment %s: --threshold must lie in (0, 1) (0.5 is the argmax), got 0\n", o->cmd);
        return 2;
    }
    if (o->threshold_auto && strcmp(o->cmd, "train")) {
        fprintf(stderr, "revtorch segment %s: --threshold auto is chosen on the training slab by `segment train` and "
                        "recorded in the weights; give a number here, or nothing to use the recorded one\n", o->cmd);
        return 2;
    }
    if (isnan(o->lr)) o->lr = strcmp(o->optimizer, "sgd") ? 3e-3f : 1e-2f;
    rt_memory_config mc;
    if (cli_ckpt_given(&o->ckpt) && !cli_ckpt_config("segment", &o->ckpt, &mc)) return 2;
    return -1;
}

static bool same_affine(const double a[4][4], const double b[4][4]) {
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 4; j++)
            if (fabs(a[i][j] - b[i][j]) > 1e-4 * (1.0 + fabs(a[i][j]))) return false;
    return true;
}

/* Reads the headers first: missing files, grids that differ and a patch
 * larger than the volume are refused before any voxel is read. Returns -1
 * to go on, else the exit code. */
static int seg_check_inputs(const seg_opts *o, bool need_labels, rt_nifti_info *img_info) {
    const char *files[2] = {o->image, need_labels ? o->labels : NULL};
    const char *what[2] = {"--image", "--labels"};
    rt_nifti_info info[2];
    for (int f = 0; f < 2; f++) {
        if (!files[f]) continue;
        if (access(files[f], R_OK) != 0) {
            bool dflt = !strncmp(files[f], SEG_TEMPLATES, strlen(SEG_TEMPLATES));
            fprintf(stderr, "revtorch segment %s: cannot read %s %s: %s%s\n", o->cmd, what[f], files[f],
                    strerror(errno), dflt ? " (the default task needs Debian's mricron-data package: apt-get "
                                            "install mricron-data, see scripts/setup.sh)" : "");
            return 1;
        }
        if (rt_nifti_read_info(files[f], &info[f]) != RT_OK) {
            fprintf(stderr, "revtorch segment %s: %s %s: %s\n", o->cmd, what[f], files[f], rt_error_last());
            return 1;
        }
    }
    *img_info = info[0];
    const int64_t *s = info[0].shape;
    if (files[1]) {
        const int64_t *l = info[1].shape;
        if (l[0] != 1 || l[1] != s[1] || l[2] != s[2] || l[3] != s[3]) {
            fprintf(stderr, "revtorch segment %s: --labels %s has %lld channel(s) of %lldx%lldx%lld voxels (i, j, "
                            "k), the image %s %lldx%lldx%lld: the label map must be one volume in the image's "
                            "grid (resample it first, nearest neighbour)\n", o->cmd, o->labels, (long long)l[0],
                    (long long)l[3], (long long)l[2], (long long)l[1], o->image, (long long)s[3], (long long)s[2],
                    (long long)s[1]);
            return 1;
        }
        if (!same_affine(info[0].affine, info[1].affine)) {
            fprintf(stderr, "revtorch segment %s: --labels %s and the image %s have the same size but different "
                            "voxel-to-world affines (see revtorch inspect): the labels are in another space; "
                            "resample them into the image's grid first (nearest neighbour)\n", o->cmd, o->labels,
                    o->image);
            return 1;
        }
    }
    for (int a = 0; a < 3; a++)
        if (o->patch[a] > s[1 + a]) {
            fprintf(stderr, "revtorch segment %s: --patch %lld,%lld,%lld is larger than the volume (D, H, W = k, j, "
                            "i) %lldx%lldx%lld on axis %c; use a patch that fits\n", o->cmd, (long long)o->patch[0],
                    (long long)o->patch[1], (long long)o->patch[2], (long long)s[1], (long long)s[2],
                    (long long)s[3], "DHW"[a]);
            return 2;
        }
    return -1;
}

static int cmp_i32(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* Reads image and (optionally) labels, normalises the image and maps the
 * label values to classes (binary, or every distinct value; values[] keeps
 * the map, or is given by the weights file: then *K is fixed). */
static rt_status seg_load(const seg_opts *o, bool with_labels, bool classes_fixed, seg_data *d) {
    RT_TRY(rt_nifti_read(o->image, &d->info, &d->image));
    RT_TRY(rt_volume_zscore(d->image, o->norm_nonzero, NULL, NULL));
    const int64_t D = d->image->shape[1];
    d->split = D - (int64_t)floor((double)o->holdout * (double)D + 0.5);
    if (!with_labels) return RT_OK;
    rt_tensor *raw = NULL;
    RT_TRY(rt_nifti_read_labels(o->labels, NULL, &raw));
    const int64_t s3[3] = {raw->shape[1], raw->shape[2], raw->shape[3]};
    d->labels = rt_tensor_create(3, s3, RT_I32, RT_DEVICE_CPU, RT_MEM_DATA);
    if (!d->labels) {
        rt_tensor_release(raw);
        return rt_error_last_status();
    }
    const int32_t *r = rt_tensor_data(raw);
    int32_t *l = rt_tensor_data(d->labels);
    const int64_t n = rt_tensor_numel(raw);
    if (o->binary) {
        if (!classes_fixed) d->K = 2, d->values[0] = 0, d->values[1] = 1;
        for (int64_t i = 0; i < n; i++) l[i] = r[i] > 0;
    } else {
        if (!classes_fixed) { /* the distinct values, sorted: class k = the k-th smallest */
            int32_t *sorted = malloc((size_t)n * sizeof *sorted);
            if (!sorted) {
                rt_tensor_release(raw);
                return rt_error_set(RT_ERR_OOM, "out of memory sorting the labels");
            }
            memcpy(sorted, r, (size_t)n * sizeof *sorted);
            qsort(sorted, (size_t)n, sizeof *sorted, cmp_i32);
            d->K = 0;
            for (int64_t i = 0; i < n; i++)
                if (i == 0 || sorted[i] != sorted[i - 1]) {
                    if (d->K == SEG_MAX_CLASSES) {
                        free(sorted);
                        rt_tensor_release(raw);
                        return rt_error_set(RT_ERR_INVALID_ARG, "%s holds more than %d distinct labels; is it a "
                                            "label map?", o->labels, SEG_MAX_CLASSES);
                    }
                    d->values[d->K++] = sorted[i];
                }
            free(sorted);
        }
        for (int64_t i = 0; i < n; i++) {
            const int32_t *hit = bsearch(&r[i], d->values, (size_t)d->K, sizeof(int32_t), cmp_i32);
            if (!hit) {
                rt_tensor_release(raw);
                return rt_error_set(RT_ERR_INVALID_ARG, "%s holds label %d, which is not one of the %lld classes the "
                                    "weights were trained on", o->labels, r[i], (long long)d->K);
            }
            l[i] = (int32_t)(hit - d->values);
        }
    }
    rt_tensor_release(raw);
    return RT_OK;
}

static void seg_data_free(seg_data *d) {
    rt_tensor_release(d->image);
    rt_tensor_release(d->labels);
}

/* The stand-in network for trying the pipeline without a U-Net: Conv3d(C,
 * 16, 3, pad 1) → LeakyReLU → Conv3d(16, 16, 3, pad 1) → LeakyReLU →
 * Conv3d(16, K, 1). Receptive field 5³. */
static rt_status standin_create(int64_t C, int64_t K, uint64_t seed, rt_model **out) {
    rt_model *m = calloc(1, sizeof *m);
    if (!m) return rt_error_set(RT_ERR_OOM, "out of memory");
    snprintf(m->name, sizeof m->name, "standin");
    m->in_channels = C, m->num_classes = K;
    rt_init_ctx ctx = rt_init_ctx_make(RT_DEVICE_CPU, seed);
    rt_status st = rt_sequential_create(&m->net);
    rt_module *c = NULL;
    const int64_t io[3][2] = {{C, 16}, {16, 16}, {16, K}};
    for (int k = 0; k < 3 && st == RT_OK; k++) {
        st = rt_conv_create(&ctx, 3, io[k][0], io[k][1], k < 2 ? 3 : 1, 1, k < 2 ? 1 : 0, 1, true,
                            RT_INIT_KAIMING_FAN_OUT, &c);
        if (st == RT_OK) st = rt_module_append(m->net, c);
        if (st == RT_OK && k < 2 && (st = rt_leaky_relu_create(0.01f, &c)) == RT_OK) st = rt_module_append(m->net, c);
    }
    if (st == RT_OK) st = rt_module_state_dict(m->net, &m->sd);
    if (st != RT_OK) {
        rt_model_destroy(m);
        return st;
    }
    *out = m;
    return RT_OK;
}

static rt_status seg_model_create(const char *name, int64_t C, int64_t K, uint64_t seed, rt_model **out) {
    if (!strcmp(name, "standin")) return standin_create(C, K, seed, out);
    return rt_model_create(name, C, K, RT_DEVICE_CPU, seed, out);
}

/* The sliding window's progress as a bar (terminal) or lines (logs). */
static void seg_progress(void *user, int64_t done, int64_t total) {
    cli_progress *bar = user;
    if (!bar->out) { /* the first call, before any window */
        cli_progress_start(bar, stdout, "predict", total);
        bar->unit = "windows";
    }
    cli_progress_update(bar, done, NAN, done);
}

/* Sliding-window prediction of image box [lo, hi) (context included; the
 * caller scores only what it needs): the argmax labels, and the averaged
 * probabilities [K, D, H, W] when probs is not NULL. */
static rt_status seg_predict(const seg_opts *o, rt_model *m, const rt_tensor *image, int64_t K, rt_tensor **labels,
                             rt_tensor **probs) {
    rt_sliding_window_options so = rt_sliding_window_defaults();
    cli_progress bar = {0};
    so.progress = seg_progress;
    so.progress_user = &bar;
    memcpy(so.patch, o->patch, sizeof so.patch);
    so.overlap = o->overlap;
    so.batch = o->eval_batch;
    so.mirror = o->mirror;
    rt_module_train(m->net, false);
    rt_status st = rt_sliding_window_predict(m->net, image, K, &so, probs, labels);
    if (bar.out) cli_progress_finish(&bar);
    rt_module_train(m->net, true);
    return st;
}

/* Dice per class on the held-out slab of prediction `pred` [D, H, W]
 * (whole volume) against d->labels; *mean is over the foreground classes
 * present in either map. */
static rt_status seg_score(const seg_data *d, const rt_tensor *pred, int64_t first_d, double *dice, double *mean) {
    const int64_t D = d->labels->shape[0], H = d->labels->shape[1], W = d->labels->shape[2];
    const int64_t lo[3] = {first_d, 0, 0}, hi[3] = {D, H, W};
    rt_tensor *p = NULL, *t = NULL;
    rt_status st = rt_volume_crop(pred, lo, hi, &p);
    if (st == RT_OK) st = rt_volume_crop(d->labels, lo, hi, &t);
    if (st == RT_OK) st = rt_dice_per_class(p, t, d->K, dice);
    rt_tensor_release(p);
    rt_tensor_release(t);
    double s = 0;
    int64_t n = 0;
    for (int64_t k = 1; k < d->K; k++)
        if (!isnan(dice[k])) s += dice[k], n++;
    *mean = n ? s / (double)n : NAN;
    return st;
}

/* pred[v] = (class-1 probability of voxel v > t): a two-class decision at
 * threshold t over probs [2, D, H, W]; t = 0.5 keeps the argmax labels
 * (which break exact ties towards class 0, as this does). */
static void seg_apply_threshold(const rt_tensor *probs, float t, rt_tensor *pred) {
    if (t == 0.5f) return;
    const int64_t n = rt_tensor_numel(pred);
    const float *p1 = rt_tensor_f32(probs) + n;
    int32_t *y = rt_tensor_data(pred);
    for (int64_t v = 0; v < n; v++) y[v] = p1[v] > t;
}

/* --threshold auto: of 0.05, 0.10, ..., 0.95, the threshold whose labels
 * have the best Dice on the training slab (axial slices k < d->split),
 * which the model was trained on; the held-out slab is never looked at.
 * Ties go to the threshold nearest 0.5 (rt_dice_threshold_sweep). */
static rt_status seg_calibrate(const seg_data *d, const rt_tensor *probs, seg_decision *dec) {
    const int64_t H = d->labels->shape[1], W = d->labels->shape[2], n = d->split * H * W;
    const int64_t lo[3] = {0, 0, 0}, hi[3] = {d->split, H, W};
    float grid[19];
    for (int i = 0; i < 19; i++) grid[i] = (float)(i + 1) / 20.0f;
    double dice[19];
    int best = -1;
    rt_tensor *p1 = rt_tensor_create(3, hi, RT_F32, RT_DEVICE_CPU, RT_MEM_DATA), *lab = NULL;
    rt_status st = p1 ? rt_volume_crop(d->labels, lo, hi, &lab) : rt_error_last_status();
    if (st == RT_OK) { /* the class-1 probabilities of slices 0..split-1: the start of channel 1 */
        memcpy(rt_tensor_f32(p1), rt_tensor_f32(probs) + rt_tensor_numel(d->labels), (size_t)n * sizeof(float));
        st = rt_dice_threshold_sweep(p1, lab, 19, grid, dice, &best);
    }
    if (st == RT_OK && best >= 0) {
        *dec = (seg_decision){grid[best], "auto (training slab)", NAN, dice[best], dice[9]}; /* grid[9] = 0.5 */
    } else if (st == RT_OK) {
        *dec = seg_argmax(); /* no foreground in the training slab: nothing to calibrate on */
    }
    rt_tensor_release(p1);
    rt_tensor_release(lab);
    return st;
}

/* The held-out slab with half a window of context below it, predicted, and
 * scored on the slab alone. */
static rt_status seg_eval_slab(const seg_opts *o, rt_model *m, const seg_data *d, double *dice, double *mean) {
    const int64_t D = d->image->shape[1], H = d->image->shape[2], W = d->image->shape[3];
    int64_t from = d->split - o->patch[0] / 2;
    if (from < 0) from = 0;
    if (D - from < o->patch[0]) from = D - o->patch[0];
    const int64_t lo[3] = {from, 0, 0}, hi[3] = {D, H, W}, llo[3] = {from, 0, 0};
    rt_tensor *img = NULL, *pred = NULL, *lab = NULL;
    rt_status st = rt_volume_crop(d->image, lo, hi, &img);
    if (st == RT_OK) st = seg_predict(o, m, img, d->K, &pred, NULL);
    if (st == RT_OK) st = rt_volume_crop(d->labels, llo, hi, &lab);
    if (st == RT_OK) {
        seg_data sub = *d;
        sub.labels = lab;
        st = seg_score(&sub, pred, d->split - from, dice, mean);
    }
    rt_tensor_release(img);
    rt_tensor_release(pred);
    rt_tensor_release(lab);
    return st;
}

/* Creates DIR (one level) unless it exists as a directory. */
static int seg_make_out(const seg_opts *o) {
    struct stat sb;
    if (stat(o->out, &sb) == 0) {
        if (S_ISDIR(sb.st_mode)) return -1;
        fprintf(stderr, "revtorch segment %s: --out %s exists and is not a directory\n", o->cmd, o->out);
        return 1;
    }
    if (mkdir(o->out, 0777) != 0) {
        fprintf(stderr, "revtorch segment %s: cannot create --out %s: %s\n", o->cmd, o->out, strerror(errno));
        return 1;
    }
    return -1;
}

static void out_path(const seg_opts *o, const char *name, char *buf, size_t n) {
    snprintf(buf, n, "%s/%s", o->out, name);
}

/* Writes dice.csv and dice.json (via temporaries renamed over them). */
static rt_status seg_write_dice(const seg_opts *o, const seg_data *d, const double *dice, double mean,
                                const seg_decision *dec, double seconds) {
    char path[2][CLI_PATH_MAX], tmp[CLI_PATH_MAX + 32];
    out_path(o, "dice.csv", path[0], sizeof path[0]);
    out_path(o, "dice.json", path[1], sizeof path[1]);
    for (int f = 0; f < 2; f++) {
        FILE *fp = cli_open_tmp(path[f], tmp, sizeof tmp);
        if (!fp) return rt_error_last_status();
        if (f == 0) {
            fprintf(fp, "class,label_value,dice\n");
            for (int64_t k = 0; k < d->K; k++) {
                if (isnan(dice[k])) fprintf(fp, "%lld,%d,nan\n", (long long)k, d->values[k]);
                else fprintf(fp, "%lld,%d,%.6f\n", (long long)k, d->values[k], dice[k]);
            }
        } else {
            fprintf(fp, "{\n  \"image\": \"%s\",\n  \"labels\": \"%s\",\n  \"heldout_first_axial_index\": %lld,\n"
                        "  \"classes\": %lld,\n  \"overlap\": %.3f,\n  \"tta_mirroring\": %s,\n"
                        "  \"mean_foreground_dice\": %.6f,\n  \"seconds\": %.1f,\n",
                    o->image, o->labels, (long long)d->split, (long long)d->K, (double)o->overlap,
                    o->mirror ? "true" : "false", isnan(mean) ? -1.0 : mean, seconds);
            if (d->K == 2) {
                fprintf(fp, "  \"threshold\": %.4f,\n  \"threshold_source\": \"%s\",\n", (double)dec->threshold,
                        dec->source);
                if (!isnan(dec->heldout_argmax)) fprintf(fp, "  \"dice_at_argmax\": %.6f,\n", dec->heldout_argmax);
                if (!isnan(dec->train_dice))
                    fprintf(fp, "  \"training_slab_dice\": %.6f,\n  \"training_slab_dice_at_argmax\": %.6f,\n",
                            dec->train_dice, dec->train_argmax);
            }
            fprintf(fp, "  \"dice\": [");
            for (int64_t k = 0; k < d->K; k++) {
                if (isnan(dice[k])) fprintf(fp, "%snull", k ? ", " : "");
                else fprintf(fp, "%s%.6f", k ? ", " : "", dice[k]);
            }
            fprintf(fp, "]\n}\n");
        }
        RT_TRY(cli_commit_tmp(fp, tmp, path[f]));
    }
    return RT_OK;
}

/* The prediction in the label file's values, written with the image's geometry. */
static rt_status seg_write_nifti(const seg_opts *o, const seg_data *d, const rt_tensor *pred) {
    char path[CLI_PATH_MAX];
    out_path(o, "prediction.nii.gz", path, sizeof path);
    rt_tensor *v = rt_tensor_to(pred, RT_I32, RT_MEM_DATA);
    if (!v) return rt_error_last_status();
    int32_t *p = rt_tensor_data(v);
    for (int64_t i = 0; i < rt_tensor_numel(v); i++) p[i] = d->values[p[i]];
    rt_status st = rt_nifti_write(path, v, d->info.affine);
    rt_tensor_release(v);
    return st;
}

/* --save-probabilities: [K, D, H, W] f32 with the image's geometry. */
static rt_status seg_write_probs(const seg_opts *o, const seg_data *d, const rt_tensor *probs) {
    if (!o->save_probs || !probs) return RT_OK;
    char path[CLI_PATH_MAX];
    out_path(o, "probabilities.nii.gz", path, sizeof path);
    return rt_nifti_write(path, probs, d->info.affine);
}

static rt_status seg_write_png(const seg_opts *o, const seg_data *d, const rt_tensor *pred, const char *title) {
    char path[CLI_PATH_MAX];
    out_path(o, "overlay.png", path, sizeof path);
    const int64_t D = d->image->shape[1], H = d->image->shape[2], W = d->image->shape[3];
    /* the axial slice in the middle of the held-out slab, coronal and sagittal through the volume's centre */
    const int64_t centre[3] = {d->labels ? (d->split + D) / 2 : D / 2, H / 2, W / 2};
    return cli_segment_png(path, d->image, pred, d->labels, centre, d->labels ? d->split : -1, title);
}

/* Metadata written with the weights, read back by predict and eval. */
static rt_status seg_save_weights(const seg_opts *o, const rt_model *m, const seg_data *d, float threshold,
                                  const char *path) {
    char classes[16], values[SEG_MAX_CLASSES * 12] = "", patch[64], channels[16], holdout[32], thr[32];
    snprintf(thr, sizeof thr, "%.9g", (double)threshold);
    snprintf(classes, sizeof classes, "%lld", (long long)d->K);
    snprintf(channels, sizeof channels, "%lld", (long long)d->image->shape[0]);
    snprintf(holdout, sizeof holdout, "%.9g", (double)o->holdout);
    snprintf(patch, sizeof patch, "%lld,%lld,%lld", (long long)o->patch[0], (long long)o->patch[1],
             (long long)o->patch[2]);
    for (int64_t k = 0; k < d->K; k++) {
        size_t u = strlen(values);
        snprintf(values + u, sizeof values - u, "%s%d", k ? "," : "", d->values[k]);
    }
    const char *meta[] = {"model", m->name, "task", "segment", "num_classes", classes, "in_channels", channels,
                          "label_values", values, "patch", patch, "binary", o->binary ? "1" : "0",
                          "norm", o->norm_nonzero ? "nonzero" : "volume", "holdout", holdout, "threshold", thr};
    return rt_weights_save(m->sd, NULL, 0, meta, (int)(sizeof meta / sizeof meta[0]) / 2, path);
}

/* --memory-mode / --memory-budget: plans the zoo model's step on a meta
 * copy at the patch batch and wraps the net in a Checkpoint with the plan
 * (seg_train sets the budget as the tracker's limit once the sampler
 * exists). Returns -1 to go on, else the exit code. */
static int seg_plan_memory(const seg_opts *o, rt_model *m, const cli_strategy *strategy,
                           const rt_optimizer_spec *spec, const rt_train_config *cfg, int64_t C, int64_t *predicted) {
    if (!strcmp(m->name, "standin")) {
        fprintf(stderr, "revtorch segment train: --memory-mode and --memory-budget plan zoo models; the stand-in "
                        "is not one (use --model unet3d or prunet3d)\n");
        return 2;
    }
    rt_memory_config mc;
    cli_ckpt_config("segment", &o->ckpt, &mc);
    if (!cli_ckpt_segments_ok("segment train", m->name, C, m->num_classes, strategy, mc.segments)) return 2;
    const int64_t xs[5] = {o->batch, C, o->patch[0], o->patch[1], o->patch[2]};
    const int64_t ys[4] = {o->batch, o->patch[0], o->patch[1], o->patch[2]};
    rt_memory_plan plan;
    if (cli_ckpt_plan_shape(m->name, C, m->num_classes, strategy, spec, cfg, 5, xs, 4, ys, &mc, &plan) != RT_OK) {
        fprintf(stderr, "revtorch segment train: %s\n", rt_error_last());
        return 1;
    }
    int rc = -1;
    if (cli_ckpt_apply(m, &plan.plan) != RT_OK) {
        rc = cli_fail("cannot apply the memory plan");
    } else {
        char desc[160];
        cli_ckpt_describe(&plan.plan, desc, sizeof desc);
        printf("memory plan: %s; predicted step peak %.1f MiB (plain %.1f MiB), recompute %.1f%% of a plain step\n",
               desc, (double)plan.predicted.peak_total / 1048576.0, (double)plan.predicted_plain.peak_total / 1048576.0,
               100.0 * plan.recompute_fraction);
        char note[256];
        if (cli_ckpt_mode_short(&mc, &plan, note, sizeof note)) printf("note: %s\n", note);
        *predicted = plan.predicted.peak_total;
    }
    rt_memory_plan_free(&plan);
    return rc;
}

static int seg_train(const seg_opts *o) {
    rt_nifti_info hdr;
    int rc = seg_check_inputs(o, true, &hdr);
    if (rc >= 0) return rc;
    rc = seg_make_out(o);
    if (rc >= 0) return rc;
    char weights[CLI_PATH_MAX];
    if (o->weights) snprintf(weights, sizeof weights, "%s", o->weights);
    else out_path(o, "weights.safetensors", weights, sizeof weights);
    const double t_start = cli_now_s();
    seg_data d = {0};
    rt_model *m = NULL;
    rt_patch_sampler *sampler = NULL;
    rt_optimizer *opt = NULL;
    rt_grad_scaler *scaler = NULL; /* --precision fp16: dynamic loss scaling, as train runs it */
    rt_tensor *pred = NULL, *probs = NULL;
    const char *model = o->model ? o->model : default_model();
    rc = 1;
    if (seg_load(o, true, false, &d) != RT_OK) {
        cli_fail("cannot read the volumes");
        goto done;
    }
    const int64_t C = d.image->shape[0], D = d.image->shape[1], H = d.image->shape[2], W = d.image->shape[3];
    if (!isnan(o->threshold) && d.K != 2) {
        fprintf(stderr, "revtorch segment train: --threshold applies to two-class tasks (--binary); %s has %lld "
                        "classes, labelled by the argmax\n", o->labels, (long long)d.K);
        rc = 2;
        goto done;
    }
    if (d.split < o->patch[0] || d.split >= D) {
        fprintf(stderr, "revtorch segment train: --holdout %g leaves %lld training slices and %lld held-out ones; "
                        "both must be non-empty and the training slab at least --patch's D (%lld)\n",
                (double)o->holdout, (long long)d.split, (long long)(D - d.split), (long long)o->patch[0]);
        rc = 2;
        goto done;
    }
    printf("revtorch segment train: %s %lldx%lldx%lld (i, j, k), %lld channel(s); %lld classes from %s%s\n",
           o->image, (long long)W, (long long)H, (long long)D, (long long)C, (long long)d.K, o->labels,
           o->binary ? " (label > 0)" : " (label values remapped to 0..K-1)");
    printf("training slab k < %lld, held-out slab k >= %lld (%lld slices)\n", (long long)d.split,
           (long long)d.split, (long long)(D - d.split));
    if (seg_model_create(model, C, d.K, (uint64_t)o->seed, &m) != RT_OK) {
        cli_fail("cannot create the model");
        goto done;
    }
    cli_strategy strategy;
    cli_memory_mode("reversible", "full", &strategy);
    cli_strategy_apply(&strategy, m);
    if (!m->net) {
        cli_fail("out of memory");
        goto done;
    }
    rt_optimizer_spec spec;
    cli_optimizer_spec(o->optimizer, o->lr, o->momentum, o->weight_decay, &spec);
    rt_train_config cfg = {.accum_steps = 1, .loss = rt_loss_dice_ce};
    if (!cli_loss_scaler_attach(&cfg, 0.0f, false, &scaler)) goto done;
    int64_t predicted = 0; /* the plan's predicted step peak */
    if (cli_ckpt_given(&o->ckpt)) {
        int prc = seg_plan_memory(o, m, &strategy, &spec, &cfg, C, &predicted);
        if (prc >= 0) {
            rc = prc;
            goto done;
        }
    }
    if (!(opt = cli_optimizer_for(&spec, m->sd))) {
        cli_fail("cannot create the optimizer");
        goto done;
    }
    rt_patch_options po = {.region_lo = {0, 0, 0}, .region_hi = {d.split, H, W}, .foreground_fraction = o->fg_fraction,
                           .flip = o->augment, .intensity = o->augment, .seed = (uint64_t)o->seed,
                           .transpose = o->augment && o->transpose};
    memcpy(po.patch, o->patch, sizeof po.patch);
    if (rt_patch_sampler_create(d.image, d.labels, &po, &sampler) != RT_OK) {
        cli_fail("cannot create the patch sampler");
        goto done;
    }
    /* The budget covers the step (parameters, gradients, optimizer state
     * and activations, as planned) above what lives outside it: the volumes
     * and the sampler's voxel lists (DATA, booked by
     * rt_patch_sampler_create), which is why the limit is set only now. */
    int64_t limit = 0;
    rt_memory_config mc;
    if (cli_ckpt_given(&o->ckpt) && cli_ckpt_config("segment", &o->ckpt, &mc) && mc.budget > 0) {
        rt_memstats now;
        rt_memstats_get(&now);
        limit = now.live_total - now.live[RT_MEM_PARAM] - now.live[RT_MEM_GRAD] - now.live[RT_MEM_OPTIM] +
                mc.budget;
        rt_mem_set_limit(limit);
    }
    const int64_t total = o->epochs * o->steps;
    rt_lr_schedule sched = {.kind = RT_LR_COSINE, .base_lr = o->lr, .t_max = total, .warmup_steps = total / 20,
                            .warmup_start_factor = 0.1f};
    char prec[512];
    printf("%s (%lld parameters), patch %lldx%lldx%lld (D, H, W), batch %lld, %s lr %g cosine, %lld epochs of "
           "%lld steps, %d thread%s; %s\n",
           m->name, (long long)rt_state_dict_num_param_elements(m->sd), (long long)o->patch[0],
           (long long)o->patch[1], (long long)o->patch[2], (long long)o->batch, o->optimizer, (double)o->lr,
           (long long)o->epochs, (long long)o->steps, rt_get_num_threads(), rt_get_num_threads() == 1 ? "" : "s",
           rt_precision_describe(cli_precision(), prec, sizeof prec));
    fflush(stdout);
    double dice[SEG_MAX_CLASSES], mean = NAN;
    for (int64_t epoch = 0; epoch < o->epochs; epoch++) {
        rt_memstats_reset_peaks();
        rt_memstats before; /* what lives outside the step: the volumes (the plan counts the model's state) */
        rt_memstats_get(&before);
        int64_t outside = before.live_total - before.live[RT_MEM_PARAM] - before.live[RT_MEM_GRAD] -
                          before.live[RT_MEM_OPTIM];
        char label[32];
        snprintf(label, sizeof label, "epoch %lld/%lld", (long long)epoch + 1, (long long)o->epochs);
        cli_progress bar;
        cli_progress_start(&bar, stdout, label, o->steps);
        double t0 = cli_now_s(), loss_sum = 0;
        int64_t skipped = 0; /* steps the loss scaler skipped (Inf/NaN gradients: nothing learnt) */
        for (int64_t s = 0; s < o->steps; s++) {
            rt_tensor *x = NULL, *y = NULL;
            rt_train_result res;
            rt_optimizer_set_lr(opt, rt_lr_at(&sched, rt_optimizer_step_count(opt)));
            rt_status st = rt_patch_sampler_next(sampler, o->batch, &x, &y, NULL);
            if (st == RT_OK) st = rt_train_step(m->net, opt, &cfg, x, y, &res);
            rt_tensor_release(x);
            rt_tensor_release(y);
            if (st != RT_OK) {
                cli_progress_finish(&bar);
                cli_fail("training step failed");
                goto done;
            }
            if (!res.stepped) {
                skipped++;
                continue;
            }
            loss_sum += res.loss;
            cli_progress_update(&bar, s + 1, res.loss, (s + 1) * o->batch);
        }
        cli_progress_finish(&bar);
        rt_memstats peaks;
        rt_memstats_get(&peaks);
        double secs = cli_now_s() - t0;
        bool last = epoch == o->epochs - 1;
        char scored[96] = "";
        if (!last && o->eval_every > 0 && (epoch + 1) % o->eval_every == 0) {
            double te = cli_now_s();
            /* The budget is the training step's. Sliding-window inference
             * accumulates probabilities over the whole held-out slab, bytes
             * set by the volume and not by the training batch, so no window
             * batch keeps it under the step's limit: it runs without the
             * limit, as the final prediction does, and the limit returns
             * for the next epoch's steps. */
            rt_mem_set_limit(0);
            rt_status est = seg_eval_slab(o, m, &d, dice, &mean);
            rt_mem_set_limit(limit);
            if (est != RT_OK) {
                cli_fail("evaluation failed");
                goto done;
            }
            snprintf(scored, sizeof scored, " | held-out Dice %.4f (%.1f s)", mean, cli_now_s() - te);
        }
        if (skipped == o->steps) /* every step skipped by the loss scaler: no loss to average (train says so too) */
            printf("epoch %lld: no optimizer step taken (all %lld steps skipped for Inf/NaN gradients) | %.2f s/step%s\n",
                   (long long)epoch + 1, (long long)skipped, secs / (double)o->steps, scored);
        else
            printf("epoch %lld: loss %.4f | %.2f s/step%s\n", (long long)epoch + 1,
                   loss_sum / (double)(o->steps - skipped), secs / (double)o->steps, scored);
        cli_print_loss_scale(stdout, scaler, skipped);
        cli_print_peaks(stdout, "  ", &peaks);
        if (predicted > 0)
            printf("  step peak %.1f MiB measured (tracked, above the volumes), %.1f MiB predicted by the plan\n",
                   (double)(peaks.peak_total - outside) / 1048576.0, (double)predicted / 1048576.0);
        fflush(stdout);
    }
    rt_mem_set_limit(0);
    double train_s = cli_now_s() - t_start;
    /* saved before predicting, so that a failure there keeps them */
    if (seg_save_weights(o, m, &d, 0.5f, weights) != RT_OK) {
        cli_fail("cannot save the weights");
        goto done;
    }
    double tp = cli_now_s();
    seg_decision dec = seg_argmax();
    rt_status pst = seg_predict(o, m, d.image, d.K, &pred, o->save_probs || d.K == 2 ? &probs : NULL);
    if (pst == RT_OK && d.K == 2) {
        if (isnan(o->threshold)) pst = seg_calibrate(&d, probs, &dec);
        else dec = (seg_decision){o->threshold, "--threshold", NAN, NAN, NAN};
    }
    if (pst == RT_OK && dec.threshold != 0.5f) { /* score the argmax too, then relabel */
        pst = seg_score(&d, pred, d.split, dice, &dec.heldout_argmax);
        seg_apply_threshold(probs, dec.threshold, pred);
        if (pst == RT_OK) pst = seg_save_weights(o, m, &d, dec.threshold, weights);
    }
    if (pst == RT_OK) pst = seg_score(&d, pred, d.split, dice, &mean);
    if (pst != RT_OK) {
        cli_fail("prediction failed");
        goto done;
    }
    double total_s = cli_now_s() - t_start;
    printf("whole-volume prediction: %.1f s; held-out slab (k >= %lld) Dice per class:", cli_now_s() - tp,
           (long long)d.split);
    for (int64_t k = 0; k < d.K && k < 12; k++) printf(" %.4f", dice[k]);
    printf("%s\nheld-out mean foreground Dice %.4f after %.1f s of training, %.1f s in all\n", d.K > 12 ? " ..." : "",
           mean, train_s, total_s);
    if (d.K == 2 && dec.threshold != 0.5f) {
        printf("decision threshold %.2f", (double)dec.threshold);
        if (!isnan(dec.train_dice))
            printf(", the best on the training slab (Dice there %.4f, %.4f at the argmax)", dec.train_dice,
                   dec.train_argmax);
        printf("; held-out Dice at the argmax %.4f\n", dec.heldout_argmax);
    }
    char title[256];
    snprintf(title, sizeof title, "%s, %s: held-out Dice %.4f (k >= %lld, above the dashed line, is held out)",
             m->name, d.K == 2 ? "brain extraction" : "parcellation", mean, (long long)d.split);
    rt_status st = seg_write_nifti(o, &d, pred);
    if (st == RT_OK) st = seg_write_probs(o, &d, probs);
    if (st == RT_OK) st = seg_write_png(o, &d, pred, title);
    if (st == RT_OK) st = seg_write_dice(o, &d, dice, mean, &dec, total_s);
    if (st != RT_OK) {
        cli_fail("cannot write the outputs");
        goto done;
    }
    printf("wrote %s, %s/prediction.nii.gz, %s/overlay.png, %s/dice.csv, %s/dice.json%s\n", weights, o->out, o->out,
           o->out, o->out, o->save_probs ? ", probabilities.nii.gz" : "");
    rc = 0;
done:
    rt_tensor_release(pred);
    rt_tensor_release(probs);
    rt_patch_sampler_destroy(sampler);
    rt_optimizer_destroy(opt);
    rt_grad_scaler_destroy(scaler);
    rt_model_destroy(m);
    seg_data_free(&d);
    return rc;
}

/* predict and eval: the two-class threshold given, else the one train
 * recorded in the weights, else the argmax. RT_ERR_INVALID_ARG (message
 * printed) for --threshold on a task of more than two classes. */
static rt_status seg_decide(const seg_opts *o, const seg_data *d, seg_decision *dec) {
    char thr[32];
    *dec = seg_argmax();
    if (!isnan(o->threshold)) {
        if (d->K != 2) {
            fprintf(stderr, "revtorch segment %s: --threshold applies to two-class tasks; --weights %s has %lld "
                            "classes, labelled by the argmax\n", o->cmd, o->weights, (long long)d->K);
            return RT_ERR_INVALID_ARG;
        }
        dec->threshold = o->threshold;
        dec->source = "--threshold";
    } else if (d->K == 2 && rt_weights_read_metadata(o->weights, "threshold", thr, sizeof thr) == RT_OK) {
        float t = strtof(thr, NULL);
        if (t > 0.0f && t < 1.0f) {
            dec->threshold = t;
            dec->source = "recorded in the weights";
        }
    }
    rt_error_clear(); /* weights saved before the threshold existed have none */
    return RT_OK;
}

/* predict and eval: the model, classes and label values from the weights file. */
static int seg_apply(const seg_opts *o_in, bool score) {
    char model[64], classes[16], values[SEG_MAX_CLASSES * 12], binary[8], norm[16], patch[64];
    if (access(o_in->weights, R_OK) != 0) {
        fprintf(stderr, "revtorch segment %s: cannot read --weights %s: %s\n", o_in->cmd, o_in->weights,
                strerror(errno));
        return 1;
    }
    seg_opts oo = *o_in;
    const seg_opts *o = &oo;
    if (!o->patch_given && rt_weights_read_metadata(o->weights, "patch", patch, sizeof patch) == RT_OK)
        parse_triple(patch, oo.patch);
    char holdout[32];
    if (!o->holdout_given && rt_weights_read_metadata(o->weights, "holdout", holdout, sizeof holdout) == RT_OK)
        oo.holdout = strtof(holdout, NULL);
    rt_nifti_info hdr;
    int rc = seg_check_inputs(o, score, &hdr);
    if (rc >= 0) return rc;
    if (rt_weights_read_metadata(o->weights, "model", model, sizeof model) != RT_OK ||
        rt_weights_read_metadata(o->weights, "num_classes", classes, sizeof classes) != RT_OK ||
        rt_weights_read_metadata(o->weights, "label_values", values, sizeof values) != RT_OK) {
        fprintf(stderr, "revtorch segment %s: --weights %s: %s (save weights with `revtorch segment train`)\n",
                o->cmd, o->weights, rt_error_last());
        return 1;
    }
    if (rt_weights_read_metadata(o->weights, "binary", binary, sizeof binary) == RT_OK && !o->labels_given)
        oo.binary = !strcmp(binary, "1");
    if (rt_weights_read_metadata(o->weights, "norm", norm, sizeof norm) == RT_OK)
        oo.norm_nonzero = !strcmp(norm, "nonzero");
    rt_error_clear();
    rc = seg_make_out(o);
    if (rc >= 0) return rc;
    seg_data d = {0};
    d.K = atoll(classes);
    if (d.K < 1 || d.K > SEG_MAX_CLASSES) {
        fprintf(stderr, "revtorch segment %s: --weights %s records %s classes\n", o->cmd, o->weights, classes);
        return 1;
    }
    char *p = values;
    for (int64_t k = 0; k < d.K; k++) {
        d.values[k] = (int32_t)strtol(p, &p, 10);
        if (*p == ',') p++;
    }
    rt_model *m = NULL;
    rt_tensor *pred = NULL, *probs = NULL;
    seg_decision dec = seg_argmax();
    double t0 = cli_now_s();
    rc = 1;
    if (seg_load(&oo, score, true, &d) != RT_OK) cli_fail("cannot read the volumes");
    else if (seg_model_create(o->model ? o->model : model, d.image->shape[0], d.K, 0, &m) != RT_OK)
        cli_fail("cannot create the model");
    else if (rt_weights_load(m->sd, NULL, 0, o->weights) != RT_OK) cli_fail("cannot load the weights");
    else if (cli_strategy_apply(&(cli_strategy){.reversible = true}, m), !m->net) cli_fail("out of memory");
    else if (seg_decide(&oo, &d, &dec) != RT_OK) rc = 2;
    else if (seg_predict(&oo, m, d.image, d.K, &pred, o->save_probs || dec.threshold != 0.5f ? &probs : NULL) != RT_OK)
        cli_fail("prediction failed");
    else {
        double dice[SEG_MAX_CLASSES], mean = NAN;
        char title[256];
        snprintf(title, sizeof title, "%s: prediction of %s", m->name, o->image);
        rt_status st = RT_OK;
        if (score && dec.threshold != 0.5f) st = seg_score(&d, pred, d.split, dice, &dec.heldout_argmax);
        seg_apply_threshold(probs, dec.threshold, pred);
        if (dec.threshold != 0.5f) printf("decision threshold %.2f (%s)\n", (double)dec.threshold, dec.source);
        if (st == RT_OK && score && (st = seg_score(&d, pred, d.split, dice, &mean)) == RT_OK) {
            printf("held-out slab (k >= %lld) mean foreground Dice %.4f over %lld classes\n", (long long)d.split,
                   mean, (long long)d.K);
            snprintf(title, sizeof title, "%s: held-out Dice %.4f (k >= %lld, above the dashed line)", m->name, mean,
                     (long long)d.split);
            st = seg_write_dice(&oo, &d, dice, mean, &dec, cli_now_s() - t0);
        }
        if (st == RT_OK) st = seg_write_nifti(&oo, &d, pred);
        if (st == RT_OK) st = seg_write_probs(&oo, &d, probs);
        if (st == RT_OK) st = seg_write_png(&oo, &d, pred, title);
        if (st != RT_OK) cli_fail("cannot write the outputs");
        else {
            printf("wrote %s/prediction.nii.gz, %s/overlay.png%s%s\n", o->out, o->out,
                   score ? ", dice.csv, dice.json" : "", o->save_probs ? ", probabilities.nii.gz" : "");
            rc = 0;
        }
    }
    rt_tensor_release(pred);
    rt_tensor_release(probs);
    rt_model_destroy(m);
    seg_data_free(&d);
    return rc;
}

int cli_cmd_segment(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        seg_usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    const char *sub = argv[1];
    if (strcmp(sub, "train") && strcmp(sub, "predict") && strcmp(sub, "eval")) {
        fprintf(stderr, "revtorch segment: unknown subcommand '%s' (train, predict or eval)\n", sub);
        return 2;
    }
    seg_opts o;
    int rc = seg_parse(argc - 1, argv + 1, &o);
    if (rc >= 0) return rc;
    rt_set_num_threads((int)o.threads);
    if (!strcmp(sub, "train")) return seg_train(&o);
    return seg_apply(&o, !strcmp(sub, "eval"));
}
