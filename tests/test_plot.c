/* PNG charts (cli/plot.c, compiled into this test): line chart, memory
 * timeline and training curves are written, are PNGs of the documented size,
 * and failures leave neither a broken PNG nor a .tmp file behind. What is
 * drawn is checked by reading each PNG back with cairo: the plot area is
 * found from its frame, then series colours must appear where the data puts
 * them (and nowhere else), stacked memory categories must have the areas and
 * order of the trace, and titles, labels and legends must leave ink.
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

#include <cairo.h>

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

/* ------------------------------------------------------------------ reading pixels back */

typedef struct rgb {
    int r, g, b;
} rgb;

/* The palette of plot.h (Tableau 10): colour k of cli_plot_series.colour is pal_[k - 1]. */
static const rgb pal_[RT_PLOT_MAX_SERIES] = {
    {0x1f, 0x77, 0xb4}, {0xff, 0x7f, 0x0e}, {0x2c, 0xa0, 0x2c}, {0xd6, 0x27, 0x28},
    {0x94, 0x67, 0xbd}, {0x8c, 0x56, 0x4b}, {0xe3, 0x77, 0xc2}, {0x7f, 0x7f, 0x7f},
};
#define BLUE pal_[0]
#define ORANGE pal_[1]
#define RED pal_[3]
#define GREY pal_[7]
static const rgb FRAME_ = {89, 89, 89};   /* frame and tick marks: 0.35 grey */
static const rgb LEGEND_ = {204, 204, 204}; /* legend border: 0.8 grey */

/* c at opacity a over white, as opaque pixels come out. */
static rgb over_white(rgb c, double a) {
    return (rgb){(int)lround(a * c.r + (1 - a) * 255), (int)lround(a * c.g + (1 - a) * 255),
                 (int)lround(a * c.b + (1 - a) * 255)};
}

/* One PNG read back; a new png_open closes the previous one, so a failed
 * CHECK never leaks the surface for long. */
typedef struct png_img {
    cairo_surface_t *s;
    const unsigned char *d;
    int w, h, stride;
} png_img;
static png_img img_;

static void png_close(void) {
    if (img_.s) cairo_surface_destroy(img_.s);
    memset(&img_, 0, sizeof img_);
}

static const png_img *png_open(const char *path) {
    png_close();
    cairo_surface_t *s = cairo_image_surface_create_from_png(path);
    if (cairo_surface_status(s) != CAIRO_STATUS_SUCCESS) {
        fprintf(stderr, "cannot read %s back: %s\n", path, cairo_status_to_string(cairo_surface_status(s)));
        cairo_surface_destroy(s);
        return NULL;
    }
    cairo_format_t f = cairo_image_surface_get_format(s);
    if (f != CAIRO_FORMAT_RGB24 && f != CAIRO_FORMAT_ARGB32) {
        fprintf(stderr, "%s: unexpected cairo format %d\n", path, (int)f);
        cairo_surface_destroy(s);
        return NULL;
    }
    cairo_surface_flush(s);
    img_.s = s;
    img_.d = cairo_image_surface_get_data(s);
    img_.w = cairo_image_surface_get_width(s);
    img_.h = cairo_image_surface_get_height(s);
    img_.stride = cairo_image_surface_get_stride(s);
    return &img_;
}

static rgb pix(const png_img *im, int x, int y) {
    uint32_t v;
    memcpy(&v, im->d + (size_t)y * (size_t)im->stride + (size_t)x * 4, 4); /* native-endian xRGB */
    return (rgb){(int)(v >> 16 & 0xff), (int)(v >> 8 & 0xff), (int)(v & 0xff)};
}

static int near_rgb(rgb p, rgb c, int tol) {
    return abs(p.r - c.r) <= tol && abs(p.g - c.g) <= tol && abs(p.b - c.b) <= tol;
}

/* p is colour c drawn over white with coverage >= 0.3 (anti-aliased edges
 * and thin dots included, other colours and greys excluded). */
static int tinted(rgb p, rgb c) {
    const int pc[3] = {p.r, p.g, p.b}, cc[3] = {c.r, c.g, c.b};
    int k = 0;
    for (int j = 1; j < 3; j++)
        if (255 - cc[j] > 255 - cc[k]) k = j;
    double a = (double)(255 - pc[k]) / (double)(255 - cc[k]);
    if (a < 0.3 || a > 1.05) return 0;
    for (int j = 0; j < 3; j++)
        if (fabs(pc[j] - (255.0 - a * (255 - cc[j]))) > 14.0) return 0;
    return 1;
}

static int is_dark(rgb p) { return p.r < 110 && p.g < 110 && p.b < 110; }

/* Half-open pixel box [x0, x1) x [y0, y1). */
typedef struct box {
    int x0, y0, x1, y1;
} box;

/* Pixels in b tinted c / within tol of c / dark. */
static int count_tinted(const png_img *im, box b, rgb c) {
    int n = 0;
    for (int y = b.y0; y < b.y1; y++)
        for (int x = b.x0; x < b.x1; x++) n += tinted(pix(im, x, y), c);
    return n;
}
static int count_near(const png_img *im, box b, rgb c, int tol) {
    int n = 0;
    for (int y = b.y0; y < b.y1; y++)
        for (int x = b.x0; x < b.x1; x++) n += near_rgb(pix(im, x, y), c, tol);
    return n;
}
static int count_dark(const png_img *im, box b) {
    int n = 0;
    for (int y = b.y0; y < b.y1; y++)
        for (int x = b.x0; x < b.x1; x++) n += is_dark(pix(im, x, y));
    return n;
}

/* The frame of the panel within columns [x0, x1): its top and bottom rows
 * and right column are the outermost lines that are frame grey for more than
 * 150 pixels; its left column is the leftmost one that is frame grey over the
 * first 40 rows below the top (lower down, stacked areas may cover it). In
 * the result x0/y0 are the left column / top row (where data x = axis lo and
 * y = axis hi map), x1/y1 the right column / bottom row. */
