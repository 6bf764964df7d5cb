#!/usr/bin/env bash
# Regenerate tests/data/beam/references.json: HF transformers' beam search on the committed
# fixtures (tools/make_beam_fixtures.py), in the same venv and with the same pinned versions as
# tools/make_fixtures.sh (whose pins this reads, so that there is one list of them).
# $KVINFER_FIXTURE_VENV and $KVINFER_FIXTURE_PYTHON work as there. Output is deterministic.
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${KVINFER_FIXTURE_VENV:-$REPO_ROOT/.venv-fixtures}"
PY="${KVINFER_FIXTURE_PYTHON:-python3}"
eval "$(grep -E '^(TORCH|TRANSFORMERS|SAFETENSORS)_VERSION=[0-9.]+$' "$REPO_ROOT/tools/make_fixtures.sh")"

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
exec "$VENV/bin/python" tools/make_beam_fixtures.py "$@"
