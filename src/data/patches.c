/* Normalisation, cropping, flips, intensity augmentation and the patch
 * sampler of data/patches.h. */
#include "data/patches.h"

#include <math.h>
#include <string.h>

#include <stdlib.h>

rt_status rt_volume_zscore(rt_tensor *image, bool nonzero_mask, double *mean_out, double *std_out) {
    if (!image) return rt_error_set(RT_ERR_INVALID_ARG, "rt_volume_zscore: image is NULL");
    if (rt_tensor_is_meta(image)) return rt_error_set(RT_ERR_INVALID_ARG, "rt_volume_zscore: image is a meta tensor");
    if (image->ndim != 4)
        return rt_error_set(RT_ERR_SHAPE, "rt_volume_zscore: image must be [C, D, H, W], got %d dims", image->ndim);
    if (image->dtype != RT_F32) return rt_error_set(RT_ERR_DTYPE, "rt_volume_zscore: image must be float32");
    const int64_t C = image->shape[0], n = image->shape[1] * image->shape[2] * image->shape[3];
    float *x = rt_tensor_f32(image);
    const float *mask = x; /* channel 0: normalised last, so its zeros mark the mask for every channel */
    int64_t count = n;
    if (nonzero_mask) {
        count = 0;
        for (int64_t i = 0; i < n; i++) count += mask[i] != 0.0f;
        if (count == 0)
            return rt_error_set(RT_ERR_INVALID_ARG, "rt_volume_zscore: the non-zero mask is empty (channel 0 is all "
                                                    "zeros); normalise over the whole volume instead");
    }
    for (int64_t cc = 0; cc < C; cc++) {
        const int64_t c = (cc + 1) % C;
        float *p = x + c * n;
        double s = 0.0, s2 = 0.0;
        for (int64_t i = 0; i < n; i++)
            if (!nonzero_mask || mask[i] != 0.0f) {
                s += p[i];
                s2 += (double)p[i] * p[i];
            }
        double mean = s / (double)count, var = s2 / (double)count - mean * mean;
        double sd = sqrt(var > 0.0 ? var : 0.0);
        double inv = 1.0 / (sd > 1e-8 ? sd : 1e-8);
        for (int64_t i = 0; i < n; i++)
            p[i] = (!nonzero_mask || mask[i] != 0.0f) ? (float)(((double)p[i] - mean) * inv) : 0.0f;
        if (mean_out) mean_out[c] = mean;
        if (std_out) std_out[c] = sd;
    }
    return RT_OK;
}

/* Checks t for the crop/flip functions: rank 3 or more (at most `max_rank`), f32 or i32, cpu. */
static rt_status check_volume(const char *fn, const rt_tensor *t, int min_rank, int max_rank) {
    if (!t) return rt_error_set(RT_ERR_INVALID_ARG, "%s: tensor is NULL", fn);
    if (rt_tensor_is_meta(t)) return rt_error_set(RT_ERR_INVALID_ARG, "%s: meta tensors hold no voxels", fn);
    if (t->ndim < min_rank || t->ndim > max_rank)
        return rt_error_set(RT_ERR_SHAPE, "%s: expected a tensor of rank %d to %d ([C,] D, H, W), got rank %d", fn,
                            min_rank, max_rank, t->ndim);
    if (t->dtype != RT_F32 && t->dtype != RT_I32)
        return rt_error_set(RT_ERR_DTYPE, "%s: expected float32 or int32, got %s", fn, rt_dtype_str(t->dtype));
    return RT_OK;
}

/* Copies box [start, start + size) of t's last three axes into dst (same
 * dtype, [C,] size...), zero where the box leaves [blo, bhi). */
