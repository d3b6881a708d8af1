/* Stage profiles on meta, memory modes and budgets (memory/budget.h). */
#include "memory/budget.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/engine.h"
#include "autograd/node.h"
#include "ops/ops.h"
#include "memory/plan_cache.h"
#include "memory/precision.h"
#include "memory/reversible.h"

/* ------------------------------------------------------------ cost estimate (FLOP-equivalents) */

typedef struct rt_flops {
    double total, recomputed; /* all leaves; those a selective policy recomputes */
    rt_checkpoint_policy_fn policy;
    void *policy_user;
} rt_flops;

static rt_status rt_flops_after(void *user, rt_module *m, rt_tensor *x, rt_tensor *y, rt_status st) {
    rt_flops *c = user;
    if (st != RT_OK || !y || m->n_children > 0) return RT_OK;
    const char *t = m->cls->type;
    const rt_tensor *w = rt_module_tensor(m, "weight");
    double f = 64.0 * (double)rt_tensor_numel(y); /* memory-bound: 8 bytes an element at 8 FLOPs a byte (budget.h) */
    if (w && w->ndim >= 2 && (!strcmp(t, "Conv2d") || !strcmp(t, "Conv3d")))
        f = 2.0 * (double)rt_tensor_numel(y) * (double)(rt_tensor_numel(w) / w->shape[0]);
    else if (w && w->ndim >= 2 && x && !strcmp(t, "ConvTranspose3d")) /* every input element × out/g × k³ MACs */
        f = 2.0 * (double)rt_tensor_numel(x) * (double)(rt_tensor_numel(w) / w->shape[0]);
    else if (w && w->ndim == 2 && !strcmp(t, "Linear"))
        f = 2.0 * (double)rt_tensor_numel(y) * (double)w->shape[1];
    c->total += f;
    rt_checkpoint_policy p = c->policy(c->policy_user, m);
    if (p != RT_CKPT_MUST_SAVE && p != RT_CKPT_PREFER_SAVE) c->recomputed += f;
    return RT_OK;
}

/* ------------------------------------------------------------ profile */

/* What rt_measure found. */
typedef struct rt_measured {
    int64_t saved, peak;
    bool keeps_input, keeps_output; /* a node or region keeps the input's / output's storage */
} rt_measured;

/* Stages i..last alone on a copy of h (requiring grad when needs_grad), forward
 * and backward (from sum(output); from a gradient it holds for an output
 * that is not f32, which rt_sum does not take), after one warm-up
 * that allocates the stage's parameter gradients: SAVED bytes after the
 * forward, the peak above what was live before, and whether the forward
 * kept its input or its output for backward (their storages' saved counts
 * rose; h's storage may be kept by the stage before, on the chain). */
static rt_status rt_measure(rt_module *w, int i, int last, rt_tensor *h, bool needs_grad, rt_measured *out) {
    for (int pass = 0; pass < 2; pass++) {
        rt_memstats a, b;
        rt_memstats_reset_peaks();
        rt_memstats_get(&a);
        rt_tensor *hi = rt_tensor_detach(h), *y = NULL, *g = NULL;
        if (!hi) return RT_ERR_OOM;
        hi->requires_grad = needs_grad;
        int in_saved = hi->storage->saved_count;
        rt_status st = rt_checkpoint_run_stages(w, i, last, hi, &y);
        rt_memstats_get(&b);
        if (st == RT_OK) { /* activations only: a kept batch (DATA) is no activation byte */
            out->keeps_input = hi->storage->saved_count > in_saved && hi->storage->category == RT_MEM_TEMP;
            out->keeps_output = y->storage != hi->storage && y->storage->saved_count > 0 &&
                                y->storage->category == RT_MEM_TEMP;
        }
        if (st == RT_OK && y->requires_grad && y->dtype == RT_F32) {
            /* backward from sum(y), y released first: the output's gradient
             * is then the engine's own buffer, which the stage's first
             * backward may overwrite, and y lives on only if the stage keeps
             * it — as on the chain, where the next stage hands both over */
            rt_tensor *s = NULL;
            st = rt_sum(y, &s);
            rt_tensor_release(y);
            y = NULL;
            if (st == RT_OK) st = rt_backward(s, NULL, false);
            rt_tensor_release(s);
        } else if (st == RT_OK && y->requires_grad) {
            g = rt_tensor_create(y->ndim, y->shape, RT_F32, y->device, RT_MEM_TEMP);
            if (!g) st = rt_error_last_status();
            else g->layout = y->layout;
            if (st == RT_OK) st = rt_backward(y, g, false);
        }
        rt_tensor_release(g);
        rt_tensor_release(y);
        rt_tensor_release(hi);
        if (st != RT_OK) return st;
        rt_memstats c;
        rt_memstats_get(&c);
        out->saved = b.live[RT_MEM_SAVED] - a.live[RT_MEM_SAVED];
        out->peak = c.peak_total - a.live_total;
    }
    return RT_OK;
}

/* Sets stages a..b to kind k (one segment) and every other stage to STORE
 * (a < 0: all). */
static rt_status rt_only(rt_module *w, rt_stage_kind *kind, int *seg, int n, int a, int b, rt_stage_kind k) {
    for (int j = 0; j < n; j++) {
        kind[j] = a >= 0 && j >= a && j <= b ? k : RT_STAGE_STORE;
        seg[j] = a >= 0 && j >= a && j <= b ? a : j;
    }
    return rt_checkpoint_set_plan(w, kind, seg, n);
}

/* What a profile covers: n items, item i the stages first[i]..last[i] —
 * one per stage, or one per unit (rt_checkpoint.unit: a U-Net level). */
typedef struct rt_items {
    int n;
    int *first, *last;
} rt_items;

