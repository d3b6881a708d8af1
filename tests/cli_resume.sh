#!/usr/bin/env bash
# Resume after an interrupted run continues with losses identical, bit for
# bit, to an uninterrupted run; the same seed and threads give the same losses.
set -euo pipefail
bin="$1"
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
for model in resnet20 revnet_small; do
# 2 warm-up steps, so the cosine schedule over 16 steps shapes every step
common=(--model $model --train-subset 512 --test-subset 256 --batch-size 64 --threads 2 --seed 7 --accum-steps 3
        --warmup-steps 2)
rm -f "$dir"/*

"$bin" train "${common[@]}" --epochs 2 --log "$dir/full.csv" > "$dir/full.out"
"$bin" train "${common[@]}" --epochs 2 --log "$dir/again.csv" > /dev/null
cmp "$dir/full.steps.csv" "$dir/again.steps.csv" || { echo "FAIL: same seed gave different losses"; exit 1; }

# The "interrupted" run stops after epoch 1 (its checkpoint is what a crash leaves).
"$bin" train "${common[@]}" --epochs 2 --save "$dir/ck.safetensors" --log "$dir/part.csv" --stop-after-epoch 1 > /dev/null
test -f "$dir/ck.safetensors" && test -f "$dir/ck.optim.safetensors"
"$bin" train "${common[@]}" --epochs 2 --resume "$dir/ck.safetensors" --log "$dir/part.csv" > /dev/null
if ! cmp "$dir/full.steps.csv" "$dir/part.steps.csv"; then
    echo "FAIL: resumed losses differ from the uninterrupted run"
    diff "$dir/full.steps.csv" "$dir/part.steps.csv" | head -5
    exit 1
fi
lines=$(wc -l < "$dir/full.steps.csv")
[ "$lines" -eq 17 ] || { echo "FAIL: expected 16 steps + header, got $lines lines"; exit 1; }
echo "$model: resumed run identical to the uninterrupted one ($((lines - 1)) steps)"
done

# A save interrupted between its two files leaves weights and optimizer state
# from different epochs: resuming from such a pair is refused.
common=(--model resnet20 --train-subset 256 --test-subset 128 --batch-size 64 --threads 2 --seed 7)
"$bin" train "${common[@]}" --epochs 1 --save "$dir/a.safetensors" > /dev/null
"$bin" train "${common[@]}" --epochs 2 --save "$dir/b.safetensors" > /dev/null
cp "$dir/a.optim.safetensors" "$dir/b.optim.safetensors"
if out=$("$bin" train "${common[@]}" --epochs 3 --resume "$dir/b.safetensors" 2>&1); then
    echo "FAIL: resumed from a mismatched checkpoint pair"; exit 1
fi
grep -q "different points of training" <<< "$out" || { echo "FAIL: unclear message: $out"; exit 1; }
echo "mismatched checkpoint pair refused"

# Resuming with options that change the data order or the learning rate is
# refused, naming each option; nothing is written.
if out=$("$bin" train "${common[@]}" --epochs 3 --resume "$dir/a.safetensors" --batch-size 32 --lr 0.05 \
         --save "$dir/c.safetensors" 2>&1); then
    echo "FAIL: resumed with another --batch-size and --lr"; exit 1
fi
grep -q -- "--batch-size 64 (this run: 32)" <<< "$out" && grep -q -- "--lr 0.1 (this run: 0.05)" <<< "$out" ||
    { echo "FAIL: unclear message: $out"; exit 1; }
test ! -e "$dir/c.safetensors" || { echo "FAIL: a refused resume wrote a checkpoint"; exit 1; }
echo "resume with other options refused"

# With a cosine schedule --epochs decides every step's learning rate: a
# changed --epochs is refused; with a constant schedule it only says when to stop.
"$bin" train "${common[@]}" --epochs 2 --stop-after-epoch 1 --save "$dir/e.safetensors" > /dev/null
if out=$("$bin" train "${common[@]}" --epochs 4 --resume "$dir/e.safetensors" 2>&1); then
    echo "FAIL: resumed a cosine schedule with another --epochs"; exit 1
fi
grep -q -- "--epochs 2 (this run: 4)" <<< "$out" || { echo "FAIL: unclear message: $out"; exit 1; }
"$bin" train "${common[@]}" --schedule constant --epochs 1 --save "$dir/k.safetensors" > /dev/null
"$bin" train "${common[@]}" --schedule constant --epochs 2 --resume "$dir/k.safetensors" > /dev/null
out=$("$bin" train "${common[@]}" --schedule constant --epochs 1 --resume "$dir/k.safetensors")
grep -q "nothing left to train" <<< "$out" || { echo "FAIL: finished checkpoint: $out"; exit 1; }
echo "--epochs: refused with a cosine schedule, accepted with a constant one"

# A checkpoint whose weights hold a NaN is refused before training.
hdr=$(od -An -t u8 -N8 "$dir/a.safetensors" | tr -d ' ')
printf '\x00\x00\xc0\x7f' | dd of="$dir/a.safetensors" bs=1 seek=$((8 + hdr)) conv=notrunc status=none
if out=$("$bin" train "${common[@]}" --epochs 1 --resume "$dir/a.safetensors" 2>&1); then
    echo "FAIL: resumed from weights holding a NaN"; exit 1
fi
grep -q "holds NaN or Inf" <<< "$out" || { echo "FAIL: unclear message: $out"; exit 1; }
echo "checkpoint holding a NaN refused"
echo "1 passed, 0 failed"
