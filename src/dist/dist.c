/* Data parallelism over MPI (dist/dist.h): buckets, the gradient
 * notification, the watchdog, ZeRO-1's reduce-scatter and all-gather. */
#include "dist/dist.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "autograd/engine.h"
#include "dist/dist_impl.h"

rt_status rt_dist_shard(int64_t n, int rank, int size, int64_t *first, int64_t *count) {
    if (!first || !count) return rt_error_set(RT_ERR_INVALID_ARG, "rt_dist_shard: %s is NULL", !first ? "first" : "count");
    if (n < 0 || size < 1 || rank < 0 || rank >= size)
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_dist_shard: need n >= 0, size >= 1 and 0 <= rank < size, got n %lld, "
                            "rank %d, size %d", (long long)n, rank, size);
    *first = n * rank / size;
    *count = n * (rank + 1) / size - *first;
    return RT_OK;
}

void rt_dist_stats_get(const rt_dist *d, rt_dist_stats *out) {
    if (!out) return;
#ifdef RT_HAVE_MPI
    if (d) {
        *out = d->stats;
        return;
    }
#else
    (void)d;
#endif
    *out = (rt_dist_stats){0};
}

#ifndef RT_HAVE_MPI

static rt_status rt_dist_no_mpi(const char *who) {
    return rt_error_set(RT_ERR_UNSUPPORTED, "%s: this revtorch was built without MPI; install libopenmpi-dev "
                        "(scripts/setup.sh) and configure again with -DRT_MPI=ON", who);
}
rt_status rt_dist_create(rt_comm comm, rt_optimizer *opt, const rt_dist_options *o, rt_dist **out) {
    (void)comm;
    if (out) *out = NULL;
    if (!opt || !o || !out)
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_dist_create: %s is NULL", !opt ? "opt" : !o ? "o" : "out");
    return rt_dist_no_mpi("rt_dist_create");
}
void rt_dist_destroy(rt_dist *d) { (void)d; }
int rt_dist_rank(const rt_dist *d) { return (void)d, 0; }
int rt_dist_size(const rt_dist *d) { return (void)d, 1; }
rt_status rt_dist_attach(rt_dist *d, rt_train_config *cfg) {
    return rt_error_set(RT_ERR_INVALID_ARG, "rt_dist_attach: %s is NULL (built without MPI)", !d ? "d" : cfg ? "d" : "cfg");
}
rt_status rt_dist_check_same(rt_dist *d, const char *what, const void *bytes, size_t n) {
    (void)what, (void)bytes, (void)n, (void)d;
    return rt_error_set(RT_ERR_INVALID_ARG, "rt_dist_check_same: d is NULL (built without MPI)");
}
rt_status rt_dist_barrier(rt_dist *d, double timeout_s) {
    (void)d, (void)timeout_s;
    return rt_error_set(RT_ERR_INVALID_ARG, "rt_dist_barrier: d is NULL (built without MPI)");
}
rt_status rt_dist_sum(rt_dist *d, double *v, int64_t n) {
    (void)d, (void)v, (void)n;
    return rt_error_set(RT_ERR_INVALID_ARG, "rt_dist_sum: d is NULL (built without MPI)");
}
rt_status rt_dist_gather_state(rt_dist *d, rt_optimizer *full) {
    (void)d, (void)full;
    return rt_error_set(RT_ERR_INVALID_ARG, "rt_dist_gather_state: d is NULL (built without MPI)");
}
rt_status rt_dist_scatter_state(rt_dist *d, rt_optimizer *full) {
    (void)d, (void)full;
    return rt_error_set(RT_ERR_INVALID_ARG, "rt_dist_scatter_state: d is NULL (built without MPI)");
}

#else

double rt_dist_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

rt_status rt_dist_mpi_error(const rt_dist *d, int rc, const char *what) {
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS) snprintf(msg, sizeof msg, "MPI error %d", rc);
    return rt_error_set(RT_ERR_COMM, "rank %d of %d: %s failed: %s (another rank may have died)", d->rank, d->size,
                        what, msg);
}

