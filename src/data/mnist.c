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

/* Reads dir/base.gz or else dir/base. */
static rt_status rt_mnist_read(const char *dir, const char *base, const char *what, rt_idx **out) {
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
    if (rt_file_exists(gz))
        st = rt_idx_read(gz, out);
    else if (rt_file_exists(plain))
        st = rt_idx_read(plain, out);
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

rt_status rt_mnist_load(const char *dir, bool train, rt_dataset **out) {
    if (!out) return rt_error_set(RT_ERR_INVALID_ARG, "rt_mnist_load: out is NULL");
    *out = NULL;
    if (!dir)
        return rt_error_set(RT_ERR_INVALID_ARG,
                            "rt_mnist_load: dir is NULL (use rt_mnist_default_dir() for %s)",
                            rt_mnist_default_dir());
    const char *split = train ? "train" : "t10k";
    char ibase[64], lbase[64], iwhat[64], lwhat[64];
    snprintf(ibase, sizeof ibase, "%s-images-idx3-ubyte", split);
    snprintf(lbase, sizeof lbase, "%s-labels-idx1-ubyte", split);
    snprintf(iwhat, sizeof iwhat, "%s images", train ? "training" : "test");
    snprintf(lwhat, sizeof lwhat, "%s labels", train ? "training" : "test");

    rt_idx *images = NULL, *labels = NULL;
    int32_t *lab = NULL;
    size_t lab_bytes = 0;
    rt_status st = rt_mnist_read(dir, ibase, iwhat, &images);
    if (st != RT_OK) goto done;
    st = rt_mnist_read(dir, lbase, lwhat, &labels);
    if (st != RT_OK) goto done;
    if (images->type != RT_IDX_U8 || images->ndim != 3 || images->dims[1] < 1 ||
        images->dims[2] < 1 || images->dims[1] > (1 << 20) || images->dims[2] > (1 << 20)) {
        char dims[128];
        size_t used = 0;
        dims[0] = 0;
        for (int i = 0; i < images->ndim && used < sizeof dims; i++)
            used += (size_t)snprintf(dims + used, sizeof dims - used, "%s%lld", i ? " x " : "",
                                     (long long)images->dims[i]);
        st = rt_error_set(RT_ERR_FORMAT,
                          "image file %s holds %s %s; MNIST images are u8 N x H x W (e.g. "
                          "60000 x 28 x 28). Is this the right file?",
                          images->path, rt_idx_type_str(images->type), dims);
        goto done;
    }
    st = rt_idx_check_pair(images, labels, RT_MNIST_CLASSES);
    if (st != RT_OK) goto done;

    const int64_t n = images->dims[0];
    lab_bytes = (size_t)n * sizeof(int32_t);
    st = rt_mem_alloc(lab_bytes, RT_MEM_DATA, (void **)&lab);
    if (st != RT_OK) goto done;
    for (int64_t i = 0; i < n; i++) {
        switch (labels->type) {
        case RT_IDX_U8: lab[i] = ((const uint8_t *)labels->data)[i]; break;
        case RT_IDX_I8: lab[i] = ((const int8_t *)labels->data)[i]; break;
        case RT_IDX_I16: lab[i] = ((const int16_t *)labels->data)[i]; break;
        default: lab[i] = ((const int32_t *)labels->data)[i]; break; /* check_pair: integer */
        }
    }
    rt_idx_destroy(labels);
    labels = NULL;
    st = rt_dataset_from_arrays(n, 1, (int)images->dims[1], (int)images->dims[2],
                                RT_MNIST_CLASSES, (const uint8_t *)images->data, lab, out);
done:
    if (lab) rt_mem_free(lab, lab_bytes, RT_MEM_DATA);
    rt_idx_destroy(images);
    rt_idx_destroy(labels);
    return st;
}
