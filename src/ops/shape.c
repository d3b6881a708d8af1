/* Channel concat/split and reshape/flatten. Concat and split copy (a channel
 * slice of an NCHW batch is not contiguous); reshape shares storage. */
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "ops/op_util.h"
#include "ops/ops.h"

/* The pieces' channel counts and memory orders, kept for backward (variable
 * length). The pieces share one order, `piece`; the whole is in `whole`:
 * both the same, or channels-last pieces of a whole in any activation order
 * (rt_split_channels_layout). */
typedef struct rt_split_ctx {
    int n;
    rt_layout piece, whole;
    int64_t sizes[];
} rt_split_ctx;

/* Bytes of one sample's `c` channels: c · prod(spatial) floats. */
static int64_t rt_inner(const rt_tensor *t) {
    int64_t inner = 1;
    for (int i = 2; i < t->ndim; i++) inner *= t->shape[i];
    return inner;
}

/* Copies pieces into / out of one tensor along dim 1, one channel slice at
 * a time (the backend's channel_slice_copy, or channel_slice_copy_cl for
 * channels-last pieces). to_whole: pieces → whole, a NULL piece zero-fills
 * its slice; else whole → pieces, NULL pieces skipped. */
static void rt_channel_copy(rt_tensor *whole, int n, rt_tensor *const *pieces, const int64_t *sizes,
                            rt_layout piece_layout, int to_whole) {
    const rt_backend *be = rt_backend_of(whole);
    int64_t inner = rt_inner(whole), batch = whole->shape[0], cw = whole->shape[1], off = 0;
    for (int i = 0; i < n; i++) {
        float *p = pieces[i] ? rt_tensor_f32(pieces[i]) : NULL;
        if (piece_layout == RT_LAYOUT_CHANNELS_LAST)
            be->channel_slice_copy_cl(batch, cw, inner, off, sizes[i], p, rt_tensor_f32(whole), whole->layout,
                                      to_whole);
        else
            be->channel_slice_copy(batch, cw, inner, off, sizes[i], p, rt_tensor_f32(whole), to_whole);
        off += sizes[i];
    }
}

/* *out: t in `layout`, a new reference (t itself retained when it is in it
 * already, else a converted copy: a gradient that reached the node in
 * another order), without autograd; NULL for a NULL t (no gradient). */
static rt_status rt_in_order(rt_tensor *t, rt_layout layout, rt_tensor **out) {
    *out = NULL;
    if (!t) return RT_OK;
    bool grad = rt_grad_set_enabled(false);
    rt_status st = rt_to_layout(t, layout, out);
    rt_grad_set_enabled(grad);
    return st;
}

static rt_status rt_cat_backward(rt_node *self, rt_tensor *const *grad_out, rt_tensor **grad_in) {
    const rt_split_ctx *c = self->ctx;
    rt_tensor *dy = NULL;
    RT_TRY(rt_in_order(grad_out[0], c->whole, &dy));
    for (int i = 0; i < c->n; i++) {
        int64_t shape[5];
        memcpy(shape, dy->shape, sizeof shape);
        shape[1] = c->sizes[i];
        if (!(grad_in[i] = rt_tensor_create(dy->ndim, shape, RT_F32, dy->device, RT_MEM_TEMP))) {
            rt_tensor_release(dy);
            return RT_ERR_OOM;
        }
        grad_in[i]->layout = c->piece;
    }
    rt_channel_copy(dy, c->n, grad_in, c->sizes, c->piece, 0);
    rt_tensor_release(dy);
    return RT_OK;
}

/* True when every channel boundary of the pieces falls on a layout block, so
 * channel ranges are contiguous per sample in the BLOCKED order too. */
static bool rt_blocks_aligned(int n, const int64_t *sizes) {
    for (int i = 0; i < n; i++)
        if (sizes[i] % rt_layout_block()) return false;
    return true;
}

