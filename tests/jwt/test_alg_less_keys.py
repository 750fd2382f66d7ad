"""Keys as providers publish them: JWKs without ``alg``, short EC coordinates.

Tokens and JWKs here come from PyJWT (with ``cryptography``), an
independent implementation: the keys are exported by PyJWT's own
``to_jwk``, then stripped of ``alg`` the way Entra ID and ``oidc-provider``
publish them. Network keys are served by a real server on 127.0.0.1.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import logging
from typing import Any

import jwt as pyjwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from forge import NOW
from jwt.algorithms import ECAlgorithm, RSAAlgorithm
from servers import DocumentServer

from grelmicro.jwt import (
    FetchOptions,
    InvalidKeyError,
    JWTVerifier,
    Key,
    TokenRejectedError,
)

FAST = FetchOptions(connect_timeout=1, read_timeout=1, total_timeout=2, jitter=0)
RSA_ALGS = ["RS256", "RS384", "RS512", "PS256", "PS384", "PS512"]
PAYLOAD = {"sub": "u", "exp": NOW + 600}


@pytest.fixture(scope="module")
def rsa_private() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def alg_less_jwk(private: rsa.RSAPrivateKey, kid: str | None = "k1") -> dict[str, Any]:
    """PyJWT's export of the public key, without ``alg`` (as providers publish it)."""
    jwk: dict[str, Any] = RSAAlgorithm.to_jwk(private.public_key(), as_dict=True)
    jwk.pop("alg", None)
    if kid is not None:
        jwk["kid"] = kid
    return jwk


def mint(private: Any, alg: str, kid: str | None = "k1") -> str:
    headers = {"kid": kid} if kid is not None else None
    return pyjwt.encode(PAYLOAD, private, algorithm=alg, headers=headers)


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


# --- RSA: the verifier's algorithms= choose within the family ---------------


@pytest.mark.parametrize("alg", RSA_ALGS)
def test_alg_less_rsa_jwk_verifies_each_named_rsa_algorithm(
    rsa_private: rsa.RSAPrivateKey, alg: str
) -> None:
    key = Key.jwk(alg_less_jwk(rsa_private))
    assert key.algorithm == "RS256"
    assert key.algorithms == tuple(RSA_ALGS)
    verifier = JWTVerifier(keys=[key], algorithms=RSA_ALGS)
    assert verifier.verify(mint(rsa_private, alg), now=NOW)["sub"] == "u"


@pytest.mark.parametrize("alg", RSA_ALGS[1:])
def test_alg_less_rsa_jwk_means_rs256_when_no_algorithms_are_named(
    rsa_private: rsa.RSAPrivateKey, alg: str
) -> None:
    verifier = JWTVerifier(keys=[Key.jwk(alg_less_jwk(rsa_private))])
    assert verifier.algorithms == ("RS256",)
    assert verifier.verify(mint(rsa_private, "RS256"), now=NOW)
    with pytest.raises(TokenRejectedError) as caught:
        verifier.verify(mint(rsa_private, alg), now=NOW)
    assert caught.value.reason == "algorithm"
    # The refusal says why and what to pass.
    assert "RS256 only" in str(caught.value)
    assert "algorithms=" in str(caught.value)


def test_ps256_is_refused_when_only_rs256_is_named(rsa_private: rsa.RSAPrivateKey) -> None:
    verifier = JWTVerifier(keys=[Key.jwk(alg_less_jwk(rsa_private))], algorithms=["RS256"])
    assert verifier.verify(mint(rsa_private, "RS256"), now=NOW)
    with pytest.raises(TokenRejectedError) as caught:
        verifier.verify(mint(rsa_private, "PS256"), now=NOW)
    assert caught.value.reason == "algorithm"


def forged_hs256(public_text: bytes, kid: str | None = "k1") -> str:
    """An HS256 token whose secret is the RSA key's public text (the HS/RS confusion)."""
    header = {"alg": "HS256", "typ": "JWT", **({"kid": kid} if kid else {})}
    signing_input = b64url(json.dumps(header).encode()) + "." + b64url(json.dumps(PAYLOAD).encode())
    tag = hmac.new(public_text, signing_input.encode(), hashlib.sha256).digest()
    return signing_input + "." + b64url(tag)


