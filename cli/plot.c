/* PNG charts with cairo; see plot.h for the contract.
 *
 * Layout: a chart is one or more panels. A panel reserves room for its title,
 * tick labels and axis labels, then maps data to the remaining plot area with
 * two axes (lo, hi, tick step). Series are clipped to the plot area. */
#include "plot.h"

#include <cairo.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------------------ style */

/* Tableau 10 (matplotlib's default cycle), first eight. */
static const double rt_palette[RT_PLOT_MAX_SERIES][3] = {
    {0x1f / 255.0, 0x77 / 255.0, 0xb4 / 255.0}, /* blue */
    {0xff / 255.0, 0x7f / 255.0, 0x0e / 255.0}, /* orange */
    {0x2c / 255.0, 0xa0 / 255.0, 0x2c / 255.0}, /* green */
    {0xd6 / 255.0, 0x27 / 255.0, 0x28 / 255.0}, /* red */
    {0x94 / 255.0, 0x67 / 255.0, 0xbd / 255.0}, /* purple */
    {0x8c / 255.0, 0x56 / 255.0, 0x4b / 255.0}, /* brown */
    {0xe3 / 255.0, 0x77 / 255.0, 0xc2 / 255.0}, /* pink */
    {0x7f / 255.0, 0x7f / 255.0, 0x7f / 255.0}, /* grey */
};

#define RT_PI 3.14159265358979323846
#define RT_FONT "sans-serif"
#define RT_TITLE_PX 17.0
#define RT_LABEL_PX 13.0
#define RT_TICK_PX 12.0
#define RT_LEGEND_PX 12.0

typedef struct rt_rect {
    double x, y, w, h;
} rt_rect;

static void set_font(cairo_t *cr, double px, bool bold) {
    cairo_select_font_face(cr, RT_FONT, CAIRO_FONT_SLANT_NORMAL,
                           bold ? CAIRO_FONT_WEIGHT_BOLD : CAIRO_FONT_WEIGHT_NORMAL);
    cairo_set_font_size(cr, px);
}

static double text_width(cairo_t *cr, const char *s) {
    cairo_text_extents_t te;
    cairo_text_extents(cr, s, &te);
    return te.x_advance;
}

/* Draws s with its anchor at (x, y): ha 0 = left, 0.5 = centre, 1 = right;
 * va 0 = top, 0.5 = middle, 1 = baseline (using the font's ascent). */
static void draw_text(cairo_t *cr, double x, double y, const char *s, double ha, double va) {
    cairo_font_extents_t fe;
    cairo_font_extents(cr, &fe);
    double w = text_width(cr, s);
    double asc = fe.ascent * 0.78; /* cap height, roughly: centres digits visually */
    cairo_move_to(cr, x - ha * w, y + (1.0 - va) * asc);
    cairo_show_text(cr, s);
}

/* ------------------------------------------------------------------ axes */

typedef struct rt_axis {
    double lo, hi, step;
    int decimals;
} rt_axis;

/* Smallest 1, 2 or 5 x 10^k step giving at most `target` intervals over span. */
static double nice_step(double span, int target) {
    double raw = span / target;
    double p = pow(10.0, floor(log10(raw)));
    double f = raw / p;
    double m = f <= 1.0 + 1e-9 ? 1.0 : f <= 2.0 + 1e-9 ? 2.0 : f <= 5.0 + 1e-9 ? 5.0 : 10.0;
    return m * p;
}

static void axis_make(double lo, double hi, bool from_zero, bool round_ends, bool integer, int target,
                      rt_axis *a) {
    if (from_zero) {
        if (lo > 0) lo = 0;
        if (hi < 0) hi = 0;
    }
    if (!(hi > lo)) {
        double pad = integer ? 1.0 : lo == 0.0 ? 1.0 : fabs(lo) * 0.1;
        lo -= pad;
        hi += pad;
        if (from_zero && lo < 0 && hi - pad >= 0) lo = 0;
    }
    double step = nice_step(hi - lo, target);
    if (integer && step < 1.0) step = 1.0;
    if (round_ends) {
        lo = floor(lo / step + 1e-9) * step;
        hi = ceil(hi / step - 1e-9) * step;
    }
    a->lo = lo;
    a->hi = hi;
    a->step = step;
    a->decimals = step >= 1.0 ? 0 : (int)ceil(-log10(step) - 1e-9);
}

static void format_tick(char *buf, size_t cap, double v, const rt_axis *a) {
    if (fabs(v) < a->step * 1e-9) v = 0.0;
    if (fabs(v) >= 1e7 || a->step < 1e-5)
        snprintf(buf, cap, "%g", v);
    else
        snprintf(buf, cap, "%.*f", a->decimals, v);
}

