"""The README's main job: a FastAPI service guarded by the verifier, shown live.

Everything is embedded: an Ed25519 key is generated at start, its JWKS is
served on 127.0.0.1, the service (``fastapi_service.py``) runs under uvicorn
on 127.0.0.1, and an httpx client sends it a valid token, an expired one, a
wrong-audience one, one lacking the scope and one with a forged signature.
Then DPoP (RFC 9449): a client with its own P-256 key gets a token bound to
it (``cnf.jkt``) and signs a proof for each request to ``/dpop/items``; the
same proof sent twice, the token without a proof, and the token sent as a
plain bearer token are refused.
With ``opentelemetry-exporter-prometheus`` installed, the verifier reports
OpenTelemetry metrics (``telemetry=``) and the demo ends by reading
``/metrics`` and printing the ``grelmicro_jwt_*`` lines.
Each answer is printed: status line, ``WWW-Authenticate`` and body. Then the
server stops. No network beyond the loopback interface.

Run: ``bash scripts/demo.sh`` (sets up first) or ``python examples/fastapi_demo.py``.
"""

import asyncio
import base64
import hashlib
import json
import re
import socket
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fastapi_service import build_app

from grelmicro.jwt import JWTVerifier
from grelmicro.jwt.otel import Telemetry

AUDIENCE = "https://api.demo.local"
ISSUER = "https://idp.demo.local/"
KID = "demo-1"


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def public_jwk(key: Ed25519PrivateKey) -> dict[str, str]:
    raw = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return {"kty": "OKP", "crv": "Ed25519", "x": b64url(raw), "kid": KID, "alg": "EdDSA"}


def mint(key: Ed25519PrivateKey, **claims: Any) -> str:
    """An EdDSA token signed by ``key`` (header and payload as an issuer writes them)."""
    header = {"alg": "EdDSA", "typ": "JWT", "kid": KID}
    parts = [json.dumps(part, separators=(",", ":")).encode() for part in (header, claims)]
    segments = [b64url(part) for part in parts]
    signing_input = ".".join(segments).encode()
    return f"{signing_input.decode()}.{b64url(key.sign(signing_input))}"


class DPoPClient:
    """A DPoP client: its own P-256 key, a proof signed for every request (RFC 9449 §4)."""

    def __init__(self) -> None:
        self.key = ec.generate_private_key(ec.SECP256R1())
        numbers = self.key.public_key().public_numbers()
        self.jwk = {
            "kty": "EC",
            "crv": "P-256",
            "x": b64url(numbers.x.to_bytes(32, "big")),
            "y": b64url(numbers.y.to_bytes(32, "big")),
        }
        # RFC 7638: the thumbprint the identity provider puts in cnf.jkt.
        canonical = json.dumps(self.jwk, sort_keys=True, separators=(",", ":")).encode()
        self.jkt = b64url(hashlib.sha256(canonical).digest())

    def proof(self, method: str, url: str, token: str) -> str:
        header = {"typ": "dpop+jwt", "alg": "ES256", "jwk": self.jwk}
        claims = {
            "jti": uuid.uuid4().hex,
            "htm": method,
            "htu": url,
            "iat": int(time.time()),
            "ath": b64url(hashlib.sha256(token.encode()).digest()),
        }
        parts = [json.dumps(part, separators=(",", ":")).encode() for part in (header, claims)]
        signing_input = ".".join(b64url(part) for part in parts).encode()
        r, s = decode_dss_signature(self.key.sign(signing_input, ec.ECDSA(hashes.SHA256())))
        signature = r.to_bytes(32, "big") + s.to_bytes(32, "big")
        return f"{signing_input.decode()}.{b64url(signature)}"


@contextmanager
def serve_jwks(document: dict[str, Any]) -> Iterator[str]:
    """Serve ``document`` at ``http://127.0.0.1:<port>/jwks.json`` from a thread."""
    body = json.dumps(document).encode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            status = 200 if self.path == "/jwks.json" else 404
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Cache-Control", "max-age=300")
            self.send_header("Content-Length", str(len(body) if status == 200 else 0))
            self.end_headers()
            if status == 200:
                self.wfile.write(body)

        def log_message(self, *args: object) -> None:  # keep the demo output readable
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/jwks.json"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def build_verifier(jwks_url: str) -> JWTVerifier:
    """The verifier of the demo service: keys from the local JWKS URL.

    Plain http is refused for a JWKS URL unless it is on the loopback
    interface and ``allow_insecure_loopback=True`` says so.
    """
    return JWTVerifier(
        jwks_url=jwks_url,
        allow_insecure_loopback=True,
        audience=AUDIENCE,
        issuer=ISSUER,
        telemetry=prometheus_telemetry(),
    )


