/* Sliding-window inference over a whole volume with Gaussian importance
 * weighting, as nnU-Net (nnunetv2/inference/sliding_window_prediction.py:
 * compute_steps_for_sliding_window, compute_gaussian) and MONAI
 * (monai/inferers/utils.py, sliding_window_inference with mode="gaussian")
 * do it: windows of the training patch size spaced by patch·(1 − overlap)
 * (the last one ending at the border), each window's softmax probabilities
 * multiplied by a Gaussian that favours the window's centre, summed, and
 * divided by the summed weights. */
#ifndef RT_TRAIN_SLIDING_WINDOW_H
#define RT_TRAIN_SLIDING_WINDOW_H

#include <stdbool.h>
#include <stdint.h>

#include "../nn/module.h"

typedef struct rt_sliding_window_options {
    int64_t patch[3];  /* window size (D, H, W), each ≥ 1 */
    float overlap;     /* in [0, 1): 0.5 is nnU-Net's tile_step_size 0.5 */
    float sigma_scale; /* σ = sigma_scale·patch per axis; 0.125 in nnU-Net and MONAI */
    int64_t batch;     /* windows per forward, ≥ 1 */
    /* Called once with done = 0 before the first window, then after each
     * forward with the windows done so far and their total (a whole volume
     * at small patches is hundreds of windows, minutes of work); NULL:
     * silent. Runs on the calling thread. */
    void (*progress)(void *user, int64_t done, int64_t total);
    void *progress_user;
    /* Test-time mirroring (nnU-Net's use_mirroring over all three axes):
     * each window's softmax is the mean over the 8 combinations of
     * flipped spatial axes (flipped in, flipped back out), 8 forwards per
     * window. For a net trained with flips. */
    bool mirror;
} rt_sliding_window_options;

/* {patch 0, overlap 0.5, sigma_scale 0.125, batch 1, no progress, no
 * mirroring}: set patch. */
rt_sliding_window_options rt_sliding_window_defaults(void);

/* Window starts on one axis of `size` voxels (nnU-Net's
 * compute_steps_for_sliding_window): size ≤ patch gives one window at 0
 * (it reaches beyond the volume, which is zero-padded); else
 * n = ⌈(size − patch)/(patch·(1 − overlap))⌉ + 1 windows at
 * round(i·(size − patch)/(n − 1)), i = 0..n−1. Writes at most `max` starts
 * and the count to *n. Errors: RT_ERR_INVALID_ARG (NULL, size or patch < 1,
 * overlap outside [0, 1), more than max windows). */
rt_status rt_sliding_window_starts(int64_t size, int64_t patch, float overlap, int64_t *starts, int64_t max,
                                   int64_t *n);

/* The importance map, a new f32 [pD, pH, pW] tensor (RT_MEM_DATA):
 *   w(d, h, w) = Π_axes exp(−(i − c)²/(2σ²)),  c = (p − 1)/2,  σ = sigma_scale·p,
 * divided by its maximum (1 at the centre), then clamped below at 1e-3 so no
 * voxel's weight sum is near 0 (MONAI clamps its map's minimum the same way;
 * nnU-Net replaces zeros by the smallest non-zero value). nnU-Net builds the
 * map by Gaussian-filtering a delta at p/2; the closed form here is the same
 * curve centred on the window's middle. Errors: RT_ERR_INVALID_ARG (NULL,
 * patch < 1, sigma_scale ≤ 0), RT_ERR_OOM. */
rt_status rt_gaussian_importance_map(const int64_t patch[3], float sigma_scale, rt_tensor **out);

/* Runs `net` (as it is: put it in eval mode first; grad mode is switched
 * off inside and restored) over image [C, D, H, W] f32 window by window:
 * each window [1·batch, C, pD, pH, pW] is cut with zero padding where it
 * leaves the volume, net gives logits [batch, num_classes, pD, pH, pW],
 * their softmax over channels is weighted by the importance map and summed
 * into the voxels inside the volume. probs (NULL: not returned) receives the
 * averaged probabilities [num_classes, D, H, W] f32, labels (NULL: not
 * returned) their argmax [D, H, W] int32 (the lowest class on ties). Memory:
 * the sum (num_classes·D·H·W f32) and the weight sum (D·H·W f32) as TEMP,
 * outputs DATA. When net's logits are a function of each voxel's own input
 * (a 1×1×1 network) the result equals the softmax of the whole volume's
 * logits up to rounding. Errors: RT_ERR_INVALID_ARG (NULL net or image, both
 * outputs NULL, bad options), RT_ERR_SHAPE (image not 4-D, logits not
 * [batch, num_classes, window]), RT_ERR_DTYPE, those of the forward. */
rt_status rt_sliding_window_predict(rt_module *net, const rt_tensor *image, int64_t num_classes,
                                    const rt_sliding_window_options *o, rt_tensor **probs, rt_tensor **labels);

#endif
