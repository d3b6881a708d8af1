/* The comparison picture of `revtorch superres eval` (cli/superres.h):
 * LR, bicubic, model and target side by side, and a magnified detail. */
#include <cairo.h>
#include <stdio.h>

#include "plot.h"
#include "superres.h"

#define SR_MARGIN 12
#define SR_TITLE 30   /* pixels above the panels for the title */
#define SR_CAPTION 22 /* pixels above each row of panels for the captions */

/* Panel p's value at (r, c) of the display grid rows × cols (r = 0 on top:
 * the image's last row), nearest neighbour. */
static float panel_value(const rt_tensor *t, int64_t r, int64_t c, int64_t rows, int64_t cols) {
    const int64_t h = t->shape[2], w = t->shape[3];
    int64_t i = (rows - 1 - r) * h / rows, j = c * w / cols;
    return rt_tensor_f32(t)[i * w + j];
}

/* A window [gy, gy + h) × [gx, gx + w) of panel t on the display grid
 * rows × cols (cli_gray_fn's user). */
typedef struct sr_window {
    const rt_tensor *t;
    int64_t rows, cols, gy, gx;
} sr_window;

static float window_value(const void *user, int64_t r, int64_t c) {
    const sr_window *win = user;
    return panel_value(win->t, win->gy + r, win->gx + c, win->rows, win->cols);
}

/* Paints grid cells [gy, gy + gh) × [gx, gx + gw) of the display grid
 * (H × W) at (x, y), `scale` screen pixels each. */
static void paint(cairo_t *cr, const rt_tensor *t, int64_t H, int64_t W, int64_t gy, int64_t gx, int64_t gh,
                  int64_t gw, double x, double y, int scale) {
    const sr_window win = {t, H, W, gy, gx};
    cli_paint_gray(cr, gh, gw, window_value, &win, x, y, scale);
}

rt_status cli_superres_png(const char *png_path, const cli_sr_panel *panels, int n, int64_t y0, int64_t x0,
                           int64_t box, int zoom, const char *title) {
    if (!panels || n < 1 || n > 8 || zoom < 1 || !png_path)
        return rt_error_set(RT_ERR_INVALID_ARG, "cli_superres_png: bad arguments");
    int64_t H = 0, W = 0;
    for (int p = 0; p < n; p++) {
        if (!panels[p].image || panels[p].image->ndim != 4)
            return rt_error_set(RT_ERR_INVALID_ARG, "cli_superres_png: panel %d has no [1, 1, h, w] image", p);
        if (panels[p].image->shape[2] > H) H = panels[p].image->shape[2];
        if (panels[p].image->shape[3] > W) W = panels[p].image->shape[3];
    }
    if (y0 < 0 || x0 < 0 || box < 1 || y0 + box > H || x0 + box > W)
        return rt_error_set(RT_ERR_INVALID_ARG, "cli_superres_png: the detail box is outside the %lldx%lld image",
                            (long long)H, (long long)W);
    const int zw = (int)box * zoom; /* a detail panel's side */
    const int col_w = (int)W > zw ? (int)W : zw;
    const int width = SR_MARGIN + n * (col_w + SR_MARGIN);
    const int height = SR_TITLE + SR_CAPTION + (int)H + SR_MARGIN + SR_CAPTION + zw + SR_MARGIN;
    cairo_surface_t *surf = cairo_image_surface_create(CAIRO_FORMAT_RGB24, width, height);
    cairo_t *cr = cairo_create(surf);
    cairo_set_source_rgb(cr, 0, 0, 0);
    cairo_paint(cr);
    cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
    cairo_set_source_rgb(cr, 1, 1, 1);
    cairo_set_font_size(cr, 14);
    cairo_move_to(cr, SR_MARGIN, 19);
    cairo_show_text(cr, title ? title : "");
    const double row1 = SR_TITLE + SR_CAPTION, row2 = row1 + (double)H + SR_MARGIN + SR_CAPTION;
    /* the box in display coordinates (rows counted from the top) */
    const int64_t by = H - y0 - box;
    for (int p = 0; p < n; p++) {
        const double x = SR_MARGIN + p * (col_w + SR_MARGIN);
        paint(cr, panels[p].image, H, W, 0, 0, H, W, x, row1, 1);
        paint(cr, panels[p].image, H, W, by, x0, box, box, x, row2, zoom);
        cairo_set_source_rgb(cr, 1.0, 0.85, 0.1);
        cairo_set_line_width(cr, 1.0);
        cairo_rectangle(cr, x + (double)x0 + 0.5, row1 + (double)by + 0.5, (double)box - 1, (double)box - 1);
        cairo_stroke(cr);
        cairo_set_source_rgb(cr, 0.9, 0.9, 0.9);
        cairo_set_font_size(cr, 12);
        cairo_move_to(cr, x, row1 - 7);
        cairo_show_text(cr, panels[p].caption ? panels[p].caption : "");
        char z[48];
        snprintf(z, sizeof z, "detail, x%d", zoom);
        cairo_move_to(cr, x, row2 - 7);
        cairo_show_text(cr, z);
    }
    cairo_destroy(cr);
    rt_status st = cli_png_save(surf, png_path);
    cairo_surface_destroy(surf);
    return st;
}
