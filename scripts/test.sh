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
# The other interpreters tested here: the ends of the supported range (3.10,
# and 3.14 where it installs); 3.11 is the dev venv's (unit), 3.13t the
# freethreaded session's (the 3.13 ABI, free-threaded). 3.12 and 3.13 (GIL)
# run in the GitHub workflow's matrix (ci.yml) with every other version; here
# each would add ~9 minutes (a core build from the sdist and the whole suite)
# to a command that keeps within 45 minutes.
# GRELMICRO_INTERPRETERS="3.10 3.12 3.13 3.14" tests them all.
export GRELMICRO_INTERPRETERS="${GRELMICRO_INTERPRETERS:-3.10 3.14}"
exec bash "$HERE/nox.sh" "$@"
