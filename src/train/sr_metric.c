/* PSNR and SSIM of train/sr_metric.h. */
#include "train/sr_metric.h"

#include <math.h>
#include <stdlib.h>

#define SSIM_RADIUS 5
#define SSIM_TAPS (2 * SSIM_RADIUS + 1)

static rt_status check_pair(const rt_tensor *x, const rt_tensor *ref, int64_t border, double data_range,
                            double *out, int64_t min_side, const char *fn) {
    if (!x || !ref || !out) return rt_error_set(RT_ERR_INVALID_ARG, "%s: x, ref or out is NULL", fn);
    if (rt_tensor_is_meta(x) || rt_tensor_is_meta(ref))
        return rt_error_set(RT_ERR_INVALID_ARG, "%s: meta tensors have no values", fn);
    if (x->ndim != 4 || !rt_tensor_same_shape(x, ref)) {
        char a[64], b[64];
        return rt_error_set(RT_ERR_SHAPE, "%s: x %s and ref %s must be [N, C, H, W] of one shape", fn,
                            rt_tensor_shape_str(x, a, sizeof a), rt_tensor_shape_str(ref, b, sizeof b));
    }
    if (x->dtype != RT_F32 || ref->dtype != RT_F32) return rt_error_set(RT_ERR_DTYPE, "%s: x and ref must be f32", fn);
    if (x->layout != RT_LAYOUT_PLAIN || ref->layout != RT_LAYOUT_PLAIN)
        return rt_error_set(RT_ERR_INVALID_ARG, "%s: x and ref must be in the plain NCHW order (rt_to_layout first)", fn);
    if (border < 0 || !(data_range > 0.0))
        return rt_error_set(RT_ERR_INVALID_ARG, "%s: border must be >= 0 and data_range > 0 (got %lld, %g)", fn,
                            (long long)border, data_range);
    const int64_t h = x->shape[2] - 2 * border, w = x->shape[3] - 2 * border;
    if (h < min_side || w < min_side)
        return rt_error_set(RT_ERR_INVALID_ARG, "%s: a %lldx%lld image with a border of %lld leaves %lldx%lld pixels; "
                            "at least %lldx%lld are needed", fn, (long long)x->shape[2], (long long)x->shape[3],
                            (long long)border, (long long)h, (long long)w, (long long)min_side, (long long)min_side);
    return RT_OK;
}

rt_status rt_psnr(const rt_tensor *x, const rt_tensor *ref, int64_t border, double data_range, double *out) {
    RT_TRY(check_pair(x, ref, border, data_range, out, 1, "rt_psnr"));
    const int64_t NC = x->shape[0] * x->shape[1], H = x->shape[2], W = x->shape[3];
    const float *a = rt_tensor_f32(x), *b = rt_tensor_f32(ref);
    double total = 0.0;
    for (int64_t p = 0; p < NC; p++) {
        double se = 0.0;
        for (int64_t i = border; i < H - border; i++)
            for (int64_t j = border; j < W - border; j++) {
                double d = (double)a[(p * H + i) * W + j] - (double)b[(p * H + i) * W + j];
                se += d * d;
            }
        const double mse = se / (double)((H - 2 * border) * (W - 2 * border));
        total += mse > 0.0 ? 10.0 * log10(data_range * data_range / mse) : INFINITY;
    }
    *out = total / (double)NC;
    return RT_OK;
}

/* The valid part of a separable Gaussian filter of the h×w map m: rows first
 * into tmp (h × (w − 10)), then columns into f ((h − 10) × (w − 10)). */
static void gauss_valid(const double *m, int64_t h, int64_t w, const double *k, double *tmp, double *f) {
    const int64_t wo = w - 2 * SSIM_RADIUS, ho = h - 2 * SSIM_RADIUS;
    for (int64_t i = 0; i < h; i++)
        for (int64_t j = 0; j < wo; j++) {
            double s = 0.0;
            for (int t = 0; t < SSIM_TAPS; t++) s += k[t] * m[i * w + j + t];
            tmp[i * wo + j] = s;
        }
    for (int64_t i = 0; i < ho; i++)
        for (int64_t j = 0; j < wo; j++) {
            double s = 0.0;
            for (int t = 0; t < SSIM_TAPS; t++) s += k[t] * tmp[(i + t) * wo + j];
            f[i * wo + j] = s;
        }
}

rt_status rt_ssim(const rt_tensor *x, const rt_tensor *ref, int64_t border, double data_range, double *out) {
    RT_TRY(check_pair(x, ref, border, data_range, out, SSIM_TAPS, "rt_ssim"));
    const int64_t NC = x->shape[0] * x->shape[1], H = x->shape[2], W = x->shape[3];
    const int64_t h = H - 2 * border, w = W - 2 * border;
    const int64_t ho = h - 2 * SSIM_RADIUS, wo = w - 2 * SSIM_RADIUS;
    double k[SSIM_TAPS], ksum = 0.0;
    for (int t = 0; t < SSIM_TAPS; t++) {
        const double d = (double)(t - SSIM_RADIUS);
        k[t] = exp(-d * d / (2.0 * 1.5 * 1.5));
        ksum += k[t];
    }
    for (int t = 0; t < SSIM_TAPS; t++) k[t] /= ksum;
    /* five maps (x, y, x², y², xy) of the cropped image, a row-filtered
     * scratch and five filtered maps */
    const size_t nm = (size_t)(h * w), nt = (size_t)(h * wo), nf = (size_t)(ho * wo);
    double *buf = malloc((5 * nm + nt + 5 * nf) * sizeof *buf);
    if (!buf) return rt_error_set(RT_ERR_OOM, "rt_ssim: out of memory for %lldx%lld maps", (long long)h, (long long)w);
    double *maps = buf, *tmp = buf + 5 * nm, *filt = tmp + nt;
    const double c1 = (0.01 * data_range) * (0.01 * data_range), c2 = (0.03 * data_range) * (0.03 * data_range);
    const float *a = rt_tensor_f32(x), *b = rt_tensor_f32(ref);
    double total = 0.0;
    for (int64_t p = 0; p < NC; p++) {
        for (int64_t i = 0; i < h; i++)
            for (int64_t j = 0; j < w; j++) {
                const int64_t src = (p * H + i + border) * W + j + border, d = i * w + j;
                const double u = a[src], v = b[src];
                maps[d] = u, maps[nm + d] = v, maps[2 * nm + d] = u * u, maps[3 * nm + d] = v * v,
                maps[4 * nm + d] = u * v;
            }
        for (int m = 0; m < 5; m++) gauss_valid(maps + m * nm, h, w, k, tmp, filt + m * nf);
        double s = 0.0;
        for (size_t q = 0; q < nf; q++) {
            const double mx = filt[q], my = filt[nf + q];
            const double vx = filt[2 * nf + q] - mx * mx, vy = filt[3 * nf + q] - my * my;
            const double cxy = filt[4 * nf + q] - mx * my;
            s += (2.0 * mx * my + c1) * (2.0 * cxy + c2) / ((mx * mx + my * my + c1) * (vx + vy + c2));
        }
        total += s / (double)nf;
    }
    free(buf);
    *out = total / (double)NC;
    return RT_OK;
}
