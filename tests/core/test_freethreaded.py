"""The core keeps a free-threaded interpreter free of the GIL.

The module is declared ``gil_used = false``; importing an extension without
that declaration makes free-threaded CPython turn the GIL back on (with a
RuntimeWarning). This runs a child interpreter named by the environment
variable ``GRELMICRO_FT_PYTHON`` (for example a venv made from python3.13t or
python3.14t with the core wheel built for it), imports the core, verifies
tokens from several threads and reports ``sys._is_gil_enabled()``.
"""

from __future__ import annotations

import json
import os
import subprocess
import textwrap

import pytest

# tests/ is on sys.path (pytest inserts the first directory above this
# package); the tree hash is computed in one place.
from test_installed_core import CORE, source_hash

FT_PYTHON = os.environ.get("GRELMICRO_FT_PYTHON")

pytestmark = [
    pytest.mark.freethreaded,
    pytest.mark.skipif(
        not FT_PYTHON,
        reason="GRELMICRO_FT_PYTHON is unset (a free-threaded python with grelmicro-core)",
    ),
]

# The child mints its own HS256 token with the standard library only (the
# free-threaded venv need not have `cryptography`).
CHILD = textwrap.dedent(
    """
    import base64, hashlib, hmac, json, sys, threading, warnings

    warnings.simplefilter("error")  # a GIL re-enabled on import warns: fail loudly
    import grelmicro_core as core

    NOW = 1_700_000_000
    SECRET = b"free-threaded-secret-0123456789ab"

    def seg(data):
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

    def token(n):
        head = seg(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
        body = seg(json.dumps({"sub": f"user-{n}", "exp": NOW + 60}).encode())
        mac = hmac.new(SECRET, f"{head}.{body}".encode(), hashlib.sha256).digest()
        return f"{head}.{body}.{seg(mac)}"

    verifier = core.Verifier(core.KeySet([core.Key.secret(SECRET, "HS256")]), core.Policy())
    errors = []

    def work(n):
        try:
            for i in range(200):
                claims = verifier.verify(token(n), NOW)
                if claims["sub"] != f"user-{n}":
                    errors.append(f"thread {n} got {claims['sub']}")
        except Exception as exc:
            errors.append(repr(exc))

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    print(json.dumps({
        "gil_enabled": sys._is_gil_enabled(),
        "free_threaded_build": bool(__import__("sysconfig").get_config_var("Py_GIL_DISABLED")),
        "errors": errors,
        "source_hash": core.SOURCE_HASH,
    }))
    """
)


def test_importing_the_core_keeps_the_gil_disabled() -> None:
    assert FT_PYTHON is not None
    env = {k: v for k, v in os.environ.items() if k != "PYTHON_GIL"}  # no forced GIL mode

    result = subprocess.run(
        [FT_PYTHON, "-c", CHILD], capture_output=True, text=True, timeout=120, env=env, check=False
    )

    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["free_threaded_build"], f"{FT_PYTHON} is not a free-threaded build"
    assert report["gil_enabled"] is False
    assert report["errors"] == []
    assert report["source_hash"] == source_hash(CORE / "src"), (
        "the free-threaded wheel was built from other sources than this tree: rebuild it"
    )
