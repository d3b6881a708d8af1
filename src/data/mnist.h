/* MNIST / Fashion-MNIST: the four IDX files of LeCun's layout (data/idx.h)
 * as an rt_dataset (data/dataset.h) of implementation "mnist".
 *
 * Fashion-MNIST: H. Xiao, K. Rasul, R. Vollgraf, "Fashion-MNIST: a Novel Image
 * Dataset for Benchmarking Machine Learning Algorithms", arXiv:1708.07747
 * (2017); 60000 training and 10000 test images, 28x28 grey, 10 classes, same
 * file names and format as MNIST. Debian ships it as the package
 * dataset-fashion-mnist, installed to /usr/share/datasets/fashion-mnist. */
#ifndef RT_DATA_MNIST_H
#define RT_DATA_MNIST_H

#include <stdbool.h>
#include <stdint.h>

#include "../core/status.h"
#include "dataset.h"

/* The usual Normalize constants for Fashion-MNIST: mean and std of the
 * training set's pixels scaled to [0, 1] (value / 255), rounded to 4 digits.
 * rt_dataset_channel_stats on the training set reproduces them (the test
 * checks +-0.001): exact values 0.28604..., 0.35302... */
#define RT_FASHION_MNIST_MEAN 0.2860f
#define RT_FASHION_MNIST_STD 0.3530f

/* Where Debian's dataset-fashion-mnist package installs the files:
 * "/usr/share/datasets/fashion-mnist" (a static string, never NULL). */
const char *rt_mnist_default_dir(void);

/* Loads the training split (train = true: "train-images-idx3-ubyte",
 * "train-labels-idx1-ubyte") or the test split (false: "t10k-...") from
 * directory `dir`. For each file the gzip name (NAME.gz) is tried first, then
 * the plain name.
 *
 * The result is a dataset of N samples of shape (1, H, W) u8 (H = W = 28 for
 * (Fashion-)MNIST, pixel values 0..255 unchanged, 0 = background), labels in
 * [0, 10), num_classes 10. It keeps the image file's decoded buffer as is
 * (no copy: rt_dataset_arrays_get exposes it) plus the labels as i32, all
 * booked RT_MEM_DATA: 47 MB for the 60000 training images, and no more than
 * that while loading. Reading it is thread-safe.
 * On success *out owns the dataset (rt_dataset_destroy); on failure *out is
 * NULL, nothing stays allocated, and rt_error_last() explains.
 *
 * Errors:
 *   RT_ERR_INVALID_ARG  dir or out is NULL
 *   RT_ERR_IO           a file exists under neither name: the message lists
 *                       both paths tried and says to pass `--data DIR` or to
 *                       `apt-get install dataset-fashion-mnist`; or a read fails
 *   RT_ERR_FORMAT       a malformed IDX file (see rt_idx_read); images not
 *                       3-D u8; a label outside [0, 10)
 *   RT_ERR_SHAPE        labels not 1-D, or image and label counts differ
 *   RT_ERR_DTYPE        labels not of an integer type
 *   RT_ERR_OOM          out of memory (or over the rt_mem_set_limit budget) */
rt_status rt_mnist_load(const char *dir, bool train, rt_dataset **out);

/* As rt_mnist_load, keeping only the first min(max_samples, N) samples, and
 * reading (decompressing) only those: --train-subset 1000 costs 1/60 of the
 * full load. max_samples may be 0 (an empty dataset); max_samples >= N loads
 * and checks everything exactly as rt_mnist_load. The files are checked as
 * rt_idx_read_first does (their headers must agree; damage in a gzip file
 * after the samples read goes unnoticed).
 * Errors: as rt_mnist_load; RT_ERR_INVALID_ARG when max_samples < 0. */
rt_status rt_mnist_load_first(const char *dir, bool train, int64_t max_samples, rt_dataset **out);

#endif