static void copy_box(const rt_tensor *t, const int64_t start[3], const int64_t size[3], const int64_t blo[3],
                         const int64_t bhi[3], void *dst) {
    const int nd = t->ndim;
    const int64_t C = nd == 4 ? t->shape[0] : 1, D = t->shape[nd - 3], H = t->shape[nd - 2], W = t->shape[nd - 1];
    const size_t es = t->dtype == RT_F32 ? sizeof(float) : sizeof(int32_t);
    const char *src = rt_tensor_data(t);
    char *out = dst;
    const int64_t pd = size[0], ph = size[1], pw = size[2];
    memset(out, 0, (size_t)(C * pd * ph * pw) * es);
    /* the valid part on the W axis is one contiguous run per row */
    int64_t w0 = start[2] > blo[2] ? start[2] : blo[2], w1 = start[2] + pw < bhi[2] ? start[2] + pw : bhi[2];
    if (w1 <= w0) return;
    for (int64_t c = 0; c < C; c++)
        for (int64_t d = 0; d < pd; d++) {
            int64_t vd = start[0] + d;
            if (vd < blo[0] || vd >= bhi[0]) continue;
            for (int64_t h = 0; h < ph; h++) {
                int64_t vh = start[1] + h;
                if (vh < blo[1] || vh >= bhi[1]) continue;
                const char *s = src + ((size_t)(((c * D + vd) * H + vh) * W + w0)) * es;
                char *o = out + ((size_t)(((c * pd + d) * ph + h) * pw + (w0 - start[2]))) * es;
                memcpy(o, s, (size_t)(w1 - w0) * es);
            }
        }
}

rt_status rt_volume_crop(const rt_tensor *t, const int64_t lo[3], const int64_t hi[3], rt_tensor **out) {
    if (out) *out = NULL;
    if (!out) return rt_error_set(RT_ERR_INVALID_ARG, "rt_volume_crop: out is NULL");
    if (!lo || !hi) return rt_error_set(RT_ERR_INVALID_ARG, "rt_volume_crop: lo or hi is NULL");
    RT_TRY(check_volume("rt_volume_crop", t, 3, 4));
    int64_t shape[4], size[3], blo[3] = {0, 0, 0}, bhi[3];
    const int nd = t->ndim;
    for (int a = 0; a < 3; a++) {
        if (hi[a] <= lo[a])
            return rt_error_set(RT_ERR_INVALID_ARG, "rt_volume_crop: empty box on axis %d: lo %lld, hi %lld (hi must "
                                                    "be > lo)", a, (long long)lo[a], (long long)hi[a]);
        size[a] = hi[a] - lo[a];
        bhi[a] = t->shape[nd - 3 + a];
        shape[nd - 3 + a] = size[a];
    }
    if (nd == 4) shape[0] = t->shape[0];
    rt_tensor *o = rt_tensor_create(nd, shape, t->dtype, RT_DEVICE_CPU, RT_MEM_DATA);
    if (!o) return rt_error_last_status();
    copy_box(t, lo, size, blo, bhi, rt_tensor_data(o));
    *out = o;
    return RT_OK;
}

/* Reverses axis `axis` of `outer` volumes [D, H, W] of es-byte elements at p. */
static void flip_raw(void *p, int64_t outer, int64_t D, int64_t H, int64_t W, int axis, size_t es) {
    /* view the volumes as [before, n, inner] and reverse the middle axis */
    const int64_t n = axis == 0 ? D : axis == 1 ? H : W;
    const int64_t inner = axis == 0 ? H * W : axis == 1 ? W : 1;
    const int64_t before = outer * (axis == 0 ? 1 : axis == 1 ? D : D * H);
    char *base = p, tmp[8];
    for (int64_t b = 0; b < before; b++)
        for (int64_t i = 0; i < n / 2; i++) {
            char *x = base + (size_t)((b * n + i) * inner) * es, *y = base + (size_t)((b * n + n - 1 - i) * inner) * es;
            for (int64_t k = 0; k < inner; k++) {
                memcpy(tmp, x + (size_t)k * es, es);
                memcpy(x + (size_t)k * es, y + (size_t)k * es, es);
                memcpy(y + (size_t)k * es, tmp, es);
            }
        }
}

