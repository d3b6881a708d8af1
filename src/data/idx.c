/* IDX reader; format and contract in idx.h.
 *
 * Reading goes through zlib's gz* API for both compressed and plain files
 * (gzread passes plain data through unchanged; gzdirect tells which it saw).
 * The whole payload (or the first records of it, rt_idx_read_first) is read
 * into one tracked RT_MEM_DATA buffer and then byte-swapped in place to host
 * order. Before allocating, the claimed size is
 * checked against the file size (exactly for plain files, against deflate's
 * maximum ratio for gzip) so a corrupt header cannot make us allocate
 * terabytes; a file that is short or long is rejected whole. */
#include "data/idx.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "core/mem.h"

/* Deflate cannot expand more than ~1032:1 (zlib FAQ/zlib tech details); with
 * slack this bounds the decompressed size of a gzip file from its length. */
#define RT_IDX_MAX_GZIP_RATIO 1100u
#define RT_IDX_CHUNK (1u << 30) /* largest single gzread request */

static const char rt_idx_valid_types[] =
    "0x08 u8, 0x09 i8, 0x0B i16, 0x0C i32, 0x0D f32, 0x0E f64";

size_t rt_idx_type_size(int type) {
    switch (type) {
    case RT_IDX_U8: case RT_IDX_I8: return 1;
    case RT_IDX_I16: return 2;
    case RT_IDX_I32: case RT_IDX_F32: return 4;
    case RT_IDX_F64: return 8;
    default: return 0;
    }
}

const char *rt_idx_type_str(int type) {
    switch (type) {
    case RT_IDX_U8: return "u8";
    case RT_IDX_I8: return "i8";
    case RT_IDX_I16: return "i16";
    case RT_IDX_I32: return "i32";
    case RT_IDX_F32: return "f32";
    case RT_IDX_F64: return "f64";
    default: return "?";
    }
}

static int rt_idx_path_is_gz(const char *path) {
    size_t n = strlen(path);
    if (n < 3) return 0;
    const char *e = path + n - 3;
    return e[0] == '.' && (e[1] == 'g' || e[1] == 'G') && (e[2] == 'z' || e[2] == 'Z');
}

typedef struct rt_idx_reader {
    gzFile gz;
    const char *path;
    int compressed; /* 1 when zlib is inflating, 0 when reading plain bytes */
} rt_idx_reader;

/* Turns a failed gzread into a status with a message. */
static rt_status rt_idx_read_error(const rt_idx_reader *r) {
    int zerr = Z_OK;
    const char *msg = gzerror(r->gz, &zerr);
    if (zerr == Z_ERRNO)
        return rt_error_set(RT_ERR_IO, "cannot read IDX file %s: %s; check that the file is readable",
                            r->path, strerror(errno));
    if (zerr == Z_MEM_ERROR)
        return rt_error_set(RT_ERR_OOM, "out of memory while decompressing IDX file %s", r->path);
    return rt_error_set(RT_ERR_FORMAT,
                        "IDX file %s: corrupt gzip data (zlib: %s); re-download the file or "
                        "check it with 'gzip -t'",
                        r->path, msg ? msg : "unknown error");
}

/* Reads up to n bytes; *got is how many arrived (< n only at end of input).
 * Fails only on a read or decompression error. */
static rt_status rt_idx_read_bytes(rt_idx_reader *r, void *buf, size_t n, size_t *got) {
    unsigned char *p = buf;
    *got = 0;
    while (n > 0) {
        unsigned chunk = n > RT_IDX_CHUNK ? RT_IDX_CHUNK : (unsigned)n;
        int k = gzread(r->gz, p, chunk);
        if (k < 0) return rt_idx_read_error(r);
        *got += (size_t)k;
        p += k;
        n -= (size_t)k;
        if ((unsigned)k < chunk) break;
    }
    return RT_OK;
}

/* Reads and counts everything that is left. */
static rt_status rt_idx_count_rest(rt_idx_reader *r, uint64_t *count) {
    unsigned char scratch[16384];
    *count = 0;
    for (;;) {
        size_t got;
        RT_TRY(rt_idx_read_bytes(r, scratch, sizeof scratch, &got));
        *count += got;
        if (got < sizeof scratch) return RT_OK;
    }
}

/* " (the gzip stream itself ends early)" when zlib saw a truncated stream. */
static const char *rt_idx_truncation_note(const rt_idx_reader *r) {
    int zerr = Z_OK;
    if (!r->compressed) return "";
    gzerror(r->gz, &zerr);
    return zerr == Z_BUF_ERROR ? " (the gzip stream itself ends early)" : "";
}

