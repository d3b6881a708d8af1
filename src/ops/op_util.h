/* Internal helpers shared by the op implementations (not installed). */
#ifndef RT_OPS_OP_UTIL_H
#define RT_OPS_OP_UTIL_H

#include "autograd/node.h"
#include "backend/backend.h"
#include "core/tensor.h"
#include "kernels/conv.h"

/* RT_ERR_DTYPE unless t is float32; RT_ERR_INVALID_ARG when t is NULL. */
static inline rt_status rt_op_check_f32(const rt_tensor *t, const char *op, const char *arg) {
    if (!t) return rt_error_set(RT_ERR_INVALID_ARG, "%s: %s is NULL", op, arg);
    if (t->dtype != RT_F32)
        return rt_error_set(RT_ERR_DTYPE, "%s: %s must be float32, got %s (convert with rt_tensor_to)",
                            op, arg, rt_dtype_str(t->dtype));
    return RT_OK;
}

/* The input check of an op that reads a bf16 activation as it is (conv,
 * batch_norm, batch_norm_relu): RT_OK for an f32 x, and for a bf16 x inside
 * a bf16-compute region on a backend with bf16 convolutions, the only
 * place one exists (a residual block's interior, autograd/node.h
 * rt_autocast_activation_dtype); *bf16 says which. RT_ERR_INVALID_ARG for
 * NULL x, RT_ERR_DTYPE for any other dtype or place. */
static inline rt_status rt_op_check_activation(const rt_tensor *x, const char *op, bool *bf16) {
    *bf16 = false;
    if (!x) return rt_error_set(RT_ERR_INVALID_ARG, "%s: input is NULL", op);
    if (x->dtype == RT_F32) return RT_OK;
    *bf16 = x->dtype == RT_BF16 && rt_autocast_compute_dtype() == RT_BF16 && rt_backend_of(x)->conv_bf16_available();
    if (*bf16) return RT_OK;
    return rt_error_set(RT_ERR_DTYPE, "%s: input must be float32 (bfloat16 only inside a bf16 precision region on a "
                        "CPU with bf16 kernels), got %s (convert with rt_tensor_to)", op, rt_dtype_str(x->dtype));
}

/* True when an op may write its output over x's storage ("consume" x, the
 * in-place variants such as rt_mul_scalar_inplace): x is the only reference
 * to its storage, no autograd node saved it, and it is not a leaf that
 * requires grad (whose values the user owns). The caller of a consuming op
 * promises not to read x afterwards. The engine's rule for gradients it may
 * overwrite, applied to an activation. */
static inline bool rt_op_can_consume(const rt_tensor *x) {
    return x->refcount == 1 && x->storage->refcount == 1 && x->storage->saved_count == 0 &&
           !(x->requires_grad && !x->grad_fn);
}

/* The incoming gradient dy of the node's output `i`, taken over when the
 * backward may write its result over it: dy is the engine's own buffer for
 * that output (grad_buf, not a gradient a hook replaced) and nobody else
 * holds it (rt_op_can_consume: no retained .grad, not saved). The caller
 * then owns the reference and may overwrite the values; NULL otherwise,
 * and the caller allocates its result. The rule of every backward that
 * computes in place over its gradient (relu, pixel shuffle). */
static inline rt_tensor *rt_op_take_exclusive_grad(rt_node *self, int i, rt_tensor *dy) {
    return dy && self->grad_buf[i] == dy && rt_op_can_consume(dy) ? rt_node_take_grad(self, i) : NULL;
}

/* x's storage as a new tensor without history, for a consuming op's output
 * (its values overwritten, its version bumped); the op sets its shape and
 * attaches its node. NULL with the message set on OOM. */
static inline rt_tensor *rt_op_take_storage(rt_tensor *x) {
    rt_tensor_bump_version(x);
    rt_tensor *y = rt_tensor_detach(x);
    if (y) y->requires_grad = false; /* rt_op_return sets it when x requires grad */
    return y;
}

