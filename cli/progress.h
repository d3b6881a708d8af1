/* Progress display for long loops: a redrawn bar on a terminal, plain
 * periodic lines otherwise (logs, CI), so both people and log files see
 * step, loss, images/s and the time left. */
#ifndef RT_CLI_PROGRESS_H
#define RT_CLI_PROGRESS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

typedef struct rt_progress {
    FILE *out;
    bool tty;
    const char *label;
    int64_t total;         /* steps in this loop */
    double t0, last_print; /* seconds (monotonic) */
    double line_every_s;   /* plain mode: seconds between lines */
} rt_progress;

/* Monotonic clock in seconds. */
double rt_now_s(void);
void rt_progress_start(rt_progress *p, FILE *out, const char *label, int64_t total);
/* Reports step `done` of total with the latest loss and images processed so far. */
void rt_progress_update(rt_progress *p, int64_t done, double loss, int64_t images);
/* Ends the bar (newline on a terminal). */
void rt_progress_finish(rt_progress *p);

#endif
