/* PNG charts (cli/plot.c, compiled into this test): line chart, memory
 * timeline and training curves are written, are PNGs of the documented size,
 * and failures leave neither a broken PNG nor a .tmp file behind.
 *
 * Files go to a fresh mkdtemp directory that is removed afterwards; set
 * RT_PLOT_OUT=DIR to write them into DIR instead and keep them (to look at). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../cli/plot.h"
#include "core/mem.h"
#include "rt_test.h"

static char dir_[512];
static int keep_;

static const char *out_dir(void) {
    if (!dir_[0]) {
        const char *env = getenv("RT_PLOT_OUT");
        if (env && *env) {
            snprintf(dir_, sizeof dir_, "%s", env);
            mkdir(dir_, 0755);
            keep_ = 1;
        } else {
            snprintf(dir_, sizeof dir_, "/tmp/rt_plot_XXXXXX");
            if (!mkdtemp(dir_)) {
                perror("mkdtemp");
                exit(1);
            }
        }
    }
    return dir_;
}

static void path_in(char *buf, size_t cap, const char *name) { snprintf(buf, cap, "%s/%s", out_dir(), name); }

static int exists(const char *p) {
    struct stat sb;
    return stat(p, &sb) == 0;
}

static int tmp_exists(const char *p) {
    char t[1024];
    snprintf(t, sizeof t, "%s.tmp", p);
    return exists(t);
}

/* 1 when p is a PNG whose IHDR says w x h. */
static int png_is(const char *p, uint32_t w, uint32_t h) {
    unsigned char b[24];
    FILE *f = fopen(p, "rb");
    if (!f) return 0;
    size_t got = fread(b, 1, sizeof b, f);
    fclose(f);
    static const unsigned char sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    if (got != sizeof b || memcmp(b, sig, 8) != 0 || memcmp(b + 12, "IHDR", 4) != 0) return 0;
    uint32_t pw = (uint32_t)b[16] << 24 | (uint32_t)b[17] << 16 | (uint32_t)b[18] << 8 | b[19];
    uint32_t ph = (uint32_t)b[20] << 24 | (uint32_t)b[21] << 16 | (uint32_t)b[22] << 8 | b[23];
    if (pw != w || ph != h) fprintf(stderr, "%s: %ux%u, expected %ux%u\n", p, pw, ph, w, h);
    return pw == w && ph == h;
}

static int write_text(const char *p, const char *text) {
    FILE *f = fopen(p, "w");
    if (!f) return 0;
    fputs(text, f);
    return fclose(f) == 0;
}

/* ------------------------------------------------------------------ line chart */

#define NPTS 200

static void test_lines(void) {
    static double x[NPTS], a[NPTS], b[NPTS], c[NPTS];
    for (int i = 0; i < NPTS; i++) {
        x[i] = i * 0.05;
        a[i] = sin(x[i]) * 3.0;
        b[i] = cos(x[i]) * 2.0 + 1.0;
        c[i] = exp(-x[i] / 4.0) * 4.0 - 2.0;
    }
    b[50] = NAN; /* skipped: the line breaks there */
    b[51] = INFINITY;
    rt_plot_series s[3] = {
        {.name = "3 sin(x)", .x = x, .y = a, .n = NPTS},
        {.name = "2 cos(x) + 1", .x = x, .y = b, .n = NPTS},
        {.name = "decay", .x = x, .y = c, .n = NPTS, .markers = true, .width = 1.0},
    };
    rt_plot p = {.title = "rt_plot_lines test", .x_label = "x (radians)", .y_label = "value", .series = s,
                 .n_series = 3};
    char png[600];
    path_in(png, sizeof png, "lines.png");
    CHECK_OK(rt_plot_lines(png, &p));
    CHECK(png_is(png, RT_PLOT_WIDTH, RT_PLOT_HEIGHT));
    CHECK(!tmp_exists(png));
    if (!keep_) unlink(png);
}

