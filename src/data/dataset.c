#include "data/dataset.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* New dataset with uninitialised tensors of the given geometry. */
static rt_status rt_dataset_alloc(int64_t n, int channels, int height, int width, int num_classes,
                                  rt_dataset **out) {
    rt_dataset *ds = calloc(1, sizeof *ds);
    if (!ds) return rt_error_set(RT_ERR_OOM, "out of memory allocating a dataset header");
    ds->n = n;
    ds->channels = channels;
    ds->height = height;
    ds->width = width;
    ds->num_classes = num_classes;
    const int64_t ishape[4] = {n, channels, height, width};
    const int64_t lshape[1] = {n};
    const char *prev = rt_mem_set_op("dataset");
    ds->images = rt_tensor_create(4, ishape, RT_U8, RT_DEVICE_CPU, RT_MEM_DATA);
    if (ds->images) ds->labels = rt_tensor_create(1, lshape, RT_I32, RT_DEVICE_CPU, RT_MEM_DATA);
    rt_mem_set_op(prev);
    if (!ds->labels) {
        rt_status st = rt_error_set(RT_ERR_OOM,
                                    "cannot allocate a dataset of %lld images of %dx%dx%d u8 "
                                    "(%.1f MiB, booked as DATA): %s",
                                    (long long)n, channels, height, width,
                                    (double)n * channels * height * width / 1048576.0,
                                    rt_error_last());
        rt_dataset_destroy(ds);
        return st;
    }
    *out = ds;
    return RT_OK;
}

rt_status rt_dataset_from_arrays(int64_t n, int channels, int height, int width, int num_classes,
                                 const uint8_t *images, const int32_t *labels, rt_dataset **out) {
    if (!out) return rt_error_set(RT_ERR_INVALID_ARG, "rt_dataset_from_arrays: out is NULL");
    *out = NULL;
    if (n < 0)
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_dataset_from_arrays: n is negative (%lld)",
                            (long long)n);
    if (channels < 1 || channels > RT_DATA_MAX_CHANNELS)
        return rt_error_set(RT_ERR_INVALID_ARG,
                            "rt_dataset_from_arrays: channels must be 1..%d, got %d",
                            RT_DATA_MAX_CHANNELS, channels);
    if (height < 1 || width < 1)
        return rt_error_set(RT_ERR_INVALID_ARG,
                            "rt_dataset_from_arrays: height and width must be >= 1, got %dx%d",
                            height, width);
    if (num_classes < 1)
        return rt_error_set(RT_ERR_INVALID_ARG,
                            "rt_dataset_from_arrays: num_classes must be >= 1, got %d", num_classes);
    if (n > 0 && (!images || !labels))
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_dataset_from_arrays: %s is NULL with n = %lld",
                            images ? "labels" : "images", (long long)n);
    for (int64_t i = 0; i < n; i++)
        if (labels[i] < 0 || labels[i] >= num_classes)
            return rt_error_set(RT_ERR_FORMAT,
                                "rt_dataset_from_arrays: label %d at index %lld is outside [0, %d)",
                                (int)labels[i], (long long)i, num_classes);
    rt_dataset *ds;
    RT_TRY(rt_dataset_alloc(n, channels, height, width, num_classes, &ds));
    if (n > 0) {
        memcpy(rt_tensor_data(ds->images), images, rt_tensor_nbytes(ds->images));
        memcpy(rt_tensor_data(ds->labels), labels, rt_tensor_nbytes(ds->labels));
    }
    *out = ds;
    return RT_OK;
}

rt_status rt_dataset_subset(const rt_dataset *ds, int64_t first, int64_t count, rt_dataset **out) {
    if (!out) return rt_error_set(RT_ERR_INVALID_ARG, "rt_dataset_subset: out is NULL");
    *out = NULL;
    if (!ds) return rt_error_set(RT_ERR_INVALID_ARG, "rt_dataset_subset: ds is NULL");
    if (first < 0 || count < 0 || first > ds->n || count > ds->n - first)
        return rt_error_set(RT_ERR_INVALID_ARG,
                            "rt_dataset_subset: samples [%lld, %lld) are not inside the dataset's "
                            "%lld samples",
                            (long long)first, (long long)first + count, (long long)ds->n);
    rt_dataset *sub;
    RT_TRY(rt_dataset_alloc(count, ds->channels, ds->height, ds->width, ds->num_classes, &sub));
    if (count > 0) {
        const int64_t isz = rt_dataset_image_size(ds);
        memcpy(rt_tensor_data(sub->images), rt_dataset_image(ds, first), (size_t)(count * isz));
        memcpy(rt_tensor_data(sub->labels), (const int32_t *)rt_tensor_data(ds->labels) + first,
               (size_t)count * sizeof(int32_t));
    }
    *out = sub;
    return RT_OK;
}

rt_status rt_dataset_channel_stats(const rt_dataset *ds, double *mean, double *std) {
    if (!ds || !mean || !std)
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_dataset_channel_stats: %s is NULL",
                            !ds ? "ds" : !mean ? "mean" : "std");
    if (ds->n == 0)
        return rt_error_set(RT_ERR_INVALID_ARG,
                            "rt_dataset_channel_stats: the dataset is empty (no pixels to average)");
    const int64_t plane = (int64_t)ds->height * ds->width;
    for (int c = 0; c < ds->channels; c++) {
        uint64_t hist[256] = {0};
        for (int64_t i = 0; i < ds->n; i++) {
            const uint8_t *p = rt_dataset_image(ds, i) + c * plane;
            for (int64_t k = 0; k < plane; k++) hist[p[k]]++;
        }
        /* Sums over the histogram in long double (64-bit mantissa): exact for
         * any dataset that fits in memory. */
        long double cnt = (long double)ds->n * (long double)plane, s1 = 0, s2 = 0;
        for (int v = 0; v < 256; v++) {
            s1 += (long double)hist[v] * v;
            s2 += (long double)hist[v] * v * v;
        }
        long double m = s1 / cnt;
        long double var = s2 / cnt - m * m;
        if (var < 0) var = 0;
        mean[c] = (double)(m / 255.0L);
        std[c] = (double)(sqrtl(var) / 255.0L);
    }
    return RT_OK;
}

void rt_dataset_destroy(rt_dataset *ds) {
    if (!ds) return;
    rt_tensor_release(ds->images);
    rt_tensor_release(ds->labels);
    free(ds);
}
