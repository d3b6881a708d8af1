/* The 3-D segmentation pipeline: patch sampling (region, foreground
 * oversampling, flips), normalisation, sliding-window inference with
 * Gaussian weighting, the Dice + cross-entropy loss and the Dice metric
 * (data/patches.h, train/sliding_window.h, train/seg_loss.h). */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "autograd/engine.h"
#include "autograd/node.h"
#include "core/rng.h"
#include "core/tensor.h"
#include "data/patches.h"
#include "nn/modules.h"
#include "ops/ops3d.h"
#include "rt_test.h"
#include "train/seg_loss.h"
#include "train/seg_metric.h"
#include "train/sliding_window.h"

enum { VD = 20, VH = 24, VW = 28 };

/* image [2, VD, VH, VW]: channel 0 holds 1 + the voxel's flat index (so a
 * patch voxel names where it came from; 0 only where padded), channel 1 its
 * negative; labels: class 1 in a ball, class 2 in a small box, 0 elsewhere. */
static void make_volume(rt_tensor **img, rt_tensor **lab) {
    const int64_t is[4] = {2, VD, VH, VW}, ls[3] = {VD, VH, VW};
    *img = rt_tensor_create(4, is, RT_F32, RT_DEVICE_CPU, RT_MEM_DATA);
    *lab = rt_tensor_create(3, ls, RT_I32, RT_DEVICE_CPU, RT_MEM_DATA);
    float *x = rt_tensor_f32(*img);
    int32_t *y = rt_tensor_data(*lab);
    const int64_t n = VD * VH * VW;
    for (int64_t d = 0; d < VD; d++)
        for (int64_t h = 0; h < VH; h++)
            for (int64_t w = 0; w < VW; w++) {
                int64_t i = (d * VH + h) * VW + w;
                x[i] = (float)(i + 1);
                x[n + i] = -(float)(i + 1);
                double r2 = (d - 6.0) * (d - 6.0) + (h - 12.0) * (h - 12.0) + (w - 9.0) * (w - 9.0);
                y[i] = r2 < 9.0 ? 1 : (d >= 2 && d < 4 && h >= 18 && h < 21 && w >= 20 && w < 24) ? 2 : 0;
            }
}

/* Every voxel of each patch is the volume's voxel at start + offset (after
 * undoing the recorded flips) when that lies in the region, else 0 (image
 * and labels alike). */
static void test_sampler_region_and_flips(void) {
    rt_tensor *img, *lab;
    make_volume(&img, &lab);
    const int32_t *yv = rt_tensor_data(lab);
    for (int flip = 0; flip < 2; flip++) {
        rt_patch_options o = {.patch = {7, 9, 30}, .region_lo = {0, 2, 0}, .region_hi = {12, 24, 28},
                              .foreground_fraction = 0.5f, .flip = flip, .intensity = false, .seed = 11};
        rt_patch_sampler *s = NULL;
        CHECK_OK(rt_patch_sampler_create(img, lab, &o, &s));
        int flips_seen = 0, fg_seen = 0;
        for (int it = 0; it < 20; it++) {
            rt_tensor *x = NULL, *y = NULL;
            rt_patch_info info[4];
            CHECK_OK(rt_patch_sampler_next(s, 4, &x, &y, info));
            CHECK(x->ndim == 5 && x->shape[0] == 4 && x->shape[1] == 2 && x->shape[2] == 7 && x->shape[4] == 30);
            CHECK(y->ndim == 4 && y->shape[0] == 4 && y->shape[3] == 30);
            for (int b = 0; b < 4; b++) {
                const int64_t pn = 7 * 9 * 30, xs1[4] = {2, 7, 9, 30}, ys1[3] = {7, 9, 30};
                rt_tensor *px = rt_tensor_from_data(4, xs1, RT_F32, rt_tensor_f32(x) + b * 2 * pn, RT_MEM_DATA);
                rt_tensor *py = rt_tensor_from_data(3, ys1, RT_I32, (int32_t *)rt_tensor_data(y) + b * pn, RT_MEM_DATA);
                for (int a = 0; a < 3; a++)
                    if (info[b].flipped[a]) {
                        flips_seen++;
                        CHECK_OK(rt_volume_flip(px, a));
                        CHECK_OK(rt_volume_flip(py, a));
                    }
                fg_seen += info[b].foreground;
                const float *p = rt_tensor_f32(px);
                const int32_t *q = rt_tensor_data(py);
                bool has_fg = false;
                for (int64_t d = 0; d < 7; d++)
                    for (int64_t h = 0; h < 9; h++)
                        for (int64_t w = 0; w < 30; w++) {
                            int64_t vd = info[b].start[0] + d, vh = info[b].start[1] + h, vw = info[b].start[2] + w;
                            bool in = vd >= o.region_lo[0] && vd < o.region_hi[0] && vh >= o.region_lo[1] &&
                                      vh < o.region_hi[1] && vw >= o.region_lo[2] && vw < o.region_hi[2];
                            int64_t i = (vd * VH + vh) * VW + vw, k = (d * 9 + h) * 30 + w;
                            float want = in ? (float)(i + 1) : 0.0f;
                            CHECK(p[k] == want && p[pn + k] == -want);
                            CHECK(q[k] == (in ? yv[i] : 0));
                            has_fg |= q[k] > 0;
                        }
                if (info[b].foreground) CHECK(has_fg);
                rt_tensor_release(px);
                rt_tensor_release(py);
            }
            rt_tensor_release(x);
            rt_tensor_release(y);
        }
        CHECK(fg_seen > 0);
        CHECK(flip ? flips_seen > 0 : flips_seen == 0);
        rt_patch_sampler_destroy(s);
    }
    rt_tensor_release(img);
    rt_tensor_release(lab);
}

