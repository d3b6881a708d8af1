/* PNG charts for results people would rather see than read: line charts,
 * memory timelines and training curves (the CLI writes each as CSV too).
 *
 * Drawing uses cairo (image surface, toy text API with the fontconfig
 * "sans-serif" face, PNG writer). Every function writes PNG_PATH.tmp first
 * and renames it over PNG_PATH only once the whole file is written, so a
 * failed call never leaves a broken or half-written PNG: on any failure the
 * .tmp file is removed and PNG_PATH is untouched.
 *
 * All arguments are borrowed; nothing is retained after a call returns.
 * Scratch memory is plain malloc (plots are not tensor memory and do not
 * appear in rt_memstats). Errors are values: RT_ERR_INVALID_ARG for bad
 * arguments or data, RT_ERR_IO (message names the path) when a file cannot
 * be read or written, RT_ERR_FORMAT for a malformed CSV, RT_ERR_OOM when
 * malloc fails, RT_ERR_BACKEND when cairo itself fails. */
#ifndef CLI_PLOT_H
#define CLI_PLOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/mem.h"
#include "core/status.h"

/* Writes a cairo image surface to png_path as PNG, via png_path.tmp and a
 * rename (removed on failure), for the commands that draw their own
 * pictures (cli/segment_png.c). RT_ERR_BACKEND when cairo failed drawing,
 * RT_ERR_IO naming the path, RT_ERR_OOM. */
typedef struct _cairo_surface cairo_surface_t;
rt_status cli_png_save(cairo_surface_t *s, const char *png_path);

/* Paints a grey image of h × w pixels at (x, y) of cr, each pixel a
 * scale × scale square (nearest filter: pixels stay visible when magnified);
 * value(user, r, c) gives pixel (r, c), row 0 on top, clamped to [0, 1]
 * (0 black). For the pictures that show images (superres, video). */
typedef struct _cairo cairo_t;
typedef float (*cli_gray_fn)(const void *user, int64_t r, int64_t c);
void cli_paint_gray(cairo_t *cr, int64_t h, int64_t w, cli_gray_fn value, const void *user, double x, double y,
                    double scale);

/* Pixel size of cli_plot_lines and cli_plot_memory_timeline images. */
#define RT_PLOT_WIDTH 800
#define RT_PLOT_HEIGHT 500
/* Pixel size of cli_plot_training_csv images (two panels side by side). */
#define RT_PLOT_TRAINING_WIDTH 1200
#define RT_PLOT_TRAINING_HEIGHT 500

#define RT_PLOT_MAX_SERIES 8

/* One named line. x and y hold n points each, drawn in the given order.
 * A point whose x or y is NaN or infinite is skipped: the line breaks there
 * and resumes at the next finite point. Zero-initialised style fields mean
 * the defaults. */
typedef struct cli_plot_series {
    const char *name;    /* legend text; NULL or "" = not listed in the legend */
    const double *x, *y; /* n values each (borrowed) */
    size_t n;            /* >= 1 */
    int colour;          /* 0 = automatic (palette entry of the series' position);
                          * 1..8 = that entry of the fixed palette: blue, orange,
                          * green, red, purple, brown, pink, grey */
    double width;        /* line width in px; 0 = 2 */
    double alpha;        /* opacity in (0, 1]; 0 = 1 (opaque) */
    bool markers;        /* draw a dot at every point */
} cli_plot_series;

typedef struct cli_plot {
    const char *title, *x_label, *y_label; /* NULL = none */
    const cli_plot_series *series;          /* n_series entries (borrowed) */
    size_t n_series;                       /* 1..RT_PLOT_MAX_SERIES */
    bool x_from_zero, y_from_zero;         /* stretch the axis to include 0 */
    bool x_integer;                        /* x ticks at whole numbers only (epochs) */
} cli_plot;

/* Writes a RT_PLOT_WIDTH x RT_PLOT_HEIGHT line chart of `p` to png_path:
 * white background, title, axis labels, grid, ticks at "nice" steps
 * (1, 2 or 5 x 10^k) with numeric labels, legend in the corner that hides
 * the fewest points. The y axis is rounded out to whole tick steps; the x
 * axis spans the data exactly.
 * Errors: RT_ERR_INVALID_ARG when p or png_path is NULL, n_series is 0 or
 * above RT_PLOT_MAX_SERIES, a series is empty (n == 0 or x/y NULL), a colour
 * is out of range, or no point in the whole plot is finite; RT_ERR_IO when
 * the file cannot be written. */
rt_status cli_plot_lines(const char *png_path, const cli_plot *p);