static int find_frame(const png_img *im, int x0, int x1, box *area) {
    int l = -1, r = -1, t = -1, b = -1;
    for (int y = 0; y < im->h; y++) {
        int n = 0;
        for (int x = x0; x < x1; x++) n += near_rgb(pix(im, x, y), FRAME_, 2);
        if (n > 150) {
            if (t < 0) t = y;
            b = y;
        }
    }
    for (int x = x0; x < x1; x++) {
        int n = 0;
        for (int y = 0; y < im->h; y++) n += near_rgb(pix(im, x, y), FRAME_, 2);
        if (n > 150) r = x;
    }
    for (int x = x0; t >= 0 && r >= 0 && x < r && l < 0; x++) {
        int n = 0;
        for (int y = t; y <= t + 40 && y < im->h; y++) n += near_rgb(pix(im, x, y), FRAME_, 2);
        if (n >= 37) l = x;
    }
    if (l < 0 || t < 0 || r - l < 100 || b - t < 100) {
        fprintf(stderr, "no plot frame found in columns [%d, %d)\n", x0, x1);
        return 0;
    }
    *area = (box){l, t, r, b};
    return 1;
}

/* Inside of a frame (the frame lines themselves excluded). */
static box inside(box f) { return (box){f.x0 + 1, f.y0 + 1, f.x1, f.y1}; }

/* Mean row of the pixels tinted c in column x between rows y0..y1 (-1 when none). */
static double centroid_row(const png_img *im, int x, int y0, int y1, rgb c) {
    double sum = 0;
    int n = 0;
    for (int y = y0; y < y1; y++)
        if (tinted(pix(im, x, y), c)) sum += y, n++;
    return n ? sum / n : -1.0;
}

/* Bounding box of the legend inside b: the rows and, between them, the
 * columns that hold a run of its 0.8 grey border (>= 50 and >= 20 pixels;
 * stray pixels of that grey elsewhere do not count). 0 when there is none. */
static int find_legend(const png_img *im, box b, box *out) {
    box r = {-1, -1, -1, -1};
    for (int y = b.y0; y < b.y1; y++) {
        int n = 0;
        for (int x = b.x0; x < b.x1; x++) n += near_rgb(pix(im, x, y), LEGEND_, 1);
        if (n >= 50) {
            if (r.y0 < 0) r.y0 = y;
            r.y1 = y + 1;
        }
    }
    for (int x = b.x0; r.y0 >= 0 && x < b.x1; x++) {
        int n = 0;
        for (int y = r.y0; y < r.y1; y++) n += near_rgb(pix(im, x, y), LEGEND_, 1);
        if (n >= 20) {
            if (r.x0 < 0) r.x0 = x;
            r.x1 = x + 1;
        }
    }
    if (r.y0 < 0 || r.x0 < 0 || r.x1 - r.x0 < 50 || r.y1 - r.y0 < 20) return 0;
    *out = r;
    return 1;
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
    cli_plot_series s[3] = {
        {.name = "3 sin(x)", .x = x, .y = a, .n = NPTS},
        {.name = "2 cos(x) + 1", .x = x, .y = b, .n = NPTS},
        {.name = "decay", .x = x, .y = c, .n = NPTS, .markers = true, .width = 1.0},
    };
    cli_plot p = {.title = "cli_plot_lines test", .x_label = "x (radians)", .y_label = "value", .series = s,
                 .n_series = 3};
    char png[600];
    path_in(png, sizeof png, "lines.png");
    CHECK_OK(cli_plot_lines(png, &p));
    CHECK(png_is(png, RT_PLOT_WIDTH, RT_PLOT_HEIGHT));
    CHECK(!tmp_exists(png));
    if (!keep_) unlink(png);
}

/* A rising line (auto colour: blue) and a falling one (colour 4: red), no
 * legend: each colour runs from edge to edge of the plot area, low-left to
 * high-right for the rising one and the reverse for the falling one, its
 * height changing monotonically across the area; title and axis labels
 * leave ink, and without them the title band stays blank. */
