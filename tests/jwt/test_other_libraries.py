"""Tokens and keys from other JOSE libraries: joserfc, authlib and jwcrypto.

Each library generates its own keys, exports the public JWK and the JWKS
itself (never built here by hand) and signs the tokens. None of the three
adds ``alg`` to an exported RSA JWK (asserted below), so the RSA keys are
used as providers publish them: alg-less, with the verifier's
``algorithms=`` naming the RSA algorithm. Keys reach the verifier through
``Key.jwk``, ``jwks=`` and a real JWKS server on 127.0.0.1.

authlib exports EC coordinates without their leading zero bytes (most P-521
keys, a few P-256/secp256k1 keys): those are searched for among keys
authlib generates, with a bound, and must verify, left-padded.
"""

from __future__ import annotations

import base64
import json
import logging
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from forge import NOW
from joserfc import jwk as joserfc_jwk
from joserfc import jwt as joserfc_jwt
from jwcrypto import jwk as jwcrypto_jwk
from jwcrypto import jwt as jwcrypto_jwt
from servers import DocumentServer

from grelmicro.jwt import FetchOptions, JWTVerifier, Key, TokenRejectedError

with warnings.catch_warnings():
    # authlib.jose warns on import that joserfc succeeds it (it is still
    # shipped); authlib.deprecate turns that warning on when imported.
    import authlib.deprecate  # noqa: F401

    warnings.simplefilter("ignore")
    from authlib import jose as authlib_jose

FAST = FetchOptions(connect_timeout=1, read_timeout=1, total_timeout=2, jitter=0)
RSA_ALGS = ["RS256", "RS384", "RS512", "PS256", "PS384", "PS512"]
EC_CURVES = {"ES256": "P-256", "ES384": "P-384", "ES512": "P-521", "ES256K": "secp256k1"}
ALL_ALGS = [*RSA_ALGS, *EC_CURVES, "EdDSA", "Ed25519"]
PAYLOAD = {"sub": "user-1", "exp": NOW + 600}


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def coordinate_size(jwk: dict[str, Any], name: str) -> int:
    return len(base64.urlsafe_b64decode(jwk[name] + "=" * (-len(jwk[name]) % 4)))


def family(alg: str) -> tuple[str, str | None]:
    """The key type and curve a library generates for ``alg``."""
    if alg in RSA_ALGS:
        return "RSA", None
    if alg in EC_CURVES:
        return "EC", EC_CURVES[alg]
    return "OKP", "Ed25519"


# --- the three libraries, each through its own API --------------------------


@dataclass(frozen=True)
class Library:
    """One library's key generation, public exports and signing."""

    name: str
    generate: Callable[[str, str | None, str], Any]  # kty, curve, kid -> private key
    export: Callable[[Any], dict[str, Any]]  # the public JWK, as the library exports it
    export_set: Callable[[list[Any]], dict[str, Any]]  # the public JWKS
    sign: Callable[[Any, str, str, dict[str, Any]], str]  # key, alg, kid, claims
    algorithms: tuple[str, ...]


def _joserfc_generate(kty: str, curve: str | None, kid: str) -> Any:
    parameters = {"kid": kid}
    if kty == "RSA":
        return joserfc_jwk.RSAKey.generate_key(2048, parameters=parameters)
    if kty == "EC":
        return joserfc_jwk.ECKey.generate_key(curve, parameters=parameters)
    return joserfc_jwk.OKPKey.generate_key(curve, parameters=parameters)


def _joserfc_sign(key: Any, alg: str, kid: str, claims: dict[str, Any]) -> str:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # joserfc warns that "EdDSA" is deprecated (RFC 9864)
        # joserfc signs its "not recommended" algorithms only when named.
        return joserfc_jwt.encode({"alg": alg, "kid": kid}, claims, key, algorithms=[alg])


JOSERFC = Library(
    name="joserfc",
    generate=_joserfc_generate,
    export=lambda key: dict(key.as_dict(private=False)),
    export_set=lambda keys: dict(joserfc_jwk.KeySet(keys).as_dict(private=False)),
    sign=_joserfc_sign,
    algorithms=(*RSA_ALGS, *EC_CURVES, "EdDSA", "Ed25519"),
)


def _authlib_generate(kty: str, curve: str | None, kid: str) -> Any:
    size = 2048 if kty == "RSA" else curve
    return authlib_jose.JsonWebKey.generate_key(kty, size, options={"kid": kid}, is_private=True)


def _authlib_sign(key: Any, alg: str, kid: str, claims: dict[str, Any]) -> str:
    token = authlib_jose.jwt.encode({"alg": alg, "kid": kid}, claims, key).decode()
    # authlib puts the key's own kid in the header, whatever the header said.
    header = json.loads(base64.urlsafe_b64decode(token.split(".")[0] + "=="))
    assert header["kid"] == kid, "sign with a key of that kid"
    return str(token)


