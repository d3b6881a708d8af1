/* Optimizers: SGD and AdamW, mirroring torch.optim (PyTorch 1.13) update for
 * update, with one parameter group.
 *
 * An rt_optimizer is created over an array of n parameter tensors. The
 * tensors are BORROWED: the optimizer copies the pointers, not references, so
 * the caller (normally an nn module) keeps every parameter alive for the
 * optimizer's whole life. Parameters must be f32 leaves (master weights stay
 * f32, see docs/design.md) on the cpu or the meta device.
 *
 * Per-parameter state (momentum_buffer; exp_avg, exp_avg_sq) is allocated
 * lazily, at the first step in which that parameter has a gradient, exactly
 * as PyTorch fills optimizer.state lazily, and is booked to RT_MEM_OPTIM so
 * rt_memstats shows it. On the meta device the state is allocated (booked)
 * the same way but nothing is computed, so a meta training step reports the
 * optimizer's memory without doing work.
 *
 * A parameter whose .grad is NULL is skipped by step (no update, no state,
 * no step count), as PyTorch skips `p.grad is None`.
 *
 * Typical loop (the LR schedule is optional, see optim/schedule.h):
 *
 *     rt_optimizer_zero_grad(opt);
 *     ... forward, loss, rt_backward(...) ...
 *     rt_optimizer_set_lr(opt, rt_lr_at(&sched, rt_optimizer_step_count(opt)));
 *     RT_TRY(rt_optimizer_step(opt));
 *
 * Errors follow core/status.h: constructors return NULL and the others an
 * rt_status, with the reason in rt_error_last(). */
#ifndef RT_OPTIM_OPTIMIZER_H
#define RT_OPTIM_OPTIMIZER_H

#include <stdbool.h>
#include <stdint.h>

#include "../core/status.h"
#include "../core/tensor.h"

typedef struct rt_optimizer rt_optimizer;

/* torch.optim.SGD(params, lr, momentum, dampening, weight_decay, nesterov).
 * A zero-initialised struct with only .lr set gives PyTorch's defaults
 * (momentum 0, dampening 0, weight_decay 0, nesterov false).
 * Hyper-parameters (here and in rt_adamw_opts) are doubles because PyTorch's
 * are Python floats: the derived coefficients (1-τ, 1-β, 1-γλ, bias
 * corrections) are computed in double and only then rounded to f32 for the
 * element loops, exactly as torch.optim does, so 1-0.9 gives 0.1f (with a
 * float β it would be 0.100000024f). */
typedef struct rt_sgd_opts {
    double lr;          /* learning rate γ, >= 0 (PyTorch: "Invalid learning rate") */
    double momentum;    /* μ >= 0; 0 = plain SGD, no state */
    double dampening;   /* τ; the momentum buffer adds (1-τ)·g after the first step */
    double weight_decay; /* λ >= 0, L2 penalty added to the gradient (coupled) */
    bool nesterov;      /* Nesterov momentum; requires momentum > 0 and dampening == 0 */
} rt_sgd_opts;

/* torch.optim.AdamW(params, lr, betas=(beta1, beta2), eps, weight_decay,
 * amsgrad). Start from rt_adamw_default_opts() (PyTorch's defaults), since
 * zero is not the default for most fields. */
typedef struct rt_adamw_opts {
    double lr;          /* γ >= 0 */
    double beta1;       /* β1 in [0, 1) */
    double beta2;       /* β2 in [0, 1) */
    double eps;         /* ε >= 0, added to sqrt(v̂) */
    double weight_decay; /* λ >= 0, decoupled: θ ← θ - γλθ before the Adam update */
    bool amsgrad;       /* must be false: AMSGrad is not implemented (RT_ERR_UNSUPPORTED) */
} rt_adamw_opts;

/* PyTorch's defaults: plain SGD with learning rate `lr`. */
rt_sgd_opts rt_sgd_default_opts(double lr);
/* PyTorch's AdamW defaults: lr 1e-3, betas (0.9, 0.999), eps 1e-8,
 * weight_decay 1e-2, amsgrad false. */
rt_adamw_opts rt_adamw_default_opts(void);

/* Creates an SGD optimizer over params[0..n-1] (borrowed, see above).
 * Update, from the PyTorch 1.13 torch.optim.SGD docs, for t = 1, 2, ...:
 *     g_t ← ∇θ f(θ_{t-1})
 *     if λ ≠ 0:  g_t ← g_t + λ θ_{t-1}
 *     if μ ≠ 0:  b_t ← g_t                      if t = 1
 *                b_t ← μ b_{t-1} + (1-τ) g_t    if t > 1
 *                g_t ← g_t + μ b_t  (nesterov)  or  g_t ← b_t
 *     θ_t ← θ_{t-1} - γ g_t
 * where t counts the steps in which this parameter had a gradient.
 * Errors (NULL + message): RT_ERR_INVALID_ARG for o NULL, NULL/empty params, a NULL
 * or duplicated entry, a non-leaf, lr/momentum/weight_decay < 0 or not
 * finite, nesterov without momentum > 0 and dampening == 0 (PyTorch's
 * "Nesterov momentum requires a momentum and zero dampening"); RT_ERR_DTYPE
 * for a parameter that is not f32; RT_ERR_OOM. */
