#!/usr/bin/env bash
# End to end on the real Fashion-MNIST: 300 optimizer steps of resnet20
# (38400 images, batch 128). The loss must fall and test accuracy on the
# first 2000 test images must beat 80% (a random guess is 10%).
set -euo pipefail
bin="$1"
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
"$bin" train --model resnet20 --epochs 1 --train-subset 38400 --test-subset 2000 --threads 2 \
    --log "$dir/log.csv" --save "$dir/w.safetensors" | tail -3
# mean loss of the first and last 30 steps
read -r first last < <(awk -F, 'NR>1 {l[NR-1]=$4; n=NR-1} END {for(i=1;i<=30;i++){a+=l[i]; b+=l[n-30+i]} printf "%f %f\n", a/30, b/30}' "$dir/log.steps.csv")
acc=$(awk -F, 'NR==2 {print $5}' "$dir/log.csv")
echo "mean loss first 30 steps $first, last 30 steps $last, test accuracy $acc"
awk -v f="$first" -v l="$last" 'BEGIN {exit !(l < 0.5 * f)}' || { echo "FAIL: loss did not halve"; exit 1; }
awk -v a="$acc" 'BEGIN {exit !(a > 0.80)}' || { echo "FAIL: accuracy $acc <= 0.80"; exit 1; }
# the saved weights evaluate to the same accuracy
"$bin" eval --weights "$dir/w.safetensors" --test-subset 2000 --threads 2 | tee "$dir/eval.txt"
grep -q "accuracy $(awk -v a="$acc" 'BEGIN {printf "%.2f", 100*a}')%" "$dir/eval.txt" || { echo "FAIL: eval accuracy differs"; exit 1; }
echo "1 passed, 0 failed"