rt_status rt_volume_flip(rt_tensor *t, int axis) {
    RT_TRY(check_volume("rt_volume_flip", t, 3, RT_MAX_DIMS));
    if (axis < 0 || axis > 2)
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_volume_flip: axis must be 0 (D), 1 (H) or 2 (W), got %d", axis);
    const int nd = t->ndim;
    int64_t outer = 1;
    for (int i = 0; i < nd - 3; i++) outer *= t->shape[i];
    flip_raw(rt_tensor_data(t), outer, t->shape[nd - 3], t->shape[nd - 2], t->shape[nd - 1], axis,
             t->dtype == RT_F32 ? sizeof(float) : sizeof(int32_t));
    return RT_OK;
}

/* Uniform draws per channel of rt_volume_intensity_augment (a fixed count, so
 * the stream advances the same whatever was applied). */
#define RT_INTENSITY_DRAWS 8

/* The augmentation of C channels of n voxels from the draws u. */
static void intensity_apply(float *x, int64_t C, int64_t n, const float *u) {
    for (int64_t c = 0; c < C; c++, u += RT_INTENSITY_DRAWS) {
        float *p = x + c * n;
        if (u[0] < 0.15f) { /* multiplicative brightness */
            float m = 0.75f + 0.5f * u[1];
            for (int64_t i = 0; i < n; i++) p[i] *= m;
        }
        if (u[2] < 0.15f) { /* contrast around the mean, range preserved */
            double s = 0.0;
            float lo = p[0], hi = p[0];
            for (int64_t i = 0; i < n; i++) {
                s += p[i];
                lo = p[i] < lo ? p[i] : lo;
                hi = p[i] > hi ? p[i] : hi;
            }
            float mean = (float)(s / (double)n), f = 0.75f + 0.5f * u[3];
            for (int64_t i = 0; i < n; i++) {
                float v = (p[i] - mean) * f + mean;
                p[i] = v < lo ? lo : v > hi ? hi : v;
            }
        }
        if (u[4] < 0.3f) { /* gamma on the [min, max] range, mean and std retained */
            double s = 0.0, s2 = 0.0;
            float lo = p[0], hi = p[0];
            for (int64_t i = 0; i < n; i++) {
                s += p[i];
                s2 += (double)p[i] * p[i];
                lo = p[i] < lo ? p[i] : lo;
                hi = p[i] > hi ? p[i] : hi;
            }
            double mean = s / (double)n, var = s2 / (double)n - mean * mean, sd = sqrt(var > 0 ? var : 0);
            double gamma = u[5] < 0.5f ? 0.7 + 0.3 * u[6] : 1.0 + 0.5 * u[6];
            double range = (double)hi - lo + 1e-7;
            double t = 0.0, t2 = 0.0;
            for (int64_t i = 0; i < n; i++) {
                double v = pow(((double)p[i] - lo) / range, gamma) * range + lo;
                p[i] = (float)v;
                t += v;
                t2 += v * v;
            }
            double m2 = t / (double)n, v2 = t2 / (double)n - m2 * m2, sd2 = sqrt(v2 > 0 ? v2 : 0);
            double scale = sd / (sd2 > 1e-8 ? sd2 : 1e-8);
            for (int64_t i = 0; i < n; i++) p[i] = (float)(((double)p[i] - m2) * scale + mean);
        }
    }
}

