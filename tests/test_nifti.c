/* NIfTI reader and writer (data/nifti.h) on small files this test crafts
 * itself: headers are filled through libnifti's own structs (nifti1.h,
 * nifti2.h), byte-swapped with its swap routines for big-endian files, and
 * written plain or gzip-compressed under either name. Expected values are
 * computed from the bytes written, never copied from a run. */
#include <dirent.h>
#include <math.h>
#include <nifti2_io.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "core/mem.h"
#include "core/tensor.h"
#include "data/nifti.h"
#include "rt_test.h"

/* ---- scratch directory ---------------------------------------------------- */

static char g_dir[64];

static void remove_dir(void) {
    DIR *d = opendir(g_dir);
    if (!d) return;
    struct dirent *e;
    char p[512];
    while ((e = readdir(d)))
        if (e->d_name[0] != '.') {
            snprintf(p, sizeof p, "%s/%s", g_dir, e->d_name);
            unlink(p);
        }
    closedir(d);
    rmdir(g_dir);
}

/* DIR/name in this run's scratch directory (removed at exit). Static buffer
 * ring: the last 8 results stay valid. */
static const char *tpath(const char *name) {
    static char ring[8][320];
    static int next;
    if (!g_dir[0]) {
        strcpy(g_dir, "/tmp/rt_test_nifti_XXXXXX");
        if (!mkdtemp(g_dir)) exit(2);
        atexit(remove_dir);
    }
    char *p = ring[next++ % 8];
    snprintf(p, 320, "%s/%s", g_dir, name);
    return p;
}

static int count_dir_entries(void) {
    DIR *d = opendir(g_dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d))) n += e->d_name[0] != '.';
    if (d) closedir(d);
    return n;
}

/* Writes bytes to DIR/name, gzip-compressed when gz (whatever the name). */
static const char *put(const char *name, const void *bytes, size_t n, int gz) {
    const char *p = tpath(name);
    if (gz) {
        gzFile g = gzopen(p, "wb");
        if (!g || (n && gzwrite(g, bytes, (unsigned)n) != (int)n) || gzclose(g) != Z_OK) exit(2);
    } else {
        FILE *f = fopen(p, "wb");
        if (!f || (n && fwrite(bytes, 1, n, f) != n) || fclose(f) != 0) exit(2);
    }
    return p;
}

/* ---- crafting files ------------------------------------------------------- */

/* A NIfTI-1 single-file header: dims (dims[0] = ndim), datatype, no scaling
 * (slope 0), no qform/sform, vox_offset 352, pixdim 1. */
static nifti_1_header n1_header(const int64_t *dims, int dt) {
    nifti_1_header h;
    memset(&h, 0, sizeof h);
    h.sizeof_hdr = 348;
    for (int d = 0; d < 8; d++) h.dim[d] = (short)(d <= dims[0] ? dims[d] : 1);
    int nbyper, swapsize;
    nifti_datatype_sizes(dt, &nbyper, &swapsize);
    h.datatype = (short)dt;
    h.bitpix = (short)(8 * nbyper);
    for (int d = 0; d < 8; d++) h.pixdim[d] = 1.0f;
    h.vox_offset = 352.0f;
    memcpy(h.magic, "n+1", 4);
    return h;
}

static int elem_size(int dt) {
    int nbyper, swapsize;
    nifti_datatype_sizes(dt, &nbyper, &swapsize);
    return nbyper;
}

/* header (swapped to big-endian when be) + 4 extension bytes + data (host
 * order, swapped when be) into a new malloc'ed buffer; *n its length. */
static unsigned char *n1_file(nifti_1_header h, const void *data, int64_t count, int be, size_t *n) {
    size_t esz = (size_t)elem_size(h.datatype), dbytes = (size_t)count * esz;
    unsigned char *buf = calloc(1, 352 + dbytes);
    if (!buf) exit(2);
    memcpy(buf + 352, data, dbytes);
    if (be) {
        nifti_swap_as_nifti1(&h);
        if (esz > 1) nifti_swap_Nbytes((int64_t)count, (int)esz, buf + 352);
    }
    memcpy(buf, &h, 348);
    *n = 352 + dbytes;
    return buf;
}

