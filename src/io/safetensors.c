/* safetensors read/write (format by Hugging Face, see safetensors.h).
 *
 * Reader: the whole file is read into memory; the header is parsed with
 * jansson (duplicate keys rejected) and every number is checked before use,
 * with overflow checks, so a hostile file yields RT_ERR_FORMAT, never an
 * out-of-bounds access. The parsed JSON tree is kept alive and owns the
 * tensor names and metadata strings that entries borrow.
 *
 * Writer: tensors are recorded (data borrowed) with their offsets computed at
 * add time; save serialises the header with jansson, pads it with spaces to a
 * multiple of 8 bytes, and writes PATH.tmp.<pid> -> fsync -> rename. */
#include "io/safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---------------------------------------------------------------- dtypes */

static const struct {
    const char *name;
    size_t size;
} st_dtypes[] = {
    {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E4M3", 1}, {"F8_E5M2", 1},
    {"I16", 2},  {"U16", 2}, {"F16", 2}, {"BF16", 2},    {"I32", 4},
    {"U32", 4},  {"F32", 4}, {"F64", 8}, {"I64", 8},     {"U64", 8},
};

#define ST_DTYPE_LIST \
    "BOOL, U8, I8, F8_E4M3, F8_E5M2, I16, U16, F16, BF16, I32, U32, F32, F64, I64, U64"

size_t rt_st_dtype_size(const char *dtype) {
    if (!dtype) return 0;
    for (size_t i = 0; i < sizeof st_dtypes / sizeof st_dtypes[0]; i++)
        if (strcmp(dtype, st_dtypes[i].name) == 0) return st_dtypes[i].size;
    return 0;
}

/* ---------------------------------------------------------------- helpers */

static const char *json_type_name(const json_t *v) {
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a real number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    case JSON_NULL: return "null";
    }
    return "an unknown JSON value";
}

/* Formats "[2,3]" into buf (truncated safely). */
static void format_shape(char *buf, size_t cap, int ndim, const int64_t *shape) {
    size_t len = 0;
    buf[0] = '\0';
    len += (size_t)snprintf(buf, cap, "[");
    for (int d = 0; d < ndim && len < cap; d++)
        len += (size_t)snprintf(buf + len, cap - len, "%s%lld", d ? "," : "",
                                (long long)shape[d]);
    if (len < cap) snprintf(buf + len, cap - len, "]");
}

/* prod(shape) * esize in bytes; returns 0 on uint64 overflow (result in *out). */
static int shape_nbytes(int ndim, const int64_t *shape, size_t esize, uint64_t *out) {
    uint64_t n = esize;
    for (int d = 0; d < ndim; d++) {
        uint64_t s = (uint64_t)shape[d];
        if (s != 0 && n > UINT64_MAX / s) return 0;
        n *= s;
    }
    *out = n;
    return 1;
}

