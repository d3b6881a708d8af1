/* Pieces of `revtorch segment` (cli/segment.c) kept in their own files. */
#ifndef CLI_SEGMENT_H
#define CLI_SEGMENT_H

#include <stdint.h>

#include "core/status.h"
#include "core/tensor.h"

/* Draws the three mid-slices through voxel `centre` (d, h, w) of image
 * [C, D, H, W] (channel 0, grey, windowed to its 0.5–99.5th percentile) —
 * axial (d), coronal (h) and sagittal (w), superior and anterior up, the
 * subject's left on the left — with the predicted label map pred [D, H, W]
 * filled in colour (class 0 transparent) and, when truth is not NULL, its
 * outline in yellow; split_d ≥ 0 draws a dashed line at axial index split_d
 * on the coronal and sagittal panels (where the held-out slab begins).
 * Written to png_path atomically (cli_png_save). */
rt_status cli_segment_png(const char *png_path, const rt_tensor *image, const rt_tensor *pred,
                          const rt_tensor *truth, const int64_t centre[3], int64_t split_d, const char *title);

#endif
