/* Tests for src/io/safetensors.{h,c}: round trips, files written the way
 * Python's json.dumps / safetensors lay them out, every malformed-header case
 * (crafted byte by byte), atomic save, writer argument checks.
 * All files live in one mkdtemp directory removed at exit. */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/safetensors.h"
#include "rt_test.h"

/* ------------------------------------------------------------ temp files */

static char g_dir[256];

static void rm_tree(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *de;
    char p[1024];
    while ((de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
        snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
        struct stat st;
        if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode)) rm_tree(p);
        else remove(p);
    }
    closedir(d);
    rmdir(dir);
}

static void cleanup_dir(void) {
    if (g_dir[0]) rm_tree(g_dir);
}

/* Path of `name` inside the test directory (created on first use). */
static const char *tpath(const char *name) {
    static char buf[4][512];
    static int k;
    if (!g_dir[0]) {
        const char *base = getenv("TMPDIR");
        snprintf(g_dir, sizeof g_dir, "%s/rt_st_test_XXXXXX", base && *base ? base : "/tmp");
        if (!mkdtemp(g_dir)) {
            perror("mkdtemp");
            exit(2);
        }
        atexit(cleanup_dir);
    }
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", g_dir, name);
    return buf[k];
}

static int write_bytes(const char *path, const void *p, size_t n) {
    FILE *fp = fopen(path, "wb");
    if (!fp) return 0;
    int ok = fwrite(p, 1, n, fp) == n;
    return fclose(fp) == 0 && ok;
}

/* Writes an 8-byte little-endian length `hlen_field`, the header text, spaces
 * up to `hpad` bytes (>= strlen), then `ndata` data bytes 0,1,2,... */
static int write_st_raw(const char *path, uint64_t hlen_field, const char *hdr, size_t hpad,
                        size_t ndata) {
    size_t len = strlen(hdr);
    if (hpad < len) hpad = len;
    size_t total = 8 + hpad + ndata;
    unsigned char *b = malloc(total);
    if (!b) return 0;
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)(hlen_field >> (8 * i));
    memcpy(b + 8, hdr, len);
    memset(b + 8 + len, ' ', hpad - len);
    for (size_t i = 0; i < ndata; i++) b[8 + hpad + i] = (unsigned char)i;
    int ok = write_bytes(path, b, total);
    free(b);
    return ok;
}

/* Header padded to a multiple of 8 with a correct length field. */
static int write_st(const char *path, const char *hdr, size_t ndata) {
    size_t pad = (strlen(hdr) + 7) / 8 * 8;
    return write_st_raw(path, pad, hdr, pad, ndata);
}

/* Opens `path` expecting status `want` and a message containing `sub` (and,
 * for format errors, the path). Prints the mismatch and returns 0 on failure. */
static int expect_open_error(const char *path, rt_status want, const char *sub) {
    rt_st_file *f = (rt_st_file *)&f; /* must be reset to NULL */
    rt_error_clear();
    rt_status s = rt_st_open(path, &f);
    const char *msg = rt_error_last();
    int ok = s == want && f == NULL && strstr(msg, sub) != NULL &&
             (want != RT_ERR_FORMAT || strstr(msg, path) != NULL);
    if (!ok) {
        fprintf(stderr, "  open(%s): got %s (want %s), f=%p, message: %s\n  wanted substring: %s\n",
                path, rt_status_str(s), rt_status_str(want), (void *)f, msg, sub);
        if (s == RT_OK) rt_st_close(f);
    }
    return ok;
}

/* A header crafted by hand with `ndata` data bytes must fail with RT_ERR_FORMAT. */
static int bad_header(const char *hdr, size_t ndata, const char *sub) {
    const char *p = tpath("bad.safetensors");
    if (!write_st(p, hdr, ndata)) return 0;
    return expect_open_error(p, RT_ERR_FORMAT, sub);
}

/* Number of entries in the test directory whose name contains ".tmp.". */
static int count_tmp_files(void) {
    DIR *d = opendir(g_dir);
    if (!d) return -1;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)))
        if (strstr(de->d_name, ".tmp.")) n++;
    closedir(d);
    return n;
}

/* 1 when the n bytes at buf contain the string s. */
static int contains(const unsigned char *buf, size_t n, const char *s) {
    size_t k = strlen(s);
    for (size_t i = 0; i + k <= n; i++)
        if (memcmp(buf + i, s, k) == 0) return 1;
    return 0;
}

