/* Data-parallel training over MPI (PyTorch's DistributedDataParallel, with
 * optional ZeRO stage-1 optimizer sharding), plugged into the library
 * training step (train/step.h) through its hooks.
 *
 * Every rank holds the whole model and runs rt_train_step on its own shard of
 * each global batch (rt_dist_shard). rt_dist sums the gradients across ranks
 * and divides by the number of ranks, as DDP does, so that with equal shards
 * and a mean-reduced loss the gradient is the global batch's: 2 ranks × 64
 * samples step exactly as 1 rank × 128 (to rounding).
 *
 *   - Buckets (DDP, Li et al., "PyTorch Distributed", VLDB 2020, §3.2.3): the
 *     parameters, in REVERSE order (backward produces the last layers'
 *     gradients first), are packed into flat f32 buckets of at most
 *     bucket_mb MiB (DDP's bucket_cap_mb, default 25; the first bucket at
 *     most 1 MiB, as DDP's, so that it starts early). During the last
 *     micro-batch's backward, the autograd engine's gradient notification
 *     (autograd/engine.h) counts each parameter's accumulations; when every
 *     parameter of a bucket has received as many as in the first step, the
 *     bucket is copied into its buffer and MPI_Iallreduce starts, while
 *     backward goes on. after_backward waits for all buckets and writes the
 *     averaged gradients back. The first step (like DDP's first iteration)
 *     only learns how many gradients each parameter receives: its buckets all
 *     start after backward.
 *   - Sharded optimizer (ZeRO-1, Rajbhandari et al., SC 2020, P_os): within
 *     each bucket the parameters are dealt to ranks (largest first, to the
 *     least loaded rank: PyTorch's ZeroRedundancyOptimizer partitions whole
 *     parameters the same way) and the bucket is laid out rank by rank, so
 *     MPI_Ireduce_scatter gives each rank the summed gradients of its own
 *     parameters only. The optimizer updates only those
 *     (rt_optimizer_set_shard: no state for the others, OPTIM ≈ 1/N), and
 *     after the step MPI_Iallgatherv sends each rank's updated parameters to
 *     all. The other parameters' .grad are dropped after the reduction.
 *   - Failures: the library duplicates the communicator and sets
 *     MPI_ERRORS_RETURN on its copy, so an MPI error is an RT_ERR_COMM
 *     status, never an abort. Every wait is a poll (MPI_Test) with a
 *     watchdog: a collective that has not completed after timeout_s seconds
 *     (a rank died, hung, or left the step on an error) returns RT_ERR_COMM
 *     naming the collective and the step. rt_dist_check_same compares a
 *     configuration across ranks at start-up.
 *
 * In a build without MPI (RT_HAVE_MPI undefined) rt_comm is a placeholder
 * int and rt_dist_create returns RT_ERR_UNSUPPORTED; rt_dist_shard works. */
#ifndef RT_DIST_DIST_H
#define RT_DIST_DIST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "optim/optim.h"
#include "train/step.h"

#ifdef RT_HAVE_MPI
#include <mpi.h>
typedef MPI_Comm rt_comm;
#else
typedef int rt_comm; /* a build without MPI has no communicator */
#endif

typedef struct rt_dist rt_dist;

typedef struct rt_dist_options {
    double bucket_mb;     /* bucket capacity in MiB (2^20 bytes), DDP's bucket_cap_mb; 0: 25 */
    bool shard_optimizer; /* ZeRO-1: optimizer state for this rank's parameters only */
    double timeout_s;     /* watchdog on every collective, seconds; 0: 60 */
} rt_dist_options;

/* Creates data parallelism over `comm` (an initialised communicator, e.g.
 * MPI_COMM_WORLD; duplicated, so the caller's stays untouched) for the
 * parameters of `opt` (borrowed; it must outlive the rt_dist). Collective:
 * every rank of comm calls it with the same model. It checks that every rank
 * has the same parameter shapes, broadcasts rank 0's parameter values to all
 * (DDP does the same at construction), builds the buckets and, with
 * shard_optimizer, restricts opt to this rank's shard. Bucket buffers (one
 * f32 copy of all parameters) are booked as GRAD.
 * Errors: RT_ERR_INVALID_ARG (opt/o/out NULL, bucket_mb or timeout_s < 0 or
 * not finite, a parameter on the meta device); RT_ERR_UNSUPPORTED (built
 * without MPI); RT_ERR_COMM (MPI failed, timed out, or the ranks' parameter
 * shapes differ); RT_ERR_OOM. *out is NULL on error. */
rt_status rt_dist_create(rt_comm comm, rt_optimizer *opt, const rt_dist_options *o, rt_dist **out);

