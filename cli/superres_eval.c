/* `revtorch superres eval`: the model's configuration from the weights file's
 * metadata (validated, and checked against the options given), then the
 * evaluation of cli_sr_evaluate. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "io/safetensors.h"
#include "io/weights.h"
#include "superres_internal.h"

/* One metadata value of the weights as an integer in [lo, hi] (false with a
 * message otherwise); absent keys leave *out alone. */
static bool sr_meta_int(const rt_st_file *f, const char *path, const char *key, int64_t lo, int64_t hi,
                        int64_t *out) {
    const char *v = rt_st_metadata(f, key);
    if (!v) return true;
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (end == v || *end || errno || x < lo || x > hi) {
        fprintf(stderr, "revtorch superres eval: --weights %s: weights metadata %s=%s is %s [%lld, %lld]: "
                        "the file is damaged or not from superres train\n", path, key, v,
                end == v || *end ? "not an integer in" : "out of range", (long long)lo, (long long)hi);
        return false;
    }
    *out = x;
    return true;
}

/* As sr_meta_int for a float in [lo, hi] (lo excluded when lo_open). */
static bool sr_meta_float(const rt_st_file *f, const char *path, const char *key, float lo, float hi, bool lo_open,
                          bool hi_open, float *out) {
    const char *v = rt_st_metadata(f, key);
    if (!v) return true;
    char *end;
    float x = strtof(v, &end);
    if (end == v || *end || !isfinite(x) || (lo_open ? !(x > lo) : !(x >= lo)) || (hi_open ? !(x < hi) : !(x <= hi))) {
        fprintf(stderr, "revtorch superres eval: --weights %s: weights metadata %s=%s is %s %c%g, %g%c: the "
                        "file is damaged or not from superres train\n", path, key, v,
                end == v || *end ? "not a number in" : "out of range", lo_open ? '(' : '[', (double)lo, (double)hi,
                hi_open ? ')' : ']');
        return false;
    }
    *out = x;
    return true;
}

/* eval: the configuration from the weights file's metadata, each value
 * checked against the options' own limits; an option the user gave that
 * disagrees with the weights is a usage error (exit 2). The file is read and
 * validated whole (rt_st_open) first, so a damaged file is reported as such. */
