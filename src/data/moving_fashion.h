/* Moving Fashion-MNIST: sequences of frames in which Fashion-MNIST items move
 * and bounce off the borders, generated from a seed, as Moving MNIST was
 * generated from MNIST (N. Srivastava, E. Mansimov, R. Salakhutdinov,
 * "Unsupervised Learning of Video Representations using LSTMs", ICML 2015,
 * section 3: two 28x28 digits in a 64x64 frame, each starting at a random
 * position with a random direction and a fixed speed, bouncing off the
 * edges, the digits combined by taking the maximum).
 *
 * Choices (documented, as the paper leaves them open):
 *   - each item's top-left corner lives in [0, size-28]^2 (the item never
 *     leaves the frame), starting uniformly there;
 *   - direction uniform in [0, 2π), speed `speed` pixels per frame (default
 *     3.6 = 0.1 of the 36-pixel range, the step of the original generator);
 *   - a bounce reflects the position at the border (p < 0 → -p, p > L →
 *     2L - p) and flips that velocity component, so no motion is lost;
 *   - positions are real; an item is drawn at the rounded position;
 *   - items combine by the per-pixel maximum; pixels are value / 255 in
 *     [0, 1];
 *   - sequence `index` of `seed` draws its 4·items uniforms (image index,
 *     x, y, angle per item) from Philox block offset index·items of `seed`
 *     (core/rng.h), so any sequence is generated alone, in any order, on
 *     any thread, identically.
 * Training sequences take their items from the training images, evaluation
 * sequences from the test images (the caller passes the split). */
#ifndef RT_DATA_MOVING_FASHION_H
#define RT_DATA_MOVING_FASHION_H

#include <stdint.h>

#include "../core/status.h"
#include "dataset.h"

typedef struct rt_moving_fashion_opts {
    int frames;  /* T >= 1 */
    int size;    /* frame side in pixels (64), >= the item side */
    int items;   /* items per sequence (2), 1..8 */
    float speed; /* pixels per frame (3.6), >= 0 and finite */
} rt_moving_fashion_opts;

/* Srivastava et al.'s setting: frames T, 64x64, 2 items, 3.6 px/frame. */
rt_moving_fashion_opts rt_moving_fashion_defaults(int frames);

/* Writes sequence `index` of stream `seed` into out: frames × size × size
 * f32 in [0, 1], frame-major, rows top to bottom. images: n_images u8
 * images of img × img pixels back to back (a Fashion-MNIST split as
 * rt_dataset_arrays_get exposes it). Also fills, when not NULL, pos
 * (frames × items × 2 ints: the drawn top-left corner, row then column)
 * for tests. RT_ERR_INVALID_ARG for NULL images/out/opts, n_images < 1,
 * img < 1, or options outside the ranges above (the message names the
 * field). */
rt_status rt_moving_fashion_sequence(const uint8_t *images, int64_t n_images, int img,
                                     const rt_moving_fashion_opts *opts, uint64_t seed, uint64_t index,
                                     float *out, int *pos);

/* A batch for a recurrent model: sequences first..first+batch-1 of `seed`
 * from dataset ds (u8 samples of shape (1, img, img), Fashion-MNIST from
 * rt_mnist_load) into out, laid out time-major (frames, batch, 1, size,
 * size), so that frame t of the batch is one contiguous NCHW block.
 * RT_ERR_INVALID_ARG for NULLs, batch < 1, or a dataset whose samples are
 * not u8 (1, H, H) exposed as arrays; errors of rt_moving_fashion_sequence;
 * RT_ERR_OOM. */
rt_status rt_moving_fashion_batch(const rt_dataset *ds, const rt_moving_fashion_opts *opts, uint64_t seed,
                                  uint64_t first, int batch, float *out);

#endif