static void rt_idx_dims_str(const int64_t *dims, int ndim, char *buf, size_t cap) {
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < ndim && used < cap; i++) {
        int k = snprintf(buf + used, cap - used, "%s%lld", i ? "x" : "", (long long)dims[i]);
        if (k < 0) break;
        used += (size_t)k;
    }
}

static rt_status rt_idx_short_error(const rt_idx_reader *r, const char *dims, int type,
                                    size_t expected, uint64_t actual, int header_bytes) {
    return rt_error_set(RT_ERR_FORMAT,
                        "IDX file %s is truncated: its header declares %s %s elements = %zu data "
                        "bytes after the %d-byte header, but only %llu data bytes follow%s; "
                        "the download or extraction was incomplete: fetch the file again",
                        r->path, dims, rt_idx_type_str(type), expected, header_bytes,
                        (unsigned long long)actual, rt_idx_truncation_note(r));
}

static void rt_idx_to_host_order(unsigned char *p, size_t count, size_t esz) {
    const uint16_t one = 1;
    unsigned char first;
    memcpy(&first, &one, 1);
    if (esz == 1 || first == 0) return; /* bytes, or a big-endian host */
    for (size_t i = 0; i < count; i++, p += esz)
        for (size_t a = 0, b = esz - 1; a < b; a++, b--) {
            unsigned char t = p[a];
            p[a] = p[b];
            p[b] = t;
        }
}

/* Parses the header and reads the payload from an open reader: all records,
 * or the first max_records when max_records >= 0. On success fills idx (data,
 * dims, ...); on failure nothing stays allocated. */
