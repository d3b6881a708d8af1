/* Activation memory layouts shared by the oneDNN kernels.
 *
 * RT_LAYOUT_PLAIN is PyTorch's contiguous NCHW / NCDHW. RT_LAYOUT_BLOCKED is
 * oneDNN's channel-blocked nChw{B}c (4-D tensors [N, C, H, W]) or nCdhw{B}c
 * (5-D [N, C, D, H, W]) with B = rt_layout_block(): element (n, c, h, w) of a
 * 4-D tensor lives at float index
 *     ((n*C/B + c/B)*H*W + h*W + w)*B + c%B
 * and for 5-D the spatial offset h*W + w becomes (d*H + h)*W + w with D*H*W
 * in place of H*W. Blocked is only defined for C % B == 0, so there is never
 * channel padding and a blocked buffer has exactly the byte size of the
 * plain one; every kernel refuses a blocked tensor with C % B != 0
 * (RT_ERR_INVALID_ARG). Keeping activations blocked from layer to layer lets
 * a convolution whose preferred layout is the blocked one run without
 * reorders. RT_LAYOUT_CHANNELS_LAST is NHWC / NDHWC for any C (core/layout.h);
 * the convolution, the reorder, the channel-wise kernels (chanwise.h: group
 * and instance norm) and the channel split/concat copies read it, every
 * other kernel refuses it. Element-wise kernels (eltwise.h, ReLU) are
 * layout-agnostic: they see a flat array and keep the element order, so y
 * has x's layout. */
#ifndef RT_KERNELS_LAYOUT_H
#define RT_KERNELS_LAYOUT_H

#include <stdbool.h>
#include <stdint.h>

#include "../core/layout.h"
#include "../core/status.h"

/* The channel block size B of RT_LAYOUT_BLOCKED in this process: the block
 * oneDNN's convolutions prefer on this CPU, 16 when oneDNN's effective ISA
 * includes avx512_core, else 8 (AVX2 and below) — the inner block of the
 * nChw{B}c format a convolution primitive picks for format `any`
 * (tests/test_layout.c asserts the two agree, natively and under
 * DNNL_MAX_CPU_ISA=AVX2). Decided at run time, never at compile time, so one
 * binary is right on every CPU; constant for the life of the process (so call
 * dnnl_set_max_cpu_isa, if at all, before any revtorch call). Never fails;
 * at most RT_LAYOUT_BLOCK_MAX. */
int rt_layout_block(void);

/* Whether a convolution weight with o output and i input channels (per
 * group; groups must be 1) can be RT_LAYOUT_WEIGHT_BLOCKED (core/layout.h):
 * both multiples of rt_layout_block(), so the blocked order pads nothing.
 * The one rule the kernels, rt_weight_set_layout and
 * rt_module_set_weight_layout apply. False for o or i < 1. */
bool rt_layout_weight_blockable(int64_t o, int64_t i);

/* Whether the blocked order would pad c channels by more than a quarter
 * (c rounded up to the block is over 1.25 c: 8 channels under 16-channel
 * blocks). A convolution of plain (or one plain, one channels-last) tensors
 * whose two channel counts both are computes in channels-last instead
 * (kernels/conv.c); below that, the blocked kernels are faster on plain
 * tensors (the BraTS U-Net's 60/120
 * channels, padded by 7%). False for c < 1. */
bool rt_layout_pads_much(int64_t c);

/* Whether the blocked order pads c channels at all (c not a multiple of
 * rt_layout_block()). Tensors already channels-last with such counts stay
 * so: a convolution between two of them computes in channels-last instead
 * of reordering both into padded blocks (kernels/conv.c), and a reversible
 * block with rt_rev_block_set_channels_last splits into such halves. The
 * BraTS partially reversible U-Net's 30-channel halves at 128³: 512 MiB of
 * reorder buffers around each convolution, the step's peak, gone; its step
 * time at 64³ unchanged. False for c < 1. */
bool rt_layout_pads(int64_t c);

/* Copies a tensor of logical shape `shape` (ndim 4: N,C,H,W or 5: N,C,D,H,W)
 * from layout `from` in src to layout `to` in dst (oneDNN reorder primitive,
 * cached per thread by shape and layouts, see cache.h; from == to is a plain
 * copy). src and dst are caller-owned, contiguous, shape-product floats each
 * and must not overlap. Its plan (rt_kernel_reorder_layout_plan, internal:
 * kernels/plan.h) reports the RT_MEM_TEMP bytes a call allocates (a
 * scratchpad, if oneDNN wants one; usually none). N == 0 is a valid empty
 * call.
 * A convolution weight (O, I, [D,] H, W) converts the same way between
 * RT_LAYOUT_PLAIN (OIHW) and RT_LAYOUT_WEIGHT_BLOCKED (core/layout.h).
 * Errors: RT_ERR_INVALID_ARG (ndim not 4 or 5, shape NULL, N < 0, C or a
 * spatial size < 1, an unknown layout value, blocked to or from
 * weight-blocked, a blocked side with C % rt_layout_block() != 0, a
 * weight-blocked side with O or I not a multiple of it, src or dst NULL),
 * RT_ERR_OOM, RT_ERR_BACKEND. */
rt_status rt_kernel_reorder_layout(int ndim, const int64_t *shape, rt_layout from, rt_layout to,
                                   const float *src, float *dst);

#endif
