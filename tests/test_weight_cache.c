/* The convolution weight cache (kernels/conv.h "Weight cache"): a weight
 * parameter is reordered into a primitive's format once per version of its
 * storage, reused while the version is unchanged, refreshed after anything
 * that writes the weight (rt_tensor_bump_version, rt_tensor_copy, an
 * optimizer step, loading weights), gives bit-identical results and
 * gradients to the uncached path, and the meta backend books its copies
 * exactly as the real run allocates them. The cache is off by default
 * (kernels/conv.h); each test turns it on, as --weight-cache on does. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "autograd/engine.h"
#include "backend/backend.h"
#include "io/weights.h"
#include "kernels/cache.h"
#include "nn/modules.h"
#include "nn/state_dict.h"
#include "ops/ops.h"
#include "ops/ops3d.h"
#include "optim/optimizer.h"
#include "rt_test.h"
#include "test_util.h"

static int n_derived(const rt_tensor *t) {
    int n = 0;
    for (const rt_storage_derived *d = t->storage->derived; d; d = d->next) n++;
    return n;
}

/* Off by default: a convolution of a parameter keeps no copy. */
static void test_off_by_default(void) {
    CHECK(!rt_conv_weight_cache_enabled());
    rt_tensor *x = tu_randn_seeded(4, (const int64_t[]){1, 16, 6, 6}, RT_DEVICE_CPU, RT_MEM_DATA, 1);
    rt_tensor *w = tu_randn_seeded(4, (const int64_t[]){32, 16, 3, 3}, RT_DEVICE_CPU, RT_MEM_PARAM, 2);
    rt_tensor *y = NULL;
    rt_status st = rt_conv(x, w, NULL, NULL, &y);
    int n = w ? n_derived(w) : -1;
    rt_tensor_release(x);
    rt_tensor_release(w);
    rt_tensor_release(y);
    CHECK_OK(st);
    CHECK_EQ_INT(n, 0);
}

/* 16 -> 32 channels, 3x3, plain input: oneDNN computes with blocked
 * weights, so every uncached call reorders them. */
static const int64_t k_x[4] = {2, 16, 10, 10}, k_w[4] = {32, 16, 3, 3}, k_b[1] = {32};
static const rt_conv_opts k_opts = {.padding = {1, 1}};

