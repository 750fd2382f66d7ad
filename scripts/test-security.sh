#!/usr/bin/env bash
# The security suite against the built wheels in a fresh venv, then the fuzz smoke runs (env: FUZZ_SECONDS, RELEASE_DIR, PYTHON, SECURITY_VENV, HYPOTHESIS_PROFILE).
# A thin wrapper: the steps live in noxfile.py (session `security`).
set -euo pipefail
exec bash "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/nox.sh" -s security "$@"
