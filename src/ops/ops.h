/* Differentiable functional ops (torch.nn.functional counterparts).
 *
 * Conventions for every op:
 * - inputs are borrowed; *out receives a new reference (release it);
 * - activations are float32, NCHW (2-D ops) or NCDHW (3-D), in the PLAIN or
 *   BLOCKED memory order (core/tensor.h); an op's output has its input's
 *   order (conv: BLOCKED when the input is and C_out is a multiple of the
 *   block), ops that need PLAIN (flatten, linear, unaligned channel splits)
 *   convert, and gradients always have their tensor's order;
 * - outputs are booked TEMP; what backward keeps is stored through
 *   rt_node_save and booked SAVED (listed per op under "saves");
 * - on meta tensors only shapes and memory are computed;
 * - with grad mode on and an input requiring grad, the output gets a grad_fn;
 * - errors: RT_ERR_INVALID_ARG (NULL, bad option), RT_ERR_DTYPE (not f32),
 *   RT_ERR_SHAPE (shapes do not fit; the message gives both shapes),
 *   RT_ERR_OOM, RT_ERR_BACKEND (oneDNN refused);
 * - NULL: out (or outs) and every tensor argument not documented as optional
 *   (conv's and linear's bias, conv's opts, num_batches_tracked) are
 *   required: NULL is RT_ERR_INVALID_ARG with a message naming the op and the
 *   argument, and *out is NULL on every error when out is not NULL. */
#ifndef RT_OPS_OPS_H
#define RT_OPS_OPS_H

#include <stdbool.h>
#include <stdint.h>

#include "../core/tensor.h"
#include "../kernels/layout.h" /* rt_layout_block(): the channel block of RT_LAYOUT_BLOCKED */

/* Convolution options; zero fields take PyTorch's defaults (stride 1,
 * padding 0, dilation 1, groups 1). Index 0 is the outermost spatial dim
 * (H for 2-D, D for 3-D). */
typedef struct rt_conv_opts {
    int64_t stride[3];
    int64_t padding[3];
    int64_t dilation[3];
    int64_t groups;
    /* Write the output in the blocked order (core/tensor.h rt_layout) even
     * when x is plain, if the output channels fill whole blocks. A stem
     * convolution followed by rt_to_preferred_layout sets it: the kernel
     * computes in the blocked order anyway, so the output then skips a
     * round trip through plain (two reorders of the largest activation;
     * ResNet-50 224² batch 8: about 4% of a step). */
    bool preferred_output;
} rt_conv_opts;

/* torch.nn.functional.conv2d / conv3d: x (N, C, [D,] H, W), weight
 * (OC, C/groups, [kD,] kH, kW), bias (OC) or NULL → (N, OC, [oD,] oH, oW),
 * o = floor((i + 2p - dilation*(k-1) - 1) / stride) + 1. oneDNN kernels.
 * x is f32, or bf16 inside a bf16 precision region on a CPU with bf16
 * convolutions (a block interior's activation; RT_ERR_DTYPE elsewhere);
 * weight and bias f32. y is f32, or bf16 when the region hands activations
 * on in bf16 (autograd/node.h rt_autocast_activation_dtype) and this shape
 * computes in bf16 (torch.autocast's conv output). Gradients are f32.
 * Saves: x (and the weight, a parameter, not booked SAVED). */
rt_status rt_conv(rt_tensor *x, rt_tensor *weight, rt_tensor *bias, const rt_conv_opts *opts,
                  rt_tensor **out);

/* torch.nn.functional.linear: x (N, in), weight (out, in), bias (out) or
 * NULL → (N, out) = x·weightᵀ + bias (OpenBLAS sgemm). Saves: x. */
rt_status rt_linear(rt_tensor *x, rt_tensor *weight, rt_tensor *bias, rt_tensor **out);

/* torch.nn.functional.batch_norm on (N, C, ...) with weight, bias, running_mean,
 * running_var all (C). Training: normalises with the batch mean and biased
 * variance, then (unless recomputing, autograd/node.h) updates
 * running = (1-momentum)·running + momentum·batch with the unbiased variance
 * and increments *num_batches_tracked (may be NULL). Eval: uses the running
 * statistics. x is f32, or bf16 inside a bf16 precision region on a CPU with
 * bf16 convolutions (RT_ERR_DTYPE elsewhere): y then is bf16 too (PyTorch's
 * batch norm on a bf16 input under autocast), the statistics are f32,
 * summed in double from the bf16 values, and the gradients f32. Saves
 * (training): x, batch mean and variance (2·C floats; in a half region
 * an f32 x is saved as its centred half copy, ops/op_util.h); (eval): x. */