static rt_status rt_profile_run(rt_module *w, rt_checkpoint *ck, rt_tensor *x, rt_stage_kind *kind, int *seg,
                                const rt_items *it, rt_stage_profile *out) {
    int n = ck->n_stages, m = it->n;
    rt_flops fl = {0, 0, ck->policy ? ck->policy : rt_checkpoint_policy_default, ck->policy_user};
    rt_tensor *h = rt_tensor_retain(x);
    int64_t *out_bytes = calloc((size_t)m, sizeof *out_bytes);
    int *item_of = malloc((size_t)n * sizeof *item_of);
    rt_status st = out_bytes && item_of ? RT_OK : rt_error_set(RT_ERR_OOM, "out of memory profiling");
    for (int i = 0; i < m && st == RT_OK; i++)
        for (int j = it->first[i]; j <= it->last[i]; j++) item_of[j] = i;
    /* the chain runs in one precision region, as a forward does, left while
     * an item runs alone: under bf16 a stage's half copy of its input is
     * then the one the stage before saved of its output (a region per
     * stage copied it again: ResNet-50 224² b8's items added 395.3 MiB of
     * SAVED where the step holds 312.6) */
    rt_precision_region chain = {0};
    if (st == RT_OK) st = rt_precision_region_begin(&chain, ck->region_dtype, true);
    rt_precision_region_suspend(&chain);
    for (int i = 0; i < m && st == RT_OK; i++) {
        rt_stage_profile *p = &out[i];
        int a = it->first[i], b = it->last[i];
        p->span = p->side_bytes = 0;
        p->side_from = -1;
        p->input_bytes = i == 0 ? 0 : (int64_t)rt_tensor_nbytes(h);
        rt_measured ms = {0}, msel = {0}, mrev = {0};
        bool rev = a == b && rt_rev_sequence_of(ck->stages[a]) != NULL;
        st = rt_only(w, kind, seg, n, a, b, RT_STAGE_STORE);
        if (st == RT_OK) st = rt_measure(w, a, b, h, i > 0, &ms);
        if (st == RT_OK) st = rt_only(w, kind, seg, n, a, b, RT_STAGE_SELECTIVE);
        if (st == RT_OK) st = rt_measure(w, a, b, h, i > 0, &msel);
        if (st == RT_OK && rev) st = rt_only(w, kind, seg, n, a, b, RT_STAGE_REBUILD);
        if (st == RT_OK && rev) st = rt_measure(w, a, b, h, i > 0, &mrev);
        int64_t s_store = ms.saved, p_store = ms.peak, s_sel = msel.saved, p_sel = msel.peak;
        int64_t s_rev = rev ? mrev.saved : -1, p_rev = rev ? mrev.peak : -1;
        /* the chain, plainly, counting FLOPs and the SAVED bytes the item adds */
        if (st == RT_OK) st = rt_only(w, kind, seg, n, -1, -1, RT_STAGE_STORE);
        rt_memstats ma, mb;
        rt_memstats_get(&ma);
        double f0 = fl.total, r0 = fl.recomputed;
        rt_module_interceptor prev = rt_module_set_interceptor((rt_module_interceptor){NULL, rt_flops_after, &fl});
        rt_tensor *next = NULL;
        if (st == RT_OK) st = rt_precision_region_resume(&chain);
        if (st == RT_OK) st = rt_checkpoint_run_stages(w, a, b, h, &next);
        rt_precision_region_suspend(&chain);
        rt_module_set_interceptor(prev);
        rt_memstats_get(&mb);
        rt_tensor_release(h);
        h = next;
        if (st != RT_OK) break;
        out_bytes[i] = (int64_t)rt_tensor_nbytes(h);
        /* bytes the item's isolated run kept that the chain already held
         * (its input, kept by the item before as well) count once */
        int64_t saved = mb.live[RT_MEM_SAVED] - ma.live[RT_MEM_SAVED], shared = s_store - saved;
        if (shared < 0) shared = 0;
        p->saved = saved;
        p->peak = p_store - shared;
        p->saved_sel = s_sel - shared > 0 ? s_sel - shared : 0;
        p->peak_sel = p_sel - shared;
        p->saved_rev = rev ? (s_rev - shared > 0 ? s_rev - shared : 0) : -1;
        p->peak_rev = rev ? p_rev - shared : -1;
        p->fwd = fl.total - f0;
        p->fwd_sel = fl.recomputed - r0;
        p->fwd_rev = rev ? p->fwd : 0.0;
        const rt_measured *by_kind[4] = {&ms, NULL, &msel, rev ? &mrev : NULL};
        for (int k = 0; k < 4; k++) {
            p->keeps_input[k] = by_kind[k] && i > 0 && by_kind[k]->keeps_input;
            p->keeps_output[k] = by_kind[k] && by_kind[k]->keeps_output;
        }
    }
    /* skips: a stage of item i reads the output of stage r (the last of
     * its item: the U-Nets' store stages are units of their own), which is
     * held across every item between them (docs/design.md: the heuristic
     * for graphs) */
    for (int i = 0; i < m && st == RT_OK; i++)
        for (int j = it->first[i]; j <= it->last[i]; j++) {
            int r = ck->reads[j] >= 0 ? item_of[ck->reads[j]] : -1;
            if (r < 0 || r >= i) continue;
            out[i].side_bytes = out_bytes[r];
            out[i].side_from = r;
            for (int k = r + 1; k < i; k++) out[k].span += out_bytes[r];
        }
    rt_precision_region_end(&chain);
    free(out_bytes);
    free(item_of);
    rt_tensor_release(h);
    return st;
}

/* Profiles the items of Checkpoint w (a meta model) on a batch of x_shape:
 * out[0..it->n-1]. The wrapper's plan is restored afterwards. */
static rt_status rt_profile_items(rt_module *w, int x_ndim, const int64_t *x_shape, const rt_items *it,
                                  rt_stage_profile *out) {
    rt_checkpoint *ck = rt_checkpoint_of(w);
    rt_state_dict *sd = NULL;
    RT_TRY(rt_module_state_dict(w, &sd));
    for (int i = 0; i < sd->n; i++)
        if (sd->entries[i].tensor && !rt_tensor_is_meta(sd->entries[i].tensor)) {
            rt_status st = rt_error_set(RT_ERR_INVALID_ARG, "checkpoint profile: parameter '%s' is not on the "
                                        "meta device; profile a meta copy of the model", sd->entries[i].name);
            rt_state_dict_destroy(sd);
            return st;
        }
    int n = ck->n_stages;
    rt_stage_kind *kind = malloc((size_t)n * sizeof *kind), *saved_kind = malloc((size_t)n * sizeof *kind);
    int *seg = malloc((size_t)n * sizeof *seg), *saved_seg = malloc((size_t)n * sizeof *seg);
    rt_tensor *x = rt_tensor_create(x_ndim, x_shape, RT_F32, RT_DEVICE_META, RT_MEM_DATA);
    rt_status st = (kind && saved_kind && seg && saved_seg) ? RT_OK : rt_error_set(RT_ERR_OOM, "out of memory profiling");
    if (st == RT_OK && !x) st = rt_error_last_status();
    rt_generator gen = *rt_default_generator();
    if (st == RT_OK) {
        memcpy(saved_kind, ck->kind, (size_t)n * sizeof *kind);
        memcpy(saved_seg, ck->segment, (size_t)n * sizeof *seg);
        bool grad = rt_grad_set_enabled(true);
        rt_checkpoint_side_replay(true); /* a stage reading a skip runs several times alone */
        st = rt_profile_run(w, ck, x, kind, seg, it, out);
        rt_checkpoint_side_replay(false);
        rt_grad_set_enabled(grad);
        rt_status s2 = rt_checkpoint_set_plan(w, saved_kind, saved_seg, n);
        if (st == RT_OK) st = s2;
        /* the parameter gradients the profile allocated */
        for (int i = 0; i < sd->n; i++)
            if (sd->entries[i].kind == RT_ENTRY_PARAM) rt_tensor_zero_grad(sd->entries[i].tensor);
    }
    *rt_default_generator() = gen;
    rt_memstats_reset_peaks();
    rt_tensor_release(x);
    rt_state_dict_destroy(sd);
    free(kind);
    free(saved_kind);
    free(seg);
    free(saved_seg);
    return st;
}

