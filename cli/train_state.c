/* Checkpoints of `revtorch train`: weights in one safetensors file (PyTorch
 * names, loadable with load_state_dict) and the optimizer state plus the
 * training position in a second one beside it. */
#include "train_state.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/safetensors.h"
#include "io/weights.h"
#include "kernels/vec.h"
#include "ops/ops.h"

void cli_train_state_optim_path(const char *weights, char *buf, size_t n) {
    const char *ext = ".safetensors";
    size_t len = strlen(weights), el = strlen(ext);
    if (len > el && !strcmp(weights + len - el, ext))
        snprintf(buf, n, "%.*s.optim%s", (int)(len - el), weights, ext);
    else
        snprintf(buf, n, "%s.optim%s", weights, ext);
}

/* The optimizer's state tensors, collected by name for saving: the visitor
 * hands out some entries (step counters) as temporaries, so each is retained. */
typedef struct optim_state {
    rt_named_tensor *items;
    char (*names)[96];
    int n, cap;
} optim_state;

static rt_status optim_state_add(void *ud, const char *name, rt_tensor *t) {
    optim_state *s = ud;
    if (s->n == s->cap) {
        int cap = s->cap ? 2 * s->cap : 64;
        rt_named_tensor *items = realloc(s->items, (size_t)cap * sizeof *items);
        if (items) s->items = items;
        char(*names)[96] = realloc(s->names, (size_t)cap * sizeof *names);
        if (names) s->names = names;
        if (!items || !names) return rt_error_set(RT_ERR_OOM, "out of memory listing optimizer state");
        s->cap = cap;
    }
    snprintf(s->names[s->n], sizeof s->names[0], "%s", name);
    s->items[s->n].tensor = rt_tensor_retain(t);
    s->n++;
    return RT_OK;
}

static void optim_state_free(optim_state *s) {
    for (int i = 0; i < s->n; i++) rt_tensor_release(s->items[i].tensor);
    free(s->items);
    free(s->names);
}

/* Fills each optimizer state tensor from the open checkpoint file (ud). */
static rt_status optim_state_fill(void *ud, const char *name, rt_tensor *t) {
    const rt_st_entry *e = rt_st_find(ud, name);
    if (!e || strcmp(e->dtype, rt_dtype_safetensors_name(t->dtype)) || e->nbytes != rt_tensor_nbytes(t))
        return rt_error_set(RT_ERR_FORMAT, "optimizer checkpoint lacks '%s' or holds it with another dtype or "
                            "shape; resume with the same --optimizer and --model", name);
    if (t->layout == RT_LAYOUT_PLAIN) {
        memcpy(rt_tensor_data(t), e->data, e->nbytes);
        return RT_OK;
    }
    /* the state of a weight in the kernels' order; the file holds OIHW */
    rt_tensor *plain = rt_tensor_from_data(t->ndim, t->shape, t->dtype, e->data, RT_MEM_TEMP);
    rt_status st = plain ? rt_copy_in_layout(t, plain) : rt_error_last_status();
    rt_tensor_release(plain);
    return st;
}

/* RT_ERR_NONFINITE for an f32 optimizer state tensor holding NaN or Inf
 * (ud: the file's path, for the message). */
static rt_status optim_state_check_finite(void *ud, const char *name, rt_tensor *t) {
    if (t->dtype == RT_F32 && !rt_vec_all_finite(rt_tensor_numel(t), rt_tensor_f32(t)))
        return rt_error_set(RT_ERR_NONFINITE, "optimizer state '%s' in '%s' holds NaN or Inf values; resume from "
                            "an earlier checkpoint", name, (const char *)ud);
    return RT_OK;
}