/* Calls fn for every tick value inside [lo, hi]. */
#define FOR_TICKS(a, v)                                                                    \
    for (double v##_i = ceil((a)->lo / (a)->step - 1e-9), v = v##_i * (a)->step;           \
         v <= (a)->hi + (a)->step * 1e-9; v##_i += 1.0, v = v##_i * (a)->step)

typedef struct rt_frame {
    rt_rect area; /* the plot area in pixels */
    rt_axis ax, ay;
} rt_frame;

static double map_x(const rt_frame *f, double x) {
    return f->area.x + (x - f->ax.lo) / (f->ax.hi - f->ax.lo) * f->area.w;
}
static double map_y(const rt_frame *f, double y) {
    return f->area.y + f->area.h - (y - f->ay.lo) / (f->ay.hi - f->ay.lo) * f->area.h;
}

/* Lays out a panel inside `r` (reserving `right_reserve` px on the right for
 * an outside legend) and draws title, grid, frame, ticks and labels.
 * f->ax and f->ay must be set; fills f->area. */
static void draw_frame(cairo_t *cr, rt_rect r, const char *title, const char *xl, const char *yl,
                       double right_reserve, rt_frame *f) {
    char buf[64];
    set_font(cr, RT_TICK_PX, false);
    double ytw = 0.0;
    FOR_TICKS(&f->ay, v) {
        format_tick(buf, sizeof buf, v, &f->ay);
        double w = text_width(cr, buf);
        if (w > ytw) ytw = w;
    }
    double top = r.y + (title && *title ? 46.0 : 16.0);
    double bottom = r.y + r.h - (xl && *xl ? 54.0 : 32.0);
    double left = r.x + 14.0 + ytw + 8.0 + (yl && *yl ? 24.0 : 0.0);
    double right = r.x + r.w - 24.0 - right_reserve;
    left = round(left), top = round(top), right = round(right), bottom = round(bottom);
    f->area = (rt_rect){left, top, right - left, bottom - top}; /* whole pixels */

    if (title && *title) {
        set_font(cr, RT_TITLE_PX, true);
        cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
        /* centred over the plot area, shifted to stay inside the picture when long */
        double tw = text_width(cr, title), cx = left + f->area.w / 2.0;
        if (cx + tw / 2.0 > r.x + r.w - 8.0) cx = r.x + r.w - 8.0 - tw / 2.0;
        if (cx - tw / 2.0 < r.x + 8.0) cx = r.x + 8.0 + tw / 2.0;
        draw_text(cr, cx, r.y + 16.0, title, 0.5, 0.0);
    }
    /* plot background, grid */
    cairo_set_source_rgb(cr, 1, 1, 1);
    cairo_rectangle(cr, left, top, f->area.w, f->area.h);
    cairo_fill(cr);
    cairo_set_line_width(cr, 1.0);
    cairo_set_source_rgb(cr, 0.88, 0.88, 0.88);
    FOR_TICKS(&f->ax, v) {
        double px = round(map_x(f, v)) + 0.5;
        cairo_move_to(cr, px, top);
        cairo_line_to(cr, px, bottom);
    }
    FOR_TICKS(&f->ay, v) {
        double py = round(map_y(f, v)) + 0.5;
        cairo_move_to(cr, left, py);
        cairo_line_to(cr, right, py);
    }
    cairo_stroke(cr);
    /* frame */
    cairo_set_source_rgb(cr, 0.35, 0.35, 0.35);
    cairo_rectangle(cr, round(left) + 0.5, round(top) + 0.5, round(right) - round(left),
                    round(bottom) - round(top));
    cairo_stroke(cr);
    /* ticks and tick labels */
    set_font(cr, RT_TICK_PX, false);
    FOR_TICKS(&f->ax, v) {
        double px = round(map_x(f, v)) + 0.5;
        cairo_set_source_rgb(cr, 0.35, 0.35, 0.35);
        cairo_move_to(cr, px, round(bottom) + 0.5);
        cairo_line_to(cr, px, round(bottom) + 5.5);
        cairo_stroke(cr);
        format_tick(buf, sizeof buf, v, &f->ax);
        cairo_set_source_rgb(cr, 0.2, 0.2, 0.2);
        draw_text(cr, px, bottom + 9.0, buf, 0.5, 0.0);
    }
    FOR_TICKS(&f->ay, v) {
        double py = round(map_y(f, v)) + 0.5;
        cairo_set_source_rgb(cr, 0.35, 0.35, 0.35);
        cairo_move_to(cr, round(left) + 0.5, py);
        cairo_line_to(cr, round(left) - 4.5, py);
        cairo_stroke(cr);
        format_tick(buf, sizeof buf, v, &f->ay);
        cairo_set_source_rgb(cr, 0.2, 0.2, 0.2);
        draw_text(cr, left - 8.0, py, buf, 1.0, 0.5);
    }
    /* axis labels */
    set_font(cr, RT_LABEL_PX, false);
    cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
    if (xl && *xl) draw_text(cr, left + f->area.w / 2.0, r.y + r.h - 12.0, xl, 0.5, 1.0);
    if (yl && *yl) {
        cairo_save(cr);
        cairo_translate(cr, r.x + 14.0, top + f->area.h / 2.0);
        cairo_rotate(cr, -RT_PI / 2.0);
        draw_text(cr, 0.0, 0.0, yl, 0.5, 0.0);
        cairo_restore(cr);
    }
}

/* ------------------------------------------------------------------ legend */

typedef struct rt_legend_entry {
    const char *name;
    const double *rgb;
    double alpha, width;
    bool markers, swatch; /* swatch: filled square (areas) instead of a line */
} rt_legend_entry;

static void legend_size(cairo_t *cr, const rt_legend_entry *e, size_t n, double *w, double *h) {
    set_font(cr, RT_LEGEND_PX, false);
    double tw = 0.0;
    for (size_t i = 0; i < n; i++) {
        double t = text_width(cr, e[i].name);
        if (t > tw) tw = t;
    }
    *w = 10.0 + 24.0 + 8.0 + tw + 10.0;
    *h = 8.0 + 19.0 * (double)n + 4.0;
}

static void draw_legend(cairo_t *cr, const rt_legend_entry *e, size_t n, double x, double y) {
    double w, h;
    legend_size(cr, e, n, &w, &h);
    cairo_set_source_rgba(cr, 1, 1, 1, 0.88);
    cairo_rectangle(cr, round(x) + 0.5, round(y) + 0.5, round(w), round(h));
    cairo_fill_preserve(cr);
    cairo_set_source_rgb(cr, 0.8, 0.8, 0.8);
    cairo_set_line_width(cr, 1.0);
    cairo_stroke(cr);
    set_font(cr, RT_LEGEND_PX, false);
    for (size_t i = 0; i < n; i++) {
        double cy = y + 8.0 + 19.0 * (double)i + 9.0;
        const double *c = e[i].rgb;
        if (e[i].swatch) {
            cairo_set_source_rgba(cr, c[0], c[1], c[2], e[i].alpha);
            cairo_rectangle(cr, x + 14.0, cy - 6.0, 16.0, 12.0);
            cairo_fill(cr);
        } else {
            cairo_set_source_rgba(cr, c[0], c[1], c[2], e[i].alpha < 0.6 ? 0.6 : e[i].alpha);
            cairo_set_line_width(cr, e[i].width < 1.5 ? 1.5 : e[i].width);
            cairo_move_to(cr, x + 10.0, cy);
            cairo_line_to(cr, x + 34.0, cy);
            cairo_stroke(cr);
            if (e[i].markers) {
                cairo_arc(cr, x + 22.0, cy, 3.5, 0, 2 * RT_PI);
                cairo_fill(cr);
            }
        }
        cairo_set_source_rgb(cr, 0.15, 0.15, 0.15);
        draw_text(cr, x + 42.0, cy, e[i].name, 0.0, 0.5);
    }
}

/* ------------------------------------------------------------------ lines */

static const double *series_rgb(const cli_plot_series *s, size_t index) {
    int c = s->colour > 0 ? s->colour - 1 : (int)(index % RT_PLOT_MAX_SERIES);
    return rt_palette[c];
}

static bool pt_ok(const cli_plot_series *s, size_t i) {
    return isfinite(s->x[i]) && isfinite(s->y[i]);
}

/* Number of drawn pixels of the series inside rectangle r (legend placement). */
static double count_inside(const rt_frame *f, const cli_plot_series *s, size_t ns, rt_rect r) {
    double hits = 0.0;
    for (size_t k = 0; k < ns; k++) {
        const cli_plot_series *q = &s[k];
        double px = 0, py = 0;
        bool have = false;
        for (size_t i = 0; i < q->n; i++) {
            if (!pt_ok(q, i)) {
                have = false;
                continue;
            }
            double x = map_x(f, q->x[i]), y = map_y(f, q->y[i]);
            int steps = 1;
            if (have) {
                double len = hypot(x - px, y - py);
                steps = len > 4.0 ? (int)fmin(ceil(len / 4.0), 400.0) : 1;
            }
            for (int j = 1; j <= steps; j++) {
                double t = (double)j / steps;
                double sx = have ? px + (x - px) * t : x, sy = have ? py + (y - py) * t : y;
                if (sx >= r.x && sx <= r.x + r.w && sy >= r.y && sy <= r.y + r.h) hits += 1.0;
            }
            px = x;
            py = y;
            have = true;
        }
    }
    return hits;
}

/* Draws the series of p into frame f (axes already set, frame drawn). */
static void draw_series(cairo_t *cr, const rt_frame *f, const cli_plot_series *s, size_t ns) {
    cairo_save(cr);
    cairo_rectangle(cr, f->area.x, f->area.y, f->area.w, f->area.h);
    cairo_clip(cr);
    cairo_set_line_join(cr, CAIRO_LINE_JOIN_ROUND);
    cairo_set_line_cap(cr, CAIRO_LINE_CAP_ROUND);
    for (size_t k = 0; k < ns; k++) {
        const cli_plot_series *q = &s[k];
        const double *c = series_rgb(q, k);
        double alpha = q->alpha > 0 ? q->alpha : 1.0, width = q->width > 0 ? q->width : 2.0;
        cairo_set_source_rgba(cr, c[0], c[1], c[2], alpha);
        cairo_set_line_width(cr, width);
        bool pen = false;
        size_t run = 0;
        for (size_t i = 0; i < q->n; i++) {
            if (!pt_ok(q, i)) {
                pen = false;
                continue;
            }
            double x = map_x(f, q->x[i]), y = map_y(f, q->y[i]);
            if (pen) {
                cairo_line_to(cr, x, y);
            } else {
                cairo_move_to(cr, x, y);
                /* a lone point gets a dot so it is visible */
                bool lone = i + 1 >= q->n || !pt_ok(q, i + 1);
                if (lone && !q->markers) cairo_line_to(cr, x, y);
            }
            pen = true;
            if (++run % 4096 == 0) { /* keep paths short for huge series */
                cairo_stroke(cr);
                cairo_move_to(cr, x, y);
            }
        }
        cairo_stroke(cr);
        if (q->markers) {
            double rad = width + 1.8;
            for (size_t i = 0; i < q->n; i++) {
                if (!pt_ok(q, i)) continue;
                double x = map_x(f, q->x[i]), y = map_y(f, q->y[i]);
                cairo_new_sub_path(cr);
                cairo_arc(cr, x, y, rad, 0, 2 * RT_PI);
                cairo_set_source_rgba(cr, c[0], c[1], c[2], alpha);
                cairo_fill_preserve(cr);
                cairo_set_source_rgb(cr, 1, 1, 1);
                cairo_set_line_width(cr, 1.2);
                cairo_stroke(cr);
            }
        }
    }
    cairo_restore(cr);
}

/* Legend inside the plot area, in the corner covering the fewest drawn pixels. */
static void place_legend(cairo_t *cr, const rt_frame *f, const cli_plot_series *s, size_t ns) {
    rt_legend_entry e[RT_PLOT_MAX_SERIES];
    size_t n = 0;
    for (size_t k = 0; k < ns; k++) {
        if (!s[k].name || !*s[k].name) continue;
        e[n++] = (rt_legend_entry){s[k].name, series_rgb(&s[k], k), s[k].alpha > 0 ? s[k].alpha : 1.0,
                                   s[k].width > 0 ? s[k].width : 2.0, s[k].markers, false};
    }
    if (n == 0) return;
    double w, h;
    legend_size(cr, e, n, &w, &h);
    const double m = 10.0;
    rt_rect cand[4] = {
        {f->area.x + f->area.w - w - m, f->area.y + m, w, h},          /* top right */
        {f->area.x + m, f->area.y + m, w, h},                          /* top left */
        {f->area.x + f->area.w - w - m, f->area.y + f->area.h - h - m, w, h}, /* bottom right */
        {f->area.x + m, f->area.y + f->area.h - h - m, w, h},          /* bottom left */
    };
    int best = 0;
    double best_hits = INFINITY;
    for (int c = 0; c < 4; c++) {
        double hits = count_inside(f, s, ns, cand[c]);
        if (hits < best_hits - 0.5) {
            best_hits = hits;
            best = c;
        }
    }
    draw_legend(cr, e, n, cand[best].x, cand[best].y);
}

/* Data range over finite points; false when there is none. */
static bool series_range(const cli_plot_series *s, size_t ns, double *xlo, double *xhi, double *ylo,
                         double *yhi) {
    bool any = false;
    *xlo = *ylo = INFINITY;
    *xhi = *yhi = -INFINITY;
    for (size_t k = 0; k < ns; k++)
        for (size_t i = 0; i < s[k].n; i++) {
            if (!pt_ok(&s[k], i)) continue;
            any = true;
            *xlo = fmin(*xlo, s[k].x[i]);
            *xhi = fmax(*xhi, s[k].x[i]);
            *ylo = fmin(*ylo, s[k].y[i]);
            *yhi = fmax(*yhi, s[k].y[i]);
        }
    return any;
}

/* One line-chart panel inside r. With no finite point, draws the frame and
 * `empty_msg` in the middle. */
static void draw_lines_panel(cairo_t *cr, rt_rect r, const cli_plot *p, const char *empty_msg) {
    rt_frame f;
    double xlo, xhi, ylo, yhi;
    bool any = p->n_series > 0 && series_range(p->series, p->n_series, &xlo, &xhi, &ylo, &yhi);
    if (!any) xlo = ylo = 0.0, xhi = yhi = 1.0;
    bool markers = false;
    for (size_t k = 0; k < p->n_series; k++) markers |= p->series[k].markers;
    double span = p->x_from_zero ? fmax(xhi, 0.0) - fmin(xlo, 0.0) : xhi - xlo;
    if (any && markers && span > 0) { /* room for the end dots */
        double pad = span * 0.025;
        if (!(p->x_from_zero && xlo >= 0)) xlo -= pad;
        if (!(p->x_from_zero && xhi <= 0)) xhi += pad;
    }
    axis_make(xlo, xhi, p->x_from_zero, false, p->x_integer, 8, &f.ax);
    /* a little headroom so lines do not run along the frame */
    if (any && yhi > ylo) {
        double pad = (yhi - ylo) * 0.04;
        if (!(p->y_from_zero && ylo >= 0)) ylo -= pad;
        yhi += pad;
    }
    axis_make(ylo, yhi, p->y_from_zero, true, false, 6, &f.ay);
    draw_frame(cr, r, p->title, p->x_label, p->y_label, 0.0, &f);
    if (!any) {
        set_font(cr, RT_LABEL_PX, false);
        cairo_set_source_rgb(cr, 0.5, 0.5, 0.5);
        draw_text(cr, f.area.x + f.area.w / 2, f.area.y + f.area.h / 2, empty_msg ? empty_msg : "no data",
                  0.5, 0.5);
        return;
    }
    draw_series(cr, &f, p->series, p->n_series);
    place_legend(cr, &f, p->series, p->n_series);
}

/* ------------------------------------------------------------------ output */

static cairo_status_t png_write_cb(void *closure, const unsigned char *data, unsigned int len) {
    return fwrite(data, 1, len, (FILE *)closure) == len ? CAIRO_STATUS_SUCCESS : CAIRO_STATUS_WRITE_ERROR;
}

void cli_paint_gray(cairo_t *cr, int64_t h, int64_t w, cli_gray_fn value, const void *user, double x, double y,
                    double scale) {
    cairo_surface_t *tile = cairo_image_surface_create(CAIRO_FORMAT_RGB24, (int)w, (int)h);
    cairo_surface_flush(tile);
    unsigned char *px = cairo_image_surface_get_data(tile);
    const int stride = cairo_image_surface_get_stride(tile);
    for (int64_t r = 0; px && r < h; r++)
        for (int64_t c = 0; c < w; c++) {
            float g = value(user, r, c);
            g = g < 0 ? 0 : g > 1 ? 1 : g;
            uint32_t v = (uint32_t)(g * 255.0f + 0.5f);
            ((uint32_t *)(px + r * stride))[c] = (v << 16) | (v << 8) | v;
        }
    cairo_surface_mark_dirty(tile);
    cairo_save(cr);
    cairo_translate(cr, x, y);
    cairo_scale(cr, scale, scale);
    cairo_set_source_surface(cr, tile, 0, 0);
    cairo_pattern_set_filter(cairo_get_source(cr), CAIRO_FILTER_NEAREST);
    cairo_paint(cr);
    cairo_restore(cr);
    cairo_surface_destroy(tile);
}

rt_status cli_png_save(cairo_surface_t *s, const char *path) {
    cairo_surface_flush(s);
    if (cairo_surface_status(s) != CAIRO_STATUS_SUCCESS)
        return rt_error_set(RT_ERR_BACKEND, "cannot draw chart '%s': cairo: %s", path,
                            cairo_status_to_string(cairo_surface_status(s)));
    size_t len = strlen(path);
    char *tmp = malloc(len + 5);
    if (!tmp) return rt_error_set(RT_ERR_OOM, "out of memory writing chart '%s'", path);
    memcpy(tmp, path, len);
    memcpy(tmp + len, ".tmp", 5);
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        rt_status st = rt_error_set(RT_ERR_IO, "cannot write chart '%s' (temporary file '%s'): %s", path, tmp,
                                    strerror(errno));
        free(tmp);
        return st;
    }
    cairo_status_t cs = cairo_surface_write_to_png_stream(s, png_write_cb, f);
    int err = ferror(f) ? errno : 0;
    bool bad = cs != CAIRO_STATUS_SUCCESS;
    if (fclose(f) != 0) {
        bad = true;
        if (!err) err = errno;
    }
    rt_status st = RT_OK;
    if (bad) {
        unlink(tmp);
        st = rt_error_set(RT_ERR_IO, "cannot write chart '%s' (temporary file '%s'): %s", path, tmp,
                          err ? strerror(err) : cairo_status_to_string(cs));
    } else if (rename(tmp, path) != 0) {
        err = errno;
        unlink(tmp);
        st = rt_error_set(RT_ERR_IO, "cannot write chart '%s' (renaming '%s' over it): %s", path, tmp,
                          strerror(err));
    }
    free(tmp);
    return st;
}