AUTHLIB = Library(
    name="authlib",
    generate=_authlib_generate,
    export=lambda key: dict(key.as_dict(is_private=False)),
    export_set=lambda keys: dict(authlib_jose.KeySet(keys).as_dict(is_private=False)),
    sign=_authlib_sign,
    algorithms=(*RSA_ALGS, *EC_CURVES, "EdDSA"),  # authlib has no "Ed25519" name
)


def _jwcrypto_generate(kty: str, curve: str | None, kid: str) -> Any:
    if kty == "RSA":
        return jwcrypto_jwk.JWK.generate(kty="RSA", size=2048, kid=kid)
    return jwcrypto_jwk.JWK.generate(kty=kty, crv=curve, kid=kid)


def _jwcrypto_export_set(keys: list[Any]) -> dict[str, Any]:
    key_set = jwcrypto_jwk.JWKSet()
    for key in keys:
        key_set.add(key)
    document: dict[str, Any] = json.loads(key_set.export(private_keys=False))
    return document


def _jwcrypto_sign(key: Any, alg: str, kid: str, claims: dict[str, Any]) -> str:
    token = jwcrypto_jwt.JWT(header={"alg": alg, "kid": kid}, claims=claims)
    token.make_signed_token(key)
    return str(token.serialize())


JWCRYPTO = Library(
    name="jwcrypto",
    generate=_jwcrypto_generate,
    export=lambda key: dict(key.export_public(as_dict=True)),
    export_set=_jwcrypto_export_set,
    sign=_jwcrypto_sign,
    algorithms=(*RSA_ALGS, *EC_CURVES, "EdDSA", "Ed25519"),
)

LIBRARIES = {lib.name: lib for lib in (JOSERFC, AUTHLIB, JWCRYPTO)}
CASES = [(lib.name, alg) for lib in LIBRARIES.values() for alg in lib.algorithms]


class Keys:
    """One key per key type and curve and library, generated once per module."""

    def __init__(self) -> None:
        self.held: dict[tuple[str, str, str | None], Any] = {}

    def get(self, lib: Library, alg: str) -> tuple[Any, str]:
        kty, curve = family(alg)
        kid = f"{lib.name}-{kty}-{curve or 'rsa'}".lower()
        if (lib.name, kty, curve) not in self.held:
            self.held[lib.name, kty, curve] = lib.generate(kty, curve, kid)
        return self.held[lib.name, kty, curve], kid

    def all_of(self, lib: Library) -> list[Any]:
        for alg in lib.algorithms:
            self.get(lib, alg)
        return [key for (name, _, _), key in self.held.items() if name == lib.name]


@pytest.fixture(scope="module")
def keys() -> Keys:
    return Keys()


def exported(lib: Library, key: Any, kid: str) -> dict[str, Any]:
    """The library's export of the public key: its own kid, no ``alg``, no private part."""
    jwk = lib.export(key)
    assert jwk["kid"] == kid
    assert "alg" not in jwk  # none of the three adds it: nothing to strip
    assert not {"d", "p", "q"} & set(jwk)
    return jwk


# --- every algorithm, every key source --------------------------------------


@pytest.mark.parametrize(("name", "alg"), CASES)
def test_library_minted_token_verifies_from_each_key_source(
    keys: Keys, server: DocumentServer, name: str, alg: str
) -> None:
    lib = LIBRARIES[name]
    key, kid = keys.get(lib, alg)
    token = lib.sign(key, alg, kid, PAYLOAD)
    jwk = exported(lib, key, kid)
    document = lib.export_set(keys.all_of(lib))
    assert len(document["keys"]) == 6  # RSA, four curves, Ed25519
    # RSA: the alg-less key serves the one the verifier names.
    named = [alg] if alg in RSA_ALGS else None
    assert JWTVerifier(keys=[Key.jwk(jwk)], algorithms=named).verify(token, now=NOW)["sub"] == (
        "user-1"
    )
    assert JWTVerifier(jwks=document, algorithms=ALL_ALGS).verify(token, now=NOW)["sub"] == (
        "user-1"
    )
    server.set("/jwks", document)
    by_url = JWTVerifier(
        jwks_url=server.url("/jwks"), allow_insecure_loopback=True, algorithms=ALL_ALGS, fetch=FAST
    )
    try:
        assert by_url.verify(token, now=NOW)["sub"] == "user-1"
        health = by_url.health()
        assert (health.key_count, health.skipped_keys) == (6, ())
    finally:
        by_url.close()