rt_status cli_train_state_save(const char *path, const char *opath, const char *optimizer, const char *run_options,
                               rt_model *m, rt_optimizer *opt, const rt_grad_scaler *scaler, int64_t epoch) {
    char ep[32], steps[32], scale[32] = "", growth[32] = "", skipped[32] = "";
    snprintf(ep, sizeof ep, "%lld", (long long)epoch);
    snprintf(steps, sizeof steps, "%lld", (long long)rt_optimizer_step_count(opt));
    float sc = 0;
    int64_t gt = 0, sk = 0;
    if (scaler && rt_grad_scaler_state_get(scaler, &sc, &gt, &sk) == RT_OK) {
        snprintf(scale, sizeof scale, "%.9g", (double)sc); /* %.9g: a float survives the round trip */
        snprintf(growth, sizeof growth, "%lld", (long long)gt);
        snprintf(skipped, sizeof skipped, "%lld", (long long)sk);
    }
    const char *meta[] = {"format", "pt", "model", m->name, "epoch", ep, "optimizer_steps", steps,
                          "optimizer", optimizer, "run_options", run_options, "loss_scale", scale,
                          "loss_scale_growth_tracker", growth, "loss_scale_skipped", skipped};
    optim_state s = {0};
    rt_status st = rt_optimizer_state_visit(opt, optim_state_add, &s);
    for (int i = 0; i < s.n; i++) s.items[i].name = s.names[i];
    if (st == RT_OK) st = rt_weights_save(NULL, s.items, s.n, meta, scale[0] ? 9 : 6, opath);
    optim_state_free(&s);
    if (st == RT_OK) st = rt_weights_save(m->sd, NULL, 0, meta, 6, path);
    return st;
}

/* The value of `name` in a "name=value name=value" list, copied into buf;
 * false when absent. */
static bool run_option(const char *list, const char *name, char *buf, size_t n) {
    size_t len = strlen(name);
    for (const char *p = list; p && *p;) {
        while (*p == ' ') p++;
        const char *end = strchr(p, ' ');
        size_t wl = end ? (size_t)(end - p) : strlen(p);
        if (wl > len && !strncmp(p, name, len) && p[len] == '=') {
            snprintf(buf, n, "%.*s", (int)(wl - len - 1), p + len + 1);
            return true;
        }
        p = end;
    }
    return false;
}

/* RT_ERR_INVALID_ARG listing each option saved in the checkpoint whose value
 * differs in this run, as "--batch-size 64 (this run: 128)". */
static rt_status check_run_options(const char *path, const char *saved, const char *now) {
    char diff[1024] = "";
    size_t used = 0;
    for (const char *p = saved; *p;) {
        while (*p == ' ') p++;
        const char *eq = strchr(p, '='), *end = strchr(p, ' ');
        if (!eq || (end && end < eq)) break;
        char name[64], was[128], is[128];
        snprintf(name, sizeof name, "%.*s", (int)(eq - p), p);
        snprintf(was, sizeof was, "%.*s", (int)(end ? end - eq - 1 : (long)strlen(eq + 1)), eq + 1);
        if (!run_option(now, name, is, sizeof is)) snprintf(is, sizeof is, "(not set)");
        if (!strcmp(name, "threads")) { /* informational: warn, continue */
            if (strcmp(was, is))
                fprintf(stderr, "revtorch: warning: checkpoint '%s' was trained with --threads %s (this run: %s): "
                                "this run continues it but not bit-identically (sums are split differently "
                                "across threads); pass --threads %s to continue it exactly\n", path, was, is, was);
        } else if (strcmp(was, is) && used + 1 < sizeof diff) {
            for (char *c = name; *c; c++)
                if (*c == '_') *c = '-';
            int w = snprintf(diff + used, sizeof diff - used, "%s--%s %s (this run: %s)", used ? ", " : "", name,
                             was, is);
            if (w > 0) used += (size_t)w < sizeof diff - used ? (size_t)w : sizeof diff - used - 1;
        }
        if (!end) break;
        p = end;
    }
    if (!used) return RT_OK;
    return rt_error_set(RT_ERR_INVALID_ARG,
                        "checkpoint '%s' was trained with %s; a resumed run continues the same data order and "
                        "learning-rate schedule only with the same options: pass them again (or start a new run "
                        "without --resume)",
                        path, diff);
}

