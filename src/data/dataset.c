#include "data/dataset.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/mem.h"

/* Largest input, in elements (keeps every byte count far from overflow). */
#define RT_DATA_MAX_SAMPLE_NUMEL (INT64_C(1) << 40)

/* ---- the interface ------------------------------------------------------------- */

int64_t rt_sample_numel(const rt_sample_shape *s) {
    if (!s || s->ndim < 1 || s->ndim > RT_DATA_MAX_SAMPLE_DIMS) return 0;
    int64_t n = 1;
    for (int d = 0; d < s->ndim; d++) {
        if (s->dims[d] < 1 || s->dims[d] > RT_DATA_MAX_SAMPLE_NUMEL / n) return 0;
        n *= s->dims[d];
    }
    return n;
}

size_t rt_sample_nbytes(const rt_sample_shape *s) {
    const int64_t n = rt_sample_numel(s);
    return n > 0 ? (size_t)n * rt_dtype_size(s->dtype) : 0;
}

static const char *rt_dataset_name(const rt_dataset *ds) {
    return ds->ops->name ? ds->ops->name : "dataset";
}

static rt_status rt_sample_shape_check(const char *who, const rt_sample_shape *s) {
    if (!s) return rt_error_set(RT_ERR_INVALID_ARG, "%s: the sample shape is NULL", who);
    if (s->ndim < 1 || s->ndim > RT_DATA_MAX_SAMPLE_DIMS)
        return rt_error_set(RT_ERR_INVALID_ARG,
                            "%s: a sample has %d dims; give 1..%d (channels first, e.g. (C, H, W))",
                            who, s->ndim, RT_DATA_MAX_SAMPLE_DIMS);
    int64_t numel = 1;
    for (int d = 0; d < s->ndim; d++) {
        if (s->dims[d] < 1)
            return rt_error_set(RT_ERR_INVALID_ARG, "%s: sample dim %d is %lld, must be >= 1", who, d,
                                (long long)s->dims[d]);
        if (s->dims[d] > RT_DATA_MAX_SAMPLE_NUMEL / numel)
            return rt_error_set(RT_ERR_INVALID_ARG, "%s: a sample has more than 2^40 elements", who);
        numel *= s->dims[d];
    }
    if (s->dims[0] > RT_DATA_MAX_CHANNELS)
        return rt_error_set(RT_ERR_INVALID_ARG, "%s: channels (dim 0) must be 1..%d, got %lld", who,
                            RT_DATA_MAX_CHANNELS, (long long)s->dims[0]);
    if (s->dtype != RT_U8 && s->dtype != RT_F32)
        return rt_error_set(RT_ERR_DTYPE, "%s: sample dtype %s; datasets hold u8 or f32 inputs", who,
                            rt_dtype_str(s->dtype));
    return RT_OK;
}

/* First label outside [0, k) among n, or -1. */
static int64_t rt_first_bad_label(const int32_t *labels, int64_t n, int k) {
    for (int64_t i = 0; i < n; i++)
        if (labels[i] < 0 || labels[i] >= k) return i;
    return -1;
}

