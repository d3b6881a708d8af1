/* The chain planner (src/memory/planner.h) against brute force: on random
 * chains of 1..8 stages with heterogeneous bytes and costs, some stages
 * offering selective or reversible options, and random budgets from
 * infeasible to loose, the dynamic program's recompute equals the least
 * recompute over every plan (enumerated), its plan is feasible and its
 * modelled peak is what rt_plan_evaluate says; rt_plan_min_peak equals
 * the brute-force minimum peak; half the chains carry random skips (spans
 * and side inputs, the U-Net heuristic). Chains this short run the DP's
 * capped first pass with a cap of 2, so the cost bound it hands the exact
 * pass cuts hard, and equality shows that cut exact. Exact equality: the DP adds the same
 * doubles in the same order as rt_plan_evaluate (costs are integers). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "memory/plan_cache.h"
#include "memory/planner.h"
#include "rt_test.h"

enum { MAXN = 8 };

typedef struct brute {
    const rt_stage_profile *p;
    int n;
    int64_t budget;
    rt_plan_options opt;
    rt_stage_kind kind[MAXN];
    int seg[MAXN];
    double best;     /* least recompute of a feasible plan (-1: none) */
    int64_t min_peak;
    long plans;
} brute;

static bool offers(const rt_stage_profile *s, rt_stage_kind k, rt_plan_options o) {
    if (k == RT_STAGE_CHECKPOINT) return o.allow_checkpoint;
    if (k == RT_STAGE_SELECTIVE) return o.allow_selective && s->saved_sel >= 0;
    if (k == RT_STAGE_REBUILD) return o.allow_rebuild && s->saved_rev >= 0;
    return true;
}

/* Every plan: at stage i a single-stage segment of each kind offered, or a
 * checkpoint segment [i, e] for every e. */
static void enumerate(brute *b, int i) {
    if (i == b->n) {
        int64_t peak;
        double rc;
        if (rt_plan_evaluate(b->p, b->n, b->kind, b->seg, &peak, &rc) != RT_OK) return;
        b->plans++;
        if (peak < b->min_peak) b->min_peak = peak;
        if (peak <= b->budget && (b->best < 0 || rc < b->best)) b->best = rc;
        return;
    }
    for (int k = RT_STAGE_STORE; k <= RT_STAGE_REBUILD; k++) {
        if (k == RT_STAGE_CHECKPOINT || !offers(&b->p[i], (rt_stage_kind)k, b->opt)) continue;
        b->kind[i] = (rt_stage_kind)k;
        b->seg[i] = i;
        enumerate(b, i + 1);
    }
    if (!b->opt.allow_checkpoint) return;
    for (int e = i; e < b->n; e++) {
        for (int j = i; j <= e; j++) {
            b->kind[j] = RT_STAGE_CHECKPOINT;
            b->seg[j] = i;
        }
        enumerate(b, e + 1);
    }
}

/* A uniform integer in [0, m) from the Philox stream. */
static uint64_t rnd(rt_generator *g, uint64_t m) {
    float u;
    rt_generator_uniform(g, 1, &u);
    uint64_t r = (uint64_t)((double)u * (double)m);
    return r < m ? r : m - 1;
}

static void random_chain(rt_generator *g, int n, rt_stage_profile *p) {
    for (int i = 0; i < n; i++) {
        rt_stage_profile *s = &p[i];
        *s = (rt_stage_profile){0}; /* no boundary flags unless random_boundaries sets them */
        s->input_bytes = i == 0 && rnd(g, 2) ? 0 : 1 + (int64_t)rnd(g, 40);
        s->saved = (int64_t)rnd(g, 100);
        s->peak = s->saved + 1 + (int64_t)rnd(g, 60);
        s->fwd = (double)(1 + rnd(g, 50));
        s->saved_sel = s->peak_sel = s->saved_rev = s->peak_rev = -1;
        s->fwd_sel = s->fwd_rev = 0;
        if (rnd(g, 2)) {
            s->saved_sel = (int64_t)rnd(g, (uint64_t)s->saved + 1);
            s->peak_sel = s->saved_sel + 1 + (int64_t)rnd(g, 80);
            s->fwd_sel = (double)rnd(g, (uint64_t)s->fwd + 1);
        }
        if (rnd(g, 3) == 0) {
            s->saved_rev = (int64_t)rnd(g, 10);
            s->peak_rev = s->saved_rev + 1 + (int64_t)rnd(g, 120);
            s->fwd_rev = (double)(1 + rnd(g, 60));
        }
        s->span = s->side_bytes = 0;
        s->side_from = -1;
    }
}

