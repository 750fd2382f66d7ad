"""Demo material: the canonical payload, a small minter and demo keys.

Product code for the ``demo`` command and the examples; the benchmarks and
the documentation snippets may import it too (product code never imports
test code, so the tests keep their own forge). Nothing here is used to
verify: it only makes tokens to show the verifier at work.

``cryptography`` is imported only when an asymmetric key is made
(:func:`signing_key`, shared with :mod:`grelmicro.jwt.testing`), so the demo
runs without it (HS256 alone).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from grelmicro.jwt._keys import Key
from grelmicro.jwt.errors import ConfigurationError

__all__ = [
    "ALGORITHMS",
    "AUDIENCE",
    "HMAC_ALGORITHMS",
    "ISSUER",
    "JTI",
    "SigningKey",
    "b64url",
    "canonical_payload",
    "mint",
    "mint_hs256",
    "public_key_demos",
    "signing_key",
]

AUDIENCE = "https://api.example.com"
ISSUER = "https://issuer.example.com/"
JTI = "6f1c2d3e-4b5a-4c6d-8e7f-9a0b1c2d3e4f"

#: ``sign(payload) -> token``: one demo key's minter.
Signer = Callable[[dict[str, Any]], str]


def b64url(data: bytes) -> str:
    """Unpadded base64url (RFC 7515 §2)."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def canonical_payload(now: int) -> dict[str, Any]:
    """The 11 claims of the benchmark token (``shared/bench-token.md``), valid for an hour."""
    return {
        "iss": ISSUER,
        "sub": "user-1234567890",
        "aud": AUDIENCE,
        "iat": now,
        "nbf": now,
        "exp": now + 3600,
        "jti": JTI,
        "scope": "read:items write:items",
        "email": "jane.doe@example.com",
        "name": "Jane Doe",
        "roles": ["admin", "user"],
    }


def mint(header: dict[str, Any], payload: dict[str, Any], sign: Callable[[bytes], bytes]) -> str:
    """A compact JWS: compact JSON header and payload, signed by ``sign``."""
    head = b64url(json.dumps(header, separators=(",", ":")).encode())
    body = b64url(json.dumps(payload, separators=(",", ":")).encode())
    signing_input = f"{head}.{body}"
    return f"{signing_input}.{b64url(sign(signing_input.encode()))}"


def mint_hs256(secret: bytes, payload: dict[str, Any], **header: Any) -> str:
    """An HS256 token; ``header`` adds members (``typ``, ``kid``) after ``alg``."""
    return mint(
        {"alg": "HS256", **header},
        payload,
        lambda data: hmac.new(secret, data, hashlib.sha256).digest(),
    )


def public_key_demos() -> list[tuple[str, Key, Signer]]:
    """Fresh RS256, ES256 and EdDSA keys with their minters (empty without ``cryptography``).

    Each key is bound to its algorithm with a ``kid`` (``rsa-1``, ``ec-1``,
    ``ed-1``) that its minter writes in the header, with ``typ: JWT``.
    """
    try:
        keys = [signing_key(alg, kid) for alg, kid in DEMO_KEYS]
    except ConfigurationError:  # no cryptography: the demo runs on HS256 alone
        return []

    def signer(key: SigningKey) -> Signer:
        header = {"alg": key.algorithm, "typ": "JWT", "kid": key.kid}
        return lambda payload: mint(header, payload, key.sign)

    return [(key.algorithm, key.key, signer(key)) for key in keys]


#: The public-key demo: one key per asymmetric family.
DEMO_KEYS = (("RS256", "rsa-1"), ("ES256", "ec-1"), ("EdDSA", "ed-1"))


HMAC_ALGORITHMS = {"HS256": hashlib.sha256, "HS384": hashlib.sha384, "HS512": hashlib.sha512}
#: ECDSA algorithm -> (cryptography curve class, JWK crv, coordinate bytes, hash).
_EC = {
    "ES256": ("SECP256R1", "P-256", 32, "SHA256"),
    "ES384": ("SECP384R1", "P-384", 48, "SHA384"),
    "ES512": ("SECP521R1", "P-521", 66, "SHA512"),
    "ES256K": ("SECP256K1", "secp256k1", 32, "SHA256"),
}
_RSA = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512")
_EDDSA = ("EdDSA", "Ed25519")
#: The algorithms :func:`signing_key` makes keys for.
ALGORITHMS = (*HMAC_ALGORITHMS, *_RSA, *_EC, *_EDDSA)