static bool rt_spatial_ndim(const rt_tensor *x) { return x->ndim == 4 || x->ndim == 5; }

/* Checks shared by the two concatenations; *c_total receives the sum of the
 * channel counts. */
static rt_status rt_cat_check(int n, rt_tensor *const *xs, int64_t *c_total) {
    char a[64], b[64];
    *c_total = 0;
    for (int i = 0; i < n; i++) {
        RT_TRY(rt_op_check_f32(xs[i], "cat", "input"));
        RT_TRY(rt_op_check_device(xs[0], xs[i], "cat"));
        bool ok = xs[i]->ndim == xs[0]->ndim && xs[i]->ndim >= 2;
        for (int d = 0; ok && d < xs[0]->ndim; d++) ok = d == 1 || xs[i]->shape[d] == xs[0]->shape[d];
        if (!ok)
            return rt_error_set(RT_ERR_SHAPE, "cat: tensors must match in every dimension but 1, got %s and %s",
                                rt_tensor_shape_str(xs[0], a, sizeof a), rt_tensor_shape_str(xs[i], b, sizeof b));
        *c_total += xs[i]->shape[1];
    }
    return RT_OK;
}

/* The concatenation itself: pieces in `piece` order (all of them), the
 * result in `whole` (equal to `piece`, or any activation order for
 * channels-last pieces). */
static rt_status rt_cat_in(int n, rt_tensor *const *xs, rt_layout piece, rt_layout whole, rt_tensor **out) {
    int64_t c_total = 0;
    RT_TRY(rt_cat_check(n, xs, &c_total));
    rt_split_ctx *c = malloc(sizeof *c + (size_t)n * sizeof(int64_t));
    if (!c) return rt_error_set(RT_ERR_OOM, "out of memory in cat");
    c->n = n;
    c->piece = piece;
    c->whole = whole;
    int64_t shape[5];
    memcpy(shape, xs[0]->shape, sizeof shape);
    shape[1] = c_total;
    for (int i = 0; i < n; i++) c->sizes[i] = xs[i]->shape[1];
    rt_tensor *y = rt_op_new(xs[0], xs[0]->ndim, shape);
    if (!y) {
        free(c);
        return RT_ERR_OOM;
    }
    y->layout = whole;
    rt_channel_copy(y, n, xs, c->sizes, piece, 1);
    rt_node *node = NULL;
    rt_status st = rt_node_create("cat", n, xs, 1, rt_cat_backward, 0, &node);
    if (node) node->ctx = c; else free(c);
    return rt_op_return(st, node, y, out);
}

/* Every input converted to `to` (at most 16), then concatenated. */
static rt_status rt_cat_converted(int n, rt_tensor *const *xs, rt_layout to, rt_tensor **out) {
    rt_tensor *conv[16] = {0};
    if (n > 16) return rt_error_set(RT_ERR_INVALID_ARG, "cat: at most 16 tensors of mixed layouts");
    rt_status st = RT_OK;
    for (int i = 0; i < n && st == RT_OK; i++) st = rt_to_layout(xs[i], to, &conv[i]);
    if (st == RT_OK) st = rt_cat_channels(n, conv, out);
    for (int i = 0; i < n; i++) rt_tensor_release(conv[i]);
    return st;
}

