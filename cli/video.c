/* `revtorch video train|eval`: next-frame prediction on Moving Fashion-MNIST
 * (data/moving_fashion.h) with a ConvLSTM (models/convlstm.h), trained by
 * backpropagation through time over the time chain (memory/time_chain.h):
 * plainly, or under a checkpointing schedule planned for a memory budget
 * whose gradients are plain BPTT's. */
#include <cairo.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "common.h"
#include "autograd/node.h"
#include "core/mem.h"
#include "data/mnist.h"
#include "data/moving_fashion.h"
#include "io/weights.h"
#include "kernels/threads.h"
#include "memory/time_chain.h"
#include "models/convlstm.h"
#include "ops/ops.h"
#include "optim/optimizer.h"
#include "outputs.h"
#include "plot.h"
#include "progress.h"

/* Held-out sequences come from this stream of the test images whatever the
 * training seed, so every run is scored on the same sequences. */
#define VID_EVAL_STREAM 20151015ULL
#define VID_SIZE 64

typedef struct vid_opts {
    const char *cmd, *data, *out, *weights, *memory;
    int64_t frames, hidden, batch, steps, seed, threads, every, eval_seqs;
    float lr, budget_mib;
    bool frames_given, hidden_given;
} vid_opts;

static void vid_usage(FILE *f) {
    fprintf(f,
            "usage: revtorch video train|eval [options]\n"
            "Next-frame prediction on Moving Fashion-MNIST (two 28x28 items moving and bouncing in 64x64\n"
            "frames, generated from a seed as Moving MNIST; training sequences from the training images,\n"
            "held-out ones from the test images) with a ConvLSTM, trained by backpropagation through time.\n\n"
            "  train   train, then evaluate; writes OUT/weights.safetensors (or --weights), OUT/train.csv,\n"
            "          OUT/eval.csv and OUT/strip.png (ground truth row above the predicted row)\n"
            "  eval    --weights FILE: next-frame MSE on held-out sequences, next to copying the last frame;\n"
            "          writes OUT/eval.csv and OUT/strip.png\n\n"
            "  --frames T          time steps per sequence: the model reads frames 0..T-1 and predicts 1..T\n"
            "                      (default 16; eval: the training run's)\n"
            "  --hidden H          hidden channels of h and c (default 16; eval: from the weights)\n"
            "  --batch N           sequences per step (default 4)\n"
            "  --steps N           training steps (default 200)\n"
            "  --lr X              AdamW learning rate, no weight decay (default 1e-3)\n"
            "  --memory plain|planned\n"
            "                      plain: plain BPTT, every step's activations kept (default);\n"
            "                      planned: time steps checkpointed with the fewest recomputations that fit\n"
            "                      --budget (Revolve's binomial schedule, extended by recorded segments);\n"
            "                      gradients are plain BPTT's\n"
            "  --budget MIB        planned: the chain's activation peak budget in MiB (default: a quarter of\n"
            "                      plain BPTT's, both predicted on the meta device)\n"
            "  --every K           planned: store every K-th state instead (store-every-k)\n"
            "  --eval-sequences N  held-out sequences scored (default 32)\n"
            "  --data DIR          Fashion-MNIST directory (default %s)\n"
            "  --seed N            initialisation and training-sequence seed (default 0)\n"
            "  --out DIR           output directory (default video-out; created)\n"
            "  --weights FILE      train: where to save (default OUT/weights.safetensors); eval: required\n"
            "  --threads N         threads (default: all cores)\n"
            "Exit status: 0 done, 1 runtime failure (files, data, training), 2 usage error (nothing was run).\n",
            rt_mnist_default_dir());
}

