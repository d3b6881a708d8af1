/* The leaf modules and Sequential, named and initialised as torch.nn's:
 * Conv2d/Conv3d, BatchNorm2d/3d, Linear, ReLU, LeakyReLU, Dropout, Flatten,
 * MaxPool2d/3d, AvgPool2d/3d, AdaptiveAvgPool2d/3d (output size 1), and
 * revtorch's PreferredLayout. Each constructor returns a new module
 * (rt_module_destroy frees it; a parent frees its children). Forwards are
 * thin wrappers over ops/ops.h: the same shapes, errors and saved tensors.
 * On the meta device initialisation computes nothing but still advances the
 * initialisation stream, so meta and cpu models draw the same numbers.
 * Every constructor returns RT_ERR_INVALID_ARG when its output pointer m or
 * its init context ctx is NULL (*m is NULL on every error when m is not
 * NULL), and RT_ERR_OOM when memory runs out. */
#ifndef RT_NN_MODULES_H
#define RT_NN_MODULES_H

#include "module.h"
#include "../ops/ops.h"

/* Fills t with U(-bound, bound) or N(0, std) from ctx's stream (no-op on
 * meta, which only advances the stream by the same amount). No-op, stream
 * untouched, when ctx or t is NULL or t is not float32. */
void rt_init_uniform(rt_init_ctx *ctx, rt_tensor *t, float bound);
void rt_init_normal(rt_init_ctx *ctx, rt_tensor *t, float std);

/* Weight initialisation of a convolution. */
typedef enum rt_conv_init {
    /* torch.nn.Conv2d's reset_parameters: kaiming_uniform(a=√5), i.e.
     * U(-1/√fan_in, 1/√fan_in) for weight and bias. */
    RT_INIT_DEFAULT = 0,
    /* torchvision ResNet: kaiming_normal_(mode="fan_out", nonlinearity="relu"),
     * std = √(2/fan_out), fan_out = out·prod(k); bias zero. */
    RT_INIT_KAIMING_FAN_OUT,
} rt_conv_init;

/* torch.nn.Conv2d (nsp 2) / Conv3d (nsp 3): weight (out, in/groups, k, k[, k]),
 * bias (out) when `bias`; square kernel k, the same stride and padding on
 * every spatial axis, dilation 1. x (N, in, [D,] H, W) → (N, out, ...), sizes
 * ⌊(i + 2p − (k−1) − 1)/s⌋ + 1. RT_ERR_INVALID_ARG for nsp not 2/3, sizes < 1
 * or groups not dividing in and out. */
rt_status rt_conv_create(rt_init_ctx *ctx, int nsp, int64_t in, int64_t out, int64_t k, int64_t stride,
                         int64_t padding, int64_t groups, bool bias, rt_conv_init init, rt_module **m);

/* Lets a convolution write its output in the blocked order although its
 * input is plain (rt_conv_opts.preferred_output): for the stem convolution
 * that a PreferredLayout follows, which then has nothing to convert. The
 * output's values are the same; only its memory order differs. It follows
 * rt_module_set_blocked: a tree set plain gets plain outputs again.
 * RT_ERR_INVALID_ARG when m is not a Conv2d/Conv3d (NULL included). */
rt_status rt_conv_set_preferred_output(rt_module *m, bool on);
/* rt_module_set_blocked's part for one module: a convolution asked for a
 * preferred output writes blocked exactly when `blocked`. No-op for any
 * other module and for NULL. */
void rt_conv_follow_blocked(rt_module *m, bool blocked);
/* Puts the weight of every Conv2d/Conv3d in m's tree whose groups are 1 and
 * whose output and input channels are multiples of rt_layout_block() into
 * `layout` (rt_weight_set_layout, ops/ops.h): RT_LAYOUT_WEIGHT_BLOCKED, the
 * order oneDNN's direct convolutions compute with, so a training step
 * reorders a weight once (into backward-data's transposed order) instead of
 * three times (into the forward's order, into backward-data's, and the
 * weight gradient back to OIHW); RT_LAYOUT_PLAIN puts every converted weight
 * back into PyTorch's OIHW. Other convolutions (the stem's 3 input
 * channels, grouped ones) stay plain. State dicts and weight files
 * (io/weights.h) still see OIHW: saving and loading convert. rt_model_create
 * (models/model.h) converts its models. An optimizer's state follows at
 * its next step (rt_optimizer_step). *converted (may be
 * NULL) receives the number of weights now in `layout` that were not.
 * Errors: RT_ERR_INVALID_ARG (m NULL, another layout), those of
 * rt_weight_set_layout (RT_ERR_OOM); weights converted before an error stay
 * converted. Like PyTorch's model.to(memory_format=torch.channels_last),
 * which also changes the conv weights' memory order. */
rt_status rt_module_set_weight_layout(rt_module *m, rt_layout layout, int *converted);

/* torch.nn.BatchNorm2d/3d(channels): weight 1, bias 0, running_mean 0,
 * running_var 1, num_batches_tracked 0, momentum 0.1, eps 1e-5; batch
 * statistics and a running update in training, running statistics in eval.
 * fuse_relu appends a ReLU computed in the same pass (ops/batchnorm_relu.h:
 * the same values and running statistics, a bit mask kept instead of the
 * ReLU's output) — an implementation detail that adds no state-dict entry,
 * as torchvision's separate `relu` module has none. */
