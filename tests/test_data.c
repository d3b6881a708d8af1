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
#include "fashion_data.h"
#include "rt_test.h"

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

/* Raw input i and label i of a dataset with arrays (both shipped
 * implementations have them), read straight from the arrays. */
static const uint8_t *ds_image(const rt_dataset *ds, int64_t i) {
    rt_dataset_arrays a;
    if (!rt_dataset_arrays_get(ds, &a)) abort();
    return (const uint8_t *)a.inputs + (size_t)i * rt_sample_nbytes(&ds->shape);
}
static int32_t ds_label(const rt_dataset *ds, int64_t i) {
    rt_dataset_arrays a;
    if (!rt_dataset_arrays_get(ds, &a)) abort();
    return a.labels[i];
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
    rt_sample_shape sh = rt_dataset_sample_shape(ds);
    CHECK(sh.dtype == RT_U8 && sh.ndim == 3 && sh.dims[0] == 2 && sh.dims[1] == 3 && sh.dims[2] == 2 &&
          sh.dims[3] == 0);
    CHECK_EQ_INT(rt_dataset_size(ds), 2);
    CHECK(strcmp(ds->ops->name, "memory") == 0);
    CHECK_EQ_INT((int64_t)rt_sample_nbytes(&ds->shape), 12);
    CHECK_EQ_INT(ds_image(ds, 1)[0], 12);
    CHECK_EQ_INT(ds_image(ds, 1)[11], 23);
    CHECK_EQ_INT(ds_label(ds, 0), 4);
    CHECK_EQ_INT(ds_label(ds, 1), 0);
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
        CHECK_EQ_INT(ds_label(sub, i), 3 + i);
        CHECK(memcmp(ds_image(sub, i), ds_image(ds, 3 + i), 12) == 0);
    }
    rt_dataset_destroy(ds); /* the subset is independent */
    CHECK_EQ_INT(ds_label(sub, 3), 6);
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
        const uint8_t *raw = ds_image(ds, i);
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

/* ---- the dataset interface: an implementation without arrays ----------------------- */

/* A dataset of 3-D volumes (1, 4, 4, 4) f32 computed from the index, held
 * nowhere: value k of sample i is i + k / 64, its label i % 3. It counts its
 * reads; read fails with RT_ERR_IO at index fail_at, and returns label 7 (out
 * of range) at bad_label_at. destroy bumps *destroyed. */
typedef struct vol_state {
    int64_t fail_at, bad_label_at, reads;
    int *destroyed;
} vol_state;

static float vol_value(int64_t i, int64_t k) { return (float)i + (float)k / 64.0f; }

static rt_status vol_read(const rt_dataset *ds, int64_t i, void *input, int32_t *label) {
    vol_state *v = ds->impl;
    v->reads++;
    if (i == v->fail_at) return rt_error_set(RT_ERR_IO, "volume %lld is unreadable", (long long)i);
    float *x = input;
    for (int64_t k = 0; k < 64; k++) x[k] = vol_value(i, k);
    *label = i == v->bad_label_at ? 7 : (int32_t)(i % 3);
    return RT_OK;
}

static void vol_destroy(rt_dataset *ds) {
    vol_state *v = ds->impl;
    if (v->destroyed) (*v->destroyed)++;
    free(v);
}

static const rt_dataset_ops vol_ops = {.name = "volumes", .read = vol_read, .destroy = vol_destroy};
static const rt_sample_shape vol_shape = {4, {1, 4, 4, 4}, RT_F32};

static rt_dataset *make_volumes(int64_t n, int *destroyed) {
    vol_state *v = calloc(1, sizeof *v);
    if (!v) return NULL;
    v->fail_at = v->bad_label_at = -1;
    v->destroyed = destroyed;
    rt_dataset *ds = NULL;
    if (rt_dataset_create(&vol_ops, v, n, &vol_shape, 3, &ds) != RT_OK) {
        fprintf(stderr, "make_volumes: %s\n", rt_error_last());
        free(v);
    }
    return ds;
}