@pytest.mark.parametrize("algorithms", [None, ["RS256", "HS256"], [*RSA_ALGS, "HS256"]])
def test_hs256_with_an_rsa_jwk_is_refused(
    rsa_private: rsa.RSAPrivateKey, algorithms: list[str] | None
) -> None:
    jwk = alg_less_jwk(rsa_private)
    verifier = JWTVerifier(keys=[Key.jwk(jwk)], algorithms=algorithms)
    assert "HS256" not in verifier.algorithms
    pem = rsa_private.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    for secret in (pem, json.dumps(jwk).encode(), jwk["n"].encode()):
        for kid in ("k1", None):
            with pytest.raises(TokenRejectedError) as caught:
                verifier.verify(forged_hs256(secret, kid), now=NOW)
            assert caught.value.reason == "algorithm"


def test_alg_less_rsa_jwk_still_enforces_rsa_size_rules() -> None:
    small = rsa.generate_private_key(public_exponent=65537, key_size=1024)
    from grelmicro.jwt import WeakKeyError  # noqa: PLC0415

    with pytest.raises(WeakKeyError):
        Key.jwk(alg_less_jwk(small))
    # In a JWKS the weak key is skipped, leaving nothing usable.
    with pytest.raises(InvalidKeyError, match="no usable key"):
        JWTVerifier(jwks={"keys": [alg_less_jwk(small)]}, algorithms=["PS256"])


@pytest.mark.parametrize("alg", ["RS384", "RS512", "PS256", "PS384", "PS512"])
def test_alg_less_rsa_in_a_jwks_document(rsa_private: rsa.RSAPrivateKey, alg: str) -> None:
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    document = {"keys": [alg_less_jwk(rsa_private, "k1"), alg_less_jwk(other, "k2")]}
    verifier = JWTVerifier(jwks=document, algorithms=RSA_ALGS)
    assert verifier.verify(mint(rsa_private, alg, "k1"), now=NOW)
    assert verifier.verify(mint(other, alg, "k2"), now=NOW)
    # Kid matching still decides: k2's signature under k1's kid fails.
    with pytest.raises(TokenRejectedError) as caught:
        verifier.verify(mint(other, alg, "k1"), now=NOW)
    assert caught.value.reason == "signature"
    # Two candidates and no kid: refused, never "try both".
    with pytest.raises(TokenRejectedError) as caught:
        verifier.verify(mint(rsa_private, alg, None), now=NOW)
    assert caught.value.reason == "unknown-key"


def test_alg_less_rsa_from_jwks_url_and_discovery(
    server: DocumentServer, rsa_private: rsa.RSAPrivateKey
) -> None:
    server.set("/jwks", {"keys": [alg_less_jwk(rsa_private)]})
    by_url = JWTVerifier(
        jwks_url=server.url("/jwks"),
        allow_insecure_loopback=True,
        algorithms=RSA_ALGS,
        fetch=FAST,
    )
    issuer = server.url("/idp")
    server.set(
        "/idp/.well-known/openid-configuration",
        {"issuer": issuer, "jwks_uri": server.url("/jwks")},
    )
    discovered = JWTVerifier(
        discover=issuer, allow_insecure_loopback=True, algorithms=RSA_ALGS, fetch=FAST
    )
    try:
        for alg in RSA_ALGS:
            assert by_url.verify(mint(rsa_private, alg), now=NOW)
            token = pyjwt.encode(
                {**PAYLOAD, "iss": issuer}, rsa_private, algorithm=alg, headers={"kid": "k1"}
            )
            assert discovered.verify(token, now=NOW)["iss"] == issuer
        # The one-key JWKS verifies kid-less tokens too.
        assert by_url.verify(mint(rsa_private, "PS512", None), now=NOW)
        with pytest.raises(TokenRejectedError) as caught:
            by_url.verify(forged_hs256(b"anything-at-all-32-bytes-long-xx"), now=NOW)
        assert caught.value.reason == "algorithm"
    finally:
        by_url.close()
        discovered.close()


def test_alg_less_rsa_from_jwks_url_without_algorithms_means_rs256(
    server: DocumentServer, rsa_private: rsa.RSAPrivateKey
) -> None:
    server.set("/jwks", {"keys": [alg_less_jwk(rsa_private)]})
    verifier = JWTVerifier(jwks_url=server.url("/jwks"), allow_insecure_loopback=True, fetch=FAST)
    try:
        assert verifier.verify(mint(rsa_private, "RS256"), now=NOW)
        with pytest.raises(TokenRejectedError, match="RS256 only") as caught:
            verifier.verify(mint(rsa_private, "PS256"), now=NOW)
        assert caught.value.reason == "algorithm"
    finally:
        verifier.close()


