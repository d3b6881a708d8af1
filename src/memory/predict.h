/* "What will this training step need?" answered before anything runs: the
 * library training step (train/step.h) executed on meta tensors (core/
 * tensor.h), which book every byte the real step would allocate — the real
 * model, its real number of outputs, the real optimizer and its state, the
 * micro-batches of gradient accumulation, the memory strategy set on the
 * tree — and compute nothing. */
#ifndef RT_MEMORY_PREDICT_H
#define RT_MEMORY_PREDICT_H

#include "../core/mem.h"
#include "../train/step.h"

/* Peak bytes per category (and in total) of one steady-state training step
 * of `meta_net`, a module whose parameters live on the meta device and that
 * is configured exactly like the real one (strategy, train mode), with
 * optimizer `opt` and step configuration `cfg` (its hooks are not run), on a
 * batch x of x_shape (f32) and targets y of y_shape with dtype y_dtype, as
 * the data loader hands them over (booked DATA). Steady state: the step is
 * run twice and the peaks are those of the second, when the optimizer's
 * state already exists as it does from the second real step on. Bytes live
 * before the call (other models, data sets) are subtracted, so *peaks
 * counts the step's own model, optimizer state, batch and activations.
 * The tracker's peaks are reset on return and the default generator is
 * restored. When the caller has the memory trace on (rt_mem_trace_enable),
 * the trace is restarted before the second step, so it holds that step's
 * events alone, each with its op and module path (`revtorch memory
 * --by-module` sums them per module). Errors: RT_ERR_INVALID_ARG for NULLs (a shape may be NULL only
 * with ndim 0) or a parameter that is not on the meta device (a prediction
 * must not compute); the shape errors of rt_tensor_create for x_ndim,
 * x_shape, y_ndim, y_shape (RT_ERR_SHAPE) and y_dtype (RT_ERR_DTYPE); those
 * of the step. */
rt_status rt_memory_predict(rt_module *meta_net, const rt_optimizer_spec *opt, const rt_train_config *cfg,
                            int x_ndim, const int64_t *x_shape, int y_ndim, const int64_t *y_shape, rt_dtype y_dtype,
                            rt_memstats *peaks);

#endif
