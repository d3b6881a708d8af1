/* Pixel shuffle / unshuffle permutation; see pixel_shuffle.h. */
#include "kernels/pixel_shuffle.h"

#define PS_PAR_MIN 32768

void rt_kernel_pixel_shuffle(int64_t n, int64_t c, int64_t h, int64_t w, int64_t r, int inverse, const float *src,
                             float *dst) {
    if (!src || !dst || n < 1 || c < 1 || h < 1 || w < 1 || r < 1) return;
    const int64_t W = w * r, H = h * r;
    const int par = n * c * H * W >= PS_PAR_MIN;
    /* one task per (sample, high-res channel, sub-row i, low-res row y):
     * the high-res row y·r + i, read or written at stride r from column j */
#pragma omp parallel for collapse(4) if (par) schedule(static)
    for (int64_t b = 0; b < n; b++)
        for (int64_t k = 0; k < c; k++)
            for (int64_t i = 0; i < r; i++)
                for (int64_t y = 0; y < h; y++) {
                    const int64_t hi = ((b * c + k) * H + y * r + i) * W;
                    for (int64_t j = 0; j < r; j++) {
                        const int64_t lo = ((b * c * r * r + k * r * r + i * r + j) * h + y) * w;
                        if (!inverse)
                            for (int64_t x = 0; x < w; x++) dst[hi + x * r + j] = src[lo + x];
                        else
                            for (int64_t x = 0; x < w; x++) dst[lo + x] = src[hi + x * r + j];
                    }
                }
}