rt_status rt_volume_intensity_augment(rt_tensor *x, rt_generator *g) {
    if (!g) return rt_error_set(RT_ERR_INVALID_ARG, "rt_volume_intensity_augment: generator g is NULL");
    RT_TRY(check_volume("rt_volume_intensity_augment", x, 3, 4));
    if (x->dtype != RT_F32) return rt_error_set(RT_ERR_DTYPE, "rt_volume_intensity_augment: x must be float32");
    const int nd = x->ndim;
    const int64_t C = nd == 4 ? x->shape[0] : 1, n = x->shape[nd - 3] * x->shape[nd - 2] * x->shape[nd - 1];
    float u[RT_INTENSITY_DRAWS * 16];
    for (int64_t c = 0; c < C; c += 16) {
        int64_t k = C - c < 16 ? C - c : 16;
        rt_generator_uniform(g, RT_INTENSITY_DRAWS * k, u);
        intensity_apply(rt_tensor_f32(x) + c * n, k, n, u);
    }
    return RT_OK;
}

/* ------------------------------------------------------------------ sampler */

struct rt_patch_sampler {
    rt_tensor *image, *labels;  /* retained */
    rt_patch_options o;
    rt_generator g;
    int64_t n_classes;          /* max label in the region + 1 */
    int64_t *class_start;       /* n_classes + 1 offsets into voxels (class 0 empty) */
    int64_t *voxels;            /* flat volume indices of the region's foreground voxels, by class */
    int64_t *present;           /* the foreground classes with voxels in the region */
    int64_t n_present;
    size_t booked;              /* bytes of `voxels` (rt_mem_alloc, RT_MEM_DATA) */
};

void rt_patch_sampler_destroy(rt_patch_sampler *s) {
    if (!s) return;
    rt_tensor_release(s->image);
    rt_tensor_release(s->labels);
    free(s->class_start);
    rt_mem_free(s->voxels, s->booked, RT_MEM_DATA);
    free(s->present);
    free(s);
}

int64_t rt_patch_sampler_foreground_voxels(const rt_patch_sampler *s) {
    return s ? s->class_start[s->n_classes] : 0;
}

/* The region's foreground voxels grouped by class (a counting sort). */
static rt_status build_lists(rt_patch_sampler *s) {
    const rt_tensor *l = s->labels;
    const int nd = l->ndim;
    const int64_t H = l->shape[nd - 2], W = l->shape[nd - 1];
    const int32_t *lab = rt_tensor_data(l);
    const int64_t *lo = s->o.region_lo, *hi = s->o.region_hi;
    int32_t maxl = 0;
    for (int64_t d = lo[0]; d < hi[0]; d++)
        for (int64_t h = lo[1]; h < hi[1]; h++)
            for (int64_t w = lo[2]; w < hi[2]; w++) {
                int32_t v = lab[(d * H + h) * W + w];
                if (v < 0)
                    return rt_error_set(RT_ERR_INVALID_ARG, "rt_patch_sampler_create: label %d at voxel (d %lld, h "
                                        "%lld, w %lld) is negative; labels must be class indices >= 0", v,
                                        (long long)d, (long long)h, (long long)w);
                maxl = v > maxl ? v : maxl;
            }
    s->n_classes = (int64_t)maxl + 1;
    const int64_t K = s->n_classes;
    /* class_start[c] .. class_start[c + 1] hold class c's voxels; class 0 (background) is empty */
    s->class_start = calloc((size_t)K + 1, sizeof(int64_t));
    s->present = calloc((size_t)K, sizeof(int64_t));
    int64_t *count = calloc((size_t)K, sizeof(int64_t));
    if (!s->class_start || !s->present || !count) {
        free(count);
        return rt_error_set(RT_ERR_OOM, "rt_patch_sampler_create: out of memory");
    }
    for (int64_t d = lo[0]; d < hi[0]; d++)
        for (int64_t h = lo[1]; h < hi[1]; h++)
            for (int64_t w = lo[2]; w < hi[2]; w++) count[lab[(d * H + h) * W + w]]++;
    for (int64_t c = 1; c < K; c++) {
        s->class_start[c + 1] = s->class_start[c] + count[c];
        if (count[c] > 0) s->present[s->n_present++] = c;
    }
    free(count);
    const int64_t total = s->class_start[s->n_classes];
    void *mem = NULL;
    RT_TRY(rt_mem_alloc((size_t)total * sizeof(int64_t), RT_MEM_DATA, &mem));
    s->voxels = mem;
    s->booked = (size_t)total * sizeof(int64_t);
    int64_t *fill = calloc((size_t)K, sizeof(int64_t));
    if (!fill) {
        return rt_error_set(RT_ERR_OOM, "rt_patch_sampler_create: out of memory for %lld foreground voxels",
                            (long long)total);
    }
    for (int64_t d = lo[0]; d < hi[0]; d++)
        for (int64_t h = lo[1]; h < hi[1]; h++)
            for (int64_t w = lo[2]; w < hi[2]; w++) {
                int64_t i = (d * H + h) * W + w;
                int32_t v = lab[i];
                if (v > 0) s->voxels[s->class_start[v] + fill[v]++] = i;
            }
    free(fill);
    return RT_OK;
}