/* Frees buffers and the duplicated communicator (collective: MPI_Comm_free).
 * NULL is a no-op. */
void rt_dist_destroy(rt_dist *d);

/* This process's rank and the number of ranks (0 and 1 for NULL). */
int rt_dist_rank(const rt_dist *d);
int rt_dist_size(const rt_dist *d);

/* Installs the data-parallel hooks into cfg->hooks, keeping the hooks
 * already there (a loss scaler's...) and calling them after its own:
 * before_micro_batch (the reduction runs only in the last micro-batch's
 * backward), after_backward (wait for the buckets, averaged gradients),
 * after_step (ZeRO-1: all-gather the updated parameters). cfg->clip must be 0
 * with shard_optimizer (a rank holds only its shard's gradients).
 * A before_step hook that may skip the step must decide the same on every
 * rank: without sharding every rank holds the same averaged gradients, but
 * with a sharded optimizer each holds only its shard's, so such a hook must
 * agree with the others (e.g. sum its inf/NaN flag over the ranks).
 * Errors: RT_ERR_INVALID_ARG (NULL, or clip with a sharded optimizer). */
rt_status rt_dist_attach(rt_dist *d, rt_train_config *cfg);

/* Start-up check that every rank passes the same bytes (e.g. the run's
 * options): a 64-bit FNV-1a hash of bytes[0..n-1] is all-gathered.
 * Errors: RT_ERR_INVALID_ARG (d, what or bytes NULL); RT_ERR_COMM naming
 * `what` and the ranks whose value differs from rank 0's (or a failed or
 * timed-out collective). */
rt_status rt_dist_check_same(rt_dist *d, const char *what, const void *bytes, size_t n);

/* Waits until every rank arrives (MPI_Ibarrier under the watchdog, with
 * timeout_s seconds: 0 means the rt_dist's). Errors: RT_ERR_INVALID_ARG
 * (d NULL), RT_ERR_COMM. */
rt_status rt_dist_barrier(rt_dist *d, double timeout_s);

/* Sums v[0..n-1] over the ranks in place (MPI_Iallreduce under the
 * watchdog): a step's losses and correct counts for the log. Errors:
 * RT_ERR_INVALID_ARG (d or v NULL, n < 1 or over 2^31 - 1), RT_ERR_COMM. */
rt_status rt_dist_sum(rt_dist *d, double *v, int64_t n);

/* This rank's share of a global batch of n samples: samples [first, first +
 * count) with first = ⌊n·rank/size⌋ (DistributedSampler's contiguous split of
 * the batch, so that the global order is the single-process order).
 * Errors: RT_ERR_INVALID_ARG (NULL outputs, n < 0, size < 1, rank outside
 * 0..size-1). */
rt_status rt_dist_shard(int64_t n, int rank, int size, int64_t *first, int64_t *count);

/* Saving a sharded optimizer in the unsharded format: collective. Rank 0
 * passes `full`, an unsharded optimizer of the same kind over the same
 * parameters (its state is overwritten with every rank's shard and its step
 * count with this one's); the other ranks pass NULL and send their shard.
 * Without sharding, rank 0 copies from its own optimizer. Errors:
 * RT_ERR_INVALID_ARG (d NULL, full NULL on rank 0 or of another kind or
 * size), RT_ERR_COMM, RT_ERR_OOM. */
rt_status rt_dist_gather_state(rt_dist *d, rt_optimizer *full);

/* Loading: copies this rank's shard of the state (and the step count) from
 * `full`, an unsharded optimizer every rank loaded from the checkpoint. Local,
 * no communication. Errors: RT_ERR_INVALID_ARG (NULL, another kind or size). */
rt_status rt_dist_scatter_state(rt_dist *d, rt_optimizer *full);

/* What the reductions cost, summed over the steps since creation. */
typedef struct rt_dist_stats {
    int64_t steps;          /* steps whose gradients were reduced */
    int buckets;            /* buckets per step */
    int64_t grad_bytes;     /* f32 gradient bytes reduced per step (all parameters) */
    int64_t early_buckets;  /* buckets started during backward (not after it) */
    double comm_s;          /* per step: first bucket started → last bucket completed */
    double exposed_s;       /* per step: the step's wait for the buckets after backward */
    double gather_s;        /* ZeRO-1: the parameter all-gather after the step */
    int64_t buffer_bytes;   /* the bucket buffers (and ZeRO-1 shards) held from creation on,
                               booked GRAD: what a single-process prediction lacks */
} rt_dist_stats;

/* Copies the statistics (zeros for NULL d); hidden fraction of the all-reduce
 * time = 1 - exposed_s / comm_s. NULL out: no-op. */
void rt_dist_stats_get(const rt_dist *d, rt_dist_stats *out);

#endif
