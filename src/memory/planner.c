/* The chain planner's dynamic program (memory/planner.h). */
#include "memory/planner.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

rt_plan_options rt_plan_options_all(void) { return (rt_plan_options){true, true, true}; }

/* One DP state: after a prefix, K bytes kept and cost c; `parent` the
 * state it came from, `first` the segment's first stage, `kind` its kind;
 * `out_kept` whether the prefix's last stage keeps its output (the
 * boundary's bytes are then in K already). */
typedef struct rt_dp_state {
    int64_t kept;
    double cost;
    int64_t peak; /* the largest K(<S) + live(S) so far: the tie-breaker */
    int parent;   /* index into the pool, -1 for the start */
    int first;
    rt_stage_kind kind;
    bool out_kept;
} rt_dp_state;

/* A front entry: a pool state's sort keys beside its index, so that
 * fronts sort without reaching into the pool. */
typedef struct rt_dp_key {
    bool out_kept;
    int64_t kept;
    double cost;
    int64_t peak;
    int idx;
} rt_dp_key;

typedef struct rt_dp {
    rt_dp_state *pool;
    size_t n, cap;
    rt_dp_key **front; /* per prefix length: the states reaching it */
    int *nfront, *capfront;
    rt_dp_key *scratch; /* the sort's second buffer */
    int cap_scratch;
} rt_dp;

static bool rt_offers(const rt_stage_profile *s, rt_stage_kind k, rt_plan_options o) {
    switch (k) {
    case RT_STAGE_STORE: return true;
    case RT_STAGE_CHECKPOINT: return o.allow_checkpoint;
    case RT_STAGE_SELECTIVE: return o.allow_selective && s->saved_sel >= 0 && s->peak_sel >= 0;
    case RT_STAGE_REBUILD: return o.allow_rebuild && s->saved_rev >= 0 && s->peak_rev >= 0;
    }
    return false;
}

/* kept, live and recompute of the single-stage segment `k` at stage s, as
 * profiled (kept with the boundaries the plain chain gives it). */
static void rt_single(const rt_stage_profile *s, rt_stage_kind k, int64_t *kept, int64_t *live, double *rc) {
    switch (k) {
    case RT_STAGE_SELECTIVE: *kept = s->saved_sel, *live = s->peak_sel, *rc = s->fwd_sel; break;
    case RT_STAGE_REBUILD: *kept = s->saved_rev, *live = s->peak_rev, *rc = s->fwd_rev; break;
    default: *kept = s->saved, *live = s->peak, *rc = 0.0; break;
    }
    *live += s->span;
}

/* The bytes of stage i's output: the next stage's input (0 for the last). */
static int64_t rt_out_bytes(const rt_stage_profile *p, int n, int i) {
    return i + 1 < n ? p[i + 1].input_bytes : 0;
}

/* The skip bytes stage j adds to the kept bytes of a CHECKPOINT segment
 * starting at s: what it reads from a stage before s. */
static int64_t rt_side_kept(const rt_stage_profile *p, int s, int j) {
    return p[j].side_bytes > 0 && p[j].side_from < s ? p[j].side_bytes : 0;
}

/* What a segment adds after a prefix that keeps K bytes: K first grows by
 * `boundary` (its input, when the segment keeps it and the prefix does
 * not already), the segment's peak is K + boundary + live, and after it K
 * is K + boundary + kept. */
typedef struct rt_seg_cost {
    int64_t boundary, live, kept;
    double rc;
    bool out_kept; /* the segment's last stage keeps its output (counted in kept) */
} rt_seg_cost;

/* Whether stage i's profiled kept bytes under kind k include its input:
 * the stage keeps it and the stage before, stored on the plain chain the
 * profile ran, did not (which would have counted it first). */
static bool rt_input_counted(const rt_stage_profile *p, int i, rt_stage_kind k) {
    return p[i].keeps_input[k] && !(i > 0 && p[i - 1].keeps_output[RT_STAGE_STORE]);
}