static int vid_parse(int argc, char **argv, vid_opts *o) {
    *o = (vid_opts){.cmd = argv[0], .data = rt_mnist_default_dir(), .out = "video-out", .memory = "plain",
                    .frames = 16, .hidden = 16, .batch = 4, .steps = 200, .eval_seqs = 32, .lr = 1e-3f};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool ok = true;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            vid_usage(stdout);
            return 0;
        } else if (!strcmp(a, "--frames")) ok = cli_int_in(argc, argv, &i, 1, 4096, NULL, &o->frames), o->frames_given = true;
        else if (!strcmp(a, "--hidden")) ok = cli_int_in(argc, argv, &i, 1, 1024, NULL, &o->hidden), o->hidden_given = true;
        else if (!strcmp(a, "--batch")) ok = cli_int_in(argc, argv, &i, 1, 4096, NULL, &o->batch);
        else if (!strcmp(a, "--steps")) ok = cli_int_in(argc, argv, &i, 1, INT32_MAX, NULL, &o->steps);
        else if (!strcmp(a, "--eval-sequences")) ok = cli_int_in(argc, argv, &i, 1, 100000, NULL, &o->eval_seqs);
        else if (!strcmp(a, "--every")) ok = cli_int_in(argc, argv, &i, 1, 4096, NULL, &o->every);
        else if (!strcmp(a, "--lr")) ok = cli_float_in(argc, argv, &i, 0, INFINITY, false, NULL, &o->lr);
        else if (!strcmp(a, "--budget"))
            ok = cli_float_in(argc, argv, &i, 0, INFINITY, false, "(MiB)", &o->budget_mib);
        else if (!strcmp(a, "--memory")) ok = cli_str(argc, argv, &i, &o->memory);
        else if (!strcmp(a, "--data")) ok = cli_str(argc, argv, &i, &o->data);
        else if (!strcmp(a, "--out")) ok = cli_str(argc, argv, &i, &o->out);
        else if (!strcmp(a, "--weights")) ok = cli_str(argc, argv, &i, &o->weights);
        else if (!strcmp(a, "--seed")) ok = cli_int(argc, argv, &i, &o->seed);
        else if (!strcmp(a, "--threads")) ok = cli_int(argc, argv, &i, &o->threads);
        else {
            fprintf(stderr, "revtorch video %s: unknown option '%s' (see revtorch video --help)\n", o->cmd, a);
            return 2;
        }
        if (!ok) return 2;
    }
    if (strcmp(o->memory, "plain") && strcmp(o->memory, "planned")) {
        fprintf(stderr, "revtorch video %s: --memory must be plain or planned, got '%s'\n", o->cmd, o->memory);
        return 2;
    }
    if (!strcmp(o->memory, "plain") && (o->every > 0 || o->budget_mib > 0)) {
        fprintf(stderr, "revtorch video %s: --budget and --every choose a schedule for --memory planned\n", o->cmd);
        return 2;
    }
    if (o->every > 0 && o->budget_mib > 0) {
        fprintf(stderr, "revtorch video %s: give --budget or --every, not both\n", o->cmd);
        return 2;
    }
    if (!cli_threads_ok(o->threads)) return 2;
    if (!strcmp(o->cmd, "eval") && !o->weights) {
        fprintf(stderr, "revtorch video eval: --weights FILE is required (the file `revtorch video train` saved)\n");
        return 2;
    }
    return -1;
}

/* CPU seconds this process has used (all threads): the step time that
 * other processes competing for the cores change least (with --threads 1
 * it is the step's own compute). */
static double vid_cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int vid_make_out(const vid_opts *o) {
    struct stat sb;
    if (stat(o->out, &sb) == 0) {
        if (S_ISDIR(sb.st_mode)) return -1;
        fprintf(stderr, "revtorch video %s: --out %s exists and is not a directory\n", o->cmd, o->out);
        return 1;
    }
    if (mkdir(o->out, 0777) != 0) {
        fprintf(stderr, "revtorch video %s: cannot create --out %s: %s\n", o->cmd, o->out, strerror(errno));
        return 1;
    }
    return -1;
}

/* A batch of sequences as T+1 frame tensors (N, 1, 64, 64) on `dev`
 * (meta: shapes only). */
typedef struct vid_batch {
    int n_frames;
    rt_tensor **frames;
    rt_tensor *state0; /* zeros (N, 2·hidden, 64, 64), TEMP */
    float *buf;
} vid_batch;

static void vid_batch_free(vid_batch *b) {
    for (int t = 0; b->frames && t < b->n_frames; t++) rt_tensor_release(b->frames[t]);
    free(b->frames);
    free(b->buf);
    rt_tensor_release(b->state0);
    memset(b, 0, sizeof *b);
}

