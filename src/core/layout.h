/* Activation memory orders (see kernels/layout.h for the full description
 * and the reorder kernel). Defined in core so tensors can carry their order. */
#ifndef RT_CORE_LAYOUT_H
#define RT_CORE_LAYOUT_H

/* Channel block size of RT_LAYOUT_BLOCKED: 16 on AVX-512 builds (the project
 * compiles with -march=native), 8 otherwise (AVX2), matching what oneDNN's
 * convolutions prefer on that machine. */
#if defined(__AVX512F__)
#define RT_LAYOUT_BLOCK 16
#else
#define RT_LAYOUT_BLOCK 8
#endif

/* Layout of a 4-D/5-D f32 activation buffer (zero is plain, so zero-
 * initialised shape structs mean plain everywhere). */
typedef enum rt_layout {
    RT_LAYOUT_PLAIN = 0,   /* NCHW / NCDHW, PyTorch contiguous */
    RT_LAYOUT_BLOCKED = 1, /* nChw{B}c / nCdhw{B}c, B = RT_LAYOUT_BLOCK, C % B == 0 */
} rt_layout;

#endif
