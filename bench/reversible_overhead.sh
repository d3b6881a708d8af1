#!/usr/bin/env bash
# Step time of a RevNet with reversible backpropagation (inputs rebuilt from
# outputs, F and G re-run) over plain backpropagation on the same network,
# measured by revtorch alone: `revtorch bench --memory reversible|standard`
# alternating R times in separate processes; prints both medians and the
# ratio (theory: one extra forward of F and G ≈ 4/3).
#   bench/reversible_overhead.sh [MODEL] [BATCH] [SIZE] [CHANNELS] [REPEATS]
set -euo pipefail
cd "$(dirname "$0")/.."
model="${1:-revnet110}" batch="${2:-128}" size="${3:-32}" channels="${4:-3}" repeats="${5:-3}"
bin="${REVTORCH:-build/revtorch}"
if [ ! -x "$bin" ]; then
    cmake -S . -B build -DCMAKE_BUILD_TYPE=Release > /dev/null && cmake --build build -j"$(nproc)" --target revtorch
fi
declare -A times
for r in $(seq "$repeats"); do
    for mode in standard reversible; do
        line=$("$bin" bench --model "$model" --memory "$mode" --batch-size "$batch" --size "$size" \
                          --channels "$channels" --steps 5 --warmup 2 --threads 2)
        t=$(sed -n 's/.*median_step_s=\([0-9.]*\).*/\1/p' <<< "$line")
        times[$mode]+="$t "
        echo "run $r $mode: $t s/step" >&2
    done
done
median() { tr ' ' '\n' <<< "$1" | sed '/^$/d' | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
std=$(median "${times[standard]}") rev=$(median "${times[reversible]}")
echo "$model batch $batch ${size}x${size}x${channels}: standard $std s/step, reversible $rev s/step, ratio $(awk -v a="$rev" -v b="$std" 'BEGIN {printf "%.2f", a/b}')"