rt_optimizer *rt_sgd_create(rt_tensor *const *params, int n, const rt_sgd_opts *o);

/* Creates an AdamW optimizer over params[0..n-1] (borrowed). Update, from
 * the PyTorch 1.13 torch.optim.AdamW docs (amsgrad = false), for t = 1, 2, ...:
 *     g_t ← ∇θ f(θ_{t-1})
 *     θ_t ← θ_{t-1} - γ λ θ_{t-1}
 *     m_t ← β1 m_{t-1} + (1-β1) g_t
 *     v_t ← β2 v_{t-1} + (1-β2) g_t²
 *     m̂_t ← m_t / (1-β1^t)
 *     v̂_t ← v_t / (1-β2^t)
 *     θ_t ← θ_t - γ m̂_t / (sqrt(v̂_t) + ε)
 * with m_0 = v_0 = 0 and t the parameter's own step count (state['step']).
 * As in PyTorch's implementation the bias corrections are computed in double
 * and the denominator is sqrt(v_t)/sqrt(1-β2^t) + ε.
 * Errors as rt_sgd_create, plus RT_ERR_INVALID_ARG for betas outside [0, 1)
 * or eps < 0, and RT_ERR_UNSUPPORTED for amsgrad = true. */
rt_optimizer *rt_adamw_create(rt_tensor *const *params, int n, const rt_adamw_opts *o);

/* Which optimizer with which options: lets code that builds optimizers
 * for someone else (the memory prediction, the CLI) take either. */
typedef enum rt_optim_kind { RT_OPTIM_SGD, RT_OPTIM_ADAMW } rt_optim_kind;
typedef struct rt_optimizer_spec {
    rt_optim_kind kind;
    rt_sgd_opts sgd;     /* used when kind is RT_OPTIM_SGD */
    rt_adamw_opts adamw; /* used when kind is RT_OPTIM_ADAMW */
} rt_optimizer_spec;

/* rt_sgd_create or rt_adamw_create as spec->kind says (errors as theirs;
 * RT_ERR_INVALID_ARG for a NULL spec or an unknown kind). */
rt_optimizer *rt_optimizer_create(const rt_optimizer_spec *spec, rt_tensor *const *params, int n);

/* Frees the optimizer and its state (OPTIM bytes return to the allocator).
 * The parameters are borrowed and are not touched. NULL is a no-op. */
void rt_optimizer_destroy(rt_optimizer *opt);

/* "SGD" or "AdamW" (PyTorch's class names); NULL + RT_ERR_INVALID_ARG for a
 * NULL optimizer. */
const char *rt_optimizer_name(const rt_optimizer *opt);

/* Number of parameters the optimizer was created over (0 for NULL). */
int rt_optimizer_param_count(const rt_optimizer *opt);
/* The parameters it was created over (rt_optimizer_param_count of them),
 * in creation order; borrowed, valid while the optimizer lives. NULL +
 * RT_ERR_INVALID_ARG for a NULL optimizer. */
rt_tensor *const *rt_optimizer_params(const rt_optimizer *opt);

/* One update of every parameter that has a .grad (torch.optim.Optimizer.step
 * without a closure). Grads are read, never modified. Increments the step
 * count (rt_optimizer_step_count) and, for each updated parameter, its own
 * state step.
 * A state buffer in another memory order than its parameter (a weight
 * converted by rt_weight_set_layout after the state was made) is first put
 * in the parameter's order, so the moments keep their meaning.
 * All checks and state allocations happen before any parameter changes, so
 * on error no parameter has been modified. Errors: RT_ERR_INVALID_ARG when
 * opt is NULL, when
 * the current lr is negative or not finite (e.g. a bad schedule), or a grad
 * is on a different device than its parameter; RT_ERR_SHAPE when a grad's
 * shape differs from its parameter's; RT_ERR_DTYPE when a grad is not f32;
 * RT_ERR_STATE when a grad is in another memory order than its parameter;
 * RT_ERR_OOM when the state cannot be allocated or converted. */
rt_status rt_optimizer_step(rt_optimizer *opt);

/* Drops every parameter's .grad (rt_tensor_zero_grad: release and set to
 * NULL), i.e. Optimizer.zero_grad(set_to_none=True), PyTorch's recommended
 * form; the GRAD bytes return to the allocator at once unless the caller
 * holds other references to a grad. No-op for NULL. */
void rt_optimizer_zero_grad(rt_optimizer *opt);