rt_status rt_dist_wait(rt_dist *d, int n, MPI_Request *reqs, double *done_at, const char *what) {
    double t0 = rt_dist_now();
    long pause_ns = 2000;
    for (;;) {
        int pending = 0;
        for (int i = 0; i < n; i++) {
            if (reqs[i] == MPI_REQUEST_NULL) continue;
            int flag = 0;
            int rc = MPI_Test(&reqs[i], &flag, MPI_STATUS_IGNORE);
            if (rc != MPI_SUCCESS) return rt_dist_mpi_error(d, rc, what);
            if (flag) {
                if (done_at) done_at[i] = rt_dist_now();
            } else {
                pending++;
            }
        }
        if (!pending) return RT_OK;
        double waited = rt_dist_now() - t0;
        if (waited > d->timeout_s)
            return rt_error_set(RT_ERR_COMM, "rank %d of %d: %s (step %lld) has not completed after %.0f s: another "
                                "rank died, hangs, or stopped on an error (see its message); stopping instead of "
                                "waiting for ever", d->rank, d->size, what, (long long)d->stats.steps + 1, waited);
        /* Open MPI progresses a non-blocking collective only inside MPI calls:
         * poll often, but give the core away between polls (ranks may share cores) */
        struct timespec ts = {0, pause_ns};
        nanosleep(&ts, NULL);
        if (pause_ns < 200000) pause_ns += pause_ns / 4;
    }
}

/* Index of parameter `t` (binary search over the sorted pointers), -1 if none. */
static int rt_dist_find(const rt_dist *d, const rt_tensor *t) {
    int lo = 0, hi = d->n - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if ((uintptr_t)d->sorted[mid].t == (uintptr_t)t) return d->sorted[mid].index;
        if ((uintptr_t)d->sorted[mid].t < (uintptr_t)t) lo = mid + 1;
        else hi = mid - 1;
    }
    return -1;
}

static int rt_dist_ptr_cmp(const void *a, const void *b) {
    uintptr_t x = (uintptr_t)((const rt_dist_ptr *)a)->t, y = (uintptr_t)((const rt_dist_ptr *)b)->t;
    return x < y ? -1 : x > y;
}

/* Copies the bucket's gradients into its buffer and starts its reduction. */
static rt_status rt_dist_launch(rt_dist *d, int b) {
    rt_dist_bucket *bk = &d->buckets[b];
    for (int j = 0; j < bk->n; j++) {
        rt_tensor *p = d->params[bk->idx[j]];
        float *dst = bk->buf + bk->off[j];
        int64_t n = rt_tensor_numel(p);
        if (p->grad) memcpy(dst, rt_tensor_f32(p->grad), (size_t)n * sizeof(float));
        else memset(dst, 0, (size_t)n * sizeof(float)); /* unused on this rank: contributes zeros */
    }
    int rc;
    if (d->shard)
        rc = MPI_Ireduce_scatter(bk->buf, bk->own, bk->counts, MPI_FLOAT, MPI_SUM, d->comm, &d->reqs[b]);
    else
        rc = MPI_Iallreduce(MPI_IN_PLACE, bk->buf, (int)bk->numel, MPI_FLOAT, MPI_SUM, d->comm, &d->reqs[b]);
    if (rc != MPI_SUCCESS) return rt_dist_mpi_error(d, rc, d->shard ? "the gradient reduce-scatter" : "the gradient all-reduce");
    bk->launched = true;
    double now = rt_dist_now();
    if (d->first_launch < 0) d->first_launch = now;
    return RT_OK;
}

/* The engine's notification (autograd/engine.h): counts the gradient, starts
 * a bucket whose gradients are all final, and lets MPI progress. */
