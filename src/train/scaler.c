/* Dynamic loss scaling (train/scaler.h). */
#include "train/scaler.h"

#include <math.h>
#include <stdlib.h>

struct rt_grad_scaler {
    rt_grad_scaler_opts o;
    float scale;
    int64_t growth_tracker;
    int64_t skipped, skipped_in_row;
    bool unscaled;  /* unscale ran since the last update (PyTorch's UNSCALED state) */
    bool found_inf; /* what that unscale found */
};

rt_grad_scaler_opts rt_grad_scaler_default_opts(void) {
    return (rt_grad_scaler_opts){.init_scale = 65536.0f, .growth_factor = 2.0f, .backoff_factor = 0.5f,
                                 .growth_interval = 2000, .min_scale = 1.0f, .max_skipped_in_row = 50};
}

rt_grad_scaler *rt_grad_scaler_create(const rt_grad_scaler_opts *o) {
    rt_grad_scaler_opts d = o ? *o : rt_grad_scaler_default_opts();
    const char *bad = !(isfinite(d.init_scale) && d.init_scale > 0) ? "init_scale (finite, > 0)"
                      : !(isfinite(d.growth_factor) && d.growth_factor > 1) ? "growth_factor (> 1)"
                      : !(d.backoff_factor > 0 && d.backoff_factor < 1) ? "backoff_factor (in (0, 1))"
                      : d.growth_interval < 1 ? "growth_interval (>= 1)"
                      : !(isfinite(d.min_scale) && d.min_scale > 0) ? "min_scale (finite, > 0)"
                      : d.max_skipped_in_row < 0 ? "max_skipped_in_row (>= 0)" : NULL;
    if (bad) {
        rt_error_set(RT_ERR_INVALID_ARG, "rt_grad_scaler_create: %s is out of range", bad);
        return NULL;
    }
    rt_grad_scaler *s = calloc(1, sizeof *s);
    if (!s) {
        rt_error_set(RT_ERR_OOM, "rt_grad_scaler_create: out of memory");
        return NULL;
    }
    s->o = d;
    s->scale = d.init_scale;
    return s;
}

void rt_grad_scaler_destroy(rt_grad_scaler *s) { free(s); }

float rt_grad_scaler_get_scale(const rt_grad_scaler *s) { return s ? s->scale : 0.0f; }
int64_t rt_grad_scaler_skipped(const rt_grad_scaler *s) { return s ? s->skipped : 0; }
int64_t rt_grad_scaler_skipped_in_row(const rt_grad_scaler *s) { return s ? s->skipped_in_row : 0; }

/* g ← g·inv in place; returns whether any element is Inf or NaN (the fused
 * check-and-unscale of _amp_foreach_non_finite_check_and_unscale_). */
static bool rt_unscale_one(float *g, int64_t n, float inv) {
    int bad = 0;
#pragma omp parallel for simd reduction(| : bad) schedule(static)
    for (int64_t i = 0; i < n; i++) {
        bad |= !isfinite(g[i]);
        g[i] *= inv;
    }
    return bad != 0;
}

rt_status rt_grad_scaler_unscale(rt_grad_scaler *s, rt_tensor *const *params, int n, bool *found_inf) {
    if (!s || (!params && n > 0))
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_grad_scaler_unscale: %s is NULL", !s ? "the scaler" : "params");
    if (s->unscaled)
        return rt_error_set(RT_ERR_STATE, "rt_grad_scaler_unscale: the gradients were already unscaled for this "
                            "optimizer step; unscale once between steps (GradScaler.unscale_ semantics)");
    for (int i = 0; i < n; i++) {
        rt_tensor *g = params[i] ? params[i]->grad : NULL;
        if (g && g->dtype != RT_F32)
            return rt_error_set(RT_ERR_DTYPE, "rt_grad_scaler_unscale: parameter %d's grad is %s; the optimizer's "
                                "gradients must be float32", i, rt_dtype_str(g->dtype));
    }
    float inv = (float)(1.0 / (double)s->scale);
    bool inf = false;
    for (int i = 0; i < n; i++) {
        rt_tensor *g = params[i] ? params[i]->grad : NULL;
        if (g && !rt_tensor_is_meta(g)) inf |= rt_unscale_one(rt_tensor_f32(g), rt_tensor_numel(g), inv);
    }
    s->unscaled = true;
    s->found_inf = inf;
    if (found_inf) *found_inf = inf;
    return RT_OK;
}