rt_status rt_cat_channels(int n, rt_tensor *const *xs, rt_tensor **out) {
    RT_TRY(rt_op_check_out(out, "cat"));
    *out = NULL;
    if (n < 1) return rt_error_set(RT_ERR_INVALID_ARG, "cat: need at least one tensor");
    if (!xs) return rt_error_set(RT_ERR_INVALID_ARG, "cat: the array of inputs xs is NULL");
    bool mixed = false, blocked = false, cl = false, aligned = true;
    for (int i = 0; i < n; i++) {
        if (!xs[i]) return rt_error_set(RT_ERR_INVALID_ARG, "cat: input %d is NULL", i);
        mixed = mixed || xs[i]->layout != xs[0]->layout;
        blocked = blocked || xs[i]->layout == RT_LAYOUT_BLOCKED;
        cl = cl || xs[i]->layout == RT_LAYOUT_CHANNELS_LAST;
        aligned = aligned && xs[i]->ndim >= 2 && xs[i]->shape[1] % rt_layout_block() == 0;
    }
    if (cl && mixed) return rt_cat_converted(n, xs, RT_LAYOUT_PLAIN, out);
    if (blocked && (mixed || !aligned)) /* the copy below needs one order with aligned pieces */
        return rt_cat_converted(n, xs, aligned ? RT_LAYOUT_BLOCKED : RT_LAYOUT_PLAIN, out);
    return rt_cat_in(n, xs, xs[0]->layout, xs[0]->layout, out);
}

rt_status rt_cat_channels_layout(int n, rt_tensor *const *xs, rt_layout layout, rt_tensor **out) {
    RT_TRY(rt_op_check_out(out, "cat"));
    *out = NULL;
    if (n < 1 || !xs) return rt_error_set(RT_ERR_INVALID_ARG, "cat: need at least one tensor (xs NULL or n < 1)");
    bool all_cl = true;
    for (int i = 0; i < n; i++) {
        if (!xs[i]) return rt_error_set(RT_ERR_INVALID_ARG, "cat: input %d is NULL", i);
        all_cl = all_cl && xs[i]->layout == RT_LAYOUT_CHANNELS_LAST;
    }
    if (layout != RT_LAYOUT_PLAIN && layout != RT_LAYOUT_BLOCKED && layout != RT_LAYOUT_CHANNELS_LAST)
        return rt_error_set(RT_ERR_INVALID_ARG, "cat: layout %d is not an activation order (plain, blocked or "
                            "channels-last)", (int)layout);
    if (!all_cl) { /* concatenated in their own order, then converted */
        rt_tensor *y = NULL;
        RT_TRY(rt_cat_channels(n, xs, &y));
        rt_status st = rt_to_layout(y, layout, out);
        rt_tensor_release(y);
        return st;
    }
    int64_t c_total = 0;
    RT_TRY(rt_cat_check(n, xs, &c_total));
    if (!rt_spatial_ndim(xs[0]))
        return rt_error_set(RT_ERR_SHAPE, "cat: channels-last tensors are 4-D or 5-D, got %d-D", xs[0]->ndim);
    if (layout == RT_LAYOUT_BLOCKED && c_total % rt_layout_block())
        return rt_error_set(RT_ERR_INVALID_ARG, "cat: the blocked layout needs the %lld channels of the result "
                            "to be a multiple of %d", (long long)c_total, rt_layout_block());
    return rt_cat_in(n, xs, RT_LAYOUT_CHANNELS_LAST, layout, out);
}

static rt_status rt_split_backward(rt_node *self, rt_tensor *const *grad_out, rt_tensor **grad_in) {
    const rt_split_ctx *c = self->ctx;
    rt_tensor *any = NULL;
    for (int i = 0; i < c->n && !any; i++) any = grad_out[i];
    int64_t shape[5];
    memcpy(shape, any->shape, sizeof shape);
    shape[1] = 0;
    for (int i = 0; i < c->n; i++) shape[1] += c->sizes[i];
    if (!(grad_in[0] = rt_tensor_create(any->ndim, shape, RT_F32, any->device, RT_MEM_TEMP)))
        return RT_ERR_OOM;
    grad_in[0]->layout = c->whole;
    rt_tensor *tmp[16] = {0};
    rt_tensor *const *pieces = grad_out;
    rt_status st = RT_OK;
    bool other = false;
    for (int i = 0; i < c->n; i++) other = other || (grad_out[i] && grad_out[i]->layout != c->piece);
    if (other) { /* a piece's gradient in another order: converted first */
        if (c->n > 16) return rt_error_set(RT_ERR_INVALID_ARG, "split backward: at most 16 pieces in mixed orders");
        for (int i = 0; i < c->n && st == RT_OK; i++) st = rt_in_order(grad_out[i], c->piece, &tmp[i]);
        pieces = tmp;
    }
    if (st == RT_OK) rt_channel_copy(grad_in[0], c->n, pieces, c->sizes, c->piece, 1);
    for (int i = 0; i < 16; i++) rt_tensor_release(tmp[i]);
    return st;
}

