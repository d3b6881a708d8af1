/* Softmax over channels (dim=1): the backend's softmax_channels_* entries
 * (kernels/softmax.h on cpu). */
#include <string.h>

#include "backend/backend.h"
#include "ops/op_util.h"
#include "ops/ops3d.h"

/* The (N, C, spatial) view of an activation of rank >= 2. */
static rt_chan_shape sm_shape(const rt_tensor *x) {
    rt_chan_shape s = {x->shape[0], x->shape[1], 1, x->layout};
    for (int i = 2; i < x->ndim; i++) s.spatial *= x->shape[i];
    return s;
}

static rt_status sm_backward(rt_node *self, rt_tensor *const *grad_out, rt_tensor **grad_in) {
    rt_tensor *y, *dy = grad_out[0];
    RT_SAVED(self, 0, y);
    rt_tensor *dx = rt_tensor_empty_like(y, RT_MEM_TEMP);
    if (!dx) return RT_ERR_OOM;
    rt_chan_shape s = sm_shape(y);
    rt_backend_of(y)->softmax_channels_backward(&s, rt_tensor_f32(y), rt_tensor_f32(dy), rt_tensor_f32(dx));
    grad_in[0] = dx;
    return RT_OK;
}

rt_status rt_softmax_channels(rt_tensor *x, rt_tensor **out) {
    RT_TRY(rt_op_check_out(out, "softmax"));
    *out = NULL;
    RT_TRY(rt_op_check_f32(x, "softmax", "input"));
    if (x->ndim < 2) {
        char a[64];
        return rt_error_set(RT_ERR_SHAPE, "softmax: dim=1 needs an input of rank >= 2, got %s",
                            rt_tensor_shape_str(x, a, sizeof a));
    }
    rt_tensor *y = rt_tensor_empty_like(x, RT_MEM_TEMP);
    if (!y) return RT_ERR_OOM;
    rt_chan_shape s = sm_shape(x);
    rt_backend_of(x)->softmax_channels_forward(&s, rt_tensor_f32(x), rt_tensor_f32(y));
    rt_node *node = NULL;
    rt_status st = rt_node_create("softmax", 1, &x, 1, sm_backward, 0, &node);
    if (st == RT_OK && node) st = rt_node_save(node, y, NULL);
    return rt_op_return(st, node, y, out);
}
