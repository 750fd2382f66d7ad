"""The plain ASGI middleware under uvicorn: keys loaded at startup, RFC 6750 answers."""

from __future__ import annotations

import os
import subprocess
import sys

from daemons import free_port, wait_listening
from servers import jwks_of
from test_gunicorn import K1, TESTS, get, mint


def test_asgi_middleware_under_uvicorn(server):
    server.set("/jwks", jwks_of(K1))
    port = free_port()
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(TESTS / "jwt"), str(TESTS), str(TESTS.parent)]),
        "TEST_JWKS_URL": server.url("/jwks"),
    }
    command = [
        sys.executable, "-m", "uvicorn", "apps.asgi_app:app",
        "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning",
    ]  # fmt: skip
    process = subprocess.Popen(  # a fixed command line
        command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    try:
        wait_listening(port, process, "uvicorn")
        url = f"http://127.0.0.1:{port}"
        assert get(url, "/ready").status_code == 200  # keys loaded by the lifespan
        assert server.count("/jwks") == 1

        assert get(url, "/orders", mint(K1, scope="orders:read")).json()["owner"] == "alice"
        missing = get(url, "/orders")
        assert missing.status_code == 401
        assert missing.headers["WWW-Authenticate"] == 'Bearer realm="orders"'
        forbidden = get(url, "/orders", mint(K1, scope="other"))
        assert forbidden.status_code == 403
        assert forbidden.headers["content-type"] == "application/problem+json"
        assert forbidden.json()["missing"] == ["orders:read"]
    finally:
        process.terminate()
        process.wait(30)
        if process.stdout is not None:
            process.stdout.close()
