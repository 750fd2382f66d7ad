#!/usr/bin/env bash
# Install the grelmicro-core wheel built for an interpreter into a fresh venv
# (from DIR only, never an index) and verify a token with it; a wheel carrying
# the test suite's hooks (cargo feature test-hooks) fails. REQUIRE_PGO=trained
# also fails a wheel that is not profile-guided.
#   bash scripts/smoke-core-wheel.sh "python3.13t" dist     ("py -3.13" on Windows)
set -euo pipefail
read -r -a PY <<<"${1:?usage: smoke-core-wheel.sh PYTHON-COMMAND DIR}"
DIR="${2:-dist}"
VENV="$(mktemp -d)/venv"
"${PY[@]}" -m venv "$VENV"
if [ -x "$VENV/bin/python" ]; then VPY="$VENV/bin/python"; else VPY="$VENV/Scripts/python.exe"; fi
"$VPY" -m pip install -q --no-index --no-deps --find-links "$DIR" grelmicro-core
"$VPY" - <<'PY'
import base64, hashlib, hmac, json, sys
import grelmicro_core as core

def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

secret = b"s" * 32
signing_input = b64(b'{"alg":"HS256","typ":"JWT"}') + "." + b64(json.dumps({"sub": "smoke", "exp": 2_000_000_000}).encode())
token = signing_input + "." + b64(hmac.new(secret, signing_input.encode(), hashlib.sha256).digest())
verifier = core.Verifier(core.KeySet([core.Key.secret(secret, "HS256")]), core.Policy())
claims = verifier.verify(token, 1_700_000_000.0)
assert claims["sub"] == "smoke", claims
try:
    verifier.verify(token[:-2] + "AA", 1_700_000_000.0)
except core.CoreError as exc:
    assert exc.args[0] == "signature", exc.args
else:
    raise SystemExit("a tampered token verified")
hooks = [f"{cls.__name__}.{name}" for cls in (core.TokenCache, core.VerifyCall)
         for name in ("_entry", "_keys", "_order_length", "_view_len") if hasattr(cls, name)]
if hooks:
    raise SystemExit(f"this wheel carries the test hooks {hooks}: built with test-hooks")
import os
want = os.environ.get("REQUIRE_PGO")
if want and core.PGO != want:
    raise SystemExit(f"this wheel's PGO is {core.PGO!r}, not {want!r}")
gil = getattr(sys, "_is_gil_enabled", lambda: True)()
print(f"grelmicro-core {core.__version__} on {sys.version.split()[0]} (GIL {'on' if gil else 'off'}, PGO {core.PGO}): OK")
PY
