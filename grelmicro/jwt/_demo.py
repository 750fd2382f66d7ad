"""Demo material: the canonical payload, a small minter and demo keys.

Product code for the ``demo`` command and the examples; the benchmarks and
the documentation snippets may import it too (product code never imports
test code, so the tests keep their own forge). Nothing here is used to
verify: it only makes tokens to show the verifier at work.

``cryptography`` is imported only by :func:`public_key_demos`, so the demo
runs without it (HS256 alone).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from collections.abc import Callable
from typing import Any

from grelmicro.jwt._config import AlgorithmName
from grelmicro.jwt._keys import Key

__all__ = [
    "AUDIENCE",
    "ISSUER",
    "JTI",
    "b64url",
    "canonical_payload",
    "mint",
    "mint_hs256",
    "public_key_demos",
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
        from cryptography.hazmat.primitives import hashes, serialization  # noqa: PLC0415
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
        return []

    def pem(public: Any) -> bytes:
        result: bytes = public.public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        return result

    rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    ec_key = ec.generate_private_key(ec.SECP256R1())
    ed_key = ed25519.Ed25519PrivateKey.generate()

    def es256(data: bytes) -> bytes:
        r, s = decode_dss_signature(ec_key.sign(data, ec.ECDSA(hashes.SHA256())))
        return r.to_bytes(32, "big") + s.to_bytes(32, "big")

    signers: list[tuple[AlgorithmName, str, Any, Callable[[bytes], bytes]]] = [
        ("RS256", "rsa-1", rsa_key, lambda d: rsa_key.sign(d, padding.PKCS1v15(), hashes.SHA256())),
        ("ES256", "ec-1", ec_key, es256),
        ("EdDSA", "ed-1", ed_key, ed_key.sign),
    ]

    def signer(alg: str, kid: str, sign: Callable[[bytes], bytes]) -> Signer:
        return lambda payload: mint({"alg": alg, "typ": "JWT", "kid": kid}, payload, sign)

    return [
        (alg, Key.pem(pem(private.public_key()), alg, kid=kid), signer(alg, kid, sign))
        for alg, kid, private, sign in signers
    ]
