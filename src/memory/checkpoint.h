/* Gradient checkpointing as a wrapper module: drop activations at forward,
 * recompute them in backward (Chen et al. 2016, "Training Deep Nets with
 * Sublinear Memory Cost"; PyTorch's torch.utils.checkpoint with
 * use_reentrant=False, checkpoint_sequential, and selective activation
 * checkpointing with CheckpointPolicy).
 *
 * A Checkpoint wraps one module (its inline child: state-dict names do not
 * change) and sees it as a chain of *stages*: the module itself, or, for a
 * Sequential, its children, looking through nested Sequentials (a ResNet's
 * conv1, bn1, maxpool, layer1.0 … layer4.2, avgpool, flatten, fc), or the
 * stages a module lists itself (rt_module.stages: a U-Net's levels in
 * execution order, whose skips are side tensors, see
 * rt_checkpoint_side_get), where a listed Sequential (a U-Net level)
 * contributes its leaves as stages (so the stages that put and get a skip
 * must be listed leaves, as the U-Nets' store and merge stages are: a
 * listed Sequential is no stage of its own, and a reader is taken to be
 * the first stage of its unit). Each stage belongs to a *unit*
 * (rt_checkpoint.unit): a listed stage, or a Sequential's leaf at the top
 * level; checkpoint_sequential cuts between units and selective recompute
 * makes one region per unit, while a plan may cut anywhere. Every stage
 * gets a kind (rt_stage_kind):
 *   STORE       plain backpropagation: the stage keeps what its ops save;
 *   CHECKPOINT  consecutive CHECKPOINT stages with the same segment number
 *               form a region that keeps only its input and the generator
 *               position; its first saved tensor read in backward re-runs
 *               the region;
 *   SELECTIVE   consecutive SELECTIVE stages with the same segment number
 *               (one stage, or a unit) form a region under a per-leaf-module
 *               policy: outputs of MUST_SAVE/PREFER_SAVE leaves (by default
 *               Conv2d/Conv3d/Linear) are kept, the rest recomputed from
 *               them — the expensive ops never run twice;
 *   REBUILD     a ReversibleSequence stage runs reversible (its inputs are
 *               rebuilt from outputs, memory/reversible.h); every other kind
 *               runs it as plain backpropagation.
 *
 * Non-reentrant semantics, as PyTorch's use_reentrant=False: the region's
 * forward records its graph as usual, with saved-tensor hooks
 * (autograd/node.h) that drop what its ops save and remember the order; the
 * first unpack in backward re-runs the region's stages on a detached copy
 * of its input (grad mode on, recompute mode on, the default generator
 * rewound to the region's start) and hands each recomputed tensor to the
 * node that saved the original. Consequences:
 *   - parameters inside a region get gradients even when its input needs
 *     none (the graph exists; the reentrant variant loses them);
 *   - batch norm updates running statistics once, at forward (also when no
 *     backward follows), never in the recompute (recompute mode);
 *   - dropout draws the forward's masks again (the generator is rewound),
 *     and the generator ends where it would without recompute;
 *   - a recomputed tensor belongs to the node that reads it and is freed as
 *     soon as that node has run, so a region's recompute buffers are gone
 *     before the previous region recomputes;
 *   - a second backward without retain_graph fails with
 *     RT_ERR_GRAPH_RELEASED; with retain_graph every backward recomputes.
 * The recompute must save the same tensors in the same order as the forward
 * (no data-dependent control flow), else backward fails with RT_ERR_STATE
 * (PyTorch's determinism check). A Checkpoint inside a region being run or
 * recomputed runs as part of that region (no nesting). The wrapper and its
 * child must outlive the graphs they record.
 *
 * Bytes: a region keeps its input (booked SAVED while kept; a DATA batch
 * stays DATA), plus, under SELECTIVE, the kept leaf outputs and whatever
 * those leaves' own ops saved besides their input (a Conv2d keeps its
 * output; its saved input is recomputed). Differences from PyTorch:
 * checkpoint_sequential checkpoints every segment, the last included (so
 * only the K segment inputs are held after forward; PyTorch runs the last
 * segment plainly), and there is no early stop (a region is re-run whole). */