rt_status rt_dataset_create(const rt_dataset_ops *ops, void *impl, int64_t n,
                            const rt_sample_shape *shape, int num_classes, rt_dataset **out) {
    if (!out) return rt_error_set(RT_ERR_INVALID_ARG, "rt_dataset_create: out is NULL");
    *out = NULL;
    if (!ops || !ops->read)
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_dataset_create: %s is NULL",
                            ops ? "ops->read" : "ops");
    if (n < 0)
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_dataset_create: n is negative (%lld)", (long long)n);
    RT_TRY(rt_sample_shape_check("rt_dataset_create", shape));
    if (num_classes < 1)
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_dataset_create: num_classes must be >= 1, got %d",
                            num_classes);
    rt_dataset *ds = calloc(1, sizeof *ds);
    if (!ds) return rt_error_set(RT_ERR_OOM, "out of memory allocating a dataset header");
    ds->ops = ops;
    ds->impl = impl;
    ds->n = n;
    ds->channels = (int)shape->dims[0];
    ds->height = shape->ndim >= 3 ? shape->dims[shape->ndim - 2] : 1;
    ds->width = shape->ndim >= 2 ? shape->dims[shape->ndim - 1] : 1;
    ds->num_classes = num_classes;
    ds->shape = *shape;
    for (int d = shape->ndim; d < RT_DATA_MAX_SAMPLE_DIMS; d++) ds->shape.dims[d] = 0;
    rt_dataset_arrays a;
    if (ops->arrays && ops->arrays(ds, &a)) {
        rt_status st = RT_OK;
        int64_t bad = -1;
        if (n > 0 && (!a.inputs || !a.labels))
            st = rt_error_set(RT_ERR_FORMAT, "%s dataset: its arrays report a NULL %s",
                              rt_dataset_name(ds), a.inputs ? "labels pointer" : "inputs pointer");
        else if ((bad = rt_first_bad_label(a.labels, n, num_classes)) >= 0)
            st = rt_error_set(RT_ERR_FORMAT, "%s dataset: label %d at index %lld is outside [0, %d)",
                              rt_dataset_name(ds), (int)a.labels[bad], (long long)bad, num_classes);
        if (st != RT_OK) {
            free(ds);
            return st;
        }
    }
    *out = ds;
    return RT_OK;
}

int64_t rt_dataset_size(const rt_dataset *ds) { return ds ? ds->n : 0; }

rt_sample_shape rt_dataset_sample_shape(const rt_dataset *ds) {
    if (!ds) {
        rt_sample_shape none;
        memset(&none, 0, sizeof none); /* ndim 0: rt_sample_numel gives 0 */
        return none;
    }
    return ds->shape;
}

rt_status rt_dataset_read(const rt_dataset *ds, int64_t i, void *input, int32_t *label) {
    if (!ds || !input || !label)
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_dataset_read: %s is NULL",
                            !ds ? "ds" : !input ? "input" : "label");
    if (i < 0 || i >= ds->n)
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_dataset_read: sample %lld is outside [0, %lld)",
                            (long long)i, (long long)ds->n);
    RT_TRY(ds->ops->read(ds, i, input, label));
    if (*label < 0 || *label >= ds->num_classes)
        return rt_error_set(RT_ERR_FORMAT, "%s dataset: sample %lld has label %d, outside [0, %d)",
                            rt_dataset_name(ds), (long long)i, (int)*label, ds->num_classes);
    return RT_OK;
}

rt_status rt_dataset_get(const rt_dataset *ds, int64_t i, rt_tensor **input, int32_t *label) {
    if (input) *input = NULL;
    if (!ds || !input || !label)
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_dataset_get: %s is NULL",
                            !ds ? "ds" : !input ? "input" : "label");
    if (i < 0 || i >= ds->n)
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_dataset_get: sample %lld is outside [0, %lld)",
                            (long long)i, (long long)ds->n);
    const char *prev = rt_mem_set_op("dataset");
    rt_tensor *t = rt_tensor_create(ds->shape.ndim, ds->shape.dims, ds->shape.dtype, RT_DEVICE_CPU,
                                    RT_MEM_DATA);
    rt_mem_set_op(prev);
    if (!t) return RT_ERR_OOM; /* message set by rt_tensor_create */
    rt_status st = rt_dataset_read(ds, i, rt_tensor_data(t), label);
    if (st != RT_OK) {
        rt_tensor_release(t);
        return st;
    }
    *input = t;
    return RT_OK;
}

bool rt_dataset_arrays_get(const rt_dataset *ds, rt_dataset_arrays *out) {
    if (!ds || !out || !ds->ops->arrays) return false;
    return ds->ops->arrays(ds, out);
}