/* The items of a checkpoint: its stages (units false) or its units. */
static rt_status rt_items_make(const rt_checkpoint *ck, bool units, rt_items *it) {
    int n = ck->n_stages;
    it->n = 0;
    it->first = malloc((size_t)n * sizeof *it->first);
    it->last = malloc((size_t)n * sizeof *it->last);
    if (!it->first || !it->last) return rt_error_set(RT_ERR_OOM, "out of memory profiling");
    for (int i = 0; i < n; i++) {
        if (units && it->n > 0 && ck->unit[i] == ck->unit[i - 1]) {
            it->last[it->n - 1] = i;
            continue;
        }
        it->first[it->n] = it->last[it->n] = i;
        it->n++;
    }
    return RT_OK;
}

static void rt_items_free(rt_items *it) {
    free(it->first);
    free(it->last);
}

rt_status rt_checkpoint_profile(rt_module *w, int x_ndim, const int64_t *x_shape, rt_stage_profile *out) {
    rt_checkpoint *ck = rt_checkpoint_of(w);
    if (!ck || !x_shape || !out)
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_checkpoint_profile: %s", !ck ? "the module is not a Checkpoint"
                            : !x_shape ? "x_shape is NULL" : "out is NULL");
    rt_items it;
    rt_status st = rt_items_make(ck, false, &it);
    if (st == RT_OK) st = rt_profile_items(w, x_ndim, x_shape, &it, out);
    rt_items_free(&it);
    return st;
}

/* ------------------------------------------------------------ modes */

const char *rt_memory_mode_str(rt_memory_mode m) {
    switch (m) {
    case RT_MEMORY_MODE_NONE: return "none";
    case RT_MEMORY_MODE_CONSERVATIVE: return "conservative";
    case RT_MEMORY_MODE_BALANCED: return "balanced";
    case RT_MEMORY_MODE_AGGRESSIVE: return "aggressive";
    }
    return NULL;
}

rt_status rt_memory_mode_parse(const char *s, rt_memory_mode *out) {
    if (!s || !out) return rt_error_set(RT_ERR_INVALID_ARG, "rt_memory_mode_parse: %s is NULL", !s ? "s" : "out");
    for (int m = RT_MEMORY_MODE_NONE; m <= RT_MEMORY_MODE_AGGRESSIVE; m++)
        if (!strcmp(s, rt_memory_mode_str((rt_memory_mode)m))) {
            *out = (rt_memory_mode)m;
            return RT_OK;
        }
    return rt_error_set(RT_ERR_INVALID_ARG, "unknown memory mode '%s'; choose conservative, balanced, aggressive "
                        "or none", s);
}

double rt_memory_mode_fraction(rt_memory_mode m) {
    switch (m) {
    case RT_MEMORY_MODE_CONSERVATIVE: return 0.60;
    case RT_MEMORY_MODE_BALANCED: return 0.35;
    case RT_MEMORY_MODE_AGGRESSIVE: return 0.15;
    default: return 1.0;
    }
}

/* ------------------------------------------------------------ plans */

typedef struct rt_plan_ctx {
    rt_module *w;
    const rt_optimizer_spec *opt;
    const rt_train_config *cfg;
    int x_ndim, y_ndim;
    const int64_t *x_shape, *y_shape;
    const int64_t *micro_shape; /* x_shape with the largest micro-batch: what one forward holds */
    rt_dtype y_dtype;
    const rt_items *units; /* plans per unit (expanded to the stages), NULL: per stage */
    rt_predict_cache *predictions; /* this planning call's (memory/plan_cache.h) */
    rt_chain_cache *chains;
} rt_plan_ctx;

/* A per-unit plan as the per-stage plan it stands for: every stage takes
 * its unit's kind and segment number (so a unit's stages form one region). */
static rt_status rt_plan_expand(const rt_items *units, const rt_plan *u, int n, rt_plan *out) {
    memset(out, 0, sizeof *out);
    out->kind = malloc((size_t)n * sizeof *out->kind);
    out->segment = malloc((size_t)n * sizeof *out->segment);
    if (!out->kind || !out->segment) {
        rt_plan_free(out);
        return rt_error_set(RT_ERR_OOM, "out of memory planning");
    }
    out->n = n;
    for (int k = 0; k < units->n; k++)
        for (int i = units->first[k]; i <= units->last[k]; i++) {
            out->kind[i] = u->kind[k];
            out->segment[i] = u->segment[k];
        }
    out->peak = u->peak;
    out->recompute = u->recompute;
    out->forward = u->forward;
    return RT_OK;
}

static rt_status rt_apply_predict(const rt_plan_ctx *c, const rt_plan *plan, rt_memstats *pred) {
    if (c->units) { /* a per-unit plan */
        rt_plan s;
        RT_TRY(rt_plan_expand(c->units, plan, rt_checkpoint_of(c->w)->n_stages, &s));
        rt_status st = rt_checkpoint_set_plan(c->w, s.kind, s.segment, s.n);
        rt_plan_free(&s);
        RT_TRY(st);
    } else {
        RT_TRY(rt_checkpoint_set_plan(c->w, plan->kind, plan->segment, plan->n));
    }
    const rt_checkpoint *ck = rt_checkpoint_of(c->w);
    const rt_memstats *hit = rt_predict_cache_find(c->predictions, ck->kind, ck->segment);
    if (hit) {
        *pred = *hit;
        return RT_OK;
    }
    RT_TRY(rt_memory_predict(c->w, c->opt, c->cfg, c->x_ndim, c->x_shape, c->y_ndim, c->y_shape, c->y_dtype, pred));
    rt_predict_cache_add(c->predictions, ck->kind, ck->segment, pred);
    return RT_OK;
}

/* Copies the wrapper's current kinds into a plan and evaluates it. */
static rt_status rt_plan_from_wrapper(const rt_checkpoint *ck, const rt_stage_profile *prof, rt_plan *plan) {
    int n = ck->n_stages;
    plan->n = n;
    plan->kind = malloc((size_t)n * sizeof *plan->kind);
    plan->segment = malloc((size_t)n * sizeof *plan->segment);
    if (!plan->kind || !plan->segment) return rt_error_set(RT_ERR_OOM, "out of memory planning");
    memcpy(plan->kind, ck->kind, (size_t)n * sizeof *plan->kind);
    memcpy(plan->segment, ck->segment, (size_t)n * sizeof *plan->segment);
    plan->forward = 0;
    for (int i = 0; i < n; i++) plan->forward += prof[i].fwd;
    return rt_plan_evaluate(prof, n, plan->kind, plan->segment, &plan->peak, &plan->recompute);
}

/* The plan of a manual strategy — `segments` equal checkpointed segments,
 * every stage selective when segments is 0, every stage stored when it is
 * negative (the model's own step) — with its reversible stages
 * rebuilt (checkpointing or selectively recomputing a RevNet stage would
 * keep more than its output and raise the peak; a REBUILD stage inside a
 * segment splits it in two, each keeping its own input). The wrapper is
 * left on the plan. */
