#!/usr/bin/env bash
# Build the wheelhouse a service installs grelmicro[jwt] from (no index, no
# network, no Rust at install time): dist/wheelhouse/ with both packages' wheels
# for the interpreters named, their dependencies (locks/, --require-hashes), and a
# PEP 503 simple index. The release tarball (profile-guided, portable) is scripts/release.sh.
#   bash scripts/wheelhouse.sh                      # the dev venv's python only (it says so)
#   bash scripts/wheelhouse.sh .venv/bin/python     # some interpreters
#   bash scripts/wheelhouse.sh --from release --out wheelhouse   # a release's files
# Then: pip install --no-index --find-links dist/wheelhouse "grelmicro[jwt]"
# The steps live in scripts/wheelhouse.py.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$ROOT/scripts/setup.sh" --tools >/dev/null
exec "$ROOT/.venv/bin/python" "$ROOT/scripts/wheelhouse.py" "$@"