static void test_lines_errors(void) {
    double x[2] = {0, 1}, y[2] = {1, 2}, bad[2] = {NAN, INFINITY};
    rt_plot_series s = {.name = "s", .x = x, .y = y, .n = 2};
    rt_plot p = {.title = "t", .series = &s, .n_series = 1};
    char png[600];
    path_in(png, sizeof png, "err.png");

    /* an existing chart is untouched by a failing call */
    CHECK_OK(rt_plot_lines(png, &p));
    struct stat before;
    CHECK(stat(png, &before) == 0);

    rt_plot_series empty = {.name = "e", .x = x, .y = y, .n = 0};
    rt_plot pe = {.series = &empty, .n_series = 1};
    CHECK_EQ_INT(rt_plot_lines(png, &pe), RT_ERR_INVALID_ARG);
    CHECK(strstr(rt_error_last(), "empty") != NULL);
    rt_plot_series nan_only = {.name = "n", .x = x, .y = bad, .n = 2};
    rt_plot pn = {.series = &nan_only, .n_series = 1};
    CHECK_EQ_INT(rt_plot_lines(png, &pn), RT_ERR_INVALID_ARG);
    rt_plot pz = {.series = &s, .n_series = 0};
    CHECK_EQ_INT(rt_plot_lines(png, &pz), RT_ERR_INVALID_ARG);
    rt_plot_series many[RT_PLOT_MAX_SERIES + 1];
    for (int i = 0; i <= RT_PLOT_MAX_SERIES; i++) many[i] = s;
    rt_plot pm = {.series = many, .n_series = RT_PLOT_MAX_SERIES + 1};
    CHECK_EQ_INT(rt_plot_lines(png, &pm), RT_ERR_INVALID_ARG);
    rt_plot_series badcol = s;
    badcol.colour = RT_PLOT_MAX_SERIES + 1;
    rt_plot pc = {.series = &badcol, .n_series = 1};
    CHECK_EQ_INT(rt_plot_lines(png, &pc), RT_ERR_INVALID_ARG);
    CHECK_EQ_INT(rt_plot_lines(NULL, &p), RT_ERR_INVALID_ARG);
    CHECK_EQ_INT(rt_plot_lines(png, NULL), RT_ERR_INVALID_ARG);
    struct stat after;
    CHECK(stat(png, &after) == 0);
    CHECK_EQ_INT(after.st_size, before.st_size);
    CHECK(png_is(png, RT_PLOT_WIDTH, RT_PLOT_HEIGHT));

    /* unwritable directory: RT_ERR_IO naming the path, no .tmp */
    const char *nodir = "/nonexistent_rt_plot_dir/x.png";
    CHECK_EQ_INT(rt_plot_lines(nodir, &p), RT_ERR_IO);
    CHECK(strstr(rt_error_last(), "/nonexistent_rt_plot_dir/x.png") != NULL);
    CHECK(!tmp_exists(nodir));
    /* the .tmp can be written but the rename fails (target is a non-empty directory): the .tmp is removed */
    char sub[600], inner[700];
    path_in(sub, sizeof sub, "a_directory");
    mkdir(sub, 0755);
    snprintf(inner, sizeof inner, "%s/keep", sub);
    CHECK(write_text(inner, "x"));
    CHECK_EQ_INT(rt_plot_lines(sub, &p), RT_ERR_IO);
    CHECK(strstr(rt_error_last(), sub) != NULL);
    CHECK(!tmp_exists(sub));
    unlink(inner);
    rmdir(sub);
    if (!keep_) unlink(png);
}

/* ------------------------------------------------------------------ memory timeline */

typedef struct ev_buf {
    rt_mem_event *ev;
    size_t n, cap;
    double t;
    int64_t live;
} ev_buf;

static void push(ev_buf *b, int64_t delta, rt_mem_category c, const char *op) {
    if (b->n == b->cap) {
        b->cap = b->cap ? b->cap * 2 : 256;
        b->ev = realloc(b->ev, b->cap * sizeof *b->ev);
        if (!b->ev) abort();
    }
    b->live += delta;
    b->t += 0.0001; /* 0.1 ms per event */
    b->ev[b->n++] = (rt_mem_event){b->t, delta, c, op, b->live};
}

/* A synthetic training run: data and activations grow through the forward,
 * activations move to SAVED, backward frees them and makes gradients. */
