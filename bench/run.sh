#!/usr/bin/env bash
# revtorch vs PyTorch: training-step time and peak memory, one command.
#
#   bench/run.sh [--quick] [--repeats R] [--threads T] [--steps N --warmup W]
#                [--config MODEL:SIZE:CHANNELS:BATCH[:STEPS:WARMUP]]... [--sgemm N]
#                [--json FILE] [--no-direct] [--build-dir DIR | --revtorch PATH]
#
# Builds revtorch (Release, target `revtorch` only) in DIR (default
# build-bench/ in the project root, or $REVTORCH_BUILD_DIR) unless --revtorch
# names a binary, then runs bench/compare.py, which alternates `revtorch bench`
# and bench/pytorch_bench.py in separate processes and prints a markdown table.
# See bench/README.md.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD_DIR=${REVTORCH_BUILD_DIR:-$ROOT/build-bench}
REVTORCH=${REVTORCH:-}
PY=/usr/bin/python3 # Debian's python, the one with torch
pass=()

while [[ $# -gt 0 ]]; do
    case "$1" in
    -h | --help)
        sed -n '2,11p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
        echo
        "$PY" "$ROOT/bench/compare.py" --help | sed -n '/^options:/,$p'
        exit 0
        ;;
    --build-dir)
        BUILD_DIR=${2:?--build-dir needs a value}
        shift 2
        ;;
    --revtorch)
        REVTORCH=${2:?--revtorch needs a value}
        shift 2
        ;;
    *)
        pass+=("$1")
        shift
        ;;
    esac
done

if ! "$PY" -c 'import torch' 2>/dev/null; then
    echo "bench/run.sh: $PY cannot import torch (install Debian's python3-torch)" >&2
    exit 1
fi

if [[ -z "$REVTORCH" ]]; then
    REVTORCH=$BUILD_DIR/revtorch
    echo "building revtorch (Release) in $BUILD_DIR ..." >&2
    if ! { cmake -S "$ROOT" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release >/dev/null &&
        cmake --build "$BUILD_DIR" -j"$(nproc)" --target revtorch >"$BUILD_DIR/bench-build.log" 2>&1; }; then
        if [[ -x "$REVTORCH" ]]; then
            echo "bench/run.sh: build failed (see $BUILD_DIR/bench-build.log); using the existing $REVTORCH" >&2
        else
            echo "bench/run.sh: build failed:" >&2
            tail -n 30 "$BUILD_DIR/bench-build.log" >&2 || true
            exit 1
        fi
    fi
    if ! grep -q '^CMAKE_BUILD_TYPE:STRING=Release$' "$BUILD_DIR/CMakeCache.txt"; then
        echo "bench/run.sh: warning: $BUILD_DIR is not a Release build" >&2
    fi
fi
if [[ ! -x "$REVTORCH" ]]; then
    echo "bench/run.sh: no revtorch binary at $REVTORCH" >&2
    exit 1
fi

exec "$PY" "$ROOT/bench/compare.py" --revtorch "$REVTORCH" "${pass[@]+"${pass[@]}"}"
