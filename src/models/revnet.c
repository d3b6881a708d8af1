#include "models/revnet.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/node.h"
#include "memory/reversible.h"
#include "models/resblock.h"

/* F or G: (BN-ReLU-conv) × n, pre-activation as in RevNet. */
typedef struct rt_preact_fn {
    int n;
    rt_batchnorm_layer bn[3];
    rt_conv_layer conv[3];
} rt_preact_fn;

static rt_status rt_preact_forward(void *self, rt_tensor *x, bool training, rt_tensor **y) {
    rt_preact_fn *p = self;
    *y = NULL;
    rt_tensor *h = rt_tensor_retain(x);
    for (int i = 0; i < p->n; i++) {
        RT_SEQ(h, a, rt_batchnorm_relu_layer_forward(&p->bn[i], h, training, &a));
        RT_SEQ(h, c, rt_conv_layer_forward(&p->conv[i], h, &c));
    }
    *y = h;
    return RT_OK;
}

/* Registers F or G on `width` channels under prefix (e.g. "layer1.1.f"). */
static rt_status rt_preact_init(rt_preact_fn *p, rt_state_dict *sd, const char *prefix, rt_block_kind kind,
                                int64_t width) {
    char name[128];
    int64_t inner = width / 4 > 0 ? width / 4 : 1;
    int64_t spec[3][3] = {{width, width, 3}, {width, width, 3}, {0, 0, 0}}; /* in, out, kernel */
    p->n = 2;
    if (kind == RT_BLOCK_BOTTLENECK) {
        int64_t b[3][3] = {{width, inner, 1}, {inner, inner, 3}, {inner, width, 1}};
        memcpy(spec, b, sizeof b);
        p->n = 3;
    }
    for (int i = 0; i < p->n; i++) {
        snprintf(name, sizeof name, "%s.bn%d", prefix, i + 1);
        RT_TRY(rt_batchnorm_layer_init(&p->bn[i], sd, name, spec[i][0]));
        snprintf(name, sizeof name, "%s.conv%d", prefix, i + 1);
        RT_TRY(rt_conv_layer_init(&p->conv[i], sd, name, 2, spec[i][0], spec[i][1], spec[i][2], 1, spec[i][2] / 2,
                                  1, false, RT_INIT_KAIMING_FAN_OUT));
    }
    return RT_OK;
}

static int rt_preact_params(rt_preact_fn *p, rt_tensor **out) {
    int k = 0;
    for (int i = 0; i < p->n; i++) {
        out[k++] = p->bn[i].weight;
        out[k++] = p->bn[i].bias;
        out[k++] = p->conv[i].weight;
    }
    return k;
}

typedef struct rt_revnet_stage {
    bool has_transition;
    rt_resblock transition;
    int n_rev;
    rt_preact_fn *fns; /* 2 per reversible unit: F then G */
    rt_rev_block *blocks;
    rt_rev_sequence seq;
} rt_revnet_stage;

typedef struct rt_revnet {
    rt_conv_layer conv1;
    rt_batchnorm_layer bn1, bn_out;
    rt_revnet_stage stages[3];
    rt_linear_layer fc;
} rt_revnet;

