#!/usr/bin/env bash
# Weight files saved by release 0.1 (before models became module trees) load
# into today's models and evaluate exactly as 0.1 evaluated them
# (tests/fixtures/release-0.1/README.md). Needs Fashion-MNIST: skipped (77)
# when Debian's dataset-fashion-mnist is not installed.
set -euo pipefail
bin="$1"
dir="$(dirname "$0")/fixtures/release-0.1"
[ -f /usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz ] || { echo "Fashion-MNIST missing: skipped"; exit 77; }
fail=0
check() {
    local model="$1" want="$2" got
    got=$("$bin" eval --weights "$dir/$model.safetensors" --test-subset 1000 --threads 2 | tail -1)
    if [ "$got" = "$want" ]; then
        echo "ok   $got"
    else
        echo "FAIL $model: expected '$want', got '$got'"
        fail=1
    fi
}
check revnet_small "revnet_small on 1000 test images: loss 0.6578 accuracy 75.00%"
check resnet20 "resnet20 on 1000 test images: loss 0.5840 accuracy 76.60%"
exit $fail