static void test_dataset_interface(void) {
    int64_t before = data_live();
    int destroyed = 0;
    rt_dataset *ds = make_volumes(10, &destroyed);
    CHECK(ds != NULL);
    CHECK_EQ_INT(rt_dataset_size(ds), 10);
    rt_sample_shape sh = rt_dataset_sample_shape(ds);
    CHECK(sh.ndim == 4 && sh.dims[0] == 1 && sh.dims[1] == 4 && sh.dims[2] == 4 && sh.dims[3] == 4);
    CHECK(sh.dtype == RT_F32);
    CHECK_EQ_INT(rt_sample_numel(&sh), 64);
    CHECK_EQ_INT(rt_sample_nbytes(&sh), 256);
    CHECK(ds->channels == 1 && ds->height == 4 && ds->width == 4 && ds->num_classes == 3);
    rt_dataset_arrays a;
    CHECK(!rt_dataset_arrays_get(ds, &a));
    CHECK_EQ_INT(data_live(), before); /* nothing held */

    float x[64];
    int32_t label = -1;
    CHECK_OK(rt_dataset_read(ds, 7, x, &label));
    CHECK_EQ_INT(label, 1);
    for (int k = 0; k < 64; k++) CHECK(x[k] == vol_value(7, k));
    rt_tensor *t = NULL;
    CHECK_OK(rt_dataset_get(ds, 9, &t, &label));
    CHECK(t->dtype == RT_F32 && t->ndim == 4 && t->shape[0] == 1 && t->shape[1] == 4 && t->shape[2] == 4 &&
          t->shape[3] == 4);
    CHECK(t->storage->category == RT_MEM_DATA);
    CHECK_EQ_INT(data_live() - before, 256);
    CHECK_EQ_INT(label, 0);
    CHECK(rt_tensor_f32(t)[63] == vol_value(9, 63));
    rt_tensor_release(t);
    /* errors */
    CHECK(rt_dataset_read(ds, 10, x, &label) == RT_ERR_INVALID_ARG);
    CHECK(strstr(rt_error_last(), "[0, 10)") != NULL);
    CHECK(rt_dataset_read(ds, -1, x, &label) == RT_ERR_INVALID_ARG);
    CHECK(rt_dataset_read(ds, 0, NULL, &label) == RT_ERR_INVALID_ARG);
    CHECK(rt_dataset_read(NULL, 0, x, &label) == RT_ERR_INVALID_ARG);
    t = (rt_tensor *)1;
    CHECK(rt_dataset_get(ds, 10, &t, &label) == RT_ERR_INVALID_ARG);
    CHECK(t == NULL);
    vol_state *v = ds->impl;
    v->fail_at = 2;
    v->bad_label_at = 4;
    CHECK(rt_dataset_read(ds, 2, x, &label) == RT_ERR_IO);
    CHECK(strstr(rt_error_last(), "volume 2 is unreadable") != NULL);
    CHECK(rt_dataset_get(ds, 2, &t, &label) == RT_ERR_IO);
    CHECK(t == NULL);
    CHECK(rt_dataset_read(ds, 4, x, &label) == RT_ERR_FORMAT);
    CHECK(strstr(rt_error_last(), "volumes") != NULL && strstr(rt_error_last(), "label 7") != NULL);
    CHECK_EQ_INT(data_live(), before);
    rt_dataset_destroy(ds);
    CHECK_EQ_INT(destroyed, 1);
    rt_dataset_destroy(NULL);

    /* rt_dataset_create refuses bad descriptions and leaves impl alone */
    vol_state mine = {-1, -1, 0, &destroyed};
    rt_sample_shape bad = vol_shape;
    ds = (rt_dataset *)1;
    CHECK(rt_dataset_create(NULL, &mine, 1, &vol_shape, 3, &ds) == RT_ERR_INVALID_ARG);
    CHECK(ds == NULL);
    const rt_dataset_ops no_read = {.name = "x"};
    CHECK(rt_dataset_create(&no_read, &mine, 1, &vol_shape, 3, &ds) == RT_ERR_INVALID_ARG);
    CHECK(rt_dataset_create(&vol_ops, &mine, -1, &vol_shape, 3, &ds) == RT_ERR_INVALID_ARG);
    CHECK(rt_dataset_create(&vol_ops, &mine, 1, NULL, 3, &ds) == RT_ERR_INVALID_ARG);
    CHECK(rt_dataset_create(&vol_ops, &mine, 1, &vol_shape, 0, &ds) == RT_ERR_INVALID_ARG);
    CHECK(rt_dataset_create(&vol_ops, &mine, 1, &vol_shape, 3, NULL) == RT_ERR_INVALID_ARG);
    bad.ndim = 0;
    CHECK(rt_dataset_create(&vol_ops, &mine, 1, &bad, 3, &ds) == RT_ERR_INVALID_ARG);
    bad.ndim = RT_DATA_MAX_SAMPLE_DIMS + 1;
    CHECK(rt_dataset_create(&vol_ops, &mine, 1, &bad, 3, &ds) == RT_ERR_INVALID_ARG);
    bad = vol_shape;
    bad.dims[2] = 0;
    CHECK(rt_dataset_create(&vol_ops, &mine, 1, &bad, 3, &ds) == RT_ERR_INVALID_ARG);
    bad = vol_shape;
    bad.dims[0] = RT_DATA_MAX_CHANNELS + 1;
    CHECK(rt_dataset_create(&vol_ops, &mine, 1, &bad, 3, &ds) == RT_ERR_INVALID_ARG);
    CHECK(strstr(rt_error_last(), "channels") != NULL);
    bad = vol_shape;
    bad.dtype = RT_I32;
    CHECK(rt_dataset_create(&vol_ops, &mine, 1, &bad, 3, &ds) == RT_ERR_DTYPE);
    CHECK(ds == NULL);
    CHECK_EQ_INT(destroyed, 1); /* impl never destroyed on failure */
    CHECK_EQ_INT(mine.reads, 0);
}

