/* Answers one planning call (rt_memory_plan_make, memory/budget.h) has
 * already computed, so that its searches, which come back to the same
 * questions, compute each once: the meta-run prediction of a stage plan,
 * and the chain DP's plan for a budget. Both only save time: a cache that
 * cannot grow (out of memory) forgets, and the caller computes again.
 * Neither is thread-safe; each belongs to one planning call. */
#ifndef RT_MEMORY_PLAN_CACHE_H
#define RT_MEMORY_PLAN_CACHE_H

#include "core/mem.h"
#include "memory/planner.h"

/* Predictions by stage plan: the kinds and segment numbers a Checkpoint
 * wrapper held (rt_checkpoint_set_plan) when its step was run on meta. A
 * meta run is deterministic in them, so a plan found here needs no run.
 * Start zeroed with n_stages set; free with rt_predict_cache_free. */
typedef struct rt_predict_cache {
    int n_stages, len, cap;
    rt_stage_kind *kind; /* len × n_stages */
    int *segment;        /* len × n_stages */
    rt_memstats *pred;   /* len */
} rt_predict_cache;

/* The prediction recorded for the n_stages-long plan (kind, segment), or
 * NULL when there is none (also for a NULL cache or arrays). Borrowed:
 * valid until the next rt_predict_cache_add or _free. */
const rt_memstats *rt_predict_cache_find(const rt_predict_cache *pc, const rt_stage_kind *kind, const int *segment);

/* Records *pred for the plan (kind, segment), copying all three. Out of
 * memory, or a NULL argument, records nothing. */
void rt_predict_cache_add(rt_predict_cache *pc, const rt_stage_kind *kind, const int *segment,
                          const rt_memstats *pred);

/* Frees what the cache holds and zeroes it; NULL is a no-op. */
void rt_predict_cache_free(rt_predict_cache *pc);

/* rt_plan_chain's plans, by chain model (the profile's contents), options
 * and budget. The DP's plan P for budget B, with modelled peak p <= B, is
 * also its plan for every budget B' in [p, B]: every plan that fits B'
 * fits B, and P fits B' (the DP is exact; memory/planner.h). Only among
 * plans of equal cost and equal peak may a DP run at B' pick another,
 * which the model cannot tell apart. A budget search bisects and walks
 * inside such intervals (unet3d 128³, `revtorch memory`: 3072 DP runs,
 * 18 s). Start zeroed; free with rt_chain_cache_free. */
#define RT_CHAIN_CACHE_MODELS 8
typedef struct rt_chain_cache_entry {
    int model;
    rt_plan_options opt;
    int64_t lo, hi; /* the budgets the plan answers: its peak, the budget it was planned for */
    rt_plan plan;
} rt_chain_cache_entry;

typedef struct rt_chain_cache {
    int n_models;
    int model_n[RT_CHAIN_CACHE_MODELS];
    rt_stage_profile *model[RT_CHAIN_CACHE_MODELS]; /* copies, owned */
    int len, cap;
    rt_chain_cache_entry *entry;
} rt_chain_cache;

/* rt_plan_chain(p, n, budget, opt, out), answered from the cache when an
 * earlier plan of the same model and options covers `budget`, else planned
 * and recorded. Errors as rt_plan_chain's; a NULL cache plans uncached. */
rt_status rt_chain_cache_plan(rt_chain_cache *cc, const rt_stage_profile *p, int n, int64_t budget,
                              rt_plan_options opt, rt_plan *out);

/* Frees what the cache holds and zeroes it; NULL is a no-op. */
void rt_chain_cache_free(rt_chain_cache *cc);

#endif
