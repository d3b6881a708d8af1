/* Tests for datasets, the MNIST loader and the batch loader (src/data/
 * dataset.h, mnist.h, loader.h): small in-memory datasets for shuffling,
 * batching, normalisation and augmentation; crafted IDX files in a private
 * temp directory; the real Fashion-MNIST files.
 *
 * `test_data` runs every test that needs no file outside the tree;
 * `test_data --fashion` (CTest: test_data_fashion) runs the ones that read the
 * real Fashion-MNIST files from $RT_FASHION_MNIST_DIR, else from
 * /usr/share/datasets/fashion-mnist (Debian's dataset-fashion-mnist), and
 * exits with 77 (CTest: skipped) when they are missing. `test_data NAME` runs
 * one test of either kind, `test_data --list` lists all. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "core/mem.h"
#include "core/tensor.h"
#include "data/dataset.h"
#include "data/loader.h"
#include "data/mnist.h"
#include "rt_test.h"

/* The Fashion-MNIST directory: $RT_FASHION_MNIST_DIR when set and not
 * empty, else where Debian's package installs it (rt_mnist_default_dir). */
static const char *fashion_dir(void) {
    const char *env = getenv("RT_FASHION_MNIST_DIR");
    return env && *env ? env : rt_mnist_default_dir();
}

/* 1 when fashion_dir() holds the four IDX files (each as NAME.gz or NAME). */
static int fashion_present(void) {
    static const char *const names[] = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                                        "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char gz[512], plain[512];
        struct stat st;
        snprintf(gz, sizeof gz, "%s/%s.gz", fashion_dir(), names[i]);
        snprintf(plain, sizeof plain, "%s/%s", fashion_dir(), names[i]);
        if (!(stat(gz, &st) == 0 && S_ISREG(st.st_mode)) && !(stat(plain, &st) == 0 && S_ISREG(st.st_mode)))
            return 0;
    }
    return 1;
}

static int64_t data_live(void) {
    rt_memstats m;
    rt_memstats_get(&m);
    return m.live[RT_MEM_DATA];
}

/* n samples of C x H x W; pixel k of sample i = (i * 31 + k * 7) % 256;
 * label i (num_classes = n) so batches reveal the sample indices. */
static rt_dataset *make_ds(int64_t n, int C, int H, int W) {
    int64_t isz = (int64_t)C * H * W;
    uint8_t *img = malloc((size_t)(n * isz) + 1);
    int32_t *lab = malloc((size_t)n * sizeof(int32_t) + 1);
    for (int64_t i = 0; i < n; i++) {
        for (int64_t k = 0; k < isz; k++) img[i * isz + k] = (uint8_t)((i * 31 + k * 7) % 256);
        lab[i] = (int32_t)i;
    }
    rt_dataset *ds = NULL;
    rt_status st = rt_dataset_from_arrays(n, C, H, W, (int)(n > 0 ? n : 1), img, lab, &ds);
    if (st != RT_OK) fprintf(stderr, "make_ds: %s\n", rt_error_last());
    free(img);
    free(lab);
    return ds;
}

static float norm_ref(uint8_t v, float mean, float std) { return ((float)v / 255.0f - mean) / std; }

/* ---- datasets ------------------------------------------------------------------ */

static void test_dataset_from_arrays(void) {
    int64_t before = data_live();
    const uint8_t img[2 * 2 * 3 * 2] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11,
                                        12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23};
    const int32_t lab[2] = {4, 0};
    rt_dataset *ds = NULL;
    CHECK_OK(rt_dataset_from_arrays(2, 2, 3, 2, 5, img, lab, &ds));
    CHECK_EQ_INT(ds->n, 2);
    CHECK_EQ_INT(ds->channels, 2);
    CHECK_EQ_INT(ds->height, 3);
    CHECK_EQ_INT(ds->width, 2);
    CHECK_EQ_INT(ds->num_classes, 5);
    CHECK(ds->images->dtype == RT_U8 && ds->images->ndim == 4 && ds->images->shape[0] == 2 &&
          ds->images->shape[1] == 2 && ds->images->shape[2] == 3 && ds->images->shape[3] == 2);
    CHECK(ds->labels->dtype == RT_I32 && ds->labels->ndim == 1 && ds->labels->shape[0] == 2);
    CHECK_EQ_INT(rt_dataset_image_size(ds), 12);
    CHECK_EQ_INT(rt_dataset_image(ds, 1)[0], 12);
    CHECK_EQ_INT(rt_dataset_image(ds, 1)[11], 23);
    CHECK_EQ_INT(rt_dataset_label(ds, 0), 4);
    CHECK_EQ_INT(rt_dataset_label(ds, 1), 0);
    CHECK_EQ_INT(data_live() - before, 24 + 8);
    rt_dataset_destroy(ds);
    CHECK_EQ_INT(data_live(), before);
    rt_dataset_destroy(NULL);

    /* errors */
    const int32_t bad[2] = {1, 5};
    CHECK(rt_dataset_from_arrays(2, 2, 3, 2, 5, img, bad, &ds) == RT_ERR_FORMAT);
    CHECK(ds == NULL);
    CHECK(strstr(rt_error_last(), "index 1") != NULL);
    CHECK(rt_dataset_from_arrays(2, 0, 3, 2, 5, img, lab, &ds) == RT_ERR_INVALID_ARG);
    CHECK(rt_dataset_from_arrays(2, RT_DATA_MAX_CHANNELS + 1, 3, 2, 5, img, lab, &ds) ==
          RT_ERR_INVALID_ARG);
    CHECK(rt_dataset_from_arrays(2, 1, 0, 2, 5, img, lab, &ds) == RT_ERR_INVALID_ARG);
    CHECK(rt_dataset_from_arrays(-1, 1, 1, 1, 5, img, lab, &ds) == RT_ERR_INVALID_ARG);
    CHECK(rt_dataset_from_arrays(2, 1, 1, 1, 0, img, lab, &ds) == RT_ERR_INVALID_ARG);
    CHECK(rt_dataset_from_arrays(2, 1, 1, 1, 5, NULL, lab, &ds) == RT_ERR_INVALID_ARG);
    CHECK(rt_dataset_from_arrays(2, 1, 1, 1, 5, img, lab, NULL) == RT_ERR_INVALID_ARG);
    /* empty is fine */
    CHECK_OK(rt_dataset_from_arrays(0, 1, 28, 28, 10, NULL, NULL, &ds));
    CHECK_EQ_INT(ds->n, 0);
    rt_dataset_destroy(ds);
    CHECK_EQ_INT(data_live(), before);
}

