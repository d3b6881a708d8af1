/* Modules (nn/module.h, nn/modules.h) and the library training step
 * (train/step.h): state-dict names derived from the tree, inline children,
 * train/eval and visitors, every leaf module against the functional op it
 * wraps, and the step's hooks (order, skipping, loss scaling). */
#include <math.h>
#include <string.h>

#include "autograd/engine.h"
#include "memory/reversible.h"
#include "models/model.h"
#include "nn/modules.h"
#include "rt_test.h"
#include "train/step.h"

/* A fixed input (n, c, h, w) with values in [-1, 1). */
static rt_tensor *input(int ndim, const int64_t *shape, uint64_t seed) {
    rt_tensor *x = rt_tensor_create(ndim, shape, RT_F32, RT_DEVICE_CPU, RT_MEM_DATA);
    rt_generator g = {seed, 0};
    rt_generator_uniform(&g, rt_tensor_numel(x), rt_tensor_f32(x));
    for (int64_t i = 0; i < rt_tensor_numel(x); i++) rt_tensor_f32(x)[i] = 2.0f * rt_tensor_f32(x)[i] - 1.0f;
    return x;
}

static double max_abs_diff(rt_tensor *a, rt_tensor *b) {
    double m, scale;
    if (rt_compare(a, b, &m, &scale) != RT_OK) return INFINITY;
    return m;
}

/* stem conv, a Sequential "body" of conv + bn, an inline child holding
 * "2" — the names a PyTorch user would read in the state dict. */
static rt_status tree_fill(rt_module *net, rt_init_ctx *ctx) {
    RT_ADD_CHILD(net, "stem", rt_conv_create(ctx, 2, 1, 4, 3, 1, 1, 1, true, RT_INIT_DEFAULT, &m));
    rt_module *body, *inl;
    RT_TRY(rt_sequential_create(&body));
    RT_TRY(rt_module_add_child(net, "body", body));
    RT_ADD_CHILD(body, "0", rt_conv_create(ctx, 2, 4, 4, 3, 1, 1, 1, false, RT_INIT_DEFAULT, &m));
    RT_ADD_CHILD(body, "1", rt_batchnorm_create(ctx, 2, 4, true, &m));
    RT_TRY(rt_sequential_create(&inl));
    RT_TRY(rt_module_add_child(body, "", inl));
    RT_ADD_CHILD(inl, "2", rt_conv_create(ctx, 2, 4, 2, 1, 1, 0, 1, false, RT_INIT_DEFAULT, &m));
    return RT_OK;
}

static void test_state_dict_names_follow_the_tree(void) {
    rt_init_ctx ctx = rt_init_ctx_make(RT_DEVICE_CPU, 1);
    rt_module *net = NULL;
    rt_state_dict *sd = NULL;
    CHECK_OK(rt_sequential_create(&net));
    CHECK_OK(tree_fill(net, &ctx));
    CHECK_OK(rt_module_state_dict(net, &sd));
    const char *want[] = {"stem.weight", "stem.bias", "body.0.weight", "body.1.weight", "body.1.bias",
                          "body.1.running_mean", "body.1.running_var", "body.1.num_batches_tracked",
                          "body.2.weight"};
    CHECK_EQ_INT(sd->n, 9);
    for (int i = 0; i < sd->n && i < 9; i++) CHECK(strcmp(sd->entries[i].name, want[i]) == 0);
    CHECK_EQ_INT(rt_state_dict_num_params(sd), 6);
    /* paths and lookups look through the inline child */
    rt_module *c = rt_module_find(net, "body.2");
    CHECK(c != NULL && strcmp(c->cls->type, "Conv2d") == 0);
    char path[64];
    CHECK(strcmp(rt_module_path(c, path, sizeof path), "body.2") == 0);
    CHECK(rt_module_find(net, "body.3") == NULL);
    CHECK(rt_module_tensor(c, "weight") == sd->entries[8].tensor);
    /* names are unique among a module's children and tensors, also through an inline child */
    rt_module *dup = NULL;
    CHECK_OK(rt_relu_create(&dup));
    CHECK_EQ_INT(rt_module_add_child(rt_module_find(net, "body"), "0", dup), RT_ERR_INVALID_ARG);
    CHECK_OK(rt_relu_create(&dup));
    CHECK_EQ_INT(rt_module_add_child(c, "weight", dup), RT_ERR_INVALID_ARG);
    CHECK_OK(rt_relu_create(&dup));
    CHECK_EQ_INT(rt_module_add_child(net, "a.b", dup), RT_ERR_INVALID_ARG);
    /* an inline child's names can collide with its parent's: the state dict refuses that */
    rt_state_dict *clash = NULL;
    rt_module *inl = rt_module_find(net, "body")->children[2].module;
    CHECK_OK(rt_conv_create(&ctx, 2, 4, 4, 1, 1, 0, 1, false, RT_INIT_DEFAULT, &dup));
    CHECK_OK(rt_module_add_child(inl, "0", dup));
    CHECK_EQ_INT(rt_module_state_dict(net, &clash), RT_ERR_INVALID_ARG);
    CHECK(clash == NULL && strstr(rt_error_last(), "body.0.weight") != NULL);
    rt_state_dict_destroy(sd);
    rt_module_destroy(net);
}