rt_status rt_patch_sampler_create(rt_tensor *image, rt_tensor *labels, const rt_patch_options *o,
                                  rt_patch_sampler **out) {
    static const char *fn = "rt_patch_sampler_create";
    if (out) *out = NULL;
    if (!out || !o) return rt_error_set(RT_ERR_INVALID_ARG, "%s: %s is NULL", fn, out ? "options o" : "out");
    if (!image || !labels)
        return rt_error_set(RT_ERR_INVALID_ARG, "%s: %s is NULL", fn, image ? "labels" : "image");
    if (rt_tensor_is_meta(image) || rt_tensor_is_meta(labels))
        return rt_error_set(RT_ERR_INVALID_ARG, "%s: meta tensors hold no voxels", fn);
    if (image->ndim != 4 || image->dtype != RT_F32)
        return rt_error_set(image->ndim != 4 ? RT_ERR_SHAPE : RT_ERR_DTYPE, "%s: image must be float32 [C, D, H, W]",
                            fn);
    if (labels->dtype != RT_I32) return rt_error_set(RT_ERR_DTYPE, "%s: labels must be int32", fn);
    if (!(labels->ndim == 3 || (labels->ndim == 4 && labels->shape[0] == 1)))
        return rt_error_set(RT_ERR_SHAPE, "%s: labels must be [D, H, W] or [1, D, H, W]", fn);
    const int ln = labels->ndim;
    for (int a = 0; a < 3; a++)
        if (labels->shape[ln - 3 + a] != image->shape[1 + a]) {
            char a_s[64], b_s[64];
            return rt_error_set(RT_ERR_SHAPE, "%s: image %s and labels %s differ in their spatial sizes (D, H, W); "
                                "resample the labels into the image's grid", fn,
                                rt_tensor_shape_str(image, a_s, sizeof a_s), rt_tensor_shape_str(labels, b_s, sizeof b_s));
        }
    for (int a = 0; a < 3; a++) {
        if (o->patch[a] < 1)
            return rt_error_set(RT_ERR_INVALID_ARG, "%s: patch size %lld on axis %d must be >= 1", fn,
                                (long long)o->patch[a], a);
        if (o->region_lo[a] < 0 || o->region_hi[a] > image->shape[1 + a] || o->region_hi[a] <= o->region_lo[a])
            return rt_error_set(RT_ERR_INVALID_ARG, "%s: region [%lld, %lld) on axis %d is empty or outside the "
                                "volume's 0..%lld", fn, (long long)o->region_lo[a], (long long)o->region_hi[a], a,
                                (long long)image->shape[1 + a]);
    }
    if (!(o->foreground_fraction >= 0.0f && o->foreground_fraction <= 1.0f))
        return rt_error_set(RT_ERR_INVALID_ARG, "%s: foreground_fraction %g must be in [0, 1] (nnU-Net: 0.33)", fn,
                            (double)o->foreground_fraction);
    if (o->transpose && (o->patch[0] != o->patch[1] || o->patch[1] != o->patch[2]))
        return rt_error_set(RT_ERR_INVALID_ARG, "%s: permuting the axes needs a cubic patch, got %lldx%lldx%lld; "
                            "give equal sizes or turn the permutation off", fn, (long long)o->patch[0],
                            (long long)o->patch[1], (long long)o->patch[2]);
    rt_patch_sampler *s = calloc(1, sizeof *s);
    if (!s) return rt_error_set(RT_ERR_OOM, "%s: out of memory", fn);
    s->image = rt_tensor_retain(image);
    s->labels = rt_tensor_retain(labels);
    s->o = *o;
    s->g = (rt_generator){.seed = o->seed, .offset = 0};
    rt_status st = build_lists(s);
    if (st != RT_OK) {
        rt_patch_sampler_destroy(s);
        return st;
    }
    *out = s;
    return RT_OK;
}

