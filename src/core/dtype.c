#include "core/dtype.h"

#include <math.h>
#include <stdbool.h>
#include <string.h>
#include <immintrin.h>
#include <stdatomic.h>

size_t rt_dtype_size(rt_dtype dt) {
    switch (dt) {
    case RT_F32: case RT_I32: return 4;
    case RT_BF16: case RT_F16: return 2;
    case RT_U8: return 1;
    }
    return 0;
}

const char *rt_dtype_str(rt_dtype dt) {
    switch (dt) {
    case RT_F32: return "float32";
    case RT_BF16: return "bfloat16";
    case RT_F16: return "float16";
    case RT_I32: return "int32";
    case RT_U8: return "uint8";
    }
    return "?";
}

const char *rt_dtype_safetensors_name(rt_dtype dt) {
    switch (dt) {
    case RT_F32: return "F32";
    case RT_BF16: return "BF16";
    case RT_F16: return "F16";
    case RT_I32: return "I32";
    case RT_U8: return "U8";
    }
    return "?";
}

rt_status rt_dtype_from_safetensors_name(const char *name, rt_dtype *out) {
    if (!name || !out)
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_dtype_from_safetensors_name: %s is NULL",
                            !name ? "the name" : "out");
    static const rt_dtype all[] = {RT_F32, RT_BF16, RT_F16, RT_I32, RT_U8};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (strcmp(name, rt_dtype_safetensors_name(all[i])) == 0) {
            *out = all[i];
            return RT_OK;
        }
    return rt_error_set(RT_ERR_DTYPE, "dtype '%s' is not supported (use F32, BF16, F16, I32 or U8)",
                        name);
}

static uint32_t rt_f32_bits(float x) { uint32_t u; memcpy(&u, &x, 4); return u; }
static float rt_bits_f32(uint32_t u) { float x; memcpy(&x, &u, 4); return x; }


uint16_t rt_f32_to_bf16(float x) { return (uint16_t)(rt_bf16_round_bits(rt_f32_bits(x)) >> 16); }

float rt_bf16_to_f32(uint16_t x) { return rt_bits_f32((uint32_t)x << 16); }

/* Software IEEE binary16 conversion for machines without F16C. */
static uint16_t rt_f32_to_f16_soft(float f) {
    uint32_t u = rt_f32_bits(f);
    uint32_t sign = (u >> 16) & 0x8000u;
    uint32_t absu = u & 0x7fffffffu;
    if (absu > 0x7f800000u) return (uint16_t)(sign | 0x7e00u);
    if (absu >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* rounds to >= 65520: Inf */
    if (absu < 0x38800000u) {                                     /* subnormal or zero in f16 */
        float a = rt_bits_f32(absu);
        /* a * 2^24 is the subnormal mantissa; rint uses the default round-to-even mode */
        return (uint16_t)(sign | (uint32_t)rintf(a * 16777216.0f));
    }
    uint32_t mant = absu & 0x7fffffu;
    uint32_t exp = (absu >> 23) - 127 + 15;
    uint32_t h = (exp << 10) | (mant >> 13);
    uint32_t rest = mant & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) h++;
    return (uint16_t)(sign | h);
}

static float rt_f16_to_f32_soft(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
    if (exp == 0) {
        float v = (float)mant / 16777216.0f;
        return sign ? -v : v;
    }
    if (exp == 31) return rt_bits_f32(sign | 0x7f800000u | (mant << 13));
    return rt_bits_f32(sign | ((exp - 15 + 127) << 23) | (mant << 13));
}

uint16_t rt_f32_to_f16(float x) { return rt_f32_to_f16_soft(x); }

float rt_f16_to_f32(uint16_t x) { return rt_f16_to_f32_soft(x); }

/* F16C converts eight halves per instruction. The library is built for
 * x86-64-v2, which lacks it (kernels/cpu.h), so the two loops below are
 * compiled for F16C with a target attribute and used only when the CPU has
 * it; both paths round to nearest even, so their results are identical. The
 * answer is cached process-wide: every thread computes the same value. */
