"""Real HTTP and HTTPS servers on 127.0.0.1 serving documents the test controls.

:class:`DocumentServer` answers each path with whatever the test last set for
it (status, headers, body, a delay before answering, a slow drip of the body,
a gate the test opens when it wants the answer to go) and counts requests per
path. :func:`make_tls` builds a throwaway CA and a
server certificate for 127.0.0.1/localhost with ``cryptography``; the client
trusts that CA through its own SSL context, never the system store.
Servers bind port 0 (an ephemeral port) and stop when the test ends.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import datetime
import ipaddress
import json
import socket
import ssl
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
from forge import Signer, certificate_builder
from support import HANG_GUARD

from grelmicro.jwt import FetchOptions

#: Fetch limits for tests against these servers: a short fuse for every
#: fault, so no test waits on a real 5 s timeout.
FAST = FetchOptions(
    connect_timeout=1.0,
    read_timeout=0.5,
    total_timeout=1.5,
    min_ttl=60,
    max_ttl=3600,
    default_ttl=300,
    max_stale=600,
    cooldown=30,
    jitter=0.0,
)


@dataclass
class Answer:
    """What one path answers."""

    body: bytes = b""
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    drip: float = 0.0  # seconds between bytes of the body, when > 0
    content_length: bool = True
    # When set, the answer waits until the test opens the gate (or the server
    # stops): a test can hold a fetch in flight as long as it likes.
    gate: threading.Event | None = None


class DocumentServer:
    """A threaded HTTP(S) server; ``set()`` what a path answers, read ``hits``."""

    def __init__(self, tls: ssl.SSLContext | None = None) -> None:
        self.answers: dict[str, Answer] = {}
        self.hits: collections.Counter[str] = collections.Counter()
        # The client port of every request, per path: which connection asked.
        self.peers: collections.defaultdict[str, list[int]] = collections.defaultdict(list)
        # 304 answers to a conditional GET (an answer with an ETag header).
        self.not_modified: collections.Counter[str] = collections.Counter()
        self.stopping = threading.Event()
        self.connections: set[socket.socket] = set()
        self.gates: list[threading.Event] = []
        self._lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def setup(self) -> None:
                super().setup()
                with outer._lock:
                    outer.connections.add(self.connection)

            def finish(self) -> None:
                with outer._lock:
                    outer.connections.discard(self.connection)
                with contextlib.suppress(OSError):
                    super().finish()

            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                with outer._lock:
                    outer.hits[path] += 1
                    outer.peers[path].append(int(self.client_address[1]))
                    answer = outer.answers.get(path, Answer(b"not found", 404))
                if answer.gate is not None:
                    answer.gate.wait()
                    if outer.stopping.is_set():
                        return
                if answer.delay and outer.stopping.wait(answer.delay):
                    return
                etag = answer.headers.get("ETag")
                if answer.status == 200 and etag and self.headers.get("If-None-Match") == etag:
                    with outer._lock:
                        outer.not_modified[path] += 1
                    self.send_response(304)
                    self.send_header("ETag", etag)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                try:
                    self.send_response(answer.status)
                    for name, value in answer.headers.items():
                        self.send_header(name, value)
                    if answer.content_length:
                        self.send_header("Content-Length", str(len(answer.body)))
                    else:
                        self.send_header("Connection", "close")
                    self.end_headers()
                    if answer.drip:
                        for i in range(len(answer.body)):
                            if outer.stopping.wait(answer.drip):
                                return
                            self.wfile.write(answer.body[i : i + 1])
                            self.wfile.flush()
                    else:
                        self.wfile.write(answer.body)
                except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
                    pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.httpd.block_on_close = False
        if tls is not None:
            self.httpd.socket = tls.wrap_socket(self.httpd.socket, server_side=True)
        self.scheme = "https" if tls is not None else "http"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def port(self) -> int:
        return int(self.httpd.server_address[1])

    def url(self, path: str = "/") -> str:
        return f"{self.scheme}://127.0.0.1:{self.port}{path}"

    def set(self, path: str, body: bytes | str | dict[str, Any] = b"", **options: Any) -> None:
        """Answer ``path`` with ``body`` (a dict is sent as JSON) from now on."""
        if isinstance(body, dict):
            body = json.dumps(body)
            options.setdefault("headers", {}).setdefault("Content-Type", "application/json")
        if isinstance(body, str):
            body = body.encode()
        with self._lock:
            self.answers[path] = answer = Answer(body, **options)
            if answer.gate is not None:
                self.gates.append(answer.gate)

    def hold(self, path: str, gate: threading.Event) -> None:
        """Answer ``path`` as now, each answer held until ``gate`` opens."""
        with self._lock:
            self.answers[path] = dataclasses.replace(self.answers[path], gate=gate)
            self.gates.append(gate)

    def count(self, path: str) -> int:
        with self._lock:
            return self.hits[path]

    def start(self) -> DocumentServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.stopping.set()
        with self._lock:
            gates = list(self.gates)
        for gate in gates:  # a held answer ends unanswered
            gate.set()
        self.httpd.shutdown()
        self.httpd.server_close()
        # Kept-alive connections too: a stopped provider answers nothing more.
        with self._lock:
            open_connections = list(self.connections)
        for connection in open_connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
        self._thread.join(5)


@dataclass(frozen=True)
class TLSFiles:
    """A throwaway CA and a server certificate signed by it."""

    server: ssl.SSLContext
    ca_pem: bytes

    def client_context(self) -> ssl.SSLContext:
        """An SSL context that trusts this CA only."""
        return ssl.create_default_context(cadata=self.ca_pem.decode())


def make_tls() -> TLSFiles:
    """A CA and a certificate for 127.0.0.1 and localhost, valid for one day."""
    from cryptography import x509  # noqa: PLC0415 - only the TLS tests need it
    from cryptography.hazmat.primitives import hashes, serialization  # noqa: PLC0415
    from cryptography.hazmat.primitives.asymmetric import ec  # noqa: PLC0415

    now = datetime.datetime.now(datetime.timezone.utc)
    start, end = now - datetime.timedelta(minutes=5), now + datetime.timedelta(days=1)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (
        certificate_builder(
            "grelmicro test CA", ca_key.public_key(), not_before=start, not_after=end
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            ca_key_usage(),
            critical=True,
        )
        .add_extension(
            x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        certificate_builder(
            "127.0.0.1",
            key.public_key(),
            not_before=start,
            not_after=end,
            issuer="grelmicro test CA",
        )
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False
        )
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    with tempfile.TemporaryDirectory() as folder:
        cert_path = Path(folder) / "cert.pem"
        key_path = Path(folder) / "key.pem"
        cert_path.write_bytes(cert.public_bytes(pem) + ca.public_bytes(pem))
        key_path.write_bytes(
            key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
        )
        server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        server.load_cert_chain(cert_path, key_path)
    return TLSFiles(server=server, ca_pem=ca.public_bytes(pem))


def ca_key_usage() -> Any:
    """The key usage of a test CA: it signs certificates (and CRLs)."""
    from cryptography import x509  # noqa: PLC0415

    return x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=True,
        crl_sign=True,
        encipher_only=False,
        decipher_only=False,
    )


def jwks_of(*keys: Signer) -> dict[str, Any]:
    """A JWKS document publishing the keys of ``keys``."""
    return {"keys": [key.public_jwk() for key in keys]}


# -- a real ASGI server -----------------------------------------------------------


class Running:
    """A uvicorn server running ``app`` in a thread, on 127.0.0.1 and an ephemeral port."""

    def __init__(self, app: Any, listener: socket.socket | None = None) -> None:
        # ``listener``: a socket already bound, when its port had to be known
        # before the app could be built (a redirect URI registered with a provider).
        if listener is None:
            listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            listener.bind(("127.0.0.1", 0))
        self.listener = listener
        # Accepted connections inherit TCP_NODELAY from the listener; without it
        # every response waits ~40 ms on Nagle + delayed ACK (uvicorn sets it only
        # on sockets it creates itself).
        self.listener.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.port = self.listener.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        import uvicorn  # noqa: PLC0415 - only the FastAPI tests need it

        self.server = uvicorn.Server(uvicorn.Config(app, log_level="critical", lifespan="on"))
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        try:
            asyncio.run(self.server.serve(sockets=[self.listener]))
        except BaseException as exc:  # a failed start-up exits through SystemExit
            self.error = exc

    def start(self) -> bool:
        """Start; ``False`` if the application refused to start."""
        self.thread.start()
        guard = time.monotonic() + HANG_GUARD
        while time.monotonic() < guard:
            if self.server.started:
                return True
            if not self.thread.is_alive():
                return False
            self.thread.join(0.01)
        raise AssertionError(f"uvicorn did not start in {HANG_GUARD} s (a hang)")

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(HANG_GUARD)
        assert not self.thread.is_alive(), "uvicorn did not stop"
        self.listener.close()


@contextlib.contextmanager
def serve(app: Any) -> Iterator[httpx.Client]:
    """``app`` served by :class:`Running`; an httpx client on its URL."""
    running = Running(app)
    assert running.start(), f"application failed to start: {running.error!r}"
    try:
        with httpx.Client(base_url=running.url, timeout=HANG_GUARD) as client:
            yield client
    finally:
        running.stop()