static void test_reused_while_version_unchanged(void) {
    rt_conv_weight_cache_set(true); /* off by default */
    rt_tensor *x = tu_randn_seeded(4, k_x, RT_DEVICE_CPU, RT_MEM_DATA, 1);
    rt_tensor *w = tu_randn_seeded(4, k_w, RT_DEVICE_CPU, RT_MEM_PARAM, 2);
    rt_tensor *b = tu_randn_seeded(1, k_b, RT_DEVICE_CPU, RT_MEM_PARAM, 3);
    rt_tensor *y0 = NULL, *y1 = NULL, *y2 = NULL, *y3 = NULL, *yr = NULL;
    CHECK(x && w && b);
    int64_t r0 = rt_kernels_weight_reorders();
    CHECK_OK(rt_conv(x, w, b, &k_opts, &y0));
    int64_t r1 = rt_kernels_weight_reorders();
    CHECK_EQ_INT(r1 - r0, 1); /* made once */
    CHECK_EQ_INT(n_derived(w), 1);
    CHECK_OK(rt_conv(x, w, b, &k_opts, &y1));
    CHECK_EQ_INT(rt_kernels_weight_reorders(), r1); /* reused: no reorder */
    CHECK(tu_same_bytes(y0, y1));

    /* a raw write announced by rt_tensor_bump_version: the copy is dropped
     * and remade, and the result is the new weight's */
    rt_tensor_f32(w)[5] += 0.5f;
    uint64_t v = rt_tensor_version(w);
    rt_tensor_bump_version(w);
    CHECK_EQ_INT(rt_tensor_version(w), v + 1);
    CHECK_EQ_INT(n_derived(w), 0);
    CHECK_OK(rt_conv(x, w, b, &k_opts, &y2));
    CHECK_EQ_INT(rt_kernels_weight_reorders() - r1, 1);
    CHECK(!tu_same_bytes(y1, y2));
    CHECK(rt_conv_weight_cache_set(false)); /* the uncached reference; it was on */
    int64_t r2 = rt_kernels_weight_reorders();
    CHECK_OK(rt_conv(x, w, b, &k_opts, &yr));
    CHECK_OK(rt_conv(x, w, b, &k_opts, &y3));
    CHECK_EQ_INT(rt_kernels_weight_reorders() - r2, 2); /* off: every call reorders */
    rt_conv_weight_cache_set(true);
    CHECK(tu_same_bytes(y2, yr));
    CHECK(tu_same_bytes(y3, yr));

    /* rt_tensor_copy into the weight bumps the version too */
    rt_tensor *w2 = tu_randn_seeded(4, k_w, RT_DEVICE_CPU, RT_MEM_DATA, 9);
    CHECK_OK(rt_tensor_copy(w, w2));
    CHECK_EQ_INT(n_derived(w), 0);
    rt_tensor_release(y3);
    y3 = NULL;
    CHECK_OK(rt_conv(x, w, b, &k_opts, &y3));
    rt_tensor_release(yr);
    yr = NULL;
    rt_conv_weight_cache_set(false);
    CHECK_OK(rt_conv(x, w2, b, &k_opts, &yr)); /* w2 is DATA: never cached */
    rt_conv_weight_cache_set(true);
    CHECK(tu_same_bytes(y3, yr));
    CHECK_EQ_INT(n_derived(w2), 0);

    rt_tensor *ts[] = {x, w, b, y0, y1, y2, y3, yr, w2};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) rt_tensor_release(ts[i]);
}

/* Forward, backward twice (the second with the copies made by the first):
 * dx, dw, db and y bit-identical to the uncached path, 2-D and 3-D. */
static void grads_case(int nd, bool cached, rt_tensor *out[4]) {
    const int64_t x2[4] = {2, 16, 9, 9}, w2[4] = {32, 16, 3, 3}, x3[5] = {1, 8, 6, 6, 6}, w3[5] = {16, 8, 3, 3, 3};
    rt_conv_weight_cache_set(cached);
    rt_tensor *x = tu_randn_seeded(nd, nd == 4 ? x2 : x3, RT_DEVICE_CPU, RT_MEM_DATA, 4);
    rt_tensor *w = tu_randn_seeded(nd, nd == 4 ? w2 : w3, RT_DEVICE_CPU, RT_MEM_PARAM, 5);
    int64_t oc = w->shape[0];
    rt_tensor *b = tu_randn_seeded(1, &oc, RT_DEVICE_CPU, RT_MEM_PARAM, 6);
    rt_tensor_set_requires_grad(x, true);
    rt_tensor_set_requires_grad(w, true);
    rt_tensor_set_requires_grad(b, true);
    rt_conv_opts o = {.padding = {1, 1, 1}, .stride = {2, 1, 1}};
    for (int round = 0; round < 2; round++) {
        rt_tensor *y = NULL, *l = NULL;
        rt_tensor_zero_grad(x);
        rt_tensor_zero_grad(w);
        rt_tensor_zero_grad(b);
        if (rt_conv(x, w, b, &o, &y) != RT_OK || rt_sum(y, &l) != RT_OK || rt_backward(l, NULL, false) != RT_OK) {
            fprintf(stderr, "grads_case: %s\n", rt_error_last());
            rt_tensor_release(y);
            rt_tensor_release(l);
            break;
        }
        if (round == 1) {
            out[0] = rt_tensor_retain(y);
            out[1] = rt_tensor_retain(x->grad);
            out[2] = rt_tensor_retain(w->grad);
            out[3] = rt_tensor_retain(b->grad);
        }
        rt_tensor_release(y);
        rt_tensor_release(l);
    }
    rt_tensor_release(x);
    rt_tensor_release(w);
    rt_tensor_release(b);
    rt_conv_weight_cache_set(true);
}