static rt_status rt_dist_on_grad(void *user, rt_tensor *leaf) {
    rt_dist *d = user;
    int i = rt_dist_find(d, leaf);
    if (i >= 0) {
        d->count[i]++;
        int b = d->bucket_of[i];
        if (d->buckets[b].launched)
            return rt_error_set(RT_ERR_STATE, "data parallel: parameter %d received another gradient after its "
                                "bucket's reduction started (the graph differs from the first step's: every "
                                "step must use each parameter the same number of times)", i);
        if (d->calibrated && d->count[i] == d->expected[i] && ++d->buckets[b].ready == d->buckets[b].n_expected) {
            RT_TRY(rt_dist_launch(d, b));
            d->stats.early_buckets++;
        }
    }
    for (int b = 0; b < d->n_buckets; b++) { /* progress */
        if (d->reqs[b] == MPI_REQUEST_NULL) continue;
        int flag = 0, rc = MPI_Test(&d->reqs[b], &flag, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS) return rt_dist_mpi_error(d, rc, "the gradient reduction");
        if (flag) d->done_at[b] = rt_dist_now();
    }
    return RT_OK;
}

static void rt_dist_unhook(rt_dist *d) {
    if (!d->hooked) return;
    rt_autograd_set_grad_hook(d->prev_fn, d->prev_user, NULL, NULL);
    d->hooked = false;
}

static rt_status rt_dist_before_micro(void *user, int64_t i, int64_t k) {
    rt_dist *d = user;
    rt_dist_unhook(d);
    if (i == 0) {
        memset(d->count, 0, (size_t)d->n * sizeof *d->count);
        for (int b = 0; b < d->n_buckets; b++) {
            d->buckets[b].ready = 0;
            d->buckets[b].launched = false;
            d->done_at[b] = -1;
        }
        d->first_launch = -1;
    }
    if (i == k - 1) { /* the last micro-batch: its backward makes the gradients final */
        memset(d->count, 0, (size_t)d->n * sizeof *d->count);
        rt_autograd_set_grad_hook(rt_dist_on_grad, d, &d->prev_fn, &d->prev_user);
        d->hooked = true;
    }
    if (d->inner.before_micro_batch) return d->inner.before_micro_batch(d->inner.user, i, k);
    return RT_OK;
}

static rt_status rt_dist_after_backward(void *user, rt_tensor *const *params, int n) {
    rt_dist *d = user;
    rt_dist_unhook(d);
    if (!d->calibrated) { /* the first step: learn each parameter's gradient count */
        for (int i = 0; i < d->n; i++) d->expected[i] = d->count[i];
        for (int b = 0; b < d->n_buckets; b++) {
            rt_dist_bucket *bk = &d->buckets[b];
            bk->n_expected = 0;
            for (int j = 0; j < bk->n; j++) bk->n_expected += d->expected[bk->idx[j]] > 0;
        }
        d->calibrated = true;
    }
    double bw_end = rt_dist_now();
    for (int b = 0; b < d->n_buckets; b++) /* late ones (the first step, unused parameters) in bucket order */
        if (!d->buckets[b].launched) RT_TRY(rt_dist_launch(d, b));
    RT_TRY(rt_dist_wait(d, d->n_buckets, d->reqs, d->done_at,
                        d->shard ? "the gradient reduce-scatter" : "the gradient all-reduce"));
    double end = rt_dist_now(), last = 0;
    for (int b = 0; b < d->n_buckets; b++) last = d->done_at[b] > last ? d->done_at[b] : last;
    if (last < bw_end) last = bw_end;
    /* exposed: what the step waited after backward, at most the reduction's own span (a bucket
     * started after backward is wholly exposed) */
    double span = last - d->first_launch, exposed = end - bw_end;
    d->stats.steps++;
    d->stats.comm_s += span;
    d->stats.exposed_s += exposed < span ? exposed : span;
    /* DDP averages: sum / world size */
    const float inv = 1.0f / (float)d->size;
    for (int b = 0; b < d->n_buckets; b++) {
        rt_dist_bucket *bk = &d->buckets[b];
        for (int j = 0; j < bk->n; j++) {
            int i = bk->idx[j];
            rt_tensor *p = d->params[i];
            const float *src;
            if (d->shard) {
                if (d->owner[i] != d->rank) {
                    rt_tensor_zero_grad(p); /* another rank updates it */
                    continue;
                }
                src = bk->own + (bk->off[j] - bk->displs[d->rank]);
            } else {
                src = bk->buf + bk->off[j];
            }
            if (!p->grad) {
                p->grad = rt_tensor_empty_like(p, RT_MEM_GRAD);
                if (!p->grad) return RT_ERR_OOM;
            }
            float *g = rt_tensor_f32(p->grad);
            int64_t m = rt_tensor_numel(p);
            for (int64_t e = 0; e < m; e++) g[e] = src[e] * inv;
        }
    }
    if (d->inner.after_backward) return d->inner.after_backward(d->inner.user, params, n);
    return RT_OK;
}

