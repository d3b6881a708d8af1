/* Gradient checkpointing (src/memory/checkpoint.h): strategy equivalence with
 * plain backpropagation, honest recompute, errors, and the memory it saves.
 *
 * Equivalence: two copies of a model built from the same seed, one plain,
 * one wrapped in a Checkpoint with a plan; both run one training forward
 * (and backward) from the same generator position. Checked:
 *   parameter gradients                 rel ≤ 1e-5 (f32), rel(a, b) =
 *                                       max|a - b| / max|b| per tensor
 *   running_mean / running_var          bitwise, after forward+backward and
 *   num_batches_tracked                 after a forward alone
 *   default generator (seed, offset)    equal after the step
 * on resnet20 (CIFAR, 8×8 inputs), ResNet-50 (32×32 inputs: fast, the same
 * module tree as 224²) and a conv/batch-norm/dropout chain, for 1, 2, 4
 * and 8 segments, selective recompute and mixed plans.
 *
 * Memory: the chain of 16 Linear(1024)+ReLU blocks at batch 4096
 * (one activation = 16 MiB) runs on the meta device, which books every byte
 * the real run would (core/tensor.h) and computes nothing, so the exact
 * setting runs everywhere, ASan included; `chain_full` (CTest
 * test_checkpoint_chain_full, label e2e) runs it on real tensors in the
 * Release suite and checks the same bytes and the gradients; ResNet-50's
 * equivalence cases run as `test_checkpoint resnet50` (CTest
 * test_checkpoint_resnet50, label e2e).
 *
 * Every test runs in a TU_TEST scope: the tracked allocator must be back
 * where it started (frames, kept inputs and recomputed tensors all freed). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/engine.h"
#include "autograd/node.h"
#include "core/mem.h"
#include "core/rng.h"
#include "core/tensor.h"
#include "memory/checkpoint.h"
#include "kernels/conv.h"
#include "memory/precision.h"
#include "models/model.h"
#include "nn/module.h"
#include "nn/modules.h"
#include "nn/state_dict.h"
#include "ops/ops.h"
#include "rt_test.h"
#include "test_util.h"

static void module_free(void *p) { rt_module_destroy(p); }
static void sd_free(void *p) { rt_state_dict_destroy(p); }

/* ------------------------------------------------------------ models */

typedef enum { NET_RESNET20, NET_RESNET50, NET_DROPOUT_CHAIN, NET_LINEAR_CHAIN } net_kind;

/* conv → bn → relu → dropout → conv → bn+relu → dropout → pool → linear */
static rt_status dropout_chain(rt_init_ctx *ctx, rt_module **out) {
    rt_module *s;
    RT_TRY(rt_sequential_create(&s));
    rt_module *m;
#define ADD(expr) do { rt_status st_ = (expr); if (st_ == RT_OK) st_ = rt_module_append(s, m); \
                       if (st_ != RT_OK) { rt_module_destroy(s); return st_; } } while (0)
    ADD(rt_conv_create(ctx, 2, 3, 8, 3, 1, 1, 1, true, RT_INIT_DEFAULT, &m));
    ADD(rt_batchnorm_create(ctx, 2, 8, false, &m));
    ADD(rt_relu_create(&m));
    ADD(rt_dropout_create(0.3f, &m));
    ADD(rt_conv_create(ctx, 2, 8, 8, 3, 1, 1, 1, false, RT_INIT_DEFAULT, &m));
    ADD(rt_batchnorm_create(ctx, 2, 8, true, &m));
    ADD(rt_dropout_create(0.2f, &m));
    ADD(rt_adaptive_avg_pool_create(2, 1, &m));
    ADD(rt_flatten_create(&m));
    ADD(rt_linear_create(ctx, 8, 5, true, &m));
#undef ADD
    *out = s;
    return RT_OK;
}

/* `blocks` × (Linear(width) + ReLU) */
static rt_status linear_chain(rt_init_ctx *ctx, int blocks, int64_t width, rt_module **out) {
    rt_module *s;
    RT_TRY(rt_sequential_create(&s));
    for (int i = 0; i < blocks; i++) {
        rt_module *l = NULL, *r = NULL;
        rt_status st = rt_linear_create(ctx, width, width, true, &l);
        if (st == RT_OK) st = rt_module_append(s, l);
        if (st == RT_OK) st = rt_relu_create(&r);
        if (st == RT_OK) st = rt_module_append(s, r);
        if (st != RT_OK) {
            rt_module_destroy(s);
            return st;
        }
    }
    *out = s;
    return RT_OK;
}

/* A new network of `kind` (seed 11) on `device`; the test frees it when
 * `owned` (else the caller hands it to a Checkpoint, which then owns it). */
static rt_module *make_net(net_kind kind, rt_device device, bool owned) {
    rt_module *net = NULL;
    rt_init_ctx ctx = rt_init_ctx_make(device, 11);
    rt_status st = RT_OK;
    if (kind == NET_RESNET20 || kind == NET_RESNET50) {
        rt_model *model = NULL;
        st = rt_model_create(kind == NET_RESNET20 ? "resnet20" : "resnet50", 3, 10, device, 11, &model);
        if (st == RT_OK) {
            net = model->net;
            model->net = NULL;
            rt_model_destroy(model);
        }
    } else if (kind == NET_DROPOUT_CHAIN) {
        st = dropout_chain(&ctx, &net);
    } else {
        st = linear_chain(&ctx, 4, 16, &net);
    }
    if (st != RT_OK) {
        fprintf(stderr, "make_net: %s\n", rt_error_last());
        return NULL;
    }
    if (owned) tu_defer(module_free, net);
    return net;
}

static rt_tensor *make_input(net_kind kind) {
    rt_generator g = {5, 0};
    if (kind == NET_LINEAR_CHAIN) return tu_randn(&g, 2, (int64_t[]){8, 16}, 0.0f, 1.0f);
    int64_t s = kind == NET_RESNET50 ? 32 : 8;
    return tu_randn(&g, 4, (int64_t[]){kind == NET_RESNET50 ? 2 : 4, 3, s, s}, 0.0f, 1.0f);
}

/* Forward (from generator position seed 3, offset 0), loss = mse(y, w)
 * for a fixed random w, backward unless forward_only. */
