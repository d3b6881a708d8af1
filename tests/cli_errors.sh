#!/usr/bin/env bash
# The CLI's help and its messages for user mistakes.
set -uo pipefail
bin="$1"
pass=0; fail=0
. "$(dirname "$0")/cli_lib.sh"
check_shows=(head -5) # the start of a failing command's output
lacks() { # name, grep pattern that must not appear, command...
    local name="$1" pat="$2"; shift 2
    local out
    out="$("$@" 2>&1)"
    if grep -q -- "$pat" <<< "$out"; then fail=$((fail+1)); echo "FAIL $name: printed '$pat': $out" | head -5;
    else pass=$((pass+1)); fi
}
check help 0 "usage: revtorch" "$bin" --help
check train-help 0 "accum-steps" "$bin" train --help
check eval-help 0 "--weights" "$bin" eval --help
check bench-help 0 "median" "$bin" bench --help
check memory-help 0 "meta tensors" "$bin" memory --help
check check-help 0 "inverse" "$bin" check --help
check check-resnet 2 "resnet20 has no reversible blocks to check; pass one of revnet38" "$bin" check --model resnet20
check check-help-either 0 "(--model NAME | --weights FILE)" "$bin" check --help
# the partially reversible U-Net on random volumes: its blocks invert to float rounding (an error of 1e-5 or more fails)
check check-prunet 0 "on 2 random 32^3 volumes: worst block reconstruction error [0-9.]*e-0[6-9] " "$bin" check --model prunet3d --threads 2
check help-exit-status 0 "2 usage error" "$bin" --help
check bad-memory 2 "standard or reversible" "$bin" train --memory tiny
check bad-grouping 2 "grouping" "$bin" train --grouping zero
check unknown-cmd 2 "unknown command" "$bin" fly
check unknown-opt 2 "unknown option" "$bin" train --fast
check bad-int 2 "expects an integer" "$bin" train --epochs many
check missing-data 1 "--data" "$bin" train --data /nonexistent/dir
check bad-model 2 "--model resnet7 is not a model revtorch knows; choose one of .*resnet20" "$bin" train --model resnet7 --train-subset 64
check eval-bad-model 2 "--model resnet7 is not a model" "$bin" eval --weights /nonexistent.safetensors --model resnet7
check bad-schedule 2 "--schedule must be cosine, step or constant, got 'foo'" "$bin" train --schedule foo --train-subset 64 --test-subset 64 --epochs 1
check eval-no-weights 2 "--weights FILE is required" "$bin" eval
check eval-missing-file 1 "cannot read --weights /nonexistent.safetensors: .*No such file" "$bin" eval --weights /nonexistent.safetensors
lacks eval-missing-file-no-model-hint "pass --model" "$bin" eval --weights /nonexistent.safetensors
check check-missing-file 1 "cannot read --weights /nonexistent.safetensors" "$bin" check --weights /nonexistent.safetensors
check eval-batch-zero 2 "option --batch-size must be an integer >= 1, got 0" "$bin" eval --weights /nonexistent.safetensors --batch-size 0
check check-batch-zero 2 "option --batch-size must be an integer >= 1, got 0" "$bin" check --model revnet_small --batch-size 0
check eval-subset-negative 2 "option --test-subset must be an integer >= 0 (0: all), got -1" "$bin" eval --weights x --test-subset -1
check bad-accum 2 "accum-steps" "$bin" train --accum-steps 0
check accum-over-batch 2 "--accum-steps 200 is more than --batch-size 128 (each micro-batch needs a sample); use 1 to 128" "$bin" train --accum-steps 200
check huge-int 2 "option --epochs must be an integer from 1 to 2147483647, got 99999999999999999999" "$bin" train --epochs 99999999999999999999
check range-names-option 2 "option --label-smoothing must be in \[0, 1\], got 2" "$bin" train --label-smoothing 2
lacks range-names-one-option "--weight-decay" "$bin" train --label-smoothing 2
check accum-micro-batch-of-one 1 "micro-batches of 1: --accum-steps 32 splits each batch of 32; give a smaller --accum-steps" "$bin" train --model resnet50 --batch-size 32 --accum-steps 32 --train-subset 64 --test-subset 64 --epochs 1
check momentum-five 2 "option --momentum must be in \[0, 1) .*got 5" "$bin" train --momentum 5 --model resnet20 --train-subset 64 --test-subset 64 --epochs 1
check memory-momentum-one 2 "option --momentum must be in \[0, 1)" "$bin" memory --momentum 1
check momentum-adamw 2 "--momentum is SGD's; AdamW keeps running averages with betas (0.9, 0.999)" "$bin" train --optimizer adamw --momentum 0.5 --model resnet20 --train-subset 64 --test-subset 64 --epochs 1
check grouping-no-reversible 2 "--grouping applies to reversible blocks, and resnet20 has none; .*revnet38" "$bin" train --model resnet20 --grouping 2 --train-subset 64 --test-subset 64 --epochs 1
check memory-no-reversible 2 "--memory reversible applies to reversible blocks, and resnet20 has none" "$bin" train --model resnet20 --memory reversible --train-subset 64 --test-subset 64 --epochs 1
check memory-cmd-grouping 2 "--grouping applies to reversible blocks, and resnet20 has none" "$bin" memory --model resnet20 --grouping 2
check standard-resnet-ok 0 "resnet20" "$bin" memory --model resnet20 --memory standard
check huge-threads 2 "threads must be" "$bin" train --threads 100000
check negative-lr 2 "must be finite" "$bin" train --lr -1
check nan-clip 2 "must be finite" "$bin" train --clip nan
check negative-subset 2 "option --train-subset must be an integer >= 0 (0: all), got -5" "$bin" train --train-subset -5
check save-to-dir 1 "is a directory" "$bin" train --save /tmp --train-subset 64 --test-subset 64
check save-unwritable 1 "cannot write --save" "$bin" train --save /nonexistent/dir/w.safetensors --train-subset 64 --test-subset 64
# loss scaling is fp16's: its options under bf16 or fp32, or both together, are usage errors, not ignored
check loss-scale-init-bf16 2 "--loss-scale-init 1024 applies to --precision fp16 .*--precision bf16 trains without loss scaling.*Drop --loss-scale-init or use --precision fp16" "$bin" train --precision bf16 --loss-scale-init 1024 --train-subset 64 --test-subset 64 --epochs 1
check no-loss-scale-fp32 2 "--no-loss-scale applies to --precision fp16 .*--precision fp32 trains without loss scaling" "$bin" train --precision fp32 --no-loss-scale --train-subset 64 --test-subset 64 --epochs 1
check no-loss-scale-default 2 "--no-loss-scale applies to --precision fp16" "$bin" train --no-loss-scale
check loss-scale-contradiction 2 "--no-loss-scale turns fp16's loss scaler off, so --loss-scale-init 8 would .*give one of them" "$bin" train --precision fp16 --no-loss-scale --loss-scale-init 8 --train-subset 64 --test-subset 64 --epochs 1
check loss-scale-order 2 "--loss-scale-init 100000 applies to --precision fp16" "$bin" train --loss-scale-init 1e5 --precision bf16
check bench-warmup 2 "warmup" "$bin" bench --warmup -1
check bench-seg-size 2 "D,H,W for a segmentation model" "$bin" bench --model unet3d --size 8,8
check memory-huge 2 "option --batch-size must be an integer from 1 to 1000000, got 1000000000" "$bin" memory --batch-size 1000000000 --size 10000000
# each range message names the one option, its value and its bound
check bench-steps-zero 2 "option --steps must be an integer from 1 to 1000000, got 0" "$bin" bench --steps 0
lacks bench-steps-names-one "--classes" "$bin" bench --steps 0
check bench-channels-zero 2 "option --channels must be an integer from 1 to 100000, got 0" "$bin" bench --channels 0
check memory-accum-over-batch 2 "--accum-steps 32 is more than --batch-size 16 (each micro-batch needs a sample); use 1 to 16" "$bin" memory --accum-steps 32 --batch-size 16
lacks memory-accum-names-one "--classes" "$bin" memory --accum-steps 32 --batch-size 16
check memory-accum-over-default 2 "--accum-steps 4 is more than the default --batch-size 2 of segmentation models .*use 1 to 2 or give a larger --batch-size" "$bin" memory --model unet3d --accum-steps 4
check memory-classes-zero 2 "option --classes must be an integer from 1 to 1000000, got 0" "$bin" memory --classes 0
check memory-channels-huge 2 "option --channels must be an integer from 1 to 100000, got 100001" "$bin" memory --channels 100001
# 0 rounds would measure nothing, yet exit 0: refused like -1 and 17
check memory-measure-rounds-zero 2 "--measure-rounds 0 is out of range; give 1..16" "$bin" memory --measure-rounds 0
check memory-measure-rounds-over 2 "--measure-rounds 17 is out of range; give 1..16" "$bin" memory --measure-rounds 17
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

