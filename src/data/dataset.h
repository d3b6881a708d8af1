/* Datasets: an interface from a sample index to tensors.
 *
 * A dataset holds n samples. Sample i is an input of a fixed shape and dtype,
 * the same for every sample of the dataset (its "sample shape"), plus one
 * integer class label in [0, num_classes):
 *
 *     Fashion-MNIST image   (1, 28, 28)      u8   label 0..9
 *     RGB image patch       (3, 32, 32)      u8
 *     CT volume             (1, 64, 64, 64)  f32
 *     sequence              (C, L)           f32
 *
 * The sample shape includes the channel dimension (dims[0] = C) but not the
 * batch dimension; the loader (data/loader.h) stacks B samples into a
 * (B, dims...) f32 batch. Inputs are u8 (raw 0..255 as stored on disk: the
 * loader scales by 1/255 like torchvision's ToTensor) or f32 (used as they
 * are). Conversion, normalisation and augmentation happen per batch in the
 * loader, not in the dataset.
 *
 * An implementation is a table of functions (rt_dataset_ops) plus its own
 * state (impl), wrapped by rt_dataset_create into an rt_dataset whose header
 * fields (n, channels, num_classes, shape) every user may read. Two ship with
 * the library: in-memory arrays (rt_dataset_from_arrays / _from_memory /
 * _subset, below) and MNIST / Fashion-MNIST (data/mnist.h).
 *
 * Ownership and threads: a dataset owns its impl and frees it in
 * rt_dataset_destroy. Datasets are immutable after creation. rt_dataset_read
 * on one dataset from several threads at once is safe when its
 * implementation says so (both shipped ones are); the loader calls it from
 * one thread only. Create and destroy a dataset on the same thread (tracked
 * bytes are booked against the calling thread's tracker, core/mem.h). */
#ifndef RT_DATA_DATASET_H
#define RT_DATA_DATASET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../core/dtype.h"
#include "../core/status.h"
#include "../core/tensor.h"

/* Most channels a dataset may have (the loader keeps per-channel mean/std in
 * fixed arrays of this size). */
#define RT_DATA_MAX_CHANNELS 8
/* Most dimensions of one sample's input (C plus up to three spatial
 * dimensions); a batch adds one, within RT_MAX_DIMS. */
#define RT_DATA_MAX_SAMPLE_DIMS 4

/* What every input of a dataset looks like. */
typedef struct rt_sample_shape {
    int ndim;                                /* 1..RT_DATA_MAX_SAMPLE_DIMS */
    int64_t dims[RT_DATA_MAX_SAMPLE_DIMS];   /* dims[0] = channels C in 1..RT_DATA_MAX_CHANNELS;
                                                every dim >= 1; entries past ndim are 0 */
    rt_dtype dtype;                          /* RT_U8 or RT_F32 */
} rt_sample_shape;

/* Elements of one input: the product of dims[0..ndim-1]. 0 for a NULL s and
 * for a shape no dataset accepts: ndim outside 1..RT_DATA_MAX_SAMPLE_DIMS, a
 * dim < 1, or more than 2^40 elements (nothing past dims[ndim-1] is read). */
int64_t rt_sample_numel(const rt_sample_shape *s);
/* Bytes of one input: rt_sample_numel * the dtype's size; 0 when
 * rt_sample_numel is 0 (NULL s included) or the dtype is unknown. */
size_t rt_sample_nbytes(const rt_sample_shape *s);

/* An implementation's contiguous in-memory arrays, for loaders that copy
 * rows directly (see rt_dataset_ops.arrays). */
typedef struct rt_dataset_arrays {
    const void *inputs;     /* n inputs back to back, each rt_sample_nbytes bytes laid out like
                               rt_dataset_read's `input` */
    const int32_t *labels;  /* n labels in [0, num_classes) */
} rt_dataset_arrays;

typedef struct rt_dataset rt_dataset;

/* An implementation. `read` is required, the rest optional (NULL). The
 * functions receive the dataset, whose impl field holds the state given to
 * rt_dataset_create. */
