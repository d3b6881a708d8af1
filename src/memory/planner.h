/* The memory planner: for a chain of stages (memory/checkpoint.h) and a
 * byte budget, the plan — store, checkpoint, selective or rebuild per stage
 * — with the least recomputation whose modelled peak fits.
 *
 * The model (per stage i, from rt_checkpoint_profile or given):
 *   kept(segment)  bytes a segment holds from its forward to its backward:
 *                  STORE saved_i, SELECTIVE saved_sel_i, REBUILD saved_rev_i,
 *                  CHECKPOINT [s..e] input_s (its input only);
 *   boundaries     the tensor between stages i-1 and i (input_i bytes) is
 *                  one tensor however many keep it: it is kept when stage
 *                  i-1 keeps its output, stage i keeps its input, or a
 *                  CHECKPOINT segment starts at i (keeps_input /
 *                  keeps_output), and counted once, when the first of them
 *                  runs; the profiled saved bytes are split into the
 *                  stage's own bytes and those boundaries (so a checkpoint
 *                  after a stage that keeps its output costs nothing more,
 *                  and one before a stage that keeps its input does not
 *                  free that input — ResNet-50 layer1.0 checkpointed alone:
 *                  24.5 MiB freed by the model, none by the real step,
 *                  before this rule);
 *   live(segment)  its own peak above what earlier segments keep, reached
 *                  in its forward or backward: STORE peak_i, SELECTIVE
 *                  peak_sel_i, REBUILD peak_rev_i, CHECKPOINT [s..e]
 *                  input_s + max over j in [s, e] of (Σ_{s<=i<j} saved_i +
 *                  peak_j) — during stage j's backward the stages before
 *                  it in the segment are recomputed and held, those after
 *                  it already freed;
 *   peak(plan)     base + max over segments S of (Σ_{T before S} kept(T) +
 *                  live(S)), base = what every plan holds (parameters,
 *                  gradients, optimizer state, batch);
 *   recompute      Σ fwd_i over CHECKPOINT stages + Σ fwd_sel_i over
 *                  SELECTIVE + Σ fwd_rev_i over REBUILD.
 * Skips (span, side_bytes): every segment's live bytes at stage j grow by
 * span_j, and a CHECKPOINT segment [s..e] also keeps side_bytes_j of each
 * of its stages j reading a skip produced before s — docs/design.md,
 * "Checkpointing, selective recompute and the planner", says why this is a
 * heuristic for graphs with skips and what stays exact.
 * This is the single-level plan space of Chen et al. 2016 with
 * heterogeneous stages plus two per-stage alternatives: each segment is
 * recomputed at most once. rotor's (Beaumont et al. 2019) multi-level
 * schedules, which re-checkpoint inside a recomputed segment, are outside it.
 *
 * rt_plan_chain is optimal in that space, exactly (no discretisation of
 * memory): a dynamic program over prefixes whose states are the Pareto
 * front of (bytes kept so far, recompute so far), one front for prefixes
 * whose last stage keeps its output and one for the others. Proof sketch:
 * the constraints and cost of the stages after a prefix depend on the
 * prefix only through K, the bytes it keeps (each later segment needs
 * K + … <= budget, monotone in K), and through whether the boundary after
 * it is already kept; so a prefix state (K, c) dominated by (K', c') with
 * K' <= K, c' <= c and the same boundary can be replaced by it in every
 * completion without losing feasibility or increasing cost, and keeping
 * every non-dominated state of every prefix keeps an optimal plan. Cost
 * O(n² · F log F) for n stages and fronts of at most F states. Two exact
 * cuts keep F small: a state keeping more than the budget leaves room for
 * a later stage's least live bytes is dropped, and a first pass whose
 * fronts are capped (64 states, spread along each) finds a feasible plan
 * whose cost bounds the exact pass, which then drops every state costing
 * more. rt_plan_min_peak climbs to the least feasible budget from below
 * and asks only whether a plan fits, which the state keeping the fewest
 * bytes of each prefix decides (fronts of one state). prunet3d's 31
 * stages plan in 0.22 instead of 7.4 s, the same plans.
 * tests/test_planner.c checks it against brute force on random chains. */
