/* Activation memory orders (see kernels/layout.h for the full description
 * and the reorder kernel). Defined in core so tensors can carry their order. */
#ifndef RT_CORE_LAYOUT_H
#define RT_CORE_LAYOUT_H

/* The channel block size B of RT_LAYOUT_BLOCKED is chosen at run time, as
 * oneDNN chooses it for this CPU (16 with AVX-512, 8 below): see
 * rt_layout_block() in kernels/layout.h. It is never larger than this, so
 * per-block scratch arrays can be sized at compile time. */
#define RT_LAYOUT_BLOCK_MAX 16

/* Layout of a 4-D/5-D f32 activation buffer (zero is plain, so zero-
 * initialised shape structs mean plain everywhere). */
typedef enum rt_layout {
    RT_LAYOUT_PLAIN = 0,   /* NCHW / NCDHW, PyTorch contiguous */
    RT_LAYOUT_BLOCKED = 1, /* nChw{B}c / nCdhw{B}c, B = rt_layout_block(), C % B == 0 */
} rt_layout;

#endif
