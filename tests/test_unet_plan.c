/* Checkpointing and the planner on graphs with skips: the U-Nets
 * (models/unet.h) under memory/checkpoint.h's stages and memory/budget.h's
 * plans (docs/design.md, "Checkpointing, selective recompute and the
 * planner": the skip heuristic).
 * - stages: the U-Nets list their levels in execution order, each skip
 *   read by its merge stage from the store stage after its encoder level;
 *   a level that is a Sequential is one unit whose leaves are stages, so
 *   regions may begin and end inside a level (hand-made plans below are
 *   written per unit, and three cut inside levels);
 * - equivalence: under hand-made plans (regions that hold a skip's producer
 *   and its reader, regions that read a skip produced before them, K
 *   segments, selective, rebuilt sequences) and under the planner's plans
 *   for three budgets, the loss and every parameter gradient equal plain
 *   backpropagation's (relative, max |Δ| over max |g|, ≤ 1e-5), and batch
 *   norm's running statistics are updated once per training forward, to
 *   the plain run's values;
 * - bytes: for three budgets between the smallest feasible and the plain
 *   peak, the meta prediction of the planned step equals the real step's
 *   tracked peak byte for byte (each category) and stays within the
 *   budget; an impossible budget is refused with the smallest feasible
 *   one in the message, which is then accepted. Zoo models unet3d and
 *   prunet3d at 16³, and unet3d at 18×16×20 (padded to 24×16×24 by its
 *   first stage), batch 1, 2 channels, 3 classes. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/engine.h"
#include "core/mem.h"
#include "core/rng.h"
#include "core/tensor.h"
#include "memory/budget.h"
#include "memory/checkpoint.h"
#include "memory/predict.h"
#include "memory/reversible.h"
#include "models/model.h"
#include "models/unet.h"
#include "nn/modules.h"
#include "optim/optimizer.h"
#include "ops/ops.h"
#include "ops/ops3d.h"
#include "train/seg_loss.h"
#include "train/step.h"
#include "rt_test.h"
#include "test_util.h"
#include "seg_util.h"

enum { CIN = 2, K = 3, S = 16 };

static void module_destroy_(void *p) { rt_module_destroy(p); }

enum { RT_UNET_TEST_MAX_STAGES = 64 };

/* 3 levels 4/8/16 (16³ → 4³ at the bottom), as test_unet's small nets. */
static rt_unet_config small_config(bool reversible, rt_unet_norm norm) {
    rt_unet_config c = {.reversible = reversible, .levels = 3, .widths = {4, 8, 16}, .norm = norm, .groups = 2,
                        .upsample = RT_UNET_UP_TRANSPOSED, .enc_blocks = {1, 2, 1}, .dec_blocks = {1, 1, 2}};
    return c;
}

/* Checkpoint(U-Net of c) on dev, every stage STORE. */
static rt_module *wrapped(const rt_unet_config *c, rt_device dev) {
    rt_init_ctx ctx = rt_init_ctx_make(dev, 7);
    rt_module *m = NULL, *w = NULL;
    if (rt_unet_build(c, &ctx, CIN, K, &m) != RT_OK || rt_checkpoint_create(m, &w) != RT_OK ||
        rt_checkpoint_set_plain(w) != RT_OK) {
        fprintf(stderr, "  build: %s\n", rt_error_last());
        return NULL;
    }
    return w;
}

/* A plan from letters, one per stage: s store, c checkpoint, x selective,
 * r rebuild; '|' starts a new checkpoint segment, spaces are ignored. */
static bool plan_of(const char *spec, int n, rt_stage_kind *kind, int *seg) {
    int i = 0, segment = 0;
    for (const char *c = spec; *c; c++) {
        if (*c == ' ') continue;
        if (*c == '|') {
            segment++;
            continue;
        }
        if (i == n) return false;
        kind[i] = *c == 'c' ? RT_STAGE_CHECKPOINT : *c == 'x' ? RT_STAGE_SELECTIVE : *c == 'r' ? RT_STAGE_REBUILD
                                                                                            : RT_STAGE_STORE;
        if (*c != 'c') segment++;
        seg[i++] = segment;
        if (*c != 'c') segment++;
    }
    return i == n;
}