/* Skips on every other chain, from their own stream (the chains above stay
 * those of the plain test): stage i reads a skip of b bytes from an
 * earlier stage r, held across the stages between (span), as
 * rt_checkpoint_profile fills them for a U-Net. */
static void random_skips(rt_generator *g, int n, rt_stage_profile *p) {
    if (rnd(g, 2)) return;
    for (int i = 1; i < n; i++) {
        if (rnd(g, 3)) continue;
        int r = (int)rnd(g, (uint64_t)i);
        int64_t b = 1 + (int64_t)rnd(g, 30);
        p[i].side_from = r;
        p[i].side_bytes = b;
        for (int j = r + 1; j < i; j++) p[j].span += b;
    }
}

/* Boundary tensors on every other chain, from a stream of their own: per
 * stage and kind offered, whether the stage keeps its input and its
 * output by alias (rt_checkpoint_profile's keeps_input / keeps_output), so
 * the DP's states that differ only in whether the prefix's last stage
 * keeps its output are exercised. */
static void random_boundaries(rt_generator *g, int n, rt_stage_profile *p) {
    if (rnd(g, 2)) return;
    for (int i = 0; i < n; i++)
        for (int k = RT_STAGE_STORE; k <= RT_STAGE_REBUILD; k++) {
            if (k == RT_STAGE_CHECKPOINT) continue;
            p[i].keeps_input[k] = p[i].input_bytes > 0 && rnd(g, 2);
            p[i].keeps_output[k] = rnd(g, 2);
        }
}

static void planner_matches_brute_force(void) {
    rt_generator g = {2026, 0}, gs = {2027, 0}, gb = {2028, 0};
    long chains = 0, feasible = 0, plans = 0, skipped = 0;
    const rt_plan_options modes[3] = {{true, true, true}, {true, false, false}, {false, true, true}};
    for (int trial = 0; trial < 600; trial++) {
        int n = 1 + trial % MAXN;
        rt_stage_profile p[MAXN];
        random_chain(&g, n, p);
        random_skips(&gs, n, p);
        random_boundaries(&gb, n, p);
        for (int i = 0; i < n; i++)
            if (p[i].side_bytes > 0) {
                skipped++;
                break;
            }
        rt_plan_options opt = modes[trial % 3];
        brute b = {.p = p, .n = n, .opt = opt, .budget = INT64_MAX, .best = -1, .min_peak = INT64_MAX};
        enumerate(&b, 0);
        int64_t mp;
        CHECK_OK(rt_plan_min_peak(p, n, opt, &mp));
        CHECK_EQ_INT(mp, b.min_peak);
        for (int k = 0; k < 6; k++) {
            /* budgets: below the minimum, the minimum, and up to loose */
            int64_t budget = k == 0 ? b.min_peak - 1 : k == 1 ? b.min_peak : b.min_peak + (int64_t)rnd(&g, 300);
            b.budget = budget;
            b.best = -1;
            b.plans = 0;
            enumerate(&b, 0);
            plans += b.plans;
            rt_plan plan;
            rt_status st = rt_plan_chain(p, n, budget, opt, &plan);
            if (b.best < 0) {
                CHECK(st == RT_ERR_OOM);
                CHECK(strstr(rt_error_last(), "smallest feasible") != NULL);
                continue;
            }
            CHECK_OK(st);
            feasible++;
            int64_t peak;
            double rc;
            CHECK_OK(rt_plan_evaluate(p, n, plan.kind, plan.segment, &peak, &rc));
            CHECK(peak <= budget);
            CHECK_EQ_INT(peak, plan.peak);
            CHECK(rc == plan.recompute);
            if (rc != b.best) fprintf(stderr, "n=%d budget=%lld dp=%g brute=%g\n", n, (long long)budget, rc, b.best);
            CHECK(rc == b.best);
            rt_plan_free(&plan);
        }
        chains++;
    }
    printf("  %ld random chains of 1-%d stages (%ld with skips), %ld feasible budgets equal to brute force over %ld "
           "plans\n", chains, MAXN, skipped, feasible, plans);
}

