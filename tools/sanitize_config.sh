# Sourced by tools/sanitize.sh and tools/fuzz.sh: their Debian packages (clang 14 with its
# sanitizer and libFuzzer runtimes, ninja) and the one ASan + UBSan + libFuzzer build both use
# (with the CUDA simulation, so that the CUDA kernel tests run under ASan + UBSan).
ensure_clang() {
  local missing=() p sudo=()
  for p in clang-14 libclang-rt-14-dev ninja-build; do
    [[ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)" == "install ok installed" ]] || missing+=("$p")
  done
  [[ ${#missing[@]} -eq 0 ]] && return
  echo "[sanitize] installing ${missing[*]}"
  [[ $(id -u) -ne 0 ]] && sudo=(sudo)
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get update
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y --no-install-recommends "${missing[@]}"
}

# Line tables are all a sanitizer's report needs (file:line in every frame); full debug info made
# each object ~15% slower to compile.
SANITIZE_FLAGS="-O2 -gline-tables-only -DNDEBUG"

configure_asan() {  # root, build dir
  ensure_clang
  # The CUDA simulation (sim/): the CUDA kernels run under the sanitizers too.
  cmake -S "$1" -B "$2" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="$SANITIZE_FLAGS" \
    -DCMAKE_CXX_COMPILER=clang++-14 -DKVINFER_CUDA=OFF -DKVINFER_CUDA_SIM=ON -DKVINFER_SANITIZE=address,undefined -DKVINFER_FUZZ=ON -DKVINFER_TESTS=ON \
    -DKVINFER_BENCH=OFF -DKVINFER_EXAMPLES=ON -DKVINFER_WERROR=ON >/dev/null
}

configure_tsan() {  # root, build dir
  ensure_clang
  cmake -S "$1" -B "$2" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="$SANITIZE_FLAGS" \
    -DCMAKE_CXX_COMPILER=clang++-14 -DKVINFER_CUDA=OFF -DKVINFER_SANITIZE=thread -DKVINFER_OPENMP=OFF -DKVINFER_TESTS=ON \
    -DKVINFER_BENCH=OFF -DKVINFER_EXAMPLES=OFF -DKVINFER_WERROR=ON >/dev/null
}
