/* `revtorch memory`: predicts the memory of one training step on meta
 * tensors (nothing is computed), for a model, batch and strategy. */
#include <stdlib.h>
#include <string.h>

#include "checkpointing.h"
#include "cli.h"
#include "common.h"
#include "kernels/threads.h"
#include "outputs.h"
#include "train/seg_loss.h"

/* A failed prediction: on a segmentation model a shape error is an input
 * too small for it (a U-Net's levels halve the volume; at --size 8 the
 * deepest has one voxel, where group norm has nothing to normalise), a
 * usage error naming --size; anything else as cli_fail (a classifier's
 * shape errors have other causes, e.g. batch norm on a batch of 1). */
static int memory_predict_failed(const char *model, const char *size_arg) {
    if (rt_error_last_status() != RT_ERR_SHAPE || !rt_model_name_is_segmentation(model))
        return cli_fail("prediction");
    fprintf(stderr, "revtorch memory: %s — the input is too small for this model%s%s%s: give a larger --size\n",
            rt_error_last(), size_arg ? " (--size " : "", size_arg ? size_arg : "", size_arg ? ")" : "");
    return 2;
}

static void memory_usage(FILE *f) {
    fprintf(f, "usage: revtorch memory [options]\n"
               "Predicts the bytes of one training step (forward, cross-entropy, backward) per category\n"
               "by running it on meta tensors, which have shapes but no data: instant, and exact.\n\n"
               "  --model NAME       (default revnet_small, as revtorch train)\n"
               "  --batch-size N     (or --batch; default 128, 2 for segmentation models)\n"
               "  --size S|H,W|D,H,W input size: classifiers S (square) or H,W (default 28, Fashion-MNIST);\n"
               "                     segmentation models (unet3d, prunet3d, ..._brats) S (cube) or D,H,W (default\n"
               "                     128), with i32 labels per voxel and the Dice + cross-entropy loss\n"
               "  --channels C       input channels (default 1; 4 for segmentation models, BraTS' modalities)\n"
               "  --memory MODE      reversible or standard (default: both, side by side); not with the\n"
               "                     checkpointing options below, whose plan decides which stages rebuild\n"
               "  --grouping G       full, auto or K (default full)\n"
               "  --optimizer sgd|adamw  as revtorch train (default sgd; its state is part of the step)\n"
               "  --momentum X       SGD momentum (default 0.9; 0: plain SGD, no state)\n"
               "  --accum-steps K    micro-batches per step, as revtorch train (default 1)\n"
               "  --classes K        outputs of the model (default 10, Fashion-MNIST; 4 for segmentation models:\n"
               "                     background and BraTS' 3 tumour labels)\n"
               "  --threads N        (default: all cores; oneDNN's scratchpads depend on it)\n"
               "  --by-module        per module of the tree (one memory mode: --memory, else reversible where\n"
               "                     the model has it): the activations it keeps for backward (SAVED at the end\n"
               "                     of forward) and its transient peak (the most TEMP bytes above what was live\n"
               "                     when it began, in its forward or its backward), from the meta run's trace;\n"
               "                     the plain step only: not with the options of the checkpointing rows below\n");
    cli_conv_algo_help(f, 21);
    cli_weight_cache_help(f, 21);
    cli_weight_layout_help(f, 21);
    fprintf(f, "Checkpointing rows (after the table above: plain, selective, 2/4/8 segments, each mode, and a\n"
               "row marked * for the --memory-mode, --memory-budget, --checkpoint-segments or --recompute given,\n"
               "planned as train and segment train plan them; for the U-Nets the stages are the levels and the\n"
               "skips are charged to the stages they span), planned on meta; --measure runs real steps of each\n"
               "and adds the measured peak and the step-time overhead:\n"
               "  --memory-budget SIZE  add the row of the plan for this budget (e.g. 1.5GiB, 600MiB)\n"
               "  --measure          measure every row on real steps (3 per row, alternating; takes a while)\n"
               "  --measure-rounds N as --measure with N timed steps per row (1..16; more for a noisy machine)\n"
               "  --memory-timeline F.csv  one step of the * row's plan (else balanced) as CSV and F.png, and\n"
               "                     F.combined.png: plain, 4 segments and that plan side by side; the paths are\n"
               "                     checked before any work, and the three files replaced only once all are written\n");
    cli_precision_help(f, 21);
    fprintf(f,
               "Models without reversible parts show the standard row only.\n");
}

