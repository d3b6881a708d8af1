/* `revtorch superres train`: Adam on random patches of the training slices,
 * train.csv per step, measured against predicted step memory, the weights
 * with their configuration as metadata, then the evaluation. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "autograd/node.h"
#include "cli.h"
#include "common.h"
#include "data/superres.h"
#include "io/weights.h"
#include "kernels/threads.h"
#include "optim/schedule.h"
#include "outputs.h"
#include "ops/ops3d.h"
#include "progress.h"
#include "superres_internal.h"

/* CPU seconds this process has used (all its threads). With one thread and
 * other jobs on the machine, a step's CPU time is the time it would take on
 * an idle core, where its wall time is not. */
static double sr_cpu_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
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

/* Metadata written with the weights, read back by eval. */
static rt_status sr_save_weights(const cli_sr_opts *o, const rt_model *m, const cli_sr_data *d, const char *path,
                                 int64_t steps) {
    char v[14][32];
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
    snprintf(v[12], 32, "%lld", (long long)cli_sr_rev_width(o)); /* effective values, as a reader needs them */
    snprintf(v[13], 32, "%lld", (long long)cli_sr_rev_hidden(o));
    const char *meta[] = {"model", m->name, "task", "superres", "blocks", v[0], "feats", v[1], "res_scale", v[2],
                          "scale", v[3], "holdout", v[4], "gap", v[5], "percentile", v[6], "robust_max", v[7],
                          "steps", v[8], "batch", v[9], "patch", v[10], "seed", v[11], "rev_width", v[12], "rev_hidden", v[13]};
    const int pairs = (int)(sizeof meta / sizeof meta[0]) / 2 - (strcmp(m->name, "revedsr") ? 2 : 0); /* last two */
    return rt_weights_save(m->sd, NULL, 0, meta, pairs, path);
}

int cli_sr_train(const cli_sr_opts *o) {
    cli_sr_data d = {0};
    int rc = cli_sr_load(o, &d);
    if (rc >= 0) goto out_data;
    rc = cli_sr_make_out(o, NULL);
    if (rc >= 0) goto out_data;
    char weights[CLI_PATH_MAX], csv[CLI_PATH_MAX], csv_tmp[CLI_PATH_MAX + 32];
    if (o->weights) snprintf(weights, sizeof weights, "%s", o->weights);
    else cli_sr_out_path(o, "weights.safetensors", weights, sizeof weights);
    { /* the weights are saved after training: find an unwritable path now (a file created and removed beside it) */
        struct stat sb;
        char probe[CLI_PATH_MAX + 32];
        snprintf(probe, sizeof probe, "%s.tmp.%ld", weights, (long)getpid());
        FILE *pf = NULL;
        int e = stat(weights, &sb) == 0 && S_ISDIR(sb.st_mode) ? EISDIR : 0;
        if (!e && !(pf = fopen(probe, "wx"))) e = errno;
        if (pf) cli_discard_tmp(pf, probe);
        if (e) {
            fprintf(stderr, "revtorch superres train: cannot write --weights %s: %s (found before training; give "
                            "a writable file path)\n", weights, strerror(e));
            rc = 1;
            goto out_data;
        }
    }
    cli_sr_out_path(o, "train.csv", csv, sizeof csv);
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
    if (cli_sr_model_create(o, RT_DEVICE_CPU, (uint64_t)o->seed, &m) != RT_OK) {
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
    if (cli_sr_predict(o, o->batch, &predicted) != RT_OK) {
        cli_fail("cannot predict the step's memory");
        goto done;
    }
    rt_optimizer_spec spec;
    cli_sr_adam(o->lr, &spec);
    rt_train_config cfg = {.accum_steps = 1, .loss = cli_sr_l1};
    if (!(opt = cli_optimizer_for(&spec, m->sd))) {
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
    if (!(log = cli_open_tmp(csv, csv_tmp, sizeof csv_tmp))) {
        cli_fail("cannot write the training log");
        goto done;
    }
    fprintf(log, "step,loss,bicubic_loss,lr,seconds,step_seconds,step_cpu_seconds\n");
    const rt_lr_schedule sched = {.kind = o->cosine ? RT_LR_COSINE : RT_LR_CONSTANT, .base_lr = o->lr,
                                  .t_max = o->steps};
    char what[160];
    cli_sr_describe(o, what, sizeof what);
    printf("%s (%lld parameters), batch %lld of %lldx%lld LR patches, Adam lr %g%s, L1 loss, %lld steps, %d thread%s\n",
           what, (long long)rt_state_dict_num_param_elements(m->sd), (long long)o->batch, (long long)o->patch,
           (long long)o->patch,
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
    rt_status st = cli_commit_tmp(log, csv_tmp, csv);
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
    rc = cli_sr_evaluate(o, m, &d, label, train_s);
done:
    cli_discard_tmp(log, log ? csv_tmp : NULL);
    rt_sr_sampler_destroy(sampler);
    rt_optimizer_destroy(opt);
    rt_model_destroy(m);
out_data:
    rt_tensor_release(d.volume);
    return rc;
}
