/* revtorch's own per-(sample, channel) kernels for activations of any rank
 * (N, C, spatial...): the reductions and affine maps that group and instance
 * normalisation (ops/ops3d.h) are built from. oneDNN 2.6 has no group
 * normalisation primitive and its layer normalisation cannot normalise over
 * (C/G, D, H, W) of a channels-first tensor, so these loops are the whole of
 * GroupNorm / InstanceNorm: vectorised by the compiler (omp simd) and
 * OpenMP-parallel over planes above a size threshold, with the thread count
 * of rt_set_num_threads (kernels/threads.h).
 *
 * Layout (kernels/layout.h): an activation is viewed as P planes of S
 * spatial positions of L inner floats, element (p, s, l) at (p*S + s)*L + l:
 *   plain   (NC[D]HW):    L = 1, P = N*C, plane p is sample p/C, channel p%C;
 *   blocked (nC[d]hw{B}c): L = B = rt_layout_block(), P = N*C/B, plane p is
 *                          sample p/(C/B), channels (p%(C/B))*B + l;
 *   channels-last (N[D]HWC): L = C, P = N: plane p is sample p, channel l.
 *                          Its sums split each sample's positions into a
 *                          fixed number of chunks and add the chunks' sums
 *                          in order, so the result does not depend on the
 *                          thread count.
 * The per-(n, c) vectors below are always plain, index n*C + c.
 * All buffers are caller-owned contiguous f32 (f64 for the sums); the kernels
 * allocate nothing. n == 0 is a valid empty call. A blocked layout needs
 * C % rt_layout_block() == 0. The argument checks are the ops' (these kernels
 * trust their callers, like kernels/vec.h); a NULL shape or required buffer
 * makes a call a no-op. */
#ifndef RT_KERNELS_CHANWISE_H
#define RT_KERNELS_CHANWISE_H

#include <stdint.h>

#include "kernels/layout.h"

typedef struct rt_chan_shape {
    int64_t n, c, spatial; /* spatial = product of the spatial dims */
    rt_layout layout;
} rt_chan_shape;

/* Per (n, c): s1[n*C + c] = Σ_s a, s2[n*C + c] = Σ_s a·b (b NULL: Σ_s a²),
 * accumulated in double. s2 may be NULL (then only s1). */
void rt_kernel_chan_sums(const rt_chan_shape *s, const float *a, const float *b, double *s1, double *s2);

/* out = pa[nc]·a + pb[nc]·b + q[nc] elementwise, (n, c) the element's
 * sample and channel; b and pb NULL drop that term. out may alias a or b. */
void rt_kernel_chan_affine(const rt_chan_shape *s, const float *a, const float *pa, const float *b,
                           const float *pb, const float *q, float *out);

#endif
