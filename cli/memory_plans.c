/* `revtorch memory`'s checkpointing rows: one per strategy, predicted on
 * meta and, with --measure, measured on real steps (cli/checkpointing.h). */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "checkpointing.h"
#include "cli.h"
#include "kernels/threads.h"
#include "outputs.h"
#include "plot.h"
#include "progress.h"

typedef struct plan_row {
    char name[32];
    rt_memory_config mc;
    rt_memory_plan p;
    double times[16];
    int n_times;
    int64_t measured;
} plan_row;

static int cmp_dbl(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median_of(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_dbl);
    return n == 0 ? 0.0 : n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Real steps of every row's plan on one model (the plans switch between
 * steps), rows alternating within each round so that load from other
 * processes falls on all of them alike: measured tracked peak of the step
 * and the median step time over `rounds` rounds after one warm-up round
 * (each turn of a row: one step to settle the allocator's cache, one timed). */
static int measure_rows(const char *model, int64_t channels, int64_t classes, const cli_strategy *strategy,
                        const rt_optimizer_spec *spec, const rt_train_config *cfg, const cli_batch_shape *shape,
                        plan_row *rows, int nrows, int rounds) {
    rt_model *m = NULL;
    if (rt_model_create(model, channels, classes, RT_DEVICE_CPU, 0, &m) != RT_OK) return cli_fail("model");
    cli_strategy_apply(strategy, m);
    int rc = 1;
    int np = rt_state_dict_num_params(m->sd);
    rt_tensor **params = malloc((size_t)np * sizeof *params);
    rt_optimizer *opt = NULL;
    rt_tensor *x = rt_tensor_create(shape->x_ndim, shape->xs, RT_F32, RT_DEVICE_CPU, RT_MEM_DATA);
    rt_tensor *y = rt_tensor_create(shape->y_ndim, shape->ys, RT_I32, RT_DEVICE_CPU, RT_MEM_DATA);
    if (params && x && y) {
        rt_state_dict_params(m->sd, params, np);
        opt = rt_optimizer_create(spec, params, np);
    }
    /* Learning rate 0: the optimizer does all its work (and holds its
     * state) but the weights stay put, so every strategy is timed on the
     * same weights and the dozens of steps on one batch cannot diverge
     * (SGD at lr 0.1 took prunet3d's Dice + CE loss to NaN). */
    if (opt) rt_optimizer_set_lr(opt, 0.0);
    if (!opt || cli_ckpt_apply(m, &rows[0].p.plan) != RT_OK) {
        cli_fail("setup");
        goto out;
    }
    rt_generator g = {1, 0};
    rt_generator_normal(&g, rt_tensor_numel(x), 0.0f, 1.0f, rt_tensor_f32(x));
    for (int64_t i = 0; i < rt_tensor_numel(y); i++) ((int32_t *)rt_tensor_data(y))[i] = (int32_t)(i % classes);
    for (int r = 0; r <= rounds; r++)
        for (int k = 0; k < nrows; k++) {
            const rt_plan *p = &rows[k].p.plan;
            if (rt_checkpoint_set_plan(m->net, p->kind, p->segment, p->n) != RT_OK) {
                cli_fail("plan");
                goto out;
            }
            /* Two steps per turn, the first untimed: the caching allocator
             * holds blocks of exact size classes, so the first step after a
             * switch of plan re-faults the blocks its plan sizes differently
             * (0.1 s on ResNet-50 224² batch 8, and most for plain, which
             * needs the most). Timing it made plain look slowest. */
            double t = 0;
            for (int rep = 0; rep < 2; rep++) {
                rt_memstats_reset_peaks();
                double t0 = cli_now_s();
                rt_train_result res;
                if (rt_train_step(m->net, opt, cfg, x, y, &res) != RT_OK) {
                    cli_fail("step");
                    goto out;
                }
                t = cli_now_s() - t0;
            }
            rt_memstats s;
            rt_memstats_get(&s);
            if (r == 0) continue;
            rows[k].times[rows[k].n_times++] = t;
            rows[k].measured = s.peak_total;
        }
    rc = 0;
out:
    rt_tensor_release(x);
    rt_tensor_release(y);
    rt_optimizer_destroy(opt);
    free(params);
    rt_model_destroy(m);
    return rc;
}

/* One meta step of `model` under plan p with the memory trace on: a copy of
 * its events (*ev, *n; free() it) and the step's peaks per category
 * (rt_memory_predict's, the step's own bytes). */
static rt_status trace_plan(const char *model, int64_t channels, int64_t classes, const cli_strategy *strategy,
                            const rt_optimizer_spec *spec, const rt_train_config *cfg, const cli_batch_shape *shape,
                            const rt_plan *p, rt_mem_event **ev, size_t *n, rt_memstats *peaks) {
    rt_model *m = NULL;
    *ev = NULL;
    *n = 0;
    RT_TRY(rt_model_create(model, channels, classes, RT_DEVICE_META, 0, &m));
    cli_strategy_apply(strategy, m);
    rt_status st = cli_ckpt_apply(m, p);
    rt_mem_trace_enable(1);
    if (st == RT_OK)
        st = rt_memory_predict(m->net, spec, cfg, shape->x_ndim, shape->xs, shape->y_ndim, shape->ys, RT_I32, peaks);
    size_t k = 0;
    const rt_mem_event *e = rt_mem_trace_events(&k);
    if (st == RT_OK && k > 0) {
        *ev = malloc(k * sizeof **ev);
        if (!*ev) st = rt_error_set(RT_ERR_OOM, "out of memory copying the trace");
        else memcpy(*ev, e, k * sizeof **ev), *n = k;
    }
    rt_mem_trace_enable(0);
    rt_model_destroy(m);
    return st;
}

/* Says which file of --memory-timeline could not be written and why. */
static void timeline_failed(const cli_output *o, const char *csv_given) {
    char what[2 * CLI_PATH_MAX + 64];
    cli_output_describe(o, what, sizeof what);
    fprintf(stderr, "revtorch memory: %s: %s; no file of --memory-timeline %s was changed\n", what,
            rt_error_last(), csv_given);
}

/* --memory-timeline FILE.csv: the planned row's step as CSV (FILE.csv) and
 * picture (FILE.png), and FILE.combined.png: the live total over one step
 * (as a fraction of its events) for plain, 4 segments and the plan. files:
 * the three, checked and locked (cli/outputs.h). Each is written to a
 * temporary beside it, and the three are renamed only once all are
 * written, so a failure leaves none of them changed, let alone truncated. */
static int write_timelines(const cli_outputs *files, const char *model, int64_t channels, int64_t classes,
                           const cli_strategy *strategy, const rt_optimizer_spec *spec, const rt_train_config *cfg,
                           const cli_batch_shape *shape, plan_row *rows, const int *pick, int npick) {
    const int64_t batch = shape->xs[0];
    const cli_output *out = files->out; /* CSV, PNG, combined PNG */
    char tmp[3][CLI_PATH_MAX + 32] = {"", "", ""}; /* "": none made (or already renamed) */
    cli_plot_series series[3];
    double *xs[3] = {0}, *ys[3] = {0};
    int rc = 1;
    for (int k = 0; k < npick; k++) {
        plan_row *r = &rows[pick[k]];
        rt_mem_event *ev = NULL;
        size_t n = 0;
        rt_memstats peaks;
        if (trace_plan(model, channels, classes, strategy, spec, cfg, shape, &r->p.plan, &ev, &n, &peaks) != RT_OK ||
            n == 0) {
            free(ev);
            cli_fail("memory timeline");
            goto out;
        }
        xs[k] = malloc(n * sizeof(double));
        ys[k] = malloc(n * sizeof(double));
        if (!xs[k] || !ys[k]) {
            free(ev);
            fprintf(stderr, "revtorch memory: out of memory drawing the memory timeline\n");
            goto out;
        }
        for (size_t i = 0; i < n; i++) {
            xs[k][i] = 100.0 * (double)i / (double)(n > 1 ? n - 1 : 1);
            ys[k][i] = (double)ev[i].live_total / 1048576.0;
        }
        series[k] = (cli_plot_series){.name = r->name, .x = xs[k], .y = ys[k], .n = n};
        if (k == npick - 1) { /* the plan's own step: CSV and stacked picture */
            char title[160];
            /* the row's name without the table's '*' (which marks the row asked for) */
            snprintf(title, sizeof title, "%s batch %lld, %s: one training step (meta run)", model, (long long)batch,
                     r->name + (r->name[0] == '*'));
            FILE *f = cli_open_tmp(out[0].path, tmp[0], sizeof tmp[0]);
            if (!f) {
                tmp[0][0] = '\0';
                timeline_failed(&out[0], out[0].given);
                free(ev);
                goto out;
            }
            rt_mem_events_write_csv(f, ev, n);
            if (cli_close_tmp(f, tmp[0], out[0].path) != RT_OK) { /* it removed the temporary */
                tmp[0][0] = '\0';
                timeline_failed(&out[0], out[0].given);
                free(ev);
                goto out;
            }
            /* a meta run's clock says nothing: draw against the event index.
             * Bytes each category held when the step began: its peak over the
             * step less the highest its running sum of events reaches (the
             * parameters, the optimizer state and the batch live through the
             * step without an event; the gradients are freed at its start) */
            int64_t base[RT_MEM_NCAT] = {0}, run[RT_MEM_NCAT] = {0}, high[RT_MEM_NCAT] = {0};
            for (size_t i = 0; i < n; i++) {
                ev[i].time_s = 0.0;
                run[ev[i].category] += ev[i].delta_bytes;
                if (run[ev[i].category] > high[ev[i].category]) high[ev[i].category] = run[ev[i].category];
            }
            for (int c = 0; c < RT_MEM_NCAT; c++) base[c] = peaks.peak[c] - high[c] > 0 ? peaks.peak[c] - high[c] : 0;
            /* the plot writes its own temporary and renames it over ours;
             * ours is renamed over the picture with the others */
            cli_tmp_name(out[1].path, tmp[1], sizeof tmp[1]);
            if (cli_plot_memory_timeline(tmp[1], ev, n, base, title) != RT_OK) {
                tmp[1][0] = '\0'; /* the plot removed its temporary; ours was not made */
                timeline_failed(&out[1], out[0].given);
                free(ev);
                goto out;
            }
        }
        free(ev);
    }
    char title[160];
    snprintf(title, sizeof title, "%s batch %lld: live tracked bytes over one training step", model,
             (long long)batch);
    cli_plot plot = {.title = title, .x_label = "% of the step's allocation events", .y_label = "live MiB",
                     .series = series, .n_series = (size_t)npick, .y_from_zero = true};
    cli_tmp_name(out[2].path, tmp[2], sizeof tmp[2]);
    if (cli_plot_lines(tmp[2], &plot) != RT_OK) {
        tmp[2][0] = '\0';
        timeline_failed(&out[2], out[0].given);
        goto out;
    }
    /* all three written: now replace the files; a rename within a
     * directory checked writable should not fail, but if one does, say
     * which files this run did replace */
    for (int i = 0; i < 3; i++) {
        if (cli_rename_tmp(tmp[i], out[i].path) != RT_OK) {
            tmp[i][0] = '\0';
            char what[2 * CLI_PATH_MAX + 64];
            cli_output_describe(&out[i], what, sizeof what);
            fprintf(stderr, "revtorch memory: %s: %s; %s%s%s%s\n", what, rt_error_last(),
                    i == 0 ? "no file of --memory-timeline was changed" : "already replaced: ",
                    i > 0 ? out[0].given : "", i > 1 ? " and " : "", i > 1 ? out[1].given : "");
            goto out;
        }
        tmp[i][0] = '\0';
    }
    printf("memory timeline: %s and %s (%s), %s (%d strategies side by side)\n", out[0].given, out[1].given,
           rows[pick[npick - 1]].name, out[2].given, npick);
    rc = 0;
out:
    for (int k = 0; k < 3; k++) {
        free(xs[k]);
        free(ys[k]);
        if (tmp[k][0]) unlink(tmp[k]);
    }
    return rc;
}

/* The row name of the strategy the options ask for, marked with '*'. */
static void describe_request(const cli_ckpt_args *a, char *buf, size_t n) {
    if (a->mode) snprintf(buf, n, "*%s", a->mode);
    else if (a->budget) snprintf(buf, n, "*budget %s", a->budget);
    else if (a->segments > 0) snprintf(buf, n, "*%lld segment%s", (long long)a->segments, a->segments == 1 ? "" : "s");
    else snprintf(buf, n, "*selective");
}

int cli_memory_plans(const char *model, int64_t channels, int64_t classes, const cli_strategy *strategy,
                     const rt_optimizer_spec *spec, const rt_train_config *cfg, const cli_batch_shape *shape,
                     const cli_ckpt_args *args, int measure_rounds, const cli_outputs *timeline) {
    const bool measure = measure_rounds > 0;
    plan_row rows[12];
    int n = 0;
    memset(rows, 0, sizeof rows);
    snprintf(rows[n++].name, sizeof rows[0].name, "plain");
    snprintf(rows[n].name, sizeof rows[0].name, "selective");
    rows[n++].mc.selective = true;
    for (int k = 2; k <= 8; k *= 2) {
        snprintf(rows[n].name, sizeof rows[0].name, "%d segments", k);
        rows[n++].mc.segments = k;
    }
    for (int md = RT_MEMORY_MODE_CONSERVATIVE; md <= RT_MEMORY_MODE_AGGRESSIVE; md++) {
        snprintf(rows[n].name, sizeof rows[0].name, "%s", rt_memory_mode_str((rt_memory_mode)md));
        rows[n].mc.mode = (rt_memory_mode)md;
        rows[n++].mc.selective = true;
    }
    /* The strategy the options ask for, as its own row, so that memory
     * answers what train would do with the same options. */
    int requested = -1;
    if (cli_ckpt_given(args)) {
        if (!cli_ckpt_config("memory", args, &rows[n].mc)) return 2;
        if (!cli_ckpt_segments_ok("memory", model, channels, classes, strategy, rows[n].mc.segments)) return 2;
        describe_request(args, rows[n].name, sizeof rows[0].name);
        requested = n++;
    }
    for (int k = 0; k < n; k++)
        if (cli_ckpt_plan_shape(model, channels, classes, strategy, spec, cfg, shape->x_ndim, shape->xs, shape->y_ndim,
                                shape->ys, &rows[k].mc, &rows[k].p) != RT_OK) {
            fprintf(stderr, "revtorch memory: %s: %s\n", rows[k].name, rt_error_last());
            for (int j = 0; j < k; j++) rt_memory_plan_free(&rows[j].p);
            return 1;
        }
    int rc = 0;
    if (timeline) {
        /* plain, 4 segments, and the budget's plan (else balanced) */
        int pick[3] = {0, 3, requested >= 0 ? requested : 6};
        rc = write_timelines(timeline, model, channels, classes, strategy, spec, cfg, shape, rows, pick, 3);
    }
    if (measure && !rc) {
        cli_print_cpu(stdout);
        rc = measure_rows(model, channels, classes, strategy, spec, cfg, shape, rows, n, measure_rounds);
    }
    const double mib = 1048576.0;
    const rt_memstats *pl = &rows[0].p.predicted;
    int64_t base = pl->peak[RT_MEM_PARAM] + pl->peak[RT_MEM_GRAD] + pl->peak[RT_MEM_OPTIM] + pl->peak[RT_MEM_DATA];
    double act_plain = (double)(pl->peak_total - base), plain_time = measure && !rc ? median_of(rows[0].times, rows[0].n_times) : 0;
    printf("\ncheckpointing strategies (planned on meta: peak MiB per category; saving: activations = step peak less "
           "parameters, gradients, optimizer state and batch; recompute: cost estimate, %% of a plain step — "
           "FLOPs, memory-bound ops at 64 an element)\n");
    printf("%-18s %8s %8s %8s %8s %8s %8s %9s %8s %8s %9s", "strategy", "PARAM", "GRAD", "OPTIM", "SAVED", "TEMP",
           "DATA", "total", "act.sav", "step.sav", "recomp");
    if (measure && !rc) printf(" %9s %8s %9s %8s", "measured", "meas/pr", "step s", "overhead");
    printf("\n");
    for (int k = 0; k < n; k++) {
        const rt_memstats *s = &rows[k].p.predicted;
        printf("%-18.18s", rows[k].name);
        for (int c = 0; c < RT_MEM_NCAT; c++) printf(" %8.1f", (double)s->peak[c] / mib);
        printf(" %9.1f %7.1f%% %7.1f%% %8.1f%%", (double)s->peak_total / mib,
               100.0 * (1.0 - (double)(s->peak_total - base) / act_plain),
               100.0 * (1.0 - (double)s->peak_total / (double)pl->peak_total), 100.0 * rows[k].p.recompute_fraction);
        if (measure && !rc) {
            double t = median_of(rows[k].times, rows[k].n_times);
            printf(" %9.1f %8.3f %9.3f %7.1f%%", (double)rows[k].measured / mib,
                   (double)rows[k].measured / (double)s->peak_total, t, 100.0 * (t / plain_time - 1.0));
        }
        printf("\n");
    }
    for (int k = 0; k < n; k++) {
        char d[160];
        cli_ckpt_describe(&rows[k].p.plan, d, sizeof d);
        printf("  %-16s %s\n", rows[k].name, d);
    }
    for (int k = 0; k < n; k++) {
        char note[256];
        if (cli_ckpt_mode_short(&rows[k].mc, &rows[k].p, note, sizeof note)) printf("note: %s\n", note);
        rt_memory_plan_free(&rows[k].p);
    }
    if (requested >= 0) printf("*: the strategy of the options given, as train plans it\n");
    if (measure && !rc)
        printf("measured: the tracked peak of a real step; step s: median of %d timed step(s) per strategy, strategies "
               "alternating on one model (after a warm-up round; each turn one untimed step first, which refills the "
               "allocator's cache for that plan); overhead vs plain's median. Other "
               "processes on this machine may load it: compare ratios, not absolute times.%s\n",
               measure_rounds,
               measure_rounds < 3 ? " With fewer than 3 timed steps a row the overheads are mostly noise: pass "
                                    "--measure-rounds 3 or more to compare plans by time." : "");
    return rc;
}