static bool rt_cpu_has_f16c(void) {
    static _Atomic int has = -1;
    int h = atomic_load_explicit(&has, memory_order_relaxed);
    if (h < 0) {
        __builtin_cpu_init();
        h = __builtin_cpu_supports("avx") && __builtin_cpu_supports("f16c");
        atomic_store_explicit(&has, h, memory_order_relaxed);
    }
    return h;
}

__attribute__((target("avx,f16c"))) static size_t rt_f32_to_f16_f16c(const float *src, uint16_t *dst, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(dst + i), _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
    return i;
}

__attribute__((target("avx,f16c"))) static size_t rt_f16_to_f32_f16c(const uint16_t *src, float *dst, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + i))));
    return i;
}

static float rt_load_f32(const void *src, rt_dtype dt, size_t i) {
    switch (dt) {
    case RT_F32: return ((const float *)src)[i];
    case RT_BF16: return rt_bf16_to_f32(((const uint16_t *)src)[i]);
    case RT_F16: return rt_f16_to_f32(((const uint16_t *)src)[i]);
    case RT_I32: return (float)((const int32_t *)src)[i];
    case RT_U8: return (float)((const uint8_t *)src)[i];
    }
    return 0.0f;
}

static void rt_store_f32(void *dst, rt_dtype dt, size_t i, float v) {
    switch (dt) {
    case RT_F32: ((float *)dst)[i] = v; break;
    case RT_BF16: ((uint16_t *)dst)[i] = rt_f32_to_bf16(v); break;
    case RT_F16: ((uint16_t *)dst)[i] = rt_f32_to_f16(v); break;
    case RT_I32:
        ((int32_t *)dst)[i] = isnan(v) ? 0 : v >= 2147483647.0f ? INT32_MAX
                                     : v <= -2147483648.0f ? INT32_MIN : (int32_t)v;
        break;
    case RT_U8: ((uint8_t *)dst)[i] = isnan(v) ? 0 : v >= 255.0f ? 255 : v <= 0.0f ? 0 : (uint8_t)v; break;
    }
}

/* The fast paths between f32 and the half types: whole vectors with F16C
 * (8 lanes per instruction) and a branch-free bf16 rounding the compiler
 * vectorises; threads above 64 Ki elements (saved activations are MBs).
 * Bit-identical to the scalar conversions above. */
#define RT_CONVERT_CHUNK 4096

static void rt_f32_to_bf16_n(const float *src, uint16_t *dst, size_t n) {
#pragma omp simd
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &src[i], 4);
        dst[i] = (uint16_t)(rt_bf16_round_bits(u) >> 16);
    }
}

static void rt_bf16_to_f32_n(const uint16_t *src, float *dst, size_t n) {
#pragma omp simd
    for (size_t i = 0; i < n; i++) {
        uint32_t u = (uint32_t)src[i] << 16;
        memcpy(&dst[i], &u, 4);
    }
}

static void rt_f32_to_f16_n(const float *src, uint16_t *dst, size_t n) {
    size_t i = rt_cpu_has_f16c() ? rt_f32_to_f16_f16c(src, dst, n) : 0;
    for (; i < n; i++) dst[i] = rt_f32_to_f16(src[i]);
}

static void rt_f16_to_f32_n(const uint16_t *src, float *dst, size_t n) {
    size_t i = rt_cpu_has_f16c() ? rt_f16_to_f32_f16c(src, dst, n) : 0;
    for (; i < n; i++) dst[i] = rt_f16_to_f32(src[i]);
}

/* One of the four f32 <-> half conversions over [0, n), in chunks across threads. */
static bool rt_convert_half(const void *src, rt_dtype sdt, void *dst, rt_dtype ddt, size_t n) {
    int kind = sdt == RT_F32 && ddt == RT_BF16 ? 0 : sdt == RT_BF16 && ddt == RT_F32 ? 1
               : sdt == RT_F32 && ddt == RT_F16 ? 2 : sdt == RT_F16 && ddt == RT_F32 ? 3 : -1;
    if (kind < 0) return false;
    long long chunks = (long long)((n + RT_CONVERT_CHUNK - 1) / RT_CONVERT_CHUNK);
#pragma omp parallel for schedule(static) if (n > 65536)
    for (long long c = 0; c < chunks; c++) {
        size_t a = (size_t)c * RT_CONVERT_CHUNK, m = n - a < RT_CONVERT_CHUNK ? n - a : RT_CONVERT_CHUNK;
        switch (kind) {
        case 0: rt_f32_to_bf16_n((const float *)src + a, (uint16_t *)dst + a, m); break;
        case 1: rt_bf16_to_f32_n((const uint16_t *)src + a, (float *)dst + a, m); break;
        case 2: rt_f32_to_f16_n((const float *)src + a, (uint16_t *)dst + a, m); break;
        default: rt_f16_to_f32_n((const uint16_t *)src + a, (float *)dst + a, m); break;
        }
    }
    return true;
}

