#!/bin/bash
# How far 15-bit activations (--activations int15) move the next-token distributions from the
# exact products, beside 8-bit ones, over GPL-3 (-c 512, the first 6 windows, f32 cache). Run from
# the repository root after tools/setup.sh; smol_q8_0.gguf and smol_q4_0.gguf are the default
# model's Q4_1 matrices requantised by requantize.py (beside this file) into $MODELS.
set -eu
P=build/examples/kvinfer-perplexity
T=/usr/share/common-licenses/GPL-3
MODELS=${MODELS:?set MODELS to the folder of the requantised files}
OUT=${OUT:-docs/data/int15-accuracy}
BASE=$(mktemp)
run() {  # name file
  $P -m "$2" -f $T -c 512 --chunks 6 --kv-dtype f32 --save-logits "$BASE" --json > "$OUT/$1-exact.json"
  for mode in int15 int8; do
    $P -m "$2" -f $T -c 512 --chunks 6 --kv-dtype f32 --activations $mode --kl-base "$BASE" --json > "$OUT/$1-$mode.json"
  done
}
run smol-q4_1 models/SmolLM2-135M-Instruct.Q4_1.gguf
for t in q8_0 q4_0; do run smol-$t "$MODELS/smol_$t.gguf"; done
rm -f "$BASE"
