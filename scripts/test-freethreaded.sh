#!/usr/bin/env bash
# The thread tests on a free-threaded CPython 3.13t (built from source when missing) with the GIL disabled.
# A thin wrapper: the steps live in noxfile.py (session `freethreaded`).
set -euo pipefail
exec bash "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/nox.sh" -s freethreaded "$@"
