/* Sliding-window inference with Gaussian weighting (train/sliding_window.h). */
#include "train/sliding_window.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/node.h"
#include "data/patches.h"
#include "ops/ops3d.h"

rt_sliding_window_options rt_sliding_window_defaults(void) {
    return (rt_sliding_window_options){.overlap = 0.5f, .sigma_scale = 0.125f, .batch = 1};
}

rt_status rt_sliding_window_starts(int64_t size, int64_t patch, float overlap, int64_t *starts, int64_t max,
                                   int64_t *n) {
    static const char *fn = "rt_sliding_window_starts";
    if (!starts || !n) return rt_error_set(RT_ERR_INVALID_ARG, "%s: %s is NULL", fn, starts ? "n" : "starts");
    if (size < 1 || patch < 1)
        return rt_error_set(RT_ERR_INVALID_ARG, "%s: size %lld and patch %lld must be >= 1", fn, (long long)size,
                            (long long)patch);
    if (!(overlap >= 0.0f && overlap < 1.0f))
        return rt_error_set(RT_ERR_INVALID_ARG, "%s: overlap %g must be in [0, 1) (nnU-Net: 0.5)", fn,
                            (double)overlap);
    int64_t count = 1;
    if (size > patch) {
        double step = (double)patch * (1.0 - (double)overlap);
        count = (int64_t)ceil((double)(size - patch) / step - 1e-9) + 1;
    }
    if (count > max)
        return rt_error_set(RT_ERR_INVALID_ARG, "%s: %lld windows do not fit in %lld starts", fn, (long long)count,
                            (long long)max);
    for (int64_t i = 0; i < count; i++)
        starts[i] = count == 1 ? 0 : (int64_t)llround((double)i * (double)(size - patch) / (double)(count - 1));
    *n = count;
    return RT_OK;
}

rt_status rt_gaussian_importance_map(const int64_t patch[3], float sigma_scale, rt_tensor **out) {
    static const char *fn = "rt_gaussian_importance_map";
    if (out) *out = NULL;
    if (!patch || !out) return rt_error_set(RT_ERR_INVALID_ARG, "%s: %s is NULL", fn, patch ? "out" : "patch");
    if (patch[0] < 1 || patch[1] < 1 || patch[2] < 1 || !(sigma_scale > 0.0f))
        return rt_error_set(RT_ERR_INVALID_ARG, "%s: patch sizes must be >= 1 and sigma_scale > 0", fn);
    rt_tensor *m = rt_tensor_create(3, patch, RT_F32, RT_DEVICE_CPU, RT_MEM_DATA);
    if (!m) return rt_error_last_status();
    double *axis[3];
    double peak = 1.0;
    for (int a = 0; a < 3; a++) {
        axis[a] = malloc((size_t)patch[a] * sizeof(double));
        if (!axis[a]) {
            for (int b = 0; b < a; b++) free(axis[b]);
            rt_tensor_release(m);
            return rt_error_set(RT_ERR_OOM, "%s: out of memory", fn);
        }
        double c = (double)(patch[a] - 1) / 2.0, sigma = (double)sigma_scale * (double)patch[a], best = 0.0;
        for (int64_t i = 0; i < patch[a]; i++) {
            double d = (double)i - c;
            axis[a][i] = exp(-d * d / (2.0 * sigma * sigma));
            best = axis[a][i] > best ? axis[a][i] : best;
        }
        peak *= best;
    }
    float *w = rt_tensor_f32(m);
    for (int64_t d = 0; d < patch[0]; d++)
        for (int64_t h = 0; h < patch[1]; h++)
            for (int64_t x = 0; x < patch[2]; x++) {
                double v = axis[0][d] * axis[1][h] * axis[2][x] / peak;
                w[(d * patch[1] + h) * patch[2] + x] = (float)(v > 1e-3 ? v : 1e-3);
            }
    for (int a = 0; a < 3; a++) free(axis[a]);
    *out = m;
    return RT_OK;
}

