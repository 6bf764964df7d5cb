#!/bin/bash
# Decode step time at 64, 4096 and 8192 positions of cache, f16 vs int8 vs fp8, interleaved.
# Run from the repository root after tools/setup.sh.
B=build/bench/kvinfer-bench; M=models/SmolLM2-135M-Instruct.Q4_1.gguf
for round in 1 2 3; do
  for ctx in 64 4096 8192; do
    for d in f16 int8 fp8; do
      ms=$($B -m $M -p $((ctx-16)) -n 16 --mode on --positions 16 --no-bandwidth-probe -t 2 --kv-dtype $d 2>&1 | awk '/median decode step/ {print $(NF-2)}')
      echo "round $round ctx $ctx $d $ms ms"
    done
  done
done