typedef struct rt_canvas {
    cairo_surface_t *surface;
    cairo_t *cr;
} rt_canvas;

static rt_status canvas_open(int w, int h, rt_canvas *c) {
    c->surface = cairo_image_surface_create(CAIRO_FORMAT_RGB24, w, h);
    c->cr = cairo_create(c->surface);
    if (cairo_status(c->cr) != CAIRO_STATUS_SUCCESS) {
        rt_status st = rt_error_set(RT_ERR_BACKEND, "cannot create a %dx%d image: cairo: %s", w, h,
                                    cairo_status_to_string(cairo_status(c->cr)));
        cairo_destroy(c->cr);
        cairo_surface_destroy(c->surface);
        return st;
    }
    cairo_set_source_rgb(c->cr, 1, 1, 1);
    cairo_paint(c->cr);
    return RT_OK;
}

static rt_status canvas_save_close(rt_canvas *c, const char *path) {
    rt_status st;
    if (cairo_status(c->cr) != CAIRO_STATUS_SUCCESS)
        st = rt_error_set(RT_ERR_BACKEND, "cannot draw chart '%s': cairo: %s", path,
                          cairo_status_to_string(cairo_status(c->cr)));
    else
        st = cli_png_save(c->surface, path);
    cairo_destroy(c->cr);
    cairo_surface_destroy(c->surface);
    return st;
}