static rt_status rt_plan_manual(const rt_plan_ctx *c, const rt_stage_profile *prof, int n, int segments,
                                rt_plan *plan) {
    rt_checkpoint *ck = rt_checkpoint_of(c->w);
    memset(plan, 0, sizeof *plan);
    RT_TRY(segments > 0    ? rt_checkpoint_set_segments(c->w, segments)
           : segments == 0 ? rt_checkpoint_set_selective(c->w, ck->policy, ck->policy_user)
                           : rt_checkpoint_set_plain(c->w));
    RT_TRY(rt_plan_from_wrapper(ck, prof, plan));
    for (int i = 0; i < n; i++)
        if (prof[i].saved_rev >= 0) plan->kind[i] = RT_STAGE_REBUILD;
    rt_status st = rt_checkpoint_set_plan(c->w, plan->kind, plan->segment, n);
    rt_plan_free(plan);
    if (st == RT_OK) st = rt_plan_from_wrapper(ck, prof, plan); /* re-evaluated */
    if (st != RT_OK) rt_plan_free(plan);
    return st;
}

/* The plan a reversible model runs without a planner: every reversible
 * stage rebuilt, every other stage stored, predicted. The chain model
 * prices a stage by its own working set and charges skips to every stage
 * they span, which on a U-Net can overrate what rebuilding the levels
 * costs, so the plans below are also measured against this one.
 * *found = false (nothing planned) when rebuilding is not allowed or no
 * stage is reversible. */
static rt_status rt_plan_rebuild_all(const rt_plan_ctx *c, const rt_stage_profile *prof, int n, rt_plan_options o,
                                     rt_plan *plan, rt_memstats *pred, bool *found) {
    memset(plan, 0, sizeof *plan);
    *found = false;
    bool any = false;
    for (int i = 0; i < n; i++) any = any || prof[i].saved_rev >= 0;
    if (!o.allow_rebuild || !any) return RT_OK;
    RT_TRY(rt_plan_manual(c, prof, n, -1, plan));
    rt_status st = rt_apply_predict(c, plan, pred);
    if (st != RT_OK) {
        rt_plan_free(plan);
        return st;
    }
    *found = true;
    return RT_OK;
}

/* Keeps the candidate `alt` (predicted alt_pred) in *best when it predicts
 * less than *best, else frees it. */
static void rt_keep_smaller(rt_plan *best, rt_memstats *best_pred, rt_plan *alt, const rt_memstats *alt_pred) {
    if (alt_pred->peak_total < best_pred->peak_total) {
        rt_plan_free(best);
        *best = *alt;
        *best_pred = *alt_pred;
    } else {
        rt_plan_free(alt);
    }
}

static rt_status rt_plan_search(const rt_plan_ctx *c, const rt_stage_profile *prof, int n, rt_plan_options o,
                                int64_t budget, int64_t base, rt_memory_plan *out, bool *found);

/* Lowers the least-memory candidate (*plan, its meta-run prediction *pred)
 * to the smallest prediction of any plan a budget search below it could
 * find: the chain model's per-stage bytes add up to a few percent off the
 * meta run where stages interact (in a bf16 region a block's bf16 interior
 * makes its neighbours' working sets differ from its profile), so its
 * least-memory plans need not be the least (ResNet-50 224² b8 under bf16:
 * candidates at 456.1 MiB, while a 435 MiB budget found 432.9). A budget
 * search (rt_plan_search) only predicts the DP's plans for activation
 * targets up to 17/16 of its budget less base, so every plan of the
 * model's frontier from 17/16 of this candidate's activation bytes down to
 * the model's least peak is predicted here — the DP's plan, then its plan
 * just below that plan's modelled peak — and the smallest prediction kept
 * (the least recompute among equal ones). Then no budget below the
 * returned peak is met by a search (tests/test_budget.c
 * least_is_least_bf16_meta; the earlier lowering by budget searches, 1/8
 * of the activations below the peak halving to 1/512, missed 476.4 MiB
 * plans that searches at 477.9 and 479.9 MiB found, under oneDNN capped at
 * AVX2). The planning call's caches make the plans the searches share
 * free. The walk stops after RT_LEAST_WALK_MAX plans, which bounds a
 * long frontier's cost but gives up the guarantee there: the walks the
 * README's figures rest on take 35 to 200 plans (ResNet-50 224² b8 bf16
 * under AVX2 found its least at the 176th of 200), unet3d 24³ b1 took
 * 1282, 4 times over for `revtorch memory`'s mode rows: 46 s where the
 * searches alone took 10 s. */
enum { RT_LEAST_WALK_MAX = 256 };

static rt_status rt_least_plan_lower(const rt_plan_ctx *c, const rt_stage_profile *prof, int n, rt_plan_options o,
                                     int64_t base, rt_plan *plan, rt_memstats *pred) {
    int64_t least = 0, act = pred->peak_total - base;
    RT_TRY(rt_plan_min_peak(prof, n, o, &least));
    rt_status st = RT_OK;
    int64_t walk = act + act / 16;
    for (int it = 0; it < RT_LEAST_WALK_MAX && st == RT_OK && act > 0 && walk >= least; it++) {
        rt_plan alt;
        rt_memstats alt_pred;
        st = rt_chain_cache_plan(c->chains, prof, n, walk, o, &alt);
        if (st != RT_OK) break;
        walk = alt.peak - 1;
        st = rt_apply_predict(c, &alt, &alt_pred);
        if (st == RT_OK && (alt_pred.peak_total < pred->peak_total ||
                            (alt_pred.peak_total == pred->peak_total && alt.recompute < plan->recompute))) {
            rt_plan_free(plan);
            *plan = alt;
            *pred = alt_pred;
        } else {
            rt_plan_free(&alt);
        }
    }
    return st;
}

/* The least-memory plan, predicted: the chain model's least-memory plan,
 * or, when the meta run of the real step says one of them needs less, the
 * model's own step (every reversible stage rebuilt) or a manual strategy
 * the options allow (2, 4 or 8 segments; selective); then the least
 * recompute at that peak, from a budget search of exactly it. The chain
 * model is exact on chains but prices skips and rebuilt stages
 * conservatively, so on a RevNet or a U-Net these can be smaller. base:
 * the bytes every plan holds (rt_plan_search). The wrapper is left on the
 * plan returned. */