/* One training step of a fresh plain net and of a fresh net under the plan
 * (same weights): equal loss, gradients, running statistics and counters. */
static void check_plan(const rt_unet_config *c, const rt_stage_kind *kind, const int *seg, const char *label) {
    rt_module *a = wrapped(c, RT_DEVICE_CPU), *b = wrapped(c, RT_DEVICE_CPU);
    tu_defer(module_destroy_, a);
    tu_defer(module_destroy_, b);
    CHECK(a && b);
    if (!a || !b) return;
    int n = rt_checkpoint_of(b)->n_stages;
    CHECK_OK(rt_checkpoint_set_plan(b, kind, seg, n));
    rt_generator g = {5, 0};
    int64_t xs[5] = {2, CIN, S, S, S};
    rt_tensor *x = tu_randn(&g, 5, xs, 0.0f, 1.0f), *y = tu_seg_labels(2, S, S, S, K);
    double la = 0, lb = 0;
    rt_memstats before, after;
    rt_memstats_get(&before);
    CHECK_OK(tu_seg_step(a, x, y, &la));
    CHECK_OK(tu_seg_step(b, x, y, &lb));
    rt_memstats_get(&after);
    CHECK_EQ_INT(after.live[RT_MEM_SAVED], before.live[RT_MEM_SAVED]); /* every kept skip and input let go */
    CHECK(fabs(la - lb) <= 1e-6 * fabs(la));
    rt_state_dict *sa = NULL, *sb = NULL;
    CHECK_OK(rt_module_state_dict(a, &sa));
    CHECK_OK(rt_module_state_dict(b, &sb));
    double worst = 0, worst_buf = 0;
    for (int i = 0; i < sa->n; i++) {
        if (sa->entries[i].counter) {
            CHECK_EQ_INT(*sa->entries[i].counter, 1);
            CHECK_EQ_INT(*sb->entries[i].counter, 1);
            continue;
        }
        rt_tensor *ta = sa->entries[i].tensor, *tb = sb->entries[i].tensor;
        if (sa->entries[i].kind == RT_ENTRY_BUFFER) {
            double d = rt_rel_difference(tb, ta);
            if (d > worst_buf) worst_buf = d;
            continue;
        }
        CHECK(ta->grad && tb->grad);
        if (!ta->grad || !tb->grad) continue;
        double d = rt_rel_difference(tb->grad, ta->grad);
        if (!(d <= 1e-5)) fprintf(stderr, "  %s: %s differs by %.3g\n", label, sa->entries[i].name, d);
        if (!(d <= worst)) worst = d;
    }
    printf("  %-44s loss %.6f, worst gradient difference %.2g, running statistics %.2g\n", label, lb, worst,
           worst_buf);
    CHECK(worst <= 1e-5);
    CHECK(worst_buf <= 1e-6);
    rt_state_dict_destroy(sa);
    rt_state_dict_destroy(sb);
}

/* The stage of ck whose module path is `path` (-1: none). */
static int stage_at(rt_checkpoint *ck, const char *path) {
    for (int i = 0; i < ck->n_stages; i++) {
        char p[96];
        if (!strcmp(rt_module_path(ck->stages[i], p, sizeof p), path)) return i;
    }
    return -1;
}

/* Regions that begin and end inside a level, as the planner may cut
 * them: stages [first, last] of `path_first`..`path_last` checkpointed as
 * segment 1, the rest stored. */
static void check_cut(const rt_unet_config *c, rt_checkpoint *ck, const char *path_first, const char *path_last) {
    int first = stage_at(ck, path_first), last = stage_at(ck, path_last);
    CHECK(first >= 0 && last >= first);
    if (first < 0 || last < first) return;
    rt_stage_kind kind[RT_UNET_TEST_MAX_STAGES];
    int seg[RT_UNET_TEST_MAX_STAGES];
    for (int i = 0; i < ck->n_stages; i++) {
        kind[i] = i >= first && i <= last ? RT_STAGE_CHECKPOINT : RT_STAGE_STORE;
        seg[i] = i >= first && i <= last ? -1 : i;
    }
    char label[160];
    snprintf(label, sizeof label, "cut %s..%s", path_first, path_last);
    check_plan(c, kind, seg, label);
}

