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
    /* A convolution weight (O, I, [D,] H, W) in the order oneDNN's direct
     * convolutions compute with, OIhw{B}i{B}o / OIdhw{B}i{B}o (oneDNN's
     * ABcd{B}b{B}a), for O % B == 0 and I % B == 0, so its byte size is the
     * plain one's: element (o, i, h, w) at float index
     *     (((o/B)*(I/B) + i/B)*H*W + h*W + w)*B*B + (i%B)*B + o%B.
     * Set by rt_module_set_weight_layout (nn/modules.h); the weight's .grad
     * and optimizer state share it, and weight files always hold OIHW. */
    RT_LAYOUT_WEIGHT_BLOCKED = 2,
    /* NHWC / NDHWC (PyTorch's channels_last / channels_last_3d memory
     * format, oneDNN's nhwc / ndhwc), any C: element (n, c, s) at float
     * index (n*S + s)*C + c for S spatial positions; the plain byte size.
     * Used where the blocked order would pad C by more than a quarter and a
     * chain of ops can stay in one order: the 8-channel halves of a
     * reversible coupling under 16-channel blocks (the channels-last
     * convolution's native order, so it needs no reorder). Produced only
     * on request (rt_split_channels_layout; a convolution keeps its input's
     * order); ops that cannot read it refuse it or convert. */
    RT_LAYOUT_CHANNELS_LAST = 3,
} rt_layout;

#endif
