/* Checkpointing options of the CLI (cli/checkpointing.h). */
#include "checkpointing.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

void cli_ckpt_help(FILE *f) {
    fprintf(f, "  --memory-mode M       conservative | balanced | aggressive: checkpoint, selectively recompute or\n"
               "                        rebuild (RevNets) so the activations take 60%% / 35%% / 15%% of plain\n"
               "                        backpropagation's (or the least possible), with the least recompute\n"
               "  --memory-budget SIZE  the whole step's tracked peak (parameters, gradients, optimizer state,\n"
               "                        batch, activations), e.g. 1.5GiB, 600MiB; planned with the least\n"
               "                        recompute, checked on a meta run, enforced as a hard limit above\n"
               "                        the data sets (which it does not count); an impossible budget is\n"
               "                        refused with the smallest feasible one\n"
               "  --checkpoint-segments K  checkpoint_sequential: K segments that keep only their inputs\n"
               "                        (K at most the model's stages; reversible stages keep rebuilding\n"
               "                        under it and --recompute, each splitting its segment)\n"
               "  --recompute selective keep convolution/linear outputs, recompute batch norm and activations\n"
               "                        (--memory-mode/--memory-budget always let the planner use it per stage,\n"
               "                        so it is refused beside them)\n");
}

bool cli_ckpt_given(const cli_ckpt_args *a) { return a->mode || a->budget || a->recompute || a->segments > 0; }

bool cli_ckpt_memory_ok(const char *cmd, const cli_ckpt_args *a, bool memory_given) {
    if (!memory_given || !cli_ckpt_given(a)) return true;
    fprintf(stderr, "revtorch %s: --memory and the checkpointing options both decide how reversible stages run: "
                    "under --memory-mode, --memory-budget, --checkpoint-segments or --recompute the planner "
                    "decides per stage whether a reversible stage rebuilds (revtorch memory lists its choice); "
                    "drop --memory, or drop the checkpointing option to run every stage as --memory says\n", cmd);
    return false;
}

bool cli_ckpt_option(int argc, char **argv, int *i, cli_ckpt_args *a, bool *ok) {
    const char *o = argv[*i];
    if (!strcmp(o, "--memory-mode")) *ok = cli_str(argc, argv, i, &a->mode);
    else if (!strcmp(o, "--memory-budget")) *ok = cli_str(argc, argv, i, &a->budget);
    else if (!strcmp(o, "--recompute")) *ok = cli_str(argc, argv, i, &a->recompute);
    else if (!strcmp(o, "--checkpoint-segments"))
        *ok = cli_int_in(argc, argv, i, 1, 100000, NULL, &a->segments);
    else return false;
    return true;
}

bool cli_parse_size(const char *cmd, const char *option, const char *s, int64_t *bytes) {
    /* A bare number is refused: "--memory-budget 30" meaning 30 bytes (or
     * 30 GiB?) was a trap. K/M/G/T alone are binary, as in docker and ulimit. */
    static const struct { const char *unit; double f; } units[] = {
        {"B", 1}, {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0}, {"TiB", 1099511627776.0},
        {"K", 1024.0}, {"M", 1048576.0}, {"G", 1073741824.0}, {"T", 1099511627776.0},
        {"kB", 1e3}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
    };
    char *end = NULL;
    /* decimal digits only: strtod would also take hex ("0x10MiB") and "inf" */
    bool decimal = s && (isdigit((unsigned char)*s) || (*s == '.' && isdigit((unsigned char)s[1]))) &&
                   !strpbrk(s, "xX");
    double v = decimal ? strtod(s, &end) : NAN;
    if (end && end != s && isfinite(v) && v > 0)
        for (size_t k = 0; k < sizeof units / sizeof units[0]; k++)
            if (!strcmp(end, units[k].unit)) {
                double b = v * units[k].f;
                if (b >= 1.0 && b <= 4.6e18) {
                    *bytes = (int64_t)b;
                    return true;
                }
            }
    fprintf(stderr,
            "revtorch %s: %s takes a positive size with a unit, e.g. 1.5GiB, 600MiB or 2GB, got '%s'; units: B, "
            "KiB/K, MiB/M, GiB/G, TiB/T (powers of 1024), kB, MB, GB, TB (powers of 1000)\n",
            cmd, option, s ? s : "(nothing)");
    return false;
}

