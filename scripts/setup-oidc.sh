#!/usr/bin/env bash
# Install the OIDC test provider: the npm package oauth2-mock-server, at the
# exact version pinned in tests/oidc/package-lock.json (npm ci, no scripts).
# Node.js is needed; on a machine without it (and as root), Debian's nodejs
# and npm packages are installed. Called by scripts/test.sh.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "=== installing nodejs and npm (Debian packages) for the OIDC provider tests"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null
    else
        echo "node and npm are required for the OIDC provider tests (tests/oidc)" >&2
        exit 1
    fi
fi
echo "=== OIDC test provider: npm ci in tests/oidc (node $(node --version))"
cd "$ROOT/tests/oidc"
npm ci --no-audit --no-fund --ignore-scripts --loglevel=error
