/* Tests for src/optim: SGD and AdamW against PyTorch 1.13 reference numbers,
 * lazy OPTIM state and its checkpoint visit, LR schedules against
 * torch.optim.lr_scheduler, clip_grad_norm, zero_grad and the accumulation
 * scale.
 *
 * The reference numbers were produced with Debian's /usr/bin/python3 (torch
 * 1.13); each block quotes its snippet. Shared setup of the optimizer
 * snippets:
 *
 *     import torch
 *     p0 = [1.0, -2.0, 3.0, -4.0]
 *     gs = [[0.1, -0.2, 0.3, 0.4], [0.5, 0.1, -0.3, 0.2], [-0.1, 0.4, 0.2, -0.5]]
 *     def run(make):
 *         p = torch.tensor(p0, requires_grad=True); opt = make([p])
 *         for g in gs:
 *             p.grad = torch.tensor(g); opt.step()
 *         return p.detach().tolist()      # printed with "%.9g"
 */
#include <stdint.h>
#include <string.h>

#include "core/mem.h"
#include "core/tensor.h"
#include "optim/optim.h"
#include "rt_test.h"

static const float P0[4] = {1.0f, -2.0f, 3.0f, -4.0f};
static const float GS[3][4] = {{0.1f, -0.2f, 0.3f, 0.4f}, {0.5f, 0.1f, -0.3f, 0.2f}, {-0.1f, 0.4f, 0.2f, -0.5f}};

#define TOL 2e-6

static rt_tensor *vec(int64_t n, const float *v, rt_mem_category cat) {
    return rt_tensor_from_data(1, &n, RT_F32, v, cat);
}

/* Replaces p's grad by a copy of g (category GRAD), or drops it for g NULL. */
static void set_grad(rt_tensor *p, const float *g) {
    rt_tensor_release(p->grad);
    p->grad = g ? rt_tensor_from_data(p->ndim, p->shape, RT_F32, g, RT_MEM_GRAD) : NULL;
}

static int64_t live(rt_mem_category c) {
    rt_memstats m;
    rt_memstats_get(&m);
    return m.live[c];
}

/* Runs 3 steps of `opt` over p with the grads GS; returns the last status. */
static rt_status run3(rt_optimizer *opt, rt_tensor *p) {
    for (int s = 0; s < 3; s++) {
        set_grad(p, GS[s]);
        rt_status st = rt_optimizer_step(opt);
        if (st != RT_OK) return st;
    }
    return RT_OK;
}

/* ---- SGD ------------------------------------------------------------------ */

typedef struct sgd_case {
    const char *name;
    rt_sgd_opts o;
    float want[4];
} sgd_case;