static void test_dataset_subset(void) {
    int64_t before = data_live();
    rt_dataset *ds = make_ds(10, 1, 4, 3);
    CHECK(ds != NULL);
    rt_dataset *sub = NULL;
    CHECK_OK(rt_dataset_subset(ds, 3, 4, &sub));
    CHECK_EQ_INT(sub->n, 4);
    CHECK_EQ_INT(sub->num_classes, 10);
    CHECK_EQ_INT(sub->height, 4);
    CHECK_EQ_INT(sub->width, 3);
    for (int64_t i = 0; i < 4; i++) {
        CHECK_EQ_INT(rt_dataset_label(sub, i), 3 + i);
        CHECK(memcmp(rt_dataset_image(sub, i), rt_dataset_image(ds, 3 + i), 12) == 0);
    }
    rt_dataset_destroy(ds); /* the subset is independent */
    CHECK_EQ_INT(rt_dataset_label(sub, 3), 6);
    rt_dataset *empty = NULL;
    CHECK_OK(rt_dataset_subset(sub, 4, 0, &empty));
    CHECK_EQ_INT(empty->n, 0);
    rt_dataset_destroy(empty);
    CHECK(rt_dataset_subset(sub, 2, 3, &empty) == RT_ERR_INVALID_ARG);
    CHECK(empty == NULL);
    CHECK(rt_dataset_subset(sub, -1, 1, &empty) == RT_ERR_INVALID_ARG);
    CHECK(rt_dataset_subset(sub, 0, -1, &empty) == RT_ERR_INVALID_ARG);
    CHECK(rt_dataset_subset(NULL, 0, 0, &empty) == RT_ERR_INVALID_ARG);
    rt_dataset_destroy(sub);
    CHECK_EQ_INT(data_live(), before);
}

static void test_dataset_channel_stats(void) {
    /* 2 samples, 2 channels of 2 pixels: channel 0 = {0,255,255,0}, channel 1 = 51 everywhere */
    const uint8_t img[8] = {0, 255, 51, 51, 255, 0, 51, 51};
    const int32_t lab[2] = {0, 0};
    rt_dataset *ds = NULL;
    CHECK_OK(rt_dataset_from_arrays(2, 2, 1, 2, 1, img, lab, &ds));
    double mean[2], std[2];
    CHECK_OK(rt_dataset_channel_stats(ds, mean, std));
    CHECK_NEAR(mean[0], 0.5, 1e-15);
    CHECK_NEAR(std[0], 0.5, 1e-15);
    CHECK_NEAR(mean[1], 0.2, 1e-15);
    CHECK_NEAR(std[1], 0.0, 1e-15);
    CHECK(rt_dataset_channel_stats(ds, NULL, std) == RT_ERR_INVALID_ARG);
    rt_dataset_destroy(ds);
    CHECK_OK(rt_dataset_from_arrays(0, 1, 1, 1, 1, NULL, NULL, &ds));
    CHECK(rt_dataset_channel_stats(ds, mean, std) == RT_ERR_INVALID_ARG);
    rt_dataset_destroy(ds);
}

/* ---- loader: batching and order ------------------------------------------------ */

/* Runs one epoch from the current position; writes batch sizes to sizes[]
 * and the labels seen, in order, to seen[]. Returns the number of batches or
 * -1 on error. */
static int run_epoch(rt_loader *l, int64_t *sizes, int max_batches, int32_t *seen) {
    int nb = 0, ns = 0;
    for (;;) {
        rt_tensor *x = NULL, *y = NULL;
        bool end = false;
        if (rt_loader_next(l, &x, &y, &end) != RT_OK) return -1;
        if (end) {
            if (x || y) return -1;
            return nb;
        }
        if (nb >= max_batches) {
            rt_tensor_release(x);
            rt_tensor_release(y);
            return -1;
        }
        sizes[nb++] = y->shape[0];
        for (int64_t k = 0; k < y->shape[0]; k++) seen[ns++] = ((int32_t *)rt_tensor_data(y))[k];
        rt_tensor_release(x);
        rt_tensor_release(y);
    }
}

static void test_loader_batch_sizes(void) {
    int64_t before = data_live();
    rt_dataset *ds = make_ds(10, 1, 28, 28);
    CHECK(ds != NULL);
    rt_loader_options o = rt_loader_options_default();
    o.batch_size = 4;
    rt_loader *l = NULL;
    CHECK_OK(rt_loader_create(ds, &o, &l));
    CHECK_EQ_INT(rt_loader_batches_per_epoch(l), 3);
    CHECK_EQ_INT(rt_loader_epoch(l), 0);
    CHECK_EQ_INT(rt_loader_batch_index(l), 0);

    rt_tensor *x = NULL, *y = NULL;
    bool end = true;
    CHECK_OK(rt_loader_next(l, &x, &y, &end));
    CHECK(!end && x && y);
    CHECK(x->dtype == RT_F32 && x->ndim == 4 && x->shape[0] == 4 && x->shape[1] == 1 &&
          x->shape[2] == 28 && x->shape[3] == 28);
    CHECK(y->dtype == RT_I32 && y->ndim == 1 && y->shape[0] == 4);
    CHECK(x->storage->category == RT_MEM_DATA && y->storage->category == RT_MEM_DATA);
    rt_tensor_release(x);
    rt_tensor_release(y);
    CHECK_OK(rt_loader_next(l, &x, &y, &end));
    CHECK_EQ_INT(y->shape[0], 4);
    rt_tensor_release(x);
    rt_tensor_release(y);
    CHECK_OK(rt_loader_next(l, &x, &y, &end));
    CHECK_EQ_INT(x->shape[0], 2);
    CHECK_EQ_INT(y->shape[0], 2);
    rt_tensor_release(x);
    rt_tensor_release(y);
    CHECK_EQ_INT(rt_loader_batch_index(l), 3);
    for (int rep = 0; rep < 2; rep++) { /* stays at the end until reset */
        x = y = (rt_tensor *)1;
        CHECK_OK(rt_loader_next(l, &x, &y, &end));
        CHECK(end && x == NULL && y == NULL);
    }

    int64_t sizes[8];
    int32_t seen[16];
    CHECK_OK(rt_loader_reset(l, 1));
    CHECK_EQ_INT(run_epoch(l, sizes, 8, seen), 3);
    CHECK(sizes[0] == 4 && sizes[1] == 4 && sizes[2] == 2);
    for (int i = 0; i < 10; i++) CHECK_EQ_INT(seen[i], i); /* no shuffle: index order */
    rt_loader_destroy(l);

    o.drop_last = true;
    CHECK_OK(rt_loader_create(ds, &o, &l));
    CHECK_EQ_INT(rt_loader_batches_per_epoch(l), 2);
    CHECK_EQ_INT(run_epoch(l, sizes, 8, seen), 2);
    CHECK(sizes[0] == 4 && sizes[1] == 4);
    rt_loader_destroy(l);

    o.batch_size = 11; /* larger than the dataset */
    CHECK_OK(rt_loader_create(ds, &o, &l));
    CHECK_EQ_INT(rt_loader_batches_per_epoch(l), 0);
    CHECK_EQ_INT(run_epoch(l, sizes, 8, seen), 0);
    rt_loader_destroy(l);
    o.drop_last = false;
    CHECK_OK(rt_loader_create(ds, &o, &l));
    CHECK_EQ_INT(run_epoch(l, sizes, 8, seen), 1);
    CHECK_EQ_INT(sizes[0], 10);
    rt_loader_destroy(l);
    o.batch_size = 5; /* exact division */
    CHECK_OK(rt_loader_create(ds, &o, &l));
    CHECK_EQ_INT(run_epoch(l, sizes, 8, seen), 2);
    CHECK(sizes[0] == 5 && sizes[1] == 5);
    rt_loader_destroy(l);

    rt_dataset_destroy(ds);
    CHECK_EQ_INT(data_live(), before);
}

