/* ConvLSTM next-frame predictor (models/convlstm.h). */
#include "models/convlstm.h"

#include "ops/ops.h"

typedef struct rt_convlstm_cell {
    rt_module base;
    int channels, hidden;
    rt_module *conv; /* borrowed child "conv" */
} rt_convlstm_cell;

typedef struct rt_convlstm {
    rt_module base;
    rt_convlstm_config cfg;
    rt_module *cell, *head; /* borrowed children */
    bool with_head;         /* cleared by rt_convlstm_step when no prediction is wanted */
} rt_convlstm;

/* cat[x, h, c] → cat[h', c'] (Shi et al. 2015 eq. 3 without peepholes). */
static rt_status rt_convlstm_cell_forward(rt_module *m, rt_tensor *x, rt_tensor **y) {
    rt_convlstm_cell *cell = (rt_convlstm_cell *)m;
    const int64_t H = cell->hidden;
    if (x->ndim != 4 || x->shape[1] != cell->channels + 2 * H)
        return rt_error_set(RT_ERR_SHAPE, "ConvLSTMCell: expected (N, %lld, H, W) = cat[x, h, c], got %d-D with %lld "
                                          "channels", (long long)(cell->channels + 2 * H), x->ndim,
                            (long long)(x->ndim > 1 ? x->shape[1] : 0));
    rt_tensor *xh_c[2] = {NULL, NULL}, *gate[4] = {NULL, NULL, NULL, NULL}, *act[4] = {NULL, NULL, NULL, NULL};
    rt_tensor *gates = NULL, *fc = NULL, *ig = NULL, *c1 = NULL, *tc = NULL, *h1 = NULL;
    const int64_t sz[2] = {cell->channels + H, H}, gsz[4] = {H, H, H, H};
    rt_status st = rt_split_channels(x, 2, sz, xh_c);
    if (st == RT_OK) st = rt_module_forward(cell->conv, xh_c[0], &gates);
    if (st == RT_OK) st = rt_split_channels(gates, 4, gsz, gate);
    rt_tensor_release(gates);
    for (int k = 0; k < 4 && st == RT_OK; k++) /* σ(i), σ(f), tanh(g), σ(o) */
        st = k == 2 ? rt_tanh(gate[k], &act[k]) : rt_sigmoid(gate[k], &act[k]);
    for (int k = 0; k < 4; k++) rt_tensor_release(gate[k]);
    if (st == RT_OK) st = rt_mul(act[1], xh_c[1], &fc);
    if (st == RT_OK) st = rt_mul(act[0], act[2], &ig);
    if (st == RT_OK) st = rt_add(fc, ig, &c1);
    if (st == RT_OK) st = rt_tanh(c1, &tc);
    if (st == RT_OK) st = rt_mul(act[3], tc, &h1);
    if (st == RT_OK) st = rt_cat_channels(2, (rt_tensor *[]){h1, c1}, y);
    rt_tensor *all[] = {xh_c[0], xh_c[1], act[0], act[1], act[2], act[3], fc, ig, c1, tc, h1};
    for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) rt_tensor_release(all[k]);
    return st;
}

/* cat[x, h, c] → cat[h', c', σ(head(h'))] (or cat[h', c'] inside
 * rt_convlstm_step when the prediction is not wanted). */
static rt_status rt_convlstm_forward(rt_module *m, rt_tensor *x, rt_tensor **y) {
    rt_convlstm *p = (rt_convlstm *)m;
    rt_tensor *s = NULL;
    RT_TRY(rt_module_forward(p->cell, x, &s));
    if (!p->with_head) {
        *y = s;
        return RT_OK;
    }
    const int64_t H = p->cfg.hidden, sz[2] = {H, H};
    rt_tensor *hc[2] = {NULL, NULL}, *z = NULL, *pred = NULL;
    rt_status st = rt_split_channels(s, 2, sz, hc);
    if (st == RT_OK) st = rt_module_forward(p->head, hc[0], &z);
    if (st == RT_OK) st = rt_sigmoid(z, &pred);
    if (st == RT_OK) st = rt_cat_channels(2, (rt_tensor *[]){s, pred}, y);
    rt_tensor *all[] = {s, hc[0], hc[1], z, pred};
    for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) rt_tensor_release(all[k]);
    return st;
}

static const rt_module_class rt_convlstm_cell_class = {"ConvLSTMCell", rt_convlstm_cell_forward, NULL, NULL};
static const rt_module_class rt_convlstm_class = {"ConvLSTMPredictor", rt_convlstm_forward, NULL, NULL};