static rt_status vid_batch_make(rt_device dev, int T, int N, int hidden, vid_batch *b) {
    memset(b, 0, sizeof *b);
    b->n_frames = T + 1;
    b->frames = calloc((size_t)(T + 1), sizeof *b->frames);
    if (dev == RT_DEVICE_CPU) b->buf = malloc(sizeof(float) * (size_t)(T + 1) * N * VID_SIZE * VID_SIZE);
    if (!b->frames || (dev == RT_DEVICE_CPU && !b->buf)) return rt_error_set(RT_ERR_OOM, "video: out of memory");
    const int64_t fs[4] = {N, 1, VID_SIZE, VID_SIZE}, ss[4] = {N, 2 * hidden, VID_SIZE, VID_SIZE};
    for (int t = 0; t <= T; t++)
        if (!(b->frames[t] = rt_tensor_zeros(4, fs, RT_F32, dev, RT_MEM_DATA))) return rt_error_last_status();
    if (!(b->state0 = rt_tensor_zeros(4, ss, RT_F32, dev, RT_MEM_TEMP))) return rt_error_last_status();
    return RT_OK;
}

/* Fills the frames with sequences first..first+N-1 of `seed` from ds. */
static rt_status vid_batch_fill(vid_batch *b, const rt_dataset *ds, uint64_t seed, uint64_t first) {
    const int T1 = b->n_frames, N = (int)b->frames[0]->shape[0];
    rt_moving_fashion_opts mo = rt_moving_fashion_defaults(T1);
    RT_TRY(rt_moving_fashion_batch(ds, &mo, seed, first, N, b->buf));
    const size_t fb = sizeof(float) * (size_t)N * VID_SIZE * VID_SIZE;
    for (int t = 0; t < T1; t++) memcpy(rt_tensor_f32(b->frames[t]), b->buf + (size_t)t * (fb / sizeof(float)), fb);
    return RT_OK;
}

static rt_status vid_model(rt_device dev, int hidden, uint64_t seed, rt_module **m) {
    rt_init_ctx ctx = rt_init_ctx_make(dev, seed);
    rt_convlstm_config cfg = {1, hidden, 3};
    return rt_convlstm_create(&ctx, &cfg, m);
}

static void vid_release_grads(rt_module *m) {
    rt_state_dict *sd = NULL;
    if (rt_module_state_dict(m, &sd) != RT_OK) return;
    int np = rt_state_dict_num_params(sd);
    rt_tensor *p[16];
    if (np > 16) np = 16;
    rt_state_dict_params(sd, p, np);
    for (int i = 0; i < np; i++) rt_tensor_zero_grad(p[i]);
    rt_state_dict_destroy(sd);
}

/* The schedule and its meta-device prediction: profile one step, predict
 * plain BPTT's peak, choose the plan (plain, --every, or the budget's,
 * default a quarter of plain's) and predict its peak. */
typedef struct vid_plan {
    rt_time_plan plan;
    int64_t step_bytes, state_bytes, base, predicted, predicted_plain;
} vid_plan;

