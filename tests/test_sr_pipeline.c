/* Super-resolution data (data/superres.h) and metrics (train/sr_metric.h):
 * the slice split never lets a training patch come from a held-out slice,
 * patches are where the sampler says and LR is HR's block mean, and PSNR,
 * SSIM and the block mean agree with skimage and torch on the fixture
 * written by tools/make_sr_fixtures.py. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/tensor.h"
#include "data/superres.h"
#include "io/safetensors.h"
#include "rt_test.h"
#include "test_util.h"
#include "train/sr_metric.h"

#define FIXTURE_DIR RT_SOURCE_DIR "/tests/fixtures/sr_pipeline"
#include "parity_util.h"

/* A [1, D, H, W] volume whose voxel (k, y, x) is 1000·k + W·y + x + 1: each
 * value names its place, so a patch tells where it came from. */
static rt_tensor *coded_volume(int64_t D, int64_t H, int64_t W) {
    const int64_t s[4] = {1, D, H, W};
    rt_tensor *v = tu_own(rt_tensor_create(4, s, RT_F32, RT_DEVICE_CPU, RT_MEM_DATA));
    if (!v) return NULL;
    float *p = rt_tensor_f32(v);
    for (int64_t k = 0; k < D; k++)
        for (int64_t i = 0; i < H * W; i++) p[k * H * W + i] = (float)(1000 * k + i + 1);
    return v;
}

TU_TEST(split_no_overlap) {
    rt_sr_split sp;
    /* the default task's volume: 316 axial slices, 30% held out, a gap of 8 */
    CHECK_OK(rt_sr_split_slices(316, 0.3, 8, &sp));
    CHECK_EQ_INT(sp.heldout_hi, 316);
    CHECK_EQ_INT(sp.heldout_hi - sp.heldout_lo, 95); /* round(94.8) */
    CHECK_EQ_INT(sp.train_lo, 0);
    CHECK_EQ_INT(sp.heldout_lo - sp.train_hi, 8);
    for (int64_t depth = 3; depth < 60; depth++)
        for (int g = 0; g < 4; g++) {
            if (rt_sr_split_slices(depth, 0.25, g, &sp) != RT_OK) continue;
            CHECK(sp.train_hi >= 1 && sp.heldout_lo < sp.heldout_hi && sp.train_hi + g == sp.heldout_lo);
        }
    CHECK_EQ_INT(rt_sr_split_slices(10, 0.0, 1, &sp), RT_ERR_INVALID_ARG);
    CHECK_EQ_INT(rt_sr_split_slices(10, 1.0, 1, &sp), RT_ERR_INVALID_ARG);
    CHECK_EQ_INT(rt_sr_split_slices(10, 0.5, 5, &sp), RT_ERR_INVALID_ARG); /* no training slice left */
    CHECK(strstr(rt_error_last(), "training"));
    CHECK_EQ_INT(rt_sr_split_slices(10, 0.5, -1, &sp), RT_ERR_INVALID_ARG);
    CHECK_EQ_INT(rt_sr_split_slices(10, 0.5, 1, NULL), RT_ERR_INVALID_ARG);

    /* 2000 patches from the training part of a coded volume: every voxel of
     * every patch lies in a training slice (read from the values, not from
     * the sampler's own report) */
    const int64_t D = 30, H = 20, W = 18;
    rt_tensor *v = coded_volume(D, H, W);
    CHECK(v);
    CHECK_OK(rt_sr_split_slices(D, 0.3, 3, &sp));
    rt_sr_patch_options o = {.scale = 2, .patch = 4, .slice_lo = sp.train_lo, .slice_hi = sp.train_hi,
                             .augment = true, .threshold = 0.0f, .min_foreground = 0.0f, .seed = 7};
    rt_sr_sampler *s = NULL;
    CHECK_OK(rt_sr_sampler_create(v, &o, &s));
    int64_t seen_lo = D, seen_hi = -1;
    for (int b = 0; b < 125; b++) {
        rt_tensor *lr = NULL, *hr = NULL;
        rt_sr_patch_info info[16];
        CHECK_OK(rt_sr_sampler_next(s, 16, &lr, &hr, info));
        tu_own(lr), tu_own(hr);
        const float *p = rt_tensor_f32(hr);
        for (int64_t i = 0; i < rt_tensor_numel(hr); i++) {
            int64_t k = (int64_t)(p[i] - 1) / 1000;
            CHECK(k >= sp.train_lo && k < sp.train_hi);
            seen_lo = k < seen_lo ? k : seen_lo, seen_hi = k > seen_hi ? k : seen_hi;
        }
        for (int i = 0; i < 16; i++) CHECK(info[i].k >= sp.train_lo && info[i].k < sp.train_hi);
    }
    CHECK_EQ_INT(seen_lo, sp.train_lo);     /* the whole training range is used */
    CHECK_EQ_INT(seen_hi, sp.train_hi - 1);
    rt_sr_sampler_destroy(s);
}

