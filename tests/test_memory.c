/* Memory accounting of a whole training step (forward + backward) of a small
 * plain CNN, measured by the tracked allocator and compared with:
 *   - the analytic SAVED bytes derived here from each op's documented
 *     "Saves:" list (src/ops/ops.h), counting each storage once;
 *   - the same step run on the meta device (no data, same accounting);
 *   - itself, repeated (no leak).
 * Besides the net: dropout's TEMP peaks on cpu and meta (the uniforms it
 * holds while masking are booked on both).
 *
 * Net (nn/modules.h modules, children of a Sequential): x (4, 3, 16, 16) DATA
 *   conv1 3→8 k3 p1 (+bias) → bn1 (train) → relu1 → pool1 (max 2)
 *   → conv2 8→16 k3 s2 p1 (+bias) → bn2 (train) → relu2 → pool2 (adaptive avg)
 *   → flatten → fc 16→10 → cross_entropy(target i32 (4), DATA)
 * Most tests run the children one at a time (to look at memory between ops);
 * sequential_forward_matches_analytic runs the Sequential as a whole. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/engine.h"
#include "autograd/node.h"
#include "core/mem.h"
#include "core/rng.h"
#include "core/tensor.h"
#include "kernels/pool.h"
#include "nn/module.h"
#include "nn/modules.h"
#include "nn/state_dict.h"
#include "ops/ops.h"
#include "rt_test.h"

enum { N = 4, CIN = 3, H = 16, W = 16, C1 = 8, C2 = 16, NCLS = 10 };

/* The net as a module tree: a Sequential root whose named children are the
 * ops in order, so that the state dict reads conv1.weight, bn1.weight, …
 * The forward below still calls each child on its own (rt_module_find), so
 * that memory can be inspected between ops. */
typedef struct net {
    rt_module *root;
    rt_state_dict *sd;
} net;

static void net_destroy(net *m) {
    rt_state_dict_destroy(m->sd);
    rt_module_destroy(m->root);
    m->sd = NULL;
    m->root = NULL;
}

static rt_status net_build(rt_module *root, rt_device dev) {
    rt_init_ctx ctx = rt_init_ctx_make(dev, 1234);
    RT_ADD_CHILD(root, "conv1", rt_conv_create(&ctx, 2, CIN, C1, 3, 1, 1, 1, true, RT_INIT_DEFAULT, &m));
    RT_ADD_CHILD(root, "bn1", rt_batchnorm_create(&ctx, 2, C1, false, &m));
    RT_ADD_CHILD(root, "relu1", rt_relu_create(&m));
    RT_ADD_CHILD(root, "pool1", rt_max_pool_create(2, 2, 0, 0, &m));
    RT_ADD_CHILD(root, "conv2", rt_conv_create(&ctx, 2, C1, C2, 3, 2, 1, 1, true, RT_INIT_DEFAULT, &m));
    RT_ADD_CHILD(root, "bn2", rt_batchnorm_create(&ctx, 2, C2, false, &m));
    RT_ADD_CHILD(root, "relu2", rt_relu_create(&m));
    RT_ADD_CHILD(root, "pool2", rt_adaptive_avg_pool_create(2, 1, &m));
    RT_ADD_CHILD(root, "flatten", rt_flatten_create(&m));
    RT_ADD_CHILD(root, "fc", rt_linear_create(&ctx, C2, NCLS, true, &m));
    return RT_OK;
}

static rt_status net_init(net *m, rt_device dev) {
    memset(m, 0, sizeof *m);
    RT_TRY(rt_sequential_create(&m->root));
    rt_status st = net_build(m->root, dev);
    if (st == RT_OK) st = rt_module_state_dict(m->root, &m->sd);
    if (st != RT_OK) net_destroy(m);
    return st;
}

/* bn's num_batches_tracked counter, read through the state dict. */
static int64_t net_counter(net *m, const char *name) {
    rt_state_entry *e = rt_state_dict_find(m->sd, name);
    return e && e->kind == RT_ENTRY_COUNTER ? *e->counter : -1;
}

static int64_t net_param_bytes(void) {
    int64_t p = (C1 * CIN * 9 + C1) + 4 * C1 + (C2 * C1 * 9 + C2) + 4 * C2 + (NCLS * C2 + NCLS);
    return p * 4;
}
static int64_t net_grad_bytes(void) {
    int64_t g = (C1 * CIN * 9 + C1) + 2 * C1 + (C2 * C1 * 9 + C2) + 2 * C2 + (NCLS * C2 + NCLS);
    return g * 4;
}

