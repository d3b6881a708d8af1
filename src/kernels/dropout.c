/* kernels/dropout.h: the loop that was inline in ops/dropout.c, unchanged. */
#include "kernels/dropout.h"

#include "core/mem.h"
#include "core/rng.h"

size_t rt_kernel_dropout_temp_bytes(int64_t n) { return n > 0 ? (size_t)n * sizeof(float) : 0; }

rt_status rt_kernel_dropout(uint64_t seed, uint64_t offset, float p, int64_t n, const float *in, float *out) {
    if (n <= 0) return RT_OK;
    if (!in || !out) return rt_error_set(RT_ERR_INVALID_ARG, "rt_kernel_dropout: in or out is NULL");
    float *u;
    RT_TRY(rt_mem_alloc(rt_kernel_dropout_temp_bytes(n), RT_MEM_TEMP, (void **)&u));
    rt_philox_uniform(seed, offset, n, u);
    float scale = 1.0f / (1.0f - p);
    for (int64_t i = 0; i < n; i++) out[i] = u[i] >= p ? in[i] * scale : 0.0f;
    rt_mem_free(u, rt_kernel_dropout_temp_bytes(n), RT_MEM_TEMP);
    return RT_OK;
}
