#!/usr/bin/env bash
# Weights written by `revtorch train --save` load into a torchvision-structured
# PyTorch model (load_state_dict strict=True) and give the same test accuracy
# (within 0.05 percentage points) and loss (within 1e-3 relative) as
# `revtorch eval`: one CIFAR-style model (BasicBlock, 3 stages) and one
# ImageNet-style model (Bottleneck, 7×7 stem + max pool, 4 stages). Then the
# script's handling of other files: no model metadata (needs --model), NaN
# weights, truncated or garbage files (one line, exit 1), and PyTorch-style
# state dicts without num_batches_tracked or with F64/F16 tensors (accepted).
# Usage: tests/test_pytorch_interop.sh PATH/TO/revtorch
# Exits 77 (skip) when Debian's /usr/bin/python3 has no torch or the dataset is missing.
set -euo pipefail
bin="$1"
here="$(cd "$(dirname "$0")/.." && pwd)"
data=/usr/share/datasets/fashion-mnist
py=/usr/bin/python3
if ! "$py" -c 'import torch' 2> /dev/null; then
    echo "SKIPPED: $py cannot import torch"
    exit 77
fi
if [ ! -e "$data/t10k-images-idx3-ubyte.gz" ] && [ ! -e "$data/t10k-images-idx3-ubyte" ]; then
    echo "SKIPPED: no Fashion-MNIST in $data"
    exit 77
fi
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT

passed=0
failed=0
check() { # model train-images test-images extra-train-options...
    local model="$1" ntrain="$2" ntest="$3"
    shift 3
    "$bin" train --model "$model" --epochs 1 --train-subset "$ntrain" --test-subset 256 --batch-size 64 \
        --threads 2 --seed 3 --save "$dir/$model.safetensors" "$@" > "$dir/$model.train.out"
    if "$py" "$here/tools/pytorch_eval.py" "$dir/$model.safetensors" --data "$data" --threads 2 \
        --test-subset "$ntest" --revtorch "$bin" > "$dir/$model.eval.out" 2>&1; then
        passed=$((passed + 1))
        echo "ok: $model: $(grep '^pytorch accuracy' "$dir/$model.eval.out")"
    else
        failed=$((failed + 1))
        echo "FAIL: $model"
        cat "$dir/$model.eval.out"
    fi
}
check resnet20 1024 2000
check resnet50 256 500 --lr 0.01

# Files that tools/pytorch_eval.py must refuse with one line and a non-zero
# exit, or accept as PyTorch's load_state_dict does, made from resnet20's.
base="$dir/resnet20.safetensors"
variant() { # name python-statements (on `t`, the tensors, and `m`, the metadata)
    "$py" - "$here/tools" "$base" "$dir/$1.safetensors" << PYEOF
import sys
import numpy as np
sys.path.insert(0, sys.argv[1])
import safetensors_io
t, m = safetensors_io.load(sys.argv[2])
$2
safetensors_io.save(sys.argv[3], t, m)
PYEOF
}
expect() { # name exit-code stderr-pattern [extra options...]
    local name="$1" code="$2" pattern="$3" rc=0
    shift 3
    "$py" "$here/tools/pytorch_eval.py" "$dir/$name.safetensors" --data "$data" --threads 2 --test-subset 500 "$@" \
        > "$dir/$name.out" 2> "$dir/$name.err" || rc=$?
    local said=no # stderr: empty when no pattern is given, else one line that matches it
    if [ -z "$pattern" ]; then [ -s "$dir/$name.err" ] || said=yes
    elif [ "$(wc -l < "$dir/$name.err")" -eq 1 ] && grep -q -- "$pattern" "$dir/$name.err"; then said=yes; fi
    if [ "$rc" -eq "$code" ] && [ "$said" = yes ]; then
        passed=$((passed + 1))
        echo "ok: $name${*:+ $*}: exit $rc${pattern:+: $(cat "$dir/$name.err")}"
    else
        failed=$((failed + 1))
        echo "FAIL: $name${*:+ $*}: exit $rc (want $code and ${pattern:+one line on stderr matching '$pattern'}${pattern:-nothing on stderr})"
        cat "$dir/$name.out" "$dir/$name.err"
    fi
}
same_accuracy() { # name: the same numbers as the unchanged file
    local want got
    want="$(grep '^pytorch accuracy' "$dir/ref.out")" got="$(grep '^pytorch accuracy' "$dir/$1.out" || true)"
    if [ -n "$want" ] && [ "$got" = "$want" ]; then
        passed=$((passed + 1))
        echo "ok: $1 gives the unchanged file's $got"
    else
        failed=$((failed + 1))
        echo "FAIL: $1: '$got' differs from the unchanged file's '$want'"
    fi
}
cp "$base" "$dir/ref.safetensors"
expect ref 0 ""
variant nometa 'm = {}'
expect nometa 2 "pass --model NAME"
expect nometa 0 "" --model resnet20
variant nan 't["layer2.0.conv1.weight"][0, 0, 0, 0] = np.nan; t["fc.bias"][3] = np.inf'
expect nan 1 "2 of .* tensors hold NaN or Inf"
head -c "$(($(wc -c < "$base") - 100))" "$base" > "$dir/truncated.safetensors"
expect truncated 1 "^pytorch_eval: not a usable safetensors file: .*truncated.safetensors"
printf 'not a safetensors file' > "$dir/garbage.safetensors"
expect garbage 1 "^pytorch_eval: not a usable safetensors file"
expect missing 1 "^pytorch_eval: .*missing.safetensors"
variant nocounter 't = {k: v for k, v in t.items() if not k.endswith("num_batches_tracked")}'
expect nocounter 0 ""
same_accuracy nocounter
variant f64 't = {k: v.astype(np.float64) if v.dtype == np.float32 else v for k, v in t.items()}'
expect f64 0 ""
same_accuracy f64
variant f16 't = {k: v.astype(np.float16) if v.dtype == np.float32 else v for k, v in t.items()}'
expect f16 0 ""
variant wrongmodel 'm["model"] = "resnet32"'
expect wrongmodel 1 "does not fit resnet32: .* tensors missing"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