rt_status rt_batch_norm(rt_tensor *x, rt_tensor *weight, rt_tensor *bias, rt_tensor *running_mean,
                        rt_tensor *running_var, int64_t *num_batches_tracked, bool training,
                        float momentum, float eps, rt_tensor **out);

/* torch.relu / torch.nn.functional.leaky_relu (negative_slope >= 0); any shape.
 * Saves: the output y (backward needs only its sign, as PyTorch's relu).
 * The backward writes the input's gradient over the incoming one when
 * nobody else holds that (no hook, no retained .grad): values as PyTorch's,
 * one activation-sized buffer less.
 * Errors: RT_ERR_INVALID_ARG (NULL, negative_slope < 0), RT_ERR_DTYPE
 * (not f32), RT_ERR_OOM. */
rt_status rt_relu(rt_tensor *x, rt_tensor **out);
rt_status rt_leaky_relu(rt_tensor *x, float negative_slope, rt_tensor **out);

/* The same, consuming x (F.relu(x, inplace=True), F.leaky_relu(...,
 * inplace=True)): when x is the caller's only reference, no node saved it
 * and it is not a leaf that requires grad (rt_op_can_consume), y is written
 * over x's storage and the caller must not read x again (release it);
 * otherwise a new tensor, as rt_relu. Unlike PyTorch's in-place ops this
 * never corrupts a value autograd needs: it falls back instead of raising.
 * Containers reach it through the ReLU and LeakyReLU modules'
 * forward_consume (nn/module.h). Errors as rt_relu. */
rt_status rt_relu_inplace(rt_tensor *x, rt_tensor **out);
rt_status rt_leaky_relu_inplace(rt_tensor *x, float negative_slope, rt_tensor **out);

/* torch.relu(a + b): a residual sum and its ReLU in one pass, without the
 * sum ever being stored (same shape, no broadcasting; b is converted to a's
 * memory order if they differ). The output has a's order. Both gradients
 * are dy * (y > 0), one tensor handed to both inputs. Saves: y, like relu;
 * compared with rt_add then rt_relu it skips one read and one write of the
 * activation and the TEMP sum. a and b may each be bf16 (a residual block's
 * bf16 interior, models/resblock.c), read as they are; then they must share
 * a memory order (RT_ERR_INVALID_ARG), y is a new f32 tensor (the in-place
 * variant cannot write over a bf16 a) and the gradients are f32. Errors as
 * rt_add, RT_ERR_DTYPE for any other dtype. */
rt_status rt_add_relu(rt_tensor *a, rt_tensor *b, rt_tensor **out);

/* The same, consuming a (torch.relu_(a.add_(b)) for a residual branch's
 * last output): when a is the caller's only reference, no node keeps it, it
 * is not a leaf that requires grad (rt_op_can_consume) and b does not share
 * its storage, y is written over a's storage (its version bumped) and the
 * caller must not read a again (release it); otherwise a new tensor, as
 * rt_add_relu. A node that saved a through saved-tensor hooks keeps what
 * the hooks made of it (a precision region's half copy, a checkpoint's
 * recompute), which tell the rewritten storage by its version. Values and
 * gradients are rt_add_relu's; a residual block's forward then holds one
 * activation less at its sum. Errors as rt_add_relu. */
rt_status rt_add_relu_inplace(rt_tensor *a, rt_tensor *b, rt_tensor **out);

/* Pooling options; zero stride means stride = kernel (PyTorch's default). */
typedef struct rt_pool_opts {
    int64_t kernel[3];
    int64_t stride[3];
    int64_t padding[3];
} rt_pool_opts;

/* torch.nn.functional.max_pool2d/3d (floor mode, padding counts as -inf).
 * opts is required (RT_ERR_INVALID_ARG when NULL: the kernel has no default).
 * Saves: oneDNN's workspace of arg-max positions (u8 buffer, booked SAVED). */
