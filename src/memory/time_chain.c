/* Backpropagation through time under a checkpointing schedule
 * (memory/time_chain.h). */
#include "memory/time_chain.h"

#include <float.h>
#include <stdlib.h>

#include "autograd/engine.h"
#include "autograd/node.h"
#include "autograd/recompute.h"
#include "core/mem.h"
#include "ops/ops.h"

#define RT_TC_INF 1e300

/* C(l, s) for l in 0..T, s in 0..S (row-major, S+1 columns) and the best
 * first advance J(l, s); see the header's recursion. */
typedef struct tc_table {
    int T, S, seg;
    double *cost;
    int *split;
} tc_table;

static void tc_table_free(tc_table *tb) {
    free(tb->cost);
    free(tb->split);
}

static rt_status tc_table_make(int T, int S, int seg, tc_table *tb) {
    tb->T = T, tb->S = S, tb->seg = seg;
    size_t n = (size_t)(T + 1) * (size_t)(S + 1);
    tb->cost = malloc(n * sizeof(double));
    tb->split = malloc(n * sizeof(int));
    if (!tb->cost || !tb->split) {
        tc_table_free(tb);
        return rt_error_set(RT_ERR_OOM, "time chain: out of memory for the schedule table (%d steps)", T);
    }
    for (int l = 0; l <= T; l++)
        for (int s = 0; s <= S; s++) {
            double best = RT_TC_INF;
            int bj = 0;
            if (l <= seg) best = l;
            else if (s > 0)
                for (int j = 1; j < l; j++) {
                    double c = j + tb->cost[(size_t)(l - j) * (S + 1) + s - 1] + tb->cost[(size_t)j * (S + 1) + s];
                    if (c < best) best = c, bj = j;
                }
            tb->cost[(size_t)l * (S + 1) + s] = best;
            tb->split[(size_t)l * (S + 1) + s] = bj;
        }
    return RT_OK;
}

static int64_t tc_bytes(int slots, int seg, int64_t sb, int64_t ab) { return slots * sb + seg * ab; }

rt_status rt_time_plan_plain(int steps, int64_t state_bytes, int64_t step_bytes, rt_time_plan *out) {
    if (!out || steps < 1)
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_time_plan_plain: need out and steps >= 1 (got %d)", steps);
    *out = (rt_time_plan){steps, steps, 0, steps, tc_bytes(0, steps, state_bytes, step_bytes)};
    return RT_OK;
}

rt_status rt_time_plan_every(int steps, int k, int64_t state_bytes, int64_t step_bytes, rt_time_plan *out) {
    if (!out || steps < 1 || k < 1)
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_time_plan_every: need out, steps >= 1 and k >= 1 (got %d, %d)",
                            steps, k);
    if (k > steps) k = steps;
    int slots = (steps + k - 1) / k - 1;
    *out = (rt_time_plan){steps, k, slots, 2.0 * steps - k, tc_bytes(slots, k, state_bytes, step_bytes)};
    if (k == steps) out->forwards = steps;
    return RT_OK;
}

rt_status rt_time_plan_budget(int steps, int64_t state_bytes, int64_t step_bytes, int64_t budget,
                              rt_time_plan *out) {
    if (!out || steps < 1 || state_bytes < 1 || step_bytes < 1)
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_time_plan_budget: need out, steps >= 1 and byte sizes >= 1");
    rt_time_plan best = {0};
    bool found = false;
    for (int seg = 1; seg <= steps; seg++) {
        int64_t left = budget - (int64_t)seg * step_bytes;
        if (left < 0) break;
        int useful = (steps + seg - 1) / seg - 1;
        int64_t fit = left / state_bytes;
        int s = fit < useful ? (int)fit : useful;
        double cost;
        if (seg >= steps) cost = steps;
        else if (s == useful) cost = 2.0 * steps - seg; /* store-every-seg: the least any schedule with seg can do */
        else {
            if (s < 1) continue;
            tc_table tb;
            RT_TRY(tc_table_make(steps, s, seg, &tb));
            cost = tb.cost[(size_t)steps * (s + 1) + s];
            tc_table_free(&tb);
        }
        int64_t bytes = tc_bytes(seg >= steps ? 0 : s, seg, state_bytes, step_bytes);
        if (!found || cost < best.forwards || (cost == best.forwards && bytes < best.bytes)) {
            best = (rt_time_plan){steps, seg, seg >= steps ? 0 : s, cost, bytes};
            found = true;
        }
    }
    if (!found) {
        int64_t least = steps > 1 ? state_bytes + step_bytes : step_bytes;
        return rt_error_set(RT_ERR_OOM, "rt_time_plan_budget: no schedule of %d steps fits %lld bytes; the least "
                                        "memory one needs %lld (one state slot and one recorded step)",
                            steps, (long long)budget, (long long)least);
    }
    *out = best;
    return RT_OK;
}