@pytest.mark.parametrize("name", LIBRARIES)
def test_alg_less_rsa_key_of_a_library_without_algorithms_is_rs256_only(
    keys: Keys, name: str
) -> None:
    lib = LIBRARIES[name]
    key, kid = keys.get(lib, "RS256")
    default = JWTVerifier(keys=[Key.jwk(exported(lib, key, kid))])
    assert default.algorithms == ("RS256",)
    assert default.verify(lib.sign(key, "RS256", kid, PAYLOAD), now=NOW)
    with pytest.raises(TokenRejectedError) as caught:
        default.verify(lib.sign(key, "PS256", kid, PAYLOAD), now=NOW)
    assert caught.value.reason == "algorithm"
    # The refusal names the default and what to pass.
    assert "RS256 only" in str(caught.value)
    assert "algorithms=" in str(caught.value)
    # Naming RS256 alone refuses PS256 just the same.
    rs256 = JWTVerifier(jwks=lib.export_set([key]), algorithms=["RS256"])
    with pytest.raises(TokenRejectedError) as caught:
        rs256.verify(lib.sign(key, "PS256", kid, PAYLOAD), now=NOW)
    assert caught.value.reason == "algorithm"


# --- HS256 signed with the RSA public key's bytes ---------------------------


def hs256_with_public_bytes(lib: Library, rsa_key: Any, kid: str) -> list[str]:
    """HS256 tokens the library signs with the RSA public key's bytes as secret.

    joserfc and authlib refuse PEM and DER text as an HMAC secret
    themselves; they take the public JWK's JSON text and the modulus bytes.
    jwcrypto takes the PEM too.
    """
    jwk = exported(lib, rsa_key, kid)
    modulus = base64.urlsafe_b64decode(jwk["n"] + "==")
    secrets = [json.dumps(jwk).encode(), modulus]
    if lib is JWCRYPTO:
        secrets.append(rsa_key.export_to_pem())
    tokens = []
    for secret in secrets:
        if lib is JOSERFC:
            tokens.append(lib.sign(joserfc_jwk.OctKey.import_key(secret), "HS256", kid, PAYLOAD))
        elif lib is AUTHLIB:
            tokens.append(lib.sign(authlib_jose.OctKey.import_key(secret), "HS256", kid, PAYLOAD))
        else:
            oct_key = jwcrypto_jwk.JWK(kty="oct", k=b64url(secret))
            tokens.append(lib.sign(oct_key, "HS256", kid, PAYLOAD))
    return tokens


@pytest.mark.parametrize("name", LIBRARIES)
def test_hs256_signed_with_the_rsa_public_key_is_refused(
    keys: Keys, server: DocumentServer, name: str
) -> None:
    lib = LIBRARIES[name]
    key, kid = keys.get(lib, "RS256")
    tokens = hs256_with_public_bytes(lib, key, kid)
    document = lib.export_set([key])
    server.set("/jwks", document)
    by_url = JWTVerifier(
        jwks_url=server.url("/jwks"),
        allow_insecure_loopback=True,
        algorithms=[*RSA_ALGS, "HS256"],
        fetch=FAST,
    )
    verifiers = [
        JWTVerifier(keys=[Key.jwk(exported(lib, key, kid))], algorithms=[*RSA_ALGS, "HS256"]),
        JWTVerifier(jwks=document, algorithms=[*RSA_ALGS, "HS256"]),
        by_url,
    ]
    try:
        for verifier in verifiers:
            assert "HS256" not in verifier.algorithms
            for token in tokens:
                with pytest.raises(TokenRejectedError) as caught:
                    verifier.verify(token, now=NOW)
                assert caught.value.reason == "algorithm"
            # The same verifier does accept the key's genuine tokens.
            assert verifier.verify(lib.sign(key, "PS384", kid, PAYLOAD), now=NOW)
    finally:
        by_url.close()


# --- authlib's short EC coordinates -----------------------------------------

#: Per curve: the coordinate size, and how many authlib keys to try before
#: giving up (a short coordinate comes with ~75% of P-521 keys and ~0.8% of
#: P-256/secp256k1 keys: failing to find one is below 1e-16).
SHORT_SEARCH = {"ES512": (66, 200), "ES256": (32, 5000), "ES256K": (32, 5000)}


def authlib_key_with_short_coordinate(alg: str, kid: str) -> tuple[Any, dict[str, Any]]:
    size, tries = SHORT_SEARCH[alg]
    for _ in range(tries):
        key = AUTHLIB.generate("EC", EC_CURVES[alg], kid)
        jwk = AUTHLIB.export(key)
        if min(coordinate_size(jwk, "x"), coordinate_size(jwk, "y")) < size:
            return key, jwk
    raise AssertionError(f"authlib exported no short {alg} coordinate in {tries} keys")