static rt_status vid_plan_make(const vid_opts *o, vid_plan *vp) {
    rt_module *mm = NULL;
    vid_batch mb;
    const int T = (int)o->frames;
    RT_TRY(vid_model(RT_DEVICE_META, (int)o->hidden, 0, &mm));
    rt_status st = vid_batch_make(RT_DEVICE_META, T < 2 ? 2 : T, (int)o->batch, (int)o->hidden, &mb);
    rt_convlstm_seq seq = {mm, mb.frames, mb.n_frames};
    if (st == RT_OK) st = rt_time_chain_profile(rt_convlstm_seq_step, &seq, mb.state0, &vp->step_bytes, &vp->base);
    vp->state_bytes = (int64_t)rt_tensor_nbytes(mb.state0);
    rt_time_plan plain;
    if (st == RT_OK) st = rt_time_plan_plain(T, vp->state_bytes, vp->step_bytes, &plain);
    vid_release_grads(mm);
    if (st == RT_OK)
        st = rt_time_chain_peak(rt_convlstm_seq_step, &seq, &plain, mb.state0, 1.0f / T, &vp->predicted_plain, NULL);
    int64_t budget = 0;
    if (st == RT_OK) {
        if (!strcmp(o->memory, "plain")) vp->plan = plain;
        else if (o->every > 0) st = rt_time_plan_every(T, (int)o->every, vp->state_bytes, vp->step_bytes, &vp->plan);
        else {
            budget = o->budget_mib > 0 ? (int64_t)(o->budget_mib * 1048576.0) : vp->predicted_plain / 4;
            st = rt_time_plan_budget(T, vp->state_bytes, vp->step_bytes, budget - vp->base, &vp->plan);
        }
    }
    /* A budget is met on the prediction, not only on the model (as
     * memory/budget.h does): while the meta run exceeds it, re-plan with the
     * model's budget lowered by the excess (at most 8 times). */
    int64_t model_budget = budget - vp->base;
    for (int it = 0; st == RT_OK; it++) {
        vid_release_grads(mm);
        st = rt_time_chain_peak(rt_convlstm_seq_step, &seq, &vp->plan, mb.state0, 1.0f / T, &vp->predicted, NULL);
        if (st != RT_OK || budget <= 0 || vp->predicted <= budget || it == 8) break;
        model_budget -= vp->predicted - budget;
        st = rt_time_plan_budget(T, vp->state_bytes, vp->step_bytes, model_budget, &vp->plan);
    }
    if ((st == RT_ERR_OOM || (st == RT_OK && vp->predicted > budget)) && budget > 0) {
        /* in the user's terms: the least-memory schedule's predicted peak
         * (one state slot, one recorded step at a time) */
        rt_time_plan least = {T, 1, T > 1 ? 1 : 0, 0, 0};
        int64_t least_peak = 0;
        vid_release_grads(mm);
        st = rt_time_chain_peak(rt_convlstm_seq_step, &seq, &least, mb.state0, 1.0f / T, &least_peak, NULL);
        if (st == RT_OK)
            st = rt_error_set(RT_ERR_OOM, "--budget %.2f MiB is below the least-memory schedule's predicted "
                                          "%.2f MiB (one state slot and one recorded step)",
                              (double)budget / 1048576.0, (double)least_peak / 1048576.0);
    }
    vid_batch_free(&mb);
    rt_module_destroy(mm);
    return st;
}

/* Next-frame MSE over eval_seqs held-out sequences (mean over steps and
 * pixels), the copy-last-frame baseline's, and the first sequence's
 * frames and predictions for the strip (T+1 and T frames of 64x64, when
 * gt/pred are not NULL). */
static rt_status vid_evaluate(const vid_opts *o, rt_module *m, const rt_dataset *test, double *mse, double *copy_mse,
                              float *gt, float *pred_out) {
    const int T = (int)o->frames, N = (int)(o->batch < o->eval_seqs ? o->batch : o->eval_seqs);
    vid_batch b;
    RT_TRY(vid_batch_make(RT_DEVICE_CPU, T, N, (int)o->hidden, &b));
    bool prev = rt_grad_set_enabled(false);
    double se = 0, se_copy = 0;
    int64_t count = 0;
    rt_status st = RT_OK;
    const int64_t S2 = VID_SIZE * VID_SIZE;
    for (int64_t first = 0; first < o->eval_seqs && st == RT_OK; first += N) {
        st = vid_batch_fill(&b, test, VID_EVAL_STREAM, (uint64_t)first);
        int n_use = (int)(o->eval_seqs - first < N ? o->eval_seqs - first : N);
        rt_tensor *cur = rt_tensor_retain(b.state0);
        for (int t = 0; t < T && st == RT_OK; t++) {
            rt_tensor *next = NULL, *pred = NULL;
            st = rt_convlstm_step(m, b.frames[t], cur, &next, &pred);
            rt_tensor_release(cur);
            cur = next;
            if (st != RT_OK) break;
            const float *p = rt_tensor_f32(pred), *y = rt_tensor_f32(b.frames[t + 1]), *x = rt_tensor_f32(b.frames[t]);
            for (int64_t i = 0; i < n_use * S2; i++) {
                double d = (double)p[i] - y[i], c = (double)x[i] - y[i];
                se += d * d, se_copy += c * c;
            }
            count += n_use * S2;
            if (first == 0 && pred_out) memcpy(pred_out + t * S2, p, sizeof(float) * (size_t)S2);
            rt_tensor_release(pred);
        }
        rt_tensor_release(cur);
        if (st == RT_OK && first == 0 && gt)
            for (int t = 0; t <= T; t++) memcpy(gt + t * S2, rt_tensor_f32(b.frames[t]), sizeof(float) * (size_t)S2);
    }
    rt_grad_set_enabled(prev);
    vid_batch_free(&b);
    *mse = se / (double)count;
    *copy_mse = se_copy / (double)count;
    return st;
}

