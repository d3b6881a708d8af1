/* Bilinear / trilinear (and bicubic) resampling, align_corners=False; see upsample.h. */
#include "kernels/upsample.h"

#include <math.h>
#include <string.h>

#define UP_PAR_MIN 32768

/* Source neighbours and weights of output index o on one axis (PyTorch's
 * area_pixel_compute_scale / _source_index, float arithmetic as in ATen's
 * CPU kernel for float tensors). */
typedef struct up_tap {
    int64_t i0, i1;
    float l0, l1;
} up_tap;

static up_tap up_axis(int64_t in, int64_t out, double scale_factor, int64_t o) {
    if (in == out) return (up_tap){o, o, 1.0f, 0.0f}; /* PyTorch copies an unchanged axis */
    float scale = scale_factor > 0.0 ? (float)(1.0 / scale_factor) : (float)in / (float)out;
    float src = scale * ((float)o + 0.5f) - 0.5f;
    if (src < 0.0f) src = 0.0f;
    int64_t i0 = (int64_t)src;
    up_tap t;
    t.i0 = i0;
    t.i1 = i0 + (i0 < in - 1 ? 1 : 0);
    t.l1 = src - (float)i0;
    t.l0 = 1.0f - t.l1;
    return t;
}

/* The view as rank-3 spatial (a 2-D shape gets a depth of 1). */
static void up_dims(const rt_upsample_shape *s, int64_t in[3], int64_t out[3], double sc[3]) {
    int off = 3 - s->nsp;
    for (int i = 0; i < 3; i++) {
        in[i] = i < off ? 1 : s->in[i - off];
        out[i] = i < off ? 1 : s->out[i - off];
        sc[i] = i < off ? 1.0 : s->scale[i - off];
    }
}

void rt_kernel_upsample_linear_forward(const rt_upsample_shape *s, const float *x, float *y) {
    if (!s || !x || !y || (s->nsp != 2 && s->nsp != 3)) return; /* NULL: a no-op */
    int64_t in[3], out[3];
    double sc[3];
    up_dims(s, in, out, sc);
    const int64_t L = s->layout == RT_LAYOUT_BLOCKED ? rt_layout_block() : 1, P = s->n * s->c / L;
    const int64_t Si = in[0] * in[1] * in[2], So = out[0] * out[1] * out[2];
    const int par = P * So * L >= UP_PAR_MIN;
#pragma omp parallel for collapse(2) if (par) schedule(static)
    for (int64_t p = 0; p < P; p++)
        for (int64_t od = 0; od < out[0]; od++) {
            const float *xp = x + p * Si * L;
            up_tap td = up_axis(in[0], out[0], sc[0], od);
            for (int64_t oh = 0; oh < out[1]; oh++) {
                up_tap th = up_axis(in[1], out[1], sc[1], oh);
                const float *r00 = xp + (td.i0 * in[1] + th.i0) * in[2] * L;
                const float *r01 = xp + (td.i0 * in[1] + th.i1) * in[2] * L;
                const float *r10 = xp + (td.i1 * in[1] + th.i0) * in[2] * L;
                const float *r11 = xp + (td.i1 * in[1] + th.i1) * in[2] * L;
                const float w00 = td.l0 * th.l0, w01 = td.l0 * th.l1, w10 = td.l1 * th.l0, w11 = td.l1 * th.l1;
                float *yr = y + ((p * out[0] + od) * out[1] + oh) * out[2] * L;
                for (int64_t ow = 0; ow < out[2]; ow++) {
                    up_tap tw = up_axis(in[2], out[2], sc[2], ow);
                    const int64_t a = tw.i0 * L, b = tw.i1 * L;
#pragma omp simd
                    for (int64_t l = 0; l < L; l++)
                        yr[ow * L + l] = w00 * (tw.l0 * r00[a + l] + tw.l1 * r00[b + l]) +
                                         w01 * (tw.l0 * r01[a + l] + tw.l1 * r01[b + l]) +
                                         w10 * (tw.l0 * r10[a + l] + tw.l1 * r10[b + l]) +
                                         w11 * (tw.l0 * r11[a + l] + tw.l1 * r11[b + l]);
                }
            }
        }
}

void rt_kernel_upsample_linear_backward(const rt_upsample_shape *s, const float *dy, float *dx) {
    if (!s || !dy || !dx || (s->nsp != 2 && s->nsp != 3)) return;
    int64_t in[3], out[3];
    double sc[3];
    up_dims(s, in, out, sc);
    const int64_t L = s->layout == RT_LAYOUT_BLOCKED ? rt_layout_block() : 1, P = s->n * s->c / L;
    const int64_t Si = in[0] * in[1] * in[2], So = out[0] * out[1] * out[2];
    const int par = P * So * L >= UP_PAR_MIN;
    /* one plane per task: the scatter of a plane touches only that plane */
#pragma omp parallel for if (par) schedule(static)
    for (int64_t p = 0; p < P; p++) {
        float *xp = dx + p * Si * L;
        memset(xp, 0, sizeof(float) * (size_t)(Si * L));
        for (int64_t od = 0; od < out[0]; od++) {
            up_tap td = up_axis(in[0], out[0], sc[0], od);
            for (int64_t oh = 0; oh < out[1]; oh++) {
                up_tap th = up_axis(in[1], out[1], sc[1], oh);
                float *r00 = xp + (td.i0 * in[1] + th.i0) * in[2] * L;
                float *r01 = xp + (td.i0 * in[1] + th.i1) * in[2] * L;
                float *r10 = xp + (td.i1 * in[1] + th.i0) * in[2] * L;
                float *r11 = xp + (td.i1 * in[1] + th.i1) * in[2] * L;
                const float w00 = td.l0 * th.l0, w01 = td.l0 * th.l1, w10 = td.l1 * th.l0, w11 = td.l1 * th.l1;
                const float *gr = dy + ((p * out[0] + od) * out[1] + oh) * out[2] * L;
                for (int64_t ow = 0; ow < out[2]; ow++) {
                    up_tap tw = up_axis(in[2], out[2], sc[2], ow);
                    const int64_t a = tw.i0 * L, b = tw.i1 * L;
                    /* sequential in l: r00 and r01 (etc.) may be the same row */
                    for (int64_t l = 0; l < L; l++) {
                        const float g = gr[ow * L + l], ga = tw.l0 * g, gb = tw.l1 * g;
                        r00[a + l] += w00 * ga;
                        r00[b + l] += w00 * gb;
                        r01[a + l] += w01 * ga;
                        r01[b + l] += w01 * gb;
                        r10[a + l] += w10 * ga;
                        r10[b + l] += w10 * gb;
                        r11[a + l] += w11 * ga;
                        r11[b + l] += w11 * gb;
                    }
                }
            }
        }
    }
}

