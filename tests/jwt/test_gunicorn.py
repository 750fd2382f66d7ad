"""Flask and the plain WSGI middleware under gunicorn, as the deployment guide runs them.

``gunicorn --preload`` with sync and gthread workers and the guide's
``post_fork`` hook (``verifier.start_sync()`` in each worker):

- ``/ready`` is 200 before the first token arrives (keys loaded at start);
- the answers: 200 with the grants, 401 with the RFC 6750 challenge, 403
  ``insufficient_scope``;
- after a verification in the master (a warm-up before fork), each worker
  fetches keys on a connection of its own, never on the master's;
- with a provider that accepts connections and never answers, a token
  whose key the worker does not hold gets its 503 (``Retry-After``) within
  the bounded wait, while tokens of held keys keep being served.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import httpx
import pytest
from daemons import gunicorn_preload as gunicorn
from forge import private_key
from servers import jwks_of

pytest.importorskip("gunicorn")
pytest.importorskip("flask")

TESTS = Path(__file__).resolve().parent.parent
K1 = private_key("RS256", kid="k1")
K2 = private_key("RS256", kid="k2", seed=1)
#: A generous ceiling on any one answer: a hung request fails the test here.
ANSWER_CEILING = 10.0


def mint(key, **claims: object) -> str:
    payload = {"sub": "alice", "aud": "orders", "exp": time.time() + 3600, **claims}
    return key.mint(payload)


GOOD = {"scope": "orders:read", "realm_access": {"roles": ["clerk"]}}


def get(url: str, path: str, token: str | None = None) -> httpx.Response:
    """One request on a connection of its own (any worker may take it)."""
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=url, timeout=ANSWER_CEILING) as client:
        return client.get(path, headers=headers)


@pytest.mark.parametrize("worker", ["sync", "gthread"])
def test_flask_under_gunicorn_preload(server, worker):
    server.set("/jwks", jwks_of(K1))
    warmup = mint(K1, **GOOD)
    with gunicorn(
        "flask_app", server.url("/jwks"), worker=worker, workers=3, TEST_WARMUP=warmup
    ) as url:
        master_ports = set(server.peers["/jwks"])
        # Ready before the first token: the keys loaded at start.
        ready = get(url, "/ready")
        assert ready.status_code == 200, ready.text
        assert ready.json()["ready"] is True

        assert get(url, "/orders", mint(K1, **GOOD)).json()["owner"] == "alice"
        missing = get(url, "/orders")
        assert missing.status_code == 401
        assert missing.headers["WWW-Authenticate"] == 'Bearer realm="orders"'
        bad = get(url, "/orders", mint(K1, **GOOD, aud="other"))
        assert bad.status_code == 401
        assert (
            'error="invalid_token", error_description="audience"'
            in (bad.headers["WWW-Authenticate"])
        )
        forbidden = get(url, "/orders", mint(K1, scope="orders:write"))
        assert forbidden.status_code == 403
        assert forbidden.headers["Content-Type"] == "application/problem+json"
        assert (
            'error="insufficient_scope", scope="orders:read"'
            in (forbidden.headers["WWW-Authenticate"])
        )

        # A new key: each worker that meets it fetches, on a connection of its own.
        server.set("/jwks", jwks_of(K1, K2))
        token = mint(K2, **GOOD)
        workers: set[int] = set()
        for _ in range(300):
            answer = get(url, "/orders", token)
            if answer.status_code == 200:
                workers.add(answer.json()["pid"])
            if len(workers) == 3:
                break
        after = server.peers["/jwks"][len(master_ports) :]
        assert len(workers) >= 2, workers
        assert not set(after) & master_ports  # never the master's connection
        assert len(set(after)) >= len(workers)  # one connection (at least) per worker


def test_hung_provider_answers_within_the_bounded_wait_under_gthread(server):
    server.set("/jwks", jwks_of(K1))
    with gunicorn("wsgi_app", server.url("/jwks"), worker="gthread", workers=3) as url:
        assert get(url, "/ready").status_code == 200
        held = mint(K1, scope="orders:read")
        assert get(url, "/orders", held).status_code == 200
        # The provider now accepts connections and never answers.
        server.set("/jwks", b"", gate=threading.Event())
        unknown = mint(K2, scope="orders:read")
        answers: list[tuple[str, int, str | None, float]] = []

        def ask(kind: str, token: str) -> None:
            start = time.monotonic()
            response = get(url, "/orders", token)
            answers.append(
                (
                    kind,
                    response.status_code,
                    response.headers.get("Retry-After"),
                    time.monotonic() - start,
                )
            )

        threads = [
            threading.Thread(target=ask, args=(kind, token))
            for _ in range(4)
            for kind, token in (("unknown", unknown), ("held", held))
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(ANSWER_CEILING * 2)

        unknown_answers = [a for a in answers if a[0] == "unknown"]
        held_answers = [a for a in answers if a[0] == "held"]
        assert len(unknown_answers) == 4
        assert len(held_answers) == 4
        assert all(status == 503 and retry for _, status, retry, _ in unknown_answers), answers
        assert all(status == 200 for _, status, _, _ in held_answers), answers
        print("unknown-key answers (s):", sorted(round(a[3], 3) for a in unknown_answers))
        print("held-key answers (s):", sorted(round(a[3], 3) for a in held_answers))
