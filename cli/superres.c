/* `revtorch superres train|eval|memory`: ×2 single-image super-resolution of
 * MRI slices with EDSR (Lim et al. 2017) and its reversible variant. The
 * default task is the 0.5 mm Colin27 brain of Debian's mricron-data: trained
 * on random patches of the lower axial slices, evaluated on held-out upper
 * slices against bicubic upsampling (data/superres.h, train/sr_metric.h).
 * This file: the options, --help and the dispatch to the subcommands
 * (superres_train.c, superres_eval.c, superres_memory.c; what they share is
 * declared in superres_internal.h). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "common.h"
#include "kernels/threads.h"
#include "superres_internal.h"

static void sr_usage(FILE *f) {
    fprintf(f,
            "usage: revtorch superres train|eval|memory [options]\n"
            "x2 super-resolution of MRI slices with EDSR (Lim et al. 2017) or reversible EDSR. Default task\n"
            "(no options): the 0.5 mm Colin27 brain %s (mricron-data); the\n"
            "target is an axial slice, the input its 2x2 block mean (a voxel twice as large in-plane);\n"
            "intensities / the 99.9th percentile of the positive voxels, clipped to [0, 1]; trained on random\n"
            "patches of the axial slices below the held-out top slab, evaluated on slices of that slab.\n\n"
            "  train    train; writes OUT/weights.safetensors, OUT/train.csv (per step: loss, seconds), then\n"
            "           evaluates as eval does\n"
            "  eval     --weights FILE: PSNR and SSIM (border of `scale` pixels cut, data range 1) of the model\n"
            "           and of bicubic upsampling on the held-out slices; writes OUT/eval.csv, OUT/eval.json\n"
            "           and OUT/comparison.png (LR, bicubic, model, target on the middle evaluated slice).\n"
            "           The model's shape (--model, --blocks, --feats, --rev-width, --rev-hidden, --scale,\n"
            "           --res-scale) comes from the weights file; giving one that differs is a usage error\n"
            "  memory   predicted bytes of one training step (meta device: nothing runs) of edsr and revedsr\n"
            "           at --batch, and the largest revedsr batch that fits in edsr's step peak at --ref-batch\n\n"
            "  --image FILE          volume (NIfTI; default %s)\n"
            "  --model edsr|revedsr  EDSR, or EDSR whose residual body is reversible (default edsr)\n"
            "  --blocks N            residual blocks (default 16, EDSR's baseline)\n"
            "  --feats N             features (default 64)\n"
            "  --rev-width W         revedsr: the reversible stream's channels, feats x 1..4 (default feats;\n"
            "                        2*feats with --blocks 8 gives couplings whose F and G are EDSR's blocks)\n"
            "  --rev-hidden N        revedsr: channels inside each coupling's F and G (default feats)\n"
            "  --rev-blocks N        memory: revedsr's couplings, against edsr's --blocks (default --blocks)\n"
            "  --res-scale X         residual scaling (default 0.1, EDSR's)\n"
            "  --scale S             upscaling factor 2, 3 or 4 (default 2)\n"
            "  --batch N             patches per step (default 16, EDSR's)\n"
            "  --patch N             LR patch side (default 48, EDSR's; the target is N*scale)\n"
            "  --steps N             training steps (default 1000)\n"
            "  --time-limit S        also stop training after S seconds (default 0: no limit)\n"
            "  --lr X                Adam learning rate (default 1e-4, EDSR's)\n"
            "  --lr-schedule S       constant (default), or cosine: annealed to 0 over --steps (PyTorch's\n"
            "                        CosineAnnealingLR, T_max = steps), so a run ends at a settled point\n"
            "  --holdout F           top fraction of the axial slices held out (default 0.3)\n"
            "  --gap N               slices between the training and held-out parts (default 8)\n"
            "  --eval-slices N       held-out slices evaluated, evenly spaced among those with >= 10%% of\n"
            "                        voxels above 0.05 (default 8, at most %d)\n"
            "  --percentile P        robust maximum of the normalisation (default 99.9)\n"
            "  --min-foreground F    a training patch with a smaller fraction of voxels above 0.05 is drawn\n"
            "                        again (default 0.1; 0 keeps background patches)\n"
            "  --ref-batch N         memory: edsr's batch whose step peak is the budget (default 2)\n"
            "  --max-batch N         memory: largest batch tried (default 256)\n"
            "  --seed N              initialisation and sampling seed (default 0)\n"
            "  --out DIR             output directory (default superres-out; created)\n"
            "  --weights FILE        train: where to save (default OUT/weights.safetensors); eval: required\n"
            "  --threads N           threads (default: all cores)\n"
            "  --memory M            reversible (default): revedsr's body rebuilds its activations in backward;\n"
            "                        standard: the same network keeps them (ordinary backpropagation)\n",
            SR_DEFAULT_IMAGE, SR_DEFAULT_IMAGE, SR_MAX_EVAL);
    cli_conv_algo_help(f, 24);
    fprintf(f, "Exit status: 0 done, 1 runtime failure (files, data, training), 2 usage error (nothing was run).\n");
}

static int sr_parse(int argc, char **argv, cli_sr_opts *o) {
    *o = (cli_sr_opts){.cmd = argv[0], .image = SR_DEFAULT_IMAGE, .model = "edsr", .out = "superres-out",
                   .blocks = 16, .feats = 64, .scale = 2, .batch = 16, .patch = 48, .steps = 1000, .eval_slices = 8,
                   .gap = 8, .ref_batch = 2, .max_batch = 256, .res_scale = 0.1f, .lr = 1e-4f, .holdout = 0.3f,
                   .percentile = 99.9f, .min_foreground = 0.1f, .memory = "reversible"};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool ok = true;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            sr_usage(stdout);
            return 0;
        } else if (!strcmp(a, "--image")) ok = cli_str(argc, argv, &i, &o->image);
        else if (!strcmp(a, "--model")) ok = cli_str(argc, argv, &i, &o->model), o->model_given = true;
        else if (!strcmp(a, "--out")) ok = cli_str(argc, argv, &i, &o->out);
        else if (!strcmp(a, "--weights")) ok = cli_str(argc, argv, &i, &o->weights);
        else if (!strcmp(a, "--blocks")) o->blocks_given = true, ok = cli_int_in(argc, argv, &i, 1, 1024, NULL, &o->blocks);
        else if (!strcmp(a, "--feats")) o->feats_given = true, ok = cli_int_in(argc, argv, &i, 1, 4096, NULL, &o->feats);
        else if (!strcmp(a, "--rev-blocks")) o->rev_blocks_given = true, ok = cli_int_in(argc, argv, &i, 1, 1024, NULL, &o->rev_blocks);
        else if (!strcmp(a, "--rev-width")) o->rev_width_given = true, ok = cli_int_in(argc, argv, &i, 1, 16384, NULL, &o->rev_width);
        else if (!strcmp(a, "--rev-hidden")) o->rev_hidden_given = true, ok = cli_int_in(argc, argv, &i, 1, 16384, NULL, &o->rev_hidden);
        else if (!strcmp(a, "--scale")) o->scale_given = true, ok = cli_int_in(argc, argv, &i, 2, 4, NULL, &o->scale);
        else if (!strcmp(a, "--batch")) ok = cli_int_in(argc, argv, &i, 1, 4096, NULL, &o->batch);
        else if (!strcmp(a, "--patch")) ok = cli_int_in(argc, argv, &i, 4, 4096, NULL, &o->patch);
        else if (!strcmp(a, "--steps")) ok = cli_int_in(argc, argv, &i, 1, INT32_MAX, NULL, &o->steps);
        else if (!strcmp(a, "--eval-slices")) ok = cli_int_in(argc, argv, &i, 1, SR_MAX_EVAL, NULL, &o->eval_slices);
        else if (!strcmp(a, "--gap")) ok = cli_int_in(argc, argv, &i, 0, 4096, NULL, &o->gap);
        else if (!strcmp(a, "--ref-batch")) ok = cli_int_in(argc, argv, &i, 1, 4096, NULL, &o->ref_batch);
        else if (!strcmp(a, "--max-batch")) ok = cli_int_in(argc, argv, &i, 1, 4096, NULL, &o->max_batch);
        else if (!strcmp(a, "--seed")) ok = cli_int(argc, argv, &i, &o->seed);
        else if (!strcmp(a, "--threads")) ok = cli_int(argc, argv, &i, &o->threads);
        else if (!strcmp(a, "--conv-algo")) ok = cli_conv_algo(argc, argv, &i);
        else if (!strcmp(a, "--memory")) {
            ok = cli_str(argc, argv, &i, &o->memory);
            if (ok && strcmp(o->memory, "reversible") && strcmp(o->memory, "standard")) {
                fprintf(stderr, "revtorch superres %s: --memory must be reversible or standard, got '%s'\n", o->cmd,
                        o->memory);
                ok = false;
            }
        }
        else if (!strcmp(a, "--res-scale")) o->res_scale_given = true, ok = cli_float_in(argc, argv, &i, 0, INFINITY, false, NULL, &o->res_scale);
        else if (!strcmp(a, "--lr")) ok = cli_float_in(argc, argv, &i, 0, INFINITY, false, NULL, &o->lr);
        else if (!strcmp(a, "--lr-schedule")) {
            const char *v = NULL;
            ok = cli_str(argc, argv, &i, &v);
            if (ok && strcmp(v, "constant") && strcmp(v, "cosine")) {
                fprintf(stderr, "revtorch superres %s: --lr-schedule must be constant or cosine, got '%s'\n", o->cmd, v);
                ok = false;
            }
            if (ok) o->cosine = !strcmp(v, "cosine");
        }
        else if (!strcmp(a, "--holdout")) {
            ok = cli_float(argc, argv, &i, &o->holdout);
            if (ok && !(o->holdout > 0.0f && o->holdout < 1.0f)) {
                fprintf(stderr, "revtorch: option --holdout must be in (0, 1) (fraction of the axial slices held out; "
                                "some must be), got %s\n", argv[i]);
                ok = false;
            }
        }
        else if (!strcmp(a, "--percentile")) ok = cli_float_in(argc, argv, &i, 1, 100, false, NULL, &o->percentile);
        else if (!strcmp(a, "--min-foreground"))
            ok = cli_float_in(argc, argv, &i, 0, 1, false, NULL, &o->min_foreground);
        else if (!strcmp(a, "--time-limit"))
            ok = cli_float_in(argc, argv, &i, 0, INFINITY, false, "(seconds; 0: none)", &o->time_limit);
        else {
            fprintf(stderr, "revtorch superres %s: unknown option '%s' (see revtorch superres --help)\n", o->cmd, a);
            return 2;
        }
        if (!ok) return 2;
    }
    if (strcmp(o->model, "edsr") && strcmp(o->model, "revedsr")) {
        fprintf(stderr, "revtorch superres %s: --model must be edsr or revedsr, got '%s'\n", o->cmd, o->model);
        return 2;
    }
    /* reversible EDSR's couplings split the features in halves; memory builds revedsr whatever --model */
    if (o->feats % 2 && (!strcmp(o->cmd, "memory") || (!strcmp(o->cmd, "train") && !strcmp(o->model, "revedsr")))) {
        fprintf(stderr, "revtorch superres %s: --feats must be even for --model revedsr (its couplings split the "
                        "features in halves), got %lld\n", o->cmd, (long long)o->feats);
        return 2;
    }
    if (o->rev_width && strcmp(o->cmd, "eval") && !cli_sr_rev_width_valid(o->feats, o->rev_width)) {
        fprintf(stderr, "revtorch superres %s: --rev-width must be --feats (%lld) times 1 to %d (the stream starts as "
                        "copies of the head's features), got %lld\n", o->cmd, (long long)o->feats,
                RT_EDSR_MAX_WIDTH_FACTOR, (long long)o->rev_width);
        return 2;
    }
    if (o->rev_blocks_given && strcmp(o->cmd, "memory")) {
        fprintf(stderr, "revtorch superres %s: --rev-blocks sets revedsr's depth in `superres memory` only; to train "
                        "or evaluate reversible EDSR give --model revedsr --blocks N\n", o->cmd);
        return 2;
    }
    if ((o->rev_width || o->rev_hidden) && !strcmp(o->cmd, "train") && strcmp(o->model, "revedsr")) {
        fprintf(stderr, "revtorch superres train: --rev-width and --rev-hidden shape reversible EDSR's couplings; "
                        "add --model revedsr\n");
        return 2;
    }
    if (!cli_threads_ok(o->threads)) return 2;
    if (!strcmp(o->cmd, "eval") && !o->weights) {
        fprintf(stderr, "revtorch superres eval: --weights FILE is required (the file `revtorch superres train` "
                        "saved)\n");
        return 2;
    }
    return -1;
}

int cli_cmd_superres(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        sr_usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    const char *sub = argv[1];
    if (strcmp(sub, "train") && strcmp(sub, "eval") && strcmp(sub, "memory")) {
        fprintf(stderr, "revtorch superres: unknown subcommand '%s' (train, eval or memory)\n", sub);
        return 2;
    }
    cli_sr_opts o;
    int rc = sr_parse(argc - 1, argv + 1, &o);
    if (rc >= 0) return rc;
    rt_set_num_threads((int)o.threads);
    if (!strcmp(sub, "train")) return cli_sr_train(&o);
    if (!strcmp(sub, "eval")) return cli_sr_eval(&o);
    return cli_sr_memory(&o);
}