static void net_zero_grad(net *m) {
    for (int i = 0; i < m->sd->n; i++)
        if (m->sd->entries[i].tensor) rt_tensor_zero_grad(m->sd->entries[i].tensor);
}

/* Input batch and labels, booked DATA, on `dev` (values only on cpu). */
static rt_status make_batch(rt_device dev, uint64_t seed, rt_tensor **x, rt_tensor **t) {
    int64_t xs[4] = {N, CIN, H, W}, ts[1] = {N};
    *x = rt_tensor_create(4, xs, RT_F32, dev, RT_MEM_DATA);
    *t = rt_tensor_create(1, ts, RT_I32, dev, RT_MEM_DATA);
    if (!*x || !*t) return RT_ERR_OOM;
    if (dev == RT_DEVICE_CPU) {
        float *p = rt_tensor_f32(*x);
        rt_philox_uniform(seed, 0, rt_tensor_numel(*x), p);
        for (int64_t i = 0; i < rt_tensor_numel(*x); i++) p[i] = 2.0f * p[i] - 1.0f;
        int32_t *tp = rt_tensor_data(*t);
        for (int i = 0; i < N; i++) tp[i] = (int32_t)((seed + 3 * (uint64_t)i) % NCLS);
    }
    return RT_OK;
}

/* The child module named `name` of the root (NULL makes its forward fail). */
static rt_module *child(net *m, const char *name) { return rt_module_find(m->root, name); }

/* Forward to the loss, one child module at a time; every intermediate handle is dropped as soon as the
 * next op has it, as user code would. */
static rt_status net_forward(net *m, rt_tensor *x, rt_tensor *target, rt_tensor **loss) {
    rt_tensor *a = NULL, *b = NULL;
#define STEP(expr)                 \
    do {                           \
        rt_status s_ = (expr);     \
        rt_tensor_release(a);      \
        a = b;                     \
        b = NULL;                  \
        if (s_ != RT_OK) {         \
            rt_tensor_release(a);  \
            return s_;             \
        }                          \
    } while (0)
    RT_TRY(rt_module_forward(child(m, "conv1"), x, &a));
    STEP(rt_module_forward(child(m, "bn1"), a, &b));
    STEP(rt_module_forward(child(m, "relu1"), a, &b));
    STEP(rt_module_forward(child(m, "pool1"), a, &b));
    STEP(rt_module_forward(child(m, "conv2"), a, &b));
    STEP(rt_module_forward(child(m, "bn2"), a, &b));
    STEP(rt_module_forward(child(m, "relu2"), a, &b));
    STEP(rt_module_forward(child(m, "pool2"), a, &b));
    STEP(rt_module_forward(child(m, "flatten"), a, &b));
    STEP(rt_module_forward(child(m, "fc"), a, &b));
    STEP(rt_cross_entropy(a, target, 0.0f, &b));
#undef STEP
    *loss = a;
    return RT_OK;
}

/* The same forward through the Sequential root in one call (it releases
 * each intermediate as the next child has consumed it), then the loss. */
static rt_status net_forward_whole(net *m, rt_tensor *x, rt_tensor *target, rt_tensor **loss) {
    rt_tensor *logits = NULL;
    RT_TRY(rt_module_forward(m->root, x, &logits));
    rt_status st = rt_cross_entropy(logits, target, 0.0f, loss);
    rt_tensor_release(logits);
    return st;
}

/* The analytic SAVED bytes of net_forward, from ops.h's "Saves:" lists.
 * Parameters (PARAM), the input batch and the target (DATA) are not SAVED. */
static int64_t analytic_saved_bytes(void) {
    const int64_t f = 4;
    int64_t c1 = (int64_t)N * C1 * H * W * f;           /* conv1 output, saved by bn1 */
    int64_t bn1_stats = 2 * C1 * f;                     /* bn1 batch mean + var */
    int64_t r1 = (int64_t)N * C1 * H * W * f;           /* relu1 output (relu saves y) */
    rt_pool_shape ps = {.nsp = 2, .n = N, .c = C1, .in = {H, W}, .k = {2, 2}, .stride = {2, 2}};
    int64_t ws = (int64_t)rt_kernel_maxpool_workspace_bytes(&ps); /* max_pool workspace */
    int64_t p1 = (int64_t)N * C1 * (H / 2) * (W / 2) * f;         /* pool output, saved by conv2 */
    int64_t c2 = (int64_t)N * C2 * (H / 4) * (W / 4) * f;         /* conv2 output, saved by bn2 */
    int64_t bn2_stats = 2 * C2 * f;
    int64_t r2 = c2;                                              /* relu2 output */
    int64_t a = (int64_t)N * C2 * f;                              /* pooled, flattened view saved by fc */
    int64_t prob = (int64_t)N * NCLS * f;                         /* cross_entropy softmax */
    if (ws <= 0) return -1;
    return c1 + bn1_stats + r1 + ws + p1 + c2 + bn2_stats + r2 + a + prob;
}