static void test_gradients_match_uncached(void) {
    rt_conv_weight_cache_set(true); /* off by default */
    for (int nd = 4; nd <= 5; nd++) {
        rt_tensor *a[4] = {0}, *u[4] = {0};
        int64_t r0 = rt_kernels_weight_reorders();
        grads_case(nd, true, a);
        int64_t cached = rt_kernels_weight_reorders() - r0;
        grads_case(nd, false, u);
        int64_t uncached = rt_kernels_weight_reorders() - r0 - cached;
        printf("  %d-D, 2 forward + 2 backward-data calls: weight reorders cached %lld, uncached %lld\n", nd - 2,
               (long long)cached, (long long)uncached);
        for (int i = 0; i < 4; i++) CHECK(tu_same_bytes(a[i], u[i]));
        /* each pass whose primitive wants another format than OIHW (the
         * forward always here; backward-data too unless its kernel reads
         * OIHW, as some do under AVX2) reorders once per call uncached,
         * once per version cached */
        CHECK(cached >= 1 && cached <= 2);
        CHECK_EQ_INT(uncached, 2 * cached);
        for (int i = 0; i < 4; i++) {
            rt_tensor_release(a[i]);
            rt_tensor_release(u[i]);
        }
    }
}

/* A Conv2d module through SGD steps: the step bumps the weight's version,
 * which drops the copies; the next forward remakes them and computes
 * with the new values (bit-identical to the uncached forward). Loading
 * weights from a file does the same. */
static void test_refreshed_after_step_and_load(void) {
    rt_conv_weight_cache_set(true); /* off by default */
    rt_init_ctx ctx = rt_init_ctx_make(RT_DEVICE_CPU, 7);
    rt_module *conv = NULL;
    rt_state_dict *sd = NULL;
    CHECK_OK(rt_conv_create(&ctx, 2, 16, 32, 3, 1, 1, 1, true, RT_INIT_DEFAULT, &conv));
    CHECK_OK(rt_module_state_dict(conv, &sd));
    rt_tensor *params[2];
    CHECK_EQ_INT(rt_state_dict_params(sd, params, 2), 2);
    rt_tensor *w = params[0]->ndim == 4 ? params[0] : params[1];
    rt_sgd_opts so = rt_sgd_default_opts(0.1);
    rt_optimizer *opt = rt_sgd_create(params, 2, &so);
    CHECK(opt != NULL);
    rt_tensor *x = tu_randn_seeded(4, k_x, RT_DEVICE_CPU, RT_MEM_DATA, 8);
    char path[64];
    snprintf(path, sizeof path, "/tmp/rt_test_weight_cache_%d.safetensors", (int)getpid());
    CHECK_OK(rt_weights_save(sd, NULL, 0, NULL, 0, path));
    for (int step = 0; step < 3; step++) {
        rt_tensor *y = NULL, *l = NULL, *yr = NULL;
        rt_optimizer_zero_grad(opt);
        int64_t r0 = rt_kernels_weight_reorders();
        CHECK_OK(rt_module_forward(conv, x, &y));
        CHECK_OK(rt_sum(y, &l));
        CHECK_OK(rt_backward(l, NULL, false));
        CHECK(n_derived(w) >= 1);
        CHECK(rt_kernels_weight_reorders() - r0 >= 1);
        /* the uncached forward of the same weights agrees bit for bit */
        rt_conv_weight_cache_set(false);
        bool gm = rt_grad_set_enabled(false);
        CHECK_OK(rt_module_forward(conv, x, &yr));
        rt_grad_set_enabled(gm);
        rt_conv_weight_cache_set(true);
        CHECK(tu_same_bytes(y, yr));
        uint64_t v = rt_tensor_version(w);
        CHECK_OK(rt_optimizer_step(opt));
        CHECK_EQ_INT(rt_tensor_version(w), v + 1);
        CHECK_EQ_INT(n_derived(w), 0);
        rt_tensor_release(y);
        rt_tensor_release(l);
        rt_tensor_release(yr);
    }
    /* a forward at the trained weights, then the saved (initial) weights
     * loaded: the forward after the load is the initial weights' */
    rt_tensor *y1 = NULL, *y2 = NULL, *yr = NULL;
    bool gm = rt_grad_set_enabled(false);
    CHECK_OK(rt_module_forward(conv, x, &y1));
    CHECK(n_derived(w) == 1);
    CHECK_OK(rt_weights_load(sd, NULL, 0, path));
    CHECK_EQ_INT(n_derived(w), 0);
    CHECK_OK(rt_module_forward(conv, x, &y2));
    rt_conv_weight_cache_set(false);
    CHECK_OK(rt_module_forward(conv, x, &yr));
    rt_conv_weight_cache_set(true);
    rt_grad_set_enabled(gm);
    CHECK(!tu_same_bytes(y1, y2));
    CHECK(tu_same_bytes(y2, yr));
    remove(path);
    rt_tensor_release(y1);
    rt_tensor_release(y2);
    rt_tensor_release(yr);
    rt_tensor_release(x);
    rt_optimizer_destroy(opt);
    rt_state_dict_destroy(sd);
    rt_module_destroy(conv);
}

