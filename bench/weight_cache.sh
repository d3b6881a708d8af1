#!/usr/bin/env bash
# The convolution weight cache (kernels/conv.h, docs/design.md "Weight
# cache"): step time of three runs per configuration, alternating in
# separate processes R times: OLD (a build before the cache), NEW with
# --weight-cache off (its default) and NEW with --weight-cache on. Prints
# the CPU, its ISA flags, the load and per-configuration medians.
#   bench/weight_cache.sh OLD_BINARY NEW_BINARY [REPEATS]
# Configurations (model size channels batch steps warmup), 2 threads, or
# $RT_WC_CONFIGS ("...;..."): a plain step (each weight changes once per
# step, so the cache can only cost), and a reversible RevNet, whose
# backward recomputes F and G with the same weights.
set -euo pipefail
old="${1:?usage: weight_cache.sh OLD_BINARY NEW_BINARY [REPEATS]}" new="${2:?new binary}" repeats="${3:-3}"
configs=("resnet50 224 3 8 3 1" "resnet20 28 1 128 10 3" "revnet38 32 3 128 5 2")
if [ -n "${RT_WC_CONFIGS:-}" ]; then IFS=';' read -r -a configs <<< "$RT_WC_CONFIGS"; fi
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
echo "isa: $(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx2|avx512f|avx512_bf16|amx_bf16|fma)$' | tr '\n' ' ')"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
median() { tr ' ' '\n' <<< "$1" | sed '/^$/d' | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
printf '| config | old s/step | new, cache off | new, cache on | off/old | on/off |\n|---|---:|---:|---:|---:|---:|\n'
for c in "${configs[@]}"; do
    read -r model size channels batch steps warmup <<< "$c"
    t_old="" t_off="" t_on=""
    for r in $(seq "$repeats"); do
        for side in old off on; do
            bin=$new extra=(--weight-cache "$side")
            [ "$side" = old ] && bin=$old extra=()
            line=$("$bin" bench --model "$model" --size "$size" --channels "$channels" --batch-size "$batch" \
                              --steps "$steps" --warmup "$warmup" --threads 2 "${extra[@]}")
            t=$(sed -n 's/.*median_step_s=\([0-9.]*\).*/\1/p' <<< "$line")
            peak=$(sed -n 's/.*peak_tracked_mib=\([0-9.]*\).*/\1/p' <<< "$line")
            case $side in old) t_old+="$t " ;; off) t_off+="$t " ;; on) t_on+="$t " ;; esac
            echo "  $model b$batch run $r $side: $t s, peak $peak MiB" >&2
        done
    done
    mo=$(median "$t_old") mf=$(median "$t_off") mn=$(median "$t_on")
    printf '| %s %s² b%s | %s | %s | %s | %s | %s |\n' "$model" "$size" "$batch" "$mo" "$mf" "$mn" \
        "$(awk -v a="$mo" -v b="$mf" 'BEGIN {printf "%.3f", b/a}')" "$(awk -v a="$mf" -v b="$mn" 'BEGIN {printf "%.3f", b/a}')"
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