_NO_CRYPTOGRAPHY = (
    "{alg} test keys need the cryptography package: pip install 'grelmicro[jwt,testing]' "
    "(HS256, HS384 and HS512 work without it)"
)


@dataclass(frozen=True)
class SigningKey:
    """One key of the issuer: how it signs, and how verifiers see it."""

    algorithm: str
    kid: str
    sign: Callable[[bytes], bytes]
    key: Key  # the verification key
    jwk: dict[str, Any] | None  # the public JWK (None for an HMAC secret)
    private: Any  # the cryptography private key, or the HMAC secret (bytes)


def _int_b64(value: int, size: int | None = None) -> str:
    length = size if size is not None else (value.bit_length() + 7) // 8
    return b64url(value.to_bytes(length, "big"))


def _hmac_key(algorithm: str, kid: str) -> SigningKey:
    digest = HMAC_ALGORITHMS[algorithm]
    secret = secrets.token_bytes(digest().digest_size)
    return SigningKey(
        algorithm,
        kid,
        lambda data: hmac.new(secret, data, digest).digest(),
        Key.secret(secret, algorithm, kid=kid),  # type: ignore[arg-type]
        None,
        secret,
    )


def _asymmetric_key(algorithm: str, kid: str) -> SigningKey:
    try:
        from cryptography.hazmat.primitives import hashes  # noqa: PLC0415
        from cryptography.hazmat.primitives.asymmetric import (  # noqa: PLC0415
            ec,
            ed25519,
            padding,
            rsa,
        )
        from cryptography.hazmat.primitives.asymmetric.utils import (  # noqa: PLC0415
            decode_dss_signature,
        )
    except ImportError:
        raise ConfigurationError(_NO_CRYPTOGRAPHY.format(alg=algorithm)) from None

    jwk: dict[str, Any] = {"kid": kid, "alg": algorithm, "use": "sig"}
    private: Any
    sign: Callable[[bytes], bytes]
    if algorithm in _RSA:
        private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        digest = getattr(hashes, f"SHA{algorithm[2:]}")()
        pad: Any = (
            padding.PKCS1v15()
            if algorithm.startswith("RS")
            else padding.PSS(padding.MGF1(digest), digest.digest_size)
        )
        numbers = private.public_key().public_numbers()
        jwk.update(kty="RSA", n=_int_b64(numbers.n), e=_int_b64(numbers.e))

        def sign(data: bytes) -> bytes:
            signature: bytes = private.sign(data, pad, digest)
            return signature

    elif algorithm in _EC:
        curve, crv, size, hash_name = _EC[algorithm]
        private = ec.generate_private_key(getattr(ec, curve)())
        ecdsa = ec.ECDSA(getattr(hashes, hash_name)())
        point = private.public_key().public_numbers()
        jwk.update(kty="EC", crv=crv, x=_int_b64(point.x, size), y=_int_b64(point.y, size))

        def sign(data: bytes) -> bytes:
            r, s = decode_dss_signature(private.sign(data, ecdsa))
            return r.to_bytes(size, "big") + s.to_bytes(size, "big")

    else:
        private = ed25519.Ed25519PrivateKey.generate()
        from cryptography.hazmat.primitives import serialization  # noqa: PLC0415

        raw = private.public_key().public_bytes(
            serialization.Encoding.Raw, serialization.PublicFormat.Raw
        )
        jwk.update(kty="OKP", crv="Ed25519", x=b64url(raw))
        sign = private.sign
    return SigningKey(algorithm, kid, sign, Key.jwk(jwk, algorithm), jwk, private)  # type: ignore[arg-type]


def signing_key(algorithm: str, kid: str) -> SigningKey:
    """A fresh key pair (or HMAC secret) of ``algorithm``: how it signs, how verifiers see it.

    Asymmetric keys need ``cryptography``; without it, a ConfigurationError
    names the extra that brings it.
    """
    if algorithm in HMAC_ALGORITHMS:
        return _hmac_key(algorithm, kid)
    return _asymmetric_key(algorithm, kid)
