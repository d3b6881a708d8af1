/* Super-resolution data of data/superres.h: normalisation, slice split,
 * block-mean downsampling, slices and the LR/HR patch sampler. */
#include "data/superres.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static rt_status check_volume(const rt_tensor *v, const char *fn) {
    if (!v) return rt_error_set(RT_ERR_INVALID_ARG, "%s: volume is NULL", fn);
    if (rt_tensor_is_meta(v)) return rt_error_set(RT_ERR_INVALID_ARG, "%s: volume is a meta tensor", fn);
    if (v->ndim != 4) return rt_error_set(RT_ERR_SHAPE, "%s: volume must be [C, D, H, W], got %d dims", fn, v->ndim);
    if (v->dtype != RT_F32) return rt_error_set(RT_ERR_DTYPE, "%s: volume must be float32", fn);
    return RT_OK;
}

/* The value of rank r (0-based) of v[0..n-1] were it sorted (the order of v
 * changes): quickselect with a median-of-three pivot, O(n) on average (a
 * volume has tens of millions of voxels; sorting them took seconds). */
static float select_rank(float *v, int64_t n, int64_t r) {
    int64_t lo = 0, hi = n - 1;
    while (lo < hi) {
        const int64_t mid = lo + (hi - lo) / 2;
        float a = v[lo], b = v[mid], c = v[hi];
        const float pivot = a < b ? (b < c ? b : (a < c ? c : a)) : (a < c ? a : (b < c ? c : b));
        int64_t i = lo, j = hi;
        while (i <= j) { /* Hoare partition: [lo, j] <= pivot <= [i, hi] */
            while (v[i] < pivot) i++;
            while (v[j] > pivot) j--;
            if (i <= j) {
                float t = v[i];
                v[i++] = v[j];
                v[j--] = t;
            }
        }
        if (r <= j) hi = j;
        else if (r >= i) lo = i;
        else return v[r]; /* between the parts: equal to the pivot */
    }
    return v[r];
}

rt_status rt_sr_normalize(rt_tensor *volume, double percentile, double *q_out) {
    RT_TRY(check_volume(volume, "rt_sr_normalize"));
    if (!(percentile > 0.0 && percentile <= 100.0))
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_sr_normalize: percentile must be in (0, 100], got %g", percentile);
    float *x = rt_tensor_f32(volume);
    const int64_t n = rt_tensor_numel(volume);
    int64_t m = 0;
    for (int64_t i = 0; i < n; i++) m += x[i] > 0.0f;
    if (m == 0)
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_sr_normalize: no voxel is > 0; the robust maximum is taken over "
                                                "the positive voxels (is this an intensity image?)");
    float *pos = malloc((size_t)m * sizeof *pos);
    if (!pos) return rt_error_set(RT_ERR_OOM, "rt_sr_normalize: out of memory (%lld floats)", (long long)m);
    int64_t j = 0;
    for (int64_t i = 0; i < n; i++)
        if (x[i] > 0.0f) pos[j++] = x[i];
    /* nearest rank; the 1e-9 keeps p·n that is an integer in exact arithmetic (99.9% of 1000) from
     * rounding up to the next rank */
    int64_t rank = (int64_t)ceil(percentile / 100.0 * (double)m - 1e-9) - 1;
    if (rank < 0) rank = 0;
    if (rank >= m) rank = m - 1;
    const double q = select_rank(pos, m, rank);
    free(pos);
    const double inv = 1.0 / q;
    for (int64_t i = 0; i < n; i++) {
        double v = (double)x[i] * inv;
        x[i] = (float)(v < 0.0 ? 0.0 : v > 1.0 ? 1.0 : v);
    }
    if (q_out) *q_out = q;
    return RT_OK;
}