/* specs: one letter per unit (a level, or a stage of its own), each
 * applied to every stage of its unit. */
static void check_plans(const rt_unet_config *c, int want_units, const char *const *specs, int n_specs) {
    rt_module *probe = wrapped(c, RT_DEVICE_META);
    tu_defer(module_destroy_, probe);
    CHECK(probe);
    if (!probe) return;
    rt_checkpoint *ck = rt_checkpoint_of(probe);
    int n = ck->n_stages, units = ck->unit[n - 1] + 1;
    CHECK_EQ_INT(units, want_units);
    CHECK(n <= RT_UNET_TEST_MAX_STAGES);
    if (n > RT_UNET_TEST_MAX_STAGES) return;
    printf("  %d stages in %d units:", n, units);
    for (int i = 0; i < n; i++) {
        char path[96];
        printf("%s%s%s", i > 0 && ck->unit[i] == ck->unit[i - 1] ? "," : " ",
               rt_module_path(ck->stages[i], path, sizeof path), ck->reads[i] >= 0 ? "(reads a skip)" : "");
    }
    printf("\n");
    rt_stage_kind ukind[RT_UNET_TEST_MAX_STAGES], kind[RT_UNET_TEST_MAX_STAGES];
    int useg[RT_UNET_TEST_MAX_STAGES], seg[RT_UNET_TEST_MAX_STAGES];
    for (int k = 0; k < n_specs; k++) {
        CHECK(plan_of(specs[k], units, ukind, useg));
        for (int i = 0; i < n; i++) {
            kind[i] = ukind[ck->unit[i]];
            seg[i] = useg[ck->unit[i]];
        }
        check_plan(c, kind, seg, specs[k]);
    }
    /* K segments, selective */
    for (int segments = 2; segments <= 5; segments += 3) {
        CHECK_OK(rt_checkpoint_set_segments(probe, segments));
        char label[32];
        snprintf(label, sizeof label, "%d segments", segments);
        check_plan(c, ck->kind, ck->segment, label);
    }
    CHECK_OK(rt_checkpoint_set_selective(probe, NULL, NULL));
    check_plan(c, ck->kind, ck->segment, "selective");
    /* the planner's plans for three budgets between the least and plain */
    rt_optimizer_spec spec = {.kind = RT_OPTIM_SGD, .sgd = rt_sgd_default_opts(0.01)};
    rt_train_config cfg = {.accum_steps = 1, .loss = rt_loss_dice_ce};
    int64_t xs[5] = {2, CIN, S, S, S}, ys[4] = {2, S, S, S};
    rt_memory_plan p;
    CHECK_OK(rt_memory_plan_make(probe, &spec, &cfg, 5, xs, 4, ys, RT_I32, &(rt_memory_config){0}, &p));
    int64_t plain = p.predicted_plain.peak_total;
    rt_memory_plan_free(&p);
    rt_memory_config mc = {.mode = RT_MEMORY_MODE_AGGRESSIVE, .selective = true};
    CHECK_OK(rt_memory_plan_make(probe, &spec, &cfg, 5, xs, 4, ys, RT_I32, &mc, &p));
    int64_t least = p.predicted.peak_total;
    rt_memory_plan_free(&p);
    for (int k = 0; k < 3; k++) {
        rt_memory_config b = {.budget = least + (plain - least) * k / 3, .selective = true};
        CHECK_OK(rt_memory_plan_make(probe, &spec, &cfg, 5, xs, 4, ys, RT_I32, &b, &p));
        char label[64];
        snprintf(label, sizeof label, "planned for %.2f MiB (plain %.2f)", b.budget / 1048576.0, plain / 1048576.0);
        check_plan(c, p.plan.kind, p.plan.segment, label);
        rt_memory_plan_free(&p);
    }
}

