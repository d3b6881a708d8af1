/* `revtorch inspect FILE [--json]`: what a data or weight file holds, as the
 * library reads it. The format is decided by the content (after gzip, when
 * compressed): a NIfTI header (sizeof_hdr 348 / 540 in either byte order),
 * an IDX magic (00 00 type ndim), or a safetensors header (u64 length then
 * '{'). The file is then read by the library's own reader, so a file it
 * refuses prints the reader's error and exits 1. */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "cli.h"
#include "common.h"
#include "core/dtype.h"
#include "data/idx.h"
#include "data/nifti.h"
#include "io/safetensors.h"

static void inspect_usage(FILE *f) {
    fprintf(f, "usage: revtorch inspect FILE [--json]\n"
               "Prints what FILE holds, read by revtorch's own readers: a NIfTI volume (.nii, .nii.gz), an\n"
               "IDX file (MNIST / Fashion-MNIST) or a safetensors file; the format is decided by the content.\n"
               "  NIfTI: version, compression, shape, on-disk datatype, the scaling applied, the 4x4 affine and\n"
               "         whether it came from the sform, the qform or pixdim, and min/max/mean/sum of the\n"
               "         float32 values training sees (scaling applied).\n"
               "  IDX:   shape, element type and min/max/mean/sum of the values as stored.\n"
               "  safetensors: every tensor's name, dtype and shape, with statistics of its values.\n\n"
               "  --json   print one JSON object: format, shape, dtype_on_disk, affine, affine_source, min,\n"
               "           max, mean, sum (and tensors for safetensors, tensor_shape and scaling for NIfTI)\n\n"
               "Exit status: 0 done, 1 the file cannot be read or is refused, 2 usage error.\n");
}

typedef enum { FMT_UNKNOWN, FMT_NIFTI, FMT_IDX, FMT_SAFETENSORS } inspect_format;

/* Looks at the first bytes of the (decompressed) content. */
static inspect_format inspect_detect(const char *path, int *io_error) {
    unsigned char b[16] = {0};
    *io_error = 0;
    gzFile g = gzopen(path, "rb");
    if (!g) {
        *io_error = 1;
        return FMT_UNKNOWN;
    }
    int n = gzread(g, b, sizeof b);
    int compressed = !gzdirect(g);
    gzclose_r(g);
    if (n < 4) return FMT_UNKNOWN;
    uint32_t le = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
    uint32_t be = (uint32_t)b[3] | (uint32_t)b[2] << 8 | (uint32_t)b[1] << 16 | (uint32_t)b[0] << 24;
    if (le == 348 || be == 348 || le == 540 || be == 540) return FMT_NIFTI;
    if (b[0] == 0 && b[1] == 0 && rt_idx_type_size(b[2]) && b[3] >= 1 && b[3] <= RT_IDX_MAX_DIMS)
        return FMT_IDX;
    if (!compressed && n >= 9 && b[8] == '{') return FMT_SAFETENSORS;
    return FMT_UNKNOWN;
}

typedef struct inspect_stats {
    double min, max, sum;
    int64_t count;
    int integer_valued;
} inspect_stats;

static void stats_init(inspect_stats *s) {
    s->min = INFINITY;
    s->max = -INFINITY;
    s->sum = 0.0;
    s->count = 0;
    s->integer_valued = 1;
}

static void stats_add(inspect_stats *s, double v) {
    if (v < s->min) s->min = v;
    if (v > s->max) s->max = v;
    s->sum += v;
    s->count++;
    if (s->integer_valued && v != floor(v)) s->integer_valued = 0;
}

/* JSON number, or null for an empty set / non-finite value. */
static json_t *json_num(double v, int64_t count) {
    return count > 0 && isfinite(v) ? json_real(v) : json_null();
}

/* How many distinct values an integer-valued set holds (a label map's
 * labels), counted in a bitmap over [min, max]; -1 when the range is over
 * 2^24 or the values are not all integers. get(i) returns value i. */
static int64_t count_distinct(const inspect_stats *s, double (*get)(const void *, int64_t), const void *src) {
    if (!s->count || !s->integer_valued || s->max - s->min >= (double)(1 << 24)) return -1;
    size_t range = (size_t)(s->max - s->min) + 1;
    unsigned char *seen = calloc((range + 7) / 8, 1);
    if (!seen) return -1;
    int64_t distinct = 0;
    for (int64_t i = 0; i < s->count; i++) {
        size_t k = (size_t)(get(src, i) - s->min);
        if (!(seen[k / 8] & (1u << (k % 8)))) {
            seen[k / 8] |= (unsigned char)(1u << (k % 8));
            distinct++;
        }
    }
    free(seen);
    return distinct;
}

