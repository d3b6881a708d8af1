/* Unit tests for src/core: status codes and error messages, dtypes and their
 * conversions (checked against an independent reference rounding written
 * here with double arithmetic), tensors and refcounted storage, the tracked
 * allocator (categories, peaks, hard limit, event trace) and the Philox RNG
 * (known-answer vectors from the Random123 distribution). */
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "autograd/engine.h"
#include "autograd/node.h"
#include "core/dtype.h"
#include "core/mem.h"
#include "core/rng.h"
#include "core/status.h"
#include "core/tensor.h"
#include "ops/ops.h"
#include "rt_test.h"

/* ---- helpers --------------------------------------------------------------- */

static uint32_t f2u(float x) { uint32_t u; memcpy(&u, &x, 4); return u; }
static float u2f(uint32_t u) { float x; memcpy(&x, &u, 4); return x; }

static int64_t live(rt_mem_category c) {
    rt_memstats s;
    rt_memstats_get(&s);
    return s.live[c];
}

static int64_t live_total(void) {
    rt_memstats s;
    rt_memstats_get(&s);
    return s.live_total;
}

/* Reference round-to-nearest-even of a finite or infinite float into a binary
 * format with `mbits` mantissa bits, exponent bias `bias`, max biased
 * exponent `emax_biased` (all-ones is Inf/NaN). Works in double, where every
 * scaled value below is exact, and uses nearbyint (default mode: ties to even).
 * Independent of the library's bit tricks. NaN is handled by the callers. */
static uint16_t ref_round(float xf, int mbits, int bias, int expbits) {
    double x = xf;
    uint16_t sign = signbit(xf) ? (uint16_t)(1u << (mbits + expbits)) : 0;
    double a = fabs(x);
    uint16_t inf = (uint16_t)(((1u << expbits) - 1) << mbits);
    if (isinf(a)) return sign | inf;
    int emin = 1 - bias; /* exponent of the smallest normal */
    if (a < ldexp(1.0, emin)) { /* subnormal range: unit is 2^(emin - mbits) */
        double q = nearbyint(ldexp(a, mbits - emin));
        return sign | (uint16_t)q; /* q == 2^mbits gives the smallest normal, correctly */
    }
    int e;
    frexp(a, &e); /* a = f * 2^e, f in [0.5, 1) */
    e -= 1;       /* a = m * 2^e, m in [1, 2) */
    double q = nearbyint(ldexp(a, mbits - e)); /* in [2^mbits, 2^(mbits+1)] */
    if (q == ldexp(1.0, mbits + 1)) {
        q = ldexp(1.0, mbits);
        e += 1;
    }
    if (e + bias >= (1 << expbits) - 1) return sign | inf;
    return sign | (uint16_t)(((unsigned)(e + bias) << mbits) | ((unsigned)q - (1u << mbits)));
}
static uint16_t ref_bf16(float x) { return ref_round(x, 7, 127, 8); }
static uint16_t ref_f16(float x) { return ref_round(x, 10, 15, 5); }

static int bf16_is_nan(uint16_t h) { return (h & 0x7f80u) == 0x7f80u && (h & 0x7fu); }
static int f16_is_nan(uint16_t h) { return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu); }

/* A private temp dir for files this run writes. */
static char g_dir[64];
static void cleanup_dir(void) {
    if (!g_dir[0]) return;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", g_dir);
}
static const char *tmp_dir(void) {
    if (!g_dir[0]) {
        strcpy(g_dir, "/tmp/rt_test_core_XXXXXX");
        if (!mkdtemp(g_dir)) {
            perror("mkdtemp");
            exit(2);
        }
        atexit(cleanup_dir);
    }
    return g_dir;
}

/* ---- status and errors ----------------------------------------------------- */

static void test_status_strings(void) {
    static const struct { rt_status s; const char *name; } all[] = {
        {RT_OK, "RT_OK"},
        {RT_ERR_INVALID_ARG, "RT_ERR_INVALID_ARG"},
        {RT_ERR_SHAPE, "RT_ERR_SHAPE"},
        {RT_ERR_DTYPE, "RT_ERR_DTYPE"},
        {RT_ERR_OOM, "RT_ERR_OOM"},
        {RT_ERR_IO, "RT_ERR_IO"},
        {RT_ERR_FORMAT, "RT_ERR_FORMAT"},
        {RT_ERR_BACKEND, "RT_ERR_BACKEND"},
        {RT_ERR_GRAPH_RELEASED, "RT_ERR_GRAPH_RELEASED"},
        {RT_ERR_NO_GRAD, "RT_ERR_NO_GRAD"},
        {RT_ERR_NONFINITE, "RT_ERR_NONFINITE"},
        {RT_ERR_UNSUPPORTED, "RT_ERR_UNSUPPORTED"},
        {RT_ERR_STATE, "RT_ERR_STATE"},
    };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        const char *s = rt_status_str(all[i].s);
        CHECK(s != NULL);
        if (strcmp(s, all[i].name) != 0) fprintf(stderr, "status %d: got '%s'\n", all[i].s, s);
        CHECK(strcmp(s, all[i].name) == 0);
    }
    /* an unknown code still gives a string, never NULL */
    CHECK(rt_status_str((rt_status)-999) != NULL);
    CHECK(rt_status_str((rt_status)42) != NULL);
    CHECK(strcmp(rt_status_str((rt_status)-999), "RT_OK") != 0);
}

static void *error_thread(void *arg) {
    int *ok = arg;
    /* a fresh thread sees no error from the main thread */
    *ok = rt_error_last()[0] == '\0';
    rt_error_set(RT_ERR_IO, "thread-local %s", "message");
    *ok = *ok && strcmp(rt_error_last(), "thread-local message") == 0;
    return NULL;
}

static void test_error_messages(void) {
    rt_error_clear();
    CHECK(strcmp(rt_error_last(), "") == 0);
    rt_status s = rt_error_set(RT_ERR_SHAPE, "bad shape %d x %s", 3, "four");
    CHECK_EQ_INT(s, RT_ERR_SHAPE);
    CHECK(strcmp(rt_error_last(), "bad shape 3 x four") == 0);
    /* the latest message wins */
    CHECK_EQ_INT(rt_error_set(RT_ERR_IO, "second"), RT_ERR_IO);
    CHECK(strcmp(rt_error_last(), "second") == 0);
    /* a long message is truncated, NUL-terminated, and keeps its start */
    char big[5000];
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    big[0] = 'Z';
    rt_error_set(RT_ERR_FORMAT, "%s", big);
    size_t n = strlen(rt_error_last());
    CHECK(n > 100 && n < sizeof big - 1);
    CHECK(rt_error_last()[0] == 'Z');
    /* thread-local: another thread neither sees nor clobbers ours */
    rt_error_set(RT_ERR_SHAPE, "main thread");
    int ok = 0;
    pthread_t th;
    CHECK(pthread_create(&th, NULL, error_thread, &ok) == 0);
    pthread_join(th, NULL);
    CHECK(ok);
    CHECK(strcmp(rt_error_last(), "main thread") == 0);
    rt_error_clear();
    CHECK(strcmp(rt_error_last(), "") == 0);
}

static rt_status try_helper(rt_status inner, int *reached) {
    RT_TRY(inner);
    *reached = 1;
    return RT_OK;
}

static void test_rt_try(void) {
    int reached = 0;
    CHECK_EQ_INT(try_helper(RT_ERR_IO, &reached), RT_ERR_IO);
    CHECK_EQ_INT(reached, 0);
    CHECK_EQ_INT(try_helper(RT_OK, &reached), RT_OK);
    CHECK_EQ_INT(reached, 1);
}

/* ---- dtypes ---------------------------------------------------------------- */

static void test_dtype_sizes_names(void) {
    CHECK_EQ_INT(rt_dtype_size(RT_F32), 4);
    CHECK_EQ_INT(rt_dtype_size(RT_BF16), 2);
    CHECK_EQ_INT(rt_dtype_size(RT_F16), 2);
    CHECK_EQ_INT(rt_dtype_size(RT_I32), 4);
    CHECK_EQ_INT(rt_dtype_size(RT_U8), 1);
    CHECK(strcmp(rt_dtype_str(RT_F32), "float32") == 0);
    CHECK(strcmp(rt_dtype_str(RT_BF16), "bfloat16") == 0);
    CHECK(strcmp(rt_dtype_str(RT_F16), "float16") == 0);
    CHECK(strcmp(rt_dtype_str(RT_I32), "int32") == 0);
    CHECK(strcmp(rt_dtype_str(RT_U8), "uint8") == 0);
    static const struct { rt_dtype dt; const char *st; } names[] = {
        {RT_F32, "F32"}, {RT_BF16, "BF16"}, {RT_F16, "F16"}, {RT_I32, "I32"}, {RT_U8, "U8"}};
    for (size_t i = 0; i < 5; i++) {
        CHECK(strcmp(rt_dtype_safetensors_name(names[i].dt), names[i].st) == 0);
        rt_dtype back = (rt_dtype)-1;
        CHECK_OK(rt_dtype_from_safetensors_name(names[i].st, &back));
        CHECK_EQ_INT(back, names[i].dt);
    }
    rt_dtype dt = RT_U8;
    rt_error_clear();
    CHECK_EQ_INT(rt_dtype_from_safetensors_name("F64", &dt), RT_ERR_DTYPE);
    CHECK(strstr(rt_error_last(), "F64") != NULL);
    CHECK_EQ_INT(dt, RT_U8); /* untouched on failure */
    CHECK_EQ_INT(rt_dtype_from_safetensors_name("f32", &dt), RT_ERR_DTYPE); /* case matters */
}