rt_status cli_train_state_load(const char *path, const char *optimizer, const char *run_options, rt_model *m,
                             rt_optimizer *opt, rt_grad_scaler *scaler, int64_t *epoch) {
    char opath[4096], buf[64];
    cli_train_state_optim_path(path, opath, sizeof opath);
    RT_TRY(rt_weights_read_metadata(path, "model", buf, sizeof buf));
    if (strcmp(buf, m->name))
        return rt_error_set(RT_ERR_FORMAT, "checkpoint '%s' holds a %s, not a %s; pass --model %s", path,
                            buf, m->name, buf);
    RT_TRY(rt_weights_read_metadata(opath, "optimizer", buf, sizeof buf));
    if (strcmp(buf, optimizer))
        return rt_error_set(RT_ERR_FORMAT, "checkpoint '%s' was trained with --optimizer %s; resume with it",
                            opath, buf);
    RT_TRY(rt_weights_read_metadata(opath, "epoch", buf, sizeof buf));
    *epoch = strtoll(buf, NULL, 10);
    /* the two files are written one after the other: a save interrupted
     * between them leaves a pair from different epochs, which must not resume */
    char wbuf[64], osteps[64], wsteps[64];
    RT_TRY(rt_weights_read_metadata(path, "epoch", wbuf, sizeof wbuf));
    RT_TRY(rt_weights_read_metadata(opath, "optimizer_steps", osteps, sizeof osteps));
    RT_TRY(rt_weights_read_metadata(path, "optimizer_steps", wsteps, sizeof wsteps));
    if (strcmp(buf, wbuf) || strcmp(osteps, wsteps))
        return rt_error_set(RT_ERR_FORMAT, "checkpoint '%s' (epoch %s, step %s) and '%s' (epoch %s, step %s) are "
                            "from different points of training (a save was interrupted between them); resume "
                            "from an earlier complete pair", path, wbuf, wsteps, opath, buf, osteps);
    char saved[1024];
    if (rt_weights_read_metadata(path, "run_options", saved, sizeof saved) == RT_OK)
        RT_TRY(check_run_options(path, saved, run_options));
    else
        fprintf(stderr, "revtorch: warning: checkpoint '%s' does not record its run options (saved by an older "
                        "revtorch); make sure this run repeats them\n", path);
    RT_TRY(rt_weights_load(m->sd, NULL, 0, path));
    RT_TRY(rt_state_dict_check_values(m->sd));
    rt_st_file *f;
    RT_TRY(rt_st_open(opath, &f));
    rt_status st = rt_optimizer_state_visit(opt, optim_state_fill, f);
    rt_st_close(f);
    if (st == RT_OK) st = rt_optimizer_state_visit(opt, optim_state_check_finite, (void *)opath);
    char scale[64], growth[64], skipped[64];
    if (st == RT_OK && scaler) {
        if (rt_weights_read_metadata(opath, "loss_scale", scale, sizeof scale) == RT_OK &&
            rt_weights_read_metadata(opath, "loss_scale_growth_tracker", growth, sizeof growth) == RT_OK &&
            rt_weights_read_metadata(opath, "loss_scale_skipped", skipped, sizeof skipped) == RT_OK) {
            st = rt_grad_scaler_state_set(scaler, strtof(scale, NULL), strtoll(growth, NULL, 10),
                                          strtoll(skipped, NULL, 10));
        } else {
            rt_error_clear();
            fprintf(stderr, "revtorch: warning: checkpoint '%s' holds no loss-scaler state (saved without "
                            "--precision fp16's scaler): the scaler starts from its initial scale\n", opath);
        }
    }
    return st;
}