/* Each patch is foreground-centred with probability 1/3: over 6000 draws the
 * count lies within 5 binomial standard deviations of 2000. */
static void test_sampler_foreground_fraction(void) {
    rt_tensor *img, *lab;
    make_volume(&img, &lab);
    rt_patch_options o = {.patch = {4, 4, 4}, .region_lo = {0, 0, 0}, .region_hi = {VD, VH, VW},
                          .foreground_fraction = 1.0f / 3.0f, .flip = true, .intensity = true, .seed = 5};
    rt_patch_sampler *s = NULL;
    CHECK_OK(rt_patch_sampler_create(img, lab, &o, &s));
    CHECK(rt_patch_sampler_foreground_voxels(s) > 0);
    const int n = 6000, per = 50;
    int fg = 0;
    rt_patch_info info[50];
    for (int it = 0; it < n / per; it++) {
        rt_tensor *x = NULL, *y = NULL;
        CHECK_OK(rt_patch_sampler_next(s, per, &x, &y, info));
        for (int b = 0; b < per; b++) fg += info[b].foreground;
        rt_tensor_release(x);
        rt_tensor_release(y);
    }
    double mean = n / 3.0, sd = sqrt(n * (1.0 / 3.0) * (2.0 / 3.0));
    fprintf(stderr, "  foreground-centred patches: %d of %d (expected %.0f ± %.1f)\n", fg, n, mean, sd);
    CHECK(fabs(fg - mean) <= 5.0 * sd);
    rt_patch_sampler_destroy(s);
    /* a region without foreground: no patch can be foreground-centred */
    o.region_lo[0] = 12;
    o.foreground_fraction = 1.0f;
    CHECK_OK(rt_patch_sampler_create(img, lab, &o, &s));
    CHECK_EQ_INT(rt_patch_sampler_foreground_voxels(s), 0);
    rt_tensor *x = NULL, *y = NULL;
    CHECK_OK(rt_patch_sampler_next(s, 8, &x, &y, info));
    for (int b = 0; b < 8; b++) CHECK(!info[b].foreground);
    rt_tensor_release(x);
    rt_tensor_release(y);
    rt_patch_sampler_destroy(s);
    rt_tensor_release(img);
    rt_tensor_release(lab);
}

/* The axis permutation: with the same seed, a transposing sampler draws
 * the same starts and flips as one that does not, and each of its patches
 * (image and labels) is the other's with the axes permuted as recorded;
 * over 60 patches all six orders occur. A patch that is not a cube is
 * refused. */
