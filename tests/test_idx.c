/* Tests for the IDX reader (src/data/idx.h): crafted files in a private temp
 * directory for every error path and every element type, plus the real
 * Fashion-MNIST files.
 *
 * `test_idx` runs every test that needs no file outside the tree;
 * `test_idx --fashion` (CTest: test_idx_fashion) runs the ones that read the
 * real Fashion-MNIST files from $RT_FASHION_MNIST_DIR, else from
 * /usr/share/datasets/fashion-mnist (Debian's dataset-fashion-mnist), and
 * exits with 77 (CTest: skipped) when they are missing. `test_idx NAME` runs
 * one test of either kind, `test_idx --list` lists all. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "core/mem.h"
#include "data/idx.h"
#include "fashion_data.h"
#include "rt_test.h"

/* ---- temp files ------------------------------------------------------------ */

static char g_dir[64];
static char g_files[64][256];
static int g_nfiles;

static void cleanup_tmp(void) {
    for (int i = 0; i < g_nfiles; i++) unlink(g_files[i]);
    if (g_dir[0]) rmdir(g_dir);
}

/* Path of `name` inside this run's temp dir (created on first use, removed at
 * exit). The pointer stays valid for the whole run. */
static const char *tmp_path(const char *name) {
    if (!g_dir[0]) {
        strcpy(g_dir, "/tmp/rt_test_idx_XXXXXX");
        if (!mkdtemp(g_dir)) {
            perror("mkdtemp");
            exit(2);
        }
        atexit(cleanup_tmp);
    }
    char want[256];
    snprintf(want, sizeof want, "%s/%s", g_dir, name);
    for (int i = 0; i < g_nfiles; i++)
        if (strcmp(g_files[i], want) == 0) return g_files[i];
    if (g_nfiles == (int)(sizeof g_files / sizeof g_files[0])) {
        fprintf(stderr, "too many temp files\n");
        exit(2);
    }
    strcpy(g_files[g_nfiles], want);
    return g_files[g_nfiles++];
}

static const char *write_raw(const char *name, const void *bytes, size_t n) {
    const char *p = tmp_path(name);
    FILE *f = fopen(p, "wb");
    if (!f || (n && fwrite(bytes, 1, n, f) != n) || fclose(f) != 0) {
        perror(p);
        exit(2);
    }
    return p;
}

static const char *write_gz(const char *name, const void *bytes, size_t n) {
    const char *p = tmp_path(name);
    gzFile g = gzopen(p, "wb");
    if (!g || (n && gzwrite(g, bytes, (unsigned)n) != (int)n) || gzclose(g) != Z_OK) {
        fprintf(stderr, "gz write %s failed\n", p);
        exit(2);
    }
    return p;
}

static size_t file_size(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 ? (size_t)st.st_size : 0;
}

static unsigned char *slurp(const char *p, size_t *n) {
    *n = file_size(p);
    unsigned char *b = malloc(*n ? *n : 1);
    FILE *f = fopen(p, "rb");
    if (!b || !f || fread(b, 1, *n, f) != *n) exit(2);
    fclose(f);
    return b;
}

/* Builds an IDX image: header (type, dims big-endian) then `payload` as is
 * (the caller encodes it big-endian). Returns the total length. */
static size_t make_idx(unsigned char *buf, int type, int ndim, const uint32_t *dims,
                       const void *payload, size_t payload_bytes) {
    buf[0] = 0;
    buf[1] = 0;
    buf[2] = (unsigned char)type;
    buf[3] = (unsigned char)ndim;
    for (int i = 0; i < ndim; i++) {
        buf[4 + 4 * i] = (unsigned char)(dims[i] >> 24);
        buf[5 + 4 * i] = (unsigned char)(dims[i] >> 16);
        buf[6 + 4 * i] = (unsigned char)(dims[i] >> 8);
        buf[7 + 4 * i] = (unsigned char)dims[i];
    }
    if (payload_bytes) memcpy(buf + 4 + 4 * ndim, payload, payload_bytes);
    return 4 + 4 * (size_t)ndim + payload_bytes;
}

static int64_t data_live(void) {
    rt_memstats s;
    rt_memstats_get(&s);
    return s.live[RT_MEM_DATA];
}

static int64_t data_peak(void) {
    rt_memstats s;
    rt_memstats_get(&s);
    return s.peak[RT_MEM_DATA];
}