/* Each patch is the volume's block at (k, y, x) with the reported flips, LR
 * its block mean, and a seed gives the same batches again. */
TU_TEST(sampler_patches) {
    const int64_t D = 6, H = 22, W = 26, sc = 2, P = 10;
    rt_tensor *v = coded_volume(D, H, W);
    CHECK(v);
    rt_sr_patch_options o = {.scale = sc, .patch = P / sc, .slice_lo = 1, .slice_hi = 5, .augment = true,
                             .threshold = 0.0f, .min_foreground = 0.0f, .seed = 3};
    rt_sr_sampler *s = NULL, *s2 = NULL;
    CHECK_OK(rt_sr_sampler_create(v, &o, &s));
    CHECK_OK(rt_sr_sampler_create(v, &o, &s2));
    int flips[3] = {0, 0, 0};
    const float *vol = rt_tensor_f32(v);
    for (int b = 0; b < 20; b++) {
        rt_tensor *lr = NULL, *hr = NULL, *lr2 = NULL, *hr2 = NULL, *down = NULL;
        rt_sr_patch_info info[4];
        CHECK_OK(rt_sr_sampler_next(s, 4, &lr, &hr, info));
        CHECK_OK(rt_sr_sampler_next(s2, 4, &lr2, &hr2, NULL));
        tu_own(lr), tu_own(hr), tu_own(lr2), tu_own(hr2);
        CHECK_EQ_INT(hr->shape[0], 4);
        CHECK_EQ_INT(hr->shape[2], P);
        CHECK_EQ_INT(lr->shape[2], P / sc);
        CHECK(memcmp(rt_tensor_f32(hr), rt_tensor_f32(hr2), (size_t)rt_tensor_numel(hr) * sizeof(float)) == 0);
        CHECK(memcmp(rt_tensor_f32(lr), rt_tensor_f32(lr2), (size_t)rt_tensor_numel(lr) * sizeof(float)) == 0);
        CHECK_OK(rt_sr_downsample(hr, sc, &down));
        tu_own(down);
        CHECK(memcmp(rt_tensor_f32(lr), rt_tensor_f32(down), (size_t)rt_tensor_numel(lr) * sizeof(float)) == 0);
        for (int n = 0; n < 4; n++) {
            const rt_sr_patch_info *pi = &info[n];
            CHECK(pi->y % sc == 0 && pi->x % sc == 0 && pi->y + P <= H && pi->x + P <= W);
            flips[0] += pi->hflip, flips[1] += pi->vflip, flips[2] += pi->transpose;
            const float *h = rt_tensor_f32(hr) + n * P * P;
            for (int64_t i = 0; i < P; i++)
                for (int64_t j = 0; j < P; j++) {
                    int64_t a = pi->transpose ? j : i, c = pi->transpose ? i : j;
                    if (pi->vflip) a = P - 1 - a;
                    if (pi->hflip) c = P - 1 - c;
                    CHECK(h[i * P + j] == vol[(pi->k * H + pi->y + a) * W + pi->x + c]);
                }
        }
    }
    for (int f = 0; f < 3; f++) CHECK(flips[f] > 20 && flips[f] < 60); /* 80 patches, p = 1/2 */
    rt_sr_sampler_destroy(s);
    rt_sr_sampler_destroy(s2);
    /* refusals */
    rt_sr_sampler *bad = NULL;
    o.patch = 12; /* 24 > H */
    CHECK_EQ_INT(rt_sr_sampler_create(v, &o, &bad), RT_ERR_INVALID_ARG);
    o.patch = 2, o.slice_hi = 7;
    CHECK_EQ_INT(rt_sr_sampler_create(v, &o, &bad), RT_ERR_INVALID_ARG);
    o.slice_hi = 5, o.min_foreground = 1.5f;
    CHECK_EQ_INT(rt_sr_sampler_create(v, &o, &bad), RT_ERR_INVALID_ARG);
    CHECK(bad == NULL);
}

