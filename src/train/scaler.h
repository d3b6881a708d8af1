/* Dynamic loss scaling: PyTorch's torch.cuda.amp.GradScaler (1.13,
 * torch/cuda/amp/grad_scaler.py; the CPU kernels of
 * aten/src/ATen/native/cpu/AmpGradScalerKernels.cpp) for the library
 * training step (train/step.h).
 *
 * Why: in float16 a gradient below 2^-24 flushes to zero and one above 65504
 * becomes Inf. Multiplying the loss by a large scale S before backward moves
 * small gradients into f16's range; the gradients are divided by S again
 * ("unscaled") before clipping and the optimizer. When S is too large some
 * gradient overflows: the step is skipped and S halves; after
 * growth_interval finite steps in a row S doubles again.
 *
 * Semantics (each mirrors GradScaler unless marked revtorch):
 * - scale(): the current S, f32 (init 2^16).
 * - unscale (GradScaler.unscale_): every non-NULL p->grad (f32) is
 *   multiplied by inv = (float)(1.0 / (double)S), the reciprocal taken in
 *   double as PyTorch does; found_inf is set when any element of any grad is
 *   Inf or NaN. Once per optimizer step: a second unscale before update is
 *   RT_ERR_STATE (PyTorch: RuntimeError "unscale_() has already been called
 *   on this optimizer since the last update()").
 * - the step (GradScaler.step): unscales if not yet unscaled; skips the
 *   optimizer step when found_inf — weights, optimizer moments and the
 *   optimizer's step count stay as they were, so an LR schedule that is a
 *   function of the step count (optim/schedule.h) advances only on applied
 *   steps. rt_train_step also drops the accumulated gradients of a skipped
 *   step (zero_grad), so an Inf in any micro-batch skips the whole
 *   accumulated step and leaves nothing behind.
 * - update (GradScaler.update): found_inf → S ← max(S·backoff, min_scale)
 *   and the growth tracker ← 0; else tracker + 1, and when it reaches
 *   growth_interval: S ← S·growth if that is finite, tracker ← 0.
 * - revtorch: min_scale (default 1; PyTorch has no floor and documents that
 *   the scale may fall below 1) and max_skipped_in_row: that many skipped
 *   steps in a row make update return RT_ERR_NONFINITE with a message, so a
 *   run whose loss or gradients stay non-finite stops instead of running on
 *   without learning.
 *
 * With accumulation the training step calls loss_scale for every
 * micro-batch (all see the same S) and unscales once, after the last
 * micro-batch (the "stepping" one), as PyTorch's recipe does.
 *
 * Not thread-safe: one scaler per training loop. */
#ifndef RT_TRAIN_SCALER_H
#define RT_TRAIN_SCALER_H

#include <stdbool.h>
#include <stdint.h>

#include "step.h"

typedef struct rt_grad_scaler rt_grad_scaler;

typedef struct rt_grad_scaler_opts {
    float init_scale;            /* 65536 (2^16) */
    float growth_factor;         /* 2, must be > 1 */
    float backoff_factor;        /* 0.5, must be in (0, 1) */
    int64_t growth_interval;     /* 2000 finite steps in a row before growing, >= 1 */
    float min_scale;             /* 1: the scale never backs off below it (revtorch), > 0 */
    int64_t max_skipped_in_row;  /* 50: skipped steps in a row that stop training (revtorch); 0: never */
} rt_grad_scaler_opts;

/* GradScaler's defaults plus revtorch's min_scale 1 and max_skipped_in_row 50. */
rt_grad_scaler_opts rt_grad_scaler_default_opts(void);

/* A scaler with the options *o (NULL: the defaults). NULL + RT_ERR_INVALID_ARG
 * for options out of range (the message names the field), RT_ERR_OOM. */
rt_grad_scaler *rt_grad_scaler_create(const rt_grad_scaler_opts *o);
void rt_grad_scaler_destroy(rt_grad_scaler *s);

/* The current scale S (0 for NULL). */
float rt_grad_scaler_get_scale(const rt_grad_scaler *s);
/* Steps skipped since creation, and in a row now (0 for NULL). */
int64_t rt_grad_scaler_skipped(const rt_grad_scaler *s);
int64_t rt_grad_scaler_skipped_in_row(const rt_grad_scaler *s);

/* GradScaler.unscale_: divides every non-NULL params[i]->grad (f32, cpu;
 * meta grads are skipped) by S and sets *found_inf (may be NULL) when any
 * element is Inf or NaN. Errors: RT_ERR_INVALID_ARG (s NULL, params NULL
 * with n > 0), RT_ERR_STATE on a second unscale before update,
 * RT_ERR_DTYPE for a grad that is not f32. */
rt_status rt_grad_scaler_unscale(rt_grad_scaler *s, rt_tensor *const *params, int n, bool *found_inf);

/* GradScaler.update after a step (the found_inf of this step's unscale; a
 * step that was never unscaled counts as finite). Errors: RT_ERR_INVALID_ARG
 * for NULL; RT_ERR_NONFINITE when this makes max_skipped_in_row skipped steps
 * in a row (the scale has been updated; the message names the fix). */
rt_status rt_grad_scaler_update(rt_grad_scaler *s);

/* The hooks that plug s into rt_train_step (train/step.h): loss_scale = S,
 * before_step = unscale (if not done) + skip on found_inf, after_step =
 * update; a non-finite loss is a skipped step, not an error. after_backward
 * is NULL (set it yourself for an all-reduce: it runs before unscale).
 * s is borrowed and must outlive the steps that use the hooks; NULL gives
 * hooks that do nothing (all members NULL). */
rt_train_hooks rt_grad_scaler_hooks(rt_grad_scaler *s);

/* Checkpoint state (GradScaler.state_dict's scale and _growth_tracker, plus
 * the skip counters): get fills what is not NULL; set restores them.
 * Errors: RT_ERR_INVALID_ARG (s NULL, scale not finite or <= 0, negative counts). */
rt_status rt_grad_scaler_state_get(const rt_grad_scaler *s, float *scale, int64_t *growth_tracker,
                                   int64_t *skipped);
rt_status rt_grad_scaler_state_set(rt_grad_scaler *s, float scale, int64_t growth_tracker, int64_t skipped);

#endif