static void test_lines_drawn(void) {
    enum { N = 101 };
    static double x[N], up[N], down[N];
    for (int i = 0; i < N; i++) {
        x[i] = i * 0.1;
        up[i] = x[i];
        down[i] = 10.0 - x[i];
    }
    cli_plot_series s[2] = {{.x = x, .y = up, .n = N}, {.x = x, .y = down, .n = N, .colour = 4}};
    cli_plot p = {.title = "two lines", .x_label = "x axis", .y_label = "y axis", .series = s, .n_series = 2};
    char png[600];
    path_in(png, sizeof png, "lines_drawn.png");
    CHECK_OK(cli_plot_lines(png, &p));
    const png_img *im = png_open(png);
    CHECK(im != NULL);
    CHECK_EQ_INT(im->w, RT_PLOT_WIDTH);
    CHECK_EQ_INT(im->h, RT_PLOT_HEIGHT);
    box f;
    CHECK(find_frame(im, 0, im->w, &f));
    box in = inside(f);
    const int w = f.x1 - f.x0, h = f.y1 - f.y0;
    CHECK(w > 600 && h > 350);

    /* both colours across the whole width (x spans the data exactly) */
    for (int k = 0; k < 2; k++) {
        const rgb c = k == 0 ? BLUE : RED;
        int first = -1, last = -1, cols = 0;
        for (int xx = in.x0; xx < in.x1; xx++)
            if (centroid_row(im, xx, in.y0, in.y1, c) >= 0) {
                if (first < 0) first = xx;
                last = xx;
                cols++;
            }
        CHECK(first >= 0);
        CHECK(first - f.x0 <= 3);
        CHECK(f.x1 - last <= 3);
        CHECK(cols > (in.x1 - in.x0) * 9 / 10); /* only the crossing hides one under the other */
    }
    /* where the ends are: rising = bottom-left to top-right, falling the reverse */
    double ul = centroid_row(im, f.x0 + 4, in.y0, in.y1, BLUE), ur = centroid_row(im, f.x1 - 4, in.y0, in.y1, BLUE);
    double dl = centroid_row(im, f.x0 + 4, in.y0, in.y1, RED), dr = centroid_row(im, f.x1 - 4, in.y0, in.y1, RED);
    CHECK(ul > f.y0 + 0.75 * h && ur >= 0 && ur < f.y0 + 0.25 * h);
    CHECK(dl >= 0 && dl < f.y0 + 0.25 * h && dr > f.y0 + 0.75 * h);
    CHECK_NEAR(ul, dr, 1.5); /* y = 0 at both ends */
    CHECK_NEAR(ur, dl, 1.5); /* y = 10 */
    /* monotonic: sampled every 25 px away from the crossing, the rising line climbs */
    double prev_u = 1e9, prev_d = -1e9;
    for (int xx = f.x0 + 5; xx < f.x1 - 4; xx += 25) {
        if (abs(xx - (f.x0 + w / 2)) < 12) continue;
        double u = centroid_row(im, xx, in.y0, in.y1, BLUE), d = centroid_row(im, xx, in.y0, in.y1, RED);
        CHECK(u >= 0 && d >= 0);
        CHECK(u < prev_u - 5.0);
        CHECK(d > prev_d + 5.0);
        prev_u = u, prev_d = d;
    }
    /* no blue where the rising line does not go: the top-left and
     * bottom-right corners; no red at the bottom left */
    CHECK_EQ_INT(count_tinted(im, (box){in.x0, in.y0, f.x0 + w / 4, f.y0 + h / 2}, BLUE), 0);
    CHECK_EQ_INT(count_tinted(im, (box){f.x0 + 3 * w / 4, f.y0 + h / 2, in.x1, in.y1}, BLUE), 0);
    CHECK_EQ_INT(count_tinted(im, (box){in.x0, f.y0 + h / 2, f.x0 + w / 4, in.y1}, RED), 0);
    /* ink outside the area: title above, x label below, tick labels and y label left */
    box title = {f.x0 + w / 4, 0, f.x1 - w / 4, f.y0 - 2};
    box xlabel = {f.x0 + w / 4, f.y1 + 26, f.x1 - w / 4, im->h};
    box ylabel = {0, f.y0 + h / 4, 22, f.y1 - h / 4};
    box yticks = {24, f.y0, f.x0 - 6, f.y1};
    CHECK(count_dark(im, title) > 40);
    CHECK(count_dark(im, xlabel) > 20);
    CHECK(count_dark(im, ylabel) > 20);
    CHECK(count_dark(im, yticks) > 40);
    CHECK_EQ_INT(count_dark(im, (box){f.x1 + 2, 0, im->w, f.y1}), 0); /* right margin: empty */
    png_close();
    if (!keep_) unlink(png);

    /* no title or labels: the bands they used are blank */
    p.title = p.x_label = p.y_label = NULL;
    path_in(png, sizeof png, "lines_bare.png");
    CHECK_OK(cli_plot_lines(png, &p));
    im = png_open(png);
    CHECK(im != NULL);
    box g;
    CHECK(find_frame(im, 0, im->w, &g));
    CHECK(g.y0 < f.y0); /* the area grew into the title band */
    CHECK_EQ_INT(count_dark(im, (box){g.x0 + 40, 0, g.x1 - 40, g.y0 - 8}), 0);
    CHECK_EQ_INT(count_dark(im, (box){0, g.y0, 12, g.y1}), 0);
    CHECK(count_dark(im, (box){0, g.y1 + 6, im->w, im->h}) > 20); /* the x tick labels remain */
    png_close();
    if (!keep_) unlink(png);
}

/* A named series gets a legend (border, swatch in its colour, text) in a
 * corner of the plot area that the line does not cross. */
static void test_lines_legend(void) {
    enum { N = 60 };
    static double x[N], y[N];
    for (int i = 0; i < N; i++) x[i] = i, y[i] = 9.6 * i / (N - 1); /* reaches the top right corner */
    cli_plot_series s = {.name = "rising", .x = x, .y = y, .n = N, .colour = 1};
    cli_plot p = {.title = "legend", .series = &s, .n_series = 1};
    char png[600];
    path_in(png, sizeof png, "lines_legend.png");
    CHECK_OK(cli_plot_lines(png, &p));
    const png_img *im = png_open(png);
    CHECK(im != NULL);
    box f, lg;
    CHECK(find_frame(im, 0, im->w, &f));
    CHECK(find_legend(im, inside(f), &lg));
    /* top-left: the only corner box the line leaves empty at the top */
    CHECK(lg.x0 - f.x0 >= 8 && lg.x0 - f.x0 <= 14);
    CHECK(lg.y0 - f.y0 >= 8 && lg.y0 - f.y0 <= 14);
    CHECK(lg.x1 - lg.x0 > 60 && lg.y1 - lg.y0 > 20);
    CHECK(count_tinted(im, lg, BLUE) > 15); /* the swatch */
    CHECK(count_dark(im, lg) > 20);         /* the name */
    /* outside the legend the line is the only blue, and it is where the data is */
    const int w = f.x1 - f.x0, h = f.y1 - f.y0;
    CHECK(count_tinted(im, (box){f.x0 + 1, f.y0 + h / 2, f.x0 + w / 8, f.y1}, BLUE) > 20);
    CHECK(count_tinted(im, (box){f.x1 - w / 8, f.y0 + 1, f.x1, f.y0 + h / 2}, BLUE) > 20);
    CHECK_EQ_INT(count_tinted(im, (box){f.x0 + w / 2, f.y0 + 3 * h / 4, f.x1, f.y1}, BLUE), 0);
    png_close();
    if (!keep_) unlink(png);
}

/* NaN and infinite points break the line: no ink between the last finite
 * point before a gap and the first after it, except a lone finite point in
 * the gap, which is drawn as a dot. */