rt_status rt_max_pool(rt_tensor *x, const rt_pool_opts *opts, rt_tensor **out);
/* torch.nn.functional.avg_pool2d/3d with count_include_pad=True; opts required
 * as for rt_max_pool. Saves nothing. */
rt_status rt_avg_pool(rt_tensor *x, const rt_pool_opts *opts, rt_tensor **out);
/* torch.nn.functional.adaptive_avg_pool2d(x, 1) (and 3-D): (N, C, ...) → (N, C, 1, 1[, 1]).
 * Saves nothing. */
rt_status rt_adaptive_avg_pool_1(rt_tensor *x, rt_tensor **out);

/* a + b (same shape; torch.add without broadcasting). Saves nothing. */
rt_status rt_add(rt_tensor *a, rt_tensor *b, rt_tensor **out);
/* a - b (same shape). Saves nothing. */
rt_status rt_sub(rt_tensor *a, rt_tensor *b, rt_tensor **out);
/* rt_add and rt_sub that consume a (torch's a.add_(b) / a.sub_(b) for an
 * intermediate): when a is the only reference to its storage, nothing saved
 * it and it is not a leaf that requires grad (as rt_mul_scalar_inplace),
 * the result is written over a's storage, in a's memory order; otherwise a
 * new tensor. The caller must not read a afterwards, only release it. Same
 * values, gradients and errors as rt_add / rt_sub. For residual sums (EDSR's
 * blocks, models/edsr.c) and the partially reversible U-Net's recovered
 * skips (models/unet.c), which would otherwise hold one more activation. */
rt_status rt_add_inplace(rt_tensor *a, rt_tensor *b, rt_tensor **out);
rt_status rt_sub_inplace(rt_tensor *a, rt_tensor *b, rt_tensor **out);
/* a * b elementwise (same shape; torch.mul without broadcasting; b is
 * converted to a's memory order if they differ, the output has a's order).
 * Backward: da = dy·b, db = dy·a. Saves: b when a needs a gradient, a when
 * b does (one tensor for rt_mul(x, x)). Errors as rt_add. */
rt_status rt_mul(rt_tensor *a, rt_tensor *b, rt_tensor **out);
/* scale · x. Saves nothing. */
rt_status rt_mul_scalar(rt_tensor *x, float scale, rt_tensor **out);
/* rt_mul_scalar that consumes x (torch's x.mul_(scale) for an intermediate):
 * the caller must not read x's values afterwards, only release it. When x is
 * the only reference to its storage, nothing saved it and it is not a leaf
 * that requires grad, the output is x's storage scaled in place (x's version
 * bumped); otherwise a new tensor. Same values, gradient and errors as
 * rt_mul_scalar. For EDSR's residual scaling of a convolution's output. */
rt_status rt_mul_scalar_inplace(rt_tensor *x, float scale, rt_tensor **out);

/* ---- Reductions and pointwise math, for custom losses and couplings.
 * Shared by the six functions below: x is float32 of any shape (0-d to 5-D)
 * on cpu or meta, in either memory order; it is borrowed. On RT_OK *out is a
 * new float32 tensor (booked TEMP, on x's device) that the caller releases;
 * on failure *out is NULL (when out itself is not NULL). Errors:
 * RT_ERR_INVALID_ARG (x or out NULL, with a message), RT_ERR_DTYPE (x not
 * float32), RT_ERR_OOM. On meta tensors the output (and, in backward, the
 * gradient) is allocated and booked, nothing is computed. The pointwise ops
 * are layout-agnostic: the output and x's gradient have x's memory order. */

/* torch.sum(x): the sum of all elements, accumulated in double and rounded
 * once, as a 0-d tensor (0 for an empty x). Backward broadcasts dy to x's
 * shape and memory order. Saves no tensor, only x's shape and order. */
rt_status rt_sum(rt_tensor *x, rt_tensor **out);
/* torch.mean(x): rt_sum / numel as a 0-d tensor (NaN for an empty x, as
 * PyTorch). Backward: dy / numel everywhere. Saves no tensor, only x's shape
 * and order. */
rt_status rt_mean(rt_tensor *x, rt_tensor **out);