static double f32_get(const void *p, int64_t i) { return ((const float *)p)[i]; }

static void stats_to_json(json_t *o, const inspect_stats *s) {
    json_object_set_new(o, "min", json_num(s->min, s->count));
    json_object_set_new(o, "max", json_num(s->max, s->count));
    json_object_set_new(o, "mean", json_num(s->count ? s->sum / (double)s->count : 0, s->count));
    json_object_set_new(o, "sum", json_num(s->sum, s->count));
    json_object_set_new(o, "count", json_integer(s->count));
    json_object_set_new(o, "integer_valued", json_boolean(s->count > 0 && s->integer_valued));
}

static void stats_print(const inspect_stats *s, const char *what) {
    if (!s->count) {
        printf("values:        none (no elements)\n");
        return;
    }
    printf("values (%s): min %.9g  max %.9g  mean %.9g  sum %.9g  (%lld values%s)\n", what, s->min, s->max,
           s->sum / (double)s->count, s->sum, (long long)s->count,
           s->integer_valued ? ", all integers" : "");
}

static json_t *json_shape(int ndim, const int64_t *dims) {
    json_t *a = json_array();
    for (int d = 0; d < ndim; d++) json_array_append_new(a, json_integer(dims[d]));
    return a;
}

static void print_shape(const char *label, int ndim, const int64_t *dims) {
    printf("%s[", label);
    for (int d = 0; d < ndim; d++) printf("%s%lld", d ? ", " : "", (long long)dims[d]);
    printf("]");
}

/* Prints o compactly on one line; 0 or 1 (cannot print). */
static int json_emit(json_t *o) {
    int rc = json_dumpf(o, stdout, JSON_COMPACT | JSON_REAL_PRECISION(10)) == 0 ? 0 : 1;
    printf("\n");
    json_decref(o);
    return rc;
}

static int inspect_nifti(const char *path, int as_json) {
    rt_nifti_info in;
    rt_tensor *t = NULL;
    if (rt_nifti_read(path, &in, &t) != RT_OK) return cli_fail("cannot read the NIfTI file");
    inspect_stats s;
    stats_init(&s);
    const float *v = rt_tensor_f32(t);
    for (int64_t i = 0, n = rt_tensor_numel(t); i < n; i++) stats_add(&s, v[i]);
    int64_t dims[7];
    for (int d = 0; d < in.ndim; d++) dims[d] = in.dim[d + 1];
    int64_t distinct = count_distinct(&s, f32_get, v);
    int rc = 0;
    if (as_json) {
        json_t *o = json_object();
        json_object_set_new(o, "file", json_string(path));
        json_object_set_new(o, "format", json_string(in.version == 1 ? "nifti1" : "nifti2"));
        json_object_set_new(o, "compressed", json_boolean(in.compressed));
        json_object_set_new(o, "byte_order", json_string(in.big_endian ? "big" : "little"));
        json_object_set_new(o, "shape", json_shape(in.ndim, dims));
        json_object_set_new(o, "tensor_shape", json_shape(t->ndim, t->shape));
        json_object_set_new(o, "dtype_on_disk", json_string(rt_nifti_datatype_str(in.datatype)));
        json_t *sc = json_object();
        json_object_set_new(sc, "applied", json_boolean(in.scaled));
        json_object_set_new(sc, "scl_slope", isfinite(in.scl_slope) ? json_real(in.scl_slope) : json_null());
        json_object_set_new(sc, "scl_inter", json_real(in.scl_inter));
        json_object_set_new(o, "scaling", sc);
        json_t *aff = json_array();
        for (int r = 0; r < 4; r++) {
            json_t *row = json_array();
            for (int c = 0; c < 4; c++)
                json_array_append_new(row, isfinite(in.affine[r][c]) ? json_real(in.affine[r][c]) : json_null());
            json_array_append_new(aff, row);
        }
        json_object_set_new(o, "affine", aff);
        json_object_set_new(o, "affine_source", json_string(rt_nifti_affine_source_str(in.affine_source)));
        json_t *pd = json_array();
        for (int d = 1; d <= in.ndim; d++) json_array_append_new(pd, json_real(in.pixdim[d]));
        json_object_set_new(o, "pixdim", pd);
        stats_to_json(o, &s);
        json_object_set_new(o, "distinct_values", distinct >= 0 ? json_integer(distinct) : json_null());
        rc = json_emit(o);
    } else {
        printf("file:          %s\n", path);
        printf("format:        NIfTI-%d (%s, %s-endian)\n", in.version,
               in.compressed ? "gzip-compressed" : "uncompressed", in.big_endian ? "big" : "little");
        print_shape("shape:         ", in.ndim, dims);
        print_shape("  (i, j, k, ...); tensor ", t->ndim, t->shape);
        printf(" = [C, D=k, H=j, W=i]\n");
        printf("dtype on disk: %s (bitpix %d)\n", rt_nifti_datatype_str(in.datatype), in.bitpix);
        if (in.scaled)
            printf("scaling:       applied: value = %.9g * raw + %.9g\n", in.scl_slope, in.scl_inter);
        else
            printf("scaling:       none (scl_slope %.9g, scl_inter %.9g)\n", in.scl_slope, in.scl_inter);
        printf("affine (from the %s; sform_code %d, qform_code %d), voxel (i, j, k, 1) -> world:\n",
               rt_nifti_affine_source_str(in.affine_source), in.sform_code, in.qform_code);
        for (int r = 0; r < 4; r++)
            printf("  [%12.6g %12.6g %12.6g %12.6g]\n", in.affine[r][0], in.affine[r][1], in.affine[r][2],
                   in.affine[r][3]);
        printf("voxel size:    %g x %g x %g (pixdim)\n", in.pixdim[1], in.pixdim[2], in.pixdim[3]);
        stats_print(&s, "float32, as trained");
        if (distinct >= 0)
            printf("integer-valued: %lld distinct values (a label map, if it is one, reads exactly with "
                   "rt_nifti_read_labels)\n", (long long)distinct);
    }
    rt_tensor_release(t);
    return rc;
}

