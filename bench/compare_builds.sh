#!/usr/bin/env bash
# Step time of two revtorch binaries on the same configurations, measured
# alternately in separate processes (A, B, A, B, ... R times), so a change
# that should not cost speed (a restructuring, an indirection) is checked
# against the build before it on the same, equally noisy machine. Prints the
# CPU, per-configuration medians and the ratio B/A.
#   bench/compare_builds.sh OLD_BINARY NEW_BINARY [REPEATS]
# Configurations: those of bench/run.sh (resnet20 28² b128, resnet50 224² b8
# and b16, revnet110 32² b128 reversible), 2 threads, or $RT_COMPARE_CONFIGS.
set -euo pipefail
old="${1:?usage: compare_builds.sh OLD_BINARY NEW_BINARY [REPEATS]}" new="${2:?new binary}" repeats="${3:-3}"
configs=("resnet20 28 1 128 10 3" "resnet50 224 3 8 5 2" "resnet50 224 3 16 5 2" "revnet110 32 3 128 5 2")
# RT_COMPARE_CONFIGS="model size channels batch steps warmup;..." replaces the list (a shorter run)
if [ -n "${RT_COMPARE_CONFIGS:-}" ]; then IFS=';' read -r -a configs <<< "$RT_COMPARE_CONFIGS"; fi
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
echo "isa: $(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx2|avx512f|avx512_bf16|amx_bf16|fma)$' | tr '\n' ' ')"
median() { tr ' ' '\n' <<< "$1" | sed '/^$/d' | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
# B/A of the medians, and the median of the paired ratios B_r/A_r (each
# pair ran back to back, so a slow spell of the machine hits both sides).
printf '| config | A s/step | B s/step | B/A | paired B/A (median, range) |\n|---|---:|---:|---:|---:|\n'
for c in "${configs[@]}"; do
    read -r model size channels batch steps warmup <<< "$c"
    ta="" tb="" ratios=""
    for r in $(seq "$repeats"); do
        for side in a b; do
            bin=$old; [ "$side" = b ] && bin=$new
            line=$("$bin" bench --model "$model" --size "$size" --channels "$channels" --batch-size "$batch" \
                              --steps "$steps" --warmup "$warmup" --threads 2)
            t=$(sed -n 's/.*median_step_s=\([0-9.]*\).*/\1/p' <<< "$line")
            [ "$side" = a ] && ta+="$t " || tb+="$t "
            [ "$side" = a ] && last_a=$t || ratios+="$(awk -v a="$last_a" -v b="$t" 'BEGIN {printf "%.4f", b/a}') "
            echo "  $model b$batch run $r $side: $t s" >&2
        done
    done
    ma=$(median "$ta") mb=$(median "$tb")
    lo=$(tr ' ' '\n' <<< "$ratios" | sed '/^$/d' | sort -g | head -1)
    hi=$(tr ' ' '\n' <<< "$ratios" | sed '/^$/d' | sort -g | tail -1)
    printf '| %s %s² b%s | %s | %s | %s | %s (%s–%s) |\n' "$model" "$size" "$batch" "$ma" "$mb" \
        "$(awk -v a="$ma" -v b="$mb" 'BEGIN {printf "%.3f", b/a}')" "$(median "$ratios")" "$lo" "$hi"
done