/* torch.square(x) = x·x, same shape. Backward: dx = dy·2x. Saves: x. */
rt_status rt_square(rt_tensor *x, rt_tensor **out);
/* torch.pow(x, p) for a float exponent, same shape; computed with C's powf
 * (x·x for p = 2). At x <= 0 it follows PyTorch (and C): a negative base
 * with a non-integer p gives NaN (torch.pow(-8, 1/3) is NaN, not -2), a
 * negative base with an integer p is exact ((-2)^3 = -8); 0^p is 0 for
 * p > 0, +inf for p < 0 (-inf for -0 and an odd negative integer p), and
 * x^0 = 1 for every x, NaN and 0 included. Backward: dx = dy·(p·x^(p-1)),
 * so NaN where the forward is NaN, ±inf at x = 0 for p < 1 (p != 0), and
 * zeros everywhere for p = 0 (PyTorch's pow_backward). A non-finite p is
 * RT_ERR_INVALID_ARG (PyTorch accepts it; its gradient p·x^(p-1) has no
 * use). Saves: x. */
rt_status rt_pow_scalar(rt_tensor *x, float p, rt_tensor **out);

/* torch.tanh(x), same shape. Backward from the output, as PyTorch:
 * dx = dy·(1 - y²). Saves: the output y (not x). */
rt_status rt_tanh(rt_tensor *x, rt_tensor **out);
/* torch.sigmoid(x) = 1 / (1 + e^-x), same shape; saturates to exactly 0 or 1
 * for large |x| without overflow errors. Backward from the output, as
 * PyTorch: dx = dy·(1 - y)·y. Saves: the output y (not x). */
rt_status rt_sigmoid(rt_tensor *x, rt_tensor **out);

/* torch.cat(xs, dim=1): n tensors equal in every dim but 1. Saves nothing.
 * RT_ERR_INVALID_ARG for n < 1, xs NULL or a NULL entry. */
rt_status rt_cat_channels(int n, rt_tensor *const *xs, rt_tensor **out);
/* torch.split(x, sizes, dim=1): n outputs with sizes[i] channels each
 * (sum = C). outs[i] are new references (all NULL on error). Saves nothing.
 * RT_ERR_INVALID_ARG for x, sizes or outs NULL; RT_ERR_SHAPE for n < 1 or
 * sizes that are not positive or do not add up to C. */
rt_status rt_split_channels(rt_tensor *x, int n, const int64_t *sizes, rt_tensor **outs);

/* rt_split_channels with the pieces in memory order `layout`: the input's
 * own (then exactly rt_split_channels) or RT_LAYOUT_CHANNELS_LAST
 * (core/layout.h) from a 4-D / 5-D input in any activation order, in one
 * pass with no whole-size conversion — the halves of a reversible coupling
 * whose half width the blocked order would pad. The gradient returns in
 * x's order. Errors as rt_split_channels; RT_ERR_INVALID_ARG for another
 * layout, RT_ERR_SHAPE for channels-last pieces of an input not 4-D or
 * 5-D. (PyTorch: x.split(sizes, 1) then .contiguous(memory_format=
 * torch.channels_last) on each piece.) */
rt_status rt_split_channels_layout(rt_tensor *x, int n, const int64_t *sizes, rt_layout layout, rt_tensor **outs);
/* rt_cat_channels with the result in memory order `layout` (plain, blocked
 * — the total a multiple of rt_layout_block() — or channels-last): from
 * channels-last inputs in one pass, the inverse of rt_split_channels_layout;
 * other inputs are concatenated in their order, then converted. The
 * gradients return in each input's order. Errors as rt_cat_channels;
 * RT_ERR_INVALID_ARG for a layout that is not an activation order or a
 * blocked result of unaligned width, RT_ERR_SHAPE for channels-last inputs
 * not 4-D or 5-D. */
