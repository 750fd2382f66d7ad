#!/usr/bin/env bash
# Install the npm packages of tests/oidc at the exact versions pinned in
# tests/oidc/package-lock.json (npm ci, no scripts): oauth2-mock-server (the
# token provider of the discovery tests), oidc-provider (a provider with a
# login page, for the Swagger UI login in a browser) and swagger-ui-dist
# (the files of Swagger UI, which FastAPI's /docs takes from a CDN).
# Node.js and npm are needed: `bash scripts/prereqs.sh oidc` installs them
# first, then runs this (scripts/test.sh runs every step of prereqs.sh).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    echo "node and npm are required for the OIDC provider tests: bash scripts/prereqs.sh oidc" >&2
    exit 1
fi
echo "=== OIDC test providers: npm ci in tests/oidc (node $(node --version))"
cd "$ROOT/tests/oidc"
npm ci --no-audit --no-fund --ignore-scripts --loglevel=error
