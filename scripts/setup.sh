#!/usr/bin/env bash
# Set up a development environment from a fresh clone: a virtualenv with the
# tools, the core wheel built from THIS tree and installed (never resolved from
# a package index: a different project owns the names there), then grelmicro
# installed from this tree. Idempotent; sourced by demo.sh and test.sh.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${PYTHON:-python3}"
VENV="${VENV:-$ROOT/.venv}"
DIST="$ROOT/dist"

log() { printf '\n=== %s\n' "$*"; }

if [ ! -x "$VENV/bin/python" ]; then
    log "creating $VENV with $($PYTHON --version)"
    "$PYTHON" -m venv "$VENV"
fi
PY="$VENV/bin/python"

log "installing build and test tools"
"$PY" -m pip install -q --upgrade pip
"$PY" -m pip install -q -r "$ROOT/scripts/requirements-dev.txt"

log "building the grelmicro-core wheel from this tree"
rm -f "$DIST"/grelmicro_core-*-"$("$PY" -c 'import sys; print(f"cp{sys.version_info[0]}{sys.version_info[1]}")')"-*.whl
"$VENV/bin/maturin" build --release -q -m "$ROOT/grelmicro-core/Cargo.toml" -i "$PY" -o "$DIST"

log "installing grelmicro-core from $DIST only (no index)"
"$PY" -m pip install -q --no-index --find-links "$DIST" --force-reinstall --no-deps grelmicro-core

log "installing grelmicro[jwt] from this tree"
"$PY" -m pip install -q --find-links "$DIST" -e "$ROOT[jwt]"
"$PY" - <<'PY'
import grelmicro_core, importlib.metadata as md
assert "+jwt" in md.version("grelmicro-core"), md.version("grelmicro-core")
print("grelmicro-core", md.version("grelmicro-core"), "source", grelmicro_core.SOURCE_HASH)
PY
