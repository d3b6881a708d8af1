/* The library training step: what a PyTorch user writes as
 *     opt.zero_grad(); for micro in batch: loss(model(x), y).backward();
 *     clip_grad_norm_(params); opt.step()
 * in one function that the CLI, the benchmarks, the examples, the tests and
 * the memory prediction (memory/predict.h, which runs it on meta tensors)
 * all call, with hooks where later strategies act:
 *   - after backward, before the step: a gradient all-reduce (data parallel);
 *   - around the step: a loss scaler multiplies the loss, unscales the
 *     gradients before clipping, may skip the step, and updates its scale
 *     after it (PyTorch's GradScaler.scale / unscale_ / step / update). */
#ifndef RT_TRAIN_STEP_H
#define RT_TRAIN_STEP_H

#include <stdbool.h>

#include "../nn/module.h"
#include "../optim/optim.h"

/* A loss: output and target (as the batch gives them) → a 0-d f32 loss with
 * autograd history, mean-reduced over the samples (the micro-batch weights
 * in rt_train_step assume a mean). */
typedef rt_status (*rt_loss_fn)(rt_tensor *output, rt_tensor *target, void *user, rt_tensor **loss);

/* Hooks of one step; every member may be NULL (then: no effect). All get `user`. */
typedef struct rt_train_hooks {
    void *user;
    /* Multiplier of each micro-batch's loss before backward (a loss
     * scaler's current scale); NULL means 1. */
    float (*loss_scale)(void *user);
    /* After the last micro-batch's backward: params[0..n-1] hold their
     * summed .grad (or NULL .grad if unreached). A gradient all-reduce goes here. */
    rt_status (*after_backward)(void *user, rt_tensor *const *params, int n);
    /* Before clipping and the optimizer step: may rescale gradients
     * (unscale) and set *skip to leave the parameters and the optimizer
     * state untouched this step. */
    rt_status (*before_step)(void *user, rt_tensor *const *params, int n, bool *skip);
    /* After the step (stepped false when skipped): a loss scaler's update. */
    rt_status (*after_step)(void *user, bool stepped);
    /* Before micro-batch i's forward (i = 0..k-1 of this step's k): data
     * parallelism reduces gradients only during the last micro-batch's
     * backward (DDP's no_sync() on the others). */
    rt_status (*before_micro_batch)(void *user, int64_t i, int64_t k);
    /* A micro-batch loss that is NaN/Inf is not an error: backward runs
     * (its gradients are non-finite) and before_step is expected to skip
     * (a loss scaler: fp16 overflow shows up here first). */
    bool nonfinite_loss_skips;
} rt_train_hooks;

typedef struct rt_train_config {
    int64_t accum_steps;   /* micro-batches per step, 1..batch size (more are capped at the batch size) */
    float clip;            /* max global L2 norm of the gradients (clip_grad_norm_), 0: off */
    rt_loss_fn loss;       /* NULL: cross-entropy on logits (N, K) and i32 labels (N) */
    float label_smoothing; /* for the default cross-entropy, in [0, 1] */
    void *loss_user;
    rt_train_hooks hooks;
} rt_train_config;

/* What one step did. */
typedef struct rt_train_result {
    double loss;           /* batch loss, the micro-batch losses weighted by sample count (unscaled) */
    int64_t correct;       /* default cross-entropy only: samples whose arg-max logit is the label */
    float grad_norm;       /* global L2 norm before clipping (0 when clip is off) */
    bool stepped;          /* false when a before_step hook skipped the step */
} rt_train_result;

/* One optimizer step of `net` (in its current train/eval mode) on the batch
 * x (N, ...) with targets y (N, ...): zero_grad; for each of K =
 * min(accum_steps, N) micro-batches of ⌈N/K⌉ or ⌊N/K⌋ samples (copies, DATA),
 * before_micro_batch, forward, loss, backward of loss·(n_i/N)·loss_scale; after_backward;
 * before_step; clip; optimizer step unless skipped (a skipped step's
 * gradients are dropped, as zero_grad(set_to_none=True)); after_step. The
 * gradient equals that of the whole batch's mean loss (optim/grad.h).
 * x and y are borrowed; nothing is kept after return. Errors: RT_ERR_INVALID_ARG
 * for NULL arguments, accum_steps < 1 or N mismatch between x and y;
 * RT_ERR_NONFINITE when a micro-batch's loss is NaN/Inf (no step is taken;
 * the message names the fix) unless hooks.nonfinite_loss_skips; those of forward, backward, hooks and the optimizer. */
rt_status rt_train_step(rt_module *net, rt_optimizer *opt, const rt_train_config *cfg, rt_tensor *x, rt_tensor *y,
                        rt_train_result *out);

/* Samples whose arg-max logit (N, K) equals the i32 label (N); 0 on meta,
 * for NULL and for logits/labels of other dtypes or shapes. */
int64_t rt_count_correct(const rt_tensor *logits, const rt_tensor *labels);

/* Copies samples [first, first + count) of a batch into a new DATA tensor
 * (NULL + RT_ERR_OOM / RT_ERR_INVALID_ARG for a NULL t or a range outside
 * the batch). */
rt_tensor *rt_batch_slice(const rt_tensor *t, int64_t first, int64_t count);

#endif
