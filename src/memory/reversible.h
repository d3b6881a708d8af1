/* Reversible blocks and sequences as wrapper modules: activation memory that
 * does not grow with depth (Gomez et al. 2017, "The Reversible Residual
 * Network", §3; MemCNN, van de Leemput et al. 2019; RevTorch's
 * ReversibleBlock / ReversibleSequence).
 *
 * A ReversibleBlock(f, g) splits its input x (N, C, ...) along channels into
 * x1 (⌊C/2⌋) and x2 (⌈C/2⌉) and computes
 *     additive:  y1 = x1 + F(x2),   y2 = x2 + G(y1)               (RevNet eq. 1)
 *     affine:    y1 = x1 + F(x2),   y2 = x2 ⊙ exp(s) + t, (s,t) = G(y1)
 *                with s soft-clamped to [-2, 2] (ops/coupling.h)
 * and is inverted exactly: x2 = y2 - G(y1) (or (y2 - t) ⊙ exp(-s)), then
 * x1 = y1 - F(x2). F and G are any modules (ReLU, batch norm and dropout
 * inside are fine) that keep N and the spatial size, with F: ⌈C/2⌉ → ⌊C/2⌋
 * channels and G: ⌊C/2⌋ → ⌈C/2⌉ (additive) or 2·⌈C/2⌉ (affine). Inputs
 * are 2-D (N, C) — Linear F and G — up to 5-D (N, C, D, H, W), C >= 2.
 *
 * A ReversibleSequence of blocks runs them without recording a graph and
 * keeps only its output. Its backward walks the blocks in reverse: rebuilds
 * each block's input from its output, re-runs F and G on a nested sub-graph,
 * back-propagates through it (parameter gradients accumulate into .grad),
 * frees it and moves on. Rebuild and recompute share one pass (RevNet
 * Algorithm 1), so backward costs one extra forward of F and G per block.
 *
 * Honest recompute: while F and G are re-run, recompute mode is on (batch
 * norm does not update running statistics a second time) and the default
 * generator is rewound to the offsets recorded at forward, so dropout draws
 * the same masks; afterwards the generator is restored to where it was. The
 * rebuilt input is checked against a 3-number fingerprint (sum, sum of
 * squares and a ±1 random projection) recorded at forward; a rebuild that is
 * non-finite or drifts beyond `tol` fails backward (RT_ERR_NONFINITE /
 * RT_ERR_RECONSTRUCTION) instead of producing wrong gradients.
 *
 * What `tol` means for gradients: it bounds the rebuilt input's relative
 * drift (the fingerprint metric: |Δsum|, |Δprojection| over ‖x‖ and
 * |Δ‖x‖²| over ‖x‖²). The parameter gradients computed from a rebuilt
 * input move by about the input's error times the sensitivity of F's and
 * G's backward to their input. tests/test_reversible.c measures gradients
 * within 1e-4 (relative) of plain backpropagation on shallow conv / batch
 * norm / dropout chains (drift ~1e-7), and within 3e-4 on 48-block chains
 * near instability where AUTO keeps the drift below 2e-4. The drift reads
 * projections of the error, not its norm, so a rebuild can pass the default
 * 1e-3 while its error is larger: one such step (drift 3.3e-4) gave
 * gradients 1.1e-3 off. Users who need a hard bound on gradients keep exact
 * inputs (grouping every k). */
#ifndef RT_MEMORY_REVERSIBLE_H
#define RT_MEMORY_REVERSIBLE_H

#include <stdbool.h>

#include "../nn/module.h"

typedef enum rt_coupling { RT_COUPLING_ADDITIVE = 0, RT_COUPLING_AFFINE } rt_coupling;

typedef struct rt_rev_block {
    rt_module base;      /* children "f" and "g" */
    rt_coupling coupling;
    rt_module *f, *g;    /* borrowed: the children */
    /* Where the default generator stood before F and before G in the last
     * training forward, so rt_rev_block_inverse replays dropout's masks. */
    bool has_record;
    uint64_t seed, off_f, off_g;
    /* Halves in the channels-last order when the blocked one would pad them
     * (rt_rev_block_set_channels_last); false: the input's order. */
    bool channels_last;
} rt_rev_block;

/* ReversibleBlock(f, g, coupling) as a new module owning f and g (they are
 * destroyed on failure too). Shapes are checked at forward, with the
 * block's path in the message (RT_ERR_SHAPE). RT_ERR_INVALID_ARG for NULL
 * f or g. Forward runs through ordinary autograd (plain backpropagation
 * keeps every intermediate); put blocks in a ReversibleSequence to save
 * memory. */
rt_status rt_rev_block_create(rt_module *f, rt_module *g, rt_coupling coupling, rt_module **out);
/* (All functions below: RT_ERR_INVALID_ARG, with a message naming the
 * function and the argument, for a NULL pointer argument or a module of
 * the wrong kind; the _of, set and count functions accept NULL.) */