static long read_file(const char *path, unsigned char *buf, size_t cap) {
    FILE *fp = fopen(path, "rb");
    if (!fp) return -1;
    size_t n = fread(buf, 1, cap, fp);
    fclose(fp);
    return (long)n;
}

/* ------------------------------------------------------------ tests */

static void test_dtype_size(void) {
    static const struct { const char *s; size_t n; } t[] = {
        {"BOOL", 1}, {"U8", 1}, {"I8", 1}, {"I16", 2}, {"U16", 2}, {"F16", 2}, {"BF16", 2},
        {"I32", 4}, {"U32", 4}, {"F32", 4}, {"F64", 8}, {"I64", 8}, {"U64", 8},
        {"F8_E4M3", 1}, {"F8_E5M2", 1}, {"f32", 0}, {"F128", 0}, {"", 0},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) CHECK_EQ_INT(rt_st_dtype_size(t[i].s), t[i].n);
    CHECK_EQ_INT(rt_st_dtype_size(NULL), 0);
}

static void test_roundtrip(void) {
    const char *p = tpath("rt.safetensors");
    float w[6] = {1.5f, -2.f, 3.25f, 0.f, 1e-7f, -1e30f};
    int64_t idx[4] = {-1, 0, INT64_MAX, INT64_MIN};
    double scalar = 3.141592653589793;
    uint16_t bf[2] = {0x3f80, 0xc000}; /* 1.0, -2.0 in bf16 */
    uint8_t mask[3] = {1, 0, 1};
    int64_t s_w[2] = {2, 3}, s_idx[1] = {4}, s_bf[1] = {2}, s_mask[1] = {3}, s_empty[2] = {0, 5};

    rt_st_writer *wr = rt_st_writer_create();
    CHECK(wr != NULL);
    CHECK_OK(rt_st_writer_add(wr, "layer1.0.conv1.weight", "F32", 2, s_w, w, sizeof w));
    CHECK_OK(rt_st_writer_add(wr, "idx", "I64", 1, s_idx, idx, sizeof idx));
    CHECK_OK(rt_st_writer_add(wr, "num_batches_tracked", "F64", 0, NULL, &scalar, sizeof scalar));
    CHECK_OK(rt_st_writer_add(wr, "bf", "BF16", 1, s_bf, bf, sizeof bf));
    CHECK_OK(rt_st_writer_add(wr, "empty", "F32", 2, s_empty, NULL, 0));
    CHECK_OK(rt_st_writer_add(wr, "mask", "BOOL", 1, s_mask, mask, sizeof mask));
    CHECK_OK(rt_st_writer_set_metadata(wr, "format", "pt"));
    CHECK_OK(rt_st_writer_set_metadata(wr, "epoch", "2"));
    CHECK_OK(rt_st_writer_set_metadata(wr, "epoch", "3")); /* replaces */
    CHECK_OK(rt_st_writer_save(wr, p));
    rt_st_writer_destroy(wr);
    CHECK_EQ_INT(count_tmp_files(), 0);

    /* Layout: header length is a multiple of 8, header is space padded JSON. */
    unsigned char raw[4096];
    long n = read_file(p, raw, sizeof raw);
    CHECK(n > 8);
    uint64_t hlen = 0;
    for (int b = 7; b >= 0; b--) hlen = (hlen << 8) | raw[b];
    CHECK_EQ_INT(hlen % 8, 0);
    CHECK_EQ_INT((uint64_t)n, 8 + hlen + sizeof w + sizeof idx + sizeof scalar + sizeof bf + sizeof mask);
    CHECK(raw[8] == '{');
    size_t e = 8 + (size_t)hlen;
    while (e > 8 && raw[e - 1] == ' ') e--;
    CHECK(raw[e - 1] == '}');
    CHECK(contains(raw + 8, (size_t)hlen, "\"__metadata__\":{"));
    /* Tensors in the order added: w's bytes come first. */
    CHECK(memcmp(raw + 8 + hlen, w, sizeof w) == 0);

    rt_st_file *f = NULL;
    CHECK_OK(rt_st_open(p, &f));
    CHECK_EQ_INT(rt_st_count(f), 6);
    /* File (offset) order == order added. */
    const char *order[6] = {"layer1.0.conv1.weight", "idx", "num_batches_tracked", "bf",
                            "empty", "mask"};
    for (int i = 0; i < 6; i++) CHECK(strcmp(rt_st_entry_at(f, (size_t)i)->name, order[i]) == 0);
    CHECK(rt_st_entry_at(f, 6) == NULL);

    const rt_st_entry *a = rt_st_find(f, "layer1.0.conv1.weight");
    CHECK(a && strcmp(a->dtype, "F32") == 0 && a->ndim == 2 && a->shape[0] == 2 && a->shape[1] == 3);
    CHECK_EQ_INT(a->nbytes, sizeof w);
    CHECK(memcmp(a->data, w, sizeof w) == 0);
    CHECK(((uintptr_t)a->data % 4) == 0);

    const rt_st_entry *b = rt_st_find(f, "idx");
    CHECK(b && strcmp(b->dtype, "I64") == 0 && b->ndim == 1 && b->shape[0] == 4);
    CHECK(memcmp(b->data, idx, sizeof idx) == 0);

    const rt_st_entry *c = rt_st_find(f, "num_batches_tracked");
    CHECK(c && strcmp(c->dtype, "F64") == 0 && c->ndim == 0 && c->nbytes == 8);
    double sv;
    memcpy(&sv, c->data, 8);
    CHECK(sv == scalar);

    const rt_st_entry *d = rt_st_find(f, "bf");
    CHECK(d && strcmp(d->dtype, "BF16") == 0 && memcmp(d->data, bf, sizeof bf) == 0);

    const rt_st_entry *z = rt_st_find(f, "empty");
    CHECK(z && z->ndim == 2 && z->shape[0] == 0 && z->shape[1] == 5 && z->nbytes == 0);

    const rt_st_entry *m = rt_st_find(f, "mask");
    CHECK(m && strcmp(m->dtype, "BOOL") == 0 && m->nbytes == 3 && memcmp(m->data, mask, 3) == 0);

    CHECK(rt_st_find(f, "missing") == NULL);
    CHECK(rt_st_find(f, "") == NULL);
    CHECK(rt_st_metadata(f, "format") && strcmp(rt_st_metadata(f, "format"), "pt") == 0);
    CHECK(rt_st_metadata(f, "epoch") && strcmp(rt_st_metadata(f, "epoch"), "3") == 0);
    CHECK(rt_st_metadata(f, "nope") == NULL);
    rt_st_close(f);
    rt_st_close(NULL);
    remove(p);
}

