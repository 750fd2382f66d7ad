"""Mint compact JWS tokens by hand, for the tests.

Nothing here touches ``grelmicro``: headers and payloads are serialised with
:mod:`json`, encoded as base64url without padding and signed with the
standard library (HMAC) or the ``cryptography`` primitives (RSA, ECDSA,
EdDSA), so the verifier is checked against an independent implementation of
RFC 7515. ``cryptography`` is imported only when an asymmetric key is used:
the free-threaded 3.13 build cannot install it (cffi refuses 3.13t), and the
concurrency test must still run there with HMAC keys.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
import json
from dataclasses import dataclass, field
from typing import Any

import pytest

#: A fixed "now" for every test: 2023-11-14T22:13:20Z.
NOW = 1_700_000_000

#: One algorithm per asymmetric family.
ASYMMETRIC = ("RS256", "PS256", "ES256", "EdDSA")

#: A secret nobody would type by accident: tests grep messages and logs for it.
SECRET = b"TOPSECRET-grelmicro-test-hmac-key-0123456789abcdef"

_HMAC_HASHES = {"256": hashlib.sha256, "384": hashlib.sha384, "512": hashlib.sha512}

#: algorithm -> (curve class name in cryptography, JWK crv, coordinate size, hash bits)
_CURVES: dict[str, tuple[str, str, int, str]] = {
    "ES256": ("SECP256R1", "P-256", 32, "256"),
    "ES384": ("SECP384R1", "P-384", 48, "384"),
    "ES512": ("SECP521R1", "P-521", 66, "512"),
    "ES256K": ("SECP256K1", "secp256k1", 32, "256"),
}


def _sha(bits: str) -> Any:
    from cryptography.hazmat.primitives import hashes  # noqa: PLC0415

    return getattr(hashes, f"SHA{bits}")()


def b64url(data: bytes) -> str:
    """Base64url without padding (RFC 7515 §2)."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def compact_json(value: object) -> bytes:
    """JSON text as an issuer would send it: no spaces, UTF-8."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def _int_b64(value: int, length: int | None = None) -> str:
    size = length if length is not None else max(1, (value.bit_length() + 7) // 8)
    return b64url(value.to_bytes(size, "big"))


@dataclass(frozen=True)
class SigningKey:
    """A private key (or HMAC secret) bound to one JWS algorithm."""

    algorithm: str
    material: Any = field(repr=False)
    kid: str | None = None

    def sign(self, signing_input: bytes) -> bytes:
        """The JWS signature of ``signing_input`` for :attr:`algorithm`."""
        alg = self.algorithm
        if alg.startswith("HS"):
            return hmac.new(self.material, signing_input, _HMAC_HASHES[alg[2:]]).digest()

        from cryptography.hazmat.primitives.asymmetric import ec, padding  # noqa: PLC0415
        from cryptography.hazmat.primitives.asymmetric.utils import (  # noqa: PLC0415
            decode_dss_signature,
        )

        if alg.startswith("RS"):
            return self.material.sign(signing_input, padding.PKCS1v15(), _sha(alg[2:]))
        if alg.startswith("PS"):
            digest = _sha(alg[2:])
            pss = padding.PSS(mgf=padding.MGF1(digest), salt_length=digest.digest_size)
            return self.material.sign(signing_input, pss, digest)
        if alg in _CURVES:
            _, _, size, bits = _CURVES[alg]
            der = self.material.sign(signing_input, ec.ECDSA(_sha(bits)))
            r, s = decode_dss_signature(der)
            return r.to_bytes(size, "big") + s.to_bytes(size, "big")
        if alg in {"EdDSA", "Ed25519"}:
            return self.material.sign(signing_input)
        raise ValueError(f"no signer for {alg}")

    def public_pem(self) -> bytes:
        """The public key as SPKI PEM (asymmetric keys only)."""
        from cryptography.hazmat.primitives import serialization  # noqa: PLC0415

        return self.material.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )

    def public_jwk(self) -> dict[str, str]:
        """The public key (or, for HMAC, the secret) as a JWK with ``alg`` and ``kid``."""
        alg = self.algorithm
        jwk: dict[str, str]
        if alg.startswith("HS"):
            jwk = {"kty": "oct", "k": b64url(self.material)}
        elif alg[:2] in {"RS", "PS"}:
            numbers = self.material.public_key().public_numbers()
            jwk = {"kty": "RSA", "n": _int_b64(numbers.n), "e": _int_b64(numbers.e)}
        elif alg in _CURVES:
            _, crv, size, _ = _CURVES[alg]
            numbers = self.material.public_key().public_numbers()
            jwk = {
                "kty": "EC",
                "crv": crv,
                "x": _int_b64(numbers.x, size),
                "y": _int_b64(numbers.y, size),
            }
        else:
            from cryptography.hazmat.primitives import serialization  # noqa: PLC0415

            raw = self.material.public_key().public_bytes(
                serialization.Encoding.Raw, serialization.PublicFormat.Raw
            )
            jwk = {"kty": "OKP", "crv": "Ed25519", "x": b64url(raw)}
        jwk["alg"] = alg
        jwk["use"] = "sig"
        if self.kid is not None:
            jwk["kid"] = self.kid
        return jwk

    def mint(self, claims: dict[str, Any], **header: Any) -> str:
        """A compact JWS over ``claims``; ``header`` adds or overrides members."""
        head: dict[str, Any] = {"alg": self.algorithm, "typ": "JWT"}
        if self.kid is not None:
            head["kid"] = self.kid
        head.update(header)
        head = {name: value for name, value in head.items() if value is not None}
        return self.mint_raw(compact_json(head), compact_json(claims))

    def mint_raw(self, header: bytes, payload: bytes) -> str:
        """A compact JWS over exact header and payload bytes."""
        signing_input = f"{b64url(header)}.{b64url(payload)}".encode("ascii")
        return f"{signing_input.decode('ascii')}.{b64url(self.sign(signing_input))}"


def hmac_key(
    algorithm: str = "HS256", *, secret: bytes = SECRET, kid: str | None = None
) -> SigningKey:
    """An HMAC key; the default secret is :data:`SECRET`."""
    return SigningKey(algorithm, secret, kid)


@functools.cache
def _private(algorithm: str, seed: int) -> Any:
    """One private key per (algorithm family, seed), generated once per session."""
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa  # noqa: PLC0415

    del seed
    if algorithm == "RSA":
        return rsa.generate_private_key(public_exponent=65537, key_size=2048)
    if algorithm == "Ed25519":
        return ed25519.Ed25519PrivateKey.generate()
    return ec.generate_private_key(getattr(ec, _CURVES[algorithm][0])())


def private_key(algorithm: str, *, kid: str | None = None, seed: int = 0) -> SigningKey:
    """A signing key for ``algorithm``; the same ``seed`` gives the same key.

    Asymmetric keys need ``cryptography``; without it the calling test is skipped.
    """
    if algorithm.startswith("HS"):
        secret = SECRET if seed == 0 else hashlib.sha512(b"seed%d" % seed).digest()
        return hmac_key(algorithm, secret=secret, kid=kid)
    pytest.importorskip("cryptography", reason="asymmetric test keys need cryptography")
    if algorithm[:2] in {"RS", "PS"}:
        return SigningKey(algorithm, _private("RSA", seed), kid)
    if algorithm in _CURVES:
        return SigningKey(algorithm, _private(algorithm, seed), kid)
    if algorithm in {"EdDSA", "Ed25519"}:
        return SigningKey(algorithm, _private("Ed25519", seed), kid)
    raise ValueError(f"no key for {algorithm}")


def tamper(token: str) -> str:
    """``token`` with one bit of its signature flipped (still canonical base64url)."""
    head, payload, signature = token.split(".")
    raw = bytearray(base64.urlsafe_b64decode(signature + "=" * (-len(signature) % 4)))
    raw[0] ^= 0x01
    return f"{head}.{payload}.{b64url(bytes(raw))}"


class FakeClock:
    """A clock the test moves by hand."""

    def __init__(self, now: float = NOW) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def token_of_size(key: SigningKey, size: int, claims: dict[str, Any]) -> str:
    """A valid token of exactly ``size`` bytes, padded in a header member and a claim."""
    for header_pad in range(4):
        for claim_pad in range(size):
            token = key.mint({**claims, "pad": "p" * claim_pad}, hp="h" * header_pad)
            if len(token) == size:
                return token
            if len(token) > size:
                break
    raise ValueError(f"cannot mint a token of exactly {size} bytes")


def nested_array(depth: int) -> object:
    """A JSON value ``depth`` arrays deep: ``[[["x"]]]`` for 3."""
    value: object = "x"
    for _ in range(depth):
        value = [value]
    return value