static void synth_steps(ev_buf *b, int steps, int layers, int64_t act) {
    const int64_t MiB = 1 << 20;
    for (int s = 0; s < steps; s++) {
        push(b, 2 * MiB, RT_MEM_DATA, "batch");
        for (int l = 0; l < layers; l++) {
            push(b, act, RT_MEM_TEMP, "conv");
            push(b, act / 4, RT_MEM_TEMP, "scratch");
            push(b, -act / 4, RT_MEM_TEMP, "scratch");
            push(b, -act, RT_MEM_TEMP, "save");
            push(b, act, RT_MEM_SAVED, "save");
        }
        for (int l = layers - 1; l >= 0; l--) {
            push(b, act, RT_MEM_TEMP, "grad_in");
            push(b, -act, RT_MEM_SAVED, "release");
            if (s == 0) push(b, MiB / 2, RT_MEM_GRAD, "grad");
            push(b, -act, RT_MEM_TEMP, "grad_in");
        }
        if (s == 0) push(b, 2 * MiB, RT_MEM_OPTIM, "sgd");
        push(b, -2 * MiB, RT_MEM_DATA, "batch");
    }
}

static void test_timeline(void) {
    ev_buf b = {0};
    const int64_t MiB = 1 << 20;
    const int64_t base[RT_MEM_NCAT] = {[RT_MEM_PARAM] = 6 * MiB};
    b.live = 6 * MiB;
    synth_steps(&b, 3, 8, 3 * MiB);
    char png[600];
    path_in(png, sizeof png, "timeline.png");
    CHECK_OK(rt_plot_memory_timeline(png, b.ev, b.n, base, "synthetic training steps"));
    CHECK(png_is(png, RT_PLOT_WIDTH, RT_PLOT_HEIGHT));
    CHECK(!tmp_exists(png));
    if (!keep_) unlink(png);

    /* NULL baseline: PARAM never drops, so it starts at 0 and the chart is still drawn */
    path_in(png, sizeof png, "timeline_nobase.png");
    CHECK_OK(rt_plot_memory_timeline(png, b.ev, b.n, NULL, NULL));
    CHECK(png_is(png, RT_PLOT_WIDTH, RT_PLOT_HEIGHT));
    if (!keep_) unlink(png);

    /* a long trace (drawn per pixel column, peaks kept) */
    ev_buf big = {0};
    big.live = 6 * MiB;
    synth_steps(&big, 400, 12, 2 * MiB);
    CHECK(big.n > 20000);
    path_in(png, sizeof png, "timeline_long.png");
    CHECK_OK(rt_plot_memory_timeline(png, big.ev, big.n, base, "long trace (400 steps)"));
    CHECK(png_is(png, RT_PLOT_WIDTH, RT_PLOT_HEIGHT));
    if (!keep_) unlink(png);

    /* errors */
    path_in(png, sizeof png, "timeline_err.png");
    CHECK_EQ_INT(rt_plot_memory_timeline(png, b.ev, 0, base, NULL), RT_ERR_INVALID_ARG);
    CHECK_EQ_INT(rt_plot_memory_timeline(png, NULL, 3, base, NULL), RT_ERR_INVALID_ARG);
    const int64_t small[RT_MEM_NCAT] = {0};
    rt_mem_event freeing[2] = {{0.001, 4096, RT_MEM_TEMP, "a", 4096}, {0.002, -8192, RT_MEM_TEMP, "b", -4096}};
    CHECK_EQ_INT(rt_plot_memory_timeline(png, freeing, 2, small, NULL), RT_ERR_INVALID_ARG);
    CHECK(strstr(rt_error_last(), "TEMP") != NULL && strstr(rt_error_last(), "baseline") != NULL);
    CHECK_OK(rt_plot_memory_timeline(png, freeing, 2, NULL, NULL)); /* inferred baseline: 4096 */
    rt_mem_event badcat = {0.001, 1, (rt_mem_category)RT_MEM_NCAT, "x", 1};
    CHECK_EQ_INT(rt_plot_memory_timeline(png, &badcat, 1, NULL, NULL), RT_ERR_INVALID_ARG);
    rt_mem_event badtime = {NAN, 1, RT_MEM_TEMP, "x", 1};
    CHECK_EQ_INT(rt_plot_memory_timeline(png, &badtime, 1, NULL, NULL), RT_ERR_INVALID_ARG);
    CHECK_EQ_INT(rt_plot_memory_timeline("/nonexistent_rt_plot_dir/t.png", b.ev, b.n, base, NULL), RT_ERR_IO);
    CHECK(!tmp_exists("/nonexistent_rt_plot_dir/t.png"));
    if (!keep_) unlink(png);
    free(b.ev);
    free(big.ev);
}