static const char *n1_put(const char *name, nifti_1_header h, const void *data, int64_t count,
                          int be, int gz) {
    size_t n;
    unsigned char *b = n1_file(h, data, count, be, &n);
    const char *p = put(name, b, n, gz);
    free(b);
    return p;
}

static int64_t data_live(void) {
    rt_memstats s;
    rt_memstats_get(&s);
    return s.live[RT_MEM_DATA];
}

static int msg_has(const char *sub) {
    if (strstr(rt_error_last(), sub)) return 1;
    fprintf(stderr, "message lacks \"%s\": %s\n", sub, rt_error_last());
    return 0;
}

/* Reads expecting `code`: no tensor, no DATA bytes left, message names the file. */
static int read_fails(const char *path, rt_status code) {
    int64_t before = data_live();
    rt_tensor *t = (rt_tensor *)&before;
    rt_status s = rt_nifti_read(path, NULL, &t);
    if (s != code) {
        fprintf(stderr, "read %s: %s, expected %s: %s\n", path, rt_status_str(s), rt_status_str(code),
                rt_error_last());
        return 0;
    }
    if (t || data_live() != before) {
        fprintf(stderr, "failed read left a tensor or DATA bytes\n");
        return 0;
    }
    return msg_has(path);
}

static const int64_t k_dims3[8] = {3, 2, 3, 2, 1, 1, 1, 1};

/* ---- datatypes, memory ----------------------------------------------------- */

/* One datatype: f32 values, exact labels for integer types, the DATA peak
 * while loading = raw bytes + f32 output (only the output for float32). */
static void check_type(int dt, const void *vals, const double *expect, int be) {
    nifti_1_header h = n1_header(k_dims3, dt);
    char name[64];
    snprintf(name, sizeof name, "dt%d_%d.nii", dt, be);
    const char *p = n1_put(name, h, vals, 12, be, 0);
    int64_t before = data_live();
    rt_memstats_reset_peaks();
    rt_nifti_info info;
    rt_tensor *t = NULL;
    CHECK_OK(rt_nifti_read(p, &info, &t));
    rt_memstats ms;
    rt_memstats_get(&ms);
    int64_t out_bytes = 12 * 4, raw_bytes = 12 * elem_size(dt);
    CHECK_EQ_INT(ms.peak[RT_MEM_DATA] - before, dt == DT_FLOAT32 ? out_bytes : out_bytes + raw_bytes);
    CHECK_EQ_INT(info.datatype, dt);
    CHECK_EQ_INT(info.big_endian, be);
    CHECK_EQ_INT(info.scaled, 0);
    CHECK_EQ_INT(t->ndim, 4);
    CHECK(t->dtype == RT_F32);
    CHECK(t->shape[0] == 1 && t->shape[1] == 2 && t->shape[2] == 3 && t->shape[3] == 2);
    for (int i = 0; i < 12; i++) CHECK_EQ_INT(rt_tensor_f32(t)[i] == (float)expect[i], 1);
    rt_tensor_release(t);
    if (dt != DT_FLOAT32 && dt != DT_FLOAT64) {
        CHECK_OK(rt_nifti_read_labels(p, NULL, &t));
        CHECK(t->dtype == RT_I32);
        for (int i = 0; i < 12; i++) CHECK_EQ_INT(((int32_t *)rt_tensor_data(t))[i], (int64_t)expect[i]);
        rt_tensor_release(t);
    }
    CHECK_EQ_INT(data_live(), before);
}

