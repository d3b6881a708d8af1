#!/usr/bin/env bash
# Weights written by `revtorch train --save` load into a torchvision-structured
# PyTorch model (load_state_dict strict=True) and give the same test accuracy
# (within 0.05 percentage points) and loss (within 1e-3 relative) as
# `revtorch eval`: one CIFAR-style model (BasicBlock, 3 stages) and one
# ImageNet-style model (Bottleneck, 7×7 stem + max pool, 4 stages).
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
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