/* The single-stage segment of kind k at stage i after a prefix whose last
 * stage keeps its output (in_kept) or not: the profiled kept bytes less
 * the boundaries they include (memory/planner.h, keeps_input), each
 * boundary kept once. */
static rt_seg_cost rt_single_cost(const rt_stage_profile *p, int n, int i, rt_stage_kind k, bool in_kept) {
    rt_seg_cost c = {0};
    int64_t kept;
    rt_single(&p[i], k, &kept, &c.live, &c.rc);
    int64_t out = rt_out_bytes(p, n, i);
    if (p[i].keeps_output[k]) kept -= out;
    if (rt_input_counted(p, i, k)) kept -= p[i].input_bytes;
    if (kept < 0) kept = 0;
    c.out_kept = p[i].keeps_output[k] && out > 0;
    c.boundary = !in_kept && p[i].keeps_input[k] ? p[i].input_bytes : 0;
    c.kept = kept + (c.out_kept ? out : 0);
    return c;
}

/* A CHECKPOINT segment being grown one stage at a time: the bytes its
 * recompute holds before the next stage, its worst live bytes so far, the
 * skips it keeps, its recompute. Start at {0}. */
typedef struct rt_ckpt_acc {
    int64_t held, worst, side;
    double rc;
} rt_ckpt_acc;

/* The CHECKPOINT segment [first, last], grown by stage `last` (callers run
 * last = first, first + 1, ... on one accumulator): it keeps its input and
 * the skips it reads from before `first`; in its backward it recomputes and
 * holds its stages as the plain chain does (the input, which the first
 * stage's saved bytes may include, counted once, as the segment's). */
static rt_seg_cost rt_ckpt_grow(const rt_stage_profile *p, int first, int last, bool in_kept, rt_ckpt_acc *a) {
    if (a->held + p[last].peak + p[last].span > a->worst) a->worst = a->held + p[last].peak + p[last].span;
    int64_t saved = p[last].saved;
    if (last == first && rt_input_counted(p, first, RT_STAGE_STORE)) saved -= p[first].input_bytes;
    a->held += saved > 0 ? saved : 0;
    a->side += rt_side_kept(p, first, last);
    a->rc += p[last].fwd;
    rt_seg_cost c = {0};
    c.boundary = in_kept ? 0 : p[first].input_bytes;
    c.kept = a->side;
    c.live = a->side + a->worst;
    c.rc = a->rc;
    return c;
}

rt_status rt_plan_evaluate(const rt_stage_profile *p, int n, const rt_stage_kind *kind, const int *segment,
                           int64_t *peak, double *recompute) {
    if (!p || !kind || !segment || !peak || !recompute || n < 1)
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_plan_evaluate: %s", n < 1 ? "n must be >= 1" : "an argument is NULL");
    rt_plan_options all = rt_plan_options_all();
    int64_t K = 0, worst = 0;
    double cost = 0.0;
    bool out_kept = false;
    for (int i = 0; i < n;) {
        if (!rt_offers(&p[i], kind[i], all))
            return rt_error_set(RT_ERR_INVALID_ARG, "rt_plan_evaluate: stage %d has no %s option", i,
                                rt_stage_kind_str(kind[i]));
        rt_seg_cost c;
        int e = i;
        if (kind[i] == RT_STAGE_CHECKPOINT) {
            rt_ckpt_acc a = {0};
            c = rt_ckpt_grow(p, i, i, out_kept, &a);
            while (e + 1 < n && kind[e + 1] == RT_STAGE_CHECKPOINT && segment[e + 1] == segment[i])
                c = rt_ckpt_grow(p, i, ++e, out_kept, &a);
        } else {
            c = rt_single_cost(p, n, i, kind[i], out_kept);
        }
        K += c.boundary;
        if (K + c.live > worst) worst = K + c.live;
        K += c.kept;
        cost += c.rc;
        out_kept = c.out_kept;
        i = e + 1;
    }
    *peak = worst;
    *recompute = cost;
    return RT_OK;
}