typedef struct rt_dataset_ops {
    /* Short name for messages ("memory", "mnist", ...); NULL = "dataset". */
    const char *name;
    /* Writes sample i's input to `input` (rt_sample_nbytes(&ds->shape) bytes,
     * row-major over the sample shape, last index fastest) and its label to
     * *label. The caller has checked 0 <= i < ds->n and that both pointers are
     * valid. May fail (I/O, decoding): return the status with rt_error_set's
     * message; the outputs then hold anything. Must not keep the pointers. */
    rt_status (*read)(const rt_dataset *ds, int64_t i, void *input, int32_t *label);
    /* When the samples lie in memory back to back: fills *out and returns
     * true; the arrays must stay valid and unchanged until destroy. NULL or
     * false: no such arrays, loaders call read per sample. */
    bool (*arrays)(const rt_dataset *ds, rt_dataset_arrays *out);
    /* Frees ds->impl (not ds itself). */
    void (*destroy)(rt_dataset *ds);
} rt_dataset_ops;

/* A dataset. Every field is set by rt_dataset_create and read-only for
 * users; channels, height and width are copies of sample dims for
 * convenience (the plane geometry the loader uses, data/loader.h). */
struct rt_dataset {
    const rt_dataset_ops *ops;
    void *impl;              /* the implementation's state, owned by the dataset */
    int64_t n;               /* number of samples (>= 0) */
    int channels;            /* shape.dims[0] */
    int64_t height;          /* shape.dims[ndim-2] when ndim >= 3, else 1 */
    int64_t width;           /* shape.dims[ndim-1] when ndim >= 2, else 1 */
    int num_classes;         /* every label is in [0, num_classes) */
    rt_sample_shape shape;   /* every input's shape and dtype */
};

/* Wraps an implementation into a new dataset of n samples (n may be 0).
 * impl must be ready: when ops->arrays reports arrays they are checked here
 * (pointers non-NULL while n > 0, every label in range).
 * On success *out owns impl (rt_dataset_destroy calls ops->destroy). On
 * failure *out is NULL and impl stays the caller's, untouched.
 * Errors:
 *   RT_ERR_INVALID_ARG  ops, ops->read, shape or out NULL; n < 0; ndim outside
 *                       1..RT_DATA_MAX_SAMPLE_DIMS; a dim < 1; dims[0] above
 *                       RT_DATA_MAX_CHANNELS; num_classes < 1; an input over
 *                       2^40 elements
 *   RT_ERR_DTYPE        dtype neither RT_U8 nor RT_F32
 *   RT_ERR_FORMAT       arrays whose pointers are NULL, or a label outside
 *                       [0, num_classes) in them (names the first)
 *   RT_ERR_OOM          the header cannot be allocated */
rt_status rt_dataset_create(const rt_dataset_ops *ops, void *impl, int64_t n,
                            const rt_sample_shape *shape, int num_classes, rt_dataset **out);

/* Number of samples (ds->n); 0 for a NULL ds. */
int64_t rt_dataset_size(const rt_dataset *ds);

/* The shape and dtype of every input (ds->shape). For a NULL ds an all-zero
 * shape (ndim 0, so rt_sample_numel and rt_sample_nbytes give 0). */
rt_sample_shape rt_dataset_sample_shape(const rt_dataset *ds);

/* Writes sample i into caller memory: its input to `input`
 * (rt_sample_nbytes(&ds->shape) bytes, layout as rt_dataset_ops.read) and its
 * label to *label. No allocation.
 * Errors: RT_ERR_INVALID_ARG (ds, input or label NULL; i outside [0, n));
 * RT_ERR_FORMAT when the implementation returns a label outside
 * [0, num_classes); whatever the implementation's read returns. */
rt_status rt_dataset_read(const rt_dataset *ds, int64_t i, void *input, int32_t *label);

/* Sample i as a new tensor: *input is (dims...) of the sample shape and
 * dtype, contiguous, booked RT_MEM_DATA and owned by the caller
 * (rt_tensor_release); *label its class. On failure *input is NULL.
 * Errors: as rt_dataset_read; RT_ERR_OOM for the tensor. */
