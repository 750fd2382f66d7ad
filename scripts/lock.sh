#!/usr/bin/env bash
# Refresh the hash locks under locks/ (scripts/lock.py says what they hold):
#   bash scripts/lock.sh            # rewrite them (asks PyPI for third-party names only)
#   bash scripts/lock.sh --check    # offline: fail when one is stale
# The tools come from locks/tools.txt, installed with --require-hashes into
# .venvs/release-tools-<digest> (scripts/release.sh uses the same venv).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [ "${1:-}" != "--check" ]; then
    bash "$ROOT/scripts/release-tools.sh" >/dev/null
fi
exec python3 "$ROOT/scripts/lock.py" "$@"