static void test_bf16_crafted(void) {
    static const struct { uint32_t in; uint16_t out; } cases[] = {
        {0x3f800000u, 0x3f80}, /* 1.0 exact */
        {0x3f808000u, 0x3f80}, /* tie, lower neighbour even: down */
        {0x3f818000u, 0x3f82}, /* tie, lower neighbour odd: up */
        {0x3f808001u, 0x3f81}, /* just above the tie: up */
        {0x3f807fffu, 0x3f80}, /* just below the tie: down */
        {0xbf808000u, 0xbf80}, /* negative tie: down in magnitude */
        {0xbf818000u, 0xbf82}, /* negative tie, odd: up in magnitude */
        {0x3f80ffffu, 0x3f81}, /* carry within the mantissa */
        {0x3fffffffu, 0x4000}, /* carry into the exponent */
        {0x00000000u, 0x0000}, /* +0 */
        {0x80000000u, 0x8000}, /* -0 */
        {0x00008000u, 0x0000}, /* f32 subnormal tie to even (0) */
        {0x00018000u, 0x0002}, /* f32 subnormal tie to even (2) */
        {0x00010001u, 0x0001}, /* f32 subnormal just above 1 unit */
        {0x7f800000u, 0x7f80}, /* +Inf */
        {0xff800000u, 0xff80}, /* -Inf */
        {0x7f7f7fffu, 0x7f7f}, /* largest value that stays finite */
        {0x7f7f8000u, 0x7f80}, /* tie at the top, odd: overflows to Inf */
        {0x7f7fffffu, 0x7f80}, /* FLT_MAX: overflows to Inf */
        {0xff7fffffu, 0xff80}, /* -FLT_MAX: -Inf */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint16_t got = rt_f32_to_bf16(u2f(cases[i].in));
        if (got != cases[i].out)
            fprintf(stderr, "bf16(0x%08x): got 0x%04x want 0x%04x\n", cases[i].in, got, cases[i].out);
        CHECK_EQ_INT(got, cases[i].out);
        CHECK_EQ_INT(ref_bf16(u2f(cases[i].in)), cases[i].out); /* the reference agrees */
    }
    /* NaN stays NaN, including a signalling NaN whose payload is all in the
     * low 16 bits (naive rounding would turn it into Inf), and keeps its sign */
    static const uint32_t nans[] = {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0x7f80ffffu,
                                    0xff800001u, 0x7fffffffu};
    for (size_t i = 0; i < sizeof nans / sizeof nans[0]; i++) {
        uint16_t h = rt_f32_to_bf16(u2f(nans[i]));
        if (!bf16_is_nan(h)) fprintf(stderr, "bf16(NaN 0x%08x) = 0x%04x\n", nans[i], h);
        CHECK(bf16_is_nan(h));
        CHECK_EQ_INT(h >> 15, nans[i] >> 31);
    }
    CHECK(isnan(rt_bf16_to_f32(0x7fc0)));
    CHECK(isinf(rt_bf16_to_f32(0x7f80)) && rt_bf16_to_f32(0x7f80) > 0);
    CHECK(isinf(rt_bf16_to_f32(0xff80)) && rt_bf16_to_f32(0xff80) < 0);
    CHECK(rt_bf16_to_f32(0x3f80) == 1.0f);
    CHECK(rt_bf16_to_f32(0xc040) == -3.0f);
}

static void test_bf16_all_values_round_trip(void) {
    int nan_count = 0;
    for (uint32_t u = 0; u < 65536; u++) {
        float f = rt_bf16_to_f32((uint16_t)u);
        CHECK_EQ_INT(f2u(f), u << 16); /* widening is exact: the bits move up */
        uint16_t back = rt_f32_to_bf16(f);
        if (bf16_is_nan((uint16_t)u)) {
            CHECK(isnan(f));
            CHECK(bf16_is_nan(back));
            nan_count++;
        } else {
            if (back != u) fprintf(stderr, "bf16 0x%04x -> %g -> 0x%04x\n", u, f, back);
            CHECK_EQ_INT(back, u);
        }
    }
    CHECK_EQ_INT(nan_count, 2 * 127); /* 2 signs x (2^7 - 1) payloads */
}

/* Random bit patterns (all exponents, including subnormals and huge values)
 * against the double-arithmetic reference. */
static void test_bf16_f16_random_vs_reference(void) {
    enum { N = 1 << 20 };
    uint32_t r[4];
    for (uint32_t i = 0; i < N; i += 4) {
        const uint32_t ctr[4] = {i, 0x5eed, 0, 0}, key[2] = {0x1234, 0x5678};
        rt_philox4x32_10(ctr, key, r);
        for (int j = 0; j < 4; j++) {
            uint32_t u = r[j];
            /* every fourth value lands near f16's range so its rounding is exercised */
            if (j == 3) u = (u & 0x807fffffu) | ((uint32_t)(100 + (u >> 23) % 50) << 23);
            float x = u2f(u);
            if (isnan(x)) continue;
            uint16_t b = rt_f32_to_bf16(x), rb = ref_bf16(x);
            if (b != rb) fprintf(stderr, "bf16(0x%08x): got 0x%04x ref 0x%04x\n", u, b, rb);
            CHECK_EQ_INT(b, rb);
            uint16_t h = rt_f32_to_f16(x), rh = ref_f16(x);
            if (h != rh) fprintf(stderr, "f16(0x%08x = %g): got 0x%04x ref 0x%04x\n", u, x, h, rh);
            CHECK_EQ_INT(h, rh);
        }
    }
}

/* rt_dtype_round and rt_dtype_round_into (the backward engine's gradient
 * rounding): bit for bit the scalar conversion there and back, NaN, Inf,
 * ties and the threaded path (above 64 Ki elements) included; _into
 * leaves its source alone. */
static void test_dtype_round_matches_conversion(void) {
    enum { N = 3 * 65536 + 13 };
    float *src = malloc(N * sizeof *src), *in_place = malloc(N * sizeof *src), *into = malloc(N * sizeof *src);
    CHECK(src && in_place && into);
    static const uint32_t special[] = {0x7fc00000u, 0xffc00001u, 0x7f800001u, 0x7f800000u, 0xff800000u,
                                       0x7f7fffffu, 0x3f808000u, 0x3f818000u, 0x3f808001u, 0x00000001u,
                                       0x80000000u, 0x477ff000u, 0x477fefffu, 0x33800000u};
    uint32_t r[4];
    for (uint32_t i = 0; i < N; i += 4) {
        const uint32_t ctr[4] = {i, 0x70d, 0, 0}, key[2] = {0xbeef, 0xf00d};
        rt_philox4x32_10(ctr, key, r);
        for (uint32_t j = 0; j < 4 && i + j < N; j++) {
            uint32_t u = r[j];
            if (j == 3) u = (u & 0x807fffffu) | ((uint32_t)(100 + (u >> 23) % 50) << 23); /* near f16's range */
            src[i + j] = u2f(i + j < sizeof special / sizeof special[0] ? special[i + j] : u);
        }
    }
    const rt_dtype dts[2] = {RT_BF16, RT_F16};
    for (int d = 0; d < 2; d++) {
        memcpy(in_place, src, N * sizeof *src);
        CHECK_EQ_INT(rt_dtype_round(in_place, dts[d], N), RT_OK);
        for (size_t i = 0; i < N; i++) into[i] = -1.0f;
        CHECK_EQ_INT(rt_dtype_round_into(src, into, dts[d], N), RT_OK);
        int bad = 0;
        for (size_t i = 0; i < N && bad < 5; i++) {
            float want = dts[d] == RT_BF16 ? rt_bf16_to_f32(rt_f32_to_bf16(src[i]))
                                           : rt_f16_to_f32(rt_f32_to_f16(src[i]));
            /* bf16 defines the quietened NaN's bits; an f16 NaN only has to stay NaN */
            bool same = dts[d] == RT_F16 && isnan(want) ? isnan(in_place[i]) && isnan(into[i])
                                                        : f2u(in_place[i]) == f2u(want) && f2u(into[i]) == f2u(want);
            if (!same) {
                fprintf(stderr, "%s round(0x%08x): in place 0x%08x, into 0x%08x, want 0x%08x\n",
                        rt_dtype_str(dts[d]), f2u(src[i]), f2u(in_place[i]), f2u(into[i]), f2u(want));
                bad++;
            }
        }
        CHECK_EQ_INT(bad, 0);
    }
    CHECK(f2u(src[0]) == 0x7fc00000u && f2u(src[13]) == 0x33800000u); /* the source is untouched */
    CHECK_EQ_INT(rt_dtype_round_into(src, into, RT_F32, 5), RT_OK);    /* f32: a copy */
    CHECK(memcmp(src, into, 5 * sizeof *src) == 0);
    free(src);
    free(in_place);
    free(into);
}