/* ------------------------------------------------------------ execution */

typedef struct tc_run {
    rt_time_step_fn step;
    void *user;
    float scale;
    double loss_sum;
    tc_table tb;
} tc_run;

/* acc += x (new references; acc may be NULL: acc = x). */
static rt_status tc_accumulate(rt_tensor **acc, rt_tensor *x) {
    if (!*acc) {
        *acc = x;
        return RT_OK;
    }
    rt_tensor *s = NULL;
    rt_status st = rt_add(*acc, x, &s);
    rt_tensor_release(*acc);
    rt_tensor_release(x);
    *acc = s;
    return st;
}

/* Advances n steps from state s (borrowed) without graph: *out new ref. */
static rt_status tc_advance(tc_run *r, int t0, int n, rt_tensor *s, rt_tensor **out) {
    bool prev = rt_grad_set_enabled(false);
    rt_tensor *cur = rt_tensor_retain(s);
    rt_status st = RT_OK;
    for (int t = t0; t < t0 + n && st == RT_OK; t++) {
        rt_tensor *next = NULL;
        st = r->step(r->user, t, cur, &next, NULL);
        if (st == RT_OK && !next) st = rt_error_set(RT_ERR_STATE, "time chain: step %d returned no state", t);
        rt_tensor_release(cur);
        cur = next;
    }
    rt_grad_set_enabled(prev);
    if (st != RT_OK) {
        rt_tensor_release(cur);
        return st;
    }
    *out = cur;
    return RT_OK;
}

/* Records steps a..b-1 from sa and back-propagates scale·Σ loss + <S_b, dsb>;
 * *dsa: sa's gradient (NULL when a == 0: S_0 needs none). dsb is consumed
 * (released as soon as the product node holds it, so that no caller keeps
 * the gradients of states already passed: a recursion with few slots is
 * T levels deep). */
static rt_status tc_record(tc_run *r, int a, int b, rt_tensor *sa, rt_tensor *dsb, rt_tensor **dsa) {
    *dsa = NULL;
    bool prev = rt_grad_set_enabled(true);
    rt_tensor *leaf = a > 0 ? rt_detached_leaf(sa) : rt_tensor_retain(sa);
    rt_status st = leaf ? RT_OK : RT_ERR_OOM;
    rt_tensor *cur = rt_tensor_retain(leaf), *root = NULL;
    for (int t = a; t < b && st == RT_OK; t++) {
        rt_tensor *next = NULL, *loss = NULL;
        st = r->step(r->user, t, cur, &next, &loss);
        if (st == RT_OK && !next) st = rt_error_set(RT_ERR_STATE, "time chain: step %d returned no state", t);
        rt_tensor_release(cur);
        cur = next;
        if (st == RT_OK && loss) {
            if (loss->device == RT_DEVICE_CPU) r->loss_sum += rt_tensor_f32(loss)[0];
            rt_tensor *scaled = NULL;
            st = rt_mul_scalar(loss, r->scale, &scaled);
            rt_tensor_release(loss);
            if (st == RT_OK) st = tc_accumulate(&root, scaled);
        } else {
            rt_tensor_release(loss);
        }
    }
    if (st == RT_OK && dsb) { /* <S_b, dS_b>: its gradient at S_b is exactly 1·dS_b */
        rt_tensor *prod = NULL, *dot = NULL;
        st = rt_mul(cur, dsb, &prod);
        if (st == RT_OK) st = rt_sum(prod, &dot);
        rt_tensor_release(prod);
        if (st == RT_OK) st = tc_accumulate(&root, dot);
    }
    rt_tensor_release(dsb);
    rt_tensor_release(cur);
    if (st == RT_OK && root && root->requires_grad) st = rt_backward(root, NULL, false);
    rt_tensor_release(root);
    rt_grad_set_enabled(prev);
    if (st == RT_OK && a > 0) {
        *dsa = rt_leaf_grad_or_zeros(leaf);
        if (!*dsa) st = RT_ERR_OOM;
    }
    rt_tensor_release(leaf);
    return st;
}

/* reverse(a, b, S_a, dS_b, s) of the header; sa borrowed, dsb consumed,
 * *dsa a new reference. */
