#!/usr/bin/env bash
# The GPU check, for a machine with an NVIDIA GPU and no network (made for the lent H200, sm_90):
# configures build-gpu/ (Release, CUDA for sm_90, tests and benchmarks, no examples), builds only
# the targets the GPU run needs, runs the CUDA tests (and test_device), then the GPU benchmarks
# (decode attention, end to end), kvinfer-bench's decode floor on a TinyLlama-1.1B-shaped model
# in bf16, Q8_0 and Q4_K, and every op's benchmark last, each step under a timeout, and prints a
# summary table (step, seconds, result) and a table of figures (docs/benchmarks.md, "The decode
# floor"): bytes a decode step must read, copy bandwidth, floor and achieved tokens/s, % of the
# floor (target >= 75 %); decode attention GB/s against the copy bandwidth at 8K and 32K context
# (target >= 80 %). Targets are reported, not enforced: the exit status is about the steps.
# Meant to finish in under 5 minutes on an H200.
# Never installs anything and never uses the network: a missing tool or Debian package is one
# line naming it, and exit status 2; so is a machine without an NVIDIA GPU. Needs no model file
# (the default-model tests skip without it).
#
#   tools/gpu_check.sh                       build + tests + benchmarks + figures
#   OUT=/some/dir tools/gpu_check.sh         logs there (default: build-gpu/)
#   GPU_CHECK_ARCH=89 tools/gpu_check.sh     another architecture
#   GPU_CHECK_DEADLINE=300 tools/gpu_check.sh   stop starting steps after 300 s (default 540)
#   tools/gpu_check.sh --figures DIR         only print the figures table from the logs in DIR
#                                            (floor_<dtype>.txt, kvinfer-bench-cuda-attention.txt)
#
# Exit status: 0 every step passed; 1 a step failed or timed out; 2 a prerequisite is missing.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="$ROOT/build-gpu"
LOGS="${OUT:-$BUILD}"
ARCH="${GPU_CHECK_ARCH:-90}"
JOBS="$(nproc 2>/dev/null || echo 4)"
export PATH="$PATH:/usr/local/cuda/bin"

TESTS=(test_cuda_attention test_cuda_ops test_cuda_gemv test_cuda_graphs test_cuda_sample test_cuda_e2e test_cuda_kv_state
       test_cuda_batch test_cuda_decoding
       test_device)
BENCHES=(kvinfer-bench-cuda-attention kvinfer-bench-cuda-decode kvinfer-bench-cuda-ops)
# The decode floor: kvinfer-bench on the TinyLlama-1.1B shape, P = 512, N = 129 (the floor at the
# middle decode step, 576 positions), cache on only, in each weight dtype; q4_k once more with
# KVINFER_CUDA_GRAPHS=0 (plain launches: what the graph saves). Runs are named dtype[_nographs].
FLOOR_RUNS=(bf16 q8_0 q4_k q4_k_nographs)

# Seconds each step may take at most, and the whole run: a step is cut to what is left of
# GPU_CHECK_DEADLINE (default 540 s), and skipped when under 10 s is left, so that the summary is
# always printed within a 10-minute session.
T_CONFIGURE=90
T_BUILD=240
T_TEST=120
T_BENCH=120
T_FLOOR=90
DEADLINE="${GPU_CHECK_DEADLINE:-540}"

missing() { echo "gpu_check: missing $*: this script installs nothing (no network there); install first" >&2; exit 2; }

# ---- the figures table, from saved logs (also: tools/gpu_check.sh --figures DIR) ----
# kvinfer-bench's table lines (bench/bench_report.cpp, format_floor):
#   device copy bandwidth: 4123.5 GB/s (NVIDIA H200: D2D cudaMemcpy of 1.00 GiB, ...)
#   decode step bytes (step 65, 576 positions): 2,069,258,240 = matrices ...
#   decode floor: 0.502 ms/token = 1992.3 tokens/s (bytes a step / ...); achieved 1502.1 tokens/s = 75.4% of the floor
# bench_cuda_attention's rows: context group heads "KV MiB" "time us" GB/s "% copy", after
# "copy bandwidth (D2D 1024 MiB, read + write): 4123 GB/s". A figure a log lacks prints as "-".

