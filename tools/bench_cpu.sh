#!/usr/bin/env bash
# The CPU tables of docs/benchmarks-history.md ("CPU kernels"): decode against the bandwidth probe for
# each weight type, the product micro-benchmarks against the measured FP32 peak, a 512-token
# prefill, and a 1000-token decode for the attention share.
# Run on an idle machine, after tools/setup.sh (build/ holds the binaries; BUILD= picks another).
#   tools/bench_cpu.sh [threads]        default: every core
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
B="${BUILD:-$ROOT/build}"
T="${1:-$(nproc)}"
MODEL="$ROOT/models/SmolLM2-135M-Instruct.Q4_1.gguf"

decode() {  # label, kvinfer-bench arguments...
  local label="$1"; shift
  local out
  out="$("$B/bench/kvinfer-bench" "$@" --mode on -p 16 -n 128 -t "$T" 2>&1)"
  printf '%-40s %s | %s\n' "$label" "$(grep -E 'median decode' <<<"$out" | awk '{print $(NF-2), $(NF-1)}')" \
    "$(grep -E 'achieved read bandwidth' <<<"$out" | sed 's/.*median over decode steps //; s/; step.*//')"
}

echo "== decode (-p 16 -n 128 -t $T): median step | achieved bandwidth (share of the probe of the same run)"
[[ -f "$MODEL" ]] && decode "SmolLM2-135M Q4_1" -m "$MODEL"
[[ -f "$MODEL" ]] && decode "SmolLM2-135M Q4_1 --int8-activations" -m "$MODEL" --int8-activations
for d in f32 bf16 f16 q8_0 q4_1; do decode "gpt2-medium $d" -s gpt2-medium --dtype "$d"; done
for d in q8_0 q4_1; do decode "gpt2-medium $d --int8-activations" -s gpt2-medium --dtype "$d" --int8-activations; done
for d in q8_0 q4_0 q4_1; do decode "tinyllama-1.1b $d --int8-activations" -s tinyllama-1.1b --dtype "$d" --int8-activations; done

echo "== peak FP32 rate, products, attention, activations (kvinfer-bench-ops, $T threads)"
OMP_NUM_THREADS="$T" "$B/bench/kvinfer-bench-ops" --benchmark_min_time=0.3 \
  --benchmark_filter='BM_fma_peak|BM_linear|attention|gelu|silu' 2>&1 | grep -E '^BM_'

echo "== prefill: time to first token of a 512-token prompt (the whole prompt in one step)"
for d in f32 bf16; do
  printf '%-40s %s\n' "gpt2-medium $d, 512 tokens" "$("$B/bench/kvinfer-bench" -s gpt2-medium --dtype "$d" --mode on \
    -p 512 -n 1 -t "$T" --no-bandwidth-probe 2>&1 | grep -E 'time to first' | awk '{print $(NF-2), $(NF-1)}')"
done

echo "== attention share: gpt2-medium f32, 1000 tokens, step latency by position"
"$B/bench/kvinfer-bench" -s gpt2-medium --mode on -p 16 -n 1000 -t "$T" --no-bandwidth-probe 2>&1 |
  grep -E 'step (1|64|256|512|1000) |median decode'