static rt_status rt_idx_parse(rt_idx_reader *r, const struct stat *st, int64_t max_records,
                              rt_idx *idx) {
    const char *path = r->path;
    unsigned char head[4 + 4 * RT_IDX_MAX_DIMS];
    size_t got;

    RT_TRY(rt_idx_read_bytes(r, head, 4, &got));
    if (got >= 2 && (head[0] != 0 || head[1] != 0)) {
        if (head[0] == 0x1f && head[1] == 0x8b)
            return rt_error_set(RT_ERR_FORMAT,
                                "IDX file %s is gzip-compressed twice (its decompressed content "
                                "starts with the gzip magic 1f 8b); gunzip it once more",
                                path);
        return rt_error_set(RT_ERR_FORMAT,
                            "%s is not an IDX file: the first two bytes are 0x%02X 0x%02X but the "
                            "IDX magic number starts with 0x00 0x00 (format: "
                            "http://yann.lecun.com/exdb/mnist/); check that you passed the right "
                            "file",
                            path, head[0], head[1]);
    }
    if (got >= 3 && rt_idx_type_size(head[2]) == 0)
        return rt_error_set(RT_ERR_FORMAT,
                            "IDX file %s has unknown element type byte 0x%02X (byte 2 of the "
                            "header); valid types are %s; the file is corrupt or not an IDX file",
                            path, head[2], rt_idx_valid_types);
    if (got >= 4 && (head[3] == 0 || head[3] > RT_IDX_MAX_DIMS))
        return rt_error_set(RT_ERR_FORMAT,
                            "IDX file %s declares %d dimensions (byte 3 of the header); rt_idx "
                            "reads 1 to %d; the file is corrupt or not an IDX file",
                            path, head[3], RT_IDX_MAX_DIMS);
    if (got < 4)
        return rt_error_set(RT_ERR_FORMAT,
                            "IDX file %s ends inside its header: expected at least 4 header "
                            "bytes (magic, type, ndim) but the file%s has only %zu bytes; the "
                            "file is truncated or empty: fetch it again",
                            path, r->compressed ? " (decompressed)" : "", got);

    int type = head[2], ndim = head[3];
    int header_bytes = 4 + 4 * ndim;
    RT_TRY(rt_idx_read_bytes(r, head + 4, (size_t)(4 * ndim), &got));
    if (got < (size_t)(4 * ndim))
        return rt_error_set(RT_ERR_FORMAT,
                            "IDX file %s ends inside its header: expected %d header bytes (4 + 4 "
                            "x %d dims) but got %zu; the file is truncated: fetch it again",
                            path, header_bytes, ndim, 4 + got);

    size_t esz = rt_idx_type_size(type);
    /* record = one slice along dims[0]: the product of dims[1..] elements */
    int64_t record = 1, count = 1;
    int overflow = 0;
    for (int i = 0; i < ndim; i++) {
        const unsigned char *d = head + 4 + 4 * i;
        idx->dims[i] = (int64_t)(((uint32_t)d[0] << 24) | ((uint32_t)d[1] << 16) |
                                 ((uint32_t)d[2] << 8) | (uint32_t)d[3]);
        if (i > 0) {
            if (idx->dims[i] != 0 && record > INT64_MAX / idx->dims[i]) overflow = 1;
            else record *= idx->dims[i];
        }
    }
    if (record != 0 && idx->dims[0] > INT64_MAX / record) overflow = 1;
    else count = idx->dims[0] * record;
    char dims[16 * RT_IDX_MAX_DIMS];
    rt_idx_dims_str(idx->dims, ndim, dims, sizeof dims);
    if (overflow || (uint64_t)count > (uint64_t)(PTRDIFF_MAX / 2) / esz)
        return rt_error_set(RT_ERR_FORMAT,
                            "IDX file %s declares dims %s of %s, more bytes than any memory can "
                            "hold; the header is corrupt: fetch the file again",
                            path, dims, rt_idx_type_str(type));
    size_t nbytes = (size_t)count * esz; /* the whole payload the header declares */
    const int64_t records =
        max_records >= 0 && max_records < idx->dims[0] ? max_records : idx->dims[0];
    const bool whole = records == idx->dims[0];
    const size_t want = (size_t)(records * record) * esz; /* the bytes read */

    /* Refuse impossible sizes before allocating (a plain file's length is
     * known: it must hold the whole payload even when only a prefix is read). */
    if (S_ISREG(st->st_mode)) {
        uint64_t fsize = (uint64_t)st->st_size;
        uint64_t avail = fsize > (uint64_t)header_bytes ? fsize - (uint64_t)header_bytes : 0;
        if (!r->compressed && avail < nbytes)
            return rt_idx_short_error(r, dims, type, nbytes, avail, header_bytes);
        if (!r->compressed && !whole && avail > nbytes)
            return rt_error_set(RT_ERR_FORMAT,
                                "IDX file %s has %llu extra bytes after the %zu data bytes its "
                                "header declares (%s %s); header and data disagree, so the file "
                                "is corrupt or several files were joined: fetch it again",
                                path, (unsigned long long)(avail - nbytes), nbytes, dims,
                                rt_idx_type_str(type));
        if (r->compressed && want / RT_IDX_MAX_GZIP_RATIO > fsize + 4096) {
            uint64_t actual;
            RT_TRY(rt_idx_count_rest(r, &actual));
            return rt_idx_short_error(r, dims, type, nbytes, actual, header_bytes);
        }
    }

    void *data = NULL;
    rt_status s = rt_mem_alloc(want, RT_MEM_DATA, &data);
    if (s != RT_OK) {
        char why[512];
        snprintf(why, sizeof why, "%s", rt_error_last());
        return rt_error_set(s, "cannot hold IDX file %s (dims %s of %s = %zu bytes): %s", path,
                            dims, rt_idx_type_str(type), want, why);
    }
    s = rt_idx_read_bytes(r, data, want, &got);
    if (s == RT_OK && got < want)
        s = rt_idx_short_error(r, dims, type, nbytes, got, header_bytes);
    if (s == RT_OK && whole) {
        uint64_t extra;
        s = rt_idx_count_rest(r, &extra);
        if (s == RT_OK && extra > 0)
            s = rt_error_set(RT_ERR_FORMAT,
                             "IDX file %s has %llu extra bytes after the %zu data bytes its header "
                             "declares (%s %s); header and data disagree, so the file is corrupt "
                             "or several files were joined: fetch it again",
                             path, (unsigned long long)extra, nbytes, dims,
                             rt_idx_type_str(type));
    }
    if (s != RT_OK) {
        rt_mem_free(data, want, RT_MEM_DATA);
        return s;
    }
    rt_idx_to_host_order(data, (size_t)(records * record), esz);
    idx->type = (rt_idx_type)type;
    idx->ndim = ndim;
    idx->file_records = idx->dims[0];
    idx->dims[0] = records;
    idx->elem_size = esz;
    idx->count = records * record;
    idx->data = data;
    idx->nbytes = want;
    return RT_OK;
}

/* rt_idx_read (max_records < 0: all records) and rt_idx_read_first; `who`
 * names the caller in argument errors. */