static void test_f16_crafted(void) {
    static const struct { float in; uint16_t out; } cases[] = {
        {1.0f, 0x3c00},
        {-2.0f, 0xc000},
        {65504.0f, 0x7bff},                 /* largest finite f16 */
        {65519.0f, 0x7bff},                 /* below the midpoint to 65536: stays finite */
        {65520.0f, 0x7c00},                 /* midpoint, 0x7bff odd: rounds to Inf */
        {1e6f, 0x7c00},                     /* overflow */
        {-1e6f, 0xfc00},
        {FLT_MAX, 0x7c00},
        {1.0f + 0x1p-11f, 0x3c00},          /* tie, even below: down */
        {1.0f + 0x3p-11f, 0x3c02},          /* tie, odd below: up */
        {1.0f + 0x1p-11f + 0x1p-23f, 0x3c01},/* just above the tie */
        {1.0f + 0x1p-11f - 0x1p-23f, 0x3c00},/* just below the tie */
        {0x1p-14f, 0x0400},                 /* smallest normal */
        {0x1p-24f, 0x0001},                 /* smallest subnormal */
        {0x1p-25f, 0x0000},                 /* half the smallest subnormal: tie to 0 */
        {0x1p-25f + 0x1p-40f, 0x0001},      /* just above that tie */
        {0x3p-25f, 0x0002},                 /* 1.5 units: tie to even (2) */
        {0x5p-25f, 0x0002},                 /* 2.5 units: tie to even (2) */
        {1023.0f * 0x1p-24f, 0x03ff},       /* largest subnormal */
        {1023.5f * 0x1p-24f, 0x0400},       /* tie between it and the smallest normal: up (even) */
        {-0x1p-24f, 0x8001},
        {0x1p-30f, 0x0000},                 /* underflow to +0 */
        {-0x1p-30f, 0x8000},                /* underflow keeps the sign */
        {0.0f, 0x0000},
        {-0.0f, 0x8000},
        {INFINITY, 0x7c00},
        {-INFINITY, 0xfc00},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint16_t got = rt_f32_to_f16(cases[i].in);
        if (got != cases[i].out)
            fprintf(stderr, "f16(%a): got 0x%04x want 0x%04x\n", cases[i].in, got, cases[i].out);
        CHECK_EQ_INT(got, cases[i].out);
        CHECK_EQ_INT(ref_f16(cases[i].in), cases[i].out);
    }
    /* widening subnormals and specials is exact */
    CHECK(rt_f16_to_f32(0x0001) == 0x1p-24f);
    CHECK(rt_f16_to_f32(0x8001) == -0x1p-24f);
    CHECK(rt_f16_to_f32(0x03ff) == 1023.0f * 0x1p-24f);
    CHECK(rt_f16_to_f32(0x0200) == 0x1p-15f);
    CHECK(rt_f16_to_f32(0x0400) == 0x1p-14f);
    CHECK(rt_f16_to_f32(0x7bff) == 65504.0f);
    CHECK(f2u(rt_f16_to_f32(0x8000)) == 0x80000000u); /* -0 */
    CHECK(isinf(rt_f16_to_f32(0x7c00)) && rt_f16_to_f32(0x7c00) > 0);
    CHECK(isinf(rt_f16_to_f32(0xfc00)) && rt_f16_to_f32(0xfc00) < 0);
    CHECK(isnan(rt_f16_to_f32(0x7e00)));
    CHECK(isnan(rt_f16_to_f32(0x7c01))); /* signalling pattern is still NaN */
    static const uint32_t nans[] = {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0x7fffffffu};
    for (size_t i = 0; i < 4; i++) {
        uint16_t h = rt_f32_to_f16(u2f(nans[i]));
        if (!f16_is_nan(h)) fprintf(stderr, "f16(NaN 0x%08x) = 0x%04x\n", nans[i], h);
        CHECK(f16_is_nan(h));
    }
}

static void test_f16_all_values_round_trip(void) {
    int nan_count = 0;
    for (uint32_t u = 0; u < 65536; u++) {
        float f = rt_f16_to_f32((uint16_t)u);
        uint16_t back = rt_f32_to_f16(f);
        if (f16_is_nan((uint16_t)u)) {
            CHECK(isnan(f));
            CHECK(f16_is_nan(back));
            nan_count++;
            continue;
        }
        if (back != u) fprintf(stderr, "f16 0x%04x -> %a -> 0x%04x\n", u, f, back);
        CHECK_EQ_INT(back, u);
        /* and the value is what the bit pattern means */
        int e = (u >> 10) & 31, m = u & 1023;
        double v = e == 0 ? ldexp(m, -24) : e == 31 ? INFINITY : ldexp(1024 + m, e - 25);
        if (u & 0x8000) v = -v;
        CHECK((double)f == v);
    }
    CHECK_EQ_INT(nan_count, 2 * 1023);
}

static void test_dtype_convert(void) {
    /* float → int truncates toward zero and saturates; NaN → 0 */
    const float f[] = {1.9f, -1.9f, 0.5f, -0.5f, 3e9f, -3e9f, NAN, 255.7f, 256.0f, -3.0f, 100.4f};
    enum { N = sizeof f / sizeof f[0] };
    int32_t i32[N];
    CHECK_OK(rt_dtype_convert(f, RT_F32, i32, RT_I32, N));
    const int32_t want_i32[N] = {1, -1, 0, 0, INT32_MAX, INT32_MIN, 0, 255, 256, -3, 100};
    for (int i = 0; i < N; i++) CHECK_EQ_INT(i32[i], want_i32[i]);
    uint8_t u8[N];
    CHECK_OK(rt_dtype_convert(f, RT_F32, u8, RT_U8, N));
    const uint8_t want_u8[N] = {1, 0, 0, 0, 255, 0, 0, 255, 255, 0, 100};
    for (int i = 0; i < N; i++) CHECK_EQ_INT(u8[i], want_u8[i]);
    /* integer → u8 saturates without losing exactness through float */
    const int32_t ints[] = {-5, 0, 7, 255, 256, 16777217, INT32_MIN};
    uint8_t u8b[7];
    CHECK_OK(rt_dtype_convert(ints, RT_I32, u8b, RT_U8, 7));
    const uint8_t want_u8b[7] = {0, 0, 7, 255, 255, 255, 0};
    for (int i = 0; i < 7; i++) CHECK_EQ_INT(u8b[i], want_u8b[i]);
    /* u8/i32 → f32 exact */
    const uint8_t bytes[3] = {0, 128, 255};
    float fb[3];
    CHECK_OK(rt_dtype_convert(bytes, RT_U8, fb, RT_F32, 3));
    CHECK(fb[0] == 0.0f && fb[1] == 128.0f && fb[2] == 255.0f);
    /* vector f32 → bf16/f16 matches the scalar conversions, and back */
    float src[64];
    for (int i = 0; i < 64; i++) src[i] = (float)(i - 31) * 0.37f + 1e-3f * (float)i;
    uint16_t b[64], h[64];
    CHECK_OK(rt_dtype_convert(src, RT_F32, b, RT_BF16, 64));
    CHECK_OK(rt_dtype_convert(src, RT_F32, h, RT_F16, 64));
    for (int i = 0; i < 64; i++) {
        CHECK_EQ_INT(b[i], rt_f32_to_bf16(src[i]));
        CHECK_EQ_INT(h[i], rt_f32_to_f16(src[i]));
    }
    /* bf16 → f16 goes through f32 (exact widening, one rounding) */
    uint16_t h2[64];
    CHECK_OK(rt_dtype_convert(b, RT_BF16, h2, RT_F16, 64));
    for (int i = 0; i < 64; i++) CHECK_EQ_INT(h2[i], rt_f32_to_f16(rt_bf16_to_f32(b[i])));
    /* same dtype is a copy, and may overlap */
    int32_t ov[6] = {1, 2, 3, 4, 5, 6};
    CHECK_OK(rt_dtype_convert(ov, RT_I32, ov + 1, RT_I32, 5));
    CHECK(ov[0] == 1 && ov[1] == 1 && ov[2] == 2 && ov[5] == 5);
    /* NULL buffers */
    CHECK_EQ_INT(rt_dtype_convert(NULL, RT_F32, h, RT_F16, 4), RT_ERR_INVALID_ARG);
    CHECK_EQ_INT(rt_dtype_convert(src, RT_F32, NULL, RT_F16, 4), RT_ERR_INVALID_ARG);
}

/* ---- tensors --------------------------------------------------------------- */