static rt_status rt_least_plan(const rt_plan_ctx *c, const rt_stage_profile *prof, int n, rt_plan_options o,
                               int64_t base, rt_plan *plan, rt_memstats *pred) {
    int64_t mp;
    RT_TRY(rt_plan_min_peak(prof, n, o, &mp));
    RT_TRY(rt_chain_cache_plan(c->chains, prof, n, mp, o, plan));
    rt_status st = rt_apply_predict(c, plan, pred);
    rt_plan alt;
    rt_memstats alt_pred;
    /* the model's least-memory plans with one kind fewer: where the model
     * and the meta run disagree by a few MiB, a kind the model prices
     * optimistically can cost the least plan its place (ResNet-50 224² b8:
     * 455.7 MiB with selective stages, 454.1 MiB without) */
    for (int k = 0; k < 3 && st == RT_OK; k++) {
        rt_plan_options r = o;
        bool *off = k == 0 ? &r.allow_selective : k == 1 ? &r.allow_checkpoint : &r.allow_rebuild;
        if (!*off) continue;
        *off = false;
        st = rt_plan_min_peak(prof, n, r, &mp);
        if (st == RT_OK) st = rt_chain_cache_plan(c->chains, prof, n, mp, r, &alt);
        if (st != RT_OK) break;
        st = rt_apply_predict(c, &alt, &alt_pred);
        if (st == RT_OK) rt_keep_smaller(plan, pred, &alt, &alt_pred);
        else rt_plan_free(&alt);
    }
    bool found = false;
    /* the candidates below are per-stage plans, tried by the per-stage pass */
    if (st == RT_OK && !c->units) st = rt_plan_rebuild_all(c, prof, n, o, &alt, &alt_pred, &found);
    if (st == RT_OK && found) rt_keep_smaller(plan, pred, &alt, &alt_pred);
    static const int segments[4] = {2, 4, 8, 0}; /* 0: selective */
    for (int k = 0; k < 4 && st == RT_OK && !c->units; k++) {
        if (segments[k] > 0 ? !o.allow_checkpoint : !o.allow_selective) continue;
        st = rt_plan_manual(c, prof, n, segments[k], &alt);
        if (st == RT_OK) st = rt_apply_predict(c, &alt, &alt_pred);
        if (st == RT_OK) rt_keep_smaller(plan, pred, &alt, &alt_pred);
        else rt_plan_free(&alt);
    }
    /* Those candidates reach the least peak in whichever way each does; a
     * budget of exactly that peak, searched as --memory-budget searches,
     * often finds a plan as small (or smaller) with less recompute
     * (resnet20 16² b8 under bf16: 4.5% instead of 15.1% of a step) */
    rt_memory_plan cheaper = {0};
    bool cheaper_found = false;
    if (st == RT_OK) st = rt_plan_search(c, prof, n, o, pred->peak_total, base, &cheaper, &cheaper_found);
    if (st == RT_ERR_OOM) { /* a target below every plan: nothing cheaper */
        rt_error_clear();
        st = RT_OK;
    }
    if (st == RT_OK && cheaper_found && cheaper.predicted.peak_total <= pred->peak_total &&
        (cheaper.plan.recompute < plan->recompute || cheaper.predicted.peak_total < pred->peak_total)) {
        rt_plan_free(plan);
        *plan = cheaper.plan;
        *pred = cheaper.predicted; /* the lowering below starts from this plan's peak */
    } else if (cheaper_found) {
        rt_plan_free(&cheaper.plan);
    }
    if (st == RT_OK) st = rt_least_plan_lower(c, prof, n, o, base, plan, pred);
    if (st == RT_OK) st = rt_apply_predict(c, plan, pred); /* leaves the wrapper on the plan returned */
    if (st != RT_OK) rt_plan_free(plan);
    return st;
}

/* RT_ERR_OOM naming the smallest feasible budget, `least` (the least-memory
 * plan's predicted peak, rt_least_plan): in bytes, exact, and in MiB
 * rounded up to the 0.1 shown, so that the figure a user pastes back as
 * --memory-budget is feasible (17852096 bytes printed as "17.0 MiB" was
 * refused again as 17.0 MiB). It also names what else lowers the step's
 * least memory, in words every command's options can be matched to (train
 * has --accum-steps and --conv-algo, segment train neither): a smaller
 * batch or input, micro-batches (splitting the batch splits the
 * activations) and direct convolution (Winograd's scratchpad is TEMP
 * memory, up to 44 MiB a call on ResNet-50; kernels/conv.h). */
static rt_status rt_budget_refused(int64_t budget, int64_t least) {
    /* the least rounded up, so that pasting it back is accepted; the budget
     * to two places, or four rounded down where two would read as much as
     * the least (16.57 MiB was printed 16.6, beside a least of 16.6) */
    double least_mib = ceil((double)least / 1048576.0 * 10.0) / 10.0, mib = (double)budget / 1048576.0;
    int places = round(mib * 100.0) / 100.0 < least_mib ? 2 : 4;
    double budget_mib = places == 2 ? mib : floor(mib * 1e4) / 1e4;
    return rt_error_set(RT_ERR_OOM, "the memory budget %.*f MiB (%lld byte%s) cannot hold one training step of "
                        "this model and batch: the smallest feasible budget is %.1f MiB (%lld bytes, the "
                        "least-memory plan's predicted peak); raise --memory-budget to at least that, or lower "
                        "what the step needs: a smaller batch or input, gradient accumulation over micro-batches "
                        "(each holds its share of the activations) where the command has it, or direct "
                        "convolution (no Winograd scratchpad)",
                        places, budget_mib, (long long)budget, budget == 1 ? "" : "s", least_mib, (long long)least);
}

/* The modelled peak of storing every one of the n items of prof. */
static rt_status rt_model_plain_peak(const rt_stage_profile *prof, int n, int64_t *peak) {
    rt_stage_kind *kind = calloc((size_t)n, sizeof *kind); /* RT_STAGE_STORE is 0 */
    int *seg = malloc((size_t)n * sizeof *seg);
    rt_status st = kind && seg ? RT_OK : rt_error_set(RT_ERR_OOM, "out of memory planning");
    for (int k = 0; st == RT_OK && k < n; k++) seg[k] = k;
    double rc;
    if (st == RT_OK) st = rt_plan_evaluate(prof, n, kind, seg, peak, &rc);
    free(kind);
    free(seg);
    return st;
}

/* Plans for activation budget `target` and, when the plan's modelled
 * recompute is below `max_cost` (INFINITY: any), predicts the step; *fits
 * tells whether the prediction is within `budget` (false for a plan not
 * predicted). RT_ERR_OOM: no plan reaches `target` (nothing to predict; no
 * message set when target is below `least`, the model's least peak, which
 * the search knows: a DP that fails would compute it again for its
 * message). */
static rt_status rt_plan_try(const rt_plan_ctx *c, const rt_stage_profile *prof, int n, rt_plan_options o,
                             int64_t target, int64_t least, int64_t budget, double max_cost, rt_plan *plan,
                             rt_memstats *pred, bool *fits) {
    *fits = false;
    rt_status st = target > 0 && target >= least ? rt_chain_cache_plan(c->chains, prof, n, target, o, plan)
                                                 : RT_ERR_OOM;
    if (st != RT_OK || !(plan->recompute < max_cost)) return st;
    st = rt_apply_predict(c, plan, pred);
    if (st != RT_OK) {
        rt_plan_free(plan);
        return st;
    }
    *fits = pred->peak_total <= budget;
    return RT_OK;
}

/* The plan for target `target` (rt_plan_try), kept in *best when its
 * prediction fits and it needs less recompute than *best (then the smaller
 * peak); *fits says whether it fit. With `bounded`, a plan costing no less
 * than *best is not predicted (*fits false) and *costly says so. *peak:
 * the plan's modelled peak. RT_ERR_OOM from the DP (a target below every
 * plan) is returned with nothing kept. */