static bool is_perm(const int32_t *v, int n) {
    char *hit = calloc((size_t)n, 1);
    bool ok = true;
    for (int i = 0; i < n && ok; i++) {
        if (v[i] < 0 || v[i] >= n || hit[v[i]]) ok = false;
        else hit[v[i]] = 1;
    }
    free(hit);
    return ok;
}

static void test_loader_shuffle(void) {
    enum { N = 1000 };
    rt_dataset *ds = make_ds(N, 1, 2, 2);
    CHECK(ds != NULL);
    rt_loader_options o = rt_loader_options_default();
    o.batch_size = 64;
    o.shuffle = true;
    o.seed = 1234;
    rt_loader *a = NULL, *b = NULL;
    CHECK_OK(rt_loader_create(ds, &o, &a));
    CHECK_OK(rt_loader_create(ds, &o, &b));
    static int32_t e0a[N], e0b[N], e1a[N], e1b[N], other[N];
    int64_t sizes[160];
    CHECK_EQ_INT(run_epoch(a, sizes, 160, e0a), 16);
    CHECK(is_perm(e0a, N));
    /* the labels seen are the order the loader reports */
    for (int i = 0; i < N; i++) CHECK_EQ_INT(rt_loader_order(a)[i], e0a[i]);
    int fixed = 0;
    for (int i = 0; i < N; i++) fixed += e0a[i] == i;
    CHECK(fixed < 20); /* a shuffle, not the identity (expected ~1 fixed point) */

    CHECK_OK(rt_loader_reset(a, 1));
    CHECK_EQ_INT(run_epoch(a, sizes, 160, e1a), 16);
    CHECK(is_perm(e1a, N));
    CHECK(memcmp(e0a, e1a, sizeof e0a) != 0); /* different epoch, different order */

    /* another loader with the same seed: same orders, epochs visited in another order */
    CHECK_OK(rt_loader_reset(b, 1));
    CHECK_EQ_INT(run_epoch(b, sizes, 160, e1b), 16);
    CHECK_OK(rt_loader_reset(b, 0));
    CHECK_EQ_INT(run_epoch(b, sizes, 160, e0b), 16);
    CHECK(memcmp(e0a, e0b, sizeof e0a) == 0);
    CHECK(memcmp(e1a, e1b, sizeof e1a) == 0);
    /* re-running an epoch repeats it */
    CHECK_OK(rt_loader_reset(a, 0));
    CHECK_EQ_INT(run_epoch(a, sizes, 160, other), 16);
    CHECK(memcmp(e0a, other, sizeof e0a) == 0);
    rt_loader_destroy(b);

    /* another seed: another order */
    o.seed = 1235;
    CHECK_OK(rt_loader_create(ds, &o, &b));
    CHECK_EQ_INT(run_epoch(b, sizes, 160, other), 16);
    CHECK(is_perm(other, N));
    CHECK(memcmp(e0a, other, sizeof e0a) != 0);
    rt_loader_destroy(b);

    /* the batch size does not change the order */
    o.seed = 1234;
    o.batch_size = 7;
    CHECK_OK(rt_loader_create(ds, &o, &b));
    CHECK_EQ_INT(run_epoch(b, sizes, 160, other), 143);
    CHECK_EQ_INT(sizes[142], 6);
    CHECK(memcmp(e0a, other, sizeof e0a) == 0);
    CHECK(memcmp(rt_loader_order(a), rt_loader_order(b), sizeof(int64_t) * N) == 0);
    rt_loader_destroy(b);

    /* uniformity, coarse: where sample 0 lands over 400 epochs of a 4-sample set */
    rt_dataset *small = make_ds(4, 1, 1, 1);
    o.batch_size = 4;
    CHECK_OK(rt_loader_create(small, &o, &b));
    int pos_count[4] = {0};
    for (int e = 0; e < 400; e++) {
        CHECK_OK(rt_loader_reset(b, e));
        for (int i = 0; i < 4; i++)
            if (rt_loader_order(b)[i] == 0) pos_count[i]++;
    }
    for (int i = 0; i < 4; i++) CHECK(pos_count[i] > 60 && pos_count[i] < 140); /* ~100 each */
    rt_loader_destroy(b);
    rt_dataset_destroy(small);

    rt_loader_destroy(a);
    rt_dataset_destroy(ds);
}

/* ---- loader: normalisation and augmentation -------------------------------------- */

