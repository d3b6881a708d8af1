/* safetensors read/write: the weight-file format of Hugging Face's
 * `safetensors` library (https://github.com/huggingface/safetensors, format
 * described in its README), which PyTorch users load with
 * `safetensors.torch.load_file` / write with `save_file`.
 *
 * File layout (all integers little-endian):
 *   8 bytes      u64 N, the header length in bytes
 *   N bytes      UTF-8 JSON object, optionally padded at the end with spaces:
 *                  {"<name>": {"dtype": "F32", "shape": [2, 3],
 *                              "data_offsets": [begin, end]}, ...,
 *                   "__metadata__": {"<key>": "<value>", ...}}   (optional)
 *   the rest     the byte buffer; data_offsets are byte offsets relative to
 *                its start, tensors are C-contiguous (row-major), little-endian,
 *                and together they tile the buffer exactly (no holes, no overlap).
 *
 * This is the raw level: names, dtype strings, shapes and byte ranges, no
 * tensor type. A higher layer maps model state (parameters, buffers) onto it.
 * JSON is parsed and written with jansson.
 *
 * Dtype strings (element size in bytes): BOOL 1, U8 1, I8 1, F8_E4M3 1,
 * F8_E5M2 1, I16 2, U16 2, F16 2, BF16 2, I32 4, U32 4, F32 4, F64 8, I64 8,
 * U64 8. Sub-byte and complex dtypes of newer format revisions are not
 * supported (rejected as unknown).
 *
 * Errors follow core/status.h: a failing call returns a status and leaves a
 * message (rt_error_last) naming the file, the tensor and the fix. */
#ifndef RT_IO_SAFETENSORS_H
#define RT_IO_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "../core/status.h"

/* Most dimensions an entry may have (files with more are rejected). */
#define RT_ST_MAX_DIMS 8

/* Largest header accepted on open, in bytes (the reference implementation's limit). */
#define RT_ST_MAX_HEADER ((uint64_t)100 * 1000 * 1000)

/* One tensor of an open file. Borrowed from the rt_st_file: every pointer
 * (name, data) stays valid until rt_st_close.
 *   name    UTF-8, NUL-terminated
 *   dtype   one of the dtype strings above, NUL-terminated
 *   ndim    0..RT_ST_MAX_DIMS (0 = scalar, shape [])
 *   shape   ndim sizes, each >= 0; entries past ndim are 0
 *   data    nbytes raw little-endian bytes, C-contiguous. The buffer is
 *           64-byte aligned, so data is aligned to its element size exactly
 *           when the file's data_offsets are (files written by rt_st_writer
 *           with a large-element-first order, or by Python's safetensors,
 *           are). Use memcpy when unsure.
 *   nbytes  bytes, = prod(shape) * rt_st_dtype_size(dtype) (checked on open) */
typedef struct rt_st_entry {
    const char *name;
    char dtype[8];
    int ndim;
    int64_t shape[RT_ST_MAX_DIMS];
    const void *data;
    size_t nbytes;
} rt_st_entry;

/* An opened safetensors file, held entirely in memory. */
typedef struct rt_st_file rt_st_file;

/* Reads the whole file at `path` into memory and validates it completely:
 * header length (>= 8-byte file, header within the file, <= RT_ST_MAX_HEADER),
 * JSON syntax (jansson's message and position are quoted; duplicate keys are
 * rejected), header is an object, each entry has dtype (known string), shape
 * (array of integers >= 0, at most RT_ST_MAX_DIMS) and data_offsets (two
 * integers, begin <= end <= buffer size), byte count = prod(shape) * dtype
 * size, the entries tile the buffer exactly, and "__metadata__" (if present)
 * maps strings to strings.
 * On success *out owns the file (free with rt_st_close).
 * Errors: RT_ERR_INVALID_ARG (NULL argument), RT_ERR_IO (cannot open/read,
 * message has strerror), RT_ERR_FORMAT (any validation failure above),
 * RT_ERR_OOM (malloc failed). On failure *out is set to NULL. */
rt_status rt_st_open(const char *path, rt_st_file **out);

/* Number of tensors in the file (the "__metadata__" key is not counted); 0
 * for NULL. */
