#!/usr/bin/env bash
# One training step of the standard 3-D U-Net (and the partially reversible
# one) in revtorch and in PyTorch 1.13, alternating in one run: for each
# configuration and repeat, revtorch, then PyTorch NCDHW, then PyTorch
# channels_last_3d (oneDNN's preferred order), each a fresh process with
# W warm-up and S timed steps. Prints the CPU and its ISA flags, the medians
# over the repeats and the ratios revtorch / PyTorch (below 1: revtorch faster).
#   bench/unet3d.sh [REPEATS] [CONFIGS...]
# CONFIG = model:size:batch (default unet3d:64:1 unet3d:64:2). Same step on
# both sides: Dice + cross-entropy, SGD momentum 0.9, 4 input channels,
# 4 classes, 2 threads (bench/unet3d_pytorch.py documents the PyTorch side).
# PyTorch's bf16 autocast is tried once: 1.13's CPU GroupNorm refuses it.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
bin="${REVTORCH:-$here/../build/revtorch}"
py=/usr/bin/python3
repeats="${1:-3}"; shift || true
configs=("$@"); [ ${#configs[@]} -gt 0 ] || configs=(unet3d:64:1 unet3d:64:2)
steps=2 warmup=1 threads=2
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
echo "isa: $(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx2|fma|avx512f|avx512_bf16|amx_bf16)$' | tr '\n' ' ')"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
median() { tr ' ' '\n' <<< "$1" | sed '/^$/d' | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
field() { sed -n "s/.*$1=\([0-9.]*\).*/\1/p" <<< "$2"; }
"$py" "$here/unet3d_pytorch.py" --size 16 --steps 1 --warmup 0 --threads "$threads" --autocast bf16 || true
printf '| model | size | batch | revtorch s | PyTorch NCDHW s | PyTorch channels_last_3d s | revtorch / NCDHW | revtorch / channels_last | revtorch peak MiB (predicted) | PyTorch peak RSS MiB |\n'
printf '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n'
for c in "${configs[@]}"; do
    IFS=: read -r model size batch <<< "$c"
    tr="" tp="" tc="" peak="" pred="" rss=""
    for r in $(seq "$repeats"); do
        l=$("$bin" bench --model "$model" --size "$size" --batch-size "$batch" --steps "$steps" --warmup "$warmup" \
                         --threads "$threads")
        tr+="$(field median_step_s "$l") "; peak=$(field peak_tracked_mib "$l"); pred=$(field predicted_peak_mib "$l")
        echo "  $c run $r revtorch: $l" >&2
        l=$("$py" "$here/unet3d_pytorch.py" --model "$model" --size "$size" --batch-size "$batch" --steps "$steps" \
                  --warmup "$warmup" --threads "$threads")
        tp+="$(field median_step_s "$l") "; rss=$(field peak_rss_mib "$l")
        echo "  $c run $r pytorch: $l" >&2
        l=$("$py" "$here/unet3d_pytorch.py" --model "$model" --size "$size" --batch-size "$batch" --steps "$steps" \
                  --warmup "$warmup" --threads "$threads" --channels-last)
        tc+="$(field median_step_s "$l") "
        echo "  $c run $r pytorch channels_last: $l" >&2
    done
    mr=$(median "$tr") mp=$(median "$tp") mc=$(median "$tc")
    printf '| %s | %s³ | %s | %s | %s | %s | %s | %s | %s (%s) | %s |\n' "$model" "$size" "$batch" "$mr" "$mp" "$mc" \
        "$(awk -v a="$mr" -v b="$mp" 'BEGIN {printf "%.3f", a/b}')" \
        "$(awk -v a="$mr" -v b="$mc" 'BEGIN {printf "%.3f", a/b}')" "$peak" "$pred" "$rss"
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
