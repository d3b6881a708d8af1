#include "data/loader.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/mem.h"
#include "core/rng.h"

/* Counter word 3 of the two Philox streams, so they never share a block. */
#define RT_TAG_SHUFFLE 0x73687566u /* "shuf" */
#define RT_TAG_AUGMENT 0x61756720u /* "aug " */

/* Below this many output elements per batch the work stays on one thread. */
#define RT_LOADER_PAR_MIN (1 << 15)

struct rt_loader {
    const rt_dataset *ds;
    rt_loader_options opt;
    int64_t epoch;
    int64_t batch;        /* next batch to return */
    int64_t nbatches;
    int64_t *order;       /* n dataset indices, RT_MEM_DATA */
    size_t order_bytes;
    int64_t order_epoch;  /* epoch `order` was built for; -1 before the first build */
    /* a sample is C channels of `planes` planes of H x W values */
    int C, H, W;
    int64_t planes;
    size_t in_bytes;      /* bytes of one input (rt_sample_nbytes) */
    bool u8;              /* u8 inputs (else f32) */
    bool direct;          /* rows come straight from the dataset's arrays */
    rt_dataset_arrays arrays; /* valid when direct */
    unsigned char *stage; /* B inputs read through the interface (not direct), RT_MEM_DATA */
    size_t stage_bytes;
    float lut[RT_DATA_MAX_CHANNELS][256]; /* u8: ((float)v / 255 - mean) / std per channel */
};

rt_loader_options rt_loader_options_default(void) {
    rt_loader_options o;
    memset(&o, 0, sizeof o);
    o.batch_size = 64;
    for (int c = 0; c < RT_DATA_MAX_CHANNELS; c++) {
        o.mean[c] = 0.0f;
        o.std[c] = 1.0f;
    }
    return o;
}

/* ---- Philox streams --------------------------------------------------------- */

typedef struct rt_word_stream {
    uint32_t key[2];
    uint32_t epoch;
    uint64_t block;   /* next block to draw */
    uint32_t buf[4];
    int used;         /* words of buf already consumed (4 = empty) */
} rt_word_stream;

static uint32_t rt_stream_next(rt_word_stream *s) {
    if (s->used == 4) {
        const uint32_t ctr[4] = {(uint32_t)s->block, (uint32_t)(s->block >> 32), s->epoch,
                                 RT_TAG_SHUFFLE};
        rt_philox4x32_10(ctr, s->key, s->buf);
        s->block++;
        s->used = 0;
    }
    return s->buf[s->used++];
}

/* Uniform integer in [0, range), range >= 1, without bias (Lemire, "Fast
 * random integer generation in an interval", ACM TOMACS 2019). */
static uint32_t rt_stream_bounded(rt_word_stream *s, uint32_t range) {
    uint64_t m = (uint64_t)rt_stream_next(s) * range;
    uint32_t low = (uint32_t)m;
    if (low < range) {
        uint32_t threshold = (uint32_t)(-range) % range;
        while (low < threshold) {
            m = (uint64_t)rt_stream_next(s) * range;
            low = (uint32_t)m;
        }
    }
    return (uint32_t)(m >> 32);
}

static void rt_loader_build_order(rt_loader *l, int64_t epoch) {
    const int64_t n = l->ds->n;
    for (int64_t i = 0; i < n; i++) l->order[i] = i;
    if (l->opt.shuffle && n > 1) {
        rt_word_stream s = {{(uint32_t)l->opt.seed, (uint32_t)(l->opt.seed >> 32)},
                            (uint32_t)epoch, 0, {0, 0, 0, 0}, 4};
        /* Fisher-Yates (Durstenfeld): for i = n-1 .. 1 swap i with j in [0, i]. */
        for (int64_t i = n - 1; i > 0; i--) {
            int64_t j = rt_stream_bounded(&s, (uint32_t)(i + 1));
            int64_t t = l->order[i];
            l->order[i] = l->order[j];
            l->order[j] = t;
        }
    }
    l->order_epoch = epoch;
}