size_t rt_st_count(const rt_st_file *f);

/* The i-th tensor in file order (increasing data offset; zero-byte tensors
 * sharing an offset are ordered by name), or NULL when i >= rt_st_count(f).
 * Borrowed; valid until rt_st_close(f). NULL + RT_ERR_INVALID_ARG message
 * for a NULL f. */
const rt_st_entry *rt_st_entry_at(const rt_st_file *f, size_t i);

/* The tensor called `name` (exact byte match), or NULL if absent.
 * O(log n). Borrowed; valid until rt_st_close(f). NULL + RT_ERR_INVALID_ARG
 * message when f or name is NULL. */
const rt_st_entry *rt_st_find(const rt_st_file *f, const char *name);

/* The "__metadata__" value for `key`, or NULL when the file has no metadata
 * or no such key. Borrowed UTF-8 string; valid until rt_st_close(f). NULL +
 * RT_ERR_INVALID_ARG message when f or key is NULL. */
const char *rt_st_metadata(const rt_st_file *f, const char *key);

/* Frees the file and everything borrowed from it. NULL is a no-op. */
void rt_st_close(rt_st_file *f);

/* Element size in bytes of a safetensors dtype string ("F32" -> 4), or 0 if
 * `dtype` is NULL or not one of the dtypes listed at the top of this file. */
size_t rt_st_dtype_size(const char *dtype);

/* Builds a safetensors file: add tensors, optionally set metadata, save. */
typedef struct rt_st_writer rt_st_writer;

/* A new empty writer, or NULL (RT_ERR_OOM message set) if malloc failed.
 * Free with rt_st_writer_destroy. */
rt_st_writer *rt_st_writer_create(void);

/* Appends a tensor. Tensors are laid out in the buffer in the order added
 * (add larger dtypes first to keep every tensor aligned to its element size).
 *   name    UTF-8, copied; must be unique in the writer and not "__metadata__"
 *   dtype   a dtype string listed above
 *   ndim    0..RT_ST_MAX_DIMS; shape holds ndim sizes >= 0 (may be NULL if ndim 0)
 *   data    nbytes bytes, little-endian, C-contiguous. NOT copied: the
 *           pointer is borrowed and must stay valid until rt_st_writer_save
 *           returns. May be NULL when nbytes is 0.
 *   nbytes  bytes; must equal prod(shape) * rt_st_dtype_size(dtype)
 * Errors: RT_ERR_INVALID_ARG (NULL writer/name, bad ndim, negative size,
 * nbytes mismatch, duplicate or reserved or non-UTF-8 name, size overflow),
 * RT_ERR_DTYPE (unknown dtype), RT_ERR_OOM. A failed add leaves the writer
 * unchanged. */
rt_status rt_st_writer_add(rt_st_writer *w, const char *name, const char *dtype, int ndim,
                           const int64_t *shape, const void *data, size_t nbytes);

/* Sets "__metadata__"[key] = value (both UTF-8, copied; an existing key is
 * replaced). Metadata is written only when at least one key is set.
 * Errors: RT_ERR_INVALID_ARG (NULL argument, invalid UTF-8), RT_ERR_OOM. */
rt_status rt_st_writer_set_metadata(rt_st_writer *w, const char *key, const char *value);

/* Writes the file to `path` atomically: the bytes go to "PATH.tmp.<pid>",
 * which is flushed and fsync'ed and then renamed over PATH (the directory is
 * fsync'ed too, best effort). An interrupted or failed save therefore never
 * leaves a partial PATH: either the old file or the complete new one. On
 * failure the temp file is removed. The header JSON is compact (like
 * Python's safetensors) and padded with spaces to a multiple of 8 bytes.
 * Two concurrent saves to the same PATH from one process are not supported.
 * Errors: RT_ERR_INVALID_ARG (NULL argument), RT_ERR_IO (create, write,
 * fsync or rename failed; message has strerror), RT_ERR_OOM. */
rt_status rt_st_writer_save(const rt_st_writer *w, const char *path);

/* Frees the writer (not the tensors' data, which it never owned). NULL ok. */
void rt_st_writer_destroy(rt_st_writer *w);

#endif
