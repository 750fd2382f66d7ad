"""The Flask and DRF services of docs/frameworks.md, as committed, under gunicorn.

``examples/flask`` and ``examples/drf`` are the files the page shows
(``tests/docs_snippets.py`` checks each block against its file). Each runs
with its own ``gunicorn.conf.py`` (``--preload``, 3 gthread workers, the
``post_fork`` start), configured from ``GRELMICRO_JWT_*`` the way a
Keycloak deployment is, against a key provider on 127.0.0.1:

- keys are fetched before the first request and ``/ready`` answers 200 to it;
- roles and scopes: 200 (201) with the grants, 401 with the RFC 6750
  challenge, 403 ``insufficient_scope`` or ``insufficient-role``;
- a provider that accepts connections and never answers: a token of a key
  no worker holds gets 503 with a real ``Retry-After``, within the bounded
  wait, while a token of a held key is still served.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from daemons import free_port, wait_listening
from forge import private_key
from servers import jwks_of

pytest.importorskip("gunicorn")

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
ISSUER = "https://sso.example.com/realms/shop"
K1 = private_key("RS256", kid="k1")
#: A generous ceiling on any one answer: a hung request fails the test here.
ANSWER_CEILING = 10.0


def mint(key=K1, **claims: object) -> str:
    payload = {"iss": ISSUER, "sub": "alice", "aud": "orders", "exp": time.time() + 3600}
    return key.mint({**payload, **claims})


def clerk(scope: str = "orders:read") -> dict[str, object]:
    return {"scope": scope, "realm_access": {"roles": ["clerk"]}}


@contextmanager
def served(example: str, app: str, jwks_url: str, **env: str) -> Iterator[str]:
    """``gunicorn -c gunicorn.conf.py APP`` in ``examples/<example>``, bound to 127.0.0.1."""
    port = free_port()
    environ = {
        **os.environ,
        "GRELMICRO_JWT_JWKS_URL": jwks_url,
        "GRELMICRO_JWT_ALLOW_INSECURE_LOOPBACK": "true",  # the test provider is plain http
        "GRELMICRO_JWT_ISSUER": ISSUER,
        "GRELMICRO_JWT_AUDIENCE": "orders",
        **env,
    }
    command = [
        sys.executable, "-m", "gunicorn", "-c", "gunicorn.conf.py", app,
        "-b", f"127.0.0.1:{port}", "--log-level", "warning", "--graceful-timeout", "5",
    ]  # fmt: skip
    process = subprocess.Popen(  # a fixed command line
        command,
        cwd=EXAMPLES / example,
        env=environ,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        wait_listening(port, process, "gunicorn")
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        output = process.communicate(timeout=30)[0].decode(errors="replace")
    # A graceful stop (a deploy's SIGTERM) logs no traceback from the key refresher.
    assert process.returncode == 0, output
    assert "Traceback" not in output, output


def call(url: str, method: str, path: str, token: str | None = None) -> httpx.Response:
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=url, timeout=ANSWER_CEILING) as client:
        return client.request(method, path, headers=headers)


def check_service(server, url: str, read: str, write: str, *, problem: str) -> None:
    """The page's promises, on the routes ``read`` (GET: clerk) and ``write`` (POST: manager).

    ``problem`` is the refusals' content type: DRF renders its exceptions'
    bodies (the same RFC 9457 document) as ``application/json``.
    """
    # The master loaded the keys at import (--preload): before any request.
    assert server.count("/jwks") >= 1
    ready = call(url, "GET", "/ready")
    assert ready.status_code == 200, ready.text

    assert call(url, "GET", read, mint(**clerk())).json()["owner"] == "alice"
    manager = {"scope": "orders:write", "realm_access": {"roles": ["manager"]}}
    assert call(url, "POST", write, mint(**manager)).status_code == 201

    missing = call(url, "GET", read)
    assert missing.status_code == 401
    assert missing.headers["WWW-Authenticate"] == 'Bearer realm="orders"'
    expired = call(url, "GET", read, mint(**clerk(), exp=time.time() - 120))
    assert expired.status_code == 401
    assert expired.json()["status"] == 401
    assert expired.headers["WWW-Authenticate"] == (
        'Bearer realm="orders", error="invalid_token", error_description="expired"'
    )
    no_scope = call(url, "GET", read, mint(**clerk(scope="orders:write")))
    assert no_scope.status_code == 403
    assert 'error="insufficient_scope", scope="orders:read"' in no_scope.headers["WWW-Authenticate"]
    assert no_scope.headers["Content-Type"] == problem
    assert no_scope.json()["reason"] == "insufficient-scope"
    no_role = call(url, "POST", write, mint(**clerk(scope="orders:write")))
    assert no_role.status_code == 403
    assert no_role.json()["reason"] == "insufficient-role"

    # The provider hangs: accepts connections, never answers.
    server.set("/jwks", b"", gate=threading.Event())
    unknown = mint(K1.with_kid("k9"), **clerk())
    start = time.monotonic()
    refused = call(url, "GET", read, unknown)
    waited = time.monotonic() - start
    assert refused.status_code == 503, refused.text
    assert int(refused.headers["Retry-After"]) >= 1
    assert refused.json()["reason"] == "key-pending"
    assert refused.json()["status"] == 503  # RFC 9457: a number  # a fetch for it is under way
    assert waited < 5, waited  # the bounded wait (key_wait, 1 s), not the provider's silence
    assert call(url, "GET", read, mint(**clerk())).status_code == 200  # held keys unaffected


def test_the_flask_example_under_gunicorn(server) -> None:
    pytest.importorskip("flask")
    server.set("/jwks", jwks_of(K1))
    with served("flask", "orders:app", server.url("/jwks")) as url:
        check_service(server, url, "/orders", "/orders", problem="application/problem+json")


def test_the_drf_example_under_gunicorn(server) -> None:
    pytest.importorskip("rest_framework")
    server.set("/jwks", jwks_of(K1))
    env = {"DJANGO_SECRET_KEY": "test-only", "DJANGO_ALLOWED_HOSTS": "127.0.0.1"}
    with served("drf", "orders.wsgi", server.url("/jwks"), **env) as url:
        check_service(server, url, "/orders", "/refunds", problem="application/json")