/* One training step; records live after forward, and peaks of the step. */
typedef struct step_result {
    rt_memstats after_forward;
    rt_memstats after_step;   /* after backward and releasing loss, batch still held */
    rt_memstats after_batch;  /* after releasing the batch too */
    float loss;
} step_result;

static rt_status net_step_ex(net *m, rt_device dev, uint64_t seed, bool whole, step_result *r) {
    rt_tensor *x = NULL, *t = NULL, *loss = NULL;
    rt_status st = make_batch(dev, seed, &x, &t);
    if (st == RT_OK) st = (whole ? net_forward_whole : net_forward)(m, x, t, &loss);
    if (st == RT_OK) {
        rt_memstats_get(&r->after_forward);
        r->loss = dev == RT_DEVICE_CPU ? rt_tensor_f32(loss)[0] : 0.0f;
        st = rt_backward(loss, NULL, false);
    }
    rt_tensor_release(loss);
    rt_memstats_get(&r->after_step);
    rt_tensor_release(x);
    rt_tensor_release(t);
    rt_memstats_get(&r->after_batch);
    return st;
}

static rt_status net_step(net *m, rt_device dev, uint64_t seed, step_result *r) {
    return net_step_ex(m, dev, seed, false, r);
}

static int64_t live_of(rt_mem_category c) {
    rt_memstats s;
    rt_memstats_get(&s);
    return s.live[c];
}

static const rt_mem_category k_cats[] = {RT_MEM_SAVED, RT_MEM_TEMP, RT_MEM_PARAM, RT_MEM_GRAD,
                                         RT_MEM_DATA};

/* ---- tests ----------------------------------------------------------------- */

static void test_saved_matches_analytic(void) {
    rt_memstats base;
    rt_memstats_get(&base);
    net m;
    CHECK_OK(net_init(&m, RT_DEVICE_CPU));
    CHECK_EQ_INT(rt_state_dict_num_params(m.sd), 10);
    CHECK_EQ_INT(rt_state_dict_num_param_elements(m.sd) * 4, net_grad_bytes());
    CHECK_EQ_INT(live_of(RT_MEM_PARAM) - base.live[RT_MEM_PARAM], net_param_bytes());

    int64_t want = analytic_saved_bytes();
    CHECK(want > 0);
    rt_memstats_reset_peaks();
    step_result r;
    rt_status st = net_step(&m, RT_DEVICE_CPU, 7, &r);
    net_zero_grad(&m);
    net_destroy(&m);
    CHECK_OK(st);
    CHECK(r.loss > 0.0f && r.loss < 10.0f);

    int64_t saved_live = r.after_forward.live[RT_MEM_SAVED] - base.live[RT_MEM_SAVED];
    int64_t saved_peak = r.after_step.peak[RT_MEM_SAVED] - base.live[RT_MEM_SAVED];
    if (saved_live != want || saved_peak != want)
        fprintf(stderr, "SAVED after forward %lld, peak %lld, analytic %lld\n", (long long)saved_live,
                (long long)saved_peak, (long long)want);
    /* within 1% ... */
    CHECK(llabs(saved_live - want) * 100 <= want);
    CHECK(llabs(saved_peak - want) * 100 <= want);
    /* ... and in fact exact: every saved byte is in the documented lists */
    CHECK_EQ_INT(saved_live, want);
    CHECK_EQ_INT(saved_peak, want);

    /* after backward without retain and dropping the loss: the graph is gone */
    CHECK_EQ_INT(r.after_step.live[RT_MEM_SAVED], base.live[RT_MEM_SAVED]);
    CHECK_EQ_INT(r.after_step.live[RT_MEM_TEMP], base.live[RT_MEM_TEMP]);
    /* parameter gradients exist, one per parameter element */
    CHECK_EQ_INT(r.after_step.live[RT_MEM_GRAD] - base.live[RT_MEM_GRAD], net_grad_bytes());
    /* the batch was the only DATA */
    CHECK_EQ_INT(r.after_step.live[RT_MEM_DATA] - base.live[RT_MEM_DATA],
                 (int64_t)N * CIN * H * W * 4 + N * 4);
    CHECK_EQ_INT(r.after_batch.live[RT_MEM_DATA], base.live[RT_MEM_DATA]);

    rt_memstats end;
    rt_memstats_get(&end);
    for (int c = 0; c < RT_MEM_NCAT; c++) CHECK_EQ_INT(end.live[c], base.live[c]);
}

