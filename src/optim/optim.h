/* The optim layer in one include: optimizers (SGD, AdamW) with checkpointable
 * state, learning-rate schedules, gradient clipping and accumulation. */
#ifndef RT_OPTIM_OPTIM_H
#define RT_OPTIM_OPTIM_H

#include "grad.h"
#include "optimizer.h"
#include "schedule.h"

#endif