/* RT_ERR_FORMAT with the "safetensors file 'PATH': " prefix. */
static rt_status fmt_err(const char *path, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static rt_status fmt_err(const char *path, const char *fmt, ...) {
    char msg[1536];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return rt_error_set(RT_ERR_FORMAT, "safetensors file '%s': %s", path, msg);
}

/* ---------------------------------------------------------------- reader */

struct rt_st_file {
    json_t *root;          /* owns entry names and metadata strings */
    json_t *meta;          /* borrowed from root; NULL when absent */
    unsigned char *buf;    /* the byte buffer, 64-byte aligned */
    size_t buf_size;
    rt_st_entry *entries;  /* file (offset) order */
    size_t n;
    const rt_st_entry **by_name; /* entries sorted by name, for rt_st_find */
};

typedef struct st_span {
    uint64_t begin, end;
    size_t idx; /* index into the unsorted entries */
    const char *name;
} st_span;

static int span_cmp(const void *a, const void *b) {
    const st_span *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return strcmp(x->name, y->name);
}

static int name_cmp(const void *a, const void *b) {
    return strcmp((*(const rt_st_entry *const *)a)->name, (*(const rt_st_entry *const *)b)->name);
}

#define ST_FIX_REEXPORT "the file is corrupt or was written by a broken exporter; re-export it " \
                        "(e.g. safetensors.torch.save_file)"

/* Reads a JSON integer >= 0 into *out; returns 0 if not one. */
static int json_nonneg_int(const json_t *v, uint64_t *out) {
    if (!json_is_integer(v)) return 0;
    json_int_t x = json_integer_value(v);
    if (x < 0) return 0;
    *out = (uint64_t)x;
    return 1;
}

/* Validates one tensor entry; fills e (except data) and the span. */
static rt_status parse_entry(const char *path, const char *name, json_t *val, size_t buf_size,
                             rt_st_entry *e, st_span *sp) {
    if (!json_is_object(val))
        return fmt_err(path,
                       "tensor '%s': entry is %s, expected an object with \"dtype\", \"shape\" "
                       "and \"data_offsets\"; " ST_FIX_REEXPORT,
                       name, json_type_name(val));
    static const char *const keys[3] = {"dtype", "shape", "data_offsets"};
    for (int k = 0; k < 3; k++)
        if (!json_object_get(val, keys[k]))
            return fmt_err(path,
                           "tensor '%s' has no \"%s\"; every entry needs \"dtype\", \"shape\" "
                           "and \"data_offsets\"; " ST_FIX_REEXPORT,
                           name, keys[k]);
    json_t *jd = json_object_get(val, "dtype");
    json_t *js = json_object_get(val, "shape");
    json_t *jo = json_object_get(val, "data_offsets");

    if (!json_is_string(jd))
        return fmt_err(path, "tensor '%s': \"dtype\" is %s, expected a string such as \"F32\"",
                       name, json_type_name(jd));
    const char *dt = json_string_value(jd);
    size_t esize = rt_st_dtype_size(dt);
    if (esize == 0)
        return fmt_err(path,
                       "tensor '%s' has unknown dtype '%.40s'; supported dtypes are " ST_DTYPE_LIST
                       "; convert the tensor to one of them before saving",
                       name, dt);
    memcpy(e->dtype, dt, strlen(dt) + 1); /* known dtypes fit in 8 bytes */

    if (!json_is_array(js))
        return fmt_err(path,
                       "tensor '%s': \"shape\" is %s, expected an array of integers such as "
                       "[2, 3] ([] for a scalar)",
                       name, json_type_name(js));
    size_t nd = json_array_size(js);
    if (nd > RT_ST_MAX_DIMS)
        return fmt_err(path,
                       "tensor '%s' has %zu dimensions; revtorch supports at most %d; reshape "
                       "it before saving",
                       name, nd, RT_ST_MAX_DIMS);
    e->ndim = (int)nd;
    for (size_t d = 0; d < nd; d++) {
        json_t *x = json_array_get(js, d);
        if (!json_is_integer(x))
            return fmt_err(path,
                           "tensor '%s': shape element %zu is %s, expected a non-negative "
                           "integer; " ST_FIX_REEXPORT,
                           name, d, json_type_name(x));
        if (json_integer_value(x) < 0)
            return fmt_err(path,
                           "tensor '%s' has negative size %lld in dimension %zu of its shape; "
                           "sizes must be >= 0; " ST_FIX_REEXPORT,
                           name, (long long)json_integer_value(x), d);
        e->shape[d] = (int64_t)json_integer_value(x);
    }

    if (!json_is_array(jo) || json_array_size(jo) != 2 ||
        !json_is_integer(json_array_get(jo, 0)) || !json_is_integer(json_array_get(jo, 1)))
        return fmt_err(path,
                       "tensor '%s': \"data_offsets\" must be an array of two integers "
                       "[begin, end], got %s%s; " ST_FIX_REEXPORT,
                       name, json_type_name(jo),
                       json_is_array(jo) ? " of the wrong length or element type" : "");
    uint64_t begin, end;
    if (!json_nonneg_int(json_array_get(jo, 0), &begin) ||
        !json_nonneg_int(json_array_get(jo, 1), &end))
        return fmt_err(path, "tensor '%s' has negative data_offsets [%lld, %lld]; " ST_FIX_REEXPORT,
                       name, (long long)json_integer_value(json_array_get(jo, 0)),
                       (long long)json_integer_value(json_array_get(jo, 1)));
    if (begin > end)
        return fmt_err(path,
                       "tensor '%s' has data_offsets [%llu, %llu] with begin > end; "
                       "" ST_FIX_REEXPORT,
                       name, (unsigned long long)begin, (unsigned long long)end);
    if (end > buf_size)
        return fmt_err(path,
                       "tensor '%s' has data_offsets [%llu, %llu] but the data buffer holds "
                       "only %zu bytes; the file is truncated or its header is wrong; "
                       "re-download or re-export it",
                       name, (unsigned long long)begin, (unsigned long long)end, buf_size);

    char shp[160];
    format_shape(shp, sizeof shp, e->ndim, e->shape);
    uint64_t want;
    if (!shape_nbytes(e->ndim, e->shape, esize, &want))
        return fmt_err(path, "tensor '%s' has shape %s %s whose byte size overflows 64 bits; "
                       ST_FIX_REEXPORT, name, shp, dt);
    if (want != end - begin)
        return fmt_err(path,
                       "tensor '%s' has shape %s %s = %llu bytes but data_offsets cover %llu "
                       "(begin %llu, end %llu); shape, dtype and offsets disagree; " ST_FIX_REEXPORT,
                       name, shp, dt, (unsigned long long)want,
                       (unsigned long long)(end - begin), (unsigned long long)begin,
                       (unsigned long long)end);
    e->name = name;
    e->nbytes = (size_t)want;
    sp->begin = begin;
    sp->end = end;
    sp->name = name;
    return RT_OK;
}

static rt_status parse_metadata(const char *path, json_t *meta) {
    if (!json_is_object(meta))
        return fmt_err(path,
                       "\"__metadata__\" is %s, expected an object mapping strings to strings; "
                       "" ST_FIX_REEXPORT,
                       json_type_name(meta));
    const char *k;
    json_t *v;
    json_object_foreach(meta, k, v) {
        if (!json_is_string(v))
            return fmt_err(path,
                           "\"__metadata__\" value for key '%s' is %s, but the format allows "
                           "only strings; store it as text (e.g. str(value)) when saving",
                           k, json_type_name(v));
    }
    return RT_OK;
}

static rt_status st_validate(const char *path, rt_st_file *f) {
    json_t *root = f->root;
    f->meta = json_object_get(root, "__metadata__");
    if (f->meta) RT_TRY(parse_metadata(path, f->meta));
    size_t n = json_object_size(root) - (f->meta ? 1 : 0);

    f->entries = calloc(n ? n : 1, sizeof *f->entries);
    st_span *spans = calloc(n ? n : 1, sizeof *spans);
    f->by_name = calloc(n ? n : 1, sizeof *f->by_name);
    if (!f->entries || !spans || !f->by_name) {
        free(spans);
        return rt_error_set(RT_ERR_OOM, "safetensors file '%s': out of memory for %zu entries",
                            path, n);
    }
    rt_st_entry *tmp = calloc(n ? n : 1, sizeof *tmp);
    if (!tmp) {
        free(spans);
        return rt_error_set(RT_ERR_OOM, "safetensors file '%s': out of memory", path);
    }

    rt_status s = RT_OK;
    size_t i = 0;
    const char *key;
    json_t *val;
    json_object_foreach(root, key, val) {
        if (strcmp(key, "__metadata__") == 0) continue;
        s = parse_entry(path, key, val, f->buf_size, &tmp[i], &spans[i]);
        if (s != RT_OK) goto done;
        spans[i].idx = i;
        i++;
    }

    /* The entries must tile the buffer exactly: sorted by offset, each begins
     * where the previous one ended, and the last ends at the buffer's end. */
    qsort(spans, n, sizeof *spans, span_cmp);
    uint64_t expect = 0;
    const char *prev = NULL;
    for (size_t j = 0; j < n; j++) {
        if (spans[j].begin < expect) {
            s = fmt_err(path,
                        "tensors '%s' and '%s' overlap (data_offsets of '%s' begin at %llu, "
                        "before '%s' ends at %llu); tensors must occupy disjoint byte ranges; "
                        "" ST_FIX_REEXPORT,
                        prev, spans[j].name, spans[j].name, (unsigned long long)spans[j].begin,
                        prev, (unsigned long long)expect);
            goto done;
        }
        if (spans[j].begin > expect) {
            s = fmt_err(path,
                        "bytes [%llu, %llu) of the data buffer belong to no tensor (a hole "
                        "before '%s'); the format requires the tensors to tile the buffer "
                        "exactly; " ST_FIX_REEXPORT,
                        (unsigned long long)expect, (unsigned long long)spans[j].begin,
                        spans[j].name);
            goto done;
        }
        expect = spans[j].end;
        prev = spans[j].name;
        f->entries[j] = tmp[spans[j].idx];
        f->entries[j].data = f->buf + spans[j].begin;
    }
    if (expect != f->buf_size) {
        s = fmt_err(path,
                    "the last %llu bytes of the data buffer (from offset %llu of %zu) belong to "
                    "no tensor; the format requires the tensors to tile the buffer exactly; "
                    "the file has trailing garbage or a header that lost entries; "
                    "" ST_FIX_REEXPORT,
                    (unsigned long long)(f->buf_size - expect), (unsigned long long)expect,
                    f->buf_size);
        goto done;
    }
    f->n = n;
    for (size_t j = 0; j < n; j++) f->by_name[j] = &f->entries[j];
    qsort(f->by_name, n, sizeof *f->by_name, name_cmp);
done:
    free(tmp);
    free(spans);
    return s;
}

/* Reads exactly n bytes; RT_ERR_IO on error or early EOF. */
static rt_status read_exact(FILE *fp, void *dst, size_t n, const char *path, const char *what) {
    if (n == 0) return RT_OK;
    errno = 0;
    size_t got = fread(dst, 1, n, fp);
    if (got == n) return RT_OK;
    if (ferror(fp))
        return rt_error_set(RT_ERR_IO, "safetensors file '%s': reading the %s failed: %s", path,
                            what, strerror(errno ? errno : EIO));
    return rt_error_set(RT_ERR_IO,
                        "safetensors file '%s': the file ended while reading the %s (%zu of %zu "
                        "bytes); was it modified while being read?",
                        path, what, got, n);
}

rt_status rt_st_open(const char *path, rt_st_file **out) {
    if (out) *out = NULL;
    if (!path || !out)
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_st_open: path and out must not be NULL");

    FILE *fp = fopen(path, "rb");
    if (!fp)
        return rt_error_set(RT_ERR_IO, "cannot open safetensors file '%s': %s", path,
                            strerror(errno));
    rt_status s = RT_OK;
    rt_st_file *f = NULL;
    char *hdr = NULL;
    struct stat st;
    if (fstat(fileno(fp), &st) != 0) {
        s = rt_error_set(RT_ERR_IO, "cannot stat safetensors file '%s': %s", path,
                         strerror(errno));
        goto fail;
    }
    if (!S_ISREG(st.st_mode)) {
        s = rt_error_set(RT_ERR_IO, "safetensors file '%s' is not a regular file: %s", path,
                         strerror(S_ISDIR(st.st_mode) ? EISDIR : EINVAL));
        goto fail;
    }
    uint64_t size = (uint64_t)st.st_size;
    if (size < 8) {
        s = fmt_err(path,
                    "the file is %llu bytes, shorter than the 8-byte header length that starts "
                    "every safetensors file; it is truncated or not a safetensors file",
                    (unsigned long long)size);
        goto fail;
    }
    if (size > SIZE_MAX) {
        s = fmt_err(path, "the file (%llu bytes) does not fit in this process's address space",
                    (unsigned long long)size);
        goto fail;
    }
    unsigned char lenb[8];
    if ((s = read_exact(fp, lenb, 8, path, "header length")) != RT_OK) goto fail;
    uint64_t hlen = 0;
    for (int b = 7; b >= 0; b--) hlen = (hlen << 8) | lenb[b];
    if (hlen > RT_ST_MAX_HEADER) {
        s = fmt_err(path,
                    "header length %llu bytes is absurd (limit %llu); the first 8 bytes are not "
                    "a little-endian header length, so this is not a safetensors file or it "
                    "is corrupt",
                    (unsigned long long)hlen, (unsigned long long)RT_ST_MAX_HEADER);
        goto fail;
    }
    if (hlen > size - 8) {
        s = fmt_err(path,
                    "header length %llu bytes exceeds the %llu bytes that follow it; the file "
                    "is truncated (re-download or re-export it) or not a safetensors file",
                    (unsigned long long)hlen, (unsigned long long)(size - 8));
        goto fail;
    }

    hdr = malloc(hlen ? (size_t)hlen : 1);
    f = calloc(1, sizeof *f);
    if (!hdr || !f) {
        s = rt_error_set(RT_ERR_OOM, "safetensors file '%s': out of memory for a %llu-byte header",
                         path, (unsigned long long)hlen);
        goto fail;
    }
    if ((s = read_exact(fp, hdr, (size_t)hlen, path, "header")) != RT_OK) goto fail;

    json_error_t jerr;
    f->root = json_loadb(hdr, (size_t)hlen, JSON_REJECT_DUPLICATES, &jerr);
    free(hdr);
    hdr = NULL;
    if (!f->root) {
        s = fmt_err(path,
                    "header is not valid JSON: %s (header line %d, column %d, byte %d; file "
                    "offset %lld); " ST_FIX_REEXPORT,
                    jerr.text, jerr.line, jerr.column, jerr.position,
                    (long long)jerr.position + 8);
        goto fail;
    }
    if (!json_is_object(f->root)) {
        s = fmt_err(path,
                    "header is %s, expected a JSON object mapping tensor names to "
                    "{\"dtype\", \"shape\", \"data_offsets\"}; " ST_FIX_REEXPORT,
                    json_type_name(f->root));
        goto fail;
    }

    f->buf_size = (size_t)(size - 8 - hlen);
    void *buf = NULL;
    if (posix_memalign(&buf, 64, f->buf_size ? f->buf_size : 1) != 0) {
        s = rt_error_set(RT_ERR_OOM, "safetensors file '%s': out of memory for %zu data bytes",
                         path, f->buf_size);
        goto fail;
    }
    f->buf = buf;
    if ((s = read_exact(fp, f->buf, f->buf_size, path, "data buffer")) != RT_OK) goto fail;
    fclose(fp);
    fp = NULL;

    if ((s = st_validate(path, f)) != RT_OK) goto fail;
    *out = f;
    return RT_OK;
fail:
    if (fp) fclose(fp);
    free(hdr);
    rt_st_close(f);
    return s;
}

size_t rt_st_count(const rt_st_file *f) { return f ? f->n : 0; }

const rt_st_entry *rt_st_entry_at(const rt_st_file *f, size_t i) {
    if (!f) {
        rt_error_set(RT_ERR_INVALID_ARG, "rt_st_entry_at: the file is NULL");
        return NULL;
    }
    if (i >= f->n) return NULL;
    return &f->entries[i];
}

const rt_st_entry *rt_st_find(const rt_st_file *f, const char *name) {
    if (!f || !name) {
        rt_error_set(RT_ERR_INVALID_ARG, "rt_st_find: %s is NULL", !f ? "the file" : "the name");
        return NULL;
    }
    size_t lo = 0, hi = f->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const rt_st_entry *e = f->by_name[mid];
        int c = strcmp(name, e->name);
        if (c == 0) return e;
        if (c < 0) hi = mid;
        else lo = mid + 1;
    }
    return NULL;
}

