#!/bin/bash
# How far 8-bit activations (--int8-activations) move each quant type's next-token distributions
# from the exact products, over GPL-3 (-c 512, the first 6 windows). Run from the repository root
# after tools/setup.sh, with the files named below in $MODELS: smol_<type>.gguf are the default model
# (SmolLM2-135M-Instruct Q4_1) requantised by llama.cpp's `llama-quantize --allow-requantize`
# (0c1e57098), gemma-3-270m-q4_k_m.gguf is tools/fetch_gemma3.sh's file.
set -eu
P=build/examples/kvinfer-perplexity
T=/usr/share/common-licenses/GPL-3
MODELS=${MODELS:?set MODELS to the folder of the files}
OUT=${OUT:-docs/data/int8-accuracy}
run() {  # name file
  $P -m "$2" -f $T -c 512 --chunks 6 --kv-dtype f32 --save-logits /tmp/int8-base.bin --json > "$OUT/$1-exact.json"
  $P -m "$2" -f $T -c 512 --chunks 6 --kv-dtype f32 --int8-activations --kl-base /tmp/int8-base.bin --json > "$OUT/$1-int8.json"
}
run smol-q4_1 models/SmolLM2-135M-Instruct.Q4_1.gguf
for t in q4_0 q5_0 q5_1 q8_0 q4_k_m q5_k_m q6_k; do run smol-$t "$MODELS/smol_$t.gguf"; done
run gemma3-q4_k_m "$MODELS/gemma-3-270m-q4_k_m.gguf"
rm -f /tmp/int8-base.bin