/* unet3d's 14 stages: pad encoders.0 store0 encoders.1 store1 encoders.2
 * ups.1 merge1 decoders.1 ups.0 merge0 decoders.0 last_conv crop. */
static const char *const unet_specs[] = {
    "s s s c c c c c s s s s s s",       /* a region holding store1 and merge1: the skip is recomputed */
    "s s s s s s s s | c c c c c c",     /* the region reads skip 0, produced before it: kept */
    "c c c c | c c c | c c c | c c c c", /* every region boundary against a skip */
    "s s s s s s s c s s c s s s",       /* the merges alone */
    "c x c c x c c x c x c c x c",       /* selective and checkpointed stages mixed */
};

/* The levels' leaves are stages: regions that begin and end inside a
 * level — inside one, across a level boundary holding a store stage, and
 * from an upsampling through a merge into a decoder level (reading skip 0,
 * produced before the region). */
static void check_cuts(const rt_unet_config *c) {
    rt_module *probe = wrapped(c, RT_DEVICE_META);
    tu_defer(module_destroy_, probe);
    CHECK(probe);
    if (!probe) return;
    rt_checkpoint *ck = rt_checkpoint_of(probe);
    CHECK(ck->n_stages > ck->unit[ck->n_stages - 1] + 1);
    check_cut(c, ck, "encoders.0.norm1", "encoders.0.conv2");
    check_cut(c, ck, "encoders.1.act2", "encoders.2.conv1");
    check_cut(c, ck, "ups.0", "decoders.0.norm1");
}

TU_TEST(unet3d_plans_group) {
    rt_unet_config c = small_config(false, RT_UNET_NORM_GROUP);
    check_plans(&c, 14, unet_specs, 5);
    check_cuts(&c);
}
TU_TEST(unet3d_plans_batch) {
    rt_unet_config c = small_config(false, RT_UNET_NORM_BATCH);
    check_plans(&c, 14, unet_specs, 5);
    check_cuts(&c);
}

/* prunet3d's 23 stages: pad first_conv to_blocked encoders.0.blocks store0
 * encoders.1.{pool,conv,blocks} store1 encoders.2.{pool,conv,blocks}
 * decoders.2.{blocks,conv,upsample} merge1 decoders.1.{blocks,conv,upsample}
 * merge0 decoders.0.blocks last_conv crop. */
static const char *const prunet_specs[] = {
    "s s s s s c c c c c c c c c c c s s s s s s s", /* holds store1 and merge1 */
    "s s s s s s s s s s s s s s s s | c c c c c c c", /* reads skip 0 from before */
    "c c c c c | c c c c c | c c c c c | c c c c c c c c",
    "s s s r s s s r s s s r r s s s r s s s r s s",   /* every sequence rebuilt */
    "c c c r c | c c r c | c c r r c c | c r c c c r c c", /* rebuilt stages between regions */
};

TU_TEST(prunet3d_plans_group) {
    rt_unet_config c = small_config(true, RT_UNET_NORM_GROUP);
    c.upsample = RT_UNET_UP_TRILINEAR;
    check_plans(&c, 23, prunet_specs, 5);
}
TU_TEST(prunet3d_plans_batch) {
    rt_unet_config c = small_config(true, RT_UNET_NORM_BATCH);
    c.upsample = RT_UNET_UP_TRILINEAR;
    check_plans(&c, 23, prunet_specs, 5);
}

/* ------------------------------------------------------------ predicted = measured */