static void test_no_metadata_and_empty_file(void) {
    const char *p = tpath("nometa.safetensors");
    int32_t v = 7;
    rt_st_writer *wr = rt_st_writer_create();
    CHECK(wr != NULL);
    CHECK_OK(rt_st_writer_add(wr, "v", "I32", 0, NULL, &v, 4));
    CHECK_OK(rt_st_writer_save(wr, p));
    rt_st_writer_destroy(wr);
    unsigned char raw[256];
    long n = read_file(p, raw, sizeof raw);
    CHECK(n > 8);
    CHECK(!contains(raw, (size_t)n, "__metadata__"));
    rt_st_file *f = NULL;
    CHECK_OK(rt_st_open(p, &f));
    CHECK_EQ_INT(rt_st_count(f), 1);
    CHECK(rt_st_metadata(f, "format") == NULL);
    rt_st_close(f);

    /* A writer with nothing in it gives a valid empty file ("{}" + padding). */
    wr = rt_st_writer_create();
    CHECK(wr != NULL);
    CHECK_OK(rt_st_writer_save(wr, p));
    rt_st_writer_destroy(wr);
    CHECK_OK(rt_st_open(p, &f));
    CHECK_EQ_INT(rt_st_count(f), 0);
    CHECK(rt_st_entry_at(f, 0) == NULL);
    rt_st_close(f);
    remove(p);
}

/* Bytes exactly as Python would write them: json.dumps default separators
 * (", " and ": "), space padding to a multiple of 8, little-endian data. */
