/* Activations in oneDNN's blocked order (core/layout.h) give the same
 * results as the plain order: the same model and batch, run with
 * rt_module_set_blocked on and off, produce the same loss and parameter gradients
 * (relative error ≤ 1e-5; the kernels sum in different orders). Also the
 * differentiable reorder op and the ops that must fall back to plain. */
#include <math.h>
#include <oneapi/dnnl/dnnl.h>
#include <stdio.h>
#include <string.h>

#include "autograd/engine.h"
#include "kernels/cpu.h"
#include "memory/reversible.h"
#include "models/model.h"
#include "nn/modules.h"
#include "ops/ops.h"
#include "rt_test.h"

/* Loss and gradients of one training step; grads[i] are new references. */
static void step(const char *model, bool blocked, bool reversible, float *loss_out, rt_tensor **grads, int *np) {
    rt_model *m = NULL;
    *np = 0;
    if (rt_model_create(model, 1, 10, RT_DEVICE_CPU, 9, &m) != RT_OK) return;
    rt_module_set_blocked(m->net, blocked);
    rt_module_set_reversible(m->net, reversible);
    int64_t xs[4] = {4, 1, 16, 16}, n = 4;
    rt_tensor *x = rt_tensor_create(4, xs, RT_F32, RT_DEVICE_CPU, RT_MEM_DATA);
    rt_tensor *y = rt_tensor_create(1, &n, RT_I32, RT_DEVICE_CPU, RT_MEM_DATA);
    rt_generator g = {21, 0};
    rt_generator_normal(&g, rt_tensor_numel(x), 0.0f, 1.0f, rt_tensor_f32(x));
    for (int i = 0; i < n; i++) ((int32_t *)rt_tensor_data(y))[i] = (i * 3) % 10;
    rt_tensor *logits = NULL, *loss = NULL;
    if (rt_model_forward(m, x, &logits) == RT_OK && rt_cross_entropy(logits, y, 0.0f, &loss) == RT_OK &&
        rt_backward(loss, NULL, false) == RT_OK) {
        *loss_out = rt_tensor_f32(loss)[0];
        rt_tensor *params[512];
        *np = rt_state_dict_num_params(m->sd);
        rt_state_dict_params(m->sd, params, 512);
        for (int i = 0; i < *np; i++) grads[i] = rt_tensor_retain(params[i]->grad);
    }
    rt_tensor_release(logits);
    rt_tensor_release(loss);
    rt_tensor_release(x);
    rt_tensor_release(y);
    rt_model_destroy(m);
}

static void check_model(const char *model, bool reversible) {
    static rt_tensor *ga[512], *gb[512];
    int na = 0, nb = 0;
    float la = 0, lb = 0;
    step(model, false, reversible, &la, ga, &na);
    step(model, true, reversible, &lb, gb, &nb);
    CHECK(na > 0 && na == nb);
    double worst = 0.0;
    for (int i = 0; i < na; i++) {
        double m = 0, scale = 0;
        if (ga[i] && gb[i] && rt_compare(gb[i], ga[i], &m, &scale) == RT_OK)
            worst = fmax(worst, m / fmax(scale, 1e-12));
        else
            worst = INFINITY;
        rt_tensor_release(ga[i]);
        rt_tensor_release(gb[i]);
    }
    printf("  %s%s: loss plain %.7f blocked %.7f, max relative gradient difference %.2e\n", model,
           reversible ? " (reversible)" : "", la, lb, worst);
    CHECK_NEAR(la, lb, 1e-5 * fabs(la));
    CHECK(worst <= 1e-5);
}

static void test_resnet20_blocked_equals_plain(void) { check_model("resnet20", false); }
static void test_revnet38_blocked_equals_plain(void) { check_model("revnet38", true); }
static void test_revnet_small_blocked_equals_plain(void) { check_model("revnet_small", true); }

/* A stem convolution asked for a preferred output writes the blocked order
 * from a plain input, with the same values as its plain output, and a
 * following PreferredLayout passes it on unchanged; rt_module_set_blocked
 * (false) turns it back to plain. (ResNets ask it of conv1.) */