typedef struct visit_log {
    char paths[16][32];
    int n;
} visit_log;

static rt_status log_visit(rt_module *m, const char *path, void *user) {
    visit_log *l = user;
    if (l->n < 16) snprintf(l->paths[l->n++], sizeof l->paths[0], "%s:%s", path, m->cls->type);
    return RT_OK;
}

static void test_visit_and_train_mode(void) {
    rt_init_ctx ctx = rt_init_ctx_make(RT_DEVICE_CPU, 1);
    rt_module *net = NULL;
    CHECK_OK(rt_sequential_create(&net));
    CHECK_OK(tree_fill(net, &ctx));
    visit_log l = {0};
    CHECK_OK(rt_module_visit(net, log_visit, &l));
    const char *want[] = {":Sequential", "stem:Conv2d", "body:Sequential", "body.0:Conv2d", "body.1:BatchNorm2d",
                          "body:Sequential", "body.2:Conv2d"};
    CHECK_EQ_INT(l.n, 7);
    for (int i = 0; i < l.n && i < 7; i++) CHECK(strcmp(l.paths[i], want[i]) == 0);
    rt_module_train(net, false);
    rt_module *bn = rt_module_find(net, "body.1");
    CHECK(!net->training && !bn->training && !rt_module_find(net, "body.2")->training);
    /* eval: the batch norm uses running statistics and leaves them alone */
    int64_t shape[4] = {2, 1, 5, 5};
    rt_tensor *x = input(4, shape, 3), *y = NULL;
    CHECK_OK(rt_module_forward(net, x, &y));
    rt_state_dict *sd = NULL;
    CHECK_OK(rt_module_state_dict(net, &sd));
    CHECK_EQ_INT((int)*rt_state_dict_find(sd, "body.1.num_batches_tracked")->counter, 0);
    rt_tensor_release(y);
    rt_module_train(net, true);
    CHECK_OK(rt_module_forward(net, x, &y));
    CHECK_EQ_INT((int)*rt_state_dict_find(sd, "body.1.num_batches_tracked")->counter, 1);
    rt_tensor_release(y);
    rt_tensor_release(x);
    rt_state_dict_destroy(sd);
    rt_module_destroy(net);
}

/* Each leaf module's forward equals the functional op with the module's
 * own parameters (bit for bit: the same kernel runs). */