/* Softmax probabilities [nb, K, window] (plain, new reference in *out) of
 * the network on batch_x with the spatial axes whose bits are set in
 * `flips` (1: D, 2: H, 4: W) mirrored on the way in and out, so they are
 * aligned with batch_x. */
static rt_status window_probs(rt_module *net, rt_tensor *batch_x, int64_t K, const int64_t win[3], int flips,
                              rt_tensor **out) {
    *out = NULL;
    rt_tensor *x = batch_x, *logits = NULL, *probs = NULL, *plain = NULL;
    rt_status st = RT_OK;
    if (flips) {
        x = rt_tensor_to(batch_x, RT_F32, RT_MEM_DATA);
        if (!x) return rt_error_last_status();
        for (int a = 0; a < 3 && st == RT_OK; a++)
            if (flips & (1 << a)) st = rt_volume_flip(x, a);
    }
    if (st == RT_OK) st = rt_module_forward(net, x, &logits);
    if (st == RT_OK && (logits->ndim != 5 || logits->shape[0] != batch_x->shape[0] || logits->shape[1] != K ||
                        logits->shape[2] != win[0] || logits->shape[3] != win[1] || logits->shape[4] != win[2])) {
        char s[64];
        st = rt_error_set(RT_ERR_SHAPE, "rt_sliding_window_predict: the network gave logits %s for windows of "
                          "%lldx%lldx%lld; expected [%lld, %lld, %lld, %lld, %lld]",
                          rt_tensor_shape_str(logits, s, sizeof s), (long long)win[0], (long long)win[1],
                          (long long)win[2], (long long)batch_x->shape[0], (long long)K, (long long)win[0],
                          (long long)win[1], (long long)win[2]);
    }
    if (st == RT_OK) st = rt_softmax_channels(logits, &probs);
    if (st == RT_OK) st = rt_to_layout(probs, RT_LAYOUT_PLAIN, &plain);
    /* plain is probs itself or its reordered copy, held by nothing else
     * (grad mode is off): flipped back in place */
    for (int a = 0; a < 3 && st == RT_OK; a++)
        if (flips & (1 << a)) st = rt_volume_flip(plain, a);
    if (x != batch_x) rt_tensor_release(x);
    rt_tensor_release(logits);
    rt_tensor_release(probs);
    if (st == RT_OK) *out = plain;
    else rt_tensor_release(plain);
    return st;
}

/* One batch of windows: forward (once, or under each of the 8 mirrorings
 * averaged), softmax, weighted accumulation. */
static rt_status run_windows(rt_module *net, rt_tensor *batch_x, int64_t nb, const int64_t (*starts)[3],
                             const rt_tensor *wmap, int64_t K, const int64_t vol[3], bool mirror, float *acc,
                             float *wsum) {
    const int64_t pd = wmap->shape[0], ph = wmap->shape[1], pw = wmap->shape[2], pn = pd * ph * pw;
    const int64_t win[3] = {pd, ph, pw};
    rt_tensor *plain = NULL;
    rt_status st = window_probs(net, batch_x, K, win, 0, &plain);
    if (st == RT_OK && mirror) {
        /* nnU-Net's test-time mirroring (use_mirroring, all axes): the mean
         * of the softmax under the 8 combinations of flipped axes, summed
         * into the unflipped probabilities (window_probs's own tensor) */
        float *sum = rt_tensor_f32(plain);
        const int64_t n = rt_tensor_numel(plain);
        for (int flips = 1; flips < 8 && st == RT_OK; flips++) {
            rt_tensor *pm = NULL;
            st = window_probs(net, batch_x, K, win, flips, &pm);
            if (st == RT_OK) {
                const float *q = rt_tensor_f32(pm);
                for (int64_t i = 0; i < n; i++) sum[i] += q[i];
            }
            rt_tensor_release(pm);
        }
        for (int64_t i = 0; st == RT_OK && i < n; i++) sum[i] *= 0.125f;
    }
    if (st == RT_OK) {
        const float *p = rt_tensor_f32(plain), *w = rt_tensor_f32(wmap);
        const int64_t H = vol[1], W = vol[2], V = vol[0] * H * W;
        for (int64_t b = 0; b < nb; b++) {
            const int64_t *s0 = starts[b];
            for (int64_t d = 0; d < pd; d++) {
                int64_t vd = s0[0] + d;
                if (vd >= vol[0]) break;
                for (int64_t h = 0; h < ph; h++) {
                    int64_t vh = s0[1] + h;
                    if (vh >= H) break;
                    int64_t wmax = W - s0[2] < pw ? W - s0[2] : pw;
                    const float *wr = w + (d * ph + h) * pw;
                    int64_t vbase = (vd * H + vh) * W + s0[2];
                    for (int64_t x = 0; x < wmax; x++) wsum[vbase + x] += wr[x];
                    for (int64_t c = 0; c < K; c++) {
                        const float *pr = p + ((b * K + c) * pn) + (d * ph + h) * pw;
                        float *ar = acc + c * V + vbase;
                        for (int64_t x = 0; x < wmax; x++) ar[x] += wr[x] * pr[x];
                    }
                }
            }
        }
    }
    rt_tensor_release(plain);
    return st;
}