static void test_every_datatype(void) {
    uint8_t u8[12];
    int8_t i8[12];
    int16_t i16[12];
    uint16_t u16[12];
    int32_t i32[12];
    float f32[12];
    double f64[12];
    double e[7][12];
    for (int i = 0; i < 12; i++) {
        e[0][i] = u8[i] = (uint8_t)(i == 11 ? 255 : i * 7);
        e[1][i] = i8[i] = (int8_t)(i == 0 ? -128 : i == 11 ? 127 : i * 5 - 30);
        e[2][i] = i16[i] = (int16_t)(i == 0 ? -32768 : i == 11 ? 32767 : i * 1000 - 4000);
        e[3][i] = u16[i] = (uint16_t)(i == 11 ? 65535 : i * 3000);
        /* INT32_MAX has no float32: the f32 read rounds it, the label read keeps it */
        e[4][i] = i32[i] = i == 0 ? INT32_MIN : i == 11 ? INT32_MAX : i == 10 ? 16777217 : i * 100000 - 7;
        e[5][i] = f32[i] = (float)(i * 0.25 - 1.5);
        f64[i] = i * 0.1 - 0.55;
        e[6][i] = (float)f64[i];
    }
    for (int be = 0; be < 2; be++) {
        check_type(DT_UINT8, u8, e[0], be);
        check_type(DT_INT8, i8, e[1], be);
        check_type(DT_INT16, i16, e[2], be);
        check_type(DT_UINT16, u16, e[3], be);
        check_type(DT_INT32, i32, e[4], be);
        check_type(DT_FLOAT32, f32, e[5], be);
        check_type(DT_FLOAT64, f64, e[6], be);
        if (rt_test_failed_) return;
    }
}

/* ---- scaling --------------------------------------------------------------- */

static void test_scaling(void) {
    const int64_t dims[8] = {1, 4};
    int16_t raw[4] = {0, 100, -100, 32767};
    nifti_1_header h = n1_header(dims, DT_INT16);
    h.scl_slope = 0.5f;
    h.scl_inter = 10.0f;
    rt_nifti_info info;
    rt_tensor *t = NULL;
    CHECK_OK(rt_nifti_read(n1_put("scaled.nii", h, raw, 4, 0, 0), &info, &t));
    const float want[4] = {10.0f, 60.0f, -40.0f, 16393.5f};
    for (int i = 0; i < 4; i++) CHECK_EQ_INT(rt_tensor_f32(t)[i] == want[i], 1);
    CHECK_EQ_INT(info.scaled, 1);
    rt_tensor_release(t);
    /* slope 0, NaN or Inf: raw values, whatever the intercept */
    const float slopes[3] = {0.0f, NAN, INFINITY};
    for (int s = 0; s < 3; s++) {
        h.scl_slope = slopes[s];
        h.scl_inter = 10.0f;
        CHECK_OK(rt_nifti_read(n1_put("unscaled.nii", h, raw, 4, s == 1, 0), &info, &t));
        CHECK_EQ_INT(info.scaled, 0);
        for (int i = 0; i < 4; i++) CHECK_EQ_INT(rt_tensor_f32(t)[i] == (float)raw[i], 1);
        rt_tensor_release(t);
    }
    /* labels through a scaling that keeps them integral: exact; else refused */
    h.scl_slope = 2.0f;
    h.scl_inter = 1.0f;
    CHECK_OK(rt_nifti_read_labels(n1_put("lab2.nii", h, raw, 4, 0, 0), NULL, &t));
    for (int i = 0; i < 4; i++) CHECK_EQ_INT(((int32_t *)rt_tensor_data(t))[i], 2 * raw[i] + 1);
    rt_tensor_release(t);
    h.scl_slope = 0.5f;
    t = (rt_tensor *)&h;
    int64_t before = data_live();
    CHECK_EQ_INT(rt_nifti_read_labels(tpath("scaled.nii"), NULL, &t), RT_ERR_DTYPE);
    CHECK(t == NULL && data_live() == before);
    /* voxel 2 (i=2): 0.5 * -100 + 10 = -40 is integral; voxel 3: 16393.5 */
    CHECK(msg_has("i=3, j=0, k=0") && msg_has("16393.5"));
}

/* ---- dimensions ------------------------------------------------------------ */

