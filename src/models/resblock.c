#include "models/resblock.h"

#include <stdio.h>
#include <string.h>

rt_status rt_resblock_init(rt_resblock *b, rt_state_dict *sd, const char *prefix, rt_block_kind kind,
                                  int64_t in, int64_t planes, int64_t stride) {
    char name[128];
    int64_t expansion = kind == RT_BLOCK_BOTTLENECK ? 4 : 1, out = planes * expansion;
    b->nconv = kind == RT_BLOCK_BOTTLENECK ? 3 : 2;
    /* (in, out, kernel, stride, padding) of each conv; the stride sits on the 3×3 conv */
    int64_t spec[3][5];
    if (kind == RT_BLOCK_BASIC) {
        int64_t s[2][5] = {{in, planes, 3, stride, 1}, {planes, planes, 3, 1, 1}};
        memcpy(spec, s, sizeof s);
    } else {
        int64_t s[3][5] = {{in, planes, 1, 1, 0}, {planes, planes, 3, stride, 1}, {planes, out, 1, 1, 0}};
        memcpy(spec, s, sizeof s);
    }
    for (int i = 0; i < b->nconv; i++) {
        snprintf(name, sizeof name, "%s.conv%d", prefix, i + 1);
        RT_TRY(rt_conv_layer_init(&b->conv[i], sd, name, 2, spec[i][0], spec[i][1], spec[i][2], spec[i][3],
                                  spec[i][4], 1, false, RT_INIT_KAIMING_FAN_OUT));
        snprintf(name, sizeof name, "%s.bn%d", prefix, i + 1);
        RT_TRY(rt_batchnorm_layer_init(&b->bn[i], sd, name, spec[i][1]));
    }
    b->has_downsample = stride != 1 || in != out;
    if (b->has_downsample) {
        snprintf(name, sizeof name, "%s.downsample.0", prefix);
        RT_TRY(rt_conv_layer_init(&b->down_conv, sd, name, 2, in, out, 1, stride, 0, 1, false,
                                  RT_INIT_KAIMING_FAN_OUT));
        snprintf(name, sizeof name, "%s.downsample.1", prefix);
        RT_TRY(rt_batchnorm_layer_init(&b->down_bn, sd, name, out));
    }
    return RT_OK;
}

/* bn(conv(relu(bn(conv(x))))...): the residual branch, releasing each
 * intermediate as soon as the next op has consumed it. */
static rt_status rt_residual_forward(rt_resblock *b, rt_tensor *x, bool training, rt_tensor **out) {
    *out = NULL;
    rt_tensor *h = rt_tensor_retain(x);
    for (int i = 0; i < b->nconv; i++) {
        RT_SEQ(h, c, rt_conv_layer_forward(&b->conv[i], h, &c));
        if (i + 1 < b->nconv) RT_SEQ(h, r, rt_batchnorm_relu_layer_forward(&b->bn[i], h, training, &r));
        else RT_SEQ(h, n, rt_batchnorm_layer_forward(&b->bn[i], h, training, &n));
    }
    *out = h;
    return RT_OK;
}

/* x itself, or the projection bn(conv1x1(x)) when the block changes shape. */
static rt_status rt_shortcut_forward(rt_resblock *b, rt_tensor *x, bool training, rt_tensor **out) {
    *out = NULL;
    rt_tensor *id = rt_tensor_retain(x);
    if (b->has_downsample) {
        RT_SEQ(id, c, rt_conv_layer_forward(&b->down_conv, id, &c));
        RT_SEQ(id, n, rt_batchnorm_layer_forward(&b->down_bn, id, training, &n));
    }
    *out = id;
    return RT_OK;
}

/* relu(residual(x) + shortcut(x)) */
rt_status rt_resblock_forward(rt_resblock *b, rt_tensor *x, bool training, rt_tensor **out) {
    *out = NULL;
    rt_tensor *h, *id;
    RT_TRY(rt_residual_forward(b, x, training, &h));
    rt_status st = rt_shortcut_forward(b, x, training, &id);
    if (st != RT_OK) {
        rt_tensor_release(h);
        return st;
    }
    st = rt_add_relu(h, id, out);
    rt_tensor_release(h);
    rt_tensor_release(id);
    return st;
}

