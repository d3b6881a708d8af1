/* In-memory image-classification datasets: N raw u8 images of C x H x W plus
 * one integer class label each.
 *
 * A dataset keeps the images exactly as stored on disk (u8, 0..255, no
 * scaling): conversion to f32, normalisation and augmentation happen per batch
 * in the loader (data/loader.h), as torchvision's transforms do per sample.
 * Loading a file format is elsewhere (data/mnist.h for MNIST / Fashion-MNIST).
 *
 * Memory: the image and label tensors are booked as RT_MEM_DATA in the tracked
 * allocator (core/mem.h); the small struct itself is plain heap. A dataset is
 * immutable after creation and may be read from any thread; create/destroy
 * book against the calling thread's tracker, so destroy it on the thread that
 * created it. */
#ifndef RT_DATA_DATASET_H
#define RT_DATA_DATASET_H

#include <stdbool.h>
#include <stdint.h>

#include "core/status.h"
#include "core/tensor.h"

/* Most channels a dataset may have (the loader keeps per-channel mean/std in
 * fixed arrays of this size). */
#define RT_DATA_MAX_CHANNELS 8

/* A dataset. All fields are read-only for users. */
typedef struct rt_dataset {
    int64_t n;          /* number of samples (>= 0) */
    int channels;       /* C, 1..RT_DATA_MAX_CHANNELS */
    int height;         /* H, >= 1 */
    int width;          /* W, >= 1 */
    int num_classes;    /* every label is in [0, num_classes) */
    rt_tensor *images;  /* u8 (n, C, H, W), contiguous, RT_MEM_DATA; owned by the dataset */
    rt_tensor *labels;  /* i32 (n), RT_MEM_DATA; owned by the dataset */
} rt_dataset;

/* Bytes of one image: C * H * W (0 for a NULL ds). */
static inline int64_t rt_dataset_image_size(const rt_dataset *ds) {
    return ds ? (int64_t)ds->channels * ds->height * ds->width : 0;
}
/* Borrowed pointer to image i (C*H*W u8 values, channel-major, rows top to
 * bottom, pixels left to right). No bounds check: 0 <= i < n. NULL for a
 * NULL ds (or one without images). */
static inline const uint8_t *rt_dataset_image(const rt_dataset *ds, int64_t i) {
    const uint8_t *base = ds ? (const uint8_t *)rt_tensor_data(ds->images) : NULL;
    return base ? base + i * rt_dataset_image_size(ds) : NULL;
}
/* Label of sample i, in [0, num_classes). No bounds check: 0 <= i < n. -1
 * (no class) for a NULL ds (or one without labels). */
static inline int32_t rt_dataset_label(const rt_dataset *ds, int64_t i) {
    const int32_t *labels = ds ? (const int32_t *)rt_tensor_data(ds->labels) : NULL;
    return labels ? labels[i] : -1;
}

/* Builds a dataset holding copies of `images` (n*C*H*W u8, layout as
 * rt_dataset_image) and `labels` (n i32). The caller keeps its arrays.
 * n may be 0 (then images and labels may be NULL).
 * On success *out owns a new dataset (free with rt_dataset_destroy); on failure
 * *out is NULL and nothing stays allocated.
 * Errors:
 *   RT_ERR_INVALID_ARG  out NULL; n < 0; channels outside 1..RT_DATA_MAX_CHANNELS;
 *                       height or width < 1; num_classes < 1; images or labels
 *                       NULL while n > 0
 *   RT_ERR_FORMAT       a label outside [0, num_classes) (names the first one)
 *   RT_ERR_OOM          the tensors cannot be allocated */
rt_status rt_dataset_from_arrays(int64_t n, int channels, int height, int width, int num_classes,
                                 const uint8_t *images, const int32_t *labels, rt_dataset **out);

/* A new dataset holding copies of samples [first, first+count) of ds (same
 * C, H, W, num_classes), e.g. a quick subset of Fashion-MNIST for tests.
 * count may be 0. ds is borrowed and may be destroyed independently.
 * Errors: RT_ERR_INVALID_ARG (ds/out NULL, first < 0, count < 0,
 * first + count > ds->n), RT_ERR_OOM. On failure *out is NULL. */
rt_status rt_dataset_subset(const rt_dataset *ds, int64_t first, int64_t count, rt_dataset **out);

/* Per-channel mean and standard deviation of the pixel values scaled to
 * [0, 1] (value / 255, as torchvision's ToTensor produces), over every pixel of
 * every sample: the numbers to give Normalize. Writes ds->channels entries to
 * mean[] and std[]. The std is the population std (divide by the count); with
 * millions of pixels it equals the Bessel-corrected torch.std() to ~1e-8.
 * Computed exactly from a per-channel histogram of the 256 byte values (no
 * rounding drift with size). For the Fashion-MNIST training set this gives
 * mean 0.2860, std 0.3530 (RT_FASHION_MNIST_MEAN / _STD in data/mnist.h).
 * Errors: RT_ERR_INVALID_ARG when an argument is NULL or ds->n == 0. */
rt_status rt_dataset_channel_stats(const rt_dataset *ds, double *mean, double *std);

/* Frees the dataset and its tensors (unbooking RT_MEM_DATA). NULL is a no-op.
 * A loader reading it must be destroyed first. */
void rt_dataset_destroy(rt_dataset *ds);

#endif