static void check_budgets(const char *name, int64_t sd, int64_t sh, int64_t sw) {
    rt_optimizer_spec spec = {.kind = RT_OPTIM_SGD, .sgd = rt_sgd_default_opts(0.01)};
    spec.sgd.momentum = 0.9;
    rt_train_config cfg = {.accum_steps = 1, .loss = rt_loss_dice_ce};
    int64_t xs[5] = {1, CIN, sd, sh, sw}, ys[4] = {1, sd, sh, sw};
    rt_model *meta = NULL;
    CHECK_OK(rt_model_create(name, CIN, K, RT_DEVICE_META, 1, &meta));
    if (!meta) return;
    rt_module *mw = NULL;
    CHECK_OK(rt_checkpoint_create(meta->net, &mw));
    meta->net = mw;
    rt_memory_plan p;
    CHECK_OK(rt_memory_plan_make(mw, &spec, &cfg, 5, xs, 4, ys, RT_I32, &(rt_memory_config){0}, &p));
    int64_t plain = p.predicted_plain.peak_total;
    rt_memory_plan_free(&p);
    /* impossible: refused with the smallest feasible budget, which fits */
    rt_status st = rt_memory_plan_make(mw, &spec, &cfg, 5, xs, 4, ys, RT_I32,
                                       &(rt_memory_config){.budget = plain / 10, .selective = true}, &p);
    CHECK(st == RT_ERR_OOM);
    const char *msg = strstr(rt_error_last(), "smallest feasible budget is ");
    CHECK(msg);
    long long least = 0;
    const char *paren = msg ? strchr(msg, '(') : NULL;
    CHECK(paren && sscanf(paren + 1, "%lld", &least) == 1);
    printf("  %s %lld×%lld×%lld b1: plain %.2f MiB, smallest feasible %.2f MiB\n", name, (long long)sd, (long long)sh,
           (long long)sw, plain / 1048576.0, least / 1048576.0);
    CHECK(least > 0 && least < plain);
    int64_t budgets[4] = {least, least + (plain - least) / 3, least + 2 * (plain - least) / 3, plain};
    rt_memory_plan plans[4];
    for (int k = 0; k < 4; k++) {
        CHECK_OK(rt_memory_plan_make(mw, &spec, &cfg, 5, xs, 4, ys, RT_I32,
                                     &(rt_memory_config){.budget = budgets[k], .selective = true}, &plans[k]));
        CHECK(plans[k].predicted.peak_total <= budgets[k]);
    }
    rt_model_destroy(meta);
    /* the real steps: one model, the plans switching between steps */
    rt_memstats base;
    rt_memstats_get(&base);
    rt_model *m = NULL;
    CHECK_OK(rt_model_create(name, CIN, K, RT_DEVICE_CPU, 1, &m));
    rt_module *w = NULL;
    CHECK_OK(rt_checkpoint_create(m->net, &w));
    m->net = w;
    int np = rt_state_dict_num_params(m->sd);
    rt_tensor **params = malloc((size_t)np * sizeof *params);
    rt_state_dict_params(m->sd, params, np);
    rt_optimizer *opt = rt_optimizer_create(&spec, params, np);
    free(params);
    rt_tensor *x = rt_tensor_create(5, xs, RT_F32, RT_DEVICE_CPU, RT_MEM_DATA);
    rt_tensor *y = rt_tensor_create(4, ys, RT_I32, RT_DEVICE_CPU, RT_MEM_DATA);
    CHECK(opt && x && y);
    rt_philox_uniform(3, 0, rt_tensor_numel(x), rt_tensor_f32(x));
    int32_t *t = rt_tensor_data(y);
    for (int64_t i = 0; i < rt_tensor_numel(y); i++) t[i] = (int32_t)((i / 3 + i / 17) % K);
    rt_train_result r;
    CHECK_OK(rt_train_step(w, opt, &cfg, x, y, &r)); /* the optimizer state exists from here on */
    for (int k = 0; k < 4; k++) {
        CHECK_OK(rt_checkpoint_set_plan(w, plans[k].plan.kind, plans[k].plan.segment, plans[k].plan.n));
        rt_memstats_reset_peaks();
        CHECK_OK(rt_train_step(w, opt, &cfg, x, y, &r));
        rt_memstats meas;
        rt_memstats_get(&meas);
        int bad = 0;
        for (int c = 0; c < RT_MEM_NCAT; c++) bad += meas.peak[c] - base.live[c] != plans[k].predicted.peak[c];
        int64_t measured = meas.peak_total - base.live_total;
        printf("  budget %8.2f MiB: predicted %8.2f MiB, measured %8.2f MiB (%lld vs %lld bytes), recompute "
               "%.1f%%, loss %.4f\n", budgets[k] / 1048576.0, plans[k].predicted.peak_total / 1048576.0,
               measured / 1048576.0, (long long)plans[k].predicted.peak_total, (long long)measured,
               100 * plans[k].recompute_fraction, r.loss);
        CHECK_EQ_INT(bad, 0);
        CHECK_EQ_INT(measured, plans[k].predicted.peak_total);
        CHECK(measured <= budgets[k]);
        rt_memory_plan_free(&plans[k]);
    }
    rt_optimizer_destroy(opt);
    rt_tensor_release(x);
    rt_tensor_release(y);
    rt_model_destroy(m);
}