rt_status rt_dataset_get(const rt_dataset *ds, int64_t i, rt_tensor **input, int32_t *label);

/* True, filling *out, when the dataset's samples lie in memory back to back
 * (rt_dataset_ops.arrays); false otherwise or when an argument is NULL.
 * The arrays are borrowed: valid until rt_dataset_destroy. */
bool rt_dataset_arrays_get(const rt_dataset *ds, rt_dataset_arrays *out);

/* Frees the dataset and its implementation's state (ops->destroy). NULL is a
 * no-op. A loader reading it must be destroyed first. */
void rt_dataset_destroy(rt_dataset *ds);

/* ---- in-memory arrays ("memory" implementation) ------------------------------ */

/* A dataset holding copies of `inputs` (n inputs of *shape back to back,
 * rt_sample_nbytes bytes each, layout as rt_dataset_read) and `labels` (n i32
 * in [0, num_classes)). The caller keeps its arrays. n may be 0 (then inputs
 * and labels may be NULL). The copies are two tensors booked RT_MEM_DATA,
 * (n, dims...) of the dtype and i32 (n); rt_dataset_arrays_get exposes them.
 * On success *out owns a new dataset; on failure *out is NULL and nothing
 * stays allocated.
 * Errors: as rt_dataset_create; also RT_ERR_INVALID_ARG when inputs or labels
 * is NULL while n > 0; RT_ERR_FORMAT for a label outside [0, num_classes)
 * (names the first); RT_ERR_OOM for the tensors. */
rt_status rt_dataset_from_memory(int64_t n, const rt_sample_shape *shape, int num_classes,
                                 const void *inputs, const int32_t *labels, rt_dataset **out);

/* rt_dataset_from_memory for u8 images of shape (channels, height, width):
 * `images` holds n * C*H*W bytes, channel-major, rows top to bottom, pixels
 * left to right. Errors: as rt_dataset_from_memory, with `images` for
 * `inputs` (out NULL; images or labels NULL while n > 0; n < 0; channels
 * outside 1..RT_DATA_MAX_CHANNELS; height or width < 1; num_classes < 1:
 * RT_ERR_INVALID_ARG; a label outside [0, num_classes): RT_ERR_FORMAT). */
rt_status rt_dataset_from_arrays(int64_t n, int channels, int height, int width, int num_classes,
                                 const uint8_t *images, const int32_t *labels, rt_dataset **out);

/* A new in-memory dataset holding copies of samples [first, first+count) of
 * ds (same shape, dtype and num_classes), read through the interface (rows
 * copied at once when ds has arrays). count may be 0. ds is borrowed and may
 * be destroyed independently.
 * Errors: RT_ERR_INVALID_ARG (ds/out NULL, first < 0, count < 0,
 * first + count > ds->n); RT_ERR_OOM; whatever ds's read returns. On failure
 * *out is NULL. */
rt_status rt_dataset_subset(const rt_dataset *ds, int64_t first, int64_t count, rt_dataset **out);

/* Per-channel mean and standard deviation of every input value of every
 * sample: the numbers to give Normalize. Channel c is index c of dims[0].
 * u8 inputs are scaled to [0, 1] first (value / 255, as ToTensor does) and
 * the sums are exact (a per-channel histogram of the 256 byte values); f32
 * inputs are used as they are (sums in long double). Writes ds->channels
 * entries to mean[] and std[]. The std is the population std (divide by the
 * count); with millions of values it equals the Bessel-corrected torch.std()
 * to ~1e-8. For the Fashion-MNIST training set this gives mean 0.2860, std
 * 0.3530 (RT_FASHION_MNIST_MEAN / _STD in data/mnist.h). Reads through the
 * interface (straight from the arrays when ds has them).
 * Errors: RT_ERR_INVALID_ARG when an argument is NULL or ds->n == 0;
 * RT_ERR_NONFINITE when an f32 input holds NaN or Inf; RT_ERR_OOM for the
 * one-sample scratch buffer of a dataset without arrays; whatever ds's read
 * returns. */
rt_status rt_dataset_channel_stats(const rt_dataset *ds, double *mean, double *std);

#endif