#ifndef RT_MEMORY_CHECKPOINT_H
#define RT_MEMORY_CHECKPOINT_H

#include <stdbool.h>

#include "../nn/module.h"

/* torch.utils.checkpoint.CheckpointPolicy, same values. revtorch has no
 * compiler that may override PREFER_*, so MUST_x and PREFER_x act alike. */
typedef enum rt_checkpoint_policy {
    RT_CKPT_MUST_SAVE = 0,
    RT_CKPT_PREFER_SAVE = 1,
    RT_CKPT_MUST_RECOMPUTE = 2,
    RT_CKPT_PREFER_RECOMPUTE = 3,
} rt_checkpoint_policy;

/* The policy for one leaf module (a module without children) run inside a
 * SELECTIVE stage; called at forward only. */
typedef rt_checkpoint_policy (*rt_checkpoint_policy_fn)(void *user, const rt_module *leaf);

/* The default selective policy: MUST_SAVE for Conv2d, Conv3d, ConvTranspose3d and Linear
 * (compute-bound, O(k²·C) work per output element), PREFER_RECOMPUTE for
 * everything else (batch norm, activations, pooling, dropout: memory-bound,
 * a few operations per element). user is unused; NULL leaf: recompute. */
rt_checkpoint_policy rt_checkpoint_policy_default(void *user, const rt_module *leaf);

typedef enum rt_stage_kind {
    RT_STAGE_STORE = 0,
    RT_STAGE_CHECKPOINT,
    RT_STAGE_SELECTIVE,
    RT_STAGE_REBUILD,
} rt_stage_kind;

/* Lower-case name of a kind ("store", "checkpoint", "selective",
 * "rebuild"; "?" for an unknown value). */
const char *rt_stage_kind_str(rt_stage_kind k);

typedef struct rt_checkpoint {
    rt_module base;           /* one inline child: the wrapped module */
    rt_module **stages;       /* borrowed: the chain, n_stages >= 1 */
    int n_stages;
    int *reads;               /* per stage: the earlier stage whose output it also reads (a skip), -1: none */
    int *unit;                /* per stage: its unit, ascending from 0 — a stage of its own, or a U-Net
                                 level whose leaves are stages; checkpoint_sequential and selective
                                 recompute work by unit */
    rt_stage_kind *kind;      /* per stage */
    int *segment;             /* per stage: adjacent CHECKPOINT (or SELECTIVE) stages with equal numbers
                                 form a region */
    rt_checkpoint_policy_fn policy; /* for SELECTIVE stages */
    void *policy_user;
    /* The dtype of an Autocast between the wrapper and its stages
     * (Checkpoint(Autocast(net)): the stages are net's), RT_F32 without:
     * stages run on their own (profiling, rt_checkpoint_run_stages) run
     * inside that precision region, as the whole forward does. */
    rt_dtype region_dtype;
    /* forward state, valid during the wrapper's forward only */
    struct rt_ckpt_frame *frame;
    int cursor;
    rt_module_interceptor outer; /* the interceptor installed before, called after this one's work */
} rt_checkpoint;

/* Checkpoint(m): wraps m (owned from this call on, destroyed on failure
 * too) with every stage CHECKPOINT in one segment, i.e. torch's
 * checkpoint(m, x, use_reentrant=False). Put the wrapper where m was (its
 * child is inline, so names are unchanged). RT_ERR_INVALID_ARG for NULL
 * arguments, RT_ERR_OOM. */
rt_status rt_checkpoint_create(rt_module *m, rt_module **out);
/* The Checkpoint behind module m, or NULL (also for NULL). */
rt_checkpoint *rt_checkpoint_of(rt_module *m);

/* checkpoint_sequential(seq, segments): wraps seq and splits its units
 * (stages, or a U-Net's levels) into `segments` consecutive CHECKPOINT
 * segments of ⌊n/segments⌋ units (the last takes the rest), as torch's
 * checkpoint_sequential splits its functions, except that the last is
 * checkpointed too. segments is capped at the number of units. Ownership
 * as rt_checkpoint_create. RT_ERR_INVALID_ARG for segments < 1. */
