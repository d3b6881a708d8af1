#!/usr/bin/env bash
# The largest batch whose predicted training step (revtorch memory, meta
# run: byte-exact tracked peak) fits a memory size, per checkpointing row.
#   [ROWS="balanced aggressive"] bash bench/checkpoint_max_batch.sh MODEL SIZE CHANNELS [MiB...]
# e.g. bash bench/checkpoint_max_batch.sh resnet50 224 3 8192 2048
# (the strategy rows' total column; a row name may hold a space)
set -euo pipefail
bin="${REVTORCH:-build/revtorch}"
model="$1" size="$2" channels="$3"; shift 3
limits=("${@:-8192 2048}")
total() { # batch, row name -> predicted total MiB
    "$bin" memory --model "$model" --batch-size "$1" --size "$size" --channels "$channels" --threads 1 |
        awk -v row="$2" 'index($0, row " ") == 1 && $NF ~ /%$/ { print $(NF-3); exit }'
}
printf "%-14s" "row"; for l in "${limits[@]}"; do printf " %12s" "${l} MiB"; done; echo
IFS=',' read -r -a rows <<< "${ROWS:-plain,selective,4 segments,8 segments,conservative,balanced,aggressive}"
for row in "${rows[@]}"; do
    printf "%-14s" "$row"
    for l in "${limits[@]}"; do
        lo=0 hi=4096
        while [ $((hi - lo)) -gt 1 ]; do
            mid=$(((lo + hi) / 2))
            t="$(total "$mid" "$row")"
            if awk -v t="$t" -v l="$l" 'BEGIN { exit !(t <= l) }'; then lo=$mid; else hi=$mid; fi
        done
        printf " %12s" "$lo"
    done
    echo
done
