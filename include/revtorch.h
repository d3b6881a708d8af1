/* revtorch: memory-efficient training in C (reversible blocks, checkpointing,
 * a memory planner, mixed precision and exact memory accounting), with
 * PyTorch's names and semantics.
 *
 * This is the one header a program includes:
 *
 *     #include <revtorch.h>
 *     cc prog.c $(pkg-config --cflags --libs revtorch)
 *   or, in CMake: find_package(revtorch 0.1 REQUIRED)
 *                 target_link_libraries(prog PRIVATE revtorch::revtorch)
 *
 * The API lives in the sub-headers below, one per subject, each documented
 * where it is declared: every function with the shapes (PyTorch's order,
 * NCHW / NCDHW), dtypes, units, who owns what, and the error codes it
 * returns. The sub-headers are installed under <revtorch/...> only because
 * this file includes them; include this file, not them: it alone wraps the
 * declarations in `extern "C"` for C++ programs.
 *
 * Conventions that hold for every function (core/status.h):
 *   - Errors are values. A function returns an rt_status (RT_OK == 0, the
 *     errors negative) or, for a constructor, a pointer that is NULL on
 *     error; either way rt_error_last() then holds a message naming the
 *     problem and the fix (thread-local). Nothing in the library exits or
 *     aborts on a caller's mistake; NULL and impossible arguments are
 *     refused with RT_ERR_INVALID_ARG (RT_ERR_SHAPE, RT_ERR_DTYPE for sizes
 *     and types).
 *   - Heap objects come from rt_<object>_create and go back through
 *     rt_<object>_destroy, which accepts NULL. Tensors are reference-counted:
 *     a function returning a new rt_tensor * hands the caller one reference,
 *     which rt_tensor_release drops.
 *   - Memory is booked per category (PARAM, GRAD, OPTIM, SAVED, TEMP, DATA;
 *     core/mem.h) and per thread; bytes are bytes, times are seconds.
 *   - Names follow PyTorch: Conv2d, BatchNorm2d, weight, running_mean,
 *     torchvision's state-dict paths (`layer1.0.conv1.weight`), so weights
 *     saved as safetensors open in PyTorch unchanged.
 *
 * Versioning: the shared library's SONAME is librevtorch.so.<major>; its
 * symbols carry the version node REVTORCH_<major>. Only the functions
 * declared through this header are exported from it. */
#ifndef REVTORCH_H
#define REVTORCH_H

/* The system headers the sub-headers use, outside the extern "C" block. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The public sub-headers, in layer order. CMakeLists.txt reads this list:
 * it installs exactly these files (from src/<path>) as <revtorch/<path>>
 * and exports exactly the functions they declare from librevtorch.so. A
 * public header includes only public headers, by a path relative to itself
 * ("tensor.h", "../core/tensor.h"), so that it works in src/ and installed. */

/* status codes and messages; dtypes and bf16/f16 conversion; the tracked
 * allocator (memory categories, live/peak, budgets); devices and their
 * memory tables; tensors on cpu or meta;
 * Philox random numbers */
#include "revtorch/core/status.h"
#include "revtorch/core/device.h"
#include "revtorch/core/dtype.h"
#include "revtorch/core/layout.h"
#include "revtorch/core/mem.h"
#include "revtorch/core/rng.h"
#include "revtorch/core/tensor.h"
/* the blocked activation layout's channel block, chosen for this CPU */
#include "revtorch/kernels/layout.h"
/* autograd: nodes, grad mode, saved tensors; backward */
#include "revtorch/autograd/node.h"
#include "revtorch/autograd/engine.h"
/* differentiable functional ops (2-D and 3-D) */
#include "revtorch/ops/ops.h"
#include "revtorch/ops/ops3d.h"
/* modules (torch.nn.Module), the leaf modules, the state dict */
#include "revtorch/nn/state_dict.h"
#include "revtorch/nn/module.h"
#include "revtorch/nn/modules.h"
#include "revtorch/nn/modules3d.h"
/* SGD, AdamW, schedules, gradient clipping */
#include "revtorch/optim/grad.h"
#include "revtorch/optim/optimizer.h"
#include "revtorch/optim/schedule.h"
#include "revtorch/optim/optim.h"
/* datasets, IDX and NIfTI files, Fashion-MNIST (and Moving Fashion-MNIST sequences), the batch loader */
#include "revtorch/data/dataset.h"
#include "revtorch/data/idx.h"
#include "revtorch/data/loader.h"
#include "revtorch/data/mnist.h"
#include "revtorch/data/moving_fashion.h"
#include "revtorch/data/nifti.h"
#include "revtorch/data/patches.h"
/* safetensors files; a module tree's weights to and from them */
#include "revtorch/io/safetensors.h"
#include "revtorch/io/weights.h"
/* the library training step; dynamic loss scaling */
#include "revtorch/train/step.h"
#include "revtorch/train/scaler.h"
#include "revtorch/train/seg_loss.h"
#include "revtorch/train/seg_metric.h"
#include "revtorch/train/sliding_window.h"
/* memory strategies: checkpointing, reversible blocks, the planner,
 * budgets, precision regions; memory prediction on the meta device;
 * backpropagation through time under checkpointing schedules */
#include "revtorch/memory/checkpoint.h"
#include "revtorch/memory/reversible.h"
#include "revtorch/memory/planner.h"
#include "revtorch/memory/precision.h"
#include "revtorch/memory/predict.h"
#include "revtorch/memory/budget.h"
#include "revtorch/memory/time_chain.h"
/* the model zoo: ResNets and RevNets as module trees; U-Nets; EDSR; the ConvLSTM predictor */
#include "revtorch/models/resblock.h"
#include "revtorch/models/resnet.h"
#include "revtorch/models/revnet.h"
#include "revtorch/models/model.h"
#include "revtorch/models/unet.h"
#include "revtorch/models/edsr.h"
#include "revtorch/models/convlstm.h"

#ifdef __cplusplus
}
#endif

#endif
