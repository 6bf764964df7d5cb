#!/usr/bin/env bash
# Decode against the bandwidth probe, each configuration run ROUNDS times in turn (default 5) so
# that a noisy minute hits every configuration alike: the median, then the range, of the step time
# and of the share of the same run's probe. The "medians of five runs" tables of docs/benchmarks-history.md.
# The TinyLlama-1.1B shape is a Llama-family Q4/Q8 model larger than a 480 MiB L3 (0.6-1.2 GB).
#   tools/bench_decode_medians.sh [threads]     ROUNDS=n, BUILD=dir (default build/), ONLY=regex (labels)
# BUILDS="dirA dirB" compares builds (e.g. two commits) side by side: within each round every
# configuration runs on each build in turn, and the table gets one column pair per build.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
read -ra builds <<<"${BUILDS:-${BUILD:-$ROOT/build}}"
T="${1:-$(nproc)}"
ROUNDS="${ROUNDS:-5}"
MODEL="$ROOT/models/SmolLM2-135M-Instruct.Q4_1.gguf"

configs=(
  "gpt2-medium f32|-s gpt2-medium --dtype f32"
  "gpt2-medium bf16|-s gpt2-medium --dtype bf16"
  "gpt2-medium f16|-s gpt2-medium --dtype f16"
  "gpt2-medium q8_0|-s gpt2-medium --dtype q8_0"
  "gpt2-medium q8_0 --int8-activations|-s gpt2-medium --dtype q8_0 --int8-activations"
  "gpt2-medium q4_1 --int8-activations|-s gpt2-medium --dtype q4_1 --int8-activations"
  "tinyllama-1.1b q4_1|-s tinyllama-1.1b --dtype q4_1"
  "tinyllama-1.1b q4_0|-s tinyllama-1.1b --dtype q4_0"
  "tinyllama-1.1b q8_0|-s tinyllama-1.1b --dtype q8_0"
  "tinyllama-1.1b q8_0 --int8-activations|-s tinyllama-1.1b --dtype q8_0 --int8-activations"
  "tinyllama-1.1b q4_0 --int8-activations|-s tinyllama-1.1b --dtype q4_0 --int8-activations"
  "tinyllama-1.1b q4_1 --int8-activations|-s tinyllama-1.1b --dtype q4_1 --int8-activations"
  # A mixture of experts against the dense model of its active size (ONLY=moe runs just these).
  "moe-8x2 q8_0|-s moe-8x2 --dtype q8_0"
  "moe-8x2-dense q8_0|-s moe-8x2-dense --dtype q8_0"
  "moe-8x2 bf16|-s moe-8x2 --dtype bf16"
  "moe-8x2-dense bf16|-s moe-8x2-dense --dtype bf16"
)
[[ -f "$MODEL" ]] && configs+=("SmolLM2-135M Q4_1|-m $MODEL" "SmolLM2-135M Q4_1 --int8-activations|-m $MODEL --int8-activations")
if [[ -n "${ONLY:-}" ]]; then  # ONLY=REGEX keeps the configurations whose label matches
  kept=()
  for c in "${configs[@]}"; do [[ "${c%%|*}" =~ $ONLY ]] && kept+=("$c"); done
  configs=("${kept[@]}")
fi

results="$(mktemp)"
trap 'rm -f "$results"' EXIT
for ((r = 1; r <= ROUNDS; ++r)); do
  for c in "${configs[@]}"; do
    label="${c%%|*}"
    read -ra args <<<"${c#*|}"
    for b in "${!builds[@]}"; do
      out="$("${builds[$b]}/bench/kvinfer-bench" "${args[@]}" --mode on -p 16 -n 96 -t "$T" 2>&1)"
      ms="$(grep -E '^median decode' <<<"$out" | awk '{print $(NF-2)}')"
      pct="$(grep -E 'achieved read bandwidth' <<<"$out" | sed -E 's/.*median over decode steps [0-9.]+ GB\/s \(([0-9]+)% of probe.*/\1/')"
      printf '%s|%s|%s|%s\n' "$b" "$label" "$ms" "$pct" >>"$results"
      printf 'round %d  %-40s %s  %8s ms  %4s %%\n' "$r" "$label" "${builds[$b]}" "$ms" "$pct" >&2
    done
  done
done

median() { sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
range() { sort -g | awk 'NR == 1 {lo = $1} {hi = $1} END {print lo "–" hi}'; }
header="| model |" rule="|---|"
for b in "${builds[@]}"; do
  header+=" median step ($(basename "$b")) | % of the probe ($(basename "$b")) |"
  rule+="---|---|"
done
echo "$header"
echo "$rule"
for c in "${configs[@]}"; do
  label="${c%%|*}"
  line="| $label |"
  for b in "${!builds[@]}"; do
    rows="$(awk -F'|' -v b="$b" -v l="$label" '$1 == b && $2 == l' "$results")"
    ms="$(cut -d'|' -f3 <<<"$rows")"
    pct="$(cut -d'|' -f4 <<<"$rows")"
    line+=" $(median <<<"$ms") ms ($(range <<<"$ms")) | $(median <<<"$pct") % ($(range <<<"$pct")) |"
  done
  echo "$line"
done