# --- oct: the allowed HS*, only where symmetric keys are allowed ------------


def test_alg_less_oct_jwks_in_code_with_the_opt_in() -> None:
    secret = bytes(range(64))
    jwk = {"kty": "oct", "kid": "s1", "k": b64url(secret)}
    verifier = JWTVerifier(
        jwks={"keys": [jwk]}, allow_symmetric=True, algorithms=["HS256", "HS384", "HS512"]
    )
    for alg in ("HS256", "HS384", "HS512"):
        token = pyjwt.encode(PAYLOAD, secret, algorithm=alg, headers={"kid": "s1"})
        assert verifier.verify(token, now=NOW)
    # Without algorithms=, HS256 alone.
    default = JWTVerifier(jwks={"keys": [jwk]}, allow_symmetric=True)
    assert default.algorithms == ("HS256",)
    token = pyjwt.encode(PAYLOAD, secret, algorithm="HS512", headers={"kid": "s1"})
    with pytest.raises(TokenRejectedError, match="HS256 only"):
        default.verify(token, now=NOW)
    # A 32-byte secret is too short for HS512: not in its family.
    short = Key.jwk({"kty": "oct", "k": b64url(secret[:32])}, allow_symmetric=True)
    assert short.algorithms == ("HS256",)
    # Never without the opt-in.
    with pytest.raises(InvalidKeyError):
        JWTVerifier(jwks={"keys": [jwk]})


def test_alg_less_oct_keys_are_never_taken_from_a_url(server: DocumentServer) -> None:
    rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    server.set(
        "/jwks",
        {"keys": [{"kty": "oct", "kid": "s1", "k": b64url(bytes(64))}, alg_less_jwk(rsa_key)]},
    )
    verifier = JWTVerifier(
        jwks_url=server.url("/jwks"),
        allow_insecure_loopback=True,
        algorithms=["HS256", "RS256"],
        fetch=FAST,
    )
    try:
        token = pyjwt.encode(PAYLOAD, bytes(64), algorithm="HS256", headers={"kid": "s1"})
        with pytest.raises(TokenRejectedError):
            verifier.verify(token, now=NOW)
        health = verifier.health()
        assert health.key_count == 1
        assert [kid for kid, _ in health.skipped_keys] == ["s1"]
    finally:
        verifier.close()


# --- EC coordinates shorter than the curve size -----------------------------


def p521_with_stripped_x() -> tuple[ec.EllipticCurvePrivateKey, dict[str, Any]]:
    """A P-521 key whose x has a leading zero byte, exported with it stripped.

    The private scalar 1 makes the public key the curve's generator, whose
    x starts with a zero byte: deterministic, no search for a lucky key.
    """
    private = ec.derive_private_key(1, ec.SECP521R1())
    jwk: dict[str, Any] = ECAlgorithm.to_jwk(private.public_key(), as_dict=True)
    x = base64.urlsafe_b64decode(jwk["x"] + "==")
    assert len(x) == 66
    assert x[0] == 0
    jwk["x"] = b64url(x[1:])  # what some libraries export (65 bytes)
    jwk["kid"] = "p521"
    return private, jwk


def test_short_p521_coordinate_is_padded_and_logged_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    private, jwk = p521_with_stripped_x()
    with caplog.at_level(logging.INFO, logger="grelmicro.jwt"):
        key = Key.jwk(jwk)
        Key.jwk(jwk)
        JWTVerifier(jwks={"keys": [jwk]})
    padded = [r for r in caplog.records if "left-padded" in r.getMessage()]
    assert len(padded) == 1
    assert padded[0].levelno == logging.INFO
    assert padded[0].jwt_event == "keys.key_padded"  # type: ignore[attr-defined]
    assert jwk["x"] not in padded[0].getMessage()
    assert key.algorithm == "ES512"
    token = pyjwt.encode(PAYLOAD, private, algorithm="ES512", headers={"kid": "p521"})
    assert JWTVerifier(keys=[key]).verify(token, now=NOW)
    assert JWTVerifier(jwks={"keys": [jwk]}).verify(token, now=NOW)


def test_long_ec_coordinate_stays_refused() -> None:
    _, jwk = p521_with_stripped_x()
    x = base64.urlsafe_b64decode(jwk["x"] + "==")
    jwk["x"] = b64url(b"\0\0" + x)  # 67 bytes: longer than the curve size
    with pytest.raises(InvalidKeyError, match="wrong length"):
        Key.jwk(jwk)


