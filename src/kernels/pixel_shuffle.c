/* Pixel shuffle / unshuffle permutation; see pixel_shuffle.h. */
#include "kernels/pixel_shuffle.h"

#define PS_PAR_MIN 32768

void rt_kernel_pixel_shuffle(int64_t n, int64_t c, int64_t h, int64_t w, int64_t r, int64_t block, int inverse,
                             const float *src, float *dst) {
    if (!src || !dst || n < 1 || c < 1 || h < 1 || w < 1 || r < 1 || block < 1 || c % block) return;
    const int64_t L = block, W = w * r, H = h * r, clo = c * r * r;
    const int par = n * c * H * W >= PS_PAR_MIN;
    /* one task per (sample, high-res channel k, sub-row i, low-res row y):
     * the high-res row y·r + i, read or written at stride r·L from column
     * j; element (b, ch, row, col) of a (C, rows, cols) tensor sits at
     * ((b·C/L + ch/L)·rows + row)·cols·L + col·L + ch % L (L = 1: plain) */
#pragma omp parallel for collapse(4) if (par) schedule(static)
    for (int64_t b = 0; b < n; b++)
        for (int64_t k = 0; k < c; k++)
            for (int64_t i = 0; i < r; i++)
                for (int64_t y = 0; y < h; y++) {
                    const int64_t hi = ((b * c + k - k % L) * H + (y * r + i) * L) * W + k % L;
                    for (int64_t j = 0; j < r; j++) {
                        const int64_t q = k * r * r + i * r + j; /* the low-res channel */
                        const int64_t lo = ((b * clo + q - q % L) * h + y * L) * w + q % L;
                        if (!inverse)
                            for (int64_t x = 0; x < w; x++) dst[hi + (x * r + j) * L] = src[lo + x * L];
                        else
                            for (int64_t x = 0; x < w; x++) dst[lo + x * L] = src[hi + (x * r + j) * L];
                    }
                }
}