/* An implementation reporting arrays: checked once at creation. */
typedef struct arr_state {
    uint8_t in[4];
    int32_t lab[4];
    bool null_inputs;
} arr_state;
static rt_status arr_read(const rt_dataset *ds, int64_t i, void *input, int32_t *label) {
    const arr_state *s = ds->impl;
    *(uint8_t *)input = s->in[i];
    *label = s->lab[i];
    return RT_OK;
}
static bool arr_arrays(const rt_dataset *ds, rt_dataset_arrays *out) {
    const arr_state *s = ds->impl;
    out->inputs = s->null_inputs ? NULL : s->in;
    out->labels = s->lab;
    return true;
}
static const rt_dataset_ops arr_ops = {.name = "arr", .read = arr_read, .arrays = arr_arrays};

static void test_dataset_interface_arrays(void) {
    arr_state st = {{1, 2, 3, 4}, {0, 1, 0, 1}, false};
    const rt_sample_shape one = {1, {1}, RT_U8};
    rt_dataset *ds = NULL;
    CHECK_OK(rt_dataset_create(&arr_ops, &st, 4, &one, 2, &ds));
    rt_dataset_arrays a;
    CHECK(rt_dataset_arrays_get(ds, &a) && a.inputs == st.in && a.labels == st.lab);
    CHECK(!rt_dataset_arrays_get(ds, NULL));
    CHECK_EQ_INT(ds->height, 1);
    CHECK_EQ_INT(ds->width, 1);
    rt_dataset_destroy(ds); /* no destroy op: only the header goes */
    st.lab[3] = 2;
    CHECK(rt_dataset_create(&arr_ops, &st, 4, &one, 2, &ds) == RT_ERR_FORMAT);
    CHECK(strstr(rt_error_last(), "label 2 at index 3") != NULL);
    CHECK(ds == NULL);
    st.lab[3] = 1;
    st.null_inputs = true;
    CHECK(rt_dataset_create(&arr_ops, &st, 4, &one, 2, &ds) == RT_ERR_FORMAT);
    CHECK_OK(rt_dataset_create(&arr_ops, &st, 0, &one, 2, &ds)); /* empty: NULL is fine */
    rt_dataset_destroy(ds);
}

/* The volumes batched by the loader: (b, 1, 4, 4, 4) f32, normalised with
 * the f32 rule (x - mean) / std, labels matching the visiting order; the
 * staging buffer (B inputs) is the only extra memory. */
static void test_loader_volumes(void) {
    int64_t before = data_live();
    int destroyed = 0;
    rt_dataset *ds = make_volumes(10, &destroyed);
    CHECK(ds != NULL);
    rt_loader_options o = rt_loader_options_default();
    o.batch_size = 4;
    o.shuffle = true;
    o.seed = 5;
    o.mean[0] = 2.5f;
    o.std[0] = 1.5f;
    rt_loader *l = NULL;
    CHECK_OK(rt_loader_create(ds, &o, &l));
    CHECK_EQ_INT(data_live() - before, 10 * 8 + 4 * 256); /* order + staging */
    CHECK_EQ_INT(rt_loader_batches_per_epoch(l), 3);
    for (int e = 0; e < 2; e++) {
        CHECK_OK(rt_loader_reset(l, e));
        int seen[10] = {0};
        for (int bi = 0; bi < 3; bi++) {
            rt_tensor *x = NULL, *y = NULL;
            bool end = true;
            CHECK_OK(rt_loader_next(l, &x, &y, &end));
            CHECK(!end);
            const int64_t b = bi < 2 ? 4 : 2;
            CHECK(x->dtype == RT_F32 && x->ndim == 5 && x->shape[0] == b && x->shape[1] == 1 &&
                  x->shape[2] == 4 && x->shape[3] == 4 && x->shape[4] == 4);
            CHECK(y->dtype == RT_I32 && y->ndim == 1 && y->shape[0] == b);
            const float *p = rt_tensor_f32(x);
            const int32_t *lab = rt_tensor_data(y);
            int bad = 0;
            for (int64_t k = 0; k < b; k++) {
                const int64_t idx = rt_loader_order(l)[bi * 4 + k];
                seen[idx]++;
                if (lab[k] != idx % 3) bad++;
                for (int64_t j = 0; j < 64; j++) {
                    const float want = (vol_value(idx, j) - 2.5f) / 1.5f;
                    if (memcmp(&p[k * 64 + j], &want, sizeof want) != 0) bad++;
                }
            }
            rt_tensor_release(x);
            rt_tensor_release(y);
            CHECK_EQ_INT(bad, 0);
        }
        for (int i = 0; i < 10; i++) CHECK_EQ_INT(seen[i], 1);
    }
    vol_state *v = ds->impl;
    CHECK_EQ_INT(v->reads, 20); /* one read per sample per epoch */
    rt_loader_destroy(l);

    /* crop + flip on f32 volumes: every depth slice moves by the same window;
     * padding is a raw 0, i.e. (0 - mean) / std after Normalize */
    o.crop_padding = 2;
    o.hflip = true;
    o.batch_size = 10;
    CHECK_OK(rt_loader_create(ds, &o, &l));
    rt_tensor *x = NULL, *y = NULL;
    bool end;
    CHECK_OK(rt_loader_next(l, &x, &y, &end));
    int bad = 0, shifted = 0;
    for (int64_t k = 0; k < 10; k++) {
        const int64_t idx = rt_loader_order(l)[k];
        rt_augment a;
        CHECK_OK(rt_loader_augment_params(l, 0, idx, &a));
        shifted += a.top != 2 || a.left != 2;
        for (int d = 0; d < 4; d++)
            for (int yy = 0; yy < 4; yy++)
                for (int xx = 0; xx < 4; xx++) {
                    const int sy = yy + a.top - 2, sx = (a.flip ? 3 - xx : xx) + a.left - 2;
                    const float raw = (sy < 0 || sy > 3 || sx < 0 || sx > 3) ? 0.0f
                                                                             : vol_value(idx, d * 16 + sy * 4 + sx);
                    const float want = (raw - 2.5f) / 1.5f;
                    if (rt_tensor_f32(x)[k * 64 + d * 16 + yy * 4 + xx] != want) bad++;
                }
    }
    rt_tensor_release(x);
    rt_tensor_release(y);
    rt_loader_destroy(l);
    CHECK_EQ_INT(bad, 0);
    CHECK(shifted >= 5); /* P(unshifted) = 1/25 per sample */
    rt_dataset_destroy(ds);
    CHECK_EQ_INT(destroyed, 1);
    CHECK_EQ_INT(data_live(), before);
}

