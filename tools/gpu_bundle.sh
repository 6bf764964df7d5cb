#!/usr/bin/env bash
# Builds here, with nvcc, everything a GPU run needs into one folder that runs on a GPU machine as
# it is (the lent machine's image has the driver, the CUDA toolkit and PyTorch, and none of the
# Debian -dev packages): the CUDA test executables, test_device, the GPU benchmarks
# (kvinfer-bench-cuda-attention, kvinfer-bench-cuda-decode, and kvinfer-bench for the decode
# floor) and kvinfer-generate, for one architecture (default sm_90). Every library beyond the
# C/C++ runtime is linked in (-DKVINFER_BUNDLE=ON: fmt header-only, PCRE2, utf8proc and OpenMP
# static); cuBLAS is dlopened at run time from the machine's toolkit or PyTorch's nvidia-cublas
# wheel, and cudart_static loads the driver. kvinfer-bench-cuda-ops is left out: Debian's Google
# Benchmark is a shared library only.
#
# The folder holds run.sh (tools/gpu_bundle_run.sh: the GPU run, docs/cuda.md), MANIFEST.txt and
# payload.tar.xz (the stripped executables; one xz stream, so that the code they share is stored
# once). tools/gpu_bundle_check.sh checks it: under 60 MiB, and no executable needs a library
# outside the C/C++ runtime and CUDA's. The test data and the default model are not in it: run.sh
# reads them from the checkout it sits in (tests/data, models/), or where $KVINFER_TEST_DATA and
# $KVINFER_MODEL say.
#
#   tools/gpu_bundle.sh               nvcc build in build-bundle/, the bundle in gpu-bundle/
#   tools/gpu_bundle.sh --sim         the same bundle from a CUDA simulation build (build-bundle-sim/,
#                                     gpu-bundle-sim/): run.sh then runs on a simulated device (CI)
#   GPU_BUNDLE_ARCH=89 tools/gpu_bundle.sh   another architecture
#   GPU_BUNDLE_BUILD=DIR ...          build in DIR (CI reuses its simulation build)
#
# Exit status: 0 the bundle is built and checked; 1 the build or the check failed; 2 a wrong
# argument or a missing tool (named).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ARCH="${GPU_BUNDLE_ARCH:-90}"
JOBS="$(nproc 2>/dev/null || echo 2)"
export PATH="$PATH:/usr/local/cuda/bin"

sim=0
case "${1:-}" in
  "") ;;
  --sim) sim=1 ;;
  -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
  *) echo "gpu_bundle: unknown argument '$1' (--sim or nothing)" >&2; exit 2 ;;
esac
[[ "$ARCH" =~ ^[0-9]+[a-z]?$ ]] || { echo "gpu_bundle: GPU_BUNDLE_ARCH=$ARCH is not an architecture like 90" >&2; exit 2; }
for tool in cmake c++ xz tar strip readelf; do
  command -v "$tool" >/dev/null || { echo "gpu_bundle: missing the tool '$tool'" >&2; exit 2; }
done
if [[ $sim -eq 0 ]] && ! command -v nvcc >/dev/null; then
  echo "gpu_bundle: nvcc is not on PATH nor in /usr/local/cuda/bin (--sim builds without it)" >&2
  exit 2
fi

if [[ $sim -eq 1 ]]; then
  BUILD="${GPU_BUNDLE_BUILD:-$ROOT/build-bundle-sim}" DEST="$ROOT/gpu-bundle-sim" kind="sim"
  cuda_flags=(-DKVINFER_CUDA_SIM=ON)
else
  BUILD="${GPU_BUNDLE_BUILD:-$ROOT/build-bundle}" DEST="$ROOT/gpu-bundle" kind="sm_$ARCH"
  cuda_flags=(-DKVINFER_CUDA=ON "-DCMAKE_CUDA_ARCHITECTURES=$ARCH")
fi
TESTS=(test_cuda_attention test_cuda_batch test_cuda_decoding test_cuda_devices test_cuda_e2e test_cuda_gemv
       test_cuda_graphs test_cuda_kv_state test_cuda_ops test_cuda_ring test_cuda_sample test_device)
[[ $sim -eq 1 ]] && TESTS+=(test_cuda_sim)
TOOLS=(kvinfer-generate kvinfer-bench kvinfer-bench-cuda-attention kvinfer-bench-cuda-decode)

generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
[[ -f "$BUILD/CMakeCache.txt" ]] && generator=()  # keep the generator it was made with
cmake -S "$ROOT" -B "$BUILD" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release "${cuda_flags[@]}" -DBUILD_SHARED_LIBS=OFF \
  -DKVINFER_BUNDLE=ON -DKVINFER_TESTS=ON -DKVINFER_BENCH=ON -DKVINFER_EXAMPLES=ON -DKVINFER_WERROR=ON >/dev/null
cmake --build "$BUILD" -j "$JOBS" --target "${TESTS[@]}" "${TOOLS[@]}"

rm -rf "$DEST"
mkdir -p "$DEST"
stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin"
for t in "${TESTS[@]}" "${TOOLS[@]}"; do
  bin="$(find "$BUILD" -type f -name "$t" -perm -u+x | head -1)"
  [[ -n "$bin" ]] || { echo "gpu_bundle: $t was not built in $BUILD" >&2; exit 1; }
  strip --strip-unneeded -o "$stage/bin/$t" "$bin"
done
# One xz stream over the executables, its dictionary (64 MiB) wide enough that the library and
# kernels each holds are stored once (206 MiB to 6.6). The simulation's bundle (CI) only has to
# stay under the limit: the fastest preset (74 MiB to 22, 8 s instead of 77).
preset=(-9e -T1)
[[ $sim -eq 1 ]] && preset=(-0 -T2)
tar -C "$stage" -cf - bin | xz "${preset[@]}" >"$DEST/payload.tar.xz"
cp "$ROOT/tools/gpu_bundle_run.sh" "$DEST/run.sh"
chmod +x "$DEST/run.sh"
{
  echo "kind=$kind"
  echo "commit=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$ROOT" diff --quiet HEAD 2>/dev/null || echo '+changes')"
  echo "built=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  [[ $sim -eq 0 ]] && echo "nvcc=$(nvcc --version | sed -n 's/.*release \([0-9.]*\).*/\1/p')"
  [[ $sim -eq 0 ]] && echo "cublas=libcublas.so.$(nvcc --version | sed -n 's/.*release \([0-9]*\).*/\1/p')"
  echo "tests=${TESTS[*]}"
  echo "tools=${TOOLS[*]}"
} >"$DEST/MANIFEST.txt"
"$ROOT/tools/gpu_bundle_check.sh" "$DEST" "$stage/bin"
echo "gpu_bundle: $DEST ($(du -sh "$DEST" | cut -f1), $kind): run it with $DEST/run.sh (docs/cuda.md)"
