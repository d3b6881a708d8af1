/* Pieces of `revtorch superres` (cli/superres.c) kept in their own files. */
#ifndef CLI_SUPERRES_H
#define CLI_SUPERRES_H

#include <stdint.h>

#include "core/status.h"
#include "core/tensor.h"

/* One panel of the comparison picture: an image [1, 1, h, w] f32 in [0, 1]
 * (borrowed) and its caption. */
typedef struct cli_sr_panel {
    const rt_tensor *image;
    const char *caption;
} cli_sr_panel;

/* Draws n panels side by side (each scaled to the size of the largest, by
 * nearest neighbour: an LR panel shows its pixels as blocks), grey from 0
 * (black) to 1 (white), anterior up (row h − 1 on top, as cli_segment_png's
 * axial panel), with captions above; below them a second row of the same
 * panels magnified `zoom` times around the box [y0, y0 + box) × [x0, x0 +
 * box) of the largest panel's grid, which the first row outlines. Written to
 * png_path atomically (cli_png_save). RT_ERR_INVALID_ARG for NULL panels, n
 * outside 1..8, a box outside the image or zoom < 1. */
rt_status cli_superres_png(const char *png_path, const cli_sr_panel *panels, int n, int64_t y0, int64_t x0,
                           int64_t box, int zoom, const char *title);

#endif
