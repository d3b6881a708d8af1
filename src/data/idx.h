/* IDX file reader (the MNIST / Fashion-MNIST file format).
 *
 * Source of the format: Y. LeCun, C. Cortes, C. Burges, "THE MNIST DATABASE of
 * handwritten digits", http://yann.lecun.com/exdb/mnist/ ("FILE FORMATS FOR
 * THE MNIST DATABASE"). An IDX file is
 *
 *     byte 0, 1   0x00 0x00                       magic, always zero
 *     byte 2      element type                    see rt_idx_type
 *     byte 3      ndim                            number of dimensions (we accept 1..8)
 *     ndim x u32  dims, big-endian                outermost first (e.g. 60000, 28, 28)
 *     data        prod(dims) elements, row-major (C order, last index fastest),
 *                 multi-byte elements big-endian
 *
 * and nothing after the data. Fashion-MNIST (Xiao, Rasul, Vollgraf 2017) uses
 * the same format: images are u8 N x 28 x 28 (pixel intensity 0..255, 0 =
 * background), labels are u8 N (class index 0..9).
 *
 * Files may be stored gzip-compressed: a path ending in ".gz" is decompressed
 * on the fly with zlib (a plain, uncompressed file named *.gz is read as is).
 * A path NOT ending in ".gz" whose content is gzip data is rejected with a
 * message telling the user to rename or gunzip it, so a half-extracted dataset
 * never reads as garbage.
 *
 * Thread safety: rt_idx_read only touches the calling thread's error message
 * and memory tracker; distinct rt_idx objects may be used from any thread. */
#ifndef RT_DATA_IDX_H
#define RT_DATA_IDX_H

#include <stddef.h>
#include <stdint.h>

#include "../core/status.h"

/* The type byte (byte 2 of the file). Values are the ones defined by the IDX
 * format; 0x0A and 0x0F.. are not types. */
typedef enum rt_idx_type {
    RT_IDX_U8 = 0x08,  /* unsigned char, 1 byte  -> uint8_t */
    RT_IDX_I8 = 0x09,  /* signed char,   1 byte  -> int8_t  */
    RT_IDX_I16 = 0x0B, /* short,         2 bytes -> int16_t */
    RT_IDX_I32 = 0x0C, /* int,           4 bytes -> int32_t */
    RT_IDX_F32 = 0x0D, /* float,         4 bytes -> float (IEEE 754 binary32) */
    RT_IDX_F64 = 0x0E, /* double,        8 bytes -> double (IEEE 754 binary64) */
} rt_idx_type;

/* Most dimensions rt_idx_read accepts (the format allows 255; no real dataset
 * uses more than 4). */
#define RT_IDX_MAX_DIMS 8

/* A whole IDX file in memory. All fields are read-only for users.
 * `data` holds `count` elements of C type given by `type`, row-major over
 * dims[0..ndim-1], already converted to host byte order, so e.g. for RT_IDX_F32
 * `((const float *)data)[i]` is element i. */
typedef struct rt_idx {
    rt_idx_type type;               /* element type (the file's type byte) */
    int ndim;                       /* 1..RT_IDX_MAX_DIMS */
    int64_t dims[RT_IDX_MAX_DIMS];  /* dims[0..ndim-1] from the header (dims[0]: the records
                                       read, see rt_idx_read_first); unused entries are 0 */
    int64_t file_records;           /* dims[0] as the header declares it (> dims[0] only after
                                       rt_idx_read_first stopped early) */
    size_t elem_size;               /* bytes per element: 1, 2, 4 or 8 */
    int64_t count;                  /* number of elements = prod(dims) (may be 0) */
    void *data;                     /* count * elem_size bytes, 64-byte aligned, host order */
    size_t nbytes;                  /* count * elem_size; booked as RT_MEM_DATA */
    char *path;                     /* copy of the path it was read from (for messages) */
} rt_idx;

/* Bytes per element of an IDX type (1, 2, 4 or 8), or 0 for a byte that is not
 * an IDX type. */
size_t rt_idx_type_size(int type);

/* Short name of an IDX type: "u8", "i8", "i16", "i32", "f32", "f64", or "?". */
const char *rt_idx_type_str(int type);

/* Reads the IDX file at `path` (gzip-compressed when the path ends in ".gz")
 * into a new rt_idx.
 *
 * On success *out owns the result: free it with rt_idx_destroy. Its data
 * buffer (nbytes) comes from the tracked allocator under RT_MEM_DATA, so it
 * shows in rt_memstats until destroyed; the small struct and path copy are
 * plain heap and not booked.
 * On failure *out is NULL, nothing stays allocated (never a half-filled
 * dataset), and rt_error_last() names the file, the problem and the fix.
 *
 * Errors:
 *   RT_ERR_INVALID_ARG  path or out is NULL
 *   RT_ERR_IO           the file cannot be opened or read (message has strerror)
 *   RT_ERR_FORMAT       gzip content behind a path without ".gz"; corrupt gzip
 *                       data; first two bytes not 0x00 0x00; unknown type byte;
 *                       ndim 0 or > RT_IDX_MAX_DIMS; file ends inside the header
 *                       (expected vs. got header bytes); file shorter than the
 *                       header claims (expected vs. actual data bytes); extra
 *                       bytes after the data (how many); dims whose byte size
 *                       overflows
 *   RT_ERR_OOM          the data buffer cannot be allocated (tracked limit or
 *                       malloc); the message gives the dims the header claims */
rt_status rt_idx_read(const char *path, rt_idx **out);

/* As rt_idx_read, but reads only the first min(max_records, dims[0])
 * records (slices along dims[0]): the result has dims[0] = that count and
 * file_records = the header's dims[0]. A gzip file is decompressed only up to
 * the end of those records, so taking 1000 of 60000 images costs 1/60 of the
 * work and memory. A plain file's length is still checked against the
 * header; damage in a gzip file after the records read goes unnoticed.
 * max_records may be 0 (header only). max_records >= dims[0] reads and checks
 * the whole file, exactly as rt_idx_read.
 * Errors: as rt_idx_read; RT_ERR_INVALID_ARG when max_records < 0. */
rt_status rt_idx_read_first(const char *path, int64_t max_records, rt_idx **out);

/* Frees an rt_idx and its data (unbooking RT_MEM_DATA). NULL is a no-op. */
void rt_idx_destroy(rt_idx *idx);

/* Checks that `labels` fits `images` as a classification dataset:
 *   - labels is 1-D                                   else RT_ERR_SHAPE
 *   - labels has an integer type (u8, i8, i16, i32)   else RT_ERR_DTYPE
 *   - labels->dims[0] == images->dims[0] and the       else RT_ERR_SHAPE
 *     file_records of both agree                        ("N images but M labels")
 *   - every label is in [0, num_classes)              else RT_ERR_FORMAT naming
 *     the first bad index and its value
 * images may have any type and ndim >= 1 (dims[0] is the sample count).
 * RT_ERR_INVALID_ARG when images or labels is NULL, num_classes < 1, or
 * labels->data is NULL while labels->count > 0.
 * Reads only; no allocation. */
rt_status rt_idx_check_pair(const rt_idx *images, const rt_idx *labels, int num_classes);

#endif