static void test_python_written(void) {
    const char *p = tpath("py.safetensors");
    const char *hdr = "{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}}";
    CHECK_EQ_INT(strlen(hdr), 61); /* padded to 64 */
    unsigned char file[8 + 64 + 8];
    memset(file, 0, sizeof file);
    file[0] = 64; /* u64 LE 64 */
    memcpy(file + 8, hdr, 61);
    memset(file + 8 + 61, ' ', 3);
    const unsigned char data[8] = {0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0xc0}; /* 1.0f, -2.0f */
    memcpy(file + 72, data, 8);
    CHECK(write_bytes(p, file, sizeof file));
    rt_st_file *f = NULL;
    CHECK_OK(rt_st_open(p, &f));
    CHECK_EQ_INT(rt_st_count(f), 1);
    const rt_st_entry *a = rt_st_find(f, "a");
    CHECK(a && strcmp(a->dtype, "F32") == 0 && a->ndim == 1 && a->shape[0] == 2 && a->nbytes == 8);
    float v[2];
    memcpy(v, a->data, 8);
    CHECK(v[0] == 1.0f && v[1] == -2.0f);
    rt_st_close(f);

    /* safetensors.torch.save_file style: compact JSON, __metadata__ first,
     * larger dtypes first, a non-ASCII name as raw UTF-8. */
    const char *hdr2 =
        "{\"__metadata__\":{\"format\":\"pt\"},\"bn.num_batches_tracked\":{\"dtype\":\"I64\","
        "\"shape\":[],\"data_offsets\":[0,8]},\"bn.weight\":{\"dtype\":\"F32\",\"shape\":[2],"
        "\"data_offsets\":[8,16]},\"caf\xc3\xa9\":{\"dtype\":\"U8\",\"shape\":[1,3],"
        "\"data_offsets\":[16,19]}}";
    CHECK(write_st(p, hdr2, 19));
    CHECK_OK(rt_st_open(p, &f));
    CHECK_EQ_INT(rt_st_count(f), 3);
    CHECK(strcmp(rt_st_metadata(f, "format"), "pt") == 0);
    const rt_st_entry *u = rt_st_find(f, "caf\xc3\xa9");
    CHECK(u && u->ndim == 2 && u->shape[1] == 3 && u->nbytes == 3);
    CHECK(((const unsigned char *)u->data)[0] == 16); /* write_st fills data with 0,1,2,... */
    CHECK(strcmp(rt_st_entry_at(f, 0)->name, "bn.num_batches_tracked") == 0);
    rt_st_close(f);

    /* Entries listed out of offset order in the header come back in file order. */
    const char *hdr3 = "{\"b\": {\"dtype\": \"U8\", \"shape\": [2], \"data_offsets\": [2, 4]}, "
                       "\"a\": {\"dtype\": \"U8\", \"shape\": [2], \"data_offsets\": [0, 2]}}";
    CHECK(write_st(p, hdr3, 4));
    CHECK_OK(rt_st_open(p, &f));
    CHECK(strcmp(rt_st_entry_at(f, 0)->name, "a") == 0);
    CHECK(strcmp(rt_st_entry_at(f, 1)->name, "b") == 0);
    CHECK(((const unsigned char *)rt_st_find(f, "b")->data)[0] == 2);
    rt_st_close(f);
    remove(p);
}

static void test_open_io_errors(void) {
    CHECK(expect_open_error(tpath("does_not_exist.safetensors"), RT_ERR_IO, "No such file"));
    CHECK(expect_open_error(g_dir, RT_ERR_IO, "not a regular file"));
    rt_st_file *f = NULL;
    CHECK_EQ_INT(rt_st_open(NULL, &f), RT_ERR_INVALID_ARG);
    CHECK_EQ_INT(rt_st_open("x", NULL), RT_ERR_INVALID_ARG);
}

static void test_malformed_length(void) {
    const char *p = tpath("len.safetensors");
    CHECK(write_bytes(p, "", 0));
    CHECK(expect_open_error(p, RT_ERR_FORMAT, "is 0 bytes, shorter than the 8-byte header length"));
    CHECK(write_bytes(p, "\x05\0\0\0\0", 5));
    CHECK(expect_open_error(p, RT_ERR_FORMAT, "is 5 bytes, shorter than the 8-byte header length"));
    /* Length larger than the file. */
    CHECK(write_st_raw(p, 4096, "{}", 8, 0));
    CHECK(expect_open_error(p, RT_ERR_FORMAT, "header length 4096 bytes exceeds the 8 bytes"));
    /* Absurd length (> 100 MB), e.g. a file that is not safetensors at all. */
    CHECK(write_st_raw(p, (uint64_t)200 * 1000 * 1000, "{}", 8, 0));
    CHECK(expect_open_error(p, RT_ERR_FORMAT, "header length 200000000 bytes is absurd"));
    CHECK(write_st_raw(p, UINT64_MAX, "{}", 8, 0));
    CHECK(expect_open_error(p, RT_ERR_FORMAT, "is absurd"));
    /* Length 0: empty header is not JSON. */
    CHECK(write_st_raw(p, 0, "", 0, 0));
    CHECK(expect_open_error(p, RT_ERR_FORMAT, "header is not valid JSON"));
    remove(p);
}

