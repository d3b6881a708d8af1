/* Dropout with a Philox mask regenerated from (seed, offset) instead of stored. */
#include <stdlib.h>

#include "core/rng.h"
#include "ops/op_util.h"
#include "ops/ops.h"

typedef struct rt_dropout_ctx {
    uint64_t seed, offset;
    float p;
} rt_dropout_ctx;

/* out = in · mask / (1-p), mask_i = (u_i >= p) with u from Philox(seed, offset). */
static rt_status rt_dropout_apply(const rt_dropout_ctx *c, int64_t n, const float *in, float *out) {
    float *u;
    RT_TRY(rt_mem_alloc((size_t)n * sizeof(float), RT_MEM_TEMP, (void **)&u));
    rt_philox_uniform(c->seed, c->offset, n, u);
    float scale = 1.0f / (1.0f - c->p);
    for (int64_t i = 0; i < n; i++) out[i] = u[i] >= c->p ? in[i] * scale : 0.0f;
    rt_mem_free(u, (size_t)n * sizeof(float), RT_MEM_TEMP);
    return RT_OK;
}

static rt_status rt_dropout_backward(rt_node *self, rt_tensor *const *grad_out, rt_tensor **grad_in) {
    rt_tensor *dy = grad_out[0];
    if (!(grad_in[0] = rt_tensor_empty_like(dy, RT_MEM_TEMP))) return RT_ERR_OOM;
    if (!rt_op_compute(dy)) return RT_OK;
    return rt_dropout_apply(self->ctx, rt_tensor_numel(dy), rt_tensor_f32(dy), rt_tensor_f32(grad_in[0]));
}

rt_status rt_dropout(rt_tensor *x, float p, bool training, rt_tensor **out) {
    RT_TRY(rt_op_check_out(out, "dropout"));
    *out = NULL;
    RT_TRY(rt_op_check_f32(x, "dropout", "input"));
    if (!(p >= 0.0f && p < 1.0f))
        return rt_error_set(RT_ERR_INVALID_ARG, "dropout: probability must be in [0, 1), got %g", p);
    if (!training || p == 0.0f) {
        *out = rt_tensor_retain(x);
        return RT_OK;
    }
    rt_generator *g = rt_default_generator();
    rt_dropout_ctx c = {g->seed, g->offset, p};
    /* The stream always advances by the draw's size, on meta too, so the
     * generator state after a step is the same whatever the device. */
    g->offset += rt_philox_blocks(rt_tensor_numel(x));
    rt_tensor *y = rt_tensor_empty_like(x, RT_MEM_TEMP);
    if (!y) return RT_ERR_OOM;
    rt_status st = RT_OK;
    if (rt_op_compute(x)) st = rt_dropout_apply(&c, rt_tensor_numel(x), rt_tensor_f32(x), rt_tensor_f32(y));
    rt_node *node = NULL;
    if (st == RT_OK) st = rt_node_create("dropout", 1, &x, 1, rt_dropout_backward, sizeof c, &node);
    if (st == RT_OK && node) *(rt_dropout_ctx *)node->ctx = c;
    return rt_op_return(st, node, y, out);
}