static void test_sampler_transpose(void) {
    rt_tensor *img, *lab;
    make_volume(&img, &lab);
    enum { P = 8, B = 6 };
    rt_patch_options o = {.patch = {P, P, P}, .region_lo = {0, 0, 0}, .region_hi = {VD, VH, VW},
                          .foreground_fraction = 0.5f, .flip = true, .intensity = false, .seed = 3};
    rt_patch_sampler *plain = NULL, *perm = NULL;
    CHECK_OK(rt_patch_sampler_create(img, lab, &o, &plain));
    o.transpose = true;
    CHECK_OK(rt_patch_sampler_create(img, lab, &o, &perm));
    bool seen[3][3][3] = {{{false}}};
    int64_t mismatches = 0;
    for (int it = 0; it < 10 && plain && perm; it++) {
        rt_tensor *xa = NULL, *ya = NULL, *xb = NULL, *yb = NULL;
        rt_patch_info ia[B], ib[B];
        CHECK_OK(rt_patch_sampler_next(plain, B, &xa, &ya, ia));
        CHECK_OK(rt_patch_sampler_next(perm, B, &xb, &yb, ib));
        const int64_t pn = P * P * P;
        for (int b = 0; b < B && xa && xb; b++) {
            for (int a = 0; a < 3; a++) {
                CHECK(ia[b].start[a] == ib[b].start[a] && ia[b].flipped[a] == ib[b].flipped[a]);
                CHECK_EQ_INT(ia[b].axes[a], a);
            }
            const int *ax = ib[b].axes;
            seen[ax[0]][ax[1]][ax[2]] = true;
            int64_t c[3], in[3];
            for (c[0] = 0; c[0] < P; c[0]++)
                for (c[1] = 0; c[1] < P; c[1]++)
                    for (c[2] = 0; c[2] < P; c[2]++) {
                        for (int a = 0; a < 3; a++) in[ax[a]] = c[a];
                        int64_t kb = (c[0] * P + c[1]) * P + c[2], ka = (in[0] * P + in[1]) * P + in[2];
                        for (int ch = 0; ch < 2; ch++)
                            mismatches += rt_tensor_f32(xb)[(b * 2 + ch) * pn + kb] !=
                                          rt_tensor_f32(xa)[(b * 2 + ch) * pn + ka];
                        mismatches += ((int32_t *)rt_tensor_data(yb))[b * pn + kb] !=
                                      ((int32_t *)rt_tensor_data(ya))[b * pn + ka];
                    }
        }
        rt_tensor_release(xa);
        rt_tensor_release(ya);
        rt_tensor_release(xb);
        rt_tensor_release(yb);
    }
    CHECK_EQ_INT(mismatches, 0);
    int orders = 0;
    for (int i = 0; i < 27; i++) orders += seen[i / 9][(i / 3) % 3][i % 3];
    CHECK_EQ_INT(orders, 6);
    rt_patch_sampler_destroy(plain);
    rt_patch_sampler_destroy(perm);
    o.patch[2] = P + 1;
    rt_patch_sampler *s = NULL;
    CHECK_EQ_INT(rt_patch_sampler_create(img, lab, &o, &s), RT_ERR_INVALID_ARG);
    CHECK(strstr(rt_error_last(), "cubic") != NULL && s == NULL);
    rt_tensor_release(img);
    rt_tensor_release(lab);
}

static void test_sampler_errors(void) {
    rt_tensor *img, *lab;
    make_volume(&img, &lab);
    rt_patch_options o = {.patch = {4, 4, 4}, .region_lo = {0, 0, 0}, .region_hi = {VD, VH, VW + 1},
                          .foreground_fraction = 0.33f};
    rt_patch_sampler *s = (rt_patch_sampler *)&o;
    CHECK(rt_patch_sampler_create(img, lab, &o, &s) == RT_ERR_INVALID_ARG && s == NULL);
    const int64_t ls[3] = {VD, VH, VW - 1};
    rt_tensor *small = rt_tensor_zeros(3, ls, RT_I32, RT_DEVICE_CPU, RT_MEM_DATA);
    o.region_hi[2] = VW;
    CHECK(rt_patch_sampler_create(img, small, &o, &s) == RT_ERR_SHAPE);
    CHECK(strstr(rt_error_last(), "differ") != NULL);
    rt_tensor_release(small);
    rt_tensor_release(img);
    rt_tensor_release(lab);
}