rt_status rt_sliding_window_predict(rt_module *net, const rt_tensor *image, int64_t num_classes,
                                    const rt_sliding_window_options *o, rt_tensor **probs, rt_tensor **labels) {
    static const char *fn = "rt_sliding_window_predict";
    if (probs) *probs = NULL;
    if (labels) *labels = NULL;
    if (!net || !image || !o)
        return rt_error_set(RT_ERR_INVALID_ARG, "%s: %s is NULL", fn, !net ? "net" : !image ? "image" : "options o");
    if (!probs && !labels) return rt_error_set(RT_ERR_INVALID_ARG, "%s: probs and labels are both NULL", fn);
    if (rt_tensor_is_meta(image)) return rt_error_set(RT_ERR_INVALID_ARG, "%s: image is a meta tensor", fn);
    if (image->ndim != 4) return rt_error_set(RT_ERR_SHAPE, "%s: image must be [C, D, H, W]", fn);
    if (image->dtype != RT_F32) return rt_error_set(RT_ERR_DTYPE, "%s: image must be float32", fn);
    if (num_classes < 1 || o->batch < 1)
        return rt_error_set(RT_ERR_INVALID_ARG, "%s: num_classes and batch must be >= 1", fn);
    const int64_t C = image->shape[0], vol[3] = {image->shape[1], image->shape[2], image->shape[3]};
    const int64_t V = vol[0] * vol[1] * vol[2], K = num_classes;
    int64_t *st_axis[3] = {NULL, NULL, NULL}, n_axis[3];
    rt_tensor *wmap = NULL, *acc = NULL, *wsum = NULL, *bx = NULL;
    int64_t (*starts)[3] = NULL;
    bool grad = rt_grad_set_enabled(false);
    rt_status st = rt_gaussian_importance_map(o->patch, o->sigma_scale, &wmap);
    for (int a = 0; a < 3 && st == RT_OK; a++) {
        st_axis[a] = malloc((size_t)(vol[a] + 1) * sizeof(int64_t));
        if (!st_axis[a]) st = rt_error_set(RT_ERR_OOM, "%s: out of memory", fn);
        else st = rt_sliding_window_starts(vol[a], o->patch[a], o->overlap, st_axis[a], vol[a] + 1, &n_axis[a]);
    }
    const int64_t kv[4] = {K, vol[0], vol[1], vol[2]};
    const int64_t xs[5] = {o->batch, C, o->patch[0], o->patch[1], o->patch[2]};
    if (st == RT_OK && !(acc = rt_tensor_zeros(4, kv, RT_F32, RT_DEVICE_CPU, RT_MEM_TEMP))) st = rt_error_last_status();
    if (st == RT_OK && !(wsum = rt_tensor_zeros(3, vol, RT_F32, RT_DEVICE_CPU, RT_MEM_TEMP))) st = rt_error_last_status();
    if (st == RT_OK && !(bx = rt_tensor_create(5, xs, RT_F32, RT_DEVICE_CPU, RT_MEM_DATA))) st = rt_error_last_status();
    if (st == RT_OK && !(starts = malloc((size_t)o->batch * sizeof *starts)))
        st = rt_error_set(RT_ERR_OOM, "%s: out of memory", fn);
    const int64_t pn = o->patch[0] * o->patch[1] * o->patch[2];
    const int64_t total = n_axis[0] * n_axis[1] * n_axis[2];
    int64_t nb = 0, done = 0;
    if (st == RT_OK && o->progress) o->progress(o->progress_user, 0, total);
    for (int64_t i = 0; st == RT_OK && i < n_axis[0]; i++)
        for (int64_t j = 0; st == RT_OK && j < n_axis[1]; j++)
            for (int64_t k = 0; st == RT_OK && k < n_axis[2]; k++) {
                int64_t lo[3] = {st_axis[0][i], st_axis[1][j], st_axis[2][k]};
                int64_t hi[3] = {lo[0] + o->patch[0], lo[1] + o->patch[1], lo[2] + o->patch[2]};
                rt_tensor *win = NULL;
                st = rt_volume_crop(image, lo, hi, &win);
                if (st != RT_OK) break;
                memcpy(rt_tensor_f32(bx) + nb * C * pn, rt_tensor_f32(win), (size_t)(C * pn) * sizeof(float));
                rt_tensor_release(win);
                memcpy(starts[nb], lo, sizeof lo);
                nb++;
                bool last = i == n_axis[0] - 1 && j == n_axis[1] - 1 && k == n_axis[2] - 1;
                if (nb == o->batch || last) {
                    rt_tensor *x = bx;
                    if (nb < o->batch) { /* a short last batch: its first nb windows */
                        const int64_t s5[5] = {nb, C, o->patch[0], o->patch[1], o->patch[2]};
                        x = rt_tensor_create(5, s5, RT_F32, RT_DEVICE_CPU, RT_MEM_DATA);
                        if (x) memcpy(rt_tensor_f32(x), rt_tensor_f32(bx), (size_t)(nb * C * pn) * sizeof(float));
                        if (!x) {
                            st = rt_error_last_status();
                            break;
                        }
                    }
                    st = run_windows(net, x, nb, (const int64_t(*)[3])starts, wmap, K, vol, o->mirror,
                                     rt_tensor_f32(acc), rt_tensor_f32(wsum));
                    if (x != bx) rt_tensor_release(x);
                    done += nb;
                    nb = 0;
                    if (st == RT_OK && o->progress) o->progress(o->progress_user, done, total);
                }
            }
    rt_tensor *P = NULL, *L = NULL;
    if (st == RT_OK && probs && !(P = rt_tensor_create(4, kv, RT_F32, RT_DEVICE_CPU, RT_MEM_DATA)))
        st = rt_error_last_status();
    if (st == RT_OK && labels && !(L = rt_tensor_create(3, vol, RT_I32, RT_DEVICE_CPU, RT_MEM_DATA)))
        st = rt_error_last_status();
    if (st == RT_OK) {
        const float *a = rt_tensor_f32(acc), *ws = rt_tensor_f32(wsum);
        float *pp = rt_tensor_f32(P);
        int32_t *ll = rt_tensor_data(L);
        for (int64_t v = 0; v < V; v++) {
            float inv = 1.0f / ws[v], best = -1.0f;
            int32_t arg = 0;
            for (int64_t c = 0; c < K; c++) {
                float p = a[c * V + v] * inv;
                if (pp) pp[c * V + v] = p;
                if (p > best) best = p, arg = (int32_t)c;
            }
            if (ll) ll[v] = arg;
        }
    }
    rt_grad_set_enabled(grad);
    for (int a = 0; a < 3; a++) free(st_axis[a]);
    free(starts);
    rt_tensor_release(wmap);
    rt_tensor_release(acc);
    rt_tensor_release(wsum);
    rt_tensor_release(bx);
    if (st != RT_OK) {
        rt_tensor_release(P);
        rt_tensor_release(L);
        return st;
    }
    if (probs) *probs = P;
    if (labels) *labels = L;
    return RT_OK;
}