static void test_dims(void) {
    float v[24];
    for (int i = 0; i < 24; i++) v[i] = (float)i;
    /* 4-D with a singleton time axis: squeezed to one channel */
    const int64_t d4[8] = {4, 2, 3, 4, 1};
    rt_tensor *t = NULL;
    rt_nifti_info info;
    CHECK_OK(rt_nifti_read(n1_put("d4.nii", n1_header(d4, DT_FLOAT32), v, 24, 0, 0), &info, &t));
    CHECK(t->shape[0] == 1 && t->shape[1] == 4 && t->shape[2] == 3 && t->shape[3] == 2);
    /* tensor[0][k][j][i] == voxel (i, j, k) = i + 2 j + 6 k */
    CHECK_EQ_INT(rt_tensor_f32(t)[(3 * 3 + 2) * 2 + 1], 1 + 2 * 2 + 6 * 3);
    rt_tensor_release(t);
    /* 5-D vector image: 3 components become 3 channels */
    const int64_t d5[8] = {5, 2, 2, 2, 1, 3};
    CHECK_OK(rt_nifti_read(n1_put("d5.nii", n1_header(d5, DT_FLOAT32), v, 24, 0, 0), &info, &t));
    CHECK(t->shape[0] == 3 && t->shape[1] == 2 && t->shape[2] == 2 && t->shape[3] == 2);
    CHECK_EQ_INT(rt_tensor_f32(t)[8 * 2 + 5], 21);
    rt_tensor_release(t);
    /* a 6th dimension > 1 is refused; a zero dimension is a corrupt header */
    const int64_t d6[8] = {6, 2, 1, 1, 1, 1, 2};
    CHECK(read_fails(n1_put("d6.nii", n1_header(d6, DT_UINT8), v, 4, 0, 0), RT_ERR_UNSUPPORTED));
    nifti_1_header h = n1_header(k_dims3, DT_UINT8);
    h.dim[2] = 0;
    CHECK(read_fails(n1_put("dim0.nii", h, v, 0, 0, 0), RT_ERR_FORMAT) && msg_has("dim[2] is 0"));
    h = n1_header(k_dims3, DT_UINT8);
    h.dim[0] = 9;
    CHECK(read_fails(n1_put("ndim9.nii", h, v, 12, 0, 0), RT_ERR_FORMAT) && msg_has("dim[0]"));
}

/* ---- geometry -------------------------------------------------------------- */

static void test_geometry(void) {
    uint8_t v[12] = {0};
    nifti_1_header h = n1_header(k_dims3, DT_UINT8);
    h.pixdim[1] = 2.0f;
    h.pixdim[2] = 3.0f;
    h.pixdim[3] = 4.0f;
    rt_nifti_info info;
    /* neither code: pixdim diagonal, the all-zero srow/quaternion are no error */
    CHECK_OK(rt_nifti_read_info(n1_put("g0.nii", h, v, 12, 0, 0), &info));
    CHECK_EQ_INT(info.affine_source, RT_NIFTI_AFFINE_PIXDIM);
    CHECK(info.affine[0][0] == 2 && info.affine[1][1] == 3 && info.affine[2][2] == 4 && info.affine[0][3] == 0);
    /* qform only: quaternion (0,0,1) = 180 degrees about z, qfac -1 flips k */
    h.qform_code = 1;
    h.quatern_d = 1.0f;
    h.pixdim[0] = -1.0f;
    h.qoffset_x = 5.0f;
    h.qoffset_y = 6.0f;
    h.qoffset_z = 7.0f;
    CHECK_OK(rt_nifti_read_info(n1_put("gq.nii", h, v, 12, 1, 0), &info));
    CHECK_EQ_INT(info.affine_source, RT_NIFTI_AFFINE_QFORM);
    CHECK_NEAR(info.affine[0][0], -2, 1e-6);
    CHECK_NEAR(info.affine[1][1], -3, 1e-6);
    CHECK_NEAR(info.affine[2][2], -4, 1e-6);
    CHECK(info.affine[0][3] == 5 && info.affine[1][3] == 6 && info.affine[2][3] == 7);
    /* sform wins over the qform when its code is non-zero */
    h.sform_code = 2;
    const float s[3][4] = {{0, 1.5f, 0, -10}, {2.5f, 0, 0, 20}, {0, 0, -3.5f, 30}};
    memcpy(h.srow_x, s[0], sizeof s[0]);
    memcpy(h.srow_y, s[1], sizeof s[1]);
    memcpy(h.srow_z, s[2], sizeof s[2]);
    CHECK_OK(rt_nifti_read_info(n1_put("gs.nii", h, v, 12, 0, 1), &info));
    CHECK_EQ_INT(info.affine_source, RT_NIFTI_AFFINE_SFORM);
    CHECK_EQ_INT(info.sform_code, 2);
    for (int a = 0; a < 3; a++)
        for (int b = 0; b < 4; b++) CHECK_EQ_INT(info.affine[a][b] == s[a][b], 1);
    CHECK(info.affine[3][0] == 0 && info.affine[3][3] == 1);
    CHECK_EQ_INT(info.compressed, 1);
}