/* Flips are involutions and move element (d, h, w) to (D−1−d, h, w) etc. */
static void test_flip(void) {
    const int64_t s[4] = {2, 3, 4, 5};
    rt_tensor *t = rt_tensor_create(4, s, RT_F32, RT_DEVICE_CPU, RT_MEM_DATA);
    float *p = rt_tensor_f32(t);
    for (int i = 0; i < 120; i++) p[i] = (float)i;
    for (int a = 0; a < 3; a++) {
        CHECK_OK(rt_volume_flip(t, a));
        /* element (c=1, d=0, h=1, w=2) lands at the mirrored index on axis a */
        int64_t idx[4] = {1, 0, 1, 2};
        idx[1 + a] = s[1 + a] - 1 - idx[1 + a];
        CHECK(p[((idx[0] * 3 + idx[1]) * 4 + idx[2]) * 5 + idx[3]] == (float)(((1 * 3 + 0) * 4 + 1) * 5 + 2));
        CHECK_OK(rt_volume_flip(t, a));
        for (int i = 0; i < 120; i++) CHECK(p[i] == (float)i);
    }
    CHECK(rt_volume_flip(t, 3) == RT_ERR_INVALID_ARG);
    rt_tensor_release(t);
}

static void test_crop_pads_with_zero(void) {
    const int64_t s[3] = {3, 3, 3};
    rt_tensor *t = rt_tensor_create(3, s, RT_I32, RT_DEVICE_CPU, RT_MEM_DATA);
    int32_t *p = rt_tensor_data(t);
    for (int i = 0; i < 27; i++) p[i] = i + 1;
    const int64_t lo[3] = {-1, 1, 2}, hi[3] = {2, 3, 4};
    rt_tensor *c = NULL;
    CHECK_OK(rt_volume_crop(t, lo, hi, &c));
    CHECK(c->shape[0] == 3 && c->shape[1] == 2 && c->shape[2] == 2);
    const int32_t *q = rt_tensor_data(c);
    for (int d = 0; d < 3; d++)
        for (int h = 0; h < 2; h++)
            for (int w = 0; w < 2; w++) {
                int vd = d - 1, vh = h + 1, vw = w + 2;
                int want = vd >= 0 && vw < 3 ? (vd * 3 + vh) * 3 + vw + 1 : 0;
                CHECK_EQ_INT(q[(d * 2 + h) * 2 + w], want);
            }
    rt_tensor_release(c);
    rt_tensor_release(t);
}

static void test_zscore(void) {
    const int64_t s[4] = {1, 2, 3, 4};
    rt_tensor *t = rt_tensor_create(4, s, RT_F32, RT_DEVICE_CPU, RT_MEM_DATA);
    float *p = rt_tensor_f32(t);
    for (int i = 0; i < 24; i++) p[i] = i % 3 == 0 ? 0.0f : (float)i;
    double mean, sd;
    CHECK_OK(rt_volume_zscore(t, true, &mean, &sd));
    double s1 = 0, s2 = 0, n = 0;
    for (int i = 0; i < 24; i++)
        if (i % 3) s1 += i, s2 += (double)i * i, n++;
    double m = s1 / n, v = s2 / n - m * m;
    CHECK_NEAR(mean, m, 1e-12);
    CHECK_NEAR(sd, sqrt(v), 1e-12);
    for (int i = 0; i < 24; i++) CHECK_NEAR(p[i], i % 3 == 0 ? 0.0 : (i - m) / sqrt(v), 1e-6);
    for (int i = 0; i < 24; i++) p[i] = (float)i;
    CHECK_OK(rt_volume_zscore(t, false, &mean, &sd));
    s1 = s2 = 0;
    for (int i = 0; i < 24; i++) s1 += p[i], s2 += (double)p[i] * p[i];
    CHECK_NEAR(s1 / 24, 0.0, 1e-6);
    CHECK_NEAR(s2 / 24, 1.0, 1e-5);
    rt_tensor_release(t);
}

/* Same generator state, same augmentation; the gamma keeps mean and std. */
static void test_intensity_deterministic(void) {
    const int64_t s[4] = {2, 4, 4, 4};
    rt_tensor *a = rt_tensor_create(4, s, RT_F32, RT_DEVICE_CPU, RT_MEM_DATA);
    rt_generator_uniform(&(rt_generator){.seed = 3}, 128, rt_tensor_f32(a));
    rt_tensor *b = rt_tensor_to(a, RT_F32, RT_MEM_DATA);
    rt_generator g1 = {.seed = 9}, g2 = {.seed = 9};
    for (int k = 0; k < 20; k++) {
        CHECK_OK(rt_volume_intensity_augment(a, &g1));
        CHECK_OK(rt_volume_intensity_augment(b, &g2));
    }
    CHECK(memcmp(rt_tensor_f32(a), rt_tensor_f32(b), 128 * sizeof(float)) == 0);
    CHECK(g1.offset == g2.offset && g1.offset == 20 * 4);
    rt_tensor_release(a);
    rt_tensor_release(b);
}