static int msg_has(const char *sub) {
    if (strstr(rt_error_last(), sub)) return 1;
    fprintf(stderr, "message lacks \"%s\": %s\n", sub, rt_error_last());
    return 0;
}

/* Reads `path` expecting failure `code`, no result, no DATA bytes left over,
 * and a message naming the file. */
static int read_fails(const char *path, rt_status code) {
    int64_t before = data_live();
    rt_idx *idx = (rt_idx *)&before; /* must be reset to NULL */
    rt_error_clear();
    rt_status s = rt_idx_read(path, &idx);
    if (s != code) {
        fprintf(stderr, "rt_idx_read(%s) returned %s, expected %s: %s\n", path, rt_status_str(s),
                rt_status_str(code), rt_error_last());
        if (s == RT_OK) rt_idx_destroy(idx);
        return 0;
    }
    if (idx != NULL) {
        fprintf(stderr, "out not NULL after failure\n");
        return 0;
    }
    if (data_live() != before) {
        fprintf(stderr, "DATA bytes leaked: %lld -> %lld\n", (long long)before,
                (long long)data_live());
        return 0;
    }
    return msg_has(path);
}

/* ---- happy paths ----------------------------------------------------------- */

static void test_u8(void) {
    unsigned char buf[64], px[6] = {0, 1, 2, 127, 128, 255};
    uint32_t dims[2] = {2, 3};
    const char *p = write_raw("u8.idx", buf, make_idx(buf, 0x08, 2, dims, px, 6));
    int64_t before = data_live();
    rt_idx *idx = NULL;
    CHECK_OK(rt_idx_read(p, &idx));
    CHECK(idx != NULL);
    CHECK_EQ_INT(idx->type, RT_IDX_U8);
    CHECK_EQ_INT(idx->ndim, 2);
    CHECK_EQ_INT(idx->dims[0], 2);
    CHECK_EQ_INT(idx->dims[1], 3);
    CHECK_EQ_INT(idx->elem_size, 1);
    CHECK_EQ_INT(idx->count, 6);
    CHECK_EQ_INT(idx->nbytes, 6);
    CHECK(strcmp(idx->path, p) == 0);
    CHECK(memcmp(idx->data, px, 6) == 0);
    CHECK_EQ_INT(data_live() - before, 6); /* booked as DATA */
    rt_idx_destroy(idx);
    CHECK_EQ_INT(data_live(), before);
    rt_idx_destroy(NULL);
}

static void test_i32_big_endian(void) {
    unsigned char buf[64];
    const unsigned char be[12] = {0x01, 0x02, 0x03, 0x04, 0xFF, 0xFF, 0xFF, 0xFE,
                                  0x80, 0x00, 0x00, 0x00};
    uint32_t dims[1] = {3};
    const char *p = write_raw("i32.idx", buf, make_idx(buf, 0x0C, 1, dims, be, 12));
    rt_idx *idx = NULL;
    CHECK_OK(rt_idx_read(p, &idx));
    CHECK_EQ_INT(idx->type, RT_IDX_I32);
    CHECK_EQ_INT(idx->elem_size, 4);
    CHECK_EQ_INT(idx->count, 3);
    CHECK_EQ_INT(idx->nbytes, 12);
    const int32_t *v = idx->data;
    int ok = v[0] == 0x01020304 && v[1] == -2 && v[2] == INT32_MIN;
    rt_idx_destroy(idx);
    CHECK(ok);
}

static void test_f32_big_endian(void) {
    unsigned char buf[64];
    /* 1.5f = 3FC00000, -2.25f = C0100000, 0 = 00000000, +inf = 7F800000 */
    const unsigned char be[16] = {0x3F, 0xC0, 0, 0, 0xC0, 0x10, 0, 0, 0, 0, 0, 0, 0x7F, 0x80, 0, 0};
    uint32_t dims[2] = {2, 2};
    const char *p = write_raw("f32.idx", buf, make_idx(buf, 0x0D, 2, dims, be, 16));
    rt_idx *idx = NULL;
    CHECK_OK(rt_idx_read(p, &idx));
    CHECK_EQ_INT(idx->type, RT_IDX_F32);
    CHECK_EQ_INT(idx->count, 4);
    const float *v = idx->data;
    int ok = v[0] == 1.5f && v[1] == -2.25f && v[2] == 0.0f && isinf(v[3]) && v[3] > 0;
    rt_idx_destroy(idx);
    CHECK(ok);
}

