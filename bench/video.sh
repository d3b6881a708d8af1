#!/usr/bin/env bash
# The README's video table: `revtorch video train` on Moving Fashion-MNIST
# for each sequence length T, plain BPTT and the planned schedule (default
# budget: a quarter of plain's predicted chain peak), the same training
# budget (STEPS steps of BATCH sequences, AdamW lr 3e-3, seed 0), one thread
# each; the two runs of one T run side by side so that they share the
# machine's load. Step time is CPU time per step (less sensitive to other
# processes than wall time, which is shown too). Prints the CPU and its ISA
# flags and a Markdown table; outputs under OUT/T<T>-<memory>/.
#   bench/video.sh [OUT] [T...]        (default OUT video-table, T = 16 64 128)
# Environment: STEPS (200), HIDDEN (8), BATCH (2), EVAL (32 held-out sequences).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
bin="${REVTORCH:-$here/../build/revtorch}"
out="${1:-video-table}"; shift || true
lengths=("$@"); [ ${#lengths[@]} -gt 0 ] || lengths=(16 64 128)
steps="${STEPS:-200}" hidden="${HIDDEN:-8}" batch="${BATCH:-2}" eval="${EVAL:-32}"
mkdir -p "$out"
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
echo "isa: $(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx2|fma|avx512f|avx512_bf16|amx_bf16)$' | tr '\n' ' ')"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "config: hidden $hidden, batch $batch, $steps steps, AdamW lr 3e-3, seed 0, --threads 1, $eval held-out sequences"
for T in "${lengths[@]}"; do
    for mem in plain planned; do
        OMP_NUM_THREADS=1 nice -n 19 "$bin" video train --frames "$T" --hidden "$hidden" --batch "$batch" \
            --steps "$steps" --lr 3e-3 --seed 0 --threads 1 --memory "$mem" --eval-sequences "$eval" \
            --out "$out/T$T-$mem" > "$out/T$T-$mem.log" 2>&1 &
    done
    wait
done
printf '| T | memory | schedule | chain peak MiB (predicted) | vs plain | CPU s/step | vs plain | wall s/step | held-out MSE | copy-last MSE |\n'
printf '|---:|---|---|---:|---:|---:|---:|---:|---:|---:|\n'
for T in "${lengths[@]}"; do
    python3 - "$out/T$T-plain/eval.csv" "$out/T$T-planned/eval.csv" <<'PY'
import csv, sys
rows = [next(csv.DictReader(open(p))) for p in sys.argv[1:]]
base = rows[0]
for r in rows:
    sched = "every step recorded" if r["memory"] == "plain" else \
        f"segments of {r['segment']}, {r['slots']} slots, {r['forwards']} forwards"
    mib = int(r["chain_peak_bytes"]) / 2**20
    pred = int(r["predicted_peak_bytes"]) / 2**20
    print(f"| {r['frames']} | {r['memory']} | {sched} | {mib:.1f} ({pred:.1f}) | "
          f"{int(r['chain_peak_bytes']) / int(base['chain_peak_bytes']):.2f} | {float(r['step_cpu_seconds']):.3f} | "
          f"{float(r['step_cpu_seconds']) / float(base['step_cpu_seconds']):.2f} | {float(r['step_seconds']):.3f} | "
          f"{float(r['mse']):.5f} | {float(r['copy_last_mse']):.5f} |")
PY
done