/* ------------------------------------------------------------------ cli_plot_lines */

static rt_status check_plot(const cli_plot *p) {
    if (p->n_series == 0 || p->n_series > RT_PLOT_MAX_SERIES)
        return rt_error_set(RT_ERR_INVALID_ARG, "plot: %zu series; give 1 to %d", p->n_series,
                            RT_PLOT_MAX_SERIES);
    if (!p->series) return rt_error_set(RT_ERR_INVALID_ARG, "plot: series is NULL");
    for (size_t k = 0; k < p->n_series; k++) {
        const cli_plot_series *s = &p->series[k];
        if (s->n == 0 || !s->x || !s->y)
            return rt_error_set(RT_ERR_INVALID_ARG, "plot: series %zu ('%s') is empty", k,
                                s->name ? s->name : "");
        if (s->colour < 0 || s->colour > RT_PLOT_MAX_SERIES)
            return rt_error_set(RT_ERR_INVALID_ARG, "plot: series %zu colour %d; use 0 (automatic) or 1..%d",
                                k, s->colour, RT_PLOT_MAX_SERIES);
        if (s->alpha < 0 || s->alpha > 1 || !(s->width >= 0 && s->width < 100))
            return rt_error_set(RT_ERR_INVALID_ARG, "plot: series %zu alpha %g / width %g out of range", k,
                                s->alpha, s->width);
    }
    double a, b, c, d;
    if (!series_range(p->series, p->n_series, &a, &b, &c, &d))
        return rt_error_set(RT_ERR_INVALID_ARG, "plot: no finite point to draw");
    return RT_OK;
}

rt_status cli_plot_lines(const char *png_path, const cli_plot *p) {
    if (!png_path || !p) return rt_error_set(RT_ERR_INVALID_ARG, "cli_plot_lines: NULL argument");
    RT_TRY(check_plot(p));
    rt_canvas c;
    RT_TRY(canvas_open(RT_PLOT_WIDTH, RT_PLOT_HEIGHT, &c));
    draw_lines_panel(c.cr, (rt_rect){0, 0, RT_PLOT_WIDTH, RT_PLOT_HEIGHT}, p, NULL);
    return canvas_save_close(&c, png_path);
}

/* ------------------------------------------------------------------ memory timeline */

/* Stack order, bottom to top: long-lived first, transient on top. */
static const rt_mem_category rt_stack_order[RT_MEM_NCAT] = {RT_MEM_PARAM, RT_MEM_GRAD, RT_MEM_OPTIM,
                                                            RT_MEM_DATA,  RT_MEM_SAVED, RT_MEM_TEMP};
/* palette entry per category (indexed by rt_mem_category) */
static const int rt_cat_colour[RT_MEM_NCAT] = {
    0, /* PARAM blue */
    1, /* GRAD orange */
    4, /* OPTIM purple */
    3, /* SAVED red */
    2, /* TEMP green */
    5, /* DATA brown */
};

#define RT_TIMELINE_EXACT 1000

static double mib(int64_t b) { return (double)b / 1048576.0; }

static void format_mib(char *buf, size_t cap, double v) {
    if (v >= 100.0)
        snprintf(buf, cap, "%.0f", v);
    else if (v >= 10.0)
        snprintf(buf, cap, "%.1f", v);
    else
        snprintf(buf, cap, "%.2f", v);
}

