/* Checkpoints of `revtorch train`: PATH holds the model's state dict
 * (safetensors, PyTorch names; loads into PyTorch unchanged) and PATH with
 * ".optim" before ".safetensors" holds the optimizer state, with metadata
 * model, epoch (completed epochs), optimizer_steps and optimizer. Both are
 * written to a temporary file and renamed, optimizer first. */
#ifndef RT_CLI_CHECKPOINT_H
#define RT_CLI_CHECKPOINT_H

#include <stdint.h>

#include "models/model.h"
#include "optim/optim.h"

/* Saves m and opt after `epoch` completed epochs; `optimizer` is the
 * optimizer's CLI name ("sgd", "adamw"). Errors: RT_ERR_IO, RT_ERR_OOM. */
rt_status rt_checkpoint_save(const char *path, const char *optimizer, rt_model *m, rt_optimizer *opt,
                             int64_t epoch);
/* Loads a checkpoint saved for the same model and optimizer into m and opt
 * and returns the completed epochs. Errors: RT_ERR_FORMAT naming the
 * mismatch (model, optimizer, a tensor), RT_ERR_IO. */
rt_status rt_checkpoint_load(const char *path, const char *optimizer, rt_model *m, rt_optimizer *opt,
                             int64_t *epoch);

#endif