@pytest.mark.parametrize("alg", list(SHORT_SEARCH))
def test_authlib_short_ec_coordinates_are_padded_and_verify(
    server: DocumentServer, caplog: pytest.LogCaptureFixture, alg: str
) -> None:
    kid = f"short-{alg.lower()}"
    key, jwk = authlib_key_with_short_coordinate(alg, kid)
    token = AUTHLIB.sign(key, alg, kid, PAYLOAD)
    with caplog.at_level(logging.INFO, logger="grelmicro.jwt"):
        parsed = Key.jwk(jwk)
    padded = [r for r in caplog.records if "left-padded" in r.getMessage()]
    assert len(padded) == 1
    assert padded[0].levelno == logging.INFO
    assert kid in padded[0].getMessage()
    assert jwk["x"] not in padded[0].getMessage()
    assert jwk["y"] not in padded[0].getMessage()
    # The same key as another library exports it, full length: one fingerprint.
    full = dict(joserfc_jwk.ECKey.import_key(key.get_public_key()).as_dict(private=False))
    assert coordinate_size(full, "x") == coordinate_size(full, "y") == SHORT_SEARCH[alg][0]
    assert Key.jwk({**full, "kid": kid}).fingerprint == parsed.fingerprint

    assert JWTVerifier(keys=[parsed]).verify(token, now=NOW)["sub"] == "user-1"
    document = AUTHLIB.export_set([key])
    assert JWTVerifier(jwks=document).verify(token, now=NOW)["sub"] == "user-1"
    server.set("/jwks", document)
    by_url = JWTVerifier(jwks_url=server.url("/jwks"), allow_insecure_loopback=True, fetch=FAST)
    try:
        assert by_url.verify(token, now=NOW)["sub"] == "user-1"
        assert by_url.health().skipped_keys == ()
    finally:
        by_url.close()


def test_authlib_p521_from_a_scalar_whose_x_starts_with_zero() -> None:
    """Deterministic: the scalar 1 gives the generator, whose x has a zero first byte."""
    from cryptography.hazmat.primitives.asymmetric import ec  # noqa: PLC0415

    pem = ec.derive_private_key(1, ec.SECP521R1()).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    key = authlib_jose.ECKey.import_key(pem, {"kid": "generator"})
    jwk = AUTHLIB.export(key)
    assert coordinate_size(jwk, "x") < 66
    token = AUTHLIB.sign(key, "ES512", "generator", PAYLOAD)
    assert JWTVerifier(jwks={"keys": [jwk]}).verify(token, now=NOW)["sub"] == "user-1"
    # A coordinate longer than the curve size stays refused: that key is
    # dropped (and shown in health()), the short one kept.
    x = base64.urlsafe_b64decode(jwk["x"] + "==")
    long_x = {**jwk, "kid": "long", "x": b64url(bytes(3) + x)}
    verifier = JWTVerifier(jwks={"keys": [jwk, long_x]})
    assert [kid for kid, _ in verifier.health().skipped_keys] == ["long"]
    long_key = authlib_jose.ECKey.import_key(pem, {"kid": "long"})
    with pytest.raises(TokenRejectedError) as caught:
        verifier.verify(AUTHLIB.sign(long_key, "ES512", "long", PAYLOAD), now=NOW)
    assert caught.value.reason == "unknown-key"
    assert verifier.verify(token, now=NOW)["sub"] == "user-1"


@pytest.mark.parametrize(
    ("published_alg", "algorithms"), [(None, None), ("RS256", ["RS256", "PS256"])]
)
def test_repeated_tokens_of_an_alg_the_known_key_does_not_serve_are_401(
    keys: Keys, server: DocumentServer, published_alg: str | None, algorithms: list[str] | None
) -> None:
    key, kid = keys.get(JOSERFC, "RS256")
    jwk = exported(JOSERFC, key, kid)
    if published_alg is not None:
        jwk["alg"] = published_alg
    server.set("/jwks", {"keys": [jwk]})
    verifier = JWTVerifier(
        jwks_url=server.url("/jwks"),
        allow_insecure_loopback=True,
        algorithms=algorithms,
        fetch=FAST,
    )
    try:
        assert verifier.verify(JOSERFC.sign(key, "RS256", kid, PAYLOAD), now=NOW)
        for _ in range(3):
            with pytest.raises(TokenRejectedError) as caught:
                verifier.verify(JOSERFC.sign(key, "PS256", kid, PAYLOAD), now=NOW)
            assert caught.value.reason == "algorithm"
    finally:
        verifier.close()
