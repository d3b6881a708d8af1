/* The overlay picture of `revtorch segment`: three orthogonal slices with
 * the prediction in colour and the ground truth's outline (cli/segment.h). */
#include <cairo.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plot.h"
#include "segment.h"

#define SEG_SCALE 2   /* screen pixels per voxel */
#define SEG_MARGIN 12
#define SEG_TITLE 44  /* pixels above the panels for the titles */

/* A 2-D slice: rows × cols values read through the volume at (row, col). */
typedef struct seg_slice {
    int64_t rows, cols;
    int axis;      /* 0 axial (fixed d), 1 coronal (fixed h), 2 sagittal (fixed w) */
    int64_t index; /* the fixed coordinate */
} seg_slice;

/* Volume index of slice pixel (r, c): rows run from superior/anterior (top)
 * down, columns from the subject's left (low i) or posterior (low j). */
static int64_t slice_voxel(const seg_slice *s, int64_t r, int64_t c, int64_t D, int64_t H, int64_t W) {
    int64_t d, h, w;
    if (s->axis == 0) d = s->index, h = H - 1 - r, w = c;
    else if (s->axis == 1) d = D - 1 - r, h = s->index, w = c;
    else d = D - 1 - r, h = c, w = s->index;
    return (d * H + h) * W + w;
}

/* The colour of class k (k ≥ 1): red for a binary map, else hues spread by the golden ratio. */
static void class_colour(int32_t k, int32_t n_classes, double rgb[3]) {
    if (n_classes <= 2) {
        rgb[0] = 1.0, rgb[1] = 0.15, rgb[2] = 0.1;
        return;
    }
    double hue = fmod((double)k * 0.6180339887, 1.0) * 6.0;
    double x = 1.0 - fabs(fmod(hue, 2.0) - 1.0);
    int sector = (int)hue;
    double r = 0, g = 0, b = 0;
    switch (sector) {
    case 0: r = 1, g = x; break;
    case 1: r = x, g = 1; break;
    case 2: g = 1, b = x; break;
    case 3: g = x, b = 1; break;
    case 4: r = x, b = 1; break;
    default: r = 1, b = x; break;
    }
    rgb[0] = r, rgb[1] = g, rgb[2] = b;
}

static int cmp_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* The 0.5th and 99.5th percentiles of n values (a sorted strided sample). */
static void robust_range(const float *v, int64_t n, float *lo, float *hi) {
    int64_t step = n / 200000 + 1, m = (n + step - 1) / step;
    float *s = malloc((size_t)m * sizeof *s);
    if (!s) {
        *lo = 0, *hi = 1;
        return;
    }
    for (int64_t i = 0; i < m; i++) s[i] = v[i * step];
    qsort(s, (size_t)m, sizeof *s, cmp_float);
    *lo = s[(int64_t)(0.005 * (double)(m - 1))];
    *hi = s[(int64_t)(0.995 * (double)(m - 1))];
    if (!(*hi > *lo)) *hi = *lo + 1.0f;
    free(s);
}

