/* Convolution kernels (oneDNN): forward, backward-data, backward-weights.
 *
 * Mirrors torch.nn.Conv2d / Conv3d (torch.nn.functional.conv2d/conv3d) with
 * padding_mode='zeros', symmetric integer padding, stride, dilation, groups
 * and optional bias. All buffers are contiguous f32:
 *   x  [n, c_in, (in_d,) in_h, in_w]      layout s->src_layout (also dx)
 *   w  [c_out, c_in/groups, (k_d,) k_h, k_w]  always plain PyTorch layout
 *                                             (= oneDNN goihw/goidhw memory)
 *   b  [c_out]
 *   y  [n, c_out, (out_d,) out_h, out_w]  layout s->dst_layout (also dy),
 *                                         out from rt_conv_out_size
 * Activation layouts (see layout.h): RT_LAYOUT_PLAIN (0, the default) is
 * NCHW / NCDHW; RT_LAYOUT_BLOCKED is nChw{B}c / nCdhw{B}c and needs c_in
 * (for src_layout) or c_out (for dst_layout) to be a multiple of
 * rt_layout_block(); RT_LAYOUT_CHANNELS_LAST is NHWC / NDHWC for any
 * channel count (2-D and 3-D convolutions; where both channel counts would
 * be padded by the blocked format — at all, rt_layout_pads, between two
 * channels-last tensors; by more than a quarter, rt_layout_pads_much,
 * otherwise — the primitive computes in it, so such tensors need no
 * reorder). Source and destination layouts are independent (e.g. a
 * plain 3-channel stem input with a blocked output). The byte size of a
 * buffer does not depend on its layout.
 * The caller owns every buffer; the kernels only read inputs and overwrite
 * outputs, never keep pointers. Internally each primitive is created with
 * format_tag_any so oneDNN picks its fastest (usually blocked, e.g.
 * nChw16c) layout; when that differs from the caller's layout the kernel
 * reorders into an RT_MEM_TEMP buffer (reorders are cached along with the
 * primitive); when it is the same (typically a blocked caller layout) there
 * is no reorder and no reorder buffer, which is the point of blocked layouts.
 * Backward primitives use the forward primitive descriptor as their hint. Primitives
 * are cached per thread by the full shape (see cache.h); scratchpads are
 * allocated per call as RT_MEM_TEMP and freed before return, so after a call
 * the live TEMP bytes are back where they were.
 *
 * Plan and execute (plan.h): each kernel has a plan function,
 * rt_kernel_conv_<pass>_plan, that checks the shape, creates or finds the
 * cached primitive and reports the TEMP blocks the call will allocate
 * (reorder buffers, scratchpad) without touching data; the kernel itself
 * plans and then executes, and needs every data pointer. The meta backend
 * (backend/meta.c) books a plan's blocks instead of executing.
 *
 * Pointwise convolutions (every kernel size 1, stride 1, no padding, one
 * group) with f32 compute, plain weights and plain activations are not
 * oneDNN's: they are matrix products on OpenBLAS (kernels/conv_pointwise.h),
 * which read and write the caller's buffers; their plans name no primitive
 * and no TEMP block, and the weight cache (w_cache) is not used.
 *
 * Errors: RT_ERR_INVALID_ARG (NULL pointer, nsp not 2 or 3, non-positive
 * size/stride/dilation, negative padding, unknown layout value, blocked
 * layout with c_in or c_out not a multiple of rt_layout_block()), RT_ERR_SHAPE
 * (groups not dividing c_in or c_out, output size <= 0), RT_ERR_OOM (TEMP
 * allocation refused by the tracked allocator's limit), RT_ERR_BACKEND (oneDNN refused; the message
 * names the primitive and the shape). Outputs are unspecified on error. */
#ifndef RT_KERNELS_CONV_H
#define RT_KERNELS_CONV_H

#include <stdbool.h>
#include <stdint.h>

#include "core/status.h"
#include "kernels/layout.h"
#include "kernels/plan.h"