static void test_tensor_create_release(void) {
    int64_t base_data = live(RT_MEM_DATA), base_temp = live(RT_MEM_TEMP), base_total = live_total();
    int64_t shape[4] = {2, 3, 4, 5};
    rt_tensor *t = rt_tensor_create(4, shape, RT_F32, RT_DEVICE_CPU, RT_MEM_DATA);
    CHECK(t != NULL);
    CHECK_EQ_INT(t->ndim, 4);
    CHECK_EQ_INT(rt_tensor_numel(t), 120);
    CHECK_EQ_INT(rt_tensor_nbytes(t), 480);
    CHECK(rt_tensor_data(t) != NULL);
    CHECK_EQ_INT(((uintptr_t)rt_tensor_data(t)) % 64, 0);
    CHECK(t->grad == NULL && t->grad_fn == NULL && !t->requires_grad);
    CHECK_EQ_INT(live(RT_MEM_DATA) - base_data, 480);
    CHECK_EQ_INT(live_total() - base_total, 480);
    char buf[64];
    CHECK(strcmp(rt_tensor_shape_str(t, buf, sizeof buf), "[2, 3, 4, 5]") == 0);
    char tiny[5];
    rt_tensor_shape_str(t, tiny, sizeof tiny); /* truncated, still terminated */
    CHECK(strlen(tiny) < sizeof tiny);
    rt_tensor_release(t);
    CHECK_EQ_INT(live(RT_MEM_DATA), base_data);

    /* dtype decides the bytes */
    rt_tensor *h = rt_tensor_zeros(4, shape, RT_F16, RT_DEVICE_CPU, RT_MEM_TEMP);
    CHECK(h != NULL);
    CHECK_EQ_INT(rt_tensor_nbytes(h), 240);
    CHECK_EQ_INT(live(RT_MEM_TEMP) - base_temp, 240);
    const uint16_t *hp = rt_tensor_data(h);
    for (int i = 0; i < 120; i++) CHECK_EQ_INT(hp[i], 0);
    rt_tensor_release(h);

    /* 0-d scalar */
    rt_tensor *s = rt_tensor_create(0, NULL, RT_F32, RT_DEVICE_CPU, RT_MEM_TEMP);
    CHECK(s != NULL);
    CHECK_EQ_INT(rt_tensor_numel(s), 1);
    CHECK_EQ_INT(rt_tensor_nbytes(s), 4);
    CHECK(strcmp(rt_tensor_shape_str(s, buf, sizeof buf), "[]") == 0);
    rt_tensor_release(s);

    /* a zero-size dim is valid */
    int64_t z[2] = {0, 7};
    rt_tensor *e = rt_tensor_create(2, z, RT_F32, RT_DEVICE_CPU, RT_MEM_TEMP);
    CHECK(e != NULL);
    CHECK_EQ_INT(rt_tensor_numel(e), 0);
    rt_tensor_release(e);

    /* bad shapes: NULL with RT_ERR_SHAPE's message, nothing booked */
    int64_t six[6] = {1, 1, 1, 1, 1, 1};
    rt_error_clear();
    CHECK(rt_tensor_create(6, six, RT_F32, RT_DEVICE_CPU, RT_MEM_TEMP) == NULL);
    CHECK(rt_error_last()[0] != '\0');
    int64_t neg[2] = {3, -1};
    rt_error_clear();
    CHECK(rt_tensor_create(2, neg, RT_F32, RT_DEVICE_CPU, RT_MEM_TEMP) == NULL);
    CHECK(strstr(rt_error_last(), "-1") != NULL);
    CHECK_EQ_INT(live_total(), base_total);
    rt_tensor_release(NULL); /* no-op */
}

static void test_tensor_view_detach_refcount(void) {
    int64_t base = live(RT_MEM_TEMP);
    int64_t shape[3] = {2, 3, 4};
    float vals[24];
    for (int i = 0; i < 24; i++) vals[i] = (float)i * 0.5f;
    rt_tensor *t = rt_tensor_from_data(3, shape, RT_F32, vals, RT_MEM_TEMP);
    CHECK(t != NULL);
    CHECK(memcmp(rt_tensor_data(t), vals, sizeof vals) == 0);
    CHECK_EQ_INT(live(RT_MEM_TEMP) - base, 96);

    int64_t vshape[2] = {6, 4};
    rt_tensor *v = rt_tensor_view(t, 2, vshape);
    CHECK(v != NULL);
    CHECK(rt_tensor_data(v) == rt_tensor_data(t)); /* shares storage */
    CHECK(v->storage == t->storage);
    CHECK_EQ_INT(v->ndim, 2);
    CHECK_EQ_INT(v->shape[0], 6);
    CHECK_EQ_INT(live(RT_MEM_TEMP) - base, 96); /* no new bytes */
    rt_tensor_f32(v)[5] = 42.0f;
    CHECK(rt_tensor_f32(t)[5] == 42.0f);

    int64_t bad[2] = {5, 5};
    rt_error_clear();
    CHECK(rt_tensor_view(t, 2, bad) == NULL);
    CHECK(strstr(rt_error_last(), "25") != NULL && strstr(rt_error_last(), "24") != NULL);

    /* detach: same storage, no history, does not require grad */
    CHECK_OK(rt_tensor_set_requires_grad(t, true));
    rt_tensor *d = rt_tensor_detach(t);
    CHECK(d != NULL);
    CHECK(d->storage == t->storage);
    CHECK(!d->requires_grad && d->grad_fn == NULL);
    CHECK(rt_tensor_same_shape(d, t));
    CHECK(!rt_tensor_same_shape(d, v));

    /* retain/release: the storage outlives every handle but the last */
    CHECK(rt_tensor_retain(t) == t);
    CHECK_EQ_INT(t->refcount, 2);
    rt_tensor_release(t);
    CHECK_EQ_INT(t->refcount, 1);
    rt_tensor_release(t); /* the original handle is gone */
    CHECK_EQ_INT(live(RT_MEM_TEMP) - base, 96);
    CHECK(rt_tensor_f32(v)[5] == 42.0f); /* still readable through the view */
    rt_tensor_release(v);
    CHECK_EQ_INT(live(RT_MEM_TEMP) - base, 96);
    rt_tensor_release(d); /* last one */
    CHECK_EQ_INT(live(RT_MEM_TEMP), base);
}

static void test_tensor_to_fill_copy(void) {
    int64_t base_grad = live(RT_MEM_GRAD), base_temp = live(RT_MEM_TEMP);
    int64_t shape[1] = {5};
    const float vals[5] = {1.0f, -2.5f, 1.0f + 0x1p-9f, 65520.0f, 3.0f};
    rt_tensor *t = rt_tensor_from_data(1, shape, RT_F32, vals, RT_MEM_TEMP);
    CHECK(t != NULL);
    rt_tensor *b = rt_tensor_to(t, RT_BF16, RT_MEM_GRAD);
    CHECK(b != NULL);
    CHECK_EQ_INT(b->dtype, RT_BF16);
    CHECK_EQ_INT(live(RT_MEM_GRAD) - base_grad, 10);
    const uint16_t *bp = rt_tensor_data(b);
    for (int i = 0; i < 5; i++) CHECK_EQ_INT(bp[i], rt_f32_to_bf16(vals[i]));
    rt_tensor *h = rt_tensor_to(t, RT_F16, RT_MEM_TEMP);
    CHECK(h != NULL);
    const uint16_t *hp = rt_tensor_data(h);
    CHECK_EQ_INT(hp[3], 0x7c00); /* 65520 overflows to Inf in f16 */
    /* copy back converts */
    rt_tensor *back = rt_tensor_zeros_like(t, RT_MEM_TEMP);
    CHECK(back != NULL);
    CHECK_OK(rt_tensor_copy(back, b));
    for (int i = 0; i < 5; i++) CHECK(rt_tensor_f32(back)[i] == rt_bf16_to_f32(bp[i]));
    /* fill in each dtype */
    CHECK_OK(rt_tensor_fill(h, 1.5f));
    for (int i = 0; i < 5; i++) CHECK_EQ_INT(hp[i], 0x3e00);
    CHECK_OK(rt_tensor_fill(b, -2.0f));
    for (int i = 0; i < 5; i++) CHECK_EQ_INT(bp[i], 0xc000);
    rt_tensor *iv = rt_tensor_create(1, shape, RT_I32, RT_DEVICE_CPU, RT_MEM_TEMP);
    CHECK(iv != NULL);
    CHECK_OK(rt_tensor_fill(iv, 7.9f));
    for (int i = 0; i < 5; i++) CHECK_EQ_INT(((int32_t *)rt_tensor_data(iv))[i], 7);
    /* copy with mismatched sizes */
    int64_t six = 6;
    rt_tensor *w = rt_tensor_create(1, &six, RT_F32, RT_DEVICE_CPU, RT_MEM_TEMP);
    CHECK(w != NULL);
    CHECK_EQ_INT(rt_tensor_copy(w, t), RT_ERR_SHAPE);
    /* requires_grad: only float32 leaves (header: RT_ERR_STATE when not a leaf
     * or not floating point) */
    rt_status s = rt_tensor_set_requires_grad(iv, true);
    CHECK(s != RT_OK);
    CHECK(!iv->requires_grad);
    if (s != RT_ERR_DTYPE)
        fprintf(stderr, "set_requires_grad on int32 returned %s, core/tensor.h documents RT_ERR_DTYPE\n",
                rt_status_str(s));
    rt_tensor_release(w);
    rt_tensor_release(iv);
    rt_tensor_release(back);
    rt_tensor_release(h);
    rt_tensor_release(b);
    rt_tensor_release(t);
    CHECK_EQ_INT(live(RT_MEM_GRAD), base_grad);
    CHECK_EQ_INT(live(RT_MEM_TEMP), base_temp);
    CHECK_EQ_INT(s, RT_ERR_DTYPE);
}