/* The output buffer of an elementwise op that reads x (and `other`, or
 * NULL): x's own storage (rt_op_take_storage) when the caller handed x over
 * (consume), rt_op_can_consume allows it and other does not share it — the
 * op writes y[i] from x[i] (and other[i]) in place — else a new TEMP
 * tensor like x. The one rule of every consuming forward (rt_relu_inplace,
 * rt_mul_scalar_inplace, rt_add_inplace, rt_sub_inplace,
 * rt_add_relu_inplace). NULL with the message set on OOM. */
static inline rt_tensor *rt_op_output_over(rt_tensor *x, bool consume, const rt_tensor *other) {
    bool over = consume && rt_op_can_consume(x) && !(other && other->storage == x->storage);
    return over ? rt_op_take_storage(x) : rt_tensor_empty_like(x, RT_MEM_TEMP);
}

/* RT_ERR_INVALID_ARG when the caller passed no place for the result. */
static inline rt_status rt_op_check_out(const void *out, const char *op) {
    if (!out) return rt_error_set(RT_ERR_INVALID_ARG, "%s: out is NULL (pass the address of an rt_tensor *)", op);
    return RT_OK;
}

/* RT_ERR_INVALID_ARG when a and b live on different devices. */
static inline rt_status rt_op_check_device(const rt_tensor *a, const rt_tensor *b, const char *op) {
    if (b && a->device != b->device)
        return rt_error_set(RT_ERR_INVALID_ARG, "%s: tensors are on different devices (cpu and meta)", op);
    return RT_OK;
}

/* The checks of an elementwise op on two tensors (add, sub, add_relu): both
 * f32, one device, the same shape (no broadcasting: RT_ERR_SHAPE). */
static inline rt_status rt_op_check_pair(const rt_tensor *a, const rt_tensor *b, const char *op) {
    RT_TRY(rt_op_check_f32(a, op, "first input"));
    RT_TRY(rt_op_check_f32(b, op, "second input"));
    RT_TRY(rt_op_check_device(a, b, op));
    if (!rt_tensor_same_shape(a, b)) {
        char sa[64], sb[64];
        return rt_error_set(RT_ERR_SHAPE, "%s: shapes %s and %s differ (no broadcasting)", op,
                            rt_tensor_shape_str(a, sa, sizeof sa), rt_tensor_shape_str(b, sb, sizeof sb));
    }
    return RT_OK;
}

/* A new f32 activation (TEMP) of `shape` on like's device; NULL + message on failure. */
static inline rt_tensor *rt_op_new(const rt_tensor *like, int ndim, const int64_t *shape) {
    return rt_tensor_create(ndim, shape, RT_F32, like->device, RT_MEM_TEMP);
}

/* The storage whose reordered copies a convolution keeps for weight w
 * (kernels/conv.h "Weight cache"): w's storage when w is a parameter (its
 * storage is booked as RT_MEM_PARAM, as every module's weights are) and
 * this thread has the cache on; NULL otherwise (inputs and computed
 * weights are reordered per call, as before the cache). */
static inline rt_storage *rt_conv_weight_cache_of(const rt_tensor *w) {
    return w && w->storage && w->storage->category == RT_MEM_PARAM && rt_conv_weight_cache_enabled() ? w->storage
                                                                                                    : NULL;
}

/* Shortcut for "this op computes nothing on meta tensors". */
static inline int rt_op_compute(const rt_tensor *t) { return !rt_tensor_is_meta(t); }

/* Fetches saved slot i into local `var`, returning the error from the
 * enclosing backward when the graph was released. */
#define RT_SAVED(node, i, var) RT_TRY(rt_node_saved((node), (i), &(var)))

