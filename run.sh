#!/usr/bin/env bash
# The main job: install what is missing, build, and train the default model
# (resnet20) on Fashion-MNIST. Extra arguments go to `revtorch train`.
set -euo pipefail
cd "$(dirname "$0")"
bash scripts/setup.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release > /dev/null
cmake --build build -j"$(nproc)"
./build/revtorch train --save runs/resnet20.safetensors --log runs/resnet20.csv "$@"