/* Learning rate used by the next step (param_groups[0]['lr']). set_lr does
 * not validate; step rejects a negative or non-finite lr. The lr is kept as
 * a double (from the opts); set_lr takes the float that rt_lr_at returns.
 * For a NULL optimizer set_lr does nothing and get_lr returns NaN. */
void rt_optimizer_set_lr(rt_optimizer *opt, float lr);
float rt_optimizer_get_lr(const rt_optimizer *opt);

/* Number of successful rt_optimizer_step calls (including those in which no
 * parameter had a gradient). This is the natural `step` for a per-iteration
 * LR schedule. set_step_count restores it from a checkpoint; negative values
 * are clamped to 0. PyTorch has no such counter (schedulers keep their own
 * last_epoch); it is here so one object carries the whole training position.
 * NULL: step_count returns 0, set_step_count does nothing. */
int64_t rt_optimizer_step_count(const rt_optimizer *opt);
void rt_optimizer_set_step_count(rt_optimizer *opt, int64_t steps);

/* Bytes of optimizer tensor state once every parameter has stepped (the
 * analytic count for the memory planner): SGD with momentum 1 × and AdamW
 * 2 × the parameter bytes, plain SGD 0. Does not depend on lazy allocation.
 * 0 for NULL. */
int64_t rt_optimizer_state_nbytes(const rt_optimizer *opt);

/* ---- state export / import (checkpoints) ---------------------------------
 *
 * rt_optimizer_state_visit calls fn(ud, name, t) once per named state entry,
 * in this order:
 *
 *     "step_count"                  0-d int32, rt_optimizer_step_count
 *     for each parameter i = 0..n-1 (i = index in the params array):
 *       SGD with momentum ≠ 0:
 *         "state.<i>.step"             0-d int32, the parameter's update count
 *         "state.<i>.momentum_buffer"  f32, the parameter's shape
 *       AdamW:
 *         "state.<i>.step"             0-d int32, PyTorch's state['step']
 *         "state.<i>.exp_avg"          f32, the parameter's shape (m_t)
 *         "state.<i>.exp_avg_sq"       f32, the parameter's shape (v_t)
 *     (plain SGD has no per-parameter state)
 *
 * The names follow PyTorch's optimizer.state_dict()['state'][i][key]. Before
 * visiting, any missing buffer is allocated as zeros (category OPTIM, on the
 * parameter's device) so a loader can fill every entry; that does not change
 * training: a parameter whose state.<i>.step is 0 behaves exactly as one
 * without state (PyTorch's first-step rules are keyed on the step count).
 * PyTorch keeps state['step'] as a 0-d float32; here it is int32 so it is
 * exact (up to 2^31-1 steps; larger counts give RT_ERR_UNSUPPORTED).
 *
 * Ownership: every t is borrowed. The buffers are the live state: fn may copy
 * from them (save) or into them (load), and may retain them. The int32 step
 * scalars are temporaries (OPTIM, freed after fn returns): fn must save or
 * fill them during the call; their value is read back afterwards, so a loader
 * writes the step count by writing the tensor.
 *
 * fn returns RT_OK to continue; any other status stops the visit and is
 * returned. Other errors: RT_ERR_INVALID_ARG (opt or fn NULL), RT_ERR_OOM
 * allocating state, RT_ERR_FORMAT when a loader wrote a negative step. */
typedef rt_status (*rt_optimizer_state_fn)(void *ud, const char *name, rt_tensor *t);
rt_status rt_optimizer_state_visit(rt_optimizer *opt, rt_optimizer_state_fn fn, void *ud);

/* Number of entries rt_optimizer_state_visit visits: 1 + 2n for SGD with
 * momentum, 1 + 3n for AdamW, 1 for plain SGD (n: the parameters this
 * optimizer owns, see rt_optimizer_set_shard); 0 for NULL. */
int rt_optimizer_state_count(const rt_optimizer *opt);

/* ---- sharded state (ZeRO stage 1; Rajbhandari et al., "ZeRO", SC 2020,
 * P_os; PyTorch's ZeroRedundancyOptimizer partitions whole parameters) ----
 * Restricts the optimizer to the parameters with owned[i] true: the others
 * belong to another rank's shard, so step leaves them (and their .grad)
 * alone, no state is ever allocated for them (any already held is freed, its
 * step count reset), state_nbytes / state_count / state_visit cover only the
 * owned ones (the visited names keep the global index i). owned (n entries,
 * copied) NULL makes every parameter owned again. step_count is kept.
 * Errors: RT_ERR_INVALID_ARG (opt NULL), RT_ERR_OOM. */
rt_status rt_optimizer_set_shard(rt_optimizer *opt, const bool *owned);
/* Whether parameter i is in this optimizer's shard (true without a shard);
 * false for NULL or i outside 0..n-1. */
bool rt_optimizer_owns(const rt_optimizer *opt, int i);

#endif
