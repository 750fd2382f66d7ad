"""The soak's identity provider: signing keys, tokens, and a JWKS server with faults.

:class:`Provider` holds the keys (one :class:`~grelmicro.jwt.testing.TestIssuer`
per key, all with the same issuer and audience), which of them it publishes,
which one it signs with, and a loopback HTTP server answering the published
JWKS. The driver changes all of it while the service is under load:

- ``publish(kid)`` adds a key to the JWKS, ``sign_with(kid)`` switches the
  signing key, ``withdraw(kid)`` removes one;
- ``set_mode(...)``: ``up``; ``down`` (the listening socket is closed:
  connection refused); ``5xx`` (500, 502, 503, 504 in turn); ``garbage``
  (200 with bodies that are not a JWKS); ``slow`` (the answer is held
  ``delay`` seconds before its headers).

Every request the server answers is logged (time, worker, mode, status). The
service appends ``?worker=<pid>`` to the JWKS URL, so fetches are counted per
worker. Refused connections never reach the server and are not logged.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import secrets
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from grelmicro.jwt.testing import TestIssuer

ISSUER = "https://soak-idp.test/"
AUDIENCE = "https://soak-api.test"
#: Bodies answered in ``garbage`` mode, in turn: not JSON, HTML, JSON of the wrong shape, empty.
GARBAGE = (
    b'{"keys": [{"kty": "EC", "crv": "P-256", "x": ',
    b"<html><body>502 Bad Gateway</body></html>",
    b'{"keys": 5}',
    b"",
)
STATUSES_5XX = (500, 502, 503, 504)


@dataclass(frozen=True)
class Hit:
    """One request answered by the JWKS server."""

    t: float  # time.monotonic() when it arrived
    worker: str  # the service worker's pid (from ?worker=), "-" if absent
    mode: str
    status: int
    kids: tuple[str, ...]  # the kids in the answered document (empty unless a JWKS)
    delay: float  # seconds the answer was held (slow mode)


@dataclass
class _State:
    mode: str = "up"
    delay: float = 0.0
    turn: int = 0
    hits: list[Hit] = field(default_factory=list)
    changes: list[tuple[float, str]] = field(default_factory=list)  # (monotonic, mode)


class Provider:
    """Keys, tokens and the JWKS server, under the driver's control (thread-safe)."""

    def __init__(self, *, max_age: int) -> None:
        self.max_age = max_age
        self._lock = threading.Lock()
        self._keys: dict[str, TestIssuer] = {}
        self._published: list[str] = []
        self._signing = ""
        self._since: dict[str, tuple[float | None, float | None]] = {}  # kid: (signing, published)
        self._state = _State()
        self._attacker = TestIssuer("ES256", issuer=ISSUER, audience=AUDIENCE, kid="x")
        self._other_issuer = "https://other-idp.test/"
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.port = _free_port()
        self.new_key("k1")
        self.publish("k1")
        self.sign_with("k1")

    # -- keys ----------------------------------------------------------------

    def new_key(self, kid: str) -> None:
        """Generate a key (not published, not signing yet)."""
        issuer = TestIssuer("ES256", issuer=ISSUER, audience=AUDIENCE, kid=kid, lifetime=600)
        with self._lock:
            self._keys[kid] = issuer

    def publish(self, kid: str) -> None:
        """Add the key to the JWKS (generated first if new)."""
        if kid not in self._keys:
            self.new_key(kid)
        with self._lock:
            if kid not in self._published:
                self._published.append(kid)
            signing, published = self._since.get(kid, (None, None))
            self._since[kid] = (signing, published or time.monotonic())

    def withdraw(self, kid: str) -> None:
        with self._lock:
            self._published = [k for k in self._published if k != kid]

    def sign_with(self, kid: str) -> None:
        with self._lock:
            self._signing = kid
            signing, published = self._since.get(kid, (None, None))
            self._since[kid] = (signing or time.monotonic(), published)

    @property
    def signing_kid(self) -> str:
        return self._signing

    def rotations(self, t0: float) -> dict[str, tuple[float | None, float | None]]:
        """``kid: (signing from, published at)``, seconds since ``t0`` (None: never)."""
        with self._lock:
            since = dict(self._since)
        return {
            kid: tuple(None if t is None else round(t - t0, 4) for t in pair)  # type: ignore[misc]
            for kid, pair in since.items()
        }

    def published(self) -> tuple[str, ...]:
        """The kids of the key set: what the server answers while up, and would while failing."""
        with self._lock:
            return tuple(self._published)

    def jwks(self) -> dict[str, Any]:
        with self._lock:
            issuers = [self._keys[kid] for kid in self._published]
        return {"keys": [key for issuer in issuers for key in issuer.jwks["keys"]]}

    # -- tokens --------------------------------------------------------------

    def token(self, kind: str) -> tuple[str, str]:
        """``(token, kid)`` of one kind of token (see ``KINDS`` in the driver)."""
        kid = self._signing
        issuer = self._keys[kid]
        if kind in ("valid", "early"):
            return issuer.mint(sub="soak-user"), kid
        if kind == "expired":
            return issuer.expired(ago=900), kid
        if kind == "wrong-key":  # an attacker's key, naming the current kid
            return self._attacker.mint(header={"kid": kid}), kid
        if kind == "bad-signature":
            return _tamper(issuer.mint()), kid
        if kind == "unknown-kid":  # an attacker's key under a kid never published
            forged = f"forged-{secrets.token_hex(4)}"
            return self._attacker.mint(header={"kid": forged}), forged
        if kind == "other-issuer":  # the provider's own key, another issuer's name
            return issuer.mint(iss=self._other_issuer), kid
        if kind == "wrong-audience":
            return issuer.mint(aud="https://another-api.test"), kid
        raise ValueError(kind)

    # -- the server ----------------------------------------------------------

    @property
    def jwks_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/jwks.json"

    def set_mode(self, mode: str, delay: float = 0.0) -> None:
        """``up``, ``down``, ``5xx``, ``garbage`` or ``slow`` (with ``delay`` seconds)."""
        with self._lock:
            previous = self._state.mode
            self._state.mode = mode
            self._state.delay = delay
            self._state.changes.append((time.monotonic(), mode))
        if mode == "down" and previous != "down":
            self._stop_server()
        elif mode != "down" and (previous == "down" or self._httpd is None):
            self._start_server()

    def hits(self, t0: float) -> list[Hit]:
        """The requests answered so far, times in seconds since ``t0`` (a monotonic time)."""
        with self._lock:
            hits = list(self._state.hits)
        return [dataclasses.replace(hit, t=round(hit.t - t0, 3)) for hit in hits]

    def modes(self, t0: float) -> list[tuple[float, str]]:
        """``(at, mode)`` for every mode set, seconds since ``t0`` (the provider starts up)."""
        with self._lock:
            changes = list(self._state.changes)
        return [(round(t - t0, 4), mode) for t, mode in changes]

    def start(self) -> None:
        self._start_server()

    def stop(self) -> None:
        self._stop_server()

    def _answer(self, path: str) -> tuple[int, bytes, str, tuple[str, ...], float]:
        """``(status, body, mode, kids, delay)`` for one request."""
        with self._lock:
            mode, delay = self._state.mode, self._state.delay
            self._state.turn += 1
            turn = self._state.turn
        if urlsplit(path).path != "/jwks.json":
            return 404, b"not found", mode, (), 0.0
        if mode == "5xx":
            return STATUSES_5XX[turn % len(STATUSES_5XX)], b"unavailable", mode, (), 0.0
        if mode == "garbage":
            return 200, GARBAGE[turn % len(GARBAGE)], mode, (), 0.0
        document = self.jwks()
        kids = tuple(str(key["kid"]) for key in document["keys"])
        return 200, json.dumps(document).encode(), mode, kids, delay if mode == "slow" else 0.0

    def _log(self, path: str, mode: str, status: int, kids: tuple[str, ...], delay: float) -> None:
        worker = parse_qs(urlsplit(path).query).get("worker", ["-"])[0]
        hit = Hit(time.monotonic(), worker, mode, status, kids, delay)
        with self._lock:
            self._state.hits.append(hit)

    def _start_server(self) -> None:
        provider = self

        class Handler(BaseHTTPRequestHandler):
            # HTTP/1.0: one request per connection, so "down" refuses every fetch
            # (no kept-alive connection outlives the listening socket).

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                status, body, mode, kids, delay = provider._answer(self.path)
                provider._log(self.path, mode, status, kids, delay)
                if delay:
                    time.sleep(delay)
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Cache-Control", f"max-age={provider.max_age}")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except OSError:
                    pass  # the service gave up waiting (slow mode): nothing to answer to

        class Server(ThreadingHTTPServer):
            daemon_threads = True
            allow_reuse_address = True

            def handle_error(self, request: Any, client_address: Any) -> None:
                pass  # a connection reset by a fetch that timed out is part of the test

        # Rebinding the same port right after a close can race with the kernel: retry briefly.
        deadline = time.monotonic() + 5
        while True:
            try:
                httpd = Server(("127.0.0.1", self.port), Handler)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        thread = threading.Thread(target=httpd.serve_forever, name="soak-jwks", daemon=True)
        thread.start()
        self._httpd, self._thread = httpd, thread

    def _stop_server(self) -> None:
        httpd, thread = self._httpd, self._thread
        self._httpd = self._thread = None
        if httpd is not None:
            httpd.shutdown()
            httpd.server_close()
        if thread is not None:
            thread.join(timeout=5)


def _tamper(token: str) -> str:
    """The token with one bit of its signature flipped."""
    head, payload, signature = token.split(".")
    raw = bytearray(base64.urlsafe_b64decode(signature + "=" * (-len(signature) % 4)))
    raw[len(raw) // 2] ^= 0x01
    return f"{head}.{payload}.{base64.urlsafe_b64encode(bytes(raw)).rstrip(b'=').decode()}"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
