#!/usr/bin/env bash
# The fast checks: ruff, cargo fmt, clippy (both feature sets), actionlint, zizmor; mypy strict and the stub check.
# A thin wrapper: its prerequisites (scripts/prereqs.sh rust actionlint), then the steps in noxfile.py (session `lint types`).
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bash "$HERE/prereqs.sh" rust actionlint
exec bash "$HERE/nox.sh" -s lint types