static void test_leaf_modules_match_the_ops(void) {
    rt_init_ctx ctx = rt_init_ctx_make(RT_DEVICE_CPU, 5);
    int64_t s2[4] = {2, 3, 6, 6}, s3[5] = {2, 3, 4, 4, 4}, sl[2] = {4, 6};
    rt_tensor *x2 = input(4, s2, 1), *x3 = input(5, s3, 2), *xl = input(2, sl, 3);
    struct {
        const char *type;
        rt_tensor *x;
        rt_module *m;
    } cases[11] = {{"Conv2d", x2, NULL}, {"Conv3d", x3, NULL}, {"Linear", xl, NULL}, {"ReLU", x2, NULL},
                   {"LeakyReLU", x2, NULL}, {"MaxPool2d", x2, NULL}, {"AvgPool3d", x3, NULL},
                   {"AdaptiveAvgPool2d", x2, NULL}, {"Flatten", x2, NULL}, {"BatchNorm3d", x3, NULL},
                   {"Dropout", x2, NULL}};
    CHECK_OK(rt_conv_create(&ctx, 2, 3, 5, 3, 2, 1, 1, true, RT_INIT_DEFAULT, &cases[0].m));
    CHECK_OK(rt_conv_create(&ctx, 3, 3, 4, 3, 1, 1, 1, false, RT_INIT_DEFAULT, &cases[1].m));
    CHECK_OK(rt_linear_create(&ctx, 6, 2, true, &cases[2].m));
    CHECK_OK(rt_relu_create(&cases[3].m));
    CHECK_OK(rt_leaky_relu_create(0.2f, &cases[4].m));
    CHECK_OK(rt_max_pool_create(2, 3, 2, 1, &cases[5].m));
    CHECK_OK(rt_avg_pool_create(3, 2, 0, 0, &cases[6].m));
    CHECK_OK(rt_adaptive_avg_pool_create(2, 1, &cases[7].m));
    CHECK_OK(rt_flatten_create(&cases[8].m));
    CHECK_OK(rt_batchnorm_create(&ctx, 3, 3, false, &cases[9].m));
    CHECK_OK(rt_dropout_create(0.5f, &cases[10].m));
    rt_module_train(cases[10].m, false); /* eval: dropout is the identity */
    for (int i = 0; i < 11; i++) {
        rt_module *m = cases[i].m;
        rt_tensor *x = cases[i].x, *y = NULL, *ref = NULL;
        CHECK(m && strcmp(m->cls->type, cases[i].type) == 0);
        CHECK_OK(rt_module_forward(m, x, &y));
        rt_tensor *w = rt_module_tensor(m, "weight"), *b = rt_module_tensor(m, "bias");
        rt_conv_opts co = {.stride = {2, 2}, .padding = {1, 1}, .dilation = {1, 1}, .groups = 1};
        rt_conv_opts co3 = {.stride = {1, 1, 1}, .padding = {1, 1, 1}, .dilation = {1, 1, 1}, .groups = 1};
        rt_pool_opts mp = {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}}, ap = {.kernel = {2, 2, 2}};
        int64_t nbt = 0;
        rt_tensor *rm = rt_tensor_zeros(1, &s3[1], RT_F32, RT_DEVICE_CPU, RT_MEM_PARAM), *rv = NULL;
        switch (i) {
        case 0: CHECK_OK(rt_conv(x, w, b, &co, &ref)); break;
        case 1: CHECK_OK(rt_conv(x, w, NULL, &co3, &ref)); break;
        case 2: CHECK_OK(rt_linear(x, w, b, &ref)); break;
        case 3: CHECK_OK(rt_relu(x, &ref)); break;
        case 4: CHECK_OK(rt_leaky_relu(x, 0.2f, &ref)); break;
        case 5: CHECK_OK(rt_max_pool(x, &mp, &ref)); break;
        case 6: CHECK_OK(rt_avg_pool(x, &ap, &ref)); break;
        case 7: CHECK_OK(rt_adaptive_avg_pool_1(x, &ref)); break;
        case 8: CHECK_OK(rt_flatten(x, &ref)); break;
        case 9:
            rv = rt_tensor_zeros(1, &s3[1], RT_F32, RT_DEVICE_CPU, RT_MEM_PARAM);
            rt_tensor_fill(rv, 1.0f);
            CHECK_OK(rt_batch_norm(x, w, b, rm, rv, &nbt, true, 0.1f, 1e-5f, &ref));
            CHECK(max_abs_diff(rt_module_tensor(m, "running_mean"), rm) == 0.0);
            CHECK(max_abs_diff(rt_module_tensor(m, "running_var"), rv) == 0.0);
            break;
        case 10: ref = rt_tensor_retain(x); break;
        }
        CHECK(ref != NULL && rt_tensor_same_shape(y, ref));
        CHECK(max_abs_diff(y, ref) == 0.0);
        printf("  %-18s matches its op\n", cases[i].type);
        rt_tensor_release(rm);
        rt_tensor_release(rv);
        rt_tensor_release(y);
        rt_tensor_release(ref);
        rt_module_destroy(m);
    }
    rt_module *bad = NULL;
    CHECK_EQ_INT(rt_conv_create(&ctx, 2, 3, 4, 3, 1, 1, 2, false, RT_INIT_DEFAULT, &bad), RT_ERR_INVALID_ARG);
    CHECK_EQ_INT(rt_dropout_create(1.0f, &bad), RT_ERR_INVALID_ARG);
    CHECK_EQ_INT(rt_adaptive_avg_pool_create(2, 2, &bad), RT_ERR_INVALID_ARG);
    CHECK_EQ_INT(rt_leaky_relu_create(-1.0f, &bad), RT_ERR_INVALID_ARG);
    rt_tensor_release(x2);
    rt_tensor_release(x3);
    rt_tensor_release(xl);
}