rt_status rt_checkpoint_sequential(rt_module *seq, int segments, rt_module **out);

/* Re-plans an existing wrapper: K equal segments (as above), every stage
 * SELECTIVE under `policy` (NULL: rt_checkpoint_policy_default; one region
 * per unit), or every stage STORE (plain). Each returns RT_ERR_INVALID_ARG when ckpt is not a
 * Checkpoint (or segments < 1). Reversible stages run plain under all
 * three; rt_checkpoint_set_plan chooses REBUILD. */
rt_status rt_checkpoint_set_segments(rt_module *ckpt, int segments);
rt_status rt_checkpoint_set_selective(rt_module *ckpt, rt_checkpoint_policy_fn policy, void *user);
rt_status rt_checkpoint_set_plain(rt_module *ckpt);

/* Sets every stage's kind and segment number (arrays of n = n_stages
 * entries, copied): adjacent CHECKPOINT stages with one segment number form
 * a region, and so do adjacent SELECTIVE stages (give each its own number
 * for one region per stage). REBUILD is allowed on ReversibleSequence stages only,
 * whose reversible flag it sets (and clears for any other kind).
 * RT_ERR_INVALID_ARG for NULLs, n != n_stages, an unknown kind or REBUILD
 * on a stage that is not reversible (the message names the stage). */
rt_status rt_checkpoint_set_plan(rt_module *ckpt, const rt_stage_kind *kind, const int *segment, int n);

/* Side tensors: stages that hand a tensor to a later stage outside the
 * chain (a U-Net's skip, rt_module.stages' reads). The model keeps the
 * tensor in its own table between the two stages; these calls let a
 * checkpoint region running or recomputing those stages see it:
 *   rt_checkpoint_side_put  the producing stage (a module of the wrapper's
 *       stage list) offers its output t (borrowed). *stash = true: the
 *       model keeps it for the reader as usual; false: a region is being
 *       recomputed and holds it itself, until the reader takes it or the
 *       recompute ends.
 *   rt_checkpoint_side_get  the reading stage fetches it: *out (a new
 *       reference) is `stashed` (the model's table entry, borrowed, NULL
 *       when the model no longer has it) — except that a region whose
 *       forward reads a tensor produced before the region keeps it (booked
 *       SAVED, exact f32, like its input) and its recompute reads that
 *       copy, while a region that contains the producer recomputes it.
 * Outside every region both are plain pass-throughs. One reader per
 * producer. RT_ERR_INVALID_ARG for NULL producer/out/stash; RT_ERR_STATE
 * when there is nothing to read (stashed NULL and nothing kept);
 * RT_ERR_OOM. Thread-local state, like the regions themselves. */
rt_status rt_checkpoint_side_put(const rt_module *producer, rt_tensor *t, bool *stash);
rt_status rt_checkpoint_side_get(const rt_module *producer, rt_tensor *stashed, rt_tensor **out);

/* Profiling runs a reading stage several times alone (memory/budget.h),
 * and the model's table entry is gone after the first: while replay is on
 * (on this thread), rt_checkpoint_side_get hands every reader of a
 * producer one detached copy (requires_grad as the original) of the first
 * tensor it saw, also when a later call finds stashed NULL, so that a
 * stage run alone back-propagates into no other graph; turning it off
 * releases them. */
void rt_checkpoint_side_replay(bool on);

/* Runs stages first..last of the wrapper in order on x (borrowed) under
 * its current plan, exactly as its forward runs them (regions begin and
 * end inside the range only): y = stage_last(…stage_first(x)), inside the
 * wrapper's precision region (ckpt.region_dtype): a region of its own, or
 * the caller's when the thread is inside one of that precision already
 * (then the stages share its half copies with what ran before in it, as
 * within one forward). For profiling a stage alone or the chain stage by
 * stage (memory/budget.h). RT_ERR_INVALID_ARG for NULLs,
 * a module that is not a Checkpoint or a range outside [0, n_stages). */
rt_status rt_checkpoint_run_stages(rt_module *ckpt, int first, int last, rt_tensor *x, rt_tensor **y);

#endif
