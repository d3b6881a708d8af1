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

/* The decision threshold of a two-class segmentation, calibrated on data
 * the model may use (the training slab), not on what it is scored on: the
 * Dice of (prob > thresholds[i]) against (target == 1), for each i, in one
 * pass per threshold.
 *   prob        f32 foreground probabilities, any shape (e.g. the class-1
 *               channel of rt_sliding_window_predict's averaged softmax)
 *   target      int32 of prob's shape; 1 is foreground, every other value
 *               background
 *   thresholds  n values in (0, 1)
 *   dice        receives n Dice values (NaN where neither map has a
 *               foreground voxel, as rt_dice_per_class)
 *   best        receives the index of the largest Dice; among equal ones the
 *               threshold nearest 0.5 (argmax of two softmax outputs), so a
 *               flat curve keeps the argmax decision; -1 if every Dice is NaN
 * Why: training patches hold far more foreground than the volume they are
 * scored on (foreground oversampling, and patch positions that cover the
 * middle of the training region more often than its borders), which moves
 * a network's posterior towards foreground (Saerens et al., Neural
 * Computation 14(1), 2002); at an ambiguous boundary the argmax then marks
 * a rim of false positives. Errors: RT_ERR_INVALID_ARG (NULL, meta, n < 1,
 * a threshold outside (0, 1)), RT_ERR_DTYPE (prob not f32, target not
 * int32), RT_ERR_SHAPE (shapes differ). */
rt_status rt_dice_threshold_sweep(const rt_tensor *prob, const rt_tensor *target, int n, const float *thresholds,
                                  double *dice, int *best);

#endif