/* A ReversibleSequence of Conv3d → BatchNorm3d → ReLU couplings (the
 * RevTorch-style construction the modules make expressible) gives the same
 * gradients reversibly and with plain backpropagation. */
static rt_status fg3d(rt_init_ctx *ctx, rt_module **out) {
    RT_TRY(rt_sequential_create(out));
    RT_ADD_CHILD(*out, "0", rt_conv_create(ctx, 3, 2, 2, 3, 1, 1, 1, false, RT_INIT_DEFAULT, &m));
    RT_ADD_CHILD(*out, "1", rt_batchnorm_create(ctx, 3, 2, false, &m));
    RT_ADD_CHILD(*out, "2", rt_relu_create(&m));
    return RT_OK;
}

static void test_reversible_sequence_of_3d_blocks(void) {
    rt_tensor *plain[64] = {0};
    double worst = 0.0;
    int np = 0;
    for (int rev = 0; rev < 2; rev++) {
        rt_init_ctx ctx = rt_init_ctx_make(RT_DEVICE_CPU, 9);
        rt_module *seq = NULL;
        CHECK_OK(rt_rev_sequence_create(&seq));
        for (int i = 0; i < 3; i++) {
            rt_module *f = NULL, *g = NULL, *b = NULL;
            CHECK_OK(fg3d(&ctx, &f));
            CHECK_OK(fg3d(&ctx, &g));
            CHECK_OK(rt_rev_block_create(f, g, RT_COUPLING_ADDITIVE, &b));
            CHECK_OK(rt_module_append(seq, b));
        }
        rt_module_set_reversible(seq, rev == 1);
        int64_t shape[5] = {2, 4, 4, 4, 4};
        rt_tensor *x = input(5, shape, 4), *y = NULL, *loss = NULL;
        CHECK_OK(rt_module_forward(seq, x, &y));
        CHECK_OK(rt_mse_loss(y, x, &loss));
        CHECK_OK(rt_backward(loss, NULL, false));
        rt_state_dict *sd = NULL;
        CHECK_OK(rt_module_state_dict(seq, &sd));
        rt_tensor *params[64];
        np = rt_state_dict_params(sd, params, 64);
        CHECK(np == 18);
        for (int i = 0; i < np; i++) {
            if (rev == 0) {
                plain[i] = rt_tensor_retain(params[i]->grad);
                continue;
            }
            double d, scale;
            CHECK_OK(rt_compare(params[i]->grad, plain[i], &d, &scale));
            worst = fmax(worst, d / fmax(scale, 1e-12));
            rt_tensor_release(plain[i]);
        }
        rt_tensor_release(x);
        rt_tensor_release(y);
        rt_tensor_release(loss);
        rt_state_dict_destroy(sd);
        rt_module_destroy(seq);
    }
    printf("  3-D reversible vs plain: worst relative gradient difference %.2e over %d parameters\n", worst, np);
    CHECK(worst <= 1e-4);
}

/* ---- the training step's hooks ---------------------------------------- */

typedef struct hook_log {
    char order[8];
    int n;
    bool skip;
    float scale;
    double grad_seen;
} hook_log;

static float h_scale(void *u) {
    hook_log *l = u;
    l->order[l->n++] = 's';
    return l->scale;
}
static rt_status h_after_backward(void *u, rt_tensor *const *params, int n) {
    hook_log *l = u;
    l->order[l->n++] = 'a';
    l->grad_seen = n > 0 && params[0]->grad ? rt_tensor_f32(params[0]->grad)[0] : NAN;
    return RT_OK;
}
static rt_status h_before_step(void *u, rt_tensor *const *params, int n, bool *skip) {
    hook_log *l = u;
    (void)params;
    (void)n;
    l->order[l->n++] = 'b';
    *skip = l->skip;
    return RT_OK;
}
static rt_status h_after_step(void *u, bool stepped) {
    hook_log *l = u;
    l->order[l->n++] = stepped ? 'S' : 'K';
    return RT_OK;
}

