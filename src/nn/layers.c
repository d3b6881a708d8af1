#include "nn/layers.h"

#include "ops/batchnorm_relu.h"

#include <math.h>
#include <stdio.h>

void rt_init_uniform(rt_state_dict *sd, rt_tensor *t, float bound) {
    int64_t n = rt_tensor_numel(t);
    if (rt_tensor_is_meta(t)) {
        sd->init_rng.offset += rt_philox_blocks(n);
        return;
    }
    float *p = rt_tensor_f32(t);
    rt_generator_uniform(&sd->init_rng, n, p);
    for (int64_t i = 0; i < n; i++) p[i] = (2.0f * p[i] - 1.0f) * bound;
}

void rt_init_normal(rt_state_dict *sd, rt_tensor *t, float std) {
    if (rt_tensor_is_meta(t)) {
        sd->init_rng.offset += rt_philox_blocks(rt_tensor_numel(t) + 1);
        return;
    }
    rt_generator_normal(&sd->init_rng, rt_tensor_numel(t), 0.0f, std, rt_tensor_f32(t));
}

rt_status rt_conv_layer_init(rt_conv_layer *m, rt_state_dict *sd, const char *prefix, int nsp,
                             int64_t in, int64_t out, int64_t k, int64_t stride, int64_t padding,
                             int64_t groups, bool bias, rt_conv_init init) {
    *m = (rt_conv_layer){0};
    if (nsp != 2 && nsp != 3)
        return rt_error_set(RT_ERR_INVALID_ARG, "%s: convolutions are 2-D or 3-D, got %d", prefix, nsp);
    if (groups < 1 || in % groups || out % groups)
        return rt_error_set(RT_ERR_INVALID_ARG, "%s: groups=%lld must divide in=%lld and out=%lld", prefix,
                            (long long)groups, (long long)in, (long long)out);
    int64_t shape[5] = {out, in / groups, k, k, k};
    RT_TRY(rt_state_dict_add(sd, prefix, "weight", RT_ENTRY_PARAM, 2 + nsp, shape, &m->weight));
    if (bias) RT_TRY(rt_state_dict_add(sd, prefix, "bias", RT_ENTRY_PARAM, 1, &out, &m->bias));
    int64_t receptive = nsp == 2 ? k * k : k * k * k;
    if (init == RT_INIT_KAIMING_FAN_OUT) {
        rt_init_normal(sd, m->weight, sqrtf(2.0f / (float)(out * receptive)));
    } else {
        float bound = 1.0f / sqrtf((float)(in / groups * receptive));
        rt_init_uniform(sd, m->weight, bound);
        if (m->bias) rt_init_uniform(sd, m->bias, bound);
    }
    for (int i = 0; i < nsp; i++) {
        m->opts.stride[i] = stride;
        m->opts.padding[i] = padding;
        m->opts.dilation[i] = 1;
    }
    m->opts.groups = groups;
    return RT_OK;
}

rt_status rt_conv_layer_forward(const rt_conv_layer *m, rt_tensor *x, rt_tensor **y) {
    return rt_conv(x, m->weight, m->bias, &m->opts, y);
}

rt_status rt_batchnorm_layer_init(rt_batchnorm_layer *m, rt_state_dict *sd, const char *prefix,
                                  int64_t channels) {
    *m = (rt_batchnorm_layer){.momentum = 0.1f, .eps = 1e-5f};
    RT_TRY(rt_state_dict_add(sd, prefix, "weight", RT_ENTRY_PARAM, 1, &channels, &m->weight));
    RT_TRY(rt_state_dict_add(sd, prefix, "bias", RT_ENTRY_PARAM, 1, &channels, &m->bias));
    RT_TRY(rt_state_dict_add(sd, prefix, "running_mean", RT_ENTRY_BUFFER, 1, &channels, &m->running_mean));
    RT_TRY(rt_state_dict_add(sd, prefix, "running_var", RT_ENTRY_BUFFER, 1, &channels, &m->running_var));
    RT_TRY(rt_state_dict_add_counter(sd, prefix, "num_batches_tracked", &m->num_batches_tracked));
    rt_tensor_fill(m->weight, 1.0f);
    rt_tensor_fill(m->running_var, 1.0f);
    return RT_OK;
}

rt_status rt_batchnorm_layer_forward(rt_batchnorm_layer *m, rt_tensor *x, bool training, rt_tensor **y) {
    return rt_batch_norm(x, m->weight, m->bias, m->running_mean, m->running_var, &m->num_batches_tracked,
                         training, m->momentum, m->eps, y);
}

rt_status rt_batchnorm_relu_layer_forward(rt_batchnorm_layer *m, rt_tensor *x, bool training, rt_tensor **y) {
    return rt_batch_norm_relu(x, m->weight, m->bias, m->running_mean, m->running_var, &m->num_batches_tracked,
                              training, m->momentum, m->eps, y);
}

rt_status rt_linear_layer_init(rt_linear_layer *m, rt_state_dict *sd, const char *prefix, int64_t in,
                               int64_t out, bool bias) {
    *m = (rt_linear_layer){0};
    int64_t shape[2] = {out, in};
    RT_TRY(rt_state_dict_add(sd, prefix, "weight", RT_ENTRY_PARAM, 2, shape, &m->weight));
    if (bias) RT_TRY(rt_state_dict_add(sd, prefix, "bias", RT_ENTRY_PARAM, 1, &out, &m->bias));
    float bound = 1.0f / sqrtf((float)in);
    rt_init_uniform(sd, m->weight, bound);
    if (m->bias) rt_init_uniform(sd, m->bias, bound);
    return RT_OK;
}

rt_status rt_linear_layer_forward(const rt_linear_layer *m, rt_tensor *x, rt_tensor **y) {
    return rt_linear(x, m->weight, m->bias, y);
}