static void test_malformed_json(void) {
    /* Truncated JSON: jansson's message and the position are quoted. */
    CHECK(bad_header("{\"a\": {\"dtype\": ", 0, "header is not valid JSON"));
    CHECK(bad_header("{\"a\": {\"dtype\": ", 0, "column"));
    CHECK(bad_header("{\"a\" 1}", 0, "byte"));
    /* Trailing garbage after the object (only spaces may pad). */
    CHECK(bad_header("{} x", 0, "header is not valid JSON"));
    /* Invalid UTF-8 in the header. */
    CHECK(bad_header("{\"\xff\": 1}", 0, "header is not valid JSON"));
    /* Duplicate names. */
    CHECK(bad_header("{\"a\": {\"dtype\": \"U8\", \"shape\": [1], \"data_offsets\": [0, 1]}, "
                     "\"a\": {\"dtype\": \"U8\", \"shape\": [1], \"data_offsets\": [1, 2]}}",
                     2, "duplicate"));
    /* Not an object. */
    CHECK(bad_header("[1, 2]", 0, "header is an array, expected a JSON object"));
}

static void test_malformed_entries(void) {
    CHECK(bad_header("{\"x\": 5}", 0, "tensor 'x': entry is an integer, expected an object"));
    CHECK(bad_header("{\"x\": {\"shape\": [1], \"data_offsets\": [0, 4]}}", 4,
                     "tensor 'x' has no \"dtype\""));
    CHECK(bad_header("{\"x\": {\"dtype\": \"F32\", \"data_offsets\": [0, 4]}}", 4,
                     "tensor 'x' has no \"shape\""));
    CHECK(bad_header("{\"x\": {\"dtype\": \"F32\", \"shape\": [1]}}", 4,
                     "tensor 'x' has no \"data_offsets\""));
    CHECK(bad_header("{\"x\": {\"dtype\": 32, \"shape\": [1], \"data_offsets\": [0, 4]}}", 4,
                     "tensor 'x': \"dtype\" is an integer, expected a string"));
    CHECK(bad_header("{\"x\": {\"dtype\": \"F32\", \"shape\": 1, \"data_offsets\": [0, 4]}}", 4,
                     "tensor 'x': \"shape\" is an integer, expected an array"));
    CHECK(bad_header("{\"x\": {\"dtype\": \"F32\", \"shape\": [1.0], \"data_offsets\": [0, 4]}}", 4,
                     "shape element 0 is a real number"));
    CHECK(bad_header("{\"x\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4, 8]}}", 4,
                     "\"data_offsets\" must be an array of two integers"));
    CHECK(bad_header("{\"x\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": \"0-4\"}}", 4,
                     "\"data_offsets\" must be an array of two integers"));
    CHECK(bad_header("{\"x\": {\"dtype\": \"F17\", \"shape\": [1], \"data_offsets\": [0, 4]}}", 4,
                     "tensor 'x' has unknown dtype 'F17'; supported dtypes are BOOL"));
    CHECK(bad_header("{\"x\": {\"dtype\": \"F32\", \"shape\": [2, -1], \"data_offsets\": [0, 4]}}", 4,
                     "tensor 'x' has negative size -1 in dimension 1"));
    CHECK(bad_header("{\"x\": {\"dtype\": \"U8\", \"shape\": [1,1,1,1,1,1,1,1,1], "
                     "\"data_offsets\": [0, 1]}}", 1, "has 9 dimensions; revtorch supports at most 8"));
    CHECK(bad_header("{\"x\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [-4, 0]}}", 4,
                     "tensor 'x' has negative data_offsets"));
    CHECK(bad_header("{\"x\": {\"dtype\": \"F32\", \"shape\": [0], \"data_offsets\": [4, 0]}}", 4,
                     "tensor 'x' has data_offsets [4, 0] with begin > end"));
    CHECK(bad_header("{\"x\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}}", 4,
                     "tensor 'x' has data_offsets [0, 8] but the data buffer holds only 4 bytes"));
    CHECK(bad_header("{\"x\": {\"dtype\": \"F32\", \"shape\": [2,3], \"data_offsets\": [0, 20]}}", 20,
                     "tensor 'x' has shape [2,3] F32 = 24 bytes but data_offsets cover 20"));
    CHECK(bad_header("{\"x\": {\"dtype\": \"F32\", \"shape\": [4611686018427387904, 8], "
                     "\"data_offsets\": [0, 4]}}", 4, "overflows"));
}

