#!/usr/bin/env bash
# The whole test suite, from a fresh clone: every session of noxfile.py, fast
# checks first (lint, types, rust, oidc, unit, freethreaded, bench-smoke, docs,
# security, interpreters). Each session's result is in nox's closing summary;
# the run fails when any session fails.
set -euo pipefail
exec bash "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/nox.sh" "$@"