/* ------------------------------------------------------------ bicubic */

#define CUBIC_A (-0.75f)

/* The four source indices (clamped to the border) and weights of output
 * index o on one axis; see upsample.h. */
typedef struct cubic_tap {
    int64_t i[4];
    float w[4];
} cubic_tap;

static float cubic_near(float d) { return ((CUBIC_A + 2.0f) * d - (CUBIC_A + 3.0f)) * d * d + 1.0f; }
static float cubic_far(float d) { return ((CUBIC_A * d - 5.0f * CUBIC_A) * d + 8.0f * CUBIC_A) * d - 4.0f * CUBIC_A; }

static cubic_tap cubic_axis(int64_t in, int64_t out, double scale_factor, int64_t o) {
    float scale = scale_factor > 0.0 ? (float)(1.0 / scale_factor) : (float)in / (float)out;
    float src = scale * ((float)o + 0.5f) - 0.5f;
    int64_t i0 = (int64_t)floorf(src);
    if (i0 > in - 1) i0 = in - 1;
    float t = src - (float)i0;
    t = t < 0.0f ? 0.0f : t > 1.0f ? 1.0f : t;
    cubic_tap c;
    c.w[0] = cubic_far(t + 1.0f);
    c.w[1] = cubic_near(t);
    c.w[2] = cubic_near(1.0f - t);
    c.w[3] = cubic_far(2.0f - t);
    for (int k = 0; k < 4; k++) {
        int64_t i = i0 - 1 + k;
        c.i[k] = i < 0 ? 0 : i > in - 1 ? in - 1 : i;
    }
    return c;
}

void rt_kernel_upsample_bicubic_forward(const rt_upsample_shape *s, const float *x, float *y) {
    if (!s || !x || !y || s->nsp != 2) return;
    const int64_t L = s->layout == RT_LAYOUT_BLOCKED ? rt_layout_block() : 1, P = s->n * s->c / L;
    const int64_t ih = s->in[0], iw = s->in[1], oh = s->out[0], ow = s->out[1];
    const int par = P * oh * ow * L >= UP_PAR_MIN;
#pragma omp parallel for collapse(2) if (par) schedule(static)
    for (int64_t p = 0; p < P; p++)
        for (int64_t v = 0; v < oh; v++) {
            const float *xp = x + p * ih * iw * L;
            const cubic_tap th = cubic_axis(ih, oh, s->scale[0], v);
            float *yr = y + (p * oh + v) * ow * L;
            for (int64_t u = 0; u < ow; u++) {
                const cubic_tap tw = cubic_axis(iw, ow, s->scale[1], u);
                for (int64_t l = 0; l < L; l++) {
                    float acc = 0.0f;
                    for (int a = 0; a < 4; a++) {
                        const float *row = xp + th.i[a] * iw * L + l;
                        float r = 0.0f;
                        for (int b = 0; b < 4; b++) r += tw.w[b] * row[tw.i[b] * L];
                        acc += th.w[a] * r;
                    }
                    yr[u * L + l] = acc;
                }
            }
        }
}

void rt_kernel_upsample_bicubic_backward(const rt_upsample_shape *s, const float *dy, float *dx) {
    if (!s || !dy || !dx || s->nsp != 2) return;
    const int64_t L = s->layout == RT_LAYOUT_BLOCKED ? rt_layout_block() : 1, P = s->n * s->c / L;
    const int64_t ih = s->in[0], iw = s->in[1], oh = s->out[0], ow = s->out[1];
    const int par = P * oh * ow * L >= UP_PAR_MIN;
    /* one plane per task: the scatter of a plane touches only that plane */
#pragma omp parallel for if (par) schedule(static)
    for (int64_t p = 0; p < P; p++) {
        float *xp = dx + p * ih * iw * L;
        memset(xp, 0, sizeof(float) * (size_t)(ih * iw * L));
        for (int64_t v = 0; v < oh; v++) {
            const cubic_tap th = cubic_axis(ih, oh, s->scale[0], v);
            const float *gr = dy + (p * oh + v) * ow * L;
            for (int64_t u = 0; u < ow; u++) {
                const cubic_tap tw = cubic_axis(iw, ow, s->scale[1], u);
                for (int64_t l = 0; l < L; l++) {
                    const float g = gr[u * L + l];
                    for (int a = 0; a < 4; a++) {
                        float *row = xp + th.i[a] * iw * L + l;
                        const float ga = th.w[a] * g;
                        for (int b = 0; b < 4; b++) row[tw.i[b] * L] += tw.w[b] * ga;
                    }
                }
            }
        }
    }
}
