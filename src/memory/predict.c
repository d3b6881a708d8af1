/* Memory prediction: the training step on meta tensors (memory/predict.h). */
#include "memory/predict.h"

#include <stdlib.h>

/* *step_events: the trace's length at the end of the steady-state step
 * (0 when it did not run). */
static rt_status rt_predict_run(rt_module *net, rt_state_dict *sd, const rt_optimizer_spec *spec,
                                const rt_train_config *cfg, rt_tensor *x, rt_tensor *y, rt_memstats *peaks,
                                size_t *step_events) {
    int np = rt_state_dict_num_params(sd);
    rt_tensor **params = malloc((size_t)(np ? np : 1) * sizeof *params);
    if (!params) return rt_error_set(RT_ERR_OOM, "out of memory predicting memory");
    rt_state_dict_params(sd, params, np);
    rt_status st = RT_OK;
    for (int i = 0; i < np && st == RT_OK; i++)
        if (!rt_tensor_is_meta(params[i]))
            st = rt_error_set(RT_ERR_INVALID_ARG, "rt_memory_predict: parameter '%s' is not on the meta device; "
                              "create the model with RT_DEVICE_META", sd->entries[i].name);
    rt_optimizer *opt = st == RT_OK ? rt_optimizer_create(spec, params, np) : NULL;
    if (st == RT_OK && !opt) st = rt_error_last_status();
    rt_train_config c = *cfg;
    c.hooks = (rt_train_hooks){0};
    rt_train_result r;
    if (st == RT_OK) st = rt_train_step(net, opt, &c, x, y, &r);
    *step_events = 0;
    if (st == RT_OK) {
        rt_memstats_reset_peaks();
        if (rt_mem_trace_enabled()) rt_mem_trace_enable(1); /* keep the steady-state step's events only */
        st = rt_train_step(net, opt, &c, x, y, &r);
        rt_mem_trace_events(step_events);
    }
    rt_memstats_get(peaks);
    if (opt) rt_optimizer_zero_grad(opt);
    rt_optimizer_destroy(opt);
    free(params);
    return st;
}

rt_status rt_memory_predict(rt_module *meta_net, const rt_optimizer_spec *opt, const rt_train_config *cfg,
                            int x_ndim, const int64_t *x_shape, int y_ndim, const int64_t *y_shape, rt_dtype y_dtype,
                            rt_memstats *peaks) {
    if (!meta_net || !opt || !cfg || (!x_shape && x_ndim > 0) || (!y_shape && y_ndim > 0) || !peaks)
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_memory_predict: %s is NULL",
                            !meta_net ? "the module meta_net" : !opt ? "the optimizer spec" : !cfg ? "the config"
                            : (!x_shape && x_ndim > 0) ? "x_shape" : (!y_shape && y_ndim > 0) ? "y_shape" : "peaks");
    rt_generator saved = *rt_default_generator();
    rt_memstats before;
    rt_memstats_get(&before);
    rt_state_dict *sd = NULL;
    RT_TRY(rt_module_state_dict(meta_net, &sd));
    /* the model's own parameters and buffers were live before and belong to the step */
    for (int i = 0; i < sd->n; i++) {
        const rt_tensor *t = sd->entries[i].tensor;
        if (!t || !rt_tensor_is_meta(t)) continue;
        before.live[RT_MEM_PARAM] -= (int64_t)rt_tensor_nbytes(t);
        before.live_total -= (int64_t)rt_tensor_nbytes(t);
    }
    rt_tensor *x = rt_tensor_create(x_ndim, x_shape, RT_F32, RT_DEVICE_META, RT_MEM_DATA);
    rt_tensor *y = rt_tensor_create(y_ndim, y_shape, y_dtype, RT_DEVICE_META, RT_MEM_DATA);
    size_t step_events = 0;
    rt_status st =
        (x && y) ? rt_predict_run(meta_net, sd, opt, cfg, x, y, peaks, &step_events) : rt_error_last_status();
    if (!x || !y) rt_memstats_get(peaks);
    rt_tensor_release(x);
    rt_tensor_release(y);
    rt_state_dict_destroy(sd);
    /* the trace keeps the step, not the tear-down of this meta optimizer,
     * gradients and batch, which a training run's step never does (the
     * timelines ended in a fall to the parameters) */
    if (st == RT_OK && rt_mem_trace_enabled()) rt_mem_trace_truncate(step_events);
    /* the step's own bytes: subtract what was live before the prediction */
    for (int i = 0; i < RT_MEM_NCAT; i++) peaks->peak[i] -= before.live[i];
    peaks->peak_total -= before.live_total;
    rt_memstats_reset_peaks();
    *rt_default_generator() = saved;
    return st;
}
