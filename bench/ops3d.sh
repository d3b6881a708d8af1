#!/usr/bin/env bash
# revtorch vs PyTorch 1.13 on the 3-D operators: Conv3d (forward and both
# backward passes), ConvTranspose3d, and the conv–InstanceNorm/GroupNorm–
# LeakyReLU block, on 1×16×64³ and 2×32×64³, alternating the two sides.
#
#   bench/ops3d.sh [--repeats R] [--threads T] [--steps N --warmup W]
#                  [--config CASE:N:C:SIZE]... [--blocked] [--json FILE]
#
# Builds bench_ops3d (Release) in build-bench/ (or $REVTORCH_BUILD_DIR) and
# runs bench/ops3d_compare.py (see its header for what is timed).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD_DIR=${REVTORCH_BUILD_DIR:-$ROOT/build-bench}
PY=/usr/bin/python3 # Debian's python, the one with torch
if [[ "${1:-}" == -h || "${1:-}" == --help ]]; then
    sed -n '2,10p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
    exit 0
fi
if ! "$PY" -c 'import torch' 2>/dev/null; then
    echo "bench/ops3d.sh: $PY cannot import torch (install Debian's python3-torch)" >&2
    exit 1
fi
echo "building bench_ops3d (Release) in $BUILD_DIR ..." >&2
cmake -S "$ROOT" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD_DIR" -j"$(nproc)" --target bench_ops3d >"$BUILD_DIR/bench-ops3d-build.log" 2>&1 ||
    { tail -n 30 "$BUILD_DIR/bench-ops3d-build.log" >&2; exit 1; }
exec "$PY" "$ROOT/bench/ops3d_compare.py" --bench "$BUILD_DIR/bench_ops3d" "$@"
