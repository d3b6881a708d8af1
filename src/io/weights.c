#include "io/weights.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/safetensors.h"
#include "ops/ops.h"

/* A file always holds PyTorch's order: a tensor in another memory order (a
 * convolution weight in RT_LAYOUT_WEIGHT_BLOCKED, its optimizer state) is
 * written from a plain copy, which *keep receives and the caller releases
 * after the writer has saved (the writer holds the data pointer). */
static rt_status rt_add_tensor(rt_st_writer *w, const char *name, rt_tensor *t, rt_tensor **keep) {
    *keep = NULL;
    if (rt_tensor_is_meta(t))
        return rt_error_set(RT_ERR_UNSUPPORTED, "cannot save '%s': meta tensors have no data", name);
    if (t->layout != RT_LAYOUT_PLAIN) {
        rt_tensor *d = rt_tensor_detach(t); /* no autograd record for the copy */
        rt_status st = d ? rt_to_layout(d, RT_LAYOUT_PLAIN, keep) : rt_error_last_status();
        rt_tensor_release(d);
        RT_TRY(st);
        t = *keep;
    }
    return rt_st_writer_add(w, name, rt_dtype_safetensors_name(t->dtype), t->ndim, t->shape,
                            rt_tensor_data(t), rt_tensor_nbytes(t));
}

/* RT_ERR_INVALID_ARG unless extra[0..n-1] is a valid list of named tensors. */
static rt_status rt_check_extra(const char *fn, const rt_named_tensor *extra, int n) {
    if (n < 0 || (n > 0 && !extra))
        return rt_error_set(RT_ERR_INVALID_ARG, "%s: extra is NULL or n_extra is negative (n_extra = %d)", fn, n);
    for (int i = 0; i < n; i++)
        if (!extra[i].name || !extra[i].tensor)
            return rt_error_set(RT_ERR_INVALID_ARG, "%s: extra[%d] has a NULL %s", fn, i,
                                !extra[i].name ? "name" : "tensor");
    return RT_OK;
}

rt_status rt_weights_save(const rt_state_dict *sd, const rt_named_tensor *extra, int n_extra,
                          const char *const *meta, int n_meta, const char *path) {
    if (!path) return rt_error_set(RT_ERR_INVALID_ARG, "rt_weights_save: the path is NULL");
    RT_TRY(rt_check_extra("rt_weights_save", extra, n_extra));
    if (n_meta < 0 || (n_meta > 0 && !meta))
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_weights_save: meta is NULL or n_meta is negative (n_meta = %d)",
                            n_meta);
    int n_entries = (sd ? sd->n : 0) + n_extra;
    rt_tensor **plain = calloc((size_t)(n_entries ? n_entries : 1), sizeof *plain); /* plain copies, see rt_add_tensor */
    rt_st_writer *w = plain ? rt_st_writer_create() : NULL;
    if (!w) {
        free(plain);
        return rt_error_set(RT_ERR_OOM, "rt_weights_save: out of memory saving '%s'", path);
    }
    rt_status st = RT_OK;
    int k = 0;
    for (int i = 0; sd && i < sd->n && st == RT_OK; i++) {
        const rt_state_entry *e = &sd->entries[i];
        if (e->kind == RT_ENTRY_COUNTER)
            st = rt_st_writer_add(w, e->name, "I64", 0, NULL, e->counter, sizeof(int64_t));
        else
            st = rt_add_tensor(w, e->name, e->tensor, &plain[k++]);
    }
    for (int i = 0; i < n_extra && st == RT_OK; i++) st = rt_add_tensor(w, extra[i].name, extra[i].tensor, &plain[k++]);
    for (int i = 0; i < n_meta && st == RT_OK; i++)
        st = rt_st_writer_set_metadata(w, meta[2 * i], meta[2 * i + 1]);
    if (st == RT_OK) st = rt_st_writer_save(w, path);
    rt_st_writer_destroy(w);
    for (int i = 0; i < k; i++) rt_tensor_release(plain[i]);
    free(plain);
    return st;
}

