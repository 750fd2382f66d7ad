#!/usr/bin/env bash
# The suite on every other supported CPython found here (3.10, 3.12, 3.13, 3.14), each against its own wheels.
# A thin wrapper: the steps live in noxfile.py (session `interpreters`).
set -euo pipefail
exec bash "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/nox.sh" -s interpreters "$@"
