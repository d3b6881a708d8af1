/* Image-quality metrics of super-resolution: PSNR and SSIM against a
 * reference, with the border crop SR papers use (EDSR's evaluation, Lim et
 * al. 2017, sec. 4.1, shaves `scale` pixels from every edge before scoring:
 * the border has no neighbours to reconstruct from). */
#ifndef RT_TRAIN_SR_METRIC_H
#define RT_TRAIN_SR_METRIC_H

#include <stdint.h>

#include "../core/status.h"
#include "../core/tensor.h"

/* Peak signal-to-noise ratio in dB, 10·log10(R² / MSE), R = data_range,
 * MSE = the mean of (x − ref)² in f64 over the pixels left after dropping
 * `border` rows and columns from every edge of each image. x and ref are f32
 * [N, C, H, W] of one shape in the plain NCHW order (a blocked tensor is
 * RT_ERR_INVALID_ARG: rt_to_layout first); each of the N·C images is
 * scored alone and *out is the mean of their PSNRs (SR papers average per
 * image). An image equal to its reference gives +INFINITY (and so the mean).
 * skimage.metrics.peak_signal_noise_ratio(ref, x, data_range=R) on the
 * cropped image. Errors: RT_ERR_INVALID_ARG (NULL, meta, border < 0,
 * data_range ≤ 0, a border that leaves no pixel), RT_ERR_SHAPE (not 4-D,
 * shapes differ), RT_ERR_DTYPE (not f32). */
rt_status rt_psnr(const rt_tensor *x, const rt_tensor *ref, int64_t border, double data_range, double *out);

/* Structural similarity (Wang, Bovik, Sheikh, Simoncelli, "Image Quality
 * Assessment: From Error Visibility to Structural Similarity", IEEE TIP
 * 2004, eq. 13 with the Gaussian window of sec. III-C): after the border
 * crop, local means μ, variances σ² and covariance σxy are weighted by a
 * normalised 11×11 Gaussian of σ = 1.5 (population moments:
 * E[x²] − μ², not the sample ones), and
 *   SSIM = (2μxμy + C1)(2σxy + C2) / ((μx² + μy² + C1)(σx² + σy² + C2)),
 *   C1 = (0.01·R)², C2 = (0.03·R)²,
 * averaged over the positions whose whole window lies in the cropped image
 * ((h − 10)·(w − 10) of them); all in f64. As
 * skimage.metrics.structural_similarity(x, ref, data_range=R,
 * gaussian_weights=True, sigma=1.5, use_sample_covariance=False) (its
 * truncate 3.5 gives the 11 taps, and it drops the same 5-pixel strip).
 * Shapes, averaging over the N·C images and errors as rt_psnr; a cropped
 * image smaller than 11×11 is RT_ERR_INVALID_ARG. */
rt_status rt_ssim(const rt_tensor *x, const rt_tensor *ref, int64_t border, double data_range, double *out);

#endif
