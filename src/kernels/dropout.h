/* Dropout's loop: out = in · mask / (1 − p), mask_i = (u_i >= p), the
 * uniforms u regenerated from Philox4x32-10 at (seed, offset) (core/rng.h)
 * instead of stored, so forward and backward draw the same mask. n
 * contiguous f32, out may alias in; 0 <= p < 1 (the op checks). */
#ifndef RT_KERNELS_DROPOUT_H
#define RT_KERNELS_DROPOUT_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

/* The TEMP bytes a call holds: the n uniforms (0 for n <= 0). */
size_t rt_kernel_dropout_temp_bytes(int64_t n);

/* RT_ERR_OOM when the uniforms' buffer (tracked, TEMP) cannot be had;
 * RT_ERR_INVALID_ARG for a NULL in or out with n > 0. n <= 0: RT_OK. */
rt_status rt_kernel_dropout(uint64_t seed, uint64_t offset, float p, int64_t n, const float *in, float *out);

#endif
