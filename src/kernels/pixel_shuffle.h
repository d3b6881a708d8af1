/* Pixel shuffle and its inverse: a fixed permutation between channels and
 * space (Shi et al. 2016, "Real-Time Single Image and Video Super-Resolution
 * Using an Efficient Sub-Pixel Convolutional Neural Network", eq. 4, the
 * periodic shuffling operator PS; torch.nn.functional.pixel_shuffle /
 * pixel_unshuffle of PyTorch 1.13).
 *
 * With lo the (n, c·r², h, w) tensor and hi the (n, c, h·r, w·r) tensor,
 *     hi[b, k, y·r + i, x·r + j] = lo[b, k·r² + i·r + j, y, x]
 * for 0 <= i, j < r. inverse = 0 writes hi (dst) from lo (src): the pixel
 * shuffle; inverse = 1 writes lo (dst) from hi (src): the pixel unshuffle,
 * which is also the shuffle's backward (a permutation's adjoint is its
 * inverse), and the other way round.
 *
 * Buffers: contiguous f32, both in the plain NCHW order (block = 1) or both
 * in the blocked nChw{L}c order with L = block (which must divide c, and so
 * c·r²: a blocked hi tensor; see kernels/layout.h); caller-owned, not
 * overlapping; nothing is allocated. OpenMP over output rows. A NULL
 * buffer, a size < 1 or a block not dividing c makes the call a no-op (the
 * checks are the op's). */
#ifndef RT_KERNELS_PIXEL_SHUFFLE_H
#define RT_KERNELS_PIXEL_SHUFFLE_H

#include <stdint.h>

void rt_kernel_pixel_shuffle(int64_t n, int64_t c, int64_t h, int64_t w, int64_t r, int64_t block, int inverse,
                             const float *src, float *dst);

#endif