static void test_tensor_meta(void) {
    rt_memstats before;
    rt_memstats_get(&before);
    int64_t shape[4] = {8, 16, 32, 32};
    rt_tensor *m = rt_tensor_create(4, shape, RT_F32, RT_DEVICE_META, RT_MEM_DATA);
    CHECK(m != NULL);
    CHECK(rt_tensor_is_meta(m));
    CHECK(rt_tensor_data(m) == NULL);
    rt_memstats mid;
    rt_memstats_get(&mid);
    CHECK_EQ_INT(mid.live[RT_MEM_DATA] - before.live[RT_MEM_DATA], 8 * 16 * 32 * 32 * 4);
    CHECK_EQ_INT(mid.n_alloc - before.n_alloc, 1);
    /* the same shape on cpu books exactly the same */
    rt_tensor *c = rt_tensor_create(4, shape, RT_F32, RT_DEVICE_CPU, RT_MEM_DATA);
    CHECK(c != NULL);
    CHECK_EQ_INT(live(RT_MEM_DATA) - mid.live[RT_MEM_DATA], 8 * 16 * 32 * 32 * 4);
    rt_tensor_release(c);
    /* zeros / fill / copy / to are no-ops on data but keep the accounting */
    rt_tensor *z = rt_tensor_zeros_like(m, RT_MEM_TEMP);
    CHECK(z != NULL && rt_tensor_is_meta(z) && rt_tensor_data(z) == NULL);
    CHECK_OK(rt_tensor_fill(z, 3.0f));
    CHECK_OK(rt_tensor_copy(z, m));
    rt_tensor *zb = rt_tensor_to(z, RT_BF16, RT_MEM_SAVED);
    CHECK(zb != NULL && rt_tensor_is_meta(zb) && rt_tensor_data(zb) == NULL);
    CHECK_EQ_INT(live(RT_MEM_SAVED) - before.live[RT_MEM_SAVED], 8 * 16 * 32 * 32 * 2);
    /* views of meta tensors are meta and share the (empty) storage */
    int64_t flat[2] = {8, 16 * 32 * 32};
    rt_tensor *v = rt_tensor_view(m, 2, flat);
    CHECK(v != NULL && rt_tensor_is_meta(v) && v->storage == m->storage);
    rt_tensor_release(v);
    rt_tensor_release(zb);
    rt_tensor_release(z);
    rt_tensor_release(m);
    rt_memstats after;
    rt_memstats_get(&after);
    for (int k = 0; k < RT_MEM_NCAT; k++) CHECK_EQ_INT(after.live[k], before.live[k]);
    CHECK_EQ_INT(after.n_alloc - after.n_free, before.n_alloc - before.n_free);
}

/* The autograd slot as core sees it: grad_fn points at an object that
 * begins with an rt_autograd_meta, and core releases it through that header
 * alone (no autograd code involved): the tensor's reference is dropped, and
 * the object's own destroy runs once, at the last reference. */
typedef struct fake_node {
    rt_autograd_meta meta;
    int destroyed;
} fake_node;

static void fake_node_destroy(rt_autograd_meta *m) { ((fake_node *)m)->destroyed++; }

static void test_autograd_slot_release(void) {
    fake_node f = {.meta = {.refcount = 2, .destroy = fake_node_destroy}};
    int64_t shape[1] = {3};
    rt_tensor *t = rt_tensor_zeros(1, shape, RT_F32, RT_DEVICE_CPU, RT_MEM_TEMP);
    CHECK(t != NULL);
    t->grad_fn = (struct rt_node *)&f; /* the tensor holds one of the two references */
    rt_tensor_release(t);
    CHECK_EQ_INT(f.meta.refcount, 1);
    CHECK_EQ_INT(f.destroyed, 0);
    rt_autograd_meta_release(&f.meta); /* the last one destroys */
    CHECK_EQ_INT(f.destroyed, 1);
    rt_autograd_meta_release(NULL);    /* no-op */

    /* a real node is released the same way: the tensor's grad_fn dies with it */
    rt_tensor *x = rt_tensor_zeros(1, shape, RT_F32, RT_DEVICE_CPU, RT_MEM_TEMP), *y = NULL;
    CHECK(x != NULL);
    CHECK_OK(rt_tensor_set_requires_grad(x, true));
    CHECK_OK(rt_mul_scalar(x, 2.0f, &y));
    CHECK(y->grad_fn != NULL);
    CHECK_EQ_INT(((rt_autograd_meta *)y->grad_fn)->refcount, 1);
    CHECK_EQ_INT(x->refcount, 2); /* the user's and the node's edge */
    rt_tensor_release(y);
    CHECK_EQ_INT(x->refcount, 1); /* the node's edge to x went with the node */
    rt_tensor_release(x);
}

static void test_storage_mark_saved(void) {
    int64_t bt = live(RT_MEM_TEMP), bs = live(RT_MEM_SAVED), bp = live(RT_MEM_PARAM);
    int64_t n = 100;
    rt_tensor *t = rt_tensor_create(1, &n, RT_F32, RT_DEVICE_CPU, RT_MEM_TEMP);
    rt_tensor *p = rt_tensor_create(1, &n, RT_F32, RT_DEVICE_CPU, RT_MEM_PARAM);
    CHECK(t && p);
    rt_memstats_reset_peaks();
    rt_storage_mark_saved(t->storage, +1);
    CHECK_EQ_INT(live(RT_MEM_TEMP) - bt, 0);
    CHECK_EQ_INT(live(RT_MEM_SAVED) - bs, 400);
    rt_storage_mark_saved(t->storage, +1); /* a second keeper moves nothing */
    CHECK_EQ_INT(live(RT_MEM_SAVED) - bs, 400);
    rt_storage_mark_saved(t->storage, -1);
    CHECK_EQ_INT(live(RT_MEM_SAVED) - bs, 400);
    rt_storage_mark_saved(t->storage, -1); /* the last keeper moves it back */
    CHECK_EQ_INT(live(RT_MEM_SAVED) - bs, 0);
    CHECK_EQ_INT(live(RT_MEM_TEMP) - bt, 400);
    rt_memstats s;
    rt_memstats_get(&s);
    CHECK_EQ_INT(s.peak[RT_MEM_SAVED] - bs, 400);
    /* PARAM storages stay PARAM */
    rt_storage_mark_saved(p->storage, +1);
    CHECK_EQ_INT(live(RT_MEM_SAVED) - bs, 0);
    CHECK_EQ_INT(live(RT_MEM_PARAM) - bp, 400);
    rt_storage_mark_saved(p->storage, -1);
    /* a storage freed while kept is freed from SAVED */
    rt_storage_mark_saved(t->storage, +1);
    rt_tensor_release(t);
    CHECK_EQ_INT(live(RT_MEM_SAVED), bs);
    CHECK_EQ_INT(live(RT_MEM_TEMP), bt);
    rt_tensor_release(p);
    CHECK_EQ_INT(live(RT_MEM_PARAM), bp);
}

/* ---- tracked allocator ----------------------------------------------------- */

static void test_mem_categories_peaks(void) {
    CHECK(strcmp(rt_mem_category_str(RT_MEM_PARAM), "PARAM") == 0);
    CHECK(strcmp(rt_mem_category_str(RT_MEM_GRAD), "GRAD") == 0);
    CHECK(strcmp(rt_mem_category_str(RT_MEM_OPTIM), "OPTIM") == 0);
    CHECK(strcmp(rt_mem_category_str(RT_MEM_SAVED), "SAVED") == 0);
    CHECK(strcmp(rt_mem_category_str(RT_MEM_TEMP), "TEMP") == 0);
    CHECK(strcmp(rt_mem_category_str(RT_MEM_DATA), "DATA") == 0);

    rt_memstats b;
    rt_memstats_get(&b);
    rt_memstats_reset_peaks();
    rt_memstats s;
    rt_memstats_get(&s);
    for (int c = 0; c < RT_MEM_NCAT; c++) CHECK_EQ_INT(s.peak[c], s.live[c]);
    CHECK_EQ_INT(s.peak_total, s.live_total);

    void *a = NULL, *g = NULL, *o = NULL;
    CHECK_OK(rt_mem_alloc(1000, RT_MEM_PARAM, &a));
    CHECK(a != NULL && ((uintptr_t)a % 64) == 0);
    memset(a, 0xab, 1000); /* really usable (ASan checks) */
    CHECK_OK(rt_mem_alloc(3000, RT_MEM_GRAD, &g));
    rt_mem_free(a, 1000, RT_MEM_PARAM);
    CHECK_OK(rt_mem_alloc(500, RT_MEM_OPTIM, &o));
    rt_memstats_get(&s);
    CHECK_EQ_INT(s.live[RT_MEM_PARAM] - b.live[RT_MEM_PARAM], 0);
    CHECK_EQ_INT(s.peak[RT_MEM_PARAM] - b.live[RT_MEM_PARAM], 1000);
    CHECK_EQ_INT(s.live[RT_MEM_GRAD] - b.live[RT_MEM_GRAD], 3000);
    CHECK_EQ_INT(s.peak[RT_MEM_GRAD] - b.live[RT_MEM_GRAD], 3000);
    CHECK_EQ_INT(s.live[RT_MEM_OPTIM] - b.live[RT_MEM_OPTIM], 500);
    CHECK_EQ_INT(s.live_total - b.live_total, 3500);
    /* the total peak is the peak of the sum (4000), not the sum of peaks (4500) */
    CHECK_EQ_INT(s.peak_total - b.live_total, 4000);
    CHECK_EQ_INT(s.n_alloc - b.n_alloc, 3);
    CHECK_EQ_INT(s.n_free - b.n_free, 1);
    int64_t sum = 0;
    for (int c = 0; c < RT_MEM_NCAT; c++) sum += s.live[c];
    CHECK_EQ_INT(sum, s.live_total);

    /* move: live shifts, total unchanged, destination peak updated */
    rt_mem_move(3000, RT_MEM_GRAD, RT_MEM_SAVED);
    rt_memstats_get(&s);
    CHECK_EQ_INT(s.live[RT_MEM_GRAD] - b.live[RT_MEM_GRAD], 0);
    CHECK_EQ_INT(s.live[RT_MEM_SAVED] - b.live[RT_MEM_SAVED], 3000);
    CHECK_EQ_INT(s.peak[RT_MEM_SAVED] - b.live[RT_MEM_SAVED], 3000);
    CHECK_EQ_INT(s.live_total - b.live_total, 3500);
    rt_mem_move(3000, RT_MEM_SAVED, RT_MEM_GRAD);

    /* reset peaks brings each peak down to the live value */
    rt_memstats_reset_peaks();
    rt_memstats_get(&s);
    CHECK_EQ_INT(s.peak[RT_MEM_PARAM], s.live[RT_MEM_PARAM]);
    CHECK_EQ_INT(s.peak_total, s.live_total);

    /* meta accounting books the same way */
    CHECK_OK(rt_mem_account(777, RT_MEM_DATA));
    CHECK_EQ_INT(live(RT_MEM_DATA) - b.live[RT_MEM_DATA], 777);
    rt_mem_unaccount(777, RT_MEM_DATA);
    CHECK_EQ_INT(live(RT_MEM_DATA), b.live[RT_MEM_DATA]);

    /* zero-byte allocations are valid unique pointers */
    void *z1 = NULL, *z2 = NULL;
    CHECK_OK(rt_mem_alloc(0, RT_MEM_TEMP, &z1));
    CHECK_OK(rt_mem_alloc(0, RT_MEM_TEMP, &z2));
    CHECK(z1 && z2 && z1 != z2);
    rt_mem_free(z1, 0, RT_MEM_TEMP);
    rt_mem_free(z2, 0, RT_MEM_TEMP);
    rt_mem_free(NULL, 0, RT_MEM_TEMP); /* no-op */

    rt_mem_free(g, 3000, RT_MEM_GRAD);
    rt_mem_free(o, 500, RT_MEM_OPTIM);
    rt_memstats_get(&s);
    for (int c = 0; c < RT_MEM_NCAT; c++) CHECK_EQ_INT(s.live[c], b.live[c]);

    /* the table prints every category */
    char path[256];
    snprintf(path, sizeof path, "%s/stats.txt", tmp_dir());
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    rt_memstats_print(f);
    fclose(f);
    f = fopen(path, "r");
    CHECK(f != NULL);
    char text[2048] = {0};
    size_t got = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    CHECK(got > 0);
    for (int c = 0; c < RT_MEM_NCAT; c++) CHECK(strstr(text, rt_mem_category_str(c)) != NULL);
}

