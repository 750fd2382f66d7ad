#!/usr/bin/env bash
# Run the project's task runner (noxfile.py) with nox from the dev venv,
# bootstrapping that venv's tools first (scripts/setup.sh --tools):
#   bash scripts/nox.sh                  # every session, fast checks first
#   bash scripts/nox.sh -s unit lint     # some; `-l` lists them
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$ROOT/scripts/setup.sh" --tools
cd "$ROOT"
exec "$ROOT/.venv/bin/nox" --noxfile "$ROOT/noxfile.py" "$@"