const char *rt_st_metadata(const rt_st_file *f, const char *key) {
    if (!f || !key) {
        rt_error_set(RT_ERR_INVALID_ARG, "rt_st_metadata: %s is NULL", !f ? "the file" : "the key");
        return NULL;
    }
    if (!f->meta) return NULL;
    return json_string_value(json_object_get(f->meta, key));
}

void rt_st_close(rt_st_file *f) {
    if (!f) return;
    json_decref(f->root);
    free(f->buf);
    free(f->entries);
    free((void *)f->by_name);
    free(f);
}

/* ---------------------------------------------------------------- writer */

typedef struct st_wdata {
    const void *data;
    size_t nbytes;
} st_wdata;

struct rt_st_writer {
    json_t *tensors;  /* name -> {"dtype","shape","data_offsets"}, insertion order */
    json_t *meta;     /* key -> string */
    st_wdata *data;   /* same order as tensors */
    size_t n, cap;
    uint64_t total;   /* bytes of the data buffer so far */
};

rt_st_writer *rt_st_writer_create(void) {
    rt_st_writer *w = calloc(1, sizeof *w);
    if (w) {
        w->tensors = json_object();
        w->meta = json_object();
    }
    if (!w || !w->tensors || !w->meta) {
        rt_st_writer_destroy(w);
        rt_error_set(RT_ERR_OOM, "rt_st_writer_create: out of memory");
        return NULL;
    }
    return w;
}