static rt_status h_fail(void *u, rt_tensor *const *params, int n) {
    (void)u;
    (void)params;
    (void)n;
    return rt_error_set(RT_ERR_STATE, "all-reduce failed (test)");
}

/* A Linear(4 → 3) classifier, its state dict, its two parameters and plain
 * SGD with lr 0.5 over them (free all with classifier_free). */
typedef struct classifier {
    rt_module *net;
    rt_state_dict *sd;
    rt_tensor *params[2];
    rt_optimizer *opt;
} classifier;

static void classifier_make(classifier *c) {
    rt_init_ctx ctx = rt_init_ctx_make(RT_DEVICE_CPU, 2);
    *c = (classifier){0};
    CHECK_OK(rt_linear_create(&ctx, 4, 3, true, &c->net));
    CHECK_OK(rt_module_state_dict(c->net, &c->sd));
    CHECK_EQ_INT(rt_state_dict_params(c->sd, c->params, 2), 2);
    c->opt = rt_sgd_create(c->params, 2, &(rt_sgd_opts){.lr = 0.5});
    CHECK(c->opt != NULL);
}

static void classifier_free(classifier *c) {
    rt_optimizer_destroy(c->opt);
    rt_state_dict_destroy(c->sd);
    rt_module_destroy(c->net);
}

/* One Linear(4 → 3) classifier; the hooks run in order, a skipped step
 * leaves parameters and optimizer untouched, and the loss scale multiplies
 * the gradients the hooks see (a loss scaler's contract). */
static void test_step_hooks(void) {
    classifier c;
    classifier_make(&c);
    rt_module *net = c.net;
    rt_tensor **params = c.params;
    rt_optimizer *opt = c.opt;
    int64_t xs[2] = {6, 4}, n = 6;
    rt_tensor *x = input(2, xs, 8), *y = rt_tensor_create(1, &n, RT_I32, RT_DEVICE_CPU, RT_MEM_DATA);
    for (int i = 0; i < 6; i++) ((int32_t *)rt_tensor_data(y))[i] = i % 3;
    hook_log l = {.scale = 1.0f};
    rt_train_config cfg = {.accum_steps = 2,
                           .hooks = {&l, h_scale, h_after_backward, h_before_step, h_after_step}};
    rt_train_result r;
    float w0 = rt_tensor_f32(params[0])[0];

    /* skipped: nothing moves, the step count stays */
    l.skip = true;
    CHECK_OK(rt_train_step(net, opt, &cfg, x, y, &r));
    CHECK(strncmp(l.order, "sabK", 4) == 0 && l.n == 4);
    CHECK(!r.stepped && rt_tensor_f32(params[0])[0] == w0 && rt_optimizer_step_count(opt) == 0);
    double g1 = l.grad_seen;

    /* scale 8: the hooks see 8x the gradient, the reported loss is unscaled */
    double loss1 = r.loss;
    l = (hook_log){.scale = 8.0f, .skip = true};
    CHECK_OK(rt_train_step(net, opt, &cfg, x, y, &r));
    printf("  gradient seen by after_backward: %.6g at scale 1, %.6g at scale 8\n", g1, l.grad_seen);
    CHECK(fabs(l.grad_seen - 8.0 * g1) <= 1e-6 * fabs(8.0 * g1) + 1e-12);
    CHECK(r.loss == loss1);

    /* applied: the parameter moves by lr * gradient (plain SGD) */
    l = (hook_log){.scale = 1.0f};
    CHECK_OK(rt_train_step(net, opt, &cfg, x, y, &r));
    CHECK(strcmp(l.order, "sabS") == 0);
    CHECK(r.stepped && rt_optimizer_step_count(opt) == 1);
    CHECK(fabs(rt_tensor_f32(params[0])[0] - (w0 - 0.5 * g1)) <= 1e-6);

    /* a hook's error stops the step before the optimizer runs */
    cfg.hooks.after_backward = h_fail;
    float w1 = rt_tensor_f32(params[0])[0];
    CHECK_EQ_INT(rt_train_step(net, opt, &cfg, x, y, &r), RT_ERR_STATE);
    CHECK(rt_tensor_f32(params[0])[0] == w1 && rt_optimizer_step_count(opt) == 1);
    rt_tensor_release(x);
    rt_tensor_release(y);
    classifier_free(&c);
}

