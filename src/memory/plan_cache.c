/* Caches of one planning call (memory/plan_cache.h). */
#include "memory/plan_cache.h"

#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ predictions */

const rt_memstats *rt_predict_cache_find(const rt_predict_cache *pc, const rt_stage_kind *kind, const int *segment) {
    if (!pc || !kind || !segment) return NULL;
    size_t n = (size_t)pc->n_stages;
    for (int e = 0; e < pc->len; e++)
        if (!memcmp(pc->kind + (size_t)e * n, kind, n * sizeof *kind) &&
            !memcmp(pc->segment + (size_t)e * n, segment, n * sizeof *segment))
            return &pc->pred[e];
    return NULL;
}

void rt_predict_cache_add(rt_predict_cache *pc, const rt_stage_kind *kind, const int *segment,
                          const rt_memstats *pred) {
    if (!pc || !kind || !segment || !pred || pc->n_stages < 1) return;
    size_t n = (size_t)pc->n_stages;
    if (pc->len == pc->cap) { /* each array grown on its own: one that grew is kept, and the cap only moves with all */
        int cap = pc->cap ? 2 * pc->cap : 64;
        rt_stage_kind *k = realloc(pc->kind, (size_t)cap * n * sizeof *k);
        if (!k) return;
        pc->kind = k;
        int *s = realloc(pc->segment, (size_t)cap * n * sizeof *s);
        if (!s) return;
        pc->segment = s;
        rt_memstats *p = realloc(pc->pred, (size_t)cap * sizeof *p);
        if (!p) return;
        pc->pred = p;
        pc->cap = cap;
    }
    memcpy(pc->kind + (size_t)pc->len * n, kind, n * sizeof *kind);
    memcpy(pc->segment + (size_t)pc->len * n, segment, n * sizeof *segment);
    pc->pred[pc->len++] = *pred;
}

void rt_predict_cache_free(rt_predict_cache *pc) {
    if (!pc) return;
    free(pc->kind);
    free(pc->segment);
    free(pc->pred);
    memset(pc, 0, sizeof *pc);
}

/* ------------------------------------------------------------ chain plans */

/* The index of the cached copy of model p (n stages), adding one when
 * there is room; -1 when it is not cached and cannot be. Models are told
 * apart by content, not address: a planning call frees and allocates
 * profiles, and a new one may take an old one's address. */
static int rt_chain_cache_model(rt_chain_cache *cc, const rt_stage_profile *p, int n) {
    for (int m = 0; m < cc->n_models; m++)
        if (cc->model_n[m] == n && !memcmp(cc->model[m], p, (size_t)n * sizeof *p)) return m;
    if (cc->n_models == RT_CHAIN_CACHE_MODELS) return -1;
    rt_stage_profile *copy = malloc((size_t)n * sizeof *copy);
    if (!copy) return -1;
    memcpy(copy, p, (size_t)n * sizeof *copy);
    cc->model[cc->n_models] = copy;
    cc->model_n[cc->n_models] = n;
    return cc->n_models++;
}

static bool rt_options_equal(rt_plan_options a, rt_plan_options b) {
    return a.allow_checkpoint == b.allow_checkpoint && a.allow_selective == b.allow_selective &&
           a.allow_rebuild == b.allow_rebuild;
}

/* A deep copy of plan a into *out; false when out of memory. */
static bool rt_plan_copy(const rt_plan *a, rt_plan *out) {
    *out = *a;
    out->kind = malloc((size_t)a->n * sizeof *out->kind);
    out->segment = malloc((size_t)a->n * sizeof *out->segment);
    if (!out->kind || !out->segment) {
        rt_plan_free(out);
        return false;
    }
    memcpy(out->kind, a->kind, (size_t)a->n * sizeof *out->kind);
    memcpy(out->segment, a->segment, (size_t)a->n * sizeof *out->segment);
    return true;
}

rt_status rt_chain_cache_plan(rt_chain_cache *cc, const rt_stage_profile *p, int n, int64_t budget,
                              rt_plan_options opt, rt_plan *out) {
    if (!cc || !p || !out || n < 1) return rt_plan_chain(p, n, budget, opt, out); /* its own argument errors */
    int m = rt_chain_cache_model(cc, p, n);
    for (int e = 0; m >= 0 && e < cc->len; e++) {
        const rt_chain_cache_entry *c = &cc->entry[e];
        if (c->model == m && rt_options_equal(c->opt, opt) && c->lo <= budget && budget <= c->hi &&
            rt_plan_copy(&c->plan, out))
            return RT_OK;
    }
    RT_TRY(rt_plan_chain(p, n, budget, opt, out));
    if (m < 0) return RT_OK;
    if (cc->len == cc->cap) {
        int cap = cc->cap ? 2 * cc->cap : 64;
        rt_chain_cache_entry *grown = realloc(cc->entry, (size_t)cap * sizeof *grown);
        if (!grown) return RT_OK;
        cc->entry = grown;
        cc->cap = cap;
    }
    rt_chain_cache_entry c = {m, opt, out->peak, budget, {0}};
    if (rt_plan_copy(out, &c.plan)) cc->entry[cc->len++] = c;
    return RT_OK;
}

void rt_chain_cache_free(rt_chain_cache *cc) {
    if (!cc) return;
    for (int m = 0; m < cc->n_models; m++) free(cc->model[m]);
    for (int e = 0; e < cc->len; e++) rt_plan_free(&cc->entry[e].plan);
    free(cc->entry);
    memset(cc, 0, sizeof *cc);
}