# An optimizer-state file given as weights is named as such, with the file to pass.
check eval-optim-file 1 "is the optimizer state of a saved run, not weights; pass the weights file $tmp/w.safetensors instead" "$bin" eval --weights "$tmp/w.optim.safetensors" --test-subset 64
# A safetensors file without the "model" metadata: --model is the fix.
printf '\x02\x00\x00\x00\x00\x00\x00\x00{}' > "$tmp/bare.safetensors"
check eval-no-model-metadata 1 "does not record which model it holds.*pass --model NAME" "$bin" eval --weights "$tmp/bare.safetensors"

# A warm-up not shorter than the run is scaled to 10% of it, with a warning;
# a batch larger than the training set is the whole set, and the header says so.
check warmup-scaled 0 "warning: --warmup-steps 100 is not shorter than the run's 10 steps.*warming up over 1 step (10% of the run)" "$bin" train --model resnet20 --epochs 1 --train-subset 100 --test-subset 64 --batch-size 10
check batch-over-set 0 "on 64 Fashion-MNIST images, batch 64 (1 micro-batch: the whole set, --batch-size 128 is more)" "$bin" train --model resnet20 --epochs 1 --train-subset 64 --test-subset 64 --warmup-steps 0
lacks warmup-short-no-warning "warmup-steps" "$bin" train --model resnet20 --epochs 1 --train-subset 64 --test-subset 64 --batch-size 32 --warmup-steps 1

