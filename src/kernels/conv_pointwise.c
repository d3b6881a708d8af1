/* Pointwise convolutions as matrix products; see conv_pointwise.h. */
#include "kernels/conv_pointwise.h"

#include <string.h>

#include "kernels/blas.h"

static int64_t pw_spatial(const rt_conv_shape *s) {
    int64_t S = 1;
    for (int i = 0; i < s->nsp; i++) S *= s->in[i];
    return S;
}

bool rt_conv_pointwise_applies(const rt_conv_shape *s) {
    if (s->groups != 1 || s->compute_bf16 || s->wei_layout != RT_LAYOUT_PLAIN) return false;
    if (s->src_layout != RT_LAYOUT_PLAIN || s->dst_layout != RT_LAYOUT_PLAIN) return false;
    for (int i = 0; i < s->nsp; i++)
        if (s->k[i] != 1 || s->stride[i] != 1 || s->pad[i] != 0) return false;
    return true;
}

void rt_conv_pointwise_forward(const rt_conv_shape *s, const float *x, const float *w, const float *b, float *y) {
    int64_t S = pw_spatial(s), ci = s->c_in, co = s->c_out;
    for (int64_t n = 0; n < s->n; n++) {
        float *yn = y + n * co * S;
        if (b)
            for (int64_t c = 0; c < co; c++)
                for (int64_t i = 0; i < S; i++) yn[c * S + i] = b[c];
        rt_kernel_sgemm(0, 0, co, S, ci, 1.0f, w, ci, x + n * ci * S, S, b ? 1.0f : 0.0f, yn, S);
    }
}

void rt_conv_pointwise_backward_data(const rt_conv_shape *s, const float *w, const float *dy, float *dx) {
    int64_t S = pw_spatial(s), ci = s->c_in, co = s->c_out;
    for (int64_t n = 0; n < s->n; n++)
        rt_kernel_sgemm(1, 0, ci, S, co, 1.0f, w, ci, dy + n * co * S, S, 0.0f, dx + n * ci * S, S);
}

void rt_conv_pointwise_backward_weights(const rt_conv_shape *s, const float *x, const float *dy, float *dw,
                                        float *db) {
    int64_t S = pw_spatial(s), ci = s->c_in, co = s->c_out;
    if (db) memset(db, 0, sizeof(float) * (size_t)co);
    for (int64_t n = 0; n < s->n; n++) {
        const float *dyn = dy + n * co * S;
        rt_kernel_sgemm(0, 1, co, ci, S, 1.0f, dyn, S, x + n * ci * S, S, n ? 1.0f : 0.0f, dw, ci);
        if (db)
            for (int64_t c = 0; c < co; c++) {
                double acc = 0.0;
                for (int64_t i = 0; i < S; i++) acc += dyn[c * S + i];
                db[c] += (float)acc;
            }
    }
}