void rt_st_writer_destroy(rt_st_writer *w) {
    if (!w) return;
    json_decref(w->tensors);
    json_decref(w->meta);
    free(w->data);
    free(w);
}

/* 1 when s is valid UTF-8 (jansson's check, via a throwaway string). */
static int is_utf8(const char *s) {
    json_t *t = json_string(s);
    if (!t) return 0;
    json_decref(t);
    return 1;
}

rt_status rt_st_writer_add(rt_st_writer *w, const char *name, const char *dtype, int ndim,
                           const int64_t *shape, const void *data, size_t nbytes) {
    if (!w || !name || !dtype)
        return rt_error_set(RT_ERR_INVALID_ARG,
                            "rt_st_writer_add: writer, name and dtype must not be NULL");
    if (strcmp(name, "__metadata__") == 0)
        return rt_error_set(RT_ERR_INVALID_ARG,
                            "rt_st_writer_add: '__metadata__' is reserved by the safetensors "
                            "format and cannot name a tensor; rename it");
    if (!is_utf8(name))
        return rt_error_set(RT_ERR_INVALID_ARG,
                            "rt_st_writer_add: tensor name is not valid UTF-8; safetensors "
                            "headers are JSON and need UTF-8 names");
    size_t esize = rt_st_dtype_size(dtype);
    if (esize == 0)
        return rt_error_set(RT_ERR_DTYPE,
                            "rt_st_writer_add: tensor '%s' has unknown dtype '%.40s'; use one "
                            "of " ST_DTYPE_LIST,
                            name, dtype);
    if (ndim < 0 || ndim > RT_ST_MAX_DIMS || (ndim > 0 && !shape))
        return rt_error_set(RT_ERR_INVALID_ARG,
                            "rt_st_writer_add: tensor '%s' has ndim %d; it must be 0..%d with a "
                            "non-NULL shape when > 0",
                            name, ndim, RT_ST_MAX_DIMS);
    for (int d = 0; d < ndim; d++)
        if (shape[d] < 0)
            return rt_error_set(RT_ERR_INVALID_ARG,
                                "rt_st_writer_add: tensor '%s' has negative size %lld in "
                                "dimension %d",
                                name, (long long)shape[d], d);
    char shp[160];
    format_shape(shp, sizeof shp, ndim, shape);
    uint64_t want;
    if (!shape_nbytes(ndim, shape, esize, &want) || want > SIZE_MAX ||
        w->total > UINT64_MAX - want || w->total + want > (uint64_t)INT64_MAX)
        return rt_error_set(RT_ERR_INVALID_ARG,
                            "rt_st_writer_add: tensor '%s' with shape %s %s is too large "
                            "(byte count overflows)",
                            name, shp, dtype);
    if (want != nbytes)
        return rt_error_set(RT_ERR_INVALID_ARG,
                            "rt_st_writer_add: tensor '%s' has shape %s %s = %llu bytes but "
                            "nbytes is %zu; pass the tensor's full contiguous byte size",
                            name, shp, dtype, (unsigned long long)want, nbytes);
    if (nbytes > 0 && !data)
        return rt_error_set(RT_ERR_INVALID_ARG,
                            "rt_st_writer_add: tensor '%s' has %zu bytes but data is NULL", name,
                            nbytes);
    if (json_object_get(w->tensors, name))
        return rt_error_set(RT_ERR_INVALID_ARG,
                            "rt_st_writer_add: duplicate tensor name '%s'; names in a "
                            "safetensors file must be unique",
                            name);

    if (w->n == w->cap) {
        size_t nc = w->cap ? 2 * w->cap : 16;
        st_wdata *nd = realloc(w->data, nc * sizeof *nd);
        if (!nd) return rt_error_set(RT_ERR_OOM, "rt_st_writer_add: out of memory");
        w->data = nd;
        w->cap = nc;
    }
    json_t *jshape = json_array();
    json_t *entry = json_object();
    int bad = !jshape || !entry;
    for (int d = 0; d < ndim && !bad; d++)
        bad |= json_array_append_new(jshape, json_integer((json_int_t)shape[d])) != 0;
    if (!bad) bad |= json_object_set_new(entry, "dtype", json_string(dtype)) != 0;
    if (!bad) {
        bad |= json_object_set(entry, "shape", jshape) != 0;
        json_t *off = json_pack("[II]", (json_int_t)w->total, (json_int_t)(w->total + want));
        bad |= json_object_set_new(entry, "data_offsets", off) != 0;
    }
    json_decref(jshape);
    if (!bad) {
        bad |= json_object_set(w->tensors, name, entry) != 0;
    }
    json_decref(entry);
    if (bad) {
        json_object_del(w->tensors, name);
        return rt_error_set(RT_ERR_OOM, "rt_st_writer_add: out of memory for tensor '%s'", name);
    }
    w->data[w->n].data = data;
    w->data[w->n].nbytes = nbytes;
    w->n++;
    w->total += want;
    return RT_OK;
}