/* A failing read stops the batch: its status and message come back, no
 * tensor is returned or leaked, the position stays. So does a label out of
 * range. */
static void test_loader_read_errors(void) {
    int64_t before = data_live();
    rt_dataset *ds = make_volumes(10, NULL);
    CHECK(ds != NULL);
    vol_state *v = ds->impl;
    v->fail_at = 6;
    rt_loader_options o = rt_loader_options_default();
    o.batch_size = 4;
    rt_loader *l = NULL;
    CHECK_OK(rt_loader_create(ds, &o, &l));
    rt_tensor *x = NULL, *y = NULL;
    bool end;
    CHECK_OK(rt_loader_next(l, &x, &y, &end));
    rt_tensor_release(x);
    rt_tensor_release(y);
    int64_t live = data_live();
    x = y = (rt_tensor *)1;
    CHECK(rt_loader_next(l, &x, &y, &end) == RT_ERR_IO);
    CHECK(strstr(rt_error_last(), "volume 6 is unreadable") != NULL);
    CHECK(x == NULL && y == NULL);
    CHECK_EQ_INT(rt_loader_batch_index(l), 1);
    CHECK_EQ_INT(data_live(), live);
    v->fail_at = -1;
    v->bad_label_at = 5;
    CHECK(rt_loader_next(l, &x, &y, &end) == RT_ERR_FORMAT);
    CHECK(strstr(rt_error_last(), "sample 5") != NULL);
    CHECK_EQ_INT(rt_loader_batch_index(l), 1);
    v->bad_label_at = -1;
    CHECK_OK(rt_loader_next(l, &x, &y, &end)); /* recovers */
    CHECK(((int32_t *)rt_tensor_data(y))[2] == 6 % 3);
    rt_tensor_release(x);
    rt_tensor_release(y);
    rt_loader_destroy(l);
    rt_dataset_destroy(ds);
    CHECK_EQ_INT(data_live(), before);
}

/* Forwards every read to another dataset and hides its arrays, so the
 * loader must take the per-sample path. */
static rt_status fwd_read(const rt_dataset *ds, int64_t i, void *input, int32_t *label) {
    return rt_dataset_read(ds->impl, i, input, label);
}
static const rt_dataset_ops fwd_ops = {.name = "forward", .read = fwd_read};

/* Through the interface or straight from the arrays, the loader gives the
 * same bits, with shuffling, crop and flip, for images and for u8 volumes
 * (whose D planes share one crop window and flip). */
