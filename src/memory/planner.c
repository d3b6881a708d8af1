/* The chain planner's dynamic program (memory/planner.h). */
#include "memory/planner.h"

#include <stdlib.h>
#include <string.h>

rt_plan_options rt_plan_options_all(void) { return (rt_plan_options){true, true, true}; }

/* One DP state: after a prefix, K bytes kept and cost c; `parent` the
 * state it came from, `first` the segment's first stage, `kind` its kind. */
typedef struct rt_dp_state {
    int64_t kept;
    double cost;
    int64_t peak; /* the largest K(<S) + live(S) so far: the tie-breaker */
    int parent;   /* index into the pool, -1 for the start */
    int first;
    rt_stage_kind kind;
} rt_dp_state;

typedef struct rt_dp {
    rt_dp_state *pool;
    size_t n, cap;
    int **front;  /* per prefix length: indices into pool */
    int *nfront, *capfront;
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

/* kept, live and recompute of the single-stage segment `k` at stage s. */
static void rt_single(const rt_stage_profile *s, rt_stage_kind k, int64_t *kept, int64_t *live, double *rc) {
    switch (k) {
    case RT_STAGE_SELECTIVE: *kept = s->saved_sel, *live = s->peak_sel, *rc = s->fwd_sel; break;
    case RT_STAGE_REBUILD: *kept = s->saved_rev, *live = s->peak_rev, *rc = s->fwd_rev; break;
    default: *kept = s->saved, *live = s->peak, *rc = 0.0; break;
    }
    *live += s->span;
}

/* The skip bytes stage j adds to the kept bytes of a CHECKPOINT segment
 * starting at s: what it reads from a stage before s. */
static int64_t rt_side_kept(const rt_stage_profile *p, int s, int j) {
    return p[j].side_bytes > 0 && p[j].side_from < s ? p[j].side_bytes : 0;
}

/* live and recompute of the CHECKPOINT segment [first, last]. */
static void rt_ckpt_segment(const rt_stage_profile *p, int first, int last, int64_t *kept, int64_t *live,
                            double *rc) {
    int64_t held = 0, worst = 0, k = p[first].input_bytes;
    double c = 0.0;
    for (int j = first; j <= last; j++) {
        if (held + p[j].peak + p[j].span > worst) worst = held + p[j].peak + p[j].span;
        held += p[j].saved;
        c += p[j].fwd;
        k += rt_side_kept(p, first, j);
    }
    *kept = k;
    *live = k + worst;
    *rc = c;
}

rt_status rt_plan_evaluate(const rt_stage_profile *p, int n, const rt_stage_kind *kind, const int *segment,
                           int64_t *peak, double *recompute) {
    if (!p || !kind || !segment || !peak || !recompute || n < 1)
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_plan_evaluate: %s", n < 1 ? "n must be >= 1" : "an argument is NULL");
    rt_plan_options all = rt_plan_options_all();
    int64_t K = 0, worst = 0;
    double cost = 0.0;
    for (int i = 0; i < n;) {
        if (!rt_offers(&p[i], kind[i], all))
            return rt_error_set(RT_ERR_INVALID_ARG, "rt_plan_evaluate: stage %d has no %s option", i,
                                rt_stage_kind_str(kind[i]));
        int64_t kept, live;
        double rc;
        int e = i;
        if (kind[i] == RT_STAGE_CHECKPOINT) {
            while (e + 1 < n && kind[e + 1] == RT_STAGE_CHECKPOINT && segment[e + 1] == segment[i]) e++;
            rt_ckpt_segment(p, i, e, &kept, &live, &rc);
        } else {
            rt_single(&p[i], kind[i], &kept, &live, &rc);
        }
        if (K + live > worst) worst = K + live;
        K += kept;
        cost += rc;
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
        int *q = realloc(d->front[at], (size_t)c * sizeof *q);
        if (!q) return rt_error_set(RT_ERR_OOM, "out of memory planning");
        d->front[at] = q;
        d->capfront[at] = c;
    }
    d->pool[d->n] = s;
    d->front[at][d->nfront[at]++] = (int)d->n++;
    return RT_OK;
}

/* Orders states by kept bytes, then cost, then peak. */
static bool rt_before(const rt_dp_state *x, const rt_dp_state *y) {
    if (x->kept != y->kept) return x->kept < y->kept;
    if (x->cost != y->cost) return x->cost < y->cost;
    return x->peak < y->peak;
}

/* Keeps the Pareto front of (kept, cost) — and, among equal (kept, cost),
 * the smallest peak so far. */
static void rt_dp_prune(rt_dp *d, int at) {
    int n = d->nfront[at];
    if (n < 2) return;
    int *f = d->front[at];
    for (int i = 1; i < n; i++) { /* insertion sort: fronts are short */
        int v = f[i], j = i;
        for (; j > 0 && rt_before(&d->pool[v], &d->pool[f[j - 1]]); j--) f[j] = f[j - 1];
        f[j] = v;
    }
    int m = 0;
    double best = 0.0;
    for (int i = 0; i < n; i++) {
        const rt_dp_state *s = &d->pool[d->front[at][i]];
        if (m > 0 && !(s->cost < best)) continue;
        d->front[at][m++] = d->front[at][i];
        best = s->cost;
    }
    d->nfront[at] = m;
}

static void rt_dp_free(rt_dp *d, int n) {
    for (int i = 0; i <= n; i++) free(d->front ? d->front[i] : NULL);
    free(d->front);
    free(d->nfront);
    free(d->capfront);
    free(d->pool);
}

/* Runs the DP; *best = index of the best final state, or -1 when none fits. */
static rt_status rt_dp_run(rt_dp *d, const rt_stage_profile *p, int n, int64_t budget, rt_plan_options opt,
                           int *best) {
    *best = -1;
    d->front = calloc((size_t)n + 1, sizeof *d->front);
    d->nfront = calloc((size_t)n + 1, sizeof *d->nfront);
    d->capfront = calloc((size_t)n + 1, sizeof *d->capfront);
    if (!d->front || !d->nfront || !d->capfront) return rt_error_set(RT_ERR_OOM, "out of memory planning");
    RT_TRY(rt_dp_add(d, 0, (rt_dp_state){0, 0.0, 0, -1, 0, RT_STAGE_STORE}));
    for (int i = 0; i < n; i++) {
        rt_dp_prune(d, i);
        for (int f = 0; f < d->nfront[i]; f++) {
            int si = d->front[i][f];
            rt_dp_state s = d->pool[si];
            for (int k = RT_STAGE_STORE; k <= RT_STAGE_REBUILD; k++) {
                if (k == RT_STAGE_CHECKPOINT || !rt_offers(&p[i], (rt_stage_kind)k, opt)) continue;
                int64_t kept, live;
                double rc;
                rt_single(&p[i], (rt_stage_kind)k, &kept, &live, &rc);
                if (s.kept + live > budget) continue;
                int64_t pk = s.peak > s.kept + live ? s.peak : s.kept + live;
                RT_TRY(rt_dp_add(d, i + 1, (rt_dp_state){s.kept + kept, s.cost + rc, pk, si, i, (rt_stage_kind)k}));
            }
            if (!opt.allow_checkpoint) continue;
            int64_t held = 0, worst = 0, kept = p[i].input_bytes;
            double c = 0.0;
            for (int e = i; e < n; e++) { /* the segment [i, e], grown one stage at a time */
                if (held + p[e].peak + p[e].span > worst) worst = held + p[e].peak + p[e].span;
                held += p[e].saved;
                c += p[e].fwd;
                kept += rt_side_kept(p, i, e);
                int64_t live = kept + worst;
                if (s.kept + live > budget) break; /* live only grows with e */
                int64_t pk = s.peak > s.kept + live ? s.peak : s.kept + live;
                RT_TRY(rt_dp_add(d, e + 1, (rt_dp_state){s.kept + kept, s.cost + c, pk, si, i, RT_STAGE_CHECKPOINT}));
            }
        }
    }
    rt_dp_prune(d, n);
    for (int f = 0; f < d->nfront[n]; f++) {
        int si = d->front[n][f];
        if (*best < 0 || d->pool[si].cost < d->pool[*best].cost ||
            (d->pool[si].cost == d->pool[*best].cost && d->pool[si].peak < d->pool[*best].peak))
            *best = si;
    }
    return RT_OK;
}

static rt_status rt_plan_check(const rt_stage_profile *p, int n, const void *out, const char *fn) {
    if (!p || !out || n < 1)
        return rt_error_set(RT_ERR_INVALID_ARG, "%s: %s", fn, n < 1 ? "the chain needs n >= 1 stages"
                            : !p ? "the profile is NULL" : "the output pointer is NULL");
    return RT_OK;
}

/* Largest modelled peak of any plan: every segment's live bytes on top of
 * everything kept, an upper bound for the binary search. */
static int64_t rt_upper_bound(const rt_stage_profile *p, int n) {
    int64_t s = 0;
    for (int i = 0; i < n; i++) {
        int64_t m = p[i].peak;
        if (p[i].peak_sel > m) m = p[i].peak_sel;
        if (p[i].peak_rev > m) m = p[i].peak_rev;
        s += m + p[i].input_bytes + p[i].saved + p[i].span + (p[i].side_bytes > 0 ? p[i].side_bytes : 0);
    }
    return s;
}

rt_status rt_plan_min_peak(const rt_stage_profile *p, int n, rt_plan_options opt, int64_t *min_peak) {
    RT_TRY(rt_plan_check(p, n, min_peak, "rt_plan_min_peak"));
    int64_t lo = 0, hi = rt_upper_bound(p, n);
    while (lo < hi) { /* feasibility is monotone in the budget */
        int64_t mid = lo + (hi - lo) / 2;
        rt_dp d = {0};
        int best;
        rt_status st = rt_dp_run(&d, p, n, mid, opt, &best);
        rt_dp_free(&d, n);
        if (st != RT_OK) return st;
        if (best >= 0) hi = mid;
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
