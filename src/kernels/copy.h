/* Strided copies of f32 activations that the memory table's flat copy
 * cannot do: constant padding / cropping (F.pad) and channel slices
 * (torch.cat / split on dim 1). Serial memcpy/memset for plain tensors;
 * the channels-last slice copy is OpenMP-parallel over positions. The
 * caller owns every buffer; nothing is allocated. A NULL buffer that would
 * be used makes a call a no-op. */
#ifndef RT_KERNELS_COPY_H
#define RT_KERNELS_COPY_H

#include <stdint.h>

#include "core/layout.h"

/* dst[i] = src[i − before] where that index lies inside src, else value,
 * per dim of rank nd (1..5); negative `before` crops. Copies whole
 * overlapping rows of the last dim at once. */
void rt_kernel_pad_copy(int nd, const int64_t *sshape, const float *src, const int64_t *dshape,
                        const int64_t *before, float value, float *dst);

/* Channels [off, off + size) of whole (batch, cw, inner) and piece
 * (batch, size, inner): to_whole copies piece into whole (a NULL piece
 * zero-fills the slice: a missing gradient), else whole into piece. */
void rt_kernel_channel_slice_copy(int64_t batch, int64_t cw, int64_t inner, int64_t off, int64_t size, float *piece,
                                  float *whole, int to_whole);

/* The same slice with the piece (batch, size, inner) in the channels-last
 * order, element (n, c, s) at (n*inner + s)*size + c, and the whole in
 * whole_layout: RT_LAYOUT_PLAIN, RT_LAYOUT_BLOCKED (whole's cw a multiple of
 * the block; off and size any) or RT_LAYOUT_CHANNELS_LAST (core/layout.h).
 * Splits a tensor into channels-last halves, and joins them, in one pass
 * (no whole-size conversion first); OpenMP-parallel over positions. Any
 * other whole_layout is a no-op (the ops check it). */
void rt_kernel_channel_slice_copy_cl(int64_t batch, int64_t cw, int64_t inner, int64_t off, int64_t size,
                                     float *piece, float *whole, rt_layout whole_layout, int to_whole);

#endif
