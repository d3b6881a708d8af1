#!/usr/bin/env bash
# The checkpointing options of revtorch train, memory and bench: usage errors
# (exit 2, before anything runs), an impossible budget refused before
# training (exit 1) with the smallest feasible budget, which is accepted,
# and memory's strategy rows. Train cases need Fashion-MNIST (skipped
# without it; the memory cases always run).
set -uo pipefail
bin="$1"
pass=0; fail=0
. "$(dirname "$0")/cli_lib.sh"
check_shows=(head -5) # the start of a failing command's output
check bad_mode 2 "conservative, balanced or aggressive" "$bin" train --memory-mode fast
check bad_size 2 "1.5GiB" "$bin" train --memory-budget 12parsecs
# a bare number is refused (it would be bytes), and the message lists the units
check bare_number 2 "units: B, KiB/K, MiB/M" "$bin" train --memory-budget 30
check bare_number_memory 2 "units: B" "$bin" memory --model resnet20 --batch-size 8 --size 8 --channels 3 --memory-budget 30
check negative 2 "positive size" "$bin" train --memory-budget -1GiB
check hex_size 2 "units: B" "$bin" train --memory-budget 0x10MiB
check short_unit 0 "budget 600M" "$bin" memory --model resnet20 --batch-size 8 --size 8 --channels 3 --memory-budget 600M
check two_strategies 2 "give one of" "$bin" train --memory-mode balanced --checkpoint-segments 4
check bad_recompute 2 "selective" "$bin" memory --recompute everything --model resnet20 --batch-size 8 --size 8 --channels 3
check help 0 "memory-budget" "$bin" train --help
# more segments than stages would run fewer than asked under the asked label: refused (PyTorch fails too)
check too_many_segments 2 "resnet20 splits into 15 parts that segments are cut between.*give 1 to 15" "$bin" memory --model resnet20 \
    --batch-size 8 --size 8 --channels 3 --checkpoint-segments 16
check one_segment 0 "^\*1 segment " "$bin" memory --model resnet20 --batch-size 8 --size 8 --channels 3 \
    --checkpoint-segments 1
# a mode or budget already lets the planner pick selective stages: --recompute beside it would change nothing
check mode_recompute 2 "already in the planner's choice under --memory-mode" "$bin" memory --model resnet20 \
    --batch-size 8 --size 8 --channels 3 --memory-mode balanced --recompute selective
check budget_recompute 2 "drop --recompute" "$bin" train --memory-budget 600MiB --recompute selective
check train_too_many_segments 2 "give 1 to 15" "$bin" train --model resnet20 --checkpoint-segments 99 --epochs 1 \
    --train-subset 32 --test-subset 32
out="$("$bin" memory --model resnet20 --batch-size 16 --size 16 --channels 3 --memory-budget 4MiB 2>&1)"
if [ $? -eq 1 ] && grep -q "smallest feasible budget is" <<< "$out"; then pass=$((pass+1)); else fail=$((fail+1)); echo "FAIL memory impossible budget: $out" | head -5; fi
least="$(sed -n 's/.*smallest feasible budget is [0-9.]* MiB (\([0-9]*\) bytes.*/\1/p' <<< "$out")"
check memory_rows 0 "4 segments" "$bin" memory --model resnet20 --batch-size 16 --size 16 --channels 3 \
    --memory-budget "${least}B"
# the MiB figure of the message is rounded up, so pasting it back is accepted too
least_mib="$(sed -n 's/.*smallest feasible budget is \([0-9.]*\) MiB.*/\1/p' <<< "$out")"
check memory_least_mib 0 "budget ${least_mib}MiB" "$bin" memory --model resnet20 --batch-size 16 --size 16 \
    --channels 3 --memory-budget "${least_mib}MiB"
# memory's row options are refused where there are no rows, not ignored (exit 0 with no plan
# made read as if the plan had been made), and nothing is written
t="$(mktemp -d)"
trap 'rm -rf "$t"' EXIT
check by_module_budget 2 "--by-module is the plain per-module table of one step.*--memory-budget and --memory-timeline apply to those rows only: drop them" \
    "$bin" memory --model resnet20 --size 32 --channels 3 --batch-size 8 --by-module --memory-budget 1MiB \
    --memory-timeline "$t/bm.csv"
