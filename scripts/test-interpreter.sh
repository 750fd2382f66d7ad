#!/usr/bin/env bash
# The suite on ONE interpreter, against the wheels built for it from the sdists:
#   bash scripts/test-interpreter.sh /path/to/python [pytest args...]
# A thin wrapper: its prerequisites (scripts/prereqs.sh oidc), then the steps in noxfile.py (session `interpreter`).
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bash "$HERE/prereqs.sh" oidc
exec bash "$HERE/nox.sh" -s interpreter -- "$@"