/* The split itself: pieces in `piece` order from x in its own. */
static rt_status rt_split_in(rt_tensor *x, int n, const int64_t *sizes, rt_layout piece, rt_tensor **outs) {
    rt_split_ctx *c = malloc(sizeof *c + (size_t)n * sizeof(int64_t));
    if (!c) return rt_error_set(RT_ERR_OOM, "out of memory in split");
    c->n = n;
    c->piece = piece;
    c->whole = x->layout;
    memcpy(c->sizes, sizes, (size_t)n * sizeof(int64_t));
    rt_status st = RT_OK;
    for (int i = 0; i < n && st == RT_OK; i++) {
        int64_t shape[5];
        memcpy(shape, x->shape, sizeof shape);
        shape[1] = sizes[i];
        if (!(outs[i] = rt_op_new(x, x->ndim, shape))) st = RT_ERR_OOM;
        else outs[i]->layout = piece;
    }
    if (st == RT_OK) rt_channel_copy(x, n, outs, sizes, piece, 0);
    rt_node *node = NULL;
    if (st == RT_OK) st = rt_node_create("split", 1, &x, n, rt_split_backward, 0, &node);
    if (node) {
        node->ctx = c;
        for (int i = 0; i < n; i++) rt_node_set_output(node, outs[i], i);
        rt_node_release(node);
    } else {
        free(c);
    }
    if (st != RT_OK)
        for (int i = 0; i < n; i++) {
            rt_tensor_release(outs[i]);
            outs[i] = NULL;
        }
    return st;
}

/* Checks shared by the two splits. */
static rt_status rt_split_check(rt_tensor *x, int n, const int64_t *sizes, rt_tensor **outs) {
    if (!outs) return rt_error_set(RT_ERR_INVALID_ARG, "split: outs is NULL (pass an array of n rt_tensor *)");
    for (int i = 0; i < n; i++) outs[i] = NULL;
    RT_TRY(rt_op_check_f32(x, "split", "input"));
    if (!sizes) return rt_error_set(RT_ERR_INVALID_ARG, "split: sizes is NULL");
    char a[64];
    int64_t total = 0;
    for (int i = 0; i < n; i++) total += sizes[i] > 0 ? sizes[i] : -1000000;
    if (n < 1 || x->ndim < 2 || total != x->shape[1])
        return rt_error_set(RT_ERR_SHAPE, "split: %d positive sizes must add up to the %lld channels "
                            "of input %s", n, x->ndim >= 2 ? (long long)x->shape[1] : 0LL,
                            rt_tensor_shape_str(x, a, sizeof a));
    return RT_OK;
}

rt_status rt_split_channels(rt_tensor *x, int n, const int64_t *sizes, rt_tensor **outs) {
    RT_TRY(rt_split_check(x, n, sizes, outs));
    if (x->layout == RT_LAYOUT_BLOCKED && !rt_blocks_aligned(n, sizes)) {
        rt_tensor *plain = NULL;
        RT_TRY(rt_to_layout(x, RT_LAYOUT_PLAIN, &plain));
        rt_status st = rt_split_channels(plain, n, sizes, outs);
        rt_tensor_release(plain);
        return st;
    }
    return rt_split_in(x, n, sizes, x->layout, outs);
}

