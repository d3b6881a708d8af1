/* LR schedules (see schedule.h): closed forms of PyTorch 1.13's
 * torch/optim/lr_scheduler.py, LinearLR → main via SequentialLR. */
#include "optim/schedule.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

static bool rt_finite_nonneg(double x) { return isfinite(x) && x >= 0.0; }

/* Writes what is wrong with `s` into msg and returns false, or returns true.
 * Touches no global state, so rt_lr_at stays pure. */
static bool rt_lr_valid(const rt_lr_schedule *s, char *msg, size_t n) {
    if (!s) return snprintf(msg, n, "LR schedule: the schedule is NULL"), false;
    if (!rt_finite_nonneg(s->base_lr))
        return snprintf(msg, n, "LR schedule: base_lr %g must be finite and >= 0", s->base_lr), false;
    if (s->warmup_steps < 0)
        return snprintf(msg, n, "LR schedule: warmup_steps %lld must be >= 0", (long long)s->warmup_steps),
               false;
    if (s->warmup_steps > 0 && !(s->warmup_start_factor >= 0.0 && s->warmup_start_factor <= 1.0))
        return snprintf(msg, n,
                        "LR schedule: warmup_start_factor %g must be in [0, 1] (the warm-up rises "
                        "linearly from warmup_start_factor*base_lr to base_lr)",
                        s->warmup_start_factor),
               false;
    switch (s->kind) {
    case RT_LR_CONSTANT:
        return true;
    case RT_LR_STEP:
        if (s->step_size <= 0)
            return snprintf(msg, n, "LR schedule (step): step_size %lld must be > 0", (long long)s->step_size),
                   false;
        if (!rt_finite_nonneg(s->gamma))
            return snprintf(msg, n, "LR schedule (step): gamma %g must be finite and >= 0", s->gamma),
                   false;
        return true;
    case RT_LR_MULTISTEP:
        if (s->n_milestones < 0 || s->n_milestones > RT_LR_MAX_MILESTONES)
            return snprintf(msg, n, "LR schedule (multistep): n_milestones %d must be in [0, %d]",
                            s->n_milestones, RT_LR_MAX_MILESTONES),
                   false;
        for (int i = 0; i < s->n_milestones; i++)
            if (s->milestones[i] < 0)
                return snprintf(msg, n, "LR schedule (multistep): milestones[%d] is %lld; milestones are >= 0",
                                i, (long long)s->milestones[i]),
                       false;
        if (!rt_finite_nonneg(s->gamma))
            return snprintf(msg, n, "LR schedule (multistep): gamma %g must be finite and >= 0",
                            s->gamma),
                   false;
        return true;
    case RT_LR_COSINE:
        if (s->t_max <= 0)
            return snprintf(msg, n, "LR schedule (cosine): t_max %lld must be > 0", (long long)s->t_max), false;
        if (!rt_finite_nonneg(s->eta_min))
            return snprintf(msg, n, "LR schedule (cosine): eta_min %g must be finite and >= 0",
                            s->eta_min),
                   false;
        return true;
    }
    return snprintf(msg, n, "LR schedule: unknown kind %d", (int)s->kind), false;
}

rt_status rt_lr_schedule_check(const rt_lr_schedule *s) {
    char msg[256];
    if (!rt_lr_valid(s, msg, sizeof msg)) return rt_error_set(RT_ERR_INVALID_ARG, "%s", msg);
    return RT_OK;
}

float rt_lr_at(const rt_lr_schedule *s, int64_t step) {
    char msg[256];
    if (step < 0 || !rt_lr_valid(s, msg, sizeof msg)) return NAN;
    const double base = s->base_lr;
    const int64_t w = s->warmup_steps;
    if (w > 0 && step < w) {
        /* LinearLR closed form: base · (f + (1 - f) · min(W, t) / W). */
        const double f = s->warmup_start_factor;
        return (float)(base * (f + (1.0 - f) * (double)step / (double)w));
    }
    const int64_t t = step - (w > 0 ? w : 0); /* SequentialLR restarts the main schedule at W */
    switch (s->kind) {
    case RT_LR_CONSTANT:
        return (float)base;
    case RT_LR_STEP: /* StepLR: base · gamma^(t // step_size) */
        return (float)(base * pow(s->gamma, (double)(t / s->step_size)));
    case RT_LR_MULTISTEP: { /* MultiStepLR: base · gamma^bisect_right(sorted(milestones), t) */
        int k = 0;
        for (int i = 0; i < s->n_milestones; i++) k += s->milestones[i] <= t;
        return (float)(base * pow(s->gamma, (double)k));
    }
    case RT_LR_COSINE: /* CosineAnnealingLR: eta_min + (base - eta_min)(1 + cos(π t / T_max)) / 2 */
        return (float)(s->eta_min + (base - s->eta_min) *
                                        (1.0 + cos(M_PI * (double)t / s->t_max)) / 2.0);
    }
    return NAN;
}