static rt_status rt_dist_before_step(void *user, rt_tensor *const *params, int n, bool *skip) {
    rt_dist *d = user;
    if (d->inner.before_step) return d->inner.before_step(d->inner.user, params, n, skip);
    return RT_OK;
}

static float rt_dist_loss_scale(void *user) {
    rt_dist *d = user;
    return d->inner.loss_scale ? d->inner.loss_scale(d->inner.user) : 1.0f;
}

/* ZeRO-1: every rank sends its updated parameters to all. */
static rt_status rt_dist_allgather_params(rt_dist *d) {
    double t0 = rt_dist_now();
    for (int b = 0; b < d->n_buckets; b++) {
        rt_dist_bucket *bk = &d->buckets[b];
        for (int j = 0; j < bk->n; j++) {
            int i = bk->idx[j];
            if (d->owner[i] == d->rank)
                memcpy(bk->buf + bk->off[j], rt_tensor_f32(d->params[i]),
                       (size_t)rt_tensor_numel(d->params[i]) * sizeof(float));
        }
        int rc = MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, bk->buf, bk->counts, bk->displs, MPI_FLOAT,
                                 d->comm, &d->reqs[b]);
        if (rc != MPI_SUCCESS) return rt_dist_mpi_error(d, rc, "the parameter all-gather");
    }
    RT_TRY(rt_dist_wait(d, d->n_buckets, d->reqs, NULL, "the parameter all-gather"));
    for (int b = 0; b < d->n_buckets; b++) {
        rt_dist_bucket *bk = &d->buckets[b];
        for (int j = 0; j < bk->n; j++) {
            int i = bk->idx[j];
            if (d->owner[i] != d->rank) {
                memcpy(rt_tensor_f32(d->params[i]), bk->buf + bk->off[j],
                       (size_t)rt_tensor_numel(d->params[i]) * sizeof(float));
                rt_tensor_bump_version(d->params[i]); /* cached weight layouts are stale */
            }
        }
    }
    d->stats.gather_s += rt_dist_now() - t0;
    return RT_OK;
}

static rt_status rt_dist_after_step(void *user, bool stepped) {
    rt_dist *d = user;
    if (d->shard && stepped) RT_TRY(rt_dist_allgather_params(d));
    if (d->inner.after_step) return d->inner.after_step(d->inner.user, stepped);
    return RT_OK;
}

rt_status rt_dist_attach(rt_dist *d, rt_train_config *cfg) {
    if (!d || !cfg) return rt_error_set(RT_ERR_INVALID_ARG, "rt_dist_attach: %s is NULL", !d ? "d" : "cfg");
    if (d->shard && cfg->clip > 0)
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_dist_attach: gradient clipping needs every gradient, but with a "
                            "sharded optimizer each rank keeps only its shard's: drop the clip or the sharding");
    if (cfg->hooks.user == d) return RT_OK; /* already attached */
    d->inner = cfg->hooks;
    cfg->hooks = (rt_train_hooks){.user = d,
                                  .loss_scale = d->inner.loss_scale ? rt_dist_loss_scale : NULL,
                                  .before_micro_batch = rt_dist_before_micro,
                                  .after_backward = rt_dist_after_backward,
                                  .before_step = d->inner.before_step ? rt_dist_before_step : NULL,
                                  .after_step = rt_dist_after_step};
    return RT_OK;
}