/* Patches below min_foreground are drawn again: a volume that is empty but
 * for one corner gives patches that reach into it. */
TU_TEST(sampler_skips_background) {
    const int64_t s4[4] = {1, 4, 40, 40};
    rt_tensor *v = tu_own(rt_tensor_create(4, s4, RT_F32, RT_DEVICE_CPU, RT_MEM_DATA));
    CHECK(v);
    float *p = rt_tensor_f32(v);
    memset(p, 0, (size_t)rt_tensor_numel(v) * sizeof(float));
    for (int64_t k = 0; k < 4; k++)
        for (int64_t i = 0; i < 12; i++)
            for (int64_t j = 0; j < 12; j++) p[(k * 40 + i) * 40 + j] = 0.5f;
    rt_sr_patch_options o = {.scale = 2, .patch = 4, .slice_lo = 0, .slice_hi = 4, .augment = false,
                             .threshold = 0.1f, .min_foreground = 0.25f, .seed = 11};
    rt_sr_sampler *s = NULL;
    CHECK_OK(rt_sr_sampler_create(v, &o, &s));
    rt_tensor *lr = NULL, *hr = NULL;
    rt_sr_patch_info info[32];
    rt_status st = rt_sr_sampler_next(s, 32, &lr, &hr, info);
    rt_sr_sampler_destroy(s);
    CHECK_OK(st);
    tu_own(lr), tu_own(hr);
    int redrawn = 0;
    for (int n = 0; n < 32; n++) {
        int64_t fg = 0;
        for (int64_t i = 0; i < 64; i++) fg += rt_tensor_f32(hr)[n * 64 + i] > 0.1f;
        CHECK(fg >= 16);
        redrawn += info[n].draws > 1;
    }
    CHECK(redrawn > 0);
}

TU_TEST(eval_slices) {
    /* slices 0..19, foreground in the odd ones of the held-out part only */
    const int64_t s4[4] = {1, 20, 8, 8};
    rt_tensor *v = tu_own(rt_tensor_create(4, s4, RT_F32, RT_DEVICE_CPU, RT_MEM_DATA));
    CHECK(v);
    float *p = rt_tensor_f32(v);
    for (int64_t k = 0; k < 20; k++)
        for (int64_t i = 0; i < 64; i++) p[k * 64 + i] = (k % 2 && i < 40) ? 0.8f : 0.0f;
    rt_sr_split sp;
    CHECK_OK(rt_sr_split_slices(20, 0.5, 2, &sp)); /* held out: 10..19, eligible 11, 13, 15, 17, 19 */
    CHECK_NEAR(rt_sr_slice_foreground(v, 11, 0.05f), 40.0 / 64.0, 1e-12);
    int64_t ks[8], n = -1;
    CHECK_OK(rt_sr_eval_slices(v, &sp, 3, 0.05f, 0.5, ks, &n));
    CHECK_EQ_INT(n, 3);
    CHECK_EQ_INT(ks[0], 11); /* indices 0, 2, 4 of the 5 eligible: floor((i + 0.5)·5/3) */
    CHECK_EQ_INT(ks[1], 15);
    CHECK_EQ_INT(ks[2], 19);
    CHECK_OK(rt_sr_eval_slices(v, &sp, 8, 0.05f, 0.5, ks, &n));
    CHECK_EQ_INT(n, 5);
    for (int i = 0; i < 5; i++) CHECK_EQ_INT(ks[i], 11 + 2 * i);
    CHECK_OK(rt_sr_eval_slices(v, &sp, 8, 0.05f, 0.9, ks, &n)); /* none eligible */
    CHECK_EQ_INT(n, 0);
    sp.heldout_hi = 21;
    CHECK_EQ_INT(rt_sr_eval_slices(v, &sp, 3, 0.05f, 0.5, ks, &n), RT_ERR_INVALID_ARG);
}

