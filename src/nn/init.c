/* Parameter initialisation from a model's Philox stream (nn/modules.h). */
#include "nn/modules.h"

void rt_init_uniform(rt_init_ctx *ctx, rt_tensor *t, float bound) {
    if (!ctx || !t || t->dtype != RT_F32) return;
    int64_t n = rt_tensor_numel(t);
    rt_tensor_bump_version(t);
    if (rt_tensor_is_meta(t)) {
        ctx->gen.offset += rt_philox_blocks(n);
        return;
    }
    float *p = rt_tensor_f32(t);
    rt_generator_uniform(&ctx->gen, n, p);
    for (int64_t i = 0; i < n; i++) p[i] = (2.0f * p[i] - 1.0f) * bound;
}

void rt_init_normal(rt_init_ctx *ctx, rt_tensor *t, float std) {
    if (!ctx || !t || t->dtype != RT_F32) return;
    rt_tensor_bump_version(t);
    if (rt_tensor_is_meta(t)) {
        ctx->gen.offset += rt_philox_blocks(rt_tensor_numel(t) + 1);
        return;
    }
    rt_generator_normal(&ctx->gen, rt_tensor_numel(t), 0.0f, std, rt_tensor_f32(t));
}