static void test_loader_normalize_exact(void) {
    /* 2 channels of 16 x 16 = 256 pixels each: channel 0 holds 0..255, channel 1 255..0 */
    uint8_t img[2 * 256];
    for (int v = 0; v < 256; v++) {
        img[v] = (uint8_t)v;
        img[256 + v] = (uint8_t)(255 - v);
    }
    const int32_t lab[1] = {0};
    rt_dataset *ds = NULL;
    CHECK_OK(rt_dataset_from_arrays(1, 2, 16, 16, 1, img, lab, &ds));
    rt_loader_options o = rt_loader_options_default();
    o.batch_size = 1;
    o.mean[0] = RT_FASHION_MNIST_MEAN;
    o.std[0] = RT_FASHION_MNIST_STD;
    o.mean[1] = 0.5f;
    o.std[1] = 0.25f;
    rt_loader *l = NULL;
    CHECK_OK(rt_loader_create(ds, &o, &l));
    rt_tensor *x, *y;
    bool end;
    CHECK_OK(rt_loader_next(l, &x, &y, &end));
    const float *p = rt_tensor_f32(x);
    for (int v = 0; v < 256; v++) {
        float want0 = norm_ref((uint8_t)v, 0.2860f, 0.3530f);
        float want1 = norm_ref((uint8_t)(255 - v), 0.5f, 0.25f);
        CHECK(memcmp(&p[v], &want0, sizeof(float)) == 0); /* bit-exact */
        CHECK(memcmp(&p[256 + v], &want1, sizeof(float)) == 0);
    }
    CHECK_NEAR(p[0], -0.2860 / 0.3530, 1e-6);
    CHECK_NEAR(p[255], (1.0 - 0.2860) / 0.3530, 1e-6);
    CHECK_NEAR(p[256 + 0], 2.0, 1e-6);
    CHECK_NEAR(p[256 + 255], -2.0, 1e-6);
    rt_tensor_release(x);
    rt_tensor_release(y);
    rt_loader_destroy(l);

    /* defaults: plain ToTensor (v / 255) */
    o = rt_loader_options_default();
    CHECK_OK(rt_loader_create(ds, &o, &l));
    CHECK_OK(rt_loader_next(l, &x, &y, &end));
    p = rt_tensor_f32(x);
    for (int v = 0; v < 256; v++) CHECK(p[v] == (float)v / 255.0f);
    rt_tensor_release(x);
    rt_tensor_release(y);
    rt_loader_destroy(l);

    /* bad options */
    o.std[1] = 0.0f;
    CHECK(rt_loader_create(ds, &o, &l) == RT_ERR_INVALID_ARG);
    CHECK(l == NULL);
    CHECK(strstr(rt_error_last(), "std[1]") != NULL);
    o.std[1] = 1.0f;
    o.mean[0] = NAN;
    CHECK(rt_loader_create(ds, &o, &l) == RT_ERR_INVALID_ARG);
    o.mean[0] = 0.0f;
    o.batch_size = 0;
    CHECK(rt_loader_create(ds, &o, &l) == RT_ERR_INVALID_ARG);
    o.batch_size = 1;
    o.crop_padding = -1;
    CHECK(rt_loader_create(ds, &o, &l) == RT_ERR_INVALID_ARG);
    CHECK(rt_loader_create(NULL, &o, &l) == RT_ERR_INVALID_ARG);
    rt_dataset_destroy(ds);
}

/* Reference: the augmented, normalised image built directly from the
 * definition (torchvision: pad with 0, crop at (top, left), then flip). */
static void reference_augment(const uint8_t *raw, int H, int W, int P, rt_augment a, float mean,
                              float std, float *out) {
    int PH = H + 2 * P, PW = W + 2 * P;
    uint8_t *padded = calloc((size_t)(PH * PW), 1);
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++) padded[(y + P) * PW + (x + P)] = raw[y * W + x];
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++) {
            int xs = a.flip ? W - 1 - x : x;
            out[y * W + x] = norm_ref(padded[(y + a.top) * PW + (xs + a.left)], mean, std);
        }
    free(padded);
}

static void test_loader_random_crop(void) {
    enum { H = 28, W = 28, P = 4 };
    uint8_t raw[H * W];
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++) raw[y * W + x] = (uint8_t)(1 + (y * 9 + x * 5) % 250); /* != 0 */
    const int32_t lab[1] = {0};
    rt_dataset *ds = NULL;
    CHECK_OK(rt_dataset_from_arrays(1, 1, H, W, 1, raw, lab, &ds));
    rt_loader_options o = rt_loader_options_default();
    o.batch_size = 1;
    o.mean[0] = RT_FASHION_MNIST_MEAN;
    o.std[0] = RT_FASHION_MNIST_STD;
    o.crop_padding = P;
    o.seed = 7;
    rt_loader *l = NULL;
    CHECK_OK(rt_loader_create(ds, &o, &l));
    const float padval = (0.0f - RT_FASHION_MNIST_MEAN) / RT_FASHION_MNIST_STD;
    int seen_top[2 * P + 1] = {0}, seen_left[2 * P + 1] = {0};
    float ref[H * W];
    for (int e = 0; e < 300; e++) {
        rt_augment a;
        CHECK_OK(rt_loader_augment_params(l, e, 0, &a));
        CHECK(a.top >= 0 && a.top <= 2 * P && a.left >= 0 && a.left <= 2 * P && !a.flip);
        seen_top[a.top]++;
        seen_left[a.left]++;
        CHECK_OK(rt_loader_reset(l, e));
        rt_tensor *x, *y;
        bool end;
        CHECK_OK(rt_loader_next(l, &x, &y, &end));
        const float *p = rt_tensor_f32(x);
        reference_augment(raw, H, W, P, a, RT_FASHION_MNIST_MEAN, RT_FASHION_MNIST_STD, ref);
        int diff = memcmp(p, ref, sizeof ref);
        /* explicit shift check: content moves by (P - top, P - left) */
        int dy = a.top - P, dx = a.left - P, bad = 0;
        for (int yy = 0; yy < H; yy++)
            for (int xx = 0; xx < W; xx++) {
                int sy = yy + dy, sx = xx + dx;
                float want = (sy < 0 || sy >= H || sx < 0 || sx >= W)
                                 ? padval
                                 : norm_ref(raw[sy * W + sx], RT_FASHION_MNIST_MEAN,
                                            RT_FASHION_MNIST_STD);
                if (p[yy * W + xx] != want) bad++;
            }
        if (a.top == 0 && a.left == 2 * P) {
            /* shifted down by P and left by P: top P rows and right P columns are padding */
            for (int xx = 0; xx < W; xx++) CHECK(p[0 * W + xx] == padval && p[(P - 1) * W + xx] == padval);
            for (int yy = 0; yy < H; yy++) CHECK(p[yy * W + W - 1] == padval);
            CHECK(p[P * W + 0] == norm_ref(raw[0 * W + P], RT_FASHION_MNIST_MEAN, RT_FASHION_MNIST_STD));
        }
        rt_tensor_release(x);
        rt_tensor_release(y);
        CHECK_EQ_INT(diff, 0);
        CHECK_EQ_INT(bad, 0);
    }
    for (int i = 0; i <= 2 * P; i++) CHECK(seen_top[i] > 10 && seen_left[i] > 10); /* ~33 each */
    rt_loader_destroy(l);

    /* crop + flip together: torchvision crops first, then mirrors the crop */
    o.hflip = true;
    CHECK_OK(rt_loader_create(ds, &o, &l));
    int flipped_shifted = 0;
    for (int e = 0; e < 100; e++) {
        rt_augment a;
        CHECK_OK(rt_loader_augment_params(l, e, 0, &a));
        flipped_shifted += a.flip && a.left != P;
        CHECK_OK(rt_loader_reset(l, e));
        rt_tensor *x, *y;
        bool end;
        CHECK_OK(rt_loader_next(l, &x, &y, &end));
        reference_augment(raw, H, W, P, a, RT_FASHION_MNIST_MEAN, RT_FASHION_MNIST_STD, ref);
        int diff = memcmp(rt_tensor_f32(x), ref, sizeof ref);
        rt_tensor_release(x);
        rt_tensor_release(y);
        CHECK_EQ_INT(diff, 0);
    }
    CHECK(flipped_shifted > 10);
    rt_loader_destroy(l);
    o.hflip = false;

    /* padding 0: no crop, output = normalised input */
    o.crop_padding = 0;
    CHECK_OK(rt_loader_create(ds, &o, &l));
    rt_tensor *x, *y;
    bool end;
    CHECK_OK(rt_loader_next(l, &x, &y, &end));
    for (int k = 0; k < H * W; k++)
        CHECK(rt_tensor_f32(x)[k] == norm_ref(raw[k], RT_FASHION_MNIST_MEAN, RT_FASHION_MNIST_STD));
    rt_tensor_release(x);
    rt_tensor_release(y);
    rt_loader_destroy(l);
    rt_dataset_destroy(ds);
}