TU_TEST(normalize_and_slice) {
    /* 1000 positive values 1..1000 and 1000 zeros: the 99.9th percentile by
     * nearest rank is the 999th smallest, 999 */
    const int64_t s4[4] = {1, 2, 20, 50};
    rt_tensor *v = tu_own(rt_tensor_create(4, s4, RT_F32, RT_DEVICE_CPU, RT_MEM_DATA));
    CHECK(v);
    float *p = rt_tensor_f32(v);
    for (int64_t i = 0; i < 2000; i++) p[i] = i % 2 ? (float)(i / 2 + 1) : 0.0f;
    double q = 0;
    CHECK_OK(rt_sr_normalize(v, 99.9, &q));
    CHECK_NEAR(q, 999.0, 0);
    CHECK_NEAR(p[999], 500.0f / 999.0f, 1e-7); /* i = 999: value 500 */
    CHECK_NEAR(p[1999], 1.0, 0);               /* 1000 clipped */
    CHECK_NEAR(p[0], 0.0, 0);
    /* a slice, cropped to even sizes for scale 3 */
    rt_tensor *hr = NULL;
    CHECK_OK(rt_sr_slice(v, 1, 3, &hr));
    tu_own(hr);
    CHECK_EQ_INT(hr->shape[2], 18);
    CHECK_EQ_INT(hr->shape[3], 48);
    CHECK(rt_tensor_f32(hr)[5 * 48 + 7] == p[1000 + 5 * 50 + 7]);
    CHECK_EQ_INT(rt_sr_slice(v, 2, 2, &hr), RT_ERR_INVALID_ARG);
    const int64_t z4[4] = {1, 1, 2, 2};
    rt_tensor *zero = tu_own(rt_tensor_zeros(4, z4, RT_F32, RT_DEVICE_CPU, RT_MEM_DATA));
    CHECK(zero);
    CHECK_EQ_INT(rt_sr_normalize(zero, 99.9, NULL), RT_ERR_INVALID_ARG);
    CHECK_EQ_INT(rt_sr_normalize(v, 0.0, NULL), RT_ERR_INVALID_ARG);
    /* random values with ties (integers 0..99, as uint8 MRI): the robust
     * maximum is the nearest-rank percentile of the sorted positive values */
    const int64_t r4[4] = {1, 3, 40, 50};
    rt_generator g = {21, 0};
    const double pcts[4] = {50.0, 99.0, 99.9, 100.0};
    for (int t = 0; t < 4; t++) {
        rt_tensor *r = tu_own(rt_tensor_create(4, r4, RT_F32, RT_DEVICE_CPU, RT_MEM_DATA));
        CHECK(r);
        float *rp = rt_tensor_f32(r);
        const int64_t n = rt_tensor_numel(r);
        rt_generator_uniform(&g, n, rp);
        for (int64_t i = 0; i < n; i++) rp[i] = floorf(rp[i] * 100.0f);
        float sorted[6000];
        int64_t m = 0;
        for (int64_t i = 0; i < n; i++)
            if (rp[i] > 0) sorted[m++] = rp[i];
        for (int64_t i = 1; i < m; i++) /* insertion sort: the reference, independent of the library's selection */
            for (int64_t j = i; j > 0 && sorted[j - 1] > sorted[j]; j--) {
                float tmp = sorted[j];
                sorted[j] = sorted[j - 1];
                sorted[j - 1] = tmp;
            }
        int64_t rank = (int64_t)ceil(pcts[t] / 100.0 * (double)m - 1e-9) - 1;
        CHECK_OK(rt_sr_normalize(r, pcts[t], &q));
        CHECK_NEAR(q, sorted[rank], 0);
    }
}

/* Block mean against torch.nn.functional.avg_pool2d. */
TU_TEST(downsample_matches_torch) {
    rt_st_file *f = fx_open("sr_metrics");
    CHECK(f);
    rt_tensor *hr = fx_tensor(f, "down_hr", false), *want = fx_tensor(f, "down_lr", false);
    CHECK(hr && want);
    rt_tensor *lr = NULL;
    CHECK_OK(rt_sr_downsample(hr, 2, &lr));
    tu_own(lr);
    CHECK(rt_tensor_same_shape(lr, want));
    CHECK(tu_max_abs_diff(rt_tensor_numel(lr), rt_tensor_f32(lr), rt_tensor_f32(want)) <= 1e-7);
    const int64_t odd[4] = {1, 1, 5, 4};
    rt_tensor *o = tu_own(rt_tensor_zeros(4, odd, RT_F32, RT_DEVICE_CPU, RT_MEM_DATA));
    CHECK_EQ_INT(rt_sr_downsample(o, 2, &lr), RT_ERR_SHAPE);
    CHECK(lr == NULL);
}

