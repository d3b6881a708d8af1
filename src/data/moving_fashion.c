/* Moving Fashion-MNIST sequences (data/moving_fashion.h). */
#include "data/moving_fashion.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"

rt_moving_fashion_opts rt_moving_fashion_defaults(int frames) {
    return (rt_moving_fashion_opts){.frames = frames, .size = 64, .items = 2, .speed = 3.6f};
}

/* p moved by v inside [0, len]: reflected at both ends (v flips each time). */
static void bounce(double *p, double *v, double len) {
    *p += *v;
    for (int guard = 0; guard < 64 && (*p < 0.0 || *p > len); guard++) {
        if (*p < 0.0) *p = -*p;
        else *p = 2.0 * len - *p;
        *v = -*v;
    }
    if (*p < 0.0) *p = 0.0; /* len 0, or a speed many times the range */
    if (*p > len) *p = len;
}

rt_status rt_moving_fashion_sequence(const uint8_t *images, int64_t n_images, int img,
                                     const rt_moving_fashion_opts *o, uint64_t seed, uint64_t index,
                                     float *out, int *pos) {
    if (!images || !o || !out)
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_moving_fashion_sequence: images, opts and out are required");
    if (n_images < 1 || img < 1)
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_moving_fashion_sequence: need at least one image of side >= 1 "
                                                "(got %lld images of side %d)", (long long)n_images, img);
    if (o->frames < 1)
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_moving_fashion_sequence: frames must be >= 1, got %d", o->frames);
    if (o->size < img)
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_moving_fashion_sequence: size %d is smaller than the %d-pixel "
                                                "items; use a size >= %d", o->size, img, img);
    if (o->items < 1 || o->items > 8)
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_moving_fashion_sequence: items must be in 1..8, got %d", o->items);
    if (!(o->speed >= 0.0f) || !isfinite(o->speed))
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_moving_fashion_sequence: speed must be finite and >= 0, got %g",
                            (double)o->speed);
    const int S = o->size, K = o->items;
    const double len = S - img, two_pi = 6.283185307179586;
    float u[32];
    rt_philox_uniform(seed, index * (uint64_t)K, 4 * K, u);
    int64_t which[8];
    double y[8], x[8], vy[8], vx[8];
    for (int k = 0; k < K; k++) {
        which[k] = (int64_t)(u[4 * k] * (double)n_images);
        if (which[k] >= n_images) which[k] = n_images - 1;
        y[k] = u[4 * k + 1] * len;
        x[k] = u[4 * k + 2] * len;
        double a = u[4 * k + 3] * two_pi;
        vy[k] = o->speed * sin(a);
        vx[k] = o->speed * cos(a);
    }
    for (int t = 0; t < o->frames; t++) {
        float *f = out + (int64_t)t * S * S;
        memset(f, 0, sizeof(float) * (size_t)S * (size_t)S);
        for (int k = 0; k < K; k++) {
            if (t > 0) {
                bounce(&y[k], &vy[k], len);
                bounce(&x[k], &vx[k], len);
            }
            int r0 = (int)lround(y[k]), c0 = (int)lround(x[k]);
            if (pos) {
                pos[(t * K + k) * 2] = r0;
                pos[(t * K + k) * 2 + 1] = c0;
            }
            const uint8_t *im = images + which[k] * (int64_t)img * img;
            for (int r = 0; r < img; r++)
                for (int c = 0; c < img; c++) {
                    float v = im[r * img + c] * (1.0f / 255.0f);
                    float *d = &f[(r0 + r) * S + c0 + c];
                    if (v > *d) *d = v;
                }
        }
    }
    return RT_OK;
}

rt_status rt_moving_fashion_batch(const rt_dataset *ds, const rt_moving_fashion_opts *o, uint64_t seed,
                                  uint64_t first, int batch, float *out) {
    if (!ds || !o || !out)
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_moving_fashion_batch: ds, opts and out are required");
    if (batch < 1) return rt_error_set(RT_ERR_INVALID_ARG, "rt_moving_fashion_batch: batch must be >= 1, got %d", batch);
    rt_dataset_arrays arr;
    if (ds->shape.dtype != RT_U8 || ds->shape.ndim != 3 || ds->shape.dims[0] != 1 ||
        ds->shape.dims[1] != ds->shape.dims[2] || !rt_dataset_arrays_get(ds, &arr))
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_moving_fashion_batch: the dataset must hold u8 (1, H, H) images "
                                                "in memory (Fashion-MNIST from rt_mnist_load)");
    if (o->frames < 1 || o->size < 1)
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_moving_fashion_batch: frames and size must be >= 1");
    const int64_t S2 = (int64_t)o->size * o->size;
    float *seq = malloc(sizeof(float) * (size_t)(o->frames * S2));
    if (!seq) return rt_error_set(RT_ERR_OOM, "rt_moving_fashion_batch: out of memory for one sequence");
    rt_status st = RT_OK;
    for (int b = 0; b < batch && st == RT_OK; b++) {
        st = rt_moving_fashion_sequence(arr.inputs, ds->n, (int)ds->shape.dims[1], o, seed, first + (uint64_t)b, seq,
                                        NULL);
        for (int t = 0; st == RT_OK && t < o->frames; t++)
            memcpy(out + ((int64_t)t * batch + b) * S2, seq + (int64_t)t * S2, sizeof(float) * (size_t)S2);
    }
    free(seq);
    return st;
}
