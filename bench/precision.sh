#!/usr/bin/env bash
# revtorch's mixed precision against its own f32 on this CPU, both cases the
# issue asks about: bf16 compute (oneDNN's bf16 convolutions, where the CPU
# has AVX512_BF16/AMX) and storage-only bf16 (oneDNN limited to AVX2 with
# DNNL_MAX_CPU_ISA=AVX2, as on an AVX2-only CPU: no bf16 kernel exists).
#
#   bench/precision.sh [REVTORCH] [--repeats R] [--threads T] [--config MODEL:SIZE:CH:BATCH:STEPS:WARMUP]
#
# Each repeat runs, alternating in fresh processes: f32, bf16, then with
# DNNL_MAX_CPU_ISA=AVX2 f32 and bf16. Prints the CPU model and flags, every
# run's line (which names the case measured), and the medians and ratios.
# Three warm-up steps by default: the caching allocator is settled only
# after the second step (sys_allocs_per_step 0), and bf16, which allocates
# more blocks, would otherwise pay more page faults in the timed steps.
# The PyTorch columns (channels_last f32, channels_last + autocast bf16) are
# in bench/run.sh --precision, which needs Debian's python3-torch.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
REVTORCH=$ROOT/build/revtorch
REPEATS=3 THREADS=2 CONFIG=resnet50:224:3:8:5:3
while [[ $# -gt 0 ]]; do
    case "$1" in
    --repeats) REPEATS=$2; shift 2 ;;
    --threads) THREADS=$2; shift 2 ;;
    --config) CONFIG=$2; shift 2 ;;
    -h | --help) sed -n '2,16p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) REVTORCH=$1; shift ;;
    esac
done
IFS=: read -r MODEL SIZE CH BATCH STEPS WARMUP <<<"$CONFIG"
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
echo "ISA flags: $(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx2|f16c|avx512f|avx512_bf16|amx_bf16|amx_tile)$' | tr '\n' ' ')"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg); $REPEATS alternating repeats, $THREADS threads"
declare -A T
run() { # label, env..., -- args
    local label=$1; shift
    local line
    line=$(env "$@" "$REVTORCH" bench --model "$MODEL" --size "$SIZE" --channels "$CH" --batch-size "$BATCH" \
        --steps "$STEPS" --warmup "$WARMUP" --threads "$THREADS" ${PREC:+--precision $PREC} | grep '^revtorch ')
    echo "  $label: $line"
    T[$label]+="$(sed 's/.*median_step_s=\([0-9.]*\).*/\1/' <<<"$line") "
}
for ((r = 1; r <= REPEATS; r++)); do
    PREC=fp32 run f32 DNNL_MAX_CPU_ISA=ALL
    PREC=bf16 run bf16 DNNL_MAX_CPU_ISA=ALL
    PREC=fp32 run f32_avx2 DNNL_MAX_CPU_ISA=AVX2
    PREC=bf16 run bf16_avx2 DNNL_MAX_CPU_ISA=AVX2
done
median() { tr ' ' '\n' | grep . | sort -g | awk '{a[NR]=$1} END{print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
declare -A M
for k in f32 bf16 f32_avx2 bf16_avx2; do M[$k]=$(median <<<"${T[$k]}"); done
echo "medians (s/step) $MODEL ${SIZE}x${SIZE}x$CH b$BATCH: f32 ${M[f32]}, bf16 ${M[bf16]}, AVX2-limited f32 ${M[f32_avx2]}, bf16 ${M[bf16_avx2]}"
awk -v a="${M[bf16]}" -v b="${M[f32]}" -v c="${M[bf16_avx2]}" -v d="${M[f32_avx2]}" 'BEGIN{
  printf "ratio bf16/f32 (bf16 compute where available): %.2f (goal <= 0.6)\n", a/b;
  printf "ratio bf16/f32 with DNNL_MAX_CPU_ISA=AVX2 (storage only): %.2f (goal <= 1.10)\n", c/d }'
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg) (the machine is shared: other processes add time)"