/* TEMP while the forward runs is bounded by what the graph could hold at
 * most: the forward's activations that are not SAVED are dropped at once, so
 * TEMP live after forward is just the loss scalar. */
static void test_forward_temp_after(void) {
    rt_memstats base;
    rt_memstats_get(&base);
    net m;
    CHECK_OK(net_init(&m, RT_DEVICE_CPU));
    step_result r;
    rt_status st = net_step(&m, RT_DEVICE_CPU, 8, &r);
    net_zero_grad(&m);
    net_destroy(&m);
    CHECK_OK(st);
    CHECK_EQ_INT(r.after_forward.live[RT_MEM_TEMP] - base.live[RT_MEM_TEMP], 4); /* the 0-d loss */
}

/* The state dict follows the tree (torch's names), and the Sequential run
 * as one module keeps exactly the same SAVED bytes as the child-by-child
 * forward, with nothing but the loss left in TEMP. */
static void test_sequential_forward_matches_analytic(void) {
    rt_memstats base;
    rt_memstats_get(&base);
    net m;
    CHECK_OK(net_init(&m, RT_DEVICE_CPU));
    static const char *const names[] = {"conv1.weight", "conv1.bias", "bn1.weight", "bn1.bias",
                                        "bn1.running_mean", "bn1.running_var", "bn1.num_batches_tracked",
                                        "conv2.weight", "conv2.bias", "bn2.weight", "bn2.bias",
                                        "bn2.running_mean", "bn2.running_var", "bn2.num_batches_tracked",
                                        "fc.weight", "fc.bias"};
    int n_names = (int)(sizeof names / sizeof names[0]), names_ok = m.sd->n == n_names;
    for (int i = 0; names_ok && i < n_names; i++) names_ok = strcmp(m.sd->entries[i].name, names[i]) == 0;
    rt_memstats_reset_peaks();
    step_result r;
    rt_status st = net_step_ex(&m, RT_DEVICE_CPU, 7, true, &r);
    int64_t tracked = net_counter(&m, "bn2.num_batches_tracked");
    net_zero_grad(&m);
    net_destroy(&m);
    CHECK_OK(st);
    CHECK(names_ok);
    CHECK_EQ_INT(tracked, 1);
    CHECK_EQ_INT(r.after_forward.live[RT_MEM_SAVED] - base.live[RT_MEM_SAVED], analytic_saved_bytes());
    CHECK_EQ_INT(r.after_step.peak[RT_MEM_SAVED] - base.live[RT_MEM_SAVED], analytic_saved_bytes());
    CHECK_EQ_INT(r.after_forward.live[RT_MEM_TEMP] - base.live[RT_MEM_TEMP], 4);
    CHECK_EQ_INT(r.after_step.live[RT_MEM_GRAD] - base.live[RT_MEM_GRAD], net_grad_bytes());
    CHECK_EQ_INT(r.after_step.live[RT_MEM_SAVED], base.live[RT_MEM_SAVED]);
    rt_memstats end;
    rt_memstats_get(&end);
    for (int c = 0; c < RT_MEM_NCAT; c++) CHECK_EQ_INT(end.live[c], base.live[c]);
}

static void run_and_record(rt_device dev, rt_memstats *peaks_rel, step_result *r, rt_status *out) {
    rt_memstats base;
    rt_memstats_get(&base);
    rt_memstats_reset_peaks();
    net m;
    rt_status st = net_init(&m, dev);
    if (st == RT_OK) st = net_step(&m, dev, 9, r);
    if (st == RT_OK) {
        rt_memstats s;
        rt_memstats_get(&s);
        for (int c = 0; c < RT_MEM_NCAT; c++) peaks_rel->peak[c] = s.peak[c] - base.live[c];
        peaks_rel->peak_total = s.peak_total - base.live_total;
        for (int c = 0; c < RT_MEM_NCAT; c++) peaks_rel->live[c] = r->after_forward.live[c] - base.live[c];
    }
    if (m.sd) net_zero_grad(&m);
    net_destroy(&m);
    *out = st;
}

