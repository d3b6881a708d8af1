/* Learning-rate schedules as pure functions of the step: rt_lr_at(s, step)
 * is the learning rate to use for `step`, with no hidden state, so resuming
 * from a checkpoint needs only the step and the schedule is trivially
 * testable.
 *
 * The values are the closed forms of PyTorch 1.13's schedulers
 * (_get_closed_form_lr): a constant lr, StepLR, MultiStepLR and
 * CosineAnnealingLR, each optionally preceded by a linear warm-up as
 *
 *     SequentialLR(opt, [LinearLR(opt, start_factor=warmup_start_factor,
 *                                 end_factor=1.0, total_iters=warmup_steps),
 *                        main], milestones=[warmup_steps])
 *
 * i.e. for step < W = warmup_steps:
 *     lr = base_lr · (f + (1 - f) · step / W)          (f = warmup_start_factor)
 * and for step >= W the main schedule runs on its own clock, step - W (the
 * SequentialLR restart: step(0) at the milestone). So with warm-up, a cosine
 * over the rest of training of S steps uses t_max = S - W.
 *
 * Units: a "step" is whatever the caller counts; the schedule does not know.
 * Per-iteration schedules pass rt_optimizer_step_count(opt) before each
 * rt_optimizer_step (step 0 is the first update). Per-epoch schedules pass
 * the epoch index (0 for the first epoch) and set the lr once at each epoch's
 * start, which is what PyTorch's `scheduler.step()` once per epoch after the
 * epoch's optimizer steps gives. step_size, milestones, t_max and
 * warmup_steps are in the same unit.
 *
 * Example (per iteration, 500 warm-up steps from 0.1·lr, cosine to 0 over
 * the remaining 9500):
 *     rt_lr_schedule s = {.kind = RT_LR_COSINE, .base_lr = 0.1f, .t_max = 9500,
 *                         .warmup_steps = 500, .warmup_start_factor = 0.1f};
 *     rt_optimizer_set_lr(opt, rt_lr_at(&s, rt_optimizer_step_count(opt)));
 */
#ifndef RT_OPTIM_SCHEDULE_H
#define RT_OPTIM_SCHEDULE_H

#include <stdint.h>

#include "../core/status.h"

#define RT_LR_MAX_MILESTONES 8

typedef enum rt_lr_kind {
    RT_LR_CONSTANT = 0, /* lr = base_lr */
    RT_LR_STEP,         /* StepLR: base_lr · gamma^floor(t / step_size) */
    RT_LR_MULTISTEP,    /* MultiStepLR: base_lr · gamma^(number of milestones <= t) */
    RT_LR_COSINE,       /* CosineAnnealingLR: eta_min + (base_lr - eta_min)(1 + cos(π t / t_max)) / 2 */
} rt_lr_kind;

/* A schedule; zero-initialise and set what the kind uses (t is the main
 * schedule's step, i.e. step - warmup_steps). */
typedef struct rt_lr_schedule {
    rt_lr_kind kind;
    double base_lr;   /* the optimizer's initial lr (PyTorch's initial_lr), >= 0 */
    double gamma;     /* STEP, MULTISTEP: multiplicative decay >= 0 (PyTorch default 0.1) */
    int64_t step_size; /* STEP: decay period, > 0 */
    /* MULTISTEP: steps at which lr *= gamma, >= 0, in any order; a repeated
     * milestone multiplies again (PyTorch keeps them in a Counter). */
    int64_t milestones[RT_LR_MAX_MILESTONES];
    int n_milestones; /* MULTISTEP: 0..RT_LR_MAX_MILESTONES */
    /* COSINE: half period, > 0. Past t_max the closed form rises again
     * (PyTorch's cosine is periodic), so size t_max to the run. */
    int64_t t_max;
    double eta_min;   /* COSINE: minimum lr >= 0 (PyTorch default 0) */
    int64_t warmup_steps; /* W >= 0; 0 = no warm-up */
    /* f in [0, 1]: the lr at step 0 is f · base_lr. PyTorch's LinearLR
     * demands f > 0 for its recursive form; the closed form also allows 0. */
    double warmup_start_factor;
} rt_lr_schedule;

/* RT_OK when the schedule's fields are valid for its kind, else
 * RT_ERR_INVALID_ARG with a message naming the field (or saying s is NULL).
 * Call it once when the schedule is built (e.g. from CLI options). */
rt_status rt_lr_schedule_check(const rt_lr_schedule *s);

/* The learning rate for `step` (>= 0; see the units note above). Pure and
 * thread-safe (it sets no error message). Computed in double, returned as
 * float. Returns NaN for a schedule that rt_lr_schedule_check rejects (a
 * NULL s included) or a negative step; rt_optimizer_step then fails with
 * RT_ERR_INVALID_ARG rather than train with a bad lr. */
float rt_lr_at(const rt_lr_schedule *s, int64_t step);

#endif
