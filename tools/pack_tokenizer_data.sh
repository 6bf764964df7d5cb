#!/usr/bin/env bash
# Packs the large real tokenizer files (hf/*/tokenizer.json, gguf-vocab/*.gguf) of an unpacked
# tokenizers folder into tests/data/tokenizers/packed.tar.xz (cmake/test_data.cmake unpacks it into
# every build tree). The same files give the same bytes: names sorted, owner and times fixed.
#   tools/pack_tokenizer_data.sh build/test-data/tokenizers     after adding or changing a file there
# Exit status: 0 packed; 2 a wrong argument (named).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
src="${1:-}"
[[ -n "$src" && -d "$src/hf" && -d "$src/gguf-vocab" ]] ||
  { echo "pack_tokenizer_data: '$src' is not a tokenizers folder (with hf/ and gguf-vocab/)" >&2; exit 2; }
out="$ROOT/tests/data/tokenizers/packed.tar.xz"
cd "$src"
mapfile -t files < <(ls hf/*/tokenizer.json gguf-vocab/*.gguf | LC_ALL=C sort)
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime='2026-01-01 00:00Z' --format=gnu -cf - "${files[@]}" |
  xz -9e -T1 >"$out.tmp"
mv "$out.tmp" "$out"
echo "$out: ${#files[@]} files, $(stat -c %s "$out") bytes"
