/* Volumes for 3-D segmentation training: per-volume z-score normalisation,
 * cropping with zero padding, flips, intensity augmentation, and a random
 * patch sampler with foreground oversampling restricted to a region (a slab
 * of the volume, so that another slab can be held out for evaluation).
 *
 * Conventions follow nnU-Net (Isensee et al., Nature Methods 2021; MIC-DKFZ/
 * nnUNet v2: ZScoreNormalization, nnUNetDataLoader3D with
 * oversample_foreground_percent = 0.33, the default data augmentation of
 * nnUNetTrainer), as written in each function's comment; where revtorch
 * differs it says so.
 *
 * Tensors: an image is f32 [C, D, H, W] (data/nifti.h's order: D = k,
 * H = j, W = i), a label map int32 [D, H, W] or [1, D, H, W]. Boxes are
 * given per spatial axis (D, H, W) as [lo, hi) in voxels. Nothing here
 * records autograd history; outputs are booked RT_MEM_DATA. */
#ifndef RT_DATA_PATCHES_H
#define RT_DATA_PATCHES_H

#include <stdbool.h>
#include <stdint.h>

#include "../core/rng.h"
#include "../core/status.h"
#include "../core/tensor.h"

/* Per-channel z-score of image [C, D, H, W] f32 in place: x ← (x − mean)/
 * max(std, 1e-8), statistics in double (population std, as numpy's std in
 * nnU-Net). nonzero_mask false: over every voxel of the channel (nnU-Net's
 * ZScoreNormalization without a mask, its choice for MRI unless cropping to
 * the non-zero region shrank the volume by ≥ 25%). nonzero_mask true:
 * statistics over the voxels whose value in channel 0 is ≠ 0, and the
 * voxels outside that mask set to 0 (nnU-Net's use_mask_for_norm).
 * If mean_out/std_out are not NULL they receive C values each.
 * Errors: RT_ERR_INVALID_ARG (NULL image, meta tensor, an empty mask),
 * RT_ERR_SHAPE (not 4-D), RT_ERR_DTYPE (not f32). */
rt_status rt_volume_zscore(rt_tensor *image, bool nonzero_mask, double *mean_out, double *std_out);

/* Copies box [lo, hi) of the last three axes of t (f32 or int32, rank 3
 * ([D, H, W]) or 4 ([C, D, H, W])) into a new tensor of shape [(C,)
 * hi−lo...] booked RT_MEM_DATA; voxels outside t (lo may be negative, hi
 * beyond the size) are 0, as nnU-Net pads image patches with 0. hi > lo is
 * required on every axis. Errors: RT_ERR_INVALID_ARG (NULL t, lo, hi or out,
 * meta tensor, hi ≤ lo), RT_ERR_SHAPE (rank not 3 or 4), RT_ERR_DTYPE,
 * RT_ERR_OOM. *out is NULL on error. */
rt_status rt_volume_crop(const rt_tensor *t, const int64_t lo[3], const int64_t hi[3], rt_tensor **out);

/* Reverses axis `axis` (0 = D, 1 = H, 2 = W) of the last three axes of t in
 * place (torch.flip(t, dims=[ndim − 3 + axis])); any leading axes (batch,
 * channel) are flipped independently. t f32 or int32 of rank ≥ 3. Flipping
 * twice gives t back. Errors: RT_ERR_INVALID_ARG (NULL t, meta, axis outside
 * 0..2), RT_ERR_SHAPE (rank < 3), RT_ERR_DTYPE. */
rt_status rt_volume_flip(rt_tensor *t, int axis);

/* Intensity augmentation of one sample, nnU-Net's defaults (nnUNetTrainer
 * get_training_transforms; batchgenerators' color augmentations), each
 * applied per channel with its own probability:
 *   brightness  x ← x·m,  m ~ U(0.75, 1.25),                  p = 0.15
 *   contrast    x ← (x − mean)·f + mean, f ~ U(0.75, 1.25), then clipped
 *               to the channel's min and max before (preserve_range), p = 0.15
 *   gamma       x ← ((x − min)/(max − min + 1e-7))^γ·(max − min + 1e-7) + min,
 *               γ ~ U(0.7, 1.5) (γ < 1 and γ > 1 each half the time, as
 *               batchgenerators draws them), then shifted and scaled back to
 *               the channel's mean and std before (retain_stats),  p = 0.3
 * nnU-Net also adds Gaussian noise and blur, low-resolution simulation and
 * an inverted gamma; revtorch does not. x is f32 [C, D, H, W] or [D, H, W]
 * (one channel) and is changed in place; g supplies the random numbers (a
 * fixed number of uniforms per channel, so a run is a pure function of the
 * generator's seed and offset). Errors: RT_ERR_INVALID_ARG (NULL, meta),
 * RT_ERR_SHAPE, RT_ERR_DTYPE. */
