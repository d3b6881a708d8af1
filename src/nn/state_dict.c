#include "nn/state_dict.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"

rt_state_dict *rt_state_dict_create(void) {
    rt_state_dict *sd = calloc(1, sizeof *sd);
    if (!sd) rt_error_set(RT_ERR_OOM, "out of memory creating a state dict");
    return sd;
}

void rt_state_dict_destroy(rt_state_dict *sd) {
    if (!sd) return;
    for (int i = 0; i < sd->n; i++) {
        free(sd->entries[i].name);
        rt_tensor_release(sd->entries[i].tensor);
    }
    free(sd->entries);
    free(sd);
}

rt_state_entry *rt_state_dict_find(rt_state_dict *sd, const char *name) {
    if (!sd || !name) {
        rt_error_set(RT_ERR_INVALID_ARG, "rt_state_dict_find: %s is NULL", !sd ? "the state dict" : "the name");
        return NULL;
    }
    for (int i = 0; i < sd->n; i++)
        if (strcmp(sd->entries[i].name, name) == 0) return &sd->entries[i];
    return NULL;
}

rt_status rt_state_dict_push(rt_state_dict *sd, const char *prefix, rt_state_entry e) {
    if (!sd || !prefix || !e.name)
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_state_dict_push: %s is NULL",
                            !sd ? "the state dict" : !prefix ? "the prefix (pass \"\" for none)" : "the entry's name");
    if (e.kind == RT_ENTRY_COUNTER ? !e.counter : (e.kind != RT_ENTRY_PARAM && e.kind != RT_ENTRY_BUFFER) || !e.tensor)
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_state_dict_push: entry '%s' of kind %d has no %s", e.name,
                            (int)e.kind, e.kind == RT_ENTRY_COUNTER ? "counter" : "tensor (or an unknown kind)");
    char full[256];
    int len = snprintf(full, sizeof full, "%s%s%s", prefix, prefix[0] ? "." : "", e.name);
    if (len < 0 || (size_t)len >= sizeof full)
        return rt_error_set(RT_ERR_INVALID_ARG, "state dict name '%s.%s' is longer than %zu bytes", prefix, e.name,
                            sizeof full - 1);
    if (rt_state_dict_find(sd, full))
        return rt_error_set(RT_ERR_INVALID_ARG, "state dict already has an entry named '%s'", full);
    if (sd->n == sd->cap) {
        int cap = sd->cap ? 2 * sd->cap : 64;
        rt_state_entry *p = realloc(sd->entries, (size_t)cap * sizeof *p);
        if (!p) return rt_error_set(RT_ERR_OOM, "out of memory growing the state dict");
        sd->entries = p;
        sd->cap = cap;
    }
    e.name = strdup(full);
    if (!e.name) return rt_error_set(RT_ERR_OOM, "out of memory naming '%s'", full);
    rt_tensor_retain(e.tensor);
    sd->entries[sd->n++] = e;
    return RT_OK;
}

static bool rt_ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && !strcmp(s + n - k, suffix);
}

rt_status rt_state_dict_check_values(const rt_state_dict *sd) {
    if (!sd) return rt_error_set(RT_ERR_INVALID_ARG, "rt_state_dict_check_values: the state dict is NULL");
    for (int i = 0; i < sd->n; i++) {
        const rt_tensor *t = sd->entries[i].tensor;
        if (!t || t->dtype != RT_F32) continue;
        const rt_backend *be = rt_backend_of(t); /* meta: no values, nothing to find */
        const int64_t n = rt_tensor_numel(t);
        const float *v = rt_tensor_f32(t);
        if (!be->vec_all_finite(n, v))
            return rt_error_set(RT_ERR_NONFINITE,
                                "'%s' holds NaN or Inf values: the weights are corrupt or come from a run "
                                "that diverged; use an earlier checkpoint",
                                sd->entries[i].name);
        float neg = 0.0f;
        int64_t j = rt_ends_with(sd->entries[i].name, "running_var") ? be->vec_first_negative(n, v, &neg) : -1;
        if (j >= 0)
            return rt_error_set(RT_ERR_FORMAT, "'%s' holds a negative variance (%g at index %lld): the file is corrupt",
                                sd->entries[i].name, (double)neg, (long long)j);
    }
    return RT_OK;
}

int rt_state_dict_num_params(const rt_state_dict *sd) {
    int n = 0;
    for (int i = 0; sd && i < sd->n; i++) n += sd->entries[i].kind == RT_ENTRY_PARAM;
    return n;
}

int64_t rt_state_dict_num_param_elements(const rt_state_dict *sd) {
    int64_t n = 0;
    for (int i = 0; sd && i < sd->n; i++)
        if (sd->entries[i].kind == RT_ENTRY_PARAM) n += rt_tensor_numel(sd->entries[i].tensor);
    return n;
}

int rt_state_dict_params(const rt_state_dict *sd, rt_tensor **params, int capacity) {
    if (!sd) return 0;
    int k = 0;
    for (int i = 0; i < sd->n; i++)
        if (sd->entries[i].kind == RT_ENTRY_PARAM) {
            if (params && k < capacity) params[k] = sd->entries[i].tensor;
            k++;
        }
    return k;
}
