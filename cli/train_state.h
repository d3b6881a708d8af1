/* The training state that `revtorch train --save` writes and `--resume` reads
 * (not gradient checkpointing, memory/): PATH holds the model's state dict
 * (safetensors, PyTorch names; loads into PyTorch unchanged) and PATH with
 * ".optim" before ".safetensors" holds the optimizer state, with metadata
 * model, epoch (completed epochs), optimizer_steps and optimizer. Both are
 * written to a temporary file and renamed, optimizer first. */
#ifndef CLI_TRAIN_STATE_H
#define CLI_TRAIN_STATE_H

#include <stdint.h>

#include "models/model.h"
#include "train/scaler.h"
#include "optim/optim.h"

/* "run.safetensors" → "run.optim.safetensors"; other names get
 * ".optim.safetensors" appended: where the optimizer state of `weights` goes. */
void cli_train_state_optim_path(const char *weights, char *buf, size_t n);

/* Saves m and opt after `epoch` completed epochs, the weights to `path`
 * and the optimizer state to `opath` (normally cli_train_state_optim_path
 * of the name the user gave, resolved to the file it names); `optimizer` is the
 * optimizer's CLI name ("sgd", "adamw"); `run_options` the options a resume
 * must repeat, as "name=value" words separated by spaces (name: the CLI
 * option without "--", "-" written "_"), stored as metadata
 * "run_options". A loss scaler (NULL: none) stores its state (GradScaler's
 * scale and growth tracker, and the steps it skipped) as metadata of the
 * optimizer file, which a resume with a scaler restores (a checkpoint
 * without it starts the scaler afresh, with a warning). Errors: RT_ERR_IO,
 * RT_ERR_OOM. */
rt_status cli_train_state_save(const char *path, const char *opath, const char *optimizer, const char *run_options,
                               rt_model *m, rt_optimizer *opt, const rt_grad_scaler *scaler, int64_t epoch);
/* Loads a checkpoint saved for the same model, optimizer and run options
 * into m and opt and returns the completed epochs. Errors: RT_ERR_FORMAT
 * naming the mismatch (model, optimizer, a tensor, files from different
 * epochs), RT_ERR_INVALID_ARG listing every run option whose value differs
 * (checkpoints without "run_options" skip that check), RT_ERR_IO. Nothing is
 * loaded when a check fails. */
rt_status cli_train_state_load(const char *path, const char *optimizer, const char *run_options, rt_model *m,
                             rt_optimizer *opt, rt_grad_scaler *scaler, int64_t *epoch);

#endif
