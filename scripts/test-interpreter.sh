#!/usr/bin/env bash
# The suite on ONE interpreter, against the wheels built for it from the sdists:
#   bash scripts/test-interpreter.sh /path/to/python [pytest args...]
# A thin wrapper: the steps live in noxfile.py (session `interpreter`).
set -euo pipefail
exec bash "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/nox.sh" -s interpreter -- "$@"