rt_status cli_plot_memory_timeline(const char *png_path, const rt_mem_event *ev, size_t n,
                                  const int64_t baseline[RT_MEM_NCAT], const char *title) {
    if (!png_path || !ev)
        return rt_error_set(RT_ERR_INVALID_ARG, "cli_plot_memory_timeline: NULL argument");
    if (n == 0) return rt_error_set(RT_ERR_INVALID_ARG, "memory timeline: the trace has no events");

    /* pass 1: validate, lowest running sum per category, time span */
    int64_t run[RT_MEM_NCAT] = {0}, low[RT_MEM_NCAT] = {0};
    double t_last = 0.0;
    for (size_t i = 0; i < n; i++) {
        if ((int)ev[i].category < 0 || ev[i].category >= RT_MEM_NCAT)
            return rt_error_set(RT_ERR_INVALID_ARG, "memory timeline: event %zu has category %d", i,
                                (int)ev[i].category);
        if (!isfinite(ev[i].time_s))
            return rt_error_set(RT_ERR_INVALID_ARG, "memory timeline: event %zu has time %g", i, ev[i].time_s);
        run[ev[i].category] += ev[i].delta_bytes;
        if (run[ev[i].category] < low[ev[i].category]) low[ev[i].category] = run[ev[i].category];
        if (ev[i].time_s * 1000.0 > t_last) t_last = ev[i].time_s * 1000.0;
    }
    int64_t base[RT_MEM_NCAT];
    for (int c = 0; c < RT_MEM_NCAT; c++) {
        base[c] = baseline ? baseline[c] : -low[c];
        if (base[c] < 0)
            return rt_error_set(RT_ERR_INVALID_ARG, "memory timeline: baseline[%s] is %lld; live bytes are >= 0",
                                rt_mem_category_str((rt_mem_category)c), (long long)base[c]);
    }
    if (baseline)
        for (int c = 0; c < RT_MEM_NCAT; c++)
            if (base[c] + low[c] < 0) {
                int64_t r = base[c];
                size_t i = 0;
                for (; i < n; i++)
                    if (ev[i].category == (rt_mem_category)c && (r += ev[i].delta_bytes) < 0) break;
                if (i == n) i = n - 1; /* not reached: low[c] came from some event */
                return rt_error_set(RT_ERR_INVALID_ARG,
                                    "memory timeline: %s live bytes drop to %lld at event %zu (op '%s'): the "
                                    "baseline (%lld bytes) is too small; pass the live bytes at the moment "
                                    "tracing was enabled, or NULL",
                                    rt_mem_category_str((rt_mem_category)c), (long long)r, i,
                                    ev[i].op ? ev[i].op : "", (long long)base[c]);
            }
    bool by_index = !(t_last > 0.0);
    double x_hi = by_index ? (double)n : t_last;
    /* the peak total and when it happened */
    int64_t cur[RT_MEM_NCAT], cur_total = 0;
    for (int c = 0; c < RT_MEM_NCAT; c++) cur[c] = base[c], cur_total += base[c];
    int64_t peak = cur_total;
    double peak_x = 0.0;
    for (size_t i = 0; i < n; i++) {
        cur_total += ev[i].delta_bytes;
        if (cur_total > peak) peak = cur_total, peak_x = by_index ? (double)(i + 1) : ev[i].time_s * 1000.0;
    }
    if (peak_x < 0) peak_x = 0;

    rt_canvas cv;
    RT_TRY(canvas_open(RT_PLOT_WIDTH, RT_PLOT_HEIGHT, &cv));
    cairo_t *cr = cv.cr;

    /* legend entries, top of the stack first */
    static const double rt_env_rgb[3] = {0.55, 0.55, 0.55};
    rt_legend_entry le[RT_MEM_NCAT + 1];
    for (int k = 0; k < RT_MEM_NCAT; k++) {
        rt_mem_category c = rt_stack_order[RT_MEM_NCAT - 1 - k];
        le[k] = (rt_legend_entry){rt_mem_category_str(c), rt_palette[rt_cat_colour[c]], 0.85, 0, false, true};
    }
    /* up to RT_TIMELINE_EXACT events are drawn exactly; more per pixel column */
    bool exact = n <= RT_TIMELINE_EXACT;
    size_t nle = RT_MEM_NCAT;
    if (!exact) le[nle++] = (rt_legend_entry){"momentary peak", rt_env_rgb, 0.45, 0, false, true};
    double lw, lh;
    legend_size(cr, le, nle, &lw, &lh);

    rt_frame f;
    axis_make(0.0, x_hi, true, false, by_index, 8, &f.ax);
    axis_make(0.0, mib(peak) * 1.12, true, true, false, 6, &f.ay);
    draw_frame(cr, (rt_rect){0, 0, RT_PLOT_WIDTH, RT_PLOT_HEIGHT},
               title && *title ? title : "memory timeline", by_index ? "event" : "time since tracing began (ms)",
               "live memory (MiB)", lw + 10.0, &f);

    /* Samples: x and the MiB per category holding from x until the next
     * sample. Short traces: one sample per event (exact steps). Long traces:
     * one per pixel column, the time-weighted mean per category, plus the
     * highest total reached inside the column (smax), drawn as a band. */
    size_t cols = f.area.w > 1 ? (size_t)f.area.w : 1; /* area.w is whole pixels */
    size_t cap = exact ? n + 1 : cols;
    double *sx = malloc(cap * sizeof *sx), *smax = exact ? NULL : malloc(cap * sizeof *smax);
    double(*sv)[RT_MEM_NCAT] = calloc(cap, sizeof *sv);
    if (!sx || !sv || (!exact && !smax)) {
        free(sx);
        free(sv);
        free(smax);
        cairo_destroy(cv.cr);
        cairo_surface_destroy(cv.surface);
        return rt_error_set(RT_ERR_OOM, "out of memory drawing memory timeline '%s'", png_path);
    }
    cur_total = 0;
    for (int c = 0; c < RT_MEM_NCAT; c++) cur[c] = base[c], cur_total += base[c];
    size_t ns = 0;
    if (exact) {
        sx[ns] = 0.0;
        for (int c = 0; c < RT_MEM_NCAT; c++) sv[ns][c] = mib(cur[c]);
        ns++;
    } else {
        ns = cols;
        for (size_t b = 0; b < cols; b++) sx[b] = x_hi * (double)b / (double)cols;
        smax[0] = mib(cur_total);
    }
    const double dx = x_hi / (double)cols;
    size_t bucket = 0;
    double last = 0.0;
    for (size_t i = 0; i <= n; i++) {
        double x = i == n ? x_hi : by_index ? (double)(i + 1) : ev[i].time_s * 1000.0;
        if (x < 0) x = 0;
        if (!exact) { /* integrate the current state from `last` up to x, column by column */
            if (x > x_hi) x = x_hi;
            while (bucket < cols) {
                double bend = bucket + 1 == cols ? x_hi : (double)(bucket + 1) * dx;
                double end = x < bend ? x : bend;
                if (end > last) {
                    for (int c = 0; c < RT_MEM_NCAT; c++) sv[bucket][c] += mib(cur[c]) * (end - last) / dx;
                    last = end;
                }
                if (x < bend || bucket + 1 == cols) break;
                smax[++bucket] = mib(cur_total);
            }
        }
        if (i == n) break;
        cur[ev[i].category] += ev[i].delta_bytes;
        cur_total += ev[i].delta_bytes;
        if (exact) {
            sx[ns] = x;
            for (int c = 0; c < RT_MEM_NCAT; c++) sv[ns][c] = mib(cur[c]);
            ns++;
        } else if (mib(cur_total) > smax[bucket]) {
            smax[bucket] = mib(cur_total);
        }
    }

    cairo_save(cr);
    cairo_rectangle(cr, f.area.x, f.area.y, f.area.w, f.area.h);
    cairo_clip(cr);
    /* Painter's order: fill from 0 up to the top of the stack (or the
     * momentary peak), then from 0 up to the top of each lower layer, so
     * neighbouring layers share no anti-aliased edge and no seam shows. */
    for (int k = exact ? RT_MEM_NCAT - 1 : RT_MEM_NCAT; k >= 0; k--) {
        const double *rgb;
        double a;
        if (k == RT_MEM_NCAT) rgb = rt_env_rgb, a = 0.45;
        else rgb = rt_palette[rt_cat_colour[rt_stack_order[k]]], a = 0.85;
        for (size_t i = 0; i < ns; i++) {
            double top = 0;
            if (k == RT_MEM_NCAT) top = smax[i];
            else
                for (int j = 0; j <= k; j++) top += sv[i][rt_stack_order[j]];
            double y = map_y(&f, top);
            double x0 = map_x(&f, sx[i]), x1 = map_x(&f, i + 1 < ns ? sx[i + 1] : x_hi);
            if (i == 0) cairo_move_to(cr, x0, y);
            else cairo_line_to(cr, x0, y);
            cairo_line_to(cr, x1, y);
        }
        cairo_line_to(cr, map_x(&f, x_hi), map_y(&f, 0.0));
        cairo_line_to(cr, map_x(&f, 0.0), map_y(&f, 0.0));
        cairo_close_path(cr);
        /* opaque colour = the palette colour at opacity a over white */
        cairo_set_source_rgb(cr, a * rgb[0] + 1 - a, a * rgb[1] + 1 - a, a * rgb[2] + 1 - a);
        cairo_fill(cr);
    }
    /* total outline (exact steps only; per column it would be noise) */
    if (exact) {
        cairo_set_source_rgb(cr, 0.2, 0.2, 0.2);
        cairo_set_line_width(cr, 1.0);
        for (size_t i = 0; i < ns; i++) {
            double tot = 0;
            for (int c = 0; c < RT_MEM_NCAT; c++) tot += sv[i][c];
            double y = map_y(&f, tot);
            double x0 = map_x(&f, sx[i]), x1 = map_x(&f, i + 1 < ns ? sx[i + 1] : x_hi);
            if (i == 0) cairo_move_to(cr, x0, y);
            else cairo_line_to(cr, x0, y);
            cairo_line_to(cr, x1, y);
        }
        cairo_stroke(cr);
    }
    /* where each backward begins (one per micro-batch): the first event booked
     * to a "backward:<op>" of the step, and again after each "micro_batch"
     * event (the slice that starts the next micro-batch's forward). Forwards
     * re-run inside backward (reversible rebuilds) do not count. */
    bool in_forward = true, labelled = false;
    for (size_t i = 0; i < n; i++) {
        bool backward = ev[i].op && !strncmp(ev[i].op, "backward:", 9);
        if (!backward) {
            in_forward |= ev[i].op && !strcmp(ev[i].op, "micro_batch");
            continue;
        }
        if (!in_forward) continue;
        in_forward = false;
        double bx = round(map_x(&f, by_index ? (double)i : ev[i].time_s * 1000.0)) + 0.5;
        cairo_set_source_rgb(cr, 0.15, 0.15, 0.55);
        cairo_set_line_width(cr, 1.5);
        cairo_move_to(cr, bx, f.area.y);
        cairo_line_to(cr, bx, f.area.y + f.area.h);
        cairo_stroke(cr);
        if (labelled) continue;
        labelled = true;
        set_font(cr, RT_LABEL_PX, false);
        /* a forward too narrow for its label stays unlabelled rather than clipped */
        if (bx - 6.0 - text_width(cr, "forward") >= f.area.x + 2.0)
            draw_text(cr, bx - 6.0, f.area.y + 6.0, "forward", 1.0, 0.0);
        draw_text(cr, bx + 6.0, f.area.y + 6.0, "backward", 0.0, 0.0);
    }
    /* peak marker */
    double py = map_y(&f, mib(peak)), px = map_x(&f, peak_x);
    const double dash[2] = {5.0, 4.0};
    cairo_set_dash(cr, dash, 2, 0);
    cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
    cairo_move_to(cr, f.area.x, round(py) + 0.5);
    cairo_line_to(cr, f.area.x + f.area.w, round(py) + 0.5);
    cairo_stroke(cr);
    cairo_set_dash(cr, NULL, 0, 0);
    cairo_arc(cr, px, py, 4.0, 0, 2 * RT_PI);
    cairo_fill(cr);
    char num[32], label[64];
    format_mib(num, sizeof num, mib(peak));
    snprintf(label, sizeof label, "peak %s MiB", num);
    set_font(cr, RT_LABEL_PX, true);
    double tw = text_width(cr, label);
    double lx = px + 8.0;
    if (lx + tw > f.area.x + f.area.w - 6.0) lx = px - 8.0 - tw;
    if (lx < f.area.x + 6.0) lx = f.area.x + 6.0;
    cairo_set_source_rgba(cr, 1, 1, 1, 0.85);
    cairo_rectangle(cr, lx - 3.0, py - 22.0, tw + 6.0, 17.0);
    cairo_fill(cr);
    cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
    draw_text(cr, lx, py - 8.0, label, 0.0, 1.0);
    cairo_restore(cr);

    draw_legend(cr, le, nle, f.area.x + f.area.w + 12.0, f.area.y);
    free(sx);
    free(sv);
    free(smax);
    return canvas_save_close(&cv, png_path);
}