/* Pixel (r, c) of one VID_SIZE × VID_SIZE frame (cli_gray_fn). */
static float frame_value(const void *frame, int64_t r, int64_t c) {
    return ((const float *)frame)[r * VID_SIZE + c];
}

/* OUT/strip.png: up to 10 frames t = 1..T spread over the sequence, the
 * ground truth x_t in the top row, the prediction x̂_t (made from frames
 * 0..t-1) below, each 64x64 drawn 2x. */
static rt_status vid_strip_png(const char *path, const float *gt, const float *pred, int T, const char *title) {
    const int scale = 2, cell = VID_SIZE * scale, margin = 10, top = 40, label = 16;
    int n = T < 10 ? T : 10, idx[10];
    for (int k = 0; k < n; k++) idx[k] = 1 + (int)((int64_t)k * (T - 1) / (n > 1 ? n - 1 : 1));
    const int width = margin + n * (cell + margin) + 90, height = top + 2 * (cell + label) + 2 * margin;
    cairo_surface_t *surf = cairo_image_surface_create(CAIRO_FORMAT_RGB24, width, height);
    cairo_t *cr = cairo_create(surf);
    cairo_set_source_rgb(cr, 0, 0, 0);
    cairo_paint(cr);
    cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
    cairo_set_source_rgb(cr, 1, 1, 1);
    cairo_set_font_size(cr, 14);
    cairo_move_to(cr, margin, 22);
    cairo_show_text(cr, title);
    for (int row = 0; row < 2; row++) {
        int y0 = top + row * (cell + label) + label;
        cairo_set_source_rgb(cr, 0.85, 0.85, 0.85);
        cairo_set_font_size(cr, 12);
        cairo_move_to(cr, margin + n * (cell + margin), y0 + cell / 2);
        cairo_show_text(cr, row == 0 ? "truth" : "predicted");
        for (int k = 0; k < n; k++) {
            int t = idx[k], x0 = margin + k * (cell + margin);
            const float *src = row == 0 ? gt + (int64_t)t * VID_SIZE * VID_SIZE
                                        : pred + (int64_t)(t - 1) * VID_SIZE * VID_SIZE;
            cli_paint_gray(cr, VID_SIZE, VID_SIZE, frame_value, src, x0, y0, scale);
            if (row == 0) {
                char lab[16];
                snprintf(lab, sizeof lab, "t = %d", t);
                cairo_set_source_rgb(cr, 0.85, 0.85, 0.85);
                cairo_move_to(cr, x0, y0 - 4);
                cairo_show_text(cr, lab);
            }
        }
    }
    cairo_destroy(cr);
    rt_status st = cli_png_save(surf, path);
    cairo_surface_destroy(surf);
    return st;
}

/* Writes text to path via a temporary renamed over it. */
static rt_status vid_write_file(const char *path, const char *text) {
    char tmp[CLI_PATH_MAX + 32];
    FILE *fp = cli_open_tmp(path, tmp, sizeof tmp);
    if (!fp) return rt_error_last_status();
    fputs(text, fp);
    return cli_commit_tmp(fp, tmp, path);
}