/* PSNR and SSIM against skimage (tools/make_sr_fixtures.py), per pair and border. */
TU_TEST(metrics_match_skimage) {
    rt_st_file *f = fx_open("sr_metrics");
    CHECK(f);
    static const int borders[3][3] = {{0, 2, 7}, {0, 2, -1}, {0, 1, -1}};
    int checked = 0;
    for (int i = 0; i < 3; i++) {
        char name[32];
        snprintf(name, sizeof name, "img%d_x", i);
        rt_tensor *x = fx_tensor(f, name, false);
        snprintf(name, sizeof name, "img%d_ref", i);
        rt_tensor *ref = fx_tensor(f, name, false);
        CHECK(x && ref);
        for (int b = 0; b < 3 && borders[i][b] >= 0; b++) {
            char key[32];
            double psnr = NAN, ssim = NAN;
            CHECK_OK(rt_psnr(x, ref, borders[i][b], 1.0, &psnr));
            CHECK_OK(rt_ssim(x, ref, borders[i][b], 1.0, &ssim));
            snprintf(key, sizeof key, "psnr_%d_b%d", i, borders[i][b]);
            double want = fx_double(f, key);
            CHECK(isfinite(want));
            CHECK_NEAR(psnr, want, 1e-9 * fabs(want));
            snprintf(key, sizeof key, "ssim_%d_b%d", i, borders[i][b]);
            want = fx_double(f, key);
            CHECK(isfinite(want));
            CHECK_NEAR(ssim, want, 1e-9);
            checked++;
        }
    }
    CHECK_EQ_INT(checked, 7);
}

TU_TEST(metrics_edges) {
    const int64_t s4[4] = {1, 1, 16, 16};
    rt_generator g = {5, 0};
    rt_tensor *a = tu_randn(&g, 4, s4, 0.5f, 0.1f), *b = tu_randn(&g, 4, s4, 0.5f, 0.1f);
    double v = 0;
    CHECK_OK(rt_psnr(a, a, 1, 1.0, &v));
    CHECK(isinf(v) && v > 0);
    CHECK_OK(rt_ssim(a, a, 1, 1.0, &v));
    CHECK_NEAR(v, 1.0, 1e-12);
    CHECK_OK(rt_ssim(a, b, 0, 1.0, &v));
    CHECK(v < 0.9);
    CHECK_EQ_INT(rt_ssim(a, b, 3, 1.0, &v), RT_ERR_INVALID_ARG); /* 10×10 left: smaller than the window */
    CHECK(strstr(rt_error_last(), "11x11"));
    CHECK_EQ_INT(rt_psnr(a, b, 8, 1.0, &v), RT_ERR_INVALID_ARG);
    CHECK_EQ_INT(rt_psnr(a, b, 0, 0.0, &v), RT_ERR_INVALID_ARG);
    const int64_t s5[4] = {1, 1, 16, 15};
    rt_tensor *c = tu_own(rt_tensor_zeros(4, s5, RT_F32, RT_DEVICE_CPU, RT_MEM_DATA));
    CHECK_EQ_INT(rt_psnr(a, c, 0, 1.0, &v), RT_ERR_SHAPE);
    CHECK_EQ_INT(rt_ssim(a, NULL, 0, 1.0, &v), RT_ERR_INVALID_ARG);
}

int main(int argc, char **argv) {
    static const rt_test_case cases[] = {
        {"split_no_overlap", split_no_overlap}, {"sampler_patches", sampler_patches},
        {"sampler_skips_background", sampler_skips_background}, {"eval_slices", eval_slices},
        {"normalize_and_slice", normalize_and_slice}, {"downsample_matches_torch", downsample_matches_torch},
        {"metrics_match_skimage", metrics_match_skimage}, {"metrics_edges", metrics_edges}};
    return rt_test_main(argc, argv, cases, (int)(sizeof cases / sizeof cases[0]));
}