def prometheus_telemetry() -> Telemetry | bool:
    """Metrics to the Prometheus exporter when it is installed (``/metrics``), else none."""
    try:
        from opentelemetry.exporter.prometheus import PrometheusMetricReader  # noqa: PLC0415
        from opentelemetry.sdk.metrics import MeterProvider  # noqa: PLC0415
    except ImportError:
        return False
    return Telemetry(meter_provider=MeterProvider(metric_readers=[PrometheusMetricReader()]))


def show_metrics(response: httpx.Response) -> None:
    """The grelmicro lines of ``/metrics`` (histogram buckets and scope labels left out)."""
    print("--- metrics")
    print("GET /metrics (grelmicro_jwt_* lines; buckets and otel_scope_* labels left out)")
    for line in response.text.splitlines():
        if line.startswith("grelmicro_jwt_") and "_bucket{" not in line:
            shown = re.sub(r'otel_scope_\w+="[^"]*",?', "", line)
            print(shown.replace(",}", "}").replace("{}", ""))
    print()


def show(title: str, method: str, path: str, response: httpx.Response) -> None:
    print(f"--- {title}")
    print(f"{method} {path}")
    print(f"{response.http_version} {response.status_code} {response.reason_phrase}")
    print(f"WWW-Authenticate: {response.headers.get('www-authenticate', '(none)')}")
    print(response.text)
    print()


async def run() -> int:
    key = Ed25519PrivateKey.generate()
    forger = Ed25519PrivateKey.generate()  # same kid, different key
    now = int(time.time())
    base = {"iss": ISSUER, "aud": AUDIENCE, "sub": "alice", "iat": now, "exp": now + 600}
    cases = [
        ("no token", None),
        ("valid token, scope read:items", mint(key, **base, scope="read:items")),
        ("expired token", mint(key, **{**base, "exp": now - 60}, scope="read:items")),
        (
            "wrong audience",
            mint(key, **{**base, "aud": "https://other.example"}, scope="read:items"),
        ),
        ("token lacking the scope", mint(key, **base, scope="profile")),
        ("forged signature", mint(forger, **base, scope="read:items")),
    ]
    holder = DPoPClient()
    bound = mint(key, **base, scope="read:items", cnf={"jkt": holder.jkt})

    with serve_jwks({"keys": [public_jwk(key)]}) as jwks_url:
        verifier = build_verifier(jwks_url)
        app = build_app(verifier)
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.bind(("127.0.0.1", 0))
        # Accepted connections inherit TCP_NODELAY from the listener; without it
        # every response waits ~40 ms on Nagle + delayed ACK (uvicorn sets it only
        # on sockets it creates itself).
        listener.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        port = listener.getsockname()[1]
        server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
        serving = asyncio.create_task(server.serve(sockets=[listener]))
        while not server.started:
            if serving.done():
                serving.result()  # start-up failed: raise its error
                return 1
            await asyncio.sleep(0.01)
        print(f"service on http://127.0.0.1:{port} (uvicorn), keys from {jwks_url}\n")
        try:
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
                show("readiness", "GET", "/ready", await client.get("/ready"))
                for title, token in cases:
                    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
                    show(title, "GET", "/items", await client.get("/items", headers=headers))
                url = f"http://127.0.0.1:{port}/dpop/items"
                proof = holder.proof("GET", url, bound)
                dpop_cases = [
                    ("DPoP: bound token, fresh proof", {"DPoP": proof}),
                    ("DPoP: the same proof again (replay)", {"DPoP": proof}),
                    ("DPoP: stolen token, no proof", {}),
                    ("DPoP: the bound token sent as a bearer token", None),
                ]
                for title, extra in dpop_cases:
                    headers = (
                        {"Authorization": f"Bearer {bound}"}
                        if extra is None
                        else {"Authorization": f"DPoP {bound}", **extra}
                    )
                    response = await client.get("/dpop/items", headers=headers)
                    show(title, "GET", "/dpop/items", response)
                metrics = await client.get("/metrics")
                if metrics.status_code == 200:
                    show_metrics(metrics)
        finally:
            server.should_exit = True
            await serving
            listener.close()
    print("service stopped cleanly")
    return 0


def main() -> int:
    return asyncio.run(run())


if __name__ == "__main__":
    sys.exit(main())