static void test_window_starts(void) {
    int64_t st[16], n;
    CHECK_OK(rt_sliding_window_starts(10, 4, 0.5f, st, 16, &n));
    CHECK_EQ_INT(n, 4);
    CHECK(st[0] == 0 && st[1] == 2 && st[2] == 4 && st[3] == 6);
    CHECK_OK(rt_sliding_window_starts(11, 4, 0.5f, st, 16, &n)); /* ⌈7/2⌉ + 1 = 5 windows over 0..7 */
    CHECK_EQ_INT(n, 5);
    CHECK(st[0] == 0 && st[4] == 7 && st[2] == 4);
    CHECK_OK(rt_sliding_window_starts(3, 4, 0.5f, st, 16, &n));
    CHECK(n == 1 && st[0] == 0);
    CHECK_OK(rt_sliding_window_starts(8, 4, 0.0f, st, 16, &n));
    CHECK(n == 2 && st[1] == 4);
    CHECK(rt_sliding_window_starts(8, 4, 1.0f, st, 16, &n) == RT_ERR_INVALID_ARG);
}

static void test_gaussian_map(void) {
    const int64_t p[3] = {5, 6, 16};
    rt_tensor *m = NULL;
    CHECK_OK(rt_gaussian_importance_map(p, 0.125f, &m));
    const float *w = rt_tensor_f32(m);
    double peak = 1.0;
    for (int a = 0; a < 3; a++) { /* the maximum of each axis factor: 1 for odd sizes, at ±1/2 for even */
        double sg = 0.125 * (double)p[a];
        peak *= p[a] % 2 ? 1.0 : exp(-0.25 / (2 * sg * sg));
    }
    float mx = 0, mn = 1;
    for (int64_t d = 0; d < p[0]; d++)
        for (int64_t h = 0; h < p[1]; h++)
            for (int64_t x = 0; x < p[2]; x++) {
                double e = 0;
                const int64_t i[3] = {d, h, x};
                for (int a = 0; a < 3; a++) {
                    double c = (p[a] - 1) / 2.0, sg = 0.125 * (double)p[a];
                    e += (i[a] - c) * (i[a] - c) / (2 * sg * sg);
                }
                double want = exp(-e) / peak;
                want = want > 1e-3 ? want : 1e-3;
                float got = w[(d * p[1] + h) * p[2] + x];
                CHECK_NEAR(got, want, 1e-6 * want);
                mx = got > mx ? got : mx;
                mn = got < mn ? got : mn;
            }
    CHECK_NEAR(mx, 1.0, 1e-6);
    CHECK(mn == 1e-3f); /* the corners are clamped */
    rt_tensor_release(m);
}

/* A 1×1×1 network's logits depend only on each voxel's own input, so the
 * weighted average of overlapping windows equals the whole volume's softmax. */