/* ---- content, not name ---------------------------------------------------- */

static void test_content_not_name(void) {
    int16_t v[12];
    for (int i = 0; i < 12; i++) v[i] = (int16_t)(i * 11 - 40);
    nifti_1_header h = n1_header(k_dims3, DT_INT16);
    const char *paths[2] = {n1_put("gzip_inside.nii", h, v, 12, 1, 1),
                            n1_put("plain_inside.nii.gz", h, v, 12, 0, 0)};
    for (int k = 0; k < 2; k++) {
        rt_tensor *t = NULL;
        rt_nifti_info info;
        CHECK_OK(rt_nifti_read(paths[k], &info, &t));
        CHECK_EQ_INT(info.compressed, k == 0);
        for (int i = 0; i < 12; i++) CHECK_EQ_INT(rt_tensor_f32(t)[i], v[i]);
        rt_tensor_release(t);
    }
    /* gzip twice, ANALYZE 7.5 (no magic), a header/image pair, not NIfTI */
    size_t n;
    unsigned char *b = n1_file(h, v, 12, 0, &n);
    const char *once = n1_put("once.nii.gz", h, v, 12, 0, 1);
    FILE *f = fopen(once, "rb");
    unsigned char gzbytes[4096];
    size_t gn = fread(gzbytes, 1, sizeof gzbytes, f);
    fclose(f);
    CHECK(read_fails(put("twice.nii.gz", gzbytes, gn, 1), RT_ERR_FORMAT) && msg_has("twice"));
    memcpy(b + 344, "\0\0\0\0", 4);
    CHECK(read_fails(put("analyze.nii", b, n, 0), RT_ERR_FORMAT) && msg_has("ANALYZE"));
    memcpy(b + 344, "ni1", 4);
    CHECK(read_fails(put("pair.nii", b, n, 0), RT_ERR_UNSUPPORTED) && msg_has(".hdr/.img"));
    CHECK(read_fails(put("text.nii", "hello world", 11, 0), RT_ERR_FORMAT) && msg_has("not a NIfTI"));
    CHECK(read_fails(put("empty.nii", "", 0, 0), RT_ERR_FORMAT));
    CHECK(read_fails(put("short_header.nii", b, 200, 1), RT_ERR_FORMAT) &&
          msg_has("expected 348 header bytes but the file has 200"));
    free(b);
    CHECK(read_fails(tpath("missing.nii"), RT_ERR_IO));
}

/* ---- refused datatypes and headers --------------------------------------- */

static void test_refusals(void) {
    unsigned char v[64] = {0};
    nifti_1_header h = n1_header(k_dims3, DT_RGB24);
    CHECK(read_fails(n1_put("rgb.nii", h, v, 12, 0, 0), RT_ERR_UNSUPPORTED) && msg_has("RGB24"));
    h = n1_header(k_dims3, DT_COMPLEX64);
    h.dim[1] = h.dim[2] = h.dim[3] = 1;
    CHECK(read_fails(n1_put("cplx.nii", h, v, 1, 0, 0), RT_ERR_UNSUPPORTED) && msg_has("COMPLEX64"));
    h = n1_header(k_dims3, DT_INT16);
    h.bitpix = 8;
    CHECK(read_fails(n1_put("bitpix.nii", h, v, 12, 0, 0), RT_ERR_FORMAT) &&
          msg_has("bitpix is 8 but datatype int16 has 16"));
    h = n1_header(k_dims3, DT_INT16);
    h.datatype = 3;
    CHECK(read_fails(n1_put("dt3.nii", h, v, 12, 0, 0), RT_ERR_FORMAT) && msg_has("code 3"));
    h = n1_header(k_dims3, DT_UINT8);
    h.vox_offset = 100.0f;
    CHECK(read_fails(n1_put("voxoff.nii", h, v, 12, 0, 0), RT_ERR_FORMAT) && msg_has("vox_offset"));
    h = n1_header(k_dims3, DT_UINT8);
    h.vox_offset = NAN;
    CHECK(read_fails(n1_put("voxnan.nii", h, v, 12, 0, 0), RT_ERR_FORMAT));
    /* 7 dims of 32767: more voxels than any file, refused before allocating */
    const int64_t huge[8] = {7, 32767, 32767, 32767, 32767, 32767, 32767, 32767};
    CHECK(read_fails(n1_put("huge.nii", n1_header(huge, DT_UINT8), v, 0, 0, 0), RT_ERR_FORMAT));
}