# first_match FILE SED_SCRIPT: the first line sed -n prints, or "-".
first_match() {
  local v=""
  [[ -f "$1" ]] && v="$(sed -n "$2" "$1" | head -1)"
  echo "${v:--}"
}
# at_least VALUE TARGET: "yes" or "NO" (VALUE >= TARGET), "-" when VALUE is not a number.
at_least() {
  awk -v v="$1" -v t="$2" 'BEGIN { if (v !~ /^[0-9]+([.][0-9]+)?$/) print "-"; else if (v + 0 >= t + 0) print "yes"; else print "NO" }'
}
figures_table() {
  local dir="$1" dt log ctx bytes copy floor achieved pct
  echo
  echo "| TinyLlama-1.1B shape, batch-1 decode | positions | bytes/step | copy GB/s | floor tokens/s | achieved tokens/s | % of floor | >= 75 % |"
  echo "|---|---:|---:|---:|---:|---:|---:|---|"
  for dt in "${FLOOR_RUNS[@]}"; do
    log="$dir/floor_$dt.txt"
    ctx="$(first_match "$log" 's/^decode step bytes (step [0-9]*, \([0-9]*\) positions): .*/\1/p')"
    bytes="$(first_match "$log" 's/^decode step bytes ([^)]*): \([0-9,]*\) = .*/\1/p')"
    copy="$(first_match "$log" 's/^device copy bandwidth: \([0-9.]*\) GB\/s.*/\1/p')"
    floor="$(first_match "$log" 's/^decode floor: [0-9.]* ms\/token = \([0-9.]*\) tokens\/s.*/\1/p')"
    achieved="$(first_match "$log" 's/^decode floor: .*; achieved \([0-9.]*\) tokens\/s.*/\1/p')"
    pct="$(first_match "$log" 's/^decode floor: .* = \([0-9.]*\)% of the floor$/\1/p')"
    echo "| $dt | $ctx | $bytes | $copy | $floor | $achieved | $pct | $(at_least "$pct" 75) |"
  done
  log="$dir/kvinfer-bench-cuda-attention.txt"
  copy="$(first_match "$log" 's/^copy bandwidth ([^)]*): \([0-9.]*\) GB\/s.*/\1/p')"
  echo
  echo "| decode attention (bf16 cache, head_dim 128, 8 KV heads) | context | GQA group | KV MiB | GB/s | copy GB/s | % of copy | >= 80 % |"
  echo "|---|---:|---:|---:|---:|---:|---:|---|"
  local rows=0 context group heads mib gbs pcopy
  if [[ -f "$log" ]]; then
    while read -r context group heads mib _ gbs pcopy; do
      [[ "$context" == 8192 || "$context" == 32768 ]] || continue
      pcopy="${pcopy%\%}"
      echo "| $heads heads | $context | $group | $mib | $gbs | $copy | $pcopy | $(at_least "$pcopy" 80) |"
      rows=$((rows + 1))
    done < <(awk 'NF == 7 && $1 ~ /^[0-9]+$/ && $2 ~ /^[0-9]+$/ && $7 ~ /%$/' "$log")
  fi
  [[ $rows -gt 0 ]] || echo "| - | 8192, 32768 | - | - | - | $copy | - | - |"
}

if [[ "${1:-}" == "--figures" ]]; then
  [[ -d "${2:-}" ]] || { echo "gpu_check: --figures needs the directory of a run's logs" >&2; exit 2; }
  figures_table "$2"
  exit 0
fi

# ---- prerequisites, checked without installing anything ----
# A GPU first: without one nothing below can run.
if ! command -v nvidia-smi >/dev/null 2>&1; then
  echo "gpu_check: no NVIDIA GPU here: nvidia-smi is not installed (this script needs a machine with a GPU)" >&2
  exit 2
