#!/usr/bin/python3
"""revtorch vs PyTorch 1.13 on the 3-D operators of a U-Net stage (bench/ops3d.sh).

    /usr/bin/python3 bench/ops3d_compare.py --bench PATH/bench_ops3d [--repeats R]
        [--threads T] [--steps N --warmup W] [--config CASE:N:C:SIZE]... [--blocked] [--json FILE]

Cases (float32, C -> C channels, input N x C x SIZE^3, bias everywhere):
  conv3d    Conv3d 3x3x3, padding 1: forward, backward-data, backward-weights
            (+ bias), each timed alone.  PyTorch: F.conv3d and
            torch.ops.aten.convolution_backward with output_mask
            [True, False, False] / [False, True, True] — the calls its
            autograd makes.
  convt3d   ConvTranspose3d(C, C, 2, stride=2) from SIZE/2 to SIZE: the same
            three passes (transposed=True).
  block_in  Conv3d -> InstanceNorm3d(C, affine=True) -> LeakyReLU(0.01) (nnU-Net's
            stage): forward with autograd recording, then backward (dx and all
            parameter gradients) from a gradient of ones.
  block_gn  the same with GroupNorm(C/4, C).

For every configuration the two sides run ALTERNATELY, R times: the revtorch
binary in a fresh process, then PyTorch in this process; each run does W
untimed warm-up repetitions and N timed ones and reports the median per pass.
The table shows the median over the R runs and the ratio PyTorch / revtorch
(above 1: revtorch is faster).  Both sides use T threads and libgomp's short
spin (GOMP_SPINCOUNT=10000, as the revtorch CLI sets), PyTorch's default
mkldnn setting, and the plain NCDHW layout (--blocked adds revtorch with the
blocked nCdhw16c activations its models keep between layers).  The CPU model,
its ISA flags and the load average are printed: on a shared machine the
medians of alternating runs are the numbers to read.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cpu_info import cpu_info  # noqa: E402

os.environ.setdefault("GOMP_SPINCOUNT", "10000")  # before torch loads libgomp
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

DEFAULT_CONFIGS = [("conv3d", 1, 16, 64), ("conv3d", 2, 32, 64), ("convt3d", 1, 16, 64), ("convt3d", 2, 32, 64),
                   ("block_in", 1, 16, 64), ("block_in", 2, 32, 64), ("block_gn", 1, 16, 64),
                   ("block_gn", 2, 32, 64)]
PASSES = {"conv3d": ("fwd", "bwd_data", "bwd_weights"), "convt3d": ("fwd", "bwd_data", "bwd_weights"),
          "block_in": ("fwd", "bwd", "step"), "block_gn": ("fwd", "bwd", "step")}


def run_revtorch(bench, case, n, c, size, steps, warmup, threads, layout):
    cmd = [bench, case, str(n), str(c), str(size), str(steps), str(warmup), str(threads), layout]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.split()
    kv = dict(tok.split("=", 1) for tok in out[1:])
    return {p: float(kv[p + "_ms"]) for p in PASSES[case]}


def _median_ms(times):
    return 1e3 * statistics.median(times)


def run_pytorch(case, n, c, size, steps, warmup):
    g = torch.Generator().manual_seed(0)
    res = {p: [] for p in PASSES[case]}
    if case in ("conv3d", "convt3d"):
        t = case == "convt3d"
        s_in = size // 2 if t else size
        x = torch.randn(n, c, s_in, s_in, s_in, generator=g)
        w = torch.randn(c, c, *((2, 2, 2) if t else (3, 3, 3)), generator=g) * 0.05
        b = torch.randn(c, generator=g) * 0.1
        stride, pad = ([2, 2, 2], [0, 0, 0]) if t else ([1, 1, 1], [1, 1, 1])
        with torch.no_grad():
            y = F.conv_transpose3d(x, w, b, stride=2) if t else F.conv3d(x, w, b, padding=1)
        gy = torch.randn(y.shape, generator=g)
        for it in range(warmup + steps):
            t0 = time.perf_counter()
            with torch.no_grad():
                y = F.conv_transpose3d(x, w, b, stride=2) if t else F.conv3d(x, w, b, padding=1)
            t1 = time.perf_counter()
            torch.ops.aten.convolution_backward(gy, x, w, [c], stride, pad, [1, 1, 1], t, [0, 0, 0], 1,
                                                [True, False, False])
            t2 = time.perf_counter()
            torch.ops.aten.convolution_backward(gy, x, w, [c], stride, pad, [1, 1, 1], t, [0, 0, 0], 1,
                                                [False, True, True])
            t3 = time.perf_counter()
            if it >= warmup:
                res["fwd"].append(t1 - t0)
                res["bwd_data"].append(t2 - t1)
                res["bwd_weights"].append(t3 - t2)
    else:
        conv = nn.Conv3d(c, c, 3, padding=1)
        norm = nn.InstanceNorm3d(c, affine=True) if case == "block_in" else nn.GroupNorm(c // 4, c)
        act = nn.LeakyReLU(0.01)
        x = torch.randn(n, c, size, size, size, generator=g).requires_grad_(True)
        for it in range(warmup + steps):
            t0 = time.perf_counter()
            y = act(norm(conv(x)))
            t1 = time.perf_counter()
            gy = torch.ones_like(y)
            t2 = time.perf_counter()
            y.backward(gy)
            t3 = time.perf_counter()
            del y, gy
            x.grad = None
            conv.zero_grad(set_to_none=True)
            norm.zero_grad(set_to_none=True)
            if it >= warmup:
                res["fwd"].append(t1 - t0)
                res["bwd"].append(t3 - t2)
                res["step"].append((t1 - t0) + (t3 - t2))
    return {p: _median_ms(v) for p, v in res.items()}


def parse_config(spec):
    parts = spec.split(":")
    if len(parts) != 4 or parts[0] not in PASSES:
        raise argparse.ArgumentTypeError(f"config '{spec}': want CASE:N:C:SIZE, CASE one of {', '.join(PASSES)}")
    return (parts[0], *[int(p) for p in parts[1:]])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bench", required=True, help="path of the bench_ops3d binary")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--config", type=parse_config, action="append")
    ap.add_argument("--blocked", action="store_true", help="also time revtorch with blocked activations")
    ap.add_argument("--json", help="write the raw per-run medians here")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    model, isa = cpu_info()
    print(f"CPU: {model}, {os.cpu_count()} logical CPUs; ISA: {isa}")
    print(f"torch {torch.__version__} (mkldnn {torch.backends.mkldnn.is_available()}), threads {args.threads}, "
          f"steps {args.steps} + warm-up {args.warmup}, {args.repeats} alternating runs per side; "
          f"load average at start {os.getloadavg()[0]:.1f}")
    sys.stdout.flush()
    layouts = ["plain"] + (["blocked"] if args.blocked else [])
    rows, raw = [], []
    for case, n, c, size in args.config or DEFAULT_CONFIGS:
        runs = {lay: [] for lay in layouts}
        runs["pytorch"] = []
        for r in range(args.repeats):
            for lay in layouts:
                runs[lay].append(run_revtorch(args.bench, case, n, c, size, args.steps, args.warmup, args.threads,
                                              lay))
            runs["pytorch"].append(run_pytorch(case, n, c, size, args.steps, args.warmup))
        raw.append({"case": case, "n": n, "c": c, "size": size, "runs": runs})
        for p in PASSES[case]:
            med = {side: statistics.median(run[p] for run in v) for side, v in runs.items()}
            rows.append((case, n, c, size, p, med))
            extra = f"  blocked {med['blocked']:9.1f} ms ({med['pytorch'] / med['blocked']:.1f}x)" if args.blocked else ""
            print(f"  {case:8s} {n}x{c}x{size}^3 {p:11s} revtorch {med['plain']:9.1f} ms  pytorch "
                  f"{med['pytorch']:9.1f} ms  ratio {med['pytorch'] / med['plain']:5.1f}x{extra}")
            sys.stdout.flush()
    print(f"\nload average at end {os.getloadavg()[0]:.1f}\n")
    head = "| case | N×C×D×H×W | pass | revtorch ms | PyTorch 1.13 ms | PyTorch / revtorch |"
    if args.blocked:
        head += " revtorch blocked ms | PyTorch / blocked |"
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    for case, n, c, size, p, med in rows:
        line = (f"| {case} | {n}×{c}×{size}³ | {p} | {med['plain']:.1f} | {med['pytorch']:.1f} | "
                f"{med['pytorch'] / med['plain']:.1f}× |")
        if args.blocked:
            line += f" {med['blocked']:.1f} | {med['pytorch'] / med['blocked']:.1f}× |"
        print(line)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"cpu": model, "isa": isa, "threads": args.threads, "results": raw}, f, indent=1)


if __name__ == "__main__":
    main()
