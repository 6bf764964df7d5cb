#!/usr/bin/env bash
# run.sh of a kvinfer GPU bundle (made by tools/gpu_bundle.sh; this is tools/gpu_bundle_run.sh):
# the GPU run, on a machine with an NVIDIA driver and nothing of kvinfer's build (bash, tar, and
# xz or python3 to unpack: the lent image has them). It unpacks the executables, finds cuBLAS (the CUDA toolkit's, else PyTorch's nvidia wheels), prints the device,
# then, each step under a time limit (the figures before the sanitizer, which gets what is left):
#   1. every CUDA test executable (and test_device), every test;
#   2. the decode floor: kvinfer-bench on a TinyLlama-1.1B shape in bf16, Q8_0 and Q4_K, with CUDA
#      graphs and without (docs/benchmarks.md, "The decode floor");
#   3. decode attention's GB/s at 8K and 32K context against the device's copy bandwidth;
#   4. the default model's answer (kvinfer-generate, greedy) to the README's question;
#   5. compute-sanitizer memcheck and racecheck on a bounded set of kernel tests;
# and writes a summary (steps, seconds, results; the figures tables) and the logs to $OUT (at most
# 8 files: what the device tool brings back), else to ./out beside this script.
# A simulation bundle (tools/gpu_bundle.sh --sim, MANIFEST kind=sim) runs the same steps on the
# simulated device $KVINFER_SIM_DEVICE (default sm_90), small: the first test of each executable
# (test_cuda_sim's all), fixture models for the floor and the answer, short contexts, and the
# simulation's racecheck in compute-sanitizer's place. CI runs it so.
#
#   ./run.sh
#   RUN_DEADLINE=300 ./run.sh     start no step after 300 s (default 330); every step also ends
#                                 by the hard stop, RUN_HARD_STOP (default 540 s)
#   KVINFER_TEST_DATA=DIR         the test data (default: tests/data of the checkout holding the bundle)
#   KVINFER_MODEL=FILE            the default model (default: models/SmolLM2-135M-Instruct.Q4_1.gguf there)
#
# Exit status: 0 every step passed; 1 a step failed or timed out; 2 it cannot run here (no GPU,
# no cuBLAS, a broken bundle), said in one line.
set -uo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
OUTDIR="${OUT:-$HERE/out}"
DEADLINE="${RUN_DEADLINE:-330}"
HARD="${RUN_HARD_STOP:-540}"
die() { echo "run.sh: $*" >&2; exit 2; }
[[ "$DEADLINE" =~ ^[0-9]+$ && "$HARD" =~ ^[0-9]+$ ]] || die "RUN_DEADLINE and RUN_HARD_STOP are seconds"
[[ -f "$HERE/MANIFEST.txt" && -f "$HERE/payload.tar.xz" ]] || die "$HERE is not a bundle (MANIFEST.txt, payload.tar.xz)"
manifest() { sed -n "s/^$1=//p" "$HERE/MANIFEST.txt" | head -1; }
KIND="$(manifest kind)"
read -r -a TESTS <<<"$(manifest tests)"
SIM=0
[[ "$KIND" == sim ]] && SIM=1
mkdir -p "$OUTDIR" || die "cannot create $OUTDIR"

# ---- unpack (xz or python3 does it; a bin/ folder beside run.sh is used as it is) ----
WORK="$(mktemp -d "${TMPDIR:-/tmp}/kvinfer-bundle.XXXXXX")" || die "no temporary folder"
trap 'rm -rf "$WORK"' EXIT
if [[ -d "$HERE/bin" ]]; then
  ln -s "$HERE/bin" "$WORK/bin"
elif command -v xz >/dev/null; then
  xz -dc "$HERE/payload.tar.xz" | tar -C "$WORK" -xf - || die "cannot unpack payload.tar.xz"
elif command -v python3 >/dev/null; then
  python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$HERE/payload.tar.xz" "$WORK" ||
    die "cannot unpack payload.tar.xz"
else
  die "neither xz nor python3 is here to unpack payload.tar.xz"
fi
BIN="$WORK/bin"

# ---- where the data, the model and the libraries are ----
export KVINFER_TEST_DATA="${KVINFER_TEST_DATA:-$HERE/../tests/data}"
MODEL="${KVINFER_MODEL:-$HERE/../models/SmolLM2-135M-Instruct.Q4_1.gguf}"
[[ -f "$MODEL" ]] && export KVINFER_MODEL="$MODEL"  # test_cuda_e2e's default-model test reads it too
[[ -d "$KVINFER_TEST_DATA/models" ]] || echo "run.sh: no test data at $KVINFER_TEST_DATA (set KVINFER_TEST_DATA): tests that read it fail"
if [[ $SIM -eq 1 ]]; then
  export KVINFER_SIM_DEVICE="${KVINFER_SIM_DEVICE:-sm_90}"
