/* Progress display for long loops: a redrawn bar on a terminal, plain
 * periodic lines otherwise (logs, CI), so both people and log files see
 * step, loss, images/s and the time left. */
#ifndef CLI_PROGRESS_H
#define CLI_PROGRESS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

typedef struct cli_progress {
    FILE *out;
    bool tty;
    const char *label;
    int64_t total;         /* steps in this loop */
    double t0, last_print; /* seconds (monotonic) */
    double line_every_s;   /* plain mode: seconds between lines */
    const char *unit;      /* what `images` counts, per second: "img" (start's default), "windows" */
} cli_progress;

/* Monotonic clock in seconds. */
double cli_now_s(void);
void cli_progress_start(cli_progress *p, FILE *out, const char *label, int64_t total);
/* Reports step `done` of total with the latest loss (NaN: none, as in
 * inference) and images (p->unit) processed so far. */
void cli_progress_update(cli_progress *p, int64_t done, double loss, int64_t images);
/* Ends the bar (newline on a terminal). */
void cli_progress_finish(cli_progress *p);

#endif
