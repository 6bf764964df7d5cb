#!/usr/bin/env bash
# Runs a bundle of tools/gpu_bundle.sh in a minimal Debian (debootstrap --variant=minbase: no
# compiler, no -dev package, no CUDA driver) to show that its executables start there, with the
# C/C++ runtime alone, and get as far as "no CUDA device": every test executable runs and skips
# for want of a device, the benchmarks and kvinfer-generate say there is none, run.sh says there
# is no GPU. The GPU machine has what the chroot lacks (the driver, CUDA's libraries), nothing
# the bundle needs beyond.
#
#   tools/gpu_bundle_chroot.sh BUNDLE [CHROOT]   CHROOT: an existing one (default: made with
#                                                debootstrap in build-chroot/, kept for next time)
# Needs root and debootstrap (apt-get install debootstrap) and, the first time, Debian's mirror.
# Exit status: 0 as described; 1 an executable did not start or said something else (shown);
# 2 wrong arguments or a missing tool.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bundle="$(realpath "${1:-}" 2>/dev/null || true)"
target="${2:-$ROOT/build-chroot}"
[[ -n "$bundle" && -f "$bundle/payload.tar.xz" && -f "$bundle/run.sh" ]] ||
  { echo "gpu_bundle_chroot: '${1:-}' is not a bundle folder (tools/gpu_bundle.sh makes one)" >&2; exit 2; }
[[ $(id -u) -eq 0 ]] || { echo "gpu_bundle_chroot: chroot needs root" >&2; exit 2; }
if [[ ! -x "$target/bin/bash" ]]; then
  command -v debootstrap >/dev/null || { echo "gpu_bundle_chroot: missing debootstrap (apt-get install debootstrap)" >&2; exit 2; }
  debootstrap --variant=minbase bookworm "$target" http://deb.debian.org/debian >"${TMPDIR:-/tmp}/kvinfer-debootstrap.log" 2>&1 ||
    { tail -5 "${TMPDIR:-/tmp}/kvinfer-debootstrap.log" >&2; echo "gpu_bundle_chroot: debootstrap failed (log: ${TMPDIR:-/tmp}/kvinfer-debootstrap.log)" >&2; exit 1; }
fi
dev="$(chroot "$target" dpkg-query -W -f '${Package}\n' | grep -E -- '-dev$|^(gcc|g\+\+|clang|cpp)(-[0-9]+)?$|nvidia|cuda' || true)"
[[ -z "$dev" ]] || { echo "gpu_bundle_chroot: the chroot has $(echo $dev): not a bare system" >&2; exit 1; }

rm -rf "$target/bundle" "$target/tests"
mkdir -p "$target/bundle" "$target/tests"
cp -r "$bundle"/. "$target/bundle/"
cp -r "$ROOT/tests/data" "$target/tests/data"
xz -dc "$bundle/payload.tar.xz" | tar -C "$target/bundle" -xf -
mounted=0
if ! mountpoint -q "$target/proc"; then mount -t proc proc "$target/proc" && mounted=1; fi
trap '[[ $mounted -eq 1 ]] && umount "$target/proc"' EXIT

bad=0
# expect NAME STATUS REGEX COMMAND...: the command, in the chroot, exits STATUS and prints REGEX.
expect() {
  local name="$1" status="$2" regex="$3" out rc
  shift 3
  out="$(chroot "$target" /usr/bin/env -i PATH=/usr/bin:/bin KVINFER_TEST_DATA=/tests/data "$@" 2>&1)" && rc=0 || rc=$?
  if [[ $rc -eq $status ]] && grep -qE "$regex" <<<"$out"; then
    echo "ok      $name: $(grep -E -m1 "$regex" <<<"$out")"
  else
    echo "FAILED  $name: exit $rc (want $status), output:" >&2
    tail -5 <<<"$out" >&2
    bad=1
  fi
}
for t in $(sed -n 's/^tests=//p' "$bundle/MANIFEST.txt"); do
  expect "$t" 0 '^\[  (SKIPPED|PASSED)  ?\]' "/bundle/bin/$t"
done
expect kvinfer-generate 1 'no CUDA device is usable here' /bundle/bin/kvinfer-generate \
  -m /tests/data/models/llama_gqa4 --device cuda --ids 0,4,6 -n 2
expect kvinfer-bench 1 'no CUDA device is usable here' /bundle/bin/kvinfer-bench -s gpt2 --device cuda -n 2
expect kvinfer-bench-cuda-attention 0 'no CUDA device' /bundle/bin/kvinfer-bench-cuda-attention
expect kvinfer-bench-cuda-decode 0 'no CUDA device' /bundle/bin/kvinfer-bench-cuda-decode
# A minimal Debian has neither xz nor python3: run.sh takes the executables unpacked above (bin/).
expect run.sh 2 'no NVIDIA GPU here' /bin/bash /bundle/run.sh
exit "$bad"
