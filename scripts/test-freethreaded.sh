#!/usr/bin/env bash
# The thread tests on a free-threaded CPython 3.13t (built from source when missing) with the GIL disabled.
# A thin wrapper: its prerequisites (scripts/prereqs.sh freethreaded), then the steps in noxfile.py (session `freethreaded`).
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bash "$HERE/prereqs.sh" freethreaded
exec bash "$HERE/nox.sh" -s freethreaded "$@"