/* The real tracker's trace, with the live bytes at enable time as baseline. */
static void test_timeline_tracker(void) {
    rt_memstats m;
    rt_memstats_get(&m);
    int64_t base[RT_MEM_NCAT];
    memcpy(base, m.live, sizeof base);
    void *keep = NULL;
    CHECK_OK(rt_mem_alloc(1 << 20, RT_MEM_PARAM, &keep)); /* allocated before tracing */
    rt_memstats_get(&m);
    memcpy(base, m.live, sizeof base);
    rt_mem_trace_enable(1);
    void *p[8];
    for (int i = 0; i < 8; i++) {
        rt_mem_set_op("test_alloc");
        if (rt_mem_alloc((size_t)(i + 1) << 16, RT_MEM_TEMP, &p[i]) != RT_OK) abort();
    }
    rt_mem_move(1 << 16, RT_MEM_TEMP, RT_MEM_SAVED);
    rt_mem_move(1 << 16, RT_MEM_SAVED, RT_MEM_TEMP);
    for (int i = 7; i >= 0; i--) rt_mem_free(p[i], (size_t)(i + 1) << 16, RT_MEM_TEMP);
    rt_mem_free(keep, 1 << 20, RT_MEM_PARAM); /* frees bytes live before the trace began */
    size_t n = 0;
    const rt_mem_event *ev = rt_mem_trace_events(&n);
    CHECK(n >= 17);
    char png[600];
    path_in(png, sizeof png, "timeline_tracker.png");
    rt_status st = rt_plot_memory_timeline(png, ev, n, base, "rt_mem trace");
    rt_mem_trace_enable(0);
    CHECK_OK(st);
    CHECK(png_is(png, RT_PLOT_WIDTH, RT_PLOT_HEIGHT));
    if (!keep_) unlink(png);
}

/* ------------------------------------------------------------------ training CSV */

static void write_training_csv(const char *csv, const char *steps, int epochs, int per_epoch) {
    FILE *f = fopen(csv, "w"), *g = steps ? fopen(steps, "w") : NULL;
    if (!f || (steps && !g)) abort();
    fprintf(f, "epoch,train_loss,train_acc,test_loss,test_acc,images_per_s,epoch_s,peak_param_mib,"
               "peak_grad_mib,peak_optim_mib,peak_saved_mib,peak_temp_mib,peak_data_mib,peak_total_mib\n");
    if (g) fprintf(g, "epoch,step,lr,loss\n");
    unsigned r = 12345;
    int64_t step = 0;
    for (int e = 0; e < epochs; e++) {
        double sum = 0;
        for (int s = 0; s < per_epoch; s++, step++) {
            double t = (double)step / per_epoch;
            r = r * 1103515245u + 12345u;
            double noise = ((double)(r >> 8 & 0xffff) / 65536.0 - 0.5) * 0.35;
            double loss = 0.28 + 2.0 * exp(-t * 1.6) + noise * (0.4 + exp(-t));
            sum += loss;
            if (g) fprintf(g, "%d,%lld,%.9g,%.9g\n", e, (long long)step, 0.1 * (1.0 - t / epochs), loss);
        }
        double tl = sum / per_epoch, acc = 1.0 - 0.5 * exp(-(e + 1) * 0.9) - 0.08;
        fprintf(f, "%d,%.6f,%.6f,%.6f,%.6f,1234.5,12.3,0.5,0.5,0.5,3,2,1,7.5\n", e + 1, tl, acc,
                tl * 1.08 + 0.03, acc - 0.015);
    }
    fclose(f);
    if (g) fclose(g);
}

