#!/usr/bin/env bash
# The suite on every other supported CPython found here (3.10, 3.12, 3.13, 3.14), each against its own wheels.
# A thin wrapper: its prerequisites (scripts/prereqs.sh interpreters oidc), then the steps in noxfile.py (session `interpreters`).
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bash "$HERE/prereqs.sh" interpreters oidc
exec bash "$HERE/nox.sh" -s interpreters "$@"