static rt_status rt_dp_add(rt_dp *d, int at, rt_dp_state s) {
    if (d->n == d->cap) {
        size_t c = d->cap ? 2 * d->cap : 256;
        rt_dp_state *q = realloc(d->pool, c * sizeof *q);
        if (!q) return rt_error_set(RT_ERR_OOM, "out of memory planning");
        d->pool = q;
        d->cap = c;
    }
    if (d->nfront[at] == d->capfront[at]) {
        int c = d->capfront[at] ? 2 * d->capfront[at] : 16;
        rt_dp_key *q = realloc(d->front[at], (size_t)c * sizeof *q);
        if (!q) return rt_error_set(RT_ERR_OOM, "out of memory planning");
        d->front[at] = q;
        d->capfront[at] = c;
    }
    d->pool[d->n] = s;
    d->front[at][d->nfront[at]++] = (rt_dp_key){s.out_kept, s.kept, s.cost, s.peak, (int)d->n++};
    return RT_OK;
}

/* Orders front entries by whether their last stage keeps its output, then
 * kept bytes, cost, peak and the order they were made in (so ties resolve
 * as a stable sort would): a total order, since idx is unique. */
static inline bool rt_dp_less(const rt_dp_key *x, const rt_dp_key *y) {
    if (x->out_kept != y->out_kept) return y->out_kept;
    if (x->kept != y->kept) return x->kept < y->kept;
    if (x->cost != y->cost) return x->cost < y->cost;
    if (x->peak != y->peak) return x->peak < y->peak;
    return x->idx < y->idx;
}

static int rt_dp_cmp(const void *a, const void *b) {
    return rt_dp_less(a, b) ? -1 : rt_dp_less(b, a) ? 1 : 0;
}

/* Sorts f[0, n) by rt_dp_less: insertion sort on runs of 16, then
 * bottom-up merges through d's scratch buffer, the comparison inlined
 * (qsort's calls through a pointer were half of planning's time:
 * `revtorch memory` on unet3d runs the DP thousands of times); qsort
 * when the buffer cannot grow. The order is total, so the result is
 * qsort's. */
static void rt_dp_sort(rt_dp *d, rt_dp_key *f, int n) {
    enum { RUN = 16 };
    if (n > RUN && d->cap_scratch < n) {
        rt_dp_key *t = realloc(d->scratch, (size_t)n * sizeof *t);
        if (!t) {
            qsort(f, (size_t)n, sizeof *f, rt_dp_cmp);
            return;
        }
        d->scratch = t;
        d->cap_scratch = n;
    }
    for (int s = 0; s < n; s += RUN) {
        int e = s + RUN < n ? s + RUN : n;
        for (int i = s + 1; i < e; i++) {
            rt_dp_key k = f[i];
            int j = i;
            for (; j > s && rt_dp_less(&k, &f[j - 1]); j--) f[j] = f[j - 1];
            f[j] = k;
        }
    }
    rt_dp_key *src = f, *dst = d->scratch;
    for (int w = RUN; w < n; w *= 2) {
        for (int s = 0; s < n; s += 2 * w) {
            int m = s + w < n ? s + w : n, e = s + 2 * w < n ? s + 2 * w : n, i = s, j = m, k = s;
            while (i < m && j < e) dst[k++] = rt_dp_less(&src[j], &src[i]) ? src[j++] : src[i++];
            while (i < m) dst[k++] = src[i++];
            while (j < e) dst[k++] = src[j++];
        }
        rt_dp_key *t = src;
        src = dst;
        dst = t;
    }
    if (src != f) memcpy(f, src, (size_t)n * sizeof *f);
}

/* How a DP run may cut states: those keeping more than the room left
 * (exact), those costing more than `ub`, the cost of a plan already found
 * (exact: cost only grows along a plan), and, when cap > 1, all but `cap`
 * states of each front, spread along it (a heuristic run that finds a
 * good plan quickly, whose cost then bounds the exact run). cap 1 keeps
 * the state keeping the fewest bytes: whether *some* plan fits depends on
 * a prefix only through its kept bytes, so that answers feasibility
 * exactly, in O(n²). */
typedef struct rt_dp_cut {
    double ub;
    int cap;
} rt_dp_cut;