rt_status rt_volume_intensity_augment(rt_tensor *x, rt_generator *g);

/* What the patch sampler does. Zero fields are not defaults: fill every one. */
typedef struct rt_patch_options {
    int64_t patch[3];          /* patch size (D, H, W), each ≥ 1 */
    int64_t region_lo[3];      /* the region patches are cut from, [lo, hi) per axis, inside the volume */
    int64_t region_hi[3];
    float foreground_fraction; /* probability that a patch is centred on a foreground voxel (nnU-Net 0.33) */
    bool flip;                 /* random flip of each axis with probability 1/2 (nnU-Net's mirroring) */
    bool intensity;            /* rt_volume_intensity_augment on each image patch */
    uint64_t seed;             /* Philox seed of every draw */
    /* Random permutation of the three spatial axes, one of the six with
     * probability 1/6 each, after the flips (batchgenerators'
     * TransposeAxesTransform): with the flips, every orientation of the
     * cube in 90° steps, so surfaces seen in training at one orientation
     * teach the others (an isotropic volume's sides teach its top). Needs
     * a cubic patch (refused otherwise). Last, so initialisers that stop
     * before it mean off. */
    bool transpose;
} rt_patch_options;

/* Where one patch came from (for tests and logs). */
typedef struct rt_patch_info {
    int64_t start[3];          /* volume coordinates of the patch's voxel 0 (may be < region lo when padded) */
    bool foreground;           /* centred on a foreground voxel */
    bool flipped[3];           /* axes flipped after cropping */
    int axes[3];               /* patch axis a holds the cropped (and flipped) axis axes[a]: {0, 1, 2} unless transposed */
} rt_patch_info;

typedef struct rt_patch_sampler rt_patch_sampler;

/* A sampler over image [C, D, H, W] f32 and labels [D, H, W] or
 * [1, D, H, W] int32 (labels ≥ 0; > 0 is foreground), both borrowed and
 * retained until destroy. Per patch (nnU-Net's nnUNetDataLoader3D, with the
 * probabilistic oversampling variant: each patch independently):
 *   - with probability foreground_fraction, and when the region holds
 *     foreground: pick a foreground class uniformly among those present in
 *     the region, then one of its voxels uniformly; the patch is centred on
 *     it (start = voxel − patch/2), moved to stay inside the region where
 *     the patch fits, so it always contains the voxel;
 *   - otherwise the start is uniform over the positions where the patch lies
 *     inside the region; on an axis where the patch is larger than the
 *     region the region lies inside the patch, at a uniform offset;
 *   - the patch is cut from the REGION only: voxels outside it (outside the
 *     volume or in the held-out part) are 0 in the image and 0
 *     (background) in the labels;
 *   - then flips, the axis permutation and intensity augmentation when
 *     enabled.
 * The per-class voxel lists of the region (8 bytes per foreground voxel) are
 * booked RT_MEM_DATA. Errors: RT_ERR_INVALID_ARG (NULL arguments, meta
 * tensors, a region outside the volume or empty, patch < 1,
 * foreground_fraction outside [0, 1], negative labels, transpose with a
 * patch that is not a cube), RT_ERR_SHAPE
 * (image and labels differ in D, H, W; naming both shapes), RT_ERR_DTYPE,
 * RT_ERR_OOM. */
rt_status rt_patch_sampler_create(rt_tensor *image, rt_tensor *labels, const rt_patch_options *o,
                                  rt_patch_sampler **out);
void rt_patch_sampler_destroy(rt_patch_sampler *s);

/* Number of foreground voxels (label > 0) in the sampler's region; 0 for NULL. */
int64_t rt_patch_sampler_foreground_voxels(const rt_patch_sampler *s);

/* The next batch: *x [batch, C, pD, pH, pW] f32 and *y [batch, pD, pH, pW]
 * int32, new tensors (RT_MEM_DATA) owned by the caller; info (NULL or
 * `batch` entries) says where each patch came from. Draws come from the
 * sampler's generator in order, so the k-th batch of a sampler is a pure
 * function of (seed, k). Errors: RT_ERR_INVALID_ARG (NULL s, x or y,
 * batch < 1), RT_ERR_OOM. */
rt_status rt_patch_sampler_next(rt_patch_sampler *s, int64_t batch, rt_tensor **x, rt_tensor **y,
                                rt_patch_info *info);

#endif
