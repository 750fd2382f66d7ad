"""Attack classes of the fourth audit (issue 38), each case naming the attack it closes.

- N25: one client with a valid bound token opens more simultaneous DPoP
  requests than the Redis replay store's pool; the rest of its worker's
  DPoP clients get 503 while Redis is healthy.
- N30: a worker whose clock runs ahead purges the shared replay store by its
  own clock; a captured proof is then accepted again at a correct worker.
- N29: ``trusted_proxies`` defeated next door: uvicorn's ``--proxy-headers``
  with ``--forwarded-allow-ips='*'`` lets a direct client pose as the proxy
  through ``X-Forwarded-For``; ``0.0.0.0/0`` is accepted silently.
- N33: a forged token with an invented kid and no ``iss``/``aud``/``exp``
  (or another claim the policy requires), or an ill-typed ``exp``, or an
  unreadable payload, spends a JWKS fetch.
- D5 (residue): public key material taken as an HMAC secret in forms other
  than the member's exact text (``n`` wrapped at 64 columns, OpenSSL
  ``Modulus=HEX``, ``n`` in decimal, raw ``n`` bytes, an EC or Ed25519 ``x``
  alone, a 43-character ``kid``), and a member of another issuer's key.

The Redis cases run a real ``redis-server`` (``bash scripts/prereqs.sh
servers``) on 127.0.0.1 and a free port.

References: RFC 9449 §11.1 (replay), RFC 8705 §3 and CWE-290 (spoofed
peer), CWE-400, RFC 8725 §2.1 §3.1 (key confusion), RFC 7638 (thumbprint
kids).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import forge
import pytest
from daemons import RedisServer
from dpop_proofs import ProofSigner, access_token

from grelmicro.jwt import (
    ConfigurationError,
    DPoPProofError,
    DPoPReplayError,
    DPoPVerifier,
    FetchOptions,
    Issuer,
    JWTVerifier,
    Key,
    RedisReplayStore,
    TokenRejectedError,
    WeakKeyError,
)
from grelmicro.jwt.fastapi import CertificateBinding

URI = "https://api.example.com/items"
ISS = "https://idp.example.com/"
AUD = "https://api.example.com"


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with RedisServer(tmp_path_factory.mktemp("redis")) as server:
        yield server.url


# -- N25: a burst is not an outage --------------------------------------------------------


def test_n25_a_burst_beyond_the_pool_is_recorded_not_refused(redis_url: str):
    store = RedisReplayStore(redis_url, prefix=f"n25:{uuid.uuid4().hex}", max_connections=4)
    now = time.time()

    async def burst() -> list[bool]:
        return list(
            await asyncio.gather(
                *(
                    store.record_async(uuid.uuid4().bytes, f"k{i}", now=now, until=now + 70)
                    for i in range(300)
                )
            )
        )

    assert asyncio.run(burst()) == [True] * 300
    store.close()


# -- N30: one clock for the fleet ---------------------------------------------------------


def test_n30_a_worker_80_s_ahead_cannot_make_a_captured_proof_new(redis_url: str):
    prefix = f"n30:{uuid.uuid4().hex}"
    tokens = JWTVerifier([Key.secret(forge.SECRET)])
    correct = DPoPVerifier("required", replay_store=RedisReplayStore(redis_url, prefix=prefix))
    ahead = DPoPVerifier(
        "required",
        replay_store=RedisReplayStore(redis_url, prefix=prefix),
        clock=lambda: time.time() + 80,
    )
    victim, other = ProofSigner("ES256", seed=301), ProofSigner("ES256", seed=302)
    now = int(time.time())
    victim_token = access_token(victim.jkt, exp=now + 3600, iat=now)
    other_token = access_token(other.jkt, exp=now + 3600, iat=now)

    def present(dpop: DPoPVerifier, token: str, proof: str) -> None:
        dpop.check(
            scheme="DPoP", access_token=token, claims=tokens.verify(token),
            proof=proof, method="GET", uri=URI,
        )  # fmt: skip

    captured = victim.proof("GET", URI, victim_token, iat=time.time())
    present(correct, victim_token, captured)
    present(ahead, other_token, other.proof("GET", URI, other_token, iat=time.time() + 80))
    with pytest.raises(DPoPReplayError):
        present(correct, victim_token, captured)
    with pytest.raises((DPoPReplayError, DPoPProofError)):
        present(ahead, victim_token, captured)


# -- N29: proxy trust -----------------------------------------------------------------------


@pytest.mark.parametrize("everyone", ["0.0.0.0/0", "::/0"])
def test_n29_trusting_every_address_is_refused(everyone: str):
    with pytest.raises(ConfigurationError):
        CertificateBinding(trusted_header="X-Client-Cert", trusted_proxies=[everyone])


def test_n29_uvicorn_trusting_any_forwarder_is_refused(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(
        "sys.argv", ["/srv/bin/uvicorn", "app:app", "--proxy-headers", "--forwarded-allow-ips=*"]
    )
    with pytest.raises(ConfigurationError, match="X-Forwarded-For"):
        CertificateBinding(trusted_header="X-Client-Cert", trusted_proxies=["10.0.0.5"])


# -- N33: the pre-check refuses what is missing -------------------------------------------


@contextlib.contextmanager
def counting_jwks(document: dict[str, Any]) -> Iterator[tuple[str, list[int]]]:
    body, hits = json.dumps(document).encode(), [0]

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            hits[0] += 1
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/jwks.json", hits
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


class Mono:
    now = 1000.0

    def __call__(self) -> float:
        return self.now


FORGERIES: dict[str, Callable[[forge.Signer], str]] = {
    "no-iss": lambda k: k.mint({"aud": AUD, "exp": forge.NOW + 60}),
    "no-aud": lambda k: k.mint({"iss": ISS, "exp": forge.NOW + 60}),
    "iss-number": lambda k: k.mint({"iss": 1, "aud": AUD, "exp": forge.NOW + 60}),
    "aud-number": lambda k: k.mint({"iss": ISS, "aud": 1, "exp": forge.NOW + 60}),
    "exp-string": lambda k: k.mint({"iss": ISS, "aud": AUD, "exp": "soon"}),
    "payload-unreadable": lambda k: k.mint(b"\xff\xfe not json"),
    "no-exp": lambda k: k.mint({"iss": ISS, "aud": AUD}),  # exp is required by default
}


@pytest.mark.parametrize("forgery", list(FORGERIES))
def test_n33_a_forged_token_missing_what_the_policy_checks_spends_no_fetch(forgery: str):
    real = forge.private_key("ES256", kid="real", seed=331)
    forged = forge.private_key("ES256", kid="invented", seed=332)
    mono = Mono()
    with counting_jwks({"keys": [real.public_jwk()]}) as (url, hits):
        verifier = JWTVerifier(
            jwks_url=url,
            allow_insecure_loopback=True,
            fetch=FetchOptions(connect_timeout=1, read_timeout=1, total_timeout=2, timer=mono),
            clock=lambda: forge.NOW,
            issuer=ISS,
            audience=AUD,
        )
        verifier.verify(real.mint({"iss": ISS, "aud": AUD, "exp": forge.NOW + 60}))
        mono.now += 5  # past the unknown-kid pace: a fetch would be allowed
        fetched = hits[0]
        with pytest.raises(TokenRejectedError):
            verifier.verify(FORGERIES[forgery](forged))
        assert hits[0] == fetched
        verifier.close()


# -- D5 residue: public material in any form, across issuers --------------------------------

_RSA_JWK = {**forge.private_key("RS256", seed=381).public_jwk(), "kid": "rsa"}
_EC_JWK = {**forge.private_key("ES256", seed=382).public_jwk(), "kid": "ec"}
_ED_JWK = {**forge.private_key("EdDSA", seed=383).public_jwk(), "kid": "ed"}


def _raw(member: str) -> bytes:
    return base64.urlsafe_b64decode(member + "=" * (-len(member) % 4))


D5_FORMS: dict[str, Callable[[], str | bytes]] = {
    "n-wrapped-64": lambda: "\n".join(
        _RSA_JWK["n"][i : i + 64] for i in range(0, len(_RSA_JWK["n"]), 64)
    ),
    "openssl-modulus": lambda: "Modulus=" + _raw(_RSA_JWK["n"]).hex().upper(),
    "n-decimal": lambda: str(int.from_bytes(_raw(_RSA_JWK["n"]), "big")),
    "n-raw": lambda: _raw(_RSA_JWK["n"]),
    "ec-x-alone": lambda: _raw(_EC_JWK["x"]),
    "ed25519-x-alone": lambda: _raw(_ED_JWK["x"]),
}


def _public() -> list[Key]:
    return [Key.jwk(_RSA_JWK), Key.jwk(_EC_JWK), Key.jwk(_ED_JWK)]


@pytest.mark.parametrize("form", list(D5_FORMS))
def test_d5_public_material_in_any_form_is_no_secret(form: str):
    with pytest.raises(WeakKeyError):
        JWTVerifier([Key.secret(D5_FORMS[form](), "HS256", kid="hs"), *_public()])


@pytest.mark.parametrize("form", list(D5_FORMS))
def test_d5_another_issuers_public_material_is_no_secret(form: str):
    with pytest.raises(WeakKeyError):
        JWTVerifier(
            issuers=[
                Issuer("https://a.example/", keys=[Key.secret(D5_FORMS[form](), "HS256")]),
                Issuer("https://b.example/", keys=_public()),
            ],
            audience=AUD,
        )


def test_d5_a_43_character_kid_beside_its_key_is_no_secret():
    kid = base64.urlsafe_b64encode(hashlib.sha256(b"jwk").digest()).rstrip(b"=").decode()
    with pytest.raises(WeakKeyError):
        JWTVerifier([Key.secret(kid, "HS256"), Key.jwk({**_RSA_JWK, "kid": kid})])