static void test_sliding_window_matches_full_volume(void) {
    rt_init_ctx ctx = rt_init_ctx_make(RT_DEVICE_CPU, 7);
    rt_module *net = NULL;
    CHECK_OK(rt_conv_create(&ctx, 3, 2, 3, 1, 1, 0, 1, true, RT_INIT_KAIMING_FAN_OUT, &net));
    rt_module_train(net, false);
    const int64_t s[4] = {2, 13, 17, 11};
    rt_tensor *img = rt_tensor_create(4, s, RT_F32, RT_DEVICE_CPU, RT_MEM_DATA);
    rt_generator_normal(&(rt_generator){.seed = 1}, rt_tensor_numel(img), 0.0f, 2.0f, rt_tensor_f32(img));
    rt_sliding_window_options o = rt_sliding_window_defaults();
    o.patch[0] = 6, o.patch[1] = 8, o.patch[2] = 16; /* W smaller than the window: padded */
    o.batch = 3;
    rt_tensor *probs = NULL, *labels = NULL;
    CHECK_OK(rt_sliding_window_predict(net, img, 3, &o, &probs, &labels));
    const int64_t s5[5] = {1, 2, 13, 17, 11};
    rt_tensor *x5 = rt_tensor_view(img, 5, s5), *logits = NULL, *ref = NULL;
    bool g = rt_grad_set_enabled(false);
    CHECK_OK(rt_module_forward(net, x5, &logits));
    CHECK_OK(rt_softmax_channels(logits, &ref));
    rt_grad_set_enabled(g);
    const int64_t V = 13 * 17 * 11;
    const float *p = rt_tensor_f32(probs), *r = rt_tensor_f32(ref);
    const int32_t *l = rt_tensor_data(labels);
    double worst = 0;
    for (int64_t v = 0; v < V; v++) {
        int best = 0;
        for (int c = 0; c < 3; c++) {
            double e = fabs((double)p[c * V + v] - r[c * V + v]);
            worst = e > worst ? e : worst;
            if (r[c * V + v] > r[best * V + v]) best = c;
        }
        CHECK_EQ_INT(l[v], best);
    }
    fprintf(stderr, "  sliding window vs whole volume: max |Δp| %.3g\n", worst);
    CHECK(worst <= 1e-6);
    rt_tensor_release(x5);
    rt_tensor_release(logits);
    rt_tensor_release(ref);
    rt_tensor_release(probs);
    rt_tensor_release(labels);
    rt_tensor_release(img);
    rt_module_destroy(net);
}

/* Test-time mirroring with one window covering the volume: the result is
 * the mean over the 8 flip combinations f of flip_f(softmax(net(flip_f(x))))
 * (the Gaussian weight of a voxel is the same in every term, so it
 * cancels), computed here by hand; a 3×3×3 convolution is not
 * flip-equivariant, so the mirrored and plain predictions differ. */
static void test_sliding_window_mirroring(void) {
    rt_init_ctx ctx = rt_init_ctx_make(RT_DEVICE_CPU, 9);
    rt_module *net = NULL;
    CHECK_OK(rt_conv_create(&ctx, 3, 2, 3, 3, 1, 1, 1, true, RT_INIT_KAIMING_FAN_OUT, &net));
    if (!net) return;
    rt_module_train(net, false);
    const int64_t s[4] = {2, 6, 7, 5}, s5[5] = {1, 2, 6, 7, 5}, V = 6 * 7 * 5;
    rt_tensor *img = rt_tensor_create(4, s, RT_F32, RT_DEVICE_CPU, RT_MEM_DATA);
    rt_generator_normal(&(rt_generator){.seed = 4}, rt_tensor_numel(img), 0.0f, 1.0f, rt_tensor_f32(img));
    rt_sliding_window_options o = rt_sliding_window_defaults();
    o.patch[0] = 6, o.patch[1] = 7, o.patch[2] = 5;
    rt_tensor *plain = NULL, *mirrored = NULL;
    CHECK_OK(rt_sliding_window_predict(net, img, 3, &o, &plain, NULL));
    o.mirror = true;
    CHECK_OK(rt_sliding_window_predict(net, img, 3, &o, &mirrored, NULL));
    static float want[3 * 6 * 7 * 5];
    memset(want, 0, sizeof want);
    bool g = rt_grad_set_enabled(false);
    for (int f = 0; f < 8; f++) {
        rt_tensor *x = rt_tensor_to(img, RT_F32, RT_MEM_DATA), *x5 = NULL, *logits = NULL, *p = NULL, *pp = NULL;
        for (int a = 0; a < 3; a++)
            if (f & (1 << a)) CHECK_OK(rt_volume_flip(x, a));
        x5 = rt_tensor_view(x, 5, s5);
        CHECK_OK(rt_module_forward(net, x5, &logits));
        CHECK_OK(rt_softmax_channels(logits, &p));
        CHECK_OK(rt_to_layout(p, RT_LAYOUT_PLAIN, &pp));
        rt_tensor *back = rt_tensor_to(pp, RT_F32, RT_MEM_DATA);
        for (int a = 0; a < 3; a++)
            if (f & (1 << a)) CHECK_OK(rt_volume_flip(back, a));
        for (int64_t i = 0; i < 3 * V; i++) want[i] += rt_tensor_f32(back)[i] / 8.0f;
        rt_tensor *ts[] = {x, x5, logits, p, pp, back};
        for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) rt_tensor_release(ts[i]);
    }
    rt_grad_set_enabled(g);
    double worst = 0, moved = 0;
    for (int64_t i = 0; i < 3 * V && mirrored && plain; i++) {
        worst = fmax(worst, fabs((double)rt_tensor_f32(mirrored)[i] - want[i]));
        moved = fmax(moved, fabs((double)rt_tensor_f32(mirrored)[i] - rt_tensor_f32(plain)[i]));
    }
    fprintf(stderr, "  mirroring: max |mirrored - hand mean| %.3g, max |mirrored - plain| %.3g\n", worst, moved);
    CHECK(worst <= 1e-6);
    CHECK(moved > 1e-3);
    rt_tensor_release(plain);
    rt_tensor_release(mirrored);
    rt_tensor_release(img);
    rt_module_destroy(net);
}