static void test_stem_conv_writes_blocked(void) {
    rt_init_ctx ctx = rt_init_ctx_make(RT_DEVICE_CPU, 3);
    rt_module *seq = NULL, *conv = NULL, *to = NULL;
    CHECK_OK(rt_sequential_create(&seq));
    CHECK_OK(rt_conv_create(&ctx, 2, 3, 2 * rt_layout_block(), 3, 2, 1, 1, true, RT_INIT_DEFAULT, &conv));
    CHECK_OK(rt_module_add_child(seq, "conv1", conv));
    CHECK_OK(rt_preferred_layout_create(&to));
    CHECK_OK(rt_module_add_child(seq, "to_blocked", to));
    int64_t xs[4] = {2, 3, 9, 11};
    rt_tensor *x = rt_tensor_create(4, xs, RT_F32, RT_DEVICE_CPU, RT_MEM_DATA), *plain = NULL, *blocked = NULL,
              *back = NULL, *y = NULL;
    rt_generator g = {5, 0};
    rt_generator_normal(&g, rt_tensor_numel(x), 0.0f, 1.0f, rt_tensor_f32(x));
    CHECK_OK(rt_module_forward(conv, x, &plain));
    CHECK(plain->layout == RT_LAYOUT_PLAIN);
    CHECK_OK(rt_conv_set_preferred_output(conv, true));
    CHECK_OK(rt_module_forward(conv, x, &blocked));
    CHECK(blocked->layout == RT_LAYOUT_BLOCKED);
    CHECK_OK(rt_to_layout(blocked, RT_LAYOUT_PLAIN, &back));
    double m = 0, scale = 0;
    CHECK_OK(rt_compare(back, plain, &m, &scale));
    CHECK(m == 0.0); /* the same kernel, only the last reorder differs */
    CHECK_OK(rt_module_forward(seq, x, &y));
    CHECK(y->layout == RT_LAYOUT_BLOCKED && y->storage != NULL);
    rt_tensor_release(y);
    rt_module_set_blocked(seq, false);
    CHECK_OK(rt_module_forward(seq, x, &y));
    CHECK(y->layout == RT_LAYOUT_PLAIN);
    rt_tensor_release(y);
    rt_tensor_release(back);
    rt_tensor_release(blocked);
    rt_tensor_release(plain);
    rt_tensor_release(x);
    rt_module_destroy(seq);
}

/* to_layout round trip is exact; its gradient is the reorder back; split at
 * unaligned channels and reshape fall back to plain with correct values. */
static void test_to_layout_and_fallbacks(void) {
    int64_t shape[4] = {2, 2 * rt_layout_block(), 3, 3};
    rt_tensor *x = rt_tensor_create(4, shape, RT_F32, RT_DEVICE_CPU, RT_MEM_DATA);
    rt_generator g = {5, 0};
    rt_generator_normal(&g, rt_tensor_numel(x), 0.0f, 1.0f, rt_tensor_f32(x));
    CHECK_OK(rt_tensor_set_requires_grad(x, true));
    rt_tensor *b = NULL, *back = NULL, *parts[2] = {0}, *flat = NULL;
    CHECK_OK(rt_to_layout(x, RT_LAYOUT_BLOCKED, &b));
    CHECK_EQ_INT(b->layout, RT_LAYOUT_BLOCKED);
    /* element (n=1, c=B+1, h=2, w=0) sits where the blocked formula says */
    int64_t cb = (rt_layout_block() + 1) / rt_layout_block(), ci = (rt_layout_block() + 1) % rt_layout_block();
    int64_t off = ((1 * 2 + cb) * 9 + 2 * 3 + 0) * rt_layout_block() + ci;
    CHECK(rt_tensor_f32(b)[off] == rt_tensor_f32(x)[((1 * 2 * rt_layout_block()) + rt_layout_block() + 1) * 9 + 6]);
    CHECK_OK(rt_to_layout(b, RT_LAYOUT_PLAIN, &back));
    CHECK(memcmp(rt_tensor_data(back), rt_tensor_data(x), rt_tensor_nbytes(x)) == 0);
    /* an unaligned split of a blocked tensor: values equal the plain split */
    const int64_t sizes[2] = {3, 2 * rt_layout_block() - 3};
    CHECK_OK(rt_split_channels(b, 2, sizes, parts));
    CHECK_EQ_INT(parts[0]->layout, RT_LAYOUT_PLAIN);
    CHECK(rt_tensor_f32(parts[1])[0] == rt_tensor_f32(x)[3 * 9]);
    /* flatten of a blocked 4-D tensor goes through the plain order */
    CHECK_OK(rt_flatten(b, &flat));
    CHECK(memcmp(rt_tensor_data(flat), rt_tensor_data(x), rt_tensor_nbytes(x)) == 0);
    /* gradient through to_layout: d(sum(flat·1))/dx = 1 everywhere */
    rt_tensor *ones = rt_tensor_empty_like(flat, RT_MEM_TEMP);
    rt_tensor_fill(ones, 1.0f);
    CHECK_OK(rt_backward(flat, ones, false));
    for (int64_t i = 0; i < rt_tensor_numel(x); i++) CHECK(rt_tensor_f32(x->grad)[i] == 1.0f);
    rt_tensor_release(ones);
    rt_tensor_release(flat);
    rt_tensor_release(parts[0]);
    rt_tensor_release(parts[1]);
    rt_tensor_release(back);
    rt_tensor_release(b);
    rt_tensor_release(x);
    /* channels that do not fill blocks cannot be blocked */
    int64_t odd[4] = {1, rt_layout_block() + 1, 2, 2};
    rt_tensor *o = rt_tensor_create(4, odd, RT_F32, RT_DEVICE_CPU, RT_MEM_DATA), *ob = NULL;
    CHECK(rt_to_layout(o, RT_LAYOUT_BLOCKED, &ob) == RT_ERR_INVALID_ARG);
    rt_tensor_release(o);
}

