#!/usr/bin/env bash
# The whole test suite, from a fresh clone: set-up, linters and type checks,
# Rust tests, Python tests, the security suite against the built wheel in a
# fresh virtualenv, the free-threaded run, and the benchmark smoke check.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
log() { printf '\n=== %s\n' "$*"; }

bash scripts/setup.sh
PY="$ROOT/.venv/bin/python"

log "OIDC test provider (npm oauth2-mock-server, pinned) for tests/jwt/test_jwks_oidc.py"
bash scripts/setup-oidc.sh

log "lint and type checks (ruff, mypy, stubtest, cargo fmt, clippy, workflows)"
bash scripts/lint.sh

log "Rust tests (no Python), Wycheproof vectors included"
(cd grelmicro-core && cargo test -q --no-default-features)

log "free-threaded CPython"
bash scripts/test-freethreaded.sh

log "security suite against the built wheel"
bash scripts/test-security.sh

log "benchmark smoke check (correctness of every lane, no timing assertions)"
"$PY" bench/run.py --smoke

log "documentation site (mkdocs build --strict, examples run, headless Chromium check)"
bash scripts/test-docs.sh

log "every other interpreter this machine has, each against the wheels built for it"
bash scripts/test-interpreters.sh

log "Python tests"
# The free-threaded interpreter set up above also serves tests/core/test_freethreaded.py.
if [ -x "$ROOT/.ft-venv/bin/python" ]; then
    export GRELMICRO_FT_PYTHON="$ROOT/.ft-venv/bin/python"
fi
# The docs snippets already ran in scripts/test-docs.sh above.
"$PY" -m pytest -q --ignore=tests/test_docs_snippets.py