static void test_meta_matches_real(void) {
    rt_memstats base;
    rt_memstats_get(&base);
    rt_memstats real = {0}, meta = {0};
    step_result rr, rm;
    rt_status sr, sm;
    run_and_record(RT_DEVICE_CPU, &real, &rr, &sr);
    CHECK_OK(sr);
    run_and_record(RT_DEVICE_META, &meta, &rm, &sm);
    CHECK_OK(sm);
    int ok = 1;
    for (size_t i = 0; i < sizeof k_cats / sizeof k_cats[0]; i++) {
        rt_mem_category c = k_cats[i];
        if (real.peak[c] != meta.peak[c] || real.live[c] != meta.live[c]) {
            fprintf(stderr, "%-6s peak real %lld meta %lld | live after forward real %lld meta %lld\n",
                    rt_mem_category_str(c), (long long)real.peak[c], (long long)meta.peak[c],
                    (long long)real.live[c], (long long)meta.live[c]);
            ok = 0;
        }
    }
    CHECK(real.peak[RT_MEM_SAVED] == analytic_saved_bytes());
    CHECK(real.peak[RT_MEM_PARAM] == net_param_bytes());
    CHECK(real.peak[RT_MEM_GRAD] == net_grad_bytes());
    /* live after forward agrees category by category */
    for (size_t i = 0; i < sizeof k_cats / sizeof k_cats[0]; i++)
        CHECK_EQ_INT(meta.live[k_cats[i]], real.live[k_cats[i]]);
    /* the peaks per category agree exactly */
    CHECK_EQ_INT(meta.peak[RT_MEM_SAVED], real.peak[RT_MEM_SAVED]);
    CHECK_EQ_INT(meta.peak[RT_MEM_PARAM], real.peak[RT_MEM_PARAM]);
    CHECK_EQ_INT(meta.peak[RT_MEM_GRAD], real.peak[RT_MEM_GRAD]);
    CHECK_EQ_INT(meta.peak[RT_MEM_DATA], real.peak[RT_MEM_DATA]);
    CHECK_EQ_INT(meta.peak[RT_MEM_TEMP], real.peak[RT_MEM_TEMP]);
    CHECK(ok);
    rt_memstats end;
    rt_memstats_get(&end);
    for (int c = 0; c < RT_MEM_NCAT; c++) CHECK_EQ_INT(end.live[c], base.live[c]);
}

/* Five steps with gradients accumulating: live bytes are identical after
 * every step (grads are allocated once, then accumulated in place). */
static void test_repeated_steps_no_leak(void) {
    rt_memstats base;
    rt_memstats_get(&base);
    net m;
    CHECK_OK(net_init(&m, RT_DEVICE_CPU));
    rt_memstats first = {0};
    float losses[5];
    for (int k = 0; k < 5; k++) {
        step_result r;
        rt_status st = net_step(&m, RT_DEVICE_CPU, 100 + (uint64_t)k, &r);
        if (st != RT_OK) {
            net_zero_grad(&m);
            net_destroy(&m);
        }
        CHECK_OK(st);
        losses[k] = r.loss;
        if (k == 0) {
            first = r.after_batch;
            continue;
        }
        for (int c = 0; c < RT_MEM_NCAT; c++) {
            if (r.after_batch.live[c] != first.live[c])
                fprintf(stderr, "step %d: %s live %lld, after step 0 %lld\n", k, rt_mem_category_str(c),
                        (long long)r.after_batch.live[c], (long long)first.live[c]);
            CHECK_EQ_INT(r.after_batch.live[c], first.live[c]);
        }
        CHECK_EQ_INT(r.after_batch.live_total, first.live_total);
        CHECK_EQ_INT(r.after_batch.n_alloc - r.after_batch.n_free, first.n_alloc - first.n_free);
    }
    CHECK(losses[0] != losses[1]); /* different batches really ran */
    CHECK_EQ_INT(first.live[RT_MEM_GRAD] - base.live[RT_MEM_GRAD], net_grad_bytes());
    CHECK_EQ_INT(first.live[RT_MEM_SAVED], base.live[RT_MEM_SAVED]);
    CHECK_EQ_INT(first.live[RT_MEM_TEMP], base.live[RT_MEM_TEMP]);
    CHECK_EQ_INT(net_counter(&m, "bn1.num_batches_tracked"), 5);
    CHECK_EQ_INT(net_counter(&m, "bn2.num_batches_tracked"), 5);
    net_zero_grad(&m);
    net_destroy(&m);
    rt_memstats end;
    rt_memstats_get(&end);
    for (int c = 0; c < RT_MEM_NCAT; c++) CHECK_EQ_INT(end.live[c], base.live[c]);
}

