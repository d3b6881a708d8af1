/* Mini-batch loader over an rt_dataset (data/dataset.h): shuffling,
 * augmentation, conversion to f32 and normalisation, one batch at a time
 * (torch.utils.data.DataLoader with torchvision transforms, single process).
 *
 * Samples come through the dataset interface: when the dataset exposes its
 * samples as contiguous in-memory arrays (rt_dataset_arrays_get) the loader
 * reads the rows straight from them; otherwise it calls rt_dataset_read once
 * per sample, on the thread calling rt_loader_next, into a staging buffer.
 *
 * A sample of shape (C, ..., H, W) is treated as C channels of H x W planes
 * (a (C, D, H, W) volume: D planes per channel; (C, L): one 1 x L plane; (C):
 * C single values). Per sample, in this order (torchvision's usual training
 * pipeline Compose([RandomCrop(H, padding=P), RandomHorizontalFlip(),
 * ToTensor(), Normalize(mean, std)])):
 *
 *   1. RandomCrop((H, W), padding=P)  (torchvision.transforms.RandomCrop, fill=0,
 *      padding_mode="constant"): pad the RAW input with P zeros on every side
 *      of each plane, then cut an H x W window at top i, left j, drawn
 *      uniformly from 0..2P each (the same window for every plane of the
 *      sample). Output (y, x) = raw(y + i - P, x + j - P), or 0 where that
 *      falls outside the plane. Because padding happens before
 *      ToTensor/Normalize (as in torchvision), a padded value becomes
 *      (0 - mean[c]) / std[c], NOT 0. P = 0 disables the crop.
 *   2. RandomHorizontalFlip(p=0.5)  (torchvision.transforms.RandomHorizontalFlip):
 *      with probability 1/2 mirror every plane left-right: out(y, x) = in(y, W-1-x).
 *   3. ToTensor: u8 inputs x = (float)v / 255.0f (f32 in [0, 1]); f32 inputs
 *      are taken as they are.
 *   4. Normalize(mean, std)  (torchvision.transforms.Normalize): per channel
 *      (x - mean[c]) / std[c], in f32 in that order, so every value is
 *      bit-identical to torchvision's for the same crop/flip.
 *
 * Crop and flip need samples with at least 3 dims (C, H, W), so that the
 * last two are a plane.
 *
 * Randomness (Philox4x32-10, core/rng.h; key = the 64-bit seed):
 *   - Order: with shuffle, epoch e visits the samples in a Fisher-Yates
 *     permutation drawn from the Philox stream with counter
 *     (block, e, "shuf"); without shuffle, in index order 0..n-1. The order is a
 *     pure function of (seed, e): resuming at epoch e reproduces it.
 *   - Augmentation of dataset sample k in epoch e comes from the single Philox
 *     block with counter (k, e, "aug "): word 0 -> top i, word 1 -> left j,
 *     word 2 -> flip. It is therefore the same whatever the batch size, the
 *     position of k in the shuffled order, the thread count, or where a
 *     resumed run started.
 *   The distribution matches torch's; the actual numbers do not (torch uses
 *   mt19937 on CPU), so runs are reproducible within revtorch, not vs PyTorch.
 *
 * Memory: each batch is two new tensors booked RT_MEM_DATA, owned by the
 * caller; the loader itself books its visiting order (8 bytes per sample)
 * and, for a dataset without arrays, a staging buffer of B inputs (B *
 * rt_sample_nbytes) as RT_MEM_DATA until destroyed. Not thread-safe: one
 * loader per thread; the per-sample conversion of a batch may run on OpenMP
 * threads (no allocation there, no dataset call). */
#ifndef RT_DATA_LOADER_H
#define RT_DATA_LOADER_H

#include <stdbool.h>
#include <stdint.h>

#include "../core/status.h"
#include "../core/tensor.h"
#include "dataset.h"

/* Largest epoch number (epochs are 0-based; the epoch is a 32-bit Philox
 * counter word). */
#define RT_LOADER_MAX_EPOCH 0x7FFFFFFF

typedef struct rt_loader_options {
    int64_t batch_size;                /* B >= 1 samples per batch */
    bool shuffle;                      /* a new permutation every epoch (default false) */
    uint64_t seed;                     /* Philox key for order and augmentation (default 0) */
    bool drop_last;                    /* drop the final partial batch (default false: it is
                                          returned with its true size n % B) */
    float mean[RT_DATA_MAX_CHANNELS];  /* Normalize mean per channel, in [0,1] units for u8
                                          inputs, input units for f32 (default 0) */
    float std[RT_DATA_MAX_CHANNELS];   /* Normalize std per channel, > 0 (default 1) */
    int crop_padding;                  /* P of RandomCrop(H, padding=P); 0 = no crop (default) */
    bool hflip;                        /* RandomHorizontalFlip(p=0.5) (default false) */
    /* Data parallelism: with shard_count > 1 every batch is only this rank's
     * share of the global batch of B (or the last batch's b) samples: samples
     * ⌊b·r/R⌋ .. ⌊b·(r+1)/R⌋ − 1 of it, r = shard_rank, R = shard_count (the
     * split of dist/dist.h's rt_dist_shard), so the ranks together see the
     * one-process order. 0 or 1: the whole batch (default 0). */
    int shard_rank, shard_count;
} rt_loader_options;

