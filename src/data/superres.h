/* Single-image super-resolution data from one volume: axial slices of an MRI
 * volume as high-resolution (HR) targets, the same slices reduced by an
 * integer factor as low-resolution (LR) inputs, a split of the axial slices
 * into a training part and a held-out part with a gap between them, and a
 * patch sampler over the training part (EDSR's training recipe: random LR
 * patches with the matching HR patch, random flips and 90° rotations; Lim et
 * al., "Enhanced Deep Residual Networks for Single Image Super-Resolution",
 * CVPRW 2017, sec. 4.2).
 *
 * Degradation: LR = the mean of each scale×scale block of HR, i.e.
 * torch.nn.functional.avg_pool2d(hr, scale) — a voxel `scale` times larger
 * in-plane that integrates the signal over its area, as a lower-resolution
 * acquisition of the same slab does (partial-volume averaging). revtorch
 * does not use DIV2K's bicubic downsampling: DIV2K's LR images come from
 * MATLAB's imresize, which widens its bicubic kernel by the scale to
 * antialias; torch's interpolate(mode="bicubic", antialias=False) does not,
 * so "bicubic ×0.5" through it would alias and would not be DIV2K's
 * degradation either. Block averaging is an antialiasing filter, matches the
 * physics, and puts LR pixel i's centre at HR coordinate s·i + (s − 1)/2, the
 * grid interpolate(..., align_corners=False) assumes when upsampling back.
 *
 * Tensors: a volume is f32 [C, D, H, W] (data/nifti.h's order: D = k, the
 * axial index; H = j; W = i); slices and patches are f32 [N, C, h, w]
 * (NCHW), booked RT_MEM_DATA. Nothing here records autograd history. */
#ifndef RT_DATA_SUPERRES_H
#define RT_DATA_SUPERRES_H

#include <stdbool.h>
#include <stdint.h>

#include "../core/rng.h"
#include "../core/status.h"
#include "../core/tensor.h"

/* Scales volume [C, D, H, W] f32 in place to [0, 1] by a robust maximum:
 * q = the `percentile`-th percentile (0 < percentile ≤ 100, nearest rank:
 * the value at index ⌈p/100·n⌉ − 1 of the n sorted values) of the voxels
 * > 0 of all channels, then x ← min(max(x / q, 0), 1). A robust maximum
 * rather than the maximum, so that a few bright voxels (vessels, fat) do not
 * compress the brain's range; PSNR and SSIM then use data range 1. The
 * default of `revtorch superres` is 99.9. *q_out (may be NULL) receives q.
 * Errors: RT_ERR_INVALID_ARG (NULL volume, meta tensor, percentile outside
 * (0, 100], no voxel > 0), RT_ERR_SHAPE (not 4-D), RT_ERR_DTYPE (not f32),
 * RT_ERR_OOM. */
rt_status rt_sr_normalize(rt_tensor *volume, double percentile, double *q_out);

/* How the axial slices (D axis) are split. */
typedef struct rt_sr_split {
    int64_t train_lo, train_hi;     /* training slices [train_lo, train_hi) */
    int64_t heldout_lo, heldout_hi; /* held-out slices [heldout_lo, heldout_hi) */
} rt_sr_split;

/* Splits `depth` axial slices: the top round(holdout·depth) slices are held
 * out ([depth − n_held, depth)), the `gap` slices just below them are used
 * by neither part, the rest from 0 are for training. So no training patch
 * shares a slice with an evaluated one, and neighbouring slices (nearly the
 * same image at 0.5 mm) are kept `gap` apart. Errors: RT_ERR_INVALID_ARG
 * (NULL out, depth < 3, holdout outside (0, 1), gap < 0, or a split that
 * leaves either part empty: the message gives the counts). */
rt_status rt_sr_split_slices(int64_t depth, double holdout, int64_t gap, rt_sr_split *out);

/* The block mean of hr [N, C, H, W] f32 (H and W multiples of scale) into a
 * new [N, C, H/scale, W/scale] tensor *lr (RT_MEM_DATA): F.avg_pool2d(hr,
 * scale), the sum in f32 in row order of the block. Errors: RT_ERR_INVALID_ARG
 * (NULL, meta, scale < 1), RT_ERR_SHAPE (not 4-D, or H or W not a multiple
 * of scale: the message gives both), RT_ERR_DTYPE, RT_ERR_OOM. */
rt_status rt_sr_downsample(const rt_tensor *hr, int64_t scale, rt_tensor **lr);