rt_status rt_sr_split_slices(int64_t depth, double holdout, int64_t gap, rt_sr_split *out) {
    if (!out) return rt_error_set(RT_ERR_INVALID_ARG, "rt_sr_split_slices: out is NULL");
    if (depth < 3) return rt_error_set(RT_ERR_INVALID_ARG, "rt_sr_split_slices: %lld slices; need at least 3",
                                       (long long)depth);
    if (!(holdout > 0.0 && holdout < 1.0))
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_sr_split_slices: holdout must be in (0, 1), got %g", holdout);
    if (gap < 0) return rt_error_set(RT_ERR_INVALID_ARG, "rt_sr_split_slices: gap must be >= 0, got %lld",
                                     (long long)gap);
    const int64_t held = (int64_t)floor(holdout * (double)depth + 0.5);
    const int64_t lo = depth - held, train_hi = lo - gap;
    if (held < 1 || train_hi < 1)
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_sr_split_slices: %lld slices with holdout %g and gap %lld leave "
                            "%lld held-out and %lld training slices; both must be >= 1 (lower the holdout or the "
                            "gap)", (long long)depth, holdout, (long long)gap, (long long)held,
                            (long long)(train_hi > 0 ? train_hi : 0));
    *out = (rt_sr_split){.train_lo = 0, .train_hi = train_hi, .heldout_lo = lo, .heldout_hi = depth};
    return RT_OK;
}

rt_status rt_sr_downsample(const rt_tensor *hr, int64_t scale, rt_tensor **lr) {
    if (!lr) return rt_error_set(RT_ERR_INVALID_ARG, "rt_sr_downsample: lr is NULL");
    *lr = NULL;
    if (!hr) return rt_error_set(RT_ERR_INVALID_ARG, "rt_sr_downsample: hr is NULL");
    if (rt_tensor_is_meta(hr)) return rt_error_set(RT_ERR_INVALID_ARG, "rt_sr_downsample: hr is a meta tensor");
    if (scale < 1) return rt_error_set(RT_ERR_INVALID_ARG, "rt_sr_downsample: scale must be >= 1, got %lld",
                                       (long long)scale);
    if (hr->ndim != 4) return rt_error_set(RT_ERR_SHAPE, "rt_sr_downsample: hr must be [N, C, H, W], got %d dims",
                                           hr->ndim);
    if (hr->dtype != RT_F32) return rt_error_set(RT_ERR_DTYPE, "rt_sr_downsample: hr must be float32");
    const int64_t NC = hr->shape[0] * hr->shape[1], H = hr->shape[2], W = hr->shape[3];
    if (H % scale || W % scale)
        return rt_error_set(RT_ERR_SHAPE, "rt_sr_downsample: hr is %lldx%lld (H, W), not a multiple of scale %lld "
                            "(crop it first, as rt_sr_slice does)", (long long)H, (long long)W, (long long)scale);
    const int64_t h = H / scale, w = W / scale;
    const int64_t shape[4] = {hr->shape[0], hr->shape[1], h, w};
    rt_tensor *t = rt_tensor_create(4, shape, RT_F32, RT_DEVICE_CPU, RT_MEM_DATA);
    if (!t) return rt_error_last_status();
    const float *src = rt_tensor_f32((rt_tensor *)hr);
    float *dst = rt_tensor_f32(t);
    const float inv = 1.0f / (float)(scale * scale);
    for (int64_t p = 0; p < NC; p++)
        for (int64_t i = 0; i < h; i++)
            for (int64_t j = 0; j < w; j++) {
                float s = 0.0f;
                for (int64_t a = 0; a < scale; a++)
                    for (int64_t b = 0; b < scale; b++) s += src[(p * H + i * scale + a) * W + j * scale + b];
                dst[(p * h + i) * w + j] = s * inv;
            }
    *lr = t;
    return RT_OK;
}

rt_status rt_sr_slice(const rt_tensor *volume, int64_t k, int64_t scale, rt_tensor **hr) {
    if (!hr) return rt_error_set(RT_ERR_INVALID_ARG, "rt_sr_slice: hr is NULL");
    *hr = NULL;
    RT_TRY(check_volume(volume, "rt_sr_slice"));
    const int64_t C = volume->shape[0], D = volume->shape[1], H = volume->shape[2], W = volume->shape[3];
    if (k < 0 || k >= D)
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_sr_slice: slice %lld outside [0, %lld)", (long long)k,
                            (long long)D);
    if (scale < 1 || scale > H || scale > W)
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_sr_slice: scale %lld must be in [1, min(H, W) = %lld]",
                            (long long)scale, (long long)(H < W ? H : W));
    const int64_t h = H / scale * scale, w = W / scale * scale;
    const int64_t shape[4] = {1, C, h, w};
    rt_tensor *t = rt_tensor_create(4, shape, RT_F32, RT_DEVICE_CPU, RT_MEM_DATA);
    if (!t) return rt_error_last_status();
    const float *src = rt_tensor_f32((rt_tensor *)volume);
    float *dst = rt_tensor_f32(t);
    for (int64_t c = 0; c < C; c++)
        for (int64_t i = 0; i < h; i++)
            memcpy(dst + (c * h + i) * w, src + ((c * D + k) * H + i) * W, (size_t)w * sizeof(float));
    *hr = t;
    return RT_OK;
}

