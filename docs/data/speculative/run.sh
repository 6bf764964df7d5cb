#!/usr/bin/env bash
# Speculative decoding on the default model, on the CPU: decode speed and acceptance of prompt
# lookup and of a self-draft with 8-bit activations, against plain greedy decoding, on a
# copy-heavy task and a free-form one. Interleaved: every round runs every task with every mode,
# one after another, so a change in the machine's load reaches all of them alike. Each
# speculative run's output is compared with the plain run's (greedy: it must be the same text).
#
#   docs/data/speculative/run.sh [ROUNDS] > docs/data/speculative/raw.txt   # from the repository root
#
# KVINFER_BUILD_DIR picks the build (default build/); KVINFER_THREADS the threads (default 2).
set -euo pipefail
rounds=${1:-3}
bin=${KVINFER_BUILD_DIR:-build}/examples/kvinfer-generate
threads=${KVINFER_THREADS:-2}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

copy="Rewrite the following text, fixing its typos. Text: The old lighthouse stood on the edge of the cliff for \
more then a hundred years. Every night its keeper climbed the narow stairs to light the lamp, and every morning \
he wrote the wheather in a small leather book. Ships pased safely through the rocks becuase of him, and the \
villagers brought him bread and fish in return. When he grew old, his daugther took over the work, and she kept \
the light burning through the longest storms the coast had ever seen."
free="Write a short story about a lighthouse keeper and his daughter."

declare -A prompt=([copy]="$copy" [free]="$free")
declare -A flags=([plain]="" [lookup]="--lookup 3" [int8-draft]="--draft-int8-activations")
modes=(plain lookup int8-draft)

echo "# $(date -u +%FT%TZ) $(uname -m) $(nproc) cores; load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# $bin -t $threads --chat -n 256 --temp 0; rounds: $rounds"
for r in $(seq 1 "$rounds"); do
  for task in copy free; do
    for mode in "${modes[@]}"; do
      # shellcheck disable=SC2086
      "$bin" -t "$threads" --chat -p "${prompt[$task]}" -n 256 --temp 0 ${flags[$mode]} \
        > "$tmp/$task.$mode.out" 2> "$tmp/$task.$mode.err"
      same=same
      if [ "$mode" != plain ] && ! cmp -s "$tmp/$task.$mode.out" "$tmp/$task.plain.out"; then same=DIFFERENT; fi
      echo "round $r | $task | $mode | output $same | $(tail -n 1 "$tmp/$task.$mode.err")"
    done
  done
done
