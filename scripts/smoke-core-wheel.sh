#!/usr/bin/env bash
# Install the grelmicro-core wheel built for an interpreter into a fresh venv
# (from DIR only, never an index) and verify a token with it; a wheel carrying
# the test suite's hooks (cargo feature test-hooks) fails. REQUIRE_PGO=trained
# also fails a wheel that is not profile-guided.
#   bash scripts/smoke-core-wheel.sh "python3.13t" dist     ("py -3.13" on Windows)
set -euo pipefail
read -r -a PY <<<"${1:?usage: smoke-core-wheel.sh PYTHON-COMMAND DIR}"
DIR="${2:-dist}"
VENV="$(mktemp -d)/venv"
"${PY[@]}" -m venv "$VENV"
if [ -x "$VENV/bin/python" ]; then VPY="$VENV/bin/python"; else VPY="$VENV/Scripts/python.exe"; fi
"$VPY" -m pip install -q --no-index --no-deps --find-links "$DIR" grelmicro-core
"$VPY" "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/smoke_core.py"
