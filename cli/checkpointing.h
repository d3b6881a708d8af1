/* The checkpointing options shared by `revtorch train` and `revtorch
 * memory`: --memory-mode, --memory-budget, --checkpoint-segments,
 * --recompute selective (memory/budget.h does the planning). */
#ifndef CLI_CHECKPOINTING_H
#define CLI_CHECKPOINTING_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "common.h"
#include "memory/budget.h"
#include "outputs.h"

typedef struct cli_ckpt_args {
    const char *mode, *budget, *recompute; /* as given, NULL when absent */
    int64_t segments;                      /* 0: absent */
} cli_ckpt_args;

/* Help lines for the four options, indented as the commands' help. */
void cli_ckpt_help(FILE *f);

/* When argv[*i] is one of the four options: parses its value into *a
 * (advancing *i), sets *ok (false: message printed) and returns true. */
bool cli_ckpt_option(int argc, char **argv, int *i, cli_ckpt_args *a, bool *ok);

/* True when any of the four was given. */
bool cli_ckpt_given(const cli_ckpt_args *a);

/* False, with a message naming `cmd`, when --memory was given (memory_given)
 * beside any of the four: under them the planner decides per stage whether
 * a reversible stage rebuilds, which --memory would otherwise claim to. */
bool cli_ckpt_memory_ok(const char *cmd, const cli_ckpt_args *a, bool memory_given);

/* Parses a size given to `option` of command `cmd`: a positive number and a
 * unit, B, KiB/K, MiB/M, GiB/G, TiB/T (powers of 1024) or kB/KB, MB, GB, TB
 * (powers of 1000): "1.5GiB", "600M". A bare number, another unit, a value
 * below 1 byte or above 2^62 prints an error that lists the units and
 * returns false. */
bool cli_parse_size(const char *cmd, const char *option, const char *s, int64_t *bytes);

/* Checks the combination and fills *mc (message naming `cmd` and returns
 * false on a bad value or combination). */
bool cli_ckpt_config(const char *cmd, const cli_ckpt_args *a, rt_memory_config *mc);

/* Plans zoo model `model` (as created with in_channels, num_classes,
 * strategy applied) for *mc on a meta copy at batch (n, c, h, w) with the
 * optimizer and step config the run uses. *out as rt_memory_plan_make. */
rt_status cli_ckpt_plan(const char *model, int64_t in_channels, int64_t num_classes, const cli_strategy *strategy,
                        const rt_optimizer_spec *spec, const rt_train_config *cfg, int64_t n, int64_t h, int64_t w,
                        const rt_memory_config *mc, rt_memory_plan *out);

/* The same for any input shape: x (x_ndim dims xs, e.g. a 3-D batch
 * [N, C, D, H, W]) and i32 targets (y_ndim dims ys, [N, D, H, W] for
 * segmentation). `revtorch segment` plans its patches with it. */
rt_status cli_ckpt_plan_shape(const char *model, int64_t in_channels, int64_t num_classes,
                              const cli_strategy *strategy, const rt_optimizer_spec *spec, const rt_train_config *cfg,
                              int x_ndim, const int64_t *xs, int y_ndim, const int64_t *ys,
                              const rt_memory_config *mc, rt_memory_plan *out);

/* A user's --checkpoint-segments K for zoo model `model` (as created with
 * in_channels, num_classes, strategy applied): true when K <= 0 (not
 * given) or at most the stages checkpoint_sequential cuts between (a
 * U-Net's listed units); else prints a message naming the count and
 * returns false (a usage error, exit 2). The library caps K silently, as
 * its own 2/4/8-segment rows need on any model. */
bool cli_ckpt_segments_ok(const char *cmd, const char *model, int64_t in_channels, int64_t num_classes,
                          const cli_strategy *strategy, int64_t segments);

/* Wraps m->net in a Checkpoint with plan p (m->net becomes the wrapper). */
rt_status cli_ckpt_apply(rt_model *m, const rt_plan *p);

/* The plan's CHECKPOINT segments (runs of consecutive CHECKPOINT stages
 * with one segment number). */
int cli_ckpt_segments(const rt_plan *p);

/* A short description of a plan: "12 store, 4 checkpoint in 2 segments,
 * 3 selective, 1 rebuild". */
void cli_ckpt_describe(const rt_plan *p, char *buf, size_t n);

/* When mc asks for a memory mode whose saving p could not reach, so that
 * p is the least-memory plan (rt_memory_plan_make falls back to it): a
 * line saying so into buf ("conservative saves 40% of the activations
 * where it can; here the least-memory plan saves 26.6%"), and true.
 * Else buf is "" and false. */
bool cli_ckpt_mode_short(const rt_memory_config *mc, const rt_memory_plan *p, char *buf, size_t n);

/* The shapes of one training batch: x (images (N, C, H, W) or volumes
 * (N, C, D, H, W)) and the i32 targets ((N) class indices, or (N, D, H, W)
 * voxel labels). */
typedef struct cli_batch_shape {
    int x_ndim, y_ndim;
    int64_t xs[5], ys[4];
} cli_batch_shape;

/* `revtorch memory`'s strategy rows (plain, selective, 2/4/8 segments, the
 * three modes, the budget's plan when --memory-budget is given) for zoo
 * model `model` on batches of *shape (cfg->loss: the step's loss; the
 * U-Nets train with Dice + cross-entropy): predicted peaks per
 * category, activation and step saving, modelled recompute; with
 * measure_rounds > 0 (≤ 16), that many rounds of real steps add the
 * measured peak and the median step-time overhead; timeline
 * (NULL: none) holds the files of the planned step's allocation timeline,
 * checked and locked (cli/outputs.h): out[0] the CSV, out[1] its .png,
 * out[2] its .combined.png. Returns the exit code. */
int cli_memory_plans(const char *model, int64_t channels, int64_t classes, const cli_strategy *strategy,
                     const rt_optimizer_spec *spec, const rt_train_config *cfg, const cli_batch_shape *shape,
                     const cli_ckpt_args *args, int measure_rounds, const cli_outputs *timeline);

#endif
