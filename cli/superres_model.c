/* `revtorch superres`: the model of the options (EDSR or reversible EDSR),
 * its loss and optimiser, and the meta-device prediction of a training
 * step's memory. */
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "memory/predict.h"
#include "models/edsr.h"
#include "ops/ops.h"
#include "superres_internal.h"

/* The model of the options as an rt_model named edsr or revedsr (EDSR's
 * state-dict paths, models/edsr.h), parameters on `device`, initialised from
 * Philox stream `seed`. */
rt_status cli_sr_model_create(const cli_sr_opts *o, rt_device device, uint64_t seed, rt_model **out) {
    *out = NULL;
    const bool rev = !strcmp(o->model, "revedsr");
    rt_edsr_config c;
    RT_TRY(rt_edsr_config_get(rev ? "edsr_rev" : "edsr", &c));
    c.n_resblocks = (int)o->blocks, c.n_feats = o->feats, c.res_scale = o->res_scale, c.scale = (int)o->scale;
    if (rev) c.rev_width = o->rev_width, c.rev_hidden = o->rev_hidden;
    rt_model *m = calloc(1, sizeof *m);
    if (!m) return rt_error_set(RT_ERR_OOM, "out of memory");
    snprintf(m->name, sizeof m->name, "%s", rev ? "revedsr" : "edsr");
    m->in_channels = c.in_channels, m->num_classes = c.out_channels;
    rt_init_ctx ctx = rt_init_ctx_make(device, seed);
    rt_status st = rt_edsr_build(&c, &ctx, &m->net);
    if (st == RT_OK) st = rt_module_state_dict(m->net, &m->sd);
    if (st != RT_OK) {
        rt_model_destroy(m);
        return st;
    }
    *out = m;
    return RT_OK;
}

/* The L1 loss of EDSR's training (rt_loss_fn). */
rt_status cli_sr_l1(rt_tensor *output, rt_tensor *target, void *user, rt_tensor **loss) {
    (void)user;
    return rt_l1_loss(output, target, loss);
}

void cli_sr_adam(float lr, rt_optimizer_spec *spec) {
    cli_optimizer_spec("adamw", lr, 0.0f, 0.0f, spec); /* AdamW without weight decay is Adam */
}

/* Predicted peaks of one steady-state step of the options' model at `batch`. */
rt_status cli_sr_predict(const cli_sr_opts *o, int64_t batch, rt_memstats *p) {
    rt_model *m = NULL;
    RT_TRY(cli_sr_model_create(o, RT_DEVICE_META, 0, &m));
    cli_strategy strategy;
    cli_memory_mode(o->memory, "full", &strategy);
    cli_strategy_apply(&strategy, m);
    rt_status st = m->net ? RT_OK : rt_error_set(RT_ERR_OOM, "out of memory");
    rt_optimizer_spec spec;
    cli_sr_adam(o->lr, &spec);
    rt_train_config cfg = {.accum_steps = 1, .loss = cli_sr_l1};
    const int64_t P = o->patch * o->scale;
    const int64_t xs[4] = {batch, 1, o->patch, o->patch}, ys[4] = {batch, 1, P, P};
    if (st == RT_OK) st = rt_memory_predict(m->net, &spec, &cfg, 4, xs, 4, ys, RT_F32, p);
    rt_model_destroy(m);
    return st;
}

void cli_sr_describe(const cli_sr_opts *o, char *buf, size_t n) {
    const bool rev = !strcmp(o->model, "revedsr");
    char width[64] = "";
    if (rev)
        snprintf(width, sizeof width, ", stream %lld, F/G hidden %lld", (long long)cli_sr_rev_width(o),
                 (long long)cli_sr_rev_hidden(o));
    snprintf(buf, n, "%s, %lld %s x %lld features%s, res_scale %g, x%lld", o->model, (long long)o->blocks,
             rev ? (o->blocks == 1 ? "coupling" : "couplings") : (o->blocks == 1 ? "block" : "blocks"),
             (long long)o->feats, width, (double)o->res_scale, (long long)o->scale);
}