/* ---- truncation ------------------------------------------------------------ */

static void test_truncated(void) {
    float v[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
    nifti_1_header h = n1_header(k_dims3, DT_FLOAT32);
    size_t n;
    unsigned char *b = n1_file(h, v, 12, 0, &n);
    /* plain: 10 data bytes missing; checked before allocating */
    CHECK(read_fails(put("cut.nii", b, n - 10, 0), RT_ERR_FORMAT) &&
          msg_has("48 data bytes from offset 352") && msg_has("needs 400 bytes, but it has 390 (38 data bytes)"));
    rt_nifti_info info;
    CHECK_EQ_INT(rt_nifti_read_info(tpath("cut.nii"), &info), RT_ERR_FORMAT);
    /* gzip of a short file: a complete gzip stream, 10 bytes short */
    CHECK(read_fails(put("cut.nii.gz", b, n - 10, 1), RT_ERR_FORMAT) &&
          msg_has("declares 48 data bytes") && msg_has("only 38 data bytes follow"));
    /* the gzip stream itself cut in the middle */
    const char *full = put("full.nii.gz", b, n, 1);
    FILE *f = fopen(full, "rb");
    unsigned char z[4096];
    size_t zn = fread(z, 1, sizeof z, f);
    fclose(f);
    CHECK(read_fails(put("cutz.nii.gz", z, zn - 12, 0), RT_ERR_FORMAT) && msg_has("truncated"));
    /* cut inside the extension bytes */
    CHECK(read_fails(put("cut_ext.nii.gz", b, 350, 1), RT_ERR_FORMAT) && msg_has("only 0 data bytes"));
    free(b);
}

/* ---- NIfTI-2 --------------------------------------------------------------- */

static void test_nifti2(void) {
    double v[6] = {1.5, -2.5, 3.25, 4, 5, 6e10};
    for (int be = 0; be < 2; be++) {
        nifti_2_header h;
        memset(&h, 0, sizeof h);
        h.sizeof_hdr = 540;
        memcpy(h.magic, "n+2\0\r\n\032\n", 8);
        h.datatype = DT_FLOAT64;
        h.bitpix = 64;
        const int64_t dims[8] = {3, 3, 1, 2, 1, 1, 1, 1};
        memcpy(h.dim, dims, sizeof dims);
        for (int d = 0; d < 8; d++) h.pixdim[d] = 1.0;
        h.vox_offset = 544;
        h.sform_code = 1;
        h.srow_x[0] = -1.0;
        h.srow_x[3] = 90.0;
        h.srow_y[1] = 1.0;
        h.srow_z[2] = 1.0;
        unsigned char buf[544 + sizeof v];
        memset(buf, 0, sizeof buf);
        memcpy(buf + 544, v, sizeof v);
        if (be) {
            nifti_swap_as_nifti2(&h);
            nifti_swap_8bytes(6, buf + 544);
        }
        memcpy(buf, &h, sizeof h);
        rt_nifti_info info;
        rt_tensor *t = NULL;
        CHECK_OK(rt_nifti_read(put(be ? "n2be.nii" : "n2.nii.gz", buf, sizeof buf, !be), &info, &t));
        CHECK_EQ_INT(info.version, 2);
        CHECK_EQ_INT(info.big_endian, be);
        CHECK(t->shape[0] == 1 && t->shape[1] == 2 && t->shape[2] == 1 && t->shape[3] == 3);
        for (int i = 0; i < 6; i++) CHECK_EQ_INT(rt_tensor_f32(t)[i] == (float)v[i], 1);
        CHECK(info.affine[0][0] == -1 && info.affine[0][3] == 90 && info.affine_source == RT_NIFTI_AFFINE_SFORM);
        rt_tensor_release(t);
    }
    /* dim[0] = 2^40 + 1 is 1 once narrowed to int: it must be refused as
     * 64-bit (the fuzzer's first find; libnifti loops up to dim[0]) */
    nifti_2_header h;
    memset(&h, 0, sizeof h);
    h.sizeof_hdr = 540;
    memcpy(h.magic, "n+2\0\r\n\032\n", 8);
    h.datatype = DT_UINT8;
    h.bitpix = 8;
    h.dim[0] = ((int64_t)1 << 40) + 1;
    h.dim[1] = 1;
    h.vox_offset = 544;
    unsigned char buf[545] = {0};
    memcpy(buf, &h, sizeof h);
    CHECK(read_fails(put("n2dim0.nii", buf, sizeof buf, 0), RT_ERR_FORMAT) && msg_has("dim[0]"));
}

/* ---- writing --------------------------------------------------------------- */

static void test_round_trip(void) {
    /* rotation by 90 degrees about z, voxel sizes 0.5/2/3, an offset */
    const double aff[4][4] = {{0, -2, 0, 10.5}, {0.5, 0, 0, -20}, {0, 0, 3, 7.25}, {0, 0, 0, 1}};
    const int64_t shape[4] = {2, 3, 4, 5};
    rt_tensor *t = rt_tensor_create(4, shape, RT_F32, RT_DEVICE_CPU, RT_MEM_DATA);
    CHECK(t);
    for (int i = 0; i < 120; i++) rt_tensor_f32(t)[i] = (float)(i * 0.37 - 9.0);
    const char *names[2] = {"rt.nii", "rt.nii.gz"};
    for (int k = 0; k < 2; k++) {
        CHECK_OK(rt_nifti_write(tpath(names[k]), t, aff));
        rt_nifti_info info;
        rt_tensor *b = NULL;
        CHECK_OK(rt_nifti_read(tpath(names[k]), &info, &b));
        CHECK_EQ_INT(info.compressed, k);
        CHECK_EQ_INT(info.version, 1);
        CHECK(rt_tensor_same_shape(t, b));
        CHECK_EQ_INT(memcmp(rt_tensor_data(t), rt_tensor_data(b), 120 * 4), 0);
        CHECK_EQ_INT(info.affine_source, RT_NIFTI_AFFINE_SFORM);
        for (int r = 0; r < 4; r++)
            for (int c = 0; c < 4; c++) CHECK_EQ_INT(info.affine[r][c] == aff[r][c], 1);
        CHECK_NEAR(info.pixdim[1], 0.5, 1e-6);
        CHECK_NEAR(info.pixdim[2], 2, 1e-6);
        CHECK_NEAR(info.pixdim[3], 3, 1e-6);
        CHECK(info.qform_code == 1);
        rt_tensor_release(b);
    }
    rt_tensor_release(t);
    /* label maps: each range picks the smallest exact datatype */
    const int32_t ranges[3][2] = {{0, 200}, {-5, 30000}, {-70000, 3}};
    const int want_dt[3] = {DT_UINT8, DT_INT16, DT_INT32};
    const int64_t lshape[3] = {2, 2, 3};
    for (int r = 0; r < 3; r++) {
        rt_tensor *l = rt_tensor_create(3, lshape, RT_I32, RT_DEVICE_CPU, RT_MEM_DATA);
        int32_t *lv = rt_tensor_data(l);
        for (int i = 0; i < 12; i++) lv[i] = ranges[r][i % 2] + i;
        CHECK_OK(rt_nifti_write(tpath("labels.nii.gz"), l, NULL));
        rt_nifti_info info;
        rt_tensor *b = NULL;
        CHECK_OK(rt_nifti_read_labels(tpath("labels.nii.gz"), &info, &b));
        CHECK_EQ_INT(info.datatype, want_dt[r]);
        CHECK_EQ_INT(info.affine_source, RT_NIFTI_AFFINE_PIXDIM);
        CHECK(b->ndim == 4 && b->shape[0] == 1 && b->shape[3] == 3);
        CHECK_EQ_INT(memcmp(lv, rt_tensor_data(b), 48), 0);
        rt_tensor_release(b);
        rt_tensor_release(l);
    }
    /* an axis longer than NIfTI-1's 16-bit dims: NIfTI-2 */
    const int64_t long_shape[3] = {1, 1, 40000};
    rt_tensor *w = rt_tensor_zeros(3, long_shape, RT_F32, RT_DEVICE_CPU, RT_MEM_DATA);
    rt_tensor_f32(w)[39999] = 7.0f;
    CHECK_OK(rt_nifti_write(tpath("long.nii"), w, NULL));
    rt_nifti_info info;
    rt_tensor *b = NULL;
    CHECK_OK(rt_nifti_read(tpath("long.nii"), &info, &b));
    CHECK_EQ_INT(info.version, 2);
    CHECK(b->shape[3] == 40000 && rt_tensor_f32(b)[39999] == 7.0f);
    rt_tensor_release(b);
    rt_tensor_release(w);
}

static void test_write_atomic(void) {
    const int64_t shape[3] = {16, 16, 16};
    rt_tensor *t = rt_tensor_zeros(3, shape, RT_F32, RT_DEVICE_CPU, RT_MEM_DATA);
    const char *p = tpath("atomic.nii");
    CHECK_OK(rt_nifti_write(p, t, NULL));
    struct stat before;
    CHECK(stat(p, &before) == 0 && before.st_size == 352 + 16 * 16 * 16 * 4);
    int entries = count_dir_entries();
    /* a file-size limit makes write() fail with EFBIG half-way */
    struct rlimit old, lim;
    getrlimit(RLIMIT_FSIZE, &old);
    lim = old;
    lim.rlim_cur = 4096;
    void (*prev)(int) = signal(SIGXFSZ, SIG_IGN);
    setrlimit(RLIMIT_FSIZE, &lim);
    rt_tensor_f32(t)[0] = 1.0f;
    rt_status s = rt_nifti_write(p, t, NULL);
    setrlimit(RLIMIT_FSIZE, &old);
    signal(SIGXFSZ, prev);
    CHECK_EQ_INT(s, RT_ERR_IO);
    CHECK(msg_has("cannot write"));
    struct stat after;
    CHECK(stat(p, &after) == 0 && after.st_size == before.st_size);
    CHECK_EQ_INT(count_dir_entries(), entries); /* no PATH.tmp.<pid> left */
    rt_tensor *b = NULL;
    CHECK_OK(rt_nifti_read(p, NULL, &b));
    CHECK(rt_tensor_f32(b)[0] == 0.0f); /* the old content */
    rt_tensor_release(b);
    /* a directory that does not exist: nothing written anywhere */
    CHECK_EQ_INT(rt_nifti_write(tpath("no_such_dir/x.nii"), t, NULL), RT_ERR_IO);
    CHECK_EQ_INT(count_dir_entries(), entries);
    /* argument checks */
    const double bad[4][4] = {{NAN, 0, 0, 0}, {0, 1, 0, 0}, {0, 0, 1, 0}, {0, 0, 0, 1}};
    CHECK_EQ_INT(rt_nifti_write(p, t, bad), RT_ERR_NONFINITE);
    rt_tensor *h = rt_tensor_create(3, shape, RT_F16, RT_DEVICE_CPU, RT_MEM_DATA);
    CHECK_EQ_INT(rt_nifti_write(p, h, NULL), RT_ERR_DTYPE);
    rt_tensor_release(h);
    rt_tensor *flat = rt_tensor_create(2, shape, RT_F32, RT_DEVICE_CPU, RT_MEM_DATA);
    CHECK_EQ_INT(rt_nifti_write(p, flat, NULL), RT_ERR_SHAPE);
    rt_tensor_release(flat);
    rt_tensor_release(t);
}

int main(int argc, char **argv) {
    static const rt_test_case cases[] = {
        {"every_datatype", test_every_datatype}, {"scaling", test_scaling},
        {"dims", test_dims}, {"geometry", test_geometry},
        {"content_not_name", test_content_not_name}, {"refusals", test_refusals},
        {"truncated", test_truncated}, {"nifti2", test_nifti2},
        {"round_trip", test_round_trip}, {"write_atomic", test_write_atomic}};
    return rt_test_main(argc, argv, cases, (int)(sizeof cases / sizeof cases[0]));
}