static void test_other_types(void) {
    unsigned char buf[64];
    uint32_t d2[1] = {2};
    rt_idx *idx = NULL;

    const unsigned char i8[2] = {0xFF, 0x7F};
    CHECK_OK(rt_idx_read(write_raw("i8.idx", buf, make_idx(buf, 0x09, 1, d2, i8, 2)), &idx));
    int ok = idx->type == RT_IDX_I8 && ((int8_t *)idx->data)[0] == -1 &&
             ((int8_t *)idx->data)[1] == 127;
    rt_idx_destroy(idx);
    CHECK(ok);

    const unsigned char i16[4] = {0x01, 0x02, 0xFF, 0xFE};
    CHECK_OK(rt_idx_read(write_raw("i16.idx", buf, make_idx(buf, 0x0B, 1, d2, i16, 4)), &idx));
    ok = idx->type == RT_IDX_I16 && idx->elem_size == 2 && ((int16_t *)idx->data)[0] == 258 &&
         ((int16_t *)idx->data)[1] == -2;
    rt_idx_destroy(idx);
    CHECK(ok);

    /* 1.5 = 3FF8000000000000, -0.1 = BFB999999999999A */
    const unsigned char f64[16] = {0x3F, 0xF8, 0, 0, 0, 0, 0, 0,
                                   0xBF, 0xB9, 0x99, 0x99, 0x99, 0x99, 0x99, 0x9A};
    CHECK_OK(rt_idx_read(write_raw("f64.idx", buf, make_idx(buf, 0x0E, 1, d2, f64, 16)), &idx));
    ok = idx->type == RT_IDX_F64 && idx->elem_size == 8 && ((double *)idx->data)[0] == 1.5 &&
         ((double *)idx->data)[1] == -0.1;
    rt_idx_destroy(idx);
    CHECK(ok);

    /* A zero dimension is legal: no elements. */
    uint32_t dz[2] = {0, 28};
    CHECK_OK(rt_idx_read(write_raw("empty_dim.idx", buf, make_idx(buf, 0x08, 2, dz, NULL, 0)),
                         &idx));
    ok = idx->count == 0 && idx->nbytes == 0 && idx->dims[1] == 28;
    rt_idx_destroy(idx);
    CHECK(ok);

    CHECK(strcmp(rt_idx_type_str(RT_IDX_F32), "f32") == 0);
    CHECK_EQ_INT(rt_idx_type_size(0x0A), 0);
}

static void test_gzip(void) {
    unsigned char buf[600], px[500];
    for (int i = 0; i < 500; i++) px[i] = (unsigned char)(i * 7);
    uint32_t dims[3] = {5, 10, 10};
    const char *p = write_gz("img-idx3-ubyte.gz", buf, make_idx(buf, 0x08, 3, dims, px, 500));
    rt_idx *idx = NULL;
    CHECK_OK(rt_idx_read(p, &idx));
    int ok = idx->ndim == 3 && idx->dims[0] == 5 && idx->dims[2] == 10 && idx->count == 500 &&
             memcmp(idx->data, px, 500) == 0;
    rt_idx_destroy(idx);
    CHECK(ok);

    /* A gzipped multi-byte type is byte-swapped too. */
    const unsigned char be[8] = {0x3F, 0xC0, 0, 0, 0x00, 0x00, 0x01, 0x00};
    uint32_t d1[1] = {1}, d2[1] = {2};
    CHECK_OK(rt_idx_read(write_gz("f.idx.gz", buf, make_idx(buf, 0x0D, 1, d1, be, 4)), &idx));
    ok = ((float *)idx->data)[0] == 1.5f;
    rt_idx_destroy(idx);
    CHECK(ok);
    CHECK_OK(rt_idx_read(write_gz("i.idx.gz", buf, make_idx(buf, 0x0C, 1, d2, be, 8)), &idx));
    ok = ((int32_t *)idx->data)[1] == 256;
    rt_idx_destroy(idx);
    CHECK(ok);

    /* A plain (already gunzipped) file that kept its .gz name still reads. */
    CHECK_OK(rt_idx_read(write_raw("plain.gz", buf, make_idx(buf, 0x08, 3, dims, px, 500)), &idx));
    ok = idx->count == 500 && memcmp(idx->data, px, 500) == 0;
    rt_idx_destroy(idx);
    CHECK(ok);
}

/* ---- read errors ----------------------------------------------------------- */