rt_status rt_batchnorm_create(rt_init_ctx *ctx, int nsp, int64_t channels, bool fuse_relu, rt_module **m);
/* Sets a batch norm's momentum (in [0, 1]) and eps (> 0), the constructor
 * arguments of torch.nn.BatchNorm2d. RT_ERR_INVALID_ARG when m is not a
 * batch norm (NULL included) or a value is out of range. */
rt_status rt_batchnorm_configure(rt_module *m, float momentum, float eps);

/* A batch norm's state, for code that replaces its arithmetic (data
 * parallelism's SyncBatchNorm, dist/sync_bn.h). Pointers are borrowed from
 * the module. */
typedef struct rt_batchnorm_view {
    rt_tensor *weight, *bias, *running_mean, *running_var;
    int64_t *num_batches_tracked;
    float momentum, eps;
    bool fuse_relu;
} rt_batchnorm_view;
/* Fills *out; RT_ERR_INVALID_ARG when m is not a batch norm (NULL included)
 * or out is NULL. */
rt_status rt_batchnorm_view_get(rt_module *m, rt_batchnorm_view *out);
/* Replaces a batch norm's function: its forward then calls
 * fn(user, m, x, &y) instead of F.batch_norm (fn applies the fused ReLU
 * itself when the view says so). NULL fn restores the built-in one; the
 * module's class and state-dict names do not change (as
 * torch.nn.SyncBatchNorm.convert_sync_batchnorm keeps the parameters).
 * RT_ERR_INVALID_ARG when m is not a batch norm. */
typedef rt_status (*rt_batchnorm_fn)(void *user, rt_module *m, rt_tensor *x, rt_tensor **y);
rt_status rt_batchnorm_set_function(rt_module *m, rt_batchnorm_fn fn, void *user);

/* torch.nn.Linear(in, out): weight (out, in), bias (out), both U(-1/√in, 1/√in).
 * x (N, in) → (N, out). */
rt_status rt_linear_create(rt_init_ctx *ctx, int64_t in, int64_t out, bool bias, rt_module **m);

/* torch.nn.ReLU, LeakyReLU(negative_slope), Dropout(p) (p in [0, 1); the
 * mask replays under recompute, ops/ops.h), Flatten (start_dim 1). */
rt_status rt_relu_create(rt_module **m);
rt_status rt_leaky_relu_create(float negative_slope, rt_module **m);
rt_status rt_dropout_create(float p, rt_module **m);
rt_status rt_flatten_create(rt_module **m);

/* torch.nn.MaxPool2d/3d and AvgPool2d/3d (count_include_pad) with a square
 * kernel, stride (0: = kernel) and padding on nsp spatial axes. */
rt_status rt_max_pool_create(int nsp, int64_t kernel, int64_t stride, int64_t padding, rt_module **m);
rt_status rt_avg_pool_create(int nsp, int64_t kernel, int64_t stride, int64_t padding, rt_module **m);
/* torch.nn.AdaptiveAvgPool2d/3d(1): (N, C, ...) → (N, C, 1, 1[, 1]). Only
 * output size 1 exists (RT_ERR_INVALID_ARG otherwise). */
rt_status rt_adaptive_avg_pool_create(int nsp, int64_t output_size, rt_module **m);

/* revtorch's PreferredLayout: converts activations to the convolutions'
 * preferred memory order (rt_to_preferred_layout, core/tensor.h rt_layout)
 * when enabled, else passes x through. Models place it after their stem;
 * rt_module_set_blocked switches every one in a tree, for comparing
 * layouts. No tensors. */
rt_status rt_preferred_layout_create(rt_module **m);
/* Enables (blocked) or disables every PreferredLayout module under m. No-op
 * for NULL. */
void rt_module_set_blocked(rt_module *m, bool blocked);

/* torch.nn.Sequential: runs its children in insertion order, each on the
 * previous one's output, releasing every intermediate as soon as the next
 * child has consumed it. Children are added with rt_module_append (named
 * "0", "1", …) or rt_module_add_child (any names, as a model's top level). */
rt_status rt_sequential_create(rt_module **m);

/* Chains a call that consumes activation h into a new one: runs `expr`
 * (which must write its result to `next`), releases the old h, makes h the
 * result, and returns the status from the enclosing function on failure
 * (h is then NULL, so nothing leaks). Usage:
 *     RT_SEQ(h, y, rt_relu(h, &y));
 * Releasing the input at once is what lets a dead intermediate be freed the
 * moment nothing else (the graph) holds it. */
#define RT_SEQ(h, next, expr)                                                            \
    do {                                                                                 \
        rt_tensor *next = NULL;                                                          \
        rt_status rt_seq_s_ = (expr);                                                    \
        rt_tensor_release(h);                                                            \
        (h) = next;                                                                      \
        if (rt_seq_s_ != RT_OK) return rt_seq_s_;                                        \
    } while (0)

/* Adds the module that `expr` creates into `m` (a variable the macro
 * declares) as child `name` of `parent`, returning the status from the
 * enclosing function on failure (a failed add destroys the child). Usage:
 *     RT_ADD_CHILD(net, "fc", rt_linear_create(ctx, 64, 10, true, &m));
 * Builders use it inside a function whose caller destroys the parent on error. */
#define RT_ADD_CHILD(parent, name, expr)                                                 \
    do {                                                                                 \
        rt_module *m = NULL;                                                             \
        RT_TRY(expr);                                                                    \
        RT_TRY(rt_module_add_child(parent, name, m));                                    \
    } while (0)

#endif
