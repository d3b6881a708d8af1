#!/usr/bin/env bash
# The memory table of the 3-D U-Nets (README, "3-D U-Nets"): the standard
# U-Net and the partially reversible one at equal depth and widths, one
# training step (Dice + cross-entropy, SGD momentum) on 128³ patches at
# batch 1, 2 and 4 and on the whole 181×217×181 Colin27 volume at batch 1.
# For each: the peak per category predicted on the meta device
# (`revtorch memory`), the tracked peak of a real step and its time
# (`revtorch bench`, 1 warm-up + 1 timed step), and the largest batch at 128³
# whose predicted step fits in 8 GiB (the prediction is byte-exact: the
# measured column checks it).
#   bench/unet3d_memory.sh [MODEL_A MODEL_B] [--no-measure]
# Defaults: unet3d prunet3d (4 levels 16/32/64/128, 4 input channels,
# 4 classes, as revtorch memory's segmentation defaults); --no-measure prints
# predictions only (seconds instead of minutes).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
bin="${REVTORCH:-$here/../build/revtorch}"
measure=1 models=()
for a in "$@"; do [ "$a" = --no-measure ] && measure=0 || models+=("$a"); done
[ ${#models[@]} -gt 0 ] || models=(unet3d prunet3d)
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
echo "isa: $(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx2|fma|avx512f|avx512_bf16|amx_bf16)$' | tr '\n' ' ')"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
# predicted row: PARAM GRAD OPTIM SAVED TEMP DATA total (MiB) of the model's first row
predict() { "$bin" memory --model "$1" --size "$2" --batch "$3" --threads 2 | awk 'NR == 3 {print $4, $5, $6, $7, $8, $9, $10}'; }
printf '| model | input | batch | PARAM | GRAD | OPTIM | SAVED | TEMP | DATA | predicted peak MiB | measured peak MiB | step s |\n'
printf '|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n'
for m in "${models[@]}"; do
    for cfg in 128,128,128:1 128,128,128:2 128,128,128:4 181,217,181:1; do
        IFS=: read -r size batch <<< "$cfg"
        read -r p g o s t d total <<< "$(predict "$m" "$size" "$batch")"
        meas="-" step="-"
        if [ "$measure" = 1 ]; then
            l=$("$bin" bench --model "$m" --size "$size" --batch-size "$batch" --steps 1 --warmup 1 --threads 2)
            meas=$(sed -n 's/.*peak_tracked_mib=\([0-9.]*\).*/\1/p' <<< "$l")
            step=$(sed -n 's/.*median_step_s=\([0-9.]*\).*/\1/p' <<< "$l")
            echo "  $m $size b$batch: $l" >&2
        fi
        printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$m" "${size//,/×}" "$batch" \
            "$p" "$g" "$o" "$s" "$t" "$d" "$total" "$meas" "$step"
    done
done
echo
echo "largest batch at 128³ whose predicted step peak fits in 8 GiB (8192 MiB):"
for m in "${models[@]}"; do
    b=1
    while [ "$(predict "$m" 128 $((b + 1)) | awk '{print ($7 <= 8192)}')" = 1 ]; do b=$((b + 1)); done
    echo "  $m: batch $b ($(predict "$m" 128 "$b" | awk '{print $7}') MiB)"
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