struct rt_backend;
/* The backend passes of a convolution-like op, `shape` its own shape
 * struct (rt_conv_shape, rt_deconv_shape): weights computes dw (and db when
 * not NULL) from the saved input x and dy; data computes dx from w (and
 * its weight cache, NULL for none) and dy. dw, db and w are f32, in the
 * op's layouts; x, dy and dx are f32 unless the flag beside them says bf16
 * (dx is bf16 when the op's input was: the gradient has its tensor's dtype).
 * The table's flags say what rt_conv_like_backward hands them:
 *   x_bf16:  x as a precision region stores it, its bf16 copy
 *            (rt_node_saved_stored), when it has one — a bf16 kernel reads
 *            it as it is, no unpack to f32 and reorder back;
 *   dy_bf16: dy converted to bf16 once for both passes (a shape that
 *            computes in bf16: each pass would convert it itself; the
 *            node's grad_dtype is then f32, as this conversion rounds it);
 *            a dy that arrives bf16 (the gradient of a bf16 output) is
 *            read as it is by any op whose shape has compute_bf16.
 * An op sets them only for shapes that compute in bf16 (or read a bf16 x
 * anyway), so the values are those the kernels would use. */
typedef struct rt_conv_passes {
    rt_status (*weights)(const struct rt_backend *be, const void *shape, const void *x, bool x_bf16, const void *dy,
                         bool dy_bf16, float *dw, float *db);
    rt_status (*data)(const struct rt_backend *be, const void *shape, const float *w, rt_storage *w_cache,
                      const void *dy, bool dy_bf16, bool dx_bf16, void *dx);
    bool x_bf16, dy_bf16;
} rt_conv_passes;

/* The backward of a convolution-like node with saved slots 0 = x and
 * 1 = w and inputs (x, w, bias): the weight and bias gradients first (the
 * last use of x), then x is dropped (rt_node_drop_saved: a no-op under
 * retain_graph or while another node holds its storage), then dx, x's
 * shape and layout, is allocated and computed: the saved input and the
 * input gradient never coexist. Gradients are booked RT_MEM_TEMP; c_out
 * sizes db. Errors: RT_ERR_GRAPH_RELEASED, RT_ERR_OOM, the passes'.
 * (ops/conv.c; PyTorch computes the same three gradients.) */
rt_status rt_conv_like_backward(rt_node *self, rt_tensor *const *grad_out, rt_tensor **grad_in, const void *shape,
                                int64_t c_out, bool has_bias, const rt_conv_passes *passes);

struct rt_bn_shape;
/* The argument checks of batch_norm and batch_norm_relu (`op` names the op
 * in messages): all five tensors f32, x (N, C, ...), the four per-channel
 * tensors (C), and in training more than one value per channel
 * (RT_ERR_SHAPE, as PyTorch). Fills *s from x's shape, layout and eps. */
rt_status rt_bn_op_shape(const char *op, const rt_tensor *x, const rt_tensor *weight, const rt_tensor *bias,
                         const rt_tensor *running_mean, const rt_tensor *running_var, bool training, float eps,
                         struct rt_bn_shape *s);
/* Batch norm's running-statistics update, shared by batch_norm and the fused
 * batch_norm_relu: running = (1-m)·running + m·batch with the unbiased
 * variance (PyTorch). mean/var: the batch statistics (C floats, biased var). */
void rt_bn_update_running(const struct rt_bn_shape *s, float momentum, const float *mean, const float *var,
                          rt_tensor *running_mean, rt_tensor *running_var);
/* The batch statistics of a training batch norm, two (C) f32 tensors like
 * running_mean: in a recompute whose region kept its forward's
 * (rt_saved_memo_take, autograd/node.h), those, with s->given_stats set so
 * the kernel normalises with them and skips its two statistics passes;
 * otherwise new TEMP tensors for the kernel to fill (s->given_stats
 * false). Either way the caller owns *mean and *var and offers them to
 * the region afterwards with rt_bn_stats_offer. Errors: RT_ERR_OOM,
 * RT_ERR_STATE (what the region handed back does not fit). */
