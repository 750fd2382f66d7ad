#!/usr/bin/env bash
# The documentation site: mkdocs build --strict, every example of the docs run, the site in headless Chromium.
# A thin wrapper: its prerequisites (scripts/prereqs.sh docs), then the steps in noxfile.py (session `docs`).
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bash "$HERE/prereqs.sh" docs
exec bash "$HERE/nox.sh" -s docs "$@"