def test_short_coordinate_from_a_url_verifies(
    server: DocumentServer, caplog: pytest.LogCaptureFixture
) -> None:
    private, jwk = p521_with_stripped_x()
    server.set("/jwks", {"keys": [jwk]})
    verifier = JWTVerifier(jwks_url=server.url("/jwks"), allow_insecure_loopback=True, fetch=FAST)
    try:
        token = pyjwt.encode(PAYLOAD, private, algorithm="ES512", headers={"kid": "p521"})
        with caplog.at_level(logging.INFO, logger="grelmicro.jwt"):
            assert verifier.verify(token, now=NOW)
        assert verifier.health().skipped_keys == ()
        padded = [r for r in caplog.records if "left-padded" in r.getMessage()]
        assert [r.jwt_event for r in padded] == ["keys.key_padded"]  # type: ignore[attr-defined]
        assert padded[0].jwt_kid == "p521"  # type: ignore[attr-defined]
    finally:
        verifier.close()


# --- every key dropped from a fetched JWKS shows in health() ----------------


def test_dropped_keys_are_counted_with_their_reason(server: DocumentServer) -> None:
    good = ec.generate_private_key(ec.SECP256R1())
    good_jwk: dict[str, Any] = ECAlgorithm.to_jwk(good.public_key(), as_dict=True)
    good_jwk["kid"] = "good"
    server.set(
        "/jwks",
        {
            "keys": [
                good_jwk,
                {"kty": "FOO", "kid": "future"},
                {**good_jwk, "kid": "enc", "use": "enc"},
                {"kty": "RSA", "kid": "tiny", "n": "AQAB", "e": "AQAB"},
            ]
        },
    )
    verifier = JWTVerifier(jwks_url=server.url("/jwks"), allow_insecure_loopback=True, fetch=FAST)
    try:
        token = pyjwt.encode(PAYLOAD, good, algorithm="ES256", headers={"kid": "good"})
        assert verifier.verify(token, now=NOW)
        skipped = dict(verifier.health().skipped_keys)
        assert len(skipped) == 3
        assert set(skipped) == {"future", "enc", "tiny"}
        assert "kty" in skipped["future"]
        assert "use" in skipped["enc"]
        assert "RSA modulus" in skipped["tiny"]
    finally:
        verifier.close()


# --- the cache across a rotation that adds a key of the family --------------


def test_adding_a_key_an_alg_less_key_shared_drops_the_cache(
    rsa_private: rsa.RSAPrivateKey,
) -> None:
    """A kid-less PS256 token verified by the alg-less key becomes ambiguous
    once a second PS256 key is added: no cached result may outlive that."""
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pss = RSAAlgorithm.to_jwk(other.public_key(), as_dict=True)
    pss.update(alg="PS256", kid="k2")
    verifier = JWTVerifier(keys=[Key.jwk(alg_less_jwk(rsa_private))], algorithms=RSA_ALGS)
    token = mint(rsa_private, "PS256", None)
    assert verifier.verify(token, now=NOW)
    verifier.rotate(keys=[Key.jwk(alg_less_jwk(rsa_private)), Key.jwk(pss)])
    with pytest.raises(TokenRejectedError) as caught:
        verifier.verify(token, now=NOW)
    assert caught.value.reason == "unknown-key"


def test_keys_dropped_from_a_jwks_given_in_code_show_in_health() -> None:
    good = ec.generate_private_key(ec.SECP256R1())
    good_jwk: dict[str, Any] = ECAlgorithm.to_jwk(good.public_key(), as_dict=True)
    good_jwk["kid"] = "good"
    other = ec.generate_private_key(ec.SECP256R1())
    twin: dict[str, Any] = ECAlgorithm.to_jwk(other.public_key(), as_dict=True)
    document = {"keys": [good_jwk, {"kty": "FOO", "kid": "future"}, {**twin, "kid": "dup"}]}
    verifier = JWTVerifier(jwks=document)
    assert [kid for kid, _ in verifier.health().skipped_keys] == ["future"]
    # Combined with keys given in code: a kid two keys claim is listed too.
    clash = Key.jwk({**good_jwk, "kid": "dup"})
    verifier.rotate(keys=[clash], jwks=document)
    skipped = dict(verifier.health().skipped_keys)
    assert set(skipped) == {"future", "dup"}
    assert "two different keys" in skipped["dup"]
    assert JWTVerifier(keys=[clash]).health().skipped_keys == ()
