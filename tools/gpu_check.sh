#!/usr/bin/env bash
# The GPU check, for a machine with an NVIDIA GPU (made for the lent H200, sm_90): builds the
# CUDA targets for sm_90, runs the CUDA tests, then the GPU benchmarks (decode attention, end to
# end, every op), and prints their tables.
# Meant to finish in under 5 minutes on an H200. Output is also kept under ${OUT:-build-gpu}/.
#
#   tools/gpu_check.sh            build + tests + benchmarks
#   GPU_CHECK_ARCH=89 tools/gpu_check.sh   another architecture
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="$ROOT/build-gpu"
LOGS="${OUT:-$BUILD}"
ARCH="${GPU_CHECK_ARCH:-90}"
JOBS="$(nproc)"
mkdir -p "$LOGS"
export PATH="$PATH:/usr/local/cuda/bin"

echo "== packages"
"$ROOT/tools/setup.sh" --deps-only >/dev/null
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true

echo "== build (sm_$ARCH, Release, -Werror)"
t0=$SECONDS
cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DKVINFER_CUDA=ON -DKVINFER_WERROR=ON \
  -DCMAKE_CUDA_ARCHITECTURES="$ARCH" -DKVINFER_TESTS=ON -DKVINFER_BENCH=ON >"$LOGS/configure.log"
cmake --build "$BUILD" -j "$JOBS" >"$LOGS/build.log" 2>&1 || { tail -50 "$LOGS/build.log"; exit 1; }
echo "built in $((SECONDS - t0)) s"

echo "== CUDA tests"
set +e
ctest --test-dir "$BUILD" -R 'Cuda|cuda' --output-on-failure -j 4 >"$LOGS/cuda_tests.log" 2>&1
tests_rc=$?
set -e
grep -E "tests passed|tests failed|Failed|\*\*\*" "$LOGS/cuda_tests.log" | tail -20

echo "== CPU tests (the reference backend, for completeness)"
ctest --test-dir "$BUILD" -E 'Cuda|cuda' -j "$JOBS" >"$LOGS/cpu_tests.log" 2>&1 && grep "tests passed" "$LOGS/cpu_tests.log" ||
  { grep -E "Failed|failed" "$LOGS/cpu_tests.log" | tail; tests_rc=1; }

echo "== decode attention vs copy bandwidth"
if [[ -x "$BUILD/bench/kvinfer-bench-cuda-attention" ]]; then
  "$BUILD/bench/kvinfer-bench-cuda-attention" | tee "$LOGS/bench_attention.md"
else
  echo "(kvinfer-bench-cuda-attention not built)"
fi

echo "== end to end: TinyLlama-1.1B shape, bf16"
"$BUILD/bench/kvinfer-bench-cuda-decode" | tee "$LOGS/bench_decode.md"

echo "== every CUDA op of the forward pass (Google Benchmark, ~1B-model shapes)"
set +e
"$BUILD/bench/kvinfer-bench-cuda-ops" --benchmark_min_time=0.05 --benchmark_out="$LOGS/bench_cuda_ops.json" \
  --benchmark_out_format=json | tee "$LOGS/bench_cuda_ops.txt"
ops_rc=$?
set -e

echo "== total $((SECONDS)) s; CUDA tests exit code $tests_rc; op benchmarks exit code $ops_rc"
[[ $ops_rc -eq 0 ]] || exit "$ops_rc"
exit "$tests_rc"
