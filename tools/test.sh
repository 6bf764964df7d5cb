#!/usr/bin/env bash
# kvinfer quick start, step 2: build what is missing (tests included) and run every test.
#
#   tools/test.sh                  all tests, 2 at a time
#   tools/test.sh -R HfParity      extra arguments go to ctest
#
# KVINFER_BUILD_DIR chooses the build directory (default: <repo>/build), as for tools/setup.sh.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${KVINFER_BUILD_DIR:-$ROOT/build}"
export KVINFER_BUILD_DIR="$BUILD_DIR"

# Checks the packages, (re)configures with the tests on and builds incrementally; keeps every
# other setting of an existing build directory (e.g. KVINFER_WERROR from CI, KVINFER_CUDA=OFF).
echo "[test] building $BUILD_DIR (tests on)"
"$ROOT/tools/setup.sh" --no-run -- -DKVINFER_TESTS=ON

# ctest runs 2 test processes at once; give each half the cores. Oversubscribed OpenMP threads
# spin at every parallel region's barrier: on 2 cores, 2 tests × 2 threads made the suite ~70× slower.
if [[ -z "${OMP_NUM_THREADS:-}" ]]; then
  cores="$(nproc 2>/dev/null || echo 2)"
  export OMP_NUM_THREADS=$((cores / 2 > 0 ? cores / 2 : 1))
fi
echo "[test] ctest --test-dir $BUILD_DIR --output-on-failure -j2 $* (OMP_NUM_THREADS=$OMP_NUM_THREADS)"
ctest --test-dir "$BUILD_DIR" --output-on-failure -j2 "$@"
echo "[test] all tests passed"