/* Draws per patch besides the intensity augmentation: foreground?, class,
 * voxel (2: 48 bits of index), start per axis (3), flip per axis (3), axis
 * permutation (1), one spare. */
#define RT_PATCH_DRAWS 12

/* The six orders of three axes. */
static const int k_axis_orders[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};

/* Permutes the axes of each of `outer` cubes of side n (elements of es
 * bytes) in place: out(c0, c1, c2) = in(c') with c'[axes[a]] = c_a.
 * scratch holds one cube. */
static void transpose_raw(void *p, int64_t outer, int64_t n, const int axes[3], size_t es, void *scratch) {
    const int64_t n3 = n * n * n;
    for (int64_t o = 0; o < outer; o++) {
        char *cube = (char *)p + (size_t)(o * n3) * es;
        memcpy(scratch, cube, (size_t)n3 * es);
        int64_t c[3], in[3];
        for (c[0] = 0; c[0] < n; c[0]++)
            for (c[1] = 0; c[1] < n; c[1]++)
                for (c[2] = 0; c[2] < n; c[2]++) {
                    for (int a = 0; a < 3; a++) in[axes[a]] = c[a];
                    memcpy(cube + (size_t)((c[0] * n + c[1]) * n + c[2]) * es,
                           (const char *)scratch + (size_t)((in[0] * n + in[1]) * n + in[2]) * es, es);
                }
    }
}

/* Start of a patch of size p on one axis of region [lo, hi): inside the
 * region where it fits, else the region inside the patch. */
static int64_t start_uniform(int64_t lo, int64_t hi, int64_t p, float u) {
    int64_t r = hi - lo;
    int64_t span = (p <= r ? r - p : p - r) + 1;
    int64_t k = (int64_t)((double)u * (double)span);
    if (k >= span) k = span - 1;
    return p <= r ? lo + k : lo - k;
}

static int64_t start_centred(int64_t lo, int64_t hi, int64_t p, int64_t v) {
    int64_t s = v - p / 2, a = p <= hi - lo ? lo : hi - p, b = p <= hi - lo ? hi - p : lo;
    return s < a ? a : s > b ? b : s;
}

