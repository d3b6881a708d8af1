/* Reversible blocks and sequences: activation memory that does not grow with
 * depth (Gomez et al. 2017, "The Reversible Residual Network", §3; MemCNN,
 * van de Leemput et al. 2019).
 *
 * A block splits its input x (N, C, ...) along channels into x1 (⌊C/2⌋) and
 * x2 (⌈C/2⌉) and computes
 *     additive:  y1 = x1 + F(x2),   y2 = x2 + G(y1)               (RevNet eq. 1)
 *     affine:    y1 = x1 + F(x2),   y2 = x2 ⊙ exp(s) + t, (s,t) = G(y1)
 *                with s soft-clamped to [-2, 2] (ops/coupling.h)
 * and is inverted exactly: x2 = y2 - G(y1) (or (y2 - t) ⊙ exp(-s)), then
 * x1 = y1 - F(x2). F and G are arbitrary sub-networks (ReLU, batch norm and
 * dropout inside are fine); they must keep N and the spatial size, with
 * F: ⌈C/2⌉ → ⌊C/2⌋ channels and G: ⌊C/2⌋ → ⌈C/2⌉ (additive) or 2·⌈C/2⌉ (affine).
 *
 * A reversible sequence runs its blocks without recording a graph and keeps
 * only its output. Its backward walks the blocks in reverse: rebuilds each
 * block's input from its output, re-runs F and G on a nested sub-graph,
 * back-propagates through it (parameter gradients accumulate into .grad), frees
 * it and moves on. Rebuild and recompute share one pass (RevNet Algorithm 1),
 * so backward costs one extra forward of F and G per block.
 *
 * Honest recompute: while F and G are re-run, recompute mode is on (batch norm
 * does not update running statistics a second time) and the default
 * generator is rewound to the offsets recorded at forward, so dropout draws
 * the same masks; afterwards the generator is restored to where it was. The
 * rebuilt input is checked against a 3-number fingerprint (sum, sum of
 * squares and a ±1 random projection) recorded at forward; a rebuild that is
 * non-finite or drifts beyond `tol` fails backward (RT_ERR_NONFINITE /
 * RT_ERR_RECONSTRUCTION) instead of producing wrong gradients. */
#ifndef RT_MEMORY_REVERSIBLE_H
#define RT_MEMORY_REVERSIBLE_H

#include <stdbool.h>

#include "core/tensor.h"

/* A sub-network used as F or G: maps x to a new tensor with autograd ops.
 * `training` selects batch statistics/dropout as nn.Module.train(). */
typedef struct rt_subnet {
    rt_status (*forward)(void *self, rt_tensor *x, bool training, rt_tensor **y);
    void *self;
} rt_subnet;

typedef enum rt_coupling { RT_COUPLING_ADDITIVE = 0, RT_COUPLING_AFFINE } rt_coupling;

typedef struct rt_rev_block {
    char name[64];
    rt_coupling coupling;
    rt_subnet f, g;
    int64_t c1, c2;     /* channels of x1 = ⌊C/2⌋ and x2 = ⌈C/2⌉ */
    rt_tensor **params; /* F's and G's parameters (borrowed tensors, owned array) */
    int n_params;
} rt_rev_block;

/* Sets up a block for inputs shaped like `shape` (ndim 3..5, C = shape[1]).
 * F and G are tried once (eval mode, no autograd) on a zero input of batch 1
 * on the parameters' device: a block with C < 2,
 * or whose F/G change N or the spatial size or return the wrong channel
 * count, is refused with RT_ERR_SHAPE naming the block and the shapes.
 * `params` (n_params tensors, borrowed) are F's and G's parameters; they make
 * the sequence's backward reachable even when its input needs no gradient. */
rt_status rt_rev_block_init(rt_rev_block *b, const char *name, rt_coupling coupling, rt_subnet f, rt_subnet g,
                            rt_tensor *const *params, int n_params, int ndim, const int64_t *shape);
/* Frees the block's own memory (not F, G or the parameters). */
void rt_rev_block_destroy(rt_rev_block *b);

/* y = block(x) through autograd ops (plain backpropagation keeps every
 * intermediate). x (N, C, ...) → y of the same shape. */
rt_status rt_rev_block_forward(rt_rev_block *b, rt_tensor *x, bool training, rt_tensor **y);
/* x = block⁻¹(y), computed without autograd and without updating batch-norm
 * running statistics. */
rt_status rt_rev_block_inverse(rt_rev_block *b, rt_tensor *y, bool training, rt_tensor **x);
/* Reconstruction check: max |inverse(forward(x)) - x| and max |forward(inverse(x)) - x|
 * (absolute, f32 units; divide by max|x| for a relative error). Runs without
 * autograd or running-statistics updates. */
rt_status rt_rev_block_check(rt_rev_block *b, rt_tensor *x, bool training, float *err_inv_fwd, float *err_fwd_inv);
/* Affine blocks: log|det ∂y/∂x| per sample (N) f32 = Σ s; additive blocks: zeros. */
rt_status rt_rev_block_logdet(rt_rev_block *b, rt_tensor *x, bool training, rt_tensor **out);

typedef enum rt_grouping {
    RT_GROUPING_FULL = 0, /* keep nothing inside the sequence */
    RT_GROUPING_EVERY,    /* keep the exact input of every k-th block (bounds drift) */
    RT_GROUPING_AUTO,     /* measure drift on the first training step, then keep every k-th */
} rt_grouping;

typedef struct rt_rev_sequence {
    rt_rev_block *blocks; /* borrowed, n blocks */
    int n;
    bool reversible;      /* false: plain backpropagation through the same blocks */
    rt_grouping grouping;
    int k;                /* EVERY: group size; AUTO: chosen size once calibrated (0 before) */
    double tol;           /* rebuild tolerance, relative (default 1e-3 when 0) */
    /* diagnostics of the last backward */
    double last_drift;    /* largest fingerprint drift seen, relative */
    double calib_error[2];/* AUTO: [0] worst relative rebuild error within the chosen k,
                             [1] the first error over tol that limited k (0 when none) */
} rt_rev_sequence;

/* y = blocks[n-1](...blocks[0](x)). With reversible on, grad mode on and a
 * parameter or x requiring grad, records one node that saves only y (plus the
 * exact inputs of every k-th block when grouping asks, plus 3 doubles and 2
 * generator offsets per block). The sequence must outlive that graph.
 * Errors: those of the blocks; RT_ERR_NONFINITE / RT_ERR_RECONSTRUCTION from
 * backward (see the header comment). */
rt_status rt_rev_sequence_forward(rt_rev_sequence *s, rt_tensor *x, bool training, rt_tensor **y);

#endif