/* The block behind module m, or NULL when m is not a ReversibleBlock. */
rt_rev_block *rt_rev_block_of(rt_module *m);

/* on: an additive block splits a 4-D / 5-D input whose halves the blocked
 * order would pad (rt_layout_pads) into
 * channels-last halves (rt_split_channels_layout, core/layout.h) and joins
 * them back into the plain order, so F and G run on tensors a channels-last
 * convolution reads and writes without reorders: the 8-channel halves of a
 * 16-channel level under AVX-512's 16-channel blocks, which the blocked
 * order would double. Only for F and G whose ops read channels-last
 * (Conv2d/3d, GroupNorm, InstanceNorm, elementwise ops; BatchNorm and
 * pooling refuse it): the partially reversible U-Nets set it with group or
 * instance norm. Values are those of the default; only the memory order,
 * the reorders and the bytes they held change (prunet3d 128³ step 795 →
 * 731 MiB; prunet3d_brats's 30-channel halves, 2979 → 2467 MiB). Affine
 * blocks and other shapes keep the input's order.
 * RT_ERR_INVALID_ARG when m is not a ReversibleBlock. */
rt_status rt_rev_block_set_channels_last(rt_module *m, bool on);

/* x = block⁻¹(y), computed without autograd and without updating batch-norm
 * running statistics, in the block's train/eval mode. In training mode the
 * generator is rewound to the offsets of the block's last training forward
 * (and restored afterwards), so dropout inside F and G replays the masks
 * that forward drew; without such a forward the masks are fresh draws,
 * which is only right when F and G draw nothing. */
rt_status rt_rev_block_inverse(rt_module *block, rt_tensor *y, rt_tensor **x);
/* Reconstruction check: max |inverse(forward(x)) - x| and max |forward(inverse(x)) - x|
 * (absolute, f32 units; divide by max|x| for a relative error). Runs without
 * autograd or running-statistics updates. */
rt_status rt_rev_block_check(rt_module *block, rt_tensor *x, float *err_inv_fwd, float *err_fwd_inv);
/* Affine blocks: log|det ∂y/∂x| per sample (N) f32 = Σ s; additive blocks: zeros. */
rt_status rt_rev_block_logdet(rt_module *block, rt_tensor *x, rt_tensor **out);

typedef enum rt_grouping {
    RT_GROUPING_FULL = 0, /* keep nothing inside the sequence */
    RT_GROUPING_EVERY,    /* keep the exact input of every k-th block (bounds drift) */
    RT_GROUPING_AUTO,     /* measure drift on the first training step, then keep every k-th */
} rt_grouping;

/* Called by a sequence's backward with its rebuilt input's halves (x1: the
 * first ⌊C/2⌋ channels, x2 the rest, in the order the blocks split into;
 * references handed over: the callee releases them or passes them on). The
 * sequence's gradient is computed by then; retain_graph: the backward keeps
 * the graph for another one (which will call again). See
 * rt_rev_sequence_on_input_rebuilt. */
typedef rt_status (*rt_rev_input_fn)(rt_module *seq, rt_tensor *x1, rt_tensor *x2, bool retain_graph, void *user);

typedef struct rt_rev_sequence {
    rt_module base;       /* children: ReversibleBlock modules, run in order */
    bool reversible;      /* false: plain backpropagation through the same blocks */
    rt_grouping grouping;
    int k;                /* EVERY: group size; AUTO: chosen size once calibrated (0 before) */
    double tol;           /* rebuild tolerance, relative (default 1e-3 when 0) */
    /* diagnostics of the last backward */
    double last_drift;    /* largest fingerprint drift seen, relative */
    double calib_error[2];/* AUTO: [0] worst error of the chains the chosen k rebuilds,
                             [1] the error over the limit that ruled out a larger k (0: none);
                             error = max(fingerprint drift, true relative error), see below */
    /* rt_rev_sequence_defer_output / _give_output / _on_input_rebuilt */
    bool defer_output;
    bool awaiting;        /* a forward deferred its output and no backward has taken it yet */
    rt_tensor *given[2];  /* the output's halves given for the next backward (owned) */
    rt_rev_input_fn on_input;
    void *on_input_user;
} rt_rev_sequence;

