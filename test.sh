#!/usr/bin/env bash
# The whole test suite: install what is missing, build the Release flavour
# and run every test (natively, then with the CPU ISA capped at AVX2), then
# build with AddressSanitizer + UndefinedBehaviorSanitizer and run every test
# except the long end-to-end training runs.
set -euo pipefail
cd "$(dirname "$0")"
bash scripts/setup.sh
jobs="$(nproc)"

cmake -S . -B build -DCMAKE_BUILD_TYPE=Release > /dev/null
cmake --build build -j"$jobs"
(cd build && ctest --output-on-failure)
# The same binaries again with oneDNN, revtorch's own loops and the blocked
# layout's block forced down to AVX2 (kernels/cpu.h): one binary must give
# the same results on an AVX2-only CPU as on this one.
(cd build && DNNL_MAX_CPU_ISA=AVX2 ctest --output-on-failure)

cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DRT_SANITIZE=ON > /dev/null
cmake --build build-asan -j"$jobs"
# fontconfig (under cairo's text) keeps caches until exit: tests/lsan.supp
# silences leaks inside libfontconfig/libcairo/libpixman only.
(cd build-asan && ASAN_OPTIONS=detect_leaks=1 LSAN_OPTIONS="suppressions=$PWD/../tests/lsan.supp" \
    UBSAN_OPTIONS=print_stacktrace=1 ctest --output-on-failure -LE e2e)