/* A NaN loss is an error before any update. */
static rt_status nan_loss(rt_tensor *out, rt_tensor *target, void *user, rt_tensor **loss) {
    (void)target;
    (void)user;
    rt_tensor *s = NULL;
    RT_TRY(rt_mean(out, &s));
    rt_status st = rt_mul_scalar(s, NAN, loss);
    rt_tensor_release(s);
    return st;
}

static void test_step_refuses_nan_loss(void) {
    classifier c;
    classifier_make(&c);
    rt_module *net = c.net;
    rt_tensor **params = c.params;
    rt_optimizer *opt = c.opt;
    int64_t xs[2] = {2, 4}, n = 2;
    rt_tensor *x = input(2, xs, 8), *y = rt_tensor_zeros(1, &n, RT_I32, RT_DEVICE_CPU, RT_MEM_DATA);
    rt_train_config cfg = {.accum_steps = 1, .loss = nan_loss};
    rt_train_result r;
    float w0 = rt_tensor_f32(params[0])[0];
    CHECK_EQ_INT(rt_train_step(net, opt, &cfg, x, y, &r), RT_ERR_NONFINITE);
    CHECK(strstr(rt_error_last(), "loss") != NULL);
    CHECK(rt_tensor_f32(params[0])[0] == w0 && rt_optimizer_step_count(opt) == 0);
    rt_tensor_release(x);
    rt_tensor_release(y);
    classifier_free(&c);
}

/* rt_state_dict_check_values: a NaN weight is RT_ERR_NONFINITE, a negative
 * running_var RT_ERR_FORMAT naming its index and value (the first), clean
 * values and meta tensors (no values) pass. */
static void test_state_dict_check_values(void) {
    int64_t n = 4;
    for (int dev = 0; dev < 2; dev++) {
        rt_device d = dev ? RT_DEVICE_META : RT_DEVICE_CPU;
        rt_state_dict *sd = rt_state_dict_create();
        rt_tensor *w = rt_tensor_zeros(1, &n, RT_F32, d, RT_MEM_PARAM);
        rt_tensor *rv = rt_tensor_zeros(1, &n, RT_F32, d, RT_MEM_PARAM);
        CHECK(sd && w && rv);
        CHECK_OK(rt_state_dict_push(sd, "bn", (rt_state_entry){.name = "weight", .kind = RT_ENTRY_PARAM, .tensor = w}));
        CHECK_OK(rt_state_dict_push(sd, "bn", (rt_state_entry){.name = "running_var", .kind = RT_ENTRY_BUFFER,
                                                              .tensor = rv}));
        CHECK_OK(rt_state_dict_check_values(sd));
        if (d == RT_DEVICE_CPU) {
            rt_tensor_f32(rv)[2] = -0.5f;
            rt_tensor_f32(rv)[3] = -1.0f;
            CHECK(rt_state_dict_check_values(sd) == RT_ERR_FORMAT);
            CHECK(strstr(rt_error_last(), "-0.5 at index 2") != NULL);
            rt_tensor_f32(w)[1] = NAN;
            CHECK(rt_state_dict_check_values(sd) == RT_ERR_NONFINITE);
            CHECK(strstr(rt_error_last(), "'bn.weight'") != NULL);
        }
        rt_tensor_release(w);
        rt_tensor_release(rv);
        rt_state_dict_destroy(sd);
    }
}

RT_TEST_MAIN({"state_dict_names_follow_the_tree", test_state_dict_names_follow_the_tree},
             {"visit_and_train_mode", test_visit_and_train_mode},
             {"leaf_modules_match_the_ops", test_leaf_modules_match_the_ops},
             {"reversible_sequence_of_3d_blocks", test_reversible_sequence_of_3d_blocks},
             {"step_hooks", test_step_hooks}, {"step_refuses_nan_loss", test_step_refuses_nan_loss},
             {"state_dict_check_values", test_state_dict_check_values})
