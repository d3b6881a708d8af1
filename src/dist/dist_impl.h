/* Internals shared by dist/dist.c and dist/dist_state.c (not public). */
#ifndef RT_DIST_DIST_IMPL_H
#define RT_DIST_DIST_IMPL_H

#ifdef RT_HAVE_MPI
#include "autograd/engine.h"
#include "dist/dist.h"

typedef struct rt_dist_ptr {
    const rt_tensor *t;
    int index;
} rt_dist_ptr;

/* One bucket: parameters idx[0..n-1] (reverse parameter order), each at
 * element offset off[j] of the flat buffer; with sharding the buffer holds
 * rank 0's parameters first, then rank 1's ... (counts/displs per rank) and
 * `own` receives this rank's summed part. */
typedef struct rt_dist_bucket {
    int n, n_expected, ready;
    int *idx;
    int64_t *off;
    int64_t numel;
    float *buf, *own;
    size_t buf_bytes, own_bytes;
    int *counts, *displs;
    bool launched;
} rt_dist_bucket;

struct rt_dist {
    MPI_Comm comm; /* our duplicate, MPI_ERRORS_RETURN */
    MPI_Comm stat_comm; /* another, for SyncBatchNorm's statistics (dist/sync_bn.h) */
    int rank, size;
    rt_optimizer *opt;
    rt_tensor *const *params;
    int n;
    bool shard, calibrated, hooked;
    double timeout_s;
    rt_dist_ptr *sorted;   /* params sorted by address, for the notification's look-up */
    int *count, *expected; /* gradients received this backward / in the first step */
    int *bucket_of, *owner;
    rt_dist_bucket *buckets;
    int n_buckets;
    MPI_Request *reqs;
    double *done_at, first_launch;
    rt_train_hooks inner;  /* the hooks found in the config, called after ours */
    rt_grad_accumulated_fn prev_fn;
    void *prev_user;
    rt_dist_stats stats;
};

double rt_dist_now(void);
/* RT_ERR_COMM with MPI's text for rc. */
rt_status rt_dist_mpi_error(const rt_dist *d, int rc, const char *what);
/* Polls reqs[0..n-1] (MPI_REQUEST_NULL entries are done) until all complete,
 * noting completion times in done_at (may be NULL); RT_ERR_COMM after
 * d->timeout_s seconds or on an MPI error. */
rt_status rt_dist_wait(rt_dist *d, int n, MPI_Request *reqs, double *done_at, const char *what);
#endif

#endif
