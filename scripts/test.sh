#!/usr/bin/env bash
# The whole test suite, from a fresh clone: the prerequisites of the sessions
# (scripts/prereqs.sh: the one step that installs system packages, Rust
# components, npm packages, a free-threaded CPython), then every session of
# noxfile.py, fast checks first (lint, types, rust, unit, oidc, freethreaded,
# bench-smoke, docs, wheelhouse, dockerfile, security, interpreters). Each session's result is in
# nox's closing summary; the run fails when any session fails.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bash "$HERE/prereqs.sh"
exec bash "$HERE/nox.sh" "$@"