static const char *idx_numpy_name(int type) {
    switch (type) {
    case RT_IDX_U8: return "uint8";
    case RT_IDX_I8: return "int8";
    case RT_IDX_I16: return "int16";
    case RT_IDX_I32: return "int32";
    case RT_IDX_F32: return "float32";
    default: return "float64";
    }
}

static double idx_at(const rt_idx *x, int64_t i) {
    switch (x->type) {
    case RT_IDX_U8: return ((const uint8_t *)x->data)[i];
    case RT_IDX_I8: return ((const int8_t *)x->data)[i];
    case RT_IDX_I16: return ((const int16_t *)x->data)[i];
    case RT_IDX_I32: return ((const int32_t *)x->data)[i];
    case RT_IDX_F32: return ((const float *)x->data)[i];
    default: return ((const double *)x->data)[i];
    }
}

static int inspect_idx(const char *path, int as_json) {
    rt_idx *x = NULL;
    if (rt_idx_read(path, &x) != RT_OK) return cli_fail("cannot read the IDX file");
    inspect_stats s;
    stats_init(&s);
    for (int64_t i = 0; i < x->count; i++) stats_add(&s, idx_at(x, i));
    int rc = 0;
    if (as_json) {
        json_t *o = json_object();
        json_object_set_new(o, "file", json_string(path));
        json_object_set_new(o, "format", json_string("idx"));
        json_object_set_new(o, "shape", json_shape(x->ndim, x->dims));
        json_object_set_new(o, "dtype_on_disk", json_string(idx_numpy_name(x->type)));
        json_object_set_new(o, "affine", json_null());
        json_object_set_new(o, "affine_source", json_null());
        stats_to_json(o, &s);
        rc = json_emit(o);
    } else {
        printf("file:          %s\n", path);
        printf("format:        IDX (big-endian elements)\n");
        print_shape("shape:         ", x->ndim, x->dims);
        printf("\ndtype on disk: %s\n", idx_numpy_name(x->type));
        printf("scaling:       none in the file (the data loader divides uint8 images by 255 and normalises)\n");
        stats_print(&s, "as stored");
    }
    rt_idx_destroy(x);
    return rc;
}

/* Element i of a safetensors entry as a double; 0 when the dtype is not a
 * number revtorch converts (BOOL counts as 0/1, FP8 is skipped). */
static int st_value(const rt_st_entry *e, int64_t i, double *v) {
    const unsigned char *p = (const unsigned char *)e->data;
    size_t es = rt_st_dtype_size(e->dtype);
    unsigned char b[8];
    memcpy(b, p + (size_t)i * es, es); /* data need not be aligned */
    if (!strcmp(e->dtype, "F32")) { float f; memcpy(&f, b, 4); *v = f; }
    else if (!strcmp(e->dtype, "F64")) { double d; memcpy(&d, b, 8); *v = d; }
    else if (!strcmp(e->dtype, "F16")) { uint16_t h; memcpy(&h, b, 2); *v = rt_f16_to_f32(h); }
    else if (!strcmp(e->dtype, "BF16")) { uint16_t h; memcpy(&h, b, 2); *v = rt_bf16_to_f32(h); }
    else if (!strcmp(e->dtype, "U8") || !strcmp(e->dtype, "BOOL")) *v = b[0];
    else if (!strcmp(e->dtype, "I8")) *v = (int8_t)b[0];
    else if (!strcmp(e->dtype, "I16")) { int16_t x; memcpy(&x, b, 2); *v = x; }
    else if (!strcmp(e->dtype, "U16")) { uint16_t x; memcpy(&x, b, 2); *v = x; }
    else if (!strcmp(e->dtype, "I32")) { int32_t x; memcpy(&x, b, 4); *v = x; }
    else if (!strcmp(e->dtype, "U32")) { uint32_t x; memcpy(&x, b, 4); *v = x; }
    else if (!strcmp(e->dtype, "I64")) { int64_t x; memcpy(&x, b, 8); *v = (double)x; }
    else if (!strcmp(e->dtype, "U64")) { uint64_t x; memcpy(&x, b, 8); *v = (double)x; }
    else return 0;
    return 1;
}

