#!/usr/bin/env bash
# How the OpenMP wait policy and the thread count behave on a quiet and on a
# loaded machine. Times `revtorch bench --model resnet20 --batch-size 128
# --steps 5 --warmup 2` (median_step_s) in these configurations:
#   default        no OpenMP variables set: whatever the binary does by itself
#   active         OMP_WAIT_POLICY=active (waiting threads spin, never sleep)
#   spin300k       GOMP_SPINCOUNT=300000 (libgomp's own default when nothing is set)
#   passive        OMP_WAIT_POLICY=passive (waiting threads sleep at once)
#   spin10k        GOMP_SPINCOUNT=10000 (spin briefly, then sleep)
#   threads1       --threads 1 (no OpenMP team at all)
# first on the machine as it is, then while LOAD busy processes
# (`python3 -c 'while True: pass'`, default: as many as cores) compete for the
# cores; the script starts them itself and kills them on exit. Configurations
# alternate within each repeat (default 3 repeats) and the table shows medians,
# with the load average (1 min) read before and after each block.
# A run that takes longer than TIMEOUT seconds (default 120) is reported as
# ">TIMEOUT".
#   bench/threads_under_load.sh [BINARY] [REPEATS]
#   LOAD=2 TIMEOUT=120 CONFIGS="default passive threads1" bench/threads_under_load.sh build/revtorch
set -uo pipefail
bin="${1:-build/revtorch}" repeats="${2:-3}"
load="${LOAD:-$(nproc)}" limit="${TIMEOUT:-120}"
read -r -a configs <<< "${CONFIGS:-default active spin300k passive spin10k threads1}"
[ -x "$bin" ] || { echo "threads_under_load.sh: no executable $bin" >&2; exit 2; }

hogs=()
stop_hogs() {
    local p
    for p in "${hogs[@]}"; do kill "$p" 2> /dev/null; done
    for p in "${hogs[@]}"; do wait "$p" 2> /dev/null; done
    hogs=()
}
trap stop_hogs EXIT
trap 'exit 130' INT TERM

loadavg() { cut -d' ' -f1 /proc/loadavg; }
median() { tr ' ' '\n' <<< "$1" | sed '/^$/d' | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

# one timed process; prints its median_step_s, or ">limit" when it ran too long
run_one() { # config
    local env=(env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT -u OMP_NUM_THREADS) args=() out
    case "$1" in
        default) ;;
        active) env+=(OMP_WAIT_POLICY=active) ;;
        spin300k) env+=(GOMP_SPINCOUNT=300000) ;;
        passive) env+=(OMP_WAIT_POLICY=passive) ;;
        spin10k) env+=(GOMP_SPINCOUNT=10000) ;;
        threads1) args=(--threads 1) ;;
        *) echo "unknown configuration $1" >&2; return 1 ;;
    esac
    out=$(timeout "$limit" "${env[@]}" "$bin" bench --model resnet20 --batch-size 128 --steps 5 --warmup 2 \
        "${args[@]}" 2> /dev/null)
    if [ $? -eq 124 ]; then echo ">$limit"; return; fi
    sed -n 's/.*median_step_s=\([0-9.]*\).*/\1/p' <<< "$out"
}

block() { # title
    local before after c r t
    declare -A times=()
    before=$(loadavg)
    for r in $(seq "$repeats"); do
        for c in "${configs[@]}"; do
            t=$(run_one "$c")
            times[$c]+="$t "
            echo "  $1 run $r $c: $t s" >&2
        done
    done
    after=$(loadavg)
    echo
    echo "$1 (load average before $before, after $after; $repeats runs each)"
    printf '| configuration | median s/step | runs |\n|---|---:|---|\n'
    for c in "${configs[@]}"; do
        if grep -q '>' <<< "${times[$c]}"; then t=">$limit"; else t=$(median "${times[$c]}"); fi
        printf '| %s | %s | %s|\n' "$c" "$t" "${times[$c]}"
    done
}

echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) cores"
echo "isa: $(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx2|avx512f|avx512_bf16|amx_bf16|fma)$' | tr '\n' ' ')"
echo "binary: $bin; timeout per run ${limit} s"
block "as the machine is"
for _ in $(seq "$load"); do
    /usr/bin/python3 -c 'while True: pass' &
    hogs+=($!)
done
sleep 2
block "with $load busy processes"
stop_hogs