if [ -z "$(ls -A "$t")" ]; then pass=$((pass+1)); else fail=$((fail+1)); echo "FAIL by_module_budget wrote: $(ls "$t")"; fi
check by_module_measure 2 "--measure applies to those rows only: drop it, or drop --by-module" "$bin" memory \
    --model resnet20 --size 8 --by-module --measure
check by_module_mode 2 "--memory-mode applies to those rows only" "$bin" memory --model resnet20 --size 8 --by-module \
    --memory-mode balanced
check by_module_plain 0 "step peak per category" "$bin" memory --model resnet20 --size 8 --by-module
# a mode whose saving is out of reach says so, with what the least-memory plan saves (36.6% natively,
# 35.8% with oneDNN capped at AVX2, whose workspaces differ)
check mode_short_note 0 "^note: conservative saves 40% of the activations where it can; here the least-memory plan saves 3[0-9]\.[0-9]%" \
    "$bin" memory --model resnet50 --batch-size 2 --size 64 --channels 3
# non-square inputs are planned as bench and train plan them (they once printed no rows)
check nonsquare_plan 0 "^\*balanced .* 1\.000 " "$bin" memory --model resnet20 --size 16,24 --batch-size 4 \
    --memory-mode balanced --measure-rounds 1
# bench times a planned step: its measured peak is the plan's prediction, below plain's
check bench_bad_mode 2 "conservative, balanced or aggressive" "$bin" bench --memory-mode fast
check bench_memory_and_plan 2 "planner decides per stage" "$bin" bench --model revnet_small --memory standard \
    --memory-mode balanced
check train_memory_and_plan 2 "planner decides per stage" "$bin" train --memory reversible --recompute selective
# K beyond the stages is refused in bench too (resnet20: 15 stages); K = 15 runs and is named
check bench_segments_refused 2 "give 1 to 15" "$bin" bench --model resnet20 --batch-size 4 --size 8 \
    --channels 3 --steps 1 --warmup 1 --threads 1 --checkpoint-segments 1000
check bench_segments_all 0 "plan=segments-15 " "$bin" bench --model resnet20 --batch-size 4 --size 8 \
    --channels 3 --steps 1 --warmup 1 --threads 1 --checkpoint-segments 15
check bench_refused 1 "smallest feasible budget" "$bin" bench --model resnet20 --batch-size 16 --size 16 \
    --channels 3 --memory-budget 4MiB
# benchmarks print the CPU and its ISA flags beside their numbers, from one helper
cpu_line="^cpu: .*; avx2 \(yes\|no\), fma \(yes\|no\), f16c \(yes\|no\), avx512f \(yes\|no\), avx512_bf16 \(yes\|no\), amx \(yes\|no\); oneDNN isa [a-z0-9_]*; 1 thread$"
check bench_cpu_line 0 "$cpu_line" "$bin" bench --model resnet20 --batch-size 2 --size 8 --steps 1 --warmup 0 --threads 1
check memory_measure_cpu_line 0 "$cpu_line" "$bin" memory --model resnet20 --batch-size 2 --size 8 --measure-rounds 1 \
    --threads 1
bench=(--model resnet20 --batch-size 16 --size 16 --channels 3 --steps 2 --warmup 1 --threads 1)
plain_line="$("$bin" bench "${bench[@]}" 2>&1)"
plan_line="$("$bin" bench "${bench[@]}" --memory-mode aggressive 2>&1)"
field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<< "$2"; }
if [ "$(field plan "$plan_line")" = aggressive ] &&
   [ -n "$(field peak_tracked_mib "$plan_line")" ] &&
   [ "$(field peak_tracked_mib "$plan_line")" = "$(field predicted_peak_mib "$plan_line")" ] &&
   awk -v a="$(field peak_tracked_mib "$plan_line")" -v b="$(field peak_tracked_mib "$plain_line")" \
       'BEGIN { exit !(a < b) }'; then pass=$((pass+1))