static rt_augment rt_loader_draw(const rt_loader *l, int64_t epoch, int64_t index) {
    const int pad = l->opt.crop_padding;
    rt_augment a = {pad, pad, false};
    if (pad == 0 && !l->opt.hflip) return a;
    const uint32_t key[2] = {(uint32_t)l->opt.seed, (uint32_t)(l->opt.seed >> 32)};
    const uint32_t ctr[4] = {(uint32_t)index, (uint32_t)((uint64_t)index >> 32), (uint32_t)epoch,
                             RT_TAG_AUGMENT};
    uint32_t r[4];
    rt_philox4x32_10(ctr, key, r);
    if (pad > 0) {
        /* multiply-shift to [0, 2P]: bias below (2P+1) / 2^32 */
        const uint64_t range = (uint64_t)(2 * pad + 1);
        a.top = (int)(((uint64_t)r[0] * range) >> 32);
        a.left = (int)(((uint64_t)r[1] * range) >> 32);
    }
    if (l->opt.hflip) a.flip = (r[2] >> 31) != 0; /* p = 1/2 exactly */
    return a;
}

/* ---- lifecycle ---------------------------------------------------------------- */

rt_status rt_loader_create(const rt_dataset *ds, const rt_loader_options *opt, rt_loader **out) {
    if (!out) return rt_error_set(RT_ERR_INVALID_ARG, "rt_loader_create: out is NULL");
    *out = NULL;
    if (!ds || !opt)
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_loader_create: %s is NULL", ds ? "opt" : "ds");
    if (opt->batch_size < 1)
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_loader_create: batch_size must be >= 1, got %lld",
                            (long long)opt->batch_size);
    for (int c = 0; c < ds->channels; c++) {
        if (!isfinite(opt->mean[c]))
            return rt_error_set(RT_ERR_INVALID_ARG, "rt_loader_create: mean[%d] is not finite", c);
        if (!isfinite(opt->std[c]) || !(opt->std[c] > 0.0f))
            return rt_error_set(RT_ERR_INVALID_ARG,
                                "rt_loader_create: std[%d] must be finite and > 0, got %g "
                                "(the Normalize divisor; Fashion-MNIST's is %.4f)",
                                c, (double)opt->std[c], 0.3530);
    }
    if (opt->shard_count < 0 || (opt->shard_count > 1 && (opt->shard_rank < 0 || opt->shard_rank >= opt->shard_count)))
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_loader_create: shard_rank must be in 0..shard_count-1 and "
                            "shard_count >= 0, got %d and %d", opt->shard_rank, opt->shard_count);
    if (opt->crop_padding < 0 || opt->crop_padding > 65535)
        return rt_error_set(RT_ERR_INVALID_ARG,
                            "rt_loader_create: crop_padding must be 0..65535, got %d",
                            opt->crop_padding);
    const rt_sample_shape *sh = &ds->shape;
    if ((opt->crop_padding > 0 || opt->hflip) && sh->ndim < 3)
        return rt_error_set(RT_ERR_INVALID_ARG,
                            "rt_loader_create: RandomCrop and horizontal flip act on the last two "
                            "dims (H, W) of samples of shape (C, ..., H, W); the samples of "
                            "dataset '%s' have %d dim%s",
                            ds->ops->name ? ds->ops->name : "?", sh->ndim, sh->ndim == 1 ? "" : "s");
    /* planes of ds->height x ds->width: (C) -> 1 x 1, (C, L) -> 1 x L,
     * (C, H, W) -> H x W, (C, D, H, W) -> D planes of H x W */
    const int64_t H = ds->height, W = ds->width;
    if (H > (1 << 30) || W > (1 << 30))
        return rt_error_set(RT_ERR_INVALID_ARG,
                            "rt_loader_create: planes of %lld x %lld; the loader handles up to 2^30 "
                            "per side",
                            (long long)H, (long long)W);
    if (opt->shuffle && ds->n > (int64_t)UINT32_MAX)
        return rt_error_set(RT_ERR_INVALID_ARG,
                            "rt_loader_create: shuffling supports at most 2^32-1 samples, got %lld",
                            (long long)ds->n);
    const size_t in_bytes = rt_sample_nbytes(sh);
    rt_dataset_arrays arrays = {NULL, NULL};
    const bool direct = rt_dataset_arrays_get(ds, &arrays);
    /* staging for B inputs (the batch size need not fit the dataset) */
    const int64_t stage_n = opt->batch_size < ds->n ? opt->batch_size : ds->n;
    if (!direct && stage_n > 0 && in_bytes > ((size_t)1 << 62) / (size_t)stage_n)
        return rt_error_set(RT_ERR_INVALID_ARG,
                            "rt_loader_create: a staging buffer of %lld inputs of %zu bytes is too "
                            "large",
                            (long long)stage_n, in_bytes);
    rt_loader *l = calloc(1, sizeof *l);
    if (!l) return rt_error_set(RT_ERR_OOM, "out of memory allocating a loader");
    l->ds = ds;
    l->opt = *opt;
    l->C = ds->channels;
    l->H = (int)H;
    l->W = (int)W;
    l->planes = rt_sample_numel(sh) / ds->channels / (H * W);
    l->in_bytes = in_bytes;
    l->u8 = sh->dtype == RT_U8;
    l->direct = direct;
    l->arrays = arrays;
    l->nbatches = opt->drop_last ? ds->n / opt->batch_size
                                 : (ds->n + opt->batch_size - 1) / opt->batch_size;
    l->order_bytes = (size_t)ds->n * sizeof(int64_t);
    l->stage_bytes = direct ? 0 : (size_t)stage_n * in_bytes;
    const char *prev = rt_mem_set_op("loader");
    rt_status st = rt_mem_alloc(l->order_bytes, RT_MEM_DATA, (void **)&l->order);
    if (st == RT_OK && !direct) {
        st = rt_mem_alloc(l->stage_bytes, RT_MEM_DATA, (void **)&l->stage);
        if (st != RT_OK) rt_mem_free(l->order, l->order_bytes, RT_MEM_DATA);
    }
    rt_mem_set_op(prev);
    if (st != RT_OK) {
        free(l);
        return st;
    }
    if (l->u8)
        for (int c = 0; c < ds->channels; c++)
            for (int v = 0; v < 256; v++)
                l->lut[c][v] = ((float)v / 255.0f - opt->mean[c]) / opt->std[c];
    l->order_epoch = -1;
    rt_loader_build_order(l, 0);
    *out = l;
    return RT_OK;
}