/* Writes a RT_PLOT_WIDTH x RT_PLOT_HEIGHT stacked step chart of live memory
 * per category (MiB, y) over time (milliseconds since the trace was
 * enabled, x) from an event trace (rt_mem_trace_events). Stacked bottom to
 * top: PARAM, GRAD, OPTIM, DATA, SAVED, TEMP; the legend lists the
 * categories top to bottom in the same order as the stack. The highest total
 * is marked with a dashed line, a dot and the label "peak X MiB" (X: the
 * highest baseline total + running sum of delta_bytes, to 0.1 MiB). A
 * vertical line labelled "forward | backward" marks the first event whose
 * op begins with "backward:" (the autograd engine's, see core/mem.h), if any.
 *
 * A trace starts when tracing was enabled, so bytes already live then appear
 * in no event: `baseline` gives the live bytes per category at that moment
 * (e.g. rt_memstats.live read just before rt_mem_trace_enable(1)). NULL
 * means: each category starts at the smallest value that keeps it
 * non-negative over the trace (0 if it never drops below its start), which
 * is exact for a trace that frees nothing allocated before it began.
 * Live bytes per category are baseline + the running sum of delta_bytes.
 * A trace of up to 1000 events is drawn exactly, one step per event. A
 * longer one is drawn per pixel column: the stacked areas show the
 * time-weighted mean bytes per category in the column, and a grey band
 * ("momentary peak") reaches up to the highest total inside the column, so
 * peaks are never smoothed away. If every event has the same time stamp the
 * x axis is the event index instead. `title` NULL = "memory timeline".
 * Errors: RT_ERR_INVALID_ARG when png_path or ev is NULL, n is 0, a time
 * is not finite, a category is out of range, or with an explicit baseline a
 * category's live bytes drop below zero (message names the event: the
 * baseline is too small); RT_ERR_IO when the file cannot be written. */
rt_status cli_plot_memory_timeline(const char *png_path, const rt_mem_event *ev, size_t n,
                                  const int64_t baseline[RT_MEM_NCAT], const char *title);

/* Reads the per-epoch CSV written by `revtorch train --log FILE.csv`
 * (columns epoch,train_loss,train_acc,test_loss,test_acc,... by header
 * name, extra columns ignored; accuracies as fractions in [0,1]) and, if it
 * exists, the per-step file next to it (FILE.steps.csv: epoch,step,lr,loss
 * with 0-based epochs), and writes one RT_PLOT_TRAINING_WIDTH x
 * RT_PLOT_TRAINING_HEIGHT PNG with two panels sharing the x axis "epoch":
 * left, loss: every step's loss (faint, placed at its fraction of the
 * epoch), its moving average, and the per-epoch train and test loss (dots,
 * at the epoch's end); right, accuracy in percent: train and test per epoch.
 * NaN or infinite values (a diverged run) are skipped, not fatal.
 * Errors: RT_ERR_INVALID_ARG for NULL paths; RT_ERR_IO when csv_path cannot
 * be read (a missing steps file is not an error, an unreadable one is) or
 * the PNG cannot be written; RT_ERR_FORMAT when a header lacks a required
 * column, a row has a wrong number of fields or a non-numeric value (message
 * names file and line), or neither file holds any row. */
rt_status cli_plot_training_csv(const char *csv_path, const char *png_path);

/* The largest CSV file the readers above accept (a log of a long run is a
 * few MiB); larger files, and files that are not regular (FIFOs, devices),
 * are refused with RT_ERR_IO instead of being read for ever. */
#define RT_PLOT_CSV_MAX_BYTES (64 << 20)

/* The rows of a training run's curves, kept in memory by `revtorch train`
 * so it draws the picture after every epoch without re-reading its log. */
typedef struct cli_epoch_row {
    double epoch; /* 1-based, the epoch just finished */
    double train_loss, train_acc, test_loss, test_acc; /* accuracies as fractions in [0,1] */
} cli_epoch_row;

typedef struct cli_step_row {
    int64_t epoch; /* 0-based (FILE.steps.csv counts from 1, as FILE.csv does) */
    double loss;
} cli_step_row;

typedef struct cli_training_curves {
    cli_epoch_row *epochs;
    size_t n_epochs, cap_epochs;
    cli_step_row *steps;
    size_t n_steps, cap_steps;
} cli_training_curves; /* zero-initialised: empty */

/* Appends a row. Errors: RT_ERR_OOM; RT_ERR_INVALID_ARG for a step's epoch
 * outside [0, 1e7). */
rt_status cli_training_curves_add_epoch(cli_training_curves *c, const cli_epoch_row *row);
rt_status cli_training_curves_add_step(cli_training_curves *c, int64_t epoch, double loss);
void cli_training_curves_free(cli_training_curves *c);

/* Reads the rows of a per-epoch log and, when steps_path is not NULL and
 * the file exists, of its per-step log into *c (initialised here; freed on
 * error). Errors as cli_plot_training_csv, except that a log without rows
 * is not one. */
rt_status cli_training_curves_read(const char *csv_path, const char *steps_path, cli_training_curves *c);

/* Draws the picture cli_plot_training_csv draws from rows in memory; `name`
 * (the log's path; its last component is shown in the titles) may be NULL.
 * Errors: RT_ERR_INVALID_ARG for NULL png_path or c, RT_ERR_FORMAT when c
 * holds no row, RT_ERR_IO when the PNG cannot be written. */
rt_status cli_plot_training(const char *png_path, const cli_training_curves *c, const char *name);

#endif
