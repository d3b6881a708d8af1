/* A ConvLSTM next-frame predictor (X. Shi, Z. Chen, H. Wang, D.-Y. Yeung,
 * W. Wong, W. Woo, "Convolutional LSTM Network: A Machine Learning Approach
 * for Precipitation Nowcasting", NeurIPS 2015, equations (3), without the
 * peephole terms W_c∘c, as most ConvLSTM implementations drop them):
 *
 *   [i, f, g, o] = conv_k([x_t, h_{t-1}])          (chunk order i, f, g, o,
 *                                                   as torch.nn.LSTM's)
 *   c_t = σ(f)·c_{t-1} + σ(i)·tanh(g)
 *   h_t = σ(o)·tanh(c_t)
 *   x̂_{t+1} = σ(head_k(h_t))                       (the predicted frame)
 *
 * conv_k and head_k are Conv2d with a k×k kernel, padding k/2 (same size),
 * with bias, PyTorch's default initialisation. State-dict names (as the
 * committed torch reference tools/make_video_fixtures.py): cell.conv.weight
 * (4·hidden, channels + hidden, k, k), cell.conv.bias (4·hidden),
 * head.weight (channels, hidden, k, k), head.bias (channels).
 *
 * As a module (single input, single output, nn/module.h) the predictor is
 * one time step on packed tensors: input cat[x_t, h_{t-1}, c_{t-1}] (N,
 * channels + 2·hidden, H, W) → output cat[h_t, c_t, x̂_{t+1}] (N, 2·hidden
 * + channels, H, W); its child "cell" (ConvLSTMCell) maps cat[x_t, h, c] →
 * cat[h_t, c_t]. The carried state S_t = cat[h_t, c_t] is one tensor, so a
 * sequence is a chain of steps over S (memory/time_chain.h). */
#ifndef RT_MODELS_CONVLSTM_H
#define RT_MODELS_CONVLSTM_H

#include "../nn/modules.h"

typedef struct rt_convlstm_config {
    int channels; /* frame channels (1 for Moving Fashion-MNIST) */
    int hidden;   /* hidden channels of h and c */
    int kernel;   /* odd kernel size of both convolutions (3) */
} rt_convlstm_config;

/* Builds the predictor (class "ConvLSTMPredictor") with parameters on
 * ctx->device, initialised from ctx's stream in the order cell.conv,
 * head. RT_ERR_INVALID_ARG for NULLs, channels/hidden < 1 or an even or
 * non-positive kernel; RT_ERR_OOM. */
rt_status rt_convlstm_create(rt_init_ctx *ctx, const rt_convlstm_config *cfg, rt_module **out);

/* The configuration m was built with; RT_ERR_INVALID_ARG when m is not a
 * ConvLSTMPredictor. */
rt_status rt_convlstm_config_of(rt_module *m, rt_convlstm_config *out);

/* One step on separate tensors: frame x_t (N, channels, H, W), state
 * S_{t-1} (N, 2·hidden, H, W) → *next S_t (same shape) and, when pred is
 * not NULL, *pred x̂_{t+1} (N, channels, H, W) in (0, 1) (the head is
 * skipped when pred is NULL). Runs the module forward (cat → model →
 * split), recording autograd when grad mode is on. Inputs borrowed,
 * outputs new references. Errors: RT_ERR_INVALID_ARG (NULLs, m not a
 * ConvLSTMPredictor), RT_ERR_SHAPE (channels do not match), and the ops'. */
rt_status rt_convlstm_step(rt_module *m, rt_tensor *frame, rt_tensor *state, rt_tensor **next, rt_tensor **pred);

/* A sequence for the time chain (memory/time_chain.h): frames[0..T]
 * (each (N, channels, H, W), borrowed) and the model. */
typedef struct rt_convlstm_seq {
    rt_module *model;
    rt_tensor *const *frames;
    int n_frames; /* T + 1 */
} rt_convlstm_seq;

/* An rt_time_step_fn (user: an rt_convlstm_seq): step t reads frame t and
 * the state, returns S_{t+1} and, when loss is not NULL, the next-frame
 * loss mse_loss(x̂_{t+1}, frames[t+1]) (mean over N·C·H·W, PyTorch's
 * F.mse_loss). RT_ERR_INVALID_ARG for t outside [0, n_frames - 1). */
rt_status rt_convlstm_seq_step(void *user, int t, rt_tensor *state, rt_tensor **next, rt_tensor **loss);

#endif
