#!/usr/bin/env bash
# Regenerate the HF-transformers test fixtures under tests/data/models/.
#
# Creates (or reuses) a Python venv -- $KVINFER_FIXTURE_VENV, default <repo>/.venv-fixtures
# (git-ignored) -- installs the pinned CPU-side toolchain into it and runs
# tools/make_fixtures.py. Extra arguments are passed through (e.g. --only llama_mha).
# Output is deterministic: rerunning reproduces byte-identical files.
#
# Set KVINFER_FIXTURE_PYTHON to choose the interpreter used to create the venv (default python3).
# Set PIP_INDEX_URL / PIP_EXTRA_INDEX_URL as usual, e.g. a CPU-only torch wheel index.
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${KVINFER_FIXTURE_VENV:-$REPO_ROOT/.venv-fixtures}"
PY="${KVINFER_FIXTURE_PYTHON:-python3}"

TORCH_VERSION=2.15.0
TRANSFORMERS_VERSION=5.24.0
SAFETENSORS_VERSION=0.8.0

if [[ ! -x "$VENV/bin/python" ]]; then
    echo "creating venv at $VENV"
    "$PY" -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install --upgrade pip >/dev/null
"$VENV/bin/python" -m pip install \
    "torch==$TORCH_VERSION" \
    "transformers==$TRANSFORMERS_VERSION" \
    "safetensors==$SAFETENSORS_VERSION"

cd "$REPO_ROOT"
exec "$VENV/bin/python" tools/make_fixtures.py "$@"
