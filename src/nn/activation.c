/* Parameterless elementwise modules: ReLU, LeakyReLU, Dropout (nn/modules.h). */
#include <math.h>

#include "nn/modules.h"

/* One struct for the three: the scalar is LeakyReLU's slope or Dropout's p. */
typedef struct rt_scalar_module {
    rt_module base;
    float value;
} rt_scalar_module;

static rt_status rt_relu_forward(rt_module *m, rt_tensor *x, rt_tensor **y) {
    (void)m;
    return rt_relu(x, y);
}

static rt_status rt_leaky_relu_forward(rt_module *m, rt_tensor *x, rt_tensor **y) {
    return rt_leaky_relu(x, ((rt_scalar_module *)m)->value, y);
}

/* Handed its input by a container (rt_module_forward_consume): computed in
 * place when nobody else holds x (rt_leaky_relu_inplace), then released. */
static rt_status rt_relu_forward_consume(rt_module *m, rt_tensor *x, rt_tensor **y) {
    rt_status st = rt_leaky_relu_inplace(x, ((rt_scalar_module *)m)->value, y); /* ReLU's value is 0 */
    rt_tensor_release(x);
    return st;
}

static rt_status rt_dropout_forward(rt_module *m, rt_tensor *x, rt_tensor **y) {
    return rt_dropout(x, ((rt_scalar_module *)m)->value, m->training, y);
}

static const rt_module_class rt_relu_class = {"ReLU", rt_relu_forward, NULL, rt_relu_forward_consume};
static const rt_module_class rt_leaky_relu_class = {"LeakyReLU", rt_leaky_relu_forward, NULL,
                                                    rt_relu_forward_consume};
static const rt_module_class rt_dropout_class = {"Dropout", rt_dropout_forward, NULL, NULL};

static rt_status rt_scalar_module_create(const rt_module_class *cls, float value, rt_module **m) {
    rt_scalar_module *s = (rt_scalar_module *)rt_module_alloc(sizeof *s, cls);
    *m = s ? &s->base : NULL;
    if (!s) return rt_error_last_status();
    s->value = value;
    return RT_OK;
}

rt_status rt_relu_create(rt_module **m) {
    if (!m) return rt_error_set(RT_ERR_INVALID_ARG, "rt_relu_create: the output pointer m is NULL");
    return rt_scalar_module_create(&rt_relu_class, 0.0f, m);
}

rt_status rt_leaky_relu_create(float negative_slope, rt_module **m) {
    if (!m) return rt_error_set(RT_ERR_INVALID_ARG, "rt_leaky_relu_create: the output pointer m is NULL");
    *m = NULL;
    if (!(negative_slope >= 0.0f) || !isfinite(negative_slope))
        return rt_error_set(RT_ERR_INVALID_ARG, "LeakyReLU: negative_slope must be finite and >= 0, got %g",
                            (double)negative_slope);
    return rt_scalar_module_create(&rt_leaky_relu_class, negative_slope, m);
}

rt_status rt_dropout_create(float p, rt_module **m) {
    if (!m) return rt_error_set(RT_ERR_INVALID_ARG, "rt_dropout_create: the output pointer m is NULL");
    *m = NULL;
    if (!(p >= 0.0f && p < 1.0f))
        return rt_error_set(RT_ERR_INVALID_ARG, "Dropout: p must be in [0, 1), got %g", (double)p);
    return rt_scalar_module_create(&rt_dropout_class, p, m);
}