void rt_loader_destroy(rt_loader *l) {
    if (!l) return;
    rt_mem_free(l->order, l->order_bytes, RT_MEM_DATA);
    if (l->stage) rt_mem_free(l->stage, l->stage_bytes, RT_MEM_DATA);
    free(l);
}

int64_t rt_loader_batches_per_epoch(const rt_loader *l) { return l ? l->nbatches : 0; }
int64_t rt_loader_epoch(const rt_loader *l) { return l ? l->epoch : 0; }
int64_t rt_loader_batch_index(const rt_loader *l) { return l ? l->batch : 0; }
const int64_t *rt_loader_order(const rt_loader *l) {
    if (!l) {
        rt_error_set(RT_ERR_INVALID_ARG, "rt_loader_order: the loader is NULL");
        return NULL;
    }
    return l->order;
}

rt_status rt_loader_seek(rt_loader *l, int64_t epoch, int64_t batch_index) {
    if (!l) return rt_error_set(RT_ERR_INVALID_ARG, "rt_loader_seek: loader is NULL");
    if (epoch < 0 || epoch > RT_LOADER_MAX_EPOCH)
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_loader_seek: epoch %lld is outside [0, %d]",
                            (long long)epoch, RT_LOADER_MAX_EPOCH);
    if (batch_index < 0 || batch_index > l->nbatches)
        return rt_error_set(RT_ERR_INVALID_ARG,
                            "rt_loader_seek: batch %lld is outside [0, %lld] (this loader has %lld "
                            "batches per epoch)",
                            (long long)batch_index, (long long)l->nbatches, (long long)l->nbatches);
    if (l->order_epoch != epoch && l->opt.shuffle) rt_loader_build_order(l, epoch);
    l->order_epoch = epoch;
    l->epoch = epoch;
    l->batch = batch_index;
    return RT_OK;
}