/* Evaluates, prints, writes eval.csv and strip.png. */
static int vid_report_eval(const vid_opts *o, rt_module *m, const rt_dataset *test, const char *extra_csv) {
    const int T = (int)o->frames;
    const int64_t S2 = VID_SIZE * VID_SIZE;
    float *gt = malloc(sizeof(float) * (size_t)(T + 1) * S2), *pr = malloc(sizeof(float) * (size_t)T * S2);
    if (!gt || !pr) {
        free(gt), free(pr);
        return cli_fail("out of memory");
    }
    double mse = 0, copy = 0, t0 = cli_now_s();
    rt_status st = vid_evaluate(o, m, test, &mse, &copy, gt, pr);
    int rc = 1;
    if (st != RT_OK) {
        cli_fail("evaluation failed");
        goto done;
    }
    printf("held-out next-frame MSE %.5f over %lld sequences of %d steps (copy-last-frame baseline %.5f), %.1f s\n",
           mse, (long long)o->eval_seqs, T, copy, cli_now_s() - t0);
    char path[CLI_PATH_MAX], csv[1024], title[256];
    snprintf(csv, sizeof csv, "frames,hidden,sequences,mse,copy_last_mse%s\n%d,%lld,%lld,%.6f,%.6f%s\n",
             extra_csv ? extra_csv : "", T, (long long)o->hidden, (long long)o->eval_seqs, mse, copy,
             extra_csv ? extra_csv + strlen(extra_csv) + 1 : "");
    snprintf(path, sizeof path, "%s/eval.csv", o->out);
    if (vid_write_file(path, csv) != RT_OK) {
        cli_fail("cannot write eval.csv");
        goto done;
    }
    snprintf(title, sizeof title, "ConvLSTM (hidden %lld), %d steps: held-out next-frame MSE %.4f (copy last frame %.4f)",
             (long long)o->hidden, T, mse, copy);
    snprintf(path, sizeof path, "%s/strip.png", o->out);
    if (vid_strip_png(path, gt, pr, T, title) != RT_OK) {
        cli_fail("cannot write strip.png");
        goto done;
    }
    printf("wrote %s/eval.csv, %s/strip.png\n", o->out, o->out);
    rc = 0;
done:
    free(gt);
    free(pr);
    return rc;
}

static rt_status vid_save(const vid_opts *o, rt_module *m, const char *path) {
    rt_state_dict *sd = NULL;
    RT_TRY(rt_module_state_dict(m, &sd));
    char hidden[16], frames[16];
    snprintf(hidden, sizeof hidden, "%lld", (long long)o->hidden);
    snprintf(frames, sizeof frames, "%lld", (long long)o->frames);
    const char *meta[] = {"model", "convlstm", "task", "video", "hidden", hidden, "kernel", "3", "frames", frames};
    rt_status st = rt_weights_save(sd, NULL, 0, meta, 5, path);
    rt_state_dict_destroy(sd);
    return st;
}