rt_status rt_split_channels_layout(rt_tensor *x, int n, const int64_t *sizes, rt_layout layout, rt_tensor **outs) {
    RT_TRY(rt_split_check(x, n, sizes, outs));
    if (layout == x->layout && layout != RT_LAYOUT_CHANNELS_LAST) return rt_split_channels(x, n, sizes, outs);
    if (layout != RT_LAYOUT_CHANNELS_LAST)
        return rt_error_set(RT_ERR_INVALID_ARG, "split: pieces are made in the input's order or channels-last "
                            "(layout %d asked, the input's is %d)", (int)layout, (int)x->layout);
    if (!rt_spatial_ndim(x)) {
        char a[64];
        return rt_error_set(RT_ERR_SHAPE, "split: channels-last pieces need a 4-D or 5-D input, got %s",
                            rt_tensor_shape_str(x, a, sizeof a));
    }
    return rt_split_in(x, n, sizes, RT_LAYOUT_CHANNELS_LAST, outs);
}

typedef struct rt_reshape_ctx {
    int ndim;
    int64_t shape[5];
} rt_reshape_ctx;

static rt_status rt_reshape_backward(rt_node *self, rt_tensor *const *grad_out, rt_tensor **grad_in) {
    const rt_reshape_ctx *c = self->ctx;
    rt_tensor *g = grad_out[0], *plain = NULL;
    if (g->layout != RT_LAYOUT_PLAIN) { /* a gradient arriving in another order */
        RT_TRY(rt_to_layout(g, RT_LAYOUT_PLAIN, &plain));
        g = plain;
    }
    grad_in[0] = rt_tensor_view(g, c->ndim, c->shape);
    rt_tensor_release(plain);
    return grad_in[0] ? RT_OK : RT_ERR_OOM;
}

rt_status rt_reshape(rt_tensor *x, int ndim, const int64_t *shape, rt_tensor **out) {
    RT_TRY(rt_op_check_out(out, "reshape"));
    *out = NULL;
    if (!x) return rt_error_set(RT_ERR_INVALID_ARG, "reshape: input is NULL");
    if (!shape && ndim > 0) return rt_error_set(RT_ERR_INVALID_ARG, "reshape: shape is NULL for %d dimensions", ndim);
    if (ndim < 0 || ndim > RT_MAX_DIMS)
        return rt_error_set(RT_ERR_SHAPE, "reshape: tensors have 0 to %d dimensions, got %d", RT_MAX_DIMS, ndim);
    bool same = ndim == x->ndim;
    for (int i = 0; same && i < ndim; i++) same = shape[i] == x->shape[i];
    if (x->layout != RT_LAYOUT_PLAIN && !same) { /* a new shape means the PLAIN order */
        rt_tensor *plain = NULL;
        RT_TRY(rt_to_layout(x, RT_LAYOUT_PLAIN, &plain));
        rt_status st = rt_reshape(plain, ndim, shape, out);
        rt_tensor_release(plain);
        return st;
    }
    rt_tensor *y = rt_tensor_view(x, ndim, shape);
    if (!y) return rt_error_last_status();
    rt_node *node = NULL;
    rt_status st = rt_node_create("reshape", 1, &x, 1, rt_reshape_backward, sizeof(rt_reshape_ctx), &node);
    if (st == RT_OK && node) {
        rt_reshape_ctx *c = node->ctx;
        c->ndim = x->ndim;
        memcpy(c->shape, x->shape, sizeof c->shape);
    }
    return rt_op_return(st, node, y, out);
}

rt_status rt_flatten(rt_tensor *x, rt_tensor **out) {
    RT_TRY(rt_op_check_out(out, "flatten"));
    *out = NULL;
    if (!x) return rt_error_set(RT_ERR_INVALID_ARG, "flatten: input is NULL");
    if (x->ndim < 1)
        return rt_error_set(RT_ERR_SHAPE, "flatten: a 0-d tensor has no batch dimension");
    int64_t shape[2] = {x->shape[0], x->shape[0] ? rt_tensor_numel(x) / x->shape[0] : 0};
    return rt_reshape(x, 2, shape, out);
}