rt_status rt_loader_reset(rt_loader *l, int64_t epoch) { return rt_loader_seek(l, epoch, 0); }

rt_status rt_loader_augment_params(const rt_loader *l, int64_t epoch, int64_t index,
                                   rt_augment *out) {
    if (!l || !out)
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_loader_augment_params: %s is NULL",
                            l ? "out" : "loader");
    if (epoch < 0 || epoch > RT_LOADER_MAX_EPOCH || index < 0 || index >= l->ds->n)
        return rt_error_set(RT_ERR_INVALID_ARG,
                            "rt_loader_augment_params: epoch %lld or sample %lld out of range "
                            "(epochs 0..%d, samples 0..%lld)",
                            (long long)epoch, (long long)index, RT_LOADER_MAX_EPOCH,
                            (long long)l->ds->n - 1);
    *out = rt_loader_draw(l, epoch, index);
    return RT_OK;
}

/* ---- batches ------------------------------------------------------------------ */

/* Writes one u8 input `src`, augmented with `a` and normalised, to dst
 * (C*planes*H*W f32). */
static void rt_loader_fill_u8(const rt_loader *l, const uint8_t *src, rt_augment a, float *dst) {
    const int H = l->H, W = l->W, P = l->opt.crop_padding;
    const int64_t hw = (int64_t)H * W;
    const int dy = a.top - P, dx = a.left - P; /* out(y, x) = raw(y + dy, x' + dx) */
    for (int c = 0; c < l->C; c++) {
        const float *lut = l->lut[c];
        for (int64_t p = 0; p < l->planes; p++) {
            const uint8_t *plane = src + (c * l->planes + p) * hw;
            float *out = dst + (c * l->planes + p) * hw;
            for (int y = 0; y < H; y++) {
                float *row = out + (int64_t)y * W;
                const int sy = y + dy;
                if (sy < 0 || sy >= H) {
                    for (int x = 0; x < W; x++) row[x] = lut[0];
                    continue;
                }
                const uint8_t *srow = plane + (int64_t)sy * W;
                for (int x = 0; x < W; x++) {
                    const int xc = a.flip ? W - 1 - x : x; /* flip after the crop */
                    const int sx = xc + dx;
                    row[x] = (sx >= 0 && sx < W) ? lut[srow[sx]] : lut[0];
                }
            }
        }
    }
}

/* As rt_loader_fill_u8 for an f32 input: (x - mean) / std, padding 0 raw. */
static void rt_loader_fill_f32(const rt_loader *l, const float *src, rt_augment a, float *dst) {
    const int H = l->H, W = l->W, P = l->opt.crop_padding;
    const int64_t hw = (int64_t)H * W;
    const int dy = a.top - P, dx = a.left - P;
    for (int c = 0; c < l->C; c++) {
        const float mean = l->opt.mean[c], std = l->opt.std[c], pad = (0.0f - mean) / std;
        for (int64_t p = 0; p < l->planes; p++) {
            const float *plane = src + (c * l->planes + p) * hw;
            float *out = dst + (c * l->planes + p) * hw;
            for (int y = 0; y < H; y++) {
                float *row = out + (int64_t)y * W;
                const int sy = y + dy;
                if (sy < 0 || sy >= H) {
                    for (int x = 0; x < W; x++) row[x] = pad;
                    continue;
                }
                const float *srow = plane + (int64_t)sy * W;
                for (int x = 0; x < W; x++) {
                    const int xc = a.flip ? W - 1 - x : x;
                    const int sx = xc + dx;
                    row[x] = (sx >= 0 && sx < W) ? (srow[sx] - mean) / std : pad;
                }
            }
        }
    }
}