bool cli_ckpt_config(const char *cmd, const cli_ckpt_args *a, rt_memory_config *mc) {
    memset(mc, 0, sizeof *mc);
    if (a->mode && (rt_memory_mode_parse(a->mode, &mc->mode) != RT_OK || mc->mode == RT_MEMORY_MODE_NONE)) {
        fprintf(stderr, "revtorch %s: --memory-mode must be conservative, balanced or aggressive, got '%s'\n", cmd,
                a->mode);
        return false;
    }
    if (a->budget && !cli_parse_size(cmd, "--memory-budget", a->budget, &mc->budget)) return false;
    if (a->recompute && strcmp(a->recompute, "selective")) {
        fprintf(stderr, "revtorch %s: --recompute takes 'selective' (keep convolution outputs, recompute the "
                        "rest), got '%s'\n", cmd, a->recompute);
        return false;
    }
    /* A mode or budget lets the planner use selective recompute per stage
     * (the least recompute for the memory); alone, --recompute selective
     * makes every stage selective. train and memory plan alike. */
    mc->selective = a->recompute != NULL || a->mode != NULL || a->budget != NULL;
    mc->segments = (int)a->segments;
    if ((a->mode != NULL) + (a->budget != NULL) + (a->segments > 0) > 1) {
        fprintf(stderr, "revtorch %s: give one of --memory-mode, --memory-budget and --checkpoint-segments (each "
                        "decides what is recomputed)\n", cmd);
        return false;
    }
    if (a->recompute && (a->mode || a->budget)) { /* it would change nothing: say so rather than accept it */
        fprintf(stderr, "revtorch %s: --recompute selective is already in the planner's choice under %s (it picks "
                        "selective stages where they are the cheapest way to fit); drop --recompute\n", cmd,
                a->mode ? "--memory-mode" : "--memory-budget");
        return false;
    }
    if (a->segments > 0 && a->recompute) {
        fprintf(stderr, "revtorch %s: --checkpoint-segments and --recompute selective are two manual strategies; "
                        "give one (or let --memory-mode / --memory-budget combine them)\n", cmd);
        return false;
    }
    return true;
}

rt_status cli_ckpt_apply(rt_model *m, const rt_plan *p) {
    rt_module *w = NULL;
    RT_TRY(rt_checkpoint_create(m->net, &w));
    m->net = w;
    return rt_checkpoint_set_plan(w, p->kind, p->segment, p->n);
}

rt_status cli_ckpt_plan(const char *model, int64_t in_channels, int64_t num_classes, const cli_strategy *strategy,
                        const rt_optimizer_spec *spec, const rt_train_config *cfg, int64_t n, int64_t h, int64_t w,
                        const rt_memory_config *mc, rt_memory_plan *out) {
    const int64_t xs[4] = {n, in_channels, h, w}, ys[1] = {n};
    return cli_ckpt_plan_shape(model, in_channels, num_classes, strategy, spec, cfg, 4, xs, 1, ys, mc, out);
}

rt_status cli_ckpt_plan_shape(const char *model, int64_t in_channels, int64_t num_classes,
                              const cli_strategy *strategy, const rt_optimizer_spec *spec, const rt_train_config *cfg,
                              int x_ndim, const int64_t *xs, int y_ndim, const int64_t *ys,
                              const rt_memory_config *mc, rt_memory_plan *out) {
    rt_model *m = NULL;
    RT_TRY(rt_model_create(model, in_channels, num_classes, RT_DEVICE_META, 0, &m));
    cli_strategy_apply(strategy, m);
    rt_module *wrap = NULL;
    rt_status st = rt_checkpoint_create(m->net, &wrap);
    m->net = wrap;
    if (st == RT_OK) st = rt_memory_plan_make(wrap, spec, cfg, x_ndim, xs, y_ndim, ys, RT_I32, mc, out);
    rt_model_destroy(m);
    return st;
}