void rt_dataset_destroy(rt_dataset *ds) {
    if (!ds) return;
    if (ds->ops->destroy) ds->ops->destroy(ds);
    free(ds);
}

/* ---- the "memory" implementation ------------------------------------------------- */

typedef struct rt_memory_impl {
    rt_tensor *inputs; /* (n, dims...) of the sample dtype, RT_MEM_DATA */
    rt_tensor *labels; /* i32 (n), RT_MEM_DATA */
} rt_memory_impl;

static rt_status rt_memory_read(const rt_dataset *ds, int64_t i, void *input, int32_t *label) {
    const rt_memory_impl *m = ds->impl;
    const size_t isz = rt_sample_nbytes(&ds->shape);
    memcpy(input, (const unsigned char *)rt_tensor_data(m->inputs) + (size_t)i * isz, isz);
    *label = ((const int32_t *)rt_tensor_data(m->labels))[i];
    return RT_OK;
}

static bool rt_memory_arrays(const rt_dataset *ds, rt_dataset_arrays *out) {
    const rt_memory_impl *m = ds->impl;
    out->inputs = rt_tensor_data(m->inputs);
    out->labels = rt_tensor_data(m->labels);
    return true;
}

static void rt_memory_free(rt_memory_impl *m) {
    if (!m) return;
    rt_tensor_release(m->inputs);
    rt_tensor_release(m->labels);
    free(m);
}

static void rt_memory_destroy(rt_dataset *ds) { rt_memory_free(ds->impl); }

static const rt_dataset_ops rt_memory_ops = {
    .name = "memory",
    .read = rt_memory_read,
    .arrays = rt_memory_arrays,
    .destroy = rt_memory_destroy,
};

/* New state with uninitialised tensors for n samples of *shape (checked). */
static rt_status rt_memory_alloc(int64_t n, const rt_sample_shape *shape, rt_memory_impl **out) {
    *out = NULL;
    rt_memory_impl *m = calloc(1, sizeof *m);
    if (!m) return rt_error_set(RT_ERR_OOM, "out of memory allocating a dataset");
    int64_t ishape[RT_MAX_DIMS] = {n};
    for (int d = 0; d < shape->ndim; d++) ishape[d + 1] = shape->dims[d];
    const char *prev = rt_mem_set_op("dataset");
    m->inputs = rt_tensor_create(shape->ndim + 1, ishape, shape->dtype, RT_DEVICE_CPU, RT_MEM_DATA);
    if (m->inputs) m->labels = rt_tensor_create(1, &n, RT_I32, RT_DEVICE_CPU, RT_MEM_DATA);
    rt_mem_set_op(prev);
    if (!m->labels) {
        rt_status st = rt_error_set(RT_ERR_OOM,
                                    "cannot allocate a dataset of %lld samples of %lld %s values "
                                    "(%.1f MiB, booked as DATA): %s",
                                    (long long)n, (long long)rt_sample_numel(shape),
                                    rt_dtype_str(shape->dtype),
                                    (double)n * (double)rt_sample_nbytes(shape) / 1048576.0,
                                    rt_error_last());
        rt_memory_free(m);
        return st;
    }
    *out = m;
    return RT_OK;
}

/* rt_dataset_from_memory and rt_dataset_from_arrays: `who` names the caller
 * and `inputs_name` its inputs argument in messages. */
