/* EDSR, the enhanced deep super-resolution network (Lim et al. 2017,
 * "Enhanced Deep Residual Networks for Single Image Super-Resolution",
 * CVPRW, arXiv:1707.02921, §3.1, Fig. 2 and 3), and a reversible EDSR whose
 * residual body is a ReversibleSequence of additive couplings
 * (memory/reversible.h; Gomez et al. 2017).
 *
 * EDSR maps a low-resolution image x (N, in_channels, H, W) f32 to
 * (N, out_channels, scale·H, scale·W):
 *     h = head(x)                     3×3 conv in_channels → F
 *     r = body(h) + h                 B residual blocks, then a 3×3 conv F → F
 *                                     (the global skip)
 *     y = tail(r)                     upsampler, then a 3×3 conv F → out_channels
 * A residual block (no batch norm, the paper's point) is
 *     x + res_scale · conv3×3(ReLU(conv3×3(x)))      (Fig. 2c, §3.1: 0.1)
 * and the upsampler is ESPCN's sub-pixel convolution (Shi et al. 2016):
 * ×2: conv F → 4F, PixelShuffle(2); ×4: that twice; ×3: conv F → 9F,
 * PixelShuffle(3). Every conv has a bias, padding 1, PyTorch's default
 * initialisation (U(±1/√fan_in)). EDSR-PyTorch's MeanShift layers
 * (subtracting and adding back the DIV2K RGB mean, frozen) are left out:
 * for 1-channel MRI slices there is no RGB mean; normalise the data
 * instead.
 *
 * Module tree and state-dict paths as EDSR-PyTorch (sanghyun-son/EDSR-PyTorch,
 * src/model/edsr.py and common.py) without sub_mean/add_mean:
 *     head.0.{weight,bias}
 *     body.{i}.body.0.{weight,bias}, body.{i}.body.2.{weight,bias}   i < B
 *     body.{B}.{weight,bias}
 *     tail.0.0.{weight,bias}  (×4: and tail.0.2.*)    tail.1.{weight,bias}
 * so weights move to and from PyTorch unchanged (tools/
 * make_superres_fixtures.py builds the same tree).
 *
 * Trainable parameters, with conv(a, b) = 9ab + b (3×3 kernel and bias),
 * c_in / c_out the channels:
 *     P = conv(c_in, F) + B·2·conv(F, F) + conv(F, F) + U + conv(F, c_out)
 *     U = conv(F, 4F) (×2), 2·conv(F, 4F) (×4), conv(F, 9F) (×3).
 * The paper's baseline, B = 16, F = 64, RGB ×2: 1 369 859 (the "1.37 M"
 * of Table 1 and EDSR-PyTorch); 1-channel ×2: 1 367 553.
 *
 * Reversible EDSR (cfg.reversible): the B residual blocks become one
 * ReversibleSequence of B additive ReversibleBlocks on the F channels split
 * in halves (F/2 each):
 *     y1 = x1 + res_scale·Fb(x2),   y2 = x2 + res_scale·Gb(y1),
 * Fb and Gb each conv3×3 (F/2 → hidden), ReLU, conv3×3 (hidden → F/2), then
 * the scaling. hidden = cfg.rev_hidden, default F (0): a block then has
 * 2·(conv(F/2, F) + conv(F, F/2)) = 18F² + 3F parameters against a residual
 * block's 18F² + 2F, so the two bodies have (almost) the same parameter
 * count and depth in convolutions is 4 per block against 2 — the choice
 * that keeps capacity comparable; with hidden = F/2 a block has
 * 9F² + 2F, half a residual block's. Paths: body.{i}.f.{0,2}.*,
 * body.{i}.g.{0,2}.* (the sequence sits inline in body), then body.{B}.*
 * and head, tail as EDSR. The baseline's count, 1 channel ×2, hidden F:
 * 1 368 577; hidden F/2: 777 729. Its activations: the sequence keeps only
 * its output, so the body's memory does not grow with B
 * (tests/test_superres.c edsr_memory_meta measures both on meta).
 *
 * A wider stream (cfg.rev_width W = k·F, k = 2..4; RevNet's recipe of
 * widening the reversible stream to match a residual net's capacity, Gomez
 * et al. 2017, §5): the body starts with k copies of the head's output
 * concatenated along channels (x1 = x2 = h for k = 2, parameter-free,
 * "RepeatChannels"), its couplings split W in halves W/2, and its last
 * convolution maps W → F, so the global skip and the tail are EDSR's. With
 * W = 2F, hidden F and B/2 blocks, each of Fb and Gb is one of EDSR's
 * residual bodies (F → F → F): the parameter count is EDSR's plus the wider
 * last conv (1 ch ×2, B 8 for EDSR's 16: 1 404 417), the stream holds 2F
 * channels. Parameters above with conv(F/2, h) → conv(W/2, h) and the body's
 * last conv(F, F) → conv(W, F).
 * rt_module_set_reversible(net, false) trains the same parameters with
 * plain backpropagation (the gradients are equal; tested). */
