#!/usr/bin/env bash
# Install a release tarball (scripts/release.sh) the way a team does, and try it:
#   bash scripts/smoke-release.sh dist/release/grelmicro-VERSION-linux-ARCH.tar.gz [PYTHON]
# 1. its checksum (TARBALL.sha256) and then SHA256SUMS inside it are checked;
# 2. a fresh venv installs grelmicro[jwt,fastapi,otel,testing] from it with
#    --require-hashes and no index, with PATH=/usr/bin:/bin (no Rust) and no
#    pip configuration from the caller; the install is timed (limit 30 s);
# 3. the installed core must report the profile-guided build, verify a token,
#    refuse a tampered one, grelmicro.jwt.testing must mint an RS256 token
#    that the verifier accepts, and the README's FastAPI service must answer
#    a TestIssuer's tokens as its tests expect (401, 200, 403);
# 4. requirements-<tag>-flask.txt installs Flask's set only (smoke-flask-set.sh);
# 5. one byte changed in one wheel must make the same install fail.
set -euo pipefail
TARBALL="$(cd "$(dirname "${1:?usage: smoke-release.sh TARBALL [PYTHON]}")" && pwd)/$(basename "$1")"
PYTHON="${2:-python3}"
LIMIT="${INSTALL_LIMIT_SECONDS:-30}"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
say() { printf '[smoke-release] %s\n' "$*" >&2; }

(cd "$(dirname "$TARBALL")" && sha256sum -c "$(basename "$TARBALL").sha256") >&2
tar -xzf "$TARBALL" -C "$WORK"
DIR="$(find "$WORK" -mindepth 1 -maxdepth 1 -type d)"
(cd "$DIR" && sha256sum --quiet -c SHA256SUMS)
say "checksums: the tarball's and SHA256SUMS (every file) agree"
TAG="$("$PYTHON" -c 'import sys, sysconfig; print(f"cp{sys.version_info[0]}{sys.version_info[1]}" + ("t" if sysconfig.get_config_var("Py_GIL_DISABLED") else ""))')"
REQS="$DIR/requirements-$TAG.txt"
[ -f "$REQS" ] || { say "no requirements-$TAG.txt in the tarball"; exit 1; }

install() {  # VENV: a fresh venv, the documented command, no Rust, no index, no pip config
    "$PYTHON" -m venv "$1"
    env -i PATH=/usr/bin:/bin HOME="$WORK" PIP_CONFIG_FILE=/dev/null \
        "$1/bin/python" -m pip install -q --disable-pip-version-check --no-index --require-hashes -r "$REQS"
}

start=$(date +%s.%N)
install "$WORK/venv"
seconds=$(echo "$(date +%s.%N) - $start" | bc)
say "installed from $(basename "$TARBALL") in ${seconds} s (venv creation included)"
if [ "$(echo "$seconds > $LIMIT" | bc)" = 1 ]; then
    say "FAIL: the install took more than ${LIMIT} s"
    exit 1
fi
cat >"$WORK/check.py" <<'PY'
import importlib.util, sys

import grelmicro_core
from grelmicro.jwt import JWTVerifier, Key, TokenRejectedError

assert grelmicro_core.__file__.startswith(sys.prefix), grelmicro_core.__file__
if grelmicro_core.PGO != "trained":
    raise SystemExit(f"the installed core is not profile-guided: PGO={grelmicro_core.PGO!r}")
secret = b"release-smoke-secret-0123456789abcdef"
verifier = JWTVerifier([Key.secret(secret, "HS256")])
if importlib.util.find_spec("cryptography") is not None:
    from grelmicro.jwt.testing import TestIssuer

    issuer = TestIssuer("RS256")
    token = issuer.mint(sub="smoke")
    assert issuer.verifier().verify(token).subject == "smoke"
    what = "grelmicro.jwt.testing minted and verified an RS256 token"
else:
    what = "no cryptography on this interpreter: testing's asymmetric keys skipped"
import base64, hashlib, hmac, json, time
b64 = lambda b: base64.urlsafe_b64encode(b).rstrip(b"=").decode()
signing = b64(b'{"alg":"HS256","typ":"JWT"}') + "." + b64(json.dumps({"sub": "s", "exp": int(time.time()) + 60}).encode())
token = signing + "." + b64(hmac.new(secret, signing.encode(), hashlib.sha256).digest())
assert verifier.verify(token).subject == "s"
try:
    verifier.verify(token[:-2] + ("AA" if not token.endswith("AA") else "BB"))
except TokenRejectedError:
    pass
else:
    raise SystemExit("a tampered token verified")

# The README's service, tested the way docs/testing.md says: a TestIssuer's
# verifier, real tokens, through httpx's ASGI transport (all from the release).
import asyncio
from typing import Annotated

import httpx
from fastapi import Depends, FastAPI, Security

from grelmicro.jwt import Claims
from grelmicro.jwt.fastapi import JWTBearer
from grelmicro.jwt.testing import TestIssuer

test_issuer = TestIssuer("HS256" if importlib.util.find_spec("cryptography") is None else "ES256")
auth = JWTBearer(test_issuer.verifier(), realm="orders")
app = FastAPI()
auth.install(app)


@app.get("/orders")
def orders(claims: Annotated[Claims, Security(auth, scopes=["orders:read"])]) -> dict:
    return {"owner": claims.subject, "orders": []}


@app.get("/me")
def me(claims: Annotated[Claims, Depends(auth)]) -> dict:
    return {"sub": claims.subject}


async def service() -> None:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        assert (await client.get("/me")).status_code == 401
        reader = test_issuer.bearer(scope="orders:read")
        assert (await client.get("/orders", headers=reader)).json()["owner"] == "test-user"
        other = test_issuer.bearer(scope="orders:write")
        assert (await client.get("/orders", headers=other)).status_code == 403


asyncio.run(service())
print(f"grelmicro_core.PGO={grelmicro_core.PGO}; {what}; a tampered token refused; "
      "the README's service answered 401/200/403 to a TestIssuer's tokens")
PY
(cd "$WORK" && env -i PATH=/usr/bin:/bin "$WORK/venv/bin/python" check.py) >&2

# A Flask service's lock: grelmicro[jwt,flask] only, from the same files.
bash "$(dirname "${BASH_SOURCE[0]}")/smoke-flask-set.sh" "$DIR" "$PYTHON" >&2

# One changed byte in one wheel (the core of this interpreter): the install must fail.
core="$(ls "$DIR"/grelmicro_core-*-"$TAG"-*manylinux*.whl | head -n 1)"
printf '\x00' | dd of="$core" bs=1 seek=100 count=1 conv=notrunc status=none
if install "$WORK/tampered" 2>"$WORK/tampered.log"; then
    say "FAIL: a wheel with a changed byte installed"
    exit 1
fi
grep -q "DO NOT MATCH" "$WORK/tampered.log" || { cat "$WORK/tampered.log" >&2; say "FAIL: not refused for its hash"; exit 1; }
say "a changed byte in $(basename "$core") fails the install (hash mismatch): OK"
