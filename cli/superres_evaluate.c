/* `revtorch superres`: scoring a model on the held-out slices against bicubic
 * upsampling (PSNR, SSIM) and writing eval.csv, eval.json and the comparison
 * picture; run by train after training and by eval. */
#include <math.h>
#include <stdio.h>

#include "autograd/node.h"
#include "cli.h"
#include "common.h"
#include "data/superres.h"
#include "ops/ops3d.h"
#include "outputs.h"
#include "progress.h"
#include "superres.h"
#include "superres_internal.h"
#include "train/sr_metric.h"

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
int cli_sr_evaluate(const cli_sr_opts *o, rt_model *m, const cli_sr_data *d, const char *label, double train_s) {
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
    cli_sr_out_path(o, "eval.csv", path, sizeof path);
    FILE *f = cli_open_tmp(path, tmp, sizeof tmp);
    if (!f) {
        cli_fail("cannot write the outputs");
        goto done;
    }
    fprintf(f, "slice,bicubic_psnr,bicubic_ssim,model_psnr,model_ssim\n");
    for (int64_t e = 0; e < d->n_eval; e++)
        fprintf(f, "%lld,%.6f,%.6f,%.6f,%.6f\n", (long long)d->ks[e], sc.psnr[0][e], sc.ssim[0][e], sc.psnr[1][e],
                sc.ssim[1][e]);
    fprintf(f, "mean,%.6f,%.6f,%.6f,%.6f\n", sc.mean_psnr[0], sc.mean_ssim[0], sc.mean_psnr[1], sc.mean_ssim[1]);
    if (cli_commit_tmp(f, tmp, path) != RT_OK) {
        cli_fail("cannot write the outputs");
        goto done;
    }
    cli_sr_out_path(o, "eval.json", path, sizeof path);
    if (!(f = cli_open_tmp(path, tmp, sizeof tmp))) {
        cli_fail("cannot write the outputs");
        goto done;
    }
    fprintf(f, "{\n  \"image\": \"%s\",\n  \"model\": \"%s\",\n  \"scale\": %lld,\n  \"robust_max\": %.6g,\n"
               "  \"heldout_slices\": [%lld, %lld],\n  \"evaluated_slices\": %lld,\n  \"border\": %lld,\n"
               "  \"bicubic\": {\"psnr\": %.6f, \"ssim\": %.6f},\n  \"model_scores\": {\"psnr\": %.6f, \"ssim\": %.6f},\n"
               "  \"train_seconds\": %.1f\n}\n", o->image, m->name, (long long)o->scale, d->q,
            (long long)d->split.heldout_lo, (long long)d->split.heldout_hi, (long long)d->n_eval,
            (long long)o->scale, sc.mean_psnr[0], sc.mean_ssim[0], sc.mean_psnr[1], sc.mean_ssim[1], train_s);
    if (cli_commit_tmp(f, tmp, path) != RT_OK) {
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
    cli_sr_out_path(o, "comparison.png", path, sizeof path);
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