/* The same five steps on meta: identical accounting, no leak either. */
static void test_repeated_steps_meta_no_leak(void) {
    rt_memstats base;
    rt_memstats_get(&base);
    net m;
    CHECK_OK(net_init(&m, RT_DEVICE_META));
    rt_memstats first = {0};
    for (int k = 0; k < 5; k++) {
        step_result r;
        rt_status st = net_step(&m, RT_DEVICE_META, 100 + (uint64_t)k, &r);
        if (st != RT_OK) {
            net_zero_grad(&m);
            net_destroy(&m);
        }
        CHECK_OK(st);
        if (k == 0) first = r.after_batch;
        for (int c = 0; c < RT_MEM_NCAT; c++) CHECK_EQ_INT(r.after_batch.live[c], first.live[c]);
    }
    CHECK_EQ_INT(first.live[RT_MEM_GRAD] - base.live[RT_MEM_GRAD], net_grad_bytes());
    net_zero_grad(&m);
    net_destroy(&m);
    rt_memstats end;
    rt_memstats_get(&end);
    for (int c = 0; c < RT_MEM_NCAT; c++) CHECK_EQ_INT(end.live[c], base.live[c]);
}

/* Dropout holds its n Philox uniforms as TEMP while it masks (forward and
 * backward). The meta backend's dropout entry books the same bytes, so the
 * TEMP peak of a forward is y + the uniforms on both devices, and a whole
 * forward + backward peaks equally on both. */
static void dropout_peaks(rt_device dev, int64_t *fwd_temp, int64_t *step_temp) {
    enum { ROWS = 4, COLS = 256 };
    int64_t shape[2] = {ROWS, COLS};
    rt_memstats base, s;
    rt_memstats_get(&base);
    rt_memstats_reset_peaks();
    rt_tensor *x = rt_tensor_zeros(2, shape, RT_F32, dev, RT_MEM_DATA), *y = NULL, *loss = NULL;
    CHECK(x != NULL);
    CHECK_OK(rt_tensor_fill(x, 1.0f));
    CHECK_OK(rt_tensor_set_requires_grad(x, true));
    rt_status st = rt_dropout(x, 0.5f, true, &y);
    rt_memstats_get(&s);
    *fwd_temp = s.peak[RT_MEM_TEMP] - base.live[RT_MEM_TEMP];
    if (st == RT_OK) st = rt_sum(y, &loss);
    if (st == RT_OK) st = rt_backward(loss, NULL, false);
    rt_memstats_get(&s);
    *step_temp = s.peak[RT_MEM_TEMP] - base.live[RT_MEM_TEMP];
    CHECK_OK(st);
    rt_tensor_release(loss);
    rt_tensor_release(y);
    rt_tensor_release(x);
}

static void test_dropout_meta_matches_real(void) {
    int64_t real_fwd = 0, real_step = 0, meta_fwd = 0, meta_step = 0;
    dropout_peaks(RT_DEVICE_CPU, &real_fwd, &real_step);
    dropout_peaks(RT_DEVICE_META, &meta_fwd, &meta_step);
    CHECK_EQ_INT(real_fwd, 2 * 4 * 256 * (int64_t)sizeof(float)); /* y and the uniforms */
    CHECK_EQ_INT(meta_fwd, real_fwd);
    CHECK_EQ_INT(meta_step, real_step);
}

RT_TEST_MAIN({"saved_matches_analytic", test_saved_matches_analytic},
             {"forward_temp_after", test_forward_temp_after},
             {"sequential_forward_matches_analytic", test_sequential_forward_matches_analytic},
             {"meta_matches_real", test_meta_matches_real},
             {"repeated_steps_no_leak", test_repeated_steps_no_leak},
             {"repeated_steps_meta_no_leak", test_repeated_steps_meta_no_leak},
             {"dropout_meta_matches_real", test_dropout_meta_matches_real})