rt_status rt_grad_scaler_update(rt_grad_scaler *s) {
    if (!s) return rt_error_set(RT_ERR_INVALID_ARG, "rt_grad_scaler_update: the scaler is NULL");
    bool inf = s->unscaled && s->found_inf;
    s->unscaled = false;
    s->found_inf = false;
    if (inf) {
        float next = s->scale * s->o.backoff_factor;
        s->scale = next > s->o.min_scale ? next : s->o.min_scale;
        s->growth_tracker = 0;
        s->skipped++;
        s->skipped_in_row++;
        if (s->o.max_skipped_in_row && s->skipped_in_row >= s->o.max_skipped_in_row)
            /* the initial scale is a cause as likely as the learning rate:
             * one far above the default overflows every step until the
             * backoff has halved it down to what the gradients allow */
            return rt_error_set(RT_ERR_NONFINITE, "the loss or the gradients were NaN/Inf for %lld optimizer steps in "
                                "a row (loss scale now %g): training stopped; lower the initial loss scale "
                                "(--loss-scale-init; this scaler's was %g, the default %g), lower the learning "
                                "rate (--lr), clip gradients (--clip), use --precision bf16 or fp32, or check the "
                                "data", (long long)s->skipped_in_row, (double)s->scale, (double)s->o.init_scale,
                                (double)rt_grad_scaler_default_opts().init_scale);
        return RT_OK;
    }
    s->skipped_in_row = 0;
    if (++s->growth_tracker >= s->o.growth_interval) {
        float next = s->scale * s->o.growth_factor;
        if (isfinite(next)) s->scale = next;
        s->growth_tracker = 0;
    }
    return RT_OK;
}

static float rt_scaler_hook_scale(void *user) { return ((rt_grad_scaler *)user)->scale; }

static rt_status rt_scaler_hook_before(void *user, rt_tensor *const *params, int n, bool *skip) {
    rt_grad_scaler *s = user;
    if (!s->unscaled) RT_TRY(rt_grad_scaler_unscale(s, params, n, NULL));
    *skip = s->found_inf;
    return RT_OK;
}

static rt_status rt_scaler_hook_after(void *user, bool stepped) {
    (void)stepped; /* the scaler's own found_inf decides, as GradScaler.update */
    return rt_grad_scaler_update(user);
}

rt_train_hooks rt_grad_scaler_hooks(rt_grad_scaler *s) {
    if (!s) return (rt_train_hooks){0};
    return (rt_train_hooks){.user = s, .loss_scale = rt_scaler_hook_scale, .before_step = rt_scaler_hook_before,
                            .after_step = rt_scaler_hook_after, .nonfinite_loss_skips = true};
}

rt_status rt_grad_scaler_state_get(const rt_grad_scaler *s, float *scale, int64_t *growth_tracker,
                                   int64_t *skipped) {
    if (!s) return rt_error_set(RT_ERR_INVALID_ARG, "rt_grad_scaler_state_get: the scaler is NULL");
    if (scale) *scale = s->scale;
    if (growth_tracker) *growth_tracker = s->growth_tracker;
    if (skipped) *skipped = s->skipped;
    return RT_OK;
}

rt_status rt_grad_scaler_state_set(rt_grad_scaler *s, float scale, int64_t growth_tracker, int64_t skipped) {
    if (!s || !(isfinite(scale) && scale > 0) || growth_tracker < 0 || skipped < 0)
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_grad_scaler_state_set: %s",
                            !s ? "the scaler is NULL" : "scale must be finite and > 0, counts >= 0");
    s->scale = scale;
    s->growth_tracker = growth_tracker;
    s->skipped = skipped;
    s->skipped_in_row = 0;
    return RT_OK;
}