rt_status rt_bn_stats_tensors(struct rt_bn_shape *s, const rt_tensor *running_mean, rt_tensor **mean,
                              rt_tensor **var);
/* Offers a training forward's statistics to the checkpoint region around
 * it (rt_saved_memo_keep, keyed by running_mean), which keeps them for its
 * recompute; does nothing when they were handed back (s->given_stats) or
 * no region keeps them. */
rt_status rt_bn_stats_offer(const struct rt_bn_shape *s, const rt_tensor *running_mean, rt_tensor *mean,
                            rt_tensor *var);
/* What a training batch norm saves for backward in place of its input x and
 * batch mean. Outside a half-precision region (rt_autocast_dtype() f32): x
 * and mean themselves (new references). Inside one: x − mean stored in the
 * region's dtype (a SAVED bf16/f16 tensor, written in the centring pass;
 * the region keeps a tensor that is not f32 as it is) and a zero mean (a
 * TEMP f32 tensor), because a half copy of x rounds a channel's deviations
 * at its mean's scale (a nearly constant channel loses them: wrong
 * gradients, and in a reversible block's rebuild a drift past the check),
 * while a copy of x − mean keeps them to the half type's relative
 * precision. The backward computes the same from either pair, reading the
 * saved x through rt_bn_saved_x. NULL outputs, message set, on failure. */
rt_status rt_bn_saved_input(const struct rt_bn_shape *s, rt_tensor *x, rt_tensor *mean, rt_tensor **saved_x,
                            rt_tensor **saved_mean);
/* Saved slot 0 of a batch-norm node as f32: a new reference to the saved
 * tensor, or, for the half tensor rt_bn_saved_input saves in a region, a
 * new TEMP f32 copy (what the region's hook gives for the copies it makes).
 * The caller releases it. Errors: rt_node_saved's, RT_ERR_OOM. */
rt_status rt_bn_saved_x(rt_node *node, rt_tensor **x);
/* The x and dy a batch-norm backward computes with (new references the
 * caller releases), and *s's bf16 flag to match: in training, when the
 * forward's x was bf16 (s->bf16 as the forward left it) and the gradient
 * arrives bf16 (the next convolution's bf16 dx), the saved bf16 x and dy
 * themselves (s->bf16 stays set: oneDNN's bf16 backward writes a bf16
 * dx, the input's dtype); otherwise f32 (rt_bn_saved_x, dy converted if
 * it is not f32) with s->bf16 cleared. Errors: rt_node_saved's,
 * RT_ERR_OOM. */
rt_status rt_bn_backward_operands(rt_node *node, struct rt_bn_shape *s, bool training, rt_tensor *dy_in,
                                  rt_tensor **x, rt_tensor **dy);

/* Ends a backward that computed every input's gradient in one kernel call:
 * on success hands grads[i] to grad_in[i] for each input that wants one;
 * always releases the creator's references to grads. Returns st. */
static inline rt_status rt_op_hand_grads(rt_status st, const rt_node *node, int n, rt_tensor *const *grads,
                                         rt_tensor **grad_in) {
    for (int i = 0; i < n; i++) {
        if (st == RT_OK && rt_node_needs_grad(node, i)) grad_in[i] = rt_tensor_retain(grads[i]);
        rt_tensor_release(grads[i]);
    }
    return st;
}

/* Ends a single-output op: on success attaches y to node (if any) and hands
 * y to *out; on failure releases y. Always drops the creator's node reference. */
static inline rt_status rt_op_return(rt_status st, rt_node *node, rt_tensor *y, rt_tensor **out) {
    if (st == RT_OK) rt_node_set_output(node, y, 0);
    rt_node_release(node);
    if (st != RT_OK) {
        rt_tensor_release(y);
        return st;
    }
    *out = y;
    return RT_OK;
}

#endif