void rt_dtype_store_f32_serial(const float *src, void *dst, rt_dtype dt, size_t n) {
    if (dt == RT_BF16) rt_f32_to_bf16_n(src, dst, n);
    else if (dt == RT_F16) rt_f32_to_f16_n(src, dst, n);
    else if (dt == RT_F32) memcpy(dst, src, n * sizeof *src);
}

/* bf16 rounding of whole f32 words in one pass: the bits of
 * rt_bf16_to_f32(rt_f32_to_bf16(x)). */
static void rt_round_bf16_n(const float *src, float *dst, size_t n) {
#pragma omp simd
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &src[i], 4);
        uint32_t r = rt_bf16_round_bits(u);
        memcpy(&dst[i], &r, 4);
    }
}

rt_status rt_dtype_round(float *x, rt_dtype dt, size_t n) {
    if (!x && n) return rt_error_set(RT_ERR_INVALID_ARG, "rt_dtype_round: the buffer is NULL");
    return rt_dtype_round_into(x, x, dt, n);
}

rt_status rt_dtype_round_into(const float *src, float *dst, rt_dtype dt, size_t n) {
    if ((!src || !dst) && n)
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_dtype_round_into: %s is NULL",
                            !src ? "the source buffer" : "the destination buffer");
    if (dt != RT_F32 && dt != RT_BF16 && dt != RT_F16)
        return rt_error_set(RT_ERR_DTYPE, "rt_dtype_round: %s is not a floating-point type", rt_dtype_str(dt));
    if (dt == RT_F32) {
        if (dst != src) memcpy(dst, src, n * sizeof *dst);
        return RT_OK;
    }
    long long chunks = (long long)((n + RT_CONVERT_CHUNK - 1) / RT_CONVERT_CHUNK);
#pragma omp parallel for schedule(static) if (n > 65536)
    for (long long c = 0; c < chunks; c++) {
        size_t a = (size_t)c * RT_CONVERT_CHUNK, m = n - a < RT_CONVERT_CHUNK ? n - a : RT_CONVERT_CHUNK;
        if (dt == RT_BF16) {
            rt_round_bf16_n(src + a, dst + a, m);
        } else {
            uint16_t h[RT_CONVERT_CHUNK];
            rt_f32_to_f16_n(src + a, h, m);
            rt_f16_to_f32_n(h, dst + a, m);
        }
    }
    return RT_OK;
}

rt_status rt_dtype_convert(const void *src, rt_dtype sdt, void *dst, rt_dtype ddt, size_t n) {
    if ((!src || !dst) && n)
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_dtype_convert: %s is NULL",
                            !src ? "the source buffer" : "the destination buffer");
    if (!rt_dtype_size(sdt) || !rt_dtype_size(ddt))
        return rt_error_set(RT_ERR_DTYPE, "rt_dtype_convert: unknown dtype %d",
                            !rt_dtype_size(sdt) ? (int)sdt : (int)ddt);
    if (sdt == ddt) {
        memmove(dst, src, n * rt_dtype_size(sdt));
        return RT_OK;
    }
    if (rt_convert_half(src, sdt, dst, ddt, n)) return RT_OK;
    for (size_t i = 0; i < n; i++) {
        if (sdt == RT_I32 && ddt == RT_U8) {
            int32_t v = ((const int32_t *)src)[i]; /* integer → u8 without a float detour */
            ((uint8_t *)dst)[i] = v < 0 ? 0 : v > 255 ? 255 : (uint8_t)v;
        } else {
            rt_store_f32(dst, ddt, i, rt_load_f32(src, sdt, i));
        }
    }
    return RT_OK;
}
