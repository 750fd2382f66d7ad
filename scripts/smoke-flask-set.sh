#!/usr/bin/env bash
# A Flask service's install from a release or a wheelhouse (DIR, with its
# requirements-<tag>-flask.txt): into a fresh venv, offline, every file by
# hash, as the docs say. Fails if FastAPI, Starlette, Redis, OpenTelemetry or
# Django came in, or if grelmicro.jwt.flask does not answer a request without a
# token with its 401 challenge.
#   bash scripts/smoke-flask-set.sh DIR [PYTHON]
# Run by smoke-wheelhouse.sh (the test command) and smoke-release.sh.
set -euo pipefail
DIR="$(cd "${1:?usage: smoke-flask-set.sh DIR [PYTHON]}" && pwd)"
PYTHON="${2:-python3}"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
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
