/* Counter-based random numbers: Philox4x32-10 (Salmon et al., "Parallel
 * random numbers: as easy as 1, 2, 3", SC 2011), the generator PyTorch uses
 * on CUDA. A draw is a pure function of (seed, offset), so a recompute can
 * replay exactly the numbers of the original forward (dropout masks) from a
 * saved offset, and skipping ahead costs nothing. */
#ifndef RT_CORE_RNG_H
#define RT_CORE_RNG_H

#include <stdint.h>

/* One Philox4x32-10 block: 4 words from the 128-bit counter ctr and 64-bit
 * key. No-op when any pointer is NULL. */
void rt_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]);

/* A stream: `offset` counts 128-bit blocks already consumed. */
typedef struct rt_generator {
    uint64_t seed;
    uint64_t offset;
} rt_generator;

/* n uniform floats in [0, 1) for block offset `offset` of `seed` (pure function;
 * element i comes from block offset + i/4, word i%4). Uses ceil(n/4) blocks.
 * No-op when out is NULL or n <= 0. */
void rt_philox_uniform(uint64_t seed, uint64_t offset, int64_t n, float *out);
/* Blocks a draw of n numbers consumes: ceil(n/4) (0 for n <= 0). */
static inline uint64_t rt_philox_blocks(int64_t n) { return n > 0 ? (uint64_t)((n + 3) / 4) : 0; }

/* Draws n uniforms from g and advances g->offset by rt_philox_blocks(n).
 * No-op (g untouched) when g or out is NULL or n <= 0; likewise below. */
void rt_generator_uniform(rt_generator *g, int64_t n, float *out);
/* n normals N(mean, std) (Box-Muller on pairs of uniforms); advances g. */
void rt_generator_normal(rt_generator *g, int64_t n, float mean, float std, float *out);

/* This thread's default generator (torch.manual_seed / torch.default_generator).
 * Thread-local by design; seed 0 until rt_manual_seed is called. Never NULL. */
rt_generator *rt_default_generator(void);
void rt_manual_seed(uint64_t seed);

#endif
