/* Layers with parameters, named and initialised as torch.nn's: Conv2d/Conv3d,
 * BatchNorm2d/3d, Linear. Each layer registers its tensors in a state dict
 * under `prefix` (e.g. "layer1.0.conv1") and keeps borrowed pointers to them.
 * Forward functions are thin wrappers over ops/ops.h (same shapes, errors
 * and saved tensors). On the meta device initialisation computes nothing. */
#ifndef RT_NN_LAYERS_H
#define RT_NN_LAYERS_H

#include "nn/state_dict.h"
#include "ops/ops.h"

/* torch.nn.Conv2d (nsp 2) / Conv3d (nsp 3): weight (out, in/groups, k...),
 * optional bias (out). */
typedef struct rt_conv_layer {
    rt_tensor *weight, *bias;
    rt_conv_opts opts;
} rt_conv_layer;

/* Weight initialisation of a convolution. */
typedef enum rt_conv_init {
    /* torch.nn.Conv2d's reset_parameters: kaiming_uniform(a=√5), i.e.
     * U(-1/√fan_in, 1/√fan_in) for weight and bias. */
    RT_INIT_DEFAULT = 0,
    /* torchvision ResNet: kaiming_normal_(mode="fan_out", nonlinearity="relu"),
     * std = √(2/fan_out), fan_out = out·prod(k); bias zero. */
    RT_INIT_KAIMING_FAN_OUT,
} rt_conv_init;

/* Square kernel k, stride, padding and groups for all spatial dims. */
rt_status rt_conv_layer_init(rt_conv_layer *m, rt_state_dict *sd, const char *prefix, int nsp,
                             int64_t in, int64_t out, int64_t k, int64_t stride, int64_t padding,
                             int64_t groups, bool bias, rt_conv_init init);
rt_status rt_conv_layer_forward(const rt_conv_layer *m, rt_tensor *x, rt_tensor **y);

/* torch.nn.BatchNorm2d/3d: weight=1, bias=0, running_mean=0, running_var=1,
 * num_batches_tracked=0, momentum 0.1, eps 1e-5. */
typedef struct rt_batchnorm_layer {
    rt_tensor *weight, *bias, *running_mean, *running_var;
    int64_t num_batches_tracked;
    float momentum, eps;
} rt_batchnorm_layer;

rt_status rt_batchnorm_layer_init(rt_batchnorm_layer *m, rt_state_dict *sd, const char *prefix,
                                  int64_t channels);
/* training selects batch statistics + running update (train()) or running statistics (eval()). */
rt_status rt_batchnorm_layer_forward(rt_batchnorm_layer *m, rt_tensor *x, bool training, rt_tensor **y);

/* relu(batch_norm(x)) in one pass (ops/batchnorm_relu.h): the same result
 * and running statistics as the two layers in sequence, faster, and it keeps
 * a bit-mask instead of the ReLU output for backward. */
rt_status rt_batchnorm_relu_layer_forward(rt_batchnorm_layer *m, rt_tensor *x, bool training, rt_tensor **y);

/* torch.nn.Linear: weight (out, in), bias (out), both U(-1/√in, 1/√in). */
typedef struct rt_linear_layer {
    rt_tensor *weight, *bias;
} rt_linear_layer;

rt_status rt_linear_layer_init(rt_linear_layer *m, rt_state_dict *sd, const char *prefix, int64_t in,
                               int64_t out, bool bias);
rt_status rt_linear_layer_forward(const rt_linear_layer *m, rt_tensor *x, rt_tensor **y);

/* Chains an op that consumes activation h into a new one: runs `expr`
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

/* Fills t with U(-bound, bound) or N(0, std) from sd's init stream (no-op on meta). */
void rt_init_uniform(rt_state_dict *sd, rt_tensor *t, float bound);
void rt_init_normal(rt_state_dict *sd, rt_tensor *t, float std);

#endif
