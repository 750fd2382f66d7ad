"""The Flask example under uWSGI, with and without ``lazy-apps``, as the deployment guide says.

``examples/flask/uwsgi.ini`` as committed (3 processes, 4 threads each,
``py-call-uwsgi-fork-hooks``, the ``uwsgi_postfork`` import), its
``http-socket`` moved to a free port on 127.0.0.1; then the same without
``py-call-uwsgi-fork-hooks`` (uWSGI forks in C and Python's fork hooks do not
run: ``start_sync`` in the worker runs them), and with ``lazy-apps``. A
verification runs where the app loads (``apps.uwsgi_warm``): in the master
without ``lazy-apps``, in each worker with it. Each way:

- keys are loaded and ``/ready`` answers 200 to the first request;
- each worker fetches a new key on a connection of its own, never on the
  master's (the connection that verification opened before the fork).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from daemons import free_port, wait_listening
from forge import private_key
from servers import jwks_of

pytest.importorskip("flask")
UWSGI = shutil.which("uwsgi", path=str(Path(sys.executable).parent))
pytestmark = pytest.mark.skipif(
    UWSGI is None, reason="no uwsgi beside this interpreter (locks/dev.txt installs it)"
)

TESTS = Path(__file__).resolve().parents[1]
FLASK_EXAMPLE = TESTS.parent / "examples" / "flask"
ISSUER = "https://sso.example.com/realms/shop"
K1 = private_key("RS256", kid="k1")
K2 = private_key("RS256", kid="k2", seed=1)
WORKERS = 3


def mint(key, **claims: object) -> str:
    payload = {"iss": ISSUER, "sub": "alice", "aud": "orders", "exp": time.time() + 3600}
    return key.mint({**payload, "scope": "orders:read", "realm_access": {"roles": ["clerk"]}})


@contextmanager
def uwsgi(tmp_path: Path, jwks_url: str, *, mode: str) -> Iterator[str]:
    """uWSGI on the example's ini (socket on 127.0.0.1), plus the test's warm-up import."""
    port = free_port()
    ini = (FLASK_EXAMPLE / "uwsgi.ini").read_text()
    assert "http-socket = 0.0.0.0:8000\n" in ini
    ini = ini.replace("http-socket = 0.0.0.0:8000", f"http-socket = 127.0.0.1:{port}")
    ini = ini.replace("chdir = %d", f"chdir = {FLASK_EXAMPLE}")
    ini = ini.replace("pythonpath = %d", f"pythonpath = {FLASK_EXAMPLE}")
    ini += f"pythonpath = {TESTS / 'jwt'}\nimport = apps.uwsgi_warm\n"
    ini += f"virtualenv = {sys.prefix}\ndisable-logging = true\n"
    if mode == "lazy-apps":
        ini += "lazy-apps = true\n"
    if mode == "no-fork-hooks":
        assert "py-call-uwsgi-fork-hooks = true\n" in ini
        ini = ini.replace("py-call-uwsgi-fork-hooks = true\n", "")
    (tmp_path / "uwsgi.ini").write_text(ini)
    environ = {
        **os.environ,
        "GRELMICRO_JWT_JWKS_URL": jwks_url,
        "GRELMICRO_JWT_ALLOW_INSECURE_LOOPBACK": "true",  # the test provider is plain http
        "GRELMICRO_JWT_ISSUER": ISSUER,
        "GRELMICRO_JWT_AUDIENCE": "orders",
        "TEST_WARMUP": mint(K1),
    }
    assert UWSGI is not None
    process = subprocess.Popen(  # a fixed command line
        [UWSGI, "--ini", str(tmp_path / "uwsgi.ini")],
        env=environ,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        wait_listening(port, process, "uwsgi")
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        output = process.communicate(timeout=30)[0].decode(errors="replace")
    assert "Traceback" not in output, output  # a graceful stop logs no traceback


def get(url: str, path: str, token: str | None = None) -> httpx.Response:
    """One request on a connection of its own (any worker may take it)."""
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=url, timeout=10.0) as client:
        return client.get(path, headers=headers)


@pytest.mark.parametrize("mode", ["as-committed", "no-fork-hooks", "lazy-apps"])
def test_flask_example_under_uwsgi(server, tmp_path: Path, mode: str) -> None:
    server.set("/jwks", jwks_of(K1))
    with uwsgi(tmp_path, server.url("/jwks"), mode=mode) as url:
        ready = get(url, "/ready")  # the first request: keys were loaded at start
        assert ready.status_code == 200, ready.text
        assert get(url, "/orders", mint(K1)).json()["owner"] == "alice"
        before = len(server.peers["/jwks"])

        # A new key: each worker that meets it fetches, on a connection of its own.
        server.set("/jwks", jwks_of(K1, K2))
        token = mint(K2)
        workers: set[str] = set()
        deadline = time.monotonic() + 15  # bounded: a worker that cannot fetch answers 503
        while time.monotonic() < deadline:
            answer = get(url, "/orders", token)
            assert answer.status_code in (200, 503), answer.text
            if answer.status_code == 200:
                workers.add(answer.headers["X-Worker"])
            if len(workers) == WORKERS:
                break
        peers = server.peers["/jwks"]
        assert len(peers) > before  # the new key was fetched
        assert len(workers) >= 2, workers
        if mode == "lazy-apps":  # the master never loaded the app: no fetch of its own
            assert len(set(peers)) >= len(workers)
        else:
            # The master fetched first, before any worker existed; no later
            # fetch rides its connection, and each worker had its own.
            master = peers[0]
            assert master not in peers[1:], peers
            assert len(set(peers)) >= len(workers) + 1, peers