/* The batch --size describes: an image (h, w) or a volume (d, h, w). */
typedef struct mem_shape {
    bool volume;
    int64_t d, h, w;
} mem_shape;

/* --size: "S", "H,W" or "D,H,W" into v[0..*n-1]; false unless 1..3 positive
 * integers up to 10^5. */
static rt_status predict(const char *model, int64_t channels, int64_t classes, const cli_strategy *strategy,
                         const rt_optimizer_spec *spec, const rt_train_config *cfg, int64_t batch, const mem_shape *s,
                         rt_memstats *p) {
    if (!s->volume) return cli_predict_memory(model, channels, classes, strategy, spec, cfg, batch, s->h, s->w, p);
    const int64_t size[3] = {s->d, s->h, s->w};
    return cli_predict_memory_volume(model, channels, classes, strategy, spec, cfg, batch, size, p);
}

/* One module of the tree and what the trace says of it. */
typedef struct by_module_row {
    const char *path; /* as the trace names it: the dotted path, the root's type for the root */
    const char *type;
    int depth;
    double saved, transient; /* bytes */
} by_module_row;

typedef struct by_module_list {
    by_module_row *rows;
    int n, cap;
    const char *root_type;
} by_module_list;

static rt_status by_module_collect(rt_module *m, const char *path, void *user) {
    by_module_list *l = user;
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 64;
        by_module_row *r = realloc(l->rows, (size_t)cap * sizeof *r);
        if (!r) return rt_error_set(RT_ERR_OOM, "out of memory listing modules");
        l->rows = r;
        l->cap = cap;
    }
    int depth = path[0] ? 1 : 0;
    for (const char *c = path; *c; c++) depth += *c == '.';
    const char *p = path[0] ? rt_mem_intern(path) : rt_mem_intern(m->cls->type);
    if (!p) return rt_error_set(RT_ERR_OOM, "out of memory listing modules");
    l->rows[l->n++] = (by_module_row){.path = p, .type = m->cls->type, .depth = depth};
    return RT_OK;
}

/* True when an event recorded in module `ev_module` ran inside `row` (the
 * module itself or a descendant; the root holds every module but "-",
 * outside the model, and "backward", nodes made outside any module). */
static bool by_module_inside(const by_module_row *row, bool root, const char *ev_module) {
    if (root) return strcmp(ev_module, "-") && strcmp(ev_module, "backward");
    size_t n = strlen(row->path);
    return !strncmp(ev_module, row->path, n) && (ev_module[n] == '\0' || ev_module[n] == '.');
}

/* The per-module table of `revtorch memory --by-module`: a meta run with the
 * trace on, its events summed per module path in tree order. */
