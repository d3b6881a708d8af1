/* revtorch side of bench/ops3d.sh: times the 3-D operators of a U-Net stage.
 *
 *   build/bench_ops3d CASE N C SIZE [STEPS WARMUP THREADS LAYOUT]
 *
 * CASE (all float32, 3x3x3 kernels with padding 1 and bias, C -> C channels,
 * input N x C x SIZE^3):
 *   conv3d     Conv3d: forward, backward-data, backward-weights (+ bias), each
 *              timed alone (the oneDNN kernels, kernels/conv.h)
 *   convt3d    ConvTranspose3d(C, C, 2, stride 2) from SIZE/2 to SIZE: the
 *              same three passes (kernels/deconv.h)
 *   block_in   conv -> InstanceNorm3d(affine) -> LeakyReLU(0.01) through the
 *   block_gn   autograd ops, or with GroupNorm(C/4 groups, affine): forward
 *              (grad mode on, saving what backward needs) and backward
 *              (rt_backward: dx and every parameter gradient)
 * LAYOUT: plain (NCDHW, PyTorch's; default) or blocked (nCdhw16c, what
 * revtorch's models keep between layers).
 * WARMUP untimed repetitions, then STEPS timed ones; prints one line
 *   revtorch case=.. n=.. c=.. size=.. layout=.. threads=.. <pass>_ms=<median> ...
 * (median over the timed steps) for bench/ops3d_compare.py. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "autograd/engine.h"
#include "autograd/node.h"
#include "core/layout.h"
#include "core/rng.h"
#include "core/tensor.h"
#include "kernels/cache.h"
#include "kernels/conv.h"
#include "kernels/deconv.h"
#include "kernels/threads.h"
#include "ops/ops3d.h"

#define MAX_STEPS 64

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return 1e3 * (double)t.tv_sec + 1e-6 * (double)t.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static rt_tensor *randn(int ndim, const int64_t *shape, float std, uint64_t seed) {
    rt_tensor *t = rt_tensor_create(ndim, shape, RT_F32, RT_DEVICE_CPU, RT_MEM_DATA);
    rt_generator g = {seed, 0};
    if (t) rt_generator_normal(&g, rt_tensor_numel(t), 0.0f, std, rt_tensor_f32(t));
    return t;
}

static int fail(const char *what) {
    fprintf(stderr, "bench_ops3d: %s: %s\n", what, rt_error_last());
    return 1;
}

/* The three kernel passes of a convolution (deconv: transposed). */
static int time_conv_passes(bool deconv, int64_t n, int64_t c, int64_t size, rt_layout lay, int steps, int warmup,
                            double ms[3][MAX_STEPS]) {
    int64_t in = deconv ? size / 2 : size;
    rt_conv_shape cs = {3, n, c, c, 1, {in, in, in}, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, 1, lay, lay, 0, RT_LAYOUT_PLAIN, 0, 0, 0, 0};
    rt_deconv_shape ds = {3, n, c, c, 1, {in, in, in}, {2, 2, 2}, {2, 2, 2}, {0, 0, 0}, {0, 0, 0}, {1, 1, 1}, 1, lay, lay};
    int64_t xs[5] = {n, c, in, in, in}, ys[5] = {n, c, size, size, size}, ws[5] = {c, c, 3, 3, 3}, bs[1] = {c};
    if (deconv) ws[2] = ws[3] = ws[4] = 2;
    rt_tensor *x = randn(5, xs, 1.0f, 1), *y = randn(5, ys, 1.0f, 2), *w = randn(5, ws, 0.05f, 3),
              *b = randn(1, bs, 0.1f, 4), *dx = randn(5, xs, 0, 5), *dw = randn(5, ws, 0, 6), *db = randn(1, bs, 0, 7);
    if (!x || !y || !w || !b || !dx || !dw || !db) return fail("allocation");
    float *X = rt_tensor_f32(x), *Y = rt_tensor_f32(y), *W = rt_tensor_f32(w), *B = rt_tensor_f32(b);
    for (int it = 0; it < warmup + steps; it++)
        for (int p = 0; p < 3; p++) {
            double t0 = now_ms();
            rt_status st;
            if (deconv)
                st = p == 0   ? rt_kernel_deconv_forward(&ds, X, W, B, Y)
                     : p == 1 ? rt_kernel_deconv_backward_data(&ds, W, Y, rt_tensor_f32(dx))
                              : rt_kernel_deconv_backward_weights(&ds, X, Y, rt_tensor_f32(dw), rt_tensor_f32(db));
            else
                st = p == 0   ? rt_kernel_conv_forward(&cs, X, W, B, Y)
                     : p == 1 ? rt_kernel_conv_backward_data(&cs, W, Y, rt_tensor_f32(dx))
                              : rt_kernel_conv_backward_weights(&cs, X, Y, rt_tensor_f32(dw), rt_tensor_f32(db));
            if (st != RT_OK) return fail("convolution pass");
            if (it >= warmup) ms[p][it - warmup] = now_ms() - t0;
        }
    rt_tensor *all[7] = {x, y, w, b, dx, dw, db};
    for (int i = 0; i < 7; i++) rt_tensor_release(all[i]);
    return 0;
}