static rt_status rt_memory_create(const char *who, const char *inputs_name, int64_t n,
                                  const rt_sample_shape *shape, int num_classes, const void *inputs,
                                  const int32_t *labels, rt_dataset **out) {
    if (!out) return rt_error_set(RT_ERR_INVALID_ARG, "%s: out is NULL", who);
    *out = NULL;
    if (n < 0) return rt_error_set(RT_ERR_INVALID_ARG, "%s: n is negative (%lld)", who, (long long)n);
    RT_TRY(rt_sample_shape_check(who, shape));
    if (num_classes < 1)
        return rt_error_set(RT_ERR_INVALID_ARG, "%s: num_classes must be >= 1, got %d", who,
                            num_classes);
    if (n > 0 && (!inputs || !labels))
        return rt_error_set(RT_ERR_INVALID_ARG, "%s: %s is NULL with n = %lld", who,
                            inputs ? "labels" : inputs_name, (long long)n);
    int64_t bad = rt_first_bad_label(labels, n, num_classes);
    if (bad >= 0)
        return rt_error_set(RT_ERR_FORMAT, "%s: label %d at index %lld is outside [0, %d)", who,
                            (int)labels[bad], (long long)bad, num_classes);
    rt_memory_impl *m;
    RT_TRY(rt_memory_alloc(n, shape, &m));
    if (n > 0) {
        memcpy(rt_tensor_data(m->inputs), inputs, rt_tensor_nbytes(m->inputs));
        memcpy(rt_tensor_data(m->labels), labels, rt_tensor_nbytes(m->labels));
    }
    rt_status st = rt_dataset_create(&rt_memory_ops, m, n, shape, num_classes, out);
    if (st != RT_OK) rt_memory_free(m);
    return st;
}

rt_status rt_dataset_from_memory(int64_t n, const rt_sample_shape *shape, int num_classes,
                                 const void *inputs, const int32_t *labels, rt_dataset **out) {
    return rt_memory_create("rt_dataset_from_memory", "inputs", n, shape, num_classes, inputs,
                            labels, out);
}

rt_status rt_dataset_from_arrays(int64_t n, int channels, int height, int width, int num_classes,
                                 const uint8_t *images, const int32_t *labels, rt_dataset **out) {
    if (!out) return rt_error_set(RT_ERR_INVALID_ARG, "rt_dataset_from_arrays: out is NULL");
    *out = NULL;
    if (channels < 1 || channels > RT_DATA_MAX_CHANNELS)
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_dataset_from_arrays: channels must be 1..%d, got %d",
                            RT_DATA_MAX_CHANNELS, channels);
    if (height < 1 || width < 1)
        return rt_error_set(RT_ERR_INVALID_ARG,
                            "rt_dataset_from_arrays: height and width must be >= 1, got %dx%d",
                            height, width);
    const rt_sample_shape shape = {3, {channels, height, width, 0}, RT_U8};
    return rt_memory_create("rt_dataset_from_arrays", "images", n, &shape, num_classes, images,
                            labels, out);
}

rt_status rt_dataset_subset(const rt_dataset *ds, int64_t first, int64_t count, rt_dataset **out) {
    if (!out) return rt_error_set(RT_ERR_INVALID_ARG, "rt_dataset_subset: out is NULL");
    *out = NULL;
    if (!ds) return rt_error_set(RT_ERR_INVALID_ARG, "rt_dataset_subset: ds is NULL");
    if (first < 0 || count < 0 || first > ds->n || count > ds->n - first)
        return rt_error_set(RT_ERR_INVALID_ARG,
                            "rt_dataset_subset: %lld samples from sample %lld are not inside the "
                            "dataset's %lld samples",
                            (long long)count, (long long)first, (long long)ds->n);
    rt_memory_impl *m;
    RT_TRY(rt_memory_alloc(count, &ds->shape, &m));
    const size_t isz = rt_sample_nbytes(&ds->shape);
    unsigned char *dst = rt_tensor_data(m->inputs);
    int32_t *lab = rt_tensor_data(m->labels);
    rt_dataset_arrays a;
    rt_status st = RT_OK;
    if (count > 0 && rt_dataset_arrays_get(ds, &a)) {
        memcpy(dst, (const unsigned char *)a.inputs + (size_t)first * isz, (size_t)count * isz);
        memcpy(lab, a.labels + first, (size_t)count * sizeof(int32_t));
    } else {
        for (int64_t i = 0; i < count && st == RT_OK; i++)
            st = rt_dataset_read(ds, first + i, dst + (size_t)i * isz, &lab[i]);
    }
    if (st == RT_OK) st = rt_dataset_create(&rt_memory_ops, m, count, &ds->shape, ds->num_classes, out);
    if (st != RT_OK) rt_memory_free(m);
    return st;
}

