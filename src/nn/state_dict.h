/* A flat list of named tensors with PyTorch's dotted names
 * ("layer1.0.conv1.weight"): what torch.nn.Module.state_dict() returns.
 * Modules (nn/module.h) hold their tensors under short names and build a
 * state dict from the tree (rt_module_state_dict); io/weights.h saves and
 * loads one, the optimizers take its parameters.
 * Parameters are trainable leaves (requires_grad, booked PARAM); buffers
 * (running_mean, running_var) are booked PARAM too but never get gradients;
 * counters (num_batches_tracked) are int64 values owned by their module and
 * exported as 0-d I64 tensors by the safetensors layer.
 *
 * Ownership: the state dict owns one reference to every tensor it holds and
 * a copy of every name; counters point into their modules, so a state dict
 * must not outlive the modules it was built from. */
#ifndef RT_NN_STATE_DICT_H
#define RT_NN_STATE_DICT_H

#include <stdbool.h>
#include <stdint.h>

#include "../core/tensor.h"

typedef enum rt_entry_kind { RT_ENTRY_PARAM = 0, RT_ENTRY_BUFFER, RT_ENTRY_COUNTER } rt_entry_kind;

typedef struct rt_state_entry {
    char *name;
    rt_entry_kind kind;
    rt_tensor *tensor; /* PARAM and BUFFER */
    int64_t *counter;  /* COUNTER: points into the owning layer */
} rt_state_entry;

typedef struct rt_state_dict {
    rt_state_entry *entries;
    int n, cap;
} rt_state_dict;

/* New empty state dict. NULL + RT_ERR_OOM on allocation failure. */
rt_state_dict *rt_state_dict_create(void);
/* Frees the dict, its names and its tensor references. NULL is a no-op. */
void rt_state_dict_destroy(rt_state_dict *sd);

/* Appends entry `e` under prefix + "." + e.name (prefix "" for none),
 * copying the name and retaining e.tensor. Errors: RT_ERR_INVALID_ARG for
 * a duplicate or too long name, sd, prefix or e.name NULL, a PARAM/BUFFER
 * without a tensor, a COUNTER without a counter or an unknown kind;
 * RT_ERR_OOM. */
rt_status rt_state_dict_push(rt_state_dict *sd, const char *prefix, rt_state_entry e);

/* Entry by exact name, or NULL (with the message set when sd or name is NULL). */
rt_state_entry *rt_state_dict_find(rt_state_dict *sd, const char *name);
/* Number of trainable parameters and their elements (0 for NULL). */
int rt_state_dict_num_params(const rt_state_dict *sd);
int64_t rt_state_dict_num_param_elements(const rt_state_dict *sd);
/* RT_OK when every f32 parameter and buffer on the cpu holds only finite
 * values and every running_var is >= 0 (a variance); otherwise
 * RT_ERR_NONFINITE (NaN or Inf) or RT_ERR_FORMAT (a negative variance)
 * naming the first such entry. A network's ReLUs and max-pools can hide a
 * NaN weight from the loss, so check after loading weights one did not
 * train. Meta tensors pass. RT_ERR_INVALID_ARG when sd is NULL. */
rt_status rt_state_dict_check_values(const rt_state_dict *sd);
/* Writes the first min(number of parameters, capacity) trainable
 * parameters (borrowed pointers), in registration order, into params, and
 * returns the number of parameters (as snprintf returns the full length):
 * a result above capacity means the array was too small. 0 for a NULL sd;
 * params may be NULL with capacity 0 to count. */
int rt_state_dict_params(const rt_state_dict *sd, rt_tensor **params, int capacity);

#endif