typedef struct rt_conv_shape {
    int nsp;                  /* 2 or 3 spatial dims */
    int64_t n, c_in, c_out, groups;
    /* spatial, outer to inner: 2D uses [0]=H,[1]=W; 3D [0]=D,[1]=H,[2]=W;
     * dil uses PyTorch's convention (1 = dense) */
    int64_t in[3], k[3], stride[3], pad[3], dil[3];
    int has_bias;
    /* Activation layouts (0 = plain, so existing initialisers stay plain):
     * src_layout for x and dx, dst_layout for y and dy. Part of the cache key. */
    rt_layout src_layout, dst_layout;
    /* 1: compute in bf16 (mixed precision, memory/precision.h): x, w and dy
     * are converted to bf16 on the way into oneDNN's bf16 kernels, which
     * accumulate in f32 and write y, dx, dw and db as f32; the caller's
     * buffers stay f32. Where oneDNN has no bf16 kernel for a pass (see
     * rt_conv_bf16_available) that pass runs in f32, and so does every shape
     * under RT_CONV_ALGO_WINOGRAD, which oneDNN has only in f32 (the AUTO
     * policy takes direct bf16 for every shape with compute_bf16). Part of
     * the cache key. */
    int compute_bf16;
    /* Layout of w and dw (core/layout.h): RT_LAYOUT_PLAIN, PyTorch's OIHW /
     * OIDHW, or RT_LAYOUT_WEIGHT_BLOCKED, the order the direct primitives
     * use on this CPU (groups 1, c_out and c_in multiples of
     * rt_layout_block()), which the forward and backward-weights passes then
     * read and write without a reorder (backward-data still reorders into
     * its own, transposed order). Last, so positional initialisers that
     * stop before it mean plain. Part of the cache key. */
    rt_layout wei_layout;
    /* 1: the x handed to forward or backward-weights is bf16 (2 bytes an
     * element, in src_layout: a precision region's saved half copy,
     * memory/precision.h), which oneDNN's bf16 kernels read as it is
     * instead of converting an f32 x again. Only with compute_bf16;
     * backward-data ignores it (its dx is f32). Part of the cache key. */
    int src_bf16;
    /* 1: the dy handed to backward-data and backward-weights is bf16 (in
     * dst_layout), converted once by the caller for both passes instead of
     * by each pass's own reorder. Only with compute_bf16; the forward
     * rejects it (RT_ERR_INVALID_ARG: its y is f32). Part of the cache key. */
    int dy_bf16;
    /* 1: the forward writes y as bf16 (in dst_layout), the output a bf16
     * region hands on to a batch norm (autograd/node.h,
     * rt_autocast_activation_dtype): oneDNN's bf16 kernel rounds its f32
     * accumulators once on the way out, half the bytes written and read
     * next. Forward only, with compute_bf16 (RT_ERR_INVALID_ARG otherwise:
     * dx and dy of the backward passes are f32 unless dy_bf16). Where the
     * shape computes f32 (Winograd) the entry's reorder converts y. Part of
     * the cache key. */
    int dst_bf16;
    /* 1: backward-data writes dx as bf16 (in src_layout), the gradient of a
     * bf16 input (a bf16 block interior's activation): the kernel rounds its
     * f32 accumulators once on the way out. Backward-data only, with
     * compute_bf16 (RT_ERR_INVALID_ARG otherwise; backward-weights ignores
     * it). Part of the cache key. */
    int dx_bf16;
} rt_conv_shape;

/* Output spatial sizes by PyTorch's formula
 *   out = floor((in + 2*pad - dil*(k-1) - 1) / stride) + 1
 * for the first s->nsp entries; unused entries are set to 1. A dimension with
 * stride <= 0 or a negative numerator yields 0 (rt_kernel_conv_* then report
 * RT_ERR_SHAPE). A NULL s sets every entry to 1, as an nsp other than 2 or
 * 3 does; a NULL out makes the call a no-op. */
void rt_conv_out_size(const rt_conv_shape *s, int64_t out[3]);

/* y = conv(x, w) + b (b broadcast over batch and space). b must be NULL when
 * !s->has_bias and non-NULL otherwise. n == 0 is a valid empty call. x is
 * f32, or bf16 when s->src_bf16 (with s->compute_bf16, else
 * RT_ERR_INVALID_ARG, as is s->dy_bf16); y is f32, or bf16 when
 * s->dst_bf16 (with s->compute_bf16). */
rt_status rt_kernel_conv_forward(const rt_conv_shape *s, const void *x, const float *w,
                                 const float *b, void *y);

/* dx = dL/dx given dy = dL/dy [n, c_out, out...] and w; overwrites dx
 * [n, c_in, in...] (like torch.nn.grad.conv2d_input). dy is f32, or bf16
 * when s->dy_bf16 (with s->compute_bf16, else RT_ERR_INVALID_ARG); dx is
 * f32, or bf16 when s->dx_bf16 (with s->compute_bf16); s->src_bf16 is
 * ignored, s->dst_bf16 refused (RT_ERR_INVALID_ARG: the forward's). */
