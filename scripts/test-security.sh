#!/usr/bin/env bash
# The security suite against the built wheels in a fresh venv, then the fuzz smoke runs (env: FUZZ_SECONDS, RELEASE_DIR, PYTHON, SECURITY_VENV, HYPOTHESIS_PROFILE).
# A thin wrapper: its prerequisites (scripts/prereqs.sh fuzz servers), then the steps in noxfile.py (session `security`).
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bash "$HERE/prereqs.sh" fuzz servers
exec bash "$HERE/nox.sh" -s security "$@"