static void test_malformed_layout(void) {
    /* Overlap. */
    CHECK(bad_header("{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}, "
                     "\"b\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [4, 12]}}",
                     12, "tensors 'a' and 'b' overlap"));
    /* Same range twice. */
    CHECK(bad_header("{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}, "
                     "\"b\": {\"dtype\": \"I32\", \"shape\": [2], \"data_offsets\": [0, 8]}}",
                     8, "overlap"));
    /* Hole between tensors. */
    CHECK(bad_header("{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}, "
                     "\"b\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [12, 20]}}",
                     20, "bytes [8, 12) of the data buffer belong to no tensor (a hole before 'b')"));
    /* Hole at the start. */
    CHECK(bad_header("{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [4, 8]}}", 8,
                     "bytes [0, 4) of the data buffer belong to no tensor"));
    /* Trailing bytes after the last tensor. */
    CHECK(bad_header("{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]}}", 6,
                     "the last 2 bytes of the data buffer (from offset 4 of 6) belong to no tensor"));
    /* No tensors but data. */
    CHECK(bad_header("{}", 3, "the last 3 bytes"));
}

static void test_malformed_metadata(void) {
    CHECK(bad_header("{\"__metadata__\": {\"epoch\": 3}}", 0,
                     "\"__metadata__\" value for key 'epoch' is an integer, but the format allows "
                     "only strings"));
    CHECK(bad_header("{\"__metadata__\": [\"a\"]}", 0, "\"__metadata__\" is an array"));
    /* Valid: metadata only, no tensors. */
    const char *p = tpath("meta.safetensors");
    CHECK(write_st(p, "{\"__metadata__\": {\"k\": \"v\"}}", 0));
    rt_st_file *f = NULL;
    CHECK_OK(rt_st_open(p, &f));
    CHECK_EQ_INT(rt_st_count(f), 0);
    CHECK(strcmp(rt_st_metadata(f, "k"), "v") == 0);
    rt_st_close(f);
    remove(p);
}

static void test_find_many(void) {
    const char *p = tpath("many.safetensors");
    enum { N = 300 };
    static uint8_t vals[N];
    char name[64];
    rt_st_writer *wr = rt_st_writer_create();
    CHECK(wr != NULL);
    for (int i = 0; i < N; i++) {
        vals[i] = (uint8_t)(i * 7);
        snprintf(name, sizeof name, "layer%d.%d.weight", (i * 37) % N, i);
        int64_t one = 1;
        CHECK_OK(rt_st_writer_add(wr, name, "U8", 1, &one, &vals[i], 1));
    }
    CHECK_OK(rt_st_writer_save(wr, p));
    rt_st_writer_destroy(wr);
    rt_st_file *f = NULL;
    CHECK_OK(rt_st_open(p, &f));
    CHECK_EQ_INT(rt_st_count(f), N);
    for (int i = 0; i < N; i++) {
        snprintf(name, sizeof name, "layer%d.%d.weight", (i * 37) % N, i);
        const rt_st_entry *e = rt_st_find(f, name);
        CHECK(e != NULL && strcmp(e->name, name) == 0);
        CHECK_EQ_INT(*(const uint8_t *)e->data, vals[i]);
        CHECK(rt_st_entry_at(f, (size_t)i) == e); /* file order = order added */
    }
    CHECK(rt_st_find(f, "layer0") == NULL);
    CHECK(rt_st_find(f, "zzz") == NULL);
    CHECK(rt_st_find(f, NULL) == NULL);
    rt_st_close(f);
    remove(p);
}