static void test_lines_nan_gap(void) {
    enum { N = 200 };
    static double x[N], y[N];
    for (int i = 0; i < N; i++) x[i] = i, y[i] = 0.05 * i;
    for (int i = 90; i <= 110; i++) y[i] = i % 2 ? NAN : INFINITY;
    y[100] = 5.0; /* lone finite point */
    cli_plot_series s = {.x = x, .y = y, .n = N};
    cli_plot p = {.series = &s, .n_series = 1};
    char png[600];
    path_in(png, sizeof png, "lines_gap.png");
    CHECK_OK(cli_plot_lines(png, &p));
    const png_img *im = png_open(png);
    CHECK(im != NULL);
    box f;
    CHECK(find_frame(im, 0, im->w, &f));
    box in = inside(f);
    const double w = f.x1 - f.x0;
#define MAPX(v) (f.x0 + (v) / 199.0 * w) /* x spans the data, 0..199 */
    int a = (int)ceil(MAPX(89) + 3), b = (int)floor(MAPX(100) - 3);
    int c = (int)ceil(MAPX(100) + 3), d = (int)floor(MAPX(111) - 3);
    CHECK(b - a > 5 && d - c > 5);
    CHECK_EQ_INT(count_tinted(im, (box){a, in.y0, b, in.y1}, BLUE), 0);
    CHECK_EQ_INT(count_tinted(im, (box){c, in.y0, d, in.y1}, BLUE), 0);
    int dot_x = (int)lround(MAPX(100));
    CHECK(count_tinted(im, (box){dot_x - 2, in.y0, dot_x + 3, in.y1}, BLUE) >= 2);
    /* the line is drawn on both sides of the gap */
    CHECK(centroid_row(im, (int)lround(MAPX(50)), in.y0, in.y1, BLUE) >= 0);
    CHECK(centroid_row(im, (int)lround(MAPX(150)), in.y0, in.y1, BLUE) >= 0);
    CHECK(centroid_row(im, (int)lround(MAPX(50)), in.y0, in.y1, BLUE) >
          centroid_row(im, (int)lround(MAPX(150)), in.y0, in.y1, BLUE));
#undef MAPX
    png_close();
    if (!keep_) unlink(png);
}

