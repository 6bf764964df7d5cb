#!/bin/bash
# The measurements behind the 8-bit caches' design (docs/kv-cache.md, "Why rotated keys and a
# scale per row"): an f32 cache whose K and/or V rows are quantised to 8 bits and back in
# store_kv, one choice at a time. Build kvinfer-perplexity from a tree with fake-quant.diff
# applied (`git apply docs/data/kv-accuracy/design/fake-quant.diff`, on the commit that added it),
# then run this from that tree's root with P pointing at the binary.
P=${P:-build/examples/kvinfer-perplexity}; T=/usr/share/common-licenses/GPL-3; O=${O:-/tmp/kv-design}
mkdir -p $O
run() {  # ctx, then the KVEXP words (see fake-quant.diff)
  local c=$1; shift
  local name=$(echo "$*" | tr ' ' '_')
  KVEXP="$*" $P -f $T -c $c -t 2 --kv-dtype f32 --kl-base $O/base-$c.bin --json > $O/design-$c-$name.json
}
MODES=("k8" "v8" "k8 v8" "k8 v8 b32" "k8 h" "k8 v8 h p" "k8 v8 b32 h p" "k8 v8 h"
       "k8 fp8" "v8 fp8" "k8 v8 fp8" "k8 v8 b32 fp8" "k8 v8 fp8 h p")
for c in 512 2048; do
  $P -f $T -c $c -t 2 --kv-dtype f32 --save-logits $O/base-$c.bin --json > $O/design-$c-base.json
  for m in "${MODES[@]}"; do run $c $m; done
done