/* Keeps, for each value of out_kept (the later stages depend on a prefix
 * through K and it), the Pareto front of (kept, cost) — and, among equal
 * (kept, cost), the smallest peak so far — of the states keeping at most
 * `room` bytes and costing at most cut.ub; under a cap, `cap` of each. */
static void rt_dp_prune(rt_dp *d, int at, int64_t room, rt_dp_cut cut) {
    int n = d->nfront[at];
    if (n < 1) return;
    rt_dp_key *f = d->front[at];
    rt_dp_sort(d, f, n);
    int m = 0;
    for (int i = 0; i < n;) {
        bool group = f[i].out_kept;
        int start = m;
        double best = 0.0;
        for (; i < n && f[i].out_kept == group; i++) {
            if (f[i].kept > room) continue; /* sorted by kept: the rest of the group keep more */
            if ((m > start && !(f[i].cost < best)) || f[i].cost > cut.ub) continue;
            f[m++] = f[i];
            best = f[i].cost;
        }
        int g = m - start;
        if (cut.cap == 1) { /* feasibility only: the state keeping least completes whenever any does */
            m = start + (g > 1 ? 1 : g);
        } else if (cut.cap > 1 && g > cut.cap) { /* every (g-1)/(cap-1)-th, both ends kept */
            for (int j = 0; j < cut.cap; j++) f[start + j] = f[start + (int)((int64_t)j * (g - 1) / (cut.cap - 1))];
            m = start + cut.cap;
        }
    }
    d->nfront[at] = m;
}

static void rt_dp_free(rt_dp *d, int n) {
    for (int i = 0; i <= n; i++) free(d->front ? d->front[i] : NULL);
    free(d->front);
    free(d->nfront);
    free(d->capfront);
    free(d->pool);
    free(d->scratch);
}

/* A lower bound on the live bytes stage i adds to what is kept before its
 * segment, under any kind the options allow: its single-stage live bytes,
 * or, in a CHECKPOINT segment, at least its peak and span. */
static int64_t rt_least_live(const rt_stage_profile *p, int i, rt_plan_options opt) {
    int64_t least = INT64_MAX;
    for (int k = RT_STAGE_STORE; k <= RT_STAGE_REBUILD; k++) {
        if (k == RT_STAGE_CHECKPOINT || !rt_offers(&p[i], (rt_stage_kind)k, opt)) continue;
        int64_t kept, live;
        double rc;
        rt_single(&p[i], (rt_stage_kind)k, &kept, &live, &rc);
        if (live < least) least = live;
    }
    if (opt.allow_checkpoint && p[i].peak + p[i].span < least) least = p[i].peak + p[i].span;
    return least;
}