double rt_sr_slice_foreground(const rt_tensor *volume, int64_t k, float threshold) {
    if (!volume || rt_tensor_is_meta(volume) || volume->ndim != 4 || volume->dtype != RT_F32) return NAN;
    const int64_t D = volume->shape[1], n = volume->shape[2] * volume->shape[3];
    if (k < 0 || k >= D) return NAN;
    const float *p = rt_tensor_f32((rt_tensor *)volume) + k * n;
    int64_t fg = 0;
    for (int64_t i = 0; i < n; i++) fg += p[i] > threshold;
    return (double)fg / (double)n;
}

rt_status rt_sr_eval_slices(const rt_tensor *volume, const rt_sr_split *split, int64_t count, float threshold,
                            double min_fraction, int64_t *ks, int64_t *n) {
    if (!split || !ks || !n) return rt_error_set(RT_ERR_INVALID_ARG, "rt_sr_eval_slices: split, ks or n is NULL");
    *n = 0;
    RT_TRY(check_volume(volume, "rt_sr_eval_slices"));
    if (count < 1) return rt_error_set(RT_ERR_INVALID_ARG, "rt_sr_eval_slices: count must be >= 1");
    const int64_t D = volume->shape[1];
    if (split->heldout_lo < 0 || split->heldout_hi > D || split->heldout_lo >= split->heldout_hi)
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_sr_eval_slices: held-out slices [%lld, %lld) are not inside the "
                            "volume's %lld", (long long)split->heldout_lo, (long long)split->heldout_hi, (long long)D);
    int64_t m = 0;
    for (int64_t k = split->heldout_lo; k < split->heldout_hi; k++)
        m += rt_sr_slice_foreground(volume, k, threshold) >= min_fraction;
    const int64_t take = m < count ? m : count;
    for (int64_t i = 0; i < take; i++) {
        const int64_t want = (int64_t)floor(((double)i + 0.5) * (double)m / (double)take);
        int64_t seen = 0;
        for (int64_t k = split->heldout_lo; k < split->heldout_hi; k++) {
            if (!(rt_sr_slice_foreground(volume, k, threshold) >= min_fraction)) continue;
            if (seen++ == want) {
                ks[i] = k;
                break;
            }
        }
    }
    *n = take;
    return RT_OK;
}

struct rt_sr_sampler {
    rt_tensor *volume;
    rt_sr_patch_options o;
    rt_generator g;
};

rt_status rt_sr_sampler_create(rt_tensor *volume, const rt_sr_patch_options *o, rt_sr_sampler **out) {
    if (!out) return rt_error_set(RT_ERR_INVALID_ARG, "rt_sr_sampler_create: out is NULL");
    *out = NULL;
    if (!o) return rt_error_set(RT_ERR_INVALID_ARG, "rt_sr_sampler_create: options are NULL");
    RT_TRY(check_volume(volume, "rt_sr_sampler_create"));
    const int64_t D = volume->shape[1], H = volume->shape[2], W = volume->shape[3];
    if (o->scale < 1 || o->patch < 1)
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_sr_sampler_create: scale (%lld) and patch (%lld) must be >= 1",
                            (long long)o->scale, (long long)o->patch);
    if (o->patch * o->scale > H || o->patch * o->scale > W)
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_sr_sampler_create: an HR patch of %lld voxels (patch %lld x "
                            "scale %lld) does not fit in a %lldx%lld slice", (long long)(o->patch * o->scale),
                            (long long)o->patch, (long long)o->scale, (long long)H, (long long)W);
    if (o->slice_lo < 0 || o->slice_hi > D || o->slice_lo >= o->slice_hi)
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_sr_sampler_create: slices [%lld, %lld) are empty or outside the "
                            "volume's %lld", (long long)o->slice_lo, (long long)o->slice_hi, (long long)D);
    if (!isfinite(o->threshold) || !(o->min_foreground >= 0.0f && o->min_foreground <= 1.0f))
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_sr_sampler_create: threshold must be finite and min_foreground "
                            "in [0, 1] (got %g, %g)", (double)o->threshold, (double)o->min_foreground);
    rt_sr_sampler *s = calloc(1, sizeof *s);
    if (!s) return rt_error_set(RT_ERR_OOM, "rt_sr_sampler_create: out of memory");
    s->volume = rt_tensor_retain(volume);
    s->o = *o;
    s->g = (rt_generator){o->seed, 0};
    *out = s;
    return RT_OK;
}