static void test_dice_metric(void) {
    const int32_t pv[6] = {0, 1, 1, 2, 2, 0}, tv[6] = {0, 1, 2, 2, 2, 1};
    const int64_t s[2] = {2, 3};
    rt_tensor *p = rt_tensor_from_data(2, s, RT_I32, pv, RT_MEM_DATA), *t = rt_tensor_from_data(2, s, RT_I32, tv, RT_MEM_DATA);
    double d[4];
    CHECK_OK(rt_dice_per_class(p, t, 4, d));
    CHECK_NEAR(d[0], 2.0 / 3.0, 1e-15); /* |P| 2, |G| 1, both 1 */
    CHECK_NEAR(d[1], 0.5, 1e-15);       /* 2, 2, 1 */
    CHECK_NEAR(d[2], 0.8, 1e-15);       /* 2, 3, 2 */
    CHECK(isnan(d[3]));                 /* in neither map */
    CHECK(rt_dice_per_class(p, t, 0, d) == RT_ERR_INVALID_ARG);
    rt_tensor_release(p);
    rt_tensor_release(t);
}

/* The threshold sweep's Dice values by hand, the tie rule, and refusals. */
static void test_dice_threshold_sweep(void) {
    const float pv[6] = {0.1f, 0.4f, 0.6f, 0.9f, 0.95f, 0.2f};
    const int32_t tv[6] = {0, 1, 1, 1, 0, 2}; /* 2 counts as background */
    const int64_t s[2] = {2, 3};
    rt_tensor *p = rt_tensor_from_data(2, s, RT_F32, pv, RT_MEM_DATA), *t = rt_tensor_from_data(2, s, RT_I32, tv, RT_MEM_DATA);
    const float th[4] = {0.15f, 0.3f, 0.5f, 0.92f};
    double d[4];
    int best = -2;
    CHECK_OK(rt_dice_threshold_sweep(p, t, 4, th, d, &best));
    CHECK_NEAR(d[0], 2.0 * 3 / (5 + 3), 1e-15); /* > 0.15: 0.4 0.6 0.9 0.95 0.2, 3 of them foreground */
    CHECK_NEAR(d[1], 2.0 * 3 / (4 + 3), 1e-15); /* > 0.3: 0.4 0.6 0.9 0.95 */
    CHECK_NEAR(d[2], 2.0 * 2 / (3 + 3), 1e-15); /* > 0.5: 0.6 0.9 0.95 */
    CHECK_NEAR(d[3], 0.0, 1e-15);               /* > 0.92: 0.95, background */
    CHECK(best == 1);
    /* equal Dice at 0.35 and 0.3: the one nearer 0.5 wins, in either order */
    const float tie[2] = {0.3f, 0.35f}, tie_rev[2] = {0.35f, 0.3f};
    CHECK_OK(rt_dice_threshold_sweep(p, t, 2, tie, d, &best));
    CHECK(best == 1 && d[0] == d[1]);
    CHECK_OK(rt_dice_threshold_sweep(p, t, 2, tie_rev, d, &best));
    CHECK(best == 0);
    const float bad[1] = {1.0f};
    CHECK(rt_dice_threshold_sweep(p, t, 1, bad, d, &best) == RT_ERR_INVALID_ARG);
    CHECK(rt_dice_threshold_sweep(p, t, 0, th, d, &best) == RT_ERR_INVALID_ARG);
    CHECK(rt_dice_threshold_sweep(t, t, 1, th, d, &best) == RT_ERR_DTYPE);
    rt_tensor_release(p);
    rt_tensor_release(t);
}