/* Runs the DP; *best = index of the best final state, or -1 when none fits. */
static rt_status rt_dp_pass(rt_dp *d, const rt_stage_profile *p, int n, int64_t budget, rt_plan_options opt,
                            rt_dp_cut cut, int *best) {
    *best = -1;
    d->front = calloc((size_t)n + 1, sizeof *d->front);
    d->nfront = calloc((size_t)n + 1, sizeof *d->nfront);
    d->capfront = calloc((size_t)n + 1, sizeof *d->capfront);
    /* room[i]: the most a prefix of i stages may keep and still leave each
     * later stage its least live bytes — states keeping more cannot be
     * completed within the budget and are dropped (an exact cut: it only
     * removes infeasible states) */
    int64_t *room = malloc(((size_t)n + 1) * sizeof *room);
    if (!d->front || !d->nfront || !d->capfront || !room) {
        free(room);
        return rt_error_set(RT_ERR_OOM, "out of memory planning");
    }
    room[n] = budget;
    for (int i = n - 1; i >= 0; i--) {
        int64_t r = budget - rt_least_live(p, i, opt);
        room[i] = r < room[i + 1] ? r : room[i + 1];
    }
    rt_status st = rt_dp_add(d, 0, (rt_dp_state){0, 0.0, 0, -1, 0, RT_STAGE_STORE, false});
    for (int i = 0; i < n && st == RT_OK; i++) {
        rt_dp_prune(d, i, room[i], cut);
        for (int f = 0; f < d->nfront[i] && st == RT_OK; f++) {
            int si = d->front[i][f].idx;
            rt_dp_state s = d->pool[si];
            for (int k = RT_STAGE_STORE; k <= RT_STAGE_REBUILD && st == RT_OK; k++) {
                if (k == RT_STAGE_CHECKPOINT || !rt_offers(&p[i], (rt_stage_kind)k, opt)) continue;
                rt_seg_cost c = rt_single_cost(p, n, i, (rt_stage_kind)k, s.out_kept);
                int64_t at = s.kept + c.boundary;
                if (at + c.live > budget || at + c.kept > room[i + 1] || s.cost + c.rc > cut.ub) continue;
                int64_t pk = s.peak > at + c.live ? s.peak : at + c.live;
                st = rt_dp_add(d, i + 1,
                               (rt_dp_state){at + c.kept, s.cost + c.rc, pk, si, i, (rt_stage_kind)k, c.out_kept});
            }
            if (!opt.allow_checkpoint) continue;
            rt_ckpt_acc a = {0};
            for (int e = i; e < n && st == RT_OK; e++) { /* the segment [i, e], grown one stage at a time */
                rt_seg_cost c = rt_ckpt_grow(p, i, e, s.out_kept, &a);
                int64_t at = s.kept + c.boundary;
                if (at + c.live > budget) break;   /* live only grows with e */
                if (s.cost + c.rc > cut.ub) break; /* and so does cost */
                if (at + c.kept > room[e + 1]) continue;
                int64_t pk = s.peak > at + c.live ? s.peak : at + c.live;
                st = rt_dp_add(d, e + 1,
                               (rt_dp_state){at + c.kept, s.cost + c.rc, pk, si, i, RT_STAGE_CHECKPOINT, false});
            }
        }
    }
    free(room);
    if (st != RT_OK) return st;
    rt_dp_prune(d, n, budget, (rt_dp_cut){cut.ub, 0});
    for (int f = 0; f < d->nfront[n]; f++) {
        int si = d->front[n][f].idx;
        if (*best < 0 || d->pool[si].cost < d->pool[*best].cost ||
            (d->pool[si].cost == d->pool[*best].cost && d->pool[si].peak < d->pool[*best].peak))
            *best = si;
    }
    return RT_OK;
}

/* The exact DP, sped up: a capped pass first, whose plan's cost bounds
 * the exact pass (the same result, with far smaller fronts when the
 * budget leaves slack; memory/planner.h). */
static rt_status rt_dp_run(rt_dp *d, const rt_stage_profile *p, int n, int64_t budget, rt_plan_options opt,
                           int *best) {
    rt_dp h = {0};
    int hb;
    /* chains of up to 8 stages (tests/test_planner.c's brute force) get a
     * cap of 2, so the bound cuts hard where its exactness is checked */
    rt_status st = rt_dp_pass(&h, p, n, budget, opt, (rt_dp_cut){INFINITY, n <= 8 ? 2 : 64}, &hb);
    double ub = st == RT_OK && hb >= 0 ? h.pool[hb].cost : INFINITY;
    rt_dp_free(&h, n);
    if (st != RT_OK) return st;
    return rt_dp_pass(d, p, n, budget, opt, (rt_dp_cut){ub, 0}, best);
}

static rt_status rt_plan_check(const rt_stage_profile *p, int n, const void *out, const char *fn) {
    if (!p || !out || n < 1)
        return rt_error_set(RT_ERR_INVALID_ARG, "%s: %s", fn, n < 1 ? "the chain needs n >= 1 stages"
                            : !p ? "the profile is NULL" : "the output pointer is NULL");
    return RT_OK;
}

/* The modelled peak of storing every stage: a feasible plan's, so the
 * least peak is at most this (the binary search's upper end). */