static rt_status run_step(rt_module *net, rt_tensor *x, bool forward_only) {
    rt_manual_seed(3);
    rt_tensor *y = NULL, *w = NULL, *loss = NULL;
    rt_status st = rt_module_forward(net, x, &y);
    if (st == RT_OK) {
        rt_generator g = {9, 0};
        w = rt_tensor_create(y->ndim, y->shape, RT_F32, RT_DEVICE_CPU, RT_MEM_DATA);
        if (!w) st = rt_error_last_status();
        else rt_generator_normal(&g, rt_tensor_numel(w), 0.0f, 1.0f, rt_tensor_f32(w));
    }
    if (st == RT_OK) st = rt_mse_loss(y, w, &loss);
    if (st == RT_OK && !forward_only) st = rt_backward(loss, NULL, false);
    rt_tensor_release(loss);
    rt_tensor_release(w);
    rt_tensor_release(y);
    return st;
}

static rt_state_dict *state_of(rt_module *net) {
    rt_state_dict *sd = NULL;
    if (rt_module_state_dict(net, &sd) != RT_OK) return NULL;
    tu_defer(sd_free, sd);
    return sd;
}

/* Compares b (strategy) against a (plain): gradients rel ≤ 1e-5, buffers
 * and counters bitwise. Returns false (with a message) on a mismatch. */
static bool same_state(const char *label, rt_state_dict *a, rt_state_dict *b, bool grads) {
    if (a->n != b->n) {
        fprintf(stderr, "%s: %d entries vs %d\n", label, a->n, b->n);
        return false;
    }
    for (int i = 0; i < a->n; i++) {
        rt_state_entry *ea = &a->entries[i], *eb = rt_state_dict_find(b, ea->name);
        if (!eb) {
            fprintf(stderr, "%s: %s missing\n", label, ea->name);
            return false;
        }
        if (ea->kind == RT_ENTRY_COUNTER) {
            if (*ea->counter != *eb->counter) {
                fprintf(stderr, "%s: %s = %lld vs %lld\n", label, ea->name, (long long)*eb->counter,
                        (long long)*ea->counter);
                return false;
            }
            continue;
        }
        int64_t n = rt_tensor_numel(ea->tensor);
        if (ea->kind == RT_ENTRY_BUFFER &&
            memcmp(rt_tensor_f32(ea->tensor), rt_tensor_f32(eb->tensor), (size_t)n * sizeof(float))) {
            fprintf(stderr, "%s: buffer %s differs\n", label, ea->name);
            return false;
        }
        if (ea->kind != RT_ENTRY_PARAM || !grads) continue;
        rt_tensor *ga = ea->tensor->grad, *gb = eb->tensor->grad;
        if (!ga || !gb) {
            fprintf(stderr, "%s: %s has %s gradient\n", label, ea->name, !gb ? "no checkpointed" : "no plain");
            return false;
        }
        double diff = tu_max_abs_diff(n, rt_tensor_f32(gb), rt_tensor_f32(ga)), ref = tu_max_abs(n, rt_tensor_f32(ga));
        if (!(diff <= 1e-5 * (ref > 0 ? ref : 1.0))) {
            fprintf(stderr, "%s: grad %s rel error %.3g\n", label, ea->name, diff / (ref > 0 ? ref : 1.0));
            return false;
        }
    }
    return true;
}

typedef enum { PLAN_SEGMENTS, PLAN_SELECTIVE, PLAN_MIXED } plan_kind;

/* Applies a plan to the wrapper: K segments, selective, or mixed (stages
 * alternate store / checkpoint pairs / selective pairs, each pair of one
 * segment number, so a pair forms one region). */
static rt_status apply_plan(rt_module *w, plan_kind p, int k) {
    if (p == PLAN_SEGMENTS) return rt_checkpoint_set_segments(w, k);
    if (p == PLAN_SELECTIVE) return rt_checkpoint_set_selective(w, NULL, NULL);
    rt_checkpoint *ck = rt_checkpoint_of(w);
    int n = ck->n_stages;
    rt_stage_kind *kind = calloc((size_t)n, sizeof *kind);
    int *seg = calloc((size_t)n, sizeof *seg);
    for (int i = 0; i < n; i++) {
        int r = i % 5;
        kind[i] = r == 0 ? RT_STAGE_STORE : r <= 2 ? RT_STAGE_CHECKPOINT : RT_STAGE_SELECTIVE;
        seg[i] = i / 5;
    }
    rt_status st = rt_checkpoint_set_plan(w, kind, seg, n);
    free(kind);
    free(seg);
    return st;
}

/* Plain vs wrapped `kind` under plan p (k segments): one step with
 * backward, then a forward alone; both compared. */
static void check_equiv(net_kind kind, plan_kind p, int k, const char *label) {
    rt_module *a = make_net(kind, RT_DEVICE_CPU, true), *inner = make_net(kind, RT_DEVICE_CPU, false), *bnet = NULL;
    CHECK(a && inner);
    CHECK_OK(rt_checkpoint_create(inner, &bnet));
    tu_defer(module_free, bnet);
    CHECK_OK(apply_plan(bnet, p, k));
    rt_tensor *x = make_input(kind);
    rt_state_dict *sa = state_of(a), *sb = state_of(bnet);
    CHECK(sa && sb);

    CHECK_OK(run_step(a, x, false));
    rt_generator ga = *rt_default_generator();
    CHECK_OK(run_step(bnet, x, false));
    rt_generator gb = *rt_default_generator();
    CHECK(ga.seed == gb.seed && ga.offset == gb.offset);
    CHECK(same_state(label, sa, sb, true));

    /* a training forward alone: running statistics still updated once */
    CHECK_OK(run_step(a, x, true));
    CHECK_OK(run_step(bnet, x, true));
    CHECK(same_state(label, sa, sb, false));
    gb = *rt_default_generator();
    CHECK_OK(run_step(a, x, true));
    ga = *rt_default_generator();
    CHECK(ga.offset == gb.offset);
}