/* ReversibleSequence: a new empty sequence (reversible, grouping FULL); add
 * blocks with rt_module_append or rt_module_add_child (any child that is
 * not a ReversibleBlock is refused at forward with RT_ERR_INVALID_ARG).
 *
 * Forward: y = blocks[n-1](...blocks[0](x)). With reversible on, grad mode
 * on and a parameter or x requiring grad, it records one node that saves
 * only y (plus the exact inputs of every k-th block when grouping asks, plus
 * 3 doubles and 2 generator offsets per block). The sequence must outlive
 * that graph. Errors: those of the blocks; RT_ERR_NONFINITE /
 * RT_ERR_RECONSTRUCTION from backward (see the header comment).
 *
 * AUTO grouping calibrates on the first training step: it keeps every
 * block's exact input, takes all gradients from exact inputs, and then
 * rebuilds, without autograd, exactly the chains that a candidate k will
 * rebuild in later steps, measuring each rebuilt input by the drift metric
 * those steps check and by its true relative error ‖x̃ - x‖/‖x‖ against the
 * exact input (the larger of the two). It picks the largest k whose chains
 * stay within tol/8: later steps run on other data and updated weights,
 * where the same chains drift up to ~4× more than on the calibration batch,
 * and the drift metric itself reads a random projection of the error; with
 * tol/2 about 6% of later steps failed their check (48 Linear blocks at
 * spectral norm 0.9, tests/test_reversible.c auto_linear_chain). */
rt_status rt_rev_sequence_create(rt_module **out);
/* The sequence behind module m, or NULL when m is not a ReversibleSequence. */
rt_rev_sequence *rt_rev_sequence_of(rt_module *m);

/* An output recovered instead of saved, for networks where another part of
 * the graph can give it back in backward before this sequence needs it: the
 * partially reversible U-Net adds encoder level l's output to the
 * upsampled path and feeds the sum to decoder level l's sequence, whose
 * backward rebuilds that sum; less the recomputed upsampled path it is the
 * encoder's output again (models/unet.c), so the encoder need not keep it
 * from forward to backward (128 MiB per sample at 128³, level 0).
 *
 * rt_rev_sequence_defer_output(seq, on): while on, the sequence's
 * reversible forward saves no output (and releases any halves still given
 * from an earlier step) and the sequence awaits them; its backward takes
 * the halves rt_rev_sequence_give_output gave since (converted to the
 * memory order its blocks split into, if they came in another), and fails
 * with RT_ERR_STATE, naming the sequence, when none were given or their
 * shape is not the output's halves'. Not while AUTO grouping calibrates
 * (that step saves the output as usual). A backward with retain_graph keeps
 * the given halves for the next one; one that frees the graph ends the wait.
 * One deferred graph at a time: the halves are the module's, so a second
 * deferring forward before the first one's backward replaces them.
 * rt_rev_sequence_give_output(seq, y1, y2): hands over references to the
 * output's halves (y1 the first ⌊C/2⌋ channels), replacing any given
 * before; when the sequence awaits nothing (its last forward saved its
 * output, or made no graph) they are released at once, as nothing would
 * take them.
 * rt_rev_sequence_on_input_rebuilt(seq, fn, user): the graphs of the
 * sequence's later forwards call fn (NULL: none) at the end of each of
 * their backwards with the rebuilt input's halves, before they would be
 * freed (a graph keeps the fn it was made with); an error it returns fails
 * the backward.
 * All three: RT_ERR_INVALID_ARG when seq is not a ReversibleSequence (or y1,
 * y2 NULL); nothing is taken over on error. */
rt_status rt_rev_sequence_defer_output(rt_module *seq, bool on);
rt_status rt_rev_sequence_give_output(rt_module *seq, rt_tensor *y1, rt_tensor *y2);
rt_status rt_rev_sequence_on_input_rebuilt(rt_module *seq, rt_rev_input_fn fn, void *user);

/* Sets every ReversibleSequence under m to reversible (rebuild activations
 * in backward) or plain backpropagation on the same parameters. */
void rt_module_set_reversible(rt_module *m, bool reversible);
/* Sets the grouping of every ReversibleSequence under m (k for EVERY;
 * changing the grouping makes AUTO calibrate again). RT_ERR_INVALID_ARG
 * for EVERY with k < 1. */
rt_status rt_module_set_grouping(rt_module *m, rt_grouping grouping, int k);
/* Number of ReversibleSequence modules under m (0: no reversible parts). */
int rt_module_count_reversible(rt_module *m);

/* Reconstruction check of every ReversibleSequence in a module tree on a
 * batch x (N, C, ...), in eval mode without autograd: for every reversible
 * block, the max relative error of inverse(forward(h)) against its input h
 * (error / max|h|), and for every sequence the error of rebuilding its input
 * from its output through the whole chain of blocks. Returns the worst of
 * each and the path of the worst block (buffer of n bytes). The tree's
 * train/eval mode is restored. RT_ERR_INVALID_ARG when the tree has no
 * reversible sequence. */
rt_status rt_reversible_reconstruction(rt_module *net, rt_tensor *x, double *block_err, double *chain_err,
                                       char *worst_block, size_t n);

#endif