/* conv -> norm -> LeakyReLU through autograd: forward, then backward. */
static int time_block(bool group, int64_t n, int64_t c, int64_t size, rt_layout lay, int steps, int warmup,
                      double ms[3][MAX_STEPS]) {
    int64_t xs[5] = {n, c, size, size, size}, ws[5] = {c, c, 3, 3, 3}, cs[1] = {c};
    rt_tensor *x0 = randn(5, xs, 1.0f, 1), *w = randn(5, ws, 0.05f, 3), *b = randn(1, cs, 0.1f, 4),
              *g = randn(1, cs, 0.1f, 5), *beta = randn(1, cs, 0.1f, 6), *x = NULL;
    if (!x0 || !w || !b || !g || !beta) return fail("allocation");
    float *gp = rt_tensor_f32(g);
    for (int64_t i = 0; i < c; i++) gp[i] += 1.0f;
    if (rt_to_layout(x0, lay, &x) != RT_OK) return fail("layout");
    rt_tensor *params[4] = {w, b, g, beta};
    for (int i = 0; i < 4; i++) rt_tensor_set_requires_grad(params[i], true);
    rt_tensor_set_requires_grad(x, true);
    rt_conv_opts o = {.padding = {1, 1, 1}};
    for (int it = 0; it < warmup + steps; it++) {
        rt_tensor *h = NULL, *h2 = NULL, *y = NULL, *gy = NULL;
        double t0 = now_ms();
        if (rt_conv(x, w, b, &o, &h) != RT_OK) return fail("conv");
        rt_status st = group ? rt_group_norm(h, c / 4, g, beta, 1e-5f, &h2)
                             : rt_instance_norm(h, NULL, NULL, g, beta, true, 0.1f, 1e-5f, &h2);
        rt_tensor_release(h);
        if (st != RT_OK) return fail("norm");
        st = rt_leaky_relu(h2, 0.01f, &y);
        rt_tensor_release(h2);
        if (st != RT_OK) return fail("leaky_relu");
        double t1 = now_ms();
        gy = rt_tensor_empty_like(y, RT_MEM_TEMP);
        if (!gy || rt_tensor_fill(gy, 1.0f) != RT_OK) return fail("grad");
        double t2 = now_ms();
        if (rt_backward(y, gy, false) != RT_OK) return fail("backward");
        double t3 = now_ms();
        rt_tensor_release(y);
        rt_tensor_release(gy);
        rt_tensor_zero_grad(x);
        for (int i = 0; i < 4; i++) rt_tensor_zero_grad(params[i]);
        if (it >= warmup) {
            ms[0][it - warmup] = t1 - t0;
            ms[1][it - warmup] = t3 - t2;
            ms[2][it - warmup] = (t1 - t0) + (t3 - t2);
        }
    }
    rt_tensor_release(x);
    rt_tensor_release(x0);
    for (int i = 0; i < 4; i++) rt_tensor_release(params[i]);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: %s conv3d|convt3d|block_in|block_gn N C SIZE [STEPS WARMUP THREADS plain|blocked]\n",
                argv[0]);
        return 2;
    }
    const char *cas = argv[1];
    int64_t n = atoll(argv[2]), c = atoll(argv[3]), size = atoll(argv[4]);
    int steps = argc > 5 ? atoi(argv[5]) : 5, warmup = argc > 6 ? atoi(argv[6]) : 1;
    int threads = argc > 7 ? atoi(argv[7]) : 0;
    rt_layout lay = argc > 8 && !strcmp(argv[8], "blocked") ? RT_LAYOUT_BLOCKED : RT_LAYOUT_PLAIN;
    if (steps < 1 || steps > MAX_STEPS || warmup < 0 || n < 1 || c < 4 || size < 2) {
        fprintf(stderr, "bench_ops3d: bad arguments\n");
        return 2;
    }
    if (lay == RT_LAYOUT_BLOCKED && c % rt_layout_block()) {
        fprintf(stderr, "bench_ops3d: blocked needs C %% %d == 0\n", rt_layout_block());
        return 2;
    }
    rt_set_num_threads(threads);
    static double ms[3][MAX_STEPS];
    const char *names[3];
    int rc;
    if (!strcmp(cas, "conv3d") || !strcmp(cas, "convt3d")) {
        names[0] = "fwd", names[1] = "bwd_data", names[2] = "bwd_weights";
        rc = time_conv_passes(cas[4] == 't', n, c, size, lay, steps, warmup, ms);
    } else if (!strcmp(cas, "block_in") || !strcmp(cas, "block_gn")) {
        names[0] = "fwd", names[1] = "bwd", names[2] = "step";
        rc = time_block(cas[6] == 'g', n, c, size, lay, steps, warmup, ms);
    } else {
        fprintf(stderr, "bench_ops3d: unknown case %s\n", cas);
        return 2;
    }
    if (rc) return rc;
    printf("revtorch case=%s n=%lld c=%lld size=%lld layout=%s threads=%d", cas, (long long)n, (long long)c,
           (long long)size, lay == RT_LAYOUT_BLOCKED ? "blocked" : "plain", rt_get_num_threads());
    for (int p = 0; p < 3; p++) printf(" %s_ms=%.2f", names[p], median(ms[p], steps));
    printf("\n");
    rt_kernels_release_cache();
    return 0;
}