/* Axial slice k of volume [C, D, H, W] as a new [1, C, H', W'] tensor
 * (RT_MEM_DATA), H' and W' rounded down to multiples of scale (the last
 * H − H' rows and W − W' columns are dropped, so that the slice downsamples
 * exactly). Errors: RT_ERR_INVALID_ARG (NULL, meta, k outside [0, D),
 * scale < 1 or larger than H or W), RT_ERR_SHAPE, RT_ERR_DTYPE, RT_ERR_OOM. */
rt_status rt_sr_slice(const rt_tensor *volume, int64_t k, int64_t scale, rt_tensor **hr);

/* Fraction of slice k's voxels (channel 0) whose value is > threshold; NaN
 * for a NULL/meta/non-4-D/non-f32 volume or k outside [0, D). */
double rt_sr_slice_foreground(const rt_tensor *volume, int64_t k, float threshold);

/* Up to `count` held-out slices for evaluation: among the slices of
 * [split->heldout_lo, heldout_hi) whose foreground (rt_sr_slice_foreground
 * with `threshold`) is ≥ min_fraction, `count` evenly spaced ones (the i-th
 * at index ⌊(i + 0.5)·m/count⌋ of the m eligible slices, in increasing k);
 * all m when m < count. ks receives them, *n their number (0 when no slice
 * is eligible; not an error). Errors: RT_ERR_INVALID_ARG (NULL arguments,
 * meta volume, count < 1, a split outside the volume), RT_ERR_SHAPE,
 * RT_ERR_DTYPE. */
rt_status rt_sr_eval_slices(const rt_tensor *volume, const rt_sr_split *split, int64_t count, float threshold,
                            double min_fraction, int64_t *ks, int64_t *n);

/* What the patch sampler does. Zero fields are not defaults: fill every one. */
typedef struct rt_sr_patch_options {
    int64_t scale;          /* ≥ 1 (2 for ×2) */
    int64_t patch;          /* LR patch side ≥ 1; the HR patch is patch·scale */
    int64_t slice_lo, slice_hi; /* axial slices [lo, hi) patches come from */
    bool augment;           /* EDSR's: horizontal flip, vertical flip, transpose (90° rotation with a
                               flip), each with probability 1/2 */
    float threshold;        /* a voxel is foreground when > threshold (after rt_sr_normalize) */
    float min_foreground;   /* a patch with a smaller foreground fraction of its HR voxels is drawn again
                               (up to 100 draws, then the last one is kept); 0 keeps every patch */
    uint64_t seed;          /* Philox seed of every draw */
} rt_sr_patch_options;

/* Where one patch came from (for tests and logs). */
typedef struct rt_sr_patch_info {
    int64_t k, y, x;        /* slice, HR row and column of the patch's top-left voxel (multiples of scale) */
    bool hflip, vflip, transpose;
    int draws;              /* draws it took (1 unless background patches were skipped) */
} rt_sr_patch_info;

typedef struct rt_sr_sampler rt_sr_sampler;

/* A sampler over volume [C, D, H, W] f32 (borrowed and retained until
 * destroy). Per patch: slice k uniform in [slice_lo, slice_hi), the LR
 * patch's top-left corner uniform over the positions of the slice's LR grid
 * where the patch fits, the HR patch the matching (patch·scale)² block (so
 * LR = rt_sr_downsample(HR) exactly, the crop of the whole downsampled
 * slice); redrawn while its foreground fraction is below min_foreground;
 * then the same flips/transpose on both. Errors: RT_ERR_INVALID_ARG (NULL
 * arguments, meta volume, scale < 1, patch < 1, a patch·scale larger than
 * the slice, slices outside the volume or empty, threshold not finite,
 * min_foreground outside [0, 1]), RT_ERR_SHAPE, RT_ERR_DTYPE, RT_ERR_OOM. */
rt_status rt_sr_sampler_create(rt_tensor *volume, const rt_sr_patch_options *o, rt_sr_sampler **out);
void rt_sr_sampler_destroy(rt_sr_sampler *s);

/* The next batch: *lr [batch, C, patch, patch] and *hr [batch, C,
 * patch·scale, patch·scale], new f32 tensors (RT_MEM_DATA) owned by the
 * caller; info (NULL or `batch` entries) says where each came from. Draws
 * come from the sampler's generator in order, so the k-th batch is a pure
 * function of (seed, k). Errors: RT_ERR_INVALID_ARG (NULL s, lr or hr,
 * batch < 1), RT_ERR_OOM. */
rt_status rt_sr_sampler_next(rt_sr_sampler *s, int64_t batch, rt_tensor **lr, rt_tensor **hr,
                             rt_sr_patch_info *info);

#endif