typedef struct rt_search_best {
    rt_plan plan;
    rt_memstats pred;
    bool found;
    int tries;
} rt_search_best;

static rt_status rt_try_keep(const rt_plan_ctx *c, const rt_stage_profile *prof, int n, rt_plan_options o,
                             int64_t target, int64_t least, int64_t budget, rt_search_best *b, bool *fits,
                             bool bounded, bool *costly, int64_t *peak) {
    rt_plan plan;
    rt_memstats pred;
    double max_cost = bounded && b->found ? b->plan.recompute : INFINITY;
    RT_TRY(rt_plan_try(c, prof, n, o, target, least, budget, max_cost, &plan, &pred, fits));
    if (peak) *peak = plan.peak;
    if (costly) *costly = !(plan.recompute < max_cost);
    if (!(plan.recompute < max_cost)) {
        rt_plan_free(&plan);
        return RT_OK;
    }
    b->tries++;
    if (*fits && (!b->found || plan.recompute < b->plan.recompute ||
                  (plan.recompute == b->plan.recompute && pred.peak_total < b->pred.peak_total))) {
        rt_plan_free(&b->plan);
        b->plan = plan;
        b->pred = pred;
        b->found = true;
    } else {
        rt_plan_free(&plan);
    }
    return RT_OK;
}

/* The chain model and the real step differ by what the model does not see
 * (workspaces, which differ between ISAs), so the activation budget is first
 * lowered by each prediction's excess. That finds a plan that fits, but the
 * model's errors are not uniform, so the lowering can overshoot (resnet50
 * 224² b8 at 503 MiB: 27.7 MiB lowered at once, a plan at 15.0% recompute
 * predicted 488.0 MiB where one at 13.2% predicts 497.2). A bisection
 * between the fitting target and the first one that did not fit then seeks
 * the roomiest plan that fits (the DP's recompute only falls as its target
 * rises); the first, not the last, and then probes at doubling distances
 * above the highest fitting target, because whether a plan fits is not
 * monotone in its target: at 530 MiB a target 1 MiB above a fitting one
 * misses by 0.7 MiB while one 12 MiB higher fits at 9.7% against 11.4%.
 * When the lowering found nothing (it overshot below every plan, or did not
 * converge) the bisection starts at the least-memory plan's activation
 * peak, feasible whenever the budget is at least the smallest feasible one;
 * when even the first target lies below it, nothing is searched and
 * rt_plan_budget falls back to the least-memory plan.
 * Of the plans that fit, the least recompute is kept. A heuristic over a
 * jagged oracle (one target can give a plan that fits between two that do
 * not): sweeping ResNet-50 budgets (64² b4, 278.5–300 MiB by 0.25; 224²
 * b8, 455–620 MiB by 2.5), recompute rose with the budget 3 and 12 times
 * before, by up to 33.0% and 1.8% of a step, and now 2 and 0 times, by at
 * most 0.04%; the mean recompute fell 1.66% → 0.57% and 11.25% → 11.07%
 * (tests/test_budget.c budgets_monotone_meta). Last, the model's Pareto
 * frontier is walked down from 1/16 above the budget's activation target,
 * plan by plan (the DP's plan, then its plan just below that plan's
 * modelled peak), up to 16 plans and only while they cost less than the
 * best found: a plan the model puts just over the target may fit the real
 * step (resnet50 64² b4: at 285.5 MiB the search kept a plan at 0.61% of
 * a step where one at 0.45%, kept at 285 MiB, fits too; once batch norm
 * and ReLU were priced at their memory traffic such differences grew
 * eightfold). The searches come back to the same plans and the same DP
 * budgets, which the planning call's caches (memory/plan_cache.h) answer
 * once: `revtorch memory` for ResNet-50 224² b8, every row and a budget,
 * takes 0.9 s (2.8 s uncached), for unet3d 128³ 5.1 s (19.5 s), the
 * least-memory walk included.
 * *found false: no chain plan's prediction fits (a budget at or below the
 * least-memory plan's peak may still be met by another candidate,
 * rt_plan_budget). */
static rt_status rt_plan_search(const rt_plan_ctx *c, const rt_stage_profile *prof, int n, rt_plan_options o,
                                int64_t budget, int64_t base, rt_memory_plan *out, bool *found_out) {
    *found_out = false;
    int64_t target = budget - base, least = 0, lo = -1, hi = -1;
    RT_TRY(rt_plan_min_peak(prof, n, o, &least));
    rt_search_best b = {0};
    rt_status st = RT_OK;
    for (int it = 0; it < 8 && st == RT_OK; it++) {
        rt_plan plan;
        rt_memstats pred;
        bool fits = false;
        st = rt_plan_try(c, prof, n, o, target, least, budget, INFINITY, &plan, &pred, &fits);
        if (st != RT_OK) break;
        b.tries++;
        if (fits) {
            b.plan = plan;
            b.pred = pred;
            b.found = true;
            lo = target;
            break;
        }
        if (hi < 0) hi = target;
        /* below the plan's own modelled peak, not only the target: a plan
         * whose prediction misses by a few KiB keeps winning targets lowered
         * by that much (its peak sits below them), and the search would end
         * on a much costlier fallback (resnet50 64² b4, 283.5 MiB: 33.3%
         * recompute where a plan at 0.3% fits) */
        int64_t lowered = (plan.peak < target ? plan.peak : target) - (pred.peak_total - budget);
        rt_plan_free(&plan);
        if (lowered <= 0) break;
        target = lowered;
    }
    if (st == RT_ERR_OOM && target < least) { /* the target fell below every plan (no message was set) */
        rt_error_clear();
        st = RT_OK;
    }
    if (st != RT_OK) { /* out of memory planning or predicting: not a plan that does not fit */
        rt_plan_free(&b.plan);
        return st;
    }
    if (!b.found) lo = least;
    const int64_t top = hi;
    for (int it = 0; st == RT_OK && it < 16 && hi > lo && (!b.found || hi - lo > 65536); it++) {
        int64_t mid = b.found ? lo + (hi - lo) / 2 : lo;
        bool fits = false;
        st = rt_try_keep(c, prof, n, o, mid, least, budget, &b, &fits, false, NULL, NULL);
        if (st == RT_ERR_OOM && mid < least) { /* below every plan: as not fitting */
            rt_error_clear();
            st = RT_OK;
        }
        if (fits) lo = mid;
        else if (!b.found) break; /* even the least-memory plan does not fit */
        else hi = mid;
    }
    for (int64_t d = 131072; st == RT_OK && b.found && lo + d < top; d *= 2) {
        bool fits = false;
        st = rt_try_keep(c, prof, n, o, lo + d, least, budget, &b, &fits, false, NULL, NULL);
    }
    /* the model's frontier, walked down from a little above the budget:
     * each DP plan, then the one just below its modelled peak, in order of
     * rising recompute; the first whose prediction fits is kept, and the
     * walk ends there, once plans cost as much as the best found, or after
     * 16 plans (so it only narrows the search's gaps: a larger budget can
     * still need more, which budgets_monotone_meta bounds at 0.1% of a step) */
    int64_t walk = budget - base + (budget - base) / 16;
    for (int it = 0; st == RT_OK && it < 16 && walk >= least; it++) {
        bool fits = false, costly = false;
        int64_t peak = 0;
        st = rt_try_keep(c, prof, n, o, walk, least, budget, &b, &fits, true, &costly, &peak);
        if (fits || costly) break;
        walk = peak - 1;
    }
    out->iterations = b.tries;
    if (st != RT_OK) {
        rt_plan_free(&b.plan);
        return st;
    }
    if (b.found) {
        out->plan = b.plan;
        out->predicted = b.pred;
        *found_out = true;
    }
    return RT_OK;
}

