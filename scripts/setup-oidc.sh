#!/usr/bin/env bash
# Install the OIDC test provider: the npm package oauth2-mock-server, at the
# exact version pinned in tests/oidc/package-lock.json (npm ci, no scripts).
# Node.js and npm are needed: `bash scripts/prereqs.sh oidc` installs them
# first, then runs this (scripts/test.sh runs every step of prereqs.sh).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    echo "node and npm are required for the OIDC provider tests: bash scripts/prereqs.sh oidc" >&2
    exit 1
fi
echo "=== OIDC test provider: npm ci in tests/oidc (node $(node --version))"
cd "$ROOT/tests/oidc"
npm ci --no-audit --no-fund --ignore-scripts --loglevel=error
