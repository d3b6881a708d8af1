#!/usr/bin/env bash
# The CLI's help and its messages for user mistakes.
set -uo pipefail
bin="$1"
pass=0; fail=0
check() { # name, expected exit code, grep pattern for stderr+stdout, command...
    local name="$1" want="$2" pat="$3"; shift 3
    local out rc
    out="$("$@" 2>&1)"; rc=$?
    if [ "$rc" -eq "$want" ] && grep -q -- "$pat" <<< "$out"; then pass=$((pass+1));
    else fail=$((fail+1)); echo "FAIL $name: exit $rc (want $want), output: $out" | head -5; fi
}
check help 0 "usage: revtorch" "$bin" --help
check train-help 0 "accum-steps" "$bin" train --help
check eval-help 0 "--weights" "$bin" eval --help
check bench-help 0 "median" "$bin" bench --help
check memory-help 0 "meta tensors" "$bin" memory --help
check check-help 0 "inverse" "$bin" check --help
check check-resnet 1 "no reversible blocks" "$bin" check --model resnet20
check bad-memory 2 "standard or reversible" "$bin" train --memory tiny
check bad-grouping 2 "grouping" "$bin" train --grouping zero
check unknown-cmd 2 "unknown command" "$bin" fly
check unknown-opt 2 "unknown option" "$bin" train --fast
check bad-int 2 "expects an integer" "$bin" train --epochs many
check missing-data 1 "--data" "$bin" train --data /nonexistent/dir
check bad-model 1 "resnet20" "$bin" train --model resnet7 --train-subset 64
check eval-no-weights 2 "--weights FILE is required" "$bin" eval
check eval-missing-file 1 "cannot" "$bin" eval --weights /nonexistent.safetensors
check bad-accum 2 "accum-steps" "$bin" train --accum-steps 0
check huge-threads 2 "threads must be" "$bin" train --threads 100000
check negative-lr 2 "must be finite" "$bin" train --lr -1
check nan-clip 2 "must be finite" "$bin" train --clip nan
check negative-subset 2 "subset" "$bin" train --train-subset -5
check save-to-dir 1 "is a directory" "$bin" train --save /tmp --train-subset 64 --test-subset 64
check save-unwritable 1 "cannot write --save" "$bin" train --save /nonexistent/dir/w.safetensors --train-subset 64 --test-subset 64
check bench-warmup 2 "warmup" "$bin" bench --warmup -1
check memory-huge 2 "out of range" "$bin" memory --batch-size 1000000000 --size 10000000
check bad-conv-algo 2 "choose auto, direct or winograd" "$bin" bench --conv-algo fft
check eval-bad-conv-algo 2 "choose auto, direct or winograd" "$bin" eval --weights x --conv-algo fast

# Weights holding a NaN are refused by eval and check, naming the tensor:
# max-pool and ReLU could otherwise hide it and report a finite loss.
tmp="$(mktemp -d)"
"$bin" train --model resnet20 --epochs 1 --train-subset 64 --test-subset 64 --save "$tmp/w.safetensors" > /dev/null 2>&1
hdr=$(od -An -t u8 -N8 "$tmp/w.safetensors" | tr -d ' ')
printf '\x00\x00\xc0\x7f' | dd of="$tmp/w.safetensors" bs=1 seek=$((8 + hdr)) conv=notrunc status=none
check eval-nan-weights 1 "holds NaN or Inf" "$bin" eval --weights "$tmp/w.safetensors" --test-subset 64
"$bin" train --model revnet_small --epochs 1 --train-subset 64 --test-subset 64 --save "$tmp/r.safetensors" > /dev/null 2>&1
hdr=$(od -An -t u8 -N8 "$tmp/r.safetensors" | tr -d ' ')
printf '\x00\x00\x80\x7f' | dd of="$tmp/r.safetensors" bs=1 seek=$((8 + hdr)) conv=notrunc status=none
check check-inf-weights 1 "holds NaN or Inf" "$bin" check --weights "$tmp/r.safetensors"
rm -rf "$tmp"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