#ifndef RT_MODELS_EDSR_H
#define RT_MODELS_EDSR_H

#include <stdbool.h>
#include <stdint.h>

#include "../nn/module.h"

typedef struct rt_edsr_config {
    int64_t in_channels, out_channels; /* 1 and 1 for MRI, 3 and 3 for RGB */
    int n_resblocks;                   /* B: 16 in the baseline, 32 in EDSR's large model */
    int64_t n_feats;                   /* F: 64 (baseline), 256 (large); even when reversible */
    float res_scale;                   /* 0.1 (the paper uses 0.1 for the large model) */
    int scale;                         /* 2, 3 or 4 */
    bool reversible;                   /* the body as a ReversibleSequence (see above) */
    int64_t rev_hidden;                /* reversible: width inside Fb and Gb; 0 = n_feats */
    int64_t rev_width;                 /* reversible: stream width W, a multiple of F; 0 = n_feats */
} rt_edsr_config;

/* The widest reversible stream: W ≤ RT_EDSR_MAX_WIDTH_FACTOR · F. */
#define RT_EDSR_MAX_WIDTH_FACTOR 4
#define RT_EDSR_MAX_WIDTH_FACTOR_STR "4"

/* The reversible stream's width W of cfg: cfg->rev_width, or n_feats when
 * it is 0; -1 (message set, RT_ERR_INVALID_ARG) for a NULL cfg. */
int64_t rt_edsr_rev_width(const rt_edsr_config *cfg);

/* The configuration named `name`:
 *   "edsr"      baseline B 16, F 64, res_scale 0.1, ×2, 1 channel in and out
 *   "edsr_rev"  the same, reversible, hidden width F
 * RT_ERR_INVALID_ARG for an unknown name or NULL name or cfg. Change the
 * fields afterwards for other sizes. */
rt_status rt_edsr_config_get(const char *name, rt_edsr_config *cfg);

/* Builds EDSR (or the reversible EDSR) as a module tree (see above),
 * parameters on ctx->device drawn from ctx's stream, in training mode.
 * Errors: RT_ERR_INVALID_ARG for a NULL argument, channels, B or F < 1, an
 * odd F or rev_hidden < 0 when reversible, res_scale not finite, or a scale
 * other than 2, 3, 4 (the message names the field); RT_ERR_OOM. *out is
 * NULL on error. */
rt_status rt_edsr_build(const rt_edsr_config *cfg, rt_init_ctx *ctx, rt_module **out);

/* The formula above: the number of trainable parameters rt_edsr_build
 * creates for cfg; -1 (message set, RT_ERR_INVALID_ARG) for a NULL or
 * invalid cfg. */
int64_t rt_edsr_num_params(const rt_edsr_config *cfg);

#endif