static int64_t rt_store_peak(const rt_stage_profile *p, int n) {
    int64_t K = 0, worst = 0;
    bool out_kept = false;
    for (int i = 0; i < n; i++) {
        rt_seg_cost c = rt_single_cost(p, n, i, RT_STAGE_STORE, out_kept);
        K += c.boundary;
        if (K + c.live > worst) worst = K + c.live;
        K += c.kept;
        out_kept = c.out_kept;
    }
    return worst;
}

/* Whether some plan's modelled peak is within `budget`. */
static rt_status rt_feasible(const rt_stage_profile *p, int n, int64_t budget, rt_plan_options opt, bool *ok) {
    rt_dp d = {0};
    int best;
    rt_status st = rt_dp_pass(&d, p, n, budget, opt, (rt_dp_cut){INFINITY, 1}, &best);
    rt_dp_free(&d, n);
    *ok = best >= 0;
    return st;
}

rt_status rt_plan_min_peak(const rt_stage_profile *p, int n, rt_plan_options opt, int64_t *min_peak) {
    RT_TRY(rt_plan_check(p, n, min_peak, "rt_plan_min_peak"));
    /* Feasibility is monotone in the budget. The DP's fronts, and its
     * time, grow with the budget's slack, so the search climbs from below:
     * from the largest stage's least live bytes (no plan needs less) in
     * steps that double until a budget is feasible — storing everything
     * always is —, then bisects the last step. */
    int64_t lo = 0, top = rt_store_peak(p, n);
    for (int i = 0; i < n; i++) {
        int64_t l = rt_least_live(p, i, opt);
        if (l > lo) lo = l;
    }
    int64_t hi = top, step = lo / 64 > 1 ? lo / 64 : 1;
    for (int64_t b = lo; b < top; b += step, step *= 2) {
        bool ok;
        RT_TRY(rt_feasible(p, n, b, opt, &ok));
        if (ok) {
            hi = b;
            break;
        }
        lo = b + 1;
    }
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        bool ok;
        RT_TRY(rt_feasible(p, n, mid, opt, &ok));
        if (ok) hi = mid;
        else lo = mid + 1;
    }
    *min_peak = lo;
    return RT_OK;
}

rt_status rt_plan_chain(const rt_stage_profile *p, int n, int64_t budget, rt_plan_options opt, rt_plan *out) {
    RT_TRY(rt_plan_check(p, n, out, "rt_plan_chain"));
    memset(out, 0, sizeof *out);
    rt_dp d = {0};
    int best;
    rt_status st = rt_dp_run(&d, p, n, budget, opt, &best);
    if (st == RT_OK && best < 0) {
        int64_t mp = 0;
        rt_dp_free(&d, n);
        st = rt_plan_min_peak(p, n, opt, &mp);
        if (st != RT_OK) return st;
        return rt_error_set(RT_ERR_OOM, "no plan keeps the activations within %.1f MiB; the smallest feasible is "
                            "%.1f MiB (%lld bytes)", budget / 1048576.0, mp / 1048576.0, (long long)mp);
    }
    if (st == RT_OK) {
        out->kind = calloc((size_t)n, sizeof *out->kind);
        out->segment = calloc((size_t)n, sizeof *out->segment);
        if (!out->kind || !out->segment) st = rt_error_set(RT_ERR_OOM, "out of memory planning");
    }
    if (st == RT_OK) {
        out->n = n;
        out->peak = d.pool[best].peak;
        out->recompute = d.pool[best].cost;
        int end = n;
        for (int si = best; d.pool[si].parent >= 0; si = d.pool[si].parent) {
            const rt_dp_state *s = &d.pool[si];
            for (int i = s->first; i < end; i++) {
                out->kind[i] = s->kind;
                out->segment[i] = s->first;
            }
            end = s->first;
        }
        for (int i = 0; i < n; i++) out->forward += p[i].fwd;
    }
    rt_dp_free(&d, n);
    if (st != RT_OK) rt_plan_free(out);
    return st;
}

void rt_plan_free(rt_plan *plan) {
    if (!plan) return;
    free(plan->kind);
    free(plan->segment);
    plan->kind = NULL;
    plan->segment = NULL;
    plan->n = 0;
}