static void test_loader_random_crop_known_shift(void) {
    /* A deterministic check of one shift: find an epoch whose draw is
     * (top, left) = (0, 2P) and check the image moved down-left by P. */
    enum { H = 8, W = 8, P = 2 };
    uint8_t raw[H * W];
    for (int k = 0; k < H * W; k++) raw[k] = (uint8_t)(10 + k);
    const int32_t lab[1] = {0};
    rt_dataset *ds = NULL;
    CHECK_OK(rt_dataset_from_arrays(1, 1, H, W, 1, raw, lab, &ds));
    rt_loader_options o = rt_loader_options_default();
    o.batch_size = 1;
    o.mean[0] = 0.5f;
    o.std[0] = 0.5f;
    o.crop_padding = P;
    rt_loader *l = NULL;
    CHECK_OK(rt_loader_create(ds, &o, &l));
    int epoch = -1;
    for (int e = 0; e < 10000 && epoch < 0; e++) {
        rt_augment a;
        CHECK_OK(rt_loader_augment_params(l, e, 0, &a));
        if (a.top == 0 && a.left == 2 * P) epoch = e;
    }
    CHECK(epoch >= 0);
    CHECK_OK(rt_loader_reset(l, epoch));
    rt_tensor *x, *y;
    bool end;
    CHECK_OK(rt_loader_next(l, &x, &y, &end));
    const float *p = rt_tensor_f32(x);
    /* out(y, x) = raw(y - P, x + P) */
    for (int yy = 0; yy < H; yy++)
        for (int xx = 0; xx < W; xx++) {
            float want = (yy < P || xx + P >= W) ? -1.0f /* (0 - 0.5) / 0.5 */
                                                 : norm_ref(raw[(yy - P) * W + xx + P], 0.5f, 0.5f);
            if (p[yy * W + xx] != want) {
                fprintf(stderr, "at (%d,%d): got %g want %g\n", yy, xx, p[yy * W + xx], want);
                CHECK(0);
            }
        }
    rt_tensor_release(x);
    rt_tensor_release(y);
    rt_loader_destroy(l);
    rt_dataset_destroy(ds);
}

static void test_loader_hflip(void) {
    enum { H = 5, W = 7, N = 400 };
    rt_dataset *ds = make_ds(N, 1, H, W);
    CHECK(ds != NULL);
    rt_loader_options o = rt_loader_options_default();
    o.batch_size = N;
    o.hflip = true;
    o.seed = 99;
    rt_loader *l = NULL;
    CHECK_OK(rt_loader_create(ds, &o, &l));
    rt_tensor *x, *y;
    bool end;
    CHECK_OK(rt_loader_next(l, &x, &y, &end));
    int flips = 0;
    for (int i = 0; i < N; i++) {
        rt_augment a;
        CHECK_OK(rt_loader_augment_params(l, 0, i, &a));
        CHECK(a.top == 0 && a.left == 0); /* no crop */
        flips += a.flip;
        const uint8_t *raw = rt_dataset_image(ds, i);
        const float *p = rt_tensor_f32(x) + (int64_t)i * H * W;
        for (int yy = 0; yy < H; yy++)
            for (int xx = 0; xx < W; xx++) {
                int sx = a.flip ? W - 1 - xx : xx;
                CHECK(p[yy * W + xx] == (float)raw[yy * W + sx] / 255.0f);
            }
    }
    CHECK(flips > 150 && flips < 250); /* p = 0.5: 200 +- 10 sigma */
    rt_tensor_release(x);
    rt_tensor_release(y);
    /* another epoch flips other samples */
    int same = 0;
    for (int i = 0; i < N; i++) {
        rt_augment a0, a1;
        CHECK_OK(rt_loader_augment_params(l, 0, i, &a0));
        CHECK_OK(rt_loader_augment_params(l, 1, i, &a1));
        same += a0.flip == a1.flip;
    }
    CHECK(same > 150 && same < 250);
    CHECK(rt_loader_augment_params(l, 0, N, &(rt_augment){0}) == RT_ERR_INVALID_ARG);
    rt_loader_destroy(l);
    rt_dataset_destroy(ds);
}

/* Concatenates every image of one epoch into buf (n * isz floats). */
static int epoch_images(rt_loader *l, int64_t epoch, float *buf) {
    if (rt_loader_reset(l, epoch) != RT_OK) return -1;
    int64_t off = 0;
    for (;;) {
        rt_tensor *x, *y;
        bool end;
        if (rt_loader_next(l, &x, &y, &end) != RT_OK) return -1;
        if (end) return 0;
        int64_t cnt = rt_tensor_numel(x);
        memcpy(buf + off, rt_tensor_f32(x), (size_t)cnt * sizeof(float));
        off += cnt;
        rt_tensor_release(x);
        rt_tensor_release(y);
    }
}

