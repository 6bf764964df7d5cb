#!/bin/bash
# Decode step time by KV cache type, f16 vs int8 vs fp8 interleaved, on the CPU (2 threads):
# the default model at 64, 4,096 and 8,192 (its context) positions of cache, and the
# Qwen2.5-0.5B shape (random Q4_1 weights, 32K context) at 64, 4,096 and 16,384.
# Run from the repository root after tools/setup.sh: B=build/bench/kvinfer-bench by default.
B=${B:-build/bench/kvinfer-bench}; M=models/SmolLM2-135M-Instruct.Q4_1.gguf
step() {  # model args..., then positions and cache type: the median decode step in ms
  local pos=${@: -2:1} d=${@: -1}
  $B "${@:1:$#-2}" -p $((pos - 16)) -n 16 --mode on --positions 16 --no-bandwidth-probe -t 2 --kv-dtype "$d" 2>&1 |
    awk '/median decode step/ {print $(NF-2)}'
}
for round in 1 2 3; do
  for ctx in 64 4096 8192; do
    for d in f16 int8 fp8; do echo "round $round smollm2-135m ctx $ctx $d $(step -m $M $ctx $d) ms"; done
  done
  for ctx in 64 4096 16384; do
    for d in f16 int8 fp8; do echo "round $round qwen2.5-0.5b ctx $ctx $d $(step -s qwen2.5-0.5b --dtype q4_1 $ctx $d) ms"; done
  done
done
