#include "core/dtype.h"

#include <math.h>
#include <string.h>
#ifdef __F16C__
#include <immintrin.h>
#endif

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

uint16_t rt_f32_to_bf16(float x) {
    uint32_t u = rt_f32_bits(x);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

float rt_bf16_to_f32(uint16_t x) { return rt_bits_f32((uint32_t)x << 16); }

/* Software IEEE binary16 conversion for machines without F16C. */
__attribute__((unused)) static uint16_t rt_f32_to_f16_soft(float f) {
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

__attribute__((unused)) static float rt_f16_to_f32_soft(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
    if (exp == 0) {
        float v = (float)mant / 16777216.0f;
        return sign ? -v : v;
    }
    if (exp == 31) return rt_bits_f32(sign | 0x7f800000u | (mant << 13));
    return rt_bits_f32(sign | ((exp - 15 + 127) << 23) | (mant << 13));
}

uint16_t rt_f32_to_f16(float x) {
#ifdef __F16C__
    return (uint16_t)_cvtss_sh(x, _MM_FROUND_TO_NEAREST_INT);
#else
    return rt_f32_to_f16_soft(x);
#endif
}

float rt_f16_to_f32(uint16_t x) {
#ifdef __F16C__
    return _cvtsh_ss(x);
#else
    return rt_f16_to_f32_soft(x);
#endif
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