static void test_loader_augment_independent_of_batch_and_threads(void) {
    enum { N = 64, C = 2, H = 28, W = 28 };
    const size_t total = (size_t)N * C * H * W;
    rt_dataset *ds = make_ds(N, C, H, W);
    CHECK(ds != NULL);
    rt_loader_options o = rt_loader_options_default();
    o.shuffle = true;
    o.seed = 42;
    o.crop_padding = 3;
    o.hflip = true;
    o.mean[0] = 0.3f;
    o.std[0] = 0.2f;
    o.mean[1] = 0.6f;
    o.std[1] = 0.7f;
    float *ref = malloc(total * sizeof(float)), *got = malloc(total * sizeof(float));
    const int64_t bs[] = {64, 1, 5, 17};
    int fail = 0;
    for (size_t t = 0; t < sizeof bs / sizeof bs[0]; t++) {
        o.batch_size = bs[t];
        rt_loader *l = NULL;
        if (rt_loader_create(ds, &o, &l) != RT_OK) fail |= 1;
        if (epoch_images(l, 3, t == 0 ? ref : got) != 0) fail |= 2;
        if (t > 0 && memcmp(ref, got, total * sizeof(float)) != 0) fail |= 4;
        rt_loader_destroy(l);
    }
#ifdef _OPENMP
    /* one batch of 64 x 2 x 28 x 28 runs in parallel; 1 thread must give the same bits */
    int prev = omp_get_max_threads();
    omp_set_num_threads(1);
    o.batch_size = 64;
    rt_loader *l = NULL;
    if (rt_loader_create(ds, &o, &l) != RT_OK) fail |= 8;
    if (epoch_images(l, 3, got) != 0) fail |= 16;
    if (memcmp(ref, got, total * sizeof(float)) != 0) fail |= 32;
    omp_set_num_threads(4);
    if (epoch_images(l, 3, got) != 0) fail |= 16;
    if (memcmp(ref, got, total * sizeof(float)) != 0) fail |= 64;
    omp_set_num_threads(prev);
    rt_loader_destroy(l);
#endif
    free(ref);
    free(got);
    rt_dataset_destroy(ds);
    CHECK_EQ_INT(fail, 0);
}

static void test_loader_seek_resume(void) {
    enum { N = 23, H = 6, W = 6, B = 4 }; /* 6 batches: 4,4,4,4,4,3 */
    int64_t before = data_live();
    rt_dataset *ds = make_ds(N, 1, H, W);
    CHECK(ds != NULL);
    rt_loader_options o = rt_loader_options_default();
    o.batch_size = B;
    o.shuffle = true;
    o.seed = 2024;
    o.crop_padding = 2;
    o.hflip = true;
    rt_loader *l = NULL;
    CHECK_OK(rt_loader_create(ds, &o, &l));
    CHECK_EQ_INT(rt_loader_batches_per_epoch(l), 6);
    /* record epochs 0..2, uninterrupted */
    static float rec[3][6][B * H * W];
    static int32_t rlab[3][6][B];
    int64_t rsz[3][6];
    for (int e = 0; e < 3; e++) {
        CHECK_OK(rt_loader_reset(l, e));
        for (int b = 0; b < 6; b++) {
            rt_tensor *x, *y;
            bool end;
            CHECK_OK(rt_loader_next(l, &x, &y, &end));
            CHECK(!end);
            rsz[e][b] = y->shape[0];
            memcpy(rec[e][b], rt_tensor_f32(x), rt_tensor_nbytes(x));
            memcpy(rlab[e][b], rt_tensor_data(y), rt_tensor_nbytes(y));
            rt_tensor_release(x);
            rt_tensor_release(y);
        }
    }
    rt_loader_destroy(l);

    /* a fresh loader resumes at epoch 1, batch 3, and runs into epoch 2 */
    CHECK_OK(rt_loader_create(ds, &o, &l));
    CHECK_OK(rt_loader_seek(l, 1, 3));
    CHECK_EQ_INT(rt_loader_epoch(l), 1);
    CHECK_EQ_INT(rt_loader_batch_index(l), 3);
    for (int e = 1; e < 3; e++) {
        for (int b = (e == 1 ? 3 : 0); b < 6; b++) {
            rt_tensor *x, *y;
            bool end;
            CHECK_OK(rt_loader_next(l, &x, &y, &end));
            CHECK(!end);
            CHECK_EQ_INT(y->shape[0], rsz[e][b]);
            CHECK(memcmp(rec[e][b], rt_tensor_f32(x), rt_tensor_nbytes(x)) == 0);
            CHECK(memcmp(rlab[e][b], rt_tensor_data(y), rt_tensor_nbytes(y)) == 0);
            rt_tensor_release(x);
            rt_tensor_release(y);
        }
        rt_tensor *x, *y;
        bool end;
        CHECK_OK(rt_loader_next(l, &x, &y, &end));
        CHECK(end);
        if (e == 1) CHECK_OK(rt_loader_reset(l, 2));
    }
    /* seeking within the current epoch, and to its end */
    CHECK_OK(rt_loader_seek(l, 2, 5));
    rt_tensor *x, *y;
    bool end;
    CHECK_OK(rt_loader_next(l, &x, &y, &end));
    CHECK_EQ_INT(y->shape[0], 3);
    CHECK(memcmp(rec[2][5], rt_tensor_f32(x), rt_tensor_nbytes(x)) == 0);
    rt_tensor_release(x);
    rt_tensor_release(y);
    CHECK_OK(rt_loader_seek(l, 0, 6));
    CHECK_OK(rt_loader_next(l, &x, &y, &end));
    CHECK(end);
    /* range errors leave the position alone */
    CHECK(rt_loader_seek(l, 0, 7) == RT_ERR_INVALID_ARG);
    CHECK(rt_loader_seek(l, -1, 0) == RT_ERR_INVALID_ARG);
    CHECK(rt_loader_seek(l, (int64_t)RT_LOADER_MAX_EPOCH + 1, 0) == RT_ERR_INVALID_ARG);
    CHECK(rt_loader_reset(NULL, 0) == RT_ERR_INVALID_ARG);
    CHECK_EQ_INT(rt_loader_epoch(l), 0);
    CHECK_EQ_INT(rt_loader_batch_index(l), 6);
    CHECK(rt_loader_next(l, NULL, &y, &end) == RT_ERR_INVALID_ARG);
    rt_loader_destroy(l);
    rt_loader_destroy(NULL);
    rt_dataset_destroy(ds);
    CHECK_EQ_INT(data_live(), before);
}

