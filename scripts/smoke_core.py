"""Verify a token with the installed grelmicro-core: the smoke test of a built wheel.

Run by ``scripts/smoke-core-wheel.sh`` (a fresh venv per interpreter) and by
``scripts/smoke-emulated.sh`` (another architecture under qemu-user). A wheel
carrying the test suite's hooks fails; ``REQUIRE_PGO=trained`` also fails a
wheel that is not profile-guided. Standard library and the core only.
"""

# ruff: noqa: T201
from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import platform
import sys

import grelmicro_core as core


def b64(data: bytes) -> str:
    """Base64url without padding."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def main() -> int:
    """Verify, refuse a tampered token, check the build; one line of what ran."""
    secret = b"s" * 32
    header = b64(b'{"alg":"HS256","typ":"JWT"}')
    payload = b64(json.dumps({"sub": "smoke", "exp": 2_000_000_000}).encode())
    signing_input = f"{header}.{payload}"
    mac = hmac.new(secret, signing_input.encode(), hashlib.sha256).digest()
    token = f"{signing_input}.{b64(mac)}"
    verifier = core.Verifier(core.KeySet([core.Key.secret(secret, "HS256")]), core.Policy())
    claims = verifier.verify(token, 1_700_000_000.0)
    if claims["sub"] != "smoke":
        raise SystemExit(f"wrong claims: {claims}")
    try:
        verifier.verify(token[:-2] + "AA", 1_700_000_000.0)
    except core.CoreError as exc:
        if exc.args[0] != "signature":
            raise SystemExit(f"a tampered token refused as {exc.args}, not signature") from exc
    else:
        raise SystemExit("a tampered token verified")
    hooks = [
        f"{cls.__name__}.{name}"
        for cls in (core.TokenCache, core.VerifyCall)
        for name in ("_entry", "_keys", "_order_length", "_view_len")
        if hasattr(cls, name)
    ]
    if hooks:
        raise SystemExit(f"this wheel carries the test hooks {hooks}: built with test-hooks")
    want = os.environ.get("REQUIRE_PGO")
    if want and want != core.PGO:
        raise SystemExit(f"this wheel's PGO is {core.PGO!r}, not {want!r}")
    gil = "on" if getattr(sys, "_is_gil_enabled", lambda: True)() else "off"
    print(
        f"grelmicro-core {core.__version__} on {sys.version.split()[0]} {platform.machine()} "
        f"(GIL {gil}, PGO {core.PGO}): OK"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