/* The inner channel block oneDNN's convolution picks for its destination
 * when given format `any` (ResNet's 64 -> 64 3x3 at 14x14), or -1. */
static int onednn_conv_dst_block(void) {
    dnnl_engine_t eng = NULL;
    if (dnnl_engine_create(&eng, dnnl_cpu, 0) != dnnl_success) return -1;
    const dnnl_dims_t src = {2, 64, 14, 14}, wei = {64, 64, 3, 3}, dst = {2, 64, 14, 14};
    const dnnl_dims_t strides = {1, 1}, pad = {1, 1};
    dnnl_memory_desc_t sd, wd, dd;
    dnnl_convolution_desc_t cd;
    dnnl_primitive_desc_t pd = NULL;
    int block = -1;
    if (dnnl_memory_desc_init_by_tag(&sd, 4, src, dnnl_f32, dnnl_format_tag_any) == dnnl_success &&
        dnnl_memory_desc_init_by_tag(&wd, 4, wei, dnnl_f32, dnnl_format_tag_any) == dnnl_success &&
        dnnl_memory_desc_init_by_tag(&dd, 4, dst, dnnl_f32, dnnl_format_tag_any) == dnnl_success &&
        dnnl_convolution_forward_desc_init(&cd, dnnl_forward_training, dnnl_convolution_direct, &sd, &wd, NULL,
                                           &dd, strides, pad, pad) == dnnl_success &&
        dnnl_primitive_desc_create(&pd, &cd, NULL, eng, NULL) == dnnl_success) {
        const dnnl_memory_desc_t *md = dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
        if (md && md->format_kind == dnnl_blocked && md->format_desc.blocking.inner_nblks == 1)
            block = (int)md->format_desc.blocking.inner_blks[0];
    }
    dnnl_primitive_desc_destroy(pd);
    dnnl_engine_destroy(eng);
    return block;
}

/* The blocked layout's block is a run-time value and equals what oneDNN's
 * convolution picks on this CPU (16 with AVX-512, 8 with AVX2 — also under
 * DNNL_MAX_CPU_ISA=AVX2 on an AVX-512 machine, which CTest runs as
 * test_layout_avx2). revtorch's own loops follow the same ISA cap. */
static void test_block_is_onednns_choice(void) {
    const int picked = onednn_conv_dst_block();
    printf("  oneDNN ISA %s: conv picks block %d, rt_layout_block() = %d, own loops %s\n",
           rt_cpu_dnnl_isa_name(), picked, rt_layout_block(), rt_cpu_level_name(rt_cpu_level_get()));
    CHECK_EQ_INT(rt_layout_block(), picked);
    const char *cap = getenv("DNNL_MAX_CPU_ISA");
    if (cap && strcmp(cap, "AVX2") == 0) {
        CHECK_EQ_INT(rt_layout_block(), 8);
        CHECK(rt_cpu_level_get() <= RT_CPU_AVX2);
    }
}

RT_TEST_MAIN({"block_is_onednns_choice", test_block_is_onednns_choice},
             {"resnet20_blocked_equals_plain", test_resnet20_blocked_equals_plain},
             {"revnet38_blocked_equals_plain", test_revnet38_blocked_equals_plain},
             {"revnet_small_blocked_equals_plain", test_revnet_small_blocked_equals_plain},
             {"stem_conv_writes_blocked", test_stem_conv_writes_blocked},
             {"to_layout_and_fallbacks", test_to_layout_and_fallbacks})
