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
from pathlib import Path

import pytest

# tests/ is on sys.path (tests/conftest.py); the tree hash is computed in one place.
from core_source import CORE, source_hash

FT_PYTHON = os.environ.get("GRELMICRO_FT_PYTHON")
TESTS = Path(__file__).resolve().parents[1]

pytestmark = [
    pytest.mark.freethreaded,
    pytest.mark.skipif(
        not FT_PYTHON,
        reason="GRELMICRO_FT_PYTHON is unset (a free-threaded python with grelmicro-core)",
    ),
]

# The child mints its HS256 tokens with the one forge, whose HMAC path is the
# standard library only (the free-threaded venv need not have `cryptography`).
CHILD = textwrap.dedent(
    """
    import json, sys, threading, warnings

    warnings.simplefilter("error")  # a GIL re-enabled on import warns: fail loudly
    sys.path.insert(0, sys.argv[1])  # tests/, for the forge
    import forge
    import grelmicro_core as core

    NOW = forge.NOW
    SIGNER = forge.hmac_key(secret=b"free-threaded-secret-0123456789ab")

    def token(n):
        return SIGNER.mint({"sub": f"user-{n}", "exp": NOW + 60})

    key = core.Key.secret(SIGNER.private, "HS256")
    verifier = core.Verifier(core.KeySet([key]), core.Policy())
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
        [FT_PYTHON, "-c", CHILD, str(TESTS)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )

    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["free_threaded_build"], f"{FT_PYTHON} is not a free-threaded build"
    assert report["gil_enabled"] is False
    assert report["errors"] == []
    assert report["source_hash"] == source_hash(CORE / "src"), (
        "the free-threaded wheel was built from other sources than this tree: rebuild it"
    )