static void test_mem_limit(void) {
    CHECK_EQ_INT(rt_mem_get_limit(), 0);
    rt_memstats b;
    rt_memstats_get(&b);
    int64_t limit = b.live_total + 5000;
    rt_mem_set_limit(limit);
    CHECK_EQ_INT(rt_mem_get_limit(), limit);

    void *p = (void *)0x1;
    const char *prev = rt_mem_set_op("limit_test_op");
    rt_error_clear();
    rt_status s = rt_mem_alloc(6000, RT_MEM_SAVED, &p);
    rt_mem_set_op(prev);
    CHECK_EQ_INT(s, RT_ERR_OOM);
    CHECK(p == NULL);
    const char *msg = rt_error_last();
    char lim[32];
    snprintf(lim, sizeof lim, "%lld", (long long)limit);
    if (!strstr(msg, "6000") || !strstr(msg, lim) || !strstr(msg, "SAVED") || !strstr(msg, "limit_test_op"))
        fprintf(stderr, "OOM message: %s\n", msg);
    CHECK(strstr(msg, "6000") != NULL);      /* the bytes asked for */
    CHECK(strstr(msg, lim) != NULL);         /* the limit */
    CHECK(strstr(msg, "SAVED") != NULL);     /* the category */
    CHECK(strstr(msg, "limit_test_op") != NULL); /* the op */
    rt_memstats a;
    rt_memstats_get(&a);
    CHECK(memcmp(&a, &b, sizeof a) == 0); /* counters untouched, peaks included */

    /* exactly up to the limit is fine; one byte more is not */
    void *q = NULL, *r = NULL;
    CHECK_OK(rt_mem_alloc(5000, RT_MEM_TEMP, &q));
    CHECK_EQ_INT(rt_mem_alloc(1, RT_MEM_TEMP, &r), RT_ERR_OOM);
    CHECK(r == NULL);
    /* meta accounting obeys the limit too */
    CHECK_EQ_INT(rt_mem_account(1, RT_MEM_DATA), RT_ERR_OOM);
    int64_t shape[1] = {16};
    CHECK(rt_tensor_create(1, shape, RT_F32, RT_DEVICE_META, RT_MEM_DATA) == NULL);
    CHECK(rt_tensor_create(1, shape, RT_F32, RT_DEVICE_CPU, RT_MEM_DATA) == NULL);
    rt_mem_free(q, 5000, RT_MEM_TEMP);
    rt_memstats_get(&a);
    CHECK_EQ_INT(a.live_total, b.live_total);

    /* 0 or negative removes the limit */
    rt_mem_set_limit(-5);
    CHECK_EQ_INT(rt_mem_get_limit(), 0);
    CHECK_OK(rt_mem_alloc(1 << 20, RT_MEM_TEMP, &q));
    rt_mem_free(q, 1 << 20, RT_MEM_TEMP);
    rt_mem_set_limit(0);
}

/* Raises the limit in small steps until a conv forward (with autograd) fits.
 * Every failure must be clean: RT_ERR_OOM, no output, live bytes unchanged. */
static void test_mem_limit_conv_steps(void) {
    int64_t xs[4] = {2, 3, 8, 8}, ws[4] = {4, 3, 3, 3}, bs[1] = {4};
    rt_tensor *x = rt_tensor_create(4, xs, RT_F32, RT_DEVICE_CPU, RT_MEM_DATA);
    rt_tensor *w = rt_tensor_create(4, ws, RT_F32, RT_DEVICE_CPU, RT_MEM_PARAM);
    rt_tensor *bias = rt_tensor_create(1, bs, RT_F32, RT_DEVICE_CPU, RT_MEM_PARAM);
    CHECK(x && w && bias);
    float *xp = rt_tensor_f32(x), *wp = rt_tensor_f32(w);
    for (int i = 0; i < 2 * 3 * 64; i++) xp[i] = (float)((i * 37) % 17) / 17.0f - 0.5f;
    for (int i = 0; i < 4 * 27; i++) wp[i] = (float)((i * 11) % 13) / 13.0f - 0.5f;
    CHECK_OK(rt_tensor_fill(bias, 0.25f));
    CHECK_OK(rt_tensor_set_requires_grad(w, true));
    rt_conv_opts o = {.padding = {1, 1}};

    /* reference result without a limit */
    rt_tensor *ref = NULL;
    CHECK_OK(rt_conv(x, w, bias, &o, &ref));
    int64_t y_bytes = (int64_t)rt_tensor_nbytes(ref);
    CHECK_EQ_INT(y_bytes, 2 * 4 * 8 * 8 * 4);

    rt_memstats base;
    rt_memstats_get(&base);
    const int64_t step = 256;
    int failures = 0;
    rt_tensor *y = NULL;
    int64_t prev_limit = 0;
    for (int64_t extra = 0; extra <= (int64_t)1 << 24; extra += step) {
        rt_mem_set_limit(base.live_total + extra);
        rt_memstats_reset_peaks();
        rt_memstats before;
        rt_memstats_get(&before);
        rt_error_clear();
        rt_status s = rt_conv(x, w, bias, &o, &y);
        if (s == RT_OK) {
            rt_memstats after;
            rt_memstats_get(&after);
            /* the run stayed under this limit and needed more than the last one */
            CHECK(after.peak_total <= base.live_total + extra);
            if (failures) CHECK(after.peak_total > prev_limit);
            break;
        }
        failures++;
        prev_limit = base.live_total + extra;
        CHECK_EQ_INT(s, RT_ERR_OOM);
        CHECK(y == NULL);
        CHECK(strstr(rt_error_last(), "limit") != NULL);
        rt_memstats after;
        rt_memstats_get(&after);
        for (int c = 0; c < RT_MEM_NCAT; c++) CHECK_EQ_INT(after.live[c], before.live[c]);
        CHECK_EQ_INT(after.n_alloc - after.n_free, before.n_alloc - before.n_free);
    }
    rt_mem_set_limit(0);
    CHECK(y != NULL);
    CHECK(failures >= (int)(y_bytes / step)); /* at least the output itself did not fit */
    CHECK(y->grad_fn != NULL);
    CHECK(memcmp(rt_tensor_data(y), rt_tensor_data(ref), (size_t)y_bytes) == 0);
    rt_tensor_release(y);
    rt_tensor_release(ref);
    rt_memstats end;
    rt_memstats_get(&end);
    CHECK_EQ_INT(end.live_total, base.live_total - y_bytes);
    rt_tensor_release(x);
    rt_tensor_release(w);
    rt_tensor_release(bias);
}

