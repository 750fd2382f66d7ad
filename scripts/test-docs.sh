#!/usr/bin/env bash
# The documentation site: mkdocs build --strict, every example of the docs run, the site in headless Chromium.
# A thin wrapper: the steps live in noxfile.py (session `docs`).
set -euo pipefail
exec bash "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/nox.sh" -s docs "$@"