void rt_sr_sampler_destroy(rt_sr_sampler *s) {
    if (!s) return;
    rt_tensor_release(s->volume);
    free(s);
}

/* Uniform integer in [0, m) from one uniform float. */
static int64_t draw_index(float u, int64_t m) {
    int64_t i = (int64_t)(u * (float)m);
    return i < 0 ? 0 : i >= m ? m - 1 : i;
}

/* HR patch at (k, y, x) of channel c, with the flips, into dst (P×P). */
static void copy_patch(const float *vol, int64_t D, int64_t H, int64_t W, int64_t c, const rt_sr_patch_info *pi,
                       int64_t P, float *dst) {
    const float *src = vol + ((c * D + pi->k) * H + pi->y) * W + pi->x;
    for (int64_t i = 0; i < P; i++)
        for (int64_t j = 0; j < P; j++) {
            int64_t a = pi->transpose ? j : i, b = pi->transpose ? i : j; /* output (i, j) reads source (a, b) */
            if (pi->vflip) a = P - 1 - a;
            if (pi->hflip) b = P - 1 - b;
            dst[i * P + j] = src[a * W + b];
        }
}

rt_status rt_sr_sampler_next(rt_sr_sampler *s, int64_t batch, rt_tensor **lr, rt_tensor **hr,
                             rt_sr_patch_info *info) {
    if (lr) *lr = NULL;
    if (hr) *hr = NULL;
    if (!s || !lr || !hr) return rt_error_set(RT_ERR_INVALID_ARG, "rt_sr_sampler_next: s, lr or hr is NULL");
    if (batch < 1) return rt_error_set(RT_ERR_INVALID_ARG, "rt_sr_sampler_next: batch must be >= 1, got %lld",
                                       (long long)batch);
    const rt_tensor *v = s->volume;
    const int64_t C = v->shape[0], D = v->shape[1], H = v->shape[2], W = v->shape[3];
    const int64_t sc = s->o.scale, p = s->o.patch, P = p * sc;
    const int64_t hs[4] = {batch, C, P, P};
    rt_tensor *h = rt_tensor_create(4, hs, RT_F32, RT_DEVICE_CPU, RT_MEM_DATA);
    if (!h) return rt_error_last_status();
    const float *vol = rt_tensor_f32((rt_tensor *)v);
    float *hp = rt_tensor_f32(h);
    /* positions on the LR grid where the patch fits */
    const int64_t ny = H / sc - p + 1, nx = W / sc - p + 1;
    for (int64_t b = 0; b < batch; b++) {
        rt_sr_patch_info pi = {0};
        for (int draw = 1; draw <= 100; draw++) {
            float u[3];
            rt_generator_uniform(&s->g, 3, u);
            pi.k = s->o.slice_lo + draw_index(u[0], s->o.slice_hi - s->o.slice_lo);
            pi.y = draw_index(u[1], ny) * sc;
            pi.x = draw_index(u[2], nx) * sc;
            pi.draws = draw;
            if (s->o.min_foreground <= 0.0f) break;
            const float *src = vol + (pi.k * H + pi.y) * W + pi.x; /* channel 0 */
            int64_t fg = 0;
            for (int64_t i = 0; i < P; i++)
                for (int64_t j = 0; j < P; j++) fg += src[i * W + j] > s->o.threshold;
            if ((double)fg >= (double)s->o.min_foreground * (double)(P * P)) break;
        }
        if (s->o.augment) {
            float u[3];
            rt_generator_uniform(&s->g, 3, u);
            pi.hflip = u[0] < 0.5f, pi.vflip = u[1] < 0.5f, pi.transpose = u[2] < 0.5f;
        }
        for (int64_t c = 0; c < C; c++) copy_patch(vol, D, H, W, c, &pi, P, hp + (b * C + c) * P * P);
        if (info) info[b] = pi;
    }
    rt_status st = rt_sr_downsample(h, sc, lr);
    if (st != RT_OK) {
        rt_tensor_release(h);
        return st;
    }
    *hr = h;
    return RT_OK;
}
