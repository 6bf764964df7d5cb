#!/bin/bash
# Accuracy of the KV cache types on the default model over GPL-3 (one process at a time).
# Run from the repository root after tools/setup.sh.
P=build/examples/kvinfer-perplexity
T=/usr/share/common-licenses/GPL-3
for c in 512 2048; do
  $P -f $T -c $c -t 2 --kv-dtype f32 --save-logits /tmp/base-$c.bin --json > /tmp/ppl-$c-f32.json
  for d in f16 bf16 int8 fp8; do
    $P -f $T -c $c -t 2 --kv-dtype $d --kl-base /tmp/base-$c.bin --json > /tmp/ppl-$c-$d.json
  done
  $P -f $T -c $c -t 2 --kv-dtype f32 --int8-activations --kl-base /tmp/base-$c.bin --json > /tmp/ppl-$c-f32-int8act.json
  $P -f $T -c $c -t 2 --kv-dtype int8 --int8-activations --kl-base /tmp/base-$c.bin --json > /tmp/ppl-$c-int8-int8act.json
done
echo done