static int vid_train(const vid_opts *o) {
    int rc = vid_make_out(o);
    if (rc >= 0) return rc;
    char weights[CLI_PATH_MAX], path[CLI_PATH_MAX];
    if (o->weights) snprintf(weights, sizeof weights, "%s", o->weights);
    else snprintf(weights, sizeof weights, "%s/weights.safetensors", o->out);
    rt_dataset *train = NULL, *test = NULL;
    rt_module *m = NULL;
    rt_optimizer *opt = NULL;
    rt_state_dict *sd = NULL;
    vid_batch b = {0};
    FILE *log = NULL;
    char tmp_csv[CLI_PATH_MAX + 32] = ""; /* train.csv's temporary, removed if the run fails */
    rc = 1;
    if (rt_mnist_load(o->data, true, &train) != RT_OK || rt_mnist_load(o->data, false, &test) != RT_OK) {
        cli_fail("cannot read Fashion-MNIST");
        goto done;
    }
    const int T = (int)o->frames;
    vid_plan vp;
    if (vid_plan_make(o, &vp) != RT_OK) {
        fprintf(stderr, "revtorch video train: cannot plan the time chain: %s\n", rt_error_last());
        goto done;
    }
    printf("revtorch video train: Moving Fashion-MNIST 64x64, 2 items, %d steps per sequence, batch %lld; ConvLSTM "
           "hidden %lld, 3x3; AdamW lr %g; %lld steps; %d thread%s\n", T, (long long)o->batch, (long long)o->hidden,
           (double)o->lr, (long long)o->steps, rt_get_num_threads(), rt_get_num_threads() == 1 ? "" : "s");
    printf("memory %s: segments of %d recorded steps, %d state slots, %.0f step forwards per sequence (plain %d); "
           "one step keeps %.2f MiB, a state %.2f MiB\n", o->memory, vp.plan.segment, vp.plan.slots, vp.plan.forwards, T,
           (double)vp.step_bytes / 1048576.0, (double)vp.state_bytes / 1048576.0);
    printf("predicted chain peak (meta device): %.2f MiB; plain BPTT %.2f MiB\n", (double)vp.predicted / 1048576.0,
           (double)vp.predicted_plain / 1048576.0);
    if (vid_model(RT_DEVICE_CPU, (int)o->hidden, (uint64_t)o->seed, &m) != RT_OK ||
        rt_module_state_dict(m, &sd) != RT_OK) {
        cli_fail("cannot create the model");
        goto done;
    }
    rt_tensor *params[16];
    int np = rt_state_dict_params(sd, params, 16);
    rt_optimizer_spec spec = {.kind = RT_OPTIM_ADAMW, .adamw = rt_adamw_default_opts()};
    spec.adamw.lr = o->lr;
    spec.adamw.weight_decay = 0;
    if (!(opt = rt_optimizer_create(&spec, params, np))) {
        cli_fail("cannot create the optimizer");
        goto done;
    }
    if (vid_batch_make(RT_DEVICE_CPU, T, (int)o->batch, (int)o->hidden, &b) != RT_OK) {
        cli_fail("out of memory");
        goto done;
    }
    snprintf(path, sizeof path, "%s/train.csv", o->out);
    if (!(log = cli_open_tmp(path, tmp_csv, sizeof tmp_csv))) {
        fprintf(stderr, "revtorch video train: %s\n", rt_error_last());
        goto done;
    }
    fprintf(log, "step,loss,seconds,cpu_seconds,chain_peak_bytes\n");
    rt_convlstm_seq seq = {m, b.frames, b.n_frames};
    cli_progress bar;
    cli_progress_start(&bar, stdout, "train", o->steps);
    bar.unit = "seq";
    double t_all = cli_now_s(), timed = 0, timed_cpu = 0, loss_tail = 0;
    int64_t peak_max = 0, n_timed = 0, n_tail = 0;
    for (int64_t s = 0; s < o->steps; s++) {
        double t0 = cli_now_s(), c0 = vid_cpu_s(), loss = 0;
        int64_t peak = 0;
        rt_status st = vid_batch_fill(&b, train, (uint64_t)o->seed, (uint64_t)(s * o->batch));
        rt_optimizer_zero_grad(opt);
        if (st == RT_OK)
            st = rt_time_chain_peak(rt_convlstm_seq_step, &seq, &vp.plan, b.state0, 1.0f / T, &peak, &loss);
        if (st == RT_OK) st = rt_optimizer_step(opt);
        if (st != RT_OK) {
            cli_progress_finish(&bar);
            cli_fail("training step failed");
            goto done;
        }
        double dt = cli_now_s() - t0, dc = vid_cpu_s() - c0;
        loss /= T;
        if (s > 0) timed += dt, timed_cpu += dc, n_timed++; /* the first step warms caches up */
        if (s >= o->steps - (o->steps + 9) / 10) loss_tail += loss, n_tail++;
        if (peak > peak_max) peak_max = peak;
        fprintf(log, "%lld,%.6f,%.4f,%.4f,%lld\n", (long long)s + 1, loss, dt, dc, (long long)peak);
        cli_progress_update(&bar, s + 1, loss, (s + 1) * o->batch);
    }
    cli_progress_finish(&bar);
    rt_status written = cli_commit_tmp(log, tmp_csv, path);
    log = NULL;
    if (written != RT_OK) {
        fprintf(stderr, "revtorch video train: %s\n", rt_error_last());
        goto done;
    }
    double step_s = n_timed ? timed / (double)n_timed : cli_now_s() - t_all;
    double step_cpu = n_timed ? timed_cpu / (double)n_timed : 0;
    printf("trained %lld steps in %.1f s: %.3f s/step wall, %.3f s/step CPU; training loss (last 10%% of steps) %.5f\n",
           (long long)o->steps, cli_now_s() - t_all, step_s, step_cpu, loss_tail / (double)(n_tail ? n_tail : 1));
    printf("chain peak measured %.2f MiB (tracked, above what lives between steps), predicted %.2f MiB\n",
           (double)peak_max / 1048576.0, (double)vp.predicted / 1048576.0);
    if (vid_save(o, m, weights) != RT_OK) {
        cli_fail("cannot save the weights");
        goto done;
    }
    printf("wrote %s, %s\n", weights, path);
    char extra[256];
    int k = snprintf(extra, sizeof extra, ",memory,segment,slots,forwards,step_seconds,step_cpu_seconds,chain_peak_bytes,"
                                          "predicted_peak_bytes,plain_predicted_peak_bytes");
    snprintf(extra + k + 1, sizeof extra - (size_t)k - 1, ",%s,%d,%d,%.0f,%.4f,%.4f,%lld,%lld,%lld", o->memory,
             vp.plan.segment, vp.plan.slots, vp.plan.forwards, step_s, step_cpu, (long long)peak_max, (long long)vp.predicted,
             (long long)vp.predicted_plain);
    rc = vid_report_eval(o, m, test, extra);
done:
    cli_discard_tmp(log, log ? tmp_csv : NULL);
    vid_batch_free(&b);
    rt_optimizer_destroy(opt);
    rt_state_dict_destroy(sd);
    rt_module_destroy(m);
    rt_dataset_destroy(train);
    rt_dataset_destroy(test);
    return rc;
}