/* Buckets in reverse parameter order, at most cap bytes each (a parameter
 * larger than cap gets its own); with sharding, each bucket's parameters are
 * dealt to ranks and laid out rank by rank. */
static rt_status rt_dist_build_buckets(rt_dist *d, size_t cap) {
    d->buckets = calloc((size_t)d->n, sizeof *d->buckets);
    if (!d->buckets) return rt_error_set(RT_ERR_OOM, "rt_dist_create: out of memory");
    int i = d->n - 1;
    while (i >= 0) {
        rt_dist_bucket *bk = &d->buckets[d->n_buckets];
        int first = i;
        size_t bytes = 0;
        /* DDP's first bucket (the last layers, whose gradients come first) holds at
         * most 1 MiB, so the first reduction starts early in backward */
        size_t this_cap = d->n_buckets == 0 && cap > ((size_t)1 << 20) ? (size_t)1 << 20 : cap;
        while (i >= 0 && (i == first || bytes + rt_tensor_nbytes(d->params[i]) <= this_cap)) {
            bytes += rt_tensor_nbytes(d->params[i]);
            i--;
        }
        bk->n = first - i;
        bk->idx = malloc((size_t)bk->n * sizeof *bk->idx);
        bk->off = malloc((size_t)bk->n * sizeof *bk->off);
        bk->counts = calloc((size_t)d->size, sizeof *bk->counts);
        bk->displs = calloc((size_t)d->size, sizeof *bk->displs);
        if (!bk->idx || !bk->off || !bk->counts || !bk->displs) return rt_error_set(RT_ERR_OOM, "rt_dist_create: out of memory");
        for (int j = 0; j < bk->n; j++) bk->idx[j] = first - j;
        bk->n_expected = bk->n;
        d->n_buckets++;
        if (bytes / sizeof(float) > (size_t)INT32_MAX)
            return rt_error_set(RT_ERR_INVALID_ARG, "rt_dist_create: a parameter of %zu bytes is over MPI's count "
                                "limit (2^31 - 1 elements)", bytes);
        bk->numel = (int64_t)(bytes / sizeof(float));
        if (d->shard) {
            /* deal: largest first to the least loaded rank (ties: lowest rank, then lowest index) */
            int64_t *load = calloc((size_t)d->size, sizeof *load);
            bool *dealt = calloc((size_t)bk->n, sizeof *dealt);
            if (!load || !dealt) {
                free(load);
                free(dealt);
                return rt_error_set(RT_ERR_OOM, "rt_dist_create: out of memory");
            }
            for (int round = 0; round < bk->n; round++) {
                int best = -1;
                for (int j = 0; j < bk->n; j++)
                    if (!dealt[j] && (best < 0 || rt_tensor_numel(d->params[bk->idx[j]]) >
                                                      rt_tensor_numel(d->params[bk->idx[best]])))
                        best = j;
                int r = 0;
                for (int k = 1; k < d->size; k++)
                    if (load[k] < load[r]) r = k;
                dealt[best] = true;
                d->owner[bk->idx[best]] = r;
                load[r] += rt_tensor_numel(d->params[bk->idx[best]]);
            }
            free(dealt);
            int64_t off = 0;
            for (int r = 0; r < d->size; r++) {
                bk->displs[r] = (int)off;
                for (int j = 0; j < bk->n; j++)
                    if (d->owner[bk->idx[j]] == r) {
                        bk->off[j] = off;
                        off += rt_tensor_numel(d->params[bk->idx[j]]);
                    }
                bk->counts[r] = (int)load[r];
            }
            free(load);
            size_t own = (size_t)bk->counts[d->rank] * sizeof(float);
            RT_TRY(rt_mem_alloc(own, RT_MEM_GRAD, (void **)&bk->own));
            bk->own_bytes = own;
            d->stats.buffer_bytes += (int64_t)own;
        } else {
            int64_t off = 0;
            for (int j = 0; j < bk->n; j++) {
                bk->off[j] = off;
                off += rt_tensor_numel(d->params[bk->idx[j]]);
            }
        }
        bk->buf_bytes = (size_t)bk->numel * sizeof(float);
        RT_TRY(rt_mem_alloc(bk->buf_bytes, RT_MEM_GRAD, (void **)&bk->buf));
        d->stats.buffer_bytes += (int64_t)bk->buf_bytes;
        for (int j = 0; j < bk->n; j++) d->bucket_of[bk->idx[j]] = d->n_buckets - 1;
    }
    d->reqs = malloc((size_t)d->n_buckets * sizeof *d->reqs);
    d->done_at = malloc((size_t)d->n_buckets * sizeof *d->done_at);
    if (!d->reqs || !d->done_at) return rt_error_set(RT_ERR_OOM, "rt_dist_create: out of memory");
    for (int b = 0; b < d->n_buckets; b++) d->reqs[b] = MPI_REQUEST_NULL;
    d->stats.buckets = d->n_buckets;
    return RT_OK;
}