static rt_status rt_idx_open_read(const char *who, const char *path, int64_t max_records,
                                  rt_idx **out) {
    if (!out) return rt_error_set(RT_ERR_INVALID_ARG, "%s: out is NULL", who);
    *out = NULL;
    if (!path) return rt_error_set(RT_ERR_INVALID_ARG, "%s: path is NULL", who);

    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return rt_error_set(RT_ERR_IO, "cannot open IDX file %s: %s; check the path and permissions",
                            path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return rt_error_set(RT_ERR_IO, "cannot stat IDX file %s: %s", path, strerror(e));
    }
    if (S_ISDIR(st.st_mode)) {
        close(fd);
        return rt_error_set(RT_ERR_IO, "cannot read IDX file %s: %s; pass the file, not its folder",
                            path, strerror(EISDIR));
    }
    gzFile gz = gzdopen(fd, "rb");
    if (!gz) {
        close(fd);
        return rt_error_set(RT_ERR_OOM, "out of memory opening IDX file %s", path);
    }
    gzbuffer(gz, 1u << 17);
    rt_idx_reader r = {gz, path, !gzdirect(gz)};

    rt_status s = RT_OK;
    if (r.compressed && !rt_idx_path_is_gz(path))
        s = rt_error_set(RT_ERR_FORMAT,
                         "file %s is gzip-compressed but was opened as raw IDX; rename it to "
                         "%s.gz or gunzip it",
                         path, path);
    rt_idx *idx = NULL;
    if (s == RT_OK) {
        idx = calloc(1, sizeof *idx);
        size_t plen = strlen(path);
        if (idx) idx->path = malloc(plen + 1);
        if (!idx || !idx->path) s = rt_error_set(RT_ERR_OOM, "out of memory reading %s", path);
        else memcpy(idx->path, path, plen + 1);
    }
    if (s == RT_OK) s = rt_idx_parse(&r, &st, max_records, idx);
    gzclose_r(gz); /* also closes fd */
    if (s != RT_OK) {
        if (idx) free(idx->path);
        free(idx);
        return s;
    }
    *out = idx;
    return RT_OK;
}

rt_status rt_idx_read(const char *path, rt_idx **out) {
    return rt_idx_open_read("rt_idx_read", path, -1, out);
}

rt_status rt_idx_read_first(const char *path, int64_t max_records, rt_idx **out) {
    if (max_records < 0) {
        if (out) *out = NULL;
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_idx_read_first: max_records is %lld, must be >= 0",
                            (long long)max_records);
    }
    return rt_idx_open_read("rt_idx_read_first", path, max_records, out);
}

void rt_idx_destroy(rt_idx *idx) {
    if (!idx) return;
    rt_mem_free(idx->data, idx->nbytes, RT_MEM_DATA);
    free(idx->path);
    free(idx);
}

static int64_t rt_idx_int_at(const rt_idx *t, int64_t i) {
    switch (t->type) {
    case RT_IDX_U8: return ((const uint8_t *)t->data)[i];
    case RT_IDX_I8: return ((const int8_t *)t->data)[i];
    case RT_IDX_I16: return ((const int16_t *)t->data)[i];
    case RT_IDX_I32: return ((const int32_t *)t->data)[i];
    default: return 0;
    }
}

rt_status rt_idx_check_pair(const rt_idx *images, const rt_idx *labels, int num_classes) {
    if (!images || !labels)
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_idx_check_pair: %s is NULL",
                            images ? "labels" : "images");
    if (num_classes < 1)
        return rt_error_set(RT_ERR_INVALID_ARG,
                            "rt_idx_check_pair: num_classes is %d, must be at least 1",
                            num_classes);
    if (labels->count > 0 && !labels->data)
        return rt_error_set(RT_ERR_INVALID_ARG,
                            "rt_idx_check_pair: labels->data is NULL but labels->count is %lld",
                            (long long)labels->count);
    const char *ip = images->path ? images->path : "(images)";
    const char *lp = labels->path ? labels->path : "(labels)";
    if (labels->ndim != 1)
        return rt_error_set(RT_ERR_SHAPE,
                            "label file %s has %d dimensions, expected 1 (one class index per "
                            "sample); did you swap the images and labels files?",
                            lp, labels->ndim);
    if (labels->type == RT_IDX_F32 || labels->type == RT_IDX_F64)
        return rt_error_set(RT_ERR_DTYPE,
                            "label file %s holds %s values; class labels must be an integer type "
                            "(u8, i8, i16, i32)",
                            lp, rt_idx_type_str(labels->type));
    if (images->ndim < 1 || labels->dims[0] != images->dims[0] ||
        labels->file_records != images->file_records)
        return rt_error_set(RT_ERR_SHAPE,
                            "%lld images but %lld labels: image file %s and label file %s do not "
                            "belong together (mixing train and t10k files?)",
                            (long long)(images->ndim >= 1 ? images->file_records : 0),
                            (long long)labels->file_records, ip, lp);
    for (int64_t i = 0; i < labels->count; i++) {
        int64_t v = rt_idx_int_at(labels, i);
        if (v < 0 || v >= num_classes)
            return rt_error_set(RT_ERR_FORMAT,
                                "label file %s: label %lld at index %lld is outside [0, %d); the "
                                "file is corrupt, or num_classes is wrong for this dataset",
                                lp, (long long)v, (long long)i, num_classes);
    }
    return RT_OK;
}
