/* NIfTI reader and writer; format, axis order and contract in nifti.h.
 *
 * Reading: the header bytes are read with zlib (gzread passes plain files
 * through, so gzip-or-not is the content's decision), checked here, and only
 * then handed to libnifti (nifti_convert_n1hdr2nim / n2hdr2nim) for the
 * byte swap and the qform/sform/pixdim matrices. The voxels are read here
 * into one tracked buffer of exactly data_bytes, swapped with libnifti's
 * nifti_swap_Nbytes and converted into the output tensor; an f32 volume (or
 * an int32 label map) is read straight into its output.
 *
 * Writing: libnifti builds the header from a nifti_image (dims, datatype,
 * sform, quaternion); the bytes are written here to PATH.tmp.<pid> (through
 * gzdopen for a ".gz" name), fsync'ed and renamed, because libnifti's
 * nifti_image_write returns no status. */
#include "data/nifti.h"

#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <math.h>
#include <nifti2_io.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "core/mem.h"

#define NF_MAX_VOXELS ((int64_t)1 << 40) /* 4 TiB of uint8: more is a corrupt header */
#define NF_MAX_GZIP_RATIO 1100            /* deflate expands at most ~1032:1 */
#define NF_CHUNK (1u << 30)               /* largest single gzread/gzwrite request */
#define NF_MSB_FIRST 2 /* libnifti's byteorder code for big-endian (MSB_FIRST, nifti1_io.h only) */
#define NF_SUPPORTED "uint8, int8, int16, uint16, int32, float32, float64"

const char *rt_nifti_datatype_str(int dt) {
    switch (dt) {
    case DT_UINT8: return "uint8";
    case DT_INT8: return "int8";
    case DT_INT16: return "int16";
    case DT_UINT16: return "uint16";
    case DT_INT32: return "int32";
    case DT_FLOAT32: return "float32";
    case DT_FLOAT64: return "float64";
    case DT_BINARY: return "BINARY";
    case DT_COMPLEX64: return "COMPLEX64";
    case DT_COMPLEX128: return "COMPLEX128";
    case DT_COMPLEX256: return "COMPLEX256";
    case DT_RGB24: return "RGB24";
    case DT_RGBA32: return "RGBA32";
    case DT_UINT32: return "UINT32";
    case DT_INT64: return "INT64";
    case DT_UINT64: return "UINT64";
    case DT_FLOAT128: return "FLOAT128";
    default: return "unknown";
    }
}

const char *rt_nifti_affine_source_str(rt_nifti_affine_source s) {
    switch (s) {
    case RT_NIFTI_AFFINE_SFORM: return "sform";
    case RT_NIFTI_AFFINE_QFORM: return "qform";
    case RT_NIFTI_AFFINE_PIXDIM: return "pixdim";
    default: return "?";
    }
}

/* Bytes per voxel of a datatype revtorch reads, 0 for any other code. */
static int nf_supported_size(int dt) {
    switch (dt) {
    case DT_UINT8: case DT_INT8: return 1;
    case DT_INT16: case DT_UINT16: return 2;
    case DT_INT32: case DT_FLOAT32: return 4;
    case DT_FLOAT64: return 8;
    default: return 0;
    }
}

/* ------------------------------------------------------------ raw reading */

typedef struct nf_reader {
    gzFile gz;
    const char *path;
    int64_t file_size;
    int compressed;
} nf_reader;

static rt_status nf_zlib_error(const nf_reader *r) {
    int zerr = Z_OK;
    const char *msg = gzerror(r->gz, &zerr);
    if (zerr == Z_ERRNO)
        return rt_error_set(RT_ERR_IO, "cannot read NIfTI file %s: %s; check that it is readable",
                            r->path, strerror(errno));
    if (zerr == Z_MEM_ERROR)
        return rt_error_set(RT_ERR_OOM, "out of memory while decompressing NIfTI file %s", r->path);
    if (zerr == Z_BUF_ERROR)
        return rt_error_set(RT_ERR_FORMAT,
                            "NIfTI file %s is truncated: the gzip stream ends early (zlib: %s); "
                            "the download or copy was incomplete: fetch the file again",
                            r->path, msg ? msg : "unexpected end of file");
    return rt_error_set(RT_ERR_FORMAT,
                        "NIfTI file %s: corrupt gzip data (zlib: %s); fetch the file again or "
                        "check it with 'gzip -t'",
                        r->path, msg ? msg : "unknown error");
}

/* Reads up to n bytes into buf (NULL: read and drop them); *got is how many
 * arrived (< n only at the end of the input). Fails on read/inflate errors. */
