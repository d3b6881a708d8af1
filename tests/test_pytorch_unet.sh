#!/usr/bin/env bash
# PyTorch parity of the U-Nets: `test_unet --export DIR` writes, per
# configuration (standard with batch norm and transposed convs on a
# 10×12×9 input that needs padding, standard with instance norm and
# trilinear upsampling, partially reversible with group and with batch norm,
# the zoo's unet3d and prunet3d), the weights with their PyTorch names, an
# input and revtorch's training-mode output; tools/pytorch_unet.py loads
# each into its PyTorch 1.13 definition (load_state_dict strict=True) and
# compares the outputs (max |diff| <= 1e-4 × max |y|).
# Usage: tests/test_pytorch_unet.sh PATH/TO/test_unet
# Exits 77 (skip) when Debian's /usr/bin/python3 has no torch.
set -euo pipefail
bin="$1"
here="$(cd "$(dirname "$0")/.." && pwd)"
py=/usr/bin/python3
if ! "$py" -c 'import torch' 2> /dev/null; then
    echo "SKIPPED: $py cannot import torch"
    exit 77
fi
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
"$bin" --export "$dir"
"$py" "$here/tools/pytorch_unet.py" check "$dir"/*.safetensors
