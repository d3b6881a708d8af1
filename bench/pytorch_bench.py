#!/usr/bin/python3
"""PyTorch side of bench/run.sh: times the training step that `revtorch bench` times.

    /usr/bin/python3 bench/pytorch_bench.py [--model resnet20] [--batch-size 128]
        [--size 28] [--channels 1] [--steps 10] [--warmup 3] [--threads N]
        [--channels-last] [--autocast bf16]
    /usr/bin/python3 bench/pytorch_bench.py --sgemm 2048 [--threads N] [--steps 10]

Model: the same ResNet as revtorch's (torchvision module structure, from
tools/pytorch_eval.py), 10 classes, float32, NCHW, eager mode.  What an informed
PyTorch CPU user runs instead: --channels-last puts the model and the batch in
torch.channels_last (NHWC, oneDNN's preferred order), and --autocast bf16 runs
forward and loss under torch.autocast("cpu", dtype=torch.bfloat16) (weights and
optimizer stay f32, as revtorch's --precision bf16).  The printed line names
the case (memory_format=..., autocast=...).
Step: optimizer.zero_grad(); logits = model(x); loss = F.cross_entropy(logits, y);
loss.backward(); optimizer.step() with SGD(lr=0.01, momentum=0.9) — the same as
cli/bench.c.  Data: x ~ N(0, 1) of shape (batch, channels, size, size), labels
i % 10, fixed for every step.  W untimed warm-up steps, then N timed steps;
prints one line in the format of `revtorch bench`:

    pytorch model=resnet20 batch=128 size=28 threads=2 median_step_s=... min_step_s=...
            images_per_s=... rss_after_import_mib=... peak_rss_mib=... fwd_gflop=...

(rss_after_import_mib: resident memory after `import torch` and before the
model is built — the framework's own baseline; peak_rss_mib: VmHWM at the end;
fwd_gflop: FLOPs of the convolutions and linear layers in one forward pass of
the batch, counted with hooks before timing.  A training step does about 3× that:
forward, gradient w.r.t. inputs, gradient w.r.t. weights.)

--sgemm N times an N×N float32 matrix product with torch.mm and numpy.matmul
(OpenBLAS) using the same thread count and prints the best and median GFLOP/s
of each (2·N³ flops per product): the machine's practical compute peak, for
reading step times as a fraction of it.
"""

import argparse
import os
import statistics
import sys
import time


def _vm(field):
    """A field of /proc/self/status in MiB (VmRSS, VmHWM), or -1."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return -1.0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="resnet20")
    ap.add_argument("--batch-size", type=int, default=128)
    ap.add_argument("--size", type=int, default=28)
    ap.add_argument("--channels", type=int, default=1)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--threads", type=int, default=0, help="torch threads (default: torch's choice)")
    ap.add_argument("--sgemm", type=int, default=0, metavar="N", help="time an N×N matmul instead")
    ap.add_argument("--channels-last", action="store_true", help="model and batch in torch.channels_last")
    ap.add_argument("--autocast", choices=("off", "bf16"), default="off",
                    help='forward and loss under torch.autocast("cpu", dtype=torch.bfloat16)')
    args = ap.parse_args(argv)
    if args.steps < 1 or args.batch_size < 1 or args.size < 1 or args.channels < 1 or args.warmup < 0:
        ap.error("--steps, --batch-size, --size and --channels must be >= 1, --warmup >= 0")

    if args.threads:
        # numpy's OpenBLAS reads these at load time; torch also honours set_num_threads below
        for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ[v] = str(args.threads)
    import numpy as np
    import torch
    import torch.nn.functional as F

    if args.threads:
        torch.set_num_threads(args.threads)
    rss_import = _vm("VmRSS")

    if args.sgemm:
        return sgemm(args, np, torch)

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
    from pytorch_eval import build_model

    torch.manual_seed(0)
    model = build_model(args.model, in_channels=args.channels, num_classes=10)
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(args.batch_size, args.channels, args.size, args.size, generator=g)
    y = torch.arange(args.batch_size) % 10

    fwd_flop = forward_flops(model, x[:1], torch) * args.batch_size
    if args.channels_last:
        model = model.to(memory_format=torch.channels_last)
        x = x.contiguous(memory_format=torch.channels_last)
    use_autocast = args.autocast == "bf16"

    times = []
    for s in range(args.warmup + args.steps):
        t0 = time.perf_counter()
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=use_autocast):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        dt = time.perf_counter() - t0
        if not torch.isfinite(loss):
            print(f"pytorch_bench: loss is {float(loss)} at step {s}", file=sys.stderr)
            return 1
        if s >= args.warmup:
            times.append(dt)
    med = statistics.median(times)
    print(f"pytorch model={args.model} batch={args.batch_size} size={args.size} threads={torch.get_num_threads()} "
          f"memory_format={'channels_last' if args.channels_last else 'contiguous'} autocast={args.autocast} "
          f"median_step_s={med:.4f} min_step_s={min(times):.4f} images_per_s={args.batch_size / med:.1f} "
          f"rss_after_import_mib={rss_import:.1f} peak_rss_mib={_vm('VmHWM'):.1f} fwd_gflop={fwd_flop / 1e9:.3f}")
    return 0


def forward_flops(model, x1, torch):
    """Multiply-add FLOPs (2 per MAC) of the convolutions and linear layers in one forward pass."""
    total = [0]

    def hook(m, inp, out):
        if isinstance(m, torch.nn.Conv2d):
            k = m.in_channels // m.groups * m.kernel_size[0] * m.kernel_size[1]
            total[0] += 2 * out.numel() * k
        elif isinstance(m, torch.nn.Linear):
            total[0] += 2 * out.numel() * m.in_features

    hs = [m.register_forward_hook(hook) for m in model.modules() if isinstance(m, (torch.nn.Conv2d, torch.nn.Linear))]
    was = model.training
    model.eval()  # no running-statistics update from this pass
    with torch.no_grad():
        model(x1)
    model.train(was)
    for h in hs:
        h.remove()
    return total[0]


def sgemm(args, np, torch):
    n = args.sgemm
    reps = max(args.steps, 3)
    flops = 2.0 * n ** 3
    g = torch.Generator().manual_seed(0)
    a = torch.randn(n, n, generator=g)
    b = torch.randn(n, n, generator=g)
    c = torch.empty(n, n)
    an, bn = a.numpy().copy(), b.numpy().copy()
    cn = np.empty((n, n), dtype=np.float32)

    def timeit(fn):
        fn()  # warm-up (thread pool start, page faults)
        ts = []
        for _ in range(reps):
            t0 = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t0)
        return flops / min(ts) / 1e9, flops / statistics.median(ts) / 1e9

    tb, tm = timeit(lambda: torch.mm(a, b, out=c))
    nb, nm = timeit(lambda: np.matmul(an, bn, out=cn))
    print(f"sgemm n={n} threads={torch.get_num_threads()} torch_best_gflops={tb:.1f} torch_median_gflops={tm:.1f} "
          f"numpy_best_gflops={nb:.1f} numpy_median_gflops={nm:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