static rt_status tc_reverse(tc_run *r, int a, int b, rt_tensor *sa, rt_tensor *dsb, int s, rt_tensor **dsa) {
    *dsa = NULL;
    int l = b - a;
    if (l <= r->tb.seg) return tc_record(r, a, b, sa, dsb, dsa);
    int S = r->tb.S;
    if (s > S) s = S;
    int j = s >= 1 ? r->tb.split[(size_t)l * (S + 1) + s] : 0;
    if (j < 1) {
        rt_tensor_release(dsb);
        return rt_error_set(RT_ERR_INVALID_ARG, "time chain: no schedule reverses %d steps with %d slots and "
                                                "segments of %d; give the plan more slots", l, s, r->tb.seg);
    }
    rt_tensor *sm = NULL, *dsm = NULL;
    rt_status st = tc_advance(r, a, j, sa, &sm);
    if (st != RT_OK) {
        rt_tensor_release(dsb);
        return st;
    }
    st = tc_reverse(r, a + j, b, sm, dsb, s - 1, &dsm);
    rt_tensor_release(sm);
    if (st == RT_OK) st = tc_reverse(r, a, a + j, sa, dsm, s, dsa);
    else rt_tensor_release(dsm);
    return st;
}

rt_status rt_time_chain_run(rt_time_step_fn step, void *user, const rt_time_plan *plan, rt_tensor *state0,
                            float scale, double *loss_sum) {
    if (!step || !plan || !state0)
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_time_chain_run: step, plan and state0 are required");
    const int T = plan->steps;
    if (T < 1 || plan->segment < 1 || plan->slots < 0 || plan->slots >= T + (T == 0))
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_time_chain_run: plan of %d steps with segment %d and %d slots; "
                                                "need steps >= 1, segment >= 1, 0 <= slots < steps",
                            T, plan->segment, plan->slots);
    tc_run r = {.step = step, .user = user, .scale = scale};
    int seg = plan->segment < T ? plan->segment : T;
    RT_TRY(tc_table_make(seg < T ? T : 0, seg < T ? plan->slots : 0, seg, &r.tb));
    if (seg < T && r.tb.cost[(size_t)T * (plan->slots + 1) + plan->slots] >= RT_TC_INF) {
        tc_table_free(&r.tb);
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_time_chain_run: %d steps cannot be reversed with segments of %d "
                                                "and %d slots; give it at least one slot", T, seg, plan->slots);
    }
    rt_tensor *ds0 = NULL;
    rt_status st = tc_reverse(&r, 0, T, state0, NULL, plan->slots, &ds0);
    rt_tensor_release(ds0);
    tc_table_free(&r.tb);
    if (st == RT_OK && loss_sum) *loss_sum = r.loss_sum;
    return st;
}

rt_status rt_time_chain_peak(rt_time_step_fn step, void *user, const rt_time_plan *plan, rt_tensor *state0,
                             float scale, int64_t *peak, double *loss_sum) {
    if (!peak) return rt_error_set(RT_ERR_INVALID_ARG, "rt_time_chain_peak: peak is NULL");
    rt_memstats_reset_peaks();
    rt_memstats m0, m1;
    rt_memstats_get(&m0);
    RT_TRY(rt_time_chain_run(step, user, plan, state0, scale, loss_sum));
    rt_memstats_get(&m1);
    *peak = m1.peak_total - m0.live_total;
    return RT_OK;
}

rt_status rt_time_chain_profile(rt_time_step_fn step, void *user, rt_tensor *state0, int64_t *step_bytes,
                                int64_t *base_bytes) {
    if (!step_bytes || !base_bytes)
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_time_chain_profile: step_bytes and base_bytes are required");
    rt_time_plan p1, p2;
    RT_TRY(rt_time_plan_plain(1, 1, 1, &p1));
    RT_TRY(rt_time_plan_plain(2, 1, 1, &p2));
    int64_t a = 0, b = 0;
    /* the first run allocates the parameter gradients; run once before measuring */
    RT_TRY(rt_time_chain_peak(step, user, &p1, state0, 1.0f, &a, NULL));
    RT_TRY(rt_time_chain_peak(step, user, &p1, state0, 1.0f, &a, NULL));
    RT_TRY(rt_time_chain_peak(step, user, &p2, state0, 1.0f, &b, NULL));
    *step_bytes = b - a > 0 ? b - a : 1;
    *base_bytes = a - *step_bytes > 0 ? a - *step_bytes : 0;
    return RT_OK;
}