/* Every rank has the same parameter shapes; then rank 0's values go to all. */
static rt_status rt_dist_sync_params(rt_dist *d) {
    size_t shape_bytes = (size_t)d->n * (RT_MAX_DIMS + 1) * sizeof(int64_t);
    int64_t *shapes = calloc(1, shape_bytes);
    if (!shapes) return rt_error_set(RT_ERR_OOM, "rt_dist_create: out of memory");
    for (int i = 0; i < d->n; i++) {
        shapes[i * (RT_MAX_DIMS + 1)] = d->params[i]->ndim;
        for (int k = 0; k < d->params[i]->ndim; k++) shapes[i * (RT_MAX_DIMS + 1) + 1 + k] = d->params[i]->shape[k];
    }
    char what[64];
    snprintf(what, sizeof what, "the model's parameter shapes (%d parameters)", d->n);
    rt_status st = rt_dist_check_same(d, what, shapes, shape_bytes);
    free(shapes);
    RT_TRY(st);
    for (int b = 0; b < d->n_buckets; b++) { /* bucket by bucket: MPI counts are ints */
        rt_dist_bucket *bk = &d->buckets[b];
        for (int j = 0; j < bk->n; j++)
            memcpy(bk->buf + bk->off[j], rt_tensor_f32(d->params[bk->idx[j]]),
                   (size_t)rt_tensor_numel(d->params[bk->idx[j]]) * sizeof(float));
        int rc = MPI_Ibcast(bk->buf, (int)bk->numel, MPI_FLOAT, 0, d->comm, &d->reqs[b]);
        if (rc != MPI_SUCCESS) return rt_dist_mpi_error(d, rc, "the parameter broadcast");
    }
    RT_TRY(rt_dist_wait(d, d->n_buckets, d->reqs, NULL, "the parameter broadcast from rank 0"));
    for (int b = 0; b < d->n_buckets; b++) {
        rt_dist_bucket *bk = &d->buckets[b];
        for (int j = 0; j < bk->n; j++) {
            memcpy(rt_tensor_f32(d->params[bk->idx[j]]), bk->buf + bk->off[j],
                   (size_t)rt_tensor_numel(d->params[bk->idx[j]]) * sizeof(float));
            rt_tensor_bump_version(d->params[bk->idx[j]]);
        }
    }
    return RT_OK;
}