rt_status rt_patch_sampler_next(rt_patch_sampler *s, int64_t batch, rt_tensor **x, rt_tensor **y,
                                rt_patch_info *info) {
    if (x) *x = NULL;
    if (y) *y = NULL;
    if (!s || !x || !y)
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_patch_sampler_next: %s is NULL", !s ? "sampler s" : !x ? "x" : "y");
    if (batch < 1) return rt_error_set(RT_ERR_INVALID_ARG, "rt_patch_sampler_next: batch %lld must be >= 1",
                                       (long long)batch);
    const rt_patch_options *o = &s->o;
    const int64_t C = s->image->shape[0], H = s->image->shape[2], W = s->image->shape[3];
    const int64_t pd = o->patch[0], ph = o->patch[1], pw = o->patch[2], pn = pd * ph * pw;
    const int64_t xs[5] = {batch, C, pd, ph, pw}, ys[4] = {batch, pd, ph, pw};
    rt_tensor *bx = rt_tensor_create(5, xs, RT_F32, RT_DEVICE_CPU, RT_MEM_DATA);
    rt_tensor *by = bx ? rt_tensor_create(4, ys, RT_I32, RT_DEVICE_CPU, RT_MEM_DATA) : NULL;
    if (!by) {
        rt_tensor_release(bx);
        return rt_error_last_status();
    }
    const int64_t nfg = s->class_start[s->n_classes];
    void *scratch = o->transpose ? malloc((size_t)pn * sizeof(float)) : NULL; /* one cube of f32 or i32 */
    if (o->transpose && !scratch) {
        rt_tensor_release(bx);
        rt_tensor_release(by);
        return rt_error_set(RT_ERR_OOM, "rt_patch_sampler_next: out of memory for the axis permutation");
    }
    for (int64_t b = 0; b < batch; b++) {
        float u[RT_PATCH_DRAWS];
        rt_generator_uniform(&s->g, RT_PATCH_DRAWS, u);
        int64_t start[3];
        bool fg = s->n_present > 0 && nfg > 0 && u[0] < o->foreground_fraction;
        if (fg) {
            int64_t ci = (int64_t)((double)u[1] * (double)s->n_present);
            int64_t c = s->present[ci < s->n_present ? ci : s->n_present - 1];
            int64_t n = s->class_start[c + 1] - s->class_start[c];
            int64_t k = (int64_t)(((double)u[2] + (double)u[3] / 16777216.0) * (double)n);
            int64_t v = s->voxels[s->class_start[c] + (k < n ? k : n - 1)];
            int64_t vc[3] = {v / (H * W), (v / W) % H, v % W};
            for (int a = 0; a < 3; a++) start[a] = start_centred(o->region_lo[a], o->region_hi[a], o->patch[a], vc[a]);
        } else {
            for (int a = 0; a < 3; a++)
                start[a] = start_uniform(o->region_lo[a], o->region_hi[a], o->patch[a], u[4 + a]);
        }
        float *px = rt_tensor_f32(bx) + b * C * pn;
        int32_t *py = (int32_t *)rt_tensor_data(by) + b * pn;
        copy_box(s->image, start, o->patch, o->region_lo, o->region_hi, px);
        copy_box(s->labels, start, o->patch, o->region_lo, o->region_hi, py);
        bool flipped[3] = {false, false, false};
        if (o->flip) {
            for (int a = 0; a < 3; a++) {
                if (u[7 + a] >= 0.5f) continue;
                flipped[a] = true;
                flip_raw(px, C, pd, ph, pw, a, sizeof(float));
                flip_raw(py, 1, pd, ph, pw, a, sizeof(int32_t));
            }
        }
        const int *axes = k_axis_orders[0];
        if (o->transpose) {
            int k = (int)(u[10] * 6.0f);
            axes = k_axis_orders[k < 6 ? k : 5];
            transpose_raw(px, C, pd, axes, sizeof(float), scratch);
            transpose_raw(py, 1, pd, axes, sizeof(int32_t), scratch);
        }
        if (o->intensity) {
            float du[RT_INTENSITY_DRAWS * 16];
            for (int64_t c = 0; c < C; c += 16) {
                int64_t k = C - c < 16 ? C - c : 16;
                rt_generator_uniform(&s->g, RT_INTENSITY_DRAWS * k, du);
                intensity_apply(px + c * pn, k, pn, du);
            }
        }
        if (info) {
            info[b] = (rt_patch_info){.foreground = fg};
            for (int a = 0; a < 3; a++) {
                info[b].start[a] = start[a];
                info[b].flipped[a] = flipped[a];
                info[b].axes[a] = axes[a];
            }
        }
    }
    free(scratch);
    *x = bx;
    *y = by;
    return RT_OK;
}