static void test_training(void) {
    char csv[600], steps[600], png[600];
    path_in(csv, sizeof csv, "run.csv");
    path_in(steps, sizeof steps, "run.steps.csv");
    path_in(png, sizeof png, "training.png");
    write_training_csv(csv, steps, 6, 235);
    CHECK_OK(rt_plot_training_csv(csv, png));
    CHECK(png_is(png, RT_PLOT_TRAINING_WIDTH, RT_PLOT_TRAINING_HEIGHT));
    CHECK(!tmp_exists(png));
    if (!keep_) unlink(png), unlink(csv), unlink(steps);

    /* no steps file, one epoch, a diverged (nan) test loss: still drawn */
    path_in(csv, sizeof csv, "short.csv");
    path_in(png, sizeof png, "training_short.png");
    CHECK(write_text(csv, "epoch,train_loss,train_acc,test_loss,test_acc,images_per_s\n"
                          "1,0.61,0.78,nan,0.80,900\n"));
    CHECK_OK(rt_plot_training_csv(csv, png));
    CHECK(png_is(png, RT_PLOT_TRAINING_WIDTH, RT_PLOT_TRAINING_HEIGHT));
    if (!keep_) unlink(png);

    /* steps but no finished epoch yet */
    path_in(csv, sizeof csv, "partial.csv");
    path_in(steps, sizeof steps, "partial.steps.csv");
    path_in(png, sizeof png, "training_partial.png");
    write_training_csv(csv, steps, 1, 300);
    CHECK(write_text(csv, "epoch,train_loss,train_acc,test_loss,test_acc\n"));
    CHECK_OK(rt_plot_training_csv(csv, png));
    CHECK(png_is(png, RT_PLOT_TRAINING_WIDTH, RT_PLOT_TRAINING_HEIGHT));
    if (!keep_) unlink(png), unlink(steps);
    unlink(csv);

    /* errors */
    char bad[600];
    path_in(bad, sizeof bad, "bad.csv");
    path_in(png, sizeof png, "bad.png");
    CHECK(write_text(bad, "epoch,train_loss,train_acc,test_loss,test_acc\n1,0.5,0.9,0.6\n"));
    CHECK_EQ_INT(rt_plot_training_csv(bad, png), RT_ERR_FORMAT);
    CHECK(strstr(rt_error_last(), ":2:") != NULL);
    CHECK(write_text(bad, "epoch,train_loss,train_acc,test_loss,test_acc\n1,0.5,0.9,0.6,abc\n"));
    CHECK_EQ_INT(rt_plot_training_csv(bad, png), RT_ERR_FORMAT);
    CHECK(write_text(bad, "epoch,loss\n1,0.5\n"));
    CHECK_EQ_INT(rt_plot_training_csv(bad, png), RT_ERR_FORMAT);
    CHECK(strstr(rt_error_last(), "train_loss") != NULL);
    CHECK(write_text(bad, "epoch,train_loss,train_acc,test_loss,test_acc\n"));
    CHECK_EQ_INT(rt_plot_training_csv(bad, png), RT_ERR_FORMAT); /* no rows, no steps */
    CHECK(write_text(bad, ""));
    CHECK_EQ_INT(rt_plot_training_csv(bad, png), RT_ERR_FORMAT);
    CHECK(!exists(png) && !tmp_exists(png));
    unlink(bad);
    path_in(bad, sizeof bad, "missing.csv");
    CHECK_EQ_INT(rt_plot_training_csv(bad, png), RT_ERR_IO);
    CHECK(strstr(rt_error_last(), "missing.csv") != NULL);
    CHECK_EQ_INT(rt_plot_training_csv(NULL, png), RT_ERR_INVALID_ARG);
    /* unwritable PNG */
    path_in(csv, sizeof csv, "short.csv");
    CHECK_EQ_INT(rt_plot_training_csv(csv, "/nonexistent_rt_plot_dir/t.png"), RT_ERR_IO);
    CHECK(!tmp_exists("/nonexistent_rt_plot_dir/t.png"));
    unlink(csv);
}

static void test_cleanup(void) {
    if (dir_[0] && !keep_) CHECK(rmdir(dir_) == 0); /* empty: every test removed its files */
}

RT_TEST_MAIN({"lines", test_lines}, {"lines_errors", test_lines_errors}, {"timeline", test_timeline},
             {"timeline_tracker", test_timeline_tracker}, {"training", test_training},
             {"cleanup", test_cleanup})