/* ------------------------------------------------------------------ training CSV */

typedef struct rt_csv {
    size_t ncol, nrow, cap;
    char **names;
    double *v; /* nrow x ncol */
} rt_csv;

static void csv_free(rt_csv *c) {
    for (size_t i = 0; i < c->ncol; i++) free(c->names[i]);
    free(c->names);
    free(c->v);
    memset(c, 0, sizeof *c);
}

static size_t split_fields(char *line, char **fields, size_t max) {
    size_t n = 0;
    char *p = line;
    for (;;) {
        char *comma = strchr(p, ',');
        if (n < max) fields[n] = p;
        n++;
        if (!comma) break;
        *comma = '\0';
        p = comma + 1;
    }
    return n;
}

static void chomp(char *s) {
    size_t l = strlen(s);
    while (l > 0 && (s[l - 1] == '\n' || s[l - 1] == '\r' || s[l - 1] == ' ')) s[--l] = '\0';
}

/* Reads a numeric CSV with a header row. *missing (may be NULL) is set when
 * the file does not exist, and then RT_ERR_IO is returned. */
static rt_status csv_read(const char *path, rt_csv *out, bool *missing) {
    memset(out, 0, sizeof *out);
    if (missing) *missing = false;
    /* a FIFO or a device would block or never end: read regular files only, of bounded size */
    struct stat sb;
    if (stat(path, &sb) == 0 && !S_ISREG(sb.st_mode))
        return rt_error_set(RT_ERR_IO, "cannot read '%s': not a regular file", path);
    if (stat(path, &sb) == 0 && sb.st_size > RT_PLOT_CSV_MAX_BYTES)
        return rt_error_set(RT_ERR_IO, "cannot read '%s': %lld bytes, more than the %d MiB a training log can hold",
                            path, (long long)sb.st_size, RT_PLOT_CSV_MAX_BYTES >> 20);
    FILE *f = fopen(path, "r");
    if (!f) {
        if (missing) *missing = errno == ENOENT;
        return rt_error_set(RT_ERR_IO, "cannot read '%s': %s", path, strerror(errno));
    }
    char *line = NULL, **fields = NULL;
    size_t lcap = 0, lineno = 0;
    rt_status st = RT_OK;
    ssize_t got;
    while ((got = getline(&line, &lcap, f)) >= 0) {
        lineno++;
        chomp(line);
        if (!*line) continue;
        if (!out->names) {
            size_t n = 1;
            for (const char *q = line; *q; q++) n += *q == ',';
            out->names = calloc(n, sizeof *out->names);
            fields = calloc(n + 1, sizeof *fields);
            if (!out->names || !fields) {
                st = rt_error_set(RT_ERR_OOM, "out of memory reading '%s'", path);
                break;
            }
            split_fields(line, fields, n);
            out->ncol = n;
            for (size_t i = 0; i < n; i++) {
                out->names[i] = strdup(fields[i]);
                if (!out->names[i]) {
                    st = rt_error_set(RT_ERR_OOM, "out of memory reading '%s'", path);
                    break;
                }
            }
            if (st != RT_OK) break;
            continue;
        }
        size_t n = split_fields(line, fields, out->ncol + 1);
        if (n != out->ncol) {
            st = rt_error_set(RT_ERR_FORMAT, "%s:%zu: %zu fields, the header has %zu", path, lineno, n,
                              out->ncol);
            break;
        }
        if (out->nrow == out->cap) {
            size_t nc = out->cap ? out->cap * 2 : 64;
            double *nv = realloc(out->v, nc * out->ncol * sizeof *nv);
            if (!nv) {
                st = rt_error_set(RT_ERR_OOM, "out of memory reading '%s'", path);
                break;
            }
            out->v = nv;
            out->cap = nc;
        }
        for (size_t i = 0; i < n && st == RT_OK; i++) {
            char *end;
            errno = 0;
            double d = strtod(fields[i], &end);
            if (end == fields[i] || *end)
                st = rt_error_set(RT_ERR_FORMAT, "%s:%zu: column '%s' holds '%s', not a number", path, lineno,
                                  out->names[i], fields[i]);
            out->v[out->nrow * out->ncol + i] = d;
        }
        if (st != RT_OK) break;
        out->nrow++;
    }
    if (st == RT_OK && ferror(f)) st = rt_error_set(RT_ERR_IO, "cannot read '%s': %s", path, strerror(errno));
    if (st == RT_OK && !out->names) st = rt_error_set(RT_ERR_FORMAT, "'%s' is empty (no header row)", path);
    free(line);
    free(fields);
    fclose(f);
    if (st != RT_OK) csv_free(out);
    return st;
}