#ifndef RT_MEMORY_PLANNER_H
#define RT_MEMORY_PLANNER_H

#include <stdint.h>

#include "../core/status.h"
#include "checkpoint.h"

/* One stage. Bytes are activation bytes (f32 or whatever the stage
 * books); costs are in any consistent unit (FLOP estimates or seconds).
 * saved_sel/peak_sel < 0: no selective option; saved_rev/peak_rev < 0:
 * the stage is not reversible. */
typedef struct rt_stage_profile {
    int64_t input_bytes;
    int64_t saved, peak;
    int64_t saved_sel, peak_sel;
    int64_t saved_rev, peak_rev;
    double fwd, fwd_sel, fwd_rev;
    /* Graphs with skips (a U-Net; zero for a chain): span, the bytes of
     * skips produced before the stage and read after it (held across it:
     * the tensor in forward, its gradient in backward), added to the
     * stage's live bytes under every kind; side_bytes > 0: the stage reads
     * a skip of that many bytes from stage side_from < its index, which a
     * CHECKPOINT segment starting after side_from keeps (a segment holding
     * side_from recomputes it). */
    int64_t span;
    int64_t side_bytes;
    int side_from;
    /* Which of its boundary tensors the stage keeps by alias when it runs
     * under a kind (indexed by rt_stage_kind; the CHECKPOINT entries are
     * unused): its input (the previous stage's output, input_bytes) and its
     * output (the next stage's input). saved, saved_sel and saved_rev count
     * such a tensor as the plain chain does — the output when the stage
     * keeps it, the input when the stage keeps it and the previous stage,
     * stored, does not — and the model moves those bytes to the boundary,
     * which a plan keeps once when either side keeps it or a CHECKPOINT
     * segment starts there (all false: a CHECKPOINT segment keeps its input,
     * every other kind what its saved bytes say). */
    bool keeps_input[4], keeps_output[4];
} rt_stage_profile;

/* A plan: per stage a kind and a segment number (as rt_checkpoint_set_plan
 * takes them), with the model's peak (without base) and recompute cost. */
typedef struct rt_plan {
    int n;
    rt_stage_kind *kind;   /* n entries, owned */
    int *segment;          /* n entries, owned */
    int64_t peak;          /* modelled activation peak (bytes above base) */
    double recompute;      /* modelled recompute cost, in the profile's units */
    double forward;        /* Σ fwd_i: one plain forward, for fractions */
} rt_plan;

/* Which kinds the planner may use (presets and --recompute restrict it). */
typedef struct rt_plan_options {
    bool allow_checkpoint, allow_selective, allow_rebuild;
} rt_plan_options;

/* Every kind allowed. */
rt_plan_options rt_plan_options_all(void);

/* The modelled peak (bytes above base) and recompute of a given plan
 * (kind/segment arrays of n stages). RT_ERR_INVALID_ARG for NULLs, n < 1,
 * or a kind the profile does not offer at a stage. */
rt_status rt_plan_evaluate(const rt_stage_profile *p, int n, const rt_stage_kind *kind, const int *segment,
                           int64_t *peak, double *recompute);

/* The least-recompute plan of the n-stage chain p whose modelled peak is
 * <= budget (bytes above base), using the kinds `opt` allows (STORE always).
 * Ties are broken towards the smaller peak. *out is filled (free with
 * rt_plan_free). RT_ERR_OOM when no plan fits (the message gives the
 * smallest feasible budget, from rt_plan_min_peak); RT_ERR_INVALID_ARG for
 * NULLs or n < 1; RT_ERR_OOM. */
rt_status rt_plan_chain(const rt_stage_profile *p, int n, int64_t budget, rt_plan_options opt, rt_plan *out);

/* The smallest modelled peak any plan with the allowed kinds reaches (the
 * smallest feasible budget above base). RT_ERR_INVALID_ARG for NULLs or
 * n < 1; RT_ERR_OOM. */
rt_status rt_plan_min_peak(const rt_stage_profile *p, int n, rt_plan_options opt, int64_t *min_peak);

/* Frees the plan's arrays (the struct itself is the caller's); NULL and
 * an empty plan are no-ops. */
void rt_plan_free(rt_plan *plan);

#endif