static int inspect_safetensors(const char *path, int as_json) {
    rt_st_file *f = NULL;
    if (rt_st_open(path, &f) != RT_OK) return cli_fail("cannot read the safetensors file");
    size_t n = rt_st_count(f);
    inspect_stats all;
    stats_init(&all);
    json_t *tensors = json_array();
    const char *common = NULL;
    int mixed = 0;
    if (!as_json) {
        printf("file:          %s\n", path);
        printf("format:        safetensors, %zu tensors\n", n);
    }
    for (size_t k = 0; k < n; k++) {
        const rt_st_entry *e = rt_st_entry_at(f, k);
        if (!common) common = e->dtype;
        else if (strcmp(common, e->dtype)) mixed = 1;
        inspect_stats s;
        stats_init(&s);
        int64_t count = e->nbytes / rt_st_dtype_size(e->dtype);
        double v;
        for (int64_t i = 0; i < count && st_value(e, i, &v); i++) {
            stats_add(&s, v);
            stats_add(&all, v);
        }
        if (as_json) {
            json_t *t = json_object();
            json_object_set_new(t, "name", json_string(e->name));
            json_object_set_new(t, "dtype", json_string(e->dtype));
            json_object_set_new(t, "shape", json_shape(e->ndim, e->shape));
            stats_to_json(t, &s);
            json_array_append_new(tensors, t);
        } else {
            printf("  %-40s %-5s", e->name, e->dtype);
            print_shape(" ", e->ndim, e->shape);
            if (s.count) printf("  min %.6g max %.6g mean %.6g", s.min, s.max, s.sum / (double)s.count);
            printf("\n");
        }
    }
    int rc = 0;
    if (as_json) {
        json_t *o = json_object();
        json_object_set_new(o, "file", json_string(path));
        json_object_set_new(o, "format", json_string("safetensors"));
        json_object_set_new(o, "shape", json_null());
        json_object_set_new(o, "dtype_on_disk", mixed ? json_string("mixed") : common ? json_string(common) : json_null());
        json_object_set_new(o, "affine", json_null());
        json_object_set_new(o, "affine_source", json_null());
        stats_to_json(o, &all);
        json_object_set_new(o, "tensors", tensors);
        rc = json_emit(o);
    } else {
        json_decref(tensors);
        stats_print(&all, "all numeric tensors");
    }
    rt_st_close(f);
    return rc;
}

int cli_cmd_inspect(int argc, char **argv) {
    const char *path = NULL;
    int as_json = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            inspect_usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--json")) {
            as_json = 1;
        } else if (argv[i][0] == '-' && argv[i][1] != '\0') {
            fprintf(stderr, "revtorch inspect: unknown option '%s' (see revtorch inspect --help)\n", argv[i]);
            return 2;
        } else if (path) {
            fprintf(stderr, "revtorch inspect: one FILE at a time ('%s' and '%s' given)\n", path, argv[i]);
            return 2;
        } else {
            path = argv[i];
        }
    }
    if (!path) {
        fprintf(stderr, "revtorch inspect: which file? usage: revtorch inspect FILE [--json]\n");
        return 2;
    }
    int io_error;
    switch (inspect_detect(path, &io_error)) {
    case FMT_NIFTI: return inspect_nifti(path, as_json);
    case FMT_IDX: return inspect_idx(path, as_json);
    case FMT_SAFETENSORS: return inspect_safetensors(path, as_json);
    default:
        if (io_error) {
            fprintf(stderr, "revtorch inspect: cannot open %s: %s\n", path, strerror(errno));
            return 1;
        }
        fprintf(stderr,
                "revtorch inspect: %s is not a file revtorch reads: its content is neither a NIfTI header "
                "(sizeof_hdr 348 or 540), an IDX magic (00 00 type ndim) nor a safetensors header\n",
                path);
        return 1;
    }
}