int cli_sr_eval(const cli_sr_opts *o_in) {
    rt_st_file *f = NULL;
    if (rt_st_open(o_in->weights, &f) != RT_OK) {
        fprintf(stderr, "revtorch superres eval: cannot read --weights %s: %s\n", o_in->weights, rt_error_last());
        return 1;
    }
    cli_sr_opts oo = *o_in;
    char model[32];
    const char *task = rt_st_metadata(f, "task"), *mv = rt_st_metadata(f, "model");
    rt_error_clear();
    if (!task || strcmp(task, "superres") || !mv) {
        fprintf(stderr, "revtorch superres eval: --weights %s was not saved by `revtorch superres train` (no "
                        "task=superres metadata)\n", o_in->weights);
        rt_st_close(f);
        return 1;
    }
    snprintf(model, sizeof model, "%s", mv);
    oo.model = model;
    bool ok = strcmp(model, "edsr") == 0 || strcmp(model, "revedsr") == 0;
    if (!ok)
        fprintf(stderr, "revtorch superres eval: --weights %s: weights metadata model=%s is not edsr or revedsr: the "
                        "file is damaged or not from superres train\n", o_in->weights, mv);
    ok = ok && sr_meta_int(f, o_in->weights, "blocks", 1, 1024, &oo.blocks) &&
         sr_meta_int(f, o_in->weights, "feats", 1, 4096, &oo.feats) &&
         sr_meta_int(f, o_in->weights, "scale", 2, 4, &oo.scale) &&
         sr_meta_int(f, o_in->weights, "rev_width", 0, 16384, &oo.rev_width) &&
         sr_meta_int(f, o_in->weights, "rev_hidden", 0, 16384, &oo.rev_hidden) &&
         sr_meta_int(f, o_in->weights, "gap", 0, 4096, &oo.gap) &&
         sr_meta_float(f, o_in->weights, "res_scale", 0, INFINITY, false, true, &oo.res_scale) &&
         sr_meta_float(f, o_in->weights, "holdout", 0, 1, true, true, &oo.holdout) &&
         sr_meta_float(f, o_in->weights, "percentile", 1, 100, false, false, &oo.percentile);
    rt_st_close(f);
    rt_error_clear();
    if (!ok) return 1;
    if (!strcmp(model, "revedsr") && oo.feats % 2) {
        fprintf(stderr, "revtorch superres eval: --weights %s: weights metadata feats=%lld is odd for revedsr: the "
                        "file is damaged or not from superres train\n", o_in->weights, (long long)oo.feats);
        return 1;
    }
    if (oo.rev_width && !cli_sr_rev_width_valid(oo.feats, oo.rev_width)) {
        fprintf(stderr, "revtorch superres eval: --weights %s: weights metadata rev_width=%lld is not feats (%lld) "
                        "times 1 to %d: the file is damaged or not from superres train\n", o_in->weights,
                (long long)oo.rev_width, (long long)oo.feats, RT_EDSR_MAX_WIDTH_FACTOR);
        return 1;
    }
    const char *opt = NULL;
    char given[64];
    if (o_in->model_given && strcmp(o_in->model, model))
        opt = "--model", snprintf(given, sizeof given, "%s", o_in->model);
    else if (o_in->blocks_given && o_in->blocks != oo.blocks)
        opt = "--blocks", snprintf(given, sizeof given, "%lld", (long long)o_in->blocks);
    else if (o_in->feats_given && o_in->feats != oo.feats)
        opt = "--feats", snprintf(given, sizeof given, "%lld", (long long)o_in->feats);
    else if (o_in->rev_width_given && o_in->rev_width != cli_sr_rev_width(&oo))
        opt = "--rev-width", snprintf(given, sizeof given, "%lld", (long long)o_in->rev_width);
    else if (o_in->rev_hidden_given && o_in->rev_hidden != cli_sr_rev_hidden(&oo))
        opt = "--rev-hidden", snprintf(given, sizeof given, "%lld", (long long)o_in->rev_hidden);
    else if (o_in->scale_given && o_in->scale != oo.scale)
        opt = "--scale", snprintf(given, sizeof given, "%lld", (long long)o_in->scale);
    else if (o_in->res_scale_given && o_in->res_scale != oo.res_scale)
        opt = "--res-scale", snprintf(given, sizeof given, "%g", (double)o_in->res_scale);
    if (opt) {
        char what[160];
        cli_sr_describe(&oo, what, sizeof what);
        fprintf(stderr, "revtorch superres eval: %s %s disagrees with the weights (%s); eval takes the model from the "
                        "weights: drop --model/--blocks/--feats/--rev-width/--rev-hidden/--scale/--res-scale\n", opt,
                given, what);
        return 2;
    }
    cli_sr_data d = {0};
    rt_model *m = NULL;
    int created = 0;
    int rc = cli_sr_load(&oo, &d);
    if (rc < 0) rc = cli_sr_make_out(&oo, &created);
    if (rc < 0) {
        rc = 1;
        if (cli_sr_model_create(&oo, RT_DEVICE_CPU, 0, &m) != RT_OK) cli_fail("cannot create the model");
        else if (rt_weights_load(m->sd, NULL, 0, oo.weights) != RT_OK) cli_fail("cannot load the weights");
        else if (cli_strategy_apply(&(cli_strategy){.reversible = true}, m), !m->net) cli_fail("out of memory");
        else {
            char what[160];
            cli_sr_describe(&oo, what, sizeof what);
            printf("%s (%lld parameters) from %s\n", what, (long long)rt_state_dict_num_param_elements(m->sd),
                   oo.weights);
            rc = cli_sr_evaluate(&oo, m, &d, NULL, 0.0);
        }
        if (rc != 0) cli_sr_unmake_out(&oo, created); /* only what is still empty goes */
    }
    rt_model_destroy(m);
    rt_tensor_release(d.volume);
    return rc;
}