rt_status rt_revnet_config_get(const char *name, rt_revnet_config *cfg) {
    static const struct {
        const char *name;
        rt_revnet_config cfg;
    } table[] = {
        {"revnet38", {RT_BLOCK_BASIC, {3, 3, 3}, 32, {32, 64, 112}}},
        {"revnet110", {RT_BLOCK_BASIC, {9, 9, 9}, 32, {32, 64, 128}}},
        {"revnet164", {RT_BLOCK_BOTTLENECK, {9, 9, 9}, 32, {32, 64, 128}}},
        {"revnet_small", {RT_BLOCK_BASIC, {3, 3, 3}, 16, {16, 32, 64}}},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (!strcmp(table[i].name, name)) {
            *cfg = table[i].cfg;
            return RT_OK;
        }
    return rt_error_set(RT_ERR_INVALID_ARG, "unknown RevNet '%s' (revnet38, revnet110, revnet164, revnet_small)", name);
}

static rt_status rt_revnet_forward(rt_model *m, rt_tensor *x, rt_tensor **logits) {
    rt_revnet *r = m->impl;
    *logits = NULL;
    rt_tensor *h = rt_tensor_retain(x);
    RT_SEQ(h, c, rt_conv_layer_forward(&r->conv1, h, &c));
    RT_SEQ(h, a, rt_batchnorm_relu_layer_forward(&r->bn1, h, m->training, &a));
    for (int s = 0; s < 3; s++) {
        rt_revnet_stage *st = &r->stages[s];
        /* back to the blocked order after a sequence whose halves were not block-aligned */
        if (m->blocked) RT_SEQ(h, b, rt_to_preferred_layout(h, &b));
        if (st->has_transition) RT_SEQ(h, t, rt_resblock_forward(&st->transition, h, m->training, &t));
        if (st->n_rev) {
            st->seq.reversible = m->reversible;
            if (st->seq.grouping != (rt_grouping)m->grouping) st->seq.k = 0;
            st->seq.grouping = (rt_grouping)m->grouping;
            if (st->seq.grouping == RT_GROUPING_EVERY) st->seq.k = m->group_k;
            RT_SEQ(h, y, rt_rev_sequence_forward(&st->seq, h, m->training, &y));
        }
    }
    RT_SEQ(h, a2, rt_batchnorm_relu_layer_forward(&r->bn_out, h, m->training, &a2));
    RT_SEQ(h, g, rt_adaptive_avg_pool_1(h, &g));
    RT_SEQ(h, f, rt_flatten(h, &f));
    RT_SEQ(h, z, rt_linear_layer_forward(&r->fc, h, &z));
    *logits = h;
    return RT_OK;
}

static void rt_revnet_destroy(void *impl) {
    rt_revnet *r = impl;
    if (!r) return;
    for (int s = 0; s < 3; s++) {
        for (int i = 0; r->stages[s].blocks && i < r->stages[s].n_rev; i++) rt_rev_block_destroy(&r->stages[s].blocks[i]);
        free(r->stages[s].blocks);
        free(r->stages[s].fns);
    }
    free(r);
}

static rt_status rt_revnet_stage_init(rt_revnet_stage *st, rt_state_dict *sd, const rt_revnet_config *cfg, int s,
                                      int64_t in, int64_t *out_channels) {
    int64_t expansion = cfg->block == RT_BLOCK_BOTTLENECK ? 4 : 1, out = cfg->widths[s] * expansion;
    int64_t stride = s > 0 ? 2 : 1;
    char prefix[96];
    int u = 0;
    st->has_transition = stride != 1 || in != out;
    if (st->has_transition) {
        snprintf(prefix, sizeof prefix, "layer%d.0", s + 1);
        RT_TRY(rt_resblock_init(&st->transition, sd, prefix, cfg->block, in, cfg->widths[s], stride));
        u = 1;
    }
    st->n_rev = cfg->units[s] - u;
    st->fns = calloc((size_t)(2 * st->n_rev + 1), sizeof *st->fns);
    st->blocks = calloc((size_t)(st->n_rev + 1), sizeof *st->blocks);
    if (!st->fns || !st->blocks) return rt_error_set(RT_ERR_OOM, "out of memory creating a RevNet stage");
    int64_t example[4] = {2, out, 8, 8};
    for (int i = 0; i < st->n_rev; i++, u++) {
        rt_preact_fn *f = &st->fns[2 * i], *g = &st->fns[2 * i + 1];
        int64_t half = out / 2;
        snprintf(prefix, sizeof prefix, "layer%d.%d.f", s + 1, u);
        RT_TRY(rt_preact_init(f, sd, prefix, cfg->block, out - half));
        snprintf(prefix, sizeof prefix, "layer%d.%d.g", s + 1, u);
        RT_TRY(rt_preact_init(g, sd, prefix, cfg->block, half));
        rt_tensor *params[18];
        int np = rt_preact_params(f, params);
        np += rt_preact_params(g, params + np);
        snprintf(prefix, sizeof prefix, "layer%d.%d", s + 1, u);
        RT_TRY(rt_rev_block_init(&st->blocks[i], prefix, RT_COUPLING_ADDITIVE,
                                 (rt_subnet){rt_preact_forward, f}, (rt_subnet){rt_preact_forward, g}, params, np, 4,
                                 example));
    }
    st->seq = (rt_rev_sequence){.blocks = st->blocks, .n = st->n_rev, .reversible = true};
    *out_channels = out;
    return RT_OK;
}

rt_status rt_revnet_create(const char *name, const rt_revnet_config *cfg, int64_t in_channels,
                           int64_t num_classes, rt_device device, uint64_t seed, rt_model **out) {
    *out = NULL;
    rt_model *m = calloc(1, sizeof *m);
    rt_revnet *r = calloc(1, sizeof *r);
    if (m) m->sd = rt_state_dict_create(device, seed);
    if (!m || !r || !m->sd) {
        if (m) rt_state_dict_destroy(m->sd);
        free(m);
        free(r);
        return rt_error_set(RT_ERR_OOM, "out of memory creating %s", name);
    }
    snprintf(m->name, sizeof m->name, "%s", name);
    m->impl = r;
    m->forward = rt_revnet_forward;
    m->destroy_impl = rt_revnet_destroy;
    m->training = true;
    m->reversible = true;
    m->blocked = true;
    rt_state_dict *sd = m->sd;
    rt_status st = rt_conv_layer_init(&r->conv1, sd, "conv1", 2, in_channels, cfg->stem, 3, 1, 1, 1, false,
                                      RT_INIT_KAIMING_FAN_OUT);
    if (st == RT_OK) st = rt_batchnorm_layer_init(&r->bn1, sd, "bn1", cfg->stem);
    int64_t ch = cfg->stem;
    for (int s = 0; s < 3 && st == RT_OK; s++) st = rt_revnet_stage_init(&r->stages[s], sd, cfg, s, ch, &ch);
    if (st == RT_OK) st = rt_batchnorm_layer_init(&r->bn_out, sd, "bn_out", ch);
    if (st == RT_OK) st = rt_linear_layer_init(&r->fc, sd, "fc", ch, num_classes, true);
    if (st != RT_OK) {
        rt_model_destroy(m);
        return st;
    }
    *out = m;
    return RT_OK;
}

rt_status rt_revnet_reconstruction(rt_model *m, rt_tensor *x, double *block_err, double *chain_err,
                                   char *worst_block, size_t n) {
    *block_err = *chain_err = 0.0;
    if (m->forward != rt_revnet_forward)
        return rt_error_set(RT_ERR_INVALID_ARG, "%s has no reversible blocks to check", m->name);
    rt_revnet *r = m->impl;
    bool grad = rt_grad_set_enabled(false);
    rt_status st = RT_OK;
    rt_tensor *h = NULL, *t = NULL;
    st = rt_conv_layer_forward(&r->conv1, x, &h);
    if (st == RT_OK) st = rt_batchnorm_layer_forward(&r->bn1, h, false, &t);
    rt_tensor_release(h);
    h = NULL;
    if (st == RT_OK) st = rt_relu(t, &h);
    rt_tensor_release(t);
    for (int s = 0; s < 3 && st == RT_OK; s++) {
        rt_revnet_stage *stage = &r->stages[s];
        if (stage->has_transition) {
            st = rt_resblock_forward(&stage->transition, h, false, &t);
            rt_tensor_release(h);
            h = t;
            if (st != RT_OK) break;
        }
        rt_tensor *stage_in = rt_tensor_retain(h);
        for (int i = 0; i < stage->n_rev && st == RT_OK; i++) {
            rt_rev_block *b = &stage->blocks[i];
            float e1 = 0, e2 = 0;
            st = rt_rev_block_check(b, h, false, &e1, &e2);
            double unused, scale = 0.0;
            if (st == RT_OK) st = rt_compare(h, h, &unused, &scale);
            double e = fmax(e1, e2) / fmax(scale, 1e-30);
            if (st == RT_OK && !(e <= *block_err)) {
                *block_err = e;
                snprintf(worst_block, n, "%s", b->name);
            }
            t = NULL;
            if (st == RT_OK) st = rt_rev_block_forward(b, h, false, &t);
            rt_tensor_release(h);
            h = t;
        }
        rt_tensor *back = rt_tensor_retain(h);
        for (int i = stage->n_rev - 1; i >= 0 && st == RT_OK; i--) {
            st = rt_rev_block_inverse(&stage->blocks[i], back, false, &t);
            rt_tensor_release(back);
            back = t;
        }
        if (st == RT_OK && stage->n_rev) *chain_err = fmax(*chain_err, rt_rel_difference(back, stage_in));
        rt_tensor_release(back);
        rt_tensor_release(stage_in);
    }
    rt_tensor_release(h);
    rt_grad_set_enabled(grad);
    return st;
}