/* The least-memory plan (aggressive mode) is never above the model's own
 * step, every reversible stage rebuilt and nothing planned: at 32³ the
 * chain model alone chose a plan of 19.6 MiB against the own step's 16.0
 * (it charges skips to every stage they span), so the planner measures
 * its plans against that one. Meta runs only. */
TU_TEST(least_plan_not_above_own_step) {
    rt_optimizer_spec spec = {.kind = RT_OPTIM_SGD, .sgd = rt_sgd_default_opts(0.01)};
    spec.sgd.momentum = 0.9;
    rt_train_config cfg = {.accum_steps = 1, .loss = rt_loss_dice_ce};
    int64_t xs[5] = {1, 4, 32, 32, 32}, ys[4] = {1, 32, 32, 32};
    rt_model *own = NULL, *meta = NULL;
    CHECK_OK(rt_model_create("prunet3d", 4, 4, RT_DEVICE_META, 1, &own));
    CHECK_OK(rt_model_create("prunet3d", 4, 4, RT_DEVICE_META, 1, &meta));
    if (!own || !meta) return;
    rt_memstats own_pred;
    CHECK_OK(rt_memory_predict(own->net, &spec, &cfg, 5, xs, 4, ys, RT_I32, &own_pred));
    rt_module *mw = NULL;
    CHECK_OK(rt_checkpoint_create(meta->net, &mw));
    meta->net = mw;
    rt_memory_plan p;
    CHECK_OK(rt_memory_plan_make(mw, &spec, &cfg, 5, xs, 4, ys, RT_I32,
                                 &(rt_memory_config){.mode = RT_MEMORY_MODE_AGGRESSIVE}, &p));
    printf("  prunet3d 32³: the model's own step %.2f MiB, the least-memory plan %.2f MiB\n",
           own_pred.peak_total / 1048576.0, p.predicted.peak_total / 1048576.0);
    CHECK(p.predicted.peak_total <= own_pred.peak_total);
    rt_memory_plan_free(&p);
    rt_model_destroy(meta);
    rt_model_destroy(own);
}

TU_TEST(budgets_unet3d) { check_budgets("unet3d", S, S, S); }
TU_TEST(budgets_prunet3d) { check_budgets("prunet3d", S, S, S); }
/* padded to 24³ inside the net (the pad and crop are its first and last stages) */
TU_TEST(budgets_unet3d_padded) { check_budgets("unet3d", 18, 16, 20); }

int main(int argc, char **argv) {
    static const rt_test_case cases[] = {
        {"unet3d_plans_group", unet3d_plans_group},   {"unet3d_plans_batch", unet3d_plans_batch},
        {"prunet3d_plans_group", prunet3d_plans_group}, {"prunet3d_plans_batch", prunet3d_plans_batch},
        {"budgets_unet3d", budgets_unet3d},           {"budgets_prunet3d", budgets_prunet3d},
        {"budgets_unet3d_padded", budgets_unet3d_padded}, {"least_plan_not_above_own_step", least_plan_not_above_own_step},
    };
    return rt_test_main(argc, argv, cases, (int)(sizeof cases / sizeof cases[0]));
}
