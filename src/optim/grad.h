/* Gradient utilities: norm clipping (torch.nn.utils.clip_grad_norm_) and
 * the loss scaling rule for gradient accumulation over micro-batches. */
#ifndef RT_OPTIM_GRAD_H
#define RT_OPTIM_GRAD_H

#include <stdint.h>

#include "../core/status.h"
#include "../core/tensor.h"

/* torch.nn.utils.clip_grad_norm_(params, max_norm, norm_type=2,
 * error_if_nonfinite=True), PyTorch 1.13:
 *     total = || (||g_1||_2, ..., ||g_k||_2) ||_2   over every non-NULL p->grad
 *           (= the L2 norm of all gradients concatenated)
 *     coef  = max_norm / (total + 1e-6)
 *     if coef < 1: every g ← coef · g                 (clamp(coef, max=1))
 * So gradients are scaled only when total > max_norm (to within 1e-6), and
 * then have norm ≈ max_norm. The squares are summed in double.
 *
 * params[0..n-1] are borrowed; entries with a NULL grad are skipped, as are
 * grads on the meta device (nothing to read; they add 0 to the norm). n = 0
 * gives total 0. max_norm = +Inf only measures the norm.
 * *total_norm_out (may be NULL) receives the total norm before clipping,
 * also when it is non-finite.
 * Errors: RT_ERR_NONFINITE when the total norm is NaN or Inf: the message
 * names the first parameter whose grad is non-finite, and no gradient is
 * modified (PyTorch's error_if_nonfinite=True; its default False would
 * multiply every gradient by NaN). The caller normally skips the step.
 * RT_ERR_INVALID_ARG for NULL params (n > 0), a NULL entry, or max_norm NaN
 * or negative; RT_ERR_DTYPE for a grad that is not f32. */
rt_status rt_clip_grad_norm(rt_tensor *const *params, int n, float max_norm, float *total_norm_out);

/* ---- gradient accumulation -------------------------------------------------
 *
 * To train with a batch of N samples in less memory, split it into K
 * micro-batches of n_1 + ... + n_K = N samples. For a mean-reduced loss
 * (PyTorch's reduction='mean'), micro-batch k gives the mean gradient g_k over
 * its n_k samples, and the full-batch gradient is
 *
 *     g = Σ_k (n_k / N) · g_k
 *
 * Since backward accumulates into .grad (adds), multiplying micro-batch k's
 * loss by n_k / N before its backward makes .grad equal g after the K-th
 * backward. (Equal micro-batches give the familiar loss / K; a smaller last
 * micro-batch must get its own smaller weight.) The recipe:
 *
 *     rt_optimizer_zero_grad(opt);                        // once
 *     for k in 0..K-1:
 *         loss_k = forward(micro-batch k)                 // mean over its n_k samples
 *         loss_k = loss_k * rt_accum_loss_scale(n_k, N)   // scale the loss, not the grads
 *         rt_backward(loss_k, ...)                        // accumulates into .grad
 *     rt_clip_grad_norm(params, n, max_norm, &norm);      // optional, once, on the full gradient
 *     rt_optimizer_step(opt);                             // once
 *
 * Caveat: BatchNorm statistics are computed per micro-batch, so a network
 * with BatchNorm is not exactly the full-batch computation (as in PyTorch).
 */

/* n_k / N as a float: the weight of a micro-batch of `micro_batch_size`
 * samples in a full batch of `full_batch_size` samples. NaN when either is
 * <= 0 or micro_batch_size > full_batch_size (so a misuse poisons the loss
 * visibly instead of silently training on a wrong gradient). */
float rt_accum_loss_scale(int64_t micro_batch_size, int64_t full_batch_size);

/* Optional bookkeeping for the recipe above: checks that the micro-batches
 * add up to the full batch. Plain struct, no heap. */
typedef struct rt_grad_accumulator {
    int64_t full_batch_size; /* N */
    int64_t samples;         /* Σ n_k so far */
    int micro_batches;       /* K so far */
} rt_grad_accumulator;

/* Starts a full batch of `full_batch_size` samples (after zero_grad). No-op
 * for NULL. */
void rt_grad_accumulator_begin(rt_grad_accumulator *a, int64_t full_batch_size);
/* Records a micro-batch of n_k samples and returns its loss scale n_k / N
 * (NaN, as rt_accum_loss_scale, when n_k <= 0 or the samples would exceed N,
 * and for a NULL accumulator, which records nothing). */
float rt_grad_accumulator_scale(rt_grad_accumulator *a, int64_t micro_batch_size);
/* RT_OK when the recorded micro-batches sum to N (call before the step);
 * RT_ERR_STATE otherwise, with the counts in the message; RT_ERR_INVALID_ARG
 * for NULL. */
rt_status rt_grad_accumulator_check(const rt_grad_accumulator *a);

#endif
