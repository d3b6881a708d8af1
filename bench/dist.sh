#!/usr/bin/env bash
# Data parallelism on one machine: 2 ranks × 1 thread, each on BATCH images,
# against 1 rank × 1 thread on BATCH images (half the global batch), for
# resnet20 and ResNet-50, alternating R times; prints the medians, their
# ratio (1.00 = perfect weak scaling) and the fraction of the gradient
# all-reduce hidden behind backward.
#   bench/dist.sh [REPEATS] [STEPS]
set -euo pipefail
cd "$(dirname "$0")/.."
repeats="${1:-3}" steps="${2:-5}"
bin=build/bench_dist_step
[ -x "$bin" ] || { echo "build first: cmake --build build --target bench_dist_step"; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc --all) cores"
echo "ISA: $(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx2|avx512f|avx512_bf16|amx_bf16|fma)$' | tr '\n' ' ')"
median() { tr ' ' '\n' <<< "$1" | sed '/^$/d' | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
# model, images per rank, image side, channels
for cfg in "resnet20 64 32 3" "resnet50 8 64 3"; do
    read -r model batch side ch <<< "$cfg"
    one="" two="" hid="" ar=""
    for r in $(seq "$repeats"); do
        l1=$(mpirun -np 1 "$bin" "$model" "$batch" "$side" "$ch" "$steps")
        l2=$(mpirun -np 2 --oversubscribe "$bin" "$model" "$batch" "$side" "$ch" "$steps")
        one+="$(sed -n 's/.*median_step_s=\([0-9.]*\).*/\1/p' <<< "$l1") "
        two+="$(sed -n 's/.*median_step_s=\([0-9.]*\).*/\1/p' <<< "$l2") "
        hid+="$(sed -n 's/.*hidden=\([0-9.]*\).*/\1/p' <<< "$l2") "
        ar+="$(sed -n 's/.*allreduce_alone_ms=\([0-9.]*\).*/\1/p' <<< "$l2") "
        echo "run $r: $l2" >&2
    done
    m1=$(median "$one") m2=$(median "$two")
    echo "$model ${side}x${side}x$ch, $batch images per rank: 1 rank $m1 s/step, 2 ranks $m2 s/step (ratio $(awk -v a="$m2" -v b="$m1" 'BEGIN {printf "%.2f", a/b}')), all-reduce alone $(median "$ar") ms, $(awk -v h="$(median "$hid")" 'BEGIN {printf "%.0f", 100*h}')% hidden behind backward"
done