static void test_lines_errors(void) {
    double x[2] = {0, 1}, y[2] = {1, 2}, bad[2] = {NAN, INFINITY};
    cli_plot_series s = {.name = "s", .x = x, .y = y, .n = 2};
    cli_plot p = {.title = "t", .series = &s, .n_series = 1};
    char png[600];
    path_in(png, sizeof png, "err.png");

    /* an existing chart is untouched by a failing call */
    CHECK_OK(cli_plot_lines(png, &p));
    struct stat before;
    CHECK(stat(png, &before) == 0);

    cli_plot_series empty = {.name = "e", .x = x, .y = y, .n = 0};
    cli_plot pe = {.series = &empty, .n_series = 1};
    CHECK_EQ_INT(cli_plot_lines(png, &pe), RT_ERR_INVALID_ARG);
    CHECK(strstr(rt_error_last(), "empty") != NULL);
    cli_plot_series nan_only = {.name = "n", .x = x, .y = bad, .n = 2};
    cli_plot pn = {.series = &nan_only, .n_series = 1};
    CHECK_EQ_INT(cli_plot_lines(png, &pn), RT_ERR_INVALID_ARG);
    cli_plot pz = {.series = &s, .n_series = 0};
    CHECK_EQ_INT(cli_plot_lines(png, &pz), RT_ERR_INVALID_ARG);
    cli_plot_series many[RT_PLOT_MAX_SERIES + 1];
    for (int i = 0; i <= RT_PLOT_MAX_SERIES; i++) many[i] = s;
    cli_plot pm = {.series = many, .n_series = RT_PLOT_MAX_SERIES + 1};
    CHECK_EQ_INT(cli_plot_lines(png, &pm), RT_ERR_INVALID_ARG);
    cli_plot_series badcol = s;
    badcol.colour = RT_PLOT_MAX_SERIES + 1;
    cli_plot pc = {.series = &badcol, .n_series = 1};
    CHECK_EQ_INT(cli_plot_lines(png, &pc), RT_ERR_INVALID_ARG);
    CHECK_EQ_INT(cli_plot_lines(NULL, &p), RT_ERR_INVALID_ARG);
    CHECK_EQ_INT(cli_plot_lines(png, NULL), RT_ERR_INVALID_ARG);
    struct stat after;
    CHECK(stat(png, &after) == 0);
    CHECK_EQ_INT(after.st_size, before.st_size);
    CHECK(png_is(png, RT_PLOT_WIDTH, RT_PLOT_HEIGHT));

    /* unwritable directory: RT_ERR_IO naming the path, no .tmp */
    const char *nodir = "/nonexistent_rt_plot_dir/x.png";
    CHECK_EQ_INT(cli_plot_lines(nodir, &p), RT_ERR_IO);
    CHECK(strstr(rt_error_last(), "/nonexistent_rt_plot_dir/x.png") != NULL);
    CHECK(!tmp_exists(nodir));
    /* the .tmp can be written but the rename fails (target is a non-empty directory): the .tmp is removed */
    char sub[600], inner[700];
    path_in(sub, sizeof sub, "a_directory");
    mkdir(sub, 0755);
    snprintf(inner, sizeof inner, "%s/keep", sub);
    CHECK(write_text(inner, "x"));
    CHECK_EQ_INT(cli_plot_lines(sub, &p), RT_ERR_IO);
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
    b->ev[b->n++] = (rt_mem_event){b->t, delta, c, op, "m", b->live};
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

/* Opaque colour of a memory category in the stacked areas (plot.c: the
 * palette colour at opacity 0.85 over white; PARAM blue, GRAD orange, OPTIM
 * purple, SAVED red, TEMP green, DATA brown, as the legend shows). */
static rgb cat_rgb(rt_mem_category c) {
    static const int entry[RT_MEM_NCAT] = {[RT_MEM_PARAM] = 0, [RT_MEM_GRAD] = 1, [RT_MEM_OPTIM] = 4,
                                           [RT_MEM_SAVED] = 3, [RT_MEM_TEMP] = 2, [RT_MEM_DATA] = 5};
    return over_white(pal_[entry[c]], 0.85);
}

/* Categories met going up column x from the bottom of the area, each run
 * of >= 3 pixels counted once, in order; their run lengths in len[]. */
static int stack_in_column(const png_img *im, box in, int x, rt_mem_category *order, int *len, int max) {
    int n = 0;
    int cur = -1, run = 0;
    for (int y = in.y1 - 1; y >= in.y0; y--) {
        int here = -1;
        for (int c = 0; c < RT_MEM_NCAT; c++)
            if (near_rgb(pix(im, x, y), cat_rgb((rt_mem_category)c), 3)) here = c;
        if (here == cur) {
            run++;
            continue;
        }
        if (cur >= 0 && run >= 3 && n < max && (n == 0 || order[n - 1] != (rt_mem_category)cur))
            order[n] = (rt_mem_category)cur, len[n++] = run;
        cur = here, run = 1;
    }
    if (cur >= 0 && run >= 3 && n < max) order[n] = (rt_mem_category)cur, len[n++] = run;
    return n;
}

static void test_timeline(void) {
    ev_buf b = {0};
    const int64_t MiB = 1 << 20;
    const int64_t base[RT_MEM_NCAT] = {[RT_MEM_PARAM] = 6 * MiB};
    b.live = 6 * MiB;
    synth_steps(&b, 3, 8, 3 * MiB);
    char png[600];
    path_in(png, sizeof png, "timeline.png");
    CHECK_OK(cli_plot_memory_timeline(png, b.ev, b.n, base, "synthetic training steps"));
    CHECK(png_is(png, RT_PLOT_WIDTH, RT_PLOT_HEIGHT));
    CHECK(!tmp_exists(png));
    if (!keep_) unlink(png);

    /* NULL baseline: PARAM never drops, so it starts at 0 and the chart is still drawn */
    path_in(png, sizeof png, "timeline_nobase.png");
    CHECK_OK(cli_plot_memory_timeline(png, b.ev, b.n, NULL, NULL));
    CHECK(png_is(png, RT_PLOT_WIDTH, RT_PLOT_HEIGHT));
    if (!keep_) unlink(png);

    /* a long trace (drawn per pixel column, peaks kept) */
    ev_buf big = {0};
    big.live = 6 * MiB;
    synth_steps(&big, 400, 12, 2 * MiB);
    CHECK(big.n > 20000);
    path_in(png, sizeof png, "timeline_long.png");
    CHECK_OK(cli_plot_memory_timeline(png, big.ev, big.n, base, "long trace (400 steps)"));
    CHECK(png_is(png, RT_PLOT_WIDTH, RT_PLOT_HEIGHT));
    {
        /* per column: PARAM (6 MiB, constant) is the bottom layer in every
         * column, and the grey "momentary peak" band (0.55 grey at 0.45 over
         * white) sits above the stacked means, since activations come and go
         * within each column */
        const rgb band = over_white((rgb){140, 140, 140}, 0.45);
        const png_img *im = png_open(png);
        CHECK(im != NULL);
        box f;
        CHECK(find_frame(im, 0, im->w, &f));
        box in = inside(f);
        int param_cols = 0, band_above = 0, cols = 0;
        for (int x = in.x0 + 1; x < in.x1 - 1; x++, cols++) {
            rt_mem_category o[8];
            int len[8];
            int n = stack_in_column(im, in, x, o, len, 8);
            param_cols += n > 0 && o[0] == RT_MEM_PARAM;
            int band_low = -1, stack_top = in.y1;
            for (int y = in.y0; y < in.y1; y++) {
                rgb q = pix(im, x, y);
                if (near_rgb(q, band, 3) && band_low < y) band_low = y;
                for (int c = 0; c < RT_MEM_NCAT; c++)
                    if (near_rgb(q, cat_rgb((rt_mem_category)c), 3) && y < stack_top) stack_top = y;
            }
            band_above += band_low >= 0 && band_low < stack_top;
        }
        CHECK_EQ_INT(param_cols, cols);
        CHECK(band_above > cols * 9 / 10);
        CHECK(count_near(im, (box){f.x1 + 2, f.y0, im->w, f.y1}, band, 3) > 100); /* its legend swatch */
        png_close();
    }
    if (!keep_) unlink(png);

    /* errors */
    path_in(png, sizeof png, "timeline_err.png");
    CHECK_EQ_INT(cli_plot_memory_timeline(png, b.ev, 0, base, NULL), RT_ERR_INVALID_ARG);
    CHECK_EQ_INT(cli_plot_memory_timeline(png, NULL, 3, base, NULL), RT_ERR_INVALID_ARG);
    const int64_t small[RT_MEM_NCAT] = {0};
    rt_mem_event freeing[2] = {{0.001, 4096, RT_MEM_TEMP, "a", "m", 4096}, {0.002, -8192, RT_MEM_TEMP, "b", "m", -4096}};
    CHECK_EQ_INT(cli_plot_memory_timeline(png, freeing, 2, small, NULL), RT_ERR_INVALID_ARG);
    CHECK(strstr(rt_error_last(), "TEMP") != NULL && strstr(rt_error_last(), "baseline") != NULL);
    CHECK_OK(cli_plot_memory_timeline(png, freeing, 2, NULL, NULL)); /* inferred baseline: 4096 */
    rt_mem_event badcat = {0.001, 1, (rt_mem_category)RT_MEM_NCAT, "x", "m", 1};
    CHECK_EQ_INT(cli_plot_memory_timeline(png, &badcat, 1, NULL, NULL), RT_ERR_INVALID_ARG);
    rt_mem_event badtime = {NAN, 1, RT_MEM_TEMP, "x", "m", 1};
    CHECK_EQ_INT(cli_plot_memory_timeline(png, &badtime, 1, NULL, NULL), RT_ERR_INVALID_ARG);
    CHECK_EQ_INT(cli_plot_memory_timeline("/nonexistent_rt_plot_dir/t.png", b.ev, b.n, base, NULL), RT_ERR_IO);
    CHECK(!tmp_exists("/nonexistent_rt_plot_dir/t.png"));
    if (!keep_) unlink(png);
    free(b.ev);
    free(big.ev);
}

/* A trace with known contents: PARAM 8 MiB and GRAD 4 MiB all along
 * (baseline), DATA +2 MiB from 10 ms, TEMP +6 MiB from 50 ms to the end at
 * 100 ms. Checks the colour areas (MiB x ms: 800, 400, 180, 300), the stack
 * order bottom to top in columns before and after each event, the peak dot
 * at (50 ms, 20 MiB), and the six legend swatches right of the area. */
static void test_timeline_drawn(void) {
    const int64_t MiB = 1 << 20;
    const int64_t base[RT_MEM_NCAT] = {[RT_MEM_PARAM] = 8 * MiB, [RT_MEM_GRAD] = 4 * MiB};
    rt_mem_event ev[3] = {{0.010, 2 * MiB, RT_MEM_DATA, "batch", "-", 14 * MiB},
                          {0.050, 6 * MiB, RT_MEM_TEMP, "conv", "conv1", 20 * MiB},
                          {0.100, -6 * MiB, RT_MEM_TEMP, "backward:conv", "conv1", 14 * MiB}};
    char png[600];
    path_in(png, sizeof png, "timeline_drawn.png");
    CHECK_OK(cli_plot_memory_timeline(png, ev, 3, base, "known trace"));
    const png_img *im = png_open(png);
    CHECK(im != NULL);
    box f;
    CHECK(find_frame(im, 0, im->w, &f));
    box in = inside(f);
    const double w = f.x1 - f.x0;
    int area[RT_MEM_NCAT];
    for (int c = 0; c < RT_MEM_NCAT; c++) area[c] = count_near(im, in, cat_rgb((rt_mem_category)c), 3);
    CHECK_EQ_INT(area[RT_MEM_SAVED], 0);
    CHECK_EQ_INT(area[RT_MEM_OPTIM], 0);
    CHECK(area[RT_MEM_PARAM] > 10000);
    CHECK_NEAR((double)area[RT_MEM_GRAD] / area[RT_MEM_PARAM], 400.0 / 800.0, 0.03);
    CHECK_NEAR((double)area[RT_MEM_DATA] / area[RT_MEM_PARAM], 180.0 / 800.0, 0.03);
    CHECK_NEAR((double)area[RT_MEM_TEMP] / area[RT_MEM_PARAM], 300.0 / 800.0, 0.03);
    /* stacks: PARAM at the bottom, then GRAD, DATA, TEMP */
    rt_mem_category o[8];
    int len[8];
    int n = stack_in_column(im, in, (int)lround(f.x0 + 0.05 * w), o, len, 8);
    CHECK_EQ_INT(n, 2);
    CHECK(o[0] == RT_MEM_PARAM && o[1] == RT_MEM_GRAD);
    CHECK_NEAR((double)len[0] / len[1], 2.0, 0.15);
    const double px_per_mib = (len[0] + len[1]) / 12.0;
    n = stack_in_column(im, in, (int)lround(f.x0 + 0.3 * w), o, len, 8);
    CHECK_EQ_INT(n, 3);
    CHECK(o[0] == RT_MEM_PARAM && o[1] == RT_MEM_GRAD && o[2] == RT_MEM_DATA);
    CHECK_NEAR(len[2] / px_per_mib, 2.0, 0.15);
    n = stack_in_column(im, in, (int)lround(f.x0 + 0.75 * w), o, len, 8);
    CHECK_EQ_INT(n, 4);
    CHECK(o[0] == RT_MEM_PARAM && o[1] == RT_MEM_GRAD && o[2] == RT_MEM_DATA && o[3] == RT_MEM_TEMP);
    CHECK_NEAR(len[3] / px_per_mib, 6.0, 0.2);
    /* nothing green-ish above the top of the stack */
    int top_of_stack = f.y1 - (int)lround(20 * px_per_mib);
    CHECK_EQ_INT(count_near(im, (box){(int)(f.x0 + 0.6 * w), in.y0, (int)(f.x0 + 0.9 * w), top_of_stack - 30},
                            cat_rgb(RT_MEM_TEMP), 40),
                 0);
    /* the peak marker: a dark dot at (50 ms, 20 MiB) */
    int dot_x = (int)lround(f.x0 + 0.5 * w), dot_y = (int)lround(f.y1 - 20 * px_per_mib);
    CHECK(count_dark(im, (box){dot_x - 1, dot_y - 1, dot_x + 2, dot_y + 2}) >= 5);
    /* its label above it ("peak 20.0 MiB") */
    CHECK(count_dark(im, (box){dot_x + 4, dot_y - 26, dot_x + 120, dot_y - 4}) > 40);
    /* the legend, right of the area: a swatch per category */
    box right = {f.x1 + 2, f.y0, im->w, f.y1};
    for (int c = 0; c < RT_MEM_NCAT; c++) CHECK(count_near(im, right, cat_rgb((rt_mem_category)c), 3) > 100);
    CHECK(count_dark(im, right) > 100); /* the names */
    png_close();
    if (!keep_) unlink(png);
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
    rt_status st = cli_plot_memory_timeline(png, ev, n, base, "rt_mem trace");
    rt_mem_trace_enable(0);
    CHECK_OK(st);
    CHECK(png_is(png, RT_PLOT_WIDTH, RT_PLOT_HEIGHT));
    /* TEMP rises and falls above PARAM; nothing was booked SAVED long enough
     * to matter except the moved 64 KiB, which must not dominate */
    const png_img *im = png_open(png);
    CHECK(im != NULL);
    box f;
    CHECK(find_frame(im, 0, im->w, &f));
    box in = inside(f);
    CHECK(count_near(im, in, cat_rgb(RT_MEM_TEMP), 3) > 1000);
    CHECK(count_near(im, in, cat_rgb(RT_MEM_PARAM), 3) > 1000 || base[RT_MEM_PARAM] < (1 << 20));
    CHECK(count_near(im, in, cat_rgb(RT_MEM_SAVED), 3) < count_near(im, in, cat_rgb(RT_MEM_TEMP), 3));
    png_close();
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
            if (g) fprintf(g, "%d,%lld,%.9g,%.9g\n", e + 1, (long long)step, 0.1 * (1.0 - t / epochs), loss);
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
    CHECK_OK(cli_plot_training_csv(csv, png));
    CHECK(png_is(png, RT_PLOT_TRAINING_WIDTH, RT_PLOT_TRAINING_HEIGHT));
    CHECK(!tmp_exists(png));
    {
        const png_img *im = png_open(png);
        CHECK(im != NULL);
        box lf, rf, llg, rlg;
        CHECK(find_frame(im, 0, im->w / 2, &lf));
        CHECK(find_frame(im, im->w / 2, im->w, &rf));
        CHECK(find_legend(im, inside(lf), &llg));
        CHECK(find_legend(im, inside(rf), &rlg));
        /* loss: the moving average (grey at 0.9) falls from left to right */
        const rgb avg = over_white(GREY, 0.9);
        const int lw = lf.x1 - lf.x0, lh = lf.y1 - lf.y0;
        double early = -1, late = -1;
        for (int x = lf.x0 + lw / 50; x < lf.x0 + lw / 8 && early < 0; x++) {
            int n = 0;
            double sum = 0;
            for (int y = lf.y0 + 1; y < lf.y1; y++)
                if (near_rgb(pix(im, x, y), avg, 6)) sum += y, n++;
            if (n) early = sum / n;
        }
        for (int x = lf.x0 + lw * 9 / 10; x > lf.x0 + lw * 3 / 4 && late < 0; x--) {
            int n = 0;
            double sum = 0;
            for (int y = lf.y0 + 1; y < lf.y1; y++)
                if (near_rgb(pix(im, x, y), avg, 6)) sum += y, n++;
            if (n) late = sum / n;
        }
        CHECK(early >= 0 && late >= 0);
        CHECK(late - early > 0.3 * lh); /* lower on screen = smaller loss */
        /* per-epoch train (blue) and test (orange) loss in the panel, not only in its legend */
        CHECK(count_tinted(im, inside(lf), BLUE) - count_tinted(im, llg, BLUE) > 50);
        CHECK(count_tinted(im, inside(lf), ORANGE) - count_tinted(im, llg, ORANGE) > 50);
        /* accuracy: blue rises from the first epoch's dot to the last one's */
        int first = -1, last = -1;
        for (int x = rf.x0 + 1; x < rf.x1; x++) {
            int n = 0;
            for (int y = rf.y0 + 1; y < rf.y1; y++)
                n += tinted(pix(im, x, y), BLUE) && !(x >= rlg.x0 && x < rlg.x1 && y >= rlg.y0 && y < rlg.y1);
            if (n) {
                if (first < 0) first = x;
                last = x;
            }
        }
        CHECK(first >= 0 && last - first > (rf.x1 - rf.x0) / 2);
        double acc0 = centroid_row(im, first + 3, rlg.y1, rf.y1, BLUE);
        double acc5 = centroid_row(im, last - 3, rf.y0 + 1, rf.y1, BLUE);
        CHECK(acc0 >= 0 && acc5 >= 0);
        CHECK(acc0 - acc5 > 0.5 * (rf.y1 - rf.y0));
        CHECK(count_tinted(im, inside(rf), ORANGE) - count_tinted(im, rlg, ORANGE) > 50);
        CHECK(count_near(im, inside(lf), avg, 6) > 300); /* the moving average's line */
        png_close();
    }
    if (!keep_) unlink(png), unlink(csv), unlink(steps);

    /* no steps file, one epoch, a diverged (nan) test loss: still drawn */
    path_in(csv, sizeof csv, "short.csv");
    path_in(png, sizeof png, "training_short.png");
    CHECK(write_text(csv, "epoch,train_loss,train_acc,test_loss,test_acc,images_per_s\n"
                          "1,0.61,0.78,nan,0.80,900\n"));
    CHECK_OK(cli_plot_training_csv(csv, png));
    CHECK(png_is(png, RT_PLOT_TRAINING_WIDTH, RT_PLOT_TRAINING_HEIGHT));
    {
        /* the train loss is a dot; the NaN test loss leaves orange only in the legend */
        const png_img *im = png_open(png);
        CHECK(im != NULL);
        box lf, rf, llg;
        CHECK(find_frame(im, 0, im->w / 2, &lf));
        CHECK(find_frame(im, im->w / 2, im->w, &rf));
        CHECK(find_legend(im, inside(lf), &llg));
        CHECK(count_tinted(im, inside(lf), BLUE) - count_tinted(im, llg, BLUE) > 10);
        CHECK(count_tinted(im, llg, ORANGE) > 10);
        CHECK_EQ_INT(count_tinted(im, inside(lf), ORANGE) - count_tinted(im, llg, ORANGE), 0);
        CHECK(count_tinted(im, inside(rf), BLUE) > 20); /* both accuracies: dots */
        CHECK(count_tinted(im, inside(rf), ORANGE) > 20);
        png_close();
    }
    if (!keep_) unlink(png);

    /* steps but no finished epoch yet */
    path_in(csv, sizeof csv, "partial.csv");
    path_in(steps, sizeof steps, "partial.steps.csv");
    path_in(png, sizeof png, "training_partial.png");
    write_training_csv(csv, steps, 1, 300);
    CHECK(write_text(csv, "epoch,train_loss,train_acc,test_loss,test_acc\n"));
    CHECK_OK(cli_plot_training_csv(csv, png));
    CHECK(png_is(png, RT_PLOT_TRAINING_WIDTH, RT_PLOT_TRAINING_HEIGHT));
    {
        /* steps only: grey step losses on the left, the accuracy panel says
         * "no epoch finished yet" in its middle, and no epoch colour anywhere */
        const png_img *im = png_open(png);
        CHECK(im != NULL);
        box lf, rf;
        CHECK(find_frame(im, 0, im->w / 2, &lf));
        CHECK(find_frame(im, im->w / 2, im->w, &rf));
        CHECK(count_near(im, inside(lf), over_white(GREY, 0.9), 6) > 200);
        const box all = {0, 0, im->w, im->h};
        CHECK_EQ_INT(count_tinted(im, all, BLUE), 0);
        CHECK_EQ_INT(count_tinted(im, all, ORANGE), 0);
        const int cx = (rf.x0 + rf.x1) / 2, cy = (rf.y0 + rf.y1) / 2;
        int ink = 0;
        for (int y = cy - 12; y < cy + 12; y++)
            for (int x = cx - 80; x < cx + 80; x++) ink += tinted(pix(im, x, y), GREY);
        CHECK(ink > 40);
        png_close();
    }
    if (!keep_) unlink(png), unlink(steps);
    unlink(csv);

    /* errors */
    char bad[600];
    path_in(bad, sizeof bad, "bad.csv");
    path_in(png, sizeof png, "bad.png");
    CHECK(write_text(bad, "epoch,train_loss,train_acc,test_loss,test_acc\n1,0.5,0.9,0.6\n"));
    CHECK_EQ_INT(cli_plot_training_csv(bad, png), RT_ERR_FORMAT);
    CHECK(strstr(rt_error_last(), ":2:") != NULL);
    CHECK(write_text(bad, "epoch,train_loss,train_acc,test_loss,test_acc\n1,0.5,0.9,0.6,abc\n"));
    CHECK_EQ_INT(cli_plot_training_csv(bad, png), RT_ERR_FORMAT);
    CHECK(write_text(bad, "epoch,loss\n1,0.5\n"));
    CHECK_EQ_INT(cli_plot_training_csv(bad, png), RT_ERR_FORMAT);
    CHECK(strstr(rt_error_last(), "train_loss") != NULL);
    CHECK(write_text(bad, "epoch,train_loss,train_acc,test_loss,test_acc\n"));
    CHECK_EQ_INT(cli_plot_training_csv(bad, png), RT_ERR_FORMAT); /* no rows, no steps */
    CHECK(write_text(bad, ""));
    CHECK_EQ_INT(cli_plot_training_csv(bad, png), RT_ERR_FORMAT);
    CHECK(!exists(png) && !tmp_exists(png));
    unlink(bad);
    path_in(bad, sizeof bad, "missing.csv");
    CHECK_EQ_INT(cli_plot_training_csv(bad, png), RT_ERR_IO);
    CHECK(strstr(rt_error_last(), "missing.csv") != NULL);
    CHECK_EQ_INT(cli_plot_training_csv(NULL, png), RT_ERR_INVALID_ARG);
    /* unwritable PNG */
    path_in(csv, sizeof csv, "short.csv");
    CHECK_EQ_INT(cli_plot_training_csv(csv, "/nonexistent_rt_plot_dir/t.png"), RT_ERR_IO);
    CHECK(!tmp_exists("/nonexistent_rt_plot_dir/t.png"));
    unlink(csv);
}

/* The picture `revtorch train` draws from the rows it keeps equals the one
 * drawn from its CSV files; a FIFO or device is refused, not read for ever. */
static void test_training_memory(void) {
    char csv[600], steps[600], from_csv[600], from_mem[600], fifo[600];
    path_in(csv, sizeof csv, "mem.csv");
    path_in(steps, sizeof steps, "mem.steps.csv");
    path_in(from_csv, sizeof from_csv, "mem_csv.png");
    path_in(from_mem, sizeof from_mem, "mem_rows.png");
    write_training_csv(csv, steps, 3, 50);
    CHECK_OK(cli_plot_training_csv(csv, from_csv));
    cli_training_curves c;
    CHECK_OK(cli_training_curves_read(csv, steps, &c));
    CHECK_EQ_INT((int)c.n_epochs, 3);
    CHECK_EQ_INT((int)c.n_steps, 150);
    /* the file counts epochs from 1, as the epoch log does; in memory from 0 */
    CHECK_EQ_INT((int)c.steps[0].epoch, 0);
    CHECK_EQ_INT((int)c.steps[149].epoch, 2);
    {   /* a file written when steps counted epochs from 0 (it holds an epoch 0) reads as written */
        char old[600];
        path_in(old, sizeof old, "old.steps.csv");
        CHECK(write_text(old, "epoch,step,lr,loss\n0,0,0.1,2.0\n0,1,0.1,1.8\n1,2,0.1,1.5\n"));
        cli_training_curves o;
        CHECK_OK(cli_training_curves_read(csv, old, &o));
        CHECK_EQ_INT((int)o.n_steps, 3);
        if (o.n_steps == 3) CHECK(o.steps[0].epoch == 0 && o.steps[1].epoch == 0 && o.steps[2].epoch == 1);
        cli_training_curves_free(&o);
        unlink(old);
    }
    cli_training_curves copy = {0};
    for (size_t i = 0; i < c.n_epochs; i++) CHECK_OK(cli_training_curves_add_epoch(&copy, &c.epochs[i]));
    for (size_t i = 0; i < c.n_steps; i++) CHECK_OK(cli_training_curves_add_step(&copy, c.steps[i].epoch, c.steps[i].loss));
    CHECK_OK(cli_plot_training(from_mem, &copy, csv));
    FILE *a = fopen(from_csv, "rb"), *b = fopen(from_mem, "rb");
    CHECK(a && b);
    if (a && b) {
        int ca, cb;
        long same = 0, differ = 0;
        do {
            ca = fgetc(a);
            cb = fgetc(b);
            if (ca == cb) same++; else differ++;
        } while (ca != EOF && cb != EOF);
        CHECK(differ == 0 && same > 1000);
    }
    if (a) fclose(a);
    if (b) fclose(b);
    cli_training_curves empty = {0};
    CHECK_EQ_INT(cli_plot_training(from_mem, &empty, NULL), RT_ERR_FORMAT);
    CHECK_EQ_INT(cli_training_curves_add_step(&copy, -1, 1.0), RT_ERR_INVALID_ARG);
    cli_training_curves_free(&c);
    cli_training_curves_free(&copy);
    path_in(fifo, sizeof fifo, "fifo.csv");
    CHECK(mkfifo(fifo, 0600) == 0);
    CHECK_EQ_INT(cli_plot_training_csv(fifo, from_csv), RT_ERR_IO);
    CHECK(strstr(rt_error_last(), "not a regular file") != NULL);
    unlink(fifo);
    unlink(csv);
    unlink(steps);
    unlink(from_csv);
    unlink(from_mem);
}

static void test_cleanup(void) {
    if (dir_[0] && !keep_) CHECK(rmdir(dir_) == 0); /* empty: every test removed its files */
}

RT_TEST_MAIN({"lines", test_lines}, {"lines_drawn", test_lines_drawn}, {"lines_legend", test_lines_legend},
             {"lines_nan_gap", test_lines_nan_gap}, {"lines_errors", test_lines_errors}, {"timeline", test_timeline},
             {"timeline_drawn", test_timeline_drawn},
             {"timeline_tracker", test_timeline_tracker}, {"training", test_training},
             {"training_memory", test_training_memory},
             {"cleanup", test_cleanup})