static void test_mem_trace(void) {
    rt_mem_trace_enable(1);
    size_t n = 99;
    rt_mem_trace_events(&n);
    CHECK_EQ_INT(n, 0);
    int64_t base_total = live_total();
    const char *prev = rt_mem_set_op("trace_op_a");
    void *a = NULL, *b = NULL;
    CHECK_OK(rt_mem_alloc(128, RT_MEM_PARAM, &a));
    rt_mem_set_op("trace_op_b");
    CHECK_OK(rt_mem_alloc(64, RT_MEM_TEMP, &b));
    CHECK_OK(rt_mem_account(32, RT_MEM_DATA));
    rt_mem_unaccount(32, RT_MEM_DATA);
    rt_mem_free(a, 128, RT_MEM_PARAM);
    rt_mem_set_op(prev);
    rt_mem_free(b, 64, RT_MEM_TEMP);

    const rt_mem_event *ev = rt_mem_trace_events(&n);
    CHECK_EQ_INT(n, 6);
    const struct { int64_t d; rt_mem_category c; const char *op; int64_t total; } want[6] = {
        {128, RT_MEM_PARAM, "trace_op_a", base_total + 128},
        {64, RT_MEM_TEMP, "trace_op_b", base_total + 192},
        {32, RT_MEM_DATA, "trace_op_b", base_total + 224},
        {-32, RT_MEM_DATA, "trace_op_b", base_total + 192},
        {-128, RT_MEM_PARAM, "trace_op_b", base_total + 64},
        {-64, RT_MEM_TEMP, prev ? prev : "", base_total},
    };
    for (size_t i = 0; i < 6; i++) {
        CHECK_EQ_INT(ev[i].delta_bytes, want[i].d);
        CHECK_EQ_INT(ev[i].category, want[i].c);
        CHECK(ev[i].op != NULL && strcmp(ev[i].op, want[i].op) == 0);
        CHECK_EQ_INT(ev[i].live_total, want[i].total);
        CHECK(ev[i].time_s >= 0.0);
        if (i) CHECK(ev[i].time_s >= ev[i - 1].time_s);
    }

    char path[256];
    snprintf(path, sizeof path, "%s/trace.csv", tmp_dir());
    CHECK_OK(rt_mem_trace_write_csv(path));
    FILE *f = fopen(path, "r");
    CHECK(f != NULL);
    char line[512];
    int lines = 0, found_a = 0, found_free = 0;
    CHECK(fgets(line, sizeof line, f) != NULL);
    CHECK(strcmp(line, "time_s,delta_bytes,category,op,module,live_total\n") == 0);
    while (fgets(line, sizeof line, f)) {
        lines++;
        char tail[128];
        snprintf(tail, sizeof tail, ",128,PARAM,trace_op_a,-,%lld\n", (long long)(base_total + 128));
        if (strstr(line, tail)) found_a = 1;
        snprintf(tail, sizeof tail, ",-128,PARAM,trace_op_b,-,%lld\n", (long long)(base_total + 64));
        if (strstr(line, tail)) found_free = 1;
        int commas = 0;
        for (char *c = line; *c; c++) commas += *c == ',';
        CHECK_EQ_INT(commas, 5);
    }
    fclose(f);
    CHECK_EQ_INT(lines, 6);
    CHECK(found_a && found_free);

    /* an unwritable path is an IO error, not a crash */
    char bad[300];
    snprintf(bad, sizeof bad, "%s/no/such/dir/trace.csv", tmp_dir());
    CHECK_EQ_INT(rt_mem_trace_write_csv(bad), RT_ERR_IO);

    /* re-enabling clears; disabling stops recording */
    rt_mem_trace_enable(1);
    rt_mem_trace_events(&n);
    CHECK_EQ_INT(n, 0);
    CHECK_OK(rt_mem_alloc(8, RT_MEM_TEMP, &a));
    rt_mem_free(a, 8, RT_MEM_TEMP);
    rt_mem_trace_events(&n);
    CHECK_EQ_INT(n, 2);
    rt_mem_trace_enable(0);
    CHECK_OK(rt_mem_alloc(8, RT_MEM_TEMP, &a));
    rt_mem_free(a, 8, RT_MEM_TEMP);
    rt_mem_trace_events(&n);
    CHECK_EQ_INT(n, 0);
}

/* The trace CSV is RFC 4180: an op or module holding commas, quotes or a
 * line break is quoted with quotes doubled (oneDNN's op descriptions hold
 * commas; the file had rows of 5, 7 and 10 fields), the module slot is
 * recorded, and interned strings are shared. */
static void test_mem_trace_csv_quoting(void) {
    const char *a = rt_mem_intern("layer2.1.conv1"), *b = rt_mem_intern("layer2.1.conv1");
    CHECK(a != NULL && a == b && strcmp(a, "layer2.1.conv1") == 0);
    CHECK(rt_mem_intern(NULL) == NULL);
    rt_mem_trace_enable(1);
    const char *prev_op = rt_mem_set_op("conv (n=1, c=2) \"fast\"");
    const char *prev_mod = rt_mem_set_module(a);
    CHECK(rt_mem_module() == a);
    void *p = NULL;
    CHECK_OK(rt_mem_alloc(16, RT_MEM_TEMP, &p));
    rt_mem_set_op("line\nbreak");
    rt_mem_set_module(NULL);
    rt_mem_free(p, 16, RT_MEM_TEMP);
    rt_mem_set_op(prev_op);
    rt_mem_set_module(prev_mod);
    size_t n;
    const rt_mem_event *ev = rt_mem_trace_events(&n);
    CHECK_EQ_INT(n, 2);
    CHECK(ev[0].module == a && strcmp(ev[1].module, "-") == 0);
    char path[256];
    snprintf(path, sizeof path, "%s/trace_quoted.csv", tmp_dir());
    CHECK_OK(rt_mem_trace_write_csv(path));
    rt_mem_trace_enable(0);
    FILE *f = fopen(path, "r");
    CHECK(f != NULL);
    char buf[1024];
    size_t len = fread(buf, 1, sizeof buf - 1, f);
    buf[len] = '\0';
    fclose(f);
    CHECK(strstr(buf, ",TEMP,\"conv (n=1, c=2) \"\"fast\"\"\",layer2.1.conv1,") != NULL);
    CHECK(strstr(buf, ",TEMP,\"line\nbreak\",-,") != NULL);
    /* the field writer alone: plain text unquoted, NULL and NULL file harmless */
    snprintf(path, sizeof path, "%s/fields.csv", tmp_dir());
    f = fopen(path, "w");
    CHECK(f != NULL);
    rt_csv_write_field(f, "plain");
    rt_csv_write_field(f, NULL);
    rt_csv_write_field(f, "a\"b");
    rt_csv_write_field(NULL, "x");
    fclose(f);
    f = fopen(path, "r");
    len = fread(buf, 1, sizeof buf - 1, f);
    buf[len] = '\0';
    fclose(f);
    CHECK(strcmp(buf, "plain\"a\"\"b\"") == 0);
}

/* Op allocations appear in the trace: forward output booked TEMP then moved
 * to SAVED, backward allocations under the node's name, and everything
 * balances out once the graph is gone. */
static void test_mem_trace_ops(void) {
    int64_t shape[2] = {4, 8};
    rt_tensor *x = rt_tensor_create(2, shape, RT_F32, RT_DEVICE_CPU, RT_MEM_DATA);
    rt_tensor *g = rt_tensor_create(2, shape, RT_F32, RT_DEVICE_CPU, RT_MEM_DATA);
    CHECK(x && g);
    CHECK_OK(rt_tensor_fill(x, 1.0f));
    CHECK_OK(rt_tensor_fill(g, 1.0f));
    CHECK_OK(rt_tensor_set_requires_grad(x, true));
    rt_mem_trace_enable(1);
    rt_tensor *y = NULL;
    CHECK_OK(rt_relu(x, &y));
    size_t n;
    const rt_mem_event *ev = rt_mem_trace_events(&n);
    int plus_temp = 0, plus_saved = 0, minus_temp = 0;
    for (size_t i = 0; i < n; i++) {
        plus_temp += ev[i].category == RT_MEM_TEMP && ev[i].delta_bytes == 128;
        minus_temp += ev[i].category == RT_MEM_TEMP && ev[i].delta_bytes == -128;
        plus_saved += ev[i].category == RT_MEM_SAVED && ev[i].delta_bytes == 128;
    }
    CHECK_EQ_INT(plus_temp, 1);  /* the output */
    CHECK_EQ_INT(minus_temp, 1); /* ... leaves TEMP */
    CHECK_EQ_INT(plus_saved, 1); /* ... for SAVED: relu keeps its output */
    size_t n_fwd = n;
    CHECK_OK(rt_backward(y, g, false));
    ev = rt_mem_trace_events(&n);
    int relu_grad = 0, grad_acc = 0;
    for (size_t i = n_fwd; i < n; i++) {
        relu_grad += ev[i].category == RT_MEM_TEMP && ev[i].delta_bytes == 128 &&
                     strcmp(ev[i].op, "backward:relu") == 0;
        grad_acc += ev[i].category == RT_MEM_GRAD && ev[i].delta_bytes == 128;
    }
    /* under "backward:" and the node's name: relu's input gradient, and its
     * saved output going back from SAVED to TEMP when the node is done */
    CHECK_EQ_INT(relu_grad, 2);
    CHECK_EQ_INT(grad_acc, 1);  /* x.grad */
    rt_tensor_release(y);
    ev = rt_mem_trace_events(&n);
    int64_t sum[RT_MEM_NCAT] = {0};
    for (size_t i = 0; i < n; i++) sum[ev[i].category] += ev[i].delta_bytes;
    CHECK_EQ_INT(sum[RT_MEM_TEMP], 0);
    CHECK_EQ_INT(sum[RT_MEM_SAVED], 0);
    CHECK_EQ_INT(sum[RT_MEM_GRAD], 128);
    CHECK_EQ_INT(ev[n - 1].live_total, live_total());
    rt_mem_trace_enable(0);
    rt_tensor_release(x);
    rt_tensor_release(g);
}