static int print_by_module(const char *model, int64_t channels, int64_t classes, const cli_strategy *strategy,
                           const rt_optimizer_spec *spec, const rt_train_config *cfg, int64_t batch,
                           const mem_shape *size) {
    rt_model *m = NULL;
    if (rt_model_create(model, channels, classes, RT_DEVICE_META, 0, &m) != RT_OK) return cli_fail("model");
    cli_strategy_apply(strategy, m);
    by_module_list l = {0};
    rt_status st = rt_module_visit(m->net, by_module_collect, &l);
    rt_model_destroy(m);
    rt_memstats p;
    if (st == RT_OK) {
        rt_mem_trace_enable(1);
        st = predict(model, channels, classes, strategy, spec, cfg, batch, size, &p);
    }
    size_t n = 0;
    const rt_mem_event *ev = rt_mem_trace_events(&n);
    size_t bwd = n; /* the first event of backward */
    for (size_t i = 0; i < n; i++)
        if (ev[i].op && !strncmp(ev[i].op, "backward:", 9)) {
            bwd = i;
            break;
        }
    for (int r = 0; st == RT_OK && r < l.n; r++) {
        by_module_row *row = &l.rows[r];
        int64_t temp = 0, base = 0, saved = 0, best = 0;
        bool in = false;
        for (size_t i = 0; i < n; i++) {
            bool now = by_module_inside(row, r == 0, ev[i].module);
            if (now && !in) base = temp; /* a run of this module's events begins */
            in = now;
            if (ev[i].category == RT_MEM_TEMP) temp += ev[i].delta_bytes;
            if (!now) continue;
            if (temp - base > best) best = temp - base;
            if (i < bwd && ev[i].category == RT_MEM_SAVED) saved += ev[i].delta_bytes;
        }
        row->saved = (double)saved;
        row->transient = (double)best;
    }
    rt_mem_trace_enable(0);
    if (st != RT_OK) {
        free(l.rows);
        return memory_predict_failed(model, NULL);
    }
    printf("per module, one training step of %s (memory %s, batch %lld, meta run; MiB):\n", model,
           strategy->reversible && rt_model_name_has_reversible(model) ? "reversible" : "standard", (long long)batch);
    printf("%-32s %-22s %12s %15s\n", "module", "type", "saved", "transient peak");
    for (int r = 0; r < l.n; r++) {
        char name[160];
        snprintf(name, sizeof name, "%*s%s", 2 * l.rows[r].depth, "", l.rows[r].path);
        printf("%-32s %-22s %12.2f %15.2f\n", name, l.rows[r].type, l.rows[r].saved / 1048576.0,
               l.rows[r].transient / 1048576.0);
    }
    printf("saved: activations booked SAVED in the module's forward and still held when backward begins (for\n"
           "the root: all of them); transient peak: the most TEMP bytes above those live when the module began,\n"
           "over its forward and its backward (reversible blocks rebuild and keep activations there).\n");
    printf("step peak per category: SAVED %.2f, TEMP %.2f, total %.2f\n", (double)p.peak[RT_MEM_SAVED] / 1048576.0,
           (double)p.peak[RT_MEM_TEMP] / 1048576.0, (double)p.peak_total / 1048576.0);
    free(l.rows);
    return 0;
}

static void print_row(const char *model, const char *mode, int64_t params, const rt_memstats *p) {
    printf("%-12s %-11s %10lld", model, mode, (long long)params);
    for (int c = 0; c < RT_MEM_NCAT; c++) printf(" %9.1f", (double)p->peak[c] / 1048576.0);
    printf(" %9.1f\n", (double)p->peak_total / 1048576.0);
}

/* The options given that only the checkpointing rows use (the four
 * planning options, --measure, --measure-rounds, --memory-timeline), each
 * once, in the order typed. */
typedef struct plan_opts {
    const char *name[8];
    int n;
} plan_opts;

static void plan_opts_add(plan_opts *p, const char *name) {
    for (int k = 0; k < p->n; k++)
        if (!strcmp(p->name[k], name)) return;
    if (p->n < 8) p->name[p->n++] = name;
}

/* "--memory-budget", "--measure and --memory-timeline", "A, B and C". */
static void plan_opts_list(const plan_opts *p, char *buf, size_t n) {
    size_t used = 0;
    buf[0] = '\0';
    for (int k = 0; k < p->n && used < n; k++)
        used += (size_t)snprintf(buf + used, n - used, "%s%s", k == 0 ? "" : k == p->n - 1 ? " and " : ", ",
                                 p->name[k]);
}