/* The planning call's DP cache (memory/plan_cache.h) against the DP
 * itself: on random chains of 1-8 stages, each of three option sets, and
 * 24 random budgets in random order from the least feasible to above
 * storing everything, every cached answer has the recompute and modelled
 * peak of a fresh rt_plan_chain at that budget (a cached plan is returned
 * only for budgets between its peak and the budget it was planned for,
 * where the DP's optimum is the same). Two copies of each chain's profile
 * share the cache, one perturbed: models are told apart by content, so the
 * perturbed one never gets the other's plans, and the same content at
 * another address does. Answers from the cache are counted: at least a
 * quarter of the queries must be (a third are), or the test shows nothing
 * about hits. */
static void chain_cache_matches_dp(void) {
    rt_generator g = {2031, 0};
    long queries = 0, hits = 0;
    const rt_plan_options modes[3] = {{true, true, true}, {true, false, false}, {false, true, true}};
    for (int trial = 0; trial < 300; trial++) {
        int n = 1 + trial % MAXN;
        rt_stage_profile p[2][MAXN];
        random_chain(&g, n, p[0]);
        memcpy(p[1], p[0], sizeof p[0]);
        rt_stage_profile *other = &p[1][rnd(&g, (uint64_t)n)]; /* another model, same shape */
        int64_t more = 1 + (int64_t)rnd(&g, 20);
        other->saved += more;
        other->peak += more;
        rt_chain_cache cc = {0};
        for (int q = 0; q < 24; q++) {
            int v = (int)rnd(&g, 2);
            rt_stage_profile copy[MAXN]; /* the same model at another address */
            memcpy(copy, p[v], sizeof copy);
            rt_plan_options opt = modes[rnd(&g, 3)];
            int64_t mp;
            CHECK_OK(rt_plan_min_peak(copy, n, opt, &mp));
            int64_t budget = mp + (int64_t)rnd(&g, 400);
            int before = cc.len;
            rt_plan cached, fresh;
            CHECK_OK(rt_chain_cache_plan(&cc, copy, n, budget, opt, &cached));
            CHECK_OK(rt_plan_chain(copy, n, budget, opt, &fresh));
            queries++;
            hits += cc.len == before;
            CHECK(cached.recompute == fresh.recompute);
            CHECK_EQ_INT(cached.peak, fresh.peak);
            int64_t peak;
            double rc;
            CHECK_OK(rt_plan_evaluate(copy, n, cached.kind, cached.segment, &peak, &rc));
            CHECK(peak <= budget && peak == cached.peak && rc == cached.recompute);
            rt_plan_free(&cached);
            rt_plan_free(&fresh);
        }
        CHECK(cc.n_models <= 2);
        rt_chain_cache_free(&cc);
    }
    printf("  %ld budgets on 300 random chains: %ld answered from the cache, each equal to the DP's own\n", queries,
           hits);
    CHECK(hits * 4 >= queries);
}

/* A uniform chain where the answer is known: n equal stages (saved 1,
 * peak 2, input 1, cost 1) under a budget that fits everything stored
 * needs no recompute; the smallest feasible budget forces checkpoints. */