static int vid_eval(const vid_opts *o_in) {
    vid_opts oo = *o_in;
    char buf[32];
    if (access(oo.weights, R_OK) != 0) {
        fprintf(stderr, "revtorch video eval: cannot read --weights %s: %s\n", oo.weights, strerror(errno));
        return 1;
    }
    if (rt_weights_read_metadata(oo.weights, "task", buf, sizeof buf) != RT_OK || strcmp(buf, "video")) {
        fprintf(stderr, "revtorch video eval: %s was not saved by `revtorch video train`\n", oo.weights);
        return 1;
    }
    if (rt_weights_read_metadata(oo.weights, "hidden", buf, sizeof buf) == RT_OK) oo.hidden = atoi(buf);
    if (!oo.frames_given && rt_weights_read_metadata(oo.weights, "frames", buf, sizeof buf) == RT_OK)
        oo.frames = atoi(buf);
    int rc = vid_make_out(&oo);
    if (rc >= 0) return rc;
    rt_dataset *test = NULL;
    rt_module *m = NULL;
    rt_state_dict *sd = NULL;
    rc = 1;
    if (rt_mnist_load(oo.data, false, &test) != RT_OK) cli_fail("cannot read Fashion-MNIST");
    else if (vid_model(RT_DEVICE_CPU, (int)oo.hidden, 0, &m) != RT_OK || rt_module_state_dict(m, &sd) != RT_OK)
        cli_fail("cannot create the model");
    else if (rt_weights_load(sd, NULL, 0, oo.weights) != RT_OK) cli_fail("cannot load the weights");
    else {
        printf("revtorch video eval: %s, ConvLSTM hidden %lld, %lld held-out sequences of %lld steps\n", oo.weights,
               (long long)oo.hidden, (long long)oo.eval_seqs, (long long)oo.frames);
        rc = vid_report_eval(&oo, m, test, NULL);
    }
    rt_state_dict_destroy(sd);
    rt_module_destroy(m);
    rt_dataset_destroy(test);
    return rc;
}

int cli_cmd_video(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        vid_usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (strcmp(argv[1], "train") && strcmp(argv[1], "eval")) {
        fprintf(stderr, "revtorch video: unknown subcommand '%s' (train or eval)\n", argv[1]);
        return 2;
    }
    vid_opts o;
    int rc = vid_parse(argc - 1, argv + 1, &o);
    if (rc >= 0) return rc;
    if (o.threads > 0) rt_set_num_threads((int)o.threads);
    return !strcmp(o.cmd, "train") ? vid_train(&o) : vid_eval(&o);
}