/* ---- Philox ---------------------------------------------------------------- */

static void test_philox_kat(void) {
    /* Random123 kat_vectors, philox4x32 with 10 rounds */
    static const struct { uint32_t ctr[4], key[2], out[4]; } kat[] = {
        {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}},
        {{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}, {0xffffffffu, 0xffffffffu},
         {0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}},
        {{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}, {0xa4093822u, 0x299f31d0u},
         {0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}},
    };
    for (size_t i = 0; i < 3; i++) {
        uint32_t out[4];
        rt_philox4x32_10(kat[i].ctr, kat[i].key, out);
        for (int j = 0; j < 4; j++) {
            if (out[j] != kat[i].out[j])
                fprintf(stderr, "philox kat %zu word %d: got 0x%08x want 0x%08x\n", i, j, out[j],
                        kat[i].out[j]);
            CHECK_EQ_INT(out[j], kat[i].out[j]);
        }
    }
}

static void test_philox_uniform_pure(void) {
    enum { N = 1000, M = 333 };
    float *a = malloc(sizeof(float) * (N + M)), *b = malloc(sizeof(float) * (N + M)),
          *c = malloc(sizeof(float) * N), *d = malloc(sizeof(float) * M);
    CHECK(a && b && c && d);
    const uint64_t seed = 0x0123456789abcdefull;
    rt_philox_uniform(seed, 17, N + M, a);
    rt_philox_uniform(seed, 17, N + M, b);
    CHECK(memcmp(a, b, sizeof(float) * (N + M)) == 0); /* same (seed, offset), same numbers */
    /* n then m equals n+m when n % 4 == 0 */
    rt_philox_uniform(seed, 17, N, c);
    rt_philox_uniform(seed, 17 + rt_philox_blocks(N), M, d);
    CHECK(memcmp(a, c, sizeof(float) * N) == 0);
    CHECK(memcmp(a + N, d, sizeof(float) * M) == 0);
    CHECK_EQ_INT(rt_philox_blocks(N), 250);
    CHECK_EQ_INT(rt_philox_blocks(1), 1);
    CHECK_EQ_INT(rt_philox_blocks(5), 2);
    CHECK_EQ_INT(rt_philox_blocks(0), 0);
    /* element i comes from block offset + i/4, word i%4 (24-bit precision) */
    for (int i = 0; i < 64; i++) {
        uint64_t blk = 17 + (uint64_t)(i / 4);
        const uint32_t ctr[4] = {(uint32_t)blk, (uint32_t)(blk >> 32), 0, 0};
        const uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
        uint32_t r[4];
        rt_philox4x32_10(ctr, key, r);
        CHECK(fabs((double)a[i] - r[i % 4] * 0x1p-32) < 0x1p-23);
    }
    /* skipping ahead across the 2^32-block boundary (high counter word) */
    const uint64_t far = 0xfffffffeull;
    rt_philox_uniform(seed, far, 16, c);
    rt_philox_uniform(seed, far + 2, 8, d);
    CHECK(memcmp(c + 8, d, 8 * sizeof(float)) == 0);
    rt_philox_uniform(seed, 0, 8, d); /* blocks 2^32.. must differ from blocks 0.. */
    CHECK(memcmp(c + 8, d, 8 * sizeof(float)) != 0);
    /* different seeds (also differing only in the high word) give different streams */
    rt_philox_uniform(seed ^ (1ull << 40), 17, N, c);
    CHECK(memcmp(a, c, sizeof(float) * N) != 0);
    rt_philox_uniform(seed + 1, 17, N, c);
    CHECK(memcmp(a, c, sizeof(float) * N) != 0);
    free(a);
    free(b);
    free(c);
    free(d);
}

static void test_philox_uniform_stats(void) {
    enum { N = 1 << 20 };
    float *u = malloc(sizeof(float) * N);
    CHECK(u != NULL);
    rt_philox_uniform(42, 0, N, u);
    double sum = 0, sumsq = 0;
    int below_quarter = 0;
    for (int i = 0; i < N; i++) {
        if (!(u[i] >= 0.0f && u[i] < 1.0f)) {
            fprintf(stderr, "u[%d] = %g\n", i, u[i]);
            free(u);
            CHECK(0);
        }
        sum += u[i];
        sumsq += (double)u[i] * u[i];
        below_quarter += u[i] < 0.25f;
    }
    double mean = sum / N, var = sumsq / N - mean * mean;
    free(u);
    CHECK_NEAR(mean, 0.5, 0.002);             /* σ of the mean ≈ 0.0003 */
    CHECK_NEAR(var, 1.0 / 12.0, 0.002);
    CHECK_NEAR((double)below_quarter / N, 0.25, 0.003);
}

static void test_generator(void) {
    rt_generator g = {.seed = 7, .offset = 3};
    float a[10], b[12];
    rt_generator_uniform(&g, 10, a);
    CHECK_EQ_INT(g.offset, 3 + 3); /* ceil(10/4) blocks */
    rt_philox_uniform(7, 3, 12, b);
    CHECK(memcmp(a, b, sizeof a) == 0);
    rt_generator_uniform(&g, 4, a);
    rt_philox_uniform(7, 6, 4, b);
    CHECK(memcmp(a, b, 4 * sizeof(float)) == 0);
    CHECK_EQ_INT(g.offset, 7);

    /* default generator: manual_seed resets the offset; thread-local */
    rt_manual_seed(1234);
    rt_generator *d = rt_default_generator();
    CHECK(d != NULL);
    CHECK_EQ_INT(d->seed, 1234);
    CHECK_EQ_INT(d->offset, 0);
    rt_generator_uniform(d, 5, a);
    CHECK_EQ_INT(d->offset, 2);
    rt_manual_seed(1234);
    CHECK_EQ_INT(rt_default_generator()->offset, 0);

    /* normals: mean and std as asked, deterministic from (seed, offset) */
    enum { N = 200001 }; /* odd: exercises the trailing element */
    float *z = malloc(sizeof(float) * N), *z2 = malloc(sizeof(float) * N);
    CHECK(z && z2);
    rt_generator g1 = {.seed = 99, .offset = 0}, g2 = {.seed = 99, .offset = 0};
    rt_generator_normal(&g1, N, 2.0f, 3.0f, z);
    rt_generator_normal(&g2, N, 2.0f, 3.0f, z2);
    int same = memcmp(z, z2, sizeof(float) * N) == 0;
    double sum = 0, sumsq = 0;
    int finite = 1;
    for (int i = 0; i < N; i++) {
        finite = finite && isfinite(z[i]);
        sum += z[i];
        sumsq += (double)z[i] * z[i];
    }
    free(z);
    free(z2);
    CHECK(same);
    CHECK(finite);
    CHECK(g1.offset >= rt_philox_blocks(N));
    double mean = sum / N, sd = sqrt(sumsq / N - mean * mean);
    CHECK_NEAR(mean, 2.0, 0.03);
    CHECK_NEAR(sd, 3.0, 0.03);
}

RT_TEST_MAIN({"status_strings", test_status_strings}, {"error_messages", test_error_messages},
             {"rt_try", test_rt_try}, {"dtype_sizes_names", test_dtype_sizes_names},
             {"bf16_crafted", test_bf16_crafted},
             {"bf16_all_values_round_trip", test_bf16_all_values_round_trip},
             {"bf16_f16_random_vs_reference", test_bf16_f16_random_vs_reference},
             {"dtype_round_matches_conversion", test_dtype_round_matches_conversion},
             {"f16_crafted", test_f16_crafted},
             {"f16_all_values_round_trip", test_f16_all_values_round_trip},
             {"dtype_convert", test_dtype_convert},
             {"tensor_create_release", test_tensor_create_release},
             {"tensor_view_detach_refcount", test_tensor_view_detach_refcount},
             {"tensor_to_fill_copy", test_tensor_to_fill_copy}, {"tensor_meta", test_tensor_meta},
             {"autograd_slot_release", test_autograd_slot_release},
             {"storage_mark_saved", test_storage_mark_saved},
             {"mem_categories_peaks", test_mem_categories_peaks}, {"mem_limit", test_mem_limit},
             {"mem_limit_conv_steps", test_mem_limit_conv_steps}, {"mem_trace", test_mem_trace},
             {"mem_trace_ops", test_mem_trace_ops}, {"mem_trace_csv_quoting", test_mem_trace_csv_quoting},
             {"philox_kat", test_philox_kat},
             {"philox_uniform_pure", test_philox_uniform_pure},
             {"philox_uniform_stats", test_philox_uniform_stats}, {"generator", test_generator})