static void planner_uniform_chain(void) {
    rt_stage_profile p[8];
    for (int i = 0; i < 8; i++) p[i] = (rt_stage_profile){1, 1, 2, -1, -1, -1, -1, 1.0, 0, 0, 0, 0, -1, {false}, {false}};
    rt_plan plan;
    CHECK_OK(rt_plan_chain(p, 8, 9, (rt_plan_options){true, false, false}, &plan)); /* all stored: 7 + 2 */
    CHECK(plan.recompute == 0.0);
    CHECK_EQ_INT(plan.peak, 9);
    rt_plan_free(&plan);
    int64_t mp;
    CHECK_OK(rt_plan_min_peak(p, 8, (rt_plan_options){true, false, false}, &mp));
    CHECK(mp < 9);
    CHECK_OK(rt_plan_chain(p, 8, mp, (rt_plan_options){true, false, false}, &plan));
    CHECK(plan.recompute > 0.0);
    rt_plan_free(&plan);
    CHECK(rt_plan_chain(NULL, 8, 9, rt_plan_options_all(), &plan) == RT_ERR_INVALID_ARG);
}

/* A tensor between two stages counts once however many keep it. Three
 * stages, each keeping its input and its output (own bytes 5, boundaries
 * 10, the last stage's output 0); as profiled on the plain chain, stage 0
 * counts its output, stages 1 and 2 their own bytes and output only (their
 * input is stage 0's / 1's output, counted there): saved 15, 15, 5; peaks
 * saved + 20 (stage 2: 60). By hand:
 *   S S S  K after each stage 15, 30, 35; peaks 0+35, 15+35, 30+60: 90.
 *   S C S  stage 1's segment keeps its input, already in K (stage 0 keeps
 *          it): 15 + 35 = 50; stage 2 keeps its input, which the segment
 *          does not: K 15 + 10, then 25 + 60 = 85. Counting the input
 *          twice would give 15 + 10 + 35 and 25 + 10 + 60 = 95; leaving
 *          stage 2's input out (it was counted with stage 1's saved
 *          bytes) 15 + 60 = 75, below the true peak.
 *   C C S  the segment keeps the batch (0 bytes): max(35, 15 + 35) = 50;
 *          stage 2 keeps its input: 10 + 60 = 70. */
static void planner_boundary_counted_once(void) {
    rt_stage_profile p[3];
    for (int i = 0; i < 3; i++) {
        p[i] = (rt_stage_profile){i == 0 ? 0 : 10, i < 2 ? 15 : 5, i < 2 ? 35 : 60, -1, -1, -1, -1, 1.0, 0, 0, 0, 0,
                                  -1, {false}, {false}};
        p[i].keeps_input[RT_STAGE_STORE] = i > 0;
        p[i].keeps_output[RT_STAGE_STORE] = true;
    }
    const rt_stage_kind S = RT_STAGE_STORE, C = RT_STAGE_CHECKPOINT;
    const struct {
        rt_stage_kind kind[3];
        int seg[3];
        int64_t peak;
    } cases[] = {{{S, S, S}, {0, 1, 2}, 90}, {{S, C, S}, {0, 1, 2}, 85}, {{C, C, S}, {0, 0, 2}, 70}};
    for (int c = 0; c < 3; c++) {
        int64_t peak;
        double rc;
        CHECK_OK(rt_plan_evaluate(p, 3, cases[c].kind, cases[c].seg, &peak, &rc));
        CHECK_EQ_INT(peak, cases[c].peak);
    }
    /* the DP finds the same: at 85 it must checkpoint stage 1 alone (1.0),
     * at 70 stages 0 and 1 (2.0) */
    rt_plan plan;
    CHECK_OK(rt_plan_chain(p, 3, 85, (rt_plan_options){true, false, false}, &plan));
    CHECK(plan.recompute == 1.0 && plan.peak == 85);
    rt_plan_free(&plan);
    CHECK_OK(rt_plan_chain(p, 3, 70, (rt_plan_options){true, false, false}, &plan));
    CHECK(plan.recompute == 2.0 && plan.peak == 70);
    rt_plan_free(&plan);
}

int main(int argc, char **argv) {
    static const rt_test_case cases[] = {
        {"planner_matches_brute_force", planner_matches_brute_force},
        {"planner_uniform_chain", planner_uniform_chain},
        {"planner_boundary_counted_once", planner_boundary_counted_once},
        {"chain_cache_matches_dp", chain_cache_matches_dp},
    };
    return rt_test_main(argc, argv, cases, 4);
}