static void test_loader_memory(void) {
    int64_t before = data_live();
    rt_dataset *ds = make_ds(50, 1, 28, 28);
    CHECK(ds != NULL);
    int64_t ds_bytes = 50 * 784 + 50 * 4;
    CHECK_EQ_INT(data_live() - before, ds_bytes);
    rt_loader_options o = rt_loader_options_default();
    o.batch_size = 16;
    o.shuffle = true;
    o.crop_padding = 4;
    o.hflip = true;
    rt_loader *l = NULL;
    CHECK_OK(rt_loader_create(ds, &o, &l));
    CHECK_EQ_INT(data_live() - before, ds_bytes + 50 * 8); /* the order */
    rt_tensor *x, *y;
    bool end;
    CHECK_OK(rt_loader_next(l, &x, &y, &end));
    CHECK_EQ_INT(data_live() - before, ds_bytes + 50 * 8 + 16 * 784 * 4 + 16 * 4);
    rt_loader_destroy(l); /* batches outlive the loader */
    CHECK(rt_tensor_f32(x)[0] == rt_tensor_f32(x)[0]);
    rt_tensor_release(x);
    rt_tensor_release(y);
    rt_dataset_destroy(ds);
    CHECK_EQ_INT(data_live(), before);

    /* over the budget: a clean OOM, nothing leaks */
    ds = make_ds(50, 1, 28, 28);
    CHECK_OK(rt_loader_create(ds, &o, &l));
    rt_memstats m;
    rt_memstats_get(&m);
    int64_t old_limit = rt_mem_get_limit();
    rt_mem_set_limit(m.live_total + 1000);
    x = y = NULL;
    rt_status st = rt_loader_next(l, &x, &y, &end);
    rt_mem_set_limit(old_limit);
    CHECK(st == RT_ERR_OOM);
    CHECK(x == NULL && y == NULL);
    CHECK_EQ_INT(rt_loader_batch_index(l), 0);
    rt_loader_destroy(l);
    rt_dataset_destroy(ds);
    CHECK_EQ_INT(data_live(), before);
}

/* ---- MNIST files ------------------------------------------------------------------ */

static char g_dir[64];

static void rm_tmp(void) {
    if (!g_dir[0]) return;
    const char *names[] = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte.gz",
                           "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte",
                           "t10k-labels-idx1-ubyte.gz"};
    char p[256];
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        snprintf(p, sizeof p, "%s/%s", g_dir, names[i]);
        unlink(p);
    }
    rmdir(g_dir);
}

static int write_file(const char *name, const uint8_t *bytes, size_t n, bool gz) {
    char p[256];
    snprintf(p, sizeof p, "%s/%s", g_dir, name);
    if (gz) {
        gzFile f = gzopen(p, "wb");
        if (!f) return -1;
        int ok = gzwrite(f, bytes, (unsigned)n) == (int)n;
        return (gzclose(f) == Z_OK && ok) ? 0 : -1;
    }
    FILE *f = fopen(p, "wb");
    if (!f) return -1;
    int ok = fwrite(bytes, 1, n, f) == n;
    return (fclose(f) == 0 && ok) ? 0 : -1;
}

/* 3 images of 4 x 5 and their labels, as IDX bytes. */
static size_t idx_images(uint8_t *buf) {
    const uint8_t hdr[16] = {0, 0, 0x08, 3, 0, 0, 0, 3, 0, 0, 0, 4, 0, 0, 0, 5};
    memcpy(buf, hdr, 16);
    for (int k = 0; k < 60; k++) buf[16 + k] = (uint8_t)(k * 4);
    return 76;
}
static size_t idx_labels(uint8_t *buf, uint8_t last) {
    const uint8_t b[11] = {0, 0, 0x08, 1, 0, 0, 0, 3, 9, 0, last};
    memcpy(buf, b, 11);
    return 11;
}

static void test_mnist_files(void) {
    int64_t before = data_live();
    strcpy(g_dir, "/tmp/rt_test_data_XXXXXX");
    CHECK(mkdtemp(g_dir) != NULL);
    atexit(rm_tmp);
    uint8_t img[128], lab[16];
    size_t ni = idx_images(img), nl = idx_labels(lab, 5);
    /* train: plain images + gz labels; test: gz images + plain labels */
    CHECK(write_file("train-images-idx3-ubyte", img, ni, false) == 0);
    CHECK(write_file("train-labels-idx1-ubyte.gz", lab, nl, true) == 0);
    CHECK(write_file("t10k-images-idx3-ubyte.gz", img, ni, true) == 0);
    nl = idx_labels(lab, 10); /* out of range for 10 classes */
    CHECK(write_file("t10k-labels-idx1-ubyte", lab, nl, false) == 0);

    rt_dataset *ds = NULL;
    CHECK_OK(rt_mnist_load(g_dir, true, &ds));
    CHECK_EQ_INT(ds->n, 3);
    CHECK_EQ_INT(ds->channels, 1);
    CHECK_EQ_INT(ds->height, 4);
    CHECK_EQ_INT(ds->width, 5);
    CHECK_EQ_INT(ds->num_classes, 10);
    CHECK(ds->images->ndim == 4 && ds->images->shape[1] == 1);
    CHECK_EQ_INT(rt_dataset_label(ds, 0), 9);
    CHECK_EQ_INT(rt_dataset_label(ds, 2), 5);
    CHECK_EQ_INT(rt_dataset_image(ds, 2)[19], 59 * 4);
    rt_dataset_destroy(ds);

    /* a bad label names the file */
    CHECK(rt_mnist_load(g_dir, false, &ds) == RT_ERR_FORMAT);
    CHECK(ds == NULL);
    CHECK(strstr(rt_error_last(), "t10k-labels-idx1-ubyte") != NULL);
    /* the .gz name wins over the plain one */
    nl = idx_labels(lab, 1);
    CHECK(write_file("t10k-labels-idx1-ubyte.gz", lab, nl, true) == 0);
    CHECK_OK(rt_mnist_load(g_dir, false, &ds));
    CHECK_EQ_INT(rt_dataset_label(ds, 2), 1);
    rt_dataset_destroy(ds);

    CHECK_EQ_INT(data_live(), before);
}