static void test_loader_interface_matches_arrays(void) {
    int64_t before = data_live();
    for (int vol = 0; vol < 2; vol++) {
        /* images (2, 9, 7) or volumes (2, 3, 6, 5); sample i value k = (i * 31 + k * 7) % 256 */
        const rt_sample_shape sh = vol ? (rt_sample_shape){4, {2, 3, 6, 5}, RT_U8}
                                       : (rt_sample_shape){3, {2, 9, 7, 0}, RT_U8};
        enum { N = 23 };
        const int64_t numel = rt_sample_numel(&sh);
        uint8_t *raw = malloc((size_t)(N * numel));
        int32_t lab[N];
        for (int64_t i = 0; i < N; i++) {
            for (int64_t k = 0; k < numel; k++) raw[i * numel + k] = (uint8_t)((i * 31 + k * 7) % 256);
            lab[i] = (int32_t)(i % 5);
        }
        rt_dataset *mem = NULL, *fwd = NULL;
        rt_status st = rt_dataset_from_memory(N, &sh, 5, raw, lab, &mem);
        if (st == RT_OK) st = rt_dataset_create(&fwd_ops, mem, N, &sh, 5, &fwd);
        CHECK_OK(st);
        rt_loader_options o = rt_loader_options_default();
        o.batch_size = 6;
        o.shuffle = true;
        o.seed = 77;
        o.crop_padding = 2;
        o.hflip = true;
        o.mean[0] = 0.4f;
        o.std[0] = 0.3f;
        o.mean[1] = 0.6f;
        o.std[1] = 0.2f;
        rt_loader *la = NULL, *lb = NULL;
        CHECK_OK(rt_loader_create(mem, &o, &la));
        CHECK_OK(rt_loader_create(fwd, &o, &lb));
        int diff = 0, batches = 0, ref_bad = 0;
        const int64_t H = sh.dims[sh.ndim - 2], W = sh.dims[sh.ndim - 1], planes = numel / 2 / (H * W);
        float *ref = malloc((size_t)(H * W) * sizeof(float));
        for (int e = 0; e < 2; e++) {
            CHECK_OK(rt_loader_reset(la, e));
            CHECK_OK(rt_loader_reset(lb, e));
            for (int64_t bi = 0;; bi++) {
                rt_tensor *xa, *ya, *xb, *yb;
                bool ea, eb;
                CHECK_OK(rt_loader_next(la, &xa, &ya, &ea));
                CHECK_OK(rt_loader_next(lb, &xb, &yb, &eb));
                CHECK(ea == eb);
                if (ea) break;
                batches++;
                diff += memcmp(rt_tensor_f32(xa), rt_tensor_f32(xb), rt_tensor_nbytes(xa)) != 0;
                diff += memcmp(rt_tensor_data(ya), rt_tensor_data(yb), rt_tensor_nbytes(ya)) != 0;
                /* each plane is the torchvision crop + flip of the raw plane */
                for (int64_t k = 0; k < xa->shape[0]; k++) {
                    const int64_t idx = rt_loader_order(la)[bi * 6 + k];
                    rt_augment a;
                    if (rt_loader_augment_params(la, e, idx, &a) != RT_OK) ref_bad++;
                    for (int c = 0; c < 2; c++)
                        for (int64_t p = 0; p < planes; p++) {
                            const int64_t off = (c * planes + p) * H * W;
                            reference_augment(raw + idx * numel + off, (int)H, (int)W, 2, a, o.mean[c], o.std[c], ref);
                            ref_bad += memcmp(rt_tensor_f32(xa) + k * numel + off, ref, (size_t)(H * W) * sizeof(float)) != 0;
                        }
                }
                rt_tensor_release(xa);
                rt_tensor_release(ya);
                rt_tensor_release(xb);
                rt_tensor_release(yb);
            }
        }
        free(ref);
        rt_loader_destroy(la);
        rt_loader_destroy(lb);
        rt_dataset_destroy(fwd); /* the forwarder does not own mem */
        rt_dataset_destroy(mem);
        free(raw);
        CHECK_EQ_INT(batches, 8);
        CHECK_EQ_INT(diff, 0);
        CHECK_EQ_INT(ref_bad, 0);
    }
    CHECK_EQ_INT(data_live(), before);
}

/* Samples of fewer than 3 dims: batched as (b, C, L); crop and flip refused. */
static void test_loader_sequences(void) {
    const rt_sample_shape seq = {2, {3, 5, 0, 0}, RT_F32};
    float in[2 * 15];
    for (int k = 0; k < 30; k++) in[k] = (float)k;
    const int32_t lab[2] = {0, 1};
    rt_dataset *ds = NULL;
    CHECK_OK(rt_dataset_from_memory(2, &seq, 2, in, lab, &ds));
    CHECK(ds->channels == 3 && ds->height == 1 && ds->width == 5);
    rt_loader_options o = rt_loader_options_default();
    o.batch_size = 2;
    o.mean[1] = 1.0f;
    o.std[2] = 2.0f;
    rt_loader *l = NULL;
    CHECK_OK(rt_loader_create(ds, &o, &l));
    rt_tensor *x, *y;
    bool end;
    CHECK_OK(rt_loader_next(l, &x, &y, &end));
    CHECK(x->ndim == 3 && x->shape[0] == 2 && x->shape[1] == 3 && x->shape[2] == 5);
    const float *p = rt_tensor_f32(x);
    int bad = 0;
    for (int k = 0; k < 30; k++) {
        const int c = (k / 5) % 3;
        const float want = (in[k] - o.mean[c]) / o.std[c];
        bad += p[k] != want;
    }
    rt_tensor_release(x);
    rt_tensor_release(y);
    rt_loader_destroy(l);
    CHECK_EQ_INT(bad, 0);
    o.hflip = true;
    CHECK(rt_loader_create(ds, &o, &l) == RT_ERR_INVALID_ARG);
    CHECK(strstr(rt_error_last(), "2 dims") != NULL);
    o.hflip = false;
    o.crop_padding = 1;
    CHECK(rt_loader_create(ds, &o, &l) == RT_ERR_INVALID_ARG);
    CHECK(l == NULL);
    rt_dataset_destroy(ds);
    /* from_memory's own checks */
    CHECK(rt_dataset_from_memory(2, &seq, 2, NULL, lab, &ds) == RT_ERR_INVALID_ARG);
    const int32_t badlab[2] = {0, 2};
    CHECK(rt_dataset_from_memory(2, &seq, 2, in, badlab, &ds) == RT_ERR_FORMAT);
    CHECK(strstr(rt_error_last(), "index 1") != NULL);
    const rt_sample_shape f16 = {2, {3, 5, 0, 0}, RT_F16};
    CHECK(rt_dataset_from_memory(2, &f16, 2, in, lab, &ds) == RT_ERR_DTYPE);
    CHECK(ds == NULL);
}

