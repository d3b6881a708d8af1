/* Memory modes and budgets: "this training step may use B bytes", kept
 * with the least recomputation the planner (memory/planner.h) finds, and
 * checked byte for byte by a meta run of the real step (memory/predict.h)
 * before any work. The C counterpart of RevTorch's set_memory_mode and of
 * revtorch's --memory-mode / --memory-budget / --checkpoint-segments /
 * --recompute selective.
 *
 * Profile (rt_checkpoint_profile): each stage of a Checkpoint wrapper is
 * run on the meta device, which books every byte and computes nothing:
 *   saved      SAVED bytes the stage adds when the chain runs plainly (a
 *              tensor two stages keep — a ReLU's output, the next conv's
 *              input — counts once, for the first);
 *   peak       saved + the stage's transient bytes in an isolated forward
 *              and backward (its output's gradient, its input's gradient,
 *              scratch), with the stage's parameter gradients already
 *              allocated: the base counts all of them. The backward starts
 *              (for an f32 output; another is given a gradient the profile
 *              holds) from sum(output) with the output released, so the output's
 *              gradient is the engine's own buffer, which the stage's
 *              first backward op may overwrite, as on the chain (a
 *              gradient handed in by the caller may not be: ResNet-50's
 *              layer1 blocks measured 24.5 MiB more in isolation);
 *   keeps_input, keeps_output  whether the stage's forward kept its input
 *              or its output for backward (the storages' saved counts), per
 *              kind: memory/planner.h counts such boundary tensors once;
 *   *_sel, *_rev the same as a SELECTIVE region / reversible rebuild;
 *   input_bytes the stage's input (0 for the first: the batch is DATA);
 *   span, side_bytes, side_from  for stages that read an earlier stage's
 *              output (rt_checkpoint.reads, a U-Net's skips): that
 *              output's bytes, added to the span of every stage between
 *              producer and reader and given as the reader's side input
 *              (memory/planner.h; the stage reading a skip runs alone
 *              several times, rt_checkpoint_side_replay hands it the skip);
 *   fwd        cost of the stage's forward from its leaf modules, in
 *              FLOP-equivalents: 2·MACs for Conv and Linear, 64 per output
 *              element for every other leaf — these are memory-bound (an
 *              f32 read and write, 8 bytes an element at least, batch norm
 *              more) and this CPU convolves about 8 FLOPs in the time it
 *              moves a byte; priced at their 8 FLOPs the model put
 *              ResNet-50's selective recompute at 0.4% of a step where it
 *              measured 2.8%, and at 64 it models 2.9%; fwd_sel counts the
 *              leaves the policy recomputes, fwd_rev = fwd (a rebuild
 *              re-runs F and G).
 *
 * Modes (rt_memory_mode), presets over the planner. With P the plain
 * step's predicted peak and F its parameters + gradients + optimizer state
 * + batch (the per-category peaks of PARAM, GRAD, OPTIM and DATA), the
 * activations are A = P - F and a mode is the budget F + f·A for the whole
 * step, met on the meta prediction as --memory-budget is:
 *   conservative  f = 0.60   (keep 40% less activation memory)
 *   balanced      f = 0.35   (65% less)
 *   aggressive    f = 0.15   (85% less)
 * with the least recompute (cost estimate, fwd below) under it; when no plan reaches
 * it, the least-memory plan (the saving it reaches is then smaller: the
 * largest stage's own working set bounds it). Savings are those of
 * RevTorch's quoted modes (40% / 65% / 85%); the slowdowns it quotes (5% /
 * 12% / 25%) are not promised by construction but measured (`revtorch
 * memory --measure`, README). */
#ifndef RT_MEMORY_BUDGET_H
#define RT_MEMORY_BUDGET_H

#include "checkpoint.h"
#include "planner.h"
#include "predict.h"

/* Profiles every stage of Checkpoint `ckpt`, whose parameters live on the
 * meta device, on a batch of x_shape (f32, booked DATA): out[0..n_stages-1].
 * The wrapper's plan is restored afterwards; batch-norm counters of the
 * meta model advance (it is a throwaway copy). RT_ERR_INVALID_ARG for NULLs,
 * a module that is not a Checkpoint or parameters not on meta; the errors
 * of the stages. */