# A resume with another thread count continues, warned that it is not bit-identical.
"$bin" train --model resnet20 --epochs 2 --stop-after-epoch 1 --train-subset 64 --test-subset 64 --warmup-steps 0 --threads 1 --save "$tmp/t.safetensors" > /dev/null 2>&1
check resume-threads 0 "trained with --threads 1 (this run: 2): this run continues it but not bit-identically.*pass --threads 1" "$bin" train --model resnet20 --epochs 2 --train-subset 64 --test-subset 64 --warmup-steps 0 --threads 2 --resume "$tmp/t.safetensors"
rm -rf "$tmp"

# Segmentation models (U-Nets): revtorch memory takes volumes, revtorch train refuses them.
check memory-unet 0 "batch 1×1×16×16×16 (Dice + cross-entropy)" "$bin" memory --model prunet3d --size 16 --batch 1 --channels 1 --classes 2
check memory-unet-dhw 0 "unet3d .*standard" "$bin" memory --model unet3d --size 16,8,12 --batch 1
check memory-unet-2d-size 2 "give S (a cube) or D,H,W" "$bin" memory --model unet3d --size 16,16
check memory-2d-hw 0 "batch 4×1×32×24" "$bin" memory --model resnet20 --size 32,24 --batch 4
# A budget between the least-memory plan (23.3 MiB) and plain (24.6 MiB). With
# blocked weights these are 1.7 MiB above the OIHW ones at this toy size: the
# 2³ bottom level's backward-weights runs oneDNN's gemm kernel, which writes
# OIDHW, so its gradient is reordered into the blocked weight's order.
check memory-unet-plans 0 "^\*budget 24MiB  *[0-9]" "$bin" memory --model unet3d --size 16 --batch 1 --channels 1 --classes 2 --memory-budget 24MiB
check memory-prunet-mode 0 "  \*balanced  *31 stages: .* rebuilt" "$bin" memory --model prunet3d --size 16 --batch 1 --channels 1 --classes 2 --memory-mode balanced
check memory-memory-with-plan 2 "memory: --memory and the checkpointing options both decide" "$bin" memory --model revnet_small --batch-size 64 --memory standard --memory-budget 30MiB
check memory-unet-too-small 2 "single spatial element.* the input is too small for this model (--size 8): give a larger --size" "$bin" memory --model unet3d --size 8 --batch 1
check memory-unet-budget-low 1 "smallest feasible budget is" "$bin" memory --model unet3d --size 16 --batch 1 --channels 1 --classes 2 --memory-budget 2MiB
check train-unet 2 "segmentation model.*revtorch segment train" "$bin" train --model unet3d
# train's help and its unknown-model message list only what train takes, and point to segment train for the rest
check train-help-models 0 "resnet50$" "$bin" train --help
check train-help-segment 0 "the segmentation models train with revtorch segment train" "$bin" train --help
lacks train-help-no-unet "unet3d\|prunet3d\|_brats" "$bin" train --help
check train-bad-model-classifiers 2 "choose one of .*resnet50 (segmentation models: revtorch segment train)" "$bin" train --model resnet7
lacks train-bad-model-no-unet "unet3d" "$bin" train --model resnet7

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
