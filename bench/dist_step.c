/* Data-parallel step time (dist/dist.h): run as
 *     mpirun -np R build/bench_dist_step MODEL BATCH_PER_RANK SIZE CHANNELS STEPS [BUCKET_MB]
 * Every rank trains MODEL (SGD, momentum 0.9) on its own random batch of
 * BATCH_PER_RANK images SIZE x SIZE x CHANNELS with 1 thread; with more than
 * one rank the gradients go through rt_dist (bucketed MPI_Iallreduce started
 * during backward). Prints one line from rank 0: median step time, and the
 * all-reduce's time per step (first bucket started → last completed), the
 * part of it after backward, and the fraction hidden behind backward.
 * Not a test: nothing timed is asserted (bench/dist.sh compares runs). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dist/dist.h"
#include "kernels/threads.h"
#include "models/model.h"

#ifndef RT_HAVE_MPI
int main(void) {
    fprintf(stderr, "bench_dist_step: built without MPI\n");
    return 77;
}
#else
static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc < 6) {
        if (rank == 0) fprintf(stderr, "usage: bench_dist_step MODEL BATCH_PER_RANK SIZE CHANNELS STEPS [BUCKET_MB]\n");
        MPI_Finalize();
        return 2;
    }
    const char *model = argv[1];
    int64_t batch = atoll(argv[2]), side = atoll(argv[3]), channels = atoll(argv[4]);
    int steps = atoi(argv[5]);
    double bucket_mb = argc > 6 ? atof(argv[6]) : 0;
    rt_set_num_threads(1);
    rt_model *m = NULL;
    if (rt_model_create(model, channels, 10, RT_DEVICE_CPU, 1, &m) != RT_OK) {
        fprintf(stderr, "%s\n", rt_error_last());
        return 1;
    }
    int np = rt_state_dict_num_params(m->sd);
    rt_tensor **params = malloc((size_t)np * sizeof *params);
    rt_state_dict_params(m->sd, params, np);
    rt_optimizer_spec spec = {.kind = RT_OPTIM_SGD, .sgd = {.lr = 0.01, .momentum = 0.9}};
    rt_optimizer *opt = rt_optimizer_create(&spec, params, np);
    rt_train_config cfg = {.accum_steps = 1};
    rt_dist *d = NULL;
    if (size > 1) {
        if (rt_dist_create(MPI_COMM_WORLD, opt, &(rt_dist_options){.bucket_mb = bucket_mb}, &d) != RT_OK ||
            rt_dist_attach(d, &cfg) != RT_OK) {
            fprintf(stderr, "%s\n", rt_error_last());
            return 1;
        }
    }
    int64_t xs[4] = {batch, channels, side, side};
    rt_tensor *x = rt_tensor_create(4, xs, RT_F32, RT_DEVICE_CPU, RT_MEM_DATA);
    rt_tensor *y = rt_tensor_zeros(1, &batch, RT_I32, RT_DEVICE_CPU, RT_MEM_DATA);
    rt_philox_uniform(17 + (uint64_t)rank, 0, rt_tensor_numel(x), rt_tensor_f32(x));
    double *t = malloc((size_t)steps * sizeof *t);
    rt_dist_stats warm = {0}, end;
    for (int s = -2; s < steps; s++) { /* 2 warm-up steps (the first calibrates the buckets) */
        if (s == 0) rt_dist_stats_get(d, &warm);
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = now_s();
        rt_train_result r;
        if (rt_train_step(m->net, opt, &cfg, x, y, &r) != RT_OK) {
            fprintf(stderr, "rank %d: %s\n", rank, rt_error_last());
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        if (s >= 0) t[s] = now_s() - t0;
    }
    rt_dist_stats_get(d, &end);
    qsort(t, (size_t)steps, sizeof *t, cmp_double);
    /* the same all-reduce alone (blocking, bucket by bucket, no backward to
     * hide it): the time the step would add if nothing overlapped */
    double alone = 0;
    if (size > 1) {
        size_t cap = (size_t)((bucket_mb > 0 ? bucket_mb : 25.0) * 1048576.0) / sizeof(float);
        size_t total = (size_t)end.grad_bytes / sizeof(float);
        float *buf = calloc(total, sizeof *buf);
        double best[3];
        for (int k = 0; k < 3; k++) {
            MPI_Barrier(MPI_COMM_WORLD);
            double t0 = now_s();
            for (size_t off = 0; off < total; off += cap)
                MPI_Allreduce(MPI_IN_PLACE, buf + off, (int)(total - off < cap ? total - off : cap), MPI_FLOAT, MPI_SUM,
                              MPI_COMM_WORLD);
            best[k] = now_s() - t0;
        }
        qsort(best, 3, sizeof *best, cmp_double);
        alone = best[1];
        free(buf);
    }
    double n = (double)(end.steps - warm.steps > 0 ? end.steps - warm.steps : 1);
    double comm = (end.comm_s - warm.comm_s) / n, exposed = (end.exposed_s - warm.exposed_s) / n;
    if (rank == 0)
        printf("model=%s ranks=%d batch_per_rank=%lld size=%lld median_step_s=%.4f grad_mib=%.1f buckets=%d "
               "allreduce_alone_ms=%.1f span_ms=%.1f after_backward_ms=%.1f hidden=%.2f\n", model, size,
               (long long)batch, (long long)side, t[steps / 2], (double)end.grad_bytes / 1048576.0, end.buckets,
               1e3 * alone, 1e3 * comm, 1e3 * exposed,
               alone > 0 ? (exposed < alone ? 1.0 - exposed / alone : 0.0) : 0.0);
    free(t);
    rt_tensor_release(x);
    rt_tensor_release(y);
    rt_dist_destroy(d);
    rt_optimizer_destroy(opt);
    free(params);
    rt_model_destroy(m);
    MPI_Finalize();
    return 0;
}
#endif