rt_status rt_st_writer_set_metadata(rt_st_writer *w, const char *key, const char *value) {
    if (!w || !key || !value)
        return rt_error_set(RT_ERR_INVALID_ARG,
                            "rt_st_writer_set_metadata: writer, key and value must not be NULL");
    if (!is_utf8(key) || !is_utf8(value))
        return rt_error_set(RT_ERR_INVALID_ARG,
                            "rt_st_writer_set_metadata: key and value must be valid UTF-8");
    if (json_object_set_new(w->meta, key, json_string(value)) != 0)
        return rt_error_set(RT_ERR_OOM, "rt_st_writer_set_metadata: out of memory");
    return RT_OK;
}

/* fsync of the directory holding `path`, so the rename itself is durable.
 * Best effort: some filesystems refuse fsync on directories. */
static void fsync_parent_dir(const char *path) {
    const char *slash = strrchr(path, '/');
    char *dir;
    if (!slash) dir = strdup(".");
    else if (slash == path) dir = strdup("/");
    else {
        dir = malloc((size_t)(slash - path) + 1);
        if (dir) {
            memcpy(dir, path, (size_t)(slash - path));
            dir[slash - path] = '\0';
        }
    }
    if (!dir) return;
    int fd = open(dir, O_RDONLY);
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
    free(dir);
}

