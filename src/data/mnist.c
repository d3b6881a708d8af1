#include "data/mnist.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/mem.h"
#include "data/idx.h"

#define RT_MNIST_CLASSES 10

const char *rt_mnist_default_dir(void) { return "/usr/share/datasets/fashion-mnist"; }

static bool rt_file_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && !S_ISDIR(st.st_mode);
}

/* Reads dir/base.gz or else dir/base: all records (limit < 0) or the first `limit`. */
static rt_status rt_mnist_read(const char *dir, const char *base, const char *what, int64_t limit,
                               rt_idx **out) {
    *out = NULL;
    size_t len = strlen(dir) + strlen(base) + 8;
    char *gz = malloc(len), *plain = malloc(len);
    if (!gz || !plain) {
        free(gz);
        free(plain);
        return rt_error_set(RT_ERR_OOM, "out of memory building a file path");
    }
    const char *sep = (dir[0] && dir[strlen(dir) - 1] == '/') ? "" : "/";
    snprintf(plain, len, "%s%s%s", dir, sep, base);
    snprintf(gz, len, "%s%s%s.gz", dir, sep, base);
    rt_status st;
    const char *path = rt_file_exists(gz) ? gz : rt_file_exists(plain) ? plain : NULL;
    if (path)
        st = limit < 0 ? rt_idx_read(path, out) : rt_idx_read_first(path, limit, out);
    else
        st = rt_error_set(RT_ERR_IO,
                          "MNIST/Fashion-MNIST %s not found: tried %s and %s. Pass --data DIR "
                          "naming the directory that holds the four IDX files, or install "
                          "Debian's package (apt-get install dataset-fashion-mnist), which puts "
                          "them in %s",
                          what, gz, plain, rt_mnist_default_dir());
    free(gz);
    free(plain);
    return st;
}

/* The "mnist" implementation: the image file's buffer (N x H x W u8, read
 * as N x 1 x H x W) and the labels widened to i32, both booked RT_MEM_DATA. */
typedef struct rt_mnist_impl {
    rt_idx *images;
    int32_t *labels;
    size_t label_bytes;
} rt_mnist_impl;

static rt_status rt_mnist_read_sample(const rt_dataset *ds, int64_t i, void *input, int32_t *label) {
    const rt_mnist_impl *m = ds->impl;
    const size_t isz = rt_sample_nbytes(&ds->shape);
    memcpy(input, (const uint8_t *)m->images->data + (size_t)i * isz, isz);
    *label = m->labels[i];
    return RT_OK;
}

static bool rt_mnist_arrays(const rt_dataset *ds, rt_dataset_arrays *out) {
    const rt_mnist_impl *m = ds->impl;
    out->inputs = m->images->data;
    out->labels = m->labels;
    return true;
}

static void rt_mnist_free(rt_mnist_impl *m) {
    if (!m) return;
    rt_idx_destroy(m->images);
    if (m->labels) rt_mem_free(m->labels, m->label_bytes, RT_MEM_DATA);
    free(m);
}

static void rt_mnist_destroy(rt_dataset *ds) { rt_mnist_free(ds->impl); }

static const rt_dataset_ops rt_mnist_ops = {
    .name = "mnist",
    .read = rt_mnist_read_sample,
    .arrays = rt_mnist_arrays,
    .destroy = rt_mnist_destroy,
};

/* Reads the first `limit` records of both files (limit < 0: all). */
static rt_status rt_mnist_open(const char *who, const char *dir, bool train, int64_t limit,
                               rt_dataset **out) {
    if (!out) return rt_error_set(RT_ERR_INVALID_ARG, "%s: out is NULL", who);
    *out = NULL;
    if (!dir)
        return rt_error_set(RT_ERR_INVALID_ARG, "%s: dir is NULL (use rt_mnist_default_dir() for %s)",
                            who, rt_mnist_default_dir());
    const char *split = train ? "train" : "t10k";
    char ibase[64], lbase[64], iwhat[64], lwhat[64];
    snprintf(ibase, sizeof ibase, "%s-images-idx3-ubyte", split);
    snprintf(lbase, sizeof lbase, "%s-labels-idx1-ubyte", split);
    snprintf(iwhat, sizeof iwhat, "%s images", train ? "training" : "test");
    snprintf(lwhat, sizeof lwhat, "%s labels", train ? "training" : "test");

    rt_mnist_impl *m = calloc(1, sizeof *m);
    if (!m) return rt_error_set(RT_ERR_OOM, "out of memory allocating an MNIST dataset");
    rt_idx *labels = NULL;
    const char *prev = rt_mem_set_op("dataset");
    rt_status st = rt_mnist_read(dir, ibase, iwhat, limit, &m->images);
    if (st != RT_OK) goto done;
    st = rt_mnist_read(dir, lbase, lwhat, limit, &labels);
    if (st != RT_OK) goto done;
    const rt_idx *images = m->images;
    if (images->type != RT_IDX_U8 || images->ndim != 3 || images->dims[1] < 1 ||
        images->dims[2] < 1 || images->dims[1] > (1 << 20) || images->dims[2] > (1 << 20)) {
        char dims[128];
        size_t used = 0;
        dims[0] = 0;
        for (int i = 0; i < images->ndim && used < sizeof dims; i++)
            used += (size_t)snprintf(dims + used, sizeof dims - used, "%s%lld", i ? " x " : "",
                                     (long long)(i ? images->dims[i] : images->file_records));
        st = rt_error_set(RT_ERR_FORMAT,
                          "image file %s holds %s %s; MNIST images are u8 N x H x W (e.g. "
                          "60000 x 28 x 28). Is this the right file?",
                          images->path, rt_idx_type_str(images->type), dims);
        goto done;
    }
    st = rt_idx_check_pair(images, labels, RT_MNIST_CLASSES);
    if (st != RT_OK) goto done;

    const int64_t n = images->dims[0];
    m->label_bytes = (size_t)n * sizeof(int32_t);
    st = rt_mem_alloc(m->label_bytes, RT_MEM_DATA, (void **)&m->labels);
    if (st != RT_OK) goto done;
    for (int64_t i = 0; i < n; i++) {
        switch (labels->type) {
        case RT_IDX_U8: m->labels[i] = ((const uint8_t *)labels->data)[i]; break;
        case RT_IDX_I8: m->labels[i] = ((const int8_t *)labels->data)[i]; break;
        case RT_IDX_I16: m->labels[i] = ((const int16_t *)labels->data)[i]; break;
        default: m->labels[i] = ((const int32_t *)labels->data)[i]; break; /* check_pair: integer */
        }
    }
    const rt_sample_shape shape = {3, {1, images->dims[1], images->dims[2], 0}, RT_U8};
    st = rt_dataset_create(&rt_mnist_ops, m, n, &shape, RT_MNIST_CLASSES, out);
done:
    rt_mem_set_op(prev);
    rt_idx_destroy(labels);
    if (st != RT_OK) rt_mnist_free(m);
    return st;
}

rt_status rt_mnist_load(const char *dir, bool train, rt_dataset **out) {
    return rt_mnist_open("rt_mnist_load", dir, train, -1, out);
}

rt_status rt_mnist_load_first(const char *dir, bool train, int64_t max_samples, rt_dataset **out) {
    if (max_samples < 0) {
        if (out) *out = NULL;
        return rt_error_set(RT_ERR_INVALID_ARG,
                            "rt_mnist_load_first: max_samples is %lld, must be >= 0",
                            (long long)max_samples);
    }
    return rt_mnist_open("rt_mnist_load_first", dir, train, max_samples, out);
}