static rt_status csv_col(const rt_csv *c, const char *path, const char *name, size_t *col) {
    for (size_t i = 0; i < c->ncol; i++)
        if (!strcmp(c->names[i], name)) {
            *col = i;
            return RT_OK;
        }
    return rt_error_set(RT_ERR_FORMAT, "'%s' has no column '%s' (is it a `revtorch train --log` file?)", path,
                        name);
}

void cli_training_curves_free(cli_training_curves *c) {
    free(c->epochs);
    free(c->steps);
    memset(c, 0, sizeof *c);
}

rt_status cli_training_curves_add_epoch(cli_training_curves *c, const cli_epoch_row *row) {
    if (c->n_epochs == c->cap_epochs) {
        size_t cap = c->cap_epochs ? 2 * c->cap_epochs : 16;
        cli_epoch_row *e = realloc(c->epochs, cap * sizeof *e);
        if (!e) return rt_error_set(RT_ERR_OOM, "out of memory keeping the training curves");
        c->epochs = e;
        c->cap_epochs = cap;
    }
    c->epochs[c->n_epochs++] = *row;
    return RT_OK;
}

rt_status cli_training_curves_add_step(cli_training_curves *c, int64_t epoch, double loss) {
    if (epoch < 0 || epoch >= 10000000)
        return rt_error_set(RT_ERR_INVALID_ARG, "training curves: step of epoch %lld; expected 0 <= epoch < 1e7",
                            (long long)epoch);
    if (c->n_steps == c->cap_steps) {
        size_t cap = c->cap_steps ? 2 * c->cap_steps : 256;
        cli_step_row *s = realloc(c->steps, cap * sizeof *s);
        if (!s) return rt_error_set(RT_ERR_OOM, "out of memory keeping the training curves");
        c->steps = s;
        c->cap_steps = cap;
    }
    c->steps[c->n_steps++] = (cli_step_row){.epoch = epoch, .loss = loss};
    return RT_OK;
}

rt_status cli_training_curves_read(const char *csv_path, const char *steps_path, cli_training_curves *c) {
    memset(c, 0, sizeof *c);
    if (!csv_path) return rt_error_set(RT_ERR_INVALID_ARG, "cli_training_curves_read: NULL path");
    rt_csv ep, st_csv;
    memset(&st_csv, 0, sizeof st_csv);
    RT_TRY(csv_read(csv_path, &ep, NULL));
    size_t c_ep = 0, c_trl = 0, c_tra = 0, c_tel = 0, c_tea = 0;
    rt_status st = RT_OK;
    if ((st = csv_col(&ep, csv_path, "epoch", &c_ep)) != RT_OK ||
        (st = csv_col(&ep, csv_path, "train_loss", &c_trl)) != RT_OK ||
        (st = csv_col(&ep, csv_path, "train_acc", &c_tra)) != RT_OK ||
        (st = csv_col(&ep, csv_path, "test_loss", &c_tel)) != RT_OK ||
        (st = csv_col(&ep, csv_path, "test_acc", &c_tea)) != RT_OK)
        goto out;
    for (size_t r = 0; r < ep.nrow && st == RT_OK; r++) {
        const double *v = ep.v + r * ep.ncol;
        st = cli_training_curves_add_epoch(c, &(cli_epoch_row){.epoch = v[c_ep], .train_loss = v[c_trl],
                                                               .train_acc = v[c_tra], .test_loss = v[c_tel],
                                                               .test_acc = v[c_tea]});
    }
    if (st != RT_OK || !steps_path) goto out;
    bool missing = false;
    st = csv_read(steps_path, &st_csv, &missing);
    if (st != RT_OK) {
        if (missing) {
            st = RT_OK;
            rt_error_clear();
        }
        goto out;
    }
    size_t s_ep = 0, s_loss = 0, s_skip = 0;
    if ((st = csv_col(&st_csv, steps_path, "epoch", &s_ep)) != RT_OK ||
        (st = csv_col(&st_csv, steps_path, "loss", &s_loss)) != RT_OK)
        goto out;
    /* steps the loss scaler skipped (a later column; older files lack it) are not on the curve */
    bool has_skip = csv_col(&st_csv, steps_path, "skipped", &s_skip) == RT_OK;
    if (!has_skip) rt_error_clear();
    /* The file counts epochs from 1, as the per-epoch log does; files written
     * before counted from 0, and only they hold an epoch 0, so such a file
     * is read as it was written. */
    double first = 1;
    for (size_t r = 0; r < st_csv.nrow; r++)
        if (st_csv.v[r * st_csv.ncol + s_ep] < first) first = st_csv.v[r * st_csv.ncol + s_ep];
    const double base = first == 0 ? 0 : 1;
    for (size_t r = 0; r < st_csv.nrow && st == RT_OK; r++) {
        if (has_skip && st_csv.v[r * st_csv.ncol + s_skip] != 0) continue;
        double e = st_csv.v[r * st_csv.ncol + s_ep] - base;
        if (!(e >= 0 && e < 1e7 && e == floor(e)))
            st = rt_error_set(RT_ERR_FORMAT, "%s: row %zu has epoch %g; expected a whole number >= 1", steps_path,
                              r + 1, e + base);
        else
            st = cli_training_curves_add_step(c, (int64_t)e, st_csv.v[r * st_csv.ncol + s_loss]);
    }
out:
    csv_free(&ep);
    csv_free(&st_csv);
    if (st != RT_OK) cli_training_curves_free(c);
    return st;
}