static void test_sgd_variants(void) {
    /* print("plain", run(lambda ps: torch.optim.SGD(ps, lr=0.1)))
     * print("mom",   run(lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9, dampening=0.1)))
     * print("nest",  run(lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True)))
     * print("wd",    run(lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.5, weight_decay=0.1)))
     * and plain + weight decay by hand: p ← p - 0.1(g + 0.1 p), three times. */
    float wd_plain[4];
    for (int i = 0; i < 4; i++) {
        double p = P0[i];
        for (int s = 0; s < 3; s++) p = p - 0.1 * (GS[s][i] + 0.1 * p);
        wd_plain[i] = (float)p;
    }
    const sgd_case cases[] = {
        {"plain", {.lr = 0.1}, {0.949999988f, -2.02999997f, 2.98000002f, -4.00999975f}},
        {"momentum+dampening", {.lr = 0.1, .momentum = 0.9, .dampening = 0.1},
         {0.896399975f, -1.99890006f, 2.95200014f, -4.09759998f}},
        {"nesterov", {.lr = 0.1, .momentum = 0.9, .nesterov = true},
         {0.849110007f, -2.03432012f, 2.94013023f, -4.09676027f}},
        {"weight_decay+momentum", {.lr = 0.1, .momentum = 0.5, .weight_decay = 0.1},
         {0.876197994f, -1.93629599f, 2.84679389f, -3.88019991f}},
        {"weight_decay", {.lr = 0.1, .weight_decay = 0.1},
         {wd_plain[0], wd_plain[1], wd_plain[2], wd_plain[3]}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        rt_tensor *p = vec(4, P0, RT_MEM_PARAM);
        rt_optimizer *opt = rt_sgd_create(&p, 1, &cases[c].o);
        CHECK(opt);
        CHECK(strcmp(rt_optimizer_name(opt), "SGD") == 0);
        CHECK_OK(run3(opt, p));
        CHECK_EQ_INT(rt_optimizer_step_count(opt), 3);
        const float *v = rt_tensor_f32(p);
        for (int i = 0; i < 4; i++) {
            if (fabs(v[i] - cases[c].want[i]) > TOL) fprintf(stderr, "case %s, element %d\n", cases[c].name, i);
            CHECK_NEAR(v[i], cases[c].want[i], TOL);
        }
        rt_optimizer_destroy(opt);
        rt_tensor_release(p);
    }
}

/* Collects visited state by name into a small table (copies, so it also
 * serves as a "checkpoint file"). */
typedef struct saved_entry {
    char name[64];
    rt_dtype dtype;
    int64_t numel;
    float f[8];
    int32_t i;
} saved_entry;
typedef struct saved_state {
    saved_entry e[16];
    int n;
} saved_state;

static rt_status save_fn(void *ud, const char *name, rt_tensor *t) {
    saved_state *s = ud;
    if (s->n >= 16) return rt_error_set(RT_ERR_STATE, "too many entries");
    saved_entry *e = &s->e[s->n++];
    snprintf(e->name, sizeof e->name, "%s", name);
    e->dtype = t->dtype;
    e->numel = rt_tensor_numel(t);
    if (t->dtype == RT_I32 && e->numel == 1) e->i = *(int32_t *)rt_tensor_data(t);
    else if (t->dtype == RT_F32 && e->numel <= 8 && !rt_tensor_is_meta(t))
        memcpy(e->f, rt_tensor_f32(t), (size_t)e->numel * sizeof(float));
    return RT_OK;
}

static rt_status load_fn(void *ud, const char *name, rt_tensor *t) {
    const saved_state *s = ud;
    for (int k = 0; k < s->n; k++) {
        const saved_entry *e = &s->e[k];
        if (strcmp(e->name, name) != 0) continue;
        if (e->dtype != t->dtype || e->numel != rt_tensor_numel(t))
            return rt_error_set(RT_ERR_FORMAT, "%s: mismatched entry", name);
        if (t->dtype == RT_I32) *(int32_t *)rt_tensor_data(t) = e->i;
        else memcpy(rt_tensor_f32(t), e->f, (size_t)e->numel * sizeof(float));
        return RT_OK;
    }
    return rt_error_set(RT_ERR_FORMAT, "%s: not in the checkpoint", name);
}

static const saved_entry *find(const saved_state *s, const char *name) {
    for (int k = 0; k < s->n; k++)
        if (strcmp(s->e[k].name, name) == 0) return &s->e[k];
    return NULL;
}

static void test_sgd_momentum_buffer_and_resume(void) {
    /* p = torch.tensor(p0, requires_grad=True)
     * opt = torch.optim.SGD([p], lr=0.1, momentum=0.9, dampening=0.1)
     * for g in gs: p.grad = torch.tensor(g); opt.step()
     * print(opt.state[p]['momentum_buffer'].tolist()) */
    static const float want_buf[4] = {0.395999938f, 0.279000014f, 0.180000007f, 0.0359999537f};
    static const float want_p[4] = {0.896399975f, -1.99890006f, 2.95200014f, -4.09759998f};
    const rt_sgd_opts o = {.lr = 0.1, .momentum = 0.9, .dampening = 0.1};

    /* Run A: 3 steps straight, but save (visit) a checkpoint before the first
     * step: saving must not change training (with dampening ≠ 0 the first
     * step's buffer rule b_1 = g_1 depends on state.<i>.step, not on whether
     * the buffer exists). */
    rt_tensor *pa = vec(4, P0, RT_MEM_PARAM);
    rt_optimizer *a = rt_sgd_create(&pa, 1, &o);
    CHECK(a);
    saved_state s0 = {0};
    CHECK_OK(rt_optimizer_state_visit(a, save_fn, &s0));
    CHECK_EQ_INT(s0.n, 3);
    CHECK_EQ_INT(rt_optimizer_state_count(a), 3);
    CHECK(find(&s0, "state.0.step") && find(&s0, "state.0.step")->i == 0);
    CHECK_OK(run3(a, pa));
    for (int i = 0; i < 4; i++) CHECK_NEAR(rt_tensor_f32(pa)[i], want_p[i], TOL);

    /* Run B: 2 steps, checkpoint, then a fresh optimizer loads it and does
     * the third step: same result as A. */
    rt_tensor *pb = vec(4, P0, RT_MEM_PARAM);
    rt_optimizer *b = rt_sgd_create(&pb, 1, &o);
    CHECK(b);
    for (int s = 0; s < 2; s++) {
        set_grad(pb, GS[s]);
        CHECK_OK(rt_optimizer_step(b));
    }
    saved_state ck = {0};
    CHECK_OK(rt_optimizer_state_visit(b, save_fn, &ck));
    CHECK(strcmp(ck.e[0].name, "step_count") == 0 && ck.e[0].i == 2);
    CHECK(strcmp(ck.e[1].name, "state.0.step") == 0 && ck.e[1].i == 2);
    CHECK(strcmp(ck.e[2].name, "state.0.momentum_buffer") == 0 && ck.e[2].numel == 4);
    rt_optimizer_destroy(b);

    rt_optimizer *c = rt_sgd_create(&pb, 1, &o);
    CHECK(c);
    CHECK_OK(rt_optimizer_state_visit(c, load_fn, &ck));
    CHECK_EQ_INT(rt_optimizer_step_count(c), 2);
    set_grad(pb, GS[2]);
    CHECK_OK(rt_optimizer_step(c));
    CHECK_EQ_INT(rt_optimizer_step_count(c), 3);
    for (int i = 0; i < 4; i++) CHECK_NEAR(rt_tensor_f32(pb)[i], want_p[i], TOL);
    saved_state end = {0};
    CHECK_OK(rt_optimizer_state_visit(c, save_fn, &end));
    for (int i = 0; i < 4; i++) CHECK_NEAR(end.e[2].f[i], want_buf[i], TOL);
    CHECK_EQ_INT(end.e[1].i, 3);

    rt_optimizer_destroy(a);
    rt_optimizer_destroy(c);
    rt_tensor_release(pa);
    rt_tensor_release(pb);
}

static void test_create_errors(void) {
    rt_tensor *p = vec(4, P0, RT_MEM_PARAM);
    rt_tensor *params2[2] = {p, p};
    rt_sgd_opts o = rt_sgd_default_opts(0.1);

    /* Nesterov needs momentum > 0 and zero dampening (PyTorch's ValueError). */
    o.nesterov = true;
    rt_error_clear();
    CHECK(rt_sgd_create(&p, 1, &o) == NULL);
    CHECK(strstr(rt_error_last(), "Nesterov momentum requires a momentum and zero dampening"));
    o.momentum = 0.9;
    o.dampening = 0.1;
    CHECK(rt_sgd_create(&p, 1, &o) == NULL);
    CHECK(strstr(rt_error_last(), "Nesterov"));
    o.dampening = 0.0;
    rt_optimizer *ok = rt_sgd_create(&p, 1, &o);
    CHECK(ok);
    rt_optimizer_destroy(ok);

    o = rt_sgd_default_opts(-0.1);
    CHECK(rt_sgd_create(&p, 1, &o) == NULL);
    CHECK(strstr(rt_error_last(), "learning rate"));
    o = rt_sgd_default_opts(0.1);
    o.momentum = -1.0;
    CHECK(rt_sgd_create(&p, 1, &o) == NULL);
    o = rt_sgd_default_opts(0.1);
    CHECK(rt_sgd_create(NULL, 1, &o) == NULL);
    CHECK(strstr(rt_error_last(), "empty parameter list"));
    CHECK(rt_sgd_create(&p, 0, &o) == NULL);
    CHECK(rt_sgd_create(params2, 2, &o) == NULL);
    CHECK(strstr(rt_error_last(), "same tensor"));
    rt_tensor *null_param = NULL;
    CHECK(rt_sgd_create(&null_param, 1, &o) == NULL);
    CHECK(rt_sgd_create(&p, 1, NULL) == NULL);

    int64_t n = 4;
    rt_tensor *h = rt_tensor_zeros(1, &n, RT_BF16, RT_DEVICE_CPU, RT_MEM_PARAM);
    CHECK(h);
    CHECK(rt_sgd_create(&h, 1, &o) == NULL);
    CHECK(strstr(rt_error_last(), "bfloat16"));

    rt_adamw_opts a = rt_adamw_default_opts();
    CHECK(a.lr == 1e-3 && a.beta1 == 0.9 && a.beta2 == 0.999 && a.eps == 1e-8 && a.weight_decay == 1e-2);
    a.amsgrad = true;
    CHECK(rt_adamw_create(&p, 1, &a) == NULL);
    CHECK(strstr(rt_error_last(), "amsgrad"));
    a = rt_adamw_default_opts();
    a.beta2 = 1.0;
    CHECK(rt_adamw_create(&p, 1, &a) == NULL);
    CHECK(strstr(rt_error_last(), "beta"));
    a = rt_adamw_default_opts();
    a.eps = -1e-8;
    CHECK(rt_adamw_create(&p, 1, &a) == NULL);
    a = rt_adamw_default_opts();
    a.weight_decay = NAN;
    CHECK(rt_adamw_create(&p, 1, &a) == NULL);

    rt_optimizer_destroy(NULL);
    rt_tensor_release(h);
    rt_tensor_release(p);
}

/* A failing step leaves every parameter untouched. */
static void test_step_errors(void) {
    static const float q0[2] = {0.5f, -0.5f};
    rt_tensor *p = vec(4, P0, RT_MEM_PARAM), *q = vec(2, q0, RT_MEM_PARAM);
    rt_tensor *ps[2] = {p, q};
    rt_optimizer *opt = rt_adamw_create(ps, 2, &(rt_adamw_opts){.lr = 0.01, .beta1 = 0.9, .beta2 = 0.999});
    CHECK(opt);
    int64_t optim0 = live(RT_MEM_OPTIM), four = 4;
    set_grad(p, GS[0]);
    q->grad = rt_tensor_zeros(1, &four, RT_F32, RT_DEVICE_CPU, RT_MEM_GRAD); /* 4 for 2 elements */
    CHECK(rt_optimizer_step(opt) == RT_ERR_SHAPE);
    CHECK(strstr(rt_error_last(), "parameter 1"));
    for (int i = 0; i < 4; i++) CHECK(rt_tensor_f32(p)[i] == P0[i]);
    CHECK_EQ_INT(rt_optimizer_step_count(opt), 0);
    CHECK_EQ_INT(live(RT_MEM_OPTIM), optim0); /* nothing allocated either */
    rt_tensor_release(q->grad);
    q->grad = rt_tensor_zeros(1, &four, RT_BF16, RT_DEVICE_CPU, RT_MEM_GRAD);
    CHECK(rt_optimizer_step(opt) == RT_ERR_DTYPE);

    set_grad(q, GS[0] + 2);
    rt_optimizer_set_lr(opt, NAN);
    CHECK(rt_optimizer_step(opt) == RT_ERR_INVALID_ARG);
    rt_optimizer_set_lr(opt, -1.0f);
    CHECK(rt_optimizer_step(opt) == RT_ERR_INVALID_ARG);
    CHECK(strstr(rt_error_last(), "learning rate"));
    for (int i = 0; i < 4; i++) CHECK(rt_tensor_f32(p)[i] == P0[i]);
    rt_optimizer_set_lr(opt, 0.01f);
    CHECK(rt_optimizer_get_lr(opt) == 0.01f);
    CHECK_OK(rt_optimizer_step(opt));
    CHECK_EQ_INT(rt_optimizer_step_count(opt), 1);

    rt_optimizer_destroy(opt);
    rt_tensor_release(p);
    rt_tensor_release(q);
}

/* ---- AdamW ---------------------------------------------------------------- */

static void test_adamw_three_steps(void) {
    /* print(run(lambda ps: torch.optim.AdamW(ps, lr=0.01, betas=(0.9, 0.999), eps=1e-8,
     *                                        weight_decay=0.1)))
     * and, from the same run, opt.state[p]['exp_avg'] / ['exp_avg_sq'] / ['step'] (3.). */
    static const float want_p[4] = {0.973119855f, -1.98593879f, 2.97919726f, -4.00734282f};
    static const float want_m[4] = {0.0430999957f, 0.0328000002f, 0.0173000004f, 0.000399999321f};
    static const float want_v[4] = {0.000269730022f, 0.000209910053f, 0.000219730107f, 0.000449640182f};
    rt_tensor *p = vec(4, P0, RT_MEM_PARAM);
    rt_adamw_opts o = {.lr = 0.01, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.1};
    rt_optimizer *opt = rt_adamw_create(&p, 1, &o);
    CHECK(opt);
    CHECK(strcmp(rt_optimizer_name(opt), "AdamW") == 0);
    CHECK_OK(run3(opt, p));
    for (int i = 0; i < 4; i++) CHECK_NEAR(rt_tensor_f32(p)[i], want_p[i], TOL);
    saved_state s = {0};
    CHECK_OK(rt_optimizer_state_visit(opt, save_fn, &s));
    CHECK_EQ_INT(s.n, 4);
    CHECK_EQ_INT(find(&s, "state.0.step")->i, 3);
    for (int i = 0; i < 4; i++) {
        CHECK_NEAR(find(&s, "state.0.exp_avg")->f[i], want_m[i], 1e-8);
        CHECK_NEAR(find(&s, "state.0.exp_avg_sq")->f[i], want_v[i], 1e-10);
    }
    rt_optimizer_destroy(opt);
    rt_tensor_release(p);
}

/* A parameter without a grad is skipped and its own step (bias correction)
 * starts later, as in PyTorch. */
static void test_adamw_skips_missing_grad(void) {
    /* a = torch.tensor(p0, requires_grad=True); b = torch.tensor([0.5, -0.5], requires_grad=True)
     * opt = torch.optim.AdamW([a, b], lr=0.01, weight_decay=0.1)
     * for g, h in zip(gs, [None, [0.3, -0.1], [0.2, 0.6]]):
     *     a.grad = torch.tensor(g); b.grad = None if h is None else torch.tensor(h); opt.step()
     * print(a.tolist(), b.tolist(), opt.state[b]['step'])   # ..., tensor(2.) */
    static const float want_a[4] = {0.973119855f, -1.98593879f, 2.97919726f, -4.00734282f};
    static const float want_b[2] = {0.479306996f, -0.495249689f};
    static const float b0[2] = {0.5f, -0.5f}, gb[3][2] = {{0, 0}, {0.3f, -0.1f}, {0.2f, 0.6f}};
    rt_tensor *a = vec(4, P0, RT_MEM_PARAM), *b = vec(2, b0, RT_MEM_PARAM);
    rt_tensor *ps[2] = {a, b};
    rt_adamw_opts o = rt_adamw_default_opts();
    o.lr = 0.01;
    o.weight_decay = 0.1;
    rt_optimizer *opt = rt_adamw_create(ps, 2, &o);
    CHECK(opt);
    CHECK_EQ_INT(rt_optimizer_param_count(opt), 2);
    int64_t optim0 = live(RT_MEM_OPTIM);
    for (int s = 0; s < 3; s++) {
        set_grad(a, GS[s]);
        set_grad(b, s == 0 ? NULL : gb[s]);
        CHECK_OK(rt_optimizer_step(opt));
        if (s == 0) {
            /* Lazy state: only a's two moments exist after the first step. */
            CHECK_EQ_INT(live(RT_MEM_OPTIM) - optim0, 2 * 4 * (int64_t)sizeof(float));
            CHECK(b->storage->data && rt_tensor_f32(b)[0] == 0.5f && rt_tensor_f32(b)[1] == -0.5f);
        }
    }
    for (int i = 0; i < 4; i++) CHECK_NEAR(rt_tensor_f32(a)[i], want_a[i], TOL);
    for (int i = 0; i < 2; i++) CHECK_NEAR(rt_tensor_f32(b)[i], want_b[i], TOL);
    saved_state s = {0};
    CHECK_OK(rt_optimizer_state_visit(opt, save_fn, &s));
    CHECK_EQ_INT(find(&s, "state.0.step")->i, 3);
    CHECK_EQ_INT(find(&s, "state.1.step")->i, 2);
    CHECK_EQ_INT(find(&s, "step_count")->i, 3);
    rt_optimizer_destroy(opt);
    rt_tensor_release(a);
    rt_tensor_release(b);
}

/* Above the OpenMP threshold (32768 elements) the loops run in parallel:
 * a parameter tiling P0 25000 times, with grads tiling GS, must give in
 * every tile exactly the bits of the 4-element run. */
static void test_large_parallel_matches_small(void) {
    enum { TILES = 25000, N = 4 * TILES };
    float *big0 = malloc(N * sizeof(float)), *gbig = malloc(3 * (size_t)N * sizeof(float));
    CHECK(big0 && gbig);
    for (int i = 0; i < N; i++) {
        big0[i] = P0[i % 4];
        for (int s = 0; s < 3; s++) gbig[(size_t)s * N + i] = GS[s][i % 4];
    }
    for (int kind = 0; kind < 2; kind++) {
        rt_tensor *small = vec(4, P0, RT_MEM_PARAM), *big = vec(N, big0, RT_MEM_PARAM);
        rt_optimizer *os, *ob;
        if (kind == 0) {
            rt_sgd_opts o = {.lr = 0.1, .momentum = 0.9, .nesterov = true, .weight_decay = 0.01};
            os = rt_sgd_create(&small, 1, &o);
            ob = rt_sgd_create(&big, 1, &o);
        } else {
            rt_adamw_opts o = rt_adamw_default_opts();
            os = rt_adamw_create(&small, 1, &o);
            ob = rt_adamw_create(&big, 1, &o);
        }
        CHECK(os && ob);
        CHECK_OK(run3(os, small));
        for (int s = 0; s < 3; s++) {
            set_grad(big, gbig + (size_t)s * N);
            CHECK_OK(rt_optimizer_step(ob));
        }
        for (int i = 0; i < N; i++) {
            if (rt_tensor_f32(big)[i] != rt_tensor_f32(small)[i % 4]) fprintf(stderr, "kind %d i %d\n", kind, i);
            CHECK(rt_tensor_f32(big)[i] == rt_tensor_f32(small)[i % 4]);
        }
        rt_optimizer_destroy(os);
        rt_optimizer_destroy(ob);
        rt_tensor_release(small);
        rt_tensor_release(big);
    }
    free(big0);
    free(gbig);
}

/* ---- state visit and memory accounting ------------------------------------ */

typedef struct name_list {
    char names[16][64];
    int n;
    int64_t optim_during_step_scalar;
} name_list;

static rt_status names_fn(void *ud, const char *name, rt_tensor *t) {
    name_list *l = ud;
    if (l->n >= 16) return rt_error_set(RT_ERR_STATE, "too many");
    snprintf(l->names[l->n++], 64, "%s", name);
    return RT_OK;
}

static rt_status stop_fn(void *ud, const char *name, rt_tensor *t) {
    int *count = ud;
    return ++*count == 3 ? rt_error_set(RT_ERR_IO, "disk full") : RT_OK;
}

static rt_status negative_step_fn(void *ud, const char *name, rt_tensor *t) {
    if (strcmp(name, "state.0.step") == 0) *(int32_t *)rt_tensor_data(t) = -5;
    return RT_OK;
}

static void test_state_visit_names_and_bytes(void) {
    int64_t shape_w[2] = {3, 5}, shape_b[1] = {3};
    rt_tensor *w = rt_tensor_zeros(2, shape_w, RT_F32, RT_DEVICE_CPU, RT_MEM_PARAM);
    rt_tensor *bias = rt_tensor_zeros(1, shape_b, RT_F32, RT_DEVICE_CPU, RT_MEM_PARAM);
    rt_tensor *ps[2] = {w, bias};
    const int64_t param_bytes = (15 + 3) * (int64_t)sizeof(float);
    int64_t optim0 = live(RT_MEM_OPTIM);

    rt_optimizer *adam = rt_adamw_create(ps, 2, &(rt_adamw_opts){.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.999});
    CHECK(adam);
    CHECK_EQ_INT(live(RT_MEM_OPTIM), optim0); /* lazy: nothing before the first step */
    CHECK_EQ_INT(rt_optimizer_state_nbytes(adam), 2 * param_bytes);
    CHECK_EQ_INT(rt_optimizer_state_count(adam), 7);
    name_list l = {0};
    CHECK_OK(rt_optimizer_state_visit(adam, names_fn, &l));
    static const char *want[] = {"step_count",     "state.0.step",    "state.0.exp_avg",
                                 "state.0.exp_avg_sq", "state.1.step", "state.1.exp_avg",
                                 "state.1.exp_avg_sq"};
    CHECK_EQ_INT(l.n, 7);
    for (int i = 0; i < 7; i++) {
        if (strcmp(l.names[i], want[i]) != 0) fprintf(stderr, "entry %d: %s\n", i, l.names[i]);
        CHECK(strcmp(l.names[i], want[i]) == 0);
    }
    /* The visit allocated all state; the step scalars were temporaries. */
    CHECK_EQ_INT(live(RT_MEM_OPTIM) - optim0, rt_optimizer_state_nbytes(adam));
    /* ...and visiting again, or stepping, allocates nothing more. */
    CHECK_OK(rt_optimizer_state_visit(adam, names_fn, &(name_list){0}));
    set_grad(w, (float[15]){0});
    set_grad(bias, (float[3]){0});
    CHECK_OK(rt_optimizer_step(adam));
    CHECK_EQ_INT(live(RT_MEM_OPTIM) - optim0, 2 * param_bytes);

    /* A failing callback stops the visit with its status. */
    int count = 0;
    CHECK(rt_optimizer_state_visit(adam, stop_fn, &count) == RT_ERR_IO);
    CHECK_EQ_INT(count, 3);
    CHECK(rt_optimizer_state_visit(adam, negative_step_fn, NULL) == RT_ERR_FORMAT);
    CHECK(rt_optimizer_state_visit(adam, NULL, NULL) == RT_ERR_INVALID_ARG);
    rt_optimizer_destroy(adam);
    CHECK_EQ_INT(live(RT_MEM_OPTIM), optim0);

    rt_optimizer *sgdm = rt_sgd_create(ps, 2, &(rt_sgd_opts){.lr = 0.1, .momentum = 0.9});
    CHECK(sgdm);
    CHECK_EQ_INT(rt_optimizer_state_count(sgdm), 5);
    CHECK_EQ_INT(rt_optimizer_state_nbytes(sgdm), param_bytes);
    CHECK_OK(rt_optimizer_step(sgdm));
    CHECK_EQ_INT(live(RT_MEM_OPTIM) - optim0, param_bytes);
    name_list l2 = {0};
    CHECK_OK(rt_optimizer_state_visit(sgdm, names_fn, &l2));
    CHECK_EQ_INT(l2.n, 5);
    CHECK(strcmp(l2.names[2], "state.0.momentum_buffer") == 0);
    CHECK(strcmp(l2.names[4], "state.1.momentum_buffer") == 0);
    rt_optimizer_destroy(sgdm);

    rt_optimizer *sgd = rt_sgd_create(ps, 2, &(rt_sgd_opts){.lr = 0.1});
    CHECK(sgd);
    CHECK_EQ_INT(rt_optimizer_state_count(sgd), 1);
    CHECK_EQ_INT(rt_optimizer_state_nbytes(sgd), 0);
    CHECK_OK(rt_optimizer_step(sgd));
    name_list l3 = {0};
    CHECK_OK(rt_optimizer_state_visit(sgd, names_fn, &l3));
    CHECK_EQ_INT(l3.n, 1);
    CHECK_EQ_INT(live(RT_MEM_OPTIM), optim0);
    rt_optimizer_set_step_count(sgd, 41);
    CHECK_EQ_INT(rt_optimizer_step_count(sgd), 41);
    rt_optimizer_destroy(sgd);

    rt_tensor_release(w);
    rt_tensor_release(bias);
}

/* Meta parameters: the state is booked, nothing is computed. */
static void test_meta_step_accounts_state(void) {
    int64_t shape[4] = {64, 32, 3, 3};
    rt_tensor *w = rt_tensor_create(4, shape, RT_F32, RT_DEVICE_META, RT_MEM_PARAM);
    CHECK(w);
    w->grad = rt_tensor_create(4, shape, RT_F32, RT_DEVICE_META, RT_MEM_GRAD);
    CHECK(w->grad);
    int64_t optim0 = live(RT_MEM_OPTIM), grad0 = live(RT_MEM_GRAD);
    rt_optimizer *opt = rt_adamw_create(&w, 1, &(rt_adamw_opts){.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.999});
    CHECK(opt);
    CHECK_OK(rt_optimizer_step(opt));
    CHECK_OK(rt_optimizer_step(opt));
    CHECK_EQ_INT(live(RT_MEM_OPTIM) - optim0, 2 * 64 * 32 * 3 * 3 * 4);
    CHECK_EQ_INT(rt_optimizer_step_count(opt), 2);
    float norm = -1.0f;
    CHECK_OK(rt_clip_grad_norm(&w, 1, 1.0f, &norm)); /* meta grads add nothing */
    CHECK(norm == 0.0f);
    rt_optimizer_zero_grad(opt);
    CHECK(w->grad == NULL);
    CHECK_EQ_INT(live(RT_MEM_GRAD), grad0 - 64 * 32 * 3 * 3 * 4);
    rt_optimizer_destroy(opt);
    CHECK_EQ_INT(live(RT_MEM_OPTIM), optim0);
    rt_tensor_release(w);
}

static void test_zero_grad_releases(void) {
    int64_t grad0 = live(RT_MEM_GRAD);
    rt_tensor *p = vec(4, P0, RT_MEM_PARAM), *q = vec(4, P0, RT_MEM_PARAM), *r = vec(4, P0, RT_MEM_PARAM);
    rt_tensor *ps[3] = {p, q, r};
    rt_optimizer *opt = rt_sgd_create(ps, 3, &(rt_sgd_opts){.lr = 0.1});
    CHECK(opt);
    set_grad(p, GS[0]);
    set_grad(q, GS[1]); /* r has no grad */
    CHECK_EQ_INT(live(RT_MEM_GRAD) - grad0, 2 * 4 * (int64_t)sizeof(float));
    CHECK_OK(rt_optimizer_step(opt));
    CHECK(rt_tensor_f32(r)[0] == P0[0]); /* skipped */
    rt_optimizer_zero_grad(opt);
    CHECK(p->grad == NULL && q->grad == NULL && r->grad == NULL);
    CHECK_EQ_INT(live(RT_MEM_GRAD), grad0);
    rt_optimizer_zero_grad(opt); /* idempotent */
    CHECK_OK(rt_optimizer_step(opt)); /* no grads: nothing to do, still a step */
    CHECK_EQ_INT(rt_optimizer_step_count(opt), 2);
    rt_optimizer_zero_grad(NULL);
    rt_optimizer_destroy(opt);
    rt_tensor_release(p);
    rt_tensor_release(q);
    rt_tensor_release(r);
}

/* ---- LR schedules --------------------------------------------------------- */

/* Reference: the lr in the optimizer before each optimizer.step() of
 *
 *     import torch, warnings; warnings.filterwarnings("ignore")
 *     from torch.optim import lr_scheduler as L
 *     def lrs(make_main, warm, f, n, base=0.1):
 *         p = torch.zeros(1, requires_grad=True); opt = torch.optim.SGD([p], lr=base)
 *         if warm:
 *             w = L.LinearLR(opt, start_factor=f, end_factor=1.0, total_iters=warm)
 *             m = make_main(opt); s = L.SequentialLR(opt, [w, m], milestones=[warm])
 *         else:
 *             s = make_main(opt)
 *         out = []
 *         for i in range(n):
 *             out.append(opt.param_groups[0]['lr']); opt.step(); s.step()
 *         return out                                   # printed with "%.9g"
 */
static int check_sched(const rt_lr_schedule *s, const double *want, int n, const char *what) {
    if (rt_lr_schedule_check(s) != RT_OK) {
        fprintf(stderr, "%s: %s\n", what, rt_error_last());
        return 0;
    }
    for (int i = 0; i < n; i++) {
        double got = rt_lr_at(s, i);
        if (fabs(got - want[i]) > 1e-7 + 1e-6 * fabs(want[i])) {
            fprintf(stderr, "%s: step %d: got %.9g want %.9g\n", what, i, got, want[i]);
            return 0;
        }
    }
    return 1;
}

static void test_lr_schedules(void) {
    /* lrs(lambda o: L.LambdaLR(o, lambda e: 1.0), 4, 0.25, 7) */
    static const double const_warm[] = {0.025, 0.04375, 0.0625, 0.08125, 0.1, 0.1, 0.1};
    CHECK(check_sched(&(rt_lr_schedule){.kind = RT_LR_CONSTANT, .base_lr = 0.1, .warmup_steps = 4,
                                        .warmup_start_factor = 0.25},
                      const_warm, 7, "constant+warmup"));
    /* lrs(lambda o: L.StepLR(o, step_size=3, gamma=0.5), 0, 0, 10) */
    static const double step[] = {0.1, 0.1, 0.1, 0.05, 0.05, 0.05, 0.025, 0.025, 0.025, 0.0125};
    CHECK(check_sched(&(rt_lr_schedule){.kind = RT_LR_STEP, .base_lr = 0.1, .step_size = 3, .gamma = 0.5},
                      step, 10, "step"));
    /* lrs(lambda o: L.StepLR(o, step_size=3, gamma=0.5), 2, 0.1, 10) */
    static const double step_warm[] = {0.01, 0.055, 0.1, 0.1, 0.1, 0.05, 0.05, 0.05, 0.025, 0.025};
    CHECK(check_sched(&(rt_lr_schedule){.kind = RT_LR_STEP, .base_lr = 0.1, .step_size = 3, .gamma = 0.5,
                                        .warmup_steps = 2, .warmup_start_factor = 0.1},
                      step_warm, 10, "step+warmup"));
    /* lrs(lambda o: L.MultiStepLR(o, milestones=[4, 2, 4], gamma=0.1), 1, 0.5, 8)
     * (unsorted, and 4 twice: gamma^2 there, as PyTorch's Counter) */
    static const double multi_warm[] = {0.05, 0.1, 0.1, 0.01, 0.01, 0.0001, 0.0001, 0.0001};
    CHECK(check_sched(&(rt_lr_schedule){.kind = RT_LR_MULTISTEP, .base_lr = 0.1, .gamma = 0.1,
                                        .milestones = {4, 2, 4}, .n_milestones = 3, .warmup_steps = 1,
                                        .warmup_start_factor = 0.5},
                      multi_warm, 8, "multistep+warmup"));
    /* lrs(lambda o: L.CosineAnnealingLR(o, T_max=10, eta_min=0.001), 5, 0.1, 21)
     * (past T_max = 10 main steps the cosine rises again, as in PyTorch) */
    static const double cos_warm[] = {0.01, 0.028, 0.046, 0.064, 0.082, 0.1, 0.0975772976, 0.0905463412,
                                      0.07959537, 0.0657963412, 0.0505, 0.0352036588, 0.02140463,
                                      0.0104536588, 0.00342270244, 0.001, 0.00342270244, 0.0104536588,
                                      0.02140463, 0.0352036588, 0.0505};
    CHECK(check_sched(&(rt_lr_schedule){.kind = RT_LR_COSINE, .base_lr = 0.1, .t_max = 10, .eta_min = 0.001,
                                        .warmup_steps = 5, .warmup_start_factor = 0.1},
                      cos_warm, 21, "cosine+warmup"));
    /* lrs(lambda o: L.CosineAnnealingLR(o, T_max=10, eta_min=0.0), 0, 0, 12) */
    static const double cosine[] = {0.1, 0.0975528258, 0.0904508497, 0.0793892626, 0.0654508497, 0.05,
                                    0.0345491503, 0.0206107374, 0.00954915028, 0.00244717419, 0,
                                    0.00244717419};
    CHECK(check_sched(&(rt_lr_schedule){.kind = RT_LR_COSINE, .base_lr = 0.1, .t_max = 10}, cosine, 12,
                      "cosine"));

    /* Warm-up from 0 (allowed here; PyTorch's LinearLR needs start_factor > 0). */
    rt_lr_schedule z = {.kind = RT_LR_CONSTANT, .base_lr = 1.0, .warmup_steps = 4};
    CHECK_OK(rt_lr_schedule_check(&z));
    CHECK(rt_lr_at(&z, 0) == 0.0f);
    CHECK_NEAR(rt_lr_at(&z, 3), 0.75, 1e-7);
    CHECK(rt_lr_at(&z, 4) == 1.0f);

    /* Invalid schedules: an error from check, NaN from rt_lr_at (which the
     * optimizer then refuses), and rt_lr_at leaves the error message alone. */
    const rt_lr_schedule bad[] = {
        {.kind = RT_LR_STEP, .base_lr = 0.1, .gamma = 0.1},                 /* step_size 0 */
        {.kind = RT_LR_COSINE, .base_lr = 0.1},                              /* t_max 0 */
        {.kind = RT_LR_MULTISTEP, .base_lr = 0.1, .gamma = 0.1, .n_milestones = 9},
        {.kind = RT_LR_MULTISTEP, .base_lr = 0.1, .gamma = 0.1, .milestones = {-1}, .n_milestones = 1},
        {.kind = RT_LR_CONSTANT, .base_lr = -0.1},
        {.kind = RT_LR_CONSTANT, .base_lr = 0.1, .warmup_steps = 3, .warmup_start_factor = 1.5},
        {.kind = RT_LR_CONSTANT, .base_lr = 0.1, .warmup_steps = -1},
        {.kind = (rt_lr_kind)42, .base_lr = 0.1},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK(rt_lr_schedule_check(&bad[i]) == RT_ERR_INVALID_ARG);
        CHECK(strstr(rt_error_last(), "LR schedule"));
        rt_error_clear();
        CHECK(isnan(rt_lr_at(&bad[i], 0)));
        CHECK(rt_error_last()[0] == '\0');
    }
    CHECK(rt_lr_schedule_check(NULL) == RT_ERR_INVALID_ARG);
    CHECK(isnan(rt_lr_at(NULL, 0)));
    CHECK(isnan(rt_lr_at(&z, -1)));

    /* Driving an optimizer: a NaN lr is refused at step. */
    rt_tensor *p = vec(4, P0, RT_MEM_PARAM);
    rt_optimizer *opt = rt_sgd_create(&p, 1, &(rt_sgd_opts){.lr = 0.1});
    CHECK(opt);
    set_grad(p, GS[0]);
    rt_optimizer_set_lr(opt, rt_lr_at(&bad[0], rt_optimizer_step_count(opt)));
    CHECK(rt_optimizer_step(opt) == RT_ERR_INVALID_ARG);
    rt_lr_schedule good = {.kind = RT_LR_STEP, .base_lr = 0.1, .step_size = 1, .gamma = 0.5};
    for (int s = 0; s < 3; s++) {
        rt_optimizer_set_lr(opt, rt_lr_at(&good, rt_optimizer_step_count(opt)));
        CHECK_OK(rt_optimizer_step(opt));
    }
    CHECK_NEAR(rt_optimizer_get_lr(opt), 0.025, 1e-9);
    /* lrs 0.1, 0.05, 0.025 with grad 0.1 on element 0: 1 - 0.175*0.1 */
    CHECK_NEAR(rt_tensor_f32(p)[0], 1.0 - 0.175 * 0.1, TOL);
    rt_optimizer_destroy(opt);
    rt_tensor_release(p);
}

/* ---- clip_grad_norm ------------------------------------------------------- */

static void test_clip_grad_norm(void) {
    /* a = torch.zeros(2, requires_grad=True); b = torch.zeros(3, requires_grad=True)
     * c = torch.zeros(1, requires_grad=True)            # no grad
     * a.grad = torch.tensor([3., 4.]); b.grad = torch.tensor([0., 12., 0.])
     * n = torch.nn.utils.clip_grad_norm_([a, b, c], 6.5)
     * -> 13, a.grad [1.49999988, 1.99999988], b.grad [0, 5.99999952, 0] */
    static const float z[3] = {0, 0, 0};
    rt_tensor *a = vec(2, z, RT_MEM_PARAM), *b = vec(3, z, RT_MEM_PARAM), *c = vec(1, z, RT_MEM_PARAM);
    rt_tensor *ps[3] = {a, b, c};
    set_grad(a, (const float[]){3, 4});
    set_grad(b, (const float[]){0, 12, 0});
    float norm = -1;
    /* Below the threshold: measured, unchanged. */
    CHECK_OK(rt_clip_grad_norm(ps, 3, 20.0f, &norm));
    CHECK_NEAR(norm, 13.0, 1e-6);
    CHECK(rt_tensor_f32(a->grad)[0] == 3.0f && rt_tensor_f32(b->grad)[1] == 12.0f);
    CHECK_OK(rt_clip_grad_norm(ps, 3, INFINITY, &norm));
    CHECK(rt_tensor_f32(a->grad)[1] == 4.0f);
    /* Above: scaled by 6.5 / (13 + 1e-6). */
    CHECK_OK(rt_clip_grad_norm(ps, 3, 6.5f, &norm));
    CHECK_NEAR(norm, 13.0, 1e-6);
    CHECK_NEAR(rt_tensor_f32(a->grad)[0], 1.49999988f, 1e-7);
    CHECK_NEAR(rt_tensor_f32(a->grad)[1], 1.99999988f, 1e-7);
    CHECK_NEAR(rt_tensor_f32(b->grad)[1], 5.99999952f, 1e-6);
    CHECK(rt_tensor_f32(b->grad)[0] == 0.0f);
    /* Now the norm is ≈ 6.5: at most PyTorch's 1e-6 margin of further scaling. */
    CHECK_OK(rt_clip_grad_norm(ps, 3, 6.5f, NULL));
    CHECK_NEAR(rt_tensor_f32(b->grad)[1], 5.99999952f, 2e-6);

    /* Non-finite: RT_ERR_NONFINITE naming the parameter, grads untouched. */
    set_grad(a, (const float[]){3, 4});
    set_grad(b, (const float[]){0, NAN, 0});
    CHECK(rt_clip_grad_norm(ps, 3, 1.0f, &norm) == RT_ERR_NONFINITE);
    CHECK(isnan(norm));
    CHECK(strstr(rt_error_last(), "nan") && strstr(rt_error_last(), "parameter 1"));
    CHECK(rt_tensor_f32(a->grad)[0] == 3.0f && rt_tensor_f32(a->grad)[1] == 4.0f);
    set_grad(b, (const float[]){0, INFINITY, 0});
    CHECK(rt_clip_grad_norm(ps, 3, 1.0f, &norm) == RT_ERR_NONFINITE);
    CHECK(isinf(norm));
    CHECK(strstr(rt_error_last(), "inf"));
    CHECK(rt_tensor_f32(a->grad)[0] == 3.0f);
    /* Finite grads whose squares overflow float: still an error, not a scale by 0. */
    set_grad(b, (const float[]){3e38f, 3e38f, 0});
    CHECK(rt_clip_grad_norm(ps, 3, 1.0f, &norm) == RT_ERR_NONFINITE);
    CHECK(rt_tensor_f32(b->grad)[0] == 3e38f);

    /* Edge cases. */
    CHECK_OK(rt_clip_grad_norm(NULL, 0, 1.0f, &norm));
    CHECK(norm == 0.0f);
    CHECK(rt_clip_grad_norm(ps, 3, -1.0f, &norm) == RT_ERR_INVALID_ARG);
    CHECK(rt_clip_grad_norm(ps, 3, NAN, &norm) == RT_ERR_INVALID_ARG);
    CHECK(rt_clip_grad_norm(NULL, 2, 1.0f, &norm) == RT_ERR_INVALID_ARG);
    for (int i = 0; i < 3; i++) rt_tensor_release(ps[i]);
}

/* ---- gradient accumulation ------------------------------------------------ */

static void test_accum_loss_scale(void) {
    CHECK_NEAR(rt_accum_loss_scale(3, 8), 0.375, 1e-9);
    CHECK(rt_accum_loss_scale(8, 8) == 1.0f);
    CHECK(isnan(rt_accum_loss_scale(0, 8)));
    CHECK(isnan(rt_accum_loss_scale(9, 8)));
    CHECK(isnan(rt_accum_loss_scale(1, 0)));

    /* Per-sample gradients s_j of a mean loss over N = 5 samples, split 2+2+1:
     * Σ_k (n_k/N)·mean_k equals the full-batch mean (a smaller last
     * micro-batch gets a smaller weight; loss/K would weight it 1/3). */
    static const double sj[5] = {1.0, 2.0, 4.0, 8.0, 16.0};
    static const int sizes[3] = {2, 2, 1};
    rt_grad_accumulator acc;
    rt_grad_accumulator_begin(&acc, 5);
    double grad = 0.0; /* what .grad accumulates over the three backwards */
    int j = 0;
    for (int k = 0; k < 3; k++) {
        double mean_k = 0.0;
        for (int i = 0; i < sizes[k]; i++) mean_k += sj[j++];
        mean_k /= sizes[k];
        grad += rt_grad_accumulator_scale(&acc, sizes[k]) * mean_k;
    }
    CHECK_OK(rt_grad_accumulator_check(&acc));
    CHECK_NEAR(grad, 31.0 / 5.0, 1e-6);

    rt_grad_accumulator_begin(&acc, 5);
    CHECK_NEAR(rt_grad_accumulator_scale(&acc, 4), 0.8, 1e-7);
    CHECK(rt_grad_accumulator_check(&acc) == RT_ERR_STATE);
    CHECK(strstr(rt_error_last(), "4 samples"));
    CHECK(isnan(rt_grad_accumulator_scale(&acc, 2))); /* would exceed N: not recorded */
    CHECK_NEAR(rt_grad_accumulator_scale(&acc, 1), 0.2, 1e-7);
    CHECK_OK(rt_grad_accumulator_check(&acc));
}

RT_TEST_MAIN({"sgd_variants", test_sgd_variants},
             {"sgd_momentum_buffer_and_resume", test_sgd_momentum_buffer_and_resume},
             {"create_errors", test_create_errors},
             {"step_errors", test_step_errors},
             {"adamw_three_steps", test_adamw_three_steps},
             {"adamw_skips_missing_grad", test_adamw_skips_missing_grad},
             {"large_parallel_matches_small", test_large_parallel_matches_small},
             {"state_visit_names_and_bytes", test_state_visit_names_and_bytes},
             {"meta_step_accounts_state", test_meta_step_accounts_state},
             {"zero_grad_releases", test_zero_grad_releases},
             {"lr_schedules", test_lr_schedules},
             {"clip_grad_norm", test_clip_grad_norm},
             {"accum_loss_scale", test_accum_loss_scale})