bool cli_ckpt_segments_ok(const char *cmd, const char *model, int64_t in_channels, int64_t num_classes,
                          const cli_strategy *strategy, int64_t segments) {
    if (segments <= 0) return true;
    rt_model *m = NULL;
    rt_module *wrap = NULL;
    rt_status st = rt_model_create(model, in_channels, num_classes, RT_DEVICE_META, 0, &m);
    if (st == RT_OK) {
        cli_strategy_apply(strategy, m);
        st = rt_checkpoint_create(m->net, &wrap);
        m->net = wrap;
    }
    int units = 0;
    if (st == RT_OK) {
        const rt_checkpoint *ck = rt_checkpoint_of(wrap);
        units = ck->unit[ck->n_stages - 1] + 1;
    }
    rt_model_destroy(m);
    if (st != RT_OK) {
        fprintf(stderr, "revtorch %s: cannot count %s's stages: %s\n", cmd, model, rt_error_last());
        return false;
    }
    if (segments <= units) return true;
    /* the library caps segments at the units (its own 2/4/8-segment rows
     * apply to any model), so a user's count beyond them would run fewer
     * segments than asked, under a label saying otherwise; PyTorch's
     * checkpoint_sequential fails too with more segments than modules */
    fprintf(stderr, "revtorch %s: --checkpoint-segments %lld: %s splits into %d part%s that segments are cut "
                    "between (its listed stages; a U-Net's levels); give 1 to %d\n", cmd, (long long)segments, model,
            units, units == 1 ? "" : "s", units);
    return false;
}

int cli_ckpt_segments(const rt_plan *p) {
    int segs = 0;
    for (int i = 0; i < p->n; i++)
        segs += p->kind[i] == RT_STAGE_CHECKPOINT &&
                (i == 0 || p->kind[i - 1] != RT_STAGE_CHECKPOINT || p->segment[i - 1] != p->segment[i]);
    return segs;
}

bool cli_ckpt_mode_short(const rt_memory_config *mc, const rt_memory_plan *p, char *buf, size_t n) {
    if (n) buf[0] = '\0';
    if (mc->mode == RT_MEMORY_MODE_NONE) return false;
    /* the mode's budget as rt_memory_plan_make sets it: a share of the
     * plain step's activations (its peak less parameters, gradients,
     * optimizer state and batch) */
    const rt_memstats *pl = &p->predicted_plain;
    int64_t fixed = pl->peak[RT_MEM_PARAM] + pl->peak[RT_MEM_GRAD] + pl->peak[RT_MEM_OPTIM] + pl->peak[RT_MEM_DATA];
    double frac = rt_memory_mode_fraction(mc->mode), act = (double)(pl->peak_total - fixed);
    int64_t budget = fixed + (int64_t)(frac * act);
    if (p->predicted.peak_total <= budget || act <= 0) return false;
    snprintf(buf, n, "%s saves %.0f%% of the activations where it can; here the least-memory plan saves %.1f%% "
             "(the batch, the input and the model's stages decide what checkpointing can drop)",
             rt_memory_mode_str(mc->mode), 100.0 * (1.0 - frac),
             100.0 * (1.0 - (double)(p->predicted.peak_total - fixed) / act));
    return true;
}

void cli_ckpt_describe(const rt_plan *p, char *buf, size_t n) {
    int count[4] = {0}, segs = cli_ckpt_segments(p);
    for (int i = 0; i < p->n; i++) count[p->kind[i]]++;
    snprintf(buf, n, "%d stages: %d stored, %d checkpointed in %d segment%s, %d selective, %d rebuilt", p->n,
             count[RT_STAGE_STORE], count[RT_STAGE_CHECKPOINT], segs, segs == 1 ? "" : "s", count[RT_STAGE_SELECTIVE],
             count[RT_STAGE_REBUILD]);
}