/* The same calls on meta and on cpu tensors: forward twice, backward,
 * a version bump, forward again (2-D conv and 3-D transposed conv). The
 * tracker's TEMP live bytes, TEMP peak and allocation count move the same
 * way on both at every point, and the cached bytes are what the plan says. */
typedef struct wc_trace {
    int64_t live[6], peak[6], n_alloc[6];
} wc_trace;

static void wc_mark(wc_trace *t, int i, const rt_memstats *base) {
    rt_memstats s;
    rt_memstats_get(&s);
    t->live[i] = s.live[RT_MEM_TEMP] - base->live[RT_MEM_TEMP];
    t->peak[i] = s.peak[RT_MEM_TEMP] - base->live[RT_MEM_TEMP];
    t->n_alloc[i] = s.n_alloc - base->n_alloc;
}

static rt_status wc_run(rt_device dev, bool transposed, wc_trace *t) {
    const int64_t xs[5] = {2, 16, 6, 6, 6}, ws2[4] = {32, 16, 3, 3}, ws3[5] = {16, 8, 2, 2, 2};
    rt_status st = RT_OK;
    rt_memstats base;
    rt_memstats_reset_peaks();
    rt_memstats_get(&base);
    rt_tensor *x = tu_randn_seeded(transposed ? 5 : 4, transposed ? xs : k_x, dev, RT_MEM_DATA, 1);
    rt_tensor *w = tu_randn_seeded(transposed ? 5 : 4, transposed ? ws3 : ws2, dev, RT_MEM_PARAM, 2);
    rt_tensor *y = NULL, *y2 = NULL, *l = NULL;
    rt_tensor_set_requires_grad(x, true);
    rt_conv_opts o = {.padding = {1, 1}};
    rt_conv_transpose_opts to = {.stride = {2, 2, 2}};
#define WC_FWD(out) (transposed ? rt_conv_transpose(x, w, NULL, &to, out) : rt_conv(x, w, NULL, &o, out))
    if ((st = WC_FWD(&y)) != RT_OK) goto done;
    wc_mark(t, 0, &base);
    if ((st = WC_FWD(&y2)) != RT_OK) goto done;
    wc_mark(t, 1, &base);
    if ((st = rt_sum(y, &l)) != RT_OK || (st = rt_backward(l, NULL, false)) != RT_OK) goto done;
    wc_mark(t, 2, &base);
    rt_tensor_bump_version(w);
    wc_mark(t, 3, &base);
    rt_tensor_release(y2);
    y2 = NULL;
    if ((st = WC_FWD(&y2)) != RT_OK) goto done;
    wc_mark(t, 4, &base);
#undef WC_FWD
done:
    rt_tensor_release(l);
    rt_tensor_release(y);
    rt_tensor_release(y2);
    rt_tensor_release(x);
    rt_tensor_release(w);
    wc_mark(t, 5, &base);
    return st;
}

