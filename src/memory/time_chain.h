/* Backpropagation through time over a chain of time steps, with a schedule
 * that decides which steps keep their activations: plain BPTT (every step
 * recorded), store-every-k, or the least recomputation for a byte budget
 * (Griewank & Walther's binomial checkpointing, Revolve, extended by
 * recorded segments). Gradients are those of plain BPTT: every step is
 * recorded exactly once, from the same state, with the same parameters.
 *
 * The chain: a state S_0 (zeros, no gradient) and T steps
 *   (S_{t+1}, loss_t) = step(t, S_t),
 * loss = scale · Σ_t loss_t. The state is one tensor (a ConvLSTM packs
 * h and c as channels); per-step inputs (frames) and targets are the step
 * function's own (it reads them by t), and each step's loss is returned
 * beside the next state. The step runs in the current grad mode.
 *
 * Why not a Checkpoint wrapper (memory/checkpoint.h) and the chain planner
 * (memory/planner.h): (1) the stages of a time chain are one module applied
 * T times, sharing its parameters, while a wrapper's stages are distinct
 * modules of a tree (state-dict names, profiles per stage); (2) every step
 * also reads its frame and emits its loss, outside the single-input,
 * single-output chain a wrapper runs; (3) the optimal schedule for a
 * uniform chain under few snapshots re-checkpoints inside recomputed
 * segments (Revolve), which is outside the planner's single-level plan
 * space (planner.h). So the time chain is its own small mechanism on the
 * recompute seam (autograd/recompute.h): states are kept without graph, a
 * segment is re-run with grad on from a detached leaf, back-propagated with
 * the gradient arriving at its end, and its start's gradient carried on.
 *
 * The schedule (a recursion, Griewank 1992 "Achieving logarithmic growth
 * of temporal and spatial complexity in reverse automatic
 * differentiation"; Griewank & Walther 2000, ACM TOMS 26, Revolve):
 *   reverse(a, b, S_a, dS_b, s):  s free state slots
 *     b - a <= seg:  record steps a..b-1 from a leaf S_a, back-propagate
 *                    scale·Σ loss_t + <S_b, dS_b> (the inner product
 *                    hands exactly dS_b to S_b: its gradient is 1·dS_b),
 *                    return S_a's gradient;
 *     else:          advance j steps without graph, keep S_{a+j} in a slot,
 *                    reverse(a+j, b, S_{a+j}, dS_b, s-1), free the slot,
 *                    reverse(a, a+j, S_a, dS_{a+j}, s).
 * Forward cost C(l, s) = l when l <= seg, else min_j j + C(l-j, s-1) +
 * C(j, s) (a dynamic program picks j); with seg = 1 this is the binomial
 * schedule of Revolve, optimal for a uniform chain with s snapshots; seg =
 * T is plain BPTT (C = T, one recording, no slot); seg = k with ⌈T/k⌉-1
 * slots is store-every-k (C = 2T - k). The memory model: at most s states
 * held plus one recorded segment of seg steps: s·state_bytes +
 * seg·step_bytes (step_bytes: what one recorded step keeps until its
 * backward, measured on the meta device, see rt_time_chain_run). */
#ifndef RT_MEMORY_TIME_CHAIN_H
#define RT_MEMORY_TIME_CHAIN_H

#include <stdint.h>

#include "../core/status.h"
#include "../core/tensor.h"

/* One step: from `state` (borrowed) to *next (new reference, same shape),
 * and, when loss is not NULL, the step's loss as a 0-d tensor in *loss
 * (new reference; NULL when the step has none). Runs in the current grad
 * mode; the chain calls it more than once for the same t under a schedule
 * that recomputes, and it must compute the same values each time. */
typedef rt_status (*rt_time_step_fn)(void *user, int t, rt_tensor *state, rt_tensor **next, rt_tensor **loss);

/* A schedule for T steps: recorded segments of at most `segment` steps,
 * at most `slots` states held at once besides S_0. */
typedef struct rt_time_plan {
    int steps;       /* T */
    int segment;     /* 1..T; T: plain BPTT */
    int slots;       /* 0..T-1 */
    double forwards; /* step forwards the schedule runs, T for plain (C(T, slots) above) */
    int64_t bytes;   /* modelled activation bytes: slots·state + segment·step */
} rt_time_plan;

/* Plain BPTT: segment T, no slot, T forwards. RT_ERR_INVALID_ARG for T < 1. */
rt_status rt_time_plan_plain(int steps, int64_t state_bytes, int64_t step_bytes, rt_time_plan *out);
/* Store-every-k: segment k, ⌈T/k⌉ - 1 slots (k capped at T).
 * RT_ERR_INVALID_ARG for T < 1 or k < 1. */
rt_status rt_time_plan_every(int steps, int k, int64_t state_bytes, int64_t step_bytes, rt_time_plan *out);
/* The fewest forwards whose modelled bytes (slots·state_bytes +
 * segment·step_bytes) fit `budget`, over every segment 1..T and slot count
 * (ties: fewer bytes). RT_ERR_OOM when no schedule fits (the message gives
 * the smallest budget, state_bytes + step_bytes for T > 1);
 * RT_ERR_INVALID_ARG for T < 1 or byte sizes < 1. */
rt_status rt_time_plan_budget(int steps, int64_t state_bytes, int64_t step_bytes, int64_t budget,
                              rt_time_plan *out);

/* Runs forward and backward over the chain under `plan`: accumulates the
 * gradient of loss = scale·Σ_t loss_t into every parameter (leaf .grad,
 * as rt_backward does), and writes Σ_t loss_t (unscaled, in double) to
 * *loss_sum when not NULL (0 on the meta device). state0 (borrowed) is
 * S_0, given no gradient; it may live on the meta device (the step
 * function's tensors too), which books every byte and computes nothing:
 * that is the memory prediction of the schedule (core/mem.h peaks). The
 * plan's forwards and bytes fields are not read. Grad mode is restored.
 * Errors: RT_ERR_INVALID_ARG for NULLs, steps < 1, segment < 1, slots
 * outside [0, steps), or a plan with segment < steps and no slot (nothing
 * could hold the state a recorded segment starts from); RT_ERR_STATE when
 * the step returns no next state; the step function's and the engine's
 * errors. */
rt_status rt_time_chain_run(rt_time_step_fn step, void *user, const rt_time_plan *plan, rt_tensor *state0,
                            float scale, double *loss_sum);

/* Measures the memory model's sizes by running plain chains of 1 and 2
 * steps (normally on the meta device: nothing is computed): *step_bytes =
 * peak(2) - peak(1), what one more recorded step adds; *base_bytes =
 * peak(1) - step_bytes, what every schedule needs besides (one step's
 * transients, parameter gradients allocated on first use). Peaks are the
 * tracker's total above the live bytes at the call. Parameter gradients
 * are accumulated by the runs (zero them after). The step function must
 * accept t = 0 and 1. Errors of rt_time_chain_run; RT_ERR_INVALID_ARG for
 * NULLs. */
rt_status rt_time_chain_profile(rt_time_step_fn step, void *user, rt_tensor *state0, int64_t *step_bytes,
                                int64_t *base_bytes);

/* The tracked peak (bytes above the live total at the call) of running the
 * chain under plan: rt_time_chain_run bracketed by the tracker's peak
 * reset. On the meta device this is the schedule's exact prediction. */
rt_status rt_time_chain_peak(rt_time_step_fn step, void *user, const rt_time_plan *plan, rt_tensor *state0,
                             float scale, int64_t *peak, double *loss_sum);

#endif