rt_status rt_cat_channels_layout(int n, rt_tensor *const *xs, rt_layout layout, rt_tensor **out);
/* torch.nn.functional.pixel_shuffle(x, upscale_factor = r): x (N, C·r², H, W)
 * → (N, C, H·r, W·r) with
 *   out[n, c, h·r + i, w·r + j] = x[n, c·r² + i·r + j, h, w],  0 <= i, j < r
 * (Shi et al. 2016, "Efficient Sub-Pixel Convolutional Neural Network",
 * eq. 4; PyTorch 1.13's order). A pure permutation: backward is the pixel
 * unshuffle of the gradient. The output has x's memory order when x is
 * PLAIN, or BLOCKED with C a multiple of the block (rt_layout_block());
 * another BLOCKED x is reordered to PLAIN first (differentiably) and the
 * output is PLAIN. r = 1 copies. Saves nothing (only sizes). Backward
 * permutes the incoming gradient in place (through a one-image scratch)
 * when nothing else holds it, so the two gradients never coexist.
 * RT_ERR_INVALID_ARG for r < 1; RT_ERR_SHAPE for x not 4-D or C not a
 * multiple of r². */
rt_status rt_pixel_shuffle(rt_tensor *x, int64_t upscale_factor, rt_tensor **out);
/* rt_pixel_shuffle that consumes x: the caller must not read x's values
 * afterwards (only release it). When x may be consumed (as for
 * rt_mul_scalar_inplace), the output is x's storage permuted in place
 * through a one-image scratch (C·r²·H·W floats) and x's version is bumped;
 * otherwise the output is new, as rt_pixel_shuffle. Same values, gradient
 * and errors as rt_pixel_shuffle either way. For a convolution's output
 * that nothing else keeps (EDSR's upsampler): the two never coexist. No
 * PyTorch counterpart (its pixel_shuffle always copies). */
rt_status rt_pixel_shuffle_inplace(rt_tensor *x, int64_t upscale_factor, rt_tensor **out);
/* torch.nn.functional.pixel_unshuffle(x, downscale_factor = r), the inverse
 * permutation: x (N, C, H·r, W·r) → (N, C·r², H, W),
 *   out[n, c·r² + i·r + j, h, w] = x[n, c, h·r + i, w·r + j].
 * Backward: the pixel shuffle of the gradient. The output has x's memory
 * order unless x is BLOCKED with C not a multiple of the block (then PLAIN,
 * as for rt_pixel_shuffle). Saves nothing.
 * RT_ERR_INVALID_ARG for r < 1; RT_ERR_SHAPE for x not 4-D or H or W not a
 * multiple of r. */
rt_status rt_pixel_unshuffle(rt_tensor *x, int64_t downscale_factor, rt_tensor **out);
/* torch.reshape: same numel; the output shares x's storage. Saves nothing.
 * RT_ERR_INVALID_ARG for shape NULL with ndim > 0; RT_ERR_SHAPE for ndim
 * outside 0..5 or another numel. */
rt_status rt_reshape(rt_tensor *x, int ndim, const int64_t *shape, rt_tensor **out);
/* torch.flatten(x, 1): (N, ...) → (N, prod(...)). Shares storage. */
rt_status rt_flatten(rt_tensor *x, rt_tensor **out);

/* x in memory order `layout` (core/tensor.h, rt_layout): a new reference to
 * x itself when it already is, else a reordered copy (oneDNN reorder),
 * differentiable (backward reorders the gradient back). BLOCKED needs a 4-D
 * or 5-D x with C % rt_layout_block() == 0 (else RT_ERR_INVALID_ARG). Like
 * torch.Tensor.to(memory_format=...). Saves nothing. */
rt_status rt_to_layout(rt_tensor *x, rt_layout layout, rt_tensor **out);
/* Converts a convolution weight in place between PyTorch's OIHW / OIDHW
 * (RT_LAYOUT_PLAIN) and RT_LAYOUT_WEIGHT_BLOCKED, the order oneDNN's direct
 * convolutions compute with (core/layout.h), so that rt_conv reads and its
 * backward writes the weight without reordering it (like PyTorch's
 * module.to(memory_format=torch.channels_last) converting conv weights).
 * w: an f32 leaf (no grad_fn), 4-D or 5-D; blocked needs the output and
 * input channels (shape[0], shape[1]) to be multiples of rt_layout_block()
 * and the weight to be used with groups 1. The values move within w's own
 * storage (through a TEMP copy of w's size), so every tensor and state dict
 * holding w sees the new order; w->grad, if any, is converted too; w's
 * version is bumped. Tensors made earlier that share the storage (detach,
 * view) keep their old layout field: convert before making them.
 * A no-op when w already has `layout`; on meta only the field changes.
 * An optimizer created before follows: rt_optimizer_step puts each
 * parameter's state in the parameter's order (optim/optimizer.h).
 * Errors: RT_ERR_INVALID_ARG (w NULL, a layout other than the two, w not a
 * leaf), RT_ERR_DTYPE (w or its grad not f32), RT_ERR_SHAPE (not 4-D/5-D,
 * channels not multiples of the block for blocked, a grad of another shape
 * or order), RT_ERR_OOM; nothing is changed on an error. */