rt_status cli_plot_training(const char *png_path, const cli_training_curves *c, const char *name) {
    if (!png_path || !c) return rt_error_set(RT_ERR_INVALID_ARG, "cli_plot_training: NULL argument");
    size_t nsteps = c->n_steps, nep = c->n_epochs;
    if (nep == 0 && nsteps == 0)
        return rt_error_set(RT_ERR_FORMAT, "'%s' has no rows yet (no epoch and no step recorded)",
                            name ? name : png_path);
    rt_status st = RT_OK;
    double *ex = NULL, *trl = NULL, *tra = NULL, *tel = NULL, *tea = NULL, *sx = NULL, *sy = NULL, *sm = NULL;
    double *pre = NULL;
    int64_t *count = NULL, *seen = NULL;
    rt_canvas cv = {0};
    if (nsteps) {
        /* place each step at its fraction of its epoch: epoch e (0-based) spans (e, e+1] */
        int64_t max_ep = 0;
        for (size_t r = 0; r < nsteps; r++)
            if (c->steps[r].epoch > max_ep) max_ep = c->steps[r].epoch;
        count = calloc((size_t)max_ep + 1, sizeof *count);
        seen = calloc((size_t)max_ep + 1, sizeof *seen);
        sx = malloc(nsteps * sizeof *sx);
        sy = malloc(nsteps * sizeof *sy);
        sm = malloc(nsteps * sizeof *sm);
        pre = malloc((nsteps + 1) * 2 * sizeof *pre);
        if (!count || !seen || !sx || !sy || !sm || !pre) {
            st = rt_error_set(RT_ERR_OOM, "out of memory plotting '%s'", png_path);
            goto out;
        }
        for (size_t r = 0; r < nsteps; r++) count[c->steps[r].epoch]++;
        for (size_t r = 0; r < nsteps; r++) {
            int64_t e = c->steps[r].epoch;
            sx[r] = (double)e + (double)(++seen[e]) / (double)count[e];
            sy[r] = c->steps[r].loss;
        }
        /* centred moving average over the finite losses, window ~ 1/50 of the run
         * (prefix sums of value and count; NaN/Inf steps are left out) */
        size_t half = nsteps / 100;
        if (half < 1) half = 1;
        double *pk = pre + nsteps + 1;
        pre[0] = pk[0] = 0.0;
        for (size_t r = 0; r < nsteps; r++) {
            bool ok = isfinite(sy[r]);
            pre[r + 1] = pre[r] + (ok ? sy[r] : 0.0);
            pk[r + 1] = pk[r] + (ok ? 1.0 : 0.0);
        }
        for (size_t r = 0; r < nsteps; r++) {
            size_t a = r > half ? r - half : 0, b = r + half < nsteps ? r + half + 1 : nsteps;
            double k = pk[b] - pk[a];
            sm[r] = k > 0 ? (pre[b] - pre[a]) / k : NAN;
        }
    }
    size_t ne = nep ? nep : 1;
    ex = malloc(ne * sizeof *ex);
    trl = malloc(ne * sizeof *trl);
    tel = malloc(ne * sizeof *tel);
    tra = malloc(ne * sizeof *tra);
    tea = malloc(ne * sizeof *tea);
    if (!ex || !trl || !tel || !tra || !tea) {
        st = rt_error_set(RT_ERR_OOM, "out of memory plotting '%s'", png_path);
        goto out;
    }
    for (size_t r = 0; r < nep; r++) {
        ex[r] = c->epochs[r].epoch;
        trl[r] = c->epochs[r].train_loss;
        tel[r] = c->epochs[r].test_loss;
        tra[r] = 100.0 * c->epochs[r].train_acc;
        tea[r] = 100.0 * c->epochs[r].test_acc;
    }

    cli_plot_series loss[4];
    size_t nl = 0;
    if (nsteps) {
        loss[nl++] = (cli_plot_series){.name = "step loss", .x = sx, .y = sy, .n = nsteps, .colour = 8,
                                      .width = 1.0, .alpha = 0.35};
        loss[nl++] = (cli_plot_series){.name = "step loss (moving avg)", .x = sx, .y = sm, .n = nsteps,
                                      .colour = 8, .width = 1.6, .alpha = 0.9};
    }
    if (nep) {
        loss[nl++] = (cli_plot_series){.name = "train loss (epoch)", .x = ex, .y = trl, .n = nep,
                                      .colour = 1, .width = 2.2, .markers = true};
        loss[nl++] = (cli_plot_series){.name = "test loss", .x = ex, .y = tel, .n = nep, .colour = 2,
                                      .width = 2.2, .markers = true};
    }
    cli_plot_series acc[2] = {
        {.name = "train accuracy", .x = ex, .y = tra, .n = nep, .colour = 1, .width = 2.2, .markers = true},
        {.name = "test accuracy", .x = ex, .y = tea, .n = nep, .colour = 2, .width = 2.2, .markers = true},
    };
    const char *base = name ? strrchr(name, '/') : NULL;
    base = base ? base + 1 : name ? name : "";
    char t_loss[300], t_acc[300];
    snprintf(t_loss, sizeof t_loss, "loss  (%s)", base);
    snprintf(t_acc, sizeof t_acc, "accuracy  (%s)", base);
    cli_plot pl = {.title = t_loss, .x_label = "epoch", .y_label = "cross-entropy loss", .series = loss,
                  .n_series = nl, .x_from_zero = true, .y_from_zero = true, .x_integer = true};
    cli_plot pa = {.title = t_acc, .x_label = "epoch", .y_label = "accuracy (%)", .series = acc,
                  .n_series = nep ? 2 : 0, .x_from_zero = true, .x_integer = true};
    if ((st = canvas_open(RT_PLOT_TRAINING_WIDTH, RT_PLOT_TRAINING_HEIGHT, &cv)) != RT_OK) goto out;
    const double half_w = RT_PLOT_TRAINING_WIDTH / 2.0;
    draw_lines_panel(cv.cr, (rt_rect){0, 0, half_w, RT_PLOT_TRAINING_HEIGHT}, &pl, "no finite loss");
    draw_lines_panel(cv.cr, (rt_rect){half_w, 0, half_w, RT_PLOT_TRAINING_HEIGHT}, &pa,
                     "no epoch finished yet");
    st = canvas_save_close(&cv, png_path);

out:
    free(ex);
    free(trl);
    free(tra);
    free(tel);
    free(tea);
    free(sx);
    free(sy);
    free(sm);
    free(pre);
    free(count);
    free(seen);
    return st;
}

rt_status cli_plot_training_csv(const char *csv_path, const char *png_path) {
    if (!csv_path || !png_path) return rt_error_set(RT_ERR_INVALID_ARG, "cli_plot_training_csv: NULL path");
    /* the steps file: same name with ".csv" replaced by ".steps.csv" (as train writes it) */
    size_t len = strlen(csv_path);
    size_t stem = len > 4 && !strcmp(csv_path + len - 4, ".csv") ? len - 4 : len;
    char *steps_path = malloc(stem + 11);
    if (!steps_path) return rt_error_set(RT_ERR_OOM, "out of memory plotting '%s'", csv_path);
    memcpy(steps_path, csv_path, stem);
    memcpy(steps_path + stem, ".steps.csv", 11);
    cli_training_curves c;
    rt_status st = cli_training_curves_read(csv_path, steps_path, &c);
    if (st == RT_OK && c.n_epochs == 0 && c.n_steps == 0)
        st = rt_error_set(RT_ERR_FORMAT, "'%s' has no rows yet (and no steps file '%s')", csv_path, steps_path);
    if (st == RT_OK) st = cli_plot_training(png_path, &c, csv_path);
    cli_training_curves_free(&c);
    free(steps_path);
    return st;
}
