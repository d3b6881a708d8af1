/* Internal to memory/: the pieces of a reversible block that its module and
 * the sequence's backward share. Not a public header. */
#ifndef RT_MEMORY_REVERSIBLE_IMPL_H
#define RT_MEMORY_REVERSIBLE_IMPL_H

#include "autograd/recompute.h"
#include "memory/reversible.h"

/* Where the default generator stood before F (off_f) and before G (off_g)
 * in one forward of a block. */
typedef struct rt_rev_rng {
    uint64_t seed, off_f, off_g;
} rt_rev_rng;

/* x's halves along channels: x1 = ⌊C/2⌋, x2 = ⌈C/2⌉ channels (new refs).
 * RT_ERR_SHAPE naming block b when x is not (N, C, ...) with C >= 2. */
rt_status rt_rev_halves(const rt_rev_block *b, rt_tensor *x, rt_tensor **h1, rt_tensor **h2);
/* cat(a, b) along channels. */
rt_status rt_rev_join(rt_tensor *a, rt_tensor *b, rt_tensor **out);
/* y1 = x1 + F(x2), y2 = couple(x2, G(y1)) through whatever grad mode is on;
 * rng (may be NULL) rewinds the generator before F and G, else *rec (may be
 * NULL) records where it stood. */
rt_status rt_rev_block_apply(rt_rev_block *b, const rt_rev_rng *rng, rt_rev_rng *rec, rt_tensor *x1, rt_tensor *x2,
                             rt_tensor **y1, rt_tensor **y2);
/* The inverse's body, without touching grad or recompute mode; rng (may be
 * NULL) rewinds the generator before G and before F. */
rt_status rt_rev_block_invert(rt_rev_block *b, const rt_rev_rng *rng, rt_tensor *y, rt_tensor **x);
/* y2 = couple(x2, G's output) and its inverse: add/sub, or ops/coupling.h. */
rt_status rt_rev_couple(const rt_rev_block *b, rt_tensor *x2, rt_tensor *gy, rt_tensor **y2);
rt_status rt_rev_uncouple(const rt_rev_block *b, rt_tensor *y2, rt_tensor *gy, rt_tensor **x2);
/* RT_ERR_SHAPE naming the block when F's or G's output `out` (which: "F"/"G")
 * is not shaped like `like` with `channels` channels. */
rt_status rt_rev_expect(const rt_rev_block *b, const char *which, const rt_tensor *in, const rt_tensor *out,
                        const rt_tensor *like, int64_t channels);

static inline void rt_rev_release4(rt_tensor *a, rt_tensor *b, rt_tensor *c, rt_tensor *d) {
    rt_tensor_release(a);
    rt_tensor_release(b);
    rt_tensor_release(c);
    rt_tensor_release(d);
}

#endif