else fail=$((fail+1)); echo "FAIL bench plan: plain '$plain_line', aggressive '$plan_line'"; fi
data="${RT_FASHION_MNIST_DIR:-/usr/share/datasets/fashion-mnist}"
if [ -e "$data/train-images-idx3-ubyte.gz" ] || [ -e "$data/train-images-idx3-ubyte" ]; then
    small=(--model resnet20 --train-subset 256 --test-subset 64 --epochs 1 --batch-size 64 --warmup-steps 0 --threads 1)
    check train_refused 1 "smallest feasible budget" "$bin" train "${small[@]}" --memory-budget 1MiB
    check train_selective 0 "memory plan: step peak" "$bin" train "${small[@]}" --recompute selective
    # memory shows the plan train makes from the same options (same stage counts);
    # the same thread count too: oneDNN's scratchpads, and so the stage peaks, depend on it
    tplan="$("$bin" train "${small[@]}" --memory-mode aggressive 2>&1 | sed -n 's/^memory plan (aggressive): \([^;]*\);.*/\1/p')"
    mplan="$("$bin" memory --model resnet20 --batch-size 64 --size 28 --channels 1 --memory-mode aggressive --threads 1 2>&1 |
             sed -n 's/^  \*aggressive *//p')"
    if [ -n "$tplan" ] && [ "$tplan" = "$mplan" ]; then pass=$((pass+1));
    else fail=$((fail+1)); echo "FAIL train/memory plans differ: train '$tplan', memory '$mplan'"; fi
    # a budget sized for a small training batch also holds the evaluation after each epoch (it runs in batches
    # no larger than the training batch, not 256): both epochs finish, each step peak at most the budget
    out="$("$bin" train --model resnet20 --epochs 2 --batch-size 16 --train-subset 64 --test-subset 64 \
           --warmup-steps 0 --threads 2 --memory-budget 16MiB 2>&1)"; rc=$?
    peaks="$(sed -n 's/^  memory plan: step peak \([0-9.]*\) MiB measured.*/\1/p' <<< "$out")"
    if [ "$rc" -eq 0 ] && grep -q "^epoch 2: train loss .* test loss" <<< "$out" && [ "$(grep -c . <<< "$peaks")" -eq 2 ] &&
       awk '$1 > 16 {over = 1} END {exit over}' <<< "$peaks"; then pass=$((pass+1))
    else fail=$((fail+1)); echo "FAIL train under a budget, evaluation included: exit $rc, peaks '$peaks': $out" | tail -5; fi
    # the smallest feasible budget memory names is met by train: the loader's shuffled order (8 bytes an
    # image, here 16 KiB) lies outside the step, as the data sets do (it made the first step fail by those bytes)
    out="$("$bin" memory --model resnet20 --batch-size 64 --size 28 --channels 1 --threads 1 --memory-budget 1MiB 2>&1)"
    least="$(sed -n 's/.*smallest feasible budget is [0-9.]* MiB (\([0-9]*\) bytes.*/\1/p' <<< "$out")"
    check train_least_budget 0 "^epoch 1: train loss" "$bin" train --model resnet20 --batch-size 64 --threads 1 \
        --train-subset 2048 --test-subset 64 --epochs 1 --warmup-steps 0 --memory-budget "${least}B"
    # with --accum-steps the plan holds one micro-batch's activations, so evaluation runs in micro-batches
    # (batches of the whole training batch, 16, went over this 5.2 MiB budget's limit in bn1)
    check train_budget_accum_eval 0 "^epoch 1: train loss .* test loss" "$bin" train --model resnet20 --epochs 1 \
        --batch-size 16 --accum-steps 4 --train-subset 64 --test-subset 64 --warmup-steps 0 --threads 2 \
        --memory-budget 5.2MiB
    # under a plan the reversible model's activation lines name the plan, not --memory reversible (the planner
    # decides per stage whether a reversible stage rebuilds)
    out="$("$bin" train --model revnet_small --train-subset 64 --test-subset 64 --epochs 1 --batch-size 16 \
           --warmup-steps 0 --threads 2 --checkpoint-segments 2 2>&1)"; rc=$?
    if [ "$rc" -eq 0 ] && ! grep -q -- "--memory reversible" <<< "$out" &&
       grep -q "activations kept for backward [0-9.]* MiB with the memory plan of --checkpoint-segments 2, [0-9.]* MiB with plain" <<< "$out" &&
       grep -q "SAVED peak): [0-9.]* MiB measured with the memory plan of --checkpoint-segments 2; plain" <<< "$out"
    then pass=$((pass+1)); else fail=$((fail+1)); echo "FAIL plan labelled: exit $rc: $out" | head -8; fi
    check train_no_plan_label 0 "SAVED peak): [0-9.]* MiB measured with --memory reversible; plain" "$bin" train \
        --model revnet_small --train-subset 64 --test-subset 64 --epochs 1 --batch-size 16 --warmup-steps 0 --threads 2
fi
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