rt_status rt_st_writer_save(const rt_st_writer *w, const char *path) {
    if (!w || !path)
        return rt_error_set(RT_ERR_INVALID_ARG,
                            "rt_st_writer_save: writer and path must not be NULL");
    rt_status s = RT_OK;
    char *text = NULL, *tmp = NULL;
    FILE *fp = NULL;
    json_t *root = json_object();
    if (!root) return rt_error_set(RT_ERR_OOM, "rt_st_writer_save: out of memory");
    int bad = 0;
    if (json_object_size(w->meta) > 0) bad |= json_object_set(root, "__metadata__", w->meta);
    if (!bad) bad |= json_object_update(root, w->tensors);
    if (!bad) text = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    size_t tlen = strlen(path) + 32;
    if (!bad && text) tmp = malloc(tlen);
    if (bad || !text || !tmp) {
        s = rt_error_set(RT_ERR_OOM, "rt_st_writer_save: out of memory writing '%s'", path);
        goto out;
    }
    snprintf(tmp, tlen, "%s.tmp.%ld", path, (long)getpid());

    size_t len = strlen(text);
    size_t hlen = (len + 7) / 8 * 8;
    unsigned char lenb[8];
    for (int b = 0; b < 8; b++) lenb[b] = (unsigned char)((uint64_t)hlen >> (8 * b));
    static const char spaces[8] = {' ', ' ', ' ', ' ', ' ', ' ', ' ', ' '};

    fp = fopen(tmp, "wb");
    if (!fp) {
        s = rt_error_set(RT_ERR_IO,
                         "cannot create '%s' to save safetensors file '%s': %s; check that the "
                         "directory exists and is writable",
                         tmp, path, strerror(errno));
        goto out;
    }
    errno = 0;
    int ok = fwrite(lenb, 1, 8, fp) == 8 && fwrite(text, 1, len, fp) == len &&
             fwrite(spaces, 1, hlen - len, fp) == hlen - len;
    for (size_t i = 0; ok && i < w->n; i++)
        if (w->data[i].nbytes)
            ok = fwrite(w->data[i].data, 1, w->data[i].nbytes, fp) == w->data[i].nbytes;
    if (ok) ok = fflush(fp) == 0;
    if (ok) ok = fsync(fileno(fp)) == 0;
    if (!ok) {
        int e = errno ? errno : EIO;
        fclose(fp);
        fp = NULL;
        s = rt_error_set(RT_ERR_IO,
                         "saving safetensors file '%s' failed while writing '%s': %s (disk full "
                         "or file size limit?); the previous '%s', if any, is untouched",
                         path, tmp, strerror(e), path);
        goto out;
    }
    if (fclose(fp) != 0) {
        fp = NULL;
        s = rt_error_set(RT_ERR_IO,
                         "saving safetensors file '%s' failed closing '%s': %s; the previous "
                         "'%s', if any, is untouched",
                         path, tmp, strerror(errno), path);
        goto out;
    }
    fp = NULL;
    if (rename(tmp, path) != 0) {
        s = rt_error_set(RT_ERR_IO,
                         "saving safetensors file '%s' failed: cannot rename '%s' over it: %s; "
                         "the previous '%s', if any, is untouched",
                         path, tmp, strerror(errno), path);
        goto out;
    }
    fsync_parent_dir(path);
out:
    if (fp) fclose(fp);
    if (s != RT_OK && tmp) remove(tmp);
    free(tmp);
    free(text);
    return s;
}
