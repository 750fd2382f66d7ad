"""Against a real OpenID provider: the npm package oauth2-mock-server.

``scripts/setup-oidc.sh`` installs it (exact version from
``tests/oidc/package-lock.json``); ``tests/oidc/provider.mjs`` starts it on
127.0.0.1 with an RS256 and an ES256 key and takes commands on stdin (mint a
token with a given key, generate a new key, publish a key without ``alg``).
Tokens also come from its real token endpoint. Everything goes through
discovery or the JWKS URL, sync and async.
"""

from __future__ import annotations

import asyncio
import base64
import json
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from support import timed

from grelmicro.jwt import (
    FetchOptions,
    InvalidIssuerError,
    JWTVerifier,
    KeysUnavailableError,
    TokenRejectedError,
)

HERE = Path(__file__).resolve().parent.parent / "oidc"
AUD = "https://api.example.com"

if shutil.which("node") is None:
    pytest.skip(
        "NODE IS MISSING: the real-OIDC-provider tests did not run "
        "(scripts/setup-oidc.sh installs node and oauth2-mock-server)",
        allow_module_level=True,
    )


class Provider:
    """The running oauth2-mock-server process."""

    def __init__(self) -> None:
        if not (HERE / "node_modules" / "oauth2-mock-server").is_dir():
            pytest.fail("oauth2-mock-server is not installed: run scripts/setup-oidc.sh")
        self.process = subprocess.Popen(
            ["node", str(HERE / "provider.mjs")],
            cwd=HERE,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None
        hello = json.loads(self.process.stdout.readline())
        self.issuer: str = hello["issuer"]

    def ask(self, **command: Any) -> dict[str, Any]:
        assert self.process.stdin is not None
        assert self.process.stdout is not None
        self.process.stdin.write(json.dumps(command) + "\n")
        self.process.stdin.flush()
        answer: dict[str, Any] = json.loads(self.process.stdout.readline())
        assert "error" not in answer, answer
        return answer

    def token(self, kid: str, alg: str | None = None, **claims: Any) -> str:
        """A token signed with ``kid`` (``alg``: one of an alg-less key's type)."""
        claims.setdefault("aud", AUD)
        claims.setdefault("sub", "user-1")
        options = {"alg": alg} if alg is not None else {}
        return str(self.ask(cmd="token", kid=kid, claims=claims, **options)["token"])

    def stop(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        try:
            self.process.wait(5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(5)
        if self.process.stdout is not None:
            self.process.stdout.close()


@pytest.fixture
def provider() -> Iterator[Provider]:
    running = Provider()
    yield running
    running.stop()


def verifier_for(provider: Provider, **kw: Any) -> JWTVerifier:
    return JWTVerifier(
        discover=provider.issuer,
        allow_insecure_loopback=True,
        audience=AUD,
        fetch=FetchOptions(connect_timeout=2, read_timeout=2, total_timeout=4, cooldown=0.5),
        **kw,
    )


def test_rs256_and_es256_tokens_through_discovery(provider: Provider) -> None:
    verifier = verifier_for(provider)
    for kid in ("rs-1", "es-1"):
        claims = verifier.verify(provider.token(kid))
        assert (claims["iss"], claims["sub"]) == (provider.issuer, "user-1")
    assert verifier.config.issuer == (provider.issuer,)
    health = verifier.health()
    assert (health.ready, health.key_count, health.fetch_count) == (True, 2, 2)
    verifier.close()


def test_a_token_from_the_token_endpoint(provider: Provider) -> None:
    verifier = verifier_for(provider)
    answer = httpx.post(
        provider.issuer + "/token",
        data={"grant_type": "client_credentials", "scope": "read write", "aud": AUD},
        auth=("client", "secret"),
    )
    assert answer.status_code == 200
    claims = verifier.verify(answer.json()["access_token"])
    assert claims["scope"] == "read write"
    assert claims.scopes == frozenset({"read", "write"})
    verifier.close()


def test_a_rotated_key_is_fetched_on_first_sight(provider: Provider) -> None:
    offset = [0.0]
    verifier = verifier_for(provider, clock=lambda: time.time() + offset[0])
    verifier.verify(provider.token("rs-1"))
    provider.ask(cmd="generate", alg="ES256", kid="es-2")
    provider.ask(cmd="generate", alg="RS256", kid="rs-2")
    # Only keys fetched after a token arrived answer for it: the clock moves
    # on so the keys held plainly predate the rotated tokens.
    offset[0] += 3
    assert verifier.verify(provider.token("es-2"))["sub"] == "user-1"
    assert verifier.verify(provider.token("rs-2"))["sub"] == "user-1"
    assert verifier.health().key_count == 4
    verifier.close()


def test_the_provider_checks_hold(provider: Provider) -> None:
    verifier = verifier_for(provider)
    with pytest.raises(InvalidIssuerError):
        verifier.verify(provider.token("rs-1", iss="https://other.example.com"))
    with pytest.raises(TokenRejectedError) as caught:
        verifier.verify(provider.token("rs-1", aud="https://another-api.example.com"))
    assert caught.value.reason == "audience"
    expired = provider.ask(cmd="token", kid="es-1", claims={"aud": AUD}, expiresIn=-120)
    with pytest.raises(TokenRejectedError) as caught:
        verifier.verify(expired["token"])
    assert caught.value.reason == "expired"
    verifier.close()


def test_provider_down_keeps_the_keys_then_503(provider: Provider) -> None:
    clock_now = [time.time()]
    verifier = JWTVerifier(
        discover=provider.issuer,
        allow_insecure_loopback=True,
        audience=AUD,
        fetch=timed(
            FetchOptions(
                connect_timeout=1, read_timeout=1, total_timeout=2, min_ttl=60, max_stale=120
            ),
            lambda: clock_now[0],
        ),
        clock=lambda: clock_now[0],
    )
    claims = {"aud": AUD, "sub": "user-1"}
    token = provider.ask(cmd="token", kid="rs-1", claims=claims, expiresIn=86400)["token"]
    later = provider.ask(cmd="token", kid="es-1", claims=claims, expiresIn=86400)["token"]
    # Frozen after minting: an iat of the second ticking over meanwhile is not in the future.
    clock_now[0] = time.time()
    verifier.verify(token)
    provider.stop()
    clock_now[0] += 900 + 60  # past the default TTL: a refresh fails, keys stay
    assert verifier.verify(token)["sub"] == "user-1"
    assert verifier.health().stale_uses == 1
    clock_now[0] += 200  # past max_stale
    with pytest.raises(KeysUnavailableError):
        verifier.verify(later)
    # Results cached from the now-withdrawn keys went with them.
    with pytest.raises(KeysUnavailableError):
        verifier.verify(token)
    verifier.close()


@pytest.mark.anyio
async def test_async_through_discovery_with_rotation(provider: Provider) -> None:
    async with verifier_for(provider) as verifier:
        assert verifier.health().ready
        for kid in ("rs-1", "es-1"):
            claims = await verifier.verify_async(provider.token(kid))
            assert claims["iss"] == provider.issuer
        provider.ask(cmd="generate", alg="ES256", kid="es-3")
        tokens = [provider.token("es-3", jti=str(i)) for i in range(20)]
        results = await asyncio.gather(*(verifier.verify_async(t) for t in tokens))
        assert len(results) == 20
        # discovery, JWKS, then one refetch for the new kid: discovery again, then the JWKS
        assert verifier.health().fetch_count == 4


# --- RSA keys published without alg, as Entra ID and oidc-provider do ------


def header_alg(token: str) -> str:
    header = json.loads(base64.urlsafe_b64decode(token.split(".", maxsplit=1)[0] + "=="))
    return str(header["alg"])


@pytest.fixture
def bare_rsa(provider: Provider) -> Provider:
    """The provider with one more RSA key, ``rsa-bare``, its JWKS entry without ``alg``."""
    provider.ask(cmd="generate", alg="PS256", kid="rsa-bare", publishAlg=False)
    published = httpx.get(provider.issuer + "/jwks").json()["keys"]
    by_kid = {jwk["kid"]: jwk for jwk in published}
    assert by_kid["rsa-bare"]["kty"] == "RSA"
    assert "alg" not in by_kid["rsa-bare"]
    assert (by_kid["rs-1"]["alg"], by_kid["es-1"]["alg"]) == ("RS256", "ES256")
    return provider


@pytest.mark.parametrize("source", ["jwks_url", "discover"])
def test_alg_less_rsa_key_signs_ps256_and_rs512(bare_rsa: Provider, source: str) -> None:
    fetch = FetchOptions(connect_timeout=2, read_timeout=2, total_timeout=4, cooldown=0.5)
    where = (
        {"jwks_url": bare_rsa.issuer + "/jwks", "issuer": bare_rsa.issuer}
        if source == "jwks_url"
        else {"discover": bare_rsa.issuer}
    )
    verifier = JWTVerifier(
        **where,
        allow_insecure_loopback=True,
        audience=AUD,
        algorithms=["RS256", "ES256", "PS256", "RS512"],
        fetch=fetch,
    )
    try:
        for alg in ("PS256", "RS512", "PS256"):
            token = bare_rsa.token("rsa-bare", alg=alg)
            assert header_alg(token) == alg
            claims = verifier.verify(token)
            assert (claims["iss"], claims["sub"]) == (bare_rsa.issuer, "user-1")
        # The keys published with alg still serve theirs.
        assert verifier.verify(bare_rsa.token("rs-1"))["sub"] == "user-1"
        assert verifier.verify(bare_rsa.token("es-1"))["sub"] == "user-1"
        health = verifier.health()
        assert (health.key_count, health.skipped_keys) == (3, ())
        # An RSA algorithm the verifier does not name stays refused.
        with pytest.raises(TokenRejectedError) as caught:
            verifier.verify(bare_rsa.token("rsa-bare", alg="PS512"))
        assert caught.value.reason == "algorithm"
    finally:
        verifier.close()


def test_alg_less_rsa_key_without_algorithms_is_rs256_only(bare_rsa: Provider) -> None:
    verifier = verifier_for(bare_rsa)
    try:
        assert verifier.verify(bare_rsa.token("rsa-bare", alg="RS256"))["sub"] == "user-1"
        with pytest.raises(TokenRejectedError) as caught:
            verifier.verify(bare_rsa.token("rsa-bare", alg="PS256"))
        assert caught.value.reason == "algorithm"
        # The refusal names the default and what to pass.
        assert "RS256 only" in str(caught.value)
        assert "algorithms=" in str(caught.value)
    finally:
        verifier.close()


def test_repeated_ps256_tokens_for_an_alg_less_key_are_401_every_time(
    bare_rsa: Provider,
) -> None:
    verifier = verifier_for(bare_rsa)
    try:
        assert verifier.verify(bare_rsa.token("rsa-bare", alg="RS256"))["sub"] == "user-1"
        for alg in ("PS256", "RS512", "PS256"):
            with pytest.raises(TokenRejectedError) as caught:
                verifier.verify(bare_rsa.token("rsa-bare", alg=alg))
            assert caught.value.reason == "algorithm"
            assert "RS256 only" in str(caught.value)
    finally:
        verifier.close()