/* --memory-timeline F.csv: F.csv, F.png and F.combined.png checked (as
 * train checks its outputs: names, types, symlinks, collisions) and locked
 * before any work. Returns 0, or the exit code with the message printed. */
static int timeline_outputs(const char *csv, cli_outputs *outs) {
    const char *opt = "--memory-timeline";
    char png[CLI_PATH_MAX], combined[CLI_PATH_MAX];
    if (!cli_csv_name_ok(outs->command, opt, csv)) return 2;
    cli_derived_path(csv, ".csv", ".png", png, sizeof png);
    cli_derived_path(csv, ".csv", ".combined.png", combined, sizeof combined);
    /* a path the file system refuses (no such directory, a directory in
     * the file's place) is found on the file system: a runtime failure, as
     * train's outputs (README, exit status) */
    if (!cli_outputs_add(outs, opt, csv, NULL, false) || !cli_outputs_add(outs, opt, png, csv, false) ||
        !cli_outputs_add(outs, opt, combined, csv, false))
        return 1;
    int rc = cli_outputs_check_distinct(outs);
    if (rc) return rc;
    return cli_outputs_lock(outs) ? 1 : 0;
}

int cli_cmd_memory(int argc, char **argv) {
    const char *model = "revnet_small", *memory = NULL, *grouping = "full";
    const char *optimizer = "sgd";
    /* 0: not given, the model kind's default (the options refuse 0) */
    int64_t batch = 0, channels = 0, threads = 0, accum = 1, classes = 0;
    const char *size_arg = NULL;
    float momentum = 0.9f;
    bool by_module = false;
    int64_t measure = 0; /* rounds of real steps; 0: none */
    cli_ckpt_args ck = {0};
    const char *timeline = NULL;
    plan_opts plan = {.n = 0};
    for (int i = 1; i < argc; i++) {
        bool ok = true;
        const char *opt = argv[i];
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            memory_usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--model")) ok = cli_str(argc, argv, &i, &model);
        else if (!strcmp(argv[i], "--memory")) ok = cli_str(argc, argv, &i, &memory);
        else if (!strcmp(argv[i], "--grouping")) ok = cli_str(argc, argv, &i, &grouping);
        else if (!strcmp(argv[i], "--batch-size") || !strcmp(argv[i], "--batch"))
            ok = cli_int_in(argc, argv, &i, 1, 1000000, NULL, &batch);
        else if (!strcmp(argv[i], "--size")) ok = cli_str(argc, argv, &i, &size_arg);
        else if (!strcmp(argv[i], "--channels")) ok = cli_int_in(argc, argv, &i, 1, 100000, NULL, &channels);
        else if (!strcmp(argv[i], "--threads")) ok = cli_int(argc, argv, &i, &threads);
        else if (!strcmp(argv[i], "--optimizer")) ok = cli_str(argc, argv, &i, &optimizer);
        else if (!strcmp(argv[i], "--momentum"))
            ok = cli_float_in(argc, argv, &i, 0, 1, true, "(SGD momentum; at 1 or more the steps grow without bound)",
                              &momentum);
        else if (!strcmp(argv[i], "--accum-steps")) ok = cli_int_in(argc, argv, &i, 1, 1000000, NULL, &accum);
        else if (!strcmp(argv[i], "--classes")) ok = cli_int_in(argc, argv, &i, 1, 1000000, NULL, &classes);
        else if (!strcmp(argv[i], "--conv-algo")) ok = cli_conv_algo(argc, argv, &i);
        else if (!strcmp(argv[i], "--weight-cache")) ok = cli_weight_cache(argc, argv, &i);
        else if (!strcmp(argv[i], "--weight-layout")) ok = cli_weight_layout(argc, argv, &i);
        else if (!strcmp(argv[i], "--precision")) ok = cli_precision_arg(argc, argv, &i);
        else if (!strcmp(argv[i], "--by-module")) by_module = true;
        else if (!strcmp(argv[i], "--measure")) measure = measure ? measure : 3, plan_opts_add(&plan, opt);
        else if (!strcmp(argv[i], "--measure-rounds")) {
            plan_opts_add(&plan, opt);
            /* checked here, not after the loop: 0 is also what "no --measure" leaves in `measure` */
            ok = cli_int(argc, argv, &i, &measure);
            if (ok && (measure < 1 || measure > 16)) {
                fprintf(stderr, "revtorch memory: --measure-rounds %lld is out of range; give 1..16 timed steps per "
                                "row\n", (long long)measure);
                return 2;
            }
        }
        else if (!strcmp(argv[i], "--memory-timeline")) ok = cli_str(argc, argv, &i, &timeline), plan_opts_add(&plan, opt);
        else if (cli_ckpt_option(argc, argv, &i, &ck, &ok)) plan_opts_add(&plan, opt);
        else {
            fprintf(stderr, "revtorch memory: unknown option '%s' (see revtorch memory --help)\n", argv[i]);
            return 2;
        }
        if (!ok) return 2;
    }
    /* Options that would change nothing are refused rather than ignored:
     * a user who asks for a budget's plan and gets none thinks it was made. */
    char given[160];
    plan_opts_list(&plan, given, sizeof given);
    if (by_module && plan.n) {
        fprintf(stderr, "revtorch memory: --by-module is the plain per-module table of one step, without "
                        "checkpointing rows; %s appl%s to those rows only: drop %s, or drop --by-module to get the "
                        "rows\n", given, plan.n == 1 ? "ies" : "y", plan.n == 1 ? "it" : "them");
        return 2;
    }
    rt_memory_config ck_config;
    if (cli_ckpt_given(&ck) && !cli_ckpt_config("memory", &ck, &ck_config)) return 2;
    /* the starred row is the plan train makes of these options, and train
     * refuses --memory beside them (the planner decides which reversible
     * stages rebuild): so is it here, rather than ignored for that row */
    if (!cli_ckpt_memory_ok("memory", &ck, memory != NULL)) return 2;
    cli_strategy strategy;
    if (!cli_memory_mode(memory ? memory : "reversible", grouping, &strategy)) return 2;
    bool grouping_given = false;
    for (int i = 1; i < argc; i++) grouping_given |= !strcmp(argv[i], "--grouping");
    if (!cli_model_known("memory", model) ||
        !cli_strategy_fits_model("memory", model, memory && strategy.reversible, grouping_given))
        return 2;
    /* segmentation models: volumes, BraTS-like defaults (4 modalities, 4 labels, 128³, batch 2) */
    bool seg = rt_model_name_is_segmentation(model);
    mem_shape shape = {.volume = seg};
    int64_t sz[3];
    int nsz = 1;
    sz[0] = seg ? 128 : 28;
    if (size_arg && (!cli_parse_dims(size_arg, sz, &nsz) || (seg ? nsz == 2 : nsz == 3))) {
        fprintf(stderr, "revtorch memory: --size '%s' is malformed or out of range; give %s, each 1..10^5\n",
                size_arg,
                seg ? "S (a cube) or D,H,W for a segmentation model" : "S (a square) or H,W for an image classifier");
        return 2;
    }
    shape.d = sz[0];
    shape.h = nsz == 1 ? sz[0] : sz[nsz - 2];
    shape.w = sz[nsz - 1];
    const bool batch_given = batch != 0;
    if (!batch) batch = seg ? 2 : 128;
    if (!channels) channels = seg ? 4 : 1;
    if (!classes) classes = seg ? 4 : 10;
    rt_optimizer_spec spec;
    if (!cli_optimizer_spec(optimizer, 0.1f, momentum, 5e-4f, &spec)) return 2;
    if (accum > batch) { /* the ranges were checked as the options were read; this bound is the batch */
        fprintf(stderr, "revtorch memory: --accum-steps %lld is more than %s--batch-size %lld%s (each micro-batch "
                        "needs a sample); use 1 to %lld%s\n", (long long)accum, batch_given ? "" : "the default ",
                (long long)batch, batch_given || !seg ? "" : " of segmentation models", (long long)batch,
                batch_given ? "" : " or give a larger --batch-size");
        return 2;
    }
    const rt_train_config cfg = {.accum_steps = accum};
    if (!cli_threads_ok(threads)) return 2;
    rt_set_num_threads((int)threads);
    if (by_module) {
        cli_strategy s = strategy;
        if (!memory) s.reversible = rt_model_name_has_reversible(model);
        return print_by_module(model, channels, classes, &s, &spec, &cfg, batch, &shape);
    }
    cli_outputs outs;
    cli_outputs_init(&outs, "revtorch memory");
    if (timeline) {
        int rc = timeline_outputs(timeline, &outs);
        if (rc) {
            cli_outputs_release(&outs);
            return rc;
        }
        cli_outputs_unlock_on_signal(&outs); /* a Ctrl-C during --measure leaves no lock files */
    }
    rt_model *m = NULL;
    if (rt_model_create(model, channels, classes, RT_DEVICE_META, 0, &m) != RT_OK) {
        cli_outputs_release(&outs);
        return cli_fail("model");
    }
    int64_t params = rt_state_dict_num_param_elements(m->sd);
    rt_model_destroy(m);
    char dims[64];
    if (seg)
        snprintf(dims, sizeof dims, "%lld×%lld×%lld", (long long)shape.d, (long long)shape.h, (long long)shape.w);
    else
        snprintf(dims, sizeof dims, "%lld×%lld", (long long)shape.h, (long long)shape.w);
    printf("one training step of %s, batch %lld×%lld×%s%s in %lld micro-batch%s, %s, precision %s, peak MiB "
           "per category (meta run):\n", model, (long long)batch, (long long)channels, dims,
           seg ? " (Dice + cross-entropy)" : "", (long long)accum, accum == 1 ? "" : "es", cli_optimizer_label(&spec),
           rt_precision_str(cli_precision()));
    printf("%-12s %-11s %10s", "model", "memory", "params");
    for (int c = 0; c < RT_MEM_NCAT; c++) printf(" %9s", rt_mem_category_str((rt_mem_category)c));
    printf(" %9s\n", "total");
    bool has_reversible = rt_model_name_has_reversible(model);
    for (int pass = 0; pass < 2; pass++) {
        bool r = pass == 0;
        /* --memory reversible on a model without reversible parts: its
         * standard row is what a reversible run would do */
        if ((memory && has_reversible && r != strategy.reversible) || (r && !has_reversible)) continue;
        rt_memstats p;
        cli_strategy row = strategy;
        row.reversible = r;
        if (predict(model, channels, classes, &row, &spec, &cfg, batch, &shape, &p) != RT_OK) {
            cli_outputs_release(&outs);
            return memory_predict_failed(model, size_arg);
        }
        print_row(model, r ? "reversible" : "standard", params, &p);
    }
    cli_strategy plans_strategy = strategy;
    plans_strategy.reversible = false; /* the planner decides which reversible stages rebuild */
    cli_batch_shape bs = {.x_ndim = 4, .y_ndim = 1, .xs = {batch, channels, shape.h, shape.w}, .ys = {batch}};
    rt_train_config plans_cfg = cfg;
    if (seg) { /* volumes with voxel labels, and the loss `revtorch segment` trains with */
        bs = (cli_batch_shape){.x_ndim = 5, .y_ndim = 4, .xs = {batch, channels, shape.d, shape.h, shape.w},
                               .ys = {batch, shape.d, shape.h, shape.w}};
        plans_cfg.loss = rt_loss_dice_ce;
    }
    int rc = cli_memory_plans(model, channels, classes, &plans_strategy, &spec, &plans_cfg, &bs, &ck, (int)measure,
                              timeline ? &outs : NULL);
    cli_outputs_release(&outs);
    return rc;
}
