/* Model state ↔ safetensors files, with PyTorch's state_dict names, so a
 * file saved here loads with `model.load_state_dict(safetensors...)` in
 * PyTorch and vice versa. Parameters and buffers are F32; counters
 * (num_batches_tracked) are 0-d I64, as torch.nn.BatchNorm2d stores them.
 *
 * Saving writes a temporary file and renames it (io/safetensors.h), so an
 * interrupted save never leaves a broken file. Loading is all-or-nothing:
 * every name, shape and dtype is checked before any tensor is changed. */
#ifndef RT_IO_WEIGHTS_H
#define RT_IO_WEIGHTS_H

#include "../nn/state_dict.h"

/* One extra named tensor to store beside the state dict (optimizer state). */
typedef struct rt_named_tensor {
    const char *name;
    rt_tensor *tensor;
} rt_named_tensor;

/* Writes every entry of sd (may be NULL) plus `extra` tensors (n_extra, may
 * be 0) to `path`, with string metadata pairs meta[2i] = key, meta[2i+1] =
 * value (n_meta pairs). Meta-device tensors cannot be saved (RT_ERR_UNSUPPORTED).
 * Errors: RT_ERR_IO, RT_ERR_OOM, RT_ERR_INVALID_ARG (duplicate names; path
 * NULL; extra or meta NULL with a positive count, a negative count, an
 * extra entry with a NULL name or tensor, a NULL metadata string). */
rt_status rt_weights_save(const rt_state_dict *sd, const rt_named_tensor *extra, int n_extra,
                          const char *const *meta, int n_meta, const char *path);

/* Loads `path` into sd (strict, like load_state_dict(strict=True)): every
 * entry of sd must be present with the same shape and dtype — except what
 * PyTorch's loading also accepts: f32 tensors load from F64, F16 and BF16
 * entries (converted), and a missing num_batches_tracked counter loads as 0
 * (BatchNorm's rule for state dicts saved without it) — and the file
 * may hold no other tensor than those named in `extra`, which are loaded too
 * (their tensors must already exist with the right shapes). Errors name the
 * first offending tensor: RT_ERR_FORMAT "missing", "unexpected", shape or
 * dtype mismatch; plus the errors of rt_st_open. Nothing is modified on error.
 * sd may be NULL (only `extra` is loaded). RT_ERR_INVALID_ARG for path NULL,
 * extra NULL with n_extra > 0, a negative n_extra or an extra entry with a
 * NULL name or tensor. */
rt_status rt_weights_load(rt_state_dict *sd, const rt_named_tensor *extra, int n_extra, const char *path);

/* Reads one metadata value of a weight file into buf (NUL-terminated);
 * RT_ERR_FORMAT when the key is absent; RT_ERR_INVALID_ARG when path, key or
 * buf is NULL or n is 0; plus the errors of rt_st_open. */
rt_status rt_weights_read_metadata(const char *path, const char *key, char *buf, size_t n);

#endif
