#!/usr/bin/env bash
# Install grelmicro[jwt] from a wheelhouse (scripts/wheelhouse.sh) into fresh
# venvs, the way a service does: once with --no-index --find-links DIR, once
# with --index-url file://DIR/simple (its PEP 503 index). Neither can reach a
# network index, and PATH holds no Rust toolchain. Each venv then verifies a
# token through grelmicro.jwt and refuses a tampered one. Then a Flask service's
# install: requirements-<tag>-flask.txt with --require-hashes into a fresh venv
# holds no FastAPI, Starlette, Redis or OpenTelemetry, and its guard answers.
#   bash scripts/smoke-wheelhouse.sh [DIR] [PYTHON]      (default dist/wheelhouse, python3)
set -euo pipefail
DIR="$(cd "${1:-dist/wheelhouse}" && pwd)"
PYTHON="${2:-python3}"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
cat >"$WORK/check.py" <<'PY'
import base64, hashlib, hmac, json, sys, time

import grelmicro_core
from grelmicro.jwt import JWTVerifier, Key, TokenRejectedError

def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

secret = b"wheelhouse-smoke-secret-0123456789"
claims = {"sub": "smoke", "exp": int(time.time()) + 60}
signing_input = b64(b'{"alg":"HS256","typ":"JWT"}') + "." + b64(json.dumps(claims).encode())
token = signing_input + "." + b64(hmac.new(secret, signing_input.encode(), hashlib.sha256).digest())
verifier = JWTVerifier([Key.secret(secret, "HS256")])
assert verifier.verify(token).subject == "smoke"
try:
    verifier.verify(token[:-2] + ("AA" if not token.endswith("AA") else "BB"))
except TokenRejectedError:
    pass
else:
    raise SystemExit("a tampered token verified")
if not grelmicro_core.__file__.startswith(sys.prefix):
    raise SystemExit(f"grelmicro_core imported from {grelmicro_core.__file__}, outside the venv")
print(f"{sys.argv[1]}: grelmicro[jwt] from the wheelhouse verified a token ({sys.version.split()[0]})")
PY
for how in find-links index-url; do
    venv="$WORK/$how"
    "$PYTHON" -m venv "$venv"
    if [ "$how" = find-links ]; then
        source=(--no-index --find-links "$DIR")
    else
        source=(--index-url "file://$DIR/simple")
    fi
    # No Rust, and no index, find-links or proxy settings from the caller's
    # environment or the machine's pip configuration.
    # check_pins: "${source[@]}" is --no-index --find-links, or the wheelhouse's own file:// index
    env -i PATH=/usr/bin:/bin HOME="$WORK" PIP_CONFIG_FILE=/dev/null "$venv/bin/python" -m pip install -q \
        --disable-pip-version-check "${source[@]}" "grelmicro[jwt]"
    (cd "$WORK" && env -i PATH=/usr/bin:/bin "$venv/bin/python" check.py "$how")
done

bash "$(dirname "${BASH_SOURCE[0]}")/smoke-flask-set.sh" "$DIR" "$PYTHON"
