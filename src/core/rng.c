#include "core/rng.h"

#include <math.h>

#define RT_PI 3.14159265358979323846

/* Multipliers and Weyl key increments from Salmon et al. 2011, Table 2. */
#define RT_PHILOX_M0 0xD2511F53u
#define RT_PHILOX_M1 0xCD9E8D57u
#define RT_PHILOX_W0 0x9E3779B9u
#define RT_PHILOX_W1 0xBB67AE85u

void rt_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]) {
    if (!ctr || !key || !out) return;
    uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3];
    uint32_t k0 = key[0], k1 = key[1];
    for (int round = 0; round < 10; round++) {
        uint64_t p0 = (uint64_t)RT_PHILOX_M0 * c0;
        uint64_t p1 = (uint64_t)RT_PHILOX_M1 * c2;
        uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0;
        uint32_t n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
        c0 = n0;
        c1 = (uint32_t)p1;
        c2 = n2;
        c3 = (uint32_t)p0;
        k0 += RT_PHILOX_W0;
        k1 += RT_PHILOX_W1;
    }
    out[0] = c0; out[1] = c1; out[2] = c2; out[3] = c3;
}

void rt_philox_uniform(uint64_t seed, uint64_t offset, int64_t n, float *out) {
    if (!out) return;
    const uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
    for (int64_t i = 0; i < n; i += 4) {
        uint64_t block = offset + (uint64_t)(i / 4);
        const uint32_t ctr[4] = {(uint32_t)block, (uint32_t)(block >> 32), 0, 0};
        uint32_t r[4];
        rt_philox4x32_10(ctr, key, r);
        for (int j = 0; j < 4 && i + j < n; j++)
            out[i + j] = (float)(r[j] >> 8) * (1.0f / 16777216.0f); /* 24 random bits: [0,1) */
    }
}

void rt_generator_uniform(rt_generator *g, int64_t n, float *out) {
    if (!g || !out || n <= 0) return;
    rt_philox_uniform(g->seed, g->offset, n, out);
    g->offset += rt_philox_blocks(n);
}

void rt_generator_normal(rt_generator *g, int64_t n, float mean, float std, float *out) {
    if (!g || !out || n <= 0) return;
    rt_generator_uniform(g, n, out);
    for (int64_t i = 0; i + 1 < n; i += 2) {
        double u1 = 1.0 - out[i], u2 = out[i + 1]; /* u1 in (0,1]: log is finite */
        double r = sqrt(-2.0 * log(u1));
        out[i] = (float)(mean + std * r * cos(2.0 * RT_PI * u2));
        out[i + 1] = (float)(mean + std * r * sin(2.0 * RT_PI * u2));
    }
    if (n % 2) {
        float extra[2];
        rt_generator_uniform(g, 2, extra);
        double r = sqrt(-2.0 * log(1.0 - extra[0]));
        out[n - 1] = (float)(mean + std * r * cos(2.0 * RT_PI * extra[1]));
    }
}

static _Thread_local rt_generator rt_tls_generator;

rt_generator *rt_default_generator(void) { return &rt_tls_generator; }

void rt_manual_seed(uint64_t seed) {
    rt_tls_generator.seed = seed;
    rt_tls_generator.offset = 0;
}