#define EQUIV_TEST(name, kind, plan, k)                                                  \
    TU_TEST(name) {                                                                      \
        check_equiv(kind, plan, k, #name);                                               \
    }

EQUIV_TEST(resnet20_segments1, NET_RESNET20, PLAN_SEGMENTS, 1)
EQUIV_TEST(resnet20_segments2, NET_RESNET20, PLAN_SEGMENTS, 2)
EQUIV_TEST(resnet20_segments4, NET_RESNET20, PLAN_SEGMENTS, 4)
EQUIV_TEST(resnet20_segments8, NET_RESNET20, PLAN_SEGMENTS, 8)
EQUIV_TEST(resnet20_selective, NET_RESNET20, PLAN_SELECTIVE, 0)
EQUIV_TEST(resnet20_mixed, NET_RESNET20, PLAN_MIXED, 0)
EQUIV_TEST(resnet50_segments4, NET_RESNET50, PLAN_SEGMENTS, 4)
EQUIV_TEST(resnet50_selective, NET_RESNET50, PLAN_SELECTIVE, 0)
EQUIV_TEST(resnet50_mixed, NET_RESNET50, PLAN_MIXED, 0)
EQUIV_TEST(dropout_segments1, NET_DROPOUT_CHAIN, PLAN_SEGMENTS, 1)
EQUIV_TEST(dropout_segments3, NET_DROPOUT_CHAIN, PLAN_SEGMENTS, 3)
EQUIV_TEST(dropout_selective, NET_DROPOUT_CHAIN, PLAN_SELECTIVE, 0)
EQUIV_TEST(dropout_mixed, NET_DROPOUT_CHAIN, PLAN_MIXED, 0)
EQUIV_TEST(linear_selective, NET_LINEAR_CHAIN, PLAN_SELECTIVE, 0)

/* Checkpoint(Autocast(net)) against Autocast(net) in precision `prec`:
 * the checkpoint finds net's stages inside the precision region (not one
 * stage), and its recompute re-enters the region, computing what the
 * forward computed and storing what it saves as the region stores it, so
 * the gradients are those of the region without checkpointing. */
static void check_equiv_precision(net_kind kind, plan_kind p, int k, rt_precision prec, const char *label) {
    rt_module *a = make_net(kind, RT_DEVICE_CPU, false), *inner = make_net(kind, RT_DEVICE_CPU, false);
    rt_module *plain_ck = NULL, *aa = NULL, *ai = NULL, *bnet = NULL;
    CHECK(a && inner);
    CHECK_OK(rt_autocast_wrap(a, prec, &aa));
    tu_defer(module_free, aa);
    CHECK_OK(rt_autocast_wrap(inner, prec, &ai));
    CHECK_OK(rt_checkpoint_create(ai, &bnet));
    tu_defer(module_free, bnet);
    CHECK_OK(rt_checkpoint_create(make_net(kind, RT_DEVICE_CPU, false), &plain_ck));
    tu_defer(module_free, plain_ck);
    CHECK_EQ_INT(rt_checkpoint_of(bnet)->n_stages, rt_checkpoint_of(plain_ck)->n_stages);
    CHECK(rt_checkpoint_of(bnet)->n_stages > 1);
    CHECK_OK(apply_plan(bnet, p, k));
    rt_tensor *x = make_input(kind);
    rt_state_dict *sa = state_of(aa), *sb = state_of(bnet);
    CHECK(sa && sb);
    rt_module *f32 = make_net(kind, RT_DEVICE_CPU, true);
    rt_state_dict *sf = state_of(f32);
    CHECK(f32 && sf);
    CHECK_OK(run_step(f32, x, false));
    CHECK_OK(run_step(aa, x, false));
    CHECK_OK(run_step(bnet, x, false));
    /* Against f32, the checkpointed run's error is the region's own: both
     * store activations in half precision, except that a checkpointed
     * region keeps its input exact (f32) and a selective one recomputes
     * from its kept outputs' half copies, so the errors differ by the
     * spread of rounding (measured 0.99-1.08x with bf16 convolutions), not
     * by an error of the checkpoint's own (a recompute outside the region,
     * or from rounded inputs, measured up to 28x). Storage-only bf16
     * (DNNL_MAX_CPU_ISA=AVX2) is the exception the bound 1.6 allows:
     * resnet20_bf16_mixed measured 1.39x (0.0116 against 0.00833), then
     * 1.53x once batch norm saved x − mean (ops/op_util.h), which lowered
     * the region's own error to 0.00751 and left the checkpointed one at
     * 0.0115 — the selective stages recompute batch statistics from their
     * kept outputs' bf16 copies. Reusing the forward's statistics in the
     * recompute would remove that excess; not built. */
    double sa2 = 0, sb2 = 0, sf2 = 0; /* all parameters' gradients as one vector */
    for (int i = 0; i < sf->n; i++) {
        rt_state_entry *e = &sf->entries[i];
        if (e->kind != RT_ENTRY_PARAM) continue;
        rt_tensor *gf = e->tensor->grad, *ga = rt_state_dict_find(sa, e->name)->tensor->grad,
                  *gb = rt_state_dict_find(sb, e->name)->tensor->grad;
        CHECK(gf && ga && gb);
        const float *pf = rt_tensor_f32(gf), *pa = rt_tensor_f32(ga), *pb = rt_tensor_f32(gb);
        for (int64_t j = 0; j < rt_tensor_numel(gf); j++) {
            sf2 += (double)pf[j] * pf[j];
            sa2 += ((double)pa[j] - pf[j]) * ((double)pa[j] - pf[j]);
            sb2 += ((double)pb[j] - pf[j]) * ((double)pb[j] - pf[j]);
        }
    }
    CHECK(sf2 > 0);
    double ea = sqrt(sa2 / sf2), eb = sqrt(sb2 / sf2);
    printf("  %s: gradient error against f32 (L2, relative): region alone %.3g, checkpointed in it %.3g\n",
           label, ea, eb);
    CHECK(eb <= 1.6 * ea);
}

#define EQUIV_PREC_TEST(name, kind, plan, k, prec)                                       \
    TU_TEST(name) {                                                                      \
        check_equiv_precision(kind, plan, k, prec, #name);                               \
    }

EQUIV_PREC_TEST(resnet20_fp16_segments2, NET_RESNET20, PLAN_SEGMENTS, 2, RT_PRECISION_FP16)
EQUIV_PREC_TEST(resnet20_fp16_selective, NET_RESNET20, PLAN_SELECTIVE, 0, RT_PRECISION_FP16)
EQUIV_PREC_TEST(resnet20_bf16_mixed, NET_RESNET20, PLAN_MIXED, 0, RT_PRECISION_BF16)
EQUIV_PREC_TEST(dropout_bf16_segments3, NET_DROPOUT_CHAIN, PLAN_SEGMENTS, 3, RT_PRECISION_BF16)

/* ------------------------------------------------------------ semantics */

/* The input needs no gradient (a batch never does): the parameters of a
 * checkpointed region still get theirs (the reentrant variant loses them). */
TU_TEST(params_get_grads_without_input_grad) {
    rt_module *net = make_net(NET_LINEAR_CHAIN, RT_DEVICE_CPU, false), *w = NULL;
    CHECK_OK(rt_checkpoint_create(net, &w));
    tu_defer(module_free, w);
    rt_tensor *x = make_input(NET_LINEAR_CHAIN);
    CHECK(!x->requires_grad);
    CHECK_OK(run_step(w, x, false));
    rt_state_dict *sd = state_of(w);
    for (int i = 0; i < sd->n; i++)
        if (sd->entries[i].kind == RT_ENTRY_PARAM) CHECK(sd->entries[i].tensor->grad != NULL);
}

/* Backward twice: without retain_graph a clear error; with it, every
 * backward recomputes and the gradients add up (2 × once). */
TU_TEST(backward_twice) {
    rt_module *net = make_net(NET_DROPOUT_CHAIN, RT_DEVICE_CPU, false), *w = NULL;
    CHECK_OK(rt_checkpoint_sequential(net, 2, &w));
    tu_defer(module_free, w);
    rt_tensor *x = make_input(NET_DROPOUT_CHAIN);
    rt_manual_seed(3);
    rt_tensor *y = NULL, *loss = NULL;
    CHECK_OK(rt_module_forward(w, x, &y));
    tu_own(y);
    CHECK_OK(rt_sum(y, &loss));
    tu_own(loss);
    CHECK_OK(rt_backward(loss, NULL, true));
    rt_state_dict *sd = state_of(w);
    rt_tensor *p0 = sd->entries[0].tensor;
    int64_t n = rt_tensor_numel(p0);
    float *once = malloc((size_t)n * sizeof *once);
    memcpy(once, rt_tensor_f32(p0->grad), (size_t)n * sizeof *once);
    rt_status st2 = rt_backward(loss, NULL, false);
    double worst = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs(rt_tensor_f32(p0->grad)[i] - 2.0 * once[i]) / (fabs(2.0 * once[i]) + 1e-12);
        if (d > worst && fabs(once[i]) > 1e-6) worst = d;
    }
    free(once);
    CHECK_OK(st2);
    CHECK(worst <= 1e-5);
    rt_status st = rt_backward(loss, NULL, false);
    CHECK(st == RT_ERR_GRAPH_RELEASED);
    CHECK(strstr(rt_error_last(), "retain_graph") != NULL);
}

/* A module whose forward runs a different number of ops each call, between
 * two Linear layers: the recompute saves more tensors than the forward,
 * and backward says so instead of handing out wrong ones. */
typedef struct flaky_module {
    rt_module base;
    int calls;
} flaky_module;

static rt_status flaky_forward(rt_module *m, rt_tensor *x, rt_tensor **y) {
    flaky_module *f = (flaky_module *)m;
    rt_tensor *h = rt_tensor_retain(x);
    for (int i = 0; i <= f->calls % 2; i++) RT_SEQ(h, next, rt_relu(h, &next));
    f->calls++;
    *y = h;
    return RT_OK;
}

static const rt_module_class flaky_class = {"Flaky", flaky_forward, NULL, NULL};

TU_TEST(recompute_mismatch_is_an_error) {
    rt_module *s = NULL, *w = NULL, *lin = NULL;
    rt_init_ctx ctx = rt_init_ctx_make(RT_DEVICE_CPU, 1);
    CHECK_OK(rt_sequential_create(&s));
    CHECK_OK(rt_linear_create(&ctx, 4, 4, true, &lin));
    CHECK_OK(rt_module_append(s, lin));
    rt_module *fl = rt_module_alloc(sizeof(flaky_module), &flaky_class);
    CHECK(fl);
    CHECK_OK(rt_module_append(s, fl));
    CHECK_OK(rt_linear_create(&ctx, 4, 4, true, &lin));
    CHECK_OK(rt_module_append(s, lin));
    CHECK_OK(rt_checkpoint_create(s, &w));
    tu_defer(module_free, w);
    rt_generator g = {1, 0};
    rt_tensor *x = tu_randn(&g, 2, (int64_t[]){2, 4}, 0.0f, 1.0f);
    rt_tensor *y = NULL, *loss = NULL;
    CHECK_OK(rt_module_forward(w, x, &y));
    tu_own(y);
    CHECK_OK(rt_sum(y, &loss));
    tu_own(loss);
    CHECK(rt_backward(loss, NULL, false) == RT_ERR_STATE);
    CHECK(strstr(rt_error_last(), "same ops") != NULL);
}

/* y = relu(a + a²), a = 2x, the sum written over a (rt_add_relu_inplace):
 * inside a region nothing marks a as saved (the region's hooks hold it),
 * so a is consumed, and y — the region's output — has a's storage. */
static rt_status sum_over_forward(rt_module *m, rt_tensor *x, rt_tensor **y) {
    (void)m;
    rt_tensor *a = NULL, *p = NULL;
    RT_TRY(rt_mul_scalar(x, 2.0f, &a));
    rt_status st = rt_mul(a, a, &p); /* saves a */
    if (st == RT_OK) st = rt_add_relu_inplace(a, p, y);
    rt_tensor_release(a);
    rt_tensor_release(p);
    return st;
}

static const rt_module_class sum_over_class = {"SumOver", sum_over_forward, NULL, NULL};

/* A region whose output was written over a tensor the region saved: the
 * saved tensor is recomputed, not taken to be the output (same storage,
 * same serial, another version). d/dx relu(2x + 4x²) = (2 + 8x)·[2x + 4x² > 0];
 * the square's backward reading y for a would give 2·(1 + 2y)·… instead. */
TU_TEST(output_over_a_saved_tensor) {
    rt_module *m = rt_module_alloc(sizeof(rt_module), &sum_over_class), *w = NULL;
    CHECK(m);
    CHECK_OK(rt_checkpoint_create(m, &w));
    tu_defer(module_free, w);
    const float xs[6] = {-1.0f, -0.25f, -0.125f, 0.25f, 0.5f, 1.0f};
    rt_tensor *x = rt_tensor_create(1, (int64_t[]){6}, RT_F32, RT_DEVICE_CPU, RT_MEM_DATA);
    CHECK(x);
    tu_own(x);
    memcpy(rt_tensor_f32(x), xs, sizeof xs);
    CHECK_OK(rt_tensor_set_requires_grad(x, true));
    rt_tensor *y = NULL, *loss = NULL;
    CHECK_OK(rt_module_forward(w, x, &y));
    tu_own(y);
    CHECK_OK(rt_sum(y, &loss));
    tu_own(loss);
    CHECK_OK(rt_backward(loss, NULL, false));
    for (int i = 0; i < 6; i++) {
        float v = xs[i], want = 2 * v + 4 * v * v > 0 ? 2 + 8 * v : 0;
        CHECK_NEAR(rt_tensor_f32(x->grad)[i], want, 1e-6f);
    }
}

/* Wraps net (a copy of plain) in a Checkpoint *w; both are freed at the
 * end of the test. *w NULL when the wrapper cannot be made. */
static void checkpoint_beside(rt_module *plain, rt_module *net, rt_module **w) {
    *w = NULL;
    tu_defer(module_free, plain);
    CHECK_OK(rt_checkpoint_create(net, w));
    if (*w) tu_defer(module_free, *w);
}

/* One step of plain and of w on the same 4×8 batch: the same gradients
 * (rel ≤ 1e-5), buffers and counters. */
static void check_same_step(rt_module *plain, rt_module *w, const char *label) {
    rt_generator g = {1, 0};
    rt_tensor *x = tu_randn(&g, 2, (int64_t[]){4, 8}, 0.0f, 1.0f);
    CHECK_OK(run_step(plain, x, false));
    CHECK_OK(run_step(w, x, false));
    CHECK(same_state(label, state_of(plain), state_of(w), true));
}

/* A leaf that scales its input in place, then squares it: y = (2x)², the
 * product saving the scaled tensor, whose storage is the input's at a
 * later version. That save is not the leaf's input: a recompute that
 * filled it with the unscaled input instead of running the leaf (the skip
 * of a leaf whose input is all that is left) would halve the gradient. */
typedef struct scale_square_module {
    rt_module base;
    int in_place; /* forwards that did scale in place (the case under test) */
} scale_square_module;

static rt_status scale_square_forward(rt_module *m, rt_tensor *x, rt_tensor **y) {
    rt_tensor *a = NULL;
    RT_TRY(rt_mul_scalar_inplace(x, 2.0f, &a));
    ((scale_square_module *)m)->in_place += a->storage == x->storage;
    rt_status st = rt_mul(a, a, y);
    rt_tensor_release(a);
    return st;
}

static const rt_module_class scale_square_class = {"ScaleSquare", scale_square_forward, NULL, NULL};

/* Linear(8, 8) then ScaleSquare, plain (a) and in one checkpointed region
 * (b): the same gradients. */
TU_TEST(leaf_that_writes_its_input) {
    rt_module *nets[2] = {NULL, NULL}, *sq = NULL;
    for (int k = 0; k < 2; k++) {
        rt_init_ctx ctx = rt_init_ctx_make(RT_DEVICE_CPU, 7);
        rt_module *s = NULL, *lin = NULL;
        sq = rt_module_alloc(sizeof(scale_square_module), &scale_square_class);
        CHECK(sq);
        CHECK_OK(rt_sequential_create(&s));
        CHECK_OK(rt_linear_create(&ctx, 8, 8, true, &lin));
        CHECK_OK(rt_module_append(s, lin));
        CHECK_OK(rt_module_append(s, sq));
        nets[k] = s;
    }
    rt_module *w = NULL;
    checkpoint_beside(nets[0], nets[1], &w);
    if (!w) return;
    CHECK_OK(rt_checkpoint_set_segments(w, 1));
    check_same_step(nets[0], w, "in-place leaf");
    CHECK(((scale_square_module *)sq)->in_place >= 1); /* inside the region nothing else held x */
}

/* A module without registered children whose forward runs another module
 * (a hand-written wrapper), kept whole by a selective region's policy: its
 * recompute is not run, nor the module inside it, so the recompute's
 * leaves must be counted as the forward's were (the inner module is part
 * of its caller), or every later save looks like another module's. */
typedef struct wrapper_module {
    rt_module base;
    rt_module *inner;
} wrapper_module;

static rt_status wrapper_forward(rt_module *m, rt_tensor *x, rt_tensor **y) {
    return rt_module_forward(((wrapper_module *)m)->inner, x, y);
}

static void wrapper_destroy(rt_module *m) { rt_module_destroy(((wrapper_module *)m)->inner); }

static const rt_module_class wrapper_class = {"Wrapper", wrapper_forward, wrapper_destroy, NULL};

static rt_checkpoint_policy keep_wrappers(void *user, const rt_module *leaf) {
    (void)user;
    return !strcmp(leaf->cls->type, "Wrapper") ? RT_CKPT_MUST_SAVE : RT_CKPT_PREFER_RECOMPUTE;
}

/* Linear, Wrapper(Linear), ReLU, Linear, plain (a) and as one selective
 * region keeping the Wrapper's output (b): the same gradients. */
TU_TEST(kept_call_that_runs_a_module) {
    rt_module *nets[2] = {NULL, NULL};
    for (int k = 0; k < 2; k++) {
        rt_init_ctx ctx = rt_init_ctx_make(RT_DEVICE_CPU, 7);
        rt_module *s = NULL, *m = NULL;
        wrapper_module *wr = (wrapper_module *)rt_module_alloc(sizeof *wr, &wrapper_class);
        CHECK(wr);
        CHECK_OK(rt_sequential_create(&s));
        CHECK_OK(rt_linear_create(&ctx, 8, 8, true, &m));
        CHECK_OK(rt_module_append(s, m));
        CHECK_OK(rt_linear_create(&ctx, 8, 8, true, &wr->inner));
        CHECK_OK(rt_module_append(s, &wr->base));
        CHECK_OK(rt_relu_create(&m));
        CHECK_OK(rt_module_append(s, m));
        CHECK_OK(rt_linear_create(&ctx, 8, 8, true, &m));
        CHECK_OK(rt_module_append(s, m));
        nets[k] = s;
    }
    rt_module *w = NULL;
    checkpoint_beside(nets[0], nets[1], &w);
    if (!w) return;
    CHECK_OK(rt_checkpoint_set_selective(w, keep_wrappers, NULL));
    rt_checkpoint *ck = rt_checkpoint_of(w);
    rt_stage_kind kind[8];
    int seg[8];
    CHECK(ck && ck->n_stages == 4);
    if (!ck || ck->n_stages != 4) return;
    for (int i = 0; i < 4; i++) kind[i] = RT_STAGE_SELECTIVE, seg[i] = 0;
    CHECK_OK(rt_checkpoint_set_plan(w, kind, seg, 4));
    check_same_step(nets[0], w, "kept wrapper");
}

/* A Checkpoint inside a checkpointed region runs as part of it. */
TU_TEST(nested_checkpoint) {
    rt_module *a = make_net(NET_LINEAR_CHAIN, RT_DEVICE_CPU, true);
    rt_module *b = make_net(NET_LINEAR_CHAIN, RT_DEVICE_CPU, false), *inner = NULL, *outer = NULL;
    /* wrap the third child of b in its own Checkpoint, then b as a whole */
    rt_module *third = b->children[2].module;
    CHECK_OK(rt_checkpoint_create(third, &inner));
    b->children[2].module = inner;
    inner->parent = b;
    inner->name = b->children[2].name;
    CHECK_OK(rt_checkpoint_create(b, &outer));
    tu_defer(module_free, outer);
    rt_tensor *x = make_input(NET_LINEAR_CHAIN);
    CHECK_OK(run_step(a, x, false));
    CHECK_OK(run_step(outer, x, false));
    CHECK(same_state("nested", state_of(a), state_of(outer), true));
}

/* ------------------------------------------------------------ memory */

typedef struct step_mem {
    int64_t saved_after_forward; /* SAVED live once forward returned */
    int64_t peak;                /* the step's peak: net's parameters, gradients, the batch, activations */
} step_mem;

static int64_t param_bytes(rt_module *net) {
    rt_state_dict *sd = NULL;
    if (rt_module_state_dict(net, &sd) != RT_OK) return 0;
    int64_t n = 0;
    for (int i = 0; i < sd->n; i++)
        if (sd->entries[i].tensor) n += (int64_t)rt_tensor_nbytes(sd->entries[i].tensor);
    rt_state_dict_destroy(sd);
    return n;
}

/* One step (forward, Σ y, backward) measuring SAVED after forward and the
 * step's tracked peak: what was live before it that is not net's own
 * parameters or the batch x (other models of the test) is left out. */
static rt_status measured_step(rt_module *net, rt_tensor *x, step_mem *m) {
    rt_memstats s;
    rt_memstats_reset_peaks();
    rt_memstats_get(&s);
    int64_t others = s.live_total - param_bytes(net) - (int64_t)rt_tensor_nbytes(x);
    int64_t saved_before = s.live[RT_MEM_SAVED];
    rt_tensor *y = NULL, *loss = NULL;
    rt_status st = rt_module_forward(net, x, &y);
    rt_memstats_get(&s);
    m->saved_after_forward = s.live[RT_MEM_SAVED] - saved_before;
    if (st == RT_OK) st = rt_sum(y, &loss);
    if (st == RT_OK) st = rt_backward(loss, NULL, false);
    rt_tensor_release(loss);
    rt_tensor_release(y);
    rt_memstats_get(&s);
    m->peak = s.peak_total - others;
    return st;
}

static void zero_grads(rt_module *net) {
    rt_state_dict *sd = NULL;
    if (rt_module_state_dict(net, &sd) != RT_OK) return;
    for (int i = 0; i < sd->n; i++)
        if (sd->entries[i].kind == RT_ENTRY_PARAM) rt_tensor_zero_grad(sd->entries[i].tensor);
    rt_state_dict_destroy(sd);
}

/* The chain: 16 × (Linear(1024) + ReLU), batch 4096, 4 segments.
 * One activation A = 4096·1024·4 B = 16 MiB. Plain keeps the 16 ReLU
 * outputs (A each; the first Linear's input is the DATA batch); with 4
 * segments only the inputs of segments 2-4 are SAVED after forward (3 A;
 * segment 1's input is the batch). In backward one segment at a time is
 * recomputed: its 4 ReLU outputs, one Linear output being built, and the
 * activation gradients in flight (2-3 A) on top of what forward kept and
 * the parameter gradients (64 MiB). Were two segments' recompute buffers
 * alive together, the peak would exceed the bound below by 4 A. */
static void chain_memory(rt_device device) {
    const int64_t A = 4096 * 1024 * 4;
    rt_init_ctx ctx = rt_init_ctx_make(device, 2);
    rt_module *plain = NULL, *ck = NULL, *net2 = NULL;
    CHECK_OK(linear_chain(&ctx, 16, 1024, &plain));
    tu_defer(module_free, plain);
    ctx = rt_init_ctx_make(device, 2);
    CHECK_OK(linear_chain(&ctx, 16, 1024, &net2));
    CHECK_OK(rt_checkpoint_sequential(net2, 4, &ck));
    tu_defer(module_free, ck);
    rt_tensor *x;
    if (device == RT_DEVICE_META) {
        x = tu_own(rt_tensor_create(2, (int64_t[]){4096, 1024}, RT_F32, RT_DEVICE_META, RT_MEM_DATA));
    } else {
        rt_generator g = {4, 0};
        x = tu_randn(&g, 2, (int64_t[]){4096, 1024}, 0.0f, 1.0f);
    }
    step_mem mp, mc;
    CHECK_OK(measured_step(plain, x, &mp));
    CHECK_OK(measured_step(ck, x, &mc));
    printf("  chain 16×Linear(1024)+ReLU, batch 4096 (%s): SAVED after forward %.0f MiB plain, %.0f MiB 4 segments "
           "(%.2f A); step peak %.0f / %.0f MiB = %.3f\n", device == RT_DEVICE_META ? "meta" : "cpu",
           mp.saved_after_forward / 1048576.0, mc.saved_after_forward / 1048576.0,
           (double)mc.saved_after_forward / (double)A, mc.peak / 1048576.0, mp.peak / 1048576.0,
           (double)mc.peak / (double)mp.peak);
    CHECK_EQ_INT(mp.saved_after_forward, 16 * A);
    CHECK(mc.saved_after_forward <= 5 * A);
    /* segments 2-4 keep their inputs (3 A; segment 1 keeps the DATA batch)
     * and the last keeps its output (1 A), which the caller holds anyway */
    CHECK_EQ_INT(mc.saved_after_forward, 4 * A);
    CHECK(mc.peak <= 0.65 * (double)mp.peak);
    /* params (64 MiB + 64 KiB of bias) + batch + kept inputs + grads + one
     * segment's recompute (5 A) + gradients in flight (3 A) */
    int64_t params = 16 * (1024 * 1024 + 1024) * 4;
    CHECK(mc.peak <= params * 2 + A + 3 * A + 8 * A);
    if (device != RT_DEVICE_META) {
        rt_state_dict *sa = state_of(plain), *sb = state_of(ck);
        CHECK(same_state("chain_full", sa, sb, true));
    }
    zero_grads(plain);
    zero_grads(ck);
}

TU_TEST(chain_meta) { chain_memory(RT_DEVICE_META); }
TU_TEST(chain_full) { chain_memory(RT_DEVICE_CPU); }

/* A region keeps its batch norms' batch statistics for the recompute
 * (autograd/node.h rt_saved_memo_keep), which normalises with them instead
 * of computing them again: after forward the dropout chain in one segment
 * holds, booked SAVED, only 2 statistics × 8 channels × 4 bytes for each
 * of its 2 batch norms (its input is the DATA batch, and no op in it saves
 * its output, a Linear's); the step's gradients are those of plain
 * (check_equiv's cases). */
TU_TEST(region_keeps_batch_statistics) {
    rt_module *inner = make_net(NET_DROPOUT_CHAIN, RT_DEVICE_CPU, false), *w = NULL;
    CHECK(inner);
    CHECK_OK(rt_checkpoint_sequential(inner, 1, &w));
    tu_defer(module_free, w);
    rt_tensor *x = make_input(NET_DROPOUT_CHAIN);
    step_mem m;
    rt_manual_seed(3);
    CHECK_OK(measured_step(w, x, &m));
    const int64_t stats = 2 * 2 * 8 * 4;
    printf("  dropout chain, 1 segment: SAVED after forward %lld bytes (statistics %lld)\n",
           (long long)m.saved_after_forward, (long long)stats);
    CHECK_EQ_INT(m.saved_after_forward, stats);
    zero_grads(w);
}

/* A selective region's recompute runs only what rebuilds a dropped
 * tensor: in a BasicBlock (conv1, bn1+ReLU, conv2, bn2, add+ReLU) the
 * convolutions' outputs, the weights and the batch statistics are held
 * anyway, so batch norm's saves of them are kept by alias, and after
 * conv2's input (bn1+ReLU's output) is rebuilt every slot is filled: bn1
 * runs twice in a step, bn2 once (the recompute stops before it with
 * RT_STOPPED). Gradients: resnet20_selective. */
static rt_status count_calls(rt_module *m, rt_tensor *x, rt_tensor *y, void *user) {
    (void)m;
    (void)x;
    (void)y;
    (*(int *)user)++;
    return RT_OK;
}

TU_TEST(selective_recompute_stops_early) {
    rt_module *inner = make_net(NET_RESNET20, RT_DEVICE_CPU, false), *w = NULL;
    CHECK(inner);
    CHECK_OK(rt_checkpoint_create(inner, &w));
    tu_defer(module_free, w);
    CHECK_OK(rt_checkpoint_set_selective(w, NULL, NULL));
    rt_module *bn1 = rt_module_find(w, "layer1.0.bn1"), *bn2 = rt_module_find(w, "layer1.0.bn2");
    CHECK(bn1 && bn2);
    if (!bn1 || !bn2) return;
    int n1 = 0, n2 = 0;
    rt_module_set_forward_hook(bn1, count_calls, &n1);
    rt_module_set_forward_hook(bn2, count_calls, &n2);
    rt_tensor *x = make_input(NET_RESNET20);
    CHECK_OK(run_step(w, x, false));
    printf("  resnet20 selective: layer1.0.bn1 ran %d times, bn2 %d times in one step\n", n1, n2);
    CHECK_EQ_INT(n1, 2);
    CHECK_EQ_INT(n2, 1);
    rt_module_set_forward_hook(bn1, NULL, NULL);
    rt_module_set_forward_hook(bn2, NULL, NULL);
    zero_grads(w);
}

/* A checkpointed region's recompute ends once every dropped tensor is
 * rebuilt: over layer1.0 and layer1.1 of resnet20 the region keeps its
 * output (layer1.1's residual sum + ReLU saves it), so once layer1.1's
 * conv2 has run, bn2's input is all that is left to rebuild: bn2 is not
 * run again (its input fills the slot), nor the residual sum:
 * layer1.0's forward completes twice (its forward hook runs twice), and
 * layer1.1's once (the recompute stops inside it), its conv2 twice and
 * its bn2 once. Gradients: the resnet20 equivalence cases. */
TU_TEST(checkpoint_recompute_stops_early) {
    rt_module *inner = make_net(NET_RESNET20, RT_DEVICE_CPU, false), *w = NULL;
    CHECK(inner);
    CHECK_OK(rt_checkpoint_create(inner, &w));
    tu_defer(module_free, w);
    rt_checkpoint *ck = rt_checkpoint_of(w);
    rt_module *b0 = rt_module_find(w, "layer1.0"), *b1 = rt_module_find(w, "layer1.1");
    rt_module *c2 = rt_module_find(w, "layer1.1.conv2"), *bn2 = rt_module_find(w, "layer1.1.bn2");
    CHECK(ck && b0 && b1 && c2 && bn2);
    if (!ck || !b0 || !b1 || !c2 || !bn2) return;
    int n = ck->n_stages, i0 = -1;
    for (int i = 0; i + 1 < n; i++)
        if (ck->stages[i] == b0 && ck->stages[i + 1] == b1) i0 = i;
    CHECK(i0 >= 0);
    if (i0 < 0) return;
    rt_stage_kind kind[64];
    int seg[64];
    CHECK(n <= 64);
    for (int i = 0; i < n && i < 64; i++) {
        kind[i] = i == i0 || i == i0 + 1 ? RT_STAGE_CHECKPOINT : RT_STAGE_STORE;
        seg[i] = i == i0 + 1 ? i0 : i;
    }
    CHECK_OK(rt_checkpoint_set_plan(w, kind, seg, n));
    int n0 = 0, n1 = 0, nc2 = 0, nbn2 = 0;
    rt_module_set_forward_hook(b0, count_calls, &n0);
    rt_module_set_forward_hook(b1, count_calls, &n1);
    rt_module_set_forward_hook(c2, count_calls, &nc2);
    rt_module_set_forward_hook(bn2, count_calls, &nbn2);
    rt_tensor *x = make_input(NET_RESNET20);
    CHECK_OK(run_step(w, x, false));
    printf("  resnet20, layer1.0-1 checkpointed: layer1.0 completed %d times, layer1.1 %d times (its conv2 %d, "
           "bn2 %d) in one step\n", n0, n1, nc2, nbn2);
    CHECK_EQ_INT(n0, 2);
    CHECK_EQ_INT(n1, 1);
    CHECK_EQ_INT(nc2, 2);
    CHECK_EQ_INT(nbn2, 1);
    rt_module_set_forward_hook(b0, NULL, NULL);
    rt_module_set_forward_hook(b1, NULL, NULL);
    rt_module_set_forward_hook(c2, NULL, NULL);
    rt_module_set_forward_hook(bn2, NULL, NULL);
    zero_grads(w);
}

/* Selective recompute on ResNet-50 (meta, 224², batch 8), plain and
 * selective steps of the same net, optionally inside a bf16 precision
 * region (Checkpoint(Autocast(net)) against Autocast(net)): SAVED after
 * forward falls (the inputs of conv2/conv3, outputs of the fused BN+ReLU,
 * are recomputed; every convolution's output is kept) and so does the
 * step's peak. In a bottleneck the recomputed tensors are the two narrow
 * ones (width p) among x (4p), c1, c2 (p) and c3 (4p) that plain keeps, so
 * the saving is modest by construction. Under bf16 plain backpropagation
 * keeps every saved tensor as a bf16 copy, so a selective stage must keep
 * its input as one too (with the input kept in f32 selective needed
 * 747 MiB against plain's 589). Under bf16 only SAVED falls, not the peak:
 * the recompute's f32 transients (the unpacked input, the BN+ReLU output
 * the convolution's backward reads) outweigh the 44 MiB it keeps less.
 * With convolutions computing in bf16 the peak is 472 against plain's 468
 * MiB (it was 487 against 495 while 3×3 layers ran f32 Winograd, whose
 * 44 MiB weight-gradient scratch set plain's peak); storage-only bf16
 * (AVX2) gives 487 against 470. The planner sees these predictions and
 * leaves selective stages out where they do not pay. */
static void selective_memory_resnet50(bool bf16) {
    rt_module *a = make_net(NET_RESNET50, RT_DEVICE_META, !bf16); /* under bf16: owned by its wrapper */
    rt_module *b = make_net(NET_RESNET50, RT_DEVICE_META, false), *w = NULL;
    if (bf16) {
        rt_module *aa = NULL, *ab = NULL;
        CHECK_OK(rt_autocast_wrap(a, RT_PRECISION_BF16, &aa));
        tu_defer(module_free, aa);
        CHECK_OK(rt_autocast_wrap(b, RT_PRECISION_BF16, &ab));
        a = aa;
        b = ab;
    }
    CHECK_OK(rt_checkpoint_create(b, &w));
    tu_defer(module_free, w);
    CHECK_OK(rt_checkpoint_set_selective(w, NULL, NULL));
    rt_tensor *x = tu_own(rt_tensor_create(4, (int64_t[]){8, 3, 224, 224}, RT_F32, RT_DEVICE_META, RT_MEM_DATA));
    step_mem mp, ms;
    CHECK_OK(measured_step(a, x, &mp));
    CHECK_OK(measured_step(w, x, &ms));
    printf("  resnet50 224² b8%s (meta): SAVED after forward %.0f MiB plain, %.0f MiB selective; peak %.0f / %.0f "
           "MiB\n", bf16 ? " bf16" : "", mp.saved_after_forward / 1048576.0, ms.saved_after_forward / 1048576.0,
           ms.peak / 1048576.0, mp.peak / 1048576.0);
    CHECK(ms.saved_after_forward < 0.95 * (double)mp.saved_after_forward);
    if (!bf16) CHECK(ms.peak < mp.peak);
    zero_grads(a);
    zero_grads(w);
}

TU_TEST(selective_saves_memory_resnet50_meta) { selective_memory_resnet50(false); }
TU_TEST(selective_saves_memory_resnet50_bf16_meta) { selective_memory_resnet50(true); }

static const rt_test_case cases[] = {
    {"resnet20_segments1", resnet20_segments1},
    {"resnet20_segments2", resnet20_segments2},
    {"resnet20_segments4", resnet20_segments4},
    {"resnet20_segments8", resnet20_segments8},
    {"resnet20_selective", resnet20_selective},
    {"resnet20_mixed", resnet20_mixed},
    {"dropout_segments1", dropout_segments1},
    {"dropout_segments3", dropout_segments3},
    {"dropout_selective", dropout_selective},
    {"dropout_mixed", dropout_mixed},
    {"linear_selective", linear_selective},
    {"resnet20_fp16_segments2", resnet20_fp16_segments2},
    {"resnet20_fp16_selective", resnet20_fp16_selective},
    {"resnet20_bf16_mixed", resnet20_bf16_mixed},
    {"dropout_bf16_segments3", dropout_bf16_segments3},
    {"params_get_grads_without_input_grad", params_get_grads_without_input_grad},
    {"backward_twice", backward_twice},
    {"recompute_mismatch_is_an_error", recompute_mismatch_is_an_error},
    {"nested_checkpoint", nested_checkpoint},
    {"output_over_a_saved_tensor", output_over_a_saved_tensor},
    {"leaf_that_writes_its_input", leaf_that_writes_its_input},
    {"kept_call_that_runs_a_module", kept_call_that_runs_a_module},
    {"chain_meta", chain_meta},
    {"region_keeps_batch_statistics", region_keeps_batch_statistics},
    {"selective_recompute_stops_early", selective_recompute_stops_early},
    {"checkpoint_recompute_stops_early", checkpoint_recompute_stops_early},
    {"selective_saves_memory_resnet50_meta", selective_saves_memory_resnet50_meta},
    {"selective_saves_memory_resnet50_bf16_meta", selective_saves_memory_resnet50_bf16_meta},
};

int main(int argc, char **argv) {
    /* chain_full (real tensors, ~1.5 GiB, seconds) runs only when named:
     * CTest's test_checkpoint_chain_full, label e2e, Release suite */
    if (argc > 1 && !strcmp(argv[1], "chain_full")) {
        static const rt_test_case full[] = {{"chain_full", chain_full}};
        return rt_test_main(argc, argv, full, 1);
    }
    /* ResNet-50's equivalence cases (tens of seconds, minutes under the
     * sanitizer): CTest's test_checkpoint_resnet50, label e2e, Release
     * suite; the same code paths run on resnet20 everywhere */
    if (argc > 1 && !strcmp(argv[1], "resnet50")) {
        static const rt_test_case r50[] = {{"resnet50_segments4", resnet50_segments4},
                                           {"resnet50_selective", resnet50_selective},
                                           {"resnet50_mixed", resnet50_mixed}};
        return rt_test_main(1, argv, r50, 3);
    }
    return rt_test_main(argc, argv, cases, (int)(sizeof cases / sizeof cases[0]));
}