static rt_status rt_convlstm_build(rt_init_ctx *ctx, rt_convlstm *p) {
    const rt_convlstm_config *c = &p->cfg;
    rt_convlstm_cell *cell = (rt_convlstm_cell *)rt_module_alloc(sizeof *cell, &rt_convlstm_cell_class);
    if (!cell) return rt_error_last_status();
    cell->channels = c->channels, cell->hidden = c->hidden;
    p->cell = &cell->base;
    RT_TRY(rt_module_add_child(&p->base, "cell", p->cell));
    RT_TRY(rt_conv_create(ctx, 2, c->channels + c->hidden, 4 * (int64_t)c->hidden, c->kernel, 1, c->kernel / 2, 1,
                          true, RT_INIT_DEFAULT, &cell->conv));
    RT_TRY(rt_module_add_child(p->cell, "conv", cell->conv));
    RT_TRY(rt_conv_create(ctx, 2, c->hidden, c->channels, c->kernel, 1, c->kernel / 2, 1, true, RT_INIT_DEFAULT,
                          &p->head));
    return rt_module_add_child(&p->base, "head", p->head);
}

rt_status rt_convlstm_create(rt_init_ctx *ctx, const rt_convlstm_config *cfg, rt_module **out) {
    if (!out) return rt_error_set(RT_ERR_INVALID_ARG, "rt_convlstm_create: out is NULL");
    *out = NULL;
    if (!ctx || !cfg) return rt_error_set(RT_ERR_INVALID_ARG, "rt_convlstm_create: ctx and cfg are required");
    if (cfg->channels < 1 || cfg->hidden < 1 || cfg->kernel < 1 || cfg->kernel % 2 == 0)
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_convlstm_create: need channels, hidden >= 1 and an odd kernel "
                                                "(got %d, %d, %d)", cfg->channels, cfg->hidden, cfg->kernel);
    rt_convlstm *p = (rt_convlstm *)rt_module_alloc(sizeof *p, &rt_convlstm_class);
    if (!p) return rt_error_last_status();
    p->cfg = *cfg;
    p->with_head = true;
    rt_status st = rt_convlstm_build(ctx, p);
    if (st != RT_OK) {
        rt_module_destroy(&p->base);
        return st;
    }
    *out = &p->base;
    return RT_OK;
}

rt_status rt_convlstm_config_of(rt_module *m, rt_convlstm_config *out) {
    if (!rt_module_is(m, &rt_convlstm_class) || !out)
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_convlstm_config_of: not a ConvLSTMPredictor (or out NULL)");
    *out = ((rt_convlstm *)m)->cfg;
    return RT_OK;
}

rt_status rt_convlstm_step(rt_module *m, rt_tensor *frame, rt_tensor *state, rt_tensor **next, rt_tensor **pred) {
    if (next) *next = NULL;
    if (pred) *pred = NULL;
    if (!rt_module_is(m, &rt_convlstm_class) || !frame || !state || !next)
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_convlstm_step: need a ConvLSTMPredictor, frame, state and next");
    rt_convlstm *p = (rt_convlstm *)m;
    const int64_t H = p->cfg.hidden, C = p->cfg.channels;
    if (frame->ndim != 4 || frame->shape[1] != C || state->ndim != 4 || state->shape[1] != 2 * H)
        return rt_error_set(RT_ERR_SHAPE, "rt_convlstm_step: frame must be (N, %lld, H, W) and state (N, %lld, H, W) "
                                          "= cat[h, c]", (long long)C, (long long)(2 * H));
    rt_tensor *x = NULL, *y = NULL;
    RT_TRY(rt_cat_channels(2, (rt_tensor *[]){frame, state}, &x));
    p->with_head = pred != NULL;
    rt_status st = rt_module_forward(m, x, &y);
    p->with_head = true;
    rt_tensor_release(x);
    if (st != RT_OK) return st;
    if (!pred) {
        *next = y;
        return RT_OK;
    }
    rt_tensor *parts[2] = {NULL, NULL};
    const int64_t sz[2] = {2 * H, C};
    st = rt_split_channels(y, 2, sz, parts);
    rt_tensor_release(y);
    if (st != RT_OK) return st;
    *next = parts[0];
    *pred = parts[1];
    return RT_OK;
}

rt_status rt_convlstm_seq_step(void *user, int t, rt_tensor *state, rt_tensor **next, rt_tensor **loss) {
    const rt_convlstm_seq *q = user;
    if (!q || !q->frames || t < 0 || t + 1 >= q->n_frames)
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_convlstm_seq_step: step %d outside a sequence of %d frames", t,
                            q ? q->n_frames : 0);
    rt_tensor *pred = NULL;
    RT_TRY(rt_convlstm_step(q->model, q->frames[t], state, next, loss ? &pred : NULL));
    if (!loss) return RT_OK;
    rt_status st = rt_mse_loss(pred, q->frames[t + 1], loss);
    rt_tensor_release(pred);
    if (st != RT_OK) {
        rt_tensor_release(*next);
        *next = NULL;
    }
    return st;
}
