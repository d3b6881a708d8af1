#!/usr/bin/env bash
# Checkpointing rows of revtorch next to PyTorch's checkpoint_sequential,
# measured on this machine in one run:
#   bash bench/checkpoint.sh [MODEL SIZE BATCH PASSES BUDGET...]
#   e.g. bash bench/checkpoint.sh resnet50 224 8 2 600MiB 700MiB
# Works for the ResNets and RevNets. Each pass runs `revtorch memory
# --measure` (every strategy row, real steps, rows alternating step by step)
# once per budget, then bench/checkpoint_pytorch.py (plain and 2/4/8
# segments, alternating; for a RevNet also its reference reversible step);
# the passes alternate the two systems so that load on a shared machine
# hits both. Per row it prints the median over its runs (a revtorch row
# measured in every `memory` run has passes × budgets runs, a budget row
# one per pass, PyTorch rows one per pass) of the step-time overhead against
# the same system's plain step, the range over those runs, and the
# activation saving. Raw
# outputs go to $OUT (default bench/out/checkpoint); $ROUNDS (default 3)
# timed steps per row and pass on each side.
set -euo pipefail
bin="${REVTORCH:-build/revtorch}"
model="${1:-resnet50}" size="${2:-224}" batch="${3:-8}" passes="${4:-2}"
shift $(($# < 4 ? $# : 4))
budgets=("${@:-600MiB}")
out="${OUT:-bench/out/checkpoint}"
rounds="${ROUNDS:-3}"
mkdir -p "$out"
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
echo "isa: $(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx2|avx512f|avx512bw|avx512_bf16|amx_tile)$' | tr '\n' ' ')"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
for p in $(seq 1 "$passes"); do
    for b in "${budgets[@]}"; do
        echo "pass $p: revtorch memory --measure, budget $b"
        "$bin" memory --model "$model" --batch-size "$batch" --size "$size" --channels 3 --memory-budget "$b" \
            --measure-rounds "$rounds" > "$out/revtorch_${p}_${b}.txt"
    done
    echo "pass $p: pytorch checkpoint_sequential"
    /usr/bin/python3 bench/checkpoint_pytorch.py --model "$model" --batch-size "$batch" --size "$size" \
        --rounds "$rounds" > "$out/pytorch_$p.txt"
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$out" "$passes" "${budgets[@]}" <<'PY'
import re, statistics, sys
out, passes, budgets = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
rows = {}  # name -> list of (overhead %, activation saving %, predicted MiB, measured MiB)
for p in range(1, passes + 1):
    for b in budgets:
        text = open(f"{out}/revtorch_{p}_{b}.txt").read().splitlines()
        for line in text:
            m = re.match(r"^(\*?[a-z0-9]+(?: [a-zA-Z0-9]+)?)\s+(?:[0-9.]+\s+){6}([0-9.]+)\s+([0-9.]+)%\s+\S+\s+([0-9.]+)%\s+"
                         r"([0-9.]+)\s+\S+\s+([0-9.]+)\s+(-?[0-9.]+)%$", line)
            if not m:
                continue
            name = m.group(1).lstrip("*")
            if name.startswith("budget") and name in rows and len(rows[name]) >= p:
                continue
            rows.setdefault(name, []).append((float(m.group(7)), float(m.group(3)), float(m.group(2)),
                                              float(m.group(5)), float(m.group(4))))
    for line in open(f"{out}/pytorch_{p}.txt"):
        m = re.match(r"^(plain|reversible|\d+ segments)\s+([0-9.]+)\s+(-?[0-9.]+)%\s+([0-9.]+)\s+(-?[0-9.]+)%$", line)
        if m:
            rows.setdefault("pytorch " + m.group(1), []).append((float(m.group(3)), float(m.group(5)),
                                                                 float(m.group(4)), float("nan"), float("nan")))
print(f"\nmedians over {passes} passes")
print(f"{'row':<22} {'overhead':>9} {'range':>15} {'act. saving':>12} {'predicted MiB':>14} {'measured MiB':>13} "
      f"{'recompute (model)':>17}")
for name, v in rows.items():
    med = lambda i: statistics.median(x[i] for x in v)
    span = f"{min(x[0] for x in v):.1f}..{max(x[0] for x in v):.1f}"
    pred = f"{med(2):14.1f}"
    meas = "" if name.startswith("pytorch") else f"{med(3):13.1f}"
    rec = "" if name.startswith("pytorch") else f"{med(4):16.1f}%"
    print(f"{name:<22} {med(0):8.1f}% {span:>15} {med(1):11.1f}% {pred} {meas:>13} {rec:>17}")
print("pytorch rows: 'predicted MiB' is peak RSS less RSS after import; saving = 1 - that / plain's (process memory)")
PY
