/* What the files of `revtorch superres` share (cli/superres.c: options and
 * dispatch; superres_model.c, superres_data.c, superres_files.c,
 * superres_evaluate.c: the pieces; superres_train.c, superres_eval.c,
 * superres_memory.c: the subcommands). CLI-only; not installed.
 *
 * Exit-code convention of the int functions below: -1 means "done, go on";
 * any other value is the exit status to return (1 runtime failure, 2 usage
 * error), its reason already printed to stderr. */
#ifndef CLI_SUPERRES_INTERNAL_H
#define CLI_SUPERRES_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "core/mem.h"
#include "core/status.h"
#include "core/tensor.h"
#include "data/superres.h"
#include "models/edsr.h"
#include "models/model.h"
#include "optim/optimizer.h"

#define SR_DEFAULT_IMAGE "/usr/share/mricron/templates/ch2better.nii.gz"
#define SR_MAX_EVAL 64 /* most held-out slices evaluated (--eval-slices) */

/* The options of every subcommand (sr_parse fills them in, superres.c). */
typedef struct cli_sr_opts {
    const char *cmd; /* "train", "eval", "memory" */
    const char *image, *model, *out, *weights;
    int64_t blocks, feats, scale, batch, patch, steps, seed, threads, eval_slices, gap, ref_batch, max_batch;
    int64_t rev_width, rev_hidden; /* revedsr: stream width and width inside F and G (0: feats) */
    int64_t rev_blocks;            /* memory: revedsr's couplings (0: --blocks) */
    float res_scale, lr, holdout, percentile, min_foreground, time_limit;
    bool cosine; /* --lr-schedule cosine: CosineAnnealingLR(t_max = steps) to 0 */
    const char *memory; /* --memory: reversible (default) or standard backpropagation through revedsr's body */
    bool model_given, blocks_given, feats_given, scale_given, res_scale_given; /* eval checks them */
    bool rev_width_given, rev_hidden_given, rev_blocks_given;
} cli_sr_opts;

/* The reversible stream's width and the width inside F and G that the
 * options give (their defaults resolved to --feats). */
static inline int64_t cli_sr_rev_width(const cli_sr_opts *o) { return o->rev_width ? o->rev_width : o->feats; }
static inline int64_t cli_sr_rev_hidden(const cli_sr_opts *o) { return o->rev_hidden ? o->rev_hidden : o->feats; }
/* rt_edsr_build's rule for a stream width given explicitly: feats times 1..RT_EDSR_MAX_WIDTH_FACTOR. */
static inline bool cli_sr_rev_width_valid(int64_t feats, int64_t w) {
    return w % feats == 0 && w <= RT_EDSR_MAX_WIDTH_FACTOR * feats;
}

/* "revedsr, 8 blocks x 64 features, stream 128, F/G hidden 64, res_scale
 * 0.1, x2": the model the options describe, for train's header, eval's
 * report and its disagreement message (superres_model.c). */
void cli_sr_describe(const cli_sr_opts *o, char *buf, size_t n);

/* The volume, normalised, and its split. */
typedef struct cli_sr_data {
    rt_tensor *volume;
    double q; /* the robust maximum */
    rt_sr_split split;
    int64_t ks[SR_MAX_EVAL], n_eval;
} cli_sr_data;

/* ------------------------------------------------------------ superres_model.c */

/* The model of the options as an rt_model named edsr or revedsr (EDSR's
 * state-dict paths, models/edsr.h), parameters on `device`, initialised from
 * Philox stream `seed`; *out owned by the caller (rt_model_destroy). */
rt_status cli_sr_model_create(const cli_sr_opts *o, rt_device device, uint64_t seed, rt_model **out);

/* The L1 loss of EDSR's training (rt_loss_fn). */
rt_status cli_sr_l1(rt_tensor *output, rt_tensor *target, void *user, rt_tensor **loss);

/* Adam at learning rate lr (AdamW without weight decay) into *spec. */
void cli_sr_adam(float lr, rt_optimizer_spec *spec);

/* Predicted peaks of one steady-state step of the options' model at `batch`
 * (meta device: nothing runs). */
rt_status cli_sr_predict(const cli_sr_opts *o, int64_t batch, rt_memstats *p);

/* ------------------------------------------------------------ superres_data.c */

/* Reads --image (refusing a volume that is not 3-D before reading its data),
 * normalises it, splits its axial slices and picks the evaluation slices
 * into *d (d->volume owned by the caller). Exit-code convention above. */
int cli_sr_load(const cli_sr_opts *o, cli_sr_data *d);

/* ------------------------------------------------------------ superres_files.c */

/* Creates --out and its missing parents (mkdir -p) unless it exists as a
 * directory. *created (optional) receives how many path levels were made, for
 * cli_sr_unmake_out. Exit-code convention above. */
int cli_sr_make_out(const cli_sr_opts *o, int *created);

/* Removes the `created` innermost levels of --out that cli_sr_make_out made,
 * if still empty (rmdir fails on a non-empty directory). */
void cli_sr_unmake_out(const cli_sr_opts *o, int created);

/* OUT/name into buf (n bytes). */
void cli_sr_out_path(const cli_sr_opts *o, const char *name, char *buf, size_t n);

/* ------------------------------------------------------------ superres_evaluate.c */

/* PSNR/SSIM of bicubic and the model on every evaluation slice of d, printed
 * and written to OUT/eval.csv, OUT/eval.json and OUT/comparison.png (the
 * middle slice); label (may be NULL) ends the picture's title, train_s goes
 * into eval.json. Returns the exit status (0 or 1). */
int cli_sr_evaluate(const cli_sr_opts *o, rt_model *m, const cli_sr_data *d, const char *label, double train_s);

/* ------------------------------------------------------------ the subcommands: exit status */

int cli_sr_train(const cli_sr_opts *o);  /* superres_train.c */
int cli_sr_eval(const cli_sr_opts *o);   /* superres_eval.c */
int cli_sr_memory(const cli_sr_opts *o); /* superres_memory.c */

#endif
