/* The segmentation metric: per-class Dice on hard label maps (the loss is
 * train/seg_loss.h). */
#ifndef RT_TRAIN_SEG_METRIC_H
#define RT_TRAIN_SEG_METRIC_H

#include <stdint.h>

#include "../core/status.h"
#include "../core/tensor.h"

/* Dice of hard label maps per class: pred and target int32 of the same
 * shape (any rank), classes c = 0..num_classes−1:
 *   dice[c] = 2·|pred = c ∧ target = c| / (|pred = c| + |target = c|)
 * NaN when the class is in neither map (nnU-Net's evaluation reports such a
 * class as NaN and leaves it out of the mean). Labels outside [0,
 * num_classes) count for no class. dice holds num_classes doubles.
 * Errors: RT_ERR_INVALID_ARG (NULL, meta, num_classes < 1), RT_ERR_SHAPE
 * (shapes differ), RT_ERR_DTYPE (not int32). */
rt_status rt_dice_per_class(const rt_tensor *pred, const rt_tensor *target, int64_t num_classes, double *dice);

#endif