rt_status rt_kernel_conv_backward_data(const rt_conv_shape *s, const float *w, const void *dy,
                                       void *dx);

/* dw = dL/dw [c_out, c_in/groups, k...] from x and dy; db = dL/db [c_out]
 * (sum of dy over batch and space) when db is non-NULL (db may be NULL even
 * if s->has_bias). Overwrites dw and db (no accumulation; n == 0 gives
 * zeros), like torch.nn.grad.conv2d_weight. x is f32, or bf16 when
 * s->src_bf16; dy likewise with s->dy_bf16 (either needs s->compute_bf16
 * too: RT_ERR_INVALID_ARG); s->dx_bf16 is ignored (this pass writes no
 * dx), s->dst_bf16 refused. */
rt_status rt_kernel_conv_backward_weights(const rt_conv_shape *s, const void *x,
                                          const void *dy, float *dw, float *db);

/* The plans of the three kernels above (plan.h): same shape rules and
 * errors, plus RT_ERR_INVALID_ARG for a NULL plan; n == 0 plans no
 * primitive. with_db: plan the backward-weights variant that also writes db
 * (what a call with a non-NULL db runs). The primitive is created here
 * when the cache lacks it, so the kernel call after the plan creates none. */
rt_status rt_kernel_conv_forward_plan(const rt_conv_shape *s, rt_kernel_plan *plan);
rt_status rt_kernel_conv_backward_data_plan(const rt_conv_shape *s, rt_kernel_plan *plan);
rt_status rt_kernel_conv_backward_weights_plan(const rt_conv_shape *s, int with_db, rt_kernel_plan *plan);

/* Weight cache. A training step reorders each convolution weight from
 * PyTorch's OIHW into the primitive's format (blocked, e.g. OIhw16i16o,
 * or Winograd's, or bf16) in every forward and backward-data call; the
 * _cached variants below take the weight's storage as well (w_cache, the
 * storage whose data w points into; core/tensor.h) and keep the reordered
 * copy with it, one per primitive format (forward and backward-data
 * usually differ), tagged by the (OIHW, primitive format) pair and valid
 * for the storage's current version (rt_storage.version). A call whose
 * copy exists reorders nothing; the copy is made by the first call after a
 * version change (an optimizer step, loading weights, rt_tensor_copy or
 * rt_tensor_fill into the weight, rt_tensor_bump_version). Reuse happens
 * within one version: a checkpointed segment's recompute, the reversible
 * blocks' recomputed F and G, accumulation's micro-batches, evaluation.
 * The copies are booked as RT_MEM_TEMP (the reorder buffer they replace
 * was TEMP too) at the moment the first call makes them, under the
 * primitive's description, and freed at the next version change or with
 * the storage; the meta backend books them at the same moments
 * (backend/meta.c), so predictions still equal the real run.
 * A caller that writes w's data without the library (through
 * rt_tensor_f32) after a cached call must call rt_tensor_bump_version, as
 * PyTorch's in-place ops bump torch.Tensor._version. The cache is not
 * locked: two threads must not run convolutions on the same weight storage
 * at once.
 * The cache is off by default: rt_conv_weight_cache_set(true) makes the
 * ops (ops/conv.c, ops/conv_transpose.c) pass the weights' storages on
 * this thread; it returns the previous setting. Off, every call reorders
 * into its TEMP block and frees it (the behaviour before the cache). Why
 * off: in a plain training step every weight changes once per step, so
 * the cache reorders exactly as often as the uncached path (once for the
 * forward format, once for backward-data's), saves no time, and holds the
 * copies from the forward to the optimizer step, across the step's peak:
 * ResNet-50 224² batch 8 predicts 1016.4 MiB instead of 868.9 (TEMP 73.5 →
 * 238.9 MiB), and the checkpoint planner's plans for a budget need more
 * recompute. It pays where one version meets several calls: evaluation,
 * accumulation's micro-batches, checkpoint and reversible recompute
 * (docs/design.md "Weight cache", with measurements). The CLI's
 * --weight-cache on sets it for train, bench and memory. */
bool rt_conv_weight_cache_set(bool on);
bool rt_conv_weight_cache_enabled(void);

rt_status rt_kernel_conv_forward_cached(const rt_conv_shape *s, const void *x, const float *w,
                                        struct rt_storage *w_cache, const float *b, void *y);
rt_status rt_kernel_conv_backward_data_cached(const rt_conv_shape *s, const float *w, struct rt_storage *w_cache,
                                              const void *dy, void *dx);