/* Defaults: batch_size 64, no shuffle, seed 0, keep the last partial batch,
 * mean 0 / std 1 on every channel (output = v / 255 for u8, plain ToTensor;
 * the value itself for f32), no augmentation. For Fashion-MNIST set mean[0] = RT_FASHION_MNIST_MEAN and
 * std[0] = RT_FASHION_MNIST_STD (data/mnist.h). */
rt_loader_options rt_loader_options_default(void);

typedef struct rt_loader rt_loader;

/* The random augmentation drawn for one sample in one epoch (see the header
 * comment): top/left are torchvision's i, j in the padded image, 0..2P (P when
 * cropping is off, i.e. no shift); the content moves by (P - top, P - left). */
typedef struct rt_augment {
    int top;
    int left;
    bool flip;
} rt_augment;

/* Creates a loader over `ds` (borrowed: it must outlive the loader and not
 * change) with options *opt (copied), positioned at epoch 0, batch 0.
 * On success *out owns it (rt_loader_destroy); on failure *out is NULL.
 * Errors:
 *   RT_ERR_INVALID_ARG  ds, opt or out NULL; batch_size < 1; shard_count < 0 or
 *                       shard_rank outside 0..shard_count-1 (with shard_count > 1); a std[c] that is
 *                       not finite and > 0 or a mean[c] not finite (for
 *                       c < ds->channels); crop_padding < 0 or > 65535;
 *                       crop or flip on samples of fewer than 3 dims; a
 *                       plane (H or W) over 2^30; shuffle with more than
 *                       2^32 - 1 samples; a staging buffer over 2^62 bytes
 *   RT_ERR_OOM          the order buffer (8 bytes per sample) or the staging
 *                       buffer cannot be booked */
rt_status rt_loader_create(const rt_dataset *ds, const rt_loader_options *opt, rt_loader **out);

/* Frees the loader and its order buffer. NULL is a no-op. Batches already
 * returned stay valid (the caller owns them). */
void rt_loader_destroy(rt_loader *l);

/* Number of batches in one epoch: ceil(n / B), or floor(n / B) with drop_last;
 * 0 for a NULL loader. */
int64_t rt_loader_batches_per_epoch(const rt_loader *l);

/* Current epoch and index of the batch the next rt_loader_next returns (equal
 * to rt_loader_batches_per_epoch at the end of the epoch). Save both to resume
 * with rt_loader_seek. Both are 0 for a NULL loader. */
int64_t rt_loader_epoch(const rt_loader *l);
int64_t rt_loader_batch_index(const rt_loader *l);

/* Returns the next batch of the current epoch:
 *   *images  new f32 (b, dims...) tensor for samples of shape (dims...), e.g.
 *            (b, C, H, W), augmented and normalised (see above)
 *   *labels  new i32 (b) tensor, the class of each sample
 * with b = B, except the final batch of an epoch which has n % B samples when
 * drop_last is false (with shard_count > 1: this rank's share of it). Both are booked RT_MEM_DATA and owned by the caller
 * (rt_tensor_release). *end_of_epoch is false.
 * When the epoch is exhausted: *end_of_epoch = true, *images = *labels = NULL,
 * RT_OK; further calls keep answering that until rt_loader_reset/seek.
 * Errors: RT_ERR_INVALID_ARG (a NULL argument), RT_ERR_OOM (batch tensors),
 * or what rt_dataset_read returned for a sample of the batch (its message
 * kept); on error the outputs are NULL and the position does not move. */
rt_status rt_loader_next(rt_loader *l, rt_tensor **images, rt_tensor **labels, bool *end_of_epoch);

/* Starts epoch `epoch` (0..RT_LOADER_MAX_EPOCH) at its first batch; its order
 * and augmentations depend only on (seed, epoch). The usual loop is
 *     for (e = 0; e < E; e++) { rt_loader_reset(l, e); while (next, !end) ...; }
 * Errors: RT_ERR_INVALID_ARG (l NULL, epoch out of range). */
rt_status rt_loader_reset(rt_loader *l, int64_t epoch);

/* As rt_loader_reset, but positioned at batch `batch_index` of that epoch
 * (0..rt_loader_batches_per_epoch; the upper bound means "epoch finished"), so
 * a run resumed from a checkpoint taken after batch b-1 returns exactly the
 * batches an uninterrupted run would. O(n) when the epoch changes (it builds
 * the permutation), O(1) otherwise.
 * Errors: RT_ERR_INVALID_ARG (l NULL, epoch or batch_index out of range). */
rt_status rt_loader_seek(rt_loader *l, int64_t epoch, int64_t batch_index);

/* Borrowed view of the current epoch's visiting order: n dataset indices;
 * batch b holds entries [b*B, min((b+1)*B, n)). Valid until the next
 * reset/seek/destroy. NULL + RT_ERR_INVALID_ARG for a NULL loader. */
const int64_t *rt_loader_order(const rt_loader *l);

/* The augmentation that sample `index` (a dataset index) gets in `epoch`
 * (pure function of seed, epoch, index and the options). For tests and
 * debugging. Errors: RT_ERR_INVALID_ARG (NULL, index or epoch out of range). */
rt_status rt_loader_augment_params(const rt_loader *l, int64_t epoch, int64_t index,
                                   rt_augment *out);

#endif
