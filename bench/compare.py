#!/usr/bin/python3
"""Driver of bench/run.sh: revtorch vs PyTorch training-step time and memory.

    /usr/bin/python3 bench/compare.py --revtorch PATH [--quick] [--repeats R]
        [--threads T] [--steps N --warmup W] [--config SPEC]... [--sgemm N]
        [--json FILE]

For each configuration it runs `revtorch bench`, `revtorch bench --conv-algo
direct` and bench/pytorch_bench.py alternately (revtorch, direct, pytorch,
revtorch, ... R times), each in a fresh process, and records the median step time each process reports and the
process's peak resident set size (ru_maxrss from wait4 — the number
`/usr/bin/time -f %M` prints).  The table shows, per configuration, the median
over the R runs of each side; the ratio is revtorch / PyTorch (below 1:
revtorch is faster).  "revtorch" is the default convolution policy (auto:
Winograd where oneDNN's is faster); "direct" forces the direct convolution
PyTorch's CPU path runs, so its ratio isolates everything but the algorithm
(--no-direct skips it).  Before the configurations it times an N×N SGEMM
(torch.mm and numpy/OpenBLAS) with the same thread count as the compute peak
to compare against.

--precision adds the mixed-precision sides (issue: compare with what an
informed PyTorch CPU user runs): `revtorch bench --precision bf16`, and
PyTorch with channels_last in f32 and channels_last under
torch.autocast("cpu", dtype=torch.bfloat16), all alternating with the others,
in a second table with the ratios revtorch bf16 / revtorch f32 and revtorch
bf16 / PyTorch channels_last bf16.

--config SPEC adds a configuration (replacing the default set the first time):
MODEL:SIZE:CHANNELS:BATCH[:STEPS:WARMUP], e.g. resnet18:64:3:32:5:2.
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cpu_info import cpu_info  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
PY = "/usr/bin/python3"  # Debian's python: the one with torch
NOISY = 1.25  # flag a side whose per-run medians spread more than this factor

# (model, size, channels, batch, steps, warmup)
DEFAULT_CONFIGS = [
    ("resnet20", 28, 1, 128, 10, 3),
    ("resnet50", 224, 3, 8, 5, 2),
    ("resnet50", 224, 3, 16, 5, 2),
    # both sides reversible: revtorch's sequence node vs a RevNet autograd
    # Function written in plain PyTorch (tools/pytorch_revnet.py)
    ("revnet110", 32, 3, 128, 5, 2),
]


def parse_config(spec):
    parts = spec.split(":")
    if len(parts) not in (4, 6):
        raise argparse.ArgumentTypeError(f"config '{spec}': want MODEL:SIZE:CHANNELS:BATCH[:STEPS:WARMUP]")
    try:
        nums = [int(p) for p in parts[1:]]
    except ValueError:
        raise argparse.ArgumentTypeError(f"config '{spec}': SIZE, CHANNELS, BATCH, STEPS, WARMUP are integers")
    if len(nums) == 3:
        nums += [10, 3]
    return (parts[0], *nums)


def run_measured(cmd):
    """Run cmd; return (exit code, stdout+stderr text, peak RSS MiB of that process)."""
    with tempfile.TemporaryFile(mode="w+") as out:
        p = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, text=True)
        _, status, ru = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        text = out.read()
    return p.returncode, text, ru.ru_maxrss / 1024.0  # Linux: KiB


def parse_line(text, prefix):
    for line in text.splitlines():
        if line.startswith(prefix + " "):
            return {k: v for k, v in re.findall(r"(\w+)=(\S+)", line)}
    return None


def one_run(kind, args, cfg):
    model, size, ch, batch, steps, warmup = cfg
    common = ["--model", model, "--batch-size", str(batch), "--size", str(size), "--channels", str(ch),
              "--steps", str(steps), "--warmup", str(warmup), "--threads", str(args.threads)]
    if kind == "revtorch":
        cmd = [args.revtorch, "bench"] + common
    elif kind == "direct":
        cmd = [args.revtorch, "bench", "--conv-algo", "direct"] + common
    elif kind == "rt_bf16":
        cmd = [args.revtorch, "bench", "--precision", "bf16"] + common
    elif kind == "pt_cl":
        cmd = [PY, os.path.join(HERE, "pytorch_bench.py"), "--channels-last"] + common
    elif kind == "pt_cl_bf16":
        cmd = [PY, os.path.join(HERE, "pytorch_bench.py"), "--channels-last", "--autocast", "bf16"] + common
    else:
        cmd = [PY, os.path.join(HERE, "pytorch_bench.py")] + common
    rc, text, rss = run_measured(cmd)
    fields = parse_line(text, "pytorch" if kind.startswith("p") else "revtorch")
    if rc != 0 or fields is None or "median_step_s" not in fields:
        sys.stderr.write(f"  {kind} FAILED (exit {rc}): {' '.join(cmd)}\n{text}\n")
        return None
    fields = {k: (float(v) if re.fullmatch(r"[-+0-9.eE]+", v) else v) for k, v in fields.items()}
    fields["rss_mib"] = rss
    sys.stderr.write(f"  {kind:8s} median {fields['median_step_s']:.4f} s/step  "
                     f"{fields['images_per_s']:.1f} img/s  peak RSS {rss:.0f} MiB\n")
    return fields


def med(runs, key):
    vals = [r[key] for r in runs if r is not None and key in r]
    return statistics.median(vals) if vals else None


def fmt(x, spec):
    return "n/a" if x is None else format(x, spec)


def loadavg():
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "?"


def main(argv=None):
    ap = argparse.ArgumentParser(description="revtorch vs PyTorch training-step benchmark")
    ap.add_argument("--revtorch", required=True, help="path of the revtorch binary")
    ap.add_argument("--quick", action="store_true", help="only resnet20 28×28 1ch batch 128")
    ap.add_argument("--repeats", type=int, default=3, help="alternating runs of each side (default 3)")
    ap.add_argument("--threads", type=int, default=2, help="threads for both (default 2)")
    ap.add_argument("--steps", type=int, help="timed steps for every configuration (default: per config)")
    ap.add_argument("--warmup", type=int, help="warm-up steps for every configuration (default: per config)")
    ap.add_argument("--config", action="append", type=parse_config, default=[],
                    help="MODEL:SIZE:CHANNELS:BATCH[:STEPS:WARMUP] (repeatable; replaces the defaults)")
    ap.add_argument("--sgemm", type=int, default=2048, help="SGEMM size for the peak (0: skip; default 2048)")
    ap.add_argument("--json", help="also write all per-run results to this file")
    ap.add_argument("--no-direct", action="store_true",
                    help="skip the revtorch --conv-algo direct runs")
    ap.add_argument("--precision", action="store_true",
                    help="add revtorch --precision bf16 and PyTorch channels_last f32 / bf16 autocast sides")
    args = ap.parse_args(argv)
    if args.repeats < 1 or args.threads < 1:
        ap.error("--repeats and --threads must be >= 1")

    configs = args.config or (DEFAULT_CONFIGS[:1] if args.quick else DEFAULT_CONFIGS)
    configs = [(m, s, c, b, args.steps or st, args.warmup if args.warmup is not None else w)
               for (m, s, c, b, st, w) in configs]

    sys.stderr.write(f"revtorch: {args.revtorch}\nthreads {args.threads}, {args.repeats} alternating repeats, "
                     f"load average {loadavg()}\n")
    sgemm = None
    if args.sgemm:
        rc, text, _ = run_measured([PY, os.path.join(HERE, "pytorch_bench.py"), "--sgemm", str(args.sgemm),
                                    "--threads", str(args.threads)])
        sgemm = parse_line(text, "sgemm")
        if rc != 0 or sgemm is None:
            sys.stderr.write(f"SGEMM measurement failed:\n{text}\n")
            sgemm = None

    sides = ("revtorch", "pytorch") if args.no_direct else ("revtorch", "direct", "pytorch")
    if args.precision:
        sides = sides + ("rt_bf16", "pt_cl", "pt_cl_bf16")
    results = []
    for cfg in configs:
        model, size, ch, batch, steps, warmup = cfg
        sys.stderr.write(f"{model} {size}x{size}x{ch} batch {batch}: {steps} steps after {warmup} warm-up\n")
        runs = {kind: [] for kind in sides}
        for _ in range(args.repeats):
            for kind in sides:
                runs[kind].append(one_run(kind, args, cfg))
        results.append((cfg, runs))

    print(f"\n### revtorch vs PyTorch {torch_version()}: training step (forward, cross-entropy, backward, "
          f"SGD momentum), {args.threads} threads, median of {args.repeats} alternating runs\n")
    model_name, isa = cpu_info()
    print(f"CPU: {model_name}; ISA flags: {isa}\n")
    direct = "direct" in sides
    print("| config | revtorch s/step | PyTorch s/step | ratio rt/pt "
          + ("| direct s/step | ratio direct/pt " if direct else "")
          + "| revtorch img/s | PyTorch img/s | revtorch peak RSS MiB | PyTorch peak RSS MiB "
          "| revtorch tracked peak MiB |")
    print("|---|---:|---:|---:|" + ("---:|---:|" if direct else "") + "---:|---:|---:|---:|---:|")
    for cfg, runs in results:
        model, size, ch, batch, steps, warmup = cfg
        rt, pt = runs["revtorch"], runs["pytorch"]
        rts, pts = med(rt, "median_step_s"), med(pt, "median_step_s")
        ratio = rts / pts if rts and pts else None
        dcols = ""
        if direct:
            ds = med(runs["direct"], "median_step_s")
            dcols = f"| {fmt(ds, '.4f')} | {fmt(ds / pts if ds and pts else None, '.2f')} "
        print(f"| {model} {size}×{size}×{ch} b{batch} | {fmt(rts, '.4f')} | {fmt(pts, '.4f')} | {fmt(ratio, '.2f')} "
              + dcols +
              f"| {fmt(batch / rts if rts else None, '.1f')} | {fmt(batch / pts if pts else None, '.1f')} "
              f"| {fmt(med(rt, 'rss_mib'), '.0f')} | {fmt(med(pt, 'rss_mib'), '.0f')} "
              f"| {fmt(med(rt, 'peak_tracked_mib'), '.1f')} |")
    if args.precision:
        print_precision_table(results)
    print()
    print("Fastest run of each side (other load only ever adds time, so on a busy machine this is the better "
          "estimate of intrinsic speed):\n")
    print("| config | revtorch fastest run s/step | PyTorch fastest run s/step | ratio rt/pt "
          "| revtorch min step s | PyTorch min step s |")
    print("|---|---:|---:|---:|---:|---:|")
    for cfg, runs in results:
        model, size, ch, batch, steps, warmup = cfg
        best = {}
        for kind in ("revtorch", "pytorch"):
            ok = [r for r in runs[kind] if r]
            best[kind] = (min(r["median_step_s"] for r in ok), min(r["min_step_s"] for r in ok)) if ok else (None, None)
        (rb, rm), (pb, pm) = best["revtorch"], best["pytorch"]
        print(f"| {model} {size}×{size}×{ch} b{batch} | {fmt(rb, '.4f')} | {fmt(pb, '.4f')} "
              f"| {fmt(rb / pb if rb and pb else None, '.2f')} | {fmt(rm, '.4f')} | {fmt(pm, '.4f')} |")
    print()
    for cfg, runs in results:
        model, size, ch, batch, steps, warmup = cfg
        for kind in sides:
            vals = [r["median_step_s"] for r in runs[kind] if r]
            failed = sum(r is None for r in runs[kind])
            noisy = len(vals) > 1 and max(vals) > NOISY * min(vals)
            print(f"- {model} {size}×{size}×{ch} b{batch} {kind}: per-run medians "
                  f"{', '.join(f'{v:.4f}' for v in vals) or 'none'} s"
                  + (f" ({failed} failed)" if failed else "")
                  + (f" — NOISY: slowest run {max(vals) / min(vals):.1f}× the fastest (other load on the machine?)"
                     if noisy else ""))
        fwd = med(runs["pytorch"], "fwd_gflop")
        if fwd:
            peak = float(sgemm["numpy_best_gflops"]) if sgemm else None
            rates = []
            for kind in sides:
                t = med(runs[kind], "median_step_s")
                rate = 3 * fwd / t if t else None
                frac = f" ({rate / peak:.0%} of SGEMM)" if rate and peak else ""
                rates.append(f"{kind} {fmt(rate, '.1f')} GFLOP/s{frac}")
            print(f"- {model} {size}×{size}×{ch} b{batch}: {fwd:.2f} GFLOP per forward pass of the batch; "
                  f"at ≈3× that per step: {', '.join(rates)}")
    pt_base = [r.get("rss_after_import_mib") for _, runs in results for r in runs["pytorch"] if r]
    if pt_base:
        print(f"- PyTorch's RSS after `import torch`, before any model: {statistics.median(pt_base):.0f} MiB "
              f"(included in its peak RSS)")
    if sgemm:
        print(f"- SGEMM {sgemm['n']}×{sgemm['n']} f32, {sgemm['threads']} threads: torch.mm best "
              f"{sgemm['torch_best_gflops']} GFLOP/s (median {sgemm['torch_median_gflops']}), numpy/OpenBLAS best "
              f"{sgemm['numpy_best_gflops']} GFLOP/s (median {sgemm['numpy_median_gflops']})")
    print(f"- load average at the end: {loadavg()}")

    if args.json:
        with open(args.json, "w") as f:
            json.dump({"threads": args.threads, "repeats": args.repeats, "sgemm": sgemm,
                       "results": [{"config": dict(zip(("model", "size", "channels", "batch", "steps", "warmup"), cfg)),
                                    "runs": runs} for cfg, runs in results]}, f, indent=1)
    ok = all(r is not None for _, runs in results for rs in runs.values() for r in rs)
    return 0 if ok else 1


def print_precision_table(results):
    """The mixed-precision comparison: medians over the alternating runs, and the case each side measured."""
    print()
    print("Mixed precision (same runs, alternating): revtorch f32 / bf16, PyTorch NCHW f32 / channels_last f32 / "
          "channels_last + autocast bf16, s/step\n")
    print("| config | revtorch f32 | revtorch bf16 | bf16/f32 | PyTorch f32 | PyTorch CL f32 | PyTorch CL bf16 "
          "| rt bf16 / pt CL bf16 | revtorch bf16 case |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---|")
    for cfg, runs in results:
        model, size, ch, batch, steps, warmup = cfg
        r32, r16 = med(runs["revtorch"], "median_step_s"), med(runs["rt_bf16"], "median_step_s")
        p32, pcl, pcl16 = (med(runs[k], "median_step_s") for k in ("pytorch", "pt_cl", "pt_cl_bf16"))
        case = next((r.get("case") for r in runs["rt_bf16"] if r), "n/a")
        print(f"| {model} {size}×{size}×{ch} b{batch} | {fmt(r32, '.4f')} | {fmt(r16, '.4f')} "
              f"| {fmt(r16 / r32 if r16 and r32 else None, '.2f')} | {fmt(p32, '.4f')} | {fmt(pcl, '.4f')} "
              f"| {fmt(pcl16, '.4f')} | {fmt(r16 / pcl16 if r16 and pcl16 else None, '.2f')} | {case} |")


def torch_version():
    try:
        r = subprocess.run([PY, "-c", "import torch; print(torch.__version__)"], capture_output=True, text=True)
        return r.stdout.strip()
    except OSError:
        return "?"


if __name__ == "__main__":
    sys.exit(main())
