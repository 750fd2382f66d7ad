"""Keys (``_keys.py``): every key source, algorithms, selection, refusals at build time."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

import pytest
from forge import NOW, SECRET, Signer, hmac_key, private_key, tamper
from support import OK, outcome, rejected

from grelmicro.jwt import (
    Claims,
    ConfigurationError,
    InvalidKeyError,
    InvalidSignatureError,
    JWTVerifier,
    Key,
    UnknownKeyError,
    WeakKeyError,
)

# -- keys and JWKS -------------------------------------------------------------------


def key_sources(signer: Signer) -> dict[str, dict[str, Any]]:
    jwk = signer.public_jwk()
    return {
        "Key.pem": {"keys": [Key.pem(signer.public_pem(), signer.alg, kid=signer.kid)]},
        "Key.pem-str": {
            "keys": [Key.pem(signer.public_pem().decode(), signer.alg, kid=signer.kid)]
        },
        "Key.jwk-mapping": {"keys": [Key.jwk(jwk)]},
        "Key.jwk-text": {"keys": [Key.jwk(json.dumps(jwk))]},
        "single-Key": {"keys": Key.jwk(jwk)},
        "jwks-mapping": {"jwks": {"keys": [jwk]}},
        "jwks-str": {"jwks": json.dumps({"keys": [jwk]})},
        "jwks-bytes": {"jwks": json.dumps({"keys": [jwk]}).encode()},
    }


@pytest.mark.parametrize(
    "source",
    [
        "Key.pem",
        "Key.pem-str",
        "Key.jwk-mapping",
        "Key.jwk-text",
        "single-Key",
        "jwks-mapping",
        "jwks-str",
        "jwks-bytes",
    ],
)
def test_every_key_source_verifies(source: str, asymmetric: Signer):
    verifier = JWTVerifier(**key_sources(asymmetric)[source])
    text = asymmetric.mint({"exp": NOW + 60, "sub": "k"})

    assert verifier.verify(text, now=NOW).subject == "k"
    assert asymmetric.alg in verifier.algorithms
    assert outcome(verifier, tamper(text)) == rejected(InvalidSignatureError, "signature")


@pytest.mark.parametrize("algorithm", ["HS256", "HS384", "HS512"])
def test_hmac_algorithms(algorithm: str):
    signer = hmac_key(algorithm, secret=SECRET + b"-" * 20)
    verifier = JWTVerifier([Key.secret(SECRET + b"-" * 20, algorithm)])

    assert verifier.verify(signer.mint({"exp": NOW + 1}), now=NOW).get("exp") == NOW + 1


@pytest.mark.parametrize(
    "algorithm", ["RS384", "RS512", "PS384", "PS512", "ES384", "ES512", "ES256K", "Ed25519"]
)
def test_other_asymmetric_algorithms(algorithm: str):
    signer = private_key(algorithm)
    verifier = JWTVerifier([Key.pem(signer.public_pem(), algorithm)])

    assert verifier.verify(signer.mint({"exp": NOW + 1}), now=NOW).get("exp") == NOW + 1


def test_symmetric_jwks_needs_allow_symmetric():
    jwks = {"keys": [hmac_key(kid="h1").public_jwk()]}

    with pytest.raises(InvalidKeyError) as caught:
        JWTVerifier(jwks=jwks)
    verifier = JWTVerifier(jwks=jwks, allow_symmetric=True)

    assert verifier.verify(hmac_key(kid="h1").mint({"exp": NOW + 1}), now=NOW)["exp"] == NOW + 1
    assert "TOPSECRET" not in str(caught.value)


def test_jwks_skips_an_unusable_key_and_logs_it(caplog: pytest.LogCaptureFixture):
    rsa = private_key("RS256", kid="r1")
    jwks = {"keys": [hmac_key(kid="h1").public_jwk(), rsa.public_jwk()]}

    with caplog.at_level(logging.WARNING, logger="grelmicro.jwt"):
        verifier = JWTVerifier(jwks=jwks)

    assert verifier.algorithms == ("RS256",)
    assert verifier.verify(rsa.mint({"exp": NOW + 1}), now=NOW)["exp"] == NOW + 1
    assert len(caplog.records) == 1
    assert "'h1'" in caplog.records[0].getMessage()
    assert "symmetric" in caplog.records[0].getMessage()
    assert hmac_key().public_jwk()["k"] not in caplog.records[0].getMessage()


def test_keys_and_jwks_combine():
    rsa = private_key("RS256", kid="r1")
    verifier = JWTVerifier([Key.secret(SECRET, kid="h1")], jwks={"keys": [rsa.public_jwk()]})

    assert verifier.verify(rsa.mint({"exp": NOW + 1}), now=NOW)["exp"] == NOW + 1
    assert verifier.verify(hmac_key(kid="h1").mint({"exp": NOW + 2}), now=NOW)["exp"] == NOW + 2


@pytest.mark.parametrize(
    ("configured_kid", "token_kid", "expected"),
    [
        pytest.param("k1", "k1", OK, id="kid-match"),
        pytest.param("k1", "k2", rejected(UnknownKeyError, "unknown-key"), id="kid-mismatch"),
        # design.md §3: a kid-less token takes the only key that could verify it.
        pytest.param("k1", None, OK, id="token-lacks-kid-one-key"),
        pytest.param(None, "anything", OK, id="key-without-kid-takes-any"),
        pytest.param(None, None, OK, id="neither-has-kid"),
    ],
)
def test_key_selection_by_kid(
    configured_kid: str | None, token_kid: str | None, expected: tuple[str, str] | None
):
    verifier = JWTVerifier([Key.secret(SECRET, kid=configured_kid)])
    text = hmac_key(kid=token_kid).mint({"exp": NOW + 1})

    result = outcome(verifier, text)

    assert isinstance(result, Claims) if expected is None else result == expected


def test_wrong_key_is_a_signature_error(make_verifier: Callable[..., JWTVerifier]):
    other = hmac_key(secret=b"another-secret-of-sufficient-length-0000")

    assert outcome(make_verifier(), other.mint({"exp": NOW + 1})) == rejected(
        InvalidSignatureError, "signature"
    )


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        pytest.param(None, "keys", id="none"),
        pytest.param([], "keys", id="empty"),
        pytest.param(["not a key"], "Key", id="not-a-Key"),
    ],
)
def test_no_usable_keys_is_a_configuration_error(keys: Any, message: str):
    with pytest.raises(ConfigurationError, match=message):
        JWTVerifier(keys)


@pytest.mark.parametrize(
    ("build", "error"),
    [
        pytest.param(lambda: Key.secret(b"TOPSECRET-short"), WeakKeyError, id="short-secret"),
        pytest.param(lambda: Key.secret(SECRET, "RS256"), InvalidKeyError, id="secret-for-rsa"),
        pytest.param(
            lambda: Key.pem(
                b"-----BEGIN PUBLIC KEY-----\nTOPSECRET\n-----END PUBLIC KEY-----\n", "RS256"
            ),
            InvalidKeyError,
            id="garbage-pem",
        ),
        pytest.param(
            lambda: Key.pem(private_key("ES384").public_pem(), "ES256"),
            InvalidKeyError,
            id="p384-for-es256",
        ),
        pytest.param(
            lambda: Key.jwk({"kty": "oct", "k": "VE9QU0VDUkVU"}, "HS256"),
            InvalidKeyError,
            id="oct-jwk-not-allowed",
        ),
        pytest.param(
            lambda: Key.jwk({"kty": "RSA", "n": "TOPSECRET!", "e": "AQAB"}, "RS256"),
            InvalidKeyError,
            id="jwk-bad-base64",
        ),
        pytest.param(lambda: Key.jwk(42), InvalidKeyError, id="jwk-not-a-mapping"),  # type: ignore[arg-type]
        pytest.param(lambda: Key.secret(SECRET, 256), ConfigurationError, id="alg-not-str"),  # type: ignore[arg-type]
        pytest.param(lambda: Key.secret(SECRET, kid=1), ConfigurationError, id="kid-not-str"),  # type: ignore[arg-type]
        pytest.param(lambda: JWTVerifier(jwks="TOPSECRET{"), InvalidKeyError, id="jwks-not-json"),
        pytest.param(lambda: JWTVerifier(jwks=5), InvalidKeyError, id="jwks-int"),  # type: ignore[arg-type]
    ],
)
def test_bad_keys_fail_at_build_time_without_echoing_material(
    build: Callable[[], object], error: type[ConfigurationError]
):
    with pytest.raises(error) as caught:
        build()

    assert type(caught.value) is error
    assert "TOPSECRET" not in str(caught.value)


def test_rsa_under_2048_bits_is_weak():
    rsa = pytest.importorskip("cryptography.hazmat.primitives.asymmetric.rsa")

    small = Signer(
        "RS256", rsa.generate_private_key(public_exponent=65537, key_size=1024), None, "JWT"
    )

    with pytest.raises(WeakKeyError, match="2048"):
        Key.pem(small.public_pem(), "RS256")


def test_private_key_is_refused_where_a_public_key_is_expected():
    serialization = pytest.importorskip("cryptography.hazmat.primitives.serialization")

    private_pem = private_key("RS256").private.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )

    with pytest.raises(InvalidKeyError, match="private") as caught:
        Key.pem(private_pem, "RS256")
    assert "PRIVATE KEY" not in str(caught.value)
