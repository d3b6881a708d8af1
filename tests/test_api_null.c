/* Every public entry point against NULL and impossible arguments.
 *
 * The contract (core/status.h, and each header's comment): a function that
 * returns an rt_status answers RT_ERR_INVALID_ARG (or RT_ERR_SHAPE /
 * RT_ERR_DTYPE for impossible sizes and types) with a message naming the
 * function or the argument; one returning a pointer returns NULL with the
 * message set (rt_error_last_status() gives the code); destroy/release
 * functions accept NULL as free does; void functions and value queries
 * tolerate NULL (a no-op, or 0 / false / NaN / NULL as their header says).
 *
 * Layout: one check function per entry point (CHECK_FN(rt_x)), listed in
 * per-header tables (E(rt_x)); each group test runs one part of the tables
 * and prints how many entry points and calls it checked. Each check passes
 * NULL for every pointer argument, one at a time, the others valid, plus
 * impossible sizes where the function takes any. The test `coverage` scans
 * the headers in scope (every src/ header except memory/reversible*.h, which
 * has its own owner, and the internal kernels/dnnl_common.h and
 * ops/op_util.h) and fails when a declared function has no entry here, so a
 * new public function must come with its NULL checks. Run under the
 * sanitizer build, nothing may crash or report. */
#include <dirent.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "autograd/engine.h"
#include "autograd/node.h"
#include "autograd/recompute.h"
#include "core/dtype.h"
#include "core/mem.h"
#include "core/rng.h"
#include "core/status.h"
#include "core/tensor.h"
#include "backend/backend.h"
#include "data/dataset.h"
#include "data/idx.h"
#include "data/loader.h"
#include "data/mnist.h"
#include "data/moving_fashion.h"
#include "data/nifti.h"
#include "data/patches.h"
#include "data/superres.h"
#include "dist/dist.h"
#include "dist/sync_bn.h"
#include "io/safetensors.h"
#include "io/weights.h"
#include "kernels/blas.h"
#include "kernels/cache.h"
#include "kernels/chanwise.h"
#include "kernels/conv.h"
#include "kernels/copy.h"
#include "kernels/coupling.h"
#include "kernels/cpu.h"
#include "kernels/deconv.h"
#include "kernels/dropout.h"
#include "kernels/eltwise.h"
#include "kernels/group_norm.h"
#include "kernels/layout.h"
#include "kernels/loss.h"
#include "kernels/norm.h"
#include "kernels/plan.h"
#include "kernels/norm_loops.h"
#include "kernels/optim.h"
#include "kernels/pixel_shuffle.h"
#include "kernels/pool.h"
#include "kernels/reference.h"
#include "kernels/seg_loss.h"
#include "kernels/softmax.h"
#include "kernels/threads.h"
#include "kernels/upsample.h"
#include "kernels/vec.h"
#include "memory/budget.h"
#include "memory/checkpoint.h"
#include "memory/plan_cache.h"
#include "memory/planner.h"
#include "memory/precision.h"
#include "memory/predict.h"
#include "memory/reversible.h"
#include "memory/time_chain.h"
#include "models/convlstm.h"
#include "models/edsr.h"
#include "models/model.h"
#include "models/resblock.h"
#include "models/resnet.h"
#include "models/revnet.h"
#include "models/unet.h"
#include "nn/module.h"
#include "nn/modules.h"
#include "nn/modules3d.h"
#include "nn/state_dict.h"
#include "ops/batchnorm_relu.h"
#include "ops/coupling.h"
#include "ops/ops.h"
#include "ops/ops3d.h"
#include "optim/optim.h"
#include "rt_test.h"
#include "train/seg_loss.h"
#include "train/seg_metric.h"
#include "train/sr_metric.h"
#include "train/sliding_window.h"
#include "train/scaler.h"
#include "train/seg_loss.h"
#include "train/step.h"

/* ------------------------------------------------------------ the checks */

static const char *g_fn; /* the entry point being checked */
static int g_calls;      /* calls checked so far */
static int g_entries;    /* entry points checked so far */

static void report(int line, const char *expr, const char *what) {
    fprintf(stderr, "%s:%d: [%s] %s: %s (message: \"%s\")\n", __FILE__, line, g_fn, expr, what, rt_error_last());
    rt_test_failed_ = 1;
}

/* The message is non-empty and names the function (with or without its
 * rt_ prefix) or contains `needle` (the argument, or the op's name). */
static int message_names(const char *needle) {
    const char *m = rt_error_last();
    if (!m || !m[0]) return 0;
    if (strstr(m, g_fn) || strstr(m, g_fn + 3)) return 1;
    return needle && needle[0] && strstr(m, needle) != NULL;
}

static void check_status(rt_status got, rt_status want, const char *needle, const char *expr, int line) {
    g_calls++;
    char what[160];
    if (got != want) {
        snprintf(what, sizeof what, "returned %s, expected %s", rt_status_str(got), rt_status_str(want));
        report(line, expr, what);
    } else if (want != RT_OK && !message_names(needle)) {
        snprintf(what, sizeof what, "the message is empty or names neither %s nor '%s'", g_fn,
                 needle ? needle : "");
        report(line, expr, what);
    }
}

static void check_null(const void *got, rt_status want, const char *needle, const char *expr, int line) {
    g_calls++;
    char what[160];
    if (got) {
        report(line, expr, "returned a non-NULL pointer");
    } else if (rt_error_last_status() != want) {
        snprintf(what, sizeof what, "left status %s, expected %s", rt_status_str(rt_error_last_status()),
                 rt_status_str(want));
        report(line, expr, what);
    } else if (!message_names(needle)) {
        snprintf(what, sizeof what, "the message is empty or names neither %s nor '%s'", g_fn,
                 needle ? needle : "");
        report(line, expr, what);
    }
}

/* `call` returns `want` (an rt_status) with a message naming g_fn or needle. */
#define ST(want, needle, call) check_status((rt_error_clear(), (call)), (want), (needle), #call, __LINE__)
/* `call` returns NULL, leaving status `want` and a message naming g_fn or needle. */
#define NUL(want, needle, call) check_null((rt_error_clear(), (const void *)(call)), (want), (needle), #call, __LINE__)
/* `call` (void, or a value ignored) must simply not crash. */
#define TOL(call)                                                                        \
    do {                                                                                 \
        rt_error_clear();                                                                \
        call;                                                                            \
        g_calls++;                                                                       \
    } while (0)
/* A value query's documented answer. */
#define VAL(cond)                                                                        \
    do {                                                                                 \
        g_calls++;                                                                       \
        if (!(cond)) report(__LINE__, #cond, "is false");                                \
    } while (0)

/* A NULL the compiler cannot see (for array parameters and printf formats). */
static void *volatile g_null_;
#define HIDDEN_NULL(type) ((type)g_null_)

/* ------------------------------------------------------------ fixtures */

#define MAX_OWNED 64
static rt_tensor *g_owned[MAX_OWNED];
static int g_n_owned;

/* Keeps t until the current entry point's check ends. */
static rt_tensor *own(rt_tensor *t) {
    if (t && g_n_owned < MAX_OWNED) g_owned[g_n_owned++] = t;
    else if (t) {
        fprintf(stderr, "test_api_null: raise MAX_OWNED\n");
        abort();
    }
    return t;
}

static void release_owned(void) {
    while (g_n_owned) rt_tensor_release(g_owned[--g_n_owned]);
}

/* A new owned f32 cpu tensor with small deterministic values. */
static rt_tensor *tens(int ndim, const int64_t *shape) {
    rt_tensor *t = own(rt_tensor_create(ndim, shape, RT_F32, RT_DEVICE_CPU, RT_MEM_DATA));
    if (!t) {
        fprintf(stderr, "test_api_null: cannot create a fixture tensor: %s\n", rt_error_last());
        abort();
    }
    float *p = rt_tensor_f32(t);
    for (int64_t i = 0; i < rt_tensor_numel(t); i++) p[i] = (float)(i % 7) * 0.25f - 0.5f;
    return t;
}
#define SHAPE(...) ((const int64_t[]){__VA_ARGS__})
#define T(...) tens((int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), SHAPE(__VA_ARGS__))

/* A new owned i32 tensor (n) of class labels i % classes. */
static rt_tensor *labels(int64_t n, int classes) {
    rt_tensor *t = own(rt_tensor_create(1, &n, RT_I32, RT_DEVICE_CPU, RT_MEM_DATA));
    if (!t) abort();
    for (int64_t i = 0; i < n; i++) ((int32_t *)rt_tensor_data(t))[i] = (int32_t)(i % classes);
    return t;
}

/* A new owned f32 leaf (2, 3) that requires grad. */
static rt_tensor *leaf(void) {
    rt_tensor *t = T(2, 3);
    rt_tensor_set_requires_grad(t, true);
    return t;
}

static rt_status dummy_backward(rt_node *self, rt_tensor *const *grad_out, rt_tensor **grad_in) {
    (void)self;
    (void)grad_out;
    (void)grad_in;
    return RT_OK;
}

/* A node over one leaf input (release with rt_node_release). */
static rt_node *make_node(void) {
    rt_tensor *in[1] = {leaf()};
    rt_node *n = NULL;
    if (rt_node_create("api_null", 1, in, 1, dummy_backward, 0, &n) != RT_OK || !n) abort();
    return n;
}

static rt_status visit_nothing(rt_module *m, const char *path, void *user) {
    (void)m;
    (void)path;
    (void)user;
    return RT_OK;
}

static rt_status state_nothing(void *ud, const char *name, rt_tensor *t) {
    (void)ud;
    (void)name;
    (void)t;
    return RT_OK;
}

/* A Linear(3, 2) module on `device` (destroy it). */
static rt_module *linear_module(rt_device device) {
    rt_init_ctx ctx = rt_init_ctx_make(device, 1);
    rt_module *m = NULL;
    if (rt_linear_create(&ctx, 3, 2, true, &m) != RT_OK) abort();
    return m;
}

/* A directory for files the io checks write (removed at the end). */
static char g_dir[64];

static const char *tmp_path(const char *name) {
    static char path[128];
    if (!g_dir[0]) {
        snprintf(g_dir, sizeof g_dir, "/tmp/rt_api_null_XXXXXX");
        if (!mkdtemp(g_dir)) abort();
    }
    snprintf(path, sizeof path, "%s/%s", g_dir, name);
    return path;
}

/* ------------------------------------------------------------ core/status.h */

#define CHECK_FN(f) static void check_##f(void)

CHECK_FN(rt_status_str) { VAL(rt_status_str((rt_status)12345) != NULL); }

CHECK_FN(rt_error_set) {
    /* a NULL format still records the code, with a message saying so */
    ST(RT_ERR_INVALID_ARG, "format", rt_error_set(RT_ERR_INVALID_ARG, HIDDEN_NULL(const char *), 0));
    VAL(rt_error_last_status() == RT_ERR_INVALID_ARG);
}

CHECK_FN(rt_error_last) {
    rt_error_clear();
    VAL(rt_error_last() != NULL && rt_error_last()[0] == '\0');
}

CHECK_FN(rt_error_last_status) {
    rt_error_clear();
    VAL(rt_error_last_status() == RT_OK);
}

CHECK_FN(rt_error_clear) { TOL(rt_error_clear()); }

/* ------------------------------------------------------------ core/dtype.h */

CHECK_FN(rt_dtype_size) { VAL(rt_dtype_size((rt_dtype)99) == 0); }
CHECK_FN(rt_dtype_str) { VAL(strcmp(rt_dtype_str((rt_dtype)99), "?") == 0); }
CHECK_FN(rt_dtype_safetensors_name) { VAL(strcmp(rt_dtype_safetensors_name((rt_dtype)99), "?") == 0); }

CHECK_FN(rt_dtype_from_safetensors_name) {
    rt_dtype dt;
    ST(RT_ERR_INVALID_ARG, "name", rt_dtype_from_safetensors_name(NULL, &dt));
    ST(RT_ERR_INVALID_ARG, "out", rt_dtype_from_safetensors_name("F32", NULL));
    ST(RT_ERR_DTYPE, "dtype", rt_dtype_from_safetensors_name("F99", &dt));
}

CHECK_FN(rt_f32_to_bf16) { VAL(rt_f32_to_bf16(1.0f) == 0x3f80); }
CHECK_FN(rt_bf16_to_f32) { VAL(rt_bf16_to_f32(0x3f80) == 1.0f); }
CHECK_FN(rt_f32_to_f16) { VAL(rt_f32_to_f16(1.0f) == 0x3c00); }
CHECK_FN(rt_f16_to_f32) { VAL(rt_f16_to_f32(0x3c00) == 1.0f); }

CHECK_FN(rt_dtype_convert) {
    float src[4] = {1, 2, 3, 4}, dst[4];
    ST(RT_ERR_INVALID_ARG, "source", rt_dtype_convert(NULL, RT_F32, dst, RT_F32, 4));
    ST(RT_ERR_INVALID_ARG, "destination", rt_dtype_convert(src, RT_F32, NULL, RT_F32, 4));
    ST(RT_OK, NULL, rt_dtype_convert(NULL, RT_F32, NULL, RT_F16, 0)); /* nothing to convert */
    ST(RT_ERR_DTYPE, "dtype", rt_dtype_convert(src, (rt_dtype)99, dst, RT_F32, 4));
    ST(RT_ERR_DTYPE, "dtype", rt_dtype_convert(src, RT_F32, dst, (rt_dtype)-3, 4));
}

/* ------------------------------------------------------------ core/mem.h */

static int64_t live_total(void) {
    rt_memstats s;
    rt_memstats_get(&s);
    return s.live_total;
}

CHECK_FN(rt_mem_category_str) {
    VAL(strcmp(rt_mem_category_str((rt_mem_category)-1), "?") == 0);
    VAL(strcmp(rt_mem_category_str(RT_MEM_NCAT), "?") == 0);
}
CHECK_FN(rt_memstats_get) { TOL(rt_memstats_get(NULL)); }
CHECK_FN(rt_memstats_reset_peaks) { TOL(rt_memstats_reset_peaks()); }

CHECK_FN(rt_mem_set_limit) {
    int64_t prev = rt_mem_get_limit();
    TOL(rt_mem_set_limit(-5)); /* a negative limit means none */
    VAL(rt_mem_get_limit() == 0);
    rt_mem_set_limit(prev);
}

CHECK_FN(rt_mem_get_limit) { VAL(rt_mem_get_limit() >= 0); }

CHECK_FN(rt_mem_set_op) {
    const char *prev = rt_mem_set_op(NULL); /* NULL: no op name */
    VAL(rt_mem_set_op(prev) == NULL);
}

CHECK_FN(rt_mem_set_module) {
    const char *prev = rt_mem_set_module(NULL); /* NULL: outside every module */
    VAL(rt_mem_module() == NULL);
    VAL(rt_mem_set_module(prev) == NULL);
}
CHECK_FN(rt_mem_module) { TOL((void)rt_mem_module()); }
CHECK_FN(rt_mem_intern) { VAL(rt_mem_intern(NULL) == NULL); }
CHECK_FN(rt_mem_trace_enabled) { TOL((void)rt_mem_trace_enabled()); }
CHECK_FN(rt_csv_write_field) {
    TOL(rt_csv_write_field(NULL, "x"));
    TOL(rt_csv_write_field(NULL, NULL));
}

CHECK_FN(rt_mem_move) {
    int64_t before = live_total();
    TOL(rt_mem_move(64, (rt_mem_category)99, RT_MEM_TEMP));
    TOL(rt_mem_move(64, RT_MEM_TEMP, (rt_mem_category)-1));
    VAL(live_total() == before);
}

CHECK_FN(rt_mem_release_cache) { TOL(rt_mem_release_cache()); }

CHECK_FN(rt_mem_set_ceiling) {
    TOL(rt_mem_set_ceiling(-1)); /* <= 0: the automatic ceiling */
    TOL(rt_mem_set_ceiling(0));
}

CHECK_FN(rt_mem_set_cache_limit) {
    TOL(rt_mem_set_cache_limit(-7)); /* negative: the automatic cap */
}

CHECK_FN(rt_mem_alloc) {
    void *p = (void *)&p;
    ST(RT_ERR_INVALID_ARG, "out", rt_mem_alloc(16, RT_MEM_TEMP, NULL));
    ST(RT_ERR_INVALID_ARG, "category", rt_mem_alloc(16, (rt_mem_category)99, &p));
    VAL(p == NULL);
    ST(RT_ERR_INVALID_ARG, "category", rt_mem_alloc(16, (rt_mem_category)-1, &p));
}

CHECK_FN(rt_mem_free) { TOL(rt_mem_free(NULL, 16, RT_MEM_TEMP)); }

CHECK_FN(rt_mem_account) {
    int64_t before = live_total();
    ST(RT_ERR_INVALID_ARG, "category", rt_mem_account(8, (rt_mem_category)99));
    VAL(live_total() == before);
}

CHECK_FN(rt_mem_unaccount) {
    int64_t before = live_total();
    TOL(rt_mem_unaccount(8, (rt_mem_category)99));
    VAL(live_total() == before);
}

CHECK_FN(rt_mem_trace_enable) { TOL(rt_mem_trace_enable(0)); }
CHECK_FN(rt_mem_trace_events) { TOL((void)rt_mem_trace_events(NULL)); }
CHECK_FN(rt_mem_trace_truncate) { TOL(rt_mem_trace_truncate((size_t)-1)); }
CHECK_FN(rt_mem_events_write_csv) { TOL(rt_mem_events_write_csv(NULL, NULL, 0)); }
CHECK_FN(rt_mem_trace_write_csv) { ST(RT_ERR_INVALID_ARG, "path", rt_mem_trace_write_csv(NULL)); }
CHECK_FN(rt_memstats_print) { TOL(rt_memstats_print(NULL)); }

/* ------------------------------------------------------------ core/rng.h */

CHECK_FN(rt_philox4x32_10) {
    uint32_t ctr[4] = {1, 2, 3, 4}, key[2] = {5, 6}, out[4] = {7, 7, 7, 7};
    TOL(rt_philox4x32_10(HIDDEN_NULL(const uint32_t *), key, out));
    TOL(rt_philox4x32_10(ctr, HIDDEN_NULL(const uint32_t *), out));
    VAL(out[0] == 7 && out[3] == 7);
    TOL(rt_philox4x32_10(ctr, key, HIDDEN_NULL(uint32_t *)));
}

CHECK_FN(rt_philox_uniform) {
    float out[4] = {-1, -1, -1, -1};
    TOL(rt_philox_uniform(1, 0, 4, NULL));
    TOL(rt_philox_uniform(1, 0, -3, out));
    VAL(out[0] == -1.0f);
}

CHECK_FN(rt_philox_blocks) {
    VAL(rt_philox_blocks(-8) == 0);
    VAL(rt_philox_blocks(5) == 2);
}

CHECK_FN(rt_generator_uniform) {
    rt_generator g = {1, 0};
    float out[4] = {-1, -1, -1, -1};
    TOL(rt_generator_uniform(NULL, 4, out));
    TOL(rt_generator_uniform(&g, 4, NULL));
    TOL(rt_generator_uniform(&g, -5, out));
    VAL(g.offset == 0 && out[0] == -1.0f);
}

CHECK_FN(rt_generator_normal) {
    rt_generator g = {1, 0};
    float out[4] = {-1, -1, -1, -1};
    TOL(rt_generator_normal(NULL, 4, 0.0f, 1.0f, out));
    TOL(rt_generator_normal(&g, 4, 0.0f, 1.0f, NULL));
    TOL(rt_generator_normal(&g, -1, 0.0f, 1.0f, out)); /* an odd negative n wrote out[-2] */
    VAL(g.offset == 0 && out[0] == -1.0f);
}

CHECK_FN(rt_default_generator) { VAL(rt_default_generator() != NULL); }

CHECK_FN(rt_manual_seed) {
    rt_generator saved = *rt_default_generator();
    TOL(rt_manual_seed(UINT64_MAX));
    VAL(rt_default_generator()->seed == UINT64_MAX && rt_default_generator()->offset == 0);
    *rt_default_generator() = saved;
}

/* ------------------------------------------------------------ core/tensor.h */

CHECK_FN(rt_autograd_meta_release) { TOL(rt_autograd_meta_release(NULL)); }

CHECK_FN(rt_tensor_create) {
    const int64_t s2[2] = {2, 3}, neg[1] = {-1};
    NUL(RT_ERR_INVALID_ARG, "shape", rt_tensor_create(2, NULL, RT_F32, RT_DEVICE_CPU, RT_MEM_TEMP));
    NUL(RT_ERR_SHAPE, "dimensions", rt_tensor_create(6, s2, RT_F32, RT_DEVICE_CPU, RT_MEM_TEMP));
    NUL(RT_ERR_SHAPE, "dimensions", rt_tensor_create(-1, s2, RT_F32, RT_DEVICE_CPU, RT_MEM_TEMP));
    NUL(RT_ERR_SHAPE, "negative", rt_tensor_create(1, neg, RT_F32, RT_DEVICE_CPU, RT_MEM_TEMP));
    NUL(RT_ERR_DTYPE, "dtype", rt_tensor_create(2, s2, (rt_dtype)99, RT_DEVICE_CPU, RT_MEM_TEMP));
    NUL(RT_ERR_INVALID_ARG, "device", rt_tensor_create(2, s2, RT_F32, (rt_device)7, RT_MEM_TEMP));
    NUL(RT_ERR_INVALID_ARG, "category", rt_tensor_create(2, s2, RT_F32, RT_DEVICE_CPU, (rt_mem_category)42));
    VAL(own(rt_tensor_create(0, NULL, RT_F32, RT_DEVICE_CPU, RT_MEM_TEMP)) != NULL); /* a scalar needs no shape */
}

CHECK_FN(rt_tensor_zeros) {
    const int64_t s2[2] = {2, 3};
    NUL(RT_ERR_INVALID_ARG, "shape", rt_tensor_zeros(3, NULL, RT_F32, RT_DEVICE_CPU, RT_MEM_TEMP));
    NUL(RT_ERR_SHAPE, "dimensions", rt_tensor_zeros(-2, s2, RT_F32, RT_DEVICE_CPU, RT_MEM_TEMP));
    NUL(RT_ERR_DTYPE, "dtype", rt_tensor_zeros(2, s2, (rt_dtype)99, RT_DEVICE_META, RT_MEM_TEMP));
}

CHECK_FN(rt_tensor_empty_like) {
    NUL(RT_ERR_INVALID_ARG, "like", rt_tensor_empty_like(NULL, RT_MEM_TEMP));
    NUL(RT_ERR_INVALID_ARG, "category", rt_tensor_empty_like(T(2, 3), (rt_mem_category)42));
}

CHECK_FN(rt_tensor_zeros_like) {
    NUL(RT_ERR_INVALID_ARG, "like", rt_tensor_zeros_like(NULL, RT_MEM_TEMP));
    NUL(RT_ERR_INVALID_ARG, "category", rt_tensor_zeros_like(T(2, 3), (rt_mem_category)-1));
}

CHECK_FN(rt_tensor_from_data) {
    const int64_t s1[1] = {4};
    float data[4] = {0};
    NUL(RT_ERR_INVALID_ARG, "data", rt_tensor_from_data(1, s1, RT_F32, NULL, RT_MEM_DATA));
    NUL(RT_ERR_INVALID_ARG, "shape", rt_tensor_from_data(1, NULL, RT_F32, data, RT_MEM_DATA));
    const int64_t empty[1] = {0};
    VAL(own(rt_tensor_from_data(1, empty, RT_F32, NULL, RT_MEM_DATA)) != NULL); /* no bytes to copy */
}

CHECK_FN(rt_tensor_retain) { VAL(rt_tensor_retain(NULL) == NULL); }
CHECK_FN(rt_tensor_release) { TOL(rt_tensor_release(NULL)); }
CHECK_FN(rt_tensor_detach) { NUL(RT_ERR_INVALID_ARG, "tensor", rt_tensor_detach(NULL)); }

CHECK_FN(rt_tensor_view) {
    rt_tensor *x = T(2, 3);
    const int64_t s6[1] = {6}, s7[1] = {7};
    NUL(RT_ERR_INVALID_ARG, "tensor", rt_tensor_view(NULL, 1, s6));
    NUL(RT_ERR_INVALID_ARG, "shape", rt_tensor_view(x, 2, NULL));
    NUL(RT_ERR_SHAPE, "dimensions", rt_tensor_view(x, 9, s6));
    NUL(RT_ERR_SHAPE, "view", rt_tensor_view(x, 1, s7));
}

CHECK_FN(rt_tensor_to) {
    NUL(RT_ERR_INVALID_ARG, "tensor", rt_tensor_to(NULL, RT_BF16, RT_MEM_TEMP));
    NUL(RT_ERR_DTYPE, "dtype", rt_tensor_to(T(2, 3), (rt_dtype)99, RT_MEM_TEMP));
}

CHECK_FN(rt_tensor_numel) { VAL(rt_tensor_numel(NULL) == 0); }
CHECK_FN(rt_tensor_nbytes) { VAL(rt_tensor_nbytes(NULL) == 0); }
CHECK_FN(rt_tensor_is_meta) { VAL(!rt_tensor_is_meta(NULL)); }
CHECK_FN(rt_tensor_data) { VAL(rt_tensor_data(NULL) == NULL); }
CHECK_FN(rt_tensor_f32) { VAL(rt_tensor_f32(NULL) == NULL); }

CHECK_FN(rt_tensor_same_shape) {
    rt_tensor *x = T(2, 3);
    VAL(!rt_tensor_same_shape(NULL, x));
    VAL(!rt_tensor_same_shape(x, NULL));
    VAL(!rt_tensor_same_shape(NULL, NULL));
}

CHECK_FN(rt_tensor_shape_str) {
    char buf[32];
    VAL(strcmp(rt_tensor_shape_str(NULL, buf, sizeof buf), "(NULL tensor)") == 0);
    VAL(rt_tensor_shape_str(T(2, 3), NULL, 32) == NULL);
    VAL(rt_tensor_shape_str(T(2, 3), buf, 0) == buf);
}

CHECK_FN(rt_tensor_set_requires_grad) {
    ST(RT_ERR_INVALID_ARG, "tensor", rt_tensor_set_requires_grad(NULL, true));
    ST(RT_ERR_DTYPE, "float32", rt_tensor_set_requires_grad(labels(2, 2), true));
}

/* ------------------------------------------------ core/device.h, backend/backend.h */

CHECK_FN(rt_device_memory_get) {
    VAL(rt_device_memory_get((rt_device)77) == NULL);
    VAL(rt_device_memory_get(RT_DEVICE_META) == &rt_device_memory_meta);
}

CHECK_FN(rt_device_name) { VAL(!strcmp(rt_device_name((rt_device)77), "unknown")); }

CHECK_FN(rt_backend_get) {
    VAL(rt_backend_get((rt_device)77) == NULL && rt_error_last_status() == RT_ERR_INVALID_ARG);
    VAL(rt_backend_get(RT_DEVICE_CPU)->memory == &rt_device_memory_cpu);
}

CHECK_FN(rt_backend_of) { VAL(rt_backend_of(NULL) == NULL && strstr(rt_error_last(), "NULL")); }

CHECK_FN(rt_tensor_fill) { ST(RT_ERR_INVALID_ARG, "tensor", rt_tensor_fill(NULL, 1.0f)); }

CHECK_FN(rt_tensor_copy) {
    rt_tensor *x = T(2, 3);
    ST(RT_ERR_INVALID_ARG, "destination", rt_tensor_copy(NULL, x));
    ST(RT_ERR_INVALID_ARG, "source", rt_tensor_copy(x, NULL));
    ST(RT_ERR_SHAPE, "copy", rt_tensor_copy(x, T(5)));
}

CHECK_FN(rt_tensor_zero_grad) { TOL(rt_tensor_zero_grad(NULL)); }
CHECK_FN(rt_storage_mark_saved) { TOL(rt_storage_mark_saved(NULL, 1)); }
CHECK_FN(rt_tensor_bump_version) { TOL(rt_tensor_bump_version(NULL)); }
CHECK_FN(rt_tensor_version) { VAL(rt_tensor_version(NULL) == 0); }
CHECK_FN(rt_storage_derived_find) { VAL(rt_storage_derived_find(NULL, 1) == NULL); }
CHECK_FN(rt_storage_derived_add) {
    rt_storage_derived *d;
    rt_tensor *t = rt_tensor_create(1, (const int64_t[]){4}, RT_F32, RT_DEVICE_META, RT_MEM_PARAM);
    ST(RT_ERR_INVALID_ARG, "storage", rt_storage_derived_add(NULL, 1, 16, &d));
    ST(RT_ERR_INVALID_ARG, "out", rt_storage_derived_add(t->storage, 1, 16, HIDDEN_NULL(rt_storage_derived **)));
    ST(RT_ERR_INVALID_ARG, "nbytes", rt_storage_derived_add(t->storage, 1, 0, &d));
    rt_tensor_release(t);
}
CHECK_FN(rt_storage_derived_drop) { TOL(rt_storage_derived_drop(NULL, 1)); }
CHECK_FN(rt_storage_derived_clear) { TOL(rt_storage_derived_clear(NULL)); }

/* ------------------------------------------------------------ autograd/engine.h */

CHECK_FN(rt_backward) {
    rt_tensor *l = leaf();
    ST(RT_ERR_INVALID_ARG, "root", rt_backward(NULL, NULL, false));
    ST(RT_ERR_NO_GRAD, "backward", rt_backward(T(1), NULL, false));
    ST(RT_ERR_SHAPE, "backward", rt_backward(l, NULL, false));  /* non-scalar root, no gradient */
    ST(RT_ERR_SHAPE, "backward", rt_backward(l, T(5), false)); /* gradient of another shape */
}

CHECK_FN(rt_autograd_set_grad_hook) {
    rt_grad_accumulated_fn fn = NULL;
    void *user = NULL;
    TOL(rt_autograd_set_grad_hook(NULL, NULL, NULL, NULL));
    TOL(rt_autograd_set_grad_hook(NULL, NULL, &fn, &user));
    VAL(fn == NULL && user == NULL);
}

CHECK_FN(rt_accumulate_grad) {
    rt_tensor *l = leaf();
    ST(RT_ERR_INVALID_ARG, "leaf", rt_accumulate_grad(NULL, T(2, 3)));
    ST(RT_ERR_INVALID_ARG, "gradient", rt_accumulate_grad(l, NULL));
    ST(RT_ERR_SHAPE, "gradient", rt_accumulate_grad(l, T(7)));
    ST(RT_ERR_DTYPE, "float32", rt_accumulate_grad(l, labels(6, 2)));
    VAL(l->grad == NULL);
}

/* ------------------------------------------------------------ autograd/node.h */

CHECK_FN(rt_node_create) {
    rt_tensor *in[1] = {leaf()};
    rt_node *n = NULL;
    ST(RT_ERR_INVALID_ARG, "out", rt_node_create("t", 1, in, 1, dummy_backward, 0, NULL));
    ST(RT_ERR_INVALID_ARG, "name", rt_node_create(NULL, 1, in, 1, dummy_backward, 0, &n));
    ST(RT_ERR_INVALID_ARG, "inputs", rt_node_create("t", 1, NULL, 1, dummy_backward, 0, &n));
    ST(RT_ERR_INVALID_ARG, "backward", rt_node_create("t", 1, in, 1, NULL, 0, &n));
    ST(RT_ERR_INVALID_ARG, "n_outputs", rt_node_create("t", 1, in, 0, dummy_backward, 0, &n));
    ST(RT_ERR_INVALID_ARG, "n_inputs", rt_node_create("t", -1, in, 1, dummy_backward, 0, &n));
    VAL(n == NULL);
}

CHECK_FN(rt_node_retain) { VAL(rt_node_retain(NULL) == NULL); }
CHECK_FN(rt_node_release) { TOL(rt_node_release(NULL)); }

CHECK_FN(rt_node_set_output) {
    rt_node *n = make_node();
    rt_tensor *y = T(2, 3);
    TOL(rt_node_set_output(NULL, y, 0));
    TOL(rt_node_set_output(n, NULL, 0));
    TOL(rt_node_set_output(n, y, 5)); /* the node has one output */
    TOL(rt_node_set_output(n, y, -1));
    VAL(y->grad_fn == NULL && !y->requires_grad);
    rt_node_release(n);
}

CHECK_FN(rt_node_needs_grad) {
    rt_node *n = make_node();
    VAL(!rt_node_needs_grad(NULL, 0));
    VAL(!rt_node_needs_grad(n, 7));
    VAL(!rt_node_needs_grad(n, -1));
    VAL(rt_node_needs_grad(n, 0));
    rt_node_release(n);
}

CHECK_FN(rt_node_save) {
    rt_node *n = make_node();
    ST(RT_OK, NULL, rt_node_save(NULL, T(2), NULL)); /* no node: documented no-op */
    ST(RT_ERR_INVALID_ARG, "tensor", rt_node_save(n, NULL, NULL));
    ST(RT_OK, NULL, rt_node_save(n, T(2), NULL)); /* slot may be NULL */
    rt_node_release(n);
}

/* rt_node_saved and rt_node_saved_stored take the same arguments and
 * refuse the same ones. */
static void check_saved_reader(rt_status (*read)(rt_node *, int, rt_tensor **)) {
    rt_node *n = make_node();
    rt_tensor *t = NULL;
    ST(RT_ERR_INVALID_ARG, "node", read(NULL, 0, &t));
    ST(RT_ERR_INVALID_ARG, "out", read(n, 0, NULL));
    ST(RT_ERR_INVALID_ARG, "saved tensor", read(n, 99, &t));
    ST(RT_ERR_INVALID_ARG, "saved tensor", read(n, -1, &t));
    VAL(t == NULL);
    rt_node_release(n);
}

CHECK_FN(rt_node_saved) { check_saved_reader(rt_node_saved); }
CHECK_FN(rt_node_saved_stored) { check_saved_reader(rt_node_saved_stored); }

CHECK_FN(rt_node_release_saved) { TOL(rt_node_release_saved(NULL)); }
CHECK_FN(rt_node_release_unpacked) { TOL(rt_node_release_unpacked(NULL)); }
CHECK_FN(rt_node_drop_saved) {
    TOL(rt_node_drop_saved(NULL, 0));
    TOL(rt_node_drop_saved(NULL, -1));
}
CHECK_FN(rt_node_take_grad) {
    VAL(rt_node_take_grad(NULL, 0) == NULL);
    VAL(rt_node_take_grad(NULL, -1) == NULL);
}

CHECK_FN(rt_saved_tensors_hooks_push) {
    rt_saved_hooks none = {0};
    ST(RT_ERR_INVALID_ARG, "hooks", rt_saved_tensors_hooks_push(NULL));
    ST(RT_ERR_INVALID_ARG, "pack", rt_saved_tensors_hooks_push(&none));
    VAL(rt_saved_tensors_hooks_depth() == 0);
}

CHECK_FN(rt_saved_tensors_hooks_pop) { ST(RT_ERR_STATE, "pop", rt_saved_tensors_hooks_pop()); }
CHECK_FN(rt_saved_tensors_hooks_depth) { VAL(rt_saved_tensors_hooks_depth() == 0); }
CHECK_FN(rt_saved_tensors_hooks_top) {
    rt_saved_hooks h = {.user = &h};
    VAL(!rt_saved_tensors_hooks_top(NULL));
    VAL(!rt_saved_tensors_hooks_top(&h) && h.pack == NULL && h.user == NULL);
}
CHECK_FN(rt_saved_memo_keep) {
    rt_tensor *key = rt_tensor_zeros(1, (int64_t[]){2}, RT_F32, RT_DEVICE_CPU, RT_MEM_TEMP);
    VAL(rt_saved_memo_keep(key, NULL, 2) == RT_OK); /* nothing offered, nothing kept */
    rt_tensor *none[1] = {NULL};
    VAL(rt_saved_memo_keep(NULL, none, 1) == RT_OK); /* no key: nothing to keep it by */
    VAL(rt_saved_memo_keep(key, none, 1) == RT_OK);  /* no hooks pushed: nothing keeps */
    rt_tensor_release(key);
}
CHECK_FN(rt_saved_memo_take) {
    rt_tensor *like = rt_tensor_zeros(1, (int64_t[]){2}, RT_F32, RT_DEVICE_CPU, RT_MEM_TEMP), *out[2];
    bool found = true;
    ST(RT_ERR_INVALID_ARG, "found", rt_saved_memo_take(like, out, 2, NULL));
    ST(RT_ERR_INVALID_ARG, "out", rt_saved_memo_take(like, NULL, 2, &found));
    ST(RT_ERR_INVALID_ARG, "key", rt_saved_memo_take(NULL, out, 2, &found));
    VAL(rt_saved_memo_take(like, out, 2, &found) == RT_OK && !found && !out[0] && !out[1]);
    rt_tensor_release(like);
}
CHECK_FN(rt_grad_is_enabled) { VAL(rt_grad_is_enabled()); }

CHECK_FN(rt_grad_set_enabled) {
    VAL(rt_grad_set_enabled(false) == true);
    VAL(rt_grad_set_enabled(true) == false);
}

CHECK_FN(rt_recompute_is_active) { VAL(!rt_recompute_is_active()); }

CHECK_FN(rt_recompute_set_active) {
    VAL(rt_recompute_set_active(true) == false);
    VAL(rt_recompute_set_active(false) == true);
}

/* ------------------------------------------------------------ autograd/recompute.h */

CHECK_FN(rt_rng_state_get) { VAL(rt_rng_state_get().seed == rt_default_generator()->seed); }

CHECK_FN(rt_recompute_begin) {
    TOL(rt_recompute_begin(NULL));
    VAL(!rt_recompute_is_active()); /* nothing was opened */
}

CHECK_FN(rt_recompute_rewind) {
    rt_rng_state at = rt_rng_state_get();
    ST(RT_OK, NULL, rt_recompute_rewind(NULL)); /* no record: documented no-op */
    ST(RT_ERR_STATE, "recompute", rt_recompute_rewind(&at)); /* outside a scope */
}

CHECK_FN(rt_recompute_end) { TOL(rt_recompute_end(NULL)); }

CHECK_FN(rt_detached_leaf) {
    NUL(RT_ERR_INVALID_ARG, "tensor", rt_detached_leaf(NULL));
    NUL(RT_ERR_DTYPE, "float32", rt_detached_leaf(labels(2, 2)));
}

CHECK_FN(rt_leaf_grad_or_zeros) { NUL(RT_ERR_INVALID_ARG, "leaf", rt_leaf_grad_or_zeros(NULL)); }

/* ------------------------------------------------------------ ops/ops.h, batchnorm_relu.h, coupling.h */

/* The checks shared by every single-input op: out NULL, x NULL (and *out
 * is NULL afterwards). EXPR_X_OUT(x, out) is a macro making the call. */
#define UNARY_OP_CHECKS(X, EXPR_X_OUT)                                             \
    do {                                                                                 \
        rt_tensor *y_ = (rt_tensor *)&y_;                                                \
        ST(RT_ERR_INVALID_ARG, "out", EXPR_X_OUT(X, NULL));                              \
        ST(RT_ERR_INVALID_ARG, "input", EXPR_X_OUT(NULL, &y_));                          \
        VAL(y_ == NULL);                                                                 \
    } while (0)

static rt_pool_opts pool2(void) { return (rt_pool_opts){.kernel = {2, 2}}; }

CHECK_FN(rt_conv) {
    rt_tensor *x = T(2, 8, 4, 4), *w = T(8, 8, 3, 3), *b = T(8), *y = NULL;
    rt_conv_opts o = {.padding = {1, 1}};
    ST(RT_ERR_INVALID_ARG, "out", rt_conv(x, w, b, &o, NULL));
    ST(RT_ERR_INVALID_ARG, "input", rt_conv(NULL, w, b, &o, &y));
    ST(RT_ERR_INVALID_ARG, "weight", rt_conv(x, NULL, b, &o, &y));
    ST(RT_OK, NULL, rt_conv(x, w, NULL, NULL, &y)); /* bias and opts are optional */
    own(y);
    rt_conv_opts g3 = {.groups = 3};
    ST(RT_ERR_SHAPE, "conv", rt_conv(x, w, b, &g3, &y)); /* 3 groups do not divide 8 channels */
    ST(RT_ERR_SHAPE, "conv", rt_conv(T(2, 8), w, b, &o, &y));
}

CHECK_FN(rt_linear) {
    rt_tensor *x = T(2, 3), *w = T(4, 3), *y = NULL;
    ST(RT_ERR_INVALID_ARG, "out", rt_linear(x, w, T(4), NULL));
    ST(RT_ERR_INVALID_ARG, "input", rt_linear(NULL, w, T(4), &y));
    ST(RT_ERR_INVALID_ARG, "weight", rt_linear(x, NULL, T(4), &y));
    ST(RT_OK, NULL, rt_linear(x, w, NULL, &y)); /* bias is optional */
    own(y);
    ST(RT_ERR_SHAPE, "linear", rt_linear(T(2, 5), w, NULL, &y));
}

/* The batch norm checks shared by rt_batch_norm and rt_batch_norm_relu. */
typedef rt_status (*bn_op)(rt_tensor *, rt_tensor *, rt_tensor *, rt_tensor *, rt_tensor *, int64_t *, bool, float,
                           float, rt_tensor **);

static void bn_checks(bn_op f, bool training) {
    rt_tensor *x = T(2, 8, 4, 4), *w = T(8), *b = T(8), *m = T(8), *v = T(8), *y = NULL;
    rt_tensor_fill(v, 1.0f);
    ST(RT_ERR_INVALID_ARG, "out", f(x, w, b, m, v, NULL, training, 0.1f, 1e-5f, NULL));
    ST(RT_ERR_INVALID_ARG, "input", f(NULL, w, b, m, v, NULL, training, 0.1f, 1e-5f, &y));
    ST(RT_ERR_INVALID_ARG, "weight", f(x, NULL, b, m, v, NULL, training, 0.1f, 1e-5f, &y));
    ST(RT_ERR_INVALID_ARG, "bias", f(x, w, NULL, m, v, NULL, training, 0.1f, 1e-5f, &y));
    ST(RT_ERR_INVALID_ARG, "running_mean", f(x, w, b, NULL, v, NULL, training, 0.1f, 1e-5f, &y));
    ST(RT_ERR_INVALID_ARG, "running_var", f(x, w, b, m, NULL, NULL, training, 0.1f, 1e-5f, &y));
    ST(RT_ERR_SHAPE, "batch_norm", f(T(8), w, b, m, v, NULL, training, 0.1f, 1e-5f, &y));
    ST(RT_ERR_SHAPE, "batch_norm", f(x, T(3), b, m, v, NULL, training, 0.1f, 1e-5f, &y));
    ST(RT_OK, NULL, f(x, w, b, m, v, NULL, training, 0.1f, 1e-5f, &y)); /* num_batches_tracked is optional */
    own(y);
}

CHECK_FN(rt_batch_norm) {
    bn_checks(rt_batch_norm, true);
    bn_checks(rt_batch_norm, false);
}

CHECK_FN(rt_batch_norm_relu) {
    bn_checks(rt_batch_norm_relu, true);
    bn_checks(rt_batch_norm_relu, false);
}

#define CALL_RELU(x, out) rt_relu(x, out)
CHECK_FN(rt_relu) { UNARY_OP_CHECKS(T(2, 3), CALL_RELU); }

/* rt_leaky_relu and its in-place form share their argument rules. */
static void leaky_checks(rt_status (*fn)(rt_tensor *, float, rt_tensor **)) {
    rt_tensor *y = NULL;
#define CALL_LEAKY(x, out) fn(x, 0.1f, out)
    UNARY_OP_CHECKS(T(2, 3), CALL_LEAKY);
#undef CALL_LEAKY
    ST(RT_ERR_INVALID_ARG, "negative_slope", fn(T(2, 3), -1.0f, &y));
    ST(RT_ERR_INVALID_ARG, "negative_slope", fn(T(2, 3), NAN, &y));
}

CHECK_FN(rt_leaky_relu) { leaky_checks(rt_leaky_relu); }

#define CALL_RELU_INPLACE(x, out) rt_relu_inplace(x, out)
CHECK_FN(rt_relu_inplace) { UNARY_OP_CHECKS(T(2, 3), CALL_RELU_INPLACE); }

CHECK_FN(rt_leaky_relu_inplace) { leaky_checks(rt_leaky_relu_inplace); }

/* a (op) b: out NULL, a NULL, b NULL, shapes that differ. */
typedef rt_status (*binary_op)(rt_tensor *, rt_tensor *, rt_tensor **);

static void binary_checks(binary_op f, const char *op) {
    rt_tensor *a = T(2, 3), *b = T(2, 3), *y = NULL;
    ST(RT_ERR_INVALID_ARG, "out", f(a, b, NULL));
    ST(RT_ERR_INVALID_ARG, "first input", f(NULL, b, &y));
    ST(RT_ERR_INVALID_ARG, "second input", f(a, NULL, &y));
    ST(RT_ERR_SHAPE, op, f(a, T(3, 2), &y));
    ST(RT_ERR_DTYPE, op, f(a, labels(6, 2), &y));
    VAL(y == NULL);
}

CHECK_FN(rt_add_relu) { binary_checks(rt_add_relu, "add_relu"); }
CHECK_FN(rt_add_relu_inplace) { binary_checks(rt_add_relu_inplace, "add_relu"); }
CHECK_FN(rt_add) { binary_checks(rt_add, "add"); }
CHECK_FN(rt_sub) { binary_checks(rt_sub, "sub"); }
CHECK_FN(rt_add_inplace) { binary_checks(rt_add_inplace, "add"); }
CHECK_FN(rt_sub_inplace) { binary_checks(rt_sub_inplace, "sub"); }
CHECK_FN(rt_mul) { binary_checks(rt_mul, "mul"); }

/* Pooling: out NULL, x NULL, opts NULL, a zero kernel, a 2-D input. */
typedef rt_status (*pool_op)(rt_tensor *, const rt_pool_opts *, rt_tensor **);

static void pool_checks(pool_op f, const char *op) {
    rt_tensor *x = T(2, 8, 4, 4), *y = NULL;
    rt_pool_opts o = pool2(), zero = {0};
    ST(RT_ERR_INVALID_ARG, "out", f(x, &o, NULL));
    ST(RT_ERR_INVALID_ARG, "input", f(NULL, &o, &y));
    ST(RT_ERR_INVALID_ARG, "opts", f(x, NULL, &y));
    ST(RT_ERR_INVALID_ARG, "kernel", f(x, &zero, &y));
    ST(RT_ERR_SHAPE, op, f(T(2, 8), &o, &y));
    VAL(y == NULL);
}

CHECK_FN(rt_max_pool) { pool_checks(rt_max_pool, "max_pool"); }
CHECK_FN(rt_avg_pool) { pool_checks(rt_avg_pool, "avg_pool"); }

#define CALL_AAP(x, out) rt_adaptive_avg_pool_1(x, out)
CHECK_FN(rt_adaptive_avg_pool_1) {
    rt_tensor *y = NULL;
    UNARY_OP_CHECKS(T(2, 8, 4, 4), CALL_AAP);
    ST(RT_ERR_SHAPE, "adaptive_avg_pool", rt_adaptive_avg_pool_1(T(2, 8), &y));
}

#define CALL_MULS(x, out) rt_mul_scalar(x, 2.0f, out)
CHECK_FN(rt_mul_scalar) { UNARY_OP_CHECKS(T(2, 3), CALL_MULS); }
#define CALL_MULS_INPLACE(x, out) rt_mul_scalar_inplace(x, 2.0f, out)
CHECK_FN(rt_mul_scalar_inplace) { UNARY_OP_CHECKS(T(2, 3), CALL_MULS_INPLACE); }

#define CALL_SUM(x, out) rt_sum(x, out)
CHECK_FN(rt_sum) {
    rt_tensor *y = NULL;
    UNARY_OP_CHECKS(T(2, 3), CALL_SUM);
    ST(RT_ERR_DTYPE, "float32", rt_sum(labels(3, 2), &y));
}

#define CALL_MEAN(x, out) rt_mean(x, out)
CHECK_FN(rt_mean) { UNARY_OP_CHECKS(T(2, 3), CALL_MEAN); }

#define CALL_SQUARE(x, out) rt_square(x, out)
CHECK_FN(rt_square) { UNARY_OP_CHECKS(T(2, 3), CALL_SQUARE); }

#define CALL_POW(x, out) rt_pow_scalar(x, 3.0f, out)
CHECK_FN(rt_pow_scalar) {
    rt_tensor *y = NULL;
    UNARY_OP_CHECKS(T(2, 3), CALL_POW);
    ST(RT_ERR_INVALID_ARG, "exponent", rt_pow_scalar(T(2, 3), INFINITY, &y));
}

#define CALL_TANH(x, out) rt_tanh(x, out)
CHECK_FN(rt_tanh) { UNARY_OP_CHECKS(T(2, 3), CALL_TANH); }

#define CALL_SIGMOID(x, out) rt_sigmoid(x, out)
CHECK_FN(rt_sigmoid) { UNARY_OP_CHECKS(T(2, 3), CALL_SIGMOID); }

CHECK_FN(rt_cat_channels) {
    rt_tensor *xs[2] = {T(2, 3, 4), T(2, 5, 4)}, *holes[2] = {xs[0], NULL}, *y = NULL;
    ST(RT_ERR_INVALID_ARG, "out", rt_cat_channels(2, xs, NULL));
    ST(RT_ERR_INVALID_ARG, "xs", rt_cat_channels(2, NULL, &y));
    ST(RT_ERR_INVALID_ARG, "input 1", rt_cat_channels(2, holes, &y));
    ST(RT_ERR_INVALID_ARG, "cat", rt_cat_channels(0, xs, &y));
    rt_tensor *odd[2] = {T(2, 3, 4), T(3, 3, 4)};
    ST(RT_ERR_SHAPE, "cat", rt_cat_channels(2, odd, &y));
    VAL(y == NULL);
}

CHECK_FN(rt_cat_channels_layout) {
    rt_tensor *xs[2] = {T(2, 3, 4, 4), T(2, 5, 4, 4)}, *holes[2] = {xs[0], NULL}, *y = NULL;
    ST(RT_ERR_INVALID_ARG, "out", rt_cat_channels_layout(2, xs, RT_LAYOUT_PLAIN, NULL));
    ST(RT_ERR_INVALID_ARG, "xs", rt_cat_channels_layout(2, NULL, RT_LAYOUT_PLAIN, &y));
    ST(RT_ERR_INVALID_ARG, "input 1", rt_cat_channels_layout(2, holes, RT_LAYOUT_PLAIN, &y));
    ST(RT_ERR_INVALID_ARG, "activation order", rt_cat_channels_layout(2, xs, RT_LAYOUT_WEIGHT_BLOCKED, &y));
    VAL(y == NULL);
}

CHECK_FN(rt_split_channels_layout) {
    rt_tensor *x = T(2, 8, 4, 4), *outs[2] = {x, x};
    const int64_t sizes[2] = {3, 5}, bad[2] = {3, 4};
    ST(RT_ERR_INVALID_ARG, "outs", rt_split_channels_layout(x, 2, sizes, RT_LAYOUT_CHANNELS_LAST, NULL));
    ST(RT_ERR_INVALID_ARG, "input", rt_split_channels_layout(NULL, 2, sizes, RT_LAYOUT_CHANNELS_LAST, outs));
    VAL(outs[0] == NULL && outs[1] == NULL);
    ST(RT_ERR_INVALID_ARG, "sizes", rt_split_channels_layout(x, 2, NULL, RT_LAYOUT_CHANNELS_LAST, outs));
    ST(RT_ERR_SHAPE, "split", rt_split_channels_layout(x, 2, bad, RT_LAYOUT_CHANNELS_LAST, outs));
    ST(RT_ERR_INVALID_ARG, "channels-last", rt_split_channels_layout(x, 2, sizes, RT_LAYOUT_BLOCKED, outs));
    ST(RT_ERR_SHAPE, "4-D or 5-D", rt_split_channels_layout(T(2, 8), 2, sizes, RT_LAYOUT_CHANNELS_LAST, outs));
}

CHECK_FN(rt_split_channels) {
    rt_tensor *x = T(2, 8, 4, 4), *outs[2] = {x, x};
    const int64_t sizes[2] = {3, 5}, bad[2] = {3, 4};
    ST(RT_ERR_INVALID_ARG, "outs", rt_split_channels(x, 2, sizes, NULL));
    ST(RT_ERR_INVALID_ARG, "input", rt_split_channels(NULL, 2, sizes, outs));
    VAL(outs[0] == NULL && outs[1] == NULL);
    ST(RT_ERR_INVALID_ARG, "sizes", rt_split_channels(x, 2, NULL, outs));
    ST(RT_ERR_SHAPE, "split", rt_split_channels(x, 0, sizes, outs));
    ST(RT_ERR_SHAPE, "split", rt_split_channels(x, 2, bad, outs));
}

CHECK_FN(rt_reshape) {
    rt_tensor *x = T(2, 3), *y = NULL;
    const int64_t s6[1] = {6}, s7[1] = {7};
    ST(RT_ERR_INVALID_ARG, "out", rt_reshape(x, 1, s6, NULL));
    ST(RT_ERR_INVALID_ARG, "input", rt_reshape(NULL, 1, s6, &y));
    ST(RT_ERR_INVALID_ARG, "shape", rt_reshape(x, 1, NULL, &y));
    ST(RT_ERR_SHAPE, "dimensions", rt_reshape(x, 6, s6, &y));
    ST(RT_ERR_SHAPE, "dimensions", rt_reshape(x, -1, s6, &y));
    ST(RT_ERR_SHAPE, "view", rt_reshape(x, 1, s7, &y));
    VAL(y == NULL);
}

#define CALL_FLATTEN(x, out) rt_flatten(x, out)
CHECK_FN(rt_flatten) {
    rt_tensor *y = NULL;
    UNARY_OP_CHECKS(T(2, 3, 4), CALL_FLATTEN);
    ST(RT_ERR_SHAPE, "flatten", rt_flatten(own(rt_tensor_create(0, NULL, RT_F32, RT_DEVICE_CPU, RT_MEM_DATA)), &y));
}

#define CALL_TO_LAYOUT(x, out) rt_to_layout(x, RT_LAYOUT_BLOCKED, out)
CHECK_FN(rt_to_layout) {
    rt_tensor *y = NULL;
    UNARY_OP_CHECKS(T(2, rt_layout_block(), 2, 2), CALL_TO_LAYOUT);
    ST(RT_ERR_INVALID_ARG, "to_layout", rt_to_layout(T(2, 3, 2, 2), RT_LAYOUT_BLOCKED, &y)); /* C not a multiple */
    ST(RT_ERR_INVALID_ARG, "layout", rt_to_layout(T(2, rt_layout_block(), 2, 2), (rt_layout)7, &y));
    VAL(y == NULL);
}

CHECK_FN(rt_weight_set_layout) {
    int64_t b = rt_layout_block();
    ST(RT_ERR_INVALID_ARG, "weight", rt_weight_set_layout(NULL, RT_LAYOUT_WEIGHT_BLOCKED));
    ST(RT_ERR_INVALID_ARG, "layout", rt_weight_set_layout(T(b, b, 3, 3), RT_LAYOUT_BLOCKED));
    ST(RT_ERR_SHAPE, "multiples", rt_weight_set_layout(T(b, 3, 3, 3), RT_LAYOUT_WEIGHT_BLOCKED)); /* the stem's I = 3 */
    ST(RT_ERR_SHAPE, "weight", rt_weight_set_layout(T(b, b), RT_LAYOUT_WEIGHT_BLOCKED));
}

CHECK_FN(rt_copy_in_layout) {
    ST(RT_ERR_INVALID_ARG, "dst", rt_copy_in_layout(NULL, T(2, 3)));
    ST(RT_ERR_INVALID_ARG, "src", rt_copy_in_layout(T(2, 3), NULL));
    ST(RT_ERR_SHAPE, "shape", rt_copy_in_layout(T(2, 3), T(3, 2)));
}

#define CALL_PREFERRED(x, out) rt_to_preferred_layout(x, out)
CHECK_FN(rt_to_preferred_layout) { UNARY_OP_CHECKS(T(2, 3), CALL_PREFERRED); }

CHECK_FN(rt_compare) {
    rt_tensor *a = T(2, 3);
    double m, r;
    ST(RT_ERR_INVALID_ARG, "a", rt_compare(NULL, a, &m, &r));
    ST(RT_ERR_INVALID_ARG, "ref", rt_compare(a, NULL, &m, &r));
    ST(RT_ERR_INVALID_ARG, "max_abs", rt_compare(a, a, NULL, &r));
    ST(RT_ERR_INVALID_ARG, "max_ref", rt_compare(a, a, &m, NULL));
    ST(RT_ERR_SHAPE, "compare", rt_compare(a, T(3, 2), &m, &r));
}

CHECK_FN(rt_rel_difference) {
    rt_tensor *a = T(2, 3);
    rt_error_clear();
    VAL(isinf(rt_rel_difference(NULL, a)) && rt_error_last_status() == RT_ERR_INVALID_ARG);
    VAL(isinf(rt_rel_difference(a, NULL)));
}

#define CALL_DROPOUT(x, out) rt_dropout(x, 0.5f, true, out)
CHECK_FN(rt_dropout) {
    rt_tensor *y = NULL;
    UNARY_OP_CHECKS(T(2, 3), CALL_DROPOUT);
    ST(RT_ERR_INVALID_ARG, "probability", rt_dropout(T(2, 3), 1.5f, true, &y));
    ST(RT_ERR_INVALID_ARG, "probability", rt_dropout(T(2, 3), -0.5f, false, &y));
}

CHECK_FN(rt_cross_entropy) {
    rt_tensor *z = T(2, 3), *t = labels(2, 3), *y = NULL;
    ST(RT_ERR_INVALID_ARG, "out", rt_cross_entropy(z, t, 0.0f, NULL));
    ST(RT_ERR_INVALID_ARG, "logits", rt_cross_entropy(NULL, t, 0.0f, &y));
    ST(RT_ERR_INVALID_ARG, "target", rt_cross_entropy(z, NULL, 0.0f, &y));
    ST(RT_ERR_INVALID_ARG, "label_smoothing", rt_cross_entropy(z, t, 2.0f, &y));
    ST(RT_ERR_INVALID_ARG, "target", rt_cross_entropy(T(2, 1), t, 0.0f, &y)); /* class 1 of a 1-class problem */
    ST(RT_ERR_SHAPE, "cross_entropy", rt_cross_entropy(z, labels(3, 3), 0.0f, &y));
    ST(RT_ERR_DTYPE, "cross_entropy", rt_cross_entropy(z, T(2), 0.0f, &y));
}

CHECK_FN(rt_mse_loss) {
    rt_tensor *x = T(2, 3), *y = NULL;
    ST(RT_ERR_INVALID_ARG, "out", rt_mse_loss(x, x, NULL));
    ST(RT_ERR_INVALID_ARG, "input", rt_mse_loss(NULL, x, &y));
    ST(RT_ERR_INVALID_ARG, "target", rt_mse_loss(x, NULL, &y));
    ST(RT_ERR_SHAPE, "mse_loss", rt_mse_loss(x, T(6), &y));
}

CHECK_FN(rt_l1_loss) {
    rt_tensor *x = T(2, 3), *y = NULL;
    ST(RT_ERR_INVALID_ARG, "out", rt_l1_loss(x, x, NULL));
    ST(RT_ERR_INVALID_ARG, "input", rt_l1_loss(NULL, x, &y));
    ST(RT_ERR_INVALID_ARG, "target", rt_l1_loss(x, NULL, &y));
    ST(RT_ERR_SHAPE, "l1_loss", rt_l1_loss(x, T(6), &y));
}

/* The coupling ops: x2 (2, 4, 2, 2) and st (2, 8, 2, 2). */
typedef rt_status (*coupling_op)(rt_tensor *, rt_tensor *, rt_tensor **);

static void coupling_checks(coupling_op f, const char *op) {
    rt_tensor *x2 = T(2, 4, 2, 2), *st = T(2, 8, 2, 2), *y = NULL;
    ST(RT_ERR_INVALID_ARG, "out", f(x2, st, NULL));
    ST(RT_ERR_INVALID_ARG, "x2", f(NULL, st, &y));
    ST(RT_ERR_INVALID_ARG, "scale/shift", f(x2, NULL, &y));
    ST(RT_ERR_SHAPE, op, f(x2, T(2, 6, 2, 2), &y));
    VAL(y == NULL);
}

CHECK_FN(rt_affine_coupling) { coupling_checks(rt_affine_coupling, "affine_coupling"); }
CHECK_FN(rt_affine_coupling_inverse) { coupling_checks(rt_affine_coupling_inverse, "affine_coupling_inverse"); }

CHECK_FN(rt_affine_coupling_logdet) {
    rt_tensor *y = NULL;
    ST(RT_ERR_INVALID_ARG, "out", rt_affine_coupling_logdet(T(2, 8, 2, 2), NULL));
    ST(RT_ERR_INVALID_ARG, "scale/shift", rt_affine_coupling_logdet(NULL, &y));
    ST(RT_ERR_SHAPE, "affine_coupling_logdet", rt_affine_coupling_logdet(T(2, 7, 2, 2), &y));
}

/* ------------------------------------------------------------ nn/module.h */

static const rt_module_class no_forward_class = {"NoForward", NULL, NULL, NULL};

CHECK_FN(rt_init_ctx_make) {
    rt_init_ctx c = rt_init_ctx_make(RT_DEVICE_META, 3);
    VAL(c.device == RT_DEVICE_META && c.gen.seed == 3 && c.gen.offset == 0);
}

CHECK_FN(rt_module_alloc) {
    NUL(RT_ERR_INVALID_ARG, "class", rt_module_alloc(sizeof(rt_module), NULL));
    NUL(RT_ERR_INVALID_ARG, "forward", rt_module_alloc(sizeof(rt_module), &no_forward_class));
}

CHECK_FN(rt_module_destroy) { TOL(rt_module_destroy(NULL)); }

CHECK_FN(rt_module_forward) {
    rt_module *m = linear_module(RT_DEVICE_CPU);
    rt_tensor *x = T(2, 3), *y = (rt_tensor *)&y;
    rt_module classless = {0};
    ST(RT_ERR_INVALID_ARG, "output", rt_module_forward(m, x, NULL));
    ST(RT_ERR_INVALID_ARG, "module", rt_module_forward(NULL, x, &y));
    VAL(y == NULL);
    ST(RT_ERR_INVALID_ARG, "input", rt_module_forward(m, NULL, &y));
    ST(RT_ERR_INVALID_ARG, "class", rt_module_forward(&classless, x, &y));
    ST(RT_ERR_SHAPE, "linear", rt_module_forward(m, T(2, 5), &y));
    rt_module_destroy(m);
}

/* every call hands over a reference it owns (released also on error: the
 * references counted below end at the one `own` keeps) */
CHECK_FN(rt_module_forward_consume) {
    rt_module *m = linear_module(RT_DEVICE_CPU);
    rt_tensor *x = T(2, 3), *y = (rt_tensor *)&y;
    rt_module classless = {0};
    ST(RT_ERR_INVALID_ARG, "output", rt_module_forward_consume(m, rt_tensor_retain(x), NULL));
    ST(RT_ERR_INVALID_ARG, "module", rt_module_forward_consume(NULL, rt_tensor_retain(x), &y));
    VAL(y == NULL);
    ST(RT_ERR_INVALID_ARG, "input", rt_module_forward_consume(m, NULL, &y));
    ST(RT_ERR_INVALID_ARG, "class", rt_module_forward_consume(&classless, rt_tensor_retain(x), &y));
    ST(RT_ERR_SHAPE, "linear", rt_module_forward_consume(m, rt_tensor_retain(T(2, 5)), &y));
    VAL(x->refcount == 1);
    rt_module_destroy(m);
}

CHECK_FN(rt_module_add_child) {
    rt_module *m = NULL, *c = NULL;
    rt_sequential_create(&m);
    rt_relu_create(&c);
    ST(RT_ERR_INVALID_ARG, "parent", rt_module_add_child(NULL, "a", c)); /* destroys c */
    rt_relu_create(&c);
    ST(RT_ERR_INVALID_ARG, "name", rt_module_add_child(m, NULL, c));
    ST(RT_ERR_INVALID_ARG, "child", rt_module_add_child(m, "a", NULL));
    rt_relu_create(&c);
    ST(RT_ERR_INVALID_ARG, "'.'", rt_module_add_child(m, "a.b", c));
    VAL(m->n_children == 0);
    rt_module_destroy(m);
}

CHECK_FN(rt_module_append) {
    rt_module *m = NULL, *c = NULL;
    rt_sequential_create(&m);
    rt_relu_create(&c);
    ST(RT_ERR_INVALID_ARG, "parent", rt_module_append(NULL, c)); /* destroys c */
    ST(RT_ERR_INVALID_ARG, "child", rt_module_append(m, NULL));
    rt_module_destroy(m);
}

CHECK_FN(rt_module_register) {
    rt_module *m = NULL;
    rt_sequential_create(&m);
    rt_init_ctx ctx = rt_init_ctx_make(RT_DEVICE_CPU, 0);
    const int64_t s[1] = {4}, neg[1] = {-4};
    rt_tensor *t = NULL;
    ST(RT_ERR_INVALID_ARG, "out", rt_module_register(m, &ctx, "w", RT_ENTRY_PARAM, 1, s, NULL));
    ST(RT_ERR_INVALID_ARG, "module", rt_module_register(NULL, &ctx, "w", RT_ENTRY_PARAM, 1, s, &t));
    ST(RT_ERR_INVALID_ARG, "context", rt_module_register(m, NULL, "w", RT_ENTRY_PARAM, 1, s, &t));
    ST(RT_ERR_INVALID_ARG, "name", rt_module_register(m, &ctx, NULL, RT_ENTRY_PARAM, 1, s, &t));
    ST(RT_ERR_INVALID_ARG, "shape", rt_module_register(m, &ctx, "w", RT_ENTRY_PARAM, 1, NULL, &t));
    ST(RT_ERR_INVALID_ARG, "PARAM", rt_module_register(m, &ctx, "w", RT_ENTRY_COUNTER, 1, s, &t));
    ST(RT_ERR_SHAPE, "negative", rt_module_register(m, &ctx, "w", RT_ENTRY_PARAM, 1, neg, &t));
    ST(RT_ERR_SHAPE, "dimensions", rt_module_register(m, &ctx, "w", RT_ENTRY_BUFFER, 8, s, &t));
    VAL(t == NULL && m->n_entries == 0);
    rt_module_destroy(m);
}

CHECK_FN(rt_module_register_counter) {
    rt_module *m = NULL;
    rt_sequential_create(&m);
    int64_t counter = 0;
    ST(RT_ERR_INVALID_ARG, "module", rt_module_register_counter(NULL, "n", &counter));
    ST(RT_ERR_INVALID_ARG, "name", rt_module_register_counter(m, NULL, &counter));
    ST(RT_ERR_INVALID_ARG, "counter", rt_module_register_counter(m, "n", NULL));
    rt_module_destroy(m);
}

CHECK_FN(rt_module_tensor) {
    rt_module *m = linear_module(RT_DEVICE_CPU);
    NUL(RT_ERR_INVALID_ARG, "module", rt_module_tensor(NULL, "weight"));
    NUL(RT_ERR_INVALID_ARG, "name", rt_module_tensor(m, NULL));
    rt_module_destroy(m);
}

CHECK_FN(rt_module_find) {
    rt_module *m = linear_module(RT_DEVICE_CPU);
    NUL(RT_ERR_INVALID_ARG, "module", rt_module_find(NULL, "fc"));
    NUL(RT_ERR_INVALID_ARG, "path", rt_module_find(m, NULL));
    rt_module_destroy(m);
}

CHECK_FN(rt_module_train) { TOL(rt_module_train(NULL, false)); }

CHECK_FN(rt_module_visit) {
    rt_module *m = linear_module(RT_DEVICE_CPU);
    ST(RT_ERR_INVALID_ARG, "module", rt_module_visit(NULL, visit_nothing, NULL));
    ST(RT_ERR_INVALID_ARG, "function", rt_module_visit(m, NULL, NULL));
    ST(RT_OK, NULL, rt_module_visit(m, visit_nothing, NULL)); /* user may be NULL */
    rt_module_destroy(m);
}

CHECK_FN(rt_module_is) {
    rt_module *m = linear_module(RT_DEVICE_CPU);
    VAL(!rt_module_is(NULL, m->cls));
    VAL(!rt_module_is(m, NULL));
    rt_module_destroy(m);
}

CHECK_FN(rt_module_state_dict) {
    rt_module *m = linear_module(RT_DEVICE_CPU);
    rt_state_dict *sd = (rt_state_dict *)&sd;
    ST(RT_ERR_INVALID_ARG, "out", rt_module_state_dict(m, NULL));
    ST(RT_ERR_INVALID_ARG, "module", rt_module_state_dict(NULL, &sd));
    VAL(sd == NULL);
    rt_module_destroy(m);
}

CHECK_FN(rt_module_path) {
    rt_module *m = linear_module(RT_DEVICE_CPU);
    char buf[32] = "x";
    VAL(rt_module_path(NULL, buf, sizeof buf) == buf && buf[0] == '\0');
    VAL(rt_module_path(m, NULL, 32) == NULL);
    buf[0] = 'x';
    VAL(rt_module_path(m, buf, 0) == buf && buf[0] == 'x');
    rt_module_destroy(m);
}

CHECK_FN(rt_module_set_forward_hook) { TOL(rt_module_set_forward_hook(NULL, NULL, NULL)); }

/* ------------------------------------------------------------ nn/modules.h */

CHECK_FN(rt_init_uniform) {
    rt_init_ctx ctx = rt_init_ctx_make(RT_DEVICE_CPU, 1);
    rt_tensor *t = T(4), *lab = labels(4, 2);
    TOL(rt_init_uniform(NULL, t, 1.0f));
    TOL(rt_init_uniform(&ctx, NULL, 1.0f));
    TOL(rt_init_uniform(&ctx, lab, 1.0f)); /* not float32: untouched */
    VAL(ctx.gen.offset == 0 && ((int32_t *)rt_tensor_data(lab))[1] == 1);
}

CHECK_FN(rt_init_normal) {
    rt_init_ctx ctx = rt_init_ctx_make(RT_DEVICE_CPU, 1);
    rt_tensor *t = T(4), *lab = labels(4, 2);
    TOL(rt_init_normal(NULL, t, 1.0f));
    TOL(rt_init_normal(&ctx, NULL, 1.0f));
    TOL(rt_init_normal(&ctx, lab, 1.0f));
    VAL(ctx.gen.offset == 0 && ((int32_t *)rt_tensor_data(lab))[1] == 1);
}

CHECK_FN(rt_conv_create) {
    rt_init_ctx ctx = rt_init_ctx_make(RT_DEVICE_CPU, 1);
    rt_module *m = (rt_module *)&m;
    ST(RT_ERR_INVALID_ARG, "m", rt_conv_create(&ctx, 2, 8, 8, 3, 1, 1, 1, true, RT_INIT_DEFAULT, NULL));
    ST(RT_ERR_INVALID_ARG, "ctx", rt_conv_create(NULL, 2, 8, 8, 3, 1, 1, 1, true, RT_INIT_DEFAULT, &m));
    VAL(m == NULL);
    ST(RT_ERR_INVALID_ARG, "spatial", rt_conv_create(&ctx, 4, 8, 8, 3, 1, 1, 1, true, RT_INIT_DEFAULT, &m));
    ST(RT_ERR_INVALID_ARG, "Conv2d", rt_conv_create(&ctx, 2, 0, 8, 3, 1, 1, 1, true, RT_INIT_DEFAULT, &m));
    ST(RT_ERR_INVALID_ARG, "Conv2d", rt_conv_create(&ctx, 2, 8, 8, 0, 1, 1, 1, true, RT_INIT_DEFAULT, &m));
    ST(RT_ERR_INVALID_ARG, "Conv2d", rt_conv_create(&ctx, 2, 8, 8, 3, 0, 1, 1, true, RT_INIT_DEFAULT, &m));
    ST(RT_ERR_INVALID_ARG, "Conv2d", rt_conv_create(&ctx, 2, 8, 8, 3, 1, -1, 1, true, RT_INIT_DEFAULT, &m));
    ST(RT_ERR_INVALID_ARG, "groups", rt_conv_create(&ctx, 2, 8, 8, 3, 1, 1, 3, true, RT_INIT_DEFAULT, &m));
}

CHECK_FN(rt_batchnorm_create) {
    rt_init_ctx ctx = rt_init_ctx_make(RT_DEVICE_CPU, 1);
    rt_module *m = NULL;
    ST(RT_ERR_INVALID_ARG, "m", rt_batchnorm_create(&ctx, 2, 8, false, NULL));
    ST(RT_ERR_INVALID_ARG, "ctx", rt_batchnorm_create(NULL, 2, 8, false, &m));
    ST(RT_ERR_INVALID_ARG, "BatchNorm", rt_batchnorm_create(&ctx, 2, 0, false, &m));
    ST(RT_ERR_INVALID_ARG, "BatchNorm", rt_batchnorm_create(&ctx, 1, 8, false, &m));
}

CHECK_FN(rt_batchnorm_view_get) {
    rt_init_ctx ctx = rt_init_ctx_make(RT_DEVICE_CPU, 1);
    rt_module *bn = NULL, *relu = NULL;
    rt_batchnorm_create(&ctx, 2, 4, true, &bn);
    rt_relu_create(&relu);
    rt_batchnorm_view v;
    ST(RT_ERR_INVALID_ARG, "batch norm", rt_batchnorm_view_get(NULL, &v));
    ST(RT_ERR_INVALID_ARG, "batch norm", rt_batchnorm_view_get(relu, &v));
    ST(RT_ERR_INVALID_ARG, "out", rt_batchnorm_view_get(bn, NULL));
    ST(RT_OK, NULL, rt_batchnorm_view_get(bn, &v));
    VAL(v.fuse_relu && v.weight && v.num_batches_tracked && v.eps == 1e-5f);
    rt_module_destroy(bn);
    rt_module_destroy(relu);
}
CHECK_FN(rt_batchnorm_set_function) {
    rt_module *relu = NULL;
    rt_relu_create(&relu);
    ST(RT_ERR_INVALID_ARG, "batch norm", rt_batchnorm_set_function(NULL, NULL, NULL));
    ST(RT_ERR_INVALID_ARG, "batch norm", rt_batchnorm_set_function(relu, NULL, NULL));
    rt_module_destroy(relu);
}
CHECK_FN(rt_batchnorm_configure) {
    rt_init_ctx ctx = rt_init_ctx_make(RT_DEVICE_CPU, 1);
    rt_module *bn = NULL, *relu = NULL;
    rt_batchnorm_create(&ctx, 2, 4, false, &bn);
    rt_relu_create(&relu);
    ST(RT_ERR_INVALID_ARG, "NULL", rt_batchnorm_configure(NULL, 0.1f, 1e-5f));
    ST(RT_ERR_INVALID_ARG, "ReLU", rt_batchnorm_configure(relu, 0.1f, 1e-5f));
    ST(RT_ERR_INVALID_ARG, "momentum", rt_batchnorm_configure(bn, 2.0f, 1e-5f));
    ST(RT_ERR_INVALID_ARG, "eps", rt_batchnorm_configure(bn, 0.1f, 0.0f));
    rt_module_destroy(bn);
    rt_module_destroy(relu);
}

CHECK_FN(rt_linear_create) {
    rt_init_ctx ctx = rt_init_ctx_make(RT_DEVICE_CPU, 1);
    rt_module *m = NULL;
    ST(RT_ERR_INVALID_ARG, "m", rt_linear_create(&ctx, 3, 2, true, NULL));
    ST(RT_ERR_INVALID_ARG, "ctx", rt_linear_create(NULL, 3, 2, true, &m));
    ST(RT_ERR_INVALID_ARG, "Linear", rt_linear_create(&ctx, 0, 2, true, &m));
    ST(RT_ERR_INVALID_ARG, "Linear", rt_linear_create(&ctx, 3, -2, true, &m));
}

CHECK_FN(rt_relu_create) { ST(RT_ERR_INVALID_ARG, "m", rt_relu_create(NULL)); }

CHECK_FN(rt_leaky_relu_create) {
    rt_module *m = NULL;
    ST(RT_ERR_INVALID_ARG, "m", rt_leaky_relu_create(0.1f, NULL));
    ST(RT_ERR_INVALID_ARG, "negative_slope", rt_leaky_relu_create(-1.0f, &m));
}

CHECK_FN(rt_dropout_create) {
    rt_module *m = NULL;
    ST(RT_ERR_INVALID_ARG, "m", rt_dropout_create(0.5f, NULL));
    ST(RT_ERR_INVALID_ARG, "Dropout", rt_dropout_create(1.5f, &m));
}

CHECK_FN(rt_flatten_create) { ST(RT_ERR_INVALID_ARG, "m", rt_flatten_create(NULL)); }

CHECK_FN(rt_max_pool_create) {
    rt_module *m = NULL;
    ST(RT_ERR_INVALID_ARG, "m", rt_max_pool_create(2, 2, 2, 0, NULL));
    ST(RT_ERR_INVALID_ARG, "MaxPool", rt_max_pool_create(1, 2, 2, 0, &m));
    ST(RT_ERR_INVALID_ARG, "MaxPool", rt_max_pool_create(2, 0, 2, 0, &m));
    ST(RT_ERR_INVALID_ARG, "MaxPool", rt_max_pool_create(2, 2, -1, 0, &m));
    ST(RT_ERR_INVALID_ARG, "MaxPool", rt_max_pool_create(2, 2, 2, 2, &m));
}

CHECK_FN(rt_avg_pool_create) {
    rt_module *m = NULL;
    ST(RT_ERR_INVALID_ARG, "m", rt_avg_pool_create(2, 2, 2, 0, NULL));
    ST(RT_ERR_INVALID_ARG, "AvgPool", rt_avg_pool_create(5, 2, 2, 0, &m));
    ST(RT_ERR_INVALID_ARG, "AvgPool", rt_avg_pool_create(2, -2, 2, 0, &m));
}

CHECK_FN(rt_adaptive_avg_pool_create) {
    rt_module *m = NULL;
    ST(RT_ERR_INVALID_ARG, "m", rt_adaptive_avg_pool_create(2, 1, NULL));
    ST(RT_ERR_INVALID_ARG, "AdaptiveAvgPool", rt_adaptive_avg_pool_create(2, 2, &m));
    ST(RT_ERR_INVALID_ARG, "AdaptiveAvgPool", rt_adaptive_avg_pool_create(0, 1, &m));
}

CHECK_FN(rt_preferred_layout_create) { ST(RT_ERR_INVALID_ARG, "m", rt_preferred_layout_create(NULL)); }
CHECK_FN(rt_module_set_blocked) { TOL(rt_module_set_blocked(NULL, true)); }
CHECK_FN(rt_module_set_weight_layout) {
    int n = -1;
    ST(RT_ERR_INVALID_ARG, "module", rt_module_set_weight_layout(NULL, RT_LAYOUT_WEIGHT_BLOCKED, &n));
    VAL(n == 0);
}
CHECK_FN(rt_sequential_create) { ST(RT_ERR_INVALID_ARG, "m", rt_sequential_create(NULL)); }

/* ------------------------------------------------------------ nn/state_dict.h */

CHECK_FN(rt_state_dict_create) {
    rt_state_dict *sd = rt_state_dict_create();
    VAL(sd != NULL && sd->n == 0);
    rt_state_dict_destroy(sd);
}

CHECK_FN(rt_state_dict_destroy) { TOL(rt_state_dict_destroy(NULL)); }

CHECK_FN(rt_state_dict_push) {
    rt_state_dict *sd = rt_state_dict_create();
    rt_tensor *t = T(2);
    int64_t counter = 0;
    rt_state_entry e = {.name = "w", .kind = RT_ENTRY_PARAM, .tensor = t};
    ST(RT_ERR_INVALID_ARG, "state dict", rt_state_dict_push(NULL, "", e));
    ST(RT_ERR_INVALID_ARG, "prefix", rt_state_dict_push(sd, NULL, e));
    ST(RT_ERR_INVALID_ARG, "name", rt_state_dict_push(sd, "", (rt_state_entry){.kind = RT_ENTRY_PARAM, .tensor = t}));
    ST(RT_ERR_INVALID_ARG, "tensor", rt_state_dict_push(sd, "", (rt_state_entry){.name = "w", .kind = RT_ENTRY_PARAM}));
    ST(RT_ERR_INVALID_ARG, "tensor", rt_state_dict_push(sd, "", (rt_state_entry){.name = "w", .kind = RT_ENTRY_BUFFER}));
    ST(RT_ERR_INVALID_ARG, "counter", rt_state_dict_push(sd, "", (rt_state_entry){.name = "n", .kind = RT_ENTRY_COUNTER}));
    ST(RT_ERR_INVALID_ARG, "kind", rt_state_dict_push(sd, "", (rt_state_entry){.name = "w", .kind = (rt_entry_kind)9,
                                                                              .tensor = t, .counter = &counter}));
    VAL(sd->n == 0);
    ST(RT_OK, NULL, rt_state_dict_push(sd, "", e));
    ST(RT_ERR_INVALID_ARG, "already", rt_state_dict_push(sd, "", e)); /* duplicate name */
    rt_state_dict_destroy(sd);
}

CHECK_FN(rt_state_dict_find) {
    rt_state_dict *sd = rt_state_dict_create();
    NUL(RT_ERR_INVALID_ARG, "state dict", rt_state_dict_find(NULL, "w"));
    NUL(RT_ERR_INVALID_ARG, "name", rt_state_dict_find(sd, NULL));
    rt_state_dict_destroy(sd);
}

CHECK_FN(rt_state_dict_num_params) { VAL(rt_state_dict_num_params(NULL) == 0); }
CHECK_FN(rt_state_dict_num_param_elements) { VAL(rt_state_dict_num_param_elements(NULL) == 0); }
CHECK_FN(rt_state_dict_check_values) { ST(RT_ERR_INVALID_ARG, "state dict", rt_state_dict_check_values(NULL)); }

CHECK_FN(rt_state_dict_params) {
    rt_state_dict *sd = rt_state_dict_create();
    rt_tensor *params[1] = {NULL};
    VAL(rt_state_dict_params(NULL, params, 1) == 0);
    VAL(rt_state_dict_params(sd, NULL, 0) == rt_state_dict_num_params(sd));
    VAL(params[0] == NULL);
    rt_state_dict_destroy(sd);
}

/* ------------------------------------------------------------ optim/grad.h */

CHECK_FN(rt_clip_grad_norm) {
    rt_tensor *p = leaf(), *params[2] = {p, NULL};
    float norm = -1.0f;
    ST(RT_ERR_INVALID_ARG, "parameter list", rt_clip_grad_norm(NULL, 2, 1.0f, &norm));
    ST(RT_ERR_INVALID_ARG, "parameter 1", rt_clip_grad_norm(params, 2, 1.0f, &norm));
    ST(RT_ERR_INVALID_ARG, "parameter list", rt_clip_grad_norm(params, -1, 1.0f, &norm));
    ST(RT_ERR_INVALID_ARG, "max_norm", rt_clip_grad_norm(params, 1, NAN, &norm));
    ST(RT_ERR_INVALID_ARG, "max_norm", rt_clip_grad_norm(params, 1, -1.0f, &norm));
    ST(RT_OK, NULL, rt_clip_grad_norm(params, 1, 1.0f, NULL)); /* the norm output is optional */
    ST(RT_OK, NULL, rt_clip_grad_norm(NULL, 0, 1.0f, &norm));  /* no parameters: norm 0 */
}

CHECK_FN(rt_accum_loss_scale) {
    VAL(isnan(rt_accum_loss_scale(0, 4)));
    VAL(isnan(rt_accum_loss_scale(5, 4)));
    VAL(isnan(rt_accum_loss_scale(2, -4)));
}

CHECK_FN(rt_grad_accumulator_begin) { TOL(rt_grad_accumulator_begin(NULL, 4)); }
CHECK_FN(rt_grad_accumulator_scale) { VAL(isnan(rt_grad_accumulator_scale(NULL, 2))); }

CHECK_FN(rt_grad_accumulator_check) {
    rt_grad_accumulator a;
    rt_grad_accumulator_begin(&a, 4);
    ST(RT_ERR_INVALID_ARG, "accumulator", rt_grad_accumulator_check(NULL));
    ST(RT_ERR_STATE, "accumulation", rt_grad_accumulator_check(&a)); /* no micro-batch recorded */
    rt_grad_accumulator_begin(&a, -3);
    VAL(isnan(rt_grad_accumulator_scale(&a, 1)));
    ST(RT_ERR_STATE, "accumulation", rt_grad_accumulator_check(&a));
}

/* ------------------------------------------------------------ optim/optimizer.h */

CHECK_FN(rt_sgd_default_opts) { VAL(rt_sgd_default_opts(-1.0).lr == -1.0); /* validated at create */ }
CHECK_FN(rt_adamw_default_opts) { VAL(rt_adamw_default_opts().beta2 == 0.999); }

CHECK_FN(rt_sgd_create) {
    rt_tensor *params[2] = {leaf(), NULL};
    rt_sgd_opts o = rt_sgd_default_opts(0.1), bad = rt_sgd_default_opts(-0.1);
    NUL(RT_ERR_INVALID_ARG, "opts", rt_sgd_create(params, 1, NULL));
    NUL(RT_ERR_INVALID_ARG, "parameter", rt_sgd_create(NULL, 1, &o));
    NUL(RT_ERR_INVALID_ARG, "parameter", rt_sgd_create(params, 0, &o));
    NUL(RT_ERR_INVALID_ARG, "parameter 1", rt_sgd_create(params, 2, &o));
    NUL(RT_ERR_INVALID_ARG, "learning rate", rt_sgd_create(params, 1, &bad));
    params[1] = params[0];
    NUL(RT_ERR_INVALID_ARG, "same tensor", rt_sgd_create(params, 2, &o));
    NUL(RT_ERR_DTYPE, "f32", rt_sgd_create((rt_tensor *[]){labels(2, 2)}, 1, &o));
}

CHECK_FN(rt_adamw_create) {
    rt_tensor *params[2] = {leaf(), NULL};
    rt_adamw_opts o = rt_adamw_default_opts(), bad = o;
    bad.beta1 = 1.0;
    NUL(RT_ERR_INVALID_ARG, "opts", rt_adamw_create(params, 1, NULL));
    NUL(RT_ERR_INVALID_ARG, "parameter", rt_adamw_create(NULL, 1, &o));
    NUL(RT_ERR_INVALID_ARG, "parameter", rt_adamw_create(params, -1, &o));
    NUL(RT_ERR_INVALID_ARG, "parameter 1", rt_adamw_create(params, 2, &o));
    NUL(RT_ERR_INVALID_ARG, "beta", rt_adamw_create(params, 1, &bad));
}

CHECK_FN(rt_optimizer_create) {
    rt_tensor *params[1] = {leaf()};
    rt_optimizer_spec spec = {.kind = RT_OPTIM_SGD, .sgd = rt_sgd_default_opts(0.1)};
    rt_optimizer_spec unknown = {.kind = (rt_optim_kind)9};
    NUL(RT_ERR_INVALID_ARG, "spec", rt_optimizer_create(NULL, params, 1));
    NUL(RT_ERR_INVALID_ARG, "kind", rt_optimizer_create(&unknown, params, 1));
    NUL(RT_ERR_INVALID_ARG, "parameter", rt_optimizer_create(&spec, NULL, 1));
}

CHECK_FN(rt_optimizer_destroy) { TOL(rt_optimizer_destroy(NULL)); }
CHECK_FN(rt_optimizer_name) { NUL(RT_ERR_INVALID_ARG, "optimizer", rt_optimizer_name(NULL)); }
CHECK_FN(rt_optimizer_param_count) { VAL(rt_optimizer_param_count(NULL) == 0); }
CHECK_FN(rt_optimizer_params) { NUL(RT_ERR_INVALID_ARG, "optimizer", rt_optimizer_params(NULL)); }

CHECK_FN(rt_optimizer_step) {
    rt_tensor *params[1] = {leaf()};
    rt_optimizer *opt = rt_sgd_create(params, 1, &(rt_sgd_opts){.lr = 0.1});
    ST(RT_ERR_INVALID_ARG, "optimizer", rt_optimizer_step(NULL));
    rt_optimizer_set_lr(opt, NAN);
    ST(RT_ERR_INVALID_ARG, "lr", rt_optimizer_step(opt));
    rt_optimizer_destroy(opt);
}

CHECK_FN(rt_optimizer_zero_grad) { TOL(rt_optimizer_zero_grad(NULL)); }
CHECK_FN(rt_optimizer_set_lr) { TOL(rt_optimizer_set_lr(NULL, 0.1f)); }
CHECK_FN(rt_optimizer_get_lr) { VAL(isnan(rt_optimizer_get_lr(NULL))); }
CHECK_FN(rt_optimizer_step_count) { VAL(rt_optimizer_step_count(NULL) == 0); }

CHECK_FN(rt_optimizer_set_step_count) {
    rt_tensor *params[1] = {leaf()};
    rt_optimizer *opt = rt_sgd_create(params, 1, &(rt_sgd_opts){.lr = 0.1});
    TOL(rt_optimizer_set_step_count(NULL, 3));
    TOL(rt_optimizer_set_step_count(opt, -5)); /* clamped to 0 */
    VAL(rt_optimizer_step_count(opt) == 0);
    rt_optimizer_destroy(opt);
}

CHECK_FN(rt_optimizer_state_nbytes) { VAL(rt_optimizer_state_nbytes(NULL) == 0); }

CHECK_FN(rt_optimizer_state_visit) {
    rt_tensor *params[1] = {leaf()};
    rt_optimizer *opt = rt_sgd_create(params, 1, &(rt_sgd_opts){.lr = 0.1});
    ST(RT_ERR_INVALID_ARG, "optimizer", rt_optimizer_state_visit(NULL, state_nothing, NULL));
    ST(RT_ERR_INVALID_ARG, "callback", rt_optimizer_state_visit(opt, NULL, NULL));
    ST(RT_OK, NULL, rt_optimizer_state_visit(opt, state_nothing, NULL)); /* ud may be NULL */
    rt_optimizer_destroy(opt);
}

CHECK_FN(rt_optimizer_state_count) { VAL(rt_optimizer_state_count(NULL) == 0); }
CHECK_FN(rt_optimizer_set_shard) {
    bool owned[1] = {true};
    ST(RT_ERR_INVALID_ARG, "optimizer", rt_optimizer_set_shard(NULL, owned));
}
CHECK_FN(rt_optimizer_owns) { VAL(!rt_optimizer_owns(NULL, 0)); }

/* ------------------------------------------------------------ dist/dist.h
 * Only the argument checks: they come before any MPI call, so this runs
 * without MPI_Init (tests/mpi_dist.c runs the rest under mpirun). */
#ifdef RT_HAVE_MPI
#define RT_TEST_COMM MPI_COMM_WORLD
#else
#define RT_TEST_COMM 0
#endif
CHECK_FN(rt_dist_create) {
    rt_module *m = linear_module(RT_DEVICE_CPU);
    rt_state_dict *sd = NULL;
    rt_module_state_dict(m, &sd);
    rt_tensor *params[2];
    rt_state_dict_params(sd, params, 2);
    rt_optimizer *opt = rt_sgd_create(params, 2, &(rt_sgd_opts){.lr = 0.1});
    rt_dist *d = (rt_dist *)&d;
    rt_dist_options o = {0}, bad = {.bucket_mb = -1};
    ST(RT_ERR_INVALID_ARG, "opt", rt_dist_create(RT_TEST_COMM, NULL, &o, &d));
    VAL(d == NULL);
    ST(RT_ERR_INVALID_ARG, "o", rt_dist_create(RT_TEST_COMM, opt, NULL, &d));
    ST(RT_ERR_INVALID_ARG, "out", rt_dist_create(RT_TEST_COMM, opt, &o, NULL));
#ifdef RT_HAVE_MPI
    ST(RT_ERR_INVALID_ARG, "bucket_mb", rt_dist_create(RT_TEST_COMM, opt, &bad, &d));
#else
    (void)bad;
    ST(RT_ERR_UNSUPPORTED, "without MPI", rt_dist_create(RT_TEST_COMM, opt, &o, &d));
#endif
    rt_optimizer_destroy(opt);
    rt_state_dict_destroy(sd);
    rt_module_destroy(m);
}
CHECK_FN(rt_dist_destroy) { TOL(rt_dist_destroy(NULL)); }
CHECK_FN(rt_dist_rank) { VAL(rt_dist_rank(NULL) == 0); }
CHECK_FN(rt_dist_size) { VAL(rt_dist_size(NULL) == 1); }
CHECK_FN(rt_dist_attach) {
    rt_train_config cfg = {.accum_steps = 1};
    ST(RT_ERR_INVALID_ARG, "d", rt_dist_attach(NULL, &cfg));
}
CHECK_FN(rt_dist_check_same) { ST(RT_ERR_INVALID_ARG, "d", rt_dist_check_same(NULL, "x", "y", 1)); }
CHECK_FN(rt_dist_barrier) { ST(RT_ERR_INVALID_ARG, "d", rt_dist_barrier(NULL, 0)); }
CHECK_FN(rt_dist_sum) {
    double v = 0;
    ST(RT_ERR_INVALID_ARG, "d", rt_dist_sum(NULL, &v, 1));
}
CHECK_FN(rt_dist_shard) {
    int64_t first = -1, count = -1;
    ST(RT_ERR_INVALID_ARG, "first", rt_dist_shard(10, 0, 2, NULL, &count));
    ST(RT_ERR_INVALID_ARG, "count", rt_dist_shard(10, 0, 2, &first, NULL));
    ST(RT_ERR_INVALID_ARG, "rank", rt_dist_shard(10, 2, 2, &first, &count));
    ST(RT_ERR_INVALID_ARG, "size", rt_dist_shard(10, 0, 0, &first, &count));
    ST(RT_ERR_INVALID_ARG, "n", rt_dist_shard(-1, 0, 1, &first, &count));
    ST(RT_OK, NULL, rt_dist_shard(10, 1, 3, &first, &count));
    VAL(first == 3 && count == 3);
}
CHECK_FN(rt_dist_gather_state) { ST(RT_ERR_INVALID_ARG, "d", rt_dist_gather_state(NULL, NULL)); }
CHECK_FN(rt_dist_scatter_state) { ST(RT_ERR_INVALID_ARG, "d", rt_dist_scatter_state(NULL, NULL)); }
CHECK_FN(rt_sync_batch_norm) {
    rt_tensor *x = T(2, 3, 2, 2), *w = T(3), *b = T(3), *rm = T(3), *rv = T(3), *y = NULL;
    ST(RT_ERR_INVALID_ARG, "d", rt_sync_batch_norm(NULL, x, w, b, rm, rv, NULL, true, 0.1f, 1e-5f, &y));
}
CHECK_FN(rt_dist_convert_sync_batchnorm) {
    rt_module *m = linear_module(RT_DEVICE_CPU);
    ST(RT_ERR_INVALID_ARG, "d", rt_dist_convert_sync_batchnorm(NULL, m));
    rt_module_destroy(m);
}
CHECK_FN(rt_dist_stats_get) {
    rt_dist_stats st = {.steps = 5};
    TOL(rt_dist_stats_get(NULL, &st));
    VAL(st.steps == 0);
    TOL(rt_dist_stats_get(NULL, NULL));
}

/* ------------------------------------------------------------ optim/schedule.h */

CHECK_FN(rt_lr_schedule_check) {
    rt_lr_schedule cosine = {.kind = RT_LR_COSINE, .base_lr = 0.1, .t_max = 0};
    rt_lr_schedule unknown = {.kind = (rt_lr_kind)9, .base_lr = 0.1};
    ST(RT_ERR_INVALID_ARG, "schedule", rt_lr_schedule_check(NULL));
    ST(RT_ERR_INVALID_ARG, "t_max", rt_lr_schedule_check(&cosine));
    ST(RT_ERR_INVALID_ARG, "kind", rt_lr_schedule_check(&unknown));
}

CHECK_FN(rt_lr_at) {
    rt_lr_schedule s = {.kind = RT_LR_CONSTANT, .base_lr = 0.1};
    VAL(isnan(rt_lr_at(NULL, 0)));
    VAL(isnan(rt_lr_at(&s, -1)));
}

/* ------------------------------------------------------------ train/step.h */

CHECK_FN(rt_train_step) {
    rt_module *net = linear_module(RT_DEVICE_CPU);
    rt_state_dict *sd = NULL;
    rt_module_state_dict(net, &sd);
    rt_tensor *params[2];
    rt_state_dict_params(sd, params, 2);
    rt_optimizer *opt = rt_sgd_create(params, rt_state_dict_num_params(sd), &(rt_sgd_opts){.lr = 0.1});
    rt_train_config cfg = {.accum_steps = 1}, zero = {.accum_steps = 0};
    rt_train_result r;
    rt_tensor *x = T(2, 3), *y = labels(2, 2);
    ST(RT_ERR_INVALID_ARG, "module", rt_train_step(NULL, opt, &cfg, x, y, &r));
    ST(RT_ERR_INVALID_ARG, "optimizer", rt_train_step(net, NULL, &cfg, x, y, &r));
    ST(RT_ERR_INVALID_ARG, "config", rt_train_step(net, opt, NULL, x, y, &r));
    ST(RT_ERR_INVALID_ARG, "x", rt_train_step(net, opt, &cfg, NULL, y, &r));
    ST(RT_ERR_INVALID_ARG, "y", rt_train_step(net, opt, &cfg, x, NULL, &r));
    ST(RT_ERR_INVALID_ARG, "out", rt_train_step(net, opt, &cfg, x, y, NULL));
    ST(RT_ERR_INVALID_ARG, "accum_steps", rt_train_step(net, opt, &zero, x, y, &r));
    ST(RT_ERR_INVALID_ARG, "samples", rt_train_step(net, opt, &cfg, x, labels(3, 2), &r));
    rt_optimizer_destroy(opt);
    rt_state_dict_destroy(sd);
    rt_module_destroy(net);
}

CHECK_FN(rt_count_correct) {
    rt_tensor *z = T(2, 3), *t = labels(2, 3);
    VAL(rt_count_correct(NULL, t) == 0);
    VAL(rt_count_correct(z, NULL) == 0);
    VAL(rt_count_correct(z, labels(1, 3)) == 0); /* fewer labels than samples: nothing read past them */
    VAL(rt_count_correct(z, T(2)) == 0);         /* labels not int32 */
}

CHECK_FN(rt_batch_slice) {
    rt_tensor *x = T(4, 3);
    NUL(RT_ERR_INVALID_ARG, "batch", rt_batch_slice(NULL, 0, 1));
    NUL(RT_ERR_INVALID_ARG, "outside", rt_batch_slice(x, 0, 0));
    NUL(RT_ERR_INVALID_ARG, "outside", rt_batch_slice(x, -1, 2));
    NUL(RT_ERR_INVALID_ARG, "outside", rt_batch_slice(x, 3, 2));
}

/* ------------------------------------------------------------ mixed precision:
 * core/dtype.h rt_dtype_round(_into), autograd/node.h autocast dtype,
 * kernels/conv.h bf16 probe, memory/precision.h, train/scaler.h */

CHECK_FN(rt_dtype_round) {
    float v[2] = {1.0f, 2.0f};
    ST(RT_ERR_INVALID_ARG, "buffer", rt_dtype_round(NULL, RT_BF16, 2));
    ST(RT_OK, NULL, rt_dtype_round(NULL, RT_BF16, 0));
    ST(RT_ERR_DTYPE, "floating-point", rt_dtype_round(v, RT_I32, 2));
    ST(RT_ERR_DTYPE, "floating-point", rt_dtype_round(v, (rt_dtype)42, 2));
}

CHECK_FN(rt_dtype_round_into) {
    float v[2] = {1.0f, 2.0f}, w[2];
    ST(RT_ERR_INVALID_ARG, "source buffer", rt_dtype_round_into(NULL, w, RT_BF16, 2));
    ST(RT_ERR_INVALID_ARG, "destination buffer", rt_dtype_round_into(v, NULL, RT_BF16, 2));
    ST(RT_OK, NULL, rt_dtype_round_into(NULL, NULL, RT_BF16, 0));
    ST(RT_ERR_DTYPE, "floating-point", rt_dtype_round_into(v, w, RT_U8, 2));
}

CHECK_FN(rt_bf16_round_bits) {
    VAL(rt_bf16_round_bits(0x3f808000u) == 0x3f800000u); /* a tie goes to the even upper half */
    VAL(rt_bf16_round_bits(0x3f818000u) == 0x3f820000u);
    VAL(rt_bf16_round_bits(0x7f800001u) == 0x7fc00000u); /* a signalling NaN is quietened, stays NaN */
}

CHECK_FN(rt_dtype_store_f32_serial) {
    float v = 1.0f;
    uint16_t h = 7;
    rt_dtype_store_f32_serial(&v, &h, RT_U8, 1); /* not a type it stores: nothing written */
    rt_dtype_store_f32_serial(NULL, NULL, RT_BF16, 0);
    VAL(h == 7);
}

CHECK_FN(rt_autocast_dtype) { VAL(rt_autocast_dtype() == RT_F32); }

CHECK_FN(rt_autocast_set_dtype) {
    VAL(rt_autocast_set_dtype((rt_dtype)42) == RT_F32); /* an unknown value is F32 */
    VAL(rt_autocast_set_dtype(RT_I32) == RT_F32);
    VAL(rt_autocast_dtype() == RT_F32);
}

CHECK_FN(rt_autocast_compute_dtype) { VAL(rt_autocast_compute_dtype() == RT_F32); }

CHECK_FN(rt_autocast_set_compute_dtype) {
    VAL(rt_autocast_set_compute_dtype(RT_F16) == RT_F32); /* only bf16 computes reduced */
    VAL(rt_autocast_compute_dtype() == RT_F32);
}

CHECK_FN(rt_autocast_activation_dtype) { VAL(rt_autocast_activation_dtype() == RT_F32); }

CHECK_FN(rt_autocast_set_activation_dtype) {
    VAL(rt_autocast_set_activation_dtype(RT_F16) == RT_F32); /* only bf16 flows reduced */
    VAL(rt_autocast_activation_dtype() == RT_F32);
    VAL(rt_autocast_set_activation_dtype(RT_BF16) == RT_F32);
    VAL(rt_autocast_set_activation_dtype(RT_F32) == RT_BF16);
}

CHECK_FN(rt_precision_region_begin) {
    ST(RT_ERR_INVALID_ARG, "region", rt_precision_region_begin(NULL, RT_BF16, true));
    rt_precision_region r;
    VAL(rt_precision_region_begin(&r, RT_F32, true) == RT_OK && !r.active); /* f32: nothing entered */
    VAL(rt_saved_tensors_hooks_depth() == 0);
    rt_precision_region_end(&r);
}
CHECK_FN(rt_precision_region_end) {
    TOL(rt_precision_region_end(NULL));
    rt_precision_region r;
    VAL(rt_precision_region_begin(&r, RT_F16, false) == RT_OK && r.active && rt_saved_tensors_hooks_depth() == 1);
    rt_precision_region_end(&r);
    rt_precision_region_end(&r); /* twice: nothing left to undo */
    VAL(rt_saved_tensors_hooks_depth() == 0 && rt_autocast_dtype() == RT_F32);
}
CHECK_FN(rt_precision_region_suspend) { /* out and back in: the hooks and dtypes follow, the region stays */
    TOL(rt_precision_region_suspend(NULL));
    rt_precision_region r;
    VAL(rt_precision_region_begin(&r, RT_BF16, true) == RT_OK && rt_autocast_dtype() == RT_BF16);
    rt_precision_region_suspend(&r);
    VAL(r.active && rt_saved_tensors_hooks_depth() == 0 && rt_autocast_dtype() == RT_F32);
    rt_precision_region_suspend(&r); /* twice: nothing more to leave */
    VAL(rt_saved_tensors_hooks_depth() == 0);
    rt_precision_region_end(&r); /* ends a suspended region without leaving it again */
    VAL(!r.active && rt_saved_tensors_hooks_depth() == 0 && rt_autocast_dtype() == RT_F32);
}
CHECK_FN(rt_precision_region_resume) {
    VAL(rt_precision_region_resume(NULL) == RT_OK);
    rt_precision_region r;
    VAL(rt_precision_region_begin(&r, RT_BF16, true) == RT_OK);
    VAL(rt_precision_region_resume(&r) == RT_OK && rt_saved_tensors_hooks_depth() == 1); /* not suspended */
    rt_precision_region_suspend(&r);
    VAL(rt_precision_region_resume(&r) == RT_OK && rt_saved_tensors_hooks_depth() == 1 &&
        rt_autocast_dtype() == RT_BF16 && rt_autocast_compute_dtype() == RT_BF16);
    rt_precision_region_end(&r);
    VAL(rt_saved_tensors_hooks_depth() == 0 && rt_autocast_dtype() == RT_F32);
}
CHECK_FN(rt_precision_region_forward) {
    rt_module *m = linear_module(RT_DEVICE_CPU);
    rt_tensor *x = T(2, 3), *y = NULL;
    ST(RT_ERR_INVALID_ARG, "module", rt_precision_region_forward(NULL, RT_BF16, true, x, &y));
    ST(RT_ERR_INVALID_ARG, "x", rt_precision_region_forward(m, RT_BF16, true, NULL, &y));
    ST(RT_ERR_INVALID_ARG, "y", rt_precision_region_forward(m, RT_BF16, true, x, NULL));
    rt_module_destroy(m);
}

CHECK_FN(rt_conv_bf16_available) { TOL(rt_conv_bf16_available()); }

CHECK_FN(rt_conv_computes_bf16) { VAL(!rt_conv_computes_bf16(NULL)); }

CHECK_FN(rt_precision_str) { VAL(strcmp(rt_precision_str((rt_precision)9), "?") == 0); }

CHECK_FN(rt_precision_parse) {
    rt_precision p;
    ST(RT_ERR_INVALID_ARG, "name", rt_precision_parse(NULL, &p));
    ST(RT_ERR_INVALID_ARG, "out", rt_precision_parse("bf16", NULL));
    ST(RT_ERR_INVALID_ARG, "precision", rt_precision_parse("fp8", &p));
}

CHECK_FN(rt_precision_dtype) { VAL(rt_precision_dtype((rt_precision)9) == RT_F32); }

CHECK_FN(rt_autocast_wrap) {
    rt_module *out = NULL;
    ST(RT_ERR_INVALID_ARG, "module", rt_autocast_wrap(NULL, RT_PRECISION_BF16, &out));
    ST(RT_ERR_INVALID_ARG, "out", rt_autocast_wrap(linear_module(RT_DEVICE_CPU), RT_PRECISION_BF16, NULL));
    ST(RT_ERR_INVALID_ARG, "precision", rt_autocast_wrap(linear_module(RT_DEVICE_CPU), (rt_precision)9, &out));
}

CHECK_FN(rt_autocast_precision) { VAL(rt_autocast_precision(NULL) == RT_PRECISION_FP32); }

CHECK_FN(rt_precision_describe) {
    char buf[8] = "x";
    VAL(rt_precision_describe(RT_PRECISION_BF16, NULL, 10) == NULL);
    VAL(rt_precision_describe(RT_PRECISION_BF16, buf, 0) == buf && buf[0] == 'x');
    VAL(rt_precision_describe(RT_PRECISION_FP16, buf, sizeof buf) == buf && strlen(buf) == sizeof buf - 1);
}

CHECK_FN(rt_grad_scaler_default_opts) { VAL(rt_grad_scaler_default_opts().init_scale == 65536.0f); }

CHECK_FN(rt_grad_scaler_create) {
    rt_grad_scaler_opts o = rt_grad_scaler_default_opts();
    o.backoff_factor = 1.0f;
    NUL(RT_ERR_INVALID_ARG, "backoff_factor", rt_grad_scaler_create(&o));
    o = rt_grad_scaler_default_opts();
    o.growth_interval = 0;
    NUL(RT_ERR_INVALID_ARG, "growth_interval", rt_grad_scaler_create(&o));
    o = rt_grad_scaler_default_opts();
    o.init_scale = NAN;
    NUL(RT_ERR_INVALID_ARG, "init_scale", rt_grad_scaler_create(&o));
}

CHECK_FN(rt_grad_scaler_destroy) { TOL(rt_grad_scaler_destroy(NULL)); }
CHECK_FN(rt_grad_scaler_get_scale) { VAL(rt_grad_scaler_get_scale(NULL) == 0.0f); }
CHECK_FN(rt_grad_scaler_skipped) { VAL(rt_grad_scaler_skipped(NULL) == 0); }
CHECK_FN(rt_grad_scaler_skipped_in_row) { VAL(rt_grad_scaler_skipped_in_row(NULL) == 0); }

CHECK_FN(rt_grad_scaler_unscale) {
    rt_grad_scaler *s = rt_grad_scaler_create(NULL);
    bool inf;
    ST(RT_ERR_INVALID_ARG, "scaler", rt_grad_scaler_unscale(NULL, NULL, 0, &inf));
    ST(RT_ERR_INVALID_ARG, "params", rt_grad_scaler_unscale(s, NULL, 2, &inf));
    ST(RT_OK, NULL, rt_grad_scaler_unscale(s, NULL, 0, NULL));
    ST(RT_ERR_STATE, "already", rt_grad_scaler_unscale(s, NULL, 0, NULL));
    rt_grad_scaler_destroy(s);
}

CHECK_FN(rt_grad_scaler_update) { ST(RT_ERR_INVALID_ARG, "scaler", rt_grad_scaler_update(NULL)); }

CHECK_FN(rt_grad_scaler_hooks) {
    rt_train_hooks h = rt_grad_scaler_hooks(NULL);
    VAL(!h.loss_scale && !h.before_step && !h.after_step && !h.user);
}

CHECK_FN(rt_grad_scaler_state_get) {
    ST(RT_ERR_INVALID_ARG, "scaler", rt_grad_scaler_state_get(NULL, NULL, NULL, NULL));
}

CHECK_FN(rt_grad_scaler_state_set) {
    rt_grad_scaler *s = rt_grad_scaler_create(NULL);
    ST(RT_ERR_INVALID_ARG, "scaler", rt_grad_scaler_state_set(NULL, 1.0f, 0, 0));
    ST(RT_ERR_INVALID_ARG, "scale", rt_grad_scaler_state_set(s, 0.0f, 0, 0));
    ST(RT_ERR_INVALID_ARG, "counts", rt_grad_scaler_state_set(s, 1.0f, -1, 0));
    rt_grad_scaler_destroy(s);
}

/* ------------------------------------------------------------ memory/predict.h */

/* memory/reversible.h */
static rt_module *rev_block(void) {
    rt_module *f = NULL, *g = NULL, *b = NULL;
    if (rt_relu_create(&f) || rt_relu_create(&g) || rt_rev_block_create(f, g, RT_COUPLING_ADDITIVE, &b)) abort();
    return b;
}

CHECK_FN(rt_rev_block_create) {
    rt_module *f = NULL, *g = NULL, *m = NULL;
    rt_relu_create(&f);
    ST(RT_ERR_INVALID_ARG, "F and G", rt_rev_block_create(f, NULL, RT_COUPLING_ADDITIVE, &m)); /* frees f */
    rt_relu_create(&g);
    ST(RT_ERR_INVALID_ARG, "F and G", rt_rev_block_create(NULL, g, RT_COUPLING_ADDITIVE, &m)); /* frees g */
    rt_relu_create(&f);
    rt_relu_create(&g);
    ST(RT_ERR_INVALID_ARG, "output", rt_rev_block_create(f, g, RT_COUPLING_ADDITIVE, NULL)); /* frees both */
    rt_relu_create(&f);
    rt_relu_create(&g);
    ST(RT_ERR_INVALID_ARG, "coupling", rt_rev_block_create(f, g, (rt_coupling)7, &m));
}
CHECK_FN(rt_rev_block_of) { VAL(rt_rev_block_of(NULL) == NULL); }
CHECK_FN(rt_rev_block_set_channels_last) {
    ST(RT_ERR_INVALID_ARG, "ReversibleBlock", rt_rev_block_set_channels_last(NULL, true));
}
CHECK_FN(rt_rev_block_inverse) {
    rt_module *b = rev_block(), *relu = NULL;
    rt_tensor *t = T(2, 4), *out = NULL;
    rt_relu_create(&relu);
    ST(RT_ERR_INVALID_ARG, "ReversibleBlock", rt_rev_block_inverse(NULL, t, &out));
    ST(RT_ERR_INVALID_ARG, "ReversibleBlock", rt_rev_block_inverse(relu, t, &out));
    ST(RT_ERR_INVALID_ARG, "y", rt_rev_block_inverse(b, NULL, &out));
    ST(RT_ERR_INVALID_ARG, "output", rt_rev_block_inverse(b, t, NULL));
    rt_module_destroy(relu);
    rt_module_destroy(b);
}
CHECK_FN(rt_rev_block_check) {
    rt_module *b = rev_block();
    rt_tensor *t = T(2, 4);
    float e1, e2;
    ST(RT_ERR_INVALID_ARG, "ReversibleBlock", rt_rev_block_check(NULL, t, &e1, &e2));
    ST(RT_ERR_INVALID_ARG, "x", rt_rev_block_check(b, NULL, &e1, &e2));
    ST(RT_ERR_INVALID_ARG, "output", rt_rev_block_check(b, t, NULL, &e2));
    ST(RT_ERR_INVALID_ARG, "err_fwd_inv", rt_rev_block_check(b, t, &e1, NULL));
    rt_module_destroy(b);
}
CHECK_FN(rt_rev_block_logdet) {
    rt_module *b = rev_block();
    rt_tensor *t = T(2, 4), *out = NULL;
    ST(RT_ERR_INVALID_ARG, "ReversibleBlock", rt_rev_block_logdet(NULL, t, &out));
    ST(RT_ERR_INVALID_ARG, "x", rt_rev_block_logdet(b, NULL, &out));
    ST(RT_ERR_INVALID_ARG, "output", rt_rev_block_logdet(b, t, NULL));
    rt_module_destroy(b);
}
CHECK_FN(rt_rev_sequence_create) { ST(RT_ERR_INVALID_ARG, "output", rt_rev_sequence_create(NULL)); }
CHECK_FN(rt_rev_sequence_of) { VAL(rt_rev_sequence_of(NULL) == NULL); }
CHECK_FN(rt_rev_sequence_defer_output) {
    ST(RT_ERR_INVALID_ARG, "ReversibleSequence", rt_rev_sequence_defer_output(NULL, true));
}
CHECK_FN(rt_rev_sequence_give_output) { /* nothing is taken over on error */
    rt_module *seq = NULL;
    rt_rev_sequence_create(&seq);
    rt_tensor *t = T(2, 4);
    ST(RT_ERR_INVALID_ARG, "ReversibleSequence", rt_rev_sequence_give_output(NULL, t, t));
    ST(RT_ERR_INVALID_ARG, "non-NULL", rt_rev_sequence_give_output(seq, t, NULL));
    ST(RT_ERR_INVALID_ARG, "non-NULL", rt_rev_sequence_give_output(seq, NULL, t));
    VAL(t->refcount == 1);
    rt_module_destroy(seq);
}
CHECK_FN(rt_rev_sequence_on_input_rebuilt) {
    ST(RT_ERR_INVALID_ARG, "ReversibleSequence", rt_rev_sequence_on_input_rebuilt(NULL, NULL, NULL));
}
CHECK_FN(rt_module_set_reversible) { TOL(rt_module_set_reversible(NULL, true)); }
CHECK_FN(rt_module_set_grouping) {
    rt_module *seq = NULL;
    rt_rev_sequence_create(&seq);
    ST(RT_ERR_INVALID_ARG, "module", rt_module_set_grouping(NULL, RT_GROUPING_FULL, 0));
    ST(RT_ERR_INVALID_ARG, "k >= 1", rt_module_set_grouping(seq, RT_GROUPING_EVERY, 0));
    ST(RT_ERR_INVALID_ARG, "grouping", rt_module_set_grouping(seq, (rt_grouping)9, 1));
    rt_module_destroy(seq);
}
CHECK_FN(rt_module_count_reversible) { VAL(rt_module_count_reversible(NULL) == 0); }
CHECK_FN(rt_checkpoint_run_stages) {
    rt_module *m = NULL, *ck = NULL;
    rt_tensor *t = T(2, 4), *out = NULL;
    ST(RT_ERR_INVALID_ARG, "Checkpoint", rt_checkpoint_run_stages(NULL, 0, 0, t, &out));
    rt_relu_create(&m);
    rt_checkpoint_create(m, &ck);
    ST(RT_ERR_INVALID_ARG, "x", rt_checkpoint_run_stages(ck, 0, 0, NULL, &out));
    ST(RT_ERR_INVALID_ARG, "y", rt_checkpoint_run_stages(ck, 0, 0, t, NULL));
    ST(RT_ERR_INVALID_ARG, "outside", rt_checkpoint_run_stages(ck, 0, 3, t, &out));
    rt_module_destroy(ck);
}
/* memory/planner.h, memory/budget.h */
CHECK_FN(rt_plan_options_all) { VAL(rt_plan_options_all().allow_checkpoint); }
CHECK_FN(rt_plan_evaluate) {
    rt_stage_profile p = {0, 1, 2, -1, -1, -1, -1, 1, 0, 0, 0, 0, -1, {false}, {false}};
    rt_stage_kind k = RT_STAGE_STORE;
    int seg = 0;
    int64_t peak;
    double rc;
    ST(RT_ERR_INVALID_ARG, "NULL", rt_plan_evaluate(NULL, 1, &k, &seg, &peak, &rc));
    ST(RT_ERR_INVALID_ARG, "NULL", rt_plan_evaluate(&p, 1, NULL, &seg, &peak, &rc));
    ST(RT_ERR_INVALID_ARG, "n must", rt_plan_evaluate(&p, 0, &k, &seg, &peak, &rc));
}
CHECK_FN(rt_plan_chain) {
    rt_stage_profile p = {0, 1, 2, -1, -1, -1, -1, 1, 0, 0, 0, 0, -1, {false}, {false}};
    rt_plan plan;
    ST(RT_ERR_INVALID_ARG, "profile", rt_plan_chain(NULL, 1, 10, rt_plan_options_all(), &plan));
    ST(RT_ERR_INVALID_ARG, "output", rt_plan_chain(&p, 1, 10, rt_plan_options_all(), NULL));
    ST(RT_ERR_INVALID_ARG, "n >= 1", rt_plan_chain(&p, 0, 10, rt_plan_options_all(), &plan));
}
CHECK_FN(rt_plan_min_peak) {
    int64_t mp;
    ST(RT_ERR_INVALID_ARG, "profile", rt_plan_min_peak(NULL, 1, rt_plan_options_all(), &mp));
}
CHECK_FN(rt_plan_free) { TOL(rt_plan_free(NULL)); }
CHECK_FN(rt_predict_cache_find) {
    rt_predict_cache pc = {.n_stages = 1};
    rt_stage_kind k = RT_STAGE_STORE;
    int seg = 0;
    VAL(rt_predict_cache_find(NULL, &k, &seg) == NULL);
    VAL(rt_predict_cache_find(&pc, NULL, &seg) == NULL);
    VAL(rt_predict_cache_find(&pc, &k, NULL) == NULL);
}
CHECK_FN(rt_predict_cache_add) {
    rt_predict_cache pc = {.n_stages = 1};
    rt_stage_kind k = RT_STAGE_STORE;
    int seg = 0;
    rt_memstats m = {0};
    TOL(rt_predict_cache_add(NULL, &k, &seg, &m));
    TOL(rt_predict_cache_add(&pc, NULL, &seg, &m));
    TOL(rt_predict_cache_add(&pc, &k, NULL, &m));
    TOL(rt_predict_cache_add(&pc, &k, &seg, NULL));
    VAL(pc.len == 0);
    rt_predict_cache_add(&pc, &k, &seg, &m); /* a real entry is found again */
    VAL(rt_predict_cache_find(&pc, &k, &seg) != NULL);
    rt_predict_cache_free(&pc);
}
CHECK_FN(rt_predict_cache_free) { TOL(rt_predict_cache_free(NULL)); }
CHECK_FN(rt_chain_cache_plan) {
    rt_stage_profile p = {0, 1, 2, -1, -1, -1, -1, 1, 0, 0, 0, 0, -1, {false}, {false}};
    rt_chain_cache cc = {0};
    rt_plan plan;
    ST(RT_ERR_INVALID_ARG, "profile", rt_chain_cache_plan(&cc, NULL, 1, 10, rt_plan_options_all(), &plan));
    ST(RT_ERR_INVALID_ARG, "output", rt_chain_cache_plan(&cc, &p, 1, 10, rt_plan_options_all(), NULL));
    ST(RT_ERR_INVALID_ARG, "n >= 1", rt_chain_cache_plan(&cc, &p, 0, 10, rt_plan_options_all(), &plan));
    rt_chain_cache_free(&cc);
}
CHECK_FN(rt_chain_cache_free) { TOL(rt_chain_cache_free(NULL)); }
CHECK_FN(rt_time_plan_plain) {
    rt_time_plan p;
    ST(RT_ERR_INVALID_ARG, "steps >= 1", rt_time_plan_plain(4, 1, 1, NULL));
    ST(RT_ERR_INVALID_ARG, "steps >= 1", rt_time_plan_plain(0, 1, 1, &p));
}
CHECK_FN(rt_time_plan_every) {
    rt_time_plan p;
    ST(RT_ERR_INVALID_ARG, "k >= 1", rt_time_plan_every(4, 2, 1, 1, NULL));
    ST(RT_ERR_INVALID_ARG, "k >= 1", rt_time_plan_every(4, 0, 1, 1, &p));
}
CHECK_FN(rt_time_plan_budget) {
    rt_time_plan p;
    ST(RT_ERR_INVALID_ARG, "steps >= 1", rt_time_plan_budget(4, 1, 1, 100, NULL));
    ST(RT_ERR_INVALID_ARG, "byte sizes", rt_time_plan_budget(4, 0, 1, 100, &p));
    ST(RT_ERR_OOM, "least", rt_time_plan_budget(4, 10, 10, 5, &p));
}
static rt_status null_step(void *user, int t, rt_tensor *s, rt_tensor **next, rt_tensor **loss) {
    (void)user, (void)t, (void)s, (void)next, (void)loss;
    return rt_error_set(RT_ERR_STATE, "null_step: never called");
}
CHECK_FN(rt_time_chain_run) {
    rt_time_plan p;
    rt_time_plan_plain(2, 1, 1, &p);
    ST(RT_ERR_INVALID_ARG, "required", rt_time_chain_run(NULL, NULL, &p, T(2, 3), 1.0f, NULL));
    ST(RT_ERR_INVALID_ARG, "required", rt_time_chain_run(null_step, NULL, NULL, T(2, 3), 1.0f, NULL));
    ST(RT_ERR_INVALID_ARG, "required", rt_time_chain_run(null_step, NULL, &p, NULL, 1.0f, NULL));
    p.segment = 1;
    ST(RT_ERR_INVALID_ARG, "slot", rt_time_chain_run(null_step, NULL, &p, T(2, 3), 1.0f, NULL));
}
CHECK_FN(rt_time_chain_profile) {
    int64_t a, b;
    ST(RT_ERR_INVALID_ARG, "required", rt_time_chain_profile(null_step, NULL, T(2, 3), NULL, &b));
    ST(RT_ERR_INVALID_ARG, "required", rt_time_chain_profile(null_step, NULL, T(2, 3), &a, NULL));
    ST(RT_ERR_INVALID_ARG, "required", rt_time_chain_profile(NULL, NULL, T(2, 3), &a, &b));
}
CHECK_FN(rt_time_chain_peak) {
    rt_time_plan p;
    int64_t peak;
    rt_time_plan_plain(2, 1, 1, &p);
    ST(RT_ERR_INVALID_ARG, "peak", rt_time_chain_peak(null_step, NULL, &p, T(2, 3), 1.0f, NULL, NULL));
    ST(RT_ERR_INVALID_ARG, "required", rt_time_chain_peak(NULL, NULL, &p, T(2, 3), 1.0f, &peak, NULL));
}
CHECK_FN(rt_checkpoint_profile) {
    int64_t shape[2] = {2, 4};
    rt_stage_profile p;
    ST(RT_ERR_INVALID_ARG, "Checkpoint", rt_checkpoint_profile(NULL, 2, shape, &p));
}
CHECK_FN(rt_memory_mode_str) { VAL(rt_memory_mode_str((rt_memory_mode)42) == NULL); }
CHECK_FN(rt_memory_mode_parse) {
    rt_memory_mode m;
    ST(RT_ERR_INVALID_ARG, "s", rt_memory_mode_parse(NULL, &m));
    ST(RT_ERR_INVALID_ARG, "out", rt_memory_mode_parse("balanced", NULL));
    ST(RT_ERR_INVALID_ARG, "conservative", rt_memory_mode_parse("fast", &m));
}
CHECK_FN(rt_memory_mode_fraction) { VAL(rt_memory_mode_fraction((rt_memory_mode)42) == 1.0); }
CHECK_FN(rt_memory_plan_make) {
    rt_memory_config mc = {0};
    rt_memory_plan out;
    rt_optimizer_spec spec = {0};
    rt_train_config cfg = {0};
    int64_t x[2] = {2, 4}, y[1] = {2};
    ST(RT_ERR_INVALID_ARG, "Checkpoint", rt_memory_plan_make(NULL, &spec, &cfg, 2, x, 1, y, RT_I32, &mc, &out));
}
CHECK_FN(rt_memory_plan_free) { TOL(rt_memory_plan_free(NULL)); }
/* memory/checkpoint.h, nn/module.h's interceptor */
CHECK_FN(rt_module_set_interceptor) { TOL(rt_module_set_interceptor((rt_module_interceptor){0})); }
CHECK_FN(rt_checkpoint_side_put) {
    rt_module *m = NULL;
    rt_tensor *t = T(2, 4);
    bool stash = false;
    rt_relu_create(&m);
    ST(RT_ERR_INVALID_ARG, "producer", rt_checkpoint_side_put(NULL, t, &stash));
    ST(RT_ERR_INVALID_ARG, "t", rt_checkpoint_side_put(m, NULL, &stash));
    ST(RT_ERR_INVALID_ARG, "stash", rt_checkpoint_side_put(m, t, NULL));
    rt_module_destroy(m);
}
CHECK_FN(rt_checkpoint_side_get) {
    rt_module *m = NULL;
    rt_tensor *t = T(2, 4), *out = NULL;
    rt_relu_create(&m);
    ST(RT_ERR_INVALID_ARG, "producer", rt_checkpoint_side_get(NULL, t, &out));
    ST(RT_ERR_INVALID_ARG, "out", rt_checkpoint_side_get(m, t, NULL));
    ST(RT_ERR_STATE, "gone", rt_checkpoint_side_get(m, NULL, &out));
    rt_module_destroy(m);
}
CHECK_FN(rt_checkpoint_side_replay) { TOL(rt_checkpoint_side_replay(false)); }
CHECK_FN(rt_checkpoint_policy_default) { VAL(rt_checkpoint_policy_default(NULL, NULL) == RT_CKPT_PREFER_RECOMPUTE); }
CHECK_FN(rt_stage_kind_str) { VAL(!strcmp(rt_stage_kind_str((rt_stage_kind)99), "?")); }
CHECK_FN(rt_checkpoint_create) {
    rt_module *m = NULL, *out = NULL;
    ST(RT_ERR_INVALID_ARG, "module", rt_checkpoint_create(NULL, &out));
    rt_relu_create(&m);
    ST(RT_ERR_INVALID_ARG, "out", rt_checkpoint_create(m, NULL)); /* m is destroyed */
}
CHECK_FN(rt_checkpoint_of) { VAL(rt_checkpoint_of(NULL) == NULL); }
CHECK_FN(rt_checkpoint_sequential) {
    rt_module *m = NULL, *out = NULL;
    ST(RT_ERR_INVALID_ARG, "module", rt_checkpoint_sequential(NULL, 2, &out));
    rt_relu_create(&m);
    ST(RT_ERR_INVALID_ARG, "segments", rt_checkpoint_sequential(m, 0, &out));
}
CHECK_FN(rt_checkpoint_set_segments) {
    rt_module *m = NULL, *ck = NULL;
    ST(RT_ERR_INVALID_ARG, "Checkpoint", rt_checkpoint_set_segments(NULL, 2));
    rt_relu_create(&m);
    rt_checkpoint_create(m, &ck);
    ST(RT_ERR_INVALID_ARG, "segments", rt_checkpoint_set_segments(ck, 0));
    rt_module_destroy(ck);
}
CHECK_FN(rt_checkpoint_set_selective) { ST(RT_ERR_INVALID_ARG, "Checkpoint", rt_checkpoint_set_selective(NULL, NULL, NULL)); }
CHECK_FN(rt_checkpoint_set_plain) { ST(RT_ERR_INVALID_ARG, "Checkpoint", rt_checkpoint_set_plain(NULL)); }
CHECK_FN(rt_checkpoint_set_plan) {
    rt_module *m = NULL, *ck = NULL;
    rt_stage_kind k = RT_STAGE_STORE;
    int seg = 0;
    ST(RT_ERR_INVALID_ARG, "Checkpoint", rt_checkpoint_set_plan(NULL, &k, &seg, 1));
    rt_relu_create(&m);
    rt_checkpoint_create(m, &ck);
    ST(RT_ERR_INVALID_ARG, "kind", rt_checkpoint_set_plan(ck, NULL, &seg, 1));
    ST(RT_ERR_INVALID_ARG, "segment", rt_checkpoint_set_plan(ck, &k, NULL, 1));
    ST(RT_ERR_INVALID_ARG, "stages", rt_checkpoint_set_plan(ck, &k, &seg, 2));
    k = RT_STAGE_REBUILD;
    ST(RT_ERR_INVALID_ARG, "rebuilt", rt_checkpoint_set_plan(ck, &k, &seg, 1));
    rt_module_destroy(ck);
}
CHECK_FN(rt_reversible_reconstruction) {
    rt_module *seq = NULL;
    rt_rev_sequence_create(&seq);
    rt_tensor *t = T(2, 4);
    double a, b;
    char worst[32];
    ST(RT_ERR_INVALID_ARG, "module", rt_reversible_reconstruction(NULL, t, &a, &b, worst, sizeof worst));
    ST(RT_ERR_INVALID_ARG, "x", rt_reversible_reconstruction(seq, NULL, &a, &b, worst, sizeof worst));
    ST(RT_ERR_INVALID_ARG, "block_err", rt_reversible_reconstruction(seq, t, NULL, &b, worst, sizeof worst));
    ST(RT_ERR_INVALID_ARG, "chain_err", rt_reversible_reconstruction(seq, t, &a, NULL, worst, sizeof worst));
    ST(RT_ERR_INVALID_ARG, "worst_block", rt_reversible_reconstruction(seq, t, &a, &b, NULL, 8));
    rt_module_destroy(seq);
}

CHECK_FN(rt_memory_predict) {
    rt_module *meta = linear_module(RT_DEVICE_META), *cpu = linear_module(RT_DEVICE_CPU);
    rt_optimizer_spec spec = {.kind = RT_OPTIM_SGD, .sgd = rt_sgd_default_opts(0.1)};
    rt_train_config cfg = {.accum_steps = 1};
    const int64_t xs[2] = {2, 3}, ys[1] = {2};
    rt_memstats p;
    ST(RT_ERR_INVALID_ARG, "meta_net", rt_memory_predict(NULL, &spec, &cfg, 2, xs, 1, ys, RT_I32, &p));
    ST(RT_ERR_INVALID_ARG, "spec", rt_memory_predict(meta, NULL, &cfg, 2, xs, 1, ys, RT_I32, &p));
    ST(RT_ERR_INVALID_ARG, "config", rt_memory_predict(meta, &spec, NULL, 2, xs, 1, ys, RT_I32, &p));
    ST(RT_ERR_INVALID_ARG, "x_shape", rt_memory_predict(meta, &spec, &cfg, 2, NULL, 1, ys, RT_I32, &p));
    ST(RT_ERR_INVALID_ARG, "y_shape", rt_memory_predict(meta, &spec, &cfg, 2, xs, 1, NULL, RT_I32, &p));
    ST(RT_ERR_INVALID_ARG, "peaks", rt_memory_predict(meta, &spec, &cfg, 2, xs, 1, ys, RT_I32, NULL));
    ST(RT_ERR_SHAPE, "dimensions", rt_memory_predict(meta, &spec, &cfg, 7, xs, 1, ys, RT_I32, &p));
    ST(RT_ERR_DTYPE, "dtype", rt_memory_predict(meta, &spec, &cfg, 2, xs, 1, ys, (rt_dtype)99, &p));
    ST(RT_ERR_INVALID_ARG, "meta", rt_memory_predict(cpu, &spec, &cfg, 2, xs, 1, ys, RT_I32, &p));
    rt_module_destroy(meta);
    rt_module_destroy(cpu);
}

/* ------------------------------------------------------------ data/dataset.h */

/* A dataset of 4 one-channel 2x2 images, labels 0, 1, 0, 1 (destroy it). */
static rt_dataset *small_dataset(void) {
    uint8_t images[16] = {0};
    int32_t labs[4] = {0, 1, 0, 1};
    rt_dataset *ds = NULL;
    if (rt_dataset_from_arrays(4, 1, 2, 2, 2, images, labs, &ds) != RT_OK) abort();
    return ds;
}

/* The (1, 2, 2) u8 sample shape of small_dataset. */
static rt_sample_shape small_shape(void) { return (rt_sample_shape){3, {1, 2, 2, 0}, RT_U8}; }

/* A dataset implementation without state: zero inputs, label i % 2. */
static rt_status zero_read(const rt_dataset *ds, int64_t i, void *input, int32_t *label) {
    memset(input, 0, rt_sample_nbytes(&ds->shape));
    *label = (int32_t)(i % 2);
    return RT_OK;
}
/* One whose read answers a label outside [0, num_classes). */
static rt_status bad_label_read(const rt_dataset *ds, int64_t i, void *input, int32_t *label) {
    (void)i;
    memset(input, 0, rt_sample_nbytes(&ds->shape));
    *label = 7;
    return RT_OK;
}
/* Arrays that claim to exist but point nowhere. */
static bool null_arrays(const rt_dataset *ds, rt_dataset_arrays *out) {
    (void)ds;
    out->inputs = NULL;
    out->labels = NULL;
    return true;
}
static const rt_dataset_ops zero_ops = {.name = "api_null", .read = zero_read};
static const rt_dataset_ops no_read_ops = {.name = "api_null"};
static const rt_dataset_ops bad_label_ops = {.name = "api_null", .read = bad_label_read};
static const rt_dataset_ops null_arrays_ops = {.name = "api_null", .read = zero_read, .arrays = null_arrays};

/* A dataset of n samples of small_shape through `ops` (no state; destroy it). */
static rt_dataset *ops_dataset(const rt_dataset_ops *ops, int64_t n) {
    const rt_sample_shape sh = small_shape();
    rt_dataset *ds = NULL;
    if (rt_dataset_create(ops, NULL, n, &sh, 2, &ds) != RT_OK) abort();
    return ds;
}

CHECK_FN(rt_sample_numel) {
    rt_sample_shape s = small_shape();
    VAL(rt_sample_numel(NULL) == 0);
    VAL(rt_sample_numel(&s) == 4);
    s.ndim = 0;
    VAL(rt_sample_numel(&s) == 0);
    s.ndim = -1;
    VAL(rt_sample_numel(&s) == 0);
    s.ndim = 99; /* would read past dims */
    VAL(rt_sample_numel(&s) == 0);
    s = (rt_sample_shape){3, {1, 0, 2, 0}, RT_U8};
    VAL(rt_sample_numel(&s) == 0);
    s = (rt_sample_shape){3, {1, -2, 2, 0}, RT_U8};
    VAL(rt_sample_numel(&s) == 0);
    s = (rt_sample_shape){4, {8, INT64_C(1) << 20, INT64_C(1) << 20, 2}, RT_U8}; /* 2^44 elements */
    VAL(rt_sample_numel(&s) == 0);
    s = (rt_sample_shape){2, {INT64_MAX, INT64_MAX, 0, 0}, RT_U8};
    VAL(rt_sample_numel(&s) == 0);
}

CHECK_FN(rt_sample_nbytes) {
    rt_sample_shape s = {3, {1, 2, 2, 0}, RT_F32};
    VAL(rt_sample_nbytes(NULL) == 0);
    VAL(rt_sample_nbytes(&s) == 16);
    s.dtype = (rt_dtype)99;
    VAL(rt_sample_nbytes(&s) == 0);
    s = (rt_sample_shape){99, {1, 2, 2, 0}, RT_F32};
    VAL(rt_sample_nbytes(&s) == 0);
    s = (rt_sample_shape){2, {INT64_MAX, 2, 0, 0}, RT_F32};
    VAL(rt_sample_nbytes(&s) == 0);
}

CHECK_FN(rt_dataset_create) {
    const rt_sample_shape sh = small_shape();
    rt_sample_shape bad = sh;
    rt_dataset *ds = (rt_dataset *)&ds;
    ST(RT_ERR_INVALID_ARG, "out", rt_dataset_create(&zero_ops, NULL, 4, &sh, 2, NULL));
    ST(RT_ERR_INVALID_ARG, "ops", rt_dataset_create(NULL, NULL, 4, &sh, 2, &ds));
    VAL(ds == NULL);
    ST(RT_ERR_INVALID_ARG, "ops->read", rt_dataset_create(&no_read_ops, NULL, 4, &sh, 2, &ds));
    ST(RT_ERR_INVALID_ARG, "shape", rt_dataset_create(&zero_ops, NULL, 4, NULL, 2, &ds));
    ST(RT_ERR_INVALID_ARG, "negative", rt_dataset_create(&zero_ops, NULL, -1, &sh, 2, &ds));
    ST(RT_ERR_INVALID_ARG, "num_classes", rt_dataset_create(&zero_ops, NULL, 4, &sh, 0, &ds));
    bad.ndim = 0;
    ST(RT_ERR_INVALID_ARG, "dims", rt_dataset_create(&zero_ops, NULL, 4, &bad, 2, &ds));
    bad.ndim = RT_DATA_MAX_SAMPLE_DIMS + 1;
    ST(RT_ERR_INVALID_ARG, "dims", rt_dataset_create(&zero_ops, NULL, 4, &bad, 2, &ds));
    bad = (rt_sample_shape){3, {1, 0, 2, 0}, RT_U8};
    ST(RT_ERR_INVALID_ARG, "dim 1", rt_dataset_create(&zero_ops, NULL, 4, &bad, 2, &ds));
    bad = (rt_sample_shape){3, {RT_DATA_MAX_CHANNELS + 1, 2, 2, 0}, RT_U8};
    ST(RT_ERR_INVALID_ARG, "channels", rt_dataset_create(&zero_ops, NULL, 4, &bad, 2, &ds));
    bad = (rt_sample_shape){4, {8, INT64_C(1) << 20, INT64_C(1) << 20, 2}, RT_U8};
    ST(RT_ERR_INVALID_ARG, "2^40", rt_dataset_create(&zero_ops, NULL, 4, &bad, 2, &ds));
    bad = (rt_sample_shape){2, {INT64_MAX, INT64_MAX, 0, 0}, RT_U8};
    ST(RT_ERR_INVALID_ARG, "2^40", rt_dataset_create(&zero_ops, NULL, 4, &bad, 2, &ds));
    bad = sh;
    bad.dtype = RT_I32;
    ST(RT_ERR_DTYPE, "dtype", rt_dataset_create(&zero_ops, NULL, 4, &bad, 2, &ds));
    bad.dtype = (rt_dtype)99;
    ST(RT_ERR_DTYPE, "dtype", rt_dataset_create(&zero_ops, NULL, 4, &bad, 2, &ds));
    ST(RT_ERR_FORMAT, "NULL inputs", rt_dataset_create(&null_arrays_ops, NULL, 4, &sh, 2, &ds));
    VAL(ds == NULL);
    /* no state, no destroy op, no samples: fine */
    ST(RT_OK, NULL, rt_dataset_create(&zero_ops, NULL, 0, &sh, 2, &ds));
    VAL(ds != NULL && rt_dataset_size(ds) == 0);
    rt_dataset_destroy(ds);
}

CHECK_FN(rt_dataset_size) {
    rt_dataset *ds = small_dataset();
    VAL(rt_dataset_size(NULL) == 0);
    VAL(rt_dataset_size(ds) == 4);
    rt_dataset_destroy(ds);
}

CHECK_FN(rt_dataset_sample_shape) {
    const rt_sample_shape none = rt_dataset_sample_shape(NULL);
    VAL(none.ndim == 0 && none.dims[0] == 0 && rt_sample_numel(&none) == 0 && rt_sample_nbytes(&none) == 0);
}

CHECK_FN(rt_dataset_read) {
    rt_dataset *ds = small_dataset(), *bad = ops_dataset(&bad_label_ops, 2);
    uint8_t input[4];
    int32_t label = -5;
    ST(RT_ERR_INVALID_ARG, "ds", rt_dataset_read(NULL, 0, input, &label));
    ST(RT_ERR_INVALID_ARG, "input", rt_dataset_read(ds, 0, NULL, &label));
    ST(RT_ERR_INVALID_ARG, "label", rt_dataset_read(ds, 0, input, NULL));
    VAL(label == -5);
    ST(RT_ERR_INVALID_ARG, "sample", rt_dataset_read(ds, -1, input, &label));
    ST(RT_ERR_INVALID_ARG, "sample", rt_dataset_read(ds, 4, input, &label));
    ST(RT_ERR_INVALID_ARG, "sample", rt_dataset_read(ds, INT64_MAX, input, &label));
    ST(RT_ERR_INVALID_ARG, "sample", rt_dataset_read(ds, INT64_MIN, input, &label));
    ST(RT_ERR_FORMAT, "label 7", rt_dataset_read(bad, 0, input, &label));
    rt_dataset_destroy(ds);
    rt_dataset_destroy(bad);
}

CHECK_FN(rt_dataset_get) {
    rt_dataset *ds = small_dataset(), *bad = ops_dataset(&bad_label_ops, 2);
    rt_tensor *t = (rt_tensor *)&t;
    int32_t label;
    ST(RT_ERR_INVALID_ARG, "ds", rt_dataset_get(NULL, 0, &t, &label));
    VAL(t == NULL);
    ST(RT_ERR_INVALID_ARG, "input", rt_dataset_get(ds, 0, NULL, &label));
    t = (rt_tensor *)&t;
    ST(RT_ERR_INVALID_ARG, "label", rt_dataset_get(ds, 0, &t, NULL));
    VAL(t == NULL);
    ST(RT_ERR_INVALID_ARG, "sample", rt_dataset_get(ds, -1, &t, &label));
    ST(RT_ERR_INVALID_ARG, "sample", rt_dataset_get(ds, 4, &t, &label));
    ST(RT_ERR_INVALID_ARG, "sample", rt_dataset_get(ds, INT64_MAX, &t, &label));
    VAL(t == NULL);
    /* the tensor made for the sample is released again */
    ST(RT_ERR_FORMAT, "label 7", rt_dataset_get(bad, 1, &t, &label));
    VAL(t == NULL);
    rt_dataset_destroy(ds);
    rt_dataset_destroy(bad);
}

CHECK_FN(rt_dataset_arrays_get) {
    rt_dataset *ds = small_dataset(), *plain = ops_dataset(&zero_ops, 2);
    rt_dataset_arrays a = {NULL, NULL};
    VAL(!rt_dataset_arrays_get(NULL, &a));
    VAL(!rt_dataset_arrays_get(ds, NULL));
    VAL(!rt_dataset_arrays_get(plain, &a)); /* no arrays op */
    VAL(rt_dataset_arrays_get(ds, &a) && a.inputs != NULL && a.labels != NULL);
    rt_dataset_destroy(ds);
    rt_dataset_destroy(plain);
}

CHECK_FN(rt_dataset_from_memory) {
    const rt_sample_shape sh = small_shape();
    rt_sample_shape bad = sh;
    uint8_t inputs[8] = {0};
    int32_t labs[2] = {0, 1}, bad_labs[2] = {0, 7};
    rt_dataset *ds = (rt_dataset *)&ds;
    ST(RT_ERR_INVALID_ARG, "out", rt_dataset_from_memory(2, &sh, 2, inputs, labs, NULL));
    ST(RT_ERR_INVALID_ARG, "shape", rt_dataset_from_memory(2, NULL, 2, inputs, labs, &ds));
    VAL(ds == NULL);
    ST(RT_ERR_INVALID_ARG, "inputs", rt_dataset_from_memory(2, &sh, 2, NULL, labs, &ds));
    ST(RT_ERR_INVALID_ARG, "labels", rt_dataset_from_memory(2, &sh, 2, inputs, NULL, &ds));
    ST(RT_ERR_INVALID_ARG, "negative", rt_dataset_from_memory(-1, &sh, 2, inputs, labs, &ds));
    ST(RT_ERR_INVALID_ARG, "negative", rt_dataset_from_memory(INT64_MIN, &sh, 2, inputs, labs, &ds));
    ST(RT_ERR_INVALID_ARG, "num_classes", rt_dataset_from_memory(2, &sh, 0, inputs, labs, &ds));
    bad.ndim = RT_DATA_MAX_SAMPLE_DIMS + 1;
    ST(RT_ERR_INVALID_ARG, "dims", rt_dataset_from_memory(2, &bad, 2, inputs, labs, &ds));
    bad = (rt_sample_shape){3, {1, 2, -2, 0}, RT_U8};
    ST(RT_ERR_INVALID_ARG, "dim 2", rt_dataset_from_memory(2, &bad, 2, inputs, labs, &ds));
    bad = (rt_sample_shape){3, {RT_DATA_MAX_CHANNELS + 1, 2, 2, 0}, RT_U8};
    ST(RT_ERR_INVALID_ARG, "channels", rt_dataset_from_memory(2, &bad, 2, inputs, labs, &ds));
    bad = (rt_sample_shape){2, {INT64_MAX, INT64_MAX, 0, 0}, RT_U8};
    ST(RT_ERR_INVALID_ARG, "2^40", rt_dataset_from_memory(2, &bad, 2, inputs, labs, &ds));
    bad = sh;
    bad.dtype = RT_BF16;
    ST(RT_ERR_DTYPE, "dtype", rt_dataset_from_memory(2, &bad, 2, inputs, labs, &ds));
    ST(RT_ERR_FORMAT, "label 7", rt_dataset_from_memory(2, &sh, 2, inputs, bad_labs, &ds));
    VAL(ds == NULL);
    /* no samples: the arrays may be NULL */
    ST(RT_OK, NULL, rt_dataset_from_memory(0, &sh, 2, NULL, NULL, &ds));
    VAL(ds != NULL && rt_dataset_size(ds) == 0);
    rt_dataset_destroy(ds);
}

CHECK_FN(rt_dataset_from_arrays) {
    uint8_t images[8] = {0};
    int32_t labs[2] = {0, 1}, bad[2] = {0, 7};
    rt_dataset *ds = (rt_dataset *)&ds;
    ST(RT_ERR_INVALID_ARG, "out", rt_dataset_from_arrays(2, 1, 2, 2, 2, images, labs, NULL));
    ST(RT_ERR_INVALID_ARG, "images", rt_dataset_from_arrays(2, 1, 2, 2, 2, NULL, labs, &ds));
    VAL(ds == NULL);
    ST(RT_ERR_INVALID_ARG, "labels", rt_dataset_from_arrays(2, 1, 2, 2, 2, images, NULL, &ds));
    ST(RT_ERR_INVALID_ARG, "negative", rt_dataset_from_arrays(-1, 1, 2, 2, 2, images, labs, &ds));
    ST(RT_ERR_INVALID_ARG, "channels", rt_dataset_from_arrays(2, 0, 2, 2, 2, images, labs, &ds));
    ST(RT_ERR_INVALID_ARG, "channels",
       rt_dataset_from_arrays(2, RT_DATA_MAX_CHANNELS + 1, 2, 2, 2, images, labs, &ds));
    ST(RT_ERR_INVALID_ARG, "height", rt_dataset_from_arrays(2, 1, 0, 2, 2, images, labs, &ds));
    ST(RT_ERR_INVALID_ARG, "width", rt_dataset_from_arrays(2, 1, 2, -1, 2, images, labs, &ds));
    ST(RT_ERR_INVALID_ARG, "num_classes", rt_dataset_from_arrays(2, 1, 2, 2, 0, images, labs, &ds));
    ST(RT_ERR_FORMAT, "label", rt_dataset_from_arrays(2, 1, 2, 2, 2, images, bad, &ds));
    VAL(ds == NULL);
}

CHECK_FN(rt_dataset_subset) {
    rt_dataset *ds = small_dataset(), *sub = (rt_dataset *)&sub;
    ST(RT_ERR_INVALID_ARG, "out", rt_dataset_subset(ds, 0, 1, NULL));
    ST(RT_ERR_INVALID_ARG, "ds", rt_dataset_subset(NULL, 0, 1, &sub));
    VAL(sub == NULL);
    ST(RT_ERR_INVALID_ARG, "samples", rt_dataset_subset(ds, -1, 1, &sub));
    ST(RT_ERR_INVALID_ARG, "samples", rt_dataset_subset(ds, 2, 3, &sub));
    ST(RT_ERR_INVALID_ARG, "samples", rt_dataset_subset(ds, 0, -1, &sub));
    ST(RT_ERR_INVALID_ARG, "samples", rt_dataset_subset(ds, 1, INT64_MAX, &sub));
    ST(RT_ERR_INVALID_ARG, "samples", rt_dataset_subset(ds, INT64_MAX, 1, &sub));
    VAL(sub == NULL);
    rt_dataset_destroy(ds);
}

CHECK_FN(rt_dataset_channel_stats) {
    rt_dataset *ds = small_dataset(), *empty = NULL;
    rt_dataset_from_arrays(0, 1, 2, 2, 2, NULL, NULL, &empty);
    double mean[1], std[1];
    ST(RT_ERR_INVALID_ARG, "ds", rt_dataset_channel_stats(NULL, mean, std));
    ST(RT_ERR_INVALID_ARG, "mean", rt_dataset_channel_stats(ds, NULL, std));
    ST(RT_ERR_INVALID_ARG, "std", rt_dataset_channel_stats(ds, mean, NULL));
    ST(RT_ERR_INVALID_ARG, "empty", rt_dataset_channel_stats(empty, mean, std));
    rt_dataset_destroy(ds);
    rt_dataset_destroy(empty);
}

CHECK_FN(rt_dataset_destroy) { TOL(rt_dataset_destroy(NULL)); }

/* ------------------------------------------------------------ data/idx.h */

CHECK_FN(rt_idx_type_size) { VAL(rt_idx_type_size(0x0A) == 0 && rt_idx_type_size(-1) == 0); }
CHECK_FN(rt_idx_type_str) { VAL(strcmp(rt_idx_type_str(0x0A), "?") == 0); }

CHECK_FN(rt_idx_read) {
    rt_idx *idx = (rt_idx *)&idx;
    ST(RT_ERR_INVALID_ARG, "out", rt_idx_read("/nonexistent.idx", NULL));
    ST(RT_ERR_INVALID_ARG, "path", rt_idx_read(NULL, &idx));
    VAL(idx == NULL);
}

CHECK_FN(rt_idx_read_first) {
    rt_idx *idx = (rt_idx *)&idx;
    ST(RT_ERR_INVALID_ARG, "out", rt_idx_read_first("/nonexistent.idx", 1, NULL));
    ST(RT_ERR_INVALID_ARG, "path", rt_idx_read_first(NULL, 1, &idx));
    VAL(idx == NULL);
    idx = (rt_idx *)&idx;
    ST(RT_ERR_INVALID_ARG, "max_records", rt_idx_read_first("/nonexistent.idx", -1, &idx));
    VAL(idx == NULL);
    ST(RT_ERR_INVALID_ARG, "max_records", rt_idx_read_first("/nonexistent.idx", INT64_MIN, &idx));
    ST(RT_ERR_INVALID_ARG, "max_records", rt_idx_read_first(NULL, -1, NULL));
}

CHECK_FN(rt_idx_destroy) { TOL(rt_idx_destroy(NULL)); }

CHECK_FN(rt_idx_check_pair) {
    uint8_t img[4] = {0}, lab[2] = {0, 1};
    rt_idx images = {.type = RT_IDX_U8, .ndim = 3, .dims = {2, 1, 2}, .elem_size = 1, .count = 4, .data = img,
                     .nbytes = 4};
    rt_idx labs = {.type = RT_IDX_U8, .ndim = 1, .dims = {2}, .elem_size = 1, .count = 2, .data = lab, .nbytes = 2};
    ST(RT_ERR_INVALID_ARG, "images", rt_idx_check_pair(NULL, &labs, 2));
    ST(RT_ERR_INVALID_ARG, "labels", rt_idx_check_pair(&images, NULL, 2));
    ST(RT_ERR_INVALID_ARG, "num_classes", rt_idx_check_pair(&images, &labs, 0));
    ST(RT_ERR_FORMAT, "label", rt_idx_check_pair(&images, &labs, 1));
    labs.data = NULL; /* count 2 over no data */
    ST(RT_ERR_INVALID_ARG, "labels->data", rt_idx_check_pair(&images, &labs, 2));
}

/* ------------------------------------------------------------ data/nifti.h */

CHECK_FN(rt_nifti_datatype_str) { VAL(strcmp(rt_nifti_datatype_str(-1), "unknown") == 0); }
CHECK_FN(rt_nifti_affine_source_str) { VAL(strcmp(rt_nifti_affine_source_str((rt_nifti_affine_source)9), "?") == 0); }

CHECK_FN(rt_nifti_read_info) {
    rt_nifti_info info;
    ST(RT_ERR_INVALID_ARG, "path", rt_nifti_read_info(NULL, &info));
    ST(RT_ERR_INVALID_ARG, "info", rt_nifti_read_info("/nonexistent.nii", NULL));
}

CHECK_FN(rt_nifti_read) {
    rt_tensor *t = (rt_tensor *)&t;
    ST(RT_ERR_INVALID_ARG, "out", rt_nifti_read("/nonexistent.nii", NULL, NULL));
    ST(RT_ERR_INVALID_ARG, "path", rt_nifti_read(NULL, NULL, &t));
    VAL(t == NULL);
}

CHECK_FN(rt_nifti_read_labels) {
    rt_tensor *t = (rt_tensor *)&t;
    ST(RT_ERR_INVALID_ARG, "out", rt_nifti_read_labels("/nonexistent.nii", NULL, NULL));
    ST(RT_ERR_INVALID_ARG, "path", rt_nifti_read_labels(NULL, NULL, &t));
    VAL(t == NULL);
}

CHECK_FN(rt_nifti_write) {
    const int64_t shape[3] = {1, 1, 1};
    rt_tensor *t = rt_tensor_zeros(3, shape, RT_F32, RT_DEVICE_CPU, RT_MEM_DATA);
    rt_tensor *meta = rt_tensor_create(3, shape, RT_F32, RT_DEVICE_META, RT_MEM_DATA);
    ST(RT_ERR_INVALID_ARG, "path", rt_nifti_write(NULL, t, NULL));
    ST(RT_ERR_INVALID_ARG, "tensor", rt_nifti_write("/nonexistent/x.nii", NULL, NULL));
    ST(RT_ERR_INVALID_ARG, "meta", rt_nifti_write("/nonexistent/x.nii", meta, NULL));
    rt_tensor_release(meta);
    rt_tensor_release(t);
}

/* ------------------------------------------------------------ data/loader.h */

CHECK_FN(rt_loader_options_default) { VAL(rt_loader_options_default().batch_size == 64); }

CHECK_FN(rt_loader_create) {
    rt_dataset *ds = small_dataset();
    rt_loader_options o = rt_loader_options_default(), zero = o, nostd = o;
    zero.batch_size = 0;
    nostd.std[0] = 0.0f;
    rt_loader *l = (rt_loader *)&l;
    ST(RT_ERR_INVALID_ARG, "out", rt_loader_create(ds, &o, NULL));
    ST(RT_ERR_INVALID_ARG, "ds", rt_loader_create(NULL, &o, &l));
    VAL(l == NULL);
    ST(RT_ERR_INVALID_ARG, "opt", rt_loader_create(ds, NULL, &l));
    ST(RT_ERR_INVALID_ARG, "batch_size", rt_loader_create(ds, &zero, &l));
    ST(RT_ERR_INVALID_ARG, "std", rt_loader_create(ds, &nostd, &l));
    rt_dataset_destroy(ds);
}

CHECK_FN(rt_loader_destroy) { TOL(rt_loader_destroy(NULL)); }
CHECK_FN(rt_loader_batches_per_epoch) { VAL(rt_loader_batches_per_epoch(NULL) == 0); }
CHECK_FN(rt_loader_epoch) { VAL(rt_loader_epoch(NULL) == 0); }
CHECK_FN(rt_loader_batch_index) { VAL(rt_loader_batch_index(NULL) == 0); }

/* A loader over small_dataset with batches of 2 (destroy both). */
static rt_loader *small_loader(rt_dataset **ds) {
    *ds = small_dataset();
    rt_loader_options o = rt_loader_options_default();
    o.batch_size = 2;
    rt_loader *l = NULL;
    if (rt_loader_create(*ds, &o, &l) != RT_OK) abort();
    return l;
}

CHECK_FN(rt_loader_next) {
    rt_dataset *ds;
    rt_loader *l = small_loader(&ds);
    rt_tensor *im = NULL, *lab = NULL;
    bool end;
    ST(RT_ERR_INVALID_ARG, "loader", rt_loader_next(NULL, &im, &lab, &end));
    ST(RT_ERR_INVALID_ARG, "images", rt_loader_next(l, NULL, &lab, &end));
    ST(RT_ERR_INVALID_ARG, "labels", rt_loader_next(l, &im, NULL, &end));
    ST(RT_ERR_INVALID_ARG, "end_of_epoch", rt_loader_next(l, &im, &lab, NULL));
    VAL(im == NULL && lab == NULL && rt_loader_batch_index(l) == 0);
    rt_loader_destroy(l);
    rt_dataset_destroy(ds);
}

CHECK_FN(rt_loader_reset) {
    rt_dataset *ds;
    rt_loader *l = small_loader(&ds);
    ST(RT_ERR_INVALID_ARG, "loader", rt_loader_reset(NULL, 0));
    ST(RT_ERR_INVALID_ARG, "epoch", rt_loader_reset(l, -1));
    ST(RT_ERR_INVALID_ARG, "epoch", rt_loader_reset(l, (int64_t)RT_LOADER_MAX_EPOCH + 1));
    rt_loader_destroy(l);
    rt_dataset_destroy(ds);
}

CHECK_FN(rt_loader_seek) {
    rt_dataset *ds;
    rt_loader *l = small_loader(&ds);
    ST(RT_ERR_INVALID_ARG, "loader", rt_loader_seek(NULL, 0, 0));
    ST(RT_ERR_INVALID_ARG, "batch", rt_loader_seek(l, 0, 999));
    ST(RT_ERR_INVALID_ARG, "batch", rt_loader_seek(l, 0, -1));
    rt_loader_destroy(l);
    rt_dataset_destroy(ds);
}

CHECK_FN(rt_loader_order) { NUL(RT_ERR_INVALID_ARG, "loader", rt_loader_order(NULL)); }

CHECK_FN(rt_loader_augment_params) {
    rt_dataset *ds;
    rt_loader *l = small_loader(&ds);
    rt_augment a;
    ST(RT_ERR_INVALID_ARG, "loader", rt_loader_augment_params(NULL, 0, 0, &a));
    ST(RT_ERR_INVALID_ARG, "out", rt_loader_augment_params(l, 0, 0, NULL));
    ST(RT_ERR_INVALID_ARG, "range", rt_loader_augment_params(l, 0, 4, &a));
    ST(RT_ERR_INVALID_ARG, "range", rt_loader_augment_params(l, -1, 0, &a));
    rt_loader_destroy(l);
    rt_dataset_destroy(ds);
}

/* ------------------------------------------------------------ data/mnist.h */

CHECK_FN(rt_mnist_default_dir) { VAL(rt_mnist_default_dir() != NULL); }

CHECK_FN(rt_moving_fashion_defaults) { VAL(rt_moving_fashion_defaults(8).size == 64); }
CHECK_FN(rt_moving_fashion_sequence) {
    uint8_t im[4] = {0};
    float out[16];
    rt_moving_fashion_opts o = rt_moving_fashion_defaults(1);
    o.size = 4;
    ST(RT_ERR_INVALID_ARG, "required", rt_moving_fashion_sequence(NULL, 1, 2, &o, 0, 0, out, NULL));
    ST(RT_ERR_INVALID_ARG, "required", rt_moving_fashion_sequence(im, 1, 2, NULL, 0, 0, out, NULL));
    ST(RT_ERR_INVALID_ARG, "required", rt_moving_fashion_sequence(im, 1, 2, &o, 0, 0, NULL, NULL));
    ST(RT_ERR_INVALID_ARG, "at least one image", rt_moving_fashion_sequence(im, 0, 2, &o, 0, 0, out, NULL));
    o.frames = 0;
    ST(RT_ERR_INVALID_ARG, "frames", rt_moving_fashion_sequence(im, 1, 2, &o, 0, 0, out, NULL));
}
CHECK_FN(rt_moving_fashion_batch) {
    float out[16];
    rt_moving_fashion_opts o = rt_moving_fashion_defaults(1);
    ST(RT_ERR_INVALID_ARG, "required", rt_moving_fashion_batch(NULL, &o, 0, 0, 1, out));
}

CHECK_FN(rt_mnist_load) {
    rt_dataset *ds = (rt_dataset *)&ds;
    ST(RT_ERR_INVALID_ARG, "out", rt_mnist_load(rt_mnist_default_dir(), true, NULL));
    ST(RT_ERR_INVALID_ARG, "dir", rt_mnist_load(NULL, true, &ds));
    VAL(ds == NULL);
}

CHECK_FN(rt_mnist_load_first) {
    rt_dataset *ds = (rt_dataset *)&ds;
    ST(RT_ERR_INVALID_ARG, "out", rt_mnist_load_first(rt_mnist_default_dir(), true, 1, NULL));
    ST(RT_ERR_INVALID_ARG, "dir", rt_mnist_load_first(NULL, true, 1, &ds));
    VAL(ds == NULL);
    ds = (rt_dataset *)&ds;
    ST(RT_ERR_INVALID_ARG, "max_samples", rt_mnist_load_first(rt_mnist_default_dir(), false, -1, &ds));
    VAL(ds == NULL);
    ST(RT_ERR_INVALID_ARG, "max_samples", rt_mnist_load_first(rt_mnist_default_dir(), true, INT64_MIN, &ds));
    ST(RT_ERR_INVALID_ARG, "max_samples", rt_mnist_load_first(NULL, true, -1, NULL));
}

/* ------------------------------------------------------------ io/safetensors.h */

/* A file holding one F32 tensor "w" (2) and metadata k = v; returns its path. */
static const char *small_st_file(void) {
    const char *path = tmp_path("small.safetensors");
    float w[2] = {1, 2};
    const int64_t shape[1] = {2};
    rt_st_writer *wr = rt_st_writer_create();
    if (!wr || rt_st_writer_add(wr, "w", "F32", 1, shape, w, sizeof w) != RT_OK ||
        rt_st_writer_set_metadata(wr, "k", "v") != RT_OK || rt_st_writer_save(wr, path) != RT_OK)
        abort();
    rt_st_writer_destroy(wr);
    return path;
}

static rt_st_file *small_st_open(void) {
    rt_st_file *f = NULL;
    if (rt_st_open(small_st_file(), &f) != RT_OK) abort();
    return f;
}

CHECK_FN(rt_st_open) {
    rt_st_file *f = (rt_st_file *)&f;
    ST(RT_ERR_INVALID_ARG, "path", rt_st_open(small_st_file(), NULL));
    ST(RT_ERR_INVALID_ARG, "path", rt_st_open(NULL, &f));
    VAL(f == NULL);
}

CHECK_FN(rt_st_count) { VAL(rt_st_count(NULL) == 0); }

CHECK_FN(rt_st_entry_at) {
    rt_st_file *f = small_st_open();
    NUL(RT_ERR_INVALID_ARG, "file", rt_st_entry_at(NULL, 0));
    VAL(rt_st_entry_at(f, 5) == NULL); /* past the end: absent, not an error */
    rt_st_close(f);
}

CHECK_FN(rt_st_find) {
    rt_st_file *f = small_st_open();
    NUL(RT_ERR_INVALID_ARG, "file", rt_st_find(NULL, "w"));
    NUL(RT_ERR_INVALID_ARG, "name", rt_st_find(f, NULL));
    rt_st_close(f);
}

CHECK_FN(rt_st_metadata) {
    rt_st_file *f = small_st_open();
    NUL(RT_ERR_INVALID_ARG, "file", rt_st_metadata(NULL, "k"));
    NUL(RT_ERR_INVALID_ARG, "key", rt_st_metadata(f, NULL));
    rt_st_close(f);
}

CHECK_FN(rt_st_close) { TOL(rt_st_close(NULL)); }
CHECK_FN(rt_st_dtype_size) { VAL(rt_st_dtype_size(NULL) == 0 && rt_st_dtype_size("F99") == 0); }

CHECK_FN(rt_st_writer_create) {
    rt_st_writer *w = rt_st_writer_create();
    VAL(w != NULL);
    rt_st_writer_destroy(w);
}

CHECK_FN(rt_st_writer_add) {
    rt_st_writer *w = rt_st_writer_create();
    float d[2] = {1, 2};
    const int64_t s[1] = {2}, neg[1] = {-2};
    ST(RT_ERR_INVALID_ARG, "writer", rt_st_writer_add(NULL, "a", "F32", 1, s, d, sizeof d));
    ST(RT_ERR_INVALID_ARG, "name", rt_st_writer_add(w, NULL, "F32", 1, s, d, sizeof d));
    ST(RT_ERR_INVALID_ARG, "dtype", rt_st_writer_add(w, "a", NULL, 1, s, d, sizeof d));
    ST(RT_ERR_INVALID_ARG, "shape", rt_st_writer_add(w, "a", "F32", 1, NULL, d, sizeof d));
    ST(RT_ERR_INVALID_ARG, "data", rt_st_writer_add(w, "a", "F32", 1, s, NULL, sizeof d));
    ST(RT_ERR_INVALID_ARG, "ndim", rt_st_writer_add(w, "a", "F32", -1, s, d, sizeof d));
    ST(RT_ERR_INVALID_ARG, "a", rt_st_writer_add(w, "a", "F32", 1, neg, d, sizeof d));
    ST(RT_ERR_INVALID_ARG, "nbytes", rt_st_writer_add(w, "a", "F32", 1, s, d, 3));
    ST(RT_ERR_DTYPE, "dtype", rt_st_writer_add(w, "a", "F99", 1, s, d, sizeof d));
    rt_st_writer_destroy(w);
}

CHECK_FN(rt_st_writer_set_metadata) {
    rt_st_writer *w = rt_st_writer_create();
    ST(RT_ERR_INVALID_ARG, "NULL", rt_st_writer_set_metadata(NULL, "k", "v"));
    ST(RT_ERR_INVALID_ARG, "NULL", rt_st_writer_set_metadata(w, NULL, "v"));
    ST(RT_ERR_INVALID_ARG, "NULL", rt_st_writer_set_metadata(w, "k", NULL));
    rt_st_writer_destroy(w);
}

CHECK_FN(rt_st_writer_save) {
    rt_st_writer *w = rt_st_writer_create();
    ST(RT_ERR_INVALID_ARG, "path", rt_st_writer_save(NULL, tmp_path("never.safetensors")));
    ST(RT_ERR_INVALID_ARG, "path", rt_st_writer_save(w, NULL));
    rt_st_writer_destroy(w);
}

CHECK_FN(rt_st_writer_destroy) { TOL(rt_st_writer_destroy(NULL)); }

/* ------------------------------------------------------------ io/weights.h */

CHECK_FN(rt_weights_save) {
    rt_tensor *t = T(2);
    rt_named_tensor extra[1] = {{"t", t}}, no_tensor[1] = {{"t", NULL}}, no_name[1] = {{NULL, t}};
    const char *meta[2] = {"k", NULL};
    char path[128];
    snprintf(path, sizeof path, "%s", tmp_path("w.safetensors"));
    ST(RT_ERR_INVALID_ARG, "path", rt_weights_save(NULL, extra, 1, NULL, 0, NULL));
    ST(RT_ERR_INVALID_ARG, "extra", rt_weights_save(NULL, NULL, 1, NULL, 0, path));
    ST(RT_ERR_INVALID_ARG, "extra", rt_weights_save(NULL, extra, -1, NULL, 0, path));
    ST(RT_ERR_INVALID_ARG, "tensor", rt_weights_save(NULL, no_tensor, 1, NULL, 0, path));
    ST(RT_ERR_INVALID_ARG, "name", rt_weights_save(NULL, no_name, 1, NULL, 0, path));
    ST(RT_ERR_INVALID_ARG, "meta", rt_weights_save(NULL, extra, 1, NULL, 1, path));
    ST(RT_ERR_INVALID_ARG, "meta", rt_weights_save(NULL, extra, 1, meta, -2, path));
    ST(RT_ERR_INVALID_ARG, "NULL", rt_weights_save(NULL, extra, 1, meta, 1, path)); /* a NULL value */
    ST(RT_OK, NULL, rt_weights_save(NULL, extra, 1, NULL, 0, path)); /* sd and meta are optional */
}

CHECK_FN(rt_weights_load) {
    rt_tensor *t = T(2);
    rt_named_tensor extra[1] = {{"t", t}}, no_name[1] = {{NULL, t}};
    ST(RT_ERR_INVALID_ARG, "path", rt_weights_load(NULL, extra, 1, NULL));
    ST(RT_ERR_INVALID_ARG, "extra", rt_weights_load(NULL, NULL, 1, small_st_file()));
    ST(RT_ERR_INVALID_ARG, "extra", rt_weights_load(NULL, extra, -1, small_st_file()));
    ST(RT_ERR_INVALID_ARG, "name", rt_weights_load(NULL, no_name, 1, small_st_file()));
    ST(RT_ERR_FORMAT, "unexpected", rt_weights_load(NULL, NULL, 0, small_st_file()));
}

CHECK_FN(rt_weights_read_metadata) {
    char path[128], buf[16];
    snprintf(path, sizeof path, "%s", small_st_file());
    ST(RT_ERR_INVALID_ARG, "path", rt_weights_read_metadata(NULL, "k", buf, sizeof buf));
    ST(RT_ERR_INVALID_ARG, "key", rt_weights_read_metadata(path, NULL, buf, sizeof buf));
    ST(RT_ERR_INVALID_ARG, "buf", rt_weights_read_metadata(path, "k", NULL, sizeof buf));
    ST(RT_ERR_INVALID_ARG, "size", rt_weights_read_metadata(path, "k", buf, 0));
    ST(RT_ERR_FORMAT, "metadata", rt_weights_read_metadata(path, "absent", buf, sizeof buf));
}

/* ------------------------------------------------------------ models/ */

CHECK_FN(rt_zoo_entries) { NUL(RT_ERR_INVALID_ARG, "n", rt_zoo_entries(NULL)); }
CHECK_FN(rt_zoo_find) { NUL(RT_ERR_INVALID_ARG, "name", rt_zoo_find(NULL)); }
CHECK_FN(rt_model_names) { VAL(rt_model_names() != NULL && rt_model_names()[0] != '\0'); }
CHECK_FN(rt_model_name_has_reversible) { VAL(!rt_model_name_has_reversible(NULL)); }

CHECK_FN(rt_model_blocked_weights_set) { /* a setting, no pointer: returns the previous one */
    bool prev = rt_model_blocked_weights_set(false);
    VAL(rt_model_blocked_weights_set(prev) == false);
}
CHECK_FN(rt_model_create) {
    rt_model *m = (rt_model *)&m;
    ST(RT_ERR_INVALID_ARG, "output", rt_model_create("resnet20", 1, 10, RT_DEVICE_META, 0, NULL));
    ST(RT_ERR_INVALID_ARG, "NULL", rt_model_create(NULL, 1, 10, RT_DEVICE_META, 0, &m));
    VAL(m == NULL);
    ST(RT_ERR_INVALID_ARG, "unknown model", rt_model_create("resnet7", 1, 10, RT_DEVICE_META, 0, &m));
    ST(RT_ERR_INVALID_ARG, "input channel", rt_model_create("resnet20", 0, 10, RT_DEVICE_META, 0, &m));
    ST(RT_ERR_INVALID_ARG, "class", rt_model_create("resnet20", 1, 0, RT_DEVICE_META, 0, &m));
    ST(RT_ERR_INVALID_ARG, "device", rt_model_create("resnet20", 1, 10, (rt_device)9, 0, &m));
}

CHECK_FN(rt_model_destroy) { TOL(rt_model_destroy(NULL)); }

CHECK_FN(rt_model_forward) {
    rt_model m = {.name = "linear", .in_channels = 3, .num_classes = 2, .net = linear_module(RT_DEVICE_CPU)};
    rt_model netless = {.name = "none"};
    rt_tensor *x = T(2, 3), *y = (rt_tensor *)&y;
    ST(RT_ERR_INVALID_ARG, "output", rt_model_forward(&m, x, NULL));
    ST(RT_ERR_INVALID_ARG, "model", rt_model_forward(NULL, x, &y));
    VAL(y == NULL);
    ST(RT_ERR_INVALID_ARG, "input", rt_model_forward(&m, NULL, &y));
    ST(RT_ERR_INVALID_ARG, "module", rt_model_forward(&netless, x, &y));
    rt_module_destroy(m.net);
}

CHECK_FN(rt_convlstm_create) {
    rt_init_ctx ctx = rt_init_ctx_make(RT_DEVICE_META, 0);
    rt_convlstm_config cfg = {1, 4, 3};
    rt_module *m = (rt_module *)&m;
    ST(RT_ERR_INVALID_ARG, "out", rt_convlstm_create(&ctx, &cfg, NULL));
    ST(RT_ERR_INVALID_ARG, "ctx", rt_convlstm_create(NULL, &cfg, &m));
    VAL(m == NULL);
    ST(RT_ERR_INVALID_ARG, "cfg", rt_convlstm_create(&ctx, NULL, &m));
    cfg.kernel = 2;
    ST(RT_ERR_INVALID_ARG, "odd kernel", rt_convlstm_create(&ctx, &cfg, &m));
}
CHECK_FN(rt_convlstm_config_of) {
    rt_convlstm_config c;
    ST(RT_ERR_INVALID_ARG, "ConvLSTMPredictor", rt_convlstm_config_of(NULL, &c));
}
CHECK_FN(rt_convlstm_step) {
    rt_tensor *n = NULL, *p = NULL;
    ST(RT_ERR_INVALID_ARG, "ConvLSTMPredictor", rt_convlstm_step(NULL, T(1, 1, 2, 2), T(1, 2, 2, 2), &n, &p));
    VAL(n == NULL && p == NULL);
}
CHECK_FN(rt_convlstm_seq_step) {
    rt_tensor *n = NULL, *l = NULL;
    ST(RT_ERR_INVALID_ARG, "outside", rt_convlstm_seq_step(NULL, 0, T(1, 2, 2, 2), &n, &l));
}

CHECK_FN(rt_resblock_create) {
    rt_init_ctx ctx = rt_init_ctx_make(RT_DEVICE_META, 0);
    rt_module *m = (rt_module *)&m;
    ST(RT_ERR_INVALID_ARG, "out", rt_resblock_create(&ctx, RT_BLOCK_BASIC, 8, 8, 1, NULL));
    ST(RT_ERR_INVALID_ARG, "ctx", rt_resblock_create(NULL, RT_BLOCK_BASIC, 8, 8, 1, &m));
    VAL(m == NULL);
    ST(RT_ERR_INVALID_ARG, "kind", rt_resblock_create(&ctx, (rt_block_kind)7, 8, 8, 1, &m));
    ST(RT_ERR_INVALID_ARG, "stride", rt_resblock_create(&ctx, RT_BLOCK_BASIC, 0, 8, 1, &m));
    ST(RT_ERR_INVALID_ARG, "stride", rt_resblock_create(&ctx, RT_BLOCK_BASIC, 8, 8, 0, &m));
}

CHECK_FN(rt_resnet_config_get) {
    rt_resnet_config cfg;
    ST(RT_ERR_INVALID_ARG, "name", rt_resnet_config_get(NULL, &cfg));
    ST(RT_ERR_INVALID_ARG, "cfg", rt_resnet_config_get("resnet20", NULL));
    ST(RT_ERR_INVALID_ARG, "ResNet", rt_resnet_config_get("resnet7", &cfg));
}

CHECK_FN(rt_resnet_build) {
    rt_init_ctx ctx = rt_init_ctx_make(RT_DEVICE_META, 0);
    rt_resnet_config cfg, bad;
    rt_resnet_config_get("resnet20", &cfg);
    bad = cfg;
    bad.stages = 9;
    rt_module *m = (rt_module *)&m;
    ST(RT_ERR_INVALID_ARG, "out", rt_resnet_build(&cfg, &ctx, 1, 10, NULL));
    ST(RT_ERR_INVALID_ARG, "cfg", rt_resnet_build(NULL, &ctx, 1, 10, &m));
    VAL(m == NULL);
    ST(RT_ERR_INVALID_ARG, "ctx", rt_resnet_build(&cfg, NULL, 1, 10, &m));
    ST(RT_ERR_INVALID_ARG, "config", rt_resnet_build(&bad, &ctx, 1, 10, &m));
    ST(RT_ERR_INVALID_ARG, "channel", rt_resnet_build(&cfg, &ctx, 0, 10, &m));
    ST(RT_ERR_INVALID_ARG, "class", rt_resnet_build(&cfg, &ctx, 1, -1, &m));
}

CHECK_FN(rt_model_name_is_segmentation) {
    VAL(!rt_model_name_is_segmentation(NULL));
    VAL(!rt_model_name_is_segmentation("nope"));
}

CHECK_FN(rt_unet_config_get) {
    rt_unet_config cfg;
    ST(RT_ERR_INVALID_ARG, "name", rt_unet_config_get(NULL, &cfg));
    ST(RT_ERR_INVALID_ARG, "cfg", rt_unet_config_get("unet3d", NULL));
    ST(RT_ERR_INVALID_ARG, "U-Net", rt_unet_config_get("unet2d", &cfg));
}

CHECK_FN(rt_unet_size_multiple) {
    rt_unet_config cfg = {.levels = 0};
    VAL(rt_unet_size_multiple(NULL) == 0);
    VAL(rt_unet_size_multiple(&cfg) == 0);
    cfg.levels = 5;
    VAL(rt_unet_size_multiple(&cfg) == 16);
}

CHECK_FN(rt_unet_build) {
    rt_init_ctx ctx = rt_init_ctx_make(RT_DEVICE_META, 0);
    rt_unet_config cfg, bad;
    rt_unet_config_get("prunet3d", &cfg);
    bad = cfg;
    bad.widths[1] = 5;
    rt_module *m = (rt_module *)&m;
    ST(RT_ERR_INVALID_ARG, "out", rt_unet_build(&cfg, &ctx, 1, 2, NULL));
    ST(RT_ERR_INVALID_ARG, "cfg", rt_unet_build(NULL, &ctx, 1, 2, &m));
    VAL(m == NULL);
    ST(RT_ERR_INVALID_ARG, "ctx", rt_unet_build(&cfg, NULL, 1, 2, &m));
    ST(RT_ERR_INVALID_ARG, "odd", rt_unet_build(&bad, &ctx, 1, 2, &m));
    ST(RT_ERR_INVALID_ARG, "channel", rt_unet_build(&cfg, &ctx, 0, 2, &m));
    ST(RT_ERR_INVALID_ARG, "class", rt_unet_build(&cfg, &ctx, 1, 0, &m));
}

CHECK_FN(rt_revnet_config_get) {
    rt_revnet_config cfg;
    ST(RT_ERR_INVALID_ARG, "name", rt_revnet_config_get(NULL, &cfg));
    ST(RT_ERR_INVALID_ARG, "cfg", rt_revnet_config_get("revnet38", NULL));
    ST(RT_ERR_INVALID_ARG, "RevNet", rt_revnet_config_get("revnet7", &cfg));
}

CHECK_FN(rt_edsr_config_get) {
    rt_edsr_config cfg;
    ST(RT_ERR_INVALID_ARG, "name", rt_edsr_config_get(NULL, &cfg));
    ST(RT_ERR_INVALID_ARG, "cfg", rt_edsr_config_get("edsr", NULL));
    ST(RT_ERR_INVALID_ARG, "unknown", rt_edsr_config_get("edsr9", &cfg));
}

CHECK_FN(rt_edsr_build) {
    rt_init_ctx ctx = rt_init_ctx_make(RT_DEVICE_META, 0);
    rt_edsr_config cfg, bad;
    rt_edsr_config_get("edsr", &cfg);
    bad = cfg;
    bad.n_feats = 0;
    rt_module *m = (rt_module *)&m;
    ST(RT_ERR_INVALID_ARG, "out", rt_edsr_build(&cfg, &ctx, NULL));
    ST(RT_ERR_INVALID_ARG, "cfg", rt_edsr_build(NULL, &ctx, &m));
    VAL(m == NULL);
    ST(RT_ERR_INVALID_ARG, "ctx", rt_edsr_build(&cfg, NULL, &m));
    ST(RT_ERR_INVALID_ARG, "n_feats", rt_edsr_build(&bad, &ctx, &m));
    bad = cfg;
    bad.in_channels = 0;
    ST(RT_ERR_INVALID_ARG, "in_channels", rt_edsr_build(&bad, &ctx, &m));
}

CHECK_FN(rt_edsr_num_params) {
    rt_edsr_config cfg;
    rt_edsr_config_get("edsr", &cfg);
    cfg.scale = 7;
    VAL(rt_edsr_num_params(NULL) == -1);
    VAL(rt_edsr_num_params(&cfg) == -1);
}

CHECK_FN(rt_edsr_rev_width) {
    rt_edsr_config cfg;
    rt_edsr_config_get("edsr_rev", &cfg);
    VAL(rt_edsr_rev_width(NULL) == -1);
    VAL(rt_edsr_rev_width(&cfg) == 64);
}

CHECK_FN(rt_revnet_build) {
    rt_init_ctx ctx = rt_init_ctx_make(RT_DEVICE_META, 0);
    rt_revnet_config cfg, bad;
    rt_revnet_config_get("revnet38", &cfg);
    bad = cfg;
    bad.widths[1] = 0;
    rt_module *m = (rt_module *)&m;
    ST(RT_ERR_INVALID_ARG, "out", rt_revnet_build(&cfg, &ctx, 1, 10, NULL));
    ST(RT_ERR_INVALID_ARG, "cfg", rt_revnet_build(NULL, &ctx, 1, 10, &m));
    VAL(m == NULL);
    ST(RT_ERR_INVALID_ARG, "ctx", rt_revnet_build(&cfg, NULL, 1, 10, &m));
    ST(RT_ERR_INVALID_ARG, "config", rt_revnet_build(&bad, &ctx, 1, 10, &m));
    ST(RT_ERR_INVALID_ARG, "channel", rt_revnet_build(&cfg, &ctx, 0, 10, &m));
    ST(RT_ERR_INVALID_ARG, "class", rt_revnet_build(&cfg, &ctx, 1, 0, &m));
}

/* ------------------------------------------------------------ kernels/ */

/* Buffers for the kernel checks: every call below fits in 4096 floats. */
static float kb[8][4096];

/* Conv 8 -> 8 channels, 3x3, padding 1 on a 1x8x4x4 input, with bias. */
static rt_conv_shape conv_shape(void) {
    return (rt_conv_shape){.nsp = 2, .n = 1, .c_in = 8, .c_out = 8, .groups = 1, .in = {4, 4}, .k = {3, 3},
                           .stride = {1, 1}, .pad = {1, 1}, .dil = {1, 1}, .has_bias = 1};
}

/* 2x2 pooling with stride 2 on a 1x8x4x4 input. */
static rt_pool_shape pool_shape(void) {
    return (rt_pool_shape){.nsp = 2, .n = 1, .c = 8, .in = {4, 4}, .k = {2, 2}, .stride = {2, 2}};
}

/* Batch norm over 2x8x16 values. */
static rt_bn_shape bn_shape(void) { return (rt_bn_shape){.n = 2, .c = 8, .spatial = 16, .eps = 1e-5f}; }

CHECK_FN(rt_kernel_sgemm) {
    float a[4] = {1, 2, 3, 4}, b[4] = {1, 0, 0, 1}, c[4] = {9, 9, 9, 9};
    TOL(rt_kernel_sgemm(0, 0, 2, 2, 2, 1.0f, NULL, 2, b, 2, 0.0f, c, 2));
    TOL(rt_kernel_sgemm(0, 0, 2, 2, 2, 1.0f, a, 2, NULL, 2, 0.0f, c, 2));
    VAL(c[0] == 9.0f && c[3] == 9.0f); /* C untouched */
    TOL(rt_kernel_sgemm(0, 0, 2, 2, 2, 1.0f, a, 2, b, 2, 0.0f, NULL, 2));
    TOL(rt_kernel_sgemm(0, 0, -2, 2, 2, 1.0f, a, 2, b, 2, 0.0f, c, 2));
}

CHECK_FN(rt_kernels_release_cache) { TOL(rt_kernels_release_cache()); }
CHECK_FN(rt_kernels_cache_size) { VAL(rt_kernels_cache_size() <= RT_KERNELS_CACHE_CAPACITY); }
CHECK_FN(rt_kernels_primitives_created) { VAL(rt_kernels_primitives_created() >= 0); }
CHECK_FN(rt_kernels_weight_reorders) { VAL(rt_kernels_weight_reorders() >= 0); }

CHECK_FN(rt_conv_weight_cache_set) {
    bool was = rt_conv_weight_cache_set(true);
    VAL(rt_conv_weight_cache_enabled());
    VAL(rt_conv_weight_cache_set(was));
}
CHECK_FN(rt_conv_weight_cache_enabled) {
    bool was = rt_conv_weight_cache_set(false);
    VAL(!rt_conv_weight_cache_enabled());
    rt_conv_weight_cache_set(was);
}

/* The cached variants: the checks of the plain calls, and a NULL storage
 * is the uncached call. */
CHECK_FN(rt_kernel_conv_forward_cached) {
    rt_conv_shape s = conv_shape();
    ST(RT_ERR_INVALID_ARG, "shape", rt_kernel_conv_forward_cached(NULL, kb[0], kb[1], NULL, kb[2], kb[3]));
    ST(RT_ERR_INVALID_ARG, "x, w, y", rt_kernel_conv_forward_cached(&s, kb[0], NULL, NULL, kb[2], kb[3]));
}
CHECK_FN(rt_kernel_conv_backward_data_cached) {
    rt_conv_shape s = conv_shape();
    ST(RT_ERR_INVALID_ARG, "shape", rt_kernel_conv_backward_data_cached(NULL, kb[0], NULL, kb[1], kb[2]));
    ST(RT_ERR_INVALID_ARG, "w, dy, dx", rt_kernel_conv_backward_data_cached(&s, NULL, NULL, kb[1], kb[2]));
}
CHECK_FN(rt_kernel_conv_forward_plan_cached) {
    rt_conv_shape s = conv_shape();
    rt_kernel_plan p;
    ST(RT_ERR_INVALID_ARG, "shape", rt_kernel_conv_forward_plan_cached(NULL, NULL, &p));
    ST(RT_ERR_INVALID_ARG, "plan", rt_kernel_conv_forward_plan_cached(&s, NULL, HIDDEN_NULL(rt_kernel_plan *)));
    ST(RT_OK, NULL, rt_kernel_conv_forward_plan_cached(&s, NULL, &p));
}
CHECK_FN(rt_kernel_conv_backward_data_plan_cached) {
    rt_conv_shape s = conv_shape();
    rt_kernel_plan p;
    ST(RT_ERR_INVALID_ARG, "shape", rt_kernel_conv_backward_data_plan_cached(NULL, NULL, &p));
    ST(RT_ERR_INVALID_ARG, "plan",
       rt_kernel_conv_backward_data_plan_cached(&s, NULL, HIDDEN_NULL(rt_kernel_plan *)));
    ST(RT_OK, NULL, rt_kernel_conv_backward_data_plan_cached(&s, NULL, &p));
}
static rt_deconv_shape deconv_shape(void);
CHECK_FN(rt_kernel_deconv_forward_cached) {
    rt_deconv_shape s = deconv_shape();
    ST(RT_ERR_INVALID_ARG, "shape", rt_kernel_deconv_forward_cached(NULL, kb[0], kb[1], NULL, kb[2], kb[3]));
    ST(RT_ERR_INVALID_ARG, "x, w, y", rt_kernel_deconv_forward_cached(&s, kb[0], NULL, NULL, kb[2], kb[3]));
}
CHECK_FN(rt_kernel_deconv_backward_data_cached) {
    rt_deconv_shape s = deconv_shape();
    ST(RT_ERR_INVALID_ARG, "shape", rt_kernel_deconv_backward_data_cached(NULL, kb[0], NULL, kb[1], kb[2]));
    ST(RT_ERR_INVALID_ARG, "w, dy, dx", rt_kernel_deconv_backward_data_cached(&s, NULL, NULL, kb[1], kb[2]));
}
CHECK_FN(rt_kernel_deconv_forward_plan_cached) {
    rt_deconv_shape s = deconv_shape();
    rt_kernel_plan p;
    ST(RT_ERR_INVALID_ARG, "shape", rt_kernel_deconv_forward_plan_cached(NULL, NULL, &p));
    ST(RT_ERR_INVALID_ARG, "plan", rt_kernel_deconv_forward_plan_cached(&s, NULL, HIDDEN_NULL(rt_kernel_plan *)));
    ST(RT_OK, NULL, rt_kernel_deconv_forward_plan_cached(&s, NULL, &p));
}
CHECK_FN(rt_kernel_deconv_backward_data_plan_cached) {
    rt_deconv_shape s = deconv_shape();
    rt_kernel_plan p;
    ST(RT_ERR_INVALID_ARG, "shape", rt_kernel_deconv_backward_data_plan_cached(NULL, NULL, &p));
    ST(RT_ERR_INVALID_ARG, "plan",
       rt_kernel_deconv_backward_data_plan_cached(&s, NULL, HIDDEN_NULL(rt_kernel_plan *)));
    ST(RT_OK, NULL, rt_kernel_deconv_backward_data_plan_cached(&s, NULL, &p));
}

CHECK_FN(rt_conv_out_size) {
    rt_conv_shape s = conv_shape();
    int64_t out[3] = {-7, -7, -7};
    TOL(rt_conv_out_size(NULL, out));
    VAL(out[0] == 1 && out[1] == 1 && out[2] == 1);
    TOL(rt_conv_out_size(&s, HIDDEN_NULL(int64_t *)));
    s.stride[0] = 0;
    TOL(rt_conv_out_size(&s, out));
    VAL(out[0] == 0);
}

CHECK_FN(rt_kernel_conv_forward) {
    rt_conv_shape s = conv_shape(), bad = s;
    bad.nsp = 4;
    ST(RT_ERR_INVALID_ARG, "shape", rt_kernel_conv_forward(NULL, kb[0], kb[1], kb[2], kb[3]));
    ST(RT_ERR_INVALID_ARG, "x, w, y", rt_kernel_conv_forward(&s, NULL, kb[1], kb[2], kb[3]));
    ST(RT_ERR_INVALID_ARG, "x, w, y", rt_kernel_conv_forward(&s, kb[0], NULL, kb[2], kb[3]));
    ST(RT_ERR_INVALID_ARG, "x, w, y", rt_kernel_conv_forward(&s, kb[0], kb[1], NULL, kb[3]));
    ST(RT_ERR_INVALID_ARG, "x, w, y", rt_kernel_conv_forward(&s, kb[0], kb[1], kb[2], NULL));
    ST(RT_ERR_INVALID_ARG, "conv", rt_kernel_conv_forward(&bad, kb[0], kb[1], kb[2], kb[3]));
}

CHECK_FN(rt_kernel_conv_backward_data) {
    rt_conv_shape s = conv_shape();
    ST(RT_ERR_INVALID_ARG, "shape", rt_kernel_conv_backward_data(NULL, kb[0], kb[1], kb[2]));
    ST(RT_ERR_INVALID_ARG, "w, dy, dx", rt_kernel_conv_backward_data(&s, NULL, kb[1], kb[2]));
    ST(RT_ERR_INVALID_ARG, "w, dy, dx", rt_kernel_conv_backward_data(&s, kb[0], NULL, kb[2]));
    ST(RT_ERR_INVALID_ARG, "w, dy, dx", rt_kernel_conv_backward_data(&s, kb[0], kb[1], NULL));
}

CHECK_FN(rt_kernel_conv_backward_weights) {
    rt_conv_shape s = conv_shape();
    ST(RT_ERR_INVALID_ARG, "shape", rt_kernel_conv_backward_weights(NULL, kb[0], kb[1], kb[2], kb[3]));
    ST(RT_ERR_INVALID_ARG, "x, dy, dw", rt_kernel_conv_backward_weights(&s, NULL, kb[1], kb[2], kb[3]));
    ST(RT_ERR_INVALID_ARG, "x, dy, dw", rt_kernel_conv_backward_weights(&s, kb[0], NULL, kb[2], kb[3]));
    ST(RT_ERR_INVALID_ARG, "x, dy, dw", rt_kernel_conv_backward_weights(&s, kb[0], kb[1], NULL, kb[3]));
}

CHECK_FN(rt_conv_algo_set) {
    rt_conv_algo now = rt_conv_algo_get();
    VAL(rt_conv_algo_set((rt_conv_algo)99) == now && rt_conv_algo_get() == now); /* ignored */
}

CHECK_FN(rt_conv_algo_get) { VAL(rt_conv_algo_name(rt_conv_algo_get()) != NULL); }
CHECK_FN(rt_conv_algo_name) { VAL(rt_conv_algo_name((rt_conv_algo)99) == NULL); }

CHECK_FN(rt_conv_algo_parse) {
    rt_conv_algo a;
    ST(RT_ERR_INVALID_ARG, "algorithm", rt_conv_algo_parse(NULL, &a));
    ST(RT_ERR_INVALID_ARG, "out", rt_conv_algo_parse("direct", NULL));
    ST(RT_ERR_INVALID_ARG, "algorithm", rt_conv_algo_parse("fastest", &a));
}

CHECK_FN(rt_conv_shape_check) {
    rt_conv_shape s = conv_shape(), bad = s;
    bad.k[1] = 0;
    ST(RT_ERR_INVALID_ARG, "shape", rt_conv_shape_check(NULL, HIDDEN_NULL(int64_t *)));
    ST(RT_OK, NULL, rt_conv_shape_check(&s, HIDDEN_NULL(int64_t *))); /* out is optional */
    ST(RT_ERR_INVALID_ARG, "conv", rt_conv_shape_check(&bad, HIDDEN_NULL(int64_t *)));
}

CHECK_FN(rt_kernel_relu_forward) {
    ST(RT_ERR_INVALID_ARG, "NULL", rt_kernel_relu_forward(16, 0.0f, NULL, kb[1]));
    ST(RT_ERR_INVALID_ARG, "NULL", rt_kernel_relu_forward(16, 0.0f, kb[0], NULL));
    ST(RT_ERR_INVALID_ARG, "relu", rt_kernel_relu_forward(-1, 0.0f, kb[0], kb[1]));
    ST(RT_ERR_INVALID_ARG, "relu", rt_kernel_relu_forward(16, NAN, kb[0], kb[1]));
}

CHECK_FN(rt_kernel_relu_backward) {
    ST(RT_ERR_INVALID_ARG, "NULL", rt_kernel_relu_backward(16, 0.0f, NULL, kb[1], kb[2]));
    ST(RT_ERR_INVALID_ARG, "NULL", rt_kernel_relu_backward(16, 0.0f, kb[0], NULL, kb[2]));
    ST(RT_ERR_INVALID_ARG, "NULL", rt_kernel_relu_backward(16, 0.0f, kb[0], kb[1], NULL));
    ST(RT_ERR_INVALID_ARG, "relu", rt_kernel_relu_backward(16, -0.5f, kb[0], kb[1], kb[2]));
}

CHECK_FN(rt_kernel_relu_backward_half) {
    uint16_t h[16] = {0};
    ST(RT_ERR_INVALID_ARG, "non-NULL", rt_kernel_relu_backward_half(16, 0.0f, NULL, RT_BF16, kb[1], kb[2], RT_F32));
    ST(RT_ERR_INVALID_ARG, "non-NULL", rt_kernel_relu_backward_half(16, 0.0f, h, RT_BF16, NULL, kb[2], RT_F32));
    ST(RT_ERR_INVALID_ARG, "non-NULL", rt_kernel_relu_backward_half(16, 0.0f, h, RT_BF16, kb[1], NULL, RT_F32));
    ST(RT_ERR_INVALID_ARG, "negative_slope", rt_kernel_relu_backward_half(16, -0.5f, h, RT_BF16, kb[1], kb[2], RT_F32));
    ST(RT_ERR_DTYPE, "bf16 or f16", rt_kernel_relu_backward_half(16, 0.0f, h, RT_F32, kb[1], kb[2], RT_F32));
    ST(RT_ERR_DTYPE, "rounded", rt_kernel_relu_backward_half(16, 0.0f, h, RT_BF16, kb[1], kb[2], RT_F16));
}

/* the meta backend's entry, which has no buffers, keeps the other rules */
CHECK_FN(rt_kernel_relu_backward_half_check) {
    const rt_backend *meta = rt_backend_get(RT_DEVICE_META);
    ST(RT_ERR_INVALID_ARG, "n >= 0", rt_kernel_relu_backward_half_check(-1, 0.0f, RT_BF16, RT_F32));
    ST(RT_ERR_INVALID_ARG, "negative_slope", rt_kernel_relu_backward_half_check(16, -0.5f, RT_BF16, RT_F32));
    ST(RT_ERR_DTYPE, "bf16 or f16", rt_kernel_relu_backward_half_check(16, 0.0f, RT_F32, RT_F32));
    ST(RT_ERR_DTYPE, "rounded", rt_kernel_relu_backward_half_check(16, 0.0f, RT_BF16, RT_F16));
    ST(RT_ERR_DTYPE, "bf16 or f16", meta->relu_backward_half(16, 0.0f, NULL, RT_F32, NULL, NULL, RT_F32));
    ST(RT_ERR_INVALID_ARG, "negative_slope", meta->relu_backward_half(16, -1.0f, NULL, RT_BF16, NULL, NULL, RT_F32));
    CHECK_OK(rt_kernel_relu_backward_half_check(16, 0.25f, RT_F16, RT_BF16));
    CHECK_OK(meta->relu_backward_half(16, 0.0f, NULL, RT_BF16, NULL, NULL, RT_BF16));
}

CHECK_FN(rt_kernel_reorder_layout) {
    const int64_t shape[4] = {1, rt_layout_block(), 2, 2};
    ST(RT_ERR_INVALID_ARG, "shape", rt_kernel_reorder_layout(4, NULL, RT_LAYOUT_PLAIN, RT_LAYOUT_BLOCKED, kb[0], kb[1]));
    ST(RT_ERR_INVALID_ARG, "src", rt_kernel_reorder_layout(4, shape, RT_LAYOUT_PLAIN, RT_LAYOUT_BLOCKED, NULL, kb[1]));
    ST(RT_ERR_INVALID_ARG, "dst", rt_kernel_reorder_layout(4, shape, RT_LAYOUT_PLAIN, RT_LAYOUT_BLOCKED, kb[0], NULL));
    ST(RT_ERR_INVALID_ARG, "ndim", rt_kernel_reorder_layout(3, shape, RT_LAYOUT_PLAIN, RT_LAYOUT_BLOCKED, kb[0], kb[1]));
    ST(RT_ERR_INVALID_ARG, "layout", rt_kernel_reorder_layout(4, shape, RT_LAYOUT_PLAIN, (rt_layout)5, kb[0], kb[1]));
}

CHECK_FN(rt_kernel_batchnorm_forward_train) {
    rt_bn_shape s = bn_shape(), bad = s;
    bad.c = 0;
    float *x = kb[0], *y = kb[1], *m = kb[2], *v = kb[3];
    ST(RT_ERR_INVALID_ARG, "shape", rt_kernel_batchnorm_forward_train(NULL, x, NULL, NULL, y, m, v));
    ST(RT_ERR_INVALID_ARG, "non-NULL", rt_kernel_batchnorm_forward_train(&s, NULL, NULL, NULL, y, m, v));
    ST(RT_ERR_INVALID_ARG, "non-NULL", rt_kernel_batchnorm_forward_train(&s, x, NULL, NULL, NULL, m, v));
    ST(RT_ERR_INVALID_ARG, "non-NULL", rt_kernel_batchnorm_forward_train(&s, x, NULL, NULL, y, NULL, v));
    ST(RT_ERR_INVALID_ARG, "non-NULL", rt_kernel_batchnorm_forward_train(&s, x, NULL, NULL, y, m, NULL));
    ST(RT_ERR_INVALID_ARG, "batchnorm", rt_kernel_batchnorm_forward_train(&bad, x, NULL, NULL, y, m, v));
}

CHECK_FN(rt_kernel_batchnorm_forward_eval) {
    rt_bn_shape s = bn_shape();
    float *x = kb[0], *y = kb[1], *m = kb[2], *v = kb[3];
    ST(RT_ERR_INVALID_ARG, "shape", rt_kernel_batchnorm_forward_eval(NULL, x, NULL, NULL, m, v, y));
    ST(RT_ERR_INVALID_ARG, "non-NULL", rt_kernel_batchnorm_forward_eval(&s, NULL, NULL, NULL, m, v, y));
    ST(RT_ERR_INVALID_ARG, "non-NULL", rt_kernel_batchnorm_forward_eval(&s, x, NULL, NULL, NULL, v, y));
    ST(RT_ERR_INVALID_ARG, "non-NULL", rt_kernel_batchnorm_forward_eval(&s, x, NULL, NULL, m, NULL, y));
    ST(RT_ERR_INVALID_ARG, "non-NULL", rt_kernel_batchnorm_forward_eval(&s, x, NULL, NULL, m, v, NULL));
}

CHECK_FN(rt_kernel_batchnorm_backward) {
    rt_bn_shape s = bn_shape();
    float *x = kb[0], *dy = kb[1], *m = kb[2], *v = kb[3], *dx = kb[4], *dw = kb[5];
    ST(RT_ERR_INVALID_ARG, "shape", rt_kernel_batchnorm_backward(NULL, x, dy, m, v, NULL, dx, NULL, NULL));
    ST(RT_ERR_INVALID_ARG, "non-NULL", rt_kernel_batchnorm_backward(&s, NULL, dy, m, v, NULL, dx, NULL, NULL));
    ST(RT_ERR_INVALID_ARG, "non-NULL", rt_kernel_batchnorm_backward(&s, x, NULL, m, v, NULL, dx, NULL, NULL));
    ST(RT_ERR_INVALID_ARG, "non-NULL", rt_kernel_batchnorm_backward(&s, x, dy, NULL, v, NULL, dx, NULL, NULL));
    ST(RT_ERR_INVALID_ARG, "non-NULL", rt_kernel_batchnorm_backward(&s, x, dy, m, NULL, NULL, dx, NULL, NULL));
    ST(RT_ERR_INVALID_ARG, "non-NULL", rt_kernel_batchnorm_backward(&s, x, dy, m, v, NULL, NULL, NULL, NULL));
    ST(RT_ERR_INVALID_ARG, "weight", rt_kernel_batchnorm_backward(&s, x, dy, m, v, NULL, dx, dw, NULL));
}

CHECK_FN(rt_kernel_batchnorm_relu_workspace_bytes) {
    rt_error_clear();
    VAL(rt_kernel_batchnorm_relu_workspace_bytes(NULL) == 0 && rt_error_last_status() == RT_ERR_INVALID_ARG);
}

CHECK_FN(rt_kernel_batchnorm_relu_forward_train) {
    rt_bn_shape s = bn_shape();
    float *x = kb[0], *y = kb[1], *m = kb[2], *v = kb[3], *ws = kb[4];
    ST(RT_ERR_INVALID_ARG, "shape", rt_kernel_batchnorm_relu_forward_train(NULL, x, NULL, NULL, y, m, v, ws));
    ST(RT_ERR_INVALID_ARG, "non-NULL", rt_kernel_batchnorm_relu_forward_train(&s, NULL, NULL, NULL, y, m, v, ws));
    ST(RT_ERR_INVALID_ARG, "non-NULL", rt_kernel_batchnorm_relu_forward_train(&s, x, NULL, NULL, NULL, m, v, ws));
    ST(RT_ERR_INVALID_ARG, "non-NULL", rt_kernel_batchnorm_relu_forward_train(&s, x, NULL, NULL, y, NULL, v, ws));
    ST(RT_ERR_INVALID_ARG, "non-NULL", rt_kernel_batchnorm_relu_forward_train(&s, x, NULL, NULL, y, m, NULL, ws));
    ST(RT_ERR_INVALID_ARG, "non-NULL", rt_kernel_batchnorm_relu_forward_train(&s, x, NULL, NULL, y, m, v, NULL));
}

CHECK_FN(rt_kernel_batchnorm_relu_backward) {
    rt_bn_shape s = bn_shape();
    float *x = kb[0], *dy = kb[1], *m = kb[2], *v = kb[3], *ws = kb[4], *dx = kb[5];
    ST(RT_ERR_INVALID_ARG, "shape", rt_kernel_batchnorm_relu_backward(NULL, x, dy, m, v, NULL, ws, dx, NULL, NULL));
    ST(RT_ERR_INVALID_ARG, "non-NULL", rt_kernel_batchnorm_relu_backward(&s, NULL, dy, m, v, NULL, ws, dx, NULL, NULL));
    ST(RT_ERR_INVALID_ARG, "non-NULL", rt_kernel_batchnorm_relu_backward(&s, x, NULL, m, v, NULL, ws, dx, NULL, NULL));
    ST(RT_ERR_INVALID_ARG, "non-NULL", rt_kernel_batchnorm_relu_backward(&s, x, dy, NULL, v, NULL, ws, dx, NULL, NULL));
    ST(RT_ERR_INVALID_ARG, "non-NULL", rt_kernel_batchnorm_relu_backward(&s, x, dy, m, NULL, NULL, ws, dx, NULL, NULL));
    ST(RT_ERR_INVALID_ARG, "non-NULL", rt_kernel_batchnorm_relu_backward(&s, x, dy, m, v, NULL, NULL, dx, NULL, NULL));
    ST(RT_ERR_INVALID_ARG, "non-NULL", rt_kernel_batchnorm_relu_backward(&s, x, dy, m, v, NULL, ws, NULL, NULL, NULL));
}

CHECK_FN(rt_pool_out_size) {
    rt_pool_shape s = pool_shape();
    int64_t out[3] = {-7, -7, -7};
    TOL(rt_pool_out_size(NULL, out));
    VAL(out[0] == 1 && out[1] == 1 && out[2] == 1);
    TOL(rt_pool_out_size(&s, HIDDEN_NULL(int64_t *)));
}

CHECK_FN(rt_pool_shape_check) {
    rt_pool_shape s = pool_shape(), bad = s;
    bad.k[0] = 0;
    ST(RT_ERR_INVALID_ARG, "shape", rt_pool_shape_check(NULL, HIDDEN_NULL(int64_t *)));
    ST(RT_OK, NULL, rt_pool_shape_check(&s, HIDDEN_NULL(int64_t *)));
    ST(RT_ERR_INVALID_ARG, "pool", rt_pool_shape_check(&bad, HIDDEN_NULL(int64_t *)));
}

CHECK_FN(rt_kernel_maxpool_workspace_bytes) {
    rt_error_clear();
    VAL(rt_kernel_maxpool_workspace_bytes(NULL) == 0 && rt_error_last_status() == RT_ERR_INVALID_ARG);
}

CHECK_FN(rt_kernel_maxpool_forward) {
    rt_pool_shape s = pool_shape();
    ST(RT_ERR_INVALID_ARG, "shape", rt_kernel_maxpool_forward(NULL, kb[0], kb[1], kb[2]));
    ST(RT_ERR_INVALID_ARG, "non-NULL", rt_kernel_maxpool_forward(&s, NULL, kb[1], kb[2]));
    ST(RT_ERR_INVALID_ARG, "non-NULL", rt_kernel_maxpool_forward(&s, kb[0], NULL, kb[2]));
    ST(RT_OK, NULL, rt_kernel_maxpool_forward(&s, kb[0], kb[1], NULL)); /* no workspace: inference */
}

CHECK_FN(rt_kernel_maxpool_backward) {
    rt_pool_shape s = pool_shape();
    ST(RT_ERR_INVALID_ARG, "shape", rt_kernel_maxpool_backward(NULL, kb[0], kb[1], kb[2]));
    ST(RT_ERR_INVALID_ARG, "non-NULL", rt_kernel_maxpool_backward(&s, NULL, kb[1], kb[2]));
    ST(RT_ERR_INVALID_ARG, "non-NULL", rt_kernel_maxpool_backward(&s, kb[0], NULL, kb[2]));
    ST(RT_ERR_INVALID_ARG, "non-NULL", rt_kernel_maxpool_backward(&s, kb[0], kb[1], NULL));
}

CHECK_FN(rt_kernel_avgpool_forward) {
    rt_pool_shape s = pool_shape();
    ST(RT_ERR_INVALID_ARG, "shape", rt_kernel_avgpool_forward(NULL, kb[0], kb[1]));
    ST(RT_ERR_INVALID_ARG, "non-NULL", rt_kernel_avgpool_forward(&s, NULL, kb[1]));
    ST(RT_ERR_INVALID_ARG, "non-NULL", rt_kernel_avgpool_forward(&s, kb[0], NULL));
}

CHECK_FN(rt_kernel_avgpool_backward) {
    rt_pool_shape s = pool_shape();
    ST(RT_ERR_INVALID_ARG, "shape", rt_kernel_avgpool_backward(NULL, kb[0], kb[1]));
    ST(RT_ERR_INVALID_ARG, "non-NULL", rt_kernel_avgpool_backward(&s, NULL, kb[1]));
    ST(RT_ERR_INVALID_ARG, "non-NULL", rt_kernel_avgpool_backward(&s, kb[0], NULL));
}

/* The reference kernels, like the oneDNN ones, check every required buffer. */
CHECK_FN(rt_ref_conv_forward) {
    rt_conv_shape s = conv_shape();
    ST(RT_ERR_INVALID_ARG, "shape", rt_ref_conv_forward(NULL, kb[0], kb[1], kb[2], kb[3]));
    ST(RT_ERR_INVALID_ARG, "x", rt_ref_conv_forward(&s, NULL, kb[1], kb[2], kb[3]));
    ST(RT_ERR_INVALID_ARG, "w", rt_ref_conv_forward(&s, kb[0], NULL, kb[2], kb[3]));
    ST(RT_ERR_INVALID_ARG, "y", rt_ref_conv_forward(&s, kb[0], kb[1], kb[2], NULL));
}

CHECK_FN(rt_ref_conv_backward_data) {
    rt_conv_shape s = conv_shape();
    ST(RT_ERR_INVALID_ARG, "shape", rt_ref_conv_backward_data(NULL, kb[0], kb[1], kb[2]));
    ST(RT_ERR_INVALID_ARG, "w", rt_ref_conv_backward_data(&s, NULL, kb[1], kb[2]));
    ST(RT_ERR_INVALID_ARG, "dy", rt_ref_conv_backward_data(&s, kb[0], NULL, kb[2]));
    ST(RT_ERR_INVALID_ARG, "dx", rt_ref_conv_backward_data(&s, kb[0], kb[1], NULL));
}

CHECK_FN(rt_ref_conv_backward_weights) {
    rt_conv_shape s = conv_shape();
    ST(RT_ERR_INVALID_ARG, "shape", rt_ref_conv_backward_weights(NULL, kb[0], kb[1], kb[2], kb[3]));
    ST(RT_ERR_INVALID_ARG, "x", rt_ref_conv_backward_weights(&s, NULL, kb[1], kb[2], kb[3]));
    ST(RT_ERR_INVALID_ARG, "dy", rt_ref_conv_backward_weights(&s, kb[0], NULL, kb[2], kb[3]));
    ST(RT_ERR_INVALID_ARG, "dw", rt_ref_conv_backward_weights(&s, kb[0], kb[1], NULL, kb[3]));
}

CHECK_FN(rt_ref_maxpool_forward) {
    rt_pool_shape s = pool_shape();
    ST(RT_ERR_INVALID_ARG, "shape", rt_ref_maxpool_forward(NULL, kb[0], kb[1]));
    ST(RT_ERR_INVALID_ARG, "x", rt_ref_maxpool_forward(&s, NULL, kb[1]));
    ST(RT_ERR_INVALID_ARG, "y", rt_ref_maxpool_forward(&s, kb[0], NULL));
}

CHECK_FN(rt_ref_maxpool_backward) {
    rt_pool_shape s = pool_shape();
    ST(RT_ERR_INVALID_ARG, "shape", rt_ref_maxpool_backward(NULL, kb[0], kb[1], kb[2]));
    ST(RT_ERR_INVALID_ARG, "x", rt_ref_maxpool_backward(&s, NULL, kb[1], kb[2]));
    ST(RT_ERR_INVALID_ARG, "dy", rt_ref_maxpool_backward(&s, kb[0], NULL, kb[2]));
    ST(RT_ERR_INVALID_ARG, "dx", rt_ref_maxpool_backward(&s, kb[0], kb[1], NULL));
}

CHECK_FN(rt_ref_avgpool_forward) {
    rt_pool_shape s = pool_shape();
    ST(RT_ERR_INVALID_ARG, "shape", rt_ref_avgpool_forward(NULL, kb[0], kb[1]));
    ST(RT_ERR_INVALID_ARG, "x", rt_ref_avgpool_forward(&s, NULL, kb[1]));
    ST(RT_ERR_INVALID_ARG, "y", rt_ref_avgpool_forward(&s, kb[0], NULL));
}

CHECK_FN(rt_ref_avgpool_backward) {
    rt_pool_shape s = pool_shape();
    ST(RT_ERR_INVALID_ARG, "shape", rt_ref_avgpool_backward(NULL, kb[0], kb[1]));
    ST(RT_ERR_INVALID_ARG, "dy", rt_ref_avgpool_backward(&s, NULL, kb[1]));
    ST(RT_ERR_INVALID_ARG, "dx", rt_ref_avgpool_backward(&s, kb[0], NULL));
}

CHECK_FN(rt_ref_batchnorm_forward_train) {
    rt_bn_shape s = bn_shape();
    float *x = kb[0], *y = kb[1], *m = kb[2], *v = kb[3];
    ST(RT_ERR_INVALID_ARG, "shape", rt_ref_batchnorm_forward_train(NULL, x, NULL, NULL, y, m, v));
    ST(RT_ERR_INVALID_ARG, "x", rt_ref_batchnorm_forward_train(&s, NULL, NULL, NULL, y, m, v));
    ST(RT_ERR_INVALID_ARG, "y", rt_ref_batchnorm_forward_train(&s, x, NULL, NULL, NULL, m, v));
    ST(RT_ERR_INVALID_ARG, "mean", rt_ref_batchnorm_forward_train(&s, x, NULL, NULL, y, NULL, v));
    ST(RT_ERR_INVALID_ARG, "var", rt_ref_batchnorm_forward_train(&s, x, NULL, NULL, y, m, NULL));
}

CHECK_FN(rt_ref_batchnorm_forward_eval) {
    rt_bn_shape s = bn_shape();
    float *x = kb[0], *y = kb[1], *m = kb[2], *v = kb[3];
    ST(RT_ERR_INVALID_ARG, "shape", rt_ref_batchnorm_forward_eval(NULL, x, NULL, NULL, m, v, y));
    ST(RT_ERR_INVALID_ARG, "x", rt_ref_batchnorm_forward_eval(&s, NULL, NULL, NULL, m, v, y));
    ST(RT_ERR_INVALID_ARG, "mean", rt_ref_batchnorm_forward_eval(&s, x, NULL, NULL, NULL, v, y));
    ST(RT_ERR_INVALID_ARG, "var", rt_ref_batchnorm_forward_eval(&s, x, NULL, NULL, m, NULL, y));
    ST(RT_ERR_INVALID_ARG, "y", rt_ref_batchnorm_forward_eval(&s, x, NULL, NULL, m, v, NULL));
}

CHECK_FN(rt_ref_batchnorm_backward) {
    rt_bn_shape s = bn_shape();
    float *x = kb[0], *dy = kb[1], *m = kb[2], *v = kb[3], *dx = kb[4];
    ST(RT_ERR_INVALID_ARG, "shape", rt_ref_batchnorm_backward(NULL, x, dy, m, v, NULL, dx, NULL, NULL));
    ST(RT_ERR_INVALID_ARG, "x", rt_ref_batchnorm_backward(&s, NULL, dy, m, v, NULL, dx, NULL, NULL));
    ST(RT_ERR_INVALID_ARG, "dy", rt_ref_batchnorm_backward(&s, x, NULL, m, v, NULL, dx, NULL, NULL));
    ST(RT_ERR_INVALID_ARG, "mean", rt_ref_batchnorm_backward(&s, x, dy, NULL, v, NULL, dx, NULL, NULL));
    ST(RT_ERR_INVALID_ARG, "var", rt_ref_batchnorm_backward(&s, x, dy, m, NULL, NULL, dx, NULL, NULL));
    ST(RT_ERR_INVALID_ARG, "dx", rt_ref_batchnorm_backward(&s, x, dy, m, v, NULL, NULL, NULL, NULL));
}

CHECK_FN(rt_set_num_threads) {
    int prev = rt_get_num_threads();
    TOL(rt_set_num_threads(-3)); /* <= 0: every core */
    VAL(rt_get_num_threads() >= 1);
    rt_set_num_threads(prev);
}

CHECK_FN(rt_get_num_threads) { VAL(rt_get_num_threads() >= 1); }

/* The run-time ISA queries take nothing and never fail. */
CHECK_FN(rt_layout_block) { VAL(rt_layout_block() == 8 || rt_layout_block() == 16); }
CHECK_FN(rt_layout_pads_much) { /* the block itself pads nothing, half a block doubles; no size is padded */
    int64_t b = rt_layout_block();
    VAL(!rt_layout_pads_much(b) && rt_layout_pads_much(b / 2) && !rt_layout_pads_much(0) && !rt_layout_pads_much(-b));
}
CHECK_FN(rt_layout_pads) { /* any padding: 30 of 32 channels pads, not much */
    int64_t b = rt_layout_block();
    VAL(!rt_layout_pads(b) && !rt_layout_pads(2 * b) && rt_layout_pads(2 * b - 2) && !rt_layout_pads_much(2 * b - 2) &&
        !rt_layout_pads(0) && !rt_layout_pads(-b));
}

CHECK_FN(rt_layout_weight_blockable) { /* impossible sizes answer false */
    int64_t b = rt_layout_block();
    VAL(rt_layout_weight_blockable(b, 2 * b) && !rt_layout_weight_blockable(b, 3) && !rt_layout_weight_blockable(0, b) &&
        !rt_layout_weight_blockable(-b, b));
}
CHECK_FN(rt_cpu_level_get) { VAL(rt_cpu_level_get() >= RT_CPU_BASELINE && rt_cpu_level_get() <= RT_CPU_AVX512); }
CHECK_FN(rt_cpu_level_name) {
    VAL(strcmp(rt_cpu_level_name((rt_cpu_level)99), "unknown") == 0);
    VAL(strcmp(rt_cpu_level_name(RT_CPU_AVX2), "AVX2") == 0);
}
CHECK_FN(rt_cpu_dnnl_isa_name) { VAL(rt_cpu_dnnl_isa_name() != NULL); }

/* The elementwise loops: a NULL buffer is a no-op that writes nothing. */
CHECK_FN(rt_vec_add) {
    float a[2] = {1, 2}, o[2] = {7, 7};
    TOL(rt_vec_add(2, NULL, a, o));
    TOL(rt_vec_add(2, a, NULL, o));
    TOL(rt_vec_add(2, a, a, NULL));
    TOL(rt_vec_add(-2, a, a, o));
    VAL(o[0] == 7.0f && o[1] == 7.0f);
}

CHECK_FN(rt_vec_sub) {
    float a[2] = {1, 2}, o[2] = {7, 7};
    TOL(rt_vec_sub(2, NULL, a, o));
    TOL(rt_vec_sub(2, a, NULL, o));
    TOL(rt_vec_sub(2, a, a, NULL));
    VAL(o[0] == 7.0f);
}

CHECK_FN(rt_vec_add_relu) {
    float a[2] = {1, 2}, o[2] = {7, 7};
    TOL(rt_vec_add_relu(2, NULL, a, o));
    TOL(rt_vec_add_relu(2, a, NULL, o));
    TOL(rt_vec_add_relu(2, a, a, NULL));
    VAL(o[0] == 7.0f);
}

CHECK_FN(rt_vec_mul) {
    float a[2] = {1, 2}, o[2] = {7, 7};
    TOL(rt_vec_mul(2, NULL, a, o));
    TOL(rt_vec_mul(2, a, NULL, o));
    TOL(rt_vec_mul(2, a, a, NULL));
    VAL(o[0] == 7.0f);
}

CHECK_FN(rt_vec_axpy) {
    float a[2] = {1, 2}, o[2] = {7, 7};
    TOL(rt_vec_axpy(2, 1.0f, NULL, o));
    TOL(rt_vec_axpy(2, 1.0f, a, NULL));
    VAL(o[0] == 7.0f);
}

CHECK_FN(rt_vec_scale) {
    float a[2] = {1, 2}, o[2] = {7, 7};
    TOL(rt_vec_scale(2, 2.0f, NULL, o));
    TOL(rt_vec_scale(2, 2.0f, a, NULL));
    VAL(o[0] == 7.0f);
}

CHECK_FN(rt_vec_sum) {
    VAL(rt_vec_sum(4, NULL) == 0.0);
    VAL(rt_vec_sum(-4, NULL) == 0.0);
}

CHECK_FN(rt_vec_sumsq) { VAL(rt_vec_sumsq(4, NULL) == 0.0); }

CHECK_FN(rt_vec_all_finite) {
    VAL(rt_vec_all_finite(4, NULL) == 0); /* nothing to vouch for */
    VAL(rt_vec_all_finite(0, NULL) == 1);
}

CHECK_FN(rt_vec_fill) {
    TOL(rt_vec_fill(4, 1.0f, NULL));
    TOL(rt_vec_fill(-4, 1.0f, kb[0]));
}

CHECK_FN(rt_vec_moments_plain) {
    float x[2] = {1, 2};
    double a[2] = {7, 7}, m[2] = {0, 0};
    TOL(rt_vec_moments_plain(2, NULL, m, a));
    TOL(rt_vec_moments_plain(2, x, m, NULL));
    TOL(rt_vec_moments_plain(0, x, NULL, a));
    VAL(a[0] == 7.0);
}

CHECK_FN(rt_vec_moments_blocked) {
    float x[2] = {1, 2};
    double a[2] = {7, 7};
    TOL(rt_vec_moments_blocked(1, 2, NULL, NULL, a));
    TOL(rt_vec_moments_blocked(1, 2, x, NULL, NULL));
    TOL(rt_vec_moments_blocked(1, 0, x, NULL, a));
    VAL(a[0] == 7.0 && a[1] == 7.0);
}

CHECK_FN(rt_vec_moments_plain_bf16) {
    uint16_t x[2] = {0x3f80, 0x4000}; /* 1, 2 */
    double a[2] = {7, 7}, m[1] = {1.5};
    TOL(rt_vec_moments_plain_bf16(2, NULL, m, a));
    TOL(rt_vec_moments_plain_bf16(2, x, m, NULL));
    TOL(rt_vec_moments_plain_bf16(0, x, NULL, a));
    VAL(a[0] == 7.0);
    rt_vec_moments_plain_bf16(2, x, NULL, a);
    rt_vec_moments_plain_bf16(2, x, m, a + 1);
    VAL(a[0] == 10.0 && a[1] == 7.5);
}

CHECK_FN(rt_vec_moments_blocked_bf16) {
    uint16_t x[2] = {0x3f80, 0x4000};
    double a[2] = {7, 7};
    TOL(rt_vec_moments_blocked_bf16(1, 2, NULL, NULL, a));
    TOL(rt_vec_moments_blocked_bf16(1, 2, x, NULL, NULL));
    TOL(rt_vec_moments_blocked_bf16(1, 0, x, NULL, a));
    VAL(a[0] == 7.0 && a[1] == 7.0);
    rt_vec_moments_blocked_bf16(1, 2, x, NULL, a);
    VAL(a[0] == 8.0 && a[1] == 9.0);
}

CHECK_FN(rt_vec_add_relu_half) {
    uint16_t h[2] = {0x3f80, 0xc000}; /* 1, -2 */
    float f[2] = {0.5f, 1.0f}, out[2] = {7, 7};
    TOL(rt_vec_add_relu_half(2, NULL, 1, f, 0, out));
    TOL(rt_vec_add_relu_half(2, h, 1, NULL, 0, out));
    TOL(rt_vec_add_relu_half(2, h, 1, f, 0, NULL));
    TOL(rt_vec_add_relu_half(0, h, 1, f, 0, out));
    VAL(out[0] == 7 && out[1] == 7);
    rt_vec_add_relu_half(2, h, 1, f, 0, out);
    VAL(out[0] == 1.5f && out[1] == 0.0f);
    rt_vec_add_relu_half(2, f, 0, h, 1, out);
    VAL(out[0] == 1.5f && out[1] == 0.0f);
    rt_vec_add_relu_half(2, h, 1, h, 1, out);
    VAL(out[0] == 2.0f && out[1] == 0.0f);
}

CHECK_FN(rt_vec_center_bf16) {
    float x[2] = {1, 2}, m[2] = {0, 0};
    uint16_t out[2] = {7, 7};
    TOL(rt_vec_center_bf16(2, 1, NULL, m, out));
    TOL(rt_vec_center_bf16(2, 1, x, NULL, out));
    TOL(rt_vec_center_bf16(2, 1, x, m, NULL));
    TOL(rt_vec_center_bf16(2, 0, x, m, out));
    TOL(rt_vec_center_bf16(0, 1, x, m, out));
    TOL(rt_vec_center_bf16(1, 2, x, m, out)); /* not a whole block */
    VAL(out[0] == 7 && out[1] == 7);
    rt_vec_center_bf16(2, 2, x, m, out);
    VAL(out[0] == 0x3f80 && out[1] == 0x4000);
}

CHECK_FN(rt_vec_fingerprint) {
    float x[2] = {1, 2};
    double f[3] = {7, 7, 7};
    TOL(rt_vec_fingerprint(2, NULL, 0, f));
    TOL(rt_vec_fingerprint(2, x, 0, NULL));
    TOL(rt_vec_fingerprint(-2, x, 0, f));
    VAL(f[0] == 7.0 && f[2] == 7.0);
}

CHECK_FN(rt_vec_pow) {
    float a[2] = {1, 2}, o[2] = {7, 7};
    TOL(rt_vec_pow(2, 3.0f, NULL, o));
    TOL(rt_vec_pow(2, 3.0f, a, NULL));
    VAL(o[0] == 7.0f);
}

CHECK_FN(rt_vec_pow_backward) {
    float a[2] = {1, 2}, o[2] = {7, 7};
    TOL(rt_vec_pow_backward(2, 3.0f, NULL, a, o));
    TOL(rt_vec_pow_backward(2, 3.0f, a, NULL, o));
    TOL(rt_vec_pow_backward(2, 0.0f, a, a, NULL));
    VAL(o[0] == 7.0f);
}

CHECK_FN(rt_vec_tanh) {
    float a[2] = {1, 2}, o[2] = {7, 7};
    TOL(rt_vec_tanh(2, NULL, o));
    TOL(rt_vec_tanh(2, a, NULL));
    VAL(o[0] == 7.0f);
}

CHECK_FN(rt_vec_tanh_backward) {
    float a[2] = {1, 2}, o[2] = {7, 7};
    TOL(rt_vec_tanh_backward(2, NULL, a, o));
    TOL(rt_vec_tanh_backward(2, a, NULL, o));
    TOL(rt_vec_tanh_backward(2, a, a, NULL));
    VAL(o[0] == 7.0f);
}

CHECK_FN(rt_vec_sigmoid) {
    float a[2] = {1, 2}, o[2] = {7, 7};
    TOL(rt_vec_sigmoid(2, NULL, o));
    TOL(rt_vec_sigmoid(2, a, NULL));
    VAL(o[0] == 7.0f);
}

CHECK_FN(rt_vec_sigmoid_backward) {
    float a[2] = {1, 2}, o[2] = {7, 7};
    TOL(rt_vec_sigmoid_backward(2, NULL, a, o));
    TOL(rt_vec_sigmoid_backward(2, a, NULL, o));
    TOL(rt_vec_sigmoid_backward(2, a, a, NULL));
    VAL(o[0] == 7.0f);
}


/* revtorch's own loops behind the backend table (kernels/vec.h scalars,
 * loss.h, optim.h, seg_loss.h, group_norm.h, blas.h rows, coupling.h): a
 * NULL buffer is a no-op for the void ones (nothing written), an error
 * naming the function for those that return a status. */
CHECK_FN(rt_vec_sum_to) {
    float x[2] = {1, 2}, y[1] = {7};
    TOL(rt_vec_sum_to(2, NULL, 1.0, y));
    TOL(rt_vec_sum_to(2, x, 1.0, NULL));
    VAL(y[0] == 7.0f);
    TOL(rt_vec_sum_to(0, NULL, 1.0, y)); /* nothing to sum: 0 */
    VAL(y[0] == 0.0f);
}

CHECK_FN(rt_vec_sumsq_to) {
    float x[2] = {1, 2}, y[1] = {7};
    TOL(rt_vec_sumsq_to(2, NULL, 1.0, y));
    TOL(rt_vec_sumsq_to(2, x, 1.0, NULL));
    VAL(y[0] == 7.0f);
}

CHECK_FN(rt_vec_fill_from) {
    float s[1] = {2}, o[2] = {7, 7};
    TOL(rt_vec_fill_from(2, NULL, 1.0, o));
    TOL(rt_vec_fill_from(2, s, 1.0, NULL));
    TOL(rt_vec_fill_from(-2, s, 1.0, o));
    VAL(o[0] == 7.0f);
}

CHECK_FN(rt_vec_diff_norms) {
    float p[2] = {1, 2};
    double o[2] = {7, 7};
    TOL(rt_vec_diff_norms(2, NULL, p, o));
    TOL(rt_vec_diff_norms(2, p, NULL, o));
    TOL(rt_vec_diff_norms(2, p, p, HIDDEN_NULL(double *)));
    VAL(o[0] == 7.0 && o[1] == 7.0);
}

CHECK_FN(rt_vec_max_abs_diff) {
    float p[2] = {1, 2};
    double o[2] = {7, 7};
    TOL(rt_vec_max_abs_diff(2, NULL, p, o));
    TOL(rt_vec_max_abs_diff(2, p, NULL, o));
    TOL(rt_vec_max_abs_diff(2, p, p, HIDDEN_NULL(double *)));
    VAL(o[0] == 7.0 && o[1] == 7.0);
}

CHECK_FN(rt_vec_first_negative) {
    float x[2] = {1, -2}, v = 7;
    VAL(rt_vec_first_negative(2, NULL, &v) == -1 && v == 7.0f);
    VAL(rt_vec_first_negative(-2, x, &v) == -1);
    VAL(rt_vec_first_negative(2, x, NULL) == 1);
    VAL(rt_vec_first_negative(2, x, &v) == 1 && v == -2.0f);
}

CHECK_FN(rt_kernel_cross_entropy_forward) {
    int32_t t[2] = {0, 1};
    ST(RT_ERR_INVALID_ARG, "z, t, p, y", rt_kernel_cross_entropy_forward(2, 2, 0.0f, NULL, t, kb[1], kb[2]));
    ST(RT_ERR_INVALID_ARG, "z, t, p, y", rt_kernel_cross_entropy_forward(2, 2, 0.0f, kb[0], NULL, kb[1], kb[2]));
    ST(RT_ERR_INVALID_ARG, "z, t, p, y", rt_kernel_cross_entropy_forward(2, 2, 0.0f, kb[0], t, NULL, kb[2]));
    ST(RT_ERR_INVALID_ARG, "z, t, p, y", rt_kernel_cross_entropy_forward(2, 2, 0.0f, kb[0], t, kb[1], NULL));
    int32_t bad[2] = {0, 5};
    ST(RT_ERR_INVALID_ARG, "target[1] = 5", rt_kernel_cross_entropy_forward(2, 2, 0.0f, kb[0], bad, kb[1], kb[2]));
}

CHECK_FN(rt_kernel_cross_entropy_backward) {
    int32_t t[2] = {0, 1};
    float d[4] = {7, 7, 7, 7}, g[1] = {1};
    TOL(rt_kernel_cross_entropy_backward(2, 2, 0.0f, NULL, t, g, d));
    TOL(rt_kernel_cross_entropy_backward(2, 2, 0.0f, kb[0], NULL, g, d));
    TOL(rt_kernel_cross_entropy_backward(2, 2, 0.0f, kb[0], t, NULL, d));
    TOL(rt_kernel_cross_entropy_backward(2, 2, 0.0f, kb[0], t, g, NULL));
    VAL(d[0] == 7.0f);
}

CHECK_FN(rt_kernel_mse_backward) {
    float d[2] = {7, 7}, g[1] = {1};
    TOL(rt_kernel_mse_backward(2, 1.0f, NULL, g, d));
    TOL(rt_kernel_mse_backward(2, 1.0f, kb[0], NULL, d));
    TOL(rt_kernel_mse_backward(2, 1.0f, kb[0], g, NULL));
    TOL(rt_kernel_mse_backward(-2, 1.0f, kb[0], g, d));
    VAL(d[0] == 7.0f);
}

CHECK_FN(rt_kernel_l1_forward) {
    float y[1] = {7};
    TOL(rt_kernel_l1_forward(2, NULL, y));
    TOL(rt_kernel_l1_forward(2, kb[0], NULL));
    VAL(y[0] == 7.0f);
}

CHECK_FN(rt_kernel_l1_backward) {
    float d[2] = {7, 7}, g[1] = {1};
    TOL(rt_kernel_l1_backward(2, 1.0f, NULL, g, d));
    TOL(rt_kernel_l1_backward(2, 1.0f, kb[0], NULL, d));
    TOL(rt_kernel_l1_backward(2, 1.0f, kb[0], g, NULL));
    TOL(rt_kernel_l1_backward(-2, 1.0f, kb[0], g, d));
    VAL(d[0] == 7.0f);
}

CHECK_FN(rt_kernel_sgd_update) {
    rt_sgd_coef c = {.momentum = 0.9f, .damp1 = 1.0f, .neg_lr = -0.1f};
    float p[2] = {7, 7}, g[2] = {1, 1};
    TOL(rt_kernel_sgd_update(2, NULL, 0, p, g, kb[0]));
    TOL(rt_kernel_sgd_update(2, &c, 0, NULL, g, kb[0]));
    TOL(rt_kernel_sgd_update(2, &c, 0, p, NULL, kb[0]));
    TOL(rt_kernel_sgd_update(2, &c, 0, p, g, NULL)); /* momentum needs its buffer */
    TOL(rt_kernel_sgd_update(-2, &c, 0, p, g, kb[0]));
    VAL(p[0] == 7.0f);
}

CHECK_FN(rt_kernel_adamw_update) {
    rt_adamw_coef c = {.decay = 1.0f, .beta1 = 0.9f, .beta2 = 0.999f, .bc2_sqrt = 1.0f, .eps = 1e-8f};
    float p[2] = {7, 7}, g[2] = {1, 1};
    TOL(rt_kernel_adamw_update(2, NULL, p, g, kb[0], kb[1]));
    TOL(rt_kernel_adamw_update(2, &c, NULL, g, kb[0], kb[1]));
    TOL(rt_kernel_adamw_update(2, &c, p, NULL, kb[0], kb[1]));
    TOL(rt_kernel_adamw_update(2, &c, p, g, NULL, kb[1]));
    TOL(rt_kernel_adamw_update(2, &c, p, g, kb[0], NULL));
    VAL(p[0] == 7.0f);
}

CHECK_FN(rt_kernel_rows_fill) {
    float b[2] = {1, 2}, y[2] = {7, 7};
    TOL(rt_kernel_rows_fill(1, 2, NULL, y));
    TOL(rt_kernel_rows_fill(1, 2, b, NULL));
    TOL(rt_kernel_rows_fill(-1, 2, b, y));
    VAL(y[0] == 7.0f);
}

CHECK_FN(rt_kernel_rows_sum) {
    float g[2] = {1, 2}, db[2] = {7, 7};
    TOL(rt_kernel_rows_sum(1, 2, NULL, db));
    TOL(rt_kernel_rows_sum(1, 2, g, NULL));
    TOL(rt_kernel_rows_sum(1, -2, g, db));
    VAL(db[0] == 7.0f);
}

CHECK_FN(rt_kernel_affine_coupling_forward) {
    ST(RT_ERR_INVALID_ARG, "x, st or y", rt_kernel_affine_coupling_forward(1, 2, 2.0f, NULL, kb[1], kb[2]));
    ST(RT_ERR_INVALID_ARG, "x, st or y", rt_kernel_affine_coupling_forward(1, 2, 2.0f, kb[0], NULL, kb[2]));
    ST(RT_ERR_INVALID_ARG, "x, st or y", rt_kernel_affine_coupling_forward(1, 2, 2.0f, kb[0], kb[1], NULL));
    ST(RT_OK, NULL, rt_kernel_affine_coupling_forward(0, 2, 2.0f, NULL, NULL, NULL));
}

CHECK_FN(rt_kernel_affine_coupling_inverse) {
    float x[2] = {7, 7};
    TOL(rt_kernel_affine_coupling_inverse(1, 2, 2.0f, NULL, kb[1], x));
    TOL(rt_kernel_affine_coupling_inverse(1, 2, 2.0f, kb[0], NULL, x));
    TOL(rt_kernel_affine_coupling_inverse(1, 2, 2.0f, kb[0], kb[1], NULL));
    VAL(x[0] == 7.0f);
}

CHECK_FN(rt_kernel_affine_coupling_backward) {
    float dx[2] = {7, 7};
    TOL(rt_kernel_affine_coupling_backward(1, 2, 2.0f, kb[0], NULL, kb[2], dx, NULL));
    TOL(rt_kernel_affine_coupling_backward(1, 2, 2.0f, kb[0], kb[1], NULL, dx, NULL));
    TOL(rt_kernel_affine_coupling_backward(1, 2, 2.0f, NULL, kb[1], kb[2], dx, kb[3])); /* dst needs x */
    TOL(rt_kernel_affine_coupling_backward(1, 2, 2.0f, kb[0], kb[1], kb[2], NULL, NULL));
    VAL(dx[0] == 7.0f);
}

CHECK_FN(rt_kernel_batchnorm_backward_eval) {
    rt_bn_shape s = {.n = 1, .c = 2, .spatial = 2, .eps = 1e-5f};
    ST(RT_ERR_INVALID_ARG, "shape", rt_kernel_batchnorm_backward_eval(NULL, kb[0], kb[1], kb[2], kb[3], kb[4], kb[5],
                                                                       kb[6], kb[7]));
    ST(RT_ERR_INVALID_ARG, "buffer", rt_kernel_batchnorm_backward_eval(&s, NULL, kb[1], kb[2], kb[3], kb[4], kb[5],
                                                                        kb[6], kb[7]));
    ST(RT_ERR_INVALID_ARG, "buffer", rt_kernel_batchnorm_backward_eval(&s, kb[0], kb[1], NULL, kb[3], kb[4], kb[5],
                                                                        kb[6], kb[7]));
    ST(RT_ERR_INVALID_ARG, "buffer", rt_kernel_batchnorm_backward_eval(&s, kb[0], kb[1], kb[2], kb[3], kb[4], kb[5],
                                                                        kb[6], NULL));
}

CHECK_FN(rt_kernel_batchnorm_center) {
    rt_bn_shape s = {.n = 1, .c = 2, .spatial = 2, .eps = 1e-5f};
    float out[4] = {7, 7, 7, 7};
    TOL(rt_kernel_batchnorm_center(NULL, kb[0], kb[1], out, RT_F32));
    TOL(rt_kernel_batchnorm_center(&s, NULL, kb[1], out, RT_F32));
    TOL(rt_kernel_batchnorm_center(&s, kb[0], NULL, out, RT_F32));
    TOL(rt_kernel_batchnorm_center(&s, kb[0], kb[1], NULL, RT_F32));
    VAL(out[0] == 7.0f);
}

CHECK_FN(rt_kernel_batchnorm_update_running) {
    rt_bn_shape s = {.n = 1, .c = 2, .spatial = 2, .eps = 1e-5f};
    float rm[2] = {7, 7};
    TOL(rt_kernel_batchnorm_update_running(NULL, 0.1f, kb[0], kb[1], rm, kb[2]));
    TOL(rt_kernel_batchnorm_update_running(&s, 0.1f, NULL, kb[1], rm, kb[2]));
    TOL(rt_kernel_batchnorm_update_running(&s, 0.1f, kb[0], kb[1], rm, NULL));
    VAL(rm[0] == 7.0f);
}

CHECK_FN(rt_kernel_pad_copy) {
    int64_t sh[2] = {1, 2}, before[2] = {0, 0};
    float d[2] = {7, 7};
    TOL(rt_kernel_pad_copy(2, sh, NULL, sh, before, 0.0f, d));
    TOL(rt_kernel_pad_copy(2, NULL, kb[0], sh, before, 0.0f, d));
    TOL(rt_kernel_pad_copy(2, sh, kb[0], sh, NULL, 0.0f, d));
    TOL(rt_kernel_pad_copy(2, sh, kb[0], sh, before, 0.0f, NULL));
    TOL(rt_kernel_pad_copy(0, sh, kb[0], sh, before, 0.0f, d));
    VAL(d[0] == 7.0f);
}

CHECK_FN(rt_kernel_channel_slice_copy_cl) {
    float p[2] = {7, 7};
    TOL(rt_kernel_channel_slice_copy_cl(1, 2, 1, 0, 2, p, NULL, RT_LAYOUT_PLAIN, 1));
    TOL(rt_kernel_channel_slice_copy_cl(1, 2, 1, 0, 2, NULL, kb[0], RT_LAYOUT_PLAIN, 0)); /* nowhere to copy to */
    TOL(rt_kernel_channel_slice_copy_cl(1, 2, 1, 1, 2, p, kb[0], RT_LAYOUT_PLAIN, 0));   /* past the whole */
    TOL(rt_kernel_channel_slice_copy_cl(1, 2, 1, 0, 2, p, kb[0], RT_LAYOUT_WEIGHT_BLOCKED, 0));
    VAL(p[0] == 7.0f);
}

CHECK_FN(rt_kernel_channel_slice_copy) {
    float p[2] = {7, 7};
    TOL(rt_kernel_channel_slice_copy(1, 2, 1, 0, 2, p, NULL, 1));
    TOL(rt_kernel_channel_slice_copy(1, 2, 1, 0, 2, NULL, kb[0], 0)); /* nowhere to copy to */
    TOL(rt_kernel_channel_slice_copy(-1, 2, 1, 0, 2, p, kb[0], 0));
    VAL(p[0] == 7.0f);
}

CHECK_FN(rt_kernel_dropout_temp_bytes) { VAL(rt_kernel_dropout_temp_bytes(-2) == 0); }

CHECK_FN(rt_kernel_dropout) {
    ST(RT_ERR_INVALID_ARG, "in or out", rt_kernel_dropout(1, 0, 0.5f, 2, NULL, kb[1]));
    ST(RT_ERR_INVALID_ARG, "in or out", rt_kernel_dropout(1, 0, 0.5f, 2, kb[0], NULL));
    ST(RT_OK, NULL, rt_kernel_dropout(1, 0, 0.5f, 0, NULL, NULL));
}

CHECK_FN(rt_kernel_affine_coupling_logdet) {
    float ld[1] = {7};
    TOL(rt_kernel_affine_coupling_logdet(1, 2, 2.0f, NULL, ld));
    TOL(rt_kernel_affine_coupling_logdet(1, 2, 2.0f, kb[0], NULL));
    VAL(ld[0] == 7.0f);
}

/* ------------------------------------------------------------ the tables */

typedef struct api_entry {
    const char *name;
    void (*check)(void);
} api_entry;
#define E(f) {#f, check_##f}

static const api_entry core_entries[] = {
    /* core/status.h */
    E(rt_status_str), E(rt_error_set), E(rt_error_last), E(rt_error_last_status), E(rt_error_clear),
    /* core/dtype.h */
    E(rt_dtype_size), E(rt_dtype_str), E(rt_dtype_safetensors_name), E(rt_dtype_from_safetensors_name),
    E(rt_f32_to_bf16), E(rt_bf16_to_f32), E(rt_f32_to_f16), E(rt_f16_to_f32), E(rt_dtype_convert),
    /* core/mem.h */
    E(rt_mem_category_str), E(rt_memstats_get), E(rt_memstats_reset_peaks), E(rt_mem_set_limit),
    E(rt_mem_get_limit), E(rt_mem_set_op), E(rt_mem_move), E(rt_mem_release_cache), E(rt_mem_set_cache_limit), E(rt_mem_set_ceiling),
    E(rt_mem_alloc), E(rt_mem_free), E(rt_mem_account), E(rt_mem_unaccount), E(rt_mem_trace_enable),
    E(rt_mem_trace_events), E(rt_mem_trace_truncate), E(rt_mem_events_write_csv), E(rt_mem_trace_write_csv), E(rt_memstats_print), E(rt_mem_set_module),
    E(rt_mem_module), E(rt_mem_intern), E(rt_mem_trace_enabled), E(rt_csv_write_field),
    /* core/rng.h */
    E(rt_philox4x32_10), E(rt_philox_uniform), E(rt_philox_blocks), E(rt_generator_uniform),
    E(rt_generator_normal), E(rt_default_generator), E(rt_manual_seed),
    /* core/tensor.h */
    E(rt_autograd_meta_release), E(rt_tensor_create), E(rt_tensor_zeros), E(rt_tensor_empty_like),
    E(rt_tensor_zeros_like), E(rt_tensor_from_data), E(rt_tensor_retain), E(rt_tensor_release),
    E(rt_tensor_detach), E(rt_tensor_view), E(rt_tensor_to), E(rt_tensor_numel), E(rt_tensor_nbytes),
    E(rt_tensor_is_meta), E(rt_tensor_data), E(rt_tensor_f32), E(rt_tensor_same_shape), E(rt_tensor_shape_str),
    E(rt_tensor_set_requires_grad), E(rt_tensor_fill), E(rt_tensor_copy), E(rt_tensor_zero_grad),
    E(rt_storage_mark_saved), E(rt_tensor_bump_version), E(rt_tensor_version), E(rt_storage_derived_find),
    E(rt_storage_derived_add), E(rt_storage_derived_drop), E(rt_storage_derived_clear),
};

static const api_entry autograd_entries[] = {
    /* autograd/engine.h */
    E(rt_backward), E(rt_accumulate_grad), E(rt_autograd_set_grad_hook),
    /* autograd/node.h */
    E(rt_node_create), E(rt_node_retain), E(rt_node_release), E(rt_node_set_output), E(rt_node_needs_grad),
    E(rt_node_save), E(rt_node_saved), E(rt_node_saved_stored), E(rt_node_release_saved), E(rt_node_release_unpacked), E(rt_node_drop_saved),
    E(rt_node_take_grad),
    E(rt_saved_tensors_hooks_push), E(rt_saved_tensors_hooks_pop), E(rt_saved_tensors_hooks_depth), E(rt_saved_tensors_hooks_top), E(rt_saved_memo_keep), E(rt_saved_memo_take),
    E(rt_grad_is_enabled), E(rt_grad_set_enabled), E(rt_recompute_is_active), E(rt_recompute_set_active),
    /* autograd/recompute.h */
    E(rt_rng_state_get), E(rt_recompute_begin), E(rt_recompute_rewind), E(rt_recompute_end), E(rt_detached_leaf),
    E(rt_leaf_grad_or_zeros),
};

static const api_entry ops_entries[] = {
    /* ops/ops.h */
    E(rt_conv), E(rt_linear), E(rt_batch_norm), E(rt_relu), E(rt_leaky_relu), E(rt_relu_inplace), E(rt_leaky_relu_inplace), E(rt_add_relu), E(rt_add_relu_inplace), E(rt_max_pool),
    E(rt_avg_pool), E(rt_adaptive_avg_pool_1), E(rt_add), E(rt_sub), E(rt_add_inplace), E(rt_sub_inplace), E(rt_mul), E(rt_mul_scalar), E(rt_mul_scalar_inplace), E(rt_sum), E(rt_mean),
    E(rt_square), E(rt_pow_scalar), E(rt_tanh), E(rt_sigmoid), E(rt_cat_channels), E(rt_split_channels), E(rt_cat_channels_layout), E(rt_split_channels_layout),
    E(rt_reshape), E(rt_flatten), E(rt_to_layout), E(rt_weight_set_layout), E(rt_copy_in_layout), E(rt_to_preferred_layout), E(rt_compare), E(rt_rel_difference),
    E(rt_dropout), E(rt_cross_entropy), E(rt_mse_loss), E(rt_l1_loss),
    /* ops/batchnorm_relu.h */
    E(rt_batch_norm_relu),
    /* ops/coupling.h */
    E(rt_affine_coupling), E(rt_affine_coupling_inverse), E(rt_affine_coupling_logdet),
};

static const api_entry nn_entries[] = {
    /* nn/module.h */
    E(rt_init_ctx_make), E(rt_module_alloc), E(rt_module_destroy), E(rt_module_forward), E(rt_module_forward_consume), E(rt_module_add_child),
    E(rt_module_append), E(rt_module_register), E(rt_module_register_counter), E(rt_module_tensor),
    E(rt_module_find), E(rt_module_train), E(rt_module_visit), E(rt_module_is), E(rt_module_state_dict),
    E(rt_module_path), E(rt_module_set_forward_hook),
    /* nn/modules.h */
    E(rt_init_uniform), E(rt_init_normal), E(rt_conv_create), E(rt_batchnorm_create), E(rt_batchnorm_configure),
    E(rt_batchnorm_view_get), E(rt_batchnorm_set_function),
    E(rt_linear_create), E(rt_relu_create), E(rt_leaky_relu_create), E(rt_dropout_create), E(rt_flatten_create),
    E(rt_max_pool_create), E(rt_avg_pool_create), E(rt_adaptive_avg_pool_create), E(rt_preferred_layout_create),
    E(rt_module_set_blocked), E(rt_module_set_weight_layout), E(rt_sequential_create),
    /* nn/state_dict.h */
    E(rt_state_dict_create), E(rt_state_dict_destroy), E(rt_state_dict_push), E(rt_state_dict_find),
    E(rt_state_dict_num_params), E(rt_state_dict_num_param_elements), E(rt_state_dict_check_values),
    E(rt_state_dict_params),
};

static const api_entry optim_train_entries[] = {
    /* optim/grad.h */
    E(rt_clip_grad_norm), E(rt_accum_loss_scale), E(rt_grad_accumulator_begin), E(rt_grad_accumulator_scale),
    E(rt_grad_accumulator_check),
    /* optim/optimizer.h */
    E(rt_sgd_default_opts), E(rt_adamw_default_opts), E(rt_sgd_create), E(rt_adamw_create), E(rt_optimizer_create),
    E(rt_optimizer_destroy), E(rt_optimizer_name), E(rt_optimizer_param_count), E(rt_optimizer_params),
    E(rt_optimizer_step), E(rt_optimizer_zero_grad), E(rt_optimizer_set_lr), E(rt_optimizer_get_lr),
    E(rt_optimizer_step_count), E(rt_optimizer_set_step_count), E(rt_optimizer_state_nbytes),
    E(rt_optimizer_state_visit), E(rt_optimizer_state_count), E(rt_optimizer_set_shard), E(rt_optimizer_owns),
    /* dist/dist.h */
    E(rt_dist_create), E(rt_dist_destroy), E(rt_dist_rank), E(rt_dist_size), E(rt_dist_attach),
    E(rt_dist_check_same), E(rt_dist_barrier), E(rt_dist_sum), E(rt_dist_shard), E(rt_dist_gather_state),
    E(rt_dist_scatter_state), E(rt_dist_stats_get), E(rt_sync_batch_norm), E(rt_dist_convert_sync_batchnorm),
    /* optim/schedule.h */
    E(rt_lr_schedule_check), E(rt_lr_at),
    /* train/step.h */
    E(rt_train_step), E(rt_count_correct), E(rt_batch_slice),
    /* memory/predict.h */
    E(rt_memory_predict),
    /* memory/reversible.h */
    E(rt_rev_block_create), E(rt_rev_block_of), E(rt_rev_block_set_channels_last), E(rt_rev_block_inverse), E(rt_rev_block_check),
    E(rt_rev_block_logdet), E(rt_rev_sequence_create), E(rt_rev_sequence_of), E(rt_rev_sequence_defer_output), E(rt_rev_sequence_give_output), E(rt_rev_sequence_on_input_rebuilt), E(rt_module_set_reversible),
    E(rt_module_set_grouping), E(rt_module_count_reversible), E(rt_reversible_reconstruction),
    /* memory/checkpoint.h, nn/module.h's interceptor */
    E(rt_module_set_interceptor), E(rt_checkpoint_policy_default), E(rt_checkpoint_side_put), E(rt_checkpoint_side_get),
    E(rt_checkpoint_side_replay), E(rt_stage_kind_str), E(rt_checkpoint_create),
    E(rt_checkpoint_of), E(rt_checkpoint_sequential), E(rt_checkpoint_set_segments), E(rt_checkpoint_set_selective),
    E(rt_checkpoint_set_plain), E(rt_checkpoint_set_plan), E(rt_checkpoint_run_stages),
    /* memory/planner.h, memory/budget.h */
    E(rt_plan_options_all), E(rt_plan_evaluate), E(rt_plan_chain), E(rt_plan_min_peak), E(rt_plan_free), E(rt_predict_cache_find), E(rt_predict_cache_add), E(rt_predict_cache_free), E(rt_chain_cache_plan), E(rt_chain_cache_free), E(rt_time_plan_plain), E(rt_time_plan_every), E(rt_time_plan_budget),
    E(rt_time_chain_run), E(rt_time_chain_profile), E(rt_time_chain_peak),
    E(rt_checkpoint_profile), E(rt_memory_mode_str), E(rt_memory_mode_parse), E(rt_memory_mode_fraction),
    E(rt_memory_plan_make), E(rt_memory_plan_free),
};

static const api_entry precision_entries[] = {
    E(rt_dtype_round), E(rt_dtype_round_into), E(rt_dtype_store_f32_serial), E(rt_bf16_round_bits), E(rt_autocast_dtype), E(rt_autocast_set_dtype), E(rt_autocast_compute_dtype),
    E(rt_autocast_set_compute_dtype), E(rt_autocast_activation_dtype), E(rt_autocast_set_activation_dtype), E(rt_precision_region_forward), E(rt_precision_region_begin), E(rt_precision_region_end), E(rt_precision_region_suspend), E(rt_precision_region_resume), E(rt_conv_bf16_available), E(rt_conv_computes_bf16),
    E(rt_precision_str), E(rt_precision_parse), E(rt_precision_dtype), E(rt_autocast_wrap),
    E(rt_autocast_precision), E(rt_precision_describe), E(rt_grad_scaler_default_opts), E(rt_grad_scaler_create),
    E(rt_grad_scaler_destroy), E(rt_grad_scaler_get_scale), E(rt_grad_scaler_skipped),
    E(rt_grad_scaler_skipped_in_row), E(rt_grad_scaler_unscale), E(rt_grad_scaler_update), E(rt_grad_scaler_hooks),
    E(rt_grad_scaler_state_get), E(rt_grad_scaler_state_set),
};

static const api_entry data_io_entries[] = {
    /* data/dataset.h */
    E(rt_sample_numel), E(rt_sample_nbytes), E(rt_dataset_create), E(rt_dataset_size), E(rt_dataset_sample_shape),
    E(rt_dataset_read), E(rt_dataset_get), E(rt_dataset_arrays_get), E(rt_dataset_destroy),
    E(rt_dataset_from_memory), E(rt_dataset_from_arrays), E(rt_dataset_subset), E(rt_dataset_channel_stats),
    /* data/idx.h */
    E(rt_idx_type_size), E(rt_idx_type_str), E(rt_idx_read), E(rt_idx_read_first), E(rt_idx_destroy),
    E(rt_idx_check_pair),
    /* data/nifti.h */
    E(rt_nifti_datatype_str), E(rt_nifti_affine_source_str), E(rt_nifti_read_info), E(rt_nifti_read),
    E(rt_nifti_read_labels), E(rt_nifti_write),
    /* data/loader.h */
    E(rt_loader_options_default), E(rt_loader_create), E(rt_loader_destroy), E(rt_loader_batches_per_epoch),
    E(rt_loader_epoch), E(rt_loader_batch_index), E(rt_loader_next), E(rt_loader_reset), E(rt_loader_seek),
    E(rt_loader_order), E(rt_loader_augment_params),
    /* data/mnist.h */
    E(rt_mnist_default_dir), E(rt_mnist_load), E(rt_moving_fashion_defaults), E(rt_moving_fashion_sequence),
    E(rt_moving_fashion_batch), E(rt_mnist_load_first),
    /* io/safetensors.h */
    E(rt_st_open), E(rt_st_count), E(rt_st_entry_at), E(rt_st_find), E(rt_st_metadata), E(rt_st_close),
    E(rt_st_dtype_size), E(rt_st_writer_create), E(rt_st_writer_add), E(rt_st_writer_set_metadata),
    E(rt_st_writer_save), E(rt_st_writer_destroy),
    /* io/weights.h */
    E(rt_weights_save), E(rt_weights_load), E(rt_weights_read_metadata),
};

static const api_entry models_entries[] = {
    /* models/model.h */
    E(rt_zoo_entries), E(rt_zoo_find), E(rt_model_names), E(rt_model_name_has_reversible), E(rt_model_blocked_weights_set), E(rt_model_create),
    E(rt_model_destroy), E(rt_model_forward),
    /* models/resblock.h, resnet.h, revnet.h */
    E(rt_resblock_create), E(rt_convlstm_create), E(rt_convlstm_config_of), E(rt_convlstm_step),
    E(rt_convlstm_seq_step), E(rt_resnet_config_get), E(rt_resnet_build), E(rt_revnet_config_get),
    E(rt_revnet_build),
    /* models/model.h, unet.h: segmentation models */
    E(rt_model_name_is_segmentation), E(rt_unet_config_get), E(rt_unet_size_multiple), E(rt_unet_build),
    /* models/edsr.h: super-resolution */
    E(rt_edsr_config_get), E(rt_edsr_build), E(rt_edsr_num_params), E(rt_edsr_rev_width),
};

static const api_entry kernels_entries[] = {
    /* core/device.h, backend/backend.h */
    E(rt_device_memory_get), E(rt_device_name), E(rt_backend_get), E(rt_backend_of),
    /* kernels/blas.h, cache.h */
    E(rt_kernel_sgemm), E(rt_kernels_release_cache), E(rt_kernels_cache_size), E(rt_kernels_primitives_created), E(rt_kernels_weight_reorders),
    E(rt_conv_weight_cache_set), E(rt_conv_weight_cache_enabled), E(rt_kernel_conv_forward_cached),
    E(rt_kernel_conv_backward_data_cached), E(rt_kernel_conv_forward_plan_cached),
    E(rt_kernel_conv_backward_data_plan_cached), E(rt_kernel_deconv_forward_cached),
    E(rt_kernel_deconv_backward_data_cached), E(rt_kernel_deconv_forward_plan_cached),
    E(rt_kernel_deconv_backward_data_plan_cached),
    /* kernels/conv.h */
    E(rt_conv_out_size), E(rt_kernel_conv_forward), E(rt_kernel_conv_backward_data),
    E(rt_kernel_conv_backward_weights), E(rt_conv_algo_set), E(rt_conv_algo_get), E(rt_conv_algo_name),
    E(rt_conv_algo_parse), E(rt_conv_shape_check),
    /* kernels/eltwise.h, layout.h */
    E(rt_kernel_relu_forward), E(rt_kernel_relu_backward_half), E(rt_kernel_relu_backward_half_check), E(rt_kernel_relu_backward), E(rt_kernel_reorder_layout), E(rt_layout_block), E(rt_layout_weight_blockable), E(rt_layout_pads_much), E(rt_layout_pads), E(rt_cpu_level_get),
    E(rt_cpu_level_name), E(rt_cpu_dnnl_isa_name),
    /* kernels/norm.h */
    E(rt_kernel_batchnorm_forward_train), E(rt_kernel_batchnorm_forward_eval), E(rt_kernel_batchnorm_backward),
    E(rt_kernel_batchnorm_relu_workspace_bytes), E(rt_kernel_batchnorm_relu_forward_train),
    E(rt_kernel_batchnorm_relu_backward),
    /* kernels/pool.h */
    E(rt_pool_out_size), E(rt_pool_shape_check), E(rt_kernel_maxpool_workspace_bytes), E(rt_kernel_maxpool_forward),
    E(rt_kernel_maxpool_backward), E(rt_kernel_avgpool_forward), E(rt_kernel_avgpool_backward),
    /* kernels/reference.h */
    E(rt_ref_conv_forward), E(rt_ref_conv_backward_data), E(rt_ref_conv_backward_weights),
    E(rt_ref_maxpool_forward), E(rt_ref_maxpool_backward), E(rt_ref_avgpool_forward), E(rt_ref_avgpool_backward),
    E(rt_ref_batchnorm_forward_train), E(rt_ref_batchnorm_forward_eval), E(rt_ref_batchnorm_backward),
    /* kernels/threads.h */
    E(rt_set_num_threads), E(rt_get_num_threads),
    /* kernels/vec.h */
    E(rt_vec_add), E(rt_vec_sub), E(rt_vec_add_relu), E(rt_vec_mul), E(rt_vec_axpy), E(rt_vec_scale),
    E(rt_vec_sum), E(rt_vec_sumsq), E(rt_vec_all_finite), E(rt_vec_fill), E(rt_vec_moments_plain), E(rt_vec_moments_blocked), E(rt_vec_center_bf16), E(rt_vec_moments_plain_bf16), E(rt_vec_moments_blocked_bf16), E(rt_vec_add_relu_half),
    E(rt_vec_fingerprint), E(rt_vec_pow), E(rt_vec_pow_backward),
    E(rt_vec_tanh), E(rt_vec_tanh_backward), E(rt_vec_sigmoid), E(rt_vec_sigmoid_backward),
    E(rt_vec_sum_to), E(rt_vec_sumsq_to), E(rt_vec_fill_from), E(rt_vec_diff_norms), E(rt_vec_max_abs_diff), E(rt_vec_first_negative),
    /* kernels/loss.h, optim.h, blas.h rows, coupling.h: the loops behind the backend table */
    E(rt_kernel_cross_entropy_forward), E(rt_kernel_cross_entropy_backward), E(rt_kernel_mse_backward),
    E(rt_kernel_l1_forward), E(rt_kernel_l1_backward),
    E(rt_kernel_sgd_update), E(rt_kernel_adamw_update), E(rt_kernel_rows_fill), E(rt_kernel_rows_sum),
    E(rt_kernel_affine_coupling_forward), E(rt_kernel_affine_coupling_inverse),
    E(rt_kernel_affine_coupling_backward), E(rt_kernel_affine_coupling_logdet),
    /* kernels/norm_loops.h */
    E(rt_kernel_batchnorm_backward_eval), E(rt_kernel_batchnorm_update_running), E(rt_kernel_batchnorm_center),
    /* kernels/dropout.h */
    E(rt_kernel_dropout_temp_bytes), E(rt_kernel_dropout),
    /* kernels/copy.h */
    E(rt_kernel_pad_copy), E(rt_kernel_channel_slice_copy), E(rt_kernel_channel_slice_copy_cl),
};

/* ------------------------------------------------------------ 3-D operators (ops/ops3d.h,
 * nn/modules3d.h, kernels/deconv.h, chanwise.h, upsample.h, softmax.h) */

/* A (1, 2, 2, 2) int32 label map of zeros (valid classes). */
static rt_tensor *labels3d(void) {
    return own(rt_tensor_zeros(4, SHAPE(1, 2, 2, 2), RT_I32, RT_DEVICE_CPU, RT_MEM_DATA));
}

CHECK_FN(rt_conv_transpose) {
    rt_tensor *x = T(1, 2, 2, 2, 2), *w = T(2, 3, 2, 2, 2), *y = NULL;
    ST(RT_ERR_INVALID_ARG, "out", rt_conv_transpose(x, w, NULL, NULL, NULL));
    ST(RT_ERR_INVALID_ARG, "input", rt_conv_transpose(NULL, w, NULL, NULL, &y));
    ST(RT_ERR_INVALID_ARG, "weight", rt_conv_transpose(x, NULL, NULL, NULL, &y));
    ST(RT_OK, NULL, rt_conv_transpose(x, w, NULL, NULL, &y)); /* bias and opts are optional */
    own(y);
    ST(RT_ERR_SHAPE, "in_channels first", rt_conv_transpose(x, T(3, 2, 2, 2, 2), NULL, NULL, &y));
}

CHECK_FN(rt_upsample_linear) {
    rt_tensor *y = NULL;
    double sc[3] = {2, 2, 2};
    ST(RT_ERR_INVALID_ARG, "out", rt_upsample_linear(T(1, 1, 2, 2, 2), NULL, sc, NULL));
    ST(RT_ERR_INVALID_ARG, "input", rt_upsample_linear(NULL, NULL, sc, &y));
    ST(RT_ERR_INVALID_ARG, "neither", rt_upsample_linear(T(1, 1, 2, 2, 2), NULL, NULL, &y));
    ST(RT_ERR_SHAPE, "trilinear", rt_upsample_linear(T(1, 2), NULL, sc, &y));
}

CHECK_FN(rt_upsample_bicubic) {
    rt_tensor *y = NULL;
    double sc[2] = {2, 2};
    ST(RT_ERR_INVALID_ARG, "out", rt_upsample_bicubic(T(1, 1, 2, 2), NULL, sc, NULL));
    ST(RT_ERR_INVALID_ARG, "input", rt_upsample_bicubic(NULL, NULL, sc, &y));
    ST(RT_ERR_INVALID_ARG, "neither", rt_upsample_bicubic(T(1, 1, 2, 2), NULL, NULL, &y));
    ST(RT_ERR_SHAPE, "bicubic", rt_upsample_bicubic(T(1, 1, 2, 2, 2), NULL, sc, &y));
}

/* rt_pixel_shuffle and its consuming variant refuse the same inputs */
#define SHUFFLE_CHECKS(fn)                                                                   \
    do {                                                                                     \
        rt_tensor *y = NULL;                                                                 \
        ST(RT_ERR_INVALID_ARG, "out", fn(T(1, 4, 2, 2), 2, NULL));                           \
        ST(RT_ERR_INVALID_ARG, "input", fn(NULL, 2, &y));                                    \
        ST(RT_ERR_INVALID_ARG, "upscale_factor", fn(T(1, 4, 2, 2), 0, &y));                  \
        ST(RT_ERR_SHAPE, "multiple", fn(T(1, 3, 2, 2), 2, &y));                              \
    } while (0)

CHECK_FN(rt_pixel_shuffle) { SHUFFLE_CHECKS(rt_pixel_shuffle); }

CHECK_FN(rt_pixel_shuffle_inplace) { SHUFFLE_CHECKS(rt_pixel_shuffle_inplace); }

CHECK_FN(rt_pixel_unshuffle) {
    rt_tensor *y = NULL;
    ST(RT_ERR_INVALID_ARG, "out", rt_pixel_unshuffle(T(1, 1, 2, 2), 2, NULL));
    ST(RT_ERR_INVALID_ARG, "input", rt_pixel_unshuffle(NULL, 2, &y));
    ST(RT_ERR_INVALID_ARG, "downscale_factor", rt_pixel_unshuffle(T(1, 1, 2, 2), -1, &y));
    ST(RT_ERR_SHAPE, "multiples", rt_pixel_unshuffle(T(1, 1, 3, 2), 2, &y));
}

CHECK_FN(rt_group_norm) {
    rt_tensor *y = NULL;
    ST(RT_ERR_INVALID_ARG, "out", rt_group_norm(T(1, 4, 2, 2, 2), 2, NULL, NULL, 1e-5f, NULL));
    ST(RT_ERR_INVALID_ARG, "input", rt_group_norm(NULL, 2, NULL, NULL, 1e-5f, &y));
    ST(RT_ERR_INVALID_ARG, "both weight and bias", rt_group_norm(T(1, 4, 2, 2, 2), 2, T(4), NULL, 1e-5f, &y));
    ST(RT_ERR_SHAPE, "divide", rt_group_norm(T(1, 4, 2, 2, 2), 3, NULL, NULL, 1e-5f, &y));
    ST(RT_ERR_SHAPE, "single spatial element", rt_group_norm(T(2, 4, 1, 1, 1), 2, NULL, NULL, 1e-5f, &y));
}

CHECK_FN(rt_instance_norm) {
    rt_tensor *y = NULL;
    ST(RT_ERR_INVALID_ARG, "out", rt_instance_norm(T(1, 4, 2, 2), NULL, NULL, NULL, NULL, true, 0.1f, 1e-5f, NULL));
    ST(RT_ERR_INVALID_ARG, "input", rt_instance_norm(NULL, NULL, NULL, NULL, NULL, true, 0.1f, 1e-5f, &y));
    ST(RT_ERR_INVALID_ARG, "running_var", rt_instance_norm(T(1, 4, 2, 2), T(4), NULL, NULL, NULL, true, 0.1f, 1e-5f, &y));
    ST(RT_ERR_INVALID_ARG, "track_running_stats",
       rt_instance_norm(T(1, 4, 2, 2), NULL, NULL, NULL, NULL, false, 0.1f, 1e-5f, &y));
    ST(RT_ERR_SHAPE, "single spatial element",
       rt_instance_norm(T(3, 4, 1, 1, 1), NULL, NULL, NULL, NULL, true, 0.1f, 1e-5f, &y));
}

CHECK_FN(rt_softmax_channels) {
    rt_tensor *y = NULL;
    ST(RT_ERR_INVALID_ARG, "out", rt_softmax_channels(T(1, 3, 2), NULL));
    ST(RT_ERR_INVALID_ARG, "input", rt_softmax_channels(NULL, &y));
    ST(RT_ERR_SHAPE, "rank", rt_softmax_channels(T(3), &y));
}

CHECK_FN(rt_cross_entropy_nd) {
    rt_tensor *x = T(1, 3, 2, 2, 2), *t = labels3d(), *y = NULL;
    ST(RT_ERR_INVALID_ARG, "out", rt_cross_entropy_nd(x, t, NULL, NULL));
    ST(RT_ERR_INVALID_ARG, "logits", rt_cross_entropy_nd(NULL, t, NULL, &y));
    ST(RT_ERR_INVALID_ARG, "target", rt_cross_entropy_nd(x, NULL, NULL, &y));
    ST(RT_ERR_DTYPE, "int32", rt_cross_entropy_nd(x, T(1, 2, 2, 2), NULL, &y));
    ST(RT_ERR_SHAPE, "weight", rt_cross_entropy_nd(x, t, T(4), &y));
}

CHECK_FN(rt_soft_dice_loss) {
    rt_tensor *x = T(1, 3, 2, 2, 2), *t = labels3d(), *y = NULL;
    ST(RT_ERR_INVALID_ARG, "out", rt_soft_dice_loss(x, t, 1e-5f, true, false, NULL));
    ST(RT_ERR_INVALID_ARG, "probs", rt_soft_dice_loss(NULL, t, 1e-5f, true, false, &y));
    ST(RT_ERR_INVALID_ARG, "target", rt_soft_dice_loss(x, NULL, 1e-5f, true, false, &y));
    ST(RT_ERR_INVALID_ARG, "smooth", rt_soft_dice_loss(x, t, -1.0f, true, false, &y));
    ST(RT_ERR_SHAPE, "target", rt_soft_dice_loss(T(1, 3, 2, 2), t, 1e-5f, true, false, &y));
}

CHECK_FN(rt_dice_ce_loss) {
    rt_tensor *x = T(1, 3, 2, 2, 2), *t = labels3d(), *y = NULL;
    ST(RT_ERR_INVALID_ARG, "out", rt_dice_ce_loss(x, t, NULL));
    ST(RT_ERR_INVALID_ARG, "logits", rt_dice_ce_loss(NULL, t, &y));
    ST(RT_ERR_INVALID_ARG, "target", rt_dice_ce_loss(x, NULL, &y));
    ST(RT_ERR_SHAPE, "2 classes", rt_dice_ce_loss(T(1, 1, 2, 2, 2), t, &y));
}

CHECK_FN(rt_loss_dice_ce) {
    rt_tensor *x = T(1, 3, 2, 2, 2), *t = labels3d(), *y = NULL;
    ST(RT_ERR_INVALID_ARG, "out", rt_loss_dice_ce(x, t, NULL, NULL));
    ST(RT_ERR_INVALID_ARG, "logits", rt_loss_dice_ce(NULL, t, NULL, &y));
    ST(RT_ERR_INVALID_ARG, "target", rt_loss_dice_ce(x, NULL, NULL, &y));
}

CHECK_FN(rt_pad_constant) {
    rt_tensor *x = T(1, 2, 3), *y = NULL;
    int64_t pad[4] = {1, 1, 0, 0}, crop[2] = {-2, -1};
    ST(RT_ERR_INVALID_ARG, "out", rt_pad_constant(x, 2, pad, 0.0f, NULL));
    ST(RT_ERR_INVALID_ARG, "input", rt_pad_constant(NULL, 2, pad, 0.0f, &y));
    ST(RT_ERR_INVALID_ARG, "pad is NULL", rt_pad_constant(x, 2, NULL, 0.0f, &y));
    ST(RT_ERR_INVALID_ARG, "even", rt_pad_constant(x, 3, pad, 0.0f, &y));
    ST(RT_ERR_INVALID_ARG, "even", rt_pad_constant(x, -2, pad, 0.0f, &y));
    ST(RT_ERR_INVALID_ARG, "rank", rt_pad_constant(T(3), 4, pad, 0.0f, &y));
    ST(RT_ERR_SHAPE, ">= 1", rt_pad_constant(x, 2, crop, 0.0f, &y));
}

CHECK_FN(rt_conv_transpose_create) {
    rt_init_ctx ctx = rt_init_ctx_make(RT_DEVICE_CPU, 1);
    rt_module *m = (rt_module *)&m;
    ST(RT_ERR_INVALID_ARG, "m", rt_conv_transpose_create(&ctx, 3, 4, 2, 2, 2, 0, 0, 1, true, NULL));
    ST(RT_ERR_INVALID_ARG, "ctx", rt_conv_transpose_create(NULL, 3, 4, 2, 2, 2, 0, 0, 1, true, &m));
    VAL(m == NULL);
    ST(RT_ERR_INVALID_ARG, "spatial", rt_conv_transpose_create(&ctx, 1, 4, 2, 2, 2, 0, 0, 1, true, &m));
    ST(RT_ERR_INVALID_ARG, "output_padding", rt_conv_transpose_create(&ctx, 3, 4, 2, 2, 2, 0, 2, 1, true, &m));
}

CHECK_FN(rt_conv_set_dilation) {
    rt_module *m = NULL;
    ST(RT_ERR_INVALID_ARG, "NULL", rt_conv_set_dilation(NULL, 2));
    ST(RT_OK, NULL, rt_relu_create(&m));
    ST(RT_ERR_INVALID_ARG, "not a Conv", rt_conv_set_dilation(m, 2));
    rt_module_destroy(m);
}

CHECK_FN(rt_conv_set_preferred_output) {
    rt_module *m = NULL;
    ST(RT_ERR_INVALID_ARG, "NULL", rt_conv_set_preferred_output(NULL, true));
    ST(RT_OK, NULL, rt_relu_create(&m));
    ST(RT_ERR_INVALID_ARG, "not a Conv", rt_conv_set_preferred_output(m, true));
    rt_module_destroy(m);
}

CHECK_FN(rt_conv_follow_blocked) { TOL(rt_conv_follow_blocked(NULL, false)); }

CHECK_FN(rt_upsample_create) {
    rt_module *m = (rt_module *)&m;
    ST(RT_ERR_INVALID_ARG, "m", rt_upsample_create(3, 0, 2.0, NULL));
    ST(RT_ERR_INVALID_ARG, "scale_factor", rt_upsample_create(3, 4, 2.0, &m));
    VAL(m == NULL);
    ST(RT_ERR_INVALID_ARG, "nsp", rt_upsample_create(4, 0, 2.0, &m));
}

/* PixelShuffle's two constructors refuse the same arguments */
#define SHUFFLE_CREATE_CHECKS(fn)                                                            \
    do {                                                                                     \
        rt_module *m = (rt_module *)&m;                                                      \
        ST(RT_ERR_INVALID_ARG, "m", fn(2, NULL));                                            \
        ST(RT_ERR_INVALID_ARG, "upscale_factor", fn(0, &m));                                 \
        VAL(m == NULL);                                                                      \
    } while (0)

CHECK_FN(rt_pixel_shuffle_create) { SHUFFLE_CREATE_CHECKS(rt_pixel_shuffle_create); }

CHECK_FN(rt_pixel_shuffle_inplace_create) { SHUFFLE_CREATE_CHECKS(rt_pixel_shuffle_inplace_create); }

CHECK_FN(rt_group_norm_create) {
    rt_init_ctx ctx = rt_init_ctx_make(RT_DEVICE_CPU, 1);
    rt_module *m = (rt_module *)&m;
    ST(RT_ERR_INVALID_ARG, "m", rt_group_norm_create(&ctx, 2, 4, 1e-5f, true, NULL));
    ST(RT_ERR_INVALID_ARG, "ctx", rt_group_norm_create(NULL, 2, 4, 1e-5f, true, &m));
    VAL(m == NULL);
    ST(RT_ERR_INVALID_ARG, "divide", rt_group_norm_create(&ctx, 3, 4, 1e-5f, true, &m));
}

CHECK_FN(rt_instance_norm_create) {
    rt_init_ctx ctx = rt_init_ctx_make(RT_DEVICE_CPU, 1);
    rt_module *m = (rt_module *)&m;
    ST(RT_ERR_INVALID_ARG, "m", rt_instance_norm_create(&ctx, 3, 4, true, false, NULL));
    ST(RT_ERR_INVALID_ARG, "ctx", rt_instance_norm_create(NULL, 3, 4, true, false, &m));
    VAL(m == NULL);
    ST(RT_ERR_INVALID_ARG, "InstanceNorm", rt_instance_norm_create(&ctx, 3, 0, true, false, &m));
}

CHECK_FN(rt_softmax_create) { ST(RT_ERR_INVALID_ARG, "m", rt_softmax_create(NULL)); }
CHECK_FN(rt_sigmoid_create) { ST(RT_ERR_INVALID_ARG, "m", rt_sigmoid_create(NULL)); }

static rt_deconv_shape deconv_shape(void) {
    return (rt_deconv_shape){.nsp = 3, .n = 1, .c_in = 8, .c_out = 8, .groups = 1, .in = {2, 2, 2},
                             .k = {2, 2, 2}, .stride = {2, 2, 2}, .dil = {1, 1, 1}, .has_bias = 1};
}

/* The plans (kernels/plan.h): a NULL shape or plan is refused, a valid
 * shape plans without data. */
/* fn(shape, ARGS, plan) with ARGS given as PLAN_ARGSn(...) */
#define PLAN_CHECKS(fn, type, shape_expr, ARGS)                                          \
    CHECK_FN(fn) {                                                                       \
        type s = shape_expr;                                                             \
        rt_kernel_plan p;                                                                \
        ST(RT_ERR_INVALID_ARG, "shape", fn(NULL ARGS, &p));                              \
        ST(RT_ERR_INVALID_ARG, "plan", fn(&s ARGS, HIDDEN_NULL(rt_kernel_plan *)));      \
        ST(RT_OK, NULL, fn(&s ARGS, &p));                                                \
    }
#define PLAN_NOARGS
#define PLAN_ARGS1 , 1
#define PLAN_ARGS2 , 1, 1
#define PLAN_ARGS3 , 1, 1, 1
PLAN_CHECKS(rt_kernel_conv_forward_plan, rt_conv_shape, conv_shape(), PLAN_NOARGS)
PLAN_CHECKS(rt_kernel_conv_backward_data_plan, rt_conv_shape, conv_shape(), PLAN_NOARGS)
PLAN_CHECKS(rt_kernel_conv_backward_weights_plan, rt_conv_shape, conv_shape(), PLAN_ARGS1)
PLAN_CHECKS(rt_kernel_deconv_forward_plan, rt_deconv_shape, deconv_shape(), PLAN_NOARGS)
PLAN_CHECKS(rt_kernel_deconv_backward_data_plan, rt_deconv_shape, deconv_shape(), PLAN_NOARGS)
PLAN_CHECKS(rt_kernel_deconv_backward_weights_plan, rt_deconv_shape, deconv_shape(), PLAN_ARGS1)
PLAN_CHECKS(rt_kernel_maxpool_forward_plan, rt_pool_shape, pool_shape(), PLAN_ARGS1)
PLAN_CHECKS(rt_kernel_maxpool_backward_plan, rt_pool_shape, pool_shape(), PLAN_NOARGS)
PLAN_CHECKS(rt_kernel_avgpool_forward_plan, rt_pool_shape, pool_shape(), PLAN_NOARGS)
PLAN_CHECKS(rt_kernel_avgpool_backward_plan, rt_pool_shape, pool_shape(), PLAN_NOARGS)
PLAN_CHECKS(rt_kernel_batchnorm_forward_train_plan, rt_bn_shape, bn_shape(), PLAN_ARGS2)
PLAN_CHECKS(rt_kernel_batchnorm_forward_eval_plan, rt_bn_shape, bn_shape(), PLAN_ARGS2)
PLAN_CHECKS(rt_kernel_batchnorm_backward_plan, rt_bn_shape, bn_shape(), PLAN_ARGS3)
PLAN_CHECKS(rt_kernel_batchnorm_relu_forward_train_plan, rt_bn_shape, bn_shape(), PLAN_ARGS2)
PLAN_CHECKS(rt_kernel_batchnorm_relu_backward_plan, rt_bn_shape, bn_shape(), PLAN_ARGS3)
#undef PLAN_NOARGS
#undef PLAN_ARGS1
#undef PLAN_ARGS2
#undef PLAN_ARGS3
#undef PLAN_CHECKS

CHECK_FN(rt_kernel_relu_forward_plan) {
    rt_kernel_plan p;
    ST(RT_ERR_INVALID_ARG, "plan", rt_kernel_relu_forward_plan(16, 0.0f, HIDDEN_NULL(rt_kernel_plan *)));
    ST(RT_ERR_INVALID_ARG, "relu", rt_kernel_relu_forward_plan(-1, 0.0f, &p));
    ST(RT_OK, NULL, rt_kernel_relu_forward_plan(16, 0.0f, &p));
}

CHECK_FN(rt_kernel_relu_backward_plan) {
    rt_kernel_plan p;
    ST(RT_ERR_INVALID_ARG, "plan", rt_kernel_relu_backward_plan(16, 0.0f, HIDDEN_NULL(rt_kernel_plan *)));
    ST(RT_ERR_INVALID_ARG, "relu", rt_kernel_relu_backward_plan(16, -0.5f, &p));
    ST(RT_OK, NULL, rt_kernel_relu_backward_plan(16, 0.0f, &p));
}

CHECK_FN(rt_kernel_reorder_layout_plan) {
    const int64_t shape[4] = {2, rt_layout_block(), 3, 3};
    rt_kernel_plan p;
    ST(RT_ERR_INVALID_ARG, "shape", rt_kernel_reorder_layout_plan(4, NULL, RT_LAYOUT_PLAIN, RT_LAYOUT_BLOCKED, &p));
    ST(RT_ERR_INVALID_ARG, "plan",
       rt_kernel_reorder_layout_plan(4, shape, RT_LAYOUT_PLAIN, RT_LAYOUT_BLOCKED, HIDDEN_NULL(rt_kernel_plan *)));
    ST(RT_OK, NULL, rt_kernel_reorder_layout_plan(4, shape, RT_LAYOUT_PLAIN, RT_LAYOUT_BLOCKED, &p));
}

CHECK_FN(rt_deconv_shape_check) {
    rt_deconv_shape s = deconv_shape();
    int64_t out[3];
    ST(RT_ERR_INVALID_ARG, "shape", rt_deconv_shape_check(NULL, out));
    ST(RT_OK, NULL, rt_deconv_shape_check(&s, NULL));
    s.out_pad[0] = 2;
    ST(RT_ERR_INVALID_ARG, "output_padding", rt_deconv_shape_check(&s, out));
}

CHECK_FN(rt_kernel_deconv_forward) {
    rt_deconv_shape s = deconv_shape();
    ST(RT_ERR_INVALID_ARG, "shape", rt_kernel_deconv_forward(NULL, kb[0], kb[1], kb[2], kb[3]));
    ST(RT_ERR_INVALID_ARG, "x, w, y", rt_kernel_deconv_forward(&s, NULL, kb[1], kb[2], kb[3]));
    ST(RT_ERR_INVALID_ARG, "x, w, y", rt_kernel_deconv_forward(&s, kb[0], kb[1], kb[2], NULL));
}

CHECK_FN(rt_kernel_deconv_backward_data) {
    rt_deconv_shape s = deconv_shape();
    ST(RT_ERR_INVALID_ARG, "shape", rt_kernel_deconv_backward_data(NULL, kb[0], kb[1], kb[2]));
    ST(RT_ERR_INVALID_ARG, "w, dy, dx", rt_kernel_deconv_backward_data(&s, NULL, kb[1], kb[2]));
    ST(RT_ERR_INVALID_ARG, "w, dy, dx", rt_kernel_deconv_backward_data(&s, kb[0], kb[1], NULL));
}

CHECK_FN(rt_kernel_deconv_backward_weights) {
    rt_deconv_shape s = deconv_shape();
    ST(RT_ERR_INVALID_ARG, "shape", rt_kernel_deconv_backward_weights(NULL, kb[0], kb[1], kb[2], kb[3]));
    ST(RT_ERR_INVALID_ARG, "x, dy, dw", rt_kernel_deconv_backward_weights(&s, NULL, kb[1], kb[2], kb[3]));
    ST(RT_ERR_INVALID_ARG, "x, dy, dw", rt_kernel_deconv_backward_weights(&s, kb[0], kb[1], NULL, kb[3]));
}

/* The own kernels of 3-D ops: a NULL shape or buffer is a no-op. */
CHECK_FN(rt_kernel_chan_sums) {
    rt_chan_shape s = {1, 2, 2, RT_LAYOUT_PLAIN};
    double s1[2] = {7, 7};
    TOL(rt_kernel_chan_sums(NULL, kb[0], NULL, s1, NULL));
    TOL(rt_kernel_chan_sums(&s, NULL, NULL, s1, NULL));
    TOL(rt_kernel_chan_sums(&s, kb[0], NULL, NULL, NULL));
    VAL(s1[0] == 7.0 && s1[1] == 7.0);
}

CHECK_FN(rt_kernel_chan_affine) {
    rt_chan_shape s = {1, 2, 2, RT_LAYOUT_PLAIN};
    TOL(rt_kernel_chan_affine(NULL, kb[0], kb[1], NULL, NULL, kb[2], kb[3]));
    TOL(rt_kernel_chan_affine(&s, kb[0], kb[1], kb[4], NULL, kb[2], kb[3])); /* b without pb */
    TOL(rt_kernel_chan_affine(&s, kb[0], kb[1], NULL, NULL, kb[2], NULL));
}

CHECK_FN(rt_kernel_upsample_linear_forward) {
    rt_upsample_shape s = {.nsp = 3, .n = 1, .c = 1, .in = {1, 1, 1}, .out = {2, 2, 2}};
    TOL(rt_kernel_upsample_linear_forward(NULL, kb[0], kb[1]));
    TOL(rt_kernel_upsample_linear_forward(&s, NULL, kb[1]));
    TOL(rt_kernel_upsample_linear_forward(&s, kb[0], NULL));
}

CHECK_FN(rt_kernel_upsample_linear_backward) {
    rt_upsample_shape s = {.nsp = 3, .n = 1, .c = 1, .in = {1, 1, 1}, .out = {2, 2, 2}};
    TOL(rt_kernel_upsample_linear_backward(NULL, kb[0], kb[1]));
    TOL(rt_kernel_upsample_linear_backward(&s, NULL, kb[1]));
    TOL(rt_kernel_upsample_linear_backward(&s, kb[0], NULL));
}

CHECK_FN(rt_kernel_softmax_channels_forward) {
    rt_chan_shape s = {1, 2, 2, RT_LAYOUT_PLAIN};
    TOL(rt_kernel_softmax_channels_forward(NULL, kb[0], kb[1]));
    TOL(rt_kernel_softmax_channels_forward(&s, NULL, kb[1]));
    TOL(rt_kernel_softmax_channels_forward(&s, kb[0], NULL));
}

CHECK_FN(rt_kernel_softmax_channels_backward) {
    rt_chan_shape s = {1, 2, 2, RT_LAYOUT_PLAIN};
    TOL(rt_kernel_softmax_channels_backward(NULL, kb[0], kb[1], kb[2]));
    TOL(rt_kernel_softmax_channels_backward(&s, NULL, kb[1], kb[2]));
    TOL(rt_kernel_softmax_channels_backward(&s, kb[0], kb[1], NULL));
}

CHECK_FN(rt_kernel_logsumexp_channels) {
    rt_chan_shape s = {1, 2, 2, RT_LAYOUT_PLAIN};
    TOL(rt_kernel_logsumexp_channels(NULL, kb[0], kb[1]));
    TOL(rt_kernel_logsumexp_channels(&s, NULL, kb[1]));
    TOL(rt_kernel_logsumexp_channels(&s, kb[0], NULL));
}

CHECK_FN(rt_kernel_labels_first_invalid) {
    int32_t t[2] = {0, 3}, v = 7;
    VAL(rt_kernel_labels_first_invalid(2, NULL, 2, &v) == -1 && v == 7);
    VAL(rt_kernel_labels_first_invalid(-2, t, 2, &v) == -1);
    VAL(rt_kernel_labels_first_invalid(2, t, 2, NULL) == 1);
    VAL(rt_kernel_labels_first_invalid(2, t, 2, &v) == 1 && v == 3);
}

CHECK_FN(rt_kernel_cross_entropy_nd_temp_bytes) { VAL(rt_kernel_cross_entropy_nd_temp_bytes(NULL) == 0); }

CHECK_FN(rt_kernel_cross_entropy_nd_forward) {
    rt_chan_shape s = {1, 2, 2, RT_LAYOUT_PLAIN};
    int32_t t[2] = {0, 1};
    double w = 0.0;
    ST(RT_ERR_INVALID_ARG, "shape", rt_kernel_cross_entropy_nd_forward(NULL, kb[0], t, NULL, &w, kb[1]));
    ST(RT_ERR_INVALID_ARG, "x, t", rt_kernel_cross_entropy_nd_forward(&s, NULL, t, NULL, &w, kb[1]));
    ST(RT_ERR_INVALID_ARG, "x, t", rt_kernel_cross_entropy_nd_forward(&s, kb[0], NULL, NULL, &w, kb[1]));
    ST(RT_ERR_INVALID_ARG, "weight_sum", rt_kernel_cross_entropy_nd_forward(&s, kb[0], t, NULL, NULL, kb[1]));
    ST(RT_ERR_INVALID_ARG, "y)", rt_kernel_cross_entropy_nd_forward(&s, kb[0], t, NULL, &w, NULL));
}

CHECK_FN(rt_kernel_cross_entropy_nd_backward) {
    rt_chan_shape s = {1, 2, 2, RT_LAYOUT_PLAIN};
    int32_t t[2] = {0, 1};
    float g[1] = {1}, d[4] = {7, 7, 7, 7};
    TOL(rt_kernel_cross_entropy_nd_backward(NULL, kb[0], t, NULL, 1.0, g, d));
    TOL(rt_kernel_cross_entropy_nd_backward(&s, NULL, t, NULL, 1.0, g, d));
    TOL(rt_kernel_cross_entropy_nd_backward(&s, kb[0], NULL, NULL, 1.0, g, d));
    TOL(rt_kernel_cross_entropy_nd_backward(&s, kb[0], t, NULL, 1.0, NULL, d));
    TOL(rt_kernel_cross_entropy_nd_backward(&s, kb[0], t, NULL, 1.0, g, NULL));
    VAL(d[0] == 7.0f);
}

CHECK_FN(rt_kernel_soft_dice_forward) {
    rt_chan_shape s = {1, 2, 2, RT_LAYOUT_PLAIN};
    int32_t t[2] = {0, 1};
    double sums[6] = {7, 7, 7, 7, 7, 7};
    float y[1] = {7};
    TOL(rt_kernel_soft_dice_forward(NULL, kb[0], t, 1.0, 1, 1, 2.0, sums, y));
    TOL(rt_kernel_soft_dice_forward(&s, NULL, t, 1.0, 1, 1, 2.0, sums, y));
    TOL(rt_kernel_soft_dice_forward(&s, kb[0], NULL, 1.0, 1, 1, 2.0, sums, y));
    TOL(rt_kernel_soft_dice_forward(&s, kb[0], t, 1.0, 1, 1, 2.0, NULL, y));
    TOL(rt_kernel_soft_dice_forward(&s, kb[0], t, 1.0, 1, 1, 2.0, sums, NULL));
    VAL(sums[0] == 7.0 && y[0] == 7.0f);
}

CHECK_FN(rt_kernel_soft_dice_backward) {
    rt_chan_shape s = {1, 2, 2, RT_LAYOUT_PLAIN};
    int32_t t[2] = {0, 1};
    double sums[6] = {1, 1, 1, 1, 1, 1};
    float g[1] = {1}, d[4] = {7, 7, 7, 7};
    TOL(rt_kernel_soft_dice_backward(NULL, t, 1.0, 1, 1, 2.0, sums, g, d));
    TOL(rt_kernel_soft_dice_backward(&s, NULL, 1.0, 1, 1, 2.0, sums, g, d));
    TOL(rt_kernel_soft_dice_backward(&s, t, 1.0, 1, 1, 2.0, NULL, g, d));
    TOL(rt_kernel_soft_dice_backward(&s, t, 1.0, 1, 1, 2.0, sums, NULL, d));
    TOL(rt_kernel_soft_dice_backward(&s, t, 1.0, 1, 1, 2.0, sums, g, NULL));
    VAL(d[0] == 7.0f);
}

CHECK_FN(rt_kernel_group_norm_forward_temp_bytes) { VAL(rt_kernel_group_norm_forward_temp_bytes(NULL) == 0); }

CHECK_FN(rt_kernel_group_norm_backward_temp_bytes) { VAL(rt_kernel_group_norm_backward_temp_bytes(NULL) == 0); }

CHECK_FN(rt_kernel_group_norm_forward) {
    rt_chan_shape s = {1, 2, 2, RT_LAYOUT_PLAIN};
    ST(RT_ERR_INVALID_ARG, "shape", rt_kernel_group_norm_forward(NULL, 1, 1e-5f, kb[0], NULL, NULL, NULL, NULL,
                                                                  NULL, NULL, 0.1f, kb[1], kb[2]));
    ST(RT_ERR_INVALID_ARG, "x, y or stats", rt_kernel_group_norm_forward(&s, 1, 1e-5f, NULL, NULL, NULL, NULL, NULL,
                                                                          NULL, NULL, 0.1f, kb[1], kb[2]));
    ST(RT_ERR_INVALID_ARG, "x, y or stats", rt_kernel_group_norm_forward(&s, 1, 1e-5f, kb[0], NULL, NULL, NULL, NULL,
                                                                          NULL, NULL, 0.1f, NULL, kb[2]));
    ST(RT_ERR_INVALID_ARG, "x, y or stats", rt_kernel_group_norm_forward(&s, 1, 1e-5f, kb[0], NULL, NULL, NULL, NULL,
                                                                          NULL, NULL, 0.1f, kb[1], NULL));
    ST(RT_ERR_INVALID_ARG, "groups", rt_kernel_group_norm_forward(&s, 0, 1e-5f, kb[0], NULL, NULL, NULL, NULL, NULL,
                                                                   NULL, 0.1f, kb[1], kb[2]));
}

CHECK_FN(rt_kernel_group_norm_backward) {
    rt_chan_shape s = {1, 2, 2, RT_LAYOUT_PLAIN};
    ST(RT_ERR_INVALID_ARG, "shape", rt_kernel_group_norm_backward(NULL, 1, 1, kb[0], kb[1], NULL, kb[2], kb[3],
                                                                   NULL, NULL));
    ST(RT_ERR_INVALID_ARG, "x, dy or stats", rt_kernel_group_norm_backward(&s, 1, 1, NULL, kb[1], NULL, kb[2], kb[3],
                                                                            NULL, NULL));
    ST(RT_ERR_INVALID_ARG, "x, dy or stats", rt_kernel_group_norm_backward(&s, 1, 1, kb[0], NULL, NULL, kb[2], kb[3],
                                                                            NULL, NULL));
    ST(RT_ERR_INVALID_ARG, "x, dy or stats", rt_kernel_group_norm_backward(&s, 1, 1, kb[0], kb[1], NULL, NULL, kb[3],
                                                                            NULL, NULL));
}

CHECK_FN(rt_kernel_upsample_bicubic_forward) {
    rt_upsample_shape s = {.nsp = 2, .n = 1, .c = 1, .in = {1, 1}, .out = {2, 2}};
    TOL(rt_kernel_upsample_bicubic_forward(NULL, kb[0], kb[1]));
    TOL(rt_kernel_upsample_bicubic_forward(&s, NULL, kb[1]));
    TOL(rt_kernel_upsample_bicubic_forward(&s, kb[0], NULL));
}

CHECK_FN(rt_kernel_upsample_bicubic_backward) {
    rt_upsample_shape s = {.nsp = 2, .n = 1, .c = 1, .in = {1, 1}, .out = {2, 2}};
    TOL(rt_kernel_upsample_bicubic_backward(NULL, kb[0], kb[1]));
    TOL(rt_kernel_upsample_bicubic_backward(&s, NULL, kb[1]));
    TOL(rt_kernel_upsample_bicubic_backward(&s, kb[0], NULL));
}

CHECK_FN(rt_kernel_pixel_shuffle) {
    TOL(rt_kernel_pixel_shuffle(1, 1, 2, 2, 2, 1, 0, NULL, kb[1]));
    TOL(rt_kernel_pixel_shuffle(1, 1, 2, 2, 2, 1, 1, kb[0], NULL));
    TOL(rt_kernel_pixel_shuffle(1, 1, 2, 2, 0, 1, 0, kb[0], kb[1]));
    TOL(rt_kernel_pixel_shuffle(1, 3, 2, 2, 2, 2, 0, kb[0], kb[1])); /* block not dividing c */
}

static const api_entry ops3d_entries[] = {
    /* ops/ops3d.h */
    E(rt_conv_transpose), E(rt_upsample_linear), E(rt_group_norm), E(rt_instance_norm), E(rt_softmax_channels),
    E(rt_cross_entropy_nd), E(rt_soft_dice_loss),
    /* ops/ops3d.h, train/seg_loss.h: segmentation loss, pad/crop */
    E(rt_dice_ce_loss), E(rt_loss_dice_ce), E(rt_pad_constant),
    /* super-resolution (issue 16): ops/ops3d.h, ops/ops.h, nn/modules3d.h, kernels */
    E(rt_upsample_bicubic), E(rt_pixel_shuffle), E(rt_pixel_unshuffle), E(rt_pixel_shuffle_create),
    E(rt_pixel_shuffle_inplace), E(rt_pixel_shuffle_inplace_create),
    E(rt_kernel_upsample_bicubic_forward), E(rt_kernel_upsample_bicubic_backward), E(rt_kernel_pixel_shuffle),
    /* nn/modules3d.h */
    E(rt_conv_transpose_create), E(rt_conv_set_dilation), E(rt_conv_set_preferred_output),
    E(rt_conv_follow_blocked), E(rt_upsample_create), E(rt_group_norm_create),
    E(rt_instance_norm_create), E(rt_softmax_create), E(rt_sigmoid_create),
    /* kernels/deconv.h, chanwise.h, upsample.h, softmax.h */
    E(rt_deconv_shape_check), E(rt_kernel_deconv_forward), E(rt_kernel_deconv_backward_data),
    E(rt_kernel_deconv_backward_weights),
    /* the plans: kernels/conv.h, deconv.h, pool.h, norm.h, eltwise.h, plan.h */
    E(rt_kernel_conv_forward_plan), E(rt_kernel_conv_backward_data_plan), E(rt_kernel_conv_backward_weights_plan),
    E(rt_kernel_deconv_forward_plan), E(rt_kernel_deconv_backward_data_plan),
    E(rt_kernel_deconv_backward_weights_plan), E(rt_kernel_maxpool_forward_plan), E(rt_kernel_maxpool_backward_plan),
    E(rt_kernel_avgpool_forward_plan), E(rt_kernel_avgpool_backward_plan), E(rt_kernel_batchnorm_forward_train_plan),
    E(rt_kernel_batchnorm_forward_eval_plan), E(rt_kernel_batchnorm_backward_plan),
    E(rt_kernel_batchnorm_relu_forward_train_plan), E(rt_kernel_batchnorm_relu_backward_plan),
    E(rt_kernel_relu_forward_plan), E(rt_kernel_relu_backward_plan), E(rt_kernel_reorder_layout_plan), E(rt_kernel_chan_sums), E(rt_kernel_chan_affine),
    E(rt_kernel_upsample_linear_forward), E(rt_kernel_upsample_linear_backward),
    E(rt_kernel_softmax_channels_forward), E(rt_kernel_softmax_channels_backward), E(rt_kernel_logsumexp_channels),
    /* kernels/seg_loss.h, group_norm.h */
    E(rt_kernel_labels_first_invalid), E(rt_kernel_cross_entropy_nd_temp_bytes), E(rt_kernel_cross_entropy_nd_forward),
    E(rt_kernel_cross_entropy_nd_backward), E(rt_kernel_soft_dice_forward), E(rt_kernel_soft_dice_backward),
    E(rt_kernel_group_norm_forward_temp_bytes), E(rt_kernel_group_norm_backward_temp_bytes),
    E(rt_kernel_group_norm_forward), E(rt_kernel_group_norm_backward),
};

/* ------------------------------------------------------------ segmentation pipeline (data/patches.h,
 * train/seg_loss.h, train/sliding_window.h) */

/* A (1, 2, 3, 4) f32 image and its (2, 3, 4) int32 labels (zeros). */
static rt_tensor *seg_image(void) { return T(1, 2, 3, 4); }
static rt_tensor *seg_labels(void) {
    return own(rt_tensor_zeros(3, SHAPE(2, 3, 4), RT_I32, RT_DEVICE_CPU, RT_MEM_DATA));
}
static rt_patch_options seg_opts(void) {
    return (rt_patch_options){.patch = {2, 2, 2}, .region_lo = {0, 0, 0}, .region_hi = {2, 3, 4},
                              .foreground_fraction = 0.33f};
}

CHECK_FN(rt_volume_zscore) {
    ST(RT_ERR_INVALID_ARG, "image", rt_volume_zscore(NULL, false, NULL, NULL));
    ST(RT_ERR_SHAPE, "[C, D, H, W]", rt_volume_zscore(T(2, 3, 4), false, NULL, NULL));
    ST(RT_ERR_INVALID_ARG, "mask", rt_volume_zscore(own(rt_tensor_zeros(4, SHAPE(1, 2, 2, 2), RT_F32,
                                                                         RT_DEVICE_CPU, RT_MEM_DATA)),
                                                    true, NULL, NULL));
}

CHECK_FN(rt_volume_crop) {
    const int64_t lo[3] = {0, 0, 0}, hi[3] = {1, 1, 1}, bad[3] = {0, 0, 0};
    rt_tensor *y = NULL;
    ST(RT_ERR_INVALID_ARG, "out", rt_volume_crop(seg_image(), lo, hi, NULL));
    ST(RT_ERR_INVALID_ARG, "NULL", rt_volume_crop(NULL, lo, hi, &y));
    ST(RT_ERR_INVALID_ARG, "lo", rt_volume_crop(seg_image(), HIDDEN_NULL(const int64_t *), hi, &y));
    ST(RT_ERR_INVALID_ARG, "empty", rt_volume_crop(seg_image(), lo, bad, &y));
    ST(RT_ERR_SHAPE, "rank", rt_volume_crop(T(2, 3), lo, hi, &y));
}

CHECK_FN(rt_volume_flip) {
    ST(RT_ERR_INVALID_ARG, "NULL", rt_volume_flip(NULL, 0));
    ST(RT_ERR_INVALID_ARG, "axis", rt_volume_flip(seg_image(), 3));
    ST(RT_ERR_SHAPE, "rank", rt_volume_flip(T(2, 3), 0));
}

CHECK_FN(rt_volume_intensity_augment) {
    rt_generator g = {.seed = 1};
    ST(RT_ERR_INVALID_ARG, "NULL", rt_volume_intensity_augment(NULL, &g));
    ST(RT_ERR_INVALID_ARG, "generator", rt_volume_intensity_augment(seg_image(), NULL));
}

CHECK_FN(rt_patch_sampler_create) {
    rt_patch_options o = seg_opts();
    rt_patch_sampler *s = (rt_patch_sampler *)&o;
    ST(RT_ERR_INVALID_ARG, "out", rt_patch_sampler_create(seg_image(), seg_labels(), &o, NULL));
    ST(RT_ERR_INVALID_ARG, "image", rt_patch_sampler_create(NULL, seg_labels(), &o, &s));
    VAL(s == NULL);
    ST(RT_ERR_INVALID_ARG, "labels", rt_patch_sampler_create(seg_image(), NULL, &o, &s));
    ST(RT_ERR_INVALID_ARG, "options", rt_patch_sampler_create(seg_image(), seg_labels(), NULL, &s));
    o.patch[1] = 0;
    ST(RT_ERR_INVALID_ARG, "patch", rt_patch_sampler_create(seg_image(), seg_labels(), &o, &s));
    o = seg_opts();
    o.region_hi[2] = 5;
    ST(RT_ERR_INVALID_ARG, "region", rt_patch_sampler_create(seg_image(), seg_labels(), &o, &s));
    o = seg_opts();
    o.foreground_fraction = 2.0f;
    ST(RT_ERR_INVALID_ARG, "foreground_fraction", rt_patch_sampler_create(seg_image(), seg_labels(), &o, &s));
    o = seg_opts();
    ST(RT_ERR_SHAPE, "differ", rt_patch_sampler_create(T(1, 2, 3, 5), seg_labels(), &o, &s));
}

CHECK_FN(rt_patch_sampler_destroy) { TOL(rt_patch_sampler_destroy(NULL)); }

CHECK_FN(rt_patch_sampler_foreground_voxels) { VAL(rt_patch_sampler_foreground_voxels(NULL) == 0); }

CHECK_FN(rt_patch_sampler_next) {
    rt_patch_options o = seg_opts();
    rt_patch_sampler *s = NULL;
    if (rt_patch_sampler_create(seg_image(), seg_labels(), &o, &s) != RT_OK) abort();
    rt_tensor *x = NULL, *y = NULL;
    ST(RT_ERR_INVALID_ARG, "sampler", rt_patch_sampler_next(NULL, 1, &x, &y, NULL));
    ST(RT_ERR_INVALID_ARG, "x", rt_patch_sampler_next(s, 1, NULL, &y, NULL));
    ST(RT_ERR_INVALID_ARG, "y", rt_patch_sampler_next(s, 1, &x, NULL, NULL));
    ST(RT_ERR_INVALID_ARG, "batch", rt_patch_sampler_next(s, 0, &x, &y, NULL));
    rt_patch_sampler_destroy(s);
}

CHECK_FN(rt_dice_per_class) {
    rt_tensor *t = labels3d();
    double d[2];
    ST(RT_ERR_INVALID_ARG, "pred", rt_dice_per_class(NULL, t, 2, d));
    ST(RT_ERR_INVALID_ARG, "target", rt_dice_per_class(t, NULL, 2, d));
    ST(RT_ERR_INVALID_ARG, "dice", rt_dice_per_class(t, t, 2, HIDDEN_NULL(double *)));
    ST(RT_ERR_INVALID_ARG, "num_classes", rt_dice_per_class(t, t, 0, d));
    ST(RT_ERR_DTYPE, "int32", rt_dice_per_class(T(1, 2, 2, 2), t, 2, d));
    ST(RT_ERR_SHAPE, "shape", rt_dice_per_class(t, seg_labels(), 2, d));
}

CHECK_FN(rt_dice_threshold_sweep) {
    rt_tensor *t = labels3d(), *p = T(1, 2, 2, 2);
    const float th[1] = {0.5f};
    double d[1];
    int best;
    ST(RT_ERR_INVALID_ARG, "prob", rt_dice_threshold_sweep(NULL, t, 1, th, d, &best));
    ST(RT_ERR_INVALID_ARG, "target", rt_dice_threshold_sweep(p, NULL, 1, th, d, &best));
    ST(RT_ERR_INVALID_ARG, "thresholds", rt_dice_threshold_sweep(p, t, 1, HIDDEN_NULL(const float *), d, &best));
    ST(RT_ERR_INVALID_ARG, "dice", rt_dice_threshold_sweep(p, t, 1, th, HIDDEN_NULL(double *), &best));
    ST(RT_ERR_INVALID_ARG, "best", rt_dice_threshold_sweep(p, t, 1, th, d, HIDDEN_NULL(int *)));
    ST(RT_ERR_INVALID_ARG, "thresholds", rt_dice_threshold_sweep(p, t, 0, th, d, &best));
    ST(RT_ERR_DTYPE, "float32", rt_dice_threshold_sweep(t, t, 1, th, d, &best));
    ST(RT_ERR_SHAPE, "shape", rt_dice_threshold_sweep(T(2, 2, 2), t, 1, th, d, &best));
}

CHECK_FN(rt_sliding_window_defaults) { VAL(rt_sliding_window_defaults().overlap == 0.5f); }

CHECK_FN(rt_sliding_window_starts) {
    int64_t st[4], n;
    ST(RT_ERR_INVALID_ARG, "starts", rt_sliding_window_starts(8, 4, 0.5f, NULL, 4, &n));
    ST(RT_ERR_INVALID_ARG, "n", rt_sliding_window_starts(8, 4, 0.5f, st, 4, NULL));
    ST(RT_ERR_INVALID_ARG, "overlap", rt_sliding_window_starts(8, 4, 1.5f, st, 4, &n));
    ST(RT_ERR_INVALID_ARG, "size", rt_sliding_window_starts(0, 4, 0.5f, st, 4, &n));
    ST(RT_ERR_INVALID_ARG, "windows", rt_sliding_window_starts(100, 4, 0.5f, st, 4, &n));
}

CHECK_FN(rt_gaussian_importance_map) {
    const int64_t p[3] = {2, 2, 2}, bad[3] = {2, 0, 2};
    rt_tensor *m = NULL;
    ST(RT_ERR_INVALID_ARG, "out", rt_gaussian_importance_map(p, 0.125f, NULL));
    ST(RT_ERR_INVALID_ARG, "patch", rt_gaussian_importance_map(HIDDEN_NULL(const int64_t *), 0.125f, &m));
    ST(RT_ERR_INVALID_ARG, "patch sizes", rt_gaussian_importance_map(bad, 0.125f, &m));
    ST(RT_ERR_INVALID_ARG, "sigma_scale", rt_gaussian_importance_map(p, 0.0f, &m));
}

CHECK_FN(rt_sliding_window_predict) {
    rt_module *net = linear_module(RT_DEVICE_CPU);
    rt_sliding_window_options o = rt_sliding_window_defaults();
    o.patch[0] = o.patch[1] = o.patch[2] = 2;
    rt_tensor *p = NULL, *l = NULL;
    ST(RT_ERR_INVALID_ARG, "net", rt_sliding_window_predict(NULL, seg_image(), 2, &o, &p, &l));
    ST(RT_ERR_INVALID_ARG, "image", rt_sliding_window_predict(net, NULL, 2, &o, &p, &l));
    ST(RT_ERR_INVALID_ARG, "options", rt_sliding_window_predict(net, seg_image(), 2, NULL, &p, &l));
    ST(RT_ERR_INVALID_ARG, "both NULL", rt_sliding_window_predict(net, seg_image(), 2, &o, NULL, NULL));
    ST(RT_ERR_SHAPE, "[C, D, H, W]", rt_sliding_window_predict(net, T(2, 3, 4), 2, &o, &p, &l));
    ST(RT_ERR_INVALID_ARG, "num_classes", rt_sliding_window_predict(net, seg_image(), 0, &o, &p, &l));
    /* a network whose output is not [batch, classes, window]: Linear refuses 5-D input or the shape check does */
    rt_status st = rt_sliding_window_predict(net, seg_image(), 2, &o, &p, &l);
    VAL(st != RT_OK && p == NULL && l == NULL);
    rt_module_destroy(net);
}

/* ------------------------------------------------------------ super-resolution (data/superres.h,
 * train/sr_metric.h) */

static rt_tensor *sr_volume(void) { return T(1, 4, 6, 6); }
static rt_sr_patch_options sr_opts(void) {
    return (rt_sr_patch_options){.scale = 2, .patch = 2, .slice_lo = 0, .slice_hi = 2, .threshold = 0.0f};
}

CHECK_FN(rt_sr_normalize) {
    double q;
    ST(RT_ERR_INVALID_ARG, "volume", rt_sr_normalize(NULL, 99.9, &q));
    ST(RT_ERR_INVALID_ARG, "percentile", rt_sr_normalize(sr_volume(), 0.0, &q));
    ST(RT_ERR_SHAPE, "volume", rt_sr_normalize(T(4, 6, 6), 99.9, &q));
    ST(RT_ERR_INVALID_ARG, "positive",
       rt_sr_normalize(own(rt_tensor_zeros(4, SHAPE(1, 2, 2, 2), RT_F32, RT_DEVICE_CPU, RT_MEM_DATA)), 99.9, NULL));
}

CHECK_FN(rt_sr_split_slices) {
    rt_sr_split sp;
    ST(RT_ERR_INVALID_ARG, "out", rt_sr_split_slices(10, 0.3, 1, NULL));
    ST(RT_ERR_INVALID_ARG, "slices", rt_sr_split_slices(2, 0.3, 0, &sp));
    ST(RT_ERR_INVALID_ARG, "holdout", rt_sr_split_slices(10, 1.5, 0, &sp));
    ST(RT_ERR_INVALID_ARG, "gap", rt_sr_split_slices(10, 0.3, -1, &sp));
}

CHECK_FN(rt_sr_downsample) {
    rt_tensor *lr = NULL;
    ST(RT_ERR_INVALID_ARG, "lr", rt_sr_downsample(T(1, 1, 4, 4), 2, NULL));
    ST(RT_ERR_INVALID_ARG, "hr", rt_sr_downsample(NULL, 2, &lr));
    ST(RT_ERR_INVALID_ARG, "scale", rt_sr_downsample(T(1, 1, 4, 4), 0, &lr));
    ST(RT_ERR_SHAPE, "multiple", rt_sr_downsample(T(1, 1, 5, 4), 2, &lr));
    ST(RT_ERR_SHAPE, "dims", rt_sr_downsample(T(4, 4), 2, &lr));
}

CHECK_FN(rt_sr_slice) {
    rt_tensor *hr = NULL;
    ST(RT_ERR_INVALID_ARG, "hr", rt_sr_slice(sr_volume(), 0, 2, NULL));
    ST(RT_ERR_INVALID_ARG, "volume", rt_sr_slice(NULL, 0, 2, &hr));
    ST(RT_ERR_INVALID_ARG, "slice", rt_sr_slice(sr_volume(), 4, 2, &hr));
    ST(RT_ERR_INVALID_ARG, "scale", rt_sr_slice(sr_volume(), 0, 7, &hr));
}

CHECK_FN(rt_sr_slice_foreground) {
    VAL(isnan(rt_sr_slice_foreground(NULL, 0, 0.0f)));
    VAL(isnan(rt_sr_slice_foreground(sr_volume(), -1, 0.0f)));
    VAL(rt_sr_slice_foreground(sr_volume(), 0, 10.0f) == 0.0);
}

CHECK_FN(rt_sr_eval_slices) {
    rt_sr_split sp = {0, 1, 2, 4};
    int64_t ks[2], n;
    ST(RT_ERR_INVALID_ARG, "split", rt_sr_eval_slices(sr_volume(), NULL, 2, 0.0f, 0.1, ks, &n));
    ST(RT_ERR_INVALID_ARG, "ks", rt_sr_eval_slices(sr_volume(), &sp, 2, 0.0f, 0.1, HIDDEN_NULL(int64_t *), &n));
    ST(RT_ERR_INVALID_ARG, "n", rt_sr_eval_slices(sr_volume(), &sp, 2, 0.0f, 0.1, ks, NULL));
    ST(RT_ERR_INVALID_ARG, "volume", rt_sr_eval_slices(NULL, &sp, 2, 0.0f, 0.1, ks, &n));
    ST(RT_ERR_INVALID_ARG, "count", rt_sr_eval_slices(sr_volume(), &sp, 0, 0.0f, 0.1, ks, &n));
}

CHECK_FN(rt_sr_sampler_create) {
    rt_sr_patch_options o = sr_opts();
    rt_sr_sampler *s = NULL;
    ST(RT_ERR_INVALID_ARG, "out", rt_sr_sampler_create(sr_volume(), &o, NULL));
    ST(RT_ERR_INVALID_ARG, "options", rt_sr_sampler_create(sr_volume(), NULL, &s));
    ST(RT_ERR_INVALID_ARG, "volume", rt_sr_sampler_create(NULL, &o, &s));
    o.patch = 0;
    ST(RT_ERR_INVALID_ARG, "patch", rt_sr_sampler_create(sr_volume(), &o, &s));
    o = sr_opts(), o.slice_hi = 9;
    ST(RT_ERR_INVALID_ARG, "slices", rt_sr_sampler_create(sr_volume(), &o, &s));
}

CHECK_FN(rt_sr_sampler_destroy) { TOL(rt_sr_sampler_destroy(NULL)); }

CHECK_FN(rt_sr_sampler_next) {
    rt_sr_patch_options o = sr_opts();
    rt_sr_sampler *s = NULL;
    if (rt_sr_sampler_create(sr_volume(), &o, &s) != RT_OK) abort();
    rt_tensor *lr = NULL, *hr = NULL;
    ST(RT_ERR_INVALID_ARG, "lr", rt_sr_sampler_next(NULL, 1, &lr, &hr, NULL));
    ST(RT_ERR_INVALID_ARG, "lr", rt_sr_sampler_next(s, 1, NULL, &hr, NULL));
    ST(RT_ERR_INVALID_ARG, "hr", rt_sr_sampler_next(s, 1, &lr, NULL, NULL));
    ST(RT_ERR_INVALID_ARG, "batch", rt_sr_sampler_next(s, 0, &lr, &hr, NULL));
    rt_sr_sampler_destroy(s);
}

CHECK_FN(rt_psnr) {
    double v;
    rt_tensor *a = T(1, 1, 4, 4);
    ST(RT_ERR_INVALID_ARG, "NULL", rt_psnr(NULL, a, 0, 1.0, &v));
    ST(RT_ERR_INVALID_ARG, "NULL", rt_psnr(a, NULL, 0, 1.0, &v));
    ST(RT_ERR_INVALID_ARG, "NULL", rt_psnr(a, a, 0, 1.0, NULL));
    ST(RT_ERR_INVALID_ARG, "border", rt_psnr(a, a, -1, 1.0, &v));
    ST(RT_ERR_INVALID_ARG, "data_range", rt_psnr(a, a, 0, 0.0, &v));
    ST(RT_ERR_INVALID_ARG, "border", rt_psnr(a, a, 2, 1.0, &v));
    ST(RT_ERR_SHAPE, "shape", rt_psnr(a, T(1, 1, 4, 5), 0, 1.0, &v));
}

CHECK_FN(rt_ssim) {
    double v;
    rt_tensor *a = T(1, 1, 12, 12);
    ST(RT_ERR_INVALID_ARG, "NULL", rt_ssim(NULL, a, 0, 1.0, &v));
    ST(RT_ERR_INVALID_ARG, "NULL", rt_ssim(a, NULL, 0, 1.0, &v));
    ST(RT_ERR_INVALID_ARG, "NULL", rt_ssim(a, a, 0, 1.0, NULL));
    ST(RT_ERR_INVALID_ARG, "11x11", rt_ssim(a, a, 1, 1.0, &v));
    ST(RT_ERR_SHAPE, "shape", rt_ssim(a, T(1, 1, 12, 13), 0, 1.0, &v));
}

static const api_entry segment_entries[] = {
    /* data/patches.h */
    E(rt_volume_zscore), E(rt_volume_crop), E(rt_volume_flip), E(rt_volume_intensity_augment),
    E(rt_patch_sampler_create), E(rt_patch_sampler_destroy), E(rt_patch_sampler_foreground_voxels),
    E(rt_patch_sampler_next),
    /* train/seg_metric.h, sliding_window.h (train/seg_loss.h's entry is with the U-Nets') */
    E(rt_dice_per_class), E(rt_dice_threshold_sweep), E(rt_sliding_window_defaults),
    E(rt_sliding_window_starts), E(rt_gaussian_importance_map), E(rt_sliding_window_predict),
    /* data/superres.h, train/sr_metric.h */
    E(rt_sr_normalize), E(rt_sr_split_slices), E(rt_sr_downsample), E(rt_sr_slice), E(rt_sr_slice_foreground),
    E(rt_sr_eval_slices), E(rt_sr_sampler_create), E(rt_sr_sampler_destroy), E(rt_sr_sampler_next),
    E(rt_psnr), E(rt_ssim),
};

#define N_OF(a) ((int)(sizeof(a) / sizeof((a)[0])))

static const struct {
    const char *group;
    const api_entry *entries;
    int n;
} tables[] = {
    {"core", core_entries, N_OF(core_entries)},
    {"autograd", autograd_entries, N_OF(autograd_entries)},
    {"ops", ops_entries, N_OF(ops_entries)},
    {"nn", nn_entries, N_OF(nn_entries)},
    {"optim_train", optim_train_entries, N_OF(optim_train_entries)},
    {"data_io", data_io_entries, N_OF(data_io_entries)},
    {"precision", precision_entries, N_OF(precision_entries)},
    {"models", models_entries, N_OF(models_entries)},
    {"kernels", kernels_entries, N_OF(kernels_entries)},
    {"ops3d", ops3d_entries, N_OF(ops3d_entries)},
    {"segment", segment_entries, N_OF(segment_entries)},
};

/* Runs every check of one table; each entry point must check at least one
 * call, and leave no tensor, error state or grad mode behind. */
static void run_table(const char *group) {
    for (int t = 0; t < N_OF(tables); t++) {
        if (strcmp(tables[t].group, group) != 0) continue;
        int calls = g_calls;
        for (int i = 0; i < tables[t].n; i++) {
            g_fn = tables[t].entries[i].name;
            int before = g_calls;
            tables[t].entries[i].check();
            release_owned();
            if (g_calls == before) report(__LINE__, g_fn, "checked no call");
            if (!rt_grad_is_enabled() || rt_recompute_is_active() || rt_saved_tensors_hooks_depth() != 0)
                report(__LINE__, g_fn, "left grad mode, recompute mode or saved-tensor hooks changed");
            g_entries++;
        }
        printf("  %-12s %3d entry points, %4d calls checked\n", group, tables[t].n, g_calls - calls);
    }
}

static void test_core(void) { run_table("core"); }
static void test_autograd(void) { run_table("autograd"); }
static void test_ops(void) { run_table("ops"); }
static void test_nn(void) { run_table("nn"); }
static void test_optim_train(void) { run_table("optim_train"); }
static void test_data_io(void) { run_table("data_io"); }
static void test_models(void) { run_table("models"); }
static void test_kernels(void) { run_table("kernels"); }
static void test_ops3d(void) { run_table("ops3d"); }
static void test_segment(void) { run_table("segment"); }
static void test_precision(void) { run_table("precision"); }

/* ------------------------------------------------------------ coverage */

/* Headers not in scope: reversible_impl.h, dnnl_common.h, op_util.h, tables.h,
 * dist_impl.h and unet_impl.h are internal helpers of memory/, kernels/,
 * ops/, dist/, models/ and backend/. */
static int header_excluded(const char *dir, const char *file) {
    if (!strcmp(dir, "memory") && !strcmp(file, "reversible_impl.h")) return 1; /* internal to memory/ */
    if (!strcmp(dir, "kernels") && !strcmp(file, "dnnl_common.h")) return 1;
    if (!strcmp(dir, "kernels") && !strcmp(file, "conv_pointwise.h")) return 1; /* internal to kernels/conv.c */
    if (!strcmp(dir, "ops") && !strcmp(file, "op_util.h")) return 1;
    if (!strcmp(dir, "backend") && !strcmp(file, "tables.h")) return 1; /* internal to backend/ */
    if (!strcmp(dir, "dist") && !strcmp(file, "dist_impl.h")) return 1; /* internal to dist/ */
    if (!strcmp(dir, "models") && !strcmp(file, "unet_impl.h")) return 1; /* internal to models/unet*.c */
    return 0;
}

static const api_entry *find_entry(const char *name) {
    for (int t = 0; t < N_OF(tables); t++)
        for (int i = 0; i < tables[t].n; i++)
            if (!strcmp(tables[t].entries[i].name, name)) return &tables[t].entries[i];
    return NULL;
}

/* The function a header line declares or defines at file scope, or "": a
 * line starting with a type (not indented, not a comment, typedef or
 * preprocessor line) whose first identifier followed by '(' starts "rt_". */
static void declared_name(const char *line, char *name, size_t n) {
    name[0] = '\0';
    if (!((line[0] >= 'a' && line[0] <= 'z') || (line[0] >= 'A' && line[0] <= 'Z')) || !strncmp(line, "typedef", 7))
        return;
    for (const char *p = line; *p; p++) {
        if (*p != '(') continue;
        const char *end = p;
        while (end > line && end[-1] == ' ') end--;
        const char *start = end;
        while (start > line && (start[-1] == '_' || (start[-1] >= 'a' && start[-1] <= 'z') ||
                                (start[-1] >= '0' && start[-1] <= '9')))
            start--;
        size_t len = (size_t)(end - start);
        if (len > 3 && len < n && !strncmp(start, "rt_", 3)) {
            memcpy(name, start, len);
            name[len] = '\0';
        }
        return;
    }
}

static void test_coverage(void) {
    static const char *dirs[] = {"core", "autograd", "ops", "nn", "optim", "train",
                                 "data", "io", "models", "memory", "kernels", "dist", "backend"};
    enum { SEEN_MAX = 2048 };
    int found = 0, headers = 0, missing = 0, table_size = 0;
    static char seen[SEEN_MAX][64];
    for (size_t d = 0; d < sizeof dirs / sizeof dirs[0]; d++) {
        char path[512];
        snprintf(path, sizeof path, "%s/src/%s", RT_SOURCE_DIR, dirs[d]);
        DIR *dir = opendir(path);
        CHECK(dir != NULL);
        struct dirent *ent;
        while ((ent = readdir(dir))) {
            size_t len = strlen(ent->d_name);
            if (len < 3 || strcmp(ent->d_name + len - 2, ".h") || header_excluded(dirs[d], ent->d_name)) continue;
            char file[1024];
            snprintf(file, sizeof file, "%s/%s", path, ent->d_name);
            FILE *f = fopen(file, "r");
            if (!f) continue;
            headers++;
            char line[1024], name[64];
            while (fgets(line, sizeof line, f)) {
                declared_name(line, name, sizeof name);
                if (!name[0]) continue;
                if (found < SEEN_MAX) snprintf(seen[found], sizeof seen[found], "%s", name);
                found++;
                if (!find_entry(name)) {
                    fprintf(stderr, "coverage: %s/%s declares %s, which has no entry in test_api_null.c\n",
                            dirs[d], ent->d_name, name);
                    missing++;
                }
            }
            fclose(f);
        }
        closedir(dir);
    }
    /* and every entry names a function some header in scope declares */
    for (int t = 0; t < N_OF(tables); t++)
        for (int i = 0; i < tables[t].n; i++, table_size++) {
            int ok = 0;
            for (int k = 0; k < found && k < SEEN_MAX && !ok; k++) ok = !strcmp(seen[k], tables[t].entries[i].name);
            if (!ok) {
                fprintf(stderr, "coverage: entry %s is not declared in a header in scope\n",
                        tables[t].entries[i].name);
                missing++;
            }
        }
    printf("  %d public functions declared in %d headers in scope, %d entry points in the tables\n", found,
           headers, table_size);
    CHECK(found <= SEEN_MAX); /* else names past SEEN_MAX were not compared: raise it */
    CHECK_EQ_INT(missing, 0);
    CHECK_EQ_INT(found, table_size);
}

/* Last: the totals of the tests run before it, and the files the io checks wrote. */
static void test_summary(void) {
    printf("  checked %d entry points with %d calls\n", g_entries, g_calls);
    if (g_dir[0]) {
        const char *names[] = {"small.safetensors", "w.safetensors"};
        for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) unlink(tmp_path(names[i]));
        rmdir(g_dir);
    }
}

RT_TEST_MAIN({"core", test_core}, {"autograd", test_autograd}, {"ops", test_ops}, {"nn", test_nn},
             {"optim_train", test_optim_train}, {"data_io", test_data_io}, {"models", test_models},
             {"precision", test_precision}, {"kernels", test_kernels}, {"ops3d", test_ops3d},
             {"segment", test_segment}, {"coverage", test_coverage}, {"summary", test_summary})
