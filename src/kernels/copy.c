/* kernels/copy.h: the copies that were inline in ops/pad.c and ops/shape.c. */
#include "kernels/copy.h"

#include <stdbool.h>
#include <string.h>

#include "kernels/layout.h"

void rt_kernel_pad_copy(int nd, const int64_t *sshape, const float *src, const int64_t *dshape,
                        const int64_t *before, float value, float *dst) {
    if (nd < 1 || nd > 5 || !sshape || !src || !dshape || !before || !dst) return;
    int64_t rows = 1, dn = dshape[nd - 1], sn = sshape[nd - 1];
    for (int d = 0; d < nd - 1; d++) rows *= dshape[d];
    /* the overlapping span of the last dim, in dst coordinates */
    int64_t lo = before[nd - 1] > 0 ? before[nd - 1] : 0;
    int64_t hi = sn + before[nd - 1] < dn ? sn + before[nd - 1] : dn;
    int64_t idx[5] = {0};
    for (int64_t r = 0; r < rows; r++) {
        float *out = dst + r * dn;
        int64_t soff = 0;
        bool inside = hi > lo;
        for (int d = 0; d < nd - 1 && inside; d++) {
            int64_t s = idx[d] - before[d];
            inside = s >= 0 && s < sshape[d];
            soff = soff * sshape[d] + s;
        }
        if (!inside) {
            for (int64_t i = 0; i < dn; i++) out[i] = value;
        } else {
            for (int64_t i = 0; i < lo; i++) out[i] = value;
            memcpy(out + lo, src + soff * sn + (lo - before[nd - 1]), (size_t)(hi - lo) * sizeof(float));
            for (int64_t i = hi; i < dn; i++) out[i] = value;
        }
        for (int d = nd - 2; d >= 0; d--) { /* next row index, odometer order */
            if (++idx[d] < dshape[d]) break;
            idx[d] = 0;
        }
    }
}

void rt_kernel_channel_slice_copy(int64_t batch, int64_t cw, int64_t inner, int64_t off, int64_t size, float *piece,
                                  float *whole, int to_whole) {
    if (!whole || (!piece && !to_whole) || batch <= 0 || size <= 0 || inner <= 0) return;
    const size_t bytes = (size_t)(size * inner) * sizeof(float);
    for (int64_t b = 0; b < batch; b++) {
        float *w = whole + (b * cw + off) * inner;
        if (piece) {
            float *p = piece + b * size * inner;
            if (to_whole) memcpy(w, p, bytes); else memcpy(p, w, bytes);
        } else {
            memset(w, 0, bytes);
        }
    }
}

void rt_kernel_channel_slice_copy_cl(int64_t batch, int64_t cw, int64_t inner, int64_t off, int64_t size,
                                     float *piece, float *whole, rt_layout whole_layout, int to_whole) {
    if (!whole || (!piece && !to_whole) || batch <= 0 || size <= 0 || inner <= 0 || off < 0 || off + size > cw)
        return;
    const int64_t B = rt_layout_block();
    if (whole_layout != RT_LAYOUT_PLAIN && whole_layout != RT_LAYOUT_CHANNELS_LAST &&
        !(whole_layout == RT_LAYOUT_BLOCKED && cw % B == 0))
        return;
    const int par = batch * inner * size >= 32768;
    for (int64_t n = 0; n < batch; n++) {
#pragma omp parallel for if (par) schedule(static)
        for (int64_t i = 0; i < inner; i++) {
            float *p = piece ? piece + (n * inner + i) * size : NULL;
            for (int64_t l = 0; l < size; l++) {
                const int64_t c = off + l;
                int64_t w = whole_layout == RT_LAYOUT_PLAIN     ? (n * cw + c) * inner + i
                            : whole_layout == RT_LAYOUT_BLOCKED ? ((n * (cw / B) + c / B) * inner + i) * B + c % B
                                                                : (n * inner + i) * cw + c;
                if (!to_whole) p[l] = whole[w];
                else whole[w] = p ? p[l] : 0.0f;
            }
        }
    }
}
