/* SyncBatchNorm (torch.nn.SyncBatchNorm): batch norm whose training
 * statistics are those of the global batch over every rank of an rt_dist.
 *
 * Forward (training): each rank sums x and x² per channel over its samples;
 * the sums and the sample counts are all-reduced; mean = Σx / M and the
 * biased variance Σx²/M − mean² (M: values per channel over all ranks)
 * normalise y = (x − mean)/√(var + eps)·weight + bias, and the running
 * statistics get the unbiased variance var·M/(M−1) (torch's
 * batch_norm_gather_stats_with_counts). Backward: each rank sums dy and
 * dy·x̂ per channel; those two sums are all-reduced and
 *     dx = weight/√(var + eps) · (dy − Σdy/M − x̂·Σ(dy·x̂)/M),
 * while weight's and bias's gradients are this rank's own sums, as in
 * PyTorch's SyncBatchNorm backward: data parallelism then averages them
 * (dist.h), which makes the whole step equal the single-process step on the
 * global batch. In eval mode it is F.batch_norm. With one rank it still
 * computes with its own loops (PyTorch switches to F.batch_norm there): so
 * N ranks and one rank do the same arithmetic but for the order of the
 * cross-rank sums, which are in double.
 * The statistics travel on a communicator of their own (a duplicate made by
 * rt_dist_create), under the same watchdog. Both memory orders (plain and
 * blocked, core/layout.h) are handled by plain loops with double sums.
 * Saves (training): x, weight, the global mean and 1/√(var + eps) (2·C
 * floats). */
#ifndef RT_DIST_SYNC_BN_H
#define RT_DIST_SYNC_BN_H

#include "dist/dist.h"
#include "nn/module.h"

/* The op, with F.batch_norm's arguments plus the rt_dist. Collective in
 * training with more than one rank: every rank calls it in the same order.
 * Errors: those of rt_batch_norm (shapes, dtypes: RT_ERR_SHAPE /
 * RT_ERR_DTYPE), RT_ERR_INVALID_ARG for a NULL d, x, weight, bias, running
 * statistics or out, RT_ERR_COMM, RT_ERR_OOM. */
rt_status rt_sync_batch_norm(rt_dist *d, rt_tensor *x, rt_tensor *weight, rt_tensor *bias, rt_tensor *running_mean,
                             rt_tensor *running_var, int64_t *num_batches_tracked, bool training, float momentum,
                             float eps, rt_tensor **out);

/* torch.nn.SyncBatchNorm.convert_sync_batchnorm: every BatchNorm2d/3d under
 * net (net included) computes with rt_sync_batch_norm over d from now on
 * (rt_batchnorm_set_function; the fused ReLU is applied after it); names,
 * parameters and buffers are unchanged. d must outlive the modules' use.
 * Errors: RT_ERR_INVALID_ARG (d or net NULL). */
rt_status rt_dist_convert_sync_batchnorm(rt_dist *d, rt_module *net);

#endif
