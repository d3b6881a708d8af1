#!/usr/bin/python3
"""PyTorch's checkpoint_sequential next to `revtorch memory --measure`.

    /usr/bin/python3 bench/checkpoint_pytorch.py [--model resnet50] [--batch-size 8]
        [--size 224] [--channels 3] [--rounds 3] [--threads 2]

Model: tools/pytorch_eval.py's ResNet (torchvision's module structure) or
RevNet (tools/pytorch_revnet.py, the reference implementation of revtorch's
RevNets), float32, eager. A RevNet's plain row back-propagates through its
units plainly (reversible=False); its segments split the chain of stem
modules, every unit (transitions included) and head modules; one more row,
"reversible", runs the reference reversible sequences (inputs rebuilt in
backward). Step: zero_grad; loss = cross_entropy(model(x), y); backward; SGD step
(momentum 0.9), the step `revtorch memory --measure` times. Strategies: plain and
torch.utils.checkpoint.checkpoint_sequential(the model's chain, chain() below,
segments) for 2, 4, 8 segments, as the PyTorch recipe the issue quotes does
(1.13's checkpoint_sequential is the reentrant variant: when its input needs
no gradient, the checkpointed segments' parameters get none — PyTorch's
documented limitation — so the batch is marked requires_grad for those runs,
as users of the recipe do; that adds the input's gradient, a small cost).

Time: one process runs the strategies alternately, step by step, for --rounds
rounds after a warm-up round, and reports each one's median and its ratio to
plain's (the machine may be shared: ratios, not absolute times).
Memory: PyTorch on CPU has no allocator statistics, so each strategy runs two
steps in a fresh process and reports its peak RSS (VmHWM) less the RSS after
`import torch` (the framework's own baseline): the step's memory as the
operating system sees it, comparable in kind to revtorch's process RSS, not
to its tracked bytes.
Prints the CPU model and ISA flags first.
"""

import argparse
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cpu_info import cpu_info  # noqa: E402


def vm(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024.0
    return -1.0


def cpu():
    name, isa = cpu_info()
    return f"cpu: {name}; isa: {isa}"


def setup(args):
    import torch
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
    from pytorch_eval import build_model
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model = build_model(args.model, in_channels=args.channels, num_classes=10)
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(args.batch_size, args.channels, args.size, args.size, generator=g)
    y = torch.arange(args.batch_size) % 10
    return torch, model, opt, x, y


def chain(torch, model):
    """The modules a forward runs, in order: a ResNet's top-level children
    (a RevNet's stem, units and head), with the flatten
    its forward does before fc as a module. The stem's ReLU is a fresh
    out-of-place one: torchvision's is in-place, and a segment that starts
    with it would modify the reentrant checkpoint's leaf input, which
    autograd refuses (the module holds no state, so the step is the same)."""
    m = model
    if is_revnet(m):  # stem, every unit (transitions included), head: RevNet.forward's order
        mods = [m.conv1, m.bn1, torch.nn.ReLU(inplace=False)]
        for trans, revs in m.stages:
            mods += ([trans] if trans is not None else []) + list(revs)
        return mods + [m.bn_out, torch.nn.ReLU(inplace=False), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(1),
                       m.fc]
    mods = [m.conv1, m.bn1, torch.nn.ReLU(inplace=False), m.maxpool]
    mods += [getattr(m, f"layer{i + 1}") for i in range(m.num_stages)]
    return mods + [m.avgpool, torch.nn.Flatten(1), m.fc]


def is_revnet(model):
    return hasattr(model, "reversible")


# strategy codes: 0 plain, REVERSIBLE (1) a RevNet's own reversible step, k > 1 checkpoint_sequential with k segments
REVERSIBLE = 1


def strategy_name(s):
    return "plain" if s == 0 else "reversible" if s == REVERSIBLE else f"{s} segments"


def step(torch, model, opt, x, y, segments):
    import torch.nn.functional as F
    from torch.utils.checkpoint import checkpoint_sequential
    opt.zero_grad()
    if is_revnet(model):
        model.reversible = segments == REVERSIBLE
    if segments > REVERSIBLE:
        # PyTorch 1.13's checkpoint_sequential is the reentrant variant (no use_reentrant argument)
        out = checkpoint_sequential(chain(torch, model), segments, x.detach().requires_grad_(True))
    else:
        out = model(x)
    loss = F.cross_entropy(out, y)
    loss.backward()
    opt.step()


def child(args):
    rss0 = vm("VmRSS")
    torch, model, opt, x, y = setup(args)
    for _ in range(2):
        step(torch, model, opt, x, y, args.child)
    print(f"{vm('VmHWM') - rss0:.1f}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="resnet50")
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--channels", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--child", type=int, default=-1, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child >= 0:
        import torch  # noqa: F401  (the baseline is taken after the import)
        return child(args)
    print(cpu())
    strategies = [0, 2, 4, 8]
    if args.model.startswith("revnet"):
        strategies.append(REVERSIBLE)
    mem = {}
    for s in strategies:
        out = subprocess.run([sys.executable, __file__, "--model", args.model, "--batch-size", str(args.batch_size),
                              "--size", str(args.size), "--channels", str(args.channels), "--threads",
                              str(args.threads), "--child", str(s)], capture_output=True, text=True, check=True)
        mem[s] = float(out.stdout.strip().splitlines()[-1])
    torch, model, opt, x, y = setup(args)
    times = {s: [] for s in strategies}
    for r in range(args.rounds + 1):
        for s in strategies:
            t0 = time.perf_counter()
            step(torch, model, opt, x, y, s)
            if r > 0:
                times[s].append(time.perf_counter() - t0)
    base_t, base_m = statistics.median(times[0]), mem[0]
    print(f"pytorch {torch.__version__} {args.model} batch {args.batch_size} {args.size}x{args.size}, "
          f"{args.threads} threads, {args.rounds} rounds")
    print(f"{'strategy':<14} {'step s':>8} {'overhead':>9} {'peak RSS-import MiB':>20} {'saving':>8}")
    for s in strategies:
        t = statistics.median(times[s])
        name = strategy_name(s)
        print(f"{name:<14} {t:8.3f} {100 * (t / base_t - 1):8.1f}% {mem[s]:20.1f} {100 * (1 - mem[s] / base_m):7.1f}%")


if __name__ == "__main__":
    main()