/* Subset and channel statistics work through the interface too. */
static void test_dataset_subset_stats_interface(void) {
    int64_t before = data_live();
    int destroyed = 0;
    rt_dataset *ds = make_volumes(6, &destroyed);
    CHECK(ds != NULL);
    rt_dataset *sub = NULL;
    CHECK_OK(rt_dataset_subset(ds, 2, 3, &sub));
    CHECK_EQ_INT(sub->n, 3);
    CHECK(strcmp(sub->ops->name, "memory") == 0);
    CHECK(sub->shape.ndim == 4 && sub->shape.dtype == RT_F32 && sub->num_classes == 3);
    CHECK_EQ_INT(data_live() - before, 3 * 256 + 3 * 4);
    rt_dataset_arrays a;
    CHECK(rt_dataset_arrays_get(sub, &a));
    const float *f = a.inputs;
    for (int i = 0; i < 3; i++) {
        CHECK_EQ_INT(a.labels[i], (2 + i) % 3);
        for (int k = 0; k < 64; k++) CHECK(f[i * 64 + k] == vol_value(2 + i, k));
    }
    /* a failing read fails the subset cleanly */
    vol_state *v = ds->impl;
    v->fail_at = 3;
    rt_dataset *bad = (rt_dataset *)1;
    CHECK(rt_dataset_subset(ds, 2, 3, &bad) == RT_ERR_IO);
    CHECK(bad == NULL);
    CHECK_EQ_INT(data_live() - before, 3 * 256 + 3 * 4);
    /* channel stats: values i + k/64 over i = 0..5, k = 0..63, in f32 units */
    v->fail_at = -1;
    double mean, sd, s1 = 0, s2 = 0;
    for (int i = 0; i < 6; i++)
        for (int k = 0; k < 64; k++) {
            double x = (double)vol_value(i, k);
            s1 += x;
            s2 += x * x;
        }
    const double m_ref = s1 / 384, sd_ref = sqrt(s2 / 384 - m_ref * m_ref);
    CHECK_OK(rt_dataset_channel_stats(ds, &mean, &sd));
    CHECK_NEAR(mean, m_ref, 1e-12);
    CHECK_NEAR(sd, sd_ref, 1e-12);
    CHECK_OK(rt_dataset_channel_stats(sub, &mean, &sd)); /* the arrays path, f32 */
    CHECK_NEAR(mean, 3.0 + 63.0 / 128.0, 1e-12);
    CHECK_EQ_INT(data_live() - before, 3 * 256 + 3 * 4); /* the scratch sample went back */
    v->fail_at = 0;
    CHECK(rt_dataset_channel_stats(ds, &mean, &sd) == RT_ERR_IO);
    /* NaN input: RT_ERR_NONFINITE */
    float nan_in[4] = {1.0f, NAN, 2.0f, 3.0f};
    const int32_t lab[2] = {0, 0};
    const rt_sample_shape two = {1, {2}, RT_F32};
    rt_dataset *nds = NULL;
    CHECK_OK(rt_dataset_from_memory(2, &two, 1, nan_in, lab, &nds));
    CHECK(rt_dataset_channel_stats(nds, &mean, &sd) == RT_ERR_NONFINITE);
    rt_dataset_destroy(nds);
    rt_dataset_destroy(sub);
    rt_dataset_destroy(ds);
    CHECK_EQ_INT(destroyed, 1);
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

/* This run's temp dir for IDX files (created on first use, removed at exit). */
static const char *tmp_dir(void) {
    if (!g_dir[0]) {
        strcpy(g_dir, "/tmp/rt_test_data_XXXXXX");
        if (!mkdtemp(g_dir)) {
            g_dir[0] = '\0';
            return NULL;
        }
        atexit(rm_tmp);
    }
    return g_dir;
}

static int write_file(const char *name, const uint8_t *bytes, size_t n, bool gz) {
    if (!tmp_dir()) return -1;
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
    CHECK(tmp_dir() != NULL);
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
    CHECK(ds->shape.ndim == 3 && ds->shape.dims[0] == 1 && ds->shape.dims[1] == 4 &&
          ds->shape.dims[2] == 5 && ds->shape.dtype == RT_U8);
    CHECK(strcmp(ds->ops->name, "mnist") == 0);
    CHECK_EQ_INT(ds_label(ds, 0), 9);
    CHECK_EQ_INT(ds_label(ds, 2), 5);
    CHECK_EQ_INT(ds_image(ds, 2)[19], 59 * 4);
    rt_dataset_destroy(ds);

    /* a bad label names the file */
    CHECK(rt_mnist_load(g_dir, false, &ds) == RT_ERR_FORMAT);
    CHECK(ds == NULL);
    CHECK(strstr(rt_error_last(), "t10k-labels-idx1-ubyte") != NULL);
    /* the .gz name wins over the plain one */
    nl = idx_labels(lab, 1);
    CHECK(write_file("t10k-labels-idx1-ubyte.gz", lab, nl, true) == 0);
    CHECK_OK(rt_mnist_load(g_dir, false, &ds));
    CHECK_EQ_INT(ds_label(ds, 2), 1);
    rt_dataset_destroy(ds);

    CHECK_EQ_INT(data_live(), before);
}

/* Only the first samples are read: the dataset holds them and books only
 * their bytes; 0 gives an empty dataset, more than the files hold gives all. */
static void test_mnist_load_first(void) {
    int64_t before = data_live();
    uint8_t img[128], lab[16];
    size_t ni = idx_images(img), nl = idx_labels(lab, 5);
    CHECK(write_file("train-images-idx3-ubyte", img, ni, false) == 0);
    CHECK(write_file("train-labels-idx1-ubyte.gz", lab, nl, true) == 0);
    rt_dataset *ds = NULL;
    CHECK_OK(rt_mnist_load_first(g_dir, true, 2, &ds));
    CHECK_EQ_INT(ds->n, 2);
    CHECK(ds->shape.ndim == 3 && ds->height == 4 && ds->width == 5);
    CHECK_EQ_INT(data_live() - before, 2 * 20 + 2 * 4); /* two images and two i32 labels */
    CHECK_EQ_INT(ds_label(ds, 0), 9);
    CHECK_EQ_INT(ds_label(ds, 1), 0);
    CHECK_EQ_INT(ds_image(ds, 1)[19], 39 * 4);
    rt_dataset_destroy(ds);
    CHECK_OK(rt_mnist_load_first(g_dir, true, 0, &ds));
    CHECK_EQ_INT(ds->n, 0);
    rt_dataset_destroy(ds);
    CHECK_OK(rt_mnist_load_first(g_dir, true, 5, &ds));
    CHECK_EQ_INT(ds->n, 3);
    CHECK_EQ_INT(ds_label(ds, 2), 5);
    rt_dataset_destroy(ds);
    ds = (rt_dataset *)1;
    CHECK(rt_mnist_load_first(g_dir, true, -1, &ds) == RT_ERR_INVALID_ARG);
    CHECK(ds == NULL);
    CHECK(rt_mnist_load_first(NULL, true, 1, &ds) == RT_ERR_INVALID_ARG);
    CHECK(rt_mnist_load_first("/nonexistent/rt-data-dir", true, 1, &ds) == RT_ERR_IO);
    /* the labels still have to belong to the images: a label file that
     * declares 2 samples does not fit 3 images, even when 1 is read */
    const uint8_t two[10] = {0, 0, 0x08, 1, 0, 0, 0, 2, 1, 1};
    CHECK(write_file("train-labels-idx1-ubyte.gz", two, sizeof two, true) == 0);
    CHECK(rt_mnist_load_first(g_dir, true, 1, &ds) == RT_ERR_SHAPE);
    CHECK(strstr(rt_error_last(), "3 images but 2 labels") != NULL);
    CHECK(write_file("train-labels-idx1-ubyte.gz", lab, nl, true) == 0);
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
    for (int64_t i = 0; i < train->n; i++) ctr[ds_label(train, i)]++;
    for (int64_t i = 0; i < test->n; i++) cte[ds_label(test, i)]++;
    for (int c = 0; c < 10; c++) {
        CHECK_EQ_INT(ctr[c], 6000);
        CHECK_EQ_INT(cte[c], 1000);
    }
    double mean, stdv;
    CHECK_OK(rt_dataset_channel_stats(train, &mean, &stdv));
    printf("fashion-mnist train: mean %.6f std %.6f\n", mean, stdv);
    CHECK_NEAR(mean, RT_FASHION_MNIST_MEAN, 0.001);
    CHECK_NEAR(stdv, RT_FASHION_MNIST_STD, 0.001);

    /* the first 1000 read alone: the same samples, only their bytes booked */
    rt_dataset *first = NULL;
    int64_t live = data_live();
    CHECK_OK(rt_mnist_load_first(fashion_dir(), true, 1000, &first));
    CHECK_EQ_INT(data_live() - live, 1000 * 784 + 1000 * 4);
    CHECK_EQ_INT(first->n, 1000);
    CHECK(memcmp(ds_image(first, 0), ds_image(train, 0), 1000 * 784) == 0);
    for (int64_t i = 0; i < 1000; i++) CHECK_EQ_INT(ds_label(first, i), ds_label(train, i));
    rt_dataset_destroy(first);

    /* a subset through a loader with the standard options */
    rt_dataset *sub = NULL;
    CHECK_OK(rt_dataset_subset(train, 100, 256, &sub));
    CHECK_EQ_INT(ds_label(sub, 0), ds_label(train, 100));
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

/* Data parallelism: the shards of R loaders (shard_rank 0..R-1), laid end
 * to end, are the unsharded loader's batches bit for bit, the short last
 * batch included, augmentation and shuffling on. */
static void test_loader_shard(void) {
    enum { N = 29 };
    const rt_sample_shape sh = {3, {1, 6, 5, 0}, RT_U8};
    const int64_t numel = rt_sample_numel(&sh);
    uint8_t raw[N * 30];
    int32_t lab[N];
    for (int64_t i = 0; i < N; i++) {
        for (int64_t k = 0; k < numel; k++) raw[i * numel + k] = (uint8_t)((i * 13 + k * 5) % 256);
        lab[i] = (int32_t)(i % 3);
    }
    rt_dataset *ds = NULL;
    CHECK_OK(rt_dataset_from_memory(N, &sh, 3, raw, lab, &ds));
    rt_loader_options o = rt_loader_options_default();
    o.batch_size = 8;
    o.shuffle = true;
    o.seed = 5;
    o.crop_padding = 1;
    o.hflip = true;
    rt_loader *whole = NULL, *part[3] = {NULL};
    CHECK_OK(rt_loader_create(ds, &o, &whole));
    for (int r = 0; r < 3; r++) {
        rt_loader_options p = o;
        p.shard_rank = r;
        p.shard_count = 3;
        CHECK_OK(rt_loader_create(ds, &p, &part[r]));
    }
    rt_loader_options bad = o;
    bad.shard_count = 2;
    bad.shard_rank = 2;
    rt_loader *none = NULL;
    CHECK(rt_loader_create(ds, &bad, &none) == RT_ERR_INVALID_ARG && !none);
    int batches = 0;
    for (;;) {
        rt_tensor *x = NULL, *y = NULL;
        bool end = false;
        CHECK_OK(rt_loader_next(whole, &x, &y, &end));
        if (end) break;
        int64_t at = 0;
        for (int r = 0; r < 3; r++) {
            rt_tensor *xs = NULL, *ys = NULL;
            bool e2 = false;
            CHECK_OK(rt_loader_next(part[r], &xs, &ys, &e2));
            CHECK(!e2);
            CHECK_EQ_INT(xs->shape[0], x->shape[0] * (r + 1) / 3 - x->shape[0] * r / 3);
            CHECK(memcmp(rt_tensor_f32(xs), rt_tensor_f32(x) + at * numel, rt_tensor_nbytes(xs)) == 0);
            CHECK(memcmp(rt_tensor_data(ys), (int32_t *)rt_tensor_data(y) + at, rt_tensor_nbytes(ys)) == 0);
            at += xs->shape[0];
            rt_tensor_release(xs);
            rt_tensor_release(ys);
        }
        CHECK_EQ_INT(at, x->shape[0]);
        rt_tensor_release(x);
        rt_tensor_release(y);
        batches++;
    }
    CHECK_EQ_INT(batches, 4); /* 8, 8, 8 and the short 5 */
    for (int r = 0; r < 3; r++) rt_loader_destroy(part[r]);
    rt_loader_destroy(whole);
    rt_dataset_destroy(ds);
}

int main(int argc, char **argv) {
    static const rt_test_case cases[] = {
        {"dataset_from_arrays", test_dataset_from_arrays},
        {"loader_shard", test_loader_shard},
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
        {"dataset_interface", test_dataset_interface},
        {"dataset_interface_arrays", test_dataset_interface_arrays},
        {"loader_volumes", test_loader_volumes},
        {"loader_read_errors", test_loader_read_errors},
        {"loader_interface_matches_arrays", test_loader_interface_matches_arrays},
        {"loader_sequences", test_loader_sequences},
        {"dataset_subset_stats_interface", test_dataset_subset_stats_interface},
        {"mnist_files", test_mnist_files},
        {"mnist_load_first", test_mnist_load_first},
        {"mnist_missing_dir", test_mnist_missing_dir}};
    /* need the real Fashion-MNIST files */
    static const rt_test_case fashion[] = {{"fashion_mnist_real", test_fashion_mnist_real}};
    return rt_test_main_with_fashion(argc, argv, cases, (int)(sizeof cases / sizeof cases[0]), fashion,
                                     (int)(sizeof fashion / sizeof fashion[0]));
}