rt_status rt_dist_create(rt_comm comm, rt_optimizer *opt, const rt_dist_options *o, rt_dist **out) {
    if (out) *out = NULL;
    if (!opt || !o || !out)
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_dist_create: %s is NULL", !opt ? "opt" : !o ? "o" : "out");
    if (!isfinite(o->bucket_mb) || o->bucket_mb < 0 || !isfinite(o->timeout_s) || o->timeout_s < 0)
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_dist_create: bucket_mb (%g) and timeout_s (%g) must be finite "
                            "and >= 0 (0: the defaults 25 MiB and 60 s)", o->bucket_mb, o->timeout_s);
    int n = rt_optimizer_param_count(opt);
    rt_tensor *const *params = rt_optimizer_params(opt);
    for (int i = 0; i < n; i++)
        if (rt_tensor_is_meta(params[i]))
            return rt_error_set(RT_ERR_INVALID_ARG, "rt_dist_create: parameter %d is on the meta device; data "
                                "parallelism reduces real gradients", i);
    rt_dist *d = calloc(1, sizeof *d);
    if (!d) return rt_error_set(RT_ERR_OOM, "rt_dist_create: out of memory");
    d->comm = d->stat_comm = MPI_COMM_NULL;
    d->opt = opt;
    d->params = params;
    d->n = n;
    d->shard = o->shard_optimizer;
    d->timeout_s = o->timeout_s > 0 ? o->timeout_s : 60.0;
    int rc = MPI_Comm_dup(comm, &d->comm);
    if (rc != MPI_SUCCESS) {
        rt_status st = rt_error_set(RT_ERR_COMM, "rt_dist_create: MPI_Comm_dup failed (is MPI initialised, and is "
                                    "the communicator valid?)");
        free(d);
        return st;
    }
    MPI_Comm_set_errhandler(d->comm, MPI_ERRORS_RETURN);
    if (MPI_Comm_dup(d->comm, &d->stat_comm) != MPI_SUCCESS) d->stat_comm = MPI_COMM_NULL;
    MPI_Comm_rank(d->comm, &d->rank);
    MPI_Comm_size(d->comm, &d->size);
    d->sorted = malloc((size_t)n * sizeof *d->sorted);
    d->count = calloc((size_t)n, sizeof *d->count);
    d->expected = calloc((size_t)n, sizeof *d->expected);
    d->bucket_of = calloc((size_t)n, sizeof *d->bucket_of);
    d->owner = calloc((size_t)n, sizeof *d->owner);
    if (!d->sorted || !d->count || !d->expected || !d->bucket_of || !d->owner) {
        rt_dist_destroy(d);
        return rt_error_set(RT_ERR_OOM, "rt_dist_create: out of memory");
    }
    for (int i = 0; i < n; i++) d->sorted[i] = (rt_dist_ptr){params[i], i};
    qsort(d->sorted, (size_t)n, sizeof *d->sorted, rt_dist_ptr_cmp);
    double mb = o->bucket_mb > 0 ? o->bucket_mb : 25.0;
    size_t cap = (size_t)(mb * 1048576.0);
    const char *prev_op = rt_mem_set_op("dist.buckets");
    rt_status st = rt_dist_build_buckets(d, cap);
    rt_mem_set_op(prev_op);
    if (st == RT_OK) st = rt_dist_sync_params(d);
    if (st == RT_OK && d->shard) {
        bool *owned = malloc((size_t)n * sizeof *owned);
        if (!owned) st = rt_error_set(RT_ERR_OOM, "rt_dist_create: out of memory");
        for (int i = 0; owned && i < n; i++) owned[i] = d->owner[i] == d->rank;
        if (st == RT_OK) st = rt_optimizer_set_shard(opt, owned);
        free(owned);
    }
    for (int i = 0; i < n; i++) d->stats.grad_bytes += (int64_t)rt_tensor_nbytes(params[i]);
    if (st != RT_OK) {
        rt_dist_destroy(d);
        return st;
    }
    *out = d;
    return RT_OK;
}

