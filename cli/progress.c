#include "progress.h"

#include <math.h>
#include <time.h>
#include <unistd.h>

double cli_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void cli_progress_start(cli_progress *p, FILE *out, const char *label, int64_t total) {
    p->out = out;
    p->tty = isatty(fileno(out));
    p->label = label;
    p->total = total;
    p->t0 = p->last_print = cli_now_s();
    p->line_every_s = 15.0;
    p->unit = "img";
}

static void rt_format_eta(double s, char *buf, size_t n) {
    int total = s > 0 ? (int)(s + 0.5) : 0;
    snprintf(buf, n, "%d:%02d", total / 60, total % 60);
}

void cli_progress_update(cli_progress *p, int64_t done, double loss, int64_t images) {
    double now = cli_now_s(), elapsed = now - p->t0;
    bool last = done >= p->total;
    if (p->tty ? (now - p->last_print < 0.2 && !last) : (now - p->last_print < p->line_every_s && !last))
        return;
    p->last_print = now;
    double ips = elapsed > 0 ? (double)images / elapsed : 0.0;
    double eta = done > 0 ? elapsed * (double)(p->total - done) / (double)done : 0.0;
    char eta_s[16];
    rt_format_eta(eta, eta_s, sizeof eta_s);
    char loss_s[32] = "";
    if (!isnan(loss)) snprintf(loss_s, sizeof loss_s, " loss %.4f", loss);
    if (p->tty) {
        const int width = 30;
        int filled = p->total > 0 ? (int)(width * done / p->total) : width;
        char bar[32];
        for (int i = 0; i < width; i++) bar[i] = i < filled ? '#' : '.';
        bar[width] = '\0';
        fprintf(p->out, "\r%s [%s] %lld/%lld%s %.*f %s/s ETA %s ", p->label, bar, (long long)done,
                (long long)p->total, loss_s, ips < 10 ? 2 : 0, ips, p->unit, eta_s);
    } else {
        fprintf(p->out, "%s step %lld/%lld%s %.*f %s/s ETA %s\n", p->label, (long long)done, (long long)p->total,
                loss_s, ips < 10 ? 2 : 0, ips, p->unit, eta_s);
    }
    fflush(p->out);
}

void cli_progress_finish(cli_progress *p) {
    if (p->tty) fputc('\n', p->out);
    fflush(p->out);
}