/* The least recompute whose predicted step fits `budget` (bytes, the whole
 * step): the search above, else the least-memory plan when that fits, so a
 * feasible budget is never refused; RT_ERR_OOM naming the smallest
 * feasible budget otherwise, which *least_peak then holds (untouched on
 * every other outcome). */
static rt_status rt_plan_budget(const rt_plan_ctx *c, const rt_stage_profile *prof, int n, rt_plan_options o,
                                int64_t budget, int64_t base, rt_memory_plan *out, int64_t *least_peak) {
    bool found = false;
    RT_TRY(rt_plan_search(c, prof, n, o, budget, base, out, &found));
    if (found) return RT_OK;
    /* no chain plan fits: the least-memory plan (of every candidate) may */
    rt_plan least;
    rt_memstats least_pred;
    RT_TRY(rt_least_plan(c, prof, n, o, base, &least, &least_pred));
    if (least_pred.peak_total <= budget) { /* so any budget >= the smallest feasible one is met */
        out->plan = least;
        out->predicted = least_pred;
        return RT_OK;
    }
    rt_plan_free(&least);
    *least_peak = least_pred.peak_total;
    return rt_budget_refused(budget, least_pred.peak_total);
}

/* One granularity's plan for a budget or, when `mode`, a mode's budget
 * (falling back to the least-memory plan when no plan meets it).
 * RT_ERR_OOM refusing a budget: *least_peak says the smallest feasible
 * one (rt_plan_budget). */
static rt_status rt_plan_for(const rt_plan_ctx *c, const rt_stage_profile *prof, int n, rt_plan_options o,
                             int64_t budget, bool mode, int64_t base, rt_memory_plan *out, int64_t *least_peak) {
    rt_status st = rt_plan_budget(c, prof, n, o, budget, base, out, least_peak);
    if (st == RT_ERR_OOM && mode) {
        rt_error_clear();
        st = rt_least_plan(c, prof, n, o, base, &out->plan, &out->predicted);
        out->iterations = 1;
    }
    return st;
}

/* Whether plan a (predicted) serves `budget` better than plan b: one that
 * fits over one that does not; among fitting plans the least recompute,
 * then the smaller peak; among plans that do not fit, the smaller peak. */
static bool rt_plan_better(const rt_memory_plan *a, const rt_memory_plan *b, int64_t budget) {
    bool fa = a->predicted.peak_total <= budget, fb = b->predicted.peak_total <= budget;
    if (fa != fb) return fa;
    if (!fa) return a->predicted.peak_total < b->predicted.peak_total ||
                    (a->predicted.peak_total == b->predicted.peak_total && a->plan.recompute < b->plan.recompute);
    return a->plan.recompute < b->plan.recompute ||
           (a->plan.recompute == b->plan.recompute && a->predicted.peak_total < b->predicted.peak_total);
}

/* A budget or mode planned under two chain models, each plan predicted on
 * the meta run and the better kept (rt_plan_better) in out's plan,
 * predicted and iterations: the profile as measured, whose boundary rule
 * (memory/planner.h) is exact on chains of whole stages but counts a
 * tensor twice or not at all where an op fuses across two stages or a
 * stage hands its input on, and the same profile without keeps_input /
 * keeps_output, which errs at every boundary a checkpoint meets instead.
 * The budget search built on either can miss a plan the other finds
 * (resnet20 16², batch 1, conservative: 4.2% recompute without the rule,
 * the least-memory plan at 33.3% with it; prunet3d 64³, batch 2,
 * conservative: 22.2% with it, the least-memory plan at 28.3% without).
 * base for each: plain_total less that
 * model's plain peak. Errors as rt_plan_for; refused under both, the
 * smaller least. */
static rt_status rt_plan_models(const rt_plan_ctx *c, const rt_stage_profile *prof, int n, rt_plan_options o,
                                int64_t budget, bool mode, int64_t plain_total, rt_memory_plan *out,
                                int64_t *least_peak) {
    rt_stage_profile *bare = malloc((size_t)n * sizeof *bare);
    if (!bare) return rt_error_set(RT_ERR_OOM, "out of memory planning");
    memcpy(bare, prof, (size_t)n * sizeof *bare);
    for (int i = 0; i < n; i++) {
        memset(bare[i].keeps_input, 0, sizeof bare[i].keeps_input);
        memset(bare[i].keeps_output, 0, sizeof bare[i].keeps_output);
    }
    const rt_stage_profile *model[2] = {prof, bare};
    rt_memory_plan m[2];
    memset(m, 0, sizeof m);
    rt_status st[2] = {RT_OK, RT_OK};
    int64_t least[2] = {INT64_MAX, INT64_MAX};
    for (int v = 0; v < 2; v++) {
        int64_t model_plain = 0;
        st[v] = rt_model_plain_peak(model[v], n, &model_plain);
        if (st[v] == RT_OK)
            st[v] = rt_plan_for(c, model[v], n, o, budget, mode, plain_total - model_plain, &m[v], &least[v]);
        if (st[v] != RT_OK && st[v] != RT_ERR_OOM) { /* an error of its own (out of memory planning) */
            rt_status e = st[v];
            for (int k = 0; k <= v; k++) rt_memory_plan_free(&m[k]);
            free(bare);
            return e;
        }
    }
    free(bare);
    rt_status res;
    if (st[0] == RT_OK || st[1] == RT_OK) {
        int b = st[0] == RT_OK && (st[1] != RT_OK || !rt_plan_better(&m[1], &m[0], budget)) ? 0 : 1;
        rt_error_clear(); /* a refusal under the other model no longer holds */
        out->plan = m[b].plan;
        out->predicted = m[b].predicted;
        out->iterations = m[0].iterations + m[1].iterations;
        m[b].plan = (rt_plan){0};
        res = RT_OK;
    } else {
        *least_peak = least[0] < least[1] ? least[0] : least[1];
        res = *least_peak != INT64_MAX ? rt_budget_refused(budget, *least_peak) : st[0];
    }
    rt_memory_plan_free(&m[0]);
    rt_memory_plan_free(&m[1]);
    return res;
}

/* The plan for a budget or mode over whole units (a U-Net's levels), when
 * the stages are finer than the units: the chain model of leaf stages errs
 * more (a level's leaves each charged the skips it spans), so a per-unit
 * plan can need less recompute at the same budget, while the per-stage
 * plans reach less memory; each is predicted, and the better one is kept
 * in *out (expanded to the stages). */