void rt_dist_destroy(rt_dist *d) {
    if (!d) return;
    rt_dist_unhook(d);
    for (int b = 0; b < d->n_buckets; b++) {
        rt_dist_bucket *bk = &d->buckets[b];
        /* a collective still running (a step that failed half-way) cannot be
         * cancelled: its buffers are left to MPI (the job is ending then) */
        if (!d->reqs || d->reqs[b] == MPI_REQUEST_NULL) {
            rt_mem_free(bk->buf, bk->buf_bytes, RT_MEM_GRAD);
            rt_mem_free(bk->own, bk->own_bytes, RT_MEM_GRAD);
        }
        free(bk->idx);
        free(bk->off);
        free(bk->counts);
        free(bk->displs);
    }
    free(d->buckets);
    free(d->reqs);
    free(d->done_at);
    free(d->sorted);
    free(d->count);
    free(d->expected);
    free(d->bucket_of);
    free(d->owner);
    if (d->stat_comm != MPI_COMM_NULL) MPI_Comm_free(&d->stat_comm);
    if (d->comm != MPI_COMM_NULL) MPI_Comm_free(&d->comm);
    free(d);
}

int rt_dist_rank(const rt_dist *d) { return d ? d->rank : 0; }
int rt_dist_size(const rt_dist *d) { return d ? d->size : 1; }

rt_status rt_dist_barrier(rt_dist *d, double timeout_s) {
    if (!d) return rt_error_set(RT_ERR_INVALID_ARG, "rt_dist_barrier: d is NULL");
    MPI_Request req;
    int rc = MPI_Ibarrier(d->comm, &req);
    if (rc != MPI_SUCCESS) return rt_dist_mpi_error(d, rc, "a barrier");
    double keep = d->timeout_s;
    if (timeout_s > 0) d->timeout_s = timeout_s;
    rt_status st = rt_dist_wait(d, 1, &req, NULL, "a barrier");
    d->timeout_s = keep;
    return st;
}

rt_status rt_dist_sum(rt_dist *d, double *v, int64_t n) {
    if (!d || !v || n < 1 || n > INT32_MAX)
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_dist_sum: %s", !d ? "d is NULL" : !v ? "v is NULL"
                                                                                  : "n must be in 1..2^31-1");
    MPI_Request req;
    int rc = MPI_Iallreduce(MPI_IN_PLACE, v, (int)n, MPI_DOUBLE, MPI_SUM, d->comm, &req);
    if (rc != MPI_SUCCESS) return rt_dist_mpi_error(d, rc, "a sum over the ranks");
    return rt_dist_wait(d, 1, &req, NULL, "a sum over the ranks (the step's loss)");
}

rt_status rt_dist_check_same(rt_dist *d, const char *what, const void *bytes, size_t n) {
    if (!d || !what || !bytes)
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_dist_check_same: %s is NULL", !d ? "d" : !what ? "what" : "bytes");
    uint64_t h = 1469598103934665603ull; /* FNV-1a, 64 bits */
    for (size_t i = 0; i < n; i++) h = (h ^ ((const unsigned char *)bytes)[i]) * 1099511628211ull;
    uint64_t *all = malloc((size_t)d->size * sizeof *all);
    if (!all) return rt_error_set(RT_ERR_OOM, "rt_dist_check_same: out of memory");
    MPI_Request req;
    int rc = MPI_Iallgather(&h, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, d->comm, &req);
    rt_status st = rc == MPI_SUCCESS ? rt_dist_wait(d, 1, &req, NULL, "the start-up comparison of the options")
                                     : rt_dist_mpi_error(d, rc, "the start-up comparison of the options");
    if (st == RT_OK) {
        char ranks[256] = "";
        int differ = 0;
        for (int r = 1; r < d->size; r++)
            if (all[r] != all[0]) {
                size_t used = strlen(ranks);
                if (used < sizeof ranks - 16) snprintf(ranks + used, sizeof ranks - used, "%s%d", differ ? ", " : "", r);
                differ++;
            }
        if (differ)
            st = rt_error_set(RT_ERR_COMM, "%s differ between ranks: rank%s %s differ%s from rank 0; every rank must "
                              "run with the same options", what, differ > 1 ? "s" : "", ranks, differ > 1 ? "" : "s");
    }
    free(all);
    return st;
}

#endif