static void test_err_gzip_read_raw(void) {
    unsigned char buf[64], px[6] = {1, 2, 3, 4, 5, 6};
    uint32_t dims[2] = {2, 3};
    const char *p = write_gz("train-images-idx3-ubyte", buf, make_idx(buf, 0x08, 2, dims, px, 6));
    CHECK(read_fails(p, RT_ERR_FORMAT));
    CHECK(msg_has("gzip-compressed but was opened as raw IDX"));
    CHECK(msg_has(".gz or gunzip it"));
}

static void test_err_gzip_twice(void) {
    unsigned char buf[64], px[6] = {1, 2, 3, 4, 5, 6};
    uint32_t dims[2] = {2, 3};
    const char *inner = write_gz("inner.gz", buf, make_idx(buf, 0x08, 2, dims, px, 6));
    size_t n;
    unsigned char *gzbytes = slurp(inner, &n);
    const char *p = write_gz("twice.gz", gzbytes, n);
    free(gzbytes);
    CHECK(read_fails(p, RT_ERR_FORMAT));
    CHECK(msg_has("compressed twice"));
}

static void test_err_magic(void) {
    unsigned char buf[64] = {0x12, 0x34, 0x08, 0x01, 0, 0, 0, 1, 9};
    const char *p = write_raw("magic.idx", buf, 9);
    CHECK(read_fails(p, RT_ERR_FORMAT));
    CHECK(msg_has("0x12 0x34"));
    CHECK(msg_has("not an IDX file"));
    /* A text file, say a README saved under the wrong name. */
    p = write_raw("readme.idx", "hello world\n", 12);
    CHECK(read_fails(p, RT_ERR_FORMAT));
    CHECK(msg_has("0x68 0x65"));
}

static void test_err_type(void) {
    unsigned char buf[64], px[2] = {1, 2};
    uint32_t dims[1] = {2};
    const char *p = write_raw("type.idx", buf, make_idx(buf, 0x0A, 1, dims, px, 2));
    CHECK(read_fails(p, RT_ERR_FORMAT));
    CHECK(msg_has("type byte 0x0A"));
    CHECK(msg_has("0x08 u8, 0x09 i8, 0x0B i16, 0x0C i32, 0x0D f32, 0x0E f64"));
}