static void rt_shape_str(int ndim, const int64_t *shape, char *buf, size_t n) {
    size_t used = (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < ndim && used < n; i++)
        used += (size_t)snprintf(buf + used, n - used, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (used < n) snprintf(buf + used, n - used, "]");
}

/* Float dtypes a float32 tensor is loaded from, converting, as PyTorch's
 * load_state_dict copies any floating tensor into a parameter (copy_). */
static bool rt_loadable_float(const char *dtype) {
    return !strcmp(dtype, "F32") || !strcmp(dtype, "F64") || !strcmp(dtype, "F16") || !strcmp(dtype, "BF16");
}

/* Copies file entry e (F32, F64, F16 or BF16; shape checked) into f32 data. */
static void rt_copy_to_f32(const rt_st_entry *e, float *dst, int64_t n) {
    const unsigned char *src = e->data;
    if (!strcmp(e->dtype, "F32")) {
        memcpy(dst, src, (size_t)n * sizeof(float));
    } else if (!strcmp(e->dtype, "F64")) {
        for (int64_t i = 0; i < n; i++) {
            double v;
            memcpy(&v, src + 8 * i, sizeof v);
            dst[i] = (float)v;
        }
    } else {
        const bool f16 = !strcmp(e->dtype, "F16");
        for (int64_t i = 0; i < n; i++) {
            uint16_t h;
            memcpy(&h, src + 2 * i, sizeof h);
            dst[i] = f16 ? rt_f16_to_f32(h) : rt_bf16_to_f32(h);
        }
    }
}

/* Copies file entry fe into the f32 tensor t, converting the dtype and,
 * for a tensor in another memory order, the order (through a plain copy). */
static rt_status rt_load_f32(rt_tensor *t, const rt_st_entry *fe) {
    if (t->layout == RT_LAYOUT_PLAIN) {
        rt_copy_to_f32(fe, rt_tensor_f32(t), rt_tensor_numel(t));
        rt_tensor_bump_version(t); /* loaded values: cached weight layouts are stale */
        return RT_OK;
    }
    rt_tensor *plain = rt_tensor_create(t->ndim, t->shape, RT_F32, t->device, RT_MEM_TEMP);
    if (!plain) return rt_error_last_status();
    rt_copy_to_f32(fe, rt_tensor_f32(plain), rt_tensor_numel(t));
    rt_status st = rt_copy_in_layout(t, plain); /* bumps t's version: cached weight layouts are stale */
    rt_tensor_release(plain);
    return st;
}

/* Checks that file entry `e` can fill a tensor of (dtype, ndim, shape);
 * an f32 tensor also takes F64, F16 and BF16 entries (converted on copy). */
static rt_status rt_check_entry(const char *path, const char *name, const rt_st_entry *e, const char *dtype,
                                int ndim, const int64_t *shape) {
    char want[96], got[96];
    rt_shape_str(ndim, shape, want, sizeof want);
    if (!e)
        return rt_error_set(RT_ERR_FORMAT, "weight file '%s' has no tensor '%s' (the model expects %s %s); "
                            "was it saved from a different model?", path, name, dtype, want);
    rt_shape_str(e->ndim, e->shape, got, sizeof got);
    bool same = e->ndim == ndim &&
                (strcmp(e->dtype, dtype) == 0 || (!strcmp(dtype, "F32") && rt_loadable_float(e->dtype)));
    for (int i = 0; same && i < ndim; i++) same = e->shape[i] == shape[i];
    if (!same)
        return rt_error_set(RT_ERR_FORMAT, "weight file '%s': tensor '%s' is %s %s but the model expects %s %s",
                            path, name, e->dtype, got, dtype, want);
    return RT_OK;
}

/* Runs the checks (copy == 0) or the copies (copy == 1) for every tensor. */
static rt_status rt_load_pass(rt_state_dict *sd, const rt_named_tensor *extra, int n_extra, rt_st_file *f,
                              const char *path, int copy) {
    int expected = 0;
    for (int i = 0; sd && i < sd->n; i++, expected++) {
        rt_state_entry *e = &sd->entries[i];
        const rt_st_entry *fe = rt_st_find(f, e->name);
        if (e->kind == RT_ENTRY_COUNTER) {
            /* As BatchNorm's load_state_dict: a state dict without
             * num_batches_tracked (saved before PyTorch 0.4.1, or edited)
             * loads with the counter at 0. */
            if (!fe) expected--;
            if (!copy && fe) RT_TRY(rt_check_entry(path, e->name, fe, "I64", 0, NULL));
            else if (copy) *e->counter = 0;
            if (copy && fe) memcpy(e->counter, fe->data, sizeof(int64_t));
            continue;
        }
        rt_tensor *t = e->tensor;
        if (!copy) {
            RT_TRY(rt_check_entry(path, e->name, fe, rt_dtype_safetensors_name(t->dtype), t->ndim, t->shape));
            if (rt_tensor_is_meta(t))
                return rt_error_set(RT_ERR_UNSUPPORTED, "cannot load '%s' into a meta tensor", e->name);
        } else if (t->dtype == RT_F32) {
            RT_TRY(rt_load_f32(t, fe));
        } else {
            memcpy(rt_tensor_data(t), fe->data, fe->nbytes);
            rt_tensor_bump_version(t);
        }
    }
    for (int i = 0; i < n_extra; i++, expected++) {
        rt_tensor *t = extra[i].tensor;
        const rt_st_entry *fe = rt_st_find(f, extra[i].name);
        if (!copy) RT_TRY(rt_check_entry(path, extra[i].name, fe, rt_dtype_safetensors_name(t->dtype), t->ndim, t->shape));
        else if (t->layout != RT_LAYOUT_PLAIN && t->dtype == RT_F32)
            RT_TRY(rt_load_f32(t, fe)); /* optimizer state of a weight in another order */
        else {
            memcpy(rt_tensor_data(t), fe->data, fe->nbytes);
            rt_tensor_bump_version(t);
        }
    }
    if (!copy && (size_t)expected != rt_st_count(f)) {
        for (size_t i = 0; i < rt_st_count(f); i++) {
            const char *name = rt_st_entry_at(f, i)->name;
            bool known = sd && rt_state_dict_find(sd, name);
            for (int j = 0; !known && j < n_extra; j++) known = strcmp(extra[j].name, name) == 0;
            if (!known)
                return rt_error_set(RT_ERR_FORMAT, "weight file '%s' has unexpected tensor '%s' that the model "
                                    "does not have; was it saved from a different model?", path, name);
        }
    }
    return RT_OK;
}

rt_status rt_weights_load(rt_state_dict *sd, const rt_named_tensor *extra, int n_extra, const char *path) {
    if (!path) return rt_error_set(RT_ERR_INVALID_ARG, "rt_weights_load: the path is NULL");
    RT_TRY(rt_check_extra("rt_weights_load", extra, n_extra));
    rt_st_file *f;
    RT_TRY(rt_st_open(path, &f));
    rt_status st = rt_load_pass(sd, extra, n_extra, f, path, 0);
    if (st == RT_OK) st = rt_load_pass(sd, extra, n_extra, f, path, 1);
    rt_st_close(f);
    return st;
}

rt_status rt_weights_read_metadata(const char *path, const char *key, char *buf, size_t n) {
    if (!path || !key || !buf || n == 0)
        return rt_error_set(RT_ERR_INVALID_ARG, "rt_weights_read_metadata: %s",
                            !path ? "the path is NULL" : !key ? "the key is NULL" : !buf ? "buf is NULL"
                                                                                        : "the buffer size n is 0");
    rt_st_file *f;
    RT_TRY(rt_st_open(path, &f));
    const char *v = rt_st_metadata(f, key);
    rt_status st = RT_OK;
    if (v) snprintf(buf, n, "%s", v);
    else st = rt_error_set(RT_ERR_FORMAT, "weight file '%s' has no metadata key '%s'", path, key);
    rt_st_close(f);
    return st;
}