fi
if ! gpus="$(nvidia-smi -L 2>&1)" || ! grep -q '^GPU [0-9]' <<<"$gpus"; then
  echo "gpu_check: no NVIDIA GPU here: nvidia-smi -L lists none (${gpus//$'\n'/; })" >&2
  exit 2
fi
for tool in cmake make c++ pkg-config nvcc timeout; do
  command -v "$tool" >/dev/null 2>&1 || missing "the tool '$tool'"
done
if command -v dpkg-query >/dev/null 2>&1; then
  # What this configuration builds with (tools/setup.sh's list, less the examples' and the
  # downloader's packages; libopenblas-dev is optional).
  absent=()
  for p in libfmt-dev nlohmann-json3-dev libgtest-dev libgmock-dev libbenchmark-dev libcli11-dev libpcre2-dev \
           libutf8proc-dev; do
    [[ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" == "install ok installed" ]] || absent+=("$p")
  done
  [[ ${#absent[@]} -eq 0 ]] || missing "the Debian packages ${absent[*]}"
fi
mkdir -p "$LOGS" || { echo "gpu_check: cannot create the log directory $LOGS" >&2; exit 2; }
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | tee "$LOGS/nvidia_smi.txt"

# ---- steps ----
STEP_NAMES=() STEP_SECONDS=() STEP_RESULTS=()
failed=0

# step NAME TIMEOUT LOG COMMAND...: runs COMMAND under `timeout`, its output into LOG, and records
# the step. Returns COMMAND's exit status (124 on timeout).
step() {
  local name="$1" limit="$2" log="$3"
  shift 3
  local left=$((DEADLINE - SECONDS))
  if [[ $left -lt 10 ]]; then
    record "$name" 0 "skipped (GPU_CHECK_DEADLINE ${DEADLINE} s reached)"
    failed=1
    return 124
  fi
  [[ $limit -le $left ]] || limit=$left
  echo "== $name (at most ${limit} s; log: $log)"
  local t0=$SECONDS rc
  timeout --kill-after=10 "$limit" "$@" >"$log" 2>&1
  rc=$?
  local result="ok"
  if [[ $rc -eq 124 || $rc -eq 137 ]]; then
    result="TIMEOUT after ${limit} s"
  elif [[ $rc -ne 0 ]]; then
    result="FAILED (exit $rc)"
  fi
  [[ $rc -eq 0 ]] || failed=1
  record "$name" "$((SECONDS - t0))" "$result"
  return "$rc"
}
record() { STEP_NAMES+=("$1") STEP_SECONDS+=("$2") STEP_RESULTS+=("$3"); }

# A gtest log's counts, e.g. "12 passed, 3 skipped".
gtest_counts() {
  local passed skipped failed_n
  passed="$(grep -oE '^\[  PASSED  \] [0-9]+' "$1" | grep -oE '[0-9]+$' | tail -1)"
  skipped="$(grep -oE '^\[  SKIPPED \] [0-9]+' "$1" | grep -oE '[0-9]+$' | tail -1)"
  failed_n="$(grep -oE '^\[  FAILED  \] [0-9]+ test' "$1" | grep -oE '[0-9]+' | tail -1)"
  echo "${passed:-0} passed, ${skipped:-0} skipped, ${failed_n:-0} failed"
}

# Finds a built target's executable (tests/ or bench/), or nothing.
binary() {
  local dir
  for dir in tests bench; do
    [[ -x "$BUILD/$dir/$1" ]] && { echo "$BUILD/$dir/$1"; return; }
  done
}

configured=0
if step configure "$T_CONFIGURE" "$LOGS/configure.log" \
    cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DKVINFER_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="$ARCH" \
    -DKVINFER_TESTS=ON -DKVINFER_BENCH=ON -DKVINFER_EXAMPLES=OFF; then
  configured=1
  # No stale executable from an earlier build may pass for this one's.
  for target in "${TESTS[@]}" "${BENCHES[@]}" kvinfer-bench; do
    bin="$(binary "$target")"
    [[ -z "$bin" ]] || rm -f "$bin"
  done
  # Keep going past a failed target, so that whatever did build still runs.
  keep_going=(-k)
  grep -q '^CMAKE_GENERATOR:INTERNAL=Ninja' "$BUILD/CMakeCache.txt" && keep_going=(-k 0)
  step "build (sm_$ARCH, $JOBS jobs)" "$T_BUILD" "$LOGS/build.log" \
    cmake --build "$BUILD" -j "$JOBS" --target "${TESTS[@]}" "${BENCHES[@]}" kvinfer-bench -- "${keep_going[@]}" ||
    grep -E -B2 -A2 ' error|Error ' "$LOGS/build.log" | head -40
else
  tail -20 "$LOGS/configure.log"
fi

for t in "${TESTS[@]}"; do
  bin="$(binary "$t")"
  if [[ $configured -eq 0 ]]; then
    record "$t" 0 "skipped (configure failed)"
    continue
  elif [[ -z "$bin" ]]; then
    record "$t" 0 "not built"
    failed=1
    continue
  fi
  rm -f "$LOGS/$t.log"
  step "$t" "$T_TEST" "$LOGS/$t.log" "$bin" --gtest_brief=1
  if [[ -f "$LOGS/$t.log" ]]; then
    STEP_RESULTS[-1]="${STEP_RESULTS[-1]}: $(gtest_counts "$LOGS/$t.log")"
    grep -E -A3 '^\[  FAILED  \]|Failure$' "$LOGS/$t.log" | head -40
  fi
done

# run_bench NAME: one GPU benchmark, its output into LOGS/NAME.txt and on the terminal.
run_bench() {
  local b="$1" bin
  bin="$(binary "$b")"
  if [[ $configured -eq 0 ]]; then
    record "$b" 0 "skipped (configure failed)"
    return
  elif [[ -z "$bin" ]]; then
    record "$b" 0 "not built"
    failed=1
    return
  fi
  local args=()
  if [[ "$b" == kvinfer-bench-cuda-ops ]]; then
    args=(--benchmark_min_time=0.05 "--benchmark_out=$LOGS/bench_cuda_ops.json" --benchmark_out_format=json)
  fi
  step "$b" "$T_BENCH" "$LOGS/$b.txt" "$bin" "${args[@]}"
  cat "$LOGS/$b.txt"
}

# Every op's benchmark last: the figures table needs the others (and the decode floor) first,
# should GPU_CHECK_DEADLINE cut the run short.
for b in "${BENCHES[@]}"; do
  [[ "$b" == kvinfer-bench-cuda-ops ]] || run_bench "$b"
done

bin="$(binary kvinfer-bench)"
for dt in "${FLOOR_RUNS[@]}"; do
  graphs=1
  [[ "$dt" == *_nographs ]] && graphs=0
  if [[ $configured -eq 0 ]]; then
    record "decode floor $dt" 0 "skipped (configure failed)"
    continue
  elif [[ -z "$bin" ]]; then
    record "decode floor $dt" 0 "kvinfer-bench not built"
    failed=1
    continue
  fi
  step "decode floor $dt" "$T_FLOOR" "$LOGS/floor_$dt.txt" env KVINFER_CUDA_GRAPHS="$graphs" \
    "$bin" -s tinyllama-1.1b --dtype "${dt%_nographs}" --device cuda --mode on -p 512 -n 129 --positions 2,129 \
    --json "$LOGS/floor_$dt.json"
  grep -E '^(device copy|decode step bytes|decode floor)' "$LOGS/floor_$dt.txt"
done
run_bench kvinfer-bench-cuda-ops

# ---- summary ----
{
  echo
  echo "| step | seconds | result |"
  echo "|---|---:|---|"
  for i in "${!STEP_NAMES[@]}"; do
    echo "| ${STEP_NAMES[$i]} | ${STEP_SECONDS[$i]} | ${STEP_RESULTS[$i]} |"
  done
  figures_table "$LOGS"
  echo
  echo "total ${SECONDS} s; logs in $LOGS"
} | tee "$LOGS/summary.md"
exit "$failed"