static rt_status nf_read(nf_reader *r, void *buf, uint64_t n, uint64_t *got) {
    unsigned char scratch[4096];
    unsigned char *p = buf;
    *got = 0;
    while (n > 0) {
        unsigned chunk = n > NF_CHUNK ? NF_CHUNK : (unsigned)n;
        if (!p && chunk > sizeof scratch) chunk = sizeof scratch;
        int k = gzread(r->gz, p ? (void *)p : (void *)scratch, chunk);
        if (k < 0) return nf_zlib_error(r);
        *got += (uint64_t)k;
        if (p) p += k;
        n -= (uint64_t)k;
        if ((unsigned)k < chunk) break;
    }
    return RT_OK;
}

/* " (the gzip stream itself ends early)" when zlib saw a cut stream. */
static const char *nf_cut_note(const nf_reader *r) {
    int zerr = Z_OK;
    if (!r->compressed) return "";
    gzerror(r->gz, &zerr);
    return zerr == Z_BUF_ERROR ? " (the gzip stream itself ends early)" : "";
}

static rt_status nf_open(const char *path, nf_reader *r) {
    memset(r, 0, sizeof *r);
    r->path = path;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return rt_error_set(RT_ERR_IO, "cannot open NIfTI file %s: %s; check the path", path,
                            strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return rt_error_set(RT_ERR_IO, "cannot read NIfTI file %s: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return rt_error_set(RT_ERR_IO, "cannot read NIfTI file %s: not a regular file", path);
    }
    r->file_size = (int64_t)st.st_size;
    r->gz = gzdopen(fd, "rb");
    if (!r->gz) {
        close(fd);
        return rt_error_set(RT_ERR_OOM, "out of memory opening NIfTI file %s", path);
    }
    gzbuffer(r->gz, 1u << 16);
    return RT_OK;
}

static void nf_close(nf_reader *r) {
    if (r->gz) gzclose_r(r->gz);
    r->gz = NULL;
}

/* ------------------------------------------------------------ the header */

static uint32_t nf_bswap32(uint32_t v) {
    return (v >> 24) | ((v >> 8) & 0xff00u) | ((v << 8) & 0xff0000u) | (v << 24);
}

/* Checks what both versions share once dims, datatype, bitpix and vox_offset
 * are known (host order); fills info's dims, shape and sizes. */
static rt_status nf_check_common(const char *path, int hdr_size, const int64_t dim[8],
                                 int datatype, int bitpix, double vox_offset, rt_nifti_info *info) {
    /* compare as int64 before narrowing: a NIfTI-2 dim[0] of 2^40 + 1 must
     * not pass as 1 (libnifti loops up to dim[0] over its dim[8]) */
    if (dim[0] < 1 || dim[0] > 7)
        return rt_error_set(RT_ERR_FORMAT,
                            "NIfTI file %s: dim[0] (the number of dimensions) is %lld, but must be "
                            "1..7; the header is corrupt",
                            path, (long long)dim[0]);
    int ndim = (int)dim[0];
    int64_t nvox = 1;
    for (int d = 1; d <= ndim; d++) {
        if (dim[d] < 1)
            return rt_error_set(RT_ERR_FORMAT,
                                "NIfTI file %s: dim[%d] is %lld, but every used dimension must be "
                                ">= 1; the header is corrupt",
                                path, d, (long long)dim[d]);
        if (dim[d] > NF_MAX_VOXELS / nvox)
            return rt_error_set(RT_ERR_FORMAT,
                                "NIfTI file %s: the dimensions multiply to more than 2^40 voxels; "
                                "the header is corrupt",
                                path);
        nvox *= dim[d];
    }
    for (int d = 6; d <= ndim; d++)
        if (dim[d] > 1)
            return rt_error_set(RT_ERR_UNSUPPORTED,
                                "NIfTI file %s: dim[%d] = %lld; revtorch reads up to 5 dimensions "
                                "(i, j, k, time, components)",
                                path, d, (long long)dim[d]);
    int size = nf_supported_size(datatype);
    if (size == 0) {
        const char *name = rt_nifti_datatype_str(datatype);
        if (strcmp(name, "unknown") == 0)
            return rt_error_set(RT_ERR_FORMAT,
                                "NIfTI file %s: datatype code %d is not a NIfTI datatype; the "
                                "header is corrupt",
                                path, datatype);
        return rt_error_set(RT_ERR_UNSUPPORTED,
                            "NIfTI file %s has datatype %s (code %d), which revtorch does not "
                            "read; supported: " NF_SUPPORTED
                            " (convert it, e.g. with nibabel or fslmaths -odt float)",
                            path, name, datatype);
    }
    if (bitpix != 8 * size)
        return rt_error_set(RT_ERR_FORMAT,
                            "NIfTI file %s: bitpix is %d but datatype %s has %d bits per voxel; "
                            "the header contradicts itself",
                            path, bitpix, rt_nifti_datatype_str(datatype), 8 * size);
    if (!(vox_offset >= hdr_size) || vox_offset > (double)INT32_MAX)
        return rt_error_set(RT_ERR_FORMAT,
                            "NIfTI file %s: vox_offset %g is not within %d..%d (the data must "
                            "start after the %d-byte header); the header is corrupt",
                            path, vox_offset, hdr_size, INT32_MAX, hdr_size);
    info->ndim = ndim;
    for (int d = 0; d < 8; d++) info->dim[d] = d == 0 ? ndim : d <= ndim ? dim[d] : 1;
    info->datatype = datatype;
    info->bitpix = bitpix;
    info->vox_offset = (int64_t)vox_offset;
    info->data_bytes = nvox * size;
    info->shape[0] = info->dim[4] * info->dim[5];
    info->shape[1] = info->dim[3];
    info->shape[2] = info->dim[2];
    info->shape[3] = info->dim[1];
    return RT_OK;
}

static rt_status nf_magic_error(const char *path, const char *magic, int version) {
    if (magic[0] == 'n' && magic[1] == 'i' && magic[2] == '0' + version && magic[3] == '\0')
        return rt_error_set(RT_ERR_UNSUPPORTED,
                            "NIfTI file %s is the header of a .hdr/.img pair (magic \"ni%d\"); "
                            "revtorch reads single-file .nii / .nii.gz: convert the pair, e.g. "
                            "with nibabel (nib.save(nib.load(f), 'x.nii.gz'))",
                            path, version);
    return rt_error_set(RT_ERR_FORMAT,
                        "%s has a %d-byte header but not the NIfTI-%d magic \"n+%d\" (an "
                        "ANALYZE 7.5 file, or not an image); convert it to NIfTI first",
                        path, version == 1 ? 348 : 540, version, version);
}

/* Reads and checks the header; on success *nim holds libnifti's view of it
 * (free with nifti_image_free) and info is filled. */
static rt_status nf_read_header(nf_reader *r, rt_nifti_info *info, nifti_image **nim_out) {
    const char *path = r->path;
    unsigned char raw[sizeof(nifti_2_header)];
    uint64_t got;
    *nim_out = NULL;
    memset(info, 0, sizeof *info);
    RT_TRY(nf_read(r, raw, 4, &got));
    r->compressed = !gzdirect(r->gz);
    info->compressed = r->compressed;
    if (got < 4)
        return rt_error_set(RT_ERR_FORMAT,
                            "%s is not a NIfTI file: it holds %llu bytes%s, less than the 348 of "
                            "a NIfTI-1 header",
                            path, (unsigned long long)got, r->compressed ? " after decompression" : "");
    uint32_t sizeof_hdr;
    memcpy(&sizeof_hdr, raw, 4);
    int swapped = 0, version = 0;
    if (sizeof_hdr == 348 || nf_bswap32(sizeof_hdr) == 348) version = 1;
    if (sizeof_hdr == 540 || nf_bswap32(sizeof_hdr) == 540) version = 2;
    swapped = sizeof_hdr != 348 && sizeof_hdr != 540;
    if (version == 0) {
        if (raw[0] == 0x1f && raw[1] == 0x8b)
            return rt_error_set(RT_ERR_FORMAT,
                                "NIfTI file %s is gzip-compressed twice (its decompressed content "
                                "starts with the gzip magic 1f 8b); gunzip it once",
                                path);
        return rt_error_set(RT_ERR_FORMAT,
                            "%s is not a NIfTI file: its first 4 bytes (sizeof_hdr) are %02x %02x "
                            "%02x %02x, not 348 (NIfTI-1) or 540 (NIfTI-2) in either byte order",
                            path, raw[0], raw[1], raw[2], raw[3]);
    }
    int hdr_size = version == 1 ? 348 : 540;
    RT_TRY(nf_read(r, raw + 4, (uint64_t)hdr_size - 4, &got));
    if (got < (uint64_t)hdr_size - 4)
        return rt_error_set(RT_ERR_FORMAT,
                            "NIfTI file %s is truncated inside its header: expected %d header bytes "
                            "but the file has %llu%s",
                            path, hdr_size, (unsigned long long)got + 4, nf_cut_note(r));
    info->version = version;
    int64_t dim[8];
    int datatype, bitpix;
    double vox_offset;
    nifti_image *nim = NULL;
    if (version == 1) {
        nifti_1_header h, hs;
        memcpy(&h, raw, sizeof h);
        hs = h;
        if (swapped) nifti_swap_as_nifti1(&hs);
        if (memcmp(hs.magic, "n+1", 4) != 0) return nf_magic_error(path, hs.magic, 1);
        for (int d = 0; d < 8; d++) dim[d] = hs.dim[d];
        datatype = hs.datatype;
        bitpix = hs.bitpix;
        vox_offset = hs.vox_offset;
        RT_TRY(nf_check_common(path, hdr_size, dim, datatype, bitpix, vox_offset, info));
        info->scl_slope = hs.scl_slope;
        info->scl_inter = hs.scl_inter;
        nim = nifti_convert_n1hdr2nim(h, NULL);
    } else {
        nifti_2_header h, hs;
        memcpy(&h, raw, sizeof h);
        hs = h;
        if (swapped) nifti_swap_as_nifti2(&hs);
        if (memcmp(hs.magic, "n+2", 4) != 0) return nf_magic_error(path, hs.magic, 2);
        for (int d = 0; d < 8; d++) dim[d] = hs.dim[d];
        datatype = hs.datatype;
        bitpix = hs.bitpix;
        vox_offset = (double)hs.vox_offset;
        RT_TRY(nf_check_common(path, hdr_size, dim, datatype, bitpix, vox_offset, info));
        info->scl_slope = hs.scl_slope;
        info->scl_inter = hs.scl_inter;
        nim = nifti_convert_n2hdr2nim(h, NULL);
    }
    if (!nim)
        return rt_error_set(RT_ERR_FORMAT,
                            "NIfTI file %s: libnifti refused the header (see its message above)", path);
    info->big_endian = nim->byteorder == NF_MSB_FIRST;
    /* NIfTI-1: scaling applies when scl_slope != 0; a non-finite slope is
     * unusable and a non-finite intercept counts as 0 (nibabel does both) */
    if (!isfinite(info->scl_inter)) info->scl_inter = 0.0;
    info->scaled = isfinite(info->scl_slope) && info->scl_slope != 0.0 &&
                   (info->scl_slope != 1.0 || info->scl_inter != 0.0);
    for (int d = 0; d < 8; d++) info->pixdim[d] = d == 0 ? 0.0 : d <= info->ndim ? nim->pixdim[d] : 1.0;
    info->sform_code = nim->sform_code;
    info->qform_code = nim->qform_code;
    /* libnifti leaves qto_xyz = diag(pixdim) when qform_code <= 0 */
    const nifti_dmat44 *m = nim->sform_code > 0 ? &nim->sto_xyz : &nim->qto_xyz;
    info->affine_source = nim->sform_code > 0   ? RT_NIFTI_AFFINE_SFORM
                          : nim->qform_code > 0 ? RT_NIFTI_AFFINE_QFORM
                                                : RT_NIFTI_AFFINE_PIXDIM;
    for (int a = 0; a < 4; a++)
        for (int b = 0; b < 4; b++) info->affine[a][b] = m->m[a][b];
    info->affine[3][0] = info->affine[3][1] = info->affine[3][2] = 0.0;
    info->affine[3][3] = 1.0;
    *nim_out = nim;
    return RT_OK;
}

/* Checks that the file can hold the data the header declares, before any
 * allocation: exactly for a plain file, by deflate's ratio for gzip. */
static rt_status nf_check_size(const nf_reader *r, const rt_nifti_info *info) {
    uint64_t need = (uint64_t)info->vox_offset + (uint64_t)info->data_bytes;
    if (!r->compressed && (uint64_t)r->file_size < need)
        return rt_error_set(RT_ERR_FORMAT,
                            "NIfTI file %s is truncated: its header declares %lld voxels of %s = "
                            "%lld data bytes from offset %lld, so the file needs %llu bytes, but it "
                            "has %lld (%lld data bytes); the download or copy was incomplete",
                            r->path, (long long)(info->data_bytes / (info->bitpix / 8)),
                            rt_nifti_datatype_str(info->datatype), (long long)info->data_bytes,
                            (long long)info->vox_offset, (unsigned long long)need,
                            (long long)r->file_size,
                            (long long)(r->file_size > info->vox_offset ? r->file_size - info->vox_offset : 0));
    if (r->compressed && need / NF_MAX_GZIP_RATIO > (uint64_t)r->file_size)
        return rt_error_set(RT_ERR_FORMAT,
                            "NIfTI file %s: its header declares %lld data bytes, more than a gzip "
                            "file of %lld bytes can hold; the file is truncated or the header corrupt",
                            r->path, (long long)info->data_bytes, (long long)r->file_size);
    return RT_OK;
}

rt_status rt_nifti_read_info(const char *path, rt_nifti_info *info) {
    if (!path) return rt_error_set(RT_ERR_INVALID_ARG, "rt_nifti_read_info: path is NULL");
    if (!info) return rt_error_set(RT_ERR_INVALID_ARG, "rt_nifti_read_info: info is NULL");
    nf_reader r;
    RT_TRY(nf_open(path, &r));
    nifti_image *nim = NULL;
    rt_status s = nf_read_header(&r, info, &nim);
    if (s == RT_OK) s = nf_check_size(&r, info);
    nifti_image_free(nim);
    nf_close(&r);
    return s;
}

/* Reads the voxels into buf (data_bytes) and converts them to host order. */
static rt_status nf_read_voxels(nf_reader *r, const rt_nifti_info *info, const nifti_image *nim,
                                void *buf) {
    uint64_t got;
    uint64_t skip = (uint64_t)info->vox_offset - (info->version == 1 ? 348u : 540u);
    RT_TRY(nf_read(r, NULL, skip, &got));
    if (got == skip) RT_TRY(nf_read(r, buf, (uint64_t)info->data_bytes, &got));
    else got = 0;
    if (got < (uint64_t)info->data_bytes)
        return rt_error_set(RT_ERR_FORMAT,
                            "NIfTI file %s is truncated: its header declares %lld data bytes (%s) "
                            "from offset %lld, but only %llu data bytes follow%s; the download or "
                            "copy was incomplete: fetch the file again",
                            r->path, (long long)info->data_bytes,
                            rt_nifti_datatype_str(info->datatype), (long long)info->vox_offset,
                            (unsigned long long)got, nf_cut_note(r));
    if (nim->swapsize > 1 && nim->byteorder != nifti_short_order())
        nifti_swap_Nbytes(info->data_bytes / nim->swapsize, nim->swapsize, buf);
    return RT_OK;
}

/* Raw voxel n of a buffer of datatype dt, as a double (exact for every type). */
static double nf_raw_at(const void *buf, int dt, int64_t n) {
    switch (dt) {
    case DT_UINT8: return ((const uint8_t *)buf)[n];
    case DT_INT8: return ((const int8_t *)buf)[n];
    case DT_INT16: return ((const int16_t *)buf)[n];
    case DT_UINT16: return ((const uint16_t *)buf)[n];
    case DT_INT32: return ((const int32_t *)buf)[n];
    case DT_FLOAT32: return ((const float *)buf)[n];
    default: return ((const double *)buf)[n];
    }
}

/* raw -> f32 with the affine scaling; one loop per type so it vectorises. */
#define NF_TO_F32(T)                                                                   \
    do {                                                                               \
        const T *s_ = (const T *)raw;                                                  \
        if (scaled)                                                                    \
            for (int64_t n_ = 0; n_ < count; n_++)                                     \
                dst[n_] = (float)(slope * (double)s_[n_] + inter);                     \
        else                                                                           \
            for (int64_t n_ = 0; n_ < count; n_++) dst[n_] = (float)s_[n_];            \
    } while (0)

static void nf_to_f32(const void *raw, int dt, int64_t count, int scaled, double slope,
                      double inter, float *dst) {
    switch (dt) {
    case DT_UINT8: NF_TO_F32(uint8_t); break;
    case DT_INT8: NF_TO_F32(int8_t); break;
    case DT_INT16: NF_TO_F32(int16_t); break;
    case DT_UINT16: NF_TO_F32(uint16_t); break;
    case DT_INT32: NF_TO_F32(int32_t); break;
    case DT_FLOAT32: NF_TO_F32(float); break;
    default: NF_TO_F32(double); break;
    }
}

/* raw -> exact int32; fails naming the first voxel that is not an integer. */
static rt_status nf_to_i32(const char *path, const rt_nifti_info *info, const void *raw,
                           int64_t count, int32_t *dst) {
    for (int64_t n = 0; n < count; n++) {
        double v = nf_raw_at(raw, info->datatype, n);
        if (info->scaled) v = info->scl_slope * v + info->scl_inter;
        if (!(v >= -2147483648.0 && v <= 2147483647.0) || v != floor(v)) {
            int64_t ni = info->dim[1], nj = info->dim[2], nk = info->dim[3];
            return rt_error_set(RT_ERR_DTYPE,
                                "NIfTI file %s is not a label map: voxel (i=%lld, j=%lld, k=%lld, "
                                "channel %lld) is %.9g%s, not an integer in int32 range; read it "
                                "with rt_nifti_read (float32) instead",
                                path, (long long)(n % ni), (long long)(n / ni % nj),
                                (long long)(n / ni / nj % nk), (long long)(n / ni / nj / nk), v,
                                info->scaled ? " after scl_slope/scl_inter" : "");
        }
        dst[n] = (int32_t)v;
    }
    return RT_OK;
}

/* The shared reader: f32 (labels = 0) or exact int32 (labels = 1). */
static rt_status nf_read_volume(const char *path, rt_nifti_info *info_out, int labels,
                                rt_tensor **out) {
    if (!out) return rt_error_set(RT_ERR_INVALID_ARG, "rt_nifti_read: out is NULL");
    *out = NULL;
    if (!path) return rt_error_set(RT_ERR_INVALID_ARG, "rt_nifti_read: path is NULL");
    rt_nifti_info info;
    nf_reader r;
    RT_TRY(nf_open(path, &r));
    nifti_image *nim = NULL;
    rt_tensor *t = NULL;
    void *raw = NULL;
    rt_status s = nf_read_header(&r, &info, &nim);
    if (s == RT_OK) s = nf_check_size(&r, &info);
    if (s == RT_OK) {
        t = rt_tensor_create(4, info.shape, labels ? RT_I32 : RT_F32, RT_DEVICE_CPU, RT_MEM_DATA);
        if (!t) s = rt_error_last_status();
    }
    /* read straight into the output when the file already holds its type */
    int direct = !labels ? info.datatype == DT_FLOAT32 : info.datatype == DT_INT32 && !info.scaled;
    if (s == RT_OK && !direct) s = rt_mem_alloc((size_t)info.data_bytes, RT_MEM_DATA, &raw);
    if (s == RT_OK) s = nf_read_voxels(&r, &info, nim, direct ? rt_tensor_data(t) : raw);
    if (s == RT_OK) {
        int64_t count = rt_tensor_numel(t);
        if (labels && !direct) s = nf_to_i32(path, &info, raw, count, rt_tensor_data(t));
        else if (!labels)
            nf_to_f32(direct ? rt_tensor_data(t) : raw, info.datatype, count, info.scaled,
                      info.scl_slope, info.scl_inter, rt_tensor_f32(t));
    }
    if (raw) rt_mem_free(raw, (size_t)info.data_bytes, RT_MEM_DATA);
    nifti_image_free(nim);
    nf_close(&r);
    if (s != RT_OK) {
        rt_tensor_release(t);
        return s;
    }
    if (info_out) *info_out = info;
    *out = t;
    return RT_OK;
}

rt_status rt_nifti_read(const char *path, rt_nifti_info *info, rt_tensor **out) {
    return nf_read_volume(path, info, 0, out);
}

rt_status rt_nifti_read_labels(const char *path, rt_nifti_info *info, rt_tensor **out) {
    return nf_read_volume(path, info, 1, out);
}

/* ------------------------------------------------------------ writing */

/* Smallest of uint8, int16, int32 holding every value of an integer tensor. */
static int nf_label_datatype(const rt_tensor *t) {
    if (t->dtype == RT_U8) return DT_UINT8;
    const int32_t *v = rt_tensor_data(t);
    int32_t lo = 0, hi = 0;
    for (int64_t n = 0, c = rt_tensor_numel(t); n < c; n++) {
        if (v[n] < lo) lo = v[n];
        if (v[n] > hi) hi = v[n];
    }
    if (lo >= 0 && hi <= 255) return DT_UINT8;
    if (lo >= INT16_MIN && hi <= INT16_MAX) return DT_INT16;
    return DT_INT32;
}

/* Output of the writer: a plain fd, or zlib on a dup of it. */
typedef struct nf_writer {
    int fd;
    gzFile gz;
    const char *tmp;
} nf_writer;

static rt_status nf_write_bytes(nf_writer *w, const void *buf, size_t n) {
    const unsigned char *p = buf;
    while (n > 0) {
        size_t chunk = n > NF_CHUNK ? NF_CHUNK : n;
        if (w->gz) {
            int k = gzwrite(w->gz, p, (unsigned)chunk);
            if (k <= 0) {
                int zerr;
                const char *msg = gzerror(w->gz, &zerr);
                return rt_error_set(RT_ERR_IO, "cannot write %s: %s", w->tmp,
                                    zerr == Z_ERRNO ? strerror(errno) : msg);
            }
            chunk = (size_t)k;
        } else {
            ssize_t k = write(w->fd, p, chunk);
            if (k < 0 && errno == EINTR) continue;
            if (k <= 0)
                return rt_error_set(RT_ERR_IO, "cannot write %s: %s", w->tmp,
                                    k < 0 ? strerror(errno) : "no progress");
            chunk = (size_t)k;
        }
        p += chunk;
        n -= chunk;
    }
    return RT_OK;
}

/* The voxels in the chosen datatype, converted in slices of a small buffer
 * (never a second copy of the volume). */
static rt_status nf_write_voxels(nf_writer *w, const rt_tensor *t, int dt) {
    int64_t count = rt_tensor_numel(t);
    if (t->dtype == RT_F32 || (t->dtype == RT_U8 && dt == DT_UINT8) || (t->dtype == RT_I32 && dt == DT_INT32))
        return nf_write_bytes(w, rt_tensor_data(t), rt_tensor_nbytes(t));
    unsigned char buf[1 << 15];
    const int32_t *src = rt_tensor_data(t);
    int size = nf_supported_size(dt);
    int64_t per = (int64_t)(sizeof buf / (size_t)size);
    for (int64_t start = 0; start < count; start += per) {
        int64_t n = count - start < per ? count - start : per;
        for (int64_t k = 0; k < n; k++) {
            if (dt == DT_UINT8) buf[k] = (uint8_t)src[start + k];
            else {
                int16_t v = (int16_t)src[start + k];
                memcpy(buf + 2 * k, &v, 2);
            }
        }
        RT_TRY(nf_write_bytes(w, buf, (size_t)(n * size)));
    }
    return RT_OK;
}

/* libnifti's view of the volume to write (no data attached). */
static rt_status nf_make_nim(const rt_tensor *t, const double affine[4][4], int dt, nifti_image **out) {
    int c4 = t->ndim == 4;
    int64_t C = c4 ? t->shape[0] : 1;
    int64_t dims[8] = {C > 1 ? 5 : 3, t->shape[c4 + 2], t->shape[c4 + 1], t->shape[c4], 1, C, 1, 1};
    nifti_image *nim = nifti_make_new_nim(dims, dt, 0);
    if (!nim) return rt_error_set(RT_ERR_OOM, "rt_nifti_write: libnifti could not build the header");
    nim->scl_slope = 1.0;
    nim->scl_inter = 0.0;
    nim->xyz_units = NIFTI_UNITS_MM;
    if (C > 1) nim->intent_code = NIFTI_INTENT_VECTOR;
    if (affine) {
        nifti_dmat44 m;
        for (int a = 0; a < 4; a++)
            for (int b = 0; b < 4; b++) m.m[a][b] = a == 3 ? (b == 3 ? 1.0 : 0.0) : affine[a][b];
        double qb, qc, qd, qx, qy, qz, dx, dy, dz, qfac;
        nifti_dmat44_to_quatern(m, &qb, &qc, &qd, &qx, &qy, &qz, &dx, &dy, &dz, &qfac);
        nim->sform_code = NIFTI_XFORM_SCANNER_ANAT;
        nim->sto_xyz = m;
        nim->sto_ijk = nifti_dmat44_inverse(m);
        nim->qform_code = NIFTI_XFORM_SCANNER_ANAT;
        nim->quatern_b = qb;
        nim->quatern_c = qc;
        nim->quatern_d = qd;
        nim->qoffset_x = qx;
        nim->qoffset_y = qy;
        nim->qoffset_z = qz;
        nim->qfac = qfac;
        /* pixdim = the affine's column norms, as nibabel's set_sform */
        double norm[3];
        for (int b = 0; b < 3; b++)
            norm[b] = sqrt(m.m[0][b] * m.m[0][b] + m.m[1][b] * m.m[1][b] + m.m[2][b] * m.m[2][b]);
        nim->dx = nim->pixdim[1] = norm[0];
        nim->dy = nim->pixdim[2] = norm[1];
        nim->dz = nim->pixdim[3] = norm[2];
    }
    *out = nim;
    return RT_OK;
}

static rt_status nf_write_file(const char *path, const char *tmp, const rt_tensor *t,
                               const double affine[4][4]) {
    int dt = t->dtype == RT_F32 ? DT_FLOAT32 : nf_label_datatype(t);
    nifti_image *nim = NULL;
    RT_TRY(nf_make_nim(t, affine, dt, &nim));
    int v2 = 0;
    for (int d = 1; d <= 5; d++) v2 |= nim->dim[d] > INT16_MAX;
    union {
        nifti_1_header h1;
        nifti_2_header h2;
    } hdr;
    size_t hdr_size;
    int bad;
    if (v2) {
        nim->nifti_type = NIFTI_FTYPE_NIFTI2_1;
        bad = nifti_convert_nim2n2hdr(nim, &hdr.h2);
        memcpy(hdr.h2.magic, "n+2\0\r\n\032\n", 8);
        hdr.h2.vox_offset = 544;
        hdr_size = sizeof hdr.h2;
    } else {
        nim->nifti_type = NIFTI_FTYPE_NIFTI1_1;
        bad = nifti_convert_nim2n1hdr(nim, &hdr.h1);
        memcpy(hdr.h1.magic, "n+1", 4);
        hdr.h1.vox_offset = 352;
        hdr_size = sizeof hdr.h1;
    }
    nifti_image_free(nim);
    if (bad) return rt_error_set(RT_ERR_OOM, "rt_nifti_write: libnifti could not build the header of %s", path);

    size_t n = strlen(path);
    int gz = n >= 3 && strcmp(path + n - 3, ".gz") == 0;
    nf_writer w = {.fd = -1, .gz = NULL, .tmp = tmp};
    w.fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (w.fd < 0)
        return rt_error_set(RT_ERR_IO, "cannot create %s (to write %s): %s", tmp, path, strerror(errno));
    rt_status s = RT_OK;
    if (gz) {
        int fd2 = dup(w.fd);
        w.gz = fd2 < 0 ? NULL : gzdopen(fd2, "wb6");
        if (!w.gz) {
            if (fd2 >= 0) close(fd2);
            s = rt_error_set(RT_ERR_IO, "cannot start gzip output %s", tmp);
        }
    }
    static const unsigned char no_extensions[4] = {0, 0, 0, 0};
    if (s == RT_OK) s = nf_write_bytes(&w, &hdr, hdr_size);
    if (s == RT_OK) s = nf_write_bytes(&w, no_extensions, 4);
    if (s == RT_OK) s = nf_write_voxels(&w, t, dt);
    if (w.gz) {
        int z = gzclose_w(w.gz);
        if (s == RT_OK && z != Z_OK)
            s = rt_error_set(RT_ERR_IO, "cannot finish gzip output %s: %s", tmp,
                             z == Z_ERRNO ? strerror(errno) : "zlib error");
    }
    if (s == RT_OK && fsync(w.fd) != 0)
        s = rt_error_set(RT_ERR_IO, "cannot fsync %s: %s", tmp, strerror(errno));
    if (close(w.fd) != 0 && s == RT_OK)
        s = rt_error_set(RT_ERR_IO, "cannot close %s: %s", tmp, strerror(errno));
    if (s == RT_OK && rename(tmp, path) != 0)
        s = rt_error_set(RT_ERR_IO, "cannot rename %s to %s: %s", tmp, path, strerror(errno));
    return s;
}

rt_status rt_nifti_write(const char *path, const rt_tensor *t, const double affine[4][4]) {
    if (!path) return rt_error_set(RT_ERR_INVALID_ARG, "rt_nifti_write: path is NULL");
    if (!t) return rt_error_set(RT_ERR_INVALID_ARG, "rt_nifti_write: tensor is NULL");
    if (rt_tensor_is_meta(t) || !rt_tensor_data(t))
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_nifti_write(%s): the tensor has no data (meta device)", path);
    if (t->ndim != 3 && t->ndim != 4)
        return rt_error_set(RT_ERR_SHAPE,
                            "rt_nifti_write(%s): tensor has %d dimensions; give [D, H, W] or "
                            "[C, D, H, W]",
                            path, t->ndim);
    if (t->layout != RT_LAYOUT_PLAIN)
        return rt_error_set(RT_ERR_INVALID_ARG,
                            "rt_nifti_write(%s): tensor is in the blocked layout; convert it to "
                            "plain first",
                            path);
    if (t->dtype != RT_F32 && t->dtype != RT_I32 && t->dtype != RT_U8)
        return rt_error_set(RT_ERR_DTYPE,
                            "rt_nifti_write(%s): dtype %s; write float32 (volumes) or int32/uint8 "
                            "(label maps)",
                            path, rt_dtype_str(t->dtype));
    for (int d = 0; d < t->ndim; d++)
        if (t->shape[d] < 1)
            return rt_error_set(RT_ERR_SHAPE, "rt_nifti_write(%s): dimension %d is %lld; every size must be >= 1",
                                path, d, (long long)t->shape[d]);
    if (affine)
        for (int a = 0; a < 3; a++)
            for (int b = 0; b < 4; b++)
                if (!(fabs(affine[a][b]) <= FLT_MAX)) /* the sform is float32 */
                    return rt_error_set(RT_ERR_NONFINITE,
                                        "rt_nifti_write(%s): affine[%d][%d] = %g is not a finite float32 "
                                        "(NIfTI stores the sform as float32)",
                                        path, a, b, affine[a][b]);
    size_t cap = strlen(path) + 32;
    char *tmp = malloc(cap);
    if (!tmp) return rt_error_set(RT_ERR_OOM, "rt_nifti_write: out of memory");
    snprintf(tmp, cap, "%s.tmp.%ld", path, (long)getpid());
    rt_status s = nf_write_file(path, tmp, t, affine);
    if (s != RT_OK) unlink(tmp);
    free(tmp);
    return s;
}
