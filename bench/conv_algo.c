/* Times one 3x3 stride-1 convolution (forward, backward-data,
 * backward-weights) under RT_CONV_ALGO_DIRECT and RT_CONV_ALGO_WINOGRAD for the
 * shapes of ResNet-20/-50 and RevNet-110, and prints a markdown table with the
 * shape's "auto" choice, and the backward-weights pass's scratchpad under
 * each algorithm (TEMP bytes a training step holds during that call). This
 * is the measurement behind the AUTO rule in
 * kernels/conv.h (docs/design.md, "Convolution algorithm").
 *   build/bench_conv_algo [THREADS]     (default: all cores)
 * Each entry is the fastest of 5 calls after one warm-up (the machine is
 * shared: other load only adds time). Activations are blocked, as in the
 * models. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "core/layout.h"
#include "core/mem.h"
#include "kernels/cache.h"
#include "kernels/conv.h"
#include "kernels/plan.h"
#include "kernels/threads.h"

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Fastest of 5 timed calls of pass 0 (forward), 1 (backward-data) or 2
 * (backward-weights), in milliseconds; negative on error (printed). */
static double time_pass(const rt_conv_shape *s, int pass, float *x, float *w, float *y) {
    double best = 1e30;
    for (int r = 0; r < 6; r++) {
        double t0 = now_s();
        rt_status st = pass == 0   ? rt_kernel_conv_forward(s, x, w, NULL, y)
                       : pass == 1 ? rt_kernel_conv_backward_data(s, w, y, x)
                                   : rt_kernel_conv_backward_weights(s, x, y, w, NULL);
        double t = now_s() - t0;
        if (st != RT_OK) {
            fprintf(stderr, "bench_conv_algo: %s\n", rt_error_last());
            return -1.0;
        }
        if (r > 0 && t < best) best = t;
    }
    return 1e3 * best;
}

int main(int argc, char **argv) {
    rt_set_num_threads(argc > 1 ? atoi(argv[1]) : 0);
    /* n, channels, height = width */
    static const int64_t shapes[][3] = {
        {128, 16, 28}, {128, 32, 14}, {128, 64, 7},                /* resnet20, Fashion-MNIST */
        {128, 8, 32},  {128, 16, 32}, {128, 32, 16}, {128, 64, 8}, /* RevNet-110 (halves), 32x32 */
        {8, 64, 56},   {8, 128, 28},  {8, 256, 14},  {8, 512, 7},  /* ResNet-50, 224x224, batch 8 */
    };
    printf("| n | c_in = c_out | h = w | direct fwd / bwd-data / bwd-weights ms | winograd ms | "
           "auto picks | bwd-weights scratchpad direct / winograd MiB |\n|---:|---:|---:|---|---|---|---|\n");
    int rc = 0;
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        int64_t n = shapes[i][0], c = shapes[i][1], h = shapes[i][2];
        rt_layout lay = c % rt_layout_block() == 0 ? RT_LAYOUT_BLOCKED : RT_LAYOUT_PLAIN;
        rt_conv_shape s = {2, n, c, c, 1, {h, h, 0}, {3, 3, 0}, {1, 1, 0}, {1, 1, 0}, {1, 1, 0}, 0, lay, lay, 0, RT_LAYOUT_PLAIN, 0, 0, 0, 0};
        size_t act = (size_t)(n * c * h * h), wn = (size_t)(c * c * 9);
        float *x = calloc(act, sizeof *x), *y = calloc(act, sizeof *y), *w = calloc(wn, sizeof *w);
        if (!x || !y || !w) return 1;
        for (size_t k = 0; k < act; k++) x[k] = (float)((k * 7919u) % 17) / 17.0f - 0.5f;
        for (size_t k = 0; k < wn; k++) w[k] = (float)((k * 104729u) % 13) / 13.0f - 0.5f;
        double ms[2][3], scratch_mib[2] = {-1, -1}; /* -1: the plan failed (printed as such) */
        const rt_conv_algo algos[2] = {RT_CONV_ALGO_DIRECT, RT_CONV_ALGO_WINOGRAD};
        for (int a = 0; a < 2; a++) {
            rt_conv_algo_set(algos[a]);
            for (int p = 0; p < 3; p++)
                if ((ms[a][p] = time_pass(&s, p, x, w, y)) < 0) rc = 1;
            rt_kernel_plan plan;
            if (rt_kernel_conv_backward_weights_plan(&s, 0, &plan) == RT_OK) {
                scratch_mib[a] = (double)plan.scratchpad_bytes / 1048576.0;
            } else {
                fprintf(stderr, "bench_conv_algo: %s\n", rt_error_last());
                rc = 1;
            }
        }
        double d = ms[0][0] + ms[0][1] + ms[0][2], wg = ms[1][0] + ms[1][1] + ms[1][2];
        int64_t tiles = n * ((h + 3) / 4) * ((h + 3) / 4);
        int auto_wino = c >= 32 && tiles >= 128;
        printf("| %lld | %lld | %lld | %.2f / %.2f / %.2f (%.2f) | %.2f / %.2f / %.2f (%.2f) | %s%s | %.2f / %.2f |\n",
               (long long)n, (long long)c, (long long)h, ms[0][0], ms[0][1], ms[0][2], d, ms[1][0],
               ms[1][1], ms[1][2], wg, auto_wino ? "winograd" : "direct",
               (auto_wino ? wg <= d : d <= wg) ? "" : " (the slower here)", scratch_mib[0], scratch_mib[1]);
        free(x);
        free(y);
        free(w);
        rt_kernels_release_cache();
    }
    rt_conv_algo_set(RT_CONV_ALGO_AUTO);
    return rc;
}