rt_status rt_weight_set_layout(rt_tensor *w, rt_layout layout);
/* Copies src's values into dst in dst's memory order (rt_tensor_copy, which
 * refuses differing orders, after reordering src through a TEMP copy when
 * the orders differ), not recorded by autograd; bumps dst's version. For
 * filling a weight or its optimizer state in RT_LAYOUT_WEIGHT_BLOCKED from
 * OIHW values read from a file. Both f32, same shape. Errors:
 * RT_ERR_INVALID_ARG (NULL), RT_ERR_DTYPE, RT_ERR_SHAPE, those of the
 * reorder (RT_ERR_OOM). */
rt_status rt_copy_in_layout(rt_tensor *dst, rt_tensor *src);
/* BLOCKED when x is 4-D/5-D with C % rt_layout_block() == 0, else x as it is:
 * what models call after the stem so activations stay in the convolutions'
 * preferred order. */
rt_status rt_to_preferred_layout(rt_tensor *x, rt_tensor **out);

/* Compares a with ref elementwise by logical index, whatever their memory
 * orders (no autograd): *max_abs = max |a - ref| (NaN/Inf count as
 * infinite), *max_ref = max |ref|. Same shapes required (RT_ERR_SHAPE);
 * meta tensors give 0. For reconstruction and equivalence checks.
 * RT_ERR_INVALID_ARG when a, ref, max_abs or max_ref is NULL. */
rt_status rt_compare(rt_tensor *a, rt_tensor *ref, double *max_abs, double *max_ref);
/* max |a - ref| / max |ref| via rt_compare; INFINITY when they cannot be
 * compared (a NULL tensor included; the message is then set). */
double rt_rel_difference(rt_tensor *a, rt_tensor *ref);

/* torch.nn.functional.dropout: in training each element is zeroed with
 * probability p and survivors scaled by 1/(1-p); the mask comes from this
 * thread's Philox generator (core/rng.h) and only (seed, offset) is kept, so
 * backward and recompute rebuild it exactly. Eval or p == 0: returns x itself
 * (a new reference). Saves nothing (the mask is regenerated). */
rt_status rt_dropout(rt_tensor *x, float p, bool training, rt_tensor **out);

/* torch.nn.functional.cross_entropy(logits, target, label_smoothing=ε),
 * mean reduction: logits (N, C) f32, target (N) i32 class indices in [0, C)
 * (out of range → RT_ERR_INVALID_ARG naming the sample; NULL target →
 * RT_ERR_INVALID_ARG, a non-i32 one → RT_ERR_DTYPE). Output: 0-d scalar.
 * Saves: softmax probabilities (N, C) and the target. */
rt_status rt_cross_entropy(rt_tensor *logits, rt_tensor *target, float label_smoothing,
                           rt_tensor **out);
/* torch.nn.functional.mse_loss, mean reduction: x and target same shape.
 * Output: 0-d scalar. Saves: x - target. */
rt_status rt_mse_loss(rt_tensor *x, rt_tensor *target, rt_tensor **out);
/* torch.nn.functional.l1_loss, mean reduction: mean |x − target| over every
 * element, x and target f32 of the same shape (any memory orders; RT_ERR_SHAPE
 * naming both shapes otherwise) on one device. Output: 0-d scalar (the sum in
 * f64, kernels/loss.h). Backward: sgn(x − target)·g/numel for x and its
 * negative for target, sgn(0) = 0 as torch's. EDSR's training loss (Lim et
 * al. 2017, sec. 4.2). Saves: x − target. Errors as rt_mse_loss. */
rt_status rt_l1_loss(rt_tensor *x, rt_tensor *target, rt_tensor **out);

#endif