static void test_err_ndim(void) {
    unsigned char buf[128] = {0};
    const char *p = write_raw("ndim0.idx", buf, make_idx(buf, 0x08, 0, NULL, "x", 1));
    CHECK(read_fails(p, RT_ERR_FORMAT));
    CHECK(msg_has("declares 0 dimensions"));
    uint32_t dims[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    p = write_raw("ndim9.idx", buf, make_idx(buf, 0x08, 9, dims, "x", 1));
    CHECK(read_fails(p, RT_ERR_FORMAT));
    CHECK(msg_has("declares 9 dimensions"));
    CHECK(msg_has("1 to 8"));
}

static void test_err_header_incomplete(void) {
    unsigned char buf[64] = {0, 0, 0x08};
    const char *p = write_raw("hdr3.idx", buf, 3);
    CHECK(read_fails(p, RT_ERR_FORMAT));
    CHECK(msg_has("ends inside its header"));
    CHECK(msg_has("at least 4 header bytes"));
    CHECK(msg_has("only 3 bytes"));

    uint32_t dims[3] = {60000, 28, 28};
    make_idx(buf, 0x08, 3, dims, NULL, 0);
    p = write_raw("hdr9.idx", buf, 9); /* 4 + 5 of the 12 dim bytes */
    CHECK(read_fails(p, RT_ERR_FORMAT));
    CHECK(msg_has("expected 16 header bytes"));
    CHECK(msg_has("got 9"));

    p = write_gz("hdr9.idx.gz", buf, 9);
    CHECK(read_fails(p, RT_ERR_FORMAT));
    CHECK(msg_has("expected 16 header bytes"));
    CHECK(msg_has("got 9"));

    p = write_raw("empty.idx", buf, 0);
    CHECK(read_fails(p, RT_ERR_FORMAT));
    CHECK(msg_has("only 0 bytes"));
}

static void test_err_truncated(void) {
    unsigned char buf[64], px[7] = {1, 2, 3, 4, 5, 6, 7};
    uint32_t dims[2] = {4, 5};
    size_t n = make_idx(buf, 0x08, 2, dims, px, 7);
    const char *p = write_raw("short.idx", buf, n);
    CHECK(read_fails(p, RT_ERR_FORMAT));
    CHECK(msg_has("truncated"));
    CHECK(msg_has("= 20 data bytes"));
    CHECK(msg_has("only 7 data bytes"));

    p = write_gz("short.idx.gz", buf, n);
    CHECK(read_fails(p, RT_ERR_FORMAT));
    CHECK(msg_has("= 20 data bytes"));
    CHECK(msg_has("only 7 data bytes"));

    /* Multi-byte type: 3 i32 declared, 10 bytes present. */
    const unsigned char be[10] = {0};
    uint32_t d3[1] = {3};
    p = write_raw("short_i32.idx", buf, make_idx(buf, 0x0C, 1, d3, be, 10));
    CHECK(read_fails(p, RT_ERR_FORMAT));
    CHECK(msg_has("= 12 data bytes"));
    CHECK(msg_has("only 10 data bytes"));
}

static void test_err_truncated_gzip_stream(void) {
    /* Incompressible payload so that cutting the .gz in half cuts the data. */
    enum { N = 100000 };
    unsigned char *buf = malloc(N + 64), *px = malloc(N);
    CHECK(buf && px);
    uint32_t x = 12345;
    for (int i = 0; i < N; i++) {
        x = x * 1664525u + 1013904223u;
        px[i] = (unsigned char)(x >> 24);
    }
    uint32_t dims[1] = {N};
    const char *full = write_gz("cut_src.gz", buf, make_idx(buf, 0x08, 1, dims, px, N));
    size_t n;
    unsigned char *gzbytes = slurp(full, &n);
    const char *p = write_raw("cut.idx.gz", gzbytes, n / 2);
    free(gzbytes);
    free(buf);
    free(px);
    CHECK(read_fails(p, RT_ERR_FORMAT));
    CHECK(msg_has("truncated"));
    CHECK(msg_has("= 100000 data bytes"));
    CHECK(msg_has("gzip stream itself ends early"));
}

static void test_err_corrupt_gzip(void) {
    enum { N = 20000 };
    unsigned char *buf = malloc(N + 64), *px = malloc(N);
    CHECK(buf && px);
    for (int i = 0; i < N; i++) px[i] = (unsigned char)((i * 31) ^ (i >> 3));
    uint32_t dims[1] = {N};
    const char *src = write_gz("corrupt_src.gz", buf, make_idx(buf, 0x08, 1, dims, px, N));
    size_t n;
    unsigned char *gzbytes = slurp(src, &n);
    for (size_t i = 12; i < 40 && i < n; i++) gzbytes[i] = 0xFF; /* wreck the deflate stream */
    const char *p = write_raw("corrupt.idx.gz", gzbytes, n);
    free(gzbytes);
    free(buf);
    free(px);
    CHECK(read_fails(p, RT_ERR_FORMAT));
    CHECK(msg_has("corrupt gzip data"));
}

static void test_err_trailing(void) {
    unsigned char buf[64], px[11] = {1, 2, 3, 4, 5, 6, 9, 9, 9, 9, 9};
    uint32_t dims[2] = {2, 3};
    size_t n = make_idx(buf, 0x08, 2, dims, px, 11);
    const char *p = write_raw("long.idx", buf, n);
    CHECK(read_fails(p, RT_ERR_FORMAT));
    CHECK(msg_has("5 extra bytes"));
    CHECK(msg_has("after the 6 data bytes"));
    p = write_gz("long.idx.gz", buf, n);
    CHECK(read_fails(p, RT_ERR_FORMAT));
    CHECK(msg_has("5 extra bytes"));
}

static void test_err_huge_claim(void) {
    /* 2^96 elements: rejected from the header alone. */
    unsigned char buf[64];
    uint32_t big[3] = {0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu};
    const char *p = write_raw("overflow.idx", buf, make_idx(buf, 0x08, 3, big, "abc", 3));
    CHECK(read_fails(p, RT_ERR_FORMAT));
    CHECK(msg_has("4294967295x4294967295x4294967295"));

    /* 32 GiB claimed by a tiny file: short-file error without allocating. */
    uint32_t dims[2] = {65536, 65536};
    size_t n = make_idx(buf, 0x0E, 2, dims, "abcdefgh", 8);
    rt_memstats_reset_peaks();
    int64_t peak0 = data_peak();
    p = write_raw("huge.idx", buf, n);
    CHECK(read_fails(p, RT_ERR_FORMAT));
    CHECK(msg_has("= 34359738368 data bytes"));
    CHECK(msg_has("only 8 data bytes"));
    p = write_gz("huge.idx.gz", buf, n);
    CHECK(read_fails(p, RT_ERR_FORMAT));
    CHECK(msg_has("only 8 data bytes"));
    CHECK_EQ_INT(data_peak(), peak0);
}

static void test_err_open(void) {
    const char *p = tmp_path("does-not-exist-idx1-ubyte.gz");
    CHECK(read_fails(p, RT_ERR_IO));
    CHECK(msg_has(strerror(ENOENT)));
    CHECK(read_fails(g_dir, RT_ERR_IO)); /* a directory */
    CHECK(msg_has(strerror(EISDIR)));
}

static void test_err_null_args(void) {
    rt_idx *idx = NULL;
    CHECK_EQ_INT(rt_idx_read(NULL, &idx), RT_ERR_INVALID_ARG);
    CHECK(idx == NULL);
    CHECK_EQ_INT(rt_idx_read("x", NULL), RT_ERR_INVALID_ARG);
}

/* ---- image/label pairs ----------------------------------------------------- */

static rt_status read_crafted(const char *name, int type, int ndim, const uint32_t *dims,
                              const void *payload, size_t nb, rt_idx **out) {
    unsigned char buf[256];
    return rt_idx_read(write_raw(name, buf, make_idx(buf, type, ndim, dims, payload, nb)), out);
}

static void test_pair(void) {
    unsigned char px[3 * 4] = {0};
    uint32_t di[3] = {3, 2, 2}, dl3[1] = {3}, dl2[1] = {2}, dl22[2] = {3, 1};
    const unsigned char lab_ok[3] = {0, 9, 4}, lab_bad[3] = {0, 1, 10};
    rt_idx *img = NULL, *ok = NULL, *few = NULL, *bad = NULL, *twod = NULL, *flt = NULL,
           *neg = NULL;
    CHECK_OK(read_crafted("p_img", 0x08, 3, di, px, 12, &img));
    CHECK_OK(read_crafted("p_ok", 0x08, 1, dl3, lab_ok, 3, &ok));
    CHECK_OK(read_crafted("p_few", 0x08, 1, dl2, lab_ok, 2, &few));
    CHECK_OK(read_crafted("p_bad", 0x08, 1, dl3, lab_bad, 3, &bad));
    CHECK_OK(read_crafted("p_2d", 0x08, 2, dl22, lab_ok, 3, &twod));
    const unsigned char fl[12] = {0};
    CHECK_OK(read_crafted("p_flt", 0x0D, 1, dl3, fl, 12, &flt));
    const unsigned char ng[3] = {0, 0xFF, 1}; /* i8: 0, -1, 1 */
    CHECK_OK(read_crafted("p_neg", 0x09, 1, dl3, ng, 3, &neg));

    rt_status s_ok = rt_idx_check_pair(img, ok, 10);
    rt_status s_few = rt_idx_check_pair(img, few, 10);
    int few_msg = msg_has("3 images but 2 labels") && msg_has(img->path) && msg_has(few->path);
    rt_status s_bad = rt_idx_check_pair(img, bad, 10);
    int bad_msg = msg_has("label 10 at index 2") && msg_has("[0, 10)") && msg_has(bad->path);
    rt_status s_small_k = rt_idx_check_pair(img, ok, 5); /* 9 >= 5 */
    int k_msg = msg_has("label 9 at index 1");
    rt_status s_2d = rt_idx_check_pair(img, twod, 10);
    rt_status s_flt = rt_idx_check_pair(img, flt, 10);
    rt_status s_neg = rt_idx_check_pair(img, neg, 10);
    int neg_msg = msg_has("label -1 at index 1");
    rt_status s_null = rt_idx_check_pair(NULL, ok, 10);
    rt_status s_k0 = rt_idx_check_pair(img, ok, 0);

    rt_idx_destroy(img);
    rt_idx_destroy(ok);
    rt_idx_destroy(few);
    rt_idx_destroy(bad);
    rt_idx_destroy(twod);
    rt_idx_destroy(flt);
    rt_idx_destroy(neg);

    CHECK_EQ_INT(s_ok, RT_OK);
    CHECK_EQ_INT(s_few, RT_ERR_SHAPE);
    CHECK(few_msg);
    CHECK_EQ_INT(s_bad, RT_ERR_FORMAT);
    CHECK(bad_msg);
    CHECK_EQ_INT(s_small_k, RT_ERR_FORMAT);
    CHECK(k_msg);
    CHECK_EQ_INT(s_2d, RT_ERR_SHAPE);
    CHECK_EQ_INT(s_flt, RT_ERR_DTYPE);
    CHECK_EQ_INT(s_neg, RT_ERR_FORMAT);
    CHECK(neg_msg);
    CHECK_EQ_INT(s_null, RT_ERR_INVALID_ARG);
    CHECK_EQ_INT(s_k0, RT_ERR_INVALID_ARG);
}

/* ---- reading only the first records ------------------------------------------ */

static void test_read_first(void) {
    /* 4 records of 3 i16 (big-endian in the file): value of element k = 100 * k - 7 */
    unsigned char buf[128], be[24];
    for (int k = 0; k < 12; k++) {
        const uint16_t v = (uint16_t)(int16_t)(100 * k - 7);
        be[2 * k] = (unsigned char)(v >> 8);
        be[2 * k + 1] = (unsigned char)v;
    }
    uint32_t dims[2] = {4, 3};
    const size_t n = make_idx(buf, 0x0B, 2, dims, be, 24);
    const char *plain = write_raw("first.idx", buf, n), *gz = write_gz("first.idx.gz", buf, n);
    int64_t before = data_live();
    for (int z = 0; z < 2; z++) {
        const char *p = z ? gz : plain;
        rt_idx *idx = NULL;
        CHECK_OK(rt_idx_read_first(p, 2, &idx));
        CHECK_EQ_INT(idx->dims[0], 2);
        CHECK_EQ_INT(idx->dims[1], 3);
        CHECK_EQ_INT(idx->file_records, 4);
        CHECK_EQ_INT(idx->count, 6);
        CHECK_EQ_INT(idx->nbytes, 12);
        CHECK_EQ_INT(data_live() - before, 12); /* only the records read are booked */
        for (int k = 0; k < 6; k++) CHECK_EQ_INT(((const int16_t *)idx->data)[k], 100 * k - 7);
        rt_idx_destroy(idx);
        CHECK_OK(rt_idx_read_first(p, 0, &idx));
        CHECK(idx->dims[0] == 0 && idx->count == 0 && idx->nbytes == 0 && idx->file_records == 4);
        rt_idx_destroy(idx);
        CHECK_OK(rt_idx_read_first(p, 9, &idx)); /* more than there are: all, as rt_idx_read */
        CHECK(idx->dims[0] == 4 && idx->count == 12 && idx->file_records == 4);
        CHECK_EQ_INT(((const int16_t *)idx->data)[11], 1093);
        rt_idx_destroy(idx);
        CHECK_OK(rt_idx_read(p, &idx));
        CHECK(idx->dims[0] == 4 && idx->file_records == 4);
        rt_idx_destroy(idx);
    }
    CHECK_EQ_INT(data_live(), before);
    rt_idx *idx = (rt_idx *)&before;
    CHECK_EQ_INT(rt_idx_read_first(plain, -1, &idx), RT_ERR_INVALID_ARG);
    CHECK(idx == NULL);
    CHECK_EQ_INT(rt_idx_read_first(NULL, 1, &idx), RT_ERR_INVALID_ARG);
    CHECK_EQ_INT(rt_idx_read_first(plain, 1, NULL), RT_ERR_INVALID_ARG);

    /* a gzip file cut after 2 of its 4 records: the first 2 read fine (the rest
     * is never decompressed), 3 or all do not */
    const size_t cut = n - 12;
    const char *cgz = write_gz("cut.idx.gz", buf, cut);
    CHECK_OK(rt_idx_read_first(cgz, 2, &idx));
    CHECK_EQ_INT(((const int16_t *)idx->data)[5], 493);
    rt_idx_destroy(idx);
    CHECK_EQ_INT(rt_idx_read_first(cgz, 3, &idx), RT_ERR_FORMAT);
    CHECK(msg_has("truncated"));
    CHECK(read_fails(cgz, RT_ERR_FORMAT));
    /* a plain file's length is checked against the header even for a prefix */
    const char *cplain = write_raw("cut.idx", buf, cut);
    CHECK_EQ_INT(rt_idx_read_first(cplain, 1, &idx), RT_ERR_FORMAT);
    CHECK(msg_has("truncated"));
    unsigned char longer[160];
    memcpy(longer, buf, n);
    memset(longer + n, 7, 5);
    const char *lplain = write_raw("long_first.idx", longer, n + 5);
    CHECK_EQ_INT(rt_idx_read_first(lplain, 1, &idx), RT_ERR_FORMAT);
    CHECK(msg_has("5 extra bytes"));
    CHECK(idx == NULL);
    CHECK_EQ_INT(data_live(), before);

    /* check_pair compares the counts the headers declare, not only those read */
    unsigned char lab[8] = {1, 2, 3};
    uint32_t d3[1] = {3}, d4[1] = {4};
    const char *l3 = write_raw("first_l3.idx", buf, make_idx(buf, 0x08, 1, d3, lab, 3));
    rt_idx *img = NULL, *l = NULL;
    CHECK_OK(rt_idx_read_first(plain, 1, &img));
    CHECK_OK(rt_idx_read_first(l3, 1, &l));
    rt_status s = rt_idx_check_pair(img, l, 10);
    int msg = msg_has("4 images but 3 labels");
    rt_idx_destroy(l);
    const char *l4 = write_raw("first_l4.idx", buf, make_idx(buf, 0x08, 1, d4, lab, 4));
    CHECK_OK(rt_idx_read_first(l4, 1, &l));
    rt_status s_ok = rt_idx_check_pair(img, l, 10);
    rt_idx_destroy(l);
    rt_idx_destroy(img);
    CHECK_EQ_INT(s, RT_ERR_SHAPE);
    CHECK(msg);
    CHECK_OK(s_ok);
}

/* ---- real data ------------------------------------------------------------- */

static void check_split(const char *split, int64_t n, int64_t per_class) {
    char ip[512], lp[512], base[64];
    snprintf(base, sizeof base, "%s-images-idx3-ubyte", split);
    fashion_file(base, ip, sizeof ip);
    snprintf(base, sizeof base, "%s-labels-idx1-ubyte", split);
    fashion_file(base, lp, sizeof lp);
    CHECK(ip[0] && lp[0]);
    int64_t before = data_live();
    rt_idx *img = NULL, *lab = NULL;
    CHECK_OK(rt_idx_read(ip, &img));
    rt_status s = rt_idx_read(lp, &lab);
    if (s != RT_OK) rt_idx_destroy(img);
    CHECK_OK(s);
    int64_t hist[10] = {0};
    int shape_ok = img->type == RT_IDX_U8 && img->ndim == 3 && img->dims[0] == n &&
                   img->dims[1] == 28 && img->dims[2] == 28 && img->nbytes == (size_t)(n * 784) &&
                   lab->type == RT_IDX_U8 && lab->ndim == 1 && lab->dims[0] == n;
    int booked = data_live() - before == (int64_t)(img->nbytes + lab->nbytes);
    s = rt_idx_check_pair(img, lab, 10);
    for (int64_t i = 0; s == RT_OK && i < lab->count; i++) hist[((uint8_t *)lab->data)[i]]++;
    rt_idx_destroy(img);
    rt_idx_destroy(lab);
    CHECK(shape_ok);
    CHECK(booked);
    CHECK_OK(s);
    for (int c = 0; c < 10; c++) CHECK_EQ_INT(hist[c], per_class);
    CHECK_EQ_INT(data_live(), before);
}

static void test_fashion_mnist(void) {
    check_split("train", 60000, 6000);
    if (rt_test_failed_) return;
    check_split("t10k", 10000, 1000);
}

int main(int argc, char **argv) {
    static const rt_test_case cases[] = {
        {"u8", test_u8}, {"i32_big_endian", test_i32_big_endian},
        {"f32_big_endian", test_f32_big_endian}, {"other_types", test_other_types},
        {"gzip", test_gzip}, {"err_gzip_read_raw", test_err_gzip_read_raw},
        {"err_gzip_twice", test_err_gzip_twice}, {"err_magic", test_err_magic},
        {"err_type", test_err_type}, {"err_ndim", test_err_ndim},
        {"err_header_incomplete", test_err_header_incomplete},
        {"err_truncated", test_err_truncated},
        {"err_truncated_gzip_stream", test_err_truncated_gzip_stream},
        {"err_corrupt_gzip", test_err_corrupt_gzip}, {"err_trailing", test_err_trailing},
        {"err_huge_claim", test_err_huge_claim}, {"err_open", test_err_open},
        {"err_null_args", test_err_null_args}, {"pair", test_pair},
        {"read_first", test_read_first}};
    /* need the real Fashion-MNIST files */
    static const rt_test_case fashion[] = {{"fashion_mnist", test_fashion_mnist}};
    return rt_test_main_with_fashion(argc, argv, cases, (int)(sizeof cases / sizeof cases[0]), fashion,
                                     (int)(sizeof fashion / sizeof fashion[0]));
}
