/* Dropout with a Philox mask regenerated from (seed, offset) instead of
 * stored: the backend's dropout entry (kernels/dropout.h on cpu). */
#include "backend/backend.h"
#include "core/rng.h"
#include "ops/op_util.h"
#include "ops/ops.h"

typedef struct rt_dropout_ctx {
    uint64_t seed, offset;
    float p;
} rt_dropout_ctx;

/* out = in · mask / (1-p), mask_i = (u_i >= p) with u from Philox(seed, offset);
 * meta books the uniforms' TEMP bytes as the cpu kernel holds them. */
static rt_status rt_dropout_apply(const rt_dropout_ctx *c, const rt_tensor *in, rt_tensor *out) {
    return rt_backend_of(in)->dropout(c->seed, c->offset, c->p, rt_tensor_numel(in), rt_tensor_f32(in),
                                      rt_tensor_f32(out));
}

static rt_status rt_dropout_backward(rt_node *self, rt_tensor *const *grad_out, rt_tensor **grad_in) {
    rt_tensor *dy = grad_out[0];
    if (!(grad_in[0] = rt_tensor_empty_like(dy, RT_MEM_TEMP))) return RT_ERR_OOM;
    return rt_dropout_apply(self->ctx, dy, grad_in[0]);
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
    rt_status st = rt_dropout_apply(&c, x, y);
    rt_node *node = NULL;
    if (st == RT_OK) st = rt_node_create("dropout", 1, &x, 1, rt_dropout_backward, sizeof c, &node);
    if (st == RT_OK && node) *(rt_dropout_ctx *)node->ctx = c;
    return rt_op_return(st, node, y, out);
}
