/* A trainable image classifier behind one interface, so the CLI, tests and
 * benchmarks can pick models by name (`--model resnet20`). */
#ifndef RT_MODELS_MODEL_H
#define RT_MODELS_MODEL_H

#include <stdbool.h>

#include "nn/state_dict.h"

typedef struct rt_model rt_model;

struct rt_model {
    char name[32];
    rt_state_dict *sd;   /* parameters, buffers, counters with torchvision names */
    bool training;       /* train() / eval(): batch norm statistics and dropout */
    /* Memory strategy of models with reversible parts (RevNets): reversible
     * (rebuild activations in backward) or plain backpropagation on the same
     * parameters; grouping of the reversible sequences (memory/reversible.h). */
    bool reversible;
    int grouping;        /* rt_grouping */
    int group_k;
    /* Keep activations in oneDNN's BLOCKED memory order from the stem on
     * (core/tensor.h, rt_layout); false runs everything in PLAIN NCHW. Same
     * results either way, the blocked order avoids reorders around every conv. */
    bool blocked;
    void *impl;          /* the architecture's own struct */
    /* x: (N, C, H, W) f32 → logits (N, num_classes), new reference. */
    rt_status (*forward)(rt_model *m, rt_tensor *x, rt_tensor **logits);
    void (*destroy_impl)(void *impl);
};

/* Creates model `name` for `in_channels` input channels and `num_classes`
 * outputs, parameters on `device` (cpu, or meta for memory prediction),
 * initialised from Philox stream `seed` as the PyTorch original initialises
 * them. Names: see rt_model_names(). RT_ERR_INVALID_ARG for an unknown name
 * (the message lists the valid ones). */
rt_status rt_model_create(const char *name, int64_t in_channels, int64_t num_classes, rt_device device,
                          uint64_t seed, rt_model **out);
void rt_model_destroy(rt_model *m);
/* Runs the forward pass (see rt_model.forward). */
rt_status rt_model_forward(rt_model *m, rt_tensor *x, rt_tensor **logits);
/* Comma-separated list of the model names rt_model_create accepts. */
const char *rt_model_names(void);
/* Whether model `name` has reversible parts (the RevNets), i.e. whether
 * rt_model.reversible changes anything. False for unknown names. */
bool rt_model_name_has_reversible(const char *name);

#endif