/* ---- statistics ------------------------------------------------------------------ */

rt_status rt_dataset_channel_stats(const rt_dataset *ds, double *mean, double *std) {
    if (!ds || !mean || !std)
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_dataset_channel_stats: %s is NULL",
                            !ds ? "ds" : !mean ? "mean" : "std");
    if (ds->n == 0)
        return rt_error_set(RT_ERR_INVALID_ARG,
                            "rt_dataset_channel_stats: the dataset is empty (no values to average)");
    const int C = ds->channels;
    const bool u8 = ds->shape.dtype == RT_U8;
    const int64_t plane = rt_sample_numel(&ds->shape) / C; /* values per channel per sample */
    const size_t isz = rt_sample_nbytes(&ds->shape);
    rt_dataset_arrays a;
    const bool direct = rt_dataset_arrays_get(ds, &a);
    unsigned char *scratch = NULL;
    if (!direct) {
        const char *prev = rt_mem_set_op("dataset");
        rt_status st = rt_mem_alloc(isz, RT_MEM_DATA, (void **)&scratch);
        rt_mem_set_op(prev);
        RT_TRY(st);
    }
    /* u8: a histogram of the 256 byte values per channel; sums over it in
     * long double (64-bit mantissa) are exact for any dataset that fits in
     * memory. f32: running sums in long double. */
    uint64_t(*hist)[256] = NULL;
    long double s1[RT_DATA_MAX_CHANNELS] = {0}, s2[RT_DATA_MAX_CHANNELS] = {0};
    rt_status st = RT_OK;
    if (u8) {
        hist = calloc((size_t)C, sizeof *hist);
        if (!hist) st = rt_error_set(RT_ERR_OOM, "out of memory for the channel histograms");
    }
    for (int64_t i = 0; i < ds->n && st == RT_OK; i++) {
        const unsigned char *src;
        if (direct) {
            src = (const unsigned char *)a.inputs + (size_t)i * isz;
        } else {
            int32_t label;
            st = rt_dataset_read(ds, i, scratch, &label);
            src = scratch;
        }
        for (int c = 0; c < C && st == RT_OK; c++) {
            if (u8) {
                const uint8_t *p = src + (size_t)(c * plane);
                for (int64_t k = 0; k < plane; k++) hist[c][p[k]]++;
            } else {
                const float *p = (const float *)src + c * plane;
                long double t1 = 0, t2 = 0;
                for (int64_t k = 0; k < plane; k++) {
                    if (!isfinite(p[k])) {
                        st = rt_error_set(RT_ERR_NONFINITE,
                                          "rt_dataset_channel_stats: sample %lld holds %g in channel %d",
                                          (long long)i, (double)p[k], c);
                        break;
                    }
                    t1 += p[k];
                    t2 += (long double)p[k] * p[k];
                }
                s1[c] += t1;
                s2[c] += t2;
            }
        }
    }
    if (st == RT_OK) {
        const long double cnt = (long double)ds->n * (long double)plane;
        for (int c = 0; c < C; c++) {
            if (u8) {
                for (int v = 0; v < 256; v++) {
                    s1[c] += (long double)hist[c][v] * v;
                    s2[c] += (long double)hist[c][v] * v * v;
                }
            }
            long double m = s1[c] / cnt;
            long double var = s2[c] / cnt - m * m;
            if (var < 0) var = 0;
            const long double scale = u8 ? 255.0L : 1.0L;
            mean[c] = (double)(m / scale);
            std[c] = (double)(sqrtl(var) / scale);
        }
    }
    free(hist);
    if (scratch) rt_mem_free(scratch, isz, RT_MEM_DATA);
    return st;
}