/* Their plans (plan.h weights_cached, weights_cache_bytes: whether the
 * call will make the copy). */
rt_status rt_kernel_conv_forward_plan_cached(const rt_conv_shape *s, struct rt_storage *w_cache,
                                             rt_kernel_plan *plan);
rt_status rt_kernel_conv_backward_data_plan_cached(const rt_conv_shape *s, struct rt_storage *w_cache,
                                                   rt_kernel_plan *plan);

/* Convolution algorithm policy, per thread (every thread starts at
 * RT_CONV_ALGO_AUTO). It plays the part of torch.backends.cudnn.benchmark /
 * .deterministic: which algorithm computes the same convolution.
 *   RT_CONV_ALGO_DIRECT    always oneDNN's direct convolution, which is what
 *                          PyTorch's CPU convolution (mkldnn) runs.
 *   RT_CONV_ALGO_WINOGRAD  Winograd F(4x4, 3x3) (Lavin & Gray 2016) wherever
 *                          oneDNN has a kernel for the shape (2-D, 3x3,
 *                          stride 1, dilation 1, groups 1), direct elsewhere.
 *   RT_CONV_ALGO_AUTO      Winograd where it is faster on this CPU class,
 *                          by a fixed rule measured on oneDNN 2.6 AVX-512
 *                          (docs/design.md, "Convolution algorithm"):
 *                          a Winograd-capable shape with c_in >= 32,
 *                          c_out >= 32 and n*ceil(out_h/4)*ceil(out_w/4) >= 128
 *                          output tiles; direct elsewhere, and for every
 *                          shape that computes in bf16 (compute_bf16).
 * The rule depends only on the shape, so a run is reproducible; it does
 * depend on the batch size, so evaluating with another batch may round
 * differently (~1e-6 relative). Winograd rounds differently from direct
 * (at most 4e-6 of the largest output on ResNet-50 layers) and needs a larger scratchpad
 * (RT_MEM_TEMP, reported by the plans too). The policy is read when a primitive
 * is created and is part of the cache key. rt_conv_algo_set returns the
 * previous policy; an unknown value is ignored (and returned unchanged). */
typedef enum rt_conv_algo {
    RT_CONV_ALGO_AUTO = 0,
    RT_CONV_ALGO_DIRECT = 1,
    RT_CONV_ALGO_WINOGRAD = 2,
} rt_conv_algo;

rt_conv_algo rt_conv_algo_set(rt_conv_algo algo);
rt_conv_algo rt_conv_algo_get(void);
/* "auto", "direct", "winograd"; NULL for an unknown value. */
const char *rt_conv_algo_name(rt_conv_algo algo);
/* Parses one of those names; RT_ERR_INVALID_ARG names the choices (also for
 * a NULL name), or says out is NULL. */
rt_status rt_conv_algo_parse(const char *name, rt_conv_algo *out);

/* Checks a conv shape (the same rules the kernels apply) and, when out is
 * non-NULL, stores the output size. Returns RT_OK or the error, message set
 * (RT_ERR_INVALID_ARG for a NULL s). */
rt_status rt_conv_shape_check(const rt_conv_shape *s, int64_t out[3]);

/* Whether oneDNN implements a bf16 convolution (forward training, bf16
 * source/weights/destination, any format) on this CPU, found the way
 * oneDNN says to: by creating the primitive descriptor for a small 2-D
 * shape and seeing whether it succeeds (oneDNN 2.6.3: yes on AVX512_BF16 /
 * AMX, emulated on plain AVX-512, no on AVX2 or with DNNL_MAX_CPU_ISA=AVX2).
 * Nothing is booked. false when the engine cannot be made. The answer is
 * kept per thread after the first call (thread-local by design: the CPU and
 * DNNL_MAX_CPU_ISA do not change during a process). */
bool rt_conv_bf16_available(void);

/* Whether a shape with compute_bf16 computes in bf16: every shape but the
 * Winograd ones of RT_CONV_ALGO_WINOGRAD, which stay f32 (see
 * compute_bf16). false without compute_bf16 or for a NULL s.
 * The op (ops/conv.c) asks it to hand such shapes bf16 x and dy (src_bf16,
 * dy_bf16): the values the kernel would convert them to itself. Where
 * oneDNN lacks a bf16 kernel for one pass that pass converts them back to
 * f32 (the same values a storage-only region gives). */
bool rt_conv_computes_bf16(const rt_conv_shape *s);

#endif