else
  command -v nvidia-smi >/dev/null || die "no NVIDIA GPU here: nvidia-smi is not installed"
  nvidia-smi -L 2>/dev/null | grep -q '^GPU [0-9]' || die "no NVIDIA GPU here: nvidia-smi -L lists none"
  # cuBLAS is dlopened by its soname: the toolkit's, else a PyTorch install's nvidia wheel.
  so="$(manifest cublas)"
  dirs=()
  for d in ${CUDA_HOME:+"$CUDA_HOME/lib64"} /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib \
           /usr/local/cuda-*/lib64 /usr/lib/x86_64-linux-gnu /usr/local/nvidia/lib64; do
    [[ -e "$d/$so" ]] && { dirs+=("$d"); break; }
  done
  if [[ ${#dirs[@]} -eq 0 ]] && command -v python3 >/dev/null; then
    d="$(python3 - "$so" <<'PY' 2>/dev/null
import glob, os, site, sys
for root in site.getsitepackages() + [site.getusersitepackages()]:
    for hit in sorted(glob.glob(os.path.join(root, "nvidia", "**", sys.argv[1]), recursive=True)):
        print(os.path.dirname(hit)); raise SystemExit
PY
)"
    [[ -n "$d" ]] && dirs+=("$d")
  fi
  [[ ${#dirs[@]} -gt 0 ]] || die "no $so: neither a CUDA toolkit nor PyTorch's nvidia-cublas wheel is here"
  for d in /usr/local/nvidia/lib64 /usr/local/nvidia/lib; do [[ -d "$d" ]] && dirs+=("$d"); done
  export LD_LIBRARY_PATH="$(IFS=:; echo "${dirs[*]}")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi

# ---- steps ----
STEP_NAMES=() STEP_SECONDS=() STEP_RESULTS=()
failed=0
record() { STEP_NAMES+=("$1") STEP_SECONDS+=("$2") STEP_RESULTS+=("$3"); }
# step NAME LIMIT LOG COMMAND...: COMMAND under `timeout`, cut to what the hard stop leaves, its
# output appended to LOG under a header; not started past the deadline. Returns its status.
step() {
  local name="$1" limit="$2" log="$3"
  shift 3
  local left=$((HARD - SECONDS - 10))
  if [[ $SECONDS -ge $DEADLINE || $left -lt 5 ]]; then
    record "$name" 0 "not started (deadline ${DEADLINE} s)"
    failed=1
    return 124
  fi
  [[ $limit -le $left ]] || limit=$left
  echo "== $name (at most ${limit} s)"
  local t0=$SECONDS rc
  { echo; echo "==== $name"; } >>"$log"
  timeout --kill-after=5 "$limit" "$@" >>"$log" 2>&1
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
# A gtest log section's counts, e.g. "12 passed, 0 skipped, 0 failed".
gtest_counts() {
  local text passed skipped failed_n
  text="$(awk -v h="==== $2" '$0 == h { on = 1; next } /^==== / { on = 0 } on' "$1")"
  passed="$(grep -oE '^\[  PASSED  \] [0-9]+' <<<"$text" | grep -oE '[0-9]+$' | tail -1)"
  skipped="$(grep -oE '^\[  SKIPPED \] [0-9]+' <<<"$text" | grep -oE '[0-9]+$' | tail -1)"
  failed_n="$(grep -oE '^\[  FAILED  \] [0-9]+ test' <<<"$text" | grep -oE '[0-9]+' | tail -1)"
  echo "${passed:-0} passed, ${skipped:-0} skipped, ${failed_n:-0} failed"
}

DEVICE_LOG="$OUTDIR/device.txt" TESTS_LOG="$OUTDIR/tests.log" SAN_LOG="$OUTDIR/sanitizer.log"
FLOOR_LOG="$OUTDIR/floor.log" ATT_LOG="$OUTDIR/attention.log" GEN_LOG="$OUTDIR/generate.log"
: >"$TESTS_LOG"; : >"$SAN_LOG"; : >"$FLOOR_LOG"; : >"$ATT_LOG"; : >"$GEN_LOG"
{
  echo "bundle: $(tr '\n' ' ' <"$HERE/MANIFEST.txt")"
  if [[ $SIM -eq 1 ]]; then
    echo "device: simulated $KVINFER_SIM_DEVICE (kvinfer's CUDA simulation: figures measure the CPU, not a GPU)"
  else
    nvidia-smi --query-gpu=name,memory.total,driver_version,compute_cap --format=csv,noheader 2>&1 | sed 's/^/device: /'
    echo "cuBLAS from: ${LD_LIBRARY_PATH%%:*}"
  fi
} | tee "$DEVICE_LOG"

# 1. Every test (a simulation bundle: the first of each executable, every one of test_cuda_sim's
# and test_cuda_devices'; test_cuda_decoding's first, beam search, takes a minute simulated).
declare -A SMOKE=([test_cuda_decoding]='Fixtures/CudaSpeculative.GreedyTokensAreHfsAndThePlainLoops/llama_gqa4')
for t in "${TESTS[@]}"; do
  args=(--gtest_brief=1)
  if [[ $SIM -eq 1 && "$t" != test_cuda_sim && "$t" != test_cuda_devices ]]; then
    first="${SMOKE[$t]:-$("$BIN/$t" --gtest_list_tests | awk '/^[^ ]/ { suite = $1 } /^  / && n < 1 { print suite $1; n++ }')}"
    args+=("--gtest_filter=$first")
  fi
  env_args=()
  [[ $SIM -eq 1 && "$t" == test_cuda_devices ]] && env_args=(KVINFER_SIM_DEVICE=sm_90,sm_86)
  step "$t" 150 "$TESTS_LOG" env "${env_args[@]}" "$BIN/$t" "${args[@]}"
  STEP_RESULTS[-1]="${STEP_RESULTS[-1]}: $(gtest_counts "$TESTS_LOG" "$t")"
done

# 2. The decode floor: TinyLlama-1.1B's shape, P = 512, N = 129 (the middle step has 576
# positions), in bf16, Q8_0 and Q4_K, with CUDA graphs and with plain launches.
FLOOR_RUNS=(bf16 q8_0 q4_k bf16_nographs q8_0_nographs q4_k_nographs)
for run in "${FLOOR_RUNS[@]}"; do
  graphs=1
  [[ "$run" == *_nographs ]] && graphs=0
  if [[ $SIM -eq 1 ]]; then
    model=(-m "$KVINFER_TEST_DATA/models/llama_gqa4") size=(-p 8 -n 5 --positions 2,5)
  else
    model=(-s tinyllama-1.1b --dtype "${run%_nographs}") size=(-p 512 -n 129 --positions 2,129)
  fi
  step "decode floor $run" 75 "$FLOOR_LOG" env KVINFER_CUDA_GRAPHS="$graphs" "$BIN/kvinfer-bench" "${model[@]}" \
    --device cuda --mode on "${size[@]}"
done

# 3. Decode attention against the copy bandwidth, 8K and 32K context (short contexts simulated).
att=()
[[ $SIM -eq 1 ]] && att=(--contexts 128,256 --groups 1,4 --copy-mib 16 --reps 2)
step "decode attention GB/s" 90 "$ATT_LOG" "$BIN/kvinfer-bench-cuda-attention" "${att[@]}"

# 4. The default model's answer: greedy, so always the same (README: "The capital of France is Paris.").
# Simulated: chatml_tiny (a real tokenizer and template over random weights), the default model
# takes minutes there.
n=64
if [[ $SIM -eq 1 ]]; then
  MODEL="$KVINFER_TEST_DATA/models/chatml_tiny" n=8
fi
if [[ -e "$MODEL" ]]; then
  if step "default model's answer" 60 "$GEN_LOG" "$BIN/kvinfer-generate" -m "$MODEL" --device cuda --chat \
      -p "What is the capital of France?" -n "$n" --temp 0; then
    answer="$(awk '/^==== default/ { on = 1; next } on && NF && !/^\[prompt/ { printf "%s", $0; exit }' "$GEN_LOG" |
      LC_ALL=C tr -c '\040-\176' '?')"  # printable: random weights answer in any bytes
    STEP_RESULTS[-1]="ok: $answer"
  fi
else
  record "default model's answer" 0 "not run: no model at $MODEL (set KVINFER_MODEL; docs/cuda.md says how to bring it)"
fi

# 5. Memory errors and shared-memory races on a bounded set of kernel tests (the tools slow the
# kernels 10-100×), with the time the figures left.
SANITIZE=(
  "memcheck test_cuda_ops CudaOps.*Norm*:CudaOps.StoreKv*:CudaOps.Embed*:CudaOps.Rope*"
  "memcheck test_cuda_attention CudaAttentionMma.PrefillMatchesFp64AndCpu/group4_hd128:CudaAttention.DecodeShortContextsAndTinyWindows"
  "memcheck test_cuda_gemv CudaGemv.MatchesCpuLinear:CudaGemv.DecodesEveryQuantisedTypeAsGguf"
  "racecheck test_cuda_ops CudaOps.*Norm*:CudaOps.StoreKvEightBit*"
  "racecheck test_cuda_attention CudaAttentionMma.PrefillMatchesFp64AndCpu/group1_hd64:CudaAttention.DecodeShortContextsAndTinyWindows"
)
if [[ $SIM -eq 1 ]]; then
  # The simulation's own racecheck (docs/cuda.md) stands in for compute-sanitizer's.
  for t in test_cuda_ops test_cuda_attention; do
    step "racecheck (simulation) $t" 120 "$SAN_LOG" env KVINFER_SIM_RACECHECK=1 "$BIN/$t" --gtest_brief=1 \
      "--gtest_filter=$("$BIN/$t" --gtest_list_tests | awk '/^[^ ]/ { s = $1 } /^  / && n < 2 { print s $1; n++ }' | paste -sd:)"
  done
elif command -v compute-sanitizer >/dev/null; then
  for entry in "${SANITIZE[@]}"; do
    read -r tool t filter <<<"$entry"
    step "compute-sanitizer $tool $t" 45 "$SAN_LOG" compute-sanitizer --tool "$tool" --error-exitcode 3 \
      "$BIN/$t" --gtest_brief=1 "--gtest_filter=$filter"
  done
else
  record "compute-sanitizer" 0 "not run: compute-sanitizer is not on PATH"
  failed=1
fi

# ---- figures ----
first_match() {  # FILE SECTION SED: the first line sed prints in FILE's section, or "-"
  local v
  v="$(awk -v h="==== $2" '$0 == h { on = 1; next } /^==== / { on = 0 } on' "$1" | sed -n "$3" | head -1)"
  echo "${v:--}"
}
at_least() {
  awk -v v="$1" -v t="$2" 'BEGIN { if (v !~ /^[0-9]+([.][0-9]+)?$/) print "-"; else if (v + 0 >= t + 0) print "yes"; else print "NO" }'
}
figures() {
  local run sec bytes copy floor achieved pct
  echo "| decode floor, batch 1 ($([[ $SIM -eq 1 ]] && echo "simulated: fixture llama_gqa4" || echo "TinyLlama-1.1B shape")) | bytes/step | copy GB/s | floor tokens/s | achieved tokens/s | % of floor | >= 75 % |"
  echo "|---|---:|---:|---:|---:|---:|---|"
  for run in "${FLOOR_RUNS[@]}"; do
    sec="decode floor $run"
    bytes="$(first_match "$FLOOR_LOG" "$sec" 's/^decode step bytes ([^)]*): \([0-9,]*\) = .*/\1/p')"
    copy="$(first_match "$FLOOR_LOG" "$sec" 's/^device copy bandwidth: \([0-9.]*\) GB\/s.*/\1/p')"
    floor="$(first_match "$FLOOR_LOG" "$sec" 's/^decode floor: [0-9.]* ms\/token = \([0-9.]*\) tokens\/s.*/\1/p')"
    achieved="$(first_match "$FLOOR_LOG" "$sec" 's/^decode floor: .*; achieved \([0-9.]*\) tokens\/s.*/\1/p')"
    pct="$(first_match "$FLOOR_LOG" "$sec" 's/^decode floor: .* = \([0-9.]*\)% of the floor$/\1/p')"
    echo "| $run | $bytes | $copy | $floor | $achieved | $pct | $(at_least "$pct" 75) |"
  done
  echo
  copy="$(first_match "$ATT_LOG" "decode attention GB/s" 's/^copy bandwidth ([^)]*): \([0-9.]*\) GB\/s.*/\1/p')"
  echo "| decode attention (bf16 cache, head_dim 128, 8 KV heads) | context | GQA group | KV MiB | GB/s | copy GB/s | % of copy | >= 80 % |"
  echo "|---|---:|---:|---:|---:|---:|---:|---|"
  local rows=0 context group heads mib gbs pcopy
  while read -r context group heads mib _ gbs pcopy; do
    [[ $SIM -eq 1 || "$context" == 8192 || "$context" == 32768 ]] || continue
    pcopy="${pcopy%\%}"
    echo "| $heads heads | $context | $group | $mib | $gbs | $copy | $pcopy | $(at_least "$pcopy" 80) |"
    rows=$((rows + 1))
  done < <(awk 'NF == 7 && $1 ~ /^[0-9]+$/ && $2 ~ /^[0-9]+$/ && $7 ~ /%$/' "$ATT_LOG")
  [[ $rows -gt 0 ]] || echo "| - | 8192, 32768 | - | - | - | $copy | - | - |"
}
{
  echo "# kvinfer GPU bundle run"
  echo
  cat "$DEVICE_LOG"
  echo
  echo "| step | seconds | result |"
  echo "|---|---:|---|"
  for i in "${!STEP_NAMES[@]}"; do echo "| ${STEP_NAMES[$i]} | ${STEP_SECONDS[$i]} | ${STEP_RESULTS[$i]} |"; done
  echo
  figures
  echo
  echo "total ${SECONDS} s; logs in $OUTDIR"
} | tee "$OUTDIR/summary.md"
exit "$failed"
