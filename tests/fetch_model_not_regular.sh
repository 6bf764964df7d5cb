#!/usr/bin/env bash
# tools/fetch_model.sh and tools/fetch_gemma3.sh never put a model in place of something that is not
# a regular file: a FIFO, a directory or a link to nothing where the model goes is refused (exit 1,
# one line naming it) before anything is downloaded, and is left as it was.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT

fail() { echo "FAIL: $*"; exit 1; }
# A python3 that refuses at once: the check comes before any download, and a script that missed it
# must not fetch hundreds of MB here.
mkdir "$dir/bin"
printf '#!/bin/sh\necho "python3 stand-in: no download in this test" >&2\nexit 3\n' >"$dir/bin/python3"
chmod +x "$dir/bin/python3"
for script in fetch_model.sh fetch_gemma3.sh; do
  case "$script" in
    fetch_model.sh) file="SmolLM2-135M-Instruct.Q4_1.gguf" ;;
    fetch_gemma3.sh) file="gemma-3-270m-q4_k_m.gguf" ;;
  esac
  grep -q "$file" "$ROOT/tools/$script" || fail "$script does not name $file (update this test)"
  for kind in fifo directory dangling; do
    d="$dir/$script.$kind"
    mkdir -p "$d"
    case "$kind" in
      fifo) mkfifo "$d/$file" ;;
      directory) mkdir "$d/$file" ;;
      dangling) ln -s "$d/nothing" "$d/$file" ;;
    esac
    status=0
    PATH="$dir/bin:$PATH" KVINFER_MODELS_DIR="$d" timeout 60 "$ROOT/tools/$script" >"$d.out" 2>&1 || status=$?
    cat "$d.out"
    [[ $status -eq 1 ]] || fail "$script, $kind: exit status $status, expected 1"
    grep -q "$d/$file: exists and is not a regular file" "$d.out" || fail "$script, $kind: no message naming it"
    case "$kind" in
      fifo) [[ -p "$d/$file" ]] || fail "$script: the FIFO was replaced" ;;
      directory) [[ -d "$d/$file" && -z "$(ls -A "$d/$file")" ]] || fail "$script: the directory was changed" ;;
      dangling) [[ -L "$d/$file" && ! -e "$d/$file" ]] || fail "$script: the link was replaced" ;;
    esac
  done
done
echo "all passed"
