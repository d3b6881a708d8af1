/* Element types and conversions.
 *
 * Compute is f32 except oneDNN's bf16 convolutions inside a bf16 precision
 * region; bf16 and f16 are otherwise storage formats (see design.md, "Mixed
 * precision", and memory/precision.h). Conversions round to nearest,
 * ties to even, as torch.Tensor.to(torch.bfloat16 / torch.float16) does. */
#ifndef RT_CORE_DTYPE_H
#define RT_CORE_DTYPE_H

#include <stddef.h>
#include <stdint.h>

#include "status.h"

typedef enum rt_dtype { RT_F32 = 0, RT_BF16, RT_F16, RT_I32, RT_U8 } rt_dtype;

/* Bytes per element (4, 2, 2, 4, 1); 0 for a value that is not an rt_dtype. */
size_t rt_dtype_size(rt_dtype dt);
/* PyTorch's name without the prefix: "float32", "bfloat16", "float16", "int32", "uint8"
 * ("?" for an unknown value; never NULL). */
const char *rt_dtype_str(rt_dtype dt);
/* safetensors' name: "F32", "BF16", "F16", "I32", "U8" ("?" when unknown; never NULL). */
const char *rt_dtype_safetensors_name(rt_dtype dt);
/* Inverse of rt_dtype_safetensors_name. Errors: RT_ERR_INVALID_ARG (name or
 * out NULL), RT_ERR_DTYPE (the name is not one of ours). */
rt_status rt_dtype_from_safetensors_name(const char *name, rt_dtype *out);

/* The f32 word of bf16(x) for x's bits u (the low half zero): round to
 * nearest even on the upper half, a NaN quietened (bit 22 set) and
 * truncated. Branch-free, so loops over it vectorise; the one bf16
 * rounding rule of the library (the conversions below, rt_dtype_round,
 * kernels that round what they write). */
static inline uint32_t rt_bf16_round_bits(uint32_t u) {
    uint32_t nan = (u & 0x7fffffffu) > 0x7f800000u;
    return (nan ? (u | 0x400000u) : u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
}

/* Scalar conversions (round-to-nearest-even; NaN stays NaN, overflow gives Inf). */
uint16_t rt_f32_to_bf16(float x);
float rt_bf16_to_f32(uint16_t x);
uint16_t rt_f32_to_f16(float x);
float rt_f16_to_f32(uint16_t x);

/* Converts n elements from src (type sdt) to dst (type ddt); buffers must not
 * overlap unless sdt == ddt. Float → integer truncates toward zero and
 * saturates (u8: [0,255]). Errors: RT_ERR_INVALID_ARG (src or dst NULL while
 * n > 0), RT_ERR_DTYPE (sdt or ddt not an rt_dtype). */
rt_status rt_dtype_convert(const void *src, rt_dtype sdt, void *dst, rt_dtype ddt, size_t n);

/* Rounds n f32 values in place to the nearest value of dt (RT_F32: no-op,
 * RT_BF16, RT_F16; ties to even, overflow to ±Inf): x ← f32(dt(x)), what
 * storing them as dt and reading them back gives (torch: x.to(dt).float()).
 * Vectorised (F16C) and threaded like rt_dtype_convert's f32 ↔ half paths.
 * Errors: RT_ERR_INVALID_ARG (x NULL while n > 0), RT_ERR_DTYPE (dt not a
 * floating-point rt_dtype). */
rt_status rt_dtype_round(float *x, rt_dtype dt, size_t n);

/* The same rounding from src into dst (n f32 each; dst == src is
 * rt_dtype_round, other overlaps are not allowed): dst ← f32(dt(src)) in
 * one pass over memory, where a copy and then an in-place rounding take
 * two (the backward engine rounds a gradient that another node also holds
 * into a copy). RT_F32 copies. Bit-identical to rt_dtype_round. Errors:
 * RT_ERR_INVALID_ARG (src or dst NULL while n > 0), RT_ERR_DTYPE (dt not a
 * floating-point rt_dtype). */
rt_status rt_dtype_round_into(const float *src, float *dst, rt_dtype dt, size_t n);

/* Stores n f32 values as dt (RT_F32, RT_BF16, RT_F16; same rounding as
 * rt_dtype_convert) on the calling thread only: for a kernel that converts
 * what it computes, chunk by chunk, inside its own parallel loop (where
 * rt_dtype_convert would open a nested team per chunk). Vectorised like
 * rt_dtype_convert. No checks: dst holds n elements of dt, other dtypes
 * store nothing. */
void rt_dtype_store_f32_serial(const float *src, void *dst, rt_dtype dt, size_t n);

#endif