static void test_meta_books_what_real_allocates(void) {
    rt_conv_weight_cache_set(true); /* off by default */
    for (int tr = 0; tr < 2; tr++) {
        wc_trace real = {0}, meta = {0};
        CHECK_OK(wc_run(RT_DEVICE_META, tr, &meta)); /* meta first: plans create the primitives */
        CHECK_OK(wc_run(RT_DEVICE_CPU, tr, &real));
        printf("  %s: TEMP live after fwd %lld, fwd again %lld, backward %lld, bump %lld, fwd %lld, end %lld; "
               "peak %lld\n",
               tr ? "conv_transpose3d" : "conv2d", (long long)real.live[0], (long long)real.live[1],
               (long long)real.live[2], (long long)real.live[3], (long long)real.live[4], (long long)real.live[5],
               (long long)real.peak[5]);
        for (int i = 0; i < 6; i++) {
            CHECK_EQ_INT(meta.live[i], real.live[i]);
            CHECK_EQ_INT(meta.peak[i], real.peak[i]);
            CHECK_EQ_INT(meta.n_alloc[i], real.n_alloc[i]);
        }
        CHECK_EQ_INT(real.live[5], 0);
    }
    /* the copy's bytes are the plan's: a second forward of a cached weight
     * books no new copy and reorders nothing */
    rt_conv_shape s = {.nsp = 2, .n = 2, .c_in = 16, .c_out = 32, .groups = 1, .in = {10, 10}, .k = {3, 3},
                       .stride = {1, 1}, .pad = {1, 1}, .dil = {1, 1}};
    rt_tensor *w = tu_randn_seeded(4, k_w, RT_DEVICE_META, RT_MEM_PARAM, 0);
    rt_kernel_plan p0, p1, pu;
    CHECK_OK(rt_kernel_conv_forward_plan(&s, &pu));
    CHECK_OK(rt_kernel_conv_forward_plan_cached(&s, w->storage, &p0));
    CHECK(p0.weights_cached == 1 && p0.weights_cache_bytes > 0);
    CHECK_EQ_INT(p0.weights_reorder_bytes, 0);
    CHECK(pu.weights_reorder_bytes >= p0.weights_cache_bytes);
    CHECK_EQ_INT(pu.temp[0].bytes - p0.temp[0].bytes, pu.weights_reorder_bytes);
    const rt_backend *meta = rt_backend_get(RT_DEVICE_META);
    CHECK_OK(meta->conv_forward(&s, NULL, NULL, w->storage, NULL, NULL));
    CHECK(n_derived(w) == 1 && w->storage->derived->nbytes == p0.weights_cache_bytes);
    CHECK_OK(rt_kernel_conv_forward_plan_cached(&s, w->storage, &p1));
    CHECK(p1.weights_cached == 1 && p1.weights_cache_bytes == 0);
    rt_tensor_release(w);
}

RT_TEST_MAIN({"off_by_default", test_off_by_default},
             {"reused_while_version_unchanged", test_reused_while_version_unchanged},
             {"gradients_match_uncached", test_gradients_match_uncached},
             {"refreshed_after_step_and_load", test_refreshed_after_step_and_load},
             {"meta_books_what_real_allocates", test_meta_books_what_real_allocates})
