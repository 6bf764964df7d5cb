#!/usr/bin/env bash
# Builds the libFuzzer targets of fuzz/ (clang, ASan + UBSan, leak checking on) into build-asan/
# (the build of tools/sanitize.sh) and runs each for SECONDS (default 60) from its seed corpus (fuzz/CMakeLists.txt lists the
# seeds). Exits non-zero if any target crashed, leaked, hit undefined behaviour, timed out or ran
# out of memory; the input that did it is in build-asan/artifacts/<target>/: minimise it, add it
# to tests/data/fuzz/<target>/ (ctest replays those) and fix the bug.
#   tools/fuzz.sh [SECONDS] [TARGET...]      JOBS=n runs n targets at once (default 1)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
B="${KVINFER_FUZZ_BUILD_DIR:-$ROOT/build-asan}"
SECONDS_EACH="${1:-60}"
shift || true
JOBS="${JOBS:-1}"

source "$ROOT/tools/sanitize_config.sh"
configure_asan "$ROOT" "$B"
targets=("$@")
if [[ ${#targets[@]} -eq 0 ]]; then
  read -ra targets <<<"$(cd "$B/fuzz" && ls ./*.seeds | sed 's|./||; s|\.seeds$||' | tr '\n' ' ')"
fi
cmake --build "$B" -j "$(nproc)" --target "${targets[@]}"

export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
run() {  # target
  local t="$1" corpus="$B/corpus/$1" artifacts="$B/artifacts/$1/"
  mkdir -p "$corpus" "$artifacts"
  # The seeds go into the corpus directory, which also collects what the fuzzer finds.
  while IFS= read -r seed; do [[ -n "$seed" ]] && cp -n "$seed" "$corpus/" 2>/dev/null || true; done <"$B/fuzz/$t.seeds"
  local log="$B/fuzz-$t.log"
  if "$B/fuzz/$t" -max_total_time="$SECONDS_EACH" -timeout=10 -rss_limit_mb=2560 -max_len=1048576 \
      -print_final_stats=1 -artifact_prefix="$artifacts" "$corpus" >"$log" 2>&1; then
    printf '%-24s ok   %s\n' "$t" "$(grep -E '^stat::number_of_executed_units' "$log" | awk '{print $2}') runs in ${SECONDS_EACH} s, corpus $(ls "$corpus" | wc -l) inputs"
  else
    printf '%-24s FAIL see %s; input in %s\n' "$t" "$log" "$artifacts"
    grep -E 'ERROR|SUMMARY|runtime error' "$log" | head -5
    return 1
  fi
}
export -f run
export B SECONDS_EACH
printf '%s\n' "${targets[@]}" | xargs -P "$JOBS" -I{} bash -c 'run {}'
