/* Softmax over the channel axis (dim=1) of (N, C, spatial...) activations:
 * revtorch's own kernel (one pass per channel over a tile of positions, so
 * the plain layout's channel stride does not defeat vectorisation).
 *
 *   forward:  y[n,:,s] = exp(x − max_c x) / Σ_c exp(x − max_c x)
 *   backward: dx = y · (dy − Σ_c y·dy)     (from the output only)
 * as torch.softmax(x, dim=1) and its _softmax_backward_data.
 * Buffers x, y, dy, dx: contiguous f32 [n, c, spatial] in layout s->layout
 * (see chanwise.h), caller-owned, nothing allocated; y may alias x and dx
 * may alias dy. OpenMP over (sample, tile of positions). A NULL shape or
 * buffer makes a call a no-op. */
#ifndef RT_KERNELS_SOFTMAX_H
#define RT_KERNELS_SOFTMAX_H

#include "kernels/chanwise.h"

void rt_kernel_softmax_channels_forward(const rt_chan_shape *s, const float *x, float *y);
void rt_kernel_softmax_channels_backward(const rt_chan_shape *s, const float *y, const float *dy, float *dx);
/* The log-sum-exp over channels at every (n, s): lse[n*S + s] =
 * max_c x + log Σ_c exp(x − max_c x) (for cross-entropy without keeping
 * the probabilities). */
void rt_kernel_logsumexp_channels(const rt_chan_shape *s, const float *x, float *lse);

#endif