static rt_status rt_plan_units(rt_plan_ctx c, rt_plan_options o, int64_t budget, bool mode, int64_t stage_least,
                               rt_status stage_st, rt_memory_plan *out) {
    rt_checkpoint *ck = rt_checkpoint_of(c.w);
    int n = ck->n_stages;
    rt_items units;
    rt_status st = rt_items_make(ck, true, &units);
    rt_stage_profile *prof = st == RT_OK ? calloc((size_t)units.n, sizeof *prof) : NULL;
    if (st == RT_OK && !prof) st = rt_error_set(RT_ERR_OOM, "out of memory planning");
    if (st == RT_OK) st = rt_profile_items(c.w, c.x_ndim, c.micro_shape, &units, prof);
    rt_memory_plan u = {0};
    int64_t least = INT64_MAX;
    if (st == RT_OK) {
        c.units = &units;
        st = rt_plan_models(&c, prof, units.n, o, budget, mode, out->predicted_plain.peak_total, &u, &least);
    }
    if (st == RT_OK && (stage_st != RT_OK || rt_plan_better(&u, out, budget))) {
        rt_plan s;
        st = rt_plan_expand(&units, &u.plan, n, &s);
        if (st == RT_OK) {
            rt_plan_free(&out->plan);
            out->plan = s;
            out->predicted = u.predicted;
            out->iterations += u.iterations;
            rt_error_clear(); /* the per-stage refusal, if any, no longer holds */
        }
    } else if (st == RT_ERR_OOM && stage_st == RT_ERR_OOM &&
               (least != INT64_MAX || stage_least != INT64_MAX)) { /* refused twice: the smaller least */
        st = rt_budget_refused(budget, least < stage_least ? least : stage_least);
    } else if (st == RT_ERR_OOM && stage_st == RT_OK) { /* the per-stage plan stands */
        rt_error_clear();
        st = RT_OK;
    } /* else an error of its own (out of memory planning), returned as it is */
    rt_memory_plan_free(&u);
    free(prof);
    rt_items_free(&units);
    return st;
}

rt_status rt_memory_plan_make(rt_module *w, const rt_optimizer_spec *opt, const rt_train_config *cfg, int x_ndim,
                              const int64_t *x_shape, int y_ndim, const int64_t *y_shape, rt_dtype y_dtype,
                              const rt_memory_config *mc, rt_memory_plan *out) {
    rt_checkpoint *ck = rt_checkpoint_of(w);
    if (!ck || !opt || !cfg || !x_shape || !mc || !out)
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_memory_plan_make: %s", !ck ? "the module is not a Checkpoint"
                            : "an argument is NULL");
    memset(out, 0, sizeof *out);
    if ((mc->mode != RT_MEMORY_MODE_NONE) + (mc->budget > 0) + (mc->segments > 0) > 1)
        return rt_error_set(RT_ERR_INVALID_ARG, "choose one of a memory mode, a memory budget and checkpoint "
                            "segments (they all decide what to recompute)");
    if (!rt_memory_mode_str(mc->mode))
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_memory_plan_make: unknown memory mode %d", (int)mc->mode);
    if (x_ndim < 1 || x_ndim > RT_MAX_DIMS || x_shape[0] < 1)
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_memory_plan_make: x_shape needs 1 to %d dimensions and a batch "
                            ">= 1", RT_MAX_DIMS);
    int n = ck->n_stages;
    rt_stage_profile *prof = calloc((size_t)n, sizeof *prof);
    if (!prof) return rt_error_set(RT_ERR_OOM, "out of memory planning");
    /* the stages are profiled on one micro-batch, the largest of the step's
     * ceil(N / K) and floor(N / K) (train/step.h), since each forward and
     * backward holds one micro-batch's activations */
    int64_t micro[RT_MAX_DIMS];
    memcpy(micro, x_shape, (size_t)x_ndim * sizeof *micro);
    int64_t k = cfg->accum_steps < 1 ? 1 : cfg->accum_steps < x_shape[0] ? cfg->accum_steps : x_shape[0];
    micro[0] = (x_shape[0] + k - 1) / k;
    rt_predict_cache predictions = {.n_stages = n};
    rt_chain_cache chains = {0};
    rt_plan_ctx c = {w, opt, cfg, x_ndim, y_ndim, x_shape, y_shape, micro, y_dtype, NULL, &predictions, &chains};
    rt_plan_options o = {true, mc->selective, true};
    rt_status st = rt_checkpoint_profile(w, x_ndim, micro, prof);
    if (st == RT_OK) st = rt_checkpoint_set_plain(w);
    if (st == RT_OK) st = rt_memory_predict(w, opt, cfg, x_ndim, x_shape, y_ndim, y_shape, y_dtype, &out->predicted_plain);
    rt_plan plain = {0};
    if (st == RT_OK) st = rt_plan_from_wrapper(ck, prof, &plain);
    if (st == RT_OK && (mc->budget > 0 || mc->mode != RT_MEMORY_MODE_NONE)) {
        /* a mode is the share of the plain step's activations (its peak
         * less parameters, gradients, optimizer state and batch), as a
         * budget for the whole step; the least-memory plan when that is
         * below it */
        const rt_memstats *pl = &out->predicted_plain;
        int64_t fixed = pl->peak[RT_MEM_PARAM] + pl->peak[RT_MEM_GRAD] + pl->peak[RT_MEM_OPTIM] + pl->peak[RT_MEM_DATA];
        bool mode = mc->budget <= 0;
        int64_t budget = !mode ? mc->budget
                               : fixed + (int64_t)(rt_memory_mode_fraction(mc->mode) * (double)(pl->peak_total - fixed));
        int64_t least = INT64_MAX;
        st = rt_plan_models(&c, prof, n, o, budget, mode, pl->peak_total, out, &least);
        if ((st == RT_OK || st == RT_ERR_OOM) && ck->unit[n - 1] + 1 < n)
            st = rt_plan_units(c, o, budget, mode, least, st, out);
    } else if (st == RT_OK) {
        /* reversible stages keep rebuilding under the manual strategies */
        if (mc->segments > 0 || mc->selective) st = rt_plan_manual(&c, prof, n, (int)mc->segments, &out->plan);
        else st = rt_plan_from_wrapper(ck, prof, &out->plan);
        if (st == RT_OK) st = rt_apply_predict(&c, &out->plan, &out->predicted);
        out->iterations = 1;
    }
    if (st == RT_OK) { /* the wrapper is left on the plan returned (searches end on their last try) */
        out->plan.forward = plain.forward;
        out->recompute_fraction = plain.forward > 0 ? out->plan.recompute / (3.0 * plain.forward) : 0.0;
        st = rt_checkpoint_set_plan(w, out->plan.kind, out->plan.segment, out->plan.n);
    }
    rt_plan_free(&plain);
    rt_predict_cache_free(&predictions);
    rt_chain_cache_free(&chains);
    free(prof);
    if (st != RT_OK) rt_memory_plan_free(out);
    return st;
}

void rt_memory_plan_free(rt_memory_plan *p) {
    if (p) rt_plan_free(&p->plan);
}
