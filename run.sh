#!/usr/bin/env bash
# The main job: install what is missing, build, and train the default model
# (revnet_small, a reversible network) on Fashion-MNIST. Extra arguments go to `revtorch train`.
set -euo pipefail
cd "$(dirname "$0")"
bash scripts/setup.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release > /dev/null
cmake --build build -j"$(nproc)"
mkdir -p runs
./build/revtorch train --save runs/revtorch.safetensors --log runs/revtorch.csv --memory-trace runs/memory.csv "$@"