rt_status rt_checkpoint_profile(rt_module *ckpt, int x_ndim, const int64_t *x_shape, rt_stage_profile *out);

typedef enum rt_memory_mode {
    RT_MEMORY_MODE_NONE = 0, /* plain, or what segments/selective/budget say */
    RT_MEMORY_MODE_CONSERVATIVE,
    RT_MEMORY_MODE_BALANCED,
    RT_MEMORY_MODE_AGGRESSIVE,
} rt_memory_mode;

/* "conservative", "balanced", "aggressive" ("none" for NONE; NULL for an
 * unknown value), and the parse back (RT_ERR_INVALID_ARG naming the
 * choices for anything else; NULL arguments too). */
const char *rt_memory_mode_str(rt_memory_mode m);
rt_status rt_memory_mode_parse(const char *s, rt_memory_mode *out);
/* The fraction of the plain activation peak a mode keeps (0.60 / 0.35 /
 * 0.15; 1 for NONE and unknown values). */
double rt_memory_mode_fraction(rt_memory_mode m);

/* What the user asked for. At most one of mode, budget and segments is
 * set; selective may go with none of them (every stage SELECTIVE) or with
 * a mode or budget (the planner may then use SELECTIVE stages; without it,
 * only STORE, CHECKPOINT and REBUILD). Under segments or selective alone,
 * ReversibleSequence stages are REBUILD (checkpointing them would keep
 * more than the output they need); a rebuilt stage inside a segment splits
 * it in two. */
typedef struct rt_memory_config {
    rt_memory_mode mode;
    int64_t budget;    /* bytes for the whole step's tracked peak, 0: none */
    int segments;      /* checkpoint_sequential segments, 0: none */
    bool selective;
} rt_memory_config;

/* The outcome: the plan (per stage), the step's predicted peak per
 * category (rt_memory_predict on the meta model with the plan applied),
 * that of the plain step, and the modelled recompute as a fraction of one
 * plain forward+backward (backward ≈ 2 forwards). */
typedef struct rt_memory_plan {
    rt_plan plan;
    rt_memstats predicted;       /* the planned step */
    rt_memstats predicted_plain; /* the plain step */
    double recompute_fraction;
    int iterations;              /* plans predicted to meet the budget (each distinct plan one meta run) */
} rt_memory_plan;

/* Plans `meta_ckpt` (a Checkpoint on the meta device wrapping the model)
 * for config *mc and applies the plan to it; the caller copies plan.kind /
 * plan.segment to the real wrapper with rt_checkpoint_set_plan. A budget
 * is met on the prediction, not only on the model: the plan is predicted
 * with rt_memory_predict (opt, cfg, shapes as there) and, while the
 * prediction exceeds the budget, re-planned with the activation budget
 * lowered by the excess (at most 8 times). The stages are profiled on one
 * micro-batch (x_shape's batch split as cfg->accum_steps splits it, the
 * larger share), the activations one forward and backward hold. When the stages are finer than
 * the units (a U-Net's levels split into their leaves), a budget or mode
 * is planned twice — over the stages and over whole units, each profiled
 * — and the better prediction is kept: the one that fits, with the least
 * recompute (the finer plans reach less memory, the coarser ones often
 * need less recompute, as the chain model errs more on leaves). Errors: RT_ERR_OOM when the
 * budget cannot be met, with the smallest feasible budget (the predicted
 * peak of the least-memory plan) in the message, before anything ran on
 * real tensors; RT_ERR_INVALID_ARG for NULLs or a config setting more than
 * one of mode, budget and segments, or an x_shape of no dimensions or
 * batch < 1; those of the profile and prediction. */
rt_status rt_memory_plan_make(rt_module *meta_ckpt, const rt_optimizer_spec *opt, const rt_train_config *cfg,
                              int x_ndim, const int64_t *x_shape, int y_ndim, const int64_t *y_shape,
                              rt_dtype y_dtype, const rt_memory_config *mc, rt_memory_plan *out);
/* Frees the plan inside (NULL: no-op). */
void rt_memory_plan_free(rt_memory_plan *p);

#endif