rt_status cli_segment_png(const char *png_path, const rt_tensor *image, const rt_tensor *pred,
                          const rt_tensor *truth, const int64_t centre[3], int64_t split_d, const char *title) {
    const int64_t D = image->shape[1], H = image->shape[2], W = image->shape[3];
    const float *img = rt_tensor_f32(image);
    const int32_t *pr = rt_tensor_data(pred), *gt = truth ? rt_tensor_data(truth) : NULL;
    const int64_t V = D * H * W;
    int32_t n_classes = 1;
    for (int64_t i = 0; i < V; i++) {
        if (pr[i] + 1 > n_classes) n_classes = pr[i] + 1;
        if (gt && gt[i] + 1 > n_classes) n_classes = gt[i] + 1;
    }
    float lo, hi;
    robust_range(img, V, &lo, &hi);
    const seg_slice sl[3] = {{H, W, 0, centre[0]}, {D, W, 1, centre[1]}, {D, H, 2, centre[2]}};
    const char *names[3] = {"axial", "coronal", "sagittal"};
    int width = SEG_MARGIN, height = 0;
    for (int p = 0; p < 3; p++) {
        width += (int)sl[p].cols * SEG_SCALE + SEG_MARGIN;
        int h = (int)sl[p].rows * SEG_SCALE;
        height = h > height ? h : height;
    }
    height += SEG_TITLE + SEG_MARGIN;
    cairo_surface_t *surf = cairo_image_surface_create(CAIRO_FORMAT_RGB24, width, height);
    cairo_t *cr = cairo_create(surf);
    cairo_set_source_rgb(cr, 0, 0, 0);
    cairo_paint(cr);
    cairo_set_source_rgb(cr, 1, 1, 1);
    cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
    cairo_set_font_size(cr, 14);
    cairo_move_to(cr, SEG_MARGIN, 18);
    cairo_show_text(cr, title);
    int x0 = SEG_MARGIN;
    for (int p = 0; p < 3; p++) {
        const seg_slice *s = &sl[p];
        int pw = (int)s->cols, ph = (int)s->rows;
        cairo_surface_t *tile = cairo_image_surface_create(CAIRO_FORMAT_RGB24, pw, ph);
        cairo_surface_flush(tile);
        unsigned char *px = cairo_image_surface_get_data(tile);
        int stride = cairo_image_surface_get_stride(tile);
        for (int64_t r = 0; r < ph; r++)
            for (int64_t c = 0; c < pw; c++) {
                int64_t v = slice_voxel(s, r, c, D, H, W);
                double g = ((double)img[v] - lo) / ((double)hi - lo);
                g = g < 0 ? 0 : g > 1 ? 1 : g;
                double rgb[3] = {g, g, g};
                if (pr[v] > 0) { /* prediction: 45% colour over the grey */
                    double col[3];
                    class_colour(pr[v], n_classes, col);
                    for (int k = 0; k < 3; k++) rgb[k] = 0.55 * rgb[k] + 0.45 * col[k];
                }
                if (gt) { /* ground truth outline: a pixel whose 4-neighbours do not all share its class */
                    bool edge = false;
                    const int64_t dr[4] = {-1, 1, 0, 0}, dc[4] = {0, 0, -1, 1};
                    for (int k = 0; k < 4 && !edge; k++) {
                        int64_t rr = r + dr[k], cc = c + dc[k];
                        if (rr < 0 || rr >= ph || cc < 0 || cc >= pw) continue;
                        edge = gt[slice_voxel(s, rr, cc, D, H, W)] != gt[v];
                    }
                    if (edge && gt[v] > 0) rgb[0] = 1.0, rgb[1] = 0.9, rgb[2] = 0.1;
                }
                uint32_t *o = (uint32_t *)(px + r * stride) + c;
                *o = ((uint32_t)(rgb[0] * 255.0 + 0.5) << 16) | ((uint32_t)(rgb[1] * 255.0 + 0.5) << 8) |
                     (uint32_t)(rgb[2] * 255.0 + 0.5);
            }
        cairo_surface_mark_dirty(tile);
        cairo_save(cr);
        cairo_translate(cr, x0, SEG_TITLE);
        cairo_scale(cr, SEG_SCALE, SEG_SCALE);
        cairo_set_source_surface(cr, tile, 0, 0);
        cairo_pattern_set_filter(cairo_get_source(cr), CAIRO_FILTER_NEAREST);
        cairo_paint(cr);
        cairo_restore(cr);
        cairo_surface_destroy(tile);
        if (split_d >= 0 && split_d < D && p > 0) { /* where the held-out slab begins */
            double y = SEG_TITLE + (double)(D - split_d) * SEG_SCALE;
            const double dash[2] = {6, 4};
            cairo_set_dash(cr, dash, 2, 0);
            cairo_set_source_rgb(cr, 0.3, 0.8, 1.0);
            cairo_set_line_width(cr, 1.5);
            cairo_move_to(cr, x0, y);
            cairo_line_to(cr, x0 + pw * SEG_SCALE, y);
            cairo_stroke(cr);
            cairo_set_dash(cr, NULL, 0, 0);
        }
        char label[64];
        snprintf(label, sizeof label, "%s %s %lld", names[p], p == 0 ? "k" : p == 1 ? "j" : "i",
                 (long long)s->index);
        cairo_set_source_rgb(cr, 0.85, 0.85, 0.85);
        cairo_set_font_size(cr, 12);
        cairo_move_to(cr, x0, SEG_TITLE - 6);
        cairo_show_text(cr, label);
        x0 += pw * SEG_SCALE + SEG_MARGIN;
    }
    cairo_destroy(cr);
    rt_status st = cli_png_save(surf, png_path);
    cairo_surface_destroy(surf);
    return st;
}
