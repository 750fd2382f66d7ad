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

# The Flask set, as a Flask service installs it from a release: every file by hash.
TAG="$("$PYTHON" -c 'import sys, sysconfig; print(f"cp{sys.version_info[0]}{sys.version_info[1]}" + ("t" if sysconfig.get_config_var("Py_GIL_DISABLED") else ""))')"
venv="$WORK/flask"
"$PYTHON" -m venv "$venv"
env -i PATH=/usr/bin:/bin HOME="$WORK" PIP_CONFIG_FILE=/dev/null "$venv/bin/python" -m pip install -q \
    --disable-pip-version-check --require-hashes -r "$DIR/requirements-$TAG-flask.txt"
installed="$("$venv/bin/python" -m pip list --disable-pip-version-check --format=freeze)"
for foreign in fastapi starlette redis opentelemetry-api opentelemetry-sdk django; do
    if grep -qi "^$foreign==" <<<"$installed"; then
        echo "requirements-$TAG-flask.txt installed $foreign" >&2
        exit 1
    fi
done
cat >"$WORK/flask_check.py" <<'PY'
import sys

from flask import Flask

from grelmicro.jwt import JWTVerifier, Key
from grelmicro.jwt.flask import JWTAuth

auth = JWTAuth(JWTVerifier([Key.secret(b"flask-set-smoke-secret-0123456789", "HS256")]), realm="orders")
app = Flask(__name__)
auth.init_app(app)


@app.get("/orders")
@auth.require(scopes=["orders:read"])
def orders():
    return {}


answer = app.test_client().get("/orders")
assert answer.status_code == 401, answer.status_code
assert answer.headers["WWW-Authenticate"] == 'Bearer realm="orders"', answer.headers
print(f"{sys.argv[1]}: grelmicro[jwt,flask] alone ({sys.argv[2]} distributions), the guard answered 401")
PY
count="$(wc -l <<<"$installed")"
(cd "$WORK" && env -i PATH=/usr/bin:/bin "$venv/bin/python" flask_check.py "requirements-$TAG-flask.txt" "$count")
