/* Trilinear (and bilinear) upsampling: revtorch's own kernels (oneDNN 2.6's
 * resampling primitive computes source coordinates in its own way, not
 * bit-for-bit PyTorch's, and cannot take a scale that differs from out/in).
 *
 * Mirrors torch.nn.functional.interpolate(mode="trilinear" / "bilinear",
 * align_corners=False) of PyTorch 1.13 (aten/src/ATen/native/UpSample.h,
 * area_pixel_compute_source_index): per axis, with
 *   scale = 1/scale_factor   when a scale factor was given (> 0),
 *           in/out           otherwise (both computed in float),
 * output index o reads source coordinate
 *   src = max(0, scale·(o + 0.5) − 0.5),  i0 = ⌊src⌋,  i1 = min(i0 + 1, in − 1),
 *   λ1 = src − i0, λ0 = 1 − λ1,
 * and y is the product-weighted sum of the 2^nsp neighbours. An axis whose
 * size does not change is copied whatever the scale factor (PyTorch 1.13's
 * CPU kernel does so: interpolate(scale_factor=1.3) of a width-3 axis
 * returns it unchanged, not resampled by 1/1.3). The backward
 * scatters dy with the same weights (a transposed sum; each plane is its own
 * task, so there are no races).
 *
 * Buffers: x, dx [n, c, in...], y, dy [n, c, out...], contiguous f32 in
 * layout s->layout (plain NC[D]HW or blocked nC[d]hw{B}c, see chanwise.h for
 * the plane view); caller-owned; nothing is allocated. OpenMP over planes
 * and output rows, vectorised along the inner block. The checks are the op's;
 * a NULL shape or buffer (or nsp not 2 or 3) makes a call a no-op. */
#ifndef RT_KERNELS_UPSAMPLE_H
#define RT_KERNELS_UPSAMPLE_H

#include <stdint.h>

#include "kernels/layout.h"

typedef struct rt_upsample_shape {
    int nsp;                 /* 2 (bilinear, [0]=H, [1]=W) or 3 (trilinear, D, H, W) */
    int64_t n, c;
    int64_t in[3], out[3];
    double scale[3];         /* the caller's scale factors; <= 0: none given (in/out) */
    rt_layout layout;
} rt_upsample_shape;

void rt_kernel_upsample_linear_forward(const rt_upsample_shape *s, const float *x, float *y);
/* Overwrites dx. */
void rt_kernel_upsample_linear_backward(const rt_upsample_shape *s, const float *dy, float *dx);

/* Bicubic resampling (s->nsp must be 2; other values make a call a no-op):
 * torch.nn.functional.interpolate(mode="bicubic", align_corners=False,
 * antialias=False) of PyTorch 1.13 (aten/src/ATen/native/UpSample.h:
 * area_pixel_compute_source_index with cubic=true, guard_index_and_lambda,
 * get_cubic_upsample_coefficients; Keys 1981, "Cubic convolution
 * interpolation for digital image processing", with A = -0.75). Per axis,
 * with scale as for the linear kernel (1/scale_factor when given, else
 * in/out, in float), output index o reads
 *   src = scale·(o + 0.5) − 0.5        (NOT clamped at 0, unlike linear),
 *   i = min(⌊src⌋, in − 1),  t = clamp(src − i, 0, 1),
 *   taps i−1, i, i+1, i+2, each clamped to [0, in − 1] (the border
 *   replicated), with weights
 *   W(t+1), W(t), W(1−t), W(2−t),  W(d) = ((A+2)d − (A+3))d² + 1 for d <= 1,
 *                                   W(d) = ((A·d − 5A)d + 8A)d − 4A for 1 < d < 2.
 * y is Σ wh[a]·ww[b]·x over the 4×4 taps (computed in float, as ATen's
 * kernel for float tensors). No axis is special-cased: an unchanged size
 * read with scale 1 gives the weights (0, 1, 0, 0), a copy. The backward
 * scatters dy with the same weights into dx (overwritten), sequentially
 * within a plane, planes in parallel. Layouts and buffers as for the linear
 * kernels. */
void rt_kernel_upsample_bicubic_forward(const rt_upsample_shape *s, const float *x, float *y);
/* Overwrites dx. */
void rt_kernel_upsample_bicubic_backward(const rt_upsample_shape *s, const float *dy, float *dx);

#endif