static void test_mnist_missing_dir(void) {
    rt_dataset *ds = (rt_dataset *)1;
    rt_status st = rt_mnist_load("/nonexistent/rt-data-dir", true, &ds);
    CHECK(st == RT_ERR_IO);
    CHECK(ds == NULL);
    const char *msg = rt_error_last();
    CHECK(strstr(msg, "--data") != NULL);
    CHECK(strstr(msg, "apt-get install dataset-fashion-mnist") != NULL);
    CHECK(strstr(msg, "/nonexistent/rt-data-dir/train-images-idx3-ubyte.gz") != NULL);
    CHECK(strstr(msg, "/nonexistent/rt-data-dir/train-images-idx3-ubyte ") != NULL ||
          strstr(msg, "/nonexistent/rt-data-dir/train-images-idx3-ubyte.") != NULL);
    CHECK(rt_mnist_load("/nonexistent/rt-data-dir", false, &ds) == RT_ERR_IO);
    CHECK(strstr(rt_error_last(), "t10k-images-idx3-ubyte.gz") != NULL);
    CHECK(rt_mnist_load(NULL, true, &ds) == RT_ERR_INVALID_ARG);
    CHECK(rt_mnist_load(".", true, NULL) == RT_ERR_INVALID_ARG);
    CHECK(strcmp(rt_mnist_default_dir(), "/usr/share/datasets/fashion-mnist") == 0);
}

static void test_fashion_mnist_real(void) {
    int64_t before = data_live();
    rt_dataset *train = NULL, *test = NULL;
    CHECK_OK(rt_mnist_load(fashion_dir(), true, &train));
    CHECK_OK(rt_mnist_load(fashion_dir(), false, &test));
    CHECK_EQ_INT(train->n, 60000);
    CHECK_EQ_INT(test->n, 10000);
    CHECK(train->channels == 1 && train->height == 28 && train->width == 28);
    CHECK(test->channels == 1 && test->height == 28 && test->width == 28);
    CHECK_EQ_INT(train->num_classes, 10);
    /* balanced classes: 6000 / 1000 each */
    int64_t ctr[10] = {0}, cte[10] = {0};
    for (int64_t i = 0; i < train->n; i++) ctr[rt_dataset_label(train, i)]++;
    for (int64_t i = 0; i < test->n; i++) cte[rt_dataset_label(test, i)]++;
    for (int c = 0; c < 10; c++) {
        CHECK_EQ_INT(ctr[c], 6000);
        CHECK_EQ_INT(cte[c], 1000);
    }
    double mean, stdv;
    CHECK_OK(rt_dataset_channel_stats(train, &mean, &stdv));
    printf("fashion-mnist train: mean %.6f std %.6f\n", mean, stdv);
    CHECK_NEAR(mean, RT_FASHION_MNIST_MEAN, 0.001);
    CHECK_NEAR(stdv, RT_FASHION_MNIST_STD, 0.001);

    /* a subset through a loader with the standard options */
    rt_dataset *sub = NULL;
    CHECK_OK(rt_dataset_subset(train, 100, 256, &sub));
    CHECK_EQ_INT(rt_dataset_label(sub, 0), rt_dataset_label(train, 100));
    rt_loader_options o = rt_loader_options_default();
    o.batch_size = 100;
    o.shuffle = true;
    o.mean[0] = RT_FASHION_MNIST_MEAN;
    o.std[0] = RT_FASHION_MNIST_STD;
    o.crop_padding = 4;
    o.hflip = true;
    rt_loader *l = NULL;
    CHECK_OK(rt_loader_create(sub, &o, &l));
    int64_t sizes[4];
    static int32_t seen[256];
    CHECK_EQ_INT(run_epoch(l, sizes, 4, seen), 3);
    CHECK(sizes[0] == 100 && sizes[1] == 100 && sizes[2] == 56);
    rt_loader_destroy(l);

    /* the full training set: normalised values have mean ~0, std ~1 */
    o.crop_padding = 0;
    o.hflip = false;
    o.batch_size = 6000;
    CHECK_OK(rt_loader_create(train, &o, &l));
    double s1 = 0, s2 = 0;
    int64_t cnt = 0;
    for (;;) {
        rt_tensor *x, *y;
        bool end;
        CHECK_OK(rt_loader_next(l, &x, &y, &end));
        if (end) break;
        const float *p = rt_tensor_f32(x);
        int64_t nx = rt_tensor_numel(x);
        for (int64_t k = 0; k < nx; k++) {
            s1 += p[k];
            s2 += (double)p[k] * p[k];
        }
        cnt += nx;
        rt_tensor_release(x);
        rt_tensor_release(y);
    }
    CHECK_EQ_INT(cnt, 60000LL * 784);
    double m = s1 / (double)cnt, sd = sqrt(s2 / (double)cnt - m * m);
    CHECK_NEAR(m, 0.0, 0.003);
    CHECK_NEAR(sd, 1.0, 0.003);
    rt_loader_destroy(l);

    rt_dataset_destroy(sub);
    rt_dataset_destroy(train);
    rt_dataset_destroy(test);
    CHECK_EQ_INT(data_live(), before);
}

int main(int argc, char **argv) {
    static const rt_test_case cases[] = {
        {"dataset_from_arrays", test_dataset_from_arrays},
        {"dataset_subset", test_dataset_subset},
        {"dataset_channel_stats", test_dataset_channel_stats},
        {"loader_batch_sizes", test_loader_batch_sizes},
        {"loader_shuffle", test_loader_shuffle},
        {"loader_normalize_exact", test_loader_normalize_exact},
        {"loader_random_crop", test_loader_random_crop},
        {"loader_random_crop_known_shift", test_loader_random_crop_known_shift},
        {"loader_hflip", test_loader_hflip},
        {"loader_augment_independent_of_batch_and_threads",
         test_loader_augment_independent_of_batch_and_threads},
        {"loader_seek_resume", test_loader_seek_resume},
        {"loader_memory", test_loader_memory},
        {"mnist_files", test_mnist_files},
        {"mnist_missing_dir", test_mnist_missing_dir}};
    /* need the real Fashion-MNIST files */
    static const rt_test_case fashion[] = {{"fashion_mnist_real", test_fashion_mnist_real}};
    const int nc = (int)(sizeof cases / sizeof cases[0]), nf = (int)(sizeof fashion / sizeof fashion[0]);
    if (argc > 1 && strcmp(argv[1], "--list") == 0) {
        for (int i = 0; i < nc; i++) printf("%s\n", cases[i].name);
        for (int i = 0; i < nf; i++) printf("%s\n", fashion[i].name);
        return 0;
    }
    int all = argc > 1 && strcmp(argv[1], "--fashion") == 0, one = 0;
    for (int i = 0; i < nf && argc > 1; i++) one |= strcmp(argv[1], fashion[i].name) == 0;
    if (!all && !one) return rt_test_main(argc, argv, cases, nc);
    if (!fashion_present()) {
        printf("skip: the Fashion-MNIST files are not in %s (apt-get install dataset-fashion-mnist, "
               "or set RT_FASHION_MNIST_DIR)\n", fashion_dir());
        return 77;
    }
    return rt_test_main(all ? 1 : argc, argv, fashion, nf);
}
