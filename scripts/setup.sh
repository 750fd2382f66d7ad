#!/usr/bin/env bash
# Set up a development environment from a fresh clone: a virtualenv (.venv)
# with the tools of scripts/requirements-dev.txt (nox included; installed from
# locks/dev.txt with --require-hashes, pip itself included), the core wheel
# built from THIS tree for it and installed (never resolved from a package
# index: a different project owns the names there), then grelmicro installed
# from this tree (editable). Idempotent and quick when nothing changed (the
# tools and the wheel are stamped). Run by demo.sh and by the noxfile's
# sessions; `setup.sh --tools` stops after the tools (scripts/nox.sh).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${PYTHON:-python3}"
VENV="${VENV:-$ROOT/.venv}"
REQS="$ROOT/locks/dev.txt"

log() { printf '\n=== %s\n' "$*"; }

if [ ! -x "$VENV/bin/python" ]; then
    log "creating $VENV with $($PYTHON --version)"
    "$PYTHON" -m venv "$VENV"
fi
PY="$VENV/bin/python"

STAMP="$VENV/.requirements-dev.sha256"
want="$(sha256sum "$REQS" | cut -d' ' -f1)"
if [ "$(cat "$STAMP" 2>/dev/null)" != "$want" ]; then
    log "installing build and test tools"
    "$PY" -m pip install -q --disable-pip-version-check --require-hashes -r "$REQS"
    echo "$want" >"$STAMP"
fi
[ "${1:-}" = "--tools" ] && exit 0

log "the grelmicro-core wheel for this venv (with the test hooks), built from this tree, installed with --no-index"
WHEEL="$("$PY" "$ROOT/scripts/corewheel.py" "$PY" --install --test-hooks)"

log "installing grelmicro[jwt] from this tree"
# Offline and without build isolation: its dependencies and hatchling came from the lock.
"$PY" -m pip install -q --no-index --no-build-isolation --find-links "$(dirname "$WHEEL")" -e "$ROOT[jwt]"
