#!/usr/bin/python3
"""PyTorch side of bench/unet3d.sh: times the segmentation training step that
`revtorch bench --model unet3d|prunet3d ...` times.

    /usr/bin/python3 bench/unet3d_pytorch.py [--model unet3d] [--size 64]
        [--batch-size 1] [--channels 4] [--classes 4] [--steps 3] [--warmup 1]
        [--threads N] [--channels-last] [--autocast bf16]

Model: tools/pytorch_unet.py's definition of the zoo model (the same module
structure, widths, GroupNorm and padding as revtorch's; prunet3d runs plain
backpropagation here, as PyTorch users would without a reversible library).
Step: zero_grad; logits = model(x); loss = soft Dice (nnU-Net: softmax,
batch Dice over the foreground classes, smooth 1e-5) + cross-entropy;
backward; SGD(lr=0.01, momentum=0.9) step — what cli/bench.c runs through
rt_loss_dice_ce. Data: x ~ N(0, 1) of shape (batch, channels, S, S, S),
labels (i·7 + i//97) mod classes over the flattened voxels, as cli/bench.c.
--channels-last puts model and batch in torch.channels_last_3d (oneDNN's
preferred NDHWC order); --autocast bf16 runs forward and loss under
torch.autocast("cpu", dtype=torch.bfloat16). Prints one line:

    pytorch model=unet3d batch=1 size=64 threads=2 case=... median_step_s=... min_step_s=... peak_rss_mib=...
"""

import argparse
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
import pytorch_unet  # noqa: E402


def dice_ce(logits, target, smooth=1e-5):
    """nnU-Net's DC_and_CE_loss (weights 1, 1): batch soft Dice without the background, plus cross-entropy."""
    probs = torch.softmax(logits.float(), 1)
    onehot = F.one_hot(target.long(), logits.shape[1]).movedim(-1, 1).to(probs.dtype)
    dims = (0,) + tuple(range(2, logits.dim()))
    inter = (probs * onehot).sum(dims)
    denom = probs.sum(dims) + onehot.sum(dims)
    dice = (2 * inter + smooth) / (denom + smooth)
    return (1 - dice[1:].mean()) + F.cross_entropy(logits.float(), target.long())


def peak_rss_mib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    return -1.0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="unet3d")
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--batch-size", type=int, default=1)
    ap.add_argument("--channels", type=int, default=4)
    ap.add_argument("--classes", type=int, default=4)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--channels-last", action="store_true")
    ap.add_argument("--autocast", choices=["bf16"], default=None)
    a = ap.parse_args()
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    model = pytorch_unet.build_zoo(a.model, a.channels, a.classes)
    model.train()
    s = a.size
    x = torch.randn(a.batch_size, a.channels, s, s, s)
    i = torch.arange(a.batch_size * s * s * s)
    y = ((i * 7 + i // 97) % a.classes).reshape(a.batch_size, s, s, s).to(torch.int64)
    if a.channels_last:
        model = model.to(memory_format=torch.channels_last_3d)
        x = x.contiguous(memory_format=torch.channels_last_3d)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    times = []
    case = ("channels_last_3d" if a.channels_last else "ncdhw") + ("+autocast_bf16" if a.autocast else "")
    try:
        run_steps(a, model, opt, x, y, times)
    except RuntimeError as e:  # PyTorch 1.13's CPU GroupNorm has no bf16 autocast path
        print(f"pytorch model={a.model} batch={a.batch_size} size={s} threads={torch.get_num_threads()} case={case} "
              f"unsupported: {str(e).splitlines()[0]}")
        return
    print(f"pytorch model={a.model} batch={a.batch_size} size={s} threads={torch.get_num_threads()} case={case} "
          f"median_step_s={statistics.median(times):.4f} min_step_s={min(times):.4f} "
          f"peak_rss_mib={peak_rss_mib():.1f}")


def run_steps(a, model, opt, x, y, times):
    for step in range(a.warmup + a.steps):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        if a.autocast:
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = dice_ce(model(x), y)
        else:
            loss = dice_ce(model(x), y)
        loss.backward()
        opt.step()
        if step >= a.warmup:
            times.append(time.perf_counter() - t0)
        if not torch.isfinite(loss):
            sys.exit("pytorch: the loss is not finite")


if __name__ == "__main__":
    main()