/* The loss's value against a double-precision evaluation of its formula. */
static double dice_ce_reference(const float *x, const int32_t *t, int64_t N, int64_t K, int64_t S) {
    double ce = 0, I[8] = {0}, P[8] = {0}, G[8] = {0};
    for (int64_t n = 0; n < N; n++)
        for (int64_t s = 0; s < S; s++) {
            double mx = -1e30, z = 0;
            for (int64_t k = 0; k < K; k++) mx = fmax(mx, x[(n * K + k) * S + s]);
            for (int64_t k = 0; k < K; k++) z += exp(x[(n * K + k) * S + s] - mx);
            int32_t y = t[n * S + s];
            ce -= x[(n * K + y) * S + s] - mx - log(z);
            for (int64_t k = 0; k < K; k++) {
                double p = exp(x[(n * K + k) * S + s] - mx) / z, g = y == k;
                I[k] += p * g, P[k] += p, G[k] += g;
            }
        }
    double dice = 0;
    for (int64_t k = 1; k < K; k++) dice += (2 * I[k] + 1e-5) / (P[k] + G[k] + 1e-5);
    return ce / (double)(N * S) + 1.0 - dice / (double)(K - 1);
}

/* Gradient of the Dice + CE loss against central finite differences. */
static void test_dice_ce_gradient(void) {
    enum { N = 2, K = 3, D = 2, H = 3, W = 2, S = D * H * W };
    const int64_t xs[5] = {N, K, D, H, W}, ts[4] = {N, D, H, W};
    rt_tensor *x = rt_tensor_create(5, xs, RT_F32, RT_DEVICE_CPU, RT_MEM_DATA);
    rt_generator_normal(&(rt_generator){.seed = 4}, N * K * S, 0.0f, 1.0f, rt_tensor_f32(x));
    int32_t tv[N * S];
    for (int i = 0; i < N * S; i++) tv[i] = (i * 7 + 3) % K;
    rt_tensor *t = rt_tensor_from_data(4, ts, RT_I32, tv, RT_MEM_DATA);
    CHECK_OK(rt_tensor_set_requires_grad(x, true));
    rt_tensor *loss = NULL;
    CHECK_OK(rt_loss_dice_ce(x, t, NULL, &loss));
    CHECK_NEAR(rt_tensor_f32(loss)[0], dice_ce_reference(rt_tensor_f32(x), tv, N, K, S), 1e-5);
    CHECK_OK(rt_backward(loss, NULL, false));
    rt_tensor_release(loss);
    float *xv = rt_tensor_f32(x);
    const float *gv = rt_tensor_f32(x->grad);
    double worst = 0;
    for (int i = 0; i < N * K * S; i++) {
        const float keep = xv[i], eps = 1e-2f;
        xv[i] = keep + eps;
        double up = dice_ce_reference(xv, tv, N, K, S);
        xv[i] = keep - eps;
        double down = dice_ce_reference(xv, tv, N, K, S);
        xv[i] = keep;
        double num = (up - down) / (2.0 * eps), e = fabs(gv[i] - num);
        worst = e > worst ? e : worst;
        CHECK(e <= 1e-4 + 1e-3 * fabs(num));
    }
    fprintf(stderr, "  Dice+CE gradient vs central differences: max |Δ| %.3g\n", worst);
    rt_tensor_release(x);
    rt_tensor_release(t);
}

RT_TEST_MAIN(
    {"sampler_region_and_flips", test_sampler_region_and_flips},
    {"sampler_foreground_fraction", test_sampler_foreground_fraction},
    {"sampler_transpose", test_sampler_transpose}, {"sampler_errors", test_sampler_errors},
    {"flip", test_flip},
    {"crop_pads_with_zero", test_crop_pads_with_zero},
    {"zscore", test_zscore},
    {"intensity_deterministic", test_intensity_deterministic},
    {"window_starts", test_window_starts},
    {"gaussian_map", test_gaussian_map},
    {"sliding_window_matches_full_volume", test_sliding_window_matches_full_volume},
    {"sliding_window_mirroring", test_sliding_window_mirroring},
    {"dice_metric", test_dice_metric},
    {"dice_threshold_sweep", test_dice_threshold_sweep},
    {"dice_ce_gradient", test_dice_ce_gradient})
