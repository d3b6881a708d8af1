/* A named model from the zoo: the module tree (nn/module.h) plus what the
 * CLI and weight files need to know about it. Strategies are set on the
 * tree (rt_module_set_reversible, rt_module_set_grouping in
 * memory/reversible.h; rt_module_set_blocked in nn/modules.h), train/eval
 * with rt_module_train(m->net, …). */
#ifndef RT_MODELS_MODEL_H
#define RT_MODELS_MODEL_H

#include <stdbool.h>

#include "../nn/module.h"

typedef struct rt_model {
    char name[32];         /* zoo name, written into weight files as "model" */
    int64_t in_channels, num_classes;
    /* classifiers: (N, in_channels, H, W) f32 → logits (N, num_classes);
     * segmentation models (rt_zoo_entry.segmentation, models/unet.h):
     * (N, in_channels, D, H, W) f32 → per-voxel logits (N, num_classes, D, H, W) */
    rt_module *net;
    rt_state_dict *sd;     /* the tree's state dict (torchvision names), built once */
} rt_model;

/* One entry of the model zoo. */
typedef struct rt_zoo_entry {
    const char *name;        /* "resnet20" */
    const char *description; /* one line for --help */
    bool has_reversible;     /* contains ReversibleSequences (the RevNets, prunet3d*) */
    bool segmentation;       /* 3-D input, per-voxel logits (the U-Nets); else an image classifier */
} rt_zoo_entry;

/* The zoo: *n entries, in the order --help lists them. NULL +
 * RT_ERR_INVALID_ARG when n is NULL. */
const rt_zoo_entry *rt_zoo_entries(int *n);
/* The entry named `name`, or NULL (with an RT_ERR_INVALID_ARG message when
 * name is NULL). */
const rt_zoo_entry *rt_zoo_find(const char *name);
/* Comma-separated list of the zoo's names (never NULL). */
const char *rt_model_names(void);
/* Whether model `name` has reversible parts; false for unknown names and NULL. */
bool rt_model_name_has_reversible(const char *name);
/* Whether model `name` is a segmentation model (input (N, C, D, H, W),
 * logits (N, K, D, H, W)); false for unknown names and NULL. */
bool rt_model_name_is_segmentation(const char *name);

/* Whether rt_model_create on this thread puts convolution weights in
 * RT_LAYOUT_WEIGHT_BLOCKED (true, the default) or leaves them in PyTorch's
 * OIHW (false: each training step then reorders every weight into the
 * forward's order and its gradient back, as before). Returns the previous
 * setting. Thread-local, like rt_conv_algo_set; the CLI's --weight-layout. */
bool rt_model_blocked_weights_set(bool on);

/* Creates zoo model `name` for `in_channels` input channels and
 * `num_classes` outputs, parameters on `device` (cpu, or meta for memory
 * prediction), initialised from Philox stream `seed` as the PyTorch
 * original initialises them, in training mode. Convolution weights are put
 * in RT_LAYOUT_WEIGHT_BLOCKED where they can be (rt_module_set_weight_layout,
 * nn/modules.h; unless rt_model_blocked_weights_set(false) on this thread):
 * read their values through a state dict saved with io/weights.h, or after
 * rt_module_set_weight_layout(m->net, RT_LAYOUT_PLAIN, NULL); the file
 * always holds OIHW. Errors: RT_ERR_INVALID_ARG
 * for out NULL, a NULL or unknown name (the message lists the valid ones),
 * channels or classes < 1 or an unknown device, RT_ERR_OOM. *out is NULL on
 * error (when out is not NULL). */
rt_status rt_model_create(const char *name, int64_t in_channels, int64_t num_classes, rt_device device,
                          uint64_t seed, rt_model **out);
/* Frees the model, its tree and its state dict. NULL is a no-op. */
void rt_model_destroy(rt_model *m);
/* logits = m->net(x) (rt_module_forward). RT_ERR_INVALID_ARG for NULL m, x
 * or logits (*logits is NULL on every error when logits is not NULL). */
rt_status rt_model_forward(rt_model *m, rt_tensor *x, rt_tensor **logits);

#endif