static void test_writer_rejects(void) {
    float v[6] = {0};
    int64_t s23[2] = {2, 3}, sneg[1] = {-1}, big[2] = {INT64_MAX, INT64_MAX};
    int64_t s9[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    rt_st_writer *wr = rt_st_writer_create();
    CHECK(wr != NULL);
    CHECK_OK(rt_st_writer_add(wr, "w", "F32", 2, s23, v, sizeof v));

    CHECK_EQ_INT(rt_st_writer_add(wr, "w", "F32", 2, s23, v, sizeof v), RT_ERR_INVALID_ARG);
    CHECK(strstr(rt_error_last(), "duplicate tensor name 'w'") != NULL);
    CHECK_EQ_INT(rt_st_writer_add(wr, "x", "F32", 2, s23, v, 20), RT_ERR_INVALID_ARG);
    CHECK(strstr(rt_error_last(), "tensor 'x' has shape [2,3] F32 = 24 bytes but nbytes is 20"));
    CHECK_EQ_INT(rt_st_writer_add(wr, "x", "F33", 2, s23, v, sizeof v), RT_ERR_DTYPE);
    CHECK(strstr(rt_error_last(), "unknown dtype 'F33'"));
    CHECK_EQ_INT(rt_st_writer_add(wr, "x", "F32", 1, sneg, v, 0), RT_ERR_INVALID_ARG);
    CHECK_EQ_INT(rt_st_writer_add(wr, "x", "F32", 9, s9, v, 4), RT_ERR_INVALID_ARG);
    CHECK_EQ_INT(rt_st_writer_add(wr, "x", "F32", -1, s9, v, 4), RT_ERR_INVALID_ARG);
    CHECK_EQ_INT(rt_st_writer_add(wr, "x", "F32", 2, NULL, v, 4), RT_ERR_INVALID_ARG);
    CHECK_EQ_INT(rt_st_writer_add(wr, "x", "F32", 2, big, v, 4), RT_ERR_INVALID_ARG);
    CHECK(strstr(rt_error_last(), "overflows"));
    CHECK_EQ_INT(rt_st_writer_add(wr, "x", "F32", 2, s23, NULL, sizeof v), RT_ERR_INVALID_ARG);
    CHECK_EQ_INT(rt_st_writer_add(wr, "__metadata__", "F32", 2, s23, v, sizeof v), RT_ERR_INVALID_ARG);
    CHECK_EQ_INT(rt_st_writer_add(wr, "bad\xff", "F32", 2, s23, v, sizeof v), RT_ERR_INVALID_ARG);
    CHECK_EQ_INT(rt_st_writer_add(wr, NULL, "F32", 2, s23, v, sizeof v), RT_ERR_INVALID_ARG);
    CHECK_EQ_INT(rt_st_writer_add(NULL, "x", "F32", 2, s23, v, sizeof v), RT_ERR_INVALID_ARG);
    CHECK_EQ_INT(rt_st_writer_set_metadata(wr, "k", NULL), RT_ERR_INVALID_ARG);
    CHECK_EQ_INT(rt_st_writer_set_metadata(wr, "k", "\xc3"), RT_ERR_INVALID_ARG);
    CHECK_EQ_INT(rt_st_writer_save(wr, NULL), RT_ERR_INVALID_ARG);
    CHECK_EQ_INT(rt_st_writer_save(NULL, tpath("x")), RT_ERR_INVALID_ARG);

    /* The failed adds left the writer as it was: one tensor. */
    const char *p = tpath("rej.safetensors");
    CHECK_OK(rt_st_writer_save(wr, p));
    rt_st_writer_destroy(wr);
    rt_st_writer_destroy(NULL);
    rt_st_file *f = NULL;
    CHECK_OK(rt_st_open(p, &f));
    CHECK_EQ_INT(rt_st_count(f), 1);
    rt_st_close(f);
    remove(p);
}

/* Writes a small valid file at p holding tensor "old" = 4 bytes 0xAB. */
static int write_old(const char *p, unsigned char *copy, long *ncopy) {
    static const uint8_t old[4] = {0xab, 0xab, 0xab, 0xab};
    int64_t s = 4;
    rt_st_writer *wr = rt_st_writer_create();
    int ok = wr && rt_st_writer_add(wr, "old", "U8", 1, &s, old, 4) == RT_OK &&
             rt_st_writer_save(wr, p) == RT_OK;
    rt_st_writer_destroy(wr);
    if (ok) *ncopy = read_file(p, copy, 4096);
    return ok && *ncopy > 0;
}

static int same_as(const char *p, const unsigned char *copy, long ncopy) {
    unsigned char now[4096];
    long n = read_file(p, now, sizeof now);
    return n == ncopy && memcmp(now, copy, (size_t)n) == 0;
}

static void test_atomic_save(void) {
    const char *p = tpath("model.safetensors");
    unsigned char copy[4096];
    long ncopy = 0;
    CHECK(write_old(p, copy, &ncopy));

    /* A failed add does not disturb the existing file and leaves no temp file. */
    float v[2] = {1, 2};
    int64_t s2 = 2;
    rt_st_writer *wr = rt_st_writer_create();
    CHECK(wr != NULL);
    CHECK_EQ_INT(rt_st_writer_add(wr, "w", "F32", 1, &s2, v, 7), RT_ERR_INVALID_ARG);
    rt_st_writer_destroy(wr);
    CHECK(same_as(p, copy, ncopy));
    CHECK_EQ_INT(count_tmp_files(), 0);

    /* A save that fails half-way through writing (file size limit reached:
     * EFBIG, the way a full disk fails) keeps the old file intact and
     * removes its temp file. */
    enum { BIG = 1 << 20 };
    uint8_t *big = calloc(BIG, 1);
    CHECK(big != NULL);
    int64_t sb = BIG;
    wr = rt_st_writer_create();
    CHECK(wr != NULL);
    CHECK_OK(rt_st_writer_add(wr, "big", "U8", 1, &sb, big, BIG));
    struct rlimit old_lim, lim;
    CHECK(getrlimit(RLIMIT_FSIZE, &old_lim) == 0);
    lim = old_lim;
    lim.rlim_cur = 64 * 1024;
    void (*old_sig)(int) = signal(SIGXFSZ, SIG_IGN);
    CHECK(setrlimit(RLIMIT_FSIZE, &lim) == 0);
    rt_status s = rt_st_writer_save(wr, p);
    setrlimit(RLIMIT_FSIZE, &old_lim);
    signal(SIGXFSZ, old_sig);
    CHECK_EQ_INT(s, RT_ERR_IO);
    CHECK(strstr(rt_error_last(), "is untouched") != NULL);
    CHECK(same_as(p, copy, ncopy));
    CHECK_EQ_INT(count_tmp_files(), 0);

    /* A save whose final rename fails (target is a directory) removes its temp. */
    const char *dir = tpath("adir");
    CHECK(mkdir(dir, 0700) == 0);
    char inner[600];
    snprintf(inner, sizeof inner, "%s/keep", dir);
    CHECK(write_bytes(inner, "x", 1));
    CHECK_EQ_INT(rt_st_writer_save(wr, dir), RT_ERR_IO);
    CHECK(strstr(rt_error_last(), "cannot rename") != NULL);
    CHECK_EQ_INT(count_tmp_files(), 0);
    remove(inner);
    rmdir(dir);

    /* A missing directory fails cleanly with the reason. */
    CHECK_EQ_INT(rt_st_writer_save(wr, tpath("no/such/dir.safetensors")), RT_ERR_IO);
    CHECK(strstr(rt_error_last(), "No such file") != NULL);

    /* The same save without the limit replaces the old file completely. */
    CHECK_OK(rt_st_writer_save(wr, p));
    rt_st_writer_destroy(wr);
    CHECK_EQ_INT(count_tmp_files(), 0);
    rt_st_file *f = NULL;
    CHECK_OK(rt_st_open(p, &f));
    CHECK_EQ_INT(rt_st_count(f), 1);
    CHECK(rt_st_find(f, "old") == NULL);
    CHECK(rt_st_find(f, "big") && rt_st_find(f, "big")->nbytes == BIG);
    rt_st_close(f);
    free(big);
    remove(p);
}

RT_TEST_MAIN({"dtype_size", test_dtype_size}, {"roundtrip", test_roundtrip},
             {"no_metadata_and_empty_file", test_no_metadata_and_empty_file},
             {"python_written", test_python_written}, {"open_io_errors", test_open_io_errors},
             {"malformed_length", test_malformed_length}, {"malformed_json", test_malformed_json},
             {"malformed_entries", test_malformed_entries},
             {"malformed_layout", test_malformed_layout},
             {"malformed_metadata", test_malformed_metadata}, {"find_many", test_find_many},
             {"writer_rejects", test_writer_rejects}, {"atomic_save", test_atomic_save})
