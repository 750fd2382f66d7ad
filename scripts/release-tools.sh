#!/usr/bin/env bash
# The release's own tools (maturin, zig, auditwheel, cyclonedx-bom, uv, build)
# in .venvs/release-tools, installed from locks/tools.txt with --require-hashes
# (every file checked against its SHA-256). Stamped: quick when unchanged.
# Prints the venv's bin directory.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${RELEASE_TOOLS_VENV:-$ROOT/.venvs/release-tools}"
LOCK="$ROOT/locks/tools.txt"
PYTHON="${PYTHON:-python3}"
STAMP="$VENV/.tools.sha256"
want="$(sha256sum "$LOCK" | cut -d' ' -f1)"
if [ "$(cat "$STAMP" 2>/dev/null)" != "$want" ]; then
    rm -rf "$VENV"
    "$PYTHON" -m venv "$VENV"
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check --require-hashes \
        --only-binary=:all: -r "$LOCK" >&2
    echo "$want" >"$STAMP"
fi
echo "$VENV/bin"
