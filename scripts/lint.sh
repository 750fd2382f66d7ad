#!/usr/bin/env bash
# The fast checks: ruff, cargo fmt, clippy (both feature sets), actionlint, zizmor; mypy strict and the stub check.
# A thin wrapper: the steps live in noxfile.py (session `lint types`).
set -euo pipefail
exec bash "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/nox.sh" -s lint types
