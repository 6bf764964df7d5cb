#!/usr/bin/env bash
# Checks a bundle of tools/gpu_bundle.sh against what the lent GPU machine offers: the folder is
# under 60 MiB, and every executable in it needs only the C/C++ runtime (libc, libm, libdl,
# libpthread, librt, libstdc++, libgcc_s, the dynamic loader), the driver (libcuda) and CUDA's
# libraries (libcudart, libcublas, libcublasLt), with no run path into this machine; each NEEDED
# library resolves here (ldd); and the checkout it sits in leaves it room under the device tool's
# 64 MiB (at most 56 MiB of tracked and untracked-not-ignored files). Prints each executable's list.
#
#   tools/gpu_bundle_check.sh BUNDLE [BIN_DIR]   BIN_DIR: the executables (default: unpacked from
#                                                 BUNDLE/payload.tar.xz into a temporary folder)
# Exit status: 0 the bundle keeps the rules; 1 it breaks one (each named); 2 wrong arguments.
set -euo pipefail
bundle="${1:-}"
bins="${2:-}"
[[ -d "$bundle" && -f "$bundle/run.sh" && -f "$bundle/payload.tar.xz" ]] ||
  { echo "gpu_bundle_check: '$bundle' is not a bundle folder (run.sh, payload.tar.xz)" >&2; exit 2; }
if [[ -z "$bins" ]]; then
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' EXIT
  xz -dc "$bundle/payload.tar.xz" | tar -C "$tmp" -xf -
  bins="$tmp/bin"
fi
[[ -d "$bins" ]] || { echo "gpu_bundle_check: no executables folder $bins" >&2; exit 2; }

# The lent image's C/C++ runtime, its driver and CUDA's libraries: nothing else may be NEEDED.
allowed='^(libc\.so\.6|libm\.so\.6|libdl\.so\.2|libpthread\.so\.0|librt\.so\.1|libstdc\+\+\.so\.6|libgcc_s\.so\.1|ld-linux-x86-64\.so\.2|libcuda\.so\.1|libcudart\.so\.[0-9]+|libcublas(Lt)?\.so\.[0-9]+)$'
limit=$((60 << 20))
bad=0
size="$(du -sb "$bundle" | cut -f1)"
if [[ $size -ge $limit ]]; then
  echo "gpu_bundle_check: $bundle is $((size >> 20)) MiB: over the 60 MiB a device run may carry" >&2
  bad=1
fi
# The device tool sends the checkout (tracked and untracked-not-ignored files) with the carried
# bundle, 64 MiB in all: the checkout must leave the sm_90 bundle (6.6 MiB) room, 8 MiB.
root="$(git -C "$bundle/.." rev-parse --show-toplevel 2>/dev/null || true)"
if [[ -n "$root" ]]; then
  checkout="$(cd "$root" && git ls-files -z --cached --others --exclude-standard | xargs -0 -r stat -c %s -- 2>/dev/null |
    awk '{ s += $1 } END { print s + 0 }')"
  room=$((64 << 20))
  if [[ $checkout -gt $((room - (8 << 20))) ]]; then
    echo "gpu_bundle_check: the checkout $root is $((checkout >> 20)) MiB: over the 56 MiB that leave the bundle room under the device tool's 64" >&2
    bad=1
  elif ! grep -q '^kind=sim' "$bundle/MANIFEST.txt" 2>/dev/null && [[ $((checkout + size)) -ge $room ]]; then
    echo "gpu_bundle_check: the checkout ($((checkout >> 20)) MiB) and $bundle ($((size >> 20)) MiB) are over the device tool's 64 MiB" >&2
    bad=1
  fi
  echo "checkout to send with it: $((checkout >> 20)) MiB (the device tool takes 64 MiB in all)"
fi
count=0
for f in "$bins"/*; do
  [[ -f "$f" ]] || continue
  count=$((count + 1))
  name="$(basename "$f")"
  needed="$(readelf -d "$f" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')"
  echo "$name: $(echo $needed)"
  for lib in $needed; do
    [[ "$lib" =~ $allowed ]] || { echo "gpu_bundle_check: $name needs $lib, which the GPU machine does not have" >&2; bad=1; }
  done
  if readelf -d "$f" | grep -qE '\((RPATH|RUNPATH)\)'; then
    echo "gpu_bundle_check: $name has a run path ($(readelf -d "$f" | sed -n 's/.*PATH).*\[\(.*\)\]/\1/p')): none may point into this machine" >&2
    bad=1
  fi
  if ldd "$f" 2>&1 | grep -q 'not found'; then
    echo "gpu_bundle_check: $name: $(ldd "$f" 2>&1 | grep 'not found' | tr -s ' \t' ' ')" >&2
    bad=1
  fi
done
[[ $count -gt 0 ]] || { echo "gpu_bundle_check: no executable in $bins" >&2; exit 1; }
[[ $bad -eq 0 ]] && echo "gpu_bundle_check: $bundle: $count executables, $((size >> 20)) MiB, libraries as the GPU machine has them"
exit "$bad"
