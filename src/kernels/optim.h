/* The optimizers' element loops: one fused pass per parameter, the f32
 * operations of PyTorch 1.13's _single_tensor_sgd and _single_tensor_adamw
 * in the same order (optim/optimizer.h has the formulas). The scalar
 * coefficients are computed by the caller (in double, as Python does) and
 * arrive as the f32 values the loops multiply with. OpenMP + simd above
 * RT_OPTIM_PAR_MIN elements; compiled for the baseline ISA only. Buffers:
 * n contiguous f32, caller-owned, updated in place; nothing is allocated.
 * A NULL coefficient struct or a NULL required buffer, or n <= 0: no-op. */
#ifndef RT_KERNELS_OPTIM_H
#define RT_KERNELS_OPTIM_H

#include <stdint.h>

/* Below this many elements an OpenMP region costs more than it saves
 * (the threshold of kernels/vec.c). */
#define RT_OPTIM_PAR_MIN 32768

typedef struct rt_sgd_coef {
    float weight_decay; /* wd; 0 adds nothing (not 0·p: an infinite p stays finite-free) */
    float momentum;     /* mu; 0: plain SGD, buf unused (may be NULL) */
    float damp1;        /* 1 − dampening */
    float neg_lr;       /* −lr */
    int nesterov;
} rt_sgd_coef;

/* d = g + wd·p (wd != 0) else g; with momentum: buf = d at the first step
 * (first != 0), else buf·mu + damp1·d, and d = d + mu·buf (nesterov) or buf;
 * p = p + neg_lr·d. */
void rt_kernel_sgd_update(int64_t n, const rt_sgd_coef *c, int first, float *p, const float *g, float *buf);

typedef struct rt_adamw_coef {
    float decay;          /* 1 − lr·weight_decay */
    float beta1, beta2;
    float one_minus_beta1, one_minus_beta2;
    float neg_step;       /* −lr / (1 − beta1^step) */
    float bc2_sqrt;       /* sqrt(1 − beta2^step) */
    float eps;
} rt_adamw_coef;

/* m = m·beta1 + (1−beta1)·g; v = v·beta2 + (1−beta2)·g·g;
 * p = p·decay + neg_step·m / (sqrt(v)/bc2_sqrt + eps)  (amsgrad = false). */
void rt_kernel_adamw_update(int64_t n, const rt_adamw_coef *c, float *p, const float *g, float *m, float *v);

#endif
