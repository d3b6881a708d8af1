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

#endif