rt_status rt_loader_next(rt_loader *l, rt_tensor **images, rt_tensor **labels, bool *end_of_epoch) {
    if (images) *images = NULL;
    if (labels) *labels = NULL;
    if (!l || !images || !labels || !end_of_epoch)
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_loader_next: %s is NULL",
                            !l ? "loader" : !images ? "images" : !labels ? "labels" : "end_of_epoch");
    if (l->batch >= l->nbatches) {
        *end_of_epoch = true;
        return RT_OK;
    }
    *end_of_epoch = false;
    const rt_dataset *ds = l->ds;
    const rt_sample_shape *sh = &ds->shape;
    const int64_t B = l->opt.batch_size;
    int64_t start = l->batch * B;
    int64_t b = (ds->n - start < B) ? ds->n - start : B;
    if (l->opt.shard_count > 1) { /* this rank's share of the global batch */
        const int64_t r = l->opt.shard_rank, R = l->opt.shard_count, first = b * r / R;
        start += first;
        b = b * (r + 1) / R - first;
    }
    int64_t ishape[RT_MAX_DIMS] = {b};
    for (int d = 0; d < sh->ndim; d++) ishape[d + 1] = sh->dims[d];
    const int64_t lshape[1] = {b};
    const char *prev = rt_mem_set_op("loader");
    rt_tensor *img = rt_tensor_create(sh->ndim + 1, ishape, RT_F32, RT_DEVICE_CPU, RT_MEM_DATA);
    rt_tensor *lab = img ? rt_tensor_create(1, lshape, RT_I32, RT_DEVICE_CPU, RT_MEM_DATA) : NULL;
    rt_mem_set_op(prev);
    if (!lab) {
        rt_tensor_release(img);
        return RT_ERR_OOM; /* message set by rt_tensor_create */
    }
    const int64_t numel = rt_sample_numel(sh);
    const size_t in_bytes = l->in_bytes;
    float *dst = rt_tensor_f32(img);
    int32_t *ldst = (int32_t *)rt_tensor_data(lab);
    const int64_t *order = l->order + start;
    const int64_t epoch = l->epoch;
    /* Without arrays, read the batch's inputs through the interface first,
     * here on the calling thread (an implementation need not be thread-safe). */
    const unsigned char *base = l->direct ? (const unsigned char *)l->arrays.inputs : l->stage;
    if (!l->direct) {
        for (int64_t k = 0; k < b; k++) {
            rt_status st = rt_dataset_read(ds, order[k], l->stage + (size_t)k * in_bytes, &ldst[k]);
            if (st != RT_OK) {
                rt_tensor_release(img);
                rt_tensor_release(lab);
                return st;
            }
        }
    }
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if (b * numel >= RT_LOADER_PAR_MIN)
#endif
    for (int64_t k = 0; k < b; k++) {
        const int64_t idx = order[k];
        /* the row of sample idx: in the arrays at idx, in the staging buffer at k */
        const unsigned char *src = base + (size_t)(l->direct ? idx : k) * in_bytes;
        const rt_augment a = rt_loader_draw(l, epoch, idx);
        if (l->u8) rt_loader_fill_u8(l, src, a, dst + k * numel);
        else rt_loader_fill_f32(l, (const float *)src, a, dst + k * numel);
        if (l->direct) ldst[k] = l->arrays.labels[idx];
    }
    l->batch++;
    *images = img;
    *labels = lab;
    return RT_OK;
}
