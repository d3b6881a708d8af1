#!/usr/bin/env bash
# --precision on the command line (needs Fashion-MNIST, else skipped: 77):
# - fp16 with a loss scale far too large: the loss scaler skips the steps
#   whose gradients overflow, halving the scale each time (GradScaler), and
#   FILE.steps.csv records every skipped step (epoch counted from 1, as in
#   FILE.csv) with the scale after it, while
#   the learning-rate schedule does not advance (step stays 0); --resume
#   restores the scaler's state;
# - `check --precision bf16` measures the rebuild as training runs it (F and
#   G compute in f32 inside reversible sequences): an fp32-level error.
set -uo pipefail
bin="$1"
data="${RT_FASHION_MNIST_DIR:-/usr/share/datasets/fashion-mnist}"
[ -e "$data/train-images-idx3-ubyte.gz" ] || [ -e "$data/train-images-idx3-ubyte" ] || { echo "no Fashion-MNIST: skipped"; exit 77; }
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
pass=0; fail=0
ok() { pass=$((pass+1)); }
bad() { fail=$((fail+1)); echo "FAIL $*"; }

out="$("$bin" train --model resnet20 --train-subset 512 --test-subset 64 --batch-size 64 --epochs 1 --threads 2 \
       --warmup-steps 0 --precision fp16 --loss-scale-init 1e12 --log "$dir/l.csv" 2>&1)"
grep -q "dynamic loss scaling from 1e+12" <<< "$out" && ok || bad "no loss-scale line: $out"
# 8 steps, every one overflowing: 8 rows skipped=1, the scale halving from 5e11 (1e12 as f32,
# printed to 9 digits), step 0 throughout
awk -F, 'NR == 1 {ok = ($5 == "skipped" && $6 == "loss_scale"); next}
         {n++; if ($1 != 1 || $5 != 1 || $2 != 0) ok = 0; s[n] = $6}
         function off(a, b) {return (a > b ? a - b : b - a) / b}
         END {for (i = 2; i <= n; i++) if (off(2 * s[i], s[i-1]) > 1e-8) ok = 0;
              exit !(ok && n == 8 && off(s[1], 5e11) < 1e-6)}' \
    "$dir/l.steps.csv" && ok || bad "steps.csv: $(cat "$dir/l.steps.csv")"
grep -q "8 steps skipped for Inf/NaN gradients" <<< "$out" && ok || bad "no skipped-steps line: $out"
grep -q "no optimizer step taken (all 8 steps skipped" <<< "$out" && ! grep -q "nan" <<< "$out" && ok ||
    bad "an epoch of skipped steps printed NaN statistics: $out"

# --resume restores the loss scaler (scale, growth tracker, skipped steps) with the optimizer state
common=(--model resnet20 --train-subset 512 --test-subset 64 --batch-size 64 --epochs 2 --threads 2 --warmup-steps 0
        --precision fp16 --loss-scale-init 1e12)
"$bin" train "${common[@]}" --stop-after-epoch 1 --save "$dir/w.safetensors" > /dev/null 2>&1
out="$("$bin" train "${common[@]}" --resume "$dir/w.safetensors" 2>&1)"
grep -q "dynamic loss scaling from 3.90625e+09" <<< "$out" && grep -q "16 in all" <<< "$out" && ok ||
    bad "resume did not restore the loss scaler: $out"

# the scaler gives up after 50 skipped steps in a row (exit 1): the fixes name the initial scale, and
# FILE.steps.csv keeps the 50 skipped steps (whole rows, the scale halving) although no epoch finished
out="$("$bin" train --model resnet20 --train-subset 512 --test-subset 64 --batch-size 8 --epochs 1 --threads 2 \
       --warmup-steps 0 --precision fp16 --loss-scale-init 3e38 --log "$dir/g.csv" 2>&1)"; rc=$?
[ "$rc" -eq 1 ] && grep -q "NaN/Inf for 50 optimizer steps in a row" <<< "$out" &&
    grep -q "lower the initial loss scale (--loss-scale-init; this scaler's was 3e+38, the default 65536)" <<< "$out" &&
    ok || bad "give-up: exit $rc: $out"
awk -F, 'NR == 1 {next} {n++; if (NF != 6 || $1 != 1 || $5 != 1) ok = 0; s[n] = $6}
         BEGIN {ok = 1} function off(a, b) {return (a > b ? a - b : b - a) / b}
         END {for (i = 2; i <= n; i++) if (off(2 * s[i], s[i-1]) > 1e-8) ok = 0; exit !(ok && n == 50)}' \
    "$dir/g.steps.csv" && [ "$(tail -c 1 "$dir/g.steps.csv" | od -An -c | tr -d ' ')" = '\n' ] && ok ||
    bad "give-up steps.csv: $(head -3 "$dir/g.steps.csv")"

out="$("$bin" check --model revnet_small --precision bf16 --threads 1 2>&1)"
err="$(sed -n 's/.*worst block reconstruction error \([0-9.e+-]*\).*/\1/p' <<< "$out")"
[ -n "$err" ] && awk -v e="$err" 'BEGIN {exit !(e <= 1e-5)}' && ok || bad "check --precision bf16: block error '$err' above 1e-5: $out"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
